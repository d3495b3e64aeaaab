"""Calibration-dataset rows as training and test data: roles, selection, times, kernels and features.

Every row of a dataset has one **role** (`row_roles`), which decides what it
may be used for:

- `suite`: measurement kernels: the measurement suite (`host_cpu.parquet`),
  the supplementary microbenchmarks of the suite (`kernel_class` `extra-*`
  other than `extra-program`, kept in `host_cpu_programs.parquet`), and
  kernels a user measured (`kernel_class` `user`). The default training data.
- `training-program`: this project's own programs: the zoo as compiled and
  unfused (`kernel_class` `program`, `program-unfused`, `source` `zoo`) and
  the training programs (`extra-program`). They train only when asked
  (`include_programs`, the `source-cv` split), and are then never scored.
- `test-program`: programs nobody here wrote, `source` = their library (the
  independent corpus, `host_cpu_corpus.parquet`), and any other program
  rows. They never train a model that scores them.

`compare`'s `source-cv` split groups programs by `row_sources`: the
library of a corpus program, `zoo` for all of this project's own.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.opcodes import CONTROL_FLOW_OPCODES
from ._context import CONTEXT_FEATURES, context_features
from ._counting import features_of
from ._features import FEATURES, FeatureError
from ._rows import kernel_from_row
from ._store import find_data_file

__all__ = ["FUSION_VARIANT_CLASSES", "OWN_PROGRAM_CLASSES", "OWN_PROGRAMS_SOURCE",
           "OWN_SOURCES", "PROGRAM_CLASSES", "Prepared", "ROLES",
           "SUITE", "TEST_PROGRAM", "TRAINING_PROGRAM", "corpus_dataset", "dataset_name", "default_dataset",
           "default_training", "kernel_rows", "load_rows", "measured_times", "prepare", "prepare_dataset",
           "own_program_rows", "programs_dataset", "row_roles", "row_sources", "training_rows", "empty_prepared"]

#: Roles of dataset rows (see the module docstring).
SUITE, TRAINING_PROGRAM, TEST_PROGRAM = "suite", "training-program", "test-program"
ROLES = (SUITE, TRAINING_PROGRAM, TEST_PROGRAM)

#: `kernel_class` of rows that are kernels of whole programs, not measurement kernels.
PROGRAM_CLASSES = ("program", "program-unfused", "extra-program")
#: `kernel_class` of a program as XLA compiles it and with XLA's fusion passes off: the fusion-decision pairs.
FUSION_VARIANT_CLASSES = ("program", "program-unfused")
#: `source` of this project's own programs (`scripts/measure_programs.py`).
OWN_SOURCES = ("zoo", "extra")
#: `kernel_class` of this project's own programs as XLA compiles them (no unfused variants): what the
#: context models and the program overhead add to the suite (`own_program_rows`).
OWN_PROGRAM_CLASSES = ("program", "extra-program")
#: The one source this project's own programs form among the corpus's libraries (`row_sources`).
OWN_PROGRAMS_SOURCE = "zoo"


def dataset_name(device="host") -> str:
    """The file name of a device's suite dataset: `host_cpu.parquet` for the host, else `<device>.parquet`."""
    name = device if isinstance(device, str) else getattr(device, "name", "host")
    return "host_cpu.parquet" if name == "host" else f"{name}.parquet"


def default_dataset(device="host") -> Path:
    """The suite dataset of a device (`host_cpu.parquet` for the host): the user's, else the shipped one."""
    return find_data_file(dataset_name(device))


def programs_dataset(device="host") -> Path:
    """This project's own programs and the supplementary kernels (`host_cpu_programs.parquet` for the host):
    the user's, else the shipped one."""
    name = device if isinstance(device, str) else getattr(device, "name", "host")
    return find_data_file("host_cpu_programs.parquet" if name == "host" else f"{name}_programs.parquet")


def corpus_dataset(device="host") -> Path:
    """The independent corpus measured on a device, the test data (`host_cpu_corpus.parquet` for the host):
    the user's, else the shipped one."""
    name = device if isinstance(device, str) else getattr(device, "name", "host")
    return find_data_file("host_cpu_corpus.parquet" if name == "host" else f"{name}_corpus.parquet")


def default_training(device="host") -> list[Path]:
    """The files of a device's default training data: the suite, plus the programs file for its `extra-*`
    microbenchmarks (`training_rows` keeps the suite rows of both)."""
    paths = [default_dataset(device)]
    extra = programs_dataset(device)
    if extra.is_file():
        paths.append(extra)
    return paths


def row_roles(df: pd.DataFrame) -> np.ndarray:
    """The role of each row (`SUITE`, `TRAINING_PROGRAM`, `TEST_PROGRAM`; see the module docstring)."""
    n = len(df)
    if "kernel_class" not in df:
        return np.full(n, SUITE, dtype=object)
    kcls = df["kernel_class"].astype(str).to_numpy()
    source = df["source"].fillna("").astype(str).to_numpy() if "source" in df else np.full(n, "", dtype=object)
    program = np.isin(kcls, PROGRAM_CLASSES)
    own = (kcls == "extra-program") | np.isin(source, OWN_SOURCES)
    return np.where(~program, SUITE, np.where(own, TRAINING_PROGRAM, TEST_PROGRAM)).astype(object)


def row_sources(df: pd.DataFrame) -> np.ndarray:
    """The source each row counts under when programs are held out by source: its `source` column,
    `OWN_PROGRAMS_SOURCE` for every training program (zoo and `extra-program` alike)."""
    source = df["source"].fillna("").astype(str).to_numpy(object) if "source" in df else np.full(len(df), "", object)
    return np.where(row_roles(df) == TRAINING_PROGRAM, OWN_PROGRAMS_SOURCE, source).astype(object)


def own_program_rows(df: pd.DataFrame) -> np.ndarray:
    """Which rows are this project's own programs as XLA compiles them (role `training-program`, `kernel_class`
    in `OWN_PROGRAM_CLASSES`): a boolean mask. Never a corpus program."""
    if "kernel_class" not in df:
        return np.zeros(len(df), bool)
    return (row_roles(df) == TRAINING_PROGRAM) & df["kernel_class"].isin(OWN_PROGRAM_CLASSES).to_numpy()


def training_rows(df: pd.DataFrame, include_programs: bool = False) -> pd.DataFrame:
    """The rows of `df` that may train a model: role `suite`, and `training-program` when `include_programs`.

    Test programs (the corpus) are never among them.
    """
    keep = (SUITE, TRAINING_PROGRAM) if include_programs else (SUITE,)
    return df[np.isin(row_roles(df), keep)]


def load_rows(dataset) -> pd.DataFrame:
    """A dataset as a DataFrame: a path, a list of paths (concatenated), or a DataFrame (as is)."""
    from ..measure import read_dataset

    if isinstance(dataset, pd.DataFrame):
        return dataset
    if isinstance(dataset, (str, os.PathLike)):
        df = read_dataset(dataset)
        df.attrs["paths"] = [str(dataset)]
        return df
    paths = list(dataset)
    frames = [read_dataset(p) for p in paths]
    df = pd.concat(frames, ignore_index=True)
    df.attrs["paths"] = [str(p) for p in paths]
    return df


def kernel_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that are kernels with a usable time: not control flow, positive finite `min_per_run_s`, HLO text."""
    ok = df["min_per_run_s"].apply(lambda v: np.isfinite(v) and v > 0)
    if "opcode" in df:
        ok &= ~df["opcode"].isin(CONTROL_FLOW_OPCODES)
    if "hlo_text" in df:
        ok &= df["hlo_text"].fillna("").astype(str).str.len() > 0
    return df[ok]


def measured_times(df: pd.DataFrame) -> np.ndarray:
    """Seconds per launch: `min_per_run_s` (summed over a run's launches) / launches per run."""
    from ..measure.programs import per_launch_s

    launches = df["launches"].to_numpy(float) if "launches" in df else np.ones(len(df))
    return np.asarray(per_launch_s(df["min_per_run_s"].to_numpy(float), launches), dtype=float)


@dataclass
class Prepared:
    """Rows with their kernels (parsed once) and feature table.

    `rows` (the kept rows), `kernels` (one `HloInstruction` each), `X` (the
    `kernel_features` table followed by the `CONTEXT_FEATURES`, same index;
    each model reads its own columns), `y` (seconds per launch),
    `skipped` (row index → why it could not be read).
    """

    rows: pd.DataFrame
    kernels: list
    X: pd.DataFrame
    y: np.ndarray
    skipped: dict = field(default_factory=dict)

    def subset(self, mask) -> "Prepared":
        mask = np.asarray(mask, dtype=bool)
        idx = np.flatnonzero(mask)
        return Prepared(self.rows.iloc[idx], [self.kernels[i] for i in idx], self.X.iloc[idx], self.y[idx], self.skipped)


def prepare(df: pd.DataFrame, device, *, task_bytes: int | None = None, progress: bool = False) -> Prepared:
    """Parse and featurize the kernel rows of `df` (rows that cannot be read are skipped, with a warning);
    `progress`: a progress bar on stderr (`_progress`)."""
    from .._progress import progress_bar
    from ._features import TASK_BYTES, device_facts

    device = device_facts(device)
    rows = kernel_rows(df)
    kernels, feats, keep, skipped = [], [], [], {}
    with progress_bar(len(rows), "reading kernels", "kernel", progress) as bar:
        for idx, row in rows.iterrows():
            bar.update(1)
            _read_row(idx, row, device, task_bytes or TASK_BYTES, kernels, feats, keep, skipped)
    if skipped:
        warnings.warn(f"{len(skipped)} dataset row(s) could not be read and are left out; first: "
                      f"{next(iter(skipped.values()))}", RuntimeWarning, stacklevel=2)
    rows = rows.loc[keep]
    X = pd.DataFrame(feats, index=rows.index, columns=list(FEATURES + CONTEXT_FEATURES), dtype=float)
    return Prepared(rows, kernels, X, measured_times(rows), skipped)


def _read_row(idx, row, device, task_bytes: int, kernels: list, feats: list, keep: list, skipped: dict) -> None:
    """One row of `prepare`: its kernel and features appended, or why it cannot be read in `skipped`."""
    where = f"row {idx}" + (f" ({row['case']}: {row.get('hlo_op', '')})" if "case" in row else "")
    try:
        k = kernel_from_row(row, where=where)
        x = features_of(k, device, task_bytes=task_bytes)
        x.update(context_features(k, device))
    except (FeatureError, ValueError, KeyError) as exc:
        skipped[idx] = str(exc)
        return
    kernels.append(k)
    feats.append(x)
    keep.append(idx)


# Prepared datasets by (files with their modification times and sizes, device facts, task bytes):
# parsing and featurizing a corpus takes seconds, and a benchmark asks for the same files many times.
# The last few only: each holds its parsed kernels, and a process that prepares many datasets (the test
# suite, a sweep over devices) would otherwise keep every one of them.
_PREPARED: "OrderedDict" = OrderedDict()
_PREPARED_KEPT = 6


def prepare_dataset(dataset, device, *, task_bytes: int | None = None, progress: bool = False) -> Prepared:
    """`prepare` of every row of a dataset; files are prepared once per process (until they change).

    **Arguments:** `dataset`: a path, a list of paths or a DataFrame (prepared
    afresh each time); `device`, `progress`: as for `prepare`.

    **Returns:** a `Prepared` shared by every caller: select rows with
    `Prepared.subset`, never modify it.
    """
    from ._features import device_facts

    if isinstance(dataset, pd.DataFrame):
        return prepare(dataset, device, task_bytes=task_bytes, progress=progress) if len(dataset) else empty_prepared()
    paths = [Path(dataset)] if isinstance(dataset, (str, os.PathLike)) else [Path(p) for p in dataset]
    stamps = []
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            stamps = None  # let load_rows report the missing file
            break
        stamps.append((str(p.resolve()), st.st_mtime_ns, st.st_size))
    facts = device_facts(device)
    key = None if stamps is None else (tuple(stamps), repr(sorted(dict(facts).items())), task_bytes)
    if key is not None and key in _PREPARED:
        _PREPARED.move_to_end(key)
        return _PREPARED[key]
    df = load_rows(paths[0] if len(paths) == 1 else paths)
    prepared = prepare(df, facts, task_bytes=task_bytes, progress=progress) if len(df) else empty_prepared()
    if key is not None:
        _PREPARED[key] = prepared
        while len(_PREPARED) > _PREPARED_KEPT:
            _PREPARED.popitem(last=False)
    return prepared


def empty_prepared() -> Prepared:
    """A `Prepared` of no rows."""
    columns = list(FEATURES + CONTEXT_FEATURES)
    return Prepared(pd.DataFrame(), [], pd.DataFrame(columns=columns, dtype=float), np.zeros(0))
