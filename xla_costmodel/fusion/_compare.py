"""`compare_with_xla`: how far a simulated kernel grouping agrees with the one XLA made."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import pandas as pd

from ..analysis._opcodes import DATA_OPCODES
from ..hlo import HloModule
from ._simulate import FusionResult, fusible_computations, layout_change_kind

__all__ = ["FusionComparison", "compare_with_xla", "kernel_assignment"]

_CLONE = re.compile(r"(\.clone(\.\d+)?)+$")


def _base_name(name: str) -> str:
    """XLA marks copies as `name.clone`, `name.clone.3`: strip that."""
    return _CLONE.sub("", name)


def _is_work(instr) -> bool:
    """Not data: layout-only reshapes and transposes are bitcasts to XLA, so they are left out like bitcasts."""
    return instr.opcode not in DATA_OPCODES and layout_change_kind(instr) is None


def _members(instr):
    """The work instructions a kernel runs (fusion bodies, nested fusions included)."""
    fused = instr.fused_computation
    if fused is None:
        yield instr
        return
    for i in fused.instructions:
        if i.opcode == "fusion":
            yield from _members(i)
        elif _is_work(i):
            yield i


def kernel_assignment(module: HloModule, origin: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Which kernel runs each instruction of `module`.

    **Arguments:** `module`; `origin`: name -> input name for copies (as in
    `FusionResult.origin`), so that a duplicated producer is found under its
    input name.

    **Returns:** a DataFrame with `instruction` (input name), `op_name`
    (metadata, may be empty), `opcode`, `shape`, `kernel` (`computation/kernel`), in
    module order; an instruction duplicated into several kernels appears once
    per kernel.
    """
    origin = origin or {}
    rows = []
    for comp in fusible_computations(module):
        for k in comp.instructions:
            if not _is_work(k) or k.opcode in ("while", "conditional", "call"):
                continue
            label = f"{comp.name}/{k.name}"
            for x in _members(k):
                name = origin.get(x.name, x.name)
                rows.append((name, str(x.metadata.get("op_name", "")), x.opcode, str(x.shape.without_layout()), label))
    return pd.DataFrame(rows, columns=["instruction", "op_name", "opcode", "shape", "kernel"])


@dataclass(frozen=True)
class FusionComparison:
    """Agreement of two kernel groupings of the same program.

    - `ari`: adjusted Rand index of the instruction -> kernel assignments,
      over the instructions found in both (1: same grouping; about 0: no
      better than chance). NaN where it is degenerate: when one side puts
      every matched instruction in a single kernel and the other does not,
      the index is 0 whatever the other grouping is; `note` says so.
    - `matched`: how many instructions were found in both, and how
      (`matched_by_name`, `matched_by_op_name`); `ours_instructions` /
      `xla_instructions`: how many each side has.
    - `kernels_ours`, `kernels_xla`: kernels (fusions and unfused ops) on each side.
    - `table`: per matched instruction, its kernel on each side.
    """

    ari: float
    matched: int
    matched_by_name: int
    matched_by_op_name: int
    ours_instructions: int
    xla_instructions: int
    kernels_ours: int
    kernels_xla: int
    table: pd.DataFrame = field(repr=False)
    #: Why `ari` is NaN, or "".
    note: str = ""

    @property
    def coverage(self) -> float:
        """Matched instructions as a fraction of ours."""
        return self.matched / self.ours_instructions if self.ours_instructions else float("nan")

    def summary(self) -> dict:
        return {
            "ari": self.ari,
            "matched": self.matched,
            "coverage": self.coverage,
            "matched_by_name": self.matched_by_name,
            "matched_by_op_name": self.matched_by_op_name,
            "kernels_ours": self.kernels_ours,
            "kernels_xla": self.kernels_xla,
            **({"note": self.note} if self.note else {}),
        }

    def __repr__(self) -> str:
        # Three decimals of the index are all it can tell apart; a repr of every digit is noise to a reader.
        note = f", note={self.note!r}" if self.note else ""
        return (f"FusionComparison(ari={self.ari:.3f}, matched={self.matched}, coverage={self.coverage:.3f}, "
                f"kernels_ours={self.kernels_ours}, kernels_xla={self.kernels_xla}{note})")

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{v:.4g}</td></tr>"
            if isinstance(v, float)
            else f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in self.summary().items()
        )
        return f"<div><b>Kernel grouping vs XLA</b><table>{rows}</table></div>"


def _load(module_or_path) -> HloModule:
    if isinstance(module_or_path, HloModule):
        return module_or_path
    from ..hlo import load_hlo, parse_hlo

    if isinstance(module_or_path, Path) or (isinstance(module_or_path, str) and "\n" not in module_or_path):
        return load_hlo(module_or_path)
    return parse_hlo(module_or_path)


def compare_with_xla(result_or_module, xla_optimized_module) -> FusionComparison:
    """Compare a kernel grouping (ours) with XLA's own (an optimized module).

    Instructions are matched by metadata first: the k-th instruction with a
    given `op_name`, opcode and shape on one side matches the k-th on the
    other, in module order (XLA's compilers rename most instructions, so
    this does most of the work; it needs a module lowered with metadata,
    `lowered.as_text(dialect="hlo", debug_info=True)`). Instructions left
    are matched by name, opcode and shape (`.clone` suffixes ignored; copies made
    by our simulation traced back through `FusionResult.origin`). Parameters,
    constants, tuples, get-tuple-elements and bitcasts (layout-only reshapes and
    transposes among them) are left out.

    **Arguments:** `result_or_module`: a `FusionResult` or a fused `HloModule`;
    `xla_optimized_module`: XLA's optimized module (`HloModule`, HLO text or a path).

    **Returns:** a `FusionComparison` (ARI, coverage, kernel counts, per-instruction table).
    """
    from sklearn.metrics import adjusted_rand_score

    if isinstance(result_or_module, FusionResult):
        ours_module, origin = result_or_module.module, dict(result_or_module.origin)
    elif isinstance(result_or_module, HloModule):
        ours_module, origin = result_or_module, {}
    else:
        raise TypeError(f"compare_with_xla: expected a FusionResult or HloModule, got {type(result_or_module).__name__}")
    xla_module = _load(xla_optimized_module)

    ours = kernel_assignment(ours_module, origin).drop_duplicates("instruction")
    theirs = kernel_assignment(xla_module)
    theirs = theirs.assign(base=theirs["instruction"].map(_base_name)).drop_duplicates("base")
    by_name = {
        (b, op, sh): k for b, op, sh, k in zip(theirs["base"], theirs["opcode"], theirs["shape"], theirs["kernel"])
    }
    # (op_name, opcode, shape) and its occurrence number, in module order.
    their_keys = dict(zip(_occurrence_keys(theirs), theirs["kernel"]))
    rows = []
    matched_name = matched_op = 0
    for (name, opcode, shape, kernel), key in zip(
        ours[["instruction", "opcode", "shape", "kernel"]].itertuples(index=False), _occurrence_keys(ours)
    ):
        k = their_keys.get(key) if key is not None else None
        if k is not None:
            matched_op += 1
            rows.append((name, opcode, kernel, k, "op_name"))
            continue
        k = by_name.get((name, opcode, shape))
        if k is None:
            k = by_name.get((_base_name(name), opcode, shape))
        if k is not None:
            matched_name += 1
            rows.append((name, opcode, kernel, k, "name"))
    table = pd.DataFrame(rows, columns=["instruction", "opcode", "kernel_ours", "kernel_xla", "matched_by"])
    ari = float(adjusted_rand_score(table["kernel_xla"], table["kernel_ours"])) if len(table) else float("nan")
    note = "" if len(table) else "no instruction matched"
    single = [side for side, col in (("XLA", "kernel_xla"), ("ours", "kernel_ours")) if table[col].nunique() == 1]
    if len(table) and len(single) == 1:
        # With one cluster on one side, the Rand index's agreement equals its chance level: 0, whatever the
        # other side does; no information about the grouping.
        ari = float("nan")
        note = (f"{'XLA' if single[0] == 'XLA' else 'the simulation'} put all {len(table)} matched instructions "
                "in a single kernel: the adjusted Rand index is degenerate (0 whatever the other grouping); "
                "compare the kernel counts instead")
    return FusionComparison(
        ari=ari,
        matched=len(table),
        matched_by_name=matched_name,
        matched_by_op_name=matched_op,
        ours_instructions=len(ours),
        xla_instructions=len(theirs),
        kernels_ours=_kernel_count(ours_module),
        kernels_xla=_kernel_count(xla_module),
        table=table,
        note=note,
    )


def _occurrence_keys(df: pd.DataFrame) -> list:
    """(op_name, opcode, shape, k) for the k-th instruction with that op_name, opcode and shape; None without op_name."""
    seen: dict = {}
    out = []
    for op_name, opcode, shape in df[["op_name", "opcode", "shape"]].itertuples(index=False):
        if not op_name:
            out.append(None)
            continue
        base = (op_name, opcode, shape)
        k = seen.get(base, 0)
        seen[base] = k + 1
        out.append(base + (k,))
    return out


def _kernel_count(module: HloModule) -> int:
    from ._simulate import kernels_of

    return sum(1 for _ in kernels_of(module))
