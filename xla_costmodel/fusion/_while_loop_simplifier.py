"""What XLA's `WhileLoopSimplifier` does to a `while` loop before fusion, where it changes kernels.

XLA:GPU runs `WhileLoopSimplifier` in its simplification pipelines (`gpu_compiler.cc`: the fixed point of the
simplifier, constant folding, CSE and DCE). A loop as JAX lowers it carries elements no one reads (a `pred`
that only feeds itself, the second flag of a solver's step) and several counters that all grow by a constant
(a scan's trip counter and an index into the saved steps). Each is a scalar kernel per trip in the loop body:
the pass removes the first and merges the second into one counter, so that one `add` kernel is left where
there were several (XLA's comment: "each scalar operation is nontrivially expensive because it's a separate
kernel launch"). Two of its transformations are simulated, in place, each as XLA's
`xla/hlo/transforms/simplifiers/while_loop_simplifier.cc` writes it:

- `TryRemoveDeadWhileParams`: an element of the loop's tuple is removed when no other element's next value,
  the condition, a side effect or a reader after the loop depends on it; and a group of elements connected
  only among themselves (a union-find over the body and the condition) is removed together when none of them
  has a side effect and each one read after the loop is passed through unchanged (its readers then read the
  loop's init). The loop's init, body, condition and readers are rewritten to the smaller tuple.
- `TryMergeInductionVariables` (integer types s8, u8, s32, u32, s64, u64, in that order): with the trip
  counter (the first element that starts at a constant 0 and grows by 1) and every other induction variable
  (an element whose next value is `element + constant`), when there are at least two of them, each induction
  variable is left unchanged by the body and read as `element + counter * constant` in the body, the
  condition and after the loop (a trip counter is appended to the tuple when there is none). The simplifier
  then removes `* 1`.

`sink_constants` is the pass XLA runs right before it, `WhileLoopConstantSinking` (XLA:GPU's options: constants,
not their broadcasts): a loop-invariant element whose init is a constant is read as that constant in the body and
the condition (then folded with them), and the element, now read by no one, is removed as dead.

As in XLA's `Run`, each loop gets the first transformation that applies per pass (the merge after the dead
elements' removal), and the pass runs again in the pipeline's fixed point. Not simulated: repeated tuple
elements, nested tuples, constant elements (`TryRemoveConstantParams`, `TryPropagateConstant`), trivial compares,
the removal of loops of trip count 0 or 1 (the scatter expander's loop: `fusion._scatter_expander` writes its net
result). A loop whose body or condition another instruction calls too, or whose body's root is not a `tuple`,
is left alone. A loop's trip count, recorded before (`analysis.annotate_trip_counts`), stays on it.

Facts after XLA's source named above (and `xla/service/while_loop_constant_sinking.cc`) and its dumps (the diffrax
ODE solvers' loops, deviceless); the code is ours.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hlo import HloComputation, HloInstruction, HloModule, Shape
from ..hlo.editing import add_new_instruction
from ._cse import _has_side_effect, remove_unread

__all__ = ["WhileSimplification", "simplify_while_loops", "sink_constants"]

#: `TryMergeInductionVariables`' element types, in `Run`'s order (s16 and u16 are missing there too).
_INDUCTION_TYPES = ("s8", "u8", "s32", "u32", "s64", "u64")


@dataclass(frozen=True)
class WhileSimplification:
    """What `simplify_while_loops` did: loop tuple elements removed as dead, induction variables merged into a
    trip counter."""

    dead_elements: int = 0
    merged_induction_variables: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.dead_elements or self.merged_induction_variables)


# -- helpers ------------------------------------------------------------------------------------


def _add(comp: HloComputation, before: HloInstruction | None, opcode: str, shape: Shape, operands,
         prefix: str | None = None, **attributes) -> HloInstruction:
    return add_new_instruction(comp, before, opcode, shape, operands, prefix, **attributes)


def _gte(comp: HloComputation, before: HloInstruction | None, tup: HloInstruction, index: int) -> HloInstruction:
    return _add(comp, before, "get-tuple-element", tup.shape.tuple_shapes[index], [tup], index=index)


def _index(instr: HloInstruction) -> int:
    return int(instr.attribute("index"))


def _dce(comp: HloComputation) -> int:
    """`HloDCE` of one computation: what no one reads (not the root, a parameter or a side effect) removed."""
    return remove_unread(comp, [i for i in comp.instructions if not i.users])


class _SideEffects:
    """`HloInstruction::HasSideEffect`: the instruction's own (`HasSideEffectNoRecurse`) or a called
    computation's, memoized per computation."""

    def __init__(self):
        self._comps: dict[int, bool] = {}

    def __call__(self, instr: HloInstruction) -> bool:
        return _has_side_effect(instr) or any(self.computation(c) for c in instr.called_computations)

    def computation(self, comp: HloComputation) -> bool:
        key = id(comp)
        if key not in self._comps:
            self._comps[key] = False  # a cycle cannot happen in HLO; this only stops a recursion
            self._comps[key] = any(self(i) for i in comp.instructions)
        return self._comps[key]


def _loop_parts(w: HloInstruction, callers: dict) -> tuple[HloComputation, HloComputation] | None:
    """(body, condition) of a loop this pass may rewrite in place: a tuple-shaped state, a body whose root is a
    `tuple`, parameters read only through get-tuple-elements, and no other caller of the body or condition."""
    body, cond = w.attribute("body"), w.attribute("condition")
    if body is cond or not w.shape.is_tuple or body.root is None or body.root.opcode != "tuple":
        return None
    for comp in (body, cond):
        if len(callers.get(comp.name, ())) != 1 or len(comp.parameters) != 1:
            return None
        if any(u.opcode != "get-tuple-element" for u in comp.parameter(0).users):
            return None  # XLA: "cowardly refusing to analyze while loop with ... used by non-GTE instruction"
    return body, cond


def _set_loop_shape(w: HloInstruction, body: HloComputation, cond: HloComputation, shape: Shape) -> None:
    w.shape = shape
    body.parameter(0).shape = shape
    cond.parameter(0).shape = shape
    body.root.shape = shape


def _remap_induction_variable(w: HloInstruction, new_index: dict[int, int]) -> None:
    """Keep the trip count annotation's induction variable index right (`analysis.annotate_trip_counts`)."""
    config = w.attribute("backend_config", None) if w.has_attribute("backend_config") else None
    if not isinstance(config, dict) or not isinstance(config.get("known_induction_variable"), dict):
        return
    config = dict(config)
    try:
        old = int(config["known_induction_variable"].get("tuple_index"))
    except (TypeError, ValueError):
        return
    if old in new_index:
        config["known_induction_variable"] = {"tuple_index": str(new_index[old])}
    else:
        del config["known_induction_variable"]
    w.set_attribute("backend_config", config)


def _rewire_other_readers(w: HloInstruction, element, n_old: int) -> None:
    """Point the readers of `w` other than get-tuple-elements (and the root, where `w` is) at a `tuple` of the
    loop's elements as they were, `element(i, before)` each (XLA's tuple over the new loop, which the tuple
    simplifier folds where it can)."""
    comp = w.computation
    others = [u for u in w.users if u.opcode != "get-tuple-element"]
    if not others and comp.root is not w:
        return
    at = comp.instructions.index(w) + 1
    anchor = comp.instructions[at] if at < len(comp.instructions) else None
    elements = [element(i, anchor) for i in range(n_old)]
    tup = _add(comp, anchor, "tuple", Shape.tuple_of([e.shape for e in elements]), elements)
    w.replace_all_uses_with(tup, users=others)


# -- TryRemoveDeadWhileParams ---------------------------------------------------------------------


def _dead_indices(w: HloInstruction, body: HloComputation, cond: HloComputation, side_effect) -> set[int]:
    """The tuple elements `TryRemoveDeadWhileParams` removes (its two cases, as XLA computes them)."""
    n = len(w.shape.tuple_shapes)
    root = body.root
    bparam, cparam = body.parameter(0), cond.parameter(0)
    comp = w.computation
    if comp.root is w or any(u.opcode != "get-tuple-element" for u in w.users):
        used_after = set(range(n))
    else:
        used_after = {_index(u) for u in w.users}

    parent: dict[int, HloInstruction] = {}
    nodes: dict[int, HloInstruction] = {}

    def find(x: HloInstruction) -> int:
        k = id(x)
        nodes.setdefault(k, x)
        root_k = k
        while parent.get(root_k, root_k) != root_k:
            root_k = parent[root_k]
        while parent.get(k, k) != root_k:  # path compression
            nxt = parent.get(k, k)
            parent[k] = root_k
            k = nxt
        return root_k

    def union(a: HloInstruction, b: HloInstruction) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb

    deps: dict[int, int] = {}  # instruction -> bit set of the tuple elements it depends on (one trip)
    side_effecting = 0
    for c, param in ((body, bparam), (cond, cparam)):
        for inst in c.post_order():
            if inst is param or inst is root:
                continue
            find(inst)
            if inst.opcode == "get-tuple-element" and inst.operands[0] is param:
                i = _index(inst)
                d = 1 << i
                output = root.operands[i]
                if output is not inst:
                    union(output, inst)
            else:
                d = 0
                for o in inst.operands:
                    union(o, inst)
                    d |= deps.get(id(o), 0)
            deps[id(inst)] = d
            if side_effect(inst) or inst is cond.root:
                side_effecting |= d

    affecting_others = 0
    for i, output in enumerate(root.operands):
        affecting_others |= deps.get(id(output), 0) & ~(1 << i)
    dead = {i for i in range(n) if not (affecting_others >> i) & 1 and i not in used_after
            and not (side_effecting >> i) & 1}

    groups: dict[int, set[int]] = {}
    for i, output in enumerate(root.operands):
        groups.setdefault(find(output), set()).add(i)
    for param in (bparam, cparam):
        for g in param.users:
            groups.setdefault(find(g), set()).add(_index(g))

    def passed_through(i: int) -> bool:
        out = root.operands[i]
        return out.opcode == "get-tuple-element" and out.operands[0] is bparam and _index(out) == i

    for members in groups.values():
        if any((side_effecting >> i) & 1 or (i in used_after and not passed_through(i)) for i in members):
            continue
        dead |= members
    return dead


def _remove_dead_params(w: HloInstruction, body: HloComputation, cond: HloComputation, side_effect) -> int:
    dead = _dead_indices(w, body, cond, side_effect)
    n = len(w.shape.tuple_shapes)
    if not dead or len(dead) == n:
        return 0
    kept = [i for i in range(n) if i not in dead]
    new_index = {old: k for k, old in enumerate(kept)}
    old_shape = w.shape
    new_shape = Shape.tuple_of([old_shape.tuple_shapes[i] for i in kept])
    comp = w.computation
    init = w.operands[0]

    # the body's root: a tuple of the kept elements' next values
    root = body.root
    new_root = _add(body, root, "tuple", new_shape, [root.operands[i] for i in kept])
    body.root = new_root
    body.remove_instruction(root)
    for c in (body, cond):
        param = c.parameter(0)
        param.shape = new_shape
        for g in list(param.users):
            i = _index(g)
            if i in new_index:
                g.set_attribute("index", new_index[i])
            else:
                g.set_attribute("index", -1)  # dead: DCE removes it with what reads it
        _dce(c)
        if any(_index(g) < 0 for g in c.parameter(0).users):
            raise AssertionError(f"while loop '{w.name}': a removed element is still read in '{c.name}'")

    # the init: a tuple of the kept elements (XLA's get-tuple-elements of the old init, simplified)
    def init_element(i: int, before: HloInstruction) -> HloInstruction:
        if init.opcode == "tuple":
            return init.operands[i]
        return _gte(comp, before, init, i)

    new_init = _add(comp, w, "tuple", new_shape, [init_element(i, w) for i in kept])
    w.replace_operand(0, new_init)
    w.shape = new_shape
    _remap_induction_variable(w, new_index)

    # readers after the loop: a kept element from the loop, a removed one (passed through) from the init
    def element(i: int, before) -> HloInstruction:
        if i in new_index:
            k = new_index[i]
            return _gte(comp, before, w, k)
        return init_element(i, before)

    for g in [u for u in w.users if u.opcode == "get-tuple-element" and u is not new_init]:
        i = _index(g)
        if i in new_index:
            g.set_attribute("index", new_index[i])
        else:
            value = init_element(i, g)
            g.replace_all_uses_with(value)
            comp.remove_instruction(g)
    _rewire_other_readers(w, element, n)
    if not init.users and init is not comp.root:
        remove_unread(comp, [init])
    return len(dead)


# -- TryMergeInductionVariables ---------------------------------------------------------------------


def _scalar_int(instr: HloInstruction) -> int | None:
    """The value of an effective-scalar integer constant, else None (`m::ConstantScalar`)."""
    if instr.opcode != "constant" or not instr.shape.is_array or instr.shape.num_elements != 1:
        return None
    text = (instr.literal_text or "").strip().strip("{}").strip()
    try:
        return int(text)
    except ValueError:
        return None


def _increment(out: HloInstruction, param: HloInstruction, i: int, elem_ty: str) -> HloInstruction | None:
    """The constant `c` when `out` is `add(get-tuple-element(param, i), c)` (any order) of `elem_ty`."""
    if out.opcode != "add" or len(out.operands) != 2 or out.shape.element_type != elem_ty:
        return None
    for a, b in (out.operands, out.operands[::-1]):
        if (a.opcode == "get-tuple-element" and a.operands[0] is param and _index(a) == i
                and _scalar_int(b) is not None):
            return b
    return None


def _merge_induction_variables(w: HloInstruction, body: HloComputation, cond: HloComputation, elem_ty: str) -> int:
    init, root = w.operands[0], body.root
    if init.opcode != "tuple" or root.opcode != "tuple":
        return 0
    bparam, cparam = body.parameter(0), cond.parameter(0)
    counter: int | None = None
    steps: dict[int, HloInstruction] = {}
    for i, out in enumerate(root.operands):
        c = _increment(out, bparam, i, elem_ty)
        if c is None:
            continue
        if counter is None and _scalar_int(c) == 1 and _scalar_int(init.operands[i]) == 0:
            counter = i
        else:
            steps[i] = c
    if len(steps) + (counter is not None) < 2:
        return 0

    old_shape = w.shape
    n = len(old_shape.tuple_shapes)
    comp = w.computation
    scalar = Shape.array(elem_ty, [])
    added = counter is None
    if added:
        counter = n
        new_shape = Shape.tuple_of(list(old_shape.tuple_shapes) + [scalar])
        in_place = len(init.users) == 1 and init.computation is comp
        zero = _add(comp, init if in_place else w, "constant", scalar, [], prefix="constant")
        zero.literal_text = "0"
        if in_place:
            init.append_operand(zero)
            init.shape = new_shape
        else:
            init = _add(comp, w, "tuple", new_shape, list(init.operands) + [zero])
            w.replace_operand(0, init)
        # the body grows the new counter by one
        c_gte = _gte_shape(body, root, bparam, counter, scalar)
        one = _add(body, root, "constant", scalar, [], prefix="constant")
        one.literal_text = "1"
        root.append_operand(_add(body, root, "add", scalar, [c_gte, one]))
        _set_loop_shape(w, body, cond, new_shape)

    def reified(c: HloComputation, before, tup: HloInstruction, i: int, base: HloInstruction) -> HloInstruction:
        """`base + counter * step` (XLA's `convert_to_old_form`), `base` element i of `tup`."""
        shape = old_shape.tuple_shapes[i]
        count = _gte_shape(c, before, tup, counter, scalar)
        step = _add(c, before, "constant", steps[i].shape, [], prefix="constant")
        step.literal_text = steps[i].literal_text
        if count.shape.dims != shape.dims:
            count = _add(c, before, "reshape", shape, [count])
        if step.shape.dims != shape.dims:
            step = _add(c, before, "reshape", shape, [step])
        return _add(c, before, "add", shape, [base, _add(c, before, "multiply", shape, [count, step])])

    # the body and the condition read each induction variable as base + counter * step; the body passes it on
    for c, param in ((body, bparam), (cond, cparam)):
        for g in [u for u in param.users if _index(u) in steps]:
            i = _index(g)
            base = _gte(c, g, param, i)
            g.replace_all_uses_with(reified(c, g, param, i, base))
            c.remove_instruction(g)
    for i in steps:
        root.replace_operand(i, _gte(body, root, bparam, i))
    _dce(body)

    # after the loop: the same reading
    def element(i: int, before) -> HloInstruction:
        base = _gte(comp, before, w, i)
        return reified(comp, before, w, i, base) if i in steps else base

    for g in [u for u in w.users if u.opcode == "get-tuple-element" and _index(u) in steps]:
        i = _index(g)
        value = reified(comp, g, w, i, _gte(comp, g, w, i))
        g.replace_all_uses_with(value)
        comp.remove_instruction(g)
    _rewire_other_readers(w, element, n)
    return len(steps)


def _gte_shape(c: HloComputation, before, tup: HloInstruction, index: int, shape: Shape) -> HloInstruction:
    return _add(c, before, "get-tuple-element", shape, [tup], index=index)


# -- WhileLoopConstantSinking ------------------------------------------------------------------------


def _loops_outermost_first(module: HloModule) -> list[HloInstruction]:
    """The `while`s of the computations reached from the entry, a caller's before those of what it calls (XLA's
    agenda: a constant sunk into an outer loop's body reaches an inner loop's init in the same run)."""
    if module.entry is None:
        return []
    order, seen, todo = [], {id(module.entry)}, [module.entry]
    while todo:
        comp = todo.pop()
        for instr in comp.instructions:
            if instr.opcode == "while":
                order.append(instr)
            for callee in instr.called_computations:
                if id(callee) not in seen:
                    seen.add(id(callee))
                    todo.append(callee)
    return order


def _sunk_constant(comp: HloComputation, before: HloInstruction, constant: HloInstruction) -> HloInstruction:
    clone = _add(comp, before, "constant", constant.shape, [], prefix=f"{constant.name}.sunk")
    clone.literal_text = constant.literal_text
    return clone


def sink_constants(module: HloModule) -> int:
    """`WhileLoopConstantSinking` (XLA:GPU's default options: constants only, not their broadcasts), in place: a
    loop-invariant element (the body passes `get-tuple-element(param, i)` on at `i`) whose init is a `constant`
    is read as that constant in the body (where it has another reader) and in the condition; the element itself
    stays, passed on, for `WhileLoopSimplifier` to remove. (XLA replaces the readers of the get-tuple-element the
    body passes on; CSE has made it the only one of its index in XLA's pipeline, here every one is replaced.)
    **Returns:** how many (loop, element) pairs were sunk."""
    callers = module.callers()
    n = 0
    for w in _loops_outermost_first(module):
        init = w.operands[0]
        body, cond = w.attribute("body"), w.attribute("condition")
        if init.opcode != "tuple" or body.root is None or body.root.opcode != "tuple" or body is cond:
            continue
        if len(callers.get(body.name, ())) != 1 or len(callers.get(cond.name, ())) != 1:
            continue
        bparam, cparam = body.parameter(0), cond.parameter(0)
        root = body.root
        for i, out in enumerate(list(root.operands)):
            if not (out.opcode == "get-tuple-element" and out.operands[0] is bparam and _index(out) == i):
                continue
            value = init.operands[i]
            if value.opcode != "constant":
                continue
            sunk = False
            body_readers = [g for g in bparam.users if g.opcode == "get-tuple-element" and _index(g) == i]
            if any(u is not root for g in body_readers for u in g.users):
                constant = None
                for g in body_readers:
                    for u in list(g.users):
                        if u is root:
                            continue
                        constant = constant or _sunk_constant(body, body.instructions[0], value)
                        for k, op in enumerate(u.operands):
                            if op is g:
                                u.replace_operand(k, constant)
                sunk = True
            for g in [g for g in cparam.users if g.opcode == "get-tuple-element" and _index(g) == i]:
                if g.users:
                    g.replace_all_uses_with(_sunk_constant(cond, cond.instructions[0], value))
                    cond.remove_instruction(g)
                    sunk = True
            n += sunk
    return n


# -- the pass ----------------------------------------------------------------------------------------


def simplify_while_loops(module: HloModule) -> WhileSimplification:
    """One run of the simulated `WhileLoopSimplifier` over every `while` of `module`, in place (module
    docstring): per loop, its dead tuple elements removed, else its induction variables merged.
    **Returns:** a `WhileSimplification`."""
    loops = [i for _, i in module.instructions() if i.opcode == "while"]
    if not loops:
        return WhileSimplification()
    callers = module.callers()
    side_effect = _SideEffects()
    dead = merged = 0
    for comp in {id(w.computation): w.computation for w in loops}.values():
        _dce(comp)  # the DCE of XLA's pipeline (and of `Run`'s end): an unread get-tuple-element is no reader
    for w in loops:
        if w.computation is None:  # removed as unread
            continue
        parts = _loop_parts(w, callers)
        if parts is None:
            continue
        body, cond = parts
        removed = _remove_dead_params(w, body, cond, side_effect)
        if removed:
            dead += removed
            continue
        for elem_ty in _INDUCTION_TYPES:
            merged += _merge_induction_variables(w, body, cond, elem_ty)
    return WhileSimplification(dead, merged)
