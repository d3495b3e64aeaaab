"""One operation over many HLO modules, on a process pool or a Ray cluster.

`map_modules(operation, sources)` runs `operation(module)` once per source,
each as its own task, and puts the rows together with a `source` column in
front. `analyze_many`, `simulate_fusion_many` and `search_fusion_many` are
`analyze`, `simulate_fusion` and `search_fusion` mapped this way. The device
and the model are resolved once, here, and sent to the workers as objects,
so every engine prices with the same spec (`"host"` is this machine's, also
on a cluster) and the results do not depend on the engine.
"""

from __future__ import annotations

import os
import pickle
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .._text import count
from ..hlo import HloModule, HloParseError, load_hlo, parse_hlo
from ..front import analyze, resolve_device_and_model
from ..models import DEFAULT_DEVICE, DEFAULT_MODEL
from ._engines import Engine, LocalEngine, Outcome, Task, get_engine, reissue_warnings
from ._store import ResultStore

__all__ = [
    "SourcesTable", "TaskFailedWarning", "analyze_many", "map_modules", "search_fusion_many", "simulate_fusion_many",
]


class TaskFailedWarning(UserWarning):
    """Some sources of a many-sources run failed; the others' rows are kept (see `SourcesTable.failures`)."""


class SourcesTable(pd.DataFrame):
    """Rows of many sources (a `source` column first), and the sources that failed.

    Attributes: `failures` (DataFrame: `source`, `error`), `job` (what ran:
    operation, device, model, options). `summary()` counts sources and rows.
    """

    _metadata = ["failures", "job"]

    @property
    def _constructor(self):
        return SourcesTable

    def summary(self) -> dict[str, Any]:
        failures = getattr(self, "failures", None)
        done = int(self["source"].nunique()) if "source" in self.columns else 0
        return {
            **(getattr(self, "job", None) or {}),
            "sources": done,
            "failed": 0 if failures is None else int(len(failures)),
            "rows": int(len(self)),
        }

    def _repr_html_(self) -> str:
        import html

        s = self.summary()
        failures = getattr(self, "failures", None)
        head = f"<p><b>{s['sources']}</b> {'source' if s['sources'] == 1 else 'sources'}, {count(s['rows'], 'row')}"
        if s["failed"]:
            shown = "; ".join(f"{html.escape(str(r.source))}: {html.escape(str(r.error))}"
                              for r in failures.head(10).itertuples())
            head += f", <b style='color:#b00'>{s['failed']} failed</b> ({shown})"
        return head + "</p>" + (pd.DataFrame(self)._repr_html_() or "")


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class _FileText:
    """A file's bytes, read by the driver for workers that do not see its filesystem."""

    path: str
    data: bytes


def _source_list(sources) -> list[tuple[str, Any]]:
    """`(name, payload)` pairs: a payload is a `Path` or HLO text (an `HloModule`'s printed text)."""
    if isinstance(sources, (str, os.PathLike, HloModule)):
        raise TypeError("sources must be a list of HLO files (or a dict: name -> file, HLO text or HloModule), "
                        f"not one {type(sources).__name__}; wrap it in a list")
    if isinstance(sources, Mapping):
        items = [(str(k), v) for k, v in sources.items()]
    else:
        items = [(str(p), p) for p in sources]
    pairs, seen, missing = [], set(), []
    for name, value in items:
        if name in seen:
            raise ValueError(f"source {name!r} is given twice")
        seen.add(name)
        if isinstance(value, HloModule):
            # As text: a big graph is too deep for pickle, and parsing the printed module
            # gives back the same module (the printer's contract).
            pairs.append((name, value.to_text()))
        elif isinstance(value, str) and "\n" in value:
            pairs.append((name, value))  # HLO text
        elif isinstance(value, (str, os.PathLike)):
            path = Path(value)
            if not path.is_file():
                missing.append(str(value))
            pairs.append((name, path))
        else:
            raise TypeError(f"source {name!r}: expected an HLO file, HLO text or an HloModule, "
                            f"got {type(value).__name__}")
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise FileNotFoundError(f"no such file: {shown}")
    return pairs


def _module(name: str, payload) -> HloModule:
    if isinstance(payload, Path):
        return load_hlo(payload)
    if isinstance(payload, _FileText):
        try:
            text = payload.data.decode()
        except UnicodeDecodeError as exc:  # as load_hlo says it
            raise HloParseError(f"not a text file ({exc.reason})", text="", pos=0, source=payload.path) from None
        return parse_hlo(text, source=payload.path)
    return parse_hlo(payload, source=name)


def run_source(operation: Callable[[HloModule], Any], name: str, payload) -> pd.DataFrame:
    """In a worker: one source's rows, `source` first (what every task of `map_modules` runs)."""
    out = operation(_module(name, payload))
    df = pd.DataFrame([out]) if isinstance(out, Mapping) else pd.DataFrame(out)
    if "source" in df.columns:
        raise ValueError("an operation's rows must not have a 'source' column of their own")
    df.insert(0, "source", name)
    return df


# --------------------------------------------------------------------------- the map


def map_modules(
    operation: Callable[[HloModule], Any],
    sources,
    *,
    engine: str | Engine = "local",
    address: str | None = None,
    workers: int | None = None,
    out=None,
    resume: bool = False,
    progress: bool = True,
    job: dict | None = None,
    desc: str | None = None,
) -> SourcesTable:
    """Run `operation(module)` on every source, each as a task of `engine`.

    **Arguments:**

    - `operation`: a picklable callable (a module-level function, or an
      object of an importable class) taking an `HloModule` and returning a
      DataFrame (rows) or a dict (one row).
    - `sources`: HLO files (a list of paths; a source is named by its path as
      given), or a dict `name -> path, HLO text or HloModule` (a module
      travels to the workers as its text, `to_text()`).
    - `engine`: `"local"` (default: a process pool on this machine; needs no
      Ray) or `"ray"` (a Ray cluster; needs `pip install 'xla_costmodel[ray]'`),
      or an `Engine` object.
    - `address`: the Ray cluster to use (`"auto"`, `"HOST:6379"`,
      `"ray://HOST:10001"`); None starts a local Ray instance for the run.
    - `workers`: processes of the local pool or CPUs of a local Ray instance
      (default: the CPUs of this machine).
    - `out`: a `.parquet` file the rows go to as sources finish (rewritten
      atomically every few seconds and at the end), so a run that stops
      keeps what was done. An existing file is never overwritten: with
      `resume=True`, its sources are skipped and its rows kept (it must come
      from the same job); without, it is refused.
    - `progress`: a progress bar over the sources, on stderr.
    - `job`: what the rows are results of (recorded in `out`, checked on
      resume); default the operation's qualified name. `desc`: the bar's label.

    **Returns:** a `SourcesTable` (a DataFrame): the rows of every source in
    the order given (resumed sources included), `source` first. Sources that
    failed (their error, or a worker that died twice running them) have no
    rows; they are in `.failures`, one `TaskFailedWarning` names them, and a
    rerun with `resume=True` tries them again.

    **Raises:** `FileNotFoundError` naming missing files, `ValueError`
    (`ResultFileError`) for an unusable `out`, `RayUnavailableError` for
    `engine="ray"` without Ray; all before any task starts. `WorkerStartError`
    when the local engine's first tasks each kill their worker before any
    task finishes (typically a script calling this without a `__main__` guard).
    """
    pairs = _source_list(sources)
    if resume and out is None:
        raise ValueError("resume needs an output file (out=...) to resume")
    runner = get_engine(engine, address=address, workers=workers)
    if isinstance(runner, LocalEngine):
        try:
            pickle.dumps(operation)
        except Exception as exc:  # pickle raises several types for what it cannot send
            raise TypeError(f"the operation cannot be sent to worker processes ({type(exc).__name__}: {exc}); "
                            "use a module-level function or an object of an importable class") from None
    job = dict(job) if job is not None else {"operation": _qualname(operation)}
    store = ResultStore(out, job, resume=resume)
    order = [name for name, _ in pairs]
    todo = [(name, payload) for name, payload in pairs if name not in store.done]
    bar = _bar(len(todo), desc or job.get("operation", "map"), progress and bool(todo))
    try:
        if todo:  # a resumed run with nothing left starts no workers (nor a Ray instance)
            for outcome in runner.run(_tasks(operation, todo, runner.shares_filesystem, store, bar)):
                _take(outcome, store, bar)
    finally:
        store.flush(order)
        bar.close()
    table = SourcesTable(store.table(order))
    table.failures = pd.DataFrame(
        [{"source": s, "error": e} for s, e in store.failed.items()], columns=["source", "error"]
    )
    table.job = job
    if store.failed:
        warnings.warn(_failed_message(store.failed, len(pairs)), TaskFailedWarning, stacklevel=2)
    return table


def _tasks(operation, todo, shares_filesystem: bool, store: ResultStore, bar) -> Iterator[Task]:
    for name, payload in todo:
        if isinstance(payload, Path) and not shares_filesystem:
            try:
                payload = _FileText(str(payload), payload.read_bytes())
            except OSError as exc:
                _take(Outcome(name, error=f"{type(exc).__name__}: {exc}"), store, bar)
                continue
        yield Task(name, run_source, (operation, name, payload))


def _take(outcome: Outcome, store: ResultStore, bar) -> None:
    reissue_warnings(outcome, stacklevel=3)
    if outcome.ok:
        store.add(outcome.key, outcome.value)
    else:
        store.fail(outcome.key, outcome.error)
        bar.set_postfix_str(f"{len(store.failed)} failed", refresh=False)
    bar.update(1)


def _bar(total: int, desc: str, enabled: bool):
    # (the one progress bar of the package: only on a terminal or in a notebook, never in a log or a pipe)
    from .._progress import progress_bar

    return progress_bar(total, desc, "module", enabled=enabled)


def _failed_message(failed: dict[str, str], total: int) -> str:
    shown = "; ".join(f"{s}: {e}" for s, e in list(failed.items())[:5])
    more = f"; and {len(failed) - 5} more" if len(failed) > 5 else ""
    return f"{len(failed)} of {total} sources failed (their rows are missing; see .failures): {shown}{more}"


def _qualname(fn) -> str:
    kind = fn if callable(fn) and hasattr(fn, "__qualname__") else type(fn)
    return f"{kind.__module__}.{kind.__qualname__}"


# --------------------------------------------------------------------------- the operations


def _resolve(device, model):
    """The device and model of every task, resolved and checked once here rather than failing every task."""
    return resolve_device_and_model(device, model)


@dataclass(frozen=True)
class AnalyzeOperation:
    """`analyze(module, device=, model=)` as a task: its rows, one per kernel."""

    device: Any
    model: Any
    unknown_trip_count: int = 1

    def __call__(self, module: HloModule) -> pd.DataFrame:
        from ..models import CostModelWarning

        with warnings.catch_warnings():
            # Unpriced kernels are flagged in the rows; the driver warns once for the run.
            warnings.simplefilter("ignore", CostModelWarning)
            table = analyze(module, device=self.device, model=self.model, unknown_trip_count=self.unknown_trip_count)
        return pd.DataFrame(table)


@dataclass(frozen=True)
class FusionOperation:
    """`simulate_fusion` or `search_fusion` as a task: one row, the result's summary and the fused module's text."""

    search: bool
    device: Any
    model: Any
    options: dict = field(default_factory=dict)

    def __call__(self, module: HloModule) -> dict:
        from ..fusion import search_fusion, simulate_fusion

        run = search_fusion if self.search else simulate_fusion
        result = run(module, device=self.device, model=self.model, **self.options)
        return {**result.summary(), "fused_hlo": result.module.to_text()}


def analyze_many(
    sources,
    device=DEFAULT_DEVICE,
    model=DEFAULT_MODEL,
    *,
    unknown_trip_count: int = 1,
    engine: str | Engine = "local",
    address: str | None = None,
    workers: int | None = None,
    out=None,
    resume: bool = False,
    progress: bool = True,
) -> SourcesTable:
    """`analyze` of many modules: one row per (source, kernel).

    **Arguments:** `sources` (HLO files, or a dict name -> file, text or
    `HloModule`); `device`, `model`, `unknown_trip_count` as for `analyze`;
    `engine`, `address`, `workers`, `out`, `resume`, `progress` as for
    `map_modules` (`engine="local"`, the default, needs no Ray).

    **Returns:** a `SourcesTable`: `source`, then the columns `analyze`
    returns, sources in the order given; failed sources in `.failures`.
    The engines give identical rows.

    **Raises:** `ValueError` for an unknown device or model (or `xla-gpu`
    on a CPU), and what `map_modules` raises, before any task starts.
    """
    from ..models import CostModelWarning

    dev, cost_model = _resolve(device, model)
    if unknown_trip_count < 0:
        raise ValueError(f"unknown_trip_count must be >= 0, got {unknown_trip_count}")
    job = {"operation": "analyze", "device": dev.name, "model": cost_model.name,
           "unknown_trip_count": int(unknown_trip_count)}
    table = map_modules(AnalyzeOperation(dev, cost_model, unknown_trip_count), sources, engine=engine,
                        address=address, workers=workers, out=out, resume=resume, progress=progress, job=job,
                        desc="analyze")
    if "priced" in table.columns and len(table):
        unpriced = table.loc[~table["priced"].astype(bool), "source"]
        if len(unpriced):
            where = list(dict.fromkeys(unpriced))
            warnings.warn(
                f"{job['model']} could not price {len(unpriced)} kernel(s) in {len(where)} source(s) "
                f"(flagged priced=False, left out of the totals): {', '.join(where[:5])}"
                + (f" and {len(where) - 5} more" if len(where) > 5 else ""),
                CostModelWarning, stacklevel=2,
            )
    return table


def _fusion_many(search: bool, sources, device, model, options: dict, engine, address, workers, out, resume,
                 progress) -> SourcesTable:
    dev, cost_model = _resolve(device, model)
    name = "search_fusion" if search else "simulate_fusion"
    job = {"operation": name, "device": dev.name, "model": cost_model.name, **options}
    return map_modules(FusionOperation(search, dev, cost_model, options), sources, engine=engine, address=address,
                       workers=workers, out=out, resume=resume, progress=progress, job=job, desc=name)


def simulate_fusion_many(
    sources, device=DEFAULT_DEVICE, model=DEFAULT_MODEL, *, engine: str | Engine = "local", address: str | None = None,
    workers: int | None = None, out=None, resume: bool = False, progress: bool = True, **options,
) -> SourcesTable:
    """`simulate_fusion` of many unfused modules: one row per source.

    **Arguments:** as `analyze_many`; `**options` go to `simulate_fusion`
    (`inline_calls`, `incremental`, ...).

    **Returns:** a `SourcesTable`, one row per source: `source`, the
    result's `summary()` (`fusion_steps`, `kernels_before`, `kernels_after`,
    `time_before_s`, `time_after_s`, `rejected`, `elapsed_s`, ...) and
    `fused_hlo`, the fused module's text.
    """
    return _fusion_many(False, sources, device, model, options, engine, address, workers, out, resume, progress)


def search_fusion_many(
    sources, device=DEFAULT_DEVICE, model=DEFAULT_MODEL, *, engine: str | Engine = "local", address: str | None = None,
    workers: int | None = None, out=None, resume: bool = False, progress: bool = True, **options,
) -> SourcesTable:
    """`search_fusion` of many unfused modules: one row per source.

    **Arguments:** as `analyze_many`; `**options` go to `search_fusion`
    (`budget_s` per source, default 10 s; `exact_max_edges`, `seed`, ...).

    **Returns:** a `SourcesTable`, one row per source: `source`, the
    result's `summary()` (`greedy_time_s`, `best_time_s`, `gap_pct`,
    `method`, ...) and `fused_hlo`, the best plan's module text. Searches
    that run out of budget depend on the machine's speed, so their rows may
    differ between runs and engines.
    """
    return _fusion_many(True, sources, device, model, options, engine, address, workers, out, resume, progress)
