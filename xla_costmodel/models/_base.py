"""The one interface every cost model implements, and the registry of models.

A *kernel* is what runs as one launch: a `fusion` instruction, or a top-level
instruction that is not fused. A model prices a kernel on a device and says
why (compute, memory or launch bound). For fusion decisions a model also
prices a producer together with its consumers, unfused and fused.

Models are plain frozen dataclasses of their constants (hyper-parameters);
fitted models also follow scikit-learn's estimator API. Built-in models are
registered with `@register_model`; other distributions add models through the
entry-point group `xla_costmodel.models`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:
    from ..devices import DeviceSpec
    from ..hlo import HloInstruction

BOUNDS = ("compute", "memory", "launch", "unknown")


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelEstimate:
    """A model's price for one kernel. Times in seconds.

    - `compute_s`, `memory_s`, `launch_s`: the parts the model combines.
    - `time_s`: the prediction (not necessarily the sum: models overlap parts).
    - `bound`: which part dominates: "compute", "memory", "launch", or "unknown"
      for a kernel the model could not price (then `time_s` is NaN and `note` says why).
    - `details`: model-specific figures (read time per operand, launch dims, ...).
    """

    compute_s: float
    memory_s: float
    launch_s: float
    time_s: float
    bound: str
    note: str = ""
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def priced(self) -> bool:
        return not math.isnan(self.time_s)

    @staticmethod
    def unpriced(reason: str) -> "KernelEstimate":
        nan = float("nan")
        return KernelEstimate(compute_s=nan, memory_s=nan, launch_s=nan, time_s=nan, bound="unknown", note=reason)

    def __add__(self, other: "KernelEstimate") -> "KernelEstimate":
        return KernelEstimate(
            compute_s=self.compute_s + other.compute_s,
            memory_s=self.memory_s + other.memory_s,
            launch_s=self.launch_s + other.launch_s,
            time_s=self.time_s + other.time_s,
            bound=self.bound if self.time_s >= other.time_s else other.bound,
            note="; ".join(n for n in (self.note, other.note) if n),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionEstimate:
    """A model's price for fusing `producer` into all of its `consumers`.

    `time_unfused_s`: producer and consumers as separate kernels.
    `time_fused_s`: the consumers with the producer fused into each of them.
    `priority_s` = time_unfused_s - time_fused_s (positive: fusing saves time).
    """

    time_unfused_s: float
    time_fused_s: float
    producer_s: float = float("nan")
    consumers_s: tuple[float, ...] = ()
    fused_consumers_s: tuple[float, ...] = ()

    @property
    def priority_s(self) -> float:
        return self.time_unfused_s - self.time_fused_s


@runtime_checkable
class CostModel(Protocol):
    """What every cost model provides.

    - `name`: the registry name.
    - `estimate(kernel, device)`: price one kernel (a fusion or a lone instruction).
    - `estimate_fusion(producer, consumers, device)`: price fusing `producer`
      into every one of `consumers` (for priority fusion). Models without an
      analytical rule for this can inherit `FusionByMaterializing`.
    """

    name: str

    def estimate(self, kernel: "HloInstruction", device: "DeviceSpec") -> KernelEstimate: ...

    def estimate_fusion(
        self, producer: "HloInstruction", consumers: Sequence["HloInstruction"], device: "DeviceSpec"
    ) -> FusionEstimate: ...


# ---------------------------------------------------------------------------
# Registry

_MODELS: dict[str, Callable[..., CostModel]] = {}
ENTRY_POINT_GROUP = "xla_costmodel.models"


def register_model(name: str):
    """Class decorator (or call with a factory): make `get_model(name)` build it."""

    def register(factory):
        if name in _MODELS and _MODELS[name] is not factory:
            raise ValueError(f"a cost model named {name!r} is already registered")
        _MODELS[name] = factory
        return factory

    return register


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def model_names() -> tuple[str, ...]:
    """Names `get_model` accepts: built-in models, then installed plugins."""
    _load_builtins()
    names = list(_MODELS)
    names += [n for n in _entry_points() if n not in _MODELS]
    return tuple(names)


def get_model(model: "str | CostModel", **params) -> CostModel:
    """A cost model by registry name (or pass a model through).

    **Arguments:** `model`: a name from `model_names()` or a model object;
    `**params`: constructor arguments (constants) for the model.

    **Returns:** the model. **Raises:** `ValueError` listing valid names.
    """
    if not isinstance(model, str):
        if params:
            return dataclasses.replace(model, **params)
        return model
    _load_builtins()
    factory = _MODELS.get(model)
    if factory is None:
        ep = _entry_points().get(model)
        if ep is None:
            raise ValueError(f"unknown cost model {model!r}; valid names: {', '.join(model_names())}")
        factory = ep.load()
        _MODELS[model] = factory
    return factory(**params)


def _load_builtins() -> None:
    # Importing the package registers the built-in models.
    from . import __name__ as _pkg  # noqa: F401
    import importlib

    importlib.import_module("xla_costmodel.models")
