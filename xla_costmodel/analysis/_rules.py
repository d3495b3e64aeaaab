"""Per-opcode cost rules with the semantics of XLA's `HloCostAnalysis`.

Every HLO opcode has a rule here, registered with the `cost_rule` decorator
(the pattern of `jax.experimental.roofline`). An opcode with no rule is costed
with the defaults below, *and* reported as unpriced (a warning, a flag column,
the `unpriced` list of `module_cost`), never priced at zero in silence.

How a rule works, mirroring `HloCostAnalysis::Preprocess` + `Handle<Op>`:

1. The interpreter (`_cost.Analysis`) fills a property record `p` with XLA's
   defaults: no flops, output bytes = the bytes of every array leaf of
   the result, operand `i` bytes = the size of operand `i` (for a tuple only its
   table of pointers), operand utilization 1, bytes accessed = output + operands.
2. The rule for the opcode edits `p` in place.

The record is a plain list (speed: a large module has hundreds of thousands of
instructions), indexed by the constants of `_records` (re-exported here):

- `p[FLOPS]`, `p[TRANS]` (transcendentals), `p[BYTES]` (bytes accessed),
  `p[OUT]` (XLA's `bytes accessedout{}`), all floats;
- `p[OPB]`, `p[OPU]`: lists of per-operand bytes accessed and utilization
  (`bytes accessed{i}{}`, `utilization{i}{}`). They can be longer than the
  operand list: a fusion, a loop or a call inherits the per-index sums of its
  sub-computation for indices it does not overwrite, as XLA's do;
- `p[UTIL]`: XLA's `utilization` key, set inside fusions (how many times the
  fused instruction's output is produced per execution of the fusion);
- `p[EXTRA]`: `None` or a dict of every other XLA property by XLA's key name
  (`bytes accessedout{1}`, `bytes accessed0{2}`, `optimal_seconds`,
  collective keys, ...);
- `p[UNPRICED]`: a tuple of the opcodes (or `custom-call:target`) whose cost is
  unknown, in this instruction or in the computations it calls;
- `p[IR]`: the GPU analysis's IR size (XLA's `reserved0`; 0 in the base analysis).

Rules receive `(an, instr, p)` where `an` is the running analysis: it gives
shape sizes (`an.size`, `an.out_size`), sub-computation costs
(`an.subcomputation`), the records of other instructions (`an.record`), and the
options (`an.gpu`, `an.count_multiple_input_accesses`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._frontend import int_list_attribute
from ._records import FLOPS as FLOPS
from ._records import TRANS as TRANS
from ._records import BYTES as BYTES
from ._records import OUT as OUT
from ._records import OPB as OPB
from ._records import OPU as OPU
from ._records import UTIL as UTIL
from ._records import EXTRA as EXTRA
from ._records import UNPRICED as UNPRICED
from ._records import IR as IR
from ._records import KEY_FLOPS as KEY_FLOPS
from ._records import KEY_TRANS as KEY_TRANS
from ._records import KEY_BYTES as KEY_BYTES
from ._records import KEY_OPTIMAL_SECONDS as KEY_OPTIMAL_SECONDS
from ._records import KEY_UTILIZATION as KEY_UTILIZATION
from ._records import KEY_IR_SIZE as KEY_IR_SIZE
from ._records import KEY_COLL_SCALE as KEY_COLL_SCALE
from ._records import KEY_COLL_DEVICES as KEY_COLL_DEVICES
from ._records import KEY_COLL_BYTES as KEY_COLL_BYTES
from ._records import FMA_FLOPS as FMA_FLOPS
from ._records import shape_index_str as shape_index_str
from ._records import operand_bytes_key as operand_bytes_key
from ._records import operand_utilization_key as operand_utilization_key
from ._records import output_bytes_key as output_bytes_key
from ._records import new_record as new_record
from ._records import copy_record as copy_record
from ._records import set_extra as set_extra
from ._records import get_extra as get_extra
from ._records import set_index as set_index
from ._records import add_records as add_records
from ._records import merge_unpriced as merge_unpriced
from ._opcodes import ELEMENTWISE_OPCODES as ELEMENTWISE_OPCODES
from ._opcodes import IS_ELEMENTWISE as IS_ELEMENTWISE
from ._opcodes import TRANSCENDENTAL_OPCODES as TRANSCENDENTAL_OPCODES
from ._shapes import POINTER_SIZE as POINTER_SIZE
from ._shapes import all_leaves as all_leaves
from ._shapes import array_leaves as array_leaves
from ._shapes import elements as elements
from ._shapes import elements_recursive as elements_recursive
from ._shapes import leaves_size as leaves_size
from ._shapes import shape_size as shape_size
from ._shapes import transpose_is_bitcast

# ---------------------------------------------------------------------------
# What XLA does with `optimal_seconds`

# Instructions for which XLA skips the bottleneck-time pass, so that they keep
# the `optimal_seconds` their handler set (-1 for a custom call, the sum of the
# sub-computation for a call, loop or conditional). Every other instruction
# gets 0 (no per-second rates are set through jaxlib).
KEEPS_OPTIMAL_SECONDS = frozenset(
    "parameter constant get-tuple-element after-all add-dependency domain custom-call call while conditional".split()
)


# ---------------------------------------------------------------------------
# Registry


@dataclass(frozen=True)
class CostRule:
    """A registered rule.

    **Attributes:** `opcode`; `fn(an, instr, p)`; `variant` (`"xla"` for
    XLA's `HloCostAnalysis`, `"gpu"` for `GpuHloCostAnalysis` overrides);
    `complete` (False where XLA's own figure knowingly leaves work out, e.g.
    a while loop's body counted once, `topk` at 0 flops); `note` (why).
    """

    opcode: str
    fn: Callable[[Any, Any, list], None]
    variant: str = "xla"
    complete: bool = True
    note: str = ""


_REGISTRY: dict[str, dict[str, CostRule]] = {"xla": {}, "gpu": {}}
# Bumped by every registration, so that tables built from the registry know they are stale.
_VERSION = [0]


def registry_version() -> int:
    return _VERSION[0]


def cost_rule(*opcodes: str, variant: str = "xla", complete: bool = True, note: str = ""):
    """Register `fn(an, instr, p)` as the cost rule of `opcodes`.

    **Arguments:** opcodes as spelled in HLO text; `variant` `"xla"` (the
    base analysis) or `"gpu"` (overrides used by `GpuCostAnalysis`);
    `complete` / `note` as in `CostRule`.

    **Returns:** the decorator; it returns `fn` unchanged.
    """
    if variant not in _REGISTRY:
        raise ValueError(f"unknown cost-rule variant {variant!r}; expected one of {sorted(_REGISTRY)}")

    def register(fn):
        for op in opcodes:
            _REGISTRY[variant][op] = CostRule(op, fn, variant, complete, note)
        _VERSION[0] += 1
        return fn

    return register


def rules(variant: str = "xla") -> dict[str, CostRule]:
    """The rule table of a variant: `"xla"`, or `"gpu"` (XLA's rules with the GPU overrides)."""
    if variant == "xla":
        return dict(_REGISTRY["xla"])
    if variant == "gpu":
        table = dict(_REGISTRY["xla"])
        table.update(_REGISTRY["gpu"])
        return table
    raise ValueError(f"unknown cost-rule variant {variant!r}; expected 'xla' or 'gpu'")


def registered_opcodes() -> frozenset[str]:
    """Every opcode with a rule."""
    return frozenset(_REGISTRY["xla"])


# ---------------------------------------------------------------------------
# Helpers shared by rules


def _zero_io(p: list, n_operands: int) -> None:
    """No memory traffic: what XLA does for pointer-forwarding instructions."""
    p[BYTES] = 0.0
    p[OUT] = 0.0
    opb = p[OPB]
    for i in range(n_operands):
        opb[i] = 0.0


def _attr_tuple(instr, name: str) -> tuple[int, ...]:
    return int_list_attribute(instr, name, ())


def _copy_from_sub(an, p: list, sub: list, factor: float, accumulate: bool = False) -> None:
    """XLA's `KeyToCopyFromSubcomputation` loop: every key but bytes, utilization and IR size, scaled."""
    if accumulate:
        p[FLOPS] += sub[FLOPS] * factor
        p[TRANS] += sub[TRANS] * factor
    else:
        if sub[FLOPS]:
            p[FLOPS] = sub[FLOPS] * factor
        if sub[TRANS]:
            p[TRANS] = sub[TRANS] * factor
    extra = sub[EXTRA]
    if extra:
        for k, v in extra.items():
            if k.startswith(KEY_BYTES) or k.startswith(KEY_UTILIZATION):
                continue
            if v:
                if accumulate:
                    set_extra(p, k, get_extra(p, k) + v * factor)
                else:
                    set_extra(p, k, v * factor)
    if sub[UNPRICED]:
        p[UNPRICED] = merge_unpriced(p[UNPRICED], sub[UNPRICED])


def _replace_with(p: list, sub: list) -> None:
    """`current_properties_ = sub` (call, while, async-start, fusion)."""
    p[:] = copy_record(sub)


# ---------------------------------------------------------------------------
# Elementwise


@cost_rule(*sorted(ELEMENTWISE_OPCODES))
def elementwise_rule(an, instr, p):
    """One flop (or one transcendental) per output element."""
    n = elements(instr.shape)
    if instr.opcode in TRANSCENDENTAL_OPCODES:
        p[TRANS] = float(n)
    else:
        p[FLOPS] = float(n)


@cost_rule("map")
def map_rule(an, instr, p):
    """The mapped computation's cost once per output element."""
    sub = an.subcomputation(instr.attribute("to_apply"))
    _copy_from_sub(an, p, sub, elements(instr.shape))


# ---------------------------------------------------------------------------
# No work, no traffic


@cost_rule("parameter", "constant")
def leaf_rule(an, instr, p):
    """Parameters and constants are already in memory: 0 bytes."""
    p[BYTES] = 0.0
    p[OUT] = 0.0


@cost_rule("get-tuple-element")
def gte_rule(an, instr, p):
    """Forwards a pointer: 0 bytes."""
    p[BYTES] = 0.0
    p[OUT] = 0.0
    p[OPB][0] = 0.0


@cost_rule("bitcast")
def bitcast_rule(an, instr, p):
    """A bitcast does no computation and touches no memory."""
    p[BYTES] = 0.0
    p[OUT] = 0.0
    if p[OPB]:
        p[OPB][0] = 0.0


@cost_rule("after-all", "add-dependency", "domain")
def ordering_rule(an, instr, p):
    """Ordering-only instructions emit no code."""
    _zero_io(p, len(instr.operands))


@cost_rule("tuple")
def tuple_rule(an, instr, p):
    """A tuple gathers pointers: only its index table is written."""
    size = float(an.size(instr.shape))
    p[BYTES] = size
    p[OUT] = size
    opb = p[OPB]
    for i in range(len(instr.operands)):
        opb[i] = 0.0


# ---------------------------------------------------------------------------
# Data movement with XLA's defaults (0 flops, every byte in and out)


def default_rule(an, instr, p):
    """XLA's defaults: 0 flops; the output and every operand read and written once."""
    return None


# XLA prices these with the defaults on purpose: data movement with no
# arithmetic (reshape, copy, pad, reverse, iota, concatenate, ...), the halves
# of asynchronous pairs whose work is counted at the start, and queries.
cost_rule(
    "reshape", "dynamic-reshape", "copy", "pad", "reverse", "iota", "concatenate", "opt-barrier",
    "get-dimension-size", "set-dimension-size", "partition-id", "replica-id", "copy-start", "copy-done",
    "send", "send-done", "recv", "recv-done", "async-update", "async-done", "rng-get-and-update-state",
    "all-reduce-done", "all-gather-done", "collective-permute-done",
)(default_rule)

for _op in ("all-gather", "all-gather-start", "reduce-scatter", "all-to-all", "ragged-all-to-all",
            "collective-broadcast", "collective-permute", "collective-permute-start"):
    cost_rule(_op, complete=False, note="XLA's base analysis only counts the bytes in and out of a collective")(
        default_rule
    )

for _op in ("batch-norm-training", "batch-norm-inference", "batch-norm-grad"):
    cost_rule(_op, complete=False, note="XLA leaves batch-norm flops at 0 (TODO b/62294698)")(
        default_rule
    )


cost_rule("topk", complete=False, note="XLA's HandleTopK is a TODO: 0 flops")(default_rule)


@cost_rule("broadcast")
def broadcast_rule(an, instr, p):
    """Defaults; with `count_multiple_input_accesses` the operand is read once per output element."""
    if an.count_multiple_input_accesses:
        p[OPB][0] = float(an.size(instr.shape))
        p[OPU][0] = _ratio(elements(instr.shape), elements(instr.operands[0].shape))


@cost_rule("transpose")
def transpose_rule(an, instr, p):
    """Defaults, unless the transpose is a bitcast in its layouts (then 0 bytes)."""
    if transpose_is_bitcast(instr.operands[0].shape, instr.shape, _attr_tuple(instr, "dimensions")):
        bitcast_rule(an, instr, p)


@cost_rule("slice")
def slice_rule(an, instr, p):
    """Reads only the slice: bytes = 2 x output, operand utilization = out / in elements."""
    out = float(an.size(instr.shape))
    p[BYTES] = 2 * out
    p[OUT] = out
    p[OPB][0] = out
    p[OPU][0] = _ratio(elements(instr.shape), elements(instr.operands[0].shape))


def _ratio(a: float, b: float) -> float:
    if b:
        return a / b
    return float("nan") if a == 0 else float("inf")


@cost_rule("dynamic-slice")
def dynamic_slice_rule(an, instr, p):
    """Reads the slice and the first start index."""
    out = float(an.size(instr.shape))
    idx = float(an.size(instr.operands[1].shape)) if len(instr.operands) > 1 else 0.0
    p[BYTES] = 2 * out + idx
    p[OUT] = out
    p[OPB][0] = out
    if len(instr.operands) > 1:
        p[OPB][1] = idx
    p[OPU][0] = _ratio(elements(instr.shape), elements(instr.operands[0].shape))


@cost_rule("dynamic-update-slice")
def dynamic_update_slice_rule(an, instr, p):
    """In place: costed by the update (read + write) and the first start index."""
    ops = instr.operands
    upd = float(an.size(ops[1].shape))
    idx = float(an.size(ops[2].shape)) if len(ops) > 2 else 0.0
    p[BYTES] = 2 * upd + idx
    p[OUT] = upd
    p[OPB][0] = 0.0
    p[OPB][1] = upd
    if len(ops) > 2:
        p[OPB][2] = idx
    n_out = elements(instr.shape)
    p[OPU][0] = _ratio(n_out - elements(ops[1].shape), n_out)


@cost_rule("gather")
def gather_rule(an, instr, p):
    """A copy the size of the output plus a read of the indices; 0 flops."""
    out = float(an.size(instr.shape))
    idx = float(an.size(instr.operands[1].shape))
    p[BYTES] = 2 * out + idx
    set_index(p[OPB], 0, out)
    set_index(p[OPB], 1, idx)
    set_index(p[OPU], 0, _ratio(elements(instr.shape), elements(instr.operands[0].shape)))
    p[OUT] = out


@cost_rule("scatter")
def scatter_rule(an, instr, p):
    """3 x the updates (read input, write output, read updates) + indices; the combiner once per update element."""
    ops = instr.operands
    n = (len(ops) - 1) // 2
    updates = ops[n + 1 :]
    total = 0.0
    for i in range(n):
        size = float(an.size(updates[i].shape))
        set_index(p[OPB], i, size)
        set_index(p[OPB], n + 1 + i, size)
        total += size
    idx = float(an.size(ops[n].shape))
    set_index(p[OPB], n, idx)
    p[BYTES] = 3 * total + idx
    p[OUT] = total
    sub = an.subcomputation(instr.attribute("to_apply"))
    _copy_from_sub(an, p, sub, elements(updates[0].shape))


# ---------------------------------------------------------------------------
# Reductions


def _output_array_shape(shape):
    return shape.tuple_shapes[0] if shape.element_type == "tuple" else shape


@cost_rule("reduce")
def reduce_rule(an, instr, p):
    """The reducer's cost once per combined pair: in_elems - out_elems times."""
    sub = an.subcomputation(instr.attribute("to_apply"))
    count = elements(instr.operands[0].shape) - elements(_output_array_shape(instr.shape))
    _copy_from_sub(an, p, sub, count)


@cost_rule("reduce-window")
def reduce_window_rule(an, instr, p):
    """The reducer's cost (window - 1) times per output element (XLA's reduce+broadcast special case kept)."""
    window = instr.attribute("window", None)
    dims = window.dimensions if window is not None else ()
    sub = an.subcomputation(instr.attribute("to_apply"))
    win_elems = math.prod(d.size for d in dims)
    n_in = elements(instr.operands[0].shape)
    out_shape = _output_array_shape(instr.shape)
    n_out = elements(out_shape)
    count = (win_elems - 1) * n_out
    # XLA recognises a reduce followed by a broadcast along one padded dimension.
    n_reduced = sum(1 for d in dims if d.size != 1)
    n_padded = sum(1 for d in dims if d.padding_low or d.padding_high)
    if n_reduced == 1 and n_padded == 1 and instr.shape.element_type != "tuple":
        for k, d in enumerate(dims):
            if (d.size != 1 and d.padding_low and d.padding_high and d.padding_low == d.padding_high
                    and d.size == 2 * d.padding_low + 1):
                if d.padding_low == instr.shape.dims[k] - 1:
                    win_elems = instr.shape.dims[k]
                    count = n_out // win_elems + (win_elems - 1)
                break
    if an.count_multiple_input_accesses:
        from ..hlo import PRIMITIVE_BITS

        p[OPU][0] = _ratio(n_out * win_elems, n_in)
        width = (PRIMITIVE_BITS.get(instr.operands[0].shape.element_type, 0) + 7) // 8
        p[OPB][0] = float(n_out * win_elems * width)
    _copy_from_sub(an, p, sub, count)


@cost_rule("select-and-scatter")
def select_and_scatter_rule(an, instr, p):
    """Select (window - 1) times and scatter once per source element."""
    sel = an.subcomputation(instr.attribute("select"))
    sca = an.subcomputation(instr.attribute("scatter"))
    n_src = elements(instr.operands[1].shape)
    window = instr.attribute("window", None)
    win_elems = math.prod(d.size for d in window.dimensions) if window is not None else 1
    _copy_from_sub(an, p, sel, n_src * (win_elems - 1), accumulate=True)
    _copy_from_sub(an, p, sca, n_src, accumulate=True)


# ---------------------------------------------------------------------------
# Feeds


@cost_rule("infeed")
def infeed_rule(an, instr, p):
    total = 0.0
    for index, leaf in array_leaves(instr.shape):
        size = float(an.size(leaf))
        total += size
        if index:
            set_extra(p, output_bytes_key(index), size)
    p[OUT] = total
    p[BYTES] = total


@cost_rule("outfeed")
def outfeed_rule(an, instr, p):
    p[BYTES] = 0.0
    for i, op in enumerate(instr.operands):
        size = 0.0
        for index, leaf in array_leaves(op.shape):
            s = float(an.size(leaf))
            size += s
            if index:
                set_extra(p, operand_bytes_key(i, index), s)
        p[OPB][i] = size
        p[BYTES] += size


# ---------------------------------------------------------------------------
# Custom calls


def custom_call_label(instr) -> str:
    from ._frontend import custom_call_target

    target = custom_call_target(instr)
    return f"custom-call:{target}" if target else "custom-call"


@cost_rule("custom-call", complete=False, note="XLA marks a custom call's flops and bytes unknown (-1)")
def custom_call_rule(an, instr, p):
    """Unknown: XLA sets flops, bytes and optimal_seconds to -1; reported as unpriced."""
    set_extra(p, KEY_OPTIMAL_SECONDS, -1.0)
    p[BYTES] = -1.0
    p[OUT] = -1.0
    opb = p[OPB]
    for i in range(len(instr.operands)):
        opb[i] = -1.0
    p[FLOPS] = -1.0
    p[UNPRICED] = merge_unpriced(p[UNPRICED], (custom_call_label(instr),))


# ---------------------------------------------------------------------------
# Collectives (base)


@cost_rule("all-reduce", "all-reduce-start")
def all_reduce_rule(an, instr, p):
    """XLA assumes 2 replicas: one flop per output element; bytes = in + out."""
    flops = 0.0
    out = 0.0
    for _, leaf in array_leaves(instr.shape):
        flops += elements(leaf)
        out += an.size(leaf)
    total = out + sum(an.size(op.shape) for op in instr.operands)
    p[FLOPS] = flops
    p[OUT] = out
    p[BYTES] = float(total)


# ---------------------------------------------------------------------------
# Control flow and sub-computations


@cost_rule("call")
def call_rule(an, instr, p):
    """The called computation's sums, every key."""
    _replace_with(p, an.subcomputation(instr.attribute("to_apply")))


@cost_rule("while", complete=False, note="XLA counts the body and the condition once; see the trip-count-aware totals")
def while_rule(an, instr, p):
    """Body + condition, once (XLA cannot know the trip count)."""
    body = an.subcomputation(instr.attribute("body"))
    cond = an.subcomputation(instr.attribute("condition"))
    acc = new_record()
    add_records(acc, body)
    add_records(acc, cond)
    p[:] = acc


@cost_rule("conditional", complete=False, note="XLA takes the maximum over branches, key by key")
def conditional_rule(an, instr, p):
    """Per-key maximum over the branches."""
    if instr.has_attribute("branch_computations"):
        branches = list(instr.attribute("branch_computations"))
    else:
        branches = [instr.attribute("true_computation"), instr.attribute("false_computation")]
    acc = copy_record(an.subcomputation(branches[0]))
    for comp in branches[1:]:
        _max_into(acc, an.subcomputation(comp))
    p[:] = acc


def _max_into(acc: list, p: list) -> None:
    # XLA visits only the non-zero keys of the later branch.
    for k in (FLOPS, TRANS, BYTES, OUT, UTIL):
        if p[k]:
            acc[k] = max(acc[k], p[k])
    for slot in (OPB, OPU):
        for i, v in enumerate(p[slot]):
            if v:
                cur = acc[slot][i] if i < len(acc[slot]) else 0.0
                set_index(acc[slot], i, max(cur, v))
    if p[EXTRA]:
        for k, v in p[EXTRA].items():
            if v:
                set_extra(acc, k, max(get_extra(acc, k), v))
    if p[UNPRICED]:
        acc[UNPRICED] = merge_unpriced(acc[UNPRICED], p[UNPRICED])


@cost_rule(
    "scan",
    complete=False,
    note="XLA (jaxlib 0.10.2) multiplies the body's cost by the element count of operand 1, not by the scan length",
)
def scan_rule(an, instr, p):
    """The body's flops and transcendentals times the element count of operand 1 (XLA's figure)."""
    sub = an.subcomputation(instr.attribute("to_apply"))
    ops = instr.operands
    factor = elements(ops[1].shape) if len(ops) > 1 else (elements(ops[0].shape) if ops else 0)
    _copy_from_sub(an, p, sub, factor)


def scan_length(instr) -> int | None:
    """Iterations of a `scan`: the extent of the scanned dimension of its first non-carry operand."""
    carries = instr.attribute("num_carries", None) if instr.has_attribute("num_carries") else None
    dims = _attr_tuple(instr, "dimensions")
    try:
        first_input = instr.operands[int(carries)]
        return first_input.shape.dims[dims[0]]
    except (TypeError, ValueError, IndexError):
        return None


@cost_rule("async-start")
def async_start_rule(an, instr, p):
    """The wrapped computation's sums (the matching done is costed with the defaults)."""
    comps = instr.called_computations
    if comps:
        _replace_with(p, an.subcomputation(comps[0]))


@cost_rule("fusion")
def fusion_rule(an, instr, p):
    """Costed through the fused computation; see `_cost.fuse`."""
    an.fusion(instr, p)
