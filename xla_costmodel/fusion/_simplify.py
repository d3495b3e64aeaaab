"""What XLA's `AlgebraicSimplifier`, `TupleSimplifier` and `HloDCE` do before fusion to a module as
JAX lowers it, where it changes which kernels fusion makes.

XLA:GPU simplifies a module many times before priority fusion (`gpu_compiler.cc`: the
simplification pipelines, each a fixed point of the simplifier, constant folding, CSE and DCE). A
module as JAX lowers it still holds what those passes remove: elements of an inlined call's tuple
read straight back, broadcasts and reshapes that only add or drop dimensions of size 1, identity
transposes and converts, reductions over dimensions of size 1, `max(x, -inf)` from
`jnp.max(..., initial=-inf)`, `x + 0` and `x * 1`. Fused or not, these change kernels: a tuple
element read back stays an unfused `get-tuple-element` between two kernels, a broadcast to `[n, 1]`
at the entry's root is a kernel where XLA has a bitcast, a reduction over a dimension of size 1 is
a reduction kernel where XLA has a reshape, and a diamond's chain breaks on them
(`fusion._softmax_rewriter`).

`simplify(module)` applies, in place and to a fixed point, these of XLA's rules (each where the
handler of `algebraic_simplifier.cc` named applies it, layout-insensitive as before layout
assignment), then removes what is left unread:

- `HandleGetTupleElement` (and `TupleSimplifier`): `get-tuple-element(tuple(..., a_i, ...), i)` -> `a_i`;
- `HandleBroadcast`: a broadcast with sorted dimensions and as many elements as its operand -> a
  reshape (then the reshape's rules), a broadcast of an `iota` -> an iota of the broadcast's shape
  (then `SortIotaFusion` finds it: `fusion._sort_iota`); `HandleReshape`: a reshape to its operand's shape -> the
  operand, `reshape(reshape(x))` -> `reshape(x)`; `HandleTranspose`: a transpose with sorted
  dimensions -> its operand, `transpose(transpose(x))` -> one transpose; `HandleConvert`: a
  convert to its operand's type -> the operand;
- `HandleReduce`: a reduction with as many output elements as input elements -> a reshape (the
  init value is the reducer's identity);
- `HandleSlice`, `HandleDynamicSlice`, `HandlePad`, `HandleConcatenate`: a slice or dynamic slice
  of its operand's shape, a pad with no padding, a concatenate of one operand -> the operand;
- `HandleDivide`: `A / c` -> `A * (1 / c)` for a float constant `c` of one value (scalar, or its
  broadcast): a multiply is cheap where a divide is expensive to XLA's fusion (it duplicates it less);
- `HandleAdd`, `HandleSubtract`, `HandleMultiply`, `HandleDivide`: `x + 0`, `0 + x`, `x - 0`,
  `x * 1`, `1 * x`, `x / 1` -> `x` (a constant or broadcast of one, all of that value; shapes equal);
- `HandleMaximum`, `HandleMinimum`: `max(x, -inf)`, `min(x, inf)` on floats -> `x` (XLA:GPU
  propagates NaNs through min/max, which makes the rule apply to floats);
- `HandleDynamicUpdateSlice`: `dynamic-update-slice(broadcast(v), u, c...)` with a scalar `v` and constant
  starts -> `pad(u, v)` (each start clamped into the operand);
- `HandleSelect`: `select(p, x, x)`, `select(true, x, y)`, `select(false, y, x)` -> `x`, and
  `select(p, true, false)` -> `p`; `HandleMaximum`/`HandleMinimum`: `max(x, x)` -> `x`;
- `HandleCompare`: a compare whose result XLA knows made that constant (broadcast): `X < 0` and
  `0 > X` false, `X >= 0` and `0 <= X` true for unsigned compares and for an `X` that `IsNonNegative`
  holds for (exp, abs, iota, `x * x`, a non-negative constant, ...); `A != false`, `A == true` ->
  `A` on predicates; the causal mask `ne(select(ge(a, b), 1, 0), 0)` -> `ge(a, b)`;
- `HandleAdd`, sparse updates of zeros (jax's gradients of gathers and dynamic slices):
  `add(A, scatter(S, i, u)) -> scatter(add(A, S), i, u)` for a scatter of one use whose combiner adds
  (not one of one index vector: XLA's `ScatterExpander` has made that elementwise code first; two
  scatters added are not simulated), and `add(A, dynamic-update-slice(broadcast(0), u, s)) ->
  dynamic-update-slice(A, add(dynamic-slice(A, s), u), s)`; the adds of zeros left go by `x + 0`;
- first the dot strength reduction (`fusion._gemm_fusion.strength_reduce_dots`: vector and small
  matrix-vector dots, outer products made multiplies and reduces), then
  `ConditionalSimplifier`: a conditional of one branch, of a constant branch index, or of two
  cheap branches, inlined (`fusion._conditional`).

Constant folding (`HloConstantFolding`) is `fusion._constant_folding`'s, and `WhileLoopConstantSinking` and
`WhileLoopSimplifier` are `fusion._while_loop_simplifier`'s, run with these rules to a fixed point.

Facts after XLA's `xla/hlo/transforms/simplifiers/algebraic_simplifier.cc`; the code is ours.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from ..hlo import HloComputation, HloInstruction, HloModule, Shape
from ._conditional import remove_conditionals
from ._cse import _drop_unreachable, _has_side_effect, remove_unread
from ._gemm_fusion import strength_reduce_dots
from ._scatter_expander import combiner_opcode, scatter_trip_count

__all__ = ["SimplifyResult", "forwarded", "remove_unused", "simplify"]


@dataclass(frozen=True)
class SimplifyResult:
    """What `simplify` did: `rewritten`, how many instructions each rule replaced (by rule name, the
    XLA handler's rule), and `removed`, how many instructions were left unread and removed."""

    rewritten: Mapping[str, int] = field(default_factory=dict)
    removed: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.removed or sum(self.rewritten.values()))


# -- values of constants ----------------------------------------------------------------------

_FLOATS = frozenset({"f16", "bf16", "f32", "f64", "f8e4m3fn", "f8e5m2", "f8e4m3", "f8e5m2fnuz",
                     "f8e4m3fnuz", "f8e4m3b11fnuz", "f8e3m4", "f4e2m1fn", "f8e8m0fnu"})
_NUMBER = re.compile(r"-?(?:\d+\.?\d*(?:e[+-]?\d+)?|inf|nan)", re.IGNORECASE)


def _constant_values(instr: HloInstruction) -> set[str] | None:
    """The distinct values of a constant (`IsAll` unwraps broadcasts first), as normalized text."""
    while instr.opcode == "broadcast" and instr.operands:
        instr = instr.operands[0]
    if instr.opcode != "constant" or not instr.shape.is_array:
        return None
    text = (instr.literal_text or "").strip()
    if not text:
        return None
    if instr.shape.element_type == "pred":
        values = re.findall(r"true|false|\b[01]\b", text)
        return {repr(1.0) if v in ("true", "1") else repr(0.0) for v in values} or None
    values = _NUMBER.findall(text)
    if not values:
        return None
    out = set()
    for v in values:
        try:
            f = float(v)
        except ValueError:
            return None
        out.add(repr(f))
    return out


def _is_all(instr: HloInstruction, value: float) -> bool:
    """`IsAll(instr, value)`: a constant, or a broadcast of one, whose every element is `value`."""
    values = _constant_values(instr)
    return values is not None and values == {repr(float(value))}


def _same_shape(a: HloInstruction, b: HloInstruction) -> bool:
    """`ShapeUtil::Compatible`: same element type and dimensions (layouts aside)."""
    sa, sb = a.shape, b.shape
    if not (sa.is_array and sb.is_array):
        return str(sa) == str(sb)
    return sa.element_type == sb.element_type and tuple(sa.dims) == tuple(sb.dims)


def _elements(shape) -> int:
    n = 1
    for d in shape.dims:
        n *= int(d)
    return n


def _dims(instr: HloInstruction, name: str = "dimensions") -> tuple[int, ...]:
    return tuple(int(d) for d in instr.attribute(name, ()))


# -- what an instruction is, when the simplifier removes it --------------------------------------


# `max(x, -inf)` and `min(x, inf)` are `x` (jax's `jnp.max(..., initial=-inf)` in softmax leaves one).
_NO_OP_BOUND = {"maximum": float("-inf"), "minimum": float("inf")}
# `x op c` is `x` for these constants c (either side for the commutative ones).
_IDENTITY_RHS = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "divide": 1.0}
_COMMUTATIVE = frozenset({"add", "multiply"})


def forwarded(instr: HloInstruction) -> tuple[HloInstruction, str] | None:
    """`(what instr is, the rule)` when the simplifier replaces `instr` by one of its operands (or
    an operand's operand), else None."""
    op = instr.opcode
    if op == "get-tuple-element" and instr.operands and instr.operands[0].opcode == "tuple":
        return instr.operands[0].operands[int(instr.attribute("index"))], "gte-of-tuple"
    if not instr.shape.is_array or not instr.operands:
        return None
    a = instr.operands[0]
    if op in ("reshape", "broadcast", "slice", "dynamic-slice", "concatenate") and len(instr.operands) >= 1:
        if op != "concatenate" or len(instr.operands) == 1:
            if op in ("reshape", "slice", "dynamic-slice", "concatenate") and _same_shape(instr, a):
                return a, f"no-op {op}"
    if op == "broadcast" and _same_shape(instr, a) and _dims(instr) == tuple(range(a.shape.rank)):
        return a, "no-op broadcast"
    if op == "transpose" and list(_dims(instr)) == sorted(_dims(instr)):
        return a, "no-op transpose"
    if op == "convert" and a.shape.is_array and a.shape.element_type == instr.shape.element_type:
        return a, "no-op convert"
    if op == "pad" and _same_shape(instr, a) and not re.search(r"[1-9]", str(instr.raw_attributes.get("padding", "1"))):
        return a, "no-op pad"
    if op == "select" and len(instr.operands) == 3:
        pred, on_true, on_false = instr.operands
        if on_true is on_false and _same_shape(instr, on_true):
            return on_true, "select(p, x, x)"
        if _is_all(pred, 1) and _same_shape(instr, on_true):
            return on_true, "select(true, a, b)"
        if _is_all(pred, 0) and _same_shape(instr, on_false):
            return on_false, "select(false, a, b)"
        if instr.shape.element_type == "pred" and _is_all(on_true, 1) and _is_all(on_false, 0) \
                and _same_shape(instr, pred):
            return pred, "select(p, true, false)"
    if len(instr.operands) != 2:
        return None
    lhs, rhs = instr.operands
    if op == "compare":
        return _compare_forwarded(instr, lhs, rhs)
    if op in _NO_OP_BOUND:
        if lhs is rhs:
            return lhs, f"{op}(x, x)"
        if instr.shape.element_type in _FLOATS:
            bound = _NO_OP_BOUND[op]
            if _is_all(rhs, bound) and _same_shape(instr, lhs):
                return lhs, f"{op}(x, {bound})"
            if _is_all(lhs, bound) and _same_shape(instr, rhs):
                return rhs, f"{op}(x, {bound})"
    if op in _IDENTITY_RHS and instr.shape.element_type != "pred":
        unit = _IDENTITY_RHS[op]
        if _is_all(rhs, unit) and _same_shape(instr, lhs):
            return lhs, f"{op} of {unit:g}"
        if op in _COMMUTATIVE and _is_all(lhs, unit) and _same_shape(instr, rhs):
            return rhs, f"{op} of {unit:g}"
    return None


def _rewritten(instr: HloInstruction) -> str | None:
    """Rewrite `instr` in place into a simpler instruction of the same name and shape (the rule), or None."""
    op = instr.opcode
    if not instr.shape.is_array or not instr.operands:
        return None
    a = instr.operands[0]
    if not a.shape.is_array:
        return None
    if op == "broadcast" and list(_dims(instr)) == sorted(_dims(instr)) \
            and _elements(instr.shape) == _elements(a.shape):
        _become(instr, "reshape", [a])
        return "broadcast -> reshape"
    if op == "broadcast" and a.opcode == "iota":  # `broadcast(iota) -> iota`
        dim = _dims(instr)[int(a.attribute("iota_dimension"))]
        _become(instr, "iota", [])
        instr.set_attribute("iota_dimension", str(dim))
        return "broadcast(iota) -> iota"
    if op == "add" and len(instr.operands) == 2:
        rule = _add_of_dynamic_update_slice(instr) or _add_of_scatter(instr)
        if rule is not None:
            return rule
    if op == "dynamic-update-slice" and a.opcode == "broadcast" and len(a.operands) == 1 \
            and a.operands[0].shape.is_array and a.operands[0].shape.rank == 0:
        rule = _dynamic_update_slice_of_broadcast(instr)
        if rule is not None:
            return rule
    if op == "compare" and len(instr.operands) == 2:
        value = _compare_value(instr)
        if value is not None:
            _become_scalar_like(instr, "true" if value else "false")
            return f"compare -> {'true' if value else 'false'}"
    if op == "divide" and instr.shape.element_type in _FLOATS and a.opcode != "constant":
        return _divide_by_constant(instr)
    if op == "reduce" and len(instr.operands) == 2 and _elements(instr.shape) == _elements(a.shape):
        _become(instr, "reshape", [a])
        return "reduce -> reshape"
    if op == "reshape" and a.opcode == "reshape":
        _become(instr, "reshape", [a.operands[0]])
        return "reshape(reshape)"
    if op == "transpose" and a.opcode == "transpose":
        inner, outer = _dims(a), _dims(instr)
        _become(instr, "transpose", [a.operands[0]], dimensions=tuple(inner[d] for d in outer))
        return "transpose(transpose)"
    return None


def _divide_by_constant(instr: HloInstruction) -> str | None:
    """`A / c -> A * (1 / c)` for a scalar float constant `c`, alone or broadcast (`HandleDivide`; XLA
    inverts any constant, we those of one value written as a scalar)."""
    b = instr.operands[1]
    c = b.operands[0] if b.opcode == "broadcast" and b.operands else b
    if c.opcode != "constant" or not c.shape.is_array or c.shape.rank != 0:
        return None
    values = _constant_values(c)
    if values is None or len(values) != 1:
        return None
    value = float(next(iter(values)))
    inverse = math.inf if value == 0 else 1.0 / value  # the sign of a zero aside: jax writes none
    comp = instr.computation
    text = "inf" if math.isinf(inverse) else "nan" if math.isnan(inverse) else repr(inverse)
    const = HloInstruction(comp.module.unique_name("constant"), "constant", c.shape, [], literal_text=text)
    comp.add_instruction(const, before=instr)
    if b is not c:
        const_b = HloInstruction(comp.module.unique_name("broadcast"), "broadcast", b.shape, [const])
        const_b.set_attribute("dimensions", "{}")
        comp.add_instruction(const_b, before=instr)
        const = const_b
    _become(instr, "multiply", [instr.operands[0], const])
    return "A / constant -> A * (1 / constant)"


# -- HandleCompare ------------------------------------------------------------------------------


def _scalar_constant_value(instr: HloInstruction) -> float | None:
    """`GetConstantValue`: the value of a constant of one element (an effective scalar), else None."""
    if instr.opcode != "constant" or not instr.shape.is_array or _elements(instr.shape) != 1:
        return None
    values = _constant_values(instr)
    return float(next(iter(values))) if values is not None and len(values) == 1 else None


def _is_non_negative(instr: HloInstruction) -> bool:
    """`IsNonNegative`: what XLA knows to be >= 0 from the instruction alone (its `IsPositive`, the
    fallback, holds for none of these modules: it needs a cuDNN batch-norm call)."""
    if any(o.shape.is_array and o.shape.element_type in ("c64", "c128") for o in instr.operands):
        return False
    op = instr.opcode
    if op == "multiply":
        return instr.operands[0] is instr.operands[1]
    if op in ("abs", "exponential", "iota"):
        return True
    if op in ("broadcast", "power"):
        return _is_non_negative(instr.operands[0])
    if op == "constant":
        value = _scalar_constant_value(instr)
        return value is not None and not math.isnan(value) and math.copysign(1.0, value) > 0
    if op == "minimum":
        return all(_is_non_negative(o) for o in instr.operands)
    if op == "maximum":
        return any(_is_non_negative(o) for o in instr.operands)
    if op == "select":
        return _is_non_negative(instr.operands[1]) and _is_non_negative(instr.operands[2])
    return False


def _compare_value(instr: HloInstruction) -> bool | None:
    """What `HandleCompare` replaces a compare by when it knows its result: `X u< 0`, `0 u> X`
    (false), `X u>= 0`, `0 u<= X` (true) on unsigned compares; `X < 0`, `0 > X` (false), `X >= 0`,
    `0 <= X` (true) for a non-negative `X`. Else None."""
    lhs, rhs = instr.operands
    direction = str(instr.attribute("direction", ""))
    etype = lhs.shape.element_type if lhs.shape.is_array else ""
    unsigned = str(instr.attribute("type", "UNSIGNED" if etype.startswith("u") else "")).upper() == "UNSIGNED"
    if unsigned:
        if direction == "LT" and _is_all(rhs, 0):
            return False
        if direction == "GE" and _is_all(rhs, 0):
            return True
        if direction == "GT" and _is_all(lhs, 0):
            return False
        if direction == "LE" and _is_all(lhs, 0):
            return True
    if direction == "LT" and _is_non_negative(lhs) and _is_all(rhs, 0):
        return False
    if direction == "GT" and _is_all(lhs, 0) and _is_non_negative(rhs):
        return False
    if direction == "GE" and _is_non_negative(lhs) and _is_all(rhs, 0):
        return True
    if direction == "LE" and _is_all(lhs, 0) and _is_non_negative(rhs):
        return True
    return None  # (`x op x` on integers too: jax's lowering folds those itself)


def _compare_forwarded(instr: HloInstruction, lhs: HloInstruction, rhs: HloInstruction):
    """`HandleCompare`'s rules that forward an operand: on predicates `A != false`, `false != A`,
    `A == true`, `true == A` -> `A`; and the causal mask `ne(select(ge(a, b), 1, 0), 0)` -> `ge(a, b)`."""
    direction = str(instr.attribute("direction", ""))
    if _compare_value(instr) is not None:  # XLA tries those first
        return None
    if lhs.shape.is_array and rhs.shape.is_array and lhs.shape.element_type == rhs.shape.element_type == "pred":
        if direction == "NE":
            if _is_all(rhs, 0):
                return lhs, "pred != false"
            if _is_all(lhs, 0):
                return rhs, "pred != false"
        elif direction == "EQ":
            if _is_all(rhs, 1):
                return lhs, "pred == true"
            if _is_all(lhs, 1):
                return rhs, "pred == true"
    if direction == "NE" and _is_all(rhs, 0) and lhs.opcode == "select":
        cond, on_true, on_false = lhs.operands
        if cond.opcode == "compare" and str(cond.attribute("direction", "")) == "GE" \
                and _is_all(on_true, 1) and _is_all(on_false, 0) and _same_shape(instr, cond):
            return cond, "ne(select(ge, 1, 0), 0) -> ge"
    return None


def _become_scalar_like(instr: HloInstruction, text: str) -> None:
    """`MakeScalarLike(instr, value)`: a scalar constant of `instr`'s type, broadcast to its shape."""
    comp = instr.computation
    if instr.shape.rank == 0:
        _become(instr, "constant", [])
        instr.literal_text = text
        return
    scalar = Shape.array(instr.shape.element_type, [])
    const = HloInstruction(comp.module.unique_name("constant"), "constant", scalar, [], literal_text=text)
    comp.add_instruction(const, before=instr)
    _become(instr, "broadcast", [const], dimensions=())


# -- HandleAdd: sparse updates of zeros -----------------------------------------------------------


def _single_use(instr: HloInstruction) -> bool:
    return len(set(map(id, instr.users))) == 1


def _add_of_scatter(instr: HloInstruction) -> str | None:
    """`add(A, scatter(S, i, u)) -> scatter(add(A, S), i, u)` (either order) for a scatter of one operand,
    one use and an adding combiner (`HandleAdd`, layout-insensitive): the add of zeros that jax's
    gradient of a gather writes then goes (`A + 0`) and the scatter updates `A` in place.

    A scatter of one index vector is left alone: `ScatterExpander` has already made it elementwise code
    when XLA's simplifier runs. Two such scatters added XLA merges into one (concatenated indices and
    updates) or chains: not simulated here."""

    def one(s: HloInstruction) -> bool:
        return (s.opcode == "scatter" and len(s.operands) == 3 and _single_use(s)
                and combiner_opcode(s.attribute("to_apply")) == "add" and scatter_trip_count(s) != 1)

    lhs, rhs = instr.operands
    if one(lhs) and one(rhs):
        return None
    if one(rhs):
        other, scatter = lhs, rhs
    elif one(lhs):
        other, scatter = rhs, lhs
    else:
        return None
    comp = instr.computation
    operand = scatter.operands[0]
    pair = [other, operand] if scatter is rhs else [operand, other]
    new = HloInstruction(comp.module.unique_name("add"), "add", instr.shape, pair)
    comp.instructions.remove(scatter)  # the scatter moves where the add was: XLA's parser wants operands first
    comp.instructions.insert(comp.instructions.index(instr), scatter)
    comp.add_instruction(new, before=scatter)
    scatter.replace_operand(0, new)
    instr.replace_all_uses_with(scatter)
    comp.remove_instruction(instr)
    return "add(A, scatter) -> scatter(add(A, operand))"


def _add_of_dynamic_update_slice(instr: HloInstruction) -> str | None:
    """`add(A, dynamic-update-slice(broadcast(0), u, s...)) -> dynamic-update-slice(A, add(dynamic-slice(A,
    s...), u), s...)` (`HandleAdd`: the other operand of the add first, and the zeros a broadcast of a
    constant 0): only the slice is added, in place."""
    lhs, rhs = instr.operands
    for other, dus in ((lhs, rhs), (rhs, lhs)):
        if dus.opcode == "dynamic-update-slice" and dus.operands[0].opcode == "broadcast" \
                and dus.operands[0].operands and _scalar_constant_value(dus.operands[0].operands[0]) == 0.0:
            break
    else:
        return None
    comp = instr.computation
    update, starts = dus.operands[1], dus.operands[2:]
    ds = HloInstruction(comp.module.unique_name("dynamic-slice"), "dynamic-slice", update.shape, [other, *starts])
    ds.set_attribute("dynamic_slice_sizes", "{" + ",".join(str(int(d)) for d in update.shape.dims) + "}")
    comp.add_instruction(ds, before=instr)
    partial = HloInstruction(comp.module.unique_name("add"), "add", update.shape, [ds, update])
    comp.add_instruction(partial, before=instr)
    _become(instr, "dynamic-update-slice", [other, partial, *starts])
    return "add(A, dus(0, u)) -> dus(A, add(ds(A), u))"


def _dynamic_update_slice_of_broadcast(instr: HloInstruction) -> str | None:
    """`dynamic-update-slice(broadcast(v), u, c...) -> pad(u, v)` for a scalar `v` and constant starts `c`
    (`HandleDynamicUpdateSlice`; each start clamped into the operand, as the dynamic-update-slice does)."""
    update, starts = instr.operands[1], instr.operands[2:]
    dims = instr.shape.dims
    if not update.shape.is_array or len(starts) != len(dims):
        return None
    config = []
    for start, size, width in zip(starts, dims, update.shape.dims):
        value = _scalar_constant_value(start)
        if value is None or start.shape.element_type in _FLOATS:
            return None
        low = min(max(0, int(value)), size - width)
        config.append(f"{low}_{size - low - width}")
    _become(instr, "pad", [update, instr.operands[0].operands[0]])
    instr.set_attribute("padding", "x".join(config))
    return "dynamic-update-slice(broadcast) -> pad"


def _become(instr: HloInstruction, opcode: str, operands: list[HloInstruction], **attributes) -> None:
    """Make `instr` an `opcode` of `operands` with `attributes` (its metadata kept), in place."""
    for key in list(instr.raw_attributes):
        if key != "metadata":
            instr.remove_attribute(key)
    for op in set(instr.operands):
        if instr in op.users:
            op.users.remove(instr)
    instr.operands = []
    for op in operands:
        instr.append_operand(op)
    instr.opcode = opcode
    for key, value in attributes.items():
        instr.set_attribute(key, "{" + ",".join(str(v) for v in value) + "}")


# -- the pass -----------------------------------------------------------------------------------


def remove_unused(comp: HloComputation, candidates: list[HloInstruction]) -> int:
    """`HloDCE` from `candidates`: those left without users (and then their operands) removed."""
    return remove_unread(comp, candidates)


def _computations(module: HloModule) -> list[HloComputation]:
    """Every computation but fusion bodies (XLA simplifies those before they are fusions)."""
    bodies = {id(i.fused_computation) for _, i in module.instructions()
              if i.opcode == "fusion" and i.fused_computation is not None}
    return [c for c in module.computations if id(c) not in bodies]


def simplify(module: HloModule, *, rules: str = "all") -> SimplifyResult:
    """Apply the rules above to `module` in place, to a fixed point, and remove what they leave unread.

    **Arguments:** `rules`: `"all"`, or `"forward"` for only the rules that replace an instruction
    by what it forwards (no instruction rewritten into another).

    **Returns:** a `SimplifyResult`.
    """
    counts: Counter = Counter()
    removed = 0
    if rules == "all":
        # XLA's dot strength reduction and ConditionalSimplifier, in this order in its first simplification
        # pipeline (a cheap branch is one whose dots were made multiplies and reduces)
        n = len(strength_reduce_dots(module))
        if n:
            counts["dot -> multiply, reduce"] += n
        n = remove_conditionals(module)
        if n:
            counts["conditional removed"] += n
    for comp in _computations(module):
        changed = True
        while changed:
            changed = False
            for instr in comp.post_order():
                if instr.computation is not comp or _has_side_effect(instr):
                    continue
                hit = forwarded(instr)
                if hit is not None:
                    src, rule = hit
                    operands = list(instr.operands)
                    instr.replace_all_uses_with(src)  # the root too
                    if not instr.users and instr is not comp.root:
                        comp.remove_instruction(instr)
                        removed += remove_unused(comp, operands)
                    counts[rule] += 1
                    changed = True
                    continue
                if rules == "all":
                    operands = list(instr.operands)
                    rule = _rewritten(instr)
                    if rule is not None:
                        counts[rule] += 1
                        removed += remove_unused(comp, [o for o in operands if o not in instr.operands])
                        changed = True
    if removed or counts:
        _drop_unreachable(module)  # the reducer of a reduce made a reshape
    return SimplifyResult(dict(counts), removed)
