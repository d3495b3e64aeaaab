"""The fusion conformance harness: our priority fusion against XLA:GPU's own log and output.

The tests that compile need the CUDA plugin (`jax_plugins.xla_cuda12`, the `test` extra); they
regenerate XLA's dumps with a deviceless compile and skip with a reason where it is missing."""

from __future__ import annotations

import math

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xla_costmodel.fusion import _conformance as conf  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.fusion import simulate_fusion  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402

needs_plugin = pytest.mark.skipif(not gpu_compile_available(),
                                  reason="jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")

LOG = """fusion_steps {
  update_priority {
    producer_name: "reduce-window.7"
    consumer_names: "slice.7"
    consumer_names: "add.8"
    us_fused: 2.497
    us_unfused: 3.531
  }
}
fusion_steps {
  producer_ineligible {
    producer_name: "slice.7"
    reason: "not fusing because there are only bitcast users"
  }
}
fusion_steps {
  fusion {
    fusion_name: "fusion.1"
    producer_name: "bitcast.4"
    consumer_name: "pad.1"
  }
}
"""


def test_read_fusion_log():
    log = conf.read_fusion_log(LOG)
    assert list(log.event) == ["price", "ineligible", "fusion"]
    assert log.consumers[0] == "slice.7, add.8"
    assert log.time_unfused_s[0] == pytest.approx(3.531e-6) and log.time_fused_s[0] == pytest.approx(2.497e-6)
    assert conf.xla_reason_rule(log.detail[1]) == "only-bitcast-users"
    assert (log.fusion[2], log.producer[2], log.consumers[2]) == ("fusion.1", "bitcast.4", "pad.1")


@pytest.mark.parametrize("reason, rule", [
    ("the producer is not fusible", "producer-not-fusible"),
    ("the consumer is not fusible", "consumer-not-fusible"),
    ("fusion into output of a reduce fusion would create a loop fusion", "reduction-epilogue"),
    ("do not fuse into the in-place operand of scatter", "scatter-in-place-operand"),
    ("both the producer and the consumer contain a reduce", "reduce-into-reduce"),
])
def test_xla_reasons_map_to_our_rules(reason, rule):
    from xla_costmodel.fusion import RULES

    assert conf.xla_reason_rule(reason) == rule and rule in RULES


def test_our_log_has_every_price_and_fusion():
    """The log holds a price per candidate at queue start and per update, and one fusion event per
    (producer, consumer) fused: the step log's fusions are all in it."""
    r = simulate_fusion(lambda x: jnp.tanh(jnp.exp(x) * 2.0).sum(axis=-1), jnp.ones((64, 128)), device="h100-sxm")
    log = r.log
    fusions = log[log.event == "fusion"]
    # (small constants fused at the end are not in it, as in XLA's)
    fused = r.steps[r.steps.priority_s != -math.inf]
    assert len(fusions) == sum(len(c.split(", ")) for c in fused.consumers if c) > 0
    prices = log[log.event == "price"]
    assert len(prices) >= len(r.steps[r.steps.producer_opcode != "constant"])
    full = prices[~prices.incremental]
    assert (full.time_unfused_s == full.logged_unfused_s).all()


@pytest.fixture(scope="module")
def cumsum_dump():
    if not gpu_compile_available():
        pytest.skip("jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")
    return conf.compile_with_fusion_dumps(jnp.cumsum, [jax.ShapeDtypeStruct((65536,), jnp.float32)], device="h100-sxm")


@needs_plugin
def test_target_config_is_the_one_xla_used(tmp_path):
    dump = conf.compile_with_fusion_dumps(jnp.cumsum, [jax.ShapeDtypeStruct((64,), jnp.float32)], device="a100-80gb",
                                dump_dir=tmp_path)
    cfg = next(tmp_path.glob("*gpu_target_config.pbtxt")).read_text()
    from xla_costmodel.devices import get_device

    d = get_device("a100-80gb")
    assert f"core_count: {d.core_count}" in cfg and f"memory_bandwidth: {int(d.memory_bandwidth_bytes_per_s)}" in cfg
    assert not list(tmp_path.glob("*.ptx")) and not list(tmp_path.glob("*.ll"))  # dumps kept small
    assert dump.kernel_count >= 1


@needs_plugin
def test_cumsum_step_by_step_as_xla(cumsum_dump):
    """XLA's input to priority fusion for cumsum (a tree of short windows): every candidate price XLA
    logs, at queue start and on updates (incremental ones as XLA logs them), has our counterpart
    within 1%, and the kernels after the pass are XLA's."""
    r = conf.compare_fusion_logs(cumsum_dump)
    assert len(r.prices) > 20
    assert r.prices.within.fillna(False).astype(bool).mean() >= 0.95
    assert r.same_partition, r.partition_diff
    assert r.kernels_xla == cumsum_dump.kernel_count
    # at queue start, exactly XLA's prices
    xla_log = conf.read_fusion_log(cumsum_dump.fusion_log_text)
    first_round = xla_log.iloc[: xla_log.index[xla_log.event == "fusion"][0]]
    n0 = int((first_round.event == "price").sum())
    assert r.prices.within.iloc[:n0].astype(bool).all()


@needs_plugin
def test_report_names_the_first_divergence(cumsum_dump):
    """A changed model is caught at the first round it changes, with its cause."""
    r = conf.compare_fusion_logs(cumsum_dump)
    if r.first_divergence is not None:
        rnd, cause, what = r.first_divergence
        assert rnd >= 0 and cause and what
    # a pass priced by another model diverges at the queue start, on prices
    other = conf.compare_fusion_logs(cumsum_dump, model="roofline")
    assert other.first_divergence is not None and other.first_divergence[0] == 0
    assert other.first_divergence[1].startswith("price")
    assert not math.isnan(other.simulate_s)


def test_harness_programs_build():
    for name, build in conf.HARNESS_PROGRAMS.items():
        fn, args = build()
        assert parse_hlo(jax.jit(fn).lower(*args).as_text(dialect="hlo")).entry is not None, name


@needs_plugin
def test_prices_to_xla_tick_and_ties_broken_as_xla():
    """XLA's terms are single-precision quotients turned into quarter-nanosecond ticks, and
    `min(compute, memory) · 0.95` is scaled as `absl::Duration` does. With that arithmetic every
    price XLA logs for the zoo's scans (`x * 2 + 1` and friends before each) is ours to the tick,
    so producers of equal priority are the same tie for us as for XLA, broken the same way."""
    dump = conf.compile_with_fusion_dumps("zoo:cumulative", device="h100-sxm")
    r = conf.compare_fusion_logs(dump)
    assert len(r.prices) >= 20
    diff = (r.prices[["xla_unfused_us", "xla_fused_us"]].to_numpy()
            - r.prices[["ours_unfused_us", "ours_fused_us"]].to_numpy())
    assert abs(diff).max() < 1e-9, r.prices  # µs: the same number of ticks
    assert r.same_fusion_order and r.first_divergence is None, r.first_divergence


@needs_plugin
def test_triton_softmax_fusions_grow_as_in_xla():
    """XLA's softmax rewriter leaves generic Triton fusions before priority fusion, and priority
    fusion fuses into and out of them (`CanFuseTriton`): legal when Triton can emit the other side
    and the fused pair tiles, priced at the fused pair's best tiling. On the zoo's layer norm and
    softmax XLA ends with one Triton kernel: ours is the same kernel, with XLA's tiling, after the
    same prices and fusions."""
    from xla_costmodel.analysis._tiling import configured_tiling
    from xla_costmodel.fusion._triton_fusion import is_generic_triton

    dump = conf.compile_with_fusion_dumps("zoo:layernorm_softmax", device="h100-sxm")
    r = conf.compare_fusion_logs(dump)
    assert r.first_divergence is None, r.first_divergence
    assert r.same_partition and r.kernels_xla == 1, r.partition_diff
    assert r.prices.within.astype(bool).all()
    ours = simulate_fusion(parse_hlo(dump.before_fusion_text), device="h100-sxm", price_totals=False,
                           unique_ids=dump.unique_ids or None)
    tiling = lambda m: sorted(configured_tiling(i).output_tile  # noqa: E731
                              for i in m.entry.instructions if is_generic_triton(i))
    assert tiling(ours.module) == tiling(parse_hlo(dump.after_fusion_text)) != []


def test_triton_support_follows_xla():
    """`IsTritonSupportedInstruction`'s verdicts on a few instructions (gather never, a row reduce
    of one operand yes, exp on f32 yes, anything on u16 no)."""
    from xla_costmodel.fusion._triton_fusion import triton_support

    m = parse_hlo("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8,16] parameter(0)
  c = f32[] constant(0)
  r = f32[8] reduce(x, c), dimensions={1}, to_apply=add
  ex = f32[8,16] exponential(x)
  p = u16[8,16] parameter(2)
  ei = u16[8,16] multiply(p, p)
  idx = s32[4,1] parameter(1)
  g = f32[4,16] gather(x, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}
  ROOT t = (f32[8], f32[8,16], u16[8,16], f32[4,16]) tuple(r, ex, ei, g)
}
""")
    by = {i.name: i for i in m.entry.instructions}
    assert triton_support(by["r"]) is None and triton_support(by["ex"]) is None
    assert triton_support(by["ei"]).rule == "triton-unsupported"
    assert "Unsupported opcode gather" in triton_support(by["g"]).detail


@needs_plugin
def test_incremental_updates_as_xla_caches_them():
    """XLA re-prices a queued operand of a step's fusions incrementally: its queued priority, plus the
    new consumers' gain, minus the gain of the consumers fused away for which its performance-model
    cache still holds a fused price (`ComputeRuntimesOfRemovedConsumers`; a pair leaves the cache when
    either side changes). The zoo's random-number program, where long chains of shifts and xors
    fuse step by step, is priced as XLA logs it, candidate for candidate, with XLA's kernels."""
    dump = conf.compile_with_fusion_dumps("zoo:rng", device="h100-sxm")
    r = conf.compare_fusion_logs(dump)
    assert len(r.prices) > 1000
    assert r.prices.within.astype(bool).all(), r.prices[~r.prices.within.astype(bool)].head()
    assert r.same_partition, r.partition_diff


def test_fusion_kind_sees_transposes_after_merging_dimensions():
    """f32[2,16,4,8] transposed by {0,2,3,1} moves a 16 x 32 tile once the 4 and 8 that stay together
    are merged: XLA's transpose emitter tiles it, so the fusion holding it is kInput (XLA's kernels
    for the zoo's transformer attention heads)."""
    from xla_costmodel.analysis._emission import fusion_pass_is_tiled_transpose

    m = parse_hlo("""HloModule m
ENTRY e {
  x = f32[2,16,4,8] parameter(0)
  ROOT t = f32[2,4,8,16] transpose(x), dimensions={0,2,3,1}
}
""")
    assert fusion_pass_is_tiled_transpose(m.entry.root)


@needs_plugin
def test_transformer_heads_fuse_into_xla_kernels():
    dump = conf.compile_with_fusion_dumps("zoo:transformer_fwd", device="h100-sxm")
    r = conf.compare_fusion_logs(dump)
    assert r.same_partition, r.partition_diff


def _fusion_log(events) -> "conf.pd.DataFrame":
    text = "".join(f'fusion_steps {{\n  fusion {{\n    fusion_name: "{f}"\n    producer_name: "{p}"\n'
                   f'    consumer_name: "{c}"\n  }}\n}}\n' for p, c, f in events)
    return conf.read_fusion_log(text)


def test_kernels_are_not_confused_by_a_reused_name():
    # zoo:cnn_pool on the A100: our run fused "fusion" away, then named a constant fusion made after
    # the log "fusion" again (XLA never reuses a name); the partition is the same as XLA's.
    body = """HloModule m
fused_add {
  p = f32[8]{0} parameter(0)
  e = f32[8]{0} exponential(p)
  ROOT n = f32[8]{0} negate(e)
}
fused_const {
  c = f32[] constant(0)
  ROOT b = f32[8]{0} broadcast(c), dimensions={}
}
ENTRY main {
  x = f32[8]{0} parameter(0)
  NAME_K = f32[8]{0} fusion(x), kind=kLoop, calls=fused_add
  NAME_C = f32[8]{0} fusion(), kind=kLoop, calls=fused_const
  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(NAME_K, NAME_C)
}"""
    xla = parse_hlo(body.replace("NAME_K", "fusion.2").replace("NAME_C", "fusion.3"))
    ours = parse_hlo(body.replace("NAME_K", "fusion.1").replace("NAME_C", "fusion"))
    px = conf._kernel_sets(xla, _fusion_log([("exponential.1", "negate.1", "fusion.1"),
                                             ("fusion.1", "other.1", "fusion.2")]))
    po = conf._kernel_sets(ours, _fusion_log([("exponential.1", "negate.1", "fusion"),
                                              ("fusion", "other.1", "fusion.1")]))
    assert px == po
    assert frozenset({"exponential.1", "negate.1", "other.1"}) in po and len(po) == 2
