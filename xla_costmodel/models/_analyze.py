"""`price_module`: every kernel of a module priced by a cost model, as a `KernelTable` (the engine under `analyze`).

One row per kernel, in execution order: every fusion, and every top-level
instruction that is not fused. Bodies of `while` loops, branches of
`conditional`s and `call`ed computations are expanded, each row saying how
many times it runs (`executions`) and whether that count is known.
"""

from __future__ import annotations

import math
import warnings

import pandas as pd

from ..analysis import while_trip_count
from ..analysis.opcodes import is_free
from ._base import CostModelWarning, KernelEstimate
from ._kernel_costs import ModuleCounts
from ._summary import TableSummary

COLUMNS = (
    "kernel", "computation", "opcode", "kind", "emitter", "executions", "executions_known",
    "flops", "transcendentals", "bytes_accessed", "intensity", "model_flops", "model_bytes",
    "compute_s", "memory_s", "launch_s", "time_s",
    "total_s", "bound", "coalesced", "priced", "note",
)


def _check_trip_counts(module, trip_counts) -> dict:
    """`trip_counts` as `{while instruction name: int}`, checked against the module's loops."""
    if not trip_counts:
        return {}
    if not isinstance(trip_counts, dict):
        raise TypeError(f"trip_counts must be a dict {{while loop name: trip count}}, got {type(trip_counts).__name__}")
    loops = {i.name for c in module.computations for i in c.instructions if i.opcode == "while"}
    unknown = sorted(str(k) for k in trip_counts if k not in loops)
    if unknown:
        have = ", ".join(sorted(loops)) or "none"
        raise ValueError(f"trip_counts names no while loop of module '{module.name}': {', '.join(unknown)} "
                         f"(its while loops: {have})")
    out = {}
    for name, n in trip_counts.items():
        if isinstance(n, bool) or not isinstance(n, (int, float)) or n < 0 or n != int(n):
            raise ValueError(f"trip count of '{name}' must be a whole number >= 0, got {n!r}")
        out[name] = int(n)
    return out

# Opcodes that are bookkeeping around a called computation: free rows.
_ASYNC_BOOKKEEPING = frozenset({"async-update", "async-done"})


class KernelTable(pd.DataFrame):
    """The result of `analyze`: a DataFrame with one row per kernel, plus a summary.

    Columns:

    - `kernel`: the instruction's name (the name a profiler trace shows);
      `computation`: where it is; `opcode`.
    - `kind`: the fusion kind (`kLoop`, `kInput`, `kOutput`, `kCustom`),
      `unfused` for a lone instruction run as a kernel, or `free`.
    - `emitter`: the XLA:GPU emitter the `xla-gpu` model chose (else empty).
    - `executions`: how many times the kernel runs per execution of the module
      (loop trip counts and branch shares multiplied in); `executions_known`:
      False when a trip count or a branch choice had to be assumed (see `note`).
    - `flops`, `transcendentals`, `bytes_accessed`: what the kernel does,
      counted once and the same whatever the model: XLA's `HloCostAnalysis`
      of the instruction (`Compiled.cost_analysis()`'s semantics; a fusion
      counts each fused instruction once; textbook counts for the custom
      calls XLA leaves unknown, see `models._kernel_costs.KernelCounts`; NaN
      where unknown). Free rows carry XLA's counts too (a tuple's pointer
      table). Over the rows, composed as XLA composes computations (a loop
      body and condition once, the largest branch of a conditional), they add
      up to the module's `Compiled.cost_analysis()`, except where XLA cannot
      count a call (a custom call such as TopK: flops -1, bytes -1, which it
      adds as such) and the row holds the textbook count: its `note` says so,
      `xla_counts` holds XLA's own figures for it, and `counts_as_xla()` the
      columns that add up exactly. `intensity` = flops / bytes.
    - `model_flops`, `model_bytes`: what the model priced, by its own counting
      (`xla-gpu`: XLA's cycle-weighted GPU flops and bytes with re-reads and
      recomputation through broadcasts; `roofline`: plain flops with that
      recomputation and DRAM bytes); NaN when the model does not say.
    - `compute_s`, `memory_s`, `launch_s`, `time_s` (one execution) and
      `total_s` (= `time_s` × `executions`), `bound`.
    - `coalesced`: whether every read is coalesced (models that model it).
    - `priced`: False for a kernel the model could not price (`time_s` NaN,
      `note` says why); `note`.

    `total_s` (the property) sums the priced kernels; `summary()` gives the
    totals (a `TableSummary`). Attributes: `module_name`, `device_name`, `model_name`,
    `estimates` (kernel name → `KernelEstimate`, the first execution site),
    `priced_module` (what was priced: "the module as given", "the module
    XLA:CPU compiled", "XLA:GPU fusion simulated from the lowered module", ...;
    see `front._resolve.resolve_priced_module`), `unknown_loops` (the `while`
    loops whose trip count was neither known nor given, so assumed
    `unknown_trip_count`), `xla_counts` (kernel → XLA's own `flops`,
    `transcendentals`, `bytes_accessed` where the row's counts are textbook
    counts instead) and `total_is_lower_bound` (True when there is
    one: a loop that runs more often than assumed makes the module slower,
    so with the default assumption of 1 the total is a lower bound).
    `gemm_configs`: for a function priced on a GPU from XLA:GPU's compile
    here, without a GPU, the GEMM configuration chosen for each GEMM kernel
    as autotuning would (`models.autotune_gemms`'s `choices`); else None.
    """

    _metadata = ["module_name", "device_name", "model_name", "estimates", "priced_module", "unknown_loops",
                 "xla_counts", "gemm_configs"]

    def counts_as_xla(self) -> pd.DataFrame:
        """The count columns as XLA's `HloCostAnalysis` has them: `computation`, `kernel`, `flops`,
        `transcendentals`, `bytes_accessed`, with XLA's own figures (-1 for a call it cannot count) in
        place of the textbook counts of the kernels in `xla_counts`. Composed as XLA composes
        computations, these rows add up to `Compiled.cost_analysis()`."""
        out = pd.DataFrame(self)[["computation", "kernel", "flops", "transcendentals", "bytes_accessed"]].copy()
        for name, figures in (getattr(self, "xla_counts", None) or {}).items():
            at = out["kernel"] == name
            for key, value in figures.items():
                out.loc[at, key] = value
        return out

    @property
    def total_is_lower_bound(self) -> bool:
        """Whether a loop's trip count was assumed (see the class docstring)."""
        return bool(getattr(self, "unknown_loops", ()))

    @property
    def _constructor(self):
        return KernelTable

    @property
    def total_time_s(self) -> float:
        """Predicted time of one execution of the module: Σ time × executions over priced kernels."""
        if "total_s" not in self.columns:
            return float("nan")
        return float(self["total_s"].fillna(0.0).sum())

    def summary(self) -> TableSummary:
        """Totals: time per run, kernels (priced, unpriced, free), time by bound, what was priced (a `TableSummary`).

        Works on a column subset too (`table[["kernel", "time_s"]]`): figures
        whose columns are missing are NaN (times) or counted without them.
        """
        df = pd.DataFrame(self)
        cols = df.columns
        kernels = df[df["bound"] != "free"] if "bound" in cols else df
        priced = kernels[kernels["priced"].astype(bool)] if "priced" in cols else kernels
        by_bound = (
            priced.groupby("bound")["total_s"].sum().to_dict() if len(priced) and {"bound", "total_s"} <= set(cols)
            else {}
        )
        return TableSummary(
            module=getattr(self, "module_name", None),
            device=getattr(self, "device_name", None),
            model=getattr(self, "model_name", None),
            total_s=self.total_time_s,
            kernels=int(len(kernels)),
            unpriced=int((~kernels["priced"].astype(bool)).sum()) if "priced" in cols else 0,
            free=int(len(df) - len(kernels)),
            assumed_counts=(
                int((~kernels["executions_known"].astype(bool)).sum()) if "executions_known" in cols else 0
            ),
            time_by_bound_s={k: float(v) for k, v in by_bound.items()},
            priced_module=getattr(self, "priced_module", None),
            unknown_loops=tuple(getattr(self, "unknown_loops", ()) or ()),
            textbook_counts=tuple(getattr(self, "xla_counts", None) or ()),
        )

    def _repr_html_(self) -> str:
        plain = pd.DataFrame(self)._repr_html_()
        if not _SUMMARY_COLUMNS <= set(self.columns):
            # A column subset (`table[["kernel", "time_s"]]`): no totals to show, just the table.
            return plain
        head = self.summary()._repr_html_()
        return head + (plain or "")


# Columns the summary line of `KernelTable._repr_html_` needs.
_SUMMARY_COLUMNS = frozenset({"bound", "priced", "total_s", "executions_known"})


def _branches(instr) -> list:
    if instr.has_attribute("branch_computations"):
        return list(instr.attribute("branch_computations"))
    return [c for c in (instr.attribute("true_computation", None), instr.attribute("false_computation", None)) if c is not None]


def is_free_site(instr) -> bool:
    """Whether `analyze` gives `instr` a free row without asking the model (runs no code)."""
    return is_free(instr) or instr.opcode in _ASYNC_BOOKKEEPING


def kernel_sites(module, unknown_trip_count: int = 1, trip_counts: dict | None = None,
                 unknown_loops: list | None = None) -> list[tuple]:
    """Every top-level instruction `analyze` makes a row of, in execution order.

    **Arguments:** `module`; `unknown_trip_count`, `trip_counts` (see
    `analyze`; `trip_counts` as checked there); `unknown_loops`: a list that
    receives the names of the loops whose count was assumed.

    **Returns:** `(instruction, computation, executions, executions_known, note)`
    tuples: the entry computation, with `while` bodies and conditions,
    `conditional` branches, `call`ed computations and async computations
    expanded in place (see `analyze`).
    """
    sites: list[tuple] = []
    given = trip_counts or {}

    def visit(comp, executions: float, known: bool, note: str, depth: int = 0) -> None:
        if depth > 64:
            raise RecursionError(f"computations nested more than 64 deep at '{comp.name}'")
        for instr in comp.instructions:
            op = instr.opcode
            if op == "while":
                n, source = (given[instr.name], "given") if instr.name in given else while_trip_count(instr)
                k = known
                why = note
                if n is None:
                    n = unknown_trip_count
                    k = False
                    why = "; ".join(x for x in (note, f"trip count of '{instr.name}' unknown: assumed {n}") if x)
                    if unknown_loops is not None and instr.name not in unknown_loops:
                        unknown_loops.append(instr.name)
                visit(instr.attribute("condition"), executions * (n + 1), k, why, depth + 1)
                visit(instr.attribute("body"), executions * n, k, why, depth + 1)
            elif op == "conditional":
                branches = _branches(instr)
                share = 1.0 / max(len(branches), 1)
                why = "; ".join(x for x in (note, f"branch of '{instr.name}': assumed taken 1/{len(branches)} of the time") if x)
                for b in branches:
                    visit(b, executions * share, False, why, depth + 1)
            elif op == "call":
                visit(instr.attribute("to_apply"), executions, known, note, depth + 1)
            elif op == "async-start":
                for c in instr.called_computations:
                    visit(c, executions, known, note, depth + 1)
            else:
                sites.append((instr, comp, executions, known, note))

    visit(module.entry, 1.0, True, "")
    visit = None  # noqa: F841 -- break the closure's cycle (visit -> its cell -> visit), which holds `sites`
    return sites


def price_module(
    module,
    dev,
    cost_model,
    *,
    unknown_trip_count: int = 1,
    trip_counts: dict | None = None,
    cache: dict | None = None,
    version=None,
    key=None,
    warn: bool = True,
    warn_stacklevel: int = 2,
) -> KernelTable:
    """`analyze` of an `HloModule` with a resolved device and model (what `simulate_fusion` totals use).

    **Arguments:** `module`; `dev`, a `DeviceSpec`; `cost_model`, a model
    object; `unknown_trip_count`, `trip_counts` (see `analyze`); `cache`: a dict reused
    across calls, `(instruction, version) -> KernelEstimate`, with `version`
    (`instruction -> int`, default 0) telling when an instruction changed in
    place; `key`: `instruction -> hashable`, the cache key instead of
    `(instruction, version)` (e.g. a content id, so that kernels with the
    same content share one estimate); `warn`: one `CostModelWarning` naming
    the unpriced kernels.

    **Returns:** the `KernelTable`.
    """
    rows: list[dict] = []
    estimates: dict[str, KernelEstimate] = {}
    unpriced: list[str] = []
    counts = ModuleCounts(module)
    given = _check_trip_counts(module, trip_counts)
    unknown_loops: list[str] = []
    xla_counts: dict[str, dict] = {}

    def row(instr, comp, executions: float, known: bool, note: str) -> None:
        op = instr.opcode
        est = _site_estimate(instr, dev, cost_model, cache, version, key)
        if is_free_site(instr) or est.bound == "free":
            kind = "free"
        else:
            kind = instr.fusion_kind if op == "fusion" else "unfused"
        d = est.details or {}
        if est.bound == "free":
            model_flops, model_bytes = 0.0, 0.0
        else:
            model_flops = float(d.get("flops", math.nan))
            model_bytes = float(d.get("bytes_accessed", math.nan))
        c = counts(instr)
        xla = None if kind == "free" else counts.xla_own(instr)
        if xla is not None:
            xla_counts[instr.name] = {"flops": xla.flops, "transcendentals": xla.transcendentals,
                                      "bytes_accessed": xla.bytes_accessed}
            note = "; ".join(x for x in (note, _textbook_note(instr, xla)) if x)
        intensity = c.flops / c.bytes_accessed if (c.bytes_accessed and math.isfinite(c.bytes_accessed)) else math.nan
        coalesced = d.get("coalesced", None)
        priced = est.priced
        if not priced:
            unpriced.append(f"'{instr.name}' ({est.note})")
        # A priced kernel's own note is kept where a saved calibration priced it (`details["calibration"]`):
        # which file, and where its rows were measured, per kernel.
        own = est.note if (not priced or est.bound == "free" or d.get("calibration")) else ""
        notes = "; ".join(x for x in (note, own) if x)
        estimates.setdefault(instr.name, est)
        rows.append({
            "kernel": instr.name,
            "computation": comp.name,
            "opcode": op,
            "kind": kind,
            "emitter": d.get("emitter", ""),
            "executions": float(executions),
            "executions_known": bool(known),
            "flops": c.flops,
            "transcendentals": c.transcendentals,
            "bytes_accessed": c.bytes_accessed,
            "intensity": intensity,
            "model_flops": model_flops,
            "model_bytes": model_bytes,
            "compute_s": est.compute_s,
            "memory_s": est.memory_s,
            "launch_s": est.launch_s,
            "time_s": est.time_s,
            "total_s": est.time_s * executions if priced else math.nan,
            "bound": est.bound,
            "coalesced": coalesced,
            "priced": priced,
            "note": notes,
        })

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)
        for site in kernel_sites(module, unknown_trip_count, given, unknown_loops):
            row(*site)

    table = KernelTable(rows, columns=list(COLUMNS))
    table["coalesced"] = table["coalesced"].astype("boolean")
    table.module_name = module.name
    table.device_name = dev.name
    table.model_name = cost_model.name
    table.estimates = estimates
    table.priced_module = "the module as given"
    table.unknown_loops = tuple(unknown_loops)
    table.xla_counts = xla_counts
    table.gemm_configs = None  # set by `analyze` for a module XLA:GPU compiled here (autotune_gemms)
    if unpriced and warn:
        _warn_unpriced_kernels(table.model_name, module.name, unpriced, warn_stacklevel + 1)
    return table


def _textbook_note(instr, xla) -> str:
    """What a row whose counts are not XLA's says: XLA's own figures, and where the row's come from."""
    what = instr.opcode if instr.opcode != "custom-call" else f"custom call {instr.attribute('custom_call_target', '')}"
    unknown = ", ".join(f"{key} {value:g}" for key, value in (("flops", xla.flops), ("bytes", xla.bytes_accessed))
                        if value < 0)
    xla_says = f"{unknown} (it cannot count the call)" if unknown else f"flops {xla.flops:g} (it does not count the work)"
    return (f"counts are textbook counts of the {what}: XLA's cost analysis gives {xla_says}, "
            f"which Compiled.cost_analysis() adds as such")


def _warn_unpriced_kernels(model_name: str, module_name: str, unpriced: list[str], stacklevel: int) -> None:
    shown = ", ".join(unpriced[:10]) + (f", and {len(unpriced) - 10} more" if len(unpriced) > 10 else "")
    warnings.warn(
        f"{model_name} could not price {len(unpriced)} kernel(s) of module '{module_name}' "
        f"(flagged priced=False, left out of the total): {shown}",
        CostModelWarning,
        stacklevel=stacklevel,
    )


def _site_estimate(instr, dev, cost_model, cache: dict | None, version, key) -> KernelEstimate:
    """One kernel site's estimate, through `cache` (see `price_module`); model errors become unpriced."""
    if is_free_site(instr):
        return KernelEstimate.free(f"{instr.opcode} runs no code")
    if key is not None:
        ckey = key(instr)
    else:
        ckey = (instr, version(instr) if version is not None else 0)
    est = cache.get(ckey) if cache is not None else None
    if est is None:
        try:
            est = cost_model.estimate(instr, dev)
        except (ArithmeticError, LookupError, TypeError, AttributeError) as exc:
            # An HLO construct the model's rules do not handle: flag the kernel, keep going.
            est = KernelEstimate.unpriced(f"model error: {type(exc).__name__}: {exc}")
        if cache is not None:
            cache[ckey] = est
    return est


def module_time(
    module, dev, cost_model, *, cache: dict | None = None, version=None, key=None, warn_stacklevel: int = 2,
) -> tuple[float, int, int]:
    """`(total_s, kernels, unpriced)` of `price_module(...).summary()`, without building the table.

    For callers that price whole modules many times (fusion passes): the same
    sites, estimates, warning and summation order (pandas' sum over the
    `total_s` column), so the figures are identical.
    """
    totals: list[float] = []
    kernels = 0
    unpriced: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostModelWarning)
        for instr, _comp, executions, _known, _note in kernel_sites(module):
            est = _site_estimate(instr, dev, cost_model, cache, version, key)
            if est.bound == "free":
                totals.append(0.0 * executions)
                continue
            kernels += 1
            if est.priced:
                totals.append(est.time_s * executions)
            else:
                totals.append(0.0)
                unpriced.append(f"'{instr.name}' ({est.note})")
    if unpriced:
        _warn_unpriced_kernels(cost_model.name, module.name, unpriced,
                               warn_stacklevel + 1)
    return float(pd.Series(totals, dtype=float).sum()), kernels, len(unpriced)
