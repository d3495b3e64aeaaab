"""`scaled(model)`: a cost model put on the scale of measured times (fitted to a calibration dataset).

XLA's cost-model RFC (openxla/xla discussion #10065): "a linear regression
may be needed to make models comparable". `ScaledModel` fits
log t_measured ≈ a + b · log t_model by least squares over a calibration
dataset (b = 1 unless `fit_slope`, so by default a model only gets a scale
factor exp(a)), and registers the combinators `scaled(...)`,
`scaled-min(...)` and `scaled-max-savings(...)` with the model-name
combinators of `xla_costmodel.models._combined`, so that `models` never
imports upward.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..models import (CombinedModel, CostModelWarning, FusionEstimate, KernelEstimate, as_model, dataset_path,
                      model_label, prices_by_content, register_combinator)
from ..measure import resolve_device
from ..datasets import CalibrationError

__all__ = ["ScaledModel", "default_scale", "fit_log_scale", "measured_kernels"]


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
    instruction named `hlo_op` found (`kernel_from_row`); the
    time is `min_per_launch_s`. Rows that are not kernels (control flow, no
    time, no HLO) are left out, and so are rows that do not parse.

    **Arguments:** `dataset`: a path (`calibration/host_cpu.parquet`), a list
    of paths, or a DataFrame with the dataset's columns.

    **Returns:** `(kernels, seconds, skipped)`: a list of `HloInstruction`s,
    a numpy array of seconds, and {row index: why it was left out}.
    Results for files are cached while the file is unchanged.
    """
    import numpy as np

    from ..datasets import kernel_rows, load_rows, measured_times
    from ..features import kernel_from_row

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
        while len(_MEASURED) > 6:  # the last few files only: each holds its parsed kernels
            del _MEASURED[next(iter(_MEASURED))]
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

    Fitting is explicit: `fitted_to(dataset, device)` returns a copy with the
    scale fitted and fixed (the object itself never changes).
    `estimate` details add `scale` (time'/time), `unscaled_s`, `log_offset`, `log_slope`.
    """

    model: Any
    log_offset: float | None = None
    log_slope: float = 1.0
    fit_slope: bool = False
    dataset: str | None = None

    @property
    def held_models(self) -> tuple:
        """The model it scales (`models._base.HoldsModels`)."""
        return (self.model,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", as_model(self.model))
        if self.log_offset is not None:
            object.__setattr__(self, "log_offset", float(self.log_offset))
            if not math.isfinite(self.log_offset):
                raise ValueError(f"scaled({model_label(self.model)}): log_offset must be finite, not {self.log_offset}")
        object.__setattr__(self, "log_slope", float(self.log_slope))
        if not (math.isfinite(self.log_slope) and self.log_slope > 0):
            raise ValueError(f"scaled({model_label(self.model)}): log_slope must be positive, not {self.log_slope}")
        object.__setattr__(self, "dataset", dataset_path(self.dataset, self.name))

    @property
    def name(self) -> str:
        return f"scaled({model_label(self.model)})"

    @property
    def prices_by_content(self) -> bool:
        """A scale keeps the member's promise (see `CostModel`)."""
        return prices_by_content(self.model)

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
            raise CalibrationError(
                f"{self.name}: cannot fit the scale on {dataset if isinstance(dataset, (str, os.PathLike)) else 'the dataset'} "
                f"for device '{device.name}': {exc}"
            ) from None
        return a, b

    def scale_for(self, device) -> tuple[float, float]:
        """`(log_offset, log_slope)` used on `device`.

        Given ones, or (not fitted: `log_offset=None`) the scale fitted to the
        device's calibration dataset, as `fitted` uses the device's saved
        calibration (`default_scale`: fitted once per model, device and
        state of the file).
        """
        if self.log_offset is not None:
            return self.log_offset, self.log_slope
        return default_scale(self, resolve_device(device))

    def fitted_to(self, dataset, device="host") -> "ScaledModel":
        """A copy with the scale fitted to `dataset` (path(s) or DataFrame) as priced on `device`."""
        dev = resolve_device(device)
        a, b = self._fit(dataset, dev)
        return dataclasses.replace(self, log_offset=a, log_slope=b)

    def _apply(self, t: float, a: float, b: float) -> float:
        if not math.isfinite(t) or t <= 0:
            return t
        return math.exp(a + b * math.log(t))

    # ------------------------------------------------------------- CostModel
    def estimate(self, kernel, device) -> KernelEstimate:
        """The model's estimate with every time scaled (see the class docstring)."""
        dev = resolve_device(device)
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
        dev = resolve_device(device)
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
# Unfitted models: the scale of the device's calibration dataset

# (model id, device, dataset file and its state) -> (the model, kept alive so that its id is not
# reused, and its scale). Fitting takes a pass over the dataset's kernels; every `get_model(...)`
# is a new object, so the cache is bounded.
_DEFAULT_SCALES: dict = {}
_DEFAULT_SCALES_SIZE = 256


def default_scale(model: ScaledModel, device) -> tuple[float, float]:
    """`(log_offset, log_slope)` of an unfitted `model` on `device`: fitted to the device's dataset.

    The dataset is `model.dataset`, else the device's suite dataset
    (`xla_costmodel.datasets.default_dataset`). **Raises:** `CalibrationError`
    when it does not exist or gives no kernel to fit on.
    """
    from ..datasets import default_dataset

    path = Path(model.dataset) if model.dataset is not None else default_dataset(device.name)
    if not path.is_file():
        raise CalibrationError(
            f"{model.name}: no measured times for device '{device.name}' to put the model on one scale "
            f"({path} does not exist); give a dataset=..., fixed log_offset=..., or use "
            f"fitted_to(dataset, device)"
        )
    st = path.stat()
    key = (id(model), device.name, str(path.resolve()), st.st_mtime_ns, st.st_size)
    hit = _DEFAULT_SCALES.get(key)
    if hit is None:
        if len(_DEFAULT_SCALES) >= _DEFAULT_SCALES_SIZE:
            _DEFAULT_SCALES.clear()
        hit = _DEFAULT_SCALES[key] = (model, model._fit(path, device))
    return hit[1]


# ---------------------------------------------------------------------------
# Model-name combinators (`get_model("scaled-min(roofline,fitted)")`), in the order names list them


@register_combinator("scaled-min")
def _scaled_min(models: tuple, **params) -> CombinedModel:
    """`scaled-min(a, b, ...)`: the `min` rule over models first put on one scale."""
    return CombinedModel(models, rule="min", scaled=True, **params)


@register_combinator("scaled-max-savings")
def _scaled_max_savings(models: tuple, **params) -> CombinedModel:
    """`scaled-max-savings(a, b, ...)`: the `max-savings` rule over models first put on one scale."""
    return CombinedModel(models, rule="max-savings", scaled=True, **params)


@register_combinator("scaled", arity=1)
def _scaled(models: tuple, **params) -> ScaledModel:
    """`scaled(model)`: one model on the scale of measured times."""
    return ScaledModel(models[0], **params)
