#!/usr/bin/env python
"""Run the measurement suite twice and print the run-to-run variation per kernel class.

    .venv/bin/python scripts/measure_noise.py                  # full suite, twice (~5 min on 2 cores)
    .venv/bin/python scripts/measure_noise.py --quick          # the quick suite, twice (~15 s)
    .venv/bin/python scripts/measure_noise.py --out calibration/host_cpu.parquet   # keep both runs

The table compares each case's main kernel between the two runs: the relative
difference of the minimum times (median, 90th percentile, maximum over the
cases of a class), the same for the medians, and how far a run's median sits
above its minimum. Differences below these numbers are noise on this host.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the quick suite")
    p.add_argument("--only", nargs="+", metavar="PATTERN", help="suite kernels/classes to run (glob patterns)")
    p.add_argument("--out", metavar="PATH", help="append both runs to this dataset (.parquet/.csv)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)

    import pandas as pd

    from xla_costmodel.measure import append_dataset, device_description, noise_floor, run_suite

    runs = []
    t0 = time.perf_counter()
    for i in (1, 2):
        print(f"suite run {i} of 2 ({'quick' if args.quick else 'full'})", file=sys.stderr)
        runs.append(run_suite(quick=args.quick, only=args.only, progress=not args.no_progress))
    elapsed = time.perf_counter() - t0
    table = noise_floor(runs[0], runs[1])
    pct = [c for c in table.columns if c not in ("kernel_class", "cases")]
    shown = table.copy()
    for c in pct:
        shown[c] = (shown[c] * 100).map("{:.1f}%".format)
    dev = device_description()
    print(f"noise floor on {dev['device']} ({'quick' if args.quick else 'full'} suite, run twice)")
    print(
        f"suite times: {runs[0].attrs['elapsed_s']:.1f} s and {runs[1].attrs['elapsed_s']:.1f} s "
        f"({elapsed:.1f} s in all); launch overhead {runs[0].attrs['launch_overhead_s'] * 1e6:.2f} µs "
        f"and {runs[1].attrs['launch_overhead_s'] * 1e6:.2f} µs"
    )
    with pd.option_context("display.width", 160):
        print(shown.to_string(index=False))
    if args.out:
        total = append_dataset(pd.concat(runs, ignore_index=True), args.out)
        print(f"appended {sum(len(r) for r in runs)} rows to {args.out} ({total} rows now)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
