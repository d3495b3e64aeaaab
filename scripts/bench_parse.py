#!/usr/bin/env python
"""Parse time of our HLO parser against XLA's C++ parser (jaxlib), in the same run.

Builds the 48-layer transformer gradient from the zoo (both the lowered and the
optimized module), then times `xla_costmodel.parse_hlo` and jaxlib's
`hlo_module_from_text` on the same text, best of N, and prints the ratio.
Also times the token parser alone (the fallback for hand-written text).

    .venv/bin/python scripts/bench_parse.py [--layers 48] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import time


def best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import jax
    from jax._src.lib import hlo as xla_hlo

    import xla_costmodel as xc
    from xla_costmodel.hlo._parser import parse_hlo_tokens
    from xla_costmodel.zoo import transformer_grad

    fn, fargs = transformer_grad(args.layers)
    lowered = jax.jit(fn).lower(*fargs)
    t = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t
    texts = {"lowered": lowered.as_text(dialect="hlo"), "optimized": compiled.as_text()}

    rows = []
    for kind, text in texts.items():
        ours = best_of(lambda: xc.parse_hlo(text), args.repeats)
        xla = best_of(lambda: xla_hlo.hlo_module_from_text(text), args.repeats)
        tokens = best_of(lambda: parse_hlo_tokens(text), max(1, args.repeats // 2))
        module = xc.parse_hlo(text)
        rows.append(
            {
                "module": f"transformer_grad({args.layers}) {kind}",
                "bytes": len(text),
                "instructions": sum(len(c.instructions) for c in module.computations),
                "ours_s": ours,
                "xla_cpp_s": xla,
                "ratio": ours / xla,
                "token_parser_s": tokens,
                "token_ratio": tokens / xla,
            }
        )
    if args.json:
        print(json.dumps({"rows": rows, "compile_s": compile_s}, indent=1))
        return 0
    print(f"jax {jax.__version__}; XLA CPU compile of the module took {compile_s:.2f} s")
    print(f"{'module':<36} {'MB':>6} {'instr':>7} {'ours s':>8} {'XLA C++ s':>10} {'ratio':>6} {'tokens s':>9} {'ratio':>6}")
    for r in rows:
        print(
            f"{r['module']:<36} {r['bytes'] / 1e6:>6.2f} {r['instructions']:>7} {r['ours_s']:>8.3f} "
            f"{r['xla_cpp_s']:>10.3f} {r['ratio']:>6.2f} {r['token_parser_s']:>9.3f} {r['token_ratio']:>6.2f}"
        )
    print("goal: ours within 3x of XLA's C++ parser")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
