# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Analyze a jitted function
#
# `xla_costmodel.analyze` prices every kernel of an XLA module with a cost
# model and says *why* each kernel takes the time it does. This notebook:
#
# 1. writes a small JAX function (a pre-norm MLP block),
# 2. gets its HLO module with `from_jax` and looks at it,
# 3. prices it on an **H100 SXM** with the `xla-gpu` model (a re-implementation
#    of XLA's own GPU performance model) and on **this host's CPU** with the
#    `roofline` model,
# 4. reads the `bound` column, and places the kernels on the roofline.
#
# Everything runs on the CPU in a few seconds: pricing a kernel for an H100
# needs the H100's numbers (`get_device("h100-sxm")`), not an H100.
#
# *Source of truth:* this notebook is generated from
# `notebooks/01_analyze_a_jitted_function.py` by `scripts/build_notebooks.py`;
# edit the `.py` file.

# %%
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
try:  # in Jupyter, figures inline whatever MPLBACKEND says (the project's scripts set Agg, which draws nowhere)
    get_ipython().run_line_magic("matplotlib", "inline")  # noqa: F821
except NameError:  # run as a plain script
    pass

# xla_costmodel before jax: where jax's CUDA plugin is installed without a GPU, its log lines stay quiet
import xla_costmodel as xcm  # isort: skip
from xla_costmodel import plot  # isort: skip

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import pandas as pd

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)
print("jax", jax.__version__, "on", jax.devices()[0].platform)

# %% [markdown]
# ## 1. A function to analyze
#
# A pre-norm MLP block: layer norm, a 256→1024 projection, GELU, a 1024→256
# projection and a residual add, on a batch of 512 rows. Small enough to
# compile in a moment, big enough that the two matmuls dominate.

# %%
def mlp_block(x, w1, w2, gamma):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    h = (x - mu) * jax.lax.rsqrt(var + 1e-5) * gamma
    return x + jax.nn.gelu(h @ w1) @ w2


k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
args = (
    jax.random.normal(k1, (512, 256), jnp.float32),
    jax.random.normal(k2, (256, 1024), jnp.float32) * 0.05,
    jax.random.normal(k3, (1024, 256), jnp.float32) * 0.05,
    jnp.ones((256,), jnp.float32),
)
print(jax.jit(mlp_block)(*args).shape)

# %% [markdown]
# ## 2. Its HLO module
#
# `from_jax(fn, *args)` lowers and compiles the function for the default
# backend (here XLA:CPU) and parses the optimized module. Each top-level
# instruction of the entry computation that is not a parameter or constant is
# one **kernel**: XLA:CPU fused the elementwise work into `kLoop` fusions
# and handed the matmuls and the row means of the layer norm to its
# `kCustom` (YNNPACK) fusions.
#
# `from_jax(fn, *args, optimized=False)` would give the module *before* any
# HLO pass, one kernel per operation: the input of a fusion pass (notebook 02).

# %%
module = xcm.from_jax(mlp_block, *args)
print(repr(module))
for instr in module.entry.instructions:
    kind = f"  [{instr.fusion_kind}]" if instr.opcode == "fusion" else ""
    print(f"{instr!r}{kind}")

# %%
# The body of one fusion: what the kernel computes.
fusion = next(i for i in module.entry.instructions if i.opcode == "fusion" and i.fusion_kind == "kLoop")
print(fusion.name, fusion.fused_computation.signature())
for instr in fusion.fused_computation.instructions:
    print("   ", repr(instr))

# %% [markdown]
# ## 3. Price it on an H100 with XLA's GPU model
#
# `analyze(module, device=..., model=...)` returns a `KernelTable`: a pandas
# DataFrame, one row per kernel, with the model's counts and times. The
# `xla-gpu` model follows XLA's `GpuPerformanceModel`: a kernel's compute
# time comes from XLA's per-opcode cycle tables, its memory time from the
# bytes it reads and writes (with XLA's cache and coalescing rules), and every
# kernel pays a 1 µs launch.
#
# Caveat: this grouping into kernels is XLA:**CPU**'s, priced as if each
# kernel ran on the GPU (`analyze` says so with a `BackendMismatchWarning`).
# It answers "what would these kernels cost on an H100", not "what will
# XLA:GPU generate": for that, pass the function itself
# (`analyze(mlp_block, *args, device="h100-sxm")` simulates XLA:GPU's
# priority fusion on its lowered module) or see notebook 02.

# %%
import warnings

from xla_costmodel.models import BackendMismatchWarning

h100 = xcm.get_device("h100-sxm")
with warnings.catch_warnings(record=True) as caught:  # analyze says what it prices: shown here as a line
    warnings.simplefilter("always", BackendMismatchWarning)
    gpu = xcm.analyze(module, device=h100, model="xla-gpu")
for w in caught:
    print(f"{w.category.__name__}: {w.message}")
cols = ["kernel", "kind", "flops", "bytes_accessed", "intensity",
        "compute_s", "memory_s", "launch_s", "time_s", "bound", "coalesced"]
kernels = pd.DataFrame(gpu[gpu["bound"] != "free"])  # a plain DataFrame: we only want some columns
plot.readable(kernels[cols])  # times in µs, counts as integers

# %%
gpu.summary()

# %% [markdown]
# ## 4. The `bound` column
#
# For every kernel the model computes three parts and names the largest:
#
# | `bound` | the largest part | what would make the kernel faster |
# | --- | --- | --- |
# | `compute` | `compute_s`: FLOPs (weighted by XLA's per-opcode cycle costs) at the device's peak | fewer or cheaper operations, tensor cores (bf16), better tiling |
# | `memory` | `memory_s`: bytes moved at DRAM bandwidth | fusing the kernel with its producers/consumers, smaller dtypes, fewer re-reads |
# | `launch` | `launch_s`: the fixed cost of starting a kernel | fusing it away: it is too small to matter on its own |
# | `free` | nothing: a parameter, constant, bitcast or tuple runs no code | — |
#
# `time_s` is not simply the sum: XLA's model overlaps compute and memory.
# On an H100 the kernels of this small block are mostly launch- or
# memory-bound. The one compute-bound kernel is the GELU fusion
# (`multiply_multiply_fusion`): its `flops` column, XLA's `HloCostAnalysis`
# count, is 64 times smaller than a matmul's (4.2 M against 268 M), but XLA's
# per-opcode cycle tables charge `tanh` and friends many cycles per element,
# while the matmuls run on the tensor cores; so its `compute_us` is the largest
# of the module. Time by bound tells where a fusion or a layout change would pay.

# %%
by_bound = kernels.groupby("bound")[["time_s"]].agg(["count", "sum"])
by_bound.columns = ["kernels", "time_s"]
by_bound["share_%"] = 100 * by_bound["time_s"] / by_bound["time_s"].sum()
plot.readable(by_bound)

# %% [markdown]
# ## 5. The same kernels on this host, with the roofline model
#
# `xla-gpu` prices GPU kernels only. For the CPU we use the `roofline` model:
# `max(flops / peak, bytes / bandwidth) + launch`, with the peak and
# bandwidth *measured* on this machine (`get_device("host")`, cached after
# the first run). The `flops` and `bytes_accessed` columns are the same as in
# the H100 table: they are the kernel's own counts, with XLA's
# `HloCostAnalysis` semantics, whatever the model and device. What differs is
# the pricing: the host's peak and bandwidth, and the roofline's rule instead
# of XLA's cycle tables (what a model priced with, by its own counting, is in
# `model_flops` and `model_bytes`).

# %%
host = xcm.get_device("host")
print(host.description or host.name, "·", f"{host.peak_fp32_flops_per_s / 1e9:.0f} GFLOP/s FP32,",
      f"{host.memory_bandwidth_bytes_per_s / 1e9:.1f} GB/s")
cpu = xcm.analyze(module, device=host, model="roofline")
plot.readable(pd.DataFrame(cpu[cpu["bound"] != "free"])[cols])

# %%
both = pd.DataFrame({
    "h100 xla-gpu": gpu.set_index("kernel")["time_s"],
    "host roofline": cpu.set_index("kernel")["time_s"],
    "h100 bound": gpu.set_index("kernel")["bound"],
    "host bound": cpu.set_index("kernel")["bound"],
})
both = both[both["h100 bound"] != "free"]
both["host / h100"] = both["host roofline"] / both["h100 xla-gpu"]
plot.readable(both.rename(columns={"h100 xla-gpu": "h100 xla-gpu_s", "host roofline": "host roofline_s"}))

# %% [markdown]
# ## 6. The roofline plot
#
# `plot.roofline(table, device)` draws the device's roof (FP32 peak, DRAM
# bandwidth; the matrix-unit peaks as dashed ceilings) and puts each kernel
# at its arithmetic intensity and the FLOP/s it reaches in its predicted
# time. A kernel on the sloped part is memory-bound; one well below the roof
# is dominated by its launch; the ridge point (dotted) is the intensity a
# kernel needs to be able to use the full peak.

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
plot.roofline(gpu, h100, ax=left)
plot.roofline(cpu, host, ax=right)
plt.show()

# %% [markdown]
# **Reading it.** On the H100 the two matmuls (intensity ≈ 73 FLOP/B) sit
# above the FP32 roof, under the dashed f32 matrix-unit ceiling: the model
# prices them at tensor-core rate, and for a 512×256 by 256×1024 product the
# bytes take longer than the FLOPs, so they are memory-bound. The small
# elementwise fusions sit far below the roof: their time is the 1 µs launch.
# On the host CPU the matmuls are compute-bound (on the flat roof) and most
# other kernels memory-bound (on the slope): the same module, different
# bottlenecks. (The host's peak and bandwidth are measured on the machine
# that runs this notebook, so its plot differs from machine to machine.) Notebook 02 fuses the unoptimized module the way
# XLA:GPU would; notebook 03 checks predictions against measured time.
