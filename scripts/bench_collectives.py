#!/usr/bin/env python
"""Collective truth: the GPU models scored against XLA's measured collective table (H100 and B200).

    .venv/bin/python scripts/bench_collectives.py            # a few seconds
    .venv/bin/python scripts/bench_collectives.py --json out.json

Every measured row of `devices.collective_table` for the GPU (all-reduce,
all-gather, reduce-scatter and all-to-all over groups [1,8], [2,4], [4,2] of
one 8-GPU host, collective-permute in three patterns, 1 KiB to 2 GiB) is
written as the HLO collective XLA's generator timed
(`devices.collective_row_hlo`) and priced through the public model API. Its
measured time is bytes transferred / measured throughput. Scored:

- `xla-gpu`: XLA's NCCL ring model (`models._collectives.nccl_ring_time`)
  with this project's extensions for all-to-all and collective-permute;
- `xla-gpu strict`: `collective_extensions=False`, XLA's model as it is
  (all-to-all and collective-permute at the 5 µs launch alone);
- `roofline`: the bandwidth and latency bound (NVLink at its data-sheet rate);
  `under` is the share of rows it puts below the measurement (a bound should
  be 1.0);
- `xla-gpu-tables held out`: each row predicted from the table without that
  row (the same operation and groups at the other sizes, interpolated in
  bytes), never from itself;
- `xla-gpu-tables`: the model on the full table (the user path): every row
  must be priced from the table and come back at its measured time.

Metrics per operation, per size band and overall: `sk` (Stevens & Klöckner's
geometric-mean relative error), `ratio` (`ratio_error`), Kendall's tau, `w1.25` (share within
1.25x), `bias` (median p/m). Goal: `xla-gpu-tables held out` sk <= 0.15 on
the H100 table; the analytical model's error on the same rows is printed
next to it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings

import numpy as np
import pandas as pd

import xla_costmodel as xc
from xla_costmodel.fit import accuracy
from xla_costmodel.devices import collective_row_hlo, collective_table, get_device
from xla_costmodel.models.pricing import CollectiveTable
from xla_costmodel.models.pricing import describe_collective

DEVICES = ("h100-sxm", "b200")
BANDS = ((0, 64 << 10, "<= 64 KiB"), (64 << 10, 16 << 20, "64 KiB-16 MiB"), (16 << 20, math.inf, "> 16 MiB"))
GOAL_SK = 0.15


def score(p, m) -> dict:
    p, m = np.asarray(p, float), np.asarray(m, float)
    a = accuracy(p, m)
    within = float(np.mean(np.abs(np.log(p / m)) <= math.log(1.25) + 1e-12))
    return {"n": a["n"], "sk": a["sk_error"], "ratio": a["ratio_error"], "tau": a["kendall_tau"], "w1.25": within,
            "bias": a["bias"], "under": float(np.mean(p <= m))}


def predictions(device_name: str) -> pd.DataFrame:
    dev = get_device(device_name)
    rows = collective_table(device_name)
    rows = rows[rows["measured"]].reset_index(drop=True)
    models = {"xla-gpu": xc.get_model("xla-gpu"),
              "xla-gpu strict": xc.get_model("xla-gpu", collective_extensions=False),
              "roofline": xc.get_model("roofline"),
              "xla-gpu-tables": xc.get_model("xla-gpu-tables")}
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unpriced collective would be a bug here
        for i, r in enumerate(rows.itertuples(index=False)):
            k = xc.parse_hlo(collective_row_hlo(r)).entry.root
            rec = {name: m.estimate(k, dev).time_s for name, m in models.items()}
            rec["table_rule"] = models["xla-gpu-tables"].estimate(k, dev).details["rule"]
            held = CollectiveTable(rows.drop(index=i))
            hit = held.time_s(describe_collective(k, dev))
            rec["xla-gpu-tables held out"] = hit[0] if hit else math.nan
            out.append(rec)
    return pd.concat([rows, pd.DataFrame(out)], axis=1)


def band_of(b: float) -> str:
    for lo, hi, name in BANDS:
        if lo < b <= hi or (lo == 0 and b <= hi):
            return name
    return "?"


def report(device_name: str, df: pd.DataFrame) -> dict:
    df["band"] = df["transfer_bytes"].map(band_of)
    variants = ("xla-gpu", "xla-gpu strict", "roofline", "xla-gpu-tables held out")
    out = {"device": device_name, "rows": len(df)}
    lines = []
    for col, title in (("opcode", "operation"), ("band", "bytes transferred")):
        lines.append(f"\n{device_name}: by {title}")
        lines.append(f"{'':22s} {'model':26s} {'n':>4s} {'sk':>7s} {'ratio':>8s} {'tau':>6s} {'w1.25':>6s} "
                     f"{'bias':>7s} {'under':>6s}")
        keys = sorted(df[col].unique()) if col == "opcode" else [b[2] for b in BANDS if b[2] in set(df[col])]
        for key in [*keys, "all"]:
            sub = df if key == "all" else df[df[col] == key]
            for v in variants:
                s = score(sub[v], sub["time_s"])
                out.setdefault(title, {}).setdefault(key, {})[v] = s
                lines.append(f"{key:22s} {v:26s} {s['n']:4d} {s['sk']:7.3f} {s['ratio']:8.3f} {s['tau']:6.3f} "
                             f"{s['w1.25']:6.2f} {s['bias']:7.3f} {s['under']:6.2f}")
    from_table = df["table_rule"].str.contains("collective table").mean()
    worst = float(np.max(np.abs(df["xla-gpu-tables"] / df["time_s"] - 1)))
    out["in_sample"] = {"share_from_table": float(from_table), "max_rel_error": worst}
    lines.append(f"\nxla-gpu-tables on the full table (user path): {from_table:.0%} of the rows priced from the "
                 f"table, max |p/m - 1| = {worst:.1e}")
    print("\n".join(lines))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    results = [report(d, predictions(d)) for d in DEVICES]
    h = results[0]["operation"]["all"]
    held, ana = h["xla-gpu-tables held out"]["sk"], h["xla-gpu"]["sk"]
    print(f"\nGoal: xla-gpu-tables on the H100 collectives, held out, sk <= {GOAL_SK}: {held:.3f} "
          f"({'met' if held <= GOAL_SK else 'MISSED'}); the analytical xla-gpu on the same rows: {ana:.3f} "
          f"(ratio analytical / tables = {ana / held:.1f}x)")
    print(f"({time.perf_counter() - t0:.1f} s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
