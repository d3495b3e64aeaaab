"""Library calls XLA has no model for (cuSolver, cuBLAS triangular solves, cuDNN, CUB), priced per routine.

XLA's cost analysis reports these custom calls as unknown. Here one declared
form prices every routine of `analysis._library.LIBRARY_ROUTINES` except the
cuBLAS GEMM (priced by the measured GEMM table, `models._gemm_table`):

    time = launch + steps · step_s + flops / (flops_efficiency · peak) + bytes / (bandwidth_efficiency · bandwidth)

- `launch`: the device's kernel launch overhead, times `launch_multiple` (a
  library call starts several kernels);
- `steps`: the routine's serial dependency chain (`LibraryWork.steps`: a
  column per step for LU / Cholesky / triangular solves / tridiagonalisation,
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
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
from dataclasses import dataclass
from importlib import resources

from ..analysis._library import LibraryWork, library_work
from ._base import KernelEstimate, dominant_bound

__all__ = ["LibraryConstants", "gemm_table_estimate", "library_call_estimate", "library_call_or_gemm",
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
    """What every GPU model asks for a custom call: a cuBLAS GEMM from the measured GEMM table
    (`gemm_method`: `"log-grid"` or `"xla"`), any other library routine from the library-call model;
    None for a custom call neither prices."""
    if kernel.opcode != "custom-call":
        return None
    est = gemm_table_estimate(kernel, device, gemm_method)
    return est if est is not None else library_call_estimate(kernel, device)
