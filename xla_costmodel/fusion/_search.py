"""`search_fusion`: the best legal fusion plan of a module under a cost model, and greedy's distance to it.

**The plan space.** XLA's priority fusion fuses a producer into *all* its
non-bitcast users or into none (`CanFuseWithAllNonBitcastUsers`, 4.5), so a
plan is one yes/no per candidate producer (the producers priority fusion would
queue: fusible, with users, not the root; constants and bitcasts are not
choices, see below). Fusing a producer P into its users fuses every
producer→consumer edge out of P: P is duplicated into each kernel that uses
it. A plan is legal when XLA's `CanFuse` rules (`LegalityChecker`) allow every
one of those fusions.

Plans are decoded in one canonical order: consumers first (reverse post-order
of each fusible computation). When P comes up, its users have all been
decided, so the kernels P would be fused into are known (the kernels its
users were fused into, or the users themselves); P is fused into all of them
if `CanFuse(P, kernel)` holds for each non-bitcast one, else P stays a kernel
of its own. A decision only depends on decisions made before it, so

- any yes/no vector decodes to a legal plan (a "yes" that is illegal at its
  turn is read as "no": the repair a genetic search needs), and every legal
  plan is the decoding of itself;
- the legal plans are the leaves of a decision tree (branch only where fusing
  is legal), which exact enumeration walks with one decode per legal plan.

As in XLA's pass: a bitcast is fused into every kernel `CanFuse` allows (its
priority is +inf) and kept for the others; after all producers, constants of
at most one element are fused into every fusible user; large constants are
never fused. This equals greedy's semantics up to the order fusions are made
in (greedy may fuse a producer that is already a fusion, here a producer is
always plain); `SearchResult.greedy_reproduced` says whether greedy's own
plan decodes to the same predicted time.

**The objective** (`plan_time`) is the sum, over the kernels (fusions and
unfused ops) of the fusible computations, each counted once, of the model's
`estimate(kernel).time_s` (launch overhead included; kernels the model cannot
price are left out). Greedy's fused module is priced the same way, so the gap
compares like with like (whatever totals `simulate_fusion` itself reports). Kernels are built detached
(`hypothetical_fusion`) and priced once per content (root instruction + set
of fused instructions), so a plan costs one pass over its computation plus
the kernels never seen before. Fusible computations are independent: each is
searched on its own and the totals add up.

**Search.** Per computation: exact enumeration of all legal plans when it has
at most `exact_max_edges` candidate producers (and the budget lasts);
otherwise simulated annealing over the producer decisions, started from
the better of greedy's plan and "fuse everything legal" (each move flips one
producer whose decision is live, i.e. legal at its turn; worse plans are
accepted with probability exp(-Δ/T), T falling linearly to 0 over 60% of the
computation's share of the budget; restarts from the best plan now and then),
then a first-improvement descent (single flips) from the best plan for the
rest of the share. The plan found is built into a module (with
the same fusion code as `simulate_fusion`) and priced again; greedy's result
is returned instead if the search found nothing better.
"""

from __future__ import annotations

import html
import itertools
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._gc import gc_paused
from .._text import count
from ..hlo import HloModule
from ..fusion_engine import release_body_state
from ..hlo.editing import NameUniquifier, copy_module
from ..models import DEFAULT_DEVICE, DEFAULT_MODEL, resolve_inputs
from ._legality import LegalityChecker, is_fusible_bitcast
from ._plans import _Decoded, _Pricer, _Problem, plan_time
from ._priority import FusionPass, PriorityFusionRun, is_candidate
from ._simulate import (
    _getter,
    bitcast_mode,
    bitcasts_to_layout_changes,
    fusible_computations,
    simulate_fusion,
    working_copy,
)

__all__ = ["SearchResult", "plan_time", "search_fusion"]

COMPUTATION_COLUMNS = [
    "computation", "producers", "method", "plans", "greedy_s", "best_s", "seconds",
]


# ---------------------------------------------------------------------------
# Search strategies


class _Clock:
    def __init__(self, budget_s: float):
        self.t0 = time.perf_counter()
        self.deadline = self.t0 + budget_s

    def left(self) -> float:
        return self.deadline - time.perf_counter()


def _enumerate(problem: _Problem, deadline: float) -> tuple[_Decoded | None, int, bool]:
    """All legal plans, one decode each (leaf = a prefix of choices, then "no" to the rest).

    **Returns:** (best plan, plans decoded, complete).
    """
    best: _Decoded | None = None
    n = 0
    stack: list[tuple] = [()]
    while stack:
        if time.perf_counter() > deadline:
            return best, n, False
        prefix = stack.pop()
        m = len(prefix)
        d = problem.decode(lambda x, k: k < m and prefix[k])
        n += 1
        if best is None or d.total_s < best.total_s:
            best = d
        for j in range(m, len(d.points)):
            stack.append(prefix + (False,) * (j - m) + (True,))
    return best, n, True


def _anneal(problem: _Problem, start: _Decoded, deadline: float, rng: random.Random) -> tuple[_Decoded, int]:
    """Simulated annealing over producer decisions from `start` (60% of the time), then first-improvement
    descent from the best plan (the rest). **Returns:** (best plan, plans decoded)."""
    cur = best = start
    n = 0
    t_start = time.perf_counter()
    span = max(deadline - t_start, 1e-9)
    anneal_end = t_start + 0.6 * span
    # Temperature scale: a typical |change| of one flip, measured on the first moves.
    scale = None
    deltas: list[float] = []
    since_best = 0
    while True:
        now = time.perf_counter()
        if now > anneal_end or not cur.points:
            break
        x = rng.choice(cur.points)
        plan = cur.fused - {x} if x in cur.fused else cur.fused | {x}
        d = problem.decode_set(plan)
        n += 1
        delta = d.total_s - cur.total_s
        if scale is None:
            if delta:
                deltas.append(abs(delta))
            if len(deltas) >= 8 or n >= 32:
                scale = (sum(deltas) / len(deltas)) if deltas else 1e-9
        temp = (scale or 0.0) * 0.5 * max(0.0, 1.0 - (now - t_start) / (0.6 * span))
        if delta <= 0 or (temp > 0 and rng.random() < math.exp(-delta / temp)):
            cur = d
        if cur.total_s < best.total_s:
            best = cur
            since_best = 0
        else:
            since_best += 1
            if since_best > 20 * max(len(problem.decisions), 10):
                cur, since_best = best, 0
    # First-improvement descent from the best plan, in random order: a local optimum if time allows.
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        order = list(best.points)
        rng.shuffle(order)
        for x in order:
            if time.perf_counter() > deadline:
                break
            plan = best.fused - {x} if x in best.fused else best.fused | {x}
            d = problem.decode_set(plan)
            n += 1
            if d.total_s < best.total_s:
                best, improved = d, True
    return best, n


# ---------------------------------------------------------------------------
# Building a plan into a module


def _greedy_plan(result) -> set[str]:
    """Names of the input instructions greedy fused into a consumer (from its fused module)."""
    origin = result.origin
    names: set[str] = set()
    for comp in fusible_computations(result.module):
        for k in comp.instructions:
            body = k.fused_computation if k.opcode == "fusion" else None
            if body is None:
                continue
            for i in body.instructions:
                if i is body.root or i.opcode == "parameter":
                    continue
                names.add(origin.get(i.name, i.name))
    return names


def _build(work: HloModule, plans: dict[str, frozenset], model, dev) -> tuple[HloModule, int]:
    """A copy of `work` with `plans` (computation name -> names of fused producers) applied.

    Uses `PriorityFusionRun`'s own fusion step (kinds, names) and its small-constant pass.
    **Returns:** (module, fusions the rules refused when redone on the real graph: 0 when consistent).
    """
    out = copy_module(work)
    names = NameUniquifier(out)
    versions: dict = {}
    checker = LegalityChecker(dev.shared_memory_per_block_bytes, version=_getter(versions))
    counter = itertools.count()
    uids = {instr: next(counter) for _, instr in out.instructions()}
    fusion_pass = FusionPass(model, dev, checker, names, uids, counter.__next__, version=versions)
    refused = 0
    for comp in fusible_computations(out):
        plan = plans.get(comp.name, frozenset())
        run = PriorityFusionRun(comp, fusion_pass)
        root = comp.root
        for x in comp.post_order()[::-1]:
            is_bitcast = is_fusible_bitcast(x) and is_candidate(x) and x is not root
            if x.name not in plan and not is_bitcast:
                continue
            targets = list(dict.fromkeys(x.users))
            if is_bitcast:
                into = [u for u in targets if checker.can_fuse(x, u) is None]
            else:
                into = [u for u in targets if not is_fusible_bitcast(u)]
                if not into or any(checker.can_fuse(x, u) is not None for u in into):
                    refused += 1
                    continue
            for u in into:
                run._fuse(x, u)
            if not x.users and x is not root:
                run.editor.remove(x)
        run._fuse_small_constants()
        run.editor.finish()
    return out, refused


# ---------------------------------------------------------------------------
# The result


@dataclass(frozen=True)
class SearchResult:
    """What `search_fusion` found.

    **Attributes:**

    - `module`: the best plan's fused module (a new object).
    - `time_s`: its predicted total (`plan_time`: sum of kernel times,
      launches included, over the fusible computations, each kernel once).
    - `greedy_time_s`: `plan_time` of `simulate_fusion`'s fused module for
      the same module, model and device; `gap`: greedy_time_s / time_s - 1 (how much
      slower greedy's plan is predicted to be; 0 when the search found
      nothing better); `gap_pct` = 100 × gap.
    - `method`: "exact" (every computation enumerated completely: the best
      plan is optimal in the plan space), "heuristic" (some computation was
      annealed, or its enumeration ran out of budget) or "greedy" (nothing
      better than greedy's own result was found; `module` is greedy's).
    - `plans_evaluated`: plans decoded and priced; `elapsed_s`: wall time;
      `model_calls`: kernels priced (each content once).
    - `plan`: names of the producers fused (all-consumers); `greedy_plan`:
      those greedy fused; `greedy_reproduced`: greedy's plan decoded here
      prices as greedy's module does (False: greedy's fusion order made a
      plan the canonical order does not, see the module docs).
    - `kernels`: kernels in `module`; `unpriced`: kernels the model could not price.
    - `computations`: per fusible computation: `producers` (decisions),
      `method`, `plans`, `greedy_s` (greedy's plan decoded here), `best_s`, `seconds`.
    - `refused`: fusions of the plan the rules refused when the plan was
      built on the real graph (0: the plan is legal as built).
    - `model`, `device`: names.
    """

    module: HloModule
    time_s: float
    greedy_time_s: float
    method: str
    plans_evaluated: int
    elapsed_s: float
    plan: frozenset
    greedy_plan: frozenset
    greedy_reproduced: bool
    kernels: int
    unpriced: int
    computations: pd.DataFrame = field(repr=False)
    model: str = ""
    device: str = ""
    model_calls: int = 0
    refused: int = 0
    greedy_module: HloModule | None = field(default=None, repr=False)

    @property
    def gap(self) -> float:
        """greedy_time_s / time_s - 1."""
        return self.greedy_time_s / self.time_s - 1.0 if self.time_s else math.nan

    @property
    def gap_pct(self) -> float:
        return 100.0 * self.gap

    def summary(self) -> dict[str, Any]:
        """The headline numbers as a dict."""
        return {
            "module": self.module.name,
            "model": self.model,
            "device": self.device,
            "greedy_time_s": self.greedy_time_s,
            "best_time_s": self.time_s,
            "gap_pct": self.gap_pct,
            "method": self.method,
            "plans_evaluated": self.plans_evaluated,
            "producers_fused": len(self.plan),
            "greedy_producers_fused": len(self.greedy_plan),
            "kernels": self.kernels,
            "greedy_reproduced": self.greedy_reproduced,
            "elapsed_s": self.elapsed_s,
        }

    def validate(self, original: HloModule, **kwargs):
        """`check_plan_validity(original, self.module, **kwargs)`."""
        from ._validity import check_plan_validity

        return check_plan_validity(original, self.module, **kwargs)

    def __repr__(self) -> str:
        return (
            f"SearchResult({self.module.name!r}, {self.method}, best {self.time_s * 1e6:.3f} us, "
            f"greedy {self.greedy_time_s * 1e6:.3f} us, gap {self.gap_pct:.2f}%, "
            f"{count(self.plans_evaluated, 'plan')} in {self.elapsed_s:.2f} s)"
        )

    def _repr_html_(self) -> str:
        s = self.summary()
        rows = [
            ("module", html.escape(s["module"])),
            ("model / device", html.escape(f"{s['model']} / {s['device']}")),
            ("greedy (priority fusion)", f"{s['greedy_time_s'] * 1e6:,.3f} &micro;s"),
            ("best plan found", f"{s['best_time_s'] * 1e6:,.3f} &micro;s"),
            ("gap", f"{s['gap_pct']:.2f} %"),
            ("method", html.escape(s["method"])),
            ("plans evaluated", f"{s['plans_evaluated']:,}"),
            ("producers fused (best / greedy)", f"{s['producers_fused']} / {s['greedy_producers_fused']}"),
            ("kernels", s["kernels"]),
            ("search time", f"{s['elapsed_s']:.2f} s"),
        ]
        table = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in rows)
        comps = self.computations.to_html(index=False, float_format=lambda x: f"{x:.4g}")
        return f"<div><b>Fusion search</b><table>{table}</table><p><b>Per computation</b></p>{comps}</div>"


# ---------------------------------------------------------------------------
# Entry point


def search_fusion(
    module: Any,
    *args: Any,
    device: Any = DEFAULT_DEVICE,
    model: Any = DEFAULT_MODEL,
    budget_s: float = 10.0,
    exact_max_edges: int = 14,
    seed: int = 0,
    inline_calls: bool = True,
    bitcast_layout_changes: bool | None = None,
    rewrite_reduce_windows: bool = True,
    simplify: bool = True,
    constant_folding: bool = True,
    **kwargs: Any,
) -> SearchResult:
    """Search the legal fusion plans of `module` for the lowest predicted total time.

    **Arguments:**

    - `module` (with `*args` / `**kwargs` for a function), `device`, `model`:
      as for `simulate_fusion` (never modified).
    - `budget_s`: wall-clock budget for the search itself (greedy's own run,
      the first plans decoded and the final build come on top).
    - `exact_max_edges`: enumerate every legal plan of a computation with at
      most this many candidate producers (each producer's edges to all its
      consumers are one decision, all-consumers-or-none); larger ones are annealed.
    - `seed`: for the annealing's random moves.
    - `inline_calls`: inline `call`s first, as `simulate_fusion` does.
    - `rewrite_reduce_windows`: rewrite long scans first, as `simulate_fusion` does.
    - `simplify`, `constant_folding`: first simplify the module and fold its constants as XLA does
      before fusion, as `simulate_fusion` does (both on by default); the search, greedy and the built
      plan all see the module so simplified.
    - `bitcast_layout_changes`: as for `simulate_fusion` (the search, greedy
      and the built plan all see the same graph; by default the modules keep
      bitcasts only when `module` is layout-assigned).

    **Returns:** a `SearchResult`; its `module` is never predicted slower than greedy's.
    """
    module, dev, cost_model = resolve_inputs("search_fusion", module, args, kwargs, device=device, model=model,
                                             optimized=False)
    if not budget_s > 0:
        raise ValueError(f"search_fusion: budget_s must be > 0, got {budget_s!r}")
    with gc_paused():  # see xla_costmodel._gc
        mode = bitcast_mode(module, bitcast_layout_changes)
        result = _search(module, dev, cost_model, budget_s, exact_max_edges, seed, inline_calls, mode,
                         rewrite_reduce_windows, simplify, constant_folding)
    release_body_state(result.module)  # the pass's per-body state would keep its module alive
    return result


def _search(
    module, dev, cost_model, budget_s, exact_max_edges, seed, inline_calls, mode="decide", rewrite_reduce_windows=True,
    simplify=True, constant_folding=True,
) -> SearchResult:
    t0 = time.perf_counter()
    work = working_copy(module, inline_calls, mode, rewrites=[] if rewrite_reduce_windows else None,
                        simplify=simplify, constant_folding=constant_folding)
    # `work` already has its bitcasts (or was asked to keep its reshapes): greedy must not rewrite it again.
    greedy = simulate_fusion(
        work, device=dev, model=cost_model, inline_calls=False, price_totals=False, bitcast_layout_changes=False,
        rewrite_reduce_windows=False, simplify=False, constant_folding=False,  # done above, if asked
        multi_output=False,  # the plans searched are priority fusion's (single-output kernels)
    )
    greedy_names = _greedy_plan(greedy)
    greedy_time, greedy_kernels, greedy_unpriced = plan_time(greedy.module, dev, cost_model)

    clock = _Clock(budget_s)
    checker = LegalityChecker(dev.shared_memory_per_block_bytes)
    pricer = _Pricer(cost_model, dev, checker)
    rng = random.Random(seed)
    problems = [_Problem(c, pricer) for c in fusible_computations(work)]

    starts: list[_Decoded] = []
    greedy_sum = 0.0
    for p in problems:
        plan = frozenset(x for x in p.decisions if x.name in greedy_names)
        d = p.decode_set(plan)
        starts.append(d)
        greedy_sum += d.total_s
    greedy_plan = frozenset(x.name for p in problems for x in p.decisions if x.name in greedy_names)
    reproduced = math.isclose(greedy_sum, greedy_time, rel_tol=1e-9, abs_tol=1e-15)

    # Small computations first (exact), the rest share what is left in proportion to their size.
    rows = []
    best: list[_Decoded] = list(starts)
    methods: list[str] = [""] * len(problems)
    plans = [0] * len(problems)
    seconds = [0.0] * len(problems)
    exact_idx = [i for i, p in enumerate(problems) if len(p.decisions) <= exact_max_edges]
    heur_idx = [i for i, p in enumerate(problems) if len(p.decisions) > exact_max_edges]
    for i in exact_idx:
        p = problems[i]
        ts = time.perf_counter()
        if not p.decisions:
            methods[i] = "exact"
            seconds[i] = time.perf_counter() - ts
            continue
        found, n, complete = _enumerate(p, clock.deadline)
        if found is not None and found.total_s < best[i].total_s:
            best[i] = found
        if complete:
            methods[i] = "exact"
        else:
            heur_idx.append(i)
        seconds[i] = time.perf_counter() - ts
    weights = {i: max(len(problems[i].decisions), 1) for i in heur_idx}
    for j, i in enumerate(heur_idx):
        p = problems[i]
        ts = time.perf_counter()
        left = clock.left()
        share = left * weights[i] / sum(weights[k] for k in heur_idx[j:]) if left > 0 else 0.0
        cand = [best[i]]
        all_in = p.decode(lambda x, k: True)
        cand.append(all_in)
        start = min(cand, key=lambda d: d.total_s)
        found, n = _anneal(p, start, time.perf_counter() + share, rng)
        if found.total_s < best[i].total_s:
            best[i] = found
        methods[i] = "heuristic"
        seconds[i] += time.perf_counter() - ts

    for i, p in enumerate(problems):
        plans[i] = len(p.seen)
        rows.append((p.comp.name, len(p.decisions), methods[i], plans[i], starts[i].total_s, best[i].total_s, seconds[i]))
    comps_df = pd.DataFrame(rows, columns=COMPUTATION_COLUMNS)

    plan_names = {p.comp.name: frozenset(x.name for x in best[i].fused) for i, p in enumerate(problems)}
    fused, refused = _build(work, plan_names, cost_model, dev)
    time_s, n_kernels, unpriced = plan_time(fused, dev, cost_model)
    method = "exact" if all(m == "exact" for m in methods) else "heuristic"
    if not (time_s < greedy_time or (math.isclose(time_s, greedy_time, rel_tol=1e-12) and not refused)):
        # Nothing better than greedy (or greedy's plan lies outside the canonical order's space): keep greedy's.
        fused, time_s = greedy.module, greedy_time
        n_kernels, unpriced = greedy_kernels, greedy_unpriced
        method = "greedy"
        plan_names = {"": greedy_plan}
        refused = 0
    plan = frozenset().union(*plan_names.values()) if plan_names else frozenset()
    if mode == "decide":  # the input's reshapes and transposes back (see `simulate_fusion`)
        bitcasts_to_layout_changes(greedy.module)
        if fused is not greedy.module:
            bitcasts_to_layout_changes(fused)
    release_body_state(work)
    release_body_state(greedy.module)  # priced above; kept only when it is the plan returned
    return SearchResult(
        module=fused,
        time_s=time_s,
        greedy_time_s=greedy_time,
        method=method,
        plans_evaluated=sum(plans),
        elapsed_s=time.perf_counter() - t0,
        plan=plan,
        greedy_plan=greedy_plan,
        greedy_reproduced=reproduced,
        kernels=n_kernels,
        unpriced=unpriced,
        computations=comps_df,
        model=cost_model.name,
        device=dev.name,
        model_calls=pricer.model_calls,
        refused=refused,
        greedy_module=greedy.module,
    )
