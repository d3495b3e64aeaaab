"""`compare`: several cost models scored against measured kernel times, on held-out data.

The data's roles (`xla_costmodel.datasets`): `suite` rows (measurement
kernels) train by default; this project's own programs (`training-program`:
the zoo and the `extra-program` training programs) train only when asked and
are then never scored; the independent corpus (`test-program`, `source` =
the library) never trains a model that scores it.

Splits (what is fitted on what, what is scored):

- `"source"` (the default): fit on the training data (`train`, default the
  suite `calibration/host_cpu.parquet` plus the supplementary microbenchmarks
  of `calibration/host_cpu_programs.parquet`; with `include_programs=True`
  also this project's own programs), score every program of the test data
  (`dataset`, default the independent corpus
  `calibration/host_cpu_corpus.parquet`), per source and overall.
- `"source-cv"`: leave one source out. For each source of the test data,
  fit on the suite rows plus the programs of every *other* source (this
  project's own programs from `train` as one source, `zoo`, and the other
  sources of the test data), score that source's kernels. A source's
  programs never train the model that scores them.
- `"program"`: the scoring of this project's own programs: fit on the
  training data (suite rows only), score the kernels of the zoo programs
  (`dataset`, default `calibration/host_cpu_programs.parquet`, rows of
  kernel class `program`).
- `"program-cv"`: GroupKFold over the zoo programs (`folds` folds, grouped
  by program): fit on the suite plus the other programs' kernels (fused and
  unfused variants), score the held-out programs' kernels. Every program is
  held out once; metrics pool the out-of-fold predictions.
- `"class"`: GroupKFold over the suite by kernel class (leave one class out:
  access, elementwise, matmul, ...): how well a model transfers to kinds of
  kernels it never saw.
- `"cv"`: GroupKFold (`folds`) over the suite by suite kernel (all sizes and
  dtypes of one kernel held out together).
- `"none"`: no fitting; score the models as they are (saved calibrations for
  the fitted ones) on `dataset` (default the corpus).

Fittable models (`fitted`, `learned`, `*-calibrated`) are refitted from
scratch on each training part; the analytical models (`roofline`,
`xla-gpu`) are used as they are (on a CPU, `xla-gpu` runs on
`host_as_gpu(device)`). Metrics: see `xla_costmodel.metrics`.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ..datasets import (FUSION_VARIANT_CLASSES, PROGRAM_CLASSES, SUITE, TRAINING_PROGRAM, corpus_dataset, default_training,
                        programs_dataset, row_roles, row_sources)
from ..features import Prepared, empty_prepared, prepare_dataset
from ..metrics import METRIC_COLUMNS, accuracy, fusion_metrics

__all__ = ["compare_models", "Comparison", "DEFAULT_MODELS", "GPU_MODELS", "SPLITS", "form_ceiling", "make_model",
           "pricing_device"]

#: The models `compare` scores when none are named: those that price a CPU's kernels (the data measured here).
DEFAULT_MODELS = ("fitted", "learned", "roofline-calibrated", "roofline")
#: Models of XLA:GPU's kernels: scored on a CPU's kernels only when named, and then a note says so.
GPU_MODELS = ("xla-gpu", "xla-gpu-calibrated")
SPLITS = ("source", "source-cv", "program", "program-cv", "class", "cv", "none")
FUSION_COLUMNS = ("fusion_n", "fusion_order_acc", "fusion_gain_ratio_error", "fusion_gain_tau")
#: Columns of `Comparison.by_program`.
PROGRAM_COLUMNS = ("model", "source", "case", "program", "size", "kernels", "unpriced", "measured_per_run_s",
                   "predicted_per_run_s", "wall_per_run_s", "predicted_over_measured", "predicted_over_wall")


class Comparison(pd.DataFrame):
    """The result of `compare`: one row per model with its metrics on every scored kernel.

    Columns: `model`, `split`, then `n` (kernels scored), `unpriced`, the
    metrics of `xla_costmodel.metrics` (`sk_error`, `ratio_error`,
    `kendall_tau`, `within_2x`, `mape`,
    `median_abs_log`, `bias`, `spearman`), the fusion-decision metrics
    (`fusion_n`, `fusion_order_acc`, `fusion_gain_ratio_error`,
    `fusion_gain_tau`; NaN where the data has no fused/unfused pairs, and
    then left out of its display, printed or HTML), and `fit_s` (seconds spent fitting).
    `notes`: sentences on how the scores were made that a reader must know
    (which machine's description priced the rows; a GPU model scored on a
    CPU's kernels).

    Attributes:

    - `predictions`: one row per kernel and model: `model`, `source`,
      `case`, `program`, `size`, `hlo_op`, `kernel_class`, `scored`,
      `launches` (per program run), `measured_s` and `predicted_s` (per
      launch), `fold`.
    - `by_source`: one row per (model, source) of the scored kernels: `model`,
      `source`, `programs`, then the columns of the table above but the
      fusion ones.
    - `by_program`: one row per (model, program measured at one size) of the
      scored kernels (`PROGRAM_COLUMNS`): the program's `kernels`, how many
      are `unpriced`, `measured_per_run_s` (its measured kernels added up,
      each × its launches), `predicted_per_run_s` (the same sum of
      predictions; NaN when a kernel is unpriced), `wall_per_run_s` (the
      program's fastest run, wall clock), and the ratios of the prediction
      to both.
    """

    _metadata = ["predictions", "by_source", "by_program", "split_name", "notes"]

    @property
    def _constructor(self):
        return Comparison

    def __repr__(self) -> str:
        # (printed as shown in a notebook: without the fusion columns where they are all NaN)
        return repr(shown_columns(pd.DataFrame(self)))

    def _repr_html_(self) -> str:
        split = getattr(self, "split_name", "")
        head = f"<p>cost models compared on split <b>{split}</b></p>" if split else ""
        return head + shown_columns(pd.DataFrame(self))._repr_html_()


def shown_columns(table: pd.DataFrame) -> pd.DataFrame:
    """`table` without its fusion-decision columns where the data had no fused/unfused pairs (all NaN,
    `fusion_n` 0): what `compare`'s displays show."""
    if "fusion_n" in table and not (table["fusion_n"].fillna(0) > 0).any():
        return table.drop(columns=[c for c in FUSION_COLUMNS if c in table])
    return table


def make_model(name_or_model, device):
    """A model object for `compare`: registry names, with a GPU-only model (`xla-gpu`) pinned to
    `host_as_gpu` on a CPU."""
    from ..fit.calibration import AnalyticalOnDevice, host_as_gpu
    from ..models import get_model
    from ..models import PricesDeviceKinds

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


def _fit(model, pool: Prepared, device, *, mask=None, parts: dict | None = None):
    """A fresh copy of `model` fitted to the rows `mask` of `pool` (default all of them).

    `parts`: a dict kept across the folds of one pool, where a calibrated
    model keeps what it prices of every pooled kernel once (`CalibratedModel.parts`).
    """
    from sklearn.base import clone

    from ..fit.calibration import CalibratedModel

    fresh = clone(model)
    mask = np.ones(len(pool.y), bool) if mask is None else np.asarray(mask, bool)
    train = pool.subset(mask)
    if isinstance(model, CalibratedModel):
        cache = {} if parts is None else parts
        if model.base not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[model.base] = model.parts(pool.kernels, device)
        return fresh.fit(train.kernels, train.y, device, parts=cache[model.base][mask])
    return fresh.fit(train.X, train.y)


def _predict(model, prep: Prepared, device, bar=None) -> np.ndarray:
    """`model`'s prediction of every kernel of `prep` (seconds per launch; NaN where unpriced); `bar`: a
    progress bar advanced by one per kernel."""
    from .._progress import progress_bar
    from ..fit.calibration import FeatureCostModel

    bar = bar if bar is not None else progress_bar(None, "", "kernel", enabled=False)
    if len(prep.y) == 0:
        return np.zeros(0)
    fitted = model._fitted_for(device) if isinstance(model, FeatureCostModel) else None
    if isinstance(fitted, FeatureCostModel):
        bar.update(len(prep.y))
        return np.asarray(fitted.predict(prep.X[fitted.feature_names_]), dtype=float)
    # (else per kernel: an analytical model, or a calibration of another form, `fit._efficiency`)
    out = np.full(len(prep.kernels), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, k in enumerate(prep.kernels):
            bar.update(1)
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


def _classic_folds(split: str, n_tr: int, train_rows: pd.DataFrame, test_rows: pd.DataFrame, folds: int):
    """Folds of the `program`, `program-cv`, `class`, `cv` and `none` splits over a pool of `n_tr`
    training rows followed by the test rows: yields (fold, train mask, test mask)."""
    from sklearn.model_selection import GroupKFold

    n_te = len(test_rows)
    if split in ("program", "none"):
        yield 0, np.r_[np.ones(n_tr, bool), np.zeros(n_te, bool)], np.r_[np.zeros(n_tr, bool), np.ones(n_te, bool)]
        return
    if split == "program-cv":
        groups = _program(test_rows)
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
    groups = train_rows[col].astype(str).to_numpy()
    uniq = np.unique(groups)
    k = len(uniq) if split == "class" else min(max(int(folds), 2), len(uniq))
    if k < 2:
        raise ValueError(f"split {split!r} needs at least 2 groups of '{col}' in the training data")
    for f, (tr_i, te_i) in enumerate(GroupKFold(n_splits=k).split(np.zeros(n_tr), groups=groups)):
        trm = np.r_[np.isin(np.arange(n_tr), tr_i), np.zeros(n_te, bool)]
        tem = np.r_[np.isin(np.arange(n_tr), te_i), np.zeros(n_te, bool)]
        yield f, trm, tem


def _concat(a: Prepared, b: Prepared) -> Prepared:
    if len(a.y) == 0:
        return b
    if len(b.y) == 0:
        return a
    return Prepared(pd.concat([a.rows, b.rows]), a.kernels + b.kernels, pd.concat([a.X, b.X]),
                    np.r_[a.y, b.y], {**a.skipped, **b.skipped})


def _keys(rows: pd.DataFrame) -> pd.Index | None:
    """What identifies one measured kernel across files (`suite_run`, `case`, `hlo_op`), or None."""
    cols = ["suite_run", "case", "hlo_op"]
    if len(rows) == 0 or any(c not in rows for c in cols):
        return None
    return pd.MultiIndex.from_frame(rows[cols].astype(str))


def _without_test_rows(train: Prepared, test: Prepared) -> Prepared:
    """`train` without the kernels that are also in `test` (the same file given as both): a kernel
    is scored only where it cannot train."""
    a, b = _keys(train.rows), _keys(test.rows)
    if a is None or b is None:
        return train
    return train.subset(~a.isin(b))


@dataclass(frozen=True)
class _Plan:
    """What one split fits and scores: a pool of prepared rows (training part first, then the test part),
    the folds over it, and which pooled rows count in the scores."""

    pool: Prepared
    folds: list
    scored: np.ndarray
    sources: np.ndarray


def _program_rows(rows: pd.DataFrame) -> np.ndarray:
    """Which rows are kernels of whole programs (any source; `PROGRAM_CLASSES`)."""
    if "kernel_class" not in rows:
        return np.zeros(len(rows), bool)
    return np.isin(rows["kernel_class"].astype(str), PROGRAM_CLASSES)


def _plan(split: str, dataset, train, dev, folds: int, test_classes, include_programs: bool,
          progress: bool = False) -> _Plan:
    if include_programs and split != "source":
        raise ValueError(f"include_programs applies to the 'source' split (split {split!r} decides itself "
                         "which programs train)")
    if split in ("class", "cv"):
        source = dataset if dataset is not None else (train if train is not None else default_training(dev.name))
        whole = prepare_dataset(source, dev, progress=progress)
        tr = whole.subset(row_roles(whole.rows) == SUITE)
        te = empty_prepared()
    else:
        if dataset is None:
            dataset = programs_dataset(dev.name) if split in ("program", "program-cv") else corpus_dataset(dev.name)
        whole = prepare_dataset(dataset, dev, progress=progress)
        _check_scorable(whole.rows, dataset, test_classes)
        te = whole
        if "kernel_class" in whole.rows:
            te = whole.subset(whole.rows["kernel_class"].isin(set(FUSION_VARIANT_CLASSES) | set(test_classes)))
        if split == "none":
            tr = empty_prepared()
        else:
            data = prepare_dataset(train if train is not None else default_training(dev.name), dev, progress=progress)
            roles = row_roles(data.rows)
            if split == "source-cv":
                keep = (roles == SUITE) | _program_rows(data.rows)
            elif include_programs:
                keep = np.isin(roles, (SUITE, TRAINING_PROGRAM))
            else:
                keep = roles == SUITE
            tr = _without_test_rows(data.subset(keep), te)
        if not len(te.y):
            raise ValueError(f"{_where(dataset)}: none of its rows to score is a kernel with a usable time and HLO "
                             "text" + (f" (first problem: {next(iter(whole.skipped.values()))})"
                                       if whole.skipped else ""))
    pool = _concat(tr, te)
    n_tr = len(tr.y)
    is_test = np.r_[np.zeros(n_tr, bool), np.ones(len(te.y), bool)]
    sources = row_sources(pool.rows) if len(pool.y) else np.zeros(0, object)
    if split in ("class", "cv"):
        scored = ~is_test
    elif "kernel_class" in pool.rows:
        scored = is_test & pool.rows["kernel_class"].isin(set(test_classes)).to_numpy()
    else:
        scored = is_test.copy()
    if split == "source":
        if include_programs:
            # Training programs that train are never scored.
            scored &= row_roles(pool.rows) != TRAINING_PROGRAM
        fold_list = [(0, ~is_test, is_test.copy())]
    elif split == "source-cv":
        programs = _program_rows(pool.rows)
        suite = ~is_test & ~programs
        held = list(pd.unique(sources[scored]))
        if len(held) < 1:
            raise ValueError("split 'source-cv' found no scored program rows in the test data")
        fold_list = [(f, suite | (programs & (sources != s)), is_test & (sources == s)) for f, s in enumerate(held)]
    else:
        fold_list = list(_classic_folds(split, n_tr, tr.rows, te.rows, folds))
    if not scored.any():
        raise ValueError(f"split {split!r} has no kernels to score"
                         + (": the test data's programs are the training programs include_programs adds"
                            if include_programs else f" (kernel classes {', '.join(test_classes)} of the test data)"))
    return _Plan(pool, fold_list, scored, sources)


def _scored_files(split: str, dataset, train):
    """The files whose rows `compare` scores for `split` (its defaults for the device `host`)."""
    if dataset is not None:
        return dataset
    if split in ("class", "cv"):
        return train if train is not None else default_training("host")
    return programs_dataset("host") if split in ("program", "program-cv") else corpus_dataset("host")


def form_ceiling(models: Sequence = DEFAULT_MODELS, dataset=None, device="host", *, progress: bool = True) -> pd.DataFrame:
    """The *form ceiling*: each fittable model fitted to the scored kernels themselves and scored on them.

    What a model's form could reach on these kernels with the best parameters for them: a held-out score
    near it means the model lacks data, not form; one far below means the form misses something. (The
    measurement's own reproducibility, the *noise* ceiling, is `noise_ceiling`.) Models that cannot be fitted
    (`roofline`, `xla-gpu`) have no form ceiling and are left out.

    **Arguments:** `models`: names or model objects, as for `compare_models`; `dataset`: the measured rows
    (a path, paths or a DataFrame; default the independent corpus), of which the program kernels
    (`kernel_class` "program") are fitted and scored; `device`: the device that measured them (a name or a
    `DeviceSpec`); `progress`: one line on stderr per model, with its time.

    **Returns:** a DataFrame, one row per fittable model and source (the source of each kernel, then
    `"all"`): `model`, `source` and the accuracy columns (`fit.accuracy`: `n`, `ratio_error`, ...).
    """
    import sys

    from ..measure import resolve_device

    dev = resolve_device(device)
    whole = prepare_dataset(corpus_dataset() if dataset is None else dataset, dev)
    kernels = whole.subset(whole.rows["kernel_class"].astype(str).to_numpy() == "program")
    sources = row_sources(kernels.rows)
    out = []
    for name in models:
        model = make_model(name, dev)
        if not _fittable(model):
            continue
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = _predict(_fit(model, kernels, dev), kernels, dev)
        for source in [*pd.unique(sources), "all"]:
            inside = np.ones(len(sources), bool) if source == "all" else sources == source
            out.append({"model": _label(model, name), "source": source, **accuracy(pred[inside], kernels.y[inside])})
        if progress:
            print(f"   form ceiling of {_label(model, name)}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return pd.DataFrame(out)


def pricing_device(device="host", split: str = "source", dataset=None, train=None):
    """The `DeviceSpec` that prices the rows `compare` scores, and a note when it is not this machine's.

    On `"host"` (by name), rows measured on another machine, such as the
    shipped corpus (measured on the reference host), are priced with the
    description of the machine that measured them (`datasets.measuring_device`),
    so that their scores are the same on every machine; rows measured here,
    or of no known machine, with this machine's (`get_device("host")`).

    **Returns:** `(spec, note)`; `note` is "" for this machine's spec.
    """
    from ..datasets import measuring_device
    from ..measure import resolve_device

    if not (isinstance(device, str) and device == "host"):
        return resolve_device(device), ""
    scored = _scored_files(split, dataset, train)
    spec = measuring_device(scored)
    if spec is None:
        return resolve_device(device), ""
    from ..datasets import MEASURING_DEVICE_FILE

    first = scored if isinstance(scored, (str, bytes)) or not isinstance(scored, (list, tuple)) else scored[0]
    note = (f"rows priced with the description of the machine that measured them ({spec.description}, "
            f"{spec.core_count} cores: {MEASURING_DEVICE_FILE} beside {first}), not this machine's, so that the scores "
            "are the same on every machine")
    if split not in ("none", "class", "cv"):
        training = train if train is not None else default_training("host")
        if measuring_device(training) is None:
            note += "; the training data, not all measured on that machine, is priced with the same description"
    return spec, note


def compare_models(models: Sequence = DEFAULT_MODELS, dataset=None, split: str = "source", *, train=None,
            device="host", folds: int = 5, test_classes: Sequence[str] = ("program", "user"),
            include_programs: bool = False, progress: bool = False) -> Comparison:
    """Score cost models against measured kernel times.

    **Arguments:**

    - `models`: registry names (`fitted`, `learned`, `roofline-calibrated`,
      `roofline`, the default; `xla-gpu-calibrated`, `xla-gpu` or any
      registered model) or model objects. A GPU model (`GPU_MODELS`) named
      for a CPU's kernels is scored on them as on a GPU-shaped description of
      the CPU (`host_as_gpu`), and `notes` says so.
    - `dataset`: the data to score: a dataset path, list of paths or
      DataFrame. Default: the independent corpus
      (`calibration/host_cpu_corpus.parquet`) for `source`, `source-cv` and
      `none`; this project's programs (`calibration/host_cpu_programs.parquet`)
      for `program` and `program-cv`; the training data for `class` and `cv`.
    - `split`: `"source"`, `"source-cv"`, `"program"`, `"program-cv"`,
      `"class"`, `"cv"` or `"none"` (see the module docstring).
    - `train`: training data (default the suite `calibration/host_cpu.parquet`
      plus `calibration/host_cpu_programs.parquet`, of which only the
      supplementary microbenchmarks train unless `source-cv` or
      `include_programs` add its programs). Rows of test programs (the
      corpus) never train here.
    - `device`: `DeviceSpec` or name (default `"host"`: the rows are priced
      with the description of the machine that measured them where it is
      known, as for the shipped corpus, else this machine's; `pricing_device`).
    - `folds`: folds of the `program-cv` and `cv` splits.
    - `test_classes`: kernel classes of `dataset` that are scored (default
      programs as compiled, `program`, and `user` for a program measured
      with `measure --jax ... --out`; `program-unfused` rows serve the
      fusion metrics).
    - `include_programs`: with the `source` split, also train on this
      project's own programs in `train` (they are then never scored).
    - `progress`: progress bars on stderr (reading the kernels, then fitting
      and pricing them per model and fold), as `measure` shows them.

    **Returns:** a `Comparison` (a DataFrame, one row per model, with
    `predictions`, `by_source` and `by_program`; see there).

    **Raises:** `ValueError` for an unknown split or model, or when nothing
    is left to score (none of `test_classes`, or none with a usable time and
    HLO), naming what the dataset has; `DatasetError` for a dataset that
    cannot be read.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
    dev, device_note = pricing_device(device, split, dataset, train)
    notes = [device_note] if device_note else []
    if isinstance(models, str):
        models = [models]
    objects = [(m, make_model(m, dev)) for m in models]
    gpu_named = [m for m in models if isinstance(m, str) and m in GPU_MODELS]
    if gpu_named and dev.kind == "cpu":
        notes.append(f"{' and '.join(gpu_named)} {'prices' if len(gpu_named) == 1 else 'price'} XLA:GPU's kernels; "
                     f"as asked, {'it was' if len(gpu_named) == 1 else 'they were'} scored on this CPU's kernels, "
                     "priced on a GPU-shaped description of the CPU (host_as_gpu)")
    plan = _plan(split, dataset, train, dev, folds, tuple(test_classes), include_programs, progress)
    pool, scored_all = plan.pool, plan.scored

    from .._progress import progress_bar

    rows, pred_rows = [], []
    predicted = sum(int(np.count_nonzero(tem)) for _fold, _trm, tem in plan.folds) * len(objects)
    bar = progress_bar(predicted, "scoring", "kernel", progress)
    for given, model in objects:
        label = _label(model, given)
        pred = np.full(len(pool.y), np.nan)
        fold_of = np.full(len(pool.y), -1)
        fit_s = 0.0
        parts: dict = {}
        for fold, trm, tem in plan.folds:
            m = model
            what = f"{label}" + (f", fold {fold + 1} of {len(plan.folds)}" if len(plan.folds) > 1 else "")
            if split != "none" and _fittable(model):
                bar.set_description_str(f"fitting {what}")
                t0 = time.perf_counter()
                m = _fit(model, pool, dev, mask=trm, parts=parts)
                fit_s += time.perf_counter() - t0
            bar.set_description_str(f"scoring {what}")
            pred[tem] = _predict(m, pool.subset(tem), dev, bar)
            fold_of[tem] = fold
        scored = scored_all & (fold_of >= 0)
        acc = accuracy(pred[scored], pool.y[scored]) if scored.any() else {k: math.nan for k in METRIC_COLUMNS}
        fus = fusion_metrics(_decisions(pool.rows[fold_of >= 0], pred[fold_of >= 0]))
        rows.append({"model": label, "split": split, **acc, **fus, "fit_s": fit_s})
        pred_rows.append(_prediction_rows(label, pool.rows, plan.sources, pool.y, pred, fold_of, scored))
    bar.close()
    table = Comparison(rows, columns=["model", "split", *METRIC_COLUMNS, *FUSION_COLUMNS, "fit_s"])
    predictions = pd.concat(pred_rows, ignore_index=True) if pred_rows else pd.DataFrame()
    table.predictions = predictions
    table.by_source = _by_source(predictions)
    table.by_program = _by_program(predictions)
    table.split_name = split
    table.notes = tuple(notes)
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


def _column(rows: pd.DataFrame, name: str, default="") -> np.ndarray:
    return rows[name].to_numpy() if name in rows else np.full(len(rows), default, dtype=object)


def _prediction_rows(label, rows, sources, y, pred, fold_of, scored) -> pd.DataFrame:
    """The `predictions` rows of one model: every pooled row that some fold predicted."""
    done = fold_of >= 0
    sub = rows[done]
    launches = sub["launches"].to_numpy(float) if "launches" in sub else np.ones(len(sub))
    return pd.DataFrame({
        "model": label,
        "source": sources[done],
        "case": _column(sub, "case"),
        "program": _program(sub) if "kernel" in sub else "",
        "size": _column(sub, "size"),
        "hlo_op": _column(sub, "hlo_op"),
        "kernel_class": _column(sub, "kernel_class"),
        "scored": scored[done],
        "launches": np.where(np.isfinite(launches) & (launches >= 1), launches, 1.0),
        "measured_s": y[done],
        "predicted_s": pred[done],
        "wall_per_run_s": sub["wall_min_per_run_s"].to_numpy(float) if "wall_min_per_run_s" in sub else np.nan,
        "fold": fold_of[done],
    })


def _by_source(predictions: pd.DataFrame) -> pd.DataFrame:
    """Metrics per (model, source) of the scored kernels (`Comparison.by_source`)."""
    columns = ["model", "source", "programs", *METRIC_COLUMNS]
    if len(predictions) == 0:
        return pd.DataFrame(columns=columns)
    scored = predictions[predictions["scored"]]
    out = []
    for (model, source), g in scored.groupby(["model", "source"], sort=False):
        out.append({"model": model, "source": source, "programs": int(g["case"].nunique()),
                    **accuracy(g["predicted_s"].to_numpy(float), g["measured_s"].to_numpy(float))})
    return pd.DataFrame(out, columns=columns)


def _by_program(predictions: pd.DataFrame) -> pd.DataFrame:
    """Per (model, program at one size): the predicted and measured totals per run (`Comparison.by_program`)."""
    if len(predictions) == 0:
        return pd.DataFrame(columns=list(PROGRAM_COLUMNS))
    p = predictions[predictions["scored"]].copy()
    p["measured_run"] = p["measured_s"] * p["launches"]
    p["predicted_run"] = p["predicted_s"] * p["launches"]
    p["unpriced"] = ~(np.isfinite(p["predicted_s"]) & (p["predicted_s"] > 0))
    g = p.groupby(["model", "source", "case"], sort=False)
    out = g.agg(program=("program", "first"), size=("size", "first"), kernels=("hlo_op", "size"),
                unpriced=("unpriced", "sum"), measured_per_run_s=("measured_run", "sum"),
                # An unpriced kernel makes the program's prediction NaN, never a sum that leaves it out.
                predicted_per_run_s=("predicted_run", lambda s: s.sum() if s.notna().all() else np.nan),
                wall_per_run_s=("wall_per_run_s", "first")).reset_index()
    out["predicted_over_measured"] = out["predicted_per_run_s"] / out["measured_per_run_s"]
    out["predicted_over_wall"] = out["predicted_per_run_s"] / out["wall_per_run_s"]
    out["unpriced"] = out["unpriced"].astype(int)
    return out[list(PROGRAM_COLUMNS)]
