"""Calibration-dataset rows as training and test data: roles, selection, where the files are, times.

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
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.opcodes import CONTROL_FLOW_OPCODES
from ._store import find_data_file

__all__ = ["FUSION_VARIANT_CLASSES", "OWN_PROGRAM_CLASSES", "OWN_PROGRAMS_SOURCE", "OWN_SOURCES", "PROGRAM_CLASSES",
           "ROLES", "SUITE", "TEST_PROGRAM", "TRAINING_PROGRAM", "corpus_dataset", "dataset_name", "default_dataset",
           "default_training", "kernel_rows", "load_rows", "measured_times", "own_program_rows", "programs_dataset",
           "row_roles", "row_sources", "training_rows"]

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
