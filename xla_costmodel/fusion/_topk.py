"""XLA:GPU's TopK passes before fusion: a `topk` becomes a sort of (values, iota) and two slices, unless
XLA:GPU runs it as its own `__gpu$TopK` kernel.

XLA:GPU (openxla/xla, `gpu_compiler.cc`, read for these rules):

1. `RunPreSPMDPartitionerPasses`: `TopkDecomposer` (predicate: every `kTopK`) writes `sort(x, iota)` with a
   `compare-greater-than` comparator (`largest=false`: less-than) along the last dimension and a `slice` of
   the first `k` of each result; `TopkRewriter` (predicate: always) turns that sort and slices back into a
   `custom-call` "TopK".
2. `RunOptimizationPasses`: `TopKSplitter`, `TopkSpecializer`, `TopkDecomposer`. `TopkSpecializer`
   (`backends/gpu/transforms/topk_specializer.cc`, `SmallBufferOptimization`) makes the "TopK" call
   `__gpu$TopK` (one kernel) when the input is f32 or bf16 of rank 1 or 2, `k <= 16`, `n >= 1024` (the last
   dimension) and `k / n < 0.85`; `TopkDecomposer` turns every other "TopK" call back into the sort and the
   two slices. `SortIotaFusion` later takes the iota into the sort (`fusion._sort_iota`) and priority fusion
   fuses neither slice into the sort (a sort is no producer it fuses): three kernels instead of one.

Checked against XLA's own module before priority fusion (deviceless compile, jax 0.10.2):
`lax.top_k(f32[32,512], 8)` becomes the sort and two slices, `lax.top_k(f32[4,65536], 8)` stays one
`__gpu$TopK` call (tests/test_topk_scatter_rewrite.py). Not modelled: the RAFT `select_k` path for unstable
top_k (`is_stable=false` on CUDA in newer XLA: `min_n = 1`, `max_k = 128`) and `TopKSplitter`'s split of
very long rows; a topk this pass keeps stays the single kernel it was before.

Facts after XLA's passes named above; the code is ours.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hlo import HloComputation, HloInstruction, HloModule, Shape

__all__ = ["TopkDecomposition", "decompose_topks", "gpu_topk_kernel", "sort_iotas_as_iotas"]

_GPU_TOPK_TYPES = ("f32", "bf16")
_GPU_TOPK_MAX_K = 16
_GPU_TOPK_MIN_N = 1024
_GPU_TOPK_MAX_RATIO = 0.85


@dataclass(frozen=True)
class TopkDecomposition:
    """One `topk` written as XLA:GPU's sort and slices (a row of `FusionResult.pre_fusion_rewrites`):
    `computation`, the `instruction` replaced, the `sort` and the two `slices` made; `kind` names the rewrite
    among the rows of other passes."""

    computation: str
    instruction: str
    sort: str
    slices: tuple[str, str]
    kind: str = "topk-sort"


def gpu_topk_kernel(topk: HloInstruction) -> bool:
    """Whether XLA:GPU runs `topk` as its `__gpu$TopK` kernel (`TopkSpecializer`'s `SmallBufferOptimization`),
    rather than as a sort and two slices."""
    x = topk.operands[0].shape
    if x.element_type not in _GPU_TOPK_TYPES or x.rank not in (1, 2):
        return False
    n, k = x.dims[-1], int(topk.attribute("k"))
    return k <= _GPU_TOPK_MAX_K and n >= _GPU_TOPK_MIN_N and k / n < _GPU_TOPK_MAX_RATIO


def _row_major(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


def _comparator(module: HloModule, element_type: str, largest: bool) -> HloComputation:
    """`TopkDecomposer`'s comparator: a total-order compare of the two keys (GT for largest)."""
    scalar = Shape.array(element_type, [])
    lhs = HloInstruction(module.unique_name("p.0.lhs"), "parameter", scalar, parameter_number=0)
    rhs = HloInstruction(module.unique_name("p.0.rhs"), "parameter", scalar, parameter_number=1)
    idx = Shape.array("s32", [])
    p2 = HloInstruction(module.unique_name("p.1.lhs"), "parameter", idx, parameter_number=2)
    p3 = HloInstruction(module.unique_name("p.1.rhs"), "parameter", idx, parameter_number=3)
    cmp = HloInstruction(module.unique_name("compare"), "compare", Shape.array("pred", []), [lhs, rhs])
    cmp.set_attribute("direction", "GT" if largest else "LT")
    if element_type[0] in "fb":  # f16/f32/f64/bf16: total order (NaNs sorted); integers: their default type
        cmp.set_attribute("type", "TOTALORDER")
    name = module.unique_name("compare-greater-than" if largest else "compare-less-than")
    comp = HloComputation(name, [lhs, rhs, p2, p3, cmp], root=cmp)
    return module.add_computation(comp, before=module.entry)


def _decompose(module: HloModule, comp: HloComputation, topk: HloInstruction) -> TopkDecomposition | None:
    gtes = list(topk.users)
    if any(u.opcode != "get-tuple-element" for u in gtes) or topk is comp.root:
        return None  # (a topk is always read through its get-tuple-elements)
    x = topk.operands[0]
    rank, dims, k = x.shape.rank, list(x.shape.dims), int(topk.attribute("k"))
    largest = str(topk.attribute("largest", True)).lower() not in ("false", "0")

    def add(prefix, opcode, shape, operands, **attributes):
        instr = HloInstruction(module.unique_name(prefix), opcode, shape, list(operands))
        for key, value in attributes.items():
            instr.set_attribute(key, value)
        comp.add_instruction(instr, before=topk)
        return instr

    layout = _row_major(rank)
    iota = add("iota", "iota", Shape.array("s32", dims, layout), [], iota_dimension=str(rank - 1))
    sort_shape = Shape.tuple_of([Shape.array(x.shape.element_type, dims, layout), Shape.array("s32", dims, layout)])
    sort = add("sort", "sort", sort_shape, [x, iota], dimensions="{" + str(rank - 1) + "}", is_stable="true")
    sort.set_attribute("to_apply", _comparator(module, x.shape.element_type, largest))
    text = "{" + ", ".join(f"[0:{d}]" for d in dims[:-1]) + (", " if rank > 1 else "") + f"[0:{k}]" + "}"
    slices = []
    for index, t in enumerate((x.shape.element_type, "s32")):
        gte = add("get-tuple-element", "get-tuple-element", sort_shape.tuple_shapes[index], [sort], index=str(index))
        slices.append(add("slice", "slice", Shape.array(t, dims[:-1] + [k], layout), [gte], slice=text))
    for gte in gtes:
        gte.replace_all_uses_with(slices[int(gte.attribute("index"))])
        comp.remove_instruction(gte)
    comp.remove_instruction(topk)
    return TopkDecomposition(comp.name, topk.name, sort.name, (slices[0].name, slices[1].name))


def decompose_topks(module: HloModule) -> list[TopkDecomposition]:
    """Write every `topk` of `module`'s non-fusion computations that XLA:GPU does not run as `__gpu$TopK`
    (`gpu_topk_kernel`) as XLA's sort of (values, iota) and two slices, in place (module docstring).
    **Returns:** one `TopkDecomposition` per topk rewritten."""
    fused = {i.fused_computation for c in module.computations for i in c.instructions if i.opcode == "fusion"}
    done = []
    for comp in [c for c in module.computations if c not in fused]:
        for topk in [i for i in comp.instructions if i.opcode == "topk"]:
            if gpu_topk_kernel(topk):
                continue
            row = _decompose(module, comp, topk)
            if row is not None:
                done.append(row)
    return done


def sort_iotas_as_iotas(module: HloModule) -> int:
    """Make every sort operand that is a `broadcast` of an `iota` an iota of the broadcast's shape (along the
    dimension the iota's went to), as XLA's `AlgebraicSimplifier` does (`HandleBroadcast`) long before
    `SortIotaFusion`, which then takes it into the sort (`fusion._sort_iota`): `jnp.argsort` lowers its
    indices as such a broadcast. Only sort operands: elsewhere the rule changes no kernel (the broadcast
    fuses into its reader either way); `simplify=True` applies it everywhere. **Returns:** how many."""
    n = 0
    for comp in module.computations:
        for sort in [i for i in comp.instructions if i.opcode == "sort"]:
            for index, op in enumerate(list(sort.operands)):
                if op.opcode != "broadcast" or not op.operands or op.operands[0].opcode != "iota":
                    continue
                dims = op.attribute("dimensions")
                dim = tuple(dims)[int(op.operands[0].attribute("iota_dimension"))]
                iota = HloInstruction(module.unique_name("iota"), "iota", op.shape, [])
                iota.set_attribute("iota_dimension", str(dim))
                comp.add_instruction(iota, before=sort)
                sort.replace_operand(index, iota)
                if not op.users and op is not comp.root:
                    comp.remove_instruction(op)
                n += 1
    return n
