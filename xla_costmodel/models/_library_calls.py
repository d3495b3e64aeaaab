"""Library calls XLA has no model for (cuSolver, cuBLAS triangular solves, cuDNN, CUB), priced per routine.

XLA's cost analysis reports these custom calls as unknown. Here one declared
form prices every routine of `analysis._library.LIBRARY_ROUTINES` except the
cuBLAS GEMM (priced by the measured GEMM table, `models._gemm_table`):

    time = launch + steps · step_s + flops / (flops_efficiency · peak) + bytes / (bandwidth_efficiency · bandwidth)

- `launch`: the device's kernel launch overhead, times `launch_multiple` (a
  library call starts several kernels);
- `steps`: the routine's serial dependency chain (`LibraryWork.steps`: a
  factorisation's reductions across the matrix, one per column for LU, four
  for syevd's tridiagonalisation; a row per step for triangular solves;
  n·⌈log2 n⌉ rounds for Jacobi SVD, a pass per key byte for radix sorts),
  `step_s` the time of one step;
- `peak`: the matrix-unit rate of the dtype for GEMM-like work
  (convolutions), else the vector FP32 peak; `bandwidth`: DRAM bandwidth.

The constants are fitted on real measurements of one GPU
(`fit.fit_library_constants`, `scripts/fit_library_calls.py`) and shipped as
data, `devices/data/library_calls_<gpu>.json`, with the rows and the sources
each set was fitted on. Each routine carries the constants fitted on every
row (`all`) and, per source of the rows, the constants fitted without that
source (`leave_source_out`): `leaving_source_out(source)` makes every model
use those, to score a program of that source honestly. A routine seen in one
source only has no honest constants of its own: its held-out set comes from
the other routines of its family (`honest: false` in the file).

A device without constants of its own gets the form with efficiency 1, one
launch, and no step time (a lower bound), with a note that says so.

Three cuSolver routines measured in one source only (jax), so with no honest
held-out constants, are priced from the kernels they launch instead
(`solver_estimate`; nothing of theirs is fitted, and a reduction across a
kernel's blocks takes LU's fitted step time, `grid_reduction_s`): `potrf` (one tiled kernel), `gesvdj`
(block Jacobi sweeps, after a QR when the matrix is not square) and `syevd` on
n <= 32 (jaxlib runs Jacobi `syevj` there); so is cuBLAS's triangular solve,
whose sources each ran one kernel only (lineax one right-hand side: trsv; jax
many: the blocked trsm kernel), so that each held-out set priced the other
kernel. `analysis.library.solver_kernels` lists their kernels. `scripts/bench_library_calls.py --kernels` sets each
kind beside the capture's kernels of that phase.

A cuDNN convolution that is neither grouped nor single-feature runs as an
implicit GEMM (the capture's `*_implicit_gemm_*` kernels): it is priced as that
GEMM by the device's measured GEMM table, as a cuBLAS call is
(`conv_gemm_estimate`); the direct kernels (depthwise, one output feature)
keep the fitted form.

Two library-style kernels are priced from their structure instead (`fft_estimate`, `topk_estimate`),
each kernel the largest of its traffic at the memory bandwidth, its flops at the FP32 vector peak and its
latency path (`models._gpu_latency`), plus its launch; nothing is fitted. (XLA's HBM curve for dot fusions,
`models._dot_fusion`, is not used: below a few MB it gives 18 GB/s at 100 kB, 6.5 us for a kernel the
capture times at 1.5 us.)

- **cuFFT** (an `fft` instruction; XLA's `FftThunk`): one kernel per transformed dimension, last first, as
  the H100 capture shows for 64- and 512-point 2-D transforms (a length above 4096 is assumed to take
  ceil(log2 n / 12) kernels: cuFFT's one-kernel sizes); the first reads the input, the last writes the
  output, the others read and write the complex intermediate. A kernel's latency path is a load and a
  store (HBM) and its radix-8 stages (`EPT<8>` in cuFFT's kernel names) in shared memory; its flops
  5 n log2 n per complex transform (half for a real one) at the FP32 vector peak. An IRFFT first copies
  its input (cuFFT's C2R overwrites it: a `MemcpyD2D` in the capture); an inverse transform ends with a
  cuBLAS `scal` of the output by 1/n.
- **XLA's TopK kernel** (`__gpu$TopK`, `topk_kernel.cu.h`): one block per row (`models._launch.topk_launch`);
  each thread keeps its slice's top K (k rounded up to a power of two) sorted in registers and inserts
  every element of its slice in turn (a load, then a compare; the loop carries one load in flight per
  thread); then a warp merges its lanes' lists over 5 shuffle rounds (K shuffles and insertions each),
  lane 0 writes them to shared memory, and one warp merges the warps' lists the same way and writes k
  results. Rows beyond the resident blocks run in waves.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
from dataclasses import dataclass
from importlib import resources

import math

from ..analysis.library import custom_call_target, int_list_attribute
from ..analysis.library import LibraryWork, conv_gemm_dims, library_work, solver_kernels
from ..analysis.shapes import elements, first_array
from ..hlo import PRIMITIVE_BITS
from ._base import KernelEstimate, dominant_bound
from ._gpu_latency import ALU_LATENCY_CYCLES, BARRIER_CYCLES, HBM_LATENCY_CYCLES, L2_LATENCY_CYCLES, SMEM_LATENCY_CYCLES
from ._launch import TOPK_TARGET, topk_launch

__all__ = ["LibraryConstants", "conv_gemm_estimate", "fft_estimate", "grid_reduction_s", "solver_estimate", "gemm_table_estimate", "library_call_estimate", "library_call_or_gemm",
           "topk_estimate",
           "library_constants", "leaving_source_out"]

#: Data files of fitted constants, by device preset name.
_FILES = {"h100-sxm": "library_calls_h100.json"}

# A routine the device's data lacks is priced with the constants of the one it would run instead: a
# LAPACK SVD (`gesdd`, what jax lowers `svd` to on a CPU, the laptop path) as the GPU's Jacobi SVD.
_SIBLINGS = {"gesvd": "gesvdj", "gesvdj": "gesvd"}

_HELD_OUT: contextvars.ContextVar[str | None] = contextvars.ContextVar("library_held_out_source", default=None)


@contextlib.contextmanager
def leaving_source_out(source: str | None):
    """Within the block, every model prices library calls with the constants fitted without `source`'s
    rows (the honest price of a program of that source); None: the constants fitted on every row."""
    token = _HELD_OUT.set(source)
    try:
        yield
    finally:
        _HELD_OUT.reset(token)


@dataclass(frozen=True, slots=True)
class LibraryConstants:
    """The fitted constants of one routine on one GPU (module docstring).

    **Attributes:** `launch_multiple`, `step_s`, `flops_efficiency`,
    `bandwidth_efficiency` (0 means the term is left out), `fitted_on` (what
    rows: a description), `honest` (False: no rows of the routine outside the
    held-out source).
    """

    launch_multiple: float = 1.0
    step_s: float = 0.0
    flops_efficiency: float = 1.0
    bandwidth_efficiency: float = 1.0
    fitted_on: str = "not fitted: efficiency 1, one launch, no step time"
    honest: bool = True

    @staticmethod
    def from_dict(d: dict, fitted_on: str = "", honest: bool = True) -> "LibraryConstants":
        return LibraryConstants(float(d.get("launch_multiple", 1.0)), float(d.get("step_s", 0.0)),
                                float(d.get("flops_efficiency", 0.0)), float(d.get("bandwidth_efficiency", 0.0)),
                                fitted_on or str(d.get("fitted_on", "")), honest)


@functools.cache
def _load(device_name: str) -> dict | None:
    fname = _FILES.get(device_name)
    if fname is None:
        return None
    text = resources.files("xla_costmodel.devices").joinpath("data", fname).read_text()
    return json.loads(text)


def library_constants(device, routine: str, held_out_source: str | None = None) -> LibraryConstants | None:
    """The constants of `routine` on `device`, fitted on every row or without `held_out_source`'s
    (default: the source `leaving_source_out` set); None when the device has no fitted file or the
    file has no such routine."""
    data = _load(device.name)
    if data is None:
        return None
    routines = data.get("routines", {})
    entry = routines.get(routine) or routines.get(_SIBLINGS.get(routine, ""))
    if entry is None:
        return None
    source = held_out_source if held_out_source is not None else _HELD_OUT.get()
    if source is not None and source in entry.get("sources", ()):
        # The rows of `source` trained `all`: only constants fitted without them are honest, if any.
        h = entry.get("leave_source_out", {}).get(source)
        if h is None:
            return None
        return LibraryConstants.from_dict(h["constants"], h.get("fitted_on", ""), bool(h.get("honest", True)))
    return LibraryConstants.from_dict(entry["all"]["constants"], entry["all"].get("fitted_on", ""), True)


def _peak(device, work: LibraryWork) -> float:
    if work.matrix_flops:
        return device.matmul_flops_per_s(work.dtype)
    return device.peak_fp32_flops_per_s


def library_call_estimate(kernel, device) -> KernelEstimate | None:
    """The price of a library custom call on a GPU (module docstring), or None: not a library routine
    this model prices (not a custom call, a cuBLAS GEMM, or counts the operands do not give)."""
    if kernel.opcode != "custom-call" or device.kind != "gpu":
        return None
    work = library_work(kernel)
    if work is None or work.routine == "gemm":
        return None
    structural = solver_estimate(work, device) or conv_gemm_estimate(kernel, device, work)
    if structural is not None:
        return structural
    constants = library_constants(device, work.routine)
    fitted = constants is not None
    if constants is None:
        constants = LibraryConstants()
    launch = device.kernel_launch_overhead_s * constants.launch_multiple
    serial = work.steps * constants.step_s
    compute = work.flops / (constants.flops_efficiency * _peak(device, work)) if constants.flops_efficiency > 0 else 0.0
    memory = (work.bytes_accessed / (constants.bandwidth_efficiency * device.memory_bandwidth_bytes_per_s)
              if constants.bandwidth_efficiency > 0 else 0.0)
    # The serial chain is latency, as a launch is: it goes with the launch term.
    time = launch + serial + compute + memory
    details = {
        "emitter": "library", "source": f"library call model ({'fitted: ' + constants.fitted_on if fitted else constants.fitted_on})",
        "routine": work.routine, "library": work.library, "flops": work.flops, "matmul_flops":
        work.flops if work.matrix_flops else 0.0, "bytes_read": work.bytes_read, "bytes_written": work.bytes_written,
        "bytes_accessed": work.bytes_accessed, "steps": work.steps, "serial_s": serial, "exec_s": time - launch,
        "honest": constants.honest,
    }
    note = "" if fitted else f"no fitted library constants for {device.name}: a lower bound"
    return KernelEstimate(compute_s=compute, memory_s=memory, launch_s=launch + serial, time_s=time,
                          bound=dominant_bound(compute, memory, launch + serial), note=note, details=details)


def gemm_table_estimate(kernel, device, method: str = "log-grid", *, scaled: bool = True) -> KernelEstimate | None:
    """A cuBLAS GEMM call priced by the device's measured GEMM table (`models._gemm_table`), or None
    (not a cuBLAS GEMM, or no table for the device or the dtype). The table timed the GEMM kernels
    themselves: no launch overhead is added, as in XLA's SoL estimator. With `scaled`, the time is
    multiplied by the device's fitted `table_scale` of the `gemm` routine, where it has one: on the
    H100 measured here, cuBLAS's TF32 kernels run about 1.3x faster than XLA's sm_90 table says for
    the same (b, m, n, k) and dtype key."""
    from ..devices import xla_table_key
    from ._gemm_table import gemm_interpolator, gemm_spec, is_cublas_gemm

    if not is_cublas_gemm(kernel) or device.kind != "gpu":
        return None
    spec = gemm_spec(kernel)
    key = xla_table_key(device)
    interp = gemm_interpolator(key, method) if key and spec is not None else None
    t = interp.time_s(spec) if interp is not None else None
    if t is None or not t > 0:
        return None
    table_s = t
    if scaled:
        fitted = _load(device.name)
        scale = _gemm_scale(device) if fitted is not None else None
        if scale is not None:
            t *= scale
    work = library_work(kernel)
    memory = work.bytes_accessed / device.memory_bandwidth_bytes_per_s if work is not None else 0.0
    details = {"emitter": "library", "source": f"gemm table {key} ({method})", "routine": "gemm", "library": "cublas",
               "gemm": (spec.b, spec.m, spec.n, spec.k, spec.dtype_key), "table_s": table_s, "exec_s": t,
               "flops": spec.flops, "matmul_flops": spec.flops,
               "bytes_accessed": work.bytes_accessed if work is not None else float("nan")}
    compute = max(t - memory, 0.0)
    return KernelEstimate(compute_s=compute, memory_s=min(memory, t), launch_s=0.0, time_s=t,
                          bound=dominant_bound(compute, min(memory, t), 0.0), details=details)


def conv_gemm_estimate(kernel, device, work: LibraryWork | None = None) -> KernelEstimate | None:
    """A cuDNN convolution call priced as the implicit GEMM it runs (`analysis.library.conv_gemm_dims`)
    by the device's measured GEMM table and its `gemm` table scale (held out as `gemm_table_estimate`'s),
    or None: a grouped or single-feature convolution (a direct kernel: the fitted form prices it), no
    table for the device or the dtype.

    The table's GEMMs are 256 to 4096 a side, and it prices a side below that as the smallest measured
    (a cuBLAS tile left part empty). A convolution's GEMM is often skinny (64 features over 32k pixels)
    and cuDNN tiles it to fit: one side below the grid and the other above it are folded into the grid
    with the same output elements, the same k and so the same flops (`_fold_into_grid`)."""
    from ..devices import xla_table_key
    from ._gemm_table import GemmSpec, gemm_interpolator

    if device.kind != "gpu":
        return None
    dims = conv_gemm_dims(kernel)
    key = xla_table_key(device)
    interp = gemm_interpolator(key) if dims is not None and key else None
    if interp is None:
        return None
    work = work if work is not None else library_work(kernel)
    m, n, k = dims
    lo = min(interp.axes[1][0], interp.axes[2][0]) if hasattr(interp, "axes") else 0
    m, n = _fold_into_grid(m, n, lo)
    dtype = work.dtype
    t = interp.time_s(GemmSpec(1, m, n, k, dtype, dtype, dtype))
    if t is None or not t > 0:
        return None
    table_s = t
    scale = _gemm_scale(device) if _load(device.name) is not None else None
    if scale is not None:
        t *= scale
    memory = min(work.bytes_accessed / device.memory_bandwidth_bytes_per_s, t)
    details = {"emitter": "library", "source": f"cuDNN implicit GEMM, gemm table {key}", "routine": work.routine,
               "library": "cudnn", "gemm": (1, m, n, k, dtype), "table_s": table_s, "exec_s": t,
               "flops": work.flops, "matmul_flops": work.flops, "bytes_accessed": work.bytes_accessed}
    return KernelEstimate(compute_s=t - memory, memory_s=memory, launch_s=0.0, time_s=t,
                          bound=dominant_bound(t - memory, memory, 0.0), details=details)


def _fold_into_grid(m: int, n: int, lo: int) -> tuple[int, int]:
    """`(m, n)` with the long side's excess over `lo` moved to a short side below `lo`, m·n kept: a
    32768 x 64 output as 8192 x 256; 1024 x 64 as 256 x 256; a shape with both sides below `lo` as is."""
    if n < lo < m:
        f = min(lo / n, m / lo)
        return max(1, round(m / f)), max(1, round(n * f))
    if m < lo < n:
        f = min(lo / m, n / lo)
        return max(1, round(m * f)), max(1, round(n / f))
    return m, n


def _gemm_scale(device) -> float | None:
    data = _load(device.name) or {}
    entry = data.get("routines", {}).get("gemm")
    if entry is None:
        return None
    source = _HELD_OUT.get()
    if source is not None and source in entry.get("sources", ()):
        held = entry.get("leave_source_out", {}).get(source)
        return float(held["constants"]["table_scale"]) if held else None
    return float(entry["all"]["constants"]["table_scale"])


def library_call_or_gemm(kernel, device, gemm_method: str = "log-grid") -> KernelEstimate | None:
    """What every GPU model asks for a custom call or an `fft`: a cuBLAS GEMM from the measured GEMM table
    (`gemm_method`: `"log-grid"` or `"xla"`), cuFFT and XLA's TopK kernel from their structure, any other
    library routine from the library-call model; None for an instruction none of them prices."""
    if kernel.opcode == "fft":
        return fft_estimate(kernel, device)
    if kernel.opcode != "custom-call":
        return None
    if custom_call_target(kernel) == TOPK_TARGET and device.kind == "gpu":
        return topk_estimate(kernel, device)
    est = gemm_table_estimate(kernel, device, gemm_method)
    return est if est is not None else library_call_estimate(kernel, device)


# --------------------------------------------------------------------------- cuSolver from its kernels

# One dependent operation of a solver kernel's critical path, in cycles (`models._gpu_latency`, not fitted):
_SMEM_STEP_CYCLES = 2 * SMEM_LATENCY_CYCLES + ALU_LATENCY_CYCLES + BARRIER_CYCLES   # load, op, store, barrier
_REDUCE_LEVEL_CYCLES = SMEM_LATENCY_CYCLES + ALU_LATENCY_CYCLES                     # a shuffle and its add
_GRID_STEP_CYCLES = 2 * L2_LATENCY_CYCLES + BARRIER_CYCLES                          # a flag through L2


#: The routine whose fitted step is one reduction across a kernel's blocks (`analysis._library.REDUCTIONS_PER_COLUMN`:
#: LU's column has one, its pivot search), measured in more than one source.
REDUCTION_ROUTINE = "getrf"


def grid_reduction_s(device) -> tuple[float, str]:
    """The time of one reduction across all the blocks of a cuSolver panel kernel, broadcast back (the
    step of a factorisation's column, `SolverKernel.grid_reductions`), and where it comes from: LU's fitted
    step time (`REDUCTION_ROUTINE`, held out as `leaving_source_out` says), or, on a device without
    fitted constants, its latency path: a block tree and two L2 round trips (`models._gpu_latency`).

    On the H100 LU's step is 1.6 us, four times that latency path (0.41 us): the same time per reduction
    prices QR's panel (two per column: 3.1-3.35 us a column in the capture's `geqr2_smem_domino` kernels)
    and syevd's tridiagonalisation (four per column)."""
    constants = library_constants(device, REDUCTION_ROUTINE)
    if constants is not None and constants.step_s > 0:
        return constants.step_s, f"{REDUCTION_ROUTINE}'s fitted step ({constants.fitted_on})"
    cycles = math.log2(256) * _REDUCE_LEVEL_CYCLES + _GRID_STEP_CYCLES
    return cycles / (device.clock_rate_ghz * 1e9), "latency path (no fitted constants)"


def solver_estimate(work: LibraryWork, device) -> KernelEstimate | None:
    """A cuSolver or cuBLAS solver call priced from the kernels it launches (`analysis.library.solver_kernels`:
    potrf, gesvdj, Jacobi syevd, trsm), or None for a routine without that structure (the fitted form).

    Each kernel kind costs, per launch, the launch overhead plus the largest of its traffic and its flops
    at the memory bandwidth and the FP32 vector peak of the SMs its blocks occupy (a 16-block Jacobi
    kernel gets 16/132 of an H100's), and its critical path: a load from HBM and a store, shared-memory
    steps, reduction levels, dependent arithmetic and L2 round trips at the latencies of
    `models._gpu_latency`, reductions across the kernel's blocks at `grid_reduction_s`, and the FMAs one
    SM issues in turn at that SM's rate. Only that reduction time is fitted, on LU's rows (held out as
    `leaving_source_out` says): the fitted constants of potrf, gesvdj and syevd came from one source only
    (jax), and each source ran one of trsm's two kernels only, so no honest held-out set exists for them.
    """
    kernels = solver_kernels(work) if device.kind == "gpu" else None
    if kernels is None:
        return None
    launch = device.kernel_launch_overhead_s
    clock = device.clock_rate_ghz * 1e9
    sm_flops = device.peak_fp32_flops_per_s / max(device.core_count, 1)
    reduction_s, reduction_from = (grid_reduction_s(device) if any(k.grid_reductions for k in kernels)
                                   else (0.0, ""))
    compute = memory = latency = launches = 0.0
    per_kind = []
    for kind in kernels:
        # A kernel of few blocks gets the share of the bandwidth and of the FP32 peak of the SMs they occupy.
        share = min(max(kind.ctas, 1), device.core_count) / device.core_count
        mem = kind.bytes / (device.memory_bandwidth_bytes_per_s * share)
        fl = kind.flops / (device.peak_fp32_flops_per_s * share)
        # Every kernel's path starts with a load from global memory and ends with a store (as cuFFT's).
        path = (2 * HBM_LATENCY_CYCLES + kind.smem_steps * _SMEM_STEP_CYCLES
                + kind.reduce_levels * _REDUCE_LEVEL_CYCLES + kind.alu_ops * ALU_LATENCY_CYCLES
                + kind.grid_steps * _GRID_STEP_CYCLES) / clock + kind.serial_flops / sm_flops \
            + kind.grid_reductions * reduction_s
        t = max(mem, fl, path)
        memory += kind.launches * mem
        compute += kind.launches * (t - mem) if fl >= path else 0.0
        latency += kind.launches * (t - mem) if fl < path else 0.0
        launches += kind.launches
        per_kind.append((kind.name, kind.launches, kind.launches * (launch + t)))
    time = launches * launch + memory + compute + latency
    source = ("solver priced from its kernels (grid reductions at " + reduction_from + ")" if reduction_from
              else "solver priced from its kernels (not fitted)")
    details = {"emitter": "library", "source": source,
               "routine": work.routine, "library": work.library, "flops": work.flops, "matmul_flops": 0.0,
               "bytes_read": work.bytes_read, "bytes_written": work.bytes_written,
               "bytes_accessed": work.bytes_accessed, "steps": work.steps, "launches": int(launches),
               "kernel_times_s": per_kind, "exec_s": time - launches * launch, "honest": True}
    return KernelEstimate(compute_s=compute, memory_s=memory, launch_s=launches * launch + latency, time_s=time,
                          bound=dominant_bound(compute, memory, launches * launch + latency), details=details)


# --------------------------------------------------------------------------- cuFFT and XLA's TopK kernel

FFT_ONE_KERNEL_LOG2 = 12    # cuFFT's single-kernel transform lengths: up to 4096 points (assumed)
FFT_RADIX_LOG2 = 3          # radix-8 stages (`EPT<8>`)


def _structured(kernels: list[tuple[str, float, float, float, float]], device, details: dict,
                note: str = "") -> KernelEstimate:
    """Sum of kernels `(name, bytes read, bytes written, flops, latency cycles)`: each the launch plus the
    largest of traffic at the memory bandwidth, flops at the FP32 vector peak and the latency path."""
    launch = device.kernel_launch_overhead_s
    clock = device.clock_rate_ghz * 1e9
    memory = rest = 0.0
    per_kernel = []
    for name, read, written, flops, cycles in kernels:
        traffic = read + written
        mem = traffic / device.memory_bandwidth_bytes_per_s
        t = max(mem, flops / device.peak_fp32_flops_per_s, cycles / clock)
        memory += mem
        rest += t - mem                  # flops or latency beyond the traffic
        per_kernel.append((name, launch + t))
    launches = launch * len(kernels)
    time = launches + memory + rest
    details = {**details, "kernels": len(kernels), "launches": len(kernels), "kernel_times_s": per_kernel,
               "exec_s": time - launches}
    return KernelEstimate(compute_s=rest, memory_s=memory, launch_s=launches, time_s=time,
                          bound=dominant_bound(rest, memory, launches), note=note, details=details)


def fft_estimate(fft, device) -> KernelEstimate | None:
    """cuFFT's kernels for an `fft` instruction on a GPU (module docstring); None off a GPU."""
    if fft.opcode != "fft" or device.kind != "gpu":
        return None
    kind = str(fft.attribute("fft_type", "FFT")).upper()
    lengths = [int(n) for n in int_list_attribute(fft, "fft_length", ())] or [1]
    src, dst = first_array(fft.operands[0].shape), first_array(fft.shape)
    in_bytes, out_bytes = src.byte_size, dst.byte_size
    work = dst.byte_size if kind != "IRFFT" else src.byte_size          # the complex array
    points = math.prod(lengths)
    transforms = max(elements(dst if kind != "IRFFT" else src) // max(
        math.prod(lengths[:-1]) * (lengths[-1] // 2 + 1 if kind in ("RFFT", "IRFFT") else lengths[-1]), 1), 1)
    real = 0.5 if kind in ("RFFT", "IRFFT") else 1.0
    flops = 5.0 * transforms * points * math.log2(max(points, 2)) * real
    passes = []
    for n in reversed(lengths):
        log2n = max(math.ceil(math.log2(max(n, 2))), 1)
        pieces = max(1, math.ceil(log2n / FFT_ONE_KERNEL_LOG2))
        for _ in range(pieces):
            passes.append(math.ceil(log2n / pieces / FFT_RADIX_LOG2))
    kernels = []
    if kind == "IRFFT":
        kernels.append(("input copy", in_bytes, in_bytes, 0.0, 0.0))
    for i, stages in enumerate(passes):
        read = in_bytes if i == 0 else work
        written = out_bytes if i == len(passes) - 1 else work
        cycles = 2 * HBM_LATENCY_CYCLES + stages * (2 * SMEM_LATENCY_CYCLES + BARRIER_CYCLES)
        kernels.append((f"fft pass {i + 1}", read, written, flops / len(passes), cycles))
    if kind in ("IFFT", "IRFFT"):
        kernels.append(("scale by 1/n", out_bytes, out_bytes, 0.0, HBM_LATENCY_CYCLES))
    details = {"emitter": "library", "source": "cuFFT, priced from its kernels", "routine": "fft",
               "library": "cufft", "fft_type": kind, "flops": flops, "bytes_accessed": in_bytes + out_bytes}
    return _structured(kernels, device, details)


def topk_estimate(call, device) -> KernelEstimate:
    """XLA's TopK kernel (`__gpu$TopK`) on a GPU (module docstring)."""
    blocks, threads, what = topk_launch(call)
    src = first_array(call.operands[0].shape)
    n = src.dims[-1] if src.dims else 1
    k = max(first_array(call.shape).dims[-1] if first_array(call.shape).dims else 1, 1)
    top = 1 << (k - 1).bit_length()                              # the kernel's K: k rounded up
    elem = max(PRIMITIVE_BITS[src.element_type] // 8, 1)
    slice_ = math.ceil(n / threads)
    merge = top * (SMEM_LATENCY_CYCLES + top * ALU_LATENCY_CYCLES)   # one round: K shuffles and insertions
    warps = max(threads // 32, 1)
    cycles = (top * top // 2 * ALU_LATENCY_CYCLES                  # sort the first K
              + slice_ * (HBM_LATENCY_CYCLES + 2 * ALU_LATENCY_CYCLES)
              + 5 * merge + SMEM_LATENCY_CYCLES + BARRIER_CYCLES
              + max(warps - 1, 0).bit_length() * merge + k * ALU_LATENCY_CYCLES + HBM_LATENCY_CYCLES)
    resident = device.core_count * max(1, (device.threads_per_core_limit or 2048) // threads)
    waves = math.ceil(blocks / resident)
    read = elements(src) * elem
    written = blocks * k * (elem + 4)
    details = {"emitter": "library", "source": "XLA's TopK kernel, priced from its structure", "routine": "topk",
               "library": "xla", "topk": what, "blocks": blocks, "threads": threads, "waves": waves,
               "bytes_accessed": read + written}
    return _structured([("topk", read, written, 0.0, waves * cycles)], device, details)
