"""Collectives as the models see them, and XLA's NCCL ring model of their time.

A collective's counts are XLA's `GpuHloCostAnalysis` ones (`analysis._gpu_rules`,
research note §3.2): bytes transferred (the output of an all-reduce,
all-gather or all-to-all, the input of a reduce-scatter, operand 0 of a
collective-permute), bytes accessed, the reduction's flops, the number of
ranks (`analysis._collective_groups`, §3.1) and the ring scaling ratio.
Three ways to turn them into time:

- `nccl_ring_time` (what `xla-gpu` uses): XLA's
  `GpuPerformanceWithCollectiveModel::ComputeCollectiveTime`
  (`gpu_collective_performance_model.cc`): 5 µs NCCL launch, plus the
  reduction's compute time spread over the channels, plus bytes accessed over
  the ring bus bandwidth (per-generation low-latency tiers, NVLink lanes when
  the device has active links, 0.92 discount, per-channel LL128 cap) times the
  scaling ratio; a group of one device costs the launch only and a `-done` 0.
  XLA prices only all-reduce, all-gather and reduce-scatter (and their async
  forms) this way and every other collective at the launch alone; with
  `extensions=True` (the default of the models) all-to-all moves
  (N-1)/N of its bytes and collective-permute, send and recv move all of
  theirs over the same bus bandwidth (scaling ratio 1), marked as extensions
  in the result.
- `SolModel` (`sol_gpu_cost_model.cc`, in `_collective_sol`): XLA's speed-of-light model of NCCL
  over the network between hosts: ring (all-gather, reduce-scatter,
  all-reduce in two rounds, send/recv), all-to-all, and the intra-node
  one-/two-shot all-reduce kernels; `sol_collective_time` is XLA's
  `SolLatencyEstimator::ComputeCollectiveTime` dispatch (single-partition
  collectives to the measured table, multi-host ones to the SoL formulas
  plus HBM time).
- `CollectiveTable` (what `xla-gpu-tables` uses; `_collective_table`): the measured table of the
  device (`devices.collective_table`) interpolated in bytes and group size;
  `XlaCollectiveInterpolator` is XLA's own `CollectiveInterpolator` over the
  same rows (exact key, then the (opcode, communication type) fallback).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis.interpreter import KEY_COLL_BYTES, KEY_COLL_DEVICES, KEY_COLL_SCALE
from ..analysis.collectives import (
    CollectiveGroupError,
    group_count_and_size,
    group_mode,
    module_counts,
    participant_counts,
    replica_groups,
    source_target_pairs,
)
from ..analysis import kernel_cost
from ..analysis.shapes import all_leaves, first_array

__all__ = [
    "Collective",
    "CollectiveTime",
    "communication_type",
    "describe_collective",
    "nccl_ring_time",
    "nvlink_bytes_per_s",
    "nvlink_lane_gbps",
    "permute_type",
    "wire_bytes",
]

# The `-start` forms and what they start; the `-done` forms cost nothing (XLA returns 0).
SYNC_KIND = {
    "all-reduce": "all-reduce", "all-reduce-start": "all-reduce",
    "all-gather": "all-gather", "all-gather-start": "all-gather",
    "reduce-scatter": "reduce-scatter", "all-to-all": "all-to-all", "ragged-all-to-all": "all-to-all",
    "collective-permute": "collective-permute", "collective-permute-start": "collective-permute",
    "collective-broadcast": "collective-broadcast", "send": "send", "recv": "recv",
}
DONE_OPCODES = frozenset({"all-reduce-done", "all-gather-done", "collective-permute-done", "send-done", "recv-done"})
#: The collectives XLA prices with its ring model (the others: the launch alone, or an extension).
RING_KINDS = frozenset({"all-reduce", "all-gather", "reduce-scatter"})

# `GpuPerformanceModelBase::kNcclKernelLaunchOverhead`.
NCCL_LAUNCH_S = 5e-6


@dataclass(frozen=True, slots=True)
class Collective:
    """One collective as the models see it.

    - `opcode` as written; `kind`: the synchronous operation
      (`"all-reduce"` for `all-reduce-start`, ...); `phase`: `"sync"`, `"start"`.
    - `bytes_transferred`, `bytes_accessed`, `flops` (the reduction's,
      GPU cycle-weighted), `ranks` (XLA's `NumOfDevices`, 0 where XLA sets
      none), `scaling_ratio`: `GpuHloCostAnalysis`'s figures.
    - `groups` (ids per group; None for collective-permute / send / recv),
      `group_count`, `group_size` (XLA's `GetReplicaGroupCountAndSize`; None
      when groups differ in size), `mode` (group mode), `pairs`
      (collective-permute), `replicas`, `partitions` (module counts),
      `element_type`.
    """

    instr: Any = field(repr=False, compare=False)
    opcode: str
    kind: str
    phase: str
    element_type: str
    bytes_transferred: float
    bytes_accessed: float
    flops: float
    ranks: int
    scaling_ratio: float
    groups: tuple | None
    group_count: int | None
    group_size: int | None
    mode: str | None
    pairs: tuple
    replicas: int
    partitions: int

    @property
    def devices(self) -> int | None:
        """Devices in one group: the group size, 2 for a point-to-point transfer, None when unknown."""
        if self.kind in ("collective-permute", "send", "recv"):
            return 2
        return self.group_size


def _array_bytes(shape, skip_index: int = -1) -> int:
    total = 0
    for index, leaf in all_leaves(shape):
        if index and index[0] == skip_index:
            continue
        if leaf.element_type not in ("tuple", "token", "opaque"):
            total += leaf.byte_size
    return total


def describe_collective(instr, device=None) -> Collective:
    """The `Collective` of an instruction (any opcode in `SYNC_KIND`).

    **Arguments:** `instr`; `device` (its op profile prices the reduction, as in
    `GpuHloCostAnalysis`). Raises `CollectiveGroupError` (a `ValueError`
    naming the instruction) for groups that cannot be read.
    """
    op = instr.opcode
    kind = SYNC_KIND[op]
    cost = kernel_cost(instr, "gpu", device)
    record = cost.instruction_cost(instr)
    extra = record.extra
    transferred = float(extra.get(KEY_COLL_BYTES, 0.0))
    if kind == "send":
        transferred = float(_array_bytes(instr.operands[0].shape))
    elif kind == "recv":
        transferred = float(_array_bytes(instr.shape, skip_index=1))  # (data, u32[] context, token)
    replicas, partitions = module_counts(instr)
    groups = count_size = mode = None
    if instr.has_attribute("replica_groups") or kind in RING_KINDS or kind == "all-to-all":
        mode = group_mode(instr)
        groups = replica_groups(instr)
        count_size = group_count_and_size(instr)
    pairs = source_target_pairs(instr)
    ranks = int(extra.get(KEY_COLL_DEVICES, 0.0))
    if kind == "all-to-all" and groups is not None:
        ranks = max([1, *participant_counts(instr, replicas, partitions)])
    return Collective(
        instr=instr, opcode=op, kind=kind, phase="start" if op.endswith("-start") else "sync",
        element_type=first_array(instr.shape).element_type if kind != "send" else
        first_array(instr.operands[0].shape).element_type,
        bytes_transferred=transferred,
        bytes_accessed=float(cost.bytes_accessed) if kind in RING_KINDS else transferred,
        flops=float(cost.flops) if kind in ("all-reduce", "reduce-scatter") else 0.0,
        ranks=ranks, scaling_ratio=float(extra.get(KEY_COLL_SCALE, 0.0)),
        groups=groups, group_count=count_size[0] if count_size else None,
        group_size=count_size[1] if count_size else None, mode=mode, pairs=pairs,
        replicas=replicas, partitions=partitions,
    )


def collective_or_estimate(model_name: str, kernel, device, stacklevel: int = 4):
    """A collective's description (`describe_collective`), or the estimate that stands in for it: free for
    an asynchronous `*-done` (its time is on the start), unpriced, with a warning naming the kernel
    (`stacklevel` as for `warn_unpriced`, counted from the caller), when its groups cannot be read."""
    from ._base import KernelEstimate, warn_unpriced

    if kernel.opcode in DONE_OPCODES:
        return KernelEstimate.free(f"{kernel.opcode}: the time is on its start")
    try:
        return describe_collective(kernel, device)
    except ValueError as exc:
        why = f"cannot read the collective's groups: {exc}"
        warn_unpriced(model_name, kernel, why, stacklevel=stacklevel + 1)
        return KernelEstimate.unpriced(why)


def wire_bytes(c: Collective, devices: int) -> float:
    """Bytes each device sends under the bandwidth-optimal algorithm (the lower bound a roofline uses):
    all-reduce 2(N-1)/N of its buffer, all-gather, reduce-scatter and all-to-all (N-1)/N of the larger
    side, a point-to-point transfer (collective-permute, send, broadcast) all of it, recv nothing (its send
    carries the bytes)."""
    n = max(devices, 1)
    s = c.bytes_transferred
    if c.kind == "all-reduce":
        return 2.0 * (n - 1) / n * s
    if c.kind in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n * s
    if c.kind == "recv":
        return 0.0
    return s


# ---------------------------------------------------------------------------
# XLA's NCCL ring model (gpu_collective_performance_model.cc)

# Per generation (Volta, Ampere, Hopper, Blackwell, later), GB/s.
_LOW_LATENCY_MAX_GBPS = (39.0, 87.7, 141.0, 141.0, 141.0)
_LL128_PER_CHANNEL_GBPS = (20.0, 20.0, 36.7, 36.7, 36.7)
_INTRA_NODE_TIERS = (3.0, 4.0, 5.0, 6.0, 7.0, 9.0, 10.0, 12.0, 15.0, 18.0, 20.0, 30.0, 40.0)
_INTRA_NODE_TIERS_SM90 = (3.0, 6.0, 12.0, 15.0, 20.0, 24.0, 30.0, 40.0, 60.0)
# NVLink unidirectional bandwidth per lane by compute capability major, GB/s (Blackwell when unknown).
_NVLINK_LANE_GBPS = {6: 18.0, 7: 20.0, 8: 20.0, 9: 20.0, 10: 40.0}
_RING_DISCOUNT = 0.92
_LL128_THREADS = 640


# NVLink bandwidth per link and direction from NVIDIA's data sheets, bytes/s: NVLink 2 (V100),
# 3 (A100) and 4 (H100/H200) carry 25 GB/s per link each way (V100: 6 links, 300 GB/s in all; A100: 12,
# 600 GB/s; H100: 18, 900 GB/s), NVLink 5 (B200, GB200, GB300) 50 GB/s (18 links, 1.8 TB/s). These are
# the physical rates a roofline needs; XLA's collective model uses its own lower lane figures above.
_NVLINK_SPEC_BYTES_PER_S = {7: 25e9, 8: 25e9, 9: 25e9, 10: 50e9}


def nvlink_bytes_per_s(device) -> float:
    """Unidirectional NVLink bandwidth of the device (all its links), from NVIDIA's data sheets; 0 without links."""
    if not device.nvlink_links:
        return 0.0
    major = device.compute_capability[0] if device.compute_capability else 10
    return device.nvlink_links * _NVLINK_SPEC_BYTES_PER_S.get(major, 50e9)


def _generation(device) -> int:
    major = device.compute_capability[0] if device.compute_capability else 10
    return {7: 0, 8: 1, 9: 2, 10: 3}.get(major, 4)


def nvlink_lane_gbps(device) -> float:
    """XLA's `GetNvlinkBw` / `GetIciBandwidthPerLaneGbps`: NVLink GB/s per lane for the device's generation."""
    major = device.compute_capability[0] if device.compute_capability else 10
    return _NVLINK_LANE_GBPS.get(major, 40.0)


def _low_latency_gbps(device) -> float:
    tiers = _INTRA_NODE_TIERS_SM90 if (device.compute_capability or (10, 0))[0] >= 9 else _INTRA_NODE_TIERS
    # `GetMaxSysBwFromGpu` returns a float.
    limit = float(np.float32(_LOW_LATENCY_MAX_GBPS[_generation(device)]))
    i = bisect.bisect_left(tiers, limit)
    return tiers[i] if i < len(tiers) else tiers[-1]


@dataclass(frozen=True, slots=True)
class CollectiveTime:
    """A collective's time in parts: `compute_s` (the reduction), `network_s` (the transfer),
    `launch_s`; `time_s` their sum; `rule` names the formula; `details` its figures."""

    compute_s: float
    network_s: float
    launch_s: float
    rule: str
    details: dict = field(default_factory=dict, compare=False)
    hbm_s: float = 0.0

    @property
    def time_s(self) -> float:
        return self.compute_s + self.network_s + self.launch_s + self.hbm_s


def ring_bus_gbps(device, num_devices: int, *, max_channels: int = 32, min_channels: int = 1) -> tuple[float, int]:
    """`(bus GB/s before the scaling ratio, channels)` of XLA's ring model for `num_devices` ranks."""
    bw = _low_latency_gbps(device)
    channels = max(max(num_devices, min(min_channels, 1)), min(max_channels, 32))
    if device.nvlink_links:
        bw = nvlink_lane_gbps(device)
        channels = min(device.nvlink_links, channels)
    ll128 = float(np.float32(_LL128_PER_CHANNEL_GBPS[_generation(device)]))
    return min(bw * channels * _RING_DISCOUNT, channels * ll128), channels


def nccl_ring_time(c: Collective, device, compute_time, *, extensions: bool = True, max_channels: int = 32,
                   min_channels: int = 1, threads: int | None = None) -> CollectiveTime:
    """XLA's `ComputeCollectiveTime` for one collective (see the module docstring).

    **Arguments:** `c`; `device` (a GPU `DeviceSpec`); `compute_time(flops,
    blocks, threads) -> s`, XLA's `ComputeTime` (the `xla-gpu` model's);
    `extensions`: price all-to-all, collective-permute, send and recv by
    their transfer (XLA: launch only); `max_channels`, `min_channels`,
    `threads`: what XLA reads from `NCCL_MAX_NCHANNELS`, `NCCL_MIN_NCHANNELS`
    and `NCCL_NTHREADS` (defaults: unset).
    """
    if c.ranks == 1:
        return CollectiveTime(0.0, 0.0, NCCL_LAUNCH_S, "one device: launch only (XLA)")
    if c.kind in RING_KINDS:
        bw_intra = _low_latency_gbps(device)
        channels = max(max(c.ranks, min(min_channels, 1)), min(max_channels, 32))
        pcie_gbps = int(device.pcie_bandwidth_bytes_per_s) // (1 << 30)
        default_threads = 256 if bw_intra * channels <= pcie_gbps else _LL128_THREADS
        n_threads = default_threads
        if threads is not None and threads > 0:
            warp = device.warp_size or 32
            if threads % warp:
                n_threads = _LL128_THREADS
            else:
                n_threads = min(max(threads, _LL128_THREADS // 4), _LL128_THREADS)
        compute = compute_time(int(c.flops) // channels, channels, n_threads)
        bus, ring_channels = ring_bus_gbps(device, c.ranks, max_channels=max_channels, min_channels=min_channels)
        effective = bus * float(np.float32(c.scaling_ratio))
        network = c.bytes_accessed / (1e9 * effective) if effective > 0 else math.inf
        return CollectiveTime(compute, network, NCCL_LAUNCH_S, "nccl-ring (XLA)", {
            "channels": ring_channels, "threads": n_threads, "bus_gbps": bus, "effective_gbps": effective,
            "ranks": c.ranks, "scaling_ratio": c.scaling_ratio})
    if not extensions or c.kind == "collective-broadcast":
        return CollectiveTime(0.0, 0.0, NCCL_LAUNCH_S, "launch only (XLA does not model this collective)")
    n = c.devices or 2
    bus, channels = ring_bus_gbps(device, n, max_channels=max_channels, min_channels=min_channels)
    if c.kind == "all-to-all":
        moved = c.bytes_transferred * (n - 1) / n
        rule = "all-to-all over the ring bus (extension)"
    elif c.kind == "recv":
        moved = 0.0  # the matching send carries the bytes
        rule = "recv: the send moves the data (extension)"
    else:
        moved = c.bytes_transferred
        rule = "point-to-point over the ring bus (extension)"
    return CollectiveTime(0.0, moved / (1e9 * bus), NCCL_LAUNCH_S, rule,
                          {"bus_gbps": bus, "channels": channels, "devices": n, "bytes_moved": moved})


# ---------------------------------------------------------------------------
# Communication types (backends/gpu/transforms/collectives/collective_ops_utils.cc)


def communication_type(c: Collective, partition_size: int) -> str:
    """`"single_partition"`, `"multi_host_world_level"`, `"multi_host_non_world_level"` or `"undefined"`.

    XLA's `CommunicationType`: the participants of each group counted per
    partition of `partition_size` devices; one partition touched: single
    partition; every touched partition full: world level; else non world level.
    """
    if c.kind in ("collective-permute", "send", "recv"):
        targets: dict[int, set] = {}
        for s, t in c.pairs:
            targets.setdefault(s // partition_size, set()).add(t // partition_size)
        for src, tgt in targets.items():
            if len(tgt) > 1 or next(iter(tgt)) != src:
                return "multi_host_non_world_level"
        return "single_partition"
    groups = c.groups or ()
    counts: dict[int, int] | None = None
    for g in groups:
        buf: dict[int, int] = {}
        for rank in g:
            buf[rank // partition_size] = buf.get(rank // partition_size, 0) + 1
        if counts is not None and sorted(buf.values()) != sorted(counts.values()):
            raise CollectiveGroupError(f"'{c.instr.name}': non-homogeneous replica groups")
        if counts is None:
            counts = buf
    counts = counts or {}
    single = len(counts) == 1 or (c.replicas > 0 and not counts and c.replicas <= partition_size)
    if single:
        return "single_partition"
    if not counts or all(v == partition_size for v in counts.values()):
        return "multi_host_world_level"
    return "multi_host_non_world_level"


def permute_type(pairs, partition_size: int) -> str | None:
    """XLA's `GetCollectivePermuteCostModelType`: `"{intra,inter}_partition_{one_way,two_way_all_mutual,
    two_way_has_non_mutual}"`, or None for no pairs."""
    if not pairs:
        return None
    pair_set = set(pairs)
    sources = {s for s, _ in pairs}
    targets = {t for _, t in pairs}
    inter = any(s // partition_size != t // partition_size for s, t in pairs)
    mutual = all((t, s) in pair_set for s, t in pairs)
    two_edges = bool(sources & targets)
    where = "inter_partition" if inter else "intra_partition"
    if two_edges:
        return f"{where}_two_way_{'all_mutual' if mutual else 'has_non_mutual'}"
    return f"{where}_one_way"
