"""XLA:GPU's GEMM rewriting before fusion: `GemmFusion` (`triton-gemm-rewriter`) and the dots left to cuBLAS.

Before priority fusion XLA:GPU turns each `dot` into one of three things
(`backends/gpu/transforms/gemm_fusion.cc`, run in `hlo_normalization` after layout assignment):

- a Triton GEMM fusion (`kCustom`, `fusion_backend_config.kind = "__triton_gemm"`; XLA
  names it `gemm_fusion_<dot>`, here `fusion.N` as the fusion engine names fusions) when Triton can emit the dot (`legacy_triton::IsTritonSupportedInstruction`:
  output type f16/f32/bf16/f64 (f8 from Ampere/Hopper, s32 for 8-bit integer inputs), inputs of those
  types or pred/s8/s16/s32, default operand precisions or a Triton algorithm, a non-contracting
  dimension on both sides; several batch dimensions are merged into one by `dot_decomposer` first). The fusion absorbs:

  - toward each operand, breadth first (`BuildFusionPlanTowardOperands`), at most 4 parameters per
    operand (`kMaxParameterPerDotOperand`): every instruction Triton supports (elementwise ops of
    its lists, bitcast, reshape, transpose, broadcast, slice, concatenate; not pad, reduce, tuple,
    dynamic-slice) that is worth fusing as an input (`IsInputWorthFusing`: it reads at most 1 KiB
    more than it writes; or it has one user and reads only parameters or constants that have one
    user; or, `GetPropagatedDimOrdersAndRequirementsIfProfitablyFusible`, a binary elementwise op
    with an operand that is a broadcast of a parameter or constant). A producer with other users is
    copied into the fusion and kept for them;
  - toward the users, while the value has one user (`FuseTowardUsers`): an elementwise op or data
    movement Triton supports whose other operands are parameters (through bitcasts) or broadcasts
    of parameters or scalars, that writes at most 1 KiB more than it reads (`IsOutputWorthFusing`);
    the broadcasts are fused along. (The source's `IsDistributiveOverAddition` filter is not in the
    XLA of jaxlib 0.10.2: its dumps fuse `add` and `tanh` epilogues; `tests/test_gemm_fusion.py`
    checks ours against them.)

  With `xla_gpu_triton_gemm_any` (on in that XLA) a "pure" matmul, with nothing but the dot,
  bitcasts and reshapes, is made a Triton fusion too.
- a cuBLAS call (`__cublas$gemm`, `GemmRewriter`) when Triton cannot emit it (complex and other
  types outside its lists, algorithms it does not implement);
- nothing, when it is tiny (`IsMatrixMultiplicationTooSmallForRewriting`: (M + N) * K under
  `xla_gpu_gemm_rewrite_size_threshold` = 100 and an f16/bf16/f32 output: the classical emitter
  runs it inside a loop fusion).

Earlier, `DotDecomposer` (`decompose_dots`, before the simplifier) makes every dot canonical: its
operands transposed to `[batch.., non-contracting, contracting]` (LHS), `[batch.., contracting,
non-contracting]` (RHS) and reshaped to one dimension of each; the GPU algebraic simplifier's dot
strength reduction makes vector-vector dots, small matrix-vector dots and outer products a multiply
of broadcasts and a reduce (`strength_reduce_dots`; a dot with a vector side in the shape of its other
side, with no transpose, where the simplifier's later rounds leave it so); `DotMerger` merges dots sharing
an operand (`merge_dots`); `TransposeFolding` folds a transpose operand back into the dot's dimension numbers
where a GEMM can read it so (`fold_transposes`). `GemmFusion` then takes a producer or a user only
where Triton's tiling can follow each dot dimension through it (`fusion._dim_order`, XLA's
`triton_tiling_propagation.cc`): the transposes that split a dimension (an attention's `[B, T, N, H]`
made `[B, N, T, H]`, the batch `(B, N)` split by `T`) stay out, kernels of their own, as in XLA.

Right before `GemmFusion`, `SplitkRewriter` (`backends/gpu/transforms/splitk_rewriter.cc`, `splitk-rewriter`) splits
the contracting dimension of a dot its cost estimate says gains from it (`choose_split_k`: tiles of
128 x 128 in waves over the cores against the bytes moved, with the Hopper or Ampere weights): the
operands reshaped (padded when needed) to `[.., split, K / split, ..]`, the split a new batch
dimension of an f32 (accumulator type) dot, then a reduce over it (and a convert to the output
type). The GEMM fusion then ends at that reduce: the epilogue goes to the reduction's kernel.

`rewrite_gemms` runs them in XLA's order: dot decomposition, strength reduction, dot merging,
transpose folding, split-K, GEMM fusion.

Layouts: the dimension orders follow each tensor's own layout (`fusion._dim_order`), as the module
has them; XLA's layout assignment is not simulated, except that the entry computation's results of
a module not yet through it are taken row-major (the layout JAX asks for). Not simulated: the simplifier's other moves of
transposes and reshapes (`ReshapeMover`, reduce of a transpose), dot merging of operands on
different sides (`TryMergeLHSWithRHSOperand`), and GemmRewriter's epilogues (bias, alpha) on cuBLAS
calls. `decompose_dots` leaves alone the dots that the simplifier strength-reduces or that stay
dots (their transposes fuse into the same kernel).
"""

from __future__ import annotations

import dataclasses
import json
import weakref
from collections import deque
from dataclasses import dataclass

from ..analysis.opcodes import is_elementwise
from ..hlo import HloComputation, HloInstruction, HloModule, Shape
from ..hlo.editing import NameUniquifier
from ..fusion_engine import fuse, make_fusion
from ._dim_order import NO_SPLIT, dot_operand_order, dot_output_order, propagate
from ._library_layouts import layouts_assigned

__all__ = ["DOT_MERGER_THRESHOLD_BYTES", "GEMM_REWRITE_SIZE_THRESHOLD", "GemmRewrite", "choose_split_k", "merge_dots",
           "rewrite_gemms", "split_k_dots", "triton_gemm_backend_config"]

#: `xla_gpu_gemm_rewrite_size_threshold`: a dot with (M + N) * K under it stays a dot.
GEMM_REWRITE_SIZE_THRESHOLD = 100
#: `TritonFusionAnalysis::kMaxParameterPerDotOperand`
MAX_PARAMETERS_PER_OPERAND = 4
#: `kIoToleranceBytes` of `triton_tiling_propagation.cc`
IO_TOLERANCE_BYTES = 1024
# `kMinConcatFragmentSize`: a concatenate whose operands are not all multiples of it along the joined dimension
MIN_CONCAT_FRAGMENT = 64
# Concatenates `merge_dots` made along the first of several non-contracting dimensions -> the product
# of the others: `DotDecomposer` would have collapsed them, so XLA joins fragments that much larger.
_COLLAPSED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

_NOT_FUSED = frozenset({"tuple", "get-tuple-element", "reduce", "all-reduce", "all-reduce-start", "all-reduce-done",
                        "pad", "dynamic-slice"})
_DATA_MOVEMENT = frozenset({"bitcast", "transpose", "slice", "reshape", "concatenate", "parameter", "broadcast"})
_FLOAT_UNARY = frozenset({"cosine", "exponential", "exponential-minus-one", "floor", "ceil", "log", "log-plus-one",
                          "rsqrt", "sine", "sqrt", "cbrt", "tan", "tanh", "erf"})
_FLOATS = frozenset({"f32", "bf16", "f16", "f64"})
_TRITON_ALGORITHMS = frozenset({"dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3", "dot_f32_f32_f32", "dot_bf16_bf16_f32",
                                "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6", "dot_bf16_bf16_f32_x9"})


@dataclass(frozen=True)
class GemmRewrite:
    """One dot rewritten before fusion (a row of `FusionResult.pre_fusion_rewrites`).

    `kind`: `"triton-gemm"` (a `__triton_gemm` fusion) or `"cublas"` (a `__cublas$gemm` call);
    `instruction`: the dot; `fusion`: what replaced it; `absorbed`: the other instructions fused
    with it (operand producers and epilogue); `reason`: why cuBLAS and not Triton (empty for Triton);
    `split_k`: how many parts `SplitkRewriter` split its contracting dimension into (1: not split).
    """

    kind: str
    instruction: str
    fusion: str
    absorbed: tuple[str, ...] = ()
    reason: str = ""
    split_k: int = 1


def triton_gemm_backend_config() -> str:
    """The backend config `GemmFusion` gives its fusions (tile sizes come later, from the autotuner)."""
    return json.dumps({"fusion_backend_config": {"kind": "__triton_gemm"}})


def _ints(instr: HloInstruction, name: str) -> tuple[int, ...]:
    v = instr.attribute(name, ())
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else ()


def _dot_dims(dot):
    return (_ints(dot, "lhs_batch_dims"), _ints(dot, "lhs_contracting_dims"),
            _ints(dot, "rhs_batch_dims"), _ints(dot, "rhs_contracting_dims"))


def _sizes(dot) -> tuple[int, int, int]:
    """(M, N, K): the non-contracting sizes of each side and the contracting size."""
    lb, lc, rb, rc = _dot_dims(dot)
    ls, rs = dot.operands[0].shape.dims, dot.operands[1].shape.dims
    m = n = k = 1
    for i, d in enumerate(ls):
        if i in lc:
            k *= d
        elif i not in lb:
            m *= d
    for i, d in enumerate(rs):
        if i not in rc and i not in rb:
            n *= d
    return m, n, k


def _has_non_contracting(dot) -> bool:
    lb, lc, rb, rc = _dot_dims(dot)
    return (len(lb) + len(lc) < len(dot.operands[0].shape.dims)
            and len(rb) + len(rc) < len(dot.operands[1].shape.dims))


class _Support:
    """`legacy_triton` support checks for one compute capability."""

    def __init__(self, compute_capability: tuple[int, int]):
        self.cc = tuple(compute_capability)
        # f64 too: the XLA of jaxlib 0.10.2 makes an f64 dot a Triton GEMM (its deviceless dumps)
        self.dot_outputs = {"f16", "f32", "bf16", "s32", "f64"}
        if self.cc >= (8, 0):
            self.dot_outputs.add("f8e5m2")
        if self.cc >= (9, 0):
            self.dot_outputs.add("f8e4m3fn")
        self.types = self.dot_outputs | {"pred", "s8", "s16", "s32"}

    def data_types(self, instr) -> bool:
        if instr.shape.is_tuple or instr.shape.element_type not in self.types:
            return False
        for o in instr.operands:
            t = o.shape.element_type if not o.shape.is_tuple else ""
            if instr.opcode == "convert" and t == "s4":
                continue
            if t not in self.types:
                return False
        return True

    @staticmethod
    def elementwise_op(op: str, t: str) -> bool:
        if op in ("convert", "select", "clamp"):
            return True
        if t == "pred":
            return op in ("not", "and", "or", "xor", "compare")
        if op in ("abs", "negate", "add", "compare", "maximum", "minimum", "multiply", "subtract"):
            return True
        if t in _FLOATS:
            return op in _FLOAT_UNARY or op in ("atan2", "power") or (op == "divide" and t != "f16")
        return False

    def instruction(self, instr) -> str:
        """"" when Triton's GEMM emitter supports `instr`, else why not."""
        op = instr.opcode
        if op == "constant" or is_elementwise(instr):
            if not self.data_types(instr):
                return "unsupported data type"
            if op != "constant" and not self.elementwise_op(op, instr.operands[0].shape.element_type):
                return "unsupported elementwise operation"
            return ""
        return "" if op in _DATA_MOVEMENT else "unsupported opcode"

    def dot(self, dot) -> str:
        algorithm = str(dot.attribute("algorithm", "") or "")
        if algorithm and algorithm != "unset":
            if algorithm not in _TRITON_ALGORITHMS:
                return f"algorithm {algorithm}"
        # Non-default operand precisions need no check: XLA:GPU gives such dots an algorithm Triton
        # takes before this pass (its dump of a `precision="highest"` f32 dot: a Triton GEMM).
        out, lhs, rhs = dot.shape.element_type, dot.operands[0].shape.element_type, dot.operands[1].shape.element_type
        if out not in self.dot_outputs:
            return f"{out} output"
        if lhs not in self.types or rhs not in self.types:
            return f"{lhs} x {rhs} inputs"
        if out == "s32" and not (lhs in ("s8", "u8") and rhs in ("s8", "u8")):
            return "s32 output of non-8-bit inputs"
        # (`NoNonContractingDimension` is not checked: `dot_decomposer` has given a vector side a unit
        # dimension by then.) `CanTritonHandleGEMM` refuses several batch dimensions, but `dot_decomposer` has merged them
        # into one (reshapes around a canonical dot) by then: such dots are Triton GEMMs too.
        return ""


def _bytes(instr) -> int:
    return instr.shape.byte_size


def _relabel_source(instr):
    """What `instr` is a relabelling of: through bitcasts, get-tuple-elements and the reshapes and
    broadcasts that keep the element count (which XLA's simplifier folds away before this pass;
    a module as JAX lowers it still has them, e.g. a bias `reshape(broadcast(reshape(p)))`)."""
    while instr.operands and (instr.opcode in ("bitcast", "get-tuple-element") or (
            instr.opcode in ("reshape", "broadcast", "copy")
            and instr.shape.num_elements == instr.operands[0].shape.num_elements)):
        instr = instr.operands[0]
    return instr


def _is_effective_parameter(instr) -> bool:
    """`hlo_query::IsEffectiveParameter`: a parameter, or a bitcast / get-tuple-element of one
    (and, here, a relabelling of one: `_relabel_source`)."""
    return _relabel_source(instr).opcode == "parameter"


def _input_worth_fusing(h) -> bool:
    """`IsInputWorthFusing`."""
    if any(o.shape.is_tuple for o in h.operands):
        return False
    if sum(_bytes(o) for o in h.operands) - _bytes(h) <= IO_TOLERANCE_BYTES:
        return True
    if len(h.users) > 1:
        return False
    if h.opcode == "slice" and all(o.opcode in ("parameter", "constant") for o in h.operands):
        return True
    if h.opcode == "multiply":  # only with xla_gpu_experimental_enable_subchannel_dequantisation_fusion (off)
        return False
    return all(o.opcode in ("parameter", "constant") and len(o.users) == 1 for o in h.operands)


def _output_worth_fusing(h) -> bool:
    """`IsOutputWorthFusing`: nothing it could fuse into (`CanNotBeFusedIntoAUser`: the root, or read only
    by a root tuple), or writes at most 1 KiB more than it reads."""
    if any(o.shape.is_tuple for o in h.operands):
        return False
    comp = h.computation
    if comp is not None and (h is comp.root or (
            len(h.users) == 1 and h.users[0] is comp.root and h.users[0].opcode == "tuple")):
        return True
    return sum(_bytes(o) for o in h.operands) - _bytes(h) >= -IO_TOLERANCE_BYTES


class _Planner:
    """`GemmFusion`'s fusion plan for one dot: its dimension orders (`fusion._dim_order`) and the
    split requirement the fused instructions agree on so far."""

    def __init__(self, support: _Support, results=frozenset()):
        self.support = support
        self.results = results  # `_dim_order.propagate`'s: the entry's results when layouts are not assigned
        self.splittable: str | None = None
        self.noncontracting: str | None = None
        self.requirement = NO_SPLIT

    def propagates(self, h) -> bool:
        """The concatenates `merge_dots` joined along the first of several non-contracting dimensions
        (see `_COLLAPSED`): XLA joins that much larger fragments."""
        if h.opcode == "concatenate":
            dim = _ints(h, "dimensions")
            if len(dim) != 1:
                return False
            times = _COLLAPSED.get(h, 1)
            return all(o.shape.dims[dim[0]] * times % MIN_CONCAT_FRAGMENT == 0 for o in h.operands)
        return True

    def _orders(self, h, to_operands: bool, order, requirement: int):
        return propagate(h, to_operands, order, self.splittable, self.noncontracting, requirement, self.results)

    def fusible_as_input(self, h, order, requirement: int):
        """`GetPropagatedDimOrdersAndRequirementsIfProfitablyFusible`, output to input: (the operands'
        orders, the requirement), or None."""
        if h.opcode in _NOT_FUSED or h.shape.is_tuple:
            return None
        if h.opcode == "power" and len(h.users) > 1:
            return None
        if self.support.instruction(h) or not self.propagates(h):
            return None
        got = self._orders(h, True, order, requirement)
        if got is None:
            return None
        orders, req = got
        if is_elementwise(h) and len(h.operands) == 2:
            for o in h.operands:
                if (o.opcode == "broadcast" and _relabel_source(o.operands[0]).opcode in ("parameter", "constant")
                        and self.fusible_as_input(o, orders[id(o)], NO_SPLIT) is not None):
                    return orders, req
        return (orders, req) if _input_worth_fusing(h) else None

    def fusible_as_output(self, h, src, order):
        """The same, input to output, for `h` reading `src` (its first operand `src` is skipped): the
        orders of `h` and of its other operands, and the requirement; or None."""
        if h.opcode in _NOT_FUSED or h.shape.is_tuple or h.opcode in ("parameter", "concatenate"):
            return None
        if not (is_elementwise(h) or h.opcode in _DATA_MOVEMENT):
            return None
        if h.opcode == "power" and len(h.users) > 1:
            return None
        if self.support.instruction(h) or not self.propagates(h):
            return None
        got = self._orders(h, False, order, self.requirement)
        if got is None:
            return None
        skipped = False
        for o in h.operands:
            if o is src and not skipped:
                skipped = True
                continue
            if o.opcode == "broadcast" and (not o.operands[0].shape.dims or _is_effective_parameter(o.operands[0])):
                continue
            if _is_effective_parameter(o):
                continue
            return None
        if not _output_worth_fusing(h):
            return None
        orders, req = got
        own = orders[id(h)]
        if len(h.operands) > 1:  # the other operands' orders (`GetOperandDimOrdersAndCombinedReqs`)
            back = self._orders(h, True, own, req)
            if back is None:
                return None
            ops, req = back
            return own, ops, req
        return own, {}, req

    def toward_operands(self, root, order, max_params: int | None) -> list:
        """`BuildFusionPlanTowardOperands`: the instructions to fuse, users before operands (the
        requirement they make is kept in `self.requirement`)."""
        seen = {root}
        inputs = {root}
        orders = {id(root): order}
        queue = deque([root])
        requeued = 0
        fused = []
        while len(queue) > requeued:
            h = queue.popleft()
            added = 0 if h.opcode == "parameter" or (h.opcode == "constant" and h.shape.dims) else len(h.operands) - 1
            if max_params is not None and len(inputs) + added > max_params:
                queue.append(h)  # the count may fall as others are fused
                requeued += 1
                continue
            requeued = 0
            if h.opcode == "parameter":
                continue
            got = self.fusible_as_input(h, orders[id(h)], self.requirement)
            if got is None:
                continue
            operand_orders, self.requirement = got
            inputs.discard(h)
            for o in h.operands:
                if o not in seen:
                    seen.add(o)
                    inputs.add(o)
                    orders[id(o)] = operand_orders[id(o)]
                    queue.append(o)
            fused.append(h)
        return fused


def _replace_by_cublas(dot, reason: str, names: NameUniquifier) -> GemmRewrite:
    """The dot becomes a `__cublas$gemm` custom call in place (same name, shape and operands)."""
    lb, lc, rb, rc = _dot_dims(dot)
    dims = {"lhs_contracting_dimensions": [str(d) for d in lc], "rhs_contracting_dimensions": [str(d) for d in rc],
            "lhs_batch_dimensions": [str(d) for d in lb], "rhs_batch_dimensions": [str(d) for d in rb]}
    config = {"gemm_backend_config": {"alpha_real": 1, "alpha_imag": 0, "beta": 0, "dot_dimension_numbers": dims,
                                      "epilogue": "DEFAULT"}}
    for key in list(dot.raw_attributes):
        if key != "metadata":
            dot.remove_attribute(key)
    dot.opcode = "custom-call"
    dot.set_attribute("custom_call_target", '"__cublas$gemm"')
    dot.set_attribute("backend_config", json.dumps(config, separators=(",", ":")))
    return GemmRewrite("cublas", dot.name, dot.name, (), reason)


def _make_triton_gemm(dot, planner: _Planner, names: NameUniquifier, split_k: int = 1) -> GemmRewrite:
    """`CreateDotFusion` and the visitor's replacement, through the fusion engine's in-place edits."""
    dot_name = dot.name
    plans = []
    output_requirement = NO_SPLIT
    for side, o in enumerate(dot.operands):  # `FuseDotOperand`: each side from its own requirement
        order, planner.splittable, planner.noncontracting = dot_operand_order(dot, side, split_k)
        planner.requirement = NO_SPLIT
        plans.append(planner.toward_operands(o, order, MAX_PARAMETERS_PER_OPERAND))
        if side == 0:
            output_requirement = planner.requirement
    fusion = make_fusion(dot, "kCustom", names=names)
    absorbed: list[str] = []

    def absorb(plan):
        for h in plan:
            if h in fusion.operands:  # a producer reached twice is fused once
                absorbed.append(h.name)
                fuse(h, fusion, "kCustom", names=names)

    for plan in plans:
        absorb(plan)
    # toward the users (`FuseDotOutput`): a chain of single users
    order, planner.splittable = dot_output_order(dot, output_requirement, split_k)
    planner.noncontracting = None
    planner.requirement = output_requirement
    while len(fusion.users) == 1 and fusion is not fusion.computation.root:
        user = fusion.users[0]
        got = planner.fusible_as_output(user, fusion, order)
        if got is None:
            break
        order, operand_orders, planner.requirement = got
        others = [o for o in user.operands if o is not fusion]
        absorbed.append(user.name)
        fusion = fuse(fusion, user, "kCustom", names=names)
        for o in others:
            if o in fusion.operands:
                absorb(planner.toward_operands(o, operand_orders[id(o)], None))
    fusion.set_attribute("backend_config", triton_gemm_backend_config())
    return GemmRewrite("triton-gemm", dot_name, fusion.name, tuple(absorbed))


def _entry_results(module: HloModule) -> frozenset:
    """Ids of the entry computation's results: its root, or the operands of its root tuple."""
    root = module.entry.root if module.entry is not None else None
    if root is None:
        return frozenset()
    return frozenset(id(o) for o in root.operands) if root.opcode == "tuple" else frozenset({id(root)})


def rewrite_gemms(module: HloModule, compute_capability: tuple[int, int] = (9, 0),
                  core_count: int | None = None, *, merge: bool = True, decompose: bool = True) -> list[GemmRewrite]:
    """Rewrite, in place, every `dot` of `module`'s non-fusion computations as XLA:GPU does before
    fusion for a GPU of `compute_capability` (see the module docstring), in XLA's order: dot strength
    reduction (`strength_reduce_dots`), dot merging (`merge_dots`), with `core_count` (the GPU's SMs)
    split-K (`split_k_dots`; None skips it), then each dot a Triton GEMM fusion, a cuBLAS call, or
    (tiny) left as it is. On XLA's own input to fusion (its dots are those XLA left) nothing changes.
    `merge=False` leaves the dot merging out, for a module that has been through it already
    (`simulate_fusion(simplify=True)` runs it right after the simplifier, where XLA runs `DotMerger`).

    **Returns:** one `GemmRewrite` per GEMM made, in the order the dots were visited.
    """
    assigned = layouts_assigned(module)
    if decompose:
        decompose_dots(module)
    strength_reduce_dots(module)
    if merge:
        merge_dots(module)
    fold_transposes(module)  # as XLA runs it again right before its GEMM passes
    splits = {}
    if core_count:
        splits = {new: (old, k) for new, old, k in split_k_dots(module, core_count, tuple(compute_capability))}
    support = _Support(compute_capability)
    planner = _Planner(support, frozenset() if assigned else _entry_results(module))
    names = NameUniquifier(module)
    done: list[GemmRewrite] = []
    for comp in _nonfusion_computations(module):
        for dot in _two_operand_dots(comp):
            m, n, k = _sizes(dot)
            if (m + n) * k < GEMM_REWRITE_SIZE_THRESHOLD and dot.shape.element_type in ("f16", "bf16", "f32"):
                continue
            why = support.dot(dot)
            original, split = splits.get(dot.name, (dot.name, 1))
            if why:
                made = _replace_by_cublas(dot, why, names)
            else:
                made = _make_triton_gemm(dot, planner, names, split)
            done.append(dataclasses.replace(made, instruction=original, split_k=split))
    return done


# ---------------------------------------------------------------------------
# SplitkRewriter

_SPLIT_K_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
_TILE = 128  # kMTileSize, kNTileSize
# `GetCostWeights`: (compute, memory, reduction memory, reduction launch) by generation
_SPLIT_K_WEIGHTS = {"blackwell": (100.0, 0.0848863, 189.711, 1.21563e+08),
                    "hopper": (100.0, 0.194136, 193.1384, 4.36e+07),
                    "older": (100.0, 0.0666955, 467.815, 5.65307e+07)}
_ACCUMULATOR = {"f64": "f64", "s32": "s32"}  # `GetGemmAccumulatorType`: f32 for every other output


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _side_bits(instr) -> int:
    """`get_side_size`: the element size up a chain of unary elementwise ops (what will be fused)."""
    while is_elementwise(instr) and len(instr.operands) == 1:
        instr = instr.operands[0]
    return instr.shape.element_bits


def choose_split_k(dot, core_count: int, compute_capability: tuple[int, int]) -> int:
    """`ChooseSplitK`: the candidate split of the contracting dimension with the lowest estimated cost."""
    lb, lc, rb, rc = _dot_dims(dot)
    m, n, k = _sizes(dot)
    b = 1
    for d in lb:
        b *= dot.operands[0].shape.dims[d]
    lbits, rbits = _side_bits(dot.operands[0]), _side_bits(dot.operands[1])
    out_bits = dot.shape.element_bits
    acc_bits = 64 if dot.shape.element_type == "f64" else 32
    algorithm = str(dot.attribute("algorithm", "") or "")
    flops = {"dot_bf16_bf16_f32_x3": 12, "dot_tf32_tf32_f32_x3": 12, "dot_bf16_bf16_f32_x6": 20,
             "dot_bf16_bf16_f32_x9": 28}.get(algorithm, 2)
    generation = "blackwell" if compute_capability >= (10, 0) else "hopper" if compute_capability >= (9, 0) else "older"
    w_compute, w_memory, w_reduction, reduction_launch = _SPLIT_K_WEIGHTS[generation]

    def cost(split: int) -> float:  # `EstimateGemmCostAfterSplitK`
        eff_k, eff_b = _ceil(k, split), b * split
        mt, nt = min(m, _TILE), min(n, _TILE)
        tiles = eff_b * _ceil(m, _TILE) * _ceil(n, _TILE)
        waves = max(1.0, tiles / (core_count * (_TILE * _TILE) / (mt * nt)))
        compute = flops * mt * nt * eff_k * waves * w_compute
        read = m * k * b * lbits / 8.0 + n * k * b * rbits / 8.0
        write = m * n * eff_b * (acc_bits if split > 1 else out_bits) / 8.0
        total = max(compute, (read + write) * w_memory)
        if split == 1:
            return total
        return total + reduction_launch + (eff_b * m * n * acc_bits / 8.0 + b * m * n * out_bits / 8.0) * w_reduction

    costs = [cost(c) for c in _SPLIT_K_CANDIDATES]
    return _SPLIT_K_CANDIDATES[costs.index(min(costs))]


def _row_major(rank: int):
    return tuple(range(rank - 1, -1, -1))


def _add(comp, anchor, module, prefix, opcode, shape, operands, **attributes) -> HloInstruction:
    instr = HloInstruction(module.unique_name(prefix), opcode, shape, list(operands))
    for key, value in attributes.items():
        instr.set_attribute(key, value)
    comp.add_instruction(instr, before=anchor)
    return instr


def _adder(module: HloModule, element_type: str, before: HloComputation, cache: dict) -> HloComputation:
    """A scalar add computation for the split's reduce (one per element type)."""
    if element_type in cache:
        return cache[element_type]
    scalar = Shape.array(element_type, [])
    comp = HloComputation(module.unique_name(f"splitk_add_{element_type}"))
    x = HloInstruction(module.unique_name("x"), "parameter", scalar, parameter_number=0)
    y = HloInstruction(module.unique_name("y"), "parameter", scalar, parameter_number=1)
    comp.add_instruction(x)
    comp.add_instruction(y)
    root = HloInstruction(module.unique_name("add"), "add", scalar, [x, y])
    comp.add_instruction(root)
    comp.root = root
    module.add_computation(comp, before=before)
    cache[element_type] = comp
    return comp


def _split_operand(comp, dot, module, operand, c: int, split: int, padded_k: int) -> HloInstruction:
    """`SplitKOperand`: pad the contracting dimension `c` to `padded_k`, reshape it into `[split, K / split]`."""
    t = operand.shape.element_type
    dims = list(operand.shape.dims)
    if padded_k != dims[c]:
        zero = _add(comp, dot, module, "constant", "constant", Shape.array(t, []), [])
        zero.literal_text = "false" if t == "pred" else "0"
        padding = "x".join("0_0" if i != c else f"0_{padded_k - d}" for i, d in enumerate(dims))
        dims[c] = padded_k
        operand = _add(comp, dot, module, "pad", "pad", Shape.array(t, dims, _row_major(len(dims))), [operand, zero],
                       padding=padding)
    new = dims[:c] + [split, dims[c] // split] + dims[c + 1:]
    return _add(comp, dot, module, "reshape", "reshape", Shape.array(t, new, _row_major(len(new))), [operand])


def split_k_dots(module: HloModule, core_count: int,
                 compute_capability: tuple[int, int]) -> list[tuple[str, str, int]]:
    """`SplitkRewriter` on every dot of `module`'s non-fusion computations, in place (see the module
    docstring). **Returns:** `(new dot, dot it replaced, split)` for each dot split."""
    adders: dict = {}
    done = []
    for comp in _nonfusion_computations(module):
        for dot in _two_operand_dots(comp):
            lb, lc, rb, rc = _dot_dims(dot)
            if len(lc) != 1 or len(rc) != 1 or any(o.shape.element_type == "s32" for o in dot.operands):
                continue
            if not dot.shape.is_array:
                continue
            # (a side with no non-contracting dimension is one of size 1 to XLA: `DotDecomposer` gave it one)
            split = choose_split_k(dot, core_count, compute_capability)
            if split == 1:
                continue
            k = dot.operands[0].shape.dims[lc[0]]
            bits = min(128, _side_bits(dot.operands[0]), _side_bits(dot.operands[1]))
            padded_k = _ceil(k, split * 128 // bits) * (split * 128 // bits)  # `GetPaddedK`
            lhs = _split_operand(comp, dot, module, dot.operands[0], lc[0], split, padded_k)
            rhs = _split_operand(comp, dot, module, dot.operands[1], rc[0], split, padded_k)

            def shifted(dims, c):
                return [d + 1 if d >= c else d for d in dims]

            # batch pairs ordered by their lhs position, the split pair among them
            pairs = sorted(list(zip(shifted(lb, lc[0]), shifted(rb, rc[0]))) + [(lc[0], rc[0])])
            new_lb, new_rb = [p[0] for p in pairs], [p[1] for p in pairs]
            split_at = new_lb.index(lc[0])
            out_t = dot.shape.element_type
            acc = _ACCUMULATOR.get(out_t, "f32")
            out_dims = list(dot.shape.dims)
            nb = len(lb)
            wide = out_dims[:nb]
            wide.insert(split_at, split)
            wide += out_dims[nb:]
            attrs = {"lhs_batch_dims": "{" + ",".join(map(str, new_lb)) + "}",
                     "lhs_contracting_dims": "{" + str(lc[0] + 1) + "}",
                     "rhs_batch_dims": "{" + ",".join(map(str, new_rb)) + "}",
                     "rhs_contracting_dims": "{" + str(rc[0] + 1) + "}"}
            for key in ("operand_precision", "algorithm", "metadata"):
                if key in dot.raw_attributes:
                    attrs[key] = dot.raw_attributes[key]
            new_dot = _add(comp, dot, module, dot.name + ".splitk", "dot",
                           Shape.array(acc, wide, _row_major(len(wide))), [lhs, rhs], **attrs)
            zero = _add(comp, dot, module, "constant", "constant", Shape.array(acc, []), [])
            zero.literal_text = "0"
            layout = dot.shape.layout
            result = _add(comp, dot, module, "reduce", "reduce", Shape.array(acc, out_dims, layout), [new_dot, zero],
                          dimensions="{" + str(split_at) + "}", to_apply=_adder(module, acc, comp, adders))
            if acc != out_t:
                result = _add(comp, dot, module, "convert", "convert", Shape.array(out_t, out_dims, layout), [result])
            dot.replace_all_uses_with(result)
            comp.remove_instruction(dot)
            done.append((new_dot.name, dot.name, split))
    return done


# ---------------------------------------------------------------------------
# DotMerger

#: `xla_gpu_dot_merger_threshold_mb` (32) in bytes: in XLA's source a pair merges when one of its dots,
#: with its operands, is at most this large (`is_merge_candidate`). The XLA of jaxlib 0.10.2 merges
#: regardless (measured, `tests/test_dot_merger.py`: two f32 dots of 4096 x 1024 by 1024 x 1024, 36 MiB
#: each, merge in its deviceless compile for h100-sxm, and so do 16 GiB ones, even with the flag set to
#: 0), so `merge_dots` takes no limit unless given one.
DOT_MERGER_THRESHOLD_BYTES = 32 << 20



def _nonfusion_computations(module: HloModule) -> list:
    """XLA's `MakeNonfusionComputations`: the computations the GEMM passes visit (fusion bodies left out),
    listed before any is edited."""
    bodies = {id(i.fused_computation) for _, i in module.instructions() if i.opcode == "fusion"}
    return [c for c in module.computations if id(c) not in bodies]


def _two_operand_dots(comp) -> list:
    """The dots of `comp`, listed before any is rewritten."""
    return [i for i in comp.instructions if i.opcode == "dot" and len(i.operands) == 2]

def _reaches(src, dst) -> bool:
    """Whether `dst` depends on `src` (through operands)."""
    seen, stack = set(), [dst]
    while stack:
        x = stack.pop()
        if x is src:
            return True
        for o in x.operands:
            if id(o) not in seen:
                seen.add(id(o))
                stack.append(o)
    return False


def _braces(values) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


def _try_merge_same_operand(comp, module, a, b, flattened: list):
    """`TryMergeSameOperand`: one dot over the shared operand and the other two concatenated, sliced
    back into `a`'s and `b`'s values; None where XLA would not merge them."""
    if a.operands[0] is not b.operands[0] and a.operands[1] is not b.operands[1]:
        return None
    if any(x.operands[i].shape.element_type != b.operands[i].shape.element_type for x in (a,) for i in (0, 1)) \
            or a.shape.element_type != b.shape.element_type:
        return None
    dims = _dot_dims(a)
    if dims != _dot_dims(b) or a.raw_attributes.get("operand_precision") != b.raw_attributes.get("operand_precision"):
        return None
    lb, lc, rb, rc = dims
    lhs_same = a.operands[0] is b.operands[0]
    shared = a.operands[0 if lhs_same else 1]
    diff_a, diff_b = a.operands[1 if lhs_same else 0], b.operands[1 if lhs_same else 0]
    if diff_a.shape.layout != diff_b.shape.layout:
        return None
    shared_nc = len(shared.shape.dims) - len(lb) - (len(lc) if lhs_same else len(rc))
    used = sorted(set(rc) | set(rb)) if lhs_same else sorted(set(lc) | set(lb))
    rank = len(diff_a.shape.dims)
    # XLA wants exactly one non-contracting dimension on the other operands, which `DotDecomposer` has
    # made so by collapsing several (jax's multi-head projections, [d, heads, head_dim]); without that
    # pass, several are taken here and concatenated along the first: the same merged GEMM.
    if len(used) + 1 > rank or len(diff_b.shape.dims) != rank:
        return None
    outer = 0
    for d in used:
        if d != outer:
            break
        outer += 1
    if any(x != y for i, (x, y) in enumerate(zip(diff_a.shape.dims, diff_b.shape.dims)) if i != outer):
        return None
    t = diff_a.shape.element_type
    cdims = list(diff_a.shape.dims)
    cdims[outer] += diff_b.shape.dims[outer]
    layout = diff_a.shape.layout
    parts = [diff_a, diff_b]
    if diff_a.opcode == "concatenate" and len(diff_a.users) == 1 and _ints(diff_a, "dimensions") == (outer,):
        parts = list(diff_a.operands) + [diff_b]  # a third merge: one concatenate, as the simplifier leaves it
        flattened.append(diff_a)
    concat = _add(comp, a, module, "concatenate", "concatenate", Shape.array(t, cdims, layout), parts,
                  dimensions=_braces([outer]))
    others = 1
    for d in range(outer + 1, rank):
        if d not in used:
            others *= diff_a.shape.dims[d]
    if others > 1:
        _COLLAPSED[concat] = others
    slice_dim = len(lb) + (shared_nc if lhs_same else 0)  # the first non-contracting dimension of the other side
    odims = list(a.shape.dims)
    odims[slice_dim] += b.shape.dims[slice_dim]
    attrs = {k: v for k, v in a.raw_attributes.items()
             if k in ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims",
                      "operand_precision", "algorithm", "metadata")}
    operands = [shared, concat] if lhs_same else [concat, shared]
    merged = _add(comp, a, module, a.name, "dot", Shape.array(a.shape.element_type, odims, a.shape.layout),
                  operands, **attrs)
    cut = odims[slice_dim] - b.shape.dims[slice_dim]
    for old, lo, hi in ((a, 0, cut), (b, cut, odims[slice_dim])):
        bounds = ", ".join(f"[{lo}:{hi}]" if d == slice_dim else f"[0:{n}]" for d, n in enumerate(odims))
        piece = _add(comp, a, module, "slice", "slice", old.shape, [merged], slice="{" + bounds + "}")
        old.replace_all_uses_with(piece)
    return merged


def merge_dots(module: HloModule, max_bytes: int | None = None) -> list[tuple[str, str, str]]:
    """XLA's `DotMerger` (same-operand merges only: `TryMergeSameOperand`; the LHS-with-RHS merge of
    `DotDecomposer`-normal dots is not simulated), in place, on `module`'s non-fusion computations.
    Dots sharing an operand, with equal types and dimension numbers and exactly one non-contracting
    dimension on their other operands, neither depending on the other and one of them (with its
    operands) at most `max_bytes` (None: any size, as jaxlib 0.10.2's XLA merges; XLA's source says
    `DOT_MERGER_THRESHOLD_BYTES`), become one dot over the concatenated other operands, sliced back.
    **Returns:** `(merged dot, first, second)` per merge."""
    from ._multi_output import _sort_operands_first

    def candidate(d) -> bool:
        return max_bytes is None or d.shape.byte_size + sum(o.shape.byte_size for o in d.operands) <= max_bytes

    done = []
    for comp in _nonfusion_computations(module):
        classes: dict = {}
        order = {id(i): n for n, i in enumerate(comp.instructions)}
        for d in comp.instructions:
            if d.opcode != "dot" or len(d.operands) != 2 or not _has_non_contracting(d):
                continue
            for o in d.operands:
                classes.setdefault(id(o), (o, []))[1].append(d)
                if o.opcode == "transpose":
                    classes.setdefault(id(o.operands[0]), (o.operands[0], []))[1].append(d)
        dead: list = []
        flattened: list = []
        for key in sorted(classes, key=lambda k: order.get(k, -1)):
            dots = list(dict.fromkeys(classes[key][1]))
            if len(dots) < 2 or not any(candidate(d) for d in dots):
                continue
            for i in range(len(dots)):
                for j in range(i + 1, len(dots)):
                    a, b = dots[i], dots[j]
                    if a is None or b is None or any(a is x or b is x for x in dead):
                        continue
                    if not (candidate(a) or candidate(b)) or _reaches(a, b) or _reaches(b, a):
                        continue
                    merged = _try_merge_same_operand(comp, module, a, b, flattened)
                    if merged is not None:
                        done.append((merged.name, a.name, b.name))
                        dead += [a, b]
                        dots[i], dots[j] = merged, None
        for d in dead:
            comp.remove_instruction(d)
        for c in flattened:
            if not c.users:
                comp.remove_instruction(c)
        if dead:
            _sort_operands_first(comp)
    return done


# ---------------------------------------------------------------------------
# The simplifier's dot strength reduction

#: `IsMatrixMultiplicationTooSmallForRewriting` threshold of `GpuAlgebraicSimplifier`'s strength reduction
STRENGTH_REDUCTION_THRESHOLD = 10_000_000


def _is_vector_side(dot, side: int) -> bool:
    lb, lc, rb, rc = _dot_dims(dot)
    b, c = (lb, lc) if side == 0 else (rb, rc)
    return len(b) + len(c) == len(dot.operands[side].shape.dims)


def _triton_handles(dot) -> bool:
    """`legacy_triton::CanTritonHandleGEMM` as the strength reduction asks it: a dot without an algorithm
    needs default operand precisions (`operand_precision={highest,highest}` is refused: the algorithm XLA
    later derives from it is not there yet), one with an algorithm one Triton implements; types Triton's
    GEMM takes; at most one batch dimension."""
    algorithm = str(dot.attribute("algorithm", "") or "")
    if not algorithm or algorithm == "unset":
        precisions = str(dot.raw_attributes.get("operand_precision", "")).strip("{} ").lower()
        if any(p.strip() not in ("", "default") for p in precisions.split(",")):
            return False
    # the algorithm and the types (those of every compute capability), as GemmFusion asks
    return not _Support((0, 0)).dot(dot) and len(_dot_dims(dot)[0]) <= 1


def should_strength_reduce(dot) -> bool:
    """`DotStrengthReduction::InstructionMatchesPattern` (XLA:GPU's strength reduction, with the simplifier):
    both sides vectors; or one a vector (or an s32 x s32 -> s32 dot contracting the rhs's dimension 1) and
    (M + N) * K under `STRENGTH_REDUCTION_THRESHOLD`, or a dot Triton's GEMM emitter cannot take
    (`_triton_handles`: the corpus's lineax CG, 4096 x 4096 by 4096 at precision highest, is reductions in
    XLA's dump, its numpyro logistic regression, 200000 x 64 by 64 at default precision, Triton GEMMs); and
    a dot without contracting dimensions (an outer product, the simplifier's rule)."""
    lhs_vec, rhs_vec = _is_vector_side(dot, 0), _is_vector_side(dot, 1)
    if lhs_vec and rhs_vec:
        return True
    if not _dot_dims(dot)[1]:
        return True  # no contracting dimension: an outer product, a multiply (the simplifier's rule)
    lb, lc, rb, rc = _dot_dims(dot)
    s32_dot = (dot.shape.element_type == "s32" and all(o.shape.element_type == "s32" for o in dot.operands)
               and list(rc) == [1])
    if not (lhs_vec or rhs_vec or s32_dot):
        return False
    m, n, k = _sizes(dot)
    if (m + n) * k < STRENGTH_REDUCTION_THRESHOLD:
        return True
    return not _triton_handles(dot)


def _reduce_in_operand_shape(comp, module, dot, adders) -> HloInstruction | None:
    """A dot with a vector side `v` (only batch and contracting dimensions) as XLA's simplification pipeline
    leaves it: `reduce(multiply(broadcast(v), x), x's contracting dimensions)` in the shape of the other side
    `x`, no transpose, where `x`'s other dimensions are already in the dot's output order and `v`'s map to `x`'s
    in order. (XLA's `DotDecomposer` first writes the dot as a matrix-vector product of transposes and reshapes,
    the strength reduction a multiply and reduce of those; the simplifier's later rounds fold the transposes and
    reshapes into the broadcast and the reduce's dimensions: the diffrax ODE solvers' `v[7] . x[16,7,8]` becomes
    `reduce(multiply(broadcast(v, {1}), x), {1})` in XLA's module before priority fusion.) None where that does
    not hold (the general form then, transposes included)."""
    lb, lc, rb, rc = _dot_dims(dot)
    if not lc:
        return None
    t = dot.shape.element_type
    for x_side in (1, 0) if _is_vector_side(dot, 0) else (0,):
        v_side = 1 - x_side
        if not _is_vector_side(dot, v_side):
            continue
        x, v = dot.operands[x_side], dot.operands[v_side]
        xb, xc = (lb, lc) if x_side == 0 else (rb, rc)
        vb, vc = (lb, lc) if v_side == 0 else (rb, rc)
        rank = len(x.shape.dims)
        kept = list(xb) + [d for d in range(rank) if d not in xb and d not in xc]
        to_x = dict(zip(vb, xb)) | dict(zip(vc, xc))
        dims = [to_x[d] for d in range(len(v.shape.dims))]
        if kept != sorted(kept) or dims != sorted(dims):
            continue
        layout = _row_major(rank)
        sides = []
        for operand in (x, v):
            if operand.shape.element_type != t:
                operand = _add(comp, dot, module, "convert", "convert",
                               Shape.array(t, operand.shape.dims, _row_major(len(operand.shape.dims))), [operand])
            sides.append(operand)
        if dims != list(range(rank)):
            sides[1] = _add(comp, dot, module, "broadcast", "broadcast", Shape.array(t, x.shape.dims, layout),
                            [sides[1]], dimensions=_braces(dims))
        if v_side == 0:
            sides.reverse()  # the dot's operand order
        product = _add(comp, dot, module, "multiply", "multiply", Shape.array(t, x.shape.dims, layout), sides)
        zero = _add(comp, dot, module, "constant", "constant", Shape.array(t, []), [])
        zero.literal_text = "false" if t == "pred" else "0"
        return _add(comp, dot, module, "reduce", "reduce", Shape.array(t, dot.shape.dims, dot.shape.layout),
                    [product, zero], dimensions=_braces(sorted(xc)), to_apply=_adder(module, t, comp, adders))
    return None


def strength_reduce_dots(module: HloModule) -> list[str]:
    """The dots `should_strength_reduce` picks, made a multiply of broadcast operands and a reduce over
    the contracting dimensions (converts to the output type first), in place. **Returns:** their names."""
    adders: dict = {}
    done = []
    for comp in _nonfusion_computations(module):
        for dot in _two_operand_dots(comp):
            if not dot.shape.is_array or not should_strength_reduce(dot):
                continue
            reduce = _reduce_in_operand_shape(comp, module, dot, adders)
            if reduce is not None:
                dot.replace_all_uses_with(reduce)
                comp.remove_instruction(dot)
                done.append(dot.name)
                continue
            lb, lc, rb, rc = _dot_dims(dot)
            t = dot.shape.element_type
            nb = len(lb)
            nl = len(dot.operands[0].shape.dims) - nb - len(lc)
            nr = len(dot.operands[1].shape.dims) - nb - len(rc)
            out_dims = list(dot.shape.dims)
            k_dims = [dot.operands[0].shape.dims[d] for d in lc]
            full = out_dims + k_dims
            layout = _row_major(len(full))
            sides = []
            for side, (b, c) in enumerate(((lb, lc), (rb, rc))):
                x = dot.operands[side]
                rank = len(x.shape.dims)
                nc = [d for d in range(rank) if d not in b and d not in c]
                perm = list(b) + nc + list(c)
                if x.shape.element_type != t:
                    x = _add(comp, dot, module, "convert", "convert",
                             Shape.array(t, x.shape.dims, _row_major(rank)), [x])
                if perm != list(range(rank)):
                    x = _add(comp, dot, module, "transpose", "transpose",
                             Shape.array(t, [x.shape.dims[p] for p in perm], _row_major(rank)), [x],
                             dimensions=_braces(perm))
                own = list(range(nb)) + ([nb + i for i in range(nl)] if side == 0 else
                                         [nb + nl + i for i in range(nr)])
                own += [len(out_dims) + i for i in range(len(c))]
                sides.append(_add(comp, dot, module, "broadcast", "broadcast", Shape.array(t, full, layout), [x],
                                  dimensions=_braces(own)))
            product = _add(comp, dot, module, "multiply", "multiply", Shape.array(t, full, layout), sides)
            if not k_dims:
                dot.replace_all_uses_with(product)
                comp.remove_instruction(dot)
                done.append(dot.name)
                continue
            zero = _add(comp, dot, module, "constant", "constant", Shape.array(t, []), [])
            zero.literal_text = "false" if t == "pred" else "0"
            reduce = _add(comp, dot, module, "reduce", "reduce", Shape.array(t, out_dims, dot.shape.layout),
                          [product, zero], dimensions=_braces(range(len(out_dims), len(full))),
                          to_apply=_adder(module, t, comp, adders))
            dot.replace_all_uses_with(reduce)
            comp.remove_instruction(dot)
            done.append(dot.name)
    return done


# ---------------------------------------------------------------------------
# DotDecomposer


def _is_canonical(dot) -> bool:
    """`DotDecomposer::Run`'s test: one contracting dimension, at most one non-contracting dimension a
    side, a batch or contracting dimension, batch dimensions leading in order."""
    lb, lc, rb, rc = _dot_dims(dot)
    if len(lc) != 1:
        return False
    if len(lb) + 2 < dot.operands[0].shape.rank or len(rb) + 2 < dot.operands[1].shape.rank:
        return False
    if not lb and not lc:
        return False
    return lb == tuple(range(len(lb))) and rb == tuple(range(len(rb)))


def decompose_dots(module: HloModule) -> list[str]:
    """XLA's `DotDecomposer` (`hlo/transforms/expanders/dot_decomposer.cc`, run before the simplifier),
    in place, on the dots that become GEMMs: a non-canonical dot's operands transposed to
    `[batch.., non-contracting, contracting]` (LHS) and `[batch.., contracting, non-contracting]` (RHS)
    and reshaped to one non-contracting (omitted when of size 1) and one contracting dimension, the
    canonical dot's result reshaped back. Its transposes are what `GemmFusion` may or may not take
    (`fusion._dim_order`): an attention's `[B, T, N, H]` operand made `[B, N, T, H]` stays out, a
    kernel of its own. As the simplifier would, a transpose that moves only unit dimensions is a
    reshape, an identity one is left out, and the same transpose or reshape of an operand is made once
    (CSE). Dots the simplifier strength-reduces and the tiny ones the GEMM passes leave as dots are
    left alone (their transposes would fuse into the same kernel). **Returns:** the dots rewritten."""
    done = []
    for comp in _nonfusion_computations(module):
        made: dict = {}

        def once(anchor, opcode, operand, dims, **attrs):
            key = (opcode, id(operand), tuple(dims), tuple(sorted(attrs.items())))
            if key not in made:
                t = operand.shape.element_type
                made[key] = _add(comp, anchor, module, opcode, opcode, Shape.array(t, dims, _row_major(len(dims))),
                                 [operand], **attrs)
            return made[key]

        for dot in _two_operand_dots(comp):
            if not dot.shape.is_array or _is_canonical(dot) or should_strength_reduce(dot):
                continue
            m, n, k = _sizes(dot)
            if (m + n) * k < GEMM_REWRITE_SIZE_THRESHOLD and dot.shape.element_type in ("f16", "bf16", "f32"):
                continue
            lb, lc, rb, rc = _dot_dims(dot)
            batch = [dot.operands[0].shape.dims[d] for d in lb]
            sides = []
            nc_sizes = []
            for side, (b, c) in enumerate(((lb, lc), (rb, rc))):
                x = dot.operands[side]
                dims = x.shape.dims
                nc = [d for d in range(x.shape.rank) if d not in b and d not in c]
                perm = list(b) + (nc + list(c) if side == 0 else list(c) + nc)
                nc_size = 1
                for d in nc:
                    nc_size *= dims[d]
                k_size = 1
                for d in c:
                    k_size *= dims[d]
                nc_sizes.append(nc_size)
                if perm != list(range(len(perm))):
                    moved = [p for p in perm if dims[p] != 1]
                    if moved == sorted(moved):  # only unit dimensions move: a bitcast, which the simplifier makes a reshape
                        x = once(dot, "reshape", x, [dims[p] for p in perm])
                    else:
                        if len(moved) < len(perm):  # the simplifier's reshape(transpose) of unit dimensions:
                            x = once(dot, "reshape", x, [dims[p] for p in sorted(moved)])  # dropped first
                            rank = {p: i for i, p in enumerate(sorted(moved))}
                            moved = [rank[p] for p in moved]
                        x = once(dot, "transpose", x, [x.shape.dims[p] for p in moved], dimensions=_braces(moved))
                tail = ([nc_size] if nc_size != 1 else []) + [k_size]
                if side == 1:
                    tail = [k_size] + ([nc_size] if nc_size != 1 else [])
                new_dims = batch + tail
                if list(x.shape.dims) != new_dims:
                    x = once(dot, "reshape", x, new_dims)
                sides.append(x)
            nb = len(lb)
            out = batch + [s for s in nc_sizes if s != 1]
            attrs = {"lhs_batch_dims": _braces(range(nb)), "rhs_batch_dims": _braces(range(nb)),
                     "lhs_contracting_dims": _braces([nb + (1 if nc_sizes[0] != 1 else 0)]),
                     "rhs_contracting_dims": _braces([nb])}
            for key in ("operand_precision", "algorithm", "metadata"):
                if key in dot.raw_attributes:
                    attrs[key] = dot.raw_attributes[key]
            new_dot = _add(comp, dot, module, dot.name, "dot",
                           Shape.array(dot.shape.element_type, out, _row_major(len(out))), sides, **attrs)
            result = new_dot
            if list(out) != list(dot.shape.dims):
                result = _add(comp, dot, module, "reshape", "reshape", dot.shape, [new_dot])
            dot.replace_all_uses_with(result)
            comp.remove_instruction(dot)
            comp.rename_instruction(new_dot, dot.name)  # the dot keeps its name (GemmRewrite rows name it)
            done.append(dot.name)
    return done


# ---------------------------------------------------------------------------
# TransposeFolding


def _matrix_layout_ok(dims, batch, rows, cols) -> bool:
    """`MatrixLayout::For(shape, batch, rows, cols)` on a row-major shape: each group of dimensions
    physically consecutive (`GetBatchRowColumnShape`), and the batch not the most minor."""
    m2m = list(reversed(range(len(dims))))
    order = []
    i = 0
    while i < len(m2m):
        d = m2m[i]
        for gid, group in ((1, rows), (2, cols), (0, batch)):
            if group and d == group[-1]:
                for g in reversed(group):
                    if i >= len(m2m) or m2m[i] != g:
                        return False
                    i += 1
                order.append(gid)
                break
        else:
            return False
    for gid, group in ((2, cols), (1, rows), (0, batch)):
        if not group:
            order.append(gid)
    return order in ([2, 1, 0], [1, 2, 0], [2, 0, 1], [1, 0, 2])


def fold_transposes(module: HloModule) -> list[str]:
    """XLA's `TransposeFolding` with XLA:GPU's `CanFoldTransposeOperandIntoDot`
    (`service/gpu/matmul_utils.cc`), in place: a dot operand that is a transpose is read through it
    (the transpose folded into the dot's dimension numbers) when the transpose keeps the relative
    order of the operand's non-contracting dimensions and the transpose's operand is a valid GEMM
    layout for them (`_matrix_layout_ok`). `DotDecomposer`'s transpose of an attention's
    probabilities (`[.., T, S] -> [.., S, T]`) goes this way: the GEMM reads them transposed.
    **Returns:** the dots changed."""
    done = []
    for comp in _nonfusion_computations(module):
        for dot in _two_operand_dots(comp):
            changed = False
            for side in (0, 1):
                t = dot.operands[side]
                perm = [int(p) for p in t.attribute("dimensions", ())] if t.opcode == "transpose" else []
                if not perm or perm == sorted(perm):
                    continue
                lb, lc, rb, rc = _dot_dims(dot)
                batch, contracting = (lb, lc) if side == 0 else (rb, rc)
                nc = [d for d in range(t.shape.rank) if d not in batch and d not in contracting]
                moved = [perm[d] for d in nc]
                if sorted(range(len(nc)), key=lambda i: moved[i]) != list(range(len(nc))):
                    continue  # the non-contracting dimensions would change order: the dot's shape would
                if not _matrix_layout_ok(t.operands[0].shape.dims, [perm[d] for d in batch],
                                         [perm[d] for d in contracting], moved):
                    continue
                prefix = "lhs" if side == 0 else "rhs"
                dot.set_attribute(f"{prefix}_batch_dims", _braces(perm[d] for d in batch))
                dot.set_attribute(f"{prefix}_contracting_dims", _braces(perm[d] for d in contracting))
                dot.replace_operand(side, t.operands[0])
                if not t.users and t is not comp.root:  # HloDCE
                    comp.remove_instruction(t)
                changed = True
            if changed:
                done.append(dot.name)
    return done
