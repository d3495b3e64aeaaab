"""GEMM autotuning with XLA's dot-fusion model (`models._autotune`).

The search-space figures are worked from `xla/service/gpu/autotuning/dot_search_space.cc` (openxla/xla):
`GetMaxOutputTile` (registers_per_block_limit x 32 bits / output bits, square-ish power of two),
`GetMinOutputTile` (64x8 for wgmma on Hopper unless optimizing for occupancy, else 16x8),
`GetMinWarpsPerCta` (2 for 32-bit operands or occupancy, 4 for wgmma), `GetMinContractingTileSize`
(max(128 bits, 16 elements)), `GetMaxNumStages` (at most kMaxWarpsPerScheduler = 5).
"""

from __future__ import annotations

import math
from dataclasses import astuple

import pandas as pd
import pytest

from xla_costmodel import analyze, get_device
from xla_costmodel.analysis._frontend import backend_config
from xla_costmodel.hlo import parse_hlo
from xla_costmodel.models._autotune import (
    GemmConfig,
    _price_config,
    autotune_gemms,
    default_configs,
    gemm_search_space,
    optimize_config_set,
)
from xla_costmodel.models._dot_fusion import DotProblem

H100 = get_device("h100-sxm")

MODULE = """HloModule m

gemm_computation {
  p0 = f32[1024,512]{1,0} parameter(0)
  p1 = f32[512,512]{1,0} parameter(1)
  dot = f32[1024,512]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}, backend_config={"sizes":["64"]}
  p2 = f32[512]{0} parameter(2)
  b = f32[1024,512]{1,0} broadcast(p2), dimensions={1}
  ROOT add = f32[1024,512]{1,0} add(dot, b)
}

ENTRY e {
  x = f32[1024,512]{1,0} parameter(0)
  w = f32[512,512]{1,0} parameter(1)
  bias = f32[512]{0} parameter(2)
  ROOT gemm_fusion_dot = f32[1024,512]{1,0} fusion(x, w, bias), kind=kCustom, calls=gemm_computation, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["64","32"]}],"num_warps":"4","num_ctas":1,"num_stages":1}}}
}
"""


def test_search_space_large_bf16_on_hopper():
    """bf16 16384 x 16384 x 8192: 2048 tiles of 256x512 exceed the 660 CTAs XLA wants (132 SMs x 4 schedulers x
    5 warps / 4), so no occupancy concern and wgmma limits hold: tiles 64..256 x ..512, >= 4 warps, bk >= 16,
    <= 5 stages, TMA on and off. (At 8192 x 8192, 512 tiles < 660: XLA optimizes for occupancy instead.)"""
    assert min(c.block_m for c in gemm_search_space(DotProblem(1, 8192, 8192, 8192, "bf16", "bf16", "bf16"),
                                                     H100)) == 16
    space = gemm_search_space(DotProblem(1, 16384, 16384, 8192, "bf16", "bf16", "bf16"), H100)
    assert space
    assert min(c.block_m for c in space) == 64 and max(c.block_m for c in space) == 256
    assert max(c.block_n for c in space) == 512          # 131072 elements / 256, previous power of two
    assert min(c.num_warps for c in space) == 4
    assert min(c.block_k for c in space) >= 16
    assert max(c.num_stages for c in space) == 5
    assert {c.is_tma_allowed for c in space} == {False, True}
    # square-ish tiles: n within [m/2, 2m] while m is below the problem's m
    assert all(c.block_m // 2 <= c.block_n <= 2 * c.block_m for c in space)


def test_search_space_small_f32_optimizes_for_occupancy():
    """f32 64x64x64: far fewer tiles than 132 SMs x 20 warps / 4 want, so 16x8 tiles and 2 warps are allowed;
    with only 64 of k, stages stop at ceil(64 / bk)."""
    space = gemm_search_space(DotProblem(1, 64, 64, 64, "f32", "f32", "f32"), H100)
    assert min(c.block_m for c in space) == 16 and min(c.block_n for c in space) == 8
    assert min(c.num_warps for c in space) == 2
    assert all(c.num_stages <= math.ceil(64 / c.block_k) for c in space)


def test_search_space_without_tma_before_hopper():
    a100 = get_device("a100-80gb")
    space = gemm_search_space(DotProblem(1, 4096, 4096, 4096, "bf16", "bf16", "bf16"), a100)
    assert space and not any(c.is_tma_allowed for c in space)
    assert min(c.block_m for c in space) == 16          # no wgmma before Hopper


def test_autotune_rewrites_a_copy_and_prices_the_fastest_candidate():
    module = parse_hlo(MODULE)
    before_text = module.to_text()
    result = autotune_gemms(module, "h100-sxm", cublas_fallback=False)   # the Triton search alone
    assert module.to_text() == before_text                     # the given module is not changed
    choices = result.choices
    assert isinstance(choices, pd.DataFrame) and len(choices) == 1
    row = choices.iloc[0]
    assert row["kind"] == "triton" and (row["b"], row["m"], row["n"], row["k"]) == (1, 1024, 512, 512)
    assert row["config_before"] == "64x32x64, 4 warps, 1 stages"
    space = optimize_config_set(gemm_search_space(DotProblem(1, 1024, 512, 512, "f32", "f32", "f32"), H100),
                                DotProblem(1, 1024, 512, 512, "f32", "f32", "f32"), H100)
    assert row["candidates"] == len(space) > 0      # XLA's default set, as its autotuner runs it
    assert row["time_after_s"] <= row["time_before_s"]
    # the rewritten fusion carries the chosen configuration, and the dot its contracting tile
    fusion = result.module.entry.root
    blc = backend_config(fusion)["fusion_backend_config"]["block_level_fusion_config"]
    tm, tn = (int(s) for s in blc["output_tiles"][0]["sizes"])
    dot = next(i for i in fusion.fused_computation.instructions if i.opcode == "dot")
    bk = int(backend_config(dot)["sizes"][0])
    assert row["config_after"].startswith(f"{tm}x{tn}x{bk}, {blc['num_warps']} warps, {blc['num_stages']} stages")
    # no candidate is faster under the same model
    original = module.entry.root
    for cfg in space:
        assert _price_config(original, cfg, H100, None) >= row["time_after_s"]
    # the xla-gpu model prices the rewritten module at the chosen configuration (plus the launch)
    t = pd.DataFrame(analyze(result.module, device="h100-sxm", model="xla-gpu"))
    kernel = t[t["kernel"] == "gemm_fusion_dot"].iloc[0]
    assert kernel["time_s"] == pytest.approx(row["time_after_s"] + kernel["launch_s"], rel=1e-9)


def test_default_set_restriction_as_xlas_optimize_config_set():
    """`OptimizeConfigSet` with `kHopperAmpereConfigs` as hints (dot_search_space.cc, triton_configs.h).

    bf16 4096^3 on the H100: 128 tiles of the largest 256x512 tile are fewer than the 660 CTAs XLA wants, so
    tiles go down to 16x8 with 2 warps; the default 128x256x64, 4 stages, 8 warps survives with and without
    TMA, while 128x128x128 (1 stage, 2 warps), in the space, is in no default and goes. bf16 16 x 4096 x 4096:
    the largest m tile is 16 (and only 16x8 and 16x16 give 132 blocks), so the default 64x16x64, 3 stages,
    2 warps is clamped to 16x16x64: kept, though no default has that tile with those stages."""
    p = DotProblem(1, 4096, 4096, 4096, "bf16", "bf16", "bf16")
    space = gemm_search_space(p, H100)
    kept = optimize_config_set(space, p, H100)
    assert 0 < len(kept) <= len(default_configs(H100)) == 2 * 36
    assert set(kept) <= set(space)
    assert GemmConfig(128, 256, 64, 8, 4, False) in kept and GemmConfig(128, 256, 64, 8, 4, True) in kept
    assert GemmConfig(128, 128, 128, 2, 1, True) in space and GemmConfig(128, 128, 128, 2, 1, True) not in kept
    assert {(c.num_warps, c.num_stages) for c in kept} <= {(w, s) for _m, _n, _k, w, s, _t in
                                                           (astuple(c) for c in default_configs(H100))}
    skinny = DotProblem(1, 16, 4096, 4096, "bf16", "bf16", "bf16")
    assert GemmConfig(16, 16, 64, 2, 3, False) in optimize_config_set(gemm_search_space(skinny, H100), skinny, H100)
    # nothing matches: XLA falls back to the hints themselves
    assert optimize_config_set([GemmConfig(16, 8, 16, 2, 5, False)], p, H100) == default_configs(H100)
    # before Hopper: no TMA variants
    a100 = get_device("a100-80gb")
    assert not any(c.is_tma_allowed for c in default_configs(a100)) and len(default_configs(a100)) == 36


def test_autotune_refuses_a_cpu():
    with pytest.raises(ValueError, match="not a GPU"):
        autotune_gemms(parse_hlo(MODULE), get_device("host"))


# A GEMM whose operand is computed in the fusion (a convert): cuBLAS would need a kernel for it first.
SMALL_BF16 = """HloModule m

gemm_computation {
  p0 = f32[64,64]{1,0} parameter(0)
  c0 = bf16[64,64]{1,0} convert(p0)
  p1 = bf16[64,64]{1,0} parameter(1)
  ROOT dot = bf16[64,64]{1,0} dot(c0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY e {
  x = f32[64,64]{1,0} parameter(0)
  w = bf16[64,64]{1,0} parameter(1)
  ROOT gemm_fusion_dot = bf16[64,64]{1,0} fusion(x, w), kind=kCustom, calls=gemm_computation, backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm_fusion","block_level_fusion_config":{"output_tiles":[{"sizes":["16","16"]}],"num_warps":"2","num_ctas":1,"num_stages":1}}}
}
"""


def test_cublas_alternative_replaces_the_fusion_where_it_is_faster_as_xlas_autotuner_would():
    from xla_costmodel.models._library_calls import gemm_table_estimate

    module = parse_hlo(MODULE)
    assert autotune_gemms(module, "h100-sxm").choices.iloc[0]["kind"] == "triton"   # off by default
    result = autotune_gemms(module, "h100-sxm", cublas_fallback=True)
    row = result.choices.iloc[0]
    assert row["kind"] == "triton->cublas" and row["config_after"] == "cuBLAS"
    assert row["cublas_s"] < row["triton_s"] and row["time_after_s"] == row["cublas_s"]
    # As GemmRewriter builds it: the bias add of the fusion goes into cuBLASLt's BIAS epilogue.
    entry = result.module.entry
    calls = [i for i in entry.instructions if i.opcode == "custom-call"]
    assert len(calls) == 1 and not any(i.opcode == "fusion" for i in entry.instructions)
    call = calls[0]
    assert call.attribute("custom_call_target") in ("__cublas$lt$matmul", '"__cublas$lt$matmul"')
    assert backend_config(call)["gemm_backend_config"]["epilogue"] == "BIAS"
    assert [o.name for o in call.operands] == ["x", "w", "bias"]
    assert str(entry.root.shape) == str(module.entry.root.shape)
    # priced by the model as any cuBLAS call: the measured GEMM table
    table = gemm_table_estimate(call, H100)
    assert table is not None and row["cublas_s"] == pytest.approx(table.time_s, rel=1e-9)
    t = analyze(result.module, device="h100-sxm", model="xla-gpu")
    assert t.total_time_s == pytest.approx(row["cublas_s"], rel=1e-9)
    # and the Triton choice, without the fallback, is priced slower
    triton = analyze(autotune_gemms(module, "h100-sxm", cublas_fallback=False).module, device="h100-sxm",
                     model="xla-gpu")
    assert triton.total_time_s == pytest.approx(row["triton_s"], rel=1e-9) and triton.total_time_s > t.total_time_s


def test_the_cublas_alternative_computes_a_fused_operand_in_its_own_kernel_first():
    # As XLA runs a GEMM fusion by cuBLAS: the fusion inlined, the convert a loop fusion, then the call.
    from xla_costmodel.hlo._edit import NameUniquifier
    from xla_costmodel.models._autotune import cublas_alternative

    fusion = parse_hlo(SMALL_BF16).entry.root
    alternative = parse_hlo(cublas_alternative(fusion, NameUniquifier(fusion.computation.module)))
    kernels = [i for i in alternative.entry.instructions if i.opcode in ("fusion", "custom-call")]
    assert [k.opcode for k in kernels] == ["fusion", "custom-call"]
    assert any(h.opcode == "convert" for h in kernels[0].fused_computation.instructions)
    assert kernels[1].operands[0] is kernels[0] and kernels[1].operands[1].opcode == "parameter"
    assert str(alternative.entry.root.shape) == str(fusion.shape)
    # grafted, the module prices both kernels
    result = autotune_gemms(parse_hlo(SMALL_BF16), "h100-sxm", cublas_fallback=True)
    row = result.choices.iloc[0]
    if row["kind"] == "triton->cublas":
        t = analyze(result.module, device="h100-sxm", model="xla-gpu")
        assert t.summary().kernels == 2 and t.total_time_s == pytest.approx(row["cublas_s"], rel=1e-9)
    else:   # kept Triton: only where the alternative was priced no faster
        assert row["kind"] == "triton" and row["cublas_s"] >= row["triton_s"]
