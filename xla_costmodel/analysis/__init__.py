"""Cost analysis with XLA's semantics: flops, transcendentals, bytes accessed, operand utilization.

- `cost_analysis(module)`: what jax's `Compiled.cost_analysis()` gives, XLA's
  totals under XLA's key names (`"flops"`, `"bytes accessed"`, ...).
- `module_cost(module)`: the same totals under Python names, plus
  trip-count-aware totals and what could not be priced.
- `instruction_cost_table(module)`: one row per instruction (a DataFrame).
- `gpu_cost_analysis(module, device)`: XLA's `GpuHloCostAnalysis`, the input
  of XLA's GPU performance model.
- `instruction_costs(module)`: every instruction's properties as a frozen
  `InstructionCost` (they add up with `+`, key by key, as XLA's do).
- `kernel_cost(instr, variant, device_profile)`: the costs of one kernel
  (a fusion or a lone instruction), detached fusions included: what cost
  models and fusion passes need.
- `module_stats(module)`: counts and totals for `xla-costmodel stats`.
- `while_trip_count(instr)`: a loop's trip count, when it can be known;
  `annotate_trip_counts(module)` records it on the `while` as XLA does (before fusion).
- `int_list_attribute(instr, name)`: an instruction's integer-list attribute
  (`dimensions`, `lhs_contracting_dims`, ...) as a tuple, `()` when absent.
- `cost_rule`: the decorator that fills the per-opcode rule registry.
- `emitter_kind(kernel)`: the XLA:GPU emitter a kernel runs on; `backend_config(instr)`,
  `fusion_backend_kind(fusion)` and `configured_tiling(fusion)`: what XLA wrote into a kernel's
  backend config (a Triton fusion's tile, warps, stages, `block_k`).
"""

from ._cost import CostAnalysisWarning as CostAnalysisWarning
from ._cost import InstructionCost as InstructionCost
from ._cost import cost_analysis as cost_analysis
from ._cost import instruction_cost_table as instruction_cost_table
from ._cost import instruction_costs as instruction_costs
from ._cost import module_cost as module_cost
from ._cost import while_trip_count as while_trip_count
from ._emission import emitter_kind as emitter_kind
from ._frontend import backend_config as backend_config
from ._frontend import fusion_backend_kind as fusion_backend_kind
from ._frontend import int_list_attribute as int_list_attribute
from ._gpu import GpuCostAnalysis as GpuCostAnalysis
from ._gpu import gpu_cost_analysis as gpu_cost_analysis
from ._kernel import KernelCost as KernelCost
from ._kernel import kernel_cost as kernel_cost
from ._opcodes import ELEMENTWISE_OPCODES as ELEMENTWISE_OPCODES
from ._opcodes import TRANSCENDENTAL_OPCODES as TRANSCENDENTAL_OPCODES
from . import _rules_math  # noqa: F401  (matrix, signal, sort and random-number rules register on import)
from ._rules import CostRule as CostRule
from ._rules import cost_rule as cost_rule
from ._rules import registered_opcodes as registered_opcodes
from ._rules import rules as rules
from ._stats import module_stats as module_stats
from ._tiling import configured_tiling as configured_tiling
from ._trip_count import annotate_trip_counts as annotate_trip_counts
# Which kind of backend optimized a module, from the marks XLA leaves (the front door warns on a mismatch).
from ._frontend import compiled_for as compiled_for
# The opcodes that run no kernel of their own but computations (while, conditional, call, ...).
from ._opcodes import CONTROL_FLOW_OPCODES as CONTROL_FLOW_OPCODES
