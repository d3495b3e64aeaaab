"""`TableSummary`: the totals of an `analyze` table (`KernelTable.summary()`), as a small frozen object."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Iterator

from .._text import count

__all__ = ["TableSummary"]


def _fmt_time(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return str(seconds)
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= factor:
            return f"{seconds / factor:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


@dataclass(frozen=True)
class TableSummary(Mapping):
    """The totals of an `analyze` table, per execution of the module.

    **Attributes:** `module`, `device`, `model` (names); `total_s` (predicted
    seconds per run of the module: Σ `time_s × executions` over the priced
    kernels; NaN when the table has no `total_s` column); `kernels`
    (instructions run as kernels, free ones excluded), `unpriced` (kernels
    the model could not price), `free` (instructions that run no code:
    parameters, tuples, bitcasts, ...), `assumed_counts` (kernels whose
    execution count was assumed); `time_by_bound_s` (seconds per run by
    bound: compute, memory, launch, ...); `priced_module` (what was priced:
    `KernelTable.priced_module`); `unknown_loops` (loops whose trip count
    was assumed) and `total_is_lower_bound` (True when there is one);
    `textbook_counts` (kernels whose count columns are textbook counts where
    XLA's cost analysis has none, -1 or 0 for top-k: the table's count columns add up to
    `Compiled.cost_analysis()` with `KernelTable.counts_as_xla()` only).

    Reads like the dict it replaces (`s["kernels"]`, `dict(s)`);
    `to_frame()` gives a one-row DataFrame, `to_dict()` plain JSON-ready
    values; it renders as a sentence in notebooks (`_repr_html_`).
    """

    module: str | None
    device: str | None
    model: str | None
    total_s: float
    kernels: int
    unpriced: int
    free: int
    assumed_counts: int
    time_by_bound_s: Mapping[str, float] = field(default_factory=dict)
    priced_module: str | None = None
    unknown_loops: tuple = ()
    textbook_counts: tuple = ()

    @property
    def total_is_lower_bound(self) -> bool:
        """Whether a loop's trip count was assumed, making `total_s` a lower bound (the default assumes 1)."""
        return bool(self.unknown_loops)

    def _lower_bound_note(self) -> str:
        if not self.unknown_loops:
            return ""
        shown = ", ".join(self.unknown_loops[:5]) + (f" and {len(self.unknown_loops) - 5} more"
                                                     if len(self.unknown_loops) > 5 else "")
        return (f"; a lower bound: the trip count of {count(len(self.unknown_loops), 'while loop')} ({shown}) "
                f"is unknown (give it with analyze(..., trip_counts={{name: n}}))")

    # ------------------------------------------------------------ dict-like
    def __getitem__(self, key: str) -> Any:
        if key not in self._keys():
            raise KeyError(f"{key!r}; a table summary has {', '.join(self._keys())}")
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    @classmethod
    def _keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    # ------------------------------------------------------------ views
    def to_dict(self) -> dict[str, Any]:
        """Plain values (JSON-ready: NaN as None), the field names as keys."""
        out = {k: getattr(self, k) for k in self._keys()}
        out["time_by_bound_s"] = {str(k): float(v) for k, v in self.time_by_bound_s.items()}
        out["unknown_loops"] = list(self.unknown_loops)
        out["textbook_counts"] = list(self.textbook_counts)
        if isinstance(out["total_s"], float) and not math.isfinite(out["total_s"]):
            out["total_s"] = None
        return out

    def to_frame(self):
        """One row: the names, `total_s`, the counts, and `<bound>_s` per bound (seconds per run)."""
        import pandas as pd

        row = {k: getattr(self, k) for k in self._keys()
               if k not in ("time_by_bound_s", "unknown_loops", "textbook_counts")}
        row["total_is_lower_bound"] = self.total_is_lower_bound
        row.update({f"{bound}_s": float(t) for bound, t in self.time_by_bound_s.items()})
        return pd.DataFrame([row])

    def __repr__(self) -> str:
        # Times as a reader writes them (`20.58 µs`), not every digit of a float.
        by_bound = ", ".join(f"{k}: {_fmt_time(v)}" for k, v in self.time_by_bound_s.items())
        loops = f", unknown_loops={self.unknown_loops!r}" if self.unknown_loops else ""
        return (f"TableSummary(module={self.module!r}, device={self.device!r}, model={self.model!r}, "
                f"total={_fmt_time(self.total_s)}, kernels={self.kernels}, unpriced={self.unpriced}, "
                f"free={self.free}, assumed_counts={self.assumed_counts}, time_by_bound={{{by_bound}}}{loops})")

    def __str__(self) -> str:
        extra = (f", {self.unpriced} unpriced" if self.unpriced else "") + (
            f", {self.assumed_counts} with assumed execution counts" if self.assumed_counts else "")
        return (f"{self.module} on {self.device} ({self.model}): total {_fmt_time(self.total_s)} per run over "
                f"{count(self.kernels, 'kernel')}{extra} ({count(self.free, 'free instruction')})"
                + self._lower_bound_note() + self._textbook_note())

    def _textbook_note(self) -> str:
        if not self.textbook_counts:
            return ""
        return (f"; the counts of {', '.join(self.textbook_counts)} are textbook counts where XLA's cost analysis "
                f"has none (-1, or 0 for top-k): the count columns add up to Compiled.cost_analysis() with "
                f"table.counts_as_xla()")

    def _repr_html_(self) -> str:
        unpriced = f", <b style='color:#b00'>{self.unpriced} unpriced</b>" if self.unpriced else ""
        assumed = f", {self.assumed_counts} with assumed execution counts" if self.assumed_counts else ""
        bounds = ", ".join(f"{k}: {_fmt_time(v)}" for k, v in sorted(self.time_by_bound_s.items(), key=lambda kv: -kv[1]))
        return (
            f"<p><b>{html.escape(str(self.module))}</b> on <b>{html.escape(str(self.device))}</b> "
            f"({html.escape(str(self.model))}): total <b>{_fmt_time(self.total_s)}</b> per run over "
            f"{count(self.kernels, 'kernel')}{unpriced}{assumed} ({count(self.free, 'free instruction')})"
            + (f"<br>by bound: {html.escape(bounds)}" if bounds else "")
            + (f"<br>priced: {html.escape(self.priced_module)}" if self.priced_module else "")
            + (f"<br>{html.escape(self._lower_bound_note()[2:])}" if self.unknown_loops else "")
            + "</p>"
        )
