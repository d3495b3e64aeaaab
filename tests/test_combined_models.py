"""Combined cost models (XLA's cost-model RFC, openxla/xla discussion #10065): numbers worked by hand.

The RFC's rules: priority = min_i(unfused_i) − min_i(fused_i) ("min"), or
max_i(unfused_i − fused_i) ("max-savings"); a linear regression in log
space puts models on one scale first ("scaled-").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import xla_costmodel as xc
from xla_costmodel.devices import get_device
from xla_costmodel.models import (
    CombinedModel,
    CostModel,
    FusionEstimate,
    KernelEstimate,
    RooflineModel,
    XlaGpuModel,
    get_model,
)
from xla_costmodel.fit import ScaledModel
from xla_costmodel.fit._scaled import fit_log_scale, measured_kernels
from conftest import ADD

H100 = get_device("h100-sxm")
NAN = math.nan

PAIR = """HloModule t
ENTRY e {
  a = f32[1024,1024]{1,0} parameter(0)
  b = f32[1024,1024]{1,0} parameter(1)
  x = f32[1024,1024]{1,0} add(a, b)
  ROOT y = f32[1024,1024]{1,0} multiply(x, b)
}"""


def _root(text):
    return xc.parse_hlo(text).entry.root


@dataclass(frozen=True)
class Toy:
    """A member with fixed answers: `kernel_s` for every kernel (NaN: unpriced), fixed fusion times."""

    name: str
    kernel_s: float
    unfused_s: float = NAN
    fused_s: float = NAN

    def estimate(self, kernel, device):
        if math.isnan(self.kernel_s):
            return KernelEstimate.unpriced(f"{self.name} cannot")
        return KernelEstimate(compute_s=self.kernel_s, memory_s=0.0, launch_s=0.0, time_s=self.kernel_s,
                              bound="compute", details={"toy": self.name})

    def estimate_fusion(self, producer, consumers, device):
        return FusionEstimate(time_unfused_s=self.unfused_s, time_fused_s=self.fused_s)


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    "spelled, name, rule, scaled",
    [
        ("min(xla-gpu,roofline)", "min(xla-gpu,roofline)", "min", False),
        (" min( roofline , xla-gpu ) ", "min(roofline,xla-gpu)", "min", False),
        ("max-savings(xla-gpu,roofline)", "max-savings(xla-gpu,roofline)", "max-savings", False),
        ("scaled-min(roofline,fitted)", "scaled-min(roofline,fitted)", "min", True),
        ("scaled-max-savings(roofline,xla-gpu)", "scaled-max-savings(roofline,xla-gpu)", "max-savings", True),
    ],
)
def test_names_are_parsed_by_get_model(spelled, name, rule, scaled):
    m = get_model(spelled)
    assert isinstance(m, CombinedModel) and isinstance(m, CostModel)
    assert (m.name, m.rule, m.scaled) == (name, rule, scaled)
    assert get_model(m.name).name == m.name  # the name round-trips
    if "fitted" not in spelled:  # sklearn estimators compare by identity
        assert get_model(m.name) == m
    assert dataclasses.is_dataclass(m)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.rule = "min"  # type: ignore[misc]
    if scaled:
        assert all(isinstance(x, ScaledModel) for x in m.members)


def test_nested_names_and_scaled():
    m = get_model("max-savings(min(xla-gpu,roofline),scaled(roofline))")
    assert m.name == "max-savings(min(xla-gpu,roofline),scaled(roofline))"
    inner, sc = m.models
    assert isinstance(inner, CombinedModel) and inner.rule == "min"
    assert isinstance(sc, ScaledModel) and isinstance(sc.model, RooflineModel)
    assert get_model("scaled(roofline)", log_offset=0.5).log_offset == 0.5


@pytest.mark.parametrize(
    "bad, message",
    [
        ("min(roofline", r"expected ',' or '\)', found the end at column 13"),
        ("min(roofline,)", r"expected a model name, found '\)' at column 14"),
        ("mean(roofline,xla-gpu)", r"unknown combination 'mean' at column 1"),
        ("min(roofline)x", r"unexpected 'x' at column 14"),
        ("scaled(roofline,xla-gpu)", r"'scaled' takes one model, got 2 at column 1"),
        ("min(roofline,no-such-model)", r"at column 14: unknown cost model 'no-such-model'; valid names: .*roofline"),
    ],
)
def test_bad_names_say_where(bad, message):
    with pytest.raises(ValueError, match=message):
        get_model(bad)


def test_bad_construction():
    with pytest.raises(ValueError, match="unknown combination rule 'mean'"):
        CombinedModel(("roofline",), rule="mean")
    with pytest.raises(ValueError, match="at least one model"):
        CombinedModel(())
    with pytest.raises(ValueError, match="scales are for scaled combinations"):
        CombinedModel(("roofline", "xla-gpu"), scales=((0.0, 1.0), (0.0, 1.0)))
    with pytest.raises(ValueError, match="1 scales for 2 models"):
        CombinedModel(("roofline", "xla-gpu"), scaled=True, scales=((0.0, 1.0),))


# --------------------------------------------------------------------------- kernels


def test_estimate_is_the_fastest_member_with_its_parts():
    add = _root(ADD)
    roof = RooflineModel().estimate(add, H100)
    xgpu = XlaGpuModel().estimate(add, H100)
    # roofline by hand: 12 MiB / 3.35232e12 B/s + 1 us launch
    assert roof.time_s == pytest.approx(4.7534937e-6, rel=1e-6)
    m = get_model("min(xla-gpu,roofline)")
    e = m.estimate(add, H100)
    best, label = (roof, "roofline") if roof.time_s < xgpu.time_s else (xgpu, "xla-gpu")
    assert e.time_s == best.time_s
    assert (e.compute_s, e.memory_s, e.launch_s, e.bound) == (best.compute_s, best.memory_s, best.launch_s, best.bound)
    assert e.details["model"] == label
    assert e.details["times_by_model"] == {"xla-gpu": xgpu.time_s, "roofline": roof.time_s}
    # the chosen member's details come along (analyze reads flops and bytes from them)
    assert e.details["bytes_accessed"] == best.details["bytes_accessed"]


def test_estimate_by_hand_with_toy_members():
    k = _root(ADD)
    m = CombinedModel((Toy("a", 3e-6), Toy("b", 2e-6), Toy("c", 2e-6)))
    e = m.estimate(k, H100)
    assert e.time_s == 2e-6 and e.details["model"] == "b"  # ties go to the first
    assert e.details["toy"] == "b"
    # a member that cannot price the kernel is left out of the minimum, and said so
    e = CombinedModel((Toy("a", NAN), Toy("b", 5e-6))).estimate(k, H100)
    assert e.time_s == 5e-6 and e.details["model"] == "b" and "not priced by a (a cannot)" in e.note
    e = CombinedModel((Toy("a", NAN), Toy("b", NAN))).estimate(k, H100)
    assert not e.priced and "no member of min(a,b) can price it" in e.note


def test_repeated_members_and_nested_choices():
    k = _root(ADD)
    m = CombinedModel((RooflineModel(), RooflineModel(include_launch=False)))
    assert m.name == "min(roofline,roofline)" and m.labels == ("roofline", "roofline#2")
    e = m.estimate(k, H100)
    # without the 1 us launch: 12 MiB / 3.35232e12 B/s
    assert e.details["model"] == "roofline#2" and e.time_s == pytest.approx(3.7534937e-6, rel=1e-6)
    p = xc.parse_hlo(PAIR).entry
    assert len(m.estimate_fusion_by_model(p.instruction("x"), [p.instruction("y")], H100)) == 2
    nested = CombinedModel((CombinedModel((Toy("a", 3e-6), Toy("b", 1e-6))), Toy("c", 2e-6)))
    e = nested.estimate(k, H100)
    assert e.time_s == 1e-6 and e.details["model"] == "min(a,b)" and e.details["chosen"] == ("min(a,b)", "b")
    assert e.details["times_by_model"] == {"min(a,b)": 1e-6, "c": 2e-6}


def test_a_member_that_refuses_the_device_makes_the_combination_refuse_it():
    host = get_device("host")
    m = get_model("min(roofline,xla-gpu)")
    with pytest.raises(ValueError, match="device 'host' is a cpu") as info:
        m.estimate(_root(ADD), host)
    assert any("member 'xla-gpu'" in n and "min(roofline,xla-gpu)" in n for n in info.value.__notes__)
    with pytest.raises(ValueError, match="device 'host' is a cpu"):
        xc.analyze(ADD, device="host", model="min(roofline,xla-gpu)")


def test_analyze_by_name():
    names = ("xla-gpu", "roofline")
    # A module XLA:GPU optimized, priced on the GPU it was compiled for (no BackendMismatchWarning).
    gpu_module = "hlo_fixtures/gpu_h100/jax_ops_segment_sum@small.post.hlo.gz"
    tables = {n: xc.analyze(gpu_module, device="h100-sxm", model=n) for n in names}
    t = xc.analyze(gpu_module, device="h100-sxm", model="min(xla-gpu,roofline)")
    assert t.model_name == "min(xla-gpu,roofline)"
    k = t["bound"] != "free"
    expect = np.minimum(tables["xla-gpu"]["time_s"][k].to_numpy(), tables["roofline"]["time_s"][k].to_numpy())
    np.testing.assert_array_equal(t["time_s"][k].to_numpy(), expect)
    assert t.total_time_s <= min(tb.total_time_s for tb in tables.values())


# --------------------------------------------------------------------------- fusion


@pytest.mark.parametrize(
    "members, min_priority, max_savings_priority",
    [
        # A: 10 -> 6 (saves 4); B: 8 -> 7 (saves 1). min: 8 - 6 = 2; max-savings: 4
        (((10, 6), (8, 7)), 2, 4),
        # A: 10 -> 9 (saves 1); B: 5 -> 6 (costs 1). min: 5 - 6 = -1 (don't fuse); max-savings: 1 (fuse)
        (((10, 9), (5, 6)), -1, 1),
        # a member that cannot price a side is left out of that side
        (((10, NAN), (8, 7)), 1, 1),
        (((NAN, NAN), (NAN, NAN)), NAN, NAN),
    ],
)
def test_fusion_rules_by_hand(members, min_priority, max_savings_priority):
    p = xc.parse_hlo(PAIR).entry
    x, y = p.instruction("x"), p.instruction("y")
    toys = tuple(Toy(f"m{i}", 1e-6, u * 1e-6, f * 1e-6) for i, (u, f) in enumerate(members))
    for rule, want in (("min", min_priority), ("max-savings", max_savings_priority)):
        fe = CombinedModel(toys, rule=rule).estimate_fusion(x, [y], H100)
        assert math.isnan(fe.producer_s)  # the rules do not split by kernel
        if math.isnan(want):
            assert math.isnan(fe.priority_s)
        else:
            assert fe.priority_s == pytest.approx(want * 1e-6, abs=1e-18)
            assert fe.priority_s == fe.time_unfused_s - fe.time_fused_s


def test_fusion_rules_on_real_members():
    p = xc.parse_hlo(PAIR).entry
    x, y = p.instruction("x"), p.instruction("y")
    by = {n: get_model(n).estimate_fusion(x, [y], H100) for n in ("xla-gpu", "roofline")}
    fe = get_model("min(xla-gpu,roofline)").estimate_fusion(x, [y], H100)
    assert fe.time_unfused_s == min(f.time_unfused_s for f in by.values())
    assert fe.time_fused_s == min(f.time_fused_s for f in by.values())
    fe = get_model("max-savings(xla-gpu,roofline)").estimate_fusion(x, [y], H100)
    assert fe.priority_s == max(f.priority_s for f in by.values())
    assert fe.priority_s > 0  # fusing an elementwise producer into its one consumer saves a launch and 4 MiB
    assert get_model("min(xla-gpu,roofline)").estimate_fusion_by_model(x, [y], H100) == by


def test_simulate_fusion_by_name():
    for name in ("min(xla-gpu,roofline)", "max-savings(xla-gpu,roofline)"):
        r = xc.simulate_fusion("hlo_fixtures/mlp_fwd.pre.hlo", device="h100-sxm", model=name)
        assert r.model == name
        assert r.kernels_after < r.kernels_before and r.time_after_s < r.time_before_s
        # the pass ranks by the combination's rule: its first step is priced as estimate_fusion prices it
        module = xc.parse_hlo(PAIR)
        r = xc.simulate_fusion(module, device="h100-sxm", model=name)
        step = r.steps.iloc[0]
        assert (step["producer"], step["consumers"]) == ("x", "y")
        x, y = module.entry.instruction("x"), module.entry.instruction("y")
        fe = get_model(name).estimate_fusion(x, [y], H100)
        assert step["time_unfused_s"] == pytest.approx(fe.time_unfused_s, rel=1e-12)
        assert step["time_fused_s"] == pytest.approx(fe.time_fused_s, rel=1e-12)
        # the pass keeps priorities in absl::Duration's quarter nanoseconds, as XLA does
        assert step["priority_s"] == pytest.approx(fe.priority_s, abs=0.25e-9)
        assert r.kernels_after == 1


FIXTURES = Path(__file__).resolve().parents[1] / "hlo_fixtures"


@pytest.mark.parametrize("name", ["min(xla-gpu,roofline)", "max-savings(xla-gpu,roofline)",
                                  "min(min(xla-gpu,roofline),roofline)"])
@pytest.mark.parametrize("rewrites", [{}, {"gemm_rewrites": True, "triton_softmax": True}], ids=["plain", "rewrites"])
@pytest.mark.parametrize("source", ["rng.pre.hlo", "gather_scatter.pre.hlo", "transformer_grad.pre.hlo"])
def test_the_pass_prices_a_combination_per_member_pair_with_the_same_result(name, source, rewrites, monkeypatch):
    """The fusion pass prices each member's pairs (kept per version, as for the member alone) and combines
    them per producer by the combination's rule: the same steps and fused module as pricing every producer
    with the combination's `estimate_fusion`. A member that is itself a combination cannot be split by
    pair: then the whole combination is priced per producer."""
    import gzip

    from xla_costmodel.fusion import _priority

    path = FIXTURES / source
    text = gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()
    member_pairs = {"n": 0}
    real = _priority._PairPricing.triple

    def counted(self, producer, consumer, *, member=False):
        v = real(self, producer, consumer, member=member)
        member_pairs["n"] += member and v is not None
        return v

    def run():
        r = xc.simulate_fusion(xc.parse_hlo(text), device="h100-sxm", model=name, price_totals=False,
                               **rewrites)
        return r.module.to_text(), r.steps

    with monkeypatch.context() as m:
        m.setattr(_priority._PairPricing, "triple", counted)
        by_pair_text, by_pair_steps = run()
    with monkeypatch.context() as m:
        # No pair prices: every producer priced by the combination's estimate_fusion (each member's,
        # combined by the rule; a pair with a generic Triton fusion priced by each member as the Triton
        # fusion it becomes, `_priority.PriorityFusionRun._whole_times`).
        m.setattr(_priority._PairPricing, "triple", lambda self, producer, consumer, *, member=False: None)
        m.setattr(_priority.PriorityFusionRun, "_triton_pair",
                  lambda self, producer, consumer: setattr(self, "incremental", False))
        whole_text, whole_steps = run()
    assert by_pair_text == whole_text
    assert by_pair_steps.equals(whole_steps)
    assert len(by_pair_steps) > 0
    if name.startswith("min(min"):
        assert member_pairs["n"] == 0  # the inner combination gives no pair price: priced per producer
    else:
        assert member_pairs["n"] >= len(by_pair_steps)  # members priced by pair, combined per producer


# --------------------------------------------------------------------------- scale


def test_fit_log_scale_by_hand():
    # measured = 2 x predicted: a = log 2, b = 1
    a, b, n = fit_log_scale([1e-6, 2e-6, 4e-6], [2e-6, 4e-6, 8e-6])
    assert (a, b, n) == (pytest.approx(math.log(2)), 1.0, 3)
    # scale only: a = mean(log(m / p)) = (log 4 + log 1) / 2 = log 2
    a, b, n = fit_log_scale([1.0, 1.0, NAN, 0.0], [4.0, 1.0, 1.0, 1.0])
    assert (a, b, n) == (pytest.approx(math.log(2)), 1.0, 2)
    # measured = 3 * predicted^0.5 exactly
    p = np.array([1e-6, 1e-4, 1e-2])
    a, b, n = fit_log_scale(p, 3 * p**0.5, fit_slope=True)
    assert a == pytest.approx(math.log(3)) and b == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no kernel"):
        fit_log_scale([NAN], [1.0])
    with pytest.raises(ValueError, match="at least 2 kernels with different predicted times"):
        fit_log_scale([1.0, 1.0], [1.0, 2.0], fit_slope=True)


def test_scaled_model_scales_every_part():
    add = _root(ADD)
    base = RooflineModel().estimate(add, H100)
    s = ScaledModel("roofline", log_offset=math.log(0.5))
    e = s.estimate(add, H100)
    assert s.name == "scaled(roofline)"
    assert e.time_s == pytest.approx(0.5 * base.time_s, rel=1e-12)
    for part in ("compute_s", "memory_s", "launch_s"):
        assert getattr(e, part) == pytest.approx(0.5 * getattr(base, part), rel=1e-12)
    assert e.time_s == pytest.approx(max(e.compute_s, e.memory_s) + e.launch_s, rel=1e-12)  # the roofline's rule
    assert e.details["unscaled_s"] == base.time_s and e.details["scale"] == pytest.approx(0.5)
    # free instructions stay free
    assert s.estimate(xc.parse_hlo(ADD).entry.instruction("a"), H100).bound == "free"
    # fusion: every time halved, per kernel
    p = xc.parse_hlo(PAIR).entry
    fb = RooflineModel().estimate_fusion(p.instruction("x"), [p.instruction("y")], H100)
    fs = s.estimate_fusion(p.instruction("x"), [p.instruction("y")], H100)
    assert fs.time_unfused_s == pytest.approx(0.5 * fb.time_unfused_s)
    assert fs.time_fused_s == pytest.approx(0.5 * fb.time_fused_s)
    assert fs.producer_s == pytest.approx(0.5 * fb.producer_s)
    # with a slope, each kernel on its own: t' = e^a t^b
    s2 = ScaledModel("roofline", log_offset=1.0, log_slope=0.9)
    fs2 = s2.estimate_fusion(p.instruction("x"), [p.instruction("y")], H100)
    f = lambda t: math.exp(1.0 + 0.9 * math.log(t))  # noqa: E731
    assert fs2.time_unfused_s == pytest.approx(f(fb.producer_s) + f(fb.consumers_s[0]))
    assert fs2.time_fused_s == pytest.approx(f(fb.fused_consumers_s[0]))


@pytest.fixture(scope="module")
def small_host_dataset():
    """Every 8th kernel row of the host suite dataset, with its measured seconds computed here."""
    from xla_costmodel.measure import read_dataset

    df = read_dataset(Path(__file__).resolve().parent.parent / "calibration" / "host_cpu.parquet")
    df = df[(df["min_per_run_s"] > 0) & (df["hlo_text"].fillna("").str.len() > 0)].iloc[::8]
    return df


def test_scale_fitted_to_measured_times(small_host_dataset):
    df = small_host_dataset
    host = get_device("host")
    kernels, seconds, skipped = measured_kernels(df)
    assert len(kernels) == len(df) - len(skipped) and len(kernels) > 50
    # the kernel of a row is the instruction named hlo_op, its time min_per_run_s per launch
    assert [k.name for k in kernels[:5]] == list(df["hlo_op"].iloc[:5])
    np.testing.assert_allclose(seconds[:5], (df["min_per_run_s"] / df["launches"]).iloc[:5])
    roof = RooflineModel()
    pred = np.array([roof.estimate(k, host).time_s for k in kernels])
    ok = pred > 0
    want = float(np.mean(np.log(seconds[ok]) - np.log(pred[ok])))
    s = ScaledModel(roof).fitted_to(df, "host")
    assert s.log_offset == pytest.approx(want) and s.log_slope == 1.0
    m = get_model("scaled-min(roofline,roofline)")
    fitted = m.fitted_to(df, "host")
    assert fitted.name == "scaled-min(roofline,roofline)"
    assert fitted.scales == ((pytest.approx(want), 1.0), (pytest.approx(want), 1.0))
    # The scale is the least-squares fit in log time: the scaled roofline's log residuals average to zero,
    # and their mean square is the plain one's less the square of the offset it removed.
    scaled = np.array([fitted.estimate(k, host).time_s for k in kernels])
    resid = lambda p: np.log(seconds[ok] / p[ok])  # noqa: E731
    assert float(np.mean(resid(scaled))) == pytest.approx(0.0, abs=1e-9)
    assert float(np.mean(resid(scaled) ** 2)) == pytest.approx(float(np.mean(resid(pred) ** 2)) - want ** 2)


def test_scaled_names_fit_on_the_device_dataset_and_refuse_devices_without_one():
    # (members without saved calibrations, so that the test does not depend on calibration/*.json)
    m = get_model("scaled-max-savings(roofline,roofline)")
    (a1, b1), (a2, b2) = m.scales_for("host")  # fitted to calibration/host_cpu.parquet
    assert b1 == b2 == 1.0 and a1 == a2 and math.isfinite(a1)
    suite = Path(__file__).resolve().parent.parent / "calibration" / "host_cpu.parquet"
    assert a1 == ScaledModel("roofline").fitted_to(suite, "host").log_offset
    host = get_device("host")
    e = m.estimate(_root(ADD), host)
    assert e.time_s == pytest.approx(math.exp(a1) * RooflineModel().estimate(_root(ADD), host).time_s)
    # (a device without a shipped suite dataset: the H100 has one, calibration/h100-sxm.parquet)
    with pytest.raises(ValueError, match=r"no measured times for device 'a100-80gb'.*a100-80gb\.parquet does not exist"):
        m.estimate(_root(ADD), get_device("a100-80gb"))
    # fixed scales need no dataset
    fixed = get_model("scaled-min(roofline,xla-gpu)", scales=((0.0, 1.0), (math.log(2), 1.0)))
    e = fixed.estimate(_root(ADD), H100)
    want = min(RooflineModel().estimate(_root(ADD), H100).time_s, 2 * XlaGpuModel().estimate(_root(ADD), H100).time_s)
    assert e.time_s == pytest.approx(want)
