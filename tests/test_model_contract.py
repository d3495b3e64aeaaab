"""The contract every cost model keeps, built-in, fitted, plugin or combined.

Parametrized over `model_names()` (with the example plugin of
`tests/plugin_example/` installed for this module only, through a temporary
`*.dist-info`) plus a few combination names. For each model and device (a
GPU preset and the measured host):

- it is a frozen dataclass or a scikit-learn estimator, with the
  `CostModel` protocol and its registry name;
- it prices ordinary kernels with finite, positive times, or refuses the
  device kind with a clear `ValueError` (every kernel alike);
- `bound` is one of `BOUNDS` and names the largest part;
- `time_s` follows from the parts by the model's documented rule;
- a memory-bound elementwise kernel takes longer as its bytes grow;
- it is deterministic (the same model twice, and a fresh one);
- `estimate_fusion` gives finite times with priority = unfused − fused.

Fittable models without a usable saved calibration for a device are fitted
on a small slice of the host suite dataset; models that need measurements
that do not exist are skipped with the reason.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path

import pytest

import xla_costmodel as xc
from xla_costmodel.devices import get_device
from xla_costmodel.fit import ScaledModel
from xla_costmodel.models import BOUNDS, CombinedModel, CostModel, CostModelWarning, get_model, model_names
from conftest import load_temp_install

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


TI = load_temp_install()
PLUGINS = tuple(TI.entry_points())
COMBINED = ("min(xla-gpu,roofline)", "max-savings(xla-gpu,roofline)", "scaled-min(roofline,fitted)",
            "max-savings(min(roofline,example-streaming),scaled(roofline))")
# model_names() as it reads with the example plugin installed (checked by test_parametrization_is_model_names).
NAMES = tuple(dict.fromkeys(model_names() + PLUGINS))
ALL = NAMES + COMBINED
DEVICES = ("h100-sxm", "host")

# Contract violations of existing models, found by this test (see the report in the tests' history).


@pytest.fixture(scope="module", autouse=True)
def example_plugin(tmp_path_factory):
    with TI.installed(tmp_path_factory.mktemp("plugins")) as names:
        yield names


# --------------------------------------------------------------------------- kernels


def _module(body: str, extra: str = "") -> "xc.HloModule":
    return xc.parse_hlo(f"HloModule t\n{extra}\nENTRY e {{\n{body}\n}}")


def _elementwise(n: int):
    return _module(f"  a = f32[{n}]{{0}} parameter(0)\n  b = f32[{n}]{{0}} parameter(1)\n"
                   f"  ROOT c = f32[{n}]{{0}} add(a, b)").entry.root


_SUM = "add_f32 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}"


def _ordinary_kernels():
    ks = {
        "add": _elementwise(1 << 20),
        "exp": _module("  a = f32[4096,256]{1,0} parameter(0)\n"
                       "  ROOT e = f32[4096,256]{1,0} exponential(a)").entry.root,
        "reduce": _module("  a = f32[512,1024]{1,0} parameter(0)\n  z = f32[] constant(0)\n"
                          "  ROOT r = f32[512]{0} reduce(a, z), dimensions={1}, to_apply=add_f32", _SUM).entry.root,
        "dot": _module("  a = f32[256,256]{1,0} parameter(0)\n  b = f32[256,256]{1,0} parameter(1)\n"
                       "  ROOT d = f32[256,256]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"
                       ).entry.root,
        "transpose": _module("  a = f32[512,1024]{1,0} parameter(0)\n"
                             "  ROOT t = f32[1024,512]{1,0} transpose(a), dimensions={1,0}").entry.root,
        "broadcast": _module("  a = f32[1024]{0} parameter(0)\n"
                             "  ROOT b = f32[1024,1024]{1,0} broadcast(a), dimensions={1}").entry.root,
        "convert": _module("  a = f32[1024,1024]{1,0} parameter(0)\n"
                           "  ROOT c = bf16[1024,1024]{1,0} convert(a)").entry.root,
    }
    # loop fusions as XLA made them (committed fixture)
    mod = xc.load_hlo(ROOT / "hlo_fixtures" / "layernorm_softmax.post.hlo")
    for i in mod.entry.instructions:
        if i.opcode == "fusion" and i.fusion_kind == "kLoop":
            ks[f"layernorm_softmax:{i.name}"] = i
    return ks


KERNELS = _ordinary_kernels()

_PAIRS_HLO = """HloModule pairs
ENTRY e {
  a = f32[1024,1024]{1,0} parameter(0)
  b = f32[1024,1024]{1,0} parameter(1)
  v = f32[1024]{0} parameter(2)
  x = f32[1024,1024]{1,0} add(a, b)
  y = f32[1024,1024]{1,0} multiply(x, b)
  bc = f32[1024,1024]{1,0} broadcast(v), dimensions={1}
  m = f32[1024,1024]{1,0} multiply(bc, y)
  e1 = f32[1024,1024]{1,0} exponential(m)
  e2 = f32[1024,1024]{1,0} negate(m)
  ROOT t = (f32[1024,1024]{1,0}, f32[1024,1024]{1,0}) tuple(e1, e2)
}"""


def _pairs():
    c = xc.parse_hlo(_PAIRS_HLO).entry
    i = c.instruction
    # elementwise into elementwise; broadcast into elementwise; one producer into two consumers
    return {"add->multiply": (i("x"), [i("y")]), "broadcast->multiply": (i("bc"), [i("m")]),
            "multiply->(exp,negate)": (i("m"), [i("e1"), i("e2")])}


PAIRS = _pairs()

# --------------------------------------------------------------------------- models on devices


def _is_calibration_error(exc: BaseException) -> bool:
    return any(t.__name__ == "CalibrationError" for t in type(exc).__mro__)


@pytest.fixture(scope="module")
def small_dataset():
    """Every 8th kernel of the host suite (calibration/host_cpu.parquet), parsed and featurized."""
    from xla_costmodel.features._prepare import prepare
    from xla_costmodel.measure import read_dataset

    df = read_dataset(ROOT / "calibration" / "host_cpu.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return prepare(df.iloc[::8], get_device("host"))


def _fit_small(model, prep):
    from xla_costmodel.compare._compare import _fit

    return _fit(model, prep, get_device("host"))


_USABLE: dict = {}


def _probe(model, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)
        model.estimate(KERNELS["add"], device)


def _with_calibration(model, dev, prep):
    """`model`, or a copy whose fittable parts without a usable saved calibration are fitted on `prep`."""
    try:
        _probe(model, dev)
        return model
    except ValueError as exc:
        if not _is_calibration_error(exc):
            raise
        if hasattr(model, "fit"):
            return _fit_small(model, prep)
        if isinstance(model, CombinedModel):
            members = tuple(_try_calibration(m, dev, prep) for m in model.models)
            if any(a is not b for a, b in zip(members, model.models)):
                return dataclasses.replace(model, models=members)
        if isinstance(model, ScaledModel):
            inner = _try_calibration(model.model, dev, prep)
            if inner is not model.model:
                return dataclasses.replace(model, model=inner)
        raise


def _try_calibration(model, dev, prep):
    try:
        return _with_calibration(model, dev, prep)
    except ValueError as exc:
        if _is_calibration_error(exc):
            return model  # e.g. a scale with no measurements for this device: the caller skips
        raise


@pytest.fixture
def usable(small_dataset):
    """`usable(name, device)` -> (model, how) or ("refused", ValueError); skips when no calibration can be had.

    A model without a usable saved calibration for the device (none, or a
    stale one) is fitted on every 8th kernel of the host suite; `how` says so.
    """

    def get(name: str, device_name: str):
        key = (name, device_name)
        if key not in _USABLE:
            dev = get_device(device_name)
            model = get_model(name)
            try:
                _probe(model, dev)
                _USABLE[key] = (model, "as registered")
            except ValueError as exc:
                if not _is_calibration_error(exc):
                    _USABLE[key] = ("refused", exc)
                else:
                    try:
                        fitted = _with_calibration(model, dev, small_dataset)
                        _probe(fitted, dev)
                        _USABLE[key] = (fitted, f"fitted on {len(small_dataset.y)} host kernels ({exc})")
                    except ValueError as exc2:
                        if not _is_calibration_error(exc2):
                            raise
                        _USABLE[key] = ("skip", f"{name} needs measurements that do not exist for "
                                                f"{device_name}: {exc2}")
        model, how = _USABLE[key]
        if model == "skip":
            pytest.skip(how)
        return model, how

    return get


def _estimate(model, kernel, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)
        return model.estimate(kernel, device)


def _for_device(usable, name, device_name):
    model, how = usable(name, device_name)
    if model == "refused":
        pytest.skip(f"{name} refuses {device_name} (checked in test_refusal_is_a_clear_error): {how}")
    return model


# --------------------------------------------------------------------------- the rules


def _rule_of(model, device=None):
    """(rule name, function(estimate) -> expected time_s, or None for the envelope check).

    The rules are the ones each model documents: `roofline` and `xla-gpu` in
    their module docstrings, `fitted` (a sum of feature contributions grouped
    into the three parts, at least `TIME_FLOOR_S`), `learned` (parts split so
    that they add up), `*-calibrated` (the base model's rule with fitted
    constants), plugins by `time_from_parts` when they have it.
    """
    from xla_costmodel.models import RooflineModel, XlaGpuModel

    if isinstance(model, ScaledModel):  # scaling keeps the base model's rule (one factor on every part)
        return _rule_of(model.model, device)
    if type(model).__name__ == "AnalyticalOnDevice":
        return _rule_of(model.model, device)
    if type(model).__name__ == "LearnedModel" and device is not None:
        fitted = model._fitted_for(get_device(device) if isinstance(device, str) else device)
        if type(fitted).__name__ == "EfficiencyModel":  # a learned factor on every part of the base model's
            return _rule_of(get_model(fitted.base), device)
    if type(model).__name__ == "CalibratedModel" and device is not None and hasattr(model, "_model_for"):
        return _rule_of(model._model_for(device).model, device)  # the base model with the fitted constants
    if isinstance(model, RooflineModel):
        return "max(compute, memory) + launch", lambda e: max(e.compute_s, e.memory_s) + e.launch_s
    if isinstance(model, XlaGpuModel):
        p = model.memory_compute_parallelism
        return (f"compute + memory - {p}·min(compute, memory) + launch",
                lambda e: e.compute_s + e.memory_s - p * min(e.compute_s, e.memory_s) + e.launch_s)
    cls = type(model).__name__
    if cls == "FittedModel":
        return "compute + memory + launch (at least 1 ns)", lambda e: max(e.compute_s + e.memory_s + e.launch_s, 1e-9)
    if cls == "LearnedModel":
        return "compute + memory + launch", lambda e: e.compute_s + e.memory_s + e.launch_s
    if hasattr(model, "time_from_parts"):
        return "the model's time_from_parts", lambda e: model.time_from_parts(e.compute_s, e.memory_s, e.launch_s)
    # Undocumented: what every overlap rule gives, max(compute, memory) + launch <= time <= the sum.
    return "overlap envelope", None


def _check_rule(model, e, where: str, device=None, path=None):
    if isinstance(model, CombinedModel):
        if path is None:  # the outermost combination: details name its choice first
            path = list(e.details.get("chosen", ()))
            assert path and path[0] == e.details.get("model"), f"{where}: details {e.details.get('model')!r}, {path!r}"
        label = path[0] if path else None
        members = dict(zip(model.labels, model.members))
        assert label in members, f"{where}: details['chosen'] = {path!r} names no member of {model.name}"
        return _check_rule(members[label], e, f"{where} (chosen member {label})", device, path[1:])
    rule, f = _rule_of(model, device)
    tol = 1e-9 * e.time_s + 1e-15
    if "min(compute, memory)" in rule:
        # XLA's model rounds every term to absl::Duration's quarter nanosecond (then maybe scaled)
        tol += 0.5e-9 * max(1.0, float(e.details.get("scale", 1.0)))
    if f is None:
        lo, hi = max(e.compute_s, e.memory_s) + e.launch_s, e.compute_s + e.memory_s + e.launch_s
        assert lo - tol - 0.5e-9 <= e.time_s <= hi + tol + 0.5e-9, f"{where}: time {e.time_s} outside [{lo}, {hi}] ({rule})"
    else:
        want = f(e)
        assert abs(e.time_s - want) <= tol, f"{where}: time {e.time_s} != {want} by the rule {rule}"


# --------------------------------------------------------------------------- tests


def test_parametrization_is_model_names():
    # every name model_names() gave at collection, plus the installed example plugin, is checked here
    missing = set(NAMES) - set(model_names())
    assert not missing, f"not in model_names() with the example plugin installed: {missing}"
    for p in PLUGINS:
        assert p in model_names()


@pytest.mark.parametrize("name", ALL)
def test_frozen_dataclass_or_sklearn_estimator(name):
    from sklearn.base import BaseEstimator, clone

    m = get_model(name)
    assert isinstance(m, CostModel)
    assert m.name == name
    frozen = dataclasses.is_dataclass(m) and m.__dataclass_params__.frozen
    estimator = isinstance(m, BaseEstimator)
    assert frozen or estimator, f"{name}: {type(m).__name__} is neither a frozen dataclass nor a scikit-learn estimator"
    if frozen:
        f = dataclasses.fields(m)[0]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(m, f.name, getattr(m, f.name))
        hash(m)
    else:
        assert clone(m).get_params() == m.get_params()


@pytest.mark.parametrize("device_name", DEVICES)
@pytest.mark.parametrize("name", ALL)
def test_refusal_is_a_clear_error(usable, name, device_name):
    """A model refuses a device kind with a ValueError naming the device, for every kernel and for fusions."""
    model, how = usable(name, device_name)
    dev = get_device(device_name)
    if model != "refused":
        return
    msg = str(how)
    assert dev.name in msg or f"a {dev.kind}" in msg, f"{name} refuses {dev.name} without saying which device: {msg}"
    for k in KERNELS.values():
        with pytest.raises(ValueError):
            _estimate(get_model(name), k, dev)
    p, cs = PAIRS["add->multiply"]
    with pytest.raises(ValueError):
        get_model(name).estimate_fusion(p, cs, dev)
    # it must price some device
    other = [d for d in DEVICES if d != device_name]
    assert any(usable(name, d)[0] != "refused" for d in other), f"{name} refuses every device"


@pytest.mark.parametrize("device_name", DEVICES)
@pytest.mark.parametrize("name", ALL)
def test_ordinary_kernels_finite_positive_bound_and_rule(usable, name, device_name):
    model = _for_device(usable, name, device_name)
    dev = get_device(device_name)
    tiny_negative = []
    for kname, k in KERNELS.items():
        where = f"{name} on {device_name}, kernel {kname}"
        e = _estimate(model, k, dev)
        assert e.priced, f"{where}: unpriced ({e.note})"
        assert math.isfinite(e.time_s) and e.time_s > 0, f"{where}: time {e.time_s}"
        for part in ("compute_s", "memory_s", "launch_s"):
            v = getattr(e, part)
            assert math.isfinite(v) and v >= -1e-12 * e.time_s, f"{where}: {part} = {v}"
            if v < 0:  # rounding noise, but a time is never negative: reported after the other checks
                tiny_negative.append(f"{where}: {part} = {v}")
        assert e.bound in BOUNDS and e.bound not in ("unknown", "free"), f"{where}: bound {e.bound!r}"
        named = {"compute": e.compute_s, "memory": e.memory_s, "launch": e.launch_s}[e.bound]
        assert named >= max(e.compute_s, e.memory_s, e.launch_s) * (1 - 1e-9), f"{where}: bound {e.bound} is not the largest part"
        _check_rule(model, e, where, dev)
    assert not tiny_negative, "negative parts: " + "; ".join(tiny_negative)


@pytest.mark.parametrize("device_name", DEVICES)
@pytest.mark.parametrize("name", ALL)
def test_memory_bound_elementwise_grows_with_bytes(usable, name, device_name):
    model = _for_device(usable, name, device_name)
    dev = get_device(device_name)
    sizes = (1 << 16, 1 << 20, 1 << 23, 1 << 25)  # 768 KiB to 384 MiB moved
    times = [_estimate(model, _elementwise(n), dev).time_s for n in sizes]
    assert all(b > a for a, b in zip(times, times[1:])), f"{name} on {device_name}: {dict(zip(sizes, times))}"


@pytest.mark.parametrize("device_name", DEVICES)
@pytest.mark.parametrize("name", ALL)
def test_deterministic(usable, name, device_name):
    model, how = usable(name, device_name)
    if model == "refused":
        pytest.skip(f"{name} refuses {device_name}")
    dev = get_device(device_name)
    fresh = get_model(name) if how == "as registered" else None
    for kname, k in list(KERNELS.items())[:6]:
        a, b = _estimate(model, k, dev), _estimate(model, k, dev)
        fields = lambda e: (e.compute_s, e.memory_s, e.launch_s, e.time_s, e.bound, e.note)  # noqa: E731
        assert fields(a) == fields(b), f"{name} on {device_name}, {kname}: {a} != {b}"
        if fresh is not None:
            c = _estimate(fresh, k, dev)
            assert fields(a) == fields(c), f"{name} on {device_name}, {kname}: a fresh model gives {c}, not {a}"
    p, cs = PAIRS["add->multiply"]
    f1, f2 = model.estimate_fusion(p, cs, dev), model.estimate_fusion(p, cs, dev)
    assert (f1.time_unfused_s, f1.time_fused_s) == (f2.time_unfused_s, f2.time_fused_s)


@pytest.mark.parametrize("device_name", DEVICES)
@pytest.mark.parametrize("name", ALL)
def test_estimate_fusion_finite_with_priority_unfused_minus_fused(usable, name, device_name):
    from xla_costmodel.models import FusionEstimate

    model = _for_device(usable, name, device_name)
    dev = get_device(device_name)
    for pname, (p, cs) in PAIRS.items():
        where = f"{name} on {device_name}, {pname}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CostModelWarning)
            fe = model.estimate_fusion(p, cs, dev)
        assert isinstance(fe, FusionEstimate), where
        assert math.isfinite(fe.time_unfused_s) and fe.time_unfused_s > 0, f"{where}: unfused {fe.time_unfused_s}"
        assert math.isfinite(fe.time_fused_s) and fe.time_fused_s > 0, f"{where}: fused {fe.time_fused_s}"
        assert fe.priority_s == fe.time_unfused_s - fe.time_fused_s
        assert math.isfinite(fe.priority_s)
        if math.isfinite(fe.producer_s):  # a model that splits its price by kernel: the parts add up
            assert len(fe.consumers_s) == len(fe.fused_consumers_s) == len(cs), where
            assert fe.time_unfused_s == pytest.approx(fe.producer_s + sum(fe.consumers_s), rel=1e-9), where
            assert fe.time_fused_s == pytest.approx(sum(fe.fused_consumers_s), rel=1e-9), where

