"""`xla-gpu`: XLA's analytical GPU performance model (`GpuPerformanceModel`), re-implemented.

For one kernel (XLA's `EstimateRunTimeForInstruction`):

1. flops, bytes written and per-operand bytes read come from the kernel's
   `GpuHloCostAnalysis` counts (`_kernel_costs`), with
   `count_multiple_input_accesses = true`;
2. the emitter and its launch grid (`_launch`) give `num_blocks` and
   `threads_per_block`;
3. compute time = flops / (2 · clock · min(blocks, SMs) · min(threads, FPUs per SM));
4. read time per operand (`ReadTimeWithDRAMHeuristic`): the first read of
   each unique byte from DRAM at bandwidth × coalescing rate, re-reads at
   ×2.5 (L2) or ×20 (L1) when the operand fits, every rate capped at
   `blocks · clock · 32 B` (low occupancy);
5. write time = bytes written / bandwidth;
6. exec = compute + memory − 0.95 · min(compute, memory);
7. the kernel launch (1 µs on XLA's GPUs) is added on top.

A Triton fusion (kind `kCustom`, backend config kind `__triton...`: softmax
and normalization fusions, GEMM fusions and nested GEMM fusions) is priced
with the tiled (indexing) model (`models._tiled.price_triton_fusion`), as
XLA's `CombinedGpuPerformanceModel` prices generic (`__triton`) fusions: the
tiling its backend config names (what ran), else the best one; flops counted
on the tiles (no per-element recomputation), dots with XLA's dot-fusion
model. XLA sends GEMM fusions to the steps above instead;
`dot_fusion_model=False` does too. A fusion whose tile cannot be propagated
falls back to the steps above (`details["tiled_fallback"]`).

A scatter whose indices may collide takes at least its atomic contention
time (`models._contention.scatter_contention`: requests queued on one L2
line, one L2 round trip each), a term XLA's model lacks
(`atomic_contention=False` drops it).

For fusion decisions, `estimate_fusion(producer, consumers)` is XLA's
`EstimateRunTimes`: unfused = (n+1) launches + T(P) + Σ T(Cᵢ), fused =
n launches + Σ T_fused(P, Cᵢ), where T_fused recomputes the producer
`utilization` times and reads every operand of the pair once, shared reads
counted once (`EstimateRunTimeForFusion`, in `_xla_gpu_fusion` with the
pair pricer a fusion pass uses).

Like XLA, durations are rounded to `absl::Duration`'s quarter nanosecond per
term, and effective flops per ns are truncated to an integer; both can be
switched off. Dots and convolutions run on the matrix units here (XLA's
legacy model prices everything on the FP32 units); `matrix_units=False`
restores XLA's behaviour. An f32 dot runs at the device's "f32" matrix rate,
which is TF32 on the tensor cores of Ampere and later: that is what XLA
compiles an f32 dot of default precision to, and what XLA's measured GEMM
table shows (f32 rates up to 400 TFLOP/s on the H100, six times the FP32
vector peak; `scripts/bench_gemm_tables.py`).

Collectives (all-reduce, all-gather, reduce-scatter, all-to-all,
collective-permute, their `-start` forms, send and recv) are priced with
XLA's collective performance model (`models._collectives.nccl_ring_time`):
time = NCCL launch (5 µs, in `launch_s`) + the reduction's compute time
(`compute_s`) + the transfer over the ring bus (`memory_s`), a sum, with
bound "network" when the transfer dominates; `-done` forms cost 0.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from ..analysis.emission import emitter_kind
from ..analysis.library import backend_config
from ..analysis.opcodes import COLLECTIVE_OPCODES, CONTROL_FLOW_OPCODES, is_free
from ._base import FusionEstimate, KernelEstimate, dominant_bound, register_model, warn_unpriced
from ._collectives import CollectiveTime, collective_or_estimate, nccl_ring_time
from ._coalescing import kernel_coalescing, utilization_rate
from ._contention import scatter_contention
from ._dot_fusion import sm_occupancy
from ._kernel_costs import (CostContext, KernelCosts, kernel_costs, op_evaluations, reduction_inputs_once,
                            shape_size_cached)
from ._launch import LaunchDimensions, launch_dimensions
from ._library_calls import library_call_or_gemm
from ._inputs import check_prices_device
from ._sort import is_sort_kernel, price_sort
from ._tiled import TilingError, price_triton_fusion
from ._xla_gpu_fusion import XlaGpuPairPricer, fused_estimate, fused_short_cut


def _fusion_backend_kind(kernel) -> str:
    """The `fusion_backend_config.kind` of a fusion (`"__triton"`, `"__triton_nested_gemm_fusion"`, ...)."""
    cfg = backend_config(kernel) or {}
    fc = cfg.get("fusion_backend_config")
    return str(fc.get("kind", "")) if isinstance(fc, dict) else ""


def _round_half_away(x: float) -> float:
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


# XLA computes its model's terms in single precision (`float` bandwidths, `1.0f * flops / ...`) and
# turns each into an `absl::Duration` (a count of quarter-nanosecond ticks). Ties between
# priorities hang on the last tick, so the default resolution follows both exactly.
_f32 = np.float32
_ABSL_TICKS_PER_S = 4_000_000_000
_ABSL_TICK_S = 0.25e-9


def _absl_seconds(n: float) -> float:
    """`absl::Seconds(double)`: whole seconds, then the fraction rounded to a tick (half away from 0)."""
    if n < 0:
        return -_absl_seconds(-n)
    whole = float(int(n))
    return whole + _round_half_away((n - whole) * _ABSL_TICKS_PER_S) * _ABSL_TICK_S


@functools.lru_cache(maxsize=1 << 16)
def _exact_read_time(bw: int, clock_ghz: float, transactions: int, num_blocks: int, in_l2: bool, in_l1: bool,
                     dram_bytes: int, cache_bytes: int, utilization: float, l2_speedup: float,
                     l1_speedup: float) -> float:
    """`ReadTimeWithDRAMHeuristic` in XLA's arithmetic (kept per argument tuple: a pass asks the same
    reads again and again). XLA's bandwidths are floats: the product with the (double) utilization
    rate is rounded to single precision, as are the cache speedups (float constants) and the
    per-block cap."""
    dram_bw = _f32(bw * utilization)
    rest_bw = _f32(bw)
    if in_l2:
        rest_bw = _f32(rest_bw * _f32(l2_speedup))
        if in_l1:
            rest_bw = _f32(rest_bw * _f32(l1_speedup))
    else:
        rest_bw = _f32(float(rest_bw) * utilization)
    if transactions:
        per_block = _f32(_f32(clock_ghz) * _f32(1e9)) * _f32(transactions)
        cap = _f32(_f32(num_blocks) * per_block)
        dram_bw = min(dram_bw, cap)
        rest_bw = min(rest_bw, cap)
    return _absl_seconds(float(_f32(dram_bytes) / dram_bw)) + _absl_seconds(float(_f32(cache_bytes) / rest_bw))


@functools.lru_cache(maxsize=1 << 16)
def _absl_scale(seconds: float, r: float) -> float:
    """`absl::Duration * double` (`ScaleDouble`) on a duration already on the tick grid."""
    ticks = int(round(seconds * _ABSL_TICKS_PER_S))
    hi, lo = divmod(ticks, _ABSL_TICKS_PER_S)
    hi_doub = hi * r
    hi_int = math.trunc(hi_doub)
    hi_frac = hi_doub - hi_int
    lo_doub = lo * r / _ABSL_TICKS_PER_S + hi_frac
    lo_int = math.trunc(lo_doub)
    lo_frac = lo_doub - lo_int
    return hi_int + lo_int + _round_half_away(lo_frac * _ABSL_TICKS_PER_S) * _ABSL_TICK_S


@dataclass(slots=True)
class _Runtime:
    """XLA's `EstimateRunTimeData` for one kernel, plus what explains it."""

    costs: KernelCosts
    launch: LaunchDimensions
    flops: int
    compute_s: float
    read_s: float
    write_s: float
    exec_s: float
    bytes_read: int
    bytes_written: int
    operand_read_s: dict = field(default_factory=dict)
    uncoalesced: dict = field(default_factory=dict)
    latency_hidden: float = 1.0


def collective_estimate(c, t: CollectiveTime) -> KernelEstimate:
    """A `KernelEstimate` of a collective's `CollectiveTime`: network (and HBM) time in `memory_s`."""
    network = t.network_s + t.hbm_s
    parts = {"compute": t.compute_s, "network": network, "launch": t.launch_s}
    bound = max(parts, key=lambda k: (parts[k], k == "network"))
    details = {"rule": t.rule, "collective": c.kind, "bytes_transferred": c.bytes_transferred,
               "bytes_accessed": c.bytes_accessed, "flops": c.flops, "ranks": c.ranks,
               "group_size": c.group_size, "group_count": c.group_count, "network_s": t.network_s,
               "hbm_s": t.hbm_s, **t.details}
    return KernelEstimate(compute_s=t.compute_s, memory_s=network, launch_s=t.launch_s, time_s=t.time_s,
                          bound=bound, note=t.rule, details=details)


@register_model("xla-gpu")
@dataclass(frozen=True, slots=True)
class XlaGpuModel:
    """XLA's GPU analytical performance model (`GpuPerformanceModel`, legacy emitters).

    **Arguments (the model's constants, XLA's values by default):**

    - `l2_cache_speedup`: re-reads of an operand smaller than L2 run this much
      faster than DRAM (`kL2CacheSpeedup`, 2.5).
    - `l1_cache_speedup`: further factor when the operand is smaller than
      L1 · SMs (`kL1CacheSpeedup`, 8).
    - `memory_compute_parallelism`: the overlap of compute and memory time
      (`kMemoryComputeParallelism`, 0.95).
    - `max_unroll_factor`: loop emitter unrolling (`MaxUnrollFactor`, 4).
    - `time_resolution_s`: each duration term is rounded to this, as
      `absl::Duration` does (a quarter nanosecond); 0 keeps full precision.
      At a quarter nanosecond the terms also follow XLA's arithmetic exactly
      (single-precision bandwidths and quotients, absl's scaling of the
      overlap), so that priorities tie where XLA's do.
    - `truncate_flops_per_ns`: effective flops per ns are an integer in XLA.
    - `matrix_units`: price dot and convolution flops at the device's matrix
      (tensor core) peak for their dtype, scaled by the active SMs; False
      prices them on the FP32 units, as XLA's legacy model does.
    - `access_patterns`: besides XLA's kernel-wide heuristic, mark operands
      read through a short-row gather or a strided slice as uncoalesced.
    - `collective_extensions`: price all-to-all, collective-permute, send and
      recv by their transfer over the ring bus (XLA's model charges them the
      5 µs launch only; False restores that).
    - `dot_fusion_model`: price Triton GEMM fusions (`__triton_gemm`,
      `__triton_nested_gemm_fusion`) with the tiled model and XLA's dot-fusion
      model under their configured tiles; False prices them with the steps
      above, as XLA's `CombinedGpuPerformanceModel` does (it sends only
      generic `__triton` fusions to the tiled model).
    - `sort_model`: price sorts kernel by kernel: XLA's bitonic kernels, or
      CUB's radix passes where `sort_rewriter` sends the sort to CUB on the
      device, also when the module kept XLA's sort (`models._sort`; XLA has
      no model for either, False prices a sort with the steps above).
    - `atomic_contention`: a scatter whose indices may collide takes at
      least the time its atomics queue on one L2 line (`models._contention`;
      XLA has no such term, False drops it). Kernel estimates only: fusion
      prices (`estimate_fusion`, `fusion_pricer`) leave it out, as XLA's
      fusion decisions do.
    - `in_place_scatter`: a scatter fusion writes its result into its
      first operand's buffer (XLA's buffer assignment aliases them, and
      copy insertion copies the operand where it cannot), so it reads and
      writes the elements its updates touch, once per update element, as
      XLA's cost analysis counts a scatter run on its own (`HandleScatter`:
      the operand read and the result written are each the updates' bytes,
      also where many updates land on one element: each is one atomic
      read-modify-write; the operand's own size is the net, first-touch
      part of that read, the rest priced as re-reads from cache). XLA's
      fusion cost analysis counts the whole buffer read and written (it treats
      `dynamic-update-slice` so, not scatter): the H100 ran optax's
      f32[1024,32000] cross-entropy gradient scatter in 1 µs, priced 299 µs
      that way. Kernel estimates only, as `atomic_contention`; False drops it.
    - `reduction_inputs_once`: a reduction fusion computes and reads each
      value of its input side once per element, also one that both feeds a
      reduce and is written as a side output (`ReductionFusion`'s loop
      evaluates them at one index, and CSE merges the calls); XLA's cost
      analysis counts such a value once per path, twice the flops and reads
      (`models._kernel_costs.reduction_inputs_once`). Kernel estimates only;
      False counts as XLA does.
    - `latency_hiding`, `arithmetic_latency_cycles`: XLA's per-op cycle
      profiles (`hlo_op_profiler`) time a dependent chain of one op in one
      thread, twice its latency in cycles, and `ComputeTime` spends them on
      every FP32 lane as if each lane waited out each op's latency. An SM
      with enough warps resident issues another warp's instruction while one
      waits: the CUDA C++ Programming Guide (Multiprocessor Level) puts the
      latency of most arithmetic instructions at 4 cycles, hidden by 4 active
      warps per warp scheduler (fpus_per_core / warp size schedulers per
      SM). The vector compute time of an XLA-emitted kernel is divided by
      its active warps per scheduler, capped at `arithmetic_latency_cycles`
      (`latency_hidden`: the blocks resident per SM from the grid and the
      thread limit; registers are not known here), and never below one
      instruction per elementwise evaluation per lane and cycle. Kernel estimates only
      (XLA's fusion decisions keep XLA's prices); False prices as XLA does.
    - `nccl_max_channels`, `nccl_min_channels`, `nccl_threads`: what XLA's
      collective model reads from `NCCL_MAX_NCHANNELS`, `NCCL_MIN_NCHANNELS`
      and `NCCL_NTHREADS` (0: unset).
    """

    name: ClassVar[str] = "xla-gpu"
    # A kernel's price depends on its content only (not names, metadata or neighbours): see CostModel.
    prices_by_content: ClassVar[bool] = True
    # XLA's GPU model prices GPUs only (`check_prices_device`).
    device_kinds: ClassVar[tuple[str, ...]] = ("gpu",)

    l2_cache_speedup: float = 2.5
    l1_cache_speedup: float = 8.0
    memory_compute_parallelism: float = 0.95
    max_unroll_factor: int = 4
    time_resolution_s: float = 0.25e-9
    truncate_flops_per_ns: bool = True
    matrix_units: bool = True
    access_patterns: bool = True
    collective_extensions: bool = True
    dot_fusion_model: bool = True
    sort_model: bool = True
    atomic_contention: bool = True
    in_place_scatter: bool = True
    reduction_inputs_once: bool = True
    latency_hiding: bool = True
    arithmetic_latency_cycles: float = 4.0
    # How a cuBLAS call's (m, n, k) is read off XLA's measured GEMM table (`models._gemm_table`).
    gemm_interpolation: str = "log-grid"
    nccl_max_channels: int = 32
    nccl_min_channels: int = 1
    nccl_threads: int = 0

    # ------------------------------------------------------------------ basics
    def _q(self, seconds: float) -> float:
        res = self.time_resolution_s
        if res <= 0 or not math.isfinite(seconds):
            return seconds
        return _round_half_away(seconds / res) * res

    def _check(self, device) -> None:
        # The model's own contract for a caller who holds it directly (`get_model("xla-gpu").estimate(k,
        # host)` must refuse, not price a CPU with GPU terms). Behind the front door it repeats the one
        # check made there, in the same function (`check_prices_device`).
        check_prices_device(self, device)

    def _exact(self) -> bool:
        """Whether terms follow XLA's arithmetic exactly (single precision, absl's tick rounding)."""
        return self.time_resolution_s == _ABSL_TICK_S

    def _flops_per_ns(self, device, blocks: int, threads: int) -> float:
        active_fpus = min(threads, device.fpus_per_core)
        active_cores = min(blocks, device.core_count)
        clock = float(_f32(device.clock_rate_ghz)) if self._exact() else device.clock_rate_ghz
        rate = clock * 2.0 * (active_cores * active_fpus)
        if self.truncate_flops_per_ns:
            rate = float(int(rate))
        return max(rate, 1.0)

    def latency_hidden(self, device, blocks: int, threads: int) -> float:
        """How many times faster than XLA's one-thread latency an SM runs a kernel's vector work
        (`latency_hiding`): its active warps per warp scheduler, between 1 and `arithmetic_latency_cycles`."""
        warp = device.warp_size or 32
        schedulers = max(device.fpus_per_core // warp, 1)
        warps_per_block = -(-max(threads, 1) // warp)
        # the blocks an SM holds at once: XLA's `CalculateSmOccupancy` with no shared memory
        per_sm = min(max(-(-blocks // max(device.core_count, 1)), 1), sm_occupancy(0, warps_per_block, device))
        return max(1.0, min(float(self.arithmetic_latency_cycles), per_sm * warps_per_block / schedulers))

    def compute_time(self, device, flops: float, matmul_flops: float, matmul_dtype: str, blocks: int, threads: int,
                     latency_hidden: float = 1.0) -> float:
        """XLA's `ComputeTime`, with dots/convolutions on the matrix units if `matrix_units`, and the
        vector part `latency_hidden` times faster (1: XLA's)."""
        vector = flops - matmul_flops if (self.matrix_units and matmul_flops) else flops
        rate = self._flops_per_ns(device, blocks, threads)
        if latency_hidden != 1.0:
            # Only the profiled per-element work waits on latency: dot and convolution flops on the
            # FP32 units (`matrix_units=False`) are counted as flops, not cycles, and keep XLA's rate.
            elementwise = flops - matmul_flops
            t = self._q((elementwise / latency_hidden + (vector - elementwise)) / rate * 1e-9)
        elif self._exact():
            # `absl::Nanoseconds(1.0f * flops / flops_per_ns)`: a float quotient, scaled from 1 ns
            t = _absl_scale(1e-9, float(_f32(_f32(int(vector)) / _f32(rate))))
        else:
            t = self._q(int(vector) / rate * 1e-9)
        if self.matrix_units and matmul_flops:
            active = min(blocks, device.core_count) / device.core_count
            t += self._q(matmul_flops / (device.matmul_flops_per_s(matmul_dtype or "f32") * active))
        return t

    def read_time(self, device, num_blocks: int, n_bytes_net: int, n_bytes_total: int, utilization: float) -> float:
        """XLA's `ReadTimeWithDRAMHeuristic` (seconds)."""
        if self._exact():
            return self._read_time_exact(device, num_blocks, n_bytes_net, n_bytes_total, utilization)
        bw = device.memory_bandwidth_bytes_per_s
        dram_bw = bw * utilization
        rest_bw = bw
        if n_bytes_net < device.l2_cache_bytes:
            rest_bw *= self.l2_cache_speedup
            if n_bytes_net < device.l1_cache_bytes:
                rest_bw *= self.l1_cache_speedup
        else:
            rest_bw *= utilization
        if device.memory_transactions_per_clock:
            cap = num_blocks * device.clock_rate_ghz * 1e9 * device.memory_transactions_per_clock
            dram_bw = min(dram_bw, cap)
            rest_bw = min(rest_bw, cap)
        dram_bytes = min(n_bytes_net, n_bytes_total)
        cache_bytes = n_bytes_total - dram_bytes
        return self._q(dram_bytes / dram_bw) + self._q(cache_bytes / rest_bw)

    def _read_time_exact(self, device, num_blocks: int, n_bytes_net: int, n_bytes_total: int,
                         utilization: float) -> float:
        return _exact_read_time(int(device.memory_bandwidth_bytes_per_s), device.clock_rate_ghz,
                                device.memory_transactions_per_clock, num_blocks,
                                n_bytes_net < device.l2_cache_bytes, n_bytes_net < device.l1_cache_bytes,
                                min(n_bytes_net, n_bytes_total), n_bytes_total - min(n_bytes_net, n_bytes_total),
                                float(utilization), self.l2_cache_speedup, self.l1_cache_speedup)

    def write_time(self, device, bytes_written: float) -> float:
        """XLA's `WriteTime`: full bandwidth, no coalescing factor, no cap."""
        if self._exact():
            # `absl::Seconds(1.0f * bytes_written / memory_bandwidth())`: a float quotient
            return _absl_seconds(float(_f32(int(bytes_written)) / _f32(device.memory_bandwidth_bytes_per_s)))
        return self._q(bytes_written / device.memory_bandwidth_bytes_per_s)

    def combine(self, compute_s: float, memory_s: float) -> float:
        """XLA's `CombineComputeAndMemoryAccessTime`."""
        if math.isinf(compute_s) or math.isinf(memory_s):
            return math.inf
        if self._exact():
            return compute_s + memory_s - _absl_scale(min(compute_s, memory_s), self.memory_compute_parallelism)
        return compute_s + memory_s - self._q(min(compute_s, memory_s) * self.memory_compute_parallelism)

    # --------------------------------------------------------------- kernels
    def _costs(self, kernel, device, cache: dict | None = None) -> KernelCosts:
        if cache is not None and id(kernel) in cache:
            return cache[id(kernel)]
        c = kernel_costs(kernel, CostContext(device, gpu=True))
        if cache is not None:
            cache[id(kernel)] = c
        return c

    def _runtime(self, kernel, device, cache: dict | None = None, launch: LaunchDimensions | None = None,
                 as_run: bool = False) -> _Runtime:
        """XLA's `EstimateRunTimeData`; `as_run`: with the kernel-estimate terms XLA's model lacks
        (`in_place_scatter`, `reduction_inputs_once`, `latency_hiding`), as a kernel runs rather than
        as XLA's fusion decisions price it."""
        costs = self._costs(kernel, device, cache)
        if as_run and self.in_place_scatter:
            costs = _scatter_in_place(costs)
        ld = launch if launch is not None else launch_dimensions(kernel, device, max_unroll=self.max_unroll_factor)
        if as_run and self.reduction_inputs_once and ld.emitter == "reduction":
            costs = reduction_inputs_once(costs)
        hidden = self.latency_hidden(device, ld.num_blocks, ld.threads_per_block) if (
            as_run and self.latency_hiding) else 1.0
        if hidden > 1.0:
            # No faster than one instruction per evaluation per lane (2 "flops", one FMA, per cycle): XLA's
            # cheap ops (a multiply profiled at 3, an op without a profile at 3) are below that once hidden.
            elementwise = costs.flops - costs.matmul_flops
            floor = 2.0 * op_evaluations(costs)
            if elementwise > 0 and floor > 0:
                hidden = max(1.0, min(hidden, elementwise / floor))
        flops = int(costs.flops)
        compute = self.compute_time(device, flops, costs.matmul_flops, costs.matmul_dtype, ld.num_blocks,
                                    ld.threads_per_block, hidden)
        coal = kernel_coalescing(kernel, ld.emitter, device, access_patterns=self.access_patterns)
        read = 0.0
        bytes_read = 0
        per_operand: dict[str, float] = {}
        uncoalesced: dict[str, str] = {}
        for i, operand in enumerate(kernel.operands):
            n_total = int(costs.operand_bytes[i]) if i < len(costs.operand_bytes) else 0
            n_net = min(shape_size_cached(operand.shape), n_total)
            bytes_read += n_total
            rate = utilization_rate(operand.shape, coal.coalesced[i], device)
            t = self.read_time(device, ld.num_blocks, n_net, n_total, rate)
            read += t
            per_operand[operand.name] = per_operand.get(operand.name, 0.0) + t
            if not coal.coalesced[i]:
                uncoalesced[operand.name] = coal.reasons[i]
        bytes_written = int(costs.bytes_written)
        write = self.write_time(device, bytes_written)
        exec_s = self.combine(compute, read + write)
        return _Runtime(costs, ld, flops, compute, read, write, exec_s, bytes_read, bytes_written, per_operand, uncoalesced,
                        hidden)

    def _estimate_from(self, rt: _Runtime, device, *, contention: bool = True) -> KernelEstimate:
        launch = device.kernel_launch_overhead_s
        memory = rt.read_s + rt.write_s
        ld = rt.launch
        details: dict[str, Any] = {
            "exec_s": rt.exec_s,
            "read_s": rt.read_s,
            "write_s": rt.write_s,
            "flops": float(rt.flops),
            "matmul_flops": rt.costs.matmul_flops,
            "bytes_read": float(rt.bytes_read),
            "bytes_written": float(rt.bytes_written),
            "bytes_accessed": float(rt.bytes_read + rt.bytes_written),
            "emitter": ld.emitter,
            "num_blocks": ld.num_blocks,
            "threads_per_block": ld.threads_per_block,
            "unroll": ld.unroll,
            "hero": ld.hero,
            "coalesced": not rt.uncoalesced,
            "uncoalesced": dict(rt.uncoalesced),
            "operand_read_s": dict(rt.operand_read_s),
        }
        if rt.latency_hidden != 1.0:
            details["latency_hidden"] = rt.latency_hidden
        if ld.detail:
            details["launch_detail"] = ld.detail
        exec_s = rt.exec_s
        if contention and self.atomic_contention and ld.emitter == "scatter":
            c = scatter_contention(rt.costs.kernel, device)
            if c is not None:
                details.update(atomic_requests=c.requests, atomic_target_lines=c.target_lines,
                               atomic_contention_s=c.time_s)
                if c.time_s > exec_s:
                    exec_s = c.time_s
                    memory = max(memory, c.time_s)
                    details["exec_s"] = exec_s
        return KernelEstimate(
            compute_s=rt.compute_s,
            memory_s=memory,
            launch_s=launch,
            time_s=exec_s + launch,
            bound=dominant_bound(rt.compute_s, memory, launch),
            details=details,
        )

    def _triton_estimate(self, kernel, device) -> tuple[KernelEstimate | None, str]:
        """A Triton fusion priced with the tiled model: `(estimate, "")`; `(None, why)` when the tiled
        model cannot price it; `(None, "")` for any other kernel."""
        if kernel.opcode != "fusion" or kernel.fusion_kind != "kCustom" or emitter_kind(kernel)[0] != "triton":
            return None, ""
        if not self.dot_fusion_model and _fusion_backend_kind(kernel) != "__triton":
            return None, ""
        try:
            e, source = price_triton_fusion(kernel, device, self)
        except TilingError as exc:
            return None, f"tiled model: {exc}"
        if e.infinite:
            return None, "tiled model: a tile does not fit in registers"
        launch = device.kernel_launch_overhead_s
        memory = e.read_s + e.write_s
        threads = e.num_warps * (device.warp_size or 32)
        details: dict[str, Any] = {
            "exec_s": e.exec_s,
            "read_s": e.read_s,
            "write_s": e.write_s,
            "flops": e.flops,
            "bytes_read": e.bytes_read,
            "bytes_written": e.bytes_written,
            "bytes_accessed": e.bytes_read + e.bytes_written,
            "emitter": "triton",
            "num_blocks": e.num_blocks,
            "threads_per_block": threads,
            "tiles": e.tiles,
            "num_warps": e.num_warps,
            "tiling": source,
            **e.details,
        }
        return KernelEstimate(compute_s=e.compute_s, memory_s=memory, launch_s=launch, time_s=e.exec_s + launch,
                              bound=dominant_bound(e.compute_s, memory, launch), details=details), ""

    def _not_a_kernel(self, kernel) -> str:
        op = kernel.opcode
        if op in CONTROL_FLOW_OPCODES:
            return f"'{op}' is control flow, not a kernel: price the computations it runs"
        return ""

    # ------------------------------------------------------------ collectives
    def collective_time(self, collective, device) -> CollectiveTime:
        """XLA's collective model for a described collective (`models._collectives.nccl_ring_time`)."""

        def compute(flops, blocks, threads):
            return self.compute_time(device, flops, 0.0, "", blocks, threads)

        return nccl_ring_time(collective, device, compute, extensions=self.collective_extensions,
                              max_channels=self.nccl_max_channels, min_channels=self.nccl_min_channels,
                              threads=self.nccl_threads or None)

    def _collective_estimate(self, kernel, device) -> KernelEstimate:
        c = collective_or_estimate(self.name, kernel, device, stacklevel=4)
        if isinstance(c, KernelEstimate):
            return c
        t = self.collective_time(c, device)
        return collective_estimate(c, t)

    def estimate_collective(self, kernel, device) -> KernelEstimate:
        """Price one collective (any opcode of `COLLECTIVE_OPCODES`); see the module docstring."""
        self._check(device)
        return self._collective_estimate(kernel, device)

    def estimate(self, kernel, device) -> KernelEstimate:
        """Price one kernel (a fusion, or an instruction run as its own kernel).

        **Arguments:** `kernel`; `device`, a GPU `DeviceSpec`.

        **Returns:** a `KernelEstimate`; `details` holds the launch grid, the
        emitter, flops and bytes, per-operand read times and coalescing.
        Free instructions (bitcast, tuple, parameter, ...) cost 0 with bound
        "free"; kernels without a cost rule are unpriced (NaN) with a warning.
        """
        self._check(device)
        if is_free(kernel):
            return KernelEstimate.free(f"{kernel.opcode} runs no code")
        why = self._not_a_kernel(kernel)
        if why:
            warn_unpriced(self.name, kernel, why)
            return KernelEstimate.unpriced(why)
        if kernel.opcode in COLLECTIVE_OPCODES:
            return self._collective_estimate(kernel, device)
        # Sorts: XLA's bitonic kernels or CUB's radix passes, as `sort_rewriter` decides (`models._sort`).
        if self.sort_model and is_sort_kernel(kernel):
            return price_sort(kernel, device)
        # Library calls: cuBLAS GEMMs from the measured GEMM table, the rest from `models._library_calls`.
        if kernel.opcode in ("custom-call", "fft") and (
            library := library_call_or_gemm(kernel, device, self.gemm_interpolation)
        ):
            return library
        tiled, fallback = self._triton_estimate(kernel, device)
        if tiled is not None:
            return tiled
        rt = self._runtime(kernel, device, as_run=True)
        if rt.costs.unpriced:
            why = "no cost rule for " + ", ".join(rt.costs.unpriced)
            warn_unpriced(self.name, kernel, why)
            return KernelEstimate.unpriced(why, {"unpriced": rt.costs.unpriced})
        est = self._estimate_from(rt, device)
        if fallback:
            est.details["tiled_fallback"] = fallback
        return est

    def estimate_with_launch(self, kernel, device, launch: LaunchDimensions) -> KernelEstimate:
        """Price `kernel` as if launched with `launch` instead of XLA's choice (a granularity what-if).

        **Arguments:** `kernel`; `device`; `launch`: the `LaunchDimensions` to
        assume (its emitter decides the coalescing rules, its blocks and
        threads the compute rate and the low-occupancy bandwidth cap).
        """
        self._check(device)
        rt = self._runtime(kernel, device, launch=launch, as_run=True)
        if rt.costs.unpriced:
            return KernelEstimate.unpriced("no cost rule for " + ", ".join(rt.costs.unpriced))
        return self._estimate_from(rt, device)

    # ------------------------------------------------------ producer/consumer
    def _kernel_time(self, instr, device, cache: dict) -> tuple[KernelEstimate, _Runtime | None]:
        """A kernel's time as `EstimateRunTimes` sees it: a free instruction is a kernel
        with nothing to do (it still pays a launch, as in XLA)."""
        if is_free(instr):
            launch = device.kernel_launch_overhead_s
            est = KernelEstimate(compute_s=0.0, memory_s=0.0, launch_s=launch, time_s=launch, bound="launch",
                                 details={"exec_s": 0.0})
            return est, None
        why = self._not_a_kernel(instr)
        if why:
            warn_unpriced(self.name, instr, why, stacklevel=4)
            return KernelEstimate.unpriced(why), None
        if instr.opcode in COLLECTIVE_OPCODES:
            return self._collective_estimate(instr, device), None
        if self.sort_model and is_sort_kernel(instr):
            return price_sort(instr, device), None
        # Library calls: cuBLAS GEMMs from the measured GEMM table, the rest from `models._library_calls`.
        if instr.opcode in ("custom-call", "fft") and (
            library := library_call_or_gemm(instr, device, self.gemm_interpolation)
        ):
            return library, None
        rt = self._runtime(instr, device, cache)
        tiled, _ = self._triton_estimate(instr, device)
        if tiled is not None:
            return tiled, rt
        if rt.costs.unpriced:
            why = "no cost rule for " + ", ".join(rt.costs.unpriced)
            warn_unpriced(self.name, instr, why, stacklevel=4)
            return KernelEstimate.unpriced(why), rt
        # Without the atomic contention term: XLA's fusion decisions have none, and a scatter that
        # absorbs a producer keeps its atomics, so the term would only inflate the unfused side.
        return self._estimate_from(rt, device, contention=False), rt

    def estimate_fused(
        self,
        producer,
        consumer,
        device,
        *,
        producer_estimate: KernelEstimate | None = None,
        consumer_estimate: KernelEstimate | None = None,
        producer_writes_side_output: bool = False,
        _cache: dict | None = None,
    ) -> KernelEstimate:
        """The kernel that fusing `producer` into `consumer` would give (XLA's
        `EstimateRunTimeForFusion`), launch included.

        **Arguments:** `producer` (an operand of `consumer`, directly or through
        a get-tuple-element); `consumer`; `device`; `producer_estimate`,
        `consumer_estimate`: the two kernels' own estimates when already known
        (an infinite one makes the result infinite, as in XLA);
        `producer_writes_side_output`: the fusion also writes the producer's
        output (multi-output fusion).

        **Returns:** a `KernelEstimate` of the fused kernel.
        """
        self._check(device)
        cache = {} if _cache is None else _cache
        pe = producer_estimate if producer_estimate is not None else self._kernel_time(producer, device, cache)[0]
        ce = consumer_estimate if consumer_estimate is not None else self._kernel_time(consumer, device, cache)[0]
        early = fused_short_cut(pe, ce, device)
        if early is not None:
            return early
        pc = self._costs(producer, device, cache)
        cc = self._costs(consumer, device, cache)
        return fused_estimate(self, producer, consumer, device, pc, cc, producer_writes_side_output)

    def estimate_fusion(self, producer, consumers: Sequence, device) -> FusionEstimate:
        """XLA's `EstimateRunTimes(producer, consumers)`: the producer fused into every consumer.

        **Returns:** a `FusionEstimate`; `time_unfused_s` = (n+1) launches +
        T(P) + Σ T(Cᵢ), `time_fused_s` = n launches + Σ T_fused(P, Cᵢ);
        `priority_s` is what XLA's priority fusion ranks producers by.
        """
        self._check(device)
        cache: dict = {}
        pe, _ = self._kernel_time(producer, device, cache)
        unfused = [self._kernel_time(c, device, cache)[0] for c in consumers]
        fused = [
            self.estimate_fused(producer, c, device, producer_estimate=pe, consumer_estimate=ce, _cache=cache)
            for c, ce in zip(consumers, unfused)
        ]
        return FusionEstimate(
            time_unfused_s=pe.time_s + sum(c.time_s for c in unfused),
            time_fused_s=sum(f.time_s for f in fused),
            producer_s=pe.time_s,
            consumers_s=tuple(c.time_s for c in unfused),
            fused_consumers_s=tuple(f.time_s for f in fused),
        )

    def estimate_multi_output_fusion(self, producer, consumer, device) -> FusionEstimate:
        """XLA's `EstimateRunTimesForMultiOutputFusion`: `consumer` absorbs `producer`
        and also writes the producer's output, so the producer's kernel goes away.

        **Returns:** a `FusionEstimate` with one consumer: unfused = 2 launches +
        T(P) + T(C), fused = 1 launch + T_fused(P, C) with the side output written.
        """
        self._check(device)
        cache: dict = {}
        pe, _ = self._kernel_time(producer, device, cache)
        ce, _ = self._kernel_time(consumer, device, cache)
        fe = self.estimate_fused(producer, consumer, device, producer_estimate=pe, consumer_estimate=ce,
                                 producer_writes_side_output=True, _cache=cache)
        return FusionEstimate(
            time_unfused_s=pe.time_s + ce.time_s,
            time_fused_s=fe.time_s,
            producer_s=pe.time_s,
            consumers_s=(ce.time_s,),
            fused_consumers_s=(fe.time_s,),
        )

    def fusion_pricer(self, device, version=None, content=None) -> "XlaGpuPairPricer":
        """A pricer of (producer, consumer) pairs for a fusion pass: XLA's `GpuPerformanceModelCache`.

        **Arguments:** `device`; `version`: `instruction -> int`, bumped by the
        pass whenever an instruction changes in place (a fusion that grows);
        default: instructions never change; `content`: `instruction -> content id`
        (`hlo._structure.ContentIds.kernel`, kept up to date by the pass): kernels of
        one content are analysed once (this model `prices_by_content`); None: each is.

        **Returns:** an `XlaGpuPairPricer`; its `pair(producer, consumer)` gives
        exactly `estimate_fusion(producer, [consumer])`'s
        `(producer_s, consumers_s[0], fused_consumers_s[0])`.
        """
        self._check(device)
        return XlaGpuPairPricer(self, device, version, content)




def _scatter_in_place(costs: KernelCosts) -> KernelCosts:
    """`costs` of a fusion whose root is a scatter with the scattered-into operands read and the result
    written only where the updates go (`XlaGpuModel.in_place_scatter`), as XLA's `HandleScatter` counts a
    scatter run on its own: each fusion operand that only the scatter's first operands read counts its
    updates' bytes, and the result writes the updates' bytes. Both are the updates' bytes also when they
    exceed the buffer (many updates per element, a segment sum): the emitter does one atomic
    read-modify-write per update element, and the read time prices the buffer's own bytes as the net
    (first-touch) part and the rest as cache re-reads. Any other kernel's `costs` unchanged."""
    kernel = costs.kernel
    comp = kernel.fused_computation if kernel.opcode == "fusion" else None
    root = comp.root if comp is not None else None
    if root is None or root.opcode != "scatter":
        return costs
    n = (len(root.operands) - 1) // 2
    operand_bytes = list(costs.operand_bytes)
    written = 0.0
    for j in range(n):
        updates = float(shape_size_cached(root.operands[n + 1 + j].shape))
        written += updates
        target = root.operands[j]
        if target.opcode == "parameter" and target.users == [root] and target.parameter_number < len(operand_bytes):
            operand_bytes[target.parameter_number] = updates
    return dataclasses.replace(costs, operand_bytes=operand_bytes, bytes_written=written)
