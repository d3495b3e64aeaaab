"""The per-instruction cost interpreter and its keys (an internal API for the models that price kernels
with rules of their own over XLA's; users get the totals through `cost_analysis` and `module_cost`):

- `Analysis(module, warn=..., overrides=...)`: the interpreter that walks a module with the registered
  rules, overridden per opcode.
- A cost's keys: `FLOPS`, `TRANS`, `BYTES`, `OUT`, `UNPRICED`; a collective's: `KEY_COLL_BYTES`,
  `KEY_COLL_DEVICES`, `KEY_COLL_SCALE`.
- `merge_unpriced(...)`: what several costs could not price, as one.
"""

from ._interpreter import Analysis as Analysis
from ._rules import BYTES as BYTES
from ._rules import FLOPS as FLOPS
from ._rules import KEY_COLL_BYTES as KEY_COLL_BYTES
from ._rules import KEY_COLL_DEVICES as KEY_COLL_DEVICES
from ._rules import KEY_COLL_SCALE as KEY_COLL_SCALE
from ._rules import OUT as OUT
from ._rules import TRANS as TRANS
from ._rules import UNPRICED as UNPRICED
from ._rules import merge_unpriced as merge_unpriced
