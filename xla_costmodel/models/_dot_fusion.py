"""XLA's dot-fusion cost model: the time of one tiled GEMM (a dot in a Triton fusion) under one configuration.

Re-implements `xla/service/gpu/model/gpu_dot_fusion_cost_model.cc` (openxla/xla) as of its newest readable
source, commit 84b5521b00 (2026-08-17, "Add empirical HBM bandwidth scaling tables for Ampere and Blackwell";
readable in the zml/xla mirror's history, which holds every commit of the file from 2025-04 on), for any GPU
`DeviceSpec`. Every figure below is XLA's; none is fitted here:

- **Problem** (`DotProblemInfo`): b = product of the lhs batch dimensions, m and n the one non-contracting
  dimension of each side, k the one contracting dimension.
- **Compute** (`CalculateComputeTimeWithTileAndWaveQuantization`): blocks = ceil(b/tb)·ceil(m/tm)·ceil(n/tn);
  waves = ceil(blocks/SMs); flops = 2·tb·tm·tn·k·waves·SMs at the matrix peak of the lhs type (integer
  ops per ns, the vector peak where there is no matrix rate), derated x0.5 on Blackwell for tm < 128,
  x0.63 on Hopper for tm < 64 (no wgmma), x0.5 on Ampere for tm < 32 (commit 7e915a707d; tm < 16 before).
- **HBM** (`CalculateHbmTime`, `GetEffectiveHbmBandwidth`): operand bytes read and output bytes written
  (the whole problem, once) at one bandwidth, linearly interpolated on their total from the device
  architecture's microbenchmarked curve (`GetScaledHbmBandwidthTable`: Ampere's table for compute
  capability < 9, Hopper's for 9, Blackwell's from 10 up; 21 sizes from 8 KiB to 8 GiB, clamped outside),
  stored as fractions of peak and multiplied by the device's `memory_bandwidth` in bytes/s, in float32.
  Below 1 GiB Hopper's table is the earlier H100 SXM curve (0.9325 of peak at 1 GiB); it goes on to
  0.948 at 8 GiB.
- **L2** (`CalculateL2Bytes`, `CalculateL2Time`): (tb·tm·k + tb·tn·k) operand bytes per block, times the
  blocks, at 6.65 TB/s scaled by the device's `memory_bandwidth` over 3352.32·2^30 bytes/s (the H100 SXM's
  3352.32 GB/s read as GiB/s, so 6.19 TB/s on the H100 SXM itself), plus ceil(k/bk) iterations of 150 ns
  (TMA) or 400 ns (cp.async), once per kernel (not per wave).
- **Occupancy** (`CalculateSmOccupancy`): blocks per SM = max(1, min(shared memory per SM / shared memory
  per block, threads per SM / threads per block[, registers per SM / registers per block])), clamped to
  the device's resident-block limit; shared memory per block = (tm·bk + tn·bk)·bytes·stages
  (`CalculateSharedMemoryPerBlockBytes`). The register limit is the newest version's
  (`CalculateSmOccupancy_RegsLimited`); its registers-per-thread estimate (`CalculateRegistersPerThread`)
  is not in any source readable here, so `estimate_dot` passes none (0: no register limit).
- **Main loop** (`CalculatePipelinedLoopTimeWithLaunchWaves`), per hardware launch wave
  (`hardware_launch_waves`: ceil(blocks/(SMs·active))) and multiplied back, so the latency tax is paid
  per K iteration of each wave (not per block, not once per kernel): with stages <= 1 or one iteration,
  serial: HBM + compute + iterations·tax; otherwise (stages-1) memory iterations (each paying the tax),
  the overlapped iterations at max(max(mem, comp), max(mem + tax, comp)/(stages-1)), (stages-1) compute
  iterations, then the write. `num_stages` is the configuration's (`BlockLevelParameters`, from the fusion's
  `block_level_fusion_config` or the autotuner's `TritonGemmConfig`); where XLA's tiling search builds the
  parameters itself (`EstimateTiledRunTimeDataImpl`) it is the struct's default, 1.
- **Result**: exec = max(main loop, L2); `compute_utilization` and `memory_utilization` as XLA reports them.

The latency tax is XLA's `kLoopLatencyTax`, 1.3 us (the constant the versions with that name state; an
earlier version's `kLatencyTax` was 1.8 us with a different prologue).

Not followed, because no source of it is readable here: the newest test file stored (after 84b5521b00) passes
a registers-per-thread estimate (`CalculateRegistersPerThread`) to the occupancy; `sm_occupancy` takes it,
`estimate_dot` passes none (0: no register limit). A register limit only lowers occupancy, so it can only add
launch waves (each paying the latency tax): it cannot make XLA's price lower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..analysis import int_list_attribute
from ..analysis.tiling import dims_of
from ..hlo import PRIMITIVE_BITS
from ._gemm_table import GemmSpec, gemm_spec

__all__ = [
    "DotFusionEstimate",
    "DotProblem",
    "LOOP_LATENCY_TAX_S",
    "dot_fusion_estimate",
    "dot_problem",
    "dot_supported",
    "compute_utilization",
    "effective_hbm_bandwidth",
    "estimate_dot",
    "hardware_launch_waves",
    "l2_bandwidth",
    "loop_iteration_bytes",
    "max_blocks_per_sm",
    "memory_utilization",
    "pipelined_loop_time",
    "pipelined_loop_time_with_launch_waves",
    "shared_memory_per_block",
    "sm_occupancy",
]

LOOP_LATENCY_TAX_S = 1.3e-6                 # kLoopLatencyTax
TMA_LOOP_OVERHEAD_S = 150e-9                # kTmaLoopOverheadSeconds (cp.async.bulk)
LEGACY_LOOP_OVERHEAD_S = 400e-9             # kLegacyLoopOverheadSeconds (cp.async)
H100_L2_BYTES_PER_S = 6.65e12               # kH100L2CacheBandwidthBytesPerSec
H100_SXM_PEAK_GBPS = 3352.32                # kH100SxmPeakMemoryBandwidthGBps
_GIB = float(1 << 30)
# kAmpereScaledHbmBandwidthTable / kHopperScaledHbmBandwidthTable / kBlackwellScaledHbmBandwidthTable: (bytes
# moved, fraction of the device's peak bandwidth), microbenchmarked per architecture (21 entries, 8 KiB to 8 GiB).
# Below 1 GiB the Hopper table is the H100 SXM curve of the version before (`kScaledHbmBandwidthTable`).
_HBM_SIZES = tuple(1 << e for e in range(13, 34))
_HBM_FRACTIONS_AMPERE = (0.00043418, 0.00092645, 0.00184066, 0.00359877, 0.00724035, 0.01447766, 0.02830100,
                         0.05448203, 0.10550455, 0.19454216, 0.32555948, 0.48194352, 0.60084187, 0.71295513,
                         0.79326842, 0.83355906, 0.89447866, 0.93435348, 0.94308240, 0.94739100, 0.94989600)
_HBM_FRACTIONS_HOPPER = (0.00042359, 0.00090385, 0.00179577, 0.00351100, 0.00706376, 0.01412455, 0.02761073,
                         0.05341375, 0.10343583, 0.19072761, 0.31917596, 0.47249365, 0.58906066, 0.69897562,
                         0.78541428, 0.82530600, 0.88562244, 0.93248850, 0.94120000, 0.94550000, 0.94800000)
_HBM_FRACTIONS_BLACKWELL = (0.00041057, 0.00080983, 0.00159736, 0.00315074, 0.00621472, 0.01009557, 0.01892165,
                            0.03517364, 0.06441370, 0.11489171, 0.19611710, 0.31310696, 0.45727190, 0.60433204,
                            0.72808478, 0.81644540, 0.87240125, 0.90518887, 0.92353306, 0.93353170, 0.93890402)
# Resident blocks per SM by compute capability (CUDA C Programming Guide, "Technical Specifications per
# Compute Capability"): what `DeviceDescription::max_blocks_per_multiprocessor` reads from the driver.
_MAX_BLOCKS_PER_SM = {(7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24, (12, 0): 32}


def _f32(x: float) -> float:
    return float(np.float32(x))


def max_blocks_per_sm(device) -> int:
    """The device's resident-block limit per SM (0: unknown, no clamp)."""
    cc = device.compute_capability
    if not cc:
        return 0
    return _MAX_BLOCKS_PER_SM.get(tuple(cc), 32)


def hbm_bandwidth_fractions(device) -> tuple[float, ...]:
    """XLA's `GetScaledHbmBandwidthTable`: Blackwell's table from compute capability 10 up (newer GPUs too),
    Hopper's for 9, Ampere's for everything older (Volta and Turing included), as fractions of peak at the
    transfer sizes `2^13 .. 2^33` bytes."""
    major = device.compute_capability[0] if device.compute_capability else 0
    return (_HBM_FRACTIONS_BLACKWELL if major >= 10 else _HBM_FRACTIONS_HOPPER if major == 9
            else _HBM_FRACTIONS_AMPERE)


def effective_hbm_bandwidth(nbytes: int, device) -> float:
    """XLA's `GetEffectiveHbmBandwidth`: bytes/s for a transfer of `nbytes` on `device`, linearly interpolated
    on the device's architecture table and clamped at its ends (8 KiB, 8 GiB); float32 arithmetic, as XLA's."""
    peak = _f32(device.memory_bandwidth_bytes_per_s)
    fractions = hbm_bandwidth_fractions(device)
    if nbytes <= _HBM_SIZES[0]:
        return _f32(_f32(fractions[0]) * peak)
    if nbytes >= _HBM_SIZES[-1]:
        return _f32(_f32(fractions[-1]) * peak)
    i = next(i for i, size in enumerate(_HBM_SIZES) if size >= nbytes)     # std::lower_bound
    x0, x1 = _HBM_SIZES[i - 1], _HBM_SIZES[i]
    a, b = _f32(fractions[i - 1]), _f32(fractions[i])
    t = _f32(_f32(nbytes - x0) / _f32(x1 - x0))
    return _f32(_f32(a + _f32(t * _f32(b - a))) * peak)


def l2_bandwidth(device) -> float:
    """XLA's L2 bandwidth for `device`: the H100 SXM's measured 6.65 TB/s scaled by memory bandwidth."""
    return H100_L2_BYTES_PER_S * (device.memory_bandwidth_bytes_per_s / _GIB) / H100_SXM_PEAK_GBPS


def _bits(dtype: str) -> int:
    """`primitive_util::BitWidth` of an element type."""
    return PRIMITIVE_BITS[dtype]


#: XLA's `DotProblemInfo` (batch, m, n, k and the element types) is the GEMM as XLA's matmul table
#: indexes it: one home for reading a GEMM's problem from an instruction (`gemm_spec`).
DotProblem = GemmSpec


def dot_supported(dot) -> bool:
    """XLA's `IsSupported`: at most one non-contracting dimension per side, exactly one contracting
    dimension, no transpose downstream of the dot."""
    lb, lc = int_list_attribute(dot, "lhs_batch_dims"), int_list_attribute(dot, "lhs_contracting_dims")
    rb, rc = int_list_attribute(dot, "rhs_batch_dims"), int_list_attribute(dot, "rhs_contracting_dims")
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


def dot_problem(dot) -> DotProblem:
    """The `DotProblem` of an HLO dot (see `dot_supported` for the shapes XLA's model accepts)."""
    return gemm_spec(dot)


def shared_memory_per_block(problem: DotProblem, tm: int, tn: int, bk: int, num_stages: int) -> int:
    """XLA's `CalculateSharedMemoryPerBlockBytes`: the operand tiles of every stage, in bytes."""
    return (tm * bk * _bits(problem.lhs_type) // 8 + tn * bk * _bits(problem.rhs_type) // 8) * num_stages


def loop_iteration_bytes(problem: DotProblem, tile_b: int, tile_m: int, tile_n: int, block_k: int) -> int:
    """XLA's `CalculateLoopIterBytes`: the operand bytes one block loads in one K iteration."""
    p = problem
    return (math.ceil(tile_b * tile_m * block_k * _bits(p.lhs_type) / 8)
            + math.ceil(tile_b * block_k * tile_n * _bits(p.rhs_type) / 8))


def sm_occupancy(smem_per_block: int, num_warps: int, device, registers_per_thread: int = 0) -> int:
    """XLA's `CalculateSmOccupancy`: resident blocks per SM from shared memory, threads and (where
    `registers_per_thread` > 0) registers."""
    threads = device.threads_per_core_limit or 2048
    block_threads = num_warps * (device.warp_size or 32)
    by_smem = device.shared_memory_per_core_bytes // smem_per_block if smem_per_block > 0 else threads
    active = min(by_smem, threads // block_threads)
    if registers_per_thread > 0 and device.registers_per_core_limit:
        active = min(active, device.registers_per_core_limit // (registers_per_thread * block_threads))
    active = max(1, active)
    limit = max_blocks_per_sm(device)
    return min(active, limit) if limit > 0 else active


def hardware_launch_waves(blocks: int, smem_per_block: int, num_warps: int, device,
                          registers_per_thread: int = 0) -> int:
    """XLA's `CalculateHardwareLaunchWaves`: how many times the GPU fills with resident blocks."""
    capacity = sm_occupancy(smem_per_block, num_warps, device, registers_per_thread) * device.core_count
    return math.ceil(blocks / capacity)


def pipelined_loop_time(num_stages: int, iters: int, compute_s: float, read_s: float, write_s: float,
                        tax_s: float = LOOP_LATENCY_TAX_S) -> float:
    """XLA's `CalculatePipelinedLoopTime` (see the module docstring)."""
    if num_stages <= 1 or iters <= 1:
        return read_s + write_s + compute_s + iters * tax_s
    ic, im = compute_s / iters, read_s / iters
    imt = im + tax_s
    it = max(max(im, ic), max(imt, ic) / (num_stages - 1))
    pro = min(num_stages - 1, iters)
    return pro * imt + (iters - pro) * it + pro * ic + write_s


def pipelined_loop_time_with_launch_waves(num_stages: int, iters: int, blocks: int, compute_s: float,
                                          read_s: float, write_s: float, smem_per_block: int, num_warps: int,
                                          device, registers_per_thread: int = 0,
                                          tax_s: float = LOOP_LATENCY_TAX_S) -> float:
    """XLA's `CalculatePipelinedLoopTimeWithLaunchWaves`: the loop of one launch wave (its share of the
    compute and HBM times), times the waves; 0 for no blocks."""
    if blocks == 0:
        return 0.0
    waves = hardware_launch_waves(blocks, smem_per_block, num_warps, device, registers_per_thread)
    return pipelined_loop_time(num_stages, iters, compute_s / waves, read_s / waves, write_s / waves,
                               tax_s) * waves


@dataclass(frozen=True, slots=True)
class DotFusionEstimate:
    """XLA's `EstimateRunTimeData` of one dot under one configuration; times in seconds."""

    compute_s: float
    read_s: float
    write_s: float
    l2_s: float
    loop_s: float
    exec_s: float
    flops: int
    bytes_read: int
    bytes_written: int
    l2_bytes: int
    blocks: int
    k_iterations: int
    shared_memory_per_block: int
    blocks_per_sm: int
    launch_waves: int


def estimate_dot(problem: DotProblem, tile_b: int, tile_m: int, tile_n: int, block_k: int, num_warps: int,
                 num_stages: int, device, is_tma_allowed: bool = False) -> DotFusionEstimate:
    """XLA's `EstimateRunTimeForDotOpWithBlockParameters` on a `DotProblem`."""
    p = problem
    sms = device.core_count
    blocks = math.ceil(p.b / tile_b) * math.ceil(p.m / tile_m) * math.ceil(p.n / tile_n)
    waves = math.ceil(blocks / sms)
    flops = 2 * tile_b * tile_m * tile_n * p.k * waves * sms
    # CalculatePeakMatrixOpsPerNs is an integer number of ops per ns.
    peak = int(device.matmul_flops_per_s(p.lhs_type) * 1e-9)
    major = device.compute_capability[0] if device.compute_capability else 0
    derate = (0.5 if major == 10 and tile_m < 128 else 0.63 if major == 9 and tile_m < 64
              else 0.5 if major == 8 and tile_m < 32 else 1.0)
    compute = _f32(flops) / (peak * derate) * 1e-9
    in_b, out_b = p.bytes_read, p.bytes_written
    hbm = effective_hbm_bandwidth(in_b + out_b, device)
    read, write = _f32(in_b / hbm), _f32(out_b / hbm)
    l2_bytes = (math.ceil(tile_b * tile_m * p.k * _bits(p.lhs_type) / 8)
                + math.ceil(tile_b * tile_n * p.k * _bits(p.rhs_type) / 8)) * blocks
    iters = math.ceil(p.k / block_k)
    l2 = l2_bytes / l2_bandwidth(device) + iters * (TMA_LOOP_OVERHEAD_S if is_tma_allowed else LEGACY_LOOP_OVERHEAD_S)
    smem = shared_memory_per_block(p, tile_m, tile_n, block_k, num_stages)
    active = sm_occupancy(smem, num_warps, device)
    launch_waves = hardware_launch_waves(blocks, smem, num_warps, device)
    loop = pipelined_loop_time_with_launch_waves(num_stages, iters, blocks, compute, read, write, smem, num_warps,
                                                 device)
    return DotFusionEstimate(compute, read, write, l2, loop, max(loop, l2), flops, in_b, out_b, l2_bytes,
                             blocks, iters, smem, active, launch_waves)


def compute_utilization(estimate: DotFusionEstimate, device, out_type: str) -> float:
    """XLA's `CalculateComputeUtilization`: the wave-quantized flops over (the matrix peak of the output
    type, in whole ops per ns, x exec time); 0 where either is 0."""
    peak = int(device.matmul_flops_per_s(out_type) * 1e-9) * 1e9
    if estimate.exec_s == 0 or peak == 0:
        return 0.0
    return estimate.flops / (peak * estimate.exec_s)


def memory_utilization(estimate: DotFusionEstimate, device) -> float:
    """XLA's `CalculateMemoryUtilization`: HBM bytes over (peak bandwidth x exec time); 0 where either is 0."""
    peak = device.memory_bandwidth_bytes_per_s
    if estimate.exec_s == 0 or not peak:
        return 0.0
    return (estimate.bytes_read + estimate.bytes_written) / (peak * estimate.exec_s)


def dot_fusion_estimate(dot, tile_sizes, block_k: int, num_warps: int, num_stages: int, device,
                        is_tma_allowed: bool = False) -> tuple[float, float]:
    """`(compute_s, exec_s)` of an HLO dot under an output tile (batch tiles first, then m and n), as the
    tiled model adds it to a fusion's time."""
    tb = math.prod(tile_sizes[:-2]) if len(tile_sizes) > 2 else 1
    e = estimate_dot(dot_problem(dot), tb, tile_sizes[-2], tile_sizes[-1], block_k, num_warps, num_stages, device,
                     is_tma_allowed)
    return e.compute_s, e.exec_s
