"""The fusion engine: fused computations made the way XLA's `HloFusionInstruction` makes them.

Everything a fusion pass needs, built on the graph editing of `hlo.editing`, so
that the result prints as a module XLA's parser accepts:

- `fuse(producer, consumer)` fuses in place: the consumer becomes (or stays)
  a `fusion` whose fused computation holds a clone of the producer; the
  producer is removed once nothing uses it. New fusions are named `fusion`,
  `fusion.1`, ... and their bodies `fused_computation`, `fused_computation.1`,
  ...; fused parameters `param_0`, `param_1`, ... (uniquified), as XLA names them.
- `hypothetical_fusion(producer, consumer)` builds the same fusion detached
  from the module (the module is not touched), for pricing a fusion;
  `discard_fusion` frees it.
- `trial_fusion(producer, consumer)` gives the same fusion for the length of a
  `with` block by growing a large fusion consumer in place and undoing it
  after: O(size of the producer), where a detached copy is O(size of the
  consumer). Caches of bodies that follow growths register with
  `follows_growths`, so that the trial leaves them as it found them.
- `make_fusion(instr)` wraps one instruction into a fusion of its own.
- `default_fusion_kind(body)`: kLoop or kInput from the body's root.
- `FusionEditor`: many fusions in one computation, each O(size of the
  fusion), with fused bodies kept as recipes (`hlo.editing.DeferredBody`) until read.
"""

from __future__ import annotations

import itertools
import weakref
from contextlib import contextmanager
from dataclasses import dataclass

from ..hlo import HloComputation, HloInstruction, HloModule
from ..hlo.editing import (DeferredBody, Frozen, Fused, Leaf, NameUniquifier, clone_instruction, is_deferred,
                           names_for, remove_instruction_and_body, replay)

__all__ = [
    "BodyGrowth",
    "FusedBodyBuilder",
    "FusionEditor",
    "body_growth",
    "default_fusion_kind",
    "discard_fusion",
    "discard_module",
    "fuse",
    "hypothetical_fusion",
    "make_fusion",
    "can_try_fusion",
    "follows_growths",
    "select_in_body",
    "tracks_growth",
    "trial_fusion",
]

def _new_parameter(number: int, like: HloInstruction, name: str) -> HloInstruction:
    p = HloInstruction(name, "parameter", like.shape, parameter_number=number)
    return p


# Fused computations built here list every operand before its users
# (parameters first, then clones in post-order), so walking them needs no
# post-order sort.
_TOPOLOGICAL: "weakref.WeakSet[HloComputation]" = weakref.WeakSet()


def operands_first(comp: HloComputation) -> list[HloInstruction]:
    """`comp`'s instructions with operands first (its list as is when built here)."""
    return comp.instructions if comp in _TOPOLOGICAL else comp.post_order()


# ---------------------------------------------------------------------------
# Fusion kind


_ELEMENTWISE_UNARY_INTERMEDIATE = frozenset(
    {
        "abs", "ceil", "convert", "cosine", "exponential", "exponential-minus-one", "floor", "imag",
        "is-finite", "log", "log-plus-one", "logistic", "negate", "not", "popcnt", "real",
        "round-nearest-afz", "round-nearest-even", "rsqrt", "sign", "sine", "sqrt", "cbrt", "tan",
        "tanh", "erf", "bitcast", "reshape", "clz", "count-leading-zeros", "reduce-precision",
        "bitcast-convert",
    }
)


def default_fusion_kind(fused: HloComputation) -> str:
    """`kInput` when the root's hero (through unary elementwise/bitcast ops) is a
    reduce, scatter, concatenate or a transpose, else `kLoop`.

    A quick stand-in for XLA's `ChooseKind`; the fusion simulation passes its
    own emitter analysis as `kind=`.
    """
    roots = fused.root.operands if fused.root.opcode == "tuple" else [fused.root]
    for root in roots:
        hero = root
        while hero.opcode in _ELEMENTWISE_UNARY_INTERMEDIATE and hero.operands and hero.operands[0].opcode != "parameter":
            hero = hero.operands[0]
        if hero.opcode in ("reduce", "scatter", "concatenate", "transpose", "sort"):
            return "kInput"
    return "kLoop"


# ---------------------------------------------------------------------------
# Building fused computations


class _Body:
    """A fused computation under construction: parameters keyed by outer operand.

    With `names`, instructions get module-wide unique names; without, names
    unique in the body only, and each new instruction is added to `made` (if
    given) for its owner to name later.
    """

    __slots__ = ("comp", "operands", "params", "param_of", "names", "made", "origin")

    def __init__(
        self,
        comp: HloComputation,
        names: NameUniquifier | None,
        made: set | None = None,
        origin: dict | None = None,
    ):
        self.comp = comp
        self.operands: list[HloInstruction] = []
        self.params: list[HloInstruction] = []
        self.param_of: dict[int, HloInstruction] = {}
        self.names = names
        self.made = made
        # clone -> name of the instruction it was first cloned from (provenance)
        self.origin = origin

    def name(self, prefix: str) -> str:
        if self.names is None:
            # detached body: names only need to be unique inside it
            if prefix not in self.comp._by_name:
                return prefix
            n = 1
            while f"{prefix}.{n}" in self.comp._by_name:
                n += 1
            return f"{prefix}.{n}"
        return self.names.instruction(prefix)

    def param_for(self, outer: HloInstruction) -> HloInstruction:
        p = self.param_of.get(id(outer))
        if p is None:
            number = len(self.params)
            p = _new_parameter(number, outer, self.name(f"param_{number}"))
            self.comp.add_instruction(p)
            if self.made is not None:
                self.made.add(p)
            self.params.append(p)
            self.operands.append(outer)
            self.param_of[id(outer)] = p
        return p

    def clone_into(self, instr: HloInstruction, operands: list[HloInstruction]) -> HloInstruction:
        origin = self.origin
        if origin is None:
            c = clone_instruction(instr, operands, name=self.name(instr.name))
        else:
            # named after the input instruction it copies (a clone of a clone too)
            base = origin.get(instr, instr.name)
            c = clone_instruction(instr, operands, name=self.name(base))
            origin[c] = base
        self.comp.add_instruction(c)
        if self.made is not None:
            self.made.add(c)
        return c

    def inline(self, fused: HloComputation, outer_operands: list[HloInstruction], stop: HloInstruction | None = None):
        """Clone `fused`'s body with its parameter i bound to `outer_operands[i]`
        (an outer instruction, turned into a parameter) and return the root clone."""
        mapping: dict[int, HloInstruction] = {}
        for instr in operands_first(fused):
            if instr.opcode == "parameter":
                mapping[id(instr)] = self.param_for(outer_operands[instr.parameter_number])
            else:
                mapping[id(instr)] = self.clone_into(instr, [mapping[id(o)] for o in instr.operands])
        return mapping[id(fused.root)]


#: The builder of fused bodies, for passes that make fusions of their own shape (multi-output fusion).
FusedBodyBuilder = _Body


def _build_fused_body(
    producer: HloInstruction, consumer: HloInstruction, body: _Body
) -> HloInstruction:
    """Fill `body` with `consumer` (its fused body if a fusion) with `producer`
    inlined in place of its uses; return the root.

    Parameters are numbered as XLA numbers them after `Fuse`: the consumer's
    own parameters first, in their order, less the one(s) bound to the
    producer, then the producer's operands that are new, in operand order.
    """
    fused = consumer.fused_computation
    # A fusion's parameter i is its operand i: the consumer's parameters first, in order.
    for o in consumer.operands:
        if o is not producer:
            body.param_for(o)
    value = _producer_value(producer, body)

    def outer(o: HloInstruction) -> HloInstruction:
        return value if o is producer else body.param_for(o)

    if is_deferred(fused):
        return replay(fused.recipe, [outer(o) for o in consumer.operands], body.clone_into)
    if fused is not None:
        mapping: dict[int, HloInstruction] = {}
        for instr in operands_first(fused):
            if instr.opcode == "parameter":
                mapping[id(instr)] = outer(consumer.operands[instr.parameter_number])
            else:
                mapping[id(instr)] = body.clone_into(instr, [mapping[id(o)] for o in instr.operands])
        return mapping[id(fused.root)]
    return body.clone_into(consumer, [outer(o) for o in consumer.operands])


def _producer_value(producer: HloInstruction, body: _Body) -> HloInstruction:
    """Clone `producer` (a fusion's whole body) into `body`, its operands bound to `body`'s
    parameters (new ones appended in operand order); return the clone of its root."""
    pfused = producer.fused_computation
    if pfused is None:
        return body.clone_into(producer, [body.param_for(o) for o in producer.operands])
    if is_deferred(pfused):
        return replay(pfused.recipe, [body.param_for(o) for o in producer.operands], body.clone_into)
    return body.inline(pfused, producer.operands)


def _params_first(comp: HloComputation) -> None:
    comp.instructions.sort(key=lambda i: 0 if i.opcode == "parameter" else 1)


def hypothetical_fusion(
    producer: HloInstruction, consumer: HloInstruction, kind: str | None = None
) -> HloInstruction:
    """The fusion that fusing `producer` into `consumer` would give, detached from the module.

    **Arguments:** `producer`, an operand of `consumer`; either may be a fusion
    (a fusion producer's body is inlined, a fusion consumer's body extended);
    `kind`: the fusion kind (default: `default_fusion_kind` of the fused body).

    **Returns:** a `fusion` instruction with its own fused computation (named
    `fused_computation`, in no module). Its operands are the module's
    instructions, but it is not registered as their user, and nothing in the
    module is changed. `fusion.computation` is the consumer's computation (for
    context only; the instruction is not in its instruction list).
    """
    if producer not in consumer.operands:
        raise ValueError(f"'{producer.name}' is not an operand of '{consumer.name}'")
    comp = HloComputation("fused_computation")
    body = _Body(comp, None)
    root = _build_fused_body(producer, consumer, body)
    comp.root = root
    _params_first(comp)
    _TOPOLOGICAL.add(comp)
    fusion = HloInstruction.__new__(HloInstruction)
    _init_fusion(fusion, consumer.name, consumer.shape, comp, kind or default_fusion_kind(comp), consumer)
    fusion.operands = list(body.operands)
    fusion.computation = consumer.computation
    return fusion


def discard_fusion(fusion: HloInstruction) -> None:
    """Free a detached fusion from `hypothetical_fusion` once priced (it must not be used afterwards).

    Its body is unlinked (`_dismantle`), so it goes away with its last
    reference instead of being left to the cyclic garbage collector; a
    fusion pass builds thousands of these.
    """
    body = fusion.fused_computation
    if body is not None:
        _dismantle(body)
    fusion.operands = []


def _init_fusion(fusion: HloInstruction, name: str, shape, comp: HloComputation, kind: str, like: HloInstruction):
    fusion.name = name
    fusion.opcode = "fusion"
    fusion.shape = shape
    fusion.operands = []
    fusion.users = []
    fusion.computation = None
    fusion.parameter_number = None
    fusion.literal_text = None
    fusion._raw_store = {}
    fusion._pos = None
    fusion._src = None
    fusion._cache = None
    fusion._called = None
    fusion.set_attribute("kind", kind)
    fusion.set_attribute("calls", comp)
    # XLA gives a new fusion the metadata of the instruction it was made from.
    md = like._raw.get("metadata")
    if md is not None:
        fusion.set_attribute("metadata", md)


# ---------------------------------------------------------------------------
# In-place edits


def _insert_computation(module: HloModule, comp: HloComputation, caller: HloComputation) -> None:
    # XLA's printer (and parser) want callees before callers.
    module.add_computation(comp, before=caller)


def make_fusion(
    instr: HloInstruction, kind: str | None = None, *, names: NameUniquifier | None = None
) -> HloInstruction:
    """Replace `instr` in its computation by a `fusion` holding only it.

    The fusion is named `fusion` (uniquified) and its body `fused_computation`;
    operands become `param_0`, `param_1`, ... (one per distinct operand). The
    fusion takes `instr`'s place in the instruction list, its users and root
    status. **Returns:** the fusion.
    """
    comp = instr.computation
    if comp is None or comp.module is None:
        raise ValueError(f"'{instr.name}' is not in a module")
    module = comp.module
    names = names_for(module, names)
    fused = HloComputation(names.computation("fused_computation"))
    body = _Body(fused, names)
    root = body.clone_into(instr, [body.param_for(o) for o in instr.operands])
    fused.root = root
    _params_first(fused)
    fusion = HloInstruction.__new__(HloInstruction)
    _init_fusion(fusion, names.instruction("fusion"), instr.shape, fused, kind or default_fusion_kind(fused), instr)
    for o in body.operands:
        fusion.append_operand(o)
    _insert_computation(module, fused, comp)
    comp.add_instruction(fusion, before=instr)
    instr.replace_all_uses_with(fusion)
    comp.remove_instruction(instr)
    names.release_instruction(instr.name)
    return fusion


@dataclass(frozen=True, slots=True, eq=False)
class BodyGrowth:
    """How the last in-place growth (`_extend_fusion`) changed a fused body, for analyses that
    update what they know of the body instead of walking all of it again.

    **Attributes:** `serial` (unique per growth); `previous`: the serial of the growth before it
    (0: the body as first built); `size_before`, `size_after`: `len(body.instructions)`;
    `added`: the instructions the growth made (the producer's clones and the new parameters),
    operands before users; `dropped`: the parameters that stood for the producer, gone from the
    body; `value`: the producer's value in the body, which took over their uses.
    """

    serial: int
    previous: int
    size_before: int
    size_after: int
    added: tuple
    dropped: tuple
    value: HloInstruction


_GROWTH: "weakref.WeakKeyDictionary[HloComputation, BodyGrowth]" = weakref.WeakKeyDictionary()
_SERIALS = itertools.count(1)


def body_growth(body: HloComputation) -> BodyGrowth | None:
    """The last growth of `body` by a fusion (None if it never grew in place)."""
    return _GROWTH.get(body)


# Bodies smaller than this are walked afresh whenever asked about: keeping state through their
# growths would cost more than it saves (`select_in_body`, and the analyses that follow growths).
TRACK_GROWTH_FROM = 48


def tracks_growth(body: HloComputation) -> bool:
    """Whether what is known of `body` is kept and brought up to date through its growths."""
    return len(body.instructions) >= TRACK_GROWTH_FROM

_SELECTIONS: "weakref.WeakKeyDictionary[HloComputation, dict]" = weakref.WeakKeyDictionary()


def select_in_body(body: HloComputation, opcodes: frozenset) -> tuple[HloInstruction, ...]:
    """The instructions of `body` whose opcode is in `opcodes`, in body order.

    Kept per body and brought up to date through its growths: after a growth
    the body lists its parameters, then the producer's clones, then what it
    had, so the answer is the matching clones followed by the previous answer
    (a parameter is never selected through a growth). Questions such as "is
    there a reduce in this kernel" then cost the number of matches, not the
    size of a body that grows thousands of times.
    """
    n = len(body.instructions)
    if n < TRACK_GROWTH_FROM or "parameter" in opcodes:
        return tuple(h for h in body.instructions if h.opcode in opcodes)
    g = _GROWTH.get(body)
    serial = g.serial if g is not None else 0
    kept = _SELECTIONS.get(body)
    if kept is None:
        kept = _SELECTIONS[body] = {}
    hit = kept.get(opcodes)
    if hit is not None:
        was, size, found = hit
        if was == serial and size == n:
            return found
        if g is not None and g.previous == was and g.size_before == size and g.size_after == n:
            found = tuple(h for h in g.added if h.opcode in opcodes) + found
            kept[opcodes] = (serial, n, found)
            return found
    found = tuple(h for h in body.instructions if h.opcode in opcodes)
    kept[opcodes] = (serial, n, found)
    return found


def _leading_parameters(fused: HloComputation) -> int:
    """How many parameters open the instruction list of a body built here (`_TOPOLOGICAL`)."""
    instrs = fused.instructions
    n = 0
    while n < len(instrs) and instrs[n].opcode == "parameter":
        n += 1
    return n


def _extend_fusion(
    producer: HloInstruction,
    consumer: HloInstruction,
    names: NameUniquifier | None,
    origin: dict | None = None,
    made: set | None = None,
    *,
    attach: bool = True,
) -> None:
    """Fuse `producer` into the fusion `consumer`, in place (XLA's `FuseInstruction` / `MergeFusionInstruction`).

    The consumer's parameters keep their order (less the producer's), the
    producer's new operands get new parameters at the end; the body stays
    topologically ordered (parameters, the producer's clones, the rest).
    `attach=False` (a trial): the consumer's operand list is replaced, but
    the outer instructions' users are left alone.
    """
    fused = consumer.fused_computation
    body = _Body(fused, names, made, origin)
    n_params = None
    if fused in _TOPOLOGICAL:
        # Built here: parameters come first, in number order (no scan and sort of the whole body).
        n_params = _leading_parameters(fused)
        params = fused.instructions[:n_params]
    else:
        params = fused.parameters
    for p in params:
        body.params.append(p)
        outer = consumer.operands[p.parameter_number]
        body.operands.append(outer)
        body.param_of[id(outer)] = p
    producer_params = [p for p in body.params if body.operands[p.parameter_number] is producer]
    n_before = len(fused.instructions)
    value = _producer_value(producer, body)
    new_instrs = fused.instructions[n_before:]
    # New fusion operands (appended by param_for)
    if attach:
        for o in body.operands[len(consumer.operands):]:
            consumer.append_operand(o)
    else:
        consumer.operands = list(consumer.operands) + body.operands[len(consumer.operands):]
    for p in producer_params:
        p.replace_all_uses_with(value)
    # Drop the producer's parameters and renumber the rest.
    drop = {id(p) for p in producer_params}
    keep_ops, keep_params = [], []
    for p, o in zip(body.params, body.operands):
        if id(p) in drop:
            del fused._by_name[p.name]
            p.computation = None
            if names is not None:
                names.release_instruction(p.name)
        else:
            keep_params.append(p)
            keep_ops.append(o)
    for i, p in enumerate(keep_params):
        p.parameter_number = i
    old_ops = consumer.operands
    consumer.operands = keep_ops
    if attach:
        kept = {id(o) for o in keep_ops}
        for o in old_ops:
            if id(o) not in kept and consumer in o.users:
                o.users.remove(consumer)
    # parameters first, then the producer's clones (they read only parameters), then the rest
    if n_params is not None:
        rest = fused.instructions[n_params:n_before]
    else:
        rest = [i for i in fused.instructions[:n_before] if i.opcode != "parameter"]
    fused.instructions = (
        keep_params
        + [i for i in new_instrs if i.opcode != "parameter"]
        + rest
    )
    if fused.root is not None and id(fused.root) in drop:
        fused.root = value
    last = _GROWTH.get(fused)
    _GROWTH[fused] = BodyGrowth(next(_SERIALS), last.serial if last is not None else 0, n_before,
                                len(fused.instructions), tuple(new_instrs), tuple(producer_params), value)


# Caches keyed by fused body whose entries follow the body's growths (by `BodyGrowth.serial`):
# `trial_fusion` puts back the entries it found. (cache, copy of an entry or None)
_GROWTH_CACHES: list[tuple["weakref.WeakKeyDictionary", object]] = []
# Every per-body cache, released together when a pass is done with its module (`release_body_state`).
_BODY_STATE: list["weakref.WeakKeyDictionary"] = [_GROWTH, _SELECTIONS]


def per_body_state(cache: "weakref.WeakKeyDictionary") -> "weakref.WeakKeyDictionary":
    """Register `cache` (fused body -> what is known of it) to be emptied of a module's bodies by
    `release_body_state`. **Returns:** `cache`."""
    _BODY_STATE.append(cache)
    return cache


def release_body_state(module) -> None:
    """Forget what the per-body caches hold for `module`'s bodies and for detached ones (in no module:
    the candidate fusions a pass built and dropped).

    The caches are keyed weakly, but their values reference the bodies' instructions, which reference
    their body and its module: a weak key alone never lets a finished pass's module go (measured: each
    `simulate_fusion` kept its whole working module alive, ~2 GB over the test suite's diffrax runs).
    A body asked about again is analysed afresh.
    """
    for cache in _BODY_STATE:
        for body in list(cache.keys()):
            owner = getattr(body, "module", None)
            if owner is None or owner is module:
                cache.pop(body, None)


def discard_module(module) -> None:
    """Free a throwaway module (one built to be printed, tiled or priced, then dropped; it must not be
    used afterwards): what the per-body caches hold for it goes (`release_body_state`), and its
    computations are unlinked (`_dismantle`), so that it goes away with its last reference instead of
    being left to the cyclic garbage collector."""
    release_body_state(module)
    for comp in module.computations:
        if not is_deferred(comp):
            _dismantle(comp)
        comp.module = None
    module.computations = []
    module._by_name = {}
    module.entry = None


def follows_growths(cache: "weakref.WeakKeyDictionary", copy=None) -> "weakref.WeakKeyDictionary":
    """Register `cache` (fused body -> what is known of it, checked against the body's growths)
    so that a `trial_fusion` leaves its entry for the body as it was. `copy(entry)`: how to keep
    an entry that is changed in place (None: entries are replaced, never changed).
    **Returns:** `cache`."""
    _GROWTH_CACHES.append((cache, copy))
    return per_body_state(cache)


follows_growths(_SELECTIONS, dict)


# What a fusion made by a pass carries: `trial_fusion` gives it the attributes of `hypothetical_fusion`'s.
_PLAIN_FUSION_ATTRIBUTES = frozenset({"kind", "calls", "metadata"})


def can_try_fusion(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """Whether `trial_fusion(producer, consumer)` applies: `consumer` is a fusion built here (a
    large body in operand order, distinct operands, no attributes but its kind, body and
    metadata) and `producer` one of its operands."""
    fused = consumer.fused_computation  # (a body not built yet is not in _TOPOLOGICAL)
    if fused is None or fused not in _TOPOLOGICAL or not tracks_growth(fused) or consumer.opcode != "fusion":
        return False
    ops = consumer.operands
    if not any(o is producer for o in ops) or len({id(o) for o in ops}) != len(ops):
        return False
    return consumer._raw.keys() <= _PLAIN_FUSION_ATTRIBUTES


@contextmanager
def trial_fusion(producer: HloInstruction, consumer: HloInstruction):
    """The fusion `hypothetical_fusion(producer, consumer)` would build, for the length of the block.

    The consumer itself grows in place (its body by the producer's clones, its
    operand list, its kind as `hypothetical_fusion` chooses it; no user is
    registered with the module's instructions, and it has no users while it
    lasts) and is put back as it was when the block ends: body, parameters,
    operands, users, kind, its last `BodyGrowth`, and the entries of the
    caches registered with `follows_growths`. Costs the size of the producer,
    not of the consumer's body. Only where `can_try_fusion(producer,
    consumer)`; nothing else may read or edit the module inside the block.

    **Yields:** the consumer, grown.
    """
    if not can_try_fusion(producer, consumer):
        raise ValueError(f"cannot try fusing '{producer.name}' into '{consumer.name}' in place")
    fused = consumer.fused_computation
    params = fused.instructions[:_leading_parameters(fused)]
    saved_instrs = list(fused.instructions)
    saved_by_name = dict(fused._by_name)
    saved_root = fused.root
    saved_growth = _GROWTH.get(fused)
    saved_params = [(p, list(p.users), p.parameter_number) for p in params]
    saved_ops, saved_users = consumer.operands, consumer.users
    saved_kind = consumer._raw.get("kind")  # its text
    dropped = [p for p in params if consumer.operands[p.parameter_number] is producer]
    saved_uses = [(u, list(u.operands)) for p in dropped for u in p.users]
    saved_caches = []
    for cache, copy in _GROWTH_CACHES:
        entry = cache.get(fused)
        saved_caches.append((cache, entry if copy is None or entry is None else copy(entry)))
    try:
        consumer.users = []
        _extend_fusion(producer, consumer, None, attach=False)
        consumer.set_attribute("kind", default_fusion_kind(fused))
        yield consumer
    finally:
        g = _GROWTH.get(fused)
        made = g.added if g is not None and g is not saved_growth else ()
        for u, ops in saved_uses:
            u.operands = ops
        for p, users, number in saved_params:
            p.users = users
            p.parameter_number = number
            p.computation = fused
        fused.instructions = saved_instrs
        fused._by_name = saved_by_name
        fused.root = saved_root
        if saved_growth is None:
            _GROWTH.pop(fused, None)
        else:
            _GROWTH[fused] = saved_growth
        consumer.operands, consumer.users = saved_ops, saved_users
        if saved_kind is None:
            consumer.remove_attribute("kind")
        else:
            consumer.set_attribute("kind", saved_kind)
        for cache, entry in saved_caches:
            if entry is None:
                cache.pop(fused, None)
            else:
                cache[fused] = entry
        for h in made:  # the producer's clones and new parameters: unlinked, to be freed at once
            h.operands = []
            h.users = []
            h.computation = None


def fuse(
    producer: HloInstruction,
    consumer: HloInstruction,
    kind: str | None = None,
    *,
    names: NameUniquifier | None = None,
    remove_producer: bool = True,
) -> HloInstruction:
    """Fuse `producer` into `consumer`, in place, as XLA's priority fusion does.

    **Arguments:**

    - `producer`: an operand of `consumer`, in the same computation; a fusion
      producer's body is inlined (merged), a plain one cloned. Other users of
      the producer keep using it (fusing into all users duplicates it).
    - `consumer`: a plain instruction (first wrapped by `make_fusion`) or a fusion.
    - `kind`: the new fusion kind (`kLoop`, `kInput`, `kOutput`); default
      `default_fusion_kind` of the fused body.
    - `names`: the module's `NameUniquifier` when making many edits.
    - `remove_producer`: delete the producer once it has no users left (never the root); deleted, it
      is unlinked (no operands, its body emptied) and must not be used afterwards.

    **Returns:** the fusion instruction (the consumer itself if it was a fusion).
    """
    comp = consumer.computation
    if comp is None or comp.module is None:
        raise ValueError(f"'{consumer.name}' is not in a module")
    if producer not in consumer.operands:
        raise ValueError(f"'{producer.name}' is not an operand of '{consumer.name}'")
    if producer.computation is not comp:
        raise ValueError(f"'{producer.name}' and '{consumer.name}' are in different computations")
    module = comp.module
    names = names_for(module, names)
    if consumer.opcode != "fusion":
        consumer = make_fusion(consumer, kind, names=names)
    _extend_fusion(producer, consumer, names)
    fused = consumer.fused_computation
    if kind is not None:
        consumer.set_attribute("kind", kind)
    elif consumer.fusion_kind != "kOutput":
        consumer.set_attribute("kind", default_fusion_kind(fused))
    if remove_producer and not producer.users and producer is not comp.root:
        pfused = producer.fused_computation
        remove_instruction_and_body(producer, names=names)
        producer.operands = []
        if pfused is not None and pfused.module is None and not is_deferred(pfused):
            # cloned into the consumer and dropped: unlinked, not left to the cyclic collector
            _dismantle(pfused)
    return consumer


# ---------------------------------------------------------------------------
# Batch editing (for fusion passes)


def _dismantle(body: HloComputation) -> None:
    """Unlink a dropped fused computation's instructions from each other and from it.

    A body is a web of reference cycles (operands <-> users, instruction <->
    computation); unlinked, it is freed as soon as the last reference goes
    instead of waiting for (and slowing down) the cyclic garbage collector.
    """
    for i in body.instructions:
        i.operands = []
        i.users = []
        i.computation = None
    body.instructions = []
    body._by_name = {}
    body.root = None


def _place(o: HloInstruction, ops: list[HloInstruction], index: dict[int, int]) -> int:
    """The position of `o` in `ops` (`index`: id -> position), appended if new."""
    j = index.get(id(o))
    if j is None:
        j = index[id(o)] = len(ops)
        ops.append(o)
    return j


def _recipe_of(instr: HloInstruction, origin: dict | None):
    """`(recipe, its operand list)` for `instr` as a fusion producer or consumer (see `hlo.editing.DeferredBody`)."""
    body = instr.fused_computation
    if body is None:
        ops: list[HloInstruction] = []
        index: dict[int, int] = {}
        args = tuple([_place(o, ops, index) for o in instr.operands])
        return Leaf(instr, args), ops
    if is_deferred(body):
        return body.recipe, instr.operands
    return _snapshot(body, origin), instr.operands


def _snapshot(body: HloComputation, origin: dict | None) -> Frozen:
    """A detached copy of a built fused body, for a recipe: the body itself may grow or go later."""
    mapping: dict[int, HloInstruction] = {}
    instructions = []
    for instr in operands_first(body):
        c = clone_instruction(instr, [mapping[id(o)] for o in instr.operands], register_users=False)
        instructions.append(c)
        if origin is not None and instr.opcode != "parameter":
            origin[c] = origin.get(instr, instr.name)
        mapping[id(instr)] = c
    return Frozen(instructions, mapping[id(body.root)])


def _fused_operands(producer: HloInstruction, consumer_ops, producer_ops):
    """The operands of `producer` fused into a consumer, as XLA orders them (the consumer's,
    less the producer, then the producer's new ones), and where each side's operands went
    (`-1`: the producer's value). **Returns:** `(operands, producer_args, consumer_args)`."""
    ops: list[HloInstruction] = []
    index: dict[int, int] = {}
    consumer_args = tuple([-1 if o is producer else _place(o, ops, index) for o in consumer_ops])
    producer_args = tuple([_place(o, ops, index) for o in producer_ops])
    return ops, producer_args, consumer_args


class _BodyBuilder:
    """Builds the `DeferredBody`s of one editor, with names unique in the body only (the editor
    names them module-wide in `finish`, so that names do not depend on when a body was built)."""

    __slots__ = ("made", "origin")

    def __init__(self, made: set, origin: dict | None):
        self.made = made
        self.origin = origin

    def materialize(self, body: DeferredBody, names: NameUniquifier | None = None) -> None:
        """Build `body`; with `names`, its instructions get their final, module-wide names now."""
        recipe, fusion = body.recipe, body.fusion
        body.recipe = body.fusion = body.builder = None
        body.instructions = []
        body._by_name = {}
        body.root = None
        b = _Body(body, names, self.made if names is None else None, self.origin)
        params = [b.param_for(o) for o in fusion.operands]
        body.root = replay(recipe, params, b.clone_into)
        _TOPOLOGICAL.add(body)


class FusionEditor:
    """Many fusions in one computation, each O(size of the fusion), not O(size of the computation).

    While editing, `computation.instructions` is not kept in order (inserting
    into and removing from a long list is what makes naive passes quadratic);
    `finish()` puts it back: every instruction at the place of the first
    instruction it replaced, so operands still come before users.

    Fusing into a plain instruction replaces it by a new fusion; fusing into
    a fusion extends it in place (as XLA does) and bumps `version[fusion]`,
    so that caches can key on `(instruction, version)`.

    Fused bodies are recipes (`hlo.editing.DeferredBody`) until someone reads them, so a
    kernel is built once, not once per fusion step. Instructions in bodies
    get their module-wide names in `finish()`: until then they are unique in
    their body only, and the final names do not depend on which bodies were
    read during the pass.

    **Arguments:** `computation` (in a module); `names`: the module's
    `NameUniquifier` (one is made if omitted); `origin`, `version`: dicts to
    fill (shared by several editors of one module).
    """

    def __init__(
        self,
        computation: HloComputation,
        names: NameUniquifier | None = None,
        origin: dict | None = None,
        version: dict | None = None,
    ):
        if computation.module is None:
            raise ValueError(f"computation '{computation.name}' is not in a module")
        self.computation = computation
        self.module = computation.module
        self.names = names_for(self.module, names)
        self._pos: dict[HloInstruction, int] = {instr: i for i, instr in enumerate(computation.instructions)}
        # Fused computations made here: kept out of `module.computations`
        # (a long list) until finish(), but registered by name.
        self._bodies: dict[HloComputation, None] = {}
        # instruction -> name of the input instruction it is a copy of (clones made by fuse)
        self.origin: dict[HloInstruction, str] = {} if origin is None else origin
        # fusion -> how many times it changed in place (absent: never); for caches
        self.version: dict[HloInstruction, int] = {} if version is None else version
        self._clock = max(self.version.values(), default=0)
        # Fused bodies are kept as recipes (`hlo.editing.DeferredBody`) and built when first read, or by finish().
        # Instructions made in bodies get module-wide names in finish(), in order: until then their
        # names are unique in their body only, so the names do not depend on when bodies were built.
        self._unnamed: set[HloInstruction] = set()
        self._builder = _BodyBuilder(self._unnamed, self.origin)

    @property
    def instructions(self) -> list[HloInstruction]:
        """The computation's live instructions, in the order `finish()` will give them."""
        pos = self._pos
        return sorted(pos, key=pos.__getitem__)

    def __contains__(self, instr: HloInstruction) -> bool:
        return instr in self._pos

    def fuse(self, producer: HloInstruction, consumer: HloInstruction, kind: str | None = None) -> HloInstruction:
        """Fuse `producer` into `consumer` (see `fuse`); the producer is kept (see `remove`).

        A plain consumer is replaced by a new fusion (named `fusion`,
        uniquified, with a new `fused_computation`); a fusion consumer grows
        in place, as in XLA, and its `version` goes up.

        **Returns:** the fusion that now computes the consumer's value.
        """
        comp = self.computation
        if consumer not in self._pos or producer not in self._pos:
            raise ValueError(f"'{producer.name}' or '{consumer.name}' is not in '{comp.name}'")
        if producer not in consumer.operands:
            raise ValueError(f"'{producer.name}' is not an operand of '{consumer.name}'")
        names = self.names
        fused = consumer.fused_computation
        if fused is not None:
            if is_deferred(fused):
                self._extend_deferred(producer, consumer, fused)
            else:
                _extend_fusion(producer, consumer, None, self.origin, self._unnamed)
            if kind is not None:
                consumer.set_attribute("kind", kind)
            self._clock += 1
            self.version[consumer] = self._clock
            return consumer
        p_recipe, p_ops = _recipe_of(producer, self.origin)
        c_recipe, c_ops = _recipe_of(consumer, self.origin)
        ops, p_args, c_args = _fused_operands(producer, c_ops, p_ops)
        body_comp = DeferredBody(
            names.computation("fused_computation"), Fused(p_recipe, c_recipe, p_args, c_args), None, self._builder
        )
        # The consumer leaves the computation: its copy in the body will take its name, if still free.
        names.release_instruction(consumer.name)
        fusion = HloInstruction.__new__(HloInstruction)
        body_comp.fusion = fusion
        _init_fusion(fusion, names.instruction("fusion"), consumer.shape, body_comp, kind or "kLoop", consumer)
        for o in ops:
            fusion.operands.append(o)
            o.users.append(fusion)
        if kind is None:  # (builds the body now: the default kind looks at its root)
            fusion.set_attribute("kind", default_fusion_kind(body_comp))
        self._add_body(body_comp)
        # The fusion takes the consumer's place, uses and root status.
        fusion.computation = comp
        was_root = comp.root is consumer
        consumer.replace_all_uses_with(fusion)
        if was_root:
            comp.root = fusion
        self._detach(consumer)
        self._pos[fusion] = self._pos.pop(consumer)
        del comp._by_name[consumer.name]
        comp._by_name[fusion.name] = fusion
        return fusion

    def _extend_deferred(self, producer: HloInstruction, consumer: HloInstruction, body: DeferredBody) -> None:
        """`_extend_fusion` for a body not built yet: one more recipe node, and the new operands."""
        p_recipe, p_ops = _recipe_of(producer, self.origin)
        old_ops = consumer.operands
        ops, p_args, c_args = _fused_operands(producer, old_ops, p_ops)
        body.recipe = Fused(p_recipe, body.recipe, p_args, c_args)
        consumer.operands = ops
        old = {id(o) for o in old_ops}
        for o in ops:
            if id(o) not in old and consumer not in o.users:
                o.users.append(consumer)
        kept = {id(o) for o in ops}
        for o in old_ops:
            if id(o) not in kept and consumer in o.users:
                o.users.remove(consumer)

    @staticmethod
    def _detach(instr: HloInstruction) -> None:
        for o in instr.operands:
            users = o.users
            if instr in users:
                users.remove(instr)
        instr.computation = None
        # Gone from the graph: drop its own links too, so that removed instructions
        # do not keep each other in reference cycles (see `_dismantle`).
        instr.operands = []

    def remove(self, instr: HloInstruction) -> None:
        """Delete an instruction nothing uses (and its fused computation)."""
        comp = self.computation
        if instr.users:
            raise ValueError(f"cannot remove '{instr.name}': still used by {[u.name for u in instr.users]}")
        if instr is comp.root:
            raise ValueError(f"cannot remove '{instr.name}': it is the root of '{comp.name}'")
        self._detach(instr)
        del self._pos[instr]
        del comp._by_name[instr.name]
        self.names.release_instruction(instr.name)
        fused = instr.fused_computation
        if fused is not None:
            self._drop_body(fused)
            self.names.release_computation(fused.name)
            if is_deferred(fused):
                fused.drop()  # recipes that took it stay valid: they never point back at it
            else:
                for i in fused.instructions:
                    if i not in self._unnamed:
                        self.names.release_instruction(i.name)
                _dismantle(fused)

    def _add_body(self, body: HloComputation) -> None:
        module = self.module
        if body.name in module._by_name:
            raise ValueError(f"module '{module.name}' already has a computation named '{body.name}'")
        body.module = module
        module._by_name[body.name] = body
        self._bodies[body] = None

    def _drop_body(self, body: HloComputation) -> None:
        module = self.module
        if body in self._bodies:
            del self._bodies[body]
            del module._by_name[body.name]
            body.module = None
        elif body.module is module:
            module.remove_computation(body)

    def _name_bodies(self) -> None:
        """Build the bodies still deferred and give every instruction made in a body its
        module-wide name: fusions in order, each body in order; a clone is named after the
        input instruction it copies, a parameter `param_N`, as XLA names them."""
        unnamed, names, origin = self._unnamed, self.names, self.origin
        for instr in self.computation.instructions:
            fused = instr.fused_computation
            if fused is None:
                continue
            if is_deferred(fused):
                # Built now, in this order, with the names the renaming below would give.
                self._builder.materialize(fused, names)
                continue
            renamed = False
            for i in fused.instructions:
                if i in unnamed:
                    base = f"param_{i.parameter_number}" if i.opcode == "parameter" else origin.get(i, i.name)
                    i.name = names.instruction(base)
                    renamed = True
            if renamed:
                fused._by_name = {i.name: i for i in fused.instructions}
        unnamed.clear()

    def finish(self) -> HloComputation:
        """Write the instruction order back (and place new fused computations before their caller)."""
        comp = self.computation
        comp.instructions = self.instructions
        self._name_bodies()
        if self._bodies:
            module = self.module
            idx = module.computations.index(comp)
            module.computations[idx:idx] = list(self._bodies)
            self._bodies = {}
        return comp
