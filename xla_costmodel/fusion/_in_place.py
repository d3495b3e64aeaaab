"""`CanFuse`'s in-place safety (`ShouldFuseInPlaceOp`) and scatter rule (`CanEmitInputFusedScatter`)."""

from __future__ import annotations


from ..analysis.emission import fusion_pass_roots
from ..analysis.opcodes import is_elementwise
from ..hlo import HloInstruction
from ..hlo.editing import root_opcode

from ._budget import _body_instructions
from ._rejection import Rejection


# ---------------------------------------------------------------------------
# In-place rules


def _in_place_operands(instr: HloInstruction) -> list[tuple[int, HloInstruction | None]]:
    """Operand numbers whose buffer `instr` updates in place, with the in-place op (inside a fusion)."""
    op = instr.opcode
    if op == "dynamic-update-slice":
        return [(0, instr)]
    if op == "scatter":
        n = max(1, (len(instr.operands) - 1) // 2)
        return [(i, instr) for i in range(n)]
    fused = instr.fused_computation
    if fused is None:
        return []
    out = []
    for root in fusion_pass_roots(fused):
        node = root
        while node.opcode == "bitcast" and node.operands:
            node = node.operands[0]
        if node.opcode not in ("dynamic-update-slice", "scatter"):
            continue
        in_place = node
        n = 1 if node.opcode == "dynamic-update-slice" else max(1, (len(node.operands) - 1) // 2)
        for k in range(n):
            src = node.operands[k]
            while src.opcode in ("bitcast", "dynamic-update-slice", "scatter") and src.operands:
                src = src.operands[0]
            if src.opcode == "parameter":
                out.append((src.parameter_number, in_place))
    return out


def _non_elementwise(instr: HloInstruction) -> list[HloInstruction]:
    return [
        i
        for i in _body_instructions(instr)
        if i.opcode not in ("fusion", "bitcast", "parameter") and not is_elementwise(i)
    ]


def _constant_int(instr: HloInstruction) -> int | None:
    if instr.opcode != "constant" or instr.literal_text is None:
        return None
    text = instr.literal_text.strip().strip("{}").split(",")[0].strip()
    try:
        return int(text)
    except ValueError:
        try:
            return int(float(text))
        except ValueError:
            return None


def _real_operand(kernel: HloInstruction, operand: HloInstruction) -> HloInstruction:
    if kernel.opcode == "fusion" and operand.opcode == "parameter":
        return kernel.operands[operand.parameter_number]
    return operand


def _reachable(start: HloInstruction, targets: set[int]) -> bool:
    stack, seen = [start], set()
    while stack:
        x = stack.pop()
        if id(x) in targets:
            return True
        if id(x) in seen:
            continue
        seen.add(id(x))
        stack.extend(x.users)
    return False


def should_fuse_in_place_op(producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
    """`InstructionFusion::ShouldFuseInPlaceOp`: keep in-place updates of the consumer safe."""
    for number, in_place_op in _in_place_operands(consumer):
        buffer = consumer.operands[number]
        for i, o in enumerate(consumer.operands):
            if i != number and o is buffer:
                return Rejection("in-place", f"'{consumer.name}' reads its in-place buffer '{buffer.name}' twice")
        if not (buffer is producer or buffer in producer.operands):
            continue
        nonelem = _non_elementwise(producer)
        if len(nonelem) > 1:
            return Rejection("in-place", "the producer has several non-elementwise ops and touches the in-place buffer")
        if not nonelem:
            fused = consumer.fused_computation
            if fused is None:
                return None
            others = {id(i) for i in _non_elementwise(consumer) if i is not in_place_op}
            if producer in consumer.operands:
                param = fused.parameter(consumer.operands.index(producer))
                if others and _reachable(param, others):
                    return Rejection("in-place", "non-elementwise ops in the consumer would conflict in place")
            return None
        dus_ops = [i for i in _body_instructions(consumer) if i.opcode == "dynamic-update-slice"]
        if not dus_ops:
            return None
        if len(dus_ops) > 1:
            return Rejection("in-place", "several dynamic-update-slices in the consumer")
        dus = dus_ops[0]
        x = nonelem[0]
        rank = len(dus.shape.dims)
        if x.opcode == "slice":
            if x.shape != dus.operands[1].shape:
                return Rejection("in-place", "slice shape differs from the update shape")
            starts = x.attribute("slice", ())
            for d in range(rank):
                c = _constant_int(_real_operand(consumer, dus.operands[2 + d]))
                if c is None or d >= len(starts) or c != starts[d][0] or starts[d][2] != 1:
                    return Rejection("in-place", "dynamic-update-slice and slice index mismatch")
            return None
        if x.opcode == "dynamic-slice":
            if x.shape != dus.operands[1].shape:
                return Rejection("in-place", "dynamic-slice shape differs from the update shape")
            for d in range(rank):
                a = _real_operand(producer, x.operands[1 + d])
                b = _real_operand(consumer, dus.operands[2 + d])
                ca, cb = _constant_int(a), _constant_int(b)
                if ca != cb or (ca is None and a is not b):
                    return Rejection("in-place", "dynamic-update-slice and dynamic-slice index mismatch")
            return None
        return Rejection("in-place", f"unrecognized in-place update pair ({x.opcode})")
    return None


def _is_input_fusible_scatter(instr: HloInstruction) -> bool:
    if instr.opcode == "scatter":
        return True
    fused = instr.fused_computation
    return fused is not None and instr.fusion_kind == "kInput" and root_opcode(fused) == "scatter"


def can_emit_input_fused_scatter(producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
    """`CanEmitInputFusedScatter`."""
    if _is_input_fusible_scatter(producer):
        return Rejection("scatter-output", f"'{producer.name}' is a scatter")
    if not _is_input_fusible_scatter(consumer):
        return None
    fused = consumer.fused_computation
    if fused is not None:
        first = fused.root.operands[0]
        in_place = consumer.operands[first.parameter_number] if first.opcode == "parameter" else None
    else:
        in_place = consumer.operands[0]
    if in_place is producer:
        return Rejection("scatter-in-place-operand", f"'{producer.name}' is the buffer '{consumer.name}' updates")
    if in_place is not None and in_place in producer.operands:
        return Rejection("scatter-in-place-reader", f"'{producer.name}' reads '{in_place.name}'")
    return None


