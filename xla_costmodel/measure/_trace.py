"""Read a `jax.profiler` trace into a table of events, and pick out the kernels.

A trace directory written by `jax.profiler.trace(logdir)` holds, per capture,
`<logdir>/plugins/profile/<timestamp>/<host>.xplane.pb` (the raw XSpace) and
`<host>.trace.json.gz` (a Chrome-trace conversion of it). The XSpace is the
primary source: it keeps every stat, including the producer/consumer flow ids
that pair an asynchronous CPU thunk with its completion. The JSON is the
fallback; it lacks those ids, so completions are paired by name and order.

What the two backends write (jax 0.10.2; CPU observed, GPU from XLA's sources):

- CPU (XLA:CPU thunk runtime): plane `/host:CPU`, one line per thread
  (`python`, `tf_XLAEigen/...`, `tf_XLAPjRtCpuClient/...`). Each executed thunk
  is an event named after its HLO instruction with stats `hlo_op`,
  `hlo_module`, `program_id`, `run_id`, `device_ordinal` and a flow id `_p`.
  Its completion is an event `end: <hlo_op>` whose `_c` equals that `_p`; it
  may sit on another thread and end after the thunk event itself (for
  example a dot handed to the Eigen pool). Thunks of a while body nest, in
  time, inside the while thunk's event.
- GPU: planes `/device:GPU:<n>`, one line per stream (`Stream #<id>(...)`).
  Each kernel or memcpy event is named after the kernel symbol and carries
  the launch annotations as stats: `hlo_op`, `hlo_module`, `program_id`,
  `correlation_id`, `kernel_details`. One HLO instruction may launch several
  kernels.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections import defaultdict, deque
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "TraceError",
    "find_trace_files",
    "read_trace",
    "kernel_executions",
]

#: Columns of the table `read_trace` returns, in order.
EVENT_COLUMNS = (
    "plane",
    "line",
    "name",
    "start_ns",
    "end_ns",
    "hlo_op",
    "hlo_module",
    "program_id",
    "run_id",
    "flow_out",
    "flow_in",
)

END_PREFIX = "end: "

# Lines that XProf derives from annotations rather than records from the
# hardware; their events duplicate the stream events, so they are never summed.
_DERIVED_LINES = frozenset(
    {
        "XLA Ops",
        "XLA Modules",
        "XLA TraceMe",
        "Steps",
        "TensorFlow Ops",
        "TensorFlow Name Scope",
        "Framework Ops",
        "Framework Name Scope",
        "Source code",
        "Async XLA Ops",
        "SparseCore Ops",
    }
)


class TraceError(ValueError):
    """A trace file that cannot be read, or that does not hold what is needed.

    **Attributes:**

    - `path`: the file (or directory) concerned.
    - `reason`: the problem alone.

    `str(error)` gives `path: reason`.
    """

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


# --------------------------------------------------------------------------- locating


def find_trace_files(logdir) -> dict[str, Path]:
    """Locate the newest capture under a `jax.profiler.trace` log directory.

    **Arguments:**

    - `logdir`: the directory given to `jax.profiler.trace`, or a run directory
      `plugins/profile/<timestamp>` itself.

    **Returns:** a dict with key `"xplane"` and/or `"json"` mapping to the files
    of the newest run directory that holds either.

    Raises `TraceError` when no trace file is found.
    """
    root = Path(logdir)
    if not root.is_dir():
        raise TraceError(root, "not a directory")
    found: dict[Path, dict[str, Path]] = defaultdict(dict)
    for p in root.rglob("*"):
        if p.name.endswith(".xplane.pb"):
            found[p.parent]["xplane"] = p
        elif p.name.endswith(".trace.json.gz") or p.name.endswith(".trace.json"):
            found[p.parent]["json"] = p
    if not found:
        raise TraceError(root, "no *.xplane.pb or *.trace.json.gz file under this directory")
    # Run directories are named by capture time (YYYY_MM_DD_HH_MM_SS), so the
    # lexically largest is the newest; modification time breaks ties.
    newest = max(found, key=lambda d: (d.name, max(f.stat().st_mtime for f in found[d].values())))
    return found[newest]


# --------------------------------------------------------------------------- reading


def read_trace(path) -> pd.DataFrame:
    """Read one trace file into a table with one row per event.

    **Arguments:**

    - `path`: an `*.xplane.pb` file (read through `jax.profiler.ProfileData`),
      a Chrome-trace `*.json` / `*.json.gz` file, or a `jax.profiler.trace`
      log directory (its newest capture; the XSpace is preferred).

    **Returns:** a DataFrame with columns `plane`, `line`, `name`, `start_ns`,
    `end_ns` (float, nanoseconds on the trace's own clock), `hlo_op`,
    `hlo_module` (str or None), `program_id`, `run_id`, `flow_out`, `flow_in`
    (nullable Int64). `attrs` holds `source` (the file), `format`
    (`"xplane"` or `"json"`) and `metadata` (the `/host:metadata` stats:
    `jax_version`, `jaxlib_version`, ...).

    Raises `TraceError`, naming the file, when the file is missing, damaged,
    or holds no host or device plane.
    """
    p = Path(path)
    if p.is_dir():
        files = find_trace_files(p)
        p = files.get("xplane") or files["json"]
    if not p.is_file():
        raise TraceError(p, "no such file")
    if p.name.endswith(".pb"):
        rows, metadata = _read_xplane(p)
        fmt = "xplane"
    elif p.name.endswith((".json", ".json.gz")):
        rows, metadata = _read_json(p)
        fmt = "json"
    else:
        raise TraceError(p, "unknown trace format: expected *.xplane.pb, *.json or *.json.gz")
    df = _events_frame(rows)
    _check_events(df, p)
    df.attrs.update(source=str(p), format=fmt, metadata=metadata)
    return df


def _events_frame(rows: list[tuple]) -> pd.DataFrame:
    df = pd.DataFrame.from_records(rows, columns=list(EVENT_COLUMNS))
    for col in ("start_ns", "end_ns"):
        df[col] = df[col].astype("float64")
    for col in ("program_id", "run_id", "flow_out", "flow_in"):
        df[col] = df[col].astype("Int64")
    for col in ("plane", "line", "name"):
        df[col] = df[col].astype(object)
    for col in ("hlo_op", "hlo_module"):
        df[col] = df[col].astype(object).where(df[col].notna(), None)
    return df


def _check_events(df: pd.DataFrame, path: Path) -> None:
    planes = set(df["plane"].unique()) if len(df) else set()
    if not any(p == "/host:CPU" or _is_device_plane(p) for p in planes):
        raise TraceError(
            path,
            "no '/host:CPU' or '/device:*' plane with events; "
            f"planes present: {sorted(planes) or 'none'} (damaged or not a jax.profiler trace?)",
        )
    bad = ~np.isfinite(df["start_ns"].to_numpy()) | ~(df["end_ns"].to_numpy() >= df["start_ns"].to_numpy())
    if bad.any():
        first = df[bad].iloc[0]
        raise TraceError(
            path,
            f"{int(bad.sum())} event(s) with a negative or non-finite duration, "
            f"first: {first['name']!r} on line {first['line']!r}",
        )


def _as_int(value):
    if value is None:
        return None
    try:
        v = int(value)
    except (TypeError, ValueError):
        return None
    # Ids are unsigned 64-bit in the trace (XLA:CPU's flow and run ids can use the top bit); the columns
    # are signed Int64, and ids are only compared for equality, so wrap them the way C++ would.
    return v - (1 << 64) if v >= (1 << 63) else v


def _read_xplane(path: Path) -> tuple[list[tuple], dict]:
    try:
        from jax.profiler import ProfileData
    except ImportError as e:  # pragma: no cover - jax is a dependency
        raise TraceError(path, f"reading an XSpace needs jax.profiler.ProfileData ({e})") from e
    try:
        data = ProfileData.from_file(str(path))
        return _xspace_rows(data)
    except TraceError:
        raise
    except Exception as e:  # the C++ reader raises RuntimeError for bad bytes
        raise TraceError(path, f"not a readable XSpace protobuf ({type(e).__name__}: {e})") from e


def _xspace_rows(data) -> tuple[list[tuple], dict]:
    rows: list[tuple] = []
    metadata: dict = {}
    for plane in data.planes:
        pname = plane.name
        if pname == "/host:metadata":
            metadata = {k: v for k, v in plane.stats}
            continue
        if not (pname.startswith("/host:") or _is_device_plane(pname)):
            continue
        for line in plane.lines:
            lname = line.name
            for ev in line.events:
                stats = dict(ev.stats)
                start = float(ev.start_ns)
                rows.append(
                    (
                        pname,
                        lname,
                        ev.name,
                        start,
                        start + float(ev.duration_ns),
                        _str_or_none(stats.get("hlo_op")),
                        _str_or_none(stats.get("hlo_module")),
                        _as_int(stats.get("program_id")),
                        _as_int(stats.get("run_id")),
                        _as_int(stats.get("_p")),
                        _as_int(stats.get("_c")),
                    )
                )
    return rows, metadata


def _str_or_none(v):
    return None if v is None else str(v)


def _read_json(path: Path) -> tuple[list[tuple], dict]:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                doc = json.load(f)
        else:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise TraceError(path, f"damaged or not gzip-compressed ({type(e).__name__}: {e})") from e
    except json.JSONDecodeError as e:
        raise TraceError(path, f"not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from e
    if isinstance(doc, list):  # the bare-array form of the Chrome trace format
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(path, "not a Chrome trace: no 'traceEvents' list at the top level")
    events = doc["traceEvents"]
    processes: dict = {}
    threads: dict = {}
    for ev in events:
        if isinstance(ev, dict) and ev.get("ph") == "M":
            args = ev.get("args") or {}
            if ev.get("name") == "process_name":
                processes[ev.get("pid")] = str(args.get("name", ev.get("pid")))
            elif ev.get("name") == "thread_name":
                threads[(ev.get("pid"), ev.get("tid"))] = str(args.get("name", ev.get("tid")))
    rows: list[tuple] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        try:
            start = float(ev["ts"]) * 1e3
            dur = float(ev.get("dur", 0.0)) * 1e3
        except (KeyError, TypeError, ValueError) as e:
            raise TraceError(path, f"traceEvents[{i}]: complete event without a numeric 'ts'/'dur'") from e
        pid, tid = ev.get("pid"), ev.get("tid")
        args = ev.get("args") or {}
        rows.append(
            (
                processes.get(pid, str(pid)),
                threads.get((pid, tid), str(tid)),
                str(ev.get("name", "")),
                start,
                start + dur,
                _str_or_none(args.get("hlo_op")),
                _str_or_none(args.get("hlo_module")),
                _as_int(args.get("program_id")),
                _as_int(args.get("run_id")),
                _as_int(args.get("_p")),
                _as_int(args.get("_c")),
            )
        )
    metadata = {}
    if isinstance(doc.get("metadata"), dict):
        metadata = {k: v for k, v in doc["metadata"].items() if isinstance(v, (str, int, float, bool))}
    return rows, metadata


def _is_device_plane(name: str) -> bool:
    return name.startswith("/device:") and not name.startswith("/device:CUSTOM")


# --------------------------------------------------------------------------- kernels

#: Columns of the table `kernel_executions` returns.
KERNEL_COLUMNS = (
    "hlo_module",
    "hlo_op",
    "program_id",
    "run_id",
    "backend",
    "plane",
    "line",
    "name",
    "start_ns",
    "end_ns",
    "done_ns",
)


def kernel_executions(events: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel execution found in a trace's events.

    **Arguments:**

    - `events`: a table from `read_trace`.

    **Returns:** a DataFrame with columns `hlo_module`, `hlo_op`, `program_id`,
    `run_id`, `backend` (`"cpu"` or `"gpu"`), `plane`, `line`, `name` (the
    event name: the instruction on CPU, the kernel symbol on GPU), `start_ns`,
    `end_ns` (end of the event itself) and `done_ns` (start of the paired
    completion event on CPU, else NaN), sorted by start.

    - CPU: each thunk event is one execution. Its `end: <op>` completion is
      paired with it by flow id (XSpace) or, where the ids are missing (JSON),
      by name in order of time. For a synchronous thunk the completion lies
      inside the thunk event; for an asynchronous one (a parallel loop, a
      convolution or dot on the Eigen pool) the thunk event covers only the
      launch and the completion comes later, possibly on another thread.
      The completion callback may run late (after the executor has already
      moved on), so `done_ns` is an upper bound on when the work finished;
      `measure` tightens it with the module's data dependencies.
    - GPU: every kernel/memcpy event on a stream line that carries `hlo_op` is
      one execution; several executions per instruction and run are summed
      later, by the caller.
    """
    if len(events) == 0:
        return pd.DataFrame(columns=list(KERNEL_COLUMNS))
    ev = events
    has_op = ev["hlo_op"].notna().to_numpy()
    host = (ev["plane"] == "/host:CPU").to_numpy()
    device = ev["plane"].map(_is_device_plane).to_numpy(dtype=bool)

    parts = []
    cpu = _cpu_executions(ev, has_op & host)
    if len(cpu):
        parts.append(cpu)
    gpu = _gpu_executions(ev, has_op & device)
    if len(gpu):
        parts.append(gpu)
    if not parts:
        return pd.DataFrame(columns=list(KERNEL_COLUMNS))
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values("start_ns", kind="stable").reset_index(drop=True)[list(KERNEL_COLUMNS)]


def _cpu_executions(ev: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    thunks = ev[mask & ~ev["name"].str.startswith(END_PREFIX).to_numpy()]
    if thunks.empty:
        return thunks
    ends = ev[(ev["plane"] == "/host:CPU").to_numpy() & ev["name"].str.startswith(END_PREFIX).to_numpy()]
    done_ns = np.full(len(thunks), np.nan)

    by_flow: dict[int, float] = {}
    # Completions without a flow id (the JSON conversion drops it) are paired
    # with thunks of the same name, first come first served, in time order.
    unpaired: dict[str, list] = defaultdict(list)
    for name, fid, s in zip(ends["name"], ends["flow_in"], ends["start_ns"]):
        if pd.isna(fid):
            unpaired[name[len(END_PREFIX):]].append(float(s))
        else:
            by_flow[int(fid)] = float(s)
    queues = {k: deque(sorted(v)) for k, v in unpaired.items()}

    names = thunks["name"].tolist()
    flows = thunks["flow_out"].tolist()
    starts = thunks["start_ns"].to_numpy()
    for i in np.argsort(starts, kind="stable"):
        fid = flows[i]
        if not pd.isna(fid) and int(fid) in by_flow:
            done_ns[i] = by_flow[int(fid)]
            continue
        q = queues.get(names[i])
        while q and q[0] < starts[i]:
            q.popleft()  # a completion that precedes its thunk belongs to no one
        if q:
            done_ns[i] = q.popleft()
    out = thunks.copy()
    out["done_ns"] = done_ns
    out["backend"] = "cpu"
    return out


def _gpu_executions(ev: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    kern = ev[mask]
    if kern.empty:
        return kern
    # Prefer the per-stream lines the CUPTI/ROCm collectors write; never the
    # lines XProf derives from them (those would count every kernel twice).
    stream = kern["line"].str.startswith("Stream #")
    if stream.any():
        kern = kern[stream.to_numpy()]
    else:
        kern = kern[~kern["line"].isin(_DERIVED_LINES).to_numpy()]
    out = kern.copy()
    out["done_ns"] = np.nan
    out["backend"] = "gpu"
    return out


def interval_union_ns(starts, ends) -> float:
    """Total length covered by the union of intervals `[starts[i], ends[i]]`."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    total = 0.0
    cur_s, cur_e = -math.inf, -math.inf
    for i in order:
        s, e = float(starts[i]), float(ends[i])
        if s > cur_e:
            if cur_e > cur_s:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e > cur_s:
        total += cur_e - cur_s
    return total
