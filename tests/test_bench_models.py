"""`scripts/bench_models.py --quick` end to end on the committed data (a few corpus sources, for time):
its tables are `compare`'s and the ceilings' own numbers, and the goals are judged on what it prints."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("dm-pix", "numpyro", "optimistix")


def _bench():
    return load_script("bench_models")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from xla_costmodel.measure import read_dataset

    d = tmp_path_factory.mktemp("bench")
    paths = {}
    for name in ("corpus", "corpus_rerun"):
        rows = read_dataset(ROOT / "calibration" / f"host_cpu_{name}.parquet")
        paths[name] = d / f"{name}.parquet"
        rows[rows["source"].isin(SOURCES)].to_parquet(paths[name], index=False)
    out = d / "bench.json"
    bench = _bench()
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = bench.main(["--quick", "--corpus", str(paths["corpus"]), "--rerun", str(paths["corpus_rerun"]),
                         "--json", str(out)])
    return bench, rc, printed.getvalue(), json.loads(out.read_text()), paths


def test_tables_are_compares_numbers(run):
    from xla_costmodel.compare import compare_models

    bench, rc, printed, payload, paths = run
    assert rc == 0 and set(payload["overall"]) == {"suite"}  # --quick: the suite-alone regime only
    overall = {r["model"]: r for r in payload["overall"]["suite"]}
    assert list(overall) == list(bench.MODELS)
    again = compare_models(["fitted", "roofline"], dataset=paths["corpus"], split="source").set_index("model")
    for model in ("fitted", "roofline"):
        for metric in bench.METRICS:
            assert overall[model][metric] == pytest.approx(again.loc[model, metric])
    # One table per source and one overall, each model's row equal to `by_source` (`all`: the overall row).
    assert set(payload["tables"]) == {*SOURCES, "all"}
    by_source = {(r["model"], r["source"]): r for r in payload["by_source"]["suite"]}
    for source, rows in payload["tables"].items():
        for row in rows:
            if row["row"] in bench.MODELS:
                assert row["sk_error suite"] == pytest.approx(by_source[(row["row"], source)]["sk_error"])
                assert row["n suite"] == by_source[(row["row"], source)]["n"]
        labels = [row["row"] for row in rows]
        assert "noise: run 2 vs run 1" in labels and "form: fitted" in labels and "form: roofline" not in labels
        assert f"\n== {'overall' if source == 'all' else 'source ' + source}:" in printed


def test_ceilings_are_the_measurements_own(run):
    from xla_costmodel.compare._ceiling import noise_by_source
    from xla_costmodel.datasets._data import load_rows

    bench, rc, printed, payload, paths = run
    noise = noise_by_source(load_rows(paths["corpus"]), load_rows(paths["corpus_rerun"])).set_index("source")
    for source, rows in payload["tables"].items():
        row = next(r for r in rows if r["row"] == "noise: run 2 vs run 1")
        assert row["kendall_tau suite"] == pytest.approx(noise.loc[source, "kendall_tau"])
    # The form ceiling fits each model to the scored kernels themselves: the trees follow them closely.
    form = {(r["model"], r["source"]): r for r in payload["form"]}
    assert {m for m, _ in form} == {"fitted", "learned", "context", "learned-context", "roofline-calibrated",
                                    "xla-gpu-calibrated"}
    learned = {r["model"]: r for r in payload["overall"]["suite"]}["learned"]
    assert form[("learned", "all")]["ratio_error"] < learned["ratio_error"]
    assert form[("learned", "all")]["n"] == learned["n"]


def test_goals_are_judged_on_the_printed_figures(run):
    bench, rc, printed, payload, _ = run
    overall = {r["model"]: r for r in payload["overall"]["suite"]}
    best = min(overall, key=lambda m: overall[m]["sk_error"])
    goals = payload["goals"]
    for g in goals:
        line = f"{'PASS' if g['met'] else 'MISS'}  [{g['regime']}] {g['goal']}: {g['value']:.3f}"
        assert line in printed
    kernel_goals = [g for g in goals if g["goal"].startswith("best model")]
    assert {g["model"] for g in kernel_goals} == {best} and len(kernel_goals) == len(bench.BEST_GOALS)
    for g, (metric, bound, at_least) in zip(kernel_goals, bench.BEST_GOALS):
        assert g["value"] == pytest.approx(overall[best][metric])
        assert g["met"] == (g["value"] >= bound if at_least else g["value"] <= bound)
    fitted = next(g for g in goals if g["goal"] == "fitted sk_error <= 0.2")
    assert fitted["value"] == pytest.approx(overall["fitted"]["sk_error"]) and fitted["met"] == (fitted["value"] <= 0.2)
    # Program goals: the share of program runs within the factor, from the per-program table.
    programs = {r["case"]: r for r in payload["by_program"]["suite"] if r["model"] == "fitted"}
    within = [abs(math.log(r["predicted_over_measured"])) <= math.log(1.25) for r in programs.values()]
    share = sum(within) / len(within)
    goal = next(g for g in goals if g["goal"].startswith("fitted: every program's predicted total within 1.25x"))
    assert goal["value"] == pytest.approx(share) and goal["met"] == (share == 1.0)
    assert "ratio against a peer measured in this run" in printed


def test_program_wall_time_adds_the_overhead_fitted_to_our_own_programs(run):
    """The /wall goal judges what `program_time` predicts: the kernels plus the program overhead, which is
    fitted to this project's own programs, never to the corpus."""
    from xla_costmodel.datasets._data import load_rows, programs_dataset
    from xla_costmodel.fit._program import ProgramOverhead, program_table

    bench, rc, printed, payload, _ = run
    rows = load_rows(programs_dataset("host"))
    # this project's own programs as compiled: the zoo and the training programs, not their unfused variants
    own = rows["kernel_class"].isin(["program", "extra-program"]) & rows["source"].isin(["zoo", "extra"])
    overhead = ProgramOverhead.fit(program_table(rows[own]))
    assert f"{overhead.per_run_s * 1e6:.1f} us per run" in printed
    records = [r for r in payload["by_program"]["suite"] if r["predicted_per_run_s"] is not None]
    assert records
    for r in records:
        wall = r["predicted_per_run_s"] + overhead(r["kernels"])
        assert r["predicted_wall_per_run_s"] == pytest.approx(wall, rel=1e-4)
        assert r["predicted_over_wall"] == pytest.approx(r["predicted_wall_per_run_s"] / r["wall_per_run_s"], rel=1e-4)


def test_unknown_model_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        _bench().main(["--quick", "--models", "no-such-model"])
    assert stop.value.code == 2 and "no-such-model" in capsys.readouterr().err


def test_categories_count_the_kernels_that_are_in_them(run):
    """The failing-class table: each category holds the kernels its test names, scored on exactly those."""
    import numpy as np

    from xla_costmodel.datasets._data import load_rows
    from xla_costmodel.metrics import accuracy

    bench, rc, printed, payload, paths = run
    rows = load_rows(paths["corpus"]).drop_duplicates(["case", "hlo_op"])
    table = {r["category"]: r for r in payload["categories"]}
    assert list(table) == [name for name, _ in bench.CATEGORIES]
    loop = rows[rows["role"] == "control"]
    assert table["in while-loop bodies"]["kernels"] == len(loop)
    assert table["CPU library fusions (kCustom)"]["kernels"] == int((rows["fusion_kind"] == "kCustom").sum())
    big = rows["hlo_text"].str.contains(" broadcast(", regex=False) & (rows["out_bytes"] >= 2**20)
    assert table["broadcasts >= 1 MiB"]["kernels"] == int(big.sum())
    # fitted's figure on the loop bodies is `accuracy` over those kernels' predictions
    from xla_costmodel.compare import compare_models

    again = compare_models(["fitted"], dataset=paths["corpus"], split="source").predictions
    again = again[again["scored"]]
    keys = set(zip(loop["case"].astype(str), loop["hlo_op"].astype(str)))
    inside = np.array([k in keys for k in zip(again["case"].astype(str), again["hlo_op"].astype(str))])
    want = accuracy(again["predicted_s"][inside].to_numpy(float), again["measured_s"][inside].to_numpy(float))
    got = table["in while-loop bodies"]["fitted (suite) sk_error"]
    assert (got is None and not inside.any()) or got == pytest.approx(want["sk_error"], rel=1e-4)


def test_saved_calibrations_are_judged_against_the_shipped_ones_and_the_noise():
    """`--saved`: a calibration made here is no worse than the shipped one by sk_error, tau and the worst
    program; a loss smaller than the corpus's run-to-run difference is reported as within the noise."""
    import pandas as pd

    bench = _bench()
    assert bench._worst_factor([0.5, 2.5, float("nan"), 0.0]) == pytest.approx(2.5)
    assert bench._worst_factor([0.1, 3.0]) == pytest.approx(10.0)
    table = pd.DataFrame([
        {"folder": "shipped", "model": "fitted", "sk_error": 0.25, "kendall_tau": 0.77, "worst_program_factor": 16.0},
        {"folder": "mine", "model": "fitted", "sk_error": 0.29, "kendall_tau": 0.74, "worst_program_factor": 458.0},
        {"folder": "close", "model": "fitted", "sk_error": 0.252, "kendall_tau": 0.775, "worst_program_factor": 17.0},
        {"folder": "better", "model": "fitted", "sk_error": 0.2, "kendall_tau": 0.8, "worst_program_factor": 3.0},
        {"folder": "mine", "model": "learned", "sk_error": 0.1, "kendall_tau": 0.9, "worst_program_factor": 2.0},
    ])
    noise = {"sk_error": 0.057, "kendall_tau": 0.067, "worst_program_factor": 2.97}
    verdicts = {v["folder"]: v for v in bench._saved_verdicts(table, "shipped", noise)}
    assert set(verdicts) == {"mine", "close", "better"}  # `learned` has no shipped peer here
    assert not verdicts["mine"]["no_worse"] and verdicts["mine"]["beyond_noise"] == ["worst_program_factor"]
    assert "sk_error 0.290 vs 0.250" in verdicts["mine"]["worse_by"]
    assert not verdicts["close"]["no_worse"] and verdicts["close"]["beyond_noise"] == []
    assert verdicts["better"]["no_worse"] and verdicts["better"]["worse_by"] == ""
