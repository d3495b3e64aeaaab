"""Schedule-context features: what a kernel's neighbours in its program do to its time.

Stevens & Klöckner's features describe a kernel alone. A kernel of a real
program runs after other kernels and, on XLA:CPU, possibly at the same time
as them (the thunk executor hands independent thunks to the thread pool), so
the same kernel costs more or less depending on where it runs. These
features describe that context, read from the kernel's computation in the
compiled module (its instruction order is the schedule of a scheduled
module):

- `program_kernels_log2`: log₂ of the number of kernels in the kernel's
  computation (0 for a kernel that runs alone). A thunk of a larger
  executable pays more dispatch bookkeeping: on this project's CPU, kernels
  of a few elements take about 0.24 µs in the measurement suite and
  0.28-0.31 µs inside programs.
- `reuse_l3_bytes`, `reuse_dram_bytes`: operand bytes whose *reuse
  distance* exceeds the L2 (the data comes from L3) or the L3 cache (from
  memory). The reuse distance of an operand is the bytes that the kernels
  run between its producer and this kernel write, plus the operand itself;
  a parameter or constant was last touched one run earlier, so its
  distance is what all kernels of the computation write. In the suite, a
  kernel's operands are its program's parameters, re-read each run, so
  there this equals the footprint classification of `bytes_l3`/`bytes_dram`;
  in a program, an operand written just before is still in cache.
- `concurrent_kernels`, `concurrent_bytes`: kernels within
  `CONCURRENCY_WINDOW` schedule positions that neither depend on this kernel
  nor it on them, and the bytes they write: work the thread pool may run
  at the same time, competing for the cores and memory bandwidth (summed
  per-kernel times of such programs exceed their wall time by up to 1.7x).

A kernel outside any computation (a fusion built to price a fusion
decision) gets the context of a kernel run alone: no program, operands at
the reuse distance of their own size, nothing concurrent.
"""

from __future__ import annotations

import math
import weakref

from ..analysis.opcodes import CONTROL_FLOW_OPCODES, is_free

__all__ = ["CONTEXT_FEATURES", "CONTEXT_FEATURE_GROUPS", "CONCURRENCY_WINDOW", "context_features"]

CONTEXT_FEATURES: tuple[str, ...] = (
    "program_kernels_log2", "reuse_l3_bytes", "reuse_dram_bytes", "concurrent_kernels", "concurrent_bytes",
)

#: Which part of a prediction each context feature adds to (as `FEATURE_GROUPS` for the kernel features).
CONTEXT_FEATURE_GROUPS: dict[str, str] = {
    "program_kernels_log2": "launch",
    "reuse_l3_bytes": "memory",
    "reuse_dram_bytes": "memory",
    "concurrent_kernels": "launch",
    "concurrent_bytes": "memory",
}

#: Schedule positions on either side of a kernel whose independent kernels may run with it.
CONCURRENCY_WINDOW = 2

#: Instructions that pass data through without writing it: an operand read through them was written
#: by the kernel behind them.
_PASS_THROUGH = frozenset({"bitcast", "get-tuple-element", "tuple", "copy-done", "optimization-barrier"})


class _Schedule:
    """The kernels of one computation in schedule order, who depends on whom, and what each writes."""

    __slots__ = ("stamp", "index", "ancestors", "kernels", "position", "written_before")

    def __init__(self, comp):
        instrs = list(comp.instructions)
        self.stamp = _stamp(instrs)
        self.index = {id(x): n for n, x in enumerate(instrs)}
        # ancestors[n]: bit m is set when instruction m feeds instruction n (text order is a topological
        # order of a computation, so one pass over it suffices).
        ancestors = [0] * len(instrs)
        for n, x in enumerate(instrs):
            bits = 0
            for o in x.operands:
                m = self.index.get(id(o))
                if m is not None:
                    bits |= ancestors[m] | (1 << m)
            ancestors[n] = bits
        self.ancestors = ancestors
        self.kernels = [n for n, x in enumerate(instrs) if _is_kernel(x)]
        self.position = {n: p for p, n in enumerate(self.kernels)}
        # written_before[p]: bytes the kernels before schedule position p write.
        written = [0]
        for n in self.kernels:
            written.append(written[-1] + instrs[n].shape.byte_size)
        self.written_before = written


def _is_kernel(instr) -> bool:
    return instr.opcode not in CONTROL_FLOW_OPCODES and not is_free(instr)


def _stamp(instrs) -> tuple:
    # A computation edited since its schedule was read (fusion simulation edits in place) gets a new one.
    return (len(instrs), id(instrs[0]) if instrs else 0, id(instrs[-1]) if instrs else 0)


_SCHEDULES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _schedule(comp) -> _Schedule:
    cached = _SCHEDULES.get(comp)
    instrs = comp.instructions
    if cached is None or cached.stamp != _stamp(instrs):
        cached = _Schedule(comp)
        _SCHEDULES[comp] = cached
    return cached


def _writer(operand):
    """The instruction that wrote the data `operand` reads (through bitcasts and tuples)."""
    x = operand
    while x.opcode in _PASS_THROUGH and x.operands:
        x = x.operands[0]
    return x


def context_features(kernel, device_facts: dict) -> dict[str, float]:
    """The `CONTEXT_FEATURES` of `kernel` (an `HloInstruction`) on a device.

    **Arguments:** `kernel`; `device_facts`: the cache sizes the kernel features use
    (`features.device_facts`: `l2`, `l3` bytes).

    **Returns:** a dict with every name of `CONTEXT_FEATURES`.
    """
    l2, l3 = float(device_facts.get("l2") or 0), float(device_facts.get("l3") or 0)
    out = dict.fromkeys(CONTEXT_FEATURES, 0.0)
    comp = kernel.computation
    sched = _schedule(comp) if comp is not None else None
    n = sched.index.get(id(kernel)) if sched is not None else None
    p = sched.position.get(n) if n is not None else None
    if p is None:
        # Not in a scheduled computation: a kernel run alone.
        for o in _unique(kernel.operands):
            _classify(out, o.shape.byte_size, 0.0, l2, l3)
        return out
    instrs = comp.instructions
    out["program_kernels_log2"] = math.log2(len(sched.kernels))
    everything = sched.written_before[-1]
    for o in _unique(kernel.operands):
        writer = sched.index.get(id(_writer(o)))
        q = sched.position.get(writer) if writer is not None else None
        distance = everything if q is None or q >= p else sched.written_before[p] - sched.written_before[q + 1]
        _classify(out, o.shape.byte_size, float(distance), l2, l3)
    mine = sched.ancestors[n]
    for q in range(max(0, p - CONCURRENCY_WINDOW), min(len(sched.kernels), p + CONCURRENCY_WINDOW + 1)):
        m = sched.kernels[q]
        if q == p or (mine >> m) & 1 or (sched.ancestors[m] >> n) & 1:
            continue
        out["concurrent_kernels"] += 1.0
        out["concurrent_bytes"] += float(instrs[m].shape.byte_size)
    return out


def _unique(operands):
    seen = set()
    for o in operands:
        if id(o) not in seen and o.shape.is_array:
            seen.add(id(o))
            yield o


def _classify(out: dict, nbytes: int, distance: float, l2: float, l3: float) -> None:
    reach = distance + nbytes
    if l3 and reach > l3:
        out["reuse_dram_bytes"] += nbytes
    elif l2 and reach > l2:
        out["reuse_l3_bytes"] += nbytes
