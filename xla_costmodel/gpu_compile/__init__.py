"""XLA:GPU's own compiler on a machine without a GPU: `compile_for_gpu(fn, *args, device="h100-sxm")` gives the
module XLA:GPU builds for a GPU preset (its fusions, Triton tiles, library calls, loop trip counts), through the
compile-only devices of jax's CUDA plugin (`pip install 'xla_costmodel[gpu-compile]'`). Without the plugin,
`GpuCompileUnavailable` says what to install; when XLA itself fails, `GpuCompileError` carries its message.
Kernels are not assembled into machine code (a compile-only executable never runs): `xla_ptxas()` lets
NVIDIA's `ptxas` assemble them as on a GPU."""

from ._compile import DUMP_PASS_RE as DUMP_PASS_RE
from ._compile import GPU_COMPILE_EXTRA as GPU_COMPILE_EXTRA
from ._compile import GpuCompileError as GpuCompileError
from ._compile import GpuCompileResult as GpuCompileResult
from ._compile import GpuCompileUnavailable as GpuCompileUnavailable
from ._compile import compile_for_gpu as compile_for_gpu
from ._compile import gpu_compile_available as gpu_compile_available
from ._compile import gpu_compile_unavailable_reason as gpu_compile_unavailable_reason
from ._compile import lower_for_gpu as lower_for_gpu
from ._compile import xla_ptxas as xla_ptxas

__all__ = [
    "DUMP_PASS_RE",
    "GPU_COMPILE_EXTRA",
    "GpuCompileError",
    "GpuCompileResult",
    "GpuCompileUnavailable",
    "compile_for_gpu",
    "gpu_compile_available",
    "gpu_compile_unavailable_reason",
    "lower_for_gpu",
    "xla_ptxas",
]
