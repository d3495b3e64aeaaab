"""The `"host"` device: this machine's CPU, measured with small jax benchmarks.

The measurement is cached as JSON per machine in
`~/.cache/xla_costmodel/host-<key>.json` (directory overridable with
`XLA_COSTMODEL_CACHE_DIR`), where the key comes from the hostname, the CPU model
and the core count.
"""

from __future__ import annotations

import contextlib
import math
import datetime
import hashlib
import json
import logging
import os
import platform
import re
import socket
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from ._spec import DeviceSpec

__all__ = ["HostCacheError", "host_cache_path", "load_host", "measure_host"]

log = logging.getLogger("xla_costmodel.devices")

CACHE_DIR_ENV = "XLA_COSTMODEL_CACHE_DIR"
_CACHE_FORMAT = "xla_costmodel.host/1"


class HostCacheError(ValueError):
    """The cached host measurement cannot be read; the message names the file."""


# ------------------------------------------------------------------ machine facts


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown-cpu"


def _core_count() -> int:
    # Cores this process may run on (what XLA's thread pool gets), not the host's total.
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _clock_ghz() -> float | None:
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


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return 0


# Bumped whenever what `measure_host` measures changes, so older caches are not reused.
MEASUREMENT_VERSION = 2


def host_key() -> str:
    """Cache key for this machine: readable hostname plus a hash of (hostname, CPU model, cores, method version)."""
    host = socket.gethostname() or "localhost"
    digest = hashlib.sha256(
        f"{host}\0{_cpu_model()}\0{_core_count()}\0{MEASUREMENT_VERSION}".encode()
    ).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", host)[:40]
    return f"{slug}-{digest}"


def host_cache_path() -> Path:
    """Where the host measurement is cached: `$XLA_COSTMODEL_CACHE_DIR` or `~/.cache/xla_costmodel`."""
    base = os.environ.get(CACHE_DIR_ENV)
    directory = Path(base).expanduser() if base else Path.home() / ".cache" / "xla_costmodel"
    return directory / f"host-{host_key()}.json"


# ------------------------------------------------------------------ benchmarks


def _timeit(fn: Callable, args: tuple, *, min_reps: int, budget_s: float) -> list[float]:
    """Seconds per call, after one warm-up call that also compiles."""
    import jax

    jax.block_until_ready(fn(*args))
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < min_reps or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
        if len(times) >= 10_000:
            break
    return times


def _benchmarks(fast: bool) -> list[tuple[str, Callable[[], dict[str, float]]]]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    cpu = jax.devices("cpu")[0]
    budget = 0.05 if fast else 1.0
    reps = 2 if fast else 3

    def put(x):
        return jax.device_put(x, cpu)

    def copy_bandwidth():
        # Larger than any L3, so the copy streams from and to DRAM.
        n = (1 << 20) if fast else (1 << 25)  # 4 MiB / 128 MiB of f32
        x = put(np.ones(n, np.float32))
        best = min(_timeit(jax.jit(jnp.copy), (x,), min_reps=reps, budget_s=budget))
        return {"copy_bandwidth_bytes_per_s": 2 * x.nbytes / best}  # read + write

    def matmul(dtype_name: str):
        def run():
            n = 128 if fast else 1024
            # f64 needs x64 mode; leave the caller's setting alone for the others.
            with jax.enable_x64(True) if dtype_name == "f64" else contextlib.nullcontext():
                dtype = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f64": jnp.float64}[dtype_name]
                rng = np.random.default_rng(0)
                a, b = (put(rng.standard_normal((n, n)).astype(dtype)) for _ in range(2))
                best = min(_timeit(jax.jit(jnp.matmul), (a, b), min_reps=reps, budget_s=budget))
            return {f"matmul_{dtype_name}_flops_per_s": 2 * n**3 / best}
        return run

    def elementwise():
        # Arrays (1 MiB at most) that stay in cache, so this is throughput, not DRAM
        # bandwidth. Two sizes: the slope between them leaves out the per-call cost.
        n = (1 << 14) if fast else (1 << 18)
        small = put(np.linspace(0.0, 1.0, n // 4, dtype=np.float32))
        large = put(np.linspace(0.0, 1.0, n, dtype=np.float32))
        out = {}
        for key, fn in (("elementwise_f32_elements_per_s", lambda v: v * 1.5 + 0.25),
                        ("exp_f32_elements_per_s", jnp.exp)):
            jitted = jax.jit(fn)
            t_small = min(_timeit(jitted, (small,), min_reps=reps, budget_s=budget / 2))
            t_large = min(_timeit(jitted, (large,), min_reps=reps, budget_s=budget / 2))
            delta = t_large - t_small
            # Timer noise can swamp the difference on a busy machine; then use the plain rate.
            out[key] = (n - n // 4) / delta if delta > 0.25 * t_large else n / t_large
        return out

    def dispatch():
        x = put(np.zeros((1,), np.float32))
        times = _timeit(jax.jit(lambda v: v + 1), (x,), min_reps=50 if fast else 500, budget_s=budget)
        return {"dispatch_overhead_s": statistics.median(times)}

    def kernel_launch():
        # What one more kernel costs inside a running program: the thunk time of
        # empty kernels read from a profiler trace. This, not the whole-program
        # dispatch above, is what a cost model charges per kernel. (The measure
        # package owns trace reading; imported here only for this figure.)
        from ..measure import run_suite

        df = run_suite(quick=True, only=["launch_empty"], progress=False)
        overhead = float(df.attrs.get("launch_overhead_s", float("nan")))
        return {"kernel_launch_overhead_s": overhead}

    return [
        ("copy bandwidth", copy_bandwidth),
        ("matmul f32", matmul("f32")),
        ("matmul bf16", matmul("bf16")),
        ("matmul f64", matmul("f64")),
        ("elementwise", elementwise),
        ("dispatch overhead", dispatch),
        ("kernel launch overhead", kernel_launch),
    ]


def _describe(key: str, value: float) -> str:
    if key.endswith("_bytes_per_s"):
        return f"{value / 1e9:.3g} GB/s"
    if key.endswith("_flops_per_s"):
        return f"{value / 1e9:.3g} GFLOP/s"
    if key.endswith("_elements_per_s"):
        return f"{value / 1e9:.3g} Gelem/s"
    return f"{value * 1e6:.3g} µs"


def measure_host(*, fast: bool = False, progress: bool = True, save: bool = True) -> DeviceSpec:
    """Measure this machine's CPU with jax and return it as the `"host"` DeviceSpec.

    Runs: a large-array copy (DRAM bandwidth), square matmuls in f32, bf16 and
    f64 (FLOP/s), an in-cache elementwise multiply-add and `exp`
    (elements/s), a tiny jitted function (dispatch overhead of a whole
    program, kept in `measurements`), and empty kernels timed from a profiler
    trace (`kernel_launch_overhead_s`: what one more kernel costs).
    Takes a few seconds (`fast=True`: well under one, with less accurate numbers).

    **Arguments:**

    - `fast`: small sizes and few repetitions, for tests.
    - `progress`: show a progress bar and log one line per benchmark.
    - `save`: write the result to `host_cache_path()`.

    **Returns:** the measured `DeviceSpec` (`kind="cpu"`). Cache fields come from
    sysfs, `fpus_per_core` is the FP32 lanes per core the f32 matmul reached, and
    the raw numbers are in `spec.measurements`.
    """
    import jax
    from tqdm import tqdm  # the plain bar: tqdm.auto needs ipywidgets inside notebooks

    t_start = time.perf_counter()
    benchmarks = _benchmarks(fast)
    results: dict[str, float] = {}
    bar = tqdm(benchmarks, desc="measuring host", unit="bench", disable=not progress, leave=False)
    for label, run in bar:
        bar.set_postfix_str(label)
        measured = run()
        results.update(measured)
        if progress:
            log.info("host %s: %s", label, ", ".join(_describe(k, v) for k, v in measured.items()))
    bar.close()

    cores = _core_count()
    clock = _clock_ghz()
    if clock is None:
        # The FP32-lane figure below needs a clock; say plainly that it is a placeholder.
        log.warning("host: CPU clock unknown (no cpufreq or /proc/cpuinfo); assuming 1 GHz")
        clock = 1.0
    caches = cache_sizes()
    results["measure_seconds"] = time.perf_counter() - t_start
    results["fast_mode"] = float(fast)
    fpus = max(1, round(results["matmul_f32_flops_per_s"] / (2 * clock * 1e9 * cores)))
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    spec = DeviceSpec(
        name="host",
        kind="cpu",
        description=_cpu_model(),
        core_count=cores,
        fpus_per_core=fpus,
        clock_rate_ghz=clock,
        memory_bandwidth_bytes_per_s=results["copy_bandwidth_bytes_per_s"],
        l1_cache_bytes_per_core=caches.get("l1", 0),
        l2_cache_bytes=caches.get("l2", 0),
        l3_cache_bytes=caches.get("l3", 0),
        warp_size=1,
        threads_per_block_limit=1,
        threads_per_core_limit=1,
        block_dim_limit=(1, 1, 1),
        device_memory_bytes=_memory_bytes(),
        kernel_launch_overhead_s=(
            results["kernel_launch_overhead_s"]
            if math.isfinite(results.get("kernel_launch_overhead_s", math.nan))
            else results["dispatch_overhead_s"]
        ),
        dram_to_l2_transaction_bytes=caches.get("line", 64),
        peak_matmul_flops_per_s={d: results[f"matmul_{d}_flops_per_s"] for d in ("f32", "bf16", "f64")},
        measurements=results,
        source=(f"measured on {socket.gethostname()} at {stamp} with jax {jax.__version__}"
                f"{' (fast mode)' if fast else ''}"),
    )
    if progress:
        log.info("host measured in %.1f s", results["measure_seconds"])
    if save:
        _save(spec, host_cache_path())
    return spec


# ------------------------------------------------------------------ cache


def _save(spec: DeviceSpec, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"format": _CACHE_FORMAT, "key": host_key(), "spec": spec.to_dict()}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # atomic, so a reader never sees half a file


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


def load_host(*, remeasure: bool = False, fast: bool = False, progress: bool = True) -> DeviceSpec:
    """The `"host"` spec: read from the cache, or measured (and cached) when needed.

    A cache written in fast mode is not reused for a full (`fast=False`) request.
    """
    path = host_cache_path()
    if not remeasure and path.exists():
        spec = read_host_cache(path)
        if fast or not spec.measurements.get("fast_mode", 0.0):
            return spec
        log.info("host cache %s holds a fast-mode measurement; measuring again", path)
    return measure_host(fast=fast, progress=progress, save=True)

