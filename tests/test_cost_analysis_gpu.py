"""`gpu_cost_analysis` (XLA's GpuHloCostAnalysis).

References nobody here wrote: the HLO and expected numbers of XLA's own
`xla/service/gpu/model/gpu_hlo_cost_analysis_test.cc` (each test below names
the XLA test it reproduces), and XLA's clock-cycle tables
(`hlo_op_profiles_data.h`, bundled in `xla_costmodel.devices`).
"""

from __future__ import annotations

import warnings

import pytest

import xla_costmodel as xc
from xla_costmodel.analysis import CostAnalysisWarning, GpuCostAnalysis, gpu_cost_analysis, module_cost

from conftest import fixture_paths


def _gpu(text: str, device=None, **kwargs) -> tuple[GpuCostAnalysis, xc.HloModule]:
    module = xc.parse_hlo(text)
    return gpu_cost_analysis(module, device, **kwargs), module


def _fusion_param(module, i: int):
    return module.entry.root.fused_computation.parameter(i)


def test_conv_custom_call():  # XLA: ConvCustomCall
    a, _ = _gpu("""HloModule module, is_scheduled=true
ENTRY entry {
  p0 = s8[128,12,24,24,4]{4,3,2,1,0} parameter(0)
  p1 = s8[16,12,5,5,4]{4,3,2,1,0} parameter(1)
  p2 = f32[16]{0} parameter(2)
  conv1 = (s8[128,4,24,24,4]{4,3,2,1,0}, u8[0]{0}) custom-call(p0, p1, p2), window={size=5x5 pad=2_2x2_2}, dim_labels=bf01_oi01->bf01, custom_call_target="__cudnn$convBiasActivationForward"
  ROOT tuple = ((s8[128,4,24,24,4]{4,3,2,1,0}, u8[0]{0})) tuple(conv1)
}""")
    op0, op1, op2, out = 128 * 12 * 24 * 24 * 4, 16 * 12 * 5 * 5 * 4, 4 * 16, 128 * 4 * 24 * 24 * 4
    assert [a.operand_bytes_accessed("conv1", i) for i in range(3)] == [op0, op1, op2]
    assert a.output_bytes_accessed("conv1") == out
    assert a.bytes_accessed("conv1") == op0 + op1 + op2 + out
    assert a.flop_count("conv1") == 159694848


def test_cublas_custom_call():  # XLA: CublasCustomCall
    a, _ = _gpu("""HloModule module
ENTRY %main (arg0: f32[100,100], arg1: f32[100,100]) -> f32[100,100] {
  %arg0 = f32[100,100]{1,0} parameter(0)
  %arg1 = f32[100,100]{1,0} parameter(1)
  %custom-call.1 = (f32[100,100]{1,0}, s8[80000]{0}) custom-call(%arg0, %arg1), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}
  ROOT %get-tuple-element = f32[100,100]{1,0} get-tuple-element(%custom-call.1), index=0
}""")
    size = 4 * 100 * 100
    assert a.operand_bytes_accessed("custom-call.1", 0) == size
    assert a.operand_bytes_accessed("custom-call.1", 1) == size
    assert a.output_bytes_accessed("custom-call.1") == size  # the workspace does not count
    assert a.bytes_accessed("custom-call.1") == 3 * size
    assert a.flop_count("custom-call.1") == 2 * 100 * 100 * 100
    assert a.bytes_read("custom-call.1") == 2 * size and a.bytes_written("custom-call.1") == 0  # XLA: per leaf
    assert a.shape_size(xc.parse_hlo("HloModule m\nENTRY e {\n  ROOT p = (f32[2], f32[3]) parameter(0)\n}")
                        .entry.root.shape) == 16


def test_reduce_window_with_overlaps_repeated_reads():  # XLA: ReduceWindowWithOverlapsRepeatedReads
    a, m = _gpu("""HloModule module, is_scheduled=true
add {
  a0 = f32[] parameter(0)
  a1 = f32[] parameter(1)
  ROOT _ = f32[] add(a0, a1)
}
ENTRY entry {
  p0 = f32[8,8] parameter(0)
  c0 = f32[] constant(0)
  ROOT _ = f32[3,4] reduce-window(p0, c0), window={size=4x5 stride=2x1}, to_apply=add
}""")
    root, n_out = m.entry.root, 3 * 4
    assert a.flop_count() == 3 * n_out * (4 * 5 - 1)
    assert a.bytes_accessed() == 4 * (8 * 8 + 1 + n_out)
    assert a.operand_bytes_accessed(root, 0) == 4 * n_out * 4 * 5
    assert a.operand_bytes_accessed(root, 1) == 4
    assert a.output_bytes_accessed(root) == 4 * n_out


def test_broadcast_with_repeats():  # XLA: BroadcastWithRepeats
    a, m = _gpu("""HloModule m
f {
  p1 = s8[] parameter(0)
  c1 = s8[] constant(0)
  a1 = s8[] add(p1, c1)
  b1 = s8[10000] broadcast(a1), dimensions={}
  b2 = s8[10000] broadcast(c1), dimensions={}
  ROOT r1 = s8[10000] add(b1, b2)
}
ENTRY e {
  p0 = s8[] parameter(0)
  ROOT r0 = s8[10000] fusion(p0), kind=kInput, calls=f
}""")
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 10000
    assert a.operand_bytes_accessed(root, 0) == 10000
    assert a.bytes_read(root) == 10000 and a.bytes_written(root) == 10000
    assert a.bytes_accessed(root) == 2 * 10000
    assert a.bytes_accessed() == 2 * 10000


def test_without_repeats():  # XLA: WithoutRepeats (count_multiple_input_accesses = false)
    a, m = _gpu("""HloModule m
f {
  p1 = s8[] parameter(0)
  a1 = s8[] add(p1, p1)
  b1 = s8[10000] broadcast(a1), dimensions={}
  a2 = s8[10000] add(b1, b1)
  slice1 = s8[8000] slice(a2), slice={[0:8000]}
  slice2 = s8[8000] slice(a2), slice={[2000:10000]}
  c = s8[10000] constant({...})
  slicec1 = s8[8000] slice(c), slice={[0:8000]}
  slicec2 = s8[8000] slice(c), slice={[2000:10000]}
  a3 = s8[8000] add(slice1, slice2)
  a4 = s8[8000] add(slicec1, slicec2)
  ROOT a5 = s8[8000] add(a3, a4)
}
ENTRY e {
  p0 = s8[] parameter(0)
  ROOT r0 = s8[8000] fusion(p0), kind=kInput, calls=f
}""", count_multiple_input_accesses=False)
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 8000
    assert a.operand_bytes_accessed(root, 0) == 1
    assert a.bytes_accessed(root) == 1 + 8000 + 10000  # operand + output + the large constant
    assert a.bytes_accessed() == 1 + 8000 + 10000


def test_broadcast_flops():  # XLA: BroadcastFlops
    a, m = _gpu("""HloModule m
f {
  i0 = f32[1024] iota(), iota_dimension=0
  m0 = f32[1024] add(i0, i0)
  s0 = f32[1024] multiply(m0, m0)
  b0 = f32[1024,1024] broadcast(s0), dimensions={0}
  ROOT r0 = f32[1024,1024] negate(b0)
}
ENTRY e {
  ROOT r = f32[1024,1024] fusion(), kind=kInput, calls=f
}""")
    root, n = m.entry.root, 1024 * 1024
    assert a.output_bytes_accessed(root) == 4 * n
    assert a.bytes_accessed(root) == 4 * n
    assert a.bytes_accessed() == 4 * n
    # negate once per output element; add and multiply recomputed for every broadcast element.
    assert a.flop_count() == n * 3 * 3
    assert a.ir_size(root) == 5


@pytest.mark.parametrize(
    "text,operand_bytes,total_bytes,ir",
    [
        ("""HloModule m
f {
  p1 = s8[100000000] parameter(0)
  i1 = s8[100000000] iota(), iota_dimension=0
  a1 = s8[100000000] add(p1, i1)
  ROOT r1 = s8[1] slice(a1), slice={[0:1]}
}
ENTRY e {
  p0 = s8[100000000] parameter(0)
  ROOT r0 = s8[1] fusion(p0), kind=kInput, calls=f
}""", 1, 2, 4),  # XLA: Slice
        ("""HloModule m
f {
  p1 = s8[100] parameter(0)
  i1 = s8[100] iota(), iota_dimension=0
  a1 = s8[100] add(p1, i1)
  slice1 = s8[1] slice(a1), slice={[0:1]}
  slice2 = s8[1] slice(a1), slice={[3:4]}
  ROOT r = s8[1] add(slice1, slice2)
}
ENTRY e {
  p0 = s8[100] parameter(0)
  ROOT r0 = s8[1] fusion(p0), kind=kInput, calls=f
}""", 2, 3, 9),  # XLA: TwoSlices
        ("""HloModule m
f {
  p0 = s8[] parameter(0)
  m0 = s8[] multiply(p0, p0)
  n0 = s8[] negate(p0)
  ROOT a0 = s8[] add(m0, n0)
}
ENTRY e {
  param0 = s8[] parameter(0)
  ROOT r0 = s8[] fusion(param0), kind=kInput, calls=f
}""", 1, 2, 4),  # XLA: MultipleTrivialUsers
    ],
    ids=["slice", "two_slices", "multiple_trivial_users"],
)
def test_slices_and_shared_reads(text, operand_bytes, total_bytes, ir):
    a, m = _gpu(text)
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 1
    assert a.operand_bytes_accessed(root, 0) == operand_bytes
    assert a.bytes_accessed(root) == total_bytes
    assert a.bytes_accessed() == total_bytes
    assert a.ir_size(root) == ir


def test_elementwise_bitcast():  # XLA: ElementwiseBitcast
    a, m = _gpu("""HloModule m
f {
  p0 = s8[10] parameter(0)
  negate = s8[10] negate(p0)
  bitcast = u8[10] bitcast(p0)
  ROOT result = (s8[10], u8[10]) tuple(negate, bitcast)
}
ENTRY e {
  param0 = s8[10] parameter(0)
  ROOT fusion = (s8[10], u8[10]) fusion(param0), kind=kLoop, calls=f
}""")
    assert a.ir_size(_fusion_param(m, 0)) == 1
    assert a.ir_size(m.entry.root) == 4


def test_mixed_users():  # XLA: MixedUsers
    a, m = _gpu("""HloModule m
f {
  p0 = s8[10] parameter(0)
  n0 = s8[10] negate(p0)
  m0 = s8[10] multiply(n0, n0)
  a0 = s8[10] add(n0, n0)
  s0 = s8[5] slice(a0), slice={[0:5]}
  svar1 = s8[2] slice(n0), slice={[4:6]}
  n1 = s8[2] negate(svar1)
  ROOT c0 = s8[17] concatenate(s0, m0, n1), dimensions={0}
}
ENTRY e {
  param0 = s8[10] parameter(0)
  ROOT r0 = s8[17] fusion(param0), kind=kInput, calls=f
}""")
    root, p0 = m.entry.root, _fusion_param(m, 0)
    assert a.output_bytes_accessed(root) == 17
    assert a.operand_bytes_accessed(root, 0) == 17
    assert a.bytes_accessed(root) == 17 + 17
    assert a.ir_size(p0) == 3  # 2 slice accesses + 1 elementwise from the root
    assert a.ir_size(p0) == a.ir_size(p0.users[0])
    assert a.ir_size(root) == 12


def test_fractional_use_rounding_up():  # XLA: FractionalUseRoundingUp
    a, m = _gpu("""HloModule m
add_s8 {
  lhs = s8[] parameter(0)
  rhs = s8[] parameter(1)
  ROOT add = s8[] add(lhs, rhs)
}
f {
  p0 = s8[] parameter(0)
  b0 = s8[10] broadcast(p0), dimensions={}
  c0 = s8[] constant(0)
  r0 = s8[] reduce(b0, c0), dimensions={0}, to_apply=add_s8
  bitcast0 = s8[1] bitcast(r0)
  i0 = s8[5] iota(), iota_dimension=0
  cat0 = s8[6] concatenate(bitcast0, i0), dimensions={0}
  p1 = s32[] parameter(1)
  ROOT s0 = s8[2] dynamic-slice(cat0, p1), dynamic_slice_sizes={2}
}
ENTRY e {
  p0 = s8[] parameter(0)
  p1 = s32[] parameter(1)
  ROOT r = s8[2] fusion(p0, p1), kind=kInput, calls=f
}""")
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 2
    assert a.operand_bytes_accessed(root, 0) == 10
    assert a.operand_bytes_accessed(root, 1) == 4
    assert a.bytes_accessed(root) == 2 + 10 + 4
    assert a.bytes_accessed() == 2 + 10 + 4


def test_large_constant():  # XLA: LargeConstant
    a, m = _gpu("""HloModule m
f {
  p0 = s8[1000] parameter(0)
  c0 = s8[1000] constant({...})
  ROOT a0 = s8[1000] add(p0, c0)
}
ENTRY e {
  p0 = s8[1000] parameter(0)
  ROOT r = s8[1000] fusion(p0), kind=kInput, calls=f
}""")
    root = m.entry.root
    assert a.output_bytes_accessed(root) == 1000
    assert a.operand_bytes_accessed(root, 0) == 1000
    assert a.bytes_accessed(root) == 3000
    assert a.ir_size(root) == 3


_DUS_USED = """HloModule m
f {
  to_update = s8[3,1,1,1] parameter(0)
  update = s8[1,1,1,1] constant(0)
  a = s32[] constant(0)
  dus = s8[3,1,1,1] dynamic-update-slice(to_update, update, a, a, a, a)
  ROOT _ = s8[3,1,1,1] negate(dus)
}
ENTRY _ {
  to_update = s8[3,1,1,1] parameter(0)
  ROOT _ = s8[3,1,1,1] fusion(to_update), kind=kLoop, calls=f
}"""


def test_dynamic_update_slice_using_operand_data():  # XLA: DynUpdateSliceUsingOperandData
    a, m = _gpu(_DUS_USED)
    assert a.operand_bytes_accessed(m.entry.root, 0) == 3 - 1  # input size minus update size
    assert a.output_bytes_accessed(m.entry.root) == 3


def test_dynamic_update_slice_not_using_operand_data():  # XLA: DynUpdateSliceNotUsingOperandData
    text = _DUS_USED.replace(
        "  dus = s8[3,1,1,1] dynamic-update-slice(to_update, update, a, a, a, a)\n  ROOT _ = s8[3,1,1,1] negate(dus)",
        "  ROOT dus = s8[3,1,1,1] dynamic-update-slice(to_update, update, a, a, a, a)",
    )
    a, m = _gpu(text)
    assert a.operand_bytes_accessed(m.entry.root, 0) == 0
    assert a.output_bytes_accessed(m.entry.root) == 1


def test_common_elementwise_use_two_parameters():  # XLA: CommonElementwiseUseTwoParameters
    a, m = _gpu("""HloModule m
add {
  p0 = s8[] parameter(0)
  p1 = s8[] parameter(1)
  ROOT _ = s8[] add(p0, p1)
}
f {
  p0 = s8[10] parameter(0)
  p1 = s8[10] parameter(1)
  a = s8[10] add(p0, p1)
  c0 = s8[] constant(0)
  r0 = s8[] reduce(a, c0), dimensions={0}, to_apply=add
  c1 = s8[] constant(100)
  r1 = s8[] reduce(a, c1), dimensions={0}, to_apply=add
  ROOT _ = s8[] add(r0, r1)
}
ENTRY _ {
  p0 = s8[10] parameter(0)
  p1 = s8[10] parameter(1)
  ROOT _ = s8[] fusion(p0, p1), kind=kLoop, calls=f
}""")
    assert a.common_elementwise_utilization(_fusion_param(m, 0), _fusion_param(m, 1)) == 2.0


@pytest.mark.parametrize("multi_output", [False, True])
def test_common_elementwise_use_parameter_and_root(multi_output):
    # XLA: CommonElementwiseUseParameterAndRoot(MultiOutputFusion)
    root = "ROOT _ = (s8[10], s8[10]) tuple(a, neg)" if multi_output else "ROOT _ = s8[10] negate(a)"
    out = "(s8[10], s8[10])" if multi_output else "s8[10]"
    a, m = _gpu(f"""HloModule m
f {{
  p0 = s8[10] parameter(0)
  p1 = s8[] parameter(1)
  p1b = s8[10] broadcast(p1)
  a = s8[10] add(p0, p1b)
  neg = s8[10] negate(a)
  {root}
}}
ENTRY _ {{
  p0 = s8[10] parameter(0)
  p1 = s8[] parameter(1)
  ROOT _ = {out} fusion(p0, p1), kind=kLoop, calls=f
}}""")
    fused_root = m.entry.root.fused_computation.root
    assert a.common_elementwise_utilization(_fusion_param(m, 0), fused_root) == 1.0
    assert a.common_elementwise_utilization(_fusion_param(m, 1), fused_root) == 0.0


def test_reduce():  # XLA: Reduce
    a, m = _gpu("""HloModule m
add {
  param_0 = f32[] parameter(0)
  param_1 = f32[] parameter(1)
  ROOT add.0 = f32[] add(param_0, param_1)
}
ENTRY entry_computation {
  param_0.3 = f32[32,40]{1,0} parameter(0)
  constant = f32[] constant(0)
  ROOT reduce = f32[32]{0} reduce(param_0.3, constant), dimensions={1}, to_apply=add
}""")
    r = m.entry.root
    assert a.operand_bytes_accessed(r, 0) == 4 * 32 * 40
    assert a.operand_bytes_accessed(r, 1) == 4 * 32  # the init value, once per output element
    assert a.output_bytes_accessed(r) == 4 * 32
    assert a.bytes_accessed(r) == 4 * 32 * 40 + 4 * 32 + 4 * 32
    assert a.flop_count(r) == 32 * 39 * 3


def test_variadic_reduce():  # XLA: VariadicReduce
    a, m = _gpu("""HloModule m
add {
  param_0 = f32[] parameter(0)
  param_1 = f32[] parameter(1)
  param_2 = f32[] parameter(2)
  param_3 = f32[] parameter(3)
  add.0 = f32[] add(param_0, param_2)
  add.1 = f32[] add(param_1, param_3)
  ROOT t = (f32[], f32[]) tuple(add.0, add.1)
}
ENTRY entry_computation {
  param_0.3 = f32[32,40]{1,0} parameter(0)
  param_1.3 = f32[32,40]{1,0} parameter(1)
  param_2.2 = f32[] parameter(2)
  constant = f32[] constant(0)
  ROOT reduce = (f32[32]{0}, f32[32]{0}) reduce(param_0.3, param_1.3, param_2.2, constant), dimensions={1}, to_apply=add
}""")
    r = m.entry.root
    inp, init, out = 4 * 32 * 40, 4 * 32, 2 * 4 * 32
    assert [a.operand_bytes_accessed(r, i) for i in range(4)] == [inp, inp, init, init]
    assert a.output_bytes_accessed(r) == out
    assert a.bytes_accessed(r) == 2 * inp + 2 * init + out
    assert a.flop_count(r) == 32 * 39 * 6


def test_collective_permute():  # XLA: CollectivePermute, CollectivePermuteStart
    a, m = _gpu("""HloModule m, num_partitions=2
ENTRY entry {
  p0 = f32[4096] parameter(0)
  cps = (f32[4096], f32[4096]) collective-permute-start(p0), source_target_pairs={{0,1},{1,0}}
  cpd = f32[4096] collective-permute-done(cps)
  ROOT cp = f32[4096] collective-permute(cpd), source_target_pairs={{0,1},{1,0}}
}""")
    assert a.bytes_transferred("cp") == 4096 * 4
    assert a.bytes_transferred("cps") == 4096 * 4


def test_async_all_reduce():  # XLA: AsyncAllReduce
    a, m = _gpu("""HloModule m
add {
  param_0 = f32[] parameter(0)
  param_1 = f32[] parameter(1)
  ROOT t = f32[] add(param_0, param_1)
}
ENTRY entry_computation {
  p = f32[4096] parameter(0)
  ar-start = f32[4096] all-reduce-start(p), to_apply=add
  ROOT _ = f32[4096] all-reduce-done(ar-start)
}""")
    start = m.entry.root.operands[0]
    assert a.bytes_transferred(start) == 4096 * 4
    assert a.bytes_accessed(start) == 4096 * 4


def test_all_gather():  # XLA: AllGather, AsyncAllGather
    a, m = _gpu("""HloModule m, num_partitions=4
ENTRY entry_computation {
  p = f32[1024] parameter(0)
  ROOT _ = f32[4096] all-gather(p), dimensions={0}, use_global_device_ids=true, replica_groups={{0,1,2,3}}, channel_id=1
}""")
    r = m.entry.root
    assert a.bytes_transferred(r) == 4096 * 4
    assert a.bytes_accessed(r) == 45056  # write (3 + 4) x 1024 x 4, read 4 x 1024 x 4
    assert a.num_of_devices(r) == 4
    a, m = _gpu("""HloModule m, num_partitions=4
ENTRY entry_computation {
  p.0 = f32[1024] parameter(0)
  p.1 = f32[512] parameter(1)
  ag-start = ((f32[1024],f32[512]), (f32[4096],f32[2048])) all-gather-start(p.0,p.1), dimensions={0}, use_global_device_ids=true, replica_groups={{0,1,2,3}}, channel_id=1
  ROOT _ = (f32[4096],f32[2048]) all-gather-done(ag-start)
}""")
    start = m.entry.root.operands[0]
    assert a.bytes_transferred(start) == 4096 * 4 + 2048 * 4
    assert a.bytes_accessed(start) == 67584


_REDUCE_SCATTER = """HloModule m, num_partitions=4
add {
  param_0 = f32[] parameter(0)
  param_1 = f32[] parameter(1)
  ROOT t = f32[] add(param_0, param_1)
}
"""


def test_reduce_scatter():  # XLA: ReduceScatter, AsyncReduceScatter
    a, m = _gpu(_REDUCE_SCATTER + """ENTRY entry_computation {
  p = f32[4096] parameter(0)
  ROOT _ = f32[1024] reduce-scatter(p), dimensions={0}, to_apply=add, use_global_device_ids=true, replica_groups={{0,1,2,3}}, channel_id=1
}""")
    assert a.bytes_transferred(m.entry.root) == 4096 * 4
    assert a.bytes_accessed(m.entry.root) == 45056
    a, m = _gpu(_REDUCE_SCATTER + """async_computation {
  param_3 = f32[4096] parameter(0)
  param_4 = f32[2048] parameter(1)
  ROOT r = (f32[1024],f32[512]) reduce-scatter(param_3,param_4), dimensions={0}, to_apply=add, use_global_device_ids=true, replica_groups={{0,1,2,3}}, channel_id=1
}
ENTRY entry_computation {
  p.0 = f32[4096] parameter(0)
  p.1 = f32[2048] parameter(1)
  rs-start = ((f32[4096],f32[2048]),(f32[1024],f32[512])) async-start(p.0,p.1), calls=async_computation
  ROOT _ = (f32[1024],f32[512]) async-done(rs-start)
}""")
    start = m.entry.root.operands[0]
    assert a.bytes_transferred(start) == 4096 * 4 + 2048 * 4
    assert a.bytes_accessed(start) == 67584


_ELEMENTWISE = """HloModule m
ENTRY entry_computation {
  param_0 = f32[10] parameter(0)
  param_1 = f32[10] parameter(1)
  param_2 = f32[10] parameter(2)
  param_3 = f32[10] parameter(3)
  tanh = f32[10] tanh(param_0)
  mul = f32[10] multiply(tanh, param_1)
  ROOT clamp = f32[10] clamp(mul, param_2, param_3)
}"""


def test_custom_op_profile_is_used():  # XLA: CustomOpProfileIsUsed
    profile = {("clamp", "f32"): 7, ("multiply", "f32"): 11, ("tanh", "f32"): 13}
    a, _ = _gpu(_ELEMENTWISE, profile)
    assert (a.flop_count("clamp"), a.flop_count("mul"), a.flop_count("tanh")) == (70, 110, 130)
    assert a.transcendental_count("tanh") == 0  # the GPU analysis prices transcendentals as flops


def test_device_profiles():
    # XLA's H100 table (sm_90): tanh f32 467, multiply f32 3; clamp is not profiled (default 3).
    from xla_costmodel.devices import get_device, load_op_profile

    for device in ("h100-sxm", get_device("h100-sxm"), load_op_profile("sm_90"), load_op_profile((9, 0))):
        a, _ = _gpu(_ELEMENTWISE, device)
        assert (a.flop_count("tanh"), a.flop_count("mul"), a.flop_count("clamp")) == (4670, 30, 30), device
    # A profile is named through `load_op_profile`, a device through its name: nothing else is guessed.
    with pytest.raises(ValueError, match="unknown device 'sm_90'"):
        _gpu(_ELEMENTWISE, "sm_90")
    with pytest.raises(TypeError, match="DeviceSpec, a device name, an op profile mapping or None"):
        _gpu(_ELEMENTWISE, (9, 0))
    # No device: XLA's default profile sm_86 (tanh f32 190).
    a, _ = _gpu(_ELEMENTWISE)
    assert a.flop_count("tanh") == 1900
    assert a.flops_per_element("tanh", "f32") == 190 and a.flops_per_element("tanh", "bf16") == 3


def test_triton_cost_estimate_hint():  # XLA: TritonCustomCallEscapedJsonBackendConfig
    text = r'''HloModule module
ENTRY %main (arg0: f32[100,100]) -> (f32[100,100]) {
  %arg0 = f32[100,100]{1,0} parameter(0)
  ROOT %custom-call = (f32[100,100]{1,0}) custom-call(%arg0), custom_call_target="triton_kernel_call_ffi", backend_config="{cost_estimate_json = \"{\\\"flops\\\": 123456, \\\"bytes_accessed\\\": 654321}\"}"
}'''
    with warnings.catch_warnings():
        warnings.simplefilter("error", CostAnalysisWarning)
        a, _ = _gpu(text)
    assert a.flop_count("custom-call") == 123456
    assert a.bytes_accessed("custom-call") == 654321
    # Without the bytes hint, bytes stay unknown (-1).
    a, _ = _gpu(text.replace(r", \\\"bytes_accessed\\\": 654321", ""))
    assert a.flop_count("custom-call") == 123456
    assert a.bytes_accessed("custom-call") == -1


def test_unknown_custom_call_is_unpriced():
    with pytest.warns(CostAnalysisWarning, match="custom-call:my_kernel"):
        a, _ = _gpu("""HloModule m
ENTRY e {
  x = f32[8]{0} parameter(0)
  ROOT c = f32[8]{0} custom-call(x), custom_call_target="my_kernel"
}""")
    assert a.cost("c").unpriced == ("custom-call:my_kernel",)
    assert a.flop_count("c") == -1


def test_producer_consumer_merged_too_large():
    a, m = _gpu("""HloModule m
f {
  p0 = f32[64] parameter(0)
  ROOT n = f32[64] negate(p0)
}
ENTRY e {
  x = f32[64] parameter(0)
  e = f32[64] exponential(x)
  ROOT r = f32[64] fusion(e), kind=kLoop, calls=f
}""")
    assert a.ir_size("e") == 1 and a.ir_size("r") == 2
    assert not a.producer_consumer_merged_too_large("e", "r")


def test_revisit_after_graph_edit():
    module = xc.parse_hlo(_ELEMENTWISE)
    a = gpu_cost_analysis(module, "h100-sxm")  # sm_90's table
    before = a.flop_count()
    mul = module.entry.instruction("mul")
    mul.opcode = "add"  # an edit a fusion pass might make
    a.revisit(mul)
    assert a.flop_count("mul") == 70  # sm_90 add f32: 7 cycles
    assert a.flop_count() == before - 30 + 70


def test_every_fixture_analyses_and_dots_agree_with_the_base_analysis():
    for path in fixture_paths("*.post.hlo"):
        module = xc.load_hlo(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CostAnalysisWarning)
            a = gpu_cost_analysis(module, "a100-40gb")
            df = a.to_dataframe()
            base = module_cost(module)
        assert len(df) == sum(len(c.instructions) for c in module.computations), path.name
        assert (df.ir_size >= 0).all()
        dots = df[df.opcode == "dot"]
        for name, flops in zip(dots.name, dots.flops):
            assert flops > 0, (path.name, name)
        assert a.transcendental_count() <= base["transcendentals"]


def test_kernel_cost_is_the_module_analysis_kernel_by_kernel():
    """`kernel_cost` (one kernel analysed on its own, as the cost models and detached fusions
    need it) gives, for every kernel of every fixture, exactly what the module analyses give:
    `gpu_cost_analysis` for variant "gpu", `cost_analysis` (jaxlib's numbers) for "xla"."""
    from pathlib import Path

    from xla_costmodel.analysis import instruction_costs, kernel_cost

    data = Path(__file__).parent / "data" / "xla_conformance"
    device = xc.get_device("rtx-a6000-xla-test")
    compared = 0
    for path in fixture_paths() + sorted(data.glob("*.hlo")):
        module = xc.load_hlo(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CostAnalysisWarning)
            gpu = gpu_cost_analysis(module, device)
            base = instruction_costs(module)
        bodies = {id(i.fused_computation) for _, i in module.instructions() if i.fused_computation is not None}
        for comp in module.computations:
            if id(comp) in bodies:
                continue
            for k in comp.instructions:
                if k.opcode in ("parameter", "while", "conditional", "call") or k.opcode.startswith("async"):
                    continue
                where = f"{path.name}:{k.name}"
                mine = kernel_cost(k, "gpu", device)
                assert mine.flops == gpu.flop_count(k), where
                assert mine.transcendentals == gpu.transcendental_count(k), where
                assert mine.bytes_accessed == gpu.bytes_accessed(k), where
                assert mine.bytes_written == gpu.output_bytes_accessed(k), where
                for i in range(len(k.operands)):
                    assert mine.operand_bytes[i] == gpu.operand_bytes_accessed(k, i), where
                    assert mine.operand_utilization[i] == gpu.operand_utilization(k, i), where
                ref = base[(comp.name, k.name)]
                mine = kernel_cost(k, "xla")
                assert (mine.flops, mine.transcendentals, mine.bytes_accessed, mine.bytes_written) == (
                    ref.flops, ref.transcendentals, ref.bytes_accessed, ref.output_bytes_accessed), where
                assert mine.operand_bytes == ref.operand_bytes_accessed[: len(k.operands)], where
                compared += 1
    assert compared > 2000
