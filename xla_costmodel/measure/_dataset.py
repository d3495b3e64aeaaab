"""The calibration dataset: a tidy table of kernel measurements, appended atomically.

One row per measured kernel. The file is Parquet (`*.parquet`) or CSV
(`*.csv`, `*.csv.gz`); the format follows the file name. Every write goes to a
temporary file in the same directory which is read back, synced and then
renamed over the target, so a crash leaves either the old or the new file,
never half of one. Appending re-reads the existing file first and refuses to
touch a file that is damaged or that is not a dataset of this schema.

Schema 2 names every time column with its unit (`min_per_run_s`: seconds
per program run, a kernel's launches in one run summed; `min_per_launch_s`:
per launch), records the measurement's methodology (`allocator`, `repeats`,
`discard`, `warmup_calls`, `statistic`, `rounds`) and the `program` a row
belongs to. Files of schema 1 (`min_s`, `median_s`, `samples_s`,
`wall_min_s`) are migrated when read (`migrate_v1`); they are never
rewritten in place, except by an append, which writes schema 2.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .._atomic import replacing

__all__ = [
    "DatasetError",
    "SCHEMA",
    "DATASET_COLUMNS",
    "SCHEMA_V1",
    "migrate_v1",
    "per_launch_s",
    "read_dataset",
    "append_dataset",
    "write_dataset",
]

#: Value of the `schema` column; bumped when columns change meaning.
SCHEMA = "xla_costmodel.calibration/2"
#: The previous schema, read and migrated (`migrate_v1`).
SCHEMA_V1 = "xla_costmodel.calibration/1"

#: Column name -> kind ("str", "int", "float", "bool", "list"), in file order.
DATASET_COLUMNS: dict[str, str] = {
    "schema": "str",
    "suite_run": "str",
    "timestamp": "str",
    "source": "str",
    "program": "str",
    "backend": "str",
    "device_kind": "str",
    "device": "str",
    "jax_version": "str",
    "jaxlib_version": "str",
    "case": "str",
    "kernel": "str",
    "kernel_class": "str",
    "dtype": "str",
    "size": "str",
    "params": "str",
    "hlo_module": "str",
    "hlo_op": "str",
    "opcode": "str",
    "fusion_kind": "str",
    "computation": "str",
    "role": "str",
    "is_main": "bool",
    "allocator": "str",
    "repeats": "int",
    "discard": "int",
    "warmup_calls": "int",
    "statistic": "str",
    "rounds": "int",
    "n": "int",
    "launches": "float",
    "min_per_run_s": "float",
    "median_per_run_s": "float",
    "min_per_launch_s": "float",
    "samples_per_run_s": "list",
    "wall_min_per_run_s": "float",
    "launch_overhead_s": "float",
    "element_type": "str",
    "out_elements": "int",
    "out_bytes": "int",
    "operand_bytes": "int",
    "n_operands": "int",
    "n_fused_ops": "int",
    "opcode_mix": "str",
    "hlo_text": "str",
    "module_text": "str",
}

# Columns a file must have to count as this dataset (later schema versions may add more).
_REQUIRED = ("schema", "case", "hlo_op", "min_per_run_s", "samples_per_run_s", "hlo_text", "device", "jax_version",
             "timestamp")
_REQUIRED_V1 = ("schema", "case", "hlo_op", "min_s", "samples_s", "hlo_text", "device", "jax_version", "timestamp")
#: Schema 1 column -> schema 2 column.
_RENAMED_V1 = {"min_s": "min_per_run_s", "median_s": "median_per_run_s", "samples_s": "samples_per_run_s",
               "wall_min_s": "wall_min_per_run_s"}
# Kernel classes of schema-1 rows that were whole programs (their `kernel` names the program).
_V1_PROGRAM_CLASSES = ("program", "program-unfused", "user")


def per_launch_s(per_run_s, launches):
    """Seconds per launch from seconds per program run and launches per run (fewer than 1 counts as 1).

    The one place the two units are converted: `measure` and the dataset use it.
    """
    n = np.asarray(launches, dtype=float)
    n = np.where(np.isfinite(n) & (n >= 1), n, 1.0)
    out = np.asarray(per_run_s, dtype=float) / n
    return float(out) if out.ndim == 0 else out


class DatasetError(ValueError):
    """A dataset file that is damaged, foreign, or would be damaged by a write.

    `str(error)` gives `path: problem`; the file itself is left as it was.
    """

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


def _format(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    raise DatasetError(path, "unknown dataset format: the name must end in .parquet, .csv or .csv.gz")


# Text columns that repeat across rows: every kernel of a program carries the program's whole module (a corpus
# file of 118 modules has 5,800 rows, 1.35 GB of `module_text` as separate strings against 27 MB distinct). They are
# read dictionary-encoded and held as one Python string per distinct text, shared by the rows.
_SHARED_TEXT_COLUMNS = ("module_text", "hlo_text")


def _shared_strings(values) -> np.ndarray:
    """`values` as an object array in which equal strings are one object (missing values None)."""
    distinct: dict = {}
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        if isinstance(v, str):
            out[i] = distinct.setdefault(v, v)
        else:
            out[i] = None if v is None or (isinstance(v, float) and v != v) else v
    return out


def _dictionary_texts(column) -> np.ndarray:
    """A dictionary-encoded arrow text column as an object array of one string per distinct value."""
    import pyarrow as pa

    distinct: dict = {}
    parts = []
    for chunk in column.chunks:
        if not pa.types.is_dictionary(chunk.type):
            parts.append(_shared_strings(chunk.to_pylist()))
            continue
        words = np.array([None if w is None else distinct.setdefault(w, w) for w in chunk.dictionary.to_pylist()]
                         + [None], dtype=object)
        parts.append(words[chunk.indices.fill_null(len(words) - 1).to_numpy(zero_copy_only=False)])
    return np.concatenate(parts) if parts else np.empty(0, dtype=object)


def _read_parquet(path: Path) -> pd.DataFrame:
    """A parquet dataset with its repeated text columns kept as one string per distinct value (`_shared_strings`):
    never expanded to one copy per row, neither in arrow nor in pandas."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    shared = [c for c in _SHARED_TEXT_COLUMNS if c in names]
    table = pq.read_table(path, read_dictionary=shared)
    texts = {column: _dictionary_texts(table.column(column)) for column in shared}
    df = table.drop_columns(shared).to_pandas()
    del table
    pa.default_memory_pool().release_unused()  # arrow's pool keeps freed pages resident otherwise (~90 MB here)
    for column in shared:
        # (an explicit object Series: pandas would turn a bare object array back into one copy per row)
        df[column] = pd.Series(texts[column], index=df.index, dtype=object)
    return df[names]


def read_dataset(path) -> pd.DataFrame:
    """Read and validate a calibration dataset.

    **Arguments:**

    - `path`: a `.parquet`, `.csv` or `.csv.gz` file written by `append_dataset`.

    **Returns:** the table in schema 2 (`DATASET_COLUMNS`), one row per
    kernel measurement; `samples_per_run_s` holds lists of floats. A file of
    schema 1 is migrated in memory (`migrate_v1`); the file is not touched.

    Raises `DatasetError` naming the file when it is missing, cannot be
    parsed, or is not a dataset of this schema.
    """
    path = Path(path)
    fmt = _format(path)
    if not path.is_file():
        raise DatasetError(path, "no such file")
    try:
        if fmt == "parquet":
            df = _read_parquet(path)
        else:
            df = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={"schema": str})
            for column in _SHARED_TEXT_COLUMNS:
                if column in df:
                    # (an explicit object Series: pandas would turn a bare object array back into one copy per row)
                    df[column] = pd.Series(_shared_strings(df[column]), index=df.index, dtype=object)
    except Exception as e:  # pyarrow / the CSV reader raise many types for bad bytes
        raise DatasetError(path, f"cannot read as {fmt} ({type(e).__name__}: {_short(e)})") from e
    v1 = _validate(df, path)
    samples = "samples_s" if v1 else "samples_per_run_s"
    if fmt == "csv":
        df[samples] = [_parse_samples(v, path, i, samples) for i, v in enumerate(df[samples])]
    else:
        df[samples] = [list(map(float, v)) if v is not None else [] for v in df[samples]]
    return migrate_v1(df) if v1 else df


def migrate_v1(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of schema 1 in schema 2: columns renamed, the new ones derived.

    `min_s`, `median_s`, `samples_s`, `wall_min_s` become `min_per_run_s`,
    `median_per_run_s`, `samples_per_run_s`, `wall_min_per_run_s` (same
    values: schema 1 already summed a kernel's launches per run);
    `min_per_launch_s` = `min_per_run_s / launches`; `size` becomes text;
    `program` is the `kernel` of program rows (`kernel_class` `program`,
    `program-unfused`, `user`), else empty. Every schema-1 writer used the
    steady allocator and one untraced call; `repeats`, `discard` and
    `rounds` come from `params` where it records them, else from the two
    modes of the time (30 runs with 4 discarded, or the quick 12 with 2) that
    divide the sample count, else -1 (unknown).
    """
    out = df.rename(columns=_RENAMED_V1).copy()
    out["schema"] = SCHEMA
    out["size"] = [_v1_size(v) for v in out.get("size", [None] * len(out))]
    kcls = out["kernel_class"].astype(str) if "kernel_class" in out else pd.Series([""] * len(out), index=out.index)
    out["program"] = np.where(kcls.isin(_V1_PROGRAM_CLASSES), out.get("kernel", ""), None)
    method = [_v1_method(p, n) for p, n in zip(out.get("params", ["{}"] * len(out)), out["n"] if "n" in out
                                                else [len(v) for v in out["samples_per_run_s"]])]
    out["allocator"] = "steady"
    out["repeats"] = [m[0] for m in method]
    out["discard"] = [m[1] for m in method]
    out["warmup_calls"] = 1
    out["statistic"] = "min"
    out["rounds"] = [m[2] for m in method]
    launches = out["launches"] if "launches" in out else pd.Series(1.0, index=out.index)
    out["min_per_launch_s"] = per_launch_s(out["min_per_run_s"].to_numpy(float), launches.to_numpy(float))
    known = [c for c in DATASET_COLUMNS if c in out.columns]
    return out[known + [c for c in out.columns if c not in DATASET_COLUMNS]]


def _v1_size(v) -> str | None:
    """Schema 1's integer size as text (`16384`, not `16384.0`); missing stays missing."""
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return None
    return str(int(v)) if isinstance(v, (int, np.integer, float)) else str(v)


def _v1_method(params, n) -> tuple[int, int, int]:
    """(repeats, discard, rounds) of a schema-1 row."""
    try:
        p = json.loads(params) if isinstance(params, str) else {}
    except json.JSONDecodeError:
        p = {}
    n = int(n)
    if isinstance(p, dict) and {"repeats", "discard"} <= set(p):
        repeats, discard = int(p["repeats"]), int(p["discard"])
        rounds = int(p.get("rounds", max(1, n // max(repeats - discard, 1))))
        return repeats, discard, rounds
    for repeats, discard in ((30, 4), (12, 2)):
        if n > 0 and n % (repeats - discard) == 0:
            return repeats, discard, n // (repeats - discard)
    return -1, -1, -1


def _short(e: Exception, limit: int = 200) -> str:
    s = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return s if len(s) <= limit else s[:limit] + "..."


def _parse_samples(v, path: Path, row: int, column: str = "samples_per_run_s") -> list[float]:
    if isinstance(v, list):
        return v
    try:
        out = json.loads(v)
    except (TypeError, json.JSONDecodeError) as e:
        raise DatasetError(path, f"row {row + 1}: {column} is not a JSON list of numbers") from e
    if not isinstance(out, list):
        raise DatasetError(path, f"row {row + 1}: {column} is not a JSON list of numbers")
    return [float(x) for x in out]


def _validate(df: pd.DataFrame, path: Path) -> bool:
    """Check the columns and schema; **returns** True for a schema-1 file (to migrate)."""
    v1 = "schema" in df.columns and set(df["schema"].dropna().astype(str).unique()) == {SCHEMA_V1}
    required = _REQUIRED_V1 if v1 else _REQUIRED
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DatasetError(
            path,
            f"not an xla_costmodel calibration dataset (missing columns: {', '.join(missing)})",
        )
    schemas = set(df["schema"].dropna().astype(str).unique())
    foreign = schemas - {SCHEMA_V1 if v1 else SCHEMA}
    if foreign or df["schema"].isna().any():
        raise DatasetError(
            path,
            f"schema {sorted(foreign) or ['<empty>']} is not {SCHEMA!r} (or {SCHEMA_V1!r}, read by migration); "
            "refusing to read or append to it",
        )
    min_col = "min_s" if v1 else "min_per_run_s"
    bad = ~np.isfinite(pd.to_numeric(df[min_col], errors="coerce").to_numpy(dtype=float))
    if bad.any():
        raise DatasetError(path, f"row {int(np.flatnonzero(bad)[0]) + 1}: {min_col} is not a number")
    return v1


def _coerce(rows: pd.DataFrame) -> pd.DataFrame:
    """New rows in the file's column order and types; unknown extra columns are kept after them."""
    df = rows.copy()
    if "schema" not in df.columns:
        df["schema"] = SCHEMA
    absent = [c for c in DATASET_COLUMNS if c not in df.columns]
    if absent:
        raise ValueError(f"rows lack dataset columns: {', '.join(absent)}")
    for col, kind in DATASET_COLUMNS.items():
        if kind == "str":
            df[col] = df[col].astype(object).where(df[col].notna(), None)
            df[col] = [None if v is None else str(v) for v in df[col]]
        elif kind == "int":
            df[col] = pd.to_numeric(df[col]).astype("int64")
        elif kind == "float":
            df[col] = pd.to_numeric(df[col]).astype("float64")
        elif kind == "bool":
            df[col] = df[col].astype(bool)
        elif kind == "list":
            df[col] = [[float(x) for x in v] for v in df[col]]
    extra = [c for c in df.columns if c not in DATASET_COLUMNS]
    return df[list(DATASET_COLUMNS) + extra]


@contextlib.contextmanager
def _dir_lock(directory: Path):
    """Serialise writers of one directory (advisory flock on the directory itself)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


#: Parquet dictionary page limit for dataset files (pyarrow's default, 1 MiB, drops the dictionary
#: of a column whose distinct values exceed it, and `module_text` then is written once per row).
_DICTIONARY_PAGE_BYTES = 64 << 20


def _write(df: pd.DataFrame, path: Path, fmt: str) -> None:
    if fmt == "parquet":
        # Every kernel row of a program repeats its `module_text`: a dictionary page big
        # enough to hold a dataset's distinct modules stores each once (4x smaller files).
        df.to_parquet(path, index=False, compression="zstd", dictionary_pagesize_limit=_DICTIONARY_PAGE_BYTES)
    else:
        out = df.copy()
        out["samples_per_run_s"] = [json.dumps(v) for v in out["samples_per_run_s"]]
        out.to_csv(path, index=False)


def append_dataset(rows: pd.DataFrame, path) -> int:
    """Append rows to a dataset file, atomically; create it if absent.

    **Arguments:**

    - `rows`: new rows with every column of `DATASET_COLUMNS` (`schema` may
      be left out). Appending to a schema-1 file writes the whole file in
      schema 2 (its rows migrated, none dropped).
    - `path`: the dataset file; its suffix picks Parquet or CSV. Parent
      directories are created.

    **Returns:** the number of rows in the file afterwards.

    Raises `DatasetError`, leaving the file untouched, when the existing file
    is damaged or foreign.
    """
    path = Path(path)
    fmt = _format(path)
    new = _coerce(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _dir_lock(path.parent):
        if path.exists():
            old = read_dataset(path)
            combined = pd.concat([_coerce(old), new], ignore_index=True)
        else:
            combined = new
        _replace(combined, path, fmt)
    return len(combined)


def write_dataset(rows: pd.DataFrame, path) -> int:
    """Write rows as a new dataset file, atomically, replacing any file at `path`.

    **Arguments:** as for `append_dataset`. **Returns:** the number of rows written.
    """
    path = Path(path)
    fmt = _format(path)
    new = _coerce(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _dir_lock(path.parent):
        _replace(new, path, fmt)
    return len(new)


def _replace(df: pd.DataFrame, path: Path, fmt: str) -> None:
    """Write `df` over `path` through a temporary file that is read back before the rename."""
    # The temporary name keeps the target's extension so that the same
    # reader (and compression) applies when it is read back.
    ext = ".csv.gz" if path.name.lower().endswith(".csv.gz") else path.suffix
    with replacing(path, suffix=f".tmp{ext}") as tmp:
        _write(df, tmp, fmt)
        back = read_dataset(tmp)
        if len(back) != len(df):
            raise DatasetError(path, f"read-back of the new file gave {len(back)} rows, expected {len(df)}")
