"""The steps of `compare_models`, one at a time (an internal API for benchmarks that score a model their
own way: per source, per device, on matched runs).

- `make_model(name, device)`: a model as `compare_models` builds it; `fit_model(model, pool, device,
  mask=...)`: a fresh copy fitted to rows of a prepared pool; `pricing_device(...)`: the device a
  dataset's rows are priced on.
- `matched_runs(rows, other)`: the kernel rows of two runs matched on case and instruction (the noise
  ceiling's input).
- `shown_columns(table)`: a comparison table without the fusion-decision columns its data cannot fill.
"""

from ._ceiling import _matched_runs as matched_runs
from ._compare import _fit as fit_model
from ._compare import make_model as make_model
from ._compare import pricing_device as pricing_device
from ._compare import shown_columns as shown_columns
