"""The token parser: recursive descent from HLO text to the typed graph, XLA's grammar rule for rule.

It follows XLA's `hlo_parser.cc` (the version in jaxlib, see
`_jaxlib_oracle.py`): what XLA's parser accepts this one accepts, what it
refuses this one refuses, with `file:line:col` errors. The grammar:

    module      := ['HloModule' name attribute*] [stack frames] computation+
    computation := ['ENTRY'] name [param_list '->' shape] '{' instruction+ '}' [',' 'execution_thread=' string]
    instruction := ['ROOT'] name '=' [shape] opcode '(' operand* ')' (',' attribute)*
    operand     := [shape] name | [shape] opcode '(' operand* ')'   -- a nested, unnamed instruction
    attribute   := name '=' value     -- which names, and the type of each value, depend on the opcode

Every attribute value is checked against its type here; the graph keeps each
value's text verbatim (printing gives back what was read) and `_attributes`
turns it into a Python value when someone asks. Per-opcode rules (operand
counts, attributes, shape inference for instructions written without a
shape) live in `_opcodes`; the readers of attribute values register
themselves here (`value_parser`, filled by `_values`). After reading, names
are made unique across the module as XLA does (`_names`).

The entry points (`parse_hlo`, `load_hlo`) are in `_parser`, which tries the
line-oriented fast path (`_fastpath`) first and runs the verifier (`_verifier`).

This module and the ones it reads (`_lexer`, `_names`, `_values`, `_opcodes`)
are the one home of what HLO text means; the fast path compiles its patterns
from them and calls them (see `_fastpath`'s note, "One parser design"). Here:
the shapes of a line (`LINE_SHAPES`, whose keywords, punctuation and errors
the productions take), the checks that need more than a line's shape
(`Parser.take_root`, `take_entry`, `add_computation`, `check_*`,
`attribute_spec`, `module_start`), the printed forms of values
(`printed_value`, filled by `_values`) and of shapes (`printed_shape`, which
`Parser.shape` uses too), the JSON dict scanner (`json_dict_end`), the header
and computation attribute tables (`HEADER_ATTRIBUTES`,
`COMPUTATION_ATTRIBUTES`) and the generic attribute checks
(`Parser.generic_checks`), each used by both readers.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from . import _opcodes as _ops
from ._errors import HloParseError
from ._ir import HloComputation, HloInstruction, HloModule
from ._lexer import (
    ARROW, ASTERISK, ATTRNAME, COLON, COMMA, DECIMAL, DOTS, EQUAL, INT, IDENT,
    KEYWORD, LBRACE, LEQ, LPAREN, LSQUARE, NAME, NEGINF, OCTOTHORP, PLUS, PRIMITIVE, QUESTION,
    RBRACE, RPAREN, RSQUARE, STRING, TILDE, KIND_NAMES, PRIMITIVE_TYPES, Tokens, int_value, unquote,
)
from ._literal import check_literal_value
from ._names import NameUniquer, kept_as_written, renamed, sanitized
from ._opcodes import Create, _Builder
from ._shape import Layout, Shape

__all__ = ["LINE_SHAPES", "Parser", "Piece", "json_dict_end", "printed_value", "shape_problem", "value_parser"]

MAX_RECURSION_DEPTH = 256  # nested tuples, nested instructions, nested computations
_MAIN_THREAD = "main"
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_FLOAT_MAX = 3.4028234663852886e38
_TILE_COMBINE = -9223372036854775808  # Tile::kCombineDimension


class Piece(NamedTuple):
    """One piece of a line shape (`LINE_SHAPES`): a keyword or punctuation, or a part read on its own."""

    text: str  # a keyword or punctuation as written; else the part's name (a line shape's, or a token's)
    kind: int = 0  # a keyword's or punctuation's token kind; 0 for a part
    optional: bool = False
    message: str = ""  # the token parser's error where this punctuation is missing
    glued: bool = False  # one token with the piece before: XLA's lexer reads `x:` as a name, `key=` as an attribute's
    items: str = ""  # a list (maybe empty) of the line shape named so, ...
    separator: str = ""  # ... separated by this punctuation


def _word(text: str, optional: bool = False) -> Piece:
    return Piece(text, KEYWORD, optional)


def _mark(text: str, kind: int, message: str = "", glued: bool = False) -> Piece:
    return Piece(text, kind, message=message, glued=glued)


def _part(name: str, optional: bool = False) -> Piece:
    return Piece(name, optional=optional)


def _list(name: str, items: str, separator: str = "") -> Piece:
    return Piece(name, items=items, separator=separator)


# The shapes of an HLO line, piece by piece, in order: the one home of how a line is laid out. The productions
# below take their keywords, punctuation and the errors where punctuation is missing from here (`_keyword`,
# `_punctuation`); the fast path (`_fastpath`) compiles its line patterns from it, with its own extent for each part
# (a name, a shape, an opcode, a value). Blanks may come between any two pieces but glued ones.
LINE_SHAPES: dict[str, tuple[Piece, ...]] = {
    "header": (_word("HloModule"), _part("name"), _list("attributes", "attribute")),
    "attribute": (_mark(",", COMMA), _part("key"), _mark("=", EQUAL, glued=True), _part("value")),
    "computation": (
        _word("ENTRY", optional=True), _part("name"), _part("signature", optional=True),
        _mark("{", LBRACE, "expects '{' at the beginning of instruction list."),
    ),
    "signature": (
        _mark("(", LPAREN, "expects '(' at the beginning of param list"), _list("parameters", "parameter", ","),
        _mark(")", RPAREN, "expects ')' at the end of param list"), _mark("->", ARROW, "expects '->'"),
        _part("shape"),
    ),
    "parameter": (_part("name"), _mark(":", COLON, glued=True), _part("shape")),
    "instruction": (
        _word("ROOT", optional=True), _part("name"), _mark("=", EQUAL, "expects '=' in instruction"),
        _part("shape", optional=True), _part("opcode"),
        _mark("(", LPAREN, "expects '(' at the beginning of operands"), _list("operands", "operand", ","),
        _mark(")", RPAREN, "expects ')' at the end of operands"), _list("attributes", "attribute"),
    ),
    "operand": (_part("shape", optional=True), _part("name")),
    "close": (_mark("}", RBRACE, "expects '}' at the end of instruction list."), _list("attributes", "attribute")),
}


def _keyword(shape: str) -> str:
    """The keyword of a line shape (`HloModule`, `ENTRY`, `ROOT`)."""
    return next(piece.text for piece in LINE_SHAPES[shape] if piece.kind == KEYWORD)


def _punctuation(shape: str, text: str) -> tuple[int, str]:
    """The token kind of punctuation `text` in a line shape, and the error where it is missing."""
    piece = next(piece for piece in LINE_SHAPES[shape] if piece.kind and piece.text == text)
    return piece.kind, piece.message


_HLO_MODULE, _ENTRY, _ROOT = _keyword("header"), _keyword("computation"), _keyword("instruction")
_PARAMS_OPEN, _PARAMS_CLOSE, _ARROW = (_punctuation("signature", t) for t in ("(", ")", "->"))
_LIST_OPEN, _LIST_CLOSE = _punctuation("computation", "{"), _punctuation("close", "}")
_INSTRUCTION_EQUAL = _punctuation("instruction", "=")
_OPERANDS_OPEN, _OPERANDS_CLOSE = _punctuation("instruction", "("), _punctuation("instruction", ")")


class _Fail(Exception):
    """A parse error: the reason and the token index it points at."""

    def __init__(self, reason: str, index: int):
        super().__init__(reason)
        self.reason = reason
        self.index = index


class Parser:
    """Reads one text; `run()` returns the module or raises HloParseError."""

    def __init__(self, text: str, source: str = "<string>"):
        self.tok = Tokens(text, source)
        self.kinds = self.tok.kinds
        self.texts = self.tok.texts
        self.starts = self.tok.starts
        self.ends = self.tok.ends
        self.text = text
        self.source = source
        self.i = 0
        self.depth = 0
        self.pool: dict[str, tuple[HloComputation, int]] = {}
        self.computations: list[HloComputation] = []
        self.scopes: list[_Builder] = []
        self.anon = NameUniquer()  # names for nested instructions, as XLA's parser makes them
        self.shape_cache: dict[str, Shape] = {}
        self.stack_text = ""
        self.stack_tables: dict = {}
        self.control: dict[HloInstruction, list[HloInstruction]] = {}
        self.async_state: dict[HloInstruction, tuple] = {}  # async op -> (wrapped computation, thread)
        self.channels: dict[HloInstruction, int | None] = {}  # send/recv -> channel_id
        self.positions: dict[int, int] = {}  # id(instruction) -> offset of its name, for the verifier's errors

    # -- tokens ---------------------------------------------------------------
    def kind(self) -> int:
        i = self.i
        return self.kinds[i] if i < len(self.kinds) else 0

    def at(self, kind: int) -> bool:
        i = self.i
        return i < len(self.kinds) and self.kinds[i] == kind

    def at_keyword(self, word: str) -> bool:
        i = self.i
        return i < len(self.kinds) and self.kinds[i] == KEYWORD and self.texts[i] == word

    def at_ident(self, word: str) -> bool:
        i = self.i
        return i < len(self.kinds) and self.kinds[i] == IDENT and self.texts[i] == word

    def eat(self, kind: int) -> bool:
        i = self.i
        if i < len(self.kinds) and self.kinds[i] == kind:
            self.i = i + 1
            return True
        return False

    def expect(self, kind: int, message: str) -> None:
        if not self.eat(kind):
            raise _Fail(message, self.i)

    def fail(self, message: str, index: int | None = None) -> _Fail:
        return _Fail(message, self.i if index is None else index)

    def lookahead(self) -> int:
        i = self.i + 1
        return self.kinds[i] if i < len(self.kinds) else 0

    def error(self, fail: _Fail) -> HloParseError:
        index = fail.index
        # At the end of the text XLA points past the last character, blanks included.
        pos = self.starts[index] if index < len(self.starts) else len(self.text)
        # XLA's words come first (the conformance tests compare them); a reader also needs to know why.
        reason = fail.reason if index < len(self.starts) else f"{fail.reason} (unexpected end of file)"
        return HloParseError(reason, text=self.text, pos=pos, source=self.source)

    # -- primitives ------------------------------------------------------------
    def name(self) -> str:
        i = self.i
        if i < len(self.kinds) and self.kinds[i] in (IDENT, NAME):
            self.i = i + 1
            return self.texts[i]
        raise self.fail("expects name")

    def attribute_name(self) -> str:
        i = self.i
        if i < len(self.kinds) and self.kinds[i] == ATTRNAME:
            self.i = i + 1
            return self.texts[i]
        raise self.fail("expects attribute name")

    def string(self) -> str:
        i = self.i
        if i < len(self.kinds) and self.kinds[i] == STRING:
            self.i = i + 1
            return unquote(self.texts[i])
        raise self.fail("expects string")

    def int64(self) -> int:
        i = self.i
        if i < len(self.kinds) and self.kinds[i] == INT:
            self.i = i + 1
            return int_value(self.texts[i])
        raise self.fail("expects integer")

    def double(self) -> float:
        i = self.i
        k = self.kind()
        if k == DECIMAL:
            value = _decimal(self.texts[i])
            if math.isinf(value):
                raise self.fail(f"Constant is out of range for double (+/-{1.79769e308:g}) and so is unparsable.")
        elif k == INT:
            value = float(int_value(self.texts[i]))
        elif k == KEYWORD and self.texts[i] == "inf":
            value = math.inf
        elif k == NEGINF:
            value = -math.inf
        else:
            raise self.fail("expects decimal or integer")
        self.i = i + 1
        return value

    def boolean(self) -> bool:
        i = self.i
        if self.kind() == KEYWORD and self.texts[i] in ("true", "false"):
            self.i = i + 1
            return self.texts[i] == "true"
        raise self.fail("expects true or false")

    def json_dict(self) -> str:
        """A `{...}` value read as raw text, braces balanced outside strings (XLA's LexJsonDict)."""
        i = self.i
        if not self.at(LBRACE):
            raise self.fail("expects JSON dict")
        text = self.text
        pos = json_dict_end(text, self.starts[i])
        if pos is None:
            raise self.fail("expects JSON dict", i)
        self.i = self.tok.resync(pos)
        return text[self.starts[i] : pos]

    def int_list(self, start: int, end: int, delim: int) -> list[int]:
        self.expect(start, f"expects a list to end with {KIND_NAMES[end]}")
        out: list[int] = []
        if not self.at(end):
            while True:
                out.append(self.int64())
                if not self.eat(delim):
                    break
        self.expect(end, f"expects a list to end with {KIND_NAMES[end]}")
        return out

    def listing(self, start: int, end: int, delim: int, item) -> list:
        self.expect(start, f"expects a list starting with {KIND_NAMES[start]}")
        out = []
        if not self.at(end):
            while True:
                out.append(item())
                if not self.eat(delim):
                    break
        self.expect(end, f"expects a list to end with {KIND_NAMES[end]}")
        return out

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_RECURSION_DEPTH:
            raise self.fail("maximum recursion depth exceeded")

    # -- module ----------------------------------------------------------------
    def run(self) -> HloModule:
        self.module_start()
        return self.module(without_header=not self.at_keyword(_HLO_MODULE))

    # The checks below are the token parser's errors that need more than a line's shape; the fast path calls
    # them too and gives up where one fails (`_fastpath.fast_parse` takes `_Fail` as a give-up), so that each
    # is stated once.
    def module_start(self) -> None:
        """XLA reads a text as a module from `HloModule`, `ENTRY` or `name {` only."""
        k = self.kind()
        if not ((k == KEYWORD and self.texts[self.i] in (_HLO_MODULE, _ENTRY)) or self.lookahead() == LBRACE):
            raise self.fail(
                "expected an HLO module: 'HloModule', 'ENTRY' or a computation (a single instruction is not a module)"
            )

    def take_entry(self, entry: HloComputation | None, comp: HloComputation, index: int) -> HloComputation:
        """`comp`, an ENTRY computation read after `entry` (None before the first)."""
        if entry is not None:
            raise self.fail("expects only one ENTRY", index)
        return comp

    def take_root(self, root: str | None, name: str, index: int) -> str:
        """`name`, a ROOT instruction of a computation whose ROOT so far is `root` (None before the first)."""
        if root is not None:
            raise self.fail("one computation should have only one ROOT", index)
        return name

    def add_computation(self, name: str, comp: HloComputation, index: int) -> None:
        if name in self.pool:
            raise self.fail(f"computation already exists: {name}", index)
        self.pool[name] = (comp, index)

    def check_signature(self, name: str, shape: Shape | None, comp: HloComputation, index: int) -> None:
        """The signature's result `shape` (None: none written) against the root's."""
        if shape is not None and not comp.root.shape.compatible(shape):
            raise self.fail(signature_mismatch(name, shape, comp), index)

    def check_new_parameter(self, params: dict, number: int, index: int) -> None:
        """Parameter `number` not taken in the computation (`params`: its parameters by number)."""
        if number in params:
            raise self.fail(f"Duplicate parameter number {number}", index)

    def check_new_instruction(self, table: dict, name: str, index: int) -> None:
        """`name` not taken by an instruction of the computation (`table`: its instructions by name)."""
        if name in table:
            raise self.fail(f"instruction already exists: {name}", index)

    def check_shape_written(self, shape: Shape | None, opcode: str) -> None:
        if shape is None and not _ops.can_infer_shape(opcode):
            raise self.fail(f"cannot infer shape for opcode: {opcode}")

    def check_operand_count(self, ops: list, expected: int | None, index: int) -> None:
        if expected is not None and len(ops) != expected:
            raise self.fail(f"expects {expected} operands, but has {len(ops)} operands", index)

    def check_operand_shape(self, declared: Shape | None, operand: HloInstruction, index: int) -> None:
        """The shape written before an operand (None: none) against the operand's."""
        if declared is not None and declared is not operand.shape and not operand.shape.compatible(declared):
            raise self.fail(
                f"The declared operand shape {_human(declared, True)} is not compatible with the shape of the "
                f"operand instruction {_human(operand.shape, True)}.",
                index,
            )

    def attribute_spec(self, attrs: dict, seen, key: str, index: int) -> tuple[bool, str]:
        """(required, type) of attribute `key` written after those `seen`: one allowed (`attrs`), not repeated."""
        if key in seen:
            raise self.fail(f"attribute {key} already exists", index)
        spec = attrs.get(key)
        if spec is None:
            allowed = (
                "Allowed attributes: " + ", ".join(sorted(attrs)) if attrs else "No attributes are allowed here."
            )
            raise self.fail(f'unexpected attribute "{key}". {allowed}', index)
        return spec

    def check_required(self, attrs: dict, seen, index: int) -> None:
        """Every required attribute of `attrs` among those `seen`."""
        for key, (required, _) in attrs.items():
            if required and key not in seen:
                raise self.fail(f"attribute {key} is expected but not seen", index)

    def module(self, without_header: bool) -> HloModule:
        header = self.header() if not without_header else None
        self.stack_frame_index()
        entry = self.parse_computations()
        return self.assemble(entry, header)

    def header(self) -> tuple[str, dict[str, str], dict]:
        """`HloModule name (',' attribute)*`: the name, each attribute's text, their values."""
        self.i += 1
        name = self.name()
        spans: dict[str, tuple[int, int]] = {}
        values = self.attributes(HEADER_ATTRIBUTES, spans)
        texts = {k: self.text[s:e] for k, (s, e) in sorted(spans.items(), key=lambda kv: kv[1])}
        return name, texts, values

    def assemble(self, entry: HloComputation | None, header) -> HloModule:
        """The module of the computations read, with XLA's names and the header's checks."""
        module = self.finish_module(entry)
        if header is None:
            module.name = "module_" + module.entry.name
        else:
            module.name, module.header_attributes, values = header
            self.check_header(module, values)
        module.stack_frames = self.stack_tables
        module._stack_frame_text = self.stack_text
        return module

    def signature(self) -> tuple[Shape, int]:
        """`'(' (name shape (',' name shape)*)? ')' '->' shape`: the result shape and the index of its first
        token (XLA checks only the syntax of the parameters)."""
        self.expect(*_PARAMS_OPEN)
        if not self.at(RPAREN):
            while True:
                self.name()
                self.shape()
                if not self.eat(COMMA):
                    break
        self.expect(*_PARAMS_CLOSE)
        self.expect(*_ARROW)
        index = self.i
        return self.shape(), index

    def stack_frame_index(self) -> None:
        if not self.at_keyword("FileNames"):
            return
        start = self.starts[self.i]
        tables: dict[str, dict] = {"FileNames": {}, "FunctionNames": {}, "FileLocations": {}, "StackFrames": {}}
        self.i += 1
        for table, next_table in (("FileNames", "FunctionNames"), ("FunctionNames", "FileLocations")):
            while self.at(INT):
                key = self.int64()
                if self.at(STRING):
                    tables[table][key] = self.string()
            if not self.at_keyword(next_table):
                raise self.fail(f"expects '{next_table}'")
            self.i += 1
        locations = {k: (True, "int32") for k in
                     ("file_name_id", "function_name_id", "line", "end_line", "column", "end_column")}
        while self.at(INT):
            key = self.int64()
            tables["FileLocations"][key] = self.sub_attributes(locations)
        if not self.at_keyword("StackFrames"):
            raise self.fail("expects 'StackFrames'")
        self.i += 1
        frames = {"file_location_id": (True, "int32"), "parent_frame_id": (True, "int32")}
        while self.at(INT):
            key = self.int64()
            tables["StackFrames"][key] = self.sub_attributes(frames)
        self.stack_text = self.text[start : self.ends[self.i - 1]]
        self.stack_tables = tables

    def parse_computations(self) -> HloComputation | None:
        entry = None
        while True:
            comp, is_entry, entry_index = self.computation()
            if is_entry:
                entry = self.take_entry(entry, comp, entry_index)
            if self.i >= len(self.kinds):
                return entry

    def computation(self) -> tuple[HloComputation, bool, int]:
        entry_index = self.i
        is_entry = self.at_keyword(_ENTRY)
        if is_entry:
            self.i += 1
        name_index = self.i
        name = self.name()
        shape = None
        shape_index = None
        if self.at(LPAREN):
            shape, shape_index = self.signature()
        comp = self.instruction_list(name)
        self.check_signature(name, shape, comp, shape_index)
        self.computation_attributes(comp, self.attributes(COMPUTATION_ATTRIBUTES, {}))
        self.add_computation(name, comp, name_index)
        return comp, is_entry, entry_index

    @staticmethod
    def computation_attributes(comp: HloComputation, values: dict) -> None:
        """What the attributes after a computation's closing brace set (the fast path's too)."""
        if "execution_thread" in values:
            comp.execution_thread = values["execution_thread"]

    def instruction_list(self, name: str) -> HloComputation:
        self.enter()
        builder = _Builder(name)
        self.scopes.append(builder)
        try:
            self.expect(*_LIST_OPEN)
            root_name = None
            root_index = 0
            while True:
                is_root, iname, index = self.instruction(builder)
                if is_root:
                    root_name = self.take_root(root_name, iname, index)
                if self.at(RBRACE):  # as XLA, at the end of the text the next "instruction" lacks its name
                    break
            self.expect(*_LIST_CLOSE)
            root = builder.table[root_name][0] if root_name is not None else builder.instructions[-1]
            comp = self.build(builder, root, root_index)
        finally:
            self.scopes.pop()
            self.depth -= 1
        self.computations.append(comp)
        return comp

    def build(self, builder: _Builder, root: HloInstruction, index: int) -> HloComputation:
        params = builder.params
        for number in params:
            if not 0 <= number < len(params):
                numbers = ", ".join(map(str, sorted(params)))
                raise self.fail(
                    f"computation '{builder.name}' has parameters numbered {numbers}: XLA needs 0 to {len(params) - 1}",
                    self.i - 1,
                )
        comp = HloComputation.__new__(HloComputation)
        comp.name = builder.name
        comp.instructions = builder.instructions
        comp._by_name = {}
        comp.root = root
        comp.module = None
        comp.is_entry = False
        comp.execution_thread = None
        for instr in builder.instructions:
            instr.computation = comp
        return comp

    def instruction(self, builder: _Builder) -> tuple[bool, str, int]:
        root_index = self.i
        is_root = self.at_keyword(_ROOT)
        if is_root:
            self.i += 1
        name_index = self.i
        name = self.name()
        self.expect(*_INSTRUCTION_EQUAL)
        self.instruction_rhs(builder, name, name_index, True)
        return is_root, name, root_index

    def instruction_rhs(self, builder: _Builder, name: str, name_index: int, allow_attributes: bool) -> HloInstruction:
        self.enter()
        try:
            shape = self.shape() if self.can_be_shape() else None
            opcode, wrapped = self.opcode()
            self.check_shape_written(shape, opcode)
            attrs = dict(_ops.GENERIC_ATTRIBUTES)
            c = Create(builder, name, shape, opcode, wrapped, attrs, allow_attributes, None, name_index)
            instr = self.create(c)
            if not name:
                name = self.anon.unique(f"{instr.opcode}.anon")
            else:
                self.anon.unique(name)
            clean = sanitized(name)
            if clean != name:
                raise self.fail(f"illegal instruction name: {name}; suggest renaming to: {clean}", name_index)
            instr.name = name
            self.generic_checks(c.values, instr)
            self.check_new_instruction(builder.table, name, name_index)
            builder.table[name] = (instr, name_index)
            self.positions[id(instr)] = self.starts[name_index] if name_index < len(self.starts) else 0
            return instr
        finally:
            self.depth -= 1

    def create(self, c: Create) -> HloInstruction:
        """XLA's CreateInstruction: parse operands and attributes for `c.opcode`, build the instruction."""
        ops = _ops
        return ops.READERS.get(c.opcode, ops.read_standard)(self, c)

    def generic_checks(self, values: dict, instr: HloInstruction) -> None:
        """The checks of the attributes every opcode takes, on their values (the fast path's too)."""
        if "parameter_replication" in values:
            leaves = leaf_count(instr.shape)
            if leaves != len(values["parameter_replication"]):
                raise self.fail(
                    f"parameter has {leaves} leaf buffers, but parameter_replication has "
                    f"{len(values['parameter_replication'])} elements."
                )
        if "control-predecessors" in values:
            self.control[instr] = list(values["control-predecessors"])

    def opcode(self) -> tuple[str, str | None]:
        i = self.i
        if not self.at(IDENT):
            raise self.fail("expects opcode")
        val = self.texts[i]
        known = _ops.OPCODES
        if val in known:
            self.i += 1
            return val, None
        for suffix, async_opcode in (("-start", "async-start"), ("-update", "async-update"), ("-done", "async-done")):
            if val.endswith(suffix):
                wrapped = val[: -len(suffix)]
                if wrapped in ("all-gather", "all-reduce", "collective-permute", "copy", "recv", "send"):
                    continue
                if wrapped not in known:
                    raise self.fail(f"expects async wrapped opcode but sees: {val}, error: Unknown opcode: {wrapped}")
                self.i += 1
                return async_opcode, wrapped
        raise self.fail(f"expects opcode but sees: {val}, error: Unknown opcode: {val}")

    # -- operands ----------------------------------------------------------------
    def operands(self, c: Create, expected: int | None = None) -> list[HloInstruction]:
        if c.preset is not None:
            return c.operands
        loc = self.i
        self.enter()
        try:
            ops = self._operand_list(c.builder)
        finally:
            self.depth -= 1
        self.check_operand_count(ops, expected, loc)
        c.operands = ops
        return ops

    def _operand_list(self, builder: _Builder) -> list[HloInstruction]:
        self.expect(*_OPERANDS_OPEN)
        ops: list[HloInstruction] = []
        table = builder.table
        kinds, texts = self.kinds, self.texts
        if not self.at(RPAREN):
            while True:
                start = self.i
                k = kinds[start] if start < len(kinds) else 0
                # The common case first: a name, perhaps after a shape, then ',' or ')'.
                operand = None
                if k == NAME or k == IDENT:
                    nxt = kinds[start + 1] if start + 1 < len(kinds) else 0
                    if nxt == COMMA or nxt == RPAREN:
                        entry = table.get(texts[start])
                        if entry is not None:
                            operand = entry[0]
                            self.i = start + 1
                if operand is None:
                    operand = self._operand_slow(builder, start)
                ops.append(operand)
                if not self.eat(COMMA):
                    break
        self.expect(*_OPERANDS_CLOSE)
        return ops

    def _operand_slow(self, builder: _Builder, start: int) -> HloInstruction:
        """`[shape] name`, else a nested instruction `[shape] opcode(...)`."""
        declared = None
        failure = None
        try:
            if self.can_be_shape():
                declared = self.shape()
            name_index = self.i
            name = self.name()
            entry = builder.table.get(name)
            if entry is None:
                raise self.fail(f"instruction does not exist: {name}", start)
            self.check_operand_shape(declared, entry[0], name_index + 1)
            if not (self.at(COMMA) or self.at(RPAREN)):
                raise self.fail("expects ',' or ')' after an operand")
            return entry[0]
        except _Fail as err:
            failure = err
        self.i = start
        try:
            return self.instruction_rhs(builder, "", start, False)
        except _Fail as nested:
            # As XLA, point at the operand; say what went wrong with the reading that got further.
            reason = failure if failure.index >= nested.index or failure.reason.startswith("The declared") else nested
            raise _Fail(f"cannot parse as an instruction name or as a nested instruction: {reason.reason}", start) from None

    # -- attributes ----------------------------------------------------------------
    def attributes(self, attrs: dict, spans: dict, allow: bool = True, values: dict | None = None) -> dict:
        """`(',' name '=' value)*` for the attribute `attrs` allows: {name: (required, type)}."""
        out = {} if values is None else values
        loc = self.i
        if allow:
            while self.eat(COMMA):
                self.attribute(attrs, out, spans)
        self.check_required(attrs, out, loc)
        return out

    def attribute(self, attrs: dict, out: dict, spans: dict) -> None:
        loc = self.i
        if not self.at(ATTRNAME):
            raise self.fail("error parsing attributes")
        key = self.texts[loc]
        self.i += 1
        spec = self.attribute_spec(attrs, out, key, loc)
        first = self.i
        value = _VALUE_PARSERS[spec[1]](self)
        out[key] = value
        spans[key] = (self.starts[first] if first < len(self.starts) else len(self.text), self.ends[self.i - 1])

    def sub_attributes(self, attrs: dict) -> dict:
        """`'{' (','? name '=' value)* '}'`."""
        loc = self.i
        self.expect(LBRACE, "expects '{' to start sub attributes")
        out: dict = {}
        if not self.at(RBRACE):
            while True:
                self.eat(COMMA)
                self.attribute(attrs, out, {})
                if self.at(RBRACE) or self.i >= len(self.kinds):
                    break
        for key, (required, _) in attrs.items():
            if required and key not in out:
                raise self.fail(f"sub-attribute {key} is expected but not seen", loc)
        self.expect(RBRACE, "expects '}' to end sub attributes")
        return out

    def check_header(self, module: HloModule, values: dict) -> None:
        result = module.entry.root.shape
        if "input_output_alias" in values:
            taken: set = set()
            for out_index, param, param_index, _kind in values["input_output_alias"]:
                if _subshape(result, out_index) is None:
                    raise self.fail(
                        f"Trying to set up alias at {{{','.join(map(str, out_index))}}} which is an invalid index "
                        f"for shape {_human(result)}"
                    )
                if param < 0:
                    raise self.fail(f"parameter number {param} must be >= 0")
                if tuple(out_index) in taken:
                    raise self.fail(f"output index {{{','.join(map(str, out_index))}}} is already aliased")
                taken.add(tuple(out_index))
        if "buffer_donor" in values:
            for param, _ in values["buffer_donor"]:
                if param < 0:
                    raise self.fail(f"buffer donor parameter number {param} must be >= 0")

    # -- shapes and layouts ------------------------------------------------------------
    def can_be_shape(self) -> bool:
        k = self.kind()
        return k == PRIMITIVE or k == LPAREN or (
            k == IDENT and self.texts[self.i] == "b" and self.lookahead() == LPAREN
        )

    def shape(self) -> Shape:
        i = self.i
        kinds = self.kinds
        n = len(kinds)
        if i < n and kinds[i] == PRIMITIVE:
            # The usual case, `f32[8,16]{1,0}`: reuse a shape already read from the same text.
            j = i + 1
            if j < n and kinds[j] == LSQUARE:
                j += 1
                while j < n and (kinds[j] == INT or kinds[j] == COMMA):
                    j += 1
                if j < n and kinds[j] == RSQUARE:
                    j += 1
                    if j + 1 < n and kinds[j] == LBRACE and kinds[j + 1] in (INT, COLON):
                        j += 1
                        while j < n and (kinds[j] == INT or kinds[j] == COMMA):
                            j += 1
                        j = j + 1 if j < n and kinds[j] == RBRACE else -1
                    if j > 0:
                        key = self.text[self.starts[i] : self.ends[j - 1]]
                        cached = self.shape_cache.get(key) or printed_shape(key)
                        if cached is not None:
                            self.shape_cache[key] = cached
                            self.i = j
                            return cached
                        shape = self._shape()
                        if self.i == j:
                            self.shape_cache[key] = shape
                        return shape
        return self._shape()

    def _shape(self) -> Shape:
        self.enter()
        try:
            if self.at_ident("b") and self.lookahead() == LPAREN:
                start = self.i
                self.i += 2
                inner = self._shape()
                if not inner.is_array:
                    raise self.fail("a buffer shape holds an array shape", start)
                self.expect(RPAREN, "expects ')' at the end of buffer shape.")
                return Shape.buffer_of(inner)
            if self.eat(LPAREN):
                start = self.i - 1
                elements = []
                if not self.at(RPAREN):
                    while True:
                        elements.append(self._shape())
                        if not self.eat(COMMA):
                            break
                for element in elements:
                    problem = shape_problem(element, in_tuple=True)
                    if problem is not None:
                        raise self.fail(f"invalid tuple element shape {_human(element, True)}: {problem}", start)
                self.expect(RPAREN, "expects ')' at the end of tuple.")
                return Shape("tuple", tuple_shapes=tuple(elements))
            i = self.i
            if not self.at(PRIMITIVE):
                raise self.fail(f"expected primitive type, saw {KIND_NAMES.get(self.kind(), 'kEof')}")
            element_type = self.texts[i]
            self.i += 1
            dims: list[int] = []
            dynamic: list[bool] = []

            def dimension():
                if self.eat(QUESTION):
                    dims.append(-1)
                    dynamic.append(True)
                    return
                is_dynamic = self.eat(LEQ)
                d = self.int64()
                if d < 0:
                    if is_dynamic and d == -(1 << 63):  # XLA's spelled-out unbounded size
                        d = -1
                    else:
                        raise self.fail(f"invalid dimension size {d}", i)
                dims.append(d)
                dynamic.append(is_dynamic)

            self.listing(LSQUARE, RSQUARE, COMMA, dimension)
            layout = None
            if self.at(LBRACE) and self.lookahead() in (INT, COLON):
                layout = self.layout()
                if len(layout.minor_to_major) != len(dims):
                    raise self.fail(
                        f"Dimensions size is {len(dims)}, but minor to major size is {len(layout.minor_to_major)}."
                    )
                if "P(" in layout.tail and _has_physical_shape(layout):
                    raise self.fail(f"Layout has physical shape, but is not for a sparse array: {layout}")
            return Shape(element_type, tuple(dims), tuple(dynamic), layout)
        finally:
            self.depth -= 1

    def layout(self) -> Layout:
        """`{minor_to_major (':' tail)?}`: the tail is checked here and kept verbatim."""
        self.expect(LBRACE, "expects layout to start with kLbrace")
        m2m: list[int] = []
        tail = ""
        if not self.at(RBRACE):
            if self.at(INT):
                while True:
                    m2m.append(self.int64())
                    if not self.eat(COMMA):
                        break
            if self.at(COLON):
                self.i += 1
                tail_start = self.i
                self.layout_tail()
                if self.i > tail_start:
                    tail = self.text[self.starts[tail_start] : self.ends[self.i - 1]]
        self.expect(RBRACE, "expects layout to end with kRbrace")
        return Layout(tuple(m2m), tail)

    def layout_tail(self) -> None:
        # Each part is optional and comes in this order; as in XLA, a part that
        # does not parse leaves the rest to the closing brace.
        def part(letter: str) -> bool:
            if self.at_ident(letter):
                self.i += 1
                return True
            return False

        def int_in_parens():
            self.expect(LPAREN, "expects ( in layout")
            v = self.int64()
            self.expect(RPAREN, "expects ) in layout")
            return v

        def tolerant(fn):
            try:
                return fn()
            except _Fail:
                return None

        if part("D"):
            def dim_level():
                if self.at(IDENT) and self.texts[self.i] in ("D", "C", "S", "H"):
                    self.i += 1
                    self.eat(PLUS)
                    self.eat(TILDE)
                    return True
                raise self.fail("expected a DimLevelType abbreviation (D, C, or S)")

            tolerant(lambda: self.listing(LPAREN, RPAREN, COMMA, dim_level))
        if part("T"):
            def tiles():
                while True:
                    def tile_dim():
                        if self.at(INT):
                            return self.int64()
                        if self.eat(ASTERISK):
                            return _TILE_COMBINE
                        raise self.fail("expects integer")

                    self.listing(LPAREN, RPAREN, COMMA, tile_dim)
                    if not self.at(LPAREN):
                        return

            tolerant(tiles)
        if part("L"):
            tolerant(int_in_parens)
        for mark in (OCTOTHORP, ASTERISK):
            if self.eat(mark):
                def unsigned_type():
                    self.expect(LPAREN, "expects ( in layout")
                    if not self.at(PRIMITIVE):
                        raise self.fail("expected primitive type")
                    if self.texts[self.i] not in ("u1", "u2", "u4", "u8", "u16", "u32", "u64"):
                        raise self.fail("expecting an unsigned integer type")
                    self.i += 1
                    self.expect(RPAREN, "expects ) in layout")

                tolerant(unsigned_type)
        if part("E"):
            tolerant(int_in_parens)
        if part("S"):
            tolerant(int_in_parens)
        if part("SC"):
            def split_configs():
                while True:
                    self.expect(LPAREN, "expects split configs to start with kLparen")
                    self.int64()
                    self.listing(COLON, RPAREN, COMMA, self.int64)
                    if not self.at(LPAREN):
                        return

            tolerant(split_configs)
        if part("P"):
            def physical():
                self.expect(LPAREN, "expects physical shape to start with kLparen")
                tolerant(self._shape)
                self.expect(RPAREN, "expects physical shape to end with kRparen")

            tolerant(physical)
        if part("M"):
            tolerant(int_in_parens)

    # -- literals ----------------------------------------------------------------
    def literal(self, shape: Shape) -> None:
        """A literal of `shape` (checked: nesting, counts, value ranges)."""
        self.enter()
        try:
            if shape.is_tuple:
                self.expect(LPAREN, "expects '(' in front of tuple elements")
                elements = shape.tuple_shapes
                if not self.at(RPAREN):
                    for k, element in enumerate(elements):
                        if k > 0:
                            self.eat(COMMA)
                        try:
                            self.literal(element)
                        except _Fail as err:
                            raise err
                self.expect(RPAREN, f"expects ')' at the end of the tuple with {len(elements)}elements")
                return
            if not shape.is_array:
                raise self.fail(f"cannot write a literal of shape {_human(shape)}")
            self.dense_literal(shape)
        finally:
            self.depth -= 1

    def dense_literal(self, shape: Shape) -> None:
        soft: list[_Fail] = []  # errors XLA records but reads on after (reported if the literal fails)
        try:
            self._dense_literal(shape, soft)
        except _Fail as err:
            raise soft[0] if soft else err

    def _dense_literal(self, shape: Shape, soft: list) -> None:
        dims = shape.dims
        rank = len(dims)
        et = shape.element_type
        seen = [0] * rank
        nest = 0
        linear = 0
        n_elements = math.prod(dims) if all(d >= 0 for d in dims) else 0
        kinds, texts = self.kinds, self.texts
        n = len(kinds)
        is_complex = et in ("c64", "c128")
        is_int = et[0] in "su" or et == "pred"

        def index_str(dim: int) -> str:
            return "[" + ",".join(str(x - 1) for x in seen[:dim]) + "]"

        def element_problem() -> str | None:
            if rank > 0:
                if nest != rank:
                    return f"expects nested array in rank {rank}, but sees {nest}"
                seen[rank - 1] += 1
                if seen[rank - 1] > dims[rank - 1]:
                    return f"expects {dims[rank - 1]} elements on the minor-most dimension, but sees more"
            return None

        while True:
            i = self.i
            k = kinds[i] if i < n else 0
            if k == LBRACE:
                nest += 1
                if nest > rank:
                    raise self.fail(f"expects nested array in rank {rank}, but sees larger")
                if nest > 1:
                    seen[nest - 2] += 1
                    if seen[nest - 2] > dims[nest - 2]:
                        raise self.fail(
                            f"expects {dims[nest - 2]} elements in the {index_str(nest - 2)}th element, but sees more"
                        )
                self.i += 1
            elif k == RBRACE:
                if nest == 0:
                    raise self.fail("unexpected '}' token")
                nest -= 1
                if seen[nest] != dims[nest]:
                    raise self.fail(
                        f"expects {dims[nest]} elements in the {index_str(nest)}th element, but sees {seen[nest]}"
                    )
                seen[nest] = 0
                self.i += 1
            elif k == DOTS:
                if nest != 1:
                    raise self.fail(f"expects `...` at nest level 1, but sees it at nest level {nest}")
                seen[0] = dims[0]
                self.i += 1
            elif k == COMMA:
                self.i += 1
            elif k == LPAREN or k in (INT, DECIMAL, NEGINF) or (k == KEYWORD and texts[i] in ("true", "false", "inf")):
                if k == LPAREN:
                    if not is_complex:
                        raise self.fail("unexpected '(' in literal. Parens are only valid for complex literals")
                    problem = element_problem()
                    if problem:  # here XLA stops at a miscounted element
                        raise self.fail(problem)
                    self.i += 1
                    real_loc = self.i
                    try:
                        real = self.double()
                    except _Fail:
                        raise self.fail("expect floating-point value for real part of complex number", real_loc) from None
                    if not self.at(COMMA):
                        raise self.fail("expect comma after real part of complex literal")
                    self.i += 1
                    imag_loc = self.i
                    try:
                        imag = self.double()
                    except _Fail:
                        raise self.fail("expect floating-point value for imaginary part of complex number", imag_loc) from None
                    if not self.at(RPAREN):
                        raise self.fail("expect ')' after complex number")
                    self.i += 1
                    value = complex(real, imag)
                    t = texts[real_loc]
                else:
                    problem = element_problem()
                    if problem:
                        soft.append(self.fail(problem))
                    t = texts[i]
                    if k == KEYWORD and t in ("true", "false"):
                        if et != "pred":
                            raise self.fail(f"a {t} value in a literal of type {et.upper()}: only PRED takes true or false")
                        self.i += 1
                        value = t == "true"
                    elif is_int:
                        if k != INT:
                            raise self.fail(f"expects integer for primitive type: {et.upper()}")
                        value = int_value(t)
                        self.i += 1
                    elif not is_complex:
                        try:
                            value = self.double()
                        except _Fail as err:
                            if err.reason.startswith("Constant is out of range"):
                                raise
                            raise self.fail(f"expect floating point value for primitive type: {et.upper()}", i) from None
                    else:
                        raise self.fail(f"unsupported primitive type {et.upper()}")
                problem = check_literal_value(et, value, t, shape, linear)
                if problem is None and linear >= n_elements:
                    problem = (f"tries to set value {t} to a literal in shape {_human(shape)} at linear index "
                               f"{linear}, but the index is out of range")
                if problem:
                    raise self.fail(problem, i)
                linear += 1
            else:
                raise self.fail("unexpected token type in a literal")
            if nest <= 0:
                return

    def tuple_literal_with_shape(self) -> None:
        """`literal=` of a custom call: a shape then a literal, or a `(...)` tuple of those."""
        self.enter()
        try:
            if self.eat(LPAREN):
                while not self.at(RPAREN):
                    if self.i >= len(self.kinds):
                        raise self.fail("expects ')' to close a tuple literal")
                    try:
                        self.tuple_literal_with_shape()
                    except _Fail:
                        raise self.fail("Fails when parsing tuple element") from None
                    if not self.at(RPAREN):
                        self.eat(COMMA)
                self.expect(RPAREN, "expects ')' to close a tuple literal")
                return
            shape = self.shape()
            self.literal(shape)
        finally:
            self.depth -= 1

    # -- module assembly ------------------------------------------------------------
    def finish_module(self, entry: HloComputation | None) -> HloModule:
        comps = self.computations
        if entry is None:
            entry = comps[-1]
        module = HloModule.__new__(HloModule)
        module.name = ""
        module.computations = []
        module._by_name = {}
        module.header_attributes = {}
        module.stack_frames = {}
        module._stack_frame_text = ""
        module._uniq = {}
        module._positions = self.positions
        module.entry = entry
        comp_names = NameUniquer()
        instr_names = NameUniquer()
        # Computation names as the lexer read them: clean but for type names and a leading "__".
        new_names = comp_names.unique_all([sanitized(c.name) if renamed(c.name) else c.name for c in comps])
        # Instruction names are clean: the parser refused the ones XLA would rename. Those of a module XLA
        # wrote are unique already: then nothing is renamed.
        renames = not kept_as_written([instr.name for comp in comps for instr in comp.instructions])
        for comp, name in zip(comps, new_names):
            comp.name = name
            comp.module = module
            instrs = comp.instructions
            if renames:
                for instr, name in zip(instrs, instr_names.unique_all([instr.name for instr in instrs])):
                    instr.name = name
            comp._by_name = {instr.name: instr for instr in instrs}
            module.computations.append(comp)
            module._by_name[comp.name] = comp
        entry.is_entry = True
        # Control predecessors are written by name: write them with the names the module now has.
        for instr, control in self.control.items():
            instr._raw_store["control-predecessors"] = "{" + ", ".join("%" + p.name for p in control) + "}"
            if instr._pos is not None:
                instr._pos.pop("control-predecessors", None)
        callers: dict[int, int] = {}
        for instr in self.async_state:
            if instr.opcode == "async-start":
                called = instr._called.get("calls")
                callers[id(called)] = callers.get(id(called), 0) + 1
        for comp in comps:
            if callers.get(id(comp), 0) > 1:
                raise HloParseError(
                    f"Computation {comp.name} is called by more than one async op.", text=self.text, pos=0,
                    source=self.source,
                )
        return module


_JSON_STRING_TEXT = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_JSON_STRING = re.compile(_JSON_STRING_TEXT)
_JSON_PLAIN = re.compile(r'[^"{}]+')


def _json_nested(depth: int) -> str:
    inner = rf'(?:[^"{{}}]++|{_JSON_STRING_TEXT})*+'
    for _ in range(depth):
        inner = rf'(?:[^"{{}}]++|{_JSON_STRING_TEXT}|\{{{inner}\}})*+'
    return rf"\{{{inner}\}}"


# A JSON dict nested up to 8 levels, in one match (the loop below reads deeper ones).
_JSON_DICT = re.compile(_json_nested(8))


def json_dict_end(text: str, pos: int) -> int | None:
    """Where the JSON dict opening at `text[pos]` ('{') ends: its braces balanced outside strings, as XLA's
    LexJsonDict reads it; None if it does not close. (Both readers check a JSON value with this.)"""
    m = _JSON_DICT.match(text, pos)
    if m is not None:
        return m.end()
    depth = 0
    n = len(text)
    while pos < n:
        c = text[pos]
        if c == '"':
            m = _JSON_STRING.match(text, pos)
            if m is None:
                return None
            pos = m.end()
        elif c == "{":
            depth += 1
            pos += 1
        elif c == "}":
            depth -= 1
            pos += 1
            if not depth:
                return pos
        else:
            pos = _JSON_PLAIN.match(text, pos).end()
    return None


# The attributes after a computation's closing brace.
COMPUTATION_ATTRIBUTES = {"execution_thread": (False, "string")}
HEADER_ATTRIBUTES = {
    "is_scheduled": (False, "bool"),
    "replica_count": (False, "int64"),
    "num_partitions": (False, "int64"),
    "input_output_alias": (False, "aliasing"),
    "buffer_donor": (False, "buffer_donor"),
    "alias_passthrough_params": (False, "bool"),
    "entry_computation_layout": (False, "computation_layout"),
    "frontend_attributes": (False, "frontend_attributes"),
    "allow_spmd_sharding_propagation_to_parameters": (False, "bool_list_or_bool"),
    "allow_spmd_sharding_propagation_to_output": (False, "bool_list_or_bool"),
    "origin_recovery_table": (False, "original_value_recovery_table"),
}


def signature_mismatch(name: str, shape: Shape, comp: HloComputation) -> str:
    return (f"Shape of computation {name}, {_human(shape)}, is not compatible with that of its root instruction "
            f"{comp.root.name}, {_human(comp.root.shape)}")


def _decimal(text: str) -> float:
    """The double a DECIMAL token holds (`nan(0x...)`, `-nan` included)."""
    if text[-1] == ")" or text.lstrip("-").startswith("nan"):
        return math.nan
    return float(text)


def _human(shape: Shape, with_layout: bool = False) -> str:
    return str(shape if with_layout else shape.without_layout())


def leaf_count(shape: Shape) -> int:
    if shape.is_tuple:
        return sum(leaf_count(s) for s in shape.tuple_shapes)
    return 1


def _subshape(shape: Shape, index) -> Shape | None:
    for k in index:
        if not shape.is_tuple or not 0 <= k < len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[k]
    return shape


def _has_physical_shape(layout: Layout) -> bool:
    return re.search(r"(?:^|[)\s])P\(", layout.tail) is not None


_TILES = re.compile(r"T((?:\([^()]*\))+)")


def shape_problem(shape: Shape, in_tuple: bool = False) -> str | None:
    """Why XLA's `ShapeUtil::ValidateShapeWithOptionalLayout` refuses `shape`, or None."""
    if shape.is_tuple:
        for s in shape.tuple_shapes:
            p = shape_problem(s)
            if p is not None:
                return p
        return None
    if shape.is_buffer:
        return shape_problem(shape.tuple_shapes[0])
    if not shape.is_array:
        return None
    product = 1
    for k, d in enumerate(shape.dims):
        if d == -1 and shape.dynamic[k]:
            continue
        if d < 0:
            return f"Negative dimension at index {k}: {d}."
        product *= d
    from ._shape import PRIMITIVE_BYTES

    if product >= 1 << 63 or product * max(1, PRIMITIVE_BYTES.get(shape.element_type, 1)) >= 1 << 63:
        return f"Shape {shape} size may overflow int64_t."
    layout = shape.layout
    if layout is None:
        return None
    m2m = layout.minor_to_major
    rank = len(shape.dims)
    if len(m2m) != rank:
        return f"layout minor_to_major field contains {len(m2m)} elements, but shape has {rank} dimensions"
    seen = set()
    for d in m2m:
        if not 0 <= d < rank:
            return f"layout minor_to_major field has out-of-bounds value: {{{', '.join(map(str, m2m))}}}"
        if d in seen:
            return f"layout minor_to_major field has duplicate values: {{{', '.join(map(str, m2m))}}}"
        seen.add(d)
    tail = layout.tail
    if tail:
        m = re.search(r"(?:^|[)\s])L\((-?\d+)\)", tail)
        if m and int(m.group(1)) <= 0:
            return f"layout tail_padding_alignment_in_elements field is <= 0: {{{m.group(1)}}}"
        if re.search(r"(?:^|[)\s])[#*]\(", tail):
            return "layout has a index_primitive_type or pointer_primitive_type, but is not a sparse array"
        if _has_physical_shape(layout):
            return "layout has a physical_shape, but is not a sparse array"
        t = _TILES.search(tail)
        if t:
            for group in re.findall(r"\(([^()]*)\)", t.group(1)):
                parts = [p.strip() for p in group.split(",") if p.strip()]
                if not parts:
                    return "layout has invalid tiles"
                for p in parts:
                    if p != "*" and int(p) <= 0:
                        return f"layout has invalid tiles: tile dimension {p} must be positive or kCombineDimension"
        e = re.search(r"(?:^|[)\s])E\((-?\d+)\)", tail)
        if e and int(e.group(1)) < 0:
            return f"layout element_size_in_bits field is negative: {e.group(1)}"
    return None


# The form XLA prints of a shape, read from its text by `printed_shape` (the fast path reads shapes so; so does
# `Parser.shape` for an array shape written so): dimensions and layouts of numbers within int64, no dynamic
# dimensions or layout tails; tuple elements after `/*index=N*/` comments as XLA's printer writes them.
_DIMENSION = r"(?:0|[1-9][0-9]{0,17})"
_DIMENSIONS = rf"{_DIMENSION}(?:,{_DIMENSION})*"
_PRINTED_ARRAY_TEXT = rf"[a-z][a-z0-9]*\[(?:{_DIMENSIONS})?\](?:\{{{_DIMENSIONS}\}})?"
_PRINTED_ARRAY = re.compile(rf"([a-z][a-z0-9]*)\[((?:{_DIMENSIONS})?)\](?:\{{({_DIMENSIONS})\}})?")
_PRINTED_ARRAY_IN_TUPLE = re.compile(_PRINTED_ARRAY_TEXT)
_TUPLE_ELEMENT = rf"(?:/\*index=[0-9]+\*/)?{_PRINTED_ARRAY_TEXT}"
_PRINTED_TUPLE = re.compile(rf"\((?:{_TUPLE_ELEMENT}(?:,[ \t]*{_TUPLE_ELEMENT})*)?\)")
_DATA_TYPES = PRIMITIVE_TYPES - {"token", "opaque"}


def printed_shape(text: str, cache: dict | None = None) -> Shape | None:
    """The shape `Parser.shape` reads from `text` where it is in the form XLA prints, read from the text alone;
    None for any other text (the parser reads it, and refuses it if XLA does). `cache`: shapes by text, for the
    elements of a tuple."""
    if text[:1] != "(":
        return _printed_array(text)
    if _PRINTED_TUPLE.fullmatch(text) is None:
        return None
    elements = []
    for element_text in _PRINTED_ARRAY_IN_TUPLE.findall(text):
        element = (cache.get(element_text) if cache is not None else None) or _printed_array(element_text)
        if element is None or shape_problem(element, in_tuple=True) is not None:
            return None
        if cache is not None:
            cache[element_text] = element
        elements.append(element)
    return Shape("tuple", tuple_shapes=tuple(elements))


def _printed_array(text: str) -> Shape | None:
    m = _PRINTED_ARRAY.fullmatch(text)
    if m is None or m.group(1) not in _DATA_TYPES:
        return None
    dims = tuple(map(int, m.group(2).split(","))) if m.group(2) else ()
    layout = None
    if m.group(3) is not None:
        minor_to_major = tuple(map(int, m.group(3).split(",")))
        if len(minor_to_major) != len(dims):
            return None  # the parser says why
        layout = Layout(minor_to_major, "")
    return Shape(m.group(1), dims, (False,) * len(dims), layout)


_VALUE_PARSERS: dict = {}
# The forms XLA prints of some value types (see `printed_value`): type -> (pattern, value, checked).
PRINTED_VALUES: dict[str, tuple[str, object, bool]] = {}


def value_parser(*types: str):
    """Register a parser for attribute values of the given types (XLA's AttrTy)."""

    def register(fn):
        for t in types:
            _VALUE_PARSERS[t] = fn
        return fn

    return register


def printed_value(kind: str, pattern: str, value=None, checked: bool = False) -> None:
    """Register the form XLA prints of values of type `kind`, next to their reader (`_values`): `pattern`, a
    regular expression of texts the reader accepts; `value`, the function from such a text to what the reader
    returns (None: the fast path reads the text with the reader, or resolves its names itself); `checked`: the
    pattern admits texts the reader refuses, and `value` raises ValueError for those. The fast path
    (`_fastpath`) builds its attribute patterns from these forms."""
    PRINTED_VALUES[kind] = (pattern, value, checked)
