"""Library calls (cuBLAS, cuSolver, cuDNN, CUB): one table of routines, and their prices against a real H100.

The measured times are rows of the shared H100 capture of the corpus
(`calibration/gpu_h100_library_calls.csv`: `min_per_run_s` per (program, size,
hlo_op)); the modules are XLA:GPU's optimized modules that ran
(`hlo_fixtures/gpu_h100/`). Library-call constants are always those fitted
without the priced program's source.
"""

from __future__ import annotations

import gzip
import json
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest

import xla_costmodel as xc
from xla_costmodel.analysis._library import library_routine, library_work
from xla_costmodel.devices import get_device
from xla_costmodel.models._library_calls import leaving_source_out, library_constants

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "hlo_fixtures" / "gpu_h100"
ROWS = ROOT / "calibration" / "gpu_h100_library_calls.csv"
DATA = ROOT / "xla_costmodel" / "devices" / "data" / "library_calls_h100.json"
H100 = get_device("h100-sxm")


def _module(name: str):
    return xc.parse_hlo(gzip.open(FIXTURES / f"{name}.post.hlo.gz", "rt").read())


def _instr(module, name: str):
    return next(i for _, i in module.instructions() if i.name == name)


def _price(model: str, program: str, size: str, source: str, kernel: str) -> float:
    """`analyze`'s time per execution of one kernel, library constants fitted without `source`."""
    with warnings.catch_warnings(), leaving_source_out(source):
        warnings.simplefilter("ignore")
        table = xc.analyze(_module(f"{program}@{size}"), device="h100-sxm", model=model).set_index("kernel")
    return float(table.loc[kernel, "time_s"])


# ---------------------------------------------------------------------------
# One home


_TRSM = """HloModule m
ENTRY e {
  a = f32[64,64]{1,0} parameter(0)
  b = f32[64,8]{1,0} parameter(1)
  t = f32[64,8]{1,0} triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  c = (f32[64,8]{0,1}, s8[0]{0}) custom-call(a, b), custom_call_target="__cublas$triangularSolve"
  l = f32[64,8]{1,0} custom-call(a, b), custom_call_target="lapack_strsm_ffi"
  ROOT r = (f32[64,8]{1,0}, (f32[64,8]{0,1}, s8[0]{0}), f32[64,8]{1,0}) tuple(t, c, l)
}
"""


def test_a_triangular_solve_counts_the_same_flops_everywhere():
    from xla_costmodel._jaxlib_oracle import xla_cost_analysis
    from xla_costmodel.features._counting import features_of
    from xla_costmodel.models._kernel_costs import ModuleCounts

    module = xc.parse_hlo(_TRSM)
    t, c, lapack = (_instr(module, n) for n in ("t", "c", "l"))
    # XLA's own count of the opcode (jaxlib's HloCostAnalysis), 2·n·|b|.
    only_opcode = _TRSM.replace("  c = (f32[64,8]{0,1}, s8[0]{0}) custom-call(a, b), custom_call_target=\"__cublas$triangularSolve\"\n", "") \
        .replace("  l = f32[64,8]{1,0} custom-call(a, b), custom_call_target=\"lapack_strsm_ffi\"\n", "") \
        .replace("ROOT r = (f32[64,8]{1,0}, (f32[64,8]{0,1}, s8[0]{0}), f32[64,8]{1,0}) tuple(t, c, l)", "ROOT r = f32[64,8]{1,0} copy(t)")
    xla = xla_cost_analysis(only_opcode)["flops"]
    assert xla == 2 * 64 * 64 * 8
    counts = ModuleCounts(module)
    for instr in (t, c, lapack):
        assert counts(instr).flops == xla, instr.name
        assert features_of(instr, "host")["solver_flops"] == xla, instr.name
    for instr in (c, lapack):
        assert library_work(instr).flops == xla


@pytest.mark.parametrize("target, routine", [
    ("__cublas$lt$matmul", "gemm"), ("__cublas$gemm", "gemm"), ("__cublas$triangularSolve", "trsm"),
    ("cusolver_getrf_ffi", "getrf"), ("cusolver_potrf_ffi", "potrf"), ("cusolver_syevd_ffi", "syevd"),
    ("cusolver_gesvdj_ffi", "gesvdj"), ("cusolver_geqrf_ffi", "geqrf"), ("cusolver_orgqr_ffi", "orgqr"),
    ("cu_lu_pivots_to_permutation", "lu_pivots_to_permutation"), ("__cudnn$convForward", "conv_forward"),
    ("__cudnn$convBackwardFilter", "conv_backward_filter"), ("__cudnn$convBackwardInput", "conv_backward_input"),
    ("__cudnn$convBiasActivationForward", "conv_bias_activation"), ("xla.gpu.ext.cub_sort_pairs", "sort_pairs"),
    ("xla.gpu.ext.cub_sort_keys", "sort_keys"), ("lapack_sgetrf_ffi", "getrf"), ("lapack_dsyevd_ffi", "syevd"),
    ("lapack_sgesdd_ffi", "gesvd"), ("my_kernel", None), ("xla_ffi_python_gpu_callback", None),
])
def test_library_routine_of_a_target(target, routine):
    instr = xc.parse_hlo(f"""HloModule m
ENTRY e {{
  a = f32[8,8]{{1,0}} parameter(0)
  ROOT c = f32[8,8]{{1,0}} custom-call(a), custom_call_target="{target}"
}}""").entry.root
    assert library_routine(instr) == routine


def test_the_workspace_is_not_output():
    # haiku_mlp_grad@large: (f32[1024,1024], s8[33554432]) __cublas$lt$matmul with a BIAS epilogue.
    call = _instr(_module("haiku_mlp_grad@large"), "cublas-lt-matmul.0")
    work = library_work(call)
    assert work.flops == 2 * 1024 ** 3
    assert work.bytes_written == 1024 * 1024 * 4
    assert work.bytes_read == (2 * 1024 * 1024 + 1024) * 4
    # The analytical path's launch grid (no table for the A100): one thread per real output element.
    est = xc.get_model("xla-gpu").estimate(call, get_device("a100-80gb"))
    assert est.details["num_blocks"] == 1024 * 1024 // 128


# ---------------------------------------------------------------------------
# Prices against the H100


@pytest.mark.parametrize("model", ["xla-gpu", "xla-gpu-tables"])
def test_cublas_call_against_the_h100(model):
    # Row: haiku_mlp_grad, large, dm-haiku, cublas-lt-matmul.0: min_per_run_s 13.984 µs, 1 execution.
    # Before the GEMM table was read for cuBLAS calls, xla-gpu priced it at 0.36x; XLA's table alone 1.32x.
    t = _price(model, "haiku_mlp_grad", "large", "dm-haiku", "cublas-lt-matmul.0")
    assert t == pytest.approx(13.984e-6, rel=0.25)


def test_getrf_against_the_h100():
    # Row: lineax_lu_solve, large, lineax, lu.26: min_per_run_s 2011.5 µs (20 kernels, 1 execution);
    # constants fitted on jax's getrf rows only. XLA's model had no price; the flops roofline gave 0.006x.
    t = _price("xla-gpu", "lineax_lu_solve", "large", "lineax", "lu.26")
    assert t == pytest.approx(2011.5e-6, rel=0.25)


def test_cudnn_backward_filter_against_the_h100():
    # Row: flax_nnx_conv_grad, large, flax, cudnn-conv-bw-filter.1: min_per_run_s 40.096 µs. Priced as
    # its implicit GEMM (64 x 576 x 32089) by the GEMM table: 1.52x (the fitted form, on equinox's rows
    # only: 1.26x; before that, 0.12x).
    t = _price("xla-gpu", "flax_nnx_conv_grad", "large", "flax", "cudnn-conv-bw-filter.1")
    assert 0.5 < t / 40.096e-6 < 2.0


def test_every_gpu_model_prices_library_calls():
    for model in ("xla-gpu", "xla-gpu-tables", "roofline"):
        t = _price(model, "jax_linalg_svd", "large", "jax", "svd.0")
        # Row: jax_linalg_svd, large, jax, svd.0: 17.05 ms in 1,264 kernels. gesvdj is measured in jax's
        # programs only: it is priced from its kernels (`solver_estimate`), nothing fitted.
        assert math.isfinite(t) and 17.05e-3 / 50 < t < 17.05e-3 * 50


# ---------------------------------------------------------------------------
# The shipped constants


@pytest.fixture(scope="module")
def refit():
    from xla_costmodel.fit._library_fit import fit_library_constants, library_call_rows

    modules = {tuple(p.name[: -len(".post.hlo.gz")].split("@")): xc.parse_hlo(gzip.open(p, "rt").read())
               for p in sorted(FIXTURES.glob("*.post.hlo.gz"))}
    rows = library_call_rows(modules, pd.read_csv(ROWS), H100)
    return rows, fit_library_constants(rows)


def test_shipped_constants_are_the_fit_of_the_shipped_rows(refit):
    _, fits = refit
    shipped = json.loads(DATA.read_text())["routines"]
    assert set(shipped) == set(fits)
    for routine, entry in fits.items():
        for name, fit in [("all", entry["all"]), *entry["leave_source_out"].items()]:
            got = shipped[routine]["all"] if name == "all" else shipped[routine]["leave_source_out"][name]
            for key, value in fit["constants"].items():
                assert got["constants"][key] == pytest.approx(value, rel=1e-6, abs=1e-15), (routine, name, key)


def test_held_out_constants_never_saw_their_source(refit):
    rows, fits = refit
    for routine, entry in fits.items():
        for source, fit in entry["leave_source_out"].items():
            assert f" {source}" not in fit["fitted_on"].split("sources", 1)[1], (routine, source)
        own_sources = set(rows[rows.routine == routine].source)
        if len(own_sources) == 1:  # no honest training data of its own
            assert not entry["honest"]
            held = library_constants(H100, routine, held_out_source=next(iter(own_sources)))
            assert held is None or not held.honest
    assert {r for r, e in fits.items() if not e["honest"]} >= {"gesvdj", "potrf", "syevd", "sort_pairs"}


def test_leaving_source_out_scores_getrf_within_2x(refit):
    from xla_costmodel.fit._library_fit import score_library_rows

    rows, fits = refit
    scored = score_library_rows(rows[rows.routine == "getrf"], fits)
    assert scored.ratio.between(0.5, 2.0).all()


def test_a_factorisation_step_is_one_reduction_in_getrf_and_syevd(refit):
    """`steps` counts a factorisation's reductions across the matrix (`REDUCTIONS_PER_COLUMN`): LU one per
    column (the pivot search), the tridiagonalisation of syevd four (dlatrd: the norm, A·v, V'v and W'v, w'v).
    Fitted on their own rows, independently, the two routines then agree on the time of one step; counted a
    column per step, syevd's step would take about four of getrf's."""
    _, fits = refit
    getrf = fits["getrf"]["all"]["constants"]["step_s"]
    syevd = fits["syevd"]["all"]["constants"]["step_s"]
    assert syevd == pytest.approx(getrf, rel=0.25)


def test_syevd_held_out_against_the_h100():
    # Row: jax_linalg_eigh, large, jax, eigh.0: min_per_run_s 4595 us (125 kernels; 3.1 ms of them in 12
    # sytrd4_gpu launches of 32 columns each, ~255 us whatever the trailing size). syevd is measured in jax's
    # programs only: priced with the getrf constants fitted on lineax's rows. A column per step: 0.33x.
    t = _price("xla-gpu", "jax_linalg_eigh", "large", "jax", "eigh.0")
    assert 0.75 < t / 4595.1e-6 < 1.25


# ---------------------------------------------------------------------------
# cuSolver priced from its kernels (issue 31)


def _work(program: str, size: str, name: str):
    return library_work(_instr(_module(f"{program}@{size}"), name))


def test_gesvdj_launches_its_jacobi_kernel_once_per_round_of_each_sweep():
    from xla_costmodel.analysis.library import solver_kernels

    kinds = {k.name.split(" (")[0]: k for k in solver_kernels(_work("jax_linalg_svd", "large", "svd.0"))}
    # The capture: 279 launches of gesvdbj_batch_32x16 (grid 16) and 558 of svd_column_rotate_batch for the
    # 768x512 SVD: 9 sweeps of 31 rounds of the 16 pairs of 16-column blocks; A and V rotated each round.
    jacobi = kinds["32-column Jacobi in shared memory"]
    assert (jacobi.launches, jacobi.ctas) == (279, 16)
    assert kinds["rotate the pairs' columns"].launches == 558
    assert "Householder QR of the tall matrix" in kinds       # m > n: QR first (geqr2 in the capture)


def test_solver_kernels_only_for_the_routines_with_that_structure():
    from xla_costmodel.analysis.library import solver_kernels

    assert solver_kernels(_work("jax_linalg_solve", "large", "lu.0")) is None          # getrf: the fitted form
    assert solver_kernels(_work("jax_linalg_eigh", "large", "eigh.0")) is None         # syevd n = 512: sytrd path
    assert solver_kernels(_work("jax_linalg_eigh", "small", "eigh.0")) is not None     # n = 32: Jacobi (syevj)
    potrf = solver_kernels(_work("jax_scipy_cho_solve", "large", "cholesky.0"))
    # One tiled kernel, a block per 64x64 tile of the lower triangle: grid 528 for n = 2048 in the capture.
    assert potrf[0].ctas == 32 * 33 // 2 and potrf[0].launches == 1


@pytest.mark.parametrize("program,size,kernel,measured_s,low,high", [
    # Rows of calibration/gpu_h100_library_calls.csv (min_per_run_s). The fitted form priced them 0.56x,
    # 0.50x, 7.0x, 6.2x and 0.23x (held-out constants borrowed from lineax's getrf, no honest data).
    ("jax_linalg_svd", "large", "svd.0", 17047.557e-6, 0.7, 1.25),
    ("jax_linalg_svd", "small", "svd.0", 502.789e-6, 0.4, 1.25),
    ("jax_scipy_cho_solve", "large", "cholesky.0", 691.245e-6, 0.33, 2.0),
    ("jax_scipy_cho_solve", "small", "cholesky.0", 16.033e-6, 0.4, 2.0),
    ("jax_linalg_eigh", "small", "eigh.0", 215.364e-6, 0.4, 1.25),
])
def test_cusolver_from_its_kernels_against_the_h100(program, size, kernel, measured_s, low, high):
    t = _price("xla-gpu", program, size, "jax", kernel)
    assert low < t / measured_s < high


def test_cusolver_from_its_kernels_fits_only_the_time_of_a_reduction_across_blocks():
    from xla_costmodel.models._library_calls import grid_reduction_s, solver_estimate

    work = _work("jax_linalg_svd", "large", "svd.0")
    est = solver_estimate(work, H100)
    with leaving_source_out("jax"):
        held = solver_estimate(work, H100)
        step, fitted_on = grid_reduction_s(H100)
    times = {name: t for name, _, t in est.details["kernel_times_s"]}
    held_times = {name: t for name, _, t in held.details["kernel_times_s"]}
    # The 32-column Jacobi kernels are nothing fitted: the capture's 279 launches took 7.95 ms in the fastest run.
    jacobi = next(t for name, t in times.items() if "Jacobi" in name)
    assert jacobi == next(t for name, t in held_times.items() if "Jacobi" in name)
    assert 7.95e-3 / 1.25 < jacobi < 7.95e-3 * 1.25
    # QR of the 768 x 512 matrix: its panels' reductions across blocks (two per column) take LU's step, fitted
    # without jax's rows when jax is held out. The capture's five geqr2_smem_domino launches: 1.649 ms.
    assert fitted_on.startswith("getrf") and "lineax" in fitted_on and "jax" not in fitted_on.split("sources")[1]
    qr = next(t for name, t in held_times.items() if "Householder QR" in name)
    assert qr > 2 * 512 * step and 1.649e-3 / 1.25 < qr < 1.649e-3 * 1.25
    assert "getrf's fitted step" in held.details["source"]
    assert solver_estimate(work, get_device("host")) is None          # a CPU runs LAPACK, not cuSolver
    # A device without fitted constants: a block tree and two L2 round trips, 0.41 us, a quarter of LU's step.
    from dataclasses import replace

    bare, why = grid_reduction_s(replace(H100, name="h100-unfitted"))
    assert "latency path" in why and bare < step / 3


# ---------------------------------------------------------------------------
# cuDNN convolutions as the implicit GEMMs they run


def test_conv_gemm_dims_of_an_implicit_gemm_and_of_direct_kernels():
    from xla_costmodel.analysis.library import conv_gemm_dims

    conv = _instr(_module("haiku_resnet18_fwd@large"), "cudnn-conv.27")
    work = library_work(conv)
    m, n, k = conv_gemm_dims(conv)
    out = first_array_of(conv)
    assert n == out.dims[conv.attribute("dim_labels").output_feature] and m * n == math.prod(out.dims)
    assert 2 * m * n * k == pytest.approx(work.flops, rel=0.01)
    # The capture runs these as direct kernels: a depthwise (3 groups) and a one-feature convolution.
    assert conv_gemm_dims(_instr(_module("pix_gaussian_blur@large"), "cudnn-conv.2")) is None
    assert conv_gemm_dims(_instr(_module("jax_scipy_convolve2d@large"), "cudnn-conv.1")) is None


def first_array_of(instr):
    from xla_costmodel.analysis.library import real_outputs

    return real_outputs(instr)[0]


@pytest.mark.parametrize("program,size,source,kernel,measured_s", [
    # Rows of calibration/gpu_h100_library_calls.csv; the fitted form (constants fitted without dm-haiku,
    # on dm-pix's and jax's direct kernels) priced them 4.45x and 3.41x.
    ("haiku_resnet18_fwd", "large", "dm-haiku", "cudnn-conv.27", 5.760e-6),
    ("haiku_resnet18_fwd", "large", "dm-haiku", "cudnn-conv.30", 7.040e-6),
    # A skinny implicit GEMM (32768 x 64 x 282): the table's n = 256 floor alone priced it 4.9x.
    ("equinox_conv_grad", "large", "equinox", "cudnn-conv-bias-activation.3", 13.376e-6),
])
def test_cudnn_implicit_gemm_against_the_h100(program, size, source, kernel, measured_s):
    t = _price("xla-gpu", program, size, source, kernel)
    assert 0.67 < t / measured_s < 1.5


def test_cudnn_implicit_gemm_uses_the_held_out_gemm_scale():
    from xla_costmodel.models._library_calls import conv_gemm_estimate

    conv = _instr(_module("haiku_resnet18_fwd@large"), "cudnn-conv.27")
    shipped = json.loads(DATA.read_text())["routines"]["gemm"]
    with leaving_source_out("dm-haiku"):
        est = conv_gemm_estimate(conv, H100)
    held = shipped["leave_source_out"]["dm-haiku"]["constants"]["table_scale"]
    assert est.time_s == pytest.approx(est.details["table_s"] * held)
    assert conv_gemm_estimate(conv, get_device("host")) is None


def test_a_skinny_gemm_is_folded_into_the_table_grid_with_its_output_elements():
    from xla_costmodel.models._library_calls import _fold_into_grid

    assert _fold_into_grid(32768, 64, 256) == (8192, 256)
    assert _fold_into_grid(64, 1024, 256) == (256, 256)
    assert _fold_into_grid(128, 64, 256) == (128, 64)        # both below: the table's floor prices it
    assert _fold_into_grid(512, 512, 256) == (512, 512)


def test_trsm_kernels_as_the_capture_launches_them():
    from xla_costmodel.analysis.library import solver_kernels

    def kinds(program, size, name):
        return {k.name.split(" (")[-1].rstrip(")"): k for k in solver_kernels(_work(program, size, name))}

    # Capture: kernel_trsm_l_mul32 x4 (grid 8: 64 right-hand sides) for n = 1024, x8 (grid 4) for n = 2048.
    many = kinds("jax_linalg_solve", "large", "triangular-solve")
    assert (many["kernel_trsm_l_mul32"].launches, many["kernel_trsm_l_mul32"].ctas) == (4, 8)
    assert kinds("jax_scipy_cho_solve", "large", "triangular-solve")["kernel_trsm_l_mul32"].launches == 8
    # One right-hand side: dtrsv_init and trsv_ln_exec (grid 32 for n = 1024), after the MemcpyD2D.
    one = kinds("lineax_lu_solve", "large", "triangular-solve")
    assert set(one) == {"MemcpyD2D", "dtrsv_init", "trsv_ln_exec"} and one["trsv_ln_exec"].ctas == 32


@pytest.mark.parametrize("kernel,measured_s", [("triangular-solve", 54.817e-6), ("triangular-solve.1", 61.090e-6)])
def test_trsv_from_its_kernels_against_the_h100(kernel, measured_s):
    # Rows of lineax_lu_solve@large (n = 1024, one right-hand side). The fitted form, held out on jax's
    # many-right-hand-side kernels, priced them 2.69x and 2.41x.
    t = _price("xla-gpu", "lineax_lu_solve", "large", "lineax", kernel)
    assert 0.8 < t / measured_s < 1.25


def test_a_batch_of_large_svds_runs_one_after_the_other_and_small_ones_side_by_side():
    import dataclasses

    from xla_costmodel.analysis.library import solver_kernels

    work = _work("jax_linalg_svd", "large", "svd.0")
    jacobi = {k.name: k for k in solver_kernels(work)}
    batch = dataclasses.replace(work, batch=4, flops=4 * work.flops)
    # jaxlib (xla_gpu_offline.md): gesvdj is batched only up to 32 x 32; a larger batch is a loop.
    for kind in solver_kernels(batch):
        assert (kind.launches, kind.ctas) == (4 * jacobi[kind.name].launches, jacobi[kind.name].ctas)
    small = _work("jax_linalg_svd", "small", "svd.0")
    one = {k.name: k for k in solver_kernels(dataclasses.replace(small, m=32))}
    for kind in solver_kernels(dataclasses.replace(small, m=32, batch=8)):
        assert kind.launches == one[kind.name].launches
