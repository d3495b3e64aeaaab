"""The methodology's timing loop, in whichever process runs the program.

`time_program` is the one loop every measurement runs (`_method.Method`:
warm-up calls, `repeats` runs under the profiler, each in a named trace
annotation, the trace read into a `Measurement`), called by `measure_program`
in this process and by the measuring worker (`_isolated`) in its own. It
lives apart from both so that neither imports the other.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import time
import warnings
from pathlib import Path

from ..devices.host import cpu_model
from ._allocator import page_faults, set_allocator
from ._method import RUN_ANNOTATION, Measurement, Method, PageFaultWarning
from ._module import ModuleIndex
from ._runs import build_measurement, read_newest

__all__ = ["MIN_KEPT_RUNS", "device_description", "time_program"]


# A steady run may still touch a few fresh pages (trace buffers, small
# allocations); more than this many in every kept run means buffers are
# being mapped afresh.
_STEADY_FAULTS_MAX = 2048


#: Runs kept (after the discarded ones) that a time budget never cuts below.
MIN_KEPT_RUNS = 5


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


def time_program(run_once, hlo_text: str, method: Method, *, trace_dir=None, check: str = "raise",
                 process: str = "in-process", budget_s: float | None = None, started: float | None = None,
                 report=None) -> Measurement:
    """The methodology's timing loop, in the process that runs the program (here, or the measuring worker).

    **Arguments:** `run_once()`: runs the compiled program once and waits for
    it; `hlo_text`: the compiled module's text; `method`; `trace_dir`,
    `check`, `budget_s`: as for `measure_program`, the budget counted from
    `started` (`time.perf_counter()`; default now); `process`: recorded in
    the result; `report(runs_done)`: called after each run.

    **Returns:** the `Measurement`; warns (`PageFaultWarning`) when a steady
    measurement page-faulted in every kept run.
    """
    import jax

    started = time.perf_counter() if started is None else started
    repeats, discard = method.repeats, method.discard
    fewest = min(repeats, discard + MIN_KEPT_RUNS)  # runs a budget never cuts below
    set_allocator(method.allocator)
    index = ModuleIndex(hlo_text)
    dev = device_description()
    for _ in range(method.warmup_calls):  # allocations, thread pools
        run_once()
    host_wall: list[float] = []
    faults: list[float] = []
    with tempfile.TemporaryDirectory(prefix="xla_costmodel_trace_") as tmp:
        logdir = Path(trace_dir) if trace_dir is not None else Path(tmp)
        with jax.profiler.trace(str(logdir)):
            for i in range(repeats):
                if budget_s is not None and i >= fewest and time.perf_counter() - started >= budget_s:
                    break
                # The annotation holds the host clock's readings and the run
                # only, so that the traced span and `host_wall_s` time the
                # same thing (counting page faults inside it added ~15 us).
                f0 = page_faults()
                with jax.profiler.TraceAnnotation(f"{RUN_ANNOTATION}{i}"):
                    t0 = time.perf_counter_ns()
                    run_once()
                    t1 = time.perf_counter_ns()
                host_wall.append((t1 - t0) * 1e-9)
                faults.append(float(page_faults() - f0))
                if report is not None:
                    report(i + 1)
        taken = len(host_wall)
        if taken < repeats:  # the budget ended the runs: the method records the runs taken
            method = dataclasses.replace(method, repeats=taken)
        events, fmt, path = read_newest(logdir)
        m = build_measurement(events, fmt, path, index, dev, host_wall, taken, discard, check, method=method,
                              faults=faults)
    m = dataclasses.replace(m, process=process)
    for table in (m.kernels, m.control_flow):
        table.attrs.update(process=process, repeats_requested=repeats, budget_s=budget_s,
                           stopped_by_budget=taken < repeats)
    _check_page_faults(m)
    return m


def _check_page_faults(m: Measurement) -> None:
    if m.method.allocator != "steady":
        return
    kept = m.runs[m.runs["kept"]]
    least = float(kept["page_faults"].min()) if len(kept) else math.nan
    if least > _STEADY_FAULTS_MAX:
        where = ("the measuring worker" if m.process == "worker" else
                 "this process, which did not start with the steady allocator in its environment "
                 "(measure with in_process=None or False to time it in the measuring worker)")
        warnings.warn(
            f"{m.module.name}: every kept run page-faulted at least {least:.0f} times "
            f"({least * 4096 / 2**20:.0f} MiB of fresh pages at 4 KiB) although the allocator is steady, "
            f"so kernel times include first-touch costs; measured in {where}",
            PageFaultWarning,
            stacklevel=4,
        )
