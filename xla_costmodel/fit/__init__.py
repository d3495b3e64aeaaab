"""Fitting cost models to measured kernel times: features, datasets, saved calibrations, fitted models.

- `kernel_features(kernels_or_rows, device)`: the feature table of the
  hardware-fitted models (Stevens & Klöckner's counts, read from HLO; their
  home is `xla_costmodel.features`, the package below this one, re-exported
  here with `FEATURES` and the context features for the fitting workflow).
- Datasets: calibration-dataset rows as training and test data
  (`xla_costmodel.datasets`, the package below this one).
- Saved calibrations (their home is `xla_costmodel.datasets` too; offered
  here for the fitting workflow): one JSON file per (device, model), written
  to the user's data directory (`user_data_dir()`) and read from there
  first, then from the shipped `calibration/` (`calibration_in_use` says
  which file a model reads); a quick calibration, and one that scored worse
  on its held-out rows than the one in use, go to folders no model reads
  unless asked (`quick_dir()`, `held_back_dir()`); `measuring_device` is the
  description of the machine that measured a dataset;
  `calibrate(device="host", quick=False, dataset=None)` fits every fittable
  model to measurements of that device (`DeviceMismatchError` for another
  device's) and saves them;
  `calibrate_devices(dataset)` does the same per device of a dataset measured
  on several (a fleet run's), and fits the `fitted` model across them.
- Models (registered with the cost-model registry, so `get_model(name)` and
  `analyze(..., model=name)` find them): `fitted` (`FittedModel`: linear,
  relative-error least squares), `learned` (`LearnedModel`: gradient-boosted
  trees in log time; on `h100-sxm` its shipped calibration is of another
  form, `EfficiencyModel`: `xla-gpu` times a learned, bounded efficiency,
  `fit._efficiency`), `roofline-calibrated` and `xla-gpu-calibrated`
  (`CalibratedModel`: the analytical models with fitted device parameters),
  `context` and `learned-context` (`ContextModel`, `LearnedContextModel`: the
  same two over the kernel's schedule context as well, `features._context`),
  and the model-name combinators `scaled(...)`, `scaled-min(...)`,
  `scaled-max-savings(...)` (`ScaledModel`: a model on the scale of
  measured times).
- Whole programs: the device's fitted per-run overhead (`ProgramOverhead`,
  saved by `calibrate`) that `xla_costmodel.program_time` adds to the
  model's kernels (`ProgramTime`).
- Metrics (`accuracy`, `fusion_metrics`, `sk_error`): how far predictions are
  from measured times (what fitting reports and `compare` scores); their home
  is `xla_costmodel.metrics`, re-exported here for the fitting workflow.

Heavy modules (scikit-learn, scipy) load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models import register_model
from . import _scaled  # noqa: F401  (registers the `scaled` model-name combinators)
from ._scaled import ScaledModel as ScaledModel

if TYPE_CHECKING:  # pragma: no cover
    from ._calibrate import FITTABLE_MODELS, calibrate
    from ._calibrated import CalibratedModel, host_as_gpu
    from ._devices import calibrate_devices
    from ..features import FEATURE_GROUPS, FEATURES, FeatureError
    from ._fitted import FittedModel
    from ._learned import LearnedModel
    from ._efficiency import EfficiencyModel
    from ..features import CONTEXT_FEATURES, context_features
    from ._context_model import ContextModel, LearnedContextModel
    from ._program import ProgramOverhead, ProgramTime
    from ..features import kernel_features
    from ..metrics import accuracy, fusion_metrics, sk_error
    from ..datasets import CalibrationError, DeviceMismatchError, calibration_path, load_calibration, user_data_dir
    from ..datasets import MachineMismatchWarning, calibration_in_use, held_back_dir, measuring_device, quick_dir
    from ..datasets import calibration_measured_on
    from ._program import PROGRAM_OVERHEAD

_LAZY = {
    "calibrate": ("._calibrate", "calibrate"),
    "FITTABLE_MODELS": ("._calibrate", "FITTABLE_MODELS"),
    "calibrate_devices": ("._devices", "calibrate_devices"),
    "CalibratedModel": ("._calibrated", "CalibratedModel"),
    "host_as_gpu": ("._calibrated", "host_as_gpu"),
    "FEATURES": ("..features", "FEATURES"),
    "FEATURE_GROUPS": ("..features", "FEATURE_GROUPS"),
    "FeatureError": ("..features", "FeatureError"),
    "kernel_features": ("..features", "kernel_features"),
    "FittedModel": ("._fitted", "FittedModel"),
    "LearnedModel": ("._learned", "LearnedModel"),
    "EfficiencyModel": ("._efficiency", "EfficiencyModel"),
    "ContextModel": ("._context_model", "ContextModel"),
    "LearnedContextModel": ("._context_model", "LearnedContextModel"),
    "CONTEXT_FEATURES": ("..features", "CONTEXT_FEATURES"),
    "context_features": ("..features", "context_features"),
    "accuracy": ("..metrics", "accuracy"),
    "fusion_metrics": ("..metrics", "fusion_metrics"),
    "sk_error": ("..metrics", "sk_error"),
    "CalibrationError": ("..datasets", "CalibrationError"),
    "DeviceMismatchError": ("..datasets", "DeviceMismatchError"),
    "MachineMismatchWarning": ("..datasets", "MachineMismatchWarning"),
    "user_data_dir": ("..datasets", "user_data_dir"),
    "load_calibration": ("..datasets", "load_calibration"),
    "calibration_path": ("..datasets", "calibration_path"),
    "calibration_in_use": ("..datasets", "calibration_in_use"),
    "measuring_device": ("..datasets", "measuring_device"),
    "quick_dir": ("..datasets", "quick_dir"),
    "held_back_dir": ("..datasets", "held_back_dir"),
    "calibration_measured_on": ("..datasets", "calibration_measured_on"),
    "PROGRAM_OVERHEAD": ("._program", "PROGRAM_OVERHEAD"),
    "ProgramTime": ("._program", "ProgramTime"),
    "ProgramOverhead": ("._program", "ProgramOverhead"),
}

__all__ = sorted([*_LAZY, "ScaledModel"])


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


@register_model("context")
def _context(**params):
    """The hardware-fitted linear model over kernel and schedule-context features (`features._context`)."""
    from ._context_model import ContextModel

    return ContextModel(**params)


@register_model("learned-context")
def _learned_context(**params):
    """Gradient-boosted trees over kernel and schedule-context features (`features._context`)."""
    from ._context_model import LearnedContextModel

    return LearnedContextModel(**params)


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
