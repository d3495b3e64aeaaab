"""A GPU preset as XLA:GPU's compile target: the `GpuTargetConfigProto` text made from its `DeviceSpec`.

XLA:GPU compiles without a GPU when it is handed a target description
(`stream_executor.GpuTargetConfigProto`, the format of XLA's
`xla/backends/gpu/target_config/specs/*.txtpb`): jax's CUDA plugin makes
compile-only devices from it. This module is the one place that turns the
facts of a `DeviceSpec` into that text, so that the kernels XLA builds and the
prices the models put on them come from the same numbers.

Only the fields that the proto of every jaxlib this project supports knows
are written; XLA's newest spec files have more (`scalar_unit_description`,
`matrix_unit_description`, `mem_clock_ghz`, ...) that older protos refuse.
"""

from __future__ import annotations

from ._spec import DeviceSpec

__all__ = ["GPU_TARGET_DNN_VERSION", "gpu_target_config"]

#: The cuDNN version the target claims (`dnn_version_info`). It is a fact about the software on the
#: GPU machine, not about the GPU: XLA reads it to decide which cuDNN fusions it may emit. 9.10 is the
#: version XLA's own spec files of the current GPUs carry, and jax's CUDA 12 wheels require cuDNN 9.
GPU_TARGET_DNN_VERSION = (9, 10, 0)


def _accelerated_features(compute_capability: tuple[int, int]) -> bool:
    """Whether XLA targets the architecture-specific variant (`sm_90a`, `sm_100a`, ...): every
    NVIDIA GPU from Hopper on has one, and XLA's spec files of Hopper and Blackwell parts say
    `feature_extension: ACCELERATED_FEATURES` (Triton's wgmma GEMMs need it)."""
    return compute_capability[0] >= 9


def gpu_target_config(device: DeviceSpec) -> str:
    """XLA:GPU's target description of `device`, as `GpuTargetConfigProto` text.

    **Arguments:** `device`: a GPU `DeviceSpec` with a compute capability
    (every GPU preset has one).

    **Returns:** the text that `jax.experimental.topologies.get_topology_desc(
    ..., "cuda", target_config=TEXT)` turns into a compile-only device.

    **Raises:** `ValueError` for a CPU, or a GPU without a compute capability
    or with a fact XLA needs left at 0 (say which).
    """
    if not isinstance(device, DeviceSpec):
        raise TypeError(f"gpu_target_config expects a DeviceSpec, got {type(device).__name__}")
    if device.kind != "gpu":
        raise ValueError(f"device '{device.name}' is a {device.kind}: XLA:GPU compiles only for a GPU")
    if device.compute_capability is None:
        raise ValueError(f"device '{device.name}' has no compute_capability: XLA:GPU needs it to compile")
    needed = ("warp_size", "threads_per_block_limit", "threads_per_core_limit", "shared_memory_per_block_bytes",
              "shared_memory_per_core_bytes", "shared_memory_per_block_optin_bytes", "registers_per_core_limit",
              "registers_per_block_limit", "device_memory_bytes")
    missing = [name for name in needed if not getattr(device, name)]
    if missing or not all(device.block_dim_limit):
        raise ValueError(f"device '{device.name}' lacks what XLA:GPU needs to compile: "
                         f"{', '.join(missing + ([] if all(device.block_dim_limit) else ['block_dim_limit']))}")
    major, minor = device.compute_capability
    x, y, z = device.block_dim_limit
    extension = ("    feature_extension: ACCELERATED_FEATURES\n"
                 if _accelerated_features(device.compute_capability) else "")
    lines = [
        "gpu_device_info {",
        f"  threads_per_block_limit: {device.threads_per_block_limit}",
        f"  threads_per_warp: {device.warp_size}",
        f"  shared_memory_per_block: {device.shared_memory_per_block_bytes}",
        f"  shared_memory_per_core: {device.shared_memory_per_core_bytes}",
        f"  threads_per_core_limit: {device.threads_per_core_limit}",
        f"  core_count: {device.core_count}",
        f"  fpus_per_core: {device.fpus_per_core}",
        f"  block_dim_limit_x: {x}",
        f"  block_dim_limit_y: {y}",
        f"  block_dim_limit_z: {z}",
        f"  memory_bandwidth: {round(device.memory_bandwidth_bytes_per_s)}",
        f"  l2_cache_size: {device.l2_cache_bytes}",
        f"  clock_rate_ghz: {device.clock_rate_ghz!r}",
        f"  device_memory_size: {device.device_memory_bytes}",
        f"  shared_memory_per_block_optin: {device.shared_memory_per_block_optin_bytes}",
        f"  cuda_compute_capability {{\n    major: {major}\n    minor: {minor}\n{extension}  }}",
        f"  registers_per_core_limit: {device.registers_per_core_limit}",
        f"  registers_per_block_limit: {device.registers_per_block_limit}",
    ]
    if device.pcie_bandwidth_bytes_per_s:
        lines.append(f"  pcie_bandwidth: {round(device.pcie_bandwidth_bytes_per_s)}")
    if device.nvlink_links:
        lines.append(f"  device_interconnect_info {{\n    active_links: {device.nvlink_links}\n  }}")
    description = _quoted(device.description or device.name)
    lines.append(f"  name: {description}")
    lines.append("}")
    dnn_major, dnn_minor, dnn_patch = GPU_TARGET_DNN_VERSION
    lines += [
        'platform_name: "CUDA"',
        f"dnn_version_info {{\n  major: {dnn_major}\n  minor: {dnn_minor}\n  patch: {dnn_patch}\n}}",
        f"device_description_str: {description}",
    ]
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    """A text-format string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
