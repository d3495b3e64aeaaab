"""Saved calibrations, where they are and what they say of their data (an internal API: the scripts that
fit and ship calibrations write through it; users load them with `get_model("<name>-calibrated")`).

- `save_calibration(...)`: a calibration written atomically with its `header` (what measured it:
  `measured_on`, the code and data it came from).
- `shipped_dir()`: the calibrations the package ships; `DATA_DIR_ENV`: the variable naming the user's data dir.
"""

from ._store import DATA_DIR_ENV as DATA_DIR_ENV
from ._store import header as header
from ._store import measured_on as measured_on
from ._store import save_calibration as save_calibration
from ._store import shipped_dir as shipped_dir
