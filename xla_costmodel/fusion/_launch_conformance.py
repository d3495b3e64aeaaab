"""Our launch grids against XLA:GPU's, kernel by kernel (issue: fusion conformance, item 4).

XLA's `*.thunk_sequence.txt` names every kernel it launches with its grid and
threads per block. Each kernel thunk is named after the fusion (or lone
instruction) of the optimized module that it runs, with `.` and `-` turned
into `_` (a sort kernel after its sort, also inside the fusion XLA wraps it in). For each such kernel, `models.launch_dimensions` (our emitter model)
is asked about XLA's own fused instruction, so a mismatch is the emitter
model's alone, never the fusion simulation's.

The comparison is on the total number of blocks and of threads per block:
XLA's emitters use one grid dimension except a few (Triton's multi-dimensional
grids), and our model keeps the products.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ._simulate import fusible_computations

__all__ = ["ThunkLaunch", "compare_launch_grids", "read_thunk_launches", "summarize_launch_grids"]

_THUNK = re.compile(r"^\s*\d+:\s*(\w+)\s*\[[^\]]*\]\s*(\S+)\s+grid:\s*\[([\d,\s]+)\]\s*threads:\s*\[([\d,\s]+)\]"
                    r"(?:\s*shared_memory:\s*(\d+)\s*bytes)?")


@dataclass(frozen=True, slots=True)
class ThunkLaunch:
    """One kernel launch of XLA's thunk sequence: `thunk_kind` (e.g. `kCustomKernel`), `kernel`
    (its name), `grid` and `threads` (x, y, z), `shared_memory_bytes`."""

    thunk_kind: str
    kernel: str
    grid: tuple[int, int, int]
    threads: tuple[int, int, int]
    shared_memory_bytes: int

    @property
    def num_blocks(self) -> int:
        return math.prod(self.grid)

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.threads)


def _triple(text: str) -> tuple[int, int, int]:
    vals = [int(v) for v in text.replace(" ", "").split(",") if v]
    return tuple((vals + [1, 1, 1])[:3])  # type: ignore[return-value]


def read_thunk_launches(text: str) -> list[ThunkLaunch]:
    """The kernel launches (lines with a grid) of XLA's `thunk_sequence.txt`, in order."""
    out = []
    for line in text.splitlines():
        m = _THUNK.match(line)
        if m:
            out.append(ThunkLaunch(m.group(1), m.group(2), _triple(m.group(3)), _triple(m.group(4)),
                                   int(m.group(5) or 0)))
    return out


def _kernel_name(name: str) -> str:
    """How XLA names a kernel after its instruction (`llvm_ir::SanitizeFunctionName`)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _kernel_instructions(module) -> dict[str, Any]:
    """Kernel name -> instruction over every computation that is not a fusion body (while bodies,
    conditionals and called computations launch kernels too)."""
    out: dict[str, Any] = {}
    comps = fusible_computations(module)
    for comp in comps:
        for instr in comp.instructions:
            out.setdefault(_kernel_name(instr.name), instr)
    # A sort kernel is named after its sort, also where XLA wrapped the sort in a fusion.
    for comp in comps:
        for instr in comp.instructions:
            body = instr.fused_computation if instr.opcode == "fusion" else None
            if body is not None and body.root is not None and body.root.opcode == "sort":
                out.setdefault(_kernel_name(body.root.name), instr)
    return out


def _cause(emitter: str, detail: str) -> str:
    """The mismatch group: the emitter, and for reductions the kind of reduction."""
    if emitter == "reduction":
        return "reduction: " + detail.split(" [")[0] if detail else "reduction"
    return emitter


def compare_launch_grids(dump, *, device: Any = None) -> pd.DataFrame:
    """Per kernel of XLA's thunk sequence: XLA's launch against our emitter model's for XLA's own
    kernel (`models.launch_dimensions` on the optimized module's instruction).

    **Arguments:** `dump`: a `GpuCompileDump` with `thunk_text` and `optimized_text`; `device`: the
    preset to model (default: the dump's).

    **Returns:** a DataFrame, one row per kernel launch: `program`, `device`, `kernel`,
    `opcode`, `fusion_kind`, `emitter` (ours), `detail`, `xla_blocks`, `xla_threads_per_block`,
    `ours_blocks`, `ours_threads_per_block`, `same_blocks`, `same_threads`, `equal` (both),
    `cause` (the emitter group of a mismatch, `"unmatched"` when no instruction has the kernel's
    name, `"error: ..."` when our model fails on it).

    **Raises:** `ValueError` when the dump lacks the optimized module or the thunk sequence.
    """
    from ..devices import get_device
    from ..hlo import parse_hlo
    from ..models import launch_dimensions

    if not dump.optimized_text or not dump.thunk_text:
        missing = "optimized module (optimized.txt)" if not dump.optimized_text else "thunk_sequence.txt"
        raise ValueError(f"compare_launch_grids: the dump of {dump.program or dump.dump_dir!r} has no {missing}; "
                         "compile it again with compile_with_fusion_dumps")
    dev = get_device(device or dump.device) if isinstance(device or dump.device, str) else device
    module = parse_hlo(dump.optimized_text)
    instrs = _kernel_instructions(module)
    # XLA's TopK custom kernel is called "topk" whichever call it runs: take the calls in order
    topk = [i for c in fusible_computations(module) for i in c.instructions
            if i.opcode == "custom-call" and i.attribute("custom_call_target", "") == "__gpu$TopK"]
    rows = []
    for t in read_thunk_launches(dump.thunk_text):
        row: dict[str, Any] = {"program": dump.program, "device": dev.name, "kernel": t.kernel,
                               "xla_blocks": t.num_blocks, "xla_threads_per_block": t.threads_per_block,
                               "xla_grid": list(t.grid), "xla_threads": list(t.threads)}
        instr = topk.pop(0) if t.kernel == "topk" and topk else instrs.get(t.kernel)
        if instr is None:
            row.update(opcode="", fusion_kind="", emitter="", detail="", ours_blocks=None,
                       ours_threads_per_block=None, same_blocks=False, same_threads=False, equal=False,
                       cause="unmatched")
            rows.append(row)
            continue
        row.update(opcode=instr.opcode, fusion_kind=instr.fusion_kind if instr.opcode == "fusion" else "")
        try:
            ld = launch_dimensions(instr, dev)
        except Exception as e:  # noqa: BLE001 - one kernel the model cannot place is a row, not the end
            row.update(emitter="", detail="", ours_blocks=None, ours_threads_per_block=None, same_blocks=False,
                       same_threads=False, equal=False, cause=f"error: {type(e).__name__}: {str(e)[:120]}")
            rows.append(row)
            continue
        same_b = ld.num_blocks == t.num_blocks
        same_t = ld.threads_per_block == t.threads_per_block
        row.update(emitter=ld.emitter, detail=ld.detail, ours_blocks=ld.num_blocks,
                   ours_threads_per_block=ld.threads_per_block, same_blocks=same_b, same_threads=same_t,
                   equal=same_b and same_t, cause="" if same_b and same_t else _cause(ld.emitter, ld.detail))
        rows.append(row)
    return pd.DataFrame(rows, columns=[
        "program", "device", "kernel", "opcode", "fusion_kind", "emitter", "detail", "xla_blocks",
        "xla_threads_per_block", "ours_blocks", "ours_threads_per_block", "same_blocks", "same_threads",
        "equal", "cause", "xla_grid", "xla_threads"])


def summarize_launch_grids(table: pd.DataFrame) -> dict[str, Any]:
    """Kernels, the share with XLA's grid and block size, and the mismatches per cause (with the
    share of each emitter's kernels that are equal)."""
    n = len(table)
    equal = int(table["equal"].sum()) if n else 0
    mism = table[~table["equal"].astype(bool)] if n else table
    by_emitter = {}
    if n:
        for em, g in table.groupby("emitter"):
            by_emitter[em or "(none)"] = f"{int(g['equal'].sum())}/{len(g)}"
    return {"kernels": n, "equal": equal, "share_equal": equal / n if n else math.nan,
            "mismatch_causes": dict(mism["cause"].value_counts()) if len(mism) else {},
            "equal_by_emitter": by_emitter}
