"""`evaluate`: one program measured and predicted, joined per kernel, against the same join done by hand."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from xla_costmodel import analyze, corpus, evaluate
from xla_costmodel.cli import main as cli_main
from xla_costmodel.fit import accuracy, sk_error
from xla_costmodel.measure import ConcurrentKernelsWarning

MODELS = ("fitted", "roofline")


def scan_program():
    """An LSTM scanned over time (Equinox): loop-body kernels launch several times per run."""
    return corpus.get_program("equinox_lstm_grad").build("small")


@pytest.fixture(scope="module")
def evaluated():
    program = corpus.get_program("equinox_lstm_grad")
    if not program.available():
        pytest.skip("equinox is not installed")
    fn, args = scan_program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        return evaluate(fn, *args, models=MODELS, repeats=12, discard=2), fn, args


def test_kernels_are_the_hand_joined_measurement_and_analysis(evaluated):
    ev, fn, args = evaluated
    measured = ev.measurement.kernels  # what measure() returns for this run
    assert ev.measurement.method.allocator == "steady"
    by_hand = measured[~measured["opcode"].isin(["while", "conditional", "call"])]
    assert list(ev.kernels["kernel"]) == list(by_hand["hlo_op"])
    np.testing.assert_array_equal(ev.kernels["measured_s"], by_hand["min_per_run_s"])
    np.testing.assert_array_equal(ev.kernels["launches"], by_hand["launches"])
    assert (ev.kernels["launches"] > 1).any(), "the scan's body should launch several times per run"
    for model in MODELS:
        # The user's own path: analyze the function (compiled afresh) and add up each kernel's total_s.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = pd.DataFrame(analyze(fn, *args, device="host", model=model))
        per_run = table.groupby("kernel")["total_s"].sum(min_count=1)
        np.testing.assert_allclose(ev.kernels[f"{model}_s"], per_run.loc[by_hand["hlo_op"]].to_numpy(), rtol=1e-12)
        # Per program run on both sides: a loop body's prediction is its time per launch times its executions.
        body = table[table["executions"] > 1]
        assert len(body) and np.allclose(body["total_s"], body["time_s"] * body["executions"])
        row = ev.summary.loc[model]
        acc = accuracy(ev.kernels[f"{model}_s"], ev.kernels["measured_s"])
        assert row["sk_error"] == pytest.approx(sk_error(ev.kernels[f"{model}_s"], ev.kernels["measured_s"]))
        assert row["ratio_error"] == pytest.approx(acc["ratio_error"])
        assert row["kendall_tau"] == pytest.approx(acc["kendall_tau"])
        assert row["within_2x"] == pytest.approx(acc["within_2x"])
        assert row["predicted_total_s"] == pytest.approx(table["total_s"].sum())
    assert ev.summary["measured_total_s"].iloc[0] == pytest.approx(by_hand["min_per_run_s"].sum())
    kept = ev.measurement.runs[ev.measurement.runs["kept"]]
    assert ev.summary["measured_wall_s"].iloc[0] == pytest.approx(kept["wall_s"].min())
    assert list(ev.summary.index) == list(MODELS)


def test_plot_and_html(evaluated):
    ev, _, _ = evaluated
    ax = ev.plot("roofline")
    assert ax.get_xscale() == "log" and len(ax.collections) >= 1
    axes = ev.plot()
    assert len(axes) == len(MODELS)
    page = ev._repr_html_()
    assert "sk_error" in page and "measured_s" in page and "per program run" in page
    with pytest.raises(ValueError, match="no model 'xla-gpu'"):
        ev.plot("xla-gpu")


def test_bad_requests_fail_before_measuring():
    with pytest.raises(ValueError, match="device 'h100-sxm' is a gpu"):
        evaluate(lambda x: x + 1, np.ones(4, np.float32), device="h100-sxm")
    with pytest.raises(ValueError, match="unknown"):
        evaluate(lambda x: x + 1, np.ones(4, np.float32), models=("no-such-model",))
    with pytest.raises(ValueError, match="at least one model"):
        evaluate(lambda x: x + 1, np.ones(4, np.float32), models=())


def tiny_program():
    import jax.numpy as jnp

    def tiny(x):
        return jnp.tanh(x).sum(axis=0)

    return tiny, (jnp.ones((64, 32), jnp.float32),)


def readme_program():
    """The README's `my_program.py`: XLA:CPU makes it one kernel."""
    import jax.numpy as jnp

    def step(x, w):
        return jnp.tanh(x @ w).sum()

    return step, (jnp.ones((128, 256)), jnp.ones((256, 64)))


def test_cli_evaluate_one_kernel_has_no_nan_column(capsys):
    # One kernel cannot be ranked: no column of NaN (kendall_tau) in the table, a note instead.
    assert cli_main(["evaluate", "--jax", f"{__file__}:readme_program", "--models", "roofline", "--repeats", "8",
                     "--discard", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["kernels"]) == 1 and out["summary"][0]["kendall_tau"] is None
    assert cli_main(["evaluate", "--jax", f"{__file__}:readme_program", "--models", "roofline", "--repeats", "8",
                     "--discard", "2"]) == 0
    text = capsys.readouterr().out
    table = text.split("note:")[0]
    assert "ratio_error" in table and "kendall_tau" not in table and "NaN" not in table
    assert "note: kendall_tau left out: it ranks kernels, and 1 kernel cannot be ranked" in text


def test_cli_evaluate_json_and_errors(capsys):
    assert cli_main(["evaluate", "--jax", f"{__file__}:tiny_program", "--models", "roofline", "--repeats", "8",
                     "--discard", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in out["summary"]] == ["roofline"]
    assert {"kernel", "launches", "measured_s", "roofline_s"} <= set(out["kernels"][0])
    assert cli_main(["evaluate", "--jax", f"{__file__}:tiny_program", "--models", "roofline", "--repeats", "8",
                     "--discard", "2", "--kernels"]) == 0
    text = capsys.readouterr().out
    assert "sk_error" in text and "measured_us" in text and "per program run" in text
    assert "kendall_tau" in text and "kendall_tau left out" not in text  # 3 kernels: ranked
    assert cli_main(["evaluate", "--jax", f"{__file__}:absent"]) == 2
    assert cli_main(["evaluate", "--jax", f"{__file__}:tiny_program", "--device", "h100-sxm"]) == 2
    err = capsys.readouterr().err
    assert "has no attribute" in err and "is a gpu" in err and "Traceback" not in err
