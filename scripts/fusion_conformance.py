#!/usr/bin/env python
"""Our priority fusion against XLA:GPU's, step by step, over the zoo, some corpus programs and the
harness's own programs, for one or more GPU presets (no GPU needed: the CUDA plugin compiles).

For each program and preset: one deviceless XLA:GPU compile in its own process with the fusion
dumps (`xla_costmodel.fusion._conformance.compile_with_fusion_dumps`), then `simulate_fusion(model="xla-gpu")`
on XLA's exact input to priority fusion, compared with XLA's own log and output
(`compare_fusion_logs`): candidate prices within 1%, the same final partition into kernels (with
fusion kinds), the first round of the pass where the two runs diverge and its cause.

    .venv/bin/python scripts/fusion_conformance.py [--device h100-sxm a100-80gb] [--set zoo corpus harness]
        [--program zoo:mlp_grad ...] [--dump-dir DIR] [--out rows.csv] [--json] [--grids | --scans | --multi-output]

With `--dump-dir`, dumps are kept per program and device and a later run reuses them (no compile).
Progress goes to stderr; the table and the summary to stdout.

`--scans`: the reduce-window rewrite instead. For scan programs (`SCANS`), `analyze` on the
function as the user calls it (jax on the CPU, our simulated XLA:GPU pipeline) with and without
`ReduceWindowRewriter` against XLA:GPU's deviceless compile: kernels (XLA's thunk sequence) and
flops (jaxlib's cost analysis of XLA's optimized module).

`--grids`: launch configurations instead. For every kernel of XLA's thunk sequence, XLA's grid and
threads per block against our emitter model's (`models.launch_dimensions`) on XLA's own fused
kernel (`xla_costmodel.fusion._launch_conformance.compare_launch_grids`): the share equal, and the
mismatches grouped by cause (our emitter, the reduction's kind). `--out` then writes one row per kernel.

`--multi-output`: multi-output fusion instead. Our pass (`xla_costmodel.fusion._multi_output`) on
XLA's exact input to its multi-output fusion (`*.before_multi_output_fusion.txt`), against XLA's
output (`*.after_multi_output_fusion.*`): the same partition into kernels (sets of the kernels
before the pass, with fusion kinds) per module, the first merge where the two differ and its cause
(`_conformance.compare_multi_output`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402

from xla_costmodel.fusion import conformance as conf  # noqa: E402
from xla_costmodel.fusion import conformance as grids_conf  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402

# A few corpus programs at their smallest size: different libraries and kernel mixes.
CORPUS = [
    "corpus:equinox_mlp_grad:small", "corpus:flax_nnx_layernorm_grad:small", "corpus:flax_nnx_mha_grad:small",
    "corpus:jax_nn_activations_grad:small", "corpus:optax_adamw_update:small", "corpus:jax_scipy_special:small",
    "corpus:flax_linen_groupnorm_grad:small", "corpus:jax_ops_segment_sum:small",
]


def programs(sets: list[str]) -> list[str]:
    from xla_costmodel import zoo

    out = []
    if "zoo" in sets:
        out += [f"zoo:{n}" for n in zoo.program_names()]
    if "corpus" in sets:
        out += CORPUS
    if "harness" in sets:
        out += [f"harness:{n}" for n in conf.HARNESS_PROGRAMS]
    return out


SCANS = {
    "cumsum_65536": ("jax.numpy:cumsum", [((65536,), "float32")]),
    "cumsum_1000x64_axis0": ("xla_costmodel.fusion._conformance:cumsum_axis0", [((1000, 64), "float32")]),
    "cummax_5000": ("jax.lax:cummax", [((5000,), "float32")]),
    "cumprod_300": ("jax.numpy:cumprod", [((300,), "float32")]),
    "cumsum_16": ("jax.numpy:cumsum", [((16,), "float32")]),
}


def scans(device: str) -> pd.DataFrame:
    import importlib

    import jax
    import numpy as np

    from xla_costmodel import analyze
    from xla_costmodel._jaxlib_oracle import xla_cost_analysis
    from xla_costmodel.fusion import simulate_fusion

    rows = []
    for name, (ref, specs) in SCANS.items():
        mod, qual = ref.split(":")
        fn = importlib.import_module(mod)
        for part in qual.split("."):
            fn = getattr(fn, part)
        args = [jax.ShapeDtypeStruct(shape, np.dtype(dt)) for shape, dt in specs]
        dump = conf.compile_with_fusion_dumps(fn, args, device=device)
        xla_flops = xla_cost_analysis(dump.optimized_text)["flops"]
        concrete = [np.ones(a.shape, a.dtype) for a in args]
        table = analyze(fn, *concrete, device=device)
        off = simulate_fusion(fn, *concrete, device=device, rewrite_reduce_windows=False)
        off_table = analyze(off.module, device=device)
        kernels = lambda t: int((t.kind != "free").sum())  # noqa: E731
        rows.append({"program": name, "device": device, "kernels_xla": dump.kernel_count,
                     "kernels_ours": kernels(table), "kernels_ours_unrewritten": kernels(off_table),
                     "flops_xla": xla_flops, "flops_ours": float(table.flops.sum()),
                     "flops_ours_unrewritten": float(off_table.flops.sum()),
                     "time_ours_us": float(table.time_s.sum()) * 1e6,
                     "time_ours_unrewritten_us": float(off_table.time_s.sum()) * 1e6})
        print(f"[scans] {name}: {rows[-1]}", file=sys.stderr)
    return pd.DataFrame(rows)


def load_or_compile(program: str, device: str, dump_root: Path | None) -> conf.GpuCompileDump:
    if dump_root is None:
        return conf.compile_with_fusion_dumps(program, device=device)
    d = dump_root / device / program.replace(":", "__")
    if d.exists() and any(d.glob("*priority_fusion_dump.txt")):
        return conf.read_dump_dir(d, program, device)
    return conf.compile_with_fusion_dumps(program, device=device, dump_dir=d)


def grids(progs: list[str], args) -> int:
    tables = []
    for device in args.device:
        for i, p in enumerate(progs, 1):
            try:
                t = grids_conf.compare_launch_grids(load_or_compile(p, device, args.dump_dir))
            except Exception as e:  # noqa: BLE001 - one failed program is reported, not the end of the run
                print(f"[{device} {i}/{len(progs)}] {p}: FAILED {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
                continue
            tables.append(t)
            print(f"[{device} {i}/{len(progs)}] {p}: {int(t['equal'].sum())}/{len(t)} kernels with XLA's grid "
                  "and block size", file=sys.stderr)
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=["device", "equal"])
    if args.out:
        table.to_csv(args.out, index=False)
    summary = {d: grids_conf.summarize_launch_grids(g) for d, g in table.groupby("device")}
    summary["all"] = grids_conf.summarize_launch_grids(table)
    if args.json:
        print(json.dumps(summary, indent=1, default=int))
        return 0
    cols = ["program", "device", "kernel", "emitter", "detail", "xla_grid", "xla_threads", "ours_blocks",
            "ours_threads_per_block", "cause"]
    with pd.option_context("display.width", 250, "display.max_rows", 1000, "display.max_colwidth", 60):
        mism = table.loc[~table["equal"].astype(bool), cols]
        print("mismatches:" if len(mism) else "mismatches: none")
        if len(mism):
            print(mism.to_string(index=False))
    for k, s in summary.items():
        print(f"\n{k}: {s['equal']}/{s['kernels']} kernels with XLA's grid and block size ({s['share_equal']:.1%})")
        print("  equal by emitter: " + ", ".join(f"{e}: {v}" for e, v in s["equal_by_emitter"].items()))
        print("  mismatches by cause: " + ", ".join(f"{c}: {n}" for c, n in s["mismatch_causes"].items()))
    return 0


def compare_each(progs: list[str], args, compare, describe) -> tuple[pd.DataFrame, dict]:
    """`compare(dump)` for every program on every device of `args`, a progress line on stderr each
    (`describe(result, row, seconds)`); a program that fails is a row with its error, not the end of the
    run. **Returns:** the rows (also written to `args.out` as CSV) and the results by device."""
    rows, results = [], {}
    for device in args.device:
        results[device] = []
        for i, p in enumerate(progs, 1):
            t0 = time.perf_counter()
            try:
                r = compare(load_or_compile(p, device, args.dump_dir))
            except Exception as e:  # noqa: BLE001 - one failed program is a row, not the end of the run
                print(f"[{device} {i}/{len(progs)}] {p}: FAILED {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
                rows.append({"program": p, "device": device, "error": f"{type(e).__name__}: {str(e)[:200]}"})
                continue
            results[device].append(r)
            row = r.summary()
            rows.append(row)
            print(f"[{device} {i}/{len(progs)}] {p}: {describe(r, row, time.perf_counter() - t0)}", file=sys.stderr)
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False)
    return table, results


def multi_output(progs: list[str], args) -> int:
    table, results = compare_each(
        progs, args, conf.compare_multi_output,
        lambda r, row, _seconds: (f"partition {'same' if r.same_partition else 'differs'} "
                                  f"(kernels {r.kernels_before} -> ours {r.kernels_ours}, XLA {r.kernels_xla})"
                                  + (f", first divergence: {row['first_divergence_cause']}: {row['first_divergence']}"
                                     if r.first_divergence else "")))
    summary = {device: conf.summarize_multi_output(rs) for device, rs in results.items()}
    summary["all"] = conf.summarize_multi_output([r for rs in results.values() for r in rs])
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
        return 0
    cols = ["program", "device", "kernels_before", "kernels_xla", "kernels_ours", "same_partition",
            "first_divergence_cause", "first_divergence"]
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_colwidth", 80):
        print(table[[c for c in cols if c in table]].to_string(index=False))
    for k, s in summary.items():
        print(f"\n{k}: {s['modules']} modules; same partition after multi-output fusion: {s['same_partition']}/"
              f"{s['modules']} ({s['share_same_partition']:.1%}); kernels merged away: ours {s['merges_ours']}, "
              f"XLA {s['merges_xla']} (in {s['modules_with_merges_xla']} modules)")
        print("  first divergence causes: " + (", ".join(f"{c}: {n}" for c, n in s["first_divergence_causes"].items())
                                               or "none"))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", nargs="+", default=["h100-sxm", "a100-80gb"])
    ap.add_argument("--set", nargs="+", default=["zoo", "corpus", "harness"], choices=["zoo", "corpus", "harness"])
    ap.add_argument("--program", nargs="*", help="program references (zoo:NAME, corpus:NAME:SIZE, harness:NAME)")
    ap.add_argument("--dump-dir", type=Path, help="keep (and reuse) the dumps here")
    ap.add_argument("--out", type=Path, help="write the per-module rows as CSV")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--scans", action="store_true", help="check the reduce-window rewrite on scan programs")
    ap.add_argument("--grids", action="store_true", help="compare launch grids and block sizes kernel by kernel")
    ap.add_argument("--multi-output", action="store_true",
                    help="compare multi-output fusion on XLA's input to it with XLA's output, module by module")
    args = ap.parse_args(argv)
    if not gpu_compile_available():
        print("fusion_conformance: jax_plugins.xla_cuda12 is not installed (pip install 'jax[cuda12-local]')",
              file=sys.stderr)
        return 2
    if args.scans:
        table = pd.concat([scans(d) for d in args.device], ignore_index=True)
        if args.out:
            table.to_csv(args.out, index=False)
        print(table.to_json(orient="records", indent=1) if args.json else table.to_string(index=False))
        return 0
    progs = args.program or programs(args.set)
    if args.grids:
        return grids(progs, args)
    if args.multi_output:
        return multi_output(progs, args)
    table, results = compare_each(
        progs, args, conf.compare_fusion_logs,
        lambda r, row, seconds: (f"{row['candidates_within']}/{row['candidates_xla']} prices within 1%, partition "
                                 f"{'same' if r.same_partition else 'differs'} ({r.kernels_ours} vs XLA "
                                 f"{r.kernels_xla}), first divergence: {row['first_divergence_cause'] or 'none'} "
                                 f"({seconds:.1f} s)"))
    summary = {device: conf.summarize(rs) for device, rs in results.items()}
    allr = [r for rs in results.values() for r in rs]
    summary["all"] = conf.summarize(allr)
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        cols = ["program", "device", "candidates_xla", "candidates_within", "same_partition", "kernels_xla",
                "kernels_ours", "first_divergence_cause"]
        with pd.option_context("display.width", 200, "display.max_rows", 500):
            print(table[[c for c in cols if c in table]].to_string(index=False))
        for k, s in summary.items():
            print(f"\n{k}: {s['modules']} modules; candidate prices within 1%: {s['candidates_within_1pct']}/"
                  f"{s['candidates_xla']} ({s['share_within_1pct']:.1%}; {s['candidates_before_divergence']} "
                  f"logged before the first divergence); same partition: {s['same_partition']}/"
                  f"{s['modules']} ({s['share_same_partition']:.1%}); no divergence: {s['no_divergence']}")
            print("  first divergence causes: " + ", ".join(f"{c}: {n}" for c, n in s["first_divergence_causes"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
