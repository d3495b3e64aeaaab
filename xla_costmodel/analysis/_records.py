"""Property records: their layout, adding them as XLA adds `Properties`, `InstructionCost`, and
float32 sums in visit order.

XLA keeps every property as a 32-bit float and adds them in the order
`HloComputation::Accept` visits instructions (depth-first from the root,
operands in order). Sums that float32 could not hold exactly (above 2**24,
or fractional) are re-added in float32 in that order (`sum_records`), so the
totals are XLA's bit for bit rather than "close". For the other sums the
order does not matter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from types import MappingProxyType

import numpy as np


# ---------------------------------------------------------------------------
# Property record layout

FLOPS, TRANS, BYTES, OUT, OPB, OPU, UTIL, EXTRA, UNPRICED, IR = range(10)

# XLA's property keys.
KEY_FLOPS = "flops"
KEY_TRANS = "transcendentals"
KEY_BYTES = "bytes accessed"
KEY_OPTIMAL_SECONDS = "optimal_seconds"
KEY_UTILIZATION = "utilization"
# GpuHloCostAnalysis keeps the IR size in the first reserved slot.
KEY_IR_SIZE = "reserved0"
KEY_COLL_SCALE = "Collective algorithm's scaling ratio"
KEY_COLL_DEVICES = "Number of devices of a collective group"
KEY_COLL_BYTES = "Number of bytes transferred."

FMA_FLOPS = 2  # HloCostAnalysis::kFmaFlops


def shape_index_str(index) -> str:
    """XLA's `ShapeIndex::ToString`: `{}`, `{1}`, `{0,2}`."""
    return "{" + ",".join(str(i) for i in index) + "}"


def operand_bytes_key(i: int, index=()) -> str:
    return f"{KEY_BYTES}{i}{shape_index_str(index)}"


def operand_utilization_key(i: int, index=()) -> str:
    return f"{KEY_UTILIZATION}{i}{shape_index_str(index)}"


def output_bytes_key(index=()) -> str:
    return f"{KEY_BYTES}out{shape_index_str(index)}"


def new_record() -> list:
    return [0.0, 0.0, 0.0, 0.0, [], [], 0.0, None, (), 0.0]


def copy_record(p: list) -> list:
    """A copy of record `p` that shares no list or dict with it."""
    return [p[FLOPS], p[TRANS], p[BYTES], p[OUT], list(p[OPB]), list(p[OPU]), p[UTIL],
            dict(p[EXTRA]) if p[EXTRA] else None, p[UNPRICED], p[IR]]


def set_extra(p: list, key: str, value: float) -> None:
    if p[EXTRA] is None:
        p[EXTRA] = {}
    p[EXTRA][key] = value


def get_extra(p: list, key: str) -> float:
    extra = p[EXTRA]
    return extra.get(key, 0.0) if extra else 0.0


def set_index(values: list, i: int, value: float) -> None:
    """`values[i] = value`, growing the list with zeros as needed."""
    n = len(values)
    if i >= n:
        values.extend([0.0] * (i + 1 - n))
    values[i] = value


def add_records(acc: list, p: list) -> None:
    """`acc += p` key by key, as XLA adds two `Properties`."""
    acc[FLOPS] += p[FLOPS]
    acc[TRANS] += p[TRANS]
    acc[BYTES] += p[BYTES]
    acc[OUT] += p[OUT]
    for slot in (OPB, OPU):
        src = p[slot]
        if src:
            dst = acc[slot]
            n = len(dst)
            if len(src) > n:
                dst.extend([0.0] * (len(src) - n))
            for i, v in enumerate(src):
                if v:
                    dst[i] += v
    acc[UTIL] += p[UTIL]
    if p[EXTRA]:
        if acc[EXTRA] is None:
            acc[EXTRA] = {}
        extra = acc[EXTRA]
        for k, v in p[EXTRA].items():
            extra[k] = extra.get(k, 0.0) + v
    if p[UNPRICED]:
        acc[UNPRICED] = merge_unpriced(acc[UNPRICED], p[UNPRICED])
    acc[IR] += p[IR]


def merge_unpriced(a: tuple, b: tuple) -> tuple:
    if not a:
        return b
    if not b:
        return a
    return a + tuple(x for x in b if x not in a)


_F32_EXACT = float(1 << 24)
# Fine fractions: multiples of 1/256 in [0, 2**16) (a slice's operand utilization, 1/2 or 1/4 of the
# operand read, and what it makes of the utilizations below it). Like the integers in (-2**24, 2**24),
# float32 holds each exactly; on top, every partial sum of non-negative fine fractions below 2**16 is
# one too, and a sum or product of two of either kind is exact in a double (at most 48 bits).
_FINE_GRID = 256.0
_FINE_LIMIT = float(1 << 16)


def exact_in_f32(v: float) -> bool:
    """Whether `v` is an integer in (-2**24, 2**24) or a fine fraction (see `_FINE_GRID`): then float32
    arithmetic whose every result is such a value gives the exact result, in any order."""
    if v == int(v):
        return -_F32_EXACT < v < _F32_EXACT
    w = v * _FINE_GRID
    return w == int(w) and 0.0 < v < _FINE_LIMIT


# ---------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class InstructionCost:
    """XLA's cost properties of one instruction (or a sum of several).

    Adding two costs (`a + b`) adds every property key by key, exactly as XLA
    adds `HloCostAnalysis::Properties`: per-operand values are added index by
    index, so the sum over a computation is what XLA reports for it.

    **Attributes:**

    - `flops`, `transcendentals`: XLA's counts (an FMA is 2 flops; a custom
      call is -1, "unknown").
    - `bytes_accessed`: bytes read and written.
    - `output_bytes_accessed`: XLA's `bytes accessedout{}`.
    - `operand_bytes_accessed`, `operand_utilization`: per operand index, XLA's
      `bytes accessed{i}{}` and `utilization{i}{}`. Utilization is the fraction
      of the operand read (below 1 for slices; above 1 when it is read several
      times, e.g. through a broadcast inside a GPU fusion).
    - `utilization`: inside a fusion, how many times this instruction's output
      is produced per execution of the fusion (XLA's `utilization`); 0 outside.
    - `ir_size`: the GPU analysis's IR size (1 per emitted instruction,
      replication inside fusions counted); 0 in the base analysis.
    - `extra`: every other XLA property by XLA's key (per-tuple-index bytes such
      as `bytes accessedout{1}`, `optimal_seconds`, collective keys).
    - `unpriced`: opcodes (or `custom-call:<target>`) whose cost is unknown,
      here or in the computations this instruction calls.
    """

    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_accessed: float = 0.0
    output_bytes_accessed: float = 0.0
    operand_bytes_accessed: tuple[float, ...] = ()
    operand_utilization: tuple[float, ...] = ()
    utilization: float = 0.0
    ir_size: float = 0.0
    extra: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    unpriced: tuple[str, ...] = ()

    @property
    def priced(self) -> bool:
        """True when every part of the cost is known."""
        return not self.unpriced

    def __add__(self, other: "InstructionCost") -> "InstructionCost":
        if not isinstance(other, InstructionCost):
            return NotImplemented
        return InstructionCost._from_record(_add_two(self._to_record(), other._to_record()))

    def __radd__(self, other):
        # Lets `sum(costs)` start from 0.
        if other == 0:
            return self
        return NotImplemented

    def to_xla_dict(self) -> dict[str, float]:
        """The properties under XLA's key names, non-zero ones only (as `cost_analysis()` prints them)."""
        return _record_to_xla_dict(self._to_record())

    # -- conversions to and from the interpreter's records
    @staticmethod
    def _from_record(p: list) -> "InstructionCost":
        return InstructionCost(
            float(p[FLOPS]),
            float(p[TRANS]),
            float(p[BYTES]),
            float(p[OUT]),
            tuple(float(v) for v in p[OPB]),
            tuple(float(v) for v in p[OPU]),
            float(p[UTIL]),
            float(p[IR]),
            MappingProxyType(dict(p[EXTRA])) if p[EXTRA] else MappingProxyType({}),
            tuple(p[UNPRICED]),
        )

    def _to_record(self) -> list:
        return [
            self.flops,
            self.transcendentals,
            self.bytes_accessed,
            self.output_bytes_accessed,
            list(self.operand_bytes_accessed),
            list(self.operand_utilization),
            self.utilization,
            dict(self.extra) if self.extra else None,
            tuple(self.unpriced),
            self.ir_size,
        ]


def _add_two(a: list, b: list) -> list:
    acc = copy_record(a)
    add_records(acc, b)
    return acc


def _record_to_xla_dict(p: list) -> dict[str, float]:
    out: dict[str, float] = {}

    def put(key, value):
        if value:
            out[key] = float(value)

    put(KEY_FLOPS, p[FLOPS])
    put(KEY_TRANS, p[TRANS])
    put(KEY_BYTES, p[BYTES])
    put(KEY_UTILIZATION, p[UTIL])
    for i, v in enumerate(p[OPU]):
        put(operand_utilization_key(i), v)
    for i, v in enumerate(p[OPB]):
        put(operand_bytes_key(i), v)
    put(output_bytes_key(), p[OUT])
    put(KEY_IR_SIZE, p[IR])
    if p[EXTRA]:
        for k, v in p[EXTRA].items():
            put(k, v)
    return out


# ---------------------------------------------------------------------------
# float32 sums


def _f32_seq_sum(values) -> float:
    """Sequential float32 sum (XLA's `properties_sum_[key] += value`), each value rounded to float32 first."""
    arr = np.asarray(values, dtype=np.float32)
    if arr.size == 0:
        return 0.0
    return float(np.cumsum(arr, dtype=np.float32)[-1])


def _needs_f32(total: float) -> bool:
    return total != 0.0 and (abs(total) >= _F32_EXACT or not float(total).is_integer())


def sum_records(records: list[list], *, refine_only: bool = False, exact: list | None = None) -> list:
    """Sum property records in order, with XLA's float32 arithmetic where it differs from exact.

    The returned record has one more item than a record: True when some sum
    needed float32 re-adding (so the order of `records` mattered). With
    `refine_only`, `exact` is a previous result whose float32 sums are redone
    in the order of `records`.
    """
    if not refine_only and len(records) < 64:
        acc = _sum_small(records)
        # Small integer sums are exact in float32: nothing to redo (the common case).
        if (
            acc[FLOPS] < _F32_EXACT and acc[BYTES] < _F32_EXACT and acc[TRANS] < _F32_EXACT
            and acc[EXTRA] is None and _all_small_ints(acc)
        ):
            acc.append(False)
            return acc
        return _refine_small(acc, records)
    return _sum_large(records, exact if refine_only else None)


def _sum_small(records: list[list]) -> list:
    """`add_records` over a few records, inlined (fusion bodies and reducers are small and many)."""
    f = t = b = o = u = ir = 0.0
    opb: list = []
    opu: list = []
    extra = None
    unpriced: tuple = ()
    for r in records:
        f += r[0]
        t += r[1]
        b += r[2]
        o += r[3]
        u += r[6]
        ir += r[9]
        src = r[4]
        if src:
            n = len(src)
            if n > len(opb):
                opb.extend([0.0] * (n - len(opb)))
            for i in range(n):
                opb[i] += src[i]
        src = r[5]
        if src:
            n = len(src)
            if n > len(opu):
                opu.extend([0.0] * (n - len(opu)))
            for i in range(n):
                opu[i] += src[i]
        if r[7]:
            if extra is None:
                extra = {}
            for k, v in r[7].items():
                extra[k] = extra.get(k, 0.0) + v
        if r[8]:
            unpriced = merge_unpriced(unpriced, r[8])
    return [f, t, b, o, opb, opu, u, extra, unpriced, ir]


def _all_small_ints(acc: list) -> bool:
    """True when every sum is an integer below 2**24 (float32 adds those exactly, in any order).

    A per-operand list is checked value by value: fractional utilizations can
    sum to an integer in double precision and to something else in float32.
    """
    for k in (FLOPS, TRANS, BYTES, OUT, UTIL, IR):
        v = acc[k]
        if v != int(v) or v >= _F32_EXACT or v <= -_F32_EXACT:
            return False
    for slot in (OPB, OPU):
        for v in acc[slot]:
            if v != int(v) or v >= _F32_EXACT:
                return False
    return True


def _refine_small(acc: list, records: list[list]) -> list:
    redone = False
    for k in (FLOPS, TRANS, BYTES, OUT, UTIL, IR):
        if _needs_f32(acc[k]):
            redone = True
            acc[k] = _f32_seq_sum([r[k] for r in records])
    for slot in (OPB, OPU):
        for i, v in enumerate(acc[slot]):
            if _needs_f32(v):
                redone = True
                acc[slot][i] = _f32_seq_sum([r[slot][i] for r in records if len(r[slot]) > i])
    if acc[EXTRA]:
        for key, v in acc[EXTRA].items():
            if _needs_f32(v):
                redone = True
                acc[EXTRA][key] = _f32_seq_sum([get_extra(r, key) for r in records])
    acc.append(redone)
    return acc


def _sum_large(records: list[list], exact: list | None) -> list:
    """`sum_records` for many records, with the per-operand-index sums vectorised."""
    redone = False
    acc = new_record()
    cols = list(zip(*records)) if records else [()] * 10
    for k in (FLOPS, TRANS, BYTES, OUT, UTIL, IR):
        total = exact[k] if exact is not None else sum(cols[k])
        if _needs_f32(total):
            redone = True
            total = _f32_seq_sum(cols[k])
        acc[k] = total
    for slot in (OPB, OPU):
        lists = cols[slot]
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        n = int(lengths.sum())
        if not n:
            continue
        values = np.fromiter(chain.from_iterable(lists), dtype=np.float64, count=n)
        starts = np.cumsum(lengths) - lengths
        position = np.arange(n) - np.repeat(starts, lengths)  # the operand index of each value
        totals = exact[slot] if exact is not None else np.bincount(position, weights=values).tolist()
        need = [i for i, v in enumerate(totals) if _needs_f32(v)]
        totals = list(totals)
        if need:
            redone = True
            order = np.argsort(position, kind="stable")  # record order kept within each index
            by_index = values.astype(np.float32)[order]
            bounds = np.searchsorted(position[order], np.arange(len(totals) + 1))
            for i in need:
                seg = by_index[bounds[i] : bounds[i + 1]]
                totals[i] = float(np.cumsum(seg, dtype=np.float32)[-1]) if seg.size else 0.0
        acc[slot] = totals
    extras = [e for e in cols[EXTRA] if e]
    if extras:
        acc[EXTRA] = {}
        e = acc[EXTRA]
        for extra in extras:
            for k, v in extra.items():
                e[k] = e.get(k, 0.0) + v
        for key, v in e.items():
            if _needs_f32(v):
                redone = True
                e[key] = _f32_seq_sum([get_extra(r, key) for r in records])
    unpriced = ()
    for u in cols[UNPRICED]:
        if u:
            unpriced = merge_unpriced(unpriced, u)
    acc[UNPRICED] = unpriced
    acc.append(redone)
    return acc
