"""Loop trip counts survive fusion, printing and parsing (issue "A user's day", item 1).

The reference nobody here wrote: XLA's own `known_trip_count` on the `while` loops of the
module XLA:CPU compiles from the same function (its `WhileLoopTripCountAnnotator`), and
XLA's parser (jaxlib), which must read back what our fusion pass prints.
"""

from __future__ import annotations

import json
import os
import re

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import xla_costmodel as xc  # noqa: E402
from xla_costmodel._jaxlib_oracle import xla_module_to_text  # noqa: E402
from xla_costmodel.analysis import annotate_trip_counts, module_stats, while_trip_count  # noqa: E402

# Lowered CPU modules priced on a GPU on purpose: the fusion pass turns them into GPU kernels.
pytestmark = pytest.mark.filterwarnings("ignore::xla_costmodel.models.BackendMismatchWarning")


def _rnn():
    """Loss and gradient of a 64-step tanh RNN with lax.scan: two loops of 64 trips."""
    def loss(params, xs):
        w, u = params

        def step(h, x):
            h = jnp.tanh(h @ w + x @ u)
            return h, h

        _, hs = jax.lax.scan(step, jnp.zeros((xs.shape[1], w.shape[0])), xs)
        return (hs ** 2).mean()

    params = (jnp.full((32, 32), 0.01), jnp.full((16, 32), 0.01))
    return jax.value_and_grad(loss), (params, jnp.ones((64, 4, 16)))


def _fori():
    """A fori_loop of static bounds 3..40 by 1: 37 trips."""
    def f(x):
        return jax.lax.fori_loop(3, 40, lambda i, v: jnp.sin(v) * 1.5 + i, x)

    return f, (jnp.ones((8, 128)),)


def _nested():
    """A fori_loop of 5 trips inside a scan of 6 steps: both counts."""
    def f(x, ws):
        def outer(c, w):
            c = jax.lax.fori_loop(0, 5, lambda i, v: jnp.tanh(v @ w), c)
            return c, c.sum()

        return jax.lax.scan(outer, x, ws)

    return f, (jnp.ones((4, 16)), jnp.ones((6, 16, 16)))


def _data_dependent():
    """A while loop whose trip count depends on the data: no count can be known."""
    def f(x):
        return jax.lax.while_loop(lambda v: v.sum() < 1e6, lambda v: v * 1.7 + 0.1, x)

    return f, (jnp.ones((8, 8)),)


PROGRAMS = {"scan_rnn_grad": (_rnn, [64, 64]), "fori_loop": (_fori, [37]), "nested": (_nested, [5, 6])}


def _counts(module) -> list:
    return sorted((while_trip_count(i)[0] for _, i in module.instructions() if i.opcode == "while"),
                  key=lambda n: (n is None, n))


@pytest.fixture(scope="module")
def fused():
    """Every program: its lowered module, XLA:CPU's compiled module and our fused module (xla-gpu on h100-sxm)."""
    out = {}
    for name, (build, _) in {**PROGRAMS, "data_dependent": (_data_dependent, None)}.items():
        fn, args = build()
        lowered = xc.from_jax(fn, *args, optimized=False)
        compiled = xc.from_jax(fn, *args)
        out[name] = (lowered, compiled, xc.simulate_fusion(lowered, device="h100-sxm", model="xla-gpu"))
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_counts_match_xla_and_survive_fusion_printing_and_parsing(fused, name):
    lowered, compiled, result = fused[name]
    expected = sorted(PROGRAMS[name][1])
    # XLA's own annotation on the module it compiled agrees with what we find on the lowered one.
    xla = [while_trip_count(i) for _, i in compiled.instructions() if i.opcode == "while"]
    assert sorted(n for n, _ in xla) == expected and {s for _, s in xla} == {"backend_config"}
    assert _counts(lowered) == expected
    # The fusion pass fuses the compare and the increment, and records the counts on the loops first.
    loops = [i for _, i in result.module.instructions() if i.opcode == "while"]
    assert sorted(while_trip_count(i) for i in loops) == [(n, "backend_config") for n in expected]
    assert any(f.opcode == "fusion" for i in loops for f in i.attribute("condition").instructions)
    # Printed, read back by XLA's parser and by ours: the counts are still there.
    text = result.module.to_text()
    by_xla = xla_module_to_text(text)
    assert sorted(int(n) for n in re.findall(r'"known_trip_count":\{"n":"(\d+)"\}', by_xla)) == expected
    assert _counts(xc.parse_hlo(text)) == expected
    assert _counts(xc.parse_hlo(by_xla)) == expected


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_analyze_stats_and_fuse_agree_on_lowered_and_fused(fused, name):
    lowered, _, result = fused[name]
    before = xc.analyze(lowered, device="h100-sxm", model="xla-gpu")
    after = xc.analyze(result.module, device="h100-sxm", model="xla-gpu")
    assert not before.total_is_lower_bound and not after.total_is_lower_bound
    assert after.unknown_loops == () and not after["note"].str.contains("unknown").any()
    assert result.time_before_s == pytest.approx(before.total_time_s)
    assert result.time_after_s == pytest.approx(after.total_time_s)
    # Loop bodies counted once per trip: the fused module's loop kernels run as often as the loop.
    trips = max(PROGRAMS[name][1])
    assert after["executions"].max() >= trips
    # stats: the same loops with the same counts, and the same flops counted through the trips (fusion
    # may duplicate a cheap producer into several consumers: a few flops more per trip, never fewer).
    s_low, s_fused = module_stats(lowered), module_stats(result.module)
    assert s_low["trip_counts_known"] and s_fused["trip_counts_known"]
    assert sorted(x["trip_count"] for x in s_fused["loops"] if x["source"] != "scan") == sorted(PROGRAMS[name][1])
    assert {x["source"] for x in s_fused["loops"]} == {"backend_config"}
    assert s_low["flops_trip_count_aware"] <= s_fused["flops_trip_count_aware"] <= 1.001 * s_low["flops_trip_count_aware"]
    assert s_fused["flops_trip_count_aware"] > 2 * s_fused["flops"]


def test_rnn_fused_saving_is_not_the_lost_count(fused):
    """The issue's case: before the fix the fused module priced each loop once (a 77x "saving")."""
    lowered, _, result = fused["scan_rnn_grad"]
    assert result.speedup < 4
    # The same module with its counts removed is what the issue saw: far cheaper, and a lower bound.
    stripped = xc.parse_hlo(re.sub(r', backend_config=\{"known_induction[^\n]*\}\}', "", result.module.to_text()))
    lost = xc.analyze(stripped, device="h100-sxm", model="xla-gpu")
    assert lost.total_is_lower_bound and lost.total_time_s < result.time_after_s / 10


def test_data_dependent_loop_stays_unknown_with_its_note_and_hint(fused):
    lowered, compiled, result = fused["data_dependent"]
    assert _counts(lowered) == [None] and _counts(compiled) == [None] and _counts(result.module) == [None]
    loop = next(i for _, i in result.module.instructions() if i.opcode == "while")
    assert "known_trip_count" not in (loop.attribute("backend_config", {}) or {})
    for module in (lowered, result.module):
        table = xc.analyze(module, device="h100-sxm", model="xla-gpu")
        name = next(i.name for _, i in module.instructions() if i.opcode == "while")
        assert table.total_is_lower_bound and table.unknown_loops == (name,)
        assert table["note"].str.contains(f"trip count of '{name}' unknown: assumed 1", regex=False).any()
        hinted = xc.analyze(module, device="h100-sxm", model="xla-gpu", trip_counts={name: 20})
        assert not hinted.total_is_lower_bound and hinted.total_time_s > 5 * table.total_time_s
    stats = module_stats(result.module)
    assert not stats["trip_counts_known"] and stats["loops"][0]["source"] == "unknown"


def test_annotation_keeps_existing_fields_and_xla_counts():
    text = """HloModule m

cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(2)
  j = s32[] add(i, one)
  v = f32[4] get-tuple-element(p), index=1
  w = f32[4] sine(v)
  ROOT t = (s32[], f32[4]) tuple(j, w)
}

ENTRY e {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[4]) tuple(zero, x)
  a = (s32[], f32[4]) while(t), condition=cond, body=body, backend_config={"dynamic_variables":[]}
  b = (s32[], f32[4]) while(t), condition=cond, body=body, backend_config={"known_trip_count":{"n":"7"}}
  ROOT r = ((s32[], f32[4]), (s32[], f32[4])) tuple(a, b)
}
"""
    module = xc.parse_hlo(text)
    assert annotate_trip_counts(module) == 1
    a, b = module.entry.instruction("a"), module.entry.instruction("b")
    assert a.attribute("backend_config") == {
        "dynamic_variables": [], "known_induction_variable": {"tuple_index": "0"},
        "known_init_step": {"init": "0", "step": "2"}, "known_trip_count": {"n": "5"}}
    assert while_trip_count(b) == (7, "backend_config")  # XLA's count is kept, never replaced
    assert annotate_trip_counts(module) == 0
    printed = xla_module_to_text(module.to_text())
    assert json.loads(re.search(r"\ba = .*backend_config=(\{.*\})", printed).group(1))["known_trip_count"] == {"n": "5"}


def test_stats_cli_lists_loops_with_their_counts(fused, tmp_path, capsys):
    from xla_costmodel.cli import main

    _, _, result = fused["nested"]
    path = tmp_path / "fused.hlo"
    path.write_text(result.module.to_text())
    assert main(["stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"loop \S+ in \S+: 5 trips \(backend_config\)", out)
    assert re.search(r"loop \S+ in \S+: 6 trips \(backend_config\)", out)
    assert main(["stats", str(path), "--json"]) == 0
    assert sorted(x["trip_count"] for x in json.loads(capsys.readouterr().out)["loops"]) == [5, 6]


H100_LOOPS = ["equinox_lstm_grad@small", "flax_nnx_lstm_grad@small", "haiku_lstm_unroll_fwd@small",
              "jax_scipy_expm@small"]


@pytest.mark.parametrize("name", H100_LOOPS)
def test_fused_h100_fixture_keeps_the_counts_xla_gpu_found(name):
    """The reference: XLA:GPU's own `known_trip_count` on the module the H100 ran. Fusing the module
    as lowered keeps each of those counts (XLA may have merged a loop away: ours may hold more)."""
    from collections import Counter

    from conftest import ROOT

    where = ROOT / "hlo_fixtures" / "gpu_h100"
    post = xc.load_hlo(where / f"{name}.post.hlo.gz")
    xla = Counter(n for _, i in post.instructions() if i.opcode == "while"
                  for n, source in [while_trip_count(i)] if source == "backend_config")
    assert xla
    result = xc.simulate_fusion(xc.load_hlo(where / f"{name}.pre.hlo.gz"), device="h100-sxm", model="xla-gpu")
    ours = [while_trip_count(i) for _, i in result.module.instructions() if i.opcode == "while"]
    assert {source for _, source in ours} == {"backend_config"}
    assert not Counter(xla) - Counter(n for n, _ in ours)
    table = xc.analyze(result.module, device="h100-sxm", model="xla-gpu")
    assert not table.total_is_lower_bound and table.unknown_loops == ()
    assert not table["note"].str.contains("unknown").any()
