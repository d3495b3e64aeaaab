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
is kept, as in XLA. `remove_unused_conditional_elements` simulates the pass's other two rewrites: elements of a
tuple result no one reads dropped from the branches' roots (`RemoveUnusedTupleElements`), elements of a branch's
tuple parameter it never reads dropped from the conditional's operand (`TryRemoveUnusedConditionalOperands`):
what a loop computes only for a branch that ignores it is then dead in the loop (`fusion._while_loop_simplifier`).

Facts after XLA's `xla/service/conditional_simplifier.cc`; the code is ours.
"""

from __future__ import annotations

from ..analysis.opcodes import is_elementwise
from ..hlo import HloComputation, HloInstruction, HloModule, Shape
from ..hlo.editing import NameUniquifier, add_new_instruction, clone_instruction
from ._cse import _has_side_effect, remove_unread

__all__ = ["remove_conditionals", "remove_unused_conditional_elements"]

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


def _any_called(cond: HloInstruction, branches: list[HloComputation], hit) -> bool:
    """Whether the conditional carries a sharding, or `hit` holds for an instruction of a branch (the
    computations it calls included)."""
    if "sharding" in cond.raw_attributes:
        return True
    todo, seen = list(branches), set()
    while todo:
        comp = todo.pop()
        if id(comp) in seen:
            continue
        seen.add(id(comp))
        for i in comp.instructions:
            if hit(i):
                return True
            todo.extend(i.called_computations)
    return False


def _kept(cond: HloInstruction, branches: list[HloComputation]) -> bool:
    """Not removable: a side effect or a channel instruction in a branch (called computations
    included), or a sharding on the conditional."""
    return _any_called(cond, branches, lambda i: _has_side_effect(i) or "channel_id" in i.raw_attributes)


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


# -- unused results and operands ------------------------------------------------------------------------------


def _gte(comp: HloComputation, before: HloInstruction | None, tup: HloInstruction, index: int) -> HloInstruction:
    return add_new_instruction(comp, before, "get-tuple-element", tup.shape.tuple_shapes[index], [tup], index=index)


def _tuple(comp: HloComputation, before: HloInstruction | None, operands: list[HloInstruction]) -> HloInstruction:
    return add_new_instruction(comp, before, "tuple", Shape.tuple_of([o.shape for o in operands]), operands)


def _skipped(cond: HloInstruction, branches: list[HloComputation]) -> bool:
    """`ConditionalSimplifier::Run` leaves a conditional alone when it carries a sharding or a branch calls a
    channel instruction (it clones computations)."""
    return _any_called(cond, branches, lambda i: "channel_id" in i.raw_attributes)


def _remove_unused_results(cond: HloInstruction, branches: list[HloComputation], callers: dict) -> bool:
    """`RemoveUnusedTupleElements`: the elements of a tuple result no get-tuple-element reads are dropped from
    every branch's root."""
    comp = cond.computation
    if cond is comp.root or not cond.shape.is_tuple or not cond.users \
            or any(u.opcode != "get-tuple-element" for u in cond.users):
        return False
    used = sorted({int(u.attribute("index")) for u in cond.users})
    if len(used) == len(cond.shape.tuple_shapes):
        return False
    if len({id(b) for b in branches}) != len(branches) or any(len(callers.get(b.name, ())) != 1 for b in branches) \
            or any(b.root is None or not b.root.shape.is_tuple for b in branches):
        return False  # (XLA clones a shared branch; left alone here)
    new_index = {old: k for k, old in enumerate(used)}
    for b in branches:
        root = b.root
        parts = [root.operands[i] for i in used] if root.opcode == "tuple" else [_gte(b, None, root, i) for i in used]
        b.root = _tuple(b, None, parts)
        if not root.users and root.opcode != "parameter" and not _has_side_effect(root):
            operands = list(root.operands)
            b.remove_instruction(root)
            remove_unread(b, operands)
    cond.shape = Shape.tuple_of([cond.shape.tuple_shapes[i] for i in used])
    for u in cond.users:
        u.set_attribute("index", new_index[int(u.attribute("index"))])
    return True


def _remove_unused_operands(branch: HloComputation, sites: list[HloInstruction]) -> bool:
    """`TryRemoveUnusedConditionalOperands`: the elements of a branch's tuple parameter it never reads are dropped
    from the parameter and from the operand of every conditional calling it (a tuple of the rest)."""
    param = branch.parameter(0) if len(branch.parameters) == 1 else None
    if param is None or param is branch.root or not param.shape.is_tuple \
            or any(u.opcode != "get-tuple-element" for u in param.users):
        return False
    keep = sorted({int(u.attribute("index")) for u in param.users})
    if len(keep) == len(param.shape.tuple_shapes):
        return False
    old_shape = param.shape
    new_index = {old: k for k, old in enumerate(keep)}
    param.shape = Shape.tuple_of([old_shape.tuple_shapes[i] for i in keep])
    for u in param.users:
        u.set_attribute("index", new_index[int(u.attribute("index"))])
    for site in sites:
        for k, b in enumerate(_branches(site)):
            if b is not branch:
                continue
            operand = site.operands[k + 1]
            comp = site.computation
            parts = [operand.operands[i] for i in keep] if operand.opcode == "tuple" else \
                [_gte(comp, site, operand, i) for i in keep]
            site.replace_operand(k + 1, _tuple(comp, site, parts))
            remove_unread(comp, [operand])
    return True


def remove_unused_conditional_elements(module: HloModule) -> int:
    """`ConditionalSimplifier`'s removal of what a conditional's readers and branches do not use, in place:
    `RemoveUnusedTupleElements` (result elements no one reads) on every conditional, then
    `TryRemoveUnusedConditionalOperands` (parameter elements a branch never reads) on every branch computation
    that only conditionals call. What is left unread in the callers is removed first (XLA's pipeline runs DCE
    before). **Returns:** how many results and parameters were narrowed."""
    conds = [i for _, i in module.instructions() if i.opcode == "conditional"]
    if not conds:
        return 0
    for comp in {id(c.computation): c.computation for c in conds}.values():
        remove_unread(comp, [i for i in comp.instructions if not i.users])
    conds = [c for c in conds if c.computation is not None]
    callers = module.callers()
    n = 0
    sites: dict[int, tuple[HloComputation, list[HloInstruction]]] = {}
    for cond in conds:
        branches = _branches(cond)
        if _skipped(cond, branches):
            continue
        n += _remove_unused_results(cond, branches, callers)
        for b in branches:
            entry = sites.setdefault(id(b), (b, []))
            if cond not in entry[1]:
                entry[1].append(cond)
    for branch, calling in sites.values():
        if len(callers.get(branch.name, ())) != len(calling):
            continue  # called by something else too (XLA clones it; left alone here)
        n += _remove_unused_operands(branch, calling)
    return n
