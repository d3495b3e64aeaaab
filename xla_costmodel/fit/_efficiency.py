"""A learned efficiency over an analytical model (NeuSight-style): the shipped `learned` form on a GPU.

NeuSight predicts a GPU kernel's time as a roofline bound divided by a
learned utilization. Here the bound is an analytical model of this project
(`base`, `xla-gpu` on the H100), and gradient-boosted trees learn the log of
the ratio between the measured time and the analytical price, from the
kernel's feature counts (`features.features_of`), its structure
(`structure_of`: its kind, and for a GEMM its problem and configuration) and
the log of that price:

    time = base_s * exp(clip(trees(features, structure, log base_s), -log bound, +log bound))

The factor is bounded, so the analytical model keeps the scale where the
trees saw nothing alike; a kernel of a kind the trees saw fewer rows of than
one leaf holds (`min_samples_leaf`), a kernel whose `xla-gpu` price is
itself fitted to measurements (`MEASURED_KINDS`: library calls), and a
kernel whose features cannot be read keep the base price. The factor never
takes a price below the roofline's bound (`roofline_floor`; or the base
price, where that is lower): NeuSight's bound on a learned utilization.

Saved calibrations (`calibration/<device>_learned.json` with `"form":
"base-efficiency"`) keep no trees: they name a table of training rows
(features, `base_s`, measured seconds per execution; made by
`scripts/fit_gpu_learned.py` from the shipped captures) with its SHA-256,
and check predictions; loading refits the trees (deterministic) and verifies
them. `get_model("learned")` on such a device prices with this model.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ..devices import get_device
from ..models import GPU_KERNEL_KINDS, FusionByMaterializing, KernelEstimate, gpu_kernel_kind
from ..features import FEATURES, FeatureError

__all__ = ["EfficiencyModel", "FORM", "BASE_COLUMN", "FLOOR_COLUMN", "STRUCTURE", "refit_efficiency", "roofline_floor",
           "structure_of", "table_sha256"]

#: The `form` of a saved `learned` calibration that holds this model.
FORM = "base-efficiency"
#: The training table's column of the analytical price (seconds per execution).
BASE_COLUMN = "base_s"
#: The training table's column of the measured time (seconds per execution).
MEASURED_COLUMN = "measured_s"
#: The column of the roofline's bound on a kernel's execution (seconds; `roofline_floor`): the learned factor
#: never prices a kernel below it (nor below the base price, if that is lower).
FLOOR_COLUMN = "roofline_s"


def roofline_floor(kernel, device) -> float:
    """max(compute, memory) of the `roofline` model's estimate of `kernel` (seconds, no launch): the time
    under which no kernel runs at the device's peaks (NeuSight bounds its learned utilization by it). NaN
    where the roofline cannot price the kernel."""
    from ..models import get_model

    try:
        e = get_model("roofline").estimate(kernel, device)
    except Exception:  # noqa: BLE001 - a kernel the roofline cannot price has no floor
        return math.nan
    if not e.priced or e.compute_s is None or e.memory_s is None:
        return math.nan
    return float(max(e.compute_s, e.memory_s))


#: What kind of GPU kernel a row is (one-hot; none set: another kind), so that the factor is learned per kind
#: instead of one blur over sorts, library calls and GEMMs (issue 31 measures each kind's error apart):
#: Triton GEMM fusions, cuBLAS GEMMs, other Triton fusions, cuSolver (and cuBLAS trsm) calls, cuDNN, cuFFT,
#: other library calls, XLA's sort emitter, CUB sort, XLA's TopK kernel, reductions, loop fusions, scatters,
#: copies and transposes.
KINDS = GPU_KERNEL_KINDS  # `models.gpu_kernel_kind` decides
#: Kinds whose `xla-gpu` price is itself fitted to measured time (`models._library_calls`: cuSolver and
#: cuBLAS trsm, cuDNN, CUB sort and other library calls, constants per routine family fitted on H100
#: captures): the factor corrects an analytical model, so these keep their price and are not trained on
#: (their residuals are those of a fit; in the shipped table the constants were fitted on the same rows).
MEASURED_KINDS = ("solver", "cudnn", "sort_cub", "library_other")
#: A GEMM's problem (`gemm_b/m/n/k`, from `models._gemm_table.gemm_spec`) and, for a Triton GEMM, the
#: configuration it ran with (its backend config: tile, `block_k`, stages, warps, split-k) and what XLA's
#: dot-fusion model (`models._dot_fusion.estimate_dot`) derives from it: K iterations of the main loop, blocks,
#: and launch waves (blocks over SMs times resident blocks per SM). XLA's model charges a one-stage configuration
#: the full latency tax per K step; these let the trees learn where that over- or under-prices. 0 where unknown.
GEMM_STRUCTURE = ("gemm_b", "gemm_m", "gemm_n", "gemm_k", "gemm_block_m", "gemm_block_n", "gemm_block_k",
                  "gemm_stages", "gemm_warps", "gemm_split_k", "gemm_k_iterations", "gemm_blocks", "gemm_waves")
#: The structural columns the trees read besides the counts of `FEATURES` (`structure_of`).
STRUCTURE: tuple[str, ...] = tuple(f"kind_{k}" for k in KINDS) + GEMM_STRUCTURE


def _gemm_structure(kernel, device) -> dict:
    """`GEMM_STRUCTURE` of a GEMM kernel (empty for another kernel)."""
    from ..analysis import backend_config, configured_tiling
    from ..models import estimate_dot, gemm_spec

    try:
        spec = gemm_spec(kernel)
    except Exception:  # noqa: BLE001 - a GEMM whose problem cannot be read has no GEMM columns
        spec = None
    if spec is None:
        return {}
    out = {"gemm_b": spec.b, "gemm_m": spec.m, "gemm_n": spec.n, "gemm_k": spec.k}
    cfg = configured_tiling(kernel) if kernel.opcode == "fusion" else None
    if cfg is None or len(cfg.output_tile) < 2:
        return out
    bm, bn = int(cfg.output_tile[-2]), int(cfg.output_tile[-1])
    bk = cfg.block_k
    if bk is None:  # (a nested GEMM fusion: the dot's own backend config holds its reduction tile)
        dots = [h for h in kernel.fused_computation.instructions if h.opcode == "dot"]
        sizes = (backend_config(dots[0]) or {}).get("sizes") if dots else None
        bk = int(sizes[0]) if sizes else None
    fc = (backend_config(kernel) or {}).get("fusion_backend_config") or {}
    split_k = int((fc.get("triton_gemm_config") or {}).get("split_k", 1) or 1)
    warps = int(cfg.num_warps or 4)
    stages = max(1, int(cfg.num_stages))
    out.update(gemm_block_m=bm, gemm_block_n=bn, gemm_stages=stages, gemm_warps=warps, gemm_split_k=split_k)
    if bk:
        # (blocks, K iterations and waves as XLA's dot-fusion model counts them: one home for them)
        e = estimate_dot(spec, 1, bm, bn, int(bk), warps, stages, device)
        out.update(gemm_block_k=int(bk), gemm_k_iterations=e.k_iterations, gemm_blocks=e.blocks,
                   gemm_waves=e.launch_waves)
    return out


def structure_of(kernel, device) -> dict:
    """The `STRUCTURE` columns of one kernel on `device` (a `DeviceSpec`): its kind (one-hot) and, for a
    GEMM, its problem and configuration. Never raises: what cannot be read counts 0."""
    out = dict.fromkeys(STRUCTURE, 0.0)
    try:
        kind = gpu_kernel_kind(kernel)
    except Exception:  # noqa: BLE001 - an unreadable kernel is "another kind"
        kind = ""
    if kind:
        out[f"kind_{kind}"] = 1.0
    if kind in ("gemm_triton", "gemm_cublas"):
        try:
            out.update({k: float(v) for k, v in _gemm_structure(kernel, device).items()})
        except Exception:  # noqa: BLE001 - a configuration that cannot be read leaves its columns 0
            pass
    return out


class EfficiencyModel(FusionByMaterializing, RegressorMixin, BaseEstimator):
    """An analytical model's price times a learned, bounded factor (see the module docstring).

    **Arguments (hyper-parameters):** `base` (the analytical model's name),
    `bound` (the factor stays within [1/bound, bound]), and scikit-learn's
    `HistGradientBoostingRegressor` parameters `max_iter`, `learning_rate`,
    `max_leaf_nodes`, `min_samples_leaf`, `l2_regularization`,
    `random_state` (defaults: `LearnedModel`'s); `kept_kinds` (kinds of
    `KINDS` that keep the base price and are left out of training; default
    `MEASURED_KINDS`, whose base price is fitted to measurements); `floored`
    (default True: the factor stops at the roofline's bound, `roofline_s`).

    `fit(X, y)`: `X` a table with the `FEATURES` columns (and the `STRUCTURE`
    columns it has: a table without them fits the counts-only form), and
    `base_s` (the analytical price, seconds), `y` measured seconds. **Fitted
    attributes:** `estimator_`, `feature_names_`, `tree_columns_` (the columns of the trees' input that
    vary over the training rows: the trees are fitted on those), `n_train_`, `kind_rows_`
    (training rows per kind; "" another kind); `calibration_` (the file it was refitted from,
    and where its rows were measured) when loaded from one.
    """

    name: ClassVar[str] = "learned"

    def __init__(self, base="xla-gpu", bound=4.0, max_iter=300, learning_rate=0.05, max_leaf_nodes=15,
                 min_samples_leaf=5, l2_regularization=1.0, random_state=0, kept_kinds=MEASURED_KINDS,
                 floored=True):
        self.base = base
        self.floored = floored
        self.kept_kinds = kept_kinds
        self.bound = bound
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.random_state = random_state

    def _design(self, X) -> np.ndarray:
        """The trees' input: the feature columns fitted on (`feature_names_`; a feature that a kernel's table
        lacks counts 0) and log(`base_s`)."""
        X = pd.DataFrame(X)
        if BASE_COLUMN not in X.columns:
            raise ValueError(f"EfficiencyModel: X lacks the column '{BASE_COLUMN}' (the analytical price, s)")
        base = X[BASE_COLUMN].to_numpy(float)
        if np.any(~np.isfinite(base)) or np.any(base <= 0):
            raise ValueError(f"EfficiencyModel: '{BASE_COLUMN}' must be positive and finite")
        cols = np.column_stack([X[c].to_numpy(float) if c in X.columns else np.zeros(len(X))
                                for c in self.feature_names_])
        return np.column_stack([cols, np.log(base)])

    def fit(self, X, y):
        """Fit the trees to log(y / base_s). **Returns:** self."""
        from sklearn.ensemble import HistGradientBoostingRegressor
        from threadpoolctl import threadpool_limits

        # The feature columns are those of `X` among today's `FEATURES`: a table made before a feature was
        # added still fits (and prices new kernels without it).
        X = pd.DataFrame(X)
        self.feature_names_ = [c for c in (*FEATURES, *STRUCTURE) if c in X.columns]
        if not set(self.feature_names_) & set(FEATURES):
            raise ValueError("EfficiencyModel: X holds none of the kernel feature columns (fit.FEATURES)")
        unknown = set(self.kept_kinds or ()) - set(KINDS)
        if unknown:
            raise ValueError(f"EfficiencyModel: kept_kinds {sorted(unknown)} are not kinds of kernel {KINDS}")
        D = self._design(X)
        y = np.asarray(y, float)
        if y.shape[0] != D.shape[0] or np.any(~np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("EfficiencyModel.fit: y must be positive seconds, one per row of X")
        kinds = self._kind_rows(X)
        train = ~kinds.isin(list(self.kept_kinds or ())).to_numpy()
        D, y, kinds = D[train], y[train], kinds[train]
        if not self.bound > 1:
            raise ValueError(f"EfficiencyModel: bound must be > 1, not {self.bound!r}")
        target = np.log(y) - D[:, -1]
        # The trees see only the design columns that vary over the training rows: a constant column never
        # splits (the trees are the same without it), and building its histograms at every node was 40 % of
        # a fit (62 of the shipped table's 156 columns are constant; a leave-one-source-out fit drops more).
        varies = ~np.all(D == D[:1], axis=0)  # (a column holding NaN stays: the trees split on missing values)
        self.tree_columns_ = np.flatnonzero(varies) if varies.any() else np.array([D.shape[1] - 1])
        with threadpool_limits(limits=1, user_api="openmp"):
            self.estimator_ = HistGradientBoostingRegressor(
                max_iter=self.max_iter, learning_rate=self.learning_rate, max_leaf_nodes=self.max_leaf_nodes,
                min_samples_leaf=self.min_samples_leaf, l2_regularization=self.l2_regularization,
                random_state=self.random_state, early_stopping=False).fit(D[:, self.tree_columns_], target)
        self.n_train_ = int(len(y))
        self.kind_rows_ = kinds.value_counts().to_dict()
        return self

    def _kind_rows(self, X: pd.DataFrame) -> pd.Series:
        """Each row's kind (`KINDS`; "" for another kind, or where the table has no kind columns)."""
        cols = [f"kind_{k}" for k in KINDS if f"kind_{k}" in X.columns and f"kind_{k}" in self.feature_names_]
        if not cols:
            return pd.Series([""] * len(X), index=X.index, dtype=object)
        onehot = X[cols].to_numpy(float) > 0
        names = np.array([c[len("kind_"):] for c in cols], dtype=object)
        return pd.Series(np.where(onehot.any(axis=1), names[onehot.argmax(axis=1)], ""), index=X.index, dtype=object)

    def supported(self, X) -> np.ndarray:
        """Whether the trees saw at least `min_samples_leaf` training rows of each row's kind: fewer cannot
        make a leaf of their own, so the factor would be borrowed from other kinds (a sort priced by what
        GEMMs need); such a row, and one of `kept_kinds` (never trained on), keeps the base price (factor 1)."""
        check_is_fitted(self)
        kinds = self._kind_rows(pd.DataFrame(X))
        return kinds.map(lambda k: self.kind_rows_.get(k, 0) >= self.min_samples_leaf).to_numpy(bool)

    def factor(self, X) -> np.ndarray:
        """The bounded factor the analytical price is multiplied by, per row of `X` (at least
        min(1, `roofline_s` / `base_s`) where `X` has the `roofline_s` column)."""
        from threadpoolctl import threadpool_limits

        check_is_fitted(self)
        with threadpool_limits(limits=1, user_api="openmp"):
            f = self.estimator_.predict(self._design(X)[:, self.tree_columns_])
        f = np.exp(np.clip(np.where(self.supported(X), f, 0.0), -math.log(self.bound), math.log(self.bound)))
        X = pd.DataFrame(X)
        if self.floored and FLOOR_COLUMN in X.columns:
            # (a utilization above the roofline's is not learned, it is extrapolated: the factor stops where
            # the price reaches the roofline's bound, or the base price where that is lower)
            floor = X[FLOOR_COLUMN].to_numpy(float) / X[BASE_COLUMN].to_numpy(float)
            f = np.where(np.isfinite(floor), np.maximum(f, np.minimum(floor, 1.0)), f)
        return f

    def predict(self, X):
        """Predicted seconds: `base_s` times `factor(X)`."""
        return pd.DataFrame(X)[BASE_COLUMN].to_numpy(float) * self.factor(X)

    # ------------------------------------------------------------ CostModel
    def estimate(self, kernel, device) -> KernelEstimate:
        """The base model's estimate of `kernel`, its parts scaled by the learned factor; `details` adds
        `base_model`, `base_time_s`, `efficiency_factor` and, for a loaded calibration, `calibration` (the
        file) and `measured_on` (the device its rows were measured on). A kernel whose features cannot be
        read keeps the base model's price (`note` says so)."""
        from dataclasses import replace

        from ..models import get_model
        from ..features import features_of

        dev = get_device(device) if isinstance(device, str) else device
        base = get_model(self.base).estimate(kernel, dev)
        if not base.priced or base.bound == "free" or not base.time_s > 0:
            return base
        where = dict(getattr(self, "calibration_", {}))
        try:
            x = features_of(kernel, dev)
        except FeatureError as exc:
            return replace(base, note=(base.note + "; " if base.note else "") + f"learned: {self.base}'s price kept "
                           f"({exc})", details={**base.details, "base_model": self.base, **where})
        row = {**x, **structure_of(kernel, dev), BASE_COLUMN: base.time_s, FLOOR_COLUMN: roofline_floor(kernel, dev)}
        f = float(self.factor(pd.DataFrame([row]))[0])
        details = {**base.details, "base_model": self.base, "base_time_s": base.time_s, "efficiency_factor": f,
                   **where}
        return replace(base, compute_s=base.compute_s * f, memory_s=base.memory_s * f,
                       launch_s=base.launch_s * f, time_s=base.time_s * f, details=details,
                       note=(base.note + "; " if base.note else "") + self._says(f))

    def _says(self, factor: float) -> str:
        """Which calibration priced the kernel, and where its rows were measured (a kernel's note)."""
        where = getattr(self, "calibration_", None)
        if not where:
            return f"{self.base} x {factor:.2f} (learned efficiency, fitted in this process)"
        return (f"{self.base} x {factor:.2f}: learned efficiency of calibration {where['calibration']}, "
                f"measured on {where['measured_on']}")


def table_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def refit_efficiency(data: dict, device):
    """The `EfficiencyModel` of a saved `learned` calibration of form `base-efficiency` (see the module
    docstring). **Raises:** `CalibrationError` when its table is missing or changed, or the refit does not
    reproduce the checks."""
    from ..datasets import CalibrationError, calibration_measured_on

    where = data.get("_path")
    how = "remake it with scripts/fit_gpu_learned.py --write"
    entry = data.get("training_table") or {}
    p = Path(entry.get("path", ""))
    p = p if p.is_absolute() else Path(where).parent / p
    if not entry or not p.is_file():
        raise CalibrationError(f"{where}: its training table {p} is missing; {how}")
    if table_sha256(p) != entry.get("sha256"):
        raise CalibrationError(f"{where}: its training table {p} changed since calibration; {how}")
    table = pd.read_parquet(p)
    try:
        model = EfficiencyModel(**dict(data["params"])).fit(table, table[MEASURED_COLUMN].to_numpy(float))
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"{where}: unusable 'learned' calibration ({exc}); {how}") from None
    pred = model.predict(table)
    for c in data.get("checks", []):
        i = int(c["row"])
        if not (0 <= i < len(pred)) or not math.isclose(pred[i], c["prediction_s"], rel_tol=1e-6):
            raise CalibrationError(f"{where}: refitting did not reproduce the saved predictions; {how}")
    measured = calibration_measured_on(where)
    model.calibration_ = {"calibration": Path(where).name, "measured_on": measured or "an unnamed device"}
    return model
