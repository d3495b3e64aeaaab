"""XLA's symbolic tiling of a fusion: what each instruction computes per block, and which tilings Triton can emit.

A fact about how XLA:GPU emits a tiled (Triton) fusion, as `_emission` holds
the facts of its other emitters; the tiled performance model
(`models._tiled`) prices what this gives. After XLA's `SymbolicTileAnalysis`
and `TiledHloComputation` (openxla/xla@6b73c4c49eb0; research note §4).

- `propagate(kernel, root_tile)`: the output tile of the fusion's root
  carried to every instruction: elementwise ops keep it; a broadcast drops
  the broadcast dimensions; a transpose permutes it; a reduce takes its
  reduced dimensions whole; a bitcast / reshape maps it through the reshape
  when the tile stays a box (contiguous, or strided along one dimension;
  otherwise `TilingError`, as XLA's symbolic tiles reject it); a slice keeps
  the sizes and multiplies the strides; a concatenate and a dot start
  regions: each operand of a concatenate is computed by the share of the
  blocks that its part of the output covers (integer division), and a dot's
  operands by every iteration of its reduction loop (blocks x ceil(K /
  tile_K), tile_K from the dot's `backend_config` `sizes`). Instructions with
  the same tile and block count are one tiled instruction. A multi-output
  fusion is tiled from its one root that no other root reads; the other
  roots take the tile that reaches them (two independent roots: unsupported,
  as in XLA).
- `candidate_tiles(kernel)`: the root tiles XLA's search tries (sizes 1, 2,
  4, ... below each dimension and the dimension itself);
  `satisfies_triton_constraints`: padded tiles at most 2^20 elements, fewer
  blocks than the grid limit, root tiles powers of two or whole dimensions,
  dot operand tiles at most 256.
- `configured_tiling(kernel)`: the `block_level_fusion_config` a Triton
  fusion's backend config asks for.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

from ._emission import fused_roots
from ._frontend import backend_config
from ._opcodes import IS_ELEMENTWISE
from ._rules import _attr_tuple
from ._shapes import first_array

__all__ = [
    "BlockLevelParameters",
    "MAX_MMA_DIM",
    "MAX_TENSOR_ELEMENTS",
    "Tile",
    "TiledComputation",
    "TiledInstruction",
    "TilingError",
    "candidate_tiles",
    "check_symbolic_tiling",
    "configured_tiling",
    "dims_of",
    "dot_operand_tiles",
    "pow2_ceil",
    "TiledCandidate",
    "TiledCandidates",
    "pow2_ceil_array",
    "propagate",
    "propagate_candidates",
    "satisfies_triton_constraints",
]

MAX_TENSOR_ELEMENTS = 1 << 20   # TRITON_MAX_TENSOR_NUMEL
MAX_MMA_DIM = 256               # dot operand tiles


class TilingError(ValueError):
    """A tile cannot be propagated through an instruction (XLA's symbolic tiles reject it)."""


def pow2_ceil(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


@dataclass(frozen=True, slots=True)
class Tile:
    """Tile sizes and strides per dimension of an instruction's shape."""

    sizes: tuple
    strides: tuple

    @staticmethod
    def of(sizes) -> "Tile":
        sizes = tuple(int(s) for s in sizes)
        return Tile(sizes, (1,) * len(sizes))

    @property
    def padded(self) -> int:
        return padded_size(self.sizes)


# The tiling search asks these of the same few shapes and tiles again and again (every candidate root
# tile, every pair priority fusion tries): pure functions of hashable values, kept.
@functools.lru_cache(maxsize=1 << 16)
def padded_size(sizes: tuple) -> int:
    """The elements of a tile of `sizes` padded to powers of two (what a tile holds in registers)."""
    return math.prod(pow2_ceil(s) for s in sizes)


@dataclass(slots=True)
class TiledInstruction:
    """One instruction of the fusion with one tile, computed by `blocks` blocks in all (XLA's
    `TiledHloInstruction` with its `num_blocks_cur_hlo`); `operand`: a fusion parameter (read from memory)."""

    hlo: Any
    tile: Tile
    blocks: int
    operand: bool


@dataclass(slots=True)
class TiledComputation:
    """The fusion tiled: `instructions`, `roots` (`(root instruction, its tile)` in output order),
    `num_blocks` (tiles of the tiled root, one block each) and `block_k` (the dots' reduction tile it was
    propagated with; None: each dot's own `backend_config` `sizes`)."""

    instructions: list
    roots: list
    num_blocks: int
    block_k: int | None = None


# ---------------------------------------------------------------------------
# Tile propagation


def dims_of(hlo) -> tuple:
    return tuple(first_array(hlo.shape).dims)


def _reshape_groups(src: tuple, dst: tuple) -> list[tuple[list, list]]:
    """Groups of consecutive dimensions with equal products `(src dims, dst dims)`, unit dims attached."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        gi, gj = [], []
        ps = pd = 1
        if i < len(src):
            gi.append(i); ps *= src[i]; i += 1
        if j < len(dst):
            gj.append(j); pd *= dst[j]; j += 1
        while ps != pd:
            if ps < pd and i < len(src):
                gi.append(i); ps *= src[i]; i += 1
            elif pd < ps and j < len(dst):
                gj.append(j); pd *= dst[j]; j += 1
            else:
                raise TilingError(f"reshape {src} -> {dst} has no matching dimension groups")
        # trailing unit dimensions belong to this group
        while i < len(src) and src[i] == 1 and (j >= len(dst) or dst[j] != 1):
            gi.append(i); i += 1
        while j < len(dst) and dst[j] == 1 and (i >= len(src) or src[i] != 1):
            gj.append(j); j += 1
        groups.append((gi, gj))
    return groups


def _linear(dims: list, sizes: list, strides: list) -> tuple[int, int]:
    """A tile of a dimension group as one linear `(size, stride)`, or a TilingError when it is not one."""
    nontrivial = [k for k, s in enumerate(sizes) if s > 1]
    if not nontrivial:
        return 1, 1
    k = nontrivial[0]
    # contiguous: full (stride 1) from k + 1 to the minor end, anything at k with stride 1
    if all(sizes[m] == dims[m] and strides[m] == 1 for m in range(k + 1, len(dims))) and strides[k] == 1:
        return sizes[k] * math.prod(dims[k + 1:]), 1
    if len(nontrivial) == 1:
        return sizes[k], strides[k] * math.prod(dims[k + 1:])
    raise TilingError("the tile is not a box after the reshape")


def _unlinear(dims: list, size: int, stride: int) -> tuple[list, list]:
    """A linear `(size, stride)` as a tile of a dimension group (inverse of `_linear`)."""
    n = len(dims)
    sizes, strides = [1] * n, [1] * n
    if size == 1:
        return sizes, strides
    inner = 1
    for k in range(n - 1, -1, -1):
        if stride == 1:
            if size <= inner * dims[k]:
                if size % inner:
                    raise TilingError("the tile does not fit the reshaped dimensions")
                sizes[k] = size // inner
                for m in range(k + 1, n):
                    sizes[m] = dims[m]
                return sizes, strides
        elif stride % inner == 0 and (stride // inner) * (size - 1) < dims[k] and stride // inner >= 1 \
                and (k == n - 1 or stride >= inner):
            sizes[k], strides[k] = size, stride // inner
            return sizes, strides
        inner *= dims[k]
    raise TilingError("the tile does not map onto the reshaped dimensions")


@functools.lru_cache(maxsize=1 << 16)
def _reshape_tile(src: tuple, dst: tuple, tile: Tile) -> Tile:
    """The tile of `src` that a reshape to `dst` reads for the `dst` tile `tile`."""
    sizes, strides = [1] * len(src), [1] * len(src)
    for gi, gj in _reshape_groups(src, dst):
        size, stride = _linear([dst[j] for j in gj], [tile.sizes[j] for j in gj], [tile.strides[j] for j in gj])
        s, st = _unlinear([src[i] for i in gi], size, stride)
        for i, a, b in zip(gi, s, st):
            sizes[i], strides[i] = a, b
    return Tile(tuple(sizes), tuple(strides))


def _major_to_minor(hlo) -> tuple:
    return tuple(reversed(first_array(hlo.shape).minor_to_major))


def _bitcast_tile(src, dst, tile: Tile) -> Tile:
    """The tile of `src` that a bitcast to `dst` reads: a bitcast keeps the bytes in memory order, so
    the tile is reshaped between the two shapes' physical (major-to-minor) dimensions; with different
    layouts that is a transpose as well (XLA's `GetBitcastMap`)."""
    return _bitcast_shape_tile(src.shape, dst.shape, tile)


@functools.lru_cache(maxsize=1 << 16)
def _bitcast_shape_tile(src_shape, dst_shape, tile: Tile) -> Tile:
    """`_bitcast_tile` of the two instructions' shapes (all it depends on)."""
    src, dst = first_array(src_shape), first_array(dst_shape)
    out_order, in_order = tuple(reversed(dst.minor_to_major)), tuple(reversed(src.minor_to_major))
    dst_dims, src_dims = tuple(dst.dims), tuple(src.dims)
    physical = Tile(tuple(tile.sizes[d] for d in out_order), tuple(tile.strides[d] for d in out_order))
    src_physical = tuple(src_dims[d] for d in in_order)
    dst_physical = tuple(dst_dims[d] for d in out_order)
    # The same physical dimensions: a pure relayout, the tile carries over whole (sizes over a dimension too).
    t = physical if src_physical == dst_physical else _reshape_tile(src_physical, dst_physical, physical)
    sizes, strides = [1] * len(src_dims), [1] * len(src_dims)
    for k, d in enumerate(in_order):
        sizes[d], strides[d] = t.sizes[k], t.strides[k]
    return Tile(tuple(sizes), tuple(strides))


def _block_k(dot) -> int | None:
    """The dot's reduction tile from its `backend_config` `sizes` (Triton GEMM fusions), or None."""
    raw = dot.raw_attributes.get("backend_config", "") if hasattr(dot, "raw_attributes") else ""
    m = re.search(r'sizes"?\s*:\s*\[\s*"?(\d+)', raw or "")
    return int(m.group(1)) if m else None


def operand_tiles(hlo, tile: Tile, block_k: int | None = None) -> list[tuple[Any, Tile, Any]]:
    """`(operand, its tile, region)` for every operand of `hlo` computed under `tile`.

    `region`: None (the same blocks), `("dot", factor)` (blocks x factor: the
    reduction loop), `("concat", numerator, denominator)` (blocks x num // den).
    """
    op = hlo.opcode
    ops = hlo.operands
    if op in IS_ELEMENTWISE or op in ("copy", "opt-barrier"):
        return [(o, tile, None) for o in ops]
    if op == "broadcast":
        dims = _attr_tuple(hlo, "dimensions")
        return [(ops[0], Tile(tuple(tile.sizes[d] for d in dims), tuple(tile.strides[d] for d in dims)), None)]
    if op == "transpose":
        perm = _attr_tuple(hlo, "dimensions")
        sizes, strides = [0] * len(perm), [0] * len(perm)
        for i, p in enumerate(perm):
            sizes[p], strides[p] = tile.sizes[i], tile.strides[i]
        return [(ops[0], Tile(tuple(sizes), tuple(strides)), None)]
    if op == "bitcast":
        return [(ops[0], _bitcast_tile(ops[0], hlo, tile), None)]
    if op == "reshape":
        return [(ops[0], _reshape_tile(dims_of(ops[0]), dims_of(hlo), tile), None)]
    if op == "reduce":
        reduced = set(_attr_tuple(hlo, "dimensions"))
        n_in = len(ops) // 2
        in_dims = dims_of(ops[0])
        it = iter(range(len(tile.sizes)))
        sizes, strides = [], []
        for d, extent in enumerate(in_dims):
            if d in reduced:
                sizes.append(extent); strides.append(1)
            else:
                k = next(it)
                sizes.append(tile.sizes[k]); strides.append(tile.strides[k])
        t_in = Tile(tuple(sizes), tuple(strides))
        return [(o, t_in, None) for o in ops[:n_in]] + [(o, Tile((), ()), None) for o in ops[n_in:]]
    if op == "slice":
        st = _attr_tuple(hlo, "slice_strides") or (1,) * len(tile.sizes)
        return [(ops[0], Tile(tile.sizes, tuple(a * b for a, b in zip(tile.strides, st))), None)]
    if op in ("dynamic-slice", "pad"):
        rest = [(o, Tile((), ()), None) for o in ops[1:] if not dims_of(o)]
        return [(ops[0], tile, None)] + rest
    if op == "concatenate":
        dim = _attr_tuple(hlo, "dimensions")[0]
        total = dims_of(hlo)[dim]
        return [(o, tile, ("concat", dims_of(o)[dim], total)) for o in ops]
    if op == "dot":
        return dot_operand_tiles(hlo, tile, block_k)
    if op in ("parameter", "constant", "iota"):
        return []
    raise TilingError(f"no tiling rule for '{op}'")


def dot_operand_tiles(dot, tile: Tile, block_k: int | None) -> list:
    lb, lc = _attr_tuple(dot, "lhs_batch_dims"), _attr_tuple(dot, "lhs_contracting_dims")
    rb, rc = _attr_tuple(dot, "rhs_batch_dims"), _attr_tuple(dot, "rhs_contracting_dims")
    lhs, rhs = dot.operands
    ldims, rdims = dims_of(lhs), dims_of(rhs)
    l_free = [d for d in range(len(ldims)) if d not in lb and d not in lc]
    r_free = [d for d in range(len(rdims)) if d not in rb and d not in rc]
    out = list(tile.sizes)
    nb = len(lb)
    bk = block_k if block_k is not None else (_block_k(dot) or (ldims[lc[0]] if lc else 1))
    factor = 1
    lsizes, rsizes = [1] * len(ldims), [1] * len(rdims)
    for i, (a, b) in enumerate(zip(lb, rb)):
        lsizes[a] = rsizes[b] = out[i]
    for i, d in enumerate(l_free):
        lsizes[d] = out[nb + i]
    for i, d in enumerate(r_free):
        rsizes[d] = out[nb + len(l_free) + i]
    for n, (a, b) in enumerate(zip(lc, rc)):
        k = min(bk, ldims[a]) if n == 0 else ldims[a]
        lsizes[a] = rsizes[b] = k
        factor *= math.ceil(ldims[a] / k)
    return [(lhs, Tile.of(lsizes), ("dot", factor)), (rhs, Tile.of(rsizes), ("dot", factor))]


def _tiled_root(kernel) -> Any:
    """The root the tiling parameters belong to: the one root no other root reads (XLA: the real root)."""
    roots = fused_roots(kernel)
    if len(roots) == 1:
        return roots[0]

    def ancestors(h) -> set:
        seen, stack = set(), [h]
        while stack:
            for o in stack.pop().operands:
                if id(o) not in seen:
                    seen.add(id(o))
                    stack.append(o)
        return seen

    reads = {id(r): ancestors(r) for r in roots}
    free = [r for r in roots if not any(id(r) in reads[id(o)] for o in roots if o is not r)]
    if len(free) != 1:
        raise TilingError("a multi-output fusion with more than one independent root is not supported")
    return free[0]


def propagate(kernel, root_tile, *, block_k: int | None = None,
              max_read_tile: int | None = None, memo: dict | None = None) -> TiledComputation:
    """Tile a fusion from the tile of its tiled root (see the module docstring).

    **Arguments:** `kernel`: a fusion instruction; `root_tile`: sizes (or a
    `Tile`) for the tiled root; `block_k`: the dots' reduction tile (default:
    their `backend_config` `sizes`, else the whole reduction); `max_read_tile`:
    when given, a parameter's or iota's tile padded past it raises `TilingError`
    as soon as it is reached (a tiling search that would throw such a tiling
    away anyway stops propagating it there); `memo`: a dict kept by a caller that
    propagates many root tiles through the same, unchanged `kernel` with the
    same `block_k` (a tiling search): an instruction's operand tiles under a
    tile are worked out once there.
    """
    if memo is None:
        memo = {}
    root = _tiled_root(kernel)
    tile = root_tile if isinstance(root_tile, Tile) else Tile.of(root_tile)
    rdims = dims_of(root)
    if len(tile.sizes) != len(rdims):
        raise TilingError(f"the root has {len(rdims)} dimensions, the tile {len(tile.sizes)}")
    blocks = math.prod(math.ceil(d / t) for d, t in zip(rdims, tile.sizes))
    seen: dict = {}
    order: list = []
    root_tiles: dict = {id(root): tile}

    nested_params: dict = {}  # a parameter of a nested fusion's body -> the operand it stands for
    stack = [(root, tile, blocks)]
    push = stack.append
    # The loop runs for every instruction of every candidate tiling of a search: names are bound once, and
    # the most common case, an elementwise instruction (its tile and blocks passed on to each operand, as
    # `operand_tiles` gives them), is handled here without building that list.
    while stack:
        hlo, t, b = stack.pop()
        op = hlo.opcode
        if op == "parameter" and id(hlo) in nested_params:
            push((nested_params[id(hlo)], t, b))
            continue
        if op == "fusion":
            # A nested fusion (Triton's nested GEMM fusions): its body is tiled in place.
            body = hlo.fused_computation
            for param in body.parameters:
                nested_params[id(param)] = hlo.operands[param.parameter_number]
            push((body.root, t, b))
            continue
        key = (id(hlo), t.sizes, t.strides, b)  # the tuples hash natively; a Tile hashes in Python
        if key in seen:
            continue
        is_param = op == "parameter"
        if max_read_tile is not None and (is_param or op == "iota") and t.padded > max_read_tile:
            raise TilingError("a tile does not fit in registers")
        ti = TiledInstruction(hlo, t, b, is_param)
        seen[key] = ti
        order.append(ti)
        root_tiles.setdefault(id(hlo), t)
        if is_param:
            continue
        if op in IS_ELEMENTWISE or op in ("copy", "opt-barrier"):
            for operand in reversed(hlo.operands):
                push((operand, t, b))
            continue
        tk = (key[0], key[1], key[2])
        ots = memo.get(tk)
        if ots is None:
            ots = memo[tk] = operand_tiles(hlo, t, block_k)
        for operand, ot, region in reversed(ots):
            ob = b
            if region is not None and region[0] == "dot":
                ob = b * region[1]
            elif region is not None:
                ob = b * region[1] // region[2]
            push((operand, ot, ob))
    roots = []
    for r in fused_roots(kernel):
        if id(r) not in root_tiles:
            raise TilingError(f"root '{r.name}' is not reached from the tiled root")
        roots.append((r, root_tiles[id(r)]))
    return TiledComputation(order, roots, blocks, block_k)


# ---------------------------------------------------------------------------
# Symbolic tiles: what XLA's analysis refuses before it tries any tile size


def _delinearized_symbol(src: list, dst: list, symbolic: list) -> bool:
    """Whether a reshape group (`src` dims read for `dst` dims, `symbolic[j]`: dst dim j indexed by a
    range variable) leaves a range variable inside a floordiv or mod of some `src` index
    (`_delinearized_symbols`)."""
    return _delinearized_symbols(src, dst, symbolic)[0]


def _delinearized_symbols(src: list, dst: list, symbolic: list) -> tuple[bool, list]:
    """`(fails, flags)` of a reshape group: `fails` when a range variable is left inside a floordiv or
    mod of some `src` index; `flags[i]`: src dim i's index holds a range variable.

    XLA's indexing of a reshape linearizes the output indices of the group and delinearizes them into
    the input's (`ComputeMinimalReshapeIndexing`); src dim i reads `(L mod (I_i * n_i)) floordiv I_i`
    (I_i: the product of the group's dims minor to it), which its simplifier reduces by range: terms
    whose coefficient the modulus divides drop out, a mod over terms below it vanishes, terms whose
    coefficient the divisor divides leave the floordiv, terms summing below the divisor vanish. What
    stays inside is a floordiv or mod of a sum; `ExtractSizeAndStride` takes floordiv and mod only of a
    dimension (a tile index), never of a range variable (`size_and_stride_expression.cc`).
    """
    terms, coeff = [], 1
    for n, sym in zip(reversed(dst), reversed(symbolic)):
        if n > 1:
            terms.append((coeff, n, sym))
        coeff *= n
    flags = [False] * len(src)
    if not any(sym for _, _, sym in terms):
        return False, flags
    fails = False
    inner = 1
    for k in range(len(src) - 1, -1, -1):
        n = src[k]
        outer = inner * n
        if n > 1:
            kept = terms if k == 0 else [t for t in terms if t[0] % outer]
            if k > 0 and sum(c * (m - 1) for c, m, _ in kept) >= outer:
                inside, present = kept, kept  # the mod stays, over every kept term
            else:
                rest = [t for t in kept if t[0] % inner]
                inside = rest if sum(c * (m - 1) for c, m, _ in rest) >= inner else []  # the floordiv stays
                present = [t for t in kept if not t[0] % inner] + inside
            fails = fails or any(sym for _, _, sym in inside)
            flags[k] = any(sym for _, _, sym in present)
        inner = outer
    return fails, flags


def _symbolic_reshape(src: tuple, dst: tuple, flags: tuple) -> tuple:
    """The range-variable flags of `src`'s dims read by a reshape to `dst` with flags `flags`;
    `TilingError` when XLA's symbolic tile derivation fails there (`_delinearized_symbols`)."""
    out = [False] * len(src)
    for gi, gj in _reshape_groups(src, dst):
        sub_src, sub_dst, sub_f = [src[i] for i in gi], [dst[j] for j in gj], [flags[j] for j in gj]
        fails, sub_out = _delinearized_symbols(sub_src, sub_dst, sub_f)
        if fails:
            raise TilingError(f"Failed to compute symbolic tile: a reduced dimension of {list(sub_dst)} is split "
                              f"into {list(sub_src)} by a reshape")
        for i, f in zip(gi, sub_out):
            out[i] = f
    return tuple(out)


def _symbolic_operands(hlo, flags: tuple) -> list:
    """`(operand, its dims' range-variable flags)` for the operands of `hlo` whose dims are indexed
    from `hlo`'s (`flags[d]`: dim d of `hlo` is indexed by a range variable: a reduced dimension, taken
    whole; a dot's contracting dimensions are tiling parameters instead, as XLA's
    `InsertTilingParameterForContractingDimensions` makes them)."""
    op = hlo.opcode
    ops = hlo.operands
    if op == "concatenate" and len(ops) > 1 and flags[_attr_tuple(hlo, "dimensions")[0]]:
        # an operand after the first reads `s - offset` under a constraint with a nonzero lower bound,
        # which `SymbolicTile::FromIndexingMap` does not ignore
        raise TilingError("Failed to compute symbolic tile: a concatenate along a reduced dimension")
    if op in IS_ELEMENTWISE or op in ("copy", "opt-barrier", "slice", "concatenate"):
        return [(o, flags) for o in ops if len(dims_of(o)) == len(flags)]
    if op in ("dynamic-slice", "pad"):
        return [(ops[0], flags)]
    if op == "broadcast":
        return [(ops[0], tuple(flags[d] for d in _attr_tuple(hlo, "dimensions")))]
    if op == "transpose":
        perm = _attr_tuple(hlo, "dimensions")
        out = [False] * len(perm)
        for i, p in enumerate(perm):
            out[p] = flags[i]
        return [(ops[0], tuple(out))]
    if op == "reshape":
        return [(ops[0], _symbolic_reshape(dims_of(ops[0]), dims_of(hlo), flags))]
    if op == "bitcast":
        out_order, in_order = _major_to_minor(hlo), _major_to_minor(ops[0])
        src, dst = dims_of(ops[0]), dims_of(hlo)
        physical = _symbolic_reshape(tuple(src[d] for d in in_order), tuple(dst[d] for d in out_order),
                                     tuple(flags[d] for d in out_order))
        out = [False] * len(src)
        for k, d in enumerate(in_order):
            out[d] = physical[k]
        return [(ops[0], tuple(out))]
    if op == "reduce":
        reduced = set(_attr_tuple(hlo, "dimensions"))
        n_in = len(ops) // 2
        it = iter(flags)
        f_in = tuple(True if d in reduced else next(it) for d in range(len(dims_of(ops[0]))))
        return [(o, f_in) for o in ops[:n_in]]
    if op == "dot":
        lb, lc = _attr_tuple(hlo, "lhs_batch_dims"), _attr_tuple(hlo, "lhs_contracting_dims")
        rb, rc = _attr_tuple(hlo, "rhs_batch_dims"), _attr_tuple(hlo, "rhs_contracting_dims")
        out = []
        for operand, batch, contracting, free_at in ((ops[0], lb, lc, len(lb)), (ops[1], rb, rc, None)):
            rank = len(dims_of(operand))
            free = [d for d in range(rank) if d not in batch and d not in contracting]
            if free_at is None:
                free_at = len(lb) + (len(dims_of(ops[0])) - len(lb) - len(lc))
            f = [False] * rank
            for i, d in enumerate(batch):
                f[d] = flags[i]
            for i, d in enumerate(free):
                f[d] = flags[free_at + i]
            out.append((operand, tuple(f)))
        return out
    return []


def check_symbolic_tiling(kernel) -> None:
    """Raise `TilingError` where XLA's `SymbolicTileAnalysis` refuses the fusion whatever the tile sizes:
    an instruction whose indexing from the tiled root puts a range variable (a dimension a reduce
    takes whole) under a floordiv or mod, as a reshape or bitcast that splits such a dimension
    does, or under a constraint with an offset, as a concatenate along it does ("Failed to compute
    symbolic tile for ...", before any tiling is tried)."""
    root = _tiled_root(kernel)
    nested_params: dict = {}
    seen: set = set()
    stack = [(root, (False,) * len(dims_of(root)))]
    while stack:
        hlo, flags = stack.pop()
        if hlo.opcode == "parameter" and id(hlo) in nested_params:
            stack.append((nested_params[id(hlo)], flags))
            continue
        if hlo.opcode == "fusion":
            body = hlo.fused_computation
            for param in body.parameters:
                nested_params[id(param)] = hlo.operands[param.parameter_number]
            stack.append((body.root, flags))
            continue
        key = (id(hlo), flags)
        if key in seen:
            continue
        seen.add(key)
        stack.extend(_symbolic_operands(hlo, flags))


# ---------------------------------------------------------------------------
# What Triton can emit, and what a Triton fusion asks for


def satisfies_triton_constraints(tiled: TiledComputation, device) -> bool:
    if any(ti.tile.padded > MAX_TENSOR_ELEMENTS for ti in tiled.instructions):
        return False
    if device.block_dim_limit[0] and tiled.num_blocks >= device.block_dim_limit[0]:
        return False
    for hlo, t in tiled.roots:
        for s, d in zip(t.sizes, dims_of(hlo)):
            if s & (s - 1) and s != d:
                return False
    for ti in tiled.instructions:
        if ti.hlo.opcode == "dot":
            for _, ot, _ in dot_operand_tiles(ti.hlo, ti.tile, None):
                if any(pow2_ceil(s) > MAX_MMA_DIM for s in ot.sizes):
                    return False
    return True


def candidate_tiles(kernel) -> list[tuple]:
    """Every root tile the search tries: per dimension 1, 2, 4, ... below it, and the dimension itself."""
    root = _tiled_root(kernel)
    per_dim = []
    for d in dims_of(root):
        sizes = [1 << i for i in range(max(d, 1).bit_length()) if (1 << i) < d] + [d]
        per_dim.append(sizes)
    return list(itertools.product(*per_dim))


@dataclass(frozen=True, slots=True)
class BlockLevelParameters:
    """A Triton fusion's tiling as its backend config gives it: output tile, warps (None: XLA's estimate),
    stages, TMA, and the dots' reduction tile (`block_k`; None: each dot's own `backend_config` `sizes`)."""

    output_tile: tuple
    num_warps: int | None = None
    num_stages: int = 1
    is_tma_allowed: bool = False
    block_k: int | None = None


def configured_tiling(kernel) -> BlockLevelParameters | None:
    """The block-level parameters a Triton fusion's `backend_config` asks for, or None.

    Read from `fusion_backend_config.block_level_fusion_config` (what XLA writes for generic Triton
    fusions and nested GEMM fusions), else from a legacy `triton_gemm_config` (`__triton_gemm`): the
    root tile is `block_m` x `block_n` over its two minor dimensions, 1 over the batch dimensions,
    and `block_k` the dot's reduction tile.
    """
    cfg = backend_config(kernel)
    fc = cfg.get("fusion_backend_config") if isinstance(cfg, dict) else None
    if not isinstance(fc, dict):
        return None
    blc = fc.get("block_level_fusion_config")
    if isinstance(blc, dict) and blc.get("output_tiles"):
        sizes = tuple(int(s) for s in blc["output_tiles"][0].get("sizes", ()))
        return BlockLevelParameters(sizes, int(blc["num_warps"]) if blc.get("num_warps") else None,
                                    int(blc.get("num_stages", 1) or 1), bool(blc.get("is_tma_allowed", False)))
    gemm = fc.get("triton_gemm_config")
    if isinstance(gemm, dict) and gemm.get("block_m") and gemm.get("block_n"):
        rank = len(dims_of(kernel))
        if rank < 2:
            return None
        tile = (1,) * (rank - 2) + (int(gemm["block_m"]), int(gemm["block_n"]))
        return BlockLevelParameters(tile, int(gemm["num_warps"]) if gemm.get("num_warps") else None,
                                    int(gemm.get("num_stages", 1) or 1), False,
                                    int(gemm["block_k"]) if gemm.get("block_k") else None)
    return None


# ---------------------------------------------------------------------------
# Many root tiles at once (a tiling search)


def pow2_ceil_array(x):
    """`pow2_ceil` of every element of a non-negative int64 array (exact: bit smearing, no logarithm)."""
    import numpy as np

    v = np.maximum(x, 1) - 1
    for shift in (1, 2, 4, 8, 16, 32):
        v |= v >> shift
    return v + 1


@dataclass(slots=True)
class TiledCandidate:
    """One tiled instruction of `TiledCandidates`: `hlo` under one tile per candidate root tile (`sizes`,
    `strides`: int64 arrays, candidates x rank; `blocks`: per candidate), `active` where it is a
    `TiledInstruction` of that candidate's `propagate` (elsewhere an earlier node of the same
    instruction has the same tile and blocks: `propagate` dedupes it), `operand`: a fusion parameter."""

    hlo: Any
    sizes: Any
    strides: Any
    blocks: Any
    active: Any
    operand: bool
    padded: Any


@dataclass(slots=True)
class TiledCandidates:
    """`propagate` of many root tiles of one fusion at once (`propagate_candidates`): `nodes`
    (`TiledCandidate`s in the order `propagate` visits them: a candidate's `TiledComputation.instructions`
    are the nodes `active` for it, in this order), `roots` (`(root instruction, index of its first node)`
    in output order: a root's tile is the first that reaches it), `num_blocks` and `valid` (where
    `propagate` raises no `TilingError`) per candidate."""

    nodes: list
    roots: list
    num_blocks: Any
    valid: Any


_VECTOR_OPS = frozenset({"copy", "opt-barrier", "broadcast", "transpose", "bitcast", "reshape", "reduce", "slice",
                         "dynamic-slice", "pad", "concatenate", "parameter", "constant", "iota"})


def _unique_rows(rows):
    """`np.unique(rows, axis=0, return_inverse=True)` for a small int64 array of non-negative values, sorted
    as one integer key per row when the values fit one (faster than a row sort)."""
    import numpy as np

    if rows.shape[1] == 0:
        return rows[:1], np.zeros(len(rows), dtype=np.int64)
    radix = rows.max(axis=0) + 1
    if float(np.prod(radix.astype(np.float64))) < 2.0 ** 62:
        key = np.zeros(len(rows), dtype=np.int64)
        for c in range(rows.shape[1]):
            key = key * radix[c] + rows[:, c]
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return rows[first], inverse.reshape(-1)
    uniq, inverse = np.unique(rows, axis=0, return_inverse=True)
    return uniq, inverse.reshape(-1)


def _reshape_many(src_hlo, dst_hlo, sizes, strides, bitcast: bool):
    """`_bitcast_tile` (`bitcast`) or `_reshape_tile` of `src_hlo` read by `dst_hlo` for one tile per
    candidate: `(sizes, strides, ok)`, `ok` False where the tile leaves no box (None: nowhere). Each
    group of dimensions (`_reshape_groups`) maps on its own, worked out once per distinct tile of the group."""
    import numpy as np

    n = len(sizes)
    src_dims, dst_dims = dims_of(src_hlo), dims_of(dst_hlo)
    if bitcast:
        src_a, dst_a = first_array(src_hlo.shape), first_array(dst_hlo.shape)
        out_order, in_order = list(reversed(dst_a.minor_to_major)), list(reversed(src_a.minor_to_major))
        ps, pt = sizes[:, out_order], strides[:, out_order]
        src_p = tuple(src_dims[d] for d in in_order)
        dst_p = tuple(dst_dims[d] for d in out_order)
    else:
        ps, pt, src_p, dst_p = sizes, strides, tuple(src_dims), tuple(dst_dims)
    ok = None
    if src_p == dst_p:
        qs, qt = ps, pt  # a pure relayout: the tile carries over whole
    else:
        qs, qt = np.ones((n, len(src_p)), np.int64), np.ones((n, len(src_p)), np.int64)
        for gi, gj in _reshape_groups(src_p, dst_p):
            if not gi:
                continue
            cols = np.concatenate([ps[:, gj], pt[:, gj]], axis=1)
            uniq, inverse = _unique_rows(cols)
            m = len(gj)
            us = np.ones((len(uniq), len(gi)), np.int64)
            ut = np.ones((len(uniq), len(gi)), np.int64)
            good = np.ones(len(uniq), dtype=bool)
            for k, row in enumerate(uniq.tolist()):
                try:
                    size, stride = _linear([dst_p[j] for j in gj], row[:m], row[m:])
                    us[k], ut[k] = _unlinear([src_p[i] for i in gi], size, stride)
                except TilingError:
                    good[k] = False
            qs[:, gi], qt[:, gi] = us[inverse], ut[inverse]
            if not good.all():
                ok = good[inverse] if ok is None else ok & good[inverse]
    if not bitcast:
        return qs, qt, ok
    os_, ot = np.empty((n, len(src_dims)), np.int64), np.empty((n, len(src_dims)), np.int64)
    os_[:, in_order], ot[:, in_order] = qs, qt
    return os_, ot, ok


def propagate_candidates(kernel, root_tiles, *, max_read_tile: int | None = None,
                         max_nodes: int = 4096) -> TiledCandidates | None:
    """`propagate(kernel, t, max_read_tile=)` for every root tile `t` of `root_tiles` at once, with numpy.

    The walk is `propagate`'s, over the tree of (instruction, tile) it unfolds, with each node's tile held
    for every candidate; a node equal to an earlier node of the same instruction for every valid candidate
    is dropped with its subtree (`propagate` skips it for each of them), one equal for some is kept but not
    `active` there. A candidate is invalid where `propagate` would raise `TilingError` for it (a reshape
    or bitcast that leaves no box, a parameter or iota tile padded past `max_read_tile`).

    **Returns** None for a fusion this does not cover (a dot, a nested fusion, an instruction without a
    tiling rule, more than `max_nodes` nodes, sizes an int64 might not hold): `propagate` one by one.
    """
    import numpy as np

    root = _tiled_root(kernel)
    rdims = dims_of(root)
    n = len(root_tiles)
    tiles = np.array(root_tiles, dtype=np.int64).reshape(n, len(rdims))
    if any(d > (1 << 31) for d in rdims) or math.prod(rdims) >= 1 << 62:
        return None  # blocks (at most the root's elements) in an int64
    dims_arr = np.array(rdims, dtype=np.int64)
    num_blocks = np.prod(-(-dims_arr // np.maximum(tiles, 1)), axis=1) if rdims else np.ones(n, np.int64)
    valid = np.ones(n, dtype=bool)
    nodes: list = []
    by_hlo: dict = {}
    stack = [(root, tiles, np.ones_like(tiles), num_blocks)]
    while stack:
        hlo, s, t, b = stack.pop()
        op = hlo.opcode
        if op not in _VECTOR_OPS and op not in IS_ELEMENTWISE:
            return None
        earlier = by_hlo.get(id(hlo))
        active = valid.copy()
        if earlier is not None:
            for e in earlier:
                if e.sizes.shape != s.shape:
                    continue
                same = (e.sizes == s).all(axis=1) & (e.strides == t).all(axis=1) & (e.blocks == b)
                active &= ~same
            if not active.any():
                continue  # `propagate` skips it (and so its operands) for every valid candidate
        is_param = op == "parameter"
        p2 = pow2_ceil_array(s)
        if s.shape[1] and (np.log2(p2).sum(axis=1) > 60).any():
            return None  # a padded tile an int64 might not hold
        node = TiledCandidate(hlo, s, t, b, active, is_param, np.prod(p2, axis=1))
        if max_read_tile is not None and (is_param or op == "iota"):
            valid &= node.padded <= max_read_tile
        nodes.append(node)
        if earlier is None:
            by_hlo[id(hlo)] = [node]
        else:
            earlier.append(node)
        if len(nodes) > max_nodes:
            return None
        if is_param or op in ("constant", "iota"):
            continue
        ops = hlo.operands
        pushed: list = []
        if op in IS_ELEMENTWISE or op in ("copy", "opt-barrier"):
            pushed = [(o, s, t, b) for o in ops]
        elif op == "broadcast":
            d = list(_attr_tuple(hlo, "dimensions"))
            pushed = [(ops[0], s[:, d], t[:, d], b)]
        elif op == "transpose":
            inv = [0] * len(_attr_tuple(hlo, "dimensions"))
            for i, p in enumerate(_attr_tuple(hlo, "dimensions")):
                inv[p] = i
            pushed = [(ops[0], s[:, inv], t[:, inv], b)]
        elif op in ("bitcast", "reshape"):
            try:
                ns, nt, ok = _reshape_many(ops[0], hlo, s, t, op == "bitcast")
            except TilingError:
                return None  # no dimension groups: `propagate` raises for every candidate
            if ok is not None:
                valid &= ok
            pushed = [(ops[0], ns, nt, b)]
        elif op == "reduce":
            reduced = set(_attr_tuple(hlo, "dimensions"))
            n_in = len(ops) // 2
            in_dims = dims_of(ops[0])
            k = 0
            ns, nt = np.empty((n, len(in_dims)), np.int64), np.empty((n, len(in_dims)), np.int64)
            for d, extent in enumerate(in_dims):
                if d in reduced:
                    ns[:, d], nt[:, d] = extent, 1
                else:
                    ns[:, d], nt[:, d] = s[:, k], t[:, k]
                    k += 1
            empty = np.empty((n, 0), np.int64)
            pushed = [(o, ns, nt, b) for o in ops[:n_in]] + [(o, empty, empty, b) for o in ops[n_in:]]
        elif op == "slice":
            st = _attr_tuple(hlo, "slice_strides") or (1,) * s.shape[1]
            pushed = [(ops[0], s, t * np.array(st, dtype=np.int64), b)]
        elif op in ("dynamic-slice", "pad"):
            empty = np.empty((n, 0), np.int64)
            pushed = [(ops[0], s, t, b)] + [(o, empty, empty, b) for o in ops[1:] if not dims_of(o)]
        elif op == "concatenate":
            dim = _attr_tuple(hlo, "dimensions")[0]
            total = dims_of(hlo)[dim]
            if float(b.max()) * total >= 2.0 ** 62:
                return None
            pushed = [(o, s, t, b * dims_of(o)[dim] // total) for o in ops]
        for item in reversed(pushed):
            stack.append(item)
    first: dict = {}
    for i, node in enumerate(nodes):
        first.setdefault(id(node.hlo), i)
    roots = []
    for r in fused_roots(kernel):
        if id(r) not in first:
            return None  # `propagate` raises for every candidate: let it say why
        roots.append((r, first[id(r)]))
    return TiledCandidates(nodes, roots, num_blocks, valid)
