"""What each HLO opcode is, for every layer above: elementwise or not, free, control flow,
collective, a library call, matrix-unit work.

XLA keeps these facts on `HloOpcode` / `HloInstruction` (`IsElementwise`,
`IsFusible`, ...). Here they are sets of opcodes as spelled in HLO text and
a few predicates, so that the cost analysis, the emitter facts
(`_emission`), the cost models, the fitted models' features and the fusion
pass all ask the same question the same way. Where two callers need
different answers, the sets have different names and say why.
"""

from __future__ import annotations

from ._frontend import int_list_attribute
from ._shapes import reshape_is_bitcast, transpose_is_bitcast

# ---------------------------------------------------------------------------
# Elementwise opcodes

# Elementwise opcodes and whether XLA counts them as transcendental
# (`HloCostAnalysis::HandleElementwiseOp` in the XLA of jaxlib 0.10.2: one
# transcendental per output element for these, else one flop per element).
TRANSCENDENTAL_OPCODES = frozenset(
    "acos acosh asin asinh atanh cosh sinh atan2 cbrt cosine erf exponential exponential-minus-one "
    "log log-plus-one logistic power rsqrt sine sqrt tan tanh".split()
)
ELEMENTWISE_UNARY = frozenset(
    "abs ceil floor count-leading-zeros convert bitcast-convert imag real is-finite negate not popcnt "
    "round-nearest-afz round-nearest-even sign reduce-precision "
    "acos acosh asin asinh atanh cosh sinh cbrt cosine erf exponential exponential-minus-one log "
    "log-plus-one logistic rsqrt sine sqrt tan tanh".split()
)
ELEMENTWISE_BINARY = frozenset(
    "add subtract multiply divide remainder maximum minimum and or xor shift-left shift-right-arithmetic "
    "shift-right-logical complex compare stochastic-convert atan2 power mulhi".split()
)
ELEMENTWISE_TERNARY = frozenset({"select", "clamp"})
ELEMENTWISE_OPCODES = ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | ELEMENTWISE_TERNARY

# `HloInstruction::IsElementwise()` (used by the GPU utilization propagation):
# the arithmetic opcodes above plus copy and map. Bitcast-convert only when the
# element width does not change; dynamic-update-slice is elementwise on
# operand 0 only, which `IsElementwise()` does not count.
IS_ELEMENTWISE = ELEMENTWISE_OPCODES | {"copy", "map"}


def is_elementwise(instr) -> bool:
    """`HloInstruction::IsElementwise`: `IS_ELEMENTWISE`, bitcast-convert only when the element width stays."""
    op = instr.opcode
    if op == "bitcast-convert":
        return bool(instr.operands) and instr.operands[0].shape.element_bits == instr.shape.element_bits
    return op in IS_ELEMENTWISE


def passes_elementwise_roots(instr) -> bool:
    """Whether XLA's `FusionCalculateUtilizations` hands `instr`'s elementwise use roots on to its
    operands (instead of making each operand a root of its own).

    True for an elementwise instruction (`HloInstruction::IsElementwise`, which
    holds for a fusion whose instructions all are), a tuple, a
    get-tuple-element, and a bitcast between shapes equal but for the element
    type (`ShapeUtil::EqualIgnoringElementType`: dimensions and layout kept).
    The GPU cost analysis (`_gpu`) and the fusion pass's IR size
    (`fusion._budget.ir_size`) walk a fusion this way.
    """
    op = instr.opcode
    if op in ("tuple", "get-tuple-element"):
        return True
    if op == "bitcast":
        src, dst = instr.operands[0].shape, instr.shape
        return (src.is_array and dst.is_array and tuple(src.dims) == tuple(dst.dims)
                and tuple(src.minor_to_major) == tuple(dst.minor_to_major))
    return _elementwise_or_elementwise_fusion(instr)


def _elementwise_or_elementwise_fusion(instr) -> bool:
    # `HloInstruction::IsElementwise` of a fusion: every fused instruction but the parameters is.
    if instr.opcode == "fusion":
        comp = instr.fused_computation
        return comp is not None and all(
            h.opcode == "parameter" or _elementwise_or_elementwise_fusion(h) for h in comp.instructions)
    return is_elementwise(instr)


# ---------------------------------------------------------------------------
# Which instructions are kernels

#: Instructions that run no code of their own: a cost model prices them at 0 ("free").
FREE_OPCODES = frozenset(
    {"parameter", "constant", "bitcast", "tuple", "get-tuple-element", "after-all", "add-dependency",
     "opt-barrier", "domain"}
)
#: Instructions that call other computations and are not kernels themselves: their time is that
#: of the kernels they run.
CONTROL_FLOW_OPCODES = frozenset({"while", "conditional", "call", "async-start", "async-update", "async-done"})
#: Instructions whose called computations run as sequences of kernels (not inlined into one kernel
#: like a fusion body or a reducer): the entry's kernels are found through these. An async-start's
#: async-update and async-done run no computation of their own.
CALLS_KERNEL_SEQUENCES = frozenset({"while", "conditional", "call", "async-start"})
COLLECTIVE_OPCODES = frozenset(
    {"all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start", "all-gather-done",
     "reduce-scatter", "all-to-all", "ragged-all-to-all", "collective-permute", "collective-permute-start",
     "collective-permute-done", "collective-broadcast", "send", "send-done", "recv", "recv-done"}
)
#: Instructions XLA:GPU hands to a library (cuBLAS, cuDNN, cuFFT, cuSolver) when not fused.
LIBRARY_OPCODES = frozenset(
    {"dot", "scaled-dot", "ragged-dot", "convolution", "fft", "cholesky", "triangular-solve", "custom-call"}
)
#: Custom-call targets of cuBLAS GEMMs (XLA's `IsCublasGemm`: legacy, cuBLASLt, and its f8 and mx forms).
CUBLAS_GEMM_TARGETS = frozenset(
    {"__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8", "__cublas$lt$matmul$mx"}
)
#: Work done on matrix units (tensor cores) when there are some.
MATMUL_OPCODES = frozenset({"dot", "scaled-dot", "ragged-dot", "convolution", "triangular-solve", "cholesky"})

#: Inside a kernel, instructions that move no data and run no arithmetic (the fitted models'
#: features count nothing for them): the free ones, and iota and the partition / replica ids,
#: whose values an emitted loop computes from its indices instead of loading them.
NO_WORK_IN_KERNEL_OPCODES = FREE_OPCODES | {"iota", "partition-id", "replica-id"}

#: Top-level instructions of a fusible computation that the fusion pass and its search do not
#: count as kernels (`fusion.kernels_of`, `fusion.plan_time`): the free ones, the control flow
#: that stays in a fusible computation (async wrappers never reach the pass: XLA wraps
#: instructions in them after fusion), and the partition / replica ids, which XLA:GPU runs as
#: thunks of their own, not as kernels. ("optimization-barrier" is kept from XLA's enum name:
#: HLO text spells it "opt-barrier".) `analyze` prices the ids as kernels: changing either
#: side would change the kernel counts that one of them reports.
NOT_KERNELS_IN_FUSION_PASS = FREE_OPCODES | {"while", "conditional", "call", "partition-id", "replica-id",
                                             "optimization-barrier"}

#: Instructions that are data, not work, for `fusion.compare_with_xla`'s grouping of
#: instructions into kernels: narrower than `FREE_OPCODES` (add-dependency, opt-barrier and domain
#: are grouped, as they were when the agreement figures were first reported).
DATA_OPCODES = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all"})


def is_free(instr) -> bool:
    """Runs no code: `FREE_OPCODES`, and reshapes or transposes that only relabel the layout
    (XLA turns them into bitcasts; see `_shapes.reshape_is_bitcast` for why unit dimensions count)."""
    op = instr.opcode
    if op in FREE_OPCODES:
        return True
    if op == "reshape" and instr.operands:
        return reshape_is_bitcast(instr.operands[0].shape, instr.shape)
    if op == "transpose" and instr.operands:
        return transpose_is_bitcast(instr.operands[0].shape, instr.shape, _dimensions(instr), ignore_unit_dims=True)
    return False


def _dimensions(instr) -> tuple[int, ...]:
    return int_list_attribute(instr, "dimensions", ())
