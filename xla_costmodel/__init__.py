"""xla_costmodel: predict how long XLA kernels take, explain why, and check against measured time.

The public API, in the order data flows: HLO front end (`parse_hlo`, `load_hlo`,
`from_jax`) → cost analysis (`cost_analysis`: jax's `Compiled.cost_analysis()`; `module_cost`,
`instruction_cost_table`) → devices and models
(`get_device`, `get_model`, `analyze`, `granularity`) → fusion (`simulate_fusion`, `search_fusion`)
→ measurement (`measure_kernels`) → fitting and comparison (`calibrate`, `compare_models`, `evaluate`, `program_time`, `plot`);
the same over many modules or devices (`analyze_many`, ..., `xla_costmodel.scale`).
XLA:GPU's own compile for a GPU this machine lacks: `compile_for_gpu` (`xla_costmodel.gpu_compile`).
"""

# First: where jax's CUDA plugin is installed on a machine without a GPU, start jax without the plugin's
# log lines and CUDA-check traceback (see `_quiet_jax`); elsewhere this does nothing.
from ._quiet_jax import prepare_jax as _prepare_jax

_prepare_jax()

from .hlo import HloComputation as HloComputation
from .hlo import HloInstruction as HloInstruction
from .hlo import HloModule as HloModule
from .hlo import HloParseError as HloParseError
from .hlo import Layout as Layout
from .hlo import Shape as Shape
from .hlo import from_jax as from_jax
from .hlo import load_hlo as load_hlo
from .hlo import parse_hlo as parse_hlo
from .analysis import cost_analysis as cost_analysis
from .analysis import instruction_cost_table as instruction_cost_table
from .analysis import gpu_cost_analysis as gpu_cost_analysis
from .analysis import module_cost as module_cost
from .analysis import module_stats as module_stats
from .devices import DeviceSpec as DeviceSpec
from .gpu_compile import compile_for_gpu as compile_for_gpu
from .models import KernelEstimate as KernelEstimate
from .models import KernelTable as KernelTable
from .models import get_model as get_model
from .models import model_names as model_names
from .fusion import FusionResult as FusionResult
from .fusion import SearchResult as SearchResult
from .fusion import compare_with_xla as compare_with_xla
from .fusion import search_fusion as search_fusion
from .fusion import simulate_fusion as simulate_fusion
from .measure import measure_kernels as measure_kernels
from . import plot as plot
from .fit import calibrate as calibrate
from .compare import compare_models as compare_models
from .scale import analyze_many as analyze_many
from .scale import map_modules as map_modules
from .scale import search_fusion_many as search_fusion_many
from .scale import simulate_fusion_many as simulate_fusion_many
# The front door: user input resolved once, then the engine above called (xla_costmodel/front).
from .front import analyze as analyze
from .front import evaluate as evaluate
from .front import get_device as get_device
from .front import granularity as granularity
from .front import program_time as program_time

__version__ = "0.1.0"
