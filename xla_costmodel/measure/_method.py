"""The project's one timing methodology (`Method`) and what a measurement of it holds (`Measurement`).

`measure_program` (`_measure`) times a program this way; `_runs` turns the
profiler trace into the per-kernel and per-run tables. A kernel's statistics
over its kept runs are computed in one place (`kernel_statistics`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._text import count
from ..analysis.opcodes import CONTROL_FLOW_OPCODES
from ._allocator import ALLOCATORS
from ._dataset import per_launch_s
from ._module import ModuleIndex

__all__ = [
    "DEFAULT_METHOD",
    "KERNEL_COLUMNS",
    "RUN_ANNOTATION",
    "CommandBufferWarning",
    "ConcurrentKernelsWarning",
    "Measurement",
    "MeasurementError",
    "Method",
    "PageFaultWarning",
    "kernel_statistics",
    "split_control_flow",
]

#: The trace annotation of run `i` is `RUN_ANNOTATION + str(i)`.
RUN_ANNOTATION = "xla_costmodel.measure#"


class MeasurementError(RuntimeError):
    """A measurement that cannot be trusted (kernels missing, outside the wall time, ...)."""


class ConcurrentKernelsWarning(UserWarning):
    """Kernels of one run overlapped in time, so their times add up to more than the wall time."""


class CommandBufferWarning(UserWarning):
    """GPU command buffers are on, so kernels may not carry their HLO instruction names."""


class PageFaultWarning(UserWarning):
    """Every kept run page-faulted on fresh memory although the allocator was asked to be steady."""


@dataclass(frozen=True)
class Method:
    """How kernels are timed: the fields every measurement records.

    **Attributes:**

    - `allocator`: glibc's state while timing (`"steady"`: no page faults on
      reused buffers, what calibration assumes; `"cold"`: fresh pages every
      run; `"unknown"` for a trace read back from disk). See `set_allocator`.
    - `repeats`: traced runs in total, each waited for.
    - `discard`: leading traced runs thrown away as warm-up.
    - `warmup_calls`: untraced calls before the traced runs (always 1).
    - `statistic`: what a kernel's time is over the kept runs (the minimum).
    """

    allocator: str = "steady"
    repeats: int = 30
    discard: int = 4
    warmup_calls: int = 1
    statistic: str = "min"

    def __post_init__(self):
        if self.allocator not in (*ALLOCATORS, "unknown"):
            raise ValueError(f"allocator must be one of {', '.join(map(repr, ALLOCATORS))}, not {self.allocator!r}")
        if self.repeats < 1 or self.discard < 0 or self.discard >= self.repeats:
            raise ValueError(f"need repeats > discard >= 0, got repeats={self.repeats}, discard={self.discard}")

    @property
    def kept(self) -> int:
        """Samples per kernel: `repeats - discard`."""
        return self.repeats - self.discard

    def fields(self) -> dict:
        """The methodology as dataset columns: `allocator`, `repeats`, `discard`, `warmup_calls`, `statistic`."""
        return {
            "allocator": self.allocator,
            "repeats": self.repeats,
            "discard": self.discard,
            "warmup_calls": self.warmup_calls,
            "statistic": self.statistic,
        }


#: The methodology of `measure()`, `xla-costmodel measure`, the suite and calibration.
DEFAULT_METHOD = Method()

#: Columns of `measure()` / `Measurement.kernels` (and `Measurement.control_flow`), in order.
KERNEL_COLUMNS = (
    "hlo_module", "hlo_op", "opcode", "fusion_kind", "computation", "role", "n", "launches",
    "min_per_run_s", "median_per_run_s", "min_per_launch_s", "samples_per_run_s", "in_module",
)

#: What the `role` column says: where the row's instruction lives, hence how often it runs per program run.
ROLES = {
    "entry": "in the entry computation: runs once per program run",
    "control": "in a while loop's body or condition, a conditional's branch or a called computation: runs "
               "`launches` times per program run (summed in the *_per_run_s columns)",
}


def split_control_flow(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`(kernels, control_flow)`: the rows of kernels, and those of while/conditional/call/async instructions.

    On the CPU a control-flow instruction is a thunk whose span in the trace holds the kernels of its
    body (or branch, or callee), which have rows of their own: its time is theirs again, plus the loop's
    own bookkeeping. Kept among the kernels, a sum over the table would count each loop's body twice.
    """
    control = rows["opcode"].isin(CONTROL_FLOW_OPCODES).to_numpy()
    kernels = rows[~control].reset_index(drop=True)
    flow = rows[control].reset_index(drop=True)
    kernels.attrs.update(rows.attrs)
    flow.attrs.update(rows.attrs)
    return kernels, flow


@dataclass(frozen=True)
class Measurement:
    """Everything one `measure_program` call found.

    **Attributes:**

    - `kernels`: one row per kernel (HLO instruction) with its samples; see `measure`. Their
      `min_per_run_s` add up to the run's kernel time: control-flow instructions are not among them.
    - `control_flow`: the rows (same columns) of the while loops, conditionals and calls that ran as
      thunks of their own (XLA:CPU): each one's time *includes* the kernels of its body, branch or callee,
      which are rows of `kernels`, plus the loop's own work (evaluating the condition, copying the
      loop state). Its `launches` count how often the instruction ran per program run. Its time is
      the thunk's span as the trace shows it, a loose figure: XLA:CPU may run a loop asynchronously,
      and then its event ends early and its completion is known only from its callback or the
      kernels that read its result. The kernels' own rows are the measurement. Empty on GPUs,
      where the host drives loops and only their kernels are traced.
    - `runs`: one row per run: `run`, `kept`, `wall_s` (the run's annotated
      span in the trace), `host_wall_s` (the same run timed by Python),
      `page_faults` (page faults of the process during the run; NaN for a
      trace read back),
      `kernel_sum_s` (the run's kernel times added up, the rows of
      `kernels`; the while/conditional/call thunks of `control_flow` left out), `busy_s`
      (time covered by at least one kernel), `n_kernels`, `late_s` (how far the
      last kernel ended after the run did; 0 when all is well), `overlap`
      (kernels ran concurrently).
    - `hlo_text`: the compiled module's text, from the same compilation that ran.
    - `module`: the `ModuleIndex` of that text.
    - `missing`: entry-computation instructions expected to run as kernels that
      no kept run showed.
    - `backend`, `device`, `jax_version`, `jaxlib_version`, `trace_format`,
      `trace_path`: provenance.
    - `method`: the `Method` it was measured with.
    - `process`: where the program ran: `"worker"` (the measuring worker,
      `_isolated`) or `"in-process"` (the calling process).
    """

    kernels: pd.DataFrame
    runs: pd.DataFrame
    hlo_text: str
    module: ModuleIndex = field(repr=False)
    missing: tuple[str, ...]
    backend: str
    device: str
    jax_version: str
    jaxlib_version: str
    trace_format: str
    trace_path: str
    method: Method = DEFAULT_METHOD
    process: str = "in-process"
    control_flow: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(KERNEL_COLUMNS)),
                                       repr=False)

    def _repr_html_(self) -> str:
        kept = self.runs[self.runs["kept"]]
        head = (
            f"<p><b>{html.escape(self.module.name)}</b> on {html.escape(self.device)}: "
            f"{count(len(self.kernels), 'kernel')}, {count(len(kept), 'kept run')} ({html.escape(self.method.allocator)} allocator), "
            f"wall min {kept['wall_s'].min() * 1e6:.1f} µs per run"
            + (f"; <b>missing</b>: {html.escape(', '.join(self.missing))}" if self.missing else "")
            + "</p>"
        )
        cols = ["hlo_op", "opcode", "n", "launches", "min_per_run_s", "median_per_run_s", "min_per_launch_s"]
        return head + self.kernels[cols].to_html(index=False)


def kernel_statistics(samples: list[float], launches: float) -> dict:
    """A kernel's statistics over its kept per-run samples (the methodology's one place for them)."""
    lo = float(np.min(samples))
    return {
        "n": len(samples),
        "launches": launches,
        "min_per_run_s": lo,
        "median_per_run_s": float(np.median(samples)),
        "min_per_launch_s": per_launch_s(lo, launches),
    }
