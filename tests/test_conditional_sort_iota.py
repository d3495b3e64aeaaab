"""Two of XLA:GPU's passes before fusion that change kernels: `ConditionalSimplifier`'s removal of a
conditional (`fusion._conditional`, part of `simplify`) and `SortIotaFusion` (`fusion._sort_iota`,
always run before priority fusion). Rewritten modules run on jaxlib's CPU client against jax; where
jax's CUDA plugin is installed, what we do is held to XLA:GPU's own dumps (a deviceless compile)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._conditional import remove_conditionals  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._simplify import simplify  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from xla_costmodel.hlo.editing import unfuse_for_execution  # noqa: E402
from _xla_gpu_dumps import first_dump, xla_gpu_pass_dumps, lowered_program, shape_specs  # noqa: E402


def cheap_cond(p, x):  # two elementwise branches: a select
    return lax.cond(p[0] > 0, lambda v: v * 2.0 + 1.0, lambda v: jnp.sin(v), x)


def matvec_cond(p, a, v):  # a matrix-vector dot in a branch: strength-reduced first, then cheap
    return lax.cond(p[0] > 0, lambda a, v: a @ v, lambda a, v: v * 3.0, a, v)


def sorting_cond(p, x):  # a sort in a branch: expensive, kept
    return lax.cond(p[0] > 0, lambda v: jnp.sort(v), lambda v: v + 1.0, x)


def argsort(x):  # a sort with an iota operand (a broadcast iota as jax lowers it: simplified first)
    return jnp.argsort(x, axis=-1)


def top_indices(x):  # the iota is also read elsewhere: it stays for that reader
    i = lax.broadcasted_iota(jnp.int32, x.shape, 1)
    _, idx = lax.sort((x, i), dimension=1, num_keys=1)
    return idx, i * 2


PROGRAMS = {
    "cheap_cond": (cheap_cond, [((1,), "float32"), ((64, 32), "float32")]),
    "matvec_cond": (matvec_cond, [((1,), "float32"), ((96, 96), "float32"), ((96,), "float32")]),
    "sorting_cond": (sorting_cond, [((1,), "float32"), ((128,), "float32")]),
    "argsort": (argsort, [((16, 256), "float32")]),
    "top_indices": (top_indices, [((8, 128), "float32")]),
}
CONDS = ["cheap_cond", "matvec_cond", "sorting_cond"]


def _specs(name):
    return shape_specs(PROGRAMS[name][1])


def _lowered(name):
    return lowered_program(*PROGRAMS[name])


def _args(name, sign):
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype(d) for s, d in PROGRAMS[name][1]]
    if name in CONDS:
        args[0] = np.array([sign], np.float32)
    return args


def _opcodes(module):
    return [i.opcode for c in module.computations for i in c.instructions]


@pytest.mark.parametrize("name", CONDS)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_simplified_conditionals_compute_the_same(name, sign):
    fn, _ = PROGRAMS[name]
    module = _lowered(name)
    result = simplify(module)
    removed = name != "sorting_cond"
    assert ("conditional removed" in result.rewritten) == removed
    assert ("conditional" in _opcodes(module)) == (not removed)
    args = _args(name, sign)
    got = run_on_cpu(module.to_text(), args)
    np.testing.assert_allclose(got[0], np.asarray(jax.jit(fn)(*args)), rtol=1e-5, atol=1e-5)


def test_a_branch_with_a_dot_is_expensive_until_strength_reduced():
    module = _lowered("matvec_cond")
    assert remove_conditionals(module) == 0  # the dot: expensive
    assert "conditional removed" in simplify(module).rewritten


@pytest.mark.parametrize("name", ["argsort", "top_indices"])
def test_sort_iota_fusion_computes_the_same_in_one_kernel(name):
    fn, _ = PROGRAMS[name]
    result = simulate_fusion(_lowered(name), device="h100-sxm", price_totals=False, copy_insertion=False,
                             simplify=True)
    sorts = [k for k in kernels_of(result.module)
             if k.opcode == "fusion" and any(i.opcode == "sort" for i in k.fused_computation.instructions)]
    assert len(sorts) == 1 and sorts[0].fusion_kind == "kCustom"
    assert "iota" in [i.opcode for i in sorts[0].fused_computation.instructions]
    assert [r for r in result.pre_fusion_rewrites if type(r).__name__ == "SortIotaFusion"]
    args = _args(name, 1.0)
    got = run_on_cpu(unfuse_for_execution(result.module).to_text(), args)  # the CPU runs no kCustom fusion
    for g, w in zip(got, jax.tree_util.tree_leaves(jax.jit(fn)(*args))):
        np.testing.assert_array_equal(g, np.asarray(w))


needs_xla = pytest.mark.skipif(not gpu_compile_available(), reason="jax's CUDA plugin is not installed")


@needs_xla
@pytest.mark.parametrize("name", CONDS)
def test_conditionals_removed_where_xla_simplification_removes_them(name):
    """XLA:GPU's module after its `simplification` pipeline holds a conditional exactly where
    ours, simplified from the lowered module, still does."""
    dumps = xla_gpu_pass_dumps(__file__, name, "simplification")
    text = first_dump(dumps, "*.after_simplification.*.txt")
    assert text is not None, sorted(dumps)[:5]
    ours = _lowered(name)
    simplify(ours)
    assert ("conditional" in _opcodes(parse_hlo(text))) == ("conditional" in _opcodes(ours))


@needs_xla
@pytest.mark.parametrize("name", ["argsort", "top_indices"])
def test_sorts_fused_with_their_iotas_as_xla_gpu_does(name):
    """XLA:GPU's module right after `sort-iota-fusion`: as many kCustom sort fusions, each holding an iota,
    and as many iotas left outside them as ours."""
    dumps = xla_gpu_pass_dumps(__file__, name, "sort-iota-fusion")
    text = first_dump(dumps, "*.after_sort-iota-fusion.*.txt")
    assert text is not None, sorted(dumps)[:5]
    xla = parse_hlo(text)
    ours = simulate_fusion(_lowered(name), device="h100-sxm", price_totals=False, multi_output=False,
                           copy_insertion=False, simplify=True).module

    def sort_fusions(module):
        return sorted(len(k.operands) for _, k in module.instructions() if k.opcode == "fusion"
                      and k.fusion_kind == "kCustom" and "sort" in _opcodes_of(k))

    assert sort_fusions(ours) == sort_fusions(xla) != []


def _opcodes_of(fusion):
    return [i.opcode for i in fusion.fused_computation.instructions]
