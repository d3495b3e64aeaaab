"""`calibrate`: measure (or read) kernel timings, fit every fittable model, save the results.

Writes one JSON file per model to `calibration/<device>_<model>.json`:

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

from ._data import (PROGRAM_CLASSES, SUITE, TEST_PROGRAM, TRAINING_PROGRAM, Prepared, default_dataset, default_training,
                    load_rows, prepare, row_roles, training_rows)
from ._store import CalibrationError, calibration_dir, header, load_calibration, save_calibration

__all__ = ["calibrate", "refit_learned", "FITTABLE_MODELS"]

FITTABLE_MODELS = ("fitted", "learned", "roofline-calibrated", "xla-gpu-calibrated")
_CHECK_ROWS = 8


def _rel(path: Path, base: Path) -> str:
    try:
        return os.path.relpath(Path(path).resolve(), base.resolve())
    except ValueError:  # another drive (Windows)
        return str(Path(path).resolve())


def _device_facts(dev) -> dict:
    from ._features import device_facts

    return dict(device_facts(dev))


def _train_accuracy(pred, y) -> dict:
    from ._metrics import accuracy

    acc = accuracy(pred, y)
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in acc.items()}


def _measure(device_name: str, quick: bool, out_dir: Path, progress: bool) -> Path:
    """Run the measurement suite on this machine; returns the dataset file the rows went to."""
    import jax

    from ..measure import append_dataset, run_suite

    backend = jax.default_backend()
    if device_name == "host" and backend != "cpu":
        raise ValueError(f"calibrating 'host' measures the CPU, but jax's default backend is {backend!r}")
    rows = run_suite(quick=quick, progress=progress)
    if quick:
        path = out_dir / f"{device_name}_quick.parquet"
    else:
        path = default_dataset(device_name) if out_dir == calibration_dir() else out_dir / f"{device_name}_suite.parquet"
    append_dataset(rows, path)
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
      them, or a DataFrame (`xla_costmodel.measure` schema). None runs the
      measurement suite on this machine first, appends its rows to the
      device's dataset (`calibration/host_cpu.parquet`; quick runs go to
      `<out_dir>/<device>_quick.parquet` and are fitted alone), and fits to
      that plus the supplementary microbenchmarks of
      `calibration/host_cpu_programs.parquet` when present: the default
      training data, the suite alone (role `suite`, `fit._data`).
    - `models`: which of `fitted`, `learned`, `roofline-calibrated`,
      `xla-gpu-calibrated` to fit.
    - `out_dir`: where to write (default the project's `calibration/`, or
      `$XLA_COSTMODEL_CALIBRATION_DIR`).
    - `include_programs`: also fit to this project's own programs in the
      dataset (role `training-program`: the zoo, `extra-program`); by
      default they are left out. Programs of other sources (the
      independent corpus, role `test-program`) are never fitted to: they
      are what `compare` scores the models on. Rows left out are counted
      in the progress message and in the calibration file (`left_out_rows`),
      and a warning names test programs found in a dataset given here.
    - `progress`: progress messages on stderr.

    **Returns:** a DataFrame, one row per model: `model`, `file`,
    `training_rows`, training-set `gmre` and `within_2x`, `fit_s`.

    **Raises:** `ValueError` when fewer than 10 usable kernel rows are left
    (saying which roles the dataset's other rows have).

    Afterwards `analyze(..., device=device, model="fitted")` (and the other
    models) use these calibrations.
    """
    from ..models._resolve import resolve_device
    from ._calibrated import CalibratedModel
    from ._fitted import FittedModel
    from ._learned import LearnedModel

    unknown = [m for m in models if m not in FITTABLE_MODELS]
    if unknown:
        raise ValueError(f"cannot calibrate {', '.join(unknown)}; fittable models: {', '.join(FITTABLE_MODELS)}")
    dev = resolve_device(device)
    out = Path(out_dir) if out_dir is not None else calibration_dir()
    out.mkdir(parents=True, exist_ok=True)

    given = False
    if dataset is None:
        measured = _measure(dev.name, quick, out, progress)
        dataset = measured if quick else [p for p in default_training(dev.name) if p != measured] + [measured]
    else:
        given = True
    if isinstance(dataset, pd.DataFrame):
        df = dataset
        paths: list[Path] = []
    else:
        paths = [Path(dataset)] if isinstance(dataset, (str, os.PathLike)) else [Path(p) for p in dataset]
        df = load_rows(paths)
    roles = _used_roles(include_programs)
    left_out = _left_out(df, roles)
    if left_out.get(TEST_PROGRAM) and given:
        warnings.warn(f"calibrate: {left_out[TEST_PROGRAM]} rows of programs of other sources (the independent "
                      "corpus: role test-program) are left out; they score models and never train them",
                      RuntimeWarning, stacklevel=2)
    df = training_rows(df, include_programs=include_programs)
    from ._devices import dataset_devices

    measured_on = dataset_devices(df)
    if len(measured_on) > 1:
        # One device's spec for another's rows would give wrong features and a meaningless fit.
        raise ValueError(f"the dataset holds measurements of {len(measured_on)} devices ({'; '.join(measured_on)}); "
                         "fit each and all together with calibrate_devices (xla-costmodel calibrate --dataset)")
    prep = prepare(df, dev)
    if len(prep.y) < 10:
        others = "; ".join(f"{n} rows of role {r}" for r, n in left_out.items())
        raise ValueError(f"only {len(prep.y)} usable kernel rows to calibrate with; need at least 10"
                         + (f" (left out: {others})" if others else ""))
    if progress:
        others = ", ".join(f"{n} {r} rows" for r, n in left_out.items())
        print(f"calibrating {len(models)} model(s) for '{dev.name}' on {len(prep.y)} kernels"
              + (f" (left out: {others})" if others else ""), file=sys.stderr)

    datasets = [_dataset_entry(p, out, include_programs) for p in paths]
    facts = _device_facts(dev)
    results = []
    for name in models:
        t0 = time.perf_counter()
        base = header(name, dev, len(prep.y), datasets)
        base["device_facts"] = facts
        base["excluded_classes"] = [] if include_programs else list(PROGRAM_CLASSES)
        base["rows_roles"] = list(roles)
        base["left_out_rows"] = left_out
        if name == "fitted":
            m = FittedModel().fit(prep.X, prep.y)
            payload = {**base, **m.to_calibration()}
            pred = m.predict(prep.X)
        elif name == "learned":
            if not paths:
                # Refitting needs the rows: keep them next to the calibration.
                from ..measure import append_dataset

                keep = out / f"{dev.name}_learned_training.parquet"
                if keep.exists():
                    keep.unlink()
                append_dataset(prep.rows, keep)
                base["datasets"] = [_dataset_entry(keep, out, include_programs)]
            m = LearnedModel().fit(prep.X, prep.y)
            pred = m.predict(prep.X)
            payload = {**base, **m.to_calibration(), "checks": _checks(prep, pred)}
        else:
            m = CalibratedModel(name.removesuffix("-calibrated")).fit(prep.kernels, prep.y, dev)
            payload = {**base, **m.to_calibration()}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pred = np.array([_time(m, k, dev) for k in prep.kernels])
        payload["train_metrics"] = _train_accuracy(pred, prep.y)
        path = save_calibration(payload, out)
        acc = payload["train_metrics"]
        results.append({
            "model": name, "file": str(path), "training_rows": int(len(prep.y)),
            "gmre": acc.get("gmre"), "within_2x": acc.get("within_2x"), "fit_s": time.perf_counter() - t0,
        })
        if progress:
            print(f"  {name}: training gmre {acc.get('gmre'):.3f} -> {path}", file=sys.stderr)
    return pd.DataFrame(results)


def _used_roles(include_programs: bool) -> tuple[str, ...]:
    """The roles of the rows a calibration is fitted to (`fit._data`)."""
    return (SUITE, TRAINING_PROGRAM) if include_programs else (SUITE,)


def _left_out(df: pd.DataFrame, roles) -> dict[str, int]:
    """How many rows of each other role a calibration leaves out."""
    found = pd.Series(row_roles(df)).value_counts()
    return {str(r): int(n) for r, n in found.items() if r not in roles and n}


def _used_rows(df: pd.DataFrame, excluded, suite_runs=None, roles=None) -> pd.DataFrame:
    """The rows of a dataset a calibration was fitted to: those of `roles` (files since roles were
    recorded), else those whose `kernel_class` is not `excluded`, and of the `suite_runs` it used."""
    if roles is not None:
        df = df[np.isin(row_roles(df), list(roles))]
    elif excluded and "kernel_class" in df:
        df = df[~df["kernel_class"].isin(list(excluded))]
    if suite_runs is not None and "suite_run" in df:
        df = df[df["suite_run"].astype(str).isin(set(suite_runs))]
    return df


def _rows_sha256(df: pd.DataFrame) -> str:
    """A fingerprint of the rows a model was fitted on (order-independent)."""
    import hashlib

    # `min_per_run_s` holds what schema 1 called `min_s`, so fingerprints of either schema agree.
    cols = [c for c in ("suite_run", "case", "hlo_op", "min_per_run_s", "launches") if c in df]
    keys = sorted("\x1f".join(repr(v) for v in row) for row in df[cols].itertuples(index=False))
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()


def _dataset_entry(path: Path, out: Path, include_programs: bool) -> dict:
    """Where a training dataset is, which of its suite runs were used, and a fingerprint of those rows.

    Later appends (new suite runs) leave the calibration valid; a change to the
    rows it was fitted on is detected when the `learned` model refits.
    """
    rows = _used_rows(load_rows(path), None, roles=_used_roles(include_programs))
    runs = sorted(set(rows["suite_run"].astype(str))) if "suite_run" in rows else None
    return {"path": _rel(path, out), "suite_runs": runs, "rows": int(len(rows)), "rows_sha256": _rows_sha256(rows)}


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


# Refitted models by (calibration file, its mtime): refitting takes seconds, and
# every `get_model("learned")` is a new, unfitted instance.
_REFITS: dict = {}


def refit_learned(device):
    """The `learned` model of a saved calibration, refitted from its datasets (see module docstring).

    Refits are cached per calibration file (and its modification time) in this process.
    """
    data = load_calibration("learned", device)
    where = data.get("_path")
    key = (where, os.stat(where).st_mtime_ns)
    if key not in _REFITS:
        _REFITS[key] = _refit_learned(data, device)
    return _REFITS[key]


def _refit_learned(data: dict, device):
    from ..models._resolve import resolve_device
    from ._features import device_facts
    from ._learned import LearnedModel

    where = data.get("_path")
    how = f"make a new one with xla_costmodel.calibrate(device={data.get('device')!r})"
    base = Path(where).parent
    excluded = data.get("excluded_classes", [])
    frames = []
    for d in data.get("datasets", []):
        p = Path(d["path"])
        p = p if p.is_absolute() else base / p
        if not p.is_file():
            raise CalibrationError(f"{where}: its training dataset {p} is missing; {how}")
        try:
            rows = _used_rows(load_rows(p), excluded, d.get("suite_runs"), data.get("rows_roles"))
        except ValueError as exc:
            raise CalibrationError(f"{where}: its training dataset cannot be read ({exc}); {how}") from None
        if d.get("rows_sha256") and _rows_sha256(rows) != d["rows_sha256"]:
            raise CalibrationError(f"{where}: the rows of its training dataset {p} changed since calibration; {how}")
        frames.append(rows)
    if not frames:
        raise CalibrationError(f"{where}: names no training dataset; {how}")
    df = pd.concat(frames, ignore_index=True)
    facts = data.get("device_facts")
    dev = facts if isinstance(facts, dict) and facts else device_facts(resolve_device(device))
    prep = prepare(df, dev)
    try:
        params = dict(data["params"])
        model = LearnedModel(**params).fit(prep.X, prep.y)
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"{where}: unusable 'learned' calibration ({exc}); {how}") from None
    pred = model.predict(prep.X)
    lookup = {(str(r.get("case", "")), str(r.get("hlo_op", "")), str(r.get("suite_run", ""))): i
              for i, (_, r) in enumerate(prep.rows.iterrows())}
    for c in data.get("checks", []):
        i = lookup.get((c["case"], c["hlo_op"], c["suite_run"]))
        if i is None or not math.isclose(pred[i], c["prediction_s"], rel_tol=1e-6):
            raise CalibrationError(f"{where}: refitting did not reproduce the saved predictions; {how}")
    return model
