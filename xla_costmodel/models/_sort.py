"""The time of a sort on a GPU, kernel by kernel, from the plan `analysis._sort` gives.

- A sort (or sort fusion) that XLA's `sort_rewriter` would send to CUB on the device is priced as CUB's
  radix sort, also when the module kept XLA's sort (a compile without a GPU does, for want of CUB's
  scratch sizes); the note says so. Otherwise XLA's bitonic kernels are priced one by one.
- **Every kernel** pays the device's launch overhead and moves its global bytes at the device's memory
  bandwidth; a parameter copy and a CUB memset are launches too.
- **A shared-memory (tiled) bitonic kernel** adds its compare-exchange stages: per stage, the larger of
  the shared-memory traffic of the blocks resident on one SM (each stage reads and writes the tile of
  every operand) at 128 bytes per clock per SM (32 banks of 4 bytes), and the latency of one stage: each
  thread's two compare-exchanges (a shared-memory load, the comparator's dependent operations, a store)
  and a barrier. The latencies are microbenchmark figures for recent NVIDIA GPUs (`models._gpu_latency`:
  shared memory about 30 cycles, a dependent ALU operation about 4, a block barrier about 20), not
  fitted to any capture.
  Blocks that do not fit on the SMs at once run in waves.
- **CUB's kernels** (`analysis._sort`, from CUB's agents) take the larger of their traffic at the memory
  bandwidth and their latency path, built from the same microbenchmark latencies plus an L2 hit (about
  260 cycles) and an HBM access (about 600 cycles), `models._gpu_latency`, not fitted to any capture:
  - a memset is its launch;
  - the exclusive sum: load the bins (L2), a block scan (two shared-memory rounds with barriers), store (L2);
  - the histogram: each working block loads its tile (HBM), counts `items x passes` digits into shared
    memory (one issue each), merges (barrier) and adds its bins to the global ones (L2), per tile it loops
    over;
  - a onesweep pass, per block: take a tile index (an L2 atomic), load the keys (HBM), rank them
    (`RADIX_RANK_MATCH_EARLY_COUNTS_ANY`: per key a warp match and a shared-memory count, then a scan of the
    digit counts), scatter them to shared memory, read the pass's global bins (L2), then the **decoupled
    look-back**: a block reads its predecessors' counts one after another until one holds an inclusive
    prefix; blocks that start together resolve as a chain, one L2 round trip per block, so the last of the
    blocks resident at once waits `resident - 1` L2 latencies; then keys and values go out (a shared-memory
    pass and an HBM write each, the values loaded first). Blocks beyond one wave add their own work per wave.
  - a segmented pass (a batch): per wave of rows, each block loads its row tile by tile and counts its digits
    (upsweep), scans the counts, then loads, ranks and scatters each tile as a onesweep block does, without
    the look-back.
"""

from __future__ import annotations

import math

from ..analysis.library import custom_call_target
from ..analysis.shapes import first_array
from ..analysis.sort import (UNROLL, SortPlan, bitonic_plan, cub_float_keys, cub_radix_plan, cub_sort_decision,
                              cub_sort_operands, sort_of)
from ..hlo import PRIMITIVE_BITS
from ._base import KernelEstimate, dominant_bound
from ._dot_fusion import max_blocks_per_sm
from ._gpu_latency import (ALU_LATENCY_CYCLES, BARRIER_CYCLES, HBM_LATENCY_CYCLES, L2_LATENCY_CYCLES,
                           SMEM_LATENCY_CYCLES)

__all__ = ["is_sort_kernel", "price_sort", "sort_plan"]

SMEM_BYTES_PER_CLOCK = 128          # 32 banks x 4 bytes per SM per clock
#: Registers per thread of CUB 3.2's sm_90 onesweep kernel (the capture's launch record: 80 with 384
#: threads), which bound its resident blocks per SM.
ONESWEEP_REGISTERS = 80


def is_sort_kernel(instr) -> bool:
    """A sort, a sort fusion or a CUB sort custom call."""
    return sort_of(instr) is not None or "cub_sort" in custom_call_target(instr)


def _comparator_ops(sort) -> int:
    body = sort.attribute("to_apply")
    return sum(1 for h in body.instructions if h.opcode not in ("parameter", "constant"))


def _cub_plan_of_call(call, device) -> SortPlan:
    keys = first_array(call.operands[0].shape)
    n = keys.dims[-1] if keys.dims else 1
    batch = max(math.prod(keys.dims) // max(n, 1), 1)
    value = 0
    if len(call.operands) >= 2:
        v = first_array(call.operands[1].shape)
        if math.prod(v.dims) == math.prod(keys.dims):
            value = max(PRIMITIVE_BITS[v.element_type] // 8, 1)
    return cub_radix_plan(batch, n, max(PRIMITIVE_BITS[keys.element_type] // 8, 1), value, device.core_count,
                          keys.element_type == "f32")


def sort_plan(instr, device) -> tuple[SortPlan, str]:
    """The kernels `instr` runs on `device` and a note: a CUB call's radix sort, XLA's sort where
    `sort_rewriter` keeps it, or CUB's radix sort where it would send the sort there."""
    if "cub_sort" in custom_call_target(instr):
        return _cub_plan_of_call(instr, device), ""
    cub, why = cub_sort_decision(instr, device)
    if not cub:
        return bitonic_plan(instr, device), ""
    ops, _ = cub_sort_operands(instr)  # a stable sort's added tie-break iota is not sent to CUB
    shape = first_array(ops[0].shape)
    n = shape.dims[-1]
    key_bytes = max(PRIMITIVE_BITS[shape.element_type] // 8, 1)
    value_bytes = max(PRIMITIVE_BITS[first_array(ops[1].shape).element_type] // 8, 1) if len(ops) == 2 else 0
    # sort_rewriter hands a numpy-order float sort to CUB as unsigned keys (`cub_sort_decision`)
    plan = cub_radix_plan(math.prod(shape.dims) // n, n, key_bytes, value_bytes, device.core_count,
                          cub_float_keys(instr))
    return plan, f"XLA:GPU sends this sort to CUB on {device.name} ({why}): priced as CUB's radix sort"


def _tiled_stage_s(kernel, device, comparator_ops: int) -> tuple[float, int]:
    """One shared-memory stage's time and the number of waves of a tiled bitonic kernel."""
    sms = device.core_count
    threads_limit = device.threads_per_core_limit or 2048
    resident = max(1, min(threads_limit // max(kernel.threads, 1),
                          (device.shared_memory_per_core_bytes or 1 << 30) // max(kernel.shared_bytes, 1)))
    limit = max_blocks_per_sm(device)
    resident = min(resident, limit) if limit else resident
    waves = math.ceil(kernel.blocks / (sms * resident))
    per_sm = min(resident, math.ceil(kernel.blocks / sms))
    clock = device.clock_rate_ghz * 1e9
    traffic_s = per_sm * 2 * kernel.shared_bytes / (SMEM_BYTES_PER_CLOCK * clock)
    latency_s = (UNROLL // 2 * (2 * SMEM_LATENCY_CYCLES + comparator_ops * ALU_LATENCY_CYCLES)
                 + BARRIER_CYCLES) / clock
    return max(traffic_s, latency_s), waves


def _onesweep_resident(k, device) -> int:
    """Onesweep blocks resident at once on the whole GPU: threads, registers and the block limit per SM."""
    threads = max(k.threads, 1)
    per_sm = min((device.threads_per_core_limit or 2048) // threads,
                 (device.registers_per_core_limit or 65536) // (ONESWEEP_REGISTERS * threads))
    limit = max_blocks_per_sm(device)
    per_sm = min(per_sm, limit) if limit else per_sm
    return max(per_sm, 1) * device.core_count


def _cub_latency_s(k, plan: SortPlan, device) -> float:
    """The latency path of one CUB kernel (module docstring), launch excluded."""
    clock = device.clock_rate_ghz * 1e9
    l2, hbm, smem, alu = L2_LATENCY_CYCLES, HBM_LATENCY_CYCLES, SMEM_LATENCY_CYCLES, ALU_LATENCY_CYCLES
    sync = smem + BARRIER_CYCLES
    if k.kind == "memset":
        return 0.0
    if k.kind == "scan":
        return (2 * l2 + 2 * sync) / clock
    if k.kind == "histogram":
        tiles = math.ceil(plan.batch * plan.n / max(k.threads * k.items, 1))
        per_block = math.ceil(tiles / max(k.blocks, 1))
        tile = hbm + k.items * k.stages * alu + sync
        return (per_block * tile + l2) / clock
    rank = k.items * (2 * smem + alu) + 2 * sync                 # a match and a count per key, a digit scan
    out = k.items * alu + sync + hbm                             # through shared memory, then to HBM
    values = hbm + out if plan.value_bytes else 0                # load, then out as the keys
    if k.kind == "pass":
        resident = _onesweep_resident(k, device)
        waves = math.ceil(k.blocks / resident)
        block = l2 + hbm + rank + sync + l2 + out + values       # tile index, keys, rank, bins, keys out, values
        chain = (min(k.blocks, resident) - 1) * l2                # decoupled look-back
        return (waves * block + chain) / clock
    if k.kind == "single_tile":
        tiles = math.ceil(plan.n / max(k.threads * k.items, 1))
        return k.stages * tiles * (hbm + rank + out + values) / clock
    if k.kind == "segmented":
        threads = max(k.threads, 1)
        per_sm = max(1, (device.threads_per_core_limit or 2048) // threads)
        limit = max_blocks_per_sm(device)
        per_sm = min(per_sm, limit) if limit else per_sm
        waves = math.ceil(k.blocks / (device.core_count * per_sm))
        tiles = math.ceil(plan.n / max(threads * k.items, 1))
        count = hbm + k.items * alu                               # upsweep: load a tile, count its digits
        block = tiles * count + 2 * sync + tiles * (hbm + rank + out + values)
        return waves * block / clock
    return 0.0


def price_sort(instr, device) -> KernelEstimate:
    """A sort kernel's time on a GPU `device`: the sum over its kernels (module docstring); `details`
    holds the plan (`library`, `kernels`, `launches`, per-kernel times)."""
    plan, note = sort_plan(instr, device)
    launch = device.kernel_launch_overhead_s
    bw = device.memory_bandwidth_bytes_per_s
    sort = sort_of(instr)
    ops = _comparator_ops(sort) if sort is not None else 1
    memory = compute = launches = 0.0
    per_kernel = []
    for k in plan.kernels:
        mem = (k.bytes_read + k.bytes_written) / bw
        stages_s = 0.0
        if k.kind == "tiled":
            stage, waves = _tiled_stage_s(k, device, ops)
            stages_s = waves * k.stages * stage
        elif plan.library == "cub":
            # the larger of traffic and latency path: the latency beyond the traffic is the rest
            stages_s = max(_cub_latency_s(k, plan, device) - mem, 0.0)
        memory += mem
        compute += stages_s
        launches += launch
        per_kernel.append((k.kind, launch + mem + stages_s))
    time = memory + compute + launches
    details = {"emitter": "sort", "library": plan.library, "sort_plan": plan.reason, "kernels": len(plan.kernels),
               "launches": plan.launches, "tile": plan.tile, "kernel_times_s": per_kernel, "exec_s": time - launches}
    return KernelEstimate(compute_s=compute, memory_s=memory, launch_s=launches, time_s=time,
                          bound=dominant_bound(compute, memory, launches), note=note, details=details)
