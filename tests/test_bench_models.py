"""`scripts/bench_models.py --quick` runs end to end on the committed data and writes consistent tables."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_models", ROOT / "scripts" / "bench_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_benchmark_tables_and_goals(tmp_path, capsys):
    if not (ROOT / "calibration" / "host_cpu_programs.parquet").is_file():
        pytest.skip("no measured programs")
    bench = _bench()
    out = tmp_path / "bench.json"
    assert bench.main(["--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    payload = json.loads(out.read_text())

    program = {row["model"]: row for row in payload["program"]}
    assert set(program) == set(bench.MODELS)
    for row in program.values():
        assert row["n"] > 100 and -1 <= row["kendall_tau"] <= 1 and row["sk_gmre"] <= row["gmre"]
    # The goals are judged on the printed table's own numbers, and each is printed.
    goals = {g["goal"]: g for g in payload["goals"]}
    tau_goal = next(g for name, g in goals.items() if "Kendall tau" in name)
    assert tau_goal["met"] == (program["fitted"]["kendall_tau"] >= 0.9)
    assert f"{program['fitted']['kendall_tau']:.3f}" in tau_goal["value"]
    for name, g in goals.items():
        assert f"{'PASS' if g['met'] else 'MISS'}  {name}" in printed
    # Scored on their own training rows: trees follow those more closely than the linear model.
    fit = {row["model"]: row for row in payload["training_fit"]}
    assert set(fit) == {"fitted", "learned"} and all(row["n"] > 1000 for row in fit.values())
    assert fit["learned"]["gmre"] < fit["fitted"]["gmre"]
    assert all(math.isfinite(row["kendall_tau"]) for row in fit.values())
    if (ROOT / "calibration" / "host_cpu_programs_large.parquet").is_file():
        large = {row["model"]: row for row in payload["program_large"]}
        assert set(large) == set(bench.MODELS) and all(row["n"] > 50 for row in large.values())
    # Table 9: the wrong orderings split into measured-ratio bands that cover them all.
    for row in payload["discordance"]:
        assert 0 < row["ordered wrong"] < 0.5
        assert sum(row[f"of those, {band}"] for band, _, _ in bench.RATIO_BANDS) == pytest.approx(1.0)
    same = payload["same_features_ceiling"][0]
    assert same["distinct feature vectors"] <= same["kernels"] == program["fitted"]["n"]
    assert program["fitted"]["kendall_tau"] < same["kendall_tau"] <= 1
    # Table 10: fitted to the held-out kernels themselves, each model is scored on the same kernels as in
    # table 1; the trees can follow their own training rows, the linear model far less.
    form = {(row["kernels"], row["model"]): row for row in payload["form_ceiling"]}
    own = form[("programs (table 1)", "fitted")], form[("programs (table 1)", "learned")]
    assert all(row["n"] == program["fitted"]["n"] for row in own)
    assert own[1]["gmre"] < program["learned"]["gmre"] and own[1]["kendall_tau"] > own[0]["kendall_tau"]
    assert f"the linear form fitted to these kernels' own times: {own[0]['kendall_tau']:.3f}" in tau_goal["value"]
    # Weights fitted to the order start from the relative least-squares ones and keep the better tau.
    assert own[0]["kendall_tau, weights fitted for order"] >= own[0]["kendall_tau"] - 1e-3
    assert math.isnan(own[1]["kendall_tau, weights fitted for order"])
    if "tau_against_runs" in payload:
        runs = {row["model"]: row for row in payload["tau_against_runs"]}
        assert runs["fitted"]["tau vs run 1"] == pytest.approx(program["fitted"]["kendall_tau"], abs=1e-9)


def test_order_fitted_weights_recover_an_order_the_start_misses():
    import numpy as np
    from scipy.stats import kendalltau

    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 1.0, size=(60, 3))
    y = X @ np.array([1e-7, 3e-7, 2e-8])
    start = np.array([1e-7, 0.0, 1e-6])  # weights that order these rows badly
    before = kendalltau(X @ start, y)[0]
    after = kendalltau(_bench()._order_fitted_weights(X, y, start), y)[0]
    assert before < 0.7 and after > 0.95
