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
   8), infinite ones dropped, stable-sorted by time. For the fastest one
   alone (`top_k=1`, what priority fusion, the softmax rewriter and
   `price_triton_fusion` ask), `_fastest_candidate` tiles every candidate at
   once (`analysis._tiling.propagate_candidates`, numpy) and prices them with
   the same model functions, cheapest lower bound first, stopping once the
   bound is past the best time found: the same tiling and figures as the
   full search, in a fraction of its time.

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

import functools
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
    pow2_ceil_array,
    propagate_candidates,
    satisfies_triton_constraints,
)
from ..analysis.tiling import MAX_TENSOR_ELEMENTS
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
    memo: dict = {}  # one fusion, one device: the candidates' estimates share their per-instruction facts
    if top_k == 1:
        # The fastest one only: every candidate tiled and counted at once (`_fastest_candidate`), then
        # the winner estimated as below, so the result is the one the loop below gives.
        best = _fastest_candidate(kernel, device, model, memo)
        if best is not None:
            tiled = propagate(kernel, best)
            return [estimate(tiled, device, num_warps_for(tiled), model, memo=memo)]
    out = []
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




def _coalescing_array(hlo, sizes, strides, device):
    """`_coalescing` of `hlo` under one tile per candidate (`sizes`, `strides`: candidates x rank)."""
    import numpy as np

    shape = first_array(hlo.shape)
    dims = shape.dims
    tx = device.dram_to_l2_transaction_bytes or 64
    if not dims:
        nbytes = np.full(len(sizes), shape.byte_size, dtype=np.int64)
    else:
        contiguous = np.ones(len(sizes), dtype=np.int64)
        going = np.ones(len(sizes), dtype=bool)
        for d in shape.minor_to_major:
            going &= strides[:, d] == 1
            contiguous = np.where(going, contiguous * np.minimum(sizes[:, d], dims[d]), contiguous)
            going &= sizes[:, d] >= dims[d]
        nbytes = contiguous * max(shape.byte_size // max(math.prod(dims), 1), 1)
    return nbytes / (tx * np.ceil(nbytes / tx))


@functools.lru_cache(maxsize=1)
def _xla_gpu_class() -> type:
    return type(get_model("xla-gpu"))


def _time_lower_bound(model, device, num_blocks, flops, threads, reads, writes):
    """Per candidate, a time `estimate` cannot go below, or None when `model` is not `XlaGpuModel`'s own
    arithmetic (a subclass that changes a rule): the combination of compute and memory time is at least
    the larger of the two (overlap at most 1), the compute time at least the flops at the unrounded,
    untruncated rate, and each read at least its DRAM bytes at the peak bandwidth times its coalescing,
    without the per-block cap or the cache term; less a relative 1e-5 (single precision is 6e-8) and a
    tick per rounded term."""
    import numpy as np

    # `XlaGpuModel` through the registry (`_xla_gpu` imports this module): the rules the bound follows
    reference, cls = _xla_gpu_class(), type(model)
    if not (isinstance(model, reference) and all(getattr(cls, f) is getattr(reference, f) for f in (
            "read_time", "compute_time", "combine", "_q", "_flops_per_ns"))
            and model.memory_compute_parallelism <= 1.0):
        return None
    bw = float(device.memory_bandwidth_bytes_per_s)
    memory = np.zeros(len(num_blocks), dtype=np.float64)
    terms = 4
    for hlo, total, rate in reads:
        memory += np.minimum(first_array(hlo.shape).byte_size, total) / (bw * rate)
        terms += 2
    for nbytes, rate in writes:
        memory += nbytes / (rate * bw)
        terms += 1
    rate = (device.clock_rate_ghz * 2.0) * (np.minimum(num_blocks, device.core_count)
                                            * np.minimum(threads, device.fpus_per_core))
    compute = flops / np.maximum(rate, 1.0) * 1e-9
    return np.maximum(compute, memory) * (1.0 - 1e-5) - terms * max(model.time_resolution_s, 0.0)


def _fastest_candidate(kernel, device, model, memo: dict) -> tuple | None:
    """The root tile `best_tilings` ranks first, from `propagate_candidates`: `estimate`'s integer
    quantities (blocks, warps, flops, bytes per fusion operand) and coalescing rates for every candidate
    with numpy, then its time terms per candidate with `model`'s own functions, as `estimate` calls them
    (so each time is `estimate`'s to the bit). None where `propagate_candidates` does not cover the
    fusion, or `estimate` would price a dot (`dot_fusion_estimate`): the caller searches one by one.
    Raises `TilingError` when no candidate is valid."""
    import numpy as np

    limit = REGISTER_FRACTION * device.registers_per_block_limit
    every = candidate_tiles(kernel)
    if not every:
        raise TilingError("no valid tilings found")
    # `_fits_registers(padded_size(tile))` of each, at once
    sizes = np.array(every, dtype=np.int64).reshape(len(every), len(every[0]))
    padded = np.prod(pow2_ceil_array(sizes), axis=1)
    cands = [every[i] for i in np.flatnonzero(padded <= limit).tolist()]
    if not cands:
        raise TilingError("no valid tilings found")
    tc = propagate_candidates(kernel, cands, max_read_tile=_max_register_tile(device))
    if tc is None:
        return None
    valid = tc.valid.copy()
    nb = tc.num_blocks
    kernel_roots = {hlo for hlo, _ in tc.roots}
    if device.block_dim_limit[0]:
        valid &= nb < device.block_dim_limit[0]
    largest = np.ones(len(cands), dtype=np.int64)
    flops = np.zeros(len(cands), dtype=np.int64)
    flops_f = np.zeros(len(cands), dtype=np.float64)  # the same in floats: an int64 overflow shows
    reads: dict = {}  # fusion operand -> [its bytes per candidate, its lowest coalescing]
    for node in tc.nodes:
        if not first_array(node.hlo.shape).byte_size and (node.operand or node.hlo in kernel_roots):
            return None  # an empty array: `_coalescing` divides by zero, as it may
        valid &= node.padded <= MAX_TENSOR_ELEMENTS
        if node.operand or node.hlo.opcode == "iota":
            valid &= node.padded <= limit
        np.maximum(largest, node.padded, out=largest)
        act = node.active
        if not node.operand:
            f = memo.get(id(node.hlo))
            if f is None:
                f = memo[id(node.hlo)] = flops_per_element(node.hlo, device)
            if f >= 1 << 62:
                return None  # past an int64 before any block is counted
            if f:
                term = f * node.blocks * node.padded
                flops += np.where(act, term, 0)
                flops_f += np.where(act, float(f) * node.blocks.astype(np.float64) * node.padded, 0.0)
            continue
        dims = np.array(dims_of(node.hlo), dtype=np.int64)
        elems = np.prod(np.minimum(node.sizes, dims), axis=1) if len(dims) else np.ones(len(cands), np.int64)
        nbytes = np.where(act, _element_bytes(node.hlo) * (node.blocks * elems), 0)
        if (np.where(act, float(_element_bytes(node.hlo)) * node.blocks * elems.astype(np.float64), 0.0)
                > 2.0 ** 62).any():
            return None
        rate = _coalescing_array(node.hlo, node.sizes, node.strides, device)
        entry = reads.get(id(node.hlo))
        if entry is None:
            reads[id(node.hlo)] = [node.hlo, nbytes, np.minimum(1.0, rate)]
        else:
            entry[1] = entry[1] + nbytes
            entry[2] = np.minimum(entry[2], rate)
    if (flops_f > 2.0 ** 62).any():
        return None
    writes = []
    for hlo, i in tc.roots:
        node = tc.nodes[i]
        valid &= node.padded <= limit
        for k, d in enumerate(dims_of(hlo)):
            s = node.sizes[:, k]
            valid &= ((s & (s - 1)) == 0) | (s == d)
        writes.append((first_array(hlo.shape).byte_size, _coalescing_array(hlo, node.sizes, node.strides, device)))
    warps = np.where(largest <= 256, 1, np.where(largest <= 1024, 2, np.where(largest <= 4096, 4, 8)))
    threads = warps * (device.warp_size or 32)
    read_list = [(first_array(hlo.shape).byte_size, total.tolist(), rate.tolist())
                 for hlo, total, rate in reads.values()]
    write_list = [(nbytes, rate.tolist()) for nbytes, rate in writes]
    bw_peak = device.memory_bandwidth_bytes_per_s
    tick = model._q
    nb_l, flops_l, threads_l = nb.tolist(), flops.tolist(), threads.tolist()
    order = np.flatnonzero(valid)
    bound = _time_lower_bound(model, device, nb, flops, threads, reads.values(), writes)
    if bound is not None:
        # Cheapest bound first: once a candidate's bound is past the best time by a tick, so are the rest.
        lows = bound[order]
        sort = np.argsort(lows, kind="stable")
        order, lows = order[sort].tolist(), lows[sort].tolist()
        res = max(model.time_resolution_s, 0.0)
    else:
        order, lows, res = order.tolist(), None, 0.0
    best, best_key = None, (math.inf, -1)
    for n, i in enumerate(order):
        if lows is not None and lows[n] > best_key[0] + res:
            break  # its time is past the best one's tick: `tick` cannot make it a tie
        read = 0.0
        for size, total, rate in read_list:
            t = total[i]
            read += model.read_time(device, nb_l[i], min(size, t), t, rate[i])
        write = 0.0
        for nbytes, rate in write_list:
            write += model._q(nbytes / int(rate[i] * bw_peak))
        compute = model.compute_time(device, flops_l[i], 0.0, "", nb_l[i], threads_l[i]) + 0.0
        exec_s = max(model.combine(compute, read + write), 0.0)
        if math.isinf(exec_s):
            continue
        key = (tick(exec_s), i)
        if key < best_key:  # the first of the fastest, as the stable sort keeps it
            best, best_key = cands[i], key
    if best is None:
        raise TilingError("no valid tilings found")
    return tuple(best)


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
