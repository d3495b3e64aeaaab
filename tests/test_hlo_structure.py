"""Content ids (`xla_costmodel.hlo._structure.ContentIds`): equal exactly when a cost model cannot tell kernels apart."""

from __future__ import annotations

from xla_costmodel.hlo import parse_hlo
from xla_costmodel.fusion_engine import FusionEditor
from xla_costmodel.hlo._structure import ContentIds

TWINS = """
HloModule twins

ENTRY main {
  a = f32[8,16]{1,0} parameter(0)
  b = f32[8,16]{1,0} parameter(1)
  c = f32[8,16]{0,1} parameter(2)
  x1 = f32[8,16]{1,0} add(a, b), metadata={op_name="layer0/add"}
  x2 = f32[8,16]{1,0} add(b, a), metadata={op_name="layer1/add"}
  x3 = f32[8,16]{1,0} add(a, a)
  x4 = f32[8,16]{1,0} add(a, c)
  x5 = f32[8,16]{1,0} multiply(a, b)
  e1 = f32[8,16]{1,0} exponential(x1)
  e2 = f32[8,16]{1,0} exponential(x2)
  e5 = f32[8,16]{1,0} exponential(x5)
  r1 = f32[8,16]{1,0} add(e1, e2)
  r2 = f32[8,16]{1,0} add(r1, e5)
  r3 = f32[8,16]{1,0} add(r2, x3)
  ROOT r4 = f32[8,16]{1,0} add(r3, x4)
}
"""


def _ids():
    m = parse_hlo(TWINS)
    comp = m.entry
    return m, comp, ContentIds()


def test_names_and_metadata_do_not_count():
    _, comp, ids = _ids()
    i = comp.instruction
    assert ids.kernel(i("x1")) == ids.kernel(i("x2"))  # other names, other operands, other metadata
    assert ids.kernel(i("e1")) == ids.kernel(i("e2"))


def test_opcode_operand_sharing_and_layout_count():
    _, comp, ids = _ids()
    i = comp.instruction
    k = ids.kernel
    assert k(i("x1")) != k(i("x5"))  # opcode
    assert k(i("x1")) != k(i("x3"))  # add(a, b) reads two buffers, add(a, a) one
    assert k(i("x1")) != k(i("x4"))  # an operand with another layout


def test_pair_keys_follow_the_wiring():
    _, comp, ids = _ids()
    i = comp.instruction
    assert ids.pair(i("x1"), i("e1")) == ids.pair(i("x2"), i("e2"))
    assert ids.pair(i("x1"), i("e1")) != ids.pair(i("x5"), i("e5"))
    # the same producer read once vs a different operand structure on the consumer side
    assert ids.pair(i("e1"), i("r1")) != ids.pair(i("e5"), i("r2"))


def test_fusions_of_equal_pairs_get_equal_ids_walked_or_derived():
    m, comp, _ = _ids()
    ed = FusionEditor(comp)
    walked, derived = ContentIds(), ContentIds()
    i = comp.instruction
    x1, e1, x2, e2 = i("x1"), i("e1"), i("x2"), i("e2")
    k1, k2 = derived.pair(x1, e1), derived.pair(x2, e2)
    f1 = ed.fuse(x1, e1)
    f2 = ed.fuse(x2, e2)
    derived.record_fused(f1, k1)
    derived.record_fused(f2, k2)
    assert walked.kernel(f1) == walked.kernel(f2)
    assert derived.kernel(f1) == derived.kernel(f2)
    assert walked.kernel(f1) != walked.kernel(i("e5"))


def test_a_fusion_grown_in_place_needs_forget():
    _, comp, ids = _ids()
    ed = FusionEditor(comp)
    i = comp.instruction
    g = ed.fuse(i("e1"), i("r1"))
    before = ids.kernel(g)
    assert ed.fuse(i("e2"), g) is g  # grows in place
    assert ids.kernel(g) == before  # memoized: stale until told
    ids.forget(g)
    assert ids.kernel(g) != before
