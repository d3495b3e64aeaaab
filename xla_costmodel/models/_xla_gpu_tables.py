"""`xla-gpu-tables`: the `xla-gpu` model, with GEMMs and collectives priced from XLA's measured tables.

For a GPU the tables cover (`devices.xla_table_key`: the H100 and H200
read `sm_90`, the B200 `sm_100_B200`, the GB200 `sm_100_GB200`, the GB300
`sm_103`; `devices.gemm_table` / `devices.collective_table`):

- a dot or a Triton GEMM fusion is priced by interpolating the measured
  GEMM table (`models._gemm_table`): by default log-space multilinear
  interpolation over the (b, m, n, k) grid (`GemmTableInterpolator`), or
  XLA's own `MatmulInterpolator` rules with `gemm_interpolation="xla"`
  (a cuBLAS call is priced by `xla-gpu`'s library-call path, which reads
  the same table). The time is the measured kernel duration, with no launch
  overhead added (the table timed the kernels themselves, and XLA's SoL
  estimator uses the interpolated time as is); it is split into `compute_s`
  and `memory_s` in the proportions of the analytical model, so that
  `time_s = compute + memory - 0.95 min(compute, memory)` still holds.
  A dimension below the table's grid (256) is priced as XLA's
  `MatmulInterpolator` prices it: the GEMM's own FLOPs at the rate of the
  grid's edge. That rate carries the edge's fixed costs per FLOP, and a
  GEMM far below the grid (a matrix-vector product, n = 1; a 64-row tile
  of a batched attention GEMM) would be priced at a small fraction of
  what one kernel costs, so with the default interpolation a GEMM below
  the grid takes at least the roofline's time of one kernel: its operands
  read and its result written once at the device's peak HBM bandwidth (the
  bytes of XLA's dot model, `GemmSpec.bytes_read` / `bytes_written`), plus
  one launch, as `xla-gpu` adds to every kernel (`details["floor_s"]`).
  Where the table measured (inside the grid and above it) its time stands:
  the table's kernel times have no launch in them, and its f8 GEMMs with
  a 4096 x 4096 bf16 result wrote it faster than the peak bandwidth (into
  L2). With
  `gemm_interpolation="xla"` the table's time stands as XLA's SoL
  estimator returns it.
- a collective is priced as XLA's `SolLatencyEstimator` does: within one
  host (a partition of `gpus_per_node` devices) from the measured
  collective table (`models._collective_table.CollectiveTable`, interpolated in
  bytes and group size; `collective_interpolation="xla"` for XLA's
  `CollectiveInterpolator`), across hosts with XLA's SoL model plus HBM
  time. A group size the table measured is read from the table even when it
  spans more than one 8-GPU partition (the GB200 / GB300 tables measured
  NVLink domains of 64 and 72 GPUs).

Whatever the tables cannot price (another GPU, a dtype without a table
class, a collective pattern the table lacks) falls back to `xla-gpu`; the
estimate's `details["source"]` says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..analysis.opcodes import COLLECTIVE_OPCODES, is_free
from ._base import KernelEstimate, dominant_bound, register_model
from ._collective_sol import sol_collective_time, sol_config
from ._collective_table import collective_table_for
from ._collectives import CollectiveTime, collective_or_estimate
from ._gemm_table import GemmTableInterpolator, gemm_interpolator, gemm_spec
from ._xla_gpu import XlaGpuModel, collective_estimate


@register_model("xla-gpu-tables")
@dataclass(frozen=True, slots=True)
class XlaGpuTablesModel(XlaGpuModel):
    """`xla-gpu` with XLA's measured GEMM and collective tables (module docstring).

    **Arguments:** those of `XlaGpuModel`, and

    - `gemm_interpolation`: `"log-grid"` (default) or `"xla"` (XLA's
      `MatmulInterpolator` rules, which reproduce its tests).
    - `collective_interpolation`: `"log-bytes"` (default) or `"xla"` (XLA's
      `CollectiveInterpolator`).
    - `gpus_per_node`: devices per host (XLA's SoL default, 8).
    - `sol_overrides`: `((field, value), ...)` for `SolConfig` (XLA's
      `xla_gpu_analytical_latency_estimator_options`).
    """

    name: ClassVar[str] = "xla-gpu-tables"
    prices_by_content: ClassVar[bool] = True

    collective_interpolation: str = "log-bytes"
    gpus_per_node: int = 8
    sol_overrides: tuple = field(default=())

    # ------------------------------------------------------------------ GEMMs
    def _table_key(self, device) -> str | None:
        from ..devices import xla_table_key

        return xla_table_key(device)

    def gemm_estimate(self, kernel, device, analytical: KernelEstimate | None = None) -> KernelEstimate | None:
        """The table's price of a GEMM kernel, or None when the table cannot price it."""
        spec = gemm_spec(kernel)
        if spec is None:
            return None
        key = self._table_key(device)
        interp = gemm_interpolator(key, self.gemm_interpolation) if key else None
        floored = False
        if isinstance(interp, GemmTableInterpolator):
            # XLA's rule below the grid (module docstring), not the library calls' "smallest".
            t = interp.time_s(spec, below_grid="xla")
            floored = interp.below_grid(spec)
        else:
            t = interp.time_s(spec) if interp is not None else None
        if t is None or not t > 0:
            return None
        if analytical is None:
            analytical = XlaGpuModel.estimate(self, kernel, device)
        c, m = analytical.compute_s, analytical.memory_s
        combined = c + m - self.memory_compute_parallelism * min(c, m) if analytical.priced else 0.0
        if combined > 0:
            scale = t / combined
            c, m = c * scale, m * scale
        else:
            c, m = t, 0.0
        details = dict(analytical.details) if analytical.priced else {}
        details.update({
            "source": f"gemm table {key} ({self.gemm_interpolation})",
            "gemm": (spec.b, spec.m, spec.n, spec.k, spec.dtype_key),
            "table_s": t,
            "analytical_s": analytical.time_s,
            "exec_s": t,
        })
        if floored:
            # The floor (module docstring): the GEMM's bytes at the peak HBM bandwidth, and one launch.
            hbm = (spec.bytes_read + spec.bytes_written) / device.memory_bandwidth_bytes_per_s
            launch = device.kernel_launch_overhead_s
            details["floor_s"] = hbm + launch
            if hbm + launch > t:
                details["exec_s"] = hbm
                return KernelEstimate(compute_s=c, memory_s=hbm, launch_s=launch, time_s=hbm + launch,
                                      bound=dominant_bound(c, hbm, launch), details=details)
        return KernelEstimate(compute_s=c, memory_s=m, launch_s=0.0, time_s=t,
                              bound=dominant_bound(c, m, 0.0), details=details)

    # ------------------------------------------------------------ collectives
    def collective_time(self, collective, device) -> CollectiveTime:
        """The table's price of a collective (then XLA's SoL model across hosts, then `xla-gpu`'s)."""
        c = collective
        key = self._table_key(device)
        table = collective_table_for(key, self.collective_interpolation, self.gpus_per_node) if key else None
        if table is not None and c.kind in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                            "collective-permute"):
            hit = table.time_s(c)
            if hit is not None:
                t, how = hit if isinstance(hit, tuple) else (hit, "xla interpolator")
                return CollectiveTime(0.0, t, 0.0, f"collective table {key}: {how}",
                                      {"source": f"collective table {key} ({self.collective_interpolation})"})
        config = sol_config(device, gpus_per_node=self.gpus_per_node, **dict(self.sol_overrides))

        def reduction_compute(col):
            return self._runtime(col.instr, device).compute_s

        sol = sol_collective_time(c, device, config, reduction_compute)
        if sol is not None:
            sol.details["source"] = "xla sol model"
            return sol
        t = XlaGpuModel.collective_time(self, c, device)
        t.details["source"] = "xla-gpu collective model"
        return t

    def _collective_estimate(self, kernel, device) -> KernelEstimate:
        c = collective_or_estimate(self.name, kernel, device, stacklevel=4)
        if isinstance(c, KernelEstimate):
            return c
        return collective_estimate(c, self.collective_time(c, device))

    # ---------------------------------------------------------------- kernels
    def estimate(self, kernel, device) -> KernelEstimate:
        """Price one kernel: GEMMs and collectives from the tables where they can, the rest as `xla-gpu`."""
        # Collectives come out of `collective_time` above, through xla-gpu's own dispatch.
        est = XlaGpuModel.estimate(self, kernel, device)
        if not est.priced or est.bound == "free" or kernel.opcode in COLLECTIVE_OPCODES or is_free(kernel):
            return est
        if kernel.opcode == "custom-call" and "routine" in est.details:
            return est  # a library call: xla-gpu priced it already (cuBLAS GEMMs from the table)
        table = self.gemm_estimate(kernel, device, est)
        return table if table is not None else est

    def _kernel_time(self, instr, device, cache: dict):
        est, rt = XlaGpuModel._kernel_time(self, instr, device, cache)
        if rt is not None and est.priced:
            table = self.gemm_estimate(instr, device, est)
            if table is not None:
                return table, rt
        return est, rt
