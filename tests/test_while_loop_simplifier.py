"""XLA's `WhileLoopSimplifier` (dead tuple elements, merged induction variables) and `WhileLoopConstantSinking`
as `fusion._while_loop_simplifier` simulates them, with the simplifier rules that finish their work
(`dynamic-update-slice` of a broadcast at constant starts -> `pad`, a vector dot reduced in its operand's shape).
Rewritten modules run on jaxlib's CPU client against the module as lowered; where jax's CUDA plugin is installed,
the loops' tuples and the rewritten instructions are held to XLA:GPU's module right before priority fusion (a
deviceless compile); the loops' trip counts stay known through fusion."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xla_costmodel.analysis import while_trip_count  # noqa: E402
from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._cse import eliminate_common_subexpressions  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._simplify import simplify  # noqa: E402
from xla_costmodel.fusion._simulate import working_copy  # noqa: E402
from xla_costmodel.fusion._while_loop_simplifier import simplify_while_loops, sink_constants  # noqa: E402
from xla_costmodel.devices import get_device  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from _xla_gpu_dumps import first_dump, lowered_program, xla_gpu_pass_dumps  # noqa: E402


def two_counters(x, start):
    """A scan's trip counter, a second index that grows with it from a value known at run time (diffrax's
    index into its saved steps), and a flag that only feeds itself."""
    def cond(c):
        return c[0] < 6

    def body(c):
        i, j, flag, x = c
        row = jax.lax.dynamic_slice_in_dim(x, j, 1)
        x = jax.lax.dynamic_update_slice_in_dim(x, row * 2.0 + i.astype(x.dtype), j, 0)
        return i + 1, j + 1, jnp.logical_and(flag, j < 7), x

    i, j, flag, x = jax.lax.while_loop(cond, body, (0, start[0], True, x))
    return x, j


def no_counter(x, start):
    """Two induction variables, none starting at 0: XLA appends a trip counter."""
    def cond(c):
        return c[0] < start[0] + 5

    def body(c):
        j, k, x = c
        return j + 1, k + 3, x + k.astype(x.dtype)

    j, k, x = jax.lax.while_loop(cond, body, (start[0], start[0] * 2, x))
    return x, k


#: A loop-invariant constant in the loop's state (jax hoists its own constants out of a loop: written here as
#: XLA sees a module whose constants reached the state, as the diffrax solvers' Runge-Kutta tableaux do there):
#: sunk into the body, then a dead element.
CONSTANT_TABLE = """
HloModule constant_table

body {
  p = (s32[], f32[8]{0}, f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  t = f32[8]{0} get-tuple-element(p), index=1
  x = f32[16]{0} get-tuple-element(p), index=2
  row = f32[1]{0} dynamic-slice(t, i), dynamic_slice_sizes={1}
  s = f32[] reshape(row)
  b = f32[16]{0} broadcast(s), dimensions={}
  y = f32[16]{0} multiply(x, b)
  ROOT out = (s32[], f32[8]{0}, f32[16]{0}) tuple(next, t, y)
}

cond {
  p = (s32[], f32[8]{0}, f32[16]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(8)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY main {
  x = f32[16]{0} parameter(0)
  zero = s32[] constant(0)
  table = f32[8]{0} constant({0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 0.25})
  init = (s32[], f32[8]{0}, f32[16]{0}) tuple(zero, table, x)
  loop = (s32[], f32[8]{0}, f32[16]{0}) while(init), condition=cond, body=body
  ROOT r = f32[16]{0} get-tuple-element(loop), index=2
}
"""


def zeros_with_a_row(u):
    """A dynamic-update-slice of zeros at constant starts: a pad."""
    return jax.lax.dynamic_update_slice(jnp.zeros((16, 7, 8), u.dtype), u, (0, 2, 0)) * 3.0


def vector_dot(v, x):
    """`v[7] . x[16,7,8]`: strength-reduced, XLA keeps the multiply in x's shape."""
    return jnp.einsum("k,bkn->bn", v, x, precision="highest") + 1.0


PROGRAMS = {
    "two_counters": (two_counters, [((16, 8), "float32"), ((1,), "int32")]),
    "no_counter": (no_counter, [((16, 8), "float32"), ((1,), "int32")]),
    "zeros_with_a_row": (zeros_with_a_row, [((16, 1, 8), "float32")]),
    "vector_dot": (vector_dot, [((7,), "float32"), ((16, 7, 8), "float32")]),
}
LOOPS = ("two_counters", "no_counter", "constant_table")


def _lowered(name):
    if name == "constant_table":
        return parse_hlo(CONSTANT_TABLE)
    return lowered_program(*PROGRAMS[name])


def _args(name, start=2):
    rng = np.random.default_rng(3)
    shapes = [((16,), "float32")] if name == "constant_table" else PROGRAMS[name][1]
    return [rng.standard_normal(s).astype(d) if d == "float32" else np.full(s, start, np.int32) for s, d in shapes]


def _simplified(module):
    """What `simulate_fusion(simplify=True)` makes of `module` before fusing (its working copy)."""
    return working_copy(module, True, "off", None, None, [], get_device("h100-sxm"), simplify=True,
                        constant_folding=True, convs=[], topks=[])


def _loops(module):
    return [i for _, i in module.instructions() if i.opcode == "while"]


def _state(loop):
    return Counter(str(s.element_type) + str(list(s.dims)) for s in loop.shape.tuple_shapes)


@pytest.mark.parametrize("name", LOOPS)
@pytest.mark.parametrize("start", [0, 2, 5])
def test_simplified_loops_compute_the_same(name, start):
    module = _lowered(name)
    args = _args(name, start)
    want = run_on_cpu(module.to_text(), args)
    sink_constants(module)
    first = simplify_while_loops(module)
    second = simplify_while_loops(module)  # the merge after the dead elements' removal
    assert first.changed or second.changed
    simplify(module)
    got = run_on_cpu(module.to_text(), args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    # and the whole pre-fusion pipeline's result
    got = run_on_cpu(_simplified(_lowered(name)).to_text(), args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_dead_flag_removed_and_counters_merged():
    module = _lowered("two_counters")
    (loop,) = _loops(module)
    assert len(loop.shape.tuple_shapes) == 4
    assert simplify_while_loops(module).dead_elements == 1  # the flag
    (loop,) = _loops(module)
    assert [str(s.element_type) for s in loop.shape.tuple_shapes] == ["s32", "s32", "f32"]
    assert simplify_while_loops(module).merged_induction_variables == 1
    body = loop.attribute("body")
    # the index is passed on unchanged: one s32 add left in the body (the trip counter's)
    root = body.root
    assert root.operands[1].opcode == "get-tuple-element" and root.operands[1].attribute("index") == 1
    assert simplify_while_loops(module).changed is False


def test_a_trip_counter_is_appended_where_there_is_none():
    module = _lowered("no_counter")
    (loop,) = _loops(module)
    n = len(loop.shape.tuple_shapes)
    assert simplify_while_loops(module).merged_induction_variables == 2
    (loop,) = _loops(module)
    assert len(loop.shape.tuple_shapes) == n + 1
    assert loop.operands[0].operands[-1].literal_text == "0"


def test_a_sunk_constant_leaves_the_loop_state():
    module = _lowered("constant_table")
    (loop,) = _loops(module)
    assert "f32[8]" in _state(loop)
    assert sink_constants(module) == 1
    assert simplify_while_loops(module).dead_elements == 1
    (loop,) = _loops(module)
    assert "f32[8]" not in _state(loop)
    assert any(i.opcode == "constant" and i.shape.dims == (8,) for i in loop.attribute("body").instructions)


def test_trip_counts_stay_known_through_fusion():
    for name, trips in (("two_counters", 6), ("constant_table", 8)):
        result = simulate_fusion(_lowered(name), device="h100-sxm", price_totals=False, simplify=True,
                                 gemm_rewrites=True)
        (loop,) = _loops(result.module)
        assert while_trip_count(loop) == (trips, "backend_config")
        # one scalar kernel per trip: the counter's add (none for the index or the flag)
        scalars = [k for k in kernels_of(result.module, [loop.attribute("body")]) if not k.shape.is_tuple
                   and not k.shape.dims]
        assert len(scalars) == 1, scalars


def test_dynamic_update_slice_of_zeros_at_constant_starts_is_a_pad():
    module = _lowered("zeros_with_a_row")
    args = _args("zeros_with_a_row")
    want = run_on_cpu(module.to_text(), args)
    result = simplify(module)
    assert result.rewritten.get("dynamic-update-slice(broadcast) -> pad") == 1
    (pad,) = [i for _, i in module.instructions() if i.opcode == "pad"]
    assert pad.raw_attributes["padding"] == "0_0x2_4x0_0"
    np.testing.assert_allclose(run_on_cpu(module.to_text(), args)[0], want[0])


def test_vector_dot_reduced_in_its_operands_shape():
    module = _lowered("vector_dot")
    args = _args("vector_dot")
    want = run_on_cpu(module.to_text(), args)
    simplify(module)
    (reduce,) = [i for _, i in module.instructions() if i.opcode == "reduce"]
    assert reduce.operands[0].shape.dims == (16, 7, 8) and reduce.attribute("dimensions") == (1,)
    assert not [i for _, i in module.instructions() if i.opcode == "transpose"]
    np.testing.assert_allclose(run_on_cpu(module.to_text(), args)[0], want[0], rtol=1e-5)


needs_xla = pytest.mark.skipif(not gpu_compile_available(), reason="jax's CUDA plugin is not installed")


def _xla_before_fusion(name):
    dumps = xla_gpu_pass_dumps(__file__, name, "sort-iota-fusion")
    text = first_dump(dumps, "*.after_sort-iota-fusion.before_priority-fusion.txt")
    assert text is not None, sorted(dumps)[:5]
    return parse_hlo(text)


@needs_xla
@pytest.mark.parametrize("name", ["two_counters", "no_counter"])
def test_loop_state_as_xla_gpu_leaves_it_before_priority_fusion(name):
    xla = _xla_before_fusion(name)
    ours = _simplified(_lowered(name))
    assert [_state(w) for w in _loops(ours)] == [_state(w) for w in _loops(xla)]
    eliminate_common_subexpressions(ours)  # as `simulate_fusion` does next (XLA's CSE is in the same pipeline)
    # the scalar adds left in the loop body (kernels per trip on a GPU)
    def adds(module):
        (w,) = _loops(module)
        return sum(i.opcode == "add" and not i.shape.dims for i in w.attribute("body").instructions)
    assert adds(ours) == adds(xla)


@needs_xla
def test_pad_and_reduce_as_xla_gpu_leaves_them_before_priority_fusion():
    for name, opcode in (("zeros_with_a_row", "pad"), ("vector_dot", "reduce")):
        xla = _xla_before_fusion(name)
        ours = _simplified(_lowered(name))
        theirs = [i for _, i in xla.instructions() if i.opcode == opcode]
        mine = [i for _, i in ours.instructions() if i.opcode == opcode]
        assert len(theirs) == len(mine) == 1, name
        assert mine[0].operands[0].shape.dims == theirs[0].operands[0].shape.dims
        if opcode == "pad":
            assert mine[0].raw_attributes["padding"] == theirs[0].raw_attributes["padding"]
        else:
            assert mine[0].attribute("dimensions") == theirs[0].attribute("dimensions")


#: The diffrax gradients' shape (jax prunes a `lax.cond`'s unused operands itself; diffrax's solver loops reach
#: XLA with them): a loop's history that only a conditional's branch parameter carries, which no branch reads,
#: and a result element no one reads.
CONDITIONAL_RESIDUALS = """
HloModule conditional_residuals

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

body {
  p = (s32[], f32[16]{0}, f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  y = f32[16]{0} get-tuple-element(p), index=1
  c = f32[] constant(1.5)
  cb = f32[16]{0} broadcast(c), dimensions={}
  y2 = f32[16]{0} multiply(y, cb)
  h = f32[4]{0} get-tuple-element(p), index=2
  zero = f32[] constant(0)
  total = f32[] reduce(y, zero), dimensions={0}, to_apply=add_f32
  row = f32[1]{0} reshape(total)
  h2 = f32[4]{0} dynamic-update-slice(h, row, i)
  ROOT out = (s32[], f32[16]{0}, f32[4]{0}) tuple(next, y2, h2)
}

cond {
  p = (s32[], f32[16]{0}, f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

twice {
  a = (f32[16]{0}, f32[4]{0}) parameter(0)
  y = f32[16]{0} get-tuple-element(a), index=0
  two = f32[] constant(2)
  b = f32[16]{0} broadcast(two), dimensions={}
  r = f32[16]{0} multiply(y, b)
  e = f32[] exponential(two)
  ROOT t = (f32[16]{0}, f32[]) tuple(r, e)
}

less {
  a = (f32[16]{0}, f32[4]{0}) parameter(0)
  y = f32[16]{0} get-tuple-element(a), index=0
  one = f32[] constant(1)
  b = f32[16]{0} broadcast(one), dimensions={}
  r = f32[16]{0} subtract(y, b)
  ROOT t = (f32[16]{0}, f32[]) tuple(r, one)
}

ENTRY main {
  x = f32[16]{0} parameter(0)
  flag = pred[] parameter(1)
  zero = s32[] constant(0)
  h0 = f32[] constant(0)
  h = f32[4]{0} broadcast(h0), dimensions={}
  init = (s32[], f32[16]{0}, f32[4]{0}) tuple(zero, x, h)
  loop = (s32[], f32[16]{0}, f32[4]{0}) while(init), condition=cond, body=body
  y = f32[16]{0} get-tuple-element(loop), index=1
  hist = f32[4]{0} get-tuple-element(loop), index=2
  args = (f32[16]{0}, f32[4]{0}) tuple(y, hist)
  c = (f32[16]{0}, f32[]) conditional(flag, args, args), true_computation=twice, false_computation=less
  ROOT r = f32[16]{0} get-tuple-element(c), index=0
}
"""


@pytest.mark.parametrize("flag", [True, False])
def test_unused_conditional_elements_go_and_the_loop_history_with_them(flag):
    from xla_costmodel.fusion._conditional import remove_unused_conditional_elements

    module = parse_hlo(CONDITIONAL_RESIDUALS)
    args = [np.linspace(-1, 1, 16, dtype=np.float32), np.array(flag)]
    want = run_on_cpu(module.to_text(), args)
    assert simplify_while_loops(module).dead_elements == 0  # the history is read after the loop
    assert remove_unused_conditional_elements(module) == 3  # the result's f32[], each branch's f32[4]
    (cond,) = [i for _, i in module.instructions() if i.opcode == "conditional"]
    assert len(cond.shape.tuple_shapes) == 1 and len(cond.operands[1].shape.tuple_shapes) == 1
    assert not [i for b in (cond.attribute("true_computation"), cond.attribute("false_computation"))
                for i in b.instructions if i.opcode == "exponential"]
    assert simplify_while_loops(module).dead_elements == 1
    (loop,) = _loops(module)
    assert "f32[4]" not in _state(loop)
    np.testing.assert_allclose(run_on_cpu(module.to_text(), args)[0], want[0], rtol=1e-6)


#: A loop that is its computation's root, with two induction variables and no trip counter: the merge appends a
#: counter, and the root becomes the loop's state as it was (each variable read back as base + counter * step).
LOOP_AT_ROOT = """
HloModule loop_at_root

body {
  p = (s32[], s32[], f32[4]{0}) parameter(0)
  j = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j2 = s32[] add(j, one)
  k = s32[] get-tuple-element(p), index=1
  three = s32[] constant(3)
  k2 = s32[] add(k, three)
  x = f32[4]{0} get-tuple-element(p), index=2
  kf = f32[] convert(k)
  b = f32[4]{0} broadcast(kf), dimensions={}
  x2 = f32[4]{0} add(x, b)
  ROOT out = (s32[], s32[], f32[4]{0}) tuple(j2, k2, x2)
}

cond {
  p = (s32[], s32[], f32[4]{0}) parameter(0)
  j = s32[] get-tuple-element(p), index=0
  n = s32[] constant(9)
  ROOT lt = pred[] compare(j, n), direction=LT
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  j0 = s32[] parameter(1)
  k0 = s32[] parameter(2)
  init = (s32[], s32[], f32[4]{0}) tuple(j0, k0, x)
  ROOT loop = (s32[], s32[], f32[4]{0}) while(init), condition=cond, body=body
}
"""


@pytest.mark.parametrize("j0", [0, 4, 9])
def test_a_loop_at_the_root_keeps_its_state(j0):
    module = parse_hlo(LOOP_AT_ROOT)
    args = [np.arange(4, dtype=np.float32), np.array(j0, np.int32), np.array(-2, np.int32)]
    want = run_on_cpu(module.to_text(), args)
    assert simplify_while_loops(module).merged_induction_variables == 2
    assert module.entry.root.opcode == "tuple" and len(module.entry.root.operands) == 3
    (loop,) = _loops(module)
    assert len(loop.shape.tuple_shapes) == 4  # the trip counter appended
    simplify(module)
    got = run_on_cpu(module.to_text(), args)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_dead_element_of_a_loop_whose_init_is_not_a_tuple_instruction():
    text = LOOP_AT_ROOT.replace("""  x = f32[4]{0} parameter(0)
  j0 = s32[] parameter(1)
  k0 = s32[] parameter(2)
  init = (s32[], s32[], f32[4]{0}) tuple(j0, k0, x)
  ROOT loop = (s32[], s32[], f32[4]{0}) while(init), condition=cond, body=body""",
                                """  init = (s32[], s32[], f32[4]{0}) parameter(0)
  loop = (s32[], s32[], f32[4]{0}) while(init), condition=cond, body=body
  ROOT x = f32[4]{0} get-tuple-element(loop), index=0""").replace(
        "x2 = f32[4]{0} add(x, b)", "x2 = f32[4]{0} add(x, x)").replace(
        "ROOT x = f32[4]{0} get-tuple-element(loop), index=0", "ROOT x = f32[4]{0} get-tuple-element(loop), index=2")
    module = parse_hlo(text)
    assert simplify_while_loops(module).dead_elements == 1  # k: read by nothing but itself
    (loop,) = _loops(module)
    assert [str(s.element_type) for s in loop.shape.tuple_shapes] == ["s32", "f32"]
    assert loop.operands[0].opcode == "tuple" and all(o.opcode == "get-tuple-element"
                                                       for o in loop.operands[0].operands)
    assert module.entry.root.attribute("index") == 1  # the reader after the loop, re-indexed
