"""Atomic contention of a scatter whose indices may collide: a term XLA's GPU model does not have.

XLA:GPU emits a scatter whose indices are not declared unique as one thread
per update element doing an atomic read-modify-write of its target
(`atomicAdd`, or a compare-and-swap loop). `GpuHloCostAnalysis` counts the
bytes (3·|updates| + |indices|) and the combiner's flops; nothing in XLA's
model prices the atomics themselves. When many updates land in few targets
they serialize: `numpyro_hier_regression_potential_grad@large` scatters
500,000 updates into 1,000 floats, measured 4.3 ms on an H100, priced 2 µs.

**The form** (`scatter_contention`):

- requests = update windows x the L2 lines each window's contiguous run
  touches, ⌈W · element bytes / line⌉ (W: elements per update window; a
  warp's lanes that hit one line go out as one request);
- target lines = ⌈bytes of the scattered-into operand / line⌉, the indices
  assumed spread evenly over it;
- the requests to one line are processed one after another, each one L2
  round trip (`L2_ROUND_TRIP_CYCLES` SM cycles at the device clock), while
  the lines proceed in parallel:
  contention_s = ⌈requests / target lines⌉ x round trip.

The kernel takes at least that long (`XlaGpuModel` raises its memory time to
it). Scatters declared `unique_indices` or `indices_are_sorted` get no term
(no collisions, or XLA combines runs of equal indices before the atomic).

The constants are hardware facts, not fitted: NVIDIA's L2 line is 128 bytes,
and an L2 hit round trip is about 280 SM cycles (279 on average across the
SMs of an L40, arXiv 2606.22588; Ampere and Hopper measure in the same
range). That contention is per line, not per address, is what GPU atomics
microbenchmarks show (Maucher et al., "Are Your GPU Atomics Secretly
Contending?", PLOS '25: atomics on one cache line contend).

Measured on the H100 (corpus capture): `numpyro_hier_regression_potential_grad@large`
(15,625 requests per line) 4.34 ms, priced 2.2 ms; `jax_ops_segment_sum@large`
(64 per line) stays memory-bound, as priced. A short queue costs less than a
round trip per request: `jax_ops_segment_sum@small` (64 per line on 64
lines) runs in 1-2 µs, priced 10 µs. The per-request cost grows with the
queue, which one linear constant cannot follow; a queue-dependent form needs
GPU measurements of scatters at several collision rates.

**What XLA's emitter does, and why it does not close the gap** (checked
against XLA's source, issue 31; not priced differently here):

- `ScatterWithDistributedUpdates` (every corpus scatter: CUPTI's grids equal
  `models._launch.scatter_launch`'s on all 13) emits one `AtomicRMWOp` per
  update element unless `unique_indices`. On Hopper, `VectorizeAtomicRMW`
  turns an f32 add in a 2- or 4-wide loop into one `atom.global.v4.f32.add`
  (inline asm: relaxed, GPU scope); any other atomic is scalar and
  `seq_cst` at system scope. An f32 max is a load of the target and, only
  when the update is larger, an integer `max`/`umin` atomic
  (`rewriteAtomicFMaxAsIntAtomics`), never vectorized. The combining of
  runs of equal indices before the atomic exists only in
  `ScatterWithDistributedIndices` (sorted, non-unique, more slices than 4
  warps per SM); sorted scatters with fewer slices take the naive path.
- None of this separates the measured queue costs: `jax_ops_segment_sum@small`
  (scalar `seq_cst` atomics, 16 lanes per request, 64 requests per line on 64
  lines) runs its 65,536 atomics in a 1.5 µs kernel, launch included: at
  most 45 cycles per request;
  `numpyro_hier_regression_potential_grad@large` (scalar `seq_cst` atomics,
  15,625 per line on 32 lines) takes 550 cycles per request. Same ordering,
  same width: the cost per request grows with the queue depth, which is a
  property of the L2's atomic unit under contention, and the depth itself
  depends on how the indices are spread (data). Both need GPU
  microbenchmarks (atomic throughput against queue depth) to price.
- The bytes a scatter moves follow XLA's `HandleScatter` (the buffer read
  and the result written once per update element): `in_place_scatter` in
  `models._xla_gpu`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.emission import fused_roots
from ..analysis import int_list_attribute
from ..analysis.shapes import first_array

__all__ = ["L2_LINE_BYTES", "L2_ROUND_TRIP_CYCLES", "ScatterContention", "scatter_contention"]

L2_LINE_BYTES = 128
L2_ROUND_TRIP_CYCLES = 279


@dataclass(frozen=True, slots=True)
class ScatterContention:
    """The contention term of one scatter: `requests`, `target_lines`, `per_line` (requests queued on one
    line, rounded up) and `time_s`."""

    requests: int
    target_lines: int
    per_line: int
    time_s: float


def _flag(instr, name: str) -> bool:
    value = instr.attribute(name, False) if instr.has_attribute(name) else False
    return value is True or str(value).lower() == "true"


def scatter_contention(kernel, device) -> ScatterContention | None:
    """The atomic contention of the scatter a kernel ends in (a scatter fusion, or a lone scatter).

    **Returns:** a `ScatterContention`, or None when the kernel has no
    scatter root, or its indices are declared unique or sorted.
    """
    roots = fused_roots(kernel)
    scatters = [r for r in roots if r.opcode == "scatter"]
    if not scatters or not device.clock_rate_ghz:
        return None
    worst = None
    for s in scatters:
        if _flag(s, "unique_indices") or _flag(s, "indices_are_sorted"):
            continue
        n = (len(s.operands) - 1) // 2
        target = first_array(s.operands[0].shape)
        updates = first_array(s.operands[n + 1].shape)
        window = math.prod(updates.dims[d] for d in int_list_attribute(s, "update_window_dims")) or 1
        windows = max(math.prod(updates.dims) // window, 1)
        element = max(target.byte_size // max(math.prod(target.dims), 1), 1)
        requests = windows * math.ceil(window * element / L2_LINE_BYTES)
        lines = max(math.ceil(target.byte_size / L2_LINE_BYTES), 1)
        per_line = math.ceil(requests / lines)
        t = per_line * L2_ROUND_TRIP_CYCLES / (device.clock_rate_ghz * 1e9)
        if worst is None or t > worst.time_s:
            worst = ScatterContention(requests, lines, per_line, t)
    return worst
