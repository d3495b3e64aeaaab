"""XLA's tiled (indexing) performance model of a fusion, and its search for the best tiling.

Re-implements, for a Python HLO graph, what XLA's
`GpuPerformanceModelWithIndexingAnalysis` does for tiled (Triton) fusions
(`xla/service/gpu/model/gpu_indexing_performance_model.cc`,
openxla/xla@6b73c4c49eb0; research note §4):

1. **Tiling.** The output tile of the fusion's root is propagated to every
   instruction (`propagate`): elementwise ops keep it; a broadcast drops the
   broadcast dimensions; a transpose permutes it; a reduce takes its reduced
   dimensions whole; a bitcast / reshape maps it through the reshape when the
   tile stays a box (contiguous, or strided along one dimension; otherwise the
   tiling is rejected, as XLA's symbolic tiles reject it); a slice keeps the
   sizes and multiplies the strides; a concatenate and a dot start regions:
   each operand of a concatenate is computed by the share of the blocks that
   its part of the output covers (integer division), and a dot's operands by
   every iteration of its reduction loop (blocks x ceil(K / tile_K), tile_K from
   the dot's `backend_config` `sizes`). Instructions with the same tile and
   block count are one tiled instruction. A multi-output fusion is tiled from
   its one root that no other root reads; the other roots take the tile that
   reaches them (two independent roots: unsupported, as in XLA).
2. **Time of one tiling** (`estimate`, XLA's `EstimateRunTimeForTiledHloComputation`):
   blocks = number of root tiles; the register guard (every root, fusion
   operand and iota tile, padded to powers of two, at most 0.4 x the
   registers per block, else the time is infinite); flops = sum over computed
   instructions of flops per element (`flops_per_element`) x blocks x padded
   tile; bytes read per fusion operand = blocks x the unpadded tile (clipped to
   the dimension) x element size, at the lowest coalescing rate of its tiles
   (contiguous bytes over 64-byte transactions); read time with XLA's DRAM
   heuristic; write time = root bytes over (rate x bandwidth); compute time
   over min(blocks, SMs) x min(32 x warps, FPUs per SM); exec = compute +
   memory - 0.95 min(compute, memory).
3. **Search** (`best_tilings`, XLA's `TryFindTopKBestTilingsForFusion`):
   every root tile with sizes 1, 2, 4, ... below each dimension and the
   dimension itself, kept when the Triton constraints hold (padded tiles at
   most 2^20 elements, fewer blocks than the grid limit, root tiles powers of
   two or whole dimensions, dot operand tiles at most 256), warps from the
   largest padded tile (<= 256 elements: 1, <= 1024: 2, <= 4096: 4, else 8),
   infinite ones dropped, stable-sorted by time.

A dot that XLA's dot cost model supports (`dot_supported`) is priced by it
(`dot_fusion_estimate`, `gpu_dot_fusion_cost_model.cc`): its compute time is
added to the fusion's and the fusion takes at least the dot's own time; other
dots count their flops like any instruction, as in XLA.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..analysis._opcodes import IS_ELEMENTWISE
from ..analysis._rules import _attr_tuple
from ..analysis._shapes import first_array

__all__ = [
    "BlockLevelParameters",
    "Tile",
    "TiledComputation",
    "TiledEstimate",
    "TilingError",
    "best_tilings",
    "configured_tiling",
    "dot_fusion_estimate",
    "dot_supported",
    "estimate",
    "estimate_tiling",
    "flops_per_element",
    "num_warps_for",
    "propagate",
]

MAX_TENSOR_ELEMENTS = 1 << 20   # TRITON_MAX_TENSOR_NUMEL
MAX_MMA_DIM = 256               # dot operand tiles
REGISTER_FRACTION = 0.4         # kFractionOfRegistersAvailableToStoreTile


class TilingError(ValueError):
    """A tile cannot be propagated through an instruction (XLA's symbolic tiles reject it)."""


def _pow2ceil(x: int) -> int:
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
        return math.prod(_pow2ceil(s) for s in self.sizes)


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
    """The fusion tiled: `instructions`, `roots` (`(root instruction, its tile)` in output order) and
    `num_blocks` (tiles of the tiled root, one block each)."""

    instructions: list
    roots: list
    num_blocks: int


# ---------------------------------------------------------------------------
# Tile propagation


def _dims(hlo) -> tuple:
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


def _reshape_tile(src: tuple, dst: tuple, tile: Tile) -> Tile:
    """The tile of `src` that a reshape to `dst` reads for the `dst` tile `tile`."""
    sizes, strides = [1] * len(src), [1] * len(src)
    for gi, gj in _reshape_groups(src, dst):
        size, stride = _linear([dst[j] for j in gj], [tile.sizes[j] for j in gj], [tile.strides[j] for j in gj])
        s, st = _unlinear([src[i] for i in gi], size, stride)
        for i, a, b in zip(gi, s, st):
            sizes[i], strides[i] = a, b
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
    if op in ("bitcast", "reshape"):
        return [(ops[0], _reshape_tile(_dims(ops[0]), _dims(hlo), tile), None)]
    if op == "reduce":
        reduced = set(_attr_tuple(hlo, "dimensions"))
        n_in = len(ops) // 2
        in_dims = _dims(ops[0])
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
        rest = [(o, Tile((), ()), None) for o in ops[1:] if not _dims(o)]
        return [(ops[0], tile, None)] + rest
    if op == "concatenate":
        dim = _attr_tuple(hlo, "dimensions")[0]
        total = _dims(hlo)[dim]
        return [(o, tile, ("concat", _dims(o)[dim], total)) for o in ops]
    if op == "dot":
        return _dot_operand_tiles(hlo, tile, block_k)
    if op in ("parameter", "constant", "iota"):
        return []
    raise TilingError(f"no tiling rule for '{op}'")


def _dot_operand_tiles(dot, tile: Tile, block_k: int | None) -> list:
    lb, lc = _attr_tuple(dot, "lhs_batch_dims"), _attr_tuple(dot, "lhs_contracting_dims")
    rb, rc = _attr_tuple(dot, "rhs_batch_dims"), _attr_tuple(dot, "rhs_contracting_dims")
    lhs, rhs = dot.operands
    ldims, rdims = _dims(lhs), _dims(rhs)
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


def _fusion_roots(comp) -> list:
    root = comp.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def _tiled_root(comp) -> Any:
    """The root the tiling parameters belong to: the one root no other root reads (XLA: the real root)."""
    roots = _fusion_roots(comp)
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


def propagate(kernel, root_tile, *, block_k: int | None = None) -> TiledComputation:
    """Tile a fusion from the tile of its tiled root (see the module docstring).

    **Arguments:** `kernel`: a fusion instruction; `root_tile`: sizes (or a
    `Tile`) for the tiled root; `block_k`: the dots' reduction tile (default:
    their `backend_config` `sizes`, else the whole reduction).
    """
    comp = kernel.fused_computation
    root = _tiled_root(comp)
    tile = root_tile if isinstance(root_tile, Tile) else Tile.of(root_tile)
    rdims = _dims(root)
    if len(tile.sizes) != len(rdims):
        raise TilingError(f"the root has {len(rdims)} dimensions, the tile {len(tile.sizes)}")
    blocks = math.prod(math.ceil(d / t) for d, t in zip(rdims, tile.sizes))
    seen: dict = {}
    order: list = []
    root_tiles: dict = {id(root): tile}

    nested_params: dict = {}  # a parameter of a nested fusion's body -> the operand it stands for
    stack = [(root, tile, blocks)]
    while stack:
        hlo, t, b = stack.pop()
        if hlo.opcode == "parameter" and id(hlo) in nested_params:
            stack.append((nested_params[id(hlo)], t, b))
            continue
        if hlo.opcode == "fusion":
            # A nested fusion (Triton's nested GEMM fusions): its body is tiled in place.
            body = hlo.fused_computation
            for param in body.parameters:
                nested_params[id(param)] = hlo.operands[param.parameter_number]
            stack.append((body.root, t, b))
            continue
        key = (id(hlo), t, b)
        if key in seen:
            continue
        ti = TiledInstruction(hlo, t, b, hlo.opcode == "parameter")
        seen[key] = ti
        order.append(ti)
        root_tiles.setdefault(id(hlo), t)
        for operand, ot, region in reversed(operand_tiles(hlo, t, block_k)):
            ob = b
            if region is not None and region[0] == "dot":
                ob = b * region[1]
            elif region is not None:
                ob = b * region[1] // region[2]
            stack.append((operand, ot, ob))
    roots = []
    for r in _fusion_roots(comp):
        if id(r) not in root_tiles:
            raise TilingError(f"root '{r.name}' is not reached from the tiled root")
        roots.append((r, root_tiles[id(r)]))
    return TiledComputation(order, roots, blocks)


# ---------------------------------------------------------------------------
# XLA's dot cost model of tiled GEMM fusions (gpu_dot_fusion_cost_model.cc)

LOOP_LATENCY_TAX_S = 1.3e-6          # kLoopLatencyTax
L2_BYTES_PER_S = 6.65e12             # measured H100 L2 bandwidth (XLA uses it for every GPU)
# (bytes moved, measured H100 HBM GiB/s): XLA's GetEffectiveHbmBandwidth lookup, linearly interpolated.
_HBM_LOOKUP = ((8192, 1.42), (16384, 3.03), (32768, 6.02), (65536, 11.77), (131072, 23.68), (262144, 47.35),
               (524288, 92.56), (1048576, 179.06), (2097152, 346.75), (4194304, 639.38), (8388608, 1069.98),
               (16777216, 1583.95), (33554432, 1974.72), (67108864, 2343.19), (134217728, 2632.96),
               (268435456, 2766.69), (536870912, 2968.89), (1073741824, 3126.0))


def _f32(x: float) -> float:
    import numpy as np

    return float(np.float32(x))


def _effective_hbm(nbytes: int) -> float:
    if nbytes <= _HBM_LOOKUP[0][0]:
        return _f32(_HBM_LOOKUP[0][1]) * (1 << 30)
    if nbytes >= _HBM_LOOKUP[-1][0]:
        return _f32(_HBM_LOOKUP[-1][1]) * (1 << 30)
    for (x0, a), (x1, b) in zip(_HBM_LOOKUP, _HBM_LOOKUP[1:]):
        if nbytes <= x1:
            t = _f32((nbytes - x0) / float(x1 - x0))
            return _f32(_f32(a) + t * (_f32(b) - _f32(a))) * (1 << 30)
    raise AssertionError("unreachable")


def _bits(dtype: str) -> int:
    from ._gemm_table import _bytes

    return 8 * _bytes(dtype)


def dot_supported(dot) -> bool:
    """XLA's `gpu_dot_fusion_cost_model::IsSupported`: at most one non-contracting dimension per side,
    exactly one contracting dimension, no transpose downstream of the dot."""
    lb, lc = _attr_tuple(dot, "lhs_batch_dims"), _attr_tuple(dot, "lhs_contracting_dims")
    rb, rc = _attr_tuple(dot, "rhs_batch_dims"), _attr_tuple(dot, "rhs_contracting_dims")
    lhs, rhs = dot.operands
    if len(_dims(lhs)) - len(lb) - len(lc) > 1 or len(_dims(rhs)) - len(rb) - len(rc) > 1:
        return False
    if len(lc) != 1 or len(rc) != 1:
        return False
    stack, seen = [dot], {id(dot)}
    while stack:
        cur = stack.pop()
        if cur is not dot and cur.opcode == "transpose":
            return False
        for user in cur.users:
            if id(user) not in seen:
                seen.add(id(user))
                stack.append(user)
    return True


def dot_fusion_estimate(dot, tile_sizes, block_k: int, num_warps: int, num_stages: int, device,
                        is_tma_allowed: bool = False) -> tuple[float, float]:
    """XLA's `EstimateRunTimeForDotOpWithBlockParameters`: `(compute_s, exec_s)` of a tiled dot.

    Compute: the tiles' flops with tile and wave quantization at the matrix peak for the lhs type
    (derated for narrow tiles); memory: operands and output at the measured H100 HBM bandwidth for
    the bytes moved; the main loop pipelined over `num_stages`, per launch wave; at least the L2
    time of the tiles' operand loads.
    """
    lb, lc = _attr_tuple(dot, "lhs_batch_dims"), _attr_tuple(dot, "lhs_contracting_dims")
    rb, rc = _attr_tuple(dot, "rhs_batch_dims"), _attr_tuple(dot, "rhs_contracting_dims")
    lhs, rhs = dot.operands
    ld, rd = _dims(lhs), _dims(rhs)
    b = math.prod(ld[d] for d in lb)
    l_free = [d for d in range(len(ld)) if d not in lb and d not in lc]
    r_free = [d for d in range(len(rd)) if d not in rb and d not in rc]
    m = ld[l_free[0]] if l_free else 1
    n = rd[r_free[0]] if r_free else 1
    k = ld[lc[0]]
    lt, rt = first_array(lhs.shape).element_type, first_array(rhs.shape).element_type
    ot = first_array(dot.shape).element_type
    tb = math.prod(tile_sizes[:-2]) if len(tile_sizes) > 2 else 1
    tm, tn = tile_sizes[-2], tile_sizes[-1]
    sms = device.core_count
    blocks = math.ceil(b / tb) * math.ceil(m / tm) * math.ceil(n / tn)
    waves = math.ceil(blocks / sms)
    total_flops = 2 * tb * tm * tn * k * waves * sms
    # CalculatePeakMatrixOpsPerNs (int64): the matrix rate for the type, the vector peak where there is none
    peak = int(device.matmul_flops_per_s(lt) * 1e-9)
    major = device.compute_capability[0] if device.compute_capability else 0
    derate = 0.5 if (major == 10 and tm < 128) or (major == 8 and tm < 16) else 0.63 if (major == 9 and tm < 64) \
        else 1.0
    compute = _f32(_f32(total_flops) / (peak * derate)) * 1e-9
    lhs_b = math.ceil(b * m * k * _bits(lt) / 8)
    rhs_b = math.ceil(b * k * n * _bits(rt) / 8)
    out_b = math.ceil(b * m * n * _bits(ot) / 8)
    hbm = _effective_hbm(lhs_b + rhs_b + out_b)
    read, write = _f32(lhs_b / hbm), _f32(out_b / hbm)
    l2_bytes = (math.ceil(tb * tm * k * _bits(lt) / 8) + math.ceil(tb * tn * k * _bits(rt) / 8)) * blocks
    iters = math.ceil(k / block_k)
    l2 = _f32(float(l2_bytes)) / L2_BYTES_PER_S + iters * (150e-9 if is_tma_allowed else 400e-9)
    smem = (tm * block_k * _bits(lt) // 8 + tn * block_k * _bits(rt) // 8) * num_stages
    threads = device.threads_per_core_limit or 2048
    by_smem = device.shared_memory_per_core_bytes // smem if smem > 0 else threads
    active = max(1, min(by_smem, threads // (num_warps * (device.warp_size or 32))))
    launch_waves = math.ceil(blocks / (active * sms))
    c, r, w = compute / launch_waves, read / launch_waves, write / launch_waves
    if num_stages <= 1 or iters <= 1:
        loop = r + w + c + iters * LOOP_LATENCY_TAX_S
    else:
        ic, im = c / iters, r / iters
        imt = im + LOOP_LATENCY_TAX_S
        it = max(max(im, ic), max(imt, ic) / (num_stages - 1))
        pro = min(num_stages - 1, iters)
        loop = pro * imt + (iters - pro) * it + pro * ic + w
    return compute, max(loop * launch_waves, l2)


# ---------------------------------------------------------------------------
# The time of one tiling


def flops_per_element(hlo, device) -> int:
    """XLA's `GpuPerformanceModelWithIndexingAnalysis::FlopsPerElement`."""
    op = hlo.opcode
    if op in ("bitcast", "broadcast", "constant", "dynamic-slice", "dynamic-update-slice", "gather", "iota", "pad",
              "parameter", "slice", "transpose", "tuple"):
        return 0
    if op == "concatenate":
        dim = _attr_tuple(hlo, "dimensions")[0]
        return 400 if dim > 0 and _dims(hlo.operands[0])[dim] & 31 else 6
    if op in IS_ELEMENTWISE:
        return int(device.op_cycles(op, first_array(hlo.shape).element_type))
    if op == "reduce":
        body = hlo.attribute("to_apply")
        per = sum(flops_per_element(h, device) for h in body.instructions)
        in_dims = _dims(hlo.operands[0])
        padded = math.prod(_pow2ceil(in_dims[d]) for d in _attr_tuple(hlo, "dimensions"))
        return (padded - 1) * per
    from ..analysis._kernel import kernel_cost

    elements = max(math.prod(_dims(hlo)), 1)
    return int(kernel_cost(hlo, "gpu", device).flops) // elements


def _coalescing(ti: TiledInstruction, device) -> float:
    """`BandwidthUtilizationRateHeuristicForTiledMemoryAccess`: contiguous bytes over whole transactions."""
    shape = first_array(ti.hlo.shape)
    dims = shape.dims
    contiguous = 1
    for d in shape.minor_to_major:
        if ti.tile.strides[d] != 1:
            break
        contiguous *= min(ti.tile.sizes[d], dims[d])
        if ti.tile.sizes[d] < dims[d]:
            break
    nbytes = contiguous * max(shape.byte_size // max(math.prod(dims), 1), 1) if dims else shape.byte_size
    tx = device.dram_to_l2_transaction_bytes or 64
    return nbytes / (tx * math.ceil(nbytes / tx))


def num_warps_for(tiled: TiledComputation) -> int:
    """XLA's `EstimateNumWarps`: from the largest padded tile anywhere in the computation."""
    largest = max([1, *(ti.tile.padded for ti in tiled.instructions)])
    return 1 if largest <= 256 else 2 if largest <= 1024 else 4 if largest <= 4096 else 8


@dataclass(frozen=True, slots=True)
class TiledEstimate:
    """The tiled model's figures for one tiling (XLA's `EstimateRunTimeData`), times in seconds."""

    tiles: tuple
    num_warps: int
    num_blocks: int
    flops: float
    bytes_read: float
    bytes_written: float
    read_s: float
    write_s: float
    compute_s: float
    exec_s: float
    details: dict = field(default_factory=dict, compare=False)

    @property
    def infinite(self) -> bool:
        return math.isinf(self.exec_s)


def _element_bytes(hlo) -> int:
    shape = first_array(hlo.shape)
    n = max(math.prod(shape.dims), 1)
    return max(shape.byte_size // n, 1) if shape.dims else shape.byte_size


def estimate(tiled: TiledComputation, device, num_warps: int, model=None, *, num_stages: int = 1,
             is_tma_allowed: bool = False) -> TiledEstimate:
    """XLA's `EstimateRunTimeForTiledHloComputation` (see the module docstring).

    **Arguments:** `tiled` (from `propagate`); `device` (a GPU `DeviceSpec`);
    `num_warps`; `model`: the `XlaGpuModel` whose read, compute and combine
    rules (XLA's, with their rounding) are used; default `xla-gpu`.
    """
    from ._xla_gpu import XlaGpuModel

    model = model or XlaGpuModel()
    tiles = tuple(t.sizes for _, t in tiled.roots)
    limit = REGISTER_FRACTION * device.registers_per_block_limit
    fits = all(t.padded <= limit for _, t in tiled.roots) and all(
        ti.tile.padded <= limit for ti in tiled.instructions if ti.operand or ti.hlo.opcode == "iota")
    if not fits:
        inf = math.inf
        return TiledEstimate(tiles, num_warps, tiled.num_blocks, 0.0, 0.0, 0.0, inf, inf, inf, inf,
                             {"infinite": "a tile does not fit in registers"})
    flops = dot_flops = 0
    dot_compute = dot_exec = 0.0
    reads: dict = {}
    bytes_read = 0
    fpe: dict = {}
    for ti in tiled.instructions:
        if not ti.operand:
            f = fpe.get(id(ti.hlo))
            if f is None:
                f = fpe[id(ti.hlo)] = flops_per_element(ti.hlo, device)
            if ti.hlo.opcode == "dot" and dot_supported(ti.hlo) and len(ti.tile.sizes) >= 2:
                lc = _attr_tuple(ti.hlo, "lhs_contracting_dims")[0]
                bk = _dot_operand_tiles(ti.hlo, ti.tile, None)[0][1].sizes[lc]
                c, e = dot_fusion_estimate(ti.hlo, ti.tile.sizes, bk, num_warps, num_stages, device,
                                           is_tma_allowed)
                dot_compute += c
                dot_exec = max(dot_exec, e)
                dot_flops += f * ti.blocks * ti.tile.padded
                continue
            flops += f * ti.blocks * ti.tile.padded
            continue
        dims = _dims(ti.hlo)
        n = ti.blocks * math.prod(min(t, d) for t, d in zip(ti.tile.sizes, dims))
        b = _element_bytes(ti.hlo) * n
        bytes_read += b
        entry = reads.setdefault(id(ti.hlo), [ti.hlo, 0, 1.0])
        entry[1] += b
        entry[2] = min(entry[2], _coalescing(ti, device))
    read = 0.0
    for hlo, total, rate in reads.values():
        net = min(first_array(hlo.shape).byte_size, total)
        read += model.read_time(device, tiled.num_blocks, net, total, rate)
    write = 0.0
    bytes_written = 0
    for hlo, t in tiled.roots:
        ti = TiledInstruction(hlo, t, tiled.num_blocks, False)
        bw = int(_coalescing(ti, device) * device.memory_bandwidth_bytes_per_s)
        nbytes = first_array(hlo.shape).byte_size
        write += model._q(nbytes / bw)
        bytes_written += nbytes
    compute = model.compute_time(device, flops, 0.0, "", tiled.num_blocks,
                                 num_warps * (device.warp_size or 32)) + dot_compute
    exec_s = max(model.combine(compute, read + write), dot_exec)
    return TiledEstimate(tiles, num_warps, tiled.num_blocks, float(flops + dot_flops), float(bytes_read),
                         float(bytes_written), read, write, compute, exec_s,
                         {"dot_compute_s": dot_compute, "dot_exec_s": dot_exec} if dot_exec else {})


def estimate_tiling(kernel, device, root_tile, num_warps: int | None = None, *, num_stages: int = 1,
                    is_tma_allowed: bool = False, block_k: int | None = None, model=None) -> TiledEstimate:
    """Tile `kernel` from `root_tile` and estimate it (`num_warps`: default XLA's `EstimateNumWarps`;
    `num_stages`, `is_tma_allowed`: the block-level parameters XLA's dot model reads)."""
    tiled = propagate(kernel, root_tile, block_k=block_k)
    return estimate(tiled, device, num_warps or num_warps_for(tiled), model, num_stages=num_stages,
                    is_tma_allowed=is_tma_allowed)


def _satisfies_triton_constraints(tiled: TiledComputation, device) -> bool:
    if any(ti.tile.padded > MAX_TENSOR_ELEMENTS for ti in tiled.instructions):
        return False
    if device.block_dim_limit[0] and tiled.num_blocks >= device.block_dim_limit[0]:
        return False
    for hlo, t in tiled.roots:
        for s, d in zip(t.sizes, _dims(hlo)):
            if s & (s - 1) and s != d:
                return False
    for ti in tiled.instructions:
        if ti.hlo.opcode == "dot":
            for _, ot, _ in _dot_operand_tiles(ti.hlo, ti.tile, None):
                if any(_pow2ceil(s) > MAX_MMA_DIM for s in ot.sizes):
                    return False
    return True


def candidate_tiles(kernel) -> list[tuple]:
    """Every root tile the search tries: per dimension 1, 2, 4, ... below it, and the dimension itself."""
    root = _tiled_root(kernel.fused_computation)
    per_dim = []
    for d in _dims(root):
        sizes = [1 << i for i in range(max(d, 1).bit_length()) if (1 << i) < d] + [d]
        per_dim.append(sizes)
    return list(itertools.product(*per_dim))


def best_tilings(kernel, device, *, top_k: int | None = None, model=None) -> list[TiledEstimate]:
    """XLA's `TryFindTopKBestTilingsForFusion`: every valid tiling estimated, fastest first (stable sort).

    **Returns:** the finite estimates (all of them, or the first `top_k`);
    rejected tilings are left out. Raises `TilingError` when no tiling is valid.
    """
    out = []
    for tiles in candidate_tiles(kernel):
        try:
            tiled = propagate(kernel, tiles)
        except TilingError:
            continue
        if not _satisfies_triton_constraints(tiled, device):
            continue
        e = estimate(tiled, device, num_warps_for(tiled), model)
        if not e.infinite:
            out.append(e)
    if not out:
        raise TilingError("no valid tilings found")
    out.sort(key=lambda e: e.exec_s)
    return out[:top_k] if top_k else out


@dataclass(frozen=True, slots=True)
class BlockLevelParameters:
    """A Triton fusion's `block_level_fusion_config`: output tile, warps (None: XLA's estimate), stages, TMA."""

    output_tile: tuple
    num_warps: int | None = None
    num_stages: int = 1
    is_tma_allowed: bool = False


def _backend_config(instr) -> dict | None:
    """The `backend_config` as a dict; XLA's protobuf JSON reader also takes bare keys (`{kind: "x"}`)."""
    import json

    cfg = instr.attribute("backend_config", None) if instr.has_attribute("backend_config") else None
    if isinstance(cfg, str):
        try:
            cfg = json.loads(re.sub(r'([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)\s*:', r'\1"\2":', cfg))
        except ValueError:
            return None
    return cfg if isinstance(cfg, dict) else None


def configured_tiling(kernel) -> BlockLevelParameters | None:
    """The block-level parameters a Triton fusion's `backend_config` asks for, or None."""
    cfg = _backend_config(kernel)
    fc = cfg.get("fusion_backend_config") if isinstance(cfg, dict) else None
    blc = fc.get("block_level_fusion_config") if isinstance(fc, dict) else None
    if not isinstance(blc, dict) or not blc.get("output_tiles"):
        return None
    sizes = tuple(int(s) for s in blc["output_tiles"][0].get("sizes", ()))
    return BlockLevelParameters(sizes, int(blc["num_warps"]) if blc.get("num_warps") else None,
                                int(blc.get("num_stages", 1) or 1), bool(blc.get("is_tma_allowed", False)))
