"""The command line of scale-out: `analyze FILE... --engine ... --out ... --resume`, and `measure --engine ray`.

The `analyze` and `measure` commands call in here for their many-sources
and fleet paths: `add_many_options` / `run_analyze_many`, and
`add_fleet_options` / `run_measure_fleet`.
"""

from __future__ import annotations

import argparse
import sys
import warnings

__all__ = ["add_fleet_options", "add_many_options", "run_analyze_many", "run_measure_fleet", "wants_many",
           "wants_fleet"]


def add_many_options(p: argparse.ArgumentParser) -> None:
    """The options of `analyze` with several files (the files are its positional arguments)."""
    g = p.add_argument_group("many files (any of these, or several files, runs one task per file)")
    g.add_argument("--engine", choices=("local", "ray"), default=None,
                   help="where the tasks run: local (default; a process pool on this machine) or ray")
    g.add_argument("--address", default=None, metavar="ADDR",
                   help="Ray cluster to use (auto, HOST:6379 or ray://HOST:10001); default: a local Ray instance")
    g.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes of the local pool or CPUs of a local Ray instance (default: all CPUs)")
    g.add_argument("--out", default=None, metavar="PATH.parquet",
                   help="write the rows (every column, a 'source' column first) here as files finish")
    g.add_argument("--resume", action="store_true", help="continue --out: skip the files already in it")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")


def wants_many(args: argparse.Namespace) -> bool:
    """Whether `analyze` was asked for the many-files path."""
    return (len(args.files) > 1 or args.engine is not None or args.out is not None or args.resume
            or args.address is not None or args.workers is not None)


def run_analyze_many(args: argparse.Namespace, device, model) -> int:
    """`analyze FILE...`: a per-file summary (or every row with --json/--csv); exit 1 when a file failed."""
    import pandas as pd

    from ..cli import UsageError, print_table
    from ..models._base import CostModelWarning
    from ._engines import RayUnavailableError
    from ._many import TaskFailedWarning, analyze_many
    from ._store import ResultFileError

    if args.resume and args.out is None:
        raise UsageError("--resume needs --out (the file to resume)")
    if args.address is not None and args.engine != "ray":
        raise UsageError("--address is for --engine ray")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CostModelWarning)
        warnings.simplefilter("ignore", TaskFailedWarning)  # reported below, one line per file
        try:
            table = analyze_many(args.files, device=device, model=model, unknown_trip_count=args.unknown_trip_count,
                                 engine=args.engine or "local", address=args.address, workers=args.workers,
                                 out=args.out, resume=args.resume, progress=not args.no_progress)
        except (FileNotFoundError, ResultFileError, RayUnavailableError) as exc:
            raise UsageError(str(exc)) from None
    df = pd.DataFrame(table)
    if args.json or args.csv:
        print_table(df, as_json=args.json, as_csv=args.csv)
    else:
        print_table(_per_source(df))
        print(f"\n{df['source'].nunique() if len(df) else 0} files, {len(df)} rows on {device.name} "
              f"({table.job['model']})" + (f"; written to {args.out}" if args.out else ""))
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    for row in table.failures.itertuples():
        print(f"error: {row.source}: {row.error}", file=sys.stderr)
    return 1 if len(table.failures) else 0


def _per_source(df):
    """One line per file: kernels (not free), unpriced kernels and the predicted total (seconds per run)."""
    import pandas as pd

    if not len(df):
        return pd.DataFrame(columns=["source", "kernels", "unpriced", "total_s"])
    kernels = df[df["bound"] != "free"]
    grouped = kernels.groupby("source", sort=False)
    out = pd.DataFrame({
        "kernels": grouped.size(),
        "unpriced": grouped["priced"].apply(lambda s: int((~s.astype(bool)).sum())),
        "total_s": grouped["total_s"].apply(lambda s: float(s.fillna(0.0).sum())),
    })
    order = list(dict.fromkeys(df["source"]))
    return out.reindex(order, fill_value=0).rename_axis("source").reset_index()


# --------------------------------------------------------------------------- measure --engine ray

#: Where a fleet run of the full suite appends by default, relative to the working directory.
DEFAULT_FLEET_DATASET = "calibration/fleet.parquet"


def add_fleet_options(p: argparse.ArgumentParser) -> None:
    """The options of `measure` that send it to a Ray cluster."""
    g = p.add_argument_group("fleet (measure on the devices of a Ray cluster)")
    g.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (default): measure this machine's device; ray: one task per --accelerator-type")
    g.add_argument("--accelerator-type", action="append", default=None, metavar="KIND", dest="accelerator_types",
                   help="with --engine ray: a GPU kind as Ray names it (H100, A100, A100-80G, ...), or host for "
                        "the CPU; repeat for several")
    g.add_argument("--address", default=None, metavar="ADDR",
                   help="with --engine ray: the cluster (auto, HOST:6379 or ray://HOST:10001); default: a local "
                        "Ray instance")


def wants_fleet(args: argparse.Namespace) -> bool:
    """Whether `measure` goes to Ray; raises `ValueError` for fleet options without `--engine ray`."""
    if args.engine == "ray":
        return True
    if args.accelerator_types or args.address:
        raise ValueError("--accelerator-type and --address need --engine ray")
    return False


def run_measure_fleet(args: argparse.Namespace) -> int:
    """`measure --engine ray`: returns 0, 1 when a task (or the dataset write) failed, 2 for bad usage."""
    import pandas as pd

    from ..measure import DatasetError
    from ._engines import RayUnavailableError
    from ._fleet import FleetDeviceWarning, measure_fleet
    from ._many import TaskFailedWarning

    def fail(message: str, status: int) -> int:
        print(f"xla-costmodel measure: error: {message}", file=sys.stderr)
        return status

    if not args.accelerator_types:
        return fail("--engine ray needs at least one --accelerator-type (e.g. H100, or host for the CPU)", 2)
    if args.no_save:
        out = None
    elif args.out:
        out = args.out
    else:
        out = None if (args.quick or args.jax) else DEFAULT_FLEET_DATASET
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FleetDeviceWarning)
        warnings.simplefilter("ignore", TaskFailedWarning)  # reported below, one line per task
        try:
            rows = measure_fleet(args.accelerator_types, quick=args.quick, only=args.only, repeats=args.repeats,
                                 discard=args.discard, rounds=args.rounds, jax_program=args.jax,
                                 address=args.address, out=out, progress=not args.no_progress)
        except (RayUnavailableError, ValueError) as exc:
            if isinstance(exc, DatasetError):
                return fail(str(exc), 1)
            return fail(str(exc), 2)
    if len(rows):
        table = rows.groupby(["requested_accelerator", "device", "node"], sort=False).agg(
            rows=("case", "size"), cases=("case", "nunique"), fastest_per_run_us=("min_per_run_s", lambda s: s.min() * 1e6))
        with pd.option_context("display.width", 160, "display.float_format", "{:.2f}".format):
            print(table.to_string())
        if out is not None:
            print(f"appended {len(rows)} rows to {out}")
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    for kind, error in rows.attrs["failures"].items():
        print(f"xla-costmodel measure: error: task {kind}: {error}", file=sys.stderr)
    return 1 if rows.attrs["failures"] else 0


# --------------------------------------------------------------------------- calibrate --dataset (several devices)


def add_calibrate_options(p: argparse.ArgumentParser) -> None:
    """The option of `calibrate` for datasets measured on several devices."""
    p.add_argument("--device-map", action="append", default=None, metavar="MEASURED=DEVICE",
                   help="with a dataset of several devices: the device (a registered name) of rows whose 'device' "
                        "or 'device_kind' is MEASURED, where no preset matches; repeatable")


def run_calibrate_devices(args: argparse.Namespace) -> int | None:
    """`calibrate --dataset` of rows measured on several devices: per device and across devices.

    **Returns:** the exit status, or None when the dataset is of one device
    (then `calibrate` goes its usual way).
    """
    from ..cli import UsageError, print_table
    from ..compare._calibrate import FITTABLE_MODELS
    from ..compare._data import load_rows, training_rows
    from ..compare._devices import calibrate_devices, dataset_devices
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
