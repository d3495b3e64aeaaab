"""`fusion._simplify`'s rules from XLA's `HandleAdd` (sparse updates of zeros), `HandleCompare` and
`HandleSelect`, each held to XLA:GPU's own module after its `simplification` pipeline (a deviceless
compile for h100-sxm, where jax's CUDA plugin is installed), and run on jaxlib's CPU client against jax."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xla_costmodel.fusion import simulate_fusion  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._simplify import simplify  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from _xla_gpu_dumps import first_dump, lowered_program, xla_gpu_pass_dumps  # noqa: E402


def gather_grad(x, i, g):  # jax's gradient of a gather: a scatter-add into zeros, added to another term
    return jax.vjp(lambda x: x[i], x)[1](g)[0] + jnp.sin(x)


def slice_grad(x, j, g):  # jax's gradient of a dynamic slice: a dynamic-update-slice into zeros, added
    return jax.vjp(lambda x: jax.lax.dynamic_slice(x, (j[0], 0), (2, 8)), x)[1](g)[0] + jnp.sin(x)


def float_remainder(x):  # jnp.remainder by a positive constant: lt(constant, 0) is known false
    return jnp.remainder(x, 3.0)


def never_negative(x):  # exp(x) < 0 is false, so the select is its false operand
    return jnp.where(jnp.exp(x) < 0, jnp.cos(x), jnp.sin(x))


def causal_mask(x):  # jnp.tril(ones) as a float mask: ne(select(ge(...), 1, 0), 0) -> ge(...)
    mask = jnp.tril(jnp.ones(x.shape, x.dtype))
    return jnp.where(mask, x, -jnp.inf)


def unsigned(u):  # u < 0 and 0 > u on unsigned ints are false, u >= 0 true
    lax = jax.lax
    zeros = jnp.zeros_like(u)
    a = lax.select(lax.lt(u, zeros), u * 3, u + 1)
    b = lax.select(lax.ge(u, zeros), u + 2, u * 5)
    return a, b, lax.gt(zeros, u)


PROGRAMS = {
    "gather_grad": (gather_grad, [((16, 8), "float32"), ((5,), "int32"), ((5, 8), "float32")]),
    "slice_grad": (slice_grad, [((16, 8), "float32"), ((1,), "int32"), ((2, 8), "float32")]),
    "float_remainder": (float_remainder, [((32, 24), "float32")]),
    "never_negative": (never_negative, [((32, 24), "float32")]),
    "causal_mask": (causal_mask, [((16, 16), "float32")]),
    "unsigned": (unsigned, [((32,), "uint32")]),
}

# the rule each program is for (`SimplifyResult.rewritten`'s names)
RULES = {
    "gather_grad": {"add(A, scatter) -> scatter(add(A, operand))", "add of 0"},
    "slice_grad": {"add(A, dus(0, u)) -> dus(A, add(ds(A), u))"},
    "float_remainder": {"compare -> false", "pred != false"},
    "never_negative": {"compare -> false", "select(false, a, b)"},
    "causal_mask": {"ne(select(ge, 1, 0), 0) -> ge"},
    "unsigned": {"compare -> false", "compare -> true", "select(false, a, b)", "select(true, a, b)"},
}


def _args(name, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in PROGRAMS[name][1]:
        if dtype == "float32":
            out.append(rng.standard_normal(shape).astype(np.float32))
        elif name == "unsigned":
            out.append(rng.integers(0, 1000, shape).astype(dtype))
        else:  # indices: in bounds for the gather, 3 for the dynamic slice
            out.append(rng.integers(0, 16, shape).astype(dtype) if name == "gather_grad" else np.full(shape, 3, dtype))
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rule_applies_and_the_module_computes_the_same(name):
    fn, shapes = PROGRAMS[name]
    module = lowered_program(fn, shapes)
    result = simplify(module)
    assert RULES[name] <= set(result.rewritten), result.rewritten
    args = _args(name)
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    got = run_on_cpu(module.to_text(), args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-5)
    assert not simplify(module).changed  # a fixed point


def test_add_of_a_scatter_of_one_index_vector_is_left_to_the_scatter_expander():
    """XLA's `ScatterExpander` makes a scatter of one index vector elementwise code before its simplifier
    runs, so the add-of-scatter rule never sees one."""
    module = lowered_program(gather_grad, [((16, 8), "float32"), ((1,), "int32"), ((1, 8), "float32")])
    assert "add(A, scatter) -> scatter(add(A, operand))" not in simplify(module).rewritten


def test_a_scatter_with_two_uses_or_another_combiner_stays():
    text = """
HloModule m

add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT r = f32[] add(p, q)
}

mul {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT r = f32[] multiply(p, q)
}

ENTRY e {
  x = f32[16,8] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,8] parameter(2)
  zero = f32[] constant(0)
  zeros = f32[16,8] broadcast(zero), dimensions={}
  s = f32[16,8] scatter(zeros, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  a = f32[16,8] add(x, s)
  m = f32[16,8] scatter(zeros, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=mul
  b = f32[16,8] add(x, m)
  ROOT t = (f32[16,8], f32[16,8], f32[16,8]) tuple(a, s, b)
}
"""
    module = parse_hlo(text)
    assert "add(A, scatter) -> scatter(add(A, operand))" not in simplify(module).rewritten
    assert Counter(i.opcode for i in module.entry.instructions)["add"] == 2


def _signature(module) -> Counter:
    """What the rules change, by opcode: each scatter's and dynamic-update-slice's first operand, each
    compare's and select's operands, and how many adds read a scatter or a dynamic-update-slice."""
    sig: Counter = Counter()
    for comp in module.computations:
        if comp is not module.entry:
            continue
        for i in comp.instructions:
            ops = [o.opcode for o in i.operands]
            if i.opcode in ("scatter", "dynamic-update-slice"):
                sig[(i.opcode, "operand 0 is a broadcast", ops[0] == "broadcast")] += 1
            elif i.opcode == "compare":
                sig[("compare", i.operands[0].shape.element_type, str(i.attribute("direction")))] += 1
            elif i.opcode == "select":
                sig[("select", i.shape.element_type)] += 1
            elif i.opcode == "add" and {"scatter", "dynamic-update-slice"} & set(ops):
                sig[("add of", tuple(sorted(ops)))] += 1
    return sig


@pytest.mark.skipif(not gpu_compile_available(), reason="jax's CUDA plugin is not installed")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_as_xla_after_its_simplification_pipeline(name):
    """XLA's module after its first `simplification` pipeline (the simplifier, constant folding, CSE, DCE
    to a fixed point; deviceless, h100-sxm) against ours from the lowered module: the same scatters,
    dynamic-update-slices, compares and selects, and the same kernels after fusion."""
    dumps = xla_gpu_pass_dumps(__file__, name, "simplification|priority-fusion")
    after = first_dump(dumps, "*.after_simplification.*.txt")
    assert after is not None, sorted(dumps)
    xla = parse_hlo(after)
    ours = lowered_program(*PROGRAMS[name])
    simplify(ours)
    from xla_costmodel.fusion._cse import eliminate_common_subexpressions

    eliminate_common_subexpressions(ours)
    assert _signature(ours) == _signature(xla)
    fused = first_dump(dumps, "*.after_priority-fusion.*.txt")
    assert fused is not None
    opts = dict(device="h100-sxm", price_totals=False, copy_insertion=False, multi_output=False)
    mine = simulate_fusion(lowered_program(*PROGRAMS[name]), simplify=True, **opts)
    assert _entry_kernels(mine.module) == _entry_kernels(parse_hlo(fused))


def _entry_kernels(module) -> int:
    """The entry's instructions that launch work (XLA's dump after priority fusion, before its other passes)."""
    free = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}
    return sum(i.opcode not in free for i in module.entry.instructions)
