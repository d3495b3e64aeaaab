"""One step of `GpuHloCostAnalysis::FusionCalculateUtilizations` in exact integers, shared by the
full walk of a fused body (`_gpu`) and the walk over what a growth added (`_fusion_growth`)."""

from __future__ import annotations

from ._opcodes import IS_ELEMENTWISE, passes_elementwise_roots
from ._records import _F32_EXACT
from ._rules import FLOPS, OPU, elements_recursive

# Opcodes that pass their elementwise use roots on to their operands whatever their shapes
# (a fast path of `passes_elementwise_roots`), and those for which that depends on more.
_MAYBE_PASSES_ROOTS = frozenset({"bitcast-convert", "bitcast", "fusion"})
_PASSES_ROOTS = (IS_ELEMENTWISE | {"tuple", "get-tuple-element"}) - _MAYBE_PASSES_ROOTS


def integral_walk_step(h, r: list, ew_roots: dict, root_util: dict, root_ir: dict, flops: float,
                       ir_total: float, before_change=None) -> tuple[float, float, float, float] | None:
    """One instruction of `FusionCalculateUtilizations` in exact integers (all its users walked).

    `h`'s utilization and IR size are the sums over its elementwise use roots; it passes its
    roots on to its operands, or makes each operand a root of its own (adding to the operand's
    utilization and IR size). `before_change(operand)`, if given, is called before an operand's
    roots are changed (`_fusion_growth` copies sets it shares with an earlier analysis).

    **Returns:** `(flops, ir_total, utilization, ir)` with `h`'s terms added, or None as soon as
    a value is not an integer below 2**24 (then the float32 walk must run).
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
    f = r[FLOPS]
    if f:
        term = util * f
        flops += term
        if term != int(term) or not (-limit < term < limit) or not (-limit < flops < limit):
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
    for k, operand in enumerate(h.operands):
        if before_change is not None:
            before_change(operand)
        ew_roots[operand].add(operand)
        opu = opu_list[k] if k < len(opu_list) else 0.0
        if opu != int(opu):
            return None
        # An integral utilization times an integral operand utilization: ceil(x n) / n = x.
        cur = util * opu if elements_recursive(operand.shape) else 0.0
        value = root_util[operand] + cur
        value_ir = root_ir.get(operand, 0.0) + ir
        if not (-limit < value < limit) or value_ir >= limit:
            return None
        root_util[operand] = value
        root_ir[operand] = value_ir
    return flops, ir_total, util, ir
