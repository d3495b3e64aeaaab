#!/usr/bin/env python
"""Deviceless XLA:GPU modules priced with and without the model's GEMM autotuning, against the H100 capture.

    .venv/bin/python scripts/check_deviceless_autotune.py [PROGRAM@SIZE ...]

For each corpus program (default: the GEMM-heavy ones), this compiles the program for an H100 on this
machine (jax's CUDA plugin, no GPU: XLA keeps default GEMM configurations), prices the module with
`xla-gpu` as compiled and after `models.autotune_gemms`, and compares each with the measured kernel time
per run of the H100 run (`calibration/h100-sxm_corpus.parquet`) and with `xla-gpu` on the module the H100
run compiled (`hlo_fixtures/gpu_h100`). Each program compiles in its own process (XLA's flags and the
plugin's state are per process). Needs `jax-cuda12-plugin`; prints one row per program.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["flax_linen_dense_bf16_grad@large", "haiku_mlp_grad@large", "equinox_mlp_fwd@large",
           "equinox_mlp_grad@large", "flax_nnx_mha_fwd@large", "jax_nn_attention_fwd@large",
           "penzai_llamalike_fwd@large", "jax_scipy_expm@large"]
TARGET = ('gpu_device_info{threads_per_block_limit:1024 threads_per_warp:32 shared_memory_per_block:49152 '
          'shared_memory_per_core:233472 threads_per_core_limit:2048 core_count:132 fpus_per_core:128 '
          'block_dim_limit_x:2147483647 block_dim_limit_y:65535 block_dim_limit_z:65535 '
          'memory_bandwidth:3352320000000 l2_cache_size:52428800 clock_rate_ghz:1.98 '
          'device_memory_size:84942979072 shared_memory_per_block_optin:232448 '
          'cuda_compute_capability{major:9 minor:0} registers_per_core_limit:65536 '
          'registers_per_block_limit:65536} platform_name:"CUDA" dnn_version_info{major:9 minor:10 patch:0} '
          'device_description_str:"NVIDIA H100 80GB HBM3"')


def compile_one(case: str) -> str:
    """XLA:GPU's optimized module of one corpus case, compiled without a GPU (run in a child process)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    from jax.experimental import topologies

    from xla_costmodel.corpus import get_program

    name, size = case.split("@")
    fn, args = get_program(name).build(size)
    dev = topologies.get_topology_desc("h100", "cuda", target_config=TARGET, topology="1x1x1").devices[0]
    sharding = jax.sharding.SingleDeviceSharding(dev)
    specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), args)
    return jax.jit(fn).lower(*specs).compile().as_text()


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        sys.stdout.write(compile_one(argv[1]))
        return 0
    import pandas as pd

    from xla_costmodel import analyze
    from xla_costmodel.hlo import parse_hlo
    from xla_costmodel.models import autotune_gemms

    cases = argv or DEFAULT
    rows = pd.read_parquet(ROOT / "calibration" / "h100-sxm_corpus.parquet", columns=["case", "min_per_run_s"])
    measured = rows.groupby("case")["min_per_run_s"].sum()
    out = []
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_SKIP_CUDA_CONSTRAINTS_CHECK="1", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=str(ROOT))
    for case in cases:
        print(f"   {case}: compiling without a GPU", file=sys.stderr)
        proc = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            out.append({"case": case, "note": proc.stderr.strip().splitlines()[-1][:120] if proc.stderr else "failed"})
            continue
        deviceless = parse_hlo(proc.stdout, source=f"{case} (deviceless)")
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
    if "--json" in os.environ.get("CHECK_AUTOTUNE_JSON", ""):
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
