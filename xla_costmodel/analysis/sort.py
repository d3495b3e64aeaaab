"""How XLA:GPU runs a sort (an internal API for the sort model and launch counts): the sort an
instruction runs (`sort_of`), whether CUB runs it as sort_rewriter decides (`cub_sort_decision`,
`cub_sort_operands`, `cub_float_keys`) and CUB's radix passes (`cub_radix_plan`), else XLA's own
bitonic kernels (`bitonic_plan`, `UNROLL`: XLA's unroll factor); `SortPlan`: the kernels of one
sort with the facts they came from.
"""

from ._sort import UNROLL as UNROLL
from ._sort import SortPlan as SortPlan
from ._sort import bitonic_plan as bitonic_plan
from ._sort import cub_float_keys as cub_float_keys
from ._sort import cub_radix_plan as cub_radix_plan
from ._sort import cub_sort_decision as cub_sort_decision
from ._sort import cub_sort_operands as cub_sort_operands
from ._sort import sort_of as sort_of
