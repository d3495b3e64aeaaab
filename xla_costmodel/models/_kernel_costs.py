"""What a cost model needs to know about one kernel, on top of `analysis.kernel_cost`.

The per-instruction counting (flops, transcendentals, bytes read per operand,
utilization, fusions) is `xla_costmodel.analysis`'s, the single implementation
of XLA's `HloCostAnalysis` semantics in the project: `kernel_costs` runs
`analysis.kernel_cost` on the kernel (a fusion, a lone instruction, or a
detached fusion from `hlo.hypothetical_fusion`) in the variant the model wants:

- GPU mode (`CostContext(device, gpu=True)`, the `xla-gpu` model): XLA's
  `GpuHloCostAnalysis` with `count_multiple_input_accesses`, elementwise ops at
  the device's profiled cycles per element (`DeviceSpec.op_profile`, 3 where
  it has no entry).
- base mode (`gpu=False`, the roofline): `HloCostAnalysis`'s one flop or one
  transcendental per element, with the GPU analysis's fusion accounting
  (recomputation through broadcasts priced, repeated reads counted).

Which instructions run no code and which are not kernels is
`analysis._opcodes`'s (`is_free`, `FREE_OPCODES`, `CONTROL_FLOW_OPCODES`, ...).
What is the models' own and lives here:

- flops where XLA reports "unknown" or 0: every routine of
  `analysis._library` (cuBLAS / cuDNN, cuSolver and LAPACK, CUB sorts,
  top-k) and the `topk` opcode, from that one table (passed to the analysis
  as rule overrides, so they count inside fusions too);
- the split of the flops into matrix-unit work (dots, convolutions,
  triangular solves, Cholesky, gemm custom calls; `matmul_flops` and its
  dtype) and the rest by element type (`flops_by_dtype`);
- the counts that belong to a kernel whatever model prices it
  (`KernelCounts`, `ModuleCounts`: XLA's `HloCostAnalysis` of the
  instruction, with the textbook counts above), which `analyze` reports.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, replace

from ..analysis.library import custom_call_target
from ..analysis import KernelCost, kernel_cost
from ..analysis.library import library_work, topk_flops
from ..analysis.opcodes import MATMUL_OPCODES, passes_elementwise_roots
from ..analysis.interpreter import BYTES, FLOPS, OUT, TRANS, UNPRICED, merge_unpriced
from ..analysis.shapes import elements_recursive, first_array, shape_size
from ..fusion_engine import body_growth, follows_growths, tracks_growth

# Shapes are immutable and shared by many instructions: their sizes are computed once
# (keyed by id, the shape kept alive with its size so that the id is not reused).
_SHAPE_SIZES: dict[int, tuple[object, int]] = {}


def shape_size_cached(shape) -> int:
    """`shape_size(shape)`, remembered per shape object."""
    hit = _SHAPE_SIZES.get(id(shape))
    if hit is not None and hit[0] is shape:
        return hit[1]
    n = shape_size(shape)
    if len(_SHAPE_SIZES) > 200_000:
        _SHAPE_SIZES.clear()
    _SHAPE_SIZES[id(shape)] = (shape, n)
    return n


# Instructions whose flops are those of a called computation (priced by its element types).
_CALLERS = frozenset({"reduce", "reduce-window", "map", "scatter", "select-and-scatter"})
# Instructions whose work is typed by operand 0 rather than by the output.
_OPERAND_TYPED = frozenset({"fft", "sort", "topk", "custom-call"})


# ---------------------------------------------------------------------------
# Textbook flops where XLA has none (rule overrides for the analysis)


def custom_call_work(instr) -> tuple[str, float, float | None] | None:
    """`(kind, flops, output bytes or None)` of a custom call the models can price, else None.

    The counts are `analysis._library.library_work`'s (the one table of
    library routines): `kind` is `"matmul"` for cuBLAS GEMMs and cuDNN
    convolutions (only their real output written, the workspace left out)
    and `"vector"` for the other routines (cuSolver / LAPACK factorisations
    and solves, sorts, top-k).
    """
    work = library_work(instr)
    if work is None:
        return None
    if work.matrix_flops:
        return "matmul", work.flops, work.bytes_written
    return "vector", work.flops, None


def _custom_call_rule(an, instr, p):
    """XLA's defaults for the bytes, and the models' flops; unknown targets stay unpriced."""
    work = custom_call_work(instr)
    if work is None:
        target = custom_call_target(instr)
        p[UNPRICED] = merge_unpriced(p[UNPRICED], (f"custom-call:{target}" if target else "custom-call",))
        return
    _, flops, out = work
    p[FLOPS] = flops
    if out is not None:
        p[BYTES] += out - p[OUT]
        p[OUT] = out


def _topk_rule(an, instr, p):
    """XLA leaves top-k at 0 flops (a TODO); here the heap-selection count."""
    p[FLOPS] = topk_flops(first_array(instr.operands[0].shape), int(instr.attribute("k", 1) or 1))


MODEL_RULES = {"custom-call": _custom_call_rule, "topk": _topk_rule}


# ---------------------------------------------------------------------------
# The record


class CostContext:
    """Settings of one analysis: GPU mode (profiled cycles) or base mode (one flop per element).

    **Arguments:** `device` (its `op_profile` prices elementwise ops in GPU
    mode, 3 cycles per element where it has no entry); `gpu` (True:
    `GpuHloCostAnalysis`, False: `HloCostAnalysis` counts).
    """

    __slots__ = ("device", "gpu", "variant", "profile")

    def __init__(self, device=None, *, gpu: bool = True):
        self.device = device
        self.gpu = bool(gpu)
        self.variant = "gpu" if self.gpu else "base"
        self.profile = getattr(device, "op_profile", None) or _NO_PROFILE


_NO_PROFILE: dict = {}


@dataclass(slots=True)
class KernelCosts:
    """What a model needs to know about one kernel.

    **Attributes:** `flops` (GPU mode: cycle-weighted, XLA's `flop_count`; base
    mode: plain flops), `transcendentals`, `matmul_flops` (the part of `flops`
    done by dots, convolutions and other matrix-unit work) and `matmul_dtype`,
    `flops_by_dtype` (the other flops and transcendentals, by element type),
    `bytes_written`, `operand_bytes` / `operand_utilization` per operand of
    the kernel, `unpriced` (labels of instructions without a cost rule), and
    `cost`, the analysis's `KernelCost` (per-instruction counts, elementwise
    use roots); `body`: None, or (for `pinned` costs) the fused body's
    parameters, the same by number, and its root when the costs were made.
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
    unpriced: tuple
    cost: KernelCost
    body: tuple | None = None

    @property
    def bytes_read(self) -> float:
        return float(sum(self.operand_bytes))

    @property
    def params(self) -> list:
        comp = self.kernel.fused_computation if self.kernel.opcode == "fusion" else None
        return comp.parameters if comp is not None else []

    @property
    def roots(self) -> dict:
        return self.cost.roots

    @property
    def root_util(self) -> dict:
        return self.cost.root_util

    def common_elementwise_utilization(self, a, b) -> float:
        """XLA's `CommonElementwiseUtilization(a, b)` for two instructions of this fusion."""
        return self.cost.common_elementwise_utilization(a, b)

    def common_parameter_utilization(self, i: int, j: int) -> float:
        """`common_elementwise_utilization` of this fusion's parameters number `i` and `j`."""
        if self.body is not None:
            by_number = self.body[1]
            return self.cost.common_elementwise_utilization(by_number[i], by_number[j])
        comp = self.kernel.fused_computation
        return self.cost.common_elementwise_utilization(comp.parameter(i), comp.parameter(j))

    def parameter_elementwise_from_root(self, index: int) -> bool:
        """XLA's `FusionUsesParameterElementwiseFromRoot`."""
        if self.body is not None:
            params, _, root = self.body
            return index < len(params) and self.cost.common_elementwise_utilization(params[index], root) == 1.0
        return self.cost.parameter_elementwise_from_root(index)

    def pinned(self) -> "KernelCosts":
        """These costs, answering for the kernel's body as it is now (its parameters and root) even
        after the kernel grows in place: for another kernel of the same content (`hlo._structure`),
        whose parameters are asked for by number. A lone instruction's costs never change: themselves."""
        comp = self.kernel.fused_computation if self.kernel.opcode == "fusion" else None
        if comp is None:
            return self
        params = tuple(comp.parameters)
        return replace(self, body=(params, {h.parameter_number: h for h in params}, comp.root))


def kernel_costs(kernel, ctx: CostContext) -> KernelCosts:
    """The costs of `kernel` (a fusion, or one instruction run as its own kernel).

    **Arguments:** `kernel`; `ctx`, the analysis settings.

    **Returns:** a `KernelCosts`.
    """
    c = kernel_cost(kernel, ctx.variant, ctx.profile, overrides=MODEL_RULES)
    mm, mm_dtype, by_dtype = _split_flops(c)
    return KernelCosts(
        kernel, c.flops, c.transcendentals, mm, mm_dtype, by_dtype, c.bytes_written,
        list(c.operand_bytes), list(c.operand_utilization), c.unpriced, c,
    )


# ---------------------------------------------------------------------------
# Matrix-unit flops and the rest by element type


def _work_dtype(h) -> str:
    if h.opcode in _OPERAND_TYPED and h.operands:
        return first_array(h.operands[0].shape).element_type
    return first_array(h.shape).element_type


def _called(h) -> list:
    names = ("select", "scatter") if h.opcode == "select-and-scatter" else ("to_apply",)
    return [c for c in (h.attribute(n, None) for n in names) if c is not None]


def _split_flops(c: KernelCost) -> tuple[float, str, dict]:
    """`(matmul flops, their dtype, {dtype: other flops + transcendentals})`, utilization-weighted."""
    kernel = c.kernel
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    if comp is None:
        return _split_instructions(c, (kernel,), None)[:3]
    if not tracks_growth(comp):
        return _split_instructions(c, comp.instructions, comp)[:3]
    g = body_growth(comp)
    serial = g.serial if g is not None else 0
    n = len(comp.instructions)
    st = _SPLITS.get(comp)
    an = c._an
    if st is not None and st.rules is an._rules and st.profile is getattr(an, "op_profile", None) and st.kernel is kernel:
        if st.serial == serial and st.size == n:
            return st.mm, st.mm_dtype, dict(st.by_dtype)
        if g is not None and g.previous == st.serial and g.size_before == st.size and g.size_after == n:
            # Only the new instructions' work is new: the rest keep their utilization (`_fusion_growth`).
            mm, mm_dtype, by_dtype, exact = _split_instructions(
                c, [h for h in g.added if h.opcode != "parameter"], comp)
            if exact:
                mm_dtype = mm_dtype or st.mm_dtype
                for dtype, amount in st.by_dtype.items():
                    by_dtype[dtype] = by_dtype.get(dtype, 0.0) + amount
                mm += st.mm
                _SPLITS[comp] = _Split(serial, n, kernel, an._rules, st.profile, mm, mm_dtype, by_dtype)
                return mm, mm_dtype, dict(by_dtype)
    mm, mm_dtype, by_dtype, exact = _split_instructions(c, comp.instructions, comp)
    if exact:
        _SPLITS[comp] = _Split(serial, n, kernel, an._rules, getattr(an, "op_profile", None), mm, mm_dtype,
                               dict(by_dtype))
    else:
        _SPLITS.pop(comp, None)
    return mm, mm_dtype, by_dtype


@dataclass(frozen=True, slots=True, eq=False)
class _Split:
    """A fused body's split of work, kept so that after a growth only the new instructions are
    split. Kept only when every amount was an integer (sums of integers are exact in any order)."""

    serial: int
    size: int
    kernel: object
    rules: object
    profile: object
    mm: float
    mm_dtype: str
    by_dtype: dict


_SPLITS: "weakref.WeakKeyDictionary[object, _Split]" = follows_growths(weakref.WeakKeyDictionary())


def _split_instructions(c: KernelCost, instrs, comp) -> tuple[float, str, dict, bool]:
    """`_split_flops` over `instrs`, and whether every amount was an integer without shares of called computations."""
    mm = 0.0
    mm_dtype = ""
    by_dtype: dict[str, float] = {}
    shares: dict = {}
    exact = True
    for h, f, t, u in c.working_instructions(instrs):
        if comp is None:
            u = 1.0
        op = h.opcode
        if op in MATMUL_OPCODES or (op == "custom-call" and (custom_call_work(h) or ("",))[0] == "matmul"):
            term = u * f
            exact = exact and term == int(term)
            mm += term
            mm_dtype = mm_dtype or h.operands[0].shape.element_type
            continue
        amount = u * (f + t)
        exact = exact and amount == int(amount)
        if op in _CALLERS:
            split = _computation_shares(c, _called(h), shares)
            if split:
                exact = False
                for dtype, share in split.items():
                    by_dtype[dtype] = by_dtype.get(dtype, 0.0) + amount * share
                continue
        dtype = _work_dtype(h)
        by_dtype[dtype] = by_dtype.get(dtype, 0.0) + amount
    return mm, mm_dtype, by_dtype, exact


def _computation_shares(c: KernelCost, comps: list, memo: dict) -> dict:
    """How the work of called computations divides among element types (fractions summing to 1)."""
    key = tuple(id(x) for x in comps)
    hit = memo.get(key)
    if hit is not None:
        return hit
    totals: dict[str, float] = {}
    for comp in comps:
        for h in comp.instructions:
            try:
                f, t, _ = c.instruction_counts(h)
            except KeyError:
                continue
            amount = f + t
            if not amount:
                continue
            split = _computation_shares(c, _called(h), memo) if h.opcode in _CALLERS else None
            if split:
                for dtype, share in split.items():
                    totals[dtype] = totals.get(dtype, 0.0) + amount * share
            else:
                dtype = _work_dtype(h)
                totals[dtype] = totals.get(dtype, 0.0) + amount
    total = sum(totals.values())
    out = {k: v / total for k, v in totals.items()} if total else {}
    memo[key] = out
    return out


# ---------------------------------------------------------------------------
# Counts that belong to the kernel, whatever model prices it


@dataclass(frozen=True, slots=True)
class KernelCounts:
    """What one instruction does, counted once, the same for every model (`analyze`'s count columns).

    **Attributes:** `flops`, `transcendentals`, `bytes_accessed`: XLA's
    `HloCostAnalysis` of the instruction (`Compiled.cost_analysis()`'s
    semantics): a fusion counts each fused instruction once, as XLA:CPU's
    library fusions run them, plus the bytes its operands and result move;
    custom calls XLA marks unknown (-1) get the textbook counts of
    `custom_call_work`, top-k (0 in XLA) its heap-selection count. NaN where
    the cost is unknown (an opcode without a rule, an unknown custom call).
    """

    flops: float
    transcendentals: float
    bytes_accessed: float


_UNKNOWN_COUNTS = KernelCounts(math.nan, math.nan, math.nan)


class ModuleCounts:
    """`KernelCounts` of every instruction of a module, from one `HloCostAnalysis` of the whole module.

    **Arguments:** `module`, an `HloModule`. Call the object with an
    instruction of it (a detached one, e.g. a hypothetical fusion, is
    analysed on its own).
    """

    def __init__(self, module):
        from .._gc import gc_paused
        from ..analysis.interpreter import Analysis

        self._an = Analysis(module, warn=False, overrides=MODEL_RULES)
        with gc_paused():
            self._an.analyze_module()
        self._module = module
        self._xla = None  # XLA's own analysis (no textbook rules), made when a rule of MODEL_RULES may have fired
        self._overridden = any(i.opcode in MODEL_RULES for _, i in module.instructions())

    def xla_own(self, instr) -> KernelCounts | None:
        """XLA's own `HloCostAnalysis` counts of `instr` where they are not the ones `__call__` gives
        (a custom call XLA counts as -1 flops and bytes, top-k at 0 flops: `MODEL_RULES` count the work),
        else None. What `Compiled.cost_analysis()` adds up for that instruction."""
        if not self._overridden or not self._an.has_record(instr):
            return None
        if self._xla is None:
            from .._gc import gc_paused
            from ..analysis.interpreter import Analysis

            self._xla = Analysis(self._module, warn=False)
            with gc_paused():
                self._xla.analyze_module()
        ours, xla = self._an.record(instr), self._xla.record(instr)
        own = KernelCounts(float(xla[FLOPS]), float(xla[TRANS]), float(xla[BYTES]))
        if (ours[FLOPS], ours[TRANS], ours[BYTES]) == (own.flops, own.transcendentals, own.bytes_accessed):
            return None
        return own

    def __call__(self, instr) -> KernelCounts:
        if self._an.has_record(instr):
            p = self._an.record(instr)
            unpriced, flops, trans, nbytes = p[UNPRICED], p[FLOPS], p[TRANS], p[BYTES]
        else:
            c = kernel_cost(instr, "xla", overrides=MODEL_RULES)
            unpriced, flops, trans, nbytes = c.unpriced, c.flops, c.transcendentals, c.bytes_accessed
        if unpriced:
            return _UNKNOWN_COUNTS
        return KernelCounts(float(flops), float(trans), float(nbytes))


# ---------------------------------------------------------------------------
# A reduction fusion's input side, evaluated once per element


def reduction_inputs_once(costs: KernelCosts) -> KernelCosts:
    """`costs` of a reduction fusion with each value of its input side counted once per element.

    XLA:GPU's reduction emitter (`ReductionFusion::EmitPerThreadElements`) computes, in one loop over
    the reduction's input, every reduce operand of a group and every side output (the fusion's other
    outputs, which have the input's shape) at the same index, as calls of the same pure subgraph
    functions with the same indices, which MLIR's CSE merges: a value that both feeds a reduce and is
    written as a side output, or feeds two reduces, is computed and read once per element.
    `GpuHloCostAnalysis::FusionCalculateUtilizations` counts it once per path instead (the reduce
    makes its operand a use root of its own, beside the tuple root the side output passes on), so
    such a fusion's input side costs twice its flops and reads (`scripts/diagnose_reduction_prices.py`:
    jax_scipy_special@large's `input_add_reduce_fusion`). Here the utilizations are walked again with
    an instruction reached from several of those same-index roots (reduce operands, side outputs and
    the bitcasts under them) counting the largest of their utilizations, not their sum, down to the
    operands of broadcasts under them; a parameter's bytes read follow its utilization. Any other kernel's `costs` unchanged (the same object)."""
    kernel = costs.kernel
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    if comp is None:
        return costs
    # The emitter indexes every reduce operand and side output through a bitcast of the reduction's
    # input shape (`GetBitcastMap(input_shape_, ...)`): a bitcast's operand is read at the same element.
    starts = []
    for h in comp.instructions:
        if h.opcode == "reduce":
            starts.extend(h.operands[: len(h.operands) // 2])
    if not starts:
        return costs
    if comp.root.opcode == "tuple":
        starts.append(comp.root)
        starts.extend(comp.root.operands)
    same_index = set()
    for h in starts:
        while h not in same_index:
            same_index.add(h)
            if h.opcode != "bitcast":
                break
            h = h.operands[0]
    roots, c = costs.roots, costs.cost
    # `FusionCalculateUtilizations` again, users before operands, with the same-index roots of an
    # instruction counted by their largest utilization instead of their sum (the use roots themselves,
    # which only the structure decides, are the analysis's).
    root_util: dict = {comp.root: 1.0}
    util: dict = {}
    for h in reversed(comp.instructions):
        plain, shared = 0.0, 0.0
        for r in roots.get(h, ()):
            if r in same_index:
                shared = max(shared, root_util.get(r, 0.0))
            else:
                plain += root_util.get(r, 0.0)
        u = util[h] = plain + shared
        if passes_elementwise_roots(h):
            continue
        opu = c.instruction_cost(h).operand_utilization
        for k, operand in enumerate(h.operands):
            root_util[operand] = root_util.get(operand, 0.0) + u * (opu[k] if k < len(opu) else 0.0)
    saved_flops = 0.0
    by_dtype = dict(costs.flops_by_dtype)
    operand_bytes = list(costs.operand_bytes)
    params = {id(p): p.parameter_number for p in comp.parameters}
    for h in comp.instructions:
        f, t, before = c.instruction_counts(h)
        saved = before - util.get(h, before)
        if saved <= 0:
            continue
        if id(h) in params:
            i = params[id(h)]
            if i < len(operand_bytes) and before > 0:
                operand_bytes[i] = float(round(operand_bytes[i] * util[h] / before))
            continue
        if (f or t) and h.opcode not in MATMUL_OPCODES:
            saved_flops += saved * (f + t)
            dtype = _work_dtype(h)
            if dtype in by_dtype:
                by_dtype[dtype] = max(by_dtype[dtype] - saved * (f + t), 0.0)
    if not saved_flops and operand_bytes == list(costs.operand_bytes):
        return costs
    return replace(costs, flops=max(costs.flops - saved_flops, 0.0), flops_by_dtype=by_dtype,
                   operand_bytes=operand_bytes)


def op_evaluations(costs: KernelCosts) -> float:
    """How many elementwise evaluations of priced (non-matrix) instructions a kernel runs: each working
    instruction's elements (a reduce's input elements: its reducer runs once per input element) times its
    utilization. Each one issues at least one instruction on one FP32 lane, whatever its profiled latency."""
    kernel = costs.kernel
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    instrs = comp.instructions if comp is not None else (kernel,)
    total = 0.0
    for h, _f, _t, u in costs.cost.working_instructions(instrs):
        if h.opcode in MATMUL_OPCODES:
            continue
        n = elements_recursive(h.shape)
        if h.opcode in ("reduce", "reduce-window") and h.operands:
            n = max(n, elements_recursive(h.operands[0].shape))
        total += (u if comp is not None else 1.0) * n
    return total
