"""Layout assignment around library calls before fusion (`fusion._library_layouts`): the copies XLA:GPU leaves
as kernels where a cuSOLVER call or a triangular solve needs a layout its operand's producer cannot take, and
where its result reaches the entry's output in another layout. Held to the modules the H100 ran."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from xla_costmodel.fusion import kernels_of, simulate_fusion
from xla_costmodel.fusion._library_layouts import LayoutCopy, assign_library_layouts, fortran_order
from xla_costmodel.hlo import parse_hlo

CAPTURE = Path(__file__).resolve().parent.parent / "hlo_fixtures" / "gpu_h100"


def _read(name: str, stage: str):
    with gzip.open(CAPTURE / f"{name}.{stage}.hlo.gz", "rt") as f:
        return parse_hlo(f.read(), source=f"{name}.{stage}.hlo")


def _count(module) -> int:
    return sum(1 for k in kernels_of(module) if k.opcode != "async-done")


def test_fortran_order_swaps_the_two_minor_dimensions():
    assert fortran_order(2) == (0, 1)
    assert fortran_order(3) == (1, 2, 0)
    assert fortran_order(4) == (2, 3, 1, 0)
    assert fortran_order(1) == (0,)


# Each of these ran a copy into (or out of) a library call's column-major layout on the H100 that the
# simulation did not have: cuSOLVER's operand from an entry parameter, a triangular solve's right-hand side
# from a parameter, its result as the entry's output (the copies are in the capture's `.post` module).
# lineax_lu_solve: its copies are XLA's (LU's operand, and the identity branch's copy of its conditional), and
# the gather of the right-hand side and the reduce checking it for non-finite values are one sibling
# multi-output fusion, as XLA makes them (their loop shapes f32[64,1] and pred[64] compared without element
# types, `IsReshapeOrTransposeBitcast(..., ignore_element_type=true)`; one kernel over without).
@pytest.mark.parametrize("name", ["jax_scipy_cho_solve@small", "jax_scipy_cho_solve@large", "jax_linalg_solve@small",
                                  "jax_linalg_svd@small", "jax_linalg_eigh@small", "lineax_lu_solve@small",
                                  "lineax_lu_solve@large"])
def test_kernel_count_is_the_h100s_on_the_linalg_captures(name):
    result = simulate_fusion(_read(name, "pre"), price_totals=False, gemm_rewrites=True, simplify=True)
    assert _count(result.module) == _count(_read(name, "post"))


def test_cho_solve_copies_its_parameters_in_and_its_result_out():
    result = simulate_fusion(_read("jax_scipy_cho_solve@small", "pre"), price_totals=False)
    copies = [r for r in result.pre_fusion_rewrites if isinstance(r, LayoutCopy)]
    # (the calls' names are the inliner's)
    assert sorted((c.kind, c.of.split(".")[0], c.reason, c.layout) for c in copies) == [
        ("custom-call", "a", "operand", (0, 1)),  # potrf's operand: the entry parameter, row-major
        ("triangular-solve", "b", "operand", (0, 1)),  # the right-hand side, a parameter too
        ("triangular-solve", "triangular_solve", "result", (1, 0)),  # the solution, the entry's output
    ]
    # the factor reaches the solves through an elementwise select: computed in their layout, no copy
    assert not any(c.of.startswith("select") for c in copies)


def test_an_operand_whose_producer_takes_the_layout_is_not_copied():
    text = """
HloModule m, entry_computation_layout={(f32[32,32]{1,0})->f32[32,32]{1,0}}

ENTRY main {
  p = f32[32,32]{1,0} parameter(0)
  c = f32[] constant(2)
  b = f32[32,32]{1,0} broadcast(c), dimensions={}
  d = f32[32,32]{1,0} multiply(p, b)
  e = (f32[32,32]{0,1}, f32[32]{0}, s32[]) custom-call(d), custom_call_target="cusolver_syevd_ffi", operand_layout_constraints={f32[32,32]{0,1}}, api_version=API_VERSION_TYPED_FFI
  v = f32[32,32]{0,1} get-tuple-element(e), index=0
  ROOT n = f32[32,32]{1,0} negate(v)
}
"""
    module = parse_hlo(text)
    assert assign_library_layouts(module) == []  # the multiply computes column-major; the negate reads it so


def test_a_result_at_the_output_is_copied_and_a_unit_layout_kept():
    text = """
HloModule m, entry_computation_layout={(f32[16,16]{1,0}, f32[16,1]{1,0})->(f32[16,1]{1,0}, f32[16,16]{0,1})}

ENTRY main {
  a = f32[16,16]{1,0} parameter(0)
  na = f32[16,16]{1,0} negate(a)
  b = f32[16,1]{1,0} parameter(1)
  x = f32[16,1]{1,0} triangular-solve(na, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  f = (f32[16,16]{0,1}, s32[]) custom-call(na), custom_call_target="cusolver_potrf_ffi", operand_layout_constraints={f32[16,16]{0,1}}, api_version=API_VERSION_TYPED_FFI
  l = f32[16,16]{0,1} get-tuple-element(f), index=0
  ROOT t = (f32[16,1]{1,0}, f32[16,16]{0,1}) tuple(x, l)
}
"""
    module = parse_hlo(text)
    copies = assign_library_layouts(module)
    # a 16x1 right-hand side is laid out alike either way: neither copied nor relabelled
    assert module.entry.instruction("x").shape.layout.minor_to_major == (1, 0)
    # the factor goes out in the default layout the entry returns: XLA's copy there
    assert [(c.of, c.reason, c.layout) for c in copies] == [("l", "result", (1, 0))]
    assert module.entry.root.operands[1].opcode == "copy"


def test_xla_own_input_to_fusion_is_left_alone():
    module = _read("jax_scipy_cho_solve@small", "post")
    before = _count(module)
    result = simulate_fusion(module, price_totals=False)
    assert not any(isinstance(r, LayoutCopy) for r in result.pre_fusion_rewrites)
    assert _count(result.module) == before


def _copy_kernels(module) -> int:
    """Kernels that only move data into another layout: copies, and fusions whose root is a transpose or copy."""
    n = 0
    for k in kernels_of(module):
        if k.opcode == "copy":
            n += 1
        elif k.opcode == "fusion" and k.fused_computation.root.opcode in ("transpose", "copy"):
            n += 1
    return n


def test_lineax_lu_solve_has_the_h100s_copies():
    # LU's operand (an entry parameter, row-major) copied into cuSOLVER's column-major layout, and the copy
    # in the conditional's branch that returns its input: both in the module the H100 ran
    name = "lineax_lu_solve@small"
    result = simulate_fusion(_read(name, "pre"), price_totals=False, gemm_rewrites=True)
    assert _copy_kernels(result.module) == _copy_kernels(_read(name, "post")) == 2
