"""Fit the library-call model's constants on the H100 measurements, and score it leaving one source out.

    .venv/bin/python scripts/fit_library_calls.py --capture /path/to/gpu_h100   # refresh the measured rows
    .venv/bin/python scripts/fit_library_calls.py                               # fit, write, score

`--capture` reads the shared H100 capture's `corpus_kernels.parquet` (the
measured time per run of every HLO instruction) and writes the rows of the
modules in `hlo_fixtures/gpu_h100/` (byte-identical copies of the capture's
`hlo/<program>@<size>.post.hlo.gz`) that hold library calls to
`calibration/gpu_h100_library_calls.csv`. Without it, the script reads that
file and the modules, fits `fit.fit_library_constants`, writes
`xla_costmodel/devices/data/library_calls_h100.json` (with which rows and
which held-out sources made each set), and prints, per routine, the ratio of
the prediction to the measured time per execution, each row priced with the
constants fitted without its source.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "hlo_fixtures" / "gpu_h100"
ROWS = ROOT / "calibration" / "gpu_h100_library_calls.csv"
OUT = ROOT / "xla_costmodel" / "devices" / "data" / "library_calls_h100.json"
DEVICE_KIND = "NVIDIA H100 80GB HBM3"


def fixture_modules() -> dict:
    from xla_costmodel.hlo import parse_hlo

    out = {}
    for path in sorted(FIXTURES.glob("*.post.hlo.gz")):
        program, size = path.name[: -len(".post.hlo.gz")].split("@")
        out[(program, size)] = parse_hlo(gzip.open(path, "rt").read())
    return out


def extract(capture: Path) -> None:
    kernels = pd.read_parquet(capture / "corpus_kernels.parquet")
    keys = {tuple(p.name[: -len(".post.hlo.gz")].split("@")) for p in FIXTURES.glob("*.post.hlo.gz")}
    mine = kernels[[(p, s) in keys for p, s in zip(kernels.program, kernels["size"])]]
    cols = ["program", "size", "source", "hlo_op", "launches", "min_per_run_s", "median_per_run_s"]
    mine[cols].rename(columns={"launches": "launches_per_run"}).to_csv(ROWS, index=False)
    print(f"wrote {len(mine)} rows to {ROWS.relative_to(ROOT)}")


def measured_rows(device):
    from xla_costmodel.fit.calibration import library_call_rows

    kernels = pd.read_csv(ROWS)
    return library_call_rows(fixture_modules(), kernels, device)


def summary(scored: pd.DataFrame) -> pd.DataFrame:
    def agg(g):
        r = g["ratio"].dropna()
        return pd.Series({"rows": len(g), "sources": ",".join(sorted(set(g.source))),
                          "median_ratio": float(np.median(r)) if len(r) else np.nan,
                          "within_2x": f"{int(((r >= 0.5) & (r <= 2)).sum())}/{len(g)}",
                          "worst": float(r.iloc[np.argmax(np.abs(np.log(r)))]) if len(r) else np.nan})

    return scored.groupby("routine").apply(agg, include_groups=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capture", type=Path, help="the shared H100 capture directory (refreshes the rows)")
    ap.add_argument("--no-write", action="store_true", help="fit and score, but leave the data file alone")
    args = ap.parse_args()
    if args.capture is not None:
        extract(args.capture)
    from xla_costmodel.devices import get_device
    from xla_costmodel.fit.calibration import fit_library_constants, score_library_rows

    device = get_device("h100-sxm")
    rows = measured_rows(device)
    fits = fit_library_constants(rows)
    data = {
        "device": device.name,
        "device_kind": DEVICE_KIND,
        "form": "launch_multiple*launch + steps*step_s + flops/(flops_efficiency*peak) + "
                "bytes/(bandwidth_efficiency*bandwidth); an efficiency of 0 leaves its term out",
        "provenance": {
            "measurements": "the shared H100 capture of xla_costmodel.corpus (jax/jaxlib 0.11.2, CUDA 13 plugin, "
                            "one H100 80GB HBM3): min_per_run_s of each library custom call, divided by its "
                            "executions per run; rows in calibration/gpu_h100_library_calls.csv",
            "modules": "hlo_fixtures/gpu_h100/*.post.hlo.gz (XLA:GPU's optimized modules that ran)",
            "script": "scripts/fit_library_calls.py",
            "held_out": "leave_source_out[source]: fitted without that source's rows; honest=false: "
                        "the routine had no rows outside that source, the family's other routines were used",
        },
        "routines": fits,
    }
    if not args.no_write:
        OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    pd.set_option("display.width", 200)
    for held_out in (True, False):
        scored = score_library_rows(rows, fits, held_out=held_out)
        print("\nleave one source out" if held_out else "\nin sample (every row)")
        print(summary(scored).to_string())
    no_honest = sorted(r for r, e in fits.items() if not e["honest"])
    print("\nroutines with no honest training data (held-out constants from the family):", ", ".join(no_honest))
    print("the models price potrf, gesvdj and syevd with n <= 32 from their kernels instead "
          "(models._library_calls.solver_estimate, nothing fitted), and non-grouped, multi-feature cuDNN "
          "convolutions as implicit GEMMs by the GEMM table (conv_gemm_estimate): the scores above are the "
          "fitted form's; scripts/bench_library_calls.py scores the models")


if __name__ == "__main__":
    main()
