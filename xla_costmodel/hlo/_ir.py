"""The typed HLO graph: modules, computations, instructions.

Instructions keep every attribute as its verbatim text and interpret it on
first access (`instruction.attributes[name]`), so reading a large module costs
little more than tokenizing it, and printing gives back exactly what was read.
Called computations are held as objects, so renaming a computation renames
every reference to it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ._attributes import (
    COMPUTATION_ATTRS,
    COMPUTATION_LIST_ATTRS,
    ComputationRef,
    format_attribute,
    parse_attribute,
)
from ._shape import Shape

# Attributes that name computations, in the order XLA prints them.
CALLED_COMPUTATION_ATTRS = COMPUTATION_ATTRS | COMPUTATION_LIST_ATTRS


class _Attributes(Mapping):
    """Read-only mapping view of an instruction's attributes, typed on access."""

    __slots__ = ("_instr",)

    def __init__(self, instr: "HloInstruction"):
        self._instr = instr

    def __getitem__(self, name: str) -> Any:
        return self._instr.attribute(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._instr._raw)

    def __len__(self) -> int:
        return len(self._instr._raw)

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k}={v}" for k, v in self._instr._raw.items()) + "}"


class HloInstruction:
    """One HLO instruction.

    **Attributes:**

    - `name`: the instruction's name, without `%`.
    - `opcode`: spelled as in HLO text (`add`, `get-tuple-element`, `fusion`).
    - `shape`: its result `Shape`.
    - `operands`: the operand instructions, in order.
    - `users`: instructions that use this one, in the order their uses were added.
    - `computation`: the `HloComputation` holding it.
    - `parameter_number`: N for `parameter(N)`, else None.
    - `literal_text`: the literal of a `constant(...)`, verbatim, else None.
    """

    __slots__ = (
        "name",
        "opcode",
        "shape",
        "operands",
        "users",
        "computation",
        "parameter_number",
        "literal_text",
        "_raw_store",
        "_pos",
        "_cache",
        "_called",
        "_src",
        "__weakref__",
    )

    def __init__(
        self,
        name: str,
        opcode: str,
        shape: Shape,
        operands: list["HloInstruction"] | None = None,
        attributes: Mapping[str, Any] | None = None,
        *,
        parameter_number: int | None = None,
        literal_text: str | None = None,
    ):
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[HloInstruction] = []
        self.users: list[HloInstruction] = []
        self.computation: HloComputation | None = None
        self.parameter_number = parameter_number
        self.literal_text = literal_text
        self._raw_store: dict[str, str | None] = {}
        self._pos: dict[str, tuple[int, int]] | None = None
        self._cache: dict[str, Any] | None = None
        self._called: dict[str, Any] | None = None
        self._src: tuple[str, str] | None = None
        for op in operands or ():
            self.append_operand(op)
        for key, value in (attributes or {}).items():
            self.set_attribute(key, value)

    # -- attributes -------------------------------------------------------
    @property
    def _raw(self) -> dict[str, str | None]:
        """Attribute texts by name (None marks a called computation held in `_called`)."""
        return self._raw_store

    @property
    def attributes(self) -> Mapping[str, Any]:
        """Every attribute by name, typed: tuples of ints, `Window`, dicts, computations, or raw text."""
        return _Attributes(self)

    @property
    def raw_attributes(self) -> dict[str, str]:
        """Every attribute's value as HLO text."""
        called = self._called
        return {
            key: (format_attribute(key, called[key]) if raw is None else raw)
            for key, raw in self._raw.items()
        }

    def attribute(self, name: str, default: Any = KeyError) -> Any:
        """The typed value of attribute `name`, or `default` when absent."""
        if self._called and name in self._called:
            return self._called[name]
        if name not in self._raw:
            if default is KeyError:
                raise KeyError(f"instruction '{self.name}' has no attribute '{name}'")
            return default
        cache = self._cache
        if cache is not None and name in cache:
            return cache[name]
        if self._pos is not None and name in self._pos:
            text, source = self._src
            start, end = self._pos[name]
            value = parse_attribute(name, text, start, end, source)
        else:
            raw = self._raw[name]
            value = parse_attribute(name, raw, 0, len(raw), f"<attribute {name} of {self.name}>")
        if cache is None:
            self._cache = cache = {}
        cache[name] = value
        return value

    def has_attribute(self, name: str) -> bool:
        return name in self._raw

    def set_attribute(self, name: str, value: Any) -> None:
        """Set an attribute from a typed value or from HLO text (a str is taken verbatim)."""
        if name in CALLED_COMPUTATION_ATTRS and not isinstance(value, str):
            if self._called is None:
                self._called = {}
            self._called[name] = value
            self._raw[name] = None  # placeholder keeps the attribute's position
            return
        self._raw[name] = value if isinstance(value, str) else format_attribute(name, value)
        if self._pos is not None:
            self._pos.pop(name, None)
        if self._cache is not None:
            self._cache.pop(name, None)
        if not isinstance(value, str) and self._cache is not None:
            self._cache[name] = value

    def remove_attribute(self, name: str) -> None:
        self._raw.pop(name, None)
        if self._called:
            self._called.pop(name, None)
        if self._cache:
            self._cache.pop(name, None)

    @property
    def metadata(self) -> dict[str, Any]:
        """The `metadata={...}` fields (op_name, source_file, stack_frame_id, ...), or {}."""
        return self.attribute("metadata", {}) if "metadata" in self._raw else {}

    @property
    def called_computations(self) -> list["HloComputation"]:
        """Computations this instruction calls (fusion body, reducer, loop body, branches, ...)."""
        if not self._called:
            return []
        out = []
        for value in self._called.values():
            if isinstance(value, (tuple, list)):
                out.extend(value)
            else:
                out.append(value)
        return out

    # -- convenience ------------------------------------------------------
    @property
    def fused_computation(self) -> "HloComputation | None":
        """The body of a `fusion`, else None."""
        if self.opcode in ("fusion", "fusion-start") and self._called and "calls" in self._called:
            return self._called["calls"]
        return None

    @property
    def fusion_kind(self) -> str | None:
        return self.attribute("kind", None) if self.opcode == "fusion" else None

    @property
    def is_root(self) -> bool:
        return self.computation is not None and self.computation.root is self

    @property
    def operand_names(self) -> list[str]:
        return [op.name for op in self.operands]

    # -- graph edits ------------------------------------------------------
    def append_operand(self, operand: "HloInstruction") -> None:
        self.operands.append(operand)
        if self not in operand.users:
            operand.users.append(self)

    def replace_operand(self, index: int, new: "HloInstruction") -> None:
        old = self.operands[index]
        self.operands[index] = new
        if old not in self.operands and self in old.users:
            old.users.remove(self)
        if self not in new.users:
            new.users.append(self)

    def replace_all_uses_with(self, new: "HloInstruction", users=None) -> None:
        """Point every user of this instruction, or only those in `users`, and its computation's root where
        it is, at `new`."""
        for user in list(self.users if users is None else users):
            for i, op in enumerate(user.operands):
                if op is self:
                    user.replace_operand(i, new)
        comp = self.computation
        if comp is not None and comp.root is self:
            comp.root = new

    def __repr__(self) -> str:
        ops = ", ".join(op.name for op in self.operands)
        if self.opcode == "parameter":
            ops = str(self.parameter_number)
        return f"<HloInstruction {self.name} = {self.shape} {self.opcode}({ops})>"


class HloComputation:
    """A computation: instructions in text (post-order) order and a root.

    **Attributes:**

    - `name`: without `%`.
    - `instructions`: in order.
    - `root`: the ROOT instruction (the last one when none is marked).
    - `is_entry`: True for the module's ENTRY computation.
    - `execution_thread`: from `, execution_thread="..."` after the body, else None.
    """

    __slots__ = ("name", "instructions", "root", "module", "is_entry", "execution_thread", "_by_name", "__weakref__")

    def __init__(self, name: str, instructions=(), root: HloInstruction | None = None):
        self.name = name
        self.instructions: list[HloInstruction] = []
        self._by_name: dict[str, HloInstruction] = {}
        self.root = root
        self.module: HloModule | None = None
        self.is_entry = False
        self.execution_thread: str | None = None
        for instr in instructions:
            self.add_instruction(instr)
        if self.root is None and self.instructions:
            self.root = self.instructions[-1]

    @property
    def parameters(self) -> list[HloInstruction]:
        """Parameter instructions ordered by parameter number."""
        params = [i for i in self.instructions if i.opcode == "parameter"]
        params.sort(key=lambda i: i.parameter_number)
        return params

    def parameter(self, number: int) -> HloInstruction:
        for i in self.instructions:
            if i.opcode == "parameter" and i.parameter_number == number:
                return i
        raise KeyError(f"computation '{self.name}' has no parameter({number})")

    def instruction(self, name: str) -> HloInstruction:
        """The instruction named `name` (with or without `%`).

        **Raises:** `KeyError` naming the computation and the names it has that are nearest to `name`.
        """
        try:
            return self._by_name[name.lstrip("%")]
        except KeyError:
            raise KeyError(_not_found(f"computation '{self.name}' has no instruction '{name}'", name,
                                      self._by_name, "instructions")) from None

    def __contains__(self, name: str) -> bool:
        return name.lstrip("%") in self._by_name

    def add_instruction(self, instr: HloInstruction, *, before: HloInstruction | None = None) -> HloInstruction:
        if instr.name in self._by_name:
            raise ValueError(f"computation '{self.name}' already has an instruction named '{instr.name}'")
        instr.computation = self
        if before is None:
            self.instructions.append(instr)
        else:
            self.instructions.insert(self.instructions.index(before), instr)
        self._by_name[instr.name] = instr
        return instr

    def insert_instructions(self, instrs: list[HloInstruction], before: HloInstruction) -> None:
        """Add `instrs`, in order, just before `before` (one search of the list, not one per instruction)."""
        for instr in instrs:
            if instr.name in self._by_name:
                raise ValueError(f"computation '{self.name}' already has an instruction named '{instr.name}'")
            instr.computation = self
            self._by_name[instr.name] = instr
        at = self.instructions.index(before)
        self.instructions[at:at] = instrs

    def remove_instruction(self, instr: HloInstruction) -> None:
        """Remove an instruction that has no users; detaches it from its operands."""
        if instr.users:
            raise ValueError(f"cannot remove '{instr.name}': still used by {[u.name for u in instr.users]}")
        if instr is self.root:
            raise ValueError(f"cannot remove '{instr.name}': it is the root of '{self.name}'")
        self.instructions.remove(instr)
        del self._by_name[instr.name]
        for op in set(instr.operands):
            if instr in op.users:
                op.users.remove(instr)
        instr.computation = None

    def rename_instruction(self, instr: HloInstruction, new_name: str) -> None:
        if new_name in self._by_name:
            raise ValueError(f"computation '{self.name}' already has an instruction named '{new_name}'")
        del self._by_name[instr.name]
        instr.name = new_name
        self._by_name[new_name] = instr

    def post_order(self) -> list[HloInstruction]:
        """Instructions with every operand before its users (text order is not guaranteed to be one)."""
        seen: set[int] = set()
        order: list[HloInstruction] = []
        for start in self.instructions:
            if id(start) in seen:
                continue
            stack = [(start, 0)]
            while stack:
                node, k = stack.pop()
                if k == 0:
                    if id(node) in seen:
                        continue
                if k < len(node.operands):
                    stack.append((node, k + 1))
                    op = node.operands[k]
                    if id(op) not in seen and op.computation is self:
                        stack.append((op, 0))
                else:
                    if id(node) not in seen:
                        seen.add(id(node))
                        order.append(node)
        return order

    def signature(self) -> str:
        """`(p0: f32[8], ...) -> f32[8]` as XLA prints it (shapes without layouts)."""
        params = ", ".join(f"{p.name}: {p.shape.without_layout()}" for p in self.parameters)
        root = self.root.shape.without_layout() if self.root is not None else "()"
        return f"({params}) -> {root}"

    def __iter__(self):
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"


class HloModule:
    """A parsed HLO module.

    **Attributes:**

    - `name`: the module name from the `HloModule` header.
    - `computations`: in text order.
    - `entry`: the ENTRY computation (the last one when none is marked).
    - `header_attributes`: header attributes (`entry_computation_layout`, `is_scheduled`, ...) as raw text.
    - `stack_frames`: the optimized text's stack-frame tables, parsed (empty if absent).
    """

    __slots__ = (
        "name", "computations", "entry", "header_attributes", "stack_frames", "_stack_frame_text", "_by_name", "_uniq",
        "_positions", "_entry_layout",
    )

    def __init__(self, name: str, computations=(), entry: HloComputation | None = None):
        self.name = name
        self.computations: list[HloComputation] = []
        self._by_name: dict[str, HloComputation] = {}
        self.header_attributes: dict[str, str] = {}
        self.stack_frames: dict[str, dict[int, Any]] = {}
        self._stack_frame_text: str = ""
        self._uniq: dict[str, int] = {}
        # Where each instruction was read (id -> character offset), for errors found after parsing.
        self._positions: dict[int, int] | None = None
        # The entry computation layout as the reader read it: (its text, parameter shapes, result shape).
        self._entry_layout: tuple | None = None
        for comp in computations:
            self.add_computation(comp)
        self.entry = entry
        if self.entry is None and self.computations:
            self.entry = self.computations[-1]
        if self.entry is not None:
            self.entry.is_entry = True

    def computation(self, name: str) -> HloComputation:
        """The computation named `name` (with or without `%`).

        **Raises:** `KeyError` naming the module and the names it has that are nearest to `name` (names are
        unique across the module, as XLA makes them: a name may have gained a `.N`).
        """
        try:
            return self._by_name[name.lstrip("%")]
        except KeyError:
            raise KeyError(_not_found(f"module '{self.name}' has no computation '{name}'", name, self._by_name,
                                      "computations")) from None

    def add_computation(self, comp: HloComputation, *, before: HloComputation | None = None) -> HloComputation:
        if comp.name in self._by_name:
            raise ValueError(f"module '{self.name}' already has a computation named '{comp.name}'")
        comp.module = self
        if before is None:
            self.computations.append(comp)
        else:
            self.computations.insert(self.computations.index(before), comp)
        self._by_name[comp.name] = comp
        return comp

    def remove_computation(self, comp: HloComputation) -> None:
        self.computations.remove(comp)
        del self._by_name[comp.name]
        comp.module = None

    def unique_name(self, prefix: str) -> str:
        """A computation or instruction name not yet used anywhere in the module (`prefix`, `prefix.1`, ...)."""
        taken = self._all_names()
        n = self._uniq.get(prefix, 0)
        name = prefix if n == 0 and prefix not in taken else None
        while name is None or name in taken:
            n += 1
            name = f"{prefix}.{n}"
        self._uniq[prefix] = n
        return name

    def _all_names(self) -> set[str]:
        names = set(self._by_name)
        for c in self.computations:
            names.update(c._by_name)
        return names

    def instructions(self):
        """Iterate over `(computation, instruction)` for every instruction in the module."""
        for comp in self.computations:
            for instr in comp.instructions:
                yield comp, instr

    def callers(self) -> dict[str, list[HloInstruction]]:
        """For each computation name, the instructions that call it."""
        out: dict[str, list[HloInstruction]] = {c.name: [] for c in self.computations}
        for _, instr in self.instructions():
            for callee in instr.called_computations:
                out.setdefault(callee.name, []).append(instr)
        return out

    def source_location(self, instr: HloInstruction) -> tuple[str, int] | None:
        """(file, line) of an instruction, from inline metadata or the stack-frame tables."""
        md = instr.metadata
        if "source_file" in md:
            return md["source_file"], int(md.get("source_line", 0))
        frame_id = md.get("stack_frame_id")
        if frame_id is None or not self.stack_frames:
            return None
        frame = self.stack_frames.get("StackFrames", {}).get(frame_id)
        if not isinstance(frame, dict):
            return None
        loc = self.stack_frames.get("FileLocations", {}).get(frame.get("file_location_id"))
        if not isinstance(loc, dict):
            return None
        file_name = self.stack_frames.get("FileNames", {}).get(loc.get("file_name_id"), "")
        return file_name, int(loc.get("line", 0))

    def to_text(self) -> str:
        """HLO text that XLA's parser accepts and that reparses to the same graph."""
        return module_to_text(self)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        n = sum(len(c.instructions) for c in self.computations)
        return f"<HloModule {self.name}: {len(self.computations)} computations, {n} instructions>"


def resolve_refs(value, module: HloModule):
    """Turn ComputationRef values into the module's computations (KeyError if missing)."""
    if isinstance(value, ComputationRef):
        return module.computation(value.name)
    if isinstance(value, tuple):
        return tuple(resolve_refs(v, module) for v in value)
    return value


def _not_found(message: str, name: str, names, what: str) -> str:
    """`message`, then the names nearest to `name` (or, with none near, a few of them)."""
    import difflib

    names = list(names)
    near = difflib.get_close_matches(name.lstrip("%"), names, n=5, cutoff=0.5)
    if near:
        return f"{message}; nearest: {', '.join(near)}"
    shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
    return f"{message}; its {what}: {shown}" if names else f"{message}; it has no {what}"


# -- printing: the long form XLA prints after optimization ----------------------------------


def instruction_to_text(instr: HloInstruction) -> str:
    """One instruction line (without indentation or `ROOT`)."""
    if instr.opcode == "parameter":
        body = str(instr.parameter_number)
    elif instr.opcode == "constant":
        body = instr.literal_text or ""
    else:
        body = ", ".join("%" + op.name for op in instr.operands)
    parts = [f"%{instr.name} = {instr.shape} {instr.opcode}({body})"]
    for key, value in instr.raw_attributes.items():
        parts.append(f"{key}={value}")
    return ", ".join(parts)


def computation_to_text(comp: HloComputation) -> str:
    lines = [f"{'ENTRY ' if comp.is_entry else ''}%{comp.name} {comp.signature()} {{"]
    for instr in comp.instructions:
        prefix = "ROOT " if instr is comp.root else ""
        lines.append(f"  {prefix}{instruction_to_text(instr)}")
    tail = "}"
    if comp.execution_thread is not None:
        tail += f', execution_thread="{comp.execution_thread}"'
    lines.append(tail)
    return "\n".join(lines)


def module_to_text(module: HloModule) -> str:
    header = f"HloModule {module.name}"
    for key, value in module.header_attributes.items():
        header += f", {key}={value}"
    blocks = [header]
    if module._stack_frame_text:
        blocks.append(module._stack_frame_text)
    # XLA wants callees before callers; keep text order, which already is, for parsed modules.
    for comp in module.computations:
        blocks.append(computation_to_text(comp))
    return "\n\n".join(blocks) + "\n"
