#!/usr/bin/env python
"""Fusion decisions, predicted totals and agreement with XLA on the zoo, as one JSON file, to compare two trees.

For every zoo program: `simulate_fusion` (h100-sxm, xla-gpu by default) on its
`pre` and `post` fixtures (steps, kernel grouping, rejections, kernels and
predicted time before and after), and `compare_with_xla` of the program
lowered with metadata against XLA's own CPU grouping (the `post` fixture):
adjusted Rand index, matched instructions, kernel counts.

    .venv/bin/python scripts/fusion_zoo_snapshot.py OUT.json [--model xla-gpu] [--device h100-sxm]
    .venv/bin/python scripts/fusion_zoo_snapshot.py --compare BEFORE.json AFTER.json

`--compare` prints every program whose decisions, totals or agreement differ,
and the sums and mean agreement of both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
ROOT = Path(__file__).resolve().parent.parent


def snapshot(model: str, device: str) -> dict:
    import jax

    from xla_costmodel import compare_with_xla, simulate_fusion
    from xla_costmodel.fusion import kernel_assignment
    from xla_costmodel.hlo import load_hlo, parse_hlo
    from xla_costmodel.zoo import get_program, program_names

    fixtures = ROOT / "hlo_fixtures"
    out = {}
    for name in program_names():
        row = {}
        for tag in ("pre", "post"):
            r = simulate_fusion(load_hlo(fixtures / f"{name}.{tag}.hlo"), device=device, model=model)
            groups = kernel_assignment(r.module, dict(r.origin)).groupby("kernel")["instruction"]
            row[tag] = {
                "steps": [[s.producer, s.consumers] for s in r.steps.itertuples()],
                "groups": sorted(sorted(set(g)) for _, g in groups),
                "rejected": sorted([p, rule] for p, rule in zip(r.rejected["producer"], r.rejected["rule"])),
                "kernels_before": r.kernels_before, "kernels_after": r.kernels_after,
                "time_before_s": r.time_before_s, "time_after_s": r.time_after_s,
            }
        fn, args = get_program(name).build()
        lowered = parse_hlo(jax.jit(fn).lower(*args).as_text(dialect="hlo", debug_info=True))
        c = compare_with_xla(simulate_fusion(lowered, device=device, model=model, price_totals=False),
                             fixtures / f"{name}.post.hlo")
        row["xla"] = {"ari": c.ari, "matched": c.matched, "kernels_ours": c.kernels_ours, "kernels_xla": c.kernels_xla}
        out[name] = row
        print(f"{name}: {row['pre']['kernels_after']} kernels, {row['pre']['time_after_s'] * 1e6:.3f} us; "
              f"ARI {c.ari:.3f}", file=sys.stderr)
    return {"model": model, "device": device, "programs": out}


def _totals(snap: dict) -> str:
    progs = snap["programs"].values()
    return (f"pre {sum(p['pre']['time_before_s'] for p in progs) * 1e6:,.3f} -> "
            f"{sum(p['pre']['time_after_s'] for p in progs) * 1e6:,.3f} us, "
            f"{sum(p['pre']['kernels_after'] for p in progs)} kernels; "
            f"post -> {sum(p['post']['time_after_s'] for p in progs) * 1e6:,.3f} us; "
            f"mean ARI vs XLA {statistics.mean(p['xla']['ari'] for p in progs):.4f}")


def compare(a: dict, b: dict) -> int:
    changed = 0
    for name, x in a["programs"].items():
        y = b["programs"].get(name)
        if y is None:
            print(f"{name}: only in the first")
            continue
        for tag in ("pre", "post"):
            diff = [k for k in ("steps", "groups", "rejected", "kernels_before", "kernels_after") if x[tag][k] != y[tag][k]]
            for k in ("time_before_s", "time_after_s"):
                if abs(x[tag][k] - y[tag][k]) > 1e-12 * abs(x[tag][k]):
                    diff.append(k)
            if diff:
                changed += 1
                print(f"{name} {tag}: {', '.join(diff)} differ "
                      f"({x[tag]['time_after_s'] * 1e6:.4f} -> {y[tag]['time_after_s'] * 1e6:.4f} us)")
        if x["xla"] != y["xla"]:
            changed += 1
            print(f"{name}: agreement {x['xla']} -> {y['xla']}")
    print(f"first:  {_totals(a)}\nsecond: {_totals(b)}\n{changed} differences")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", type=Path, help="where to write the snapshot (JSON)")
    p.add_argument("--model", default="xla-gpu")
    p.add_argument("--device", default="h100-sxm")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = p.parse_args(argv)
    if args.compare:
        a, b = (json.loads(f.read_text()) for f in args.compare)
        return compare(a, b)
    if args.out is None:
        p.error("give OUT.json, or --compare BEFORE AFTER")
    warnings.simplefilter("ignore")
    snap = snapshot(args.model, args.device)
    args.out.write_text(json.dumps(snap, indent=0) + "\n")
    print(_totals(snap))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
