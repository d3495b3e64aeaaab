"""`xla-costmodel analyze FILE... --device D --model M [--json|--csv]`: every kernel priced.

Several files (or `--engine`, `--out`, `--resume`) take the many-files path of
`xla_costmodel.scale`: one task per file, on a process pool or a Ray cluster.
"""

from __future__ import annotations

import argparse
import math

from xla_costmodel.cli import UsageError, _load, command, print_table, resolve_device_and_model

_TABLE_COLUMNS = ["kernel", "kind", "emitter", "executions", "flops", "bytes_accessed", "compute_s", "memory_s",
                  "time_s", "total_s", "bound", "coalesced", "note"]


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help="HLO text file(s)")
    p.add_argument("--device", default="h100-sxm", help="device name (see `xla_costmodel.devices.device_names()`; default h100-sxm)")
    p.add_argument("--model", default="xla-gpu", help="cost model (xla-gpu, roofline, or a plugin; default xla-gpu)")
    p.add_argument("--unknown-trip-count", type=int, default=1, metavar="N",
                   help="trip count assumed for while loops whose count is unknown (default 1)")
    p.add_argument("--all", action="store_true", help="also list free instructions (parameters, bitcasts, tuples, ...)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON records (every column)")
    fmt.add_argument("--csv", action="store_true", help="print CSV (every column)")
    from ..scale._cli import add_many_options

    add_many_options(p)


def _fmt_time(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "nan"
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(seconds) >= factor:
            return f"{seconds / factor:.4g} {unit}"
    return f"{seconds * 1e9:.4g} ns"


@command("analyze", "price every kernel of an HLO module (or of many, in parallel) with a cost model", _configure)
def _analyze(args: argparse.Namespace) -> int:
    import sys
    import warnings

    from ._analyze import analyze
    from ._base import CostModelWarning

    device, model = resolve_device_and_model(args)
    if args.unknown_trip_count < 0:
        raise UsageError("--unknown-trip-count must be >= 0")
    from ..scale._cli import run_analyze_many, wants_many

    if wants_many(args):
        return run_analyze_many(args, device, model)
    module = _load(args.files[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CostModelWarning)
        table = analyze(module, device=device, model=model, unknown_trip_count=args.unknown_trip_count)
    import pandas as pd

    df = pd.DataFrame(table)
    if args.json or args.csv:
        print_table(df, as_json=args.json, as_csv=args.csv)
        return 0
    shown = df if args.all else df[df["bound"] != "free"]
    shown = shown[_TABLE_COLUMNS].copy()
    for col in ("compute_s", "memory_s", "time_s", "total_s"):
        shown[col] = shown[col].map(_fmt_time)
    print_table(shown)
    s = table.summary()
    extra = f", {s['unpriced']} unpriced" if s["unpriced"] else ""
    assumed = f", {s['assumed_counts']} with assumed counts" if s["assumed_counts"] else ""
    print(f"\ntotal {_fmt_time(s['total_s'])} on {device.name} ({s['model']}): {s['kernels']} kernels{extra}{assumed}")
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------
def _granularity_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text file")
    p.add_argument("--kernel", required=True, help="the kernel's instruction name (as `analyze` lists it)")
    p.add_argument("--device", default="h100-sxm", help="GPU device name (default h100-sxm)")
    p.add_argument("--model", default="xla-gpu", help="cost model that prices launch configurations (default xla-gpu)")
    tiles = p.add_mutually_exclusive_group()
    tiles.add_argument("--tiled", action="store_true", help="tile the fusion as a Triton fusion would be")
    tiles.add_argument("--launch", action="store_true", help="vary launch dimensions even for a Triton fusion")
    p.add_argument("--json", action="store_true", help="print JSON records (every column)")


@command("granularity", "one kernel under every candidate launch configuration or tiling, priced", _granularity_configure)
def _granularity(args: argparse.Namespace) -> int:
    from ._granularity import GranularityError, granularity

    device, model = resolve_device_and_model(args)
    if device.kind != "gpu":
        raise UsageError(f"granularity prices GPU launch configurations; device {device.name!r} is a {device.kind}")
    module = _load(args.file)
    tiled = True if args.tiled else False if args.launch else None
    try:
        df = granularity(module, args.kernel, device=device, model=model, tiled=tiled)
    except GranularityError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print_table(df, as_json=True)
        return 0
    shown = df[["config", "blocks", "waves", "occupancy", "time_s", "bound", "xla_choice", "best"]].copy()
    shown["time_s"] = shown["time_s"].map(_fmt_time)
    shown["occupancy"] = shown["occupancy"].map(lambda v: f"{v:.0%}")
    print_table(shown)
    xla = df[df["xla_choice"]].iloc[0]
    best = df[df["best"]].iloc[0] if df["best"].any() else xla
    print(f"\n{df.attrs['kernel']} on {df.attrs['device']} ({df.attrs['model']}, {df.attrs['emitter']}): "
          f"XLA's choice {_fmt_time(xla['time_s'])}, best {_fmt_time(best['time_s'])} ({best['config']})")
    return 0
