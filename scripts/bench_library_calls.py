"""Every GPU model on the H100's library calls (cuBLAS, cuSolver, cuDNN, CUB), per routine.

    .venv/bin/python scripts/bench_library_calls.py

Prices each module of `hlo_fixtures/gpu_h100/` (XLA:GPU's optimized modules,
byte-identical copies of the shared H100 capture) with `analyze(module,
device="h100-sxm", model=M)` and compares each library call's `time_s` (per
execution) with its measured time per execution (`min_per_run_s` /
executions, `calibration/gpu_h100_library_calls.csv`). The library-call
constants of each row are those fitted without the row's source
(`models._library_calls.leaving_source_out`). Prints, per model and routine,
the median ratio (predicted / measured), how many rows are within 2x, and
how many are unpriced.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

MODELS = ("xla-gpu", "xla-gpu-tables", "roofline")


def main() -> None:
    from fit_library_calls import ROWS, fixture_modules

    from xla_costmodel import analyze
    from xla_costmodel.analysis.library import library_routine
    from xla_costmodel.models.pricing import leaving_source_out

    kernels = pd.read_csv(ROWS)
    out = []
    for (program, size), module in fixture_modules().items():
        measured = kernels[(kernels.program == program) & (kernels["size"] == size)].set_index("hlo_op")
        if measured.empty:  # a module without a measured library call
            continue
        source = measured.source.iloc[0]
        calls = {i.name: library_routine(i) for _, i in module.instructions() if i.opcode == "custom-call"}
        calls = {k: v for k, v in calls.items() if v is not None and k in measured.index}
        for model in MODELS:
            with warnings.catch_warnings(), leaving_source_out(source):
                warnings.simplefilter("ignore")
                table = analyze(module, device="h100-sxm", model=model).set_index("kernel")
            for name, routine in calls.items():
                row = table.loc[name]
                executions = row.executions if bool(row.executions_known) else 1
                t_meas = measured.loc[name, "min_per_run_s"] / executions
                out.append({"model": model, "routine": routine, "program": f"{program}@{size}", "kernel": name,
                            "ratio": row.time_s / t_meas})
    df = pd.DataFrame(out)

    def agg(g):
        r = g.ratio.dropna()
        return pd.Series({"rows": len(g), "median_ratio": float(np.median(r)) if len(r) else np.nan,
                          "within_2x": int(((r >= 0.5) & (r <= 2)).sum()), "unpriced": int(g.ratio.isna().sum())})

    pd.set_option("display.width", 200)
    print(df.groupby(["routine", "model"]).apply(agg, include_groups=False).to_string())
    print()
    print(df.groupby("model").apply(agg, include_groups=False).to_string())


if __name__ == "__main__":
    main()
