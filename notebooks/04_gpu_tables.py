# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · GPU truth without a GPU: XLA's measured tables, collectives, granularity
#
# XLA publishes GPU times it measured: a GEMM table (H100 and B200) and a
# collective table (H100, B200, GB200, GB300). They ship with this package as
# data (`xla_costmodel.devices.gemm_table`, `collective_table`, provenance in
# `xla_tables_source()`). This notebook:
#
# 1. scores the analytical `xla-gpu` model on dots against the measured GEMM
#    table, next to `xla-gpu-tables`, which interpolates the table, scored at
#    points held out of its interpolation;
# 2. shows collective time as a function of bytes and group size, measured
#    and as the models price it;
# 3. asks the granularity question for one kernel on two GPUs: what if it ran
#    with other launch dimensions or tiles?
#
# Nothing here runs on a GPU: every "measured" number is XLA's.
#
# *Source of truth:* generated from `notebooks/04_gpu_tables.py` by
# `scripts/build_notebooks.py`; edit the `.py` file.

# %%
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
try:  # in Jupyter, figures inline whatever MPLBACKEND says (the project's scripts set Agg, which draws nowhere)
    get_ipython().run_line_magic("matplotlib", "inline")  # noqa: F821
except NameError:  # run as a plain script
    pass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import xla_costmodel as xc
from xla_costmodel import plot
from xla_costmodel.devices import collective_row_hlo, collective_table, gemm_table, get_device, xla_tables_source
from xla_costmodel.models.pricing import GemmSpec, GemmTableInterpolator

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)
src = xla_tables_source()
print(f"{src['repository']} @ {src['commit'][:12]} ({src['commit_date'][:10]}), {src['licence'].split()[0]}")
{k: v["rows_per_key"] for k, v in src["tables"].items()}

# %% [markdown]
# ## 1. GEMMs: predicted against measured
#
# Each table row is one dot `[b,m,k] x [b,k,n]`. We write it as HLO and price
# it with `xla-gpu` (XLA's analytical model, an f32 dot at the TF32 tensor-core
# rate, which is what the table's f32 rates show: up to 400 TFLOP/s on the H100,
# six times its FP32 vector peak). `xla-gpu-tables` returns the measurement at
# a table point, so we score it at each point *predicted without that point*
# (`held_out_time_s`).

# %%
def dot(r):
    return xc.parse_hlo(
        f"HloModule g\nENTRY e {{\n  l = {r.lhs_type}[{r.b},{r.m},{r.k}] parameter(0)\n"
        f"  r = {r.rhs_type}[{r.b},{r.k},{r.n}] parameter(1)\n"
        f"  ROOT d = {r.out_type}[{r.b},{r.m},{r.n}] dot(l, r), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, "
        f"lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}\n}}").entry.root


analytical = xc.get_model("xla-gpu")
frames = []
for name in ("h100-sxm", "b200"):
    dev, g = get_device(name), gemm_table(name)
    held = GemmTableInterpolator(g)
    g = g.assign(
        device=name,
        xla_gpu=[analytical.estimate(dot(r), dev).time_s for r in g.itertuples()],
        tables_held_out=[held.held_out_time_s(GemmSpec(r.b, r.m, r.n, r.k, r.lhs_type, r.rhs_type, r.out_type))
                         for r in g.itertuples()],
    )
    frames.append(g)
gemms = pd.concat(frames, ignore_index=True)
plot.readable(gemms[["device", "b", "m", "n", "k", "dtype_key", "time_s", "xla_gpu", "tables_held_out"]]
              .rename(columns={"xla_gpu": "xla_gpu_s", "tables_held_out": "tables_held_out_s"}).head())  # µs

# %%
fig, axes = plt.subplots(2, 2, figsize=(13, 11))
for row, name in enumerate(("h100-sxm", "b200")):
    g = gemms[gemms.device == name]
    kind = g.lhs_type.map(lambda t: "f8" if t.startswith("f8") else t)
    limits = plot.decade_limits(g.time_s, g.xla_gpu, g.tables_held_out)  # one range for both panels of a row
    plot.predicted_vs_measured(g.time_s, g.xla_gpu, kind=kind, ax=axes[row, 0], title=f"xla-gpu on {name}",
                               limits=limits)
    plot.predicted_vs_measured(g.time_s, g.tables_held_out, kind=kind, ax=axes[row, 1],
                               title=f"xla-gpu-tables (held out) on {name}", limits=limits)
fig.tight_layout()

# %% [markdown]
# The analytical model orders the GEMMs fairly well (Kendall tau 0.75 on the
# H100, 0.86 on the B200; 0.69 to 0.91 per dtype) but predicts the small ones
# several times too fast: a dot of a few GFLOP on a 1,000-TFLOP/s tensor core
# would take microseconds, and the measured kernels take longer.
# The table, interpolated in log space between its grid points, is within a
# few percent at points it never saw. Per dtype:

# %%
from xla_costmodel.fit import accuracy


def scores(df):
    out = {}
    for col in ("xla_gpu", "tables_held_out"):
        a = accuracy(df[col], df.time_s)
        out[col] = {"sk_error": a["sk_error"], "tau": a["kendall_tau"],
                    "within_1.25x": float(np.mean(np.abs(np.log(df[col] / df.time_s)) <= np.log(1.25)))}
    return pd.DataFrame(out).T


pd.concat({(d, k): scores(g) for (d, k), g in gemms.groupby(["device", "dtype_key"])}).round(3)

# %% [markdown]
# ## 2. Collectives: time against bytes and group size
#
# The collective table measures all-reduce, all-gather, reduce-scatter,
# all-to-all and collective-permute on one 8-GPU host, over groups of 8, 4
# and 2 devices and transfer sizes from 1 KiB to 2 GiB. Below, the H100
# all-reduce: measured (points), `xla-gpu`'s NCCL ring model (dashed) and
# `xla-gpu-tables` (solid, the table interpolated in bytes).

# %%
h100 = get_device("h100-sxm")
coll = collective_table("h100-sxm")
ar = coll[(coll.opcode == "all-reduce") & coll.measured].copy()
tables = xc.get_model("xla-gpu-tables")
ar["xla_gpu"] = [analytical.estimate(xc.parse_hlo(collective_row_hlo(r)).entry.root, h100).time_s for r in ar.itertuples()]
ar["xla_gpu_tables"] = [tables.estimate(xc.parse_hlo(collective_row_hlo(r)).entry.root, h100).time_s
                        for r in ar.itertuples()]

fig, ax = plt.subplots(figsize=(8, 5))
for (groups, size), df in ar.groupby(["replica_groups", "group_size"]):
    df = df.sort_values("transfer_bytes")
    line = ax.plot(df.transfer_bytes, df.time_s * 1e6, "o", ms=4, label=f"measured, {size} devices ({groups})")[0]
    ax.plot(df.transfer_bytes, df.xla_gpu * 1e6, "--", color=line.get_color(), lw=1)
    ax.plot(df.transfer_bytes, df.xla_gpu_tables * 1e6, "-", color=line.get_color(), lw=1)
ax.set(xscale="log", yscale="log", xlabel="bytes transferred", ylabel="time per all-reduce (µs)",
       title="H100 all-reduce: measured (o), xla-gpu (--), xla-gpu-tables (-)")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# The measured all-reduce has a floor of tens of microseconds (NCCL's
# latency), which XLA's ring model (a 5 µs launch plus bytes over bus
# bandwidth) misses by an order of magnitude; at a gigabyte the ring model is
# within a factor of about 2.5. Across the whole H100 table
# (`scripts/bench_collectives.py` scores it, each row held out of the
# interpolation):

# %%
all_rows = coll[coll.measured]
kernels = [xc.parse_hlo(collective_row_hlo(r)).entry.root for r in all_rows.itertuples()]
summary = {}
for name, model in (("xla-gpu", analytical), ("roofline", xc.get_model("roofline"))):
    pred = [model.estimate(k, h100).time_s for k in kernels]
    summary[name] = accuracy(pred, all_rows.time_s)
pd.DataFrame(summary).T[["n", "sk_error", "ratio_error", "kendall_tau", "bias"]].round(3)

# %% [markdown]
# The roofline is a bound (NVLink at its data-sheet 450 GB/s per direction, a
# 5 µs latency): every measured collective takes longer.

# %%
roof = np.array([xc.get_model("roofline").estimate(k, h100).time_s for k in kernels])
print(f"roofline below the measurement for {np.mean(roof <= all_rows.time_s):.0%} of {len(roof)} collectives")

# %% [markdown]
# ## 3. Granularity: one kernel, every launch configuration, two GPUs
#
# `granularity(module, kernel, device=...)` prices a kernel under every
# candidate launch configuration. For a Triton fusion the candidates are the
# tilings of XLA's tiled performance model; the row XLA would pick (its
# `block_level_fusion_config`, else its own search's pick) and the fastest
# are marked. Here the softmax of XLA's tiled-model tests, on the H100 and
# on the B200.

# %%
SOFTMAX = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
softmax {
  p0 = f32[512,911] parameter(0)
  p1 = f32[911] parameter(1)
  b0 = f32[512,911] broadcast(p1), dimensions={1}
  m0 = f32[512,911] multiply(p0, b0)
  z = f32[] constant(0)
  r = f32[512] reduce(m0, z), dimensions={1}, to_apply=add
  b4 = f32[512,911] broadcast(r), dimensions={0}
  ROOT m = f32[512,911] multiply(m0, b4)
}
ENTRY e {
  p0 = f32[512,911] parameter(0)
  p1 = f32[911] parameter(1)
  ROOT sm = f32[512,911] fusion(p0, p1), kind=kCustom, calls=softmax,
    backend_config={"fusion_backend_config": {"kind":"__triton","block_level_fusion_config":{"output_tiles":[{"sizes":["1","911"]}],"num_warps":"2"}}}
}"""
module = xc.parse_hlo(SOFTMAX)
cols = ["config", "blocks", "waves", "occupancy", "time_us", "bound", "xla_choice", "best"]
by_gpu = {name: xc.granularity(module, "sm", device=name) for name in ("h100-sxm", "b200")}
for df in by_gpu.values():
    df["time_us"] = df.time_s * 1e6
by_gpu["h100-sxm"][cols].head(8).round(3)

# %%
by_gpu["b200"][cols].head(8).round(3)

# %%
fig, ax = plt.subplots(figsize=(8, 4.5))
for name, df in by_gpu.items():
    df = df[df.tile.map(lambda t: t[1] == 911)].sort_values("blocks")
    ax.plot(df.tile.map(lambda t: t[0]), df.time_s * 1e6, "o-", label=name)
ax.set(xscale="log", xlabel="rows per tile (tile = rows x 911)", ylabel="predicted time (µs)",
       title="softmax [512, 911]: rows per block, H100 against B200")
ax.set_xticks([1, 2, 4, 8, 16], labels=["1", "2", "4", "8", "16"])
ax.minorticks_off()
ax.legend()
plt.show()

# %% [markdown]
# An ordinary (loop-emitter) fusion gets threads-per-block and unroll
# candidates instead, priced by `xla-gpu` with each launch grid; XLA's own
# launch dimensions are one of the rows:

# %%
LOOP = """HloModule m
f {
  a = f32[65536] parameter(0)
  ROOT e = f32[65536] exponential(a)
}
ENTRY e {
  a = f32[65536] parameter(0)
  ROOT k = f32[65536] fusion(a), kind=kLoop, calls=f
}"""
loop = xc.granularity(xc.parse_hlo(LOOP), "k", device="b200")
loop.assign(time_us=loop.time_s * 1e6)[cols].round(3)

# %% [markdown]
# With 65,536 elements, a grid of fewer blocks than the B200 has SMs (148)
# leaves most of the GPU idle, and XLA's model charges that through its
# per-block bandwidth cap and per-block compute (the slowest rows); XLA's
# heuristic grid is among the fastest. `bound` names the largest part of each
# row's time: at this size the launch overhead, in every row but the last,
# where so few blocks (8, on 8 of the 148 SMs) compute the exponentials that
# compute is the largest part. The count of each:

# %%
loop["bound"].value_counts()
