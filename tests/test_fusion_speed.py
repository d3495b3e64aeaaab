"""The fast pricing paths of `simulate_fusion` give exactly what the slow ones give.

- `XlaGpuModel.fusion_pricer` (per-instruction records kept per version, pair
  prices from the two records, as XLA's `GpuPerformanceModelCache` does) against
  `XlaGpuModel.estimate_fusion(P, [C])` (every kernel re-analysed) on every
  producer-consumer pair of every fixture, before and after fusion;
- whole simulations with the pricer against the same model seen only through
  `estimate` / `estimate_fusion`: same steps, priorities, fused module, totals.
"""

from __future__ import annotations

import gzip
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from xla_costmodel import parse_hlo, simulate_fusion
from xla_costmodel.devices import get_device
from xla_costmodel.fusion import fusible_computations
from xla_costmodel.hlo import load_hlo
from xla_costmodel.models import XlaGpuModel

from conftest import fixture_paths

DEVICE = get_device("h100-sxm")
PRE = fixture_paths("*.pre.hlo")


def _pairs(module):
    for comp in fusible_computations(module):
        for producer in comp.instructions:
            if producer.opcode in ("parameter", "tuple", "get-tuple-element"):
                continue
            for consumer in producer.users:
                if consumer.opcode not in ("tuple", "get-tuple-element", "parameter"):
                    yield producer, consumer


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("path", PRE, ids=lambda p: p.name.split(".")[0])
def test_pair_pricer_equals_estimate_fusion_on_every_fixture_pair(path):
    model = XlaGpuModel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unfused = load_hlo(path)
        fused = simulate_fusion(unfused, device=DEVICE, model=model, price_totals=False).module
        n = 0
        for module in (unfused, fused):  # plain pairs, then pairs with fusions on either side
            pricer = model.fusion_pricer(DEVICE)
            for producer, consumer in _pairs(module):
                est = model.estimate_fusion(producer, [consumer], DEVICE)
                fast = pricer.pair(producer, consumer)
                slow = (est.producer_s, est.consumers_s[0], est.fused_consumers_s[0])
                assert all(_same(a, b) for a, b in zip(fast, slow)), (producer.name, consumer.name, fast, slow)
                n += 1
    assert n > 0


@dataclass(frozen=True)
class _SlowPath:
    """The same model seen only through the `CostModel` protocol (no pair pricer)."""

    model: object
    name: str = "slow"

    def estimate(self, kernel, device):
        return self.model.estimate(kernel, device)

    def estimate_fusion(self, producer, consumers, device):
        return self.model.estimate_fusion(producer, consumers, device)


@dataclass(frozen=True)
class _SlowPathWithMultiOutput(_SlowPath):
    """`_SlowPath` of a model that prices multi-output fusions itself (`EstimatesMultiOutputFusion`)."""

    def estimate_multi_output_fusion(self, producer, consumer, device):
        return self.model.estimate_multi_output_fusion(producer, consumer, device)


#: XLA's GEMM rewriting and SoftmaxRewriterTriton (opt-in): generic Triton fusions, priced pair by pair
REWRITES = {"gemm_rewrites": True, "triton_softmax": True}


def _fast_and_slow(name: str, model, slow_model, slow_path=_SlowPath, **options):
    """`simulate_fusion` of fixture `name` with `model` and with `slow_model` seen through `slow_path`;
    asserts that everything but the number of model calls is the same. **Returns:** both results."""
    m = load_hlo(fixture_paths(f"{name}.pre.hlo")[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = simulate_fusion(m, device=DEVICE, model=model, **options)
        slow = simulate_fusion(m, device=DEVICE, model=slow_path(slow_model), **options)
    assert fast.steps.equals(slow.steps)
    assert fast.rejected.equals(slow.rejected)
    assert fast.module.to_text() == slow.module.to_text()
    assert dict(fast.origin) == dict(slow.origin)
    for field in ("time_before_s", "time_after_s", "kernels_before", "kernels_after", "unpriced_before",
                  "unpriced_after"):
        assert getattr(fast, field) == getattr(slow, field), field
    return fast, slow


@pytest.mark.parametrize(
    "name", ["transformer_fwd", "layernorm_softmax", "mlp_grad", "cnn_grad", "gather_scatter", "reductions",
             "dtypes_mixed", "while_loop"],
)
@pytest.mark.parametrize("options", [{}, REWRITES], ids=["plain", "rewrites"])
def test_simulation_with_the_pricer_equals_the_slow_path(name, options):
    fast, slow = _fast_and_slow(name, "xla-gpu", XlaGpuModel(), slow_path=_SlowPathWithMultiOutput, **options)
    # The fast path prices each distinct kernel content once (`prices_by_content`).
    assert 0 < fast.model_calls <= slow.model_calls


@pytest.mark.parametrize("name", ["transformer_fwd", "mlp_grad", "gather_scatter", "while_loop"])
def test_roofline_priced_by_content_equals_priced_per_instruction(name):
    """The materializing path (roofline) with and without content-keyed price caches."""
    from xla_costmodel.models import RooflineModel

    _fast_and_slow(name, "roofline", RooflineModel())


@pytest.mark.parametrize("options", [{}, REWRITES], ids=["plain", "rewrites"])
def test_combined_model_priced_by_content_equals_priced_per_instruction(options):
    from xla_costmodel.models import get_model

    from xla_costmodel.models import CombinedModel

    model = get_model("min(xla-gpu,roofline)")
    assert model.prices_by_content
    fast, slow = _fast_and_slow("transformer_fwd", model, model, **options)  # two equal layers

    class PerInstruction(CombinedModel):
        @property
        def prices_by_content(self) -> bool:
            return False

    per_instruction = PerInstruction(model.models, rule=model.rule)
    same, _ = _fast_and_slow("transformer_fwd", per_instruction, model, **options)
    # Each member priced by pair either way; keyed by content, the second layer's pairs cost nothing.
    assert 0 < fast.model_calls < same.model_calls


def test_repeated_layers_are_priced_once():
    """Doubling the identical middle layers barely adds model calls: prices are keyed by content."""
    import jax

    from xla_costmodel.hlo import parse_hlo
    from xla_costmodel.zoo import transformer_grad

    calls = {}
    for layers in (4, 8):
        fn, args = transformer_grad(layers)
        m = parse_hlo(jax.jit(fn).lower(*args).as_text(dialect="hlo"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calls[layers] = simulate_fusion(m, device=DEVICE, model="xla-gpu").model_calls
    assert calls[8] <= calls[4] * 1.2, calls  # per instruction, it would double


def test_pricer_records_follow_versions():
    """A record is reused while the instruction's version stays, recomputed when it changes."""
    m = load_hlo(fixture_paths("layernorm_softmax.pre.hlo")[0])
    model = XlaGpuModel()
    versions: dict = {}
    pricer = model.fusion_pricer(DEVICE, version=lambda i: versions.get(i, 0))
    producer, consumer = next(_pairs(m))
    first = pricer.kernel(consumer)
    assert pricer.kernel(consumer) is first
    versions[consumer] = 1
    assert pricer.kernel(consumer) is not first and pricer.kernel(consumer) == first
    pricer.invalidate(consumer)
    assert pricer.kernel(consumer) == first


@pytest.mark.parametrize("options", [{}, {"gemm_rewrites": True, "triton_softmax": True}],
                         ids=["defaults", "rewritten"])
def test_simulation_leaves_no_cyclic_garbage_of_instructions(options, monkeypatch):
    """Dropped fusion bodies, hypothetical fusions and the pass's caches are unlinked, not left to the
    cyclic collector (which would then walk hundreds of thousands of objects after a big module)."""
    import gc

    from xla_costmodel.fusion import _simulate
    from xla_costmodel.hlo import HloInstruction

    # The softmax diamonds' decisions are kept between runs (by text): start cold, so that they are made here.
    monkeypatch.setattr(_simulate, "_SOFTMAX_DECISIONS", {})
    m = load_hlo(fixture_paths("transformer_fwd.pre.hlo")[0])
    gc.collect()
    was = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = simulate_fusion(m, device=DEVICE, model="xla-gpu", **options)
        gc.collect()
        leaked = [o for o in gc.garbage if isinstance(o, HloInstruction)]
    finally:
        gc.set_debug(was)
        gc.garbage.clear()
    assert len(result.steps) > 20
    # Only copies of `call`ed computations, dropped after the CallInliner step, may remain in cycles.
    callees = {c.name for _, i in m.instructions() if i.opcode == "call" for c in i.called_computations}
    inlined = {i.name for c in m.computations if c.name in callees for i in c.instructions}
    assert callees
    assert {i.name for i in leaked} <= inlined, sorted({i.name for i in leaked} - inlined)[:10]


@pytest.mark.parametrize("path", PRE, ids=lambda p: p.name.split(".")[0])
def test_lean_module_totals_equal_the_kernel_table(path):
    """`simulate_fusion`'s totals (`module_time`, no table) are what `price_module(...).summary()` gives."""
    from xla_costmodel.models import RooflineModel
    from xla_costmodel.models._analyze import module_time, price_module

    m = load_hlo(path)
    for model in (XlaGpuModel(), RooflineModel()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = price_module(m, DEVICE, model).summary()
            total, kernels, unpriced = module_time(m, DEVICE, model)
        assert (total, kernels, unpriced) == (s["total_s"], s["kernels"], s["unpriced"])


def test_pair_cache_entries_hold_for_one_version_of_each_side():
    from xla_costmodel.fusion._pair_cache import PairCache

    m = load_hlo(fixture_paths("layernorm_softmax.pre.hlo")[0])
    producer, consumer = next(_pairs(m))
    cache = PairCache()
    assert cache.get(producer, 0, consumer, 0) is None
    cache.put(producer, 0, consumer, 0, "v0")
    assert cache.get(producer, 0, consumer, 0) == "v0"
    assert cache.get(producer, 0, consumer, 1, "miss") == "miss"  # the consumer grew
    assert cache.get(producer, 1, consumer, 0, "miss") == "miss"  # the producer grew
    cache.put(producer, 0, consumer, 1, "v1")  # replaces, does not pile up
    assert cache.entries(producer) == {consumer: (0, 1, "v1")}


_GPU_H100 = Path(__file__).resolve().parents[1] / "hlo_fixtures" / "gpu_h100"
# Fused bodies whose utilizations or flops are not small integers (slices of a third or a half, flops
# above 2**24): the float32 utilization walk runs for them (for halves, only when made to).
_F32_WALK_MODULES = ["jax_random_sampling@small.post.hlo.gz", "pix_color_augment@large.post.hlo.gz"]


@pytest.mark.parametrize("name", _F32_WALK_MODULES)
def test_float32_walk_on_python_floats_equals_the_numpy_walk(name, monkeypatch):
    """`_GpuAnalysis._f32_utilizations_fast` (float32 operations done in double and rounded through
    `struct`) gives every record, utilization and sum the numpy-scalar walk gives, to the bit."""
    from xla_costmodel.analysis import _gpu
    from xla_costmodel.analysis._kernel import kernel_cost

    module = parse_hlo(gzip.open(_GPU_H100 / name, "rt").read())
    fusions = [i for c in module.computations for i in c.instructions if i.opcode == "fusion"]
    # (halves are fine fractions, walked in exact arithmetic: the float32 walk is made to run for them)
    monkeypatch.setattr(_gpu._GpuAnalysis, "_integral_utilizations", lambda self, comp, order, p: None)
    walks = {"fast": 0}
    fast = _gpu._GpuAnalysis._f32_utilizations_fast

    def counted(self, *args):
        walks["fast"] += 1
        return fast(self, *args)

    def costs():
        out = []
        for f in fusions:
            c = kernel_cost(f, "gpu", DEVICE)
            recs = [tuple(c._an._records[h][:4]) + (tuple(c._an._records[h][4]), tuple(c._an._records[h][5]),
                                                    c._an._records[h][6], c._an._records[h][9])
                    for h in [f, *f.fused_computation.instructions]]
            out.append((c.flops, c.transcendentals, c.bytes_accessed, c.operand_bytes, c.operand_utilization,
                        tuple(recs)))
        return out

    with monkeypatch.context() as m:
        m.setattr(_gpu._GpuAnalysis, "_f32_utilizations_fast", counted)
        got = costs()
    assert walks["fast"] > 0  # the float32 walk did run
    with monkeypatch.context() as m:
        m.setattr(_gpu._GpuAnalysis, "_f32_utilizations_fast",
                  lambda self, *args: (_ for _ in ()).throw(OverflowError()))
        want = costs()
    assert got == want


def test_multi_output_hero_search_skipped_only_where_it_finds_nothing(monkeypatch):
    """Multi-output fusion skips a hero search for an opcode the fused body lacks: the same result
    as searching every body."""
    from xla_costmodel.fusion import _multi_output

    module = parse_hlo(gzip.open(_GPU_H100 / "jax_random_sampling@small.pre.hlo.gz", "rt").read())

    def run():
        r = simulate_fusion(module, device="h100-sxm", model="xla-gpu", price_totals=False)
        return r.module.to_text(), r.steps, r.multi_output

    fast = run()
    with monkeypatch.context() as m:
        m.setattr(_multi_output, "select_in_body", lambda body, opcodes: (True,))  # always search
        slow = run()
    assert fast[0] == slow[0]
    assert fast[1].equals(slow[1])
    assert fast[2].equals(slow[2]) and len(fast[2])


# Fused pairs with a reduce, concatenate or gather on a side (map_coordinates: gathers behind a concatenate
# that is no hero; random_sampling: concatenates in producers), whose prices the pricer tells without
# building the fused kernel (`fused_loop_launch` with `LaunchFacts.exposed`, `pair_access`).
_NO_BUILD_MODULES = ["jax_scipy_map_coordinates@small.pre.hlo.gz", "jax_random_sampling@small.pre.hlo.gz",
                     "jax_scipy_special@large.pre.hlo.gz"]


@pytest.mark.parametrize("name", _NO_BUILD_MODULES)
def test_pair_prices_told_without_building_equal_the_built_kernels(name, monkeypatch):
    """Every pair price of a simulation equals `fused_estimate` of the fused kernel built (no launch facts,
    so the grid and the per-operand access rule are those of the kernel itself), and pairs with a
    special op or a gather on a side were priced without building it."""
    from xla_costmodel.models import _xla_gpu_fusion

    module = parse_hlo(gzip.open(_GPU_H100 / name, "rt").read())
    fused_estimate = _xla_gpu_fusion.fused_estimate
    materialize = _xla_gpu_fusion.materialize_fusion
    seen = {"pairs": 0, "built": 0, "compared": 0}

    def counted_materialize(producer, consumer):
        seen["built"] += 1
        return materialize(producer, consumer)

    def checked(model, producer, consumer, device, pc, cc, *args, **kwargs):
        facts = kwargs.get("facts")
        before = seen["built"]
        got = fused_estimate(model, producer, consumer, device, pc, cc, *args, **kwargs)
        if facts is not None and (facts[0].special or facts[1].special or facts[0].access or facts[1].access):
            seen["pairs"] += 1
            built = seen["built"]
            want = fused_estimate(model, producer, consumer, device, pc, cc, time_only=True)
            seen["built"] = before + (built > before)  # the reference's build not counted
            assert got == want, (producer.name, consumer.name, got, want)
            seen["compared"] += 1
        return got

    with monkeypatch.context() as m:
        m.setattr(_xla_gpu_fusion, "materialize_fusion", counted_materialize)
        m.setattr(_xla_gpu_fusion, "fused_estimate", checked)
        simulate_fusion(module, device="h100-sxm", model="xla-gpu", price_totals=False)
    assert seen["compared"] > 100
    assert seen["built"] < seen["pairs"]


_EXPOSURE_HLO = """
HloModule exposure

fused_hidden {
  p0 = f32[64,4]{1,0} parameter(0)
  p1 = s32[16,1]{1,0} parameter(1)
  p2 = s32[16,1]{1,0} parameter(2)
  idx = s32[32,1]{1,0} concatenate(p1, p2), dimensions={0}
  ROOT g = f32[32,4]{1,0} gather(p0, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
}

fused_exposed {
  q0 = f32[16,4]{1,0} parameter(0)
  q1 = f32[16,4]{1,0} parameter(1)
  c = f32[32,4]{1,0} concatenate(q0, q1), dimensions={0}
  ROOT n = f32[32,4]{1,0} negate(c)
}

fused_consumer {
  r0 = f32[32,4]{1,0} parameter(0)
  r1 = s32[8,1]{1,0} parameter(1)
  r2 = s32[8,1]{1,0} parameter(2)
  i = s32[16,1]{1,0} concatenate(r1, r2), dimensions={0}
  gg = f32[16,4]{1,0} gather(r0, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
  r3 = f32[16,4]{1,0} parameter(3)
  ROOT a = f32[16,4]{1,0} add(gg, r3)
}

fused_adder {
  w0 = f32[32,4]{1,0} parameter(0)
  w1 = f32[32,4]{1,0} parameter(1)
  ROOT b = f32[32,4]{1,0} add(w0, w1)
}

ENTRY e {
  t = f32[64,4]{1,0} parameter(0)
  i1 = s32[16,1]{1,0} parameter(1)
  i2 = s32[16,1]{1,0} parameter(2)
  x = f32[32,4]{1,0} parameter(3)
  h1 = f32[16,4]{1,0} parameter(4)
  h2 = f32[16,4]{1,0} parameter(5)
  j1 = s32[8,1]{1,0} parameter(6)
  j2 = s32[8,1]{1,0} parameter(7)
  y = f32[16,4]{1,0} parameter(8)
  hidden = f32[32,4]{1,0} fusion(t, i1, i2), kind=kLoop, calls=fused_hidden
  neg = f32[32,4]{1,0} negate(x)
  exposed = f32[32,4]{1,0} fusion(h1, h2), kind=kInput, calls=fused_exposed
  k1 = f32[16,4]{1,0} fusion(hidden, j1, j2, y), kind=kLoop, calls=fused_consumer
  k2 = f32[16,4]{1,0} fusion(neg, j1, j2, y), kind=kLoop, calls=fused_consumer
  k3 = f32[16,4]{1,0} fusion(exposed, j1, j2, y), kind=kLoop, calls=fused_consumer
  k4 = f32[32,4]{1,0} fusion(exposed, x), kind=kLoop, calls=fused_adder
  ROOT out = (f32[16,4]{1,0}, f32[16,4]{1,0}, f32[16,4]{1,0}, f32[32,4]{1,0}) tuple(k1, k2, k3, k4)
}
"""


def test_launch_and_access_told_from_the_two_sides_equal_the_built_kernels():
    """`fused_loop_launch` (heroes: the consumer's own, when the producer's special ops are out of the
    hero search's reach, or the search from the consumer's roots never reaches them) and `pair_access` (an
    operand read through a pass-through producer by a gather of the consumer) against the fused kernel
    built: its `launch_dimensions` and `kernel_coalescing`."""
    from xla_costmodel.analysis.emission import launch_facts
    from xla_costmodel.models._base import materialize_fusion
    from xla_costmodel.models._coalescing import kernel_coalescing, operand_access, pair_access
    from xla_costmodel.models._launch import fused_loop_launch, launch_dimensions

    module = parse_hlo(_EXPOSURE_HLO)
    by_name = {i.name: i for i in module.entry.instructions}
    facts = {n: launch_facts(by_name[n]) for n in ("hidden", "neg", "exposed", "k1")}
    assert facts["hidden"].special and not facts["hidden"].exposed  # its concatenate only indexes a gather
    assert facts["exposed"].special and facts["exposed"].exposed  # a concatenate behind a negate
    assert facts["k1"].special and facts["k1"].access and not facts["k1"].exposed
    told = 0
    for p, c in (("hidden", "k1"), ("neg", "k2"), ("exposed", "k3"), ("exposed", "k4")):
        producer, consumer = by_name[p], by_name[c]
        fused = materialize_fusion(producer, consumer)
        built = launch_dimensions(fused, DEVICE)
        fast = fused_loop_launch(producer, consumer, DEVICE, launch_facts(producer), launch_facts(consumer), 4)
        if fast is not None:
            told += 1
            assert (fast.emitter, fast.num_blocks, fast.threads_per_block, fast.unroll) == \
                (built.emitter, built.num_blocks, built.threads_per_block, built.unroll), (p, c)
            coal = kernel_coalescing(fused, built.emitter, DEVICE, producer=producer, consumer=consumer)
            want = {id(o) for o, ok in zip(fused.operands, coal.coalesced) if not ok}
            got = pair_access(producer, consumer, operand_access(producer, DEVICE), operand_access(consumer, DEVICE))
            assert got == want, (p, c)
            if p == "neg":
                assert id(by_name["x"]) in got  # gathered by the consumer through the negate
        else:
            assert built.emitter == "concatenate"  # the producer's concatenate became the hero
    assert told == 3  # the exposed concatenate only where the consumer's root reaches it (k4): built


@pytest.mark.parametrize("options", [{}, REWRITES], ids=["plain", "rewrites"])
@pytest.mark.parametrize("name", ["transformer_grad", "gather_scatter", "rng", "mlp_grad"])
def test_incremental_updates_that_ask_only_new_consumers_equal_walking_every_user(name, options, monkeypatch):
    """A queued producer updated incrementally asks `CanFuse` of the step's new consumers only
    (`_priority.PriorityFusionRun._new_consumers_fuse`); walking every user for the first rejection,
    as XLA's `CanFuseWithAllNonBitcastUsers` does, gives the same pass: steps, log, rejections, module."""
    from xla_costmodel.fusion._priority import PriorityFusionRun

    m = load_hlo(fixture_paths(f"{name}.pre.hlo")[0])
    answers: list[bool] = []
    short_cut = PriorityFusionRun._new_consumers_fuse

    def counted(self, producer, new_consumers):
        answers.append(short_cut(self, producer, new_consumers))
        return answers[-1]

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return simulate_fusion(m, device=DEVICE, model="xla-gpu", price_totals=False, **options)

    monkeypatch.setattr(PriorityFusionRun, "_new_consumers_fuse", counted)
    fast = run()
    monkeypatch.setattr(PriorityFusionRun, "_new_consumers_fuse", lambda self, producer, new_consumers: False)
    walked = run()
    assert True in answers  # the short cut was taken
    # (with XLA's GEMM rewriting and SoftmaxRewriterTriton, no new consumer of transformer_grad's is
    # rejected: the same pass, with nothing for the walk to find there)
    if name == "gather_scatter" or (name == "transformer_grad" and not options):
        assert False in answers  # and a new consumer was rejected: every user walked for the first rejection
    assert fast.steps.equals(walked.steps)
    assert fast.log.equals(walked.log)
    assert fast.rejected.equals(walked.rejected)
    assert fast.module.to_text() == walked.module.to_text()


@pytest.mark.parametrize("name", ["jax_random_sampling@small", "pix_color_augment@large"])
def test_kernels_of_one_content_are_analysed_once_with_the_same_results(name, monkeypatch):
    """The pair pricer takes a kernel's record from an earlier kernel of the same content (its costs
    pinned to the body they were made for): the fused module, its steps and every pair price are
    those of analysing each kernel itself, and the sharing did happen."""
    from xla_costmodel.models import _xla_gpu_fusion

    text = gzip.open(_GPU_H100 / f"{name}.pre.hlo.gz", "rt").read()
    pricer = _xla_gpu_fusion.XlaGpuPairPricer
    real_kernel_time = XlaGpuModel._kernel_time
    prices: dict[str, list] = {"shared": [], "own": []}
    calls = {"shared": 0, "own": 0}

    def run(mode):
        def kernel_time(self, instr, device, cache):
            calls[mode] += 1
            return real_kernel_time(self, instr, device, cache)

        real_pair = pricer.pair

        def pair(self, producer, consumer):
            v = real_pair(self, producer, consumer)
            prices[mode].append((producer.name, consumer.name, v))
            return v

        with monkeypatch.context() as m:
            m.setattr(XlaGpuModel, "_kernel_time", kernel_time)
            m.setattr(pricer, "pair", pair)
            if mode == "own":
                real_init = pricer.__init__
                m.setattr(pricer, "__init__", lambda self, model, device, version=None, content=None:
                          real_init(self, model, device, version, None))
            r = simulate_fusion(parse_hlo(text), device=DEVICE, model="xla-gpu", price_totals=False)
        return r.module.to_text(), r.steps

    shared_text, shared_steps = run("shared")
    own_text, own_steps = run("own")
    assert shared_text == own_text and shared_steps.equals(own_steps)
    assert prices["shared"] == prices["own"]
    assert calls["shared"] < 0.9 * calls["own"], calls


def test_pinned_costs_answer_for_the_body_they_were_made_for():
    """`KernelCosts.pinned`: after the kernel grows in place, its pinned costs still give the
    parameter answers of the body they were made for (the live ones read the grown body)."""
    from xla_costmodel.fusion_engine import fuse
    from xla_costmodel.models._kernel_costs import CostContext, kernel_costs

    text = """HloModule m

ENTRY e {
  a = f32[64] parameter(0)
  b = f32[64] parameter(1)
  c = f32[64] parameter(2)
  p = f32[64] multiply(a, b)
  q = f32[64] add(p, c)
  ROOT r = f32[64] subtract(q, a)
}
"""
    module = parse_hlo(text)
    comp = module.entry
    q, r = comp.instruction("q"), comp.instruction("r")
    fusion = fuse(q, r)
    costs = kernel_costs(fusion, CostContext(DEVICE))
    pinned = costs.pinned()
    n = len(fusion.operands)
    before = [[pinned.common_parameter_utilization(i, j) for j in range(n)] for i in range(n)]
    from_root = [pinned.parameter_elementwise_from_root(i) for i in range(n)]
    assert before == [[costs.common_parameter_utilization(i, j) for j in range(n)] for i in range(n)]
    assert from_root == [costs.parameter_elementwise_from_root(i) for i in range(n)] and any(from_root)
    fuse(comp.instruction("p"), fusion)  # grows in place: its parameters change
    assert [[pinned.common_parameter_utilization(i, j) for j in range(n)] for i in range(n)] == before
    assert [pinned.parameter_elementwise_from_root(i) for i in range(n)] == from_root
