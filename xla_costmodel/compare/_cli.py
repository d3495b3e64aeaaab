"""`xla-costmodel compare` and `xla-costmodel calibrate`."""

from __future__ import annotations

import argparse
import sys

from ..cli import UsageError, command, print_table

_SHOWN = ("model", "split", "n", "unpriced", "gmre", "sk_gmre", "mape", "median_abs_log", "within_2x", "bias",
          "kendall_tau", "spearman", "fusion_n", "fusion_order_acc", "fusion_gain_gmre", "fusion_gain_tau")


def _compare_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="models to compare (default: fitted learned roofline-calibrated xla-gpu-calibrated "
                        "roofline xla-gpu)")
    p.add_argument("--split", default="program", help="program (default), program-cv, class, cv or none")
    p.add_argument("--dataset", nargs="+", default=None, metavar="PATH",
                   help="data to score (default calibration/host_cpu_programs.parquet; the suite for class/cv)")
    p.add_argument("--train", nargs="+", default=None, metavar="PATH",
                   help="training data of the program splits (default calibration/host_cpu.parquet)")
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
    from ._compare import DEFAULT_MODELS, SPLITS, compare
    from ._store import CalibrationError

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
    shown = table[[c for c in _SHOWN if c in table.columns]].copy()
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
    from ..scale._cli import add_calibrate_options

    add_calibrate_options(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON records")
    g.add_argument("--csv", action="store_true", help="print CSV")


@command("calibrate", "fit the fitted, learned and calibrated models to measurements and save them", _calibrate_configure)
def _calibrate(args: argparse.Namespace) -> int:
    from ..measure import DatasetError
    from ..scale._cli import run_calibrate_devices
    from ._calibrate import FITTABLE_MODELS, calibrate

    status = run_calibrate_devices(args)
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
        from ._fitted import FittedModel
        from ._store import DIR_ENV

        import os

        if args.out:
            os.environ[DIR_ENV] = args.out
        table = FittedModel.from_calibration(args.device).weights_table()
        print(file=sys.stdout)
        print_table(table, as_json=args.json, as_csv=args.csv)
    return 0


def _evaluate_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jax", required=True, metavar="MODULE:FUNCTION",
                   help="the program: FUNCTION (in an importable module, or a path/to/file.py) takes no "
                        "arguments and returns (fn, args), as for `measure --jax`")
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="models to evaluate (default: fitted learned roofline)")
    p.add_argument("--device", default="host", help="device the models price (default host: this machine)")
    p.add_argument("--repeats", type=int, default=None, help="runs in total (default 30)")
    p.add_argument("--discard", type=int, default=None, help="leading warm-up runs thrown away (default 4)")
    p.add_argument("--cold", action="store_true", help="measure with a cold allocator (page faults every run)")
    p.add_argument("--kernels", action="store_true", help="also print the per-kernel table")
    p.add_argument("--json", action="store_true", help="print JSON: {summary: [...], kernels: [...]}")


@command("evaluate", "measure a program on this machine and score cost models against it, per kernel",
         _evaluate_configure)
def _evaluate(args: argparse.Namespace) -> int:
    import json

    import pandas as pd

    from ..measure import MeasurementError
    from ..measure._cli import _load_target, _UsageError
    from ._evaluate import DEFAULT_EVALUATION_MODELS, evaluate

    try:
        fn, fargs = _load_target(args.jax)
    except _UsageError as exc:
        raise UsageError(str(exc)) from None
    try:
        result = evaluate(fn, *fargs, device=args.device, models=tuple(args.models or DEFAULT_EVALUATION_MODELS),
                          repeats=args.repeats, discard=args.discard, allocator="cold" if args.cold else None)
    except MeasurementError as exc:
        raise UsageError(f"{args.jax}: {exc}") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    summary = result.summary.reset_index()
    if args.json:
        print(json.dumps({"program": args.jax, "device": result.device,
                          "summary": json.loads(summary.to_json(orient="records")),
                          "kernels": json.loads(result.kernels.to_json(orient="records"))}, indent=1))
        return 0
    m = result.measurement
    print(f"{m.module.name}: {len(result.kernels)} kernels measured on {m.device} ({m.method.allocator} allocator, "
          f"minimum of {m.method.kept} runs), predicted on {result.device}; times per program run")
    shown = summary.copy()
    for col in ("predicted_total_s", "measured_total_s", "measured_wall_s"):
        shown[col.replace("_s", "_us")] = shown.pop(col) * 1e6
    with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
        print(shown.to_string(index=False))
        if args.kernels:
            k = result.kernels.copy()
            for col in [c for c in k.columns if c.endswith("_s")]:
                k[col[:-2] + "_us"] = k.pop(col) * 1e6
            print()
            print(k.to_string(index=False))
    return 0
