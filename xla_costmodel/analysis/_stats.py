"""`module_stats`: what `xla-costmodel stats FILE --json` prints."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ._cost import _analysis_for, _module_cost_from

__all__ = ["module_stats"]


def module_stats(module, *, warn: bool = False) -> dict[str, Any]:
    """Counts and XLA cost totals of a module, JSON-ready.

    **Arguments:** `module`, an `HloModule`; `warn`: warn about unpriced opcodes.

    **Returns:** a dict with `module` (its name), `computations` (count), `instructions`
    (count, all computations), `entry_instructions`, `opcodes` (`{opcode:
    count}` over all computations, most frequent first), `flops`,
    `transcendentals`, `bytes_accessed` (XLA's `HloCostAnalysis` totals, as
    `Compiled.cost_analysis()` reports them), the trip-count-aware variants
    `flops_trip_count_aware`, `transcendentals_trip_count_aware`,
    `bytes_accessed_trip_count_aware` (each `while` body counted once per trip,
    its condition once more), `trip_counts_known` (False when a loop's count is
    unknown: the aware totals then count its body once), `loops` (one
    `{"name", "computation", "trip_count", "source"}` per `while`/`scan`,
    `source` being where the count comes from: `"backend_config"`, as XLA and
    `simulate_fusion` record it, `"induction variable"`, `"scan"`, or
    `"unknown"` with `trip_count` None), and `unpriced` (`{opcode: count}`).
    """
    counts = Counter(instr.opcode for _, instr in module.instructions())
    an = _analysis_for(module, warn=warn)
    cost = _module_cost_from(an, trip_counts=True)
    return {
        "module": module.name,
        "computations": len(module.computations),
        "instructions": sum(counts.values()),
        "entry_instructions": len(module.entry.instructions),
        "opcodes": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "flops": cost["flops"],
        "transcendentals": cost["transcendentals"],
        "bytes_accessed": cost["bytes_accessed"],
        "flops_trip_count_aware": cost["flops_trip_count_aware"],
        "transcendentals_trip_count_aware": cost["transcendentals_trip_count_aware"],
        "bytes_accessed_trip_count_aware": cost["bytes_accessed_trip_count_aware"],
        "trip_counts_known": cost["trip_counts_known"],
        "loops": [dict(loop) for loop in cost["while_loops"]],
        "unpriced": cost["unpriced"],
    }
