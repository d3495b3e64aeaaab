"""Fused computations kept as recipes until someone looks inside.

A fusion pass fuses one producer at a time, so a kernel of n instructions is
rebuilt many times on its way: every step that fuses a fusion into another
clones the whole producer body again, and most of those intermediate bodies
are thrown away a step later. The pass itself rarely reads a body: legality
facts and prices are shared by content (`hlo._structure`), so only the first
kernel of each kind is ever walked.

A `DeferredBody` is a fused computation that holds how it was made instead of
its instructions: a tree of `Leaf` (one plain instruction), `Frozen` (a body
that was already built) and `Fused` (a producer recipe inlined into a consumer
recipe, with how their operands map onto the fusion's). The first access to
its `instructions`, `root` or `_by_name` builds the body, once, as the eager
editor would have: parameters in operand order, then the producer's clones,
then the consumer's.

Recipes are immutable and may be shared (a producer duplicated into several
consumers is one recipe in each), so an instruction whose recipe was taken
may be removed from the graph: a `Leaf` keeps only the instruction's own
attributes, and its operands by position.
"""

from __future__ import annotations

from typing import Callable

from ._ir import HloComputation, HloInstruction

__all__ = ["DeferredBody", "Frozen", "Fused", "Leaf", "is_deferred", "replay", "root_opcode"]


class Leaf:
    """One plain instruction; `args[k]` is the position of its operand k in the recipe's operand list."""

    __slots__ = ("instr", "args")

    def __init__(self, instr: HloInstruction, args: tuple[int, ...]):
        self.instr = instr
        self.args = args


class Frozen:
    """A body built earlier, as a detached copy no one edits: its instructions in topological order
    (in no computation, so that the copy holds no reference cycle) and its root; parameter i is
    operand i."""

    __slots__ = ("instructions", "root")

    def __init__(self, instructions: list[HloInstruction], root: HloInstruction):
        self.instructions = instructions
        self.root = root


class Fused:
    """`producer` inlined into `consumer`: operand k of the consumer recipe is the producer's
    value when `consumer_args[k] < 0`, else operand `consumer_args[k]` of the fusion; operand k
    of the producer recipe is operand `producer_args[k]` of the fusion."""

    __slots__ = ("producer", "consumer", "producer_args", "consumer_args")

    def __init__(self, producer, consumer, producer_args: tuple[int, ...], consumer_args: tuple[int, ...]):
        self.producer = producer
        self.consumer = consumer
        self.producer_args = producer_args
        self.consumer_args = consumer_args


def replay(
    recipe,
    values: list[HloInstruction],
    clone: Callable[[HloInstruction, list[HloInstruction]], HloInstruction],
) -> HloInstruction:
    """Build `recipe` on `values` (one per recipe operand) with `clone(instr, operands)`; return the root.

    Producers are built before their consumers, so clones come in topological
    order. Iterative: a kernel that absorbed thousands of producers is a chain
    that deep.
    """
    stack: list = [(recipe, values, False)]
    result = None
    while stack:
        r, vals, producer_done = stack.pop()
        kind = type(r)
        if kind is Fused:
            if not producer_done:
                stack.append((r, vals, True))
                stack.append((r.producer, [vals[j] for j in r.producer_args], False))
            else:
                # `result` is the producer's root: the consumer's result is ours.
                produced = result
                stack.append((r.consumer, [produced if j < 0 else vals[j] for j in r.consumer_args], False))
        elif kind is Leaf:
            result = clone(r.instr, [vals[j] for j in r.args])
        else:
            mapping: dict[int, HloInstruction] = {}
            for instr in r.instructions:
                if instr.opcode == "parameter":
                    mapping[id(instr)] = vals[instr.parameter_number]
                else:
                    mapping[id(instr)] = clone(instr, [mapping[id(o)] for o in instr.operands])
            result = mapping[id(r.root)]
    return result


class DeferredBody(HloComputation):
    """A fused computation built on first access (see the module doc).

    **Arguments:** `name`; `recipe`; `fusion`, the instruction that calls it
    (its operands are the parameters' shapes); `builder`, an object whose
    `materialize(body)` fills `instructions`, `root` and `_by_name`.
    `recipe` is None once built (or dropped).
    """

    __slots__ = ("recipe", "fusion", "builder")

    def __init__(self, name: str, recipe, fusion: HloInstruction, builder):
        # Not HloComputation.__init__: `instructions`, `root` and `_by_name` stay unset until built.
        self.name = name
        self.module = None
        self.is_entry = False
        self.execution_thread = None
        self.recipe = recipe
        self.fusion = fusion
        self.builder = builder

    def __getattr__(self, attr: str):
        # Only reached for unset slots: the body has not been built yet.
        if attr in ("instructions", "root", "_by_name") and self.recipe is not None:
            self.builder.materialize(self)
            return object.__getattribute__(self, attr)
        raise AttributeError(attr)

    def drop(self) -> None:
        """Forget the recipe of a body that will never be built (its fusion was removed)."""
        if self.recipe is not None:
            self.recipe = None
            self.instructions = []
            self._by_name = {}
            self.root = None
        self.fusion = None

    def __repr__(self) -> str:
        if self.recipe is not None:
            return f"<HloComputation {self.name}: not built yet>"
        return super().__repr__()


def is_deferred(comp: HloComputation | None) -> bool:
    """Whether `comp` is a `DeferredBody` not built yet (asking does not build it)."""
    return type(comp) is DeferredBody and comp.recipe is not None


def root_opcode(comp: HloComputation) -> str:
    """The opcode of `comp`'s root; a deferred body is not built to tell (its root is its last consumer's)."""
    if is_deferred(comp):
        r = comp.recipe
        while type(r) is Fused:
            r = r.consumer
        if type(r) is Leaf:
            return r.instr.opcode
        if r.root.opcode != "parameter":
            return r.root.opcode
        # (a body that returns a parameter: the root may be a producer's; build it and look)
    return comp.root.opcode
