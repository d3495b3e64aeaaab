"""XLA's ReduceWindowRewriter as `simulate_fusion` runs it: checked by running the rewritten module on
jaxlib's CPU client against numpy, by jaxlib's cost analysis, and (where the CUDA plugin is installed)
against XLA:GPU's own deviceless compile of the same program."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

from xla_costmodel import analyze  # noqa: E402
from xla_costmodel.fusion import simulate_fusion  # noqa: E402
from xla_costmodel.fusion._execute import run_on_cpu  # noqa: E402
from xla_costmodel.fusion._reduce_window import rewrite_reduce_windows  # noqa: E402
from xla_costmodel.hlo import from_jax, parse_hlo  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo._edit import inline_calls  # noqa: E402


def _rewritten(fn, *args):
    module = inline_calls(from_jax(fn, *args, optimized=False))
    return module, rewrite_reduce_windows(module)


def _windows(module):
    return [i for _, i in module.instructions() if i.opcode == "reduce-window"]


CASES = {
    "cumsum-65536": (jnp.cumsum, (np.arange(65536) % 7).astype(np.float32)),
    "cumsum-1000 (padded)": (jnp.cumsum, np.linspace(-1, 1, 1000, dtype=np.float32)),
    "cumsum axis 0 (transposed)": (lambda x: jnp.cumsum(x, axis=0), np.linspace(0, 1, 70 * 3, dtype=np.float32).reshape(70, 3)),
    "reverse cumsum": (lambda x: lax.cumsum(x, reverse=True), (np.arange(300) % 5).astype(np.int32)),
    "cummax": (lax.cummax, np.sin(np.arange(257, dtype=np.float32))),
    "cumprod": (jnp.cumprod, np.full(40, 1.01, np.float32)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rewritten_scan_runs_and_gives_the_scan(name):
    fn, x = CASES[name]
    module, done = _rewritten(fn, x)
    assert [d.kind for d in done] == ["scan-tree"]
    # every window left is at most 16 long (or the rank-1 unit-dimension form of one)
    assert all(max(d.size for d in w.attribute("window").dimensions) <= 16 for w in _windows(module))
    got = run_on_cpu(module.to_text(), [x])[0]
    want = np.asarray(fn(x))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


EXCLUSIVE = """HloModule exclusive_scan
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[40]{0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[41]{0} reduce-window(x, z), window={size=40 pad=40_0}, to_apply=add
}
"""


def test_exclusive_scan_is_padded_like_xla():
    module = parse_hlo(EXCLUSIVE)
    x = np.arange(40, dtype=np.float32)
    want = run_on_cpu(EXCLUSIVE, [x])[0]
    assert rewrite_reduce_windows(module)[0].kind == "scan-tree"
    np.testing.assert_allclose(run_on_cpu(module.to_text(), [x])[0], want)
    np.testing.assert_allclose(want, np.concatenate([[0], np.cumsum(x)]))


def test_rewrite_is_idempotent_and_leaves_short_and_pooling_windows():
    module, _ = _rewritten(jnp.cumsum, np.ones(65536, np.float32))
    text = module.to_text()
    assert rewrite_reduce_windows(module) == []
    assert module.to_text() == text
    pool = lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 3, 3), (1, 2, 2), "VALID")  # noqa: E731
    module, done = _rewritten(pool, np.ones((2, 64, 64), np.float32))
    assert done == [] and len(_windows(module)) == 1


def test_cumsum_counts_what_xla_counts():
    """XLA:GPU's module right before priority fusion for cumsum over 65536 f32 (deviceless compile, jax
    0.10.2, h100 target; `scripts/fusion_conformance.py`) has 4 reduce-windows and jaxlib's cost analysis
    counts 1,118,463 flops in it; the test below re-derives the figure where the plugin is installed."""
    from xla_costmodel._jaxlib_oracle import xla_cost_analysis

    module, done = _rewritten(jnp.cumsum, np.ones(65536, np.float32))
    assert done[0].levels == 3
    assert len(_windows(module)) == 4
    assert xla_cost_analysis(module.to_text())["flops"] == 1118463


def test_analyze_prices_cumsum_as_xla_compiles_it():
    """The README-level user path: `analyze(jnp.cumsum, ...)` on a GPU prices XLA's tree, not the
    65536-wide window (4.29e9 flops and 553 us before)."""
    x = jnp.ones(65536)
    table = analyze(jnp.cumsum, x, device="h100-sxm")
    assert table.flops.sum() < 3e6
    assert table.time_s.sum() < 20e-6
    result = simulate_fusion(jnp.cumsum, x, device="h100-sxm")
    assert [r.kind for r in result.pre_fusion_rewrites] == ["scan-tree"]
    assert any("ReduceWindowRewriter" in n for n in result.notes)
    off = simulate_fusion(jnp.cumsum, x, device="h100-sxm", rewrite_reduce_windows=False)
    assert off.pre_fusion_rewrites == () and off.time_after_s > 10 * result.time_after_s


def test_cumsum_kernels_against_xla_gpu_deviceless():
    """Same program through XLA:GPU's own compiler (no GPU needed): the same number of kernels."""
    conformance = pytest.importorskip("xla_costmodel.fusion._conformance")
    if not gpu_compile_available():
        pytest.skip("jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")
    dump = conformance.compile_with_fusion_dumps(jnp.cumsum, [jax.ShapeDtypeStruct((65536,), jnp.float32)],
                                       device="h100-sxm")
    from xla_costmodel._jaxlib_oracle import xla_cost_analysis

    assert xla_cost_analysis(dump.before_fusion_text)["flops"] == 1118463
    ours = simulate_fusion(jnp.cumsum, jnp.ones(65536), device="h100-sxm", price_totals=False)
    from xla_costmodel.fusion import kernels_of

    assert len([k for k in kernels_of(ours.module) if k.opcode == "fusion"]) == dump.kernel_count
