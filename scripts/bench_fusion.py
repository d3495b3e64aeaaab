#!/usr/bin/env python
"""Priority-fusion simulation against XLA:GPU's own fusion, and its speed against XLA's compile time.

Corpus mode (the default): for every module XLA:GPU optimized on an H100
(`hlo_fixtures/gpu_h100/<program>@<size>.post.hlo.gz`, jax 0.11.2, copied
from the shared measurements), the same corpus program (`xla_costmodel.corpus`)
is lowered here with debug information (jax on this machine), compiled by
XLA:CPU (its compile time and kernel count), and fused by `simulate_fusion`
with `xla-gpu` (its time). Per module it prints:

- kernels: ours, XLA:GPU's and XLA:CPU's (`kernels_of`; an async fusion's
  start and done are one kernel), XLA:GPU's by the pass that made them
  (`fusion._xla_passes.xla_gpu_kernel_kind`: loop/input fusions, multi-output
  fusions, Triton GEMM and block-level fusions, library calls, copies) and
  ours that XLA:GPU makes with passes we do not run (`FusionResult.not_simulated`);
- groupings: `compare_with_xla` of our fused module with XLA:GPU's: instructions
  matched (by `op_name`, by name, by structure), ARI, and how many of XLA's
  kernels we reproduce exactly (same matched members);
- `--shared-pre` adds the kernel count of the lowered module XLA:GPU compiled
  (`<program>@<size>.pre.hlo.gz`, no metadata) where it parses;
- speed: simulate time, XLA:CPU compile time of the same module, their ratio.

Speed mode (`--speed`): per corpus module, the module jax lowers the program to for the
GPU preset (`gpu_compile.lower_for_gpu`), fused by `simulate_fusion`, against XLA:GPU's own
deviceless compile of the same lowered program in the same run (`compile_for_gpu`'s
`xla_compile_s`: `Lowered.compile` alone; needs jax's CUDA plugin, else exit 2): the ratio
per module, its median and worst. Goal: no module simulated slower than XLA:GPU compiles it.

    .venv/bin/python scripts/bench_fusion.py [--program NAME ...] [--shared-pre] [--out rows.csv] [--json]
    .venv/bin/python scripts/bench_fusion.py --speed [--program NAME ...] [--device h100-sxm] [--repeats N] [--out rows.csv]
    .venv/bin/python scripts/bench_fusion.py --scaling [--layers 6 12 24 48] [--model NAME]

Scaling mode (`--scaling`): the zoo's transformer gradient with 6 to 48
layers (48: about 11.5k unfused instructions); simulate time with the
fastest registered cost model against XLA:CPU's compile of the same module,
and how the time grows with the number of instructions.

Models that promise to price kernels by content (`prices_by_content`, as
`xla-gpu` and `roofline` do) are asked once per distinct kernel: the 48
layers repeat the same kernels, so the model cost stays flat with depth. Two
more rows per size show what a program without repeated kernels would cost:

- `<model>/instr`: the same model with content pricing off (every kernel
  object priced once per version, as before content ids);
- `bytes`: a tiny analytic model defined here (launch + bytes / bandwidth,
  priced without building any fusion, no content pricing): the cost of the
  simulation machinery itself (queue, legality rules, graph edits), with
  next to no model cost.

Goals: every corpus module at most 1 s with `xla-gpu`; at most 1 s for 48
layers; near-linear growth (log-log slope near 1).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GPU_H100 = ROOT / "hlo_fixtures" / "gpu_h100"

_FREE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast"})


@dataclass(frozen=True)
class BytesModel:
    """launch + bytes / bandwidth per kernel; a fused pair's bytes from operand lists alone (no fusion built)."""

    name: str = "bytes (analytic, in this script)"
    launch_s: float = 1e-6
    bandwidth: float = 3.35e12

    def _t(self, operands, out) -> float:
        return self.launch_s + (sum(o.shape.byte_size for o in operands) + out.shape.byte_size) / self.bandwidth

    def estimate(self, kernel, device):
        from xla_costmodel.models import KernelEstimate

        if kernel.opcode in _FREE:
            return KernelEstimate.free()
        t = self._t({id(o): o for o in kernel.operands}.values(), kernel)
        return KernelEstimate(compute_s=0.0, memory_s=t - self.launch_s, launch_s=self.launch_s, time_s=t,
                              bound="memory")

    def estimate_fusion(self, producer, consumers, device):
        from xla_costmodel.models import FusionEstimate

        p = self.estimate(producer, device).time_s
        cs, fs = [], []
        for c in consumers:
            cs.append(self.estimate(c, device).time_s)
            ops = {id(o): o for o in c.operands if o is not producer}
            for o in producer.operands:
                ops.setdefault(id(o), o)
            fs.append(self._t(ops.values(), c))
        return FusionEstimate(time_unfused_s=p + sum(cs), time_fused_s=sum(fs), producer_s=p,
                              consumers_s=tuple(cs), fused_consumers_s=tuple(fs))


class PerInstruction:
    """`model` with content-keyed pricing off: every kernel object is priced (once per version)."""

    def __init__(self, model):
        self.model = model
        self.name = f"{getattr(model, 'name', model)}/instr"

    def estimate(self, kernel, device):
        return self.model.estimate(kernel, device)

    def estimate_fusion(self, producer, consumers, device):
        return self.model.estimate_fusion(producer, consumers, device)

    def __getattr__(self, item):  # the model's pair pricer and cache hooks, but not its promise
        if item == "prices_by_content":
            raise AttributeError(item)
        return getattr(self.model, item)


def best_of(fn, repeats: int):
    best, out = math.inf, None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def speed_row(program: str, size: str, model: str, device: str, repeats: int = 1, **options) -> dict:
    """Simulate time of one corpus module against XLA:GPU's deviceless compile of the same module: the
    module jax lowers the program to for `device` (`lower_for_gpu`), fused by `simulate_fusion`, and
    XLA:GPU's compile of it (`compile_for_gpu`'s `xla_compile_s`: `Lowered.compile` alone, jax's
    tracing and lowering left out on both sides); each the best of `repeats` runs. `options`: more
    `simulate_fusion` arguments (`gemm_rewrites`, `triton_softmax`: XLA's compile runs its own either way)."""
    import jax

    from xla_costmodel import simulate_fusion
    from xla_costmodel.gpu_compile import compile_for_gpu, lower_for_gpu

    fn, fargs = _corpus().get_program(program).build(size)
    jitted = jax.jit(fn)
    pre = lower_for_gpu(jitted, *fargs, device=device)
    row: dict = {"program": program, "size": size,
                 "instructions": sum(len(c.instructions) for c in pre.computations)}

    def compile_once() -> float:
        jax.clear_caches()  # else a repeat is answered from jax's in-process compile cache in microseconds
        return compile_for_gpu(jax.jit(fn), *fargs, device=device).xla_compile_s

    row["xla_gpu_compile_s"] = min(compile_once() for _ in range(repeats))
    row["simulate_s"] = best_of(lambda: simulate_fusion(pre, device=device, model=model, price_totals=False,
                                                        **options), repeats)[0]
    row["ratio_to_gpu_compile"] = row["simulate_s"] / row["xla_gpu_compile_s"]
    row["simulate_us_per_instruction"] = 1e6 * row["simulate_s"] / row["instructions"]
    return row


def _corpus():
    from xla_costmodel import corpus

    return corpus


def _rows_per_module(args, make_row, show: bool = False):
    """One row per selected shared module (`make_row(program, size)`), a failing module reported as its error
    (one module failing must not hide the others); written to `args.out` as CSV when given."""
    import pandas as pd

    jobs = shared_modules(set(args.program) if args.program else None)
    if not jobs:
        raise SystemExit("bench_fusion: no shared module selected")
    rows = []
    for program, size in jobs:
        try:
            rows.append(make_row(program, size))
        except Exception as exc:  # noqa: BLE001 - reported per module
            rows.append({"program": program, "size": size, "error": f"{type(exc).__name__}: {exc}"[:160]})
        if show:
            print(f"{program}@{size}: " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                                      for k, v in rows[-1].items() if k not in ("program", "size")),
                  file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    return df


def speed_main(args) -> int:
    import pandas as pd

    from xla_costmodel.gpu_compile import gpu_compile_unavailable_reason

    reason = gpu_compile_unavailable_reason()
    if reason is not None:
        print(f"bench_fusion --speed: XLA:GPU cannot compile here, so there is no peer to time: {reason}",
              file=sys.stderr)
        return 2
    model = args.model or "xla-gpu"
    options = {"gemm_rewrites": args.gemm_rewrites, "triton_softmax": args.triton_softmax}
    df = _rows_per_module(args, lambda program, size: speed_row(program, size, model, args.device, args.repeats,
                                                                **options), show=True)
    ok = df[df["error"].isna()] if "error" in df else df
    ok = ok.sort_values("ratio_to_gpu_compile", ascending=False)
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(ok.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    for r in df[~df.index.isin(ok.index)].itertuples():
        print(f"failed: {r.program}@{r.size}: {r.error}")
    flags = "".join(f", {k}=True" for k, v in options.items() if v)
    print(f"\nmodel {model}, device {args.device}{flags}; {len(ok)} modules, {len(df) - len(ok)} failed")
    ratio = ok["ratio_to_gpu_compile"]
    worst = ok.iloc[0]
    print(f"simulate / XLA:GPU compile (same module, same run): median {ratio.median():.2f}, "
          f"worst {ratio.max():.2f} ({worst['program']}@{worst['size']}: {worst['simulate_s']:.2f} s against "
          f"{worst['xla_gpu_compile_s']:.2f} s)")
    print(f"simulate s: max {ok['simulate_s'].max():.2f}, median {ok['simulate_s'].median():.3f}; "
          f"XLA:GPU compile s: max {ok['xla_gpu_compile_s'].max():.2f}, median {ok['xla_gpu_compile_s'].median():.3f}")
    per = ok["simulate_us_per_instruction"]
    spread = per.max() / per.median()
    verdict = "near-linear" if spread <= 4 else "NOT linear: the slowest modules cost far more per instruction"
    print(f"us per instruction: median {per.median():.1f}, max {per.max():.1f} ({spread:.0f}x the median: {verdict})")
    # Growth with size across the corpus, beside XLA:GPU's compile of the same modules (1 = linear).
    n, sim, xla = list(ok["instructions"]), list(ok["simulate_s"]), list(ok["xla_gpu_compile_s"])
    print(f"log-log slope against instructions, all modules: simulate {slope(n, sim):.2f}, "
          f"XLA:GPU compile {slope(n, xla):.2f}")
    slower = ok[ratio > 1]
    print(f"goal: every module simulated in at most XLA:GPU's compile time: "
          f"{'PASS' if slower.empty else 'MISS'} ({len(slower)} of {len(ok)} slower"
          + (": " + ", ".join(f"{r.program}@{r.size} {r.ratio_to_gpu_compile:.2f}x" for r in slower.itertuples())
             if len(slower) else "") + ")")
    return 0


def slope(xs, ys) -> float:
    """Least-squares slope of log(y) against log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    num = sum((a - mx) * (b - my) for a, b in zip(lx, ly))
    den = sum((a - mx) ** 2 for a in lx)
    return num / den if den else math.nan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--scaling", action="store_true", help="the transformer scaling run instead of the corpus")
    parser.add_argument("--program", nargs="+", default=None, help="corpus mode: only these programs")
    parser.add_argument("--shared-pre", action="store_true",
                        help="corpus mode: also simulate the lowered module XLA:GPU compiled (no metadata)")
    parser.add_argument("--out", default=None, help="corpus mode: write the rows to this CSV file")
    parser.add_argument("--layers", type=int, nargs="+", default=[6, 12, 24, 48])
    parser.add_argument("--model", default=None, help="cost model (default: xla-gpu for the corpus; "
                                                      "the fastest registered one for --scaling)")
    parser.add_argument("--device", default="h100-sxm")
    parser.add_argument("--repeats", type=int, default=1,
                        help="best of N simulations per size (--scaling), of N simulations and N XLA:GPU compiles "
                             "per module (--speed)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--gemm-rewrites", action="store_true",
                        help="--speed: simulate_fusion(gemm_rewrites=True) (XLA's GEMM passes)")
    parser.add_argument("--triton-softmax", action="store_true",
                        help="--speed: simulate_fusion(triton_softmax=True) (XLA's softmax rewriter and Triton "
                             "fusion with its tiling search)")
    parser.add_argument("--speed", action="store_true",
                        help="corpus mode, speed only: simulate time per module against XLA:GPU's deviceless "
                             "compile of the same module, in the same run, and per instruction (no comparison "
                             "with XLA:GPU's fusion; needs jax's CUDA plugin)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if (args.gemm_rewrites or args.triton_softmax) and not args.speed:
        parser.error("--gemm-rewrites and --triton-softmax are options of --speed")
    if args.speed:
        return speed_main(args)
    if not args.scaling:
        return corpus_main(args)

    import jax

    from xla_costmodel import parse_hlo, simulate_fusion
    from xla_costmodel.models import model_names
    from xla_costmodel.zoo import transformer_grad

    sizes = sorted(args.layers)
    modules, compile_s = {}, {}
    for n in sizes:
        fn, fargs = transformer_grad(n)
        lowered = jax.jit(fn).lower(*fargs)
        modules[n] = parse_hlo(lowered.as_text(dialect="hlo"))
        t = time.perf_counter()
        lowered.compile()
        compile_s[n] = time.perf_counter() - t

    def sim(n, model):
        return simulate_fusion(modules[n], device=args.device, model=model, price_totals=False)

    if args.model is None:
        candidates = [m for m in ("roofline", "xla-gpu") if m in model_names()] or list(model_names())[:1]
        timings = {m: best_of(lambda: sim(sizes[0], m), 1)[0] for m in candidates}
        model = min(timings, key=timings.get)
        picked = ", ".join(f"{m} {t:.2f} s" for m, t in timings.items())
    else:
        model, picked = args.model, "given"

    from xla_costmodel.models import get_model

    per_instruction = PerInstruction(get_model(model))
    rows = []
    for label, m in ((model, model), (per_instruction.name, per_instruction), ("bytes", BytesModel())):
        for n in sizes:
            secs, result = best_of(lambda: sim(n, m), args.repeats)
            instructions = sum(len(c.instructions) for c in modules[n].computations)
            rows.append({
                "model": label, "layers": n, "instructions": instructions, "steps": int(len(result.steps)),
                "kernels_after": result.kernels_after, "model_calls": result.model_calls,
                "simulate_s": secs, "xla_cpu_compile_s": compile_s[n], "ratio": secs / compile_s[n],
            })
    growth = {}
    for label in (model, per_instruction.name, "bytes"):
        rs = [r for r in rows if r["model"] == label]
        growth[label] = slope([r["instructions"] for r in rs], [r["simulate_s"] for r in rs])
        for prev, cur in zip(rs, rs[1:]):
            cur["growth"] = (cur["simulate_s"] / prev["simulate_s"]) / (cur["instructions"] / prev["instructions"])

    if args.json:
        print(json.dumps({"model": model, "picked_by": picked, "rows": rows, "loglog_slope": growth}, indent=1))
        return 0
    print(f"jax {jax.__version__}; device {args.device}; model {model} (fastest of: {picked})")
    head = (f"{'model':<14} {'layers':>6} {'instr':>7} {'steps':>6} {'kernels':>7} {'calls':>7} "
            f"{'simulate s':>10} {'XLA CPU compile s':>17} {'ratio':>6} {'growth':>7}")
    print(head)
    for r in rows:
        g = r.get("growth")
        print(f"{r['model'][:14]:<14} {r['layers']:>6} {r['instructions']:>7} {r['steps']:>6} {r['kernels_after']:>7} "
              f"{r['model_calls']:>7} {r['simulate_s']:>10.3f} {r['xla_cpu_compile_s']:>17.3f} {r['ratio']:>6.2f} "
              f"{'' if g is None else f'{g:.2f}':>7}")
    print("growth: (time ratio) / (size ratio) between consecutive sizes; 1.00 = linear")
    print("log-log slope of time against instructions: " + ", ".join(f"{k} {v:.2f}" for k, v in growth.items()))
    largest = max(sizes)
    best = [r for r in rows if r["model"] == model and r["layers"] == largest][0]
    print(f"goal: <= 1 s at 48 layers (here {largest} layers: {best['simulate_s']:.2f} s with {model}); "
          f"near-linear growth (slope {growth[model]:.2f})")
    return 0


# ---------------------------------------------------------------------------
# Corpus mode: against XLA:GPU's fusion of the same programs


def shared_modules(programs=None) -> list[tuple[str, str]]:
    """(program, size) of every XLA:GPU module shipped in `hlo_fixtures/gpu_h100`."""
    out = []
    for p in sorted(GPU_H100.glob("*.post.hlo.gz")):
        program, size = p.name[: -len(".post.hlo.gz")].split("@")
        if programs is None or program in programs:
            out.append((program, size))
    return out


def _read(path: Path) -> str:
    with gzip.open(path, "rt") as f:
        return f.read()


def same_kernels(table) -> int:
    """XLA kernels whose matched instructions are exactly those of one of our kernels."""
    ours = {frozenset(g) for _, g in table.groupby("kernel_ours")["instruction"]}
    return sum(1 for _, g in table.groupby("kernel_xla")["instruction"] if frozenset(g) in ours)


def corpus_row(program: str, size: str, model: str, device: str, shared_pre: bool) -> dict:
    import jax

    from xla_costmodel import compare_with_xla, corpus, parse_hlo, simulate_fusion
    from xla_costmodel.fusion import kernels_of
    from xla_costmodel.fusion.conformance import xla_gpu_kernel_kind, xla_gpu_kernels

    row: dict = {"program": program, "size": size}
    stem = GPU_H100 / f"{program}@{size}"
    post = parse_hlo(_read(Path(f"{stem}.post.hlo.gz")))
    xla = xla_gpu_kernels(kernels_of(post))
    row["kernels_xla_gpu"] = int(xla.sum())
    for kind in ("fusion", "multi-output", "op", "triton", "triton-gemm", "library", "copy"):
        row[f"xla_{kind}"] = int(xla.get(kind, 0))
    # kernels multi-output fusion saved XLA:GPU: each such fusion computes what would otherwise be
    # one kernel per output
    row["xla_multi_output_saved"] = sum(
        len(k.fused_computation.root.operands) - 1 for k in kernels_of(post)
        if k.opcode == "fusion" and xla_gpu_kernel_kind(k) == "multi-output")

    fn, fargs = corpus.get_program(program).build(size)
    lowered = jax.jit(fn).lower(*fargs)
    pre = parse_hlo(lowered.as_text(dialect="hlo", debug_info=True))
    row["instructions"] = sum(len(c.instructions) for c in pre.computations)
    t = time.perf_counter()
    compiled = lowered.compile()
    row["xla_cpu_compile_s"] = time.perf_counter() - t
    row["kernels_xla_cpu"] = sum(1 for _ in kernels_of(parse_hlo(compiled.as_text())))

    t = time.perf_counter()
    result = simulate_fusion(pre, device=device, model=model, price_totals=False)
    row["simulate_s"] = time.perf_counter() - t
    row["ratio_to_cpu_compile"] = row["simulate_s"] / row["xla_cpu_compile_s"]
    row["kernels_ours"] = sum(1 for _ in kernels_of(result.module))
    row["ours_not_simulated"] = len(result.not_simulated)

    c = compare_with_xla(result, post)
    row.update(
        ours_instructions=c.ours_instructions, matched=c.matched, by_op_name=c.matched_by_op_name,
        by_name=c.matched_by_name, by_structure=c.matched_by_structure, unmatched=len(c.unmatched), ari=c.ari,
        same_kernels=same_kernels(c.table),
        unmatched_opcodes=" ".join(f"{op}:{n}" for op, n in c.unmatched["opcode"].value_counts().head(4).items()),
    )
    if shared_pre:
        try:
            shared = parse_hlo(_read(Path(f"{stem}.pre.hlo.gz")))
        except Exception as exc:  # noqa: BLE001 - reported per module (a module our parser refuses)
            row["kernels_ours_shared_pre"] = math.nan
            row["shared_pre_error"] = f"{type(exc).__name__}: {exc}"[:120]
        else:
            r2 = simulate_fusion(shared, device=device, model=model, price_totals=False)
            row["kernels_ours_shared_pre"] = sum(1 for _ in kernels_of(r2.module))
            row["ari_shared_pre"] = compare_with_xla(r2, post).ari
    return row


def corpus_main(args) -> int:
    import jax
    import pandas as pd

    model = args.model or "xla-gpu"
    df = _rows_per_module(args, lambda program, size: corpus_row(program, size, model, args.device,
                                                                 args.shared_pre), show=True)
    ok = df[df["error"].isna()] if "error" in df else df
    summary = corpus_summary(ok)
    summary["failed"] = {f"{r.program}@{r.size}": r.error for r in df[df.index.isin(ok.index) == False].itertuples()}  # noqa: E712
    if args.json:
        print(json.dumps({"jax": jax.__version__, "model": model, "device": args.device, "summary": summary,
                          "rows": json.loads(df.to_json(orient="records"))}, indent=1))
        return 0
    cols = ["program", "size", "instructions", "kernels_ours", "kernels_xla_gpu", "kernels_xla_cpu",
            "ours_not_simulated", "xla_triton-gemm", "xla_library", "xla_triton", "xla_multi-output", "xla_copy",
            "matched", "by_op_name", "by_structure", "unmatched", "ari", "same_kernels",
            "simulate_s", "xla_cpu_compile_s", "ratio_to_cpu_compile"]
    if args.shared_pre:
        cols.insert(4, "kernels_ours_shared_pre")
    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_columns", 40):
        print(ok[[c for c in cols if c in ok]].to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    print(f"\njax {jax.__version__} here (XLA:GPU modules: jax 0.11.2 on an H100); model {model}, device {args.device}")
    for k, v in summary.items():
        print(f"{k}: {v}")
    return 0


def corpus_summary(ok) -> dict:
    """The figures the corpus rows add up to."""
    if not len(ok):
        return {}
    ratio = ok["kernels_ours"] / ok["kernels_xla_gpu"]
    # Kernels made by the same kind of pass on both sides: ours less those XLA:GPU makes with
    # passes before fusion (GEMM, convolution, ... rewriting), XLA's less those and its copies.
    ours_fused = ok["kernels_ours"] - ok["ours_not_simulated"]
    xla_fused = ok["kernels_xla_gpu"] - ok["xla_triton-gemm"] - ok["xla_library"] - ok["xla_copy"]
    out = {
        "modules": len(ok),
        "kernels ours / XLA:GPU (mean of per-module ratios)": round(float(ratio.mean()), 3),
        "modules with XLA:GPU's kernel count": f"{int((ok['kernels_ours'] == ok['kernels_xla_gpu']).sum())}",
        "modules within 10% of it": f"{int(((ratio - 1).abs() <= 0.1).sum())}",
        "kernels, all modules: ours / XLA:GPU / XLA:CPU": (
            f"{int(ok['kernels_ours'].sum())} / {int(ok['kernels_xla_gpu'].sum())} / {int(ok['kernels_xla_cpu'].sum())}"),
        "ours that XLA:GPU makes before fusion (dots, convolutions, ...)": int(ok["ours_not_simulated"].sum()),
        "XLA:GPU's Triton GEMM fusions + library calls": int(ok["xla_triton-gemm"].sum() + ok["xla_library"].sum()),
        "XLA:GPU's copies (copy insertion, after fusion)": int(ok["xla_copy"].sum()),
        "XLA:GPU's multi-output fusions (after priority fusion), kernels they saved": (
            f"{int(ok['xla_multi-output'].sum())}, {int(ok['xla_multi_output_saved'].sum())}"),
        "XLA:GPU's Triton block-level fusions (a rewriter before fusion)": int(ok["xla_triton"].sum()),
        "fusion-pass kernels ours / XLA:GPU (mean ratio; both less GEMM/library kernels, XLA's less copies)": round(
            float((ours_fused / xla_fused.where(xla_fused > 0)).mean()), 3),
        "instructions matched (by op_name / name / structure) of ours": (
            f"{int(ok['matched'].sum())} ({int(ok['by_op_name'].sum())} / {int(ok['by_name'].sum())} / "
            f"{int(ok['by_structure'].sum())}) of {int(ok['ours_instructions'].sum())}"),
        "unmatched instructions of ours": int(ok["unmatched"].sum()),
        "ARI (median over modules)": round(float(ok["ari"].median()), 3),
        "XLA:GPU kernels reproduced exactly": f"{int(ok['same_kernels'].sum())} of {int(ok['kernels_xla_gpu'].sum())}",
        "simulate s: max, median": f"{ok['simulate_s'].max():.2f}, {ok['simulate_s'].median():.3f}",
        "modules over 1 s": ", ".join(f"{r.program}@{r.size} ({r.simulate_s:.1f} s)"
                                      for r in ok[ok["simulate_s"] > 1].itertuples()) or "none",
        "simulate / XLA:CPU compile: median, max": (
            f"{ok['ratio_to_cpu_compile'].median():.2f}, {ok['ratio_to_cpu_compile'].max():.2f}"),
    }
    if "kernels_ours_shared_pre" in ok:
        sp = ok["kernels_ours_shared_pre"] / ok["kernels_xla_gpu"]
        out["kernels ours (XLA:GPU's lowered module) / XLA:GPU (mean ratio)"] = round(float(sp.mean()), 3)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
