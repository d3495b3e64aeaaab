"""The plan space of `search_fusion`: kernels priced by content (`_Pricer`), one computation's
decisions and their canonical decoding into a legal plan (`_Problem`), and the objective
(`plan_time`). See `_search` for the whole method."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ..analysis.opcodes import NOT_KERNELS_IN_FUSION_PASS
from ..hlo import HloComputation, HloInstruction, HloModule
from ..fusion_engine import hypothetical_fusion
from ._legality import LegalityChecker, can_emit_input_fused_scatter, is_fusible, is_fusible_bitcast
from ._priority import is_candidate, is_small_constant
from ._simulate import kernels_of

__all__ = ["plan_time"]


def plan_time(module: HloModule, device, model) -> tuple[float, int, int]:
    """The search's objective for a fused module: `(Σ kernel time_s, kernels, unpriced kernels)`.

    Every kernel (fusion or unfused op) of each fusible computation counted
    once (a `while` body is not multiplied by its trip count), priced by
    `model.estimate(kernel, device).time_s` (launch included); kernels the
    model cannot price (NaN) are left out of the sum and counted.
    """
    total = 0.0
    n = unpriced = 0
    for k in kernels_of(module):
        n += 1
        t = model.estimate(k, device).time_s
        if math.isnan(t):
            unpriced += 1
        else:
            total += t
    return total, n, unpriced


# ---------------------------------------------------------------------------
# Kernels and their prices, by content


class _Kernel:
    """A kernel being built: its root instruction, the instructions fused into it, and the detached instruction."""

    __slots__ = ("root", "members", "instr")

    def __init__(self, root: HloInstruction):
        self.root = root
        self.members: frozenset = frozenset()
        self.instr: HloInstruction = root


class _Pricer:
    """Detached kernels and their prices, cached by content (root, fused instructions)."""

    def __init__(self, model, device, checker: LegalityChecker):
        self.model = model
        self.device = device
        self.checker = checker
        self._kernels: dict = {}
        self._prices: dict = {}
        self.model_calls = 0

    def grow(self, k: _Kernel, producer: HloInstruction) -> None:
        """Fuse `producer` (an operand of `k`'s instruction) into `k`, as `PriorityFusionRun._fuse` does."""
        members = k.members | {producer}
        key = (k.root, members)
        instr = self._kernels.get(key)
        if instr is None:
            checker = self.checker
            facts = checker.facts(producer) + checker.facts(k.instr)
            instr = hypothetical_fusion(producer, k.instr, "kLoop")
            checker.set_facts(instr, facts)
            kind = checker.fusion_kind(instr)
            if kind != "kLoop":
                instr.set_attribute("kind", kind)
            self._kernels[key] = instr
        k.members = members
        k.instr = instr

    def price(self, k: _Kernel) -> float:
        key = (k.root, k.members)
        t = self._prices.get(key)
        if t is None:
            t = self._prices[key] = self.model.estimate(k.instr, self.device).time_s
            self.model_calls += 1
        return t


# ---------------------------------------------------------------------------
# One computation: decisions, decoding


_FIXED, _BITCAST, _DECISION = 0, 1, 2


@dataclass(frozen=True)
class _Decoded:
    total_s: float  # sum over priced kernels
    unpriced: int
    kernels: int
    fused: frozenset  # decision producers fused
    points: tuple  # decision producers that were legal at their turn


class _Problem:
    """The fusion decisions of one fusible computation."""

    def __init__(self, comp: HloComputation, pricer: _Pricer):
        self.comp = comp
        self.pricer = pricer
        order = comp.post_order()
        self.order = order[::-1]  # consumers first
        root = comp.root
        self.kind: dict[HloInstruction, int] = {}
        for x in self.order:
            if x is root or not is_candidate(x) or x.opcode == "constant":
                self.kind[x] = _FIXED
            elif is_fusible_bitcast(x):
                self.kind[x] = _BITCAST
            elif is_fusible(x):
                self.kind[x] = _DECISION
            else:
                self.kind[x] = _FIXED  # CanFuse's rule 2 rejects it whatever its users
        self.decisions = [x for x in self.order if self.kind[x] == _DECISION]
        self.small_constants = [x for x in comp.instructions if is_small_constant(x)]
        self.users = {x: list(dict.fromkeys(x.users)) for x in self.order}
        self._memo: dict[frozenset, _Decoded] = {}
        self.seen: set[frozenset] = set()  # distinct plans decoded

    def decode(self, choose: Callable[[HloInstruction, int], bool]) -> _Decoded:
        """Decode a plan: `choose(producer, k)` is asked at the k-th producer that may legally fuse."""
        pricer = self.pricer
        can_fuse = pricer.checker.can_fuse
        grow = pricer.grow
        kind_of = self.kind
        users_of = self.users
        homes: dict[HloInstruction, tuple] = {}
        own: list[_Kernel] = []
        fused: list[HloInstruction] = []
        points: list[HloInstruction] = []
        for x in self.order:
            kind = kind_of[x]
            if kind == _FIXED:
                k = _Kernel(x)
                own.append(k)
                homes[x] = (k,)
                continue
            seen: dict[int, _Kernel] = {}
            for u in users_of[x]:
                for k in homes[u]:
                    seen.setdefault(id(k), k)
            targets = list(seen.values())
            if kind == _BITCAST:
                into = [k for k in targets if can_fuse(x, k.instr) is None]
                kept = len(into) < len(targets)
            else:
                into = [k for k in targets if not is_fusible_bitcast(k.instr)]
                legal = bool(into) and all(can_fuse(x, k.instr) is None for k in into)
                if legal:
                    points.append(x)
                if not (legal and choose(x, len(points) - 1)):
                    k = _Kernel(x)
                    own.append(k)
                    homes[x] = (k,)
                    continue
                fused.append(x)
                kept = len(into) < len(targets)
            for k in into:
                grow(k, x)
            if kept or not into:
                k = _Kernel(x)
                own.append(k)
                homes[x] = tuple(into) + (k,)
            else:
                homes[x] = tuple(into)
        # Small constants go into every fusible user at the end (`_fuse_small_constants`).
        for c in self.small_constants:
            seen = {}
            for u in users_of[c]:
                for k in homes[u]:
                    seen.setdefault(id(k), k)
            for k in seen.values():
                if is_fusible(k.instr) and can_emit_input_fused_scatter(c, k.instr) is None:
                    grow(k, c)
        total = 0.0
        unpriced = n = 0
        price = pricer.price
        for k in own:
            if k.instr.opcode in NOT_KERNELS_IN_FUSION_PASS:
                continue
            n += 1
            t = price(k)
            if math.isnan(t):
                unpriced += 1
            else:
                total += t
        plan = frozenset(fused)
        self.seen.add(plan)
        return _Decoded(total, unpriced, n, plan, tuple(points))

    def decode_set(self, plan: frozenset) -> _Decoded:
        """Decode the plan that fuses the producers in `plan` (those legal at their turn); memoized."""
        d = self._memo.get(plan)
        if d is None:
            d = self.decode(lambda x, k: x in plan)
            self._memo[plan] = self._memo[d.fused] = d
        return d


