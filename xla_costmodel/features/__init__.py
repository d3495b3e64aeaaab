"""What a kernel is to a fitted model: its feature counts, its schedule context, and rows read into both (an
internal API: `fit`'s models, `compare` and the scripts read kernels through it; users find `FEATURES`,
`kernel_features` and the context features in `xla_costmodel.fit`).

- `features_of(kernel, device)`: one kernel's counts (`FEATURES`, grouped by `FEATURE_GROUPS`: Stevens &
  Klöckner's access patterns, operations, library calls, launches and threads; `FeatureError` where a
  kernel has none); `device_facts(device)`: the facts of a device they read, `TASK_BYTES`, `MATMUL_DTYPES`.
- `context_features(kernel, device)`: what its neighbours in its program do to its time (`CONTEXT_FEATURES`,
  `CONTEXT_FEATURE_GROUPS`).
- Dataset rows as kernels: `kernel_from_row(row)`, `kernel_features(kernels_or_rows, device)` (the table).
- `prepare(rows, device)` / `prepare_dataset(dataset, device)`: the kernel rows of a dataset parsed and
  featurized once, ready to fit and score (`Prepared`; `empty_prepared()`).
"""

from ._context import CONTEXT_FEATURE_GROUPS as CONTEXT_FEATURE_GROUPS
from ._context import CONTEXT_FEATURES as CONTEXT_FEATURES
from ._context import context_features as context_features
from ._counting import features_of as features_of
from ._features import FEATURE_GROUPS as FEATURE_GROUPS
from ._features import FEATURES as FEATURES
from ._features import MATMUL_DTYPES as MATMUL_DTYPES
from ._features import TASK_BYTES as TASK_BYTES
from ._features import FeatureError as FeatureError
from ._features import device_facts as device_facts
from ._prepare import Prepared as Prepared
from ._prepare import empty_prepared as empty_prepared
from ._prepare import prepare as prepare
from ._prepare import prepare_dataset as prepare_dataset
from ._rows import kernel_features as kernel_features
from ._rows import kernel_from_row as kernel_from_row
