"""`kernel_configurations` (under the front door's `granularity`): what if a kernel ran with other launch dimensions or tiles, on another GPU?

For one kernel of a module, one row per candidate launch configuration,
priced by a cost model, with XLA's own choice and the fastest marked:

- **Loop, reduction, transpose and concatenate emitters** (XLA's legacy
  emitters): threads per block in {32, 64, ..., 1024} (within the device's
  limit) x unroll / vectorization factor in {1, 2, 4, 8}; the grid is the
  kernel's work divided among the threads, `blocks = ceil(work / (threads x
  unroll))` (work: the elements of the root for the loop-style emitters, of
  the reduced input for a reduction). XLA's own launch dimensions
  (`models._launch.launch_dimensions`, `LaunchDimensions`) are a row of their
  own. Priced by a model that `PricesLaunchConfigurations` (`xla-gpu`,
  `xla-gpu-tables`): XLA's model charges few blocks through
  `min(blocks, SMs)` active cores and its per-block bandwidth cap, few
  threads through `min(threads, FPUs per SM)`.
- **Tiled (Triton) fusions**: every valid output tiling of XLA's tiled
  performance model (`models._tiled.best_tilings`), warps from XLA's
  estimate; XLA's choice is the fusion's `block_level_fusion_config` when it
  has one, else the best tiling of XLA's search (which is the same model).
  `tiled=True` asks for this analysis on any fusion ("what if it were a
  Triton fusion").

Columns: `config` (a readable label), `threads_per_block`, `unroll` or
`tile`, `num_warps`, `blocks`, `waves` (blocks over the device's resident
blocks: SMs x blocks per SM by thread count), `occupancy` (resident threads
per SM over the SM's limit), `time_s` (one launch, launch overhead included),
`compute_s`, `memory_s`, `bound`, `xla_choice`, `best`.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import pandas as pd

from ._base import KernelEstimate, dominant_bound
from ..analysis.emission import emitter_kind, warp_size
from ..analysis.shapes import elements, first_array
from ._launch import LaunchDimensions, launch_dimensions

__all__ = ["GranularityError", "PricesLaunchConfigurations", "kernel_configurations"]

THREADS = (32, 64, 128, 256, 512, 1024)
UNROLLS = (1, 2, 4, 8)
_LOOP_EMITTERS = ("loop", "reduction", "transpose", "concatenate")


class GranularityError(ValueError):
    """The kernel cannot be analysed (not found, no launch configuration to vary, unsupported model)."""


@runtime_checkable
class PricesLaunchConfigurations(Protocol):
    """A cost model that prices a kernel under launch dimensions other than XLA's."""

    name: str

    def estimate_with_launch(self, kernel, device, launch: LaunchDimensions) -> KernelEstimate: ...


def _occupancy(device, threads: int) -> tuple[int, float]:
    limit = device.threads_per_core_limit or 2048
    resident = max(1, min(limit // max(threads, 1), 32))  # 32: NVIDIA's resident-block limit per SM
    return resident, min(resident * threads / limit, 1.0)


def _find_kernel(module, kernel):
    if not isinstance(kernel, str):
        return kernel
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.name == kernel:
                return instr
    kernels = [i.name for i in module.entry.instructions if i.opcode == "fusion"]
    shown = ", ".join(kernels[:12]) + (", ..." if len(kernels) > 12 else "")
    raise GranularityError(f"no instruction named {kernel!r} in module '{module.name}' (its fusions: {shown or 'none'})")


def _work(kernel, ld: LaunchDimensions, roots, heroes) -> int:
    if ld.emitter == "reduction":
        hero = next((h for h in heroes if h.opcode == "reduce"), heroes[0])
        return elements(first_array(hero.operands[0].shape))
    return max(elements(first_array(r.shape)) for r in roots)


def _launch_rows(kernel, device, model) -> list[dict]:
    if not isinstance(model, PricesLaunchConfigurations):
        raise GranularityError(f"model {model.name!r} does not price launch configurations "
                               f"(use xla-gpu or xla-gpu-tables)")
    xla = launch_dimensions(kernel, device)
    if xla.emitter not in _LOOP_EMITTERS:
        raise GranularityError(f"'{kernel.name}' runs on the {xla.emitter} emitter, which has no launch "
                               f"configuration to vary; a fusion can be asked as a tiled one (tiled=True)")
    _, roots, heroes = emitter_kind(kernel, warp_size(device))
    work = _work(kernel, xla, roots, heroes)
    configs = {(xla.threads_per_block, xla.unroll, xla.num_blocks): True}
    limit = device.threads_per_block_limit or 1024
    for threads in THREADS:
        if threads > limit:
            continue
        for unroll in UNROLLS:
            blocks = max(math.ceil(work / (threads * unroll)), 1)
            configs.setdefault((threads, unroll, blocks), False)
    rows = []
    for (threads, unroll, blocks), is_xla in configs.items():
        launch = LaunchDimensions(xla.emitter, blocks, threads, unroll, xla.hero, "what-if")
        e = model.estimate_with_launch(kernel, device, launch)
        resident, occ = _occupancy(device, threads)
        rows.append({
            "config": f"{threads} threads x {blocks} blocks, unroll {unroll}" + (" (XLA)" if is_xla else ""),
            "threads_per_block": threads, "unroll": unroll, "tile": None, "num_warps": math.ceil(threads / 32),
            "blocks": blocks, "waves": math.ceil(blocks / (resident * device.core_count)), "occupancy": occ,
            "time_s": e.time_s, "compute_s": e.compute_s, "memory_s": e.memory_s, "bound": e.bound,
            "xla_choice": is_xla,
        })
    return rows


def _tiled_rows(kernel, device, model) -> list[dict]:
    from ..analysis.tiling import TilingError, configured_tiling
    from ._tiled import best_tilings, estimate_tiling

    if kernel.opcode != "fusion" or kernel.fused_computation is None:
        raise GranularityError(f"'{kernel.name}' is a {kernel.opcode}, not a fusion: it has no tiling")
    from ._xla_gpu import XlaGpuModel

    base = model if isinstance(model, XlaGpuModel) else None  # XLA's read/compute rules, with that model's constants
    try:
        tilings = best_tilings(kernel, device, model=base)
    except TilingError as exc:
        raise GranularityError(f"'{kernel.name}': {exc}") from None
    cfg = configured_tiling(kernel)
    chosen = None
    if cfg is not None:
        try:
            chosen = estimate_tiling(kernel, device, cfg.output_tile, cfg.num_warps, num_stages=cfg.num_stages,
                                     is_tma_allowed=cfg.is_tma_allowed, model=base)
        except TilingError as exc:
            raise GranularityError(f"'{kernel.name}': its configured tiling {cfg.output_tile}: {exc}") from None
    else:
        chosen = tilings[0]
    found = [t for t in tilings if (t.tiles, t.num_warps) == (chosen.tiles, chosen.num_warps)]
    if not found:
        tilings = [*tilings, chosen]
    launch = device.kernel_launch_overhead_s
    rows = []
    for t in tilings:
        threads = t.num_warps * (device.warp_size or 32)
        resident, occ = _occupancy(device, threads)
        memory = t.read_s + t.write_s
        is_xla = (t.tiles, t.num_warps) == (chosen.tiles, chosen.num_warps)
        tile = t.tiles[0] if len(t.tiles) == 1 else t.tiles
        rows.append({
            "config": f"tile {'x'.join(map(str, t.tiles[0]))}" + (f" (+{len(t.tiles) - 1} outputs)" if len(t.tiles) > 1
                                                                else "") + f", {t.num_warps} warps"
                      + (" (XLA)" if is_xla else ""),
            "threads_per_block": threads, "unroll": None, "tile": tile, "num_warps": t.num_warps,
            "blocks": t.num_blocks, "waves": math.ceil(t.num_blocks / (resident * device.core_count)),
            "occupancy": occ, "time_s": t.exec_s + launch, "compute_s": t.compute_s, "memory_s": memory,
            "bound": dominant_bound(t.compute_s, memory, launch), "xla_choice": is_xla,
        })
    return rows


def kernel_configurations(module, kernel, dev, cost_model, tiled: bool | None = None) -> pd.DataFrame:
    """Every candidate launch configuration of one kernel of `module`, priced (see the module docstring):
    the engine under `granularity`, with the device and model resolved (a GPU `DeviceSpec`, a model object).

    **Arguments:** `kernel`: the kernel's instruction name or the instruction itself; `tiled`: None (a
    Triton fusion is tiled, any other kernel gets launch configurations), True (tile any fusion), False
    (launch configurations).

    **Returns:** a DataFrame sorted by `time_s`, one row per configuration; `attrs` has `kernel`,
    `device`, `model`, `kind` (`"launch"` or `"tiled"`) and `emitter`.

    **Raises:** `GranularityError` (a `ValueError`) naming the kernel when it cannot be analysed.
    """
    k = _find_kernel(module, kernel)
    # XLA tiles a Triton fusion (`analysis._emission` tells them by their backend config's kind).
    use_tiles = emitter_kind(k, warp_size(dev))[0] == "triton" if tiled is None else tiled
    rows = _tiled_rows(k, dev, cost_model) if use_tiles else _launch_rows(k, dev, cost_model)
    df = pd.DataFrame(rows)
    finite = df["time_s"].where(df["time_s"].map(math.isfinite))
    df["best"] = False
    if finite.notna().any():
        df.loc[finite.idxmin(), "best"] = True
    df = df.sort_values("time_s", kind="stable").reset_index(drop=True)
    emitter = "triton (tiled)" if use_tiles else launch_dimensions(k, dev).emitter
    df.attrs.update(kernel=k.name, device=dev.name, model=cost_model.name,
                    kind="tiled" if use_tiles else "launch", emitter=emitter)
    return df
