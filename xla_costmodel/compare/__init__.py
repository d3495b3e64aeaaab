"""Cost models compared against measured kernel times, on held-out data.

- `compare_models(models, dataset, split=...)`: accuracy metrics of several models
  on held-out data (`Comparison`, one row per model; `by_source` and
  `by_program` break them down). By default the models are fitted on the
  measurement suite alone and scored on the independent corpus, per source;
  `split="source-cv"` leaves one source out.
- `noise_ceiling` (`noise_by_source`, `program_noise`): the measurement's own
  reproducibility, the best any model can score; `form_ceiling(models, dataset)`:
  what each fittable model's form reaches fitted to the scored kernels themselves.

Fitting (features, datasets, saved calibrations, the fitted models,
`calibrate`, the metrics) is `xla_costmodel.fit`, the package below this one.

Heavy modules (scikit-learn, scipy) load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ._ceiling import noise_by_source, noise_ceiling, program_noise, rounds_of
    from ._compare import DEFAULT_MODELS, SPLITS, Comparison, compare_models, form_ceiling

_LAZY = {
    "Comparison": ("._compare", "Comparison"),
    "compare_models": ("._compare", "compare_models"),
    "SPLITS": ("._compare", "SPLITS"),
    "DEFAULT_MODELS": ("._compare", "DEFAULT_MODELS"),
    "form_ceiling": ("._compare", "form_ceiling"),
    "noise_ceiling": ("._ceiling", "noise_ceiling"),
    "noise_by_source": ("._ceiling", "noise_by_source"),
    "program_noise": ("._ceiling", "program_noise"),
    "rounds_of": ("._ceiling", "rounds_of"),
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
