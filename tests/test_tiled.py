"""XLA's tiled (indexing) performance model: the expectations of `gpu_indexing_performance_model_test.cc`.

Every case below is a test of `xla/service/gpu/model/gpu_indexing_performance_model_test.cc`
(openxla/xla@6b73c4c49eb0): the same HLO, the same tilings and warps, on XLA's
test device (`TestGpuDeviceInfo::RTXA6000DeviceInfo`, our `rtx-a6000-xla-test`), checked
within the test's own tolerance. XLA runs each case twice (symbolic and
experimental tiling) with the same expectations; there is one tiling here.
"""

from __future__ import annotations

import math

import pytest

import xla_costmodel as xc
from xla_costmodel.devices import get_device
from xla_costmodel.analysis._tiling import (
    TilingError,
    _delinearized_symbol,
    check_symbolic_tiling,
    configured_tiling,
    propagate,
)
from xla_costmodel.models._tiled import best_tilings, estimate_tiling, flops_per_element, num_warps_for

A6000 = get_device("rtx-a6000-xla-test")
ADD_F32 = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT add = f32[] add(a, b)\n}\n"


def fusion(text: str):
    return xc.parse_hlo(text).entry.root


SOFTMAX_BODY = """triton_softmax_computation {
  param_0 = f32[512,911]{1,0} parameter(0)
  param_1 = f32[911]{0} parameter(1)
  broadcast_0 = f32[512,911]{1,0} broadcast(param_1), dimensions={1}
  multiply_0 = f32[512,911]{1,0} multiply(param_0, broadcast_0)
  constant_0 = f32[] constant(0)
  reduce_0 = f32[512]{0} reduce(multiply_0, constant_0), dimensions={1}, to_apply=add
  broadcast_4 = f32[512,911]{1,0} broadcast(reduce_0), dimensions={0}
  ROOT multiply = f32[512,911]{1,0} multiply(multiply_0, broadcast_4)
}
"""


def softmax(config: str):
    return fusion(f"""HloModule m
{ADD_F32}{SOFTMAX_BODY}
ENTRY main {{
  param_0 = f32[512,911]{{1,0}} parameter(0)
  param_1 = f32[911]{{0}} parameter(1)
  ROOT triton_softmax = f32[512,911]{{1,0}} fusion(param_0, param_1), kind=kCustom, calls=triton_softmax_computation, backend_config={{"fusion_backend_config": {{"kind":"__triton"{config}}}}}
}}""")


P0, P1 = 512 * 911 * 4, 911 * 4


def test_best_tilings_skips_only_tiles_that_would_be_infinite():
    """The search skips root tiles over the register limit before propagating them: what it returns is
    what estimating every candidate gives (finite ones, stable-sorted by XLA's ticks)."""
    from xla_costmodel.analysis._tiling import candidate_tiles, satisfies_triton_constraints
    from xla_costmodel.models import get_model
    from xla_costmodel.models._tiled import estimate

    k = softmax("")
    everything, skipped_infinite = [], 0
    for tiles in candidate_tiles(k):
        tiled = propagate(k, tiles)
        if not satisfies_triton_constraints(tiled, A6000):
            continue
        e = estimate(tiled, A6000, num_warps_for(tiled))
        skipped_infinite += e.infinite and math.prod(1 << (t - 1).bit_length() for t in tiles) > 0.4 * A6000.registers_per_block_limit
        if not e.infinite:
            everything.append(e)
    tick = get_model("xla-gpu")._q
    everything.sort(key=lambda e: tick(e.exec_s))
    assert skipped_infinite  # candidates the shortcut skips exist here
    assert [(e.tiles, e.num_warps, e.exec_s) for e in best_tilings(k, A6000)] == \
        [(e.tiles, e.num_warps, e.exec_s) for e in everything]


def test_triton_softmax_fusion_instruction_is_supported():
    k = softmax(',"block_level_fusion_config":{"output_tiles":[{"sizes":["1","911"]}],"num_warps":"2"}')
    cfg = configured_tiling(k)
    assert (cfg.output_tile, cfg.num_warps) == ((1, 911), 2)
    e = estimate_tiling(k, A6000, cfg.output_tile, cfg.num_warps)
    assert e.bytes_read == P0 + 512 * P1   # param_0 once, param_1 once per block
    assert e.bytes_written == 512 * 911 * 4
    assert e.exec_s * 1e6 == pytest.approx(5, abs=1)


def test_estimate_best_tiling_triton_softmax():
    best = best_tilings(softmax(""), A6000)[0]
    assert best.tiles == ((4, 911),) and best.num_warps == 4
    assert best.bytes_read == P0 + 128 * P1 and best.bytes_written == 512 * 911 * 4
    assert best.exec_s * 1e6 == pytest.approx(5, abs=1)


def test_number_of_tiles_larger_than_int32_max():
    k = fusion("""HloModule softmax
max_computation {
  arg_0 = f16[] parameter(0)
  arg_1 = f16[] parameter(1)
  ROOT maximum = f16[] maximum(arg_0, arg_1)
}
softmax {
  param_0 = f16[131076,16384]{1,0} parameter(0)
  constant_neg_inf = f16[] constant(-inf)
  reduce = f16[131076]{0} reduce(param_0, constant_neg_inf), dimensions={1}, to_apply=max_computation
  broadcast = f16[131076,16384]{1,0} broadcast(reduce), dimensions={0}
  ROOT subtract = f16[131076,16384]{1,0} subtract(param_0, broadcast)
}
ENTRY main {
  param_0 = f16[131076,16384]{1,0} parameter(0)
  ROOT fusion = f16[131076,16384]{1,0} fusion(param_0), kind=kCustom, calls=softmax
}""")
    e = estimate_tiling(k, A6000, (1, 1), 1)
    assert e.num_blocks > 2 ** 31
    assert e.read_s == pytest.approx(2932, abs=2)
    assert e.compute_s == pytest.approx(14, abs=1)
    assert e.exec_s == pytest.approx(2932, abs=2)


def test_concatenate():
    k = fusion("""HloModule m
concatenate_fusion {
  p0 = f32[32, 128] parameter(0)
  p1 = f32[64, 128] parameter(1)
  exp = f32[32, 128] exponential(p0)
  ROOT concatenate = f32[96, 128] concatenate(exp, p1), dimensions={0}
}
ENTRY main {
  p0 = f32[32, 128] parameter(0)
  p1 = f32[64, 128] parameter(1)
  ROOT fusion = f32[96, 128] fusion(p0, p1), kind=kCustom, calls=concatenate_fusion
}""")
    e = estimate_tiling(k, A6000, (1, 128), 3)
    assert e.flops == 6 * 128 * 96 + 86 * 128 * (96 * 32 // 96)
    assert e.bytes_read == 4 * 128 * (96 * 64 // 96) + 4 * 128 * (96 * 32 // 96)


def test_dot_with_reduction_loop():
    k = fusion("""HloModule m
dot_fusion {
  p0 = f32[128, 257] parameter(0)
  p1 = f32[257, 64] parameter(1)
  exp = f32[128, 257] exponential(p0)
  ROOT dot = f32[128, 64] dot(exp, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={sizes:[64]}
}
ENTRY main {
  p0 = f32[128, 257] parameter(0)
  p1 = f32[257, 64] parameter(1)
  ROOT fusion = f32[128, 64] fusion(p0, p1), kind=kCustom, calls=dot_fusion
}""")
    e = estimate_tiling(k, A6000, (32, 32), 32)
    blocks = 8
    assert e.num_blocks == blocks
    assert e.flops == 514 * 1024 * blocks + 86 * 2048 * (blocks * math.ceil(257 / 64))
    assert e.bytes_read == 2 * 4 * (64 * 32) * (blocks * math.ceil(257 / 64))


def test_softmax_register_spill_is_infinite():
    k = fusion(f"""HloModule m
{ADD_F32}triton_softmax_computation {{
  param_0 = f32[16,16000] parameter(0)
  constant_0 = f32[] constant(0)
  reduce_0 = f32[16] reduce(param_0, constant_0), dimensions={{1}}, to_apply=add
  broadcast = f32[16,16000] broadcast(reduce_0), dimensions={{0}}
  ROOT multiply = f32[16,16000] multiply(param_0, broadcast)
}}
ENTRY main {{
  param_0 = f32[16,16000] parameter(0)
  ROOT triton_softmax = f32[16,16000] fusion(param_0), kind=kCustom, calls=triton_softmax_computation, backend_config={{"fusion_backend_config": {{"kind":"__triton"}}}}
}}""")
    assert estimate_tiling(k, A6000, (1, 16000)).exec_s * 1e6 == pytest.approx(3, abs=1)
    assert estimate_tiling(k, A6000, (2, 16000)).infinite


def test_broadcast_reduce_register_spill_is_infinite():
    k = fusion("""HloModule m
add {
  param_0 = s32[] parameter(1)
  param_1 = s32[] parameter(0)
  ROOT add = s32[] add(param_0, param_1)
}
fused_reduce {
  param_0 = pred[4096,32]{1,0} parameter(0)
  convert.0 = s32[4096,32]{1,0} convert(param_0)
  transpose = s32[32,4096]{1,0} transpose(convert.0), dimensions={1,0}
  broadcast.0 = s32[4096,32,4096]{2,1,0} broadcast(transpose), dimensions={1,2}
  iota.0 = s32[4096,4096]{1,0} iota(), iota_dimension=0
  iota.1 = s32[4096,4096]{1,0} iota(), iota_dimension=1
  compare.1 = pred[4096,4096]{1,0} compare(iota.0, iota.1), direction=GE
  convert.1 = s32[4096,4096]{1,0} convert(compare.1)
  broadcast.1 = s32[4096,32,4096]{2,1,0} broadcast(convert.1), dimensions={0,2}
  multiply = s32[4096,32,4096]{2,1,0} multiply(broadcast.0, broadcast.1)
  c0 = s32[] constant(0)
  ROOT reduce.4552.1 = s32[4096,32]{1,0} reduce(multiply, c0), dimensions={2}, to_apply=add
}
ENTRY main {
  param_0 = pred[4096,32]{1,0} parameter(0)
  ROOT input_reduce_fusion = s32[4096,32]{1,0} fusion(param_0), kind=kCustom, calls=fused_reduce
}""")
    assert estimate_tiling(k, A6000, (4, 4), 8).exec_s * 1e6 == pytest.approx(147, abs=1)
    assert estimate_tiling(k, A6000, (8, 4), 8).infinite
    assert estimate_tiling(k, A6000, (4, 8), 4).infinite


def _add(shape: str, config: str = ', backend_config={"fusion_backend_config": {"kind":"__triton"}}'):
    return fusion(f"""HloModule m
add_computation {{
  param_0 = {shape} parameter(0)
  param_1 = {shape} parameter(1)
  ROOT add = {shape} add(param_0, param_1)
}}
ENTRY main {{
  param_0 = {shape} parameter(0)
  param_1 = {shape} parameter(1)
  ROOT fusion = {shape} fusion(param_0, param_1), kind=kCustom, calls=add_computation{config}
}}""")


def test_uses_the_dimension_size_when_the_tile_covers_it():
    e = estimate_tiling(_add("f32[65,65]"), A6000, (65, 65), 2)
    assert e.bytes_read == 2 * 65 * 65 * 4       # unpadded reads
    assert e.flops == 128 * 128 * 3             # padded compute


def test_uncoalesced_reads_are_scaled():
    k = _add("f32[2048,512]")
    good = estimate_tiling(k, A6000, (2, 128), 2)
    bad = estimate_tiling(k, A6000, (128, 2), 2)
    assert good.bytes_read == bad.bytes_read == 2 * 2048 * 512 * 4
    assert bad.read_s / good.read_s == pytest.approx(8, abs=0.001)


def test_uncoalesced_writes_are_scaled():
    k = _add("s8[2048,512]")
    good = estimate_tiling(k, A6000, (16, 128))
    bad = estimate_tiling(k, A6000, (128, 16))
    assert good.bytes_read == bad.bytes_read == 2 * 2048 * 512
    assert bad.write_s / good.write_s == pytest.approx(4, abs=0.001)


def test_warps_from_the_padded_tile():
    k = fusion("""HloModule m
triton_softmax_computation {
  param_0 = f32[9,9,9] parameter(0)
  param_1 = f32[9,9,9] parameter(1)
  ROOT multiply = f32[9,9,9] multiply(param_0, param_1)
}
ENTRY main {
  param_0 = f32[9,9,9] parameter(0)
  param_1 = f32[9,9,9] parameter(1)
  ROOT fusion = f32[9,9,9] fusion(param_0, param_1), kind=kCustom, calls=triton_softmax_computation
}""")
    assert num_warps_for(propagate(k, (9, 9, 9))) == 4  # 729 elements, padded 16^3 = 4096


def test_warps_from_the_largest_live_tile():
    k = fusion(f"""HloModule m
{ADD_F32}fusion_computation {{
  param_0 = f32[1,4096] parameter(0)
  c0 = f32[] constant(0)
  ROOT reduce = f32[1] reduce(param_0, c0), dimensions={{1}}, to_apply=add
}}
ENTRY main {{
  param_0 = f32[1,4096] parameter(0)
  ROOT fusion = f32[1] fusion(param_0), kind=kCustom, calls=fusion_computation
}}""")
    assert num_warps_for(propagate(k, (1,))) == 4


def test_best_tiling_of_a_multi_output_fusion():
    k = fusion("""HloModule m
region {
  param_0.1 = f32[] parameter(0)
  param_1 = f32[] parameter(1)
  ROOT add = f32[] add(param_0.1, param_1)
}
fused_computation {
  param_0.2 = f32[64] parameter(0)
  abs = f32[64] abs(param_0.2)
  bitcast = f32[4,4,4] bitcast(abs)
  constant = f32[] constant(0)
  reduce = f32[4,4] reduce(bitcast, constant), dimensions={1}, to_apply=region
  ROOT tuple = (f32[4,4], f32[64]) tuple(reduce, abs)
}
ENTRY entry_computation {
  param_0.3 = f32[64] parameter(0)
  ROOT fusion = (f32[4,4], f32[64]) fusion(param_0.3), kind=kCustom, calls=fused_computation
}""")
    best = best_tilings(k, A6000)[0]
    assert best.tiles == ((1, 4), (16,))
    assert best.num_warps == 1


COMBINED = """HloModule m

add {
  param_0.1 = f32[] parameter(0)
  param_1.1 = f32[] parameter(1)
  ROOT add = f32[] add(param_0.1, param_1.1)
}

fused_computation {
  param_2.1 = bf16[4096] parameter(2)
  convert = f32[4096] convert(param_2.1)
  constant = f32[] constant(1)
  broadcast = f32[4096] broadcast(constant), dimensions={}
  compare = pred[4096] compare(convert, broadcast), direction=LT
  negate = f32[4096] negate(convert)
  exponential = f32[4096] exponential(negate)
  add.1 = f32[4096] add(exponential, broadcast)
  divide = f32[4096] divide(broadcast, add.1)
  multiply = f32[4096] multiply(divide, divide)
  subtract = f32[4096] subtract(broadcast, multiply)
  sqrt = f32[4096] sqrt(subtract)
  constant.1 = f32[] constant(2)
  broadcast.1 = f32[4096] broadcast(constant.1), dimensions={}
  multiply.1 = f32[4096] multiply(exponential, broadcast.1)
  constant.2 = f32[] constant(-2)
  broadcast.2 = f32[4096] broadcast(constant.2), dimensions={}
  multiply.2 = f32[4096] multiply(convert, broadcast.2)
  exponential.1 = f32[4096] exponential(multiply.2)
  add.2 = f32[4096] add(multiply.1, exponential.1)
  sqrt.1 = f32[4096] sqrt(add.2)
  multiply.3 = f32[4096] multiply(divide, sqrt.1)
  select = f32[4096] select(compare, sqrt, multiply.3)
  convert.1 = bf16[4096] convert(select)
  broadcast.3 = bf16[1,8,4096] broadcast(convert.1), dimensions={2}
  param_0.2 = bf16[1,8,4096] parameter(0)
  multiply.4 = bf16[1,8,4096] multiply(broadcast.3, param_0.2)
  convert.2 = bf16[4096] convert(divide)
  broadcast.4 = bf16[8,4096] broadcast(convert.2), dimensions={1}
  param_1.2 = bf16[8,4096] parameter(1)
  multiply.5 = bf16[8,4096] multiply(param_1.2, param_1.2)
  convert.3 = f32[8,4096] convert(multiply.5)
  constant.3 = f32[] constant(0)
  reduce = f32[8] reduce(convert.3, constant.3), dimensions={1}, to_apply=add
  constant.4 = f32[] constant(0.000244140625)
  broadcast.5 = f32[8] broadcast(constant.4), dimensions={}
  multiply.6 = f32[8] multiply(reduce, broadcast.5)
  convert.4 = bf16[8] convert(multiply.6)
  constant.5 = bf16[] constant(9.984e-07)
  broadcast.6 = bf16[8] broadcast(constant.5), dimensions={}
  add.3 = bf16[8] add(convert.4, broadcast.6)
  convert.5 = f32[8] convert(add.3)
  rsqrt = f32[8] rsqrt(convert.5)
  convert.6 = bf16[8] convert(rsqrt)
  broadcast.7 = bf16[8,4096] broadcast(convert.6), dimensions={0}
  multiply.7 = bf16[8,4096] multiply(param_1.2, broadcast.7)
  multiply.8 = bf16[8,4096] multiply(broadcast.4, multiply.7)
  bitcast = bf16[1,8,4096] bitcast(multiply.8)
  add.4 = bf16[1,8,4096] add(multiply.4, bitcast)
  multiply.9 = bf16[1,8,4096] multiply(add.4, add.4)
  convert.7 = f32[1,8,4096] convert(multiply.9)
  bitcast.1 = f32[8,4096] bitcast(convert.7)
  constant.6 = f32[] constant(0)
  reduce.1 = f32[8] reduce(bitcast.1, constant.6), dimensions={1}, to_apply=add
  bitcast.2 = f32[8,1] bitcast(reduce.1)
  constant.7 = f32[] constant(0.000244140625)
  broadcast.8 = f32[8,1] broadcast(constant.7), dimensions={}
  multiply.10 = f32[8,1] multiply(bitcast.2, broadcast.8)
  convert.8 = bf16[8,1] convert(multiply.10)
  constant.8 = bf16[] constant(9.984e-07)
  broadcast.9 = bf16[8,1] broadcast(constant.8), dimensions={}
  add.5 = bf16[8,1] add(convert.8, broadcast.9)
  convert.9 = f32[8,1] convert(add.5)
  rsqrt.1 = f32[8,1] rsqrt(convert.9)
  convert.10 = bf16[8,1] convert(rsqrt.1)
  bitcast.3 = bf16[8] bitcast(convert.10)
  broadcast.10 = bf16[1,8,4096] broadcast(bitcast.3), dimensions={1}
  multiply.11 = bf16[1,8,4096] multiply(add.4, broadcast.10)
  ROOT tuple = (bf16[1,8,4096], bf16[1,8,4096]) tuple(add.4, multiply.11)
}

ENTRY entry_computation {
  param_0.3 = bf16[1,8,4096] parameter(0)
  param_1.3 = bf16[8,4096] parameter(1)
  param_2.2 = bf16[4096] parameter(2)
  ROOT fusion = (bf16[1,8,4096], bf16[1,8,4096]) fusion(param_0.3, param_1.3, param_2.2), kind=kCustom, calls=fused_computation
}
"""


def test_best_tiling_of_a_combined_multi_output_fusion():
    # EstimateBestTiling_CombinedFusion (b/383162692): a two-output RMS norm; both outputs tiled (1, 1, 4096)
    # (XLA's test notes that it picks 4 warps).
    best = best_tilings(fusion(COMBINED), A6000)[0]
    assert best.tiles == ((1, 1, 4096), (1, 1, 4096))
    assert best.num_warps == 4


# ---------------------------------------------------------------- FlopsPerElement


def _flops_match_cost_analysis(text: str):
    m = xc.parse_hlo(text)
    root = m.entry.root
    from xla_costmodel.analysis._kernel import kernel_cost

    shape = root.shape if root.shape.element_type != "tuple" else root.shape.tuple_shapes[0]
    elements = math.prod(shape.dims)
    assert flops_per_element(root, A6000) * elements == kernel_cost(root, "gpu", A6000).flops


@pytest.mark.parametrize("body", [
    f"{ADD_F32}ENTRY e {{\n  p = f32[32,64] parameter(0)\n  c = f32[] constant(0)\n"
    "  ROOT r = f32[32] reduce(p, c), dimensions={1}, to_apply=add\n}",
    """add_multiply {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  p2 = f32[] parameter(2)
  p3 = f32[] parameter(3)
  add = f32[] add(p0, p2)
  multiply = f32[] multiply(p1, p3)
  ROOT t = (f32[], f32[]) tuple(add, multiply)
}
ENTRY e {
  p = f32[32,64] parameter(0)
  c0 = f32[] constant(0)
  ROOT reduce = (f32[32], f32[32]) reduce(p, p, c0, c0), dimensions={1}, to_apply=add_multiply
}""",
    "ENTRY e {\n  p = f32[32] parameter(0)\n  ROOT c = f32[32] cosine(p)\n}",
    "ENTRY e {\n  a = f32[32] parameter(0)\n  b = f32[32] parameter(1)\n  c = f32[32] parameter(2)\n"
    "  ROOT clamp = f32[32] clamp(a, b, c)\n}",
    """ENTRY e {
  operand = f32[33, 76, 70] parameter(0)
  indices = s32[1806, 2] parameter(1)
  ROOT gather = f32[1806, 7, 8, 4] gather(operand, indices), offset_dims={1,2,3}, collapsed_slice_dims={},
    start_index_map={0,1}, index_vector_dim=1, slice_sizes={7,8,4}
}""",
    f"""{ADD_F32}ENTRY e {{
  p = f32[13,12,8,15] parameter(0)
  c0 = f32[] constant(0)
  ROOT rw = f32[13,3,8,15] reduce-window(p, c0), window={{size=1x1x7x1 stride=1x4x1x1 pad=0_0x0_0x3_3x0_0}}, to_apply=add
}}""",
    "ENTRY e {\n  a = f32[32,64] parameter(0)\n  b = f32[32,64] parameter(1)\n"
    "  ROOT c = f32[32,128] concatenate(a, b), dimensions={1}\n}",
    "ENTRY e {\n  a = f32[32,31] parameter(0)\n  b = f32[32,33] parameter(1)\n"
    "  ROOT c = f32[32,64] concatenate(a, b), dimensions={1}\n}",
], ids=["reduce", "variadic_reduce", "cosine", "clamp", "gather", "reduce_window", "concat_aligned",
        "concat_unaligned"])
def test_flops_per_element_matches_the_gpu_cost_analysis(body):
    _flops_match_cost_analysis("HloModule m\n" + body)


def test_flops_per_element_pads_reduced_dimensions():
    r = xc.parse_hlo(f"HloModule m\n{ADD_F32}ENTRY e {{\n  p = f32[10,15,9] parameter(0)\n  c = f32[] constant(0)\n"
                     "  ROOT r = f32[10] reduce(p, c), dimensions={1,2}, to_apply=add\n}").entry.root
    assert flops_per_element(r, A6000) == (16 * 16 - 1) * 3


def test_a_tile_that_is_not_a_box_after_a_reshape_is_rejected():
    k = fusion("""HloModule m
f {
  p = f32[64] parameter(0)
  ROOT b = f32[4,4,4] bitcast(p)
}
ENTRY e {
  p = f32[64] parameter(0)
  ROOT r = f32[4,4,4] fusion(p), kind=kCustom, calls=f
}""")
    assert propagate(k, (1, 4, 4)).instructions[-1].tile.sizes == (16,)
    assert propagate(k, (1, 4, 1)).instructions[-1].tile.strides == (4,)   # one strided dimension
    with pytest.raises(TilingError):
        propagate(k, (2, 4, 1))


# ---------------------------------------------------------------- tiled GEMM fusions (XLA's dot model)


def gemm(lhs: str, rhs: str, out: str, block_k: int, tiles: str, warps: int, stages: int):
    return fusion(f"""HloModule m
triton_dot {{
  p0 = {lhs} parameter(0)
  p1 = {rhs} parameter(1)
  ROOT dot = {out} dot(p0, p1),
    lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, algorithm=dot_bf16_bf16_bf16,
    backend_config={{"sizes":["{block_k}"]}}
}}
ENTRY e {{
  p0 = {lhs} parameter(0)
  p1 = {rhs} parameter(1)
  ROOT _ = {out} fusion(p0, p1),
    kind=kCustom, calls=triton_dot,
    backend_config={{"fusion_backend_config": {{"kind": "__triton_nested_gemm_fusion", "block_level_fusion_config":{{"output_tiles":[{{"sizes":[{tiles}]}}],"num_warps":"{warps}","num_stages":"{stages}","num_ctas":"1"}}}}}}
}}""")


# XLA's RTXA6000DeviceInfo() sets no matrix-unit rates, so its dot model runs dots at the FP32 vector
# peak (CalculatePeakMatrixOpsPerNs's fallback); our preset carries the GA102 tensor-core rates.
A6000_XLA = A6000.replace(peak_matmul_flops_per_s={})


def configured(k):
    cfg = configured_tiling(k)
    return estimate_tiling(k, A6000_XLA, cfg.output_tile, cfg.num_warps, num_stages=cfg.num_stages)


def _dot_compute_128(k) -> float:
    from xla_costmodel.models._dot_fusion import dot_fusion_estimate

    dot = k.fused_computation.root
    return dot_fusion_estimate(dot, (128, 128), 32, 4, 3, A6000_XLA)[0]


def test_triton_gemm_with_custom_block_level_parameters():
    k = fusion("""HloModule m
triton_dot {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  lhs = f32[1024,1024] broadcast(p0), dimensions={}
  rhs = f32[1024,1024] broadcast(p1), dimensions={}
  ROOT dot = f32[1024,1024]{1,0} dot(lhs, rhs), lhs_contracting_dims={1}, rhs_contracting_dims={0},
    backend_config={sizes:[64]}
}
ENTRY e {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT _ = f32[1024,1024]{1,0} fusion(p0, p1), kind=kCustom, calls=triton_dot,
    backend_config={"fusion_backend_config": {kind: "__triton_nested_gemm_fusion",
      "block_level_fusion_config":{"output_tiles":[{"sizes":["64", "64"]}],"num_warps":"4","num_stages":"3",
      "num_ctas":"1"}}}
}""")
    default = configured(k)
    custom = estimate_tiling(k, A6000_XLA, (16, 16), 1, num_stages=1)
    assert custom.exec_s != default.exec_s


def test_triton_gemm_compute_bound_one_stage():
    k = gemm("bf16[8192,8192]", "bf16[8192,8192]", "bf16[8192,8192]", 32, '"256", "512"', 4, 1)
    assert configured(k).exec_s > 1.2 * _dot_compute_128(k)


def test_triton_gemm_compute_bound():
    k = gemm("bf16[8192,8192]", "bf16[8192,8192]", "bf16[8192,8192]", 32, '"128", "128"', 4, 3)
    want = _dot_compute_128(k) + 1.3e-6
    e = configured(k)
    assert want <= e.exec_s <= want * 1.1


def test_triton_gemm_memory_bound():
    k = gemm("bf16[4,4096]", "bf16[4096,4096]", "bf16[4,4096]", 128, '"4", "128"', 4, 3)
    # XLA's test (gpu_dot_fusion_cost_model_test.cc, GpuDotMemoryBoundBf16): the bytes at the effective
    # HBM bandwidth for that transfer size (GetEffectiveHbmBandwidth), plus the loop latency tax.
    from xla_costmodel.models._dot_fusion import effective_hbm_bandwidth

    nbytes = 2 * (4096 + 4 * 2) * 4096
    want = nbytes / effective_hbm_bandwidth(nbytes, A6000) + 1.3e-6
    e = configured(k)
    assert want <= e.exec_s <= want * 1.1


# XLA's symbolic tile analysis refuses some fusions before it tries any tile size
# (`symbolic_tile.cc`, `size_and_stride_expression.cc`): a range variable (a dimension a reduce takes
# whole) under a floordiv or mod, or under a constraint with an offset.

def _reduce_fusion(body: str, params: str, operands: str, out: str = "f32[32]{0}"):
    return fusion(f"""HloModule m
{ADD_F32}triton_computation {{
{body}
}}
ENTRY main {{
{params}
  ROOT f = {out} fusion({operands}), kind=kCustom, calls=triton_computation, backend_config={{"fusion_backend_config":{{"kind":"__triton"}}}}
}}""")


def test_a_reduced_dimension_split_by_a_bitcast_cannot_be_tiled():
    # XLA's log on zoo:transformer_grad (H100 and A100): "Fusion can not be tiled with
    # SymbolicTileAnalysis: Failed to compute symbolic tile for (d0)[s0] -> (s0 / 16, s0 mod 16, d0)"
    body = """  p0 = f32[2,16,32]{2,1,0} parameter(0)
  p1 = f32[2,16,32]{2,1,0} parameter(1)
  m = f32[2,16,32]{2,1,0} multiply(p0, p1)
  b = f32[32,32]{1,0} bitcast(m)
  c = f32[] constant(0)
  ROOT r = f32[32]{0} reduce(b, c), dimensions={0}, to_apply=add"""
    k = _reduce_fusion(body, "  p0 = f32[2,16,32]{2,1,0} parameter(0)\n  p1 = f32[2,16,32]{2,1,0} parameter(1)",
                       "p0, p1")
    with pytest.raises(TilingError, match="symbolic tile"):
        check_symbolic_tiling(k)
    with pytest.raises(TilingError):
        best_tilings(k, A6000)
    # a tile of the output dimension alone propagates (what our concrete tiles saw, and accepted)
    assert propagate(k, (16,)).num_blocks == 2


def test_only_a_split_of_the_reduced_dimension_fails():
    # the reduced dimension is 16 x 32 of the input: s0 floordiv 32, s0 mod 32
    merged = """  p0 = f32[2,16,32]{2,1,0} parameter(0)
  b = f32[2,512]{1,0} bitcast(p0)
  c = f32[] constant(0)
  ROOT r = f32[2]{0} reduce(b, c), dimensions={1}, to_apply=add"""
    k = _reduce_fusion(merged, "  p0 = f32[2,16,32]{2,1,0} parameter(0)", "p0", "f32[2]{0}")
    with pytest.raises(TilingError):
        check_symbolic_tiling(k)
    whole = """  p0 = f32[32,2,16]{2,1,0} parameter(0)
  b = f32[32,32]{1,0} bitcast(p0)
  c = f32[] constant(0)
  ROOT r = f32[32]{0} reduce(b, c), dimensions={1}, to_apply=add"""
    k = _reduce_fusion(whole, "  p0 = f32[32,2,16]{2,1,0} parameter(0)", "p0")
    with pytest.raises(TilingError):
        check_symbolic_tiling(k)
    kept = """  p0 = f32[2,16,32]{2,1,0} parameter(0)
  b = f32[32,32]{1,0} bitcast(p0)
  c = f32[] constant(0)
  ROOT r = f32[32]{0} reduce(b, c), dimensions={1}, to_apply=add"""
    k = _reduce_fusion(kept, "  p0 = f32[2,16,32]{2,1,0} parameter(0)", "p0")
    check_symbolic_tiling(k)  # the output dimension is split (d0 / 16, d0 mod 16): allowed
    assert best_tilings(k, A6000)


@pytest.mark.parametrize("src, dst, symbolic, fails", [
    ([2, 16], [32], [True], True),           # s0 / 16, s0 mod 16
    ([2, 16], [32], [False], False),         # d0 / 16, d0 mod 16: constraints on the tile, no failure
    ([32], [2, 16], [True, False], False),   # collapsed: s0 * 16 + d0
    ([4, 8], [2, 16], [True, False], False), # s0 * 2 + d0 / 8, d0 mod 8
    ([16, 2], [2, 16], [False, True], True), # ... s1 mod 2
    ([1, 32], [32], [True], False),          # a unit dimension reads 0
])
def test_range_variables_under_floordiv_or_mod(src, dst, symbolic, fails):
    assert _delinearized_symbol(src, dst, symbolic) is fails


def test_reduction_of_a_concatenation_cannot_be_tiled():
    # symbolic_tile_test.cc, FailsGracefullyAtPropagatingTileThroughReductionOfConcatenation
    k = fusion("""HloModule m
max_computation {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT maximum = f32[] maximum(p0, p1)
}
computation {
  p0 = f32[10,8]{1,0} parameter(0)
  p1 = f32[20,8]{1,0} parameter(1)
  concatenate = f32[30,8]{1,0} concatenate(p0, p1), dimensions={0}
  neg_inf = f32[] constant(-inf)
  ROOT reduce = f32[8] reduce(concatenate, neg_inf), dimensions={0}, to_apply=max_computation
}
ENTRY e {
  p0 = f32[10,8]{1,0} parameter(0)
  p1 = f32[20,8]{1,0} parameter(1)
  ROOT fusion = f32[8] fusion(p0, p1), kind=kLoop, calls=computation
}""")
    with pytest.raises(TilingError):
        check_symbolic_tiling(k)


@pytest.mark.parametrize("op", ["reshape", "bitcast"])
def test_constrained_reshapes_are_analyzed(op):
    # symbolic_tile_analysis_test.cc, DoesNotBailOutOnConstrainedReshape / ...Bitcast
    k = fusion(f"""HloModule m
fusion {{
  p0 = f32[4,2]{{1,0}} parameter(0)
  ROOT r = f32[8] {op}(p0)
}}
ENTRY main {{
  p0 = f32[4,2]{{1,0}} parameter(0)
  ROOT fusion = f32[8] fusion(p0), kind=kLoop, calls=fusion
}}""")
    check_symbolic_tiling(k)


def test_only_the_input_dimensions_a_reduced_dimension_reaches_carry_it():
    from xla_costmodel.analysis._tiling import _delinearized_symbols

    # [2 (reduced), 16] read from [4, 8]: s0 * 2 + d1 floordiv 8, then d1 mod 8 (no range variable)
    assert _delinearized_symbols([4, 8], [2, 16], [True, False]) == (False, [True, False])
    assert _delinearized_symbols([32], [2, 16], [False, True]) == (False, [True])
