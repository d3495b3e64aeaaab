"""How far predictions are from measured times (an internal API for `compare`, `plot` and the scripts;
users get these columns in `compare_models`'s table).

- `accuracy(predicted, measured)`: the metrics of one set of predictions, `METRIC_COLUMNS` in order;
  `sk_error`: the per-kernel error the headline number averages; `fusion_metrics`: how well fusion
  decisions (fused against unfused) are called.
"""

from ._metrics import METRIC_COLUMNS as METRIC_COLUMNS
from ._metrics import accuracy as accuracy
from ._metrics import fusion_metrics as fusion_metrics
from ._metrics import sk_error as sk_error
