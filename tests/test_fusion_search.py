"""`search_fusion`: exact on small graphs (checked by brute force), never worse than greedy, valid plans.

References nobody here wrote: the brute force below builds every subset of
candidate producers on the real graph (`FusionEditor`), keeps the subsets XLA's
`CanFuse` rules allow at every fusion, and prices each built module; the
plans the search returns are checked with jaxlib's parser, jaxlib's cost
analysis and jaxlib's CPU client (`check_plan_validity`).
"""

from __future__ import annotations

import itertools
import math
import os
import warnings

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from xla_costmodel.devices import get_device  # noqa: E402
from xla_costmodel.fusion import check_plan_validity, fusible_computations, kernels_of, search_fusion  # noqa: E402
from xla_costmodel.fusion._legality import LegalityChecker, can_emit_input_fused_scatter, is_fusible  # noqa: E402
from xla_costmodel.fusion._priority import is_candidate, is_small_constant  # noqa: E402
from xla_costmodel.fusion._simulate import working_copy  # noqa: E402
from xla_costmodel.hlo import load_hlo, parse_hlo  # noqa: E402
from xla_costmodel.hlo._edit import NameUniquifier, copy_module  # noqa: E402
from xla_costmodel.fusion_engine import FusionEditor  # noqa: E402
from xla_costmodel.models import get_model, model_names  # noqa: E402

from conftest import FIXTURES  # noqa: E402

MODEL = "xla-gpu" if "xla-gpu" in model_names() else "roofline"
DEVICE = "h100-sxm"

DIAMOND = """
HloModule diamond, entry_computation_layout={(f32[256,512]{1,0}, f32[512]{0})->(f32[256]{0}, f32[256,512]{1,0})}

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p0 = f32[256,512]{1,0} parameter(0)
  p1 = f32[512]{0} parameter(1)
  b1 = f32[256,512]{1,0} broadcast(p1), dimensions={1}
  a1 = f32[256,512]{1,0} add(p0, b1)
  e1 = f32[256,512]{1,0} exponential(a1)
  n1 = f32[256,512]{1,0} negate(e1)
  m1 = f32[256,512]{1,0} multiply(e1, n1)
  c0 = f32[] constant(0)
  r1 = f32[256]{0} reduce(m1, c0), dimensions={1}, to_apply=add_f32
  t1 = f32[256,512]{1,0} tanh(e1)
  ROOT out = (f32[256]{0}, f32[256,512]{1,0}) tuple(r1, t1)
}
"""

# Two reductions over one expensive producer, a transpose and an epilogue: duplication and
# reduce-into-reduce decisions.
TWO_REDUCES = """
HloModule two_reduces, entry_computation_layout={(f32[512,1024]{1,0})->(f32[512]{0}, f32[1024]{0}, f32[1024,512]{1,0})}

add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

max_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

ENTRY main {
  p0 = f32[512,1024]{1,0} parameter(0)
  l = f32[512,1024]{1,0} log(p0)
  s = f32[512,1024]{1,0} sqrt(l)
  c0 = f32[] constant(0)
  r0 = f32[512]{0} reduce(s, c0), dimensions={1}, to_apply=add_f32
  r1 = f32[1024]{0} reduce(s, c0), dimensions={0}, to_apply=max_f32
  n = f32[512]{0} negate(r0)
  t = f32[1024,512]{1,0} transpose(s), dimensions={1,0}
  e = f32[1024,512]{1,0} exponential(t)
  ROOT out = (f32[512]{0}, f32[1024]{0}, f32[1024,512]{1,0}) tuple(n, r1, e)
}
"""


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _getter(versions):
    return lambda instr: versions.get(instr, 0)


def brute_force(module, device=DEVICE, model=MODEL):
    """Every subset of candidate producers, built on the real graph; (best total, legal plans, totals)."""
    dev = get_device(device)
    cost_model = get_model(model)
    producers = []
    for comp in fusible_computations(module):
        for x in comp.instructions:
            if (x is not comp.root and is_candidate(x) and x.opcode not in ("constant", "bitcast")
                    and is_fusible(x)):
                producers.append(x.name)
    totals = {}
    for r in range(len(producers) + 1):
        for subset in itertools.combinations(producers, r):
            t = _build_and_price(module, frozenset(subset), dev, cost_model)
            if t is not None:
                totals[frozenset(subset)] = t
    return min(totals.values()), len(totals), totals


def _build_and_price(module, subset, dev, cost_model):
    m = copy_module(module)
    names = NameUniquifier(m)
    versions = {}
    checker = LegalityChecker(dev.shared_memory_per_block_bytes, version=_getter(versions))

    def fuse(ed, p, c):
        facts = checker.facts(p) + checker.facts(c)
        f = ed.fuse(p, c, kind="kLoop")
        versions[f] = versions.get(f, 0) + 1
        checker.set_facts(f, facts)
        f.set_attribute("kind", checker.fusion_kind(f))
        return f

    for comp in fusible_computations(m):
        ed = FusionEditor(comp, names, version=versions)
        for x in comp.post_order()[::-1]:
            if x.name not in subset:
                continue
            users = list(dict.fromkeys(x.users))
            into = [u for u in users if u.opcode != "bitcast"]
            if not into or any(checker.can_fuse(x, u) is not None for u in into):
                return None  # not a legal plan
            for u in into:
                fuse(ed, x, u)
            if not x.users:
                ed.remove(x)
        for c in [i for i in ed.instructions if is_small_constant(i)]:
            for u in list(dict.fromkeys(c.users)):
                if is_fusible(u) and can_emit_input_fused_scatter(c, u) is None:
                    fuse(ed, c, u)
            if not c.users and c is not comp.root:
                ed.remove(c)
        ed.finish()
    total = 0.0
    for k in kernels_of(m):
        t = cost_model.estimate(k, dev).time_s
        if not math.isnan(t):
            total += t
    return total


SMALL = [
    pytest.param(lambda: parse_hlo(DIAMOND), id="diamond"),
    pytest.param(lambda: parse_hlo(TWO_REDUCES), id="two_reduces"),
    pytest.param(lambda: load_hlo(FIXTURES / "einsum_contractions.pre.hlo"), id="einsum_contractions"),
    pytest.param(lambda: load_hlo(FIXTURES / "cumulative.pre.hlo"), id="cumulative"),
]


@pytest.mark.parametrize("make", SMALL)
def test_exact_search_finds_the_brute_force_optimum(make):
    # as both passes see it: calls inlined, simplified, constants folded and dots merged (search_fusion's defaults)
    module = working_copy(make(), True, "off", simplify=True, constant_folding=True)
    best, n_legal, _ = _quiet(brute_force, module)
    # the windows as written (XLA's tree of short windows has too many plans to enumerate here)
    r = _quiet(search_fusion, module, device=DEVICE, model=MODEL, budget_s=20.0, exact_max_edges=16,
               rewrite_reduce_windows=False)
    assert r.method in ("exact", "greedy")
    assert r.computations["method"].eq("exact").all()
    found = float(r.computations["best_s"].sum())
    assert found == pytest.approx(best, rel=1e-12)
    # one decode per legal plan: the enumeration saw exactly the plans the brute force found legal
    assert r.plans_evaluated == n_legal
    # the optimum is never worse than greedy, and what is returned is priced like greedy's result
    assert r.time_s <= r.greedy_time_s * (1 + 1e-12)
    assert r.gap >= -1e-12
    if r.method == "exact":
        assert r.time_s == pytest.approx(best, rel=1e-9)
        assert r.refused == 0


def test_search_module_is_priced_like_its_plan():
    module = parse_hlo(TWO_REDUCES)
    r = _quiet(search_fusion, module, device=DEVICE, model=MODEL, budget_s=5.0)
    dev, cost_model = get_device(DEVICE), get_model(MODEL)
    again = sum(cost_model.estimate(k, dev).time_s for k in kernels_of(r.module))
    assert again == pytest.approx(r.time_s, rel=1e-12)
    assert "Fusion search" in r._repr_html_()
    assert r.summary()["method"] == r.method


def test_heuristic_search_on_a_larger_graph_is_never_worse_than_greedy():
    module = load_hlo(FIXTURES / "data_movement.pre.hlo")
    r = _quiet(search_fusion, module, device=DEVICE, model=MODEL, budget_s=1.0, exact_max_edges=4)
    assert r.method in ("heuristic", "greedy")
    assert r.time_s <= r.greedy_time_s * (1 + 1e-12)
    assert r.plans_evaluated > 1
    assert r.refused == 0


VALIDITY = ["cnn_pool", "data_movement", "einsum_contractions", "layernorm_softmax", "mlp_fwd", "while_loop"]


@pytest.mark.parametrize("name", VALIDITY)
def test_searched_plan_is_valid(name):
    module = load_hlo(FIXTURES / f"{name}.pre.hlo")
    r = _quiet(search_fusion, module, device=DEVICE, model=MODEL, budget_s=0.5)
    assert r.time_s <= r.greedy_time_s * (1 + 1e-12)
    report = check_plan_validity(module, r.module)
    assert report.parses, report.parse_error
    assert report.has_fusion
    assert report.fewer_bytes, (report.bytes_before, report.bytes_after)
    assert report.outputs_match is not False, report.mismatch
    assert report.ok


def test_check_plan_validity_catches_a_wrong_module():
    module = parse_hlo(DIAMOND)
    wrong = parse_hlo(DIAMOND.replace("negate(e1)", "exponential(e1)"))
    report = check_plan_validity(module, wrong)
    assert report.parses
    assert report.outputs_match is False
    assert not report.ok


def test_bad_budget_is_rejected():
    with pytest.raises(ValueError, match="budget_s"):
        search_fusion(parse_hlo(DIAMOND), budget_s=0)


def test_cli_fuse_search(tmp_path, capsys):
    import json

    from xla_costmodel.cli import main

    out = tmp_path / "best.hlo"
    src = FIXTURES / "cnn_pool.pre.hlo"
    args = ["fuse", str(src), "-o", str(out), "--model", MODEL, "--search", "--budget", "0.5"]
    assert _quiet(main, args + ["--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["best_time_s"] <= summary["greedy_time_s"] * (1 + 1e-12)
    assert summary["method"] in ("exact", "heuristic", "greedy")
    assert out.exists() and "fusion" in out.read_text()
    assert _quiet(main, args) == 0
    text = capsys.readouterr().out
    assert "gap" in text
    # The per-computation table as people read it: times in µs, the unit in every column's name.
    header = text.splitlines()[0].split()
    assert header == ["computation", "producers", "method", "plans", "greedy_us", "best_us", "search_s"]
    assert main(args[:-1] + ["-1"]) != 0
    assert "--budget" in capsys.readouterr().err


@pytest.mark.parametrize("simplify", [True, False])
def test_search_sees_the_module_greedy_fuses(simplify):
    """`search_fusion` simplifies and folds constants as `simulate_fusion` does (`simplify`,
    `constant_folding`), so greedy's plan is a plan of the searched module: decoded there, it prices as
    greedy's own module (data_movement: greedy folded its constants while the search did not)."""
    module = load_hlo(FIXTURES / "data_movement.pre.hlo")
    r = _quiet(search_fusion, module, device=DEVICE, model=MODEL, budget_s=0.3, simplify=simplify)
    assert r.greedy_reproduced
