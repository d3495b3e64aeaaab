"""Copies around `while` loops and in `conditional` branches (`fusion._loop_copies`), against XLA:GPU's
own modules: a deviceless compile for h100-sxm (where jax's CUDA plugin is installed) and the H100
capture; the rewritten module still computes what jax computes."""

from __future__ import annotations

import gzip
from collections import Counter

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._copy_insertion import insert_root_copies  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._loop_copies import insert_loop_copies  # noqa: E402
from xla_costmodel.gpu_compile import compile_for_gpu, gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import from_jax, parse_hlo  # noqa: E402

from conftest import FIXTURES  # noqa: E402


def fori_scale(x):  # the counter starts at a constant, x is a parameter: both copied before the loop
    return lax.fori_loop(0, 10, lambda i, x: x * 1.5 + 1.0, x)


def scan_stack(c0, xs):  # a scan's stacked output is updated in place: no copy in the body
    return lax.scan(lambda c, xi: (c + xi, c * 2.0), c0, xs)


def fib_shift(a, b):  # (a, b) -> (b, a + b): the moved element and the old b read by the root
    return lax.fori_loop(0, 10, lambda i, ab: (ab[1], ab[0] + ab[1]), (a, b))


def swap(a, b):
    return lax.fori_loop(0, 7, lambda i, ab: (ab[1] * 1.0001, ab[0]), (a, b))


def read_after_write(x, w):  # the old x is read by the sum, which needs the new x
    def body(i, c):
        x, s = c
        xn = jnp.tanh(x @ w)
        return xn, s + jnp.sum(x * xn)
    return lax.fori_loop(0, 5, body, (x, jnp.float32(0)))


def cond_identity(p, x):  # the identity branch copies its operand, still read after the conditional
    y = lax.cond(p, lambda x: x, lambda x: jnp.sin(x), x)
    return y, x * 2.0


def live_init(x):  # y is read after the loop: its init copy stays (and is fused into exp's kernel)
    y = jnp.exp(x)
    z = lax.fori_loop(0, 4, lambda i, v: v * 0.5, y)
    return z, y


def two_loops(x):  # the two counters start from one constant: one copy each
    y = lax.fori_loop(0, 6, lambda i, v: jnp.sin(v), x)
    return lax.fori_loop(0, 3, lambda i, v: v * v, y)


def nested(x):
    inner = lambda j, v: v * 0.9 + 0.1  # noqa: E731
    return lax.fori_loop(0, 4, lambda i, v: lax.fori_loop(0, 3, inner, jnp.cos(v)), x)


PROGRAMS = {
    "fori_scale": (fori_scale, [((256,), "float32")]),
    "scan_stack": (scan_stack, [((64,), "float32"), ((12, 64), "float32")]),
    "fib_shift": (fib_shift, [((128,), "float32"), ((128,), "float32")]),
    "swap": (swap, [((128,), "float32"), ((128,), "float32")]),
    "read_after_write": (read_after_write, [((8, 64), "float32"), ((64, 64), "float32")]),
    "cond_identity": (cond_identity, [((), "bool"), ((256,), "float32")]),
    "live_init": (live_init, [((256,), "float32")]),
    "two_loops": (two_loops, [((256,), "float32")]),
    "nested": (nested, [((256,), "float32")]),
}


def _specs(name):
    return [jax.ShapeDtypeStruct(s, d) for s, d in PROGRAMS[name][1]]


def _copy_kernels(module) -> Counter:
    """Copy kernels of a fused module: in the entry computation, and in loop bodies or branches."""
    return Counter("entry" if k.computation is module.entry else "loops"
                   for k in kernels_of(module) if k.opcode == "copy")


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_copy_kernels_as_xla_gpu_compiles_them(name):
    """XLA:GPU's deviceless compile for h100-sxm (jaxlib 0.10.2): the copies left after its copy
    insertion and copy fusion, where they are, are ours from the module jax lowers."""
    if not gpu_compile_available():
        pytest.skip("jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")
    fn, _ = PROGRAMS[name]
    xla = compile_for_gpu(fn, *_specs(name), device="h100-sxm").module
    ours = simulate_fusion(from_jax(fn, *_specs(name), optimized=False), device="h100-sxm", price_totals=False)
    assert _copy_kernels(ours.module) == _copy_kernels(xla)


def test_reasons_name_the_rule():
    ours = simulate_fusion(fib_shift, *_specs("fib_shift"), device="h100-sxm", price_totals=False)
    body = ours.copies[ours.copies["computation"] != ours.module.entry.name]
    assert sorted(body["reason"]) == ["body-moved", "body-read-after-write"]
    ours = simulate_fusion(live_init, *_specs("live_init"), device="h100-sxm", price_totals=False)
    rows = dict(zip(ours.copies["reason"], ours.copies["fused_into"]))
    assert set(rows) == {"read-only", "init-live"} and rows["init-live"] != ""  # fused into exp's kernel
    ours = simulate_fusion(scan_stack, *_specs("scan_stack"), device="h100-sxm", price_totals=False)
    assert set(ours.copies["reason"]) == {"read-only"}  # the in-place stacked output needs none
    off = simulate_fusion(fib_shift, *_specs("fib_shift"), device="h100-sxm", price_totals=False,
                          copy_insertion=False)
    assert off.copies.empty and not _copy_kernels(off.module)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_module_with_copies_computes_the_same(name):
    fn, shapes = PROGRAMS[name]
    module = from_jax(fn, *_specs(name), optimized=False)
    added = insert_loop_copies(module) + insert_root_copies(module)
    assert added
    rng = np.random.default_rng(0)
    args = [np.asarray(rng.standard_normal(s) > 0) if d == "bool" else rng.standard_normal(s).astype(d)
            for s, d in shapes]
    want = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    got = run_on_cpu(module.to_text(), args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-5)
    again = parse_hlo(module.to_text())  # copies already there are left alone: nothing more to add
    assert insert_loop_copies(again) + insert_root_copies(again) == []


def test_trip_counts_survive_the_copies():
    """The copies change the loops' init tuples and body roots, never their recorded trip counts."""
    ours = simulate_fusion(nested, *_specs("nested"), device="h100-sxm", price_totals=False)
    loops = [i for _, i in ours.module.instructions() if i.opcode == "while"]
    counts = sorted(int(w.attribute("backend_config")["known_trip_count"]["n"]) for w in loops)
    assert counts == [3, 4]
    again = parse_hlo(ours.module.to_text())  # a valid module after the copies
    assert _copy_kernels(again) == _copy_kernels(ours.module)


@pytest.mark.parametrize("case", ["lineax_cg_solve@small", "equinox_lstm_grad@small"])
def test_loop_copies_as_on_the_h100(case):
    """The H100 capture: cg's while loop keeps one copy in its body and its conditional's identity
    branch one; the LSTM's zero inits copied into 13 loop elements are one multi-output fusion."""
    read = lambda kind: parse_hlo(gzip.open(FIXTURES / "gpu_h100" / f"{case}.{kind}.hlo.gz", "rt").read())  # noqa: E731
    ours = simulate_fusion(read("pre"), device="h100-sxm", price_totals=False)
    assert _copy_kernels(ours.module) == _copy_kernels(read("post"))
