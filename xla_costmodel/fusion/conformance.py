"""Our fusion pass checked against XLA:GPU's own (an internal API for `scripts/fusion_conformance.py` and
the diagnostics; `compare_with_xla` is the public check on a module already fused by XLA).

- XLA:GPU's compile with its fusion logs dumped: `compile_with_fusion_dumps`, `read_dump_dir`,
  `GpuCompileDump`; the programs it runs on: `HARNESS_PROGRAMS`.
- Agreement: `compare_fusion_logs` / `summarize` (priority fusion), `compare_multi_output` /
  `summarize_multi_output`, `compare_launch_grids` / `summarize_launch_grids` (each kernel's launch).
- The kernels XLA:GPU's pipeline makes of a module: `xla_gpu_kernels`, `xla_gpu_kernel_kind`.
"""

from ._conformance import HARNESS_PROGRAMS as HARNESS_PROGRAMS
from ._conformance import GpuCompileDump as GpuCompileDump
from ._conformance import compare_fusion_logs as compare_fusion_logs
from ._conformance import compare_multi_output as compare_multi_output
from ._conformance import compile_with_fusion_dumps as compile_with_fusion_dumps
from ._conformance import read_dump_dir as read_dump_dir
from ._conformance import summarize as summarize
from ._conformance import summarize_multi_output as summarize_multi_output
from ._launch_conformance import compare_launch_grids as compare_launch_grids
from ._launch_conformance import summarize_launch_grids as summarize_launch_grids
from ._xla_passes import xla_gpu_kernel_kind as xla_gpu_kernel_kind
from ._xla_passes import xla_gpu_kernels as xla_gpu_kernels
