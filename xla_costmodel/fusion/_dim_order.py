"""Triton GEMM dimension orders: which producers and users `GemmFusion` can take into a GEMM fusion.

XLA:GPU's `GemmFusion` grows a Triton GEMM fusion only through instructions its tiling can follow
(`service/gpu/triton_tiling_propagation.cc`): each dimension of the (canonical, batch dimensions
merged) dot, `B`atch, `M`/`N` (non-contracting) and `K` (contracting), is followed through every
fused tensor as a list of fragments, in physical order (minor to major). A fusion may hold an
instruction only if, in every tensor around it, each dot dimension stays one contiguous run of
fragments in its own order (`GetRequirementsIfSupportedOrder`): "Transpose within a dimension" and
"Unsupported split of a dimension" are refused; the LHS non-contracting dimension of a dot without
batch dimensions may be split once (the split's major size is then a requirement every tensor of
the fusion must agree on). So a transpose that interleaves the batch dimensions with `M` (an
attention's `[B, T, N, H] -> [B, N, T, H]`) stays out of the fusion, its own kernel.

Ported here: `DimensionOrder::FromDotOperandOrOutput`, `GetPropagatedDimOrdersForBitcast`,
`GetPropagatedDimOrdersForDimAlteringOp` (transpose, copy, broadcast, slice, concatenate),
elementwise ops, `GetPropagatedDimOrders`' refusals (an instruction whose user is a concatenate or a
dynamic-slice; broadcast and slice only toward the operands; non-scalar constants) and
`GetRequirementsIfSupportedOrder` / `CombineDotRequirements`. Physical order is each shape's own
layout (`minor_to_major`), as in XLA: a module as JAX lowers it can carry layouts that make a
transpose a mere relabelling (`f32[2,32,64]{1,0,2} transpose(f32[64,2,32]{2,1,0})`) and a reshape
a physical transpose (`f32[2,32,64]{2,1,0} reshape(f32[2,32,4,16]{3,1,2,0})`). A reshape that is
a bitcast on its layouts (`analysis.shapes.reshape_keeps_layout`) is followed as one; any other is
followed as the `copy` and `bitcast` XLA's `ReshapeDecomposer` makes of it before `GemmFusion` (the
copy toward the default layout on the side that does not have it; a reshape with neither side in
the default layout, where XLA's `ShapeUtil::AlignLayouts` picks the copy's layout, is refused). Not
ported: dynamic-slice and pad (`GemmFusion` does not fuse them here), the broadcast multiplier of
sub-channel dequantisation (off by default), and the iteration-spec reuse of a producer reached
twice. The layouts are the module's: XLA's layout assignment may still change them.
"""

from __future__ import annotations

from ..analysis.opcodes import is_elementwise
from ..analysis.shapes import reshape_keeps_layout
from ..hlo import Shape

__all__ = ["NO_SPLIT", "Frag", "Order", "combine", "dot_operand_order", "dot_output_order", "propagate"]

#: `kNoSplitRequirement`
NO_SPLIT = 1


class Frag:
    """`DimensionOrder::Fragment`: `count` elements of dot dimension `label`; `sliced` when only part is read."""

    __slots__ = ("label", "count", "sliced")

    def __init__(self, label: str, count: int, sliced: bool = False):
        self.label, self.count, self.sliced = label, count, sliced

    def copy(self) -> "Frag":
        return Frag(self.label, self.count, self.sliced)


class Order:
    """`DimensionOrder`: a tensor's fragments, minor to major, and for each dot dimension the indices
    of its fragments in that dimension's own order (minor to major); `m2m`, the layout they are laid
    out in (the tensor's own, or the one an elementwise user passed on, see `_laid_out`)."""

    __slots__ = ("frags", "dims", "m2m")

    def __init__(self, m2m: tuple[int, ...] | None = None):
        self.frags: list[Frag] = []
        self.dims: dict[str, list[int]] = {}
        self.m2m = m2m


def _laid_out(shape, order: Order):
    """`shape` in the layout its order was made in. An elementwise op passes its order on to its
    operands unchanged (`GetPropagatedDimOrdersForElementwise`), which is right in XLA's module:
    layout assignment gives an elementwise op's operands its own layout. A lowered module may not
    (`f32[1024,512]{0,1} add(transpose, f32[1024,512]{1,0} broadcast(bias))`): the operand is taken
    in the layout layout assignment would give it, the user's."""
    m2m = order.m2m
    if m2m is None or len(m2m) != len(shape.dims) or tuple(m2m) == tuple(shape.minor_to_major):
        return shape
    return Shape.array(shape.element_type, shape.dims, tuple(m2m))


def _from_labels(shape, labels) -> Order:
    """`FromDotOperandOrOutput`: one fragment per dimension, in the layout's order."""
    order = Order(shape.minor_to_major)
    for i in shape.minor_to_major:
        order.dims.setdefault(labels[i], []).append(len(order.frags))
        order.frags.append(Frag(labels[i], shape.dims[i]))
    return order


def dot_operand_order(dot, side: int, split_k: int = 1) -> tuple[Order, str | None, str]:
    """The dimension order of the dot's operand `side`, its splittable dimension (`FromDotOperand`:
    the LHS non-contracting one when the dot has no batch dimension other than split-K's) and its
    non-contracting dimension's label. Batch dimensions are one (`DotDimensionMerger`); a split-K
    batch dimension is the contracting one's."""
    batch = tuple(int(x) for x in dot.attribute("lhs_batch_dims" if side == 0 else "rhs_batch_dims", ()) or ())
    contracting = tuple(int(x) for x in dot.attribute(
        "lhs_contracting_dims" if side == 0 else "rhs_contracting_dims", ()) or ())
    nc = "M" if side == 0 else "N"
    split_dims = {c - 1 for c in contracting} if split_k > 1 else set()
    labels = ["K" if (i in contracting or i in split_dims) else "B" if i in batch else nc
              for i in range(dot.operands[side].shape.rank)]
    real_batch = len(batch) - (1 if split_k > 1 else 0)
    splittable = nc if side == 0 and real_batch == 0 else None
    return _from_labels(dot.operands[side].shape, labels), splittable, nc


def dot_output_order(dot, requirement: int, split_k: int = 1) -> tuple[Order, str | None]:
    """`FromDotOutput`: the dot's output order and its splittable dimension (LHS non-contracting,
    when the operands split it)."""
    lb = tuple(int(x) for x in dot.attribute("lhs_batch_dims", ()) or ())
    lc = tuple(int(x) for x in dot.attribute("lhs_contracting_dims", ()) or ())
    lhs_rank = dot.operands[0].shape.rank
    n_batch, n_lhs = len(lb), lhs_rank - len(lb) - len(lc)
    labels = ["B"] * n_batch + ["M"] * n_lhs + ["N"] * (dot.shape.rank - n_batch - n_lhs)
    if split_k > 1:
        labels[0] = "S"
    return _from_labels(dot.shape, labels), ("M" if requirement > NO_SPLIT else None)


def _bitcast(src: Order, dst_shape) -> Order | None:
    """`GetPropagatedDimOrdersForBitcast` (either direction: source order onto the other shape)."""
    dst_dims = dst_shape.dims
    m2m = dst_shape.minor_to_major
    dst = Order(m2m)
    src_to_dst: dict[int, list[int]] = {}
    dst_rem = 1
    it = 0
    for si, sf in enumerate(src.frags):
        def add(f, si=si):
            dst.frags.append(f)
            src_to_dst.setdefault(si, []).append(len(dst.frags) - 1)
        if dst_rem >= sf.count:
            if dst_rem % sf.count:
                return None
            add(sf.copy())
            dst_rem //= sf.count
            continue
        src_rem = sf.count
        if dst_rem > 1:
            if src_rem % dst_rem or sf.sliced:
                return None
            add(Frag(sf.label, dst_rem))
            src_rem //= dst_rem
            dst_rem = 1
        while src_rem > 1:
            if it >= len(m2m):
                return None
            size = dst_dims[m2m[it]]
            new = size
            if size > src_rem:
                if size % src_rem:
                    return None
                dst_rem = size // src_rem
                new = src_rem
            if sf.sliced:
                return None
            add(Frag(sf.label, new))
            src_rem //= new
            it += 1
    if dst_rem != 1:
        return None
    while it < len(m2m):  # remaining major dimensions: degenerate ones join the most major fragment
        if dst_dims[m2m[it]] != 1:
            return None
        if dst.frags:
            dst.frags.append(Frag(dst.frags[-1].label, 1))
            src_to_dst.setdefault(len(src.frags) - 1, []).append(len(dst.frags) - 1)
        it += 1
    for label, seq in src.dims.items():
        out = dst.dims.setdefault(label, [])
        for s in seq:
            out.extend(src_to_dst.get(s, ()))
    return dst


def _dim_altering(hlo, to_operands: bool, src: Order, src_shape, dsts, op: str | None = None) -> dict | None:
    """`GetPropagatedDimOrdersForDimAlteringOp`: transpose, copy, broadcast, slice, concatenate.
    `dsts`: (key, shape) of the other side's tensors; `op`: the opcode, when not `hlo`'s."""
    op = op or hlo.opcode
    src_dims = src_shape.dims
    if op == "slice" and all(d == 1 for d in hlo.shape.dims):
        return None  # "Slice to scalar is not implemented yet."
    frags = [f.copy() for f in src.frags]  # slices edit their fragments: a copy
    if len(frags) < len(src_dims):
        return None
    logical: list[list[int]] = [[] for _ in src_dims]
    k = 0
    for d in src_shape.minor_to_major:  # source physical -> source logical
        acc = 1
        while True:
            if k >= len(frags):
                return None
            acc *= frags[k].count
            logical[d].append(k)
            k += 1
            if acc >= src_dims[d]:
                break
        if acc != src_dims[d]:
            return None
    out = {}
    concat_dim = int(hlo.attribute("dimensions", (0,))[0]) if op == "concatenate" else None
    for key, dst_shape in dsts:
        dst_dims = dst_shape.dims
        extra: list[Frag] = []  # fragments made here (a concatenate's operand parts)
        if op == "transpose":
            perm = [int(x) for x in hlo.attribute("dimensions", ())]
            if not to_operands:
                inv = [0] * len(perm)
                for i, p in enumerate(perm):
                    inv[p] = i
                perm = inv
            dst_logical = [None] * len(perm)
            for i, p in enumerate(perm):
                dst_logical[p] = logical[i]
        elif op == "broadcast":
            dst_logical = [logical[int(b)] for b in hlo.attribute("dimensions", ()) or ()]
        elif op == "concatenate":
            dst_logical = []
            for i in range(len(logical)):
                if i == concat_dim:
                    if len(logical[i]) != 1 or frags[logical[i][0]].sliced:
                        return None
                    extra.append(Frag(frags[logical[i][0]].label, dst_dims[i]))
                    dst_logical.append([-len(extra)])
                else:
                    dst_logical.append(logical[i])
        elif op == "copy":
            dst_logical = logical
        elif op == "slice":
            dst_logical = []
            for d in range(len(logical)):
                if dst_dims[d] != src_dims[d]:
                    if len(logical[d]) > 1:
                        return None  # "Slicing of fragmented dimension."
                    f = frags[logical[d][0]]
                    f.count = dst_dims[d]
                    f.sliced = True
                dst_logical.append(logical[d])
        else:
            return None
        order = Order(dst_shape.minor_to_major)
        src_to_dst: dict[int, int] = {}
        present = set()
        for d in dst_shape.minor_to_major:  # destination logical -> destination physical
            for k in dst_logical[d]:
                f = frags[k] if k >= 0 else extra[-k - 1]
                order.frags.append(f.copy())
                if k >= 0:
                    src_to_dst[k] = len(order.frags) - 1
                if f.count > 1:
                    present.add(f.label)
        for label, seq in src.dims.items():
            for k in seq:
                if k in src_to_dst:
                    order.dims.setdefault(label, []).append(src_to_dst[k])
                elif op == "broadcast" and src.frags[k].count > 1 and label in present:
                    return None  # "Unsupported broadcast"
        out[key] = order
    return out


def _labeled_dim(shape, order: Order, label: str) -> int | None:
    """`LogicalIndexOfLabeledDimension`."""
    dims = shape.dims
    k = 0
    for d in shape.minor_to_major:
        acc = 1
        while acc < dims[d] and k < len(order.frags):
            acc *= order.frags[k].count
            if order.frags[k].label == label:
                return d
            k += 1
    return None


def _propagated(hlo, to_operands: bool, src: Order, noncontracting: str | None, results=frozenset()) -> dict | None:
    """`GetPropagatedDimOrders`: {id(tensor): order} for the other side of `hlo`, or None (refused).
    `results`: ids of the instructions taken in the default layout (see `propagate`)."""
    op = hlo.opcode

    def shape(instr):
        if id(instr) in results:
            return Shape.array(instr.shape.element_type, instr.shape.dims)
        return instr.shape

    if to_operands and op != "parameter" and any(u.opcode in ("concatenate", "dynamic-slice") for u in hlo.users):
        return None  # "No fusion into concatenations or dynamic slice."
    if op == "parameter" or (op == "constant" and not hlo.shape.dims):
        return {}
    here = _laid_out(shape(hlo if to_operands else hlo.operands[0]), src)  # the side `src` describes
    if op in ("transpose", "copy"):
        dsts = hlo.operands if to_operands else [hlo]
        return _dim_altering(hlo, to_operands, src, here, [(id(d), shape(d)) for d in dsts])
    if op in ("broadcast", "slice"):
        if not to_operands:
            return None
        return _dim_altering(hlo, True, src, here, [(id(hlo.operands[0]), shape(hlo.operands[0]))])
    if hlo.operands and is_elementwise(hlo):
        return {id(o): src for o in hlo.operands} if to_operands else {id(hlo): src}
    if op in ("bitcast", "reshape"):
        dst = hlo.operands[0] if to_operands else hlo
        if op == "bitcast" or reshape_keeps_layout(here, shape(dst)):
            order = _bitcast(src, shape(dst))
            return None if order is None else {id(dst): order}
        return _decomposed_reshape(hlo, to_operands, src, here, shape(dst))
    if op == "concatenate" and to_operands:
        if noncontracting is not None and len(src.dims.get(noncontracting, ())) > 1:
            return None  # "Concatenations on split non-contracting dimensions are unsupported."
        dim = _labeled_dim(here, src, noncontracting) if noncontracting else None
        if dim is None or dim != int(hlo.attribute("dimensions", (0,))[0]):
            return None
        if any(o.shape.dims[dim] % 64 for o in hlo.operands):  # kMinConcatFragmentSize
            return None
        return _dim_altering(hlo, True, src, here, [(id(o), shape(o)) for o in hlo.operands])
    return None


def _common_factors(a, b) -> list[tuple[int, int]]:
    """`CommonFactors` of two shapes without dimensions of size 0 or 1: the (i, j) where the
    products of `a[:i]` and `b[:j]` agree."""
    ends_b: dict[int, int] = {}
    p = 1
    for j in range(len(b) + 1):
        ends_b.setdefault(p, j)
        if j < len(b):
            p *= b[j]
    out, p = [], 1
    for i in range(len(a) + 1):
        if p in ends_b and (not out or ends_b[p] > out[-1][1] or i == len(a)):
            out.append((i, ends_b[p] if i < len(a) else len(b)))
        if i < len(a):
            p *= a[i]
    return out


def _align_layouts(dims_in, m2m_in, dims_out) -> tuple[int, ...] | None:
    """`ShapeUtil::AlignLayouts`: a layout of `dims_out` that makes the reshape from `dims_in` in
    the layout `m2m_in` a bitcast, or None. Unit dimensions are dropped first and go most major."""
    if 1 in dims_in or 1 in dims_out:
        keep_in = [d for d, n in enumerate(dims_in) if n != 1]
        renum = {d: k for k, d in enumerate(keep_in)}
        keep_out = [d for d, n in enumerate(dims_out) if n != 1]
        simple = _align_layouts([dims_in[d] for d in keep_in], [renum[d] for d in m2m_in if d in renum],
                                [dims_out[d] for d in keep_out])
        if simple is None:
            return None
        return tuple(keep_out[d] for d in simple) + tuple(d for d in reversed(range(len(dims_out)))
                                                          if dims_out[d] == 1)
    if not dims_in:
        return ()
    factors = _common_factors(dims_in, dims_out)
    to_factor = [0] * len(dims_in)
    for pos in range(len(factors) - 1):
        start, stop = factors[pos][0], factors[pos + 1][0]
        physical = m2m_in.index(start)
        to_factor[start] = pos
        for i in range(start + 1, stop):  # a factor's input dimensions: adjacent, in row-major order
            physical -= 1
            if physical < 0 or m2m_in[physical] != i:
                return None
            to_factor[i] = pos
    out: list[int] = []
    minor = 0
    while len(out) < len(dims_out):
        pos = to_factor[m2m_in[minor]]
        (a0, b0), (a1, b1) = factors[pos], factors[pos + 1]
        out.extend(range(b1 - 1, b0 - 1, -1))
        minor += a1 - a0
    return tuple(out)


def _decomposed_reshape(hlo, to_operands: bool, src: Order, here, there) -> dict | None:
    """A reshape that moves data, followed as XLA's `ReshapeDecomposer` splits it (it runs in layout
    normalization, before `GemmFusion`): `bitcast(copy(x))`, the copy to the layout of `x`'s
    dimensions `AlignLayouts` aligns with the reshape's, when there is one; else `copy(bitcast(x))`,
    the copy from the reshape's dimensions aligned with `x`'s layout; else copy, bitcast, copy
    through the default layouts. Every part must be fusible and every order between them meet the
    requirements (a part left out is a kernel either way, the reshape's own or a copy's). `here`:
    the shape of the side `src` describes, in its layout; `there`, the other side's."""
    x, y = (there, here) if to_operands else (here, there)
    x_aligned = _align_layouts(y.dims, y.minor_to_major, x.dims)
    if x_aligned is not None:
        mid = Shape.array(x.element_type, x.dims, x_aligned)
        steps = [("copy", x, mid), ("bitcast", mid, y)]
    else:
        y_aligned = _align_layouts(x.dims, x.minor_to_major, y.dims)
        if y_aligned is not None:
            mid = Shape.array(y.element_type, y.dims, y_aligned)
            steps = [("bitcast", x, mid), ("copy", mid, y)]
        else:
            x_default, y_default = Shape.array(x.element_type, x.dims), Shape.array(y.element_type, y.dims)
            steps = [("copy", x, x_default), ("bitcast", x_default, y_default), ("copy", y_default, y)]
    if to_operands:  # in the direction of the propagation
        steps = [(o, b, a) for o, a, b in reversed(steps)]
    out: dict = {}
    order = src
    for n, (opcode, from_shape, to_shape) in enumerate(steps):
        if opcode == "bitcast":
            order = _bitcast(order, to_shape)
        else:
            got = _dim_altering(hlo, to_operands, order, from_shape, [(0, to_shape)], op="copy")
            order = None if got is None else got[0]
        if order is None:
            return None
        out[("reshape-decomposer", n)] = order  # checked against the requirements with the others
    dst = hlo.operands[0] if to_operands else hlo
    out[id(dst)] = out.pop(("reshape-decomposer", len(steps) - 1))
    return out


def _requirement(order: Order, splittable: str | None) -> int | None:
    """`GetRequirementsIfSupportedOrder`: the split's major part size required (`NO_SPLIT`: none), or None."""
    split = NO_SPLIT
    for label, seq in order.dims.items():
        if any(order.frags[i].sliced for i in seq[:-1]):
            return None  # "Sliced non-major-most fragment."
        groups = 0
        last = -1
        j = 0
        while j < len(seq):
            size = order.frags[seq[j]].count
            while j + 1 < len(seq) and seq[j + 1] == seq[j] + 1:
                j += 1
                size *= order.frags[seq[j]].count
            if size == 1:
                j += 1
                continue
            if last > seq[j]:
                return None  # "Transpose within a dimension."
            groups += 1
            if groups > 1:
                if label != splittable or groups > 2:
                    return None  # "Unsupported split of a dimension." / "2nd split"
                if split != NO_SPLIT and split != size:
                    return None
                split = size
            last = seq[j]
            j += 1
    return split


def combine(a: int | None, b: int | None) -> int | None:
    """`CombineDotRequirements` (None: refused)."""
    if a is None or b is None:
        return None
    if a == b or b == NO_SPLIT:
        return a
    if a == NO_SPLIT:
        return b
    return None


def propagate(hlo, to_operands: bool, src: Order, splittable: str | None, noncontracting: str | None,
              requirement: int, results=frozenset()) -> tuple[dict, int] | None:
    """`GetPropagatedDimOrdersAndRequirements` combined with the requirement so far: the orders of
    `hlo`'s operands (toward the operands, `src` being `hlo`'s) or of `hlo` (toward the users, `src`
    its operand's), and the new requirement; None when GemmFusion refuses the step. `results`: the
    ids of the instructions whose layout is the entry computation's result layout, taken as the
    default one (a module not yet through layout assignment: JAX asks XLA for row-major results,
    whatever layout the lowered module's root shows)."""
    orders = _propagated(hlo, to_operands, src, noncontracting, results)
    if orders is None:
        return None
    req = requirement
    for order in orders.values():  # `GetRequirementsIfSupportedOrders`: the orders just propagated
        req = combine(req, _requirement(order, splittable))
        if req is None:
            return None
    return orders, req
