"""Loop trip counts (`while_trip_count`, `annotate_trip_counts`) and the totals that count a loop body once per trip."""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import _rules as R
from ._interpreter import Analysis
from ._rules import BYTES, FLOPS, TRANS


# ---------------------------------------------------------------------------
# Trip counts


def _scalar_int_constant(instr) -> int | None:
    seen = 0
    while instr is not None and instr.opcode in ("copy", "convert", "reshape", "bitcast") and seen < 8:
        instr = instr.operands[0]
        seen += 1
    if instr is None or instr.opcode != "constant" or instr.shape.dims:
        return None
    text = (instr.literal_text or "").strip()
    try:
        return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return None
        return int(value) if value.is_integer() else None


def _gte_index(instr, param) -> int | None:
    if instr.opcode == "get-tuple-element" and instr.operands and instr.operands[0] is param:
        return instr.attribute("index")
    return None


@dataclass(frozen=True)
class InductionLoop:
    """A `while` loop of the `fori_loop` / `scan` form, as XLA's `WhileLoopTripCountAnnotator` describes it:
    element `tuple_index` of the loop state starts at `init`, grows by `step` per trip, and the loop runs
    `trip_count` times."""

    tuple_index: int
    init: int
    step: int
    trip_count: int


def _known_trip_count(instr) -> int | None:
    """`known_trip_count.n` of the while's backend_config (what XLA's annotator wrote), or None."""
    config = instr.attribute("backend_config", None) if instr.has_attribute("backend_config") else None
    if isinstance(config, dict):
        known = config.get("known_trip_count")
        if isinstance(known, dict) and "n" in known:
            try:
                return int(known["n"])
            except (TypeError, ValueError):
                return None
    return None


def while_trip_count(instr) -> tuple[int | None, str]:
    """The trip count of a `while` instruction, when it can be known statically.

    Looks first at XLA's `backend_config={"known_trip_count":{"n":"12"}}` (set by
    XLA's `WhileLoopTripCountAnnotator`, and by `annotate_trip_counts` before our
    fusion pass hides the pattern below inside fusions), then for the
    induction-variable pattern of `fori_loop` / `scan`: the condition compares
    element `k` of the loop state with a constant, the body adds a constant to
    element `k`, and the initial tuple holds a constant there.

    **Returns:** `(trip_count, source)`, `source` being `"backend_config"`,
    `"induction variable"`, or `"unknown"` (then the count is None).
    """
    if instr.opcode != "while":
        raise ValueError(f"'{instr.name}' is a {instr.opcode}, not a while loop")
    n = _known_trip_count(instr)
    if n is not None:
        return n, "backend_config"
    loop = induction_loop(instr)
    if loop is not None:
        return loop.trip_count, "induction variable"
    return None, "unknown"


def annotate_trip_counts(module) -> int:
    """Write each `while` loop's statically known trip count into its backend_config, in place, as XLA's
    `WhileLoopTripCountAnnotator` does before fusion: `known_trip_count` (`{"n": "64"}`), with
    `known_induction_variable` and `known_init_step` where the induction variable was found.

    Fusion hides the pattern `while_trip_count` reads (the condition's compare and the body's increment
    go into fusions), so the count must be recorded while it can still be seen: it is then read back from
    the backend_config of the fused module, printed and parsed (XLA's parser keeps it too). Loops that
    already carry a count, and loops whose count depends on data, are left as they are; an existing
    backend_config keeps its other fields. A backend_config that is not a JSON object is not touched.

    **Returns:** how many loops were annotated.
    """
    n = 0
    for _, instr in module.instructions():
        if instr.opcode != "while" or _known_trip_count(instr) is not None:
            continue
        loop = induction_loop(instr)
        if loop is None:
            continue
        config = instr.attribute("backend_config", {}) if instr.has_attribute("backend_config") else {}
        if not isinstance(config, dict):
            continue
        config = dict(config)
        # XLA's WhileLoopBackendConfig as JSON: int64 fields are written as strings.
        config["known_induction_variable"] = {"tuple_index": str(loop.tuple_index)}
        config["known_init_step"] = {"init": str(loop.init), "step": str(loop.step)}
        config["known_trip_count"] = {"n": str(loop.trip_count)}
        instr.set_attribute("backend_config", config)
        n += 1
    return n


def induction_loop(instr) -> InductionLoop | None:
    """The induction variable of a `while` of the `fori_loop` / `scan` form, or None (see `while_trip_count`)."""
    try:
        cond = instr.attribute("condition")
        body = instr.attribute("body")
    except KeyError:
        return None
    root = cond.root
    if root is None or root.opcode != "compare" or not cond.parameters:
        return None
    cparam = cond.parameters[0]
    direction = root.attribute("direction", "")
    a, b = root.operands[0], root.operands[1]
    k = _gte_index(a, cparam)
    limit = _scalar_int_constant(b)
    if k is None or limit is None:
        k = _gte_index(b, cparam)
        limit = _scalar_int_constant(a)
        direction = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}.get(direction, direction)
        if k is None or limit is None:
            return None
    init_tuple = instr.operands[0] if instr.operands else None
    if init_tuple is None or init_tuple.opcode != "tuple" or k >= len(init_tuple.operands):
        return None
    start = _scalar_int_constant(init_tuple.operands[k])
    broot = body.root
    if start is None or broot is None or broot.opcode != "tuple" or not body.parameters:
        return None
    bparam = body.parameters[0]
    upd = broot.operands[k] if k < len(broot.operands) else None
    if upd is None or upd.opcode not in ("add", "subtract"):
        return None
    x, y = upd.operands
    step = None
    if _gte_index(x, bparam) == k:
        step = _scalar_int_constant(y)
    elif upd.opcode == "add" and _gte_index(y, bparam) == k:
        step = _scalar_int_constant(x)
    if step is None or step == 0:
        return None
    if upd.opcode == "subtract":
        step = -step
    n = _count(direction, limit - start, step)
    return InductionLoop(k, start, step, n) if n is not None else None


def _count(direction: str, span: int, step: int) -> int | None:
    """Trips of `i = start; while (i <direction> start + span) i += step`, or None when it does not end."""
    if direction == "LT" and step > 0:
        return max(0, -(-span // step))
    if direction == "LE" and step > 0:
        return max(0, span // step + 1)
    if direction == "GT" and step < 0:
        return max(0, -(-(-span) // -step))
    if direction == "GE" and step < 0:
        return max(0, (-span) // -step + 1)
    if direction == "NE" and span % step == 0 and span // step >= 0:
        return span // step
    return None


class _TripAware:
    """Trip-count-aware totals: a while loop's body counted trip-count times, its condition once more."""

    def __init__(self, an: Analysis):
        self.an = an
        self.loops: list[dict] = []
        self._memo: dict[int, tuple[float, float, float, bool]] = {}

    def computation(self, comp) -> tuple[float, float, float, bool]:
        k = id(comp)
        if k in self._memo:
            return self._memo[k]
        an = self.an
        f = t = b = 0.0
        known = True
        for instr in an.visit_order(comp):
            fi, ti, bi, ki = self.instruction(instr)
            f += fi
            t += ti
            b += bi
            known &= ki
        result = (f, t, b, known)
        self._memo[k] = result
        return result

    def instruction(self, instr) -> tuple[float, float, float, bool]:
        an = self.an
        p = an.record(instr)
        op = instr.opcode
        if op == "while":
            n, source = while_trip_count(instr)
            self.loops.append({"name": instr.name, "computation": instr.computation.name,
                               "trip_count": n, "source": source})
            bf, bt, bb, bk = self.computation(instr.attribute("body"))
            cf, ct, cb, ck = self.computation(instr.attribute("condition"))
            if n is None:
                return bf + cf, bt + ct, bb + cb, False
            return bf * n + cf * (n + 1), bt * n + ct * (n + 1), bb * n + cb * (n + 1), bk and ck
        if op == "scan":
            n = R.scan_length(instr)
            self.loops.append({"name": instr.name, "computation": instr.computation.name,
                               "trip_count": n, "source": "scan" if n is not None else "unknown"})
            bf, bt, bb, bk = self.computation(instr.attribute("to_apply"))
            if n is None:
                return p[FLOPS], p[TRANS], p[BYTES], False
            return bf * n, bt * n, p[BYTES], bk
        if op in ("call", "async-start") and instr.called_computations:
            if self._contains_loop(instr.called_computations[0]):
                return self.computation(instr.called_computations[0])
        if op == "conditional":
            comps = instr.called_computations
            if any(self._contains_loop(c) for c in comps):
                parts = [self.computation(c) for c in comps]
                return (max(x[0] for x in parts), max(x[1] for x in parts), max(x[2] for x in parts),
                        all(x[3] for x in parts))
        return p[FLOPS], p[TRANS], p[BYTES], True

    def _contains_loop(self, comp, depth=0) -> bool:
        if depth > 64:
            return False
        for instr in comp.instructions:
            if instr.opcode == "while":
                return True
            if instr.opcode == "scan":
                return True
            if instr.opcode in ("call", "conditional", "async-start"):
                if any(self._contains_loop(c, depth + 1) for c in instr.called_computations):
                    return True
        return False


def _loop_multipliers(module, an: Analysis) -> dict[int, float]:
    """Computation id -> how many times it runs per module execution, through known trip counts (NaN if unknown)."""
    mult: dict[int, float] = {id(module.entry): 1.0}
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        m = mult[id(comp)]
        for instr in comp.instructions:
            called = instr.called_computations
            if not called:
                continue
            if instr.opcode == "scan":
                n = R.scan_length(instr)
                body = instr.attribute("to_apply")
                factors = {id(body): (body, m * n if n is not None else math.nan)}
            elif instr.opcode == "while":
                n, _ = while_trip_count(instr)
                factors = {}
                body = instr.attribute("body")
                cond = instr.attribute("condition")
                factors[id(body)] = (body, m * n if n is not None else math.nan)
                factors[id(cond)] = (cond, m * (n + 1) if n is not None else math.nan)
            else:
                factors = {id(c): (c, m) for c in called}
            for k, (c, v) in factors.items():
                if k not in mult:
                    mult[k] = v
                    stack.append(c)
    return mult
