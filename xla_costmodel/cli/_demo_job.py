"""The main job (`scripts/run`, `xla-costmodel demo`): one bundled program end to end.

Each stage prints what it found and writes its table under `out/<program>/`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd

from .._text import count


def _stage(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def _done(t0: float) -> None:
    print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)


def run_demo(program: str | None = None, out: str = "out") -> int:
    import jax

    from .. import from_jax
    from ..analysis import module_stats
    from ..zoo import DEFAULT_PROGRAM, get_program

    name = program or DEFAULT_PROGRAM
    spec = get_program(name)
    folder = Path(out) / name
    folder.mkdir(parents=True, exist_ok=True)
    print(f"xla_costmodel demo: program '{name}' ({spec.description}); jax {jax.__version__}, backend {jax.default_backend()}")
    print(f"output folder: {folder}")

    t0 = _stage("1. HLO of the program: as lowered (unfused) and as XLA optimized it")
    fn, args = spec.build()
    lowered = from_jax(fn, *args, optimized=False)
    optimized = from_jax(fn, *args, optimized=True)
    (folder / "lowered.hlo").write_text(lowered.to_text())
    (folder / "optimized.hlo").write_text(optimized.to_text())
    rows = []
    for label, module in (("lowered", lowered), ("optimized", optimized)):
        stats = module_stats(module)
        top = ", ".join(f"{op} {n}" for op, n in list(stats["opcodes"].items())[:6])
        rows.append(
            {
                "module": label,
                "computations": stats["computations"],
                "instructions": stats["instructions"],
                "entry instructions": stats["entry_instructions"],
                **{k: int(stats[k]) for k in ("flops", "transcendentals", "bytes_accessed") if k in stats},
                "most common opcodes": top,
            }
        )
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    (folder / "statistics.json").write_text(json.dumps(rows, indent=1))
    _done(t0)

    t0 = _stage("2. Per-kernel analysis: XLA:GPU's kernels on h100-sxm, XLA:CPU's on this CPU")
    tables = stage_two_tables(fn, args, optimized)
    for (device, model), table in tables.items():
        table.to_csv(folder / f"analysis_{device}_{model}.csv", index=False)
        kernels = pd.DataFrame(table)
        kernels = kernels[kernels["bound"] != "free"].sort_values("total_s", ascending=False)
        print(analysis_line(table) + f"\n   (priced: {table.priced_module})")
        cols = ["kernel", "kind", "flops", "bytes_accessed", "intensity", "time_s", "bound"]
        print(_format_times(kernels[cols].head(6)).to_string(index=False))
    _done(t0)

    t0 = _stage("3. Priority fusion simulated on the lowered module (xla-gpu model, h100-sxm)")
    from ..fusion import compare_with_xla, simulate_fusion

    fused = simulate_fusion(lowered, device="h100-sxm", model="xla-gpu")
    fused.steps.to_csv(folder / "fusion_steps.csv", index=False)
    fused.rejected.to_csv(folder / "fusion_rejected.csv", index=False)
    (folder / "fused.hlo").write_text(fused.module.to_text())
    print(
        f"   {count(len(fused.steps), 'fusion step')}: {fused.kernels_before} -> {count(fused.kernels_after, 'kernel')}, "
        f"predicted {fused.time_before_s * 1e6:.1f} -> {fused.time_after_s * 1e6:.1f} µs "
        f"({fused.speedup:.2f}x); {count(len(fused.rejected), 'candidate pair')} blocked by a legality rule"
    )
    steps = fused.steps[["step", "producer", "consumers", "priority_s", "reason"]].head(8)
    print(_format_times(steps).to_string(index=False))
    agreement = compare_with_xla(fused, optimized)
    print(
        f"   grouping vs XLA's own CPU fusion: adjusted Rand index {agreement.ari:.2f} over "
        f"{count(agreement.matched, 'matched instruction')}; kernels {agreement.kernels_ours} (ours) vs "
        f"{agreement.kernels_xla} (XLA CPU)" + (f"; {agreement.note}" if agreement.note else "")
    )
    _done(t0)

    t0 = _stage("4. Measured kernel times on this CPU (profiler trace), against the host prediction")
    from ..measure import measure_kernels

    measured = measure_kernels(fn, *args, repeats=20, discard=4)
    # Both sides per launch: the measurement's per-run minimum sums a loop body's launches.
    predicted = pd.DataFrame(tables[("host", "roofline")])[["kernel", "time_s", "total_s", "bound"]]
    joined = measured[["hlo_op", "opcode", "n", "launches", "min_per_launch_s"]].merge(
        predicted, left_on="hlo_op", right_on="kernel", how="left"
    )
    joined = joined.rename(columns={"time_s": "roofline_per_launch_s"}).drop(columns=["kernel"])
    joined["ratio"] = joined["roofline_per_launch_s"] / joined["min_per_launch_s"]
    predicted_per_run_s = joined.pop("total_s").sum()
    # The program's kernels for the figure of stage 5, beside the corpus priced by the same model.
    program = pd.DataFrame({"measured_s": joined["min_per_launch_s"].to_numpy(float),
                            "predicted_s": joined["roofline_per_launch_s"].to_numpy(float),
                            "kind": joined["opcode"].astype(str).to_numpy()})
    joined.to_csv(folder / "measured_vs_roofline.csv", index=False)
    print(_format_times(joined.sort_values("min_per_launch_s", ascending=False).head(8)).to_string(index=False))
    print(
        f"   {count(len(measured), 'kernel')} measured; sum of minima {measured['min_per_run_s'].sum() * 1e6:.1f} µs per run, "
        f"roofline (uncalibrated host) predicts {predicted_per_run_s * 1e6:.1f} µs per run"
    )
    _done(t0)

    t0 = _stage("5. Quick measurement suite on this CPU, models fitted to it, scored on programs nobody here wrote")
    from ..compare import compare_models
    from ..measure import append_dataset, run_suite

    quick = run_suite(quick=True, progress=True)
    quick_path = folder / "quick_suite.parquet"
    if quick_path.exists():
        quick_path.unlink()  # our own output of an earlier run
    append_dataset(quick, quick_path)
    from ..datasets import shipped_dir

    # The shipped measurements of the reference host: read, never written. The suite (and the supplementary
    # microbenchmarks kept with this project's programs) trains; the independent corpus scores.
    root = shipped_dir()
    train = [p for p in (root / "host_cpu.parquet", root / "host_cpu_programs.parquet") if p.exists()]
    test = root / "host_cpu_corpus.parquet"
    print(f"   quick suite: {count(len(quick), 'kernel')} measured; training on it plus the suite rows of "
          f"{', '.join(p.name for p in train)}; scoring {test.name} (libraries nobody here wrote, per source)")
    models = ["fitted", "learned", "roofline-calibrated", "roofline"]
    table = compare_models(models, dataset=test, split="source", train=[quick_path, *train], progress=True)
    for note in table.notes:
        print(f"   note: {note}")
    table.to_csv(folder / "comparison.csv", index=False)
    table.by_source.to_csv(folder / "comparison_by_source.csv", index=False)
    cols = ["model", "n", "sk_error", "ratio_error", "within_2x", "kendall_tau", "spearman"]
    print(pd.DataFrame(table)[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    preds = table.predictions
    preds = preds[preds["scored"]]
    roof = preds[preds["model"] == "roofline"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = scatter_figure(
        program, roof.rename(columns={"source": "kind"}),
        f"{name}: its {count(len(program), 'kernel')} measured on this CPU,\npriced by roofline (uncalibrated)",
        f"beside it, the corpus: {count(len(roof), 'kernel')} of {roof['source'].nunique()} libraries,\n"
        "priced by the same model")
    fig.savefig(folder / "predicted_vs_measured.png", dpi=110)
    plt.close(fig)
    print(f"   scatter: {folder / 'predicted_vs_measured.png'}")
    _done(t0)
    print(f"\nwrote {sorted(p.name for p in folder.iterdir())} to {folder}")
    return 0


def scatter_figure(left: pd.DataFrame, right: pd.DataFrame, left_title: str, right_title: str):
    """Stage 5's figure: the demo's program (left) beside the corpus (right), predicted against measured time
    per launch, each on the decades of its own times. Each frame
    has `measured_s`, `predicted_s` and `kind` (the kernel's opcode, the corpus kernel's library); each
    panel's legend is headed by its metrics, named as `compare`'s tables name them.

    **Returns:** the Figure."""
    import matplotlib.pyplot as plt

    from ..plot import predicted_vs_measured

    # Tall enough for the legends under the plots (one entry per source).
    fig, axes = plt.subplots(1, 2, figsize=(12, 7.8), layout="constrained")
    fig.get_layout_engine().set(w_pad=0.2, h_pad=0.1)  # inches: tick labels and titles clear of the edges
    for ax, frame, title in ((axes[0], left, left_title), (axes[1], right, right_title)):
        # Each panel on the decades of its own times: a small program's kernels would be a dot on the corpus's.
        predicted_vs_measured(frame["measured_s"], frame["predicted_s"], kind=frame["kind"], ax=ax, title=title)
    return fig


def stage_two_tables(fn, args, optimized) -> dict:
    """Stage 2's tables, `{(device, model): KernelTable}`: the program's XLA:GPU kernels on `h100-sxm`
    (`xla-gpu`; fusion simulated from its lowered module, as `analyze` does for a function while jax
    runs on the CPU) and the kernels XLA:CPU made (`optimized`) on this CPU (`roofline`). Never
    XLA:CPU's kernels priced on a GPU: the README warns against that (`BackendMismatchWarning`)."""
    from .. import analyze

    return {("h100-sxm", "xla-gpu"): analyze(fn, *args, device="h100-sxm", model="xla-gpu"),
            ("host", "roofline"): analyze(optimized, device="host", model="roofline")}


def analysis_line(table) -> str:
    """The line stage 2 prints for an `analyze` table: its kernels (as `analyze` counts them), time, bounds."""
    summary = table.summary()
    # `summary.kernels` already leaves the free instructions out, as `xla-costmodel analyze` does.
    return (
        f"-- {summary.model} on {summary.device}: {count(summary.kernels, 'kernel')}, "
        f"predicted {summary.total_s * 1e6:.1f} µs per step; time by bound (µs): "
        + ", ".join(f"{b} {t * 1e6:.1f}" for b, t in summary.time_by_bound_s.items())
    )


def _format_times(df: pd.DataFrame) -> pd.DataFrame:
    """Seconds as µs strings and big counts with separators, for printing."""
    out = df.copy()
    for col in out.columns:
        if col.endswith("_s") and pd.api.types.is_numeric_dtype(out[col]):
            out[col.replace("_s", "_us")] = out.pop(col).map(lambda v: f"{v * 1e6:.2f}")
        elif col in ("flops", "bytes_accessed", "launches"):
            out[col] = out[col].map(lambda v: f"{v:,.0f}")
        elif col in ("intensity", "ratio"):
            out[col] = out[col].map(lambda v: f"{v:.2f}")
    return out
