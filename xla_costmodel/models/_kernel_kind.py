"""What kind of GPU kernel an instruction of an optimized module is: one home for the classification that the
learned efficiency model reads (`fit.EfficiencyModel`'s kind columns) and that `scripts/bench_gpu.py` reports
its error by (issue 31's kinds of kernel)."""

from __future__ import annotations

from ..analysis import emitter_kind, fusion_backend_kind
from ._gemm_table import is_cublas_gemm

__all__ = ["GPU_KERNEL_KINDS", "gpu_kernel_kind"]

#: The kinds, in a fixed order: Triton GEMM fusions, cuBLAS GEMMs, other Triton fusions, cuSolver (and cuBLAS
#: trsm) calls, cuDNN, cuFFT, other library calls, XLA's sort emitter, CUB sort, XLA's TopK kernel,
#: reductions, loop fusions, scatters, copies and transposes.
GPU_KERNEL_KINDS = ("gemm_triton", "gemm_cublas", "triton", "solver", "cudnn", "fft", "library_other", "sort_xla",
                    "sort_cub", "topk", "reduction", "loop", "scatter", "copy")

#: The kind of a kernel XLA's emitters run, by the emitter that runs it.
_BY_EMITTER = {"reduction": "reduction", "scatter": "scatter", "sort": "sort_xla", "transpose": "copy",
               "loop": "loop", "concatenate": "loop", "dynamic-update-slice": "loop", "library": "library_other"}


def gpu_kernel_kind(kernel) -> str:
    """`kernel`'s kind among `GPU_KERNEL_KINDS`, "" for another kind (or one the emitter analysis cannot
    read)."""
    op = kernel.opcode
    if op == "custom-call":
        target = str(kernel.attribute("custom_call_target", "") or "")
        if is_cublas_gemm(kernel):
            return "gemm_cublas"
        if target.startswith("__cudnn$"):
            return "cudnn"
        if "topk" in target.lower():
            return "topk"
        if "sort" in target.lower():
            return "sort_cub"
        if target.startswith(("cusolver", "cu_lu_pivots", "__cublas$triangularSolve")) or "solver" in target:
            return "solver"
        return "library_other"
    if op in ("cholesky", "triangular-solve"):
        return "solver"
    if op == "fft":
        return "fft"
    if op == "sort" or (op == "fusion" and kernel.fused_computation is not None
                        and any(i.opcode == "sort" for i in kernel.fused_computation.instructions)):
        return "sort_xla"  # XLA:GPU's sort emitter (a kCustom fusion of a sort and its iota)
    if op == "fusion" and kernel.fusion_kind == "kCustom":
        kind = fusion_backend_kind(kernel)
        if kind in ("__triton_gemm", "__triton_nested_gemm_fusion") or kernel.name.startswith("gemm_fusion"):
            return "gemm_triton"
        if kind.startswith("__triton"):
            return "triton"
        return "cudnn" if "cudnn" in kind else ""
    if op in ("copy", "transpose"):
        return "copy"
    try:
        emitter = emitter_kind(kernel)[0]
    except Exception:  # noqa: BLE001 - a kernel the emitter analysis cannot read is "another kind"
        return ""
    return _BY_EMITTER.get(emitter, "")
