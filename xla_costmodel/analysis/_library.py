"""The one table of library routines XLA hands work to, and what each does, from its operands.

XLA:GPU runs GEMMs, convolutions, dense linear algebra and sorts through
libraries (cuBLAS / cuBLASLt, cuDNN, cuSolver, CUB) as custom calls; XLA:CPU
runs the linear algebra through LAPACK. XLA's `HloCostAnalysis` reports most
of them as unknown (-1). This module says, for every routine the project
knows, once:

- which routine a custom call is (`library_routine`, from its target, read by
  `_frontend.custom_call_target`);
- its work (`library_work`): flops (textbook counts, with XLA's own where XLA
  has one: a GEMM's and a convolution's `HloCostAnalysis` flops, a triangular
  solve's 2·n·|b| and a Cholesky's n·|a|/3 as the `triangular-solve` and
  `cholesky` opcodes count them), the bytes it must move (operands and real
  results; the s8 / u8 workspace element and the s32 `info` scalars of the
  result tuple are scratch, not output), the matrices in the batch, the
  matrix order, and `steps`: the length of the routine's serial dependency
  chain per matrix, which bounds the time of the solvers whatever their flops
  (for a factorisation, each column's reductions across the matrix, each
  waited for and broadcast back (`REDUCTIONS_PER_COLUMN`: LU one, Householder
  tridiagonalisation four); a row per step for triangular solves; n·⌈log2 n⌉
  rotation rounds for one-sided Jacobi SVD, whose sweeps grow like log n; a
  radix pass per 8 key bits for CUB's sorts).

For cuSolver's `potrf`, `gesvdj` and Jacobi `syevd` it also lists the kernels
the routine launches (`solver_kernels` / `SolverKernel`: launches, blocks,
flops, bytes and the dependent operations of each kernel's critical path),
from the algorithm and the kernel names of the H100 capture.

The cost analysis (`_gpu_rules`, `_rules_math`), every model
(`models._kernel_costs`, `models._library_calls`) and the fitted models'
features (`features._counting`) read the counts here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from ._frontend import backend_config, custom_call_target
from ._opcodes import CUBLAS_GEMM_TARGETS
from ._shapes import array_leaves, elements, first_array

__all__ = [
    "LIBRARY_ROUTINES", "LibraryWork", "SolverKernel", "cholesky_flops", "library_of", "library_routine", "library_work",
    "conv_gemm_dims", "real_outputs", "solver_kernels", "topk_flops", "triangular_solve_flops", "xla_library_flops",
]

from ._records import FMA_FLOPS  # noqa: E402  (HloCostAnalysis::kFmaFlops, one home)

#: Routine name -> (library, what it is). Targets map to these through `_TARGET_RULES`.
LIBRARY_ROUTINES: dict[str, tuple[str, str]] = {
    "gemm": ("cublas", "cuBLAS / cuBLASLt GEMM (`__cublas$gemm`, `__cublas$lt$matmul` and its f8 / mx forms)"),
    "trsm": ("cublas", "triangular solve (`__cublas$triangularSolve`, LAPACK `trsm`)"),
    "getrf": ("cusolver", "LU factorisation with partial pivoting"),
    "potrf": ("cusolver", "Cholesky factorisation"),
    "geqrf": ("cusolver", "Householder QR factorisation"),
    "orgqr": ("cusolver", "forming Q from Householder reflectors (orgqr / ungqr, householder_product)"),
    "syevd": ("cusolver", "symmetric / Hermitian eigendecomposition (syevd, heevd, syevj)"),
    "gesvdj": ("cusolver", "SVD by one-sided Jacobi rotations"),
    "gesvd": ("cusolver", "SVD by bidiagonalisation (gesvd, gesdd)"),
    "lu_pivots_to_permutation": ("cusolver", "LU pivots to a permutation (jaxlib's `cu_lu_pivots_to_permutation`)"),
    "conv_forward": ("cudnn", "cuDNN convolution, forward"),
    "conv_bias_activation": ("cudnn", "cuDNN fused convolution + bias + activation, forward"),
    "conv_backward_filter": ("cudnn", "cuDNN convolution, gradient of the filter"),
    "conv_backward_input": ("cudnn", "cuDNN convolution, gradient of the input"),
    "sort_pairs": ("cub", "CUB radix sort of keys with values"),
    "sort_keys": ("cub", "CUB radix sort of keys"),
    "topk": ("xla", "top-k selection"),
}

_CUDNN = {
    "__cudnn$convforward": "conv_forward",
    "__cudnn$convforwardgraph": "conv_forward",
    "__cudnn$convbiasactivationforward": "conv_bias_activation",
    "__cudnn$convbackwardfilter": "conv_backward_filter",
    "__cudnn$convbackwardinput": "conv_backward_input",
}
# Substrings of a lower-cased target, first match wins (cuSolver `cusolver_*_ffi`, hipSolver, LAPACK `lapack_?*_ffi`).
_TARGET_RULES = (
    ("lu_pivots_to_permutation", "lu_pivots_to_permutation"),
    ("triangularsolve", "trsm"), ("trsm", "trsm"),
    ("getrf", "getrf"), ("potrf", "potrf"), ("cholesky", "potrf"),
    ("geqrf", "geqrf"), ("geqp3", "geqrf"), ("orgqr", "orgqr"), ("ungqr", "orgqr"), ("householder_product", "orgqr"),
    ("syevd", "syevd"), ("heevd", "syevd"), ("syevj", "syevd"), ("heevj", "syevd"),
    ("gesvdj", "gesvdj"), ("gesvd", "gesvd"), ("gesdd", "gesvd"),
    ("sort_pairs", "sort_pairs"), ("sort_keys", "sort_keys"), ("cub_sort", "sort_keys"),
    ("topk", "topk"),
)
_LAPACK = re.compile(r"^lapack_")


def library_routine(instr) -> str | None:
    """The `LIBRARY_ROUTINES` name of a custom call, or None (not a custom call, or not a library routine)."""
    target = custom_call_target(instr)
    if not target:
        return None
    if target in CUBLAS_GEMM_TARGETS:
        return "gemm"
    low = target.lower()
    hit = _CUDNN.get(low)
    if hit is not None:
        return hit
    for needle, routine in _TARGET_RULES:
        if needle in low:
            return routine
    return None


def library_of(instr) -> str:
    """The library that runs a custom call's routine: `cublas`, `cudnn`, `cusolver`, `cub`, `lapack`
    (XLA:CPU), `xla`, or "" when it is none of `LIBRARY_ROUTINES`."""
    routine = library_routine(instr)
    if routine is None:
        return ""
    if _LAPACK.match(custom_call_target(instr).lower()):
        return "lapack"
    return LIBRARY_ROUTINES[routine][0]


@dataclass(frozen=True, slots=True)
class LibraryWork:
    """What one library call does.

    **Attributes:** `routine` (a key of `LIBRARY_ROUTINES`), `library`;
    `flops` (all matrices of the batch); `matrix_flops`: True when the flops run
    on matrix units (GEMMs, convolutions); `dtype`: the element type the work
    is done in; `bytes_read` and `bytes_written` (real operands and results,
    no workspace); `batch`: matrices (or sorts) in the call; `m`, `n`: rows
    and columns of one matrix (a sort's length in `n`); `rhs`: right-hand
    sides of a solve (GEMM: its n); `steps`: the serial dependency chain of
    one matrix (module docstring).
    """

    routine: str
    library: str
    flops: float
    matrix_flops: bool
    dtype: str
    bytes_read: float
    bytes_written: float
    batch: int
    m: int
    n: int
    rhs: int
    steps: float

    @property
    def bytes_accessed(self) -> float:
        return self.bytes_read + self.bytes_written


# ---------------------------------------------------------------------------
# Flop counts, shared with the `triangular-solve` and `cholesky` opcodes


def triangular_solve_flops(a_shape, b_shape) -> float:
    """`HloCostAnalysis::HandleTriangularSolve`: 2 · n · elements(b), n the order of `a` (XLA counts the
    whole square, twice the textbook n²·rhs: the same count for the opcode and the library call)."""
    n = a_shape.dims[-1] if a_shape.dims else 1
    return float(FMA_FLOPS * n * elements(b_shape))


def cholesky_flops(a_shape) -> float:
    """`HloCostAnalysis::HandleCholesky`: n · elements(a) / 3 (n³/3 per matrix, integer division as XLA)."""
    n = a_shape.dims[-1] if a_shape.dims else 1
    return float((n * elements(a_shape)) // 3)


def topk_flops(input_shape, k: int) -> float:
    """Top-k by heap selection: one comparison per input element per level of a k-element heap, ⌈log2 k⌉
    (XLA counts 0 for the `topk` opcode; the opcode and the custom call both count this)."""
    return float(elements(input_shape) * max(1, (max(k, 1) - 1).bit_length()))


def _getrf_flops(m: int, n: int) -> float:
    k = min(m, n)
    return 2.0 * m * n * k - (m + n) * k * k + 2.0 * k ** 3 / 3.0


def _householder_flops(m: int, n: int) -> float:
    k = min(m, n)
    return 2.0 * m * n * k - 2.0 * k ** 3 / 3.0 if m >= n else 2.0 * n * m * k - 2.0 * k ** 3 / 3.0


def _svd_flops(m: int, n: int) -> float:
    # Golub & Van Loan, "Matrix Computations", R-SVD with U, Σ and V.
    big, small = max(m, n), min(m, n)
    return 4.0 * big * big * small + 8.0 * big * small * small + 9.0 * small ** 3


#: A factorisation's serial chain, per column: its reductions over the whole column or trailing matrix, each a
#: dependency between all the blocks of the kernel (reduced, then broadcast back before the next can start), from
#: LAPACK's unblocked algorithms, which cuSolver's panel kernels run a column at a time:
#: - getrf (dgetf2): the pivot search (idamax); the swap, the scaling and the rank-1 update are row-local;
#: - potrf (dpotf2): the dot product of the row; the column's products below it are row-local;
#: - geqrf (dgeqr2): the column's norm (dlarfg), then the reflector's products with the trailing columns (dlarf);
#: - orgqr (dorg2r): the reflector's products with the trailing columns (dlarf);
#: - syevd's tridiagonalisation (dsytrd / dlatrd, lower): the column's norm (dlarfg), the symmetric product
#:   A·v (dsymv), the panel's corrections V'v and W'v (side by side), and w'v; the panel's own updates of the
#:   column are row-local. cuSolver's `sytrd4_gpu` runs these a column at a time (32 per launch on the H100).
#: The routines of a family share one step time (`fit._library_fit`): a step is one such reduction.
REDUCTIONS_PER_COLUMN = {"getrf": 1, "potrf": 1, "geqrf": 2, "orgqr": 1, "syevd": 4}

_PER_MATRIX_FLOPS = {
    "getrf": _getrf_flops,
    "potrf": lambda m, n: n ** 3 / 3.0,
    "geqrf": _householder_flops,
    "orgqr": _householder_flops,
    "syevd": lambda m, n: 9.0 * n ** 3,
    "gesvdj": _svd_flops,
    "gesvd": _svd_flops,
}


# ---------------------------------------------------------------------------
# The work of one call


def _bytes(shape) -> float:
    return float(sum(leaf.byte_size for _, leaf in array_leaves(shape)))


def real_outputs(instr) -> list:
    """The result leaves of a custom call that are data: the workspace of a GEMM, a convolution, a
    triangular solve or a sort (the last s8 / u8 element of the tuple) and a solver's s32[] `info`
    scalars are dropped."""
    leaves = [leaf for _, leaf in array_leaves(instr.shape)]
    if instr.shape.element_type == "tuple" and len(leaves) > 1 and leaves[-1].element_type in ("s8", "u8"):
        leaves = leaves[:-1]
    return [leaf for leaf in leaves if leaf.dims or leaf.element_type not in ("s32", "s64")] or leaves[:1]


def _matrices(a) -> tuple[int, int, int]:
    """(matrices in the batch, rows m, columns n) of a (batched) matrix."""
    m = a.dims[-2] if len(a.dims) >= 2 else 1
    n = a.dims[-1] if a.dims else 1
    return max(elements(a) // max(m * n, 1), 1), int(m), int(n)


def _gemm_dims(instr) -> dict | None:
    cfg = backend_config(instr)
    gemm = cfg.get("gemm_backend_config", cfg) if cfg is not None else None
    ddn = gemm.get("dot_dimension_numbers") if isinstance(gemm, dict) else None
    return ddn if isinstance(ddn, dict) else None


def _gemm(instr, outs) -> tuple:
    ddn = _gemm_dims(instr)
    if ddn is None or len(instr.operands) < 2:
        return None
    lhs, rhs = first_array(instr.operands[0].shape), first_array(instr.operands[1].shape)

    def dims(key):
        return tuple(int(x) for x in ddn.get(key, ()))

    lb, lc, rb, rc = (dims(k) for k in ("lhs_batch_dimensions", "lhs_contracting_dimensions",
                                         "rhs_batch_dimensions", "rhs_contracting_dimensions"))
    b = math.prod(lhs.dims[d] for d in lb)
    k = math.prod(lhs.dims[d] for d in lc)
    m = math.prod(x for d, x in enumerate(lhs.dims) if d not in lb and d not in lc)
    n = math.prod(x for d, x in enumerate(rhs.dims) if d not in rb and d not in rc)
    # `HloCostAnalysis::GetDotFlops` on the real output: 2 x output elements x contracted size.
    return FMA_FLOPS * elements(outs[0]) * k, b, m, n, k, lhs.element_type


_CONV_ROLES = {
    # (forward input, kernel, forward output) as (operand index | "out")
    "conv_forward": (0, 1, "out"),
    "conv_bias_activation": (0, 1, "out"),
    "conv_backward_filter": (0, "out", 1),
    "conv_backward_input": ("out", 1, 0),
}


def _conv_flops(instr, routine: str, outs) -> float | None:
    """`HloCostAnalysis::GetConvolutionFlops` of the forward convolution the call computes (or
    differentiates): its dimension labels and window describe that forward convolution."""

    if not instr.has_attribute("dim_labels") or len(instr.operands) < 2:
        return None
    shapes = [first_array(instr.operands[i].shape) if i != "out" else outs[0] for i in _CONV_ROLES[routine]]
    return float(convolution_flops(instr, *shapes))


def conv_gemm_dims(instr) -> tuple[int, int, int] | None:
    """`(m, n, k)` of the implicit GEMM a cuDNN convolution call runs, or None: not a convolution call, a
    grouped one (`feature_group_count` or `batch_group_count` > 1), or one with a single output row or
    column (cuDNN runs those as direct kernels: `conv2d_grouped_direct`, `conv2d_c1_k1` in the H100
    capture; the implicit GEMMs are `*_xmma_fprop_implicit_gemm_*` / `*_wgrad_*`).

    Forward (and fused bias-activation): m = output pixels (batch x spatial), n = output features;
    gradient of the input: m = input pixels, n = input features; gradient of the filter: m = output
    features, n = input features x window. k = the call's flops / (2 m n): the contracted length, with
    the window positions that fall in the padding left out, as `GetConvolutionFlops` counts them.
    """
    routine = library_routine(instr)
    if routine is None or not routine.startswith("conv_") or not instr.has_attribute("dim_labels"):
        return None
    if instr.attribute("feature_group_count", 1) != 1 or instr.attribute("batch_group_count", 1) != 1:
        return None
    work = library_work(instr)
    if work is None or not work.flops > 0:
        return None
    dn = instr.attribute("dim_labels")
    out = real_outputs(instr)[0]
    if routine == "conv_backward_filter":
        m = out.dims[dn.kernel_output_feature]
        n = elements(out) // max(m, 1)
    elif routine == "conv_backward_input":
        n = out.dims[dn.input_feature]
        m = elements(out) // max(n, 1)
    else:
        n = out.dims[dn.output_feature]
        m = elements(out) // max(n, 1)
    if m <= 1 or n <= 1:
        return None
    return int(m), int(n), max(1, round(work.flops / (FMA_FLOPS * m * n)))


def xla_library_flops(instr) -> float | None:
    """`GpuHloCostAnalysis::HandleCustomCall`'s flops of a cuBLAS GEMM or cuDNN convolution call, None
    for any other custom call (XLA: unknown).

    A GEMM's are its `LibraryWork.flops`. A convolution's are `GetConvolutionFlops` of (operand 0,
    operand 1, result 0) under the call's labels, whatever its kind: for the backward kinds that is
    not the work done (the labels describe the forward convolution, the shapes do not), which
    `LibraryWork.flops` counts instead; the cost analysis keeps XLA's number.
    """

    routine = library_routine(instr)
    if routine == "gemm":
        work = library_work(instr)
        return work.flops if work is not None else None
    if routine is None or not routine.startswith("conv_") or not instr.has_attribute("dim_labels") \
            or len(instr.operands) < 2:
        return None
    out = real_outputs(instr)[0]
    return float(convolution_flops(instr, first_array(instr.operands[0].shape),
                                   first_array(instr.operands[1].shape), out))


def _radix_passes(key_type: str) -> int:
    from ..hlo import PRIMITIVE_BITS

    return max(1, math.ceil(PRIMITIVE_BITS.get(key_type, 32) / 8))


def library_work(instr) -> LibraryWork | None:
    """The `LibraryWork` of a library custom call, or None (not one of `LIBRARY_ROUTINES`, or its
    operands do not say: a GEMM without dimension numbers, a convolution without labels)."""
    routine = library_routine(instr)
    if routine is None or not instr.operands:
        return None
    library = library_of(instr)
    outs = real_outputs(instr)
    read = sum(_bytes(op.shape) for op in instr.operands)
    written = sum(float(leaf.byte_size) for leaf in outs)
    a = first_array(instr.operands[0].shape)
    dtype = a.element_type
    matrix = False
    rhs = 0
    if routine == "gemm":
        hit = _gemm(instr, outs)
        if hit is None:
            return None
        flops, batch, m, n, _k, dtype = hit
        rhs, steps, matrix = n, 0.0, True
    elif routine.startswith("conv_"):
        flops = _conv_flops(instr, routine, outs)
        if flops is None:
            return None
        batch, m, n, steps, matrix = 1, 0, 0, 0.0, True
    elif routine == "trsm":
        if len(instr.operands) < 2:
            return None
        b = first_array(instr.operands[1].shape)
        batch, m, n = _matrices(a)
        flops = triangular_solve_flops(a, b)
        rhs = max(elements(b) // max(batch * n, 1), 1)
        # Substitution runs down the rows of the triangle; the right-hand sides go in parallel.
        steps = float(n)
    elif routine == "lu_pivots_to_permutation":
        m, n = 0, a.dims[-1] if a.dims else 1
        batch = max(elements(a) // max(n, 1), 1)
        flops, steps = 0.0, float(n)
    elif routine in ("sort_pairs", "sort_keys"):
        n = a.dims[-1] if a.dims else 1
        batch, m = max(elements(a) // max(n, 1), 1), 0
        passes = _radix_passes(a.element_type)
        flops = 0.0
        # Each radix pass reads and writes keys (and values); the passes run one after another.
        read, written = read * passes, written * passes
        steps = float(passes)
    elif routine == "topk":
        out = outs[0]
        k = out.dims[-1] if out.dims else 1
        n = a.dims[-1] if a.dims else 1
        batch, m = max(elements(a) // max(n, 1), 1), 0
        flops = topk_flops(a, k)
        steps = 0.0
    else:
        batch, m, n = _matrices(a)
        flops = batch * _PER_MATRIX_FLOPS[routine](m, n)
        k = min(m, n)
        if routine == "gesvdj":
            # One-sided Jacobi: about log2(n) sweeps, each of n rounds of disjoint column-pair rotations.
            steps = float(k * max(1, math.ceil(math.log2(max(k, 2)))))
        elif routine == "potrf":
            steps = float(n * REDUCTIONS_PER_COLUMN[routine])
        else:
            steps = float(k * REDUCTIONS_PER_COLUMN.get(routine, 1))
    return LibraryWork(routine, library, float(flops), matrix, dtype, float(read), float(written),
                       int(batch), int(m), int(n), int(rhs), float(steps))


def convolution_flops(instr, lhs_shape, rhs_shape, out_shape) -> int:
    """`HloCostAnalysis::GetConvolutionFlops`: 2 x FMAs over the valid (output, kernel) position pairs."""
    dn = instr.attribute("dim_labels")
    window = instr.attribute("window", None)
    win_dims = list(window.dimensions) if window is not None else []
    in_feature = lhs_shape.dims[dn.input_feature]
    out_feature = out_shape.dims[dn.output_feature]
    batch = lhs_shape.dims[dn.input_batch]
    if not win_dims:
        from ..hlo import WindowDimension

        win_dims = [WindowDimension()]
        kernel_limits, output_limits, input_limits = [1], [1], [1]
    else:
        kernel_limits = [rhs_shape.dims[d] for d in dn.kernel_spatial]
        output_limits = [out_shape.dims[d] for d in dn.output_spatial]
        input_limits = [lhs_shape.dims[d] for d in dn.input_spatial]
    valid = []
    for s, wd in enumerate(win_dims):
        i_lim, o_lim, k_lim = input_limits[s], output_limits[s], kernel_limits[s]
        if (i_lim == o_lim and k_lim == o_lim and i_lim == wd.base_dilation and wd.window_dilation == 1
                and max(1, i_lim - 1) == wd.stride and wd.padding_low == 0 and wd.padding_high == 0):
            valid.append(i_lim)
            continue
        if (i_lim == 1 and k_lim == o_lim and wd.window_dilation == 1 and wd.base_dilation == 1
                and wd.stride == 1 and wd.padding_high == o_lim - 1 and wd.padding_low == o_lim - 1):
            valid.append(o_lim)
            continue
        count = 0
        for k in range(k_lim):
            if wd.stride == 1 and wd.base_dilation == 1:
                base = wd.padding_low - k * wd.window_dilation
                count += max(min(i_lim + base, o_lim) - max(base, 0), 0)
                continue
            for o in range(o_lim):
                undilated = o * wd.stride - wd.padding_low + k * wd.window_dilation
                if wd.base_dilation > 1:
                    # C++ integer division truncates toward zero.
                    q = abs(undilated) // wd.base_dilation
                    lhs_index = q if undilated >= 0 else -q
                else:
                    lhs_index = undilated
                if undilated != lhs_index * wd.base_dilation:
                    continue
                if 0 <= lhs_index < i_lim:
                    count += 1
        valid.append(count)
    fgc = instr.attribute("feature_group_count", 1)
    bgc = instr.attribute("batch_group_count", 1)
    fma = (in_feature // fgc) * out_feature * (batch // bgc) * math.prod(valid)
    return fma * FMA_FLOPS


# ---------------------------------------------------------------------------
# The kernels a cuSolver routine launches (issue 31: priced from their structure, not a fitted constant)


@dataclass(frozen=True, slots=True)
class SolverKernel:
    """One kind of kernel a cuSolver routine launches, per call (all matrices of the batch).

    **Attributes:** `name` (the algorithm's phase, with the cuSolver kernel the H100 capture names);
    `launches` (per call); `ctas` (blocks per launch: the SMs it can occupy); `flops` and `bytes`
    (per launch); the critical path of one launch, counted in dependent operations the models price at
    the device's latencies: `smem_steps` (a shared-memory load, an operation, a store and a block
    barrier), `reduce_levels` (a shuffle or shared-memory tree level and its add), `alu_ops` (dependent
    arithmetic: square roots, reciprocals, rotation formulas), `grid_steps` (a dependency between two
    blocks through L2: a flag written and read), `grid_reductions` (a reduction across all the kernel's
    blocks, broadcast back before the next step: a factorisation's column step, `REDUCTIONS_PER_COLUMN`;
    its block trees included), `serial_flops` (FMAs one SM must issue in turn: the tile products of the
    critical path).
    """

    name: str
    launches: int
    ctas: int = 1
    flops: float = 0.0
    bytes: float = 0.0
    smem_steps: float = 0.0
    reduce_levels: float = 0.0
    alu_ops: float = 0.0
    grid_steps: float = 0.0
    grid_reductions: float = 0.0
    serial_flops: float = 0.0


#: Column block of cuSolver's Jacobi kernels: `gesvdbj_batch_32x16`, `syevbj_batch_32x16` (the H100
#: capture's kernel names): blocks of 16 columns, paired into 32-column problems.
JACOBI_BLOCK = 16
#: Tile of cuSolver's Cholesky kernel (`getrf_wo_pivot_params_<float, 0, 256, 1, 64, 64, ...>`).
POTRF_TILE = 64
#: jaxlib's dispatch (xla_gpu_offline.md): `syevd` runs Jacobi (`syevj`) when n <= 32; `gesvdj` runs its
#: batched form on matrices up to 32 x 32.
SYEVJ_MAX_N = 32
GESVDJ_BATCHED_MAX = 32
#: LAPACK's blocked Householder code needs at least one block of columns (cuSolver's `larft_T_64`);
#: below it Q is applied a reflector at a time (`ormtr_gemv_c` + `ormtr_gerc`, two kernels per column).
HOUSEHOLDER_BLOCK = 64
#: Threads of one QR panel block (`geqr2_smem*<..., 256 threads>`): a column norm is a tree of log2(256)
#: levels; a panel taller than a block spreads over blocks joined through L2.
QR_BLOCK_ROWS = 256
#: Fixed kernels of a Jacobi solver around its sweeps: Frobenius norm (2), scaling, identity V, ordering
#: set-up (2), the final sort of the values, column permutation (2) and the diagonal (`batch_FnrmA_stage*`,
#: `lascl`, `batch_eye`, `syevj_parallel_order_set` x2, sort, `colperm` x2, `*_diagonal_kernel`).
JACOBI_FIXED_LAUNCHES = 10


def _jacobi_sweeps(n: int) -> int:
    # Cyclic Jacobi converges quadratically once near diagonal; the sweeps grow like log2 n (as
    # `library_work`'s steps count them): 9 for n = 512 as the capture shows.
    return max(1, math.ceil(math.log2(max(n, 2))))


def _jacobi_block_solve(ctas: int, launches: int, two_sided: bool) -> SolverKernel:
    """The kernel that solves each pair's 32-column Jacobi problem in shared memory, a block per pair:
    log2(32) sweeps of 31 rounds of 16 disjoint rotations. A round: (one-sided) the three dot products of
    each column pair over 32 rows, a 5-level tree; the rotation formula (rsqrt, reciprocal and a few
    FMAs, 8 dependent operations); then the columns (and, two-sided, the rows) read, rotated and written
    back behind a barrier: two shared-memory steps."""
    rounds = _jacobi_sweeps(2 * JACOBI_BLOCK) * (2 * JACOBI_BLOCK - 1)
    return SolverKernel("32-column Jacobi in shared memory (gesvdbj / syevbj_batch_32x16)", launches, ctas=ctas,
                        smem_steps=rounds * 2.0, alu_ops=rounds * 8.0,
                        reduce_levels=0.0 if two_sided else rounds * math.log2(2 * JACOBI_BLOCK))


#: Rows of the diagonal block one cuBLAS trsm kernel solves (`kernel_trsm_l_mul32`: the capture launches one
#: per 256 rows, a GEMM updating the rows below between them) and of one trsv block (`trsv_ln_exec`: a
#: block per 32 rows, each waiting for the one above).
TRSM_BLOCK_ROWS = 256
TRSV_BLOCK_ROWS = 32


def _trsm_kernels(work: LibraryWork) -> tuple[SolverKernel, ...]:
    """cuBLAS's triangular solve as XLA calls it (`__cublas$triangularSolve`), from the H100 capture: the
    right-hand sides copied into the result first (the solve is in place: `MemcpyD2D`); one right-hand
    side: `dtrsv_init` and one kernel whose blocks of 32 rows run in turn; more: a kernel per 256 rows
    (a block per 8 right-hand sides) with a GEMM between them. Either way a row costs one dependent
    shared-memory step (substitution: LAPACK's trsm / trsv update the rows below by an axpy per row)."""
    from ..hlo import PRIMITIVE_BITS

    b, n, rhs = work.batch, max(work.n, 1), max(work.rhs, 1)
    elem = max(PRIMITIVE_BITS.get(work.dtype, 32) // 8, 1)
    rhs_bytes = float(b * n * rhs * elem)
    tri_bytes = b * n * (n + 1) / 2.0 * elem
    copy = SolverKernel("copy of the right-hand sides into the result (MemcpyD2D)", 1, ctas=b * n * rhs // 1024 + 1,
                        bytes=2.0 * rhs_bytes)
    if b > 1:
        # A batch: two kernels build the arrays of matrix pointers first, then trsmBatched (xla_gpu_offline.md).
        copy = (copy, SolverKernel("matrix pointer arrays (two kernels)", 2, ctas=b // 256 + 1, bytes=2.0 * 8 * b))
    else:
        copy = (copy,)
    if rhs == 1:
        blocks = math.ceil(n / TRSV_BLOCK_ROWS)
        return (*copy, SolverKernel("trsv set-up (dtrsv_init)", 1),
                SolverKernel("substitution, 32-row blocks in turn (trsv_ln_exec)", 1, ctas=b * blocks,
                             flops=work.flops, bytes=tri_bytes + 2.0 * rhs_bytes, smem_steps=n,
                             grid_steps=blocks - 1))
    launches = math.ceil(n / TRSM_BLOCK_ROWS)
    rows = min(n, TRSM_BLOCK_ROWS)
    diag_flops = b * launches * rows * rows * rhs
    out = [*copy, SolverKernel("substitution of a 256-row block (kernel_trsm_l_mul32)", launches,
                              ctas=b * math.ceil(rhs / 8), flops=diag_flops / launches,
                              bytes=(b * rows * (rows + 1) / 2.0 * elem + 2.0 * b * rows * rhs * elem),
                              smem_steps=rows)]
    if launches > 1:
        # The rest of the work: the rows below each block updated by a GEMM, on average half the matrix.
        gemm_flops = max(work.flops - diag_flops, 0.0) / (launches - 1)
        out.append(SolverKernel("update of the rows below (GEMM)", launches - 1,
                                ctas=b * math.ceil(rhs / 32) * math.ceil(n / 2 / 32), flops=gemm_flops,
                                bytes=(tri_bytes + 2.0 * rhs_bytes) / launches))
    return tuple(out)


def solver_kernels(work: LibraryWork) -> tuple[SolverKernel, ...] | None:
    """The kernels cuSolver launches for a `potrf`, a `gesvdj` or a small (Jacobi) `syevd` call, and cuBLAS
    for a triangular solve (`trsm`), in f32, from the algorithm and the kernel names of the H100 capture;
    None for any other routine (priced by the fitted form). A batch runs its matrices side by side in the
    same kernels (jaxlib's batched paths: more blocks per launch, the same critical path)."""
    b, m, n = work.batch, work.m, work.n
    k, p = min(m, n), max(m, n)
    elem = 4.0
    if work.routine == "trsm":
        return _trsm_kernels(work)
    if work.routine == "potrf":
        tiles = math.ceil(n / POTRF_TILE)
        # One kernel, a block per 64x64 tile of the lower triangle. Its critical path, per block column:
        # the diagonal tile factorised a column at a time as LAPACK's potf2 does (the dot product of the
        # row, a tree; the square root and reciprocal; the column's products with the rows below, trees
        # side by side; their write and the scaling: two shared-memory steps), the tiles below solved a
        # row at a time (an update each), the next diagonal tile updated by a 64x64x64 product on one SM,
        # and the flag its block waits for.
        levels = 2.0 * math.log2(POTRF_TILE)
        return (SolverKernel("tiled Cholesky (getrf_wo_pivot)", 1, ctas=b * tiles * (tiles + 1) // 2,
                             flops=work.flops, bytes=b * 2.0 * n * n * elem,
                             smem_steps=tiles * POTRF_TILE * 2.0 + (tiles - 1) * POTRF_TILE,
                             reduce_levels=tiles * POTRF_TILE * levels, alu_ops=tiles * POTRF_TILE * 2.0,
                             grid_steps=tiles - 1, serial_flops=(tiles - 1) * 2.0 * POTRF_TILE ** 3),
                SolverKernel("info (two memsets, set_info)", 3))
    jacobi_svd = work.routine == "gesvdj"
    if not (jacobi_svd or (work.routine == "syevd" and n <= SYEVJ_MAX_N)):
        return None
    if jacobi_svd and b > 1 and p > GESVDJ_BATCHED_MAX:
        # jaxlib batches gesvdj only up to 32 x 32 (xla_gpu_offline.md); a larger batch runs one matrix
        # after the other.
        one = solver_kernels(dataclasses.replace(work, batch=1, flops=work.flops / b,
                                                 bytes_read=work.bytes_read / b, bytes_written=work.bytes_written / b))
        return tuple(dataclasses.replace(kind, launches=kind.launches * b) for kind in one)
    sweeps = _jacobi_sweeps(k)
    blocks = max(2, math.ceil(k / JACOBI_BLOCK))
    blocks += blocks % 2
    pairs = blocks // 2
    rounds = sweeps * (blocks - 1)      # every sweep pairs each block with every other once
    pair_cols = 2 * JACOBI_BLOCK
    # The Gram matrix of each column pair (one-sided) or the pair's rows (two-sided) over the k rows, and
    # each rotation of the pair's columns: a (k x 32) by (32 x 32) product per pair, on one SM each.
    pair_flops = 2.0 * k * pair_cols * pair_cols
    pair_bytes = 2.0 * k * pair_cols * elem
    gram = SolverKernel("Gram of the column pairs (svd_row_rotate / row_rotate)", rounds, ctas=b * pairs,
                        flops=b * pairs * pair_flops, bytes=b * pairs * pair_bytes, serial_flops=pair_flops)
    solve = _jacobi_block_solve(b * pairs, rounds, two_sided=not jacobi_svd)
    rotations = 2      # A and V (one-sided); the pair's columns, then its rows (two-sided)
    rotate = SolverKernel("rotate the pairs' columns (svd_column_rotate / column_rotate, row_rotate phase 2)",
                          rotations * rounds, ctas=b * pairs, flops=b * pairs * pair_flops,
                          bytes=b * pairs * pair_bytes, serial_flops=pair_flops)
    # After each sweep the off-diagonal norm (two kernels) is copied to the host to test convergence.
    check = SolverKernel("convergence test (offA_stage1/2, MemcpyD2H)", 3 * sweeps,
                         reduce_levels=math.log2(QR_BLOCK_ROWS), grid_steps=1)
    fixed = SolverKernel("set-up and ordering (norms, scaling, ordering, sort, permutation)",
                         JACOBI_FIXED_LAUNCHES, reduce_levels=math.log2(QR_BLOCK_ROWS))
    out = [gram, solve, rotate, check, fixed]
    if jacobi_svd and p > k:
        # gesvdj of a tall matrix first reduces it to R (k x k) by Householder QR, a column at a time
        # (`geqr2_smem*`, LAPACK's geqr2): per column the norm of the column (dlarfg: a block tree, then the
        # square root and the scaling, 8 dependent operations) and the reflector's product with the panel's
        # other columns (dlarf: a tree per column, side by side, then the rank-1 update): two trees and two
        # shared-memory steps. A panel taller than a block (`geqr2_smem_domino*`, a block per column in the
        # capture) joins each tree across the blocks: two grid reductions per column
        # (`REDUCTIONS_PER_COLUMN["geqrf"]`). Then it forms U = Q U_R (blocked: larft + GEMMs; below one
        # block: two kernels per reflector).
        spread = p > QR_BLOCK_ROWS
        reductions = REDUCTIONS_PER_COLUMN["geqrf"] * k
        out.append(SolverKernel("Householder QR of the tall matrix (geqr2)", 1,
                                ctas=b * max(1, math.ceil(p / QR_BLOCK_ROWS)), flops=b * 2.0 * p * k * k,
                                bytes=b * 2.0 * p * k * elem, smem_steps=2.0 * k, alu_ops=8.0 * k,
                                reduce_levels=0.0 if spread else reductions * math.log2(QR_BLOCK_ROWS),
                                grid_reductions=reductions if spread else 0.0))
        q_flops = b * 4.0 * p * k * k
        if k >= HOUSEHOLDER_BLOCK:
            nblk = math.ceil(k / HOUSEHOLDER_BLOCK)
            out.append(SolverKernel("U = Q U_R, blocked (larft + GEMMs)", 4 * nblk, ctas=64,
                                    flops=q_flops / (4 * nblk), bytes=b * 2.0 * p * k * elem / nblk,
                                    smem_steps=HOUSEHOLDER_BLOCK))
        else:
            out.append(SolverKernel("U = Q U_R, a reflector at a time (ormtr_gemv + ormtr_gerc)", 2 * k,
                                    ctas=b * max(1, math.ceil(p / 16)), flops=q_flops / (2 * k),
                                    bytes=b * 2.0 * p * k * elem / k, reduce_levels=math.log2(16)))
    return tuple(out)
