"""Every legality rule of XLA's priority fusion (`CanFuse`, all-consumers-or-none), one small graph each.

The expectations are XLA's own rules (priority_fusion.cc, gpu_fusible.cc,
instruction_fusion.cc) applied by hand to each graph; the graphs are checked
by XLA's parser so they are valid HLO.
"""

from __future__ import annotations

from xla_costmodel import _jaxlib_oracle as oracle
from xla_costmodel import simulate_fusion
from xla_costmodel.devices import get_device
from xla_costmodel.fusion import RULES, LegalityChecker, emitter_kind
from xla_costmodel.fusion._budget import ir_size, shared_memory_usage, unnested_reductions
from xla_costmodel.hlo import parse_hlo

from test_fusion_toy import ToyModel

ADD = """add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""


def _module(body: str, regions: str = ""):
    text = f"HloModule m\n\n{regions}\nENTRY e {{\n{body}\n}}\n"
    oracle.xla_parse(text)
    return parse_hlo(text)


def _rule(m, producer, consumer, checker=None):
    e = m.entry
    r = (checker or LegalityChecker()).can_fuse(e.instruction(producer), e.instruction(consumer))
    return None if r is None else r.rule


def _rejected(m, **kw):
    kw.setdefault("multi_output", False)  # CanFuse's rules: priority fusion alone
    kw.setdefault("cse", False)  # the modules are written to show one rule each: nothing is dead or repeated
    # nor simplified: XLA's DotMerger would merge two dots sharing an operand into one reading a concatenate
    kw.setdefault("simplify", False)
    r = simulate_fusion(m, device=kw.pop("device", get_device("h100-sxm")), model=ToyModel(), **kw)
    return dict(zip(r.rejected["producer"], r.rejected["rule"])), r


def test_rule_names_are_documented():
    for rule in ("root", "producer-not-fusible", "consumer-not-fusible", "bitcast-consumer", "scatter-output",
                 "scatter-in-place-operand", "scatter-in-place-reader", "reduce-into-reduce", "reduction-epilogue",
                 "shared-memory", "unnested-reductions", "operand-limit", "code-size", "in-place",
                 "negative-priority"):
        assert rule in RULES


def test_never_fuse_the_root():
    # A root need not be last: b reads it.
    m = _module("""  p0 = f32[8]{0} parameter(0)
  ROOT a = f32[8]{0} add(p0, p0)
  b = f32[8]{0} negate(a)""")
    assert _rule(m, "a", "b") == "root"
    rejected, _ = _rejected(m)
    assert rejected["a"] == "root"


def test_unfusible_producer_and_consumer():
    m = _module("""  p0 = f32[8,8]{1,0} parameter(0)
  d = f32[8,8]{1,0} dot(p0, p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  e1 = f32[8,8]{1,0} exponential(d)
  e2 = f32[8,8]{1,0} exponential(p0)
  d2 = f32[8,8]{1,0} dot(e2, p0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  a = f32[8,8]{1,0} add(e2, p0)
  ROOT t = (f32[8,8]{1,0}, f32[8,8]{1,0}, f32[8,8]{1,0}) tuple(e1, d2, a)""")
    assert _rule(m, "d", "e1") == "producer-not-fusible"
    assert _rule(m, "e2", "d2") == "consumer-not-fusible"
    assert _rule(m, "e2", "a") is None
    # all consumers or none: e2 could go into a, but not into the dot, so it stays
    rejected, r = _rejected(m)
    assert rejected["e2"] == "consumer-not-fusible"
    assert "e2" not in set(r.steps.producer)
    assert "e2" in r.module.entry


def test_never_into_a_lone_bitcast():
    m = _module("""  p0 = f32[256]{0} parameter(0)
  e1 = f32[256]{0} exponential(p0)
  ROOT bc = f32[16,16]{1,0} bitcast(e1)""")
    assert _rule(m, "e1", "bc") == "bitcast-consumer"
    rejected, r = _rejected(m)
    assert rejected["e1"] == "only-bitcast-users" and r.steps.empty


SCATTER = """  p0 = f32[8,4]{1,0} parameter(0)
  idx = s32[2,1]{1,0} parameter(1)
  upd = f32[2,4]{1,0} parameter(2)
  buf = f32[8,4]{1,0} negate(p0)
  sl = f32[2,4]{1,0} slice(p0), slice={[0:2], [0:4]}
  sc = f32[8,4]{1,0} scatter(buf, idx, upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32
  sc2 = f32[8,4]{1,0} scatter(p0, idx, sl), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32
  out = f32[8,4]{1,0} exponential(sc)
  ROOT t = (f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(out, sc2)"""


def test_scatter_rules():
    m = _module(SCATTER, ADD)
    assert _rule(m, "buf", "sc") == "scatter-in-place-operand"
    assert _rule(m, "sl", "sc2") == "scatter-in-place-reader"
    assert _rule(m, "sc", "out") == "scatter-output"
    rejected, r = _rejected(m)
    assert rejected["buf"] == "scatter-in-place-operand" and rejected["sc"] == "scatter-output"
    # the scatter's combiner is never fused into
    assert len(r.module.computation("add_f32").instructions) == 3


def test_no_reduce_into_reduce():
    m = _module("""  p0 = f32[64,64]{1,0} parameter(0)
  c0 = f32[] constant(0)
  r1 = f32[64]{0} reduce(p0, c0), dimensions={1}, to_apply=add_f32
  ROOT r2 = f32[] reduce(r1, c0), dimensions={0}, to_apply=add_f32""", ADD)
    assert _rule(m, "r1", "r2") == "reduce-into-reduce"
    # a small reduce (fewer than 16 inputs per output) does not count
    small = _module("""  p0 = f32[64,8]{1,0} parameter(0)
  c0 = f32[] constant(0)
  r1 = f32[64]{0} reduce(p0, c0), dimensions={1}, to_apply=add_f32
  ROOT r2 = f32[] reduce(r1, c0), dimensions={0}, to_apply=add_f32""", ADD)
    assert _rule(small, "r1", "r2") != "reduce-into-reduce"


def test_no_epilogue_that_turns_a_reduction_into_a_loop():
    m = _module("""  p0 = f32[64,64]{1,0} parameter(0)
  p1 = f32[64]{0} parameter(1)
  c0 = f32[] constant(0)
  r = f32[64]{0} reduce(p0, c0), dimensions={1}, to_apply=add_f32
  a = f32[64]{0} add(r, p1)
  n = f32[64]{0} negate(r)
  ROOT t = (f32[64]{0}, f32[64]{0}) tuple(a, n)""", ADD)
    e = m.entry
    assert emitter_kind(e.instruction("r")) == "reduction"
    assert _rule(m, "r", "a") == "reduction-epilogue"  # add(reduce, p1): the loop emitter
    assert _rule(m, "r", "n") is None  # a unary epilogue keeps the reduction emitter
    rejected, r = _rejected(m)
    # so r goes into neither (at the end its scalar init constant is fused into it)
    assert "r" not in set(r.steps.producer)
    assert list(rejected.values()).count("reduction-epilogue") == 1


def test_verdicts_shared_by_content_name_their_own_pair():
    """Two pairs of equal content (a repeated layer) get one rule evaluation, but each
    rejection names its own instructions, as a fresh check would."""
    from xla_costmodel.hlo._structure import ContentIds

    m = _module("""  p0 = f32[64,64]{1,0} parameter(0)
  p1 = f32[64]{0} parameter(1)
  c0 = f32[] constant(0)
  r = f32[64]{0} reduce(p0, c0), dimensions={1}, to_apply=add_f32
  a = f32[64]{0} add(r, p1)
  r2 = f32[64]{0} reduce(p0, c0), dimensions={1}, to_apply=add_f32
  a2 = f32[64]{0} add(r2, p1)
  ROOT t = (f32[64]{0}, f32[64]{0}) tuple(a, a2)""", ADD)
    e = m.entry
    shared = LegalityChecker(content=ContentIds())
    calls = []
    rules = shared._content_rules
    shared._content_rules = lambda p, c: calls.append((p.name, c.name)) or rules(p, c)
    first = shared.can_fuse(e.instruction("r"), e.instruction("a"))
    second = shared.can_fuse(e.instruction("r2"), e.instruction("a2"))
    fresh = LegalityChecker().can_fuse(e.instruction("r2"), e.instruction("a2"))
    assert calls == [("r", "a")]  # the second pair's verdict came from the first's content
    assert first.rule == second.rule == fresh.rule == "reduction-epilogue"
    assert second.detail == fresh.detail == "'a2' after reduction 'r2'"
    assert first.detail == "'a' after reduction 'r'"


def test_shared_memory_budget():
    m = _module("""  p0 = f32[64,64]{1,0} parameter(0)
  t = f32[64,64]{1,0} transpose(p0), dimensions={1,0}
  c0 = f32[] constant(0)
  ROOT r = f32[64]{0} reduce(t, c0), dimensions={1}, to_apply=add_f32""", ADD)
    e = m.entry
    # a 32x33 f32 tile for the transpose, 32 floats for the row reduction
    assert shared_memory_usage(e.instruction("t")) == 32 * 33 * 4
    assert shared_memory_usage(e.instruction("r")) == 32 * 4
    assert _rule(m, "t", "r", LegalityChecker(shared_memory_per_block=4096)) == "shared-memory"
    assert _rule(m, "t", "r", LegalityChecker(shared_memory_per_block=48 * 1024)) is None
    small = get_device("h100-sxm").replace(shared_memory_per_block_bytes=4096)
    rejected, _ = _rejected(m, device=small)
    assert rejected["t"] == "shared-memory"


def _reduces(n: int, src: str, prefix: str) -> tuple[str, str]:
    """n small tiled row reductions of variants of `src`, summed: (body lines, name of the sum)."""
    ops = ["negate", "abs", "exponential", "sine", "cosine", "tanh"]
    lines, names = [], []
    for i in range(n):
        lines.append(f"  {prefix}v{i} = f32[64,8]{{1,0}} {ops[i % len(ops)]}({src})")
        lines.append(f"  {prefix}r{i} = f32[64]{{0}} reduce({prefix}v{i}, {prefix}z), dimensions={{1}}, to_apply=add_f32")
        names.append(f"{prefix}r{i}")
    acc = names[0]
    for i, nm in enumerate(names[1:]):
        lines.append(f"  {prefix}s{i} = f32[64]{{0}} add({acc}, {nm})")
        acc = f"{prefix}s{i}"
    return "\n".join(lines), acc


def test_at_most_eight_unnested_reductions():
    pb, proot = _reduces(5, "q0", "a")
    cb, croot = _reduces(4, "q0", "b")
    regions = ADD + f"""
fp {{
  q0 = f32[64,8]{{1,0}} parameter(0)
  az = f32[] constant(0)
{pb}
  ROOT pr = f32[64]{{0}} negate({proot})
}}

fc {{
  q0 = f32[64,8]{{1,0}} parameter(0)
  q1 = f32[64]{{0}} parameter(1)
  bz = f32[] constant(0)
{cb}
  ROOT cr = f32[64]{{0}} add({croot}, q1)
}}
"""
    m = _module("""  p0 = f32[64,8]{1,0} parameter(0)
  prod = f32[64]{0} fusion(p0), kind=kLoop, calls=fp
  ROOT cons = f32[64]{0} fusion(p0, prod), kind=kLoop, calls=fc""", regions)
    e = m.entry
    # 8 elements per row: tiled (32 % 8 == 0) but not "significant" (< 16), so rule 6 lets them through
    assert unnested_reductions(e.instruction("prod")) == 5 and unnested_reductions(e.instruction("cons")) == 4
    assert _rule(m, "prod", "cons") == "unnested-reductions"


def test_operand_and_output_limit():
    params = "\n".join(f"  p{i} = f32[1]{{0}} parameter({i})" for i in range(100))
    prod_ops = ", ".join(f"p{i}" for i in range(40))
    cons_ops = ", ".join(f"p{i}" for i in range(40, 100))
    m = _module(f"""{params}
  prod = f32[40]{{0}} concatenate({prod_ops}), dimensions={{0}}
  ROOT cons = f32[100]{{0}} concatenate({cons_ops}, prod), dimensions={{0}}""")
    # 61 + 40 - 1 + 2 outputs > 96, and the union (100 operands) exceeds the consumer's own 61
    assert _rule(m, "prod", "cons") == "operand-limit"
    # sharing operands keeps the union within the consumer's count: allowed
    m2 = _module(f"""{params}
  prod = f32[40]{{0}} concatenate({prod_ops}), dimensions={{0}}
  ROOT cons = f32[140]{{0}} concatenate({", ".join(f"p{i}" for i in range(100))}, prod), dimensions={{0}}""")
    assert _rule(m2, "prod", "cons") is None


def test_code_size_limit():
    # Each level uses the previous value once elementwise and once through a
    # reverse: the consumer's parameter is emitted 2^14 times.
    lines = ["  x0 = f32[8]{0} parameter(0)"]
    for k in range(1, 15):
        lines.append(f"  r{k} = f32[8]{{0}} reverse(x{k - 1}), dimensions={{0}}")
        lines.append(f"  x{k} = f32[8]{{0}} add(r{k}, x{k - 1})")
    body = "\n".join(lines).replace("  x14 =", "  ROOT x14 =")
    regions = f"fc {{\n{body}\n}}\n"
    m = _module("""  p0 = f32[8]{0} parameter(0)
  e1 = f32[8]{0} exponential(p0)
  ROOT c = f32[8]{0} fusion(e1), kind=kLoop, calls=fc""", regions)
    size = ir_size(m.entry.instruction("c"))
    assert size.param_size == (2 ** 14,)
    assert _rule(m, "e1", "c") == "code-size"


IN_PLACE = """  p0 = f32[8]{0} parameter(0)
  u = f32[2]{0} parameter(1)
  j = s32[] parameter(2)
  i0 = s32[] constant(0)
  i2 = s32[] constant(2)
  one = f32[] constant(1)
  b = f32[8]{0} broadcast(one), dimensions={}
  sl = f32[2]{0} slice(p0), slice={[0:2]}
  d1 = f32[8]{0} dynamic-update-slice(p0, sl, i0)
  d2 = f32[8]{0} dynamic-update-slice(p0, sl, i2)
  d3 = f32[8]{0} dynamic-update-slice(b, u, i0)
  n = f32[8]{0} negate(p0)
  d4 = f32[8]{0} dynamic-update-slice(n, u, i0)
  k = s32[] negate(j)
  d5 = f32[8]{0} dynamic-update-slice(p0, p0, k)
  ROOT t = (f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}, f32[8]{0}) tuple(d1, d2, d3, d4, d5)"""


def test_in_place_safety():
    m = _module(IN_PLACE)
    assert _rule(m, "sl", "d1") is None  # slice at the same constant offset as the update: safe
    assert _rule(m, "sl", "d2") == "in-place"  # offsets differ
    assert _rule(m, "b", "d3") == "in-place"  # a broadcast as the updated buffer: not a slice pair
    assert _rule(m, "n", "d4") is None  # elementwise producer of the buffer: safe
    assert _rule(m, "k", "d5") == "in-place"  # the buffer is read through another operand too


def test_emitter_kinds():
    m = _module("""  p0 = f32[64,64]{1,0} parameter(0)
  p1 = f32[4,4]{1,0} parameter(1)
  c0 = f32[] constant(0)
  t = f32[64,64]{1,0} transpose(p0), dimensions={1,0}
  t2 = f32[4,4]{1,0} transpose(p1), dimensions={1,0}
  col = f32[64]{0} reduce(p0, c0), dimensions={0}, to_apply=add_f32
  row = f32[64]{0} reduce(p0, c0), dimensions={1}, to_apply=add_f32
  r8 = f32[] reduce(col, c0), dimensions={0}, to_apply=add_f32
  cc = f32[128,64]{1,0} concatenate(p0, p0), dimensions={0}
  ROOT tt = (f32[64,64]{1,0}, f32[4,4]{1,0}, f32[64]{0}, f32[64]{0}, f32[], f32[128,64]{1,0}) tuple(t, t2, col, row, r8, cc)""", ADD)
    e = m.entry
    kinds = {n: emitter_kind(e.instruction(n)) for n in ("t", "t2", "col", "row", "r8", "cc")}
    assert kinds == {"t": "transpose", "t2": "loop", "col": "reduction", "row": "reduction",
                     "r8": "reduction", "cc": "concatenate"}


def test_epilogue_rule_without_building_the_fusion_agrees():
    """The in-place walk behind rule 7 gives the emitter kind of the actually built fusion."""
    from xla_costmodel.fusion._budget import kernel_facts
    from xla_costmodel.fusion._legality import fused_emitter_is_loop
    from xla_costmodel.hlo import load_hlo
    from xla_costmodel.fusion_engine import hypothetical_fusion

    from conftest import FIXTURES

    checked = 0
    for name in ("layernorm_softmax", "reductions", "transformer_grad"):
        m = load_hlo(FIXTURES / f"{name}.pre.hlo")
        r = simulate_fusion(m, model=ToyModel(), price_totals=False)
        for module in (m, r.module):
            for p in module.entry.instructions:
                if p.opcode == "parameter" or emitter_kind(p) != "reduction":
                    continue
                for c in p.users:
                    if c.opcode == "tuple":
                        continue
                    walk = fused_emitter_is_loop(p, c, kernel_facts(p) + kernel_facts(c))
                    if walk is None:
                        continue
                    assert walk == (emitter_kind(hypothetical_fusion(p, c)) == "loop"), (name, p.name, c.name)
                    checked += 1
    assert checked >= 20


def test_every_elementwise_opcode_is_fusible_as_xla_spells_it():
    # 4.3: the pass fuses "any elementwise op" (`HloInstruction::IsElementwise`). The pass used to keep
    # its own list, which spelled count-leading-zeros "clz" (no HLO opcode: XLA prints kClz as
    # count-leading-zeros) and lacked acos, acosh, asin, asinh, atanh, cosh and sinh, so it left them
    # unfused ("producer-not-fusible"). XLA's parser checks the spellings.
    from xla_costmodel.fusion._legality import is_fusible

    unary = ("acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh")
    lines = ["  p0 = f32[64]{0} parameter(0)", "  i0 = s32[64]{0} parameter(1)"]
    lines += [f"  {op.replace('-', '_')} = f32[64]{{0}} {op}(p0)" for op in unary]
    lines.append("  clz = s32[64]{0} count-leading-zeros(i0)")
    lines.append("  c = f32[64]{0} convert(clz)")
    acc = "c"
    for op in unary:
        lines.append(f"  s_{op} = f32[64]{{0}} add({acc}, {op})")
        acc = f"s_{op}"
    lines.append(f"  ROOT r = f32[64]{{0}} negate({acc})")
    m = _module("\n".join(lines))
    for op in (*unary, "clz"):
        assert is_fusible(m.entry.instruction(op)), op
    rejected, result = _rejected(m)
    assert not any(rule == "producer-not-fusible" for rule in rejected.values()), rejected
    kernels = [i for i in result.module.entry.instructions if i.opcode not in ("parameter", "tuple")]
    assert [k.opcode for k in kernels] == ["fusion"]
