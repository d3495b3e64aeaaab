"""`xla-costmodel compare` and `xla-costmodel calibrate` (one device, or each device of a fleet dataset)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ._common import UsageError, check_device, check_models, command, count, print_table, say_note

_SHOWN = ("model", "split", "source", "programs", "n", "unpriced", "sk_error", "ratio_error", "kendall_tau",
          "within_2x", "mape", "median_abs_log", "bias", "spearman", "fusion_n", "fusion_order_acc", "fusion_gain_ratio_error",
          "fusion_gain_tau")


def _compare_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="models to compare (default: fitted learned roofline-calibrated roofline; the GPU models "
                        "xla-gpu and xla-gpu-calibrated score a CPU's kernels only when named)")
    p.add_argument("--split", default="source",
                   help="source (default: fit on the suite, score each source of the corpus), source-cv (leave one "
                        "source out, the other sources' programs train too), program, program-cv (this project's "
                        "own programs), class, cv or none")
    p.add_argument("--dataset", nargs="+", default=None, metavar="PATH",
                   help="data to score: programs' kernels (kernel class program, or user: what `measure --jax "
                        "... --out` writes); default host_cpu_corpus.parquet, for program/program-cv "
                        "host_cpu_programs.parquet (yours, else the shipped one); the suite for class/cv")
    p.add_argument("--train", nargs="+", default=None, metavar="PATH",
                   help="training data (default host_cpu.parquet and the supplementary kernels of "
                        "host_cpu_programs.parquet: yours, else the shipped ones)")
    p.add_argument("--by-source", action="store_true",
                   help="one row per model and source of the scored programs, then each model over all of them")
    p.add_argument("--device", default="host", help="device (default host: the rows are priced with the description "
                   "of the machine that measured them where it is known, as for the shipped corpus, else this "
                   "machine's)")
    p.add_argument("--folds", type=int, default=5, help="folds of program-cv and cv (default 5, at least 2)")
    p.add_argument("--predictions", metavar="PATH", help="also write the per-kernel predictions (.csv or .parquet)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON records")
    g.add_argument("--csv", action="store_true", help="print CSV")


def _paths(values):
    if not values:
        return None
    return values[0] if len(values) == 1 else list(values)


@command("compare", "score cost models against measured kernel times on held-out data", _compare_configure)
def _compare(args: argparse.Namespace) -> int:
    from ..compare import DEFAULT_MODELS, SPLITS, compare_models
    from ..measure import DatasetError

    if args.split not in SPLITS:
        raise UsageError(f"unknown split {args.split!r}; splits: {', '.join(SPLITS)}")
    if args.folds < 2:
        raise UsageError(f"--folds must be at least 2, got {args.folds}")
    if args.predictions and Path(args.predictions).is_dir():
        raise UsageError(f"--predictions {args.predictions}: is a directory; give a .csv or .parquet file")
    check_models(args.models)
    check_device(args.device)
    try:
        table = compare_models(args.models or DEFAULT_MODELS, _paths(args.dataset), args.split,
                        train=_paths(args.train), device=args.device, folds=args.folds, progress=not args.no_progress)
    except (DatasetError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # a dataset with nothing to score, a split without groups, a bad name
        raise UsageError(str(exc).splitlines()[0]) from None
    for note in getattr(table, "notes", ()):
        say_note(note)
    if not table["n"].fillna(0).astype(int).any():
        raise UsageError("no kernel was scored: the data has no kernel every model could price")
    if args.predictions:
        from .._atomic import write_atomically

        pred = table.predictions
        if args.predictions.endswith(".parquet"):
            import io

            buffer = io.BytesIO()
            pred.to_parquet(buffer, index=False)
            write_atomically(args.predictions, buffer.getvalue())
        else:
            write_atomically(args.predictions, pred.to_csv(index=False))
    if args.by_source:
        import pandas as pd

        overall = pd.DataFrame(table).assign(source="all", programs=table.by_source.groupby("model")["programs"].sum()
                                              .reindex(table["model"]).to_numpy())
        table = pd.concat([table.by_source.assign(split=table.split_name), overall], ignore_index=True)
    from ..compare.scoring import shown_columns

    # The fusion-decision columns only where the data has fused/unfused pairs (else they are all NaN).
    shown = shown_columns(table[[c for c in _SHOWN if c in table.columns]].copy())
    if not (args.json or args.csv):
        shown = shown.round(3)
    print_table(shown, as_json=args.json, as_csv=args.csv)
    return 0


def _calibrate_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None, help="device to calibrate (default host): this machine when the suite "
                   "is run here, else the device --dataset was measured on (a --dataset of several devices is "
                   "fitted per device and across devices)")
    p.add_argument("--quick", action="store_true", help="run the quick suite (with no --dataset): a smoke test, "
                   "saved in the quick/ folder of your data directory, which no model reads unless asked")
    p.add_argument("--dataset", nargs="+", default=None, metavar="PATH",
                   help="fit to these measurements instead of running the suite")
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="models to fit (default: fitted learned roofline-calibrated xla-gpu-calibrated)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="where to write (default: your data directory, $XLA_COSTMODEL_DATA_DIR or "
                        "~/.local/share/xla_costmodel on Linux, where a calibration that scores worse on its "
                        "held-out rows than the one in use goes to held-back/ instead; the shipped calibration/ "
                        "is only read)")
    p.add_argument("--weights", action="store_true", help="also print the fitted model's weights table")
    p.add_argument("--device-map", action="append", default=None, metavar="MEASURED=DEVICE",
                   help="with a dataset of several devices: the device (a registered name) of rows whose 'device' "
                        "or 'device_kind' is MEASURED, where no preset matches; repeatable")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON records")
    g.add_argument("--csv", action="store_true", help="print CSV")


@command("calibrate", "fit the fitted, learned and calibrated models to measurements and save them", _calibrate_configure)
def _calibrate(args: argparse.Namespace) -> int:
    from ..fit import FITTABLE_MODELS, calibrate
    from ..datasets import DATA_DIR_ENV
    from ..measure import DatasetError

    if args.models:
        unknown = [m for m in args.models if m not in FITTABLE_MODELS]
        if unknown:
            raise UsageError(f"cannot calibrate {', '.join(unknown)}; fittable models: {', '.join(FITTABLE_MODELS)}")
    if args.quick and args.dataset:
        raise UsageError("--quick runs the suite; with --dataset nothing is measured")
    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        raise UsageError(f"--out {args.out}: is a file; give a directory for the calibrations")
    status = _calibrate_devices(args)
    if status is not None:
        return status
    args.device = args.device or "host"
    check_device(args.device)
    try:
        result = calibrate(args.device, quick=args.quick, dataset=_paths(args.dataset),
                           models=tuple(args.models or FITTABLE_MODELS), out_dir=args.out, progress=True)
    except (DatasetError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # DeviceMismatchError, too few rows, a dataset of several devices
        raise UsageError(str(exc).splitlines()[0]) from None
    if args.json or args.csv:
        print_table(result, as_json=args.json, as_csv=args.csv)
    else:
        from ..plot import readable

        shown = result.drop(columns=[c for c in ("file", "in_use_file") if c in result])
        shown = readable(shown, unit="s", digits=4)  # counts as integers, 4 significant digits
        print_table(shown.astype(object).where(shown.notna(), ""))  # nothing where a row has no such figure
        print()
        for folder, files in result.groupby(result["file"].map(lambda f: str(Path(f).parent)), sort=False):
            models = ", ".join(files["model"])
            used = "read by no model unless asked" if _unused_folder(Path(folder)) else "in use"
            print(f"wrote {count(len(files), 'calibration')} to {folder} ({used}): {models}")
    if args.weights and "fitted" in set(result["model"]):
        import os

        from ..fit import FittedModel

        # Read back what was just written (wherever it went), not an older one.
        os.environ[DATA_DIR_ENV] = str(Path(result.loc[result["model"] == "fitted", "file"].iloc[0]).parent)
        table = FittedModel.from_calibration(args.device).weights_table()
        print(file=sys.stdout)
        print_table(table, as_json=args.json, as_csv=args.csv)
    return 0


def _unused_folder(folder: Path) -> bool:
    """Whether `folder` is one of the data directory's folders that no model reads unless asked."""
    from ..fit import held_back_dir, quick_dir

    return any(folder.resolve() == d.resolve() for d in (quick_dir(), held_back_dir()))


def _calibrate_devices(args: argparse.Namespace) -> int | None:
    """`calibrate --dataset` of rows measured on several devices: per device and across devices.

    **Returns:** the exit status, or None when the dataset is of one device
    (then `calibrate` goes its usual way).
    """
    from ..fit import FITTABLE_MODELS
    from ..datasets import load_rows, training_rows
    from ..fit.calibration import calibrate_devices
    from ..datasets import dataset_devices
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
        if args.device is None and measured_on:
            args.device = _device_of_rows(rows, measured_on[0])
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


def _device_of_rows(rows, measured: str) -> str | None:
    """The device a one-device dataset was measured on (a GPU preset by jax's device kind, `host` for this
    CPU), or None to leave the default (`calibrate` then says what does not match)."""
    from ..fit.calibration import device_for_rows

    kinds = rows.loc[rows["device"].astype(str) == measured, "device_kind"] if "device_kind" in rows else []
    try:
        return device_for_rows(measured, str(kinds.iloc[0]) if len(kinds) else "").name
    except ValueError:
        return None
