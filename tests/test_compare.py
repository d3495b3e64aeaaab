"""Metrics worked by hand, and `compare` / `xla-costmodel compare` on small slices of the committed data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau, spearmanr

from xla_costmodel.compare import compare_models
from xla_costmodel.fit import accuracy, fusion_metrics
from xla_costmodel.metrics import SK_FLOOR, sk_error
from xla_costmodel.measure import read_dataset
from conftest import TEST_CPU

ROOT = Path(__file__).resolve().parents[1]
CPU = TEST_CPU


# ----------------------------------------------------------------------------- metrics


def test_accuracy_by_hand():
    pred = np.array([2.0, 1.0, 1.0, 3.0])
    meas = np.array([1.0, 1.0, 2.0, 3.0])
    acc = accuracy(pred, meas)
    # |ln r| = ln 2, 0, ln 2, 0 -> mean ln 2 / 2 -> ratio_error = sqrt(2) - 1.
    assert acc["ratio_error"] == pytest.approx(math.sqrt(2) - 1)
    assert acc["mape"] == pytest.approx((1 + 0 + 0.5 + 0) / 4)
    assert acc["median_abs_log"] == pytest.approx(math.log(2) / 2)
    assert acc["within_2x"] == 1.0
    assert acc["bias"] == pytest.approx(1.0)
    assert acc["kendall_tau"] == pytest.approx(kendalltau(pred, meas).statistic)
    assert acc["spearman"] == pytest.approx(spearmanr(pred, meas).statistic)
    assert acc["n"] == 4 and acc["unpriced"] == 0


def test_sk_error_by_hand():
    # Relative errors |p - m| / m: 0.5 (over), 0.5 (under: 1 vs 2), 0.1, 0.4 -> geometric mean.
    pred = np.array([3.0, 1.0, 1.1, 0.6])
    meas = np.array([2.0, 2.0, 1.0, 1.0])
    expected = (0.5 * 0.5 * 0.1 * 0.4) ** 0.25
    acc = accuracy(pred, meas)
    assert acc["sk_error"] == pytest.approx(expected)
    assert sk_error(pred, meas) == pytest.approx(expected)
    # The ratio error is stricter: 1.5, 2, 1.1, 1/0.6 -> exp(mean ln) - 1.
    assert acc["ratio_error"] == pytest.approx((1.5 * 2 * 1.1 / 0.6) ** 0.25 - 1)
    assert acc["sk_error"] < acc["ratio_error"]


def test_sk_error_floors_exact_predictions():
    # One exact kernel counts as SK_FLOOR, not as 0 (which would zero the geometric mean).
    assert sk_error([1.0, 2.0], [1.0, 1.0]) == pytest.approx(math.sqrt(SK_FLOOR * 1.0))
    assert sk_error([5.0], [5.0]) == pytest.approx(SK_FLOOR)
    assert math.isnan(sk_error([], []))
    assert accuracy([np.nan, 1.5], [1.0, 1.0])["sk_error"] == pytest.approx(0.5)  # unpriced left out


def test_accuracy_leaves_out_unpriced():
    acc = accuracy([np.nan, 4.0, 1.0], [1.0, 1.0, 1.0])
    assert acc["unpriced"] == 1 and acc["n"] == 2
    assert acc["within_2x"] == 0.5 and acc["ratio_error"] == pytest.approx(2 - 1)  # exp((ln 4 + 0) / 2) - 1
    with pytest.raises(ValueError):
        accuracy([1.0], [0.0])


def test_fusion_metrics_by_hand():
    d = pd.DataFrame({
        "program": ["a", "b", "c"],
        "meas_fused": [1.0, 1.0, 2.0], "meas_unfused": [2.0, 3.0, 1.0],    # gains 2, 3, 0.5
        "pred_fused": [1.0, 1.0, 1.0], "pred_unfused": [4.0, 1.5, 1.2],    # gains 4, 1.5, 1.2
    })
    m = fusion_metrics(d)
    assert m["fusion_n"] == 3
    assert m["fusion_order_acc"] == pytest.approx(2 / 3)  # c: measured says don't fuse, model says fuse
    assert m["fusion_gain_ratio_error"] == pytest.approx(math.exp((math.log(2) + math.log(2) + math.log(2.4)) / 3) - 1)
    assert m["fusion_gain_tau"] == pytest.approx(kendalltau([4, 1.5, 1.2], [2, 3, 0.5]).statistic)


# ----------------------------------------------------------------------------- compare


@pytest.fixture(scope="module")
def small_data(tmp_path_factory):
    """A slice of the suite (training) and two real programs with their supplementary rows."""
    suite = read_dataset(ROOT / "calibration" / "host_cpu.parquet")
    keep = suite["kernel"].isin(["ew_add", "ew_exp", "ew_mul", "copy_s2", "matmul_square", "launch_add", "launch_empty"])
    suite = suite[keep & (suite["dtype"] == "float32") & (suite["size"].astype(int) <= 1 << 18)]
    programs = read_dataset(ROOT / "calibration" / "host_cpu_programs.parquet")
    prog = programs[programs["kernel"].isin(["mlp_fwd", "layernorm_softmax", "x_ew_add", "x_matmul_nn"])]
    d = tmp_path_factory.mktemp("compare")
    suite.to_parquet(d / "suite.parquet", index=False)
    prog.to_parquet(d / "programs.parquet", index=False)
    return d / "suite.parquet", d / "programs.parquet", suite, prog


def test_compare_program_split(small_data):
    suite_path, prog_path, suite, prog = small_data
    table = compare_models(["fitted", "roofline", "xla-gpu"], prog_path, "program", train=[suite_path, prog_path], device=CPU)
    assert list(table["model"]) == ["fitted", "roofline", "xla-gpu"]
    n_kernels = int(((prog["kernel_class"] == "program") & ~prog["opcode"].isin(["while", "conditional", "call"])).sum())
    assert (table["n"] + table["unpriced"] == n_kernels).all()
    assert (table["fusion_n"] == 2).all()  # mlp_fwd and layernorm_softmax, fused and unfused
    fitted = table.set_index("model").loc["fitted"]
    assert 0 <= fitted["ratio_error"] < 3 and -1 <= fitted["kendall_tau"] <= 1
    pred = table.predictions
    assert set(pred["model"]) == {"fitted", "roofline", "xla-gpu"}
    scored = pred[pred["scored"]]
    assert set(scored["kernel_class"]) == {"program"}
    # The supplementary rows train, they are never scored.
    assert not pred["program"].str.startswith("x_").any()


def test_program_rows_never_train(small_data):
    suite_path, prog_path, _, _ = small_data
    # Handing the program file as training data must not leak its program rows:
    # the result equals training on the suite + supplementary rows only.
    a = compare_models(["fitted"], prog_path, "program", train=[suite_path, prog_path], device=CPU)
    prog = read_dataset(prog_path)
    extra_only = prog[prog["kernel_class"].str.startswith("extra-")]
    both = pd.concat([read_dataset(suite_path), extra_only], ignore_index=True)
    b = compare_models(["fitted"], prog_path, "program", train=both, device=CPU)
    assert a["ratio_error"].iloc[0] == pytest.approx(b["ratio_error"].iloc[0], rel=1e-9)


def test_compare_class_and_cv_splits(small_data):
    suite_path, _, suite, _ = small_data
    by_class = compare_models(["fitted"], suite_path, "class", device=CPU)
    assert by_class["n"].iloc[0] + by_class["unpriced"].iloc[0] == len(suite)
    assert math.isnan(by_class["fusion_order_acc"].iloc[0])
    cv = compare_models(["fitted"], suite_path, "cv", device=CPU, folds=3)
    assert set(cv.predictions["fold"]) == {0, 1, 2}


def test_printed_comparison_leaves_out_empty_fusion_columns(small_data):
    # Printed (a script, a terminal) as in a notebook's HTML: the fusion-decision columns only where the
    # data has fused/unfused pairs, not four columns of NaN.
    suite_path, prog_path, _, _ = small_data
    def wide():
        return pd.option_context("display.max_columns", None, "display.width", 1000)

    by_class = compare_models(["fitted"], suite_path, "class", device=CPU)
    with wide():
        text = repr(by_class)
    assert "ratio_error" in text and "fusion_order_acc" not in text and "fusion_n" not in text
    assert math.isnan(by_class["fusion_order_acc"].iloc[0])  # still in the table itself
    program = compare_models(["roofline"], prog_path, "program", train=[suite_path, prog_path], device=CPU)
    with wide():
        assert "fusion_order_acc" in repr(program)


def test_compare_rejects_unknown_split(small_data):
    with pytest.raises(ValueError, match="unknown split"):
        compare_models(["fitted"], small_data[1], "random", device=CPU)


def test_cli_compare(small_data, capsys, monkeypatch):
    from xla_costmodel.cli import main
    from xla_costmodel.devices import _registry, register_device

    # Registered for this test only: other tests list the device names.
    monkeypatch.setattr(_registry, "_USER_DEVICES", dict(_registry._USER_DEVICES))
    register_device(CPU, overwrite=True)
    suite_path, prog_path, _, _ = small_data
    rc = main(["compare", "--models", "fitted", "roofline", "--dataset", str(prog_path),
               "--train", str(suite_path), str(prog_path), "--device", "test-cpu", "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    records = json.loads(out)
    assert [r["model"] for r in records] == ["fitted", "roofline"]
    assert {"sk_error", "ratio_error", "kendall_tau", "within_2x"} <= set(records[0])
    assert not {"gmre", "sk_gmre"} & set(records[0])  # one name per metric
    assert main(["compare", "--split", "random", "--dataset", str(prog_path)]) == 2
    assert "unknown split" in capsys.readouterr().err


def test_form_ceiling_fits_the_scored_kernels_themselves(small_data):
    """The form ceiling (`compare.form_ceiling`): each fittable model fitted to the very kernels it is scored on,
    so on those kernels it does at least as well as the same model trained elsewhere and scored there."""
    from xla_costmodel.compare import form_ceiling

    suite_path, prog_path, _, _ = small_data
    form = form_ceiling(["fitted", "roofline"], prog_path, CPU, progress=False)
    assert set(form["model"]) == {"fitted"}  # roofline has no parameters to fit: no form ceiling
    assert "all" in set(form["source"])
    ceiling = form.set_index("source").loc["all"]
    held_out = compare_models(["fitted"], prog_path, "program", train=[suite_path, prog_path],
                              device=CPU).set_index("model").loc["fitted"]
    assert ceiling["n"] == held_out["n"] > 0  # the same program kernels scored
    assert ceiling["ratio_error"] <= held_out["ratio_error"], (ceiling["ratio_error"], held_out["ratio_error"])
