"""Datasets as training data (an internal API: the fit, comparison and benchmark scripts read the measured
rows through it; users call `compare_models`, `calibrate` and the fitted models).

- `load_rows(...)`: a dataset's rows; `row_roles(rows)`: each row's role, `SUITE` (the measured suite's
  kernels) or a training or test program.
- `prepare(rows, ...)` / `prepare_dataset(...)`: rows parsed and analysed once, ready to fit and score.
- `programs_dataset`, `own_program_rows`, `program_table`: whole programs, measured and predicted per run.
- `features_of`: the counting features of one kernel, as the fitted models see them.
"""

from ._counting import features_of as features_of
from ._data import SUITE as SUITE
from ._data import load_rows as load_rows
from ._data import own_program_rows as own_program_rows
from ._data import prepare as prepare
from ._data import prepare_dataset as prepare_dataset
from ._data import programs_dataset as programs_dataset
from ._data import row_roles as row_roles
from ._program import program_table as program_table
