"""Combined cost models: several models working together, as XLA's cost-model RFC proposes.

XLA's "Cost Models in XLA GPU – Present and Future" (openxla/xla discussion
#10065) anticipates several cost models (its own, vendors', autotuning)
pricing the same fusion decision, and two ways to combine them:

- `"min"`: the models are on one scale (time), so each side of the
  decision costs what its best implementation costs:
  priority = min_i(unfused_i) − min_i(fused_i);
- `"max-savings"`: the models need not be comparable; a fusion is as good
  as the model that likes it most says: priority = max_i(unfused_i − fused_i).

"A linear regression may be needed to make models comparable": the
`scaled-` combinations first put every model on the scale of measured times
(`xla_costmodel.fit.ScaledModel`: log t_measured ≈ a + b · log t_model,
fitted by least squares over a calibration dataset).

Combinations are spelled in model names through a registry of combinators
(`register_combinator`): `min` and `max-savings` are registered here; the
`scaled` ones by `xla_costmodel.fit`, which fits them (so that this package
never imports the one above it).

Spelled as model names, wherever a name is accepted (`get_model`,
`analyze(..., model=...)`, `simulate_fusion(..., model=...)`, `compare`):

    min(xla-gpu,roofline)              max-savings(xla-gpu,roofline)
    scaled-min(roofline,fitted)        scaled-max-savings(roofline,fitted)
    scaled(roofline)                   min(scaled(roofline),xla-gpu)   (nesting)

`CombinedModel.estimate(kernel)` is the member with the smallest time (its
parts, bound and details, with `details["model"]` naming it,
`details["chosen"]` the path of choices through nested combinations, and
`details["times_by_model"]` every member's time): the kernel as its best
implementation. Members that cannot price a kernel are left out of the
minimum (it is unpriced only if none can); a member that refuses the device
(`xla-gpu` on a CPU) makes the combination refuse it too.

`CombinedModel.estimate_fusion` implements the two priority rules. Neither
splits into per-(producer, consumer) prices, so `producer_s` is NaN and
`simulate_fusion` prices whole producers (`incremental` off).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, runtime_checkable

from ._base import (CostModel, FusionEstimate, KernelEstimate, get_model, prices_by_content,
                    register_combination_reader)
from ._inputs import resolve_device

__all__ = [
    "COMBINATIONS",
    "RULES",
    "CombinedModel",
    "Combinator",
    "ScaledCostModel",
    "parse_model_name",
    "register_combinator",
]

RULES = ("min", "max-savings")


@runtime_checkable
class ScaledCostModel(CostModel, Protocol):
    """A model put on the scale of measured times (`xla_costmodel.fit.ScaledModel`).

    - `model`: the model it scales;
    - `scale_for(device)`: `(log_offset, log_slope)` it uses on `device`;
    - `fitted_to(dataset, device)`: a copy with the scale fitted to `dataset`.
    """

    model: CostModel

    def scale_for(self, device) -> tuple[float, float]: ...

    def fitted_to(self, dataset, device=...) -> "ScaledCostModel": ...


@dataclass(frozen=True, slots=True)
class Combinator:
    """A combination spelled in model names: `build(models, **params)` makes the model;
    `arity`: how many models it takes (None: one or more)."""

    build: Callable[..., CostModel]
    arity: int | None = None


#: Combinations accepted in model names, by name, in the order they were registered.
COMBINATIONS: dict[str, Combinator] = {}


def register_combinator(name: str, *, arity: int | None = None):
    """Decorator: `build(models: tuple, **params) -> CostModel` spells `name(a, b, ...)` in model names."""

    def register(build):
        if name in COMBINATIONS and COMBINATIONS[name].build is not build:
            raise ValueError(f"a model combination named {name!r} is already registered")
        COMBINATIONS[name] = Combinator(build, arity)
        return build

    return register


def _scaled_model(model, **params) -> ScaledCostModel:
    """`model` on the scale of measured times, by the registered `scaled` combinator."""
    combinator = COMBINATIONS.get("scaled")
    if combinator is None:
        # `xla_costmodel.fit` registers it; importing the package imports it.
        raise ValueError("scaled combinations need xla_costmodel.fit (import xla_costmodel)")
    return combinator.build((model,), **params)


def as_model(m):
    """`m` itself, or the registered model its name names: combinators take either (`get_model`:
    a model with only `estimate` gets the rule for pricing fusions, `with_fusion_rule`)."""
    return get_model(m)


def model_label(m) -> str:
    """`m`'s name, or its class's for a model without one: what a combination's name shows of it."""
    return str(getattr(m, "name", type(m).__name__))


def dataset_path(dataset, owner: str) -> str | None:
    """`dataset` as the path a frozen model keeps (None stays None); a `TypeError` naming `owner` for
    anything but a path."""
    if dataset is None or isinstance(dataset, str):
        return dataset
    if isinstance(dataset, os.PathLike):
        return os.fspath(dataset)
    raise TypeError(f"{owner}: dataset must be a path (the model is a frozen dataclass); for a "
                    f"{type(dataset).__name__} use .fitted_to(dataset, device)")


# ---------------------------------------------------------------------------
# Several models


@dataclass(frozen=True, slots=True)
class CombinedModel:
    """Several cost models combined by one of XLA's RFC rules (see the module docstring).

    **Arguments:**

    - `models`: the members (models or names), in order (ties go to the first).
    - `rule`: `"min"` (priority = min unfused − min fused) or `"max-savings"`
      (priority = max of unfused − fused).
    - `scaled`: put every member on the scale of measured times first
      (each member becomes a `xla_costmodel.fit.ScaledModel`).
    - `scales`: for `scaled`, fixed `(log_offset, log_slope)` per member;
      None: each member uses its device's calibration dataset (see `ScaledModel`).
    - `fit_slope`, `dataset`: passed to the `ScaledModel`s.

    **Estimates:** `estimate` gives the member with the smallest time (its
    parts, bound, note and details; `details["model"]` names it,
    `details["times_by_model"]` has every member's time), so the time obeys
    the chosen member's own combination rule. `estimate_fusion` applies the
    rule; `estimate_fusion_by_model` gives every member's `FusionEstimate`.
    """

    models: tuple
    rule: str = "min"
    scaled: bool = False
    scales: tuple | None = None
    fit_slope: bool = False
    dataset: str | None = None
    members: tuple = field(init=False, repr=False, compare=False, hash=False)

    @property
    def held_models(self) -> tuple:
        """The members (`models._base.HoldsModels`)."""
        return self.members

    def __post_init__(self) -> None:
        models = (self.models,) if isinstance(self.models, str) else tuple(self.models)
        if not models:
            raise ValueError("a combined cost model needs at least one model")
        models = tuple(as_model(m) for m in models)
        object.__setattr__(self, "models", models)
        if self.rule not in RULES:
            raise ValueError(f"unknown combination rule {self.rule!r}; rules: {', '.join(RULES)}")
        object.__setattr__(self, "dataset", dataset_path(self.dataset, self.name))
        if self.scales is not None:
            if not self.scaled:
                raise ValueError(f"{self.name}: scales are for scaled combinations (scaled=True, 'scaled-{self.rule}(...)')")
            scales = tuple((float(s[0]), float(s[1])) if isinstance(s, (tuple, list)) else (float(s), 1.0)
                           for s in self.scales)
            if len(scales) != len(models):
                raise ValueError(f"{self.name}: {len(scales)} scales for {len(models)} models")
            object.__setattr__(self, "scales", scales)
        if self.scaled:
            members = []
            for i, m in enumerate(models):
                if isinstance(m, ScaledCostModel) and self.scales is None:
                    members.append(m)
                    continue
                base = m.model if isinstance(m, ScaledCostModel) else m
                a, b = self.scales[i] if self.scales is not None else (None, 1.0)
                members.append(_scaled_model(base, log_offset=a, log_slope=b, fit_slope=self.fit_slope,
                                             dataset=self.dataset))
            object.__setattr__(self, "members", tuple(members))
        else:
            object.__setattr__(self, "members", models)

    @property
    def prices_by_content(self) -> bool:
        """True when every member prices by content (see `CostModel`)."""
        return all(prices_by_content(m) for m in self.members)

    @property
    def name(self) -> str:
        prefix = "scaled-" if self.scaled else ""
        return f"{prefix}{self.rule}({','.join(model_label(m) for m in self.models)})"

    @property
    def labels(self) -> tuple[str, ...]:
        """The members' names as spelled in the combination; a repeated name gets `#2`, `#3`, ..."""
        seen: dict[str, int] = {}
        out = []
        for m in self.models:
            n = model_label(m)
            seen[n] = seen.get(n, 0) + 1
            out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
        return tuple(out)

    # ------------------------------------------------------------------ scale
    def scales_for(self, device) -> tuple[tuple[float, float], ...]:
        """`(log_offset, log_slope)` per member on `device` (scaled combinations only)."""
        if not self.scaled:
            raise ValueError(f"{self.name} is not a scaled combination")
        dev = resolve_device(device)
        return tuple(m.scale_for(dev) for m in self.members)

    def fitted_to(self, dataset, device="host") -> "CombinedModel":
        """A copy with every member's scale fitted to `dataset` (path(s) or DataFrame) on `device`."""
        if not self.scaled:
            raise ValueError(f"{self.name} is not a scaled combination; use 'scaled-{self.rule}(...)'")
        dev = resolve_device(device)
        scales = tuple(m.fitted_to(dataset, dev).scale_for(dev) for m in self.members)
        return dataclasses.replace(self, scales=scales)

    # ------------------------------------------------------------- CostModel
    def _each(self, what: str, call):
        out = []
        for label, m in zip(self.labels, self.members):
            try:
                out.append(call(m))
            except Exception as exc:
                exc.add_note(f"(from member {label!r} of the combined cost model {self.name!r}, in {what})")
                raise
        return out

    def estimate(self, kernel, device) -> KernelEstimate:
        """The member with the smallest time for this kernel (see the class docstring).

        **Raises:** what a member raises, e.g. `ValueError` when it refuses
        the device (noted with the member's name).
        """
        dev = resolve_device(device)
        ests = self._each("estimate", lambda m: m.estimate(kernel, dev))
        labels = self.labels
        times = {label: e.time_s for label, e in zip(labels, ests)}
        priced = [i for i, e in enumerate(ests) if e.priced]
        if not priced:
            why = "; ".join(f"{label}: {e.note}" for label, e in zip(self.labels, ests))
            return KernelEstimate.unpriced(f"no member of {self.name} can price it ({why})",
                                           {"times_by_model": times})
        best = min(priced, key=lambda i: ests[i].time_s)  # the first of equal times
        e = ests[best]
        left_out = [f"{labels[i]} ({ests[i].note})" for i in range(len(ests)) if i not in priced]
        note = "; ".join(x for x in (e.note, ("not priced by " + ", ".join(left_out)) if left_out else "") if x)
        # `chosen`: the path of choices down nested combinations (outer member first).
        chosen = (labels[best], *e.details.get("chosen", ()))
        return KernelEstimate(
            compute_s=e.compute_s,
            memory_s=e.memory_s,
            launch_s=e.launch_s,
            time_s=e.time_s,
            bound=e.bound,
            note=note,
            details={**e.details, "model": labels[best], "chosen": chosen, "times_by_model": times},
        )

    def estimate_fusion_by_model(self, producer, consumers: Sequence, device) -> dict[str, FusionEstimate]:
        """Every member's `FusionEstimate` for fusing `producer` into `consumers`, by member name."""
        dev = resolve_device(device)
        fes = self._each("estimate_fusion", lambda m: m.estimate_fusion(producer, list(consumers), dev))
        return dict(zip(self.labels, fes))

    def estimate_fusion(self, producer, consumers: Sequence, device) -> FusionEstimate:
        """Fusing `producer` into every one of `consumers`, by the combination rule.

        - `"min"`: `time_unfused_s` = min over members of their unfused time,
          `time_fused_s` = min of their fused time (members that cannot price
          a side are left out of that side's minimum);
        - `"max-savings"`: the unfused and fused times of the member whose
          unfused − fused is largest (the first of equal ones).

        So `priority_s` is min_i(unfused_i) − min_i(fused_i), resp.
        max_i(unfused_i − fused_i); NaN when no member prices the fusion.
        `producer_s` is NaN: neither rule splits into per-kernel prices.
        """
        fes = list(self.estimate_fusion_by_model(producer, consumers, device).values())  # labels are unique
        unfused, fused = self.combine_fusion_times([(f.time_unfused_s, f.time_fused_s) for f in fes])
        return FusionEstimate(time_unfused_s=unfused, time_fused_s=fused)

    def combine_fusion_times(self, times: Sequence[tuple[float, float]]) -> tuple[float, float]:
        """`(time_unfused_s, time_fused_s)` from each member's, by the rule (see `estimate_fusion`);
        a fusion pass combines members' pair prices with it (`models.CombinesFusionTimes`)."""
        nan = math.nan
        if self.rule == "min":
            unfused = [u for u, _ in times if not math.isnan(u)]
            fused = [f for _, f in times if not math.isnan(f)]
            return (min(unfused) if unfused else nan, min(fused) if fused else nan)
        savings = [u - f for u, f in times]
        ok = [i for i, s in enumerate(savings) if not math.isnan(s)]
        if not ok:
            return (nan, nan)
        best = max(ok, key=lambda i: (savings[i], -i))
        return (times[best][0], times[best][1])


# ---------------------------------------------------------------------------
# Names

_NAME_CHARS = re.compile(r"[^\s(),]+")


@dataclass(slots=True)
class _Node:
    name: str
    args: list | None
    column: int


class _NameParser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, what: str, pos: int | None = None) -> ValueError:
        pos = self.pos if pos is None else pos
        combos = ", ".join(f"{c}(...)" for c in COMBINATIONS)
        return ValueError(
            f"cannot read cost-model name {self.text!r}: {what} at column {pos + 1}\n"
            f"    {self.text}\n    {' ' * pos}^\n"
            f"(combinations: {combos}; e.g. 'min(xla-gpu,roofline)')"
        )

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def expr(self) -> _Node:
        self.skip()
        m = _NAME_CHARS.match(self.text, self.pos)
        if not m:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "the end"
            raise self.error(f"expected a model name, found {found}")
        node = _Node(m.group(0), None, self.pos)
        self.pos = m.end()
        self.skip()
        if self.pos < len(self.text) and self.text[self.pos] == "(":
            if node.name not in COMBINATIONS:
                raise self.error(f"unknown combination {node.name!r}", node.column)
            self.pos += 1
            node.args = [self.expr()]
            self.skip()
            while self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
                node.args.append(self.expr())
                self.skip()
            if self.pos >= len(self.text) or self.text[self.pos] != ")":
                found = repr(self.text[self.pos]) if self.pos < len(self.text) else "the end"
                raise self.error(f"expected ',' or ')', found {found}")
            self.pos += 1
            self.skip()
        return node

    def parse(self) -> _Node:
        node = self.expr()
        if self.pos != len(self.text):
            raise self.error(f"unexpected {self.text[self.pos]!r}")
        return node

    def build(self, node: _Node, params: dict | None = None):
        params = params or {}
        if node.args is None:
            try:
                return get_model(node.name, **params)
            except ValueError as exc:
                raise ValueError(f"in cost-model name {self.text!r} at column {node.column + 1}: {exc}") from exc
        combinator = COMBINATIONS[node.name]
        if combinator.arity is not None and len(node.args) != combinator.arity:
            raise self.error(f"{node.name!r} takes {_count(combinator.arity)}, got {len(node.args)}", node.column)
        args = [self.build(a) for a in node.args]
        return combinator.build(tuple(args), **params)


def _count(n: int) -> str:
    return "one model" if n == 1 else f"{n} models"


@register_combinator("min")
def _min(models: tuple, **params) -> CombinedModel:
    """`min(a, b, ...)`: each side of a fusion decision costs what its cheapest member says."""
    return CombinedModel(models, rule="min", **params)


@register_combinator("max-savings")
def _max_savings(models: tuple, **params) -> CombinedModel:
    """`max-savings(a, b, ...)`: a fusion saves what the member that likes it most says."""
    return CombinedModel(models, rule="max-savings", **params)


def parse_model_name(text: str, **params):
    """The model a combination name spells (`get_model` calls this for names with parentheses).

    **Arguments:** `text`: e.g. `"min(xla-gpu,roofline)"`,
    `"max-savings(xla-gpu,roofline)"`, `"scaled-min(roofline,fitted)"`,
    `"scaled(roofline)"` (any name of `COMBINATIONS`); members are registry or
    plugin names or nested combinations; blanks are ignored. `**params`: fields
    of the outer `CombinedModel` (`scales`, `fit_slope`, `dataset`) or `ScaledModel`.

    **Returns:** a `CombinedModel` or `ScaledModel`.

    **Raises:** `ValueError` saying where the name cannot be read (column
    and caret), or naming an unknown member.
    """
    p = _NameParser(text)
    return p.build(p.parse(), params)


# `get_model` reads names with parentheses through this module.
register_combination_reader(parse_model_name, lambda: tuple(COMBINATIONS))
