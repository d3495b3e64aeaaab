#!/usr/bin/env python
"""Measure every kernel of the zoo's real programs (held-out data) and the supplementary measurement kernels.

    .venv/bin/python scripts/measure_programs.py                      # remake calibration/host_cpu_programs.parquet (~3 min)
    .venv/bin/python scripts/measure_programs.py --only mlp_grad fft  # some programs, appended
    .venv/bin/python scripts/measure_programs.py --no-programs --only-extra 'x_conv*'   # some supplementary kernels, appended
    .venv/bin/python scripts/measure_programs.py --large              # calibration/host_cpu_programs_large.parquet (~10 s)

Each zoo program (`xla_costmodel.zoo`) is measured per kernel with
`xla_costmodel.measure.measure_program` (the project's one methodology:
steady allocator, 30 runs, 4 discarded as warm-up, the minimum) in
`--rounds` passes over all programs, the samples of a program pooled over
the passes, exactly as the measurement suite does. Rows have the calibration
dataset's schema (`read_dataset` reads them) with:

- `kernel_class` = `program` for the program as XLA compiles it, and
  `program-unfused` for the same program compiled with XLA's fusion passes
  disabled (`xla_disable_hlo_passes=fusion`: every instruction its own
  kernel). The pair gives one real fusion decision per program (is the
  fused program faster than the unfused one, and by how much), which
  `xla_costmodel.compare` scores.
- `kernel` = the program's name, `case` = `<program>` or `<program>/unfused`,
  `source` = `zoo`, `params` = `{"program": ..., "fusion": true|false,
  "rounds": ..., "repeats": ..., "discard": ...}` (files made before the
  last three were recorded used the defaults 3, 30, 4). `samples_per_run_s` holds
  the kept samples of the rounds in order, `repeats − discard` per round.
- `hlo_text`: the kernel's instruction and every computation it calls, so
  features can be recomputed.

The same file also holds the supplementary measurement kernels of
`xla_costmodel.measure._extra_suite` (small sizes and the operations the
main suite lacks, each measured in a chain of kernels): `kernel_class`
`extra-<class>`, `source` `extra`. They are *training* data; `compare` and
`calibrate` never fit to the `program` / `program-unfused` rows.

`--large` measures instead the zoo's transformers at the sizes of a small
real model (`LARGE`: width 256, sequence 64, batch 4; their kernels take
microseconds to milliseconds, where the bundled programs' kernels mostly
take under one): a second held-out test set, written to its own file
(`calibration/host_cpu_programs_large.parquet`, `kernel_class` `program`,
`case` `<program>@large`), which no training set includes.

Without any selection option the output file is replaced (written fresh,
atomically); with `--only`, `--only-extra`, `--no-programs`, `--no-extra` or
`--no-unfused`, rows are appended.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_OUT = ROOT / "calibration" / "host_cpu_programs.parquet"
LARGE_OUT = ROOT / "calibration" / "host_cpu_programs_large.parquet"
#: Zoo programs at the sizes of a small real model (`--large`): case name -> (zoo builder, its arguments).
_LARGE_SIZES = {"num_layers": 2, "d_model": 256, "num_heads": 4, "d_ff": 1024, "seq_len": 64, "batch": 4}
LARGE = {
    "transformer_fwd@large": ("transformer_fwd", _LARGE_SIZES),
    "transformer_grad@large": ("transformer_grad", _LARGE_SIZES),
}


def _large_builders() -> dict:
    """`{name: (build, sizes)}` of the `LARGE` programs, for `measure_zoo`."""
    from xla_costmodel import zoo

    return {name: ((lambda program=program, sizes=sizes: getattr(zoo, program)(**sizes)), sizes)
            for name, (program, sizes) in LARGE.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", metavar="PROGRAM", help="zoo programs to measure (default: all)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help=f"dataset file (default {DEFAULT_OUT.relative_to(ROOT)})")
    p.add_argument("--rounds", type=int, default=3, help="passes over all programs, samples pooled (default 3)")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--discard", type=int, default=4)
    p.add_argument("--no-unfused", action="store_true", help="skip the programs compiled without fusion")
    p.add_argument("--no-programs", action="store_true", help="skip the zoo programs")
    p.add_argument("--no-extra", action="store_true", help="skip the supplementary measurement kernels")
    p.add_argument("--only-extra", nargs="+", metavar="PATTERN", help="supplementary kernels to run (glob patterns)")
    p.add_argument("--large", action="store_true",
                   help=f"measure the LARGE programs (fused only) into {LARGE_OUT.relative_to(ROOT)} instead")
    args = p.parse_args(argv)
    if args.large:
        if args.only or args.only_extra or args.no_programs:
            p.error("--large measures the LARGE programs alone: no --only, --only-extra or --no-programs")
        args.only, args.no_extra, args.no_unfused = list(LARGE), True, True
        if args.out == str(DEFAULT_OUT):
            args.out = str(LARGE_OUT)

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from xla_costmodel.measure import append_dataset
    from xla_costmodel.measure.programs import write_dataset
    from xla_costmodel.measure.programs import measure_extra, measure_zoo
    from xla_costmodel.zoo import program_names

    import pandas as pd

    names = [] if args.no_programs else (args.only or program_names())
    t0 = time.perf_counter()
    frames = []
    failed = {}
    if names:
        zoo = measure_zoo(names, rounds=args.rounds, repeats=args.repeats, discard=args.discard,
                          unfused=not args.no_unfused, builders=_large_builders())
        frames.append(zoo)
        failed.update({f"{n} ({c})": w for (n, c), w in zoo.attrs.get("failed", {}).items()})
    if not args.no_extra and not args.only:
        extra = measure_extra(args.only_extra, rounds=args.rounds, repeats=args.repeats, discard=args.discard)
        frames.append(extra)
        failed.update(extra.attrs.get("failed", {}))
    df = pd.concat([f for f in frames if len(f)], ignore_index=True) if frames else pd.DataFrame()
    partial = not args.large and bool(args.only or args.only_extra or args.no_programs or args.no_extra
                                      or args.no_unfused)
    out = Path(args.out)
    if not partial:
        total = write_dataset(df, out)  # a fresh file, atomically
    else:
        total = append_dataset(df, out)
    elapsed = time.perf_counter() - t0
    by = df.groupby("kernel_class").size().to_dict() if len(df) else {}
    print(f"measured {len(names)} programs and the supplementary kernels in {elapsed:.0f} s: {by}; "
          f"{out} holds {total} rows")
    for what, why in failed.items():
        print(f"  failed: {what}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
