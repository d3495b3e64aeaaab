"""XLA's `ShardingRemover` before fusion (`fusion._sharding_remover`): a sharding annotation is no kernel."""

from __future__ import annotations

import gzip
from pathlib import Path

from xla_costmodel.fusion import kernels_of, simulate_fusion
from xla_costmodel.fusion._sharding_remover import remove_shardings
from xla_costmodel.hlo import parse_hlo

CAPTURE = Path(__file__).resolve().parent.parent / "hlo_fixtures" / "gpu_h100"

TEXT = """
HloModule m, entry_computation_layout={(f32[8]{0})->(f32[8]{0}, f32[8]{0})}

ENTRY main {
  p = f32[8]{0} parameter(0)
  s = f32[8]{0} custom-call(p), custom_call_target="Sharding", sharding={replicated}
  n = f32[8]{0} negate(s)
  g = f32[8]{0} custom-call(n), custom_call_target="xla.sdy.FuncResultSharding"
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(g, s)
}
"""


def test_annotations_go_and_their_readers_read_their_operand():
    module = parse_hlo(TEXT)
    assert sorted(remove_shardings(module)) == ["g", "s"]
    entry = module.entry
    assert [o.name for o in entry.root.operands] == ["n", "p"]
    assert entry.instruction("n").operands[0].name == "p"
    assert not any(i.opcode == "custom-call" for i in entry.instructions)


def test_other_custom_calls_stay():
    module = parse_hlo(TEXT.replace('"Sharding"', '"my_kernel"'))
    assert remove_shardings(module) == ["g"]
    assert module.entry.instruction("s").opcode == "custom-call"


def _read(name, stage):
    with gzip.open(CAPTURE / f"{name}.{stage}.hlo.gz", "rt") as f:
        return parse_hlo(f.read())


def test_jax_random_keys_annotation_is_no_kernel_as_on_the_h100():
    pre, post = _read("jax_random_sampling@large", "pre"), _read("jax_random_sampling@large", "post")
    assert any(i.opcode == "custom-call" and i.attribute("custom_call_target", "") == "Sharding"
               for _, i in pre.instructions())
    fused = simulate_fusion(pre, price_totals=False, simplify=True, gemm_rewrites=True).module
    assert not [k for k in kernels_of(fused) if k.opcode == "custom-call"
                and k.attribute("custom_call_target", "") == "Sharding"]
    # the H100 ran as many kernels (its two sorts are cub calls there: one kernel each here)
    assert sum(1 for _ in kernels_of(fused)) == sum(1 for k in kernels_of(post) if k.opcode != "async-done")
