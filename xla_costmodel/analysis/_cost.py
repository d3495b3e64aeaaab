"""The cost interpreter: XLA's `HloCostAnalysis` over our HLO graph.

`Analysis` costs each instruction the way XLA does: it fills a property
record with the defaults of `HloCostAnalysis::Preprocess`, applies the
opcode's rule from `_rules` (XLA's `Handle<Op>`), and keeps the record.
Sub-computations (fusion bodies, reducers, loop bodies, branches) are costed
on demand, once each, and their sums are what the calling instruction's rule
sees, as with XLA's `ProcessSubcomputation`. The module totals are the sum
over the entry computation, which is what `hlo_module_cost_analysis` and
`Compiled.cost_analysis()` report.

XLA keeps every property as a 32-bit float and adds them in the order
`HloComputation::Accept` visits instructions (depth-first from the root,
operands in order). Sums that float32 could not hold exactly (above 2**24, or
fractional) are re-added in float32 in that order, so the totals are XLA's
bit for bit rather than "close". For the other sums the order does not
matter, and instructions are simply taken in text order.

Large models repeat themselves: identical reducer computations and
structurally identical fusions (same instructions, shapes, wiring and
attributes) are costed once and their records shared (`_small_computation`,
`_fusion_key`), which is what makes a 10^5-instruction module take a few
times XLA's C++ time rather than a hundred.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from types import MappingProxyType
from typing import Any

import numpy as np

from .._gc import gc_paused

from . import _rules as R
from ._frontend import may_have_attribute as _may_have_attribute
from ._frontend import word_attribute as _word_attribute
from ._rules import (
    BYTES,
    EXTRA,
    FLOPS,
    IR,
    OPB,
    OPU,
    OUT,
    TRANS,
    UNPRICED,
    UTIL,
    add_records,
    copy_record,
    elements,
    get_extra,
    merge_unpriced,
    new_record,
    set_extra,
    set_index,
)

__all__ = [
    "CostAnalysisWarning",
    "InstructionCost",
    "cost_analysis",
    "instruction_costs",
    "module_cost",
    "while_trip_count",
]

_F32_EXACT = float(1 << 24)
# Computations this small are looked up by structure first (see `Analysis._small_computation`).
_SMALL_COMPUTATION = 8
# Opcodes whose rules read only shapes, operand wiring and the attributes `_fusion_key` records.
_FUSION_CACHE_SAFE = frozenset(
    R.ELEMENTWISE_OPCODES
    | {
        "parameter", "constant", "get-tuple-element", "bitcast", "broadcast", "reshape", "copy", "pad",
        "reverse", "iota", "concatenate", "slice", "dynamic-slice", "dynamic-update-slice", "gather",
        "tuple", "dot", "transpose", "reduce",
    }
)


class CostAnalysisWarning(UserWarning):
    """An instruction's cost is unknown (no rule for its opcode, or a custom call)."""


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

    put(R.KEY_FLOPS, p[FLOPS])
    put(R.KEY_TRANS, p[TRANS])
    put(R.KEY_BYTES, p[BYTES])
    put(R.KEY_UTILIZATION, p[UTIL])
    for i, v in enumerate(p[OPU]):
        put(R.operand_utilization_key(i), v)
    for i, v in enumerate(p[OPB]):
        put(R.operand_bytes_key(i), v)
    put(R.output_bytes_key(), p[OUT])
    put(R.KEY_IR_SIZE, p[IR])
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


# ---------------------------------------------------------------------------
# Visit order


def xla_visit_order(comp) -> list:
    """The order in which XLA's `HloComputation::Accept` visits `comp`'s instructions.

    Unreachable roots (instructions nobody uses, other than the root) come
    first in instruction order, then the root; from each, a depth-first
    post-order over operands (in order) and then control predecessors.
    """
    root = comp.root
    instrs = comp.instructions
    by_name = comp._by_name
    control = _control_successor_names(comp)
    starts = [i for i in instrs if not i.users and i is not root and i.name not in control]
    if root is not None:
        starts.append(root)
    has_control = bool(control)
    done: set = set()
    expanded: set = set()
    order: list = []
    append = order.append
    for start in starts:
        if start in done:
            continue
        stack = [start]
        pop = stack.pop
        push = stack.append
        while stack:
            node = stack[-1]
            if node in done:
                pop()
                continue
            if node in expanded:
                pop()
                done.add(node)
                append(node)
                continue
            expanded.add(node)
            children = node.operands
            if has_control and _may_have_attribute(node, "control-predecessors"):
                children = list(children) + [
                    by_name[n] for n in node.attribute("control-predecessors") if n in by_name
                ]
            for i in range(len(children) - 1, -1, -1):
                c = children[i]
                if c not in done:
                    push(c)
    if len(order) != len(instrs):
        # Instructions reachable only as control successors of dead code: visit in text order.
        for instr in instrs:
            if instr not in done:
                done.add(instr)
                order.append(instr)
    return order


def _is_scheduled(module) -> bool:
    return str(getattr(module, "header_attributes", {}).get("is_scheduled", "")).strip() == "true"


def _control_successor_names(comp) -> set[str]:
    """Names of instructions that some instruction of `comp` lists as a control predecessor."""
    names: set[str] = set()
    for instr in comp.instructions:
        if _may_have_attribute(instr, "control-predecessors"):
            names.update(instr.attribute("control-predecessors"))
    return names


# ---------------------------------------------------------------------------
# The analysis


_RULE_TABLES: dict[tuple, tuple[dict, dict]] = {}


def rule_tables(variant: str, count_multiple_input_accesses: bool, overrides=None) -> tuple[dict, dict]:
    """`(opcode -> rule function, opcode -> inline code)` of a variant, built once and shared (read-only).

    Opcodes whose rule is one of the trivial ones are handled inline in
    `Analysis._analyze_loop` (a function call costs as much as the rest of the
    visit); `overrides` (`{opcode: fn}`) replace rules of the variant.
    """
    key = (variant, bool(count_multiple_input_accesses), R.registry_version(),
           tuple(sorted(overrides.items())) if overrides else ())
    tables = _RULE_TABLES.get(key)
    if tables is not None:
        return tables
    table = {op: r.fn for op, r in R.rules(variant).items()}
    if overrides:
        table.update(overrides)
    inline: dict[str, int] = {}
    for op, fn in table.items():
        if fn is R.default_rule or (fn is R.broadcast_rule and not count_multiple_input_accesses):
            inline[op] = 0
        elif fn is R.elementwise_rule:
            inline[op] = 2 if op in R.TRANSCENDENTAL_OPCODES else 1
        elif fn is R.leaf_rule:
            inline[op] = 3
        elif fn is R.gte_rule:
            inline[op] = 4
    tables = _RULE_TABLES[key] = (table, inline)
    return tables


class Analysis:
    """One run of XLA's `HloCostAnalysis` (or, in `_gpu`, `GpuHloCostAnalysis`) over a module.

    **Arguments:**

    - `module`: an `HloModule`.
    - `count_multiple_input_accesses`: XLA's option of that name (False in
      `HloCostAnalysis`'s default and through jaxlib; True in the GPU pipeline).
    - `warn`: warn (`CostAnalysisWarning`) about unpriced opcodes.
    - `overrides`: `{opcode: rule}` replacing the variant's rules (see `kernel_cost`).
    """

    variant = "xla"
    immediate_constant_max_elements = 1
    # Reuse the costs of structurally identical fusions (see `_fusion_key`).
    cache_fusions = True

    def __init__(self, module, *, count_multiple_input_accesses: bool = False, warn: bool = True,
                 overrides=None):
        self.module = module
        self.count_multiple_input_accesses = bool(count_multiple_input_accesses)
        self.gpu = self.variant == "gpu"
        self.warn = warn
        self._rules, self._inline = rule_tables(self.variant, self.count_multiple_input_accesses, overrides)
        # Records by instruction (HloInstruction hashes by identity).
        self._records: dict[Any, list] = {}
        self._ir0 = 1.0 if self.gpu else 0.0
        self._subs: dict[int, list] = {}
        self._orders: dict[int, list] = {}
        self._size_cache: dict[int, int] = {}
        self._out_cache: dict[int, tuple[int, int]] = {}
        self._keep: list = []  # keeps shapes alive so that id() keys stay valid
        self._small_cache: dict[tuple, Any] = {}
        self._fusion_cache: dict[tuple, Any] = {}
        self._unpriced: dict[str, int] = {}
        self._first_seen: dict[str, str] = {}
        self._warned = False
        self._entry_sum: list | None = None

    # -- sizes ------------------------------------------------------------
    def size(self, shape) -> int:
        """XLA's shape size: bytes of the top level (pointer table for a tuple)."""
        k = id(shape)
        v = self._size_cache.get(k)
        if v is None:
            v = self._size_cache[k] = R.shape_size(shape)
            self._keep.append(shape)
        return v

    def out_size(self, shape) -> int:
        """Bytes of every array leaf (XLA's default output bytes)."""
        try:
            return self._out_cache[id(shape)][0]
        except KeyError:
            return self._shape_info(shape)[0]

    def _shape_info(self, shape) -> tuple[int, int]:
        info = (R.leaves_size(shape), elements(shape) if shape.element_type != "tuple" else 0)
        self._out_cache[id(shape)] = info
        self._keep.append(shape)
        return info

    # -- records ----------------------------------------------------------
    def record(self, instr) -> list:
        """The property record of an analysed instruction (KeyError if it was not reached)."""
        return self._records[instr]

    def has_record(self, instr) -> bool:
        return instr in self._records

    def visit_order(self, comp) -> list:
        k = id(comp)
        order = self._orders.get(k)
        if order is None:
            order = self._orders[k] = xla_visit_order(comp)
        return order

    def subcomputation(self, comp) -> list:
        """`ProcessSubcomputation`: cost `comp` (once) and return the sum of its instructions."""
        k = id(comp)
        s = self._subs.get(k)
        if s is None:
            s = self._subs[k] = self.analyze_computation(comp)
        return s

    def analyze_computation(self, comp) -> list:
        """Cost every instruction of `comp`; return their sum (XLA's `properties_sum_`)."""
        if len(comp.instructions) <= _SMALL_COMPUTATION:
            cached = self._small_computation(comp)
            if cached is not None:
                return cached
        return self._analyze_loop(comp)

    def _analyze_loop(self, comp) -> list:
        instrs = comp.instructions
        # The hot loop of the analysis: `visit` inlined, with everything it
        # looks up bound to locals (a large module has ~10^5-10^6 instructions).
        size_cache = self._size_cache
        out_cache = self._out_cache
        inline_table = self._inline
        records = self._records
        ir0 = self._ir0
        size = self.size
        shape_info = self._shape_info
        apply_rule = self._apply_rule
        recs = []
        append = recs.append
        for instr in instrs:
            operands = instr.operands
            try:
                opb = [size_cache[id(o.shape)] for o in operands]
            except KeyError:
                opb = [size(o.shape) for o in operands]
            shape = instr.shape
            try:
                out, n = out_cache[id(shape)]
            except KeyError:
                out, n = shape_info(shape)
            p = [0.0, 0.0, out + sum(opb), out, opb, [1.0] * len(opb), 0.0, None, (), ir0]
            inline = inline_table.get(instr.opcode)
            if inline is None:
                apply_rule(instr, p)
            elif inline:
                if inline < 3:
                    p[inline - 1] = n
                else:
                    # parameter, constant (3) and get-tuple-element (4) move no data
                    p[2] = 0
                    p[3] = 0
                    if inline == 4:
                        opb[0] = 0
            append(p)
        records.update(zip(instrs, recs))
        total = sum_records(recs)
        if total[-1]:
            # Some sum is not exact in float32: redo it in XLA's visit order.
            order = self._xla_order(comp)
            if order is not None:
                total = sum_records([records[i] for i in order], refine_only=True, exact=total)
        return total

    def _small_computation(self, comp) -> list | None:
        """Reuse the records of an identical small computation (JAX emits one reducer region per reduce).

        Only computations made of trivially priced instructions (parameters,
        constants, elementwise ops, ...) qualify: their records depend on
        nothing but the opcodes and the shapes, and are never edited later.
        Returns the sum, or None when `comp` does not qualify.
        """
        inline_table = self._inline
        key = []
        for instr in comp.instructions:
            if instr.opcode not in inline_table:
                return None
            key.append((instr.opcode, id(instr.shape), tuple(id(o.shape) for o in instr.operands)))
        key = tuple(key)
        hit = self._small_cache.get(key)
        records = self._records
        if hit is None:
            total = self._analyze_loop(comp)
            self._small_cache[key] = ([records[i] for i in comp.instructions], total)
            return total
        recs, total = hit
        for instr, r in zip(comp.instructions, recs):
            records[instr] = r
        return total

    def _xla_order(self, comp) -> list | None:
        """XLA's visit order, or None when the text order already is it.

        A module printed by XLA lists each computation's instructions in post
        order (`MakeInstructionPostOrder`), the sequence `Accept` visits; so
        when every operand comes before its users the text order is used.
        (Control edges are not checked here: they can only change the order
        of float32 rounding, by an ulp.)
        """
        if _is_scheduled(self.module):
            # A scheduled module is printed in schedule order, not post order.
            return self.visit_order(comp)
        placed: set = set()
        add = placed.add
        for instr in comp.instructions:
            for op in instr.operands:
                if op not in placed:
                    return self.visit_order(comp)
            add(instr)
        return None

    def entry_sum(self) -> list:
        if self._entry_sum is None:
            self._entry_sum = self.subcomputation(self.module.entry)
        return self._entry_sum

    def visit(self, instr) -> list:
        """Preprocess + handler + postprocess for one instruction; stores and returns its record."""
        opb = [self.size(o.shape) for o in instr.operands]
        out, n = self._shape_info(instr.shape) if id(instr.shape) not in self._out_cache else self._out_cache[id(instr.shape)]
        p = [0.0, 0.0, out + sum(opb), out, opb, [1.0] * len(opb), 0.0, None, (), self._ir0]
        self._apply_rule(instr, p)
        self._records[instr] = p
        return p

    def _apply_rule(self, instr, p: list) -> None:
        """The opcode's rule (XLA's `Handle<Op>`) and the `optimal_seconds` rule of `Postprocess`."""
        opcode = instr.opcode
        rule = self._rules.get(opcode)
        if rule is None:
            p[UNPRICED] = (opcode,)
            self._note_unpriced(opcode, instr)
            return
        rule(self, instr, p)
        if p[UNPRICED] and opcode == "custom-call":
            for label in p[UNPRICED]:
                if label.startswith("custom-call"):
                    self._note_unpriced(label, instr)
        extra = p[EXTRA]
        if extra and R.KEY_OPTIMAL_SECONDS in extra and opcode not in R.KEEPS_OPTIMAL_SECONDS:
            del extra[R.KEY_OPTIMAL_SECONDS]

    def _note_unpriced(self, label: str, instr) -> None:
        if label not in self._unpriced:
            comp = instr.computation.name if instr.computation is not None else "?"
            self._first_seen[label] = f"'{instr.name}' in computation '{comp}'"
        self._unpriced[label] = self._unpriced.get(label, 0) + 1

    def emit_warnings(self, stacklevel: int = 3) -> None:
        """One `CostAnalysisWarning` listing what could not be priced (if anything, and once)."""
        if not self.warn or not self._unpriced or self._warned:
            return
        self._warned = True
        parts = []
        for label, count in self._unpriced.items():
            why = "unknown cost (XLA reports -1)" if label.startswith("custom-call") else "no cost rule"
            parts.append(f"{label} x{count} ({why}; first at {self._first_seen[label]})")
        warnings.warn(
            f"module '{self.module.name}': {len(parts)} kind(s) of instruction could not be priced and are "
            f"reported as unpriced, not as zero: " + "; ".join(parts),
            CostAnalysisWarning,
            stacklevel=stacklevel + 1,
        )

    @property
    def unpriced(self) -> dict[str, int]:
        """Unpriced opcode (or `custom-call:<target>`) -> number of instructions."""
        return dict(self._unpriced)

    # -- fusion (HloCostAnalysis::HandleFusion) ----------------------------
    def fusion(self, instr, p: list) -> None:
        comp = instr.fused_computation
        if comp is None:
            raise ValueError(f"fusion '{instr.name}' has no fused computation (calls=...)")
        if _word_attribute(instr, "kind") == "kCustom":
            # XLA prices a custom fusion holding a gather or scatter as that op alone.
            for h in comp.instructions:
                if h.opcode == "gather":
                    R.gather_rule(self, h, p)
                    return
                if h.opcode == "scatter":
                    R.scatter_rule(self, h, p)
                    return
        key = self._fusion_key(instr, comp) if self.cache_fusions else None
        if key is not None:
            hit = self._fusion_cache.get(key)
            if hit is not None:
                inner, sub, result = hit
                self._records.update(zip(comp.instructions, inner))
                self._subs[id(comp)] = sub
                p[:] = copy_record(result)
                return
        # Not through `subcomputation`: its cache of small computations shares
        # records between look-alikes, and the fusion writes into these.
        sub = self._subs.get(id(comp))
        if sub is None:
            sub = self._subs[id(comp)] = self._analyze_loop(comp)
        p[:] = copy_record(sub)
        p[BYTES] = 0.0
        self._fusion_output_bytes(instr, comp, p)
        params, constants = self.fusion_utilizations(instr, comp, p)
        if constants:
            self._fusion_constants(constants, p)
        self._fusion_operand_bytes(params, p)
        if key is not None:
            records = self._records
            self._fusion_cache[key] = ([records[h] for h in comp.instructions], sub, copy_record(p))

    def _fusion_key(self, instr, comp) -> tuple | None:
        """A key equal for fusions whose costs are certainly equal, or None.

        A model repeats the same fusions layer after layer (the 48-layer
        transformer has ~50 distinct ones among ~3000). Two fusions get the
        same key when their fused computations have the same instructions
        (opcode, shape, operand wiring, parameter numbers and every attribute
        a rule reads) and the fusions the same shape and kind; only opcodes
        whose rules read nothing else are admitted. Look-alikes then share
        their fused instructions' records (nothing edits those afterwards in
        the base analysis).
        """
        safe = _FUSION_CACHE_SAFE
        position: dict = {}
        parts = [id(instr.shape), _word_attribute(instr, "kind"), len(instr.operands)]
        for k, h in enumerate(comp.instructions):
            op = h.opcode
            if op not in safe:
                return None
            position[h] = k
            try:
                wiring = tuple([position[o] for o in h.operands])
            except KeyError:  # operands listed after their user: let the general path handle it
                return None
            extra = None
            if op == "parameter":
                extra = h.parameter_number
            elif op == "dot" or op == "transpose":
                extra = R._attr_tuple(h, "lhs_contracting_dims" if op == "dot" else "dimensions")
            elif op == "reduce":
                # Identical reducers share one cached sum (see `_small_computation`).
                extra = id(self.subcomputation(h.attribute("to_apply")))
            elif op == "get-tuple-element":
                extra = _word_attribute(h, "index")
            parts.append((op, id(h.shape), wiring, extra))
        parts.append(position.get(comp.root))
        return tuple(parts)

    def _set_out(self, p: list, index: tuple, value: float) -> None:
        if index:
            set_extra(p, R.output_bytes_key(index), value)
        else:
            p[OUT] = value

    def _get_out(self, p: list, index: tuple) -> float:
        return get_extra(p, R.output_bytes_key(index)) if index else p[OUT]

    def _fusion_output_bytes(self, instr, comp, p: list) -> None:
        """`FusionProcessOutputBytesAccessed`: every output leaf written, an in-place update only in part."""
        root = comp.root
        shape = instr.shape
        if shape.element_type != "tuple":
            if root.opcode == "dynamic-update-slice":
                size = float(self.size(root.operands[1].shape))
                set_index(self._records[root][OPU], 0, 0.0)
            else:
                size = float(self.size(shape))
            p[BYTES] += size
            p[OUT] = size
            return
        for index, leaf in R.array_leaves(shape):
            r = root
            if len(index) == 1 and root.opcode == "tuple":
                r = root.operands[index[0]]
            if r.opcode == "dynamic-update-slice":
                size = float(self.size(r.operands[1].shape))
                set_index(self._records[r][OPU], 0, 0.0)
            else:
                size = float(self.size(leaf))
            p[BYTES] += size
            self._set_out(p, index, size)
        p[OUT] = 0.0

        def propagate(sub_shape, index):
            current = self._get_out(p, index)
            if current != 0 or sub_shape.element_type != "tuple":
                return current
            total = 0.0
            for i, s in enumerate(sub_shape.tuple_shapes):
                total += propagate(s, index + (i,))
            self._set_out(p, index, total)
            return total

        propagate(shape, ())

    def fusion_utilizations(self, instr, comp, p: list) -> tuple[list, list]:
        """Base XLA: every fused instruction is produced once per fusion execution.

        **Returns:** the fused computation's parameters and constants (found on the way).
        """
        records = self._records
        params = []
        constants = []
        for h in comp.instructions:
            records[h][UTIL] = 1.0
            op = h.opcode
            if op == "parameter":
                params.append(h)
            elif op == "constant":
                constants.append(h)
        return params, constants

    def _fusion_constants(self, constants: list, p: list) -> None:
        """`FusionCountConstantsMemoryAccess`: constants too large to be immediates are read from memory."""
        limit = self.immediate_constant_max_elements
        for h in constants:
            if h.shape.element_type != "tuple" and elements(h.shape) > limit:
                util = self._records[h][UTIL]
                if not self.count_multiple_input_accesses:
                    util = min(util, 1.0)
                p[BYTES] += self.size(h.shape) * util

    def _fusion_operand_bytes(self, params: list, p: list) -> None:
        """`FusionProcessOperandBytesRead`: what each fusion operand costs to read, and its utilization."""
        records = self._records
        opb = p[OPB]
        opu = p[OPU]
        for param in params:
            i = param.parameter_number
            if param.shape.element_type != "tuple":
                size = float(self.fusion_parameter_read_bytes(param))
            else:
                size = 0.0
                for index, _leaf in R.all_leaves(param.shape):
                    node = param
                    for sub_index in index:
                        for user in node.users:
                            if user.opcode == "get-tuple-element" and user.attribute("index") == sub_index:
                                node = user
                                break
                    leaf_size = float(self.fusion_parameter_read_bytes(node))
                    size += leaf_size
                    set_extra(p, R.operand_bytes_key(i, index), leaf_size)
            p[BYTES] += size
            if i < len(opb):
                opb[i] = size
            else:
                set_index(opb, i, size)
            util = records[param][UTIL]
            if i < len(opu):
                opu[i] = util
            else:
                set_index(opu, i, util)

    def fusion_parameter_read_bytes(self, h) -> float:
        """Base XLA's `FusionParameterReadBytes`: slices read their part, other readers share one read."""
        size = 0.0
        seen = False
        own = self.size
        for user in h.users:
            op = user.opcode
            if op == "fusion":
                inner = user.fused_computation
                root = inner.root
                for idx, operand in enumerate(user.operands):
                    if operand is not h:
                        continue
                    nested_seen = False
                    param = inner.parameter(idx)
                    simple = not root.operands or param is root.operands[0]
                    for fu in user.users:
                        if simple and fu.opcode == "slice":
                            size += own(fu.shape)
                        elif simple and fu.opcode == "dynamic-slice":
                            if user is fu.operands[0]:
                                size += own(fu.shape)
                            elif not nested_seen:
                                nested_seen = True
                                size += own(user.shape)
                        elif simple and fu.opcode == "dynamic-update-slice":
                            if user is not fu.operands[0] and not nested_seen:
                                nested_seen = True
                                size += own(user.shape)
                        elif not nested_seen:
                            nested_seen = True
                            size += self.fusion_parameter_read_bytes(param)
            elif op == "slice":
                size += own(user.shape)
            elif op == "dynamic-slice":
                if h is user.operands[0]:
                    size += own(user.shape)
                elif not seen:
                    seen = True
                    size += own(h.shape)
            elif op == "dynamic-update-slice":
                if h is not user.operands[0] and not seen:
                    seen = True
                    size += own(h.shape)
            elif op in ("broadcast", "reshape"):
                size += own(h.shape)
            elif not seen:
                seen = True
                size += own(h.shape)
        return size

    # -- whole-module views --------------------------------------------------
    def analyze_module(self) -> None:
        """Cost the entry computation (XLA's totals) and every computation it does not reach (for the table)."""
        self.entry_sum()
        for comp in self.module.computations:
            if not self._reached(comp):
                self.subcomputation(comp)

    def _reached(self, comp) -> bool:
        return bool(comp.instructions) and comp.instructions[0] in self._records


# ---------------------------------------------------------------------------
# Trip counts


def _scalar_int_constant(instr) -> int | None:
    seen = 0
    while instr is not None and instr.opcode in ("copy", "convert", "reshape", "bitcast") and seen < 8:
        instr = instr.operands[0]
        seen += 1
    if instr is None or instr.opcode != "constant" or instr.shape.dims:
        return None
    text = (instr.literal_text or "").strip()
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return None
        return int(value) if value.is_integer() else None


def _gte_index(instr, param) -> int | None:
    if instr.opcode == "get-tuple-element" and instr.operands and instr.operands[0] is param:
        return instr.attribute("index")
    return None


def while_trip_count(instr) -> tuple[int | None, str]:
    """The trip count of a `while` instruction, when it can be known statically.

    Looks first at XLA's `backend_config={"known_trip_count":{"n":"12"}}` (set by
    the optimizer), then for the induction-variable pattern of `fori_loop` /
    `scan`: the condition compares element `k` of the loop state with a
    constant, the body adds a constant to element `k`, and the initial tuple
    holds a constant there.

    **Returns:** `(trip_count, source)`, `source` being `"backend_config"`,
    `"induction variable"`, or `"unknown"` (then the count is None).
    """
    if instr.opcode != "while":
        raise ValueError(f"'{instr.name}' is a {instr.opcode}, not a while loop")
    config = instr.attribute("backend_config", None) if instr.has_attribute("backend_config") else None
    if isinstance(config, dict):
        known = config.get("known_trip_count")
        if isinstance(known, dict) and "n" in known:
            try:
                return int(known["n"]), "backend_config"
            except (TypeError, ValueError):
                pass
    n = _induction_trip_count(instr)
    if n is not None:
        return n, "induction variable"
    return None, "unknown"


def _induction_trip_count(instr) -> int | None:
    try:
        cond = instr.attribute("condition")
        body = instr.attribute("body")
    except KeyError:
        return None
    root = cond.root
    if root is None or root.opcode != "compare" or not cond.parameters:
        return None
    cparam = cond.parameters[0]
    direction = root.attribute("direction", "")
    a, b = root.operands[0], root.operands[1]
    k = _gte_index(a, cparam)
    limit = _scalar_int_constant(b)
    if k is None or limit is None:
        k = _gte_index(b, cparam)
        limit = _scalar_int_constant(a)
        direction = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}.get(direction, direction)
        if k is None or limit is None:
            return None
    init_tuple = instr.operands[0] if instr.operands else None
    if init_tuple is None or init_tuple.opcode != "tuple" or k >= len(init_tuple.operands):
        return None
    start = _scalar_int_constant(init_tuple.operands[k])
    broot = body.root
    if start is None or broot is None or broot.opcode != "tuple" or not body.parameters:
        return None
    bparam = body.parameters[0]
    upd = broot.operands[k] if k < len(broot.operands) else None
    if upd is None or upd.opcode not in ("add", "subtract"):
        return None
    x, y = upd.operands
    step = None
    if _gte_index(x, bparam) == k:
        step = _scalar_int_constant(y)
    elif upd.opcode == "add" and _gte_index(y, bparam) == k:
        step = _scalar_int_constant(x)
    if step is None or step == 0:
        return None
    if upd.opcode == "subtract":
        step = -step
    span = limit - start
    if direction == "LT" and step > 0:
        return max(0, -(-span // step))
    if direction == "LE" and step > 0:
        return max(0, span // step + 1)
    if direction == "GT" and step < 0:
        return max(0, -(-(-span) // -step))
    if direction == "GE" and step < 0:
        return max(0, (-span) // -step + 1)
    if direction == "NE" and span % step == 0 and span // step >= 0:
        return span // step
    return None


class _TripAware:
    """Trip-count-aware totals: a while loop's body counted trip-count times, its condition once more."""

    def __init__(self, an: Analysis):
        self.an = an
        self.loops: list[dict] = []
        self._memo: dict[int, tuple[float, float, float, bool]] = {}

    def computation(self, comp) -> tuple[float, float, float, bool]:
        k = id(comp)
        if k in self._memo:
            return self._memo[k]
        an = self.an
        f = t = b = 0.0
        known = True
        for instr in an.visit_order(comp):
            fi, ti, bi, ki = self.instruction(instr)
            f += fi
            t += ti
            b += bi
            known &= ki
        result = (f, t, b, known)
        self._memo[k] = result
        return result

    def instruction(self, instr) -> tuple[float, float, float, bool]:
        an = self.an
        p = an.record(instr)
        op = instr.opcode
        if op == "while":
            n, source = while_trip_count(instr)
            self.loops.append({"name": instr.name, "computation": instr.computation.name,
                               "trip_count": n, "source": source})
            bf, bt, bb, bk = self.computation(instr.attribute("body"))
            cf, ct, cb, ck = self.computation(instr.attribute("condition"))
            if n is None:
                return bf + cf, bt + ct, bb + cb, False
            return bf * n + cf * (n + 1), bt * n + ct * (n + 1), bb * n + cb * (n + 1), bk and ck
        if op == "scan":
            n = R.scan_length(instr)
            self.loops.append({"name": instr.name, "computation": instr.computation.name,
                               "trip_count": n, "source": "scan" if n is not None else "unknown"})
            bf, bt, bb, bk = self.computation(instr.attribute("to_apply"))
            if n is None:
                return p[FLOPS], p[TRANS], p[BYTES], False
            return bf * n, bt * n, p[BYTES], bk
        if op in ("call", "async-start") and instr.called_computations:
            if self._contains_loop(instr.called_computations[0]):
                return self.computation(instr.called_computations[0])
        if op == "conditional":
            comps = instr.called_computations
            if any(self._contains_loop(c) for c in comps):
                parts = [self.computation(c) for c in comps]
                return (max(x[0] for x in parts), max(x[1] for x in parts), max(x[2] for x in parts),
                        all(x[3] for x in parts))
        return p[FLOPS], p[TRANS], p[BYTES], True

    def _contains_loop(self, comp, depth=0) -> bool:
        if depth > 64:
            return False
        for instr in comp.instructions:
            if instr.opcode == "while":
                return True
            if instr.opcode == "scan":
                return True
            if instr.opcode in ("call", "conditional", "async-start"):
                if any(self._contains_loop(c, depth + 1) for c in instr.called_computations):
                    return True
        return False


def _loop_multipliers(module, an: Analysis) -> dict[int, float]:
    """Computation id -> how many times it runs per module execution, through known trip counts (NaN if unknown)."""
    mult: dict[int, float] = {id(module.entry): 1.0}
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        m = mult[id(comp)]
        for instr in comp.instructions:
            called = instr.called_computations
            if not called:
                continue
            if instr.opcode == "scan":
                n = R.scan_length(instr)
                body = instr.attribute("to_apply")
                factors = {id(body): (body, m * n if n is not None else math.nan)}
            elif instr.opcode == "while":
                n, _ = while_trip_count(instr)
                factors = {}
                body = instr.attribute("body")
                cond = instr.attribute("condition")
                factors[id(body)] = (body, m * n if n is not None else math.nan)
                factors[id(cond)] = (cond, m * (n + 1) if n is not None else math.nan)
            else:
                factors = {id(c): (c, m) for c in called}
            for k, (c, v) in factors.items():
                if k not in mult:
                    mult[k] = v
                    stack.append(c)
    return mult


# ---------------------------------------------------------------------------
# Public API


def check_module(module) -> None:
    if not hasattr(module, "entry") or not hasattr(module, "computations"):
        raise TypeError(f"expected an HloModule (from xla_costmodel.parse_hlo / load_hlo), got {type(module).__name__}")
    if module.entry is None:
        raise ValueError(f"module '{module.name}' has no entry computation")


def _analysis_for(module, *, entry_only: bool = False, **kwargs) -> Analysis:
    check_module(module)
    an = Analysis(module, **kwargs)
    with gc_paused():
        if entry_only:
            an.entry_sum()
        else:
            an.analyze_module()
    an.emit_warnings()
    return an


def module_cost(module, *, trip_counts: bool = True, warn: bool = True) -> dict[str, Any]:
    """XLA's `HloCostAnalysis` totals for a module, as `Compiled.cost_analysis()` reports them.

    **Arguments:**

    - `module`: an `HloModule` (`xla_costmodel.parse_hlo(text)`).
    - `trip_counts`: also compute the trip-count-aware totals (below).
    - `warn`: warn about unpriced opcodes.

    **Returns:** a dict with

    - `flops`, `transcendentals`, `bytes_accessed`: XLA's numbers, bit for bit
      (a while loop's body counted once, a conditional's most expensive branch,
      a custom call as -1);
    - `output_bytes_accessed`: XLA's `bytes accessedout{}`;
    - `operand_utilization`, `operand_bytes_accessed`: `{i: value}`, XLA's
      `utilization{i}{}` / `bytes accessed{i}{}`, i.e. the per-operand-index
      sums over the entry computation (as XLA reports them for the module);
    - `parameter_utilization`, `parameter_bytes_accessed`: `{parameter
      number: value}` for each entry parameter: its utilization and bytes read
      summed over the instructions that read it (1.0 = read once, in full;
      0.25 = a quarter of it is read; 2.0 = read twice);
    - `xla_properties`: every non-zero property under XLA's key names, to
      compare 1:1 with `Compiled.cost_analysis()`;
    - `unpriced`: `{opcode or "custom-call:<target>": count}` of instructions
      whose cost is unknown (empty when everything is priced);
    - with `trip_counts`: `flops_trip_count_aware`,
      `transcendentals_trip_count_aware`, `bytes_accessed_trip_count_aware`
      (loop bodies counted trip-count times and conditions trip-count + 1
      times, where the trip count is known), `trip_counts_known` (True when
      every loop's count was known) and `while_loops` (one dict per loop:
      `name`, `computation`, `trip_count`, `source`).
    """
    an = _analysis_for(module, warn=warn, entry_only=True)
    return _module_cost_from(an, trip_counts=trip_counts)


def _module_cost_from(an: Analysis, *, trip_counts: bool = True) -> dict[str, Any]:
    total = an.entry_sum()
    result: dict[str, Any] = {
        "flops": float(total[FLOPS]),
        "transcendentals": float(total[TRANS]),
        "bytes_accessed": float(total[BYTES]),
        "output_bytes_accessed": float(total[OUT]),
        "operand_utilization": {i: float(v) for i, v in enumerate(total[OPU]) if v},
        "operand_bytes_accessed": {i: float(v) for i, v in enumerate(total[OPB]) if v},
        "xla_properties": _record_to_xla_dict(total),
        "unpriced": an.unpriced,
    }
    param_util: dict[int, float] = {}
    param_bytes: dict[int, float] = {}
    records = an._records
    for param in an.module.entry.parameters:
        util = 0.0
        read = 0.0
        for user in param.users:
            p = records.get(user)
            if p is None:
                continue
            for i, operand in enumerate(user.operands):
                if operand is param:
                    util += p[OPU][i] if i < len(p[OPU]) else 0.0
                    read += p[OPB][i] if i < len(p[OPB]) else 0.0
        param_util[param.parameter_number] = float(util)
        param_bytes[param.parameter_number] = float(read)
    result["parameter_utilization"] = param_util
    result["parameter_bytes_accessed"] = param_bytes
    if trip_counts:
        ta = _TripAware(an)
        f, t, b, known = ta.computation(an.module.entry)
        result.update(
            flops_trip_count_aware=float(f),
            transcendentals_trip_count_aware=float(t),
            bytes_accessed_trip_count_aware=float(b),
            trip_counts_known=bool(known),
            while_loops=ta.loops,
        )
    return result


_COLUMNS = [
    "computation",
    "name",
    "opcode",
    "shape",
    "flops",
    "transcendentals",
    "bytes_accessed",
    "output_bytes_accessed",
    "operand_bytes_accessed",
    "operand_utilization",
    "utilization",
    "in_entry",
    "fused",
    "loop_multiplier",
    "trip_count",
    "unpriced",
    "unpriced_ops",
]


def _dataframe(an: Analysis, extra_columns=None, analyze: bool = True):
    import pandas as pd

    module = an.module
    if analyze:
        with gc_paused():
            an.analyze_module()
    mult = _loop_multipliers(module, an)
    fused_comps = {id(i.fused_computation) for _, i in module.instructions() if i.fused_computation is not None}
    entry = module.entry
    rows = []
    for comp in module.computations:
        m = mult.get(id(comp), math.nan)
        in_entry = comp is entry
        fused = id(comp) in fused_comps
        for instr in comp.instructions:
            p = an._records.get(instr)
            if p is None:
                continue
            own_unpriced = instr.opcode not in an._rules or instr.opcode == "custom-call" and bool(p[UNPRICED])
            trip = math.nan
            if instr.opcode == "while":
                n, _ = while_trip_count(instr)
                trip = float(n) if n is not None else math.nan
            row = [
                comp.name,
                instr.name,
                instr.opcode,
                str(instr.shape),
                float(p[FLOPS]),
                float(p[TRANS]),
                float(p[BYTES]),
                float(p[OUT]),
                tuple(float(v) for v in p[OPB]),
                tuple(float(v) for v in p[OPU]),
                float(p[UTIL]),
                in_entry,
                fused,
                m,
                trip,
                bool(own_unpriced),
                tuple(p[UNPRICED]),
            ]
            if extra_columns:
                row.extend(fn(instr, p) for _, fn in extra_columns)
            rows.append(row)
    columns = list(_COLUMNS) + [name for name, _ in (extra_columns or ())]
    df = pd.DataFrame(rows, columns=columns)
    df.attrs["module"] = module.name
    df.attrs["unpriced"] = an.unpriced
    return df


def cost_analysis(module, *, warn: bool = True):
    """XLA's `HloCostAnalysis`, one row per instruction.

    Every instruction of every computation gets a row. Instructions of the
    entry computation (`in_entry`) add up to the module totals of
    `module_cost`; the others are already included in the instruction that
    calls their computation (a fusion, loop, reducer, ...), as in XLA. Fused
    instructions carry XLA's nested figures plus their `utilization`. A fusion
    row is computed through its fused computation, with XLA's rules for what
    it reads: the parts of operands that slices, dynamic slices and gathers
    take, a parameter read once however many fused instructions use it, and
    in place dynamic-update-slice outputs costed by the update.

    **Arguments:** `module` (an `HloModule`); `warn`: warn about unpriced opcodes.

    **Returns:** a `pandas.DataFrame` with columns `computation`, `name`,
    `opcode`, `shape`, `flops`, `transcendentals`, `bytes_accessed`,
    `output_bytes_accessed`, `operand_bytes_accessed` (tuple, per operand
    index), `operand_utilization` (tuple), `utilization` (inside fusions),
    `in_entry`, `fused` (inside a fused computation), `loop_multiplier` (how
    many times the computation runs per execution of the module, through known
    while-loop trip counts; NaN when a loop's count is unknown), `trip_count`
    (on `while` rows), `unpriced` (True where the instruction's own cost is
    unknown) and `unpriced_ops` (what is unknown here or in called
    computations). `df.attrs["unpriced"]` has the module-wide counts.
    """
    an = _analysis_for(module, warn=warn)
    return _dataframe(an)


def instruction_costs(module, *, warn: bool = True) -> dict[tuple[str, str], InstructionCost]:
    """XLA's properties of every instruction as frozen `InstructionCost`s.

    **Arguments:** `module` (an `HloModule`); `warn`: warn about unpriced opcodes.

    **Returns:** `{(computation name, instruction name): InstructionCost}`.
    Summing the entry computation's costs (`sum(...)`) gives the module totals.
    """
    an = _analysis_for(module, warn=warn)
    return {
        (instr.computation.name if instr.computation is not None else "", instr.name): InstructionCost._from_record(p)
        for instr, p in an._records.items()
    }
