"""Measure the kernels of one jitted program from a `jax.profiler` trace.

The project's one timing methodology (`Method`), used by `measure()`, by
`xla-costmodel measure`, by the measurement suite and by every script that
measures programs, all through `measure_program`. After Stevens & Klöckner's
method for measurement kernels: put glibc's allocator in its steady state
(`set_allocator`: freed memory is kept, so runs do not page-fault on fresh
buffers), call the compiled program once untraced, then run it `repeats`
times, each run wrapped in a named trace annotation and waited for; throw
away the first `discard` runs (caches, thread-pool spin-up); keep every
remaining per-run time as a sample and report the minimum (the
least-disturbed run) next to the median. Cold timings (fresh pages on every
run) only when asked for, with `allocator="cold"`.

Units: a kernel launched several times in one run (a loop body) has its
launches summed per run; columns say which they hold (`*_per_run_s`,
`*_per_launch_s`).
"""

from __future__ import annotations

import html
import math
import os
import re
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis._opcodes import CALLS_KERNEL_SEQUENCES
from ..devices._host import cpu_model
from ._allocator import ALLOCATORS, page_faults, set_allocator
from ._dataset import per_launch_s
from ._module import ModuleIndex
from ._trace import TraceError, find_trace_files, interval_union_ns, kernel_executions, read_trace

__all__ = [
    "Method",
    "DEFAULT_METHOD",
    "KERNEL_COLUMNS",
    "PageFaultWarning",
    "measure",
    "measure_program",
    "measurement_from_trace",
    "merge_measurements",
    "Measurement",
    "MeasurementError",
    "ConcurrentKernelsWarning",
    "CommandBufferWarning",
    "disable_gpu_command_buffers",
    "device_description",
]

RUN_ANNOTATION = "xla_costmodel.measure#"
_RUN_RE = re.compile(re.escape(RUN_ANNOTATION) + r"(\d+)$")

#: XLA flag that stops XLA:GPU from recording kernels into command buffers
#: (CUDA graphs); inside a command buffer kernels lose their `hlo_op` names.
GPU_COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer="

# Allowance for the kernel-time sum against the run's wall time: timestamps of
# a completion callback may trail the annotation's end by a few microseconds.
_WALL_TOL_NS = 5_000.0
_WALL_TOL_REL = 0.01


class MeasurementError(RuntimeError):
    """A measurement that cannot be trusted (kernels missing, outside the wall time, ...)."""


class ConcurrentKernelsWarning(UserWarning):
    """Kernels of one run overlapped in time, so their times add up to more than the wall time."""


class CommandBufferWarning(UserWarning):
    """GPU command buffers are on, so kernels may not carry their HLO instruction names."""


class PageFaultWarning(UserWarning):
    """Every kept run page-faulted on fresh memory although the allocator was asked to be steady."""


@dataclass(frozen=True)
class Method:
    """How kernels are timed: the fields every measurement records.

    **Attributes:**

    - `allocator`: glibc's state while timing (`"steady"`: no page faults on
      reused buffers, what calibration assumes; `"cold"`: fresh pages every
      run; `"unknown"` for a trace read back from disk). See `set_allocator`.
    - `repeats`: traced runs in total, each waited for.
    - `discard`: leading traced runs thrown away as warm-up.
    - `warmup_calls`: untraced calls before the traced runs (always 1).
    - `statistic`: what a kernel's time is over the kept runs (the minimum).
    """

    allocator: str = "steady"
    repeats: int = 30
    discard: int = 4
    warmup_calls: int = 1
    statistic: str = "min"

    def __post_init__(self):
        if self.allocator not in (*ALLOCATORS, "unknown"):
            raise ValueError(f"allocator must be one of {', '.join(map(repr, ALLOCATORS))}, not {self.allocator!r}")
        if self.repeats < 1 or self.discard < 0 or self.discard >= self.repeats:
            raise ValueError(f"need repeats > discard >= 0, got repeats={self.repeats}, discard={self.discard}")

    @property
    def kept(self) -> int:
        """Samples per kernel: `repeats - discard`."""
        return self.repeats - self.discard

    def fields(self) -> dict:
        """The methodology as dataset columns: `allocator`, `repeats`, `discard`, `warmup_calls`, `statistic`."""
        return {
            "allocator": self.allocator,
            "repeats": self.repeats,
            "discard": self.discard,
            "warmup_calls": self.warmup_calls,
            "statistic": self.statistic,
        }


#: The methodology of `measure()`, `xla-costmodel measure`, the suite and calibration.
DEFAULT_METHOD = Method()

#: Columns of `measure()` / `Measurement.kernels`, in order.
KERNEL_COLUMNS = (
    "hlo_module", "hlo_op", "opcode", "fusion_kind", "computation", "role", "n", "launches",
    "min_per_run_s", "median_per_run_s", "min_per_launch_s", "samples_per_run_s", "in_module",
)

# A steady run may still touch a few fresh pages (trace buffers, small
# allocations); more than this many in every kept run means buffers are
# being mapped afresh.
_STEADY_FAULTS_MAX = 2048


@dataclass(frozen=True)
class Measurement:
    """Everything one `measure_program` call found.

    **Attributes:**

    - `kernels`: one row per kernel (HLO instruction) with its samples; see `measure`.
    - `runs`: one row per run: `run`, `kept`, `wall_s` (the run's annotated
      span in the trace), `host_wall_s` (the same run timed by Python),
      `page_faults` (page faults of the process during the run; NaN for a
      trace read back),
      `kernel_sum_s` (kernel times added up, kernels nested inside a
      while/conditional/call counted once through their parent), `busy_s`
      (time covered by at least one kernel), `n_kernels`, `late_s` (how far the
      last kernel ended after the run did; 0 when all is well), `overlap`
      (kernels ran concurrently).
    - `hlo_text`: the compiled module's text, from the same compilation that ran.
    - `module`: the `ModuleIndex` of that text.
    - `missing`: entry-computation instructions expected to run as kernels that
      no kept run showed.
    - `backend`, `device`, `jax_version`, `jaxlib_version`, `trace_format`,
      `trace_path`: provenance.
    - `method`: the `Method` it was measured with.
    """

    kernels: pd.DataFrame
    runs: pd.DataFrame
    hlo_text: str
    module: ModuleIndex = field(repr=False)
    missing: tuple[str, ...]
    backend: str
    device: str
    jax_version: str
    jaxlib_version: str
    trace_format: str
    trace_path: str
    method: Method = DEFAULT_METHOD

    def _repr_html_(self) -> str:
        kept = self.runs[self.runs["kept"]]
        head = (
            f"<p><b>{html.escape(self.module.name)}</b> on {html.escape(self.device)}: "
            f"{len(self.kernels)} kernels, {len(kept)} kept runs ({html.escape(self.method.allocator)} allocator), "
            f"wall min {kept['wall_s'].min() * 1e6:.1f} µs per run"
            + (f"; <b>missing</b>: {html.escape(', '.join(self.missing))}" if self.missing else "")
            + "</p>"
        )
        cols = ["hlo_op", "opcode", "n", "launches", "min_per_run_s", "median_per_run_s", "min_per_launch_s"]
        return head + self.kernels[cols].to_html(index=False)


def device_description() -> dict[str, str]:
    """The default device and the host it runs on, for provenance columns.

    **Returns:** `backend` (`"cpu"`, `"gpu"`, ...), `device_kind` (from jax),
    and `device` (a readable one-liner: for CPU the processor model and the
    number of cores jax may use).
    """
    import jax

    dev = jax.devices()[0]
    backend = dev.platform
    kind = str(getattr(dev, "device_kind", backend))
    if backend == "cpu":
        model = cpu_model()
        desc = f"cpu: {model}, {os.cpu_count()} cores"
    else:
        desc = f"{backend}: {kind}"
    return {"backend": backend, "device_kind": kind, "device": desc}


def disable_gpu_command_buffers() -> None:
    """Turn XLA:GPU command buffers off for this process, so kernels keep their HLO names.

    XLA reads `XLA_FLAGS` once, when the first backend starts; call this
    before anything touches a jax device. Raises `RuntimeError` when a backend
    is already running without the flag.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    if _command_buffers_off(flags):
        return
    try:
        from jax._src import xla_bridge

        started = bool(getattr(xla_bridge, "_backends", {}))
    except Exception:  # pragma: no cover - private module moved
        started = False
    if started:
        raise RuntimeError(
            "jax backends are already initialised, so XLA_FLAGS is no longer read; "
            f"set XLA_FLAGS='{GPU_COMMAND_BUFFER_FLAG}' in the environment before starting Python"
        )
    os.environ["XLA_FLAGS"] = (flags + " " + GPU_COMMAND_BUFFER_FLAG).strip()


def _command_buffers_off(flags: str) -> bool:
    # The last occurrence wins, as in XLA's own flag parsing.
    found = re.findall(r"--xla_gpu_enable_command_buffer=(\S*)", flags)
    return bool(found) and found[-1] in ("", '""', "''")


def measure(
    fn,
    *args,
    repeats: int = DEFAULT_METHOD.repeats,
    discard: int = DEFAULT_METHOD.discard,
    allocator: str = DEFAULT_METHOD.allocator,
) -> pd.DataFrame:
    """Measure every kernel of a jitted program, joined to its HLO instructions.

    The project's one methodology (`Method`, the same as the measurement
    suite's and calibration's): glibc's allocator in its steady state, one
    untraced call, `repeats` traced runs of which the first `discard` are
    thrown away, the minimum over the kept runs.

    **Arguments:**

    - `fn`: a function (jitted here) or an already `jax.jit`-ed one.
    - `*args`: example arguments (pytrees of arrays), positional.
    - `repeats`: runs in total, each waited for (`block_until_ready`).
    - `discard`: leading runs thrown away as warm-up; `repeats - discard` are kept.
    - `allocator`: `"steady"` (default: runs reuse memory, no page faults on
      fresh buffers, as calibration assumed) or `"cold"` (every large buffer
      is mapped afresh each run and pays its page faults). See `set_allocator`.

    **Returns:** a DataFrame with one row per kernel, in execution order
    (`KERNEL_COLUMNS`): `hlo_module`, `hlo_op` (the instruction name),
    `opcode`, `fusion_kind`, `computation` (where the instruction lives),
    `role` (`"entry"` or `"control"` for loop bodies / branches), `n` (kept
    samples), `launches` (executions per program run, median over runs),
    `min_per_run_s` and `median_per_run_s` (seconds per program run: a
    kernel launched several times in one run, like a loop body, is summed
    over its launches), `min_per_launch_s` (`min_per_run_s / launches`, what
    `analyze(...)["time_s"]` predicts), `samples_per_run_s` (the kept
    per-run samples), `in_module` (the instruction was found in the compiled
    module). `attrs` carries `hlo_module`, `backend`, `device`,
    `jax_version`, `hlo_text` and the methodology (`Method.fields()`).

    Raises `MeasurementError` when the trace shows no kernel of the program,
    or when a run's kernels do not fit within its wall time. See
    `measure_program` for the per-run table and more options.
    """
    return measure_program(fn, *args, repeats=repeats, discard=discard, allocator=allocator).kernels


def measure_program(
    fn,
    *args,
    repeats: int = DEFAULT_METHOD.repeats,
    discard: int = DEFAULT_METHOD.discard,
    allocator: str = DEFAULT_METHOD.allocator,
    trace_dir=None,
    check: str = "raise",
) -> Measurement:
    """Like `measure`, but returns the whole `Measurement`.

    Every measurement of the project goes through here (`measure`, the
    command line, the suite, the scripts), so they share one methodology.

    **Arguments:**

    - `fn`, `*args`, `repeats`, `discard`, `allocator`: as for `measure`.
    - `trace_dir`: where to write the profiler trace (kept); default a
      temporary directory, removed afterwards.
    - `check`: what a failed wall-time check does: `"raise"`, `"warn"` or
      `"ignore"`. Kernels that merely overlap (the CPU runtime runs
      independent thunks on several threads) only ever warn.

    **Returns:** a `Measurement`.
    """
    import jax

    method = Method(allocator=allocator, repeats=repeats, discard=discard)
    if check not in ("raise", "warn", "ignore"):
        raise ValueError(f"check must be 'raise', 'warn' or 'ignore', not {check!r}")

    set_allocator(method.allocator)
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    compiled = jitted.lower(*args).compile()
    hlo_text = compiled.as_text()
    index = ModuleIndex(hlo_text)
    dev = device_description()
    if dev["backend"] in ("gpu", "cuda", "rocm") and not _command_buffers_off(os.environ.get("XLA_FLAGS", "")):
        warnings.warn(
            "XLA:GPU command buffers are on: kernels recorded into a command buffer lose their "
            f"HLO names. Start Python with XLA_FLAGS='{GPU_COMMAND_BUFFER_FLAG}' "
            "(or call xla_costmodel.measure.disable_gpu_command_buffers() before using jax).",
            CommandBufferWarning,
            stacklevel=2,
        )

    for _ in range(method.warmup_calls):  # allocations, thread pools
        jax.block_until_ready(compiled(*args))
    host_wall: list[float] = []
    faults: list[float] = []
    with tempfile.TemporaryDirectory(prefix="xla_costmodel_trace_") as tmp:
        logdir = Path(trace_dir) if trace_dir is not None else Path(tmp)
        with jax.profiler.trace(str(logdir)):
            for i in range(repeats):
                with jax.profiler.TraceAnnotation(f"{RUN_ANNOTATION}{i}"):
                    f0 = page_faults()
                    t0 = time.perf_counter_ns()
                    jax.block_until_ready(compiled(*args))
                    host_wall.append((time.perf_counter_ns() - t0) * 1e-9)
                    faults.append(float(page_faults() - f0))
        events, fmt, path = _read_newest(logdir)
        m = _build(events, fmt, path, index, dev, host_wall, repeats, discard, check, method=method, faults=faults)
    _check_page_faults(m)
    return m


def _check_page_faults(m: Measurement) -> None:
    if m.method.allocator != "steady":
        return
    kept = m.runs[m.runs["kept"]]
    least = float(kept["page_faults"].min()) if len(kept) else math.nan
    if least > _STEADY_FAULTS_MAX:
        warnings.warn(
            f"{m.module.name}: every kept run page-faulted at least {least:.0f} times "
            f"({least * 4096 / 2**20:.0f} MiB of fresh pages at 4 KiB) although the allocator is steady, "
            "so kernel times include first-touch costs; glibc maps buffers larger than a thread arena (64 MiB) "
            "afresh: start Python with MALLOC_ARENA_MAX=1 for steady timings",
            PageFaultWarning,
            stacklevel=3,
        )


def measurement_from_trace(trace, hlo_text: str, *, discard: int = 0, check: str = "raise") -> Measurement:
    """Build a `Measurement` from a trace written earlier (by `measure_program(trace_dir=...)`).

    **Arguments:**

    - `trace`: a `jax.profiler.trace` log directory, an `*.xplane.pb`, or a
      trace JSON file. Runs are found by their annotations
      (`xla_costmodel.measure#<i>`).
    - `hlo_text`: the compiled module's text, from the process that ran it.
    - `discard`: leading runs to throw away.
    - `check`: as for `measure_program`.

    **Returns:** a `Measurement`; `device` and versions come from the trace
    (`host_wall_s` is NaN: Python's own timing is not in the trace).
    """
    if check not in ("raise", "warn", "ignore"):
        raise ValueError(f"check must be 'raise', 'warn' or 'ignore', not {check!r}")
    p = Path(trace)
    if p.is_dir():
        events, fmt, path = _read_newest(p)
    else:
        events = read_trace(p)
        fmt, path = events.attrs["format"], str(p)
    index = ModuleIndex(hlo_text)
    meta = events.attrs.get("metadata", {})
    device_planes = sorted(pl for pl in events["plane"].unique() if str(pl).startswith("/device:"))
    backend = "gpu" if any("GPU" in pl for pl in device_planes) else ("cpu" if not device_planes else "device")
    dev = {
        "backend": backend,
        "device_kind": "",
        "device": f"{backend}: {', '.join(device_planes) or 'host'} (from trace)",
        "jax_version": str(meta.get("jax_version", "")),
        "jaxlib_version": str(meta.get("jaxlib_version", "")),
    }
    method = Method(allocator="unknown", repeats=max(len(run_spans(events)), discard + 1), discard=discard)
    return _build(events, fmt, path, index, dev, [], None, discard, check, method=method)


def merge_measurements(parts: list[Measurement]) -> Measurement:
    """Pool the samples of several measurements of the same compiled program.

    Used to measure a program in several rounds spread out in time, so that
    one stretch of interference on a shared host cannot spoil every sample.

    **Arguments:**

    - `parts`: measurements whose compiled module text is identical.

    **Returns:** one `Measurement`: samples concatenated per kernel, `n`,
    `min_per_run_s`, `median_per_run_s`, `launches` and `min_per_launch_s`
    recomputed, the runs of all parts (a `round` column says which part each
    came from).
    """
    if not parts:
        raise ValueError("nothing to merge")
    first = parts[0]
    for p in parts[1:]:
        if p.hlo_text != first.hlo_text:
            raise ValueError(
                f"cannot merge measurements of different compiled modules ({first.module.name} vs {p.module.name})"
            )
        if p.method != first.method:
            raise ValueError(f"cannot merge measurements made with different methods ({first.method} vs {p.method})")
    if len(parts) == 1:
        return first
    order: list[str] = []
    pooled: dict[str, dict] = {}
    for p in parts:
        for row in p.kernels.to_dict("records"):
            op = row["hlo_op"]
            if op not in pooled:
                order.append(op)
                pooled[op] = {**row, "samples_per_run_s": list(row["samples_per_run_s"]), "_launches": [row["launches"]]}
            else:
                pooled[op]["samples_per_run_s"].extend(row["samples_per_run_s"])
                pooled[op]["_launches"].append(row["launches"])
    rows = []
    for op in order:
        r = pooled[op]
        r.update(_statistics(r["samples_per_run_s"], float(np.median(r.pop("_launches")))))
        rows.append(r)
    kernels = pd.DataFrame(rows, columns=list(first.kernels.columns))
    kernels.attrs.update(first.kernels.attrs)
    runs = pd.concat([p.runs.assign(round=i) for i, p in enumerate(parts)], ignore_index=True)
    seen = set(kernels["hlo_op"])
    missing = tuple(k for k in first.module.expected_kernels() if k not in seen)
    return Measurement(
        kernels=kernels,
        runs=runs,
        hlo_text=first.hlo_text,
        module=first.module,
        missing=missing,
        backend=first.backend,
        device=first.device,
        jax_version=first.jax_version,
        jaxlib_version=first.jaxlib_version,
        trace_format=first.trace_format,
        trace_path=first.trace_path,
        method=first.method,
    )


def _statistics(samples: list[float], launches: float) -> dict:
    """A kernel's statistics over its kept per-run samples (the methodology's one place for them)."""
    lo = float(np.min(samples))
    return {
        "n": len(samples),
        "launches": launches,
        "min_per_run_s": lo,
        "median_per_run_s": float(np.median(samples)),
        "min_per_launch_s": per_launch_s(lo, launches),
    }


def _read_newest(logdir: Path) -> tuple[pd.DataFrame, str, str]:
    files = find_trace_files(logdir)
    if "xplane" in files:
        try:
            ev = read_trace(files["xplane"])
            return ev, "xplane", str(files["xplane"])
        except TraceError as e:
            if "json" not in files:
                raise
            warnings.warn(f"{e}; falling back to the trace JSON", RuntimeWarning, stacklevel=3)
    ev = read_trace(files["json"])
    return ev, "json", str(files["json"])


def run_spans(events: pd.DataFrame) -> pd.DataFrame:
    """The annotated runs of a trace: columns `run`, `start_ns`, `end_ns`, sorted by run."""
    names = events["name"].astype(str)
    m = names.str.extract(_RUN_RE, expand=False)
    spans = events.loc[m.notna(), ["start_ns", "end_ns"]].copy()
    spans.insert(0, "run", m[m.notna()].astype(int).to_numpy())
    return spans.sort_values("run").drop_duplicates("run").reset_index(drop=True)


def assign_runs(kern: pd.DataFrame, spans: pd.DataFrame) -> pd.Series:
    """For each kernel execution, the run whose span contains its start (-1 if none)."""
    if len(spans) == 0 or len(kern) == 0:
        return pd.Series(-1, index=kern.index, dtype="int64")
    order = np.argsort(spans["start_ns"].to_numpy())
    s = spans["start_ns"].to_numpy()[order]
    e = spans["end_ns"].to_numpy()[order]
    r = spans["run"].to_numpy()[order]
    starts = kern["start_ns"].to_numpy()
    pos = np.searchsorted(s, starts, side="right") - 1
    ok = (pos >= 0) & (starts <= e[np.clip(pos, 0, None)])
    out = np.where(ok, r[np.clip(pos, 0, None)], -1)
    return pd.Series(out, index=kern.index, dtype="int64")


def completion_times(ours: pd.DataFrame, spans: pd.DataFrame, index: ModuleIndex) -> np.ndarray:
    """When each kernel execution finished, given the trace's evidence.

    A synchronous CPU thunk (and every GPU kernel) finishes when its event
    ends. An asynchronous CPU thunk finishes after its event, by the time its
    completion callback runs (`done_ns`); that callback may run late, so the
    time is also capped by the earliest start, in the same run, of a kernel
    that reads its result, and by the end of the run itself.
    """
    end = ours["end_ns"].to_numpy().astype(float).copy()
    done = ours["done_ns"].to_numpy().astype(float)
    late = np.flatnonzero(np.isfinite(done) & (done > end))
    if len(late) == 0:
        return end
    span_end = dict(zip(spans["run"], spans["end_ns"]))
    runs = ours["run"].to_numpy()
    ops = ours["hlo_op"].to_numpy()
    starts = ours["start_ns"].to_numpy()
    first_start: dict[tuple[int, str], float] = {}
    for r, op, st in zip(runs, ops, starts):
        key = (int(r), op)
        if st < first_start.get(key, np.inf):
            first_start[key] = float(st)
    for i in late:
        r = int(runs[i])
        bound = min(done[i], span_end.get(r, np.inf))
        for c in index.consumers(ops[i]):
            st = first_start.get((r, c))
            if st is not None and st >= starts[i]:
                bound = min(bound, st)
        end[i] = max(end[i], bound)
    return end


def _build(events, fmt, path, index: ModuleIndex, dev, host_wall, repeats, discard, check, *, method: Method,
           faults=()) -> Measurement:
    import jax
    import jaxlib

    hlo_text = index.text
    spans = run_spans(events)
    if repeats is not None and len(spans) != repeats:
        raise MeasurementError(
            f"{path}: expected {repeats} annotated runs ('{RUN_ANNOTATION}<i>'), found {len(spans)}"
        )
    if len(spans) <= discard:
        raise MeasurementError(
            f"{path}: {len(spans)} annotated runs ('{RUN_ANNOTATION}<i>'), not more than discard={discard}"
        )
    kern = kernel_executions(events)
    ours = kern[kern["hlo_module"] == index.name].copy()
    if ours.empty:
        seen = sorted(set(kern["hlo_module"].dropna()))
        raise MeasurementError(
            f"{path}: no kernel of module '{index.name}' in the trace "
            f"(modules seen: {seen or 'none'}; on GPU, are command buffers off?)"
        )
    ours["run"] = assign_runs(ours, spans).to_numpy()
    outside = ours[ours["run"] < 0]
    ours = ours[ours["run"] >= 0].copy()
    ours["end_ns"] = completion_times(ours, spans, index)
    ours["dur_ns"] = ours["end_ns"] - ours["start_ns"]
    ours["opcode"] = ours["hlo_op"].map(lambda n: index.instructions[n].opcode if n in index.instructions else None)

    runs = _runs_table(ours, spans, host_wall, discard, faults)
    _check_runs(runs, outside, path, check)

    kept = ours[ours["run"] >= discard]
    per_run = kept.groupby(["hlo_op", "run"], sort=False).agg(t=("dur_ns", "sum"), k=("dur_ns", "size"), s=("start_ns", "min"))
    rows = []
    first_start = per_run.groupby(level=0, sort=False)["s"].min()
    for op in first_start.sort_values(kind="stable").index:
        grp = per_run.loc[op]
        samples = (grp["t"].to_numpy() * 1e-9).tolist()
        info = index.instructions.get(op)
        rows.append(
            {
                "hlo_module": index.name,
                "hlo_op": op,
                "opcode": info.opcode if info else None,
                "fusion_kind": info.fusion_kind if info else None,
                "computation": info.computation if info else None,
                "role": info.role if info else None,
                **_statistics(samples, float(np.median(grp["k"].to_numpy()))),
                "samples_per_run_s": samples,
                "in_module": info is not None,
            }
        )
    kernels = pd.DataFrame(rows, columns=list(KERNEL_COLUMNS))
    seen = set(kernels["hlo_op"])
    missing = tuple(k for k in index.expected_kernels() if k not in seen)
    jax_version = dev.get("jax_version", jax.__version__)
    kernels.attrs.update(
        hlo_module=index.name,
        backend=dev["backend"],
        device=dev["device"],
        jax_version=jax_version,
        hlo_text=hlo_text,
        **method.fields(),
    )
    return Measurement(
        kernels=kernels,
        runs=runs,
        hlo_text=hlo_text,
        module=index,
        missing=missing,
        backend=dev["backend"],
        device=dev["device"],
        jax_version=jax_version,
        jaxlib_version=dev.get("jaxlib_version", getattr(jaxlib, "__version__", "")),
        trace_format=fmt,
        trace_path=path,
        method=method,
    )


def _runs_table(ours: pd.DataFrame, spans: pd.DataFrame, host_wall, discard: int, faults=()) -> pd.DataFrame:
    control = ours["opcode"].isin(CALLS_KERNEL_SEQUENCES).to_numpy()
    rows = []
    for run, start, end in spans[["run", "start_ns", "end_ns"]].itertuples(index=False):
        sel = (ours["run"] == run).to_numpy()
        s = ours["start_ns"].to_numpy()[sel]
        e = ours["end_ns"].to_numpy()[sel]
        ctl = control[sel]
        # A loop body's kernels run inside the while thunk's own span (CPU);
        # count them once, through the parent.
        nested = np.zeros(len(s), dtype=bool)
        for j in np.flatnonzero(ctl):
            nested |= (s >= s[j]) & (e <= e[j]) & (np.arange(len(s)) != j)
        ksum = float((e - s)[~nested].sum())
        busy = interval_union_ns(s, e)
        wall = float(end - start)
        late = float(max(0.0, (e.max() if len(e) else start) - end))
        rows.append(
            {
                "run": int(run),
                "kept": int(run) >= discard,
                "wall_s": wall * 1e-9,
                "host_wall_s": float(host_wall[int(run)]) if int(run) < len(host_wall) else math.nan,
                "page_faults": float(faults[int(run)]) if int(run) < len(faults) else math.nan,
                "kernel_sum_s": ksum * 1e-9,
                "busy_s": busy * 1e-9,
                "n_kernels": int(sel.sum()),
                "late_s": late * 1e-9,
                "overlap": ksum > busy * (1 + 1e-9) + 1.0,
            }
        )
    return pd.DataFrame(rows)


def _check_runs(runs: pd.DataFrame, outside: pd.DataFrame, path: str, check: str) -> None:
    """Every kernel must lie within its run, and a run's kernels must fit in its wall time."""
    if check == "ignore":
        return
    tol = runs["wall_s"] * _WALL_TOL_REL + _WALL_TOL_NS * 1e-9
    problems = []
    if len(outside):
        problems.append(
            f"{len(outside)} kernel execution(s) of the module lie outside every annotated run "
            f"(first: {outside['hlo_op'].iloc[0]!r})"
        )
    late = runs["late_s"] > tol
    if late.any():
        r = runs[late].iloc[0]
        problems.append(
            f"in {int(late.sum())} run(s) a kernel ends after the run did "
            f"(run {int(r['run'])}: {r['late_s'] * 1e6:.1f} µs late)"
        )
    over_busy = runs["busy_s"] > runs["wall_s"] + tol
    if over_busy.any():
        r = runs[over_busy].iloc[0]
        problems.append(
            f"in run {int(r['run'])} kernels cover {r['busy_s'] * 1e6:.1f} µs but the run took "
            f"{r['wall_s'] * 1e6:.1f} µs of wall time ({int(over_busy.sum())} run(s) affected)"
        )
    if problems:
        msg = f"{path}: " + "; ".join(problems) + "; kernel events are attributed to the wrong run or the trace clock is off"
        if check == "raise":
            raise MeasurementError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=4)
    concurrent = (runs["kernel_sum_s"] > runs["wall_s"] + tol) & ~over_busy
    if concurrent.any():
        r = runs[concurrent].iloc[0]
        warnings.warn(
            f"in {int(concurrent.sum())} run(s) kernel times add up to more than the wall time "
            f"(run {int(r['run'])}: {r['kernel_sum_s'] * 1e6:.1f} µs of kernels in "
            f"{r['wall_s'] * 1e6:.1f} µs) because kernels ran concurrently; per-kernel times "
            "include contention",
            ConcurrentKernelsWarning,
            stacklevel=4,
        )
