"""`xla-costmodel analyze FILE... --device D --model M [--json|--csv]`: every kernel priced.

Several files (or `--engine`, `--out`, `--resume`) take the many-files path of
`xla_costmodel.scale`: one task per file, on a process pool or a Ray cluster.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from ..models import DEFAULT_DEVICE, DEFAULT_MODEL
from ._common import (DEFAULT_TOP, UsageError, command, count, format_seconds, json_records, load_module,
                      print_kernels, print_table, report_warnings, resolve_device_and_model, say_note, fusions_in)

_TABLE_COLUMNS = ["kernel", "kind", "emitter", "executions", "flops", "bytes_accessed", "compute_s", "memory_s",
                  "time_s", "total_s", "bound", "coalesced", "note"]


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", metavar="FILE", help="HLO text file(s)")
    p.add_argument("--jax", metavar="FILE:FACTORY", default=None,
                   help="instead of FILEs, a jax program: FACTORY (in an importable module, or a path/to/file.py) "
                        "takes no arguments and returns (fn, args); on a GPU preset its kernels are XLA:GPU's own "
                        "where jax's CUDA plugin is installed, else XLA:GPU's fusion simulated")
    p.add_argument("--device", default=DEFAULT_DEVICE,
                   help=f"device name (see `xla_costmodel.devices.device_names()`; default {DEFAULT_DEVICE})")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"cost model (xla-gpu, roofline, or a plugin; default {DEFAULT_MODEL})")
    p.add_argument("--unknown-trip-count", type=int, default=1, metavar="N",
                   help="trip count assumed for while loops whose count is unknown (default 1)")
    p.add_argument("--all", action="store_true", help="list every row: every kernel, and the free instructions "
                   "(parameters, bitcasts, tuples, ...)")
    p.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
                   help=f"the table shows the N slowest kernels, per run (default {DEFAULT_TOP}; 0: all)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true",
                     help="print a JSON object: module, device, model, totals (with units) and the kernels "
                          "(every column; free instructions with --all); for several files, every row")
    fmt.add_argument("--csv", action="store_true",
                     help="print CSV (every column; the kernels, and free instructions with --all)")
    _many_options(p)


@command("analyze", "price every kernel of an HLO module (or of many, in parallel) with a cost model", _configure)
def _analyze(args: argparse.Namespace) -> int:
    from ..front import analyze
    from ..models import CostModelWarning

    device, model = resolve_device_and_model(args)
    if args.unknown_trip_count < 0:
        raise UsageError("--unknown-trip-count must be >= 0")
    if args.top < 0:  # (before any work: a warning on the module must not come before the refusal)
        raise UsageError(f"--top must be 0 (all) or more, got {args.top}")
    if (not args.files) == (args.jax is None):
        raise UsageError("give HLO FILE(s) or --jax FILE:FACTORY")
    if args.jax is not None and _wants_many(args):
        raise UsageError("--jax prices one program; --engine, --address, --workers, --out and --resume are for "
                         "many HLO files")
    if _wants_many(args):
        return _analyze_many(args, device, model)
    if args.jax is not None:
        from ._measure import load_target

        fn, fargs = load_target(args.jax)
        source, module = (fn, *fargs), None
    else:
        module = load_module(args.files[0])
        source = (module,)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CostModelWarning)
        table = analyze(*source, device=device, model=model, unknown_trip_count=args.unknown_trip_count)
    import pandas as pd

    df = pd.DataFrame(table)
    s = table.summary()
    report_warnings(caught)
    _say_calibration(getattr(model, "name", ""), device)
    if args.jax is not None:
        say_note(f"priced: {table.priced_module}")
    elif device.kind == "gpu" and s.kernels >= 2 and fusions_in(module) == 0:
        say_note(f"{args.files[0]} has no fusions (a module as lowered, before XLA's passes): each of its "
                 f"{count(s.kernels, 'op')} is priced as a kernel of its own; `xla-costmodel fuse "
                 f"{args.files[0]} --device {device.name} -o FUSED.hlo` simulates XLA:GPU's fusion first")
    if args.json:
        print(_json_report(df if args.all else df[df["bound"] != "free"], s))
        return 0
    shown = df if args.all else df[df["bound"] != "free"]
    if args.csv:
        print_table(shown, as_csv=True)
        return 0
    left_out = print_kernels(shown, _TABLE_COLUMNS, top=None if args.all else args.top)
    print("\n(compute_us, memory_us, time_us: µs per launch; total_us: µs per run, time_us × executions)"
          + (f"; {left_out}" if left_out else ""))
    extra = f", {s.unpriced} unpriced" if s.unpriced else ""
    assumed = f", {s.assumed_counts} with assumed counts" if s.assumed_counts else ""
    print(f"\ntotal {format_seconds(s.total_s)} per run on {device.name} ({s.model}): "
          f"{count(s.kernels, 'kernel')}{extra}{assumed}")
    if s.textbook_counts:
        say_note(f"the counts of {', '.join(s.textbook_counts)} are textbook counts: XLA's cost analysis has none "
                 f"(-1, or 0 for top-k), which Compiled.cost_analysis() adds as such; each row's note gives XLA's "
                 f"figures")
    return 0


def _say_calibration(name: str, device) -> None:
    """A note naming the saved calibration a calibrated model priced with: the user's or the shipped one."""
    from ..fit import FITTABLE_MODELS, calibration_in_use

    if name in FITTABLE_MODELS:
        path, whose = calibration_in_use(name, device)
        if path is not None:
            say_note(f"{name} priced with {'your' if whose == 'yours' else 'the shipped'} calibration {path}")


def _json_report(rows, summary) -> str:
    """`analyze --json`: what was priced, the totals with their units, and one record per kernel.

    `time_s` and the other `*_s` columns of a kernel are seconds per launch;
    `total_s` is seconds per run of the module (`time_s × executions`).
    """
    import json

    totals = summary.to_dict()
    report = {
        "module": totals.pop("module"),
        "device": totals.pop("device"),
        "model": totals.pop("model"),
        "totals": {
            "time_per_run_s": totals["total_s"],
            "kernels": totals["kernels"],
            "unpriced_kernels": totals["unpriced"],
            "free_instructions": totals["free"],
            "kernels_with_assumed_counts": totals["assumed_counts"],
            "time_per_run_by_bound_s": totals["time_by_bound_s"],
            "kernels_with_textbook_counts": totals["textbook_counts"],
        },
        "units": {"time_s": "seconds per launch", "compute_s": "seconds per launch",
                  "memory_s": "seconds per launch", "launch_s": "seconds per launch",
                  "total_s": "seconds per run (time_s × executions)", "bytes_accessed": "bytes per launch",
                  "flops": "floating-point operations per launch", "intensity": "flops per byte"},
        "kernels": json_records(rows),
    }
    return json.dumps(report, indent=1)


# --------------------------------------------------------------------------- analyze FILE... (xla_costmodel.scale)


def _many_options(p: argparse.ArgumentParser) -> None:
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


def _wants_many(args: argparse.Namespace) -> bool:
    """Whether `analyze` was asked for the many-files path."""
    return (len(args.files) > 1 or args.engine is not None or args.out is not None or args.resume
            or args.address is not None or args.workers is not None)


def _analyze_many(args: argparse.Namespace, device, model) -> int:
    """`analyze FILE...`: a per-file summary (or every row with --json/--csv); exit 1 when a file failed."""
    import pandas as pd

    from ..models import CostModelWarning
    from ..scale import RayUnavailableError, ResultFileError, TaskFailedWarning, analyze_many

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
        from ..plot import readable

        # (as every table people read: times in µs, the unit in the column name; --json/--csv keep seconds)
        print_table(readable(_per_source(df), unit="us", digits=4))
        print(f"\n{count(df['source'].nunique() if len(df) else 0, 'file')}, {count(len(df), 'row')} on {device.name} "
              f"({table.job['model']})" + (f"; written to {args.out}" if args.out else ""))
    report_warnings(caught, unit="file")
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
