"""Typed values of HLO attributes, parsed on demand from their raw text.

The parser stores every attribute as the verbatim text of its value. The first
time someone reads `instruction.attributes[name]`, the text is interpreted by
the rule registered for that attribute name here; attributes without a rule
come back as their raw text (stripped), so nothing XLA adds is ever rejected.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from ._lexer import quote, unquote
from ._value_lexer import PNAME, PUNCT, STRING, WORD, DIMLABELS, Tokens

# ---------------------------------------------------------------------------
# Typed values


@dataclass(frozen=True, slots=True)
class WindowDimension:
    size: int = 1
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    base_dilation: int = 1  # lhs_dilate
    window_dilation: int = 1  # rhs_dilate
    window_reversal: bool = False


@dataclass(frozen=True, slots=True)
class Window:
    """A `window={size=3x3 stride=2x2 pad=1_1x1_1 ...}` attribute."""

    dimensions: tuple[WindowDimension, ...]

    def __str__(self) -> str:
        dims = self.dimensions
        if not dims:
            return "{}"
        parts = ["size=" + "x".join(str(d.size) for d in dims)]
        if any(d.stride != 1 for d in dims):
            parts.append("stride=" + "x".join(str(d.stride) for d in dims))
        if any(d.padding_low or d.padding_high for d in dims):
            parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in dims))
        if any(d.base_dilation != 1 for d in dims):
            parts.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in dims))
        if any(d.window_dilation != 1 for d in dims):
            parts.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in dims))
        if any(d.window_reversal for d in dims):
            parts.append("rhs_reversal=" + "x".join(str(int(d.window_reversal)) for d in dims))
        return "{" + " ".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class ConvolutionDimensionNumbers:
    """Parsed `dim_labels=b01f_01io->b01f`."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class ComputationRef:
    """A reference to a computation by name, before the module resolves it."""

    name: str


# ---------------------------------------------------------------------------
# Registry of attribute rules

_RULES: dict[str, Callable[["_ValueReader"], Any]] = {}


def _rule(*names: str):
    def register(fn):
        for n in names:
            _RULES[n] = fn
        return fn

    return register


COMPUTATION_ATTRS = frozenset(
    {"calls", "to_apply", "condition", "body", "select", "scatter", "true_computation", "false_computation", "comparator"}
)
COMPUTATION_LIST_ATTRS = frozenset({"branch_computations", "called_computations"})


class _ValueReader:
    """Reads one attribute value from its token stream."""

    __slots__ = ("tok", "i", "name")

    def __init__(self, tok: Tokens, name: str):
        self.tok = tok
        self.i = 0
        self.name = name

    # -- primitives
    def at_end(self) -> bool:
        return self.i >= len(self.tok)

    def peek(self) -> str | None:
        return self.tok.texts[self.i] if self.i < len(self.tok) else None

    def error(self, reason: str):
        return self.tok.error(f"attribute '{self.name}': {reason}", self.i)

    def expect(self, punct: str) -> None:
        if self.peek() != punct or self.tok.kinds[self.i] != PUNCT:
            raise self.error(f"expected {punct!r} but found {self.tok.describe(self.i)}")
        self.i += 1

    def word(self) -> str:
        if self.i >= len(self.tok) or self.tok.kinds[self.i] != WORD:
            raise self.error(f"expected a word or number but found {self.tok.describe(self.i)}")
        self.i += 1
        return self.tok.texts[self.i - 1]

    def int(self) -> int:
        w = self.word()
        try:
            return int(w, 0) if w.lower().startswith(("0x", "-0x")) else int(w)
        except ValueError:
            self.i -= 1
            raise self.error(f"expected an integer but found {w!r}") from None

    def finish(self, value):
        if not self.at_end():
            raise self.error(f"unexpected {self.tok.describe(self.i)} after the value")
        return value

    def generic(self):
        """Any value: number, bool, word, string, name, {...} list/dict, [...] list."""
        if self.at_end():
            raise self.error("missing value")
        k = self.tok.kinds[self.i]
        t = self.tok.texts[self.i]
        if k == STRING:
            self.i += 1
            return unquote(t)
        if k == PNAME:
            self.i += 1
            return t[1:]
        if k == WORD or k == DIMLABELS:
            self.i += 1
            if t == "true":
                return True
            if t == "false":
                return False
            try:
                return int(t)
            except ValueError:
                pass
            try:
                return float(t)
            except ValueError:
                return t
        if k == PUNCT and t in "{[(":
            close = {"{": "}", "[": "]", "(": ")"}[t]
            self.i += 1
            items: list = []
            mapping: dict = {}
            while self.peek() != close:
                if self.at_end():
                    raise self.error(f"unclosed {t!r}")
                # key=value / key:value pairs make a dict
                if (
                    self.i + 1 < len(self.tok)
                    and self.tok.kinds[self.i] in (WORD, STRING)
                    and self.tok.texts[self.i + 1] in ("=", ":")
                    and self.tok.kinds[self.i + 1] == PUNCT
                ):
                    key = self.tok.texts[self.i]
                    key = unquote(key) if self.tok.kinds[self.i] == STRING else key
                    self.i += 2
                    mapping[key] = self.generic()
                else:
                    items.append(self.generic())
                if self.peek() == "," and self.tok.kinds[self.i] == PUNCT:
                    self.i += 1
            self.i += 1
            if mapping and not items:
                return mapping
            if mapping:
                items.append(mapping)
            return tuple(items)
        raise self.error(f"unexpected {self.tok.describe(self.i)}")

    def int_list(self) -> tuple[int, ...]:
        self.expect("{")
        out = []
        while self.peek() != "}":
            out.append(self.int())
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "}":
                raise self.error(f"expected ',' or '}}' but found {self.tok.describe(self.i)}")
        self.i += 1
        return tuple(out)


def _dxd(reader: _ValueReader, text: str) -> list[int]:
    try:
        return [int(p) for p in text.split("x")]
    except ValueError:
        reader.i -= 1
        raise reader.error(f"expected sizes like 3x3 but found {text!r}") from None


def _pads(reader: _ValueReader, text: str, parts: int) -> list[tuple[int, ...]]:
    out = []
    for chunk in text.split("x"):
        # Negative paddings are written with a leading '-', e.g. 0_-1.
        try:
            values = tuple(int(p) for p in chunk.split("_"))
        except ValueError:
            values = ()
        if len(values) not in (2, parts):
            reader.i -= 1
            raise reader.error(f"expected padding like 0_0 but found {text!r}")
        out.append(values)
    return out


# ---------------------------------------------------------------------------
# Rules

_INT_LIST = (
    "dimensions lhs_batch_dims lhs_contracting_dims rhs_batch_dims rhs_contracting_dims "
    "offset_dims collapsed_slice_dims start_index_map slice_sizes dynamic_slice_sizes "
    "update_window_dims inserted_window_dims scatter_dims_to_operand_dims "
    "operand_batching_dims start_indices_batching_dims input_batching_dims "
    "scatter_indices_batching_dims fft_length lhs_ragged_dims lhs_group_dims rhs_group_dims "
    "rhs_ragged_dims"
).split()


@_rule(*_INT_LIST)
def _int_list_rule(r: _ValueReader):
    return r.finish(r.int_list())


@_rule("index", "iota_dimension", "index_vector_dim", "feature_group_count", "batch_group_count",
       "channel_id", "k", "split_dimension", "split_count", "concat_dimension", "all_gather_dimension",
       "scatter_dimension", "mantissa_bits", "exponent_bits")
def _int_rule(r: _ValueReader):
    return r.finish(r.int())


@_rule("is_stable", "indices_are_sorted", "unique_indices", "use_global_device_ids", "constrain_layout",
       "largest", "is_host_transfer", "is_cross_program_prefetch", "custom_call_has_side_effect")
def _bool_rule(r: _ValueReader):
    w = r.word()
    if w not in ("true", "false"):
        r.i -= 1
        raise r.error(f"expected true or false but found {w!r}")
    return r.finish(w == "true")


@_rule("custom_call_target", "async_execution_thread", "execution_thread", "op_name", "infeed_config",
       "outfeed_config")
def _string_rule(r: _ValueReader):
    if r.at_end() or r.tok.kinds[r.i] != STRING:
        raise r.error(f"expected a quoted string but found {r.tok.describe(r.i)}")
    r.i += 1
    return r.finish(unquote(r.tok.texts[r.i - 1]))


@_rule("kind", "direction", "type", "order", "distribution", "fft_type", "padding_type", "api_version", "schedule",
       "algorithm", "mode", "custom_call_schedule", "rng_algorithm")
def _enum_rule(r: _ValueReader):
    return r.finish(r.word())


@_rule(*COMPUTATION_ATTRS)
def _computation_rule(r: _ValueReader):
    if r.peek() == "{":
        return _computation_list_rule(r)
    return r.finish(ComputationRef(_name(r)))


@_rule(*COMPUTATION_LIST_ATTRS)
def _computation_list_rule(r: _ValueReader):
    r.expect("{")
    names = []
    while r.peek() != "}":
        names.append(ComputationRef(_name(r)))
        if r.peek() == ",":
            r.i += 1
        elif r.peek() != "}":
            raise r.error(f"expected ',' or '}}' but found {r.tok.describe(r.i)}")
    r.i += 1
    return r.finish(tuple(names))


def _name(r: _ValueReader) -> str:
    if r.at_end() or r.tok.kinds[r.i] not in (PNAME, WORD):
        raise r.error(f"expected a name but found {r.tok.describe(r.i)}")
    r.i += 1
    t = r.tok.texts[r.i - 1]
    return t[1:] if t.startswith("%") else t


@_rule("control-predecessors")
def _instruction_list_rule(r: _ValueReader):
    # Same `{%a, %b}` syntax as a computation list, but naming instructions.
    return tuple(ref.name for ref in _computation_list_rule(r))


@_rule("operand_precision")
def _word_list_rule(r: _ValueReader):
    r.expect("{")
    out = []
    while r.peek() != "}":
        out.append(r.word())
        if r.peek() == ",":
            r.i += 1
    r.i += 1
    return r.finish(tuple(out))


@_rule("slice")
def _slice_rule(r: _ValueReader):
    """`{[0:8], [0:4:2]}` -> ((start, limit, stride), ...)."""
    r.expect("{")
    out = []
    while r.peek() != "}":
        r.expect("[")
        start = r.int()
        r.expect(":")
        limit = r.int()
        stride = 1
        if r.peek() == ":":
            r.i += 1
            stride = r.int()
        r.expect("]")
        out.append((start, limit, stride))
        if r.peek() == ",":
            r.i += 1
        elif r.peek() != "}":
            raise r.error(f"expected ',' or '}}' but found {r.tok.describe(r.i)}")
    r.i += 1
    return r.finish(tuple(out))


@_rule("padding")
def _padding_rule(r: _ValueReader):
    """`0_0_0x1_1_0` -> ((low, high, interior), ...)."""
    if r.peek() == "{" or r.at_end():
        return r.finish(r.generic()) if not r.at_end() else ()
    text = r.word()
    pads = _pads(r, text, 3)
    return r.finish(tuple(p if len(p) == 3 else p + (0,) for p in pads))


@_rule("window")
def _window_rule(r: _ValueReader):
    r.expect("{")
    fields: dict[str, list] = {}
    while r.peek() != "}":
        key = r.word()
        r.expect("=")
        value = r.word()
        if key == "size" or key in ("stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            fields[key] = _dxd(r, value)
        elif key == "pad":
            fields[key] = _pads(r, value, 2)
        else:
            r.i -= 1
            raise r.error(f"unknown window field {key!r}")
    r.i += 1
    r.finish(None)
    n = len(fields.get("size", []))
    if "size" not in fields and fields:
        raise r.error("window has no size")
    for key, values in fields.items():
        if len(values) != n:
            raise r.error(f"window field {key!r} has {len(values)} entries, size has {n}")
    dims = []
    for d in range(n):
        pad = fields.get("pad", [(0, 0)] * n)[d]
        dims.append(
            WindowDimension(
                size=fields["size"][d],
                stride=fields.get("stride", [1] * n)[d],
                padding_low=pad[0],
                padding_high=pad[1],
                base_dilation=fields.get("lhs_dilate", [1] * n)[d],
                window_dilation=fields.get("rhs_dilate", [1] * n)[d],
                window_reversal=bool(fields.get("rhs_reversal", [0] * n)[d]),
            )
        )
    return Window(tuple(dims))


@_rule("dim_labels")
def _dim_labels_rule(r: _ValueReader):
    if r.at_end() or r.tok.kinds[r.i] not in (DIMLABELS, WORD):
        raise r.error(f"expected dimension labels like b01f_01io->b01f but found {r.tok.describe(r.i)}")
    text = r.tok.texts[r.i]
    r.i += 1
    r.finish(None)
    try:
        lhs_rhs, out = text.split("->")
        lhs, rhs = lhs_rhs.split("_")
    except ValueError:
        r.i -= 1
        raise r.error(f"malformed dimension labels {text!r}") from None

    def spatial(labels: str, fixed: str) -> tuple[int, ...]:
        pos = {c: i for i, c in enumerate(labels)}
        digits = sorted((c for c in labels if c.isdigit()), key=int)
        if len(pos) != len(labels) or any(c not in pos for c in fixed):
            r.i -= 1
            raise r.error(f"malformed dimension labels {text!r}")
        return tuple(pos[c] for c in digits)

    ls, ks, os_ = spatial(lhs, "bf"), spatial(rhs, "io"), spatial(out, "bf")
    return ConvolutionDimensionNumbers(
        input_batch=lhs.index("b"), input_feature=lhs.index("f"), input_spatial=ls,
        kernel_input_feature=rhs.index("i"), kernel_output_feature=rhs.index("o"), kernel_spatial=ks,
        output_batch=out.index("b"), output_feature=out.index("f"), output_spatial=os_, text=text,
    )


@_rule("metadata", "frontend_attributes", "statistics")
def _subattribute_rule(r: _ValueReader):
    """`{op_name="x" source_line=3}`: space- or comma-separated key=value pairs."""
    r.expect("{")
    out: dict[str, Any] = {}
    while r.peek() != "}":
        if r.at_end():
            raise r.error("unclosed '{'")
        key_kind = r.tok.kinds[r.i]
        key = _name(r) if key_kind != STRING else unquote(r.tok.texts[r.i])
        if key_kind == STRING:
            r.i += 1
        r.expect("=")
        out[key] = r.generic()
        if r.peek() == ",":
            r.i += 1
    r.i += 1
    return r.finish(out)


@_rule("backend_config")
def _backend_config_rule(r: _ValueReader):
    """A JSON object (bare or quoted) as a dict; anything else (plain string, MLIR dict) as str."""
    if r.at_end():
        raise r.error("missing value")
    if r.tok.kinds[r.i] == STRING:
        text = unquote(r.tok.texts[r.i])
        r.i += 1
        r.finish(None)
        if not text:
            return {}
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    start = r.tok.starts[r.i]
    src = r.tok.text
    end = r.tok.end_of(len(r.tok) - 1)
    try:
        return json.loads(src[start:end])
    except json.JSONDecodeError:
        # Typed-FFI custom calls carry an MLIR attribute dictionary here
        # (`{uplo = 76 : ui8}`), which XLA keeps as text; so do we.
        return src[start:end]


_SIMPLE_INT_LIST = re.compile(r"\{(-?[0-9]+(?:,-?[0-9]+)*)?\}")
_SIMPLE_INT = re.compile(r"-?[0-9]+")
_SIMPLE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def _shortcut(rule, value: str):
    """The common spellings XLA prints (`{1,0}`, `3`, `kLoop`), read without the tokenizer.

    Returns None when the value needs the full rule (which also reports errors).
    """
    if rule is _int_list_rule:
        m = _SIMPLE_INT_LIST.fullmatch(value)
        if m is not None:
            return tuple(map(int, m.group(1).split(","))) if m.group(1) else ()
    elif rule is _int_rule:
        if _SIMPLE_INT.fullmatch(value):
            return int(value)
    elif rule is _enum_rule:
        if _SIMPLE_WORD.fullmatch(value):
            return value
    elif rule is _bool_rule:
        if value == "true":
            return True
        if value == "false":
            return False
    return None


def parse_attribute(name: str, text: str, start: int, end: int, source: str):
    """Interpret the raw value `text[start:end]` of attribute `name`."""
    rule = _RULES.get(name)
    if rule is None:
        return text[start:end].strip()
    value = _shortcut(rule, text[start:end])
    if value is not None:
        return value
    tok = Tokens(text, source, start, end)
    return rule(_ValueReader(tok, name))


def parse_attribute_text(name: str, value_text: str):
    """Interpret a stand-alone attribute value string (used by tests and tools)."""
    return parse_attribute(name, value_text, 0, len(value_text), "<attribute>")


# ---------------------------------------------------------------------------
# Formatting typed values back to text


def format_attribute(name: str, value) -> str:
    """HLO text for a typed attribute value (the inverse of the rules above)."""
    if isinstance(value, str):
        if name in ("custom_call_target", "async_execution_thread", "execution_thread", "op_name"):
            return quote(value)
        if name == "backend_config":
            return quote(value)
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (Window, ConvolutionDimensionNumbers)):
        return str(value)
    if hasattr(value, "name") and hasattr(value, "instructions"):  # HloComputation
        return "%" + value.name
    if isinstance(value, ComputationRef):
        return "%" + value.name
    if name == "slice":
        return "{" + ", ".join(f"[{a}:{b}]" if c == 1 else f"[{a}:{b}:{c}]" for a, b, c in value) + "}"
    if name == "padding":
        return "x".join("_".join(map(str, p)) for p in value)
    if name == "backend_config" and isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, dict):
        sep = " " if name == "metadata" else ","
        return "{" + sep.join(f"{k}={_format_scalar(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (tuple, list)):
        if name in COMPUTATION_LIST_ATTRS or name == "control-predecessors":
            return "{" + ", ".join("%" + (v if isinstance(v, str) else v.name) for v in value) + "}"
        return "{" + ",".join(_format_scalar(v) for v in value) + "}"
    raise TypeError(f"cannot format attribute {name!r} from {type(value).__name__}")


def _format_scalar(v) -> str:
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
