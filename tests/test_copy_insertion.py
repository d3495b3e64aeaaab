"""Copy insertion at the entry root (`fusion._copy_insertion`), against XLA:GPU's own output."""

from __future__ import annotations

import gzip

import jax.numpy as jnp

from xla_costmodel import parse_hlo, simulate_fusion
from xla_costmodel.fusion import kernels_of

from conftest import FIXTURES

GPU = FIXTURES / "gpu_h100"


def _entry_copies(module) -> int:
    return sum(1 for i in module.entry.instructions if i.opcode == "copy")


def test_constant_outputs_get_the_copies_xla_gpu_made():
    # optax.adafactor returns one constant at 32 outputs: the H100's module runs 32 copies for them
    case = "optax_adafactor_update@small"
    pre = parse_hlo(gzip.open(GPU / f"{case}.pre.hlo.gz", "rt").read())
    post = parse_hlo(gzip.open(GPU / f"{case}.post.hlo.gz", "rt").read())
    result = simulate_fusion(pre, device="h100-sxm", price_totals=False)
    assert len(result.copies) == _entry_copies(post) == 32
    assert set(result.copies["reason"]) == {"read-only"}  # a constant: read-only first
    assert _entry_copies(result.module) == 32
    off = simulate_fusion(pre, device="h100-sxm", price_totals=False, copy_insertion=False)
    assert off.copies.empty and _entry_copies(off.module) == 0
    assert sum(1 for _ in kernels_of(result.module)) == sum(1 for _ in kernels_of(off.module)) + 32


def test_parameters_and_repeated_outputs_as_xla_gpu_compiles_them():
    # XLA:GPU (jaxlib 0.10.2, deviceless, h100-sxm) compiles `f` to 4 kernels: the zeros' loop
    # fusion, `sin` with a fused copy of its output (copy fusion), and one copy per output of `x`
    def f(x, y):
        z = jnp.sin(y)
        return x, jnp.zeros(3), z, z, x.reshape(4, 1)

    result = simulate_fusion(f, jnp.ones(4), jnp.ones(3), device="h100-sxm", price_totals=False)
    by_index = dict(zip(result.copies["index"], result.copies["reason"]))
    # x (a parameter, the second time through a layout-only reshape) and z's second occurrence
    assert by_index == {"{0}": "read-only", "{3}": "replicated", "{4}": "read-only"}
    fused_into = dict(zip(result.copies["index"], result.copies["fused_into"]))
    assert fused_into == {"{0}": "", "{3}": "sin.1", "{4}": ""}
    kernels = list(kernels_of(result.module))
    assert sorted(k.opcode for k in kernels) == ["copy", "copy", "fusion", "fusion"]
    sine = [k for k in kernels if k.shape.is_tuple]
    assert len(sine) == 1 and [i.opcode for i in sine[0].fused_computation.instructions].count("copy") == 1
    again = parse_hlo(result.module.to_text())  # still a valid module, operands before users
    assert sum(1 for _ in kernels_of(again)) == 4


def test_a_computed_output_gets_no_copy():
    result = simulate_fusion(lambda x: jnp.exp(x) + 1, jnp.ones(8), device="h100-sxm", price_totals=False)
    assert result.copies.empty
