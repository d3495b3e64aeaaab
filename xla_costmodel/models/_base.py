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
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, runtime_checkable

from ._plugins import ENTRY_POINT_GROUP, ModelPluginError, describe_entry_point, load_plugin

if TYPE_CHECKING:
    from ..devices import DeviceSpec
    from ..hlo import HloInstruction

BOUNDS = ("compute", "memory", "network", "launch", "unknown", "free")


class CostModelWarning(UserWarning):
    """A model could not price a kernel (it is reported as unpriced, never as zero)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelEstimate:
    """A model's price for one kernel. Times in seconds.

    - `compute_s`, `memory_s`, `launch_s`: the parts the model combines.
    - `time_s`: the prediction (not necessarily the sum: models overlap parts).
    - `bound`: which part dominates: "compute", "memory", "network" (a
      collective whose transfer between devices dominates; that time is in
      `memory_s`), "launch", "free" for
      an instruction that runs no code (bitcast, tuple, parameter, ...: all
      times 0), or "unknown" for a kernel the model could not price (then
      `time_s` is NaN and `note` says why).
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
    def unpriced(reason: str, details: dict[str, Any] | None = None) -> "KernelEstimate":
        nan = float("nan")
        return KernelEstimate(
            compute_s=nan, memory_s=nan, launch_s=nan, time_s=nan, bound="unknown", note=reason,
            details=dict(details or {}),
        )

    @staticmethod
    def free(note: str = "") -> "KernelEstimate":
        """An instruction that runs no code of its own: every time is 0."""
        return KernelEstimate(compute_s=0.0, memory_s=0.0, launch_s=0.0, time_s=0.0, bound="free", note=note)

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
    """What every cost model provides: the whole contract of a plugin.

    - `name`: the registry name.
    - `estimate(kernel, device)`: price one kernel (a fusion or a lone instruction).

    What a model may offer besides, each declared by a protocol of its own
    and found by `isinstance`, never by probing attributes: `EstimatesFusion`
    (its own rule for pricing a producer fused into its consumers; without
    one, fusion passes build each candidate fusion and price it with
    `estimate`: `with_fusion_rule`), `PricesByContent` (fusion passes then
    price each distinct kernel once), `FusionPricing` (a fast pricer of
    producer-consumer pairs), `CachesInstructions` (told when an instruction
    changes in place).
    """

    name: str

    def estimate(self, kernel: "HloInstruction", device: "DeviceSpec") -> KernelEstimate: ...


@runtime_checkable
class EstimatesFusion(CostModel, Protocol):
    """A cost model that prices fusing a producer into its consumers itself (for priority fusion):
    `estimate_fusion(producer, consumers, device)`. Models without an analytical rule for this
    inherit `FusionByMaterializing`; a model that has neither is given it by `with_fusion_rule`,
    which every way of naming or passing a model goes through (`get_model`)."""

    def estimate_fusion(
        self, producer: "HloInstruction", consumers: Sequence["HloInstruction"], device: "DeviceSpec"
    ) -> FusionEstimate: ...


@runtime_checkable
class PricesByContent(Protocol):
    """A model that may promise that a kernel's time depends only on its content.

    `prices_by_content = True` promises: only on its opcode, shapes,
    attributes other than metadata, called computations, operand shapes and
    which operands coincide; never on names or on instructions outside the
    kernel. Fusion passes then price each distinct kernel once
    (`xla_costmodel.hlo._structure.ContentIds`). Use `prices_by_content(model)`.
    """

    prices_by_content: bool


@runtime_checkable
class PricesTrialFusions(Protocol):
    """A model whose `estimate` may be handed a fusion consumer grown in place for the call
    (`fusion_engine.trial_fusion`) instead of a detached copy of the fusion.

    `prices_trial_fusions = True` promises: it prices by content
    (`PricesByContent`), and it keeps nothing of the kernel or its fused
    body after the call, other than in caches that check the body's growths
    and register with `fusion_engine.follows_growths`. A fusion pass
    then prices a candidate fusion into a large fusion in the time of the
    producer's size, not the consumer's. Use `prices_trial_fusions(model)`.
    """

    prices_trial_fusions: bool


class PairPricer(Protocol):
    """Prices of (producer, consumer) pairs for a fusion pass (see `FusionPricing`)."""

    def pair(self, producer: "HloInstruction", consumer: "HloInstruction") -> tuple[float, float, float]:
        """`(T(producer), T(consumer), T_fused(producer, consumer))`, launches included: exactly
        `estimate_fusion(producer, [consumer])`'s `(producer_s, consumers_s[0], fused_consumers_s[0])`."""
        ...

    def invalidate(self, instr: "HloInstruction") -> None:
        """Forget what is known of `instr` (it changed in place)."""
        ...


@runtime_checkable
class FusionPricing(Protocol):
    """A model with a pricer of producer-consumer pairs faster than `estimate_fusion`
    (XLA's `GpuPerformanceModelCache`: per-instruction records kept per version)."""

    def fusion_pricer(self, device: "DeviceSpec", version: Callable[["HloInstruction"], int] | None = None,
                      content: Callable[["HloInstruction"], Any] | None = None) -> PairPricer:
        """A `PairPricer` for `device`; `version(instr)` changes whenever `instr` changes in place;
        `content(instr)`: its content id (`hlo._structure.ContentIds.kernel`), passed only to a model
        that `prices_by_content` (None: not known)."""
        ...


@runtime_checkable
class HoldsModels(Protocol):
    """A model made of other models (a combination, a scaled model): it prices a device only
    where each model it holds does (`models.check_prices_device`)."""

    @property
    def held_models(self) -> tuple: ...


@runtime_checkable
class CombinesFusionTimes(Protocol):
    """A model whose `estimate_fusion` combines its members' (`held_models`) by a rule on each
    member's `(time_unfused_s, time_fused_s)`: a fusion pass may then price pairs with each member
    (and its caches) and combine per producer (`combine_fusion_times`), with the same figures."""

    @property
    def held_models(self) -> tuple: ...

    def combine_fusion_times(self, times: Sequence[tuple[float, float]]) -> tuple[float, float]:
        """`(time_unfused_s, time_fused_s)` of the combination from each member's, in member order."""
        ...


@runtime_checkable
class CachesInstructions(Protocol):
    """A model that caches what it knows per instruction object: a fusion pass calls
    `invalidate(instr)` when `instr` changes in place (a fusion that grows)."""

    def invalidate(self, instr: "HloInstruction") -> None: ...


@runtime_checkable
class HasParams(Protocol):
    """A model with scikit-learn's parameter API (the fitted models): `get_model(model, **params)`
    copies it with `clone` and `set_params`."""

    def get_params(self, deep: bool = True) -> dict[str, Any]: ...

    def set_params(self, **params: Any) -> Any: ...


def prices_by_content(model: CostModel) -> bool:
    """Whether `model` promises to price kernels by their content only (`PricesByContent`)."""
    return isinstance(model, PricesByContent) and bool(model.prices_by_content)


def prices_trial_fusions(model: CostModel) -> bool:
    """Whether `model` may price fusions grown in place for the call (`PricesTrialFusions`)."""
    return (isinstance(model, PricesTrialFusions) and bool(model.prices_trial_fusions)
            and prices_by_content(model))


def dominant_bound(compute_s: float, memory_s: float, launch_s: float) -> str:
    """The largest of the three parts names the bound (ties: compute, then memory)."""
    if launch_s > compute_s and launch_s > memory_s:
        return "launch"
    return "compute" if compute_s >= memory_s else "memory"


def warn_unpriced(model_name: str, kernel: "HloInstruction", reason: str, stacklevel: int = 3) -> None:
    """Say that `kernel` could not be priced (a `CostModelWarning` naming it)."""
    import warnings

    comp = kernel.computation.name if kernel.computation is not None else "?"
    warnings.warn(
        f"{model_name}: cannot price '{kernel.name}' ({kernel.opcode}) in computation '{comp}': {reason}",
        CostModelWarning,
        stacklevel=stacklevel,
    )


def materialize_fusion(producer: "HloInstruction", consumer: "HloInstruction") -> "HloInstruction":
    """The fusion of `producer` into `consumer`, built detached from the module
    (`xla_costmodel.fusion_engine.hypothetical_fusion`; the module is not changed).

    A multi-output producer that `consumer` reads through get-tuple-elements is
    fused by first pulling those get-tuple-elements into the consumer.
    """
    from ..fusion_engine import hypothetical_fusion

    if any(o is producer for o in consumer.operands):
        return hypothetical_fusion(producer, consumer)
    fused = consumer
    for o in list(consumer.operands):
        if o.opcode == "get-tuple-element" and o.operands and o.operands[0] is producer:
            if any(x is o for x in fused.operands):
                fused = hypothetical_fusion(o, fused)
    if not any(o is producer for o in fused.operands):
        raise ValueError(f"'{producer.name}' is not an operand of '{consumer.name}'")
    return hypothetical_fusion(producer, fused)


class FusionByMaterializing:
    """`estimate_fusion` for models that price any kernel but have no producer-consumer rule.

    Prices the producer and every consumer as they are, then every consumer
    with the producer fused into it: the fusion is built detached from the
    module (`materialize_fusion`, i.e. `fusion_engine.hypothetical_fusion`) and
    priced with the model's own `estimate`. As in XLA's `EstimateRunTimes`, each kernel's
    time includes its launch, so the unfused side pays one launch more.
    """

    def estimate_fusion(
        self, producer: "HloInstruction", consumers: Sequence["HloInstruction"], device: "DeviceSpec"
    ) -> FusionEstimate:
        p = self.estimate(producer, device)  # type: ignore[attr-defined]
        unfused = [self.estimate(c, device) for c in consumers]  # type: ignore[attr-defined]
        fused = [self.estimate_fused(producer, c, device) for c in consumers]
        return FusionEstimate(
            time_unfused_s=p.time_s + sum(c.time_s for c in unfused),
            time_fused_s=sum(f.time_s for f in fused),
            producer_s=p.time_s,
            consumers_s=tuple(c.time_s for c in unfused),
            fused_consumers_s=tuple(f.time_s for f in fused),
        )

    def estimate_fused(self, producer: "HloInstruction", consumer: "HloInstruction",
                       device: "DeviceSpec") -> KernelEstimate:
        """The estimate of `consumer` with `producer` fused into it: the consumer grown in place for
        the call where the model promises it may be (`PricesTrialFusions`), else a detached copy
        (`materialize_fusion`), freed once priced."""
        from ..fusion_engine import can_try_fusion, discard_fusion, trial_fusion

        if prices_trial_fusions(self) and can_try_fusion(producer, consumer):  # type: ignore[arg-type]
            with trial_fusion(producer, consumer) as grown:
                return self.estimate(grown, device)  # type: ignore[attr-defined]
        fused = materialize_fusion(producer, consumer)
        estimate = self.estimate(fused, device)  # type: ignore[attr-defined]
        discard_fusion(fused)
        return estimate


@dataclass(frozen=True, eq=False)
class MaterializedFusions(FusionByMaterializing):
    """A cost model that has only `estimate` (a plain `CostModel`), given `FusionByMaterializing`'s
    rule for fusions: each candidate fusion is built and priced with the model's own `estimate`.
    Everything else (`name`, its parameters, the optional protocols it declares) is the model's."""

    model: Any

    def estimate(self, kernel: "HloInstruction", device: "DeviceSpec") -> KernelEstimate:
        return self.model.estimate(kernel, device)

    def __getattr__(self, attribute: str):  # only for what this class lacks: the model's own
        if attribute == "model":  # (not yet set: while unpickling or copying)
            raise AttributeError(attribute)
        return getattr(self.model, attribute)

    def __repr__(self) -> str:
        return repr(self.model)


def with_fusion_rule(model: CostModel) -> "EstimatesFusion":
    """`model` itself when it prices fusions (`EstimatesFusion`), else `model` with
    `FusionByMaterializing`'s rule (`MaterializedFusions`): a plugin that implements only `estimate`
    prices kernels and drives fusion, correctly if more slowly than with the optional protocols."""
    return model if isinstance(model, EstimatesFusion) else MaterializedFusions(model)


def fuses_by_materializing(model: CostModel) -> bool:
    """Whether `model.estimate_fusion` is `FusionByMaterializing`'s rule (not overridden), so that a
    fusion pass may compose pair prices from the model's own kernel prices and price each fused
    kernel with `estimate` (the same figures, each kernel priced once)."""
    return isinstance(model, FusionByMaterializing) and (
        type(model).estimate_fusion is FusionByMaterializing.estimate_fusion
    )


# ---------------------------------------------------------------------------
# Registry

_MODELS: dict[str, Callable[..., CostModel]] = {}
_FROM_PLUGINS: set[str] = set()  # names in _MODELS that `get_model` loaded from entry points
#: How `get_model` reads a name with parentheses, a combination of models (`(read, combinations)`):
#: `models/_combined.py` registers itself (`register_combination_reader`), so that this module, which it
#: builds on, imports nothing of it.
_COMBINATION_READER: list[tuple[Callable[..., CostModel], Callable[[], Sequence[str]]]] = []


def register_model(name: str):
    """Class decorator (or call with a factory): make `get_model(name)` build it."""

    def register(factory):
        if name in _MODELS and _MODELS[name] is not factory:
            raise ValueError(f"a cost model named {name!r} is already registered")
        _MODELS[name] = factory
        return factory

    return register


def register_combination_reader(read: Callable[..., CostModel], combinations: Callable[[], Sequence[str]]) -> None:
    """Make `get_model(name, **params)` build a name with parentheses as `read(name, **params)`;
    `combinations()`: the names of the combinations it knows (`min`, ...), for messages."""
    _COMBINATION_READER[:] = [(read, combinations)]


def _entry_points() -> dict[str, list[Any]]:
    """Installed plugins: {model name: its entry points} (more than one when distributions clash)."""
    from importlib.metadata import entry_points

    found: dict[str, list[Any]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        same = found.setdefault(ep.name, [])
        if not any(e.value == ep.value for e in same):  # the same target seen twice is no clash
            same.append(ep)
    return found


def model_names() -> tuple[str, ...]:
    """Names `get_model` accepts: built-in models, then installed plugins.

    Warns (`CostModelWarning`) about a plugin that a built-in model of the same
    name hides.
    """
    names = [n for n in _MODELS if n not in _FROM_PLUGINS]
    for name, eps in _entry_points().items():
        if name not in _MODELS or name in _FROM_PLUGINS:  # (`get_model` keeps the plugins it loaded)
            names.append(name)
        else:
            warnings.warn(
                f"cost-model plugin {name!r} (entry point {describe_entry_point(eps[0])}) is hidden by the "
                f"built-in model of the same name; rename the entry point to use it",
                CostModelWarning,
                stacklevel=2,
            )
    return tuple(names)


def get_model(model: "str | CostModel", **params) -> CostModel:
    """A cost model by registry name (or pass a model through).

    **Arguments:** `model`: a name from `model_names()` or a model object;
    `**params`: constructor arguments (constants) for the model; with a model
    object, a copy with those changed (`dataclasses.replace` for the
    dataclass models, scikit-learn's `clone` + `set_params` for estimators,
    which drops what they were fitted to).
    A name may also combine models (`models/_combined.py`):
    `"min(xla-gpu,roofline)"`, `"max-savings(xla-gpu,roofline)"`,
    `"scaled-min(roofline,fitted)"`, `"scaled-max-savings(...)"`,
    `"scaled(roofline)"`; combinations nest.

    **Returns:** the model. **Raises:** `ValueError` listing valid names (or
    saying where a combination name cannot be read); `ModelPluginError` (an
    `ImportError`) naming a plugin whose entry point fails to load.
    """
    if not isinstance(model, str):
        if isinstance(model, MaterializedFusions):
            model = model.model
        if not params:
            return with_fusion_rule(model)
        if dataclasses.is_dataclass(model):
            return with_fusion_rule(dataclasses.replace(model, **params))
        if isinstance(model, HasParams):
            from sklearn.base import clone

            return with_fusion_rule(clone(model).set_params(**params))
        raise TypeError(f"get_model: cannot set {', '.join(params)} on a {type(model).__name__} "
                        f"(neither a dataclass nor an estimator with set_params)")
    factory = _MODELS.get(model)
    if factory is None:
        # A name with parentheses is a combination such as "min(xla-gpu,roofline)" (models/_combined.py).
        if "(" in model and _COMBINATION_READER:
            read, _ = _COMBINATION_READER[0]
            return read(model, **params)
        eps = _entry_points().get(model)
        if not eps:
            combinations = _COMBINATION_READER[0][1]() if _COMBINATION_READER else ()
            raise ValueError(f"unknown cost model {model!r}; valid names: {', '.join(model_names())}; "
                             f"combinations: {', '.join(f'{c}(...)' for c in combinations)}")
        # --- plugins (models/_plugins.py): a failing plugin names itself and its entry point.
        if len(eps) > 1:
            raise ModelPluginError(
                f"cost-model plugin {model!r} is declared by {len(eps)} entry points: "
                + "; ".join(describe_entry_point(ep) for ep in eps)
                + ". Uninstall all but one of these distributions, or rename an entry point"
            )
        factory = load_plugin(eps[0])
        # --- end plugins
        _MODELS[model] = factory
        _FROM_PLUGINS.add(model)
    return with_fusion_rule(factory(**params))
