"""XLA's `HloCostAnalysis` of a module, the public API: `cost_analysis`, `module_cost`,
`instruction_cost_table`, `instruction_costs` (the interpreter is `_interpreter`, record arithmetic `_records`, the visit
order `_order`, trip counts `_trip_count`)."""

from __future__ import annotations

import math
from typing import Any

from .._gc import gc_paused
from ._interpreter import Analysis as Analysis
from ._interpreter import CostAnalysisWarning as CostAnalysisWarning
from ._records import InstructionCost as InstructionCost
from ._records import _record_to_xla_dict
from ._rules import BYTES, FLOPS, OPB, OPU, OUT, TRANS, UNPRICED, UTIL
from ._trip_count import _loop_multipliers, _TripAware
from ._trip_count import while_trip_count as while_trip_count


__all__ = [
    "CostAnalysisWarning",
    "InstructionCost",
    "cost_analysis",
    "instruction_cost_table",
    "instruction_costs",
    "module_cost",
    "while_trip_count",
]


# ---------------------------------------------------------------------------
# Public API


def check_module(module) -> None:
    if not hasattr(module, "entry") or not hasattr(module, "computations"):
        raise TypeError(f"expected an HloModule (from xla_costmodel.parse_hlo / load_hlo), got {type(module).__name__}")
    if module.entry is None:
        raise ValueError(f"module '{module.name}' has no entry computation")


def _analysis_for(module, *, entry_only: bool = False, **kwargs) -> Analysis:
    check_module(module)
    an = Analysis(module, **kwargs)
    with gc_paused():
        if entry_only:
            an.entry_sum()
        else:
            an.analyze_module()
    an.emit_warnings()
    return an


def module_cost(module, *, trip_counts: bool = True, warn: bool = True) -> dict[str, Any]:
    """XLA's `HloCostAnalysis` totals for a module, as `Compiled.cost_analysis()` reports them.

    **Arguments:**

    - `module`: an `HloModule` (`xla_costmodel.parse_hlo(text)`).
    - `trip_counts`: also compute the trip-count-aware totals (below).
    - `warn`: warn about unpriced opcodes.

    **Returns:** a dict with

    - `flops`, `transcendentals`, `bytes_accessed`: XLA's numbers, bit for bit
      (a while loop's body counted once, a conditional's most expensive branch,
      a custom call as -1);
    - `output_bytes_accessed`: XLA's `bytes accessedout{}`;
    - `operand_utilization`, `operand_bytes_accessed`: `{i: value}`, XLA's
      `utilization{i}{}` / `bytes accessed{i}{}`, i.e. the per-operand-index
      sums over the entry computation (as XLA reports them for the module);
    - `parameter_utilization`, `parameter_bytes_accessed`: `{parameter
      number: value}` for each entry parameter: its utilization and bytes read
      summed over the instructions that read it (1.0 = read once, in full;
      0.25 = a quarter of it is read; 2.0 = read twice);
    - `xla_properties`: every non-zero property under XLA's key names, to
      compare 1:1 with `Compiled.cost_analysis()`;
    - `unpriced`: `{opcode or "custom-call:<target>": count}` of instructions
      whose cost is unknown (empty when everything is priced);
    - with `trip_counts`: `flops_trip_count_aware`,
      `transcendentals_trip_count_aware`, `bytes_accessed_trip_count_aware`
      (loop bodies counted trip-count times and conditions trip-count + 1
      times, where the trip count is known), `trip_counts_known` (True when
      every loop's count was known) and `while_loops` (one dict per loop:
      `name`, `computation`, `trip_count`, `source`).
    """
    an = _analysis_for(module, warn=warn, entry_only=True)
    return _module_cost_from(an, trip_counts=trip_counts)


def _module_cost_from(an: Analysis, *, trip_counts: bool = True) -> dict[str, Any]:
    total = an.entry_sum()
    result: dict[str, Any] = {
        "flops": float(total[FLOPS]),
        "transcendentals": float(total[TRANS]),
        "bytes_accessed": float(total[BYTES]),
        "output_bytes_accessed": float(total[OUT]),
        "operand_utilization": {i: float(v) for i, v in enumerate(total[OPU]) if v},
        "operand_bytes_accessed": {i: float(v) for i, v in enumerate(total[OPB]) if v},
        "xla_properties": _record_to_xla_dict(total),
        "unpriced": an.unpriced,
    }
    param_util: dict[int, float] = {}
    param_bytes: dict[int, float] = {}
    records = an._records
    for param in an.module.entry.parameters:
        util = 0.0
        read = 0.0
        for user in param.users:
            p = records.get(user)
            if p is None:
                continue
            for i, operand in enumerate(user.operands):
                if operand is param:
                    util += p[OPU][i] if i < len(p[OPU]) else 0.0
                    read += p[OPB][i] if i < len(p[OPB]) else 0.0
        param_util[param.parameter_number] = float(util)
        param_bytes[param.parameter_number] = float(read)
    result["parameter_utilization"] = param_util
    result["parameter_bytes_accessed"] = param_bytes
    if trip_counts:
        ta = _TripAware(an)
        f, t, b, known = ta.computation(an.module.entry)
        result.update(
            flops_trip_count_aware=float(f),
            transcendentals_trip_count_aware=float(t),
            bytes_accessed_trip_count_aware=float(b),
            trip_counts_known=bool(known),
            while_loops=ta.loops,
        )
    return result


_COLUMNS = [
    "computation",
    "name",
    "opcode",
    "shape",
    "flops",
    "transcendentals",
    "bytes_accessed",
    "output_bytes_accessed",
    "operand_bytes_accessed",
    "operand_utilization",
    "utilization",
    "in_entry",
    "fused",
    "loop_multiplier",
    "trip_count",
    "unpriced",
    "unpriced_ops",
]


def _dataframe(an: Analysis, extra_columns=None, analyze: bool = True):
    import pandas as pd

    module = an.module
    if analyze:
        with gc_paused():
            an.analyze_module()
    mult = _loop_multipliers(module, an)
    fused_comps = {id(i.fused_computation) for _, i in module.instructions() if i.fused_computation is not None}
    entry = module.entry
    rows = []
    for comp in module.computations:
        m = mult.get(id(comp), math.nan)
        in_entry = comp is entry
        fused = id(comp) in fused_comps
        for instr in comp.instructions:
            p = an._records.get(instr)
            if p is None:
                continue
            own_unpriced = instr.opcode not in an._rules or instr.opcode == "custom-call" and bool(p[UNPRICED])
            trip = math.nan
            if instr.opcode == "while":
                n, _ = while_trip_count(instr)
                trip = float(n) if n is not None else math.nan
            row = [
                comp.name,
                instr.name,
                instr.opcode,
                str(instr.shape),
                float(p[FLOPS]),
                float(p[TRANS]),
                float(p[BYTES]),
                float(p[OUT]),
                tuple(float(v) for v in p[OPB]),
                tuple(float(v) for v in p[OPU]),
                float(p[UTIL]),
                in_entry,
                fused,
                m,
                trip,
                bool(own_unpriced),
                tuple(p[UNPRICED]),
            ]
            if extra_columns:
                row.extend(fn(instr, p) for _, fn in extra_columns)
            rows.append(row)
    columns = list(_COLUMNS) + [name for name, _ in (extra_columns or ())]
    df = pd.DataFrame(rows, columns=columns)
    df.attrs["module"] = module.name
    df.attrs["unpriced"] = an.unpriced
    return df


def cost_analysis(module, *, warn: bool = True) -> dict[str, float]:
    """What jax's `Compiled.cost_analysis()` gives for the module: XLA's `HloCostAnalysis` totals under
    XLA's own key names (`"flops"`, `"transcendentals"`, `"bytes accessed"`, `"bytes accessedout{}"`,
    `"bytes accessed0{}"`, `"utilization0{}"`, ...), every non-zero property, as floats.

    A while loop's body counts once, a conditional's most expensive branch, a custom call XLA cannot count
    as -1: as XLA counts. `module_cost` has the same totals under Python names, with the trip-count-aware
    totals and what could not be priced; `instruction_cost_table` has them per instruction.

    **Arguments:** `module` (an `HloModule`, e.g. `parse_hlo(jax.jit(f).lower(x).compile().as_text())`);
    `warn`: warn about unpriced opcodes.
    """
    return dict(module_cost(module, trip_counts=False, warn=warn)["xla_properties"])


def instruction_cost_table(module, *, warn: bool = True):
    """XLA's `HloCostAnalysis`, one row per instruction.

    Every instruction of every computation gets a row. Instructions of the
    entry computation (`in_entry`) add up to the module totals of
    `module_cost`; the others are already included in the instruction that
    calls their computation (a fusion, loop, reducer, ...), as in XLA. Fused
    instructions carry XLA's nested figures plus their `utilization`. A fusion
    row is computed through its fused computation, with XLA's rules for what
    it reads: the parts of operands that slices, dynamic slices and gathers
    take, a parameter read once however many fused instructions use it, and
    in place dynamic-update-slice outputs costed by the update.

    **Arguments:** `module` (an `HloModule`); `warn`: warn about unpriced opcodes.

    **Returns:** a `pandas.DataFrame` with columns `computation`, `name`,
    `opcode`, `shape`, `flops`, `transcendentals`, `bytes_accessed`,
    `output_bytes_accessed`, `operand_bytes_accessed` (tuple, per operand
    index), `operand_utilization` (tuple), `utilization` (inside fusions),
    `in_entry`, `fused` (inside a fused computation), `loop_multiplier` (how
    many times the computation runs per execution of the module, through known
    while-loop trip counts; NaN when a loop's count is unknown), `trip_count`
    (on `while` rows), `unpriced` (True where the instruction's own cost is
    unknown) and `unpriced_ops` (what is unknown here or in called
    computations). `df.attrs["unpriced"]` has the module-wide counts.
    """
    an = _analysis_for(module, warn=warn)
    return _dataframe(an)


def instruction_costs(module, *, warn: bool = True) -> dict[tuple[str, str], InstructionCost]:
    """XLA's properties of every instruction as frozen `InstructionCost`s.

    **Arguments:** `module` (an `HloModule`); `warn`: warn about unpriced opcodes.

    **Returns:** `{(computation name, instruction name): InstructionCost}`.
    Summing the entry computation's costs (`sum(...)`) gives the module totals.
    """
    an = _analysis_for(module, warn=warn)
    return {
        (instr.computation.name if instr.computation is not None else "", instr.name): InstructionCost._from_record(p)
        for instr, p in an._records.items()
    }
