#!/usr/bin/env python
"""GEMM truth: the GPU models scored on dots against XLA's measured GEMM tables (H100 and B200).

    .venv/bin/python scripts/bench_gemm_tables.py            # both GPUs (a few seconds)
    .venv/bin/python scripts/bench_gemm_tables.py --json out.json

Every point of `devices.gemm_table` (b in {1, 2, 4}, m, n, k in {256, ...,
4096}, five dtype combinations, per GPU) is one dot `[b,m,k] x [b,k,n]`
written as HLO and priced through the public model API
(`get_model(...).estimate`). Its measured time is XLA's (2bmnk / measured
FLOP/s: the median kernel time of `matmul_perf_table_gen`). Scored:

- `xla-gpu`: XLA's analytical model as this project runs it (dots on the
  tensor cores, an f32 dot at the TF32 rate), launch overhead included;
- `xla-gpu legacy f32`: the same with `matrix_units=False`, XLA's own
  `GpuPerformanceModel`, which prices every flop on the FP32 vector units:
  shown to decide how an f32 dot must be priced;
- `xla-gpu-tables held out`: each grid point predicted by the
  `xla-gpu-tables` interpolation with that point left out of the table
  (`GemmTableInterpolator.held_out_time_s`), never from itself;
- `xla-gpu-tables midpoints`: the table coarsened along one of m, n, k to
  {256, 1024, 4096} and the dropped sizes 512 and 2048 predicted by the
  model's ordinary interpolation between the kept ones (a 4x gap, twice the
  table's spacing), each axis in turn.

Metrics (per GPU, per dtype combination, and per size band of 2bmnk): `sk`,
Stevens & Klöckner's error (geometric mean of |p - m| / m,
`fit.sk_error`); `ratio` (`ratio_error`, the geometric-mean ratio error); Kendall's tau;
`w1.25`, the share predicted within 1.25x; `bias` (median p/m). The goal:
`xla-gpu-tables held out` sk <= 0.10 on the H100 table; the ratio of the
analytical model's sk to it is printed as the peer comparison.

A note on the data: the H100 table's three f8 combinations reach 2.6
PFLOP/s at the largest sizes, above the H100 SXM's dense FP8 peak (1.98
PFLOP/s at the tensor-core clock of XLA's spec file); those rows are scored as
XLA publishes them.
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
from xla_costmodel.devices import gemm_table, get_device, xla_table_key
from xla_costmodel.models.pricing import GemmSpec, GemmTableInterpolator

DEVICES = ("h100-sxm", "b200")
BANDS = ((0, 1e9, "< 1 GFLOP"), (1e9, 3e10, "1-30 GFLOP"), (3e10, math.inf, ">= 30 GFLOP"))
GOAL_SK = 0.10


def dot_kernel(b, m, n, k, lhs, rhs, out):
    text = (f"HloModule gemm\nENTRY e {{\n  lhs = {lhs}[{b},{m},{k}] parameter(0)\n"
            f"  rhs = {rhs}[{b},{k},{n}] parameter(1)\n"
            f"  ROOT d = {out}[{b},{m},{n}] dot(lhs, rhs), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, "
            f"lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}\n}}")
    return xc.parse_hlo(text).entry.root


def score(p, m) -> dict:
    p, m = np.asarray(p, float), np.asarray(m, float)
    a = accuracy(p, m)
    within = float(np.mean(np.abs(np.log(p / m)) <= math.log(1.25) + 1e-12))
    return {"n": a["n"], "sk": a["sk_error"], "ratio": a["ratio_error"], "tau": a["kendall_tau"], "w1.25": within,
            "bias": a["bias"]}


def predictions(device_name: str) -> pd.DataFrame:
    dev = get_device(device_name)
    g = gemm_table(device_name)
    analytical = xc.get_model("xla-gpu")
    legacy = xc.get_model("xla-gpu", matrix_units=False)
    tables = xc.get_model("xla-gpu-tables")
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unpriced dot would be a bug here
        for r in g.itertuples(index=False):
            k = dot_kernel(r.b, r.m, r.n, r.k, r.lhs_type, r.rhs_type, r.out_type)
            rows.append({"analytical": analytical.estimate(k, dev).time_s, "legacy": legacy.estimate(k, dev).time_s,
                         "in_sample": tables.estimate(k, dev).time_s})
    df = pd.concat([g.reset_index(drop=True), pd.DataFrame(rows)], axis=1)
    full = GemmTableInterpolator(g)
    df["held_out"] = [full.held_out_time_s(GemmSpec(r.b, r.m, r.n, r.k, r.lhs_type, r.rhs_type, r.out_type))
                      for r in g.itertuples(index=False)]
    # Cell midpoints: one axis coarsened to {256, 1024, 4096}; predictions per axis in turn.
    mids = []
    for axis in ("m", "n", "k"):
        kept = g[g[axis].isin((256, 1024, 4096))]
        coarse = GemmTableInterpolator(kept)
        for idx, r in g[~g[axis].isin((256, 1024, 4096))].iterrows():
            mids.append({"row": idx, "axis": axis, "midpoint": coarse.time_s(
                GemmSpec(r.b, r.m, r.n, r.k, r.lhs_type, r.rhs_type, r.out_type))})
    df.attrs["midpoints"] = pd.DataFrame(mids)
    return df


def band_of(flops: float) -> str:
    for lo, hi, name in BANDS:
        if lo <= flops < hi:
            return name
    return "?"


def report(device_name: str, df: pd.DataFrame) -> dict:
    mids = df.attrs["midpoints"].merge(df[["time_s", "dtype_key", "flops"]], left_on="row", right_index=True)
    df["band"] = df["flops"].map(band_of)
    mids["band"] = mids["flops"].map(band_of)
    out: dict = {"device": device_name, "table_key": xla_table_key(device_name), "points": len(df)}
    variants = (("xla-gpu", df, "analytical"), ("xla-gpu legacy f32 (FP32 units)", df, "legacy"),
                ("xla-gpu-tables held out", df, "held_out"), ("xla-gpu-tables midpoints", mids, "midpoint"))
    lines = []
    for group_col, title in (("dtype_key", "dtype"), ("band", "size band")):
        lines.append(f"\n{device_name} ({out['table_key']}): by {title}")
        lines.append(f"{'':24s} {'model':34s} {'n':>5s} {'sk':>7s} {'ratio':>7s} {'tau':>6s} {'w1.25':>6s} {'bias':>6s}")
        keys = sorted(df[group_col].unique(), key=lambda v: (str(v)))
        if group_col == "band":
            keys = [b[2] for b in BANDS if b[2] in set(df["band"])]
        for key in [*keys, "all"]:
            for label, data, col in variants:
                sub = data if key == "all" else data[data[group_col] == key]
                s = score(sub[col], sub["time_s"])
                out.setdefault(title, {}).setdefault(str(key), {})[label] = s
                lines.append(f"{str(key):24s} {label:34s} {s['n']:5d} {s['sk']:7.3f} {s['ratio']:7.3f} "
                             f"{s['tau']:6.3f} {s['w1.25']:6.2f} {s['bias']:6.2f}")
    in_sample = float(np.max(np.abs(df["in_sample"] / df["time_s"] - 1)))
    out["in_sample_max_rel_error"] = in_sample
    lines.append(f"\nxla-gpu-tables at the measured points themselves (the user path, full table): "
                 f"max |p/m - 1| = {in_sample:.2e}")
    print("\n".join(lines))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    results = [report(d, predictions(d)) for d in DEVICES]
    h100 = results[0]["dtype"]["all"]
    held, ana = h100["xla-gpu-tables held out"]["sk"], h100["xla-gpu"]["sk"]
    print(f"\nGoal: xla-gpu-tables on H100 dots, held out, sk <= {GOAL_SK}: {held:.3f} "
          f"({'met' if held <= GOAL_SK else 'MISSED'}); the analytical xla-gpu on the same points: {ana:.3f} "
          f"(ratio analytical / tables = {ana / held:.1f}x)")
    print(f"({time.perf_counter() - t0:.1f} s)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
