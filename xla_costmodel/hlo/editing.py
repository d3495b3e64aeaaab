"""The graph editing that packages above `hlo` build on (an internal API: the fusion engine and the
fusion pass use it; users edit modules through `parse_hlo` and the fusion pass).

- Names: `NameUniquifier` (XLA's unique names for one module) and `names_for` (a given one or a new one).
- Copies and surgery: `add_new_instruction`, `clone_instruction`, `copy_module`, `remove_instruction_and_body`, `inline_calls`,
  `unfuse_for_execution`.
- Fused bodies kept as recipes until read (`DeferredBody`, `Frozen`, `Fused`, `Leaf`, `is_deferred`,
  `replay`, `root_opcode`).
- `ContentIds`: instructions numbered by what they compute, for caches keyed on content.
- `numpy_dtype`: an element type's numpy dtype, for passes that compute literal values (constant folding).
"""

from ._deferred import DeferredBody as DeferredBody
from ._deferred import Frozen as Frozen
from ._deferred import Fused as Fused
from ._deferred import Leaf as Leaf
from ._deferred import is_deferred as is_deferred
from ._deferred import replay as replay
from ._deferred import root_opcode as root_opcode
from ._edit import NameUniquifier as NameUniquifier
from ._literal import numpy_dtype as numpy_dtype
from ._edit import add_new_instruction as add_new_instruction
from ._edit import clone_instruction as clone_instruction
from ._edit import copy_module as copy_module
from ._edit import inline_calls as inline_calls
from ._edit import names_for as names_for
from ._edit import remove_instruction_and_body as remove_instruction_and_body
from ._edit import unfuse_for_execution as unfuse_for_execution
from ._structure import ContentIds as ContentIds
