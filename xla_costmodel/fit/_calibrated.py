"""Analytical models with device parameters fitted to measured kernels (`*-calibrated`).

The `roofline` and `xla-gpu` models price a kernel from a `DeviceSpec` whose
numbers come from a datasheet (GPU presets) or from microbenchmarks (the
measured host). Calibration keeps each model's formula and fits the few
device parameters it reads to the measured kernels, in log space
(`scipy.optimize.least_squares` on log(predicted / measured), soft-L1 loss so
that a few noisy kernels cannot drag the fit):

- `roofline`: time = max(c_vec/a + c_mm/b, m/β) + L, fitting the vector
  compute rate (`clock_rate_ghz`), the matrix rate (`peak_matmul_flops_per_s`),
  the bandwidth β (`memory_bandwidth_bytes_per_s`) and the launch cost L
  (`kernel_launch_overhead_s`);
- `xla-gpu`: exec = c + m − p·min(c, m), time = exec + L, fitting the same
  rates, the launch cost, and the compute/memory overlap p
  (`memory_compute_parallelism`, XLA's 0.95).

Each part (`c_vec`, `c_mm`, `m`) is computed once with the starting device
and scales inversely with its rate, so the fit is a small vectorised
problem; the result is a `DeviceSpec` (and model constants) that the
unchanged models use. On a CPU device the `xla-gpu` model runs on
`host_as_gpu(device)`: the host's rates and caches in a GPU-shaped spec
(XLA's GPU launch-grid and coalescing constants), since its formulas need
GPU fields.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np
from sklearn.base import BaseEstimator

from ..models import CostModelWarning, FusionEstimate, KernelEstimate
from ..measure import resolve_device

__all__ = ["CalibratedModel", "AnalyticalOnDevice", "host_as_gpu", "BASES"]

BASES = ("roofline", "xla-gpu")


def host_as_gpu(device, template: str = "a100-40gb"):
    """A GPU-shaped `DeviceSpec` with a CPU device's rates, caches and launch cost.

    XLA's GPU model needs GPU fields (warp size, thread limits, transaction
    size); they are taken from `template`. Rates and sizes come from
    `device`: cores as SMs, FP32 lanes per core as FPUs, clock, DRAM
    bandwidth, L1 per core, the last-level cache as L2, matmul peaks, launch
    cost. No occupancy cap on bandwidth (`memory_transactions_per_clock=0`).
    """
    from ..devices import get_device

    if device.kind == "gpu":
        return device
    gpu = get_device(template)
    return gpu.replace(
        name=device.name,
        description=f"{device.description or device.name} (as a GPU for the xla-gpu model)",
        core_count=device.core_count,
        fpus_per_core=device.fpus_per_core,
        clock_rate_ghz=device.clock_rate_ghz,
        memory_bandwidth_bytes_per_s=device.memory_bandwidth_bytes_per_s,
        l1_cache_bytes_per_core=int(device.l1_cache_bytes_per_core or gpu.l1_cache_bytes_per_core),
        l2_cache_bytes=int(device.l3_cache_bytes or device.l2_cache_bytes or gpu.l2_cache_bytes),
        kernel_launch_overhead_s=device.kernel_launch_overhead_s,
        memory_transactions_per_clock=0,
        op_profile_name=None,
        op_profile={},
        peak_matmul_flops_per_s=dict(device.peak_matmul_flops_per_s),
        source=f"xla_costmodel.fit.host_as_gpu({device.name!r})",
    )


def _base_model(base: str, constants: dict | None = None):
    from ..models import get_model

    if base not in BASES:
        raise ValueError(f"can calibrate {', '.join(BASES)}, not {base!r}")
    return get_model(base, **dict(constants or {}))


def _spec_for(base: str, device):
    return host_as_gpu(device) if base == "xla-gpu" else device


class AnalyticalOnDevice:
    """An analytical model pinned to one `DeviceSpec`, whatever device it is asked about.

    Used for `xla-gpu` on a CPU (on `host_as_gpu(device)`) and for the
    calibrated models (on the fitted spec). **Arguments:** `model` (a
    `CostModel`), `spec` (the `DeviceSpec` it prices on), `name`.
    """

    def __init__(self, model, spec, name: str | None = None):
        self.model = model
        self.spec = spec
        self.name = name or model.name

    def estimate(self, kernel, device) -> KernelEstimate:
        return self.model.estimate(kernel, self.spec)

    def estimate_fusion(self, producer, consumers: Sequence, device) -> FusionEstimate:
        return self.model.estimate_fusion(producer, consumers, self.spec)

    def __repr__(self) -> str:
        return f"AnalyticalOnDevice({self.name!r}, spec={self.spec.name!r})"


# --------------------------------------------------------------------------- parts


def _parts(base: str, model, spec, kernels) -> np.ndarray:
    """Per kernel: (vector compute s, matrix compute s, memory s) at `spec`; NaN rows if unpriced."""
    doubled = spec.replace(peak_matmul_flops_per_s={k: 2.0 * v for k, v in spec.peak_matmul_flops_per_s.items()})
    out = np.full((len(kernels), 3), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)
        for i, k in enumerate(kernels):
            try:
                e1 = model.estimate(k, spec)
                e2 = model.estimate(k, doubled)
            except Exception:  # a kernel the model cannot read is left out of the fit
                continue
            if not (e1.priced and e2.priced) or e1.bound == "free":
                continue
            mm = max(2.0 * (e1.compute_s - e2.compute_s), 0.0)
            vec = max(e1.compute_s - mm, 0.0)
            out[i] = (vec, mm, e1.memory_s)
    return out


def _predict_parts(base: str, parts: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Times from parts and log-parameters (log a, log b, log m, log L[, logit p])."""
    a, b, m, L = np.exp(theta[:4])
    c = parts[:, 0] / a + parts[:, 1] / b
    mem = parts[:, 2] / m
    if base == "roofline":
        return np.maximum(c, mem) + L
    p = 1.0 / (1.0 + np.exp(-theta[4]))
    return c + mem - p * np.minimum(c, mem) + L


class CalibratedModel(BaseEstimator):
    """An analytical model (`roofline` or `xla-gpu`) with its device parameters fitted to measurements.

    Registered as `roofline-calibrated` and `xla-gpu-calibrated`. Used
    without fitting, it loads the device's saved calibration.

    **Arguments (hyper-parameters):** `base`: `"roofline"` or `"xla-gpu"`;
    `loss`: the robust loss of `least_squares` (`"soft_l1"`, `"linear"`, ...);
    `f_scale`: its scale in log units.

    A scikit-learn estimator in form (`get_params`, `clone`; learned state
    ends in `_`), though `fit` takes kernels rather than a feature table.

    **Fitted attributes:** `spec_` (the fitted `DeviceSpec`), `constants_`
    (model constants, e.g. `memory_compute_parallelism`), `factors_` (rate
    multipliers against the starting device and the fitted launch cost),
    `n_train_`.
    """

    def __init__(self, base: str = "roofline", loss: str = "soft_l1", f_scale: float = 0.3):
        self.base = base
        self.loss = loss
        self.f_scale = f_scale

    @property
    def name(self) -> str:
        return f"{self.base}-calibrated"

    # ------------------------------------------------------------------ fitting
    def parts(self, kernels, device="host") -> np.ndarray:
        """What `fit` computes of each kernel before fitting: its vector compute, matrix compute and
        memory seconds on the starting device (NaN rows for kernels the model cannot price).

        Pricing the kernels is nearly all of a fit's time; pass (rows of)
        this array to `fit(..., parts=)` to fit many subsets of the same
        kernels (cross-validation folds) without pricing them again.
        """
        dev = resolve_device(device)
        return _parts(self.base, _base_model(self.base), _spec_for(self.base, dev), list(kernels))

    def fit(self, kernels, y, device="host", parts=None) -> "CalibratedModel":
        """Fit the device parameters to measured kernels.

        **Arguments:** `kernels`: `HloInstruction`s (one kernel each);
        `y`: their measured seconds; `device`: the starting `DeviceSpec` or
        name; `parts`: `self.parts(kernels, device)` when already computed.

        **Returns:** self.
        """
        from scipy.optimize import least_squares

        dev = resolve_device(device)
        spec0 = _spec_for(self.base, dev)
        y = np.asarray(y, dtype=float)
        kernels = list(kernels)
        if len(kernels) != len(y):
            raise ValueError(f"{len(kernels)} kernels but {len(y)} times")
        if parts is None:
            parts = _parts(self.base, _base_model(self.base), spec0, kernels)
        parts = np.asarray(parts, dtype=float)
        if parts.shape != (len(kernels), 3):
            raise ValueError(f"parts has shape {parts.shape}, expected ({len(kernels)}, 3): one row per kernel")
        ok = np.all(np.isfinite(parts), axis=1) & np.isfinite(y) & (y > 0)
        if ok.sum() < 5:
            raise ValueError(f"only {int(ok.sum())} kernels could be priced by {self.base}; need at least 5")
        P, t = parts[ok], y[ok]
        theta0 = np.array([0.0, 0.0, 0.0, math.log(max(float(np.min(t)), 1e-9))]
                          + ([2.944] if self.base == "xla-gpu" else []))  # logit(0.95)

        def residual(theta):
            return np.log(np.maximum(_predict_parts(self.base, P, theta), 1e-15)) - np.log(t)

        best = None
        for start_scale in (0.0, -2.0, 2.0):
            th = theta0.copy()
            th[:3] += start_scale
            r = least_squares(residual, th, loss=self.loss, f_scale=self.f_scale, max_nfev=2000)
            if best is None or r.cost < best.cost:
                best = r
        theta = best.x
        a, b, m, L = (float(v) for v in np.exp(theta[:4]))
        peaks = {k: v * b for k, v in spec0.peak_matmul_flops_per_s.items()}
        self.spec_ = spec0.replace(
            clock_rate_ghz=spec0.clock_rate_ghz * a,
            memory_bandwidth_bytes_per_s=spec0.memory_bandwidth_bytes_per_s * m,
            peak_matmul_flops_per_s=peaks,
            kernel_launch_overhead_s=L,
            source=f"{spec0.source}; {self.base} parameters fitted to {int(ok.sum())} measured kernels",
        )
        self.constants_ = {}
        if self.base == "xla-gpu":
            self.constants_["memory_compute_parallelism"] = float(1.0 / (1.0 + math.exp(-theta[4])))
        self.factors_ = {"vector_rate": a, "matmul_rate": b, "bandwidth": m, "launch_s": L}
        self.n_train_ = int(ok.sum())
        return self

    def _fitted(self) -> bool:
        return hasattr(self, "spec_")

    def _model_for(self, device) -> AnalyticalOnDevice:
        if self._fitted():
            spec, constants = self.spec_, self.constants_
        else:
            cache = self.__dict__.setdefault("_by_device", {})
            key = device.name
            if key not in cache:
                cache[key] = CalibratedModel.from_calibration(self.base, device)
            loaded = cache[key]
            spec, constants = loaded.spec_, loaded.constants_
        return AnalyticalOnDevice(_base_model(self.base, constants), spec, self.name)

    # ---------------------------------------------------------------- CostModel
    def estimate(self, kernel, device) -> KernelEstimate:
        """Price one kernel with the base model on the fitted device parameters."""
        dev = resolve_device(device)
        return self._model_for(dev).estimate(kernel, dev)

    def estimate_fusion(self, producer, consumers, device) -> FusionEstimate:
        dev = resolve_device(device)
        return self._model_for(dev).estimate_fusion(producer, consumers, dev)

    # -------------------------------------------------------------- persistence
    def to_calibration(self) -> dict[str, Any]:
        if not self._fitted():
            raise ValueError("CalibratedModel is not fitted")
        return {
            "base": self.base,
            "params": {"loss": self.loss, "f_scale": self.f_scale},
            "constants": dict(self.constants_),
            "factors": dict(self.factors_),
            "device_spec": self.spec_.to_dict(),
        }

    @classmethod
    def from_calibration(cls, base: str, device) -> "CalibratedModel":
        """The model saved by `xla_costmodel.calibrate` for `device`; `CalibrationError` if none."""
        from ..devices import DeviceSpec
        from ..datasets import CalibrationError, load_calibration

        data = load_calibration(f"{base}-calibrated", device)
        try:
            m = cls(base=base, **dict(data.get("params", {})))
            m.spec_ = DeviceSpec.from_dict(data["device_spec"])
            m.constants_ = {str(k): float(v) for k, v in dict(data.get("constants", {})).items()}
            m.factors_ = {str(k): float(v) for k, v in dict(data.get("factors", {})).items()}
            m.n_train_ = int(data.get("training_rows", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(
                f"{data.get('_path')}: unusable '{base}-calibrated' calibration ({exc}); make a new one with "
                f"xla_costmodel.calibrate(device={data.get('device')!r})"
            ) from None
        return m

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        state = f", launch={self.spec_.kernel_launch_overhead_s:.3g}s" if self._fitted() else ""
        return f"CalibratedModel(base={self.base!r}{state})"
