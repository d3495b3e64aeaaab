"""The `roofline` model: numbers worked by hand, on h100-sxm and on a CPU."""

from __future__ import annotations

import math

import pytest

import xla_costmodel as xc
from xla_costmodel.devices import DeviceSpec, get_device
from xla_costmodel.models import RooflineModel, get_model
from conftest import ADD

H100 = get_device("h100-sxm")
MODEL = get_model("roofline")
BW = 3.35232e12
# h100-sxm: vector peak 2 x 1.98e9 x 128 x 132 = 6.6908160e13 flop/s; TF32 tensor-core
# peak (XLA's h100_sxm spec) 4.9458515e14 flop/s; launch 1 us.


def _root(text: str):
    return xc.parse_hlo(text).entry.root


DOT = """HloModule t
ENTRY e {
  a = f32[1024,1024]{1,0} parameter(0)
  b = f32[1024,1024]{1,0} parameter(1)
  ROOT d = f32[1024,1024]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


def test_hand_elementwise():
    e = MODEL.estimate(_root(ADD), H100)
    # 1,048,576 flops / 6.690816e13 = 15.6719 ns; 12 MiB / 3.35232e12 = 3.7534937 us
    assert e.compute_s == pytest.approx(15.6719e-9, rel=1e-5)
    assert e.memory_s == pytest.approx(3.7534937e-6, rel=1e-6)
    assert e.time_s == pytest.approx(4.7534937e-6, rel=1e-6)
    assert e.bound == "memory"
    assert e.details["intensity"] == pytest.approx(1 / 12)


def test_hand_transpose():
    e = MODEL.estimate(_root("""HloModule t
ENTRY e {
  a = f32[2048,1024]{1,0} parameter(0)
  ROOT t = f32[1024,2048]{1,0} transpose(a), dimensions={1,0}
}"""), H100)
    # 8 MiB in, 8 MiB out, no flops: 5.0046583 us + 1 us
    assert e.compute_s == 0.0
    assert e.time_s == pytest.approx(6.0046583e-6, rel=1e-6)


def test_hand_broadcast_counts_unique_bytes():
    e = MODEL.estimate(_root("""HloModule t
ENTRY e {
  a = f32[1024]{0} parameter(0)
  ROOT b = f32[1024,4096]{1,0} broadcast(a), dimensions={0}
}"""), H100)
    # DRAM traffic: the 4 KiB operand once, 16 MiB written: 16,781,312 B / 3.35232e12 = 5.0058801 us
    assert e.details["bytes_accessed"] == 4096 + 16 * 1024 * 1024
    assert e.time_s == pytest.approx(1e-6 + 5.0058801e-6, rel=1e-6)


def test_hand_reduce():
    e = MODEL.estimate(_root("""HloModule t
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[1024,1024]{1,0} parameter(0)
  c = f32[] constant(0)
  ROOT r = f32[1024]{0} reduce(a, c), dimensions={1}, to_apply=add
}"""), H100)
    # flops 1,048,576 - 1,024 = 1,047,552 (one add per combined pair): 15.6566 ns
    # bytes 4 MiB + 4 B (init) + 4 KiB written = 4,198,404 B: 1.2523876 us
    assert e.details["flops"] == 1047552
    assert e.compute_s == pytest.approx(15.6566e-9, rel=1e-5)
    assert e.memory_s == pytest.approx(1.2523876e-6, rel=1e-6)
    assert e.time_s == pytest.approx(2.2523876e-6, rel=1e-6)


def test_hand_dot_on_matrix_units():
    root = _root(DOT)
    e = MODEL.estimate(root, H100)
    # 2,147,483,648 flops / 4.9458515e14 = 4.3419898 us > 12 MiB / BW = 3.7534937 us
    assert e.compute_s == pytest.approx(4.3419898e-6, rel=1e-6)
    assert e.time_s == pytest.approx(5.3419898e-6, rel=1e-6)
    assert e.bound == "compute"
    vector = RooflineModel(matrix_units=False).estimate(root, H100)
    # on the FP32 units: 2,147,483,648 / 6.690816e13 = 32.0961 us
    assert vector.compute_s == pytest.approx(32.0961e-6, rel=1e-5)


CPU = DeviceSpec(
    name="cpu-test", kind="cpu", core_count=4, fpus_per_core=8, clock_rate_ghz=2.0,
    memory_bandwidth_bytes_per_s=20e9, l2_cache_bytes=1 << 20, kernel_launch_overhead_s=2e-6,
    peak_matmul_flops_per_s={"f32": 100e9, "f64": 25e9},
)


def test_hand_cpu_device():
    # vector peak 2 x 2e9 x 8 x 4 = 128 GFLOP/s; f64 at 25/100 of it (measured matmul ratio)
    assert RooflineModel().vector_flops_per_s(CPU, "f64") == pytest.approx(32e9)
    e = MODEL.estimate(_root(DOT), CPU)
    # 2,147,483,648 / 100e9 = 21.474836 ms; memory 12 MiB / 20e9 = 0.6291456 ms
    assert e.compute_s == pytest.approx(21.474836e-3, rel=1e-6)
    assert e.time_s == pytest.approx(21.474836e-3 + 2e-6, rel=1e-6)
    e = MODEL.estimate(_root(ADD.replace("f32", "f64")), CPU)
    # 1,048,576 f64 adds / 32e9 = 32.768 us; 24 MiB / 20e9 = 1.2582912 ms
    assert e.compute_s == pytest.approx(32.768e-6, rel=1e-6)
    assert e.memory_s == pytest.approx(1.2582912e-3, rel=1e-6)


def test_fp64_vector_rate_by_architecture():
    m = RooflineModel()
    assert m.vector_flops_per_s(H100, "f64") == pytest.approx(H100.peak_fp32_flops_per_s / 2)
    a6000 = get_device("rtx-a6000-xla-test")
    assert m.vector_flops_per_s(a6000, "f64") == pytest.approx(a6000.peak_fp32_flops_per_s / 64)


def test_transcendentals_can_cost_more():
    text = """HloModule t
ENTRY e {
  a = f32[1024]{0} parameter(0)
  ROOT x = f32[1024]{0} exponential(a)
}"""
    one = MODEL.estimate(_root(text), H100)
    ten = RooflineModel(transcendental_flops=10).estimate(_root(text), H100)
    assert ten.compute_s == pytest.approx(10 * one.compute_s)


def test_fusion_by_materializing():
    m = xc.parse_hlo("""HloModule t
ENTRY e {
  a = f32[1024,1024]{1,0} parameter(0)
  x = f32[1024,1024]{1,0} exponential(a)
  ROOT y = f32[1024,1024]{1,0} negate(x)
}""")
    x = m.entry.instruction("x")
    y = m.entry.root
    t = MODEL.estimate_fusion(x, [y], H100)
    # unfused: two kernels, each reading and writing 4 MiB; fused: one kernel, 4 MiB in and out
    per = 8 * 1024 * 1024 / BW
    assert t.time_unfused_s == pytest.approx(2 * (1e-6 + per), rel=1e-6)
    assert t.time_fused_s == pytest.approx(1e-6 + per, rel=1e-6)
    assert t.priority_s > 0
    assert len(m.entry.instructions) == 3 and y.opcode == "negate"  # the module is untouched


def test_unpriced_custom_call_is_flagged():
    m = xc.parse_hlo("""HloModule t
ENTRY e {
  a = f32[16]{0} parameter(0)
  ROOT c = f32[16]{0} custom-call(a), custom_call_target="mystery"
}""")
    with pytest.warns(xc.models.CostModelWarning, match="mystery"):
        e = MODEL.estimate(m.entry.root, H100)
    assert not e.priced and math.isnan(e.time_s) and e.bound == "unknown"


def test_fusion_through_get_tuple_element():
    from pathlib import Path

    m = xc.load_hlo(Path(__file__).parent / "data" / "xla_conformance"
                    / "gpu_performance_model__FusingTransposeMultiOutputFusionIntoReduceIsSlow.hlo")
    producer = m.entry.instruction("fusion")
    consumer = m.entry.instruction("reduce.1")
    t = MODEL.estimate_fusion(producer, [consumer], get_device("rtx-a6000-xla-test"))
    # fused: the 24.6 MB transposed tensor is neither written nor read back
    assert t.time_fused_s < t.time_unfused_s
