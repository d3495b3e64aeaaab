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
  facts (shared memory, IR size, ...) cached per instruction object.

Rules are identified by short names (`RULES`), used in the fusion log.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hlo import HloComputation, HloInstruction
from ..hlo._deferred import root_opcode
from ..hlo._edit import _ordered, discard_fusion, hypothetical_fusion
from ..hlo._structure import ContentIds
from ..models._launch import _faster_than_elemental, _find_hero_matching
from ._pair_cache import PairCache

__all__ = [
    "RULES",
    "LegalityChecker",
    "Rejection",
    "emitter_kind",
    "fusion_kind_for",
    "hlo_is_fusible",
    "is_fusible",
    "is_fusible_bitcast",
    "is_real_reduction",
]

# Rule name -> what it forbids (the order is `CanFuse`'s order).
RULES: dict[str, str] = {
    "root": "the producer is its computation's root instruction",
    "producer-not-fusible": "the producer is not fusible (4.3)",
    "consumer-not-fusible": "the consumer is not fusible (4.3)",
    "bitcast-consumer": "not fusing into a single (fusible) bitcast as consumer",
    "scatter-output": "do not fuse into the output of a scatter",
    "scatter-in-place-operand": "do not fuse into the in-place operand of a scatter",
    "scatter-in-place-reader": "the producer reads the in-place operand of a scatter",
    "reduce-into-reduce": "both the producer and the consumer contain a significant reduce",
    "reduction-epilogue": "fusion into the output of a reduction would create a loop fusion",
    "shared-memory": "shared memory of the fusion would exceed the per-block budget",
    "unnested-reductions": "more than 8 unnested (tiled) reductions in one fusion",
    "operand-limit": "more than 96 operands and outputs",
    "code-size": "the fusion would be too large (IR size above 10,000)",
    "in-place": "in-place safety (ShouldFuseInPlaceOp)",
    # Producer-level (all consumers or none, 4.5) and cost decisions:
    "no-users": "the producer has no users",
    "only-bitcast-users": "the producer has only (fusible) bitcast users",
    "negative-priority": "fusing would not save time (priority < 0)",
    "unpriced": "the cost model could not price the fusion",
}

WARP_SIZE = 32
MAX_OPERANDS_AND_OUTPUTS = 96  # MaxOperandsAndOutputsPerFusion
MAX_UNNESTED_REDUCTIONS = 8  # kMaxUnnestedReductionOutputsPerFusion
MAX_IR_SIZE = 10_000  # GpuHloCostAnalysis::kMaxIRSize
DEFAULT_SHARED_MEMORY_PER_BLOCK = 48 * 1024
SIGNIFICANT_REDUCTION_SIZE = 16

ELEMENTWISE_UNARY = frozenset(
    {
        "abs", "cbrt", "ceil", "clz", "convert", "copy", "cosine", "erf", "exponential",
        "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one", "logistic",
        "negate", "not", "popcnt", "real", "reduce-precision", "round-nearest-afz",
        "round-nearest-even", "rsqrt", "sign", "sine", "sqrt", "tan", "tanh", "stochastic-convert",
    }
)
ELEMENTWISE_BINARY = frozenset(
    {
        "add", "and", "atan2", "compare", "complex", "divide", "maximum", "minimum", "multiply",
        "or", "power", "remainder", "shift-left", "shift-right-arithmetic", "shift-right-logical",
        "subtract", "xor",
    }
)
ELEMENTWISE = ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | frozenset({"select", "clamp", "map"})

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


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a producer-consumer pair (or a producer) may not be fused.

    `rule`: a key of `RULES`; `detail`: the specifics (shapes, counts).
    """

    rule: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}" if self.detail else self.rule


# ---------------------------------------------------------------------------
# Single instructions


def _bits(shape) -> int:
    return shape.element_bits


def is_elementwise(instr: HloInstruction) -> bool:
    """`HloInstruction::IsElementwise`: elementwise opcodes; bitcast-convert only when widths match."""
    op = instr.opcode
    if op in ELEMENTWISE:
        return True
    if op == "bitcast-convert":
        return bool(instr.operands) and _bits(instr.operands[0].shape) == _bits(instr.shape)
    return False


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
    return not instr.operands or _bits(instr.operands[0].shape) == _bits(instr.shape)


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


def _nondegenerate_physical(shape) -> list[int]:
    """Dimensions of size > 1, most major first, in the layout's order."""
    return [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]


def reshape_is_bitcast(operand_shape, shape) -> bool:
    """A reshape between two layouts that are row-major on their non-trivial dims moves no data."""
    for s in (operand_shape, shape):
        phys = _nondegenerate_physical(s)
        if phys != sorted(phys):
            return False
    return True


def transpose_is_bitcast(operand_shape, shape, dimensions) -> bool:
    """`ShapeUtil::TransposeIsBitcast`: the physical order of the non-trivial dims is kept."""
    if len(dimensions) != len(shape.dims) or len(operand_shape.dims) != len(shape.dims):
        return False
    out_order = [dimensions[d] for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]
    in_order = [d for d in reversed(operand_shape.minor_to_major) if operand_shape.dims[d] != 1]
    return out_order == in_order


# `models._launch` has its own `is_intermediate`, `reduction_dimensions`,
# `tiled_transpose`, `fused_roots` and `emitter_kind`. They are not the same
# logic, so both stay: the pass's versions here test bitcast-ness on the
# physical layout with unit dims ignored (the models' need default layouts),
# count width-keeping bitcast-converts as elementwise, count shapes with
# `num_elements` (the models with `elements`), detect tiled transposes before
# normalizing (no "021" transposes that keep the minor dim), strip
# get-tuple-elements from fusion roots, and need only the emitter kinds that
# `ChooseKind` and `CanFuse` look at (no device, no per-root shape checks).
# Swapping either set for the other changes which pairs the pass fuses.
def is_intermediate(instr: HloInstruction, allowed_operands: int = 1) -> bool:
    """`IsIntermediate`: elementwise (layout-keeping copies only) or bitcast-like, with 1..N operands."""
    n = len(instr.operands)
    if n == 0 or n > allowed_operands:
        return False
    if is_elementwise(instr):
        if instr.opcode == "copy":
            return instr.shape == instr.operands[0].shape
        return True
    op = instr.opcode
    if op == "bitcast":
        return True
    if op == "reshape":
        return reshape_is_bitcast(instr.operands[0].shape, instr.shape)
    if op == "transpose":
        return transpose_is_bitcast(instr.operands[0].shape, instr.shape, instr.attribute("dimensions", ()))
    return False


def _dims_consecutive(shape, dims) -> bool:
    """`LayoutUtil::AreDimensionsConsecutive`: positions of `dims` in minor_to_major are contiguous."""
    if not dims:
        return True
    m2m = shape.minor_to_major
    pos = sorted(m2m.index(d) for d in dims)
    return pos[-1] - pos[0] == len(pos) - 1


def _partition(shape, middle) -> tuple[int, int, int]:
    """`PartitionShapeByMiddleDimensions`: sizes of the dims more major than, in, and more minor than `middle`."""
    major = mid = minor = 1
    seen_middle = False
    for d in reversed(shape.minor_to_major):  # major to minor
        size = shape.dims[d]
        if d in middle:
            seen_middle = True
            mid *= size
        elif seen_middle:
            minor *= size
        else:
            major *= size
    return major, mid, minor


def reduction_dimensions(reduce: HloInstruction) -> tuple[bool, tuple[int, int, int]]:
    """`GetReductionKindAndContiguousComponents`: (is_row_reduction, 3 sizes)."""
    shape = reduce.operands[0].shape
    reduced = set(reduce.attribute("dimensions", ()))
    keep = [d for d in range(len(shape.dims)) if d not in reduced]
    if not keep:
        return True, (1, 1, shape.num_elements)
    if _dims_consecutive(shape, keep):
        major, mid, minor = _partition(shape, set(keep))
        if mid == 1:
            return True, (1, 1, major * minor)
        if minor == 1:
            return False, (1, major, mid)
        return True, (major, mid, minor)
    major, mid, minor = _partition(shape, reduced)
    if minor == 1:
        return True, (1, major, mid)
    return False, (major, mid, minor)


def is_reduction_from_or_to_contiguous_dimensions(instr: HloInstruction) -> bool:
    """A reduce the tiled reduction emitter handles (and that is faster than the elemental one)."""
    if instr.opcode != "reduce" or not instr.operands:
        return False
    shape = instr.operands[0].shape
    if not shape.is_array:
        return False
    reduced = tuple(instr.attribute("dimensions", ()))
    keep = [d for d in range(len(shape.dims)) if d not in reduced]
    if not (_dims_consecutive(shape, keep) or _dims_consecutive(shape, reduced)):
        return False
    is_row, dims = reduction_dimensions(instr)
    return _faster_than_elemental(is_row, dims, WARP_SIZE)


def _reduction_is_race_free(reduce: HloInstruction) -> bool:
    is_row, dims = reduction_dimensions(reduce)
    if is_row:
        return dims[2] <= 1024 * 16 and dims[0] <= 8
    return dims[1] <= WARP_SIZE * 128


def is_real_reduction(root: HloInstruction, hero: HloInstruction) -> bool:
    """`IsRealReductionHero`: a tiled reduce that is the root, or reaches it alone and race-free."""
    if hero.opcode != "reduce" or not is_reduction_from_or_to_contiguous_dimensions(hero):
        return False
    return hero is root or (len(hero.users) == 1 and _reduction_is_race_free(hero))


def tiled_transpose(instr: HloInstruction) -> bool:
    """Whether `instr` is a transpose (or copy) the shared-memory transpose emitter would tile.

    The operand's most-minor non-trivial dimension must leave the minor
    position, and both minor dims be ≥ 16 (or ≥ 8 with ≥ 64·128 elements),
    as `GetDescriptionForTiledTransposeEmitter` requires after normalizing.
    """
    if instr.opcode not in ("transpose", "copy") or not instr.operands:
        return False
    src, dst = instr.operands[0].shape, instr.shape
    if not (src.is_array and dst.is_array) or len(src.dims) != len(dst.dims):
        return False
    if instr.opcode == "transpose":
        perm = tuple(instr.attribute("dimensions", ()))
        if transpose_is_bitcast(src, dst, perm):
            return False
    else:
        if src.minor_to_major == dst.minor_to_major:
            return False
        perm = tuple(range(len(dst.dims)))
    src_phys = _nondegenerate_physical(src)
    # output dims in physical order, named by the operand dim they read
    dst_phys = [perm[d] for d in reversed(dst.minor_to_major) if dst.dims[d] != 1]
    if len(src_phys) < 2 or not dst_phys or src_phys[-1] == dst_phys[-1]:
        return False
    a = src.dims[src_phys[-1]]
    b = src.dims[dst_phys[-1]]
    if a >= 16 and b >= 16:
        return True
    return a >= 8 and b >= 8 and src.num_elements >= 64 * 128


# ---------------------------------------------------------------------------
# Emitter kinds


def _fusion_roots(comp: HloComputation) -> list[HloInstruction]:
    root = comp.root
    if root.opcode == "tuple":
        out: list[HloInstruction] = []
        for o in root.operands:
            while o.opcode == "get-tuple-element" and o.operands:
                o = o.operands[0]
            if o not in out:
                out.append(o)
        return out
    return [root]


def find_hero(root: HloInstruction, inside, transposes: bool = True, concats: bool = True) -> HloInstruction:
    """`FindNonTrivialHero`: the op that decides the emitter for `root`.

    `transposes` / `concats`: False when the kernel has none (skips the searches).
    """
    hero = root
    while is_intermediate(hero, 1) and inside(hero.operands[0]):
        hero = hero.operands[0]
    if transposes:
        found = _find_hero_matching(hero, tiled_transpose, inside, is_intermediate)
        if found is not None:
            return found
    if concats:
        found = _find_hero_matching(hero, lambda n: n.opcode == "concatenate", inside, is_intermediate)
        if found is not None:
            return found
    return hero if hero.opcode == "reduce" else root


def emitter_kind(kernel: HloInstruction, facts: "KernelFacts | None" = None) -> str:
    """The emitter XLA's GPU backend would use for `kernel` (`GetEmitterFusionKind`).

    **Arguments:** a fusion, or any instruction (taken as a fusion of one);
    `facts`: its `KernelFacts` if known (saves searching for heroes it lacks).
    **Returns:** "reduction", "transpose", "loop", "scatter", "sort" or "concatenate".
    """
    fused = kernel.fused_computation
    if fused is not None:
        roots = _fusion_roots(fused)

        def inside(x):
            return x.computation is fused and x.opcode != "parameter"

    else:
        roots = [kernel]

        def inside(x):
            return x is kernel

    tr = facts is None or facts.tiled_transposes > 0
    cc = facts is None or facts.concatenates > 0
    heroes = [find_hero(r, inside, tr, cc) for r in roots]
    for r, h in zip(roots, heroes):
        if is_real_reduction(r, h):
            return "reduction"
    for h in heroes:
        if tiled_transpose(h):
            return "transpose"
    if len(roots) > 1:
        return "loop"
    root = roots[0]
    if root.opcode == "scatter":
        return "scatter"
    if root.opcode == "sort":
        return "sort"
    if heroes[0].opcode == "concatenate" and len(heroes[0].operands) <= 4:
        return "concatenate"
    return "loop"


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
        roots = _fusion_roots(cf)
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
        while is_intermediate(hero, 1):
            nxt = up(hero)
            if nxt is None:
                break
            hero = nxt
        if hero.opcode == "reduce" and is_reduction_from_or_to_contiguous_dimensions(hero):
            if hero is r or (fused_users(hero) == 1 and _reduction_is_race_free(hero)):
                return False
    if len(roots) > 1:
        return True
    return roots[0].opcode not in ("scatter", "sort")


_KIND = {
    "loop": "kLoop",
    "reduction": "kInput",
    "transpose": "kInput",
    "concatenate": "kInput",
    "scatter": "kInput",
    "sort": "kInput",
}


def fusion_kind_for(kernel: HloInstruction) -> str:
    """The fusion kind XLA's `ChooseKind` gives `kernel`'s emitter: kLoop or kInput."""
    return _KIND[emitter_kind(kernel)]


# ---------------------------------------------------------------------------
# Per-kernel facts for FusionFitsInBudget and ProducerConsumerMergedTooLarge


def _body_instructions(instr: HloInstruction) -> list[HloInstruction]:
    fused = instr.fused_computation
    return fused.instructions if fused is not None else [instr]


def _shared_memory_of(instr: HloInstruction) -> int:
    if instr.opcode == "reduce" and is_reduction_from_or_to_contiguous_dimensions(instr):
        is_row, _ = reduction_dimensions(instr)
        n_inputs = max(1, len(instr.operands) // 2)
        size_sum = sum(max(1, instr.operands[i].shape.element_bits // 8) for i in range(n_inputs))
        return 32 * size_sum if is_row else 32 * (4 * 32 + 1) * size_sum
    if tiled_transpose(instr):
        return 32 * 33 * max(1, instr.shape.element_bits // 8)
    return 0


def shared_memory_usage(instr: HloInstruction) -> int:
    """`SharedMemoryUsage`: tiled reductions and transposes in the kernel, in bytes."""
    return sum(_shared_memory_of(i) for i in _body_instructions(instr))


def unnested_reductions(instr: HloInstruction) -> int:
    """Tiled (contiguous-dimension) reduces in the kernel."""
    return sum(1 for i in _body_instructions(instr) if is_reduction_from_or_to_contiguous_dimensions(i))


def contains_significant_reduce(instr: HloInstruction) -> bool:
    """An array-shaped reduce with ≥ 16 input elements per output element."""
    for i in _body_instructions(instr):
        if i.opcode == "reduce" and i.shape.is_array:
            out = i.shape.num_elements
            if out and i.operands[0].shape.num_elements // out >= SIGNIFICANT_REDUCTION_SIZE:
                return True
    return False


@dataclass(frozen=True, slots=True)
class KernelFacts:
    """Sums over a kernel's instructions that `CanFuse` needs; a fused pair's facts are the sum of both sides'."""

    shared_memory: int = 0
    unnested_reductions: int = 0
    significant_reduce: bool = False
    tiled_transposes: int = 0
    concatenates: int = 0

    def __add__(self, other: "KernelFacts") -> "KernelFacts":
        return KernelFacts(
            self.shared_memory + other.shared_memory,
            self.unnested_reductions + other.unnested_reductions,
            self.significant_reduce or other.significant_reduce,
            self.tiled_transposes + other.tiled_transposes,
            self.concatenates + other.concatenates,
        )


def kernel_facts(instr: HloInstruction) -> KernelFacts:
    """Shared memory, tiled reductions, significant reduces, tiled transposes and concatenates in the kernel."""
    smem = nred = ntr = ncat = 0
    sig = False
    for i in _body_instructions(instr):
        op = i.opcode
        if op == "parameter":
            continue
        if op == "reduce":
            if is_reduction_from_or_to_contiguous_dimensions(i):
                nred += 1
                smem += _shared_memory_of(i)
            if i.shape.is_array:
                out = i.shape.num_elements
                if out and i.operands[0].shape.num_elements // out >= SIGNIFICANT_REDUCTION_SIZE:
                    sig = True
        elif op in ("transpose", "copy"):
            if tiled_transpose(i):
                ntr += 1
                smem += _shared_memory_of(i)
        elif op == "concatenate":
            ncat += 1
    return KernelFacts(smem, nred, sig, ntr, ncat)


def _subshape_count(shape) -> int:
    if shape.is_tuple:
        return 1 + sum(_subshape_count(s) for s in shape.tuple_shapes)
    return 1


@dataclass(frozen=True, slots=True)
class IrSize:
    """`GpuHloCostAnalysis` IR size of a kernel, and per fused parameter."""

    size: int
    param_size: tuple[int, ...] = ()


def ir_size(instr: HloInstruction) -> IrSize:
    """How many times each instruction of the kernel is emitted, summed (`FusionCalculateUtilizations`).

    Walking from the root towards the parameters, an instruction is emitted
    once per use by an elementwise chain ending at an "elementwise root" and,
    for every non-elementwise user, as many times as that user is emitted.
    Elementwise ops, tuples, get-tuple-elements and bitcasts that keep the
    dimensions and layout (`ShapeUtil::EqualIgnoringElementType`) pass their
    roots on to their operands.
    """
    fused = instr.fused_computation
    if fused is None:
        return IrSize(1)
    order = _ordered(fused)
    empty: frozenset = frozenset()
    ew: dict[int, frozenset] = {}
    root_size: dict[int, float] = {}
    times: dict[int, float] = {}
    root = fused.root
    ew[id(root)] = frozenset((id(root),))
    root_size[id(root)] = 1
    total = 0.0
    for i in reversed(order):
        iid = id(i)
        roots = ew.get(iid, empty)
        t = 0.0
        for r in roots:
            t += root_size.get(r, 0)
        times[iid] = t
        total += t
        if not i.operands:
            continue
        passes = is_elementwise(i) or i.opcode in ("tuple", "get-tuple-element") or _same_dims_bitcast(i)
        for o in i.operands:
            oid = id(o)
            cur = ew.get(oid, empty)
            if passes:
                if not cur:
                    ew[oid] = roots
                elif not roots <= cur:
                    ew[oid] = cur | roots
            else:
                if oid not in cur:
                    ew[oid] = cur | {oid}
                root_size[oid] = root_size.get(oid, 0) + t
    return IrSize(int(total), tuple(int(times.get(id(p), 0)) for p in fused.parameters))


def _same_dims_bitcast(instr: HloInstruction) -> bool:
    """A bitcast between shapes equal but for the element type (dimensions and layout kept)."""
    if instr.opcode != "bitcast":
        return False
    src, dst = instr.operands[0].shape, instr.shape
    return (src.is_array and dst.is_array and tuple(src.dims) == tuple(dst.dims)
            and tuple(src.minor_to_major) == tuple(dst.minor_to_major))


# ---------------------------------------------------------------------------
# In-place rules


def _in_place_operands(instr: HloInstruction) -> list[tuple[int, HloInstruction | None]]:
    """Operand numbers whose buffer `instr` updates in place, with the in-place op (inside a fusion)."""
    op = instr.opcode
    if op == "dynamic-update-slice":
        return [(0, instr)]
    if op == "scatter":
        n = max(1, (len(instr.operands) - 1) // 2)
        return [(i, instr) for i in range(n)]
    fused = instr.fused_computation
    if fused is None:
        return []
    out = []
    for root in _fusion_roots(fused):
        node = root
        while node.opcode == "bitcast" and node.operands:
            node = node.operands[0]
        if node.opcode not in ("dynamic-update-slice", "scatter"):
            continue
        in_place = node
        n = 1 if node.opcode == "dynamic-update-slice" else max(1, (len(node.operands) - 1) // 2)
        for k in range(n):
            src = node.operands[k]
            while src.opcode in ("bitcast", "dynamic-update-slice", "scatter") and src.operands:
                src = src.operands[0]
            if src.opcode == "parameter":
                out.append((src.parameter_number, in_place))
    return out


def _non_elementwise(instr: HloInstruction) -> list[HloInstruction]:
    return [
        i
        for i in _body_instructions(instr)
        if i.opcode not in ("fusion", "bitcast", "parameter") and not is_elementwise(i)
    ]


def _constant_int(instr: HloInstruction) -> int | None:
    if instr.opcode != "constant" or instr.literal_text is None:
        return None
    text = instr.literal_text.strip().strip("{}").split(",")[0].strip()
    try:
        return int(text)
    except ValueError:
        try:
            return int(float(text))
        except ValueError:
            return None


def _real_operand(kernel: HloInstruction, operand: HloInstruction) -> HloInstruction:
    if kernel.opcode == "fusion" and operand.opcode == "parameter":
        return kernel.operands[operand.parameter_number]
    return operand


def _reachable(start: HloInstruction, targets: set[int]) -> bool:
    stack, seen = [start], set()
    while stack:
        x = stack.pop()
        if id(x) in targets:
            return True
        if id(x) in seen:
            continue
        seen.add(id(x))
        stack.extend(x.users)
    return False


def should_fuse_in_place_op(producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
    """`InstructionFusion::ShouldFuseInPlaceOp`: keep in-place updates of the consumer safe."""
    for number, in_place_op in _in_place_operands(consumer):
        buffer = consumer.operands[number]
        for i, o in enumerate(consumer.operands):
            if i != number and o is buffer:
                return Rejection("in-place", f"'{consumer.name}' reads its in-place buffer '{buffer.name}' twice")
        if not (buffer is producer or buffer in producer.operands):
            continue
        nonelem = _non_elementwise(producer)
        if len(nonelem) > 1:
            return Rejection("in-place", "the producer has several non-elementwise ops and touches the in-place buffer")
        if not nonelem:
            fused = consumer.fused_computation
            if fused is None:
                return None
            others = {id(i) for i in _non_elementwise(consumer) if i is not in_place_op}
            if producer in consumer.operands:
                param = fused.parameter(consumer.operands.index(producer))
                if others and _reachable(param, others):
                    return Rejection("in-place", "non-elementwise ops in the consumer would conflict in place")
            return None
        dus_ops = [i for i in _body_instructions(consumer) if i.opcode == "dynamic-update-slice"]
        if not dus_ops:
            return None
        if len(dus_ops) > 1:
            return Rejection("in-place", "several dynamic-update-slices in the consumer")
        dus = dus_ops[0]
        x = nonelem[0]
        rank = len(dus.shape.dims)
        if x.opcode == "slice":
            if x.shape != dus.operands[1].shape:
                return Rejection("in-place", "slice shape differs from the update shape")
            starts = x.attribute("slice", ())
            for d in range(rank):
                c = _constant_int(_real_operand(consumer, dus.operands[2 + d]))
                if c is None or d >= len(starts) or c != starts[d][0] or starts[d][2] != 1:
                    return Rejection("in-place", "dynamic-update-slice and slice index mismatch")
            return None
        if x.opcode == "dynamic-slice":
            if x.shape != dus.operands[1].shape:
                return Rejection("in-place", "dynamic-slice shape differs from the update shape")
            for d in range(rank):
                a = _real_operand(producer, x.operands[1 + d])
                b = _real_operand(consumer, dus.operands[2 + d])
                ca, cb = _constant_int(a), _constant_int(b)
                if ca != cb or (ca is None and a is not b):
                    return Rejection("in-place", "dynamic-update-slice and dynamic-slice index mismatch")
            return None
        return Rejection("in-place", f"unrecognized in-place update pair ({x.opcode})")
    return None


def _is_input_fusible_scatter(instr: HloInstruction) -> bool:
    if instr.opcode == "scatter":
        return True
    fused = instr.fused_computation
    return fused is not None and instr.fusion_kind == "kInput" and root_opcode(fused) == "scatter"


def can_emit_input_fused_scatter(producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
    """`CanEmitInputFusedScatter`."""
    if _is_input_fusible_scatter(producer):
        return Rejection("scatter-output", f"'{producer.name}' is a scatter")
    if not _is_input_fusible_scatter(consumer):
        return None
    fused = consumer.fused_computation
    if fused is not None:
        first = fused.root.operands[0]
        in_place = consumer.operands[first.parameter_number] if first.opcode == "parameter" else None
    else:
        in_place = consumer.operands[0]
    if in_place is producer:
        return Rejection("scatter-in-place-operand", f"'{producer.name}' is the buffer '{consumer.name}' updates")
    if in_place is not None and in_place in producer.operands:
        return Rejection("scatter-in-place-reader", f"'{producer.name}' reads '{in_place.name}'")
    return None


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
    # 3. (Triton: no generic Triton fusions are simulated.)
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
        return _KIND[self.emitter_kind(instr)]

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
        smem = cf.shared_memory + pf.shared_memory
        if smem > self.shared_memory_per_block:
            return Rejection("shared-memory", f"{smem} B > {self.shared_memory_per_block} B per block")
        nred = cf.unnested_reductions + pf.unnested_reductions
        if nred > MAX_UNNESTED_REDUCTIONS:
            return Rejection("unnested-reductions", f"{nred} > {MAX_UNNESTED_REDUCTIONS}")
        n_out = _subshape_count(consumer.shape) + _subshape_count(producer.shape)
        if len(consumer.operands) + len(producer.operands) - 1 + n_out <= MAX_OPERANDS_AND_OUTPUTS:
            return None
        operands = {id(o) for o in consumer.operands} | {id(o) for o in producer.operands}
        operands.discard(id(consumer))
        operands.discard(id(producer))
        if len(operands) <= len(consumer.operands):
            return None
        if len(operands) + n_out > MAX_OPERANDS_AND_OUTPUTS:
            return Rejection(
                "operand-limit", f"{len(operands)} operands + {n_out} outputs > {MAX_OPERANDS_AND_OUTPUTS}"
            )
        return None

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
