"""CSE and DCE before fusion (`fusion._cse`), against XLA:GPU's own input to priority fusion."""

from __future__ import annotations

import gzip
from collections import Counter

import jax.numpy as jnp

from xla_costmodel import parse_hlo, simulate_fusion
from xla_costmodel.fusion import kernels_of
from xla_costmodel.fusion._cse import eliminate_common_subexpressions

from conftest import FIXTURES

GPU = FIXTURES / "gpu_h100"


def test_merges_what_xla_merged_before_fusion():
    # optax.adafactor's lowered module computes `count + 1` and its comparisons once per leaf.
    # XLA:GPU's module right before priority fusion (jaxlib 0.10.2, deviceless compile for
    # h100-sxm, `--xla_dump_hlo_pass_re=.*`) holds 17 compares and 51 adds in its entry.
    pre = parse_hlo(gzip.open(GPU / "optax_adafactor_update@medium.pre.hlo.gz", "rt").read())
    before = Counter(i.opcode for i in pre.entry.instructions)
    assert (before["compare"], before["add"]) == (33, 67)
    result = eliminate_common_subexpressions(pre)
    after = Counter(i.opcode for i in pre.entry.instructions)
    assert (after["compare"], after["add"]) == (17, 51)
    assert result.merged == result.removed > 0
    parse_hlo(pre.to_text())  # still a valid module


def test_identical_instructions_are_one_kernel():
    def f(x):
        return jnp.sin(x) + jnp.sin(x)  # jax lowers two sines

    result = simulate_fusion(f, jnp.ones(8), device="h100-sxm", price_totals=False)
    off = simulate_fusion(f, jnp.ones(8), device="h100-sxm", price_totals=False, cse=False)
    assert [i.opcode for _, i in off.module.instructions()].count("sine") == 2
    assert [i.opcode for _, i in result.module.instructions()].count("sine") == 1
    assert sum(1 for _ in kernels_of(result.module)) == 1


def test_dead_code_and_its_reducer_go():
    text = """HloModule m
add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  dead = f32[] reduce(p, z), dimensions={0}, to_apply=add_f32
  ROOT n = f32[4] negate(p)
}
"""
    module = parse_hlo(text)
    result = eliminate_common_subexpressions(module)
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "negate"]
    assert [c.name for c in module.computations] == ["e"]  # the reducer would be fused as if it ran
    assert result.removed == 2
    fused = simulate_fusion(text, device="h100-sxm", price_totals=False)
    assert sum(1 for _ in kernels_of(fused.module)) == 1


def test_side_effects_are_kept():
    text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] custom-call(p), custom_call_target="x", custom_call_has_side_effect=true
  b = f32[4] custom-call(p), custom_call_target="x", custom_call_has_side_effect=true
  c = f32[4] exponential(p)
  d = f32[4] exponential(p)
  ROOT t = (f32[4], f32[4]) tuple(c, d)
}
"""
    module = parse_hlo(text)
    result = eliminate_common_subexpressions(module)
    ops = [i.opcode for i in module.entry.instructions]
    assert ops.count("custom-call") == 2 and ops.count("exponential") == 1
    assert (result.merged, result.removed) == (1, 1)
