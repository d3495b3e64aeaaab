"""The pieces the GPU models price kernels with, read directly (an internal API for the benchmarks and
diagnostics that score them one by one; users get them through `get_model("xla-gpu")`,
`get_model("xla-gpu-tables")` and the tiled model).

- GEMMs: `GemmSpec`, `GemmTableInterpolator` (XLA's measured GEMM table), `is_cublas_gemm`.
- Collectives: `CollectiveTable`, `describe_collective`.
- Library calls: `gemm_table_estimate` (a cuBLAS GEMM call priced by the measured GEMM table), `library_calls` (the module: its constants per GPU), `leaving_source_out(source)`
  (the constants fitted without one source, for scoring on it).
- Kernel estimates: `dominant_bound` (which of compute, memory and launch bounds a kernel),
  `warn_unpriced` (the warning for a kernel a model cannot price); a Triton fusion's `best_tilings`.
- A module's kernels: `kernel_sites` (each launch site and its trip count), `is_free_site` (one that
  runs no kernel), `module_time` (the module's time summed over them).
- A Triton GEMM's pipelined loop: `pipelined_loop_time`, and `effective_hbm_bandwidth` for a transfer's size.
"""

from . import _library_calls as library_calls
from ._analyze import is_free_site as is_free_site
from ._analyze import kernel_sites as kernel_sites
from ._analyze import module_time as module_time
from ._base import dominant_bound as dominant_bound
from ._base import warn_unpriced as warn_unpriced
from ._collective_table import CollectiveTable as CollectiveTable
from ._collectives import describe_collective as describe_collective
from ._dot_fusion import effective_hbm_bandwidth as effective_hbm_bandwidth
from ._dot_fusion import pipelined_loop_time as pipelined_loop_time
from ._gemm_table import GemmSpec as GemmSpec
from ._gemm_table import GemmTableInterpolator as GemmTableInterpolator
from ._gemm_table import is_cublas_gemm as is_cublas_gemm
from ._library_calls import gemm_table_estimate as gemm_table_estimate
from ._tiled import best_tilings as best_tilings


def leaving_source_out(source):
    """`library_calls.leaving_source_out(source)`, looked up when called: a script that replaces it in
    `library_calls` (to price on every source's constants) reaches every caller of this name too."""
    return library_calls.leaving_source_out(source)
