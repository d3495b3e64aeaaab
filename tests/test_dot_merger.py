"""XLA's `DotMerger` as `simulate_fusion(simplify=True)` runs it (`fusion._gemm_fusion.merge_dots`, right after
the simplifier, where XLA:GPU runs it): the dots left are those of XLA:GPU's own module right after `dot-merger`
in a deviceless compile for h100-sxm (where jax's CUDA plugin is installed), the merged module computes what
jax computes, and the fused module has the kernels one merged dot leaves."""

from __future__ import annotations

import json

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._simulate import working_copy  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from _xla_gpu_dumps import first_dump, lowered_program, shape_specs, xla_gpu_pass_dumps  # noqa: E402


def qkv(x, wq, wk, wv):  # three dots sharing their LHS: one dot over the concatenated weights
    return x @ wq, x @ wk, x @ wv


def qkv_heads(x, wq, wk, wv):  # [d, heads, head_dim] kernels (flax's multi-head attention): DotDecomposer's
    return tuple(jnp.einsum("bsd,dhk->bshk", x, w) for w in (wq, wk, wv))  # one non-contracting dimension


def shared_rhs(a, b, w):  # two dots sharing their RHS: the LHSs concatenated
    return a @ w, b @ w


def dependent(x, w):  # the second dot reads the first: never merged
    return x @ (x @ w)


def precisions(x, w1, w2):  # different operand precisions: not merged
    return jnp.dot(x, w1), jnp.dot(x, w2, precision="highest")


def large(x, w1, w2):  # each dot with its operands over 32 MiB (xla_gpu_dot_merger_threshold_mb in XLA's
    return x @ w1, x @ w2  # source), merged all the same by the XLA of jaxlib 0.10.2


def mixed_shapes(x, w1, w2, w3):  # two of three share x with an equal contracting size; the third contracts
    return x @ w1, x @ w2, x.T @ w3  # over x's other dimension (other dimension numbers): not merged with them


PROGRAMS = {
    "qkv": (qkv, [((512, 256), "float32")] + [((256, 256), "float32")] * 3),
    "qkv_heads": (qkv_heads, [((2, 32, 64), "float32")] + [((64, 4, 16), "float32")] * 3),
    "shared_rhs": (shared_rhs, [((128, 64), "float32"), ((32, 64), "float32"), ((64, 96), "float32")]),
    "dependent": (dependent, [((64, 64), "float32"), ((64, 64), "float32")]),
    "precisions": (precisions, [((128, 64), "float32")] + [((64, 64), "float32")] * 2),
    "large": (large, [((4096, 1024), "float32")] + [((1024, 1024), "float32")] * 2),
    "mixed_shapes": (mixed_shapes, [((128, 128), "float32")] + [((128, 64), "float32")] * 3),
}
DEVICE = "h100-sxm"


def _ours(name):
    """Our module after the simplifier and the dot merging, as `simulate_fusion(simplify=True)` runs them."""
    return working_copy(lowered_program(*PROGRAMS[name], inline=False), True, "off", simplify=True)


def _dots(module) -> list[int]:
    """The elements of each dot's output, sorted (XLA's merged dots have DotDecomposer's shapes, ours the
    lowered module's: the same elements)."""
    return sorted(int(np.prod(i.shape.dims)) for _, i in module.instructions() if i.opcode == "dot")


def _xla_after_dot_merger(name: str):
    """XLA:GPU's module right after `dot-merger`, or right before it when the pass changed nothing."""
    dumps = xla_gpu_pass_dumps(__file__, name, "dot-merger")
    text = first_dump(dumps, "*.after_dot-merger.*.txt", contains="jit_" + name)
    if text is None:
        text = first_dump(dumps, "*.before_dot-merger.txt", contains="jit_" + name)
    assert text is not None, f"no dump around dot-merger in {sorted(dumps)[:5]}"
    return parse_hlo(text)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_same_dots_as_xla_gpu_after_its_dot_merger(name):
    if not gpu_compile_available():
        pytest.skip("jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")
    xla, ours = _dots(_xla_after_dot_merger(name)), _dots(_ours(name))
    assert ours == xla, json.dumps({"ours": ours, "xla": xla})


def test_merges_expected():
    """Which programs merge, without XLA at hand (the same facts the test against XLA checks)."""
    merged = {name: len(_dots(_ours(name))) for name in PROGRAMS}
    assert merged == {"qkv": 1, "qkv_heads": 1, "shared_rhs": 1, "dependent": 2, "precisions": 2,
                      "large": 1, "mixed_shapes": 2}


@pytest.mark.parametrize("name", ["qkv_heads", "shared_rhs", "mixed_shapes"])
def test_merged_module_computes_the_same(name):
    fn, shapes = PROGRAMS[name]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(d) for s, d in shapes]
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    got = run_on_cpu(_ours(name).to_text(), args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-3)


def test_simulate_fusion_merges_with_the_simplifier_only():
    """`simplify` (the default) merges (one dot kernel, its slices fused into their users' kernels or kernels
    of their own); `simplify=False` leaves three dots; with `gemm_rewrites` too the dots merge once, into one
    GEMM fusion."""
    specs = shape_specs(PROGRAMS["qkv"][1])

    def dots(result):
        return sum(k.opcode == "dot" for k in kernels_of(result.module))

    plain = simulate_fusion(qkv, *specs, device=DEVICE, price_totals=False, simplify=False)
    merged = simulate_fusion(qkv, *specs, device=DEVICE, price_totals=False)
    assert (dots(plain), dots(merged)) == (3, 1)
    both = simulate_fusion(qkv, *specs, device=DEVICE, price_totals=False, simplify=True, gemm_rewrites=True)
    gemms = [r for r in both.pre_fusion_rewrites if getattr(r, "kind", "") == "triton-gemm"]
    assert len(gemms) == 1 and dots(both) == 0
