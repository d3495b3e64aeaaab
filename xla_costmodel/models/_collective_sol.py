"""XLA's speed-of-light model of collectives between hosts (`sol_gpu_cost_model.cc`, `sol_latency_estimator.cc`).

NCCL over the network between hosts: ring (all-gather, reduce-scatter,
all-reduce in two rounds, send/recv), all-to-all, and the intra-node one-/
two-shot all-reduce kernels (`SolModel`); `sol_collective_time` is XLA's
`SolLatencyEstimator::ComputeCollectiveTime` dispatch (single-partition
collectives go to the measured table, `_collective_table`; multi-host ones
to the SoL formulas plus HBM time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ._collectives import Collective, CollectiveTime, communication_type, nvlink_lane_gbps, permute_type

__all__ = ["SolConfig", "SolModel", "sol_collective_time", "sol_config"]

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
