"""XLA:GPU's SoftmaxRewriterTriton as `simulate_fusion(triton_softmax=True)` runs it: the rewritten module
runs on jaxlib's CPU client and matches jax; the Triton fusions made from the lowered module are those XLA:GPU
itself makes (the module it dumps right after `triton-softmax-rewriter` in a deviceless compile for h100-sxm,
where jax's CUDA plugin is installed); the fused module is priced by the xla-gpu model."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xla_costmodel.devices import get_device  # noqa: E402
from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._cse import eliminate_common_subexpressions  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._simulate import _unfused_exec_s, working_copy  # noqa: E402
from xla_costmodel.fusion._softmax_rewriter import match_diamond, rewrite_normalizations  # noqa: E402
from xla_costmodel.fusion._triton_fusion import is_generic_triton  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from _xla_gpu_dumps import first_dump, xla_gpu_pass_dumps, lowered_program, shape_specs  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from xla_costmodel.hlo.editing import unfuse_for_execution  # noqa: E402


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def layer_norm(x):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5)


def attention(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, -1), v)


def cross_entropy_grad(logits, labels):
    return jax.grad(lambda z, y: -(jax.nn.log_softmax(z) * y).sum(-1).mean())(logits, labels)


def long_row_softmax(x):  # rows over 16384: XLA splits the reductions and makes no Triton fusion
    return jax.nn.softmax(x, axis=-1)


def column_softmax(x):  # a reduction over the first dimension: no diamond
    return jax.nn.softmax(x, axis=0)


def causal_attention(q, k, v):  # the corpus's jax_nn_attention_fwd: the max diamond's tilings tie at 79 ns
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)


def causal_attention_grad(q, k, v):  # the corpus's jax_nn_attention_grad: jax lowers a reduce over {0, 4} of
    return jax.grad(lambda q, k, v: (causal_attention(q, k, v) ** 2).sum(), argnums=(0, 1, 2))(q, k, v)  # f32[1,..]


def rms_norm(x):
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6)


PROGRAMS = {
    "softmax": (softmax, [((128, 1024), "float32")]),
    "layer_norm": (layer_norm, [((256, 768), "bfloat16")]),
    "attention": (attention, [((4, 128, 64), "float32")] * 3),
    "cross_entropy_grad": (cross_entropy_grad, [((64, 1000), "float32"), ((64, 1000), "float32")]),
    "long_row_softmax": (long_row_softmax, [((8, 16385), "float32")]),
    "column_softmax": (column_softmax, [((512, 64), "float32")]),
    # rows of 8: the tile XLA picks (2 x 8) depends on the body holding no `max(x, -inf)`
    "narrow_softmax": (softmax, [((4096, 8), "float32")]),
    "row_of_16384_softmax": (softmax, [((2, 16384), "float32")]),
    "bf16_softmax": (softmax, [((16, 4096), "bfloat16")]),  # a bf16 `divide` root: Triton emits it
    "rms_norm": (rms_norm, [((8, 128, 4096), "bfloat16")]),
    "rank3_softmax": (softmax, [((3, 5, 7), "float32")]),
    # tilings of equal time to XLA (whole absl ticks): the first tried wins, 1 x 64 rather than 4 x 64
    "causal_attention": (causal_attention, [((2, 64, 4, 32), "float32")] * 3),
    "causal_attention_grad": (causal_attention_grad, [((2, 64, 4, 32), "float32")] * 3),
}
DEVICE = "h100-sxm"


def _specs(name):
    return shape_specs(PROGRAMS[name][1])


def _lowered(name):
    return lowered_program(*PROGRAMS[name], inline=False)


def _after_rewriter(name):
    """Our module right after the rewriter, with the passes before it as `simulate_fusion` runs them."""
    dev = get_device(DEVICE)
    work = working_copy(_lowered(name), True, "decide", [], [])
    eliminate_common_subexpressions(work)
    done = rewrite_normalizations(work, dev, lambda m: _unfused_exec_s(m, dev))
    return work, done


def _signature(module) -> list[tuple]:
    """Each generic Triton fusion of the module (not a GEMM): its root opcode, its reductions (input
    dimensions without unit ones, reducer opcode), the elements of its output tile and its warps."""
    out = []
    for _, instr in module.instructions():
        if instr.opcode != "fusion" or not is_generic_triton(instr):
            continue
        body = instr.fused_computation
        if any(i.opcode == "dot" for i in body.instructions):
            continue
        reduces = sorted((tuple(d for d in i.operands[0].shape.dims if d != 1), i.called_computations[0].root.opcode)
                         for i in body.instructions if i.opcode == "reduce")
        cfg = json.loads(instr.raw_attributes["backend_config"])["fusion_backend_config"]["block_level_fusion_config"]
        tile = math.prod(int(s) for s in cfg["output_tiles"][0]["sizes"])
        out.append((body.root.opcode, tuple(reduces), tile, int(cfg["num_warps"])))
    return sorted(out)


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "attention", "cross_entropy_grad"])
def test_rewritten_module_computes_the_same(name):
    fn, shapes = PROGRAMS[name]
    result = simulate_fusion(fn, *_specs(name), device=DEVICE, triton_softmax=True, price_totals=False)
    assert any(is_generic_triton(k) for k in kernels_of(result.module))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(jnp.dtype(d)) for s, d in shapes]
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    got = run_on_cpu(unfuse_for_execution(result.module).to_text(), args)
    for g, w in zip(got, want):
        tol = 3e-2 if w.dtype == jnp.bfloat16 else 2e-4
        np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), rtol=tol, atol=tol)


def test_softmax_is_two_diamonds_then_one_kernel_priced_by_the_tiled_model():
    """The user path: jax.nn.softmax is 3 kernels without the pass, one Triton kernel with it (as on XLA:GPU),
    and `analyze`'s xla-gpu model prices it."""
    from xla_costmodel import analyze

    x = jnp.ones((128, 1024))
    on = simulate_fusion(softmax, x, device=DEVICE, triton_softmax=True)
    off = simulate_fusion(softmax, x, device=DEVICE, triton_softmax=False)
    made = [r for r in on.pre_fusion_rewrites if r.kind == "triton-softmax"]
    assert [(r.instruction.split(".")[0], r.tiles, r.num_warps, bool(r.fusion)) for r in made] == [
        ("sub", ((1, 1024),), 2, True), ("div", ((1, 1024),), 2, True)]
    assert all(r.tiled_s < r.unfused_s for r in made)
    assert any("SoftmaxRewriterTriton" in n for n in on.notes)
    assert not any("SoftmaxRewriterTriton" in n for n in off.notes)
    assert len(list(kernels_of(off.module))) == 3
    kernels = list(kernels_of(on.module))
    assert len(kernels) == 1 and is_generic_triton(kernels[0])
    table = analyze(on.module, device=DEVICE, model="xla-gpu")
    kernel = table[table.bound != "free"]
    assert list(kernel.kind) == ["kCustom"] and bool(kernel.priced.all())
    assert table.total_time_s > 0 and not math.isnan(table.total_time_s)
    assert on.time_after_s == pytest.approx(table.total_time_s)
    # on a module that has been through it, the pass finds nothing left to do
    again = simulate_fusion(parse_hlo(on.module.to_text()), device=DEVICE, triton_softmax=True)
    assert not any(r.kind == "triton-softmax" for r in again.pre_fusion_rewrites)
    assert len(list(kernels_of(again.module))) == 1


def test_matching_rules():
    module, _ = _after_rewriter("column_softmax")
    assert not any(is_generic_triton(i) for _, i in module.instructions())
    work = working_copy(_lowered("softmax"), True, "decide", [], [])
    reasons = {i.opcode: match_diamond(i) for i in work.entry.instructions if i.opcode in ("exponential", "reduce")}
    assert reasons == {"exponential": "Root is not elementwise binary.", "reduce": "Root is not elementwise binary."}


def test_off_by_default_and_not_run_before_ampere():
    from xla_costmodel.devices import get_device as device

    x = jnp.ones((64, 256))
    assert not any(r.kind == "triton-softmax" for r in simulate_fusion(softmax, x, device=DEVICE).pre_fusion_rewrites)
    assert device("v100").compute_capability < (8, 0)
    r = simulate_fusion(softmax, x, device="v100", triton_softmax=True, price_totals=False)
    assert not any(k.kind == "triton-softmax" for k in r.pre_fusion_rewrites)
    r = simulate_fusion(softmax, x, device="a100-80gb", triton_softmax=True, price_totals=False)
    assert any(k.kind == "triton-softmax" and k.fusion for k in r.pre_fusion_rewrites)




def _xla_after_rewriter(name: str) -> str | None:
    """XLA:GPU's module right after `triton-softmax-rewriter` (None: the pass changed nothing, so XLA dumped
    nothing after it)."""
    dumps = xla_gpu_pass_dumps(__file__, name, "triton-softmax-rewriter|priority-fusion")
    assert first_dump(dumps, "*.before_priority-fusion.txt") is not None, "no dump before priority-fusion"
    return first_dump(dumps, "*.after_triton-softmax-rewriter.*.txt")


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_same_triton_fusions_as_xla_gpu_after_its_softmax_rewriter(name):
    """XLA:GPU's deviceless compile for h100-sxm: ours from the lowered module has the same Triton fusions
    (root, reductions, tile, warps) as XLA's module right after `triton-softmax-rewriter`."""
    if not gpu_compile_available():
        pytest.skip("jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")
    text = _xla_after_rewriter(name)
    xla = _signature(parse_hlo(text)) if text is not None else []
    ours, _ = _after_rewriter(name)
    assert _signature(ours) == xla, json.dumps({"ours": _signature(ours), "xla": xla})


def _generic_triton_kernels(module) -> int:
    return sum(is_generic_triton(k) and not any(i.opcode == "dot" for i in k.fused_computation.instructions)
               for k in kernels_of(module))


def test_reduction_over_a_unit_dimension_is_a_row_reduction_for_triton():
    """XLA's ReductionDegenerateDimRemover runs before the Triton passes: a reduce of f32[1,2,4,64,64] over
    {0, 4} is a row reduction there, over {3, 4} it is not."""
    from xla_costmodel.fusion._triton_fusion import triton_support

    def reduce_over(dims):
        text = f"""HloModule m
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }}
ENTRY e {{ p = f32[1,2,4,64,64] parameter(0)  z = f32[] constant(0)
  ROOT r = reduce(p, z), dimensions={{{dims}}}, to_apply=add }}"""
        return parse_hlo(text).entry.root

    assert triton_support(reduce_over("0,4")) is None
    assert triton_support(reduce_over("3,4")) is not None


def test_grad_softmax_triton_kernels_as_xla_gpu():
    """The causal attention's gradient: XLA:GPU's priority fusion grows the softmax diamond's Triton fusion
    into the forward and the backward normalization, one generic Triton kernel each (its optimized module in a
    deviceless compile); ours too, from the lowered module (the backward reads a reduce over a unit dimension)."""
    if not gpu_compile_available():
        pytest.skip("jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")
    dumps = xla_gpu_pass_dumps(__file__, "causal_attention_grad", "priority-fusion")
    text = first_dump(dumps, "*.sm_9.0a_gpu_after_optimizations.txt", contains="jit_causal_attention_grad")
    assert text is not None, sorted(dumps)[:5]
    fn, shapes = PROGRAMS["causal_attention_grad"]
    ours = simulate_fusion(fn, *_specs("causal_attention_grad"), device=DEVICE, triton_softmax=True,
                           price_totals=False)
    assert _generic_triton_kernels(ours.module) == _generic_triton_kernels(parse_hlo(text)) == 2
