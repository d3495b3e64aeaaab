"""Fitted and learned cost models, calibration, and model comparison.

- `kernel_features(kernels_or_rows, device)`: the feature table of the
  hardware-fitted models (Stevens & Klöckner's counts, read from HLO).
- Models (registered with the cost-model registry, so `get_model(name)` and
  `analyze(..., model=name)` find them):
  `fitted` (`FittedModel`: linear, relative-error least squares),
  `learned` (`LearnedModel`: gradient-boosted trees in log time),
  `roofline-calibrated` and `xla-gpu-calibrated` (`CalibratedModel`: the
  analytical models with fitted device parameters).
- `calibrate(device="host", quick=False, dataset=None)`: fit them all to
  measurements and save `calibration/<device>_<model>.json`;
  `calibrate_devices(dataset)`: the same per device of a dataset measured on
  several (a fleet run's), and the `fitted` model across them.
- `compare(models, dataset, split=...)`: accuracy metrics on held-out data.
- `evaluate(fn, *args, device="host", models=...)`: measure one program and
  predict it, joined per kernel (`Evaluation`).

Heavy modules (scikit-learn, scipy) load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models._base import register_model

if TYPE_CHECKING:  # pragma: no cover
    from ._calibrate import calibrate
    from ._devices import calibrate_devices
    from ._calibrated import CalibratedModel, host_as_gpu
    from ._compare import Comparison, compare
    from ._evaluate import Evaluation, evaluate
    from ._features import FEATURES, FeatureError, kernel_features
    from ._fitted import FittedModel
    from ._learned import LearnedModel
    from ._metrics import accuracy, fusion_metrics, sk_gmre
    from ._store import CalibrationError, load_calibration

_LAZY = {
    "calibrate": ("._calibrate", "calibrate"),
    "FITTABLE_MODELS": ("._calibrate", "FITTABLE_MODELS"),
    "calibrate_devices": ("._devices", "calibrate_devices"),
    "CalibratedModel": ("._calibrated", "CalibratedModel"),
    "host_as_gpu": ("._calibrated", "host_as_gpu"),
    "Comparison": ("._compare", "Comparison"),
    "compare": ("._compare", "compare"),
    "SPLITS": ("._compare", "SPLITS"),
    "DEFAULT_MODELS": ("._compare", "DEFAULT_MODELS"),
    "Evaluation": ("._evaluate", "Evaluation"),
    "evaluate": ("._evaluate", "evaluate"),
    "FEATURES": ("._features", "FEATURES"),
    "FEATURE_GROUPS": ("._features", "FEATURE_GROUPS"),
    "FeatureError": ("._features", "FeatureError"),
    "kernel_features": ("._features", "kernel_features"),
    "FittedModel": ("._fitted", "FittedModel"),
    "LearnedModel": ("._learned", "LearnedModel"),
    "accuracy": ("._metrics", "accuracy"),
    "fusion_metrics": ("._metrics", "fusion_metrics"),
    "sk_gmre": ("._metrics", "sk_gmre"),
    "CalibrationError": ("._store", "CalibrationError"),
    "load_calibration": ("._store", "load_calibration"),
    "calibration_path": ("._store", "calibration_path"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target[0], __name__), target[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


# ---------------------------------------------------------------------------
# Registry entries: factories, so that importing the package stays cheap.


@register_model("fitted")
def _fitted(**params):
    """The hardware-fitted linear model; unfitted, it uses the device's saved calibration."""
    from ._fitted import FittedModel

    return FittedModel(**params)


@register_model("learned")
def _learned(**params):
    """Gradient-boosted trees on kernel features; unfitted, it refits from the device's saved calibration."""
    from ._learned import LearnedModel

    return LearnedModel(**params)


@register_model("roofline-calibrated")
def _roofline_calibrated(**params):
    """The roofline on device parameters fitted to measurements (saved calibration)."""
    from ._calibrated import CalibratedModel

    return CalibratedModel("roofline", **params)


@register_model("xla-gpu-calibrated")
def _xla_gpu_calibrated(**params):
    """XLA's GPU model on device parameters fitted to measurements (saved calibration)."""
    from ._calibrated import CalibratedModel

    return CalibratedModel("xla-gpu", **params)
