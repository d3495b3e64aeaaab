"""XLA's `ReduceWindowRewriter`, simulated: a long scan becomes a tree of short windows before fusion.

XLA:GPU runs `ReduceWindowRewriter(base_length=16)` (to a fixed point) early in
its optimization pipeline, long before priority fusion. A `reduce-window` that
is a scan along one dimension (a cumulative sum, product, max, ...: one
non-trivial window dimension whose window spans the whole dimension, stride 1,
padded by `n-1` or `n` on one side) of length `n > 16` is rewritten as

1. a pad of the scan dimension up to a multiple of 16 (with the init value);
2. a reshape `[..., n] -> [..., n/16, 16]` and a 16-wide scan of each row;
3. a slice of each row's last column, an exclusive scan across those columns
   (itself rewritten the same way while longer than 16);
4. a broadcast of that back over the rows, combined elementwise with (2);
5. a reshape back (and slices/pads for the padding and exclusive scans).

So `jnp.cumsum` over 65,536 elements costs about 1.1e6 operations in XLA, not
the 4.3e9 of the window as written. A rank-1 reduce-window that is not
rewritten gets a unit dimension instead (`Replace1DReduceWindowWithReshape`).

The combining `map` is emitted as the reducer's own elementwise instruction
when the reducer is one (what XLA's algebraic simplifier makes of it later),
and the new reshapes relabel row-major layouts (bitcasts to the fusion pass).
Variadic (tuple) reduce-windows are left as written.

Names of facts and shapes follow XLA's
`xla/hlo/transforms/simplifiers/reduce_window_rewriter.cc`; the code is ours.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.opcodes import is_elementwise
from ..hlo import HloComputation, HloInstruction, HloModule, Shape, Window, WindowDimension

__all__ = ["REDUCE_WINDOW_BASE_LENGTH", "ReduceWindowRewrite", "rewrite_reduce_windows"]

#: XLA:GPU's base length for the tree rewrite (`RegisterPass<ReduceWindowRewriter>(/*base_length=*/16)`).
REDUCE_WINDOW_BASE_LENGTH = 16


@dataclass(frozen=True)
class ReduceWindowRewrite:
    """One reduce-window the rewriter changed: `kind` is `"scan-tree"` (a scan of `length` elements
    along `dimension` rewritten into `levels` levels of windows of `base_length`) or `"rank-1"` (a
    rank-1 window given a unit dimension)."""

    computation: str
    instruction: str
    kind: str
    length: int
    dimension: int
    levels: int


def _layout_like(like: Shape, rank: int):
    return tuple(range(rank - 1, -1, -1)) if like.layout is not None else None


class _Builder:
    """Adds instructions to `comp` just before `anchor`, named uniquely in `module`."""

    def __init__(self, module: HloModule, comp: HloComputation, anchor: HloInstruction):
        self.module, self.comp, self.anchor = module, comp, anchor
        self.like = anchor.shape

    def shape(self, element_type: str, dims) -> Shape:
        return Shape.array(element_type, dims, _layout_like(self.like, len(dims)))

    def add(self, prefix: str, opcode: str, shape: Shape, operands, **attributes) -> HloInstruction:
        instr = HloInstruction(self.module.unique_name(prefix), opcode, shape, list(operands))
        for key, value in attributes.items():
            instr.set_attribute(key, value)
        self.comp.add_instruction(instr, before=self.anchor)
        return instr

    def reshape(self, operand, dims):
        return self.add("reshape", "reshape", self.shape(operand.shape.element_type, dims), [operand])

    def slice(self, operand, starts, limits):
        dims = [hi - lo for lo, hi in zip(starts, limits)]
        text = "{" + ", ".join(f"[{lo}:{hi}]" for lo, hi in zip(starts, limits)) + "}"
        return self.add("slice", "slice", self.shape(operand.shape.element_type, dims), [operand], slice=text)

    def pad(self, operand, init, low_high):
        dims = [d + lo + hi for d, (lo, hi) in zip(operand.shape.dims, low_high)]
        text = "x".join(f"{lo}_{hi}" for lo, hi in low_high)
        return self.add("pad", "pad", self.shape(operand.shape.element_type, dims), [operand, init], padding=text)

    def transpose(self, operand, perm):
        dims = [operand.shape.dims[p] for p in perm]
        return self.add("transpose", "transpose", self.shape(operand.shape.element_type, dims), [operand],
                        dimensions="{" + ",".join(map(str, perm)) + "}")

    def broadcast(self, operand, dims, mapped):
        return self.add("broadcast", "broadcast", self.shape(operand.shape.element_type, dims), [operand],
                        dimensions="{" + ",".join(map(str, mapped)) + "}")

    def reduce_window(self, operand, init, dims, window: Window, to_apply):
        return self.add("reduce-window", "reduce-window", self.shape(operand.shape.element_type, dims),
                        [operand, init], window=str(window), to_apply=to_apply)

    def combine(self, lhs, rhs, to_apply: HloComputation):
        """`map(lhs, rhs)` with the reducer, or the reducer's elementwise root itself when it is one
        over the two parameters (what XLA's algebraic simplifier makes of such a map)."""
        root = to_apply.root
        params = {p: i for i, p in enumerate(to_apply.parameters)}
        args = (lhs, rhs)
        if (root is not None and root.opcode not in ("parameter", "map") and is_elementwise(root)
                and root.operands and all(op in params for op in root.operands)):
            return self.add(root.opcode, root.opcode, lhs.shape, [args[params[op]] for op in root.operands])
        dims = "{" + ",".join(map(str, range(lhs.shape.rank))) + "}"
        return self.add("map", "map", lhs.shape, [lhs, rhs], dimensions=dims, to_apply=to_apply)


def _scan(rw: HloInstruction, base_length: int):
    """(scan dimension, length, forward, exclusive) when `rw` is a scan XLA tree-rewrites, else None."""
    if len(rw.operands) != 2 or rw.shape.is_tuple:
        return None
    operand = rw.operands[0]
    if any(operand.shape.dynamic):
        return None
    window = rw.attribute("window", None)
    if window is None or len(window.dimensions) != operand.shape.rank:
        return None
    nontrivial = [d for d, w in enumerate(window.dimensions)
                  if not (w.size == 1 and w.stride == 1 and w.padding_low == 0 and w.padding_high == 0
                          and w.base_dilation == 1 and w.window_dilation == 1 and not w.window_reversal)]
    if len(nontrivial) != 1:
        return None
    dim = nontrivial[0]
    n = operand.shape.dims[dim]
    if n <= base_length:
        return None
    w = window.dimensions[dim]
    forward = w.padding_low in (n - 1, n) and w.padding_high == 0
    reverse = w.padding_high in (n - 1, n) and w.padding_low == 0
    if (w.stride != 1 or w.size != n or not (forward or reverse) or w.window_reversal
            or w.base_dilation != 1 or w.window_dilation != 1):
        return None
    exclusive = (w.padding_low == n) if forward else (w.padding_high == n)
    return dim, n, forward, exclusive


def _window(rank: int, dim: int, size: int, low: int, high: int) -> Window:
    return Window(tuple(WindowDimension(size=size, padding_low=low, padding_high=high) if d == dim
                        else WindowDimension() for d in range(rank)))


def _tree(b: _Builder, source, init, to_apply, dim: int, n: int, forward: bool, exclusive: bool,
          base: int) -> tuple[HloInstruction, int]:
    """The tree-rewritten scan of `source` along `dim` (the instruction that replaces it) and its levels."""
    ty = source.shape.element_type
    rank = source.shape.rank
    last = rank - 1
    perm = list(range(rank))
    if dim != last:  # the scan dimension goes last
        perm[dim], perm[last] = last, dim
        source = b.transpose(source, perm)
    padded = -(-n // base) * base
    if padded != n:
        source = b.pad(source, init, [(0, padded - n) if d == last else (0, 0) for d in range(rank)])
    cols = padded // base
    outer_dims = list(source.shape.dims[:last]) + [cols, base]
    tiled = b.reshape(source, outer_dims)
    outer = b.reduce_window(tiled, init, outer_dims,
                            _window(rank + 1, rank, base, base - 1 if forward else 0, 0 if forward else base - 1),
                            to_apply)
    # the last (first, for a reverse scan) column of each row: [..., cols, 1] -> [..., cols]
    starts = [0] * (rank + 1)
    limits = list(outer_dims)
    if forward:
        starts[rank] = base - 1
    else:
        limits[rank] = 1
    column = b.reshape(b.slice(outer, starts, limits), outer_dims[:rank])
    # exclusive scan across the columns: [..., cols] -> [..., cols + 1] (rewritten again while long)
    inner_dims = outer_dims[:last] + [cols + 1]
    inner = b.reduce_window(column, init, inner_dims,
                            _window(rank, last, cols, cols if forward else 0, 0 if forward else cols), to_apply)
    levels = 1
    scan = _scan(inner, base)
    if scan is not None:
        replacement, sub = _tree(b, column, init, to_apply, *scan, base)
        inner.replace_all_uses_with(replacement)
        b.comp.remove_instruction(inner)
        inner, levels = replacement, levels + sub
    else:
        inner = _rank1(b, inner) or inner
    lo, hi = (0, cols) if forward else (1, cols + 1)
    carried = b.slice(inner, [0] * last + [lo], list(outer_dims[:last]) + [hi])
    spread = b.broadcast(carried, outer_dims, range(rank))
    out = b.reshape(b.combine(outer, spread, to_apply), source.shape.dims)
    if dim != last:
        out = b.transpose(out, perm)
    if padded != n:
        dims = list(out.shape.dims)
        dims[dim] = n
        out = b.slice(out, [0] * rank, dims)
    if exclusive:
        out = b.pad(out, init, [((1, 0) if forward else (0, 1)) if d == dim else (0, 0) for d in range(rank)])
    assert out.shape.element_type == ty
    return out, levels


def _rank1(b: _Builder, rw: HloInstruction) -> HloInstruction | None:
    """`Replace1DReduceWindowWithReshape`: a rank-1 reduce-window over `[n]` computed as one over `[n, 1]`;
    returns the reshape that replaces `rw` (None when `rw` is not a single-input rank-1 window)."""
    if len(rw.operands) != 2 or rw.shape.is_tuple or rw.operands[0].shape.rank != 1:
        return None
    window = rw.attribute("window", None)
    if window is None or len(window.dimensions) != 1:
        return None
    b = _Builder(b.module, b.comp, rw)
    operand, init = rw.operands
    widened = b.reshape(operand, [operand.shape.dims[0], 1])
    out = b.reduce_window(widened, init, [rw.shape.dims[0], 1],
                          Window((window.dimensions[0], WindowDimension())), rw.attribute("to_apply"))
    back = b.reshape(out, rw.shape.dims)
    rw.replace_all_uses_with(back)
    b.comp.remove_instruction(rw)
    return back


def rewrite_reduce_windows(module: HloModule, *, base_length: int = REDUCE_WINDOW_BASE_LENGTH
                           ) -> list[ReduceWindowRewrite]:
    """Rewrite, in place, every scan-like `reduce-window` of `module`'s non-fusion computations longer
    than `base_length` into XLA's tree of short windows, and give rank-1 reduce-windows a unit
    dimension, as XLA:GPU's `ReduceWindowRewriter` does before fusion. Idempotent.

    **Returns:** what was rewritten (`ReduceWindowRewrite`s, in visiting order).
    """
    if base_length <= 1:
        raise ValueError(f"rewrite_reduce_windows: base_length must be > 1, got {base_length}")
    done: list[ReduceWindowRewrite] = []
    fused_bodies = {id(c) for _, i in module.instructions() if i.opcode == "fusion" for c in i.called_computations}
    for comp in list(module.computations):
        if id(comp) in fused_bodies:
            continue
        for rw in [i for i in comp.instructions if i.opcode == "reduce-window"]:
            scan = _scan(rw, base_length)
            if scan is not None:
                b = _Builder(module, comp, rw)
                operand, init = rw.operands
                out, levels = _tree(b, operand, init, rw.attribute("to_apply"), *scan, base_length)
                rw.replace_all_uses_with(out)
                comp.remove_instruction(rw)
                done.append(ReduceWindowRewrite(comp.name, rw.name, "scan-tree", scan[1], scan[0], levels))
            elif rw.operands[0].shape.rank == 1 and _rank1(_Builder(module, comp, rw), rw) is not None:
                done.append(ReduceWindowRewrite(comp.name, rw.name, "rank-1", rw.operands[0].shape.dims[0], 0, 0))
    return done
