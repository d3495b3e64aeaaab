"""Kernel features, each checked against counts worked out by hand from the HLO."""

from __future__ import annotations

import pytest

from xla_costmodel import parse_hlo
from xla_costmodel.fit import FEATURES, FeatureError, kernel_features
from xla_costmodel.features._counting import features_of
from xla_costmodel.features._rows import kernel_from_row
from xla_costmodel.devices import DeviceSpec

CPU = DeviceSpec(
    name="test-cpu", kind="cpu", core_count=2, fpus_per_core=8, clock_rate_ghz=2.0,
    memory_bandwidth_bytes_per_s=1e10, l1_cache_bytes_per_core=32768, l2_cache_bytes=1 << 20,
    l3_cache_bytes=32 << 20, kernel_launch_overhead_s=3e-7,
)


def _kernel(text: str, name: str):
    return parse_hlo(text).entry.instruction(name)


def _nonzero(x: dict) -> dict:
    return {k: v for k, v in x.items() if v}


def test_strided_slice_scale_add():
    # a * x[::2] + y[::2]: the scalar is broadcast (uniform, s0), the slices read
    # every second element of their footprint (stride 2, utilization 1/2 -> 1of2).
    text = """HloModule m
%f (p0: f32[2048], p1: f32[2048], p2: f32[]) -> f32[1024] {
  %p2 = f32[] parameter(2)
  %b = f32[1024]{0} broadcast(%p2), dimensions={}
  %p1 = f32[2048]{0} parameter(1)
  %sl1 = f32[1024]{0} slice(%p1), slice={[0:2048:2]}
  %m = f32[1024]{0} multiply(%b, %sl1)
  %p0 = f32[2048]{0} parameter(0)
  %sl0 = f32[1024]{0} slice(%p0), slice={[0:2048:2]}
  ROOT %a = f32[1024]{0} add(%m, %sl0)
}
ENTRY %e (y: f32[2048], x: f32[2048], a: f32[]) -> f32[1024] {
  %y = f32[2048]{0} parameter(0)
  %x = f32[2048]{0} parameter(1)
  %a = f32[] parameter(2)
  ROOT %k = f32[1024]{0} fusion(%y, %x, %a), kind=kLoop, calls=%f
}"""
    x = _nonzero(features_of(_kernel(text, "k"), CPU))
    assert x == {
        "ld_32b_s0": 1024.0,  # one read of the scalar per output element (XLA's bytes accessed)
        "ld_32b_1of2": 2048.0,
        "st_32b_s1": 1024.0,
        "minldst_32b": 1024.0,
        "op_mul_f32": 1024.0,
        "op_add_f32": 1024.0,
        "launch": 1.0,
        "kernel_thunk": 1.0,
        "first": 1.0,  # the only kernel of its module, so the first
    }


def test_transpose_reads_strided_and_large_outputs_split_into_tasks():
    # A physical transpose of 512x512 f32 (1 MiB out): reads with a stride of 512
    # elements, every element used (4of4); 1 MiB // 256 KiB = 4 tasks, capped at 2 cores.
    text = """HloModule m
%f (p: f32[512,512]) -> f32[512,512] {
  %p = f32[512,512]{1,0} parameter(0)
  %t = f32[512,512]{0,1} transpose(%p), dimensions={1,0}
  ROOT %c = f32[512,512]{1,0} copy(%t)
}
ENTRY %e (x: f32[512,512]) -> f32[512,512] {
  %x = f32[512,512]{1,0} parameter(0)
  ROOT %k = f32[512,512]{1,0} fusion(%x), kind=kLoop, calls=%f
}"""
    x = _nonzero(features_of(_kernel(text, "k"), CPU))
    n = 512 * 512
    # Per-thread counts are halved; L3 and DRAM bytes (shared) are not.
    assert x["ld_32b_4of4"] == n / 2 and x["st_32b_s1"] == n / 2
    assert x["bytes_l2"] == 8 * n / 2  # footprint 2 MiB > L1 and > L2
    assert x["bytes_l3"] == 8 * n and "bytes_dram" not in x  # < 32 MiB L3
    assert x["tasks"] == 1.0 and x["launch"] == 1.0 and x["kernel_thunk"] == 1.0 and x["first"] == 1.0


def test_transposed_read_through_a_bitcast_stays_strided():
    # The operand is bitcast to three dimensions, then transposed: along the output's minor
    # dimension the reads step through the bitcast's dimension 1, i.e. 32 elements apart in the
    # operand's memory (its dimension 0). A bitcast keeps memory order, so the load is strided
    # (4of4), not contiguous; a contiguous copy through the same bitcast stays s1.
    text = """HloModule m
%f (p: f32[64,32]) -> f32[32,2,32] {
  %p = f32[64,32]{1,0} parameter(0)
  %b = f32[2,32,32]{2,1,0} bitcast(%p)
  ROOT %t = f32[32,2,32]{2,1,0} transpose(%b), dimensions={2,0,1}
}
%g (q: f32[64,32]) -> f32[2,32,32] {
  %q = f32[64,32]{1,0} parameter(0)
  %b = f32[2,32,32]{2,1,0} bitcast(%q)
  ROOT %n = f32[2,32,32]{2,1,0} negate(%b)
}
ENTRY %e (x: f32[64,32]) -> (f32[32,2,32], f32[2,32,32]) {
  %x = f32[64,32]{1,0} parameter(0)
  %k = f32[32,2,32]{2,1,0} fusion(%x), kind=kLoop, calls=%f
  %c = f32[2,32,32]{2,1,0} fusion(%x), kind=kLoop, calls=%g
  ROOT %r = (f32[32,2,32], f32[2,32,32]) tuple(%k, %c)
}"""
    k = _nonzero(features_of(_kernel(text, "k"), CPU))
    assert k["ld_32b_4of4"] == 64 * 32 and "ld_32b_s1" not in k
    c = _nonzero(features_of(_kernel(text, "c"), CPU))
    assert c["ld_32b_s1"] == 64 * 32 and "ld_32b_4of4" not in c


def test_lone_copy_is_a_memcpy_unless_it_changes_the_layout():
    # XLA:CPU runs a lone copy as a copy thunk, no compiled kernel: one that keeps the layout
    # is a memcpy (bytes in and out), one that changes it a transpose (strided reads).
    text = """HloModule m
ENTRY %e (x: f32[64,32]) -> (f32[64,32], f32[64,32]) {
  %x = f32[64,32]{1,0} parameter(0)
  %same = f32[64,32]{1,0} copy(%x)
  %moved = f32[64,32]{0,1} copy(%x)
  ROOT %r = (f32[64,32], f32[64,32]{0,1}) tuple(%same, %moved)
}"""
    same = _nonzero(features_of(_kernel(text, "same"), CPU))
    assert same == {"memcpy_bytes": 2 * 64 * 32 * 4, "launch": 1.0, "first": 1.0}
    moved = _nonzero(features_of(_kernel(text, "moved"), CPU))
    assert "memcpy_bytes" not in moved and "kernel_thunk" not in moved
    assert moved["ld_32b_4of4"] == 64 * 32 and moved["st_32b_s1"] == 64 * 32


def test_gather_bf16_reduce_and_convert():
    text = """HloModule m
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%g (p0: bf16[100], p1: s32[64,1]) -> bf16[64] {
  %p0 = bf16[100]{0} parameter(0)
  %p1 = s32[64,1]{1,0} parameter(1)
  %gt = bf16[64,1]{1,0} gather(%p0, %p1), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}
  ROOT %bc = bf16[64]{0} bitcast(%gt)
}
%r (p: bf16[32,16]) -> f32[32] {
  %p = bf16[32,16]{1,0} parameter(0)
  %cv = f32[32,16]{1,0} convert(%p)
  %z = f32[] constant(0)
  ROOT %red = f32[32]{0} reduce(%cv, %z), dimensions={1}, to_apply=%add
}
ENTRY %e (x: bf16[100], i: s32[64,1], y: bf16[32,16]) -> (bf16[64], f32[32]) {
  %x = bf16[100]{0} parameter(0)
  %i = s32[64,1]{1,0} parameter(1)
  %y = bf16[32,16]{1,0} parameter(2)
  %kg = bf16[64]{0} fusion(%x, %i), kind=kLoop, calls=%g
  %kr = f32[32]{0} fusion(%y), kind=kLoop, calls=%r
  ROOT %t = (bf16[64], f32[32]) tuple(%kg, %kr)
}"""
    g = _nonzero(features_of(_kernel(text, "kg"), CPU))  # the first of two kernels in the entry's schedule
    assert g == {"ld_16b_gather": 64.0, "ld_32b_s1": 64.0, "st_16b_s1": 64.0, "minldst_16b": 64.0, "launch": 1.0,
                 "kernel_thunk": 1.0, "first": 1.0}
    r = _nonzero(features_of(_kernel(text, "kr"), CPU))  # the second: no `first`
    # 512 converts (counted in the wider type), 512 - 32 = 480 reducer adds.
    assert r == {"ld_16b_s1": 512.0, "st_32b_s1": 32.0, "op_other_f32": 512.0, "red_f32": 480.0, "launch": 1.0,
                 "kernel_thunk": 1.0}


def test_library_dot_and_standalone_dot():
    # A YNNPACK fusion and an Eigen dot (A^T B): library calls move elements
    # (no stride classes) and carry their own fixed cost; a matrix-vector dot is
    # emitted as a loop of multiply-adds.
    text = """HloModule m
%mm (p0: f32[8,16], p1: f32[16,4]) -> f32[8,4] {
  %p0 = f32[8,16]{1,0} parameter(0)
  %p1 = f32[16,4]{1,0} parameter(1)
  ROOT %d = f32[8,4]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY %e (a: f32[8,16], b: f32[16,4], c: f32[16,8], v: f32[16]) -> (f32[8,4], f32[8,4], f32[8]) {
  %a = f32[8,16]{1,0} parameter(0)
  %b = f32[16,4]{1,0} parameter(1)
  %c = f32[16,8]{1,0} parameter(2)
  %v = f32[16]{0} parameter(3)
  %y = f32[8,4]{1,0} fusion(%a, %b), kind=kCustom, calls=%mm, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
  %z = f32[8,4]{1,0} dot(%c, %b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  %mv = f32[8]{0} dot(%a, %v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[8,4], f32[8,4], f32[8]) tuple(%y, %z, %mv)
}"""
    y = _nonzero(features_of(_kernel(text, "y"), CPU))
    assert y == {"matmul_f32": 2 * 8 * 4 * 16, "matmul_batch": 1.0, "lib_elements": 8 * 16 + 16 * 4 + 8 * 4,
                 "launch": 1.0, "lib_ynn": 1.0, "first": 1.0}  # the entry's first kernel
    z = _nonzero(features_of(_kernel(text, "z"), CPU))
    assert z == {"dot_flops": 2 * 8 * 4 * 16, "matmul_batch": 1.0, "lib_elements": 16 * 8 + 16 * 4 + 8 * 4,
                 "launch": 1.0, "lib_eigen": 1.0}
    mv = _nonzero(features_of(_kernel(text, "mv"), CPU))
    assert mv["op_mul_f32"] == mv["op_add_f32"] == 8 * 16 and mv["kernel_thunk"] == 1.0 and "dot_flops" not in mv


def test_library_fusion_runs_each_op_once():
    # A YNNPACK fusion of a dot and the log-softmax start after it (max over each row, subtracted
    # back): the library computes the dot once. XLA's utilization counts the dot once per element
    # that re-reads its row maximum (a loop would recompute it); a library call does not.
    text = """HloModule m
%max (x: f32[], v: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %v = f32[] parameter(1)
  ROOT %m = f32[] maximum(%x, %v)
}
%mm (p0: f32[4,8], p1: f32[8,10]) -> f32[4,10] {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[8,10]{1,0} parameter(1)
  %d = f32[4,10]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %c = f32[] constant(-inf)
  %r = f32[4]{0} reduce(%d, %c), dimensions={1}, to_apply=%max
  %b = f32[4,10]{1,0} broadcast(%r), dimensions={0}
  ROOT %s = f32[4,10]{1,0} subtract(%d, %b)
}
ENTRY %e (a: f32[4,8], w: f32[8,10]) -> f32[4,10] {
  %a = f32[4,8]{1,0} parameter(0)
  %w = f32[8,10]{1,0} parameter(1)
  ROOT %y = f32[4,10]{1,0} fusion(%a, %w), kind=kCustom, calls=%mm, backend_config={"fusion_config":{"kind":"__ynn_fusion"}}
}"""
    y = _nonzero(features_of(_kernel(text, "y"), CPU))
    assert y["matmul_f32"] == 2 * 4 * 10 * 8  # once, not once per element of the subtraction
    assert y["op_add_f32"] == 4 * 10  # the subtraction, once per element
    assert y["lib_elements"] == 4 * 8 + 8 * 10 + 4 * 10  # each operand read once, the result written once
    assert y["lib_ynn"] == 1.0 and "kernel_thunk" not in y


def test_eigen_convolution_windows_and_groups():
    text = """HloModule m
ENTRY %e (x: f32[2,8,8,16], w: f32[3,3,1,16]) -> f32[2,8,8,16] {
  %x = f32[2,8,8,16]{3,2,1,0} parameter(0)
  %w = f32[3,3,1,16]{3,2,1,0} parameter(1)
  ROOT %c = f32[2,8,8,16]{3,2,1,0} convolution(%x, %w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=16
}"""
    x = _nonzero(features_of(_kernel(text, "c"), CPU))
    windows = 2 * 8 * 8 * 9
    assert x["conv_windows"] == windows and x["conv_groups"] == 16 * windows
    # XLA counts only window positions inside the input: 8*3 - 2 padded = 22 per
    # spatial dimension; one input feature per group; 2 flops per multiply-add.
    assert x["conv_flops"] == 2 * 2 * 16 * 22 * 22 * 1
    assert x["lib_eigen"] == 1.0


def test_not_a_kernel_and_free():
    text = """HloModule m
%c (t: (s32[])) -> pred[] {
  %t = (s32[]) parameter(0)
  ROOT %f = pred[] constant(false)
}
%b (t: (s32[])) -> (s32[]) {
  ROOT %t = (s32[]) parameter(0)
}
ENTRY %e (x: s32[]) -> (s32[]) {
  %x = s32[] parameter(0)
  %tp = (s32[]) tuple(%x)
  ROOT %w = (s32[]) while(%tp), condition=%c, body=%b
}"""
    with pytest.raises(FeatureError, match="not a kernel"):
        features_of(_kernel(text, "w"), CPU)
    assert _nonzero(features_of(_kernel(text, "tp"), CPU)) == {"launch": 1.0}


def test_rows_from_hlo_text_alone_match_the_module():
    module_text = """HloModule m
%f (p0: f32[256], p1: f32[256]) -> f32[256] {
  %p0 = f32[256]{0} parameter(0)
  %p1 = f32[256]{0} parameter(1)
  ROOT %d = f32[256]{0} divide(%p0, %p1)
}
ENTRY %e (x: f32[256], y: f32[256]) -> f32[256] {
  %x = f32[256]{0} parameter(0)
  %y = f32[256]{0} parameter(1)
  ROOT %k = f32[256]{0} fusion(%x, %y), kind=kLoop, calls=%f
}"""
    hlo_text = ("ROOT %k = f32[256]{0} fusion(%x, %y), kind=kLoop, calls=%f\n\n"
                "%f (p0: f32[256], p1: f32[256]) -> f32[256] {\n  %p0 = f32[256]{0} parameter(0)\n"
                "  %p1 = f32[256]{0} parameter(1)\n  ROOT %d = f32[256]{0} divide(%p0, %p1)\n}")
    from_text = kernel_features({"hlo_op": "k", "hlo_text": hlo_text}, CPU)
    from_module = kernel_features({"hlo_op": "k", "hlo_text": hlo_text, "module_text": module_text}, CPU)
    direct = kernel_features(_kernel(module_text, "k"), CPU)
    assert list(from_text.columns) == list(FEATURES)
    assert from_text.to_numpy().tolist() == from_module.to_numpy().tolist() == direct.to_numpy().tolist()
    assert from_text.iloc[0]["op_div_f32"] == 256.0
    with pytest.raises(FeatureError, match="row"):
        kernel_from_row({"hlo_op": "k", "hlo_text": "not hlo"})


def test_f32_transcendentals_counted_by_kind_on_top_of_the_lumped_kind():
    # atan2 and sine in f32: each counts in `op_special_f32` (the lumped kind) and in
    # its own kind (the extra cost over it); exp only in `op_exp_f32`, log in both
    # `op_exp_f32` and `op_log_f32`; a bf16 tanh stays lumped in `op_special_f16`.
    text = """HloModule m
%f (a: f32[256], b: f32[256], h: bf16[256]) -> (f32[256], bf16[256]) {
  %a = f32[256]{0} parameter(0)
  %b = f32[256]{0} parameter(1)
  %h = bf16[256]{0} parameter(2)
  %t = f32[256]{0} atan2(%a, %b)
  %s = f32[256]{0} sine(%t)
  %e = f32[256]{0} exponential(%s)
  %l = f32[256]{0} log(%e)
  %th = bf16[256]{0} tanh(%h)
  ROOT %r = (f32[256]{0}, bf16[256]{0}) tuple(%l, %th)
}
ENTRY %e (a: f32[256], b: f32[256], h: bf16[256]) -> (f32[256], bf16[256]) {
  %a = f32[256]{0} parameter(0)
  %b = f32[256]{0} parameter(1)
  %h = bf16[256]{0} parameter(2)
  ROOT %k = (f32[256]{0}, bf16[256]{0}) fusion(%a, %b, %h), kind=kLoop, calls=%f
}"""
    x = features_of(_kernel(text, "k"), CPU)
    ops = {k: v for k, v in _nonzero(x).items() if k.startswith("op_")}
    assert ops == {"op_special_f32": 512.0, "op_atan2_f32": 256.0, "op_trig_f32": 256.0,
                   "op_exp_f32": 512.0, "op_log_f32": 256.0, "op_special_f16": 256.0}


# --- solver custom calls and convolution layouts (textbook flop counts, worked by hand) ---------------


def _lone(text: str):
    import xla_costmodel as xc

    return xc.parse_hlo(text).entry.root


@pytest.mark.parametrize("target, shapes, want", [
    ("lapack_ssyevd_ffi", ["f32[2,64,64]"], 2 * 9 * 64 ** 3),
    ("lapack_sgesdd_ffi", ["f32[32,16]"], 4 * 32 * 32 * 16 + 8 * 32 * 16 * 16 + 9 * 16 ** 3),
    ("lapack_spotrf_ffi", ["f32[64,64]"], 64 ** 3 / 3),
    ("lapack_sgetrf_ffi", ["f32[64,64]"], 2 * 64 ** 3 / 3),
    # XLA's `HandleTriangularSolve` count, 2·n·|b|, the same for the opcode and every library call (`analysis._library`).
    ("lapack_strsm_ffi", ["f32[64,64]", "f32[64,8]"], 2 * 64 * 64 * 8),
])
def test_solver_flops_of_lapack_calls(target, shapes, want):
    from xla_costmodel.features._counting import features_of

    params = "\n".join(f"  p{i} = {s} parameter({i})" for i, s in enumerate(shapes))
    args = ", ".join(f"p{i}" for i in range(len(shapes)))
    k = _lone(f"HloModule m\nENTRY e {{\n{params}\n  ROOT c = {shapes[0]} custom-call({args}), "
              f"custom_call_target=\"{target}\"\n}}")
    assert features_of(k, "host")["solver_flops"] == pytest.approx(want)


def test_weight_gradient_convolutions_are_counted_apart():
    from xla_costmodel.features._counting import features_of

    transposed = _lone("""HloModule m
ENTRY e {
  a = f32[2,2,4,512] parameter(0)
  b = f32[512,2,2,4] parameter(1)
  ROOT c = f32[4,2,2,512] convolution(a, b), window={size=2x2 rhs_reversal=1x1}, dim_labels=01fb_o01i->f01b
}""")
    canonical = _lone("""HloModule m
ENTRY e {
  a = f32[8,16,16,32] parameter(0)
  b = f32[3,3,32,32] parameter(1)
  ROOT c = f32[8,16,16,32] convolution(a, b), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}""")
    t, c = features_of(transposed, "host"), features_of(canonical, "host")
    assert t["conv_flops"] == 0 and t["conv_flops_transposed"] > 0
    # XLA's cost analysis counts the taps that land inside the input: along each spatial dimension of 16
    # with a 3-wide window padded by 1, 16 * 3 - 2 = 46 of them
    assert c["conv_flops_transposed"] == 0 and c["conv_flops"] == pytest.approx(2 * 8 * 32 * 32 * 46 * 46)
