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
(`models._dot_fusion`, `gpu_dot_fusion_cost_model.cc`): its compute time is
added to the fusion's and the fusion takes at least the dot's own time; other
dots count their flops like any instruction, as in XLA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..analysis.opcodes import IS_ELEMENTWISE
from ..analysis import int_list_attribute
from ..analysis.shapes import first_array
from ..analysis.tiling import (
    TiledComputation,
    TiledInstruction,
    TilingError,
    candidate_tiles,
    check_symbolic_tiling,
    configured_tiling,
    dims_of,
    dot_operand_tiles,
    padded_size,
    pow2_ceil,
    propagate,
    satisfies_triton_constraints,
)
from ._base import get_model
from ._dot_fusion import dot_fusion_estimate, dot_supported
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
# The time of one tiling


def flops_per_element(hlo, device) -> int:
    """XLA's `GpuPerformanceModelWithIndexingAnalysis::FlopsPerElement`."""
    op = hlo.opcode
    if op in ("bitcast", "broadcast", "constant", "dynamic-slice", "dynamic-update-slice", "gather", "iota", "pad",
              "parameter", "slice", "transpose", "tuple"):
        return 0
    if op == "concatenate":
        dim = int_list_attribute(hlo, "dimensions")[0]
        return 400 if dim > 0 and dims_of(hlo.operands[0])[dim] & 31 else 6
    if op in IS_ELEMENTWISE:
        return int(device.op_cycles(op, first_array(hlo.shape).element_type))
    if op == "reduce":
        body = hlo.attribute("to_apply")
        per = sum(flops_per_element(h, device) for h in body.instructions)
        in_dims = dims_of(hlo.operands[0])
        padded = math.prod(pow2_ceil(in_dims[d]) for d in int_list_attribute(hlo, "dimensions"))
        return (padded - 1) * per
    from ..analysis import kernel_cost

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


def _fits_registers(padded: int, device) -> bool:
    """XLA's `DoesTileFitsInRegisters`: a tile of `padded` elements in at most `REGISTER_FRACTION` of a block's
    registers."""
    return padded <= REGISTER_FRACTION * device.registers_per_block_limit


def _max_register_tile(device) -> int:
    """The largest padded tile `_fits_registers` accepts (the comparison is with an integer)."""
    return math.floor(REGISTER_FRACTION * device.registers_per_block_limit)


def estimate(tiled: TiledComputation, device, num_warps: int, model=None, *, num_stages: int = 1,
             is_tma_allowed: bool = False, memo: dict | None = None) -> TiledEstimate:
    """XLA's `EstimateRunTimeForTiledHloComputation` (see the module docstring).

    **Arguments:** `tiled` (from `propagate`); `device` (a GPU `DeviceSpec`);
    `num_warps`; `model`: the `XlaGpuModel` whose read, compute and combine
    rules (XLA's, with their rounding) are used; default `xla-gpu`; `memo`: a
    dict kept by a caller that estimates many tilings of the same, unchanged
    fusion on the same device (a tiling search): what each instruction costs
    per element, its element size and a tile's coalescing are worked out once.
    """
    if memo is None:
        memo = {}
    # Through the registry: `_xla_gpu` imports this module, so it is not imported back.
    model = model or get_model("xla-gpu")
    tiles = tuple(t.sizes for _, t in tiled.roots)
    fits = all(_fits_registers(t.padded, device) for _, t in tiled.roots) and all(
        _fits_registers(ti.tile.padded, device) for ti in tiled.instructions if ti.operand or ti.hlo.opcode == "iota")
    if not fits:
        inf = math.inf
        return TiledEstimate(tiles, num_warps, tiled.num_blocks, 0.0, 0.0, 0.0, inf, inf, inf, inf,
                             {"infinite": "a tile does not fit in registers"})
    flops = dot_flops = 0
    dot_compute = dot_exec = 0.0
    reads: dict = {}
    bytes_read = 0
    for ti in tiled.instructions:
        if not ti.operand:
            f = memo.get(id(ti.hlo))
            if f is None:
                f = memo[id(ti.hlo)] = flops_per_element(ti.hlo, device)
            if ti.hlo.opcode == "dot" and dot_supported(ti.hlo) and len(ti.tile.sizes) >= 2:
                lc = int_list_attribute(ti.hlo, "lhs_contracting_dims")[0]
                bk = dot_operand_tiles(ti.hlo, ti.tile, tiled.block_k)[0][1].sizes[lc]
                c, e = dot_fusion_estimate(ti.hlo, ti.tile.sizes, bk, num_warps, num_stages, device,
                                           is_tma_allowed)
                dot_compute += c
                dot_exec = max(dot_exec, e)
                dot_flops += f * ti.blocks * ti.tile.padded
                continue
            flops += f * ti.blocks * ti.tile.padded
            continue
        # Per (operand, tile): its elements in one tile times its element size, and the tile's coalescing.
        key = (id(ti.hlo), ti.tile.sizes, ti.tile.strides)
        per_tile = memo.get(key)
        if per_tile is None:
            dims = dims_of(ti.hlo)
            per_tile = memo[key] = (math.prod(min(t, d) for t, d in zip(ti.tile.sizes, dims)),
                                    _element_bytes(ti.hlo), _coalescing(ti, device))
        b = per_tile[1] * (ti.blocks * per_tile[0])
        bytes_read += b
        entry = reads.setdefault(id(ti.hlo), [ti.hlo, 0, 1.0])
        entry[1] += b
        entry[2] = min(entry[2], per_tile[2])
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
    rejected tilings are left out. Raises `TilingError` when no tiling is valid, or when XLA's symbolic
    tile analysis refuses the fusion outright (`check_symbolic_tiling`).
    """
    check_symbolic_tiling(kernel)  # XLA's analysis fails before any tiling is tried
    model = model or get_model("xla-gpu")  # once, not per tiling
    out = []
    memo: dict = {}  # one fusion, one device: the candidates' estimates share their per-instruction facts
    # The tiled root's own tile is one `estimate` checks against the registers: a candidate whose padded
    # size is over that limit comes out infinite whatever the fusion, so it is skipped before the
    # (costly) propagation, which leaves the result as it was (XLA's `DoesTileFitsInRegisters`).
    # Likewise a parameter's or iota's tile over it (`estimate`: infinite): propagation stops there.
    max_read_tile = _max_register_tile(device)
    tiles_memo: dict = {}  # and their propagations the operand tiles of each instruction under each tile
    for tiles in candidate_tiles(kernel):
        if not _fits_registers(padded_size(tuple(tiles)), device):
            continue
        try:
            tiled = propagate(kernel, tiles, max_read_tile=max_read_tile, memo=tiles_memo)
        except TilingError:
            continue
        if not satisfies_triton_constraints(tiled, device):
            continue
        e = estimate(tiled, device, num_warps_for(tiled), model, memo=memo)
        if not e.infinite:
            out.append(e)
    if not out:
        raise TilingError("no valid tilings found")
    # XLA compares absl::Durations, whole ticks: equal times are equal there, and the first tiling tried
    # wins. Ours are sums of seconds that can differ in their last bits (79 ns as 7.900000000000002e-08).
    tick = model._q
    out.sort(key=lambda e: tick(e.exec_s))
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
