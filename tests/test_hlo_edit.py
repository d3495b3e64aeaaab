"""Graph surgery (`xla_costmodel.hlo._edit`, `fusion_engine`): checked by XLA's parser and by running on jaxlib's CPU client.

References: jaxlib's HLO parser must accept every edited module, and the edited
module (fusions inlined back for execution) must compute what the original
computes on random inputs.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from xla_costmodel import _jaxlib_oracle as oracle  # noqa: E402
from xla_costmodel.fusion._execute import random_arguments, run_on_cpu  # noqa: E402
from xla_costmodel.hlo import load_hlo, parse_hlo  # noqa: E402
from xla_costmodel.hlo._edit import (  # noqa: E402
    NameUniquifier,
    copy_module,
    inline_calls,
    inline_fusions,
    unfuse_for_execution,
)
from xla_costmodel.fusion_engine import fuse, hypothetical_fusion, make_fusion  # noqa: E402

from conftest import FIXTURES  # noqa: E402

CHAIN = """HloModule chain, entry_computation_layout={(f32[64]{0}, f32[64]{0})->f32[64]{0}}

ENTRY main {
  a = f32[64]{0} parameter(0)
  b = f32[64]{0} parameter(1)
  add.1 = f32[64]{0} add(a, b)
  exp.1 = f32[64]{0} exponential(add.1)
  mul.1 = f32[64]{0} multiply(exp.1, add.1)
  ROOT neg.1 = f32[64]{0} negate(mul.1)
}
"""


def _same_outputs(original, edited, seed=0):
    # Both graphs hold the same hand-written bitcasts, which this CPU path refuses: run them as the ops they stand for.
    args = random_arguments(original, seed)
    want = run_on_cpu(original.to_text(), args, bitcasts_as_logical_ops=True)
    got = run_on_cpu(unfuse_for_execution(edited).to_text(), args, bitcasts_as_logical_ops=True)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_name_uniquifier_drops_numeric_suffix_like_xla():
    m = parse_hlo(CHAIN)
    names = NameUniquifier(m)
    assert names.instruction("fusion") == "fusion"
    assert names.instruction("fusion") == "fusion.1"
    assert names.instruction("add.1") == "add.2"  # not add.1.1
    assert names.instruction("brand_new") == "brand_new"
    assert names.computation("fused_computation") == "fused_computation"
    assert names.computation("fused_computation") == "fused_computation.1"


def test_make_fusion_wraps_one_instruction():
    m = parse_hlo(CHAIN)
    original = copy_module(m)
    f = make_fusion(m.entry.instruction("exp.1"), "kLoop")
    assert f.name == "fusion" and f.opcode == "fusion" and f.fusion_kind == "kLoop"
    body = f.fused_computation
    assert body.name == "fused_computation" and body.module is m
    assert [p.name for p in body.parameters] == ["param_0"]
    assert body.root.opcode == "exponential"
    assert f.operands == [m.entry.instruction("add.1")]
    assert "exp.1" not in m.entry
    # callee printed before its caller; XLA's parser accepts it
    assert m.computations.index(body) < m.computations.index(m.entry)
    oracle.xla_parse(m.to_text())
    _same_outputs(original, m)


def test_fuse_duplicates_producer_and_removes_it_after_last_user():
    m = parse_hlo(CHAIN)
    original = copy_module(m)
    names = NameUniquifier(m)
    add = m.entry.instruction("add.1")
    f1 = fuse(add, m.entry.instruction("exp.1"), names=names)
    # add.1 still has another user (mul.1): kept
    assert "add.1" in m.entry and add.users == [m.entry.instruction("mul.1")]
    assert [o.name for o in f1.operands] == ["a", "b"]
    f2 = fuse(add, m.entry.instruction("mul.1"), names=names)
    assert "add.1" not in m.entry  # fused into every user: gone
    assert {o.name for o in f2.operands} == {f1.name, "a", "b"}
    # the producer was duplicated: one add in each fused computation
    adds = [i for c in (f1.fused_computation, f2.fused_computation) for i in c.instructions if i.opcode == "add"]
    assert len(adds) == 2
    # fusion into fusion: merge f1 (a fusion producer) into f2
    f3 = fuse(f1, f2, names=names)
    assert f3 is f2 and f1.computation is None
    assert f1.fused_computation not in m.computations
    assert sorted(o.name for o in f3.operands) == ["a", "b"]
    assert sorted(i.opcode for i in f3.fused_computation.instructions) == sorted(
        ["parameter", "parameter", "add", "add", "exponential", "multiply"]
    )
    assert all(p.parameter_number == i for i, p in enumerate(f3.fused_computation.parameters))
    oracle.xla_parse(m.to_text())
    _same_outputs(original, m)
    # and the inlined module prints back to the original's instruction count
    assert len(inline_fusions(m).entry.instructions) == 7


def test_hypothetical_fusion_leaves_module_untouched():
    m = parse_hlo(CHAIN)
    before = m.to_text()
    add = m.entry.instruction("add.1")
    exp = m.entry.instruction("exp.1")
    users_before = list(add.users)
    h = hypothetical_fusion(add, exp)
    assert m.to_text() == before
    assert add.users == users_before and all(h not in o.users for o in h.operands)
    assert h.opcode == "fusion" and h.fused_computation.module is None
    assert [o.name for o in h.operands] == ["a", "b"]
    assert sorted(i.opcode for i in h.fused_computation.instructions) == ["add", "exponential", "parameter", "parameter"]
    # the same as the in-place result
    names = NameUniquifier(m)
    f = fuse(add, exp, names=names)
    assert [o.name for o in f.operands] == [o.name for o in h.operands]
    assert sorted(i.opcode for i in f.fused_computation.instructions) == sorted(
        i.opcode for i in h.fused_computation.instructions
    )
    # hypothetical fusion of a fusion producer into a fusion consumer
    mul = make_fusion(m.entry.instruction("mul.1"), names=names)
    h2 = hypothetical_fusion(f, mul)
    # mul.1 reads add.1 directly (not fused into it) and f's body reads a, b
    assert sorted(o.name for o in h2.operands) == ["a", "add.1", "b"]
    ops = sorted(i.opcode for i in h2.fused_computation.instructions)
    assert ops == ["add", "exponential", "multiply", "parameter", "parameter", "parameter"]


def test_fusion_text_parses_with_called_reducer():
    text = (FIXTURES / "layernorm_softmax.pre.hlo").read_text()
    m = inline_calls(parse_hlo(text))
    original = copy_module(m)
    names = NameUniquifier(m)
    # fuse every producer of every reduce into it, and the reduce into its users
    for r in [i for i in m.entry.instructions if i.opcode == "reduce"]:
        for op in list(r.operands):
            if op.opcode not in ("parameter", "constant"):
                r = fuse(op, r, names=names) if r.computation is not None else r
    oracle.xla_parse(m.to_text())
    _same_outputs(original, m)


@pytest.mark.parametrize("name", ["elementwise", "layernorm_softmax", "mlp_grad", "while_loop", "cond_switch"])
def test_inline_calls_keeps_outputs(name):
    m = load_hlo(FIXTURES / f"{name}.pre.hlo")
    inlined = inline_calls(m)
    assert not any(i.opcode == "call" for _, i in inlined.instructions())
    oracle.xla_parse(inlined.to_text())
    _same_outputs(m, inlined)


def test_unfuse_as_calls():
    m = parse_hlo(CHAIN)
    original = copy_module(m)
    names = NameUniquifier(m)
    fuse(m.entry.instruction("exp.1"), m.entry.instruction("mul.1"), names=names)
    called = unfuse_for_execution(m, mode="call")
    assert any(i.opcode == "call" for _, i in called.instructions())
    args = random_arguments(original)
    np.testing.assert_allclose(
        run_on_cpu(called.to_text(), args)[0], run_on_cpu(original.to_text(), args)[0], rtol=1e-6
    )
    with pytest.raises(ValueError, match="unknown mode"):
        unfuse_for_execution(m, mode="nope")


def test_fusion_editor_batch_edits():
    from xla_costmodel.fusion_engine import FusionEditor

    m = parse_hlo(CHAIN)
    original = copy_module(m)
    ed = FusionEditor(m.entry)
    e = m.entry
    add, exp, mul = e.instruction("add.1"), e.instruction("exp.1"), e.instruction("mul.1")
    f1 = ed.fuse(add, exp, kind="kLoop")  # plain consumer: a new fusion in its place
    assert f1.name == "fusion" and f1.fused_computation.name == "fused_computation"
    assert ed.version.get(f1, 0) == 0
    assert [i.name for i in ed.instructions][:4] == ["a", "b", "add.1", "fusion"]
    f2 = ed.fuse(add, mul)
    ed.remove(add)
    f3 = ed.fuse(f1, f2)  # fusion consumer: grows in place, same object, new version
    assert f3 is f2 and ed.version[f2] == 1
    ed.remove(f1)
    ed.finish()
    assert [i.name for i in e.instructions] == ["a", "b", "fusion.1", "neg.1"]
    body = f2.fused_computation
    assert [p.parameter_number for p in body.parameters] == [0, 1]
    # clones remember the input instruction they copy (add.1 twice: once through f1)
    assert sorted(ed.origin[i] for i in body.instructions if i.opcode != "parameter") == [
        "add.1", "add.1", "exp.1", "mul.1"]
    assert body in m.computations and m.computations.index(body) < m.computations.index(e)
    assert f1.fused_computation not in m.computations
    oracle.xla_parse(m.to_text())
    _same_outputs(original, m)


def test_copy_module_is_deep_and_keeps_text():
    m = load_hlo(FIXTURES / "while_loop.pre.hlo")
    c = copy_module(m)
    assert c.to_text() == m.to_text()
    assert all(a is not b for (_, a), (_, b) in zip(m.instructions(), c.instructions()))
    for comp in c.computations:
        for i in comp.instructions:
            assert all(callee.module is c for callee in i.called_computations)
            assert all(o.computation is comp for o in i.operands)
    assert copy_module(m, via_text=True).to_text() == m.to_text()
