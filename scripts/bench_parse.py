#!/usr/bin/env python
"""Parse time of our HLO parser against XLA's C++ parser (jaxlib), measured in the same run.

Modules, in two groups:

- JAX-formatted: the zoo's transformer gradient (`--layers`) as JAX hands it
  out, lowered (`Lowered.as_text(dialect="hlo")`) and optimized
  (`Compiled.as_text()`);
- XLA-formatted: the same two modules printed by XLA's printer with its
  default options (`%` names, operand shapes: what XLA's dumps look like),
  XLA's `mobilenet_v2.hlo` benchmark module, and all modules of XLA's own
  tests that XLA's parser accepts (`hlo_fixtures/xla_tests`, timed as one
  batch: each module parsed once per repeat).

For each: best-of-N time of `parse_hlo(text, verify=False)` (the parser
alone, as XLA's `hlo_module_from_text` is), of `parse_hlo(text)` (the
default, which also runs the verifier rules we encode), and of jaxlib's
`hlo_module_from_text`, with the ratios. Times are this process's CPU time
(`time.process_time`; both parsers run on this thread), so that other work on
a shared machine does not land in one side of a ratio. The goals: at most 2x
XLA's C++ parser on any module XLA writes, and at most 1.5x with the
verifier on the transformer modules.

    .venv/bin/python scripts/bench_parse.py [--layers 48] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the package of this checkout, not an installed one
CORPUS = ROOT / "hlo_fixtures" / "xla_tests"
MOBILENET = CORPUS / "modules" / "tools__data__benchmarking__mobilenet_v2.hlo"
GOAL = 2.0
GOAL_WITH_VERIFY = 1.5  # on the transformer gradient's modules, parse_hlo() as called by default


def best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def transformer_texts(layers: int) -> tuple[dict[str, str], float]:
    """The lowered and optimized transformer gradient, as JAX prints them; and the compile time."""
    import jax

    from xla_costmodel.zoo import transformer_grad

    fn, fargs = transformer_grad(layers)
    lowered = jax.jit(fn).lower(*fargs)
    t = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t
    return {"lowered": lowered.as_text(dialect="hlo"), "optimized": compiled.as_text()}, compile_s


def corpus_texts() -> list[str]:
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    return [(CORPUS / e["file"]).read_text() for e in manifest["modules"] if e["xla_parser"] == "accepted"]


def measure(name: str, group: str, texts: list[str], repeats: int) -> dict:
    """Times for parsing every text of `texts` once (a batch when there are several)."""
    from jax._src.lib import hlo as xla_hlo

    import xla_costmodel as xc

    def parse(text: str, verify: bool) -> None:
        try:
            xc.parse_hlo(text, verify=verify)
        except xc.HloParseError:  # a module of XLA's verifier tests, refused by a verifier rule
            if not verify:
                raise

    def ours(verify: bool):
        return lambda: [parse(t, verify) for t in texts]

    parse_s = best_of(ours(False), repeats)
    default_s = best_of(ours(True), repeats)
    xla_s = best_of(lambda: [xla_hlo.hlo_module_from_text(t) for t in texts], repeats)
    modules = [xc.parse_hlo(t, verify=False) for t in texts]
    return {
        "module": name,
        "group": group,
        "modules": len(texts),
        "bytes": sum(map(len, texts)),
        "instructions": sum(len(c.instructions) for m in modules for c in m.computations),
        "parse_s": parse_s,
        "parse_and_verify_s": default_s,
        "xla_cpp_s": xla_s,
        "ratio": parse_s / xla_s,
        "ratio_with_verify": default_s / xla_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=48, help="transformer layers (default 48)")
    parser.add_argument("--repeats", type=int, default=5, help="best of this many runs (default 5)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()

    import jax

    from xla_costmodel._jaxlib_oracle import xla_module_to_text

    jax_texts, compile_s = transformer_texts(args.layers)
    cases = [(f"transformer_grad({args.layers}) {k}", "JAX-formatted", [t]) for k, t in jax_texts.items()]
    cases += [(f"transformer_grad({args.layers}) {k}, XLA's printer", "XLA-formatted", [xla_module_to_text(t)])
              for k, t in jax_texts.items()]
    cases.append(("mobilenet_v2.hlo (XLA's benchmark)", "XLA-formatted", [MOBILENET.read_text()]))
    corpus = corpus_texts()
    cases.append((f"XLA's test modules ({len(corpus)}, batch)", "XLA-formatted", corpus))
    rows = [measure(name, group, texts, args.repeats) for name, group, texts in cases]

    worst = {g: max(r["ratio"] for r in rows if r["group"] == g) for g in ("JAX-formatted", "XLA-formatted")}
    if args.json:
        print(json.dumps({"rows": rows, "worst_ratio": worst, "goal": GOAL, "compile_s": compile_s}, indent=1))
        return 0
    print(f"jax {jax.__version__}; ours = parse_hlo(verify=False), +verify = parse_hlo() (the default); "
          f"best of {args.repeats}")
    header = (f"{'group':<14} {'module':<46} {'MB':>6} {'instr':>7} {'XLA C++ s':>10} {'ours s':>8} {'ratio':>6} "
              f"{'+verify s':>10} {'ratio':>6}")
    print(header)
    for r in rows:
        print(f"{r['group']:<14} {r['module']:<46} {r['bytes'] / 1e6:>6.2f} {r['instructions']:>7} "
              f"{r['xla_cpp_s']:>10.4f} {r['parse_s']:>8.4f} {r['ratio']:>6.2f} {r['parse_and_verify_s']:>10.4f} "
              f"{r['ratio_with_verify']:>6.2f}")
    for group, ratio in worst.items():
        print(f"worst ratio, {group}: {ratio:.2f}x")
    met = worst["XLA-formatted"] <= GOAL
    print(f"goal: at most {GOAL:g}x XLA's C++ parser on modules XLA writes: {'met' if met else 'NOT met'}")
    verified = max(r["ratio_with_verify"] for r in rows if r["module"].startswith("transformer_grad"))
    print(f"worst ratio with the verifier, transformer_grad({args.layers}): {verified:.2f}x; goal at most "
          f"{GOAL_WITH_VERIFY:g}x: {'met' if verified <= GOAL_WITH_VERIFY else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
