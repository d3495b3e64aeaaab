#!/usr/bin/env python3
"""Fit a GPU's per-run program overhead from its suite run, and save it as a calibration.

`calibrate` fits a device's `ProgramOverhead` (what a run costs besides its kernels: dispatch from the
host, synchronisation) from this project's own programs. A GPU capture holds none: only the suite,
whose cases are programs of one or two kernels, and the corpus, which only scores. This script fits the
overhead on the suite's programs (never the corpus) and writes `<device>_program-overhead.json`:

    python scripts/fit_gpu_overhead.py calibration/h100-sxm.parquet --device h100-sxm --out calibration

`scripts/bench_gpu.py` scores it against the corpus's wall times (`+ overhead /wall`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    from xla_costmodel.devices import get_device
    from xla_costmodel.datasets import SUITE, row_roles
    from xla_costmodel.fit import PROGRAM_OVERHEAD, ProgramOverhead
    from xla_costmodel.fit.calibration import program_table
    from xla_costmodel.datasets import header, measured_on, save_calibration
    from xla_costmodel.measure import read_dataset

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", type=Path, help="the device's suite run (dataset schema)")
    ap.add_argument("--device", required=True, help="the device it was measured on, e.g. h100-sxm")
    ap.add_argument("--out", type=Path, required=True, help="the folder to write the calibration in")
    args = ap.parse_args(argv)

    rows = read_dataset(args.dataset)
    suite = rows[row_roles(rows) == SUITE]
    programs = program_table(suite)
    overhead = ProgramOverhead.fit(programs)
    payload = {**header(PROGRAM_OVERHEAD, get_device(args.device), int(len(programs)),
                        [{"path": args.dataset.name}], measured_on(suite)),
               **overhead.to_calibration(), "fitted_on": "the suite's programs (one or two kernels each), no corpus row"}
    path = save_calibration(payload, args.out)
    print(f"{PROGRAM_OVERHEAD}: {overhead.per_run_s * 1e6:.1f} us per run + {overhead.per_kernel_s * 1e6:.2f} us "
          f"per kernel, from {len(programs)} programs -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
