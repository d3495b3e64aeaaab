"""XLA's measured GPU tables: GEMM throughput and collective throughput, as DataFrames.

The numbers come from XLA's `default_matmul_perf_table.txtpb` and
`default_collective_perf_table.txtpb` (`xla/service/gpu/model/`), converted
by `scripts/convert_xla_tables.py` into `data/xla_tables/*.csv`;
`PROVENANCE.json` there names the repository, commit, date and licence
(`xla_tables_source()`).

XLA picks a device's table by a key (`HloOpProfiles::GetDeviceSpecificProfileName`):
`"sm_<major><minor>"`, and for compute capability 10.0 only, `"_"` plus the
last word of the device name (`"sm_100_B200"`, `"sm_100_GB200"`). So an H200
reads the H100 table (`"sm_90"`), as in XLA. `xla_table_key(device)` applies
that rule.

What the tables mean:

- GEMM: one dot `[b,m,k] x [b,k,n] -> [b,m,n]` per row, `flops_per_s` the
  achieved rate (2·b·m·n·k / median kernel time) for the dtype combination
  `lhs x rhs -> out`.
- Collectives: one collective on an 8-GPU host (64 or 72 GPUs for the
  GB200/GB300 tables) per row; `network_throughput_bytes_per_s` is
  bytes / median time, where the bytes are XLA's `BytesTransferred`
  (`collective_interpolator.cc` builds the op and asks `GpuHloCostAnalysis`):
  the output of an all-gather, the input of a reduce-scatter (the table
  stores its output shape, so the input is output × group size), and the
  operand (= output) otherwise. Two GB200/GB300 rows carry no throughput (the
  field is absent, read as 0); they keep `measured=False` and NaN times.
"""

from __future__ import annotations

import functools
import json
import math
from importlib import resources

import pandas as pd

__all__ = ["collective_row_hlo", "collective_table", "gemm_table", "xla_table_key", "xla_tables_source",
           "MEASURED_ON"]

_DATA = resources.files(__package__).joinpath("data", "xla_tables")

# The GPU each table key was measured on (the note in XLA's tables and commit
# e97611c4c4, "GB200/GB300 collective tables"), named by this project's presets.
MEASURED_ON = {
    "sm_90": "h100-sxm",
    "sm_100_B200": "b200",
    "sm_100_GB200": "gb200",
    "sm_103": "gb300",
}

_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
          "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}


def xla_table_key(device) -> str | None:
    """The key XLA reads a GPU's tables under, or None for a device without a compute capability.

    **Arguments:** `device`: a `DeviceSpec` or a device name.

    **Returns:** `"sm_90"`, `"sm_100_B200"`, ... (XLA's
    `GetDeviceSpecificProfileName`: the device name's last word is appended
    for compute capability 10.0 only).
    """
    from ._registry import get_device

    spec = get_device(device)
    if spec.kind != "gpu" or spec.compute_capability is None:
        return None
    major, minor = spec.compute_capability
    key = f"sm_{major}{minor}"
    if key == "sm_100":
        words = spec.description.split()
        if not words:
            raise ValueError(f"device {spec.name!r}: XLA needs the device name (description) to pick an sm_100 table")
        key += "_" + words[-1]
    return key


@functools.cache
def xla_tables_source() -> dict:
    """Provenance of the bundled tables: repository, commit, date, licence, paths and row counts."""
    return json.loads(_DATA.joinpath("PROVENANCE.json").read_text(encoding="utf-8"))


def _key_for(device) -> str | None:
    """A table key given directly (`"sm_90"`) or the key of a device (name or `DeviceSpec`)."""
    if isinstance(device, str) and device.startswith("sm_"):
        return device
    return xla_table_key(device)


@functools.cache
def _gemm() -> pd.DataFrame:
    with _DATA.joinpath("gemm.csv").open("r", encoding="utf-8") as f:
        df = pd.read_csv(f, dtype={"table_key": str, "dtype_key": str})
    parts = df["dtype_key"].str.extract(r"^(?P<lhs_type>[a-z0-9]+)x(?P<rhs_type>[a-z0-9]+)->(?P<out_type>[a-z0-9]+)$")
    if parts.isna().any().any():
        bad = df.loc[parts.isna().any(axis=1), "dtype_key"].iloc[0]
        raise ValueError(f"gemm.csv: dtype key {bad!r} is not 'lhs x rhs -> out'")
    df = pd.concat([df, parts], axis=1)
    df.insert(1, "measured_on", df["table_key"].map(MEASURED_ON))
    df["flops"] = 2.0 * df["b"] * df["m"] * df["n"] * df["k"]
    df["time_s"] = df["flops"] / df["flops_per_s"]
    return df[["table_key", "measured_on", "b", "m", "n", "k", "dtype_key", "lhs_type", "rhs_type", "out_type",
               "flops", "flops_per_s", "time_s"]]


def gemm_table(device=None) -> pd.DataFrame:
    """XLA's measured GEMM table (all of it, or one GPU's part).

    **Arguments:** `device`: None (every GPU), a table key (`"sm_90"`), or a
    device name / `DeviceSpec` (its key by `xla_table_key`).

    **Returns:** one row per (GPU, b, m, n, k, dtype combination): `table_key`,
    `measured_on` (preset name), `b`, `m`, `n`, `k`, `dtype_key`
    (`"bf16xbf16->bf16"`), `lhs_type`, `rhs_type`, `out_type`, `flops`
    (2·b·m·n·k), `flops_per_s` (measured), `time_s` (= flops / flops_per_s,
    one launch). Empty (same columns) for a GPU the table does not cover.
    """
    df = _gemm()
    if device is not None:
        df = df[df["table_key"] == _key_for(device)]
    return df.reset_index(drop=True).copy()


def _ints(text) -> tuple[int, ...]:
    if not isinstance(text, str) or not text.strip():
        return ()
    return tuple(int(x) for x in text.split())


def _pairs(text) -> tuple[tuple[int, int], ...]:
    if not isinstance(text, str) or not text.strip():
        return ()
    return tuple(tuple(int(x) for x in p.split(">")) for p in text.split())  # type: ignore[misc]


def _iota_text(groups: int, size: int, dims: tuple, perm: tuple) -> str:
    """XLA's printed form of an iota device list: `[G,S]<=[d...]` with `T(p...)` when transposed."""
    text = f"[{groups},{size}]<=[{','.join(map(str, dims))}]"
    if perm and tuple(perm) != tuple(range(len(perm))):
        text += f"T({','.join(map(str, perm))})"
    return text


@functools.cache
def _collectives() -> pd.DataFrame:
    with _DATA.joinpath("collective.csv").open("r", encoding="utf-8") as f:
        raw = pd.read_csv(f, dtype=str, keep_default_na=False)
    rows = []
    for r in raw.itertuples(index=False):
        dims = _ints(r.dimensions)
        elements = math.prod(dims) if dims else 1
        dtype = r.element_type
        if dtype not in _BYTES:
            raise ValueError(f"collective.csv: element type {dtype!r} has no known size")
        groups = int(r.num_replica_groups) if r.num_replica_groups else 0
        size = int(r.num_devices_per_group) if r.num_devices_per_group else 0
        reshape, perm = _ints(r.iota_reshape_dims), _ints(r.iota_transpose_perm)
        pairs = _pairs(r.source_target_pairs)
        out_bytes = elements * _BYTES[dtype]
        # XLA's BytesTransferred of the op the table row describes (see the module docstring).
        transfer = out_bytes * size if r.opcode == "reduce-scatter" else out_bytes
        throughput = float(r.network_throughput_bytes_per_s)
        measured = throughput > 0
        rows.append({
            "table_key": r.table_key,
            "measured_on": MEASURED_ON.get(r.table_key),
            "opcode": r.opcode,
            "element_type": dtype,
            "elements": elements,
            "output_bytes": out_bytes,
            "transfer_bytes": transfer,
            "num_groups": groups if groups else None,
            "group_size": size if size else (2 if pairs else None),
            "replica_groups": _iota_text(groups, size, reshape, perm) if groups else "",
            "iota_reshape_dims": reshape,
            "iota_transpose_perm": perm,
            "source_target_pairs": pairs,
            "channel_id": int(r.channel_id),
            "use_global_device_ids": r.use_global_device_ids == "True",
            "throughput_bytes_per_s": throughput if measured else math.nan,
            "time_s": transfer / throughput if measured else math.nan,
            "measured": measured,
        })
    return pd.DataFrame(rows)


def collective_table(device=None) -> pd.DataFrame:
    """XLA's measured collective table (all of it, or one GPU's part).

    **Arguments:** `device`: None (every GPU), a table key (`"sm_90"`), or a
    device name / `DeviceSpec`.

    **Returns:** one row per measured collective: `table_key`, `measured_on`,
    `opcode`, `element_type`, `elements` and `output_bytes` of its output,
    `transfer_bytes` (what the throughput is relative to), `num_groups`,
    `group_size` (2 for collective-permute), `replica_groups` (HLO iota text,
    e.g. `"[2,4]<=[8]"`), `iota_reshape_dims`, `iota_transpose_perm`,
    `source_target_pairs` (collective-permute), `channel_id`,
    `use_global_device_ids`, `throughput_bytes_per_s`, `time_s` (one
    execution, = transfer_bytes / throughput) and `measured` (False for the
    rows without a throughput, whose times are NaN). Empty (same columns) for
    a GPU the table does not cover.
    """
    df = _collectives()
    if device is not None:
        df = df[df["table_key"] == _key_for(device)]
    return df.reset_index(drop=True).copy()


def collective_row_hlo(row) -> str:
    """The HLO module of one collective-table row: the collective XLA's generator timed
    (`collective_perf_table_gen`: one op on an F32 vector, `channel_id=1`, global device ids for the
    all-reduce, all-gather and reduce-scatter, `num_partitions` = the devices of the table's host).

    **Arguments:** `row`: a row of `collective_table()` (a namedtuple or Series).
    """
    n, op, size = int(row.elements), row.opcode, row.group_size
    devices = max((max(max(p) for p in row.source_target_pairs) + 1) if row.source_target_pairs else 0,
                  math.prod(row.iota_reshape_dims) if len(row.iota_reshape_dims) else 0)
    header = f"HloModule {op.replace('-', '_')}_{n}, replica_count=1, num_partitions={devices}"
    add = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
    groups = f"replica_groups={row.replica_groups}"
    flags = "use_global_device_ids=true, channel_id=1"
    if op == "collective-permute":
        pairs = ",".join(f"{{{s},{t}}}" for s, t in row.source_target_pairs)
        param, body = n, f"f32[{n}] collective-permute(p), source_target_pairs={{{pairs}}}, channel_id=1"
    elif op == "all-reduce":
        param, body = n, f"f32[{n}] all-reduce(p), to_apply=add, {groups}, {flags}"
    elif op == "all-gather":
        param, body = n // size, f"f32[{n}] all-gather(p), {groups}, dimensions={{0}}, {flags}"
    elif op == "reduce-scatter":
        param, body = n * size, f"f32[{n}] reduce-scatter(p), to_apply=add, {groups}, dimensions={{0}}, {flags}"
    elif op == "all-to-all":
        param, body = n, f"f32[{n}] all-to-all(p), {groups}, dimensions={{0}}, channel_id=1"
    else:
        raise ValueError(f"no HLO form for a {op!r} row")
    return f"{header}\n\n{add}\nENTRY e {{\n  p = f32[{param}] parameter(0)\n  ROOT r = {body}\n}}\n"
