"""Graph editing on the typed HLO graph: unique names, cloning, copies, inlining.

- `NameUniquifier`: unique instruction and computation names for one module,
  as XLA's `NameUniquifier` gives them; functions that make many edits accept
  one (`names=`) so that uniquifying stays O(1) per name.
- `clone_instruction` / `clone_computation`: copies on new operands.
- `copy_module(module)`: an independent deep copy.
- `remove_instruction_and_body(instr)`: delete an unused instruction (and its
  fused computation).
- `inline_fusions(module)` / `unfuse_for_execution(module)` turn fusions back
  into plain instructions (or `call`s) so that a backend without fusion
  support of its own can run the module.
- `inline_calls(module)` inlines `call` instructions, as XLA's `CallInliner`
  does before fusion.

Making fusions (fused bodies, `fuse`, `hypothetical_fusion`, the batch
`FusionEditor` of a fusion pass) is the `fusion_engine` package, built on this module
(through `hlo.editing`).
"""

from __future__ import annotations

import copy
import re
from typing import Iterable

from ._ir import HloComputation, HloInstruction, HloModule

__all__ = [
    "NameUniquifier",
    "clone_instruction",
    "clone_computation",
    "copy_module",
    "inline_calls",
    "inline_fusions",
    "remove_instruction_and_body",
    "unfuse_for_execution",
]

_SUFFIX = re.compile(r"^(.*)\.(\d+)$")

class NameUniquifier:
    """Unique instruction and computation names for one module (separate namespaces, as in XLA).

    Like XLA's `NameUniquifier`, a taken name `add.3` is not extended to
    `add.3.1`: its numeric suffix is dropped and the next free `add.N` is used.
    """

    __slots__ = ("_instr", "_comp", "_next", "_keys")

    def __init__(self, module: HloModule | None = None):
        self._instr: set[str] = set()
        self._comp: set[str] = set()
        self._next: dict[tuple[bool, str], int] = {}
        # per namespace (instructions, computations): prefix -> (is_comp, prefix less its .N suffix)
        self._keys: tuple[dict, dict] = ({}, {})
        if module is not None:
            for comp in module.computations:
                self._comp.add(comp.name)
                self._instr.update(comp._by_name)

    def _unique(self, taken: set[str], prefix: str, is_comp: bool) -> str:
        if prefix not in taken:
            taken.add(prefix)
            return prefix
        keys = self._keys[is_comp]
        key = keys.get(prefix)
        if key is None:
            m = _SUFFIX.match(prefix)
            key = keys[prefix] = (is_comp, m.group(1) if m else prefix)
        root = key[1]
        n = self._next.get(key, 0)
        while True:
            n += 1
            name = f"{root}.{n}"
            if name not in taken:
                break
        self._next[key] = n
        taken.add(name)
        return name

    def instruction(self, prefix: str) -> str:
        """A free instruction name for `prefix` (now taken)."""
        return self._unique(self._instr, prefix, False)

    def computation(self, prefix: str) -> str:
        """A free computation name for `prefix` (now taken)."""
        return self._unique(self._comp, prefix, True)

    def release_instruction(self, name: str) -> None:
        self._instr.discard(name)

    def release_computation(self, name: str) -> None:
        self._comp.discard(name)


def names_for(module: HloModule | None, names: NameUniquifier | None) -> NameUniquifier:
    """`names` when given, else a new uniquifier for `module` (edits that share one stay O(1) a name)."""
    return names if names is not None else NameUniquifier(module)


# ---------------------------------------------------------------------------
# Cloning


def add_new_instruction(comp: HloComputation, before: HloInstruction | None, opcode: str, shape, operands,
                        prefix: str | None = None, **attributes) -> HloInstruction:
    """A new instruction of `comp`, named uniquely in its module after `prefix` (the opcode by default), its
    `attributes` set, inserted before `before` (at the end when None): the step every rewriting pass takes."""
    instr = HloInstruction(comp.module.unique_name(prefix or opcode), opcode, shape, list(operands))
    for key, value in attributes.items():
        instr.set_attribute(key, value)
    comp.add_instruction(instr, before=before)
    return instr


def clone_instruction(
    instr: HloInstruction,
    operands: list[HloInstruction],
    *,
    name: str | None = None,
    register_users: bool = True,
) -> HloInstruction:
    """A copy of `instr` (opcode, shape, attributes, called computations) on new operands.

    **Arguments:** `instr`; `operands`, the new operand list; `name` (default:
    `instr.name`); `register_users`, whether the new instruction is added to
    its operands' user lists (False for detached copies that must leave the
    module untouched).

    **Returns:** the new instruction, in no computation.
    """
    new = HloInstruction.__new__(HloInstruction)
    new.name = instr.name if name is None else name
    new.opcode = instr.opcode
    new.shape = instr.shape
    new.users = []
    new.computation = None
    new.parameter_number = instr.parameter_number
    new.literal_text = instr.literal_text
    # Share the parsed source text; copy the mutable maps so edits stay local.
    new._raw_store = dict(instr._raw_store)
    new._pos = dict(instr._pos) if instr._pos is not None else None
    new._src = instr._src
    new._cache = dict(instr._cache) if instr._cache else None
    new._called = dict(instr._called) if instr._called else None
    new.operands = list(operands)
    if register_users:
        for op in new.operands:
            users = op.users
            if new not in users:
                users.append(new)
    return new


def clone_computation(
    comp: HloComputation, *, name: str | None = None, names: NameUniquifier | None = None
) -> HloComputation:
    """A deep copy of a computation (same instruction names unless `names` uniquifies them).

    Called computations are shared, not copied. The copy belongs to no module.
    """
    new = HloComputation(name or comp.name)
    mapping: dict[int, HloInstruction] = {}
    for instr in comp.post_order():
        ops = [mapping[id(o)] for o in instr.operands]
        nm = names.instruction(instr.name) if names is not None else instr.name
        c = clone_instruction(instr, ops, name=nm)
        mapping[id(instr)] = c
        new.add_instruction(c)
    # keep parameters first, in number order (post_order may interleave them)
    new.instructions.sort(key=lambda i: 0 if i.opcode == "parameter" else 1)
    new.root = mapping[id(comp.root)]
    new.execution_thread = comp.execution_thread
    return new


def copy_module(module: HloModule, *, via_text: bool = False) -> HloModule:
    """An independent deep copy of `module`.

    **Arguments:** `via_text`: print and parse again instead of cloning the
    graph (slower; the default clone keeps text order, user order and every
    attribute, and shares only the immutable source text attributes are
    read from).

    **Returns:** the copy; editing it never changes `module`.
    """
    if via_text:
        from ._parser import parse_hlo

        return parse_hlo(module.to_text(), source=f"<copy of {module.name}>")
    new = HloModule(module.name)
    new.header_attributes = dict(module.header_attributes)
    new.stack_frames = copy.deepcopy(module.stack_frames) if module.stack_frames else {}
    new._stack_frame_text = module._stack_frame_text
    comp_map: dict[int, HloComputation] = {}
    for comp in module.computations:
        c = HloComputation(comp.name)
        c.execution_thread = comp.execution_thread
        comp_map[id(comp)] = c
        new.add_computation(c)
    instr_map: dict[int, HloInstruction] = {}

    def remap(value):
        if isinstance(value, HloComputation):
            return comp_map.get(id(value), value)
        if isinstance(value, (tuple, list)):
            return type(value)(remap(v) for v in value)
        return value

    for comp in module.computations:
        c = comp_map[id(comp)]
        for instr in comp.instructions:
            clone = clone_instruction(instr, [], register_users=False)
            if clone._called:
                clone._called = {k: remap(v) for k, v in clone._called.items()}
            instr_map[id(instr)] = clone
            c.add_instruction(clone)
        c.root = instr_map[id(comp.root)] if comp.root is not None else None
    for comp in module.computations:
        for instr in comp.instructions:
            clone = instr_map[id(instr)]
            clone.operands = [instr_map[id(o)] for o in instr.operands]
            clone.users = [instr_map[id(u)] for u in instr.users if id(u) in instr_map]
    new.entry = comp_map[id(module.entry)] if module.entry is not None else None
    if new.entry is not None:
        new.entry.is_entry = True
    return new


# ---------------------------------------------------------------------------
# Inlining (for execution, and CallInliner)


def _inline_at(
    site: HloInstruction, callee: HloComputation, names: NameUniquifier
) -> None:
    """Replace `site` (a fusion or call) by clones of `callee`'s body, in place."""
    comp = site.computation
    mapping: dict[int, HloInstruction] = {}
    clones = []
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            mapping[id(instr)] = site.operands[instr.parameter_number]
            continue
        c = clone_instruction(instr, [mapping[id(o)] for o in instr.operands], name=names.instruction(instr.name))
        clones.append(c)
        mapping[id(instr)] = c
    comp.insert_instructions(clones, before=site)
    value = mapping[id(callee.root)]
    was_root = comp.root is site
    site.replace_all_uses_with(value)
    if was_root:
        comp.root = value
    comp.remove_instruction(site)


def _drop_uncalled(module: HloModule, candidates: Iterable[HloComputation]) -> None:
    called = {id(c) for _, i in module.instructions() for c in i.called_computations}
    for c in candidates:
        if id(c) not in called and c is not module.entry and c.module is module:
            module.remove_computation(c)


def _inline_sites(module: HloModule, copy: bool, callee_of) -> HloModule:
    """Inline every instruction for which `callee_of(instr)` gives a computation, then drop the
    callees nothing calls any more. Callees come before callers in a module, so walking the
    computations in order inlines inner sites before their bodies are copied into callers."""
    if copy:
        module = copy_module(module)
    names = NameUniquifier(module)
    callees = []
    for comp in list(module.computations):
        for instr in list(comp.instructions):
            if instr.computation is not comp:
                continue
            callee = callee_of(instr)
            if isinstance(callee, HloComputation):
                _inline_at(instr, callee, names)
                callees.append(callee)
    _drop_uncalled(module, callees)
    return module


def inline_fusions(module: HloModule, *, copy: bool = True) -> HloModule:
    """The module with every `fusion` replaced by its fused instructions.

    **Arguments:** `module`; `copy`: work on a copy (default) or in place.
    **Returns:** the module without fusions (unused fused computations removed).
    """
    return _inline_sites(module, copy, lambda i: i.fused_computation if i.opcode == "fusion" else None)


def unfuse_for_execution(module: HloModule, *, mode: str = "inline") -> HloModule:
    """A copy of `module` that a backend can run whatever fusions it holds.

    **Arguments:** `mode`: `"inline"` (fused instructions put back in place of
    each fusion) or `"call"` (each fusion becomes `call(..., to_apply=body)`).

    **Returns:** a new module; `module` is not changed.
    """
    if mode == "inline":
        return inline_fusions(module, copy=True)
    if mode != "call":
        raise ValueError(f"unknown mode {mode!r}; valid: 'inline', 'call'")
    module = copy_module(module)
    for _, instr in list(module.instructions()):
        if instr.opcode == "fusion" and instr.fused_computation is not None:
            body = instr.fused_computation
            instr.opcode = "call"
            for key in list(instr.raw_attributes):
                if key not in ("metadata",):
                    instr.remove_attribute(key)
            instr.set_attribute("to_apply", body)
    return module


def inline_calls(module: HloModule, *, copy: bool = True) -> HloModule:
    """The module with every `call` inlined (what XLA's `CallInliner` does before fusion).

    Calls nested in called computations are inlined too (innermost first).
    **Returns:** the module (a copy unless `copy=False`).
    """
    return _inline_sites(module, copy, lambda i: i.attribute("to_apply", None) if i.opcode == "call" else None)


def remove_instruction_and_body(instr: HloInstruction, *, names: NameUniquifier | None = None) -> None:
    """Remove an unused instruction; a fusion's body goes with it."""
    comp = instr.computation
    comp.remove_instruction(instr)
    if names is not None:
        names.release_instruction(instr.name)
    fused = instr.fused_computation
    if fused is not None and comp.module is not None and fused.module is comp.module:
        comp.module.remove_computation(fused)
        if names is not None:
            names.release_computation(fused.name)
            for i in fused.instructions:
                names.release_instruction(i.name)
