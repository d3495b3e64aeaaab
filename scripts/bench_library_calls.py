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

    .venv/bin/python scripts/bench_library_calls.py --kernels [--capture ../shared/gpu_h100]

Instead: for each cuSolver / cuBLAS solver call the model prices from its kernels
(`models._library_calls.solver_estimate`: potrf, gesvdj, Jacobi syevd, trsm), the measured time per run of each phase of the algorithm (the capture's
`corpus_events.parquet`: its events grouped by kernel name, fastest run) beside the model's launches and
time for that phase: where a call's error comes from, kernel by kernel.
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


# Measured kernel names -> the phase of `analysis.library.solver_kernels` they belong to (first match).
PHASES = (
    ("gesvdbj_batch|syevbj_batch", "32-column Jacobi"), ("svd_row_rotate|row_rotate_batch_32x16_phase1", "Gram"),
    ("column_rotate|row_rotate_batch_32x32_phase2", "rotate"), ("offA_stage|MemcpyD2H", "convergence test"),
    ("geqr2", "Householder QR"), ("kernel_trsm|trsv_ln|trsm_ln", "substitution"), ("MemcpyD2D", "copy"),
    ("ormtr_|larft|larfb|setup_vhat|gemm|sgemm|splitKreduce|gemmSN|gemmcn", "GEMMs, Q"),
    ("getrf_wo_pivot", "tiled Cholesky"), ("Memset|info|dtrsv_init", "info, set-up"),
)


def phase_of(symbol: str) -> str:
    import re

    for pattern, phase in PHASES:
        if re.search(pattern, symbol or ""):
            return phase
    return "set-up and ordering"


def kernels_table(capture: Path) -> None:
    """Per solver call, measured phases (fastest run) against the model's kernels (module docstring)."""
    from fit_library_calls import fixture_modules

    from xla_costmodel.analysis.library import library_work
    from xla_costmodel.devices import get_device
    from xla_costmodel.models.pricing import library_calls

    device = get_device("h100-sxm")
    events = pd.read_parquet(capture / "corpus_events.parquet",
                             columns=["program", "size", "hlo_op", "run", "kernel_symbol", "duration_ns"])
    out = []
    for (program, size), module in fixture_modules().items():
        for _, instr in module.instructions():
            work = library_work(instr) if instr.opcode == "custom-call" else None
            est = library_calls.solver_estimate(work, device) if work is not None else None
            if est is None:
                continue
            ev = events[(events.program == program) & (events["size"] == size) & (events.hlo_op == instr.name)]
            if ev.empty:
                continue
            ev = ev.assign(phase=ev.kernel_symbol.map(phase_of))
            per_run = ev.groupby(["run", "phase"]).duration_ns.agg(["size", "sum"]).reset_index()
            fastest = ev.groupby("run").duration_ns.sum().idxmin()
            measured = per_run[per_run.run == fastest].set_index("phase")
            model = {}
            for name, launches, t in est.details["kernel_times_s"]:
                phase = phase_of_model(name)
                a, b = model.get(phase, (0, 0.0))
                model[phase] = (a + launches, b + t)
            for phase in sorted(set(measured.index) | set(model)):
                m_n, m_s = (int(measured.loc[phase, "size"]), measured.loc[phase, "sum"] * 1e-9) \
                    if phase in measured.index else (0, 0.0)
                p_n, p_s = model.get(phase, (0, 0.0))
                out.append({"call": f"{program}@{size} {instr.name} ({work.routine} {work.m}x{work.n})", "phase": phase,
                            "measured_launches": m_n, "model_launches": p_n, "measured_us": m_s * 1e6,
                            "model_us": p_s * 1e6, "ratio": p_s / m_s if m_s else np.nan})
    df = pd.DataFrame(out)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 60)
    print(df.set_index(["call", "phase"]).round(3).to_string())


def phase_of_model(name: str) -> str:
    for needle, phase in (("Jacobi", "32-column Jacobi"), ("Gram", "Gram"), ("rotate", "rotate"),
                          ("convergence", "convergence test"), ("QR", "Householder QR"), ("U = Q", "GEMMs, Q"),
                          ("GEMM", "GEMMs, Q"), ("substitution", "substitution"), ("copy", "copy"),
                          ("Cholesky", "tiled Cholesky"), ("info", "info, set-up"), ("set-up (dtrsv", "info, set-up")):
        if needle in name:
            return phase
    return "set-up and ordering"


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", action="store_true", help="per solver call, measured phases against the model's")
    ap.add_argument("--capture", type=Path, default=ROOT.parent / "shared" / "gpu_h100",
                    help="the shared H100 capture (its corpus_events.parquet), for --kernels")
    args = ap.parse_args()
    if args.kernels:
        kernels_table(args.capture)
        return
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
