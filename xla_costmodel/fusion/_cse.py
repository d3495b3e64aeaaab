"""XLA's `HloCSE` and `HloDCE` on a module as JAX lowers it, as XLA:GPU runs them before fusion.

A lowered module repeats work that XLA merges before any kernel is made: the same broadcast of a
constant, the same transpose of a weight, a reduction written twice by two parts of the program
(pass-by-pass dumps of corpus programs put 35 kernels on `cse` and 23 on `dce` in 24 programs;
`scripts/bench_pipeline.py --attribute`). Two instructions are one when they have the same opcode,
shape, attributes (metadata aside), constants' literals, called computations by content and the
same operands (`HloInstruction::Identical`, with called computations compared structurally as
HloCSE does). Instructions with side effects are never merged or removed. Then what no one reads
(and is not a root) is removed, as `HloDCE` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hlo import HloComputation, HloInstruction, HloModule
from ..hlo.editing import ContentIds

__all__ = ["CseResult", "eliminate_common_subexpressions"]

# Opcodes whose instructions XLA never merges or removes (`HasSideEffect`), and those whose
# identity is not their content (parameters are bound by number; barriers keep what they order).
_SIDE_EFFECTS = frozenset({
    "rng", "send", "send-done", "recv", "recv-done", "infeed", "outfeed", "after-all", "add-dependency",
    "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start", "all-gather-done",
    "all-to-all", "collective-permute", "collective-permute-start", "collective-permute-done",
    "reduce-scatter", "collective-broadcast", "async-start", "async-update", "async-done",
    "copy-start", "copy-done", "domain", "optimization-barrier",
})


def _has_side_effect(instr: HloInstruction) -> bool:
    if instr.opcode in _SIDE_EFFECTS:
        return True
    if instr.opcode == "custom-call":
        return str(instr.raw_attributes.get("custom_call_has_side_effect", "")).lower() == "true"
    return False


def remove_unread(comp: HloComputation, candidates: list[HloInstruction]) -> int:
    """`HloDCE` from `candidates`: each left without users (not the root, a parameter or a side effect), and
    then its operands, removed from `comp`; how many were. The one DCE walk of the passes before fusion."""
    n = 0
    todo = list(candidates)
    while todo:
        instr = todo.pop()
        if (instr.users or instr is comp.root or instr.opcode == "parameter" or instr.computation is not comp
                or _has_side_effect(instr)):
            continue
        todo.extend(instr.operands)
        comp.remove_instruction(instr)
        n += 1
    return n


@dataclass(frozen=True)
class CseResult:
    """How many instructions CSE merged into an identical one and DCE removed as unread."""

    merged: int
    removed: int


def eliminate_common_subexpressions(module: HloModule, computations=None) -> CseResult:
    """Merge identical instructions of `module` (every computation but fusion bodies, or
    `computations`) and remove the unread ones, in place."""
    content = ContentIds()
    comps = list(module.computations) if computations is None else list(computations)
    fused_bodies = {id(i.fused_computation) for _, i in module.instructions()
                    if i.opcode == "fusion" and i.fused_computation is not None}
    merged = removed = 0
    for comp in comps:
        if id(comp) in fused_bodies:
            continue
        seen: dict = {}
        for instr in comp.post_order():
            if instr.opcode == "parameter" or _has_side_effect(instr):
                continue
            key = (content._local_id(instr), tuple(id(o) for o in instr.operands))
            first = seen.get(key)
            if first is None:
                seen[key] = instr
                continue
            instr.replace_all_uses_with(first)
            merged += 1
        # DCE: unread instructions, last first so that their operands become unread in turn
        for instr in reversed(comp.post_order()):
            if instr.users or instr is comp.root or instr.opcode == "parameter" or _has_side_effect(instr):
                continue
            comp.remove_instruction(instr)
            removed += 1
    if removed:
        _drop_unreachable(module)
    return CseResult(merged, removed)


def _drop_unreachable(module: HloModule) -> None:
    """Remove the computations no instruction calls any more (the reducer of a removed reduce):
    a computation left behind would be fused as if it ran."""
    if module.entry is None:
        return
    reached = {id(module.entry)}
    todo = [module.entry]
    while todo:
        for instr in todo.pop().instructions:
            for c in instr.called_computations:
                if id(c) not in reached:
                    reached.add(id(c))
                    todo.append(c)
    for c in list(module.computations):
        if id(c) not in reached:
            module.remove_computation(c)
