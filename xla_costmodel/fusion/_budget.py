"""What `CanFuse` weighs of each kernel: shared memory, tiled and significant reductions, tiled
transposes and concatenates (`KernelFacts`, summed over a fused pair), and the IR size of
`ProducerConsumerMergedTooLarge` (`ir_size`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis._emission import fusion_pass_is_tiled_transpose, is_contiguous_reduction, reduction_dimensions
from ..analysis._gpu import MAX_IR_SIZE as MAX_IR_SIZE
from ..analysis._opcodes import passes_elementwise_roots
from ..hlo import HloInstruction
from ..hlo._fusion_engine import _ordered


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
    dimensions and layout pass their roots on to their operands
    (`analysis._opcodes.passes_elementwise_roots`, as in the GPU cost analysis).
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
    return IrSize(int(total), tuple(int(times.get(id(p), 0)) for p in fused.parameters))


