"""XLA:GPU's multi-output fusion, the pass it runs right after priority fusion.

What `MultiOutputFusion` (`transforms/multi_output_fusion.cc`) does with the rules of
`gpu_fusible.cc`, over our HLO graph:

- Computations are those priority fusion works on (`fusible_computations`); in each, producers
  are visited in reverse post-order (users first), constants and custom fusions skipped.
- **Siblings first, no cost model.** The users of the producer (the "parent"; not an effective
  scalar) that can be the root of a multi-output fusion (`is_sibling_candidate`) are stably
  sorted multi-output fusions first, then fusions, then the rest; each fusion among them
  absorbs every later sibling that is not connected to it, has a compatible loop shape
  (`shapes_compatible`), reads a different slice of a large parent, is no dynamic-update-slice
  fusion and fits the budget. Absorbing an input fusion makes the result kInput.
- **Then producer→consumer.** A producer that may be an output of a multi-output fusion
  (`producer_rejection`), with more than one user (or one multi-output user), goes into the
  first of its best-ranked consumers (same ranking) that can be a multi-output root, has a
  compatible loop shape, reads no other operand that depends on the producer, fits the budget
  and the IR size, and where the model says the fusion is no slower
  (`EstimateRunTimesForMultiOutputFusion`: the fused kernel also writes the producer's output).
  A consumer that is not a fusion is wrapped in one first (kInput when either side is
  input-fusible).
- Reachability is recomputed after every merge, as XLA does.

The merged fusion keeps the name of the fusion that absorbs the other, its outputs first; users
read each output through a `get-tuple-element`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..analysis.emission import (
    fusion_pass_find_hero,
    fusion_pass_is_intermediate,
    fusion_pass_is_real_reduction_hero,
    fusion_pass_is_tiled_transpose,
    fusion_pass_roots,
    is_contiguous_reduction,
    normalized_transpose,
    reduction_dimensions,
)
from ..analysis.opcodes import is_elementwise
from ..analysis.shapes import reshape_is_bitcast, transpose_is_bitcast
from ..hlo import HloComputation, HloInstruction, Shape
from ..hlo.editing import NameUniquifier, is_deferred, replay
from ..fusion_engine import FusedBodyBuilder, discard_fusion, make_fusion, operands_first, select_in_body
from ._in_place import _in_place_operands
from ._legality import LegalityChecker, hlo_is_fusible
from ._rejection import Rejection

__all__ = [
    "MULTI_OUTPUT_RULES",
    "EstimatesMultiOutputFusion",
    "MultiOutputFusionPass",
    "MultiOutputStep",
    "is_fusible_as_multi_output_root",
    "is_multi_output_fusion",
    "producer_rejection",
    "shapes_compatible",
]

# Why a pair was not multi-output fused (XLA's `FusionDecision` texts, shortened), by rule name.
MULTI_OUTPUT_RULES: dict[str, str] = {
    "connected": "one sibling depends on the other",
    "different-loop-shapes": "the two kernels do not share one parallel loop",
    "reductions-differ": "tiled reductions with different shapes",
    "transposes-differ": "tiled transposes with different shapes",
    "transpose-and-reduction": "a tiled transpose and a tiled reduction in one kernel",
    "transpose-untiled": "the tiled transpose would become untiled",
    "slices-disjoint": "the siblings read non-overlapping slices of their large common operand",
    "dynamic-update-slice": "a dynamic-update-slice fusion is never sibling-fused",
    "not-multi-output-root": "the consumer cannot be the root of a multi-output fusion",
    "cycle": "another operand of the consumer depends on the producer",
    "slower": "the model says the multi-output fusion would be slower",
    "unpriced": "the model could not price the fusion",
    # FusionFitsInBudget and ProducerConsumerMergedTooLarge: the rules of `_rejection.RULES`
    "shared-memory": "shared memory of the fusion would exceed the per-block budget",
    "unnested-reductions": "more than 8 unnested (tiled) reductions in one fusion",
    "operand-limit": "more than 96 operands and outputs",
    "code-size": "the fusion would be too large (IR size above 10,000)",
}


@runtime_checkable
class EstimatesMultiOutputFusion(Protocol):
    """A cost model with its own price for a multi-output fusion (XLA's
    `EstimateRunTimesForMultiOutputFusion`): `consumer` absorbs `producer` and also writes the
    producer's output. Without it, the merged kernel is built detached and priced with `estimate`."""

    def estimate_multi_output_fusion(self, producer: HloInstruction, consumer: HloInstruction, device): ...


@dataclass(frozen=True, slots=True)
class MultiOutputStep:
    """One merge of the pass: `kind` "sibling" (`fused` absorbed by `into`, both reading `parent`)
    or "producer-consumer" (`fused`, the producer, kept as an output of `into`, its consumer);
    `fusion`: the resulting multi-output fusion; the model's prices (NaN for siblings: no model)."""

    computation: str
    kind: str
    parent: str
    into: str
    fused: str
    fusion: str
    time_unfused_s: float = math.nan
    time_fused_s: float = math.nan
    fused_opcode: str = ""


# ---------------------------------------------------------------------------
# The rules of gpu_fusible.cc


def is_multi_output_fusion(instr: HloInstruction) -> bool:
    """A fusion whose root is a tuple (`IsMultiOutputFusion`)."""
    body = instr.fused_computation
    return body is not None and body.root is not None and body.root.opcode == "tuple"


def _is_custom_fusion(instr: HloInstruction) -> bool:
    return instr.opcode == "fusion" and instr.fusion_kind == "kCustom"


def _inside(instr: HloInstruction):
    comp = instr.computation
    return lambda x: x.computation is comp and x.opcode != "parameter"


# The opcodes a tiled-transpose hero and a concatenate hero can have (`fusion_pass_find_hero`'s searches).
_TRANSPOSE_OPCODES = frozenset({"transpose", "copy"})
_CONCATENATE = frozenset({"concatenate"})


def _hero(instr: HloInstruction) -> HloInstruction:
    """`FindNonTrivialHero` of an instruction inside a fused body (itself at the top level)."""
    comp = instr.computation
    if comp is None or comp.is_entry:
        return fusion_pass_find_hero(instr, _inside(instr))
    # A search for a hero whose opcode the body lacks walks the body's intermediate ops to find
    # nothing: skipped (`select_in_body` answers per body, through its growths).
    return fusion_pass_find_hero(instr, _inside(instr), transposes=bool(select_in_body(comp, _TRANSPOSE_OPCODES)),
                                 concats=bool(select_in_body(comp, _CONCATENATE)))


def _tiled_transpose_hero(instr: HloInstruction) -> bool:
    return fusion_pass_is_tiled_transpose(instr)


def _is_reduce_input_fusion(instr: HloInstruction) -> bool:
    body = instr.fused_computation
    if body is None:
        return False
    return any(fusion_pass_is_real_reduction_hero(r, _hero(r)) for r in fusion_pass_roots(body))


def _is_input_fusible_reduction(instr: HloInstruction) -> bool:
    return _is_reduce_input_fusion(instr) or is_contiguous_reduction(instr)


def _is_input_fusible_transpose(instr: HloInstruction) -> bool:
    if instr.opcode == "bitcast" or _is_custom_fusion(instr):
        return False
    body = instr.fused_computation
    if body is not None:
        return any(_tiled_transpose_hero(_hero(r)) for r in fusion_pass_roots(body))
    return _tiled_transpose_hero(instr)


def _is_input_fusible_scatter(instr: HloInstruction) -> bool:
    if instr.opcode == "scatter":
        return True
    body = instr.fused_computation
    return body is not None and instr.fusion_kind == "kInput" and body.root.opcode == "scatter"


def is_input_fusible(instr: HloInstruction) -> bool:
    """`IsInputFusible`: a tiled reduction, scatter or tiled transpose (or a fusion of one)."""
    return hlo_is_fusible(instr) and (_is_input_fusible_reduction(instr) or _is_input_fusible_scatter(instr)
                                      or _is_input_fusible_transpose(instr))


_UNIVERSALLY_LOOP_FUSIBLE = frozenset({
    "bitcast", "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice", "gather", "pad",
    "reduce-window", "reshape", "reverse", "slice", "transpose",
})


def _is_universally_loop_fusible(instr: HloInstruction) -> bool:
    op = instr.opcode
    if op != "copy" and instr.operands and is_elementwise(instr):
        return True
    if op == "copy":
        return not _tiled_transpose_hero(instr)
    if op == "fusion":
        return instr.fusion_kind == "kLoop"
    return op in _UNIVERSALLY_LOOP_FUSIBLE


def _is_loop_fusible_as_producer(instr: HloInstruction) -> bool:
    if not hlo_is_fusible(instr):
        return False
    op = instr.opcode
    if op in ("iota", "constant"):
        return True
    if op == "reduce":
        return not instr.shape.is_tuple
    return _is_universally_loop_fusible(instr)


def _is_physically_transposing(instr: HloInstruction) -> bool:
    body = instr.fused_computation
    if body is not None and any(_is_physically_transposing(i) for i in body.instructions):
        return True
    if instr.opcode == "copy":
        return True
    if instr.opcode == "transpose":
        return not transpose_is_bitcast(instr.operands[0].shape, instr.shape, instr.attribute("dimensions", ()))
    return False


def producer_rejection(producer: HloInstruction) -> Rejection | None:
    """`IsProducerMultiOutputFusible`: why `producer` may not be kept as an output of its consumer."""
    if is_multi_output_fusion(producer):
        return Rejection("producer-not-fusible", f"'{producer.name}' is a multi-output fusion")
    if _in_place_operands(producer):
        return Rejection("in-place", f"'{producer.name}' updates a buffer in place")
    if not _is_loop_fusible_as_producer(producer):
        return Rejection("producer-not-fusible", f"{producer.opcode} '{producer.name}' is not loop-fusible")
    if _is_physically_transposing(producer):
        return Rejection("producer-not-fusible", f"'{producer.name}' transposes physically")
    return None


def is_fusible_as_multi_output_root(instr: HloInstruction) -> bool:
    """`IsFusibleAsMultiOutputFusionRoot`: a tiled-reduction or tiled-transpose kernel, a loop
    fusion or an elementwise instruction (never a scatter, never a custom fusion)."""
    return (hlo_is_fusible(instr) and not _is_custom_fusion(instr)
            and (_is_input_fusible_reduction(instr) or _is_input_fusible_transpose(instr)
                 or (instr.opcode == "fusion" and instr.fusion_kind == "kLoop") or is_elementwise(instr)))


def _is_nestable_variadic_reduction(instr: HloInstruction) -> bool:
    if not instr.shape.is_tuple:
        return False
    if instr.opcode == "reduce":
        return not is_contiguous_reduction(instr)
    body = instr.fused_computation
    return body is not None and instr.fusion_kind == "kLoop" and body.root.opcode == "reduce"


def is_sibling_candidate(instr: HloInstruction) -> bool:
    """`IsSiblingFusionCandidate`: used, a multi-output root, no nestable variadic reduction, and
    (when multi-output already) read only through get-tuple-elements."""
    if not instr.users or not is_fusible_as_multi_output_root(instr) or _is_nestable_variadic_reduction(instr):
        return False
    return not is_multi_output_fusion(instr) or all(u.opcode == "get-tuple-element" for u in instr.users)


def _real_hero(instr: HloInstruction) -> HloInstruction:
    """`GetRealHeroForMultiOutputFusion`: the root (or hero) that constrains the kernel's loop most."""
    body = instr.fused_computation
    if body is None:
        return instr
    root = body.root
    if root.opcode != "tuple":
        hero = _hero(root)
        if fusion_pass_is_real_reduction_hero(root, hero) or _tiled_transpose_hero(hero):
            return hero
        return root
    for out in root.operands:
        hero = _hero(out)
        if fusion_pass_is_real_reduction_hero(out, hero) or _tiled_transpose_hero(hero):
            return hero
    return root.operands[0]


def _equal_ignoring_type(a: Shape, b: Shape) -> bool:
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(_equal_ignoring_type(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    return tuple(a.dims) == tuple(b.dims) and a.minor_to_major == b.minor_to_major


def _physical_dims(s: Shape) -> tuple[int, ...]:
    return tuple(s.dims[d] for d in reversed(s.minor_to_major))


def _reshape_or_transpose_bitcast(a: Shape, b: Shape) -> bool:
    """`ShapeUtil::IsReshapeOrTransposeBitcast(a, b, ignore_element_type=true)`."""
    if a.num_elements != b.num_elements:
        return False
    if reshape_is_bitcast(a, b, ignore_element_type=True):
        return True
    return len(a.dims) == len(b.dims) and _physical_dims(a) == _physical_dims(b)


def _untiled_by_merge(hero: HloInstruction, mine: HloInstruction, other: HloInstruction) -> bool:
    """The tiled transpose `hero` of `mine` would lose its tiling: `other` reads `mine` and the
    path from that parameter to `other`'s root is not made of intermediate ops alone."""
    if mine.opcode != "fusion" or other.opcode != "fusion" or mine not in other.operands:
        return False
    param = other.fused_computation.parameter(other.operands.index(mine))
    if len(param.users) != 1:
        return True
    x = param.users[0]
    while x.users:
        if not fusion_pass_is_intermediate(x) or len(x.users) > 1:
            return True
        x = x.users[0]
    return False


def _heroes_compatible(hero1, hero2, instr1, instr2) -> Rejection | None:
    """`FusionHeroesAreCompatible`."""
    red1, red2 = is_contiguous_reduction(hero1), is_contiguous_reduction(hero2)
    tr1, tr2 = _tiled_transpose_hero(hero1), _tiled_transpose_hero(hero2)
    if red1 and red2 and reduction_dimensions(hero1) != reduction_dimensions(hero2):
        return Rejection("reductions-differ", f"'{hero1.name}' and '{hero2.name}'")
    if tr1 and tr2:
        d1, d2 = normalized_transpose(hero1), normalized_transpose(hero2)
        if d1 is None or d2 is None or (d1.dimensions, d1.permutation) != (d2.dimensions, d2.permutation):
            return Rejection("transposes-differ", f"'{hero1.name}' and '{hero2.name}'")
    elif (tr1 and red2) or (red1 and tr2):
        return Rejection("transpose-and-reduction", f"'{hero1.name}' and '{hero2.name}'")
    if tr1 and instr1 in instr2.operands:
        if _untiled_by_merge(hero1, instr1, instr2):
            return Rejection("transpose-untiled", f"'{hero1.name}' read by '{instr2.name}'")
    elif tr2 and instr2 in instr1.operands:
        if _untiled_by_merge(hero2, instr2, instr1):
            return Rejection("transpose-untiled", f"'{hero2.name}' read by '{instr1.name}'")
    return None


def _loop_shape(element: HloInstruction, in_body: bool) -> Shape:
    """The shape of the loop `element` (a real hero) is emitted in: a tiled reduction's or tiled
    transpose's input, else its own shape."""
    hero = _hero(element) if in_body else element
    if is_contiguous_reduction(element) or _tiled_transpose_hero(hero):
        return hero.operands[0].shape
    return element.shape


def shapes_compatible(instr1: HloInstruction, instr2: HloInstruction) -> Rejection | None:
    """`ShapesCompatibleForMultiOutputFusion`: the two kernels share one parallel loop (equal loop
    shapes ignoring element types, or bitcasts of each other) and compatible heroes."""
    hero1, hero2 = _real_hero(instr1), _real_hero(instr2)
    r = _heroes_compatible(hero1, hero2, instr1, instr2)
    if r is not None:
        return r
    l1, l2 = _loop_shape(hero1, hero1 is not instr1), _loop_shape(hero2, hero2 is not instr2)
    if _equal_ignoring_type(l1, l2):
        return None
    if not l1.is_tuple and not l2.is_tuple and _reshape_or_transpose_bitcast(l1, l2):
        return None
    return Rejection("different-loop-shapes", f"{l1} and {l2}")


def _unique_slice(parent: HloInstruction, instr: HloInstruction) -> HloInstruction | None:
    """`FindUniqueSlice`: the one `slice` through which `instr` reads `parent`, or None."""
    if instr.opcode == "slice":
        return instr
    body = instr.fused_computation
    if body is None:
        return None
    found = None
    for i, o in enumerate(instr.operands):
        if o is not parent:
            continue
        if found is not None:
            return None
        param = body.parameter(i)
        if len(param.users) != 1:
            return None
        found = _unique_slice(param, param.users[0])
        if found is None:
            return None
    return found


def _slices_overlap(instr1, instr2, parent) -> Rejection | None:
    """`ParameterSlicesAreNonOverlapping`: siblings reading disjoint slices of a parent of at
    least 1 KiB are not fused (each would read only its own part)."""
    if parent.shape.is_tuple or parent.shape.byte_size < 1024:
        return None
    s1, s2 = _unique_slice(parent, instr1), _unique_slice(parent, instr2)
    if s1 is None or s2 is None:
        return None
    for (b1, e1, *_), (b2, e2, *_) in zip(s1.attribute("slice"), s2.attribute("slice")):
        if not (b1 < e2 and b2 < e1):
            return Rejection("slices-disjoint", f"'{s1.name}' and '{s2.name}' of '{parent.name}'")
    return None


def _root_is_dus(instr: HloInstruction) -> bool:
    body = instr.fused_computation
    return body is not None and body.root.opcode == "dynamic-update-slice"


def fusion_priority(instr: HloInstruction) -> int:
    """Multi-output fusions first (2), then fusions (1), then the rest (0)."""
    if is_multi_output_fusion(instr):
        return 2
    return 1 if instr.opcode == "fusion" else 0


def choose_fusion_kind(producer: HloInstruction, consumer: HloInstruction) -> str:
    """`ChooseFusionKind`: kInput when either side is input-fusible."""
    return "kInput" if is_input_fusible(consumer) or is_input_fusible(producer) else "kLoop"


def _is_effective_scalar(shape: Shape) -> bool:
    return shape.is_array and all(d == 1 for d in shape.dims)


# ---------------------------------------------------------------------------
# Reachability (XLA's HloDfsReachability, rebuilt after every merge)


class _Reachability:
    """Per instruction, the set of instructions it depends on (itself included) as the bits of an int."""

    __slots__ = ("_bits", "_index")

    def __init__(self, comp: HloComputation):
        bits: dict[HloInstruction, int] = {}
        index: dict[HloInstruction, int] = {}
        for n, instr in enumerate(comp.post_order()):
            b = 1 << n
            for o in instr.operands:
                b |= bits.get(o, 0)
            bits[instr] = b
            index[instr] = n
        self._bits, self._index = bits, index

    def reaches(self, a: HloInstruction, b: HloInstruction) -> bool:
        """Whether `b` depends on `a` (a path of operands from `b` to `a`; true when a is b)."""
        ia, bb = self._index.get(a), self._bits.get(b)
        if ia is None or bb is None:
            return False
        return bool((bb >> ia) & 1)

    def connected(self, a, b) -> bool:
        return self.reaches(a, b) or self.reaches(b, a)


# ---------------------------------------------------------------------------
# Building a multi-output fusion


def _outputs_of(body_root: HloInstruction) -> list[HloInstruction]:
    return list(body_root.operands) if body_root.opcode == "tuple" else [body_root]


class _MergedBody:
    """The body of `keep` with `other` merged into it (`other`'s value bound where `keep` reads it),
    with a tuple of both kernels' outputs as root: `keep`'s first. `names`: module-wide names
    (None: a detached body, for pricing)."""

    def __init__(self, keep: HloInstruction, other: HloInstruction, names: NameUniquifier | None,
                 origin: dict | None = None):
        self.comp = HloComputation(names.computation("fused_computation") if names else "fused_computation")
        body = FusedBodyBuilder(self.comp, names, origin=origin)
        for o in keep.operands:
            if o is not other:
                body.param_for(o)
        other_outs = self._clone(other, body, lambda o: body.param_for(o))
        other_value = self._root_of_other  # what `keep` reads of `other` (a producer is never multi-output)
        keep_outs = self._clone(keep, body, lambda o: other_value if o is other else body.param_for(o))
        outs = keep_outs + other_outs
        self.n_keep = len(keep_outs)
        shape = Shape.tuple_of([o.shape for o in outs])
        root = HloInstruction(body.name("tuple"), "tuple", shape, outs)
        self.comp.add_instruction(root)
        self.comp.root = root
        self.comp.instructions.sort(key=lambda i: 0 if i.opcode == "parameter" else 1)
        self.operands = list(body.operands)
        self.shape = shape

    def _clone(self, kernel: HloInstruction, body, outer) -> list[HloInstruction]:
        fused = kernel.fused_computation
        ops = [outer(o) for o in kernel.operands]
        if fused is None:
            value = body.clone_into(kernel, ops)
            self._root_of_other = value
            return [value]
        if is_deferred(fused):
            root = replay(fused.recipe, ops, body.clone_into)
        else:
            mapping: dict[int, HloInstruction] = {}
            for instr in operands_first(fused):
                if instr.opcode == "parameter":
                    mapping[id(instr)] = ops[instr.parameter_number]
                else:
                    mapping[id(instr)] = body.clone_into(instr, [mapping[id(o)] for o in instr.operands])
            root = mapping[id(fused.root)]
        self._root_of_other = root
        if root.opcode == "tuple":
            outs = list(root.operands)
            if not root.users:
                self.comp.remove_instruction(root)
            return outs
        return [root]


def _detached_multi_output(producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
    """The multi-output fusion of `producer` into `consumer`, detached from the module (for pricing)."""
    merged = _MergedBody(consumer, producer, None)
    kind = consumer.fusion_kind if consumer.opcode == "fusion" else choose_fusion_kind(producer, consumer)
    fusion = HloInstruction(consumer.name, "fusion", merged.shape, None, {"kind": kind, "calls": merged.comp})
    fusion.operands = merged.operands  # not registered as a user: the module is not changed
    fusion.computation = consumer.computation
    return fusion


# ---------------------------------------------------------------------------
# The pass


class MultiOutputFusionPass:
    """Multi-output fusion of a module's computations, in place.

    **Arguments:** `model`, `device`: prices the producer-consumer test; `checker`: the
    `LegalityChecker` of the module (its budget facts and IR sizes; a fresh one by default);
    `names`: the module's `NameUniquifier`; `origin`: clone -> input name provenance to keep up to
    date (optional). After `run(computations)`, `steps` lists the merges and `rejections` the
    pairs refused, `(computation, kind, a, b, Rejection)`.
    """

    def __init__(self, model, device, *, checker: LegalityChecker | None = None,
                 names: NameUniquifier | None = None, origin: dict | None = None):
        self.model = model
        self.device = device
        self.checker = checker or LegalityChecker(getattr(device, "shared_memory_per_block_bytes", 0))
        self.names = names
        self.origin = origin
        self.steps: list[MultiOutputStep] = []
        self.rejections: list[tuple[str, str, str, str, Rejection]] = []
        self.model_calls = 0

    def run(self, computations) -> list[MultiOutputStep]:
        for comp in computations:
            if self.names is None:
                self.names = NameUniquifier(comp.module)
            self._run(comp)
        return self.steps

    # -- one computation ---------------------------------------------------
    def _run(self, comp: HloComputation) -> None:
        self.comp = comp
        self.reach = _Reachability(comp)
        for producer in reversed(comp.post_order()):
            if producer.computation is not comp:
                continue  # merged away
            if producer.opcode == "constant" or _is_custom_fusion(producer):
                continue
            self._fuse_siblings(producer)
            consumer = self._best_consumer(producer)
            if consumer is not None:
                self._fuse_producer(producer, consumer)
        _sort_operands_first(comp)

    def _reject(self, kind: str, a: HloInstruction, b: HloInstruction, why: Rejection) -> None:
        self.rejections.append((self.comp.name, kind, a.name, b.name, why))

    def sibling_rejection(self, a: HloInstruction, b: HloInstruction, parent: HloInstruction) -> Rejection | None:
        """`CanFuseSiblings(a, b, parent)` then `LegalToFuse`: the first rule that forbids it, or None."""
        if self.reach.connected(a, b):
            return Rejection("connected", f"'{a.name}' and '{b.name}' are connected")
        r = shapes_compatible(a, b)
        if r is not None:
            return r
        r = _slices_overlap(a, b, parent)
        if r is not None:
            return r
        if _root_is_dus(a) or _root_is_dus(b):
            return Rejection("dynamic-update-slice", "can't fuse multiple dynamic-update-slices")
        return self.checker.fits_in_budget(a, b, consumer_producer=False)

    def _fuse_siblings(self, parent: HloInstruction) -> None:
        if _is_effective_scalar(parent.shape):
            return
        siblings = [u for u in parent.users if is_sibling_candidate(u)]
        siblings.sort(key=lambda u: -fusion_priority(u))  # stable
        i = 0
        while i < len(siblings):
            if siblings[i].opcode != "fusion":
                i += 1
                continue
            j = i + 1
            while j < len(siblings):
                a, b = siblings[i], siblings[j]
                why = self.sibling_rejection(a, b, parent)
                if why is not None:
                    self._reject("sibling", a, b, why)
                    j += 1
                    continue
                kind = "kInput" if b.opcode == "fusion" and b.fusion_kind == "kInput" else None
                merged = self._merge(a, b, kind)
                self.steps.append(MultiOutputStep(self.comp.name, "sibling", parent.name, a.name, b.name, merged.name,
                                                  fused_opcode=b.opcode))
                siblings[i] = merged
                del siblings[j]
                self.reach = _Reachability(self.comp)
            i += 1

    def consumer_rejection(self, producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
        """`ProducerCandidateIsFusible` up to the model's test: the first rule that forbids keeping
        `producer` as an output of `consumer`, or None."""
        if not is_fusible_as_multi_output_root(consumer):
            return Rejection("not-multi-output-root", f"{consumer.opcode} '{consumer.name}'")
        r = shapes_compatible(consumer, producer)
        if r is not None:
            return r
        for o in consumer.operands:
            if o is not producer and self.reach.reaches(producer, o):
                return Rejection("cycle", f"'{o.name}' depends on '{producer.name}'")
        r = self.checker.fits_in_budget(producer, consumer, consumer_producer=False)
        if r is not None:
            return r
        return self.checker.merged_too_large(producer, consumer)

    def price(self, producer: HloInstruction, consumer: HloInstruction) -> tuple[float, float]:
        """`(time_unfused_s, time_fused_s)`: the two kernels apart (two launches), and the
        consumer writing the producer's output too (one launch)."""
        self.model_calls += 1
        if isinstance(self.model, EstimatesMultiOutputFusion):
            est = self.model.estimate_multi_output_fusion(producer, consumer, self.device)
            return est.time_unfused_s, est.time_fused_s
        unfused = self.model.estimate(producer, self.device).time_s + self.model.estimate(consumer, self.device).time_s
        fusion = _detached_multi_output(producer, consumer)
        try:
            fused = self.model.estimate(fusion, self.device).time_s
        finally:
            discard_fusion(fusion)
        return unfused, fused

    def _best_consumer(self, producer: HloInstruction):
        if producer_rejection(producer) is not None:
            return None
        users = list(producer.users)
        if not users or (len(users) == 1 and not is_multi_output_fusion(users[0])):
            return None  # priority fusion has weighed that pair already
        best, best_priority, best_prices = None, -1, None
        for consumer in users:
            why = self.consumer_rejection(producer, consumer)
            if why is None:
                unfused, fused = self.price(producer, consumer)
                if math.isnan(unfused) or math.isnan(fused):
                    why = Rejection("unpriced", "the model returned NaN")
                elif fused > unfused:
                    why = Rejection("slower", f"fused {fused * 1e6:.3f} us > unfused {unfused * 1e6:.3f} us")
            if why is not None:
                self._reject("producer-consumer", producer, consumer, why)
                continue
            p = fusion_priority(consumer)
            if p > best_priority:
                best, best_priority, best_prices = consumer, p, (unfused, fused)
        if best is not None:
            self._prices = best_prices
        return best

    def _fuse_producer(self, producer: HloInstruction, consumer: HloInstruction) -> None:
        into, opcode = consumer.name, producer.opcode
        if consumer.opcode != "fusion":
            consumer = make_fusion(consumer, choose_fusion_kind(producer, consumer), names=self.names)
        merged = self._merge(consumer, producer, None)
        unfused, fused = self._prices
        self.steps.append(MultiOutputStep(self.comp.name, "producer-consumer", producer.name, into, producer.name,
                                          merged.name, unfused, fused, opcode))
        self.reach = _Reachability(self.comp)

    # -- the edit ----------------------------------------------------------
    def _merge(self, keep: HloInstruction, other: HloInstruction, kind: str | None) -> HloInstruction:
        """Replace `keep` (a fusion) and `other` by one multi-output fusion named as `keep`;
        `other` may be an operand of `keep` (it is then read inside)."""
        comp, names = self.comp, self.names
        module = comp.module
        merged = _MergedBody(keep, other, names, self.origin)
        fusion = HloInstruction(names.instruction("fusion"), "fusion", merged.shape, merged.operands,
                                {"kind": kind or keep.fusion_kind, "calls": merged.comp})
        md = keep.raw_attributes.get("metadata")
        if md is not None:
            fusion.set_attribute("metadata", md)
        module.add_computation(merged.comp, before=comp)
        comp.add_instruction(fusion, before=keep)
        # users of each output read it through a get-tuple-element
        self._redirect(keep, fusion, 0, skip=None)
        self._redirect(other, fusion, merged.n_keep, skip=keep)
        for old in (keep, other):
            self._remove(old)
        # the merged fusion takes the name of the one that absorbed the other
        old_name = keep.name
        names.release_instruction(fusion.name)
        comp.rename_instruction(fusion, old_name)
        return fusion

    def _redirect(self, old: HloInstruction, new: HloInstruction, offset: int, skip) -> None:
        comp = self.comp
        if is_multi_output_fusion(old):
            for u in list(old.users):
                if u is skip:
                    continue
                if u.opcode == "get-tuple-element":
                    u.set_attribute("index", offset + int(u.attribute("index")))
                    u.replace_operand(u.operands.index(old), new)
            return
        users = [u for u in old.users if u is not skip]
        if not users and comp.root is not old:
            return
        gte = HloInstruction(self.names.instruction("get-tuple-element"), "get-tuple-element", old.shape, [new],
                             {"index": offset})
        comp.add_instruction(gte, before=old)
        old.replace_all_uses_with(gte, users=users)

    def _remove(self, old: HloInstruction) -> None:
        comp, module = self.comp, self.comp.module
        comp.remove_instruction(old)  # its users read the merged fusion now
        body = old.fused_computation
        if body is not None:
            if any(c is body for c in module.computations):
                module.remove_computation(body)
            # the merged body holds clones: unlink this one, or it is left to the cyclic collector
            discard_fusion(old)


def _sort_operands_first(comp: HloComputation) -> None:
    """Put every instruction after its operands, keeping the list's order where it already does."""
    position = {id(i): n for n, i in enumerate(comp.instructions)}
    if all(position.get(id(o), -1) < n for n, i in enumerate(comp.instructions) for o in i.operands
           if id(o) in position):
        return
    out: list[HloInstruction] = []
    placed: set[int] = set()
    for instr in comp.instructions:
        stack = [(instr, False)]
        while stack:
            x, expanded = stack.pop()
            if id(x) in placed:
                continue
            if expanded:
                placed.add(id(x))
                out.append(x)
                continue
            stack.append((x, True))
            for o in reversed(x.operands):
                if id(o) in position and id(o) not in placed:
                    stack.append((o, False))
    comp.instructions[:] = out
