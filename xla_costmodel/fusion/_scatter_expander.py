"""XLA's `ScatterExpander(kEliminateSimpleScatters)` with the passes that remove its loop: a scatter of one
index vector becomes elementwise code and a dynamic-update-slice, which fuse.

XLA:GPU's `simplification` pipeline (`gpu_compiler.cc`) runs `ScatterSimplifier`, then
`ScatterExpander(ScatterExpander::kEliminateSimpleScatters)` (`xla/service/scatter_expander.cc`): a scatter
whose loop would run once (`ScatterTripCount == 1`: the scatter indices hold one index vector) becomes a
`while` loop of one iteration that reads the index vector, checks that the window lies within the operand,
and writes `to_apply(dynamic-slice(operand), updates)` back with a `dynamic-update-slice` where it does.
`WhileLoopSimplifier` then removes the loop of trip count 1 (its body inlined), and the simplifier makes a
full-size dynamic-slice its operand and a full-size dynamic-update-slice its update. Scatters of more than
one index vector stay scatters (XLA:GPU's own scatter kernel).

What is written here is that net result, before priority fusion: with `s` the window's start per operand
dimension (the index vector's entries on `scatter_dims_to_operand_dims`, 0 elsewhere) and `in` the check that
`0 <= s <= operand - window` everywhere, the result is `select(in, combine(operand, updates), operand)` for
a window as large as the operand, else `dynamic-update-slice(operand, select(in, combine(w, updates), w), s)`
with `w = dynamic-slice(operand, s)`; `combine` is `to_apply`'s root when it is one elementwise binary
operation of its two parameters, or the update itself when `to_apply` returns its second parameter. Other
scatters (variadic, another combiner) are left alone. The check is written on scalars (XLA reduces a vector of
compares with `and`; both fuse). Checked against XLA's module before priority fusion, deviceless
(tests/test_scatter_expander.py).

Facts after XLA's passes named above; the code is ours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.opcodes import is_elementwise
from ..hlo import HloComputation, HloInstruction, HloModule, Shape

__all__ = ["ScatterExpansion", "expand_simple_scatters", "scatter_trip_count"]

_COMMUTATIVE = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})


@dataclass(frozen=True)
class ScatterExpansion:
    """One scatter of a single index vector written as elementwise code (a row of
    `FusionResult.pre_fusion_rewrites`): `computation`, the scatter `instruction`, the `result` that replaced
    it; `kind` names the rewrite among the rows of other passes."""

    computation: str
    instruction: str
    result: str
    kind: str = "scatter-expanded"


def _ints(instr: HloInstruction, name: str) -> tuple[int, ...]:
    value = instr.attribute(name, ())
    if isinstance(value, str):
        value = [int(v) for v in value.strip("{}").split(",") if v.strip()]
    return tuple(int(v) for v in value)


def scatter_trip_count(scatter: HloInstruction) -> int:
    """How many index vectors `scatter`'s indices hold (XLA's `ScatterTripCount`)."""
    indices = scatter.operands[1].shape
    ivd = int(scatter.attribute("index_vector_dim"))
    return math.prod(d for i, d in enumerate(indices.dims) if i != ivd)


def combiner_opcode(body: HloComputation) -> str | None:
    """The elementwise opcode a combiner or reducer `body` applies to (parameter 0, parameter 1), "update" when
    it returns parameter 1, else None (the one reading of a `to_apply` for the passes that need it)."""
    root = body.root
    if root.opcode == "parameter":
        return "update" if root.parameter_number == 1 else None
    if len(root.operands) != 2 or not all(o.opcode == "parameter" for o in root.operands) \
            or not is_elementwise(root):
        return None
    order = [o.parameter_number for o in root.operands]
    if order == [0, 1] or (order == [1, 0] and root.opcode in _COMMUTATIVE):
        return root.opcode
    return None  # (update op operand: written here as operand op update, so only where the order is free)


def _row_major(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


def _expand(module: HloModule, comp: HloComputation, scatter: HloInstruction, combine: str) -> HloInstruction:
    operand, indices, updates = scatter.operands
    shape = operand.shape
    et, rank = shape.element_type, shape.rank
    it = indices.shape.element_type

    def add(prefix, opcode, shp, operands, literal=None, **attributes):
        instr = HloInstruction(module.unique_name(prefix), opcode, shp, list(operands), literal_text=literal)
        for key, value in attributes.items():
            instr.set_attribute(key, value)
        comp.add_instruction(instr, before=scatter)
        return instr

    def scalar(t, text):
        return add("constant", "constant", Shape.array(t, []), [], literal=text)

    def pred(a, b, direction):
        return add("compare", "compare", Shape.array("pred", []), [a, b], direction=direction)

    sdod = _ints(scatter, "scatter_dims_to_operand_dims")
    skip = set(_ints(scatter, "inserted_window_dims")) | set(_ints(scatter, "input_batching_dims"))
    uwd = iter(_ints(scatter, "update_window_dims"))
    window = [1 if d in skip else updates.shape.dims[next(uwd)] for d in range(rank)]

    vector = add("reshape", "reshape", Shape.array(it, [len(sdod)], (0,)), [indices])
    starts = [None] * rank
    for j, d in enumerate(sdod):
        one = add("slice", "slice", Shape.array(it, [1], (0,)), [vector], slice=f"{{[{j}:{j + 1}]}}")
        starts[d] = add("reshape", "reshape", Shape.array(it, []), [one])
    zero = scalar(it, "0")
    inside = None
    for d in sdod:  # the other dimensions start at 0: within the operand
        ok = add("and", "and", Shape.array("pred", []), [pred(zero, starts[d], "LE"),
                                                          pred(starts[d], scalar(it, str(shape.dims[d] - window[d])),
                                                               "LE")])
        inside = ok if inside is None else add("and", "and", Shape.array("pred", []), [inside, ok])
    starts = [s if s is not None else zero for s in starts]
    wshape = Shape.array(et, window, _row_major(rank))
    upd = add("reshape", "reshape", wshape, [updates])
    full = list(window) == list(shape.dims)
    old = operand if full else add("dynamic-slice", "dynamic-slice", wshape, [operand, *starts],
                                   dynamic_slice_sizes="{" + ",".join(map(str, window)) + "}")
    new = upd if combine == "update" else add(combine, combine, wshape, [old, upd])
    if inside is not None:
        mask = add("broadcast", "broadcast", Shape.array("pred", window, _row_major(rank)), [inside],
                   dimensions="{}")
        new = add("select", "select", wshape, [mask, new, old])
    if full:
        return new
    return add("dynamic-update-slice", "dynamic-update-slice", scatter.shape, [operand, new, *starts])


def expand_simple_scatters(module: HloModule) -> list[ScatterExpansion]:
    """Write every scatter of `module`'s non-fusion computations whose indices hold one index vector as XLA's
    expansion leaves it once its loop is gone (module docstring), in place. **Returns:** one
    `ScatterExpansion` per scatter rewritten."""
    fused = {i.fused_computation for c in module.computations for i in c.instructions if i.opcode == "fusion"}
    done = []
    for comp in [c for c in module.computations if c not in fused]:
        for scatter in [i for i in comp.instructions if i.opcode == "scatter"]:
            if len(scatter.operands) != 3 or not scatter.shape.is_array or scatter_trip_count(scatter) != 1:
                continue
            combine = combiner_opcode(scatter.attribute("to_apply"))
            if combine is None:
                continue
            result = _expand(module, comp, scatter, combine)
            scatter.replace_all_uses_with(result)
            comp.remove_instruction(scatter)
            done.append(ScatterExpansion(comp.name, scatter.name, result.name))
    return done
