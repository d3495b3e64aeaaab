"""Saved calibrations, where they are and what they say of their data (an internal API: the scripts that
fit and ship calibrations write through it; users load them with `get_model("<name>-calibrated")`).

- `save_calibration(...)`: a calibration written atomically with its `header` (what measured it:
  `measured_on`, the code and data it came from).
- `shipped_dir()`: the calibrations the package ships; `DATA_DIR_ENV`: the variable naming the user's data dir.
- The machine that measured a dataset: `measuring_device(paths)` (kept in `MEASURING_DEVICE_FILE` beside
  it); the devices rows were measured on: `dataset_devices(rows)`.
"""

from ._store import DATA_DIR_ENV as DATA_DIR_ENV
from ._store import MEASURING_DEVICE_FILE as MEASURING_DEVICE_FILE
from ._store import dataset_devices as dataset_devices
from ._store import header as header
from ._store import measured_on as measured_on
from ._store import measuring_device as measuring_device
from ._store import save_calibration as save_calibration
from ._store import shipped_dir as shipped_dir
