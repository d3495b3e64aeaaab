"""Join measured kernels to the instructions of the compiled HLO module.

The trace names each kernel by its HLO instruction (`hlo_op`) and module
(`hlo_module`); this module finds that instruction in the compiled module's
text, says which instructions are expected to run as kernels, cuts out the
text of one kernel (its instruction line plus every computation it calls),
and computes the simple per-kernel features the calibration dataset stores.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from ..analysis.opcodes import CALLS_KERNEL_SEQUENCES, FREE_OPCODES
from ..hlo import parse_hlo

__all__ = ["ModuleIndex"]

# Instructions that touch no data; `opcode_mix` leaves them out.
_NO_WORK = FREE_OPCODES | {"broadcast", "iota"}

_COMP_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s+\(.*\{\s*$")
_INSTR_LINE = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s+=\s")


@dataclass(frozen=True)
class KernelInfo:
    """Where an instruction lives and what kind of kernel it is."""

    name: str
    opcode: str
    computation: str
    role: str  # "entry", "control" (body of while/conditional/call), "inlined"
    shape: str
    fusion_kind: str | None


@dataclass
class ModuleIndex:
    """A compiled module's instructions by name, with kernel text and features.

    **Arguments:**

    - `text`: the compiled module's HLO text (`Compiled.as_text()`).

    **Attributes:**

    - `module`: the parsed `HloModule`.
    - `name`: the module name as traces spell it (`jit_f`).
    - `instructions`: `KernelInfo` by instruction name, for every instruction.
    """

    text: str
    module: object = field(init=False)
    name: str = field(init=False)
    instructions: dict[str, KernelInfo] = field(init=False)
    _instr: dict = field(init=False, repr=False)
    _blocks: dict[str, str] = field(init=False, repr=False)
    _lines: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self):
        self.module = parse_hlo(self.text, source="<compiled module>")
        self.name = self.module.name
        executed = self._executed_computations()
        self.instructions = {}
        self._instr = {}
        for comp in self.module.computations:
            role = "entry" if comp.is_entry else ("control" if comp.name in executed else "inlined")
            for instr in comp.instructions:
                self._instr[instr.name] = instr
                self.instructions[instr.name] = KernelInfo(
                    name=instr.name,
                    opcode=instr.opcode,
                    computation=comp.name,
                    role=role,
                    shape=str(instr.shape),
                    fusion_kind=instr.fusion_kind if instr.opcode == "fusion" else None,
                )
        self._blocks, self._lines = _split_text(self.text)

    def __reduce__(self):
        # Sent between processes (a `Measurement` from the measuring worker) as its text, parsed again there.
        return (ModuleIndex, (self.text,))

    def _executed_computations(self) -> set[str]:
        """Names of computations that run as kernel sequences (entry, loop bodies, branches)."""
        entry = self.module.entry
        seen = {entry.name}
        stack = [entry]
        while stack:
            comp = stack.pop()
            for instr in comp.instructions:
                if instr.opcode in CALLS_KERNEL_SEQUENCES:
                    for callee in instr.called_computations:
                        if callee.name not in seen:
                            seen.add(callee.name)
                            stack.append(callee)
        return seen

    def expected_kernels(self, *, nested: bool = False) -> list[str]:
        """Instructions that should each show up as a kernel when the module runs.

        **Arguments:**

        - `nested`: also list the instructions of loop bodies and branches
          (which run zero or more times, so they may legitimately be absent).

        **Returns:** instruction names, in text order.
        """
        roles = ("entry", "control") if nested else ("entry",)
        return [
            k.name
            for k in self.instructions.values()
            if k.role in roles and k.opcode not in FREE_OPCODES
        ]

    def consumers(self, name: str) -> list[str]:
        """Kernels that read this instruction's result, looking through buffer-only ops.

        A consumer cannot start before its producer has finished, which
        bounds the completion time of an asynchronous CPU thunk.
        """
        instr = self._instr.get(name)
        if instr is None:
            return []
        out: list[str] = []
        seen = {instr.name}
        stack = list(instr.users)
        while stack:
            u = stack.pop()
            if u.name in seen:
                continue
            seen.add(u.name)
            if u.opcode in FREE_OPCODES:
                stack.extend(u.users)
            else:
                out.append(u.name)
        return out

    def kernel_text(self, name: str) -> str:
        """The instruction's line followed by every computation it calls, transitively.

        This is enough text to recompute a fusion's features later (its fused
        computation, reducers, nested fusions), without the whole module.
        """
        instr = self._instr[name]
        parts = [self._lines.get(name, "").strip()]
        seen: set[str] = set()
        order: list[str] = []
        stack = list(instr.called_computations)
        while stack:
            comp = stack.pop()
            if comp.name in seen:
                continue
            seen.add(comp.name)
            order.append(comp.name)
            for i in comp.instructions:
                stack.extend(i.called_computations)
        # Callees first, as XLA prints them (a computation precedes its users).
        for cname in reversed(order):
            block = self._blocks.get(cname)
            if block:
                parts.append(block)
        return "\n\n".join(p for p in parts if p)

    def features(self, name: str) -> dict:
        """Simple features of one kernel instruction.

        **Returns:** a dict with `opcode`, `fusion_kind`, `element_type` (of the
        first result leaf), `out_elements`, `out_bytes`, `operand_bytes`,
        `n_operands`, `n_fused_ops` (instructions doing work in the fused
        computation, nested fusions included) and `opcode_mix` (JSON object of
        opcode counts over those).
        """
        instr = self._instr[name]
        leaves = [leaf for _, leaf in instr.shape.leaves()]
        first = leaves[0] if leaves else instr.shape
        mix: Counter = Counter()
        if instr.opcode == "fusion" and instr.fused_computation is not None:
            _count_ops(instr.fused_computation, mix)
        else:
            mix[instr.opcode] += 1
        return {
            "opcode": instr.opcode,
            "fusion_kind": instr.fusion_kind if instr.opcode == "fusion" else None,
            "element_type": first.element_type,
            "out_elements": int(sum(leaf.num_elements for leaf in leaves)),
            "out_bytes": int(instr.shape.byte_size),
            "operand_bytes": int(sum(op.shape.byte_size for op in instr.operands)),
            "n_operands": len(instr.operands),
            "n_fused_ops": int(sum(mix.values())),
            "opcode_mix": json.dumps(dict(sorted(mix.items())), sort_keys=True),
        }


def _count_ops(comp, mix: Counter) -> None:
    for i in comp.instructions:
        if i.opcode == "fusion" and i.fused_computation is not None:
            _count_ops(i.fused_computation, mix)
        elif i.opcode not in _NO_WORK:
            mix[i.opcode] += 1


def _split_text(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """Computation blocks by name, and instruction lines by instruction name, verbatim."""
    blocks: dict[str, str] = {}
    lines: dict[str, str] = {}
    current: str | None = None
    buf: list[str] = []
    for line in text.splitlines():
        if current is None:
            m = _COMP_HEADER.match(line)
            if m:
                current = m.group(2)
                buf = [line]
            continue
        buf.append(line)
        if line.startswith("}"):
            blocks[current] = "\n".join(buf)
            current = None
            continue
        m = _INSTR_LINE.match(line)
        if m:
            lines[m.group(1)] = line
    return blocks, lines
