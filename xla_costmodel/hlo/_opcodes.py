"""Per-opcode rules of XLA's parser (`HloParserImpl::CreateInstruction`).

Each opcode has a `Rule`, registered with `@rule(...)`: how many operands it
takes, which attributes it allows (and which it requires), and a check that
XLA's parser makes once operands and attributes are read. The check also
gives the instruction's shape: the one written, the one XLA infers when the
text gives none (for the opcodes XLA can infer), or the one XLA computes
itself whatever the text says (send, recv, after-all, ...).

Both readers use these rules: the token parser (`_token_parser`) and the
line-oriented fast path (`_fastpath`), so they accept exactly the same
instructions. A few opcodes need the token parser's machinery (parameters,
constants, async ops and their sugar, send/recv chains) and have their own
reading functions in `READERS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple

from . import _inference as inf
from ._inference import InferenceError, program_shape
from ._ir import HloComputation, HloInstruction
from ._shape import Shape

# Every opcode XLA's parser knows, with its operand count (None: variadic).
OPCODES: dict[str, int | None] = {}
for _entry in (
    "abs:1 acos:1 acosh:1 add:2 add-dependency:2 after-all:* all-gather:* all-gather-done:1 all-gather-start:* "
    "all-reduce:* all-reduce-done:1 all-reduce-start:* all-to-all:* and:2 asin:1 asinh:1 async-done:1 "
    "async-start:* async-update:1 atan2:2 atanh:1 batch-norm-grad:5 batch-norm-inference:5 batch-norm-training:3 "
    "bitcast:1 bitcast-convert:1 broadcast:1 call:* cbrt:1 ceil:1 cholesky:1 clamp:3 count-leading-zeros:1 "
    "collective-broadcast:* collective-permute:* collective-permute-done:1 collective-permute-start:* compare:2 "
    "complex:2 concatenate:* conditional:* constant:0 convert:1 convolution:2 copy:1 copy-done:1 copy-start:1 "
    "cosine:1 cosh:1 custom-call:* divide:2 domain:1 dot:2 dynamic-reshape:* dynamic-slice:* "
    "dynamic-update-slice:* erf:1 exponential:1 exponential-minus-one:1 fft:1 floor:1 fusion:* gather:2 "
    "get-dimension-size:1 get-tuple-element:1 imag:1 infeed:1 iota:0 is-finite:1 log:1 log-plus-one:1 logistic:1 "
    "map:* maximum:2 minimum:2 mulhi:2 multiply:2 negate:1 not:1 opt-barrier:1 or:2 outfeed:2 pad:2 parameter:0 "
    "partition-id:0 popcnt:1 power:2 ragged-all-to-all:6 ragged-dot:3 real:1 recv:1 recv-done:1 reduce:* "
    "reduce-precision:1 reduce-scatter:* reduce-window:* remainder:2 replica-id:0 reshape:1 reverse:1 rng:* "
    "rng-bit-generator:1 rng-get-and-update-state:0 round-nearest-afz:1 round-nearest-even:1 rsqrt:1 "
    "scaled-dot:4 scan:* scatter:* select:3 select-and-scatter:3 send:2 send-done:1 set-dimension-size:2 "
    "shift-left:2 shift-right-arithmetic:2 shift-right-logical:2 sign:1 sine:1 sinh:1 slice:1 sort:* sqrt:1 "
    "stochastic-convert:2 subtract:2 tan:1 tanh:1 topk:1 transpose:1 triangular-solve:2 tuple:* while:1 xor:2"
).split():
    _name, _count = _entry.rsplit(":", 1)
    OPCODES[_name] = None if _count == "*" else int(_count)

# Opcodes whose shape XLA infers when the text leaves it out (XLA's CanInferShape).
_INFERABLE = frozenset(
    "abs acos acosh asin asinh add add-dependency after-all atan2 atanh batch-norm-grad batch-norm-inference "
    "batch-norm-training broadcast call ceil cholesky clamp count-leading-zeros compare complex concatenate "
    "conditional convolution copy cosine cosh opt-barrier divide domain dot erf exponential exponential-minus-one "
    "fft floor gather get-dimension-size set-dimension-size get-tuple-element imag is-finite log log-plus-one "
    "logistic and not or xor map maximum minimum multiply mulhi negate pad partition-id popcnt power ragged-dot "
    "real reduce remainder replica-id reverse round-nearest-afz round-nearest-even rsqrt scan scaled-dot scatter "
    "select shift-left shift-right-arithmetic shift-right-logical sign sine sinh sqrt cbrt reduce-window "
    "select-and-scatter sort subtract tan tanh transpose triangular-solve tuple while topk".split()
)

# Attributes every instruction may have.
GENERIC_ATTRIBUTES: dict[str, tuple[bool, str]] = {
    "sharding": (False, "sharding"),
    "frontend_attributes": (False, "frontend_attributes"),
    "statistics": (False, "statistics"),
    "parameter_replication": (False, "parameter_replication"),
    "control-predecessors": (False, "instruction_list"),
    "origin": (False, "original_value"),
    "metadata": (False, "metadata"),
    "backend_config": (False, "string_or_json"),
}
CALLED_TYPES = frozenset({"computation", "computation_list"})


def can_infer_shape(opcode: str) -> bool:
    return opcode in _INFERABLE


class Problem(Exception):
    """A rule refuses the instruction: XLA's message (the reader adds the place: after the attributes, or, as
    XLA for some checks, where the operands start)."""

    def __init__(self, message: str, *, at_operands: bool = False):
        super().__init__(message)
        self.at_operands = at_operands


class Check(NamedTuple):
    """What a rule's check sees: the written shape (or None), the operands, the attribute values.

    (A named tuple rather than a frozen dataclass: one is made per instruction read.)
    """

    opcode: str
    shape: Shape | None
    operands: list
    values: Mapping


@dataclass(frozen=True)
class Rule:
    """The parser's rule for one opcode (see the module doc)."""

    operands: int | None
    attributes: Mapping[str, tuple[bool, str]]
    check: Callable[[Check], Shape]
    # For the few opcodes whose allowed attributes depend on the operands.
    attributes_for: Callable[[list], Mapping[str, tuple[bool, str]]] | None = None
    # Attribute values the check reads (the fast path reads only those).
    reads: frozenset = field(default_factory=frozenset)
    # The check only infers the shape: with the shape written there is nothing to check.
    infers_only: bool = False
    # The values in `reads` serve only to infer a shape that is not written.
    reads_to_infer: bool = False

    def allowed(self, operands: list) -> dict:
        attrs = dict(GENERIC_ATTRIBUTES)
        attrs.update(self.attributes_for(operands) if self.attributes_for is not None else self.attributes)
        return attrs


RULES: dict[str, Rule] = {}
# Opcodes read by their own functions in the token parser (see READERS below).
READERS: dict[str, Callable] = {}


def rule(*opcodes: str, operands: int | None = None, attributes: Mapping | None = None, attributes_for=None,
         reads: tuple = (), infers_only: bool = False, reads_to_infer: bool = False):
    """Register the rule of `opcodes`: the decorated function is its check."""

    def register(check):
        r = Rule(operands, dict(attributes or {}), check, attributes_for, frozenset(reads), infers_only, reads_to_infer)
        for op in opcodes:
            RULES[op] = r
        return check

    return register


def infer(k: Check, fn) -> Shape:
    """The written shape, else the one XLA infers (failing as XLA's parser fails)."""
    if k.shape is not None:
        return k.shape
    try:
        return fn()
    except InferenceError as err:
        raise Problem(f"failed to infer shape for opcode: {k.opcode}, error: {err}") from None
    except (IndexError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise Problem(f"failed to infer shape for opcode: {k.opcode}, error: {err}") from None


def written(k: Check) -> Shape:
    if k.shape is None:  # pragma: no cover - the readers refuse a missing shape before
        raise Problem(f"cannot infer shape for opcode: {k.opcode}")
    return k.shape


def _shapes(ops) -> list[Shape]:
    return [o.shape for o in ops]


# -- elementwise ------------------------------------------------------------------------------

_WITH_ACCURACY = ("acos acosh asin asinh atanh exponential-minus-one log log-plus-one logistic sqrt cbrt rsqrt tanh "
                  "erf sine sinh cosine cosh tan exponential").split()


@rule(*_WITH_ACCURACY, operands=1, attributes={"result_accuracy": (False, "result_accuracy")}, infers_only=True)
@rule("abs", "all-gather-done", "all-reduce-done", "round-nearest-afz", "round-nearest-even", "bitcast", "ceil",
      "count-leading-zeros", "collective-permute-done", "copy", "copy-done", "opt-barrier", "imag", "is-finite",
      "floor", "not", "negate", "popcnt", "real", "sign", operands=1, infers_only=True)
def _unary(k: Check) -> Shape:
    return infer(k, lambda: inf.unary(k.opcode, k.operands[0].shape))


@rule("add", "divide", "multiply", "mulhi", "subtract", "atan2", "complex", "maximum", "minimum", "power", "remainder",
      "and", "or", "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical", "stochastic-convert",
      operands=2, infers_only=True)
def _binary(k: Check) -> Shape:
    return infer(k, lambda: inf.binary(k.opcode, k.operands[0].shape, k.operands[1].shape))


@rule("clamp", "select", operands=3, infers_only=True)
def _ternary(k: Check) -> Shape:
    return infer(k, lambda: inf.ternary(k.opcode, *_shapes(k.operands[:3])))


@rule("compare", operands=2,
      attributes={"direction": (True, "comparison_direction"), "type": (False, "comparison_type"),
                  "order": (False, "comparison_order")}, infers_only=True)
def _compare(k: Check) -> Shape:
    return infer(k, lambda: inf.binary("compare", k.operands[0].shape, k.operands[1].shape))


@rule("convert", "bitcast-convert", operands=1)
@rule("reshape", operands=1, attributes={"inferred_dimension": (False, "int64")})
@rule("iota", operands=0, attributes={"iota_dimension": (True, "int64")})
@rule("slice", operands=1, attributes={"slice": (True, "slice_ranges")})
@rule("rng", attributes={"distribution": (True, "distribution")})
@rule("rng-get-and-update-state", operands=0, attributes={"delta": (True, "int64")})
@rule("reduce-precision", operands=1, attributes={"exponent_bits": (True, "int64"), "mantissa_bits": (True, "int64")})
@rule("copy-start", operands=1, attributes={"cross_program_prefetch_index": (False, "int32")})
@rule("collective-broadcast", attributes={"replica_groups": (False, "collective_device_list"),
                                          "channel_id": (False, "int64")})
@rule("fusion", attributes={"calls": (True, "computation"), "kind": (True, "fusion_kind"),
                            "output_to_operand_aliasing": (False, "instruction_aliasing")})
@rule("convolution", operands=2, attributes={
    "window": (False, "window"), "dim_labels": (True, "conv_dnums"), "feature_group_count": (False, "int64"),
    "batch_group_count": (False, "int64"), "convolution_kind": (False, "conv_kind"),
    "operand_precision": (False, "precision_list"), "sparsity_config": (False, "sparsity_config")})
@rule("fft", operands=1, attributes={"fft_type": (True, "fft_type"), "fft_length": (True, "int_list")})
@rule("select-and-scatter", operands=3, attributes={"select": (True, "computation"), "scatter": (True, "computation"),
                                                    "window": (False, "window")})
@rule("batch-norm-training", operands=3, attributes={"epsilon": (True, "float"), "feature_index": (True, "int64")})
@rule("batch-norm-inference", "batch-norm-grad", operands=5,
      attributes={"epsilon": (True, "float"), "feature_index": (True, "int64")})
@rule("gather", operands=2, attributes={
    "offset_dims": (True, "int_list"), "collapsed_slice_dims": (True, "int_list"),
    "start_index_map": (True, "int_list"), "index_vector_dim": (True, "int64"), "slice_sizes": (True, "int_list"),
    "indices_are_sorted": (False, "bool"), "operand_batching_dims": (False, "int_list"),
    "start_indices_batching_dims": (False, "int_list")})
def _as_written(k: Check) -> Shape:
    if k.shape is None:
        # XLA infers these; we ask for the shape instead (a rare spelling).
        raise Problem(f"failed to infer shape for opcode: {k.opcode}: this reader needs its shape written")
    return k.shape


@rule("topk", operands=1, attributes={"k": (True, "int64"), "largest": (False, "bool"), "is_stable": (False, "bool")},
      reads=("k",), infers_only=True)
def _topk(k: Check) -> Shape:
    return infer(k, lambda: inf.topk(k.operands[0].shape, k.values["k"]))


@rule("all-gather", "all-gather-start", reads=("dimensions",), attributes={
    "replica_groups": (False, "collective_device_list"), "channel_id": (False, "int64"),
    "dimensions": (True, "int_list"), "constrain_layout": (False, "bool"), "use_global_device_ids": (False, "bool")})
def _all_gather(k: Check) -> Shape:
    if len(k.values["dimensions"]) != 1:
        raise Problem(f"{k.opcode} takes exactly one dimension, got {len(k.values['dimensions'])}")
    return written(k)


_ALL_REDUCE = {"to_apply": (True, "computation"), "replica_groups": (False, "collective_device_list"),
               "channel_id": (False, "int64"), "constrain_layout": (False, "bool"),
               "use_global_device_ids": (False, "bool"), "mode": (False, "mode")}


@rule("all-reduce", "all-reduce-start", attributes=_ALL_REDUCE, reads=("use_global_device_ids", "channel_id", "mode"))
@rule("reduce-scatter", attributes={**_ALL_REDUCE, "dimensions": (True, "int_list")},
      reads=("use_global_device_ids", "channel_id", "mode", "dimensions"))
def _all_reduce(k: Check) -> Shape:
    values = k.values
    if k.opcode == "reduce-scatter" and len(values["dimensions"]) != 1:
        raise Problem(f"reduce-scatter takes exactly one dimension, got {len(values['dimensions'])}")
    if "mode" not in values and values.get("use_global_device_ids") and "channel_id" not in values:
        raise Problem("Cannot have use_global_device_ids=true without channel_id", at_operands=True)
    return written(k)


@rule("all-to-all", reads=("dimensions",), attributes={
    "replica_groups": (False, "collective_device_list"), "channel_id": (False, "int64"),
    "dimensions": (False, "int_list"), "constrain_layout": (False, "bool")})
@rule("ragged-all-to-all", reads=("dimensions",), attributes={
    "replica_groups": (False, "collective_device_list"), "channel_id": (False, "int64"),
    "dimensions": (False, "int_list")})
def _all_to_all(k: Check) -> Shape:
    if "dimensions" in k.values and len(k.values["dimensions"]) != 1:
        raise Problem(f"{k.opcode} takes at most one dimension, got {len(k.values['dimensions'])}")
    return written(k)


@rule("collective-permute", "collective-permute-start", reads=("source_target_pairs", "slice_sizes"), attributes={
    "source_target_pairs": (True, "int_list_list"), "channel_id": (False, "int64"),
    "slice_sizes": (False, "int_list_list")})
def _collective_permute(k: Check) -> Shape:
    if any(len(pair) != 2 for pair in k.values["source_target_pairs"]):
        raise Problem("expects 'source_target_pairs=' to be a list of pairs")
    if "slice_sizes" in k.values and len(k.operands) != 4:
        raise Problem("CollectivePermute and CollectivePermuteStart must have exactly four operands for "
                      "dynamic-slice and in-place update.")
    return written(k)


@rule("replica-id", "partition-id", operands=0)
def _replica_id(k: Check) -> Shape:
    return k.shape if k.shape is not None else Shape("u32")


@rule("dynamic-reshape")
def _dynamic_reshape(k: Check) -> Shape:
    if not k.operands:
        raise Problem("DynamicReshape requires at least one operand.")
    return written(k)


@rule("after-all")
def _after_all(k: Check) -> Shape:
    return Shape("token")


@rule("add-dependency", operands=2)
def _add_dependency(k: Check) -> Shape:
    return k.operands[0].shape


@rule("sort", reads=("dimensions",), attributes={"dimensions": (True, "int_list"), "is_stable": (False, "bool"),
                                                  "to_apply": (True, "computation")})
def _sort(k: Check) -> Shape:
    if len(k.values["dimensions"]) != 1:
        raise Problem("sort takes exactly one dimension")
    return infer(k, lambda: inf.sort(_shapes(k.operands)))


@rule("tuple")
def _tuple(k: Check) -> Shape:
    if k.shape is not None and (not k.shape.is_tuple or len(k.shape.tuple_shapes) != len(k.operands)):
        n = len(k.shape.tuple_shapes) if k.shape.is_tuple else 0
        raise Problem(f"expects {n} operands, but has {len(k.operands)} operands")
    return infer(k, lambda: inf.tuple_of(_shapes(k.operands)))


@rule("while", operands=1, reads=("condition", "body"),
      attributes={"condition": (True, "computation"), "body": (True, "computation")}, infers_only=True)
def _while(k: Check) -> Shape:
    return infer(k, lambda: inf.while_(program_shape(k.values["condition"]), program_shape(k.values["body"]),
                                       k.operands[0].shape))


@rule("get-tuple-element", operands=1, attributes={"index": (True, "int64")}, reads=("index",), infers_only=True)
def _gte(k: Check) -> Shape:
    return infer(k, lambda: inf.get_tuple_element(k.operands[0].shape, k.values["index"]))


@rule("call", reads=("to_apply",), attributes={"to_apply": (True, "computation"), "is_composite": (False, "bool")}, infers_only=True)
def _call(k: Check) -> Shape:
    return infer(k, lambda: inf.call(_shapes(k.operands), program_shape(k.values["to_apply"])))


@rule("reduce-window", attributes={"window": (False, "window"), "to_apply": (True, "computation")})
def _reduce_window(k: Check) -> Shape:
    if len(k.operands) % 2:
        raise Problem(f"expects an even number of operands, but has {len(k.operands)} operands")
    if not k.operands:
        raise Problem("reduce-window expects at least one input and init operand")
    return _as_written(k)


_TRANSPOSE_A = ("TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")


@rule("triangular-solve", operands=2, reads=("transpose_a",), attributes={
    "left_side": (False, "bool"), "lower": (False, "bool"), "unit_diagonal": (False, "bool"),
    "transpose_a": (False, "enum")})
def _triangular_solve(k: Check) -> Shape:
    if k.values.get("transpose_a", "NO_TRANSPOSE") not in _TRANSPOSE_A:
        raise Problem(f"unknown transpose_a value {k.values['transpose_a']}")
    return infer(k, lambda: k.operands[1].shape)


@rule("cholesky", operands=1, attributes={"lower": (False, "bool")}, infers_only=True)
def _cholesky(k: Check) -> Shape:
    return infer(k, lambda: k.operands[0].shape)


_BROADCAST_DIMS = {"dimensions": (True, "int_list")}
_BROADCAST_SCALAR = {"dimensions": (False, "int_list")}


def _broadcast_attributes(ops) -> dict:
    return _BROADCAST_SCALAR if ops and inf.is_scalar(ops[0].shape) else _BROADCAST_DIMS


@rule("broadcast", operands=1, attributes_for=_broadcast_attributes, reads=("dimensions",), infers_only=True)
def _broadcast(k: Check) -> Shape:
    return infer(k, lambda: inf.broadcast_sizes(k.operands[0].shape, k.values.get("dimensions", [])))


@rule("concatenate", attributes={"dimensions": (True, "int_list")}, reads=("dimensions",))
def _concatenate(k: Check) -> Shape:
    if len(k.values["dimensions"]) != 1:
        raise Problem("concatenate takes exactly one dimension")
    return infer(k, lambda: inf.concatenate(_shapes(k.operands), k.values["dimensions"][0]))


@rule("map", attributes={"to_apply": (True, "computation"), "dimensions": (False, "int_list")},
      reads=("to_apply", "dimensions"), infers_only=True)
def _map(k: Check) -> Shape:
    return infer(k, lambda: inf.map_(_shapes(k.operands), program_shape(k.values["to_apply"]), k.values["dimensions"]))


@rule("scan", reads=("to_apply", "dimensions", "num_carries"), attributes={
    "to_apply": (True, "computation"), "dimensions": (True, "int_list"), "num_carries": (True, "int64"),
    "is_reverse": (False, "bool"), "is_associative": (False, "bool")})
def _scan(k: Check) -> Shape:
    ops, values = k.operands, k.values
    n_params = len(values["to_apply"].parameters)
    if len(ops) != n_params:
        raise Problem(f"expects {len(ops)} operands to match the number of parameters of to_apply, but to_apply has "
                      f"{n_params} parameters")
    if len(values["dimensions"]) != 1:
        raise Problem("expects exactly one dimension")
    if len(ops) < values["num_carries"]:
        raise Problem(f"expects at least {values['num_carries']} operands to match the number of carries, but has "
                      f"{len(ops)} operands")
    return _as_written(k)


@rule("reduce", attributes={"to_apply": (True, "computation"), "dimensions": (True, "int_list")},
      reads=("to_apply", "dimensions"), reads_to_infer=True)
def _reduce(k: Check) -> Shape:
    if len(k.operands) % 2:
        raise Problem(f"expects an even number of operands, but has {len(k.operands)} operands")
    return infer(k, lambda: inf.reduce(_shapes(k.operands), k.values["dimensions"],
                                       program_shape(k.values["to_apply"])))


@rule("reverse", operands=1, attributes={"dimensions": (True, "int_list")}, reads=("dimensions",), infers_only=True)
def _reverse(k: Check) -> Shape:
    return infer(k, lambda: inf.reverse(k.operands[0].shape, k.values["dimensions"]))


@rule("transpose", operands=1, attributes={"dimensions": (True, "int_list")}, reads=("dimensions",), infers_only=True)
def _transpose(k: Check) -> Shape:
    return infer(k, lambda: inf.transpose(k.operands[0].shape, k.values["dimensions"]))


@rule("dynamic-slice", attributes={"dynamic_slice_sizes": (True, "int_list")})
def _dynamic_slice(k: Check) -> Shape:
    ops = k.operands
    if not ops:
        raise Problem("Expected at least one operand.")
    if not (len(ops) == 2 and len(ops[1].shape.dims) == 1) and len(ops) != 1 + len(ops[0].shape.dims):
        raise Problem("Wrong number of operands.")
    return written(k)


@rule("dynamic-update-slice")
def _dynamic_update_slice(k: Check) -> Shape:
    ops = k.operands
    if len(ops) < 2:
        raise Problem("Expected at least two operands.")
    if not (len(ops) == 3 and len(ops[2].shape.dims) == 1) and len(ops) != 2 + len(ops[0].shape.dims):
        raise Problem("Wrong number of operands.")
    return written(k)


@rule("pad", operands=2, attributes={"padding": (True, "padding_config")}, reads=("padding",), infers_only=True)
def _pad(k: Check) -> Shape:
    return infer(k, lambda: inf.pad(k.operands[0].shape, k.operands[1].shape, k.values["padding"]))


@rule("infeed", operands=1, attributes={"infeed_config": (False, "string")})
def _infeed(k: Check) -> Shape:
    shape = written(k)
    if not shape.is_tuple or not shape.tuple_shapes:
        raise Problem("infeed must have a non-empty tuple shape")
    return Shape("tuple", tuple_shapes=(shape.tuple_shapes[0], Shape("token")))


@rule("outfeed", operands=2, attributes={"outfeed_config": (False, "string"), "outfeed_shape": (False, "shape")})
def _outfeed(k: Check) -> Shape:
    return Shape("token")


@rule("rng-bit-generator", attributes={"algorithm": (True, "random_algorithm")})
def _rng_bit_generator(k: Check) -> Shape:
    if not k.operands:
        raise Problem("rng-bit-generator takes one operand (the state)")
    return written(k)


def _conditional_attributes(ops) -> dict:
    if not ops:
        raise Problem("conditional requires at least one operand")
    index = ops[0].shape
    if not inf.is_scalar(index):
        raise Problem("The first operand must be a scalar")
    if index.element_type == "pred":
        return _TWO_BRANCHES
    if index.element_type != "s32":
        raise Problem("The first operand must be a scalar of PRED or S32")
    return _BRANCH_LIST


_TWO_BRANCHES = {"true_computation": (True, "computation"), "false_computation": (True, "computation")}
_BRANCH_LIST = {"branch_computations": (True, "computation_list")}


@rule("conditional", attributes_for=_conditional_attributes,
      reads=("true_computation", "false_computation", "branch_computations"))
def _conditional(k: Check) -> Shape:
    values = k.values
    if "branch_computations" in values:
        branches = list(values["branch_computations"])
    else:
        branches = [values["true_computation"], values["false_computation"]]
    if not branches or len(k.operands) != len(branches) + 1:
        raise Problem(f"conditional with {len(branches)} branches takes {len(branches) + 1} operands, "
                      f"got {len(k.operands)}")
    return infer(k, lambda: inf.conditional(k.operands[0].shape, [program_shape(b) for b in branches],
                                            _shapes(k.operands[1:])))


@rule("custom-call", reads=("api_version", "operand_layout_constraints"), attributes={
    "custom_call_target": (True, "string"), "window": (False, "window"), "dim_labels": (False, "conv_dnums"),
    "feature_group_count": (False, "int64"), "batch_group_count": (False, "int64"),
    "operand_layout_constraints": (False, "shape_list"), "custom_call_has_side_effect": (False, "bool"),
    "to_apply": (False, "computation"), "called_computations": (False, "computation_list"),
    "output_to_operand_aliasing": (False, "instruction_aliasing"), "padding_type": (False, "padding_type"),
    "literal": (False, "literal"), "operand_precision": (False, "precision_list"),
    "schedule": (False, "custom_call_schedule"), "api_version": (False, "custom_call_api_version")})
def _custom_call(k: Check) -> Shape:
    values, ops = k.values, k.operands
    if values.get("api_version", "").lower() == "api_version_unspecified":
        raise Problem(f"Invalid API version: {values['api_version'].upper()}")
    if "operand_layout_constraints" in values:
        constraints = values["operand_layout_constraints"]
        if not _has_layout(written(k)):
            raise Problem("Layout must be set on layout-constrained custom call")
        if len(ops) != len(constraints):
            raise Problem(f"Expected {len(ops)} operand layout constraints, {len(constraints)} given")
        for i, (shape, op) in enumerate(zip(constraints, ops)):
            if not _has_layout(shape):
                raise Problem(f"Operand layout constraint shape {shape} for operand {i} does not have a layout")
            if not shape.compatible(op.shape):
                raise Problem(f"Operand layout constraint shape {shape} for operand {i} is not compatible with operand "
                              f"shape {op.shape}")
    return written(k)


def _has_layout(shape: Shape) -> bool:
    if shape.is_tuple:
        return all(_has_layout(s) for s in shape.tuple_shapes)
    if shape.is_array:
        return shape.layout is not None or not shape.dims
    return True


_DOT_DIMS = {"lhs_contracting_dims": (False, "int_list"), "rhs_contracting_dims": (False, "int_list"),
             "lhs_batch_dims": (False, "int_list"), "rhs_batch_dims": (False, "int_list")}
_DOT_READS = tuple(_DOT_DIMS)


def _dot_shape(k: Check, lhs: Shape, rhs: Shape) -> Shape:
    v = k.values
    return inf.dot(lhs, rhs, v.get("lhs_contracting_dims", []), v.get("rhs_contracting_dims", []),
                   v.get("lhs_batch_dims", []), v.get("rhs_batch_dims", []))


@rule("dot", attributes={**_DOT_DIMS, "operand_precision": (False, "precision_list"),
                         "algorithm": (False, "precision_algorithm")}, reads=_DOT_READS, reads_to_infer=True)
def _dot(k: Check) -> Shape:
    if len(k.operands) < 2 and k.shape is None:
        raise Problem(f"expects 2 operands, but has {len(k.operands)} operands")
    return infer(k, lambda: _dot_shape(k, k.operands[0].shape, k.operands[1].shape))


@rule("ragged-dot", attributes={**_DOT_DIMS, "lhs_ragged_dims": (False, "int_list"),
                                "rhs_group_dims": (False, "int_list"), "operand_precision": (False, "precision_list")})
def _ragged_dot(k: Check) -> Shape:
    if len(k.operands) != 3:
        raise Problem(f"expects 3 operands, but has {len(k.operands)} operands")
    return _as_written(k)


@rule("scaled-dot", attributes={**_DOT_DIMS, "operand_precision": (False, "precision_list"),
                                "algorithm": (False, "precision_algorithm")}, reads=_DOT_READS)
def _scaled_dot(k: Check) -> Shape:
    if len(k.operands) != 4:
        raise Problem(f"expects 4 operands, but has {len(k.operands)} operands")
    return infer(k, lambda: _dot_shape(k, k.operands[0].shape, k.operands[2].shape))


@rule("scatter", attributes={
    "update_window_dims": (True, "int_list"), "inserted_window_dims": (True, "int_list"),
    "scatter_dims_to_operand_dims": (True, "int_list"), "index_vector_dim": (True, "int64"),
    "to_apply": (True, "computation"), "indices_are_sorted": (False, "bool"), "unique_indices": (False, "bool"),
    "input_batching_dims": (False, "int_list"), "scatter_indices_batching_dims": (False, "int_list")})
def _scatter(k: Check) -> Shape:
    ops = k.operands
    if len(ops) % 2 == 0:
        raise Problem(f"expects an odd number of operands, but has {len(ops)} operands")
    n = len(ops) // 2
    return infer(k, lambda: ops[0].shape if n == 1 else inf.tuple_of(_shapes(ops[:n])))


@rule("domain", operands=1, attributes={"domain": (True, "domain")}, infers_only=True)
def _domain(k: Check) -> Shape:
    return infer(k, lambda: k.operands[0].shape)


@rule("get-dimension-size", operands=1, attributes={"dimensions": (True, "int_list")}, reads=("dimensions",))
def _get_dimension_size(k: Check) -> Shape:
    if len(k.values["dimensions"]) != 1:
        raise Problem("get-dimension-size takes exactly one dimension")
    return infer(k, lambda: inf.get_dimension_size(k.operands[0].shape, k.values["dimensions"][0]))


@rule("set-dimension-size", operands=2, attributes={"dimensions": (True, "int_list")}, reads=("dimensions",))
def _set_dimension_size(k: Check) -> Shape:
    if len(k.values["dimensions"]) != 1:
        raise Problem("set-dimension-size takes exactly one dimension")
    return infer(k, lambda: inf.set_dimension_size(k.operands[0].shape, k.operands[1].shape,
                                                   k.values["dimensions"][0]))


# -- building instructions ------------------------------------------------------------------


class _Builder:
    """A computation being read (XLA's `HloComputation::Builder`)."""

    __slots__ = ("name", "instructions", "params", "table")

    def __init__(self, name: str):
        self.name = name
        self.instructions: list[HloInstruction] = []
        self.params: dict[int, HloInstruction] = {}
        self.table: dict[str, tuple[HloInstruction, int]] = {}


class Create:
    """What `CreateInstruction` gets: see `_opcodes`."""

    __slots__ = ("builder", "name", "shape", "opcode", "wrapped", "attrs", "allow_attributes", "preset",
                 "operands", "values", "spans", "loc")

    def __init__(self, builder, name, shape, opcode, wrapped, attrs, allow_attributes, preset, loc):
        self.builder = builder
        self.name = name
        self.shape: Shape | None = shape
        self.opcode: str = opcode
        self.wrapped: str | None = wrapped
        self.attrs: dict = attrs
        self.allow_attributes = allow_attributes
        self.preset = preset
        self.operands: list[HloInstruction] = list(preset) if preset is not None else []
        self.values: dict = {}
        self.spans: dict[str, tuple[int, int]] = {}
        self.loc = loc



def new_instruction(name: str, opcode: str, shape: Shape, operands: list) -> HloInstruction:
    """An instruction with no attributes yet, registered as a user of its operands."""
    instr = HloInstruction.__new__(HloInstruction)
    instr.name = name
    instr.opcode = opcode
    instr.shape = shape
    instr.operands = operands
    instr.users = []
    for op in operands:
        users = op.users
        if not users or users[-1] is not instr:
            users.append(instr)
    instr.computation = None
    instr.parameter_number = None
    instr.literal_text = None
    instr._cache = None
    instr._called = None
    instr._src = None
    instr._pos = None
    instr._raw_store = {}
    return instr


# -- readers for the opcodes that need the token parser's machinery --------------------------


def reader(*opcodes: str):
    def register(fn):
        for op in opcodes:
            READERS[op] = fn
        return fn

    return register


def read_standard(p, c):
    """Operands, then attributes, then the rule's check (XLA's usual CreateInstruction)."""
    r = RULES[c.opcode]
    operands_loc = p.i
    ops = p.operands(c, r.operands)
    loc = p.i
    try:
        attrs = r.attributes_for(ops) if r.attributes_for is not None else r.attributes
    except Problem as err:
        raise p.fail(str(err), loc) from None
    c.attrs.update(attrs)
    p.attributes(c.attrs, c.spans, c.allow_attributes, c.values)
    try:
        shape = r.check(Check(c.opcode, c.shape, ops, c.values))
    except Problem as err:
        raise p.fail(str(err), operands_loc if err.at_operands else None) from None
    return make(p, c, shape)


def make(p, c, shape: Shape, *, opcode: str | None = None, keep=None) -> HloInstruction:
    """Add the instruction to the computation being read, with the attributes read for it."""
    instr = new_instruction(c.name, opcode or c.opcode, shape, list(c.operands))
    raw: dict = {}
    pos: dict = {}
    text = p.text
    for key, span in sorted(c.spans.items(), key=lambda kv: kv[1]):
        if keep is not None and key not in keep:
            continue
        if c.attrs.get(key, (False, ""))[1] in CALLED_TYPES:
            if instr._called is None:
                instr._called = {}
            instr._called[key] = c.values[key]
            raw[key] = None
        else:
            raw[key] = text[span[0] : span[1]]
            pos[key] = span
    instr._raw_store = raw
    if pos:
        instr._pos = pos
        instr._src = (text, p.source)
    c.builder.instructions.append(instr)
    return instr


@reader("parameter")
def _read_parameter(p, c):
    from ._lexer import LPAREN, RPAREN

    p.expect(LPAREN, "expects '(' before parameter number")
    number = p.int64()
    loc = p.i
    if number < 0:
        raise p.fail("parameter number must be >= 0", loc)
    p.expect(RPAREN, "expects ')' after parameter number")
    p.attributes(c.attrs, c.spans, c.allow_attributes, c.values)
    p.check_new_parameter(c.builder.params, number, loc)
    instr = make(p, c, c.shape)
    instr.parameter_number = number
    c.builder.params[number] = instr
    return instr


@reader("constant")
def _read_constant(p, c):
    from ._lexer import LPAREN, RPAREN

    p.expect(LPAREN, "expects '(' before constant literal")
    first = p.i
    p.literal(c.shape)
    last = p.i
    p.expect(RPAREN, "expects ')' after constant literal")
    p.attributes(c.attrs, c.spans, c.allow_attributes, c.values)
    instr = make(p, c, c.shape)
    instr.literal_text = p.text[p.starts[first] : p.ends[last - 1]] if last > first else ""
    return instr


@reader("recv")
def _read_recv(p, c):
    p.operands(c, 1)
    c.attrs.update(channel_id=(False, "int64"), is_host_transfer=(False, "bool"))
    p.attributes(c.attrs, c.spans, c.allow_attributes, c.values)
    shape = c.shape
    if not shape.is_tuple or not shape.tuple_shapes:
        raise p.fail("recv must have a non-empty tuple shape")
    instr = make(p, c, Shape("tuple", tuple_shapes=(shape.tuple_shapes[0], Shape("u32"), Shape("token"))))
    p.channels[instr] = c.values.get("channel_id")
    return instr


@reader("send")
def _read_send(p, c):
    ops = p.operands(c, 2)
    c.attrs.update(channel_id=(False, "int64"), is_host_transfer=(False, "bool"))
    p.attributes(c.attrs, c.spans, c.allow_attributes, c.values)
    instr = make(p, c, Shape("tuple", tuple_shapes=(ops[0].shape, Shape("u32"), Shape("token"))))
    p.channels[instr] = c.values.get("channel_id")
    return instr


@reader("recv-done", "send-done")
def _read_done(p, c):
    ops = p.operands(c, 1)
    c.attrs.update(channel_id=(False, "int64"), is_host_transfer=(False, "bool"))
    values = p.attributes(c.attrs, c.spans, c.allow_attributes, c.values)
    if ops[0] in p.channels and p.channels[ops[0]] != values.get("channel_id"):
        raise p.fail(f"{c.opcode}'s channel_id must be its operand's ({p.channels[ops[0]]})")
    if c.opcode == "send-done":
        shape = Shape("token")
    else:
        operand = ops[0].shape
        if not operand.is_tuple or not operand.tuple_shapes:
            raise p.fail("recv-done's operand must be a recv (a tuple)")
        shape = Shape("tuple", tuple_shapes=(operand.tuple_shapes[0], Shape("token")))
    instr = make(p, c, shape)
    p.channels[instr] = values.get("channel_id")
    return instr


_ASYNC_OWN_ATTRS = frozenset(GENERIC_ATTRIBUTES) | {"async_execution_thread", "output_to_operand_aliasing"}
_ASYNC_SHARED_ATTRS = ("metadata", "origin", "backend_config", "frontend_attributes", "statistics")


@reader("async-start", "async-update", "async-done")
def _read_async(p, c):
    ops = p.operands(c)
    shape = c.shape
    state = p.async_state
    if c.opcode == "async-start":
        if not (shape.is_tuple and len(shape.tuple_shapes) >= 2 and shape.tuple_shapes[0].is_tuple):
            raise p.fail("AsyncStart expects the op shape to be in the form of ((async-operands), async-outputs, "
                         "state).")
    else:
        if len(ops) != 1 or ops[0].opcode not in ("async-start", "async-update"):
            raise p.fail("AsyncUpdate and AsyncDone expect a single async op as their operand.")
        if c.opcode == "async-update" and ops[0].shape != shape:
            raise p.fail("AsyncUpdate expects the op shape to be the same as the operand shape.")
    c.attrs["async_execution_thread"] = (False, "string")
    if c.opcode == "async-start":
        c.attrs["output_to_operand_aliasing"] = (False, "instruction_aliasing")
    wrapped_comp = None
    if c.wrapped is not None:
        if c.opcode == "async-start":
            wrapped_comp = _async_wrapped(p, c, shape)
        else:
            start_comp, _ = state[ops[0]]
            if start_comp.root.opcode != c.wrapped:
                raise p.fail(f"Expect async wrapped opcode to be {start_comp.root.opcode}, but got {c.wrapped}")
    else:
        c.attrs["calls"] = (c.opcode == "async-start", "computation")
    if not (c.wrapped is not None and c.opcode == "async-start"):
        p.attributes(c.attrs, c.spans, c.allow_attributes, c.values)
    values = c.values
    if c.opcode != "async-start":
        start_comp, thread = state[ops[0]]
        if "async_execution_thread" in values and values["async_execution_thread"] != thread:
            raise p.fail(f"Expect async_execution_thread to be {thread}, but got {values['async_execution_thread']}")
        if "calls" in values and values["calls"] is not start_comp:
            raise p.fail(f"Expect async_wrapped_computation to be {start_comp.name}, but got {values['calls'].name}")
        # Inherited from the async-start: XLA keeps neither.
        instr = make(p, c, shape, keep=set(c.spans) - {"calls", "async_execution_thread"})
        state[instr] = state[ops[0]]
        return instr
    thread = values.get("async_execution_thread", "main")
    if wrapped_comp is not None:
        own = _ASYNC_OWN_ATTRS.difference(_WRAPPED_OWNS.get(c.wrapped, ()))
        instr = make(p, c, shape, keep={k for k in c.spans if k in own})
        instr._called = {"calls": wrapped_comp}
        instr._raw_store = {"calls": None, **instr._raw_store}
        if thread != "main":
            wrapped_comp.execution_thread = thread
    else:
        instr = make(p, c, shape)
        wrapped_comp = values["calls"]
    state[instr] = (wrapped_comp, thread)
    return instr


# Async-start attributes that the wrapped op claims when its own rule allows them too.
_WRAPPED_OWNS = {"custom-call": ("output_to_operand_aliasing",), "fusion": ("output_to_operand_aliasing",)}


def _async_wrapped(p, c, shape: Shape) -> HloComputation:
    """The computation XLA builds for `op-start(...)`: one parameter per operand, the op as its root."""
    builder = _Builder("async_wrapped")
    params = []
    for k, op in enumerate(c.operands):
        param = new_instruction("async_param", "parameter", op.shape, [])
        param.parameter_number = k
        builder.instructions.append(param)
        builder.params[k] = param
        params.append(param)
    # The wrapped op reads the attribute list (XLA shares one attribute table between the two).
    inner = Create(builder, c.wrapped, shape.tuple_shapes[1], c.wrapped, None, c.attrs, c.allow_attributes,
                   params, c.loc)
    inner.spans = c.spans
    inner.values = c.values
    root = p.create(inner)
    own = {k for k in c.spans if k in _ASYNC_OWN_ATTRS and k not in _WRAPPED_OWNS.get(c.wrapped, ())}
    # The wrapped op keeps its own attributes and a copy of the shared ones.
    for key in list(root._raw_store):
        if key in own and key not in _ASYNC_SHARED_ATTRS:
            del root._raw_store[key]
            if root._pos:
                root._pos.pop(key, None)
    comp = p.build(builder, root, c.loc)
    p.computations.append(comp)
    return comp
