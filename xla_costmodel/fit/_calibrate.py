"""`calibrate`: measure (or read) kernel timings, fit every fittable model, save the results.

Writes one JSON file per model to `<device>_<model>.json` in the user's data
directory (`datasets.user_data_dir()`; never the shipped `calibration/`
unless it is named as `out_dir`). A device is calibrated only from its own
measurements: running the suite here calibrates the device this machine
is, and a dataset must have been measured on the device it calibrates
(`DeviceMismatchError` otherwise).

- `fitted`: the weights (seconds per unit) of every feature, the training
  support of each, the hyper-parameters;
- `learned`: the hyper-parameters, the datasets it was fitted on (paths
  relative to the calibration folder, the suite runs used and a SHA-256 of
  those rows) and check predictions; loading refits the trees on the same
  rows and verifies them (rows appended later are ignored);
- `roofline-calibrated`, `xla-gpu-calibrated`: the fitted `DeviceSpec`, the
  model constants and the fitted rate factors.

Every file also holds the device, the date, the feature names, the
training-set size, the jax/jaxlib versions and the training-set accuracy.

A calibration cannot silently make predictions worse. Written to the user's
data directory (no `out_dir`), each model is first judged: fitted without
one case in five of its rows (`HELD_OUT`, by a hash of the case's name),
it is scored on those held-out rows beside the calibration in use (the
user's earlier one, else the shipped one). If it scores worse (a higher
`ratio_error`), the full fit is saved to `held-back/` in the data
directory, read by no model unless asked, and one line says so and why;
the calibration in use stays. `quick=True` writes to `quick/` there, also
read by no model unless asked (`datasets._store`).
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .._text import count
from ..datasets import (TEST_PROGRAM, CalibrationError, DeviceMismatchError, calibration_in_use, dataset_devices,
                        dataset_name, header, held_back_dir, load_rows, measured_on, own_program_rows, quick_dir,
                        row_roles, rows_device_matches, save_calibration, training_rows, user_data_dir)
from ..features import Prepared, prepare
from ._refit import (CONTEXT_ROWS_RULE, context_training_rows, dataset_entry, refit_learned, relative_path,
                     used_roles)

__all__ = ["calibrate", "check_measured_device", "refit_learned", "FITTABLE_MODELS"]

FITTABLE_MODELS = ("fitted", "learned", "roofline-calibrated", "xla-gpu-calibrated", "context", "learned-context")
#: Models whose saved calibration is also fitted to this project's own programs (`fit._context_model`).
CONTEXT_MODELS = ("context", "learned-context")
_CHECK_ROWS = 8


def _device_facts(dev) -> dict:
    from ..features import device_facts

    return dict(device_facts(dev))


def _train_accuracy(pred, y) -> dict:
    from ..metrics import accuracy

    acc = accuracy(pred, y)
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in acc.items()}


def _this_machine() -> dict:
    """`{backend, device_kind, device}` of the device jax measures on here."""
    from ..measure import device_description

    return device_description()


def check_measured_device(dev, entries, where: str) -> None:
    """Refuse measurements of another device than `dev`.

    **Arguments:** `dev`: the `DeviceSpec` being calibrated; `entries`: the
    devices the rows come from (`{backend, device_kind, device}` each, as
    `datasets.measured_on` gives); `where`: what holds them, for the message.

    **Raises:** `DeviceMismatchError` naming both devices.
    """
    wrong = [e for e in entries if not rows_device_matches(e, dev)]
    if not wrong:
        return
    seen = "; ".join(str(e.get("device") or e.get("device_kind")) for e in wrong)
    what = "a CPU" if dev.kind == "cpu" else f"a {dev.description or dev.name}"
    raise DeviceMismatchError(
        f"cannot calibrate '{dev.name}' from {where}: measured on {seen}, not on {what}; "
        f"calibrate the device that was measured, or measure on a '{dev.name}' and pass those measurements "
        f"(dataset=..., `--dataset`; rows of a device you registered: calibrate_devices(..., devices=...), "
        f"`--device-map`)"
    )


def _measure(dev, quick: bool, out_dir: Path, progress: bool) -> Path:
    """Run the measurement suite on this machine; returns the dataset file the rows went to."""
    from ..measure import append_dataset, run_suite

    # Before minutes of measuring: this machine's times are only this machine's device's.
    check_measured_device(dev, [_this_machine()], "this machine's measurements")
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = run_suite(quick=quick, progress=progress)
    path = out_dir / (f"{dev.name}_quick.parquet" if quick else dataset_name(dev.name))
    append_dataset(rows, path)
    return path


#: Where a full host calibration keeps this machine's supplementary kernels and own programs (`_supplementary`).
SUPPLEMENTARY = "host_cpu_programs.parquet"


def _supplementary(out_dir: Path, progress: bool) -> Path:
    """This machine's supplementary kernels and this project's own programs (`measure._programs`), the
    training data the shipped calibrations have besides the suite: `out_dir/host_cpu_programs.parquet`,
    measured now unless it holds rows timed on this machine already."""
    from ..measure import device_description
    from ..measure.programs import write_dataset
    from ..measure.programs import measure_supplementary

    path = out_dir / SUPPLEMENTARY
    here = device_description()["device"]
    if path.is_file():
        rows = load_rows(path)
        if "device" in rows and set(rows["device"].astype(str)) == {here}:
            return path
    if progress:
        print(f"measuring the supplementary kernels and this project's programs ({path.name}; minutes, once "
              "per machine)", file=sys.stderr)
    write_dataset(measure_supplementary(progress=progress), path)
    return path


def calibrate(device="host", quick: bool = False, dataset=None, *, models=FITTABLE_MODELS, out_dir=None,
              include_programs: bool = False, progress: bool = True) -> pd.DataFrame:
    """Fit every fittable model to measured kernels of a device and save the calibrations.

    **Arguments:**

    - `device`: a device name or `DeviceSpec` (default `"host"`, this CPU):
      the calibration's key and the starting point of the analytical fits.
    - `quick`: with no `dataset`, run the quick suite (seconds) instead of the
      full one (minutes).
    - `dataset`: kernel measurements to fit to: a dataset path, a list of
      them, or a DataFrame (`xla_costmodel.measure` schema), measured on
      `device` (its `backend`/`device_kind` columns are checked). None runs
      the measurement suite on this machine first, which must then be
      `device`, appends its rows to the device's dataset in `out_dir`
      (`host_cpu.parquet`; quick runs go to `<device>_quick.parquet`
      and are fitted alone). A full `host` calibration then measures the
      rest of the training data the shipped calibrations have, on this
      machine, once (`out_dir/host_cpu_programs.parquet`, kept while it
      holds this machine's rows; `measure._programs`): the supplementary
      kernels, with which the suite is the default training data (role
      `suite`, `datasets.row_roles`), and this project's own programs, which the
      context models and the program overhead also fit. Without them a
      calibration extrapolates from the suite's large kernels to the small
      ones real programs run, and is worse than the shipped one on the same
      machine (`scripts/bench_models.py --saved`).
    - `models`: which of `fitted`, `learned`, `roofline-calibrated`,
      `xla-gpu-calibrated`, `context`, `learned-context` to fit.
    - `out_dir`: where to write (default the user's data directory,
      `$XLA_COSTMODEL_DATA_DIR` or platformdirs'; see `datasets._store`; for a
      quick run that measures, its `quick/` folder, which no model reads
      unless asked). A calibration written to the default place is used only
      if it scores at least as well as the one in use on its held-out rows
      (module docstring); one written to `out_dir` is not judged.
    - `include_programs`: also fit to this project's own programs in the
      dataset (role `training-program`: the zoo, `extra-program`); by
      default they are left out, except that the context models
      (`context`, `learned-context`) and the program overhead also fit
      this project's own programs (`context_training_rows`). Programs of
      other sources (the independent corpus, role `test-program`) are never
      fitted to: they are what `compare` scores the models on. Rows left
      out are counted in the progress message and in the calibration file
      (`left_out_rows`), and a warning names test programs found in a
      dataset given here.
    - `progress`: progress messages on stderr.

    **Returns:** a DataFrame, one row per model: `model`, `file`,
    `training_rows`, training-set `ratio_error` and `within_2x`, `fit_s`,
    and, when the calibrations go to the user's data directory (no
    `out_dir`, not `quick`), the judgement (module docstring):
    `used_by_default` (False: saved to `held-back/`), `held_out_rows`,
    `held_out_ratio_error` and `in_use_ratio_error` (the calibration in use,
    `in_use_file`, on the same rows).

    **Raises:** `DeviceMismatchError` (a `CalibrationError`, so a
    `ValueError`) when the measurements are of another device than
    `device`: this machine's for `dataset=None`, or the dataset's rows;
    `ValueError` for unknown models or devices, a dataset of several devices
    (`calibrate_devices` fits those) or fewer than 10 usable rows (saying
    which roles the dataset's other rows have).

    Afterwards `analyze(..., device=device, model="fitted")` (and the other
    models) use these calibrations.
    """
    from ..measure import resolve_device

    unknown = [m for m in models if m not in FITTABLE_MODELS]
    if unknown:
        raise ValueError(f"cannot calibrate {', '.join(unknown)}; fittable models: {', '.join(FITTABLE_MODELS)}")
    dev = resolve_device(device)
    measures_quick = quick and dataset is None
    if out_dir is not None:
        out = Path(out_dir)
    else:  # a quick fit is a smoke test: kept apart, so that no model reads it unless asked
        out = quick_dir() if measures_quick else user_data_dir()

    given = False
    if dataset is None:
        measured = _measure(dev, quick, out, progress)
        # The rest of the training data from the same folder: the shipped files were timed on another machine.
        extra = None if quick or dev.name != "host" else _supplementary(out, progress)
        dataset = measured if extra is None else [measured, extra]
    else:
        given = True
    if isinstance(dataset, pd.DataFrame):
        df = dataset
        paths: list[Path] = []
        where = "the dataset"
    else:
        paths = [Path(dataset)] if isinstance(dataset, (str, os.PathLike)) else [Path(p) for p in dataset]
        df = load_rows(paths)
        where = ", ".join(str(p) for p in paths)
    every_row = df
    roles = used_roles(include_programs)
    left_out = _left_out(df, roles)
    if left_out.get(TEST_PROGRAM) and given:
        warnings.warn(f"calibrate: {left_out[TEST_PROGRAM]} rows of programs of other sources (the independent "
                      "corpus: role test-program) are left out; they score models and never train them",
                      RuntimeWarning, stacklevel=2)
    df = training_rows(df, include_programs=include_programs)
    devices = dataset_devices(df)
    if len(devices) > 1:
        # One device's spec for another's rows would give wrong features and a meaningless fit.
        raise ValueError(f"the dataset holds measurements of {len(devices)} devices ({'; '.join(devices)}); "
                         "fit each and all together with calibrate_devices (xla-costmodel calibrate --dataset)")
    check_measured_device(dev, measured_on(df), where)
    result = fit_and_save(dev, df, paths=paths, models=models, out=out, include_programs=include_programs,
                          progress=progress, every_row=every_row, judge=out_dir is None and not measures_quick)
    if progress and measures_quick and out_dir is None:
        print(f"the quick calibration is a smoke test: saved in {out}, which no model reads unless asked "
              f"(XLA_COSTMODEL_DATA_DIR={out}); the calibration in use is unchanged", file=sys.stderr)
    return result


def fit_and_save(dev, df: pd.DataFrame, *, paths, models, out: Path, include_programs: bool,
                 progress: bool, device_map: bool = False, every_row: pd.DataFrame | None = None,
                 judge: bool = False) -> pd.DataFrame:
    """`calibrate`'s fitting and saving, for rows already known to be `dev`'s (see `calibrate`).

    `judge`: score each model on its held-out rows against the calibration
    in use first, and save a worse one to `held-back/` (module docstring).

    `device_map`: the rows were assigned to `dev` by the caller's device map
    (`calibrate_devices(..., devices=...)`), which the saved `measured_on`
    records, so that reading the calibration trusts it. `every_row`: the
    dataset before the programs were left out of `df` (the context models and
    the program overhead also fit this project's own programs); default `df`.
    """
    from ._calibrated import CalibratedModel

    every_row = df if every_row is None else every_row
    roles = used_roles(include_programs)
    left_out = _left_out(every_row, roles)

    out.mkdir(parents=True, exist_ok=True)
    prep = prepare(df, dev, progress=progress)
    if len(prep.y) < 10:
        others = "; ".join(f"{n} rows of role {r}" for r, n in left_out.items())
        raise ValueError(f"only {len(prep.y)} usable kernel rows to calibrate with; need at least 10"
                         + (f" (left out: {others})" if others else ""))
    if progress:
        others = ", ".join(f"{n} {r} rows" for r, n in left_out.items())
        print(f"calibrating {count(len(models), 'model')} for '{dev.name}' on {count(len(prep.y), 'kernel')}"
              + (f" (left out: {others})" if others else ""), file=sys.stderr)

    facts = _device_facts(dev)
    suite_prep = prep
    context_prep = None
    results = []
    for name in models:
        t0 = time.perf_counter()
        prep, rule = suite_prep, None
        if name in CONTEXT_MODELS and not include_programs:
            # The suite shows little context (its kernels run almost alone): add our own programs.
            if context_prep is None:
                context_prep = prepare(context_training_rows(every_row), dev, progress=progress)
            prep, rule = context_prep, CONTEXT_ROWS_RULE
        model_class = _model_classes().get(name)
        verdict = _judge(name, model_class, dev, prep, held_back_dir(out)) if judge else {}
        target = out if verdict.get("used_by_default", True) else held_back_dir(out)
        devices = [{**e, "device_map": True} for e in measured_on(prep.rows)] if device_map else measured_on(prep.rows)
        entries = [dataset_entry(p, target, include_programs, rule) for p in paths]
        base = header(name, dev, len(prep.y), entries, devices)
        base["device_facts"] = facts
        base["rows_roles"] = list(roles)
        base["left_out_rows"] = left_out
        if rule is not None:
            base["rows_rule"] = rule
        if verdict:
            base["judgement"] = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                                 for k, v in verdict.items() if k != "line"}
        if name in ("fitted", "context"):
            m = model_class().fit(prep.X, prep.y)
            payload = {**base, **m.to_calibration()}
            pred = m.predict(prep.X)
        elif name in ("learned", "learned-context"):
            if not paths:
                # Refitting needs the rows: keep them next to the calibration.
                from ..measure.programs import write_dataset

                keep = target / f"{dev.name}_{name}_training.parquet"
                target.mkdir(parents=True, exist_ok=True)
                write_dataset(prep.rows, keep)  # atomically: the earlier rows stay until the new ones are complete
                base["datasets"] = [dataset_entry(keep, target, include_programs, rule)]
            m = model_class().fit(prep.X, prep.y)
            pred = m.predict(prep.X)
            payload = {**base, **m.to_calibration(), "checks": _checks(prep, pred)}
        else:
            m = CalibratedModel(name.removesuffix("-calibrated")).fit(prep.kernels, prep.y, dev)
            payload = {**base, **m.to_calibration()}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pred = np.array([_time(m, k, dev) for k in prep.kernels])
        payload["train_metrics"] = _train_accuracy(pred, prep.y)
        path = save_calibration(payload, target)
        acc = payload["train_metrics"]
        results.append({
            "model": name, "file": str(path), "training_rows": int(len(prep.y)),
            "ratio_error": acc.get("ratio_error"), "within_2x": acc.get("within_2x"), "fit_s": time.perf_counter() - t0,
            **{k: v for k, v in verdict.items() if k != "line"},
        })
        if progress:
            print(f"  {name}: training ratio_error {acc.get('ratio_error'):.3f} -> {path}", file=sys.stderr)
            if verdict.get("line"):
                print(f"  {name}: {verdict['line']}", file=sys.stderr)
    results += _calibrate_program_overhead(every_row, dev, out, paths, progress)
    return pd.DataFrame(results)


#: One case in `HELD_OUT` (by a hash of its name) is held out when a calibration is judged (`_judge`).
HELD_OUT = 5


def _held_out(rows: pd.DataFrame) -> np.ndarray:
    """The rows held out to judge a calibration: whole cases (every size, run and round of a case together),
    one in `HELD_OUT` by a CRC-32 of the case's name, so the same rows on every run."""
    import zlib

    key = rows["case"] if "case" in rows else rows["hlo_op"]
    names = key.astype(str).to_numpy()
    return np.array([zlib.crc32(n.encode()) % HELD_OUT == 0 for n in names], dtype=bool)


def _predictions(name: str, model, dev, prep: Prepared) -> np.ndarray:
    """`model`'s predictions (seconds per launch) of `prep`'s rows: by features, or per kernel for the
    calibrated analytical models."""
    if name.endswith("-calibrated") or not hasattr(model, "feature_columns"):
        # (per kernel too: a calibration in use of another form, a learned efficiency over an analytical
        # model, `fit._efficiency`, reads its analytical price per kernel, not the feature table alone)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.array([_time(model, k, dev) for k in prep.kernels])
    return np.asarray(model.predict(prep.X), dtype=float)


def _judge(name: str, model_class, dev, prep: Prepared, held_back: Path) -> dict:
    """Whether a new calibration of `name` should be used by default: fitted without its held-out rows
    (`_held_out`), is it at least as good on them (`ratio_error`) as the calibration in use?

    **Returns:** `used_by_default`, `held_out_rows`, `held_out_ratio_error`, `in_use_file`,
    `in_use_ratio_error`, and `line`: one sentence for the progress output.
    """
    from ._calibrated import CalibratedModel
    from ..metrics import accuracy

    in_use, whose = calibration_in_use(name, dev)
    out: dict = {"used_by_default": True, "held_out_rows": 0, "held_out_ratio_error": math.nan,
                 "in_use_file": str(in_use) if in_use else "", "in_use_ratio_error": math.nan}
    if in_use is None:
        return {**out, "line": "used: there was no calibration of it to compare with"}
    held = _held_out(prep.rows)
    if held.sum() < 5 or (~held).sum() < 10:
        return {**out, "line": f"used: too few rows ({len(held)}) to hold some out and judge it"}
    train, test = prep.subset(~held), prep.subset(held)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the machine the one in use was measured on is said elsewhere
        try:
            if name.endswith("-calibrated"):
                current = CalibratedModel.from_calibration(name.removesuffix("-calibrated"), dev)
            else:
                current = model_class.from_calibration(dev)
        except CalibrationError as exc:
            return {**out, "line": f"used: the calibration in use cannot be read ({str(exc).splitlines()[0]})"}
        before = accuracy(_predictions(name, current, dev, test), test.y)["ratio_error"]
        if name.endswith("-calibrated"):
            candidate = CalibratedModel(name.removesuffix("-calibrated")).fit(train.kernels, train.y, dev)
        else:
            candidate = model_class().fit(train.X, train.y)
        after = accuracy(_predictions(name, candidate, dev, test), test.y)["ratio_error"]
    worse = not math.isfinite(after) or (math.isfinite(before) and after > before)
    rows = count(int(held.sum()), "held-out row")
    what = f"{whose} calibration {in_use}" if whose == "yours" else f"shipped calibration {in_use.name}"
    if worse:
        line = (f"NOT USED by default: fitted without its {rows} it scores ratio_error {after:.3f} on them, worse "
                f"than the {what} ({before:.3f}), which stays in use; saved in {held_back} (to use it anyway: "
                f"XLA_COSTMODEL_DATA_DIR={held_back})")
    else:
        line = (f"used: fitted without its {rows} it scores ratio_error {after:.3f} on them, the {what} "
                f"{before:.3f}")
    return {**out, "used_by_default": not worse, "held_out_rows": int(held.sum()), "held_out_ratio_error": after,
            "in_use_ratio_error": before, "line": line}


def _calibrate_program_overhead(rows: pd.DataFrame, dev, out: Path, paths, progress: bool) -> list[dict]:
    """Fit and save the device's per-run program overhead (`fit._program`) when the data holds at least
    3 of this project's own programs with their wall times (never corpus programs)."""
    from ._program import PROGRAM_OVERHEAD, ProgramOverhead, program_table

    if "wall_min_per_run_s" not in rows:
        return []
    own = own_program_rows(rows)
    programs = program_table(rows[own])
    if len(programs) < 3:
        return []
    t0 = time.perf_counter()
    overhead = ProgramOverhead.fit(programs)
    payload = {**header(PROGRAM_OVERHEAD, dev, int(len(programs)), [{"path": relative_path(p, out)} for p in paths],
                        measured_on(rows[own])),
               **overhead.to_calibration()}
    path = save_calibration(payload, out)
    if progress:
        print(f"  {PROGRAM_OVERHEAD}: {overhead.per_run_s * 1e6:.1f} µs per run + {overhead.per_kernel_s * 1e6:.2f} µs "
              f"per kernel, from {len(programs)} programs -> {path}", file=sys.stderr)
    return [{"model": PROGRAM_OVERHEAD, "file": str(path), "training_rows": int(len(programs)),
             "ratio_error": math.nan, "within_2x": math.nan, "fit_s": time.perf_counter() - t0}]


def _model_classes() -> dict:
    """The estimator class of each fittable model that `fitted`'s or `learned`'s calibration code fits."""
    from ._context_model import ContextModel, LearnedContextModel
    from ._fitted import FittedModel
    from ._learned import LearnedModel

    return {"fitted": FittedModel, "learned": LearnedModel, "context": ContextModel, "learned-context": LearnedContextModel}


def _left_out(df: pd.DataFrame, roles) -> dict[str, int]:
    """How many rows of each other role a calibration leaves out."""
    found = pd.Series(row_roles(df)).value_counts()
    return {str(r): int(n) for r, n in found.items() if r not in roles and n}


def _time(model, kernel, dev) -> float:
    try:
        return float(model.estimate(kernel, dev).time_s)
    except Exception:
        return math.nan


def _checks(prep: Prepared, pred: np.ndarray) -> list[dict]:
    """A few (row, prediction) pairs spread over the training set, to verify a refit."""
    n = len(pred)
    idx = np.unique(np.linspace(0, n - 1, min(_CHECK_ROWS, n)).astype(int))
    out = []
    for i in idx:
        r = prep.rows.iloc[i]
        out.append({"case": str(r.get("case", "")), "hlo_op": str(r.get("hlo_op", "")),
                    "suite_run": str(r.get("suite_run", "")), "prediction_s": float(pred[i])})
    return out
