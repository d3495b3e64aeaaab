"""A fusion that grows in place is re-analysed from its last state (`analysis._fusion_growth`,
`fusion._budget.ir_size`, `models._kernel_costs._split_flops`, `hlo.select_in_body`): every growth
of real fusion runs must give exactly what analysing the grown body from scratch gives."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from xla_costmodel import parse_hlo, simulate_fusion
from xla_costmodel.analysis import _fusion_growth
from xla_costmodel.analysis._gpu import _GpuAnalysis
from xla_costmodel.analysis._rules import IR, UTIL
from xla_costmodel.fusion import _budget
import xla_costmodel.fusion_engine as fusion_engine
from xla_costmodel.fusion_engine import _engine as _fusion_engine
from xla_costmodel.models import _kernel_costs

GPU_H100 = Path(__file__).resolve().parents[1] / "hlo_fixtures" / "gpu_h100"
# diffrax's solver step: one loop fusion grows from a few to ~2,400 instructions, a producer at a time.
DIFFRAX = GPU_H100 / "diffrax_neural_ode_grad@small.pre.hlo.gz"
CHECK_UP_TO = 700  # body size up to which each growth is checked against the full analysis (O(n) each)


def _full_record(an, instr):
    full = type(an)(None, an.op_profile, count_multiple_input_accesses=True, warn=False)
    full._rules, full._inline = an._rules, an._inline
    return full, full.visit(instr)


def _said_record(r) -> tuple:
    """A copy of what record `r` says now (its scalars, per-operand lists, utilization and IR size)."""
    return (*r[:4], tuple(r[4]), tuple(r[5]), r[UTIL], r[IR])


def _same_record(p, q) -> bool:
    return (p[:4] == q[:4] and list(p[4]) == list(q[4]) and list(p[5]) == list(q[5]) and p[6:10] == q[6:10])


@pytest.fixture()
def checked(monkeypatch):
    """Check each incremental answer against the full one, for bodies up to `CHECK_UP_TO` instructions."""
    seen = {"analysis": 0, "ir_size": 0, "split": 0, "select": 0}
    bad: list[str] = []

    grow = _fusion_growth.grow

    def checked_grow(an, instr, comp, p):
        ok = grow(an, instr, comp, p)
        if ok and len(comp.instructions) <= CHECK_UP_TO:
            seen["analysis"] += 1
            full, q = _full_record(an, instr)
            if not _same_record(p, q):
                bad.append(f"analysis of {instr.name}: {p[:4]} != {q[:4]}")
            for h in comp.instructions:
                a, b = an._records[h], full._records[h]
                if (a[UTIL], a[IR], a[:4]) != (b[UTIL], b[IR], b[:4]) or an.ew_roots[h] != full.ew_roots[h]:
                    bad.append(f"{h.name} in {instr.name}: utilization {a[UTIL]} != {b[UTIL]} or IR or roots differ")
                    break
        return ok

    grown_ir = _budget._grown_ir_walk

    def checked_ir(walk, g):
        res = grown_ir(walk, g)
        body = g.value.computation
        if res is not None and len(body.instructions) <= CHECK_UP_TO:
            seen["ir_size"] += 1
            with monkeypatch.context() as m:
                m.setattr(_budget, "body_growth", lambda b: None)
                m.setattr(_budget, "_IR_WALKS", {})
                full = _budget.ir_size(type("Kernel", (), {"fused_computation": body})())
            if full != res.result:
                bad.append(f"ir_size of {body.name}: {res.result} != {full}")
        return res

    split = _kernel_costs._split_flops

    def checked_split(c):
        res = split(c)
        comp = c.kernel.fused_computation if c.kernel.opcode == "fusion" else None
        if comp is not None and len(comp.instructions) <= CHECK_UP_TO:
            seen["split"] += 1
            full = _kernel_costs._split_instructions(c, comp.instructions, comp)[:3]
            if (full[0], full[1], list(full[2].items())) != (res[0], res[1], list(res[2].items())):
                bad.append(f"split of {c.kernel.name}: {res} != {full}")
        return res

    select = _fusion_engine.select_in_body

    def checked_select(body, opcodes):
        res = select(body, opcodes)
        if len(body.instructions) <= CHECK_UP_TO:
            seen["select"] += 1
            if res != tuple(h for h in body.instructions if h.opcode in opcodes):
                bad.append(f"select_in_body({body.name}, {sorted(opcodes)}) differs from a scan")
        return res

    monkeypatch.setattr(_fusion_growth, "grow", checked_grow)
    monkeypatch.setattr(_budget, "_grown_ir_walk", checked_ir)
    monkeypatch.setattr(_kernel_costs, "_split_flops", checked_split)
    for module in ("xla_costmodel.analysis._emission", "xla_costmodel.models._launch",
                   "xla_costmodel.models._coalescing"):
        monkeypatch.setattr(f"{module}.select_in_body", checked_select)
    return seen, bad


@pytest.mark.parametrize("model", ["xla-gpu", "roofline"])
def test_every_growth_of_a_real_fusion_run_matches_the_full_analysis(checked, checked_trials, model):
    """xla-gpu: `GpuHloCostAnalysis`; roofline: the base variant (one flop per element, transcendentals
    weighted by utilization), through in-place growths and through trial fusions, each trial priced
    as the detached fusion is and leaving the module as it was."""
    seen, bad = checked
    trials, bad_trials = checked_trials
    module = parse_hlo(gzip.open(DIFFRAX, "rt").read())
    # Without constant folding: folded, diffrax's `nextafter` constants no longer feed ~100 selects each, and the
    # run grows too few fusions to check the growth path this test is for.
    simulate_fusion(module, device="h100-sxm", model=model, price_totals=False, constant_folding=False)
    assert not bad, bad[:5]
    assert not bad_trials, bad_trials[:5]
    # The run must really have gone through growths (else this checks nothing).
    assert seen["analysis"] >= 300 and seen["ir_size"] >= 300 and seen["split"] >= 300, seen
    if model == "xla-gpu":
        assert seen["select"] >= 300 and trials["trials"] == 0, (seen, trials)  # it prices pairs from records
    else:
        assert trials["priced"] >= 1000, trials


# jax.random's threefry bodies: `slice`s read their operand in half, so utilizations below them are
# halves (fine fractions, `analysis._records.exact_in_f32`), not integers.
RANDOM = GPU_H100 / "jax_random_sampling@small.pre.hlo.gz"


def _has_fine_fraction(an, comp) -> bool:
    return any(an._records[h][UTIL] != int(an._records[h][UTIL]) for h in comp.instructions)


def test_growths_through_fine_fractions_match_the_full_analysis(checked, monkeypatch):
    """Bodies whose utilizations are halves grow from their last state too, each growth exactly the
    full analysis (which walks them in exact arithmetic as well: the next test checks that walk)."""
    seen, bad = checked
    grow = _fusion_growth.grow
    fine = {"n": 0}

    def counted(an, instr, comp, p):
        ok = grow(an, instr, comp, p)
        if ok and _has_fine_fraction(an, comp):
            fine["n"] += 1
        return ok

    monkeypatch.setattr(_fusion_growth, "grow", counted)
    simulate_fusion(parse_hlo(gzip.open(RANDOM, "rt").read()), device="h100-sxm", model="xla-gpu",
                    price_totals=False)
    assert not bad, bad[:5]
    assert fine["n"] >= 10 and seen["analysis"] >= 100, (fine, seen)


@pytest.mark.parametrize("model", ["xla-gpu", "roofline"])
@pytest.mark.parametrize("source", [RANDOM, GPU_H100 / "pix_color_augment@large.pre.hlo.gz"])
def test_the_exact_walk_of_fine_fractions_is_the_float32_walk(source, model, monkeypatch):
    """The full analysis's exact walk (`_integral_utilizations`, through fine fractions, its flop sum
    in float32 where that sum passes 2**24) gives every figure the float32 walk (`_f32_utilizations`)
    gives: each such body walked in a fusion run (growths off: every body walked in full), walked
    again in float32."""
    exact_walk = _GpuAnalysis._integral_utilizations
    compared = {"fine": 0, "f32 flops": 0}
    bad: list[str] = []

    def checked(self, comp, order, p):
        done = exact_walk(self, comp, order, p)
        if done is not None and (_has_fine_fraction(self, comp) or not self.integral_walk):
            compared["fine" if self.integral_walk else "f32 flops"] += 1
            said = [(self._records[h][UTIL], self._records[h][IR]) for h in order]
            roots = {h: set(self.ew_roots[h]) for h in order}
            q = list(p)
            again = self._f32_utilizations(comp, order, q)
            if (q[0], q[IR]) != (p[0], p[IR]) or again != done:
                bad.append(f"{comp.name}: flops, IR {(p[0], p[IR])} != {(q[0], q[IR])}")
            if said != [(self._records[h][UTIL], self._records[h][IR]) for h in order] or \
                    roots != {h: self.ew_roots[h] for h in order}:
                bad.append(f"{comp.name}: utilizations, IR sizes or roots differ")
        return done

    monkeypatch.setattr(_GpuAnalysis, "_integral_utilizations", checked)
    monkeypatch.setattr(_fusion_growth, "grow", lambda an, instr, comp, p: False)
    simulate_fusion(parse_hlo(gzip.open(source, "rt").read()), device="h100-sxm", model=model, price_totals=False)
    assert not bad, bad[:5]
    assert compared["fine" if source == RANDOM else "f32 flops"] >= 50, compared


def test_fine_fractions_are_taken_only_where_float32_is_exact():
    """`exact_in_f32`: integers below 2**24 and multiples of 1/256 in (0, 2**16); a slice's share of
    its operand is taken exactly only where XLA's ceil(x n) / n changes nothing."""
    from xla_costmodel.analysis._records import exact_in_f32
    from xla_costmodel.analysis._utilization_walk import _fine_share

    assert exact_in_f32(3.0) and exact_in_f32(-5.0) and exact_in_f32(0.5) and exact_in_f32(65535.75)
    assert not exact_in_f32(float(1 << 24)) and not exact_in_f32(0.1) and not exact_in_f32(1 / 3)
    assert not exact_in_f32(65536.5) and not exact_in_f32(-0.5) and not exact_in_f32(2.0 ** -9)
    assert _fine_share(1.0, 0.5, 6) == 0.5 and _fine_share(0.5, 0.5, 8) == 0.25 and _fine_share(0.5, 2.0, 0) == 0.0
    assert _fine_share(0.5, 1.0, 3) is None  # ceil(1.5) / 3 is 2/3 in XLA, not a half
    assert _fine_share(1.0, 0.1, 10) is None and _fine_share(0.5, 0.5, 1 << 24) is None


def test_a_walks_flop_sum_past_2_24_is_added_in_float32():
    """`_GpuAnalysis._f32_flops`: each term and partial sum rounded to float32 in walk order, as the
    float32 walk adds them (2**24 + 1 is 2**24 there)."""
    import numpy as np

    terms = [(float(1 << 24), 1.0), (1.0, 1.0), (3.0, 5.0), (0.0, 7.0), (1e30, 1e10)]
    want = np.float32(0.0)
    for f, util in terms[:4]:
        want = np.float32(want + np.float32(np.float32(util) * np.float32(f)))
    assert _GpuAnalysis._f32_flops([([f], u, 0.0) for f, u in terms[:4]]) == float(want) == float(1 << 24) + 16
    # past float32's range: infinite, as the float32 walk rounds it
    assert _GpuAnalysis._f32_flops([([f], u, 0.0) for f, u in terms]) == float("inf")


def _synthetic_solver():
    import jax
    import jax.numpy as jnp

    def step(x, w, *c):
        for i in range(12):
            k1 = jnp.tanh(x * w + c[i % 3])
            k2 = jnp.exp(-(x + 0.5 * k1) * w)
            x = x + 0.1 * (k1 + k2)
            x = jnp.where(x > 1.0, x * c[0], x)
        return x

    scalars = [jnp.float32(1.0)] * 3
    return jax.jit(step).lower(jnp.ones((64, 32)), jnp.ones((64, 32)), *scalars).as_text(dialect="hlo")


@pytest.mark.parametrize("model", ["xla-gpu", "roofline"])
@pytest.mark.parametrize("source", ["synthetic", "rng.pre.hlo", "dtypes_mixed.pre.hlo"])
def test_fusion_result_is_the_same_without_incremental_analysis(source, model, monkeypatch):
    """Without growth tracking there are no trial fusions either (`can_try_fusion`)."""
    text = _synthetic_solver() if source == "synthetic" else (GPU_H100.parent / source).read_text()

    def run():
        r = simulate_fusion(parse_hlo(text), device="h100-sxm", model=model, price_totals=False)
        return r.module.to_text(), r.steps

    fast_text, fast_steps = run()
    with monkeypatch.context() as m:
        m.setattr(_fusion_engine, "TRACK_GROWTH_FROM", 10**9)
        slow_text, slow_steps = run()
    assert fast_text == slow_text
    assert fast_steps.equals(slow_steps)


def test_a_body_edited_other_than_by_growth_is_analysed_afresh():
    """The kept state is used only while the body is what its last growth left."""
    from xla_costmodel.analysis import kernel_cost
    from xla_costmodel.hlo._edit import clone_instruction

    fused = simulate_fusion(parse_hlo(_synthetic_solver()), device="h100-sxm", model="xla-gpu",
                            price_totals=False).module
    fusion = max((h for h in fused.entry.instructions if h.opcode == "fusion"),
                 key=lambda h: len(h.fused_computation.instructions))
    body = fusion.fused_computation
    assert _fusion_engine.tracks_growth(body)
    first = kernel_cost(fusion, "gpu", "h100-sxm")
    assert body in _fusion_growth.kept_states(_GpuAnalysis)
    again = kernel_cost(fusion, "gpu", "h100-sxm")  # from the kept state
    assert (again.flops, again.bytes_accessed, again.operand_bytes) == (
        first.flops, first.bytes_accessed, first.operand_bytes)
    # An edit no growth describes: a dead copy of an elementwise instruction.
    work = next(h for h in body.instructions if h.opcode in ("multiply", "add", "tanh", "exponential"))
    dead = clone_instruction(work, list(work.operands), name=work.name + ".dead")
    body.add_instruction(dead)
    edited = kernel_cost(fusion, "gpu", "h100-sxm")
    # Analysed afresh: the new instruction has its record (the kept state knows nothing of it) ...
    flops, _, utilization = edited.instruction_counts(dead)
    assert flops > 0 and utilization == 0.0  # XLA costs it; nothing reads it
    # ... and what is kept now describes the edited body.
    assert _fusion_growth.kept_states(_GpuAnalysis)[body].size == len(body.instructions)


def _rich_module():
    """Broadcasts, reductions, a dot, a transpose, a concatenate, a reshape, an iota, constants and
    operands used twice: the kinds of fused instruction the utilization walk treats differently.
    (No slices, and one dot: a fractional utilization, or recomputation through stacked dots past
    2**24, sends a body to the full float32 walk.)"""
    import jax
    import jax.numpy as jnp

    def f(x, v, s, m):
        y = x * v[None, :] + s
        r = jnp.sum(y, axis=1, keepdims=True)
        z = jnp.exp(y - r) * y
        d = (z @ m).T
        c = jnp.concatenate([d, d * 2.0], axis=0)
        return c + jnp.arange(32, dtype=jnp.float32)[None, :] + x.T.reshape(64, 16).sum()

    args = (jnp.ones((32, 32)), jnp.ones((32,)), jnp.float32(2.0), jnp.ones((32, 32)))
    return parse_hlo(jax.jit(f).lower(*args).as_text(dialect="hlo"))


def test_growing_one_fusion_by_every_kind_of_producer_matches_the_full_analysis(monkeypatch):
    """Grow one fusion in place (`hlo` `fuse`), a producer at a time, through the whole entry
    computation, and after every growth compare each incremental answer with a full one."""
    from xla_costmodel.analysis import kernel_cost
    from xla_costmodel.fusion_engine import body_growth, fuse, make_fusion

    incremental = []
    grow = _fusion_growth.grow
    monkeypatch.setattr(_fusion_growth, "grow", lambda *a: incremental.append(grow(*a)) or incremental[-1])
    monkeypatch.setattr(_fusion_engine, "TRACK_GROWTH_FROM", 4)  # a small body: its state is kept all the same
    module = _rich_module()
    entry = module.entry
    fusion = make_fusion(entry.root)
    grown = 0
    opcodes_seen: set = set()
    before = None  # the last analysis, and a copy of what it said: a growth must not change it
    while True:
        producer = next((o for o in fusion.operands if o.opcode != "parameter"), None)
        if producer is None:
            break
        opcodes_seen.add(producer.opcode)
        fuse(producer, fusion)
        body = fusion.fused_computation
        if body_growth(body) is None or not _fusion_engine.tracks_growth(body):
            kernel_cost(fusion, "gpu", "h100-sxm")  # the state the next growth starts from
            _budget.ir_size(fusion)
            continue
        c = kernel_cost(fusion, "gpu", "h100-sxm")
        if before is not None:
            old, said = before
            assert {h: set(v) for h, v in old.ew_roots.items()} == said[0] and dict(old.root_util) == said[1]
            assert {h: _said_record(old._records[h]) for h in said[2]} == said[2]
        an = c._an
        before = (an, ({h: set(v) for h, v in an.ew_roots.items()}, dict(an.root_util),
                       {h: _said_record(an._records[h]) for h in body.instructions}))
        full, q = _full_record(an, fusion)
        assert _same_record(an.record(fusion), q), producer.name
        for h in body.instructions:
            a, b = an._records[h], full._records[h]
            assert (a[UTIL], a[IR], an.ew_roots[h]) == (b[UTIL], b[IR], full.ew_roots[h]), (producer.name, h.name)
        incremental_ir = _budget.ir_size(fusion)
        saved = dict(_budget._IR_WALKS)
        _budget._IR_WALKS.clear()
        try:
            assert incremental_ir == _budget.ir_size(fusion)
        finally:
            _budget._IR_WALKS.update(saved)
        split = _kernel_costs._split_flops(c)
        full_split = _kernel_costs._split_instructions(c, body.instructions, body)[:3]
        assert (split[0], split[1], list(split[2].items())) == (full_split[0], full_split[1],
                                                                list(full_split[2].items()))
        grown += 1
    assert grown >= 20, grown
    # ... and most of them were answered incrementally (else this compares the full analysis with itself).
    assert sum(incremental) >= 20, sum(incremental)
    # The walk saw producers that make new utilization roots, not just elementwise chains.
    assert {"broadcast", "reduce", "dot", "transpose", "concatenate", "iota"} <= opcodes_seen, opcodes_seen


@pytest.mark.parametrize("source", ["linalg.pre.hlo", "gather_scatter.pre.hlo", "synthetic"])
def test_pair_prices_from_a_consumers_kept_reads_equal_the_full_formula(source, monkeypatch):
    """`fused_estimate(consumer_reads=...)` (what the pair pricer passes) gives the same time, to the bit,
    as the formula worked out from scratch, for every pair a simulation prices."""
    from xla_costmodel.models import _xla_gpu_fusion

    text = _synthetic_solver() if source == "synthetic" else (GPU_H100.parent / source).read_text()
    estimate = _xla_gpu_fusion.fused_estimate
    compared, differ = [], []

    def both(model, producer, consumer, device, pc, cc, *args, consumer_reads=None, **kwargs):
        t = estimate(model, producer, consumer, device, pc, cc, *args, consumer_reads=consumer_reads, **kwargs)
        if consumer_reads is not None:
            compared.append(1)
            if t != estimate(model, producer, consumer, device, pc, cc, *args, **kwargs):
                differ.append((producer.name, consumer.name))
        return t

    monkeypatch.setattr(_xla_gpu_fusion, "fused_estimate", both)
    simulate_fusion(parse_hlo(text), device="h100-sxm", model="xla-gpu", price_totals=False)
    assert len(compared) >= 20 and not differ, differ[:5]


def test_a_fusion_nested_in_a_kernel_body_is_analysed_afresh():
    """Only the kernel follows growths: a large fusion nested in its body must not bring in records
    kept from another analysis (they would replace the ones the kernel's analysis is filling)."""
    from xla_costmodel.analysis import kernel_cost

    chain = "\n".join(f"  n{i} = f32[64] multiply(n{i - 1}, n{i - 1})" for i in range(1, 60))
    text = f"""HloModule nested

inner {{
  n0 = f32[64] parameter(0)
{chain}
  ROOT r = f32[64] add(n59, n0)
}}

outer {{
  a = f32[64] parameter(0)
  b = f32[64] parameter(1)
  f = f32[64] fusion(a), kind=kLoop, calls=inner
  ROOT s = f32[64] subtract(f, b)
}}

ENTRY e {{
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  ROOT k = f32[64] fusion(x, y), kind=kLoop, calls=outer
}}
"""
    module = parse_hlo(text)
    kernel = module.entry.root
    nested = next(h for h in kernel.fused_computation.instructions if h.opcode == "fusion")
    # The nested fusion analysed as a kernel of its own first: its body's state is kept ...
    kernel_cost(nested, "gpu", "h100-sxm")
    assert nested.fused_computation in _fusion_growth.kept_states(_GpuAnalysis)
    # ... and the outer kernel, analysed twice, gives the full analysis both times.
    for _ in range(2):
        c = kernel_cost(kernel, "gpu", "h100-sxm")
        full, q = _full_record(c._an, kernel)
        assert _same_record(c._an.record(kernel), q)
        assert c.flops == q[0] > 0


# ---------------------------------------------------------------------------
# Trial fusions: a candidate priced by growing a large consumer in place for the call


def _trial_state(producer, consumer):
    """Everything a trial fusion touches, by identity: the consumer, its operands' and the
    producer's users, its body (list, names, root, last growth, kept states) and each body
    instruction's operands, users, number and computation."""
    body = consumer.fused_computation
    ids = lambda xs: tuple(map(id, xs))  # noqa: E731
    caches = []
    for cache, copy in _fusion_engine._GROWTH_CACHES:
        entry = cache.get(body)
        caches.append(entry if copy is None else (None if entry is None else copy(entry)))
    return (
        ids(consumer.operands), ids(consumer.users), dict(consumer._raw), consumer.fusion_kind,
        tuple(ids(o.users) for o in consumer.operands + producer.operands), ids(producer.users),
        ids(body.instructions), {k: id(v) for k, v in body._by_name.items()}, id(body.root),
        _fusion_engine.body_growth(body),
        tuple((ids(h.operands), ids(h.users), h.parameter_number, id(h.computation)) for h in body.instructions),
        caches,
    )


@pytest.fixture()
def checked_trials(monkeypatch):
    """Each trial fusion of a pass: priced as the detached fusion is (every figure of the estimate,
    for bodies up to `CHECK_UP_TO`), and the module left exactly as it was."""
    from contextlib import contextmanager

    import xla_costmodel as xc

    model, device = xc.get_model("roofline"), xc.get_device("h100-sxm")
    real = _fusion_engine.trial_fusion
    seen = {"trials": 0, "priced": 0}
    bad: list[str] = []

    def figures(e):
        return (e.time_s, e.compute_s, e.memory_s, e.launch_s, e.bound, e.details)

    @contextmanager
    def checked_trial(producer, consumer):
        seen["trials"] += 1
        before = want = None
        if len(consumer.fused_computation.instructions) <= CHECK_UP_TO:
            before = _trial_state(producer, consumer)
            detached = _fusion_engine.hypothetical_fusion(producer, consumer)
            want = figures(model.estimate(detached, device))
            _fusion_engine.discard_fusion(detached)
        with real(producer, consumer) as grown:
            if want is not None:
                seen["priced"] += 1
                got = figures(model.estimate(grown, device))
                if got != want:
                    bad.append(f"{producer.name} into {consumer.name}: {got} != {want}")
            yield grown
        if before is not None and _trial_state(producer, consumer) != before:
            bad.append(f"{producer.name} into {consumer.name}: the module changed")

    monkeypatch.setattr(fusion_engine, "trial_fusion", checked_trial)
    return seen, bad


def test_trial_fusions_price_as_detached_fusions_and_leave_the_module_as_it_was(checked_trials):
    """(On diffrax's real run: `test_every_growth_of_a_real_fusion_run_matches_the_full_analysis`.)"""
    seen, bad = checked_trials
    simulate_fusion(parse_hlo(_synthetic_solver()), device="h100-sxm", model="roofline", price_totals=False)
    assert not bad, bad[:5]
    assert seen["priced"] >= 10, seen


def _counting_trials(monkeypatch) -> dict:
    """Count the trial fusions made from now on (`fusion_engine.trial_fusion`, as `estimate_fused` reaches it)."""
    trials = {"n": 0}
    real = _fusion_engine.trial_fusion

    def counted(producer, consumer):
        trials["n"] += 1
        return real(producer, consumer)

    monkeypatch.setattr(fusion_engine, "trial_fusion", counted)
    return trials


@pytest.mark.parametrize("source", ["synthetic", "linalg.pre.hlo", "gather_scatter.pre.hlo"])
def test_fusion_result_is_the_same_without_trial_fusions(source, monkeypatch):
    from xla_costmodel.models import _base

    text = _synthetic_solver() if source == "synthetic" else (GPU_H100.parent / source).read_text()

    def run():
        r = simulate_fusion(parse_hlo(text), device="h100-sxm", model="roofline", price_totals=False)
        return r.module.to_text(), r.steps

    with monkeypatch.context() as m:
        trials = _counting_trials(m)
        fast_text, fast_steps = run()
    with monkeypatch.context() as m:
        m.setattr(_base, "prices_trial_fusions", lambda model: False)
        off = _counting_trials(m)
        slow_text, slow_steps = run()
    assert fast_text == slow_text
    assert fast_steps.equals(slow_steps)
    assert off["n"] == 0
    if source == "synthetic":
        assert trials["n"] > 0


def test_only_a_model_that_promises_it_is_given_trial_fusions(monkeypatch):
    """A subclass that keeps what it saw of a kernel says so by not promising; it gets detached fusions."""
    import xla_costmodel as xc
    from xla_costmodel.models import RooflineModel, prices_trial_fusions

    class Remembering(RooflineModel):
        prices_trial_fusions = False

    assert prices_trial_fusions(xc.get_model("roofline"))
    model = Remembering()
    assert not prices_trial_fusions(model)
    text = _synthetic_solver()
    trials = _counting_trials(monkeypatch)
    simulate_fusion(parse_hlo(text), device="h100-sxm", model="roofline", price_totals=False)
    promised = trials["n"]
    simulate_fusion(parse_hlo(text), device="h100-sxm", model=model, price_totals=False)
    assert promised > 0 and trials["n"] == promised


def test_a_trial_needs_a_large_fusion_built_here():
    module = parse_hlo(_synthetic_solver())
    x = next(h for h in module.entry.instructions if h.opcode == "multiply")
    user = x.users[0]
    assert not _fusion_engine.can_try_fusion(x, user)  # not a fusion
    with pytest.raises(ValueError, match="cannot try fusing"):
        with _fusion_engine.trial_fusion(x, user):
            pass


def test_estimate_fusion_prices_a_trial_as_a_detached_fusion(monkeypatch):
    """`FusionByMaterializing.estimate_fusion` (the roofline's) grows a large consumer in place for the
    call: the same figures as from the detached fusion, and the module as it was."""
    import xla_costmodel as xc
    from xla_costmodel.models import RooflineModel

    class Detached(RooflineModel):
        prices_trial_fusions = False

    # priority fusion's kernels (multi-output fusion would leave producers read through get-tuple-elements), of
    # the module as lowered (CSE would merge the repeated solver steps whose large fusions the trials grow; the
    # simplifier leaves no fusion of 48 instructions or more, `TRACK_GROWTH_FROM`, reading another kernel)
    module = simulate_fusion(parse_hlo(gzip.open(DIFFRAX, "rt").read()), device="h100-sxm", model="xla-gpu",
                             price_totals=False, multi_output=False, cse=False, simplify=False).module
    pairs = [(o, k) for comp in module.computations for k in comp.instructions if k.opcode == "fusion"
             for o in k.operands if o.opcode not in ("parameter", "constant", "get-tuple-element")
             and _fusion_engine.can_try_fusion(o, k)][:20]
    assert len(pairs) >= 5
    text = module.to_text()
    device = xc.get_device("h100-sxm")
    trials = _counting_trials(monkeypatch)
    for producer, consumer in pairs:
        got = xc.get_model("roofline").estimate_fusion(producer, [consumer], device)
        assert trials["n"] > 0  # (priced by a trial)
        trials["n"] = 0
        want = Detached().estimate_fusion(producer, [consumer], device)
        assert trials["n"] == 0
        assert got == want
        assert module.to_text() == text


def test_the_softmax_rewriters_dropped_computations_are_not_fused(monkeypatch):
    """Without the simplifier and CSE, the softmax rewriter's own simplification (`simplify_for_matching`)
    drops what it leaves unreachable, here a dead scatter's combiner: priority fusion then runs on the
    computations left (it once ran on the dropped one and raised), through growths and trial fusions, its
    result the same without them."""
    text = gzip.open(DIFFRAX, "rt").read()
    grown = {"n": 0}
    grow = _fusion_growth.grow

    def counted_grow(*a):
        grown["n"] += 1
        return grow(*a)

    def run():
        r = simulate_fusion(parse_hlo(text), device="h100-sxm", model="roofline", price_totals=False,
                            triton_softmax=True, gemm_rewrites=True, simplify=False, cse=False, multi_output=False)
        return r.module.to_text(), r.steps

    with monkeypatch.context() as m:
        m.setattr(_fusion_growth, "grow", counted_grow)
        trials = _counting_trials(m)
        fast_text, fast_steps = run()
    assert grown["n"] >= 1000 and trials["n"] >= 40, (grown, trials)  # it went through growths and trials
    with monkeypatch.context() as m:
        m.setattr(_fusion_engine, "TRACK_GROWTH_FROM", 10**9)
        slow_text, slow_steps = run()
    assert fast_text == slow_text
    assert fast_steps.equals(slow_steps)
