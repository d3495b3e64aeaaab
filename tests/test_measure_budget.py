"""`measure_kernels()` and `measure --jax` on long work: progress, a time budget; `compare` on what `measure --jax` wrote."""

from __future__ import annotations

import json

import jax.numpy as jnp
import pytest

from xla_costmodel.cli import main
from xla_costmodel.measure import measure_kernels, read_dataset
from xla_costmodel.measure._measure import MIN_KEPT_RUNS


def program(x, w):
    return jnp.tanh(x @ w).sum(axis=0) + 1.0


ARGS = (jnp.ones((64, 128)), jnp.ones((128, 64)))


def test_a_spent_budget_stops_the_runs_but_keeps_the_minimum():
    calls = []
    kernels = measure_kernels(program, *ARGS, repeats=400, discard=3, budget_s=1e-9, progress=lambda d, t: calls.append((d, t)))
    taken = 3 + MIN_KEPT_RUNS
    assert kernels.attrs["repeats"] == taken and kernels.attrs["discard"] == 3  # what was done is recorded
    assert kernels.attrs["repeats_requested"] == 400 and kernels.attrs["stopped_by_budget"]
    assert kernels.attrs["budget_s"] == 1e-9
    assert (kernels["n"] == MIN_KEPT_RUNS).all()
    assert calls == [(i, 400) for i in range(1, taken + 1)]  # progress after every run


def test_without_a_budget_every_run_is_taken():
    kernels = measure_kernels(program, *ARGS, repeats=9, discard=2, progress=False)
    assert kernels.attrs["repeats"] == 9 and not kernels.attrs["stopped_by_budget"]
    assert (kernels["n"] == 7).all()
    with pytest.raises(ValueError, match="budget_s must be a positive number"):
        measure_kernels(program, *ARGS, budget_s=0)


@pytest.fixture
def user_program(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(
        "import jax.numpy as jnp\n\n"
        "def build():\n"
        "    def f(x, w):\n"
        "        h = jnp.tanh(x @ w)\n"
        "        return (h * h).sum(axis=1) + jnp.exp(-h).mean(axis=1)\n"
        "    return f, (jnp.ones((256, 256)), jnp.ones((256, 256)))\n"
    )
    return f"{path}:build"


def test_cli_budget_is_reported_and_recorded(capsys, tmp_path, user_program):
    out = tmp_path / "my.parquet"
    assert main(["measure", "--jax", user_program, "--repeats", "300", "--discard", "2", "--budget", "0.000001",
                 "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert f"stopped after {2 + MIN_KEPT_RUNS} of 300 runs" in printed
    rows = read_dataset(out)
    assert (rows["repeats"] == 2 + MIN_KEPT_RUNS).all() and (rows["n"] == MIN_KEPT_RUNS).all()


def test_compare_scores_a_users_own_measurement(capsys, tmp_path, user_program):
    # `measure --jax m:f --out my.parquet`, then `compare --dataset my.parquet`: scored, not NaN.
    out = tmp_path / "my.parquet"
    assert main(["measure", "--jax", user_program, "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["compare", "--dataset", str(out), "--models", "roofline", "fitted", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    measured = read_dataset(out)
    assert {r["model"] for r in rows} == {"roofline", "fitted"}
    for r in rows:
        assert 0 < r["n"] <= len(measured) and r["ratio_error"] is not None and r["ratio_error"] == r["ratio_error"]


def test_compare_says_why_a_dataset_cannot_be_scored(capsys, tmp_path):
    from pathlib import Path

    suite = read_dataset(Path(__file__).resolve().parents[1] / "calibration" / "host_cpu.parquet").head(20)
    path = tmp_path / "suite.parquet"
    suite.to_parquet(path)
    rc = main(["compare", "--dataset", str(path), "--models", "roofline"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "no rows of kernel class program, user to score" in err and "split='class'" in err
