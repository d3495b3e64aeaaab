"""Custom calls and the library routines they run (an internal API for the models that price library
calls and for fitting): what a custom call targets and says (`custom_call_target`, `backend_config`,
`fusion_backend_kind`, `int_list_attribute`), which routine it is (`library_routine`), and the work it
does (`library_work` / `LibraryWork`, the flop counts of Cholesky, triangular solve, convolution and
top-k, `real_outputs`), and the kernels cuSolver launches for a routine priced from its structure
(`solver_kernels` / `SolverKernel`).
"""

from ._frontend import backend_config as backend_config
from ._frontend import custom_call_target as custom_call_target
from ._frontend import fusion_backend_kind as fusion_backend_kind
from ._frontend import int_list_attribute as int_list_attribute
from ._library import LibraryWork as LibraryWork
from ._library import SolverKernel as SolverKernel
from ._library import cholesky_flops as cholesky_flops
from ._library import conv_gemm_dims as conv_gemm_dims
from ._library import convolution_flops as convolution_flops
from ._library import library_routine as library_routine
from ._library import library_work as library_work
from ._library import real_outputs as real_outputs
from ._library import solver_kernels as solver_kernels
from ._library import topk_flops as topk_flops
from ._library import triangular_solve_flops as triangular_solve_flops
