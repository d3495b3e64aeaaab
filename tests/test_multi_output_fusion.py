"""Multi-output fusion, the pass XLA:GPU runs right after priority fusion (`fusion._multi_output`).

Two references nobody here wrote: XLA's own tests of the pass (`multi_output_fusion_test.cc`, the
modules as HLO text with the outcome XLA's test asserts), and XLA:GPU's own output on programs
compiled without a GPU (the CUDA plugin; those tests skip with a reason where it is missing)."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")

from xla_costmodel.devices import get_device  # noqa: E402
from xla_costmodel.fusion import _conformance as conf  # noqa: E402
from xla_costmodel.fusion import simulate_fusion  # noqa: E402
from xla_costmodel.fusion._multi_output import MultiOutputFusionPass, is_multi_output_fusion  # noqa: E402
from xla_costmodel.fusion._simulate import fusible_computations  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402
from xla_costmodel.models import get_model  # noqa: E402

needs_plugin = pytest.mark.skipif(not gpu_compile_available(),
                                  reason="jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")

PREFIX = """HloModule test_module

scalar_add_computation {
  scalar_lhs.0 = f32[] parameter(0)
  scalar_rhs.0 = f32[] parameter(1)
  ROOT add.0 = f32[] add(scalar_lhs.0, scalar_rhs.0)
}
scalar_mul_computation {
  scalar_lhs.1 = f32[] parameter(0)
  scalar_rhs.1 = f32[] parameter(1)
  ROOT mul.1 = f32[] multiply(scalar_lhs.1, scalar_rhs.1)
}
"""


def _run(text: str, device: str = "h100-sxm"):
    module = parse_hlo(text)
    mof = MultiOutputFusionPass(get_model("xla-gpu"), get_device(device))
    mof.run(fusible_computations(module))
    parse_hlo(module.to_text())  # what the pass leaves prints as a module the parser takes back
    return module, mof


def _multi_output_fusions(module):
    return [i for c in fusible_computations(module) for i in c.instructions if is_multi_output_fusion(i)]


def _root_opcodes(fusion):
    return [o.opcode for o in fusion.fused_computation.root.operands]


# --- XLA's tests (multi_output_fusion_test.cc), each module as there, the outcome XLA asserts ---------

SIBLING_REDUCE_AND_REDUCE_FUSION = PREFIX + """
fused_computation {
  p1.1 = f32[128,512,28,28]{3,2,1,0} parameter(1)
  mul = f32[128,512,28,28]{3,2,1,0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  ROOT reduce.1 = f32[512]{0} reduce(mul, const.1), dimensions={0,2,3}, to_apply=scalar_add_computation
}

ENTRY entry {
  p0 = f32[] parameter(0)
  p1 = f32[128,512,28,28]{3,2,1,0} parameter(1)
  const.2 = f32[] constant(1)
  fusion = f32[512] fusion(p0, p1), kind=kInput, calls=fused_computation
  reduce.2 = f32[512]{0} reduce(p1, const.2), dimensions={0,2,3}, to_apply=scalar_add_computation
  ROOT root = (f32[512]{0}, f32[512]{0}) tuple(fusion, reduce.2)
}"""


def test_sibling_reduce_and_reduce_fusion():
    module, mof = _run(SIBLING_REDUCE_AND_REDUCE_FUSION)
    root = module.entry.root
    fusion = root.operands[0].operands[0]
    assert is_multi_output_fusion(fusion) and _root_opcodes(fusion) == ["reduce", "reduce"]
    assert root.operands[1].operands[0] is fusion  # both outputs read through get-tuple-elements
    assert [(s.kind, s.into, s.fused) for s in mof.steps] == [("sibling", "fusion", "reduce.2")]


SIBLING_REDUCE_FUSIONS = PREFIX + """
fused_computation_1 {
  p1.1 = f32[128,512,28,28]{3,2,1,0} parameter(1)
  mul = f32[128,512,28,28]{3,2,1,0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  ROOT reduce.1 = f32[512]{0} reduce(mul, const.1), dimensions={0,2,3}, to_apply=scalar_add_computation
}

fused_computation_2 {
  p1.2 = f32[128,512,28,28]{3,2,1,0} parameter(1)
  const.2 = f32[] parameter(0)
  ROOT reduce.2 = f32[512]{0} reduce(p1.2, const.2), dimensions={0,2,3}, to_apply=scalar_add_computation
}

ENTRY entry {
  p0 = f32[] parameter(0)
  p1 = f32[128,512,28,28]{3,2,1,0} parameter(1)
  fusion.1 = f32[512] fusion(p0, p1), kind=kInput, calls=fused_computation_1
  fusion.2 = f32[512] fusion(p0, p1), kind=kInput, calls=fused_computation_2
  ROOT root = (f32[512]{0}, f32[512]{0}) tuple(fusion.1, fusion.2)
}"""


def test_sibling_reduce_fusions():
    module, _ = _run(SIBLING_REDUCE_FUSIONS)
    fusion = module.entry.root.operands[0].operands[0]
    assert is_multi_output_fusion(fusion) and _root_opcodes(fusion) == ["reduce", "reduce"]
    assert fusion.fusion_kind == "kInput" and fusion.name == "fusion.1"  # the absorbing fusion keeps its name


SIBLING_REDUCE_AND_MULTI_OUTPUT = PREFIX + """
fused_computation (p0: f32[128,512,28,28]) -> (f32[512], f32[512]) {
  const.1 = f32[] constant(1)
  p0.1 = f32[128,512,28,28]{3,2,1,0} parameter(0)
  mul = f32[128,512,28,28]{3,2,1,0} multiply(f32[128,512,28,28]{3,2,1,0} p0.1, f32[128,512,28,28]{3,2,1,0} p0.1)
  reduce.1 = f32[512]{0} reduce(f32[128,512,28,28]{3,2,1,0} mul, f32[] const.1), dimensions={0,2,3}, to_apply=scalar_add_computation
  reduce.2 = f32[512]{0} reduce(f32[128,512,28,28]{3,2,1,0} p0.1, f32[] const.1), dimensions={0,2,3}, to_apply=scalar_add_computation
  ROOT tuple = (f32[512]{0}, f32[512]{0}) tuple(f32[512]{0} reduce.1, f32[512]{0} reduce.2)
}

ENTRY entry (p0: f32[128,512,28,28]) -> (f32[512], f32[512], f32[512]) {
  p0 = f32[128,512,28,28]{3,2,1,0} parameter(0)
  const = f32[] constant(1)
  fusion = (f32[512]{0}, f32[512]{0}) fusion(f32[128,512,28,28]{3,2,1,0} p0), kind=kInput, calls=fused_computation
  get-tuple-element = f32[512]{0} get-tuple-element((f32[512]{0}, f32[512]{0}) fusion), index=0
  get-tuple-element.1 = f32[512]{0} get-tuple-element((f32[512]{0}, f32[512]{0}) fusion), index=1
  reduce.3 = f32[512]{0} reduce(p0, const), dimensions={0,2,3}, to_apply=scalar_add_computation
  ROOT root = (f32[512]{0}, f32[512]{0}, f32[512]{0}) tuple(f32[512]{0} get-tuple-element, f32[512]{0} get-tuple-element.1, f32[512]{0} reduce.3)
}"""


def test_sibling_reduce_and_multi_output_fusion():
    module, _ = _run(SIBLING_REDUCE_AND_MULTI_OUTPUT)
    root = module.entry.root
    fusion = root.operands[0].operands[0]
    assert _root_opcodes(fusion) == ["reduce", "reduce", "reduce"]
    # the existing outputs keep their indices, the new one comes last
    assert [int(g.attribute("index")) for g in root.operands] == [0, 1, 2]
    assert all(g.operands[0] is fusion for g in root.operands)


DIFFERENT_REDUCE_INPUT_SHAPES = PREFIX + """
fused_computation_1 {
  p1.1 = f32[6400]{0} parameter(1)
  mul = f32[6400]{0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  ROOT reduce.1 = f32[] reduce(mul, const.1), dimensions={0}, to_apply=scalar_add_computation
}

fused_computation_2 {
  p1.2 = f32[6400]{0} parameter(1)
  r1 = f32[64,100]{0,1} reshape(p1.2)
  const.2 = f32[] parameter(0)
  ROOT reduce.2 = f32[] reduce(r1, const.2), dimensions={1,0}, to_apply=scalar_mul_computation
}

ENTRY entry {
  p0 = f32[] parameter(0)
  p1 = f32[6400]{0} parameter(1)
  fusion.1 = f32[] fusion(p0, p1), kind=kInput, calls=fused_computation_1
  fusion.2 = f32[] fusion(p0, p1), kind=kInput, calls=fused_computation_2
  ROOT root = (f32[], f32[]) tuple(fusion.1, fusion.2)
}"""

DIFFERENT_REDUCE_OUTPUT_SHAPES = PREFIX + """
fused_computation_1 {
  p1.1 = f32[10,10]{1,0} parameter(1)
  mul = f32[10,10]{1,0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  ROOT reduce.1 = f32[] reduce(mul, const.1), dimensions={0,1}, to_apply=scalar_add_computation
}

fused_computation_2 {
  p1.2 = f32[10,10]{1,0} parameter(1)
  const.2 = f32[] parameter(0)
  ROOT reduce.2 = f32[10]{0} reduce(p1.2, const.2), dimensions={0}, to_apply=scalar_mul_computation
}

ENTRY entry {
  p0 = f32[] parameter(0)
  p1.3 = f32[10,10]{1,0} parameter(1)
  fusion.1 = f32[] fusion(p0, p1.3), kind=kInput, calls=fused_computation_1
  p2 = f32[] parameter(2)
  fusion.2 = f32[10]{0} fusion(p2, p1.3), kind=kInput, calls=fused_computation_2
  ROOT root = (f32[], f32[10]{0}) tuple(fusion.1, fusion.2)
}"""

NO_SIBLING_FUSION_FOR_COMMON_SCALAR = PREFIX + """
fused_computation_1 {
  param_0.87 = bf16[32,4096,16384]{2,1,0} parameter(0)
  param_1.4620 = s32[] parameter(1)
  constant_3949 = s32[] constant(0)
  compare.1026 = pred[] compare(param_1.4620, constant_3949), direction=LT
  constant_5437 = s32[] constant(32)
  add.6859 = s32[] add(param_1.4620, constant_5437)
  select.1599 = s32[] select(compare.1026, add.6859, param_1.4620)
  dynamic-slice.59 = bf16[1,4096,16384]{2,1,0} dynamic-slice(param_0.87, select.1599, constant_3949, constant_3949), dynamic_slice_sizes={1,4096,16384}
  ROOT bitcast.41089 = bf16[4096,16384]{1,0} bitcast(dynamic-slice.59)
}

fused_computation_2 {
  param_0 = bf16[32,4096,16384]{2,1,0} parameter(0)
  param_1 = s32[] parameter(1)
  constant = s32[] constant(0)
  compare = pred[] compare(param_1, constant), direction=LT
  constant.32 = s32[] constant(32)
  add = s32[] add(param_1, constant.32)
  select = s32[] select(compare, add, param_1)
  dynamic-slice = bf16[1,4096,16384]{2,1,0} dynamic-slice(param_0, select, constant, constant), dynamic_slice_sizes={1,4096,16384}
  ROOT bitcast.41087 = bf16[4096,16384]{1,0} bitcast(dynamic-slice)
}

ENTRY entry {
  p0 = s32[] parameter(0)
  p1 = bf16[32,4096,16384]{2,1,0} parameter(1)
  p2 = bf16[32,4096,16384]{2,1,0} parameter(2)
  fusion.1 = bf16[4096,16384]{1,0} fusion(p1, p0), kind=kLoop, calls=fused_computation_1
  fusion.2 = bf16[4096,16384]{1,0} fusion(p2, p0), kind=kLoop, calls=fused_computation_2
  ROOT root = (bf16[4096,16384]{1,0}, bf16[4096,16384]{1,0}) tuple(fusion.1, fusion.2)
}"""

CHECK_AGAINST_REDUCE_OPERAND = PREFIX + """
fused_computation_1 {
  p1.1 = f32[10,10]{1,0} parameter(1)
  mul = f32[10,10]{1,0} multiply(p1.1, p1.1)
  const.1 = f32[] parameter(0)
  reduce.1 = f32[] reduce(p1.1, const.1), dimensions={0,1}, to_apply=scalar_add_computation
  ROOT tuple = (f32[10,10], f32[]) tuple(mul, reduce.1)
}

fused_computation_2 {
  p1.2 = f32[10,10]{1,0} parameter(1)
  const.2 = f32[] parameter(0)
  ROOT reduce.2 = f32[10] reduce(p1.2, const.2), dimensions={0}, to_apply=scalar_mul_computation
}

ENTRY entry {
  p0 = f32[] parameter(0)
  p1 = f32[10,10]{1,0} parameter(1)
  p2 = f32[] parameter(2)
  fusion.1 = (f32[10,10], f32[]) fusion(p0, p1), kind=kInput, calls=fused_computation_1
  get-tuple-element.1 = f32[10,10] get-tuple-element((f32[10,10], f32[]) fusion.1), index=0
  get-tuple-element.2 = f32[] get-tuple-element((f32[10,10], f32[]) fusion.1), index=1
  fusion.2 = f32[10] fusion(p2, p1), kind=kInput, calls=fused_computation_2
  ROOT root = (f32[10,10], f32[], f32[10]) tuple(get-tuple-element.1, get-tuple-element.2, fusion.2)
}"""

SHARED_MEMORY = """HloModule xla_computation_update_step.10931

%scalar_add_computation.1 (scalar_lhs.1: f64[], scalar_rhs.1: f64[]) -> f64[] {
  %scalar_lhs.1 = f64[] parameter(0)
  %scalar_rhs.1 = f64[] parameter(1)
  ROOT %add.1257 = f64[] add(f64[] %scalar_lhs.1, f64[] %scalar_rhs.1)
}

%fused_computation.1 (param_0.8: f64[64,64], param_1.11: f64[64,64], param_2.9: f64[64,64]) -> (f64[64], f64[64]) {
  %param_0.8 = f64[64,64]{1,0} parameter(0)
  %param_1.11 = f64[64,64]{1,0} parameter(1)
  %multiply.2 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %param_0.8, f64[64,64]{1,0} %param_1.11)
  %constant_5217.3 = f64[] constant(0)
  %broadcast.1 = f64[64,64]{1,0} broadcast(f64[] %constant_5217.3), dimensions={}
  %multiply.0 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %multiply.2, f64[64,64]{1,0} %broadcast.1)
  %reduce.0 = f64[64]{0} reduce(f64[64,64]{1,0} %multiply.0, f64[] %constant_5217.3), dimensions={0}, to_apply=%scalar_add_computation.1
  %param_2.9 = f64[64,64]{1,0} parameter(2)
  %multiply.1514.clone.0.clone.1 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %param_2.9, f64[64,64]{1,0} %param_1.11)
  %constant_5217.1.clone.1 = f64[] constant(0)
  %broadcast.0.clone.1 = f64[64,64]{1,0} broadcast(f64[] %constant_5217.1.clone.1), dimensions={}
  %multiply.1341.clone.0.clone.1 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %multiply.1514.clone.0.clone.1, f64[64,64]{1,0} %broadcast.0.clone.1)
  %reduce.630.clone.0.clone.1 = f64[64]{0} reduce(f64[64,64]{1,0} %multiply.1341.clone.0.clone.1, f64[] %constant_5217.1.clone.1), dimensions={0}, to_apply=%scalar_add_computation.1
  ROOT %tuple = (f64[64]{0}, f64[64]{0}) tuple(f64[64]{0} %reduce.0, f64[64]{0} %reduce.630.clone.0.clone.1)
}

%primitive_computation_add__1.6426 (parameter.6427: f64[], parameter.6428: f64[]) -> f64[] {
  %parameter.6427 = f64[] parameter(0)
  %parameter.6428 = f64[] parameter(1)
  ROOT %add.6429 = f64[] add(f64[] %parameter.6427, f64[] %parameter.6428)
}

%fused_computation.2 (param_0.7: f64[64,64], param_1.9: f64[64,64]) -> f64[64] {
  %param_0.7 = f64[64,64]{1,0} parameter(0)
  %param_1.9 = f64[64,64]{1,0} parameter(1)
  %multiply.1 = f64[64,64]{1,0} multiply(f64[64,64]{1,0} %param_0.7, f64[64,64]{1,0} %param_1.9)
  %constant_5217.2 = f64[] constant(0)
  ROOT %reduce.740.clone.0 = f64[64]{0} reduce(f64[64,64]{1,0} %multiply.1, f64[] %constant_5217.2), dimensions={0}, to_apply=%primitive_computation_add__1.6426
}

ENTRY %reproducer (param_0.1090: f64[64,64], param_1.1377: f64[64,64], param_2.1948: f64[64,64]) -> (f64[64], f64[64], f64[64]) {
  %param_0.1090 = f64[64,64]{1,0} parameter(0)
  %param_1.1377 = f64[64,64]{1,0} parameter(1)
  %param_2.1948 = f64[64,64]{1,0} parameter(2)
  %fusion.1 = (f64[64]{0}, f64[64]{0}) fusion(f64[64,64]{1,0} %param_0.1090, f64[64,64]{1,0} %param_1.1377, f64[64,64]{1,0} %param_2.1948), kind=kInput, calls=%fused_computation.1
  %get-tuple-element = f64[64]{0} get-tuple-element((f64[64]{0}, f64[64]{0}) %fusion.1), index=0
  %fusion.2 = f64[64]{0} fusion(f64[64,64]{1,0} %param_0.1090, f64[64,64]{1,0} %param_1.1377), kind=kInput, calls=%fused_computation.2
  %get-tuple-element.1 = f64[64]{0} get-tuple-element((f64[64]{0}, f64[64]{0}) %fusion.1), index=1
  ROOT %tuple.428 = (f64[64]{0}, f64[64]{0}, f64[64]{0}) tuple(f64[64]{0} %get-tuple-element, f64[64]{0} %fusion.2, f64[64]{0} %get-tuple-element.1)
}"""


@pytest.mark.parametrize("text, rule", [
    (DIFFERENT_REDUCE_INPUT_SHAPES, "different-loop-shapes"),
    # small reductions the tiled emitter does not take: not multi-output roots, never siblings
    (DIFFERENT_REDUCE_OUTPUT_SHAPES, None),
    (NO_SIBLING_FUSION_FOR_COMMON_SCALAR, None),  # the common operand is a scalar: never a sibling parent
    (CHECK_AGAINST_REDUCE_OPERAND, None),
    (SHARED_MEMORY, "shared-memory"),  # three column reductions of f64: 3 x 33,024 B
], ids=["different-reduce-input-shapes", "different-reduce-output-shapes", "common-scalar",
        "check-against-reduce-operand", "too-much-shared-memory"])
def test_xla_refuses(text, rule):
    before = parse_hlo(text).to_text()
    module, mof = _run(text)
    assert mof.steps == [] and module.to_text() == before
    if rule is not None:
        assert rule in {why.rule for *_, why in mof.rejections}


def _too_many_reductions() -> str:
    comps = "".join(f"""
fused_computation{k} {{
  p0 = f32[64,64] parameter(0)
  p1 = f32[64,64] parameter(1)
  p2 = f32[] parameter(2)
  add = f32[64,64] add(p0, p1)
  ROOT reduce = f32[64] reduce(f32[64,64] add, f32[] p2), dimensions={{1}}, to_apply=scalar_add_computation
}}""" for k in range(10))
    params = "\n".join(f"  param{k} = f32[64,64] parameter({k})" for k in range(10))
    outs = "\n".join(f"  out{k} = f32[64] fusion(param{k}, param{(k + 1) % 10}, zero), kind=kInput, "
                     f"calls=fused_computation{k}" for k in range(10))
    return (PREFIX + comps + "\nENTRY computation {\n  zero = f32[] constant(0)\n" + params + "\n" + outs
            + "\n  ROOT out = (" + ", ".join(["f32[64]"] * 10) + ") tuple("
            + ", ".join(f"out{k}" for k in range(10)) + ")\n}")


def test_at_most_8_unnested_reductions():
    # XLA's DoNotGroupTooManyReductions: ten row reductions, each sharing an operand with the next
    module, mof = _run(_too_many_reductions())
    fusions = _multi_output_fusions(module)
    assert len(fusions) == 2
    assert all(len(f.fused_computation.root.operands) <= 8 for f in fusions)
    assert "unnested-reductions" in {why.rule for *_, why in mof.rejections}


ELEMENTWISE_AND_REDUCE = PREFIX + """
ENTRY reduce {
  p0 = f32[32,32,32]{2,1,0} parameter(0)
  c0 = f32[] constant(0)
  exp = f32[32,32,32]{2,1,0} exponential(p0)
  reduce = f32[32,32]{1,0} reduce(exp, c0), dimensions={2}, to_apply=scalar_add_computation
  ROOT root = (f32[32,32]{1,0}, f32[32,32,32]{2,1,0}) tuple(reduce, exp)
}"""


def test_producer_consumer_elementwise_and_reduce():
    module, mof = _run(ELEMENTWISE_AND_REDUCE)
    root = module.entry.root
    assert [o.opcode for o in root.operands] == ["get-tuple-element", "get-tuple-element"]
    fusion = root.operands[0].operands[0]
    assert root.operands[1].operands[0] is fusion
    assert _root_opcodes(fusion) == ["reduce", "exponential"] and fusion.fusion_kind == "kInput"
    (step,) = mof.steps
    assert (step.kind, step.into, step.fused) == ("producer-consumer", "reduce", "exp")
    # the model's test: one kernel writing both outputs is no slower than the two apart
    assert step.time_fused_s <= step.time_unfused_s


DUS_SIBLINGS = """HloModule dus
fused_dus_1 {
  p0 = f32[1024,1024]{1,0} parameter(0)
  p1 = f32[8,1024]{1,0} parameter(1)
  i = s32[] parameter(2)
  ROOT dus = f32[1024,1024]{1,0} dynamic-update-slice(p0, p1, i, i)
}
fused_dus_2 {
  p0 = f32[1024,1024]{1,0} parameter(0)
  p1 = f32[8,1024]{1,0} parameter(1)
  i = s32[] parameter(2)
  n = f32[8,1024]{1,0} negate(p1)
  ROOT dus = f32[1024,1024]{1,0} dynamic-update-slice(p0, n, i, i)
}
ENTRY e {
  a = f32[1024,1024]{1,0} parameter(0)
  b = f32[1024,1024]{1,0} parameter(1)
  u = f32[8,1024]{1,0} parameter(2)
  i = s32[] parameter(3)
  f1 = f32[1024,1024]{1,0} fusion(a, u, i), kind=kLoop, calls=fused_dus_1
  f2 = f32[1024,1024]{1,0} fusion(b, u, i), kind=kLoop, calls=fused_dus_2
  ROOT t = (f32[1024,1024]{1,0}, f32[1024,1024]{1,0}) tuple(f1, f2)
}"""

DISJOINT_SLICES = """HloModule slices
f1 {
  p = f32[1024,64]{1,0} parameter(0)
  s = f32[512,64]{1,0} slice(p), slice={[0:512], [0:64]}
  ROOT n = f32[512,64]{1,0} negate(s)
}
f2 {
  p = f32[1024,64]{1,0} parameter(0)
  s = f32[512,64]{1,0} slice(p), slice={[512:1024], [0:64]}
  ROOT e = f32[512,64]{1,0} exponential(s)
}
ENTRY e {
  a = f32[1024,64]{1,0} parameter(0)
  x = f32[512,64]{1,0} fusion(a), kind=kLoop, calls=f1
  y = f32[512,64]{1,0} fusion(a), kind=kLoop, calls=f2
  ROOT t = (f32[512,64]{1,0}, f32[512,64]{1,0}) tuple(x, y)
}"""


def test_no_sibling_fusion_of_dynamic_update_slices():
    _, mof = _run(DUS_SIBLINGS)
    assert mof.steps == [] and "dynamic-update-slice" in {w.rule for *_, w in mof.rejections}


def test_siblings_reading_disjoint_slices_stay_apart():
    _, mof = _run(DISJOINT_SLICES)
    assert mof.steps == [] and "slices-disjoint" in {w.rule for *_, w in mof.rejections}
    # the same two kernels reading overlapping slices are merged
    _, mof = _run(DISJOINT_SLICES.replace("[512:1024]", "[256:768]"))
    assert [s.kind for s in mof.steps] == ["sibling"]


def test_connected_siblings_stay_apart():
    # `f` reads `a` through a custom call (which no multi-output fusion takes in): both read `p`
    text = PREFIX + """
body {
  x = f32[1024]{0} parameter(0)
  y = f32[1024]{0} parameter(1)
  ROOT m = f32[1024]{0} multiply(x, y)
}
ENTRY e {
  p = f32[1024]{0} parameter(0)
  a = f32[1024]{0} negate(p)
  c = f32[1024]{0} custom-call(a), custom_call_target="opaque"
  f = f32[1024]{0} fusion(p, c), kind=kLoop, calls=body
  ROOT t = (f32[1024]{0}, f32[1024]{0}) tuple(a, f)
}"""
    _, mof = _run(text)
    assert "connected" in {w.rule for *_, w in mof.rejections}
    assert all(s.kind != "sibling" for s in mof.steps)


# XLA:GPU's own input to its multi-output fusion on lineax_lu_solve@small (jax's CUDA plugin, the module
# dumped before `multi_output_fusion`, cut to the two siblings): a reduce fusion (loop shape its input's,
# pred[64]) and a gather fusion (f32[64,1,1]) both reading `b`. XLA merged them into one kInput fusion:
# `IsReshapeOrTransposeBitcast(l1, l2, ignore_element_type=true)` compares the loop shapes without their
# element types.
GATHER_AND_REDUCE_OF_ANOTHER_TYPE = """HloModule m

or_pred {
  x = pred[] parameter(0)
  y = pred[] parameter(1)
  ROOT o = pred[] or(x, y)
}
fused_gather {
  param_0.8 = f32[64]{0} parameter(0)
  bitcast.69 = f32[64,1]{1,0} bitcast(param_0.8)
  param_1.11 = s32[64]{0} parameter(1)
  bitcast.1.1 = s32[64,1]{1,0} bitcast(param_1.11)
  ROOT gather.4.1 = f32[64,1,1]{2,1,0} gather(bitcast.69, bitcast.1.1), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,1}
}
fused_reduce {
  param_0.27 = f32[64]{0} parameter(0)
  is_finite.1.3 = pred[64]{0} is-finite(param_0.27)
  not.1.3 = pred[64]{0} not(is_finite.1.3)
  constant.24.2 = pred[] constant(false)
  ROOT reduce_or.2.1 = pred[] reduce(not.1.3, constant.24.2), dimensions={0}, to_apply=or_pred
}
ENTRY e {
  b = f32[64]{0} parameter(0)
  i = s32[64]{0} parameter(1)
  fusion.7 = pred[] fusion(b), kind=kInput, calls=fused_reduce
  fusion.2 = f32[64,1,1]{2,1,0} fusion(b, i), kind=kLoop, calls=fused_gather
  ROOT t = (pred[], f32[64,1,1]{2,1,0}) tuple(fusion.7, fusion.2)
}"""


def test_siblings_whose_loop_shapes_differ_only_in_element_type_are_merged():
    module, mof = _run(GATHER_AND_REDUCE_OF_ANOTHER_TYPE)
    assert [(s.kind, s.into, s.fused) for s in mof.steps] == [("sibling", "fusion.7", "fusion.2")]
    fusion = module.entry.root.operands[0].operands[0]
    assert fusion.fusion_kind == "kInput" and _root_opcodes(fusion) == ["reduce", "gather"]
    # a gather of 32 rows (a loop of 32 elements against the reduce's 64) is no bitcast: kept apart
    fewer = GATHER_AND_REDUCE_OF_ANOTHER_TYPE
    for a, b in (("s32[64]", "s32[32]"), ("s32[64,1]", "s32[32,1]"), ("f32[64,1,1]", "f32[32,1,1]")):
        fewer = fewer.replace(a, b)
    _, mof = _run(fewer)
    assert mof.steps == [] and "different-loop-shapes" in {w.rule for *_, w in mof.rejections}


# --- as the user gets it: a step of simulate_fusion -------------------------------------------------


def test_simulate_fusion_runs_it_by_default_and_switches_off():
    fn, args = conf.HARNESS_PROGRAMS["sibling_reductions"]()
    on = simulate_fusion(fn, *args, device="h100-sxm")
    off = simulate_fusion(fn, *args, device="h100-sxm", multi_output=False)
    assert off.kernels_after == 3 and off.multi_output.empty and not _multi_output_fusions(off.module)
    assert on.kernels_after == 1 and list(on.multi_output.kind) == ["sibling", "sibling"]
    assert on.steps.reason.iloc[-1].startswith("multi-output fusion")
    assert list(on.log.event).count("multi-output") == 2
    # one kernel reading x once instead of two: faster, priced as `analyze` prices it
    assert on.time_after_s < off.time_after_s
    # the step log before multi-output fusion is the same
    assert off.steps.equals(on.steps.iloc[:len(off.steps)].reset_index(drop=True))


# --- against XLA:GPU's own output (deviceless compile) ---------------------------------------------


@needs_plugin
@pytest.mark.parametrize("program", ["harness:sibling_reductions", "harness:elementwise_and_reduce"])
@pytest.mark.parametrize("device", ["h100-sxm", "a100-80gb"])
def test_same_kernels_as_xla(program, device):
    dump = conf.compile_with_fusion_dumps(program, device=device)
    result = conf.compare_multi_output(dump)
    assert result.merges_xla >= 1  # XLA's own multi-output fusion merged something here
    assert result.same_partition, result.first_divergence
    assert result.merges_ours == result.merges_xla and not result.unmapped
