"""Readers for attribute values, one per value type of XLA's parser (its `AttrTy`).

Each reader consumes the value's tokens and raises the parser's failure with
XLA's wording where XLA's parser refuses the value; it returns what the
parser itself needs to know (computations, shapes, dimension lists, ...).
The graph keeps the value's text, and `_attributes` interprets it on demand.
"""

from __future__ import annotations

import re

from ._lexer import (
    ATTRNAME, COLON, COMMA, DECIMAL, DIMLABELS, DXD, EQUAL, IDENT, INT, KEYWORD, LBRACE, LEQ, LPAREN,
    LSQUARE, NEGINF, PAD, QUESTION, RBRACE, RPAREN, RSQUARE, STRING, int_value, unquote,
)
from ._lexer import IDENT_PATTERN, ONE_LINE_BRACKETED, PRINTED_STRING
from ._token_parser import (
    _FLOAT_MAX, _INT32_MAX, _INT32_MIN, PRINTED_VALUES, Parser, json_dict_end, printed_value, value_parser,
)

# Enumerations as XLA spells them. Case-insensitive ones (XLA's StringToEnum) are lower case here.
FUSION_KINDS = frozenset({"kLoop", "kInput", "kOutput", "kCustom"})
COMPARISON_DIRECTIONS = frozenset({"EQ", "NE", "GE", "GT", "LE", "LT"})
COMPARISON_TYPES = frozenset({"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"})
# `order=` of compare, written by jax 0.11.2's XLA in place of `type=` (XLA's Comparison::Order: kTotal, kPartial).
COMPARISON_ORDERS = frozenset({"TOTAL", "PARTIAL"})
FFT_TYPES = frozenset({"FFT", "IFFT", "RFFT", "IRFFT"})
PADDING_TYPES = frozenset({"PADDING_INVALID", "PADDING_VALID", "PADDING_SAME"})
DISTRIBUTIONS = frozenset({"rng_invalid", "rng_uniform", "rng_normal"})
RANDOM_ALGORITHMS = frozenset({"rng_default", "rng_three_fry", "rng_philox"})
PRECISIONS = frozenset({"default", "high", "highest"})
ALGORITHMS = frozenset({
    "unset", "dot_any_f8_any_f8_f32", "dot_any_f8_any_f8_f32_fast_accum", "dot_f16_f16_f16", "dot_f16_f16_f32",
    "dot_bf16_bf16_bf16", "dot_bf16_bf16_f32", "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32_x6", "dot_tf32_tf32_f32",
    "dot_tf32_tf32_f32_x3", "dot_f32_f32_f32", "dot_f64_f64_f64", "dot_bf16_bf16_f32_x9",
})
ACCURACY_MODES = frozenset({"default", "highest"})
SCHEDULES = frozenset({"schedule_none", "schedule_latest", "schedule_earliest"})
API_VERSIONS = frozenset({
    "api_version_unspecified", "api_version_original", "api_version_status_returning",
    "api_version_status_returning_unified", "api_version_typed_ffi",
})
GROUP_MODES = frozenset({"cross_replica", "cross_partition", "cross_replica_and_partition", "flattened_id"})
CONV_KINDS = frozenset({"fprop", "wgrad", "dgrad", "unset"})
PROFILE_TYPES = frozenset({0, 1, 2, 3})


def _ident(p: Parser, what: str) -> str:
    if not p.at(IDENT):
        raise p.fail(f"expects {what}")
    p.i += 1
    return p.texts[p.i - 1]


def _enum(p: Parser, what: str, allowed, error: str = "", lower: bool = False) -> str:
    v = _ident(p, what)
    if (v.lower() if lower else v) not in allowed:
        p.i -= 1
        raise p.fail(f"expects {what} but sees: {v}" + (f", error: {error}" if error else ""))
    return v


@value_parser("bool")
def _bool(p: Parser):
    return p.boolean()


@value_parser("int64")
def _int64(p: Parser):
    return p.int64()


@value_parser("int32")
def _int32(p: Parser):
    loc = p.i
    v = p.int64()
    if not _INT32_MIN <= v <= _INT32_MAX:
        raise p.fail("value out of range for int32_t", loc)
    return v


@value_parser("float")
def _float(p: Parser):
    loc = p.i
    v = p.double()
    if v > _FLOAT_MAX or v < -_FLOAT_MAX:
        raise p.fail("value out of range for float", loc)
    return v


@value_parser("string")
def _string(p: Parser):
    return p.string()


@value_parser("string_or_json")
def _string_or_json(p: Parser):
    if p.at(STRING):
        return p.string()
    if p.at(LBRACE):
        return p.json_dict()
    raise p.fail("expects a string or a JSON dict")


@value_parser("int_list")
def _int_list(p: Parser):
    return p.int_list(LBRACE, RBRACE, COMMA)


@value_parser("int_list_list")
def _int_list_list(p: Parser):
    return p.listing(LBRACE, RBRACE, COMMA, lambda: p.int_list(LBRACE, RBRACE, COMMA))


@value_parser("computation")
def computation(p: Parser):
    if p.at(LBRACE):
        return p.instruction_list("_")  # a nested, unnamed computation
    loc = p.i
    try:
        name = p.name()
    except Exception:
        raise p.fail("expects computation name", loc) from None
    entry = p.pool.get(name)
    if entry is None:
        raise p.fail(f"computation does not exist: {name}", loc)
    return entry[0]


@value_parser("computation_list")
def _computation_list(p: Parser):
    return tuple(p.listing(LBRACE, RBRACE, COMMA, lambda: computation(p)))


@value_parser("instruction_list")
def _instruction_list(p: Parser):
    p.expect(LBRACE, "expects '{' at the beginning of instruction name list")
    loc = p.i
    out = []
    table = p.scopes[-1].table
    while True:
        try:
            name = p.name()
        except Exception:
            raise p.fail("expects a instruction name", loc) from None
        entry = table.get(name)
        if entry is None:
            raise p.fail(f"instruction '{name}' is not defined")
        out.append(entry[0])
        if not p.eat(COMMA):
            break
    p.expect(RBRACE, "expects '}' at the end of instruction name list")
    return out


@value_parser("fft_type")
def _fft_type(p: Parser):
    return _enum(p, "fft type", FFT_TYPES)


@value_parser("padding_type")
def _padding_type(p: Parser):
    return _enum(p, "padding type", PADDING_TYPES)


@value_parser("comparison_direction")
def _direction(p: Parser):
    return _enum(p, "comparison direction", COMPARISON_DIRECTIONS)


@value_parser("comparison_type")
def _comparison_type(p: Parser):
    return _enum(p, "comparison type", COMPARISON_TYPES)


@value_parser("comparison_order")
def _comparison_order(p: Parser):
    return _enum(p, "comparison order", COMPARISON_ORDERS)


@value_parser("fusion_kind")
def _fusion_kind(p: Parser):
    return _enum(p, "fusion kind", FUSION_KINDS)


@value_parser("distribution")
def _distribution(p: Parser):
    return _enum(p, "random distribution", DISTRIBUTIONS, "Unknown distribution", lower=True)


@value_parser("random_algorithm")
def _random_algorithm(p: Parser):
    return _enum(p, "random algorithm", RANDOM_ALGORITHMS, "Unknown algorithm", lower=True)


@value_parser("precision_algorithm")
def _algorithm(p: Parser):
    return _enum(p, "algorithm", ALGORITHMS, "Unknown algorithm", lower=True)


@value_parser("precision_list")
def _precision_list(p: Parser):
    return p.listing(LBRACE, RBRACE, COMMA, lambda: _enum(p, "precision", PRECISIONS, "Unknown precision", lower=True))


@value_parser("result_accuracy_type")
def _accuracy_type(p: Parser):
    return _enum(p, "ResultAccuracy type", ACCURACY_MODES, "Unknown accuracy mode", lower=True)


@value_parser("custom_call_schedule")
def _schedule(p: Parser):
    return _enum(p, "custom-call schedule", SCHEDULES, "Unknown schedule", lower=True)


@value_parser("custom_call_api_version")
def _api_version(p: Parser):
    return _enum(p, "custom-call API version", API_VERSIONS, "Unknown API version", lower=True)


@value_parser("mode")
def _mode(p: Parser):
    return _enum(p, "collective op group mode", GROUP_MODES, "Invalid collective op group mode")


@value_parser("conv_kind")
def _conv_kind(p: Parser):
    return _enum(p, "convolution kind", CONV_KINDS)


@value_parser("enum")
def _any_enum(p: Parser):
    if not p.at(IDENT):
        raise p.fail("expects an enumeration value")
    p.i += 1
    return p.texts[p.i - 1]


@value_parser("result_accuracy")
def _result_accuracy(p: Parser):
    p.expect(LBRACE, "expected '{' to start result precision list")
    name = p.attribute_name()
    if name == "mode":
        value = ("mode", _accuracy_type(p))
    elif name == "tolerance":
        p.expect(LBRACE, "expected '{' to start result accuracy list")
        if not p.at(RBRACE):
            while True:
                try:
                    key = p.attribute_name()
                except Exception:
                    raise p.fail("expects string for result_accuracy tolerance type") from None
                if key not in ("ulps", "rtol", "atol"):
                    raise p.fail(f"invalid attribute name: {key}")
                if p.kind() in (DECIMAL, INT, NEGINF) or p.at_keyword("inf"):
                    p.double()
                if not p.eat(COMMA):
                    break
        p.expect(RBRACE, "expects '}' at the end of result precision")
        value = ("tolerance", None)
    else:
        raise p.fail(f"invalid attribute name: {name}")
    p.expect(RBRACE, "expected '}' to end result_accuracy")
    return value


@value_parser("window")
def window(p: Parser, outer: bool = True):
    loc = p.i
    if outer:
        p.expect(LBRACE, "expected '{' to start window attribute")
    fields: dict[str, list] = {}
    while not (p.at(RBRACE) if outer else p.i >= len(p.kinds)):
        attr_loc = p.i
        try:
            key = p.attribute_name()
        except Exception:
            raise p.fail("expects sub-attributes in window", attr_loc) from None
        if key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            if key in fields:
                raise p.fail(f"sub-attribute '{key}=' already exists")
            fields[key] = dxd(p, key)
        elif key == "pad":
            if "pad" in fields:
                raise p.fail("sub-attribute 'pad=' already exists")
            if not p.at(PAD):
                raise p.fail("expects window pad pattern, e.g., '0_0x3_3'")
            pads = []
            for chunk in p.texts[p.i].split("x"):
                parts = chunk.split("_")
                if len(parts) != 2:
                    raise p.fail("expects padding_low and padding_high separated by '_'")
                pads.append((int(parts[0]), int(parts[1])))
            p.i += 1
            fields["pad"] = pads
        else:
            raise p.fail(f"unexpected attribute name: {key}", attr_loc)
    size = fields.get("size", [])
    for key in ("stride", "lhs_dilate", "rhs_dilate", "pad"):
        if key in fields and len(fields[key]) != len(size):
            raise p.fail(f"expects '{key}=' has the same size as 'size='", loc)
    if outer:
        p.expect(RBRACE, "expected '}' to end window attribute")
    return fields


def dxd(p: Parser, name: str) -> list[int]:
    if p.at(INT):
        return [p.int64()]
    if p.at(DXD):
        parts = p.texts[p.i].split("x")
        p.i += 1
        values = []
        for part in parts:
            v = int(part)
            if v >= 1 << 63:
                raise p.fail(f"expects sub-attribute '{name}=ixj...'", p.i - 1)
            values.append(v)
        return values
    raise p.fail("expects token type kInt or kDxD")


@value_parser("conv_dnums")
def _dim_labels(p: Parser):
    if not p.at(DIMLABELS):
        raise p.fail("expects dim labels pattern, e.g., 'bf0_0io->0bf'")
    text = p.texts[p.i]
    lhs_rhs, out = text.split("->", 1)
    lhs, rhs = lhs_rhs.split("_", 1)
    counts = []
    for labels, fixed, what in ((lhs, "bf", "lhs"), (rhs, "io", "rhs"), (out, "bf", "output")):
        chars = [c for c in labels if c != "?"]
        if len(chars) != len(set(chars)):
            raise p.fail(f"expects unique {what} dimension numbers, but sees {labels}")
        for c in labels:
            if c == "?" or c in fixed:
                continue
            if not ("0" <= c < chr(ord("0") + len(labels))):
                raise p.fail(f"expects [0-{len(labels) - 1}{fixed}?] in {what} dimension numbers")
        counts.append(sum(1 for c in labels if c not in fixed and c != "?"))
    if len(set(counts)) != 1:
        raise p.fail(
            "input, kernel, and output must have same number of spatial dimensions, but got "
            f"{counts[0]}, {counts[1]}, {counts[2]}, respectively."
        )
    for labels, fixed, what in ((lhs, "bf", "lhs"), (rhs, "io", "rhs"), (out, "bf", "output")):
        spatial = sorted(c for c in labels if c not in fixed and c != "?")
        if spatial != [str(k) for k in range(len(spatial))]:
            raise p.fail(f"{what} dimension numbers {labels} do not name spatial dimensions 0 to {len(spatial) - 1}")
        for c in fixed:
            if c not in labels:
                raise p.fail(f"{what} dimension numbers {labels} have no '{c}' dimension")
    p.i += 1
    return text


@value_parser("slice_ranges")
def _slice(p: Parser):
    p.expect(LBRACE, "expects '{' to start ranges")
    out = []
    if p.at(RBRACE):
        p.i += 1
        return out
    while True:
        loc = p.i
        r = p.int_list(LSQUARE, RSQUARE, COLON)
        if len(r) not in (2, 3):
            raise p.fail(f"expects [start:limit:step] or [start:limit], but sees {len(r)} elements.", loc)
        out.append((r[0], r[1], r[2] if len(r) == 3 else 1))
        if not p.eat(COMMA):
            break
    p.expect(RBRACE, "expects '}' to end ranges")
    return out


@value_parser("padding_config")
def _padding(p: Parser):
    if not p.at(PAD):
        raise p.fail("expects padding config, e.g., '0_0_0x3_3_1'")
    out = []
    for chunk in p.texts[p.i].split("x"):
        parts = chunk.split("_")
        if len(parts) not in (2, 3):
            raise p.fail("expects padding config pattern like 'low_high_interior' or 'low_high'")
        values = [int(v) for v in parts]
        out.append((values[0], values[1], values[2] if len(values) == 3 else 0))
    p.i += 1
    return out


@value_parser("metadata")
def metadata(p: Parser):
    return p.sub_attributes(_METADATA)


_METADATA = {
    "op_type": (False, "string"), "op_name": (False, "string"), "source_file": (False, "string"),
    "source_line": (False, "int32"), "source_end_line": (False, "int32"), "source_column": (False, "int32"),
    "source_end_column": (False, "int32"), "profile_type": (False, "profile_types"),
    "deduplicated_name": (False, "string"), "scheduling_name": (False, "string"), "stack_frame_id": (False, "int32"),
    "metadata_payload": (False, "string"),
}


@value_parser("profile_types")
def _profile_types(p: Parser):
    loc = p.i
    values = p.int_list(LBRACE, RBRACE, COMMA)
    if any(v not in PROFILE_TYPES for v in values):
        raise p.fail("profile_type holds a value that is not a ProfileType", loc)
    return values


def single_or_list_metadata(p: Parser) -> None:
    if p.at(LBRACE) and p.lookahead() == LBRACE:
        p.i += 1
        if not p.at(RBRACE):
            while True:
                metadata(p)
                if not p.eat(COMMA):
                    break
        p.expect(RBRACE, "expected '}' to end metadata list")
        return
    metadata(p)


@value_parser("frontend_attributes")
def _frontend_attributes(p: Parser):
    p.expect(LBRACE, "expected '{' to start frontend attributes")
    out = {}
    if not p.at(RBRACE):
        while True:
            key = p.attribute_name()
            if p.at(STRING):
                out[key] = p.string()
            elif p.at(LBRACE):
                out[key] = p.json_dict()
            else:
                raise p.fail(f"frontend attribute '{key}' takes a string or a JSON dict")
            if not p.eat(COMMA):
                break
    p.expect(RBRACE, "expects '}' at the end of frontend attributes")
    return out


@value_parser("statistics")
def _statistics(p: Parser):
    p.expect(LBRACE, "expected '{' to start statistics")
    if not p.at(RBRACE):
        p.attribute_name()
        if not p.at(INT):
            raise p.fail("statistics start with visualizing_index=<integer>")
        p.i += 1
        while p.eat(COMMA):
            p.attribute_name()
            if p.kind() not in (DECIMAL, INT):
                raise p.fail("a statistic takes a number")
            p.i += 1
    p.expect(RBRACE, "expects '}' at the end of statistics")
    return True


@value_parser("parameter_replication")
def _parameter_replication(p: Parser):
    p.expect(LBRACE, "expected '{' to start parameter_replication attribute")
    out = []
    if not p.at(RBRACE):
        while True:
            if not (p.at_keyword("true") or p.at_keyword("false")):
                raise p.fail("parameter_replication takes true or false")
            out.append(p.texts[p.i] == "true")
            p.i += 1
            if not p.eat(COMMA):
                break
    p.expect(RBRACE, "expected '}' to end parameter_replication attribute")
    return out


@value_parser("bool_list_or_bool")
def _bool_list_or_bool(p: Parser):
    if p.at_keyword("true") or p.at_keyword("false"):
        return [p.boolean()]
    if not p.at(LBRACE):
        raise p.fail("Expected list of booleans or true/false value")
    p.i += 1
    out = []
    if not p.at(RBRACE):
        while True:
            out.append(p.boolean())
            if not p.eat(COMMA):
                break
    p.expect(RBRACE, "expected '}' to end boolean list attribute")
    return out


@value_parser("shape")
def _shape(p: Parser):
    return p.shape()


@value_parser("shape_list")
def _shape_list(p: Parser):
    return p.listing(LBRACE, RBRACE, COMMA, p.shape)


@value_parser("literal")
def _literal(p: Parser):
    p.tuple_literal_with_shape()
    return True


def shape_index(p: Parser) -> tuple[int, ...]:
    p.expect(LBRACE, "Expects '{' at the start of ShapeIndex")
    out = []
    while not p.at(RBRACE):
        out.append(p.int64())
        if not p.eat(COMMA):
            break
    p.expect(RBRACE, "Expects '}' at the end of ShapeIndex")
    return tuple(out)


@value_parser("aliasing")
def _aliasing(p: Parser):
    p.expect(LBRACE, "Expects '{' at the start of aliasing description")
    out = []
    message = ("Expected format: <output_shape_index>: (<input_param>, <input_param_shape_index>) OR "
               "<output_shape_index>: <input_param>")
    while not p.at(RBRACE):
        out_index = shape_index(p)
        p.expect(COLON, message)
        p.expect(LPAREN, message)
        param = p.int64()
        p.expect(COMMA, message)
        param_index = shape_index(p)
        kind = "may-alias"
        if p.eat(COMMA):
            kind = p.name()
            if kind not in ("must-alias", "may-alias"):
                raise p.fail("Unexpected aliasing kind; expected SYSTEM or USER")
        out.append((out_index, param, param_index, kind))
        p.expect(RPAREN, message)
        if not p.eat(COMMA):
            break
    p.expect(RBRACE, "Expects '}' at the end of aliasing description")
    return out


@value_parser("buffer_donor")
def _buffer_donor(p: Parser):
    p.expect(LBRACE, "Expects '{' at the start of buffer donor description")
    out = []
    message = "Expected format: (<input_param>, <input_param_shape_index>)"
    while not p.at(RBRACE):
        p.expect(LPAREN, message)
        param = p.int64()
        p.expect(COMMA, message)
        index = shape_index(p)
        p.expect(RPAREN, message)
        out.append((param, index))
        if not p.eat(COMMA):
            break
    p.expect(RBRACE, "Expects '}' at the end of buffer donor description")
    return out


@value_parser("instruction_aliasing")
def _instruction_aliasing(p: Parser):
    p.expect(LBRACE, "Expects '{' at the start of instruction aliasing description")
    out = []
    message = "Expected format: <output_shape_index>: (<operand_index>, <operand_shape_index>)"
    while not p.at(RBRACE):
        out_index = shape_index(p)
        p.expect(COLON, message)
        p.expect(LPAREN, message)
        operand = p.int64()
        p.expect(COMMA, message)
        operand_index = shape_index(p)
        out.append((out_index, operand, operand_index))
        p.expect(RPAREN, message)
        if not p.eat(COMMA):
            break
    p.expect(RBRACE, "Expects '}' at the end of instruction aliasing description")
    return out


@value_parser("computation_layout")
def _computation_layout(p: Parser):
    p.expect(LBRACE, "Expects '{' at the start of aliasing description")
    p.expect(LPAREN, "Expects ( before parameter shape list")
    params = []
    while not p.at(RPAREN):
        params.append(p.shape())
        if p.at(RPAREN):
            break
        p.expect(COMMA, "Expects , between parameter shapes")
    p.expect(RPAREN, "Expects ) at end of parameter shape list")
    p.expect(ARROW_KIND, "Expects -> before result shape")
    result = p.shape()
    p.expect(RBRACE, "Expects '}' at the end of computation layouts")
    return params, result


from ._lexer import ARROW as ARROW_KIND  # noqa: E402


# -- sharding ------------------------------------------------------------------------


@value_parser("sharding")
def sharding(p: Parser):
    p.expect(LBRACE, "expected '{' to start sharding attribute")
    if not (p.at(LBRACE) or p.at(RBRACE)):
        _single_sharding(p, brace_eaten=True)
        return True
    if not p.at(RBRACE):
        while True:
            _single_sharding(p, brace_eaten=False)
            if not p.eat(COMMA):
                break
    p.expect(RBRACE, "expected '}' to end sharding attribute")
    return True


def _tile_assignment(p: Parser, allow_devices: bool) -> tuple[list[int], list[int], list[int], list[int]]:
    p.expect(LSQUARE, "expected '[' to start sharding devices shape")
    dims = []
    while True:
        dims.append(p.int64())
        if not p.eat(COMMA):
            break
    p.expect(RSQUARE, "expected ']' to end sharding devices shape")
    reshape: list[int] = []
    perm: list[int] = []
    devices: list[int] = []
    if p.eat(LEQ):
        reshape, perm = _iota(p)
    else:
        if not allow_devices:
            raise p.fail("Caller expected iota tile assignment when parsing, which should not have any manual "
                         "device entries.")
        while True:
            devices.append(p.int64())
            if not p.eat(COMMA):
                break
    return dims, reshape, perm, devices


def _iota(p: Parser) -> tuple[list[int], list[int]]:
    p.expect(LSQUARE, "expected '[' to start sharding iota_reshape_dims")
    reshape = []
    while True:
        reshape.append(p.int64())
        if not p.eat(COMMA):
            break
    p.expect(RSQUARE, "expected ']' to end sharding iota_reshape_dims")
    if len(reshape) == 1:
        return reshape, [0]
    if not p.at_ident("T"):
        raise p.fail("expected 'T(' to start sharding devices iota_transpose_perm")
    p.i += 1
    p.expect(LPAREN, "expected 'T(' to start sharding devices iota_transpose_perm")
    perm = []
    while True:
        d = p.int64()
        if d >= len(reshape):
            p.i -= 1
            raise p.fail(f"Out of range iota minor_to_major value {d}, expecting value in range "
                         f"[0, {len(reshape)})")
        perm.append(d)
        if not p.eat(COMMA):
            break
    p.expect(RPAREN, "expected ')' to end sharding devices iota_transpose_perm")
    return reshape, perm


def _single_sharding(p: Parser, brace_eaten: bool) -> None:
    if not brace_eaten:
        p.expect(LBRACE, "expected '{' to start sharding attribute")
    if p.at(IDENT) and p.texts[p.i] in ("mesh", "maximal_mesh"):
        _named_sharding(p)
        return
    loc = p.i
    flags = set()
    devices: list[int] = []
    dims: list[int] = []
    reshape: list[int] = []
    perm: list[int] = []
    subgroups: list[str] = []
    while not p.at(RBRACE):
        k = p.kind()
        t = p.texts[p.i] if p.i < len(p.kinds) else ""
        if k == KEYWORD and t in ("maximal", "replicated", "manual", "unknown", "unreduced", "last_tile_dim_replicate"):
            flags.add(t)
            p.i += 1
        elif k == ATTRNAME:
            p.i += 1
            if t == "device":
                if not p.at(INT):
                    raise p.fail("device= attribute must be an integer")
                devices = [p.int64()]
            elif t == "devices":
                dims, reshape, perm, devices = _tile_assignment(p, allow_devices=True)
            elif t == "metadata":
                single_or_list_metadata(p)
            elif t == "last_tile_dims":
                p.expect(LBRACE, "expected '{' to start sharding type list")
                if not p.at(RBRACE):
                    while True:
                        if not (p.kind() == KEYWORD and p.texts[p.i] in ("maximal", "replicated", "manual", "unreduced")):
                            raise p.fail("expected a sharding type")
                        subgroups.append(p.texts[p.i])
                        p.i += 1
                        if not p.eat(COMMA):
                            break
                p.expect(RBRACE, "expected '}' to end sharding type list")
            else:
                p.i -= 1
                raise p.fail("unknown attribute in sharding: expected device=, devices= metadata= or last_tile_dims= ")
        elif k == KEYWORD and t in ("shard_as", "shard_like"):
            p.i += 1
            p.int64()
        else:
            if p.i >= len(p.kinds):
                raise p.fail("expected '}' to end sharding attribute")
            raise p.fail("unexpected token")
    if "replicated" in flags:
        if devices:
            raise p.fail("replicated shardings should not have any devices assigned", loc)
    elif "maximal" in flags:
        if len(devices) != 1:
            raise p.fail("maximal shardings should have exactly one device assigned", loc)
    elif "manual" in flags or "unknown" in flags or "unreduced" in flags:
        for flag in ("manual", "unknown", "unreduced"):
            if flag in flags:
                if devices:
                    raise p.fail(f"{flag} shardings should not have any devices assigned", loc)
                break
    else:
        if not dims:
            raise p.fail("non-maximal shardings must have a tile assignment list including dimensions", loc)
        if len(perm) != len(reshape):
            raise p.fail(f"iota_transpose_perm should have the same rank as iota_reshape_dims : expected "
                         f"{len(reshape)}, saw {len(perm)}.", loc)
        if "last_tile_dim_replicate" in flags and subgroups:
            raise p.fail("last_tile_dim_replicate together with last_tile_dims", loc)
        if not reshape:
            if len(devices) <= 1:
                raise p.fail("non-maximal shardings must have more than one device assigned", loc)
            count = 1
            for d in dims:
                count *= d
            if count != len(devices):
                raise p.fail(f"sharding device count {len(devices)} does not match the tile assignment size {count}",
                             loc)
        else:
            count_dims = 1
            for d in dims:
                count_dims *= d
            count_reshape = 1
            for d in reshape:
                count_reshape *= d
            if count_dims != count_reshape or sorted(perm) != list(range(len(reshape))):
                raise p.fail("the iota tile assignment does not match its dimensions", loc)
    p.i += 1  # '}'


def _mesh(p: Parser) -> dict:
    kind = p.texts[p.i]
    p.i += 1
    if kind == "maximal_mesh":
        p.expect(LSQUARE, "expected '[' after maximal_mesh")
        if not (p.at(ATTRNAME) and p.texts[p.i] == "device_id"):
            raise p.fail("expected device_id= attribute in maximal_mesh")
        p.i += 1
        p.int64()
        p.expect(RSQUARE, "expected ']' to end maximal_mesh")
        return {"maximal": True, "axes": []}
    p.expect(LSQUARE, "expected '[' after mesh")
    axes: list[tuple[str, int]] = []
    if not p.at(RSQUARE):
        while True:
            name = p.string()
            p.expect(EQUAL, "expects '=' after axis name")
            size = p.int64()
            axes.append((name, size))
            if not p.eat(COMMA):
                break
    p.expect(RSQUARE, "expected ']' to end mesh axes")
    if not axes:
        return {"maximal": False, "axes": []}
    if p.eat(COMMA):
        if p.at(ATTRNAME) and p.texts[p.i] == "device_ids":
            p.i += 1
            p.expect(LPAREN, "expected '(' for device_ids")
            if p.at(LSQUARE):
                _iota(p)
                p.expect(RPAREN, "expected ')' to end device_ids")
            else:
                devices = []
                if not p.at(RPAREN):
                    while True:
                        devices.append(p.int64())
                        if not p.eat(COMMA):
                            break
                p.expect(RPAREN, "expected ')' to end device_ids")
                count = 1
                for _, size in axes:
                    count *= size
                if len(devices) != count:
                    raise p.fail(f"Expected {count} device_ids based on mesh axes, but got {len(devices)}")
        # (XLA eats the comma even when no device_ids follow.)
    return {"maximal": False, "axes": axes}


def _axis_ref(p: Parser, mesh: dict) -> None:
    loc = p.i
    name = p.string()
    names = [n for n, _ in mesh["axes"]]
    if name in names:
        index = names.index(name)
    else:
        try:
            index = int(name.strip())
        except ValueError:
            raise p.fail(f"axis '{name}' is not a valid axis name or index in the mesh", loc) from None
    if not 0 <= index < len(names):
        raise p.fail(f"axis index {index} is out of bounds for the mesh, which has {len(names)} axes", loc)
    if p.eat(COLON):
        p.expect(LPAREN, "expected '(' before pre_size in sub axis")
        p.int64()
        p.expect(RPAREN, "expected ')' after pre_size in sub axis")
        p.int64()


def _axis_refs(p: Parser, mesh: dict) -> None:
    p.listing(LBRACE, RBRACE, COMMA, lambda: _axis_ref(p, mesh))


def _named_sharding(p: Parser) -> None:
    mesh = _mesh(p)

    def metadata_if_present():
        if p.eat(COMMA):
            if not (p.at(ATTRNAME) and p.texts[p.i] == "metadata"):
                raise p.fail("expected metadata=")
            p.i += 1
            single_or_list_metadata(p)

    if mesh["maximal"]:
        metadata_if_present()
        p.expect(RBRACE, "expected '}' to end sharding attribute")
        return
    p.eat(COMMA)
    for word in ("replicated", "unreduced", "manual"):
        if p.at_keyword(word):
            p.i += 1
            metadata_if_present()
            p.expect(RBRACE, "expected '}' to end sharding attribute")
            return
    seen_question = [False]

    def dimension_item():
        if seen_question[0]:
            raise p.fail("Saw axis ref after '?'")
        if p.eat(QUESTION):
            seen_question[0] = True
            return
        _axis_ref(p, mesh)

    def dimension():
        seen_question[0] = False
        p.listing(LBRACE, RBRACE, COMMA, dimension_item)

    p.listing(LSQUARE, RSQUARE, COMMA, dimension)
    while not p.at(RBRACE):
        p.expect(COMMA, "expected ',' before next attribute")
        key = p.attribute_name()
        if key in ("replicated", "unreduced", "manual"):
            _axis_refs(p, mesh)
        elif key == "metadata":
            single_or_list_metadata(p)
        else:
            raise p.fail("unknown attribute in named sharding: expected replicated, unreduced, manual or metadata")
    p.expect(RBRACE, "expected '}' to end sharding attribute")


@value_parser("collective_device_list")
def _device_list(p: Parser):
    if p.at(LBRACE):
        return ("groups", p.listing(LBRACE, RBRACE, COMMA, lambda: p.int_list(LBRACE, RBRACE, COMMA)))
    if p.at(IDENT) and p.texts[p.i] in ("mesh", "maximal_mesh"):
        mesh = _mesh(p)
        _axis_refs(p, mesh)
        return ("mesh", None)
    loc = p.i
    dims, reshape, perm, _ = _tile_assignment(p, allow_devices=False)
    if len(dims) != 2:
        raise p.fail(f"expected the iota replica groups to have 2 dimensions, got {len(dims)}", loc)
    return ("iota", (dims, reshape, perm))


@value_parser("domain")
def _domain(p: Parser):
    values = p.sub_attributes({"kind": (True, "string"), "entry": (True, "sharding"), "exit": (True, "sharding")})
    if values["kind"] != "sharding":
        raise p.fail(f"unsupported domain kind: {values['kind']}")
    return values


# -- original values ------------------------------------------------------------------


def _original_array(p: Parser) -> None:
    p.expect(LBRACE, "Expects '{'")
    if p.at(STRING):
        p.string()
        if p.at(LBRACE):
            shape_index(p)
    p.expect(RBRACE, "Expects '} at end of OriginalArray'")


@value_parser("original_value")
def _original_value(p: Parser):
    p.expect(LBRACE, "Expects '{' to start original value")
    if p.eat(LSQUARE):
        if not p.at_ident("synthetic_call"):
            raise p.fail("Expects 'synthetic_call' after '[' for a synthetic_call value.")
        p.i += 1
        p.expect(RSQUARE, "Expects ']' to end '[synthetic_call]'")
        p.expect(RBRACE, "Expects '}' to end original value")
        return True
    depth = 0
    while not p.at(RBRACE):
        k = p.kind()
        if k == LPAREN:
            depth += 1
            p.i += 1
        elif k == RPAREN:
            if depth == 0:
                raise p.fail("unbalanced ')' in original value")
            depth -= 1
            p.i += 1
        elif k == COMMA:
            if depth == 0:
                raise p.fail("',' outside a tuple in original value")
            p.i += 1
        elif k == LBRACE:
            _original_array(p)
        else:
            raise p.fail("Expects '[synthetic]' or a tuple tree of original arrays in original_value field.")
    p.i += 1
    return True


@value_parser("original_value_recovery_table")
def _recovery_table(p: Parser):
    p.expect(LBRACE, "Expects '{'")
    message = "Expected format: <original_array>: <original_array>, <HloModule>"
    while not p.at(RBRACE):
        if p.i >= len(p.kinds):
            raise p.fail("Expects '}'")
        _original_array(p)
        p.expect(COLON, message)
        _original_array(p)
        if p.at(COMMA):
            p.i += 1
            loc = p.i
            text = p.string()
            try:
                parse_recovery_module(text)
            except Exception:
                raise p.fail("the recovery module does not parse", loc) from None
    p.i += 1
    return True


def parse_recovery_module(text: str) -> None:
    """Read the module of a recovery table entry as XLA's parser does (unverified); raises if it cannot."""
    Parser(text, "<recovery module>").run()


@value_parser("sparsity_config")
def _sparsity(p: Parser):
    p.expect(LBRACE, "expected '{' to start SparsityConfig")
    if not p.at(RBRACE):
        while True:
            key = p.attribute_name()
            if key not in ("lhs", "rhs"):
                raise p.fail("unknown attribute")
            p.expect(LBRACE, "expected '{' to start TensorSparsityConfig")
            if not p.at(RBRACE):
                while True:
                    sub = p.attribute_name()
                    if sub == "sparsity":
                        values = dxd(p, "sparsity")
                        if len(values) != 2:
                            raise p.fail("expects 'num_non_zero:block_size'")
                    elif sub in ("dimension", "stride"):
                        p.int64()
                    else:
                        raise p.fail("unknown attribute")
                    if p.at(RBRACE):
                        break
            p.expect(RBRACE, "expects '}' at the end of TensorSparsityConfig")
            if p.at(RBRACE):
                break
    p.expect(RBRACE, "expects '}' at the end of SparsityConfig")
    return True


# -- the forms XLA prints ------------------------------------------------------------------------------------
# For the fast path (`_fastpath`), which recognises these forms in a line and reads the values from their text;
# any other text of a value is read by the readers above. Each form is a subset of what its reader accepts (a
# form marked `checked` is not, and its function raises ValueError where the reader would refuse).

_INT = r"-?[0-9]{1,18}"  # within int64 whatever the digits
_INT32 = r"-?[0-9]{1,9}"  # within int32 whatever the digits
_SEP = r"[ \t]*,[ \t]*"
_SEPARATOR = re.compile(_SEP)
_REF = rf"%?{IDENT_PATTERN}"


def _listed(item: str, empty: bool = True) -> str:
    """A braced list of `item`s, as the readers' `listing` reads one (none at all only if `empty`)."""
    items = rf"{item}(?:{_SEP}{item})*"
    return rf"\{{[ \t]*{f'(?:{items})?' if empty else items}[ \t]*\}}"


def printed_items(text: str) -> list[str]:
    """The items of a braced list in a form `_listed` admits."""
    inner = text[1:-1].strip(" \t")
    return _SEPARATOR.split(inner) if inner else []


def _one_of(values) -> str:
    return "|".join(sorted(map(str, values), key=lambda v: (-len(v), v)))  # the longest first: none a prefix


def _printed_string_or_json(text: str) -> str:
    if text[0] == '"':
        return unquote(text)
    if json_dict_end(text, 0) != len(text):
        raise ValueError("not a JSON dict as XLA reads one")
    return text


printed_value("int64", _INT, int_value)
printed_value("int32", _INT32, int)
printed_value("bool", "true|false", lambda text: text == "true")
printed_value("string", PRINTED_STRING, unquote)
printed_value("int_list", _listed(_INT), lambda text: [int_value(v) for v in printed_items(text)])
printed_value("int_list_list", _listed(_listed(_INT)))
# Names: the fast path resolves them in its own tables.
printed_value("computation", _REF)
printed_value("computation_list", _listed(_REF))
printed_value("instruction_list", _listed(_REF, empty=False))
printed_value("string_or_json", rf"{PRINTED_STRING}|\{{{ONE_LINE_BRACKETED}\}}", _printed_string_or_json, checked=True)
for _kind, _allowed in (("fusion_kind", FUSION_KINDS), ("comparison_direction", COMPARISON_DIRECTIONS),
                       ("comparison_type", COMPARISON_TYPES), ("comparison_order", COMPARISON_ORDERS),
                       ("fft_type", FFT_TYPES), ("padding_type", PADDING_TYPES)):
    printed_value(_kind, _one_of(_allowed), str)
printed_value("profile_types", rf"\{{(?:(?:{_one_of(PROFILE_TYPES)})(?:,(?:{_one_of(PROFILE_TYPES)}))*)?\}}")
# Metadata: its sub-attributes in the order XLA prints them, each at most once (as XLA requires), blank-separated.
printed_value("metadata", r"\{[ \t]*" + "".join(
    rf"(?:{key}=(?:{PRINTED_VALUES[kind][0]})[ \t]*)?" for key, (_, kind) in _METADATA.items()
) + r"\}")
# An entry computation layout: `{(shape, ...)->shape}`, tuple elements after `/*index=N*/` as XLA's printer writes
# them; each array shape taken as far as it reaches (`layout_shape_texts`), then read as a shape (the fast path
# gives up on one the shape reader refuses).
_LAYOUT_SHAPE = r"[a-z][a-z0-9]*\[[0-9,<=?]*\](?:\{[0-9,]*(?::[^{}\n]*)?\})?"
_INDEX_COMMENT = r"(?:/\*index=[0-9]+\*/)?"
_LAYOUT_ITEM = (
    rf"{_INDEX_COMMENT}({_LAYOUT_SHAPE}|\((?:{_LAYOUT_SHAPE}(?:,[ \t]*{_INDEX_COMMENT}{_LAYOUT_SHAPE})*)?\))"
)
_LAYOUT_ITEMS = re.compile(_LAYOUT_ITEM)
printed_value("computation_layout", rf"\{{\((?:{_LAYOUT_ITEM}(?:,[ \t]*{_LAYOUT_ITEM})*)?\)->{_LAYOUT_ITEM}\}}")


def layout_shape_texts(text: str) -> list[str]:
    """The texts of the parameter shapes, then of the result shape, of a computation layout in its printed form."""
    return _LAYOUT_ITEMS.findall(text, 2)
