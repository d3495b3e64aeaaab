"""`compare_with_xla`: how far a simulated kernel grouping agrees with the one XLA made."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import pandas as pd

from ..analysis.opcodes import DATA_OPCODES
from ..hlo import HloModule
from ._simulate import FusionResult, fusible_computations, layout_change_kind

__all__ = ["FusionComparison", "compare_with_xla", "kernel_assignment", "structure_keys"]

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
      (`matched_by_op_name`, `matched_by_name`, `matched_by_structure`);
      `ours_instructions` / `xla_instructions`: how many each side has.
    - `kernels_ours`, `kernels_xla`: kernels (fusions and unfused ops) on each side.
    - `table`: per matched instruction, its kernel on each side.
    - `unmatched`: our instructions found nowhere in XLA's module (`instruction`,
      `opcode`, `kernel`): mostly what XLA's passes before fusion rewrote or
      removed (a dot made a cuBLAS call, an op simplified away or merged by CSE).
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
    matched_by_structure: int = 0
    unmatched: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
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
            "matched_by_op_name": self.matched_by_op_name,
            "matched_by_name": self.matched_by_name,
            "matched_by_structure": self.matched_by_structure,
            "unmatched": self.ours_instructions - self.matched,
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
    given `op_name`, opcode, shape and operand structure (`structure_keys`, two
    levels, then one) on one side matches the k-th on the other, in module
    order, then the same without the operands (XLA's compilers rename most instructions, so
    this does most of the work; it needs a module lowered with metadata,
    `lowered.as_text(dialect="hlo", debug_info=True)`). Instructions left
    are matched by name, opcode and shape (`.clone` suffixes ignored; copies made
    by our simulation traced back through `FusionResult.origin`). Those still
    left are matched by structure, for modules without metadata whose names
    XLA changed: the k-th instruction with a given opcode, shape and the
    opcodes and shapes of its operands and of their operands, seen through
    fusion boundaries, bitcasts and copies (`structure_keys`), matches the k-th
    on the other side; then the same with operands one level up only. Parameters,
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
    their_kernel = dict(zip(theirs["instruction"], theirs["kernel"]))
    their_order = list(theirs["instruction"])
    ours_rows = list(ours[["instruction", "op_name", "opcode", "shape", "kernel"]].itertuples(index=False, name=None))
    their_rows = {n: (op_name, opcode, shape) for n, op_name, opcode, shape in
                  theirs[["instruction", "op_name", "opcode", "shape"]].itertuples(index=False, name=None)}
    ours_structure = {d: structure_keys(ours_module, d, origin=origin) for d in _STRUCTURE_DEPTHS}
    their_structure = {d: structure_keys(xla_module, d) for d in _STRUCTURE_DEPTHS}
    rows = []
    taken: set = set()  # XLA's instructions already matched
    counts = {"op_name": 0, "name": 0, "structure": 0}

    def stage(left, label, ours_key, their_key):
        """Match each instruction of `left` to the first free XLA instruction with the same key, in order."""
        free: dict = {}
        for n in their_order:
            if n not in taken:
                k = their_key(n)
                if k is not None:
                    free.setdefault(k, []).append(n)
        still = []
        for row in left:
            k = ours_key(row)
            queue = free.get(k) if k is not None else None
            if queue:
                n = queue.pop(0)
                taken.add(n)
                counts[label] += 1
                rows.append((row[0], row[2], row[4], their_kernel[n], label))
            else:
                still.append(row)
        return still

    def with_op_name(key):
        return lambda t: key + (t[0],) if t[0] else None

    left = ours_rows
    # metadata: with the operands' structure first (XLA repeats an op_name over many instructions), then alone
    for depth in _STRUCTURE_DEPTHS:
        left = stage(left, "op_name", lambda r: (r[1], r[2], r[3], ours_structure[depth].get(r[0])) if r[1] else None,
                     lambda n: (*their_rows[n], their_structure[depth].get(n)) if their_rows[n][0] else None)
    left = stage(left, "op_name", lambda r: (r[1], r[2], r[3]) if r[1] else None,
                 lambda n: their_rows[n] if their_rows[n][0] else None)
    # names (`.clone` suffixes ignored), then structure alone: operands two levels up first, then one
    # level (XLA's simplifier often changes what feeds an operand, e.g. a broadcast of a constant)
    base_of = dict(zip(theirs["instruction"], theirs["base"]))
    by_base = {(base_of[n], *their_rows[n][1:]) for n in their_order}
    left = stage(left, "name", lambda r: (r[0], r[2], r[3]) if (r[0], r[2], r[3]) in by_base
                 else (_base_name(r[0]), r[2], r[3]), lambda n: (base_of[n], *their_rows[n][1:]))
    for depth in _STRUCTURE_DEPTHS:
        left = stage(left, "structure", lambda r: ours_structure[depth].get(r[0]),
                     lambda n: their_structure[depth].get(n))
    matched_op, matched_name, matched_structure = counts["op_name"], counts["name"], counts["structure"]
    left = [(r[0], r[2], r[4]) for r in left]
    unmatched = left
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
        matched_by_structure=matched_structure,
        unmatched=pd.DataFrame(unmatched, columns=["instruction", "opcode", "kernel"]),
        note=note,
    )


_STRUCTURE_DEPTHS = (2, 1)

# Instructions that pass their operand's value on unchanged, for structural matching
# (XLA's layout assignment adds copies and makes reshapes bitcasts).
_SAME_VALUE = frozenset({"bitcast", "copy"})


def structure_keys(module: HloModule, depth: int = 2, origin: Mapping[str, str] | None = None) -> dict[str, tuple]:
    """Instruction name -> a key that the same computation has whatever its name and kernel grouping.

    The key is the instruction's opcode and shape (without layout), with the
    keys of its operands to `depth` levels. Operands are seen through kernel
    boundaries, as data flows: a fused parameter is the fusion's operand, a
    fusion (or a get-tuple-element of a multi-output one) is the value its
    body computes; bitcasts, copies and layout-only reshapes and transposes
    are the value they relabel. Two modules that differ only in names and
    fusion decisions give equal keys to corresponding instructions; equal
    keys within one module are told apart by the caller (in order).
    `origin`: name -> input name for copies (as in `FusionResult.origin`): a
    copy is listed under its input's name (the first copy's key).
    """
    caller: dict[int, object] = {}  # fused computation -> the fusion that calls it
    for _, instr in module.instructions():
        if instr.opcode == "fusion" and instr.fused_computation is not None:
            caller[id(instr.fused_computation)] = instr

    resolved: dict[int, object] = {}

    def value(x):
        """The instruction whose value `x` is, through kernel boundaries and relabellings."""
        start = x
        hit = resolved.get(id(start))
        if hit is not None:
            return hit
        for _ in range(10_000):
            op = x.opcode
            if op == "parameter":
                f = caller.get(id(x.computation)) if x.computation is not None else None
                if f is None or x.parameter_number >= len(f.operands):
                    break
                x = f.operands[x.parameter_number]
            elif op == "fusion" and x.fused_computation is not None:
                x = x.fused_computation.root
            elif op == "get-tuple-element" and x.operands:
                src = value(x.operands[0])
                if src.opcode == "tuple":
                    index = x.attribute("index", 0)
                    if isinstance(index, int) and index < len(src.operands):
                        x = src.operands[index]
                        continue
                break
            elif (op in _SAME_VALUE or layout_change_kind(x) is not None) and x.operands:
                x = x.operands[0]
            else:
                break
        resolved[id(start)] = x
        return x

    level: dict[int, tuple] = {}

    def base(x) -> tuple:
        k = level.get(id(x))
        if k is None:
            k = level[id(x)] = (x.opcode, str(x.shape.without_layout()))
        return k

    keys: dict[int, tuple] = {}

    def key(x, d: int) -> tuple:
        if d == 0:
            return base(x)
        memo = (id(x), d)
        k = keys.get(memo)
        if k is None:
            k = keys[memo] = base(x) + (tuple(key(value(o), d - 1) for o in x.operands),)
        return k

    origin = origin or {}
    out: dict[str, tuple] = {}
    for _, instr in module.instructions():
        if _is_work(instr):
            out.setdefault(origin.get(instr.name, instr.name), key(instr, depth))
    return out


def _kernel_count(module: HloModule) -> int:
    from ._simulate import kernels_of

    return sum(1 for _ in kernels_of(module))
