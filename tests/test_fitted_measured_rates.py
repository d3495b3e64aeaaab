"""`fitted`/`context` price work no training kernel had at the host's measured rate (`fit._measured_rates`):
YNNPACK's grouped convolutions per stencil element, its int8 matmuls at the measured s8 rate; kernels whose
features the training kernels had are priced by the weights alone, as before."""

from __future__ import annotations

import pytest

from xla_costmodel import parse_hlo
from xla_costmodel.fit import FittedModel
from xla_costmodel.fit._context_model import ContextModel
from xla_costmodel.features._counting import features_of
from conftest import TEST_CPU

YNN_RATE = 4.6e8  # stencil elements per second
S8_RATE = 7.25e11  # flop/s
MEASURED = TEST_CPU.replace(
    measurements={**TEST_CPU.measurements, "ynn_grouped_conv_elements_per_s": YNN_RATE},
    peak_matmul_flops_per_s={**TEST_CPU.peak_matmul_flops_per_s, "s8": S8_RATE},
)
UNMEASURED = TEST_CPU.replace(
    measurements={k: v for k, v in TEST_CPU.measurements.items() if k != "ynn_grouped_conv_elements_per_s"},
    peak_matmul_flops_per_s={k: v for k, v in TEST_CPU.peak_matmul_flops_per_s.items() if k != "s8"},
)

_YNN = 'backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}'


def _conv_module(groups: int) -> str:
    cin = 32 // groups
    return f"""HloModule m, is_scheduled=true

%fused (p0: f32[1,8,8,32], p1: f32[3,3,{cin},32]) -> f32[1,8,8,32] {{
  %p0 = f32[1,8,8,32]{{3,2,1,0}} parameter(0)
  %p1 = f32[3,3,{cin},32]{{3,2,1,0}} parameter(1)
  ROOT %c = f32[1,8,8,32]{{3,2,1,0}} convolution(%p0, %p1), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, feature_group_count={groups}
}}

ENTRY %main (x: f32[1,8,8,32], w: f32[3,3,{cin},32]) -> f32[1,8,8,32] {{
  %x = f32[1,8,8,32]{{3,2,1,0}} parameter(0)
  %w = f32[3,3,{cin},32]{{3,2,1,0}} parameter(1)
  ROOT %ynn_fusion = f32[1,8,8,32]{{3,2,1,0}} fusion(%x, %w), kind=kCustom, calls=%fused, {_YNN}
}}
"""


INT8_DOT = f"""HloModule m, is_scheduled=true

%fused (p0: s8[64,64], p1: s8[64,64]) -> s32[64,64] {{
  %p0 = s8[64,64]{{1,0}} parameter(0)
  %p1 = s8[64,64]{{1,0}} parameter(1)
  ROOT %d = s32[64,64]{{1,0}} dot(%p0, %p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}

ENTRY %main (a: s8[64,64], b: s8[64,64]) -> s32[64,64] {{
  %a = s8[64,64]{{1,0}} parameter(0)
  %b = s8[64,64]{{1,0}} parameter(1)
  ROOT %ynn_fusion = s32[64,64]{{1,0}} fusion(%a, %b), kind=kCustom, calls=%fused, {_YNN}
}}
"""

# What the reference host's training kernels had (plain YNNPACK convolutions and f32 dots): no grouped
# convolution on YNNPACK, no int8 matmul.
WEIGHTS = {"launch": 3e-7, "first": 2e-7, "lib_ynn": 6e-7, "lib_elements": 5e-11, "bytes_l2": 1e-12, "matmul_f32": 6.4e-12}
SUPPORT = {name: 40 for name in WEIGHTS}


def _kernel(text):
    return parse_hlo(text).entry.instruction("ynn_fusion")


def _by_weights(model, kernel, device) -> float:
    x = features_of(kernel, device)
    return sum(w * x[name] for name, w in WEIGHTS.items())


@pytest.mark.parametrize("cls", [FittedModel, ContextModel])
def test_depthwise_ynnpack_convolution_is_priced_per_stencil_element_at_the_measured_rate(cls):
    model = cls.from_weights(WEIGHTS, SUPPORT)
    kernel = _kernel(_conv_module(32))
    x = features_of(kernel, MEASURED)
    stencil = 1 * 8 * 8 * 3 * 3 * 32  # batch x output positions x window x input features
    assert x["ynn_grouped_conv_elements"] == stencil and x["matmul_f32"] > 0
    est = model.estimate(kernel, MEASURED)
    part = est.details["measured_rates"]["ynn_grouped_conv_elements"]
    assert part["measurement"] == "ynn_grouped_conv_elements_per_s" and part["per_second"] == YNN_RATE
    assert part["count"] == stencil and part["seconds"] == pytest.approx(stencil / YNN_RATE)
    # The GEMM-rate price of the same flops is what the measured rate replaces.
    assert part["replaces_s"] == {"matmul_f32": pytest.approx(x["matmul_f32"] * WEIGHTS["matmul_f32"])}
    expected = _by_weights(model, kernel, MEASURED) - x["matmul_f32"] * WEIGHTS["matmul_f32"] + stencil / YNN_RATE
    assert est.time_s == pytest.approx(expected, rel=1e-12)
    assert est.compute_s == pytest.approx(stencil / YNN_RATE)
    assert "matmul_f32" not in est.details["contributions"]
    assert est.details["contributions"]["ynn_grouped_conv_elements"] == pytest.approx(stencil / YNN_RATE)
    assert "ynn_grouped_conv_elements" not in est.details["unsupported"]
    assert "ynn_grouped_conv_elements_per_s" in est.note


def test_int8_matmul_on_ynnpack_is_priced_at_the_measured_s8_rate():
    model = FittedModel.from_weights(WEIGHTS, SUPPORT)
    kernel = _kernel(INT8_DOT)
    x = features_of(kernel, MEASURED)
    assert x["matmul_int"] == 2 * 64 * 64 * 64
    est = model.estimate(kernel, MEASURED)
    part = est.details["measured_rates"]["matmul_int"]
    assert part["per_second"] == S8_RATE and part["seconds"] == pytest.approx(x["matmul_int"] / S8_RATE)
    assert part["replaces_s"] == {}
    assert est.time_s == pytest.approx(_by_weights(model, kernel, MEASURED) + x["matmul_int"] / S8_RATE, rel=1e-12)
    assert 'peak_matmul_flops_per_s["s8"]' in est.note and "matmul_int" not in est.details["unsupported"]


@pytest.mark.parametrize("text", [_conv_module(32), INT8_DOT], ids=["depthwise", "int8"])
def test_without_the_measured_rate_the_work_stays_unsupported_and_priced_as_before(text):
    model = FittedModel.from_weights(WEIGHTS, SUPPORT)
    kernel = _kernel(text)
    est = model.estimate(kernel, UNMEASURED)
    assert "measured_rates" not in est.details
    assert est.time_s == pytest.approx(_by_weights(model, kernel, UNMEASURED), rel=1e-12)
    assert set(est.details["unsupported"]) & {"ynn_grouped_conv_elements", "matmul_int"}
    assert "not modelled" in est.note


def test_a_feature_the_training_kernels_had_keeps_its_fitted_weight():
    """Fitted on grouped convolutions (support > 0), the model prices them by its own weight, not the rate."""
    weights = {**WEIGHTS, "ynn_grouped_conv_elements": 1e-9}
    model = FittedModel.from_weights(weights, {**SUPPORT, "ynn_grouped_conv_elements": 12})
    kernel = _kernel(_conv_module(32))
    est = model.estimate(kernel, MEASURED)
    x = features_of(kernel, MEASURED)
    assert "measured_rates" not in est.details
    assert est.time_s == pytest.approx(sum(w * x[n] for n, w in weights.items()), rel=1e-12)


def test_an_ungrouped_ynnpack_convolution_is_priced_by_the_weights_alone():
    model = FittedModel.from_weights(WEIGHTS, SUPPORT)
    kernel = _kernel(_conv_module(1))
    assert features_of(kernel, MEASURED)["ynn_grouped_conv_elements"] == 0
    measured, unmeasured = model.estimate(kernel, MEASURED), model.estimate(kernel, UNMEASURED)
    assert "measured_rates" not in measured.details and measured.note == ""
    assert measured.time_s == unmeasured.time_s == pytest.approx(_by_weights(model, kernel, MEASURED), rel=1e-12)


def test_learned_keeps_its_trees_ratio_over_a_baseline_that_prices_the_work_at_the_measured_rate():
    import numpy as np
    import pandas as pd

    from xla_costmodel.fit import FEATURES, LearnedModel

    rng = np.random.default_rng(0)
    rows = pd.DataFrame(0.0, index=range(60), columns=list(FEATURES))
    rows["launch"] = 1.0
    rows["lib_ynn"] = 1.0
    rows["matmul_f32"] = rng.uniform(1e5, 1e8, 60)
    rows["lib_elements"] = rng.uniform(1e3, 1e6, 60)
    times = 1e-6 + 6.4e-12 * rows["matmul_f32"] + 5e-11 * rows["lib_elements"]
    model = LearnedModel(max_iter=20).fit(rows, times)
    kernel = _kernel(_conv_module(32))
    measured, unmeasured = model.estimate(kernel, MEASURED), model.estimate(kernel, UNMEASURED)
    part = measured.details["measured_rates"]["ynn_grouped_conv_elements"]
    assert part["per_second"] == YNN_RATE and "measured_rates" not in unmeasured.details
    base = model.baseline_._explain(features_of(kernel, MEASURED))[3]
    rebased = base - sum(part["replaces_s"].values()) + part["seconds"]
    assert measured.time_s / unmeasured.time_s == pytest.approx(rebased / base, rel=1e-9)
