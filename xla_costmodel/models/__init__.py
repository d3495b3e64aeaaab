"""Cost models behind one interface (`CostModel`), and their registry."""

from ._base import BOUNDS as BOUNDS
from ._base import CachesInstructions as CachesInstructions
from ._base import CombinesFusionTimes as CombinesFusionTimes
from ._base import HoldsModels as HoldsModels
from ._base import CostModel as CostModel
from ._base import CostModelWarning as CostModelWarning
from ._base import EstimatesFusion as EstimatesFusion
from ._base import FusionByMaterializing as FusionByMaterializing
from ._base import FusionEstimate as FusionEstimate
from ._base import FusionPricing as FusionPricing
from ._base import HasParams as HasParams
from ._base import KernelEstimate as KernelEstimate
from ._base import PairPricer as PairPricer
from ._base import PricesByContent as PricesByContent
from ._base import PricesTrialFusions as PricesTrialFusions
from ._base import fuses_by_materializing as fuses_by_materializing
from ._base import get_model as get_model
from ._base import MaterializedFusions as MaterializedFusions
from ._base import with_fusion_rule as with_fusion_rule
from ._base import model_names as model_names
from ._base import prices_by_content as prices_by_content
from ._base import prices_trial_fusions as prices_trial_fusions
from ._base import register_model as register_model
from ._xla_gpu import XlaGpuModel as XlaGpuModel
from ._xla_gpu_tables import XlaGpuTablesModel as XlaGpuTablesModel
from ._roofline import RooflineModel as RooflineModel
from ._analyze import KernelTable as KernelTable
from ._summary import TableSummary as TableSummary
# Every kernel of a module priced, and one kernel under other launch configurations, with the device and model
# resolved: the engine under the front door's `analyze` and `granularity` (`xla_costmodel.front`).
from ._analyze import price_module as price_module
from ._granularity import GranularityError as GranularityError
from ._granularity import kernel_configurations as kernel_configurations
# What the user may pass for a module, a device and a model, turned into values (models/_inputs.py).
from ._inputs import DEFAULT_DEVICE as DEFAULT_DEVICE
from ._inputs import DEFAULT_MODEL as DEFAULT_MODEL
from ._inputs import BackendMismatchWarning as BackendMismatchWarning
from ._inputs import GpuCompileFallbackWarning as GpuCompileFallbackWarning
from ._inputs import PricesDeviceKinds as PricesDeviceKinds
from ._inputs import check_prices_device as check_prices_device
from ._inputs import resolve_device as resolve_device
from ._inputs import resolve_inputs as resolve_inputs
from ._inputs import resolve_model as resolve_model
from ._inputs import resolve_module as resolve_module
# The emitter XLA:GPU picks for a kernel and its launch grid (models/_launch.py).
from ._launch import LaunchDimensions as LaunchDimensions
from ._launch import launch_dimensions as launch_dimensions
# Combined models ("min(xla-gpu,roofline)", ...) and plugin errors (models/_combined.py, models/_plugins.py).
# (`scaled(...)` models are fitted: `xla_costmodel.fit.ScaledModel`.)
from ._combined import COMBINATIONS as COMBINATIONS
from ._combined import CombinedModel as CombinedModel
from ._combined import ScaledCostModel as ScaledCostModel
from ._combined import register_combinator as register_combinator
# For combinators defined elsewhere (fit's `scaled`): a model from a model or its name, its label, its dataset.
from ._combined import as_model as as_model
from ._combined import dataset_path as dataset_path
from ._combined import model_label as model_label
from ._plugins import ModelPluginError as ModelPluginError
# GEMM autotuning a compile without a GPU cannot do (models/_autotune.py): for the compile path.
from ._autotune import AutotunedModule as AutotunedModule
from ._autotune import GemmConfig as GemmConfig
from ._autotune import autotune_gemms as autotune_gemms
from ._dot_fusion import estimate_dot as estimate_dot
from ._gemm_table import gemm_spec as gemm_spec
from ._gemm_table import is_cublas_gemm as is_cublas_gemm
from ._kernel_kind import GPU_KERNEL_KINDS as GPU_KERNEL_KINDS
from ._kernel_kind import gpu_kernel_kind as gpu_kernel_kind
from ._xla_cpu_convolution import runs_on_ynnpack as runs_on_ynnpack
# How XLA:CPU runs grouped convolutions and what they cost at the host's measured rates (fit prices them too).
from ._xla_cpu_convolution import GROUPED_CONV_RATES as GROUPED_CONV_RATES
from ._xla_cpu_convolution import grouped_convolution_seconds as grouped_convolution_seconds
from ._xla_cpu_convolution import grouped_convolutions as grouped_convolutions
