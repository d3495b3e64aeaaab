"""XLA's estimate of a producer fused into a consumer (`EstimateRunTimeForFusion`), and its cache.

The fused kernel's flops are the producer's times its utilization in the
consumer plus the consumer's; every operand of the pair is read once, the
bytes both sides read counted once (`GetSharedOperandBytesAccessed`, with
`GetOperandUtilization` and `GetCommonUtilization`); the launch grid and
coalescing are the fused kernel's. `XlaGpuModel.estimate_fusion` and
`estimate_fused` price one pair at a time; `XlaGpuPairPricer` (XLA's
`GpuPerformanceModelCache`) keeps each instruction's record so that a fusion
pass prices every pair from two records.
"""

from __future__ import annotations

import math
from typing import Protocol

from ..analysis.emission import LaunchFacts, is_input_fusible_reduction, launch_facts, warp_size
from ..analysis.opcodes import IS_ELEMENTWISE
from ..fusion_engine import discard_fusion, tracks_growth
from ._base import KernelEstimate, dominant_bound, materialize_fusion
from ._coalescing import (
    OperandAccess,
    bad_transpose,
    kernel_coalescing,
    operand_access,
    pair_access,
    read_coalesced_heuristic,
    utilization_rate,
)
from ._kernel_costs import KernelCosts, shape_size_cached
from ._launch import fused_loop_launch, launch_dimensions



class FusedPairRules(Protocol):
    """What pricing a fused pair needs of a model (`XlaGpuModel` is one): its compute, read, write
    and combine rules, its launch settings, and each kernel's own estimate and cost records."""

    max_unroll_factor: int
    access_patterns: bool

    def compute_time(self, device, flops: float, matmul_flops: float, matmul_dtype: str, blocks: int,
                     threads: int) -> float: ...

    def read_time(self, device, num_blocks: int, n_bytes_net: int, n_bytes_total: int,
                  utilization: float) -> float: ...

    def write_time(self, device, bytes_written: float) -> float: ...

    def combine(self, compute_s: float, memory_s: float) -> float: ...

    def _kernel_time(self, instr, device, cache: dict) -> tuple: ...

    def _costs(self, kernel, device, cache: dict | None = None) -> KernelCosts: ...

__all__ = [
    "FusedPairRules", "XlaGpuPairPricer", "common_utilization", "fused_estimate", "fused_short_cut",
    "operand_utilization",
]


def _round_half_away(x: float) -> float:
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def is_multi_output(instr) -> bool:
    comp = instr.fused_computation if instr.opcode == "fusion" else None
    return comp is not None and comp.root.opcode == "tuple"


def operand_utilization(costs: KernelCosts, consumer, producer) -> float:
    """XLA's `GetOperandUtilization(consumer, producer)`."""
    if is_multi_output(producer):
        return float(sum(
            costs.operand_utilization[i]
            for i, o in enumerate(consumer.operands)
            if o.opcode == "get-tuple-element" and o.operands and o.operands[0] is producer
        ))
    for i, o in enumerate(consumer.operands):
        if o is producer:
            return float(costs.operand_utilization[i])
    return 0.0

def common_utilization(pc: KernelCosts, producer, index: int, cc: KernelCosts, consumer) -> float:
    """XLA's `GetCommonUtilization`: how much of the consumer's direct reading of the
    producer's operand `index` coincides with the producer's own reading."""
    operand = producer.operands[index]
    if operand not in consumer.operands:
        return 0.0
    elementwise = producer.opcode in IS_ELEMENTWISE or (
        producer.opcode == "fusion" and pc.parameter_elementwise_from_root(index)
    )
    if not elementwise:
        return 0.0
    if consumer.opcode == "fusion" and consumer.fused_computation is not None:
        idx_x = consumer.operands.index(operand)
        if is_multi_output(producer):
            idx_p = [i for i, o in enumerate(consumer.operands)
                     if o.opcode == "get-tuple-element" and o.operands and o.operands[0] is producer]
        else:
            idx_p = [consumer.operands.index(producer)] if producer in consumer.operands else []
        total = 0.0
        for j in idx_p:
            total += cc.common_parameter_utilization(idx_x, j)
        return total
    if consumer.opcode in IS_ELEMENTWISE:
        return 1.0
    return 0.0


def fused_short_cut(pe: KernelEstimate, ce: KernelEstimate, device) -> KernelEstimate | None:
    """The fused estimate when one side is infinite or unpriced (else None)."""
    if math.isinf(pe.time_s) or math.isinf(ce.time_s):
        inf = math.inf
        return KernelEstimate(compute_s=inf, memory_s=inf, launch_s=device.kernel_launch_overhead_s, time_s=inf,
                              bound="unknown", note="infinite producer or consumer runtime")
    if not (pe.priced and ce.priced):
        return KernelEstimate.unpriced("; ".join(x for x in (pe.note, ce.note) if x) or "unpriced kernel")
    return None

def fused_estimate(model: FusedPairRules, producer, consumer, device, pc: KernelCosts, cc: KernelCosts,
                   producer_writes_side_output: bool = False, facts=None, read_cache: dict | None = None,
                   time_only: bool = False, consumer_reads: dict | None = None,
                   bad_transposes: tuple[str, str] | None = None,
                   access_of=None, input_fusible=None) -> KernelEstimate | float:
    """XLA's `EstimateRunTimeForFusion` from the two kernels' own cost records, with `model`'s
    compute, read, write and combine rules.

    `time_only`: return just the fused kernel's `time_s` (launch included), without its details.

    `facts`: the two sides' `LaunchFacts` when known: the fused kernel is then
    built only where its launch grid or coalescing cannot be told from them;
    `read_cache`: read times by `(blocks, net bytes, total bytes, rate)`, for one device;
    `consumer_reads`: a scratch dict for this version of `consumer` (empty at first; the caller drops it
    when the consumer changes): with `time_only`, what reading the consumer's own operands costs is
    worked out once and reused for every producer it is priced with (same numbers, same order of sums),
    and so is the fused loop grid (`fused_loop_launch`'s `memo`);
    `bad_transposes`: each side's `bad_transpose` when known (`read_coalesced_heuristic`), and
    `input_fusible`, a function giving a kernel's `is_input_fusible_reduction` (the same);
    `access_of`: with `time_only`, a function giving a kernel's `OperandAccess` (`operand_access`): where
    the launch grid was told without building the fused kernel, its per-operand access rule is then
    told from the two sides too (`pair_access`), and the kernel is not built at all.
    """
    launch = device.kernel_launch_overhead_s
    # A producer that is not a tuple has no get-tuple-element users: its uses are its positions.
    simple = consumer_reads is not None and time_only and producer.shape.element_type != "tuple"
    u = 0.0
    if simple:
        at = consumer_reads.get(None)
        if at is None:
            at = consumer_reads[None] = _positions(consumer.operands)
        for i in at.get(id(producer), ()):
            u += cc.operand_utilization[i]
    else:
        for i, o in enumerate(consumer.operands):
            if o is producer or (o.opcode == "get-tuple-element" and o.operands and o.operands[0] is producer):
                u += cc.operand_utilization[i]
    fused = ld = None
    if facts is not None:
        ld = fused_loop_launch(producer, consumer, device, facts[0], facts[1], model.max_unroll_factor,
                               consumer_reads)
    if ld is None:
        fused = materialize_fusion(producer, consumer)
        ld = launch_dimensions(fused, device, max_unroll=model.max_unroll_factor)
    flops = int(pc.flops * u + cc.flops)
    mm = pc.matmul_flops * u + cc.matmul_flops
    compute = model.compute_time(device, flops, mm, pc.matmul_dtype or cc.matmul_dtype,
                                ld.num_blocks, ld.threads_per_block)

    heuristic_ok, heuristic_why = read_coalesced_heuristic(ld.emitter, producer, consumer, device, bad_transposes,
                                                             input_fusible)
    access = {}
    if model.access_patterns and heuristic_ok and (facts is None or facts[0][1] or facts[1][1]):
        if fused is None and time_only and access_of is not None:
            # (the reasons are not reported with `time_only`)
            access = dict.fromkeys(pair_access(producer, consumer, access_of(producer), access_of(consumer)), "")
        else:
            if fused is None:
                fused = materialize_fusion(producer, consumer)
            coal = kernel_coalescing(fused, ld.emitter, device, producer=producer, consumer=consumer)
            for o, ok, why in zip(fused.operands, coal.coalesced, coal.reasons):
                if not ok:
                    access[id(o)] = why
    if fused is not None:
        discard_fusion(fused)  # built here, priced: free it now (see fusion_engine.discard_fusion)
    read = 0.0
    bytes_read = 0
    per_operand: dict[str, float] = {}
    uncoalesced: dict[str, str] = {}
    simple = simple and not access
    # Operands of the pair: the producer's, then the consumer's other ones.
    operands: list = []
    seen: set = set()
    for o in (producer.operands if simple else list(producer.operands) + list(consumer.operands)):
        if o is producer or (o.opcode == "get-tuple-element" and o.operands and o.operands[0] is producer):
            continue
        if id(o) not in seen:
            seen.add(id(o))
            operands.append(o)
    if simple:
        at = consumer_reads[None]
        mine = at.get(id(producer))
        u_pc = float(cc.operand_utilization[mine[0]]) if mine else 0.0
        c_at = consumer_reads.get(0)
        if c_at is None:
            c_at = consumer_reads[0] = {k: v[0] for k, v in at.items()}
    else:
        u_pc = operand_utilization(cc, consumer, producer)
        c_at = {}
        for i, o in enumerate(consumer.operands):
            c_at.setdefault(id(o), i)
    # First position of each operand on either side (XLA's `GetSharedOperandBytesAccessed` without its scans).
    p_at: dict = {}
    for i, o in enumerate(producer.operands):
        p_at.setdefault(id(o), i)
    num_blocks = ld.num_blocks
    for x in operands:
        size = shape_size_cached(x.shape)
        i = p_at.get(id(x))
        j = c_at.get(id(x))
        by_consumer = float(cc.operand_bytes[j]) if j is not None else 0.0
        if i is None:
            # (what the general formula gives with nothing read by the producer and nothing in common)
            total = by_consumer
        else:
            by_producer = float(pc.operand_bytes[i])
            # (nothing in common with an operand the consumer does not read itself)
            common = common_utilization(pc, producer, i, cc, consumer) if j is not None else 0.0
            total = _round_half_away(by_producer * u_pc) + by_consumer - _round_half_away(size * common)
        n_total = int(max(total, 0))
        n_net = min(size, n_total)
        bytes_read += n_total
        ok = heuristic_ok and id(x) not in access
        if not ok and not time_only:
            uncoalesced[x.name] = heuristic_why if not heuristic_ok else access[id(x)]
        t = _read_time(model, device, read_cache, num_blocks, n_net, n_total, utilization_rate(x.shape, ok, device))
        read += t
        if not time_only:
            per_operand[x.name] = t
    if simple:
        # The consumer's other operands, in order: read alone, at the fused kernel's grid.
        key = (num_blocks, heuristic_ok)
        own = consumer_reads.get(key)
        if own is None:
            own = consumer_reads[key] = _own_reads(model, consumer, cc, device, num_blocks, heuristic_ok,
                                                   read_cache, at)
        for xid, n_total, t in own:
            if xid not in p_at and xid != id(producer):
                bytes_read += n_total
                read += t
    bytes_written = int(cc.bytes_written)
    write = model.write_time(device, bytes_written)
    if producer_writes_side_output:
        bytes_written += int(pc.bytes_written)
        write += model.write_time(device, int(pc.bytes_written))
    exec_s = model.combine(compute, read + write)
    if time_only:
        return exec_s + launch
    memory = read + write
    return KernelEstimate(
        compute_s=compute,
        memory_s=memory,
        launch_s=launch,
        time_s=exec_s + launch,
        bound=dominant_bound(compute, memory, launch),
        details={
            "exec_s": exec_s, "read_s": read, "write_s": write, "flops": float(flops), "matmul_flops": mm,
            "bytes_read": float(bytes_read), "bytes_written": float(bytes_written),
            "bytes_accessed": float(bytes_read + bytes_written),
            "producer_utilization": u, "emitter": ld.emitter, "num_blocks": ld.num_blocks,
            "threads_per_block": ld.threads_per_block, "unroll": ld.unroll, "hero": ld.hero,
            "coalesced": not uncoalesced, "uncoalesced": uncoalesced, "operand_read_s": per_operand,
        },
    )


def _read_time(model, device, read_cache: dict | None, num_blocks: int, n_net: int, n_total: int,
               rate: float) -> float:
    """`model.read_time`, looked up in `read_cache` (by its arguments) when one is given."""
    if read_cache is None:
        return model.read_time(device, num_blocks, n_net, n_total, rate)
    key = (num_blocks, n_net, n_total, rate)
    t = read_cache.get(key)
    if t is None:
        t = read_cache[key] = model.read_time(device, num_blocks, n_net, n_total, rate)
    return t


def _positions(operands) -> dict:
    """`id(operand) -> [its positions]`, in first-use order."""
    at: dict = {}
    for i, o in enumerate(operands):
        at.setdefault(id(o), []).append(i)
    return at


def _own_reads(model, consumer, cc: KernelCosts, device, num_blocks: int, coalesced: bool, read_cache, at: dict):
    """`(id, bytes, read time)` of each distinct operand of `consumer`, in order, read by the consumer alone
    (what `fused_estimate`'s loop gives an operand the producer does not read) on `num_blocks` blocks."""
    out = []
    done: set = set()
    for o in consumer.operands:
        if id(o) in done:
            continue
        done.add(id(o))
        first = at[id(o)][0]
        size = shape_size_cached(o.shape)
        n_total = int(max(float(cc.operand_bytes[first]), 0))
        n_net = min(size, n_total)
        t = _read_time(model, device, read_cache, num_blocks, n_net, n_total,
                       utilization_rate(o.shape, coalesced, device))
        out.append((id(o), n_total, t))
    return out


class XlaGpuPairPricer:
    """Pair prices from per-instruction records, as XLA's `GpuPerformanceModelCache` keeps them.

    Each instruction's record (its `KernelEstimate` as `EstimateRunTimes` sees
    it, and its `GpuHloCostAnalysis` counts) is computed once per version of
    the instruction; a pair's fused price is then `EstimateRunTimeForFusion`
    from the two records (§1.8 of the reference: flops and bytes from the
    producer's and consumer's own counts and utilizations; launch dimensions
    and coalescing from the fused pair). `invalidate(instr)` drops a record.

    `content`: `instruction -> its content id` (`hlo._structure.ContentIds.kernel`), for a model
    that prices by content: a kernel with the id of one already priced takes its record (the
    estimate, and the costs `pinned` to the body they were made for) instead of being analysed
    again. Fusions whose bodies follow their growths (`fusion_engine.tracks_growth`) are
    analysed as themselves, so that their next growth starts from their own state.
    """

    __slots__ = ("model", "device", "_version", "_records", "_costs", "_facts", "_reads", "_own", "_bad", "_access",
                 "_content", "_by_content", "_facts_by_content", "_input_fusible_of", "_warp")

    def __init__(self, model: FusedPairRules, device, version=None, content=None):
        self.model = model
        self.device = device
        self._version = version if version is not None else (lambda instr: 0)
        self._content = content
        self._by_content: dict = {}  # content id -> (KernelEstimate, pinned KernelCosts or None)
        self._facts_by_content: dict = {}  # (what, content id) -> a fact of the body alone
        self._records: dict = {}
        self._costs: dict = {}
        self._facts: dict = {}
        self._reads: dict = {}
        self._own: dict = {}
        self._bad: dict = {}
        self._access: dict = {}
        self._input_fusible_of: dict = {}
        self._warp = warp_size(device)

    def _kept(self, cache: dict, instr, make, version=None):
        """`cache`'s value for this version of `instr`, made by `make()` when there is none."""
        v = self._version(instr) if version is None else version
        hit = cache.get(instr)
        if hit is not None and hit[0] == v:
            return hit[1]
        value = make()
        cache[instr] = (v, value)
        return value

    def _consumer_reads(self, instr) -> dict:
        """The scratch dict `fused_estimate` keeps for this version of `instr` as a consumer (and these
        operands: a plain instruction keeps its version when an operand is replaced by a fusion)."""
        return self._kept(self._own, instr, dict, (self._version(instr), tuple(map(id, instr.operands))))

    def invalidate(self, instr) -> None:
        """Forget `instr`'s record (it changed in place)."""
        self._own.pop(instr, None)
        self._records.pop(instr, None)
        self._costs.pop(instr, None)
        self._facts.pop(instr, None)
        self._bad.pop(instr, None)
        self._access.pop(instr, None)
        self._input_fusible_of.pop(instr, None)

    def _shared(self, instr) -> bool:
        """Whether `instr`'s records may come from another kernel of its content (see the class)."""
        return self._content is not None and (instr.opcode != "fusion" or not tracks_growth(instr.fused_computation))

    def _of_content(self, what: str, instr, make):
        """`make()`, a fact of `instr`'s content alone, made once per content where `_shared`."""
        if not self._shared(instr):
            return make()
        key = (what, self._content(instr))
        hit = self._facts_by_content.get(key)
        if hit is None:
            hit = self._facts_by_content[key] = make()
        return hit

    def facts(self, instr) -> LaunchFacts:
        """`instr`'s `LaunchFacts`."""
        return self._kept(self._facts, instr, lambda: self._of_content("facts", instr, lambda: launch_facts(instr)))

    def access(self, instr) -> OperandAccess:
        """`instr`'s `OperandAccess`, kept per version and operands (a lone instruction keeps its version
        when an operand is replaced by a fusion)."""
        return self._kept(self._access, instr, lambda: operand_access(instr, self.device),
                          (self._version(instr), tuple(map(id, instr.operands))))

    def _bad_transpose(self, instr) -> str:
        """`instr`'s `bad_transpose` (`models._coalescing`), kept per version of a fusion (a lone
        instruction's answer looks at its operand, which fusion may replace: asked afresh)."""
        if instr.opcode != "fusion":
            return bad_transpose(instr)
        return self._kept(self._bad, instr, lambda: bad_transpose(instr))

    def input_fusible(self, instr) -> bool:
        """`is_input_fusible_reduction(instr)` on this device, kept per version of a fusion (a walk of its
        roots' heroes through its body; a fusion grown in place is priced with a consumer reduce at
        every growth); a lone instruction's answer looks at its operand: asked afresh, as `_bad_transpose`."""
        if instr.opcode != "fusion":
            return is_input_fusible_reduction(instr, self._warp)
        return self._kept(self._input_fusible_of, instr, lambda: is_input_fusible_reduction(instr, self._warp))

    def kernel(self, instr) -> KernelEstimate:
        """`instr`'s own estimate as `EstimateRunTimes` sees it (free instructions pay a launch)."""
        v = self._version(instr)
        hit = self._records.get(instr)
        if hit is not None and hit[0] == v:
            return hit[1]
        key = None
        if self._shared(instr):
            key = self._content(instr)
            shared = self._by_content.get(key)
            if shared is not None:
                est, costs = shared
                self._records[instr] = (v, est)
                if costs is not None:
                    self._costs[instr] = (v, costs)
                return est
        cache: dict = {}
        est, rt = self.model._kernel_time(instr, self.device, cache)
        self._records[instr] = (v, est)
        # (pinned: this version's parameters listed once, not looked up in the body for every pair)
        costs = rt.costs.pinned() if rt is not None else None
        if costs is not None:
            self._costs[instr] = (v, costs)
        if key is not None and est.priced:
            # (an unpriced kernel is analysed again: each one warns)
            self._by_content[key] = (est, costs)
        return est

    def costs(self, instr) -> KernelCosts:
        """`instr`'s `GpuHloCostAnalysis` counts."""
        return self._kept(self._costs, instr, lambda: self.model._costs(instr, self.device).pinned())

    def pair(self, producer, consumer) -> tuple[float, float, float]:
        """`(T(producer), T(consumer), T_fused(producer, consumer))`, launches included."""
        pe = self.kernel(producer)
        ce = self.kernel(consumer)
        model = self.model
        fe = fused_short_cut(pe, ce, self.device)
        if fe is not None:
            return pe.time_s, ce.time_s, fe.time_s
        # Each side's records for its version, looked up here (`_kept`'s hits; a miss makes them): a pair
        # pricer prices every pair of a step's fusion with each of its operands.
        vp, vc = self._version(producer), self._version(consumer)
        costs, facts, bad = self._costs, self._facts, self._bad
        h = costs.get(producer)
        pc = h[1] if h is not None and h[0] == vp else self.costs(producer)
        h = costs.get(consumer)
        cc = h[1] if h is not None and h[0] == vc else self.costs(consumer)
        h = facts.get(producer)
        pf = h[1] if h is not None and h[0] == vp else self.facts(producer)
        h = facts.get(consumer)
        cf = h[1] if h is not None and h[0] == vc else self.facts(consumer)
        if producer.opcode == "fusion":
            h = bad.get(producer)
            pb = h[1] if h is not None and h[0] == vp else self._bad_transpose(producer)
        else:
            pb = bad_transpose(producer)
        if consumer.opcode == "fusion":
            h = bad.get(consumer)
            cb = h[1] if h is not None and h[0] == vc else self._bad_transpose(consumer)
        else:
            cb = bad_transpose(consumer)
        t = fused_estimate(model, producer, consumer, self.device, pc, cc, facts=(pf, cf), read_cache=self._reads,
                           time_only=True, consumer_reads=self._consumer_reads(consumer),
                           bad_transposes=(pb, cb), access_of=self.access, input_fusible=self.input_fusible)
        return pe.time_s, ce.time_s, t
