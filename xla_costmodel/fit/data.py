"""Datasets as training data (an internal API: the fit, comparison and benchmark scripts read the measured
rows through it; users call `compare_models`, `calibrate` and the fitted models).

- `load_rows(...)`: a dataset's rows; `row_roles(rows)`: each row's role, `SUITE` (the measured suite's
  kernels) or a training or test program.
- `prepare(rows, ...)` / `prepare_dataset(...)`: rows parsed and analysed once, ready to fit and score.
- `programs_dataset`, `own_program_rows`, `program_table`: whole programs, measured and predicted per run.
- `features_of`: the counting features of one kernel, as the fitted models see them.
- What rows are for: `training_rows`, `kernel_rows`, `row_sources` (the source a row is held out under),
  `TRAINING_PROGRAM`, `PROGRAM_CLASSES`, `FUSION_VARIANT_CLASSES`; `Prepared` / `empty_prepared`.
- Where a device's data lives: `default_training(device)`, `corpus_dataset(device)`.
"""

from ._counting import features_of as features_of
from ._data import FUSION_VARIANT_CLASSES as FUSION_VARIANT_CLASSES
from ._data import PROGRAM_CLASSES as PROGRAM_CLASSES
from ._data import SUITE as SUITE
from ._data import TRAINING_PROGRAM as TRAINING_PROGRAM
from ._data import corpus_dataset as corpus_dataset
from ._data import default_training as default_training
from ._data import kernel_rows as kernel_rows
from ._data import load_rows as load_rows
from ._data import own_program_rows as own_program_rows
from ._data import programs_dataset as programs_dataset
from ._data import row_roles as row_roles
from ._data import row_sources as row_sources
from ._data import training_rows as training_rows
from ._prepare import Prepared as Prepared
from ._prepare import empty_prepared as empty_prepared
from ._prepare import prepare as prepare
from ._prepare import prepare_dataset as prepare_dataset
from ._program import program_table as program_table
