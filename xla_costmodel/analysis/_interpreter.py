"""The cost interpreter (`Analysis`): XLA's `HloCostAnalysis` over our HLO graph.

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

import warnings
from typing import Any

from . import _rules as R
from ._frontend import word_attribute as _word_attribute
from ._order import _is_scheduled, xla_visit_order
from ._records import sum_records
from ._rules import (
    BYTES,
    EXTRA,
    FLOPS,
    OPB,
    OPU,
    OUT,
    TRANS,
    UNPRICED,
    UTIL,
    copy_record,
    elements,
    get_extra,
    set_extra,
    set_index,
)


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
        recs = self.record_instructions(instrs)
        total = sum_records(recs)
        if total[-1]:
            # Some sum is not exact in float32: redo it in XLA's visit order.
            order = self._xla_order(comp)
            if order is not None:
                total = sum_records([self._records[i] for i in order], refine_only=True, exact=total)
        return total

    def record_instructions(self, instrs, *, keep: bool = True) -> list:
        """Each instruction's record (Preprocess + its rule), in order; kept as its record unless `keep` is False."""
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
            # a new record, slot by slot: FLOPS, TRANS, BYTES, OUT, OPB, OPU, UTIL, EXTRA, UNPRICED, IR
            p = [0.0, 0.0, out + sum(opb), out, opb, [1.0] * len(opb), 0.0, None, (), ir0]
            inline = inline_table.get(instr.opcode)
            if inline is None:
                apply_rule(instr, p)
            elif inline:
                if inline < 3:
                    # elementwise (1: one flop per element, 2: one transcendental)
                    p[FLOPS if inline == 1 else TRANS] = n
                else:
                    # parameter, constant (3) and get-tuple-element (4) move no data
                    p[BYTES] = 0
                    p[OUT] = 0
                    if inline == 4:
                        opb[0] = 0
            append(p)
        if keep:
            records.update(zip(instrs, recs))
        return recs

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
