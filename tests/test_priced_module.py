"""Which kernels a device is priced on (`front.resolve_priced_module`).

A function priced on a GPU while jax compiles with XLA:CPU gets XLA:GPU's own
module where jax's CUDA plugin is installed (tests/test_gpu_compile.py), else
XLA:GPU's priority fusion simulated from its lowered module, never XLA:CPU's
kernels; a module XLA optimized for one kind of device, priced on another,
warns. tests/test_gpu_compile.py runs this file with the plugin hidden too.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import pandas as pd
import pytest

import xla_costmodel as xc
from xla_costmodel.models import BackendMismatchWarning
from xla_costmodel.gpu_compile import gpu_compile_available
from xla_costmodel.front import SIMULATED_FROM_LOWERED

from conftest import TEST_CPU

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="jax compiles for the CPU here")


def layer(x, w):
    h = jnp.tanh(x @ w)
    return (h - h.mean(axis=-1, keepdims=True)).sum()


ARGS = (jnp.ones((64, 128), jnp.float32), jnp.ones((128, 32), jnp.float32))


@pytest.mark.skipif(gpu_compile_available(), reason="jax's CUDA plugin is installed: XLA:GPU compiles the function "
                                                   "(tests/test_gpu_compile.py runs this with the plugin hidden)")
def test_a_function_on_a_gpu_prices_xla_gpu_fusion_simulated_from_its_lowered_module():
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendMismatchWarning)
        table = xc.analyze(layer, *ARGS, device="h100-sxm", model="xla-gpu")
    assert table.priced_module.startswith(SIMULATED_FROM_LOWERED + " (jax's CUDA plugin is not installed")
    assert table.priced_module == table.summary()["priced_module"]
    assert "simulated from the lowered module" in table._repr_html_()
    # The kernels are the simulation's, priced as analyze prices any module: simulate_fusion says the same.
    result = xc.simulate_fusion(xc.from_jax(layer, *ARGS, optimized=False), device="h100-sxm", model="xla-gpu")
    kernels = table[table["bound"] != "free"]
    assert set(kernels["kernel"]) == {r.kernel for r in pd.DataFrame(xc.analyze(result.module)).itertuples()
                                      if r.bound != "free"}
    assert table.total_time_s == pytest.approx(result.time_after_s)
    # ...not XLA:CPU's: its YNNPACK library fusion of the dot is nowhere.
    cpu = xc.from_jax(layer, *ARGS)
    assert any(i.fusion_kind == "kCustom" for i in cpu.entry.instructions if i.opcode == "fusion")
    assert "kCustom" not in set(kernels["kind"])


def test_a_function_on_the_host_prices_the_module_xla_cpu_compiled():
    table = xc.analyze(layer, *ARGS, device=TEST_CPU, model="roofline")
    assert table.priced_module == "the module XLA:CPU compiled"
    compiled = xc.from_jax(layer, *ARGS)
    entry = {i.name for i in compiled.entry.instructions}
    assert set(table.loc[table["computation"] == compiled.entry.name, "kernel"]) == entry


def test_granularity_of_a_function_reads_the_same_kernels():
    table = xc.analyze(layer, *ARGS, device="h100-sxm")
    fusion = table[table["opcode"] == "fusion"].iloc[0]["kernel"]
    df = xc.granularity(layer, fusion, *ARGS, device="h100-sxm")
    assert df.attrs["kernel"] == fusion and df["best"].sum() == 1


def test_a_module_optimized_for_the_cpu_priced_on_a_gpu_warns():
    module = xc.load_hlo("hlo_fixtures/mlp_fwd.post.hlo")
    with pytest.warns(BackendMismatchWarning, match=r"optimized by XLA:CPU \(fusion '.*' carries XLA:CPU's __ynn_fusion\)"):
        table = xc.analyze(module, device="h100-sxm")
    assert table.priced_module == "the module as given, optimized by XLA:CPU"
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendMismatchWarning)
        # on the CPU it was optimized for, and unoptimized on a GPU: nothing to say
        assert xc.analyze(module, device=TEST_CPU, model="roofline").priced_module == "the module as given"
        xc.analyze(xc.load_hlo("hlo_fixtures/mlp_fwd.pre.hlo"), device="h100-sxm")


def test_a_module_optimized_for_a_gpu_priced_on_the_cpu_warns():
    module = xc.parse_hlo("""HloModule g
ENTRY e {
  a = f32[256,256]{1,0} parameter(0)
  b = f32[256,256]{1,0} parameter(1)
  ROOT g = (f32[256,256]{1,0}, s8[4194304]{0}) custom-call(a, b), custom_call_target="__cublas$gemm",
    backend_config={"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"alpha_imag":0,"precision_config":{"operand_precision":["DEFAULT","DEFAULT"]},"epilogue":"DEFAULT"}}
}""")
    with pytest.warns(BackendMismatchWarning, match=r"XLA:GPU.*__cublas\$gemm"):
        xc.analyze(module, device=TEST_CPU, model="roofline")
