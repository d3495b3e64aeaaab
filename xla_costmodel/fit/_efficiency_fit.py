"""The learned efficiency (`_efficiency.EfficiencyModel`) fitted to measured rows, and scored leaving one
source out: what `scripts/fit_gpu_learned.py` ships and `scripts/bench_gpu.py` scores, in one place.

A row is a kernel: its feature counts (`features.features_of`), its structure (`structure_of`), the
roofline's bound on it (`roofline_floor`), the analytical price it corrects (`base_s`) and its measured
time (`measured_s`), both seconds per execution, with labels (`source`, `case`, `hlo_op`). Leaving one
source out, each source's rows are priced by the model fitted to every other row (the suite and the other
sources): no source is scored by a model its own rows trained.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from ..datasets import load_rows
from ..features import FEATURES, FeatureError, features_of, prepare
from ._efficiency import (BASE_COLUMN, FLOOR_COLUMN, MEASURED_COLUMN, STRUCTURE, EfficiencyModel, roofline_floor,
                          structure_of)

__all__ = ["efficiency_leave_one_source_out", "efficiency_prices", "efficiency_rows", "fit_efficiency",
           "suite_efficiency_rows", "usable_efficiency_rows"]


def efficiency_rows(kernels, device, *, base_s, measured_s, **labels) -> pd.DataFrame:
    """One row per kernel of `kernels` (`HloInstruction`s; None for one not found) on `device` (a
    `DeviceSpec`): the `FEATURES` and `STRUCTURE` columns (NaN where the kernel has no features: control
    flow, unreadable), `roofline_s` (`FLOOR_COLUMN`), then `base_s` and `measured_s` (seconds per execution,
    one per kernel) and each of `labels` (a column name and its values, or one value for every row)."""
    floors = [roofline_floor(k, device) if k is not None else np.nan for k in kernels]
    out = []
    for k in kernels:
        try:
            out.append({**features_of(k, device), **structure_of(k, device)} if k is not None else None)
        except (FeatureError, ValueError, KeyError):
            out.append(None)
    cols = [*FEATURES, *STRUCTURE]
    t = pd.DataFrame([x if x is not None else dict.fromkeys(cols, np.nan) for x in out], columns=cols, dtype=float)
    t[FLOOR_COLUMN] = np.asarray(floors, float)
    t[BASE_COLUMN] = np.asarray(base_s, float)
    t[MEASURED_COLUMN] = np.asarray(measured_s, float)
    for name, values in labels.items():
        t[name] = values if np.isscalar(values) else np.asarray(values, dtype=object)
    return t


def suite_efficiency_rows(dataset, device, base: str = "xla-gpu", source: str = "suite") -> pd.DataFrame:
    """`efficiency_rows` of a measurement dataset (`dataset`: as `datasets.load_rows` takes it): each kernel
    row priced alone by the analytical model `base` (`estimate`; NaN where it cannot), measured per launch;
    labelled `source` and with the rows' `case` and `hlo_op`."""
    from ..models import get_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (rows that cannot be read are left out; the count is `len` of both)
        prep = prepare(load_rows(dataset), device)
        model = get_model(base)
        priced = []
        for k in prep.kernels:
            try:
                e = model.estimate(k, device)
                priced.append(float(e.time_s) if e.time_s is not None else math.nan)
            except Exception:  # noqa: BLE001 - a kernel the analytical model cannot price is not a training row
                priced.append(math.nan)
    labels = {c: prep.rows[c].astype(str).to_numpy() for c in ("case", "hlo_op") if c in prep.rows}
    return efficiency_rows(prep.kernels, device, base_s=priced, measured_s=prep.y, source=source, **labels)


def usable_efficiency_rows(t: pd.DataFrame) -> np.ndarray:
    """Which rows of `t` a model may train on: features, a positive analytical price and a positive measured
    time (a boolean mask)."""
    x = t[BASE_COLUMN].to_numpy(float)
    m = t[MEASURED_COLUMN].to_numpy(float)
    return (t[list(FEATURES)].notna().all(axis=1).to_numpy() & np.isfinite(x) & (x > 0)
            & np.isfinite(m) & (m > 0))


def fit_efficiency(train: pd.DataFrame, structure: bool = True, **params) -> EfficiencyModel:
    """An `EfficiencyModel(**params)` fitted to the usable rows of `train` (`usable_efficiency_rows`);
    `structure=False`: without the `STRUCTURE` columns (the counts-only form)."""
    tr = train[usable_efficiency_rows(train)]
    if not structure:
        tr = tr.drop(columns=[c for c in STRUCTURE if c in tr.columns])
    return EfficiencyModel(**params).fit(tr, tr[MEASURED_COLUMN].to_numpy(float))


def efficiency_prices(model: EfficiencyModel, t: pd.DataFrame) -> np.ndarray:
    """`model`'s seconds per execution for the rows of `t`: NaN where the analytical model has no price, the
    analytical price where the kernel has no features (as `EfficiencyModel.estimate` does)."""
    x = t[BASE_COLUMN].to_numpy(float)
    out = np.where(np.isfinite(x) & (x > 0), x, np.nan)
    ok = np.isfinite(x) & (x > 0) & t[list(FEATURES)].notna().all(axis=1).to_numpy()
    if ok.any():
        out[ok] = model.predict(t[ok])
    return out


def efficiency_leave_one_source_out(train: pd.DataFrame, scored: pd.DataFrame, structure: bool = True,
                                    **params) -> np.ndarray:
    """Each source of `scored` (its `source` column) priced by the model (`fit_efficiency(..., structure,
    **params)`) fitted to `train` (rows that always train, such as the suite) and the other sources' rows
    of `scored`. **Returns:** seconds per execution, one per row of `scored` (`efficiency_prices`)."""
    pred = np.full(len(scored), np.nan)
    for source in sorted(scored["source"].unique()):
        held = (scored["source"] == source).to_numpy()
        model = fit_efficiency(pd.concat([train, scored[~held]], ignore_index=True), structure, **params)
        pred[held] = efficiency_prices(model, scored[held])
    return pred
