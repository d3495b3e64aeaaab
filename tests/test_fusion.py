"""Priority fusion (`simulate_fusion`): order, priorities and bookkeeping on small graphs worked by hand.

Every number below is worked out by hand with the toy model of
`test_fusion_toy.py` (1 us launch per kernel, 1 ns per byte read or written,
optionally w ns per element per operation): f32[256] is 1024 bytes, so a
lone unary op on f32[256] costs 1000 + 1024 + 1024 = 3048 ns.
"""

from __future__ import annotations

import math

import pytest

from xla_costmodel import FusionResult, simulate_fusion
from xla_costmodel.devices import get_device
from xla_costmodel.fusion import compare_with_xla, fusible_computations
from xla_costmodel.fusion._priority import quantize_priority
from xla_costmodel.hlo import load_hlo, parse_hlo

from conftest import FIXTURES
from test_fusion_toy import ToyModel

NS = 1e-9
DEVICE = get_device("h100-sxm")


def _sim(text, model=None, **kw):
    kw.setdefault("multi_output", False)  # priority fusion alone (multi-output fusion: test_multi_output_fusion.py)
    return simulate_fusion(parse_hlo(text), device=DEVICE, model=model or ToyModel(), **kw)


DUPLICATE = """HloModule dup
ENTRY e {
  p0 = f32[256]{0} parameter(0)
  p1 = f32[256]{0} parameter(1)
  s = f32[256]{0} sine(p0)
  m = f32[256]{0} multiply(s, p1)
  a = f32[256]{0} add(s, p1)
  ROOT t = (f32[256]{0}, f32[256]{0}) tuple(m, a)
}
"""


def test_producer_is_duplicated_into_all_consumers():
    # T(s) = 3048; T(m) = T(a) = 1000 + 2048 + 1024 = 4072; fused (p0, p1 -> 1024) = 4072 each.
    # priority(s) = 3048 + 2*4072 - 2*4072 = 3048 ns (its launch and its write+read saved).
    r = _sim(DUPLICATE)
    assert len(r.steps) == 1
    step = r.steps.iloc[0]
    assert step.producer == "s" and step.consumers == "m, a"
    assert step.priority_s == pytest.approx(3048 * NS)
    assert step.time_unfused_s == pytest.approx((3048 + 2 * 4072) * NS)
    assert step.time_fused_s == pytest.approx(2 * 4072 * NS)
    assert "duplicated" in step.reason
    entry = r.module.entry
    fusions = [i for i in entry.instructions if i.opcode == "fusion"]
    assert [f.name for f in fusions] == ["fusion", "fusion.1"]
    assert all(sum(i.opcode == "sine" for i in f.fused_computation.instructions) == 1 for f in fusions)
    assert "s" not in entry  # fused into every user: gone
    # the tuple root is not fusible: both fusions stay, blocked by the consumer rule
    assert set(r.rejected["rule"]) == {"consumer-not-fusible"}
    assert r.kernels_before == 3 and r.kernels_after == 2
    assert r.time_before_s == pytest.approx((3048 + 2 * 4072) * NS)
    assert r.time_after_s == pytest.approx(2 * 4072 * NS)


BROADCAST_USERS = """HloModule neg
ENTRY e {
  p0 = f32[256]{0} parameter(0)
  p1 = f32[256]{0} parameter(1)
  e1 = f32[256]{0} exponential(p0)
  x1 = f32[256]{0} add(e1, p1)
  x2 = f32[256]{0} multiply(e1, p1)
  x3 = f32[256]{0} subtract(e1, p1)
  ROOT t = (f32[256]{0}, f32[256]{0}, f32[256]{0}) tuple(x1, x2, x3)
}
"""


def test_negative_priority_is_not_fused():
    # w = 10 ns per element-op (2560 ns per op on 256 elements):
    # T(e1) = 1000 + 2048 + 2560 = 5608; T(xi) = 1000 + 3072 + 2560 = 6632;
    # fused = 1000 + 3072 + 2*2560 = 9192; priority = 5608 + 3*6632 - 3*9192 = -2072 ns.
    r = _sim(BROADCAST_USERS, ToyModel(ns_per_element_op=10))
    assert r.steps.empty
    rej = r.rejected.set_index("producer")
    assert rej.loc["e1", "rule"] == "negative-priority"
    # w = 1: T(e1) = 3304; T(xi) = 4328; fused = 4584; priority = 3304 + 3*4328 - 3*4584 = 2536 ns.
    r = _sim(BROADCAST_USERS, ToyModel(ns_per_element_op=1))
    assert list(r.steps.producer) == ["e1"]
    assert r.steps.iloc[0].priority_s == pytest.approx(2536 * NS)
    assert r.steps.iloc[0].consumers == "x1, x2, x3"


ORDER = """HloModule order
ENTRY e {
  p0 = f32[256]{0} parameter(0)
  p1 = f32[1024]{0} parameter(1)
  a = f32[256]{0} negate(p0)
  b = f32[256]{0} abs(a)
  q = f32[1024]{0} negate(p1)
  r = f32[1024]{0} abs(q)
  ROOT t = (f32[256]{0}, f32[1024]{0}) tuple(b, r)
}
"""


@pytest.mark.parametrize("incremental", [True, False])
def test_highest_priority_first_and_only_neighbours_repriced(incremental):
    # priority(a) = 3048 ns; priority(q) = 1000 + 4096 + 4096 = 9192 ns: q goes first.
    model = ToyModel()
    r = _sim(ORDER, model, incremental=incremental)
    assert list(r.steps.producer) == ["q", "a"]
    assert list(r.steps.priority_s) == pytest.approx([9192 * NS, 3048 * NS])
    # a and q were priced once each at the start; fusing q re-prices only the
    # new fusion (root-bound, so no model call) and its operand p1 (a parameter):
    # a is never priced again.
    assert [c[0] for c in model.calls] == ["a", "q"]


TIE = """HloModule tie
ENTRY e {
  p0 = f32[256]{0} parameter(0)
  p1 = f32[256]{0} parameter(1)
  a = f32[256]{0} negate(p0)
  b = f32[256]{0} negate(p1)
  ra = f32[256]{0} abs(a)
  rb = f32[256]{0} abs(b)
  ROOT t = (f32[256]{0}, f32[256]{0}) tuple(ra, rb)
}
"""


def test_ties_go_to_the_larger_unique_id():
    # a and b both have priority 3048 ns; b comes later in the module, so its id is larger.
    r = _sim(TIE)
    assert list(r.steps.producer) == ["b", "a"]
    assert r.steps.priority_s[0] == r.steps.priority_s[1]


REPRIORITIZE = """HloModule rep
ENTRY e {
  p0 = f32[256]{0} parameter(0)
  x = f32[256]{0} exponential(p0)
  y = f32[256]{0} negate(x)
  ROOT z = f32[256]{0} add(x, y)
}
"""


@pytest.mark.parametrize("incremental", [True, False])
def test_operand_of_a_new_fusion_is_repriced(incremental):
    # priority(y) = T(y) + T(z) - T(y->z) = 3048 + 4072 - 3048 = 4072 ns
    #   (the fused y+z reads x once: 1000 + 1024 + 1024);
    # priority(x) = 3048 + (3048 + 4072) - (3048 + 4072) = 3048 ns.
    # y goes first; x is then an operand of the new fusion F (its only user):
    # priority(x) = 3048 + T(F) - T(x->F) = 3048 + 3048 - 3048 = 3048 ns.
    r = _sim(REPRIORITIZE, incremental=incremental)
    assert list(r.steps.producer) == ["y", "x"]
    assert list(r.steps.priority_s) == pytest.approx([4072 * NS, 3048 * NS])
    assert list(r.steps.time_unfused_s) == pytest.approx([7120 * NS, 6096 * NS])
    assert list(r.steps.time_fused_s) == pytest.approx([3048 * NS, 3048 * NS])
    root = r.module.entry.root
    assert root.opcode == "fusion" and root.name == "fusion" and root.fusion_kind == "kLoop"
    assert sorted(i.opcode for i in root.fused_computation.instructions) == ["add", "exponential", "negate", "parameter"]
    assert r.time_before_s == pytest.approx((3048 + 3048 + 4072) * NS)
    assert r.time_after_s == pytest.approx(3048 * NS)
    assert r.kernels_after == 1


BITCAST = """HloModule bc
ENTRY e {
  p0 = f32[256]{0} parameter(0)
  e1 = f32[256]{0} exponential(p0)
  bc = f32[16,16]{1,0} bitcast(e1)
  ROOT n = f32[16,16]{1,0} negate(bc)
}
"""


def test_bitcasts_go_first_and_are_never_fused_into():
    r = _sim(BITCAST)
    # e1 has only a bitcast user: not queued; the bitcast has priority +inf.
    assert list(r.steps.producer) == ["bc", "e1"]
    assert math.isinf(r.steps.priority_s[0]) and r.steps.priority_s[0] > 0
    assert "bitcast" in r.steps.reason[0]
    # then e1 feeds the new fusion: 3048 + 3048 - 3048
    assert r.steps.priority_s[1] == pytest.approx(3048 * NS)
    assert r.kernels_after == 1


CONSTANTS = """HloModule consts
ENTRY e {
  p0 = f32[256]{0} parameter(0)
  c = f32[] constant(2)
  b = f32[256]{0} broadcast(c), dimensions={}
  m = f32[256]{0} multiply(p0, b)
  k = f32[256]{0} constant({...})
  ROOT a = f32[256]{0} add(m, k)
}
"""


def test_small_constants_fused_at_the_end_large_ones_never():
    text = CONSTANTS.replace("{...}", "{" + ", ".join(["1"] * 256) + "}")
    r = _sim(text)
    producers = list(r.steps.producer)
    # b then m go through the queue; constants never do (priority -inf) ...
    assert producers[-1] == "c" and "small constant" in r.steps.reason.iloc[-1]
    assert "k" not in producers and "c" not in producers[:-1]
    entry = r.module.entry
    assert "c" not in entry and "k" in entry  # the scalar went into its users, the array stayed
    root = entry.root
    assert root.opcode == "fusion"
    assert any(i.opcode == "constant" for i in root.fused_computation.instructions)
    assert entry.instruction("k") in root.operands


def test_input_module_is_never_modified():
    m = load_hlo(FIXTURES / "layernorm_softmax.pre.hlo")
    before = m.to_text()
    r = simulate_fusion(m, model=ToyModel())
    assert m.to_text() == before
    assert r.module is not m and all(i.opcode != "fusion" for _, i in m.instructions())


def test_kinds_and_names_of_fused_module():
    m = load_hlo(FIXTURES / "layernorm_softmax.pre.hlo")
    r = simulate_fusion(m, model=ToyModel())
    fusions = [i for i in r.module.entry.instructions if i.opcode == "fusion"]
    assert fusions
    for f in fusions:
        assert f.name == "fusion" or f.name.startswith("fusion.")
        body = f.fused_computation
        assert body.name == "fused_computation" or body.name.startswith("fused_computation.")
        has_reduce = any(i.opcode == "reduce" for i in body.instructions)
        # a reduction stays a reduction (kInput); no epilogue turns it into a loop
        assert f.fusion_kind == ("kInput" if has_reduce else "kLoop")
    # reducers are never fused into
    assert {c.name for c in fusible_computations(r.module)} == {"main.5"}
    for name in ("region_0.1", "region_1.2", "region_2.3", "region_3.4"):
        assert len(r.module.computation(name).instructions) == 3


def test_result_tables_and_html():
    r = _sim(DUPLICATE)
    assert isinstance(r, FusionResult)
    assert list(r.steps.columns)[:4] == ["step", "computation", "producer", "producer_opcode"]
    for col in ("consumers", "priority_s", "time_unfused_s", "time_fused_s", "reason"):
        assert col in r.steps.columns
    assert list(r.rejected.columns) == ["computation", "producer", "opcode", "consumer", "rule", "detail"]
    html = r._repr_html_()
    assert "Priority fusion" in html and "consumer-not-fusible" in html
    assert r.summary()["kernels_after"] == 2
    assert "FusionResult(" in repr(r)


def test_model_by_name_and_unknown_model():
    from xla_costmodel.models import model_names

    with pytest.raises(ValueError, match="unknown cost model"):
        _sim(DUPLICATE, model="no-such-model")
    for name in [n for n in ("xla-gpu", "roofline") if n in model_names()]:
        r = simulate_fusion(parse_hlo(DUPLICATE), device="h100-sxm", model=name, multi_output=False)
        assert r.model == name and r.kernels_after == 2


def test_quantized_priorities_tie_exactly():
    assert quantize_priority(1e-6 + 1e-18) == quantize_priority(1e-6)
    assert quantize_priority(0.3e-9) == 0.25e-9
    assert math.isinf(quantize_priority(math.inf))


def test_compare_with_xla_by_hand():
    ours = parse_hlo(
        """HloModule c
fc {
  q0 = f32[8]{0} parameter(0)
  e1 = f32[8]{0} exponential(q0), metadata={op_name="exp"}
  ROOT n1 = f32[8]{0} negate(e1), metadata={op_name="neg"}
}
ENTRY e {
  p0 = f32[8]{0} parameter(0)
  f = f32[8]{0} fusion(p0), kind=kLoop, calls=fc
  ROOT a1 = f32[8]{0} abs(f), metadata={op_name="abs"}
}
"""
    )
    same = compare_with_xla(ours, ours)
    assert same.ari == 1.0 and same.matched == 3 and same.kernels_ours == same.kernels_xla == 2
    # XLA renamed everything and grouped exp alone, negate with abs
    theirs = parse_hlo(
        """HloModule x
g1 {
  r0 = f32[8]{0} parameter(0)
  ROOT x1 = f32[8]{0} exponential(r0), metadata={op_name="exp"}
}
g2 {
  r1 = f32[8]{0} parameter(0)
  x2 = f32[8]{0} negate(r1), metadata={op_name="neg"}
  ROOT x3 = f32[8]{0} abs(x2), metadata={op_name="abs"}
}
ENTRY e {
  p0 = f32[8]{0} parameter(0)
  k1 = f32[8]{0} fusion(p0), kind=kLoop, calls=g1
  ROOT k2 = f32[8]{0} fusion(k1), kind=kLoop, calls=g2
}
"""
    )
    c = compare_with_xla(ours, theirs)
    assert c.matched == 3 and c.matched_by_op_name == 3
    # labels ours {e1,n1}{a1} vs xla {e1}{n1,a1}: pairs agree nowhere -> ARI = -0.5
    assert c.ari == pytest.approx(-0.5)
    assert set(c.table.columns) >= {"instruction", "kernel_ours", "kernel_xla"}


@pytest.mark.parametrize("rewrites", [{}, {"gemm_rewrites": True, "triton_softmax": True}], ids=["plain", "rewrites"])
@pytest.mark.parametrize("name", ["layernorm_softmax", "mlp_grad"])
def test_pair_cache_gives_the_models_own_priorities(name, rewrites):
    """Priorities composed from cached pair prices equal one `estimate_fusion(P, users)` call per producer,
    where XLA's incremental update is its full gain: on these modules as written. (Simplified, mlp_grad's
    `fusion.18` is updated as XLA updates it, its queued priority plus its new consumers' gain minus the
    gains XLA's cache still holds: +0.505 us where its full gain is -0.614 us; `tests/test_fusion_xla_*`
    hold that update to XLA's own.)"""
    from xla_costmodel.models import model_names

    m = load_hlo(FIXTURES / f"{name}.pre.hlo")
    for model in [n for n in ("xla-gpu", "roofline") if n in model_names()] + [ToyModel(ns_per_element_op=1)]:
        a = simulate_fusion(m, model=model, price_totals=False, simplify=False, **rewrites)
        b = simulate_fusion(m, model=model, price_totals=False, incremental=False, simplify=False, **rewrites)
        assert list(a.steps.producer) == list(b.steps.producer)
        assert list(a.steps.consumers) == list(b.steps.consumers)
        assert list(a.steps.priority_s) == pytest.approx(list(b.steps.priority_s), rel=1e-9, nan_ok=True)


def test_compare_with_xla_on_a_real_module():
    """Against XLA's own CPU fusion of the same program (the committed post-optimization fixture)."""
    import jax

    from xla_costmodel.zoo import get_program

    fn, args = get_program("layernorm_softmax").build()
    # lowered with metadata, so that instructions can be matched to XLA's renamed ones
    pre = parse_hlo(jax.jit(fn).lower(*args).as_text(dialect="hlo", debug_info=True))
    post = FIXTURES / "layernorm_softmax.post.hlo"
    unfused = compare_with_xla(pre, post)
    # cse=False: instructions matched one by one to XLA's by name and op_name; CSE merges two of
    # them (same kernels, 5, either way; ARI 0.695 without it, 0.475 with it)
    fused = compare_with_xla(simulate_fusion(pre, model=ToyModel(), cse=False), post)
    assert unfused.ari == pytest.approx(0.0, abs=1e-9)  # one kernel per instruction agrees with nothing
    assert fused.matched >= 15 and fused.matched_by_op_name >= 15
    assert fused.ari > 0.5
    assert fused.kernels_ours < unfused.kernels_ours
    assert "Kernel grouping" in fused._repr_html_()


def test_model_that_prices_only_whole_producers():
    """A model that fills only time_unfused_s / time_fused_s is asked once per producer, same result."""
    from dataclasses import dataclass

    from xla_costmodel.models import FusionEstimate

    @dataclass(frozen=True)
    class Whole(ToyModel):
        def estimate_fusion(self, producer, consumers, device):
            e = ToyModel.estimate_fusion(self, producer, consumers, device)
            return FusionEstimate(time_unfused_s=e.time_unfused_s, time_fused_s=e.time_fused_s)

    r = _sim(REPRIORITIZE, Whole())
    assert list(r.steps.producer) == ["y", "x"]
    assert list(r.steps.priority_s) == pytest.approx([4072 * NS, 3048 * NS])


@pytest.mark.parametrize("name", ["transformer_fwd", "layernorm_softmax", "while_loop", "cond_switch", "scan_rnn"])
@pytest.mark.parametrize("model", ["xla-gpu", "roofline"])
def test_totals_are_analyze_of_the_input_and_of_the_fused_module(name, model):
    """`time_before_s` / `time_after_s` and the kernel counts are `analyze`'s, free instructions
    (bitcast-like reshapes among them) and loop trip counts included."""
    from xla_costmodel import analyze

    m = load_hlo(FIXTURES / f"{name}.pre.hlo")
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        r = simulate_fusion(m, device=DEVICE, model=model)
        before = analyze(m, device=DEVICE, model=model)
        after = analyze(r.module, device=DEVICE, model=model)
    assert r.time_before_s == pytest.approx(before.total_time_s, rel=1e-12)
    assert r.time_after_s == pytest.approx(after.total_time_s, rel=1e-12)
    # the input as given, whatever the passes before fusion make of it
    plain = simulate_fusion(m, device=DEVICE, model=model, simplify=False, constant_folding=False, cse=False)
    assert (plain.time_before_s, plain.kernels_before) == (r.time_before_s, r.kernels_before)
    assert (r.kernels_before, r.unpriced_before) == (before.summary()["kernels"], before.summary()["unpriced"])
    assert (r.kernels_after, r.unpriced_after) == (after.summary()["kernels"], after.summary()["unpriced"])
    # without pricing, the same kernel counts
    q = simulate_fusion(m, device=DEVICE, model=model, price_totals=False)
    assert math.isnan(q.time_before_s) and (q.kernels_before, q.kernels_after) == (r.kernels_before, r.kernels_after)


def test_reshapes_that_are_bitcasts_are_not_kernels_and_priorities_are_local():
    """transformer_fwd: 18 kernels after fusion as `analyze` counts them (its 3 bitcast-like reshapes are
    free); the step priorities (local estimates, as in XLA) do not add up to the re-priced saving.

    16 of its 17 reshapes/transposes are layout-only, bitcasts once XLA's algebraic simplifier has run
    (`reshape.7` reads the {1,3,2,0} layout of a transpose, so it moves data and stays a reshape). The pass
    decides with them as bitcasts: 13 are fused first (+inf), the 3 feeding dots (which cannot take them)
    stay. The module is JAX's lowered one (not through layout assignment), so by default the fused module
    gives them back their reshape/transpose; `bitcast_layout_changes=True` emits the bitcasts, with the very
    same decisions and totals. Left as reshapes (`False`), each one fused pays its own 1 us launch in its
    priority (`EstimateRunTimes` gives every kernel a launch), so there the finite priorities overshoot the
    saving; the kernels and totals are the same (`analyze` prices both as free).

    All on the module as written (`simplify=False`): XLA's DotMerger merges its Q, K and V projections into
    one dot over their concatenated weights, sliced back, and the slices feed the reshapes; by default the
    decisions and totals are still the same with bitcasts emitted or not.
    """
    m = load_hlo(FIXTURES / "transformer_fwd.pre.hlo")
    r = simulate_fusion(m, device=DEVICE, model="xla-gpu")
    emit = simulate_fusion(m, device=DEVICE, model="xla-gpu", bitcast_layout_changes=True)
    assert r.kernels_after == emit.kernels_after and r.time_after_s == pytest.approx(emit.time_after_s, rel=1e-12)
    for col in ("producer", "consumers", "fusions"):
        assert list(r.steps[col]) == list(emit.steps[col])
    assert list(r.steps.priority_s) == pytest.approx(list(emit.steps.priority_s), rel=0, nan_ok=True)  # NaN: sibling merges

    r = simulate_fusion(m, device=DEVICE, model="xla-gpu", simplify=False)
    emit = simulate_fusion(m, device=DEVICE, model="xla-gpu", bitcast_layout_changes=True, simplify=False)
    old = simulate_fusion(m, device=DEVICE, model="xla-gpu", bitcast_layout_changes=False, simplify=False)
    assert r.kernels_after == emit.kernels_after == old.kernels_after == 18
    assert r.time_after_s == pytest.approx(emit.time_after_s, rel=1e-12)
    assert r.time_after_s == pytest.approx(old.time_after_s, rel=1e-12)
    for col in ("producer", "consumers", "fusions", "priority_s"):
        assert list(r.steps[col]) == list(emit.steps[col])
    assert r.module.to_text().count("bitcast(") == 0
    assert [i.opcode for i in emit.module.entry.instructions].count("bitcast") == 3
    assert [i.name for _, i in emit.module.instructions() if i.opcode in ("reshape", "transpose")] == ["reshape.7"]
    assert (emit.steps.producer_opcode == "bitcast").sum() == 13
    relabelled = r.steps[r.steps.reason.str.startswith("layout-only")]
    assert len(relabelled) == 13 and set(relabelled.producer_opcode) <= {"reshape", "transpose"}
    assert [i.opcode for i in r.module.entry.instructions].count("reshape") == 3  # the 3 bitcasts kept
    assert [i.opcode for i in old.module.entry.instructions].count("reshape") == 3
    saving = r.time_before_s - r.time_after_s
    assert saving > 0
    finite = r.steps.priority_s[r.steps.priority_s.map(math.isfinite)]
    assert not math.isclose(finite.sum(), saving, rel_tol=1e-6)
    finite_old = old.steps.priority_s[old.steps.priority_s.map(math.isfinite)]
    assert finite_old.sum() > saving


LAYOUT_ONLY = """HloModule layout_only
ENTRY e {
  p0 = f32[1024,1]{1,0} parameter(0)
  p1 = f32[4,3]{1,0} parameter(1)
  r = f32[1024]{0} reshape(p0)
  n = f32[1024]{0} negate(r)
  t = f32[3,4]{0,1} transpose(p1), dimensions={1,0}
  e = f32[3,4]{0,1} exponential(t)
  ROOT out = (f32[1024]{0}, f32[3,4]{0,1}) tuple(n, e)
}
"""


def test_layout_only_reshape_and_transpose_are_bitcasts_to_the_pass():
    """`r` drops a unit dim between row-major layouts and `t` swaps dims whose layouts make it a relabelling
    ({1,0} -> {0,1}, same bytes): `reshape_is_bitcast` / `transpose_is_bitcast` hold, so XLA's algebraic
    simplifier has made both bitcasts before priority fusion. A bitcast is fused first at priority +inf
    without asking the model (0 model calls), so it is never priced as a kernel of its own. The module is not
    layout-assigned, so the fused bodies hold the reshape and the transpose (its `dimensions` kept); with
    `bitcast_layout_changes=True` they hold bitcasts. Left as a reshape (`False`), xla-gpu prices it as a
    1 us kernel and fusing it saves exactly that launch."""
    for emit in (None, True):
        r = simulate_fusion(parse_hlo(LAYOUT_ONLY), device=DEVICE, model="xla-gpu", bitcast_layout_changes=emit)
        assert r.model_calls == 0
        assert all(math.isinf(p) and p > 0 for p in r.steps.priority_s)
        assert r.steps.time_unfused_s.isna().all()
        assert (r.kernels_before, r.kernels_after) == (2, 2)
        bodies = sorted([x.opcode for x in i.fused_computation.instructions] for i in r.module.entry.instructions
                        if i.opcode == "fusion")
        moved = [x for _, x in r.module.instructions() if x.opcode in ("bitcast", "reshape", "transpose")]
        assert {r.origin.get(x.name, x.name) for x in moved} == {"r", "t"}
        if emit:
            assert list(r.steps.producer_opcode) == ["bitcast", "bitcast"]
            assert bodies == [["parameter", "bitcast", "exponential"], ["parameter", "bitcast", "negate"]]
            assert all(x.opcode == "bitcast" and not x.raw_attributes for x in moved)
        else:
            assert sorted(r.steps.producer_opcode) == ["reshape", "transpose"]
            assert bodies == [["parameter", "reshape", "negate"], ["parameter", "transpose", "exponential"]]
            (t,) = [x for x in moved if x.opcode == "transpose"]
            assert t.attribute("dimensions") == (1, 0)
            parse_hlo(r.module.to_text())

    old = simulate_fusion(parse_hlo(LAYOUT_ONLY), device=DEVICE, model="xla-gpu", bitcast_layout_changes=False)
    assert list(old.steps.producer_opcode) == ["transpose", "reshape"]
    assert old.model_calls == 2
    assert all(math.isclose(p, 1e-6, rel_tol=1e-9) for p in old.steps.priority_s)  # the producer's own launch
    assert not any(x.opcode == "bitcast" for _, x in old.module.instructions())
    # analyze prices layout-only reshapes as free either way: the totals agree.
    assert (old.time_before_s, old.time_after_s) == (r.time_before_s, r.time_after_s)


def test_bitcasts_only_where_layouts_were_assigned():
    """JAX's lowered modules are not through layout assignment: their fused modules hold no bitcasts.
    XLA's optimized ones are (scheduled, bitcasts and fusions in them): theirs keep the bitcasts."""
    from xla_costmodel.fusion._simulate import layouts_assigned

    for name in ("transformer_fwd", "mlp_grad", "data_movement"):
        pre, post = load_hlo(FIXTURES / f"{name}.pre.hlo"), load_hlo(FIXTURES / f"{name}.post.hlo")
        assert not layouts_assigned(pre) and layouts_assigned(post)
        assert "bitcast(" not in simulate_fusion(pre, device=DEVICE, model="xla-gpu").module.to_text()
        assert "bitcast(" in simulate_fusion(post, device=DEVICE, model="xla-gpu").module.to_text()
    assert layouts_assigned(parse_hlo(BITCAST)) and not layouts_assigned(parse_hlo(LAYOUT_ONLY))


def test_the_emitted_module_runs_and_bitcasts_are_not_run():
    """The default fused module runs on jaxlib's CPU client as emitted (fusions made calls) and matches;
    one with bitcasts (`bitcast_layout_changes=True`) is not run: this CPU path assigns layouts again,
    which refuses bitcasts (reported, not rewritten)."""
    import os

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from xla_costmodel.fusion import check_plan_validity

    m = parse_hlo(LAYOUT_ONLY)
    report = check_plan_validity(m, simulate_fusion(m, device=DEVICE, model="xla-gpu").module)
    assert report.ok and report.outputs_match and report.max_abs_error == 0.0
    emitted = simulate_fusion(m, device=DEVICE, model="xla-gpu", bitcast_layout_changes=True).module
    report = check_plan_validity(m, emitted)
    assert report.parses and report.outputs_match is None and "bitcast" in report.skipped


def test_search_fusion_sees_the_same_bitcasts():
    from xla_costmodel.fusion import search_fusion

    def ops(s):
        return {x.opcode for _, x in s.greedy_module.instructions()} | {x.opcode for _, x in s.module.instructions()}

    s = search_fusion(parse_hlo(LAYOUT_ONLY), device=DEVICE, model="xla-gpu", budget_s=0.5)
    assert "bitcast" not in ops(s) and {"reshape", "transpose"} <= ops(s)
    assert s.greedy_reproduced and s.kernels == 2
    emit = search_fusion(parse_hlo(LAYOUT_ONLY), device=DEVICE, model="xla-gpu", budget_s=0.5,
                         bitcast_layout_changes=True)
    assert "bitcast" in ops(emit) and not ops(emit) & {"reshape", "transpose"}
    assert emit.greedy_reproduced and emit.kernels == 2 and emit.time_s == s.time_s
    old = search_fusion(parse_hlo(LAYOUT_ONLY), device=DEVICE, model="xla-gpu", budget_s=0.5,
                        bitcast_layout_changes=False)
    assert "bitcast" not in ops(old)
    assert old.greedy_reproduced


def test_fusion_passes_take_what_analyze_takes():
    # One resolver (`models.resolve_inputs`) for analyze, simulate_fusion and search_fusion: a module, a
    # path, HLO text, or a function with its arguments (traced as lowered: fusion starts unfused).
    import jax.numpy as jnp

    from xla_costmodel import from_jax, search_fusion

    def f(x, w):
        return jnp.tanh(x @ w).sum()

    x, w = jnp.ones((16, 32)), jnp.ones((32, 8))
    lowered = from_jax(f, x, w, optimized=False)
    by_module = simulate_fusion(lowered, device=DEVICE, model="xla-gpu")
    by_function = simulate_fusion(f, x, w, device=DEVICE, model="xla-gpu")
    by_text = simulate_fusion(lowered.to_text(), device=DEVICE, model="xla-gpu")
    assert by_function.module.to_text() == by_module.module.to_text() == by_text.module.to_text()
    assert by_function.time_after_s == by_module.time_after_s
    path = FIXTURES / "mlp_fwd.pre.hlo"
    assert (simulate_fusion(str(path), device=DEVICE, model="roofline").module.to_text()
            == simulate_fusion(path.read_text(), device=DEVICE, model="roofline").module.to_text())
    assert search_fusion(f, x, w, device=DEVICE, model="xla-gpu", budget_s=0.5).kernels >= 1
    with pytest.raises(TypeError, match="extra arguments are only for a function"):
        simulate_fusion(lowered, x, device=DEVICE)
    with pytest.raises(ValueError, match="device 'host' is a cpu"):  # checked before any tracing
        simulate_fusion(f, x, w, device="host", model="xla-gpu")
