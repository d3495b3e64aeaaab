"""`DeviceSpec`: the facts about one device that the cost models read."""

from __future__ import annotations

import dataclasses
import html
import numbers
from collections.abc import Iterator, Mapping
from typing import Any

from ._op_profiles import DEFAULT_OP_CYCLES

__all__ = ["DeviceSpec"]

# Version of the dictionary layout written by `DeviceSpec.to_dict`.
_DICT_FORMAT = 1


class _FrozenMap(Mapping):
    """A read-only, hashable mapping, so that a `DeviceSpec` can be a cache key."""

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping | None = None):
        self._data = dict(data or {})
        self._hash = None

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self) -> Iterator:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __repr__(self) -> str:
        return repr(self._data)


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"DeviceSpec.{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"DeviceSpec.{name} must be >= {minimum}, got {value!r}")
    return int(value)


def _check_float(name: str, value: Any, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"DeviceSpec.{name} must be a number, got {value!r}")
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"DeviceSpec.{name} must be finite, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"DeviceSpec.{name} must be > 0, got {value!r}")
    if not positive and value < 0:
        raise ValueError(f"DeviceSpec.{name} must be >= 0, got {value!r}")
    return value


def _si(value: float, unit: str) -> str:
    """`1.5552e12, "B/s"` -> `"1.56 TB/s"`."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _bytes(value: int) -> str:
    """`41943040` -> `"40 MiB"`; binary units because cache sizes are powers of two."""
    for factor, prefix in ((1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")):
        if value >= factor:
            return f"{value / factor:.4g} {prefix}B"
    return f"{value} B"


def _duration(seconds: float) -> str:
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= factor:
            return f"{seconds / factor:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class DeviceSpec:
    """What a cost model needs to know about one device.

    GPU fields follow XLA's `se::DeviceDescription` (the names in parentheses), so
    a preset can be checked number for number against XLA's spec files and test
    devices. A field that does not apply to a device (shared memory on a CPU,
    say) is 0, `None` or empty. Build variants with `spec.replace(...)`.

    **Arguments:**

    - `name`: registry name, e.g. `"a100-40gb"`.
    - `kind`: `"gpu"` or `"cpu"`.
    - `description`: the vendor's device name, e.g. `"NVIDIA A100-SXM4-40GB"`.
    - `core_count`: streaming multiprocessors (`core_count`); CPU cores for a CPU.
    - `fpus_per_core`: FP32 FMA units per SM (`fpus_per_core`). For a measured
      host: the FP32 lanes per core that its f32 matmul reached.
    - `clock_rate_ghz`: core clock (`clock_rate_ghz`).
    - `memory_bandwidth_bytes_per_s`: DRAM bandwidth (`memory_bandwidth`).
    - `l1_cache_bytes_per_core`: the L1 size XLA's model uses
      (`l1_cache_size_per_SM()`, a deliberately small 2 KiB on NVIDIA GPUs);
      the L1 data cache size for a CPU.
    - `l2_cache_bytes`: L2 size (`l2_cache_size`).
    - `l3_cache_bytes`: L3 size (CPUs; 0 on GPUs).
    - `shared_memory_per_core_bytes`, `shared_memory_per_block_bytes`,
      `shared_memory_per_block_optin_bytes`: shared memory per SM, per block by
      default, and per block with opt-in.
    - `warp_size`: threads per warp (`threads_per_warp`).
    - `threads_per_block_limit`, `threads_per_core_limit`: thread limits.
    - `block_dim_limit`: grid limits `(x, y, z)`.
    - `registers_per_core_limit`, `registers_per_block_limit`: 32-bit registers.
    - `device_memory_bytes`: memory capacity.
    - `compute_capability`: CUDA `(major, minor)`, or `None`.
    - `kernel_launch_overhead_s`: fixed cost per kernel. XLA's GPU model uses
      1 µs (`kKernelLaunchOverhead`); for the host it is the measured dispatch
      time of a tiny jitted function.
    - `dram_to_l2_transaction_bytes`, `memory_transactions_per_clock`: XLA's
      coalescing and low-occupancy constants (64 B and 32 on NVIDIA).
    - `pcie_bandwidth_bytes_per_s` (`pcie_bandwidth`) and `nvlink_links`
      (`device_interconnect_info.active_links`): what XLA's collective models
      read; 0 where the spec file has none.
    - `op_profile_name`: which of XLA's clock-cycle tables `op_profile` holds
      (e.g. `"sm_80"`), or `None`.
    - `op_profile`: `(opcode, dtype) -> clock cycles per element`, XLA's
      `hlo_op_profiles_data.h` table for this compute capability. Dtypes are
      lower-case HLO names (`"f32"`, `"bf16"`). Use `op_cycles` to look up with
      XLA's default for pairs that are not in the table.
    - `peak_matmul_flops_per_s`: `dtype -> FLOP/s` of the matrix units (tensor
      cores), or measured matmul rates for the host.
    - `measurements`: raw host benchmark results (empty for presets).
    - `source`: where the numbers come from.
    """

    name: str
    kind: str
    description: str = ""
    core_count: int
    fpus_per_core: int
    clock_rate_ghz: float
    memory_bandwidth_bytes_per_s: float
    l1_cache_bytes_per_core: int = 0
    l2_cache_bytes: int
    l3_cache_bytes: int = 0
    shared_memory_per_core_bytes: int = 0
    shared_memory_per_block_bytes: int = 0
    shared_memory_per_block_optin_bytes: int = 0
    warp_size: int = 0
    threads_per_block_limit: int = 0
    threads_per_core_limit: int = 0
    block_dim_limit: tuple[int, int, int] = (0, 0, 0)
    registers_per_core_limit: int = 0
    registers_per_block_limit: int = 0
    device_memory_bytes: int = 0
    compute_capability: tuple[int, int] | None = None
    kernel_launch_overhead_s: float
    dram_to_l2_transaction_bytes: int = 0
    memory_transactions_per_clock: int = 0
    pcie_bandwidth_bytes_per_s: float = 0.0
    nvlink_links: int = 0
    op_profile_name: str | None = None
    op_profile: Mapping[tuple[str, str], float] = dataclasses.field(default_factory=dict)
    peak_matmul_flops_per_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
    measurements: Mapping[str, float] = dataclasses.field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # the dataclass is frozen; normalise in place once
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"DeviceSpec.name must be a non-empty string, got {self.name!r}")
        if self.kind not in ("gpu", "cpu"):
            raise ValueError(f"DeviceSpec.kind must be 'gpu' or 'cpu', got {self.kind!r}")
        for field_name in ("description", "source"):
            if not isinstance(getattr(self, field_name), str):
                raise TypeError(f"DeviceSpec.{field_name} must be a string")
        for field_name in ("core_count", "fpus_per_core"):
            set_(self, field_name, _check_int(field_name, getattr(self, field_name), 1))
        for field_name in (
            "l1_cache_bytes_per_core", "l2_cache_bytes", "l3_cache_bytes",
            "shared_memory_per_core_bytes", "shared_memory_per_block_bytes",
            "shared_memory_per_block_optin_bytes", "warp_size", "threads_per_block_limit",
            "threads_per_core_limit", "registers_per_core_limit", "registers_per_block_limit",
            "device_memory_bytes", "dram_to_l2_transaction_bytes", "memory_transactions_per_clock",
            "nvlink_links",
        ):
            set_(self, field_name, _check_int(field_name, getattr(self, field_name), 0))
        set_(self, "clock_rate_ghz", _check_float("clock_rate_ghz", self.clock_rate_ghz, positive=True))
        set_(self, "memory_bandwidth_bytes_per_s",
             _check_float("memory_bandwidth_bytes_per_s", self.memory_bandwidth_bytes_per_s, positive=True))
        set_(self, "kernel_launch_overhead_s",
             _check_float("kernel_launch_overhead_s", self.kernel_launch_overhead_s, positive=False))
        set_(self, "pcie_bandwidth_bytes_per_s",
             _check_float("pcie_bandwidth_bytes_per_s", self.pcie_bandwidth_bytes_per_s, positive=False))

        dims = tuple(self.block_dim_limit)
        if len(dims) != 3:
            raise ValueError(f"DeviceSpec.block_dim_limit must have 3 entries (x, y, z), got {dims!r}")
        set_(self, "block_dim_limit", tuple(_check_int("block_dim_limit", d, 0) for d in dims))

        if self.compute_capability is not None:
            cc = tuple(self.compute_capability)
            if len(cc) != 2:
                raise ValueError(f"DeviceSpec.compute_capability must be (major, minor), got {cc!r}")
            set_(self, "compute_capability", tuple(_check_int("compute_capability", c, 0) for c in cc))
        if self.op_profile_name is not None and not isinstance(self.op_profile_name, str):
            raise TypeError(f"DeviceSpec.op_profile_name must be a string or None, got {self.op_profile_name!r}")

        profile = {}
        for key, cycles in dict(self.op_profile).items():
            if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
                raise TypeError(f"DeviceSpec.op_profile keys must be (opcode, dtype) strings, got {key!r}")
            cycles = _check_float(f"op_profile[{key!r}]", cycles, positive=False)
            profile[(key[0], key[1].lower())] = int(cycles) if cycles.is_integer() else cycles
        set_(self, "op_profile", _FrozenMap(profile))
        peaks = {}
        for dtype, rate in dict(self.peak_matmul_flops_per_s).items():
            if not isinstance(dtype, str):
                raise TypeError(f"DeviceSpec.peak_matmul_flops_per_s keys must be dtype names, got {dtype!r}")
            peaks[dtype.lower()] = _check_float(f"peak_matmul_flops_per_s[{dtype!r}]", rate, positive=True)
        set_(self, "peak_matmul_flops_per_s", _FrozenMap(peaks))
        measured = {}
        for key, value in dict(self.measurements).items():
            if not isinstance(key, str):
                raise TypeError(f"DeviceSpec.measurements keys must be strings, got {key!r}")
            measured[key] = _check_float(f"measurements[{key!r}]", value, positive=False)
        set_(self, "measurements", _FrozenMap(measured))

    # Hash and equality cover every field; the mappings are `_FrozenMap`s.
    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))

    # ----------------------------------------------------------------- derived

    @property
    def peak_fp32_flops_per_s(self) -> float:
        """FP32 peak of the vector units: `2 · clock · fpus_per_core · core_count`.

        This is XLA's `CalculateEffectiveFlopsPerNs` with every SM and every FPU
        busy (an FMA counts as 2 flops).
        """
        return 2.0 * self.clock_rate_ghz * 1e9 * self.fpus_per_core * self.core_count

    @property
    def peak_vector_flops_per_s(self) -> float:
        """Same as `peak_fp32_flops_per_s`: the non-matrix-unit peak."""
        return self.peak_fp32_flops_per_s

    @property
    def flops_per_ns(self) -> float:
        """`peak_fp32_flops_per_s` in XLA's unit (flops per nanosecond)."""
        return self.peak_fp32_flops_per_s * 1e-9

    @property
    def l1_cache_bytes(self) -> int:
        """L1 over all cores; XLA's L1 re-read threshold (`l1_cache_size_per_SM · core_count`)."""
        return self.l1_cache_bytes_per_core * self.core_count

    @property
    def per_block_bandwidth_cap_bytes_per_s(self) -> float:
        """Most bytes/s one block can read in XLA's low-occupancy cap
        (`clock · memory_transactions_per_clock`); 0 where not defined."""
        return self.clock_rate_ghz * 1e9 * self.memory_transactions_per_clock

    @property
    def machine_balance_flops_per_byte(self) -> float:
        """Vector FLOP/s per DRAM byte/s: the roofline ridge point."""
        return self.peak_fp32_flops_per_s / self.memory_bandwidth_bytes_per_s

    def op_cycles(self, opcode: str, dtype: str) -> float:
        """Clock cycles per element of `opcode` producing `dtype`, as XLA prices it.

        **Arguments:**

        - `opcode`: HLO opcode spelling, e.g. `"exponential"`.
        - `dtype`: element type of the instruction's *output* (XLA looks the
          profile up with the output type), e.g. `"f32"`.

        **Returns:** the table value, or XLA's default of 3 for pairs the table
        does not list (`GpuHloCostAnalysis::GetFlopsPerElementwiseOpElement`).
        """
        return self.op_profile.get((opcode, dtype.lower()), DEFAULT_OP_CYCLES)

    def matmul_flops_per_s(self, dtype: str) -> float:
        """Peak matmul FLOP/s for `dtype`: the matrix-unit rate where there is
        one, otherwise the vector peak (`peak_fp32_flops_per_s`)."""
        return self.peak_matmul_flops_per_s.get(dtype.lower(), self.peak_fp32_flops_per_s)

    # ------------------------------------------------------------- utilities

    def replace(self, **changes: Any) -> DeviceSpec:
        """A copy with `changes` applied (`dataclasses.replace`), validated again."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dictionary; `DeviceSpec.from_dict` reads it back."""
        out: dict[str, Any] = {"format": _DICT_FORMAT}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "op_profile":
                value = [[op, dt, cycles] for (op, dt), cycles in value.items()]
            elif isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceSpec:
        """Inverse of `to_dict`. Raises `ValueError`/`TypeError` naming the bad field."""
        if not isinstance(data, Mapping):
            raise TypeError(f"expected a mapping of DeviceSpec fields, got {type(data).__name__}")
        data = dict(data)
        fmt = data.pop("format", _DICT_FORMAT)
        if fmt != _DICT_FORMAT:
            raise ValueError(f"unsupported DeviceSpec dictionary format {fmt!r} (expected {_DICT_FORMAT})")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown DeviceSpec field(s): {', '.join(unknown)}")
        if "op_profile" in data:
            rows = data["op_profile"]
            try:
                data["op_profile"] = {(op, dt): cycles for op, dt, cycles in rows}
            except (TypeError, ValueError):
                raise TypeError("DeviceSpec.op_profile must be a list of [opcode, dtype, cycles]") from None
        for name in ("block_dim_limit", "compute_capability"):
            if isinstance(data.get(name), list):
                data[name] = tuple(data[name])
        try:
            return cls(**data)
        except TypeError as e:
            if "missing" in str(e) and "argument" in str(e):
                raise ValueError(f"DeviceSpec field missing: {e}") from None
            raise

    def __repr__(self) -> str:
        cc = "" if self.compute_capability is None else f", compute_capability={self.compute_capability}"
        profile = f"<{self.op_profile_name}: {len(self.op_profile)} entries>" if self.op_profile_name else "{}"
        return (
            f"DeviceSpec(name={self.name!r}, kind={self.kind!r}, core_count={self.core_count}, "
            f"fpus_per_core={self.fpus_per_core}, clock_rate_ghz={self.clock_rate_ghz}, "
            f"memory_bandwidth_bytes_per_s={self.memory_bandwidth_bytes_per_s:.6g}, "
            f"l2_cache_bytes={self.l2_cache_bytes}{cc}, "
            f"kernel_launch_overhead_s={self.kernel_launch_overhead_s:.3g}, op_profile={profile}, ...)"
        )

    def _summary_rows(self) -> list[tuple[str, str]]:
        rows = [
            ("kind", self.kind),
            ("description", self.description or "–"),
            ("compute capability", "–" if self.compute_capability is None
             else ".".join(map(str, self.compute_capability))),
            ("cores × FP32 units", f"{self.core_count} × {self.fpus_per_core}"),
            ("clock", f"{self.clock_rate_ghz:.4g} GHz"),
            ("peak FP32 (vector)", _si(self.peak_fp32_flops_per_s, "FLOP/s")),
        ]
        for dtype, rate in self.peak_matmul_flops_per_s.items():
            rows.append((f"peak matmul {dtype}", _si(rate, "FLOP/s")))
        rows += [
            ("memory bandwidth", _si(self.memory_bandwidth_bytes_per_s, "B/s")),
            ("machine balance", f"{self.machine_balance_flops_per_byte:.3g} FLOP/B"),
            ("L1 per core", _bytes(self.l1_cache_bytes_per_core)),
            ("L2", _bytes(self.l2_cache_bytes)),
        ]
        if self.l3_cache_bytes:
            rows.append(("L3", _bytes(self.l3_cache_bytes)))
        if self.kind == "gpu":
            rows += [
                ("shared memory per SM / block", f"{_bytes(self.shared_memory_per_core_bytes)} / "
                 f"{_bytes(self.shared_memory_per_block_bytes)}"),
                ("threads per warp / block / SM", f"{self.warp_size} / {self.threads_per_block_limit} / "
                 f"{self.threads_per_core_limit}"),
            ]
        if self.device_memory_bytes:
            rows.append(("device memory", _bytes(self.device_memory_bytes)))
        if self.nvlink_links or self.pcie_bandwidth_bytes_per_s:
            rows.append(("interconnect", f"{self.nvlink_links} NVLink links, PCIe "
                         f"{_si(self.pcie_bandwidth_bytes_per_s, 'B/s')}"))
        rows.append(("kernel launch overhead", _duration(self.kernel_launch_overhead_s)))
        rows.append(("op profile", f"{self.op_profile_name} ({len(self.op_profile)} entries)"
                     if self.op_profile_name else "–"))
        if self.source:
            rows.append(("source", self.source))
        return rows

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self._summary_rows()
        )
        return (f"<table><caption style='text-align:left'><b>DeviceSpec {html.escape(self.name)}</b>"
                f"</caption>{body}</table>")
