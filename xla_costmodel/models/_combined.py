"""Combined cost models: several models working together, as XLA's cost-model RFC proposes.

XLA's "Cost Models in XLA GPU – Present and Future" (openxla/xla discussion
#10065) anticipates several cost models (its own, vendors', autotuning)
pricing the same fusion decision, and two ways to combine them:

- `"min"`: the models are on one scale (time), so each side of the
  decision costs what its best implementation costs:
  priority = min_i(unfused_i) − min_i(fused_i);
- `"max-savings"`: the models need not be comparable; a fusion is as good
  as the model that likes it most says: priority = max_i(unfused_i − fused_i).

"A linear regression may be needed to make models comparable": the
`scaled-` combinations first put every model on the scale of measured times
(`ScaledModel`: log t_measured ≈ a + b · log t_model, fitted by least squares
over a calibration dataset; b = 1 unless `fit_slope`, so by default a model
only gets a scale factor exp(a)).

Spelled as model names, wherever a name is accepted (`get_model`,
`analyze(..., model=...)`, `simulate_fusion(..., model=...)`, `compare`):

    min(xla-gpu,roofline)              max-savings(xla-gpu,roofline)
    scaled-min(roofline,fitted)        scaled-max-savings(roofline,fitted)
    scaled(roofline)                   min(scaled(roofline),xla-gpu)   (nesting)

`CombinedModel.estimate(kernel)` is the member with the smallest time (its
parts, bound and details, with `details["model"]` naming it,
`details["chosen"]` the path of choices through nested combinations, and
`details["times_by_model"]` every member's time): the kernel as its best
implementation. Members that cannot price a kernel are left out of the
minimum (it is unpriced only if none can); a member that refuses the device
(`xla-gpu` on a CPU) makes the combination refuse it too.

`CombinedModel.estimate_fusion` implements the two priority rules. Neither
splits into per-(producer, consumer) prices, so `producer_s` is NaN and
`simulate_fusion` prices whole producers (`incremental` off).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ._base import CostModelWarning, FusionEstimate, KernelEstimate, get_model

__all__ = [
    "COMBINATIONS",
    "RULES",
    "CombinedModel",
    "ScaledModel",
    "fit_log_scale",
    "measured_kernels",
    "parse_model_name",
]

RULES = ("min", "max-savings")
#: Combination names accepted in model names: name → (rule, scaled); `scaled` takes one model.
COMBINATIONS: dict[str, tuple[str | None, bool]] = {
    "min": ("min", False),
    "max-savings": ("max-savings", False),
    "scaled-min": ("min", True),
    "scaled-max-savings": ("max-savings", True),
    "scaled": (None, True),
}


def _device(device):
    if device is None or isinstance(device, str):
        from ..devices import get_device

        return get_device(device or "host")
    return device


def _model(m):
    return get_model(m) if isinstance(m, str) else m


def _model_name(m) -> str:
    return str(getattr(m, "name", type(m).__name__))


def _dataset_path(dataset, owner: str) -> str | None:
    if dataset is None or isinstance(dataset, str):
        return dataset
    if isinstance(dataset, os.PathLike):
        return os.fspath(dataset)
    raise TypeError(f"{owner}: dataset must be a path (the model is a frozen dataclass); for a "
                    f"{type(dataset).__name__} use .fitted_to(dataset, device)")


def _calibration_error(message: str) -> Exception:
    # compare's CalibrationError (a ValueError) when available, so that `compare` reports it as such.
    try:
        from ..compare._store import CalibrationError
    except ImportError:  # pragma: no cover - compare is part of the package
        return ValueError(message)
    return CalibrationError(message)


# ---------------------------------------------------------------------------
# Measured kernels of a calibration dataset

_MEASURED: dict = {}


def _dataset_key(dataset):
    if isinstance(dataset, (str, os.PathLike)):
        p = Path(dataset).resolve()
        try:
            st = p.stat()
        except OSError:
            return None
        return (str(p), st.st_mtime_ns, st.st_size)
    return None


def measured_kernels(dataset) -> tuple[list, "Any", dict]:
    """The kernels of a calibration dataset with their measured times.

    Each kernel row's `hlo_text` (or `module_text`) is parsed and the
    instruction named `hlo_op` found (`compare`'s `kernel_from_row`); the
    time is `min_per_launch_s`. Rows that are not kernels (control flow, no
    time, no HLO) are left out, and so are rows that do not parse.

    **Arguments:** `dataset`: a path (`calibration/host_cpu.parquet`), a list
    of paths, or a DataFrame with the dataset's columns.

    **Returns:** `(kernels, seconds, skipped)`: a list of `HloInstruction`s,
    a numpy array of seconds, and {row index: why it was left out}.
    Results for files are cached while the file is unchanged.
    """
    import numpy as np

    from ..compare._data import kernel_rows, load_rows, measured_times
    from ..compare._features import kernel_from_row

    key = _dataset_key(dataset)
    if key is not None and key in _MEASURED:
        return _MEASURED[key]
    df = load_rows(dataset)
    missing = [c for c in ("min_per_run_s", "hlo_op") if c not in df]
    if missing or not ({"hlo_text", "module_text"} & set(df.columns)):
        where = dataset if isinstance(dataset, (str, os.PathLike)) else "the dataset"
        raise ValueError(f"{where}: not a calibration dataset (needs min_per_run_s, hlo_op and hlo_text or module_text; "
                         f"missing {', '.join(missing) or 'hlo_text'})")
    rows = kernel_rows(df)
    kernels, keep, skipped = [], [], {}
    for idx, row in rows.iterrows():
        try:
            kernels.append(kernel_from_row(row, where=f"row {idx}"))
        except (ValueError, KeyError) as exc:
            skipped[idx] = str(exc)
            continue
        keep.append(idx)
    seconds = np.asarray(measured_times(rows.loc[keep]), dtype=float)
    out = (kernels, seconds, skipped)
    if key is not None:
        _MEASURED[key] = out
    return out


def fit_log_scale(predicted, measured, *, fit_slope: bool = False) -> tuple[float, float, int]:
    """Least squares in log space: log(measured) ≈ a + b · log(predicted).

    **Arguments:** `predicted`, `measured`: seconds (pairs where either is
    not finite and positive are left out); `fit_slope`: fit `b` too (else
    b = 1 and exp(a) is a plain scale factor: the geometric mean of
    measured / predicted).

    **Returns:** `(a, b, n)` with `n` the pairs used. **Raises:** `ValueError`
    when fewer than 1 (2 with `fit_slope`, and distinct predictions) pairs remain.
    """
    import numpy as np

    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    ok = np.isfinite(p) & np.isfinite(m) & (p > 0) & (m > 0)
    x, y = np.log(p[ok]), np.log(m[ok])
    n = int(ok.sum())
    if not fit_slope:
        if n < 1:
            raise ValueError("no kernel with a positive predicted and measured time to fit a scale on")
        return float(np.mean(y - x)), 1.0, n
    if n < 2 or float(np.ptp(x)) == 0.0:
        raise ValueError(f"fitting a slope needs at least 2 kernels with different predicted times (have {n})")
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b), n


# ---------------------------------------------------------------------------
# One model on the scale of measured times


@dataclass(frozen=True, slots=True)
class ScaledModel:
    """`scaled(model)`: a model's times put on the scale of measured times.

    time' = exp(a) · time^b (seconds), the same factor time'/time applied to
    every part, so the model's own combination rule still holds between the
    scaled parts (for b = 1 exactly; for b ≠ 1 per kernel). Free (0) and
    unpriced (NaN) kernels stay so.

    **Arguments:**

    - `model`: the model (or its name).
    - `log_offset` (a), `log_slope` (b): the scale; `log_offset=None` fits
      them, per device, on first use, to the device's calibration dataset
      (`dataset`, default `calibration/host_cpu.parquet` for `host`, else
      `calibration/<device>.parquet`) by `fit_log_scale`.
    - `fit_slope`: fit b too (else b = 1).
    - `dataset`: path of the measurements to fit on (default: see above).

    `fitted_to(dataset, device)` returns a copy with the scale fixed.
    `estimate` details add `scale` (time'/time), `unscaled_s`, `log_offset`, `log_slope`.
    """

    model: Any
    log_offset: float | None = None
    log_slope: float = 1.0
    fit_slope: bool = False
    dataset: str | None = None
    _fits: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", _model(self.model))
        if self.log_offset is not None:
            object.__setattr__(self, "log_offset", float(self.log_offset))
            if not math.isfinite(self.log_offset):
                raise ValueError(f"scaled({_model_name(self.model)}): log_offset must be finite, not {self.log_offset}")
        object.__setattr__(self, "log_slope", float(self.log_slope))
        if not (math.isfinite(self.log_slope) and self.log_slope > 0):
            raise ValueError(f"scaled({_model_name(self.model)}): log_slope must be positive, not {self.log_slope}")
        object.__setattr__(self, "dataset", _dataset_path(self.dataset, self.name))

    @property
    def name(self) -> str:
        return f"scaled({_model_name(self.model)})"

    @property
    def prices_by_content(self) -> bool:
        """A scale keeps the member's promise (see `CostModel`)."""
        return bool(getattr(self.model, "prices_by_content", False))

    # ------------------------------------------------------------------ scale
    def _fit(self, dataset, device) -> tuple[float, float]:
        kernels, measured, _ = measured_kernels(dataset)
        pred = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CostModelWarning)
            for k in kernels:
                try:
                    pred.append(self.model.estimate(k, device).time_s)
                except (ArithmeticError, LookupError, TypeError, AttributeError):
                    pred.append(math.nan)  # a kernel the model's rules do not handle: left out
        try:
            a, b, _ = fit_log_scale(pred, measured, fit_slope=self.fit_slope)
        except ValueError as exc:
            raise _calibration_error(
                f"{self.name}: cannot fit the scale on {dataset if isinstance(dataset, (str, os.PathLike)) else 'the dataset'} "
                f"for device '{device.name}': {exc}"
            ) from None
        return a, b

    def scale_for(self, device) -> tuple[float, float]:
        """`(log_offset, log_slope)` used on `device` (fitted on first use when not given)."""
        if self.log_offset is not None:
            return self.log_offset, self.log_slope
        dev = _device(device)
        key = (dev.name, self.dataset)
        if key not in self._fits:
            if self.dataset is not None:
                path = Path(self.dataset)
            else:
                from ..compare._data import default_dataset

                path = default_dataset(dev.name)
            if not path.is_file():
                raise _calibration_error(
                    f"{self.name}: no measured times for device '{dev.name}' to put the model on one scale "
                    f"({path} does not exist); give a dataset=..., fixed log_offset=..., or use "
                    f"fitted_to(dataset, device)"
                )
            self._fits[key] = self._fit(path, dev)
        return self._fits[key]

    def fitted_to(self, dataset, device="host") -> "ScaledModel":
        """A copy with the scale fitted to `dataset` (path(s) or DataFrame) as priced on `device`."""
        dev = _device(device)
        a, b = self._fit(dataset, dev)
        return dataclasses.replace(self, log_offset=a, log_slope=b)

    def _apply(self, t: float, a: float, b: float) -> float:
        if not math.isfinite(t) or t <= 0:
            return t
        return math.exp(a + b * math.log(t))

    # ------------------------------------------------------------- CostModel
    def estimate(self, kernel, device) -> KernelEstimate:
        """The model's estimate with every time scaled (see the class docstring)."""
        dev = _device(device)
        e = self.model.estimate(kernel, dev)
        if not e.priced or e.bound == "free" or not math.isfinite(e.time_s) or e.time_s <= 0:
            return e
        a, b = self.scale_for(dev)
        t = self._apply(e.time_s, a, b)
        r = t / e.time_s
        return KernelEstimate(
            compute_s=e.compute_s * r,
            memory_s=e.memory_s * r,
            launch_s=e.launch_s * r,
            time_s=t,
            bound=e.bound,
            note=e.note,
            details={**e.details, "scale": r, "unscaled_s": e.time_s, "log_offset": a, "log_slope": b},
        )

    def estimate_fusion(self, producer, consumers: Sequence, device) -> FusionEstimate:
        """The model's fusion estimate, each kernel's time scaled.

        With b = 1 every time is multiplied by exp(a). With b ≠ 1 each kernel
        is scaled on its own when the model splits its price by kernel
        (`producer_s`, `consumers_s`, `fused_consumers_s`), else the totals are.
        """
        dev = _device(device)
        fe = self.model.estimate_fusion(producer, consumers, dev)
        a, b = self.scale_for(dev)
        f = lambda t: self._apply(t, a, b)  # noqa: E731
        n = len(consumers)
        split = (math.isfinite(fe.producer_s) and len(fe.consumers_s) == n and len(fe.fused_consumers_s) == n)
        if b == 1.0 or split:
            p = f(fe.producer_s)
            cs = tuple(f(c) for c in fe.consumers_s)
            fs = tuple(f(x) for x in fe.fused_consumers_s)
            if b == 1.0:
                return FusionEstimate(time_unfused_s=f(fe.time_unfused_s), time_fused_s=f(fe.time_fused_s),
                                      producer_s=p, consumers_s=cs, fused_consumers_s=fs)
            return FusionEstimate(time_unfused_s=p + sum(cs), time_fused_s=sum(fs), producer_s=p,
                                  consumers_s=cs, fused_consumers_s=fs)
        return FusionEstimate(time_unfused_s=f(fe.time_unfused_s), time_fused_s=f(fe.time_fused_s))


# ---------------------------------------------------------------------------
# Several models


@dataclass(frozen=True, slots=True)
class CombinedModel:
    """Several cost models combined by one of XLA's RFC rules (see the module docstring).

    **Arguments:**

    - `models`: the members (models or names), in order (ties go to the first).
    - `rule`: `"min"` (priority = min unfused − min fused) or `"max-savings"`
      (priority = max of unfused − fused).
    - `scaled`: put every member on the scale of measured times first
      (each member becomes a `ScaledModel`).
    - `scales`: for `scaled`, fixed `(log_offset, log_slope)` per member;
      None fits them on first use per device (see `ScaledModel`).
    - `fit_slope`, `dataset`: passed to the `ScaledModel`s.

    **Estimates:** `estimate` gives the member with the smallest time (its
    parts, bound, note and details; `details["model"]` names it,
    `details["times_by_model"]` has every member's time), so the time obeys
    the chosen member's own combination rule. `estimate_fusion` applies the
    rule; `estimate_fusion_by_model` gives every member's `FusionEstimate`.
    """

    models: tuple
    rule: str = "min"
    scaled: bool = False
    scales: tuple | None = None
    fit_slope: bool = False
    dataset: str | None = None
    members: tuple = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        models = (self.models,) if isinstance(self.models, str) else tuple(self.models)
        if not models:
            raise ValueError("a combined cost model needs at least one model")
        models = tuple(_model(m) for m in models)
        object.__setattr__(self, "models", models)
        if self.rule not in RULES:
            raise ValueError(f"unknown combination rule {self.rule!r}; rules: {', '.join(RULES)}")
        object.__setattr__(self, "dataset", _dataset_path(self.dataset, self.name))
        if self.scales is not None:
            if not self.scaled:
                raise ValueError(f"{self.name}: scales are for scaled combinations (scaled=True, 'scaled-{self.rule}(...)')")
            scales = tuple((float(s[0]), float(s[1])) if isinstance(s, (tuple, list)) else (float(s), 1.0)
                           for s in self.scales)
            if len(scales) != len(models):
                raise ValueError(f"{self.name}: {len(scales)} scales for {len(models)} models")
            object.__setattr__(self, "scales", scales)
        if self.scaled:
            members = []
            for i, m in enumerate(models):
                if isinstance(m, ScaledModel) and self.scales is None:
                    members.append(m)
                    continue
                base = m.model if isinstance(m, ScaledModel) else m
                a, b = self.scales[i] if self.scales is not None else (None, 1.0)
                members.append(ScaledModel(base, log_offset=a, log_slope=b, fit_slope=self.fit_slope,
                                           dataset=self.dataset))
            object.__setattr__(self, "members", tuple(members))
        else:
            object.__setattr__(self, "members", models)

    @property
    def prices_by_content(self) -> bool:
        """True when every member prices by content (see `CostModel`)."""
        return all(getattr(m, "prices_by_content", False) for m in self.members)

    @property
    def name(self) -> str:
        prefix = "scaled-" if self.scaled else ""
        return f"{prefix}{self.rule}({','.join(_model_name(m) for m in self.models)})"

    @property
    def labels(self) -> tuple[str, ...]:
        """The members' names as spelled in the combination; a repeated name gets `#2`, `#3`, ..."""
        seen: dict[str, int] = {}
        out = []
        for m in self.models:
            n = _model_name(m)
            seen[n] = seen.get(n, 0) + 1
            out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
        return tuple(out)

    # ------------------------------------------------------------------ scale
    def scales_for(self, device) -> tuple[tuple[float, float], ...]:
        """`(log_offset, log_slope)` per member on `device` (scaled combinations only)."""
        if not self.scaled:
            raise ValueError(f"{self.name} is not a scaled combination")
        dev = _device(device)
        return tuple(m.scale_for(dev) for m in self.members)

    def fitted_to(self, dataset, device="host") -> "CombinedModel":
        """A copy with every member's scale fitted to `dataset` (path(s) or DataFrame) on `device`."""
        if not self.scaled:
            raise ValueError(f"{self.name} is not a scaled combination; use 'scaled-{self.rule}(...)'")
        dev = _device(device)
        scales = tuple(m.fitted_to(dataset, dev).scale_for(dev) for m in self.members)
        return dataclasses.replace(self, scales=scales)

    # ------------------------------------------------------------- CostModel
    def _each(self, what: str, call):
        out = []
        for label, m in zip(self.labels, self.members):
            try:
                out.append(call(m))
            except Exception as exc:
                exc.add_note(f"(from member {label!r} of the combined cost model {self.name!r}, in {what})")
                raise
        return out

    def estimate(self, kernel, device) -> KernelEstimate:
        """The member with the smallest time for this kernel (see the class docstring).

        **Raises:** what a member raises, e.g. `ValueError` when it refuses
        the device (noted with the member's name).
        """
        dev = _device(device)
        ests = self._each("estimate", lambda m: m.estimate(kernel, dev))
        labels = self.labels
        times = {label: e.time_s for label, e in zip(labels, ests)}
        priced = [i for i, e in enumerate(ests) if e.priced]
        if not priced:
            why = "; ".join(f"{label}: {e.note}" for label, e in zip(self.labels, ests))
            return KernelEstimate.unpriced(f"no member of {self.name} can price it ({why})",
                                           {"times_by_model": times})
        best = min(priced, key=lambda i: ests[i].time_s)  # the first of equal times
        e = ests[best]
        left_out = [f"{labels[i]} ({ests[i].note})" for i in range(len(ests)) if i not in priced]
        note = "; ".join(x for x in (e.note, ("not priced by " + ", ".join(left_out)) if left_out else "") if x)
        # `chosen`: the path of choices down nested combinations (outer member first).
        chosen = (labels[best], *e.details.get("chosen", ()))
        return KernelEstimate(
            compute_s=e.compute_s,
            memory_s=e.memory_s,
            launch_s=e.launch_s,
            time_s=e.time_s,
            bound=e.bound,
            note=note,
            details={**e.details, "model": labels[best], "chosen": chosen, "times_by_model": times},
        )

    def estimate_fusion_by_model(self, producer, consumers: Sequence, device) -> dict[str, FusionEstimate]:
        """Every member's `FusionEstimate` for fusing `producer` into `consumers`, by member name."""
        dev = _device(device)
        fes = self._each("estimate_fusion", lambda m: m.estimate_fusion(producer, list(consumers), dev))
        return dict(zip(self.labels, fes))

    def estimate_fusion(self, producer, consumers: Sequence, device) -> FusionEstimate:
        """Fusing `producer` into every one of `consumers`, by the combination rule.

        - `"min"`: `time_unfused_s` = min over members of their unfused time,
          `time_fused_s` = min of their fused time (members that cannot price
          a side are left out of that side's minimum);
        - `"max-savings"`: the unfused and fused times of the member whose
          unfused − fused is largest (the first of equal ones).

        So `priority_s` is min_i(unfused_i) − min_i(fused_i), resp.
        max_i(unfused_i − fused_i); NaN when no member prices the fusion.
        `producer_s` is NaN: neither rule splits into per-kernel prices.
        """
        fes = list(self.estimate_fusion_by_model(producer, consumers, device).values())  # labels are unique
        nan = math.nan
        if self.rule == "min":
            unfused = [f.time_unfused_s for f in fes if not math.isnan(f.time_unfused_s)]
            fused = [f.time_fused_s for f in fes if not math.isnan(f.time_fused_s)]
            return FusionEstimate(time_unfused_s=min(unfused) if unfused else nan,
                                  time_fused_s=min(fused) if fused else nan)
        ok = [i for i, f in enumerate(fes) if not math.isnan(f.priority_s)]
        if not ok:
            return FusionEstimate(time_unfused_s=nan, time_fused_s=nan)
        best = max(ok, key=lambda i: (fes[i].priority_s, -i))
        return FusionEstimate(time_unfused_s=fes[best].time_unfused_s, time_fused_s=fes[best].time_fused_s)


# ---------------------------------------------------------------------------
# Names

_NAME_CHARS = re.compile(r"[^\s(),]+")


@dataclass(slots=True)
class _Node:
    name: str
    args: list | None
    column: int


class _NameParser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, what: str, pos: int | None = None) -> ValueError:
        pos = self.pos if pos is None else pos
        combos = ", ".join(f"{c}(...)" for c in COMBINATIONS)
        return ValueError(
            f"cannot read cost-model name {self.text!r}: {what} at column {pos + 1}\n"
            f"    {self.text}\n    {' ' * pos}^\n"
            f"(combinations: {combos}; e.g. 'min(xla-gpu,roofline)')"
        )

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def expr(self) -> _Node:
        self.skip()
        m = _NAME_CHARS.match(self.text, self.pos)
        if not m:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "the end"
            raise self.error(f"expected a model name, found {found}")
        node = _Node(m.group(0), None, self.pos)
        self.pos = m.end()
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] == "(":
            if node.name not in COMBINATIONS:
                raise self.error(f"unknown combination {node.name!r}", node.column)
            self.pos += 1
            node.args = [self.expr()]
            self.skip()
            while self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
                node.args.append(self.expr())
                self.skip()
            if self.pos >= len(self.text) or self.text[self.pos] != ")":
                found = repr(self.text[self.pos]) if self.pos < len(self.text) else "the end"
                raise self.error(f"expected ',' or ')', found {found}")
            self.pos += 1
            self.skip()
        return node

    def parse(self) -> _Node:
        node = self.expr()
        if self.pos != len(self.text):
            raise self.error(f"unexpected {self.text[self.pos]!r}")
        return node

    def build(self, node: _Node, params: dict | None = None):
        params = params or {}
        if node.args is None:
            try:
                return get_model(node.name, **params)
            except ValueError as exc:
                raise ValueError(f"in cost-model name {self.text!r} at column {node.column + 1}: {exc}") from exc
        rule, scaled = COMBINATIONS[node.name]
        if rule is None and len(node.args) != 1:
            raise self.error(f"'scaled' takes one model, got {len(node.args)}", node.column)
        args = [self.build(a) for a in node.args]
        if rule is None:  # scaled(model)
            return ScaledModel(args[0], **params)
        return CombinedModel(tuple(args), rule=rule, scaled=scaled, **params)


def parse_model_name(text: str, **params):
    """The model a combination name spells (`get_model` calls this for names with parentheses).

    **Arguments:** `text`: e.g. `"min(xla-gpu,roofline)"`,
    `"max-savings(xla-gpu,roofline)"`, `"scaled-min(roofline,fitted)"`,
    `"scaled(roofline)"`; members are registry or plugin names or nested
    combinations; blanks are ignored. `**params`: fields of the outer
    `CombinedModel` (`scales`, `fit_slope`, `dataset`) or `ScaledModel`.

    **Returns:** a `CombinedModel` or `ScaledModel`.

    **Raises:** `ValueError` saying where the name cannot be read (column
    and caret), or naming an unknown member.
    """
    p = _NameParser(text)
    return p.build(p.parse(), params)
