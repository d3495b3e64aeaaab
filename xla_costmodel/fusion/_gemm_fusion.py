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
- a cuBLAS call (`__cublas$gemm`, `GemmRewriter`) when Triton cannot emit it (complex types,
  non-default operand precisions; not checked against XLA's dumps yet);
- nothing, when it is tiny (`IsMatrixMultiplicationTooSmallForRewriting`: (M + N) * K under
  `xla_gpu_gemm_rewrite_size_threshold` = 100 and an f16/bf16/f32 output: the classical emitter
  runs it inside a loop fusion), or when one side has no non-contracting dimension (a vector: the
  simplifier's dot strength reduction makes it a multiply and a reduce).

Not simulated: dimension-order propagation (`triton_tiling_propagation.cc`), which refuses some
reshapes and transposes that split or merge a tiled dimension (here every reshape and transpose is
taken); the concatenate divisibility by 64 is checked, not which dimension it joins; dot merging
(`dot-merger`), `dot_decomposer` (several contracting or batch dimensions), the split-K rewriter,
and GemmRewriter's epilogues (bias, alpha) on cuBLAS calls.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass

from ..analysis.opcodes import is_elementwise
from ..hlo import HloInstruction, HloModule
from ..hlo.editing import NameUniquifier
from ..fusion_engine import fuse, make_fusion

__all__ = ["GEMM_REWRITE_SIZE_THRESHOLD", "GemmRewrite", "rewrite_gemms", "triton_gemm_backend_config"]

#: `xla_gpu_gemm_rewrite_size_threshold`: a dot with (M + N) * K under it stays a dot.
GEMM_REWRITE_SIZE_THRESHOLD = 100
#: `TritonFusionAnalysis::kMaxParameterPerDotOperand`
MAX_PARAMETERS_PER_OPERAND = 4
#: `kIoToleranceBytes` of `triton_tiling_propagation.cc`
IO_TOLERANCE_BYTES = 1024
# `kMinConcatFragmentSize`: a concatenate whose operands are not all multiples of it along the joined dimension
MIN_CONCAT_FRAGMENT = 64

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
    with it (operand producers and epilogue); `reason`: why cuBLAS and not Triton (empty for Triton).
    """

    kind: str
    instruction: str
    fusion: str
    absorbed: tuple[str, ...] = ()
    reason: str = ""


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
        else:
            precision = str(dot.raw_attributes.get("operand_precision", "")).strip("{}").split(",")
            if any(str(p).strip().lower() not in ("", "default") for p in precision):
                return "non-default operand precision"
        out, lhs, rhs = dot.shape.element_type, dot.operands[0].shape.element_type, dot.operands[1].shape.element_type
        if out not in self.dot_outputs:
            return f"{out} output"
        if lhs not in self.types or rhs not in self.types:
            return f"{lhs} x {rhs} inputs"
        if out == "s32" and not (lhs in ("s8", "u8") and rhs in ("s8", "u8")):
            return "s32 output of non-8-bit inputs"
        # `CanTritonHandleGEMM` refuses several batch dimensions, but `dot_decomposer` has merged them
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
    """`IsOutputWorthFusing`: the root, or writes at most 1 KiB more than it reads."""
    if any(o.shape.is_tuple for o in h.operands):
        return False
    comp = h.computation
    if comp is not None and h is comp.root:
        return True
    return sum(_bytes(o) for o in h.operands) - _bytes(h) >= -IO_TOLERANCE_BYTES


class _Planner:
    def __init__(self, support: _Support):
        self.support = support

    def propagates(self, h) -> bool:
        """What dimension-order propagation refuses, as far as simulated (see the module docstring)."""
        if h.opcode == "concatenate":
            dim = _ints(h, "dimensions")
            if len(dim) != 1:
                return False
            return all(o.shape.dims[dim[0]] % MIN_CONCAT_FRAGMENT == 0 for o in h.operands)
        return True

    def fusible_as_input(self, h) -> bool:
        """`GetPropagatedDimOrdersAndRequirementsIfProfitablyFusible`, output to input."""
        if h.opcode in _NOT_FUSED or h.shape.is_tuple:
            return False
        if self.support.instruction(h) or not self.propagates(h):
            return False
        if is_elementwise(h) and len(h.operands) == 2:
            for o in h.operands:
                if (o.opcode == "broadcast" and _relabel_source(o.operands[0]).opcode in ("parameter", "constant")
                        and self.fusible_as_input(o)):
                    return True
        return _input_worth_fusing(h)

    def fusible_as_output(self, h, src) -> bool:
        """The same, input to output, for `h` reading `src` (its first operand `src` is skipped)."""
        if h.opcode in _NOT_FUSED or h.shape.is_tuple or h.opcode in ("parameter", "concatenate"):
            return False
        if not (is_elementwise(h) or h.opcode in _DATA_MOVEMENT):
            return False
        if self.support.instruction(h) or not self.propagates(h):
            return False
        skipped = False
        for o in h.operands:
            if o is src and not skipped:
                skipped = True
                continue
            if o.opcode == "broadcast" and (not o.operands[0].shape.dims or _is_effective_parameter(o.operands[0])):
                continue
            if _is_effective_parameter(o):
                continue
            return False
        return _output_worth_fusing(h)

    def toward_operands(self, root, max_params: int | None) -> list:
        """`BuildFusionPlanTowardOperands`: the instructions to fuse, users before operands."""
        seen = {root}
        inputs = {root}
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
            if h.opcode == "parameter" or not self.fusible_as_input(h):
                continue
            inputs.discard(h)
            for o in h.operands:
                if o not in seen:
                    seen.add(o)
                    inputs.add(o)
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


def _make_triton_gemm(dot, planner: _Planner, names: NameUniquifier) -> GemmRewrite:
    """`CreateDotFusion` and the visitor's replacement, through the fusion engine's in-place edits."""
    dot_name = dot.name
    plans = [planner.toward_operands(o, MAX_PARAMETERS_PER_OPERAND) for o in dot.operands]
    fusion = make_fusion(dot, "kCustom", names=names)
    absorbed: list[str] = []

    def absorb(plan):
        for h in plan:
            if h in fusion.operands:  # a producer reached twice is fused once
                absorbed.append(h.name)
                fuse(h, fusion, "kCustom", names=names)

    for plan in plans:
        absorb(plan)
    # toward the users: a chain of single users
    while len(fusion.users) == 1 and fusion is not fusion.computation.root:
        user = fusion.users[0]
        if not planner.fusible_as_output(user, fusion):
            break
        others = [o for o in user.operands if o is not fusion]
        absorbed.append(user.name)
        fusion = fuse(fusion, user, "kCustom", names=names)
        for o in others:
            if o in fusion.operands:
                absorb(planner.toward_operands(o, None))
    fusion.set_attribute("backend_config", triton_gemm_backend_config())
    return GemmRewrite("triton-gemm", dot_name, fusion.name, tuple(absorbed))


def rewrite_gemms(module: HloModule, compute_capability: tuple[int, int] = (9, 0)) -> list[GemmRewrite]:
    """Rewrite, in place, every `dot` of `module`'s non-fusion computations as XLA:GPU does before
    fusion for a GPU of `compute_capability` (see the module docstring): a Triton GEMM fusion, a cuBLAS
    call, or (tiny or matrix-vector) left as it is.

    **Returns:** one `GemmRewrite` per dot rewritten, in the order the dots were visited. A module
    already through XLA's GEMM rewriting (its dots are those XLA left) should not be given to it.
    """
    support = _Support(compute_capability)
    planner = _Planner(support)
    names = NameUniquifier(module)
    done: list[GemmRewrite] = []
    # `MakeNonfusionNoncompositeComputations`: fusion bodies are left out
    bodies = {id(i.fused_computation) for _, i in module.instructions() if i.opcode == "fusion"}
    for comp in list(module.computations):
        if id(comp) in bodies:
            continue
        dots = [i for i in comp.instructions if i.opcode == "dot" and len(i.operands) == 2]
        for dot in dots:
            if not _has_non_contracting(dot):
                continue  # the simplifier's dot strength reduction: not a GEMM
            m, n, k = _sizes(dot)
            if (m + n) * k < GEMM_REWRITE_SIZE_THRESHOLD and dot.shape.element_type in ("f16", "bf16", "f32"):
                continue
            why = support.dot(dot)
            if why:
                done.append(_replace_by_cublas(dot, why, names))
            else:
                done.append(_make_triton_gemm(dot, planner, names))
    return done

