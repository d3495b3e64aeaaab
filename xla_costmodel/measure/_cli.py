"""`xla-costmodel measure`: run the measurement suite, or measure one user program."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import warnings
from pathlib import Path

__all__ = ["cli_measure", "build_parser", "DEFAULT_DATASET"]

#: Where the suite appends by default, relative to the working directory;
#: `{backend}` is filled in (`cpu`, `gpu`, ...).
DEFAULT_DATASET = "calibration/host_{backend}.parquet"


def build_parser(prog: str = "xla-costmodel measure") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Measure kernel run times from jax.profiler traces. Without --jax, run the "
            "measurement suite (performance-instructive kernels over size sweeps) and append "
            "the results to a calibration dataset."
        ),
    )
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
    p.add_argument(
        "--rounds",
        type=int,
        help="suite passes whose samples are pooled per case (default: 2, quick 1)",
    )
    p.add_argument(
        "--out",
        metavar="PATH",
        help=f"dataset to append to (.parquet, .csv or .csv.gz). Default for the full suite: "
        f"{DEFAULT_DATASET}; --quick and --jax write only when --out is given",
    )
    p.add_argument("--no-save", action="store_true", help="print the results, write nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    from ..scale._cli import add_fleet_options

    add_fleet_options(p)
    return p


def cli_measure(argv: list[str] | None = None) -> int:
    """Entry point of `xla-costmodel measure`.

    **Arguments:**

    - `argv`: the arguments after `measure` (None: `sys.argv[1:]`).

    **Returns:** the exit status: 0 on success, 1 when the measurement or the
    dataset write fails (the message goes to stderr), 2 for bad usage.
    """
    args = build_parser().parse_args(argv)
    from ..scale._cli import run_measure_fleet, wants_fleet

    try:
        fleet = wants_fleet(args)
    except ValueError as e:
        print(f"xla-costmodel measure: error: {e}", file=sys.stderr)
        return 2
    if fleet:
        return run_measure_fleet(args)
    _gpu_flags_early()
    from ._allocator import set_allocator

    # Before jax starts its threads, so that they share the allocator's main arena.
    set_allocator("cold" if args.cold else "steady")
    from ._dataset import DatasetError
    from ._measure import MeasurementError
    from ._trace import TraceError

    try:
        if args.jax:
            return _measure_user(args)
        return _run_suite(args)
    except (DatasetError, MeasurementError, TraceError, _UsageError) as e:
        print(f"xla-costmodel measure: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, _UsageError) else 1


class _UsageError(ValueError):
    pass


def _gpu_flags_early() -> None:
    """Turn GPU command buffers off if no jax backend has started yet (harmless on CPU)."""
    from ._measure import disable_gpu_command_buffers

    try:
        disable_gpu_command_buffers()
    except RuntimeError:
        pass  # too late; measure_program warns if this is a GPU run


def _out_path(args, backend: str, default_on: bool) -> Path | None:
    if args.no_save:
        return None
    if args.out:
        return Path(args.out)
    return Path(DEFAULT_DATASET.format(backend=backend)) if default_on else None


def _run_suite(args) -> int:
    import pandas as pd

    from ._dataset import append_dataset
    from ._measure import device_description
    from ._suite import run_suite

    out = _out_path(args, device_description()["backend"], default_on=not args.quick)
    if args.cold:
        raise _UsageError("--cold is for --jax programs; the suite is always timed with the steady allocator")
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
        raise _UsageError(str(e)) from e
    main = df[df["is_main"]]
    summary = main.groupby("kernel_class").agg(
        cases=("case", "size"),
        fastest_per_launch_us=("min_per_launch_s", lambda s: s.min() * 1e6),
        slowest_per_launch_us=("min_per_launch_s", lambda s: s.max() * 1e6),
    )
    with pd.option_context("display.width", 120, "display.float_format", "{:.2f}".format):
        print(summary.to_string())
    print(
        f"\n{len(main)} cases, {len(df)} kernels measured in {df.attrs['elapsed_s']:.1f} s "
        f"({df.attrs['mode']}: {df.attrs['rounds']} round(s) of {df.attrs['repeats']} runs, first "
        f"{df.attrs['discard']} of each discarded, minimum kept)"
    )
    overhead = df.attrs.get("launch_overhead_s")
    if overhead == overhead:  # not NaN
        print(f"launch overhead (empty kernel): {overhead * 1e6:.2f} µs")
    if df.attrs.get("below_overhead"):
        print(f"warning: within 3x of the launch overhead: {', '.join(df.attrs['below_overhead'])}", file=sys.stderr)
    if out is not None:
        total = append_dataset(df, out)
        print(f"appended {len(df)} rows to {out} ({total} rows now)")
    return 0


def _load_target(spec: str):
    if ":" not in spec:
        raise _UsageError(f"--jax expects MODULE:FUNCTION, got {spec!r}")
    mod_name, _, func_name = spec.rpartition(":")
    try:
        if mod_name.endswith(".py") or "/" in mod_name:
            path = Path(mod_name)
            if not path.is_file():
                raise _UsageError(f"--jax {spec}: no such file {path}")
            spec_ = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec_)
            spec_.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except ImportError as e:
        raise _UsageError(f"--jax {spec}: cannot import {mod_name!r} ({e})") from e
    target = module
    for part in func_name.split("."):
        if not hasattr(target, part):
            raise _UsageError(f"--jax {spec}: {mod_name!r} has no attribute {func_name!r}")
        target = getattr(target, part)
    if not callable(target):
        raise _UsageError(f"--jax {spec}: {func_name!r} is not callable")
    built = target()
    if not (isinstance(built, tuple) and len(built) == 2 and callable(built[0]) and isinstance(built[1], (tuple, list))):
        raise _UsageError(
            f"--jax {spec}: {func_name}() must return (fn, args): a function and a tuple of example "
            f"arguments, got {type(built).__name__}"
        )
    return built[0], tuple(built[1])


def per_kernel_table(kernels):
    """The printed form of `measure()`'s kernels: times in microseconds, per run and per launch."""
    table = kernels[["hlo_op", "opcode", "n", "launches"]].copy()
    table["min_per_run_us"] = kernels["min_per_run_s"] * 1e6
    table["median_per_run_us"] = kernels["median_per_run_s"] * 1e6
    table["min_per_launch_us"] = kernels["min_per_launch_s"] * 1e6
    return table


def _measure_user(args) -> int:
    import pandas as pd

    from ._dataset import append_dataset
    from ._measure import measure_program
    from ._suite import FULL, QUICK, measurement_rows

    mode = QUICK if args.quick else FULL
    fn, fargs = _load_target(args.jax)
    repeats = args.repeats if args.repeats is not None else mode.repeats
    discard = args.discard if args.discard is not None else mode.discard
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        try:
            m = measure_program(fn, *fargs, repeats=repeats, discard=discard,
                                allocator="cold" if args.cold else "steady")
        except ValueError as e:
            if "repeats" in str(e):
                raise _UsageError(str(e)) from e
            raise
    table = per_kernel_table(m.kernels)
    kept = m.runs[m.runs["kept"]]
    with pd.option_context("display.width", 160, "display.max_rows", 500, "display.float_format", "{:.2f}".format):
        print(f"{m.module.name} on {m.device}: {len(table)} kernels, {len(kept)} runs kept of {len(m.runs)} "
              f"({m.method.allocator} allocator, minimum over kept runs)")
        print(table.to_string(index=False))
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
        print(f"appended {len(rows)} rows to {out} ({total} rows now)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(cli_measure())
