#!/usr/bin/env python
"""Why `xla-gpu` misprices the H100 capture's worst reduction fusions, and whether XLA's own model agrees.

    .venv/bin/python scripts/diagnose_reduction_prices.py           # about a minute

1. **XLA's logged prices against ours.** For `jax_scipy_special@large` and `jax_nn_activations_grad@small`
   (the reductions priced 8.5x and 5x), XLA:GPU compiles the program without a GPU with its fusion dumps
   (`fusion._conformance.compile_with_fusion_dumps`, jax's CUDA plugin needed; skipped without it);
   `compare_fusion_logs` runs our priority fusion on XLA's own input and prints the share of XLA's
   logged candidate prices (`us_unfused` / `us_fused` of `priority_fusion_dump.txt`) that ours equal
   within 1 %, and the candidate whose producer becomes the mispriced kernel.
2. **Before and after multi-output fusion.** The kernels of XLA's module right before and right after its
   `multi_output_fusion` pass, priced by `xla-gpu`: XLA logs no price for a multi-output fusion, so this
   shows what merging does to the price under XLA's cost analysis (a fused value that is both an output and
   the input of the reduction is counted once per path: `GpuHloCostAnalysis::FusionCalculateUtilizations`),
   and the launch the merged kernel keeps (a reduction's, one block for a scalar).
3. **The corpus's reductions** (kernels of >= 5 us, per execution), split by whether the fusion outputs a
   value that is also the reduction's input: median ratio and ratio error of each group.

A diagnosis, not a model: nothing here changes what `xla-gpu` prices. What it found, the double count of
part 2, is what `xla-gpu`'s kernel estimates now leave out (`XlaGpuModel.reduction_inputs_once`; with
`latency_hiding`, jax_scipy_special@large's reduction went from 8.5x to 1.1x its measured time).
"""

from __future__ import annotations

import glob
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gpu as bench  # noqa: E402

CASES = (("jax_scipy_special", "large"), ("jax_nn_activations_grad", "small"))


def _shares_output_with_reduce(fusion) -> bool:
    """A multi-output fusion one of whose outputs (not a reduce) also feeds a reduce inside it."""
    comp = fusion.fused_computation
    if comp is None or comp.root.opcode != "tuple":
        return False
    outputs = {id(o) for o in comp.root.operands if o.opcode != "reduce"}
    for red in (i for i in comp.instructions if i.opcode == "reduce"):
        stack, seen = list(red.operands), set()
        while stack:
            x = stack.pop()
            if id(x) in seen:
                continue
            seen.add(id(x))
            if id(x) in outputs:
                return True
            if x.opcode not in ("parameter", "constant"):
                stack.extend(x.operands)
    return False


def xla_logs() -> None:
    import pandas as pd

    from xla_costmodel import analyze
    from xla_costmodel.fusion.conformance import compare_fusion_logs, compile_with_fusion_dumps
    from xla_costmodel.gpu_compile import gpu_compile_unavailable_reason
    from xla_costmodel.hlo import parse_hlo

    reason = gpu_compile_unavailable_reason()
    if reason is not None:
        print(f"(XLA's logs skipped: {reason})")
        return
    for program, size in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            dump = compile_with_fusion_dumps(f"corpus:{program}:{size}", dump_dir=tmp)
            c = compare_fusion_logs(dump)
            print(f"\n== {program}@{size}: {c.price_agreement:.1%} of XLA's {len(c.prices)} logged candidate prices "
                  f"equalled within 1 %; same final kernels as XLA: {c.same_partition}")
            for stage in ("before_multi_output_fusion", "after_multi_output_fusion"):
                path = glob.glob(f"{tmp}/*{program}*{stage}*.txt")[0]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t = pd.DataFrame(analyze(parse_hlo(Path(path).read_text()), device=bench.DEVICE,
                                             model="xla-gpu"))
                t = t[t["time_s"] > 0].assign(time_us=lambda f: f["time_s"] * 1e6,
                                              compute_us=lambda f: f["compute_s"] * 1e6,
                                              memory_us=lambda f: f["memory_s"] * 1e6)
                print(f"-- kernels {stage.replace('_', ' ')} (xla-gpu):")
                print(t[["kernel", "time_us", "compute_us", "memory_us"]].round(2).to_string(index=False))


def corpus_split() -> None:
    import numpy as np

    from xla_costmodel.hlo import parse_hlo

    rows = bench.load_corpus(None)
    cases = list(dict.fromkeys(rows["case"]))
    modules = {c: parse_hlo(bench.read_module_text(c, "post"), source=c) for c in cases}
    kernels = bench.measured_kernels(rows, modules)
    t = bench.score_table(kernels, bench.price(modules, "xla-gpu"))
    by_name = {(c, i.name): i for c, m in modules.items() for _comp, i in m.instructions()}
    red = t[(t["category"] == "reductions") & (t["measured_s"] >= bench.LONG_S)].copy()
    red["ratio"] = red["predicted_s"] / red["measured_s"]
    red["shares an output with its reduce"] = [
        by_name[(c, op)].opcode == "fusion" and _shares_output_with_reduce(by_name[(c, op)])
        for c, op in zip(red["case"], red["hlo_op"])]
    print("\n== the corpus's reduction fusions of >= 5 us per execution (xla-gpu)")
    for flag, g in red.groupby("shares an output with its reduce"):
        lr = np.abs(np.log(g["ratio"].to_numpy(float)))
        print(f"  {'an output also feeds its reduce' if flag else 'others'}: {len(g)} kernels, median ratio "
              f"{float(np.median(g['ratio'])):.3f}, ratio error {float(np.mean(lr)):.3f}")
    print(red.sort_values("ratio", ascending=False)[["case", "hlo_op", "ratio", "shares an output with its reduce"]]
          .head(10).round(3).to_string(index=False))


def main() -> int:
    xla_logs()
    corpus_split()
    return 0


if __name__ == "__main__":
    sys.exit(main())
