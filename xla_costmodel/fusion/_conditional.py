"""What XLA's `ConditionalSimplifier` (`TryRemoveConditional`) does to a `conditional` before fusion.

XLA runs it in its simplification pipelines, before any fusion. A conditional it can remove is no
longer a place where fusion stops: its branches' instructions join the caller's and fuse with it
(`lax.cond` between two cheap branches of a solver's loop body, each a kernel of its own in the
branch, becomes one `select` fused into the loop body's kernels). It removes a conditional:

- of one branch: the branch inlined;
- whose branch index is a constant: the branch it picks inlined (a `pred` true picks branch 0, an
  index out of range the last branch);
- of two branches on a `pred` (or on an index converted from one, as `lax.cond` lowers it: XLA's
  simplifier makes that a `pred` conditional, its branches swapped, in the same pipeline), when no instruction of either branch is expensive (XLA's list: a
  broadcast, concatenate, dynamic slice, get-tuple-element, reduce, reshape, pad, parameter, slice
  or tuple, or an elementwise instruction, a constant included) and neither branch is empty (only
  parameters, tuples and get-tuple-elements, with an array in its result: "an empty branch is faster
  than a select"): both branches inlined and each array of the result a `select` on the predicate
  (broadcast to the array's shape).

A conditional whose branches hold a side effect or a channel instruction, or that carries a sharding,
is kept, as in XLA. The removal of unused operands and tuple elements is not simulated.

Facts after XLA's `xla/service/conditional_simplifier.cc`; the code is ours.
"""

from __future__ import annotations

from ..analysis.opcodes import is_elementwise
from ..hlo import HloComputation, HloInstruction, HloModule, Shape
from ..hlo.editing import NameUniquifier, clone_instruction
from ._cse import _has_side_effect

__all__ = ["remove_conditionals"]

# `instruction_is_expensive`'s exceptions: not expensive although not elementwise.
_CHEAP = frozenset({"broadcast", "concatenate", "dynamic-slice", "get-tuple-element", "reduce", "reshape", "pad",
                    "parameter", "slice", "tuple", "constant"})  # a constant is elementwise in XLA
_EMPTY = frozenset({"tuple", "get-tuple-element", "parameter"})


def _branches(cond: HloInstruction) -> list[HloComputation]:
    listed = cond.attribute("branch_computations", None)
    if listed:
        return list(listed)
    return [cond.attribute("true_computation"), cond.attribute("false_computation")]


def _has_array(shape: Shape) -> bool:
    return shape.is_array or any(_has_array(s) for s in shape.tuple_shapes)


def _has_token(shape: Shape) -> bool:
    return (not shape.is_array and not shape.is_tuple) or any(_has_token(s) for s in shape.tuple_shapes)


def _kept(cond: HloInstruction, branches: list[HloComputation]) -> bool:
    """Not removable: a side effect or a channel instruction in a branch (called computations
    included), or a sharding on the conditional."""
    if "sharding" in cond.raw_attributes:
        return True
    todo, seen = list(branches), set()
    while todo:
        comp = todo.pop()
        if id(comp) in seen:
            continue
        seen.add(id(comp))
        for i in comp.instructions:
            if _has_side_effect(i) or "channel_id" in i.raw_attributes:
                return True
            todo.extend(i.called_computations)
    return False


def _constant_branch(pred: HloInstruction, n: int) -> int | None:
    if pred.opcode != "constant":
        return None
    text = (pred.literal_text or "").strip().lower()
    if pred.shape.element_type == "pred":
        return 0 if text in ("true", "1") else 1 if text in ("false", "0") else None
    try:
        index = int(text)
    except ValueError:
        return None
    return index if 0 <= index < n else n - 1


class _Inliner:
    def __init__(self, module: HloModule):
        self.names = NameUniquifier(module)

    def add(self, comp, anchor, prefix, opcode, shape, operands, **attributes) -> HloInstruction:
        instr = HloInstruction(self.names.instruction(prefix), opcode, shape, list(operands))
        for key, value in attributes.items():
            instr.set_attribute(key, value)
        comp.add_instruction(instr, before=anchor)
        return instr

    def inline(self, site: HloInstruction, branch: HloComputation, operand: HloInstruction) -> HloInstruction:
        """Clones of `branch`'s body before `site`, its parameter read from `operand`: the root's clone."""
        mapping = {}
        clones = []
        for instr in branch.post_order():
            if instr.opcode == "parameter":
                mapping[id(instr)] = operand
                continue
            c = clone_instruction(instr, [mapping[id(o)] for o in instr.operands],
                                  name=self.names.instruction(instr.name))
            clones.append(c)
            mapping[id(instr)] = c
        site.computation.insert_instructions(clones, before=site)
        return mapping[id(branch.root)]

    def select(self, site, pred, t: HloInstruction, f: HloInstruction) -> HloInstruction:
        comp = site.computation
        if f.shape.is_array:
            p = pred
            if f.shape.rank:
                p = self.add(comp, site, "broadcast", "broadcast", Shape.array("pred", list(f.shape.dims)), [pred],
                             dimensions="{}")
            return self.add(comp, site, "select", "select", f.shape, [p, t, f])
        parts = []
        for i, s in enumerate(f.shape.tuple_shapes):
            ti = self.add(comp, site, "get-tuple-element", "get-tuple-element", s, [t], index=str(i))
            fi = self.add(comp, site, "get-tuple-element", "get-tuple-element", s, [f], index=str(i))
            parts.append(self.select(site, pred, ti, fi))
        return self.add(comp, site, "tuple", "tuple", f.shape, parts)


def _replace(site: HloInstruction, value: HloInstruction) -> None:
    comp = site.computation
    was_root = comp.root is site
    site.replace_all_uses_with(value)
    if was_root:
        comp.root = value
    comp.remove_instruction(site)


def remove_conditionals(module: HloModule) -> int:
    """`TryRemoveConditional` on every conditional of `module`, in place (the branches left uncalled
    stay for the caller to drop). **Returns:** how many conditionals were removed."""
    inliner = None
    removed = 0
    for comp in list(module.computations):
        for cond in [i for i in comp.post_order() if i.opcode == "conditional"]:
            branches = _branches(cond)
            if not branches or _kept(cond, branches) or _has_token(cond.shape):
                continue
            pick = 0 if len(branches) == 1 else _constant_branch(cond.operands[0], len(branches))
            pred, on_true, on_false = cond.operands[0], 0, 1
            if pick is None and len(branches) == 2 and pred.opcode == "convert" and pred.operands \
                    and pred.operands[0].shape.element_type == "pred":
                # an index converted from a pred (`lax.cond` lowers so): branch 1 on true
                pred, on_true, on_false = pred.operands[0], 1, 0
            if pick is None:
                if len(branches) != 2 or pred.shape.element_type != "pred":
                    continue
                if any(not (i.opcode in _CHEAP or is_elementwise(i)) for b in branches for i in b.instructions):
                    continue
                if any(all(i.opcode in _EMPTY for i in b.instructions) and _has_array(b.root.shape)
                       for b in branches):
                    continue  # an empty branch is faster than a select
            inliner = inliner or _Inliner(module)
            if pick is not None:
                value = inliner.inline(cond, branches[pick], cond.operands[1 + pick])
            else:
                t = inliner.inline(cond, branches[on_true], cond.operands[1 + on_true])
                f = inliner.inline(cond, branches[on_false], cond.operands[1 + on_false])
                value = inliner.select(cond, pred, t, f)
            _replace(cond, value)
            removed += 1
    return removed
