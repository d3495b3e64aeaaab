"""From a profiler trace of `measure_program`'s runs to the tables of a `Measurement`.

Runs are the spans of their trace annotations (`RUN_ANNOTATION`); each
kernel execution is assigned to the run it falls in and joined to its HLO
instruction (`ModuleIndex`); a while, conditional or call thunk, whose span
holds its body's kernels, is kept apart from the kernels (`split_control_flow`). A run whose kernels do not fit
its wall time fails the check (`check="raise"`), kernels that merely
overlap warn (`ConcurrentKernelsWarning`).
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.opcodes import CONTROL_FLOW_OPCODES
from ._method import (
    KERNEL_COLUMNS,
    RUN_ANNOTATION,
    ConcurrentKernelsWarning,
    Measurement,
    MeasurementError,
    Method,
    kernel_statistics,
    split_control_flow,
)
from ._module import ModuleIndex
from ._trace import TraceError, find_trace_files, interval_union_ns, kernel_executions, read_trace

__all__ = [
    "assign_runs",
    "build_measurement",
    "completion_times",
    "measurement_from_trace",
    "merge_measurements",
    "read_newest",
    "run_spans",
]

_RUN_RE = re.compile(re.escape(RUN_ANNOTATION) + r"(\d+)$")

# Allowance for the kernel-time sum against the run's wall time: timestamps of
# a completion callback may trail the annotation's end by a few microseconds.
_WALL_TOL_NS = 5_000.0
_WALL_TOL_REL = 0.01


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
        events, fmt, path = read_newest(p)
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
    return build_measurement(events, fmt, path, index, dev, [], None, discard, check, method=method)


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
        for row in [*p.kernels.to_dict("records"), *p.control_flow.to_dict("records")]:
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
        r.update(kernel_statistics(r["samples_per_run_s"], float(np.median(r.pop("_launches")))))
        rows.append(r)
    every = pd.DataFrame(rows, columns=list(first.kernels.columns))
    every.attrs.update(first.kernels.attrs)
    kernels, control_flow = split_control_flow(every)
    runs = pd.concat([p.runs.assign(round=i) for i, p in enumerate(parts)], ignore_index=True)
    seen = set(every["hlo_op"])
    missing = tuple(k for k in first.module.expected_kernels() if k not in seen)
    return Measurement(
        kernels=kernels,
        control_flow=control_flow,
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
        process=first.process,
    )


def read_newest(logdir: Path) -> tuple[pd.DataFrame, str, str]:
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
    time is also capped by the end of the run itself, by the next start, in
    the same run, of a kernel that reads its result, and by the next launch
    of the same kernel in the same run (in a loop body: a loop moves on to
    its next trip only once every kernel of the trip has finished).
    """
    end = ours["end_ns"].to_numpy().astype(float).copy()
    done = ours["done_ns"].to_numpy().astype(float)
    late = np.flatnonzero(np.isfinite(done) & (done > end))
    if len(late) == 0:
        return end
    span_end = dict(zip(spans["run"], spans["end_ns"]))
    runs = ours["run"].to_numpy()
    ops = ours["hlo_op"].to_numpy()
    starts = ours["start_ns"].to_numpy().astype(float)
    launches: dict[tuple[int, str], list] = {}
    for r, op, st in zip(runs, ops, starts):
        launches.setdefault((int(r), op), []).append(st)
    launches = {key: np.sort(np.asarray(v)) for key, v in launches.items()}

    def next_start(key, after: float, strictly: bool) -> float:
        found = launches.get(key)
        if found is None:
            return np.inf
        j = np.searchsorted(found, after, side="right" if strictly else "left")
        return float(found[j]) if j < len(found) else np.inf

    for i in late:
        r = int(runs[i])
        bound = min(done[i], span_end.get(r, np.inf), next_start((r, ops[i]), starts[i], True))
        for c in index.consumers(ops[i]):
            bound = min(bound, next_start((r, c), starts[i], False))
        end[i] = max(end[i], bound)
    return end


def build_measurement(events, fmt, path, index: ModuleIndex, dev, host_wall, repeats, discard, check, *, method: Method,
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
    # A GPU memset (a cuBLAS or cuDNN call clears its workspace first) is part of its call's time, not a launch:
    # `launches` counts the others, as the GPU capture reader does (`is_memset`).
    kept = kept.assign(launch=~is_memset(kept["name"]))
    per_run = kept.groupby(["hlo_op", "run"], sort=False).agg(t=("dur_ns", "sum"), k=("launch", "sum"), s=("start_ns", "min"))
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
                **kernel_statistics(samples, float(np.median(grp["k"].to_numpy()))),
                "samples_per_run_s": samples,
                "in_module": info is not None,
            }
        )
    every = pd.DataFrame(rows, columns=list(KERNEL_COLUMNS))
    seen = set(every["hlo_op"])
    missing = tuple(k for k in index.expected_kernels() if k not in seen)
    jax_version = dev.get("jax_version", jax.__version__)
    every.attrs.update(
        hlo_module=index.name,
        backend=dev["backend"],
        device=dev["device"],
        jax_version=jax_version,
        hlo_text=hlo_text,
        **method.fields(),
    )
    kernels, control_flow = split_control_flow(every)
    return Measurement(
        kernels=kernels,
        control_flow=control_flow,
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
    control = ours["opcode"].isin(CONTROL_FLOW_OPCODES).to_numpy()
    rows = []
    for run, start, end in spans[["run", "start_ns", "end_ns"]].itertuples(index=False):
        sel = (ours["run"] == run).to_numpy()
        s = ours["start_ns"].to_numpy()[sel]
        e = ours["end_ns"].to_numpy()[sel]
        # A while/conditional/call thunk's span holds its body's kernels (XLA:CPU), which are counted
        # themselves: the kernels' sum leaves the control-flow thunks out, as `Measurement.kernels` does.
        ksum = float((e - s)[~control[sel]].sum())
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


def is_memset(kernel_symbol) -> np.ndarray:
    """Whether each event is a memset (CUPTI names them `Memset ...`): work a library call does before its kernel,
    not a launch of its own."""
    return pd.Series(kernel_symbol, dtype=object).astype(str).str.startswith("Memset").to_numpy()
