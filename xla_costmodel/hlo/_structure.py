"""Content ids: one small integer per distinct kernel structure, for pricing caches.

A cost model prices a kernel from what it computes, not from where it sits
in the program: its opcode, result shape, attributes, the computations it
calls, and the shapes of its operands and which of them are the same value.
Real programs repeat the same kernels many times (every layer of a
transformer has the same fusions), so a fusion pass that keys its price
cache on content rather than on instruction objects asks the model once per
distinct kernel instead of once per kernel.

Names and `metadata` (op_name, source lines) are left out: they differ
between layers and do not change what a kernel does. Everything else is
kept verbatim, so two instructions share an id only when they are the same
kernel up to renaming. A fusion's id covers its fused computation
instruction by instruction, in body order, with operands given by position;
a fusion that grows in place must be told (`forget`). A fusion pass can
instead derive a new fusion's id from the pair it was fused
from (`record_fused`), which costs nothing per fused instruction.
"""

from __future__ import annotations

from ._ir import HloComputation, HloInstruction

__all__ = ["ContentIds"]

_IGNORED_ATTRIBUTES = frozenset({"metadata"})


class ContentIds:
    """Interns kernels (and pairs of kernels) by content.

    Ids are memoized per instruction object: after changing an instruction in
    place (a fusion that grows), call `record_fused` (or `forget`) for it.
    """

    __slots__ = ("_ids", "_local", "_comps", "_kernels", "_pairs")

    def __init__(self):
        self._ids: dict = {}
        self._local: dict[HloInstruction, int] = {}
        self._comps: dict[HloComputation, int] = {}
        self._kernels: dict[HloInstruction, int] = {}
        self._pairs: dict = {}

    def __len__(self) -> int:
        """Distinct structures interned so far."""
        return len(self._ids)

    def _intern(self, key) -> int:
        ids = self._ids
        i = ids.get(key)
        if i is None:
            i = ids[key] = len(ids)
        return i

    def _local_id(self, instr: HloInstruction) -> int:
        """What `instr` is by itself: opcode, shape, attributes, parameter number,
        literal, called computations (not its operands)."""
        called = instr._called
        attrs = tuple(
            (k, v if v is not None else self.computation_id_of(called[k]))
            for k, v in instr._raw.items()
            if k not in _IGNORED_ATTRIBUTES
        )
        return self._intern(("i", instr.opcode, instr.shape, attrs, instr.parameter_number, instr.literal_text))

    def computation_id_of(self, value) -> int | tuple:
        """The id of a called computation (or a tuple of ids for a list of them)."""
        if isinstance(value, HloComputation):
            return self.computation(value)
        if isinstance(value, (list, tuple)):
            return tuple(self.computation_id_of(v) for v in value)
        return self._intern(("v", repr(value)))

    def computation(self, comp: HloComputation) -> int:
        """The id of `comp`'s body: instructions in order, each with its operands by position.

        Memoized per computation object: use `kernel` for a fusion, whose body may grow.
        """
        hit = self._comps.get(comp)
        if hit is None:
            hit = self._comps[comp] = self._body_id(comp)
        return hit

    def _body_id(self, comp: HloComputation) -> int:
        local = self._local
        position: dict[int, int] = {}
        entries = []
        for i, instr in enumerate(comp.instructions):
            position[id(instr)] = i
            lid = local.get(instr)
            if lid is None:
                lid = local[instr] = self._local_id(instr)
            ops = instr.operands
            if ops:
                entries.append((lid, tuple([position.get(id(o), -1) for o in ops])))
            else:
                entries.append(lid)
        root = comp.root
        return self._intern(("c", tuple(entries), position.get(id(root), -1) if root is not None else -1))

    def kernel(self, instr: HloInstruction) -> int:
        """The id of `instr` priced as a kernel: itself (a fusion with its current body),
        its operands' shapes and which operands are the same instruction."""
        kid = self._kernels.get(instr)
        if kid is None:
            kid = self._kernels[instr] = self._kernel_id(instr)
        return kid

    def _kernel_id(self, instr: HloInstruction) -> int:
        fused = instr.fused_computation
        if fused is not None:
            # The fusion's own attributes (kind) and its body as it is now.
            attrs = tuple((k, v) for k, v in instr._raw.items() if v is not None and k not in _IGNORED_ATTRIBUTES)
            own = self._intern(("f", instr.opcode, instr.shape, attrs, self._body_id(fused)))
        else:
            own = self._local.get(instr)
            if own is None:
                own = self._local[instr] = self._local_id(instr)
        return self._intern(("k", own, self._operand_key(instr.operands)))

    def forget(self, instr: HloInstruction) -> None:
        """Drop `instr`'s memoized id (it changed in place)."""
        self._kernels.pop(instr, None)

    def record_fused(self, fusion: HloInstruction, pair_key: tuple) -> None:
        """Give `fusion`, just made (or grown) by fusing a pair whose `pair` key was
        `pair_key`, an id derived from that key, without walking its body.

        Fusing is deterministic, so equal pair keys give equal fusions; a
        derived id never equals a walked one, which only costs a cache miss.
        """
        self._kernels[fusion] = self._intern(("fused", pair_key))

    @staticmethod
    def _operand_key(operands) -> tuple:
        first: dict[int, int] = {}
        key = []
        for i, o in enumerate(operands):
            j = first.setdefault(id(o), i)
            key.append(o.shape if j == i else j)
        return tuple(key)

    def pair(self, producer: HloInstruction, consumer: HloInstruction) -> tuple:
        """A key for pricing `producer` fused into `consumer`: both kernels' ids and how
        their operands connect (the producer among the consumer's operands, directly or
        through get-tuple-elements, and operands the two share).

        Each kernel's id already records which of its own operands are the same
        instruction, so the key only adds, per consumer operand, what it is to the
        producer: the producer itself (-1), one of its get-tuple-elements, the
        producer's first operand that is the same instruction (its position), or none
        of these (-3).

        Memoized per pair of objects while both kernels keep their ids: operand lists
        only change when a kernel does (a fusion grows) or when an operand is replaced
        everywhere by an equal-shaped fusion, which keeps the wiring.
        """
        kernels = self._kernels
        kp = kernels.get(producer)
        if kp is None:
            kp = self.kernel(producer)
        kc = kernels.get(consumer)
        if kc is None:
            kc = self.kernel(consumer)
        memo = self._pairs.get((producer, consumer))
        if memo is not None and memo[0] == kp and memo[1] == kc:
            return memo
        position: dict = {}  # the producer's operands: first position of each
        for i, o in enumerate(producer.operands):
            if o not in position:
                position[o] = i
        get = position.get
        if producer.shape.element_type != "tuple":
            wiring = [-1 if o is producer else get(o, -3) for o in consumer.operands]
        else:
            wiring = []
            for o in consumer.operands:
                if o is producer:
                    wiring.append(-1)
                elif o.opcode == "get-tuple-element" and o.operands and o.operands[0] is producer:
                    wiring.append((-2, self.kernel(o)))
                else:
                    wiring.append(get(o, -3))
        wiring = tuple(wiring)
        key = self._pairs[(producer, consumer)] = (kp, kc, wiring)
        return key
