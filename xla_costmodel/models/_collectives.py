"""Collectives priced: XLA's NCCL ring model, XLA's SoL model, and XLA's measured collective table.

A collective's counts are XLA's `GpuHloCostAnalysis` ones (`analysis._gpu`,
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
- `SolModel` (`sol_gpu_cost_model.cc`): XLA's speed-of-light model of NCCL
  over the network between hosts: ring (all-gather, reduce-scatter,
  all-reduce in two rounds, send/recv), all-to-all, and the intra-node
  one-/two-shot all-reduce kernels; `sol_collective_time` is XLA's
  `SolLatencyEstimator::ComputeCollectiveTime` dispatch (single-partition
  collectives to the measured table, multi-host ones to the SoL formulas
  plus HBM time).
- `CollectiveTable` (what `xla-gpu-tables` uses): the measured table of the
  device (`devices.collective_table`) interpolated in bytes and group size;
  `XlaCollectiveInterpolator` is XLA's own `CollectiveInterpolator` over the
  same rows (exact key, then the (opcode, communication type) fallback).
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..analysis import _rules as R
from ..analysis._collective_groups import (
    CollectiveGroupError,
    group_count_and_size,
    group_mode,
    module_counts,
    participant_counts,
    replica_groups,
    source_target_pairs,
)
from ..analysis._kernel import kernel_cost
from ..analysis._shapes import first_array

__all__ = [
    "Collective",
    "CollectiveTable",
    "SolConfig",
    "SolModel",
    "XlaCollectiveInterpolator",
    "collective_table_for",
    "communication_type",
    "describe_collective",
    "nccl_ring_time",
    "nvlink_bytes_per_s",
    "permute_type",
    "sol_config",
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
_RING_KINDS = frozenset({"all-reduce", "all-gather", "reduce-scatter"})

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
    for index, leaf in R.all_leaves(shape):
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
    transferred = float(extra.get(R.KEY_COLL_BYTES, 0.0))
    if kind == "send":
        transferred = float(_array_bytes(instr.operands[0].shape))
    elif kind == "recv":
        transferred = float(_array_bytes(instr.shape, skip_index=1))  # (data, u32[] context, token)
    replicas, partitions = module_counts(instr)
    groups = count_size = mode = None
    if instr.has_attribute("replica_groups") or kind in _RING_KINDS or kind == "all-to-all":
        mode = group_mode(instr)
        groups = replica_groups(instr)
        count_size = group_count_and_size(instr)
    pairs = source_target_pairs(instr)
    ranks = int(extra.get(R.KEY_COLL_DEVICES, 0.0))
    if kind == "all-to-all" and groups is not None:
        ranks = max([1, *participant_counts(instr, replicas, partitions)])
    return Collective(
        instr=instr, opcode=op, kind=kind, phase="start" if op.endswith("-start") else "sync",
        element_type=first_array(instr.shape).element_type if kind != "send" else
        first_array(instr.operands[0].shape).element_type,
        bytes_transferred=transferred,
        bytes_accessed=float(cost.bytes_accessed) if kind in _RING_KINDS else transferred,
        flops=float(cost.flops) if kind in ("all-reduce", "reduce-scatter") else 0.0,
        ranks=ranks, scaling_ratio=float(extra.get(R.KEY_COLL_SCALE, 0.0)),
        groups=groups, group_count=count_size[0] if count_size else None,
        group_size=count_size[1] if count_size else None, mode=mode, pairs=pairs,
        replicas=replicas, partitions=partitions,
    )


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
    if c.kind in _RING_KINDS:
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
# XLA's SoL model (sol_gpu_cost_model.cc, sol_latency_estimator.cc)

_NCCL_COEFF = np.float32(0.45)  # `kDefaultNcclCostModelCoeff`
_CHUNK_BYTES = 4 * 1024 * 1024  # `kDefaultNcclCostModelChunkSizeBytes`
_HEADER_OVERHEAD = 0.025


def _scaled(base: float) -> float:
    """`base_f * kDefaultNcclCostModelCoeff` in single precision, as XLA writes the constants."""
    return float(np.float32(base) * _NCCL_COEFF)


@dataclass(frozen=True, slots=True)
class SolConfig:
    """`SolGPUCostModel::Config`: times in seconds, NIC and NVLink in GB/s."""

    nccl_op_launch_s: float
    nic_speed_gbps: float
    chunk_prep_s: float
    rtt_s: float
    gpus_per_node: int = 8
    chunk_size_bytes: int = _CHUNK_BYTES
    partition_size: int = 0
    nvlink_bw_per_lane_gbps: float = 0.0
    nvlink_barrier_s: float = 1.5e-6


# Per XLA device name (`device_to_cfg`); the key "<unknown>" for any other device.
_SOL_CONFIGS = {
    "NVIDIA H100 80GB HBM3": SolConfig(_scaled(100.0) * 1e-6, _scaled(55.56), _scaled(13.34) * 1e-6,
                                       _scaled(68.89) * 1e-6, nvlink_barrier_s=1.5e-6),
    "NVIDIA B200": SolConfig(_scaled(100.0) * 1e-6, _scaled(111.12), _scaled(4.45) * 1e-6,
                             _scaled(46.67) * 1e-6, nvlink_barrier_s=1e-6),
    "<unknown>": SolConfig(_scaled(100.0) * 1e-6, _scaled(111.12), _scaled(13.34) * 1e-6,
                           _scaled(68.89) * 1e-6, nvlink_barrier_s=1.5e-6),
}


def sol_config(device, **overrides) -> SolConfig:
    """XLA's `SolGPUCostModel::GetConfig` for a device (by its XLA name, `DeviceSpec.description`).

    **Arguments:** `overrides`: fields of `SolConfig` (what XLA takes from
    `xla_gpu_analytical_latency_estimator_options`).
    """
    name = getattr(device, "description", "") or ""
    cfg = _SOL_CONFIGS.get(name, _SOL_CONFIGS["<unknown>"])
    cfg = replace(cfg, nvlink_bw_per_lane_gbps=nvlink_lane_gbps(device) if getattr(device, "kind", "gpu") == "gpu"
                  else 0.0)
    return replace(cfg, **overrides) if overrides else cfg


class SolModel:
    """XLA's `SolGPUCostModel` (times in seconds)."""

    KINDS = ("all-gather", "reduce-scatter", "all-reduce", "send-recv")

    def __init__(self, config: SolConfig):
        self.config = config

    def _gpus_per_comm(self, nodes: int, kind: str, communicators: int) -> int:
        if kind == "send-recv":
            return 2
        gpn = self.config.gpus_per_node
        if gpn % communicators:
            raise ValueError(f"{communicators} communicators do not divide {gpn} GPUs per node")
        return nodes * gpn // communicators

    def transfer_s(self, per_gpu_bytes: int) -> float:
        return per_gpu_bytes / (1e9 * self.config.nic_speed_gbps) * (1 + _HEADER_OVERHEAD)

    def chunk_prep_s(self, per_gpu_bytes: int) -> float:
        return math.ceil(per_gpu_bytes / self.config.chunk_size_bytes) * self.config.chunk_prep_s

    def ring_latency(self, buffer_bytes: int, nodes: int, kind: str, communicators: int = 1) -> float:
        """`RingLatency`: all-gather, reduce-scatter, all-reduce (two rounds) or send-recv."""
        if kind not in self.KINDS:
            raise ValueError(f"unknown SoL ring collective {kind!r}; expected one of {', '.join(self.KINDS)}")
        gpus = self._gpus_per_comm(nodes, kind, communicators)
        per_gpu = int(buffer_bytes) if kind == "send-recv" else int(buffer_bytes) // gpus
        gpus_per_node = gpus // nodes
        step = self.transfer_s(per_gpu) + self.chunk_prep_s(per_gpu) + self.config.rtt_s
        rounds = 2 if kind == "all-reduce" else 1
        return step * (gpus - 1.0) / gpus_per_node * rounds + self.config.nccl_op_launch_s

    def all_to_all_latency(self, buffer_bytes: int, nodes: int, communicators: int = 1) -> float:
        """`AllToAllLatency`: every GPU sends 1/(N-1) of the buffer to each peer on another node."""
        gpus = self._gpus_per_comm(nodes, "all-to-all", communicators)
        gpus_per_node = gpus // nodes
        peers = gpus_per_node * (nodes - 1)
        per_peer = int(buffer_bytes) // (gpus - 1)
        step = self.transfer_s(per_peer) + self.chunk_prep_s(per_peer) + self.config.rtt_s
        return peers * step + self.config.nccl_op_launch_s

    def intra_node_all_reduce_latency(self, size_bytes: int, gpus: int, links: int) -> float:
        """`IntraNodeAllReduceLatency`: the one-shot (<= 256 KiB) or two-shot NVLink all-reduce kernel."""
        if links <= 0:
            raise ValueError("the intra-node all-reduce kernels need active NVLink links (got 0)")
        if self.config.nvlink_bw_per_lane_gbps <= 0:
            raise ValueError("nvlink_bw_per_lane_gbps must be > 0 for the intra-node all-reduce")
        bw = links * self.config.nvlink_bw_per_lane_gbps * 1e9
        launch = 1e-6  # GpuPerformanceModelBase::kKernelLaunchOverhead
        if size_bytes <= 256 * 1024:
            return launch + (gpus - 1) * size_bytes / bw + self.config.nvlink_barrier_s
        per_phase = (gpus - 1) * size_bytes / gpus
        return launch + 2 * (per_phase / bw + self.config.nvlink_barrier_s)


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


# ---------------------------------------------------------------------------
# The measured table


def _sizes(df) -> tuple[np.ndarray, np.ndarray]:
    df = df.sort_values("transfer_bytes")
    return df["transfer_bytes"].to_numpy(float), df["time_s"].to_numpy(float)


def _interp_log(x: float, xs: np.ndarray, ts: np.ndarray) -> float:
    """Time at `x` bytes: linear in log-log between measured sizes; below the smallest the smallest's
    time (the latency floor); above the largest the largest's throughput."""
    if x <= xs[0]:
        return float(ts[0])
    if x >= xs[-1]:
        return float(ts[-1] * x / xs[-1])
    j = int(np.searchsorted(xs, x))
    if xs[j] == x:
        return float(ts[j])
    lx0, lx1 = math.log(xs[j - 1]), math.log(xs[j])
    f = (math.log(x) - lx0) / (lx1 - lx0)
    return float(math.exp(math.log(ts[j - 1]) * (1 - f) + math.log(ts[j]) * f))


class CollectiveTable:
    """One GPU's measured collective table, interpolated in bytes and group size (`xla-gpu-tables`).

    Rows are matched by the synchronous operation (an `-start` reads the rows
    of its operation) and, for collective-permute, by XLA's pattern type
    (within one partition of `partition_size` devices); for the others by
    the exact groups when the table has them, else by the number of devices
    per group (on a switched NVLink domain the members matter less than how
    many there are), else between the two nearest measured group sizes
    (log-linear in the group size). Within the matched rows the time is
    interpolated in bytes by `_interp_log`. The reduction's element type is
    not matched (the table measured f32 only).

    **Arguments:** `rows`: the GPU's rows of `devices.collective_table`
    (unmeasured rows are skipped); `partition_size`: devices per host (8).
    """

    def __init__(self, rows, partition_size: int = 8):
        self.partition_size = partition_size
        rows = rows[rows["measured"]]
        self._by_groups: dict[tuple, tuple] = {}
        self._by_size: dict[tuple, dict] = {}
        self._permutes: dict[str, tuple] = {}
        for (opcode, text), df in rows.groupby(["opcode", "replica_groups"], sort=False):
            if opcode == "collective-permute":
                continue
            from ..analysis._collective_groups import iota_groups

            groups = iota_groups(text)
            self._by_groups[(opcode, groups)] = _sizes(df)
            size = len(groups[0])
            self._by_size.setdefault((opcode, size), {})[len(groups)] = _sizes(df)
        cps = rows[rows["opcode"] == "collective-permute"]
        for pairs, df in cps.groupby("source_target_pairs", sort=False):
            kind = permute_type(pairs, partition_size)
            self._permutes[kind] = _sizes(df)

    def group_sizes(self, kind: str) -> list[int]:
        return sorted({s for (op, s) in self._by_size if op == kind})

    def time_s(self, c: Collective) -> tuple[float, str] | None:
        """`(seconds, how it was found)` for a collective, or None when the table cannot price it."""
        kind, x = c.kind, c.bytes_transferred
        if kind in ("collective-permute",):
            pt = permute_type(c.pairs, self.partition_size)
            hit = self._permutes.get(pt)
            if hit is None:
                return None
            return _interp_log(x, *hit), f"collective-permute {pt}"
        if kind not in _RING_KINDS and kind != "all-to-all":
            return None
        if c.groups:
            hit = self._by_groups.get((kind, tuple(tuple(g) for g in c.groups)))
            if hit is not None:
                return _interp_log(x, *hit), f"{kind}, the same groups"
        n = c.group_size
        if not n:
            return None
        layouts = self._by_size.get((kind, n))
        if layouts:
            sizes = layouts.get(c.group_count) or layouts[max(layouts)]
            return _interp_log(x, *sizes), f"{kind}, {n} devices per group"
        measured = self.group_sizes(kind)
        lower = [s for s in measured if s < n]
        upper = [s for s in measured if s > n]
        if not lower or not upper:
            return None
        lo, hi = lower[-1], upper[0]

        def at(size):
            lay = self._by_size[(kind, size)]
            return _interp_log(x, *lay[max(lay)])

        f = (math.log(n) - math.log(lo)) / (math.log(hi) - math.log(lo))
        t = math.exp(math.log(at(lo)) * (1 - f) + math.log(at(hi)) * f)
        return t, f"{kind}, between {lo} and {hi} devices per group"


class XlaCollectiveInterpolator:
    """XLA's `CollectiveInterpolator::Create(num_devices_per_host, device_info)` over one GPU's rows.

    Exact map: (opcode as written, the groups, the element type for
    all-reduce and reduce-scatter) to throughput by bytes snapped to the
    nearest power of two (ties up) and clamped to [1 KiB, 1 GiB]; a list of
    groups is replaced by the contiguous iota of the same count and size
    (as XLA's `CanonicalDeviceList`). Fallback map (not for
    collective-permute): (synchronous opcode, communication type) to
    throughput by (bytes, devices per group) both snapped, devices clamped
    to [2, 8]. A collective-permute is keyed by its pattern type with the
    module's `num_partitions` as the partition (XLA's quirk: every permute
    counts as intra-partition).
    """

    def __init__(self, rows, num_devices_per_host: int = 8):
        self.num_devices_per_host = num_devices_per_host
        rows = rows[rows["measured"]]
        from ..analysis._collective_groups import iota_groups

        self._exact: dict[tuple, dict[int, float]] = {}
        self._fallback: dict[tuple, dict[tuple, float]] = {}
        for r in rows.itertuples(index=False):
            if r.opcode == "collective-permute":
                key = ("collective-permute", permute_type(r.source_target_pairs, num_devices_per_host), None)
                self._exact.setdefault(key, {})[int(r.transfer_bytes)] = r.throughput_bytes_per_s
                continue
            groups = iota_groups(r.replica_groups)
            dtype = r.element_type if r.opcode in ("all-reduce", "all-reduce-start", "reduce-scatter") else None
            self._exact.setdefault((r.opcode, groups, dtype), {})[int(r.transfer_bytes)] = r.throughput_bytes_per_s
            comm = _table_comm_type(groups, num_devices_per_host)
            self._fallback.setdefault((r.opcode, comm), {})[(int(r.transfer_bytes), len(groups[0]))] = \
                r.throughput_bytes_per_s

    @staticmethod
    def _snap(x: int, lo: int, hi: int) -> int:
        from ._gemm_table import _next_pow2, _prev_pow2

        prev, nxt = _prev_pow2(x), _next_pow2(x)
        v = prev if x - prev < nxt - x else nxt
        return min(max(v, lo), hi)

    def time_s(self, c: Collective) -> float | None:
        """Seconds, or None where XLA returns "Cannot find key"."""
        x = int(c.bytes_transferred)
        if c.kind == "collective-permute":
            pt = permute_type(c.pairs, max(c.partitions, 1))
            table = self._exact.get(("collective-permute", pt, None))
            if table is None:
                return None
            return x / table[self._snap(x, 1 << 10, 1 << 30)]
        # XLA's CanonicalDeviceList: an iota list as written, any other list as the contiguous iota of
        # its (group count, group size) (XLA's GetReplicaGroupCountAndSize), whatever its members.
        count_size = (c.group_count, c.group_size) if c.group_size else None
        if count_size is None:
            return None
        if c.groups and _written_as_iota(c.instr):
            groups = tuple(tuple(g) for g in c.groups)
        else:
            g, size = count_size
            groups = tuple(tuple(range(i * size, (i + 1) * size)) for i in range(g))
        dtype = c.element_type if c.opcode in ("all-reduce", "all-reduce-start", "reduce-scatter") else None
        table = self._exact.get((c.opcode, groups, dtype))
        if table is not None:
            return x / table[self._snap(x, 1 << 10, 1 << 30)]
        comm = communication_type(c, self.num_devices_per_host)
        table = self._fallback.get((c.kind, comm))
        if table is None:
            return None
        point = (self._snap(x, 1 << 10, 1 << 30), self._snap(count_size[1], 2, 8))
        rate = table.get(point)
        return None if rate is None else x / rate


def _written_as_iota(instr) -> bool:
    from ..analysis._collective_groups import is_iota

    return instr is not None and is_iota(instr)


def _table_comm_type(groups, partition: int) -> str:
    parts = {}
    for rank in groups[0]:
        parts[rank // partition] = parts.get(rank // partition, 0) + 1
    if len(parts) == 1:
        return "single_partition"
    return "multi_host_world_level" if all(v == partition for v in parts.values()) else "multi_host_non_world_level"


@functools.cache
def collective_table_for(table_key: str, method: str = "log-bytes", partition_size: int = 8):
    """The interpolator of one table key, or None when the table has no such GPU.

    **Arguments:** `method`: `"log-bytes"` (`CollectiveTable`) or `"xla"`
    (`XlaCollectiveInterpolator`); `partition_size`: devices per host.
    """
    from ..devices import collective_table

    rows = collective_table(table_key)
    if rows.empty:
        return None
    if method == "xla":
        return XlaCollectiveInterpolator(rows, partition_size)
    if method == "log-bytes":
        return CollectiveTable(rows, partition_size)
    raise ValueError(f"unknown collective interpolation {method!r}; expected 'log-bytes' or 'xla'")


def sol_collective_time(c: Collective, device, config: SolConfig, hbm_compute_time) -> CollectiveTime | None:
    """XLA's `SolLatencyEstimator::ComputeCollectiveTime` for a multi-host collective (None: single
    partition, for the table; or a pattern XLA cannot price).

    `hbm_compute_time(c) -> seconds`: the reduction's compute time from the
    analytical model (XLA adds it for all-reduce and reduce-scatter).
    """
    partition = config.partition_size or config.gpus_per_node
    sol = SolModel(config)
    hbm = float(np.float32(c.bytes_accessed) / np.float32(device.memory_bandwidth_bytes_per_s))
    x = int(c.bytes_transferred)
    if c.kind in ("collective-permute", "send", "recv"):
        pt = permute_type(c.pairs, partition) if c.pairs else "inter_partition_one_way"
        if pt is None or pt.startswith("intra"):
            return None
        t = sol.ring_latency(x, 2, "send-recv", 1)
        return CollectiveTime(0.0, t, 0.0, "sol send-recv between hosts (XLA)", {"permute_type": pt}, hbm_s=hbm)
    comm = communication_type(c, partition)
    if comm == "single_partition" or c.group_size is None:
        return None
    nodes = c.group_size // partition if comm == "multi_host_world_level" else c.group_size
    communicators = c.group_count or 1
    compute = hbm_compute_time(c) if c.kind in ("all-reduce", "reduce-scatter") else 0.0
    if c.kind == "all-to-all":
        t = sol.all_to_all_latency(x, nodes, communicators)
    else:
        t = sol.ring_latency(x, nodes, c.kind, communicators)
    return CollectiveTime(compute, t, 0.0, f"sol {comm.replace('_', ' ')} (XLA)",
                          {"nodes": nodes, "communicators": communicators}, hbm_s=hbm)
