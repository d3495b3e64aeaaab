"""Devices: `DeviceSpec`, XLA-sourced GPU presets, XLA's per-op cycle tables, XLA's measured
GEMM and collective tables, and the measured host (measured by `xla_costmodel.measure.measure_host`,
cached here)."""

from ._host import HostCacheError as HostCacheError
from ._host import host_cache_path as host_cache_path
# This machine as a calibration records it, and how another machine's record differs from it.
from ._host import describe_machine as describe_machine
from ._host import machine_differences as machine_differences
from ._host import machine_record as machine_record
from ._op_profiles import DEFAULT_OP_CYCLES as DEFAULT_OP_CYCLES
from ._op_profiles import DEFAULT_OP_PROFILE as DEFAULT_OP_PROFILE
from ._op_profiles import load_op_profile as load_op_profile
from ._op_profiles import op_profile_name_for as op_profile_name_for
from ._op_profiles import op_profile_names as op_profile_names
from ._op_profiles import op_profile_source as op_profile_source
from ._presets import PRESETS as PRESETS
from ._presets import XLA_KERNEL_LAUNCH_OVERHEAD_S as XLA_KERNEL_LAUNCH_OVERHEAD_S
from ._registry import device_names as device_names
from ._registry import get_device as get_device
from ._registry import register_device as register_device
from ._spec import DeviceSpec as DeviceSpec
from ._target import GPU_TARGET_DNN_VERSION as GPU_TARGET_DNN_VERSION
from ._target import gpu_target_config as gpu_target_config
from ._xla_tables import collective_row_hlo as collective_row_hlo
from ._xla_tables import collective_table as collective_table
from ._xla_tables import gemm_table as gemm_table
from ._xla_tables import xla_table_key as xla_table_key
from ._xla_tables import xla_tables_source as xla_tables_source

__all__ = [
    "DEFAULT_OP_CYCLES",
    "DEFAULT_OP_PROFILE",
    "PRESETS",
    "XLA_KERNEL_LAUNCH_OVERHEAD_S",
    "DeviceSpec",
    "GPU_TARGET_DNN_VERSION",
    "HostCacheError",
    "collective_row_hlo",
    "collective_table",
    "describe_machine",
    "device_names",
    "gemm_table",
    "get_device",
    "gpu_target_config",
    "host_cache_path",
    "load_op_profile",
    "machine_differences",
    "machine_record",
    "op_profile_name_for",
    "op_profile_names",
    "op_profile_source",
    "register_device",
    "xla_table_key",
    "xla_tables_source",
]
