"""The front door: what a user calls with a module or a function, a device and a model, resolved once here
into one `DeviceSpec` and one `CostModel` that the engine below is given.

- `analyze(module_or_fn, *args, device=, model=)`: every kernel priced (`KernelTable`);
  `granularity(module_or_fn, kernel, ...)`: one kernel under other launch configurations;
  `program_time(fn, *args, ...)`: a run's wall time, kernels plus the fitted per-run overhead;
  `evaluate(fn, *args, ...)`: measured and predicted, kernel by kernel (`Evaluation`).
- `get_device(name)`: a device, this machine's CPU (`"host"`) measured when it has no usable measurement;
  `resolve_device_and_model(device, model)`: the pair every call above passes down, checked;
  `resolve_priced_module(...)`: which module a device's kernels come from (XLA:GPU compiled here, or its
  fusion simulated, for a function priced on a GPU while jax compiles for the CPU).

It sits above the engine (hlo, devices, gpu_compile, analysis, models, fusion, measure, fit, compare,
plot) and calls it directly: nothing below reaches up to it.
"""

from ._resolve import PricedModule as PricedModule
from ._resolve import SIMULATED_FROM_LOWERED as SIMULATED_FROM_LOWERED
from ._resolve import get_device as get_device
from ._resolve import resolve_device_and_model as resolve_device_and_model
from ._resolve import resolve_priced_module as resolve_priced_module
from ._analyze import analyze as analyze
from ._granularity import granularity as granularity
from ._program import program_time as program_time
from ._evaluate import DEFAULT_EVALUATION_MODELS as DEFAULT_EVALUATION_MODELS
from ._evaluate import Evaluation as Evaluation
from ._evaluate import evaluate as evaluate
