#!/usr/bin/env python
"""Priority-fusion simulation time against jaxlib's CPU compile of the same module, and its growth with size.

Lowers the zoo's transformer gradient with 6, 12, 24 and 48 layers (48: about
11.5k unfused instructions), times `simulate_fusion` on each lowered module
with the fastest registered cost model (picked by timing them on the
smallest size) and XLA's CPU compile of the same lowered module
(`lowered.compile()`: XLA's whole CPU pipeline, its own fusion included), and
prints the ratio and how the time grows with the number of instructions.

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

    .venv/bin/python scripts/bench_fusion.py [--layers 6 12 24 48] [--model NAME] [--repeats 1] [--json]

Goals: at most 1 s for 48 layers; near-linear growth (log-log slope near 1).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
import warnings
from dataclasses import dataclass

os.environ.setdefault("JAX_PLATFORMS", "cpu")

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


def slope(xs, ys) -> float:
    """Least-squares slope of log(y) against log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    num = sum((a - mx) * (b - my) for a, b in zip(lx, ly))
    den = sum((a - mx) ** 2 for a in lx)
    return num / den if den else math.nan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[6, 12, 24, 48])
    parser.add_argument("--model", default=None, help="cost model (default: the fastest registered one)")
    parser.add_argument("--device", default="h100-sxm")
    parser.add_argument("--repeats", type=int, default=1, help="best of N simulations per size")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

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


if __name__ == "__main__":
    raise SystemExit(main())
