"""`fusion._simplify`: XLA's AlgebraicSimplifier rules that change kernels, on modules as jax lowers
them. Rewritten modules are run on jaxlib's CPU client against jax; where jax's CUDA plugin is
installed, what we remove is checked against XLA:GPU's own simplification pipeline (deviceless)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._simplify import simplify  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from _xla_gpu_dumps import lowered_program, shape_specs  # noqa: E402


@jax.jit
def _inner(x):
    return x * 2.0, x + 1.0


def tuple_read_back(x):  # an inlined jit call: its tuple's elements read straight back
    a, b = _inner(x)
    return a - b


def unit_dims(x):  # a broadcast to [n, 1, m] (as jax lowers keepdims results); a reduce over a size-1 dim
    y = jax.lax.broadcast_in_dim(x, (x.shape[0], 1, x.shape[1]), (0, 2))
    return jnp.sum(y, axis=1) * 3.0


def softmax_initial(x):  # jnp.max(..., initial=-inf) leaves max(x, -inf)
    m = jnp.max(x, axis=-1, keepdims=True, initial=-jnp.inf)
    e = jnp.exp(x - m)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def identities(x):  # x + 0, x * 1, x / 1, x - 0, a transpose of a transpose: jax keeps only x / 1
    lax = jax.lax
    y = lax.mul(lax.add(x, lax.full_like(x, 0.0)), lax.full_like(x, 1.0))
    z = lax.sub(lax.div(y, lax.full_like(x, 1.0)), lax.full_like(x, 0.0))
    return lax.transpose(lax.transpose(jnp.sin(z), (1, 0)), (1, 0))


def nothing_to_do(x, y):
    return jnp.tanh(x) @ y


PROGRAMS = {
    "tuple_read_back": (tuple_read_back, [((32, 16), "float32")]),
    "unit_dims": (unit_dims, [((64, 128), "float32")]),
    "softmax_initial": (softmax_initial, [((8, 256), "float32")]),
    "identities": (identities, [((16, 24), "float32")]),
    "nothing_to_do": (nothing_to_do, [((8, 16), "float32"), ((16, 4), "float32")]),
}


def _specs(name):
    return shape_specs(PROGRAMS[name][1])


def _lowered(name):
    return lowered_program(*PROGRAMS[name])


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_simplified_module_computes_the_same(name):
    fn, shapes = PROGRAMS[name]
    module = _lowered(name)
    result = simplify(module)
    assert result.changed == (name != "nothing_to_do")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(d) for s, d in shapes]
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    got = run_on_cpu(module.to_text(), args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-5)


def test_rules_applied_and_idempotent():
    rules = {name: set(simplify(_lowered(name)).rewritten) for name in PROGRAMS}
    assert "gte-of-tuple" in rules["tuple_read_back"]
    assert "reduce -> reshape" in rules["unit_dims"]
    assert {"maximum(x, -inf)", "no-op broadcast"} <= rules["softmax_initial"]
    assert "divide of 1" in rules["identities"]  # jax drops the others itself (see IDENTITIES_HLO)
    assert rules["nothing_to_do"] == set()
    module = _lowered("unit_dims")
    simplify(module)
    text = module.to_text()
    assert not simplify(module).changed
    assert module.to_text() == text
    ops = [i.opcode for _, i in module.instructions()]
    assert "reduce" not in ops and "broadcast" in ops  # the constant's broadcast stays


# jax drops `x + 0` and `x * 1` itself: written as HLO
IDENTITIES_HLO = """
HloModule identities

ENTRY main {
  x = f32[4,6] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[4,6] broadcast(zero), dimensions={}
  one = f32[] constant(1)
  ones = f32[4,6] broadcast(one), dimensions={}
  a = f32[4,6] add(zeros, x)
  m = f32[4,6] multiply(a, ones)
  s = f32[4,6] subtract(m, zeros)
  ninf = f32[] constant(-inf)
  mx = f32[4,6] maximum(s, s)
  c = f32[4,6] convert(mx)
  sl = f32[4,6] slice(c), slice={[0:4], [0:6]}
  p = f32[4,6] pad(sl, zero), padding=0_0x0_0
  cat = f32[4,6] concatenate(p), dimensions={0}
  t = f32[6,4] transpose(cat), dimensions={1,0}
  ROOT u = f32[4,6] transpose(t), dimensions={1,0}
}
"""


def test_identities_written_as_hlo():
    module = parse_hlo(IDENTITIES_HLO)
    result = simplify(module)
    assert {"add of 0", "multiply of 1", "subtract of 0", "maximum(x, x)", "no-op convert", "no-op slice",
            "no-op pad", "no-op concatenate", "transpose(transpose)", "no-op transpose"} <= set(result.rewritten)
    assert module.entry.root.name == "x"
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(run_on_cpu(module.to_text(), [x])[0], x)
    # a real bound, a real padding and a true multiply are kept
    kept = parse_hlo(IDENTITIES_HLO.replace("multiply(a, ones)", "multiply(a, zeros)")
                     .replace("padding=0_0x0_0", "padding=0_0x1_0").replace("f32[4,6] pad(", "f32[4,7] pad(")
                     .replace("concatenate(p), dimensions={0}", "slice(p), slice={[0:4], [1:7]}"))
    assert not {"multiply of 1", "no-op pad"} & set(simplify(kept).rewritten)
    assert {"multiply", "pad"} <= {i.opcode for _, i in kept.instructions()}


def test_forward_rules_only_rewrite_nothing_in_place():
    module = _lowered("unit_dims")
    result = simplify(module, rules="forward")
    assert not any("->" in rule for rule in result.rewritten)
    assert "reduce" in [i.opcode for _, i in module.instructions()]


def test_simulate_fusion_simplifies_by_default():
    """The user path: a reduce over a size-1 dimension at the root is a reduction kernel unless
    simplified (XLA has a bitcast there; copy insertion left out: it copies the parameter output)."""

    def f(x):
        return jnp.sum(x[:, None, :], axis=1)

    x = jnp.ones((64, 128))
    opts = dict(device="h100-sxm", price_totals=False, copy_insertion=False)
    on = simulate_fusion(f, x, **opts)  # on by default, as XLA always simplifies
    off = simulate_fusion(f, x, simplify=False, **opts)
    assert [k.opcode for k in kernels_of(off.module)] == ["fusion"]
    assert list(kernels_of(on.module)) == []


@pytest.mark.skipif(not gpu_compile_available(), reason="jax's CUDA plugin is not installed")
@pytest.mark.parametrize("name", ["tuple_read_back", "unit_dims", "softmax_initial", "identities"])
def test_we_remove_only_what_xla_simplification_removes(name, tmp_path, monkeypatch):
    """On XLA:GPU's module right before its `simplification` pipeline, every instruction we remove
    is gone after it too (XLA does more: constant folding, reordering)."""
    import xla_costmodel.gpu_compile._compile as gpu_compile
    from xla_costmodel.gpu_compile import compile_for_gpu

    monkeypatch.setattr(gpu_compile, "DUMP_PASS_RE", "simplification")
    fn, shapes = PROGRAMS[name]
    compile_for_gpu(fn, *_specs(name), device="h100-sxm", dump_passes=tmp_path)
    before = next(tmp_path.glob("*.before_simplification.txt"))
    after = next(tmp_path.glob("*.after_simplification.*.txt"))
    ours = parse_hlo(before.read_text())
    result = simplify(ours)
    names = lambda m: {(c.name, i.name) for c in m.computations for i in c.instructions}  # noqa: E731
    xla, kept = names(parse_hlo(after.read_text())), names(ours)
    comps = {c.name for c in ours.computations}  # a reducer we drop whole XLA drops later (DCE)
    removed = {n for n in names(parse_hlo(before.read_text())) - kept if n[0] in comps}
    assert removed and result.changed
    assert not removed & xla


DIVIDE_HLO = """
HloModule divide

add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT r = f32[] add(p, q)
}

ENTRY main {
  x = f32[4,6] parameter(0)
  y = f32[4,6] parameter(1)
  four = f32[] constant(4)
  fours = f32[4,6] broadcast(four), dimensions={}
  a = f32[4,6] divide(x, fours)
  s = f32[] constant(3)
  b = f32[] reduce(a, s), dimensions={0,1}, to_apply=add
  c = f32[] divide(b, s)
  d = f32[4,6] divide(a, y)
  ROOT t = (f32[4,6], f32[]) tuple(d, c)
}
"""


def test_divide_by_a_constant_becomes_a_multiply():
    """`HandleDivide`'s `A / c -> A * (1 / c)`: both divides by a constant (scalar, broadcast) become
    multiplies by the inverse; a divide by a parameter stays; the module computes the same."""
    text = DIVIDE_HLO
    module = parse_hlo(text)
    result = simplify(module)
    assert result.rewritten.get("A / constant -> A * (1 / constant)") == 2
    ops = [i.opcode for i in module.entry.instructions]
    assert ops.count("divide") == 1 and ops.count("multiply") == 2
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 6)).astype(np.float32), rng.uniform(1, 2, (4, 6)).astype(np.float32)
    got, want = run_on_cpu(module.to_text(), [x, y]), run_on_cpu(parse_hlo(text).to_text(), [x, y])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
