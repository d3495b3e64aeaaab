"""XLA's priority-fusion loop over one computation, driven by any cost model.

What `PriorityFusionQueue` + `PriorityFusion::Run` do (`priority_fusion.cc`):

- Candidates: every instruction except parameters, instructions without
  users (the root among them), `!IsFusible()` ones, tuples and
  get-tuple-elements, in post-order.
- Priority of a producer P: +inf for a bitcast, -inf for a constant, -inf
  unless every non-bitcast user passes `CanFuse` (all consumers or none),
  else `time_unfused - time_fused` over *all* users from the cost model
  (`FusionEstimate`: each kernel's time includes its launch, so fusing saves
  P's launch). Priorities are durations in XLA (quarter-nanosecond ticks);
  they are rounded to that grid here so that equal work ties exactly.
- A max-queue keyed by (priority, unique id); negative priorities are not
  queued, zero is. Ties go to the larger unique id: new fusions get fresh,
  larger ids; a fusion that grows keeps its id.
- Each step pops the top producer, fuses it into every user (duplicating it
  where it has several; a bitcast only into the users `CanFuse` allows;
  never into a lone bitcast), deletes it once unused, and recomputes the
  priorities of the new fusions and of their operands only.
- At the end, constants of at most one element are fused into every
  fusible user.
- An operand of a step's fusions that is still queued is re-priced as XLA
  does it, incrementally (`ComputeRuntimesOfRemovedConsumers`): its queued
  priority, plus the gain of fusing it into its new consumers, minus the gain
  for the consumers fused away that XLA's performance-model cache still holds
  a fused price for (a pair leaves that cache when either side changes, so
  the result is not always the operand's full gain). A consumer grown in
  place stays queued at its old priority until it is re-priced.

Priorities are computed from per-(producer, consumer) prices cached as XLA
caches them (`incremental=True`: priority = P + Σ consumer − Σ fused, with
each pair priced once per pair of instruction objects), or by one call of
`model.estimate_fusion(P, users)` per producer (`incremental=False`).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ..hlo import HloComputation, HloInstruction
from ..hlo.editing import NameUniquifier
from ..fusion_engine import FusionEditor, discard_fusion
from ..hlo.editing import ContentIds
from ..models import (CachesInstructions, CombinesFusionTimes, CostModel, FusionPricing, fuses_by_materializing,
                      prices_by_content)
from ._legality import (
    LegalityChecker,
    Rejection,
    can_emit_input_fused_scatter,
    hlo_is_fusible,
    is_fusible,
    is_fusible_bitcast,
)
from ._pair_cache import PairCache
from ._triton_fusion import TritonFusionRules, triton_backend_config

if TYPE_CHECKING:
    from ..devices import DeviceSpec

__all__ = ["FusionPass", "LogEvent", "PriorityFusionRun", "StepRecord", "quantize_priority"]

INF = math.inf
_TICK = 0.25e-9  # absl::Duration resolution


def quantize_priority(seconds: float) -> float:
    """A priority on XLA's duration grid (a quarter nanosecond); inf and NaN pass through."""
    if math.isnan(seconds) or math.isinf(seconds):
        return seconds
    return round(seconds / _TICK) * _TICK


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One dequeued producer: what was fused where, and why."""

    step: int
    computation: str
    producer: str
    producer_opcode: str
    consumers: tuple[str, ...]
    fusions: tuple[str, ...]
    priority_s: float
    time_unfused_s: float
    time_fused_s: float
    reason: str


class _MaxQueue:
    """XLA's ordered map keyed by (priority, unique id), top = largest; lazy deletion."""

    __slots__ = ("_heap", "_live", "_seq")

    def __init__(self):
        self._heap: list = []
        self._live: dict[HloInstruction, tuple[float, int, int]] = {}
        self._seq = 0

    def __contains__(self, instr) -> bool:
        return instr in self._live

    def __len__(self) -> int:
        return len(self._live)

    def key(self, instr):
        k = self._live.get(instr)
        return None if k is None else k[:2]

    def set(self, instr: HloInstruction, priority: float, uid: int) -> None:
        old = self._live.get(instr)
        if old is not None and old[0] == priority and old[1] == uid:
            return
        if not priority >= 0:  # negative or NaN: out of the queue
            if old is not None:
                del self._live[instr]
            return
        self._seq += 1
        self._live[instr] = (priority, uid, self._seq)
        heapq.heappush(self._heap, (-priority, -uid, self._seq, instr))

    def remove(self, instr: HloInstruction) -> None:
        self._live.pop(instr, None)

    def pop(self) -> tuple[HloInstruction, float] | None:
        heap, live = self._heap, self._live
        while heap:
            neg_p, _neg_uid, seq, instr = heapq.heappop(heap)
            k = live.get(instr)
            if k is not None and k[2] == seq:
                del live[instr]
                return instr, -neg_p
        return None


@dataclass(frozen=True, slots=True)
class FusionPass:
    """What the runs of one fusion pass over a module's computations share.

    **Attributes:** `model` (the `CostModel` that sets priorities) and
    `device`; `checker`, the `LegalityChecker`; `names`, the module's
    `NameUniquifier`; `uids`, unique ids by instruction (new fusions get
    `next_uid()`); `version`, instruction -> number bumped whenever it changes
    in place; `incremental`: price per pair with caches (see the module
    docstring); `origin`: provenance map filled with clone -> input instruction
    name (None: not kept); `pair_cache`: pair prices by instruction versions;
    `content`: content ids of the kernels (`hlo._structure.ContentIds`), or
    None; `content_cache`: prices by content, for models that
    `prices_by_content`; `log`: where each run appends its `LogEvent`s, in
    the order XLA's `priority_fusion_dump` has them (None: not kept);
    `triton`: fuse into and out of generic Triton fusions as XLA does
    (`fusion._triton_fusion`; False: they are not fusible).
    """

    model: CostModel
    device: "DeviceSpec"
    checker: LegalityChecker
    names: NameUniquifier
    uids: dict[HloInstruction, int]
    next_uid: Callable[[], int]
    version: dict[HloInstruction, int] = field(default_factory=dict)
    incremental: bool = True
    origin: dict | None = None
    pair_cache: PairCache = field(default_factory=PairCache)
    content: ContentIds | None = None
    content_cache: dict = field(default_factory=dict)
    log: list | None = None
    triton: bool = True


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One entry of the pass's log, as XLA's `priority_fusion_dump.txt` has its `fusion_steps`:

    - `event="price"`: a producer's priority computed (at queue start or on an update), with
      `consumers` its users and `time_unfused_s`, `time_fused_s` the prices over all of them.
      `logged_unfused_s`, `logged_fused_s` are what XLA's `update_priority` logs as `us_unfused`,
      `us_fused`: the same, except on an incremental update (`incremental`: a queued producer
      whose users were fused this step), where XLA prices only the new consumers minus the ones
      fused away and logs that difference (`PriorityFusionQueue::CalculateProducerPriority`):
      our change of the totals plus one launch per consumer fused away;
    - `event="ineligible"`: a producer not priced, `rule` saying why (XLA's `producer_ineligible`);
    - `event="fusion"`: `producer` fused into `consumers[0]`, making or growing `fusion` (XLA's `fusion`).
    """

    event: str
    computation: str
    producer: str
    consumers: tuple[str, ...] = ()
    time_unfused_s: float = math.nan
    time_fused_s: float = math.nan
    rule: str = ""
    detail: str = ""
    fusion: str = ""
    logged_unfused_s: float = math.nan
    logged_fused_s: float = math.nan
    incremental: bool = False


def is_candidate(instr: HloInstruction) -> bool:
    """Whether the queue considers `instr` as a producer at all."""
    return (
        instr.opcode not in ("parameter", "tuple", "get-tuple-element")
        and bool(instr.users)
        and hlo_is_fusible(instr)
    )


def is_small_constant(instr: HloInstruction) -> bool:
    """A constant of at most one element (fused into its users at the end)."""
    return instr.opcode == "constant" and instr.shape.is_array and instr.shape.num_elements <= 1


def _split_sides(model, producer: HloInstruction, consumer: HloInstruction, device) -> tuple[float, float] | None:
    """`estimate_fusion(producer, [consumer])`'s `(producer_s, consumers_s[0])`; None where the model
    does not split its price by kernel."""
    est = model.estimate_fusion(producer, [consumer], device)
    p = est.producer_s
    if p is None or math.isnan(p) or not est.consumers_s:
        return None
    return p, est.consumers_s[0]


class _PairPricing:
    """How one model prices (producer, consumer) pairs, each kernel once per version: with its own
    pair pricer (`FusionPricing`), by `FusionByMaterializing`'s rule (its `estimate_fused`: a trial
    fusion or a detached one), or by `estimate_fusion` split by kernel.

    **Arguments:** `model`, `device`; `version`: the pass's instruction versions; `incremental`;
    `content`: content ids when the model prices by content, else None; `by_content`: the pass's
    prices by content; `key`: what tells this model's kernel prices from others' there (a
    member's place in a combination).
    """

    __slots__ = ("model", "device", "version", "pricer", "materializing", "content", "by_content", "key", "kernels")

    def __init__(self, model, device, version: dict, incremental: bool, content, by_content: dict, key: tuple):
        self.model = model
        self.device = device
        self.version = version
        # A model's own pair pricer (per-instruction records kept per version), if it has one.
        # (A closure over the version dict, not a bound method: the run holds the pricer, and a
        # cycle back to the run would leave all its caches to the cyclic garbage collector.)
        # A model that prices by content also gets the kernels' content ids (`content.kernel`).
        self.pricer = (
            (model.fusion_pricer(device, version=lambda instr: version.get(instr, 0)) if content is None else
             model.fusion_pricer(device, version=lambda instr: version.get(instr, 0), content=content.kernel))
            if incremental and isinstance(model, FusionPricing) else None
        )
        self.materializing = fuses_by_materializing(model)
        self.content = content
        self.by_content = by_content
        self.key = key
        self.kernels: dict = {}

    def triple(self, producer: HloInstruction, consumer: HloInstruction, *, member: bool = False):
        """`estimate_fusion(producer, [consumer])`'s `(producer_s, consumers_s[0], fused_consumers_s[0])`;
        None when the model does not split its price by kernel (then whole producers are priced).
        An unpriced pair priced by `estimate_fusion` gives NaNs; `member` (of a combination): only
        a pair pricer's and `FusionByMaterializing`'s triples, else None."""
        if self.pricer is not None:
            return self.pricer.pair(producer, consumer)
        model = self.model
        if self.materializing:
            # FusionByMaterializing's own rule, with each kernel priced once per version.
            return (self.kernel(producer), self.kernel(consumer),
                    model.estimate_fused(producer, consumer, self.device).time_s)
        if member:
            # Only pair prices that add up to the member's own `estimate_fusion` of the whole
            # producer (a pair pricer's, `FusionByMaterializing`'s) can be combined per producer.
            return None
        est = model.estimate_fusion(producer, [consumer], self.device)
        p = est.producer_s
        if p is None or math.isnan(p):
            if math.isnan(est.time_unfused_s) or math.isnan(est.time_fused_s):
                return (math.nan, math.nan, math.nan)  # unpriced
            return None  # the model does not split its price by kernel: price whole producers
        c = est.consumers_s[0] if est.consumers_s else est.time_unfused_s - p
        return (p, c, est.time_fused_s)

    def sides(self, producer: HloInstruction, consumer: HloInstruction) -> tuple[float, float]:
        """`(T(producer), T(consumer))`, each kernel alone as `EstimateRunTimes` sees it (a free
        instruction too is a kernel that pays its launch), where a pair with a generic Triton fusion
        prices its fused side itself (`PriorityFusionRun._triton_pair`): the pair pricer's, else
        `estimate_fusion(producer, [consumer])`'s split (not `estimate`'s kernel as it runs, which
        prices free instructions at 0 and adds contention); `FusionByMaterializing`'s own kernels,
        or for a model that does not split its price, its `estimate`."""
        if self.pricer is not None:
            return self.pricer.kernel(producer).time_s, self.pricer.kernel(consumer).time_s
        split = None if self.materializing else _split_sides(self.model, producer, consumer, self.device)
        return split if split is not None else (self.kernel(producer), self.kernel(consumer))

    def kernel(self, instr: HloInstruction) -> float:
        key = (instr, self.version.get(instr, 0))
        t = self.kernels.get(key)
        if t is None:
            if self.content is not None:
                ckey = ("kernel", *self.key, self.content.kernel(instr))
                t = self.by_content.get(ckey)
                if t is None:
                    t = self.by_content[ckey] = self.model.estimate(instr, self.device).time_s
            else:
                t = self.model.estimate(instr, self.device).time_s
            self.kernels[key] = t
        return t


class PriorityFusionRun:
    """Priority fusion of one computation, in place.

    **Arguments:** `computation` (of the module being fused); `fusion_pass`,
    what the runs over the module's computations share (`FusionPass`);
    `step0`: number of the first step.
    """

    def __init__(self, computation: HloComputation, fusion_pass: FusionPass, *, step0: int = 0):
        model, device = fusion_pass.model, fusion_pass.device
        self.comp = computation
        self.model = model
        self.device = device
        self.checker = fusion_pass.checker
        if fusion_pass.triton and self.checker.triton is None:
            versions = fusion_pass.version
            self.checker.triton = TritonFusionRules(device, lambda instr: versions.get(instr, 0))
        self._triton: TritonFusionRules | None = self.checker.triton if fusion_pass.triton else None
        self.uids = fusion_pass.uids
        self.next_uid = fusion_pass.next_uid
        self.incremental = fusion_pass.incremental
        self.editor = FusionEditor(computation, fusion_pass.names, origin=fusion_pass.origin,
                                   version=fusion_pass.version)
        self._version = self.editor.version
        self._invalidate = model.invalidate if isinstance(model, CachesInstructions) else None
        self._ids = fusion_pass.content
        self._by_content: dict = fusion_pass.content_cache
        # How pairs are priced: with the model, or, for a combination of models (`CombinesFusionTimes`),
        # with each member, combined per producer by the combination's rule.
        self._combination = model if self.incremental and isinstance(model, CombinesFusionTimes) else None
        members = self._combination.held_models if self._combination is not None else (model,)
        self._pricings = [
            _PairPricing(m, device, self._version, self.incremental, self._ids if prices_by_content(m) else None,
                         self._by_content, (i,) if self._combination is not None else ())
            for i, m in enumerate(members)
        ]
        self._member_invalidates = [m.invalidate for m in members
                                    if m is not model and isinstance(m, CachesInstructions)]
        self.queue = _MaxQueue()
        self.steps: list[StepRecord] = []
        self.step_no = step0
        # producer -> its latest rejection (rule) and its latest estimate
        self.rejections: dict[HloInstruction, tuple[HloInstruction | None, Rejection]] = {}
        self.estimates: dict[HloInstruction, tuple[float, float]] = {}
        self._pairs = fusion_pass.pair_cache  # prices
        # Content ids (`hlo._structure`) of the kernels: new fusions get ids derived from their pair;
        # pair prices are cached by content for models that price kernels by content only.
        self._content = fusion_pass.content if prices_by_content(model) else None
        self._to_update: dict[HloInstruction, None] = {}
        self.model_calls = 0
        self.log = fusion_pass.log
        # XLA's incremental updates (`ComputeRuntimesOfRemovedConsumers`): which fused pairs its
        # `GpuPerformanceModelCache` holds (producer -> consumer -> (T(consumer), T_fused), launches
        # included), and, during a step's updates, operand -> (unfused, fused removed, new consumers).
        # Only for a single model pricing pairs (`incremental`).
        self._xla_pairs: dict[HloInstruction, dict[HloInstruction, tuple[float, float]]] = {}
        self._removed: dict[HloInstruction, tuple[float, float, list]] = {}
        # producer -> its version when its last priority found every user fusible (`_new_consumers_fuse`)
        self._passed: dict[HloInstruction, int] = {}
        self._launch_s = float(getattr(device, "kernel_launch_overhead_s", 1e-6))

    # -- pricing ------------------------------------------------------------
    def _pair(self, producer: HloInstruction, consumer: HloInstruction) -> tuple[float, float, float]:
        version = self._version
        pv, cv = version.get(producer, 0), version.get(consumer, 0)
        v = self._pairs.get(producer, pv, consumer, cv)
        if v is not None:
            return v
        ckey = None
        if self._content is not None:
            ckey = self._content.pair(producer, consumer)
            v = self._by_content.get(ckey)
            if v is not None:
                self._pairs.put(producer, pv, consumer, cv, v)
                return v
        v = self._price_pair(producer, consumer)
        if v is not None:
            self._pairs.put(producer, pv, consumer, cv, v)
            if ckey is not None:
                self._by_content[ckey] = v
            return v
        return (math.nan, math.nan, math.nan)

    def _price_pair(self, producer: HloInstruction, consumer: HloInstruction) -> tuple | None:
        """`(T(producer), T(consumer), T_fused)` from the model (for a combination, one such triple
        per member); None when the model cannot split its price by kernel (then `incremental` is
        switched off)."""
        triton = self._triton
        if triton is not None and triton.involves(producer, consumer):
            return self._triton_pair(producer, consumer)
        if self._combination is None:
            pricing = self._pricings[0]
            v = pricing.triple(producer, consumer)
            self.model_calls += 1
            if v is None:
                self.incremental = False
                return None
            p, c, f = v
            if pricing.pricer is not None and math.isnan(p):
                c = f = math.nan  # unpriced, as `estimate_fusion`'s NaN producer
            return (p, c, f)
        triples = []
        for pricing in self._pricings:
            # Each member's triple as its own `estimate_fusion` gives it: the combination's rule
            # looks at each member's unfused and fused times, NaN or not.
            v = pricing.triple(producer, consumer, member=True)
            self.model_calls += 1
            if v is None:
                self.incremental = False
                return None
            triples.append(v)
        return tuple(triples)

    def _triton_pair(self, producer: HloInstruction, consumer: HloInstruction) -> tuple:
        """A pair with a generic Triton fusion: each side priced alone as usual, the fused pair as the
        Triton fusion it becomes (its best tiling: `TritonFusionRules.fused`), by each model."""
        if self._combination is not None and any(isinstance(p.model, CombinesFusionTimes) for p in self._pricings):
            # a member that is itself a combination gives no pair price (as `triple(member=True)`):
            # the whole combination is priced per producer (`_whole_times`)
            self.incremental = False
            return None
        fused = self._triton.fused(producer, consumer)
        try:
            triples = []
            for pricing in self._pricings:
                self.model_calls += 1
                p, c = pricing.sides(producer, consumer)
                triples.append((p, c, pricing.model.estimate(fused, self.device).time_s))
        finally:
            discard_fusion(fused)
        return triples[0] if self._combination is None else tuple(triples)

    def _times(self, producer: HloInstruction, users: list[HloInstruction]) -> tuple[float, float]:
        if self.incremental and self._combination is not None:
            n = len(self._pricings)
            ps, cs, fs = [math.nan] * n, [0.0] * n, [0.0] * n
            for u in users:
                v = self._pair(producer, u)
                if not self.incremental:
                    break
                for i, (p, c, f) in enumerate(v):
                    ps[i] = p
                    cs[i] += c
                    fs[i] += f
            else:
                return self._combination.combine_fusion_times([(ps[i] + cs[i], fs[i]) for i in range(n)])
        elif self.incremental:
            p = math.nan
            consumers = fused = 0.0
            # `_pair`'s cache lookup inlined: producers with many users are re-prioritized often.
            vget = self._version.get
            pv = vget(producer, 0)
            prices = self._pairs.entries(producer)
            for u in users:
                e = prices.get(u)
                if e is not None and e[1] == vget(u, 0) and e[0] == pv:
                    v = e[2]
                else:
                    v = self._pair(producer, u)
                    if not self.incremental:
                        break
                pp, c, f = v
                p = pp
                consumers += c
                fused += f
            else:
                return p + consumers, fused
        triton = self._triton
        if triton is not None and any(triton.involves(producer, u) for u in users):
            return self._whole_times(self.model, producer, users)
        est = self.model.estimate_fusion(producer, list(users), self.device)
        self.model_calls += 1
        return est.time_unfused_s, est.time_fused_s

    def _whole_times(self, model, producer: HloInstruction, users: list[HloInstruction]) -> tuple[float, float]:
        """`model`'s times for a whole producer (no pair prices) where some of its users make a pair
        with a generic Triton fusion: XLA's `EstimateRunTimes` prices each such pair as the Triton
        fusion it becomes (its tiled cost model, `GpuPerformanceModelWithIndexingAnalysis`; the
        fused side as `_triton_pair` prices it), not as the model's fusion of the producer into that
        user; the other users by the model's own `estimate_fusion`, the producer counted once. A
        combination (`CombinesFusionTimes`): each member's times so, combined by its rule."""
        if isinstance(model, CombinesFusionTimes):
            return model.combine_fusion_times([self._whole_times(m, producer, users) for m in model.held_models])
        triton = self._triton
        others = [u for u in users if not triton.involves(producer, u)]
        prices: dict[HloInstruction, tuple[float, float]] = {}  # user -> (T(user), T_fused)
        p = math.nan
        for u in users:
            if not triton.involves(producer, u):
                continue
            self.model_calls += 1
            split = None if fuses_by_materializing(model) else _split_sides(model, producer, u, self.device)
            p, c = split if split is not None else (model.estimate(producer, self.device).time_s,
                                                    model.estimate(u, self.device).time_s)
            kernel = triton.fused(producer, u)
            try:
                prices[u] = (c, model.estimate(kernel, self.device).time_s)
            finally:
                discard_fusion(kernel)
        est = None
        if others:
            est = model.estimate_fusion(producer, others, self.device)
            self.model_calls += 1
            if est.producer_s is None or math.isnan(est.producer_s) or len(est.consumers_s) != len(others) \
                    or len(est.fused_consumers_s) != len(others):
                # not split by kernel: its totals, plus the Triton pairs'
                return (est.time_unfused_s + sum(c for c, _ in prices.values()),
                        est.time_fused_s + sum(f for _, f in prices.values()))
            p = est.producer_s
            prices.update(zip(others, zip(est.consumers_s, est.fused_consumers_s)))
        # summed in the users' order, as pair prices are (`_times`): the same figures to the last bit
        consumers = fused = 0.0
        for u in users:
            c, f = prices[u]
            consumers += c
            fused += f
        return p + consumers, fused

    def _reject(self, producer: HloInstruction, consumer: HloInstruction | None, why: Rejection) -> None:
        self.rejections[producer] = (consumer, why)
        if self.log is not None and why.rule not in ("negative-priority", "unpriced"):
            self.log.append(LogEvent("ineligible", self.comp.name, producer.name,
                                     (consumer.name,) if consumer is not None else (), rule=why.rule,
                                     detail=why.detail))

    def priority(self, producer: HloInstruction) -> float:
        """`CalculateProducerPriority` (records why a producer is not queued)."""
        op = producer.opcode
        if op == "bitcast" and is_fusible_bitcast(producer):
            return INF
        if op == "constant":
            return -INF
        users = producer.users
        if not users:
            self._reject(producer, None, Rejection("no-users"))
            return -INF
        removed = self._removed.pop(producer, None)
        key = self.queue.key(producer) if removed is not None else None
        pv = self._version.get(producer, 0)
        if key is None or self._passed.get(producer) != pv or not self._new_consumers_fuse(producer, removed[2]):
            has_non_bitcast, u, r = self.checker.first_rejection(producer, users)
            if r is not None:
                self._reject(producer, u, r)
                return -INF
            if not has_non_bitcast:
                self._reject(producer, None, Rejection("only-bitcast-users"))
                return -INF
        self._passed[producer] = pv
        if key is not None and self._tracks_pairs():
            # XLA's incremental update: the queued priority plus the new consumers' gain minus the
            # gain its cache holds for the consumers fused away (those it still holds a price for)
            unfused, fused = self._times(producer, users)
            u_new, f_new = self._xla_times(producer, removed[2])
            logged = (u_new - removed[0], f_new - removed[1])
            priority = quantize_priority(key[0] + logged[0] - logged[1])
        else:
            # priced over all users (and so held in XLA's cache, when it is followed)
            if self._tracks_pairs():
                unfused, fused = self._xla_times(producer, users)
                if not self.incremental:  # the model turned out not to price pairs: whole producers
                    unfused, fused = self._times(producer, users)
            else:
                unfused, fused = self._times(producer, users)
            logged = (unfused, fused)
            priority = quantize_priority(unfused - fused)
        if self.log is not None:
            self.log.append(LogEvent("price", self.comp.name, producer.name, tuple([u.name for u in users]),
                                     unfused, fused, logged_unfused_s=logged[0], logged_fused_s=logged[1],
                                     incremental=key is not None))
        self.estimates[producer] = (unfused, fused)
        if math.isnan(priority):
            self._reject(producer, None, Rejection("unpriced", "the model returned NaN"))
            return -INF
        if priority < 0:
            self._reject(
                producer, None,
                Rejection("negative-priority", f"unfused {unfused * 1e6:.3f} us < fused {fused * 1e6:.3f} us"),
            )
        else:
            self.rejections.pop(producer, None)
        return priority

    def _new_consumers_fuse(self, producer: HloInstruction, new_consumers: list) -> bool:
        """Whether `producer`, queued, unchanged since its last priority (`_passed`) and updated
        incrementally, may fuse into all its users, asking only the step's `new_consumers`
        (`first_rejection` over all users gives the same answer).

        Queued means its last priority found every user fusible (a rejection takes it out of the
        queue); the producer kept its version since, so those verdicts stand; and since then only
        this step's fusions changed among its users: a user that is replaced or grows in place does
        so in a step whose fusion lists the producer as an operand, which re-prices it (`_step`).
        The other users keep their versions and their cached verdicts. When a new consumer is
        rejected, the caller walks all users for the first rejection in user order, as XLA's
        `CanFuseWithAllNonBitcastUsers` reports it. (A producer with a hundred users can be updated
        at nearly every step: in diffrax's lowered modules, scalar `bitcast-convert`s of constants.)"""
        if not new_consumers:
            return False
        can_fuse = self.checker.can_fuse
        for c in new_consumers:
            if is_fusible_bitcast(c) or can_fuse(producer, c) is not None:
                return False
        return True

    def _tracks_pairs(self) -> bool:
        return self.incremental and self._combination is None

    def _xla_times(self, producer: HloInstruction, consumers) -> tuple[float, float]:
        """`EstimateRunTimesForPriorityFusion(producer, consumers)`, launches included, noting each
        fused pair in XLA's cache as it does."""
        held = self._xla_pairs.setdefault(producer, {})
        p = math.nan
        unfused = fused = 0.0
        for c in consumers:
            p, tc, tf = self._pair(producer, c)
            held[c] = (tc, tf)
            unfused += tc
            fused += tf
        return (self._alone(producer) if math.isnan(p) else p) + unfused, fused

    def _alone(self, instr: HloInstruction) -> float:
        pricing = self._pricings[0]
        return pricing.pricer.kernel(instr).time_s if pricing.pricer is not None else pricing.kernel(instr)

    def _removed_runtimes(self, operand: HloInstruction, gone: list) -> tuple[float, float]:
        """`ComputeRuntimesOfRemovedConsumers` for one queued operand, before the step's fusions:
        the operand's own time (and launch) plus, for each of `gone` (the step's consumers and
        producer) whose fused price with it XLA's cache holds, that consumer's time and the fused
        time, each without its launch (the consumer count is the new consumers')."""
        held = self._xla_pairs.get(operand, {})
        launch = self._launch_s
        unfused, fused = self._alone(operand), 0.0
        for c in gone:
            e = held.get(c)
            if e is not None:
                unfused += e[0] - launch
                fused += e[1] - launch
        return unfused, fused

    def _forget_pairs(self, instr: HloInstruction) -> None:
        """`GpuPerformanceModelCache::Invalidate`: `instr`'s pairs as producer, and as consumer of its operands."""
        self._xla_pairs.pop(instr, None)
        for o in instr.operands:
            if o.opcode == "get-tuple-element" and o.operands:
                o = o.operands[0]
            held = self._xla_pairs.get(o)
            if held is not None:
                held.pop(instr, None)

    def _set_priority(self, instr: HloInstruction) -> None:
        uid = self.uids.get(instr)
        if uid is None:
            uid = self.uids[instr] = self.next_uid()
        self.queue.set(instr, self.priority(instr), uid)

    # -- the loop -------------------------------------------------------------
    def run(self) -> list[StepRecord]:
        order = self.comp.post_order()
        for instr in order:
            if instr not in self.uids:
                self.uids[instr] = self.next_uid()
        for instr in order:
            if is_candidate(instr):
                self._set_priority(instr)
        while True:
            top = self._dequeue()
            if top is None:
                break
            producer, consumers, priority = top
            self._step(producer, consumers, priority)
        self._fuse_small_constants()
        self.editor.finish()
        return self.steps

    def _dequeue(self):
        while True:
            item = self.queue.pop()
            if item is None:
                return None
            producer, priority = item
            consumers = list(producer.users)
            if is_fusible_bitcast(producer):
                consumers = [c for c in consumers if self.checker.can_fuse(producer, c) is None]
            if consumers:
                return producer, consumers, priority

    def _fuse(self, producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
        checker = self.checker
        facts = checker.facts(producer) + checker.facts(consumer)
        in_place = consumer.opcode == "fusion"
        pair_key = self._ids.pair(producer, consumer) if self._ids is not None else None
        triton = self._triton
        # A Triton pair becomes a Triton fusion with the fused pair's best tiling (XLA sets it as
        # the fusion's backend config after fusing).
        tiling = triton.tiling(producer, consumer) if triton is not None and triton.involves(producer, consumer) \
            else None
        fusion = self.editor.fuse(producer, consumer, kind="kLoop")
        if pair_key is not None:
            self._ids.record_fused(fusion, pair_key)
        checker.set_facts(fusion, facts)
        if tiling is not None:
            fusion.set_attribute("kind", "kCustom")
            fusion.set_attribute("backend_config", triton_backend_config(*tiling))
        else:
            kind = checker.fusion_kind(fusion)
            if kind != "kLoop":
                fusion.set_attribute("kind", kind)
        if in_place:
            # A fusion grows in place and keeps its unique id, as in XLA.
            if self._invalidate is not None:
                self._invalidate(fusion)
            for invalidate in self._member_invalidates:
                invalidate(fusion)
            for pricing in self._pricings:
                if pricing.pricer is not None:
                    pricing.pricer.invalidate(fusion)
        else:
            self.uids[fusion] = self.next_uid()
        return fusion

    def _step(self, producer: HloInstruction, consumers: list[HloInstruction], priority: float) -> None:
        fused_into: list[str] = []
        fusions: list[str] = []
        to_update = self._to_update
        removed: dict[HloInstruction, tuple[float, float]] = {}
        new_consumers: dict[HloInstruction, list] = {}
        tracks = self._tracks_pairs()
        if tracks:
            # XLA updates a queued operand of the step's fusions incrementally, from what its cache
            # held before the step: taken now, for every queued instruction that may become one
            gone = [*consumers, producer]
            for x in dict.fromkeys([producer, *consumers, *(o for x in (producer, *consumers) for o in x.operands)]):
                if x is not producer and x in self.queue:
                    removed[x] = self._removed_runtimes(x, gone)
        for consumer in consumers:
            if is_fusible_bitcast(consumer):
                continue
            fused_into.append(consumer.name)
            fusion = self._fuse(producer, consumer)
            fusions.append(fusion.name)
            if self.log is not None:
                self.log.append(LogEvent("fusion", self.comp.name, producer.name, (fused_into[-1],),
                                         fusion=fusion.name))
            # OnFusingInstruction (a consumer grown in place stays queued at its old priority)
            if fusion is not consumer:
                self.queue.remove(consumer)
                to_update.pop(consumer, None)
            for o in fusion.operands:
                if o is producer or o.opcode in ("constant", "get-tuple-element") or not hlo_is_fusible(o):
                    continue
                to_update[o] = None
                new_consumers.setdefault(o, []).append(fusion)
            to_update[fusion] = None
        kept = len(producer.users)
        if tracks:
            # operands of the step's fusions still queued are updated incrementally
            self._removed = {o: (*removed[o], cs) for o, cs in new_consumers.items() if o in removed and o in self.queue}
        if not producer.users and producer is not self.comp.root:
            self.queue.remove(producer)
            to_update.pop(producer, None)
            if tracks:
                self._forget_pairs(producer)
            self.editor.remove(producer)
        if tracks:
            for consumer in consumers:
                self._forget_pairs(consumer)
        for instr in list(to_update):
            self._set_priority(instr)
        to_update.clear()
        self._removed = {}
        unfused, fused = self.estimates.get(producer, (math.nan, math.nan))
        n = len(fused_into)
        if is_fusible_bitcast(producer):
            reason = f"bitcast: fused first (priority +inf) into {n} consumer{'s' if n != 1 else ''}"
        elif n > 1:
            reason = f"duplicated into all {n} consumers"
        else:
            reason = "fused into its only consumer"
        if kept:
            reason += f"; kept for {kept} bitcast user{'s' if kept != 1 else ''}"
        self.step_no += 1
        self.steps.append(
            StepRecord(
                step=self.step_no,
                computation=self.comp.name,
                producer=producer.name,
                producer_opcode=producer.opcode,
                consumers=tuple(fused_into),
                fusions=tuple(fusions),
                priority_s=priority,
                time_unfused_s=unfused,
                time_fused_s=fused,
                reason=reason,
            )
        )

    def _fuse_small_constants(self) -> None:
        ed = self.editor
        for const in [i for i in ed.instructions if is_small_constant(i)]:
            users = list(const.users)
            fused_into, fusions = [], []
            for user in users:
                if is_fusible(user) and can_emit_input_fused_scatter(const, user) is None:
                    fused_into.append(user.name)
                    fusions.append(self._fuse(const, user).name)
            if not fused_into:
                continue
            if not const.users and const is not self.comp.root:
                ed.remove(const)
            self.step_no += 1
            self.steps.append(
                StepRecord(
                    step=self.step_no,
                    computation=self.comp.name,
                    producer=const.name,
                    producer_opcode="constant",
                    consumers=tuple(fused_into),
                    fusions=tuple(fusions),
                    priority_s=-INF,
                    time_unfused_s=math.nan,
                    time_fused_s=math.nan,
                    reason="small constant (<= 1 element): fused into every fusible user at the end",
                )
            )

    def live_rejections(self) -> list[tuple[HloInstruction, HloInstruction | None, Rejection]]:
        """Producers still in the graph, unfused, with the rule that last blocked each."""
        out = []
        for producer in self.editor.instructions:
            if not is_candidate(producer) or producer.opcode == "constant" or is_fusible_bitcast(producer):
                continue
            if producer not in self.rejections:
                # Changed after its last pricing (small constants fused at the end): ask again
                # (after the pass: not in its log).
                log, self.log = self.log, None
                self.priority(producer)
                self.log = log
            entry = self.rejections.get(producer)
            if entry is not None:
                out.append((producer, entry[0], entry[1]))
        return out
