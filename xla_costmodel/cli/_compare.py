"""`xla-costmodel compare` and `xla-costmodel calibrate` (one device, or each device of a fleet dataset)."""

from __future__ import annotations

import argparse
import sys

from ._common import UsageError, command, print_table

_SHOWN = ("model", "split", "source", "programs", "n", "unpriced", "sk_error", "ratio_error", "kendall_tau",
          "within_2x", "mape", "median_abs_log", "bias", "spearman", "fusion_n", "fusion_order_acc", "fusion_gain_gmre",
          "fusion_gain_tau")


def _compare_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="models to compare (default: fitted learned roofline-calibrated xla-gpu-calibrated "
                        "roofline xla-gpu)")
    p.add_argument("--split", default="source",
                   help="source (default: fit on the suite, score each source of the corpus), source-cv (leave one "
                        "source out, the other sources' programs train too), program, program-cv (this project's "
                        "own programs), class, cv or none")
    p.add_argument("--dataset", nargs="+", default=None, metavar="PATH",
                   help="data to score (default calibration/host_cpu_corpus.parquet; for program/program-cv "
                        "calibration/host_cpu_programs.parquet; the suite for class/cv)")
    p.add_argument("--train", nargs="+", default=None, metavar="PATH",
                   help="training data (default calibration/host_cpu.parquet and the supplementary kernels of "
                        "calibration/host_cpu_programs.parquet)")
    p.add_argument("--by-source", action="store_true",
                   help="one row per model and source of the scored programs, then each model over all of them")
    p.add_argument("--device", default="host", help="device (default host)")
    p.add_argument("--folds", type=int, default=5, help="folds of program-cv and cv (default 5)")
    p.add_argument("--predictions", metavar="PATH", help="also write the per-kernel predictions (.csv or .parquet)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON records")
    g.add_argument("--csv", action="store_true", help="print CSV")


def _paths(values):
    if not values:
        return None
    return values[0] if len(values) == 1 else list(values)


@command("compare", "score cost models against measured kernel times on held-out data", _compare_configure)
def _compare(args: argparse.Namespace) -> int:
    from ..measure import DatasetError
    from ..compare import DEFAULT_MODELS, SPLITS, compare
    from ..fit._store import CalibrationError

    if args.split not in SPLITS:
        raise UsageError(f"unknown split {args.split!r}; splits: {', '.join(SPLITS)}")
    try:
        table = compare(args.models or DEFAULT_MODELS, _paths(args.dataset), args.split,
                        train=_paths(args.train), device=args.device, folds=args.folds)
    except (DatasetError, CalibrationError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:
        if "unknown" in str(exc) or "split" in str(exc):
            raise UsageError(str(exc)) from None
        raise
    if args.predictions:
        pred = table.predictions
        if args.predictions.endswith(".parquet"):
            pred.to_parquet(args.predictions, index=False)
        else:
            pred.to_csv(args.predictions, index=False)
    if args.by_source:
        import pandas as pd

        overall = pd.DataFrame(table).assign(source="all", programs=table.by_source.groupby("model")["programs"].sum()
                                              .reindex(table["model"]).to_numpy())
        table = pd.concat([table.by_source.assign(split=table.split_name), overall], ignore_index=True)
    # Records carry both names of the two error metrics (`gmre` = `ratio_error`, `sk_gmre` = `sk_error`).
    columns = _SHOWN if not (args.json or args.csv) else (*_SHOWN, "gmre", "sk_gmre")
    shown = table[[c for c in columns if c in table.columns]].copy()
    if not (args.json or args.csv):
        shown = shown.round(3)
    print_table(shown, as_json=args.json, as_csv=args.csv)
    return 0


def _calibrate_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None, help="device to calibrate (default host; a --dataset of several "
                   "devices is fitted per device and across devices)")
    p.add_argument("--quick", action="store_true", help="run the quick suite (with no --dataset)")
    p.add_argument("--dataset", nargs="+", default=None, metavar="PATH",
                   help="fit to these measurements instead of running the suite")
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="models to fit (default: fitted learned roofline-calibrated xla-gpu-calibrated)")
    p.add_argument("--out", default=None, metavar="DIR", help="where to write (default calibration/)")
    p.add_argument("--weights", action="store_true", help="also print the fitted model's weights table")
    p.add_argument("--device-map", action="append", default=None, metavar="MEASURED=DEVICE",
                   help="with a dataset of several devices: the device (a registered name) of rows whose 'device' "
                        "or 'device_kind' is MEASURED, where no preset matches; repeatable")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON records")
    g.add_argument("--csv", action="store_true", help="print CSV")


@command("calibrate", "fit the fitted, learned and calibrated models to measurements and save them", _calibrate_configure)
def _calibrate(args: argparse.Namespace) -> int:
    from ..measure import DatasetError
    from ..fit._calibrate import FITTABLE_MODELS, calibrate

    status = _calibrate_devices(args)
    if status is not None:
        return status
    args.device = args.device or "host"
    try:
        result = calibrate(args.device, quick=args.quick, dataset=_paths(args.dataset),
                           models=tuple(args.models or FITTABLE_MODELS), out_dir=args.out, progress=True)
    except (DatasetError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:
        if "cannot calibrate" in str(exc) or "unknown device" in str(exc):
            raise UsageError(str(exc)) from None
        raise
    print_table(result if (args.json or args.csv) else result.round(4), as_json=args.json, as_csv=args.csv)
    if args.weights and "fitted" in set(result["model"]):
        from ..fit._fitted import FittedModel
        from ..fit._store import DIR_ENV

        import os

        if args.out:
            os.environ[DIR_ENV] = args.out
        table = FittedModel.from_calibration(args.device).weights_table()
        print(file=sys.stdout)
        print_table(table, as_json=args.json, as_csv=args.csv)
    return 0


def _calibrate_devices(args: argparse.Namespace) -> int | None:
    """`calibrate --dataset` of rows measured on several devices: per device and across devices.

    **Returns:** the exit status, or None when the dataset is of one device
    (then `calibrate` goes its usual way).
    """
    from ..fit._calibrate import FITTABLE_MODELS
    from ..fit._data import load_rows, training_rows
    from ..fit._devices import calibrate_devices, dataset_devices
    from ..measure import DatasetError

    if not args.dataset:
        if args.device_map:
            raise UsageError("--device-map is for --dataset")
        return None
    try:
        rows = load_rows(args.dataset if len(args.dataset) > 1 else args.dataset[0])
    except (DatasetError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    measured_on = dataset_devices(training_rows(rows))
    if len(measured_on) < 2 and not args.device_map:
        return None
    if args.device is not None:
        raise UsageError(f"the dataset holds measurements of {len(measured_on)} devices ({'; '.join(measured_on)}): "
                         "leave out --device to fit each of them and all together")
    mapping = {}
    for item in args.device_map or ():
        measured, sep, name = item.rpartition("=")
        if not sep or not measured or not name:
            raise UsageError(f"--device-map expects MEASURED=DEVICE, got {item!r}")
        mapping[measured] = name
    try:
        result = calibrate_devices(rows, models=tuple(args.models or FITTABLE_MODELS), devices=mapping,
                                   out_dir=args.out, progress=True)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print_table(result if (args.json or args.csv) else result.round(4), as_json=args.json, as_csv=args.csv)
    return 0
