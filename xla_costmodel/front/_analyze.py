"""`analyze`: every kernel of a module (or a jitted function) priced by a cost model, at the front door.

The device and model are resolved once here (`resolve_device_and_model`), the
module whose kernels that device runs is found (`resolve_priced_module`), and
the engine prices it (`models.price_module`).
"""

from __future__ import annotations

from ..models import DEFAULT_DEVICE, DEFAULT_MODEL, KernelTable, price_module
from ._resolve import resolve_device_and_model, resolve_priced_module

__all__ = ["analyze"]


def analyze(
    module_or_fn,
    *args,
    device=DEFAULT_DEVICE,
    model=DEFAULT_MODEL,
    unknown_trip_count: int = 1,
    trip_counts: dict | None = None,
    **kwargs,
) -> KernelTable:
    """Price every kernel of a module with a cost model.

    **Arguments:**

    - `module_or_fn`: an `HloModule`, the path of an HLO text file, HLO text,
      or a function (jitted or not) to trace with `*args` / `**kwargs`: its
      module as XLA optimized it for the default backend (`from_jax`), or,
      on a GPU device while jax compiles for the CPU, XLA:GPU's priority
      fusion simulated from its lowered module (`simulate_fusion`), since
      XLA:CPU's kernels are not the ones a GPU runs. A module XLA optimized
      for another kind of device than `device` is priced as given, with a
      `BackendMismatchWarning`; `KernelTable.priced_module` says which
      (`front._resolve.resolve_priced_module`).
    - `device`: a `DeviceSpec` or a name for `get_device` (default
      `DEFAULT_DEVICE`, `"h100-sxm"`: see `models.resolve_inputs`).
    - `model`: a cost model or a name for `get_model` (default
      `DEFAULT_MODEL`, `"xla-gpu"`).
    - `unknown_trip_count`: trip count assumed for a `while` loop whose count is
      not known (neither `known_trip_count` in its backend_config nor a
      recognisable induction variable); such rows get `executions_known=False`.
      Branches of a `conditional` are assumed equally likely. When any count
      is assumed, `KernelTable.total_is_lower_bound` is True and the summary
      says so.
    - `trip_counts`: `{while instruction name: trip count}`, the counts you
      know (from the program, or a measurement): they replace what `analyze`
      would read or assume for those loops, and their rows count as known.

    **Returns:** a `KernelTable` (a `pandas.DataFrame` subclass; see its
    columns there), one row per kernel in execution order, free instructions
    included with bound `"free"`. Kernels the model cannot price have
    `priced=False` and NaN times, and one `CostModelWarning` names them.

    **Raises:** `ValueError` for an unknown device or model, a model that
    cannot price the device (`xla-gpu` on the host CPU), or `trip_counts`
    naming no `while` loop of the priced module or giving a count that is
    not a whole number >= 0.
    """
    dev, cost_model = resolve_device_and_model(device, model)
    priced = resolve_priced_module("analyze", module_or_fn, args, kwargs, dev, cost_model)
    table = price_module(priced.module, dev, cost_model, unknown_trip_count=unknown_trip_count,
                         trip_counts=trip_counts, warn_stacklevel=3)
    table.priced_module = priced.description
    table.gemm_configs = priced.gemm_configs
    return table
