"""Whether a kernel reads each operand coalesced, from how it indexes the operand.

XLA's legacy GPU model uses one yes/no answer for all reads of a kernel
(`IsReadCoalescedHeuristic`, `coalescing_analysis.cc`):

- unless the kernel uses the shared-memory transpose emitter, any instruction
  that transposes the minor-most dimension (`TransposesMinorDimension`) and
  does not read a broadcast or an iota makes every read uncoalesced;
- fusing two tiled reductions (producer and consumer both input-fusible
  reductions) makes every read uncoalesced.

On top of that (`access_patterns=True`), each operand is looked at on its own:
an operand read by a `gather` in rows shorter than one DRAM transaction, or by
a `slice` with a stride along its minor-most dimension, is read uncoalesced
(XLA's indexing-based analysis reaches the same answer for these). The rate is
still XLA's yes/no: an uncoalesced read moves one element per transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.emission import (
    is_input_fusible_reduction,
    launch_facts,
    most_minor_non_trivial,
    strided_minor_slice,
    warp_size,
)
from ..analysis.opcodes import IS_ELEMENTWISE
from ..analysis.shapes import first_array
from ..fusion_engine import select_in_body


@dataclass(frozen=True, slots=True)
class Coalescing:
    """Per kernel operand: coalesced or not, and why not."""

    coalesced: tuple[bool, ...]
    reasons: tuple[str, ...]

    @property
    def all_coalesced(self) -> bool:
        return all(self.coalesced)


# The opcodes `transposes_minor_dimension` can be true of.
_MAY_TRANSPOSE = frozenset({"copy", "transpose", "fusion"})


def transposes_minor_dimension(instr) -> bool:
    """XLA's `TransposesMinorDimension` (for a fusion: any fused instruction does)."""
    op = instr.opcode
    if op == "fusion" and instr.fused_computation is not None:
        return any(transposes_minor_dimension(h) for h in select_in_body(instr.fused_computation, _MAY_TRANSPOSE))
    if op == "copy":
        return most_minor_non_trivial(instr.operands[0].shape)[0] != most_minor_non_trivial(instr.shape)[0]
    if op == "transpose":
        src = instr.operands[0].shape
        pos_in_m2m = {d: i for i, d in enumerate(src.minor_to_major)}
        first_pos = most_minor_non_trivial(src)[1]
        perm = instr.attribute("dimensions", ())
        if len(perm) != len(instr.shape.dims) or len(src.dims) != len(perm):
            return False
        for out_dim in instr.shape.minor_to_major:
            if instr.shape.dims[out_dim] == 1:
                continue
            return pos_in_m2m[perm[out_dim]] > first_pos
        return False
    return False


def _reads_broadcast(instr) -> bool:
    """Walks single-operand elementwise/bitcast chains up to a broadcast or an iota."""
    while True:
        if instr.opcode in ("broadcast", "iota"):
            return True
        if len(instr.operands) != 1:
            return False
        if instr.opcode != "bitcast" and instr.opcode not in IS_ELEMENTWISE:
            return False
        instr = instr.operands[0]


def bad_transpose(instr) -> str:
    """The name of the first instruction of kernel `instr` that makes XLA's heuristic call its reads
    uncoalesced (it transposes the minor dimension, not of a broadcast or iota), or ''."""
    if instr.opcode == "fusion" and instr.fused_computation is not None:
        for h in select_in_body(instr.fused_computation, _MAY_TRANSPOSE):
            if transposes_minor_dimension(h) and not _reads_broadcast(h.operands[0]):
                return h.name
        return ""
    if transposes_minor_dimension(instr) and not _reads_broadcast(instr.operands[0]):
        return instr.name
    return ""


def read_coalesced_heuristic(emitter: str, producer, consumer, device, bad_transposes=None,
                             input_fusible=None) -> tuple[bool, str]:
    """XLA's `IsReadCoalescedHeuristic` for a kernel (`consumer=None`) or a producer-consumer pair.

    `bad_transposes`: `(bad_transpose(producer), bad_transpose(consumer))` when already known (a pair
    pricer keeps them per kernel: each kernel is priced with many others); `input_fusible`, likewise,
    a function giving a kernel's `is_input_fusible_reduction` on `device`.

    **Returns:** `(coalesced, reason)`.
    """
    if emitter != "transpose":
        if bad_transposes is not None:
            name = bad_transposes[0] or (bad_transposes[1] if consumer is not None else "")
        else:
            name = bad_transpose(producer)
            if not name and consumer is not None:
                name = bad_transpose(consumer)
        if name:
            return False, f"'{name}' transposes the minor dimension"
    if emitter == "reduction" and consumer is not None and input_fusible is None:
        warp = warp_size(device)
        input_fusible = lambda kernel: is_input_fusible_reduction(kernel, warp)  # noqa: E731
    if emitter == "reduction" and consumer is not None and input_fusible(producer) and input_fusible(consumer):
        return False, "two tiled reductions fused"
    return True, ""


_PASS_THROUGH = frozenset({"bitcast", "reshape", "convert", "copy", "negate", "abs", "bitcast-convert"})


def _gather_rows_contiguous(gather, device) -> bool:
    """A gather that reads at least one DRAM transaction per index along the minor dimension."""
    src = gather.operands[0].shape
    sizes = gather.attribute("slice_sizes", ())
    if not sizes or not src.dims:
        return False
    minor = src.minor_to_major[0]
    width = sizes[minor] * max((src.element_bits + 7) // 8, 1)
    return width >= (device.dram_to_l2_transaction_bytes or 64)


def _access_problem(value, device) -> str:
    """Why reading `value` (a fused parameter or a kernel operand) is uncoalesced, or ''."""
    seen = set()
    stack = [value]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for user in node.users:
            if user.opcode == "gather" and user.operands and user.operands[0] is node:
                if not _gather_rows_contiguous(user, device):
                    return f"gathered by '{user.name}'"
            elif user.opcode == "slice" and strided_minor_slice(user):
                return f"strided slice '{user.name}'"
            elif user.opcode in _PASS_THROUGH and user.shape.element_type != "tuple":
                stack.append(user)
    return ""


def kernel_coalescing(kernel, emitter: str, device, *, producer=None, consumer=None,
                      access_patterns: bool = True) -> Coalescing:
    """Coalescing of every operand of `kernel`.

    **Arguments:** `kernel` (a fusion or a lone instruction; for a
    producer-consumer estimate, the fused kernel); `emitter` (its
    `LaunchDimensions.emitter`); `device`; `producer`/`consumer`: for a fused
    pair, the two original instructions (XLA's heuristic looks at them, not at
    the fused kernel); `access_patterns`: add the per-operand gather/stride rule.

    **Returns:** a `Coalescing` (one entry per operand of `kernel`).
    """
    if producer is None:
        ok, why = read_coalesced_heuristic(emitter, kernel, None, device)
    else:
        ok, why = read_coalesced_heuristic(emitter, producer, consumer, device)
    n = len(kernel.operands)
    coalesced = [ok] * n
    reasons = [why] * n
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    # Only a gather or a strided slice makes a read uncoalesced by its access pattern.
    if access_patterns and (comp is None or launch_facts(kernel).access):
        for i, operand in enumerate(kernel.operands):
            if not coalesced[i]:
                continue
            if comp is not None:
                try:
                    value = comp.parameter(i)
                except KeyError:
                    continue
                problem = _access_problem(value, device)
            else:
                problem = _lone_access_problem(kernel, i, device)
            if problem:
                coalesced[i] = False
                reasons[i] = problem
    return Coalescing(tuple(coalesced), tuple(reasons))


@dataclass(frozen=True, slots=True)
class OperandAccess:
    """One side of a fused pair, for `pair_access` (the per-operand rule of `kernel_coalescing` without
    building the pair's fusion). Per operand position of the kernel: `problem`, whether the kernel's
    own reading of it is uncoalesced by its access pattern (`_access_problem` of its parameter, or
    `_lone_access_problem`); `to_value`, whether that operand reaches the kernel's value (its root)
    through `_access_problem`'s pass-through ops alone, so that in a fusion the kernel is the producer
    of, the consumer's reading of the value is also a reading of the operand."""

    problem: tuple[bool, ...]
    to_value: tuple[bool, ...]


def operand_access(kernel, device) -> OperandAccess:
    """`kernel`'s `OperandAccess` (problems only looked for where it holds a gather or strided slice)."""
    n = len(kernel.operands)
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    if comp is None:
        problem = tuple(bool(_lone_access_problem(kernel, i, device)) for i in range(n))
        through = kernel.opcode in _PASS_THROUGH and kernel.shape.element_type != "tuple"
        return OperandAccess(problem, (through,) * n)
    look = launch_facts(kernel).access
    problem, to_value = [], []
    for i in range(n):
        try:
            value = comp.parameter(i)
        except KeyError:
            problem.append(False)
            to_value.append(False)
            continue
        problem.append(bool(_access_problem(value, device)) if look else False)
        to_value.append(_passes_to(value, comp.root))
    return OperandAccess(tuple(problem), tuple(to_value))


def _passes_to(value, root) -> bool:
    """Whether `_access_problem`'s walk from `value` reaches `root` (through pass-through ops only)."""
    seen = set()
    stack = [value]
    while stack:
        node = stack.pop()
        if node is root:
            return True
        if id(node) in seen:
            continue
        seen.add(id(node))
        for user in node.users:
            if user.opcode in _PASS_THROUGH and user.shape.element_type != "tuple":
                stack.append(user)
    return False


def pair_access(producer, consumer, pa: OperandAccess, ca: OperandAccess) -> set:
    """The outer operands (by `id`) of the fusion of `producer` into `consumer` (read directly, not through
    get-tuple-elements) that `kernel_coalescing(fused, ...)` finds read uncoalesced by their access pattern,
    from each side's `OperandAccess`: in the fused body an operand's parameter leads to what each side does
    with it, and through the producer's value to what the consumer does with that."""
    via_value = any(ca.problem[j] for j, o in enumerate(consumer.operands) if o is producer)
    bad = set()
    for i, o in enumerate(producer.operands):
        if pa.problem[i] or (via_value and pa.to_value[i]):
            bad.add(id(o))
    for j, o in enumerate(consumer.operands):
        if o is not producer and ca.problem[j]:
            bad.add(id(o))
    return bad


def _lone_access_problem(instr, index: int, device) -> str:
    if instr.opcode == "gather" and index == 0 and not _gather_rows_contiguous(instr, device):
        return f"gathered by '{instr.name}'"
    if instr.opcode == "slice" and index == 0 and strided_minor_slice(instr):
        return f"strided slice '{instr.name}'"
    return ""


def utilization_rate(operand_shape, coalesced: bool, device) -> float:
    """XLA's `GetCoalescingUtilizationRate`: 1, or one element per DRAM-to-L2 transaction."""
    if coalesced:
        return 1.0
    shape = first_array(operand_shape)
    if operand_shape.element_type in ("tuple", "token"):
        size = 4
    else:
        size = max((shape.element_bits + 7) // 8, 1)
    return size / (device.dram_to_l2_transaction_bytes or 64)
