"""Built-in GPU presets.

Every number comes from XLA where XLA has one: the GPU spec files
`xla/backends/gpu/target_config/specs/*.txtpb` (formerly
`xla/tools/hlo_opt/gpu_specs/`) and the test devices in
`xla/service/gpu/gpu_device_info_for_tests.cc`. Matrix-unit (tensor core) peaks
follow XLA's own formula, `2 · units_per_SM · FMAs_per_clock · unit_clock ·
SMs` (`CalculatePeakMatrixOpsPerNs`), with per-unit rates from XLA's
`cuda_core_info_table.cc` for Hopper and from NVIDIA's architecture white
papers for Volta and Ampere, where XLA's table has no rows.
"""

from __future__ import annotations

from ._op_profiles import load_op_profile, op_profile_name_for
from ._spec import DeviceSpec

__all__ = ["PRESETS", "XLA_KERNEL_LAUNCH_OVERHEAD_S"]

# `GpuPerformanceModelBase::kKernelLaunchOverhead`.
XLA_KERNEL_LAUNCH_OVERHEAD_S = 1e-6

# Constants XLA hard-codes for NVIDIA GPUs in `se::DeviceDescription`:
# `l1_cache_size_per_SM()` (deliberately small), `dram_to_l2_transaction_size_bytes()`
# and `memory_transactions_per_clock()`.
_NVIDIA_L1_PER_SM = 2 * 1024
_NVIDIA_DRAM_TO_L2_TRANSACTION = 64
_NVIDIA_TRANSACTIONS_PER_CLOCK = 32

_KiB = 1024
_MiB = 1024 * 1024
_BLOCK_DIMS = (2_147_483_647, 65_535, 65_535)


def _matrix_peaks(core_count: int, rows: dict[str, tuple[int, int, float]]) -> dict[str, float]:
    """`{dtype: (units per SM, FMAs per clock per unit, unit clock GHz)}` -> FLOP/s (FMA = 2)."""
    return {dtype: 2.0 * units * fmas * clock * 1e9 * core_count for dtype, (units, fmas, clock) in rows.items()}


def _nvidia(name: str, **fields) -> DeviceSpec:
    cc = fields["compute_capability"]
    profile = op_profile_name_for(cc)
    fields.setdefault("warp_size", 32)
    fields.setdefault("threads_per_block_limit", 1024)
    fields.setdefault("block_dim_limit", _BLOCK_DIMS)
    fields.setdefault("registers_per_core_limit", 65_536)
    fields.setdefault("registers_per_block_limit", 65_536)
    fields.setdefault("shared_memory_per_block_bytes", 48 * _KiB)
    return DeviceSpec(
        name=name,
        kind="gpu",
        l1_cache_bytes_per_core=_NVIDIA_L1_PER_SM,
        dram_to_l2_transaction_bytes=_NVIDIA_DRAM_TO_L2_TRANSACTION,
        memory_transactions_per_clock=_NVIDIA_TRANSACTIONS_PER_CLOCK,
        kernel_launch_overhead_s=XLA_KERNEL_LAUNCH_OVERHEAD_S,
        op_profile_name=profile,
        op_profile=load_op_profile(profile),
        **fields,
    )


# Per-SM matrix-unit rates, dense (no sparsity). "f32" means TF32 on the tensor cores.
#
# Hopper: XLA `cuda_core_info_table.cc` (4 tensor cores per SM, clock scale 0.924 of
# the 1.98 GHz base except FP64); h100_sxm.txtpb / h200.txtpb spell out the same
# rates with the tensor-core clock 1.8295201 GHz.
_HOPPER_TC_CLOCK = 1.8295201
# h100_pcie.txtpb: the PCIe card's tensor cores run at 1.62162 GHz (0.924 of its 1.755 GHz).
_H100_PCIE_TC_CLOCK = 1.62162


def _hopper_rows(clock: float, tc_clock: float = _HOPPER_TC_CLOCK) -> dict[str, tuple[int, int, float]]:
    return {
        "s8": (4, 1024, tc_clock), "u8": (4, 1024, tc_clock),
        "f8e4m3fn": (4, 1024, tc_clock), "f8e5m2": (4, 1024, tc_clock),
        "f16": (4, 512, tc_clock), "bf16": (4, 512, tc_clock),
        "f32": (4, 256, tc_clock), "f64": (4, 32, clock),
    }


# Blackwell (B200, GB200, GB300): XLA specs/{b200,gb200,gb300}.txtpb
# (openxla/xla@6b73c4c49eb0c5aee1963c1e34c7cc8ba92ac202) matrix_unit_description, 4 tensor
# cores per SM at the tensor-core clock (FP64 at the SM clock). Per unit per clock: 2048
# INT8 / FP8, 1024 FP16 / BF16, 512 TF32 ("f32"), 16 FP64, 4096 FP4. For the B200 at 1.835 GHz
# x 148 SMs this gives 2.22 PFLOP/s dense BF16, 1.11 TF32, 4.45 FP8, NVIDIA's B200 datasheet
# figures (dense: half the "with sparsity" ones).
def _blackwell_rows(tc_clock: float, clock: float) -> dict[str, tuple[int, int, float]]:
    return {
        "s8": (4, 2048, tc_clock), "u8": (4, 2048, tc_clock),
        "f8e4m3fn": (4, 2048, tc_clock), "f8e5m2": (4, 2048, tc_clock),
        "f16": (4, 1024, tc_clock), "bf16": (4, 1024, tc_clock),
        "f32": (4, 512, tc_clock), "f64": (4, 16, clock), "f4e2m1fn": (4, 4096, tc_clock),
    }


# Ampere GA100 (A100): NVIDIA A100 Tensor Core GPU Architecture white paper v1.0,
# per SM per clock (dense) 1024 FP16/BF16 FMA, 512 TF32, 2048 INT8, 64 FP64 over 4
# tensor cores. At 1.41 GHz x 108 SMs: 312 / 156 / 624 / 19.5 TFLOP/s, the datasheet figures.
def _ga100_rows(clock: float) -> dict[str, tuple[int, int, float]]:
    return {"s8": (4, 512, clock), "u8": (4, 512, clock), "f16": (4, 256, clock),
            "bf16": (4, 256, clock), "f32": (4, 128, clock), "f64": (4, 16, clock)}


# Ampere GA102 (RTX A6000): NVIDIA Ampere GA102 white paper / RTX A6000 datasheet,
# 154.8 dense FP16 tensor TFLOP/s at 1.80 GHz x 84 SMs = 512 FMA per SM per clock
# over 4 tensor cores; TF32 half of that, INT8 twice; no FP64 tensor cores.
def _ga102_rows(clock: float) -> dict[str, tuple[int, int, float]]:
    return {"s8": (4, 256, clock), "u8": (4, 256, clock), "f16": (4, 128, clock),
            "bf16": (4, 128, clock), "f32": (4, 64, clock)}


# Volta GV100 (V100): NVIDIA Tesla V100 GPU Architecture white paper v1.1, 8 tensor
# cores per SM, 64 FP16 FMA per clock each: 125 TFLOP/s at 1.53 GHz x 80 SMs. FP16 only.
def _gv100_rows(clock: float) -> dict[str, tuple[int, int, float]]:
    return {"f16": (8, 64, clock)}


def _build_presets() -> dict[str, DeviceSpec]:
    presets = [
        # XLA xla/backends/gpu/target_config/specs/a100_sxm_40.txtpb
        # (openxla/xla@4336d12e0706168f6a382ddb231f3a83853b0657).
        _nvidia(
            "a100-40gb",
            description="NVIDIA A100-SXM4-40GB",
            compute_capability=(8, 0),
            core_count=108, fpus_per_core=64, clock_rate_ghz=1.41,
            memory_bandwidth_bytes_per_s=1_555_200_000_000,
            l2_cache_bytes=41_943_040,
            shared_memory_per_core_bytes=167_936,
            shared_memory_per_block_optin_bytes=166_912,
            threads_per_core_limit=2048,
            device_memory_bytes=42_331_013_120,
            peak_matmul_flops_per_s=_matrix_peaks(108, _ga100_rows(1.41)),
            pcie_bandwidth_bytes_per_s=34_359_738_368,
            source="XLA specs/a100_sxm_40.txtpb @4336d12e; tensor cores: A100 white paper",
        ),
        # XLA specs/a100_sxm_80.txtpb (openxla/xla@4336d12e); TestGpuDeviceInfo::A100SXMDeviceInfo
        # (@043f76a3) has the same numbers.
        _nvidia(
            "a100-80gb",
            description="NVIDIA A100-SXM4-80GB",
            compute_capability=(8, 0),
            core_count=108, fpus_per_core=64, clock_rate_ghz=1.41,
            memory_bandwidth_bytes_per_s=2_039_040_000_000,
            l2_cache_bytes=41_943_040,
            shared_memory_per_core_bytes=167_936,
            shared_memory_per_block_optin_bytes=166_912,
            threads_per_core_limit=2048,
            device_memory_bytes=85_100_068_864,
            peak_matmul_flops_per_s=_matrix_peaks(108, _ga100_rows(1.41)),
            source="XLA specs/a100_sxm_80.txtpb @4336d12e; tensor cores: A100 white paper",
        ),
        # XLA specs/h100_sxm.txtpb (openxla/xla@0774019d97e77dc433ce97604295f6fc0f5b3b65),
        # including its matrix_unit_description.
        _nvidia(
            "h100-sxm",
            description="NVIDIA H100 80GB HBM3",
            compute_capability=(9, 0),
            core_count=132, fpus_per_core=128, clock_rate_ghz=1.98,
            memory_bandwidth_bytes_per_s=3_352_320_000_000,
            l2_cache_bytes=52_428_800,
            shared_memory_per_core_bytes=233_472,
            shared_memory_per_block_optin_bytes=232_448,
            threads_per_core_limit=2048,
            device_memory_bytes=84_942_979_072,
            peak_matmul_flops_per_s=_matrix_peaks(132, _hopper_rows(1.98)),
            pcie_bandwidth_bytes_per_s=34_359_738_368,
            nvlink_links=18,
            source="XLA specs/h100_sxm.txtpb @0774019d (tensor-core rates included); "
                   "interconnect @6b73c4c4",
        ),
        # XLA specs/h100_pcie.txtpb (openxla/xla@4336d12e0706168f6a382ddb231f3a83853b0657),
        # including its matrix_unit_description: 114 SMs at 1.755 GHz, tensor cores at
        # 1.62162 GHz, 2.04 TB/s HBM2e. The file gives no PCIe or NVLink figures.
        _nvidia(
            "h100-pcie",
            description="NVIDIA H100 PCIe",
            compute_capability=(9, 0),
            core_count=114, fpus_per_core=128, clock_rate_ghz=1.755,
            memory_bandwidth_bytes_per_s=2_039_040_000_000,
            l2_cache_bytes=52_428_800,
            shared_memory_per_core_bytes=233_472,
            shared_memory_per_block_optin_bytes=232_448,
            threads_per_core_limit=2048,
            device_memory_bytes=84_942_979_072,
            peak_matmul_flops_per_s=_matrix_peaks(114, _hopper_rows(1.755, tc_clock=_H100_PCIE_TC_CLOCK)),
            source="XLA specs/h100_pcie.txtpb @4336d12e (tensor-core rates included)",
        ),
        # XLA specs/h200.txtpb (openxla/xla@4336d12e): an H100 SXM with 4.8 TB/s HBM3e.
        _nvidia(
            "h200",
            description="NVIDIA H200 141GB HBM3e",
            compute_capability=(9, 0),
            core_count=132, fpus_per_core=128, clock_rate_ghz=1.98,
            memory_bandwidth_bytes_per_s=4_800_000_000_000,
            l2_cache_bytes=52_428_800,
            shared_memory_per_core_bytes=233_472,
            shared_memory_per_block_optin_bytes=232_448,
            threads_per_core_limit=2048,
            device_memory_bytes=151_397_597_184,
            peak_matmul_flops_per_s=_matrix_peaks(132, _hopper_rows(1.98)),
            pcie_bandwidth_bytes_per_s=34_359_738_368,
            nvlink_links=18,
            source="XLA specs/h200.txtpb @4336d12e (tensor-core rates included); interconnect @6b73c4c4",
        ),
        # XLA specs/v100.txtpb (openxla/xla@4336d12e).
        _nvidia(
            "v100",
            description="Tesla V100-SXM2-16GB",
            compute_capability=(7, 0),
            core_count=80, fpus_per_core=64, clock_rate_ghz=1.53,
            memory_bandwidth_bytes_per_s=898_048_000_000,
            l2_cache_bytes=6_291_456,
            shared_memory_per_core_bytes=98_304,
            shared_memory_per_block_optin_bytes=98_304,
            threads_per_core_limit=2048,
            device_memory_bytes=16_935_682_048,
            peak_matmul_flops_per_s=_matrix_peaks(80, _gv100_rows(1.53)),
            pcie_bandwidth_bytes_per_s=17_179_869_184,
            nvlink_links=6,
            source="XLA specs/v100.txtpb @4336d12e; tensor cores: V100 white paper",
        ),
        # XLA specs/a6000.txtpb (openxla/xla@4336d12e): the real card, GA102 at compute capability
        # 8.6 and 1.8 GHz.
        _nvidia(
            "rtx-a6000",
            description="NVIDIA RTX A6000",
            compute_capability=(8, 6),
            core_count=84, fpus_per_core=128, clock_rate_ghz=1.8,
            memory_bandwidth_bytes_per_s=768_096_000_000,
            l2_cache_bytes=6 * _MiB,
            shared_memory_per_core_bytes=100 * _KiB,
            shared_memory_per_block_optin_bytes=99 * _KiB,
            threads_per_core_limit=1536,
            device_memory_bytes=51_041_271_808,
            peak_matmul_flops_per_s=_matrix_peaks(84, _ga102_rows(1.8)),
            source="XLA specs/a6000.txtpb @4336d12e; tensor cores: GA102 white paper",
        ),
        # XLA's test device, TestGpuDeviceInfo::RTXA6000DeviceInfo() with its default
        # compute capability 8.9 (xla/service/gpu/gpu_device_info_for_tests.{h,cc},
        # openxla/xla@043f76a371792d440329c48dfcfb0e66edb5c977). This is the device of
        # gpu_performance_model_test.cc and of XLA's fusion tests, not the real card
        # (`rtx-a6000`: CC 8.6, 1.8 GHz). No sm_89 profile exists, so XLA's default
        # sm_86 table applies.
        _nvidia(
            "rtx-a6000-xla-test",
            description="NVIDIA RTX A6000 (XLA test device)",
            compute_capability=(8, 9),
            core_count=84, fpus_per_core=128, clock_rate_ghz=1.41,
            memory_bandwidth_bytes_per_s=768_096_000_000,
            l2_cache_bytes=6 * _MiB,
            shared_memory_per_core_bytes=100 * _KiB,
            shared_memory_per_block_optin_bytes=99 * _KiB,
            threads_per_core_limit=1536,
            device_memory_bytes=51_050_250_240,
            peak_matmul_flops_per_s=_matrix_peaks(84, _ga102_rows(1.41)),
            source="XLA TestGpuDeviceInfo::RTXA6000DeviceInfo (cc 8.9) @043f76a3; "
                   "tensor cores: GA102 rates at the test clock",
        ),
    ]
    presets += _blackwell_presets()
    return {spec.name: spec for spec in presets}


def _blackwell_presets() -> list[DeviceSpec]:
    """B200, GB200 and GB300: the GPUs of XLA's measured tables (`sm_100_B200`,
    `sm_100_GB200`, `sm_103`), numbers from XLA's spec files
    (openxla/xla@6b73c4c49eb0c5aee1963c1e34c7cc8ba92ac202)."""
    common = dict(
        fpus_per_core=128,
        shared_memory_per_core_bytes=233_472,
        shared_memory_per_block_optin_bytes=232_448,
        threads_per_core_limit=2048,
        nvlink_links=18,
    )
    return [
        # specs/b200.txtpb (name "NVIDIA B200").
        _nvidia(
            "b200",
            description="NVIDIA B200",
            compute_capability=(10, 0),
            core_count=148, clock_rate_ghz=1.965,
            memory_bandwidth_bytes_per_s=7_672_320_000_000,
            l2_cache_bytes=132_644_864,
            device_memory_bytes=191_514_411_008,
            pcie_bandwidth_bytes_per_s=68_719_476_736,
            peak_matmul_flops_per_s=_matrix_peaks(148, _blackwell_rows(1.8353101, 1.965)),
            source="XLA specs/b200.txtpb @6b73c4c4 (tensor-core rates included)",
            **common,
        ),
        # specs/gb200.txtpb (name "NVIDIA GB200").
        _nvidia(
            "gb200",
            description="NVIDIA GB200",
            compute_capability=(10, 0),
            core_count=152, clock_rate_ghz=2.062,
            memory_bandwidth_bytes_per_s=7_928_064_000_000,
            l2_cache_bytes=135_528_448,
            device_memory_bytes=197_897_748_480,
            pcie_bandwidth_bytes_per_s=2_147_483_648,
            peak_matmul_flops_per_s=_matrix_peaks(152, _blackwell_rows(1.9259081, 2.062)),
            source="XLA specs/gb200.txtpb @6b73c4c4 (tensor-core rates included)",
            **common,
        ),
        # specs/gb300.txtpb (name "NVIDIA GB300", compute capability 10.3; its
        # pcie_bandwidth is -1, i.e. unknown, kept as 0 here).
        _nvidia(
            "gb300",
            description="NVIDIA GB300",
            compute_capability=(10, 3),
            core_count=152, clock_rate_ghz=2.07,
            memory_bandwidth_bytes_per_s=7_928_064_000_000,
            l2_cache_bytes=135_528_448,
            device_memory_bytes=297_021_079_552,
            peak_matmul_flops_per_s=_matrix_peaks(152, _blackwell_rows(1.93338, 2.07)),
            source="XLA specs/gb300.txtpb @6b73c4c4 (tensor-core rates included)",
            **common,
        ),
    ]


PRESETS: dict[str, DeviceSpec] = _build_presets()
