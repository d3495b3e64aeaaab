"""Fitting the constants of the library-call model (`models._library_calls`) on GPU measurements.

Rows: one per library custom call of a measured module, its time per
execution (`min_per_run_s` / executions of the instruction: 1, or the trip
count of the loop it sits in when XLA knows it). A library call launches
several kernels per execution; the kernel launches per run are not its
executions.

Per routine, the form's terms (`_TERMS`) are fitted by non-negative least
squares on relative errors (a cuBLAS GEMM: one scale of the measured GEMM
table's time, the geometric mean of measured / table) (each row divided by its measured time):

    t / t = launch_multiple · launch/t + step_s · steps/t + (1/flops_eff) · (flops/peak)/t + (1/bw_eff) · (bytes/bw)/t

Leave one source out: for each source of a routine's rows, the constants
fitted without that source's rows. When no row of the routine is left (a
routine the data holds from that source only), the held-out constants are
fitted on the other routines of its family (`_FAMILY`) without that source,
and marked `honest: false`: the routine had no honest training data.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["LIBRARY_ROW_COLUMNS", "fit_library_constants", "library_call_rows", "score_library_rows"]

LIBRARY_ROW_COLUMNS = ["program", "size", "source", "hlo_op", "routine", "executions", "measured_s",
                       "launch_s", "steps", "flops_s", "bytes_s", "table_s"]

# Which terms each routine's form fits (the others are left out: 0).
_SOLVER_TERMS = ("launch_multiple", "step_s", "flops_efficiency")
_TERMS = {
    "getrf": _SOLVER_TERMS, "potrf": _SOLVER_TERMS, "geqrf": _SOLVER_TERMS, "orgqr": _SOLVER_TERMS,
    "syevd": _SOLVER_TERMS, "gesvdj": _SOLVER_TERMS, "gesvd": _SOLVER_TERMS, "trsm": _SOLVER_TERMS,
    "lu_pivots_to_permutation": ("launch_multiple", "step_s"),
    "conv_forward": ("launch_multiple", "flops_efficiency", "bandwidth_efficiency"),
    "conv_bias_activation": ("launch_multiple", "flops_efficiency", "bandwidth_efficiency"),
    "conv_backward_filter": ("launch_multiple", "flops_efficiency", "bandwidth_efficiency"),
    "conv_backward_input": ("launch_multiple", "flops_efficiency", "bandwidth_efficiency"),
    "sort_pairs": ("launch_multiple", "step_s", "bandwidth_efficiency"),
    "sort_keys": ("launch_multiple", "step_s", "bandwidth_efficiency"),
    "topk": ("launch_multiple", "bandwidth_efficiency"),
    # A cuBLAS GEMM: the measured GEMM table's time, times one scale (the geometric mean of measured / table).
    "gemm": ("table_scale",),
}
# Families share the kind of serial step: a factorisation's step is one reduction across the column or the
# trailing matrix (`analysis._library.REDUCTIONS_PER_COLUMN`: one per column for LU, four for the symmetric
# tridiagonalisation of syevd); a substitution's (trsm) or a pivot swap's touches one row.
_FAMILY = {r: "factorisation" for r in ("getrf", "potrf", "geqrf", "orgqr", "syevd", "gesvdj", "gesvd")}
_FAMILY.update({"trsm": "substitution", "lu_pivots_to_permutation": "substitution"})
_FAMILY.update({r: "cudnn" for r in ("conv_forward", "conv_bias_activation", "conv_backward_filter",
                                     "conv_backward_input")})
_FAMILY.update({"sort_pairs": "sort", "sort_keys": "sort", "topk": "sort", "gemm": "gemm"})
_COLUMN = {"launch_multiple": "launch_s", "step_s": "steps", "flops_efficiency": "flops_s",
           "bandwidth_efficiency": "bytes_s"}
# Fewest rows a routine's own fit takes.
_MIN_ROWS = 2


def library_call_rows(modules, kernels: pd.DataFrame, device) -> pd.DataFrame:
    """The library-call rows of measured modules (`LIBRARY_ROW_COLUMNS`).

    **Arguments:** `modules`: `{(program, size): HloModule}`, the optimized
    modules that ran; `kernels`: measured rows with `program`, `size`,
    `source`, `hlo_op`, `min_per_run_s` (the shared H100 capture's
    `corpus_kernels` schema); `device`: the `DeviceSpec` they ran on.

    **Returns:** a DataFrame, one row per measured library call (cuBLAS GEMMs
    aside: the GEMM table prices them).
    """
    from ..analysis.library import library_work
    from ..models.pricing import gemm_table_estimate

    out = []
    for (program, size), module in modules.items():
        measured = kernels[(kernels.program == program) & (kernels["size"] == size)]
        by_op = {r.hlo_op: r for r in measured.itertuples(index=False)}
        runs = _executions(module, device)
        for _comp, instr in module.instructions():
            if instr.opcode != "custom-call" or instr.name not in by_op:
                continue
            work = library_work(instr)
            if work is None:
                continue
            table_s = math.nan
            if work.routine == "gemm":
                est = gemm_table_estimate(instr, device, scaled=False)
                if est is None:
                    continue
                table_s = est.time_s
            r = by_op[instr.name]
            executions = runs.get(instr.name, 1) or 1
            peak = device.matmul_flops_per_s(work.dtype) if work.matrix_flops else device.peak_fp32_flops_per_s
            out.append({
                "program": program, "size": size, "source": r.source, "hlo_op": instr.name,
                "routine": work.routine, "executions": int(executions),
                "measured_s": float(r.min_per_run_s) / executions,
                "launch_s": device.kernel_launch_overhead_s, "steps": work.steps,
                "flops_s": work.flops / peak, "bytes_s": work.bytes_accessed / device.memory_bandwidth_bytes_per_s,
                "table_s": table_s,
            })
    return pd.DataFrame(out, columns=LIBRARY_ROW_COLUMNS)


def _executions(module, device) -> dict:
    """Executions per run of each kernel whose count `analyze` knows (the trip counts XLA wrote)."""
    import warnings

    from ..models import get_model, price_module

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = price_module(module, device, get_model("roofline"))
    known = table[table["executions_known"].astype(bool)]
    return dict(zip(known["kernel"], known["executions"]))


def _nnls(rows: pd.DataFrame, terms) -> dict:
    from scipy.optimize import nnls

    if terms == ("table_scale",):
        return {"table_scale": float(np.exp(np.mean(np.log(rows["measured_s"] / rows["table_s"]))))}
    y = rows["measured_s"].to_numpy(float)
    a = np.column_stack([rows[_COLUMN[t]].to_numpy(float) / y for t in terms])
    coef, _ = nnls(a, np.ones(len(y)))
    out = {"launch_multiple": 0.0, "step_s": 0.0, "flops_efficiency": 0.0, "bandwidth_efficiency": 0.0}
    for t, c in zip(terms, coef):
        if t in ("flops_efficiency", "bandwidth_efficiency"):
            out[t] = float(1.0 / c) if c > 0 else 0.0
        else:
            out[t] = float(c)
    return out


def _describe(rows: pd.DataFrame) -> str:
    routines = ", ".join(f"{r} ({n})" for r, n in rows.routine.value_counts().sort_index().items())
    return f"{len(rows)} rows of {routines}; sources {', '.join(sorted(set(rows.source)))}"


def _fit(rows: pd.DataFrame, routine: str, held_out: str | None) -> dict | None:
    terms = _TERMS[routine]
    keep = rows if held_out is None else rows[rows.source != held_out]
    own = keep[keep.routine == routine]
    if len(own) >= _MIN_ROWS:
        return {"constants": _nnls(own, terms), "fitted_on": _describe(own), "honest": True}
    family = keep[keep.routine.map(_FAMILY.get) == _FAMILY[routine]]
    if len(family) >= _MIN_ROWS:
        return {"constants": _nnls(family, terms), "fitted_on": "family: " + _describe(family),
                "honest": len(own) > 0}
    return None


def fit_library_constants(rows: pd.DataFrame) -> dict:
    """`{routine: {"all": fit, "leave_source_out": {source: fit}, "sources": [...], "rows": n}}` from
    `library_call_rows`; a fit is `{"constants", "fitted_on", "honest"}` (module docstring)."""
    out = {}
    for routine in sorted(set(rows.routine)):
        if routine not in _TERMS:
            continue
        own = rows[rows.routine == routine]
        sources = sorted(set(own.source))
        entry = {"sources": sources, "rows": int(len(own)), "terms": list(_TERMS[routine]),
                 "all": _fit(rows, routine, None), "leave_source_out": {}}
        for source in sources:
            held = _fit(rows, routine, source)
            if held is not None:
                entry["leave_source_out"][source] = held
        entry["honest"] = all(h["honest"] for h in entry["leave_source_out"].values()) and \
            len(entry["leave_source_out"]) == len(sources)
        out[routine] = entry
    return out


def _predict(row, c: dict) -> float:
    if "table_scale" in c:
        return row.table_s * c["table_scale"]
    t = row.launch_s * c["launch_multiple"] + row.steps * c["step_s"]
    if c["flops_efficiency"] > 0:
        t += row.flops_s / c["flops_efficiency"]
    if c["bandwidth_efficiency"] > 0:
        t += row.bytes_s / c["bandwidth_efficiency"]
    return t


def score_library_rows(rows: pd.DataFrame, fits: dict, *, held_out: bool = True) -> pd.DataFrame:
    """Each row's predicted time per execution with the constants fitted without its source
    (`held_out=True`) or on every row, and its ratio to the measured time."""
    out = rows.copy()
    pred = []
    for r in rows.itertuples(index=False):
        entry = fits.get(r.routine)
        fit = None
        if entry is not None:
            fit = entry["leave_source_out"].get(r.source) if held_out else entry["all"]
        pred.append(_predict(r, fit["constants"]) if fit else math.nan)
    out["predicted_s"] = pred
    out["ratio"] = out["predicted_s"] / out["measured_s"]
    return out
