"""What the user may pass for a module, a device and a model, turned into values: the engine's part.

`simulate_fusion`, `search_fusion`, the fitted models and the front door
(`xla_costmodel.front`: `analyze`, `granularity`, ...) accept the same things:

- a module: an `HloModule`, the path of an HLO text file (`str` or
  `os.PathLike`), HLO text, or a function (jitted or not) with its example
  arguments, traced with `from_jax` (as XLA optimized it, or as lowered,
  unfused, for the fusion passes);
- a device: a `DeviceSpec` or a name for `get_device`; None is
  `DEFAULT_DEVICE`;
- a model: a `CostModel` or a name for `get_model`; None is `DEFAULT_MODEL`.

The defaults are one pair for the whole package: XLA's GPU model on an H100
(`DEFAULT_DEVICE`, `DEFAULT_MODEL`). What works on this machine's
measurements (`compare`, `calibrate`, `kernel_features`, scaling a model to
measured times) says `device="host"` in its own signature instead. The
`"host"` device is read from its cache here; measuring it when there is none
is the `measure` package's (`measure.resolve_device`), a layer above.

A model that prices only some kinds of device declares them
(`PricesDeviceKinds`); `check_prices_device` is the one place that refuses
the others (`xla-gpu` on a CPU).

Which module a device's kernels come from (XLA:GPU's compile here, or its
fusion simulated) is the front door's decision (`front._resolve`), since it
needs the compile and fusion packages above this one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._base import CostModel, HoldsModels, get_model

if TYPE_CHECKING:
    from ..devices import DeviceSpec
    from ..hlo import HloModule

__all__ = [
    "DEFAULT_DEVICE",
    "DEFAULT_MODEL",
    "BackendMismatchWarning",
    "GpuCompileFallbackWarning",
    "PricesDeviceKinds",
    "check_prices_device",
    "resolve_device",
    "resolve_inputs",
    "resolve_model",
    "resolve_module",
]

DEFAULT_DEVICE = "h100-sxm"
DEFAULT_MODEL = "xla-gpu"


# What the front door warns when the module it prices is not the one asked for (`front._resolve`).
class BackendMismatchWarning(UserWarning):
    """A module XLA optimized for one kind of backend is priced on a device of another kind."""


class GpuCompileFallbackWarning(UserWarning):
    """XLA:GPU could not compile a function for a GPU on this machine (the message names XLA's error), so
    its fusion was simulated from the lowered module instead (`front.SIMULATED_FROM_LOWERED`)."""


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
