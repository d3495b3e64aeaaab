"""GPU captures as calibration dataset rows.

A *capture* is a table of device events, one row per kernel, memcpy or
memset a GPU ran while a program's runs were traced (`CAPTURE_EVENT_COLUMNS`):
`program`, `size`, `source` (the library), `run`, `hlo_op`, `hlo_module`,
`kernel_symbol`, `stream`, `start_in_run_ns`, `duration_ns` and
`kernel_details` (CUPTI's launch record; none for memsets and memcpys).
It is the format of the H100 corpus capture shipped in `calibration/`
(`h100-sxm_corpus_events.parquet`), and what `capture_events_from_trace` makes
of a `jax.profiler` trace of any GPU, read by the one trace reader
(`measure._trace`).

`capture_kernels` sums each instruction's events per run: one row per
(`program`, `size`, `hlo_op`) with `launches` (events per run, the median
over runs; memsets are not counted: a cuBLAS call writes one before its
GEMM), `min_per_run_s`, `median_per_run_s` and the per-run samples.
`capture_executions` counts each instruction's executions per run: the
bursts of its consecutive events (a library call's kernels run back to back).
`capture_rows` joins those to the compiled modules and returns rows of the
calibration dataset (`measure._dataset`, schema 2), through the same row
builder as every other measurement (`measure._suite.measurement_rows`), with
the capture's own provenance (device kind, versions, methodology) in place
of this process's.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from ._dataset import DATASET_COLUMNS
from ._method import RUN_ANNOTATION, Measurement, Method, kernel_statistics
from ._module import ModuleIndex
from ._runs import is_memset

__all__ = [
    "CAPTURE_EVENT_COLUMNS",
    "CaptureError",
    "capture_events_from_trace",
    "capture_executions",
    "capture_kernels",
    "capture_rows",
    "is_memcpy",
    "is_memset",
]

#: Columns of a capture's event table, in order.
CAPTURE_EVENT_COLUMNS = ("program", "size", "source", "run", "hlo_op", "hlo_module", "kernel_symbol", "stream",
                         "start_in_run_ns", "duration_ns", "kernel_details")
#: Columns `capture_rows` adds to the dataset's: the longest event's kernel symbol and launch record, and the
#: median wall time per run.
CAPTURE_EXTRA_COLUMNS = ("kernel_symbol", "kernel_details", "wall_median_per_run_s")

_KEY = ["program", "size", "hlo_op"]


class CaptureError(ValueError):
    """A capture that lacks what a dataset row needs (columns, runs, a module of one of its programs).

    `str(error)` names the capture and the problem.
    """


def is_memcpy(kernel_symbol) -> np.ndarray:
    """Whether each event is a memcpy (`MemcpyD2D`, `MemcpyD2H`, `MemcpyH2D`): a copy the driver runs, such as a
    while loop's predicate sent to the host once per iteration."""
    return pd.Series(kernel_symbol, dtype=object).astype(str).str.startswith("Memcpy").to_numpy()


def _check_columns(events: pd.DataFrame, what: str) -> None:
    missing = [c for c in CAPTURE_EVENT_COLUMNS if c not in events.columns and c != "kernel_details"]
    if missing:
        raise CaptureError(f"{what}: not a GPU capture (missing columns: {', '.join(missing)})")
    if len(events) == 0:
        raise CaptureError(f"{what}: no events")
    dur = pd.to_numeric(events["duration_ns"], errors="coerce").to_numpy(float)
    if not np.all(np.isfinite(dur) & (dur >= 0)):
        raise CaptureError(f"{what}: duration_ns must be finite and not negative")


def capture_kernels(events: pd.DataFrame, *, what: str = "capture") -> pd.DataFrame:
    """Each instruction's events of a capture summed per run.

    **Arguments:**

    - `events`: a capture (`CAPTURE_EVENT_COLUMNS`; `kernel_details` may be absent).
    - `what`: how error messages name the capture.

    **Returns:** one row per (`program`, `size`, `hlo_op`), in order of
    first start: `source`, `hlo_module`, `n` (runs it ran in), `launches`
    (events per run, median over runs; memsets not counted, memcpys
    counted), `min_per_run_s`, `median_per_run_s`, `min_per_launch_s`,
    `samples_per_run_s` (the sum of its event durations in each run, in run
    order), `kernel_symbol` and `kernel_details` (of its longest event).

    Raises `CaptureError` for a table that is not a capture.
    """
    _check_columns(events, what)
    ev = events.copy()
    if "kernel_details" not in ev.columns:
        ev["kernel_details"] = None
    ev["_launch"] = ~is_memset(ev["kernel_symbol"])
    ev["_dur"] = pd.to_numeric(ev["duration_ns"]).astype("float64")
    ev["_start"] = pd.to_numeric(ev["start_in_run_ns"]).astype("float64")
    per_run = (ev.groupby([*_KEY, "run"], sort=False)
               .agg(t=("_dur", "sum"), k=("_launch", "sum"), s=("_start", "min")))
    longest = ev.loc[ev.groupby(_KEY, sort=False)["_dur"].idxmax(),
                     [*_KEY, "source", "hlo_module", "kernel_symbol", "kernel_details"]].set_index(_KEY)
    rows = []
    for key, grp in per_run.groupby(level=[0, 1, 2], sort=False):
        grp = grp.sort_index(level="run")
        samples = (grp["t"].to_numpy() * 1e-9).tolist()
        first = longest.loc[key]
        rows.append({
            "program": key[0], "size": key[1], "hlo_op": key[2],
            "source": first["source"], "hlo_module": first["hlo_module"],
            **kernel_statistics(samples, float(np.median(grp["k"].to_numpy()))),
            "samples_per_run_s": samples,
            "kernel_symbol": first["kernel_symbol"], "kernel_details": first["kernel_details"],
            "_first_start": float(grp["s"].min()),
        })
    out = pd.DataFrame(rows)
    # Within a module, kernels in order of their first start (as `measure` lists them).
    out = out.sort_values(["program", "size", "_first_start"], kind="stable").drop(columns=["_first_start"])
    return out.reset_index(drop=True)


def capture_executions(events: pd.DataFrame, *, what: str = "capture") -> pd.Series:
    """How many times each instruction ran per run of its program, counted from the capture alone.

    Events in order of their start (all streams merged: XLA runs every
    kernel on one compute stream, and a few copies on side streams); one
    execution of an instruction is one burst of its consecutive events (a
    cuSolver call's kernels, its memsets and copies, back to back), and any
    other instruction's event between two of them starts a new execution.
    So a `getrf` that launches six kernels once per run counts 1, where its
    `launches` count 6; a loop body's kernel counts one per iteration (the
    loop's predicate copy, under the loop's name, separates iterations). On
    the H100 corpus this equals `analyze`'s executions on every instruction
    whose trip counts it knows (2350 of 2350 scored kernels).

    **Returns:** a float Series indexed by (`program`, `size`, `hlo_op`): the
    median over runs of the bursts per run.

    Raises `CaptureError` for a table that is not a capture.
    """
    _check_columns(events, what)
    ev = events[["program", "size", "run", "hlo_op"]].copy()
    ev["_start"] = pd.to_numeric(events["start_in_run_ns"]).astype("float64")
    ev = ev.sort_values(["program", "size", "run", "_start"], kind="stable")
    key = ev[["program", "size", "run", "hlo_op"]]
    first = (key != key.shift()).any(axis=1)
    bursts = first.groupby([ev["program"], ev["size"], ev["run"], ev["hlo_op"]], sort=False).sum()
    return bursts.groupby(level=[0, 1, 3], sort=False).median().astype("float64").rename("executions_per_run")

def capture_rows(
    events: pd.DataFrame,
    modules: Mapping[str, str] | Callable[[str], str],
    *,
    walls: pd.DataFrame | None = None,
    device_kind: str,
    jax_version: str,
    jaxlib_version: str | None = None,
    method: Method | None = None,
    suite_run: str = "",
    timestamp: str = "",
    params: Mapping[str, dict] | None = None,
    what: str = "capture",
) -> pd.DataFrame:
    """A GPU capture as rows of the calibration dataset, one per (`program`, `size`, `hlo_op`).

    **Arguments:**

    - `events`: the capture (see the module docstring).
    - `modules`: the compiled (XLA:GPU-optimized) module text of each
      program run, by case `"<program>@<size>"`: a mapping or a function.
      Instructions are joined to it by name, as `measure` joins a trace.
    - `walls`: the wall time of the runs, one row per (`program`, `size`)
      with `wall_min_per_run_s` (and optionally `wall_median_per_run_s`);
      NaN where absent. (The event format has no run spans; a capture read
      by `capture_events_from_trace` has them.)
    - `device_kind`, `jax_version`, `jaxlib_version`: the capture's, as
      `jax.devices()[0].device_kind` and `jax.__version__` said there.
    - `method`: how it was timed (default: 15 runs, none discarded, the
      minimum; `allocator` `"unknown"`).
    - `suite_run`, `timestamp`: the capture's id and time (ISO 8601).
    - `params`: extra `params` entries per case (size arguments, library
      versions).

    **Returns:** a DataFrame with every `DATASET_COLUMNS` column
    (`kernel_class` `"program"`, `case` `"<program>@<size>"`, `kernel` the
    program, `backend` `"gpu"`) followed by `CAPTURE_EXTRA_COLUMNS`;
    `append_dataset` writes it. `launch_overhead_s` is the fastest launch
    of the capture.

    Raises `CaptureError` for a table that is not a capture or a case
    without a module.
    """
    from ._suite import measurement_rows

    kernels = capture_kernels(events, what=what)
    runs_seen = events.groupby(["program", "size"], sort=False)["run"].nunique()
    if method is None:
        method = Method(allocator="unknown", repeats=int(runs_seen.max()), discard=0, warmup_calls=1)
    wall = {} if walls is None else {(p, s): r for (p, s), r in walls.set_index(["program", "size"]).iterrows()}
    jaxlib_version = jax_version if jaxlib_version is None else jaxlib_version
    provenance = {"backend": "gpu", "device_kind": device_kind, "device": f"gpu: {device_kind}",
                  "jax_version": jax_version, "jaxlib_version": jaxlib_version, "timestamp": timestamp}
    out: list[dict] = []
    for (program, size), grp in kernels.groupby(["program", "size"], sort=False):
        case = f"{program}@{size}"
        try:
            text = modules(case) if callable(modules) else modules[case]
        except (KeyError, FileNotFoundError) as e:
            raise CaptureError(f"{what}: no compiled module for {case}") from e
        index = ModuleIndex(text)
        w = wall.get((program, size))
        wall_min = float(w["wall_min_per_run_s"]) if w is not None else math.nan
        wall_median = float(w.get("wall_median_per_run_s", math.nan)) if w is not None else math.nan
        kern = grp.assign(
            opcode=[index.instructions[o].opcode if o in index.instructions else None for o in grp["hlo_op"]],
            fusion_kind=[index.instructions[o].fusion_kind if o in index.instructions else None for o in grp["hlo_op"]],
            computation=[index.instructions[o].computation if o in index.instructions else None for o in grp["hlo_op"]],
            role=[index.instructions[o].role if o in index.instructions else None for o in grp["hlo_op"]],
            in_module=[o in index.instructions for o in grp["hlo_op"]],
        )
        m = Measurement(
            kernels=kern.reset_index(drop=True),
            runs=pd.DataFrame({"run": [0], "kept": [True], "wall_s": [wall_min]}),
            hlo_text=text, module=index, missing=(), backend="gpu", device=provenance["device"],
            jax_version=jax_version, jaxlib_version=jaxlib_version, trace_format="capture", trace_path=what,
            method=method,
        )
        source = str(grp["source"].iloc[0])
        rows = measurement_rows(
            m, case=case, kernel=program, kernel_class="program", size=size,
            params={"program": program, "size": size, "library": source, **dict((params or {}).get(case, {}))},
            source=source, program=program, suite_run=suite_run, rounds=1,
        )
        for row, (_, k) in zip(rows, kern.reset_index(drop=True).iterrows()):
            row.update(provenance)
            row.update(kernel_symbol=k["kernel_symbol"], kernel_details=k["kernel_details"],
                       wall_median_per_run_s=wall_median)
        out.extend(rows)
    df = pd.DataFrame(out)
    launch = df["min_per_launch_s"][~is_memcpy(df["kernel_symbol"])]
    df["launch_overhead_s"] = float(launch.min()) if len(launch) else math.nan
    return df[[*DATASET_COLUMNS, *CAPTURE_EXTRA_COLUMNS]]


def capture_events_from_trace(
    trace,
    *,
    program: str,
    size: str = "",
    source: str = "user",
    hlo_module: str | None = None,
    annotation: str = re.escape(RUN_ANNOTATION) + r"(\d+)$",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A `jax.profiler` trace of a GPU as a capture (the event format above) and its runs.

    **Arguments:**

    - `trace`: an `*.xplane.pb`, a trace JSON, or a `jax.profiler.trace`
      log directory (read by `measure.read_trace`).
    - `program`, `size`, `source`: what the events are of.
    - `hlo_module`: keep only this module's kernels (default: every module's).
    - `annotation`: a regular expression matching the name of each run's
      trace annotation, its first group the run's number (default `measure`'s
      own `xla_costmodel.measure#<i>`).

    **Returns:** `(events, runs)`: the capture, one row per kernel, memcpy or
    memset event of a GPU stream that names its HLO instruction and falls in
    a run (`start_in_run_ns` from the run's start; `kernel_details` empty:
    the trace reader does not keep it); and one row per run with `program`,
    `size`, `run`, `wall_s` (the annotation's span). For `capture_rows`'
    `walls`: `runs.groupby(["program", "size"])["wall_s"].agg(...)`.

    Raises `TraceError` for an unreadable trace, `CaptureError` when it has no
    run annotation or no GPU kernel in a run.
    """
    from ._runs import assign_runs
    from ._trace import kernel_executions, read_trace

    ev = read_trace(trace)
    pattern = re.compile(annotation)
    found = ev["name"].astype(str).str.extract(pattern, expand=False)
    if isinstance(found, pd.DataFrame):
        found = found.iloc[:, 0]
    spans = ev.loc[found.notna(), ["start_ns", "end_ns"]].copy()
    spans.insert(0, "run", found[found.notna()].astype(int).to_numpy())
    spans = spans.sort_values("run").drop_duplicates("run").reset_index(drop=True)
    if spans.empty:
        raise CaptureError(f"{trace}: no run annotation matching {annotation!r}")
    kern = kernel_executions(ev)
    kern = kern[kern["backend"] == "gpu"]
    if hlo_module is not None:
        kern = kern[kern["hlo_module"] == hlo_module]
    kern = kern.assign(run=assign_runs(kern, spans).to_numpy())
    kern = kern[kern["run"] >= 0]
    if kern.empty:
        raise CaptureError(f"{trace}: no GPU kernel inside a run (is this a GPU trace? are command buffers off?)")
    start = dict(zip(spans["run"], spans["start_ns"]))
    events = pd.DataFrame({
        "program": program, "size": size, "source": source,
        "run": kern["run"].astype("int64").to_numpy(),
        "hlo_op": kern["hlo_op"].to_numpy(), "hlo_module": kern["hlo_module"].to_numpy(),
        "kernel_symbol": kern["name"].to_numpy(), "stream": kern["line"].to_numpy(),
        "start_in_run_ns": np.rint(kern["start_ns"].to_numpy() - kern["run"].map(start).to_numpy()).astype("int64"),
        "duration_ns": np.rint(kern["end_ns"].to_numpy() - kern["start_ns"].to_numpy()).astype("int64"),
        "kernel_details": None,
    })
    runs = pd.DataFrame({"program": program, "size": size, "run": spans["run"].to_numpy(),
                         "wall_s": (spans["end_ns"] - spans["start_ns"]).to_numpy() * 1e-9})
    return events[list(CAPTURE_EVENT_COLUMNS)], runs
