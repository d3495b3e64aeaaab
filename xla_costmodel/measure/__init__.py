"""Measured kernel timings: profiler-trace ingestion, the measurement suite, calibration datasets.

- `measure_kernels(fn, *args)` runs a jitted program under `jax.profiler` and returns
  one row per kernel, joined to the compiled module's instructions;
  `measure_program` returns the per-run table and the module as well. Both,
  the suite and the command line time kernels with one methodology
  (`Method`, `DEFAULT_METHOD`: steady allocator, warm-up, minimum). On the
  CPU a program is timed in the measuring worker, a process started with
  the allocator steady, unless this one was started so (`steady_from_start`).
- `read_trace` / `kernel_executions` read an `xplane.pb` (or the trace JSON)
  into tables of events and kernel executions.
- `run_suite` measures the performance-instructive kernels over size sweeps;
  `append_dataset` / `read_dataset` keep the results in a tidy, atomically
  appended Parquet or CSV file; `noise_floor` compares two suite runs.
- `capture_kernels` / `capture_rows` turn a GPU capture (device events of
  traced runs, the H100 corpus's format; `capture_events_from_trace` makes
  one from a `jax.profiler` trace) into dataset rows; `capture_executions`
  counts each instruction's executions per run from its events' order.
- `measure_host()` measures this machine's CPU: the `"host"` device;
  `host_device()` reads its cache or measures (what `xla_costmodel.get_device("host")`
  does), `resolve_device(device)` gives any device's `DeviceSpec` that way.
"""

from ._allocator import ALLOCATORS as ALLOCATORS
from ._allocator import STEADY_TUNABLES as STEADY_TUNABLES
from ._allocator import steady_from_start as steady_from_start
from ._allocator import set_allocator as set_allocator
from ._allocator import steady_allocator as steady_allocator
from ._dataset import DATASET_COLUMNS as DATASET_COLUMNS
from ._dataset import SCHEMA as SCHEMA
from ._dataset import DatasetError as DatasetError
from ._dataset import append_dataset as append_dataset
from ._dataset import read_dataset as read_dataset
from ._method import DEFAULT_METHOD as DEFAULT_METHOD
from ._method import KERNEL_COLUMNS as KERNEL_COLUMNS
from ._method import Method as Method
from ._method import PageFaultWarning as PageFaultWarning
from ._method import CommandBufferWarning as CommandBufferWarning
from ._method import ConcurrentKernelsWarning as ConcurrentKernelsWarning
from ._method import Measurement as Measurement
from ._method import MeasurementError as MeasurementError
from ._measure import device_description as device_description
from ._measure import disable_gpu_command_buffers as disable_gpu_command_buffers
from ._measure import measure_kernels as measure_kernels
from ._measure import measure_program as measure_program
from ._isolated import InProcessMeasurementWarning as InProcessMeasurementWarning
from ._runs import measurement_from_trace as measurement_from_trace
from ._runs import merge_measurements as merge_measurements
from ._gpu_capture import CaptureError as CaptureError
from ._gpu_capture import capture_events_from_trace as capture_events_from_trace
from ._gpu_capture import capture_executions as capture_executions
from ._gpu_capture import capture_kernels as capture_kernels
from ._gpu_capture import capture_rows as capture_rows
from ._host import host_device as host_device
from ._host import measure_host as measure_host
from ._host import resolve_device as resolve_device
from ._noise import noise_floor as noise_floor
from ._suite import SUITE as SUITE
from ._suite import SuiteKernel as SuiteKernel
from ._suite import measurement_rows as measurement_rows
from ._suite import run_suite as run_suite
from ._suite import suite_cases as suite_cases
from ._target import UserProgramError as UserProgramError
from ._trace import TraceError as TraceError
from ._trace import find_trace_files as find_trace_files
from ._trace import kernel_executions as kernel_executions
from ._trace import read_trace as read_trace

