"""Devices: `DeviceSpec`, XLA-sourced GPU presets, XLA's per-op cycle tables, and the measured host
(measured by `xla_costmodel.measure.measure_host`, cached here)."""

from ._host import HostCacheError as HostCacheError
from ._host import host_cache_path as host_cache_path
from ._op_profiles import DEFAULT_OP_CYCLES as DEFAULT_OP_CYCLES
from ._op_profiles import DEFAULT_OP_PROFILE as DEFAULT_OP_PROFILE
from ._op_profiles import load_op_profile as load_op_profile
from ._op_profiles import op_profile_name_for as op_profile_name_for
from ._op_profiles import op_profile_names as op_profile_names
from ._op_profiles import op_profile_source as op_profile_source
from ._presets import XLA_KERNEL_LAUNCH_OVERHEAD_S as XLA_KERNEL_LAUNCH_OVERHEAD_S
from ._registry import device_names as device_names
from ._registry import get_device as get_device
from ._registry import register_device as register_device
from ._spec import DeviceSpec as DeviceSpec

__all__ = [
    "DEFAULT_OP_CYCLES",
    "DEFAULT_OP_PROFILE",
    "XLA_KERNEL_LAUNCH_OVERHEAD_S",
    "DeviceSpec",
    "HostCacheError",
    "device_names",
    "get_device",
    "host_cache_path",
    "load_op_profile",
    "op_profile_name_for",
    "op_profile_names",
    "op_profile_source",
    "register_device",
]
