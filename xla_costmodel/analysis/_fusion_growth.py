"""A grown fusion's `GpuHloCostAnalysis`, from the analysis of the fusion before it grew.

Priority fusion grows one fusion a producer at a time, and prices it after
every step. XLA revisits the whole fused computation each time
(`RevisitInstruction`); on a loop body of thousands of instructions that is
quadratic, and in Python it is what dominates the simulation. But a growth
(`hlo.BodyGrowth`) changes little: the producer's clones and new parameters
come in, the parameter that stood for the producer goes, and the producer's
value takes over its uses. Nothing else in the body changes its record, its
elementwise use roots or its utilization, because utilization flows from the
root towards the parameters and the old body's instructions are all "above"
the dropped parameter. So the new analysis is the old one with:

- the new instructions' records added to the body's sum, the dropped
  parameter's taken out;
- the utilization walk (`FusionCalculateUtilizations`) run over the new
  instructions only, seeded with the old walk's state at the dropped
  parameter, then over the parameters the new instructions read.

That is the same arithmetic as the full walk, in another order; it is used
only where the order cannot matter: every record value, utilization, IR size
and sum an integer below 2**24 or a fine fraction (`_records.exact_in_f32`:
multiples of 1/256 below 2**16, what slices read in half make), exact in
float32 and in any order, which is the condition of the full walk's own fast
path. Anything else (float32
rounding, a producer bound to two parameters, a body edited some other way,
another rule table or device profile) falls back to the full analysis.
`tests/test_fusion_growth.py` checks every growth of real fusion runs
against the full analysis.

A body's state is kept in persistent maps (`immutables.Map`, a hash array
mapped trie): a growth makes the grown body's maps from the old ones in
O(changes x log n) and leaves the old ones as they were, so an analysis
made before the growth keeps answering for the body it saw. Copying plain
dicts instead made each growth O(body), quadratic over a fusion that grows
to thousands of instructions a producer at a time (diffrax's solver step).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from immutables import Map

from ..fusion_engine import body_growth, follows_growths, tracks_growth
from ._records import _F32_EXACT, exact_in_f32
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
    copy_record,
)
from ._utilization_walk import integral_walk_step

_SCALARS = (FLOPS, TRANS, BYTES, OUT, UTIL, IR)
# (`immutables.MapMutation` is a typing protocol; this is the class `Map.mutate` returns.)
_MapMutation = type(Map().mutate())


@dataclass(slots=True, eq=False)
class _BodyState:
    """What an analysis knew of a fused body when it last analysed it (never edited afterwards: the
    maps are persistent, the records and root sets in them copied before a growth changes one)."""

    serial: int
    size: int
    root: Any
    instr: Any
    shape: Any
    kind: str | None
    rules: dict
    profile: dict
    records: Map
    subs: Map
    ew_roots: Map
    root_util: Map
    root_ir: Map
    sub: list
    params: list
    constants: list
    result: list


# Per analysis class (the GPU and base variants price the same bodies with other rules):
# fused body -> its last state.
_STATES_OF: "dict[type, weakref.WeakKeyDictionary[Any, _BodyState]]" = {}


def kept_states(cls: type) -> "weakref.WeakKeyDictionary[Any, _BodyState]":
    """The bodies analyses of class `cls` keep a state of (body -> `_BodyState`)."""
    states = _STATES_OF.get(cls)
    if states is None:
        states = _STATES_OF[cls] = follows_growths(weakref.WeakKeyDictionary())
    return states


def _snapshot(m) -> Map:
    """A persistent map of `m`'s entries as they are now: a `Map` as is, a `MapMutation` finished
    (O(1); it can still be read), a dict copied (once per full analysis, which is O(body) anyway)."""
    if type(m) is Map:
        return m
    if type(m) is _MapMutation:
        return m.finish()
    return Map(m)


def _integral(r: list) -> bool:
    """Whether every value of record `r` is exact in float32 in any order (`exact_in_f32`: an integer
    below 2**24 or a fine fraction), with no per-operand value negative (a body's per-index sums of
    them are then exact in float32 in any order where they are fine too: `_sums_exact`)."""
    for k in _SCALARS:
        v = r[k]
        if v != int(v) or not (-_F32_EXACT < v < _F32_EXACT):
            if not exact_in_f32(v):
                return False
    for slot in (OPB, OPU):
        for v in r[slot]:
            if v != int(v) or not (0.0 <= v < _F32_EXACT):
                if v < 0.0 or not exact_in_f32(v):
                    return False
    return not r[EXTRA] and not r[UNPRICED]


def _sums_exact(sub: list) -> bool:
    """Whether a body's sum `sub` of records that are each `_integral` is what float32 makes of them in
    any order: every total an integer below 2**24 (its parts' sum, exact in a double, is then what
    `sum_records` keeps: it re-adds only other totals), or, for a per-operand total, a fine fraction
    (non-negative fine fractions and integers: every partial sum a fine fraction, exact in float32).
    A per-operand total that float32 re-added in order (`sub`'s flag) is one of the latter."""
    for k in _SCALARS:
        v = sub[k]
        if v != int(v) or not (-_F32_EXACT < v < _F32_EXACT):
            return False
    for slot in (OPB, OPU):
        for v in sub[slot]:
            if v != int(v) or not (-_F32_EXACT < v < _F32_EXACT):
                if not exact_in_f32(v):
                    return False
    return not sub[EXTRA] and not sub[UNPRICED]


def remember(an, instr, comp, p: list, *, checked: bool = False) -> None:
    """Keep what `an` found for fusion `instr` (body `comp`, record `p`) for the body's next growth.

    `checked`: the body's records are known to be integral (the incremental path checked them).
    """
    leaves = an.fused_leaves
    sub = an._subs.get(id(comp))
    states = kept_states(type(an))
    if (not an.integral_walk or leaves is None or sub is None or not tracks_growth(comp)
            or not _sums_exact(sub)):
        states.pop(comp, None)
        return
    records = an._records
    if not checked:
        for h in comp.instructions:
            r = records[h]
            if not _integral(r):
                states.pop(comp, None)
                return
    g = body_growth(comp)
    records, subs = _snapshot(records), _snapshot(an._subs)
    # The analysis goes on writing (`visit` stores the kernel's own record after this): into new
    # versions of its maps, leaving the kept ones as they are.
    an._records, an._subs = records.mutate(), subs.mutate()
    an.ew_roots, an.root_util, an.root_ir = _snapshot(an.ew_roots), _snapshot(an.root_util), _snapshot(an.root_ir)
    states[comp] = _BodyState(
        g.serial if g is not None else 0, len(comp.instructions), comp.root, instr, instr.shape,
        instr.fusion_kind, an._rules, an.op_profile, records, subs, an.ew_roots, an.root_util, an.root_ir,
        sub, leaves[0], leaves[1], copy_record(p),
    )


def grow(an, instr, comp, p: list) -> bool:
    """Analyse fusion `instr` from its body's last state, if that is exact; False (nothing changed) if not."""
    st = kept_states(type(an)).get(comp)
    if (st is None or st.instr is not instr or st.shape is not instr.shape or st.rules is not an._rules
            or st.profile is not an.op_profile or st.kind != instr.fusion_kind or comp.root is not st.root):
        return False
    g = body_growth(comp)
    serial = g.serial if g is not None else 0
    n = len(comp.instructions)
    if serial == st.serial:
        if n != st.size:
            return False
        # Unchanged since: the same figures (in new versions of the maps, for the analysis to write).
        an._records = st.records.mutate()
        an._subs = st.subs.mutate()
        an.ew_roots, an.root_util, an.root_ir = st.ew_roots, st.root_util, st.root_ir
        an.integral_walk = True
        an.fused_leaves = (st.params, st.constants)
        p[:] = copy_record(st.result)
        return True
    if g.previous != st.serial or g.size_before != st.size or g.size_after != n or len(g.dropped) != 1:
        return False
    try:
        if _grow(an, instr, comp, p, st, g):
            remember(an, instr, comp, p, checked=True)
            return True
    except KeyError:
        pass  # a body not as the growth says: start afresh
    an._records, an._subs, an.ew_roots, an.root_util, an.root_ir = {}, {}, {}, {}, {}
    an.integral_walk = False
    an.fused_leaves = None
    return False


def _grow(an, instr, comp, p: list, st: _BodyState, g) -> bool:
    dropped = g.dropped[0]
    value = g.value
    clones = [h for h in g.added if h.opcode != "parameter"]
    new_params = [h for h in g.added if h.opcode == "parameter"]

    records = st.records.mutate()
    old_dropped = records.pop(dropped)
    an._records = records
    an._subs = st.subs.mutate()
    recs = an.record_instructions(g.added)
    if not all(_integral(r) for r in recs):
        return False

    # The body's sum: the new records in, the dropped parameter's (as its rule made it) out.
    sub = [st.sub[k] if k in _SCALARS else None for k in range(10)]
    opb, opu = list(st.sub[OPB]), list(st.sub[OPU])
    for r in recs + [None]:
        sign = 1.0
        if r is None:
            r = an.record_instructions([dropped], keep=False)[0]
            sign = -1.0
        for k in _SCALARS:
            sub[k] += sign * r[k]
        for slot, acc in ((OPB, opb), (OPU, opu)):
            vals = r[slot]
            if len(vals) > len(acc):
                acc.extend([0.0] * (len(vals) - len(acc)))
            for i, v in enumerate(vals):
                acc[i] += sign * v
    sub[OPB], sub[OPU], sub[EXTRA], sub[UNPRICED] = opb, opu, None, ()
    sub.append(False)
    if not _sums_exact(sub):
        return False
    an._subs[id(comp)] = sub

    # The utilization walk over what is new, seeded where the producer's value took the dropped
    # parameter's place (its roots, with the parameter itself replaced by the value).
    ew = st.ew_roots.mutate()
    ru = st.root_util.mutate()
    ri = st.root_ir.mutate()
    seed = set(ew.pop(dropped))
    if dropped in seed:
        seed.discard(dropped)
        seed.add(value)
    ew[value] = seed
    ru[value] = ru.pop(dropped, 0.0)
    if dropped in ri:
        ri[value] = ri.pop(dropped)
    for h in g.added:
        if h is not value:
            ew[h] = set()
            ru[h] = 0.0
    flops = st.result[FLOPS]
    ir_total = st.result[IR] - old_dropped[IR]
    old = st.records
    touched: dict = {}  # the old parameters the new instructions read (their sets copied before changing)

    def before_change(operand) -> None:
        if operand in old and operand not in touched:
            touched[operand] = None
            ew[operand] = set(ew[operand])

    walked = []
    for h in reversed(clones):
        r = records[h]
        step = integral_walk_step(h, r, ew, ru, ri, flops, ir_total, before_change)
        if step is None:
            return False
        flops, ir_total, util, ir = step
        walked.append((r, util, ir))
    for h in list(touched) + new_params:
        if h.opcode != "parameter":
            return False  # an old instruction other than a parameter read by the producer: not a growth
        if h in old:
            ir_total -= old[h][IR]
            r = records[h] = list(records[h])
        else:
            r = records[h]
        step = integral_walk_step(h, r, ew, ru, ri, flops, ir_total)
        if step is None:
            return False
        flops, ir_total, util, ir = step
        walked.append((r, util, ir))
    for r, util, ir in walked:
        r[UTIL] = util
        r[IR] = ir
    an.ew_roots, an.root_util, an.root_ir = ew.finish(), ru.finish(), ri.finish()
    an.integral_walk = True

    params = [h for h in st.params if h is not dropped] + new_params
    params.sort(key=lambda h: h.parameter_number)
    constants = st.constants + [h for h in clones if h.opcode == "constant"]
    an.fused_leaves = (params, constants)
    # The fusion's own figures, as `Analysis.fusion` makes them from the body's.
    p[:] = copy_record(sub)
    p[BYTES] = 0.0
    an._fusion_output_bytes(instr, comp, p)
    p[FLOPS] = flops
    p[IR] = ir_total
    if constants:
        an._fusion_constants(constants, p)
    an._fusion_operand_bytes(params, p)
    an.grown_fusion(p, st.result, clones)
    return True
