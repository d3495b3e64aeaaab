"""`program_time`: the predicted wall time of one run of a program, at the front door: the model's kernel
times (`analyze`) plus the device's fitted per-run overhead (`fit.ProgramOverhead`)."""

from __future__ import annotations

import math

from ..analysis import CONTROL_FLOW_OPCODES
from ..fit import ProgramOverhead, ProgramTime
from ._analyze import analyze

__all__ = ["program_time"]


def program_time(source, *args, device="host", model="fitted", overhead: "ProgramOverhead | None" = None) -> ProgramTime:
    """Predict the wall time of one run of a program.

    **Arguments:** `source`: what `analyze` accepts (a function with `*args`, HLO text, a path or
    a module); `device`, `model`: as for `analyze`; `overhead`: the per-run overhead (default the
    device's saved `program-overhead` calibration).

    **Returns:** a `ProgramTime`. **Raises:** what `analyze` raises; `CalibrationError` when no
    overhead is given and the device has no saved one.
    """
    table = analyze(source, *args, device=device, model=model)
    kernels = table[(table["bound"] != "free") & ~table["opcode"].isin(CONTROL_FLOW_OPCODES)]
    unpriced = int((~kernels["priced"].astype(bool)).sum())
    over = overhead or ProgramOverhead.from_calibration(table.device_name)
    n = int(len(kernels))
    total = float(kernels["total_s"].sum()) if unpriced == 0 else math.nan
    extra = float(over(n))
    return ProgramTime(model=table.model_name, device=table.device_name, n_kernels=n, unpriced=unpriced,
                       kernels_per_run_s=total, overhead_per_run_s=extra, wall_per_run_s=total + extra)
