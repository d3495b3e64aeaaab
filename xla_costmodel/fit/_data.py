"""Calibration-dataset rows as training and test data: selection, times, kernels and features."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis._opcodes import CONTROL_FLOW_OPCODES
from ._context import CONTEXT_FEATURES, context_features
from ._counting import features_of
from ._features import FEATURES, FeatureError
from ._rows import kernel_from_row
from ._store import find_data_file

__all__ = ["PROGRAM_CLASSES", "Prepared", "dataset_name", "default_dataset", "default_training", "kernel_rows",
           "load_rows", "measured_times", "prepare", "programs_dataset", "training_rows"]

#: `kernel_class` of rows measured from real programs (`scripts/measure_programs.py`).
PROGRAM_CLASSES = ("program", "program-unfused")


def dataset_name(device="host") -> str:
    """The file name of a device's suite dataset: `host_cpu.parquet` for the host, else `<device>.parquet`."""
    name = device if isinstance(device, str) else getattr(device, "name", "host")
    return "host_cpu.parquet" if name == "host" else f"{name}.parquet"


def default_dataset(device="host") -> Path:
    """The suite dataset of a device (`host_cpu.parquet` for the host): the user's, else the shipped one."""
    return find_data_file(dataset_name(device))


def programs_dataset(device="host") -> Path:
    """The real-program dataset of a device (`host_cpu_programs.parquet` for the host): the user's, else
    the shipped one."""
    name = device if isinstance(device, str) else getattr(device, "name", "host")
    return find_data_file("host_cpu_programs.parquet" if name == "host" else f"{name}_programs.parquet")


def default_training(device="host") -> list[Path]:
    """The training datasets of a device: the suite, plus the real-program file for its `extra-*` rows."""
    paths = [default_dataset(device)]
    extra = programs_dataset(device)
    if extra.is_file():
        paths.append(extra)
    return paths


def training_rows(df: pd.DataFrame) -> pd.DataFrame:
    """`df` without the rows of real programs (`kernel_class` program / program-unfused): held-out data."""
    if "kernel_class" not in df:
        return df
    return df[~df["kernel_class"].isin(PROGRAM_CLASSES)]


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
    from ..measure._dataset import per_launch_s

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


def prepare(df: pd.DataFrame, device, *, task_bytes: int | None = None) -> Prepared:
    """Parse and featurize the kernel rows of `df` (rows that cannot be read are skipped, with a warning)."""
    from ._features import TASK_BYTES, device_facts

    device = device_facts(device)
    rows = kernel_rows(df)
    kernels, feats, keep, skipped = [], [], [], {}
    for idx, row in rows.iterrows():
        where = f"row {idx}" + (f" ({row['case']}: {row.get('hlo_op', '')})" if "case" in row else "")
        try:
            k = kernel_from_row(row, where=where)
            x = features_of(k, device, task_bytes=task_bytes or TASK_BYTES)
            x.update(context_features(k, device))
        except (FeatureError, ValueError, KeyError) as exc:
            skipped[idx] = str(exc)
            continue
        kernels.append(k)
        feats.append(x)
        keep.append(idx)
    if skipped:
        warnings.warn(f"{len(skipped)} dataset row(s) could not be read and are left out; first: "
                      f"{next(iter(skipped.values()))}", RuntimeWarning, stacklevel=2)
    rows = rows.loc[keep]
    X = pd.DataFrame(feats, index=rows.index, columns=list(FEATURES + CONTEXT_FEATURES), dtype=float)
    return Prepared(rows, kernels, X, measured_times(rows), skipped)
