"""The hardware-fitted linear model: least squares on relative error, weights, estimator API, CostModel."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from xla_costmodel import parse_hlo
from xla_costmodel.fit import FEATURES, CalibrationError, FittedModel, LearnedModel
from xla_costmodel.fit._fitted import fit_relative_least_squares
from xla_costmodel.models import CostModel, get_model, model_names
from conftest import TEST_CPU

CPU = TEST_CPU.replace(peak_matmul_flops_per_s={})  # no matrix units: everything on the vector path

FUSION_HLO = """HloModule m

%fused (p0: f32[1024], p1: f32[1024]) -> f32[1024] {
  %p0 = f32[1024]{0} parameter(0)
  %p1 = f32[1024]{0} parameter(1)
  %m = f32[1024]{0} multiply(%p0, %p1)
  ROOT %e = f32[1024]{0} exponential(%m)
}

%body (t: (s32[], f32[1024])) -> (s32[], f32[1024]) {
  ROOT %t = (s32[], f32[1024]) parameter(0)
}

%cond (t: (s32[], f32[1024])) -> pred[] {
  %t = (s32[], f32[1024]) parameter(0)
  ROOT %c = pred[] constant(false)
}

ENTRY %main (a: f32[1024], b: f32[1024]) -> f32[1024] {
  %a = f32[1024]{0} parameter(0)
  %b = f32[1024]{0} parameter(1)
  %f = f32[1024]{0} fusion(%a, %b), kind=kLoop, calls=%fused
  %s = f32[1024]{0} add(%f, %a)
  %z = s32[] constant(0)
  %tup = (s32[], f32[1024]) tuple(%z, %s)
  %w = (s32[], f32[1024]) while(%tup), condition=%cond, body=%body
  ROOT %g = f32[1024]{0} get-tuple-element(%w), index=1
}
"""


# ----------------------------------------------------------------------------- least squares


def test_relative_least_squares_by_hand():
    # One feature, two kernels: x = 1 for both, measured 1 s and 2 s. Relative error
    # (w/1 - 1)^2 + (w/2 - 1)^2 is smallest at w = 6/5; absolute error at w = 3/2.
    w = fit_relative_least_squares(np.array([[1.0], [1.0]]), np.array([1.0, 2.0]))
    assert w[0] == pytest.approx(1.2, rel=1e-12)


def test_recovers_known_weights_exactly():
    rng = np.random.default_rng(0)
    names = ["launch", "ld_32b_s1", "st_32b_s1", "op_exp_f32", "matmul_f32"]
    true = np.array([3e-7, 5e-11, 2e-10, 4e-10, 7e-12])
    X = np.column_stack([np.ones(200), *(rng.integers(0, 10**6, size=(4, 200)).astype(float))])
    X[rng.random((200, 5)) < 0.3] = 0.0
    X[:, 0] = 1.0
    y = X @ true
    frame = pd.DataFrame(X, columns=names)
    model = FittedModel().fit(frame, y)
    assert np.allclose(model.coef_, true, rtol=1e-8)
    assert np.allclose(model.predict(frame), y, rtol=1e-8)
    # With 10% multiplicative noise the weights stay within a few percent.
    noisy = y * np.exp(rng.normal(0, 0.1, size=len(y)))
    model = FittedModel().fit(frame, noisy)
    assert np.allclose(model.coef_, true, rtol=0.05)


def test_relative_not_absolute_error():
    # Absolute least squares would let the 1 ms kernels decide; relative LS fits
    # the 1 µs kernels as well (each row counts as much).
    X = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 1e6], [1.0, 1e6]])
    y = np.array([1e-6, 1.2e-6, 1e-3, 1.1e-3])
    w = fit_relative_least_squares(X, y)
    rel = X @ w / y - 1
    expected = np.linalg.lstsq(X / y[:, None], np.ones(4), rcond=None)[0]
    assert np.allclose(w, expected, rtol=1e-9)
    assert np.max(np.abs(rel)) < 0.15


def test_weights_stay_non_negative_unless_signed():
    # The data want a negative second weight (the second count makes kernels faster).
    X = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    y = np.array([4.0, 3.0, 2.0, 1.0])
    free = np.linalg.lstsq(X / y[:, None], np.ones(4), rcond=None)[0]
    assert free[1] < 0
    frame = pd.DataFrame(X, columns=["launch", "minldst_32b"])
    assert np.all(FittedModel().fit(frame, y).coef_ >= 0)
    signed = FittedModel(signed=("minldst_*",)).fit(frame, y)
    assert np.allclose(signed.coef_, free, rtol=1e-9)


def test_unused_features_get_zero_weight_and_zero_support():
    X = pd.DataFrame({"launch": [1.0, 1.0, 1.0], "sort_cmp": [0.0, 0.0, 0.0], "op_add_f32": [10.0, 100.0, 1000.0]})
    m = FittedModel().fit(X, np.array([1e-6, 1.1e-6, 2e-6]))
    assert m.coef_[1] == 0.0 and m.support_.tolist() == [3, 0, 3]


def test_fit_rejects_bad_times():
    X = pd.DataFrame({"launch": [1.0, 1.0]})
    with pytest.raises(ValueError, match="positive"):
        FittedModel().fit(X, np.array([1e-6, 0.0]))


def test_weights_table_in_seconds_per_unit():
    X = pd.DataFrame({"launch": [1.0] * 4, "op_exp_f32": [0.0, 1e3, 1e4, 1e5], "ld_32b_s1": [0.0, 0.0, 0.0, 0.0]})
    y = 2e-7 + 4e-10 * X["op_exp_f32"].to_numpy()
    table = FittedModel().fit(X, y).weights_table()
    assert list(table.columns) == ["feature", "group", "unit", "weight_s", "weight_ns", "per_second", "support", "fixed"]
    assert table["feature"].tolist() == ["launch", "op_exp_f32"]  # no support, not listed
    row = table.set_index("feature").loc["op_exp_f32"]
    assert row["weight_s"] == pytest.approx(4e-10, rel=1e-9)
    assert row["weight_ns"] == pytest.approx(0.4, rel=1e-9)
    assert row["per_second"] == pytest.approx(2.5e9, rel=1e-9)
    assert row["unit"] == "operation" and row["group"] == "compute" and row["support"] == 3
    full = FittedModel().fit(X, y).weights_table(all_features=True)
    assert "ld_32b_s1" in set(full["feature"]) and bool(full.set_index("feature").loc["ld_32b_s1", "fixed"])


# ----------------------------------------------------------------------------- estimator API


def _failed(estimator, expected=None):
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None, expected_failed_checks=expected or {})
    return [(r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"]


def test_fitted_model_passes_sklearn_checks():
    assert _failed(FittedModel()) == []


def test_learned_model_passes_sklearn_checks():
    # Histogram binning computes bin edges from the distinct rows, so weighting a
    # row is not exactly the same as repeating it (scikit-learn's own
    # HistGradientBoostingRegressor is exempt from this check for the same reason).
    expected = {"check_sample_weight_equivalence_on_dense_data": "histogram bin edges ignore weights"}
    assert _failed(LearnedModel(baseline=None, max_iter=10), expected) == []
    assert _failed(LearnedModel(baseline="fitted", max_iter=10), expected) == []


def test_hyper_parameters_only_stored():
    m = FittedModel(features=["launch"], task_bytes=1234)
    assert m.get_params() == {"features": ["launch"], "signed": (), "task_bytes": 1234}
    assert not [k for k in vars(m) if k.endswith("_")]


# ----------------------------------------------------------------------------- CostModel


def _weights():
    return {"launch": 2e-7, "op_mul_f32": 1e-10, "op_exp_f32": 5e-10, "ld_32b_s1": 3e-11, "st_32b_s1": 4e-11}


def test_estimate_is_the_weighted_sum_of_features():
    module = parse_hlo(FUSION_HLO)
    kernel = module.entry.instruction("f")
    model = FittedModel.from_weights(_weights())
    assert isinstance(model, CostModel)
    est = model.estimate(kernel, CPU)
    # 1024 multiplies, 1024 exps, 2048 f32 loads, 1024 f32 stores, one launch.
    expected = 2e-7 + 1024 * 1e-10 + 1024 * 5e-10 + 2048 * 3e-11 + 1024 * 4e-11
    assert est.time_s == pytest.approx(expected, rel=1e-12)
    assert est.launch_s == pytest.approx(2e-7)
    assert est.compute_s == pytest.approx(1024 * 6e-10)
    assert est.memory_s == pytest.approx(2048 * 3e-11 + 1024 * 4e-11)
    assert est.bound == "compute"
    assert est.details["features"]["op_exp_f32"] == 1024.0
    assert sum(est.details["contributions"].values()) == pytest.approx(expected)


def test_estimate_free_control_flow_and_fusion():
    module = parse_hlo(FUSION_HLO)
    model = FittedModel.from_weights(_weights())
    assert model.estimate(module.entry.instruction("a"), CPU).bound == "free"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not model.estimate(module.entry.instruction("w"), CPU).priced
    fusion = model.estimate_fusion(module.entry.instruction("f"), [module.entry.instruction("s")], CPU)
    assert math.isfinite(fusion.time_unfused_s) and math.isfinite(fusion.time_fused_s)


def test_unsupported_features_are_reported():
    module = parse_hlo(FUSION_HLO)
    model = FittedModel.from_weights({"launch": 2e-7, "op_mul_f32": 1e-10}, support={"launch": 5, "op_mul_f32": 5})
    est = model.estimate(module.entry.instruction("f"), CPU)
    assert "op_exp_f32" in est.details["unsupported"] and "op_exp_f32" in est.note


def test_models_are_registered():
    names = model_names()
    for name in ("fitted", "learned", "roofline-calibrated", "xla-gpu-calibrated"):
        assert name in names
    assert isinstance(get_model("fitted"), FittedModel)
    assert isinstance(get_model("learned"), LearnedModel)


def test_missing_calibration_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_COSTMODEL_DATA_DIR", str(tmp_path))
    kernel = parse_hlo(FUSION_HLO).entry.instruction("f")
    with pytest.raises(CalibrationError) as err:
        FittedModel().estimate(kernel, CPU)
    msg = str(err.value)
    assert "test-cpu_fitted.json" in msg
    # Made from measurements of that device (a dataset): this machine is not a 'test-cpu'.
    assert "xla_costmodel.calibrate(device='test-cpu', dataset=" in msg and "xla-costmodel calibrate" in msg
    assert "--dataset" in msg


@pytest.mark.parametrize("content", ["{not json", json.dumps([1, 2]), json.dumps({"format": "other/1"})])
def test_invalid_calibration_is_refused(tmp_path, monkeypatch, content):
    monkeypatch.setenv("XLA_COSTMODEL_DATA_DIR", str(tmp_path))
    (tmp_path / "test-cpu_fitted.json").write_text(content)
    with pytest.raises(CalibrationError, match="test-cpu_fitted.json"):
        FittedModel.from_calibration(CPU)


def test_features_are_the_published_list():
    assert len(FEATURES) == len(set(FEATURES))
    for name in ("launch", "kernel_thunk", "lib_ynn", "lib_eigen", "lib_other", "tasks", "ld_32b_1of2", "ld_64b_gather", "st_16b_scatter", "minldst_32b",
                 "op_exp_f64", "red_f32", "matmul_f32", "dot_flops", "sort_cmp"):
        assert name in FEATURES


def test_every_feature_has_a_unit_in_the_weights_table():
    from xla_costmodel.features._features import FEATURES
    from xla_costmodel.fit._fitted import _unit

    assert [f for f in FEATURES if _unit(f) == "unit"] == []


def test_get_model_copies_an_estimator_with_other_hyper_parameters():
    # `get_model(model, **params)` gives the fitted models scikit-learn's clone + set_params (a
    # dataclasses.replace, as for the analytical models, does not apply to an estimator).
    from sklearn.base import clone

    model = FittedModel(signed=())
    copy = get_model(model, signed=("minldst_*",), task_bytes=1024)
    assert type(copy) is FittedModel and copy is not model
    assert copy.get_params() == {**clone(model).get_params(), "signed": ("minldst_*",), "task_bytes": 1024}
    assert model.signed == ()  # the original is left alone
    learned = get_model(LearnedModel(), max_iter=7)
    assert isinstance(learned, LearnedModel) and learned.max_iter == 7
    with pytest.raises(ValueError, match="Invalid parameter"):
        get_model(model, no_such_parameter=1)
