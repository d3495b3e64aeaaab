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
instructions), indexed by the constants below:

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

# ---------------------------------------------------------------------------
# Property record layout

FLOPS, TRANS, BYTES, OUT, OPB, OPU, UTIL, EXTRA, UNPRICED, IR = range(10)

# XLA's property keys.
KEY_FLOPS = "flops"
KEY_TRANS = "transcendentals"
KEY_BYTES = "bytes accessed"
KEY_OPTIMAL_SECONDS = "optimal_seconds"
KEY_UTILIZATION = "utilization"
# GpuHloCostAnalysis keeps the IR size in the first reserved slot.
KEY_IR_SIZE = "reserved0"
KEY_COLL_SCALE = "Collective algorithm's scaling ratio"
KEY_COLL_DEVICES = "Number of devices of a collective group"
KEY_COLL_BYTES = "Number of bytes transferred."

FMA_FLOPS = 2  # HloCostAnalysis::kFmaFlops


def shape_index_str(index) -> str:
    """XLA's `ShapeIndex::ToString`: `{}`, `{1}`, `{0,2}`."""
    return "{" + ",".join(str(i) for i in index) + "}"


def operand_bytes_key(i: int, index=()) -> str:
    return f"{KEY_BYTES}{i}{shape_index_str(index)}"


def operand_utilization_key(i: int, index=()) -> str:
    return f"{KEY_UTILIZATION}{i}{shape_index_str(index)}"


def output_bytes_key(index=()) -> str:
    return f"{KEY_BYTES}out{shape_index_str(index)}"


def new_record() -> list:
    return [0.0, 0.0, 0.0, 0.0, [], [], 0.0, None, (), 0.0]


def copy_record(p: list) -> list:
    return [p[0], p[1], p[2], p[3], list(p[4]), list(p[5]), p[6], dict(p[7]) if p[7] else None, p[8], p[9]]


def set_extra(p: list, key: str, value: float) -> None:
    if p[EXTRA] is None:
        p[EXTRA] = {}
    p[EXTRA][key] = value


def get_extra(p: list, key: str) -> float:
    extra = p[EXTRA]
    return extra.get(key, 0.0) if extra else 0.0


def set_index(values: list, i: int, value: float) -> None:
    """`values[i] = value`, growing the list with zeros as needed."""
    n = len(values)
    if i >= n:
        values.extend([0.0] * (i + 1 - n))
    values[i] = value


def add_records(acc: list, p: list) -> None:
    """`acc += p` key by key, as XLA adds two `Properties`."""
    acc[0] += p[0]
    acc[1] += p[1]
    acc[2] += p[2]
    acc[3] += p[3]
    for slot in (4, 5):
        src = p[slot]
        if src:
            dst = acc[slot]
            n = len(dst)
            if len(src) > n:
                dst.extend([0.0] * (len(src) - n))
            for i, v in enumerate(src):
                if v:
                    dst[i] += v
    acc[6] += p[6]
    if p[7]:
        if acc[7] is None:
            acc[7] = {}
        extra = acc[7]
        for k, v in p[7].items():
            extra[k] = extra.get(k, 0.0) + v
    if p[8]:
        acc[8] = merge_unpriced(acc[8], p[8])
    acc[9] += p[9]


def merge_unpriced(a: tuple, b: tuple) -> tuple:
    if not a:
        return b
    if not b:
        return a
    return a + tuple(x for x in b if x not in a)


# ---------------------------------------------------------------------------
# Shape sizes: XLA's `ShapeUtil::ByteSizeOf(shape, pointer_size=8)` plus the
# CPU/GPU rule for dynamic shapes (`CpuExecutable::ShapeSizeBytes`).

POINTER_SIZE = 8


def _bytes_per_element(shape) -> tuple[int, int]:
    """(bits when packed via `E(n)`, else 0; bytes per element otherwise)."""
    from ..hlo._shape import PRIMITIVE_BITS

    layout = shape.layout
    if layout is not None and layout.tail and "E(" in layout.tail:
        bits = layout.element_size_bits
        if bits:
            return bits, 0
    return 0, (PRIMITIVE_BITS.get(shape.element_type, 0) + 7) // 8


def shape_size(shape) -> int:
    """Bytes of the top level of `shape` (a tuple counts its pointer table)."""
    et = shape.element_type
    if et == "tuple":
        return POINTER_SIZE * len(shape.tuple_shapes)
    if et == "opaque":
        return POINTER_SIZE
    if et == "token":
        return 0
    n = 1
    for d in shape.dims:
        if d > 0:
            n *= d
        elif d == 0:
            n = 0
    bits, width = _bytes_per_element(shape)
    size = (n * bits + 7) // 8 if bits else n * width
    if shape.dynamic and any(shape.dynamic):
        size += 4 * len(shape.dims)  # one s32 per dimension for the runtime sizes
    return size


def leaves_size(shape) -> int:
    """Bytes of every array leaf of `shape` (XLA's output-bytes default)."""
    if shape.element_type == "tuple":
        return sum(leaves_size(s) for s in shape.tuple_shapes)
    if shape.element_type in ("token",):
        return 0
    return shape_size(shape)


def elements(shape) -> int:
    """`ShapeUtil::ElementsIn` (array shapes; dynamic dimensions at their bound)."""
    n = 1
    for d in shape.dims:
        n *= max(d, 0)
    return n


def elements_recursive(shape) -> int:
    """`ShapeUtil::ElementsInRecursive`: elements summed over array leaves."""
    if shape.element_type == "tuple":
        return sum(elements_recursive(s) for s in shape.tuple_shapes)
    if shape.element_type in ("token", "opaque"):
        return 0
    return elements(shape)


def all_leaves(shape, prefix=()):
    """`(index, leaf)` for every non-tuple leaf, tokens included (XLA's `ForEachLeafShape`)."""
    if shape.element_type == "tuple":
        for i, s in enumerate(shape.tuple_shapes):
            yield from all_leaves(s, prefix + (i,))
    else:
        yield prefix, shape


def array_leaves(shape, prefix=()):
    """`(index, leaf)` for every array leaf, in XLA's pre-order."""
    if shape.element_type == "tuple":
        for i, s in enumerate(shape.tuple_shapes):
            yield from array_leaves(s, prefix + (i,))
    elif shape.element_type not in ("token", "opaque"):
        yield prefix, shape


# ---------------------------------------------------------------------------
# Opcode tables

# Instructions for which XLA skips the bottleneck-time pass, so that they keep
# the `optimal_seconds` their handler set (-1 for a custom call, the sum of the
# sub-computation for a call, loop or conditional). Every other instruction
# gets 0 (no per-second rates are set through jaxlib).
KEEPS_OPTIMAL_SECONDS = frozenset(
    "parameter constant get-tuple-element after-all add-dependency domain custom-call call while conditional".split()
)

# Elementwise opcodes and whether XLA counts them as transcendental
# (`HloCostAnalysis::HandleElementwiseOp` in the XLA of jaxlib 0.10.2: one
# transcendental per output element for these, else one flop per element).
TRANSCENDENTAL_OPCODES = frozenset(
    "acos acosh asin asinh atanh cosh sinh atan2 cbrt cosine erf exponential exponential-minus-one "
    "log log-plus-one logistic power rsqrt sine sqrt tan tanh".split()
)
ELEMENTWISE_UNARY = frozenset(
    "abs ceil floor count-leading-zeros convert bitcast-convert imag real is-finite negate not popcnt "
    "round-nearest-afz round-nearest-even sign reduce-precision "
    "acos acosh asin asinh atanh cosh sinh cbrt cosine erf exponential exponential-minus-one log "
    "log-plus-one logistic rsqrt sine sqrt tan tanh".split()
)
ELEMENTWISE_BINARY = frozenset(
    "add subtract multiply divide remainder maximum minimum and or xor shift-left shift-right-arithmetic "
    "shift-right-logical complex compare stochastic-convert atan2 power mulhi".split()
)
ELEMENTWISE_TERNARY = frozenset({"select", "clamp"})
ELEMENTWISE_OPCODES = ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | ELEMENTWISE_TERNARY

# `HloInstruction::IsElementwise()` (used by the GPU utilization propagation):
# the arithmetic opcodes above plus copy and map. Bitcast-convert only when the
# element width does not change; dynamic-update-slice is elementwise on
# operand 0 only, which `IsElementwise()` does not count.
IS_ELEMENTWISE = ELEMENTWISE_OPCODES | {"copy", "map"}


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


def transpose_is_bitcast(instr, *, ignore_unit_dims: bool = False) -> bool:
    """`ShapeUtil::TransposeIsBitcast`: the permutation only relabels the layout.

    With `ignore_unit_dims`, dimensions of size 1 may move freely (what the
    GPU backend's layout normalisation later turns into a bitcast as well).
    """
    src = instr.operands[0].shape
    dst = instr.shape
    if src.element_type != dst.element_type:
        return False
    perm = _attr_tuple(instr, "dimensions")
    m2m_dst = dst.minor_to_major
    m2m_src = src.minor_to_major
    if len(perm) != len(m2m_dst) or len(m2m_src) != len(m2m_dst):
        return False
    if ignore_unit_dims:
        return [perm[d] for d in m2m_dst if dst.dims[d] != 1] == [d for d in m2m_src if src.dims[d] != 1]
    return all(perm[d] == s for d, s in zip(m2m_dst, m2m_src))


@cost_rule("transpose")
def transpose_rule(an, instr, p):
    """Defaults, unless the transpose is a bitcast in its layouts (then 0 bytes)."""
    if transpose_is_bitcast(instr):
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
        from ..hlo._shape import PRIMITIVE_BITS

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
# Linear algebra


def dot_flops(lhs_shape, out_shape, lhs_contracting) -> int:
    """`HloCostAnalysis::GetDotFlops`: 2 x output elements x the contracted size."""
    width = 1
    for d in lhs_contracting:
        width *= lhs_shape.dims[d]
    return FMA_FLOPS * elements(out_shape) * width


@cost_rule("dot", "scaled-dot")
def dot_rule(an, instr, p):
    """2 x output elements x product of the lhs contracting dimensions (batch dimensions are in the output)."""
    p[FLOPS] = float(dot_flops(instr.operands[0].shape, instr.shape, _attr_tuple(instr, "lhs_contracting_dims")))


@cost_rule("ragged-dot")
def ragged_dot_rule(an, instr, p):
    """As a dot, with XLA's removal of the group dimension(s) from the output shape."""
    from ..hlo._shape import Shape

    out = instr.shape
    for i in range(len(_attr_tuple(instr, "rhs_group_dims"))):
        dims = out.dims[:i] + out.dims[i + 1 :]
        out = Shape.array(out.element_type, dims)
    p[FLOPS] = float(dot_flops(instr.operands[0].shape, out, _attr_tuple(instr, "lhs_contracting_dims")))


def convolution_flops(instr, lhs_shape, rhs_shape, out_shape) -> int:
    """`HloCostAnalysis::GetConvolutionFlops`: 2 x FMAs over the valid (output, kernel) position pairs."""
    dn = instr.attribute("dim_labels")
    window = instr.attribute("window", None)
    win_dims = list(window.dimensions) if window is not None else []
    in_feature = lhs_shape.dims[dn.input_feature]
    out_feature = out_shape.dims[dn.output_feature]
    batch = lhs_shape.dims[dn.input_batch]
    if not win_dims:
        from ..hlo._attributes import WindowDimension

        win_dims = [WindowDimension()]
        kernel_limits, output_limits, input_limits = [1], [1], [1]
    else:
        kernel_limits = [rhs_shape.dims[d] for d in dn.kernel_spatial]
        output_limits = [out_shape.dims[d] for d in dn.output_spatial]
        input_limits = [lhs_shape.dims[d] for d in dn.input_spatial]
    valid = []
    for s, wd in enumerate(win_dims):
        i_lim, o_lim, k_lim = input_limits[s], output_limits[s], kernel_limits[s]
        if (i_lim == o_lim and k_lim == o_lim and i_lim == wd.base_dilation and wd.window_dilation == 1
                and max(1, i_lim - 1) == wd.stride and wd.padding_low == 0 and wd.padding_high == 0):
            valid.append(i_lim)
            continue
        if (i_lim == 1 and k_lim == o_lim and wd.window_dilation == 1 and wd.base_dilation == 1
                and wd.stride == 1 and wd.padding_high == o_lim - 1 and wd.padding_low == o_lim - 1):
            valid.append(o_lim)
            continue
        count = 0
        for k in range(k_lim):
            if wd.stride == 1 and wd.base_dilation == 1:
                base = wd.padding_low - k * wd.window_dilation
                count += max(min(i_lim + base, o_lim) - max(base, 0), 0)
                continue
            for o in range(o_lim):
                undilated = o * wd.stride - wd.padding_low + k * wd.window_dilation
                if wd.base_dilation > 1:
                    # C++ integer division truncates toward zero.
                    q = abs(undilated) // wd.base_dilation
                    lhs_index = q if undilated >= 0 else -q
                else:
                    lhs_index = undilated
                if undilated != lhs_index * wd.base_dilation:
                    continue
                if 0 <= lhs_index < i_lim:
                    count += 1
        valid.append(count)
    fgc = instr.attribute("feature_group_count", 1)
    bgc = instr.attribute("batch_group_count", 1)
    fma = (in_feature // fgc) * out_feature * (batch // bgc) * math.prod(valid)
    return fma * FMA_FLOPS


@cost_rule("convolution")
def convolution_rule(an, instr, p):
    """2 x (in_features / feature_groups) x out_features x (batch / batch_groups) x valid spatial pairs."""
    p[FLOPS] = float(
        convolution_flops(instr, instr.operands[0].shape, instr.operands[1].shape, instr.shape)
    )


@cost_rule("fft")
def fft_rule(an, instr, p):
    """2 x 4 (FMAs per complex multiply) x product of log2(fft_length) x input elements."""
    src = instr.operands[0].shape
    if src.element_type == "tuple":
        src = src.tuple_shapes[0]
    logs = 1
    for n in _attr_tuple(instr, "fft_length"):
        logs *= (int(n).bit_length() - 1) if n > 0 else -1
    p[FLOPS] = float(FMA_FLOPS * 4 * logs * elements(src))


@cost_rule("triangular-solve")
def triangular_solve_rule(an, instr, p):
    """Half of the triangle is read; flops = 2 x n x elements(b)."""
    a, b = instr.operands[0].shape, instr.operands[1].shape
    out = float(an.size(instr.shape))
    a_size = float(an.size(a))
    b_size = float(an.size(b))
    p[OUT] = out
    # XLA writes operand 0's slot twice; the second (b's size) wins.
    p[OPB][0] = b_size
    p[BYTES] = out + a_size / 2.0 + b_size
    n = a.dims[-1] if a.dims else 1
    p[FLOPS] = float(FMA_FLOPS * n * elements(b))


@cost_rule("cholesky")
def cholesky_rule(an, instr, p):
    """Half of the input is read and half of the output written; flops = n x elements / 3."""
    a = instr.operands[0].shape
    half = an.size(a) / 2.0
    p[BYTES] = 2 * half
    p[OUT] = half
    p[OPB][0] = half
    n = a.dims[-1] if a.dims else 1
    p[FLOPS] = float((n * elements(a)) // 3)


# ---------------------------------------------------------------------------
# Sorting, random numbers


def _log2_ceiling(n: int) -> int:
    return -1 if n <= 0 else (n - 1).bit_length()


@cost_rule("sort")
def sort_rule(an, instr, p):
    """n x ceil(log2 n) comparisons over operand 0 (a comparison sort), counted as flops."""
    n = elements(instr.operands[0].shape)
    p[FLOPS] = float(n * _log2_ceiling(n))


@cost_rule("rng")
def rng_rule(an, instr, p):
    """One transcendental per generated element."""
    p[TRANS] = float(elements(instr.shape))


@cost_rule("rng-bit-generator")
def rng_bit_generator_rule(an, instr, p):
    """One transcendental per element of every output leaf (state included)."""
    p[TRANS] = float(elements_recursive(instr.shape))


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
    target = instr.attribute("custom_call_target", "")
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
