"""Scale-out: one operation over many HLO modules, and measurement on a fleet of devices.

- `analyze_many`, `simulate_fusion_many`, `search_fusion_many`: `analyze`,
  `simulate_fusion` and `search_fusion` over many sources, each a task, on
  a process pool (`engine="local"`, the default) or a Ray cluster
  (`engine="ray"`); `map_modules` does the same for any operation. Rows go
  to an output file as sources finish; `resume=True` skips the ones done.
- `measure_fleet`: the measurement suite (or a program) run as Ray tasks
  placed on nodes by accelerator type, merged into one calibration dataset.

Ray is optional (`pip install 'xla_costmodel[ray]'`); without it, asking for
the Ray engine raises `RayUnavailableError`. `usable_cpus()`: the CPUs the local engine's
workers default to.
"""

from ._engines import ENGINES as ENGINES
from ._engines import Engine as Engine
from ._engines import LocalEngine as LocalEngine
from ._engines import RayEngine as RayEngine
from ._engines import RayUnavailableError as RayUnavailableError
from ._engines import WorkerStartError as WorkerStartError
from ._engines import get_engine as get_engine
from ._engines import usable_cpus as usable_cpus
from ._many import SourcesTable as SourcesTable
from ._many import TaskFailedWarning as TaskFailedWarning
from ._many import analyze_many as analyze_many
from ._many import map_modules as map_modules
from ._many import search_fusion_many as search_fusion_many
from ._many import simulate_fusion_many as simulate_fusion_many
from ._store import ResultFileError as ResultFileError
from ._store import read_results as read_results
from ._fleet import FleetDeviceWarning as FleetDeviceWarning
from ._fleet import measure_fleet as measure_fleet
