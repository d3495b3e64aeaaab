"""`measure_host`: this machine's CPU measured with small jax benchmarks, as the `"host"` device.

The `DeviceSpec` and its cache are `xla_costmodel.devices`'s; `host_device` reads the cache or, when it has
nothing usable, measures (what `xla_costmodel.get_device("host")` does), and `resolve_device` turns any
device a caller may pass into its `DeviceSpec` that way.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import math
import socket
import statistics
import time
from collections.abc import Callable

from .._worker import WorkerCrashed
from ..devices import DeviceSpec
from ..devices.host import (
    cache_sizes,
    cached_host,
    clock_ghz,
    core_count,
    cpu_model,
    host_cache_path,
    memory_bytes,
    save_host_cache,
)

from ._allocator import steady_from_start
from ._isolated import measuring_worker
from ._method import MeasurementError

__all__ = ["host_device", "measure_host", "resolve_device"]

log = logging.getLogger("xla_costmodel.devices")


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
                rng = np.random.default_rng(0)
                if dtype_name == "s8":
                    # int8 x int8 -> int32, as a quantized matmul asks for it (YNNPACK's s8 dot).
                    a, b = (put(rng.integers(-100, 100, (n, n)).astype(np.int8)) for _ in range(2))
                    fn = jax.jit(lambda x, y: jax.lax.dot(x, y, preferred_element_type=jnp.int32))
                else:
                    dtype = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f64": jnp.float64}[dtype_name]
                    a, b = (put(rng.standard_normal((n, n)).astype(dtype)) for _ in range(2))
                    fn = jax.jit(jnp.matmul)
                best = min(_timeit(fn, (a, b), min_reps=reps, budget_s=budget))
            return {f"matmul_{dtype_name}_flops_per_s": 2 * n**3 / best}
        return run

    def grouped_conv(runtime: str):
        # A depthwise convolution (one feature per group). With more than 16 features XLA:CPU hands it to
        # YNNPACK, whose stencil copy and per-group dots run at a per-element rate far below the GEMM's,
        # whatever the flops; with 16 or fewer it stays a lone convolution, run by Eigen one group after
        # another (`models._xla_cpu_convolution`). Rate: stencil elements (batch x positions x window x
        # features) per second.
        def run():
            if runtime == "ynn":
                batch, side, feat = (1, 16, 32) if fast else (4, 32, 64)
            else:
                batch, side, feat = (1, 16, 8) if fast else (2, 64, 8)
            rng = np.random.default_rng(0)
            x = put(rng.standard_normal((batch, side, side, feat)).astype(np.float32))
            w = put(rng.standard_normal((3, 3, 1, feat)).astype(np.float32))
            fn = jax.jit(lambda a, b: jax.lax.conv_general_dilated(
                a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=feat))
            best = min(_timeit(fn, (x, w), min_reps=reps, budget_s=budget))
            return {f"{runtime}_grouped_conv_elements_per_s": batch * side * side * 9 * feat / best}
        return run

    def loop_conv():
        # An f64 convolution of 8 features: neither YNNPACK (16 features or fewer) nor Eigen (f16/f32 only)
        # takes it, so XLA's own emitted loop runs it, one multiply-add at a time, as it runs every
        # convolution Eigen does not take (`models._xla_cpu_convolution`). Rate: multiply-adds per second.
        batch, side, feat = (1, 8, 8) if fast else (2, 32, 8)
        rng = np.random.default_rng(0)
        with jax.enable_x64(True):
            x = put(rng.standard_normal((batch, side, side, feat)))
            w = put(rng.standard_normal((3, 3, feat, feat)))
            # SAME padding, as most convolutions have: the loop checks the bounds of each window element
            # (here 2x64x64x8: 0.24 ns per multiply-add padded, 0.10 unpadded; 16 features 0.51).
            fn = jax.jit(lambda a, b: jax.lax.conv_general_dilated(
                a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
            best = min(_timeit(fn, (x, w), min_reps=reps, budget_s=budget))
        # XLA's count of multiply-adds: the valid (output, window) pairs of each spatial dimension.
        valid = 3 * side - 2
        return {"loop_conv_macs_per_s": batch * valid * valid * feat * feat / best}

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
        # dispatch above, is what a cost model charges per kernel.
        from ._suite import run_suite

        df = run_suite(quick=True, only=["launch_empty"], progress=False)
        overhead = float(df.attrs.get("launch_overhead_s", float("nan")))
        return {"kernel_launch_overhead_s": overhead}

    return [
        ("copy bandwidth", copy_bandwidth),
        ("matmul f32", matmul("f32")),
        ("matmul bf16", matmul("bf16")),
        ("matmul f64", matmul("f64")),
        ("matmul s8", matmul("s8")),
        ("grouped convolution (YNNPACK)", grouped_conv("ynn")),
        ("grouped convolution (Eigen)", grouped_conv("eigen")),
        ("convolution loop", loop_conv),
        ("elementwise", elementwise),
        ("dispatch overhead", dispatch),
        ("kernel launch overhead", kernel_launch),
    ]


def host_benchmarks(fast: bool, on_done=None) -> dict[str, float]:
    """Run every benchmark of `measure_host` here; `on_done((label, results))` after each (in the measuring
    worker, each is sent to the caller)."""
    from .._worker import report

    results: dict[str, float] = {}
    for label, run in _benchmarks(fast):
        measured = run()
        results.update(measured)
        (on_done or report)((label, measured))
    return results


def _describe(key: str, value: float) -> str:
    if key.endswith("_bytes_per_s"):
        return f"{value / 1e9:.3g} GB/s"
    if key.endswith("_flops_per_s"):
        return f"{value / 1e9:.3g} GFLOP/s"
    if key.endswith("_macs_per_s"):
        return f"{value / 1e9:.3g} GMAC/s"
    if key.endswith("_elements_per_s"):
        return f"{value / 1e9:.3g} Gelem/s"
    return f"{value * 1e6:.3g} µs"


def measure_host(*, fast: bool = False, progress: bool = True, save: bool = True) -> DeviceSpec:
    """Measure this machine's CPU with jax and return it as the `"host"` DeviceSpec.

    Runs: a large-array copy (DRAM bandwidth), square matmuls in f32, bf16,
    f64 and int8 -> int32 (FLOP/s; `s8`), depthwise convolutions (stencil
    elements/s: the rates of YNNPACK's and Eigen's convolutions with feature
    groups), an f64 convolution run by XLA's own loop (multiply-adds/s), an
    in-cache elementwise multiply-add and `exp` (elements/s), a tiny jitted function (dispatch overhead of a whole
    program, kept in `measurements`), and empty kernels timed from a profiler
    trace (`kernel_launch_overhead_s`: what one more kernel costs).
    Takes a few seconds (`fast=True`: well under one, with less accurate numbers).
    Like `measure_kernels()`, it runs in the measuring worker unless this process
    started with the steady allocator (`steady_from_start`), so that the
    copy pays no page faults (`measurements["measured_in_worker"]`).

    **Arguments:**

    - `fast`: small sizes and few repetitions, for tests.
    - `progress`: show a progress bar and log one line per benchmark.
    - `save`: write the result to `host_cache_path()`.

    **Returns:** the measured `DeviceSpec` (`kind="cpu"`). Cache fields come from
    sysfs, `fpus_per_core` is the FP32 lanes per core the f32 matmul reached, and
    the raw numbers are in `spec.measurements`.
    """
    import jax
    from .._progress import progress_bar

    t_start = time.perf_counter()
    labels = [label for label, _ in _benchmarks(fast)]
    # On a terminal only: in a log, an erased bar glues its carriage returns to the next line.
    bar = progress_bar(len(labels), "measuring host", "bench", progress)

    def done(message) -> None:
        label, measured = message
        bar.update(1)
        if progress:
            log.info("host %s: %s", label, ", ".join(_describe(k, v) for k, v in measured.items()))

    if steady_from_start():
        results = host_benchmarks(fast, on_done=done)
    else:
        # Timed as `measure_kernels()` times programs (`_isolated`): the copy writes a fresh 128 MiB buffer each run,
        # which in a process that did not start with the steady allocator pays its page faults every time.
        try:
            results = measuring_worker().call(f"{__name__}:host_benchmarks", fast, on_message=done)
        except WorkerCrashed as exc:
            raise MeasurementError(f"measuring the host: {exc}") from None
    bar.close()
    results["measured_in_worker"] = float(not steady_from_start())

    cores = core_count()
    clock = clock_ghz()
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
        description=cpu_model(),
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
        device_memory_bytes=memory_bytes(),
        kernel_launch_overhead_s=(
            results["kernel_launch_overhead_s"]
            if math.isfinite(results.get("kernel_launch_overhead_s", math.nan))
            else results["dispatch_overhead_s"]
        ),
        dram_to_l2_transaction_bytes=caches.get("line", 64),
        peak_matmul_flops_per_s={d: results[f"matmul_{d}_flops_per_s"] for d in ("f32", "bf16", "f64", "s8")},
        measurements=results,
        source=(f"measured on {socket.gethostname()} at {stamp} with jax {jax.__version__}"
                f"{' (fast mode)' if fast else ''}"),
    )
    if progress:
        log.info("host measured in %.1f s", results["measure_seconds"])
    if save:
        save_host_cache(spec, host_cache_path())
    return spec




def host_device(*, remeasure: bool = False, fast: bool = False, progress: bool = True) -> DeviceSpec:
    """The `"host"` device: the cached measurement, or this machine measured now and cached
    (`measure_host`) when there is no usable one or `remeasure` asks. A cache written in fast mode is not
    reused for a full (`fast=False`) request. Raises `HostCacheError` for an unreadable cache."""
    spec = None if remeasure else cached_host(fast=fast)
    return spec if spec is not None else measure_host(fast=fast, progress=progress, save=True)


def resolve_device(device: "str | DeviceSpec | None" = None) -> DeviceSpec:
    """The `DeviceSpec` of what a caller may pass for a device (`models.resolve_device`: a spec, a name,
    None for `DEFAULT_DEVICE`), with the host measured when it has no usable measurement (`host_device`).

    **Raises:** `ValueError` for an unknown name (listing the valid ones), `TypeError` for anything else.
    """
    from ..models import resolve_device as look_up

    if isinstance(device, str) and device.strip().lower() == "host":
        return host_device()
    return look_up(device)
