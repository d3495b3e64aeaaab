"""What XLA decides about one instruction before any model prices it (an internal API for benchmarks and
diagnostics that group kernels the way XLA:GPU does).

- `emitter_kind(kernel)`: (emitter, roots, heroes), as XLA:GPU's `GetEmitterFusionKind` decides them;
  `fusion_backend_kind`, `backend_config`:
  what the fusion's backend config says.
- `custom_call_target(instr)`, `CUBLAS_GEMM_TARGETS`: library calls, and which are cuBLAS GEMMs;
  `library_routine(instr)`: the library routine a custom call runs (its `LIBRARY_ROUTINES` name).
- `sort_of(instr)`: the sort an instruction runs: itself, or a fusion's sort root.
"""

from ._emission import emitter_kind as emitter_kind
from ._frontend import backend_config as backend_config
from ._frontend import custom_call_target as custom_call_target
from ._frontend import fusion_backend_kind as fusion_backend_kind
from ._library import library_routine as library_routine
from ._opcodes import CUBLAS_GEMM_TARGETS as CUBLAS_GEMM_TARGETS
from ._sort import sort_of as sort_of
