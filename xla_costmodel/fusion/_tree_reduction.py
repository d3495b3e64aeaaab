"""XLA:GPU's reduction splitting before fusion, simulated: `ReductionSplitter` and `TreeReductionRewriter`.

XLA:GPU's emitters reduce race-free only: one block per output element. After
layout assignment it runs, to a fixed point,

1. `ReductionDegenerateDimRemover` and `ReductionDimensionGrouper`: unit dimensions
   dropped, adjacent reduced dimensions merged (a bitcast before and after);
2. `ReductionSplitter(ignore_small_dims=true)`: a reduce over several reduced
   dimensions that are not contiguous (not a row or column reduction) loses its
   largest reduced dimension to a reduce of its own first (when that is > 8);
3. `TreeReductionRewriter`: a row or column reduction that is not race-free
   (`ReductionIsRaceFree`: a row reduction over more than 1024 x 16 = 16384
   elements or a batch over 8; a column reduction over more than 32 x 128 = 4096)
   becomes two reduces. A batch over 8 is reduced in two steps (minor reduced
   dimension, then the batch); otherwise the last reduced dimension `k` is padded
   to `k1 * k2` (k2 about sqrt(k), at most the race-free bound, with the least
   padding, a power of two on ties; swapped so that the inner reduce is the larger
   where the emitter vectorizes better) and split into `[k1, k2]`: the inner reduce
   reduces `k2` (and the other reduced dimension), the outer one `k1`.

Each new reduce is a kernel of its own to the fusion pass. The new reshapes keep
row-major layouts (bitcasts to the fusion pass). Only reduces with row-major (or no)
layouts are rewritten; XLA's own input to fusion has been through these passes already
(every reduce there is race-free), so this is a no-op on it.

Facts after XLA's `xla/service/gpu/transforms/tree_reduction_rewriter.cc`,
`reduction_splitter.cc` and `reduction_utils.cc`; the code is ours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.emission import (
    BATCHED_REDUCTION_RACE_FREE_BOUND,
    COLUMN_REDUCTION_TILE_Y,
    MIN_THREADS_X_ROW_REDUCTION,
    ROW_REDUCTION_TILE_X,
    WARP_SIZE,
    is_contiguous_reduction,
    reduction_dimensions,
    reduction_is_race_free,
)
from ..hlo import HloComputation, HloInstruction, HloModule, Shape

__all__ = ["ReductionSplit", "split_reductions"]

# reduction_utils: `WarpSize() * GetReductionTiling(column)[1]`, the race-free bound of a column reduction
_COLUMN_RACE_FREE_BOUND = WARP_SIZE * COLUMN_REDUCTION_TILE_Y
# ReductionSplitter(ignore_small_dims=true) leaves reduces whose largest reduced dimension is at most this
_SPLITTER_SMALL_DIM = 8


@dataclass(frozen=True)
class ReductionSplit:
    """One reduce split before fusion: `kind` is `"tree"` (`TreeReductionRewriter`: dimension
    `dimension` of `length` padded by `padding` and split into `k1 x k2`), `"batch"` (the batch of a
    row reduction reduced by a reduce of its own) or `"splitter"` (`ReductionSplitter`: reduced
    dimension `dimension` of `length` reduced first). `dimension` counts in the normalized shape
    (unit dimensions dropped, adjacent reduced dimensions merged)."""

    computation: str
    instruction: str
    kind: str
    dimension: int
    length: int
    k1: int = 0
    k2: int = 0
    padding: int = 0


def _row_major(shape: Shape) -> bool:
    return shape.layout is None or tuple(shape.minor_to_major) == tuple(range(shape.rank - 1, -1, -1))


def _layout(shape_like: Shape, rank: int):
    return tuple(range(rank - 1, -1, -1)) if shape_like.layout is not None and rank else None


def _reduced(reduce: HloInstruction) -> list[int]:
    dims = reduce.attribute("dimensions", ())
    return sorted(int(d) for d in dims)


def _normalized(shape: Shape, reduced: list[int]) -> tuple[list[int], list[int]]:
    """(dims, reduced dims) with unit dimensions dropped and adjacent reduced dimensions merged
    (`ReductionDegenerateDimRemover` then `ReductionDimensionGrouper`)."""
    dims: list[int] = []
    red: list[int] = []
    prev_reduced = False
    for d, n in enumerate(shape.dims):
        if n == 1:
            continue
        is_red = d in reduced
        if is_red and prev_reduced:
            dims[-1] *= n
        else:
            dims.append(n)
            if is_red:
                red.append(len(dims) - 1)
        prev_reduced = is_red
    return dims, red


def _split_params(n: int, bound: int, is_row: bool) -> tuple[int, int, int]:
    """`ComputeSplitParams`: (k1, k2, padding) splitting `n` into the padded `k1 * k2`."""
    k2 = min(math.isqrt(n), bound)
    pad = (k2 - n % k2) % k2
    best_k1 = (n + pad) // k2
    i = k2 - 1
    while i > k2 // 2:
        padding = (i - n % i) % i
        if padding < pad or (padding == pad and i & (i - 1) == 0):
            pad, best_k1 = padding, (n + padding) // i
        i -= 1
    k1, k2 = best_k1, (n + pad) // best_k1
    if _should_swap(k1, k2, n, bound, is_row):
        k1, k2 = k2, k1
    return k1, k2, pad


def _should_swap(k1: int, k2: int, n: int, bound: int, is_row: bool) -> bool:
    """`ShouldSwapInnerAndOuterReducedMinorDimension`: make the inner reduce (`k2`) the larger."""
    if k1 > bound:  # the inner reduce stays race-free
        return False
    if not is_row:
        return True
    if k2 % 2 == 0 and n % 2 == 0:  # may be vectorized
        return k2 * 2 < k1 or k1 % 2 == 0
    return n % 2 == 0 or k1 % 2 != 0


class _Rewriter:
    def __init__(self, module: HloModule, comp: HloComputation):
        self.module, self.comp = module, comp
        self.done: list[ReductionSplit] = []

    def add(self, anchor, prefix, opcode, shape, operands, **attributes) -> HloInstruction:
        instr = HloInstruction(self.module.unique_name(prefix), opcode, shape, list(operands))
        for key, value in attributes.items():
            instr.set_attribute(key, value)
        self.comp.add_instruction(instr, before=anchor)
        return instr

    def array(self, like: Shape, element_type: str, dims) -> Shape:
        return Shape.array(element_type, list(dims), _layout(like, len(dims)))

    def reduce(self, anchor, inputs, inits, dims_to_reduce, to_apply, like: Shape) -> HloInstruction:
        kept_of = [[n for d, n in enumerate(x.shape.dims) if d not in dims_to_reduce] for x in inputs]
        shapes = [self.array(like, x.shape.element_type, kept) for x, kept in zip(inputs, kept_of)]
        shape = shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)
        return self.add(anchor, "reduce", "reduce", shape, list(inputs) + list(inits),
                        dimensions="{" + ",".join(map(str, dims_to_reduce)) + "}", to_apply=to_apply)

    def reshape(self, anchor, x, dims, like: Shape) -> HloInstruction:
        if list(x.shape.dims) == list(dims):
            return x
        return self.add(anchor, "reshape", "reshape", self.array(like, x.shape.element_type, dims), [x])

    def visit(self, reduce: HloInstruction) -> bool:
        """Rewrite `reduce` once (the new reduces are visited again by the caller); whether it changed."""
        n_in = len(reduce.operands) // 2
        if n_in == 0 or len(reduce.operands) != 2 * n_in:
            return False
        inputs, inits = reduce.operands[:n_in], reduce.operands[n_in:]
        first = inputs[0].shape
        if not first.is_array or any(first.dynamic) or not all(
                x.shape.is_array and _row_major(x.shape) for x in inputs):
            return False
        outs = list(reduce.shape.tuple_shapes) if reduce.shape.is_tuple else [reduce.shape]
        if not all(o.is_array and _row_major(o) for o in outs):
            return False
        reduced = _reduced(reduce)
        if not reduced:
            return False
        dims, red = _normalized(first, reduced)
        if not red:
            return False
        contiguous = is_contiguous_reduction(reduce)
        if not contiguous:
            return self._splitter(reduce, inputs, inits, dims, red, first)
        is_row, rdims = reduction_dimensions(reduce)
        if reduction_is_race_free(is_row, rdims):
            return False
        if len(red) > 2:
            return False  # not a shape XLA's grouped reductions have
        to_apply = reduce.attribute("to_apply")
        grouped = [self.reshape(reduce, x, dims, first) for x in inputs]
        if is_row and rdims[0] > BATCHED_REDUCTION_RACE_FREE_BOUND:
            minor = red[-1]
            inner = self.reduce(reduce, grouped, inits, [minor], to_apply, first)
            inner_inputs = self._elements(reduce, inner, n_in)
            out = self.reduce(reduce, inner_inputs, inits, [red[0]], to_apply, first)
            self.done.append(ReductionSplit(self.comp.name, reduce.name, "batch", red[0], dims[red[0]]))
        else:
            split = red[-1]
            n = dims[split]
            bound = MIN_THREADS_X_ROW_REDUCTION * ROW_REDUCTION_TILE_X if is_row else _COLUMN_RACE_FREE_BOUND
            k1, k2, pad = _split_params(n, bound, is_row)
            padded = grouped
            if pad:
                padded_dims = list(dims)
                padded_dims[split] = n + pad
                config = "x".join(f"0_{pad}" if d == split else "0_0" for d in range(len(dims)))
                padded = [self.add(reduce, "pad", "pad", self.array(first, x.shape.element_type, padded_dims),
                                   [x, init], padding=config) for x, init in zip(grouped, inits)]
            tiled_dims = list(dims[:split]) + [k1, k2] + list(dims[split + 1:])
            tiled = [self.reshape(reduce, x, tiled_dims, first) for x in padded]
            inner_dims = [d for d in red if d != split] + [split + 1]
            inner = self.reduce(reduce, tiled, inits, sorted(inner_dims), to_apply, first)
            inner_inputs = self._elements(reduce, inner, n_in)
            outer_dim = split - (len(red) - 1)
            out = self.reduce(reduce, inner_inputs, inits, [outer_dim], to_apply, first)
            self.done.append(ReductionSplit(self.comp.name, reduce.name, "tree", split, n, k1, k2, pad))
        self._replace(reduce, out, outs, n_in)
        return True

    def _elements(self, anchor, reduce: HloInstruction, n: int) -> list[HloInstruction]:
        if n == 1:
            return [reduce]
        return [self.add(anchor, "get-tuple-element", "get-tuple-element", s, [reduce], index=str(i))
                for i, s in enumerate(reduce.shape.tuple_shapes)]

    def _replace(self, reduce: HloInstruction, out: HloInstruction, outs: list[Shape], n: int) -> None:
        """Replace `reduce` by `out`, reshaped back to its shape (normalized shapes dropped unit dims)."""
        if n == 1:
            new = self.reshape(reduce, out, outs[0].dims, reduce.shape)
        elif [list(o.dims) for o in outs] == [list(s.dims) for s in out.shape.tuple_shapes]:
            new = out
        else:
            parts = self._elements(reduce, out, n)
            parts = [self.reshape(reduce, p, o.dims, o) for p, o in zip(parts, outs)]
            new = self.add(reduce, "tuple", "tuple", Shape.tuple_of([p.shape for p in parts]), parts)
        reduce.replace_all_uses_with(new)
        self.comp.remove_instruction(reduce)

    def _splitter(self, reduce, inputs, inits, dims, red, first) -> bool:
        """`ReductionSplitter`: reduce the largest reduced dimension first, then the rest."""
        if len(red) < 2 or reduce.shape.is_tuple or len(inputs) != 1:
            return False
        largest = max(red, key=lambda d: (dims[d], -d))
        if dims[largest] <= _SPLITTER_SMALL_DIM:
            return False
        to_apply = reduce.attribute("to_apply")
        grouped = [self.reshape(reduce, x, dims, first) for x in inputs]
        pre = self.reduce(reduce, grouped, inits, [largest], to_apply, first)
        rest = [d - (d > largest) for d in red if d != largest]
        out = self.reduce(reduce, [pre], inits, rest, to_apply, first)
        self.done.append(ReductionSplit(self.comp.name, reduce.name, "splitter", largest, dims[largest]))
        self._replace(reduce, out, [reduce.shape], 1)
        return True


def split_reductions(module: HloModule) -> list[ReductionSplit]:
    """Rewrite, in place, the reduces of `module`'s non-fusion computations as XLA:GPU's
    `ReductionSplitter` and `TreeReductionRewriter` do before fusion (to a fixed point), so that every
    row or column reduction left is race-free. Idempotent.

    **Returns:** what was split (`ReductionSplit`s, in visiting order).
    """
    fused_bodies = {id(c) for _, i in module.instructions() if i.opcode == "fusion" for c in i.called_computations}
    done: list[ReductionSplit] = []
    for comp in list(module.computations):
        if id(comp) in fused_bodies:
            continue
        rewriter = _Rewriter(module, comp)
        changed = True
        while changed:  # to a fixed point, as XLA's HloPassFix: the new reduces are visited again
            changed = False
            for reduce in [i for i in comp.instructions if i.opcode == "reduce"]:
                changed = rewriter.visit(reduce) or changed
        done.extend(rewriter.done)
    return done
