"""How XLA:GPU emits a kernel (an internal API for the GPU models and the fusion pass, after XLA's
`HloFusionAnalysis`, `ir_emission_utils` and the fusion pass's own copies of them):

- The emitter and its heroes: `emitter_kind`, `fused_roots`, `is_intermediate`, `FUSION_KIND`; the fusion pass's view
  (`fusion_pass_emitter_kind`, `fusion_pass_roots`, `fusion_pass_find_hero`, ...).
- Reductions: `reduction_dimensions`, `is_real_reduction_hero`, `is_input_fusible_reduction`,
  `is_contiguous_reduction`, `reduction_is_race_free`, `ROW_REDUCTION_TILE_X`, `COLUMN_REDUCTION_TILE_Y`,
  `MIN_THREADS_X_ROW_REDUCTION`, `BATCHED_REDUCTION_RACE_FREE_BOUND`, `WARP_SIZE`.
- Transposes: `tiled_transpose`, `normalized_transpose`, `TransposeDescription`, `most_minor_non_trivial`.
- A kernel's launch: `launch_facts` / `LaunchFacts`, `warp_size`, `may_prevent_vectorization`,
  `strided_minor_slice`, `hero_search_reach` (what a fused pair's hero search could reach in one side).
- The fusion pass's limit on a fusion's IR size: `MAX_IR_SIZE`.
"""

from ._gpu import MAX_IR_SIZE as MAX_IR_SIZE
from ._emission import BATCHED_REDUCTION_RACE_FREE_BOUND as BATCHED_REDUCTION_RACE_FREE_BOUND
from ._emission import COLUMN_REDUCTION_TILE_Y as COLUMN_REDUCTION_TILE_Y
from ._emission import FUSION_KIND as FUSION_KIND
from ._emission import LaunchFacts as LaunchFacts
from ._emission import MIN_THREADS_X_ROW_REDUCTION as MIN_THREADS_X_ROW_REDUCTION
from ._emission import ROW_REDUCTION_TILE_X as ROW_REDUCTION_TILE_X
from ._emission import WARP_SIZE as WARP_SIZE
from ._emission import TransposeDescription as TransposeDescription
from ._emission import emitter_kind as emitter_kind
from ._emission import fused_roots as fused_roots
from ._emission import fusion_pass_emitter_kind as fusion_pass_emitter_kind
from ._emission import fusion_pass_find_hero as fusion_pass_find_hero
from ._emission import fusion_pass_is_intermediate as fusion_pass_is_intermediate
from ._emission import fusion_pass_is_real_reduction_hero as fusion_pass_is_real_reduction_hero
from ._emission import fusion_pass_is_tiled_transpose as fusion_pass_is_tiled_transpose
from ._emission import fusion_pass_roots as fusion_pass_roots
from ._emission import hero_search_reach as hero_search_reach
from ._emission import is_contiguous_reduction as is_contiguous_reduction
from ._emission import is_input_fusible_reduction as is_input_fusible_reduction
from ._emission import is_intermediate as is_intermediate
from ._emission import is_real_reduction_hero as is_real_reduction_hero
from ._emission import launch_facts as launch_facts
from ._emission import may_prevent_vectorization as may_prevent_vectorization
from ._emission import most_minor_non_trivial as most_minor_non_trivial
from ._emission import normalized_transpose as normalized_transpose
from ._emission import reduction_dimensions as reduction_dimensions
from ._emission import reduction_is_race_free as reduction_is_race_free
from ._emission import strided_minor_slice as strided_minor_slice
from ._emission import tiled_transpose as tiled_transpose
from ._emission import warp_size as warp_size
