"""XLA's tiled (indexing) performance model of a fusion, and its search for the best tiling.

Re-implements what XLA's `GpuPerformanceModelWithIndexingAnalysis` does for
tiled (Triton) fusions (`xla/service/gpu/model/gpu_indexing_performance_model.cc`,
openxla/xla@6b73c4c49eb0; research note §4), on the tiling of
`analysis._tiling` (`propagate`: which tile each instruction computes, in
how many blocks):

1. **Time of one tiling** (`estimate`, XLA's `EstimateRunTimeForTiledHloComputation`):
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
2. **Search** (`best_tilings`, XLA's `TryFindTopKBestTilingsForFusion`):
   every candidate root tile (`analysis._tiling.candidate_tiles`), kept when
   the Triton constraints hold (`satisfies_triton_constraints`), warps from
   the largest padded tile (<= 256 elements: 1, <= 1024: 2, <= 4096: 4, else
   8), infinite ones dropped, stable-sorted by time.

`price_triton_fusion` is what the `xla-gpu` model runs for a Triton fusion
(XLA's `GpuPerformanceModelWithIndexingAnalysis::EstimateRunTimeForTriton`,
which `combined_gpu_performance_model.cc` dispatches generic Triton fusions
to): the tiling the fusion's backend config names (what ran), else the best
one the search finds.

A dot that XLA's dot cost model supports (`dot_supported`) is priced by it
(`dot_fusion_estimate`, `gpu_dot_fusion_cost_model.cc`): its compute time is
added to the fusion's and the fusion takes at least the dot's own time; other
dots count their flops like any instruction, as in XLA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..analysis._opcodes import IS_ELEMENTWISE
from ..analysis._rules import _attr_tuple
from ..analysis._shapes import first_array
from ..analysis._tiling import (
    TiledComputation,
    TiledInstruction,
    TilingError,
    candidate_tiles,
    configured_tiling,
    dims_of,
    dot_operand_tiles,
    pow2_ceil,
    propagate,
    satisfies_triton_constraints,
)
from ._base import get_model
from ._launch import num_warps_for

__all__ = [
    "TiledEstimate",
    "best_tilings",
    "price_triton_fusion",
    "dot_fusion_estimate",
    "dot_supported",
    "estimate",
    "estimate_tiling",
    "flops_per_element",
    "num_warps_for",
]

REGISTER_FRACTION = 0.4         # kFractionOfRegistersAvailableToStoreTile

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
    if len(dims_of(lhs)) - len(lb) - len(lc) > 1 or len(dims_of(rhs)) - len(rb) - len(rc) > 1:
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
    ld, rd = dims_of(lhs), dims_of(rhs)
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
        return 400 if dim > 0 and dims_of(hlo.operands[0])[dim] & 31 else 6
    if op in IS_ELEMENTWISE:
        return int(device.op_cycles(op, first_array(hlo.shape).element_type))
    if op == "reduce":
        body = hlo.attribute("to_apply")
        per = sum(flops_per_element(h, device) for h in body.instructions)
        in_dims = dims_of(hlo.operands[0])
        padded = math.prod(pow2_ceil(in_dims[d]) for d in _attr_tuple(hlo, "dimensions"))
        return (padded - 1) * per
    from ..analysis._kernel import kernel_cost

    elements = max(math.prod(dims_of(hlo)), 1)
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
    # Through the registry: `_xla_gpu` imports this module, so it is not imported back.
    model = model or get_model("xla-gpu")
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
                bk = dot_operand_tiles(ti.hlo, ti.tile, None)[0][1].sizes[lc]
                c, e = dot_fusion_estimate(ti.hlo, ti.tile.sizes, bk, num_warps, num_stages, device,
                                           is_tma_allowed)
                dot_compute += c
                dot_exec = max(dot_exec, e)
                dot_flops += f * ti.blocks * ti.tile.padded
                continue
            flops += f * ti.blocks * ti.tile.padded
            continue
        dims = dims_of(ti.hlo)
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
        if not satisfies_triton_constraints(tiled, device):
            continue
        e = estimate(tiled, device, num_warps_for(tiled), model)
        if not e.infinite:
            out.append(e)
    if not out:
        raise TilingError("no valid tilings found")
    out.sort(key=lambda e: e.exec_s)
    return out[:top_k] if top_k else out




def price_triton_fusion(kernel, device, model=None) -> tuple[TiledEstimate, str]:
    """A Triton fusion's time under the tiling it ran with: `(estimate, where the tiling came from)`.

    The tiling is the fusion's `block_level_fusion_config` (or legacy
    `triton_gemm_config`; `analysis._tiling.configured_tiling`): output tile,
    warps (XLA's `EstimateNumWarps` when absent), stages and TMA. Without one,
    the fastest valid tiling, as XLA's `TryFindBestTilingForFusion` picks it
    (`best_tilings`). **Raises** `TilingError` when the tile cannot be
    propagated through the fusion or no tiling is valid.
    """
    cfg = configured_tiling(kernel)
    if cfg is None:
        return best_tilings(kernel, device, top_k=1, model=model)[0], "best tiling (TryFindBestTilingForFusion)"
    tiled = propagate(kernel, cfg.output_tile, block_k=cfg.block_k)
    e = estimate(tiled, device, cfg.num_warps or num_warps_for(tiled), model, num_stages=cfg.num_stages,
                 is_tma_allowed=cfg.is_tma_allowed)
    return e, "backend config"
