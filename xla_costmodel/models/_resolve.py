"""What the user may pass for a module, a device and a model, resolved in one place.

`analyze`, `simulate_fusion`, `search_fusion`, the fitted models and the
command line accept the same things:

- a module: an `HloModule`, the path of an HLO text file (`str` or
  `os.PathLike`), HLO text, or a function (jitted or not) with its example
  arguments, traced with `from_jax` (as XLA optimized it for `analyze`; as
  lowered, unfused, for the fusion passes);
- a device: a `DeviceSpec` or a name for `get_device`; None is
  `DEFAULT_DEVICE`;
- a model: a `CostModel` or a name for `get_model`; None is `DEFAULT_MODEL`.

The defaults are one pair for the whole package: XLA's GPU model on an H100
(`DEFAULT_DEVICE`, `DEFAULT_MODEL`). What works on this machine's
measurements (`compare`, `calibrate`, `kernel_features`, scaling a model to
measured times) says `device="host"` in its own signature instead.

A model that prices only some kinds of device declares them
(`PricesDeviceKinds`); `check_prices_device` is the one place that refuses
the others (`xla-gpu` on a CPU).

Which module a device's kernels come from is decided here too
(`resolve_priced_module`): a function priced on a GPU while jax compiles for
the CPU is compiled by XLA:GPU itself for that GPU where jax's CUDA plugin is
installed (`gpu_compile`), and otherwise gets XLA:GPU's fusion simulated from
its lowered module (the CPU's kernels would be priced otherwise); a module
optimized for another kind of device is priced as given, with a
`BackendMismatchWarning`.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

from ._base import CostModel, HoldsModels, get_model

if TYPE_CHECKING:
    from ..devices import DeviceSpec
    from ..hlo import HloModule

__all__ = [
    "DEFAULT_DEVICE",
    "DEFAULT_MODEL",
    "BackendMismatchWarning",
    "GpuCompileFallbackWarning",
    "PricedModule",
    "PricesDeviceKinds",
    "check_prices_device",
    "register_gpu_fusion",
    "resolve_priced_module",
    "resolve_device",
    "resolve_inputs",
    "resolve_model",
    "resolve_module",
]

DEFAULT_DEVICE = "h100-sxm"
DEFAULT_MODEL = "xla-gpu"


@runtime_checkable
class PricesDeviceKinds(Protocol):
    """A model that prices only some kinds of device (`DeviceSpec.kind`: "gpu", "cpu")."""

    name: str
    device_kinds: tuple[str, ...]


def resolve_device(device: "str | DeviceSpec | None" = None) -> "DeviceSpec":
    """The `DeviceSpec` of `device`: a spec, a name for `get_device`, or None (`DEFAULT_DEVICE`).

    **Raises:** `ValueError` for an unknown name (listing the valid ones), `TypeError` for anything else.
    """
    from ..devices import get_device

    return get_device(DEFAULT_DEVICE if device is None else device)


def resolve_model(model: "str | CostModel | None" = None, **params: Any) -> CostModel:
    """The cost model `model` names (`get_model`), or `model` itself; None is `DEFAULT_MODEL`."""
    return get_model(DEFAULT_MODEL if model is None else model, **params)


def check_prices_device(model: CostModel, device: "DeviceSpec") -> None:
    """Refuse a device the model does not price (it declares `PricesDeviceKinds`).

    **Raises:** `ValueError`, e.g. "the xla-gpu model prices GPU kernels;
    device 'host' is a cpu (use the 'roofline' model for it)".
    """
    for part in _model_parts(model):
        if isinstance(part, PricesDeviceKinds) and device.kind not in part.device_kinds:
            kinds = " or ".join(k.upper() for k in part.device_kinds)
            inside = f", and '{model.name}' holds it" if part is not model else ""
            raise ValueError(
                f"the {part.name} model prices {kinds} kernels; device '{device.name}' is a {device.kind}{inside} "
                f"(use the 'roofline' model for it)"
            )


def _model_parts(model):
    """`model` and every model it holds (`HoldsModels`: a combination, a scaled model), at any depth:
    a combination prices a device only where each of them does."""
    yield model
    for part in (model.held_models if isinstance(model, HoldsModels) else ()):
        yield from _model_parts(part)


def resolve_module(source: Any, args: tuple = (), kwargs: dict | None = None, *, caller: str = "analyze",
                   optimized: bool = True) -> "HloModule":
    """The `HloModule` of `source` (see the module docstring).

    **Arguments:** `source`; `args`, `kwargs`: a function's example arguments
    (only for a function); `caller`: named in errors; `optimized`: trace a
    function as XLA optimized it (True) or as lowered (False).

    **Raises:** `TypeError` for arguments that are not for a function, or a
    `source` of another type; `FileNotFoundError` for a string that is
    neither a file nor HLO text; `HloParseError` for bad HLO.
    """
    from ..hlo import HloModule, from_jax, load_hlo, parse_hlo

    kwargs = kwargs or {}
    if isinstance(source, HloModule):
        if args or kwargs:
            raise TypeError(f"{caller}(module, ...): extra arguments are only for a function to trace")
        return source
    if isinstance(source, (str, os.PathLike)):
        if args or kwargs:
            raise TypeError(f"{caller}(path_or_text, ...): extra arguments are only for a function to trace")
        text = str(source)
        if isinstance(source, os.PathLike) or ("\n" not in text and Path(text).exists()):
            return load_hlo(text)
        if "HloModule" in text:
            return parse_hlo(text)
        raise FileNotFoundError(f"{text}: no such file (and not HLO text)")
    if callable(source):
        return from_jax(source, *args, optimized=optimized, **kwargs)
    raise TypeError(
        f"{caller} expects an HloModule, an HLO file or text, or a function to trace; got {type(source).__name__}"
    )


def resolve_inputs(caller: str, source: Any, args: tuple = (), kwargs: dict | None = None, *,
                   device: Any = None, model: Any = None,
                   optimized: bool = True) -> tuple["HloModule", "DeviceSpec", CostModel]:
    """`(module, DeviceSpec, CostModel)` from what a caller was given, device checked against the model.

    Device and model are resolved (and checked) before a function is traced,
    so that a bad name fails at once.
    """
    dev = resolve_device(device)
    cost_model = resolve_model(model)
    check_prices_device(cost_model, dev)
    return resolve_module(source, args, kwargs, caller=caller, optimized=optimized), dev, cost_model


# ---------------------------------------------------------------------------
# The module a device's kernels come from


class BackendMismatchWarning(UserWarning):
    """A module XLA optimized for one kind of backend is priced on a device of another kind."""


class GpuCompileFallbackWarning(UserWarning):
    """XLA:GPU could not compile a function for a GPU on this machine (the message names XLA's error), so
    its fusion was simulated from the lowered module instead (`SIMULATED_FROM_LOWERED`)."""


#: `KernelTable.priced_module` when a function's module is XLA:GPU's fusion simulated here.
SIMULATED_FROM_LOWERED = "XLA:GPU fusion simulated from the lowered module"
#: ... for a program partitioned over several devices (the lowered module is not yet partitioned).
SIMULATED_FROM_PARTITIONED = ("XLA:GPU fusion simulated from the partitioned module XLA:{backend} compiled, "
                              "its fusions undone")

#: ... when XLA:GPU could have compiled it here, had jax's CUDA plugin been installed or registered:
#: the sentence after it says why not and what to install or set.
SIMULATED_WITHOUT_PLUGIN = SIMULATED_FROM_LOWERED + " ({reason})"

_GPU_BACKENDS = ("gpu", "cuda", "rocm")

# What `fusion` registers when imported: (unfused module, device, model) -> the fused module.
_GPU_FUSION: list[Callable[["HloModule", "DeviceSpec", CostModel], "HloModule"]] = []


def register_gpu_fusion(fuse: Callable[["HloModule", "DeviceSpec", CostModel], "HloModule"]) -> None:
    """Make `fuse` what prices a function on a GPU when jax compiles for another backend (`fusion` registers
    its priority-fusion simulation)."""
    _GPU_FUSION[:] = [fuse]


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
    from ..analysis._frontend import compiled_for
    from ..hlo import HloModule, from_jax

    if callable(source) and not isinstance(source, (HloModule, str, os.PathLike)):
        backend = _jax_backend()
        if dev.kind == "gpu" and backend not in _GPU_BACKENDS:
            compiled, why_not = _compiled_by_xla_gpu(source, args, kwargs, dev)
            if compiled is not None:
                return compiled
            if not _GPU_FUSION:  # `fusion` registers it; importing `xla_costmodel` imports that
                raise RuntimeError("pricing a function on a GPU from XLA:CPU needs xla_costmodel.fusion "
                                   "(import xla_costmodel)")
            module = from_jax(source, *args, optimized=False, **(kwargs or {}))
            description = SIMULATED_WITHOUT_PLUGIN.format(reason=why_not) if why_not else SIMULATED_FROM_LOWERED
            if _may_be_partitioned(module):
                compiled = from_jax(source, *args, optimized=True, **(kwargs or {}))
                if _partitions(compiled) > 1:
                    from ..hlo._edit import inline_fusions

                    module = inline_fusions(compiled, copy=False)
                    description = SIMULATED_FROM_PARTITIONED.format(backend=backend.upper())
            return PricedModule(_GPU_FUSION[0](module, dev, cost_model), description)
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
    from ._autotune import autotune_gemms

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
