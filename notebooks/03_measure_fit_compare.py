# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Measure, fit, compare
#
# A cost model is only as good as its agreement with measured time. This
# notebook closes the loop on the CPU:
#
# 1. **measure** the kernels of a jitted program with `measure` (a
#    `jax.profiler` trace, one row per kernel),
# 2. **predict** the same kernels with the analytical `roofline` model and
#    look at the predicted-vs-measured scatter,
# 3. load the committed **calibration dataset** (`calibration/host_cpu.parquet`:
#    the measurement suite, run on the reference host),
# 4. **fit** the hardware-fitted and learned models to it and **compare** all
#    models on programs from libraries nobody here wrote.
#
# Timings on a shared machine are noisy, so the numbers you see differ from
# run to run and from the committed dataset; the conclusions should not.
#
# *Source of truth:* generated from `notebooks/03_measure_fit_compare.py` by
# `scripts/build_notebooks.py`; edit the `.py` file.

# %%
import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
try:  # in Jupyter, figures inline whatever MPLBACKEND says (the project's scripts set Agg, which draws nowhere)
    get_ipython().run_line_magic("matplotlib", "inline")  # noqa: F821
except NameError:  # run as a plain script
    pass

import matplotlib.pyplot as plt
import pandas as pd

import xla_costmodel as xcm
from xla_costmodel import plot, zoo
from xla_costmodel.measure import measure_kernels, read_dataset

pd.set_option("display.width", 200)
pd.set_option("display.max_columns", 20)

# The notebook runs from notebooks/; the dataset lives at the repository root.
ROOT = Path.cwd() if (Path.cwd() / "calibration").is_dir() else Path.cwd().parent
DATASET = ROOT / "calibration" / "host_cpu.parquet"

# %% [markdown]
# ## 1. Measure a program
#
# `measure_kernels(fn, *args)` jits the function, runs it `repeats` times under the
# profiler (the first `discard` runs are warm-up) and returns one row per
# kernel with the minimum and median of the kept runs. The minimum is the
# least-disturbed run, the number a model should predict. We keep the run
# short here (20 repeats).

# %%
program = zoo.get_program("transformer_fwd")
fn, args = program.build()
measured = measure_kernels(fn, *args, repeats=20, discard=4, progress=False)
print(program.description)
print(f"{len(measured)} kernels; backend {measured.attrs.get('backend')}, {measured.attrs.get('device')}")
plot.readable(measured[["hlo_op", "opcode", "fusion_kind", "n", "launches", "min_per_run_s", "median_per_run_s",
                         "min_per_launch_s"]])  # times in µs

# %% [markdown]
# ## 2. Predict the same kernels
#
# The measurement keeps the text of the module that ran (`attrs["hlo_text"]`),
# so the prediction prices exactly the measured kernels: `analyze` on the
# host with the `roofline` model (its peak FLOP/s and bandwidth are measured
# on this machine), joined on the instruction name.

# %%
module = xcm.parse_hlo(measured.attrs["hlo_text"])
predicted = xcm.analyze(module, device="host", model="roofline")
joined = measured.merge(
    pd.DataFrame(predicted)[["kernel", "kind", "time_s", "bound"]],
    left_on="hlo_op", right_on="kernel", how="inner",
)
# `time_s` is one launch of a kernel: compare it with the measured time per launch.
joined["ratio"] = joined["time_s"] / joined["min_per_launch_s"]
plot.readable(joined[["hlo_op", "kind", "launches", "min_per_launch_s", "time_s", "ratio", "bound"]])

# %%
ax = plot.predicted_vs_measured(joined["min_per_launch_s"], joined["time_s"], kind=joined["kind"],
                                title=f"{program.name}: roofline model vs measured (this run)")
plt.show()

# %% [markdown]
# **Reading it.** Points above the line are over-predicted, below it
# under-predicted; the grey band is a factor of 2 either way. The heading of
# the legend, under the plot, gives `ratio_error` (`exp(mean |ln(pred/meas)|) - 1`:
# a typical kernel is off by a factor of one plus this), Stevens & Klöckner's
# `sk_error` (the geometric mean of |pred − meas| / meas), the median bias
# (`exp(median ln(pred/meas))`, above 1 when the model tends to
# over-predict), the share within 2× and Kendall's τ (does the model at
# least *rank* the kernels right: what fusion decisions need). These are the
# numbers `compare` reports (`xla_costmodel.fit.accuracy`).
#
# The kernels of this small block take a microsecond or two. At that scale
# the fixed costs dominate: the model's launch constant, and whatever the
# bandwidth measured on big arrays says about data that sits in cache. Which
# part the model thinks dominates, and the host's constants next to the
# per-kernel launch cost the calibration suite measured (its `launch` class):

# %%
host = xcm.get_device("host")
suite_launch = read_dataset(DATASET)["launch_overhead_s"].median()
print(joined["bound"].value_counts().to_dict())
print(f"host: {host.peak_fp32_flops_per_s / 1e9:.0f} GFLOP/s, "
      f"{host.memory_bandwidth_bytes_per_s / 1e9:.1f} GB/s, launch {host.kernel_launch_overhead_s * 1e6:.2f} µs; "
      f"suite's launch per kernel: {suite_launch * 1e6:.2f} µs")

# %% [markdown]
# An analytical model is as good as its constants, and constants measured
# with big benchmarks say little about microsecond kernels. Fitting them, or
# a richer model, to measured kernels is what the rest of this notebook does.
#
# ## 3. The calibration dataset
#
# `calibration/host_cpu.parquet` holds the measurement suite: small
# programs, each about one kernel (`is_main`), swept over sizes, in the
# classes below. See `calibration/README.md` for how it was measured and its
# noise floor (a typical kernel reproduces within about 7 %, one in ten
# moves by a factor of about 2).

# %%
dataset = read_dataset(DATASET)
main = dataset[dataset["is_main"]]
print(f"{len(dataset)} rows, {len(main)} main kernels, {main['case'].nunique()} cases, "
      f"suite runs: {dataset['suite_run'].nunique()}")
plot.readable(main.groupby("kernel_class").agg(
    cases=("case", "nunique"), kernels=("kernel", "nunique"),
    fastest_per_launch_s=("min_per_launch_s", "min"), slowest_per_launch_s=("min_per_launch_s", "max"),
))

# %% [markdown]
# ## 4. Fit the models
#
# `calibrate(device, dataset=...)` fits every fittable model to the
# measured kernels and saves each as `<device>_<model>.json` in your data
# directory (`$XLA_COSTMODEL_DATA_DIR`, else `~/.local/share/xla_costmodel`
# on Linux); `analyze(..., model="fitted")` then uses it, before the shipped
# calibrations in `calibration/` (made by this call on the reference host,
# and never written by the library). Here we write to a temporary
# directory so that running the notebook leaves your calibrations alone.
#
# - `fitted`: Stevens & Klöckner's hardware-fitted model: a linear
#   combination of counts read from the HLO (loads and stores by width and
#   stride class, operations by kind and dtype, matmul FLOPs, launches),
#   fitted by least squares on the *relative* error.
# - `learned`: gradient-boosted trees on the same features, in log time.
# - `roofline-calibrated`, `xla-gpu-calibrated`: the analytical models with
#   their device parameters (peak, bandwidth, launch cost) fitted instead of
#   taken from the spec sheet.

# %%
import tempfile

with tempfile.TemporaryDirectory() as out_dir:
    calibration = xcm.calibrate(device="host", dataset=DATASET, out_dir=out_dir,
                                models=("fitted", "roofline-calibrated"), progress=False)
plot.readable(calibration.assign(file=calibration["file"].map(lambda f: Path(f).name)), unit="s")  # in out_dir

# %% [markdown]
# The training-set error above says how well each model *can* fit the suite.
# What matters is how well it predicts kernels it has not seen.
#
# ## 5. Compare the models on programs nobody here wrote
#
# `compare_models(models)` fits each fittable model on the measurement suite
# alone, then scores every model on the kernels of the *independent
# corpus* (`calibration/host_cpu_corpus.parquet`: models, optimizers and
# functions of JAX libraries this project did not write, measured on the
# reference host; `xla_costmodel.corpus`). Nothing of those programs is seen
# in fitting, and nothing in the models was chosen to look like them. One
# row per model: the number of kernels scored, Stevens & Klöckner's error
# `sk_error` = exp(mean ln(|p − m| / m)) (the geometric mean of relative
# absolute errors, the figure the paper's 6–16 % on GPUs are given in), the
# ratio error `ratio_error` = exp(mean |ln(p/m)|) − 1 (always higher than
# `sk_error`, so compare like with like), the share within 2×, the median
# `bias` and the rank correlations.

# %%
models = ["fitted", "learned", "roofline-calibrated", "roofline"]
comparison = xcm.compare_models(models)
plot.readable(comparison.set_index("model")[["n", "sk_error", "ratio_error", "within_2x", "bias", "kendall_tau",
                                             "spearman", "fit_s"]], unit="s")

# %% [markdown]
# The same, library by library (`comparison.by_source`): a model that holds
# on one library's programs and not on another's shows where its features
# run out. `compare_models(models, split="source-cv")` also trains on the programs
# of the other libraries, leaving out the one it scores.

# %%
comparison.by_source.pivot(index="source", columns="model", values="sk_error").round(3)

# %% [markdown]
# How good could a model be? The measurement is noisy too. The *noise
# ceiling* scores the measurement against itself: the corpus measured again
# by a separate process (`calibration/host_cpu_corpus_rerun.parquet`)
# against the first measurement, with the same metrics, per library. No
# model can be expected to agree with the measured times much better than
# they agree with themselves.

# %%
from xla_costmodel.compare import noise_by_source

corpus = read_dataset(ROOT / "calibration" / "host_cpu_corpus.parquet")
rerun = read_dataset(ROOT / "calibration" / "host_cpu_corpus_rerun.parquet")
noise_by_source(corpus, rerun).set_index("source")[["n", "sk_error", "ratio_error", "within_2x", "kendall_tau"]].round(3)

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
plot.error_by_model(comparison, ax=left, title="the corpus, fitted on the suite")
plot.error_by_model(comparison, ax=right, metric="kendall_tau", title="ranking (higher is better)")
plt.show()

# %% [markdown]
# **Reading it.** The error columns and the ranking columns answer different
# questions. The error says how far a predicted time is from the measured
# one; τ says whether the model puts kernels in the right order, which is
# what a fusion decision needs. Fitting fixes constants that are
# systematically off (look at `sk_error` and `within_2x` of the plain roofline
# against the fitted models); the ranking improves less, because it is
# limited by what the features can tell kernels apart by.
#
# ### Predicted against measured, kernel by kernel
#
# `comparison.predictions` holds every scored kernel. Joined to the
# dataset's fusion kind, the scatter shows *where* each model is wrong:
# the analytical roofline against the best fitted model.

# %%
kinds = corpus[["case", "hlo_op", "fusion_kind", "opcode"]].drop_duplicates(["case", "hlo_op"])
preds = comparison.predictions
preds = preds[preds["scored"]].merge(kinds, on=["case", "hlo_op"], how="left")
preds["kind"] = preds["fusion_kind"].fillna(preds["opcode"]).fillna("?")

best = comparison.sort_values("sk_error").iloc[0]["model"]
shown = preds[preds["model"].isin(["roofline", best])]
limits = plot.decade_limits(shown["measured_s"], shown["predicted_s"])  # one range for both panels
fig, axes = plt.subplots(1, 2, figsize=(13, 5.5), layout="constrained")
for ax, name in zip(axes, ["roofline", best]):
    p = preds[preds["model"] == name]
    plot.predicted_vs_measured(p["measured_s"], p["predicted_s"], kind=p["kind"], ax=ax, title=name, limits=limits)
plt.show()

# %% [markdown]
# ## 6. Transfer to unseen kinds of kernels
#
# A harder test: `split="class"` holds out one kernel class of the suite at
# a time (access, elementwise, matmul, conv, scatter, launch), fits on the
# others and predicts the held-out class. Broken down by class, it shows
# which kinds of kernels a model can only learn from examples of their own
# kind. The suite's second run repeats the same cases, so one run is enough
# here (and halves the fitting time).

# %%
from xla_costmodel.fit import accuracy

one_run = dataset[dataset["suite_run"] == dataset["suite_run"].iloc[0]]
by_class = xcm.compare_models(["fitted", "roofline-calibrated", "roofline"], dataset=one_run, split="class")
per_class = pd.DataFrame([
    {"model": model, "kernel_class": cls, **accuracy(g["predicted_s"], g["measured_s"])}
    for (model, cls), g in by_class.predictions.groupby(["model", "kernel_class"], sort=False)
])
fig, ax = plt.subplots(figsize=(11, 4), layout="constrained")
plot.error_by_model(per_class, ax=ax, by="kernel_class", metric="within_2x",
                    title="leave one kernel class out: kernels within 2× of their measured time")
plt.show()

# %%
per_class.pivot(index="kernel_class", columns="model", values="ratio_error").round(3)

# %% [markdown]
# **Where to go from here.** `xla-costmodel calibrate` refits the models to
# a new machine (it measures the suite first), `compare` with
# `split="source-cv"` also trains on the programs of the other libraries,
# `evaluate(fn, *args)` measures and predicts one program of yours, and
# `program_time(fn, *args)` predicts a whole run (the kernels plus the
# per-run overhead fitted to this project's own programs).
