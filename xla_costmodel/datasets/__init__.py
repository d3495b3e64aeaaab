"""Measured rows and where they live, no model in sight: the calibration datasets as training and test data,
and the saved calibrations (an internal API: `fit`, `compare`, the command line and the scripts read and write
through it; users call `calibrate`, `compare_models` and the fitted models, and find what they need of this in
`xla_costmodel.fit`).

Rows (`_data`):

- `load_rows(dataset)`: a dataset's rows (a path, paths, or a DataFrame); `kernel_rows`: those that are
  kernels with a usable time; `measured_times`: their seconds per launch.
- What rows are for: `row_roles(rows)` (`SUITE`, `TRAINING_PROGRAM`, `TEST_PROGRAM`), `training_rows`,
  `own_program_rows`, `row_sources` (the source a row is held out under), `PROGRAM_CLASSES`,
  `FUSION_VARIANT_CLASSES`.
- Where a device's data lives: `default_training(device)`, `default_dataset`, `programs_dataset`,
  `corpus_dataset`, `dataset_name`.

Saved calibrations and the user's data (`_store`):

- One JSON file per (device, model): `load_calibration`, `calibration_path`, `calibration_in_use`,
  `calibration_measured_on`, `save_calibration(...)` (written atomically with its `header`: what measured
  it, `measured_on`, the code and data it came from); `CalibrationError`, `DeviceMismatchError`,
  `MachineMismatchWarning`.
- The folders: `user_data_dir()` (named by `DATA_DIR_ENV` when set), `shipped_dir()`, `quick_dir()`,
  `held_back_dir()`.
- The machine that measured a dataset: `measuring_device(paths)` (kept in `MEASURING_DEVICE_FILE` beside
  it); the devices rows were measured on: `dataset_devices(rows)`, `rows_device_matches`.
"""

from ._data import FUSION_VARIANT_CLASSES as FUSION_VARIANT_CLASSES
from ._data import PROGRAM_CLASSES as PROGRAM_CLASSES
from ._data import SUITE as SUITE
from ._data import TEST_PROGRAM as TEST_PROGRAM
from ._data import TRAINING_PROGRAM as TRAINING_PROGRAM
from ._data import corpus_dataset as corpus_dataset
from ._data import dataset_name as dataset_name
from ._data import default_dataset as default_dataset
from ._data import default_training as default_training
from ._data import kernel_rows as kernel_rows
from ._data import load_rows as load_rows
from ._data import measured_times as measured_times
from ._data import own_program_rows as own_program_rows
from ._data import programs_dataset as programs_dataset
from ._data import row_roles as row_roles
from ._data import row_sources as row_sources
from ._data import training_rows as training_rows
from ._store import DATA_DIR_ENV as DATA_DIR_ENV
from ._store import MEASURING_DEVICE_FILE as MEASURING_DEVICE_FILE
from ._store import CalibrationError as CalibrationError
from ._store import DeviceMismatchError as DeviceMismatchError
from ._store import MachineMismatchWarning as MachineMismatchWarning
from ._store import calibration_in_use as calibration_in_use
from ._store import calibration_measured_on as calibration_measured_on
from ._store import calibration_path as calibration_path
from ._store import dataset_devices as dataset_devices
from ._store import header as header
from ._store import held_back_dir as held_back_dir
from ._store import load_calibration as load_calibration
from ._store import measured_on as measured_on
from ._store import measuring_device as measuring_device
from ._store import quick_dir as quick_dir
from ._store import rows_device_matches as rows_device_matches
from ._store import save_calibration as save_calibration
from ._store import shipped_dir as shipped_dir
from ._store import user_data_dir as user_data_dir
