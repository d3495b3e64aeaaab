"""`check_plan_validity`: is a fused module a valid rewrite of its input, by references nobody here wrote?

The checks `tests/test_fusion_validity.py` makes on `simulate_fusion`'s
output, as one reusable function (for the plans `search_fusion` finds, or any
other fused module):

- XLA's own parser (jaxlib) accepts the fused module's text;
- XLA's cost analysis (jaxlib) counts fewer bytes accessed than for the input;
- run on jaxlib's CPU client as emitted, each fusion turned into a `call` and
  nothing else changed (the CPU backend aborts on fusions it did not make), it
  gives the input's outputs on random inputs. Both run in a worker process
  (`IsolatedCpuRunner`), so that a crash inside jaxlib is a finding, not the
  end of the caller. A module that holds `bitcast`s (one that was through
  layout assignment, `layouts_assigned`) is not run: this CPU path assigns
  layouts again, which bitcasts do not survive.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np

from ..hlo import HloModule

__all__ = ["ValidityReport", "check_plan_validity"]


@dataclass(frozen=True)
class ValidityReport:
    """What `check_plan_validity` found.

    - `parses`: jaxlib's HLO parser accepted the fused text (`parse_error` says why not).
    - `has_fusion`: the fused module holds at least one `fusion`.
    - `bytes_before`, `bytes_after`: jaxlib cost analysis' `bytes accessed`;
      `fewer_bytes`: after < before.
    - `outputs_match`: same outputs on random inputs (None: not run, see
      `skipped`); `max_abs_error`: the largest absolute difference seen;
      `mismatch`: how they differ, or why the fused module did not run
      (XLA's error, or the signal that ended the process running it).
    - `ok`: parses, fewer bytes, and outputs match (or were not run).
    """

    parses: bool
    has_fusion: bool
    bytes_before: float
    bytes_after: float
    outputs_match: bool | None
    max_abs_error: float = math.nan
    skipped: str = ""
    parse_error: str = ""
    mismatch: str = ""

    @property
    def fewer_bytes(self) -> bool:
        return self.bytes_after < self.bytes_before

    @property
    def ok(self) -> bool:
        return self.parses and self.fewer_bytes and self.outputs_match is not False

    def _repr_html_(self) -> str:
        rows = [
            ("jaxlib parses it", self.parses),
            ("bytes accessed", f"{self.bytes_before:,.0f} &rarr; {self.bytes_after:,.0f}"),
            ("outputs match", self.outputs_match if self.outputs_match is not None else f"not run ({self.skipped})"),
            ("ok", self.ok),
        ]
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{html.escape(str(v)) if k != 'bytes accessed' else v}</td></tr>" for k, v in rows)
        return f"<div><b>Plan validity</b><table>{body}</table></div>"


def _compare(want, got, rtol: float, atol: float) -> tuple[bool, float, str]:
    if len(want) != len(got):
        return False, math.nan, f"{len(want)} outputs vs {len(got)}"
    worst = 0.0
    for i, (w, g) in enumerate(zip(want, got)):
        if w.shape != g.shape or w.dtype != g.dtype:
            return False, math.nan, f"output {i}: {w.dtype}{list(w.shape)} vs {g.dtype}{list(g.shape)}"
        if w.dtype.kind in "fc":
            wf, gf = w.astype(np.complex128 if w.dtype.kind == "c" else np.float64), g.astype(
                np.complex128 if g.dtype.kind == "c" else np.float64
            )
            both_nan = np.isnan(wf) & np.isnan(gf)
            with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are inf
                diff = np.where(both_nan | (wf == gf), 0.0, np.abs(wf - gf))
            if diff.size:
                worst = max(worst, float(np.nanmax(diff)) if not np.all(np.isnan(diff)) else math.inf)
            if not np.allclose(gf, wf, rtol=rtol, atol=atol, equal_nan=True):
                return False, worst, f"output {i}: values differ (max |diff| {worst:.3g})"
        elif not np.array_equal(w, g):
            return False, math.nan, f"output {i}: values differ"
    return True, worst, ""


def check_plan_validity(
    original: HloModule,
    fused: HloModule,
    *,
    seed: int = 1,
    run: bool = True,
    rtol: float = 2e-5,
    atol: float = 1e-5,
) -> ValidityReport:
    """Check a fused module against its unfused input with jaxlib (parser, cost analysis, CPU run).

    **Arguments:**

    - `original`: the unfused module; `fused`: a fusion of it (e.g.
      `simulate_fusion(original).module` or `search_fusion(original).module`).
    - `seed`: for the random inputs (`random_arguments`); `run`: False skips
      running both on the CPU; `rtol`, `atol`: tolerance for float outputs
      (the values `tests/test_fusion_validity.py` uses).

    **Returns:** a `ValidityReport` (`.ok` is the verdict).
    """
    import os

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from .. import _jaxlib_oracle as oracle
    from ..hlo.editing import unfuse_for_execution
    from ._execute import CpuRunError, random_arguments, run_on_cpu_isolated

    text = fused.to_text()
    has_fusion = any(i.opcode == "fusion" for _, i in fused.instructions())
    try:
        oracle.xla_parse(text)
    except Exception as e:  # noqa: BLE001 - any parser failure is the finding
        return ValidityReport(False, has_fusion, math.nan, math.nan, None, skipped="does not parse", parse_error=str(e))
    before = float(oracle.xla_cost_analysis(original.to_text())["bytes accessed"])
    after = float(oracle.xla_cost_analysis(text)["bytes accessed"])
    if not run:
        return ValidityReport(True, has_fusion, before, after, None, skipped="not asked to run")
    if any(i.opcode == "bitcast" for _, i in fused.instructions()):
        return ValidityReport(True, has_fusion, before, after, None,
                              skipped="holds bitcasts (layout-assigned): jaxlib's CPU path assigns layouts again")
    # XLA:GPU's library calls the simulation made (cuDNN convolutions, cuBLAS GEMMs) run on a GPU only.
    targets = {i.attributes.get("custom_call_target", "") for _, i in original.instructions() if i.opcode == "custom-call"}
    made = sorted({i.attributes.get("custom_call_target", "") for _, i in fused.instructions()
                   if i.opcode == "custom-call"} - targets)
    if made:
        return ValidityReport(True, has_fusion, before, after, None,
                              skipped=f"holds GPU library calls the fusion made ({', '.join(made)}): no CPU runs them")
    try:
        args = random_arguments(original, seed=seed)
    except ValueError as e:
        return ValidityReport(True, has_fusion, before, after, None, skipped=str(e))
    try:
        want = run_on_cpu_isolated(original.to_text(), args)
    except CpuRunError as e:
        return ValidityReport(True, has_fusion, before, after, None,
                              skipped=f"the input does not run on jaxlib's CPU client: {e}")
    try:
        got = run_on_cpu_isolated(unfuse_for_execution(fused, mode="call").to_text(), args)
    except CpuRunError as e:
        return ValidityReport(True, has_fusion, before, after, False, mismatch=f"the fused module does not run: {e}")
    match, worst, why = _compare(want, got, rtol, atol)
    return ValidityReport(True, has_fusion, before, after, match, max_abs_error=worst, mismatch=why)
