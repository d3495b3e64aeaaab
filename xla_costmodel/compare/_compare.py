"""`compare`: several cost models scored against measured kernel times, on held-out data.

Splits (what is fitted on what, what is scored):

- `"program"`: fit on measurement kernels (`train`, default the suite
  `calibration/host_cpu.parquet` plus the supplementary `extra-*` rows of
  `calibration/host_cpu_programs.parquet`), score the kernels of real
  programs (`dataset`, default `calibration/host_cpu_programs.parquet`,
  rows of kernel class `program`). Nothing of the programs is seen in
  fitting.
- `"program-cv"`: GroupKFold over the programs (`folds` folds, grouped by
  program): fit on the suite plus the other programs' kernels (fused and
  unfused variants), score the held-out programs' kernels. Every program is
  held out once; metrics pool the out-of-fold predictions.
- `"class"`: GroupKFold over the suite by kernel class (leave one class out:
  access, elementwise, matmul, ...): how well a model transfers to kinds of
  kernels it never saw.
- `"cv"`: GroupKFold (`folds`) over the suite by suite kernel (all sizes and
  dtypes of one kernel held out together).
- `"none"`: no fitting; score the models as they are (saved calibrations for
  the fitted ones) on `dataset`.

Fittable models (`fitted`, `learned`, `*-calibrated`) are refitted from
scratch on each training part; the analytical models (`roofline`,
`xla-gpu`) are used as they are (on a CPU, `xla-gpu` runs on
`host_as_gpu(device)`). Metrics: see `xla_costmodel.fit._metrics`.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Sequence

import numpy as np
import pandas as pd

from ..fit._data import PROGRAM_CLASSES, Prepared, default_training, load_rows, prepare, programs_dataset, training_rows
from ..fit._metrics import METRIC_COLUMNS, accuracy, fusion_metrics

__all__ = ["compare", "Comparison", "DEFAULT_MODELS", "SPLITS", "make_model"]

DEFAULT_MODELS = ("fitted", "learned", "roofline-calibrated", "xla-gpu-calibrated", "roofline", "xla-gpu")
SPLITS = ("program", "program-cv", "class", "cv", "none")
FUSION_COLUMNS = ("fusion_n", "fusion_order_acc", "fusion_gain_gmre", "fusion_gain_tau")


class Comparison(pd.DataFrame):
    """The result of `compare`: one row per model with its metrics.

    Columns: `model`, `split`, then `n` (kernels scored), `unpriced`,
    `gmre`, `mape`, `median_abs_log`, `within_2x`, `bias`, `kendall_tau`,
    `spearman`, the fusion-decision metrics (`fusion_n`, `fusion_order_acc`,
    `fusion_gain_gmre`, `fusion_gain_tau`; NaN where the data has no
    fused/unfused pairs), and `fit_s` (seconds spent fitting).
    `predictions` (attribute) holds one row per scored kernel and model:
    `model`, `program`/`case`, `hlo_op`, `kernel_class`, `measured_s`,
    `predicted_s`, `fold`.
    """

    _metadata = ["predictions", "split_name"]

    @property
    def _constructor(self):
        return Comparison

    def _repr_html_(self) -> str:
        split = getattr(self, "split_name", "")
        head = f"<p>cost models compared on split <b>{split}</b></p>" if split else ""
        return head + pd.DataFrame(self)._repr_html_()


def make_model(name_or_model, device):
    """A model object for `compare`: registry names, with a GPU-only model (`xla-gpu`) pinned to
    `host_as_gpu` on a CPU."""
    from ..fit._calibrated import AnalyticalOnDevice, host_as_gpu
    from ..models import get_model
    from ..models._resolve import PricesDeviceKinds

    if not isinstance(name_or_model, str):
        return name_or_model
    model = get_model(name_or_model)
    if isinstance(model, PricesDeviceKinds) and device.kind not in model.device_kinds:
        # (a GPU model on this CPU: priced on the CPU's rates in a GPU-shaped spec)
        return AnalyticalOnDevice(model, host_as_gpu(device), model.name)
    return model


def _label(model, given) -> str:
    return given if isinstance(given, str) else str(model.name)


def _fittable(model) -> bool:
    return hasattr(model, "fit") and callable(model.fit)


def _fit(model, prep: Prepared, device):
    from sklearn.base import clone

    from ..fit._calibrated import CalibratedModel

    fresh = clone(model)
    if isinstance(model, CalibratedModel):
        return fresh.fit(prep.kernels, prep.y, device)
    return fresh.fit(prep.X, prep.y)


def _predict(model, prep: Prepared, device) -> np.ndarray:
    from ..fit._kernel_model import FeatureCostModel

    if len(prep.y) == 0:
        return np.zeros(0)
    if isinstance(model, FeatureCostModel):
        fitted = model._fitted_for(device)
        return np.asarray(fitted.predict(prep.X[fitted.feature_names_]), dtype=float)
    out = np.full(len(prep.kernels), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, k in enumerate(prep.kernels):
            try:
                e = model.estimate(k, device)
            except Exception as exc:  # one kernel a model cannot read is unpriced, not fatal
                if type(exc).__name__ == "CalibrationError":
                    raise
                continue
            out[i] = e.time_s if e.priced else np.nan
    return out


def _program(rows: pd.DataFrame) -> np.ndarray:
    """The program a row belongs to (`kernel` for zoo rows, else `source:kernel`)."""
    return rows["kernel"].astype(str).to_numpy()


def _decisions(rows: pd.DataFrame, pred: np.ndarray) -> pd.DataFrame:
    """Per program: measured and predicted per-run totals of its fused and unfused variants."""
    if "kernel_class" not in rows or len(rows) == 0:
        return pd.DataFrame(columns=["program", "meas_fused", "meas_unfused", "pred_fused", "pred_unfused"])
    launches = rows["launches"].to_numpy(float) if "launches" in rows else np.ones(len(rows))
    launches = np.where(np.isfinite(launches) & (launches >= 1), launches, 1.0)
    d = pd.DataFrame({
        "program": _program(rows),
        "variant": np.where(rows["kernel_class"].to_numpy() == "program", "fused",
                            np.where(rows["kernel_class"].to_numpy() == "program-unfused", "unfused", "")),
        "meas": rows["min_per_run_s"].to_numpy(float),
        "pred": pred * launches,
    })
    d = d[d["variant"] != ""]
    if len(d) == 0:
        return pd.DataFrame(columns=["program", "meas_fused", "meas_unfused", "pred_fused", "pred_unfused"])
    # A NaN prediction makes the program's total NaN (min_count keeps it from summing to 0).
    tot = d.groupby(["program", "variant"]).agg(meas=("meas", "sum"), pred=("pred", lambda s: s.sum(min_count=len(s))))
    tot = tot.unstack("variant")
    if ("meas", "fused") not in tot or ("meas", "unfused") not in tot:
        return pd.DataFrame(columns=["program", "meas_fused", "meas_unfused", "pred_fused", "pred_unfused"])
    out = pd.DataFrame({
        "program": tot.index,
        "meas_fused": tot[("meas", "fused")].to_numpy(),
        "meas_unfused": tot[("meas", "unfused")].to_numpy(),
        "pred_fused": tot[("pred", "fused")].to_numpy(),
        "pred_unfused": tot[("pred", "unfused")].to_numpy(),
    })
    return out.dropna(subset=["meas_fused", "meas_unfused"]).reset_index(drop=True)


def _folds(split: str, train: Prepared, test: Prepared, folds: int):
    """Yield (fold, train_mask over train+test pool, test_mask over the pool)."""
    from sklearn.model_selection import GroupKFold

    n_tr, n_te = len(train.y), len(test.y)
    if split in ("program", "none"):
        yield 0, np.r_[np.ones(n_tr, bool), np.zeros(n_te, bool)], np.r_[np.zeros(n_tr, bool), np.ones(n_te, bool)]
        return
    if split == "program-cv":
        groups = _program(test.rows)
        uniq = np.unique(groups)
        k = min(max(int(folds), 2), len(uniq))
        if k < 2:
            raise ValueError("split 'program-cv' needs kernels of at least 2 programs")
        for f, (tr_i, te_i) in enumerate(GroupKFold(n_splits=k).split(np.zeros(n_te), groups=groups)):
            trm = np.r_[np.ones(n_tr, bool), np.isin(np.arange(n_te), tr_i)]
            tem = np.r_[np.zeros(n_tr, bool), np.isin(np.arange(n_te), te_i)]
            yield f, trm, tem
        return
    col = "kernel_class" if split == "class" else "kernel"
    groups = train.rows[col].astype(str).to_numpy()
    uniq = np.unique(groups)
    k = len(uniq) if split == "class" else min(max(int(folds), 2), len(uniq))
    if k < 2:
        raise ValueError(f"split {split!r} needs at least 2 groups of '{col}' in the training data")
    for f, (tr_i, te_i) in enumerate(GroupKFold(n_splits=k).split(np.zeros(n_tr), groups=groups)):
        trm = np.r_[np.isin(np.arange(n_tr), tr_i), np.zeros(n_te, bool)]
        tem = np.r_[np.isin(np.arange(n_tr), te_i), np.zeros(n_te, bool)]
        yield f, trm, tem


def _concat(a: Prepared, b: Prepared) -> Prepared:
    return Prepared(pd.concat([a.rows, b.rows]), a.kernels + b.kernels, pd.concat([a.X, b.X]),
                    np.r_[a.y, b.y], {**a.skipped, **b.skipped})


def compare(models: Sequence = DEFAULT_MODELS, dataset=None, split: str = "program", *, train=None,
            device="host", folds: int = 5, test_classes: Sequence[str] = ("program", "user")) -> Comparison:
    """Score cost models against measured kernel times.

    **Arguments:**

    - `models`: registry names (`fitted`, `learned`, `roofline-calibrated`,
      `xla-gpu-calibrated`, `roofline`, `xla-gpu`, or any registered model)
      or model objects.
    - `dataset`: the data to score: a dataset path, list of paths or
      DataFrame. Default: the device's real-program dataset
      (`calibration/host_cpu_programs.parquet`) for the `program` splits and
      `none`, the suite dataset for `class` and `cv`.
    - `split`: `"program"`, `"program-cv"`, `"class"`, `"cv"` or `"none"`
      (see the module docstring).
    - `train`: training data for the `program` splits (default the suite
      dataset `calibration/host_cpu.parquet` plus the `extra-*` rows of the
      real-program dataset; rows of real programs are always left out).
    - `device`: `DeviceSpec` or name (default `"host"`).
    - `folds`: folds of the `program-cv` and `cv` splits.
    - `test_classes`: kernel classes of `dataset` that are scored in the
      `program` splits and `none` (default real programs as compiled:
      `program`, and `user` for a program measured with `measure --jax ...
      --out`; the `program-unfused` rows serve the fusion metrics).

    **Returns:** a `Comparison` (a DataFrame, one row per model; see there).

    **Raises:** `ValueError` when `dataset` has no row to score (none of
    `test_classes`, or none with a usable time and HLO), naming what it has.
    """
    from ..models._resolve import resolve_device

    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
    dev = resolve_device(device)
    if isinstance(models, str):
        models = [models]
    objects = [(m, make_model(m, dev)) for m in models]

    if split in ("class", "cv"):
        source = dataset if dataset is not None else (train if train is not None else default_training(dev.name))
        train_df = training_rows(load_rows(source))
        test_df = train_df.iloc[0:0]
    else:
        test_df = load_rows(dataset if dataset is not None else programs_dataset(dev.name))
        if split == "none":
            train_df = test_df.iloc[0:0]
        elif train is not None:
            train_df = training_rows(load_rows(train))
        else:
            # The suite, plus the supplementary (extra-*) rows kept with the programs.
            train_df = training_rows(load_rows(default_training(dev.name)))
        _check_scorable(test_df, dataset, test_classes)
        if "kernel_class" in test_df:
            test_df = test_df[test_df["kernel_class"].isin(set(PROGRAM_CLASSES) | set(test_classes))]
    tr = prepare(train_df, dev) if len(train_df) else _empty(dev)
    te = prepare(test_df, dev) if len(test_df) else _empty(dev)
    if split not in ("class", "cv") and not len(te.y):
        raise ValueError(f"{_where(dataset)}: none of its {len(test_df)} rows to score is a kernel with a usable "
                         "time and HLO text" + (f" (first problem: {next(iter(te.skipped.values()))})"
                                                if te.skipped else ""))
    pool = _concat(tr, te)
    scored_class = set(test_classes)

    rows, pred_rows = [], []
    for given, model in objects:
        label = _label(model, given)
        pred = np.full(len(pool.y), np.nan)
        fold_of = np.full(len(pool.y), -1)
        fit_s = 0.0
        for fold, trm, tem in _folds(split, tr, te, folds):
            m = model
            if split != "none" and _fittable(model):
                t0 = time.perf_counter()
                m = _fit(model, pool.subset(trm), dev)
                fit_s += time.perf_counter() - t0
            pred[tem] = _predict(m, pool.subset(tem), dev)
            fold_of[tem] = fold
        scored = fold_of >= 0
        if split in ("program", "program-cv", "none") and "kernel_class" in pool.rows:
            scored &= pool.rows["kernel_class"].isin(scored_class).to_numpy()
        acc = accuracy(pred[scored], pool.y[scored]) if scored.any() else {k: math.nan for k in METRIC_COLUMNS}
        fus = fusion_metrics(_decisions(pool.rows[fold_of >= 0], pred[fold_of >= 0]))
        rows.append({"model": label, "split": split, **acc, **fus, "fit_s": fit_s})
        sub = pool.rows[fold_of >= 0]
        pred_rows.append(pd.DataFrame({
            "model": label,
            "case": sub["case"].to_numpy() if "case" in sub else "",
            "program": _program(sub) if "kernel" in sub else "",
            "hlo_op": sub["hlo_op"].to_numpy() if "hlo_op" in sub else "",
            "kernel_class": sub["kernel_class"].to_numpy() if "kernel_class" in sub else "",
            "scored": scored[fold_of >= 0],
            "measured_s": pool.y[fold_of >= 0],
            "predicted_s": pred[fold_of >= 0],
            "fold": fold_of[fold_of >= 0],
        }))
    table = Comparison(rows, columns=["model", "split", *METRIC_COLUMNS, *FUSION_COLUMNS, "fit_s"])
    table.predictions = pd.concat(pred_rows, ignore_index=True) if pred_rows else pd.DataFrame()
    table.split_name = split
    return table


def _where(dataset) -> str:
    if dataset is None:
        return "the default dataset"
    if isinstance(dataset, pd.DataFrame):
        return "the dataset"
    if isinstance(dataset, (list, tuple)):
        return ", ".join(str(p) for p in dataset)
    return str(dataset)


def _check_scorable(test_df: pd.DataFrame, dataset, test_classes) -> None:
    """Refuse a dataset with nothing to score, rather than return a table of NaN."""
    if "kernel_class" not in test_df or test_df["kernel_class"].isin(set(test_classes)).any():
        return
    classes = sorted(set(test_df["kernel_class"].astype(str)))
    raise ValueError(f"{_where(dataset)}: no rows of kernel class {', '.join(test_classes)} to score"
                     + (f" (it has {', '.join(classes)})" if classes else " (it has no rows)")
                     + "; measured kernels of a suite are scored with split='class' or 'cv'")


def _empty(dev) -> Prepared:
    from ..fit._features import FEATURES

    return Prepared(pd.DataFrame(), [], pd.DataFrame(columns=list(FEATURES), dtype=float), np.zeros(0))
