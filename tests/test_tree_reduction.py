"""XLA:GPU's ReductionSplitter and TreeReductionRewriter as `simulate_fusion` runs them: checked by running
the rewritten module on jaxlib's CPU client against numpy and (where jax's CUDA plugin is installed)
against the module XLA:GPU itself dumps right after `tree-reduction-rewriter` in a deviceless compile."""

from __future__ import annotations

import json

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._tree_reduction import split_reductions  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from _xla_gpu_dumps import first_dump, xla_gpu_pass_dumps  # noqa: E402
from xla_costmodel.hlo import from_jax, parse_hlo  # noqa: E402


# Programs XLA:GPU rewrites (and two it leaves alone), each with its argument shapes.
def long_row_sum(x):  # 100003 > 16384: padded by 2 to 295 x 339
    return x.sum()


def large_column_sum(x):  # 5000 rows > 4096: split 50 x 100
    return x.sum(axis=0)


def batched_row_max(x):  # batch 20 > 8: minor reduced dimension first, then the batch (then tree)
    return x.max(axis=(0, 2))


def row_sum_of_rows(x):  # rows of 70000 > 16384, kept dimension 6
    return jnp.sum(x * x, axis=1)


def non_contiguous_sum(x):  # reduced {0, 2} of [300, 7, 5] with unit dims: ReductionSplitter
    return x.sum(axis=(0, 2, 3))


def variadic_argmax(x):  # a variadic (value, index) reduce over 50000
    return jnp.argmax(x)


def race_free(x, y):  # left as written
    return x.sum(axis=1), y.sum(axis=0)


PROGRAMS = {
    "long_row_sum": (long_row_sum, [((100003,), "float32")]),
    "large_column_sum": (large_column_sum, [((5000, 64), "float32")]),
    "batched_row_max": (batched_row_max, [((20, 30, 40000), "float32")]),
    "row_sum_of_rows": (row_sum_of_rows, [((6, 70000), "float32")]),
    "non_contiguous_sum": (non_contiguous_sum, [((300, 7, 5, 1), "float32")]),
    "variadic_argmax": (variadic_argmax, [((50000,), "float32")]),
    "race_free": (race_free, [((64, 16384), "float32"), ((4096, 3), "float32")]),
}


def _specs(name):
    return [jax.ShapeDtypeStruct(s, d) for s, d in PROGRAMS[name][1]]


def _rewritten(name):
    fn, _ = PROGRAMS[name]
    module = from_jax(fn, *_specs(name), optimized=False)
    return module, split_reductions(module)


def _structure(module) -> list[tuple]:
    """The reduces of the entry (operand dims, reduced dimensions, result dims) and the pads feeding
    them through reshapes/bitcasts (operand dims, padded dims), as a sorted list."""
    out = []
    for _, instr in module.instructions():
        if instr.opcode == "reduce":
            n = len(instr.operands) // 2
            dims = tuple(sorted(int(d) for d in instr.attribute("dimensions", ())))
            result = [s.dims for s in instr.shape.tuple_shapes] if instr.shape.is_tuple else [instr.shape.dims]
            out.append(("reduce", tuple(instr.operands[0].shape.dims), dims, tuple(map(tuple, result)), n))
        elif instr.opcode == "pad" and any(u.opcode in ("reshape", "bitcast") for u in instr.users):
            out.append(("pad", tuple(instr.operands[0].shape.dims), tuple(instr.shape.dims)))
    return sorted(out)


@pytest.mark.parametrize("name", [n for n in PROGRAMS if n != "race_free"])
def test_rewritten_module_computes_the_same(name):
    fn, shapes = PROGRAMS[name]
    module, done = _rewritten(name)
    assert done, "expected a split"
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(d) for s, d in shapes]
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    got = run_on_cpu(module.to_text(), args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=2e-4, atol=2e-3)


def test_split_parameters_follow_xla():
    _, done = _rewritten("long_row_sum")
    assert [(d.kind, d.length, d.k1, d.k2, d.padding) for d in done] == [("tree", 100003, 295, 339, 2)]
    _, done = _rewritten("batched_row_max")
    assert [(d.kind, d.length) for d in done] == [("batch", 20), ("tree", 40000)]
    assert (done[1].k1, done[1].k2) == (200, 200)


def test_race_free_reductions_are_left_alone_and_rewrite_is_idempotent():
    module, done = _rewritten("race_free")
    assert done == []
    module, done = _rewritten("batched_row_max")
    text = module.to_text()
    assert split_reductions(module) == []
    assert module.to_text() == text


def test_simulate_fusion_makes_a_kernel_of_each_half():
    """The user path: a sum over 100003 is two kernels on XLA:GPU (ours: one before this pass)."""
    x = jnp.ones(100003)
    on = simulate_fusion(long_row_sum, x, device="h100-sxm", price_totals=False)
    off = simulate_fusion(long_row_sum, x, device="h100-sxm", price_totals=False, tree_reductions=False)
    assert [r.kind for r in on.pre_fusion_rewrites] == ["tree"]
    assert off.pre_fusion_rewrites == ()
    assert any("TreeReductionRewriter" in n and "over 100003" in n for n in on.notes)
    assert not any("TreeReductionRewriter" in n for n in off.notes)
    alone = simulate_fusion(long_row_sum, x, device="h100-sxm", price_totals=False, rewrite_reduce_windows=False)
    assert [r.kind for r in alone.pre_fusion_rewrites] == ["tree"]
    assert len(list(kernels_of(on.module))) == 2
    assert len(list(kernels_of(off.module))) == 1
    # XLA's own input to fusion has been through the pass: nothing to do on it
    fused = parse_hlo(on.module.to_text())
    assert split_reductions(fused) == []




def _xla_after_tree_reduction(name: str) -> str:
    dumps = xla_gpu_pass_dumps(__file__, name, "tree-reduction-rewriter")
    text = first_dump(dumps, "*.after_tree-reduction-rewriter.*.txt")
    assert text is not None, f"no dump after tree-reduction-rewriter in {sorted(dumps)[:5]}"
    return text


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_same_reduces_as_xla_gpu_after_its_tree_reduction_rewriter(name):
    """XLA:GPU's deviceless compile for h100-sxm, module dumped right after `tree-reduction-rewriter`:
    ours from the lowered module has the same reduces (shapes, reduced dimensions) and pads."""
    if not gpu_compile_available():
        pytest.skip("jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")
    xla = parse_hlo(_xla_after_tree_reduction(name))
    ours, _ = _rewritten(name)
    assert _structure(ours) == _structure(xla), json.dumps({"ours": _structure(ours), "xla": _structure(xla)})
