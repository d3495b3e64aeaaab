"""`granularity`: what if a kernel ran with other launch dimensions or tiles, on another GPU? (The rows:
`models.kernel_configurations`, whose docstring gives the candidates and the columns.)"""

from __future__ import annotations

import pandas as pd

from ..measure import resolve_device
from ..models import DEFAULT_DEVICE, DEFAULT_MODEL, GranularityError, kernel_configurations, resolve_model
from ._resolve import resolve_priced_module

__all__ = ["granularity"]


def granularity(module_or_fn, kernel, *args, device=DEFAULT_DEVICE, model=DEFAULT_MODEL, tiled: bool | None = None,
                **kwargs) -> pd.DataFrame:
    """Every candidate launch configuration of one kernel, priced (see the module docstring).

    **Arguments:**

    - `module_or_fn`: an `HloModule`, an HLO file or text, or a function to
      trace with `*args` / `**kwargs` (as for `analyze`: `models.resolve_inputs`).
    - `kernel`: the kernel's instruction name (as `analyze` lists it) or the
      instruction itself.
    - `device`: a GPU `DeviceSpec` or name; `model`: a model or name that
      prices launch configurations (`xla-gpu` by default; tiled fusions use
      XLA's tiled model with its rules).
    - `tiled`: None (a Triton fusion is tiled, any other kernel gets launch
      configurations), True (tile any fusion), False (launch configurations).

    **Returns:** a DataFrame sorted by `time_s`, one row per configuration
    (columns in the module docstring); `attrs` has `kernel`, `device`,
    `model`, `kind` (`"launch"` or `"tiled"`) and `emitter`.

    **Raises:** `GranularityError` (a `ValueError`) naming the kernel when it
    cannot be analysed; `ValueError` for an unknown device or model.
    """
    dev = resolve_device(device)
    if dev.kind != "gpu":
        raise GranularityError(f"granularity prices GPU launch configurations; device '{dev.name}' is a {dev.kind}")
    cost_model = resolve_model(model)
    module = resolve_priced_module("granularity", module_or_fn, args, kwargs, dev, cost_model).module
    return kernel_configurations(module, kernel, dev, cost_model, tiled=tiled)
