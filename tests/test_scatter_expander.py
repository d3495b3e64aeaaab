"""XLA's `ScatterExpander(kEliminateSimpleScatters)` with the loop removed after it (`fusion._scatter_expander`):
a scatter of one index vector becomes elementwise code (and a dynamic-update-slice). Rewritten modules run on
jaxlib's CPU client against jax, in bounds and out of them; where jax's CUDA plugin is installed, what we do is
held to XLA:GPU's module right before priority fusion (a deviceless compile)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xla_costmodel.fusion import kernels_of, simulate_fusion  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._scatter_expander import expand_simple_scatters, scatter_trip_count  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from _xla_gpu_dumps import first_dump, xla_gpu_pass_dumps, lowered_program, shape_specs  # noqa: E402


def add_row(x, i, v):  # one index vector, a window of one row: dynamic-slice, add, dynamic-update-slice
    return x.at[i[0]].add(v) * 2.0


def set_row(x, i, v):  # the combiner returns the update
    return x.at[i[0]].set(v) + 1.0


def max_column(x, i, v):
    return x.at[:, i[0]].max(v)


def add_rows(x, i, v):  # several index vectors: XLA:GPU's scatter kernel
    return x.at[i].add(v)


def take_grad(x, g):  # the transposed take of a constant index (optax's cross-entropy gradient has one)
    return jax.vjp(lambda x: jnp.take(x, 0, axis=1), x)[1](g)[0] + x


PROGRAMS = {
    "add_row": (add_row, [((16, 8), "float32"), ((1,), "int32"), ((8,), "float32")]),
    "set_row": (set_row, [((16, 8), "float32"), ((1,), "int32"), ((8,), "float32")]),
    "max_column": (max_column, [((16, 8), "float32"), ((1,), "int32"), ((16,), "float32")]),
    "add_rows": (add_rows, [((16, 8), "float32"), ((4,), "int32"), ((4, 8), "float32")]),
    "take_grad": (take_grad, [((64, 1), "float32"), ((64,), "float32")]),
}


def _specs(name):
    return shape_specs(PROGRAMS[name][1])


def _lowered(name):
    return lowered_program(*PROGRAMS[name])


def _scatters(module):
    return [i for c in module.computations for i in c.instructions if i.opcode == "scatter"]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("index", [3, 15, 40])
def test_expanded_scatters_compute_the_same(name, index):
    fn, shapes = PROGRAMS[name]
    module = _lowered(name)
    before = _scatters(module)
    rows = expand_simple_scatters(module)
    assert len(rows) == sum(scatter_trip_count(s) == 1 for s in before) > 0 or name == "add_rows"
    assert (name == "add_rows") == bool(_scatters(module))
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(d) if d == "float32" else np.full(s, index, np.int32) for s, d in shapes]
    if name == "add_rows":
        args[1] = np.array([index % 16, 2, index, 2], np.int32)
    got = run_on_cpu(module.to_text(), args)
    np.testing.assert_allclose(got[0], np.asarray(jax.jit(fn)(*args)), rtol=1e-6)


def test_an_expanded_scatter_fuses_into_its_neighbours():
    def kernels(name):
        result = simulate_fusion(_lowered(name), device="h100-sxm", price_totals=False)
        return [k.opcode for k in kernels_of(result.module)]
    assert "scatter" not in str(kernels("add_row")) and len(kernels("add_row")) == 1
    assert len(kernels("add_rows")) >= 1


needs_xla = pytest.mark.skipif(not gpu_compile_available(), reason="jax's CUDA plugin is not installed")


@needs_xla
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_scatters_left_as_xla_gpu_leaves_them_before_priority_fusion(name):
    dumps = xla_gpu_pass_dumps(__file__, name, "sort-iota-fusion")
    text = first_dump(dumps, "*.after_sort-iota-fusion.before_priority-fusion.txt")
    assert text is not None, sorted(dumps)[:5]
    xla = parse_hlo(text)
    ours = _lowered(name)
    expand_simple_scatters(ours)
    assert len(_scatters(ours)) == len(_scatters(xla))
    dus = [i for _, i in xla.instructions() if i.opcode == "dynamic-update-slice"]
    assert bool(dus) == bool([i for _, i in ours.instructions() if i.opcode == "dynamic-update-slice"])
