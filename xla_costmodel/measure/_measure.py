"""Measure the kernels of one jitted program from a `jax.profiler` trace.

The project's one timing methodology (`Method`), used by `measure_kernels()`, by
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

Where it runs: the steady state holds only in a process that started in it
(`_allocator.STEADY_TUNABLES` in its environment: `mallopt` later cannot
switch off glibc's per-thread cache, which keeps large aligned buffers from
being reused). On the CPU, a process that did not (a notebook, the command
line) has its programs timed in the measuring worker (`_isolated`), one that
did times them itself; both run the same timing loop (`_timing.time_program`). GPU
programs are timed in the process that holds the GPU.

Units: a kernel launched several times in one run (a loop body) has its
launches summed per run; columns say which they hold (`*_per_run_s`,
`*_per_launch_s`).

The methodology and the `Measurement` it produces are in `_method`; reading
the trace into a `Measurement` is `_runs`.
"""

from __future__ import annotations

import os
import re
import time
import warnings

import pandas as pd

from ._allocator import set_allocator, steady_from_start
from ._method import DEFAULT_METHOD, CommandBufferWarning, Measurement, Method
from ._timing import MIN_KEPT_RUNS, device_description, time_program

__all__ = [
    "GPU_COMMAND_BUFFER_FLAG",
    "MIN_KEPT_RUNS",
    "device_description",
    "disable_gpu_command_buffers",
    "measure_kernels",
    "measure_program",
]

#: XLA flag that stops XLA:GPU from recording kernels into command buffers
#: (CUDA graphs); inside a command buffer kernels lose their `hlo_op` names.
GPU_COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer="


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


def measure_kernels(
    fn,
    *args,
    repeats: int = DEFAULT_METHOD.repeats,
    discard: int = DEFAULT_METHOD.discard,
    allocator: str = DEFAULT_METHOD.allocator,
    budget_s: float | None = None,
    progress=True,
    in_process: bool | None = None,
) -> pd.DataFrame:
    """Measure every kernel of a jitted program, joined to its HLO instructions.

    The project's one methodology (`Method`, the same as the measurement
    suite's and calibration's): glibc's allocator in its steady state, one
    untraced call, `repeats` traced runs of which the first `discard` are
    thrown away, the minimum over the kept runs. On the CPU the program runs
    in the measuring worker, a process started with the allocator steady,
    unless this process was started so (see `in_process`).

    **Arguments:**

    - `fn`: a function (jitted here) or an already `jax.jit`-ed one.
    - `*args`: example arguments (pytrees of arrays), positional.
    - `repeats`: runs in total, each waited for (`block_until_ready`).
    - `discard`: leading runs thrown away as warm-up; `repeats - discard` are kept.
    - `allocator`: `"steady"` (default: runs reuse memory, no page faults on
      fresh buffers, as calibration assumed) or `"cold"` (every large buffer
      is mapped afresh each run and pays its page faults). See `set_allocator`.
    - `budget_s`: seconds the whole measurement may take (compiling
      included): no new run starts once they are spent, but at least
      `discard + MIN_KEPT_RUNS` runs are taken. None: all `repeats`.
    - `progress`: a progress bar on stderr when the runs take more than a
      second (True), none (False), or a function called with `(runs done,
      repeats)` after each run.
    - `in_process`: where the program runs. None (default): on a GPU, here;
      on the CPU, here only if this process started with the steady
      allocator in its environment (`steady_from_start`), else in the
      measuring worker (started once per session; the program travels as
      `jax.export` StableHLO, and what cannot travel is measured here with an
      `InProcessMeasurementWarning`). True: here (large buffers may then pay
      page faults, see `PageFaultWarning`). False: in the measuring worker
      (CPU only; raises `ValueError` for a program that cannot travel).

    **Returns:** a DataFrame with one row per kernel, in execution order
    (`KERNEL_COLUMNS`): `hlo_module`, `hlo_op` (the instruction name),
    `opcode`, `fusion_kind`, `computation` (where the instruction lives),
    `role` (where the instruction lives: `"entry"`, the entry computation,
    run once per program run; `"control"`, a while loop's body or condition,
    a conditional's branch or a called computation, run `launches` times per
    program run, possibly zero; `_method.ROLES`), `n` (kept
    samples), `launches` (executions per program run, median over runs),
    `min_per_run_s` and `median_per_run_s` (seconds per program run: a
    kernel launched several times in one run, like a loop body, is summed
    over its launches), `min_per_launch_s` (`min_per_run_s / launches`, what
    `analyze(...)["time_s"]` predicts), `samples_per_run_s` (the kept
    per-run samples), `in_module` (the instruction was found in the compiled
    module). `attrs` carries `hlo_module`, `backend`, `device`,
    `jax_version`, `hlo_text` (the module that ran), `process` and the
    methodology (`Method.fields()`: `repeats` counts the runs taken), and
    `repeats_requested`, `budget_s`, `stopped_by_budget` (whether the budget
    ended the runs early).

    Only kernels are rows: `min_per_run_s.sum()` is the run's kernel time.
    The while loops, conditionals and calls that XLA:CPU runs as thunks of
    their own are not kernels: each one's span holds its body's kernels,
    which are rows here. Their own times (body included) are in
    `measure_program(...).control_flow`.

    Raises `UserProgramError` (`measure._target`; a `ValueError`) naming the
    user's file, line and exception when jax cannot trace or lower the
    program (a shape mismatch in it), `MeasurementError` when the trace shows no kernel of the program,
    when a run's kernels do not fit within its wall time, or when the
    measuring worker died. See `measure_program` for the per-run table and
    more options.
    """
    return measure_program(fn, *args, repeats=repeats, discard=discard, allocator=allocator, budget_s=budget_s,
                           progress=progress, in_process=in_process).kernels


def measure_program(
    fn,
    *args,
    repeats: int = DEFAULT_METHOD.repeats,
    discard: int = DEFAULT_METHOD.discard,
    allocator: str = DEFAULT_METHOD.allocator,
    trace_dir=None,
    check: str = "raise",
    budget_s: float | None = None,
    progress=False,
    in_process: bool | None = None,
    compiler_options: dict | None = None,
) -> Measurement:
    """Like `measure`, but returns the whole `Measurement`.

    Every measurement of the project goes through here (`measure`, the
    command line, the suite, the scripts), so they share one methodology.

    **Arguments:**

    - `fn`, `*args`, `repeats`, `discard`, `allocator`, `budget_s`,
      `progress`, `in_process`: as for `measure` (here `progress` defaults
      to False).
    - `trace_dir`: where to write the profiler trace (kept); default a
      temporary directory, removed afterwards.
    - `check`: what a failed wall-time check does: `"raise"`, `"warn"` or
      `"ignore"`. Kernels that merely overlap (the CPU runtime runs
      independent thunks on several threads) only ever warn.
    - `compiler_options`: XLA options for the compilation, as for
      `Lowered.compile(compiler_options=...)` (e.g. `{"xla_disable_hlo_passes":
      "fusion"}`), wherever the program runs.

    **Returns:** a `Measurement` (`process` says where it ran).
    """
    import jax

    from ._isolated import InProcessMeasurementWarning, NotExportable, export_program, measure_in_worker
    from ._target import lower_user_program

    started = time.perf_counter()
    method = Method(allocator=allocator, repeats=repeats, discard=discard)
    if check not in ("raise", "warn", "ignore"):
        raise ValueError(f"check must be 'raise', 'warn' or 'ignore', not {check!r}")
    if budget_s is not None and not (isinstance(budget_s, (int, float)) and budget_s > 0):
        raise ValueError(f"budget_s must be a positive number of seconds, not {budget_s!r}")
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    name = getattr(fn, "__name__", "program")
    if not _runs_here(in_process):
        try:
            program = export_program(jitted, args, name)
        except NotExportable as e:
            # A program that jax cannot even trace fails here, as the user's error, not as a
            # program that cannot travel.
            lower_user_program(jitted, args, name)
            if in_process is False:
                raise ValueError(f"{name} cannot be measured in the measuring worker: {e}") from None
            warnings.warn(
                f"{name} is measured in this process, not in the measuring worker: {e}; kernels writing "
                "large buffers may pay page faults the calibration never saw (see Measurement.runs['page_faults'])",
                InProcessMeasurementWarning,
                stacklevel=2,
            )
        else:
            report = _progress(progress, repeats, name)
            left = None if budget_s is None else max(budget_s - (time.perf_counter() - started), 1e-9)
            try:
                return measure_in_worker(program, method, trace_dir=trace_dir, check=check, budget_s=left,
                                         compiler_options=compiler_options, on_runs=report, warn_stacklevel=3)
            finally:
                report(None)

    set_allocator(method.allocator)
    compiled = lower_user_program(jitted, args, name).compile(compiler_options=compiler_options)
    if device_description()["backend"] in ("gpu", "cuda", "rocm") and not _command_buffers_off(os.environ.get("XLA_FLAGS", "")):
        warnings.warn(
            "XLA:GPU command buffers are on: kernels recorded into a command buffer lose their "
            f"HLO names. Start Python with XLA_FLAGS='{GPU_COMMAND_BUFFER_FLAG}' "
            "(or call xla_costmodel.measure.disable_gpu_command_buffers() before using jax).",
            CommandBufferWarning,
            stacklevel=2,
        )
    report = _progress(progress, repeats, name)
    try:
        return time_program(lambda: jax.block_until_ready(compiled(*args)), compiled.as_text(), method,
                            trace_dir=trace_dir, check=check, process="in-process", budget_s=budget_s,
                            started=started, report=report)
    finally:
        report(None)


def _runs_here(in_process: bool | None) -> bool:
    """Whether `measure_program` times the program in this process (see `measure`'s `in_process`)."""
    import jax

    backend = jax.default_backend()
    if in_process is None:
        return backend != "cpu" or steady_from_start()
    if not in_process and backend != "cpu":
        raise ValueError(f"the measuring worker runs programs on the CPU; this process's backend is {backend} "
                         "(GPU programs are measured in the process that holds the GPU: in_process=None or True)")
    return bool(in_process)


def _progress(progress, total: int, name: str):
    """`report(runs_done)` after each run and `report(None)` at the end, for `progress` (see `measure`)."""
    if callable(progress):
        return lambda done: None if done is None else progress(done, total)
    if not progress:
        return lambda done: None
    from .._progress import progress_bar

    # Shown only when the runs take more than a second (short measurements stay quiet), on a terminal.
    bar = progress_bar(total, f"measuring {name}", "run")

    def report(done):
        if done is None:
            bar.close()
        else:
            bar.update(done - bar.n)

    return report
