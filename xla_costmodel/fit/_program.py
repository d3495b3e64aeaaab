"""Whole-program time: a program's kernels priced by a model, plus what a run costs besides its kernels.

A run of a jitted program on XLA:CPU is its kernels plus the work around
them: dispatching the executable, allocating output buffers, and the thunk
executor's bookkeeping. Measured on this project's own programs (the zoo and
the supplementary training programs), the wall time of a run exceeds the sum
of its kernels by a few tens of microseconds plus about a microsecond per
kernel. `ProgramOverhead` is that line, fitted robustly (Huber loss: in large
programs, kernels overlap on the thread pool and their sum can exceed the wall
time).

The predicted wall time of a run (`xla_costmodel.program_time`, at the front door) is the model's kernel times
summed over the run (`analyze(...)["total_s"]`, loop bodies counted per
iteration) plus the overhead. Kernels that run at the same time are not
overlapped here: the per-kernel models are fitted to kernel times measured
inside programs, which already include the slowdown of sharing the cores.
`scripts/bench_models.py` prints how often this comes within 1.5x of the
measured wall time of the corpus's programs (its `/wall` columns).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..analysis.opcodes import CONTROL_FLOW_OPCODES

__all__ = ["PROGRAM_OVERHEAD", "ProgramOverhead", "ProgramTime", "program_table"]

#: The calibration name of a device's `ProgramOverhead`.
PROGRAM_OVERHEAD = "program-overhead"


def program_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per measured program of a dataset: what its kernels took and what a run took.

    **Arguments:** `df`: dataset rows (`xla_costmodel.measure` schema) of whole programs.

    **Returns:** a DataFrame indexed by `case` with `source`, `program`, `n_kernels`
    (distinct kernels that ran), `kernels_per_run_s` (their `min_per_run_s` summed: a
    loop body's launches all counted) and `wall_per_run_s` (the fastest run,
    `wall_min_per_run_s`).
    """
    from ..datasets import kernel_rows

    rows = kernel_rows(df)
    rows = rows[~rows["opcode"].isin(CONTROL_FLOW_OPCODES)] if "opcode" in rows else rows
    if len(rows) == 0:
        return pd.DataFrame(columns=["source", "program", "n_kernels", "kernels_per_run_s", "wall_per_run_s"])
    agg = {"n_kernels": ("hlo_op", "size"), "kernels_per_run_s": ("min_per_run_s", "sum"),
           "wall_per_run_s": ("wall_min_per_run_s", "first")}
    for column in ("source", "program"):
        if column in rows:
            agg[column] = (column, "first")
    out = rows.groupby("case", sort=True).agg(**agg)
    return out[[c for c in ("source", "program", "n_kernels", "kernels_per_run_s", "wall_per_run_s") if c in out]]


@dataclass(frozen=True)
class ProgramOverhead:
    """What a run of a program costs besides its kernels: `per_run_s + per_kernel_s × kernels`."""

    per_run_s: float
    per_kernel_s: float
    n_programs: int = 0

    def __call__(self, n_kernels) -> np.ndarray | float:
        """Seconds per run of a program with `n_kernels` distinct kernels."""
        return self.per_run_s + self.per_kernel_s * np.asarray(n_kernels, dtype=float)

    @classmethod
    def fit(cls, programs: pd.DataFrame) -> "ProgramOverhead":
        """Fit to measured programs (a `program_table`): Huber regression of the wall time left over
        by the kernels on the number of kernels, both in microseconds.

        **Raises:** `ValueError` with fewer than 3 programs.
        """
        from sklearn.linear_model import HuberRegressor

        p = programs.dropna(subset=["wall_per_run_s", "kernels_per_run_s"])
        if len(p) < 3:
            raise ValueError(f"fitting a program overhead needs at least 3 measured programs, got {len(p)}")
        left_us = (p["wall_per_run_s"] - p["kernels_per_run_s"]).to_numpy(float) * 1e6
        reg = HuberRegressor(alpha=0.0).fit(p[["n_kernels"]].to_numpy(float), left_us)
        return cls(per_run_s=max(float(reg.intercept_), 0.0) * 1e-6, per_kernel_s=max(float(reg.coef_[0]), 0.0) * 1e-6,
                   n_programs=int(len(p)))

    def to_calibration(self) -> dict:
        return {"per_run_s": self.per_run_s, "per_kernel_s": self.per_kernel_s, "programs": self.n_programs}

    @classmethod
    def from_calibration(cls, device) -> "ProgramOverhead":
        """The overhead saved by `xla_costmodel.calibrate` for `device`. **Raises:** `CalibrationError`."""
        from ..datasets import CalibrationError, load_calibration

        data = load_calibration(PROGRAM_OVERHEAD, device)
        try:
            return cls(float(data["per_run_s"]), float(data["per_kernel_s"]), int(data.get("programs", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"{data.get('_path')}: unusable {PROGRAM_OVERHEAD!r} calibration ({exc})") from None


@dataclass(frozen=True)
class ProgramTime:
    """A program's predicted time per run (seconds), and its parts.

    - `kernels_per_run_s`: the model's kernel times summed over a run (`analyze`'s `total_s`);
    - `overhead_per_run_s`: the rest of a run (`ProgramOverhead`);
    - `wall_per_run_s`: their sum, the predicted wall time of one run;
    - `n_kernels`: distinct kernels priced; `unpriced`: kernels the model could not price
      (then the times are NaN, never a partial sum).
    """

    model: str
    device: str
    n_kernels: int
    unpriced: int
    kernels_per_run_s: float
    overhead_per_run_s: float
    wall_per_run_s: float

    def _repr_html_(self) -> str:
        def us(v: float) -> str:
            return "n/a" if math.isnan(v) else f"{v * 1e6:,.1f} µs"

        return (f"<p>predicted run of <b>{self.n_kernels}</b> kernel{'s' if self.n_kernels != 1 else ''} "
                f"({html.escape(self.model)} on {html.escape(self.device)}): kernels {us(self.kernels_per_run_s)} "
                f"+ overhead {us(self.overhead_per_run_s)} = <b>{us(self.wall_per_run_s)}</b> per run</p>")
