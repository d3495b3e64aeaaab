"""Flops, bytes and operand utilization of one kernel, as XLA's `GpuHloCostAnalysis` counts them.

The cost models need, for a kernel (a fusion or a lone instruction), what XLA's
GPU performance model reads from `GpuHloCostAnalysis` with
`count_multiple_input_accesses = true`:

- `flops`: the kernel's "flops". In GPU mode an elementwise op costs the
  device's profiled clock cycles per element (`DeviceSpec.op_cycles`), so these
  are XLA's cycle-weighted flops; in base mode (the roofline's) an elementwise
  op is one flop or one transcendental per element, as `HloCostAnalysis`.
  Inside a fusion every instruction counts `utilization` times (how often its
  value is produced per output), so recomputation is priced.
- `bytes_written`: the output bytes (only the update of an in-place
  dynamic-update-slice root).
- per kernel operand: bytes read (re-reads included) and utilization.
- for fusions, XLA's "elementwise use roots" of every fused instruction, from
  which `CommonElementwiseUtilization` (shared reads of a producer and its
  consumer) follows.

This is a self-contained re-implementation of the part of XLA's analysis the
models need, working on detached instructions too (a hypothetical fusion that
is in no module). Rules are per opcode, in a decorator-filled registry; an
opcode without a rule is reported in `unpriced`, never costed as zero.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Callable

# ---------------------------------------------------------------------------
# Opcode sets

TRANSCENDENTAL_OPCODES = frozenset(
    "acos acosh asin asinh atanh cosh sinh atan2 cbrt cosine erf exponential exponential-minus-one "
    "log log-plus-one logistic power rsqrt sine sqrt tan tanh".split()
)
ELEMENTWISE_OPCODES = frozenset(
    "abs ceil floor count-leading-zeros clz convert bitcast-convert imag real is-finite negate not popcnt "
    "round-nearest-afz round-nearest-even sign reduce-precision "
    "add subtract multiply divide remainder maximum minimum and or xor shift-left shift-right-arithmetic "
    "shift-right-logical complex compare stochastic-convert select clamp".split()
) | TRANSCENDENTAL_OPCODES
# `HloInstruction::IsElementwise()`: the arithmetic ops plus copy and map.
IS_ELEMENTWISE = ELEMENTWISE_OPCODES | {"copy", "map"}

# Instructions that run no code of their own.
FREE_OPCODES = frozenset(
    {"parameter", "constant", "bitcast", "tuple", "get-tuple-element", "after-all", "add-dependency",
     "opt-barrier", "domain"}
)
# Instructions that call other computations and are not kernels themselves.
CONTROL_FLOW_OPCODES = frozenset({"while", "conditional", "call", "async-start", "async-update", "async-done"})
COLLECTIVE_OPCODES = frozenset(
    {"all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start", "all-gather-done",
     "reduce-scatter", "all-to-all", "ragged-all-to-all", "collective-permute", "collective-permute-start",
     "collective-permute-done", "collective-broadcast", "send", "send-done", "recv", "recv-done"}
)
# Instructions XLA:GPU hands to a library (cuBLAS, cuDNN, cuFFT, cuSolver) when not fused.
LIBRARY_OPCODES = frozenset(
    {"dot", "scaled-dot", "ragged-dot", "convolution", "fft", "cholesky", "triangular-solve", "custom-call"}
)
MATMUL_OPCODES = frozenset({"dot", "scaled-dot", "ragged-dot", "convolution"})

POINTER_SIZE = 8
FMA_FLOPS = 2


# ---------------------------------------------------------------------------
# Shapes


def elements(shape) -> int:
    """Elements of an array shape (0 for token/opaque)."""
    if shape.element_type in ("tuple", "token", "opaque"):
        return 0
    n = 1
    for d in shape.dims:
        n *= max(d, 0)
    return n


def elements_recursive(shape) -> int:
    if shape.element_type == "tuple":
        return sum(elements_recursive(s) for s in shape.tuple_shapes)
    return elements(shape)


def shape_size(shape) -> int:
    """XLA's `GetShapeSize`: bytes of the top level (a tuple is its table of pointers)."""
    et = shape.element_type
    if et == "tuple":
        return POINTER_SIZE * len(shape.tuple_shapes)
    if et == "token":
        return 0
    if et == "opaque":
        return POINTER_SIZE
    return shape.byte_size


def leaves_size(shape) -> int:
    """Bytes of every array leaf."""
    if shape.element_type == "tuple":
        return sum(leaves_size(s) for s in shape.tuple_shapes)
    if shape.element_type in ("token", "opaque"):
        return 0
    return shape.byte_size


def array_leaves(shape, prefix=()):
    if shape.element_type == "tuple":
        for i, s in enumerate(shape.tuple_shapes):
            yield from array_leaves(s, prefix + (i,))
    elif shape.element_type not in ("token", "opaque"):
        yield prefix, shape


def first_array(shape):
    for _, leaf in array_leaves(shape):
        return leaf
    return shape


def element_bits(shape) -> int:
    """Bits of the element type of an array (pred counts 8)."""
    return max(int(shape.element_bits), 1) if shape.element_type not in ("tuple", "token", "opaque") else 32


def reshape_is_bitcast(instr) -> bool:
    """A reshape between row-major (default) layouts only relabels the data."""
    src, dst = instr.operands[0].shape, instr.shape
    if src.element_type != dst.element_type or src.element_type == "tuple":
        return False

    def default(s):
        return tuple(s.minor_to_major) == tuple(range(len(s.dims) - 1, -1, -1))

    return default(src) and default(dst)


def is_free(instr) -> bool:
    """Runs no code: bitcast, tuple, get-tuple-element, parameter, constant, ordering
    tokens, and reshapes or transposes that only relabel the layout (XLA turns them
    into bitcasts)."""
    op = instr.opcode
    if op in FREE_OPCODES:
        return True
    if op == "reshape" and instr.operands:
        return reshape_is_bitcast(instr)
    if op == "transpose" and instr.operands:
        return transpose_is_bitcast(instr)
    return False


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


# ---------------------------------------------------------------------------
# Records


class InstrCost:
    """Costs of one instruction on its own (XLA's per-instruction properties)."""

    __slots__ = ("flops", "trans", "mm_flops", "mm_dtype", "by_dtype", "out", "opb", "opu", "unpriced")

    def __init__(self, instr):
        ops = instr.operands
        self.flops = 0.0
        self.trans = 0.0
        self.mm_flops = 0.0  # the part of `flops` done by a dot or convolution
        self.mm_dtype = ""
        self.by_dtype: dict[str, float] = {}  # non-matmul flops (+ transcendentals) per output dtype
        self.out = float(leaves_size(instr.shape))
        self.opb = [float(shape_size(o.shape)) for o in ops]
        self.opu = [1.0] * len(ops)
        self.unpriced: tuple[str, ...] = ()

    def add_vector(self, dtype: str, amount: float) -> None:
        if amount:
            self.by_dtype[dtype] = self.by_dtype.get(dtype, 0.0) + amount


@dataclass(slots=True)
class KernelCosts:
    """What a model needs to know about one kernel.

    **Attributes:** `flops` (GPU mode: cycle-weighted, XLA's `flop_count`; base
    mode: plain flops), `transcendentals` (base mode only), `matmul_flops` (the
    part of `flops` done by dots and convolutions) and `matmul_dtype`,
    `flops_by_dtype` (the other flops, by output element type),
    `bytes_written`, `operand_bytes` / `operand_utilization` per operand of
    the kernel, `unpriced` (labels of instructions without a cost rule), and
    for fusions the propagation state (`params`, `roots`, `root_util`).
    """

    kernel: object
    flops: float
    transcendentals: float
    matmul_flops: float
    matmul_dtype: str
    flops_by_dtype: dict
    bytes_written: float
    operand_bytes: list
    operand_utilization: list
    unpriced: tuple = ()
    params: list = field(default_factory=list)
    roots: dict = field(default_factory=dict)
    root_util: dict = field(default_factory=dict)

    @property
    def bytes_read(self) -> float:
        return float(sum(self.operand_bytes))

    def common_elementwise_utilization(self, a, b) -> float:
        """XLA's `CommonElementwiseUtilization(a, b)` for two instructions of this fusion."""
        ra = self.roots.get(a, ())
        rb = self.roots.get(b, ())
        return float(sum(self.root_util[r] for r in ra if r in rb))

    def parameter_elementwise_from_root(self, index: int) -> bool:
        """XLA's `FusionUsesParameterElementwiseFromRoot`: the parameter reaches the root
        only through elementwise, tuple and get-tuple-element ops."""
        if not self.params or index >= len(self.params):
            return False
        root = self.kernel.fused_computation.root
        return self.common_elementwise_utilization(self.params[index], root) == 1.0


# ---------------------------------------------------------------------------
# Rule registry

_RULES: dict[str, Callable] = {}


def cost_rule(*opcodes: str):
    """Register `fn(ctx, instr, rec)` as the rule of `opcodes`; it edits the record in place."""

    def register(fn):
        for op in opcodes:
            _RULES[op] = fn
        return fn

    return register


def has_rule(opcode: str) -> bool:
    return opcode in _RULES or opcode in ELEMENTWISE_OPCODES


# Instructions priced with XLA's defaults: no flops, every operand read, the output written.
_DEFAULT_OPS = (
    "reshape", "dynamic-reshape", "copy", "pad", "reverse", "iota", "get-dimension-size", "set-dimension-size",
    "partition-id", "replica-id", "copy-start", "copy-done", "rng-get-and-update-state", "infeed", "outfeed",
    "batch-norm-training", "batch-norm-inference", "batch-norm-grad",
)
for _op in _DEFAULT_OPS:
    _RULES[_op] = lambda ctx, instr, rec: None


class CostContext:
    """Settings of one analysis: GPU mode (profiled cycles) or base mode (one flop per element).

    **Arguments:** `device` (its `op_cycles` prices elementwise ops in GPU
    mode); `gpu` (True: `GpuHloCostAnalysis`, False: `HloCostAnalysis` flops).
    """

    def __init__(self, device=None, *, gpu: bool = True):
        self.device = device
        self.gpu = bool(gpu)
        self._profile_key = (getattr(device, "op_profile_name", None), self.gpu) if device is not None else (None, self.gpu)

    # -- elementwise ------------------------------------------------------
    def elementwise(self, opcode: str, shape, rec: InstrCost) -> None:
        n = elements_recursive(shape)
        dtype = first_array(shape).element_type
        if self.gpu:
            cycles = self.device.op_cycles(opcode, dtype) if self.device is not None else 3
            rec.flops = float(cycles * n)
            rec.add_vector(dtype, rec.flops)
        elif opcode in TRANSCENDENTAL_OPCODES:
            rec.trans = float(n)
            rec.add_vector(dtype, rec.trans)
        else:
            rec.flops = float(n)
            rec.add_vector(dtype, rec.flops)

    # -- sub-computations (reducers, map and scatter combiners) -------------
    def computation_cost(self, comp) -> InstrCost:
        """The summed costs of a called computation (memoised per computation)."""
        cache = _COMPUTATION_CACHE.get(comp)
        if cache is None:
            cache = _COMPUTATION_CACHE[comp] = {}
        key = self._profile_key
        rec = cache.get(key)
        if rec is None:
            rec = cache[key] = self._sum_computation(comp)
        return rec

    def _sum_computation(self, comp) -> InstrCost:
        total = _Sum()
        for h in comp.instructions:
            r = self.instruction(h)
            total.flops += r.flops
            total.trans += r.trans
            total.mm_flops += r.mm_flops
            for k, v in r.by_dtype.items():
                total.by_dtype[k] = total.by_dtype.get(k, 0.0) + v
            if r.unpriced:
                total.unpriced = total.unpriced + tuple(x for x in r.unpriced if x not in total.unpriced)
        return total

    # -- one instruction ------------------------------------------------------
    def instruction(self, instr) -> InstrCost:
        rec = InstrCost(instr)
        op = instr.opcode
        if op in ELEMENTWISE_OPCODES:
            self.elementwise(op, instr.shape, rec)
            return rec
        rule = _RULES.get(op)
        if rule is None:
            rec.unpriced = (op,)
            return rec
        rule(self, instr, rec)
        return rec


class _Sum:
    __slots__ = ("flops", "trans", "mm_flops", "by_dtype", "unpriced")

    def __init__(self):
        self.flops = 0.0
        self.trans = 0.0
        self.mm_flops = 0.0
        self.by_dtype: dict[str, float] = {}
        self.unpriced: tuple[str, ...] = ()


# Sums of called computations, per (op profile, mode); weak so that dropped modules free them.
_COMPUTATION_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _scaled_sub(rec: InstrCost, sub: _Sum, count: float, dtype: str) -> None:
    rec.flops += sub.flops * count
    rec.trans += sub.trans * count
    rec.mm_flops += sub.mm_flops * count
    for k, v in sub.by_dtype.items():
        rec.add_vector(k, v * count)
    if sub.unpriced:
        rec.unpriced = rec.unpriced + tuple(x for x in sub.unpriced if x not in rec.unpriced)


def _attr_tuple(instr, name: str) -> tuple:
    v = instr.attribute(name, ())
    if isinstance(v, int):
        return (v,)
    return tuple(v or ())


# ---------------------------------------------------------------------------
# Rules


@cost_rule("map")
def _map(ctx, instr, rec):
    _scaled_sub(rec, ctx.computation_cost(instr.attribute("to_apply")), elements(instr.shape), "")


@cost_rule("parameter", "constant")
def _leaf(ctx, instr, rec):
    rec.out = 0.0


@cost_rule("get-tuple-element", "bitcast")
def _forward(ctx, instr, rec):
    rec.out = 0.0
    rec.opb = [0.0] * len(rec.opb)


@cost_rule("after-all", "add-dependency", "domain", "opt-barrier")
def _ordering(ctx, instr, rec):
    rec.out = 0.0
    rec.opb = [0.0] * len(rec.opb)


@cost_rule("tuple")
def _tuple(ctx, instr, rec):
    rec.out = float(shape_size(instr.shape))
    rec.opb = [0.0] * len(rec.opb)


@cost_rule("broadcast")
def _broadcast(ctx, instr, rec):
    # count_multiple_input_accesses: the operand is read once per output element.
    rec.opb[0] = float(shape_size(instr.shape))
    rec.opu[0] = _ratio(elements(instr.shape), elements(instr.operands[0].shape))


def transpose_is_bitcast(instr) -> bool:
    """`ShapeUtil::TransposeIsBitcast`: the permutation only relabels the layout."""
    src = instr.operands[0].shape
    dst = instr.shape
    perm = _attr_tuple(instr, "dimensions")
    m2m_dst = dst.minor_to_major
    m2m_src = src.minor_to_major
    if src.element_type != dst.element_type or len(perm) != len(m2m_dst) or len(m2m_src) != len(m2m_dst):
        return False
    # Dimensions of size 1 may move freely.
    a = [perm[d] for d in m2m_dst if dst.dims[d] != 1]
    b = [d for d in m2m_src if src.dims[d] != 1]
    return a == b


@cost_rule("transpose")
def _transpose(ctx, instr, rec):
    if transpose_is_bitcast(instr):
        _forward(ctx, instr, rec)


@cost_rule("slice")
def _slice(ctx, instr, rec):
    out = float(shape_size(instr.shape))
    rec.out = out
    rec.opb[0] = out
    rec.opu[0] = _ratio(elements(instr.shape), elements(instr.operands[0].shape))


@cost_rule("dynamic-slice")
def _dynamic_slice(ctx, instr, rec):
    out = float(shape_size(instr.shape))
    rec.out = out
    rec.opb[0] = out
    rec.opu[0] = _ratio(elements(instr.shape), elements(instr.operands[0].shape))


@cost_rule("dynamic-update-slice")
def _dus(ctx, instr, rec):
    ops = instr.operands
    upd = float(shape_size(ops[1].shape))
    rec.out = upd
    rec.opb[0] = 0.0
    rec.opb[1] = upd
    n_out = elements(instr.shape)
    rec.opu[0] = _ratio(n_out - elements(ops[1].shape), n_out)


@cost_rule("gather")
def _gather(ctx, instr, rec):
    out = float(shape_size(instr.shape))
    rec.out = out
    rec.opb[0] = out
    rec.opu[0] = _ratio(elements(instr.shape), elements(instr.operands[0].shape))


@cost_rule("scatter")
def _scatter(ctx, instr, rec):
    ops = instr.operands
    n = (len(ops) - 1) // 2
    total = 0.0
    for i in range(n):
        size = float(shape_size(ops[n + 1 + i].shape))
        rec.opb[i] = size
        rec.opb[n + 1 + i] = size
        total += size
    rec.out = total
    _scaled_sub(rec, ctx.computation_cost(instr.attribute("to_apply")), elements(ops[n + 1].shape), "")


@cost_rule("reduce")
def _reduce(ctx, instr, rec):
    ops = instr.operands
    out0 = first_array(instr.shape)
    count = elements(ops[0].shape) - elements(out0)
    _scaled_sub(rec, ctx.computation_cost(instr.attribute("to_apply")), count, out0.element_type)
    if ctx.gpu:
        # GpuHloCostAnalysis: each init value is read once per output element.
        n_out = elements(out0)
        half = len(ops) // 2
        for i in range(half, len(ops)):
            rec.opb[i] = float(n_out * shape_size(ops[i].shape))
            rec.opu[i] = float(n_out)


@cost_rule("reduce-window")
def _reduce_window(ctx, instr, rec):
    window = instr.attribute("window", None)
    dims = window.dimensions if window is not None else ()
    win = math.prod(d.size for d in dims) if dims else 1
    out0 = first_array(instr.shape)
    n_out = elements(out0)
    _scaled_sub(rec, ctx.computation_cost(instr.attribute("to_apply")), (win - 1) * n_out, out0.element_type)
    op0 = instr.operands[0].shape
    rec.opu[0] = _ratio(n_out * win, elements(op0))
    rec.opb[0] = float(n_out * win * ((op0.element_bits + 7) // 8))


@cost_rule("select-and-scatter")
def _select_and_scatter(ctx, instr, rec):
    n_src = elements(instr.operands[1].shape)
    window = instr.attribute("window", None)
    win = math.prod(d.size for d in window.dimensions) if window is not None else 1
    _scaled_sub(rec, ctx.computation_cost(instr.attribute("select")), n_src * (win - 1), "")
    _scaled_sub(rec, ctx.computation_cost(instr.attribute("scatter")), n_src, "")


def dot_flops(lhs_shape, out_shape, lhs_contracting) -> float:
    width = 1
    for d in lhs_contracting:
        width *= lhs_shape.dims[d]
    return float(FMA_FLOPS * elements(out_shape) * width)


def _matmul(rec: InstrCost, flops: float, dtype: str) -> None:
    rec.flops = flops
    rec.mm_flops = flops
    rec.mm_dtype = dtype


@cost_rule("dot", "scaled-dot", "ragged-dot")
def _dot(ctx, instr, rec):
    out = first_array(instr.shape)
    _matmul(rec, dot_flops(instr.operands[0].shape, out, _attr_tuple(instr, "lhs_contracting_dims")),
            instr.operands[0].shape.element_type)


def convolution_flops(instr, lhs_shape, rhs_shape, out_shape) -> float:
    """XLA's `GetConvolutionFlops` (2 x FMAs over valid output/kernel position pairs)."""
    try:
        from ..analysis._rules import convolution_flops as xla_conv_flops

        return float(xla_conv_flops(instr, lhs_shape, rhs_shape, out_shape))
    except ImportError:  # pragma: no cover - the analysis package is part of the project
        pass
    dn = instr.attribute("dim_labels")
    fgc = instr.attribute("feature_group_count", 1)
    kernel = math.prod(rhs_shape.dims[d] for d in dn.kernel_spatial) if dn.kernel_spatial else 1
    in_f = lhs_shape.dims[dn.input_feature] // max(fgc, 1)
    return float(FMA_FLOPS * elements(out_shape) * in_f * kernel)


@cost_rule("convolution")
def _convolution(ctx, instr, rec):
    out = first_array(instr.shape)
    _matmul(rec, convolution_flops(instr, instr.operands[0].shape, instr.operands[1].shape, out),
            instr.operands[0].shape.element_type)


@cost_rule("fft")
def _fft(ctx, instr, rec):
    src = first_array(instr.operands[0].shape)
    logs = 1
    for n in _attr_tuple(instr, "fft_length"):
        logs *= (int(n).bit_length() - 1) if n > 0 else 0
    flops = float(FMA_FLOPS * 4 * logs * elements(src))
    rec.flops = flops
    rec.add_vector(src.element_type, flops)


@cost_rule("sort")
def _sort(ctx, instr, rec):
    n = elements(instr.operands[0].shape)
    flops = float(n * ((n - 1).bit_length() if n > 0 else 0))
    rec.flops = flops
    rec.add_vector(instr.operands[0].shape.element_type, flops)


@cost_rule("rng", "rng-bit-generator")
def _rng(ctx, instr, rec):
    n = elements_recursive(instr.shape)
    if ctx.gpu:
        return  # XLA's GPU "flops" leave random numbers at 0 (transcendentals only)
    rec.trans = float(n)
    rec.add_vector(first_array(instr.shape).element_type, rec.trans)


@cost_rule("triangular-solve")
def _triangular_solve(ctx, instr, rec):
    a, b = instr.operands[0].shape, instr.operands[1].shape
    rec.opb[0] = float(shape_size(b))  # XLA writes operand 0's slot twice; b's size wins
    n = a.dims[-1] if a.dims else 1
    _matmul(rec, float(FMA_FLOPS * n * elements(b)), a.element_type)


@cost_rule("cholesky")
def _cholesky(ctx, instr, rec):
    a = instr.operands[0].shape
    half = shape_size(a) / 2.0
    rec.out = half
    rec.opb[0] = half
    n = a.dims[-1] if a.dims else 1
    _matmul(rec, float((n * elements(a)) // 3), a.element_type)


@cost_rule("concatenate")
def _concatenate(ctx, instr, rec):
    if not ctx.gpu:
        return
    # GpuHloCostAnalysis: a compare and a branch per element, and 400 per element when
    # the concatenated dimension is not the major one and operand 0's extent along it
    # is not a multiple of the warp (divergent warps; tuned against one LLM pattern).
    n = elements_recursive(instr.shape)
    dims = _attr_tuple(instr, "dimensions")
    dim = dims[0] if dims else 0
    per_element = 6.0
    if dim > 0 and instr.operands and instr.operands[0].shape.dims[dim] % 32:
        per_element = 400.0
    rec.flops = per_element * n
    rec.add_vector(first_array(instr.shape).element_type, rec.flops)


def custom_call_target(instr) -> str:
    return str(instr.attribute("custom_call_target", "") or "")


def _gemm_dims(instr) -> tuple | None:
    cfg = instr.attribute("backend_config", None) if instr.has_attribute("backend_config") else None
    if not isinstance(cfg, dict):
        return None
    gemm = cfg.get("gemm_backend_config", cfg)
    ddn = gemm.get("dot_dimension_numbers") if isinstance(gemm, dict) else None
    if not isinstance(ddn, dict):
        return None
    return tuple(int(x) for x in ddn.get("lhs_contracting_dimensions", ()))


@cost_rule("custom-call")
def _custom_call(ctx, instr, rec):
    target = custom_call_target(instr)
    low = target.lower()
    if "cublas" in low or "gemm" in low or "matmul" in low:
        dims = _gemm_dims(instr)
        if dims is not None:
            out = first_array(instr.shape)
            rec.out = float(out.byte_size)
            _matmul(rec, dot_flops(instr.operands[0].shape, out, dims), instr.operands[0].shape.element_type)
            return
    if "cudnn" in low and "conv" in low and instr.has_attribute("dim_labels"):
        out = first_array(instr.shape)
        rec.out = float(out.byte_size)
        _matmul(rec, convolution_flops(instr, instr.operands[0].shape, instr.operands[1].shape, out),
                instr.operands[0].shape.element_type)
        return
    if _library_flops(instr, low, rec):
        return
    rec.unpriced = (f"custom-call:{target}" if target else "custom-call",)


def _topk_flops(instr, k: int) -> float:
    n = elements(first_array(instr.operands[0].shape))
    return float(n * max(1, (max(k, 1) - 1).bit_length()))


@cost_rule("topk")
def _topk(ctx, instr, rec):
    """XLA leaves top-k at 0 flops (a TODO); here: one comparison per input element
    per level of a k-element heap, ceil(log2 k)."""
    k = int(instr.attribute("k", 1) or 1)
    flops = _topk_flops(instr, k)
    rec.flops = flops
    rec.add_vector(first_array(instr.operands[0].shape).element_type, flops)


def _library_flops(instr, target: str, rec: InstrCost) -> bool:
    """Flops of the linear-algebra and top-k custom calls XLA's CPU and GPU backends emit
    (LAPACK / cuSolver `potrf`, `getrf`, `trsm`; `TopK`), with the textbook counts."""
    if not instr.operands:
        return False
    a = first_array(instr.operands[0].shape)
    dtype = a.element_type
    if "topk" in target:
        out = first_array(instr.shape)
        flops = _topk_flops(instr, out.dims[-1] if out.dims else 1)
    elif "potrf" in target or "cholesky" in target:
        n = a.dims[-1] if a.dims else 1
        flops = float((n * elements(a)) // 3)
    elif "getrf" in target:
        m, n = (a.dims[-2], a.dims[-1]) if len(a.dims) >= 2 else (1, 1)
        batch = elements(a) // max(m * n, 1)
        k = min(m, n)
        flops = float(batch * (2 * m * n * k - (m + n) * k * k + 2 * k ** 3 / 3))
    elif "trsm" in target and len(instr.operands) >= 2:
        b = first_array(instr.operands[1].shape)
        n = a.dims[-1] if a.dims else 1
        flops = float(FMA_FLOPS * n * elements(b)) / 2
    else:
        return False
    rec.flops = flops
    rec.add_vector(dtype, flops)
    return True


# ---------------------------------------------------------------------------
# Kernels


def kernel_costs(kernel, ctx: CostContext) -> KernelCosts:
    """The costs of `kernel` (a fusion, or one instruction run as its own kernel).

    **Arguments:** `kernel`; `ctx`, the analysis settings.

    **Returns:** a `KernelCosts`.
    """
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    if comp is None:
        r = ctx.instruction(kernel)
        return KernelCosts(
            kernel=kernel, flops=r.flops, transcendentals=r.trans, matmul_flops=r.mm_flops,
            matmul_dtype=r.mm_dtype, flops_by_dtype=dict(r.by_dtype), bytes_written=r.out,
            operand_bytes=list(r.opb), operand_utilization=list(r.opu), unpriced=r.unpriced,
        )
    return _fusion_costs(kernel, comp, ctx)


def _fusion_costs(kernel, comp, ctx: CostContext) -> KernelCosts:
    recs = {h: ctx.instruction(h) for h in comp.instructions}
    root = comp.root

    # Output bytes: an in-place dynamic-update-slice root writes only its update
    # (and then its buffer operand counts as not read).
    out_bytes = 0.0
    for index, leaf in array_leaves(kernel.shape):
        r = root.operands[index[0]] if (len(index) == 1 and root.opcode == "tuple") else root
        if r.opcode == "dynamic-update-slice":
            out_bytes += shape_size(r.operands[1].shape)
            recs[r].opu[0] = 0.0
        else:
            out_bytes += shape_size(leaf)

    # Utilization: consumers before producers. An elementwise user passes its
    # "use roots" on; any other user makes the operand a root of its own.
    roots: dict = {h: set() for h in comp.instructions}
    root_util: dict = {h: 0.0 for h in comp.instructions}
    util: dict = {}
    roots[root].add(root)
    root_util[root] = 1.0
    flops = trans = mm = 0.0
    mm_dtype = ""
    by_dtype: dict[str, float] = {}
    unpriced: tuple = ()
    for h in reversed(comp.post_order()):
        rec = recs[h]
        u = 0.0
        for r in roots[h]:
            u += root_util[r]
        util[h] = u
        if rec.flops or rec.trans:
            flops += u * rec.flops
            trans += u * rec.trans
            if rec.mm_flops:
                mm += u * rec.mm_flops
                mm_dtype = mm_dtype or rec.mm_dtype
            for k, v in rec.by_dtype.items():
                by_dtype[k] = by_dtype.get(k, 0.0) + u * v
        if rec.unpriced:
            unpriced = unpriced + tuple(x for x in rec.unpriced if x not in unpriced)
        op = h.opcode
        passes = op in IS_ELEMENTWISE or op == "tuple" or op == "get-tuple-element"
        for idx, o in enumerate(h.operands):
            if passes:
                roots[o].update(roots[h])
            else:
                roots[o].add(o)
                cu = u * rec.opu[idx]
                n = elements_recursive(o.shape)
                cu = math.ceil(cu * n - 1e-9) / n if n else 0.0
                root_util[o] += cu

    params = comp.parameters
    opb: list[float] = []
    opu: list[float] = []
    for p in params:
        u = util.get(p, 0.0)
        if p.shape.element_type == "tuple":
            size = 0.0
            for user in p.users:
                if user.opcode == "get-tuple-element":
                    size += int(shape_size(user.shape) * util.get(user, 0.0))
            opb.append(float(size))
        else:
            opb.append(float(int(shape_size(p.shape) * u)))
        opu.append(u)
    # A detached or odd fusion may list more operands than parameters.
    while len(opb) < len(kernel.operands):
        opb.append(0.0)
        opu.append(0.0)
    return KernelCosts(
        kernel=kernel, flops=flops, transcendentals=trans, matmul_flops=mm, matmul_dtype=mm_dtype,
        flops_by_dtype=by_dtype, bytes_written=out_bytes, operand_bytes=opb, operand_utilization=opu,
        unpriced=unpriced, params=params, roots=roots, root_util=root_util,
    )


def contains_opcode(kernel, opcodes) -> bool:
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    if comp is None:
        return kernel.opcode in opcodes
    return any(h.opcode in opcodes for h in comp.instructions)
