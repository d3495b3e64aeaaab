"""XLA:GPU's convolution passes before fusion as `simulate_fusion(conv_rewrites=True)` runs them
(`fusion._conv_rewrite`): the cuDNN calls, pads and transposes checked against the module XLA:GPU itself has
right before priority fusion in a deviceless compile for h100-sxm (where jax's CUDA plugin is installed), and
the rules that need no compile."""

from __future__ import annotations

import json
from collections import Counter

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._conv_rewrite import cudnn_layout, rewrite_convolutions  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from _xla_gpu_dumps import first_dump, lowered_program, xla_gpu_pass_dumps  # noqa: E402


def _conv(x, w, stride=(1, 1), padding="SAME", dims=("NHWC", "HWIO", "NHWC"), groups=1):
    return lax.conv_general_dilated(x, w, stride, padding, dimension_numbers=dims, feature_group_count=groups)


def conv_bias_relu(x, w, b):  # stride 2, SAME: uneven padding (a pad), bias and ReLU fused into the call
    return jnp.maximum(_conv(x, w, (2, 2)) + b, 0.0)


def conv_nchw_grad(x, w):  # NCHW / OIHW: transposes into cuDNN's NHWC; backward filter and backward input
    return jax.grad(lambda x, w: jnp.sum(jnp.tanh(_conv(x, w, dims=("NCHW", "OIHW", "NCHW")))), (0, 1))(x, w)


def nchw_bias_grad(x, w, b):  # NCHW with a bias: the gradient's reduce and the filter's gradient read the
    # call's NHWC result directly (layout assignment propagates its layout; no transpose back and forth)
    def loss(w, b):
        return jnp.sum(jnp.tanh(_conv(x, w, dims=("NCHW", "OIHW", "NCHW")) + b))
    return jax.grad(loss, (0, 1))(w, b)


def strided_grad(x, w):  # stride 2: backward input with lhs dilation, uneven padding
    return jax.grad(lambda x, w: jnp.sum(_conv(x, w, (2, 2)) ** 2), (0, 1))(x, w)


def depthwise(x, w):  # feature groups: no bias fusion (depthwise), forward
    return _conv(x, w, groups=8) + 1.0


def small_spatial(x, w):  # kernel larger than the input: the simplifier swaps the operands first
    return _conv(x, w, padding="SAME")


def residual(x, w, r):  # the addend is not a bias: a side input
    return _conv(x, w) + r


def half(x, w):  # f16 with 3 input channels: CudnnPadForConvolutions pads them to 4
    return _conv(x, w)


def conv1d(x, w):  # one spatial dimension
    return lax.conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))


def dilated(x, w):  # window (rhs) dilation, SAME padding
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", rhs_dilation=(2, 2),
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))


def depthwise_grad(x, w):  # the filter's gradient of a depthwise convolution: batch groups
    return jax.grad(lambda w: jnp.sum(jnp.tanh(_conv(x, w, groups=8))))(w)


def bf16_grad(x, w):  # bf16 forward and backward
    return jax.grad(lambda x, w: jnp.sum(_conv(x, w).astype(jnp.float32) ** 2), (0, 1))(x, w)


def conv3d(x, w):  # three spatial dimensions: NCDHW on Hopper
    return lax.conv_general_dilated(x, w, (1, 1, 1), "SAME", dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))


F32 = "float32"
PROGRAMS = {
    "conv_bias_relu": (conv_bias_relu, [((4, 16, 16, 16), F32), ((3, 3, 16, 32), F32), ((32,), F32)]),
    "conv_nchw_grad": (conv_nchw_grad, [((4, 8, 16, 16), F32), ((16, 8, 3, 3), F32)]),
    "nchw_bias_grad": (nchw_bias_grad, [((4, 8, 16, 16), F32), ((16, 8, 3, 3), F32), ((16, 1, 1), F32)]),
    "strided_grad": (strided_grad, [((4, 16, 16, 8), F32), ((3, 3, 8, 16), F32)]),
    "depthwise": (depthwise, [((2, 16, 16, 8), F32), ((3, 3, 1, 8), F32)]),
    "small_spatial": (small_spatial, [((2, 2, 2, 64), F32), ((3, 3, 64, 64), F32)]),
    "residual": (residual, [((2, 8, 8, 16), F32), ((3, 3, 16, 16), F32), ((2, 8, 8, 16), F32)]),
    "half": (half, [((2, 16, 16, 3), "float16"), ((3, 3, 3, 64), "float16")]),
    "conv1d": (conv1d, [((4, 32, 16), F32), ((5, 16, 32), F32)]),
    "dilated": (dilated, [((2, 16, 16, 8), F32), ((3, 3, 8, 16), F32)]),
    "depthwise_grad": (depthwise_grad, [((2, 16, 16, 8), F32), ((3, 3, 1, 8), F32)]),
    "bf16_grad": (bf16_grad, [((4, 16, 16, 16), "bfloat16"), ((3, 3, 16, 32), "bfloat16")]),
    "conv3d": (conv3d, [((2, 8, 8, 8, 4), F32), ((3, 3, 3, 4, 8), F32)]),
}


def _lowered(name):
    return lowered_program(*PROGRAMS[name], inline=False)


def _calls(module) -> Counter:
    """The cuDNN convolution calls of a module: (target, window, labels, operand shapes, result shape)."""
    out = Counter()
    for comp in module.computations:
        for i in comp.instructions:
            target = i.raw_attributes.get("custom_call_target", "")
            if i.opcode == "custom-call" and "cudnn$conv" in target:
                out[(json.loads(target), i.raw_attributes.get("window", ""), i.raw_attributes.get("dim_labels"),
                     tuple(o.shape.dims for o in i.operands), i.shape.tuple_shapes[0].dims)] += 1
    return out


def test_layouts_follow_heuristic_layout_assignment():
    assert cudnn_layout("f32", 2, (9, 0)) == "NHWC"
    assert cudnn_layout("f64", 2, (9, 0)) == "NCHW"
    assert cudnn_layout("f32", 3, (9, 0)) == "NCHW"
    assert cudnn_layout("f32", 2, (8, 0)) == "NCHW"
    assert cudnn_layout("bf16", 2, (8, 0)) == "NHWC"
    assert cudnn_layout("s8", 2, (8, 0)) == "NHWC"


def test_rewrite_bias_relu_pad_and_filter_transpose():
    module = _lowered("conv_bias_relu")
    done = rewrite_convolutions(module, (9, 0))
    assert [r.target for r in done] == ["__cudnn$convBiasActivationForward"]
    assert len(done[0].absorbed) == 2  # the add and the maximum
    ops = Counter(i.opcode for i in module.entry.instructions)
    assert ops["convolution"] == 0 and ops["pad"] == 1 and ops["transpose"] == 1 and ops["maximum"] == 0
    (call,) = _calls(module)
    assert call[2] == "b01f_o01i->b01f" and call[4] == (4, 8, 8, 32)


def test_layout_propagation_removes_the_transposes_back():
    module = _lowered("nchw_bias_grad")
    done = rewrite_convolutions(module, (9, 0))
    assert sorted(r.target for r in done) == ["__cudnn$convBackwardFilter", "__cudnn$convBiasActivationForward"]
    # x and the filter into NHWC / OHWI, the filter's gradient back to OIHW (the entry's result): nothing else
    transposes = {(i.operands[0].name, i.raw_attributes["dimensions"]) for i in module.entry.instructions
                  if i.opcode == "transpose"}
    assert len(transposes) == 3, transposes


def test_simulate_fusion_option():
    fn, shapes = PROGRAMS["conv_nchw_grad"]
    module = _lowered("conv_nchw_grad")
    off = simulate_fusion(module, device="h100-sxm", price_totals=False, conv_rewrites=False)
    on = simulate_fusion(module, device="h100-sxm", price_totals=False)  # the default
    assert "convolution" in {k.opcode for k in kernels_of(off.module)}
    assert "convolution" not in {k.opcode for k in kernels_of(on.module)}
    assert sorted(r.target for r in on.pre_fusion_rewrites if getattr(r, "kind", "") == "cudnn-conv") == [
        "__cudnn$convBackwardFilter", "__cudnn$convBackwardInput", "__cudnn$convForward"]
    cpu = simulate_fusion(module, device="cpu-host", price_totals=False, conv_rewrites=True) \
        if _has_device("cpu-host") else None
    assert cpu is None or not [r for r in cpu.pre_fusion_rewrites if getattr(r, "kind", "") == "cudnn-conv"]


def _has_device(name):
    from xla_costmodel.devices import device_names
    return name in device_names()


def _xla(name) -> tuple[str, str]:
    """XLA:GPU's module before priority fusion and its optimized module, from one deviceless compile."""
    dumps = xla_gpu_pass_dumps(__file__, name, "priority-fusion")
    before = first_dump(dumps, "*.before_priority-fusion.txt", contains="jit_" + name)
    after = first_dump(dumps, "*after_optimizations.txt", contains="jit_" + name)
    assert before is not None and after is not None, sorted(dumps)[:8]
    return before, after


def _kinds(kernels) -> Counter:
    """Kernels as cuDNN calls by target, and the rest by count (their fusion is not what is checked here)."""
    out = Counter()
    for k in kernels:
        if k.opcode == "async-done":
            continue
        target = k.raw_attributes.get("custom_call_target", "") if k.opcode == "custom-call" else ""
        out[json.loads(target) if target else "other kernels"] += 1
    return out


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_same_cudnn_calls_and_kernels_as_xla_gpu(name):
    """Deviceless XLA:GPU compile for h100-sxm: the calls before priority fusion are XLA's (target, window,
    labels, operand and result shapes), and the whole simulated pipeline from the lowered module makes as many
    kernels of each kind as XLA's optimized module."""
    if not gpu_compile_available():
        pytest.skip("jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")
    before, after = _xla(name)
    ours = _lowered(name)
    rewrite_convolutions(ours, (9, 0))
    assert _calls(ours) == _calls(parse_hlo(before)), json.dumps(
        {"ours": repr(_calls(ours)), "xla": repr(_calls(parse_hlo(before)))})
    sim = simulate_fusion(_lowered(name), device="h100-sxm", price_totals=False, conv_rewrites=True,
                          gemm_rewrites=True, simplify=True)
    assert _kinds(kernels_of(sim.module)) == _kinds(kernels_of(parse_hlo(after)))


def test_check_plan_validity_says_why_a_module_with_cudnn_calls_is_not_run():
    """The default simulation makes cuDNN calls, which no CPU runs: the library's validity check says so
    instead of reporting a mismatch."""
    from xla_costmodel.fusion import check_plan_validity

    module = _lowered("conv_nchw_grad")
    fused = simulate_fusion(module, device="h100-sxm", price_totals=False).module
    report = check_plan_validity(module, fused)
    assert report.ok and report.outputs_match is None
    assert "__cudnn$conv" in report.skipped and "no CPU runs them" in report.skipped
