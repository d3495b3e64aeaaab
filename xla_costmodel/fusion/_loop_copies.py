"""The copies XLA's `CopyInsertion` leaves around `while` loops and in `conditional` branches.

XLA:GPU runs, after all its fusion passes (`PreSchedulingCopyInsertionPipeline`):
`LoopScheduleLinearizer`, then `CopyInsertion` (`AddCopiesToResolveInterference`,
`RemoveUnnecessaryCopies`, `AddSpecialCaseCopies`), then `CopyFusion` (entry computation only, so a
copy inside a loop stays a kernel of its own). What is left of the loop copies, state element by
state element (an index `i` of the loop's tuple), is simulated here from the rules those passes
follow, not from XLA's live-range analysis itself:

- An element the body passes through unchanged (its root holds the parameter's element `i`) gets
  no copy (`IndicesToCopyForWhile`: the loop's value is the init's).
- In the body, `AddCopiesForWhile` copies the parameter's element and the root's;
  `LoopScheduleLinearizer` orders every reader of the old value before the instruction writing the
  new one (a control edge), unless that edge would close a cycle: the reader needs the new value
  (directly or not) or an earlier edge already orders it after. Then the old value is still live
  when the new one is written and one copy stays (`"body-read-after-write"`). Without such a
  reader both copies go (`RemoveUnnecessaryCopies`).
- The new value is the parameter's element at another index (a shift of the loop state), or is
  already at an earlier index of the root: the two elements cannot share a buffer, one copy stays
  (`"body-moved"`, `"body-replicated"`). A constant written into the state is read-only: it is
  copied (`AddSpecialCaseCopies`, `"read-only"`).
- Before the loop, the init's element is copied (`AddCopiesForWhile`) and the copy stays when the
  init value is still read by something not ordered before the loop, or feeds an earlier index of
  the same init (`"init-live"`, `"init-replicated"`); an init that is a constant or an entry
  parameter not aliased with an output is read-only and gets its copy back (`AddSpecialCaseCopies`:
  a read-only value in a buffer holding other values, `"read-only"`): a `fori_loop`'s counter that
  starts at a constant costs a copy kernel.
- A `conditional` whose output element differs between branches: a branch returning its own
  parameter's element, or a constant, copies it (`AddCopiesForConditional`, `"branch-forwarded"`).

An element nothing reads after the loop, nor the condition, and whose old value feeds only its
own new value is dead: XLA's `WhileLoopSimplifier` removed it before fusion, so it gets no copy.
An element or output that already holds a copy (a module through XLA's copy insertion) is left
alone, so the pass adds nothing the second time.

Values are followed through what defines no value on XLA:GPU (tuples and their
`get-tuple-element`s, bitcasts and layout-only reshapes/transposes), as `_copy_insertion` does.
Not simulated: nested tuples in a loop state (left alone), `AddCopiesForInPlaceOperation` outside
loops, and CopyRemover's finer cases (a copy kept between two loops sharing a buffer chain).
"""

from __future__ import annotations

from ..hlo import HloComputation, HloInstruction, HloModule
from ._copy_insertion import RootCopy, aliased_parameters, forwarded

__all__ = ["insert_loop_copies"]


class _Edges:
    """Control edges added by the simulated `LoopScheduleLinearizer` in one body (reader -> writer);
    mutable state of one pass over one body, hence no dataclass."""

    def __init__(self, succ: dict):
        self.succ = succ

    def reaches(self, start: HloInstruction, goal: HloInstruction) -> bool:
        """Whether `goal` depends on `start` through operands or the control edges added so far."""
        if start is goal:
            return True
        todo, seen = [start], {id(start)}
        while todo:
            node = todo.pop()
            for nxt in list(node.users) + self.succ.get(id(node), []):
                if nxt is goal:
                    return True
                if id(nxt) not in seen and nxt.computation is goal.computation:
                    seen.add(id(nxt))
                    todo.append(nxt)
        return False


def _readers(instr: HloInstruction) -> list[HloInstruction]:
    """The instructions that read the value `instr` holds (`HloValue::GetUses`): users seen through
    bitcasts and tuples (a tuple is a use only as its computation's root; a `get-tuple-element` of it
    passes the element on)."""
    out: list[HloInstruction] = []
    todo = [instr]
    seen = {id(instr)}
    while todo:
        node = todo.pop()
        if node is not instr and node.is_root:
            out.append(node)  # a computation's root is a use (`HloValue::ComputeUses`)
        for user in node.users:
            if forwarded(user) is not user and user.opcode != "get-tuple-element":
                nxt = [user]  # a bitcast: its readers read the value
            elif user.opcode == "tuple":
                nxt = [user] if user.is_root else []
                nxt += [g for g in user.users if g.opcode == "get-tuple-element"
                        and user.operands[int(g.attribute("index"))] is node]
                out.extend(u for u in user.users if u.opcode != "get-tuple-element")
            else:
                out.append(user)
                nxt = []
            for n in nxt:
                if id(n) not in seen:
                    seen.add(id(n))
                    todo.append(n)
    return out


def _reaches(start: HloInstruction, goal: HloInstruction) -> bool:
    """Whether `goal` depends on `start` (through operands, in one computation)."""
    return _Edges({}).reaches(start, goal)


def _branch_element(branch: HloComputation, value: HloInstruction) -> int | None:
    """Which part of the branch's parameter `value` (forwarded) is: -1 for the whole parameter,
    the element's index for a `get-tuple-element` of it, else None."""
    if value.opcode == "parameter" and value.computation is branch:
        return -1
    if value.opcode == "get-tuple-element" and value.operands:
        source = forwarded(value.operands[0])
        if source.opcode == "parameter" and source.computation is branch:
            return int(value.attribute("index"))
    return None


def _element_readers(operand: HloInstruction, index: int) -> list[HloInstruction]:
    """The readers of element `index` of `operand` (-1: of all of it), wherever its value is read."""
    if index < 0:
        return _readers(forwarded(operand))
    source = forwarded(operand)
    if source.opcode == "tuple" and index < len(source.operands):
        return _readers(forwarded(source.operands[index]))
    out = [u for u in source.users if u.opcode != "get-tuple-element"]
    for g in source.users:
        if g.opcode == "get-tuple-element" and int(g.attribute("index")) == index:
            out.extend(_readers(g))
    return out


def _in_place_round_trip(cond: HloInstruction, branch: int, index: int | None, element: int) -> bool:
    """Whether output `index` of `cond`, which branch `branch` makes of element `element` of its
    operand, is an element k of the enclosing computation's parameter that goes back to element k
    of that computation's root."""
    comp = cond.computation
    root, params = comp.root, comp.parameters
    if element < 0 or index is None or root is None or root.opcode != "tuple" or len(params) != 1:
        return False
    source = forwarded(cond.operands[branch + 1])
    if source.opcode != "tuple" or element >= len(source.operands):
        return False
    value = forwarded(source.operands[element])
    k = _element_of(params[0], value)
    if k is None or k >= len(root.operands):
        return False
    back = forwarded(root.operands[k])
    return back.opcode == "get-tuple-element" and back.operands[0] is cond and int(back.attribute("index")) == index


def _dead_elements(loop, body, param, root, elements, moved) -> set[int]:
    """The state elements XLA's `WhileLoopSimplifier` removes before fusion (dead tuple indices):
    nothing reads the loop's output there, the condition does not read it, and in the body the old
    value feeds nothing but the new value of the same element. They get no copies."""
    cond = loop.attribute("condition", None)
    cond_reads: set[int] = set()
    if cond is not None:
        for p in cond.parameters:
            for g in p.users:
                cond_reads.add(int(g.attribute("index")) if g.opcode == "get-tuple-element" else -1)
    if -1 in cond_reads or loop.is_root or any(u.opcode != "get-tuple-element" for u in loop.users):
        return set()
    out_read = {int(g.attribute("index")) for g in loop.users if _readers(g) or g.is_root}
    # which root elements each body instruction feeds (a bit per element)
    feeds: dict[int, int] = {}
    for k, operand in enumerate(root.operands):
        todo = [operand]
        while todo:
            node = todo.pop()
            if node.computation is not body or feeds.get(id(node), 0) >> k & 1:
                continue
            feeds[id(node)] = feeds.get(id(node), 0) | (1 << k)
            todo.extend(node.operands)
    dead = set()
    for i in moved:
        if i in out_read or i in cond_reads:
            continue
        others = 0
        for gte in elements.get(i, []):
            for reader in _readers(gte):
                if reader is root:
                    others = 1  # stored at another element
                    break
                others |= feeds.get(id(reader), 0) & ~(1 << i)
        if not others:
            dead.add(i)
    return dead


def _parameter_elements(param: HloInstruction) -> dict[int, list[HloInstruction]]:
    """The `get-tuple-element`s of a loop body's (or branch's) tuple parameter, by index."""
    out: dict[int, list[HloInstruction]] = {}
    for user in param.users:
        if user.opcode == "get-tuple-element":
            out.setdefault(int(user.attribute("index")), []).append(user)
    return out


def _element_of(param: HloInstruction, value: HloInstruction) -> int | None:
    """The index of `param`'s tuple that `value` (a forwarded value) is, or None."""
    if value.opcode == "get-tuple-element" and value.operands and value.operands[0] is param:
        return int(value.attribute("index"))
    return None


class _Inserter:
    def __init__(self, module: HloModule):
        self.module = module
        self.aliased = aliased_parameters(module)
        self.added: list[RootCopy] = []

    def read_only(self, value: HloInstruction) -> bool:
        if value.opcode == "constant":
            return True
        return (value.opcode == "parameter" and value.computation is self.module.entry
                and value.parameter_number not in self.aliased)

    def copy_operand(self, holder: HloInstruction, slot: int, reason: str, index: int) -> HloInstruction:
        """A copy of `holder`'s operand `slot`, read by `holder` in its place."""
        comp = holder.computation
        operand = holder.operands[slot]
        copy = HloInstruction(self.module.unique_name("copy"), "copy", operand.shape, [operand])
        comp.add_instruction(copy, before=holder)
        holder.replace_operand(slot, copy)
        self.added.append(RootCopy(comp.name, "{%d}" % index, copy.name, operand.name, reason))
        return copy


    def copy_element(self, elements: list[HloInstruction], reason: str, index: int) -> None:
        """A copy of a parameter's element, read by everything that read the element."""
        first = elements[0]
        comp = first.computation
        copy = HloInstruction(self.module.unique_name("copy"), "copy", first.shape, [first])
        at = comp.instructions.index(first) + 1
        comp.add_instruction(copy, before=comp.instructions[at] if at < len(comp.instructions) else None)
        for gte in elements:
            for user in list(gte.users):
                if user is copy or user is comp.root:
                    continue  # the root's own copy of an element it moves is `"body-moved"`
                for k, op in enumerate(user.operands):
                    if op is gte:
                        user.replace_operand(k, copy)
        self.added.append(RootCopy(comp.name, "{%d}" % index, copy.name, first.name, reason))

    # -- while ---------------------------------------------------------------------------
    def while_loop(self, loop: HloInstruction) -> None:
        try:
            body: HloComputation = loop.attribute("body")
        except KeyError:
            return
        init = loop.operands[0] if loop.operands else None
        root = body.root
        params = body.parameters
        if init is None or init.opcode != "tuple" or root is None or root.opcode != "tuple" or not params:
            return  # a state not built by a tuple: left alone (see the module doc)
        param = params[0]
        elements = _parameter_elements(param)
        moved = []  # the indices the body writes (not passed through)
        for i, value in enumerate(root.operands):
            if not value.shape.is_array:
                continue
            copied = value.opcode == "copy" or init.operands[i].opcode == "copy"
            if _element_of(param, forwarded(value)) != i and not copied:
                moved.append(i)  # (an element copied already, by XLA or an earlier run, is left alone)
        dead = _dead_elements(loop, body, param, root, elements, moved)
        moved = [i for i in moved if i not in dead]
        if not moved:
            return
        self.body_copies(body, param, root, elements, moved, dead)
        self.init_copies(loop, init, moved)

    def body_copies(self, body, param, root, elements, moved, dead=frozenset()) -> None:
        edges = _Edges({})
        seen_values: set[int] = set()
        before = [forwarded(v) for v in root.operands]  # the root's values before any copy changes them
        values = {i: before[i] for i in moved}
        old_readers = {i: [r for gte in elements.get(i, []) for r in _readers(gte)] for i in moved}
        for i in moved:
            value = values[i]
            j = _element_of(param, value)
            if value.opcode == "constant":
                self.copy_operand(root, i, "read-only", i)
                continue
            if j is not None:
                self.copy_operand(root, i, "body-moved", i)
                continue
            if id(value) in seen_values:
                self.copy_operand(root, i, "body-replicated", i)
                continue
            seen_values.add(id(value))
            writer = value if value.opcode != "get-tuple-element" else forwarded(value.operands[0])
            old = elements.get(i, [])
            late = False
            for reader in old_readers[i]:
                if reader is writer or reader.computation is not body or reader.opcode == "copy":
                    continue  # (a copy already reading the old value is what keeps it)
                if reader is root:
                    # the old value is also stored at another (live) element
                    late |= any(_element_of(param, v) == i for k, v in enumerate(before) if k != i and k not in dead)
                    continue
                if edges.reaches(writer, reader):
                    late = True  # LoopScheduleLinearizer cannot order it before the write
                else:
                    edges.succ.setdefault(id(reader), []).append(writer)
            if late and old:
                self.copy_element(old, "body-read-after-write", i)

    def init_copies(self, loop, init, moved) -> None:
        comp = loop.computation
        seen_values: set[int] = set()
        copied_read_only: set[int] = set()
        for i in moved:
            operand = init.operands[i]
            if not operand.shape.is_array:
                continue
            value = forwarded(operand)
            if self.read_only(value) and id(value) not in copied_read_only:
                copied_read_only.add(id(value))
                seen_values.add(id(value))
                self.copy_operand(init, i, "read-only", i)
                continue
            if id(value) in seen_values:
                self.copy_operand(init, i, "init-replicated", i)
                continue
            seen_values.add(id(value))
            for reader in _readers(value):
                if reader is loop or reader is init:
                    continue
                if reader.computation is not comp or not _reaches(reader, loop):
                    self.copy_operand(init, i, "init-live", i)
                    break

    # -- conditional -------------------------------------------------------------------
    def conditional(self, cond: HloInstruction) -> None:
        if cond.has_attribute("branch_computations"):
            branches = list(cond.attribute("branch_computations"))
        else:
            try:
                branches = [cond.attribute("true_computation"), cond.attribute("false_computation")]
            except KeyError:
                return
        roots = [b.root for b in branches]
        if any(r is None for r in roots) or len(branches) < 2:
            return
        if all(r.opcode == "tuple" for r in roots):
            slots = [(i, [r.operands[i] for r in roots]) for i in range(len(roots[0].operands))]
            # an output nobody reads: XLA's ConditionalSimplifier has removed it before copy insertion
            read = {int(g.attribute("index")) for g in cond.users
                    if g.opcode == "get-tuple-element" and (_readers(g) or g.is_root)}  # a root is read
            if cond.is_root or any(u.opcode != "get-tuple-element" for u in cond.users):
                read = set(range(len(slots)))
            slots = [(i, values) for i, values in slots if i in read]
        elif roots[0].shape.is_array:
            slots = [(None, list(roots))]
        else:
            return
        for i, outputs in slots:
            if any(o.opcode == "copy" for o in outputs):
                continue  # copied already
            values = [forwarded(o) for o in outputs]
            if not all(v.shape.is_array for v in values) or len({id(v) for v in values}) == 1:
                continue  # the same value whatever the branch: no phi, no copy
            for b, (branch, root, value) in enumerate(zip(branches, roots, values)):
                if value.opcode == "constant":
                    self.copy_output(root, i, "read-only")
                    continue
                j = _branch_element(branch, value)
                if j is None or b + 1 >= len(cond.operands):
                    continue
                # The branch returns (an element of) its operand. RemoveUnnecessaryCopies takes the
                # copy away only when that value round-trips in place: an element k of the enclosing
                # loop's state, whose conditional output goes back to element k of the state (the
                # buffer is the loop's either way); seen on XLA's own modules, where every other such
                # copy stays (the value then lives on in a buffer of its own).
                if not _in_place_round_trip(cond, b, i, j):
                    self.copy_output(root, i, "branch-forwarded")

    def copy_output(self, root: HloInstruction, index: int | None, reason: str) -> None:
        """A copy of a branch's output (element `index` of its tuple, or the whole of it when None)."""
        if index is not None:
            self.copy_operand(root, index, reason, index)
            return
        comp = root.computation
        copy = HloInstruction(self.module.unique_name("copy"), "copy", root.shape, [root])
        comp.add_instruction(copy)
        comp.root = copy
        self.added.append(RootCopy(comp.name, "{}", copy.name, root.name, reason))


def insert_loop_copies(module: HloModule) -> list[RootCopy]:
    """Add, in place, the copies XLA's copy insertion leaves around `module`'s loops and in its
    conditionals' branches (see the module doc). **Returns:** one `RootCopy` per copy added
    (`computation`: where it is; `index`: the loop-state or output element; `reason`)."""
    inserter = _Inserter(module)
    for comp in list(module.computations):
        for instr in list(comp.instructions):
            if instr.opcode == "while":
                inserter.while_loop(instr)
            elif instr.opcode == "conditional":
                inserter.conditional(instr)
    return inserter.added
