"""What the `fitted` and `learned` models share: pricing one HLO kernel from its features.

Both are scikit-learn estimators on the feature table of `kernel_features`
and implement the `CostModel` protocol on top: `estimate(kernel, device)`
computes the kernel's features and predicts. An estimator that was not
fitted loads the saved calibration for the device it is asked about
(`calibration/<device>_<model>.json`, made by `xla_costmodel.calibrate`).
"""

from __future__ import annotations

import math
from typing import Any

from ..analysis.opcodes import CONTROL_FLOW_OPCODES, FREE_OPCODES
from ..models import FusionByMaterializing, KernelEstimate
from ..models.pricing import dominant_bound
from ..measure import resolve_device
from ..features import (CONTEXT_FEATURE_GROUPS, CONTEXT_FEATURES, FEATURE_GROUPS, FEATURES, FeatureError,
                        context_features, features_of)
from ._measured_rates import priced_at_measured_rates

#: The part of a prediction (compute, memory, launch) each column adds to, kernel and context features alike.
COLUMN_GROUPS: dict[str, str] = {**FEATURE_GROUPS, **CONTEXT_FEATURE_GROUPS}

#: Smallest time a model predicts (seconds): a relative-error model must never predict 0 or less.
TIME_FLOOR_S = 1e-9


def flops_and_bytes(kernel) -> tuple[float, float]:
    """HloCostAnalysis-style flops (transcendentals included) and bytes accessed of a kernel."""
    try:
        from ..analysis import kernel_cost

        c = kernel_cost(kernel, "base")
        return float(c.flops + c.transcendentals), float(c.bytes_read + c.bytes_written)
    except Exception:  # details only; a kernel the analysis cannot read still gets a price
        return math.nan, math.nan


class FeatureCostModel(FusionByMaterializing):
    """Mixin: `estimate` for an estimator with `predict` over `FEATURES` (see module docstring)."""

    name = "feature-model"
    #: The feature-table columns the estimator reads (a table with more columns is narrowed to these).
    feature_columns: tuple[str, ...] = FEATURES

    def _columns(self, X):
        """`X` narrowed to `feature_columns` when it is a table holding them (a feature table from
        `features.prepare` carries the context features too, whatever model reads it)."""
        import pandas as pd

        # (any other table, e.g. a few named columns, is the estimator's input as it is: scikit-learn's way)
        if isinstance(X, pd.DataFrame) and len(X.columns) > len(self.feature_columns):
            if all(c in X.columns for c in self.feature_columns):
                return X[list(self.feature_columns)]
        return X

    # -- to provide: `_calibration_model_name`, `from_calibration(device)`, `_explain(x)`.
    def _names(self, n: int) -> list[str]:
        """Feature names of the `n` columns the estimator was fitted on."""
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            return [str(x) for x in names]
        cols = self.feature_columns
        return list(cols) if n == len(cols) else [f"x{i}" for i in range(n)]

    def _fitted_for(self, device):
        """This estimator if it is fitted, else the saved calibration for `device` (cached)."""
        from sklearn.utils.validation import check_is_fitted
        from sklearn.exceptions import NotFittedError

        try:
            check_is_fitted(self)
            return self
        except NotFittedError:
            pass
        cache = self.__dict__.setdefault("_by_device", {})
        key = device.name
        if key not in cache:
            cache[key] = type(self).from_calibration(device)
        return cache[key]

    def feature_vector(self, kernel, device) -> dict[str, float]:
        """The kernel's features as this model computes them (its `task_bytes`), with its schedule
        context (`features._context`) when the model reads context features."""
        from ..features import device_facts

        x = features_of(kernel, device, task_bytes=getattr(self, "task_bytes", None) or _default_task_bytes())
        if any(c in CONTEXT_FEATURES for c in self.feature_columns):
            x.update(context_features(kernel, device_facts(device)))
        return x

    def estimate(self, kernel, device) -> KernelEstimate:
        """Price one kernel: its features, then the model's prediction.

        **Arguments:** `kernel`, an `HloInstruction` run as one kernel;
        `device`, a `DeviceSpec` or name. A model that was not fitted uses the
        device's saved calibration.

        **Returns:** a `KernelEstimate`: `compute_s`, `memory_s`, `launch_s`
        are the parts of the prediction due to arithmetic, data movement and
        launching; `details` has `features` (the nonzero ones),
        `contributions` (seconds per feature, for the linear model),
        `flops`, `bytes_accessed`, `unsupported`: features this kernel
        has that no training kernel had (their cost is not modelled; `note`
        says so), and `measured_rates` where such a feature's work is priced
        at a rate the host measured instead (`fit._measured_rates`: a linear
        model's grouped convolutions on YNNPACK and int8 matmuls, or the
        linear baseline of a `learned` one, its trees' ratio kept; by
        feature: `count`, `measurement`, `per_second`, `seconds`, and
        `replaces_s`, what the fitted weights charged for the same work).

        **Raises:** `CalibrationError` when the model is not fitted and the
        device has no (valid) saved calibration.
        """
        from ..models.pricing import warn_unpriced

        dev = resolve_device(device)
        op = kernel.opcode
        if op in FREE_OPCODES:
            return KernelEstimate.free(f"{op} runs no code")
        if op in CONTROL_FLOW_OPCODES:
            why = f"'{op}' is control flow, not a kernel: price the computations it runs"
            warn_unpriced(self.name, kernel, why)
            return KernelEstimate.unpriced(why)
        model = self._fitted_for(dev)
        if not isinstance(model, FeatureCostModel):
            # (the device's calibration holds another form of the model, e.g. a learned efficiency over an
            # analytical model, `fit._efficiency`: it prices the kernel itself)
            return model.estimate(kernel, dev)
        try:
            x = model.feature_vector(kernel, dev)
        except FeatureError as exc:
            warn_unpriced(self.name, kernel, str(exc))
            return KernelEstimate.unpriced(str(exc))
        compute, memory, launch, time_s, contrib = model._explain(x)
        linear = model._linear_part()
        measured = priced_at_measured_rates(linear, kernel, dev, x) if linear is not None else []
        if measured and contrib is None:
            # Trees over a linear baseline predict the ratio to it: the baseline prices the work no
            # training kernel had at the measured rate, the trees' ratio stays.
            base = float(linear._explain(x)[3])
            rebased = base + sum(p.seconds - sum(p.replaces_s.values()) for p in measured)
            scaled = time_s * max(rebased, TIME_FLOOR_S) / max(base, TIME_FLOOR_S)
            compute, time_s = max(compute + scaled - time_s, 0.0), scaled
        elif measured:
            # Work no training kernel had, at the host's measured rate (`_measured_rates`), in place of
            # what the fitted weights charged for it.
            for part in measured:
                for name, seconds in part.replaces_s.items():
                    contrib[name] = contrib.get(name, 0.0) - seconds
                contrib[part.feature] = contrib.get(part.feature, 0.0) + part.seconds
            contrib = {n: c for n, c in contrib.items() if abs(c) > 1e-18}
            compute, memory, launch = (float(sum(c for n, c in contrib.items() if COLUMN_GROUPS.get(n) == g))
                                       for g in ("compute", "memory", "launch"))
            time_s = float(sum(contrib.values()))
        time_s = max(float(time_s), TIME_FLOOR_S)
        rated = {p.feature for p in measured}
        unsupported = [f for f in model.unsupported_features(x) if f not in rated]
        flops, nbytes = flops_and_bytes(kernel)
        notes = []
        if measured:
            notes.append("no training kernel had " + ", ".join(
                f"{p.feature} (priced at this host's measured {p.measurement}, {p.per_second:.3g}/s)"
                for p in measured))
        if unsupported:
            notes.append("no training kernel had " + ", ".join(unsupported) + ": their cost is not modelled")
        note = "; ".join(notes)
        details: dict[str, Any] = {
            "flops": flops,
            "bytes_accessed": nbytes,
            "features": {k: v for k, v in x.items() if v},
            "unsupported": unsupported,
        }
        if measured:
            details["measured_rates"] = {
                p.feature: {"count": p.count, "measurement": p.measurement, "per_second": p.per_second,
                            "seconds": p.seconds, "replaces_s": dict(p.replaces_s)}
                for p in measured
            }
        if contrib is not None:
            details["contributions"] = contrib
        return KernelEstimate(
            compute_s=compute,
            memory_s=memory,
            launch_s=launch,
            time_s=time_s,
            bound=dominant_bound(compute, memory, launch),
            note=note,
            details=details,
        )

    def _linear_part(self):
        """The fitted linear model (per-feature weights and support) under this model's prediction, whose
        unsupported work `_measured_rates` prices at measured rates; None where there is none."""
        return None

    def unsupported_features(self, x: dict[str, float]) -> list[str]:
        support = getattr(self, "support_", None)
        names = getattr(self, "feature_names_", None)
        if support is None or names is None:
            return []
        return [n for n, s in zip(names, support) if s == 0 and x.get(n, 0.0)]


def _default_task_bytes() -> int:
    from ..features import TASK_BYTES

    return TASK_BYTES
