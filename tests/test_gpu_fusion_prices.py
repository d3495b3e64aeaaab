"""The analytical `xla-gpu` path for Triton fusions, colliding scatters and loops, checked against a real H100.

The modules are XLA:GPU's optimized HLO of corpus programs (jax 0.11.2, one H100 80GB HBM3), shipped in
`hlo_fixtures/gpu_h100/`. The measured times pinned here are `min_per_run_s` of the H100 capture's
`corpus_kernels.parquet` row (program, size, hlo_op) named beside each, one launch per run in each case.
The tolerances keep a kernel within 3x of what the H100 measured: the defects fixed here were 1e4x off.
"""

from __future__ import annotations

import gzip
import math
import re
import warnings

import pytest

import xla_costmodel as xc
from xla_costmodel.analysis._kernel import computes_each_instruction_once, kernel_cost
from xla_costmodel.analysis._tiling import Tile, TilingError, _bitcast_tile, configured_tiling, propagate
from xla_costmodel.devices import get_device
from xla_costmodel import analyze
from xla_costmodel.models import get_model
from xla_costmodel.models._kernel_costs import ModuleCounts
from xla_costmodel.models._contention import L2_LINE_BYTES, L2_ROUND_TRIP_CYCLES, scatter_contention

from conftest import ROOT

H100 = ROOT / "hlo_fixtures" / "gpu_h100"
# Measured on the H100 (corpus_kernels.parquet, min_per_run_s, 1 launch per run):
SOFTMAX_S = 2.5057e-05    # jax_nn_attention_fwd, large, triton_softmax.2
GEMM_S = 7.392e-06        # haiku_mha_grad, large, gemm_fusion_dot.20
SCATTER_S = 4.33682e-03   # numpyro_hier_regression_potential_grad, large, input_scatter_fusion


def _module(name: str):
    return xc.load_hlo(str(H100 / f"{name}.post.hlo.gz"))


def _instr(module, name: str):
    return next(i for _, i in module.instructions() if i.name == name)


def _row(table, kernel: str):
    return table.set_index("kernel").loc[kernel]


@pytest.fixture(scope="module")
def attention():
    return _module("jax_nn_attention_fwd@large")


def _within(predicted: float, measured: float, factor: float) -> bool:
    return measured / factor <= predicted <= measured * factor


def test_a_triton_softmax_is_priced_by_the_tiled_model_near_the_h100(attention):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = analyze(attention, device="h100-sxm", model="xla-gpu")
    row = _row(table, "triton_softmax.2")
    assert row["emitter"] == "triton" and row["priced"]
    assert _within(row["time_s"], SOFTMAX_S, 3.0)  # was 0.34 s (13,500x)
    # The tiles' flops: no per-element recomputation of the row reductions (it was 6.5e12).
    assert row["model_flops"] < 1e10
    # The `flops` column stays XLA's HloCostAnalysis count.
    assert row["flops"] == ModuleCounts(attention)(_instr(attention, "triton_softmax.2")).flops
    est = table.estimates["triton_softmax.2"]
    assert est.details["tiling"] == "backend config"
    assert est.details["tiles"] == ((4, 8, 1, 384),) and est.details["num_warps"] == 8
    assert est.details["num_blocks"] == 4 * 8 * 384 // (4 * 8)


def test_without_its_config_the_search_finds_the_tiling_xla_chose(attention):
    """XLA's `TryFindBestTilingForFusion` on the fusion stripped of its `block_level_fusion_config`."""
    fusion = _instr(attention, "triton_softmax.2")
    text = gzip.decompress((H100 / "jax_nn_attention_fwd@large.post.hlo.gz").read_bytes()).decode()
    stripped = re.sub(r'"block_level_fusion_config":\{[^{}]*\[\{[^{}]*\}\][^{}]*\},', "", text)
    assert stripped != text
    bare = _instr(xc.parse_hlo(stripped), "triton_softmax.2")
    assert configured_tiling(bare) is None and configured_tiling(fusion) is not None
    model, dev = get_model("xla-gpu"), get_device("h100-sxm")
    with_config, searched = model.estimate(fusion, dev), model.estimate(bare, dev)
    assert searched.details["tiling"].startswith("best tiling")
    assert searched.details["tiles"] == with_config.details["tiles"]
    assert searched.time_s == pytest.approx(with_config.time_s, rel=0.01)


def test_a_gemm_fusion_with_a_relayout_bitcast_is_tiled():
    """`gemm_fusion_dot.20`: dot f32[768,1024]{0,1} bitcast to f32[1024,768]{1,0}, a transpose in
    memory order; the tile maps through both layouts instead of failing to propagate."""
    module = _module("haiku_mha_grad@large")
    fusion = _instr(module, "gemm_fusion_dot.20")
    est = get_model("xla-gpu").estimate(fusion, get_device("h100-sxm"))
    assert est.details["emitter"] == "triton" and "tiled_fallback" not in est.details
    assert est.details.get("dot_exec_s", 0) > 0  # priced by XLA's dot-fusion model
    assert _within(est.time_s, GEMM_S, 3.0)


def test_a_bitcast_tile_follows_the_physical_order():
    module = xc.parse_hlo("""HloModule m
ENTRY e {
  p = f32[768,1024]{0,1} parameter(0)
  ROOT b = f32[1024,768]{1,0} bitcast(p)
}""")
    b = module.entry.root
    # Same bytes: the operand's dim 1 (1024) is its major one, as the result's dim 0.
    assert _bitcast_tile(b.operands[0], b, Tile.of((32, 64))) == Tile.of((64, 32))
    plain = xc.parse_hlo("""HloModule m
ENTRY e {
  p = f32[4,256]{1,0} parameter(0)
  ROOT b = f32[1024]{0} bitcast(p)
}""").entry.root
    assert _bitcast_tile(plain.operands[0], plain, Tile.of((256,))) == Tile.of((1, 256))


def test_a_tile_that_cannot_propagate_falls_back_to_the_legacy_model():
    module = xc.parse_hlo("""HloModule m
fused (p0: f32[6,10]) -> f32[4,15] {
  p0 = f32[6,10]{1,0} parameter(0)
  ROOT r = f32[4,15]{1,0} reshape(p0)
}
ENTRY e {
  p = f32[6,10]{1,0} parameter(0)
  ROOT f = f32[4,15]{1,0} fusion(p), kind=kCustom, calls=fused, backend_config={"fusion_backend_config":{"kind":"__triton","block_level_fusion_config":{"num_warps":"1","output_tiles":[{"sizes":["2","4"]}]}}}
}""")
    fusion = module.entry.root
    with pytest.raises(TilingError):
        propagate(fusion, (2, 4))
    est = get_model("xla-gpu").estimate(fusion, get_device("h100-sxm"))
    assert est.priced and est.details["tiled_fallback"].startswith("tiled model:")


# ---------------------------------------------------------------------------------------- scatter

def test_a_colliding_scatter_is_priced_near_the_h100():
    module = _module("numpyro_hier_regression_potential_grad@large")
    fusion = _instr(module, "input_scatter_fusion")
    dev = get_device("h100-sxm")
    est = get_model("xla-gpu").estimate(fusion, dev)
    assert _within(est.time_s, SCATTER_S, 3.0)  # 500,000 updates into 1,000 floats; was 2 µs
    xla = get_model("xla-gpu", atomic_contention=False).estimate(fusion, dev)
    assert xla.time_s < SCATTER_S / 100  # XLA's own model has no such term
    assert est.details["atomic_requests"] == 500_000 and est.details["atomic_target_lines"] == 32


def _scatter(flags: str = "", n: int = 4096, m: int = 64, window: int = 1) -> object:
    upd = f"f32[{n}]" if window == 1 else f"f32[{n},{window}]"
    out = f"f32[{m}]" if window == 1 else f"f32[{m},{window}]"
    wdims = "{}" if window == 1 else "{1}"
    return xc.parse_hlo(f"""HloModule m
add (a: f32[], b: f32[]) -> f32[] {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY e {{
  o = {out} parameter(0)
  i = s32[{n},1] parameter(1)
  u = {upd} parameter(2)
  ROOT s = {out} scatter(o, i, u), update_window_dims={wdims}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add{flags}
}}""").entry.root


def test_the_contention_term_follows_its_documented_form():
    dev = get_device("h100-sxm")
    c = scatter_contention(_scatter(), dev)
    # 4096 scalar updates, one request each, into 64 floats = 2 lines of 128 bytes.
    assert (c.requests, c.target_lines, c.per_line) == (4096, 2, 2048)
    assert c.time_s == pytest.approx(2048 * L2_ROUND_TRIP_CYCLES / (dev.clock_rate_ghz * 1e9))
    # A window of 64 floats (256 bytes) is two requests; the operand 64 x 64 floats, 128 lines.
    w = scatter_contention(_scatter(window=64), dev)
    assert (w.requests, w.target_lines) == (4096 * math.ceil(64 * 4 / L2_LINE_BYTES), 64 * 64 * 4 // 128)
    assert scatter_contention(_scatter(", unique_indices=true"), dev) is None
    assert scatter_contention(_scatter(", indices_are_sorted=true"), dev) is None


def test_fusion_prices_leave_the_contention_term_out():
    """A scatter's kernel estimate waits for its atomics; fusion decisions price it as XLA does,
    without them (XLA's model has no such term, and a scatter that absorbs a producer keeps its
    atomics: counting them on the unfused side only would favour fusing into scatters)."""
    dev = get_device("h100-sxm")
    s = _scatter()
    model = get_model("xla-gpu")
    plain = get_model("xla-gpu", atomic_contention=False)
    assert model.estimate(s, dev).time_s > plain.estimate(s, dev).time_s
    u = s.operands[2]
    est = model.estimate_fusion(u, [s], dev)
    assert est.consumers_s[0] == pytest.approx(plain.estimate(s, dev).time_s, rel=1e-12)
    assert est.consumers_s[0] == model.fusion_pricer(dev).pair(u, s)[1]


# ----------------------------------------------------------------------- recomputation in the counts

_SOFTMAX_BODY = """max (a: f32[], b: f32[]) -> f32[] {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}
fused (p0: f32[64,512]) -> f32[64,512] {
  p0 = f32[64,512]{1,0} parameter(0)
  c = f32[] constant(-inf)
  m = f32[64]{0} reduce(p0, c), dimensions={1}, to_apply=max
  b = f32[64,512]{1,0} broadcast(m), dimensions={0}
  s = f32[64,512]{1,0} subtract(p0, b)
  ROOT x = f32[64,512]{1,0} exponential(s)
}
"""


@pytest.mark.parametrize("kind, once", [("kLoop", False), ("kCustom", True)])
def test_only_elemental_emitters_recompute_through_broadcasts(kind, once):
    config = ', backend_config={"fusion_backend_config":{"kind":"__triton"}}' if kind == "kCustom" else ""
    fusion = xc.parse_hlo(f"""HloModule m
{_SOFTMAX_BODY}
ENTRY e {{
  p = f32[64,512]{{1,0}} parameter(0)
  ROOT f = f32[64,512]{{1,0}} fusion(p), kind={kind}, calls=fused{config}
}}""").entry.root
    assert computes_each_instruction_once(fusion) is once
    base = kernel_cost(fusion, "base").flops
    xla = kernel_cost(fusion, "xla").flops  # HloCostAnalysis: each instruction once
    if once:
        assert base == pytest.approx(xla)
    else:  # the loop emitter recomputes the row max for each of the 512 elements that read it
        assert base > 100 * xla


# --------------------------------------------------------------------------------------- loops

def test_a_total_with_an_unknown_trip_count_is_a_lower_bound_until_given():
    module = xc.load_hlo(str(ROOT / "hlo_fixtures" / "while_loop.pre.hlo"))  # as lowered: no XLA:CPU kernels on a GPU
    loops = [i.name for _, i in module.instructions() if i.opcode == "while"]
    table = analyze(module, device="h100-sxm")
    assert table.total_is_lower_bound and list(table.unknown_loops) == loops
    summary = table.summary()
    assert summary.total_is_lower_bound and "a lower bound" in str(summary)
    assert summary.to_frame()["total_is_lower_bound"].item()
    given = analyze(module, device="h100-sxm", trip_counts=dict.fromkeys(loops, 7))
    assert not given.total_is_lower_bound and "lower bound" not in str(given.summary())
    body = given[given["computation"] == _instr(module, loops[0]).attribute("body").name]
    assert len(body) and (body["executions"] == 7).all() and body["executions_known"].all()
    assert given.total_time_s > table.total_time_s


@pytest.mark.parametrize("bad, error", [({"no_such_loop": 3}, ValueError), ({"__loop__": -1}, ValueError),
                                        ({"__loop__": 2.5}, ValueError), ([("__loop__", 3)], TypeError)])
def test_bad_trip_counts_are_refused(bad, error):
    module = xc.load_hlo(str(ROOT / "hlo_fixtures" / "while_loop.pre.hlo"))  # as lowered: no XLA:CPU kernels on a GPU
    name = next(i.name for _, i in module.instructions() if i.opcode == "while")
    bad = {(name if k == "__loop__" else k): v for k, v in bad.items()} if isinstance(bad, dict) else \
        [(name, 3)]
    with pytest.raises(error):
        analyze(module, device="h100-sxm", trip_counts=bad)


def test_a_triton_fusion_launches_the_grid_cupti_recorded(attention):
    """CUPTI's launch records on the H100 (corpus_kernels.parquet `kernel_details`): triton_softmax.2
    grid 384 x block 256, gemm_fusion_dot.5 grid 576 x block 64 (jax_nn_attention_fwd, large). All 631
    Triton kernels of the capture match the same way."""
    from xla_costmodel.models._launch import launch_dimensions

    dev = get_device("h100-sxm")
    for name, grid, block in (("triton_softmax.2", 384, 256), ("gemm_fusion_dot.5", 576, 64)):
        ld = launch_dimensions(_instr(attention, name), dev)
        assert (ld.emitter, ld.num_blocks, ld.threads_per_block) == ("triton", grid, block)


def test_gemm_fusions_can_take_xlas_own_dispatch(attention):
    """XLA's `CombinedGpuPerformanceModel` sends only generic `__triton` fusions to the tiled model;
    `dot_fusion_model=False` does the same (GEMM fusions priced by the legacy steps)."""
    dev = get_device("h100-sxm")
    tiled, legacy = get_model("xla-gpu"), get_model("xla-gpu", dot_fusion_model=False)
    gemm, softmax = _instr(attention, "gemm_fusion_dot.5"), _instr(attention, "triton_softmax.2")
    assert "dot_exec_s" in tiled.estimate(gemm, dev).details
    assert "tiling" not in legacy.estimate(gemm, dev).details
    assert legacy.estimate(softmax, dev).time_s == tiled.estimate(softmax, dev).time_s


def test_a_gemm_fusion_is_priced_by_the_dot_model_on_its_configured_tile_with_one_launch(attention):
    """As XLA's `EstimateRunTimeForTiledHloComputationImpl` with `GetDotEstimates`: the dot model runs on the
    dot's own tile (propagated from the fusion's output tile), block_k from the lhs operand's tile, the config's
    warps, stages and TMA; its thread blocks are the grid CUPTI recorded on the H100 (corpus_kernels.parquet
    `kernel_details`, as for all 362 Triton GEMMs of the capture); the dot sets the fusion's time and `xla-gpu`
    adds one launch, the only one (the dot model has none)."""
    from xla_costmodel.analysis import int_list_attribute
    from xla_costmodel.analysis.tiling import dot_operand_tiles
    from xla_costmodel.models import estimate_dot, gemm_spec

    dev = get_device("h100-sxm")
    for name, grid in (("gemm_fusion_dot.5", 576), ("gemm_fusion_dot.6", 384)):
        fusion = _instr(attention, name)
        cfg = configured_tiling(fusion)
        tiled = propagate(fusion, cfg.output_tile, block_k=cfg.block_k)
        ti = next(t for t in tiled.instructions if t.hlo.opcode == "dot" and not t.operand)
        bk = dot_operand_tiles(ti.hlo, ti.tile, tiled.block_k)[0][1].sizes[int_list_attribute(ti.hlo, "lhs_contracting_dims")[0]]
        sizes = ti.tile.sizes
        e = estimate_dot(gemm_spec(ti.hlo), math.prod(sizes[:-2]), sizes[-2], sizes[-1], bk, cfg.num_warps,
                         cfg.num_stages, dev, cfg.is_tma_allowed)
        assert e.blocks == grid
        est = get_model("xla-gpu").estimate(fusion, dev)
        assert est.details["dot_exec_s"] == pytest.approx(e.exec_s)
        assert est.launch_s == dev.kernel_launch_overhead_s
        assert est.time_s == pytest.approx(e.exec_s + dev.kernel_launch_overhead_s)
