"""The fusion engine: fused computations made and grown the way XLA's `HloFusionInstruction` does it.

An internal API, above `hlo` (whose graph editing it builds on) and below the analyses, cost models
and fusion pass that use it. It edits graphs; it decides nothing (which fusions to make is `fusion`'s).

- Making fusions: `fuse` (in place), `make_fusion` (one instruction on its own), `hypothetical_fusion`
  (detached, for pricing; `discard_fusion` frees it), `default_fusion_kind`, `FusedBodyBuilder`.
- Many fusions in one computation, each O(size of the fusion): `FusionEditor`.
- Pricing a candidate by growing a large consumer for one `with` block: `trial_fusion`, `can_try_fusion`.
- What is known of a fused body as it grows: `BodyGrowth`, `body_growth`, `tracks_growth`,
  `select_in_body`; caches of bodies register with `follows_growths` / `per_body_state`, and
  `release_body_state` empties them of a finished module; `discard_module` frees a throwaway one.
- `operands_first`: a computation's instructions, each after its operands.
"""

from ._engine import BodyGrowth as BodyGrowth
from ._engine import FusedBodyBuilder as FusedBodyBuilder
from ._engine import FusionEditor as FusionEditor
from ._engine import body_growth as body_growth
from ._engine import can_try_fusion as can_try_fusion
from ._engine import default_fusion_kind as default_fusion_kind
from ._engine import discard_fusion as discard_fusion
from ._engine import discard_module as discard_module
from ._engine import follows_growths as follows_growths
from ._engine import fuse as fuse
from ._engine import hypothetical_fusion as hypothetical_fusion
from ._engine import make_fusion as make_fusion
from ._engine import operands_first as operands_first
from ._engine import per_body_state as per_body_state
from ._engine import release_body_state as release_body_state
from ._engine import select_in_body as select_in_body
from ._engine import tracks_growth as tracks_growth
from ._engine import trial_fusion as trial_fusion
