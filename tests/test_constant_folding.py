"""`fusion._constant_folding`: XLA's `HloConstantFolding` before fusion. Which instructions fold is held to
XLA's rules on hand-written modules and, where jax's CUDA plugin is installed, to XLA:GPU's own folding
pass (our pass on XLA's module right before each `constant_folding`, against XLA's module right after it);
the folded values are held to jaxlib's CPU client running the unfolded module."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._constant_folding import fold_constants, literal_of, literal_text  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from _xla_gpu_dumps import shape_specs  # noqa: E402

needs_xla = pytest.mark.skipif(not gpu_compile_available(), reason="jax's CUDA plugin is not installed")


def _names(module, computation=None) -> set[str]:
    comp = module.entry if computation is None else module.computation(computation)
    return {i.name for i in comp.instructions}


RULES_HLO = """
HloModule rules

ENTRY main {
  p = f32[8] parameter(0)
  c = f32[8] constant({0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5})
  neg = f32[8] negate(c)
  chain = f32[8] exponential(neg)
  s = f32[] constant(2)
  bs = f32[8] broadcast(s), dimensions={}
  mixed = f32[8] multiply(c, bs)
  two_broadcasts = f32[8] add(bs, bs)
  io = f32[8] iota(), iota_dimension=0
  iota_plus_constant = f32[8] add(io, c)
  iota_times_broadcast = f32[8] multiply(io, bs)
  of_parameter = f32[8] multiply(p, c)
  z = f32[] constant(0)
  padded_broadcast = f32[10] pad(bs, z), padding=1_1
  big = f32[50000000] broadcast(s), dimensions={}
  k = s32[] constant(3)
  of_big = f32[4] dynamic-slice(big, k), dynamic_slice_sizes={4}
  r = f32[8] rng(z, s), distribution=rng_uniform
  ROOT t = (f32[8], f32[8], f32[8], f32[8], f32[8], f32[8], f32[10], f32[4], f32[8]) tuple(chain, mixed, two_broadcasts, iota_plus_constant, iota_times_broadcast, of_parameter, padded_broadcast, of_big, r)
}
"""


def test_what_xla_folds_and_what_it_leaves():
    """`HloConstantFolding::Run` at its default level: an op of a constant and constants, broadcasts of
    constants or iotas folds (a chain in one pass); an op of broadcasts alone, of a parameter, a pad of a
    broadcast, one reading more than 45M elements, an rng, a broadcast or an iota does not."""
    module = parse_hlo(RULES_HLO)
    result = fold_constants(module, simplify_folded=False)
    kept = _names(module)
    assert not kept & {"neg", "chain", "mixed", "iota_plus_constant"}
    assert {"two_broadcasts", "iota_times_broadcast", "of_parameter", "padded_broadcast", "of_big", "big", "r",
            "bs", "io"} <= kept
    assert result.folded == {"negate": 1, "exponential": 1, "multiply": 1, "add": 1} and not result.not_evaluated
    chain = module.entry.root.operands[0]
    assert chain.opcode == "constant"
    np.testing.assert_allclose(literal_of(chain), np.exp(-np.arange(0.5, 8, 1.0)), rtol=1e-6)


LOOP_HLO = """
HloModule loop

fused {
  c = f32[4] constant({1, 2, 3, 4})
  n = f32[4] negate(c)
  q = f32[4] parameter(0)
  ROOT m = f32[4] multiply(q, n)
}

cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  five = s32[] constant(5)
  ROOT lt = pred[] compare(i, five), direction=LT
}

body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[4] get-tuple-element(s), index=1
  c = f32[4] constant({1, 2, 3, 4})
  cn = f32[4] cosine(c)
  y2 = f32[4] multiply(y, cn)
  ROOT t = (s32[], f32[4]) tuple(j, y2)
}

ENTRY main {
  p = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, p)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  out = f32[4] get-tuple-element(w), index=1
  ROOT f = f32[4] fusion(out), kind=kLoop, calls=fused
}
"""


def test_while_bodies_fold_fusion_bodies_do_not():
    """`MakeNonFusionNonCompositeComputations`: a while body is folded, a fusion body is not."""
    module = parse_hlo(LOOP_HLO)
    result = fold_constants(module)
    assert "cn" not in _names(module, "body")
    assert "n" in _names(module, "fused")
    assert result.folded == {"cosine": 1}


VALUES_HLO = """
HloModule values

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

max {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] maximum(a, b)
}

ENTRY main {
  p = f32[] parameter(0)
  c = f32[2,3] constant({ {0.25, -1.5, 2.75}, {3.5, -0.5, 6.25} })
  i = s32[2,3] constant({ {7, -7, 9}, {-9, 2147483647, 5} })
  d = s32[2,3] constant({ {2, 2, -4}, {4, 3, -2} })
  zero = f32[] constant(0)
  sn = f32[2,3] sine(c)
  lg = f32[2,3] log(c)
  ex = f32[2,3] exponential(c)
  th = f32[2,3] tanh(c)
  ra = f32[2,3] round-nearest-afz(c)
  re = f32[2,3] round-nearest-even(c)
  pw = f32[2,3] power(c, c)
  at = f32[2,3] atan2(c, ex)
  cv = s32[2,3] convert(c)
  dv = s32[2,3] divide(i, d)
  rm = s32[2,3] remainder(i, d)
  sh = s32[2,3] shift-right-arithmetic(i, d)
  sl = s32[2,3] shift-left(i, d)
  bc = s32[2,3] bitcast-convert(c)
  lt = pred[2,3] compare(c, ex), direction=LT
  sel = f32[2,3] select(lt, c, sn)
  one = f32[] constant(1)
  cl = f32[2,3] clamp(zero, c, one)
  rs = f32[2] reduce(c, zero), dimensions={1}, to_apply=add
  im = s32[] constant(-100)
  rmax = s32[3] reduce(i, im), dimensions={0}, to_apply=max
  dt = f32[2,2] dot(c, ex), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  tr = f32[3,2] transpose(c), dimensions={1,0}
  rv = f32[2,3] reverse(c), dimensions={0,1}
  sc = f32[2,2] slice(c), slice={[0:2], [0:3:2]}
  cc = f32[2,6] concatenate(c, ex), dimensions={1}
  pd = f32[6,4] pad(c, one), padding=1_2_1x-1_2
  k = s32[] constant(5)
  ds = f32[2,2] dynamic-slice(c, k, k), dynamic_slice_sizes={2,2}
  up = f32[1,2] constant({ {10, 20} })
  dus = f32[2,3] dynamic-update-slice(c, up, k, k)
  cb = bf16[2,3] convert(c)
  bb = bf16[2,3] add(cb, cb)
  sum = f32[] reduce(pd, zero), dimensions={0,1}, to_apply=add
  ROOT t = (f32[2,3], f32[2,3], f32[2,3], f32[2,3], f32[2,3], f32[2,3], f32[2,3], f32[2,3], s32[2,3], s32[2,3], s32[2,3], s32[2,3], s32[2,3], s32[2,3], pred[2,3], f32[2,3], f32[2,3], f32[2], s32[3], f32[2,2], f32[3,2], f32[2,3], f32[2,2], f32[2,6], f32[6,4], f32[2,2], f32[2,3], bf16[2,3], f32[], f32[]) tuple(sn, lg, ex, th, ra, re, pw, at, cv, dv, rm, sh, sl, bc, lt, sel, cl, rs, rmax, dt, tr, rv, sc, cc, pd, ds, dus, bb, sum, p)
}
"""


def test_folded_values_are_what_xla_computes():
    """Every instruction of `VALUES_HLO` folds, and the folded module returns what jaxlib's CPU client
    returns for the unfolded one (to the rounding of transcendental functions)."""
    module = parse_hlo(VALUES_HLO)
    result = fold_constants(module)
    assert not result.not_evaluated
    assert {i.opcode for i in module.entry.instructions} <= {"constant", "parameter", "tuple", "broadcast", "iota",
                                                             "multiply"}
    arg = [np.float32(0.5)]
    got, want = run_on_cpu(module.to_text(), arg), run_on_cpu(VALUES_HLO, arg)
    assert len(got) == len(want) == 30
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if np.issubdtype(w.dtype, np.floating) or w.dtype.name == "bfloat16":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=2e-6, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


UNEVALUATED_HLO = """
HloModule unevaluated

less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}

ENTRY main {
  c = f32[4] constant({3, nan, 1, 2})
  s = f32[4] sort(c), dimensions={0}, to_apply=less
  cv = s32[4] convert(c)
  i = s32[4] constant({4, 5, 6, 7})
  z = s32[4] constant({1, 0, 1, 1})
  dv = s32[4] divide(i, z)
  one = f32[1] constant({1})
  zero = f32[] constant(0)
  huge = f32[2000001] pad(one, zero), padding=0_2000000
  ROOT t = (f32[4], s32[4], s32[4], f32[2000001]) tuple(s, cv, dv, huge)
}
"""


def test_what_we_cannot_evaluate_is_left_alone():
    """A sort (no evaluator here), a NaN converted to an integer and an integer division by zero (XLA
    defines both by rules of its own), a result of more than 2^20 elements (XLA folds up to 45M) are left as
    they are and counted, never guessed."""
    module = parse_hlo(UNEVALUATED_HLO)
    result = fold_constants(module)
    assert not result.folded
    assert result.not_evaluated == {"sort": 1, "convert": 1, "divide": 1, "pad": 1}
    assert {"s", "cv", "dv", "huge"} <= _names(module)


SPLAT_HLO = """
HloModule splat

ENTRY main {
  a = f32[4] constant({1, 2, 3, 4})
  b = f32[4] constant({4, 3, 2, 1})
  splat = f32[4] add(a, b)
  f = f32[4] constant({0, 1, 2, 3})
  ints = s32[4] convert(f)
  g = f32[4] constant({0, 3, 6, 9})
  strided = s32[4] convert(g)
  ROOT t = (f32[4], s32[4], s32[4]) tuple(splat, ints, strided)
}
"""


@pytest.mark.parametrize("simplify_folded", [True, False])
def test_folded_constants_become_broadcasts_and_iotas(simplify_folded):
    """The simplifier's `HandleConstant` on what folding made: one repeated value -> a broadcast of a
    scalar, 0, 1, 2, ... -> an iota, 0, 3, 6, ... -> an iota times a broadcast of 3; the module computes
    the same. With `simplify_folded=False`, the constants XLA's folding pass itself makes."""
    module = parse_hlo(SPLAT_HLO)
    result = fold_constants(module, simplify_folded=simplify_folded)
    assert result.folded == {"add": 1, "convert": 2}
    ops = [o.opcode for o in module.entry.root.operands]
    if simplify_folded:
        assert ops == ["broadcast", "iota", "multiply"]
        assert sum(result.rewritten.values()) == 3
    else:
        assert ops == ["constant"] * 3 and not result.rewritten
    for g, w in zip(run_on_cpu(module.to_text(), []), run_on_cpu(SPLAT_HLO, [])):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("et,values", [
    ("f32", [0.1, -2.5, 1e-30, 3.4e38, float("inf"), float("-inf"), 0.0]),
    ("bf16", [0.1, -2.5, 1e-30, 3.0e38]),
    ("f16", [0.1, -2.5, 65504.0]),
    ("s32", [0, -1, 2147483647, -2147483648]),
    ("u8", [0, 255, 7]),
    ("pred", [True, False, True]),
])
def test_literals_read_back(et, values):
    """A folded value printed as a literal parses back (our parser) to the same value."""
    from xla_costmodel.fusion._constant_folding import _dtype

    value = np.asarray(values).astype(_dtype(et)).reshape(1, -1)
    text = f"HloModule l\nENTRY main {{\n  ROOT c = {et}[1,{len(values)}] constant({literal_text(value)})\n}}\n"
    back = literal_of(parse_hlo(text).entry.root)
    np.testing.assert_array_equal(back, value)


# -- jax programs --------------------------------------------------------------------------------------------

TABLE = np.array([0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5], np.float32)


def table_sum(x):  # a reduce of a constant table (jax's lowering folds the square, not the sum)
    return x + jnp.sum(jnp.asarray(TABLE) ** 2)


def next_after(x):  # nextafter of constants: bitcast-converts, ands, compares and selects (diffrax has these)
    return x * jnp.nextafter(jnp.float32(1.0), jnp.float32(2.0)) + jnp.nextafter(jnp.asarray(TABLE), 0.0)


def in_loop(x):  # the same in a while body
    def body(i, y):
        return y * jnp.nextafter(jnp.float32(1.0), jnp.float32(2.0)) + jnp.sum(jnp.asarray(TABLE))
    return lax.fori_loop(0, 5, body, x)


def iota_plus(x):  # an iota times a broadcast constant: no operand is a constant, nothing folds
    return x + jnp.arange(8, dtype=jnp.float32) * 2.0


PROGRAMS = {name: (fn, [((8,), "float32")]) for name, fn in
            [("table_sum", table_sum), ("next_after", next_after), ("in_loop", in_loop), ("iota_plus", iota_plus)]}


def test_folding_removes_the_kernels_of_constant_expressions():
    """By default, and with `simplify=True`, `simulate_fusion` folds constants: the sum of a constant table is
    no reduction kernel of its own (its reducer goes too); one loop fusion is left, as XLA:GPU has it. With
    `constant_folding=False`, the sum is a kernel."""
    fn, shapes = PROGRAMS["table_sum"]
    opts = dict(device="h100-sxm", price_totals=False)
    default = simulate_fusion(fn, *shape_specs(shapes), **opts)
    assert [k.opcode for k in kernels_of(default.module)] == ["fusion"]
    on = simulate_fusion(fn, *shape_specs(shapes), simplify=True, **opts)
    off = simulate_fusion(fn, *shape_specs(shapes), constant_folding=False, **opts)
    assert [k.opcode for k in kernels_of(on.module)] == ["fusion"]
    assert len(on.module.computations) == 2  # the entry and the fusion's body
    assert len(list(kernels_of(off.module))) == 2
    assert "reduce" in {i.opcode for _, i in off.module.instructions()}


def test_nextafter_of_constants_folds_to_one_value():
    """jax's `nextafter` of two scalar constants (bitcasts, masks, compares, selects) folds to the float after
    1.0; the vector one is left where only broadcasts feed it (the simplifier sinks those first in XLA)."""
    from xla_costmodel.fusion._simplify import simplify
    from _xla_gpu_dumps import lowered_program

    module = lowered_program(*PROGRAMS["next_after"])
    simplify(module)
    result = fold_constants(module)
    assert result.folded.get("bitcast-convert", 0) >= 2
    mul = next(i for i in module.entry.instructions if i.opcode == "multiply")
    factor = mul.operands[1]
    assert factor.opcode == "broadcast" and factor.operands[0].opcode == "constant"
    assert literal_of(factor.operands[0]) == np.nextafter(np.float32(1), np.float32(2))


def _signature(module):
    """Per computation: its instructions other than constants (by name), how many constants it holds, and the
    constant operands' values of each instruction (by name and operand number)."""
    out = {}
    for comp in module.computations:
        values = {}
        for instr in comp.instructions:
            for k, op in enumerate(instr.operands):
                if op.opcode == "constant":  # its value, or its text where we do not read it (a tuple, c64)
                    value = literal_of(op)
                    values[(instr.name, k)] = "".join(op.literal_text.split()) if value is None else value
        out[comp.name] = (sorted(i.name for i in comp.instructions if i.opcode != "constant"),
                          sum(i.opcode == "constant" for i in comp.instructions), values)
    return out


def _fold_as_xla_does(fn, args, tmp_path, monkeypatch) -> int:
    """Compile `fn` deviceless with XLA's module dumped around each `constant_folding` pass; on each module
    before, our pass must leave the same instructions and constants as XLA's leaves (names kept by both, per
    computation), and the constants their users read must hold the same values. Returns how many
    instructions we folded."""
    import xla_costmodel.gpu_compile._compile as gpu_compile
    from xla_costmodel.gpu_compile import compile_for_gpu

    monkeypatch.setattr(gpu_compile, "DUMP_PASS_RE", "constant_folding")
    compile_for_gpu(fn, *args, device="h100-sxm", dump_passes=tmp_path)
    files = sorted(tmp_path.glob("*constant_folding*.txt"))
    pairs = [(b, a) for b, a in zip(files, files[1:])
             if "before_constant_folding" in b.name and ".after_constant_folding" in a.name]
    assert pairs
    folded = 0
    for before, after in pairs:
        ours = parse_hlo(before.read_text())
        folded += sum(fold_constants(ours, simplify_folded=False).folded.values())
        theirs = _signature(parse_hlo(after.read_text()))
        for comp, (names, constants, values) in _signature(ours).items():  # (a reducer folded away: XLA's DCE)
            assert (names, constants) == theirs[comp][:2], (before.name, comp)
            for key, value in values.items():
                xla = theirs[comp][2][key]
                if isinstance(xla, str) and "..." in xla:
                    continue  # XLA's dump elides large literals
                if isinstance(value, str) or isinstance(xla, str):
                    assert value == xla, (before.name, key)
                else:
                    np.testing.assert_allclose(value, xla, rtol=1e-6, err_msg=str((before.name, key)))
    return folded


@needs_xla
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_we_fold_what_xla_constant_folding_folds(name, tmp_path, monkeypatch):
    """XLA:GPU's own folding pass, on the programs above (`_fold_as_xla_does`); all but `iota_plus` fold."""
    fn, shapes = PROGRAMS[name]
    folded = _fold_as_xla_does(fn, shape_specs(shapes), tmp_path, monkeypatch)
    assert (folded > 0) == (name != "iota_plus")


@needs_xla
@pytest.mark.parametrize("name", ["diffrax_neural_ode_adaptive", "optax_softmax_cross_entropy_grad"])
def test_corpus_programs_fold_as_xla_folds(name, tmp_path, monkeypatch):
    """The corpus programs that fold most (diffrax: ~2400 compares, selects, bitcasts of constants in its
    loop; optax: a scatter and tuple elements of constants), held to XLA:GPU's folding pass."""
    from xla_costmodel.corpus import MissingLibraryError, get_program

    try:
        fn, args = get_program(name).build("small")
    except MissingLibraryError as exc:
        pytest.skip(str(exc))
    assert _fold_as_xla_does(fn, args, tmp_path, monkeypatch) > 0


SCATTER_HLO = """
HloModule scatter

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

set {
  a = f32[] parameter(0)
  ROOT b = f32[] parameter(1)
}

ENTRY main {
  z = f32[] constant(0)
  base = f32[4,5] broadcast(z), dimensions={}
  rows = s32[3,1] constant({ {2}, {0}, {2} })
  ones = f32[] constant(1.5)
  upd = f32[3,5] broadcast(ones), dimensions={}
  added = f32[4,5] scatter(base, rows, upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  at = s32[4,1,1] constant({ { {1} }, { {4} }, { {0} }, { {3} } })
  v = f32[] constant(-2)
  vs = f32[4,1] broadcast(v), dimensions={}
  picked = f32[4,5] scatter(base, at, vs), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=set
  ROOT t = (f32[4,5], f32[4,5]) tuple(added, picked)
}
"""


def test_scatters_of_constants_fold():
    """A scatter-add with a repeated row and a batched one-element scatter (optax's cross-entropy gradient has
    one) fold to what jaxlib's CPU client computes."""
    module = parse_hlo(SCATTER_HLO)
    result = fold_constants(module, simplify_folded=False)
    assert result.folded == {"scatter": 2} and not result.not_evaluated
    for g, w in zip(run_on_cpu(module.to_text(), []), run_on_cpu(SCATTER_HLO, [])):
        np.testing.assert_array_equal(g, w)
