"""HLO text from the typed graph, in the long form XLA prints after optimization."""

from __future__ import annotations

from ._ir import HloComputation, HloInstruction, HloModule


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
