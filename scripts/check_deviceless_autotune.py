#!/usr/bin/env python
"""Deviceless XLA:GPU modules priced with and without the model's GEMM autotuning, against the H100 capture.

    .venv/bin/python scripts/check_deviceless_autotune.py [PROGRAM@SIZE ...]

For each corpus program (default: the GEMM-heavy ones), this compiles the program for an H100 on this
machine (jax's CUDA plugin, no GPU: XLA keeps default GEMM configurations), prices the module with
`xla-gpu` as compiled and after `models.autotune_gemms`, and compares each with the measured kernel time
per run of the H100 run (`calibration/h100-sxm_corpus.parquet`) and with `xla-gpu` on the module the H100
run compiled (`hlo_fixtures/gpu_h100`). Compiles through `gpu_compile.compile_for_gpu` (needs the
`gpu-compile` extra); prints one row per program.
"""

from __future__ import annotations

import gzip
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package

DEFAULT = ["flax_linen_dense_bf16_grad@large", "haiku_mlp_grad@large", "equinox_mlp_fwd@large",
           "equinox_mlp_grad@large", "flax_nnx_mha_fwd@large", "jax_nn_attention_fwd@large",
           "penzai_llamalike_fwd@large", "jax_scipy_expm@large"]


def main(argv: list[str]) -> int:
    import pandas as pd

    from xla_costmodel import analyze
    from xla_costmodel.corpus import get_program
    from xla_costmodel.gpu_compile import GpuCompileError, compile_for_gpu
    from xla_costmodel.hlo import parse_hlo
    from xla_costmodel.models import autotune_gemms

    cases = argv or DEFAULT
    rows = pd.read_parquet(ROOT / "calibration" / "h100-sxm_corpus.parquet", columns=["case", "min_per_run_s"])
    measured = rows.groupby("case")["min_per_run_s"].sum()
    out = []
    for case in cases:
        print(f"   {case}: compiling without a GPU", file=sys.stderr)
        name, size = case.split("@")
        fn, args = get_program(name).build(size)
        try:
            deviceless = compile_for_gpu(fn, *args, device="h100-sxm").module
        except GpuCompileError as exc:
            out.append({"case": case, "note": str(exc).splitlines()[0][:120]})
            continue
        with gzip.open(ROOT / "hlo_fixtures" / "gpu_h100" / f"{case}.post.hlo.gz", "rt") as f:
            real = parse_hlo(f.read(), source=f"{case} (H100 run)")
        tuned = autotune_gemms(deviceless, "h100-sxm")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_dev = analyze(deviceless, device="h100-sxm", model="xla-gpu").total_time_s
            t_tuned = analyze(tuned.module, device="h100-sxm", model="xla-gpu").total_time_s
            t_real = analyze(real, device="h100-sxm", model="xla-gpu").total_time_s
        m = float(measured[case])
        out.append({"case": case, "gemms_retuned": int((tuned.choices["kind"] == "triton").sum()),
                    "measured_us": m * 1e6, "deviceless / measured": t_dev / m,
                    "deviceless autotuned / measured": t_tuned / m, "H100 module / measured": t_real / m,
                    "deviceless autotuned / H100 module": t_tuned / t_real, "note": ""})
    table = pd.DataFrame(out)
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
