"""XLA's dot-fusion cost model (`models._dot_fusion`) against XLA's own tests and hand-worked numbers.

Source: openxla/xla `xla/service/gpu/model/gpu_dot_fusion_cost_model.cc` at its newest readable commit,
84b5521b00 (2026-08-17, per-architecture HBM tables; the zml/xla mirror's history), and its test file
`gpu_dot_fusion_cost_model_test.cc`, whose cases are restated below on this project's `h100-sxm` preset
(XLA's tests use `TestGpuDeviceInfo::H100SXMDeviceInfo()`: 132 SMs, 3352.32 GB/s, sm_90), `a100-80gb`
(`A100SXMDeviceInfo`) and `b200` (`B200SXMDeviceInfo`). Two versions of the test file are restated: the one
of that commit and the newest one stored (the same cases, plus `CalculateSmOccupancy(...,
registers_per_thread)` and `CalculateRegistersPerThread*`). Of the newest one, the registers-per-thread
estimate (`CalculateRegistersPerThread*`) is not restated: no source of it is readable. The oldest versions
(max(compute, HBM, L2) at the SIMT peak) test a model XLA replaced; a 15.5k-character test file in the search
index (`SkinnyBf16GemmWriteAmplification`, `NarrowTileWriteAmplification`: a write-coalescing penalty on
`bytes_written`) belongs to no commit of the file in the mirror's history (through 2026-08-21): it is the May
2026 test file (60ee03a83e) plus those cases, and its `GpuDotComputeBoundBf16` / `GpuDotMemoryBoundBf16` expect
the max(compute, HBM, L2) model XLA replaced in July (f4bc3b8c75), so it is not followed.
"""

from __future__ import annotations

import dataclasses

import pytest

from xla_costmodel import get_device
from xla_costmodel.devices._registry import device_names
from xla_costmodel.hlo import parse_hlo
from xla_costmodel.models._dot_fusion import (
    LOOP_LATENCY_TAX_S,
    DotFusionEstimate,
    DotProblem,
    compute_utilization,
    dot_problem,
    dot_supported,
    effective_hbm_bandwidth,
    estimate_dot,
    hardware_launch_waves,
    l2_bandwidth,
    loop_iteration_bytes,
    memory_utilization,
    pipelined_loop_time,
    pipelined_loop_time_with_launch_waves,
    shared_memory_per_block,
    sm_occupancy,
)

H100 = get_device("h100-sxm")
A100 = get_device("a100-80gb")
B200 = get_device("b200")


def _dot(text: str):
    module = parse_hlo(text)
    return module.entry.root


def _square(stages: int, tile=(256, 512), bk: int = 32):
    p = DotProblem(1, 8192, 8192, 8192, "bf16", "bf16", "bf16")
    return p, estimate_dot(p, 1, tile[0], tile[1], bk, 4, stages, H100)


def test_compute_bound_one_stage_is_serial():
    """GpuDotComputeBoundBf16NumStages1: exec > 1.2 x compute."""
    _, e = _square(1)
    assert e.exec_s > 1.2 * e.compute_s


def test_compute_bound_pipelined_is_compute_plus_tax():
    """GpuDotComputeBoundBf16: compute + tax <= exec <= 1.1 (compute + tax)."""
    _, e = _square(3)
    want = e.compute_s + LOOP_LATENCY_TAX_S
    assert want <= e.exec_s <= 1.1 * want


def test_memory_bound_is_hbm_plus_tax():
    """GpuDotMemoryBoundBf16: bf16[4,4096] x [4096,4096], tile 4x128, bk 512, 3 stages."""
    p = DotProblem(1, 4, 4096, 4096, "bf16", "bf16", "bf16")
    e = estimate_dot(p, 1, 4, 128, 512, 4, 3, H100)
    nbytes = 2 * (4096 + 4 * 2) * 4096
    want = nbytes / effective_hbm_bandwidth(nbytes, H100) + LOOP_LATENCY_TAX_S
    assert want <= e.exec_s <= 1.1 * want


def test_contracting_dimension_order_does_not_matter():
    """DifferentContractingDimsHaveSameRuntime."""
    a = _dot("""HloModule m
ENTRY e {
  p0 = bf16[8192,1024] parameter(0)
  p1 = bf16[1024,4096] parameter(1)
  ROOT r = bf16[8192,4096] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
    b = _dot("""HloModule m
ENTRY e {
  p0 = bf16[1024,8192] parameter(0)
  p1 = bf16[4096,1024] parameter(1)
  ROOT r = bf16[8192,4096] dot(p0, p1), lhs_contracting_dims={0}, rhs_contracting_dims={1}
}""")
    assert dot_problem(a) == dot_problem(b) == DotProblem(1, 8192, 4096, 1024, "bf16", "bf16", "bf16")
    ea = estimate_dot(dot_problem(a), 1, 128, 256, 32, 4, 1, H100)
    eb = estimate_dot(dot_problem(b), 1, 128, 256, 32, 4, 1, H100)
    assert ea.exec_s == eb.exec_s > 0


def test_batched_and_downstream_transpose_support():
    """GpuDot4DGemm is supported (batch = 2 x 8); GpuDotWithDownstreamTransposeIsRejected."""
    four = _dot("""HloModule m
ENTRY e {
  p0 = bf16[2,8,1024,2048] parameter(0)
  p1 = bf16[2,8,2048,1024] parameter(1)
  ROOT r = bf16[2,8,1024,1024] dot(p0, p1), lhs_batch_dims={0,1}, rhs_batch_dims={0,1},
    lhs_contracting_dims={3}, rhs_contracting_dims={2}
}""")
    assert dot_supported(four) and dot_problem(four).b == 16
    module = parse_hlo("""HloModule m
ENTRY e {
  p0 = bf16[1024,2048] parameter(0)
  p1 = bf16[2048,1024] parameter(1)
  d = bf16[1024,1024] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = bf16[1024,1024] transpose(d), dimensions={1,0}
}""")
    assert not dot_supported(module.entry.root.operands[0])


def test_shared_memory_per_block():
    """CalculateSharedMemoryPerBlockBytes: 24576, 81920 and 16384 bytes."""
    f32 = DotProblem(1, 1, 1, 1, "f32", "f32", "f32")
    f64 = DotProblem(1, 1, 1, 1, "f64", "f64", "f64")
    assert shared_memory_per_block(f32, 64, 64, 16, 3) == 24576
    assert shared_memory_per_block(f32, 64, 16, 64, 4) == 81920
    assert shared_memory_per_block(f64, 64, 64, 16, 1) == 16384


def test_occupancy_and_launch_waves():
    """CalculateSmOccupancy_ShmemLimited / _ThreadLimited / _RegsLimited, CalculateHardwareLaunchWaves_*."""
    assert sm_occupancy(200_000, 4, H100) == 1
    assert sm_occupancy(1024, 4, H100) == 16            # 2048 threads / 128
    assert sm_occupancy(1024, 4, H100, registers_per_thread=200) == 2    # 65536 / (200 x 128): 8 warps
    assert sm_occupancy(1024, 4, H100, registers_per_thread=0) == 16     # 0: no register limit
    assert hardware_launch_waves(0, 1024, 4, H100) == 0
    assert hardware_launch_waves(1000, 1024, 4, H100) == 1
    assert hardware_launch_waves(1000, 200_000, 4, H100) >= 4
    assert hardware_launch_waves(5000, 1024, 4, H100) > 1


def test_loop_iteration_bytes():
    """CalculateIterBytes: bf16 tile 128x256, bk 32: 128 x 32 x 2 + 32 x 256 x 2 = 24576 bytes."""
    assert loop_iteration_bytes(DotProblem(1, 1024, 1024, 2048, "bf16", "bf16", "bf16"), 1, 128, 256, 32) == 24576


def test_pipelined_loop_time_with_launch_waves():
    """CalculatePipelinedLoopTimeWithLaunchWaves_ZeroBlocksHazard / _WaveBoundaryOverhead: no blocks, no time;
    1 and 1000 blocks are one wave (same time); 5000 blocks take more waves, each paying the tax."""
    def loop(blocks):
        return pipelined_loop_time_with_launch_waves(3, 10, blocks, 200e-6, 100e-6, 50e-6, 1024, 4, H100,
                                                     registers_per_thread=0)
    assert loop(0) == 0.0
    assert loop(1) == loop(1000)
    assert loop(5000) > loop(1)


def test_utilizations():
    """CalculateComputeUtilization: flops = 2 x the f32 peak over 4 s is 0.5, 0 at no time;
    CalculateMemoryUtilization: 3000 B at 3000 B/s over 4 s is 0.25, 0 at no time (its zero-bandwidth case
    has no `DeviceSpec`: a device's bandwidth must be > 0)."""
    peak = int(H100.matmul_flops_per_s("f32") * 1e-9) * 1e9
    e = DotFusionEstimate(0, 0, 0, 0, 0, 4.0, int(2.0 * peak), 1000, 2000, 0, 0, 0, 0, 0, 0)
    assert compute_utilization(e, H100, "f32") == pytest.approx(0.5, rel=1e-15)
    assert compute_utilization(dataclasses.replace(e, exec_s=0.0), H100, "f32") == 0.0
    slow = dataclasses.replace(H100, memory_bandwidth_bytes_per_s=3000.0)
    assert memory_utilization(e, slow) == pytest.approx(0.25, rel=1e-15)
    assert memory_utilization(dataclasses.replace(e, exec_s=0.0), slow) == 0.0


def test_pipelined_loop_time():
    """CalculatePipelinedLoopTime: serial within [sum, 1.1 sum] of the work, 3 stages under 0.9 sum."""
    read, write, compute = 100e-6, 50e-6, 200e-6
    work = read + write + compute
    serial = pipelined_loop_time(1, 10, compute, read, write)
    assert work <= serial <= 1.1 * work
    assert pipelined_loop_time(3, 10, compute, read, write) < 0.9 * work


def test_hbm_curve_scales_with_each_preset():
    """GetMemoryBandwidthSpec / GetScaledHbmBandwidthTable: XLA's curves are fractions of peak, so every GPU
    preset gets its own architecture's curve scaled to its own peak (Hopper: 0.042% at 8 KiB, 93.2% at 1 GiB,
    94.8% at 8 GiB; Ampere 93.4% and Blackwell 90.5% at 1 GiB); interpolation is linear
    (EffectiveHbmBandwidthLinearlyInterpolatesBetweenTableEntries)."""
    gpus = [get_device(n) for n in device_names() if get_device(n).kind == "gpu"]
    assert len(gpus) >= 5
    at_1gib = {8: 0.93435348, 9: 0.9324885, 10: 0.90518887}
    for d in gpus:
        peak = d.memory_bandwidth_bytes_per_s
        arch = min(max(d.compute_capability[0], 8), 10)
        assert effective_hbm_bandwidth(1 << 30, d) / peak == pytest.approx(at_1gib[arch], rel=1e-6)
        assert effective_hbm_bandwidth(4096, d) == effective_hbm_bandwidth(8192, d)
        mid = (effective_hbm_bandwidth(8192, d) + effective_hbm_bandwidth(16384, d)) / 2
        assert effective_hbm_bandwidth(12288, d) == pytest.approx(mid, rel=1e-6)
        # L2 bandwidth scales with memory bandwidth relative to the H100 SXM's 3352.32 "GB/s" in GiB.
        assert l2_bandwidth(d) == pytest.approx(6.65e12 * peak / (1 << 30) / 3352.32, rel=1e-12)
        e = estimate_dot(DotProblem(1, 1024, 1024, 1024, "bf16", "bf16", "bf16"), 1, 128, 128, 64, 4, 3, d)
        assert 0 < e.exec_s < 1e-3
    assert effective_hbm_bandwidth(8192, H100) / H100.memory_bandwidth_bytes_per_s == pytest.approx(0.00042359,
                                                                                                  rel=1e-6)
    assert effective_hbm_bandwidth(8 << 30, H100) / H100.memory_bandwidth_bytes_per_s == pytest.approx(0.948,
                                                                                                     rel=1e-6)
    # Between 1 and 2 GiB the Hopper curve goes on rising (the earlier table stopped at 1 GiB).
    assert effective_hbm_bandwidth(3 << 29, H100) / H100.memory_bandwidth_bytes_per_s == pytest.approx(
        (0.9324885 + 0.9412) / 2, rel=1e-6)


def test_hbm_curve_limits():
    """EffectiveHbmBandwidthMinTransferSizeIsLatencyBound (8 KiB: under 10% of peak), ...Asymptotic...
    (8 GiB: over 90%, at most 100%), ...ClampsAboveMaximumTransferSize (16 GiB as 8 GiB),
    ...ClampsBelowMinimumTransferSize (4 KiB as 8 KiB), on the A100, H100 and B200."""
    for d in (A100, H100, B200):
        peak = d.memory_bandwidth_bytes_per_s
        assert 0 < effective_hbm_bandwidth(8192, d) / peak < 0.10
        assert 0.90 < effective_hbm_bandwidth(8 << 30, d) / peak <= 1.0
        assert effective_hbm_bandwidth(16 << 30, d) == effective_hbm_bandwidth(8 << 30, d)
        assert effective_hbm_bandwidth(4096, d) == effective_hbm_bandwidth(8192, d)


def test_hbm_curve_increases_up_to_8_gib():
    """EffectiveHbmBandwidthMonotonicallyIncreasesWithTransferSize: strictly rising from 8 KiB to 8 GiB, in
    powers of two, on the A100, H100 and B200."""
    for d in (A100, H100, B200):
        bws = [effective_hbm_bandwidth(1 << e, d) for e in range(13, 34)]
        assert all(b > a for a, b in zip(bws, bws[1:]))


def test_hbm_curve_fraction_ordering_across_architectures():
    """EffectiveHbmBandwidthFractionOrderingAcrossArchitectures: at 16 KiB, 64 KiB, 2, 8, 32 and 128 MiB the
    fraction of peak is Ampere's > Hopper's > Blackwell's."""
    for size in (16 << 10, 64 << 10, 2 << 20, 8 << 20, 32 << 20, 128 << 20):
        a100, h100, b200 = (effective_hbm_bandwidth(size, d) / d.memory_bandwidth_bytes_per_s
                            for d in (A100, H100, B200))
        assert a100 > h100 > b200


def test_hbm_curve_falls_back_by_architecture():
    """EffectiveHbmBandwidthFallsBackToAmpereForOlderArchitectures (sm_70 at 900 GB/s: the A100's fraction at
    128 MiB) and ...FallsBackToBlackwellForFutureArchitectures (sm_110 at 10 TB/s: the B200's)."""
    frac = lambda d: effective_hbm_bandwidth(128 << 20, d) / d.memory_bandwidth_bytes_per_s  # noqa: E731
    volta = dataclasses.replace(get_device("rtx-a6000"), compute_capability=(7, 0),
                                memory_bandwidth_bytes_per_s=900e9)
    future = dataclasses.replace(get_device("rtx-a6000"), compute_capability=(11, 0),
                                 memory_bandwidth_bytes_per_s=10_000e9)
    assert frac(volta) == pytest.approx(frac(A100), rel=1e-6)
    assert frac(future) == pytest.approx(frac(B200), rel=1e-6)
    assert frac(A100) != pytest.approx(frac(B200), rel=1e-3)


def _derate(device, tile_m: int, dtype: str) -> float:
    """The effective rate at `tile_m` over the peak (one wave of blocks, so no wave quantization)."""
    p = DotProblem(1, tile_m, 64, 4096, dtype, dtype, dtype)
    e = estimate_dot(p, 1, tile_m, 64, 64, 4, 3, device)
    return e.flops / e.compute_s / (int(device.matmul_flops_per_s(dtype) * 1e-9) * 1e9)


def test_tile_m_derates():
    """AmpereTileMDerate (tile_m 31: 0.5 of tile_m 32), HopperTileMDerate (63: 0.63 of 64), BlackwellTileMDerate
    (127: 0.5 of 128)."""
    assert _derate(A100, 31, "f16") / _derate(A100, 32, "f16") == pytest.approx(0.50, abs=1e-4)
    assert _derate(A100, 32, "f16") == pytest.approx(1.0, rel=1e-6)
    assert _derate(H100, 63, "f16") / _derate(H100, 64, "f16") == pytest.approx(0.63, abs=1e-4)
    assert _derate(B200, 127, "bf16") / _derate(B200, 128, "bf16") == pytest.approx(0.50, abs=1e-4)


def test_compute_bound_a100_pipelined_is_compute_plus_tax():
    """GpuDotComputeBoundA100Bf16: bf16 8192^3, 256x512, bk 32, 3 stages on the A100: compute + tax <= exec
    <= 1.1 (compute + tax)."""
    e = estimate_dot(DotProblem(1, 8192, 8192, 8192, "bf16", "bf16", "bf16"), 1, 256, 512, 32, 4, 3, A100)
    want = e.compute_s + LOOP_LATENCY_TAX_S
    assert want <= e.exec_s <= 1.1 * want


def test_hopper_narrow_tile_derate():
    """HopperTileMDerate: tile_m < 64 runs at 0.63 of the peak (63 needs 135 blocks: two waves)."""
    p = DotProblem(1, 64 * 132, 64, 4096, "f16", "f16", "f16")
    narrow = estimate_dot(p, 1, 63, 64, 64, 4, 3, H100)
    full = estimate_dot(p, 1, 64, 64, 64, 4, 3, H100)
    assert narrow.flops == 2 * full.flops * 63 // 64
    rate = lambda e: e.flops / e.compute_s  # noqa: E731
    assert rate(narrow) / rate(full) == pytest.approx(0.63, rel=1e-4)


def test_worked_example_h100():
    """bf16 1024^3, tile 128x128, bk 64, 4 warps, 3 stages, no TMA, on h100-sxm, worked by hand:

    - 64 blocks, 1 wave: flops 2*128*128*1024*132 = 4 429 185 024 at int(989 170.29) ops/ns -> 4.4777 us;
    - 6 MiB moved: fraction 0.19072761 + 0.5 (0.31917596 - 0.19072761) = 0.25495179 of 3352.32 GB/s
      = 854.68 GB/s: read 4 MiB 4.9075 us, write 2 MiB 2.4537 us;
    - L2: 64 x (128 + 128) x 1024 x 2 B = 32 MiB at 6.65e12 x 3122.0725 / 3352.32 = 6.1933 TB/s = 5.4179 us,
      plus 16 iterations x 400 ns: 11.8179 us;
    - shared memory (128 + 128) x 64 x 2 B x 3 = 98 304 B: 2 blocks per SM, 1 launch wave;
    - loop: per iteration compute 0.27986 us, memory 0.30672 us (+1.3 us tax = 1.60672);
      iteration = max(0.30672, 1.60672 / 2) = 0.80336 us; 2 x 1.60672 + 14 x 0.80336 + 2 x 0.27986 + 2.45373
      = 17.4739 us; exec = max(17.4739, 11.8179) us.
    """
    e = estimate_dot(DotProblem(1, 1024, 1024, 1024, "bf16", "bf16", "bf16"), 1, 128, 128, 64, 4, 3, H100)
    assert e.blocks == 64 and e.launch_waves == 1 and e.blocks_per_sm == 2 and e.k_iterations == 16
    assert e.flops == 4_429_185_024 and e.shared_memory_per_block == 98_304 and e.l2_bytes == 32 << 20
    assert e.compute_s == pytest.approx(4.4777e-6, rel=1e-4)
    assert e.read_s == pytest.approx(4.9075e-6, rel=1e-4)
    assert e.write_s == pytest.approx(2.45373e-6, rel=1e-4)
    assert e.l2_s == pytest.approx(11.8179e-6, rel=1e-4)
    assert e.exec_s == pytest.approx(17.4739e-6, rel=1e-4)
