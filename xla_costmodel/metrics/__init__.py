"""How far predicted kernel times are from measured ones: the metrics every table, figure and report of
the project uses, each under one name (defined in `_metrics`'s docstring).

- `accuracy(predicted, measured)`: the metrics of one set of predictions (`METRIC_COLUMNS`, in order);
  `sk_error`: Stevens & Klöckner's model error alone (relative errors floored at `SK_FLOOR`).
- `fusion_metrics(decisions)`: how well fuse-or-not decisions are called from fused and unfused times.

It imports nothing else of the package: `fit`, `compare`, `plot` and the scripts all score with it.
"""

from ._metrics import METRIC_COLUMNS as METRIC_COLUMNS
from ._metrics import SK_FLOOR as SK_FLOOR
from ._metrics import accuracy as accuracy
from ._metrics import fusion_metrics as fusion_metrics
from ._metrics import sk_error as sk_error
