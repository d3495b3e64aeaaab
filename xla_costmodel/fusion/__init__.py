"""Priority fusion: XLA's GPU fusion pass, simulated over our HLO graph and driven by any cost model.

- `simulate_fusion(module, device=..., model=...)`: the fused module, the
  step log and the producers left unfused (`FusionResult`); then, as XLA:GPU
  does, multi-output fusion (`multi_output=True`: siblings reading one operand
  merged, producers kept as an extra output of a consumer; `MultiOutputFusionPass`).
- `compare_with_xla(result_or_module, xla_optimized_module)`: how far a
  kernel grouping agrees with the one XLA made (adjusted Rand index).
- `RULES`: the legality rules (names used in the logs).
- `search_fusion(module, ...)`: the best legal fusion plan under a cost model
  (exact or annealed) and greedy's gap to it (`SearchResult`);
  `check_plan_validity(original, fused)`: jaxlib parser / cost analysis / CPU-run checks.
"""

from ._legality import RULES as RULES
from ._legality import LegalityChecker as LegalityChecker
from ._legality import Rejection as Rejection
from ._legality import emitter_kind as emitter_kind
from ._simulate import FusionResult as FusionResult
from ._simulate import fusible_computations as fusible_computations
from ._simulate import kernels_of as kernels_of
from ._simulate import simulate_fusion as simulate_fusion
from ._multi_output import MultiOutputFusionPass as MultiOutputFusionPass
from ._compare import FusionComparison as FusionComparison
from ._compare import compare_with_xla as compare_with_xla
from ._compare import kernel_assignment as kernel_assignment
from ._search import SearchResult as SearchResult
from ._search import search_fusion as search_fusion
from ._validity import ValidityReport as ValidityReport
from ._validity import check_plan_validity as check_plan_validity

# What `analyze(fn, ..., device=<a GPU>)` prices while jax compiles for the CPU (the front door calls it).
from ._simulate import simulated_gpu_kernels as simulated_gpu_kernels
