"""Convolutions with feature groups and int8 matmuls on the host: which runtime XLA:CPU picks, and how the
roofline prices them (`models._xla_cpu_convolution`, `measure._host`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_costmodel as xc
from xla_costmodel.models import get_model
from xla_costmodel.models._xla_cpu_convolution import (
    GROUPED_CONV_RATES,
    grouped_convolution_seconds,
    grouped_convolutions,
    runs_on_ynnpack,
)

from conftest import TEST_CPU


def _conv(groups: int, features: int = 64, rank: int = 2):
    spatial = "HW"[:rank] if rank == 2 else "H"
    dn = (f"N{spatial}C", f"{spatial}IO", f"N{spatial}C")
    x = jnp.ones((2,) + (16,) * rank + (features,), jnp.float32)
    w = jnp.ones((3,) * rank + (features // groups, features), jnp.float32)

    def fn(a, b):
        return jax.lax.conv_general_dilated(a, b, (1,) * rank, "SAME", dimension_numbers=dn,
                                            feature_group_count=groups)
    return fn, (x, w)


def _kernels(module):
    return [h for h in module.entry.instructions if h.opcode not in ("parameter", "constant", "tuple")]


@pytest.mark.parametrize("groups", [64, 4])
def test_grouped_2d_conv_is_a_ynnpack_fusion_as_xla_compiles_it(groups):
    # What XLA:CPU compiled: the convolution, groups and all, inside a `__ynn_fusion`.
    fn, args = _conv(groups)
    module = xc.from_jax(fn, *args)
    (kernel,) = _kernels(module)
    assert runs_on_ynnpack(kernel)
    assert '"__ynn_fusion"' in kernel.raw_attributes.get("backend_config", "")
    (conv,) = grouped_convolutions(kernel)
    assert conv.runtime == "ynn"
    assert conv.groups == groups == kernel.fused_computation.root.attribute("feature_group_count")
    # batch x positions x window x input features: the stencil copy YNNPACK walks.
    assert conv.stencil_elements == 2 * 16 * 16 * 9 * 64
    # Flops as XLA counts them (valid window positions only, padding left out).
    assert conv.flops == jax.jit(fn).lower(*args).compile().cost_analysis()["flops"]


@pytest.mark.parametrize("features, rank", [(64, 1), (8, 2)])
def test_convs_ynnpack_does_not_take_stay_lone_eigen_convolutions(features, rank):
    # YNNPACK takes 2-D convolutions of more than 16 features only: a 1-D depthwise one, or one of 8
    # features, stays a lone `convolution` (Eigen's ConvolutionThunk).
    fn, args = _conv(features, features=features, rank=rank)
    (kernel,) = _kernels(xc.from_jax(fn, *args))
    assert kernel.opcode == "convolution" and not runs_on_ynnpack(kernel)
    (conv,) = grouped_convolutions(kernel)
    assert conv.runtime == "eigen" and conv.groups == features


def test_ungrouped_convs_are_left_to_the_gemm_rate():
    fn, args = _conv(1)
    (kernel,) = _kernels(xc.from_jax(fn, *args))
    assert runs_on_ynnpack(kernel) and grouped_convolutions(kernel) == []


def _host(rate: float | None):
    measurements = {} if rate is None else {key: rate for key in GROUPED_CONV_RATES.values()}
    return TEST_CPU.replace(name="host", measurements=measurements)


def test_depthwise_conv_is_priced_at_the_grouped_rate_not_the_gemm_rate():
    fn, args = _conv(64)
    (kernel,) = _kernels(xc.from_jax(fn, *args))
    rate = 4e8  # stencil elements per second
    roofline = get_model("roofline")
    with_rate = roofline.estimate(kernel, _host(rate))
    without = roofline.estimate(kernel, _host(None))
    elements = 2 * 16 * 16 * 9 * 64
    assert with_rate.details["runtime_conv_s"] == pytest.approx(elements / rate)
    assert with_rate.compute_s >= elements / rate
    # Without a measured rate (an older host measurement) the GEMM rate prices it, far lower.
    assert "runtime_conv_s" not in without.details
    assert without.compute_s < with_rate.compute_s / 10
    # The Eigen path has its own measured rate.
    fn, args = _conv(8, features=8)
    (lone,) = _kernels(xc.from_jax(fn, *args))
    eigen = TEST_CPU.replace(measurements={GROUPED_CONV_RATES["ynn"]: rate, GROUPED_CONV_RATES["eigen"]: rate / 2})
    assert roofline.estimate(lone, eigen).details["runtime_conv_s"] == pytest.approx(2 * 16 * 16 * 9 * 8 / (rate / 2))
    # A GPU is never priced by the host's runtime.
    assert grouped_convolution_seconds(kernel, xc.get_device("h100-sxm")) is None


def test_int8_matmul_is_priced_at_the_measured_int8_rate():
    a = jnp.asarray(np.ones((256, 256)), jnp.int8)
    (kernel,) = _kernels(xc.from_jax(lambda x, y: jax.lax.dot(x, y, preferred_element_type=jnp.int32), a, a))
    assert runs_on_ynnpack(kernel)
    slow = TEST_CPU.replace(peak_matmul_flops_per_s={"f32": 1e11, "s8": 1e10})
    fast = TEST_CPU.replace(peak_matmul_flops_per_s={"f32": 1e11, "s8": 1e12})
    roofline = get_model("roofline")
    flops = 2 * 256**3
    assert roofline.estimate(kernel, slow).compute_s == pytest.approx(flops / 1e10, rel=0.01)
    assert roofline.estimate(kernel, fast).compute_s == pytest.approx(flops / 1e12, rel=0.05)


def _f64_conv(groups: int):
    def fn(a, b):
        return jax.lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                            feature_group_count=groups)
    with jax.enable_x64(True):
        x, w = jnp.ones((2, 16, 16, 8), jnp.float64), jnp.ones((3, 3, 8 // groups, 8), jnp.float64)
        return xc.from_jax(fn, x, w)


@pytest.mark.parametrize("groups", [1, 8])
def test_f64_convs_run_in_xlas_loop_as_compiled(groups):
    # Eigen takes f16/f32 only and YNNPACK more than 16 features: XLA's own loop runs these (grouped ones
    # after XLA expands the groups into one ungrouped convolution with a block-diagonal kernel).
    from xla_costmodel.models._xla_cpu_convolution import LOOP_CONV_RATE, convolution_runtime, loop_convolution_seconds

    module = _f64_conv(groups)
    (conv,) = [h for h in module.entry.instructions if h.opcode == "convolution"]
    assert int(conv.attribute("feature_group_count", 1) or 1) == 1
    assert convolution_runtime(conv) == "loop" and grouped_convolutions(conv) == []
    host = TEST_CPU.replace(measurements={LOOP_CONV_RATE: 1e9})
    seconds, flops = loop_convolution_seconds(conv, host)
    assert seconds == pytest.approx(flops / 2 / 1e9)
    estimate = get_model("roofline").estimate(conv, host)
    assert estimate.details["runtime_conv_s"] == pytest.approx(seconds)
    assert estimate.compute_s == pytest.approx(seconds, rel=0.01)
    # An f32 convolution of the same form is Eigen's.
    fn, args = _conv(8, features=8)
    (lone,) = _kernels(xc.from_jax(fn, *args))
    assert convolution_runtime(lone) == "eigen" and loop_convolution_seconds(lone, host) is None
