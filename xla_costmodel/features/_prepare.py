"""Rows parsed and featurized once: each kept row's kernel and feature table, ready to fit and score.

`prepare` reads the kernel rows of a dataset (`datasets.kernel_rows`) into
their `HloInstruction`s and the features every fitted model reads (the
counts of `features_of` and the schedule context of `context_features`);
`prepare_dataset` does it once per process for files.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..datasets import kernel_rows, load_rows, measured_times
from ._context import CONTEXT_FEATURES, context_features
from ._counting import features_of
from ._features import FEATURES, FeatureError
from ._rows import kernel_from_row

__all__ = ["Prepared", "empty_prepared", "prepare", "prepare_dataset"]


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
