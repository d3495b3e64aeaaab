"""The output file of a many-sources run: finished sources' rows, rewritten atomically as they come.

A Parquet file whose schema metadata (key `xla_costmodel.many`) records the
job that made it (operation, device, model, options) and the sources done.
Each write goes to a temporary file beside the target, is synced and renamed
over it, so a crash of the driver leaves the previous complete file; a dead
worker costs nothing that had finished. A run with `resume` reads the file
back and skips its sources; a file of another job, or a file that is not
one of these, is refused and left as it was.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from .._atomic import replacing

__all__ = ["FORMAT", "ResultFileError", "ResultStore", "read_results"]

FORMAT = "xla_costmodel.many/1"
_META_KEY = b"xla_costmodel.many"


class ResultFileError(ValueError):
    """An output file that cannot be used: `str(error)` is `path: problem`; the file is left as it was."""

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


def read_results(path) -> tuple[pd.DataFrame, dict]:
    """The rows and the run record (`format`, `job`, `sources`, `failed`) of an output file.

    **Raises:** `ResultFileError` when the file is missing, damaged or not one of these.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise ResultFileError(path, "no such file")
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for bytes that are not Parquet
        raise ResultFileError(path, f"cannot read as Parquet ({type(exc).__name__}: {exc})") from None
    raw = (table.schema.metadata or {}).get(_META_KEY)
    try:
        record = json.loads(raw) if raw else None
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ResultFileError(path, "not an output file of analyze_many / xla-costmodel analyze (no run record)")
    return table.to_pandas(), record


class ResultStore:
    """Rows per finished source, kept in memory and written to `path` (when given) as they arrive.

    **Arguments:**

    - `path`: a `.parquet` file, or None to keep the rows in memory only.
    - `job`: what the rows are results of (JSON-able); a resumed file must
      have been made by the same job.
    - `resume`: continue an existing file (its sources count as done);
      without it an existing file is refused, never overwritten.
    - `flush_s`: write at most this often (and at the end); a write that
      takes long spaces the next ones out, so writing stays a small part of
      the run.
    """

    def __init__(self, path, job: dict, *, resume: bool = False, flush_s: float = 2.0):
        self.path = Path(path) if path is not None else None
        self.job = job
        self.flush_s = flush_s
        self.rows: dict[str, pd.DataFrame] = {}
        self.failed: dict[str, str] = {}
        self._dirty = False
        self._last_write = time.monotonic()
        self._write_s = 0.0
        if self.path is None:
            return
        if not self.path.name.lower().endswith(".parquet"):
            raise ResultFileError(self.path, "the output must be a .parquet file")
        if self.path.is_dir():
            raise ResultFileError(self.path, "is a directory")
        if not self.path.exists():
            return
        if not resume:
            raise ResultFileError(self.path, "exists; resume it (--resume) to skip its sources, or name a new file")
        old, record = read_results(self.path)
        if record.get("job") != job:
            raise ResultFileError(
                self.path,
                f"was made by another job ({_describe_job(record.get('job'))}, not {_describe_job(job)}); "
                "name a new file",
            )
        groups = dict(tuple(old.groupby("source", sort=False))) if "source" in old else {}
        for source in record.get("sources", []):
            self.rows[source] = groups.get(source, old.iloc[0:0]).reset_index(drop=True)

    @property
    def done(self) -> set[str]:
        """Sources whose rows are here (from the resumed file or from this run)."""
        return set(self.rows)

    def add(self, source: str, rows: pd.DataFrame) -> None:
        """Keep one source's rows; write the file if it is time to."""
        self.rows[source] = rows
        self.failed.pop(source, None)
        self._dirty = True
        self._maybe_flush()

    def fail(self, source: str, error: str) -> None:
        self.failed[source] = error

    def table(self, order: list[str] | None = None) -> pd.DataFrame:
        """Every source's rows, sources in `order` first (then the rest in the order they came)."""
        names = list(dict.fromkeys([s for s in (order or []) if s in self.rows] + list(self.rows)))
        frames = [self.rows[s] for s in names if len(self.rows[s])]
        if not frames:
            empty = next(iter(self.rows.values()), None)
            return empty.iloc[0:0].copy() if empty is not None else pd.DataFrame({"source": pd.Series(dtype=str)})
        return pd.concat(frames, ignore_index=True)

    def _maybe_flush(self) -> None:
        if self.path is not None and time.monotonic() - self._last_write >= max(self.flush_s, 10 * self._write_s):
            self.flush()

    def flush(self, order: list[str] | None = None) -> None:
        """Write every source's rows to `path` now (atomically), in `order`."""
        if self.path is None or not (self._dirty or order is not None) or not self.rows:
            return
        t0 = time.monotonic()
        _write_atomically(self.table(order), self.path, {
            "format": FORMAT,
            "job": self.job,
            "sources": list(dict.fromkeys([s for s in (order or []) if s in self.rows] + list(self.rows))),
            "failed": self.failed,
        })
        self._dirty = False
        self._last_write = time.monotonic()
        self._write_s = self._last_write - t0


def _describe_job(job) -> str:
    if not isinstance(job, dict):
        return repr(job)
    return ", ".join(f"{k}={v}" for k, v in job.items())


def _write_atomically(df: pd.DataFrame, path: Path, record: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(pd.DataFrame(df), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[_META_KEY] = json.dumps(record, default=str).encode()
    table = table.replace_schema_metadata(meta)
    with replacing(path, suffix=".tmp.parquet") as tmp:
        pq.write_table(table, tmp, compression="zstd")
