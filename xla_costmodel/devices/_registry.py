"""Name -> DeviceSpec lookup: built-in presets, user-registered devices and `"host"`."""

from __future__ import annotations

from ._host import load_host
from ._presets import PRESETS
from ._spec import DeviceSpec

__all__ = ["device_names", "get_device", "register_device"]

HOST = "host"
_USER_DEVICES: dict[str, DeviceSpec] = {}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def device_names() -> tuple[str, ...]:
    """Every name `get_device` accepts: the presets, registered devices, then `"host"`."""
    return (*PRESETS, *_USER_DEVICES, HOST)


def get_device(
    device: str | DeviceSpec,
    *,
    remeasure: bool = False,
    fast: bool = False,
    progress: bool = True,
) -> DeviceSpec:
    """Look up a device by name.

    **Arguments:**

    - `device`: a preset name (`"a100-40gb"`, `"a100-80gb"`, `"h100-sxm"`, `"b200"`, `"gb200"`, `"gb300"`,
      `"h100-pcie"`, `"h200"`, `"v100"`, `"rtx-a6000"`, `"rtx-a6000-xla-test"`: XLA's test device), a name given to `register_device`,
      `"host"`, or a `DeviceSpec` (returned unchanged). Case and `_`/`-` do not matter.
    - `remeasure`, `fast`, `progress`: only for `"host"`, read here from its
      cache (`fast=True` accepts a fast-mode measurement). Measuring it, when
      there is no usable cache or `remeasure=True`, is the `measure` package's,
      a layer above: `xla_costmodel.get_device("host")` does that, with these
      arguments.

    **Returns:** the `DeviceSpec`.

    Raises `ValueError` for an unknown name (the message lists the valid ones),
    `HostCacheError` when the host cache file is unreadable, and `RuntimeError`
    for `"host"` without a usable measurement.
    """
    if isinstance(device, DeviceSpec):
        return device
    if not isinstance(device, str):
        raise TypeError(f"device must be a name or a DeviceSpec, got {type(device).__name__}")
    key = _normalise(device)
    if key == HOST:
        return load_host(remeasure=remeasure, fast=fast, progress=progress)
    spec = _USER_DEVICES.get(key) or PRESETS.get(key)
    if spec is None:
        raise ValueError(f"unknown device {device!r}; valid names: {', '.join(device_names())}")
    return spec


def register_device(spec: DeviceSpec, *, overwrite: bool = False) -> DeviceSpec:
    """Make `spec` available to `get_device(spec.name)`.

    **Arguments:**

    - `spec`: the device, e.g. `get_device("h100-sxm").replace(name="h100-700w", clock_rate_ghz=1.83)`.
    - `overwrite`: replace an earlier registration with the same name.

    **Returns:** `spec`. Raises `ValueError` if the name is a built-in preset or
    `"host"`, or is already registered and `overwrite` is false.
    """
    if not isinstance(spec, DeviceSpec):
        raise TypeError(f"register_device expects a DeviceSpec, got {type(spec).__name__}")
    key = _normalise(spec.name)
    if key == HOST or key in PRESETS:
        raise ValueError(f"{spec.name!r} is a built-in device name; register the spec under another name")
    if key in _USER_DEVICES and not overwrite:
        raise ValueError(f"a device named {spec.name!r} is already registered; pass overwrite=True to replace it")
    _USER_DEVICES[key] = spec
    return spec
