"""Whole programs measured into dataset rows (an internal API for `scripts/measure_programs.py`, the command
line and `scale`; users call `measure_program` and `run_suite`).

- `measure_zoo(names, ...)`: the bundled programs; `measure_extra(...)`: the supplementary kernels.
- `measure_supplementary(...)`: the training data besides the suite, measured here.
- `write_dataset(rows, path)`: a dataset written whole, atomically (`append_dataset` adds to one);
  `per_launch_s(per_run_s, launches)`: a dataset's seconds per launch.
- The suite's two sizes: `QUICK`, `FULL`.
- A user's program factory, `MODULE:FUNCTION` or `FILE.py:FUNCTION` returning `(fn, args)`:
  `load_program(spec)`, and `ProgramSpecError` for a spec that names no loadable factory.
- `is_memcpy(kernel_symbols)`: which of a GPU capture's events are copies the driver runs, not kernels.
"""

from ._dataset import per_launch_s as per_launch_s
from ._dataset import write_dataset as write_dataset
from ._gpu_capture import is_memcpy as is_memcpy
from ._target import ProgramSpecError as ProgramSpecError
from ._target import load_program as load_program
from ._programs import measure_extra as measure_extra
from ._programs import measure_supplementary as measure_supplementary
from ._programs import measure_zoo as measure_zoo
from ._suite import FULL as FULL
from ._suite import QUICK as QUICK
