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

Ported here: `DimensionOrder::FromDotOperandOrOutput`, `GetPropagatedDimOrdersForBitcast` (a
reshape of the default, row-major layouts XLA has after layout normalization is a bitcast),
`GetPropagatedDimOrdersForDimAlteringOp` (transpose, copy, broadcast, slice, concatenate),
elementwise ops, `GetPropagatedDimOrders`' refusals (an instruction whose user is a concatenate or a
dynamic-slice; broadcast and slice only toward the operands; non-scalar constants) and
`GetRequirementsIfSupportedOrder` / `CombineDotRequirements`. Layouts are taken row-major. Not
ported: dynamic-slice and pad (`GemmFusion` does not fuse them here), the broadcast multiplier of
sub-channel dequantisation (off by default), and the iteration-spec reuse of a producer reached
twice.
"""

from __future__ import annotations

from ..analysis.opcodes import is_elementwise

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
    of its fragments in that dimension's own order (minor to major)."""

    __slots__ = ("frags", "dims")

    def __init__(self):
        self.frags: list[Frag] = []
        self.dims: dict[str, list[int]] = {}


def _from_labels(dims, labels) -> Order:
    """`FromDotOperandOrOutput`: one fragment per dimension, row-major."""
    order = Order()
    for i in reversed(range(len(dims))):
        order.dims.setdefault(labels[i], []).append(len(order.frags))
        order.frags.append(Frag(labels[i], dims[i]))
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
    return _from_labels(dot.operands[side].shape.dims, labels), splittable, nc


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
    return _from_labels(dot.shape.dims, labels), ("M" if requirement > NO_SPLIT else None)


def _bitcast(src: Order, dst_dims) -> Order | None:
    """`GetPropagatedDimOrdersForBitcast` (either direction: source order onto the other shape)."""
    m2m = list(reversed(range(len(dst_dims))))
    dst = Order()
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


def _dim_altering(hlo, to_operands: bool, src: Order, src_dims, dsts) -> dict | None:
    """`GetPropagatedDimOrdersForDimAlteringOp`: transpose, copy, broadcast, slice, concatenate."""
    op = hlo.opcode
    if op == "slice" and all(d == 1 for d in hlo.shape.dims):
        return None  # "Slice to scalar is not implemented yet."
    frags = [f.copy() for f in src.frags]  # slices edit their fragments: a copy
    if len(frags) < len(src_dims):
        return None
    logical: list[list[int]] = [[] for _ in src_dims]
    k = 0
    for d in reversed(range(len(src_dims))):
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
    for dst in dsts:
        dst_dims = dst.shape.dims
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
        order = Order()
        src_to_dst: dict[int, int] = {}
        present = set()
        for d in reversed(range(len(dst_dims))):
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
        out[id(dst)] = order
    return out


def _labeled_dim(dims, order: Order, label: str) -> int | None:
    """`LogicalIndexOfLabeledDimension`."""
    k = 0
    for d in reversed(range(len(dims))):
        acc = 1
        while acc < dims[d] and k < len(order.frags):
            acc *= order.frags[k].count
            if order.frags[k].label == label:
                return d
            k += 1
    return None


def _propagated(hlo, to_operands: bool, src: Order, noncontracting: str | None) -> dict | None:
    """`GetPropagatedDimOrders`: {id(tensor): order} for the other side of `hlo`, or None (refused)."""
    op = hlo.opcode
    if to_operands and op != "parameter" and any(u.opcode in ("concatenate", "dynamic-slice") for u in hlo.users):
        return None  # "No fusion into concatenations or dynamic slice."
    if op == "parameter" or (op == "constant" and not hlo.shape.dims):
        return {}
    if op in ("transpose", "copy"):
        dsts = hlo.operands if to_operands else [hlo]
        return _dim_altering(hlo, to_operands, src, (hlo if to_operands else hlo.operands[0]).shape.dims, dsts)
    if op in ("broadcast", "slice"):
        if not to_operands:
            return None
        return _dim_altering(hlo, True, src, hlo.shape.dims, hlo.operands[:1])
    if hlo.operands and is_elementwise(hlo):
        return {id(o): src for o in hlo.operands} if to_operands else {id(hlo): src}
    if op in ("bitcast", "reshape"):
        dst = hlo.operands[0] if to_operands else hlo
        order = _bitcast(src, dst.shape.dims)
        return None if order is None else {id(dst): order}
    if op == "concatenate" and to_operands:
        if noncontracting is not None and len(src.dims.get(noncontracting, ())) > 1:
            return None  # "Concatenations on split non-contracting dimensions are unsupported."
        dim = _labeled_dim(hlo.shape.dims, src, noncontracting) if noncontracting else None
        if dim is None or dim != int(hlo.attribute("dimensions", (0,))[0]):
            return None
        if any(o.shape.dims[dim] % 64 for o in hlo.operands):  # kMinConcatFragmentSize
            return None
        return _dim_altering(hlo, True, src, hlo.shape.dims, hlo.operands)
    return None


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
              requirement: int) -> tuple[dict, int] | None:
    """`GetPropagatedDimOrdersAndRequirements` combined with the requirement so far: the orders of
    `hlo`'s operands (toward the operands, `src` being `hlo`'s) or of `hlo` (toward the users, `src`
    its operand's), and the new requirement; None when GemmFusion refuses the step."""
    orders = _propagated(hlo, to_operands, src, noncontracting)
    if orders is None:
        return None
    req = requirement
    for order in orders.values():  # `GetRequirementsIfSupportedOrders`: the orders just propagated
        req = combine(req, _requirement(order, splittable))
        if req is None:
            return None
    return orders, req
