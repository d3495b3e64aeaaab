"""One step of `GpuHloCostAnalysis::FusionCalculateUtilizations` in exact arithmetic, shared by the
full walk of a fused body (`_gpu`) and the walk over what a growth added (`_fusion_growth`)."""

from __future__ import annotations

import math

from ._opcodes import IS_ELEMENTWISE, passes_elementwise_roots
from ._records import _F32_EXACT, _FINE_LIMIT, exact_in_f32
from ._rules import FLOPS, OPU, elements_recursive

# Opcodes that pass their elementwise use roots on to their operands whatever their shapes
# (a fast path of `passes_elementwise_roots`), and those for which that depends on more.
_MAYBE_PASSES_ROOTS = frozenset({"bitcast-convert", "bitcast", "fusion"})
_PASSES_ROOTS = (IS_ELEMENTWISE | {"tuple", "get-tuple-element"}) - _MAYBE_PASSES_ROOTS


def integral_walk_step(h, r: list, ew_roots: dict, root_util: dict, root_ir: dict, flops: float,
                       ir_total: float, before_change=None, count_flops: bool = True,
                       ) -> tuple[float, float, float, float] | None:
    """One instruction of `FusionCalculateUtilizations` in exact arithmetic (all its users walked).

    `h`'s utilization and IR size are the sums over its elementwise use roots; it passes its
    roots on to its operands, or makes each operand a root of its own (adding to the operand's
    utilization and IR size). `before_change(operand)`, if given, is called before an operand's
    roots are changed (`_fusion_growth` copies sets it shares with an earlier analysis).

    Every value is an integer below 2**24 or a fine fraction (`_records.exact_in_f32`: a slice's
    operand read in half makes halves below it), so that each float32 operation of the walk is
    exact and its result the same in any order.

    `count_flops` False: the flop sum is left to the caller (`exact_flops`), `flops` returned as given.

    **Returns:** `(flops, ir_total, utilization, ir)` with `h`'s terms added, or None as soon as
    a value is not such a number (then the float32 walk must run).
    """
    limit = _F32_EXACT
    roots_h = ew_roots[h]
    if len(roots_h) == 1:
        for rt in roots_h:
            util = root_util[rt]
            ir = root_ir.get(rt, 0.0)
    else:
        util = 0.0
        ir = 0.0
        for rt in roots_h:
            util += root_util[rt]
            ir += root_ir.get(rt, 0.0)
        if (util != int(util) or util >= _FINE_LIMIT) and not _exact_sum([root_util[rt] for rt in roots_h], util):
            return None
    f = r[FLOPS]
    if f and count_flops:
        flops = exact_flops(flops, util, f)
        if flops is None:
            return None
    ir_total += ir
    if ir_total >= limit or util >= limit:
        return None
    op = h.opcode
    if op in _PASSES_ROOTS or (op in _MAYBE_PASSES_ROOTS and passes_elementwise_roots(h)):
        for operand in h.operands:
            if before_change is not None:
                before_change(operand)
            ew_roots[operand].update(roots_h)
        return flops, ir_total, util, ir
    opu_list = r[OPU]
    whole = util == int(util)
    for k, operand in enumerate(h.operands):
        if before_change is not None:
            before_change(operand)
        ew_roots[operand].add(operand)
        opu = opu_list[k] if k < len(opu_list) else 0.0
        n = elements_recursive(operand.shape)
        if whole and opu == int(opu):
            # An integral utilization times an integral operand utilization: ceil(x n) / n = x.
            cur = util * opu if n else 0.0
        else:
            cur = _fine_share(util, opu, n)
            if cur is None:
                return None
        value = root_util[operand] + cur
        value_ir = root_ir.get(operand, 0.0) + ir
        if not (-limit < value < limit) or value_ir >= limit or (value != int(value) and not exact_in_f32(value)):
            return None
        root_util[operand] = value
        root_ir[operand] = value_ir
    return flops, ir_total, util, ir


def exact_flops(flops: float, util: float, f: float) -> float | None:
    """`flops + util x f` where float32 gives it exactly (and in any order), else None."""
    limit = _F32_EXACT
    term = util * f
    flops += term
    if (util != int(util) or flops != int(flops) or term != int(term) or not (-limit < term < limit)
            or not (-limit < flops < limit)):
        # (integers: the float32 sum is exact while below 2**24; else each value a fine fraction,
        # the product of two exact ones exact in a double)
        if not (exact_in_f32(f) and exact_in_f32(term) and exact_in_f32(flops)):
            return None
    return flops


def _exact_sum(parts: list, total: float) -> bool:
    """Whether float32 adds `parts` (exact values) to `total` exactly in any order: all integers (then
    the total's own bound, checked by the caller, is enough), or all non-negative with a fine total."""
    if all(v == int(v) for v in parts):
        return True
    return all(v >= 0.0 for v in parts) and exact_in_f32(total) and total < _FINE_LIMIT


def _fine_share(util: float, opu: float, n: int) -> float | None:
    """XLA's `ceil(util x opu x n) / n` in float32 where it is exactly `util x opu` (a fine fraction or an
    integer, times the `n` elements an integer below 2**24: the ceiling changes nothing, the division
    gives the product back); None where float32 might round."""
    if not exact_in_f32(opu):
        return None
    cur = util * opu
    if not exact_in_f32(cur):
        return None
    if not n:
        return 0.0
    if n >= _F32_EXACT:
        return None
    m = cur * n
    if m != math.floor(m) or m >= _F32_EXACT:
        return None
    return cur
