"""`fitted`: Stevens & Klöckner's hardware-fitted linear model over HLO kernel features.

    time(kernel) = Σ_f  w_f · x_f(kernel)

with `x_f` the counts of `kernel_features` and one weight per feature in
seconds per unit. The weights minimise the *relative* error over the
training kernels: each row of the feature matrix is divided by its measured
time and the system is solved against a vector of ones,

    minimise Σ_i (Σ_f w_f x_if / t_i − 1)²,

so a 1 µs kernel counts as much as a 10 ms one. Weights are kept
non-negative (a count cannot save time); the `signed` hyper-parameter frees
chosen ones (the paper's min(loads, stores) features may go negative, a gain
from overlapping loads with stores). The bounded problem is solved with
`scipy.optimize.lsq_linear` (bounded-variable least squares) after scaling
every column to unit norm. Features no training kernel has get weight 0 and
are reported as unsupported.
"""

from __future__ import annotations

import fnmatch
import math
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ..features import FEATURES, TASK_BYTES
from ._kernel_model import COLUMN_GROUPS, TIME_FLOOR_S, FeatureCostModel
from ..datasets import CalibrationError, load_calibration

__all__ = ["FittedModel", "fit_relative_least_squares"]

_UNITS = {
    "ld_": "element loaded",
    "st_": "element stored",
    "minldst_": "min(loads, stores)",
    "bytes_": "byte",
    "memcpy_bytes": "byte",
    "op_": "operation",
    "matmul_batch": "matrix product",
    "matmul_": "flop",
    "red_": "operation",
    "lib_elements": "element moved",
    "lib_": "library call",
    "dot_flops": "flop",
    "conv_flops": "flop",
    "conv_flops_transposed": "flop",
    "sort_cmp": "comparison",
    "fft_flops": "flop",
    "solver_flops": "flop",
    "conv_windows": "window position",
    "conv_groups": "group window position",
    "ynn_grouped_conv_elements": "stencil element",
    "kernel_thunk": "launch",
    "first": "launch",
    "launch": "launch",
    "tasks": "parallel task",
}


def _unit(name: str) -> str:
    for prefix, unit in _UNITS.items():
        if name.startswith(prefix):
            return unit
    return "unit"


def fit_relative_least_squares(X: np.ndarray, y: np.ndarray, lower: np.ndarray | None = None,
                               sample_weight: np.ndarray | None = None) -> np.ndarray:
    """Weights minimising Σ_i s_i (X_i·w / y_i − 1)², with `w ≥ lower`.

    **Arguments:** `X` (n × p counts), `y` (n positive times), `lower` (p
    lower bounds: 0 for non-negative weights, -inf for free ones; default
    all 0), `sample_weight` (n non-negative row weights).

    **Returns:** `w` (p). Columns that are zero in every row get weight 0.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, p = X.shape
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("relative-error least squares needs positive, finite times y")
    lower = np.zeros(p) if lower is None else np.asarray(lower, dtype=float)
    A = X / y[:, None]
    b = np.ones(n)
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=float)
        if np.any(sample_weight < 0) or not np.any(sample_weight > 0):
            raise ValueError("sample weights must be non-negative and not all zero")
        sw = np.sqrt(np.asarray(sample_weight, dtype=float))
        A = A * sw[:, None]
        b = b * sw
    w = np.zeros(p)
    used = np.flatnonzero(np.any(A != 0, axis=0))
    if len(used) == 0:
        return w
    Au = A[:, used]
    scale = np.linalg.norm(Au, axis=0)
    Au = Au / scale
    lb = lower[used] * scale
    lb = np.where(np.isfinite(lb), lb, -np.inf)
    if np.all(lb == -np.inf):
        sol = np.linalg.lstsq(Au, b, rcond=None)[0]
    else:
        from scipy.optimize import lsq_linear

        sol = lsq_linear(Au, b, bounds=(lb, np.full(len(used), np.inf)), method="bvls").x
    w[used] = np.maximum(sol / scale, lower[used])  # the solver may overshoot a bound by rounding
    return w


class FittedModel(FeatureCostModel, RegressorMixin, BaseEstimator):
    """The hardware-fitted linear model (`fitted`): one weight per kernel feature, in seconds per unit.

    A scikit-learn regressor on the feature table of `kernel_features`
    (`fit(X, y)` with `y` the measured seconds; `predict(X)`), and a
    `CostModel` (`estimate(kernel, device)`; `estimate_fusion` prices the
    fused kernel it would make). Not fitted, `estimate` uses the device's
    saved calibration (`xla_costmodel.calibrate`).

    **Arguments (hyper-parameters):**

    - `features`: names or glob patterns of the features to use (default:
      all of `FEATURES`); others get weight 0.
    - `signed`: glob patterns of features whose weight may be negative
      (default none: every weight is kept ≥ 0). The paper lets the
      min(loads, stores) weights go negative (a gain from overlapping loads
      and stores); on the host CPU's data that gives pairs of large
      cancelling weights (e.g. +9.6 ns per f64 load, −18.8 ns per f64
      min(loads, stores)) and worse held-out accuracy, so they stay ≥ 0
      unless asked (`signed=("minldst_*",)`).
    - `task_bytes`: output bytes per parallel task of an emitted loop, used
      when computing features of HLO kernels.

    **Fitted attributes:** `coef_` (seconds per unit, aligned with
    `feature_names_`), `feature_names_`, `support_` (training rows in which
    each feature is nonzero), `n_train_`, `n_features_in_` (and
    `feature_names_in_` when fitted on a DataFrame).
    """

    name: ClassVar[str] = "fitted"

    def __init__(self, features=None, signed=(), task_bytes=TASK_BYTES):
        self.features = features
        self.signed = signed
        self.task_bytes = task_bytes

    # ------------------------------------------------------------------ sklearn
    def _selected(self, names: list[str]) -> np.ndarray:
        if self.features is None:
            return np.ones(len(names), dtype=bool)
        pats = [self.features] if isinstance(self.features, str) else list(self.features)
        return np.array([any(fnmatch.fnmatchcase(n, p) for p in pats) for n in names], dtype=bool)

    def fit(self, X, y, sample_weight=None):
        """Fit the weights by relative-error least squares.

        **Arguments:** `X`: feature table (DataFrame with `FEATURES` columns,
        or an array); `y`: measured times in seconds (positive);
        `sample_weight`: optional weights per row.

        **Returns:** self.
        """
        X, y = validate_data(self, self._columns(X), y, dtype=np.float64, y_numeric=True)
        y = np.asarray(y, dtype=float)
        if np.any(y <= 0):
            raise ValueError("FittedModel.fit: times y must be positive (the fit minimises relative error)")
        if np.any(X < 0):
            raise ValueError("Negative values in data passed to FittedModel.fit: feature counts are never negative")
        names = self._names(X.shape[1])
        keep = self._selected(names)
        signed = [self.signed] if isinstance(self.signed, str) else list(self.signed or ())
        lower = np.array([-np.inf if any(fnmatch.fnmatchcase(n, p) for p in signed) else 0.0 for n in names])
        Xs = np.where(keep[None, :], X, 0.0)
        self.coef_ = fit_relative_least_squares(Xs, y, lower, sample_weight)
        self.feature_names_ = names
        self.support_ = np.count_nonzero(Xs, axis=0).astype(int)
        self.n_train_ = int(len(y))
        return self

    def predict(self, X):
        """Predicted seconds per kernel (at least 1 ns). **Arguments:** `X`, as for `fit`."""
        check_is_fitted(self)
        X = validate_data(self, self._columns(X), dtype=np.float64, reset=False)
        return np.maximum(X @ self.coef_, TIME_FLOOR_S)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.positive_only = True  # feature counts
        tags.target_tags.positive_only = True
        return tags

    # ------------------------------------------------------------- reporting
    def weights_table(self, *, all_features: bool = False) -> pd.DataFrame:
        """The weights as the paper's Table II: seconds per unit of each feature.

        **Arguments:** `all_features`: also list features no training kernel had.

        **Returns:** a DataFrame with columns `feature`, `group` (memory,
        compute, launch), `unit`, `weight_s` (seconds per unit), `weight_ns`,
        `per_second` (units per second at that weight, e.g. loads/s or
        flop/s; inf for weight 0), `support` (training kernels with the
        feature) and `fixed` (the weight sits at its bound 0).
        """
        check_is_fitted(self)
        rows = []
        for n, w, s in zip(self.feature_names_, self.coef_, self.support_):
            if not all_features and s == 0:
                continue
            rows.append({
                "feature": n,
                "group": COLUMN_GROUPS.get(n, "other"),
                "unit": _unit(n),
                "weight_s": float(w),
                "weight_ns": float(w) * 1e9,
                "per_second": (1.0 / w) if w > 0 else math.inf,
                "support": int(s),
                "fixed": bool(w == 0.0),
            })
        return pd.DataFrame(rows, columns=["feature", "group", "unit", "weight_s", "weight_ns", "per_second", "support", "fixed"])

    # ------------------------------------------------------------ CostModel
    def _explain(self, x: dict[str, float]):
        names = self.feature_names_
        vec = np.array([x.get(n, 0.0) for n in names])
        parts = vec * self.coef_
        contrib = {n: float(c) for n, c in zip(names, parts) if c}
        compute = float(sum(c for n, c in contrib.items() if COLUMN_GROUPS.get(n) == "compute"))
        memory = float(sum(c for n, c in contrib.items() if COLUMN_GROUPS.get(n) == "memory"))
        launch = float(sum(c for n, c in contrib.items() if COLUMN_GROUPS.get(n) == "launch"))
        if any(n not in COLUMN_GROUPS for n in names):
            raise ValueError("this FittedModel was fitted on unnamed columns; fit it on a kernel_features table")
        return compute, memory, launch, float(parts.sum()), contrib

    def _linear_part(self):
        return self

    # ---------------------------------------------------------- persistence
    def to_calibration(self) -> dict:
        """The model part of a calibration file (weights by feature, hyper-parameters, support)."""
        check_is_fitted(self)
        return {
            "features": list(self.feature_names_),
            "weights": {n: float(w) for n, w in zip(self.feature_names_, self.coef_)},
            "support": {n: int(s) for n, s in zip(self.feature_names_, self.support_)},
            "params": {"features": self.features if self.features is None else list(self.features),
                       "signed": list(self.signed or ()), "task_bytes": int(self.task_bytes)},
        }

    @classmethod
    def from_weights(cls, weights: dict, support: dict | None = None, **params) -> "FittedModel":
        """A fitted model with the given weights (seconds per unit, by feature name)."""
        columns = cls.feature_columns
        unknown = [k for k in weights if k not in columns]
        if unknown:
            raise ValueError(f"unknown feature(s) {', '.join(unknown)}; the {cls.name!r} model reads "
                             f"{'xla_costmodel.fit.FEATURES' if len(columns) == len(FEATURES) else 'FEATURES and CONTEXT_FEATURES'}")
        m = cls(**params)
        m.feature_names_ = list(columns)
        m.coef_ = np.array([float(weights.get(n, 0.0)) for n in columns])
        sup = support or {n: (1 if weights.get(n, 0.0) else 0) for n in columns}
        m.support_ = np.array([int(sup.get(n, 0)) for n in columns])
        m.n_features_in_ = len(columns)
        m.feature_names_in_ = np.array(columns, dtype=object)
        m.n_train_ = int(max(m.support_.max(initial=0), 0))
        return m

    @classmethod
    def from_calibration(cls, device) -> "FittedModel":
        """The model saved by `xla_costmodel.calibrate` for `device` (name or `DeviceSpec`).

        **Raises:** `CalibrationError` when there is none or it cannot be read.
        """
        data = load_calibration(cls.name, device)
        try:
            weights = {str(k): float(v) for k, v in data["weights"].items()}
            support = {str(k): int(v) for k, v in data.get("support", {}).items()}
            params = dict(data.get("params", {}))
            m = cls.from_weights(weights, support or None,
                                 signed=tuple(params.get("signed", ())),
                                 task_bytes=int(params.get("task_bytes", TASK_BYTES)))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CalibrationError(
                f"{data.get('_path')}: unusable {cls.name!r} calibration ({exc}); make a new one with "
                f"xla_costmodel.calibrate(device={data.get('device')!r})"
            ) from None
        m.n_train_ = int(data.get("training_rows", m.n_train_))
        return m
