"""XLA:GPU's TopK passes before fusion (`fusion._topk`): a `top_k` XLA does not run as its `__gpu$TopK`
kernel becomes a sort of (values, iota) and two slices (three kernels), and a sort's broadcast iota operand
an iota. Rewritten modules run on jaxlib's CPU client against jax; where jax's CUDA plugin is installed,
what we do is held to XLA:GPU's module right before priority fusion (a deviceless compile)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._sort_iota import fuse_sort_iotas  # noqa: E402
from xla_costmodel.fusion._topk import decompose_topks, gpu_topk_kernel, sort_iotas_as_iotas  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from _xla_gpu_dumps import first_dump, xla_gpu_pass_dumps, lowered_program, shape_specs  # noqa: E402


def top8(x):
    return lax.top_k(x, 8)


def smallest4(x):  # largest=False is how jax writes the k smallest: top_k of the negation
    return lax.top_k(-x, 4)


def argsort_and_top(x):
    return jnp.argsort(x[:, :128], axis=-1), lax.top_k(x, 3)


PROGRAMS = {
    "top8_short_rows": (top8, [((32, 512), "float32")]),  # n < 1024: sort and slices
    "top8_long_rows": (top8, [((4, 4096), "float32")]),  # k <= 16, n >= 1024: __gpu$TopK
    "top8_int": (top8, [((16, 2048), "int32")]),  # not f32/bf16: sort and slices
    "smallest4": (smallest4, [((8, 256), "float32")]),
    "argsort_and_top": (argsort_and_top, [((16, 256), "float32")]),
}


def _specs(name):
    return shape_specs(PROGRAMS[name][1])


def _lowered(name):
    return lowered_program(*PROGRAMS[name])


def _ours_before_priority_fusion(name):
    module = _lowered(name)
    decompose_topks(module)
    sort_iotas_as_iotas(module)
    fuse_sort_iotas([module.entry])
    return module


def _summary(module) -> dict:
    """What the TopK passes leave in the entry computation: kCustom sort fusions, slices, TopK calls."""
    entry = module.entry
    return {
        "sort fusions": sum(1 for i in entry.instructions if i.opcode == "fusion" and i.fusion_kind == "kCustom"),
        "slices": sum(1 for i in entry.instructions if i.opcode == "slice"),
        "topk kernels": sum(1 for i in entry.instructions
                            if i.opcode == "topk" or (i.opcode == "custom-call"
                                                      and "TopK" in str(i.attribute("custom_call_target", "")))),
    }


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_decomposed_topk_computes_the_same(name):
    fn, shapes = PROGRAMS[name]
    module = _lowered(name)
    rows = decompose_topks(module)
    sort_iotas_as_iotas(module)
    kept = [i for c in module.computations for i in c.instructions if i.opcode == "topk"]
    assert (len(rows), len(kept)) == ((0, 1) if name == "top8_long_rows" else (1, 0))
    assert all(gpu_topk_kernel(k) for k in kept)
    rng = np.random.default_rng(3)
    args = [(rng.standard_normal(s) * 1000).astype(d) for s, d in shapes]
    if name == "top8_long_rows":
        return  # (the CPU client runs no topk of its own here; nothing was rewritten)
    got = run_on_cpu(module.to_text(), args)
    for g, w in zip(got, jax.tree_util.tree_leaves(jax.jit(fn)(*args))):
        np.testing.assert_array_equal(g, np.asarray(w))


def test_a_decomposed_topk_is_three_kernels_and_a_kept_one_is_one():
    def kernels(name):
        result = simulate_fusion(_lowered(name), device="h100-sxm", price_totals=False)
        return sorted(k.opcode for k in kernels_of(result.module))
    assert kernels("top8_short_rows") == ["fusion", "slice", "slice"]
    assert kernels("top8_long_rows") == ["topk"]


needs_xla = pytest.mark.skipif(not gpu_compile_available(), reason="jax's CUDA plugin is not installed")


@needs_xla
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_topk_as_xla_gpu_has_it_before_priority_fusion(name):
    dumps = xla_gpu_pass_dumps(__file__, name, "sort-iota-fusion")
    text = first_dump(dumps, "*.after_sort-iota-fusion.before_priority-fusion.txt")
    assert text is not None, sorted(dumps)[:5]
    assert _summary(_ours_before_priority_fusion(name)) == _summary(parse_hlo(text))
