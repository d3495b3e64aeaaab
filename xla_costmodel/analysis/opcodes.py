"""Opcode classes, one home for each (an internal API for the models, the fusion pass, measuring and
fitting): which opcodes are elementwise (`is_elementwise`, `IS_ELEMENTWISE`), free (`is_free`,
`FREE_OPCODES`, `NO_WORK_IN_KERNEL_OPCODES`), control flow, collectives, data movement, matmuls, cuBLAS
GEMM custom calls, which calls run kernel sequences, and what XLA's fusion pass does not count as a
kernel (`NOT_KERNELS_IN_FUSION_PASS`); `passes_elementwise_roots` as XLA's GPU cost analysis has it.
"""

from ._opcodes import CALLS_KERNEL_SEQUENCES as CALLS_KERNEL_SEQUENCES
from ._opcodes import COLLECTIVE_OPCODES as COLLECTIVE_OPCODES
from ._opcodes import CONTROL_FLOW_OPCODES as CONTROL_FLOW_OPCODES
from ._opcodes import CUBLAS_GEMM_TARGETS as CUBLAS_GEMM_TARGETS
from ._opcodes import DATA_OPCODES as DATA_OPCODES
from ._opcodes import FREE_OPCODES as FREE_OPCODES
from ._opcodes import IS_ELEMENTWISE as IS_ELEMENTWISE
from ._opcodes import MATMUL_OPCODES as MATMUL_OPCODES
from ._opcodes import NOT_KERNELS_IN_FUSION_PASS as NOT_KERNELS_IN_FUSION_PASS
from ._opcodes import NO_WORK_IN_KERNEL_OPCODES as NO_WORK_IN_KERNEL_OPCODES
from ._opcodes import is_elementwise as is_elementwise
from ._opcodes import is_free as is_free
from ._opcodes import passes_elementwise_roots as passes_elementwise_roots
