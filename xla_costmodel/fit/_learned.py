"""`learned`: gradient-boosted trees over the same kernel features, fitted in log time.

A `HistGradientBoostingRegressor` predicts `log(time)` from the features of
`kernel_features` (trees split on thresholds, so the counts need no
transform). With `baseline="fitted"` the trees instead predict the log of
the ratio between the measured time and the hardware-fitted linear model's
prediction (fitted on the same rows), which lets the linear model
extrapolate to sizes the trees never saw while the trees correct its shape.

Saved calibrations do not store trees: the file records the
hyper-parameters, the training datasets (with SHA-256 of each file) and a
few check predictions; loading refits on the same rows (deterministic with
`random_state`) and verifies the checks.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ..features import TASK_BYTES
from ._kernel_model import COLUMN_GROUPS, TIME_FLOOR_S, FeatureCostModel

__all__ = ["LearnedModel"]


class LearnedModel(FeatureCostModel, RegressorMixin, BaseEstimator):
    """Gradient-boosted regression trees on kernel features, in log time (`learned`).

    **Arguments (hyper-parameters):**

    - `max_iter`, `learning_rate`, `max_leaf_nodes`, `min_samples_leaf`,
      `l2_regularization`, `random_state`: those of scikit-learn's
      `HistGradientBoostingRegressor`.
    - `baseline`: `None` (trees predict log time) or `"fitted"` (trees
      predict log(time / linear model), see the module docstring).
    - `task_bytes`: as for `FittedModel`.

    **Fitted attributes:** `estimator_` (the trees), `baseline_` (the
    `FittedModel` or None), `n_iter_` (boosting iterations),
    `feature_names_`, `support_`, `n_train_`, `n_features_in_`, `tree_columns_`
    (the columns that vary over the training rows: the trees are fitted on those).
    """

    name: ClassVar[str] = "learned"

    def __init__(self, max_iter=300, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=5,
                 l2_regularization=1.0, random_state=0, baseline="fitted", task_bytes=TASK_BYTES):
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.random_state = random_state
        self.baseline = baseline
        self.task_bytes = task_bytes

    def fit(self, X, y, sample_weight=None):
        """Fit the trees to log(y). **Arguments:** `X` features, `y` seconds (> 0). **Returns:** self."""
        from sklearn.ensemble import HistGradientBoostingRegressor

        from ._fitted import FittedModel

        if self.baseline not in (None, "fitted"):
            raise ValueError(f"baseline must be None or 'fitted', not {self.baseline!r}")
        X, y = validate_data(self, self._columns(X), y, dtype=np.float64, y_numeric=True)
        y = np.asarray(y, dtype=float)
        if np.any(y <= 0):
            raise ValueError("LearnedModel.fit: times y must be positive (it is fitted in log time)")
        if np.any(X < 0):
            raise ValueError("Negative values in data passed to LearnedModel.fit: feature counts are never negative")
        target = np.log(y)
        self.baseline_ = None
        if self.baseline == "fitted":
            base = FittedModel(task_bytes=self.task_bytes).fit(X, y, sample_weight=sample_weight)
            self.baseline_ = base
            target = target - np.log(base.predict(X))
        # One OpenMP thread: the trees are small, and on a busy machine a
        # thread pool per fit is mostly spinning (30 s instead of 1 s here).
        from threadpoolctl import threadpool_limits

        # The trees see only the feature columns that vary over the training rows: a constant column never
        # splits (the trees are the same without it), and its histograms were most of a fit (84 of the host
        # dataset's 128 columns are constant: a fit 1.9 s -> 0.9 s).
        varies = ~np.all(X == X[:1], axis=0)
        self.tree_columns_ = np.flatnonzero(varies) if varies.any() else np.arange(min(1, X.shape[1]))
        with threadpool_limits(limits=1, user_api="openmp"):
            self.estimator_ = self._trees(HistGradientBoostingRegressor, X[:, self.tree_columns_], target,
                                          sample_weight)
        self.n_iter_ = int(self.estimator_.n_iter_)
        self.feature_names_ = self._names(X.shape[1])
        self.support_ = np.count_nonzero(X, axis=0).astype(int)
        self.n_train_ = int(len(y))
        return self

    def _trees(self, cls, X, target, sample_weight):
        return cls(
            max_iter=self.max_iter,
            learning_rate=self.learning_rate,
            max_leaf_nodes=self.max_leaf_nodes,
            min_samples_leaf=self.min_samples_leaf,
            l2_regularization=self.l2_regularization,
            random_state=self.random_state,
            early_stopping=False,
        ).fit(X, target, sample_weight=sample_weight)

    def predict(self, X):
        """Predicted seconds per kernel. **Arguments:** `X`, as for `fit`."""
        check_is_fitted(self)
        X = validate_data(self, self._columns(X), dtype=np.float64, reset=False)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="openmp"):
            log_t = self.estimator_.predict(X[:, self.tree_columns_])
        if self.baseline_ is not None:
            log_t = log_t + np.log(self.baseline_.predict(X))
        return np.maximum(np.exp(log_t), TIME_FLOOR_S)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.positive_only = True
        tags.target_tags.positive_only = True
        return tags

    # ------------------------------------------------------------ CostModel
    def _explain(self, x: dict[str, float]):
        """Split a prediction by zeroing groups of features (trees have no additive parts)."""
        import pandas as pd

        names = self.feature_names_
        if any(n not in COLUMN_GROUPS for n in names):
            raise ValueError("this LearnedModel was fitted on unnamed columns; fit it on a kernel_features table")
        full = np.array([[x.get(n, 0.0) for n in names]])
        launch_only = np.where([COLUMN_GROUPS[n] == "launch" for n in names], full, 0.0)
        no_compute = np.where([COLUMN_GROUPS[n] != "compute" for n in names], full, 0.0)
        frame = pd.DataFrame(np.vstack([full, launch_only, no_compute]), columns=names)
        t, t_launch, t_nocompute = (float(v) for v in self.predict(frame))
        launch = min(t_launch, t)
        memory = max(min(t_nocompute, t) - launch, 0.0)
        compute = max(t - launch - memory, 0.0)
        return compute, memory, launch, t, None

    def _linear_part(self):
        return getattr(self, "baseline_", None)

    # ---------------------------------------------------------- persistence
    def to_calibration(self) -> dict:
        """Hyper-parameters for a calibration file (the datasets and checks are added by `calibrate`)."""
        check_is_fitted(self)
        return {"features": list(self.feature_names_), "params": self.get_params()}

    @classmethod
    def from_calibration(cls, device) -> "LearnedModel":
        """Refit the model saved by `xla_costmodel.calibrate` for `device` from its datasets.

        **Raises:** `CalibrationError` when there is no calibration, a dataset
        is missing or changed, or the refit does not reproduce the checks.
        """
        from ._refit import refit_learned

        return refit_learned(device, cls)
