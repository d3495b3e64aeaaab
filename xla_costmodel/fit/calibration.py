"""The fits behind the shipped calibrations (an internal API for the scripts that make them).

- Library calls (cuSolver, cuDNN, CUB constants per GPU): `library_call_rows`, `fit_library_constants`,
  `score_library_rows`.
- The learned efficiency model: `EFFICIENCY_FORM` (the form a saved table has), `table_sha256` (the
  fingerprint of the table it was fitted on), `STRUCTURE` / `structure_of` (a kernel's kind and GEMM
  configuration, as it reads them), `roofline_floor` / `FLOOR_COLUMN` (the bound it never prices below);
  fitted to measured rows and scored leaving one source out: `efficiency_rows` (kernels as its rows),
  `suite_efficiency_rows` (a measurement dataset's, priced alone), `usable_efficiency_rows`, `fit_efficiency`,
  `efficiency_prices`, `efficiency_leave_one_source_out`.
- An analytical model placed on a device: `base_model(name, constants)`, `AnalyticalOnDevice`; a CPU
  device shaped as a GPU for the GPU models: `host_as_gpu`; with fitted device parameters: `CalibratedModel`.
- A model over the counting features (`FeatureCostModel`: `estimate` from an estimator's `predict`).
- Per device of a fleet dataset: `calibrate_devices`, and the `DeviceSpec` of rows measured on a device:
  `device_for_rows`.
- Whole programs, measured and predicted per run (what the per-run overhead is fitted to): `program_table`.
"""

from ._calibrated import AnalyticalOnDevice as AnalyticalOnDevice
from ._calibrated import CalibratedModel as CalibratedModel
from ._calibrated import _base_model as base_model
from ._calibrated import host_as_gpu as host_as_gpu
from ._devices import calibrate_devices as calibrate_devices
from ._devices import device_for_rows as device_for_rows
from ._efficiency import FLOOR_COLUMN as FLOOR_COLUMN
from ._efficiency import FORM as EFFICIENCY_FORM
from ._efficiency import STRUCTURE as STRUCTURE
from ._efficiency import roofline_floor as roofline_floor
from ._efficiency import structure_of as structure_of
from ._efficiency import table_sha256 as table_sha256
from ._efficiency_fit import efficiency_leave_one_source_out as efficiency_leave_one_source_out
from ._efficiency_fit import efficiency_prices as efficiency_prices
from ._efficiency_fit import efficiency_rows as efficiency_rows
from ._efficiency_fit import fit_efficiency as fit_efficiency
from ._efficiency_fit import suite_efficiency_rows as suite_efficiency_rows
from ._efficiency_fit import usable_efficiency_rows as usable_efficiency_rows
from ._kernel_model import FeatureCostModel as FeatureCostModel
from ._library_fit import fit_library_constants as fit_library_constants
from ._library_fit import library_call_rows as library_call_rows
from ._library_fit import score_library_rows as score_library_rows
from ._program import program_table as program_table
