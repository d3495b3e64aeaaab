# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 02 · Simulate XLA's priority fusion
#
# XLA:GPU decides which operations share a kernel with its *priority fusion*
# pass: it repeatedly takes the producer whose fusion into its consumers
# saves the most time, as a cost model predicts, and fuses it if that is
# legal. `simulate_fusion` runs the same algorithm over our HLO graph, priced
# by any of our cost models, and logs every step. This notebook:
#
# 1. lowers a program of the zoo (one transformer block) to its **unfused**
#    module, the input of the fusion pass,
# 2. fuses it for an H100 with the `xla-gpu` model and reads the step log,
# 3. plots the time saved per step,
# 4. compares the resulting kernel grouping with XLA's own (`compare_with_xla`)
#    and with the grouping the `roofline` model would choose.
#
# *Source of truth:* generated from `notebooks/02_simulate_priority_fusion.py`
# by `scripts/build_notebooks.py`; edit the `.py` file.

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
from xla_costmodel import plot, zoo  # isort: skip
from xla_costmodel.fusion import RULES, compare_with_xla, simulate_fusion  # isort: skip

import jax
import matplotlib.pyplot as plt
import pandas as pd

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)
pd.set_option("display.max_colwidth", 60)

# %% [markdown]
# ## 1. The unfused module of a zoo program
#
# `zoo.get_program(name).build()` gives a plain JAX function and example
# arguments. We want the module *before* XLA's passes (`optimized=False` in
# `from_jax`), and we ask jax to keep the source metadata (`debug_info=True`):
# each instruction then carries its `op_name`, which is how step 4 finds the
# same operation in XLA's optimized module, where most instructions have been
# renamed.

# %%
program = zoo.get_program("transformer_fwd")
print(program.name, "·", program.description)
fn, args = program.build()
lowered_text = jax.jit(fn).lower(*args).as_text(dialect="hlo", debug_info=True)
lowered = xcm.parse_hlo(lowered_text)
print(repr(lowered))
print(pd.Series([i.opcode for i in lowered.entry.instructions]).value_counts().head(12).to_dict())

# %% [markdown]
# ## 2. Priority fusion, priced by XLA's GPU model
#
# `simulate_fusion(module, device=..., model=...)` copies the module (the
# input is never changed) and fuses it. The `FusionResult` holds the fused
# `module`, the step log `steps`, the producers left unfused (`rejected`,
# with the legality rule that stopped each), and the model's total time of
# all kernels before and after.

# %%
result = simulate_fusion(lowered, device="h100-sxm", model="xla-gpu")
result

# %%
summary = result.summary()
print(f"{summary['kernels_before']} kernels -> {summary['kernels_after']};",
      f"predicted {summary['time_before_s'] * 1e6:.1f} µs -> {summary['time_after_s'] * 1e6:.1f} µs",
      f"({result.speedup:.2f}x) after {summary['fusion_steps']} steps")

# %% [markdown]
# ### The step log
#
# One row per producer taken off the priority queue, in order: which
# consumers it went into, the model's time for producer + consumers as
# separate kernels (`time_unfused_s`) and with the producer fused into each
# consumer (`time_fused_s`), and the difference, the **priority**. Launch
# overhead (1 µs per kernel on the H100 preset) is part of both sides, which
# is why even tiny elementwise producers have a priority of about 1 µs.
# Scalar constants are fused into their users at the end, without a price
# (`priority_s = -inf`).

# %%
steps = result.steps
plot.readable(steps[["step", "producer", "producer_opcode", "consumers", "fusions",
                     "priority_s", "time_unfused_s", "time_fused_s", "reason"]].iloc[10:25])  # times in µs

# %%
steps["reason"].value_counts()

# %% [markdown]
# ### Producers left unfused
#
# Each rejection names the rule from XLA's `FusionDecision` logic that last
# blocked it; `RULES` says what they mean. Dots and other non-fusible
# producers keep their own kernels (on a GPU they become cuBLAS or Triton
# GEMMs, which this simulation does not form).

# %%
by_rule = result.rejected_by_rule().to_frame()
by_rule["meaning"] = [RULES.get(rule, "") for rule in by_rule.index]
by_rule

# %%
result.rejected.head(10)

# %% [markdown]
# ## 3. Savings per step
#
# `plot.fusion_savings` shows each step's priority (bars) and, on the right
# axis, the predicted module time after each step, starting from the unfused
# total. The priorities are estimates made at the time of each step for the
# kernels as they then were; the dashed level is the fused module re-priced
# from scratch. The two need not agree: a producer fused into several
# consumers, or a consumer that later grows, changes what an earlier step
# really saved.

# %%
fig, ax = plt.subplots(figsize=(11, 4.5), layout="constrained")
plot.fusion_savings(steps, ax=ax, total_s=result.time_before_s, after_s=result.time_after_s,
                    label_steps=False)
plt.show()

# %% [markdown]
# The fused module is an ordinary `HloModule`: `analyze` prices its kernels
# like any other, and its total is the re-priced time above. Its kernel count
# is the simulation's too: the reshapes around the dots, which run no code
# (`free` in `analyze`), were fused first as bitcasts, so neither side counts
# them.

# %%
fused_table = xcm.analyze(result.module, device="h100-sxm", model="xla-gpu")
kernels = pd.DataFrame(fused_table[fused_table["bound"] != "free"])
print(f"analyze: {len(kernels)} kernels, {fused_table.total_time_s * 1e6:.1f} µs; "
      f"the simulation: {result.kernels_after} kernels, {result.time_after_s * 1e6:.1f} µs")
plot.readable(kernels[["kernel", "opcode", "kind", "emitter", "flops", "bytes_accessed", "time_s", "bound"]])

# %% [markdown]
# ## 4. Compare the grouping with XLA's
#
# `compare_with_xla(result, xla_module)` finds each of our instructions in
# XLA's optimized module (by metadata `op_name` with its operands' structure, else by
# name, else by structure alone: opcode and shape of it and its operands) and
# measures how well the two instruction → kernel assignments agree with the
# **adjusted Rand index** (1: the same grouping; about 0: no better than
# chance). `coverage` is the share of our instructions found on both sides.
#
# On this CPU-only machine the optimized module XLA gives us is XLA:**CPU**'s,
# whose fusion pass differs from XLA:GPU's (it hands dots and reductions to
# library calls), so agreement is partial by construction. With a module that
# XLA:GPU optimized (`jax.jit(fn).lower(*args).compile().as_text()` on a GPU
# machine, saved to a file), pass its path instead.

# %%
xla_module = xcm.from_jax(fn, *args)  # optimized by XLA for the default backend (here the CPU)
agreement = compare_with_xla(result, xla_module)
agreement

# %%
agreement.table.head(20)

# %% [markdown]
# Where the groupings differ: instructions that share a kernel on one side
# but not on the other. Grouping the table by XLA's kernels shows which of
# our kernels each of XLA's was split into.

# %%
split = (agreement.table.groupby("kernel_xla")["kernel_ours"].nunique()
         .sort_values(ascending=False).rename("our kernels").to_frame())
split.head(10)

# %% [markdown]
# ### A different model, a different grouping
#
# The cost model decides the order of the steps and which fusions pay. The
# plain `roofline` model (no cache or coalescing rules, no per-opcode cycle
# costs) fuses the same module; comparing the two fused modules with the
# same index shows how much the choice of model matters here.

# %%
roof = simulate_fusion(lowered, device="h100-sxm", model="roofline")
models = pd.DataFrame([
    {"model": r.model, "kernels": r.kernels_after, "predicted_us": r.time_after_s * 1e6,
     "ARI vs XLA": compare_with_xla(r, xla_module).ari}
    for r in (result, roof)
]).set_index("model")
models["ARI vs xla-gpu grouping"] = [1.0, compare_with_xla(roof, result.module).ari]
models.round(3)
