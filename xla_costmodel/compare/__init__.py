"""Cost models compared against measured kernel times, on held-out data.

- `compare_models(models, dataset, split=...)`: accuracy metrics of several models
  on held-out data (`Comparison`, one row per model; `by_source` and
  `by_program` break them down). By default the models are fitted on the
  measurement suite alone and scored on the independent corpus, per source;
  `split="source-cv"` leaves one source out.
- `noise ceiling` (`_ceiling`): the measurement's own reproducibility, the
  best any model can score.

Fitting (features, datasets, saved calibrations, the fitted models,
`calibrate`, the metrics) is `xla_costmodel.fit`, the package below this one.

Heavy modules (scikit-learn, scipy) load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ._compare import DEFAULT_MODELS, SPLITS, Comparison, compare_models

_LAZY = {
    "Comparison": ("._compare", "Comparison"),
    "compare_models": ("._compare", "compare_models"),
    "SPLITS": ("._compare", "SPLITS"),
    "DEFAULT_MODELS": ("._compare", "DEFAULT_MODELS"),
}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    import importlib

    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0], __name__), target[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
