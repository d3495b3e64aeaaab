"""XLA:GPU's `SoftmaxRewriterTriton`, simulated: normalization diamonds made generic Triton fusions
before priority fusion.

On Ampere and later XLA:GPU runs it after layout normalization, the simplifier, CSE
and DCE, and before the reduction splitters and priority fusion
(`gpu_compiler.cc`, `only_fuse_if_profitable=true`). It

1. matches, in every non-fusion computation not called by a custom call, in post
   order, each *closed reduction diamond* (`MatchesTritonCompatibleClosedReductionDiamond`):
   a root that is an elementwise binary Triton emits whose operand 1 leads, through
   trivially fusible instructions, to a broadcast (not along the last dimension, one
   use) of a reduce (one use, Triton-supported, over the last dimension only, its
   init a constant or a convert of one) whose operand leads, again through trivially
   fusible instructions, to a producer that root's operand 0 reaches the same way
   (and that operand has one user unless it is the producer). *Trivially fusible*
   (`IsTriviallyFusible`): at most one user, default layout, and a bitcast, an
   elementwise unary Triton emits, or an elementwise binary Triton emits whose
   operands are the same or exactly one of which is a splat (a broadcast of a scalar
   constant or of a parameter); the chain follows the operand that is not a splat;
2. makes each a fusion (`MakeFusionForDiamond`): everything the root reaches through
   its operands, stopped at the producer and at parameters (those become the
   fusion's operands, the producer first);
3. keeps it, last matched first, when the tiled model finds a tiling
   (`TryFindBestTilingForFusion`: symbolic tile analysis, Triton's constraints, the
   fastest tiling) and that tiling's run time (no launch) is not above the time of the
   same instructions fused without it (`EstimateOptimizedHloRunTimeWithoutSoftMaxRewriterTriton`:
   the diamond alone as a module, reductions split, XLA's fusion pipeline run, each
   kernel's run time by XLA's GPU model, no launch, summed). A kept diamond is a
   `kCustom` fusion with backend kind `__triton` and its tiling as block-level
   parameters, which priority fusion then grows (`fusion._triton_fusion`).

XLA:GPU also runs `FusionBlockLevelRewriter` by default (in its `fusion-dispatch-pipeline`,
after scheduling; `xla_gpu_experimental_enable_fusion_block_level_rewriter` makes it try every
fusion), but only on loop fusions whose root is a slow transpose of a parameter and on s32
reduction fusions, which it turns into Triton fusions of the same instructions. It changes no
kernel count, so it is not simulated here. (Measured: jaxlib 0.10.2's deviceless compile for
h100-sxm leaves f32 row-reduction fusions native; in the H100 capture, made with jax 0.11.2 on
the device, about 340 of its 388 generic Triton kernels are such renamed native fusions:
`input_reduce_fusion`, `loop_reduce_fusion`, `wrapped_transpose`, `input_transpose_fusion`, ...;
about 50 come from this rewriter's diamonds.)

Facts after XLA's `xla/service/gpu/transforms/softmax_rewriter_triton.cc`; the code is ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..analysis.opcodes import IS_ELEMENTWISE
from ..analysis.tiling import TilingError
from ..fusion_engine import discard_module, fuse, make_fusion
from ..hlo import HloComputation, HloInstruction, HloModule, parse_hlo
from ..hlo.editing import NameUniquifier, clone_instruction
from ._simplify import simplify
from ._triton_fusion import _instruction_support, triton_backend_config

__all__ = ["NormalizationFusion", "rewrite_normalizations"]


@dataclass(frozen=True)
class NormalizationFusion:
    """One diamond `SoftmaxRewriterTriton` matched: its `root` and `producer` (names in
    `computation`), the tiled model's best tiling (`tiles`, `num_warps`, run time `tiled_s`), the
    run time of its instructions fused without it (`unfused_s`), and `fusion`: the Triton fusion
    made (empty when not kept; `reason` says why)."""

    computation: str
    instruction: str  # the diamond's root
    producer: str
    fusion: str
    tiles: tuple = ()
    num_warps: int = 0
    tiled_s: float = float("nan")
    unfused_s: float = float("nan")
    reason: str = ""
    kind: str = "triton-softmax"


# -- matching ------------------------------------------------------------------------------


def _default_layout(instr: HloInstruction) -> bool:
    """`HasDefaultLayout`: the layout is major-to-minor (no layout: the default)."""
    shape = instr.shape
    if not shape.is_array:
        return False
    return shape.layout is None or tuple(shape.minor_to_major) == tuple(range(shape.rank - 1, -1, -1))


def _supported(instr: HloInstruction) -> bool:
    return _instruction_support(instr) == ""


def _elementwise(instr: HloInstruction) -> bool:
    return instr.opcode in IS_ELEMENTWISE


def _splat(instr: HloInstruction) -> bool:
    """`IsBroadcastOfScalarConstant || IsBroadcastOfParameter`."""
    if instr.opcode != "broadcast" or not instr.operands:
        return False
    op = instr.operands[0]
    return op.opcode == "parameter" or (op.opcode == "constant" and op.shape.is_array and op.shape.rank == 0)


def _trivially_fusible(instr: HloInstruction, allowed_users: int = 1) -> bool:
    """`IsTriviallyFusible`: reads and writes no more memory fused, fits any tiling, Triton emits it."""
    if len(instr.users) > allowed_users or not _default_layout(instr):
        return False
    if instr.opcode == "bitcast":
        return True
    if _elementwise(instr) and len(instr.operands) == 1:
        return _supported(instr)
    if _elementwise(instr) and len(instr.operands) == 2:
        a, b = instr.operands
        if a is b or (_splat(a) != _splat(b)):
            return _supported(instr)
    return False


def _operand_to_follow(instr: HloInstruction) -> HloInstruction:
    """`ChooseOperandForFusionProcessing`: the first operand that is not a splat."""
    if len(instr.operands) > 1 and _splat(instr.operands[0]):
        return instr.operands[1]
    return instr.operands[0]


def _trivial_edge(consumer: HloInstruction, opcode: str) -> HloInstruction | None:
    """`TrivialEdge`: the instruction of `opcode` reached from `consumer` through trivially fusible ones."""
    while consumer.opcode != opcode:
        if not _trivially_fusible(consumer):
            return None
        consumer = _operand_to_follow(consumer)
    return consumer


def _trivially_connected(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """`IsTriviallyConnectedProducerOf`."""
    if producer is consumer:
        return True
    while True:
        found = _trivial_edge(consumer, producer.opcode)
        if found is None:
            return False
        if found is producer:
            return True
        if not _trivially_fusible(found):
            return False
        consumer = found.operands[0]


def match_diamond(root: HloInstruction) -> HloInstruction | str:
    """`MatchesTritonCompatibleClosedReductionDiamond(root)`: the diamond's producer, or why not."""
    if not (_elementwise(root) and len(root.operands) == 2):
        return "Root is not elementwise binary."
    if not _supported(root):
        return "Root is not supported for Triton instruction."
    broadcast = _trivial_edge(root.operands[1], "broadcast")
    if broadcast is None:
        return "Could not find a trivial connection from root to a broadcast."
    reduce = _trivial_edge(broadcast.operands[0], "reduce")
    if reduce is None:
        return "Could not find a trivial connection from matched broadcast to a reduction."
    if not (_default_layout(broadcast) and _default_layout(reduce)):
        return "Broadcast or reduce have non-default layouts."
    why = _instruction_support(reduce)
    if why:
        return why
    dims = tuple(reduce.attribute("dimensions", ()))
    if len(dims) != 1 or int(dims[0]) != reduce.operands[0].shape.rank - 1:
        return ("The reductions in the diamond must reduce 1 dimension and that dimension must be the last "
                "dimension of the operand.")
    init = reduce.operands[1]
    if not (init.opcode == "constant" or (init.opcode == "convert" and init.operands[0].opcode == "constant"
                                          and _supported(init))):
        return "Reduction identity is not a constant or a supported convert of a constant."
    if len(broadcast.users) != 1 or len(reduce.users) != 1:
        return "More than one use of broadcast or reduce."
    if broadcast.shape.rank - 1 in tuple(int(d) for d in broadcast.attribute("dimensions", ())):
        return "Broadcast is not along the reduction dimension."
    producer = reduce.operands[0]
    while _trivially_fusible(producer):
        producer = _operand_to_follow(producer)
    if not _default_layout(producer):
        return "Producer has non-default layout."
    if not _trivially_connected(producer, root.operands[0]):
        return "Producer is not trivially connected."
    if producer is not root.operands[0] and len(root.operands[0].users) != 1:
        return "Unsupported root-producer connection."
    return producer


def _diamond_members(root: HloInstruction, producer: HloInstruction) -> list[HloInstruction]:
    """What `MakeFusionForDiamond` clones: everything `root` reaches, stopped at `producer` and at
    parameters, operands before users (the fusion's operands are left out)."""
    order: list[HloInstruction] = []
    seen: set[int] = set()
    stack = [(root, False)]
    while stack:
        instr, expanded = stack.pop()
        if expanded:
            order.append(instr)
            continue
        if id(instr) in seen or instr is producer or instr.opcode == "parameter":
            continue
        seen.add(id(instr))
        stack.append((instr, True))
        for op in reversed(instr.operands):
            if id(op) not in seen:
                stack.append((op, False))
    return order


def _fusion_operands(members: list[HloInstruction], producer: HloInstruction) -> list[HloInstruction]:
    """The diamond fusion's operands in XLA's order: the producer, then parameters as reached."""
    inside = {id(m) for m in members}
    out = [producer]
    for m in members:
        for op in m.operands:
            if id(op) not in inside and all(op is not o for o in out):
                out.append(op)
    return out


# -- the diamond on its own -----------------------------------------------------------------


def _called(instr: HloInstruction) -> list[tuple[str, HloComputation]]:
    return [(key, value) for key, value in instr.attributes.items() if isinstance(value, HloComputation)]


def diamond_module_text(members: list[HloInstruction], operands: list[HloInstruction]) -> str:
    """The diamond as a module of its own (XLA's `ExtractComputationIntoNewModule` of the fused body):
    its operands parameters, instructions and reducers renamed by position, so that equal diamonds
    give equal text."""
    module = HloModule("triton_softmax")
    mapping: dict[int, HloInstruction] = {}
    entry = HloComputation("main")
    for n, op in enumerate(operands):
        p = HloInstruction(f"p{n}", "parameter", op.shape, parameter_number=n)
        mapping[id(op)] = p
        entry.add_instruction(p)
    reducers: dict[int, HloComputation] = {}
    for n, m in enumerate(members):
        clone = clone_instruction(m, [mapping[id(o)] for o in m.operands], name=f"i{n}")
        for key, callee in _called(m):
            if id(callee) not in reducers:
                reducers[id(callee)] = _copy_reducer(callee, f"r{len(reducers)}", module)
            clone.set_attribute(key, reducers[id(callee)])
        if clone.has_attribute("metadata"):
            clone.remove_attribute("metadata")
        mapping[id(m)] = clone
        entry.add_instruction(clone)
    entry.root = mapping[id(members[-1])]
    module.add_computation(entry)
    module.entry = entry
    entry.is_entry = True
    text = module.to_text()
    discard_module(module)  # built to be printed only
    return text


def _copy_reducer(comp: HloComputation, name: str, module: HloModule) -> HloComputation:
    new = HloComputation(name)
    mapping: dict[int, HloInstruction] = {}
    for n, instr in enumerate(comp.post_order()):
        if _called(instr):
            raise TilingError(f"reducer '{comp.name}' calls other computations")
        clone = clone_instruction(instr, [mapping[id(o)] for o in instr.operands], name=f"{name}.{n}")
        if clone.has_attribute("metadata"):
            clone.remove_attribute("metadata")
        mapping[id(instr)] = clone
        new.add_instruction(clone)
    new.instructions.sort(key=lambda i: 0 if i.opcode == "parameter" else 1)
    new.root = mapping[id(comp.root)]
    module.add_computation(new)
    return new


def _fuse_members(root: HloInstruction, members: list[HloInstruction], names=None) -> HloInstruction:
    """Make `members` (operands before users, `root` last) one `kCustom` fusion in place."""
    fusion = make_fusion(root, "kCustom", names=names)
    for m in reversed(members[:-1]):
        fusion = fuse(m, fusion, "kCustom", names=names)
    return fusion


# -- the pass --------------------------------------------------------------------------------


def _computations(module: HloModule) -> list[HloComputation]:
    """`MakeNonfusionNoncompositeComputations`, less those a custom call calls."""
    skip: set[int] = set()
    for _, instr in module.instructions():
        if instr.opcode in ("fusion", "custom-call"):
            skip.update(id(c) for c in instr.called_computations)
    return [c for c in module.computations if id(c) not in skip]


def simplify_for_matching(module: HloModule) -> int:
    """What of XLA's `AlgebraicSimplifier` (run right before the rewriter) the matching needs: the
    rules of `fusion._simplify` that replace an instruction by what it forwards (identity broadcasts
    and tuple elements read back, left in, break a chain from a broadcast to its reduce; a maximum
    with -inf, left in, puts one more op in the diamond's body than XLA's, which can change its best
    tiling), and what they leave unread. A no-op after `simulate_fusion(simplify=True)`.
    **Returns:** how many instructions were replaced or removed."""
    result = simplify(module, rules="forward")
    return sum(result.rewritten.values()) + result.removed


def rewrite_normalizations(module: HloModule, device, unfused_s: Callable[[HloModule], float], *,
                           names: NameUniquifier | None = None,
                           cache: dict | None = None) -> list[NormalizationFusion]:
    """Run `SoftmaxRewriterTriton` on `module`, in place.

    **Arguments:** `device`, a GPU `DeviceSpec`; `unfused_s(diamond_module)`: the run time of a
    diamond's module (its own, parsed afresh) fused as XLA:GPU fuses it without this pass, launches
    left out; `names`: the module's `NameUniquifier`; `cache`: decisions by diamond text, kept
    between calls (repeated layers are decided once).

    **Returns:** one `NormalizationFusion` per matched diamond, fused or not, in match order.
    """
    from ..models.pricing import best_tilings

    cache = {} if cache is None else cache
    simplify_for_matching(module)
    diamonds = []
    for comp in _computations(module):
        for instr in comp.post_order():
            found = match_diamond(instr)
            if isinstance(found, HloInstruction):
                diamonds.append((comp, instr, found))
    out = []
    for comp, root, producer in reversed(diamonds):
        if root.computation is not comp or producer.computation is not comp:
            continue  # an earlier (later matched) diamond took it
        members = _diamond_members(root, producer)
        operands = _fusion_operands(members, producer)
        text = diamond_module_text(members, operands)
        decision = cache.get(text)
        if decision is None:
            decision = cache[text] = _decide(text, device, unfused_s, best_tilings)
        tiles, warps, tiled, unfused, reason = decision
        name = ""
        if not reason:
            fusion = _fuse_members(root, members, names)
            fusion.set_attribute("backend_config", triton_backend_config(tiles, warps))
            name = fusion.name
        out.append(NormalizationFusion(comp.name, root.name, producer.name, name, tiles, warps, tiled, unfused,
                                       reason))
    out.reverse()
    return out


def _decide(text: str, device, unfused_s, best_tilings) -> tuple:
    """`(tiles, warps, tiled_s, unfused_s, reason)` for a diamond's module text (`reason` empty: fuse)."""
    alone = parse_hlo(text)
    members = [i for i in alone.entry.post_order() if i.opcode != "parameter"]
    fusion = _fuse_members(alone.entry.root, members)
    try:
        best = best_tilings(fusion, device, top_k=1)[0]
    except TilingError as e:
        return (), 0, float("nan"), float("nan"), f"SymbolicTileAnalysis failed: {e}"
    finally:
        # the per-body caches that fusing and tiling filled would keep it alive, its cycles linger
        discard_module(alone)
    diamond = parse_hlo(text)
    without = unfused_s(diamond)
    discard_module(diamond)
    if without < best.exec_s:
        return (best.tiles, best.num_warps, best.exec_s, without,
                "Run time estimate for without applying the custom normalization rewrite is faster.")
    return best.tiles, best.num_warps, best.exec_s, without, ""
