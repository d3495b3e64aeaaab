"""`xla-costmodel stats FILE [--json]`: computations, opcodes and XLA's cost totals of a module."""

from __future__ import annotations

import argparse
import json

from ._common import command, count, load_module


def _stats_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text file ('-' reads it from standard input)")
    p.add_argument("--json", action="store_true", help="print JSON")


@command("stats", "counts of computations and instructions per opcode (and cost totals)", _stats_configure)
def _stats(args: argparse.Namespace) -> int:
    from ..analysis import module_stats

    stats = module_stats(load_module(args.file))
    if args.json:
        print(json.dumps(stats, indent=1))
        return 0
    print(f"module {stats['module']}: {count(stats['computations'], 'computation')}, "
          f"{count(stats['instructions'], 'instruction')}")
    for key in ("flops", "transcendentals", "bytes_accessed"):
        aware = stats.get(f"{key}_trip_count_aware", stats[key])
        extra = f"  (counting loop trips: {aware:,.0f})" if aware != stats[key] else ""
        print(f"  {key}: {stats[key]:,.0f}{extra}")
    for loop in stats["loops"]:
        trips = (f"{loop['trip_count']:,} trips ({loop['source']})" if loop["trip_count"] is not None
                 else "trip count unknown: its body counted once")
        print(f"  loop {loop['name']} in {loop['computation']}: {trips}")
    if stats.get("unpriced"):
        print(f"  not priced: {stats['unpriced']}")
    width = max((len(k) for k in stats["opcodes"]), default=6)
    for opcode, n in stats["opcodes"].items():
        print(f"  {opcode:<{width}}  {n}")
    return 0
