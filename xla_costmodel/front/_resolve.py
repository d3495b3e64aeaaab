"""What the user gave, resolved once at the front door: a device, a model, and the module a device's kernels
come from.

`analyze`, `granularity`, `evaluate` and `program_time` take what the
engine's entry points take (`models.resolve_inputs`: a module, an HLO file or
text, or a function; a device; a model), and resolve it here, once, into one
`DeviceSpec` and one `CostModel` that they pass down. The `"host"` device is
measured when this machine has no usable measurement (`measure.resolve_device`).

Which module a device's kernels come from is decided here too
(`resolve_priced_module`): a function priced on a GPU while jax compiles for
the CPU is compiled by XLA:GPU itself for that GPU where jax's CUDA plugin is
installed (`gpu_compile`), and otherwise gets XLA:GPU's fusion simulated from
its lowered module (`fusion`: the CPU's kernels would be priced otherwise); a
module optimized for another kind of device is priced as given, with a
`BackendMismatchWarning`.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..measure import host_device, resolve_device
from ..models import (BackendMismatchWarning, CostModel, GpuCompileFallbackWarning, check_prices_device,
                     resolve_model, resolve_module)

if TYPE_CHECKING:
    from ..devices import DeviceSpec
    from ..hlo import HloModule

__all__ = [
    "SIMULATED_FROM_LOWERED",
    "PricedModule",
    "get_device",
    "resolve_device_and_model",
    "resolve_priced_module",
]


def get_device(device: "str | DeviceSpec", *, remeasure: bool = False, fast: bool = False,
               progress: bool = True) -> "DeviceSpec":
    """Look up a device by name, measuring this machine when it is `"host"` and has no usable measurement.

    **Arguments:**

    - `device`: a preset name (`xla_costmodel.devices.device_names()`: `"h100-sxm"`, `"a100-80gb"`, ...),
      a name given to `register_device`, `"host"`, or a `DeviceSpec` (returned unchanged). Case and `_`/`-`
      do not matter.
    - `remeasure`, `fast`, `progress`: only for `"host"`. The host is measured once per machine and cached
      (see `measure_host`); `remeasure=True` measures again and overwrites the cache, `fast=True` uses the
      quick, rougher benchmark, `progress` shows it running.

    **Returns:** the `DeviceSpec`.

    Raises `ValueError` for an unknown name (the message lists the valid ones) and `HostCacheError` when
    the host cache file is unreadable.
    """
    from ..devices import get_device as look_up

    if isinstance(device, str) and device.strip().lower() == "host":
        return host_device(remeasure=remeasure, fast=fast, progress=progress)
    return look_up(device)


def resolve_device_and_model(device: Any = None, model: Any = None) -> tuple["DeviceSpec", CostModel]:
    """The one `DeviceSpec` and `CostModel` a front-door call passes down: names looked up (None: the
    defaults, `models.DEFAULT_DEVICE` and `models.DEFAULT_MODEL`), the host measured if it must be, and
    the device checked against the model (`models.check_prices_device`).

    **Raises:** `ValueError` for an unknown device or model, or a model that does not price the device.
    """
    dev = resolve_device(device)
    cost_model = resolve_model(model)
    check_prices_device(cost_model, dev)
    return dev, cost_model


# ---------------------------------------------------------------------------
# The module a device's kernels come from


#: `KernelTable.priced_module` when a function's module is XLA:GPU's fusion simulated here.
SIMULATED_FROM_LOWERED = "XLA:GPU fusion simulated from the lowered module"
#: ... for a program partitioned over several devices (the lowered module is not yet partitioned).
SIMULATED_FROM_PARTITIONED = ("XLA:GPU fusion simulated from the partitioned module XLA:{backend} compiled, "
                              "its fusions undone")

#: ... when XLA:GPU could have compiled it here, had jax's CUDA plugin been installed or registered:
#: the sentence after it says why not and what to install or set.
SIMULATED_WITHOUT_PLUGIN = SIMULATED_FROM_LOWERED + " ({reason})"

_GPU_BACKENDS = ("gpu", "cuda", "rocm")


@dataclass(frozen=True)
class PricedModule:
    """The module whose kernels a device is priced on, what it is (`KernelTable.priced_module`), and, for a
    module XLA:GPU compiled here without a GPU, the GEMM configurations chosen for it
    (`KernelTable.gemm_configs`, `autotune_gemms`'s `choices`; None otherwise)."""

    module: "HloModule"
    description: str
    gemm_configs: Any = None


def resolve_priced_module(caller: str, source: Any, args: tuple, kwargs: dict | None, dev: "DeviceSpec",
                          cost_model: CostModel) -> PricedModule:
    """The module whose kernels `dev` is priced on: what `analyze` and `granularity` price.

    - A function, on a device of the kind jax compiles for: the module XLA
      compiled (`from_jax`).
    - A function, on a GPU while jax compiles for another backend (XLA:CPU),
      where jax's CUDA plugin is installed: XLA:GPU's own module, compiled
      here for `dev`'s target (`gpu_compile.compile_for_gpu`; "XLA:GPU
      compiled here (jax X.Y.Z)"). If XLA:GPU fails, a
      `GpuCompileFallbackWarning` names its error and the simulation below
      is priced instead.
    - A function, on a GPU while jax compiles for another backend, without
      the plugin: its kernels would be XLA:CPU's fusion decisions (YNNPACK library
      fusions, ...), not XLA:GPU's. So the lowered, unfused module goes
      through the project's priority fusion for `dev` and `cost_model` (what
      `simulate_fusion` does) and its fused kernels are priced
      (`SIMULATED_FROM_LOWERED`, with one note naming the extra that lets
      XLA:GPU compile here). A program partitioned over several devices
      starts instead from the module XLA compiled, partitioned (the lowered
      one has no collectives yet), with its fusions undone
      (`SIMULATED_FROM_PARTITIONED`).
    - A module, file or text: as given. When it shows the marks of XLA's
      optimization for another kind of device than `dev`
      (`analysis._frontend.compiled_for`: XLA:CPU's library fusions priced on
      a GPU, say), a `BackendMismatchWarning` says so: the result prices
      that backend's kernels on `dev`, which is a question one may ask, but
      not the kernels `dev` would run.
    """
    from ..analysis import compiled_for
    from ..fusion import simulated_gpu_kernels
    from ..hlo import HloModule, from_jax

    if callable(source) and not isinstance(source, (HloModule, str, os.PathLike)):
        backend = _jax_backend()
        if dev.kind == "gpu" and backend not in _GPU_BACKENDS:
            compiled, why_not = _compiled_by_xla_gpu(source, args, kwargs, dev)
            if compiled is not None:
                return compiled
            module = from_jax(source, *args, optimized=False, **(kwargs or {}))
            description = SIMULATED_WITHOUT_PLUGIN.format(reason=why_not) if why_not else SIMULATED_FROM_LOWERED
            if _may_be_partitioned(module):
                compiled = from_jax(source, *args, optimized=True, **(kwargs or {}))
                if _partitions(compiled) > 1:
                    from ..hlo import inline_fusions

                    module = inline_fusions(compiled, copy=False)
                    description = SIMULATED_FROM_PARTITIONED.format(backend=backend.upper())
            return PricedModule(simulated_gpu_kernels(module, dev, cost_model), description)
        module = resolve_module(source, args, kwargs, caller=caller)
        return PricedModule(module, f"the module XLA:{backend.upper()} compiled")
    module = resolve_module(source, args, kwargs, caller=caller)
    found = compiled_for(module)
    if found is not None and found[0] != dev.kind:
        kind, evidence = found
        warnings.warn(
            f"module '{module.name}' was optimized by XLA:{kind.upper()} ({evidence}); on '{dev.name}', a "
            f"{dev.kind}, this prices XLA:{kind.upper()}'s kernels, not the ones XLA would compile for it"
            + ("; for XLA:GPU's kernels pass the function itself, or its unoptimized module to simulate_fusion"
               if dev.kind == "gpu" else ""),
            BackendMismatchWarning,
            stacklevel=3,
        )
        return PricedModule(module, f"the module as given, optimized by XLA:{kind.upper()}")
    return PricedModule(module, "the module as given")


def _compiled_by_xla_gpu(fn, args: tuple, kwargs: dict | None, dev: "DeviceSpec"):
    """`(PricedModule, None)`: `fn`'s module as XLA:GPU compiled it here for `dev` (`gpu_compile`);
    `(None, reason)` where jax's CUDA plugin cannot compile here (the reason names the extra to install);
    `(None, None)` where this path does not apply (a program over several devices, which the simulation
    partitions) or XLA:GPU failed (then a `GpuCompileFallbackWarning` names XLA's error)."""
    from ..gpu_compile import GpuCompileError, compile_for_gpu, gpu_compile_unavailable_reason

    if _over_several_devices(args, kwargs):
        return None, None
    reason = gpu_compile_unavailable_reason()
    if reason is not None:
        return None, reason
    try:
        result = compile_for_gpu(fn, *args, device=dev, **(kwargs or {}))
    except GpuCompileError as exc:
        warnings.warn(f"{str(exc).strip().splitlines()[0].rstrip('.')}; pricing XLA:GPU's fusion simulated from the "
                      f"lowered module instead", GpuCompileFallbackWarning, stacklevel=4)
        return None, None
    module, notes, choices = _as_the_gpu_would_run(result.module, dev)
    description = result.compiled_by + "".join(f"; {note}" for note in notes)
    return PricedModule(module, description, gemm_configs=choices), None


def _as_the_gpu_would_run(module: "HloModule", dev: "DeviceSpec") -> tuple["HloModule", tuple[str, ...], Any]:
    """The deviceless module as the GPU run would have it, notes on what changed, and the GEMM choices.

    Without a GPU, XLA cannot autotune, so its Triton GEMM fusions keep default configurations: each is
    set to the fastest configuration of XLA's search space under XLA's dot-fusion model
    (`autotune_gemms`, as XLA's cuBLASLt backend estimates). Sorts that a GPU run would send to CUB are
    priced as CUB by the `xla-gpu` model itself (it decides as `sort_rewriter` does), so they need
    nothing here. The choices (`AutotunedModule.choices`) become `KernelTable.gemm_configs`.
    """
    from ..models import autotune_gemms

    tuned = autotune_gemms(module, dev)
    choices = tuned.choices
    retuned = 0 if choices is None or len(choices) == 0 or "config_after" not in choices else int(
        (choices["kind"].eq("triton") & choices["config_after"].notna()
         & choices["config_after"].ne(choices["config_before"])).sum())
    notes = ((f"{retuned} GEMM fusion configuration{'s' if retuned != 1 else ''} chosen as autotuning on the GPU "
              f"would (the fastest of XLA's search space under its dot-fusion model)",)
             if retuned else ())
    return tuned.module, notes, choices


def _over_several_devices(args: tuple, kwargs: dict | None) -> bool:
    """Whether an argument is placed on several devices (a partitioned program)."""
    import jax

    for leaf in jax.tree_util.tree_leaves((args, kwargs or {})):
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None and len(getattr(sharding, "device_set", ())) > 1:
            return True
    return False


def _jax_backend() -> str:
    from .._quiet_jax import start_backends_quietly

    start_backends_quietly()
    import jax

    return jax.default_backend()


def _may_be_partitioned(lowered: "HloModule") -> bool:
    """Whether a lowered module carries shardings (then only its compiled module says how many partitions)."""
    if _partitions(lowered) > 1 or "sdy.mesh" in lowered.header_attributes.get("frontend_attributes", ""):
        return True
    return any(i.has_attribute("sharding") for _, i in lowered.instructions())


def _partitions(module: "HloModule") -> int:
    try:
        return int(module.header_attributes.get("num_partitions", 1) or 1)
    except (TypeError, ValueError):
        return 1
