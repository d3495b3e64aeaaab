"""Our fusion against XLA:GPU's own, on modules XLA:GPU optimized on an H100 (`hlo_fixtures/gpu_h100`).

The references are XLA's: the lowered module XLA:GPU compiled (`.pre`, printed
without metadata) and what XLA:GPU made of it (`.post`, jax 0.11.2, fused
instructions renamed). Counts in XLA's text are counted here with plain text
searches, independently of the parser and of `xla_gpu_kernel_kind`.
"""

from __future__ import annotations

import gzip
import re

import pytest

from xla_costmodel import parse_hlo, simulate_fusion
from xla_costmodel.cli import main
from xla_costmodel.fusion import compare_with_xla, kernels_of
from xla_costmodel.fusion._compare import structure_keys
from xla_costmodel.fusion._xla_passes import BEFORE_FUSION_HINT, xla_gpu_kernels

from conftest import FIXTURES

GPU = FIXTURES / "gpu_h100"


def _text(name: str) -> str:
    with gzip.open(GPU / f"{name}.hlo.gz", "rt") as f:
        return f.read()


@pytest.fixture(scope="module")
def mlp():
    """equinox_mlp_grad@medium: 11 dots, which XLA:GPU makes Triton GEMM fusions before fusing."""
    pre = parse_hlo(_text("equinox_mlp_grad@medium.pre"))
    post_text = _text("equinox_mlp_grad@medium.post")
    return pre, post_text, simulate_fusion(pre, model="xla-gpu", price_totals=False)


def test_instructions_match_by_structure_when_names_and_metadata_are_gone(mlp):
    pre, post_text, result = mlp
    assert "metadata=" not in _text("equinox_mlp_grad@medium.pre")  # nothing to match on but structure
    c = compare_with_xla(result, post_text)
    assert c.matched_by_op_name == 0
    # Names are XLA's renamed ones: without structure nearly nothing would match.
    assert c.matched_by_structure >= 0.6 * c.ours_instructions
    assert c.matched == c.matched_by_name + c.matched_by_structure
    assert len(c.unmatched) == c.ours_instructions - c.matched
    # XLA:GPU made its 11 dots Triton GEMM fusions (custom fusions holding a `dot`): ours stay dots,
    # and a dot has no counterpart on XLA's side among the loop fusions.
    assert (c.unmatched["opcode"] == "dot").sum() >= 1
    assert c.ari > 0.5
    assert {"structure", "name"} >= set(c.table["matched_by"])


def test_structure_keys_see_through_kernel_boundaries():
    """A module and its fused copy give their instructions the same keys."""
    text = """HloModule k
ENTRY e {
  p0 = f32[64]{0} parameter(0)
  p1 = f32[64]{0} parameter(1)
  a = f32[64]{0} add(p0, p1)
  s = f32[64]{0} sine(a)
  ROOT m = f32[64]{0} multiply(s, a)
}
"""
    m = parse_hlo(text)
    fused = simulate_fusion(m, model="xla-gpu", price_totals=False)
    assert any(k.opcode == "fusion" for k in kernels_of(fused.module))
    a, b = structure_keys(m), structure_keys(fused.module, origin=fused.origin)
    assert {n: a[n] for n in ("a", "s", "m")} == {n: b[n] for n in ("a", "s", "m")}
    assert a["s"] != a["m"]


def test_xla_gpu_kernels_by_pass(mlp):
    _, post_text, _ = mlp
    post = parse_hlo(post_text)
    kinds = xla_gpu_kernels(kernels_of(post))
    # Triton GEMM fusions: kCustom fusions whose body holds a dot, counted in the text.
    bodies = {m.group(1) for m in re.finditer(r"^(%\S+) [^\n]*\{\n(?:[^\n]*\n)*?[^\n]* dot\(", post_text, re.M)}
    gemm_calls = [m for m in re.finditer(r"kind=kCustom, calls=(%\S+),", post_text) if m.group(1) in bodies]
    assert kinds["triton-gemm"] == len(gemm_calls) == 11
    assert int(kinds.sum()) == sum(1 for _ in kernels_of(post))


def test_result_says_which_kernels_xla_makes_before_fusion(mlp):
    pre, _, result = mlp
    ns = result.not_simulated
    dots = sum(1 for _, i in pre.instructions() if i.opcode == "dot")
    assert dots == 11 and (ns["opcode"] == "dot").sum() == dots
    assert set(ns["xla_pass"]) == {"GemmFusion / GemmRewriter"}
    assert not result.input_through_xla
    notes = " ".join(result.notes)
    assert "11 kernels come from passes" in notes and BEFORE_FUSION_HINT in notes


def test_no_hint_for_a_module_xla_already_prepared():
    """A module that has been through layout assignment (it holds a bitcast) is XLA's own input."""
    text = """HloModule l
ENTRY e {
  p0 = f32[8,8]{1,0} parameter(0)
  b = f32[64]{0} bitcast(p0)
  ROOT n = f32[64]{0} negate(b)
}
"""
    r = simulate_fusion(parse_hlo(text), model="xla-gpu", price_totals=False)
    assert r.input_through_xla and r.notes == [] and r.not_simulated.empty


def test_cli_fuse_prints_the_notes(tmp_path, capsys):
    src = tmp_path / "mlp.hlo"
    src.write_text(_text("equinox_mlp_grad@medium.pre"))
    assert main(["fuse", str(src), "--model", "xla-gpu", "-o", str(tmp_path / "o.hlo")]) == 0
    out = capsys.readouterr().out
    assert "note: 11 kernels come from passes XLA:GPU runs before fusion" in out
    assert "before_priority-fusion" in out
