#!/usr/bin/env python
"""Convert a GPU capture (device events of the corpus, with its modules) into the calibration dataset.

    .venv/bin/python scripts/convert_gpu_capture.py                       # the shipped H100 capture
    .venv/bin/python scripts/convert_gpu_capture.py --events E.parquet --hlo DIR --summary S.parquet \\
        --device-kind "NVIDIA H100 80GB HBM3" --jax-version 0.11.2 --out calibration/h100-sxm_corpus.parquet

Reads the capture's events (`xla_costmodel.measure._gpu_capture`: one row per
device event), the XLA:GPU-optimized module of each program run
(`<program>@<size>.post.hlo[.gz]` in `--hlo`) and, for the wall time per run
(the event format has no run spans), the capture's own per-kernel summary
(`wall_min_per_run_s`, `wall_median_per_run_s` per program run). Writes one
dataset row per (program, size, instruction) with `capture_rows` to `--out`
(replaced, not appended: the file is derived data). Nothing here measures.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EVENTS = ROOT / "calibration" / "h100-sxm_corpus_events.parquet"
HLO = ROOT / "hlo_fixtures" / "gpu_h100"
OUT = ROOT / "calibration" / "h100-sxm_corpus.parquet"


def read_module(directory: Path, case: str, stage: str = "post") -> str:
    """The text of `<case>.<stage>.hlo.gz` (or `.hlo`) in `directory`."""
    for name in (f"{case}.{stage}.hlo.gz", f"{case}.{stage}.hlo"):
        path = directory / name
        if path.is_file():
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as f:
                return f.read()
    raise FileNotFoundError(directory / f"{case}.{stage}.hlo.gz")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", default=str(EVENTS), help="the capture's events (parquet)")
    p.add_argument("--hlo", default=str(HLO), help="directory of <program>@<size>.post.hlo.gz")
    p.add_argument("--summary", required=False,
                   help="the capture's per-kernel summary with wall_min_per_run_s (default: none, walls NaN)")
    p.add_argument("--device-kind", default="NVIDIA H100 80GB HBM3")
    p.add_argument("--jax-version", default="0.11.2")
    p.add_argument("--timestamp", default="2026-11-26", help="when the capture was made (ISO 8601)")
    p.add_argument("--suite-run", default="h100-corpus-2026-11-26", help="the capture's id")
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args(argv)

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import pandas as pd

    from xla_costmodel.measure import append_dataset, capture_rows, Method

    events = pd.read_parquet(args.events)
    walls = None
    if args.summary:
        walls = (pd.read_parquet(args.summary)
                 .groupby(["program", "size"], sort=False)[["wall_min_per_run_s", "wall_median_per_run_s"]].first()
                 .reset_index())
    hlo = Path(args.hlo)
    # The H100 capture: 3 untimed runs, then 15 traced runs, each waited for; nothing discarded; the minimum.
    method = Method(allocator="unknown", repeats=int(events["run"].nunique()), discard=0, warmup_calls=3)
    rows = capture_rows(events, lambda case: read_module(hlo, case), walls=walls, device_kind=args.device_kind,
                        jax_version=args.jax_version, method=method, suite_run=args.suite_run,
                        timestamp=args.timestamp, what=str(args.events))
    out = Path(args.out)
    if out.exists():
        out.unlink()
    n = append_dataset(rows, out)
    print(f"{out}: {n} rows, {rows['case'].nunique()} program runs, {rows['source'].nunique()} sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
