#!/usr/bin/env python
"""How far XLA's greedy priority fusion is from the best fusion plan found, per fixture.

For every `hlo_fixtures/*.pre.hlo` (or the names given), runs
`search_fusion` (exact enumeration of the legal plans of each computation
with at most `--exact-max-edges` candidate producers, simulated annealing
seeded with greedy's plan on the others, within `--budget` seconds) and
prints one row per fixture: greedy's predicted total (`simulate_fusion`,
measured in the same run: the peer), the best found, the gap
(greedy / best - 1, in %), plans evaluated, exact or heuristic, and seconds.
With `--validate`, each best plan also goes through `check_plan_validity`
(jaxlib parser, jaxlib cost analysis: fewer bytes, same outputs on the CPU).

    .venv/bin/python scripts/bench_fusion_search.py [NAME ...] [--budget 5] [--exact-max-edges 14]
        [--model xla-gpu] [--device h100-sxm] [--validate] [--json]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="fixture names (default: all *.pre.hlo)")
    ap.add_argument("--budget", type=float, default=5.0, help="search budget per fixture, seconds (default 5)")
    ap.add_argument("--exact-max-edges", type=int, default=14)
    ap.add_argument("--model", default="xla-gpu")
    ap.add_argument("--device", default="h100-sxm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--validate", action="store_true", help="check every best plan with jaxlib")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import pandas as pd

    from xla_costmodel.fusion import check_plan_validity, search_fusion
    from xla_costmodel.hlo import load_hlo

    fixtures = ROOT / "hlo_fixtures"
    paths = (
        [fixtures / f"{n.removesuffix('.pre.hlo')}.pre.hlo" for n in args.names]
        if args.names else sorted(fixtures.glob("*.pre.hlo"))
    )
    rows = []
    for path in paths:
        module = load_hlo(path)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = search_fusion(module, device=args.device, model=args.model, budget_s=args.budget,
                              exact_max_edges=args.exact_max_edges, seed=args.seed)
        seconds = time.perf_counter() - t0
        row = {
            "fixture": path.name.removesuffix(".pre.hlo"),
            "producers": int(r.computations["producers"].sum()),
            "greedy_us": r.greedy_time_s * 1e6,
            "best_us": r.time_s * 1e6,
            "gap_pct": r.gap_pct,
            "plans": r.plans_evaluated,
            "method": r.method,
            "seconds": seconds,
        }
        if args.validate:
            v = check_plan_validity(module, r.module)
            row["valid"] = "ok" if v.ok and v.outputs_match else ("ok (not run)" if v.ok else "FAIL")
        rows.append(row)
        if not args.json:
            print(f"  {row['fixture']}: {row['method']}, gap {row['gap_pct']:.2f}%", flush=True)
    df = pd.DataFrame(rows)
    if args.json:
        print(df.to_json(orient="records", indent=1))
        return 0
    with pd.option_context("display.max_rows", 200, "display.width", 200):
        print()
        print(df.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    total_g, total_b = df["greedy_us"].sum(), df["best_us"].sum()
    print(
        f"\n{args.model} on {args.device}, budget {args.budget:g} s: greedy is {100 * (total_g / total_b - 1):.2f}% "
        f"slower than the best plans found over all fixtures (ratio greedy/best {total_g / total_b:.4f}); "
        f"{(df['gap_pct'] > 1e-9).sum()} of {len(df)} fixtures have a gap; "
        f"{(df['method'] == 'exact').sum()} searched exactly"
    )
    if args.validate:
        print(f"validity: {(df['valid'] != 'FAIL').sum()} of {len(df)} plans pass")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
