"""The `"host"` device: this machine's CPU, as measured by `xla_costmodel.measure.measure_host`.

Here: what the machine says about itself (CPU model, cores, clock, caches,
memory), and the cache of the measurement, JSON per machine in
`~/.cache/xla_costmodel/host-<key>.json` (directory overridable with
`XLA_COSTMODEL_CACHE_DIR`), where the key comes from the hostname, the CPU
model and the core count. The benchmarks themselves time kernels from
profiler traces, which is the `measure` package's job (a layer above this
one): `measure.host_device` measures the host when this cache has nothing usable,
and `xla_costmodel.get_device("host")` calls it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import socket
from pathlib import Path

from .._atomic import write_atomically
from ._spec import DeviceSpec

__all__ = ["HostCacheError", "MACHINE_FACTS", "UNKNOWN", "cache_sizes", "clock_ghz", "core_count", "cpu_model",
           "describe_machine", "host_cache_path", "load_host", "machine_differences", "machine_record",
           "memory_bytes", "read_host_cache", "save_host_cache"]

log = logging.getLogger("xla_costmodel.devices")

CACHE_DIR_ENV = "XLA_COSTMODEL_CACHE_DIR"
_CACHE_FORMAT = "xla_costmodel.host/1"


class HostCacheError(ValueError):
    """The cached host measurement cannot be read; the message names the file."""


# ------------------------------------------------------------------ machine facts


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown-cpu"


def core_count() -> int:
    # Cores this process may run on (what XLA's thread pool gets), not the host's total.
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def clock_ghz() -> float | None:
    try:
        khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text().strip()
        return int(khz) / 1e6
    except (OSError, ValueError):
        pass
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("cpu mhz"):
                    return float(line.split(":", 1)[1]) / 1e3
    except (OSError, ValueError):
        pass
    return None


def _parse_size(text: str) -> int:
    """sysfs cache sizes: `"32K"`, `"1024K"`, `"32M"`."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text)
    if not m:
        raise ValueError(text)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def cache_sizes() -> dict[str, int]:
    """Data/unified cache sizes of CPU 0 from sysfs: `{"l1": ..., "l2": ..., "l3": ..., "line": ...}`."""
    sizes: dict[str, int] = {}
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    if not root.is_dir():
        return sizes
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        sizes[f"l{level}"] = size
        try:
            sizes.setdefault("line", int((index / "coherency_line_size").read_text()))
        except (OSError, ValueError):
            pass
    return sizes


def memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 0


# ------------------------------------------------------------------ the machine a calibration was measured on

#: What a calibration records of the machine its kernels were timed on: kernel times depend on them.
MACHINE_FACTS = ("cpu_model", "cores", "l1_bytes", "l2_bytes", "l3_bytes")
#: The value of a fact that was not recorded (calibrations made before machines were recorded).
UNKNOWN = "unknown (pre-record)"


def machine_record() -> dict:
    """This machine, as a calibration records it: `cpu_model`, `cores` (those this process may run on),
    `l1_bytes` (data cache per core), `l2_bytes`, `l3_bytes` (sysfs; `UNKNOWN` where unreadable)."""
    caches = cache_sizes()
    return {"cpu_model": cpu_model(), "cores": core_count(),
            **{f"{level}_bytes": caches.get(level, UNKNOWN) for level in ("l1", "l2", "l3")}}


def machine_differences(record: dict, here: dict | None = None) -> list[str]:
    """The facts in which `record` (a calibration's `machine`) differs from `here` (default this machine),
    each as `"cores 2 (here 16)"`; a fact unknown on either side is not compared."""
    here = machine_record() if here is None else here
    out = []
    for fact in MACHINE_FACTS:
        a, b = record.get(fact, UNKNOWN), here.get(fact, UNKNOWN)
        if UNKNOWN not in (a, b) and a != b:
            out.append(f"{_fact_name(fact)} {_fact_value(fact, a)} (here {_fact_value(fact, b)})")
    return out


def describe_machine(record: dict) -> str:
    """`"AMD EPYC, 2 cores, L1 32 KiB, L2 1 MiB, L3 32 MiB"` (unknown facts left out)."""
    parts = [str(record.get("cpu_model", UNKNOWN))]
    if record.get("cores", UNKNOWN) != UNKNOWN:
        parts.append(f"{record['cores']} cores")
    parts += [f"{_fact_name(f)} {_fact_value(f, record[f])}" for f in MACHINE_FACTS[2:]
              if record.get(f, UNKNOWN) != UNKNOWN]
    return ", ".join(parts)


def _fact_name(fact: str) -> str:
    return {"cpu_model": "CPU", "cores": "cores"}.get(fact, fact.removesuffix("_bytes").upper())


def _fact_value(fact: str, value) -> str:
    if fact.endswith("_bytes") and isinstance(value, int):
        for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
            if value >= size and value % size == 0:
                return f"{value // size} {unit}"
        return f"{value} B"
    return repr(value) if fact == "cpu_model" else str(value)


# Bumped whenever what `measure_host` measures changes, so older caches are not reused.
MEASUREMENT_VERSION = 4  # 4: int8 matmul, grouped-convolution and convolution-loop rates


def host_key() -> str:
    """Cache key for this machine: readable hostname plus a hash of (hostname, CPU model, cores, method version)."""
    host = socket.gethostname() or "localhost"
    digest = hashlib.sha256(
        f"{host}\0{cpu_model()}\0{core_count()}\0{MEASUREMENT_VERSION}".encode()
    ).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", host)[:40]
    return f"{slug}-{digest}"


def host_cache_path() -> Path:
    """Where the host measurement is cached: `$XLA_COSTMODEL_CACHE_DIR` or `~/.cache/xla_costmodel`."""
    base = os.environ.get(CACHE_DIR_ENV)
    directory = Path(base).expanduser() if base else Path.home() / ".cache" / "xla_costmodel"
    return directory / f"host-{host_key()}.json"


# ------------------------------------------------------------------ cache


def save_host_cache(spec: DeviceSpec, path: Path) -> None:
    doc = {"format": _CACHE_FORMAT, "key": host_key(), "spec": spec.to_dict()}
    write_atomically(path, json.dumps(doc, indent=2) + "\n")  # a reader never sees half a file


def read_host_cache(path: Path) -> DeviceSpec:
    """Read a cached host measurement. Raises `HostCacheError` naming the file and the problem."""
    advice = "delete it or call get_device('host', remeasure=True)"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise HostCacheError(f"{path}: corrupt host cache (not UTF-8 text: {e.reason}); {advice}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise HostCacheError(f"{path}:{e.lineno}:{e.colno}: corrupt host cache ({e.msg}); {advice}") from None
    if not isinstance(doc, dict) or doc.get("format") != _CACHE_FORMAT or not isinstance(doc.get("spec"), dict):
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise HostCacheError(f"{path}: not a host cache of format {_CACHE_FORMAT!r} (found {found!r}); {advice}")
    try:
        spec = DeviceSpec.from_dict(doc["spec"])
    except (TypeError, ValueError) as e:
        raise HostCacheError(f"{path}: corrupt host cache: {e}; {advice}") from None
    if spec.name != "host" or spec.kind != "cpu":
        raise HostCacheError(f"{path}: host cache holds device {spec.name!r} of kind {spec.kind!r}; {advice}")
    return spec


def cached_host(*, fast: bool = False) -> DeviceSpec | None:
    """The cached `"host"` spec, or None when there is none to use: no cache, or a fast-mode measurement
    for a full (`fast=False`) request. Raises `HostCacheError` for a cache that cannot be read."""
    path = host_cache_path()
    if not path.exists():
        return None
    spec = read_host_cache(path)
    if fast or not spec.measurements.get("fast_mode", 0.0):
        return spec
    log.info("host cache %s holds a fast-mode measurement; measuring again", path)
    return None


def load_host(*, remeasure: bool = False, fast: bool = False, progress: bool = True) -> DeviceSpec:
    """The cached `"host"` spec. Measuring it (when there is no usable cache, or `remeasure`) is the
    `measure` package's, a layer above: `xla_costmodel.get_device("host")` does that.

    **Raises:** `HostCacheError` for an unreadable cache; `RuntimeError` when there is nothing to read.
    """
    spec = None if remeasure else cached_host(fast=fast)
    if spec is None:
        raise RuntimeError(f"this machine's CPU ('host') has no usable measurement in {host_cache_path()}: "
                           "xla_costmodel.get_device('host') measures it (and caches it)")
    return spec
