"""Datasets as training data (an internal API: the fit, comparison and benchmark scripts read prepared rows
through it; the rows themselves, their roles and files, are `xla_costmodel.datasets`'s).

- `prepare(rows, ...)` / `prepare_dataset(...)`: rows parsed and analysed once, ready to fit and score;
  `Prepared` / `empty_prepared`.
- `program_table`: whole programs, measured and predicted per run.
- `features_of`: the counting features of one kernel, as the fitted models see them.
"""

from ._counting import features_of as features_of
from ._prepare import Prepared as Prepared
from ._prepare import empty_prepared as empty_prepared
from ._prepare import prepare as prepare
from ._prepare import prepare_dataset as prepare_dataset
from ._program import program_table as program_table
