"""What XLA's priority fusion may fuse: fusibility, emitter kinds and the pair rules of `CanFuse`.

Facts from XLA's GPU backend (`priority_fusion.cc`, `gpu_fusible.cc`,
`ir_emission_utils.cc`, `reduction_utils.cc`, `gpu_hlo_cost_analysis.cc`,
`instruction_fusion.cc`), re-implemented over our HLO graph:

- `is_fusible(instr)`: may the pass fuse this instruction at all (4.3).
- `emitter_kind(kernel)`: which emitter a kernel (a fusion, or a lone
  instruction taken as a fusion of one) would use: "loop", "reduction",
  "transpose", "concatenate", "scatter", "sort"; `fusion_kind_for` maps that to
  the fusion kind XLA's `ChooseKind` writes (kLoop / kInput).
- `LegalityChecker.can_fuse(producer, consumer)`: the first rule of `CanFuse`
  that forbids the pair, as a `Rejection`, or None (4.4), with the per-kernel
  facts (shared memory, IR size, ...: `_budget`) cached per instruction object;
  the in-place and scatter rules are `_in_place`'s, the rule names `_rejection`'s;
  emitter kinds, heroes and tiled reductions are `analysis._emission`'s.

Rules are identified by short names (`RULES`), used in the fusion log.
"""

from __future__ import annotations

from ..analysis.emission import (
    FUSION_KIND,
    fusion_pass_emitter_kind,
    fusion_pass_is_intermediate,
    fusion_pass_roots,
    is_contiguous_reduction,
    reduction_dimensions,
    reduction_is_race_free,
)
from ..analysis.opcodes import is_elementwise
from ..hlo import HloInstruction
from ..fusion_engine import discard_fusion, hypothetical_fusion
from ..hlo.editing import ContentIds
from ._budget import (
    MAX_IR_SIZE,
    IrSize,
    KernelFacts,
    fusion_fits_in_budget,
    ir_size,
    kernel_facts,
)
from ._in_place import _in_place_operands, can_emit_input_fused_scatter, should_fuse_in_place_op
from ._pair_cache import PairCache
from ._rejection import RULES as RULES
from ._rejection import Rejection as Rejection

__all__ = [
    "RULES",
    "LegalityChecker",
    "Rejection",
    "emitter_kind",
    "fusion_kind_for",
    "hlo_is_fusible",
    "is_fusible",
    "is_fusible_bitcast",
]

DEFAULT_SHARED_MEMORY_PER_BLOCK = 48 * 1024

# HloInstruction::IsFusible is false for these (plus side-effecting ops).
_NEVER_FUSIBLE = frozenset(
    {
        "domain", "parameter", "while", "conditional", "call", "send", "send-done", "recv",
        "recv-done", "infeed", "outfeed", "after-all", "add-dependency", "rng-get-and-update-state",
        "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
        "all-gather-done", "all-to-all", "collective-permute", "collective-permute-start",
        "collective-permute-done", "reduce-scatter", "async-start", "async-update", "async-done",
        "copy-start", "copy-done", "custom-call", "partition-id", "replica-id", "optimization-barrier",
    }
)
# The pass's own list of fusible non-elementwise opcodes (4.3).
_FUSIBLE_NON_ELEMENTWISE = frozenset(
    {
        "copy", "iota", "constant", "reduce", "bitcast", "broadcast", "concatenate", "dynamic-slice",
        "dynamic-update-slice", "gather", "pad", "reduce-window", "reshape", "reverse", "scatter",
        "slice", "transpose",
    }
)


# ---------------------------------------------------------------------------
# Single instructions


def hlo_is_fusible(instr: HloInstruction) -> bool:
    """`HloInstruction::IsFusible`: false for parameters, control flow, calls, side effects; rng only with ≤ 1 user."""
    op = instr.opcode
    if op in _NEVER_FUSIBLE:
        return False
    if op == "rng":
        return len(instr.users) <= 1
    return True


def is_fusible_bitcast(instr: HloInstruction) -> bool:
    """`IsFusibleBitcast`: a bitcast that keeps the element bit width.

    Only these are the pass's "bitcasts": priority +inf, skipped as users by
    all-consumers-or-none, never fused into alone. A bitcast that changes the
    bit width (s8[3,5,2] -> s16[3,5]) is not fusible at all, so it is an
    ordinary user that no producer can fuse into (XLA's
    `DoNotFuseBitWidthChangingBitcast`).
    """
    if instr.opcode != "bitcast":
        return False
    return not instr.operands or instr.operands[0].shape.element_bits == instr.shape.element_bits


def is_fusible(instr: HloInstruction) -> bool:
    """The priority-fusion pass's `IsFusible` (4.3)."""
    if not hlo_is_fusible(instr):
        return False
    if is_elementwise(instr):
        return True
    op = instr.opcode
    if op == "fusion":
        return instr.fusion_kind != "kCustom"
    if op == "bitcast":
        return is_fusible_bitcast(instr)
    return op in _FUSIBLE_NON_ELEMENTWISE


def emitter_kind(kernel: HloInstruction, facts: "KernelFacts | None" = None) -> str:
    """The emitter XLA's GPU backend would use for `kernel`, as the pass decides it
    (`analysis._emission.fusion_pass_emitter_kind`).

    **Arguments:** a fusion, or any instruction (taken as a fusion of one);
    `facts`: its `KernelFacts` if known (saves searching for heroes it lacks).
    **Returns:** "reduction", "transpose", "loop", "scatter", "sort" or "concatenate".
    """
    if facts is None:
        return fusion_pass_emitter_kind(kernel)
    return fusion_pass_emitter_kind(kernel, facts.tiled_transposes > 0, facts.concatenates > 0)


def fused_emitter_is_loop(producer: HloInstruction, consumer: HloInstruction, facts: "KernelFacts | None" = None):
    """Whether fusing `producer` into `consumer` would give the loop emitter, without building the fusion.

    Walks the would-be fused graph in place (a consumer parameter bound to the
    producer continues at the producer's root). Returns None where that walk
    is not enough (transpose or concatenate heroes, tuple roots): build the
    fusion then.
    """
    if facts is not None and (facts.tiled_transposes or facts.concatenates):
        return None
    if facts is None:
        return None
    cf, pf = consumer.fused_computation, producer.fused_computation
    p_root = pf.root if pf is not None else producer
    if p_root.opcode == "tuple":
        return None
    if cf is not None:
        roots = fusion_pass_roots(cf)
        bound = [p for p in cf.parameters if consumer.operands[p.parameter_number] is producer]
        bound_ids = {id(p) for p in bound}
        if any(r.opcode == "parameter" for r in roots):
            return None
    else:
        roots = [consumer]
        bound, bound_ids = [], set()

    def up(x):
        o = x.operands[0]
        if x is consumer:
            return p_root if o is producer else None
        if o.opcode == "parameter":
            if cf is not None and o.computation is cf:
                return p_root if id(o) in bound_ids else None
            return None
        if x is producer:
            return None
        return o

    def fused_users(x) -> int:
        if x is p_root:
            if cf is None:
                return 1
            return len({id(u) for p in bound for u in p.users})
        return len(x.users)

    for r in roots:
        hero = r
        while fusion_pass_is_intermediate(hero, 1):
            nxt = up(hero)
            if nxt is None:
                break
            hero = nxt
        if hero.opcode == "reduce" and is_contiguous_reduction(hero):
            if hero is r or (fused_users(hero) == 1 and reduction_is_race_free(*reduction_dimensions(hero))):
                return False
    if len(roots) > 1:
        return True
    return roots[0].opcode not in ("scatter", "sort")


def fusion_kind_for(kernel: HloInstruction) -> str:
    """The fusion kind XLA's `ChooseKind` gives `kernel`'s emitter: kLoop or kInput."""
    return FUSION_KIND[emitter_kind(kernel)]


# ---------------------------------------------------------------------------
# The pair check, with per-instruction caches


_MISSING = object()


class _CallableVersions:
    """A `version(instr)` function seen through `dict.get`'s signature."""

    __slots__ = ("_fn",)

    def __init__(self, fn):
        self._fn = fn

    def get(self, instr, default=0):
        return self._fn(instr)


# Content rules whose Rejection detail only names the pair: (producer, consumer) -> detail.
_NAMED_DETAILS = {
    "reduce-into-reduce": lambda p, c: f"'{p.name}' and '{c.name}' both reduce",
    "reduction-epilogue": lambda p, c: f"'{c.name}' after reduction '{p.name}'",
}


def _fusibility_rules(producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
    """Rules 2-4 of `CanFuse`: both sides fusible, and the consumer not a lone bitcast."""
    # 2. Fusibility (4.3).
    if not is_fusible(producer):
        return Rejection("producer-not-fusible", f"{producer.opcode} '{producer.name}'")
    if not is_fusible(consumer):
        return Rejection("consumer-not-fusible", f"{consumer.opcode} '{consumer.name}'")
    # 3. (Triton: pairs with a generic Triton fusion are `LegalityChecker.triton`'s.)
    # 4. Never into a lone bitcast.
    if is_fusible_bitcast(consumer):
        return Rejection("bitcast-consumer", f"'{consumer.name}' is a bitcast")
    return None


class LegalityChecker:
    """`CanFuse` with XLA's caches: per-kernel facts are computed once per instruction version.

    **Arguments:** `shared_memory_per_block`: the device's budget in bytes;
    `version`: maps an instruction to a number that changes whenever it
    changes in place, as a function or as a dict read live with `.get(instr, 0)`
    (default: instructions never change); `content`: a `ContentIds` over the
    same versions, to share per-kernel facts between kernels of equal content.
    """

    def __init__(self, shared_memory_per_block: int = DEFAULT_SHARED_MEMORY_PER_BLOCK, version=None,
                 content: ContentIds | None = None):
        self.shared_memory_per_block = shared_memory_per_block or DEFAULT_SHARED_MEMORY_PER_BLOCK
        if version is None:
            versions = {}  # every instruction at version 0
        elif isinstance(version, dict):
            versions = version  # read live: the pass bumps it as fusions grow
        else:
            versions = _CallableVersions(version)
        self._vget = versions.get
        vget = self._vget
        self._version = lambda instr: vget(instr, 0)  # not through self: no cycle back to the checker
        self._kind: dict = {}
        self._facts: dict = {}
        self._ir: dict = {}
        self._pair = PairCache()  # verdicts
        # `CanFuseTriton` for pairs with a generic Triton fusion on either side (a
        # `fusion._triton_fusion.TritonFusionRules`, set by a pass that simulates them); None: such
        # fusions are not fusible, as `IsFusible` says of any kCustom fusion.
        self.triton = None
        self._updates_in_place: dict = {}
        # Per-kernel facts depend on the kernel's content only: with content ids,
        # kernels repeated across layers share one entry, and so does the verdict
        # "rules 2-9 pass" for a pair (rules 1 and 10 look beyond the pair: always run).
        self._pair_key = None
        self._content_passes: set = set()
        # ... and a rejection whose detail only names the pair (`_NAMED_DETAILS`): its rule.
        self._content_rejections: dict = {}
        if content is not None:
            self._key = content.kernel
            self._pair_key = content.pair

    def _key(self, instr: HloInstruction):
        return (instr, self._vget(instr, 0))

    def facts(self, instr: HloInstruction) -> KernelFacts:
        key = self._key(instr)
        f = self._facts.get(key)
        if f is None:
            f = self._facts[key] = kernel_facts(instr)
        return f

    def set_facts(self, instr: HloInstruction, facts: KernelFacts) -> None:
        """Record facts known otherwise (a fused pair's: the sum of both sides')."""
        self._facts[self._key(instr)] = facts

    def emitter_kind(self, instr: HloInstruction) -> str:
        key = self._key(instr)
        k = self._kind.get(key)
        if k is None:
            k = self._kind[key] = emitter_kind(instr, self.facts(instr))
        return k

    def fusion_kind(self, instr: HloInstruction) -> str:
        """kLoop or kInput, as `ChooseKind` gives for `instr`'s emitter."""
        return FUSION_KIND[self.emitter_kind(instr)]

    def _ir_size(self, instr: HloInstruction) -> IrSize:
        key = self._key(instr)
        v = self._ir.get(key)
        if v is None:
            v = self._ir[key] = ir_size(instr)
        return v

    def can_fuse(self, producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
        """The first rule of XLA's `CanFuse` that forbids fusing `producer` into `consumer`, or None (cached)."""
        vget = self._vget
        pv, cv = vget(producer, 0), vget(consumer, 0)
        r = self._pair.get(producer, pv, consumer, cv, _MISSING)
        if r is _MISSING:
            r = self._can_fuse(producer, consumer)
            self._pair.put(producer, pv, consumer, cv, r)
        return r

    def first_rejection(self, producer: HloInstruction, users) -> tuple[bool, HloInstruction | None, Rejection | None]:
        """`can_fuse(producer, u)` over `users` in order, skipping fusible bitcast users
        (`is_fusible_bitcast`), up to the first rejection.

        **Returns:** `(whether any user is not a fusible bitcast, the rejecting user, its Rejection)`;
        the last two are None when every other user passes.
        """
        vget = self._vget
        pv = vget(producer, 0)
        verdicts = self._pair.entries(producer)
        has_non_bitcast = False
        for u in users:
            if u.opcode == "bitcast" and is_fusible_bitcast(u):
                continue
            has_non_bitcast = True
            uv = vget(u, 0)
            e = verdicts.get(u)
            if e is not None and e[1] == uv and e[0] == pv:
                r = e[2]
            else:
                r = self._can_fuse(producer, u)
                verdicts[u] = (pv, uv, r)
            if r is not None:
                return True, u, r
        return has_non_bitcast, None, None

    def _can_fuse(self, producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
        triton = self.triton
        if triton is not None and triton.involves(producer, consumer):
            return triton.can_fuse(producer, consumer)  # XLA asks nothing else of such a pair
        comp = producer.computation
        # 1. Never across the root (instructions after it may feed side effects).
        if comp is not None and comp.root is producer:
            return Rejection("root", f"'{producer.name}' is the root of '{comp.name}'")
        # Rules 2-4 first: cheap, and a pair they reject needs no content key (the verdict is
        # the same whichever is asked first, as a content pass implies they hold).
        r = _fusibility_rules(producer, consumer)
        if r is not None:
            return r
        content_key = None
        if self._pair_key is not None and producer.opcode != "rng" and consumer.opcode != "rng":
            # (an rng's fusibility depends on its user count: not a matter of content)
            content_key = self._pair_key(producer, consumer)
            if content_key in self._content_passes:
                return self._in_place_safety(producer, consumer)
            rule = self._content_rejections.get(content_key)
            if rule is not None:
                return Rejection(rule, _NAMED_DETAILS[rule](producer, consumer))
        r = self._content_rules(producer, consumer)
        if r is not None:
            if content_key is not None and r.rule in _NAMED_DETAILS:
                self._content_rejections[content_key] = r.rule
            return r
        if content_key is not None:
            self._content_passes.add(content_key)
        # 10. In-place safety.
        return self._in_place_safety(producer, consumer)

    def _in_place_safety(self, producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
        """Rule 10, `should_fuse_in_place_op`. It looks into a fusion consumer's body only when that
        body updates a buffer in place, which is a matter of content: known once per kernel, a body
        that does not need not be built (`hlo._deferred`)."""
        if consumer.opcode == "fusion":
            key = self._key(consumer)
            updates = self._updates_in_place.get(key)
            if updates is None:
                updates = self._updates_in_place[key] = bool(_in_place_operands(consumer))
            if not updates:
                return None
        return should_fuse_in_place_op(producer, consumer)

    def _content_rules(self, producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
        """Rules 5-9 (2-4 are `_fusibility_rules`): what the pair's content decides (the Rejection
        names the instructions)."""
        # 5. Scatter.
        r = can_emit_input_fused_scatter(producer, consumer)
        if r is not None:
            return r
        # 6. No significant reduce into a significant reduce.
        pf, cf = self.facts(producer), self.facts(consumer)
        if pf.significant_reduce and cf.significant_reduce:
            return Rejection("reduce-into-reduce", _NAMED_DETAILS["reduce-into-reduce"](producer, consumer))
        # 7. No epilogue that would turn a reduction into a loop fusion.
        if self.emitter_kind(producer) == "reduction":
            is_loop = fused_emitter_is_loop(producer, consumer, pf + cf)
            if is_loop is None:
                fused = hypothetical_fusion(producer, consumer, "kLoop")
                is_loop = emitter_kind(fused) == "loop"
                discard_fusion(fused)
            if is_loop:
                return Rejection("reduction-epilogue", _NAMED_DETAILS["reduction-epilogue"](producer, consumer))
        # 8. FusionFitsInBudget(consumer, producer).
        r = self._fits_in_budget(consumer, producer, cf, pf)
        if r is not None:
            return r
        # 9. Code size.
        return self._merged_too_large(producer, consumer)

    def _fits_in_budget(self, consumer, producer, cf: KernelFacts, pf: KernelFacts) -> Rejection | None:
        r = fusion_fits_in_budget(consumer, producer, cf, pf, self.shared_memory_per_block, consumer_producer=True)
        return Rejection(*r) if r is not None else None

    def fits_in_budget(self, instr1: HloInstruction, instr2: HloInstruction, *,
                       consumer_producer: bool = False) -> Rejection | None:
        """`FusionFitsInBudget(instr1, instr2)` with the cached per-kernel facts (`_budget.fusion_fits_in_budget`)."""
        r = fusion_fits_in_budget(instr1, instr2, self.facts(instr1), self.facts(instr2),
                                  self.shared_memory_per_block, consumer_producer)
        return Rejection(*r) if r is not None else None

    def merged_too_large(self, producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
        """`ProducerConsumerMergedTooLarge` (rule 9 of `CanFuse`, also asked by multi-output fusion)."""
        return self._merged_too_large(producer, consumer)

    def _merged_too_large(self, producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
        """`ProducerConsumerMergedTooLarge`: the producer's IR emitted once per emission of its
        parameter in the consumer, plus the consumer's, above 10,000. (Older XLA also capped
        basic-block splits; XLA today has no such rule, see `FuseProducerConsumerMergedNotTooLarge`.)"""
        p = self._ir_size(producer)
        c = self._ir_size(consumer)
        replication = 1
        if consumer.fused_computation is not None and c.param_size:
            idx = consumer.operands.index(producer)
            replication = c.param_size[idx] if idx < len(c.param_size) else 1
        merged = p.size * replication + c.size
        if merged > MAX_IR_SIZE:
            return Rejection("code-size", f"IR size {merged} > {MAX_IR_SIZE}")
        return None
