"""Fused bodies kept as recipes (`xla_costmodel.hlo._deferred`) until read.

References: the eager `fuse` (which builds every body at once) for what a body
holds, XLA's parser for the finished module, and jaxlib's CPU client for what
it computes.
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from xla_costmodel import _jaxlib_oracle as oracle  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from xla_costmodel.hlo._deferred import is_deferred, root_opcode  # noqa: E402
from xla_costmodel.hlo._edit import NameUniquifier, copy_module  # noqa: E402
from xla_costmodel.fusion_engine import FusionEditor, fuse  # noqa: E402
from xla_costmodel.hlo._structure import ContentIds  # noqa: E402

from test_hlo_edit import _same_outputs  # noqa: E402

# `t` feeds three users (so it is duplicated), `r` is a reduce (a kInput root), `s` is kept by a bitcast user.
GRAPH = """HloModule g, entry_computation_layout={(f32[8,16]{1,0}, f32[8,16]{1,0})->(f32[8]{0}, f32[8,16]{1,0}, f32[128]{0})}

add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT sum = f32[] add(x, y)
}

ENTRY main {
  a = f32[8,16]{1,0} parameter(0)
  b = f32[8,16]{1,0} parameter(1)
  t = f32[8,16]{1,0} multiply(a, b)
  u = f32[8,16]{1,0} exponential(t)
  v = f32[8,16]{1,0} add(t, u)
  w = f32[8,16]{1,0} subtract(v, t)
  z = f32[] constant(0)
  r = f32[8]{0} reduce(w, z), dimensions={1}, to_apply=add_f32
  s = f32[8,16]{1,0} negate(w)
  c = f32[128]{0} bitcast(s)
  k = f32[8,16]{1,0} tanh(s)
  ROOT out = (f32[8]{0}, f32[8,16]{1,0}, f32[128]{0}) tuple(r, k, c)
}
"""

# (producer, consumer) in order; after each step the named fusion stands for the consumer.
PLAN = [("u", "v"), ("t", "fusion"), ("t", "w"), ("fusion", "fusion.1"), ("fusion.1", "r"), ("s", "k")]


def _run(plan, read_midway: bool):
    m = parse_hlo(GRAPH)
    names = NameUniquifier(m)
    ed = FusionEditor(m.entry, names)
    e = m.entry
    live = {i.name: i for i in e.instructions}
    for producer, consumer in plan:
        p, c = live[producer], live[consumer]
        fusion = ed.fuse(p, c, kind="kLoop")
        if fusion is not c:  # a new fusion took the consumer's place
            del live[consumer]
        live[fusion.name] = fusion
        if read_midway:
            assert fusion.fused_computation.instructions  # builds it now
        if not p.users and p is not e.root:
            ed.remove(p)
            live.pop(producer)
    ed.finish()
    return m, ed


def test_bodies_are_built_when_read_and_equal_what_eager_fusing_builds():
    m = parse_hlo(GRAPH)
    ed = FusionEditor(m.entry)
    t, u, v = (m.entry.instruction(n) for n in ("t", "u", "v"))
    f = ed.fuse(u, v, kind="kLoop")
    f = ed.fuse(t, f)
    body = f.fused_computation
    assert is_deferred(body)
    assert root_opcode(body) == "add"  # told without building
    assert is_deferred(body)
    assert [o.name for o in f.operands] == ["a", "b"]  # the consumer's less `t`, then `t`'s
    assert [i.opcode for i in body.instructions] == ["parameter"] * 2 + ["multiply", "exponential", "add"]
    assert not is_deferred(body)

    eager = parse_hlo(GRAPH)
    names = NameUniquifier(eager)
    t2, u2, v2 = (eager.entry.instruction(n) for n in ("t", "u", "v"))
    g = fuse(u2, v2, "kLoop", names=names, remove_producer=False)
    g = fuse(t2, g, "kLoop", names=names, remove_producer=False)
    ids = ContentIds()
    assert ids.kernel(f) == ids.kernel(g)


def test_finished_module_does_not_depend_on_when_bodies_were_built():
    lazy, ed = _run(PLAN, read_midway=False)
    eager, _ = _run(PLAN, read_midway=True)
    assert lazy.to_text() == eager.to_text()
    oracle.xla_parse(lazy.to_text())
    _same_outputs(parse_hlo(GRAPH), lazy)
    # Each clone is named after the instruction it copies (taken names get the next free suffix).
    names = [i.name for c in lazy.computations if c.name.startswith("fused_computation") for i in c.instructions]
    assert len(names) == len(set(names))
    assert {"u", "v", "w", "r", "k"} <= set(names)
    assert not any(is_deferred(c) for c in lazy.computations)


def test_a_kernel_that_absorbs_thousands_of_producers_builds_without_recursion():
    n = 1500  # deeper than Python's recursion limit
    lines = ["  x0 = f32[4]{0} parameter(0)"]
    lines += [f"  x{i} = f32[4]{{0}} negate(x{i - 1})" for i in range(1, n)]
    text = ("HloModule chain, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\nENTRY main {\n"
            + "\n".join(lines[:-1]) + f"\n  ROOT{lines[-1][1:]}\n}}\n")
    m = parse_hlo(text)
    original = copy_module(m)
    ed = FusionEditor(m.entry)
    consumer = m.entry.root
    for i in range(n - 2, 0, -1):
        producer = m.entry.instruction(f"x{i}")
        consumer = ed.fuse(producer, consumer, kind="kLoop")
        ed.remove(producer)
    assert is_deferred(consumer.fused_computation)
    ed.finish()
    body = consumer.fused_computation
    assert len(body.instructions) == n  # one parameter and n - 1 negates
    assert body.root.name == f"x{n - 1}"
    _same_outputs(original, m)


def test_removing_a_fusion_whose_recipe_was_taken_leaves_the_taker_intact():
    m = parse_hlo(GRAPH)
    ed = FusionEditor(m.entry)
    e = m.entry
    u, v, w = (e.instruction(n) for n in ("u", "v", "w"))
    f = ed.fuse(u, v, kind="kLoop")
    assert f.fused_computation.instructions  # built: it is then copied, not shared, by the taker
    g = ed.fuse(f, w, kind="kLoop")
    ed.remove(f)
    ed.finish()
    assert sorted(i.opcode for i in g.fused_computation.instructions if i.opcode != "parameter") == [
        "add", "exponential", "subtract"]
    oracle.xla_parse(m.to_text())
    _same_outputs(parse_hlo(GRAPH), m)
