"""How XLA:GPU tiles a Triton fusion (an internal API for the tiled model, autotuning and launch
counts, after XLA's `SymbolicTileAnalysis`): a fusion's tiling as configured (`configured_tiling`),
tiles propagated through it (`propagate`, `TiledComputation`, `TiledInstruction`; for many root tiles at
once `propagate_candidates`, `TiledCandidates`), the candidate tiles
and Triton's constraints on them (`candidate_tiles`, `satisfies_triton_constraints`,
`check_symbolic_tiling`: what XLA's analysis refuses before any tile,
`dot_operand_tiles`), `dims_of`, `pow2_ceil`, `padded_size`; `TilingError` where a fusion cannot be tiled.
"""

from ._tiling import MAX_TENSOR_ELEMENTS as MAX_TENSOR_ELEMENTS
from ._tiling import TiledComputation as TiledComputation
from ._tiling import TiledInstruction as TiledInstruction
from ._tiling import TilingError as TilingError
from ._tiling import candidate_tiles as candidate_tiles
from ._tiling import check_symbolic_tiling as check_symbolic_tiling
from ._tiling import configured_tiling as configured_tiling
from ._tiling import dims_of as dims_of
from ._tiling import dot_operand_tiles as dot_operand_tiles
from ._tiling import padded_size as padded_size
from ._tiling import pow2_ceil as pow2_ceil
from ._tiling import pow2_ceil_array as pow2_ceil_array
from ._tiling import propagate as propagate
from ._tiling import propagate_candidates as propagate_candidates
from ._tiling import TiledCandidates as TiledCandidates
from ._tiling import satisfies_triton_constraints as satisfies_triton_constraints
