"""The copies XLA's `CopyInsertion` adds at the entry computation's root, after fusion.

XLA:GPU runs copy insertion after all its fusion passes. Its special cases at the root of the
entry computation (`AddSpecialCaseCopies`, policy `copy_parameters_and_constants` and
`copy_root_replicated_buffers`, both set for the entry only) give every output its own writable
buffer:

- an output whose value is read-only, a constant or an entry parameter that is not aliased with
  an output (`ValueIsReadOnly`), is copied;
- an output whose buffer was already seen at an earlier output index is copied.

Each such copy is a kernel of the optimized module (an unfused `copy`): an update that returns a
constant at 32 outputs (`optax.adafactor`'s unused factored statistics) runs 32 copies.
Values are followed through what defines no value of its own on XLA:GPU: tuples and their
`get-tuple-element`s, and bitcasts (and the layout-only reshapes/transposes that are bitcasts
once layouts are assigned).

Then XLA:GPU's `CopyFusion` (entry computation only) makes a copy of a fusion's output an extra
output of that fusion when only elementwise instructions read the fusion's parameters and its root
is no reduction, scatter or dynamic-update-slice: the copy stops being a kernel of its own
(`fuse_copies`). A copy of a constant or a parameter stays a kernel.

Every copy of one producer becomes an output of it (an init of zeros copied into 13 elements of a
loop's state: one fusion with 14 outputs). The copies `while` loops and conditionals need are
`fusion._loop_copies`'s. Not simulated: copy fusion into a multi-output fusion (a copy of its
`get-tuple-element`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from typing import Callable

from ..analysis.opcodes import is_elementwise
from ..analysis.shapes import reshape_is_bitcast, transpose_is_bitcast
from ..hlo import HloInstruction, HloModule

__all__ = ["RootCopy", "aliased_parameters", "forwarded", "fuse_copies", "insert_root_copies"]

#: `input_output_alias={ {0}: (1, {}, may-alias), ... }`: the parameter numbers aliased with an output
_ALIASED_PARAMETER = re.compile(r"\}\s*:\s*\(\s*(\d+)\s*,")


@dataclass(frozen=True)
class RootCopy:
    """One copy added at the entry root: the output `index`, the `copy` made, the instruction it
    copies (`of`) and why (`"read-only"`: a constant or an unaliased entry parameter;
    `"replicated"`: a buffer already at an earlier output)."""

    computation: str
    index: str
    copy: str
    of: str
    reason: str


def _forwarded(instr: HloInstruction) -> HloInstruction:
    """The instruction whose value `instr` passes on unchanged (itself when it defines one)."""
    while True:
        op = instr.opcode
        if op == "bitcast" and len(instr.operands) == 1:
            instr = instr.operands[0]
        elif op in ("reshape", "transpose") and len(instr.operands) == 1 and _relabels(instr):
            instr = instr.operands[0]
        elif op == "get-tuple-element" and instr.operands and instr.operands[0].opcode == "tuple":
            instr = instr.operands[0].operands[int(instr.attribute("index"))]
        elif op == "get-tuple-element" and instr.operands and instr.operands[0].opcode == "while":
            # an element the loop passes through unchanged is its init's value (`HloDataflowAnalysis`)
            passed = _passed_through(instr.operands[0], int(instr.attribute("index")))
            if passed is None:
                return instr
            instr = passed
        else:
            return instr


#: the public name, for `fusion._loop_copies`
forwarded = _forwarded


def _passed_through(loop: HloInstruction, index: int) -> HloInstruction | None:
    """The init element of `loop` at `index` when its body returns its parameter's element there unchanged."""
    body = loop.attribute("body", None)
    init = loop.operands[0] if loop.operands else None
    if body is None or body.root is None or body.root.opcode != "tuple" or init is None or init.opcode != "tuple":
        return None
    params = body.parameters
    if not params or index >= len(body.root.operands) or index >= len(init.operands):
        return None
    value = _forwarded(body.root.operands[index])
    if (value.opcode == "get-tuple-element" and value.operands and value.operands[0] is params[0]
            and int(value.attribute("index")) == index):
        return init.operands[index]
    return None


def _relabels(instr: HloInstruction) -> bool:
    src, dst = instr.operands[0].shape, instr.shape
    if not (src.is_array and dst.is_array):
        return False
    if instr.opcode == "reshape":
        return reshape_is_bitcast(src, dst)
    return transpose_is_bitcast(src, dst, instr.attribute("dimensions", ()), ignore_unit_dims=True)


def _value_key(instr: HloInstruction):
    """What identifies the buffer of an output: the defining instruction, or (a multi-output
    instruction, tuple index) for a `get-tuple-element` of one."""
    src = _forwarded(instr)
    if src.opcode == "get-tuple-element" and src.operands:
        return (id(_forwarded(src.operands[0])), int(src.attribute("index"))), src
    return (id(src), None), src


def aliased_parameters(module: HloModule) -> frozenset[int]:
    """Entry parameter numbers aliased with an output (`input_output_alias`, from donation): writable."""
    text = module.header_attributes.get("input_output_alias", "")
    return frozenset(int(m) for m in _ALIASED_PARAMETER.findall(text))


def insert_root_copies(module: HloModule) -> list[RootCopy]:
    """Add, in place, the copies XLA's copy insertion adds at the root of `module`'s entry computation.

    **Returns:** one `RootCopy` per copy added, in output order.
    """
    entry = module.entry
    if entry is None or entry.root is None:
        return []
    aliased = aliased_parameters(module)
    seen: set = set()
    added: list[RootCopy] = []

    def read_only(src: HloInstruction) -> bool:
        if src.opcode == "constant":
            return True
        return src.opcode == "parameter" and src.parameter_number not in aliased

    def visit(holder: HloInstruction | None, slot: int, instr: HloInstruction, index: tuple[int, ...]) -> None:
        if instr.opcode == "tuple":
            for i, operand in enumerate(list(instr.operands)):
                visit(instr, i, operand, index + (i,))
            return
        if not instr.shape.is_array:
            return  # a token, or a tuple made by a multi-output instruction: left alone
        key, src = _value_key(instr)
        reason = "read-only" if read_only(src) else ("replicated" if key in seen else "")
        seen.add(key)
        if not reason:
            return
        copy = HloInstruction(module.unique_name("copy"), "copy", instr.shape, [instr])
        entry.add_instruction(copy, before=holder)
        if holder is None:
            entry.root = copy
        else:
            holder.replace_operand(slot, copy)
        added.append(RootCopy(entry.name, "{" + ",".join(map(str, index)) + "}", copy.name, instr.name, reason))

    visit(None, 0, entry.root, ())
    return added


def _is_bitcast(instr: HloInstruction) -> bool:
    return instr.opcode == "bitcast" or (instr.opcode in ("reshape", "transpose") and len(instr.operands) == 1
                                         and _relabels(instr))


def _only_elementwise_from_parameters(producer: HloInstruction) -> bool:
    """`OnlyElementwiseOpsReachableFromParams`: every instruction reading a parameter of the body,
    directly or not, is elementwise (and no copy), a bitcast or the root tuple. An unfused
    instruction counts as the one-instruction fusion XLA:GPU has made of it by then."""
    body = producer.fused_computation
    if body is None:
        return is_elementwise(producer) and producer.opcode != "copy"
    todo = [i for i in body.instructions if i.opcode == "parameter"]
    seen = {id(i) for i in todo}
    while todo:
        instr = todo.pop()
        for user in instr.users:
            if user.opcode == "tuple" or _is_bitcast(user):
                pass
            elif not is_elementwise(user) or user.opcode == "copy":
                return False
            if id(user) not in seen:
                seen.add(id(user))
                todo.append(user)
    return True


def copy_fusion_producer(producer: HloInstruction) -> bool:
    """Whether XLA:GPU's `CopyFusion` may make copies of `producer`'s output extra outputs of it."""
    if producer.opcode == "fusion":
        if str(producer.attribute("kind", "")) == "kCustom" or producer.shape.is_tuple:
            return False  # a Triton fusion; a multi-output fusion (its copies read a get-tuple-element)
        root = producer.fused_computation.root if producer.fused_computation is not None else None
        if root is None or root.opcode in ("reduce", "scatter", "dynamic-update-slice"):
            return False
    elif producer.shape.is_tuple:
        return False
    return _only_elementwise_from_parameters(producer)


def fuse_copies(module: HloModule,
                merge: Callable[[list[HloInstruction], HloInstruction], HloInstruction]) -> list[tuple]:
    """XLA:GPU's `CopyFusion` on the entry computation of `module`, in place.

    `merge(copies, producer)` makes the multi-output fusion of `producer` and every copy of its
    output in `copies` (the producer's output, then one per copy), as `CopyFusion` does.
    **Returns:** `(copy, producer)` names, one per copy fused.
    """
    entry = module.entry
    if entry is None:
        return []
    fused: list[tuple] = []
    for producer in entry.post_order():
        if producer.computation is not entry or producer.opcode in ("parameter", "constant"):
            continue
        copies = [u for u in producer.users if u.opcode == "copy" and u.shape == producer.shape]
        if not copies or not copy_fusion_producer(producer):
            continue
        name = producer.name
        merge(copies, producer)
        fused.extend((copy.name, name) for copy in copies)
    return fused
