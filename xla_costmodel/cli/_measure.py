"""`xla-costmodel measure`: run the measurement suite, or measure one user program."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ._common import UsageError, command, count, load_user_program, report_warnings, say_note

__all__ = ["DEFAULT_DATASET", "DEFAULT_FLEET_DATASET", "load_target", "per_kernel_table"]

#: Where the suite appends by default, in the user's data directory (`datasets.user_data_dir()`);
#: `{backend}` is filled in (`cpu`, `gpu`, ...).
DEFAULT_DATASET = "host_{backend}.parquet"
#: Where a fleet run of the full suite appends by default, in the user's data directory.
DEFAULT_FLEET_DATASET = "fleet.parquet"


def _in_data_dir(name: str) -> Path:
    from ..fit import user_data_dir

    return user_data_dir() / name


_DESCRIPTION = (
    "Measure kernel run times from jax.profiler traces. Without --jax, run the "
    "measurement suite (performance-instructive kernels over size sweeps) and append "
    "the results to a calibration dataset."
)


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--jax",
        metavar="MODULE:FUNCTION",
        help="measure a user's program instead of the suite: FUNCTION (in an importable module, "
        "or a path/to/file.py) takes no arguments and returns (fn, args)",
    )
    p.add_argument("--quick", action="store_true", help="the short suite (about 1 size per kernel, fewer runs)")
    p.add_argument(
        "--only",
        nargs="+",
        metavar="PATTERN",
        help="suite kernels or classes to run, as glob patterns (e.g. 'ew_*' matmul)",
    )
    p.add_argument(
        "--cold",
        action="store_true",
        help="time with a cold allocator: large buffers mapped afresh every run, so kernels pay their page "
        "faults (default: the steady allocator that calibration assumes)",
    )
    p.add_argument("--repeats", type=int, help="runs per program in total (default: 30, quick 12)")
    p.add_argument("--discard", type=int, help="leading warm-up runs thrown away (default: 4, quick 2)")
    p.add_argument("--budget", type=float, metavar="SECONDS",
                   help="with --jax: seconds the measurement may take; no run starts after that, but at least "
                        "--discard plus 5 runs are taken (the runs taken are recorded)")
    p.add_argument(
        "--rounds",
        type=int,
        help="suite passes whose samples are pooled per case (default: 2, quick 1)",
    )
    p.add_argument(
        "--out",
        metavar="PATH",
        help=f"dataset to append to (.parquet, .csv or .csv.gz). Default for the full suite: "
        f"{DEFAULT_DATASET} in your data directory ($XLA_COSTMODEL_DATA_DIR, or ~/.local/share/xla_costmodel "
        f"on Linux); --quick and --jax write only when --out is given",
    )
    p.add_argument("--no-save", action="store_true", help="print the results, write nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _fleet_options(p)


@command("measure", "measure kernel times: the measurement suite, or --jax MODULE:FUNCTION", _configure,
         description=_DESCRIPTION)
def _measure(args: argparse.Namespace) -> int:
    """`xla-costmodel measure`: exit status 0 on success, 1 when the measurement or the dataset
    write fails (the message goes to stderr), 2 for bad usage (`UsageError`)."""
    _check_numbers(args)
    if _wants_fleet(args):
        return _measure_fleet(args)
    _gpu_flags_early()
    from ..measure import DatasetError, MeasurementError, TraceError, set_allocator

    # Before jax starts its threads, so that they share the allocator's main arena.
    set_allocator("cold" if args.cold else "steady")

    try:
        if args.jax:
            return _measure_user(args)
        return _run_suite(args)
    except (DatasetError, MeasurementError, TraceError) as e:
        print(f"xla-costmodel measure: error: {e}", file=sys.stderr)
        return 1


def _check_numbers(args: argparse.Namespace) -> None:
    """`UsageError` for counts and budgets that cannot be (before anything is loaded or measured)."""
    if args.repeats is not None and args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if args.discard is not None and args.discard < 0:
        raise UsageError(f"--discard must be 0 or more, got {args.discard}")
    if args.repeats is not None and args.discard is not None and args.discard >= args.repeats:
        raise UsageError(f"--discard ({args.discard}) must be less than --repeats ({args.repeats})")
    if args.rounds is not None and args.rounds < 1:
        raise UsageError(f"--rounds must be at least 1, got {args.rounds}")
    if args.budget is not None:
        if not args.budget > 0:
            raise UsageError(f"--budget must be a positive number of seconds, got {args.budget}")
        if not args.jax:
            raise UsageError("--budget is for --jax programs (the suite's length is set by --quick and --only)")
    if args.out is not None and Path(args.out).is_dir():
        raise UsageError(f"--out {args.out}: is a directory; give a dataset file (.parquet, .csv or .csv.gz)")


def _gpu_flags_early() -> None:
    """Turn GPU command buffers off if no jax backend has started yet (harmless on CPU)."""
    from ..measure import disable_gpu_command_buffers

    try:
        disable_gpu_command_buffers()
    except RuntimeError:
        pass  # too late; measure_program warns if this is a GPU run


def _out_path(args, backend: str, default_on: bool) -> Path | None:
    if args.no_save:
        return None
    if args.out:
        return Path(args.out)
    return _in_data_dir(DEFAULT_DATASET.format(backend=backend)) if default_on else None


def _run_suite(args) -> int:
    import pandas as pd

    from ..measure import append_dataset, device_description, run_suite

    out = _out_path(args, device_description()["backend"], default_on=not args.quick)
    if args.cold:
        raise UsageError("--cold is for --jax programs; the suite is always timed with the steady allocator")
    try:
        df = run_suite(
            quick=args.quick,
            only=args.only,
            repeats=args.repeats,
            discard=args.discard,
            rounds=args.rounds,
            progress=not args.no_progress,
        )
    except ValueError as e:
        raise UsageError(str(e)) from e
    main = df[df["is_main"]]
    summary = main.groupby("kernel_class").agg(
        cases=("case", "size"),
        fastest_per_launch_us=("min_per_launch_s", lambda s: s.min() * 1e6),
        slowest_per_launch_us=("min_per_launch_s", lambda s: s.max() * 1e6),
    )
    with pd.option_context("display.width", 120, "display.float_format", "{:.2f}".format):
        print(summary.to_string())
    print(
        f"\n{count(len(main), 'case')}, {count(len(df), 'kernel')} measured in {df.attrs['elapsed_s']:.1f} s "
        f"({df.attrs['mode']}: {count(df.attrs['rounds'], 'round')} of {count(df.attrs['repeats'], 'run')}, first "
        f"{df.attrs['discard']} of each discarded, minimum kept)"
    )
    overhead = df.attrs.get("launch_overhead_s")
    if overhead == overhead:  # not NaN
        print(f"launch overhead (empty kernel): {overhead * 1e6:.2f} µs")
    if df.attrs.get("below_overhead"):
        print(f"warning: within 3x of the launch overhead: {', '.join(df.attrs['below_overhead'])}", file=sys.stderr)
    if out is not None:
        total = append_dataset(df, out)
        print(f"appended {count(len(df), 'row')} to {out} ({count(total, 'row')} now)")
    elif not args.no_save:  # (the full suite saves by default: say why this run did not)
        say_note("nothing saved: --quick writes its rows only with --out PATH")
    return 0


def load_target(spec: str):
    """`(fn, args)` of `--jax MODULE:FUNCTION`, checked by `load_user_program`; `UsageError` when it cannot
    be loaded, or jax cannot trace or lower it."""
    fn, fargs, _lowered = load_user_program(spec)
    return fn, fargs


def per_kernel_table(kernels):
    """The printed form of `measure_kernels()`'s kernels: times in microseconds, per run and per launch."""
    table = kernels[["hlo_op", "opcode", "n", "launches"]].copy()
    table["min_per_run_us"] = kernels["min_per_run_s"] * 1e6
    table["median_per_run_us"] = kernels["median_per_run_s"] * 1e6
    table["min_per_launch_us"] = kernels["min_per_launch_s"] * 1e6
    return table


def _measure_user(args) -> int:
    import pandas as pd

    from ..measure import append_dataset, measure_program, measurement_rows
    from ..measure.programs import FULL, QUICK

    mode = QUICK if args.quick else FULL
    fn, fargs = load_target(args.jax)
    repeats = args.repeats if args.repeats is not None else mode.repeats
    discard = args.discard if args.discard is not None else mode.discard
    try:
        m = measure_program(fn, *fargs, repeats=repeats, discard=discard,
                            allocator="cold" if args.cold else "steady", budget_s=args.budget,
                            progress=not args.no_progress)
    except ValueError as e:
        if "repeats" in str(e) or "discard" in str(e):
            raise UsageError(str(e)) from e
        raise
    table = per_kernel_table(m.kernels)
    kept = m.runs[m.runs["kept"]]
    with pd.option_context("display.width", 160, "display.max_rows", 500, "display.float_format", "{:.2f}".format):
        print(f"{m.module.name} on {m.device}: {count(len(table), 'kernel')}, {len(kept)} of "
              f"{count(len(m.runs), 'run')} kept ({m.method.allocator} allocator, minimum over kept runs)")
        if m.kernels.attrs.get("stopped_by_budget"):
            print(f"stopped after {len(m.runs)} of {m.kernels.attrs['repeats_requested']} runs: the budget of "
                  f"{args.budget:g} s was spent")
        print(table.to_string(index=False))
        if len(m.control_flow):
            print("loops and branches (not kernels: each one's time includes the kernels of its body above):")
            print(per_kernel_table(m.control_flow).to_string(index=False))
    print(
        f"wall time per run: min {kept['wall_s'].min() * 1e6:.1f} µs; "
        f"kernels add up to {kept['kernel_sum_s'].min() * 1e6:.1f} µs (min over runs)"
    )
    if m.missing:
        print(f"warning: expected kernels not seen in the trace: {', '.join(m.missing)}", file=sys.stderr)
    out = _out_path(args, m.backend, default_on=False)
    if out is not None:
        name = args.jax.rpartition(":")[2]
        rows = pd.DataFrame(measurement_rows(m, case=args.jax, kernel=name, program=name))
        total = append_dataset(rows, out)
        print(f"appended {count(len(rows), 'row')} to {out} ({count(total, 'row')} now)")
    elif not args.no_save:
        say_note("nothing saved: --jax writes its rows only with --out PATH")
    return 0


# --------------------------------------------------------------------------- measure --engine ray


def _fleet_options(p: argparse.ArgumentParser) -> None:
    """The options that send `measure` to a Ray cluster (`xla_costmodel.scale.measure_fleet`)."""
    g = p.add_argument_group("fleet (measure on the devices of a Ray cluster)")
    g.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="local (default): measure this machine's device; ray: one task per --accelerator-type")
    g.add_argument("--accelerator-type", action="append", default=None, metavar="KIND", dest="accelerator_types",
                   help="with --engine ray: a GPU kind as Ray names it (H100, A100, A100-80G, ...), or host for "
                        "the CPU; repeat for several")
    g.add_argument("--address", default=None, metavar="ADDR",
                   help="with --engine ray: the cluster (auto, HOST:6379 or ray://HOST:10001); default: a local "
                        "Ray instance")


def _wants_fleet(args: argparse.Namespace) -> bool:
    """Whether `measure` goes to Ray; `UsageError` for fleet options without `--engine ray`."""
    if args.engine == "ray":
        return True
    if args.accelerator_types or args.address:
        raise UsageError("--accelerator-type and --address need --engine ray")
    return False


def _measure_fleet(args: argparse.Namespace) -> int:
    """`measure --engine ray`: returns 0, or 1 when a task (or the dataset write) failed; `UsageError` for bad usage."""
    import pandas as pd

    from ..measure import DatasetError
    from ..scale import FleetDeviceWarning, RayUnavailableError, TaskFailedWarning, measure_fleet

    if not args.accelerator_types:
        raise UsageError("--engine ray needs at least one --accelerator-type (e.g. H100, or host for the CPU)")
    if args.no_save:
        out = None
    elif args.out:
        out = args.out
    else:
        out = None if (args.quick or args.jax) else str(_in_data_dir(DEFAULT_FLEET_DATASET))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FleetDeviceWarning)
        warnings.simplefilter("ignore", TaskFailedWarning)  # reported below, one line per task
        try:
            rows = measure_fleet(args.accelerator_types, quick=args.quick, only=args.only, repeats=args.repeats,
                                 discard=args.discard, rounds=args.rounds, jax_program=args.jax,
                                 address=args.address, out=out, progress=not args.no_progress)
        except DatasetError as exc:
            print(f"xla-costmodel measure: error: {exc}", file=sys.stderr)
            return 1
        except (RayUnavailableError, ValueError) as exc:
            raise UsageError(str(exc)) from None
    if len(rows):
        table = rows.groupby(["requested_accelerator", "device", "node"], sort=False).agg(
            rows=("case", "size"), cases=("case", "nunique"), fastest_per_run_us=("min_per_run_s", lambda s: s.min() * 1e6))
        with pd.option_context("display.width", 160, "display.float_format", "{:.2f}".format):
            print(table.to_string())
        if out is not None:
            print(f"appended {count(len(rows), 'row')} to {out}")
    report_warnings(caught)
    for kind, error in rows.attrs["failures"].items():
        print(f"xla-costmodel measure: error: task {kind}: {error}", file=sys.stderr)
    return 1 if rows.attrs["failures"] else 0
