#!/usr/bin/env python
"""Cost-analysis time of `xla_costmodel.module_cost` against XLA's C++ HloCostAnalysis (jaxlib), same run.

Builds the 48-layer transformer gradient from the zoo, lowers it (and, with
`--optimized`, compiles it: minutes on a small host), then on the same text
times

- ours: `module_cost(module)` on a freshly parsed `HloModule` each repeat, so
  the lazily read attributes are read inside the timing (cold), and again on
  an already analysed module (warm);
- XLA: jaxlib's `hlo_module_cost_analysis(cpu_client, module)` on a module
  parsed by `hlo_module_from_text`;

best of N each, checks that both give the same flops / transcendentals /
bytes accessed, and prints the ratio (goal: within 5x). Parse times are
printed too, for the end-to-end picture.

    .venv/bin/python scripts/bench_cost_analysis.py [--layers 48] [--repeats 7] [--optimized] [--hlo FILE] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def best_of(fn, repeats: int, setup=None) -> float:
    best = float("inf")
    for _ in range(repeats):
        arg = setup() if setup is not None else None
        gc.collect()
        t = time.perf_counter()
        fn(arg) if setup is not None else fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench(label: str, text: str, repeats: int) -> dict:
    from jax._src.lib import hlo as xla_hlo

    import xla_costmodel as xc
    from xla_costmodel import _jaxlib_oracle as oracle
    from xla_costmodel.analysis import CostAnalysisWarning, module_cost

    warnings.simplefilter("ignore", CostAnalysisWarning)
    client = oracle.cpu_client()
    analyse = oracle._hlo_module_cost_analysis()
    xla_module = xla_hlo.hlo_module_from_text(text)

    # Interleaved, so that both see the same machine load; best of N each.
    xla_times, cold_times, warm_times = [], [], []
    warm_module = xc.parse_hlo(text)
    module_cost(warm_module, trip_counts=False)
    for _ in range(repeats):
        fresh = xc.parse_hlo(text)
        gc.collect()
        t = time.perf_counter()
        analyse(client, xla_module)
        xla_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        module_cost(fresh, trip_counts=False)
        cold_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        module_cost(warm_module, trip_counts=False)
        warm_times.append(time.perf_counter() - t)
    xla_s, ours_cold_s, ours_warm_s = min(xla_times), min(cold_times), min(warm_times)
    parse_ours_s = best_of(lambda: xc.parse_hlo(text), max(1, repeats // 2))
    parse_xla_s = best_of(lambda: xla_hlo.hlo_module_from_text(text), max(1, repeats // 2))

    ref = {str(k): float(v) for k, v in dict(analyse(client, xla_module)).items()}
    ours = module_cost(warm_module, trip_counts=False)
    same = {
        key: ours[ours_key] == ref.get(key, 0.0)
        for key, ours_key in (("flops", "flops"), ("transcendentals", "transcendentals"),
                              ("bytes accessed", "bytes_accessed"))
    }
    return {
        "module": label,
        "bytes": len(text),
        "instructions": sum(len(c.instructions) for c in warm_module.computations),
        "xla_cpp_s": xla_s,
        "ours_cold_s": ours_cold_s,
        "ours_warm_s": ours_warm_s,
        "ratio": ours_cold_s / xla_s,
        "ratio_warm": ours_warm_s / xla_s,
        "parse_ours_s": parse_ours_s,
        "parse_xla_s": parse_xla_s,
        "end_to_end_ratio": (parse_ours_s + ours_cold_s) / (parse_xla_s + xla_s),
        "totals_equal": same,
        "all_xla_properties_equal": ours["xla_properties"] == ref,
        "flops": ours["flops"],
        "bytes_accessed": ours["bytes_accessed"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--optimized", action="store_true",
                        help="also compile the module and benchmark the optimized text (slow)")
    parser.add_argument("--hlo", action="append", default=[], help="benchmark this HLO text file instead")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import jax

    texts: dict[str, str] = {}
    compile_s = None
    if args.hlo:
        for path in args.hlo:
            with open(path, encoding="utf-8") as f:
                texts[os.path.basename(path)] = f.read()
    else:
        from xla_costmodel.zoo import transformer_grad

        fn, fargs = transformer_grad(args.layers)
        lowered = jax.jit(fn).lower(*fargs)
        texts[f"transformer_grad({args.layers}) lowered"] = lowered.as_text(dialect="hlo")
        if args.optimized:
            t = time.perf_counter()
            compiled = lowered.compile()
            compile_s = time.perf_counter() - t
            texts[f"transformer_grad({args.layers}) optimized"] = compiled.as_text()

    rows = [bench(label, text, args.repeats) for label, text in texts.items()]
    if args.json:
        print(json.dumps({"jax": jax.__version__, "compile_s": compile_s, "rows": rows}, indent=1))
        return 0
    print(f"jax {jax.__version__}" + (f"; XLA CPU compile took {compile_s:.1f} s" if compile_s else ""))
    print(f"{'module':<36} {'MB':>6} {'instr':>7} {'XLA C++ s':>10} {'ours s':>8} {'ratio':>6} "
          f"{'warm s':>8} {'ratio':>6} {'e2e ratio':>9}  totals equal")
    for r in rows:
        print(
            f"{r['module']:<36} {r['bytes'] / 1e6:>6.2f} {r['instructions']:>7} {r['xla_cpp_s']:>10.4f} "
            f"{r['ours_cold_s']:>8.4f} {r['ratio']:>6.2f} {r['ours_warm_s']:>8.4f} {r['ratio_warm']:>6.2f} "
            f"{r['end_to_end_ratio']:>9.2f}  {all(r['totals_equal'].values())}"
        )
    print("ratio = ours (fresh module) / XLA's C++ HloCostAnalysis, best of "
          f"{args.repeats}; e2e = (parse + cost) / (parse + cost). Goal: ratio within 5x.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
