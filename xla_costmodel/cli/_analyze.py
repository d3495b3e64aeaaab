"""`xla-costmodel analyze FILE --device D --model M [--json|--csv]`: every kernel priced."""

from __future__ import annotations

import argparse
import math

from ..models._resolve import DEFAULT_DEVICE, DEFAULT_MODEL
from ._common import UsageError, command, load_module, print_table, resolve_device_and_model

_TABLE_COLUMNS = ["kernel", "kind", "emitter", "executions", "flops", "bytes_accessed", "compute_s", "memory_s",
                  "time_s", "total_s", "bound", "coalesced", "note"]


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text file")
    p.add_argument("--device", default=DEFAULT_DEVICE,
                   help=f"device name (see `xla_costmodel.devices.device_names()`; default {DEFAULT_DEVICE})")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"cost model (xla-gpu, roofline, or a plugin; default {DEFAULT_MODEL})")
    p.add_argument("--unknown-trip-count", type=int, default=1, metavar="N",
                   help="trip count assumed for while loops whose count is unknown (default 1)")
    p.add_argument("--all", action="store_true", help="also list free instructions (parameters, bitcasts, tuples, ...)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON records (every column)")
    fmt.add_argument("--csv", action="store_true", help="print CSV (every column)")


def _fmt_time(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "nan"
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(seconds) >= factor:
            return f"{seconds / factor:.4g} {unit}"
    return f"{seconds * 1e9:.4g} ns"


@command("analyze", "price every kernel of an HLO module with a cost model", _configure)
def _analyze(args: argparse.Namespace) -> int:
    import sys
    import warnings

    from ..models import CostModelWarning, analyze

    device, model = resolve_device_and_model(args)
    if args.unknown_trip_count < 0:
        raise UsageError("--unknown-trip-count must be >= 0")
    module = load_module(args.file)
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
