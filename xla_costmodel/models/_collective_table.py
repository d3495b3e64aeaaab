"""XLA's measured collective table of a GPU, interpolated in bytes and group size (what `xla-gpu-tables` uses).

`CollectiveTable`: the device's rows (`devices.collective_table`) by
synchronous kind, linear in log-log between measured sizes and group sizes;
`XlaCollectiveInterpolator`: XLA's own `CollectiveInterpolator` over the same
rows (exact key, then the (opcode, communication type) fallback).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ._collectives import RING_KINDS, Collective, communication_type, permute_type

__all__ = ["CollectiveTable", "XlaCollectiveInterpolator", "collective_table_for"]


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
            from ..analysis.collectives import iota_groups

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
        if kind not in RING_KINDS and kind != "all-to-all":
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
        from ..analysis.collectives import iota_groups

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
    from ..analysis.collectives import is_iota

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
