"""What `CanFuse` weighs of each kernel: shared memory, tiled and significant reductions, tiled
transposes and concatenates (`KernelFacts`, summed over a fused pair), and the IR size of
`ProducerConsumerMergedTooLarge` (`ir_size`)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from ..analysis.emission import fusion_pass_is_tiled_transpose, is_contiguous_reduction, reduction_dimensions
from ..analysis.emission import MAX_IR_SIZE as MAX_IR_SIZE
from ..analysis.opcodes import passes_elementwise_roots
from ..hlo import HloComputation, HloInstruction
from ..fusion_engine import body_growth, operands_first, per_body_state, tracks_growth


MAX_OPERANDS_AND_OUTPUTS = 96  # MaxOperandsAndOutputsPerFusion
MAX_UNNESTED_REDUCTIONS = 8  # kMaxUnnestedReductionOutputsPerFusion
SIGNIFICANT_REDUCTION_SIZE = 16


# ---------------------------------------------------------------------------
# Per-kernel facts for FusionFitsInBudget and ProducerConsumerMergedTooLarge


def _body_instructions(instr: HloInstruction) -> list[HloInstruction]:
    fused = instr.fused_computation
    return fused.instructions if fused is not None else [instr]


def _shared_memory_of(instr: HloInstruction) -> int:
    if instr.opcode == "reduce" and is_contiguous_reduction(instr):
        is_row, _ = reduction_dimensions(instr)
        n_inputs = max(1, len(instr.operands) // 2)
        size_sum = sum(max(1, instr.operands[i].shape.element_bits // 8) for i in range(n_inputs))
        return 32 * size_sum if is_row else 32 * (4 * 32 + 1) * size_sum
    if fusion_pass_is_tiled_transpose(instr):
        return 32 * 33 * max(1, instr.shape.element_bits // 8)
    return 0


def shared_memory_usage(instr: HloInstruction) -> int:
    """`SharedMemoryUsage`: tiled reductions and transposes in the kernel, in bytes."""
    return sum(_shared_memory_of(i) for i in _body_instructions(instr))


def unnested_reductions(instr: HloInstruction) -> int:
    """Tiled (contiguous-dimension) reduces in the kernel."""
    return sum(1 for i in _body_instructions(instr) if is_contiguous_reduction(i))


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
            if is_contiguous_reduction(i):
                nred += 1
                smem += _shared_memory_of(i)
            if i.shape.is_array:
                out = i.shape.num_elements
                if out and i.operands[0].shape.num_elements // out >= SIGNIFICANT_REDUCTION_SIZE:
                    sig = True
        elif op in ("transpose", "copy"):
            if fusion_pass_is_tiled_transpose(i):
                ntr += 1
                smem += _shared_memory_of(i)
        elif op == "concatenate":
            ncat += 1
    return KernelFacts(smem, nred, sig, ntr, ncat)


def _subshape_count(shape) -> int:
    if shape.is_tuple:
        return 1 + sum(_subshape_count(s) for s in shape.tuple_shapes)
    return 1


def fusion_fits_in_budget(instr1: HloInstruction, instr2: HloInstruction, facts1: KernelFacts, facts2: KernelFacts,
                          shared_memory_per_block: int, consumer_producer: bool) -> tuple[str, str] | None:
    """`FusionFitsInBudget(instr1, instr2)`: `(rule, detail)` of the first budget the fused kernel
    would break, or None. Shared memory, unnested reductions (`facts1`, `facts2`: the two kernels'
    `KernelFacts`), then operands plus outputs. `consumer_producer`: `instr1` is the consumer of
    `instr2` (priority fusion): a fusion that adds no operand to the consumer's then passes the
    operand limit whatever its count (multi-output fusion asks without it)."""
    smem = facts1.shared_memory + facts2.shared_memory
    if smem > shared_memory_per_block:
        return "shared-memory", f"{smem} B > {shared_memory_per_block} B per block"
    nred = facts1.unnested_reductions + facts2.unnested_reductions
    if nred > MAX_UNNESTED_REDUCTIONS:
        return "unnested-reductions", f"{nred} > {MAX_UNNESTED_REDUCTIONS}"
    n_out = _subshape_count(instr1.shape) + _subshape_count(instr2.shape)
    # the cheap bound first: at most every operand of both, less the edge between them
    if len(instr1.operands) + len(instr2.operands) - 1 + n_out <= MAX_OPERANDS_AND_OUTPUTS:
        return None
    operands = {id(o) for o in instr1.operands} | {id(o) for o in instr2.operands}
    operands.discard(id(instr1))
    operands.discard(id(instr2))
    if consumer_producer and len(operands) <= len(instr1.operands):
        return None
    if len(operands) + n_out > MAX_OPERANDS_AND_OUTPUTS:
        return "operand-limit", f"{len(operands)} operands + {n_out} outputs > {MAX_OPERANDS_AND_OUTPUTS}"
    return None


@dataclass(frozen=True, slots=True)
class IrSize:
    """`GpuHloCostAnalysis` IR size of a kernel, and per fused parameter."""

    size: int
    param_size: tuple[int, ...] = ()


@dataclass(slots=True, eq=False)
class _IrWalk:
    """The state `ir_size`'s walk ended in, kept per fused body so that a growth of the body
    (`hlo.BodyGrowth`) walks only what it added: the producer's clones, seeded with the dropped
    parameter's roots, then the parameters they read. Everything is an integer count, so the
    order of the additions cannot change the result."""

    serial: int
    size: int
    root: HloInstruction
    ew: dict
    root_size: dict
    times: dict
    params: list
    result: IrSize


_IR_WALKS: "weakref.WeakKeyDictionary[HloComputation, _IrWalk]" = per_body_state(weakref.WeakKeyDictionary())


def ir_size(instr: HloInstruction) -> IrSize:
    """How many times each instruction of the kernel is emitted, summed (`FusionCalculateUtilizations`).

    Walking from the root towards the parameters, an instruction is emitted
    once per use by an elementwise chain ending at an "elementwise root" and,
    for every non-elementwise user, as many times as that user is emitted.
    Elementwise ops, tuples, get-tuple-elements and bitcasts that keep the
    dimensions and layout pass their roots on to their operands
    (`analysis._opcodes.passes_elementwise_roots`, as in the GPU cost analysis).
    """
    fused = instr.fused_computation
    if fused is None:
        return IrSize(1)
    g = body_growth(fused)
    serial = g.serial if g is not None else 0
    n = len(fused.instructions)
    walk = _IR_WALKS.get(fused)
    if walk is not None and walk.root is fused.root:
        if walk.serial == serial and walk.size == n:
            return walk.result
        if (g is not None and g.previous == walk.serial and g.size_before == walk.size and g.size_after == n
                and len(g.dropped) == 1):
            # The walk is this module's own: it is brought up to date in place (or dropped).
            del _IR_WALKS[fused]
            grown = _grown_ir_walk(walk, g)
            if grown is not None:
                _IR_WALKS[fused] = grown
                return grown.result
    order = operands_first(fused)
    empty: frozenset = frozenset()
    ew: dict[int, frozenset] = {}
    root_size: dict[int, float] = {}
    times: dict[int, float] = {}
    root = fused.root
    ew[id(root)] = frozenset((id(root),))
    root_size[id(root)] = 1
    total = _walk(reversed(order), ew, root_size, times, empty)
    params = fused.parameters
    result = IrSize(int(total), tuple(int(times.get(id(p), 0)) for p in params))
    if tracks_growth(fused):
        _IR_WALKS[fused] = _IrWalk(serial, n, root, ew, root_size, times, params, result)
    else:
        _IR_WALKS.pop(fused, None)
    return result


def _walk(instrs, ew: dict, root_size: dict, times: dict, empty: frozenset) -> float:
    """The walk over `instrs` (users before operands), filling the three maps; returns the sum of the times."""
    total = 0.0
    for i in instrs:
        iid = id(i)
        roots = ew.get(iid, empty)
        t = 0.0
        for r in roots:
            t += root_size.get(r, 0)
        times[iid] = t
        total += t
        if not i.operands:
            continue
        passes = passes_elementwise_roots(i)
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
    return total


def _grown_ir_walk(walk: _IrWalk, g) -> _IrWalk | None:
    """`walk` after growth `g` (its maps updated in place), or None when the growth is not one
    this can follow (then `walk` is spoilt: the caller has dropped it)."""
    dropped, value = g.dropped[0], g.value
    did, vid = id(dropped), id(value)
    ew, root_size, times = walk.ew, walk.root_size, walk.times
    seed = ew.pop(did, frozenset())
    if did in seed:
        seed = (seed - {did}) | {vid}
    if seed:
        ew[vid] = seed
    if did in root_size:
        root_size[vid] = root_size.pop(did)
    total = walk.result.size - times.pop(did, 0.0)
    clones = [h for h in g.added if h.opcode != "parameter"]
    new_params = [h for h in g.added if h.opcode == "parameter"]
    total += _walk(reversed(clones), ew, root_size, times, frozenset())
    # The parameters the clones read: their old counts out, the new ones in.
    added = {id(h) for h in g.added}
    read = {}
    for h in clones:
        for o in h.operands:
            if id(o) not in added:
                if o.opcode != "parameter":
                    return None
                read[id(o)] = o
    for h in list(read.values()) + new_params:
        hid = id(h)
        total -= times.get(hid, 0.0)
        t = 0.0
        for r in ew.get(hid, ()):
            t += root_size.get(r, 0)
        times[hid] = t
        total += t
    params = [h for h in walk.params if h is not dropped] + new_params
    params.sort(key=lambda h: h.parameter_number)
    result = IrSize(int(total), tuple(int(times.get(id(p), 0)) for p in params))
    return _IrWalk(g.serial, g.size_after, walk.root, ew, root_size, times, params, result)
