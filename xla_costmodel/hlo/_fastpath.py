"""Fast path for HLO text laid out as XLA prints it: one instruction per line.

XLA writes every instruction on one line, so a line is recognised by one
regular expression and only the pieces we keep (names, shapes, attribute
texts) are touched from Python. Every check XLA's parser makes is made here
too, mostly inside compiled patterns:

- the attribute list of a line is matched against a pattern of the opcode's
  schema (`_Schema`, from its rule in `_opcodes`): only the attributes the
  opcode allows, each value in the form XLA prints it. A list in an order
  seen before (XLA prints each opcode's attributes in one order) is checked
  and split into its attributes by one match of that order's pattern;
- values with a richer grammar (shardings, windows, literals, ...) are read
  by the token parser's own value readers, once per distinct text; shapes
  once per distinct text for all modules (they are values);
- operands, counts, called computations and the opcode's check (which
  infers a shape not written) go through the same rules as the token parser.

Comments are blanked out, and an instruction written over several lines (as
people write them in tests) is read from its lines joined; texts kept
verbatim are then taken from the text itself.

Large modules repeat a few kinds of line: the same opcode, shape and
attributes under other names. The first line of a kind is read with every
check (`_FastReader._instruction`) and what it made is remembered; the lines
like it then take that (`_FastReader.read`), with the checks that look at
more than their text (names, operands as many and, where the rule looks at
them, of the same shapes; the computation called, where each line calls one
of its own). The verifier then checks only the first instruction of each kind
(`fast_parse`'s `firsts`).

The fast path is an accelerator, not a second grammar: on anything it does
not recognise (async ops and send/recv, nested instructions, ...), or any
check that fails, it gives up and the token parser (`_token_parser.Parser`) reads
the text instead, which also reports errors. For every text it accepts it
builds exactly the graph the token parser builds: `tests/test_hlo_fuzz.py`
checks that on mutated text, `tests/test_hlo_xla_corpus.py` on XLA's tests.

One parser design (issue 34; docs/CONTRIBUTING.md). Each fact of what a
line means has one home, in the token parser's modules, and this module
compiles its patterns from it or calls it:

- the shape of a line (header, computation, signature, parameter,
  instruction, operand, attribute, closing brace): the token parser's
  `LINE_SHAPES`, whose keywords, punctuation and errors its productions use;
  every line pattern here is compiled from it (`_line`), with the extent of
  each part (a name, a shape, an opcode, a value) given here;
- the checks that need more than a line's shape (one ROOT, one ENTRY, names
  taken, operand counts and shapes, required, repeated and unknown
  attributes, a signature's result, where a module may start): methods of
  the token parser (`Parser.take_root`, `check_required`, ...) that both
  readers call; where one fails here (`_Fail`) the fast path gives up and the
  token parser reports the error;
- tokens and names: `_lexer` (IDENT_PATTERN, PRINTED_STRING,
  ONE_LINE_COMMENT, the bracketed extents, NOT_NAMES); XLA's renaming rule:
  `_names.renamed`;
- attribute values: `_values` registers, next to each reader, the form XLA
  prints of its values and the function from that text to what the reader
  returns (`_token_parser.printed_value`); enum and metadata patterns are
  generated from the readers' own sets and tables; JSON dicts:
  `_token_parser.json_dict_end`; which attributes an opcode takes, their
  types, and its checks: `_opcodes`;
- shapes: `_token_parser.printed_shape`, which the token parser's shape
  production uses too; the entry computation layout's form: `_values`;
- the generic attributes' checks and the computation attributes:
  `Parser.generic_checks`, `Parser.computation_attributes` with
  `COMPUTATION_ATTRIBUTES`; the module header's: `HEADER_ATTRIBUTES`.

What the fast path states of its own is the subset it reads: names that
XLA neither renames nor reads as another token (`NOT_NAMES`, with `%` or
without), the extents of parts, printed values and shapes. How the restated lines were counted: docs/CONTRIBUTING.md, "One
parser design".
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .._gc import gc_paused
from . import _opcodes
from ._ir import HloComputation, HloInstruction, HloModule
from ._lexer import (
    IDENT_PATTERN, KEYWORD, NOT_NAMES, ONE_LINE_BRACKETED, ONE_LINE_COMMENT, ONE_LINE_PLAIN, PRINTED_STRING,
)
from ._names import renamed
from ._opcodes import CALLED_TYPES, RULES, Check, Problem, _Builder, new_instruction
from ._token_parser import (
    HEADER_ATTRIBUTES, _VALUE_PARSERS, COMPUTATION_ATTRIBUTES, LINE_SHAPES, PRINTED_VALUES, Parser, _Fail,
    printed_shape,
)
from ._values import layout_shape_texts, printed_items  # (importing it fills PRINTED_VALUES)
from ._shape import Shape

__all__ = ["entry_layout_shapes", "fast_parse"]


class _GiveUp(Exception):
    """The fast path cannot read this text; the token parser will. (So does an error of one of the token
    parser's checks that the fast path calls, `_Fail`: then the token parser reports it, where it is.)"""


# -- line patterns ----------------------------------------------------------------------------

# The tokens (`_lexer`): a string and a block comment as XLA prints them, an identifier (possessive here: what
# follows one never starts with a name character), a name (`%` optional) and a reference to one.
_STR = PRINTED_STRING
_COMMENT = ONE_LINE_COMMENT
_KEY = IDENT_PATTERN + "+"
_NAME = rf"%{_KEY}|{_KEY}"
_REF = rf"%?{IDENT_PATTERN}"
_CONTENT = ONE_LINE_BRACKETED
_DEPTH0 = ONE_LINE_PLAIN
_ARRAY_SHAPE = r"[a-z][a-z0-9]*\[[0-9,<=? \t]*\](?:\{[0-9, \t]*(?::[^{}\n]*)?\})?"
_SHAPE = rf"\({_CONTENT}\)|{_ARRAY_SHAPE}"
_SHAPE_START = r"[a-z][a-z0-9]*\[|\("
_OPCODE = r"[a-z][a-z0-9\-]*+"
# Any attribute value: its extent only (the opcode's pattern checks it).
_VALUE = rf"(?:{_DEPTH0}++|{_STR}|[{{\[(]{_CONTENT}[}}\])])++"
_BLANKS = r"[ \t]*"


class _Extent(NamedTuple):
    """How a line pattern takes a part of a line shape."""

    pattern: str
    group: bool = True  # a group of its own
    padded: bool = False  # it takes the blanks around it itself (a list of attributes, bracketed content)


def _line(shape: str, parts: dict, lead: str = _BLANKS, end: str = _BLANKS, groups: bool = True) -> str:
    """The pattern of a line shape of the token parser (`LINE_SHAPES`): keywords and punctuation as written,
    blanks between pieces but glued ones, each part by its extent in `parts` (a pattern, or an `_Extent`),
    else by its own line shape's pattern or, for a list, its items'. An optional keyword and each part are a
    group (`groups`) but where their extent says not; a required keyword is none."""
    out = [lead]
    blank = False  # blanks go before the next piece
    for piece in LINE_SHAPES[shape]:
        if piece.kind == KEYWORD:
            word = rf"{re.escape(piece.text)}[ \t]+"
            out.append(f"({word})?" if piece.optional and groups else f"(?:{word})?" if piece.optional else word)
            blank = False
            continue
        if piece.kind:
            out.append((_BLANKS if blank and not piece.glued else "") + re.escape(piece.text))
            blank = True
            continue
        extent = parts.get(piece.text)
        if extent is None:
            extent = _Extent(_list_of(piece, parts) if piece.items else _line(piece.text, parts, "", "", groups),
                             padded=bool(piece.items) and not piece.separator)
        elif isinstance(extent, str):
            extent = _Extent(extent)
        text = f"({extent.pattern})" if extent.group and groups else f"(?:{extent.pattern})"
        out.append(_BLANKS if blank and not extent.padded else "")
        blank = not extent.padded
        if piece.optional:  # with the blanks after it: none are taken where it is not written
            text = f"(?:{text}{_BLANKS if blank else ''})?"
            blank = False
        out.append(text)
    out.append(end)
    return "".join(out)


def _list_of(piece, parts: dict) -> str:
    """The pattern of a list piece: its items (each without groups) separated as the line shape says, with
    blanks around the separator; a list without a separator: each item after blanks."""
    extent = parts.get(piece.items)
    item = _line(piece.items, parts, "", "", False) if extent is None else getattr(extent, "pattern", extent)
    if not piece.separator:
        return rf"(?:{_BLANKS}(?:{item}))*"
    return rf"(?:(?:{item})(?:{_BLANKS}{re.escape(piece.separator)}{_BLANKS}(?:{item}))*)?"


def _start(shape: str, follow: str) -> str:
    """What starts a line of `shape`: its optional keyword and a blank, or its name and the punctuation right
    after it, then `follow`."""
    pieces = LINE_SHAPES[shape]
    k = next(k for k, piece in enumerate(pieces) if piece.text == "name")
    marks = ""
    for piece in pieces[k + 1:]:
        if not piece.kind or piece.optional:
            break
        marks += rf"{_BLANKS}{re.escape(piece.text)}"
    keywords = [rf"{re.escape(piece.text)}[ \t]" for piece in pieces[:k] if piece.kind == KEYWORD]
    return rf"[ \t]*(?:{'|'.join(keywords + [rf'{_REF}{marks}{_BLANKS}(?:{follow})'])})"


def _first_marks(shape: str, after: str) -> str:
    """The punctuation a line of `shape` may go on with after its piece `after` (a character class)."""
    pieces = LINE_SHAPES[shape]
    marks = []
    for piece in pieces[next(k for k, piece in enumerate(pieces) if piece.text == after) + 1:]:
        first = piece if piece.kind or piece.text not in LINE_SHAPES else LINE_SHAPES[piece.text][0]
        marks.append(first.text)
        if not piece.optional:
            break
    return "[" + "".join(re.escape(mark) for mark in marks) + "]"


_OPERANDS = next(piece for piece in LINE_SHAPES["instruction"] if piece.text == "operands")
_INSTRUCTION = re.compile(_line("instruction", {
    "name": rf"%{_KEY}|{_KEY}(?!=)",  # (XLA's lexer reads `name=` as an attribute's name)
    "shape": _SHAPE, "opcode": _OPCODE, "operands": _Extent(_CONTENT, padded=True),
    "attributes": _Extent(".*", padded=True),
}, end=""))
# The first line of a computation; `_COMPUTATION_SIGNED`, the same with its signature checked (groups 3 to 5,
# the signature, its parameters, its result).
# (A block comment may come before a parameter or an operand: XLA prints `/*index=5*/` before some.)
_COMMENT_LEAD = rf"(?:{_COMMENT}[ \t]*)?"
_PARAMETER_PARTS = {"name": _Extent(_REF, group=False), "shape": _SHAPE}
_PARAMETER_ITEM = _line("parameter", _PARAMETER_PARTS, _COMMENT_LEAD, "", False)
_COMPUTATION = re.compile(_line("computation", {"name": _NAME, "parameters": _Extent(_CONTENT, padded=True),
                                                "shape": _SHAPE}))
_COMPUTATION_SIGNED = re.compile(_line("computation", {"name": _NAME, "parameter": _PARAMETER_ITEM, "shape": _SHAPE}))
_SIGNATURE = re.compile(_line("signature", {"parameter": _PARAMETER_ITEM, "shape": _SHAPE}, "", ""))
_PARAMETER = re.compile(_line("parameter", _PARAMETER_PARTS, _COMMENT_LEAD, ""))


def _attribute(key: str, value: str, group: bool = True) -> str:
    """An attribute `, key=value` (`key` a pattern; `value`'s a group)."""
    return _line("attribute", {"key": _Extent(key, group=False), "value": _Extent(value, group=group)}, "", "")


# A computation's closing line: its attributes (`COMPUTATION_ATTRIBUTES`) in the table's order, a group each.
_CLOSE = re.compile(_line("close", {"attributes": _Extent("".join(
    rf"(?:{_BLANKS}{_attribute(re.escape(key), PRINTED_VALUES[kind][0])})?"
    for key, (_, kind) in COMPUTATION_ATTRIBUTES.items()
), group=False, padded=True)}))
# Operands with shapes and comments (names alone are looked up without a pattern).
_SHAPED_OPERAND = re.compile(_line("operand", {"name": _NAME, "shape": _SHAPE}, _COMMENT_LEAD, ""))
_SHAPED_OPERANDS = re.compile(_BLANKS + _list_of(_OPERANDS, {
    "operand": _line("operand", {"name": _NAME, "shape": _SHAPE}, _COMMENT_LEAD, "", False)}) + _BLANKS)
_HEADER = re.compile(_line("header", {"name": _NAME, "value": _Extent(_VALUE, group=False), "key": _KEY},
                           r"[ \t\n]*", r"[ \t]*(?:\n|$)"))
_ATTRIBUTE = re.compile(_attribute(f"({_KEY})", _VALUE))
# An entry computation layout in the form XLA prints (`_values`); its shapes are read one by one.
_ENTRY_LAYOUT = re.compile(PRINTED_VALUES["computation_layout"][0])
_PARAMETER_NUMBER = re.compile(r"[ \t]*([0-9]{1,18})[ \t]*")
# Where the first computation starts; what starts a line that is not the continuation of the one before.
_PRELUDE_END = re.compile("^" + _start("computation", _first_marks("computation", "name")), re.M)
_STATEMENT_START = re.compile(
    _start("instruction", rf"{_SHAPE_START}|{_OPCODE}{_BLANKS}{_first_marks('instruction', 'opcode')}")
)

# -- attribute value patterns, by value type ----------------------------------------------------


def _value_pattern(kind: str) -> str:
    """The form XLA prints of a value of type `kind` (`_values`), else any value's extent."""
    printed = PRINTED_VALUES.get(kind)
    return _VALUE if printed is None else printed[0]


class _Schema:
    """What one opcode (with one set of allowed attributes) accepts after its operands.

    Any order is checked by `any_order`, a pattern of the allowed attributes with the form of each value;
    the list is then split into its attributes. Lists in an order seen before (XLA prints each opcode's
    attributes in one order) are checked and split in one match of that order's pattern.
    """

    __slots__ = ("attrs", "any_order", "special", "validated", "checked", "reads", "orders")
    MAX_ORDERS = 8

    def __init__(self, attrs: dict, reads: frozenset):
        self.attrs = attrs
        alternatives = "|".join(
            _attribute(re.escape(k), _value_pattern(t), False) for k, (_, t) in sorted(attrs.items())
        )
        self.any_order = re.compile(rf"(?:{_BLANKS}(?:{alternatives}))*+{_BLANKS}").fullmatch
        # Values read to check them (those without a printed form; the others are checked by their pattern
        # alone, or by its function where the form is `checked`), values the opcode's check reads, and
        # computations to resolve.
        self.validated = frozenset(
            k for k, (_, t) in attrs.items() if t not in PRINTED_VALUES or k == "control-predecessors"
        ) - {k for k, (_, t) in attrs.items() if t in CALLED_TYPES}
        self.checked = frozenset(k for k, (_, t) in attrs.items() if t in PRINTED_VALUES and PRINTED_VALUES[t][2])
        self.reads = frozenset(k for k in reads if k in attrs and attrs[k][1] not in CALLED_TYPES)
        self.special = self.validated | self.checked | self.reads | {
            k for k, (_, t) in attrs.items() if t in CALLED_TYPES
        }
        self.orders: list[_Order] = []

    def learn(self, keys: tuple) -> None:
        if keys and len(self.orders) < self.MAX_ORDERS and all(o.keys != keys for o in self.orders):
            self.orders.insert(0, _Order(self, keys))


class _Order:
    """The attributes of one schema in one order, each optional: one match checks and splits a list."""

    __slots__ = ("keys", "match")

    def __init__(self, schema: _Schema, keys: tuple):
        self.keys = keys
        self.match = re.compile(
            "".join(rf"(?:{_BLANKS}{_attribute(re.escape(k), _value_pattern(schema.attrs[k][1]))})?" for k in keys)
            + _BLANKS
        ).fullmatch


# -- the reader -------------------------------------------------------------------------------------


class _FastReader:
    """Reads one text line by line, building the graph with a token parser's bookkeeping."""

    def __init__(self, text: str, source: str):
        self.text = text
        self.source = source
        self.p = Parser("", source)  # its bookkeeping (pool, computations, ...) without tokens
        self.p.text = text
        if len(_SHAPES) > _CACHE_LIMIT:
            _SHAPES.clear()
            _LITERALS.clear()
        self.shape_cache = _SHAPES  # shapes are values: one reading of a text serves every module
        self.memo: dict = {}  # other values, for this text alone
        # What a line made, by what it says but for names: (opcode, shape text, attribute texts), or that with
        # the computation called left out (`_callee_key`) -> an entry (see `_remember`).
        self.made: dict[tuple, tuple] = {}
        # The instructions, in order, but those like an earlier one in all the verifier's rules look at: made
        # from the same entry of `made` (opcode, shape, attributes, called computations), with operands of the
        # same shapes.
        self.firsts: list[HloInstruction] = []
        self.parameter_numbers: dict[str, int] = {}  # the text in `parameter(...)` -> its number
        self.programs: dict[int, tuple] | None = None  # id(computation) -> its program key, if asked for
        self.builder = None
        self.signature: Shape | None = None
        self.entry: HloComputation | None = None
        self.root_name: str | None = None
        self.entry_layout: tuple | None = None  # (text, parameter shapes, result shape), read with the header

    # the module ----------------------------------------------------------------------------
    def read(self) -> HloModule:
        start = self._prelude_end()
        header = self._prelude(start)
        self.no_header = header is None
        lines = self.text[start:].split("\n")
        self.lines = lines
        offset = start
        i = 0
        n = len(lines)
        fullmatch = _INSTRUCTION.fullmatch
        made = self.made
        firsts = self.firsts
        positions = self.p.positions
        check_new = self.p.check_new_instruction
        check_new_parameter = self.p.check_new_parameter
        refs = instructions = params = None  # those of the computation being read
        numbers = self.parameter_numbers
        while i < n:
            line = lines[i]
            line_start = offset
            offset += len(line) + 1
            i += 1
            if refs is not None:
                m = fullmatch(line)
                entry = None
                if m is not None:
                    # An instruction line. One like a line read before but for its names (the usual line)
                    # takes what that line made: what was read and checked then holds (the same shape and
                    # attribute texts, the same computations called; operands as many, and of the same shapes
                    # where the opcode's rule looks at them). Names are checked as `_instruction` checks them.
                    is_root, written, shape_text, opcode, inside, tail = m.groups()
                    entry = made.get((opcode, shape_text, tail))
                    callee = None
                    if entry is None and tail and ("calls=" in tail or "to_apply=" in tail):
                        # Like a line before but for the computation it calls, too (see `_callee_key`)?
                        callee = _CALLEE.search(tail)
                        if callee is not None:
                            entry = made.get((opcode, shape_text, tail[:callee.start(2)], tail[callee.end(2):]))
                    if entry is not None:
                        if opcode == "parameter" or opcode == "constant":
                            operands = []
                            shapes = ()
                        else:
                            # (Written out for one and two operands: the usual counts, twice as fast.)
                            try:
                                if ", " not in inside:
                                    operands = [refs[inside]]
                                else:
                                    first, _, rest = inside.partition(", ")
                                    if ", " in rest:
                                        operands = [refs[ref] for ref in inside.split(", ")]
                                    else:
                                        operands = [refs[first], refs[rest]]
                            except KeyError:
                                operands = self._operands(inside)  # shapes written, or names not plain
                            k = len(operands)
                            if k == 1:
                                shapes = (id(operands[0].shape),)
                            elif k == 2:
                                shapes = (id(operands[0].shape), id(operands[1].shape))
                            else:
                                shapes = tuple([id(op.shape) for op in operands])
                        if entry[4] is not None:
                            entry = entry[4].get(shapes)
                        elif entry[3] is not None and len(operands) != entry[3]:
                            entry = None
                    if entry is None and self._instruction(line, line_start, m=m):
                        continue
                if entry is not None:
                    name = written[1:] if written[0] == "%" else written
                    if name in NOT_NAMES or renamed(name):
                        raise _GiveUp  # (the fast path's rule for names: see `_instruction`)
                    check_new(refs, name, 0)
                    shape = entry[0]
                    raw = entry[1]
                    if opcode == "parameter":
                        number = numbers.get(inside)  # (`_parameter`, written out)
                        if number is None:
                            instr = self._parameter(name, shape, inside)
                        else:
                            check_new_parameter(params, number, 0)
                            instr = new_instruction(name, opcode, shape, operands)
                            instr.parameter_number = number
                            params[number] = instr
                    elif opcode == "constant":
                        instr = self._constant(name, shape, shape_text, inside)
                    else:
                        instr = new_instruction(name, opcode, shape, operands)
                    if raw:
                        instr._raw_store = raw.copy()
                        called = entry[2]
                        if called:
                            instr._called = called.copy()
                            if callee is not None:
                                instr._called[callee.group(1)] = self._computation(self.p.pool, callee.group(2))
                    if is_root:
                        self.root_name = self.p.take_root(self.root_name, name, 0)
                    instructions.append(instr)
                    refs[name] = instr
                    if written is not name:
                        refs[written] = instr
                    positions[id(instr)] = line_start + m.start(2)
                    # The first of its kind for the verifier (see `firsts`)? One calling a computation of its
                    # own is.
                    seen = entry[5]
                    if callee is not None:
                        firsts.append(instr)
                    elif shapes not in seen:
                        seen.add(shapes)
                        firsts.append(instr)
                    continue
            if not line or line.isspace():
                continue
            code = _code(line)  # the line without its comment
            if not code or code.isspace():
                continue
            if self.builder is None:
                self._open_computation(code)
                refs, instructions, params = self.refs, self.builder.instructions, self.builder.params
                continue
            # Without its comments: texts kept verbatim are then taken from the line itself.
            if code is not line and self._instruction(code, line_start, True):
                continue
            close = _CLOSE.fullmatch(code)
            if close is not None:
                self._close_computation(close)
                refs = instructions = params = None
                continue
            # An instruction written over several lines (as people write them; XLA never does).
            end = self._continuation_end(code, i)
            parts = [code] + [_code(lines[k]) for k in range(i, end)]
            for k in range(i, end):
                offset += len(lines[k]) + 1
            i = end
            joined = " ".join(parts)  # as long as the text it stands for: columns stay put
            if not _breaks_outside_strings(joined, parts) or not self._instruction(joined, line_start, True):
                raise _GiveUp
        if self.builder is not None or not self.p.computations:
            raise _GiveUp
        module = self.p.assemble(self.entry, header)
        module._entry_layout = self.entry_layout
        return module

    def _continuation_end(self, first: str, i: int) -> int:
        """The index past the last line of the instruction that starts with `first` (line i - 1)."""
        lines = self.lines
        depth = _depth(first)
        last = first
        while i < len(lines):
            nxt = _code(lines[i])
            if not nxt or nxt.isspace():
                i += 1
                continue
            open_ended = depth > 0 or last.rstrip()[-1:] in (",", "=")
            if not open_ended and (_STATEMENT_START.match(nxt) is not None or _CLOSE.fullmatch(nxt) is not None):
                break
            depth += _depth(nxt)
            last = nxt
            i += 1
        return i

    def _prelude_end(self) -> int:
        m = _PRELUDE_END.search(self.text)
        if m is None:
            raise _GiveUp
        return m.start()

    def _prelude(self, end: int):
        """The `HloModule` line and the stack-frame tables."""
        # Without its comments (blanked, so columns stay put); a block comment left open gives up.
        prelude = "\n".join(_code(line) for line in self.text[:end].split("\n"))
        m = _HEADER.match(prelude)
        if m is None:
            header, rest = None, prelude
        else:
            header, rest = self._header(m), prelude[m.end() :]
        if rest and not rest.isspace():
            self._stack_frames(rest, header is None)
        return header

    def _header(self, m: re.Match):
        """`HloModule name, key=value...`: each value checked as XLA's parser checks it."""
        texts: dict[str, str] = {}
        values: dict = {}
        for am in _ATTRIBUTE.finditer(m.string, m.start(2), m.end(2)):
            key = am.group(1)
            spec = self.p.attribute_spec(HEADER_ATTRIBUTES, texts, key, 0)
            value = self.text[am.start(2) : am.end(2)]  # as written, comments included (`m` has them blanked)
            texts[key] = value
            if key == "entry_computation_layout" and self._layout_ok(value):
                continue
            values[key] = self._memo_read(spec[1], value)
        name = _plain_name(m.group(1))
        if name in NOT_NAMES:
            raise _GiveUp  # (the fast path's rule for names: see `_instruction`)
        return name, texts, values

    def _layout_ok(self, value: str) -> bool:
        """Whether an entry computation layout of array shapes is valid (each distinct shape read once)."""
        m = _ENTRY_LAYOUT.fullmatch(value)
        if m is None:
            return False
        # The parameters' shapes, then the result's; kept for the verifier, which compares them with the entry's.
        shapes = [self._shape_of(shape_text) for shape_text in layout_shape_texts(value)]
        self.entry_layout = (value, shapes[:-1], shapes[-1])
        return True

    def _stack_frames(self, text: str, headerless: bool) -> None:
        sub = Parser(text, self.source)
        if headerless:
            sub.module_start()  # (XLA reads the tables after a header only)
        sub.stack_frame_index()
        if sub.i != len(sub.kinds):
            raise _GiveUp
        self.p.stack_text, self.p.stack_tables = sub.stack_text, sub.stack_tables

    # computations ------------------------------------------------------------------------------
    def _open_computation(self, line: str) -> None:
        # The usual line, its signature checked in the same match; else the signature read on its own.
        m = _COMPUTATION_SIGNED.fullmatch(line)
        strict = m is not None
        if not strict:
            m = _COMPUTATION.fullmatch(line)
            if m is None:
                raise _GiveUp
        name = _plain_name(m.group(2))
        if name in NOT_NAMES:
            raise _GiveUp  # (the fast path's rule for names: see `_instruction`)
        if self.no_header and not self.p.computations:
            Parser(line, self.source).module_start()
        self.signature = None
        if m.group(3) is not None:
            self.signature = self._signature_of(m.group(4), m.group(5)) if strict else self._signature(m.group(3))
        self.is_entry = bool(m.group(1))
        self.builder = _Builder(name)  # its table stays empty: `self.table` maps names to instructions
        # Its instructions by name, and by name as written (`%name`) where that differs.
        self.table: dict[str, HloInstruction] = {}
        self.refs = self.table
        self.p.scopes = [self.builder]
        self.root_name = None

    def _close_computation(self, m: re.Match) -> None:
        builder = self.builder
        p = self.p
        if not builder.instructions:
            raise _GiveUp  # `{ }`: no instruction to read (the token parser says what it expected)
        root = self.table[self.root_name] if self.root_name is not None else builder.instructions[-1]
        comp = p.build(builder, root, 0)
        p.check_signature(builder.name, self.signature, comp, 0)
        if m.lastindex is not None:  # some attribute written
            p.computation_attributes(comp, {
                key: self._typed(kind, text)
                for (key, (_, kind)), text in zip(COMPUTATION_ATTRIBUTES.items(), m.groups()) if text is not None
            })
        p.add_computation(builder.name, comp, 0)
        if self.is_entry:
            self.entry = p.take_entry(self.entry, comp, 0)
        p.computations.append(comp)
        if self.programs is not None:
            # Its program key for the verifier (`_verifier._program_key`), from the parameters at hand.
            self.programs[id(comp)] = (tuple([(n, id(q.shape)) for n, q in builder.params.items()]), id(root.shape))
        self.builder = None

    # instructions ------------------------------------------------------------------------------
    def _instruction(self, line: str, start: int, joined: bool = False, m: re.Match | None = None) -> bool:
        """Read one instruction line (or several `joined`), every check made (`m`: the line's match, if
        made); False when the line is not one (perhaps the first line of several). What a line (not joined)
        made is remembered for the lines like it (see `read`)."""
        if m is None:
            m = _INSTRUCTION.fullmatch(line)
            if m is None:
                return False
        is_root, written, shape_text, opcode, inside, tail = m.groups()
        if opcode == "parameter" or opcode == "constant":
            operands = []
            rule = _LEAF_RULE
        else:
            refs = self.refs
            try:
                operands = [refs[ref] for ref in inside.split(", ")]
            except KeyError:
                operands = self._operands(inside)
            rule = RULES.get(opcode)
            if rule is None or opcode in _OWN_READERS:
                raise _GiveUp  # unknown, async or send/recv: the token parser's business
            self.p.check_operand_count(operands, rule.operands, 0)
        schema = _BY_OPCODE.get(opcode) if rule.attributes_for is None else None
        if schema is None:
            schema = self._schema(opcode, rule, operands)
        if tail:
            pairs = self._attribute_pairs(schema, line, m.start(6))
            if pairs is None:
                return False
        else:
            self.p.check_required(schema.attrs, (), 0)
        name = written[1:] if written[0] == "%" else written
        # The fast path's rule for names: none that XLA's lexer reads as another token unless written `%name`,
        # written so or not (then a name it looks up is one, and the lexer's too); and none that XLA renames
        # (the pattern admits only XLA's name characters: `renamed` is XLA's rule for those).
        if name in NOT_NAMES or renamed(name):
            raise _GiveUp
        self.p.check_new_instruction(self.table, name, 0)
        if shape_text is not None:
            shape = self.shape_cache.get(shape_text) or self._shape_of(shape_text)
        else:
            self.p.check_shape_written(None, opcode)
            shape = None  # the rule's check infers it, as XLA's parser does
        if opcode == "parameter":
            instr = self._parameter(name, shape, inside)
        elif opcode == "constant":
            instr = self._constant(name, shape, shape_text, inside)
        else:
            instr = new_instruction(name, opcode, shape, operands)
        # With the shape written, a rule that only infers has nothing to check, nor to read.
        values: dict = {}
        if tail:
            self._values(instr, schema, pairs, values, shape is None or not (rule.infers_only or rule.reads_to_infer))
        if shape is None or not rule.infers_only:
            try:
                instr.shape = rule.check(Check(opcode, shape, operands, values))
            except Problem:
                raise _GiveUp from None
        if not joined and opcode != "add-dependency" and (
                not tail or ("control-predecessors" not in instr._raw_store
                             and "parameter_replication" not in instr._raw_store)):
            # (add-dependency: the verifier tells its instructions apart by their operands themselves)
            self._remember((opcode, shape_text, tail), instr, rule, operands)
            if tail and shape_text is not None and ("calls=" in tail or "to_apply=" in tail):
                callee_key = self._callee_key(opcode, shape_text, tail, instr, rule)
                if callee_key is not None:
                    self._remember(callee_key, instr, rule, operands)
        self.firsts.append(instr)
        if is_root:
            self.root_name = self.p.take_root(self.root_name, name, 0)
        if joined:
            self._keep_line_breaks(instr, m, start)
        self.builder.instructions.append(instr)
        refs = self.refs
        refs[name] = instr
        if written is not name:
            refs[written] = instr
        self.p.positions[id(instr)] = start + m.start(2)
        return True

    def _remember(self, key: tuple, instr: HloInstruction, rule: _opcodes.Rule, operands: list) -> None:
        """Keep what a line made for the lines like it (see `read`): an entry (shape, attribute texts, called
        computations, operand count or None, None, operand shapes seen) for any operands; or, where the rule
        looks at the operands' shapes, (None, None, None, None, {operand shapes: entry}), whose entries end
        with the operands (keeping their shapes' ids taken)."""
        # (The instruction's own dicts: nothing changes them while the text is read, and each line like it
        # gets copies.)
        made = (instr.shape, instr._raw_store, instr._called)
        shapes = tuple([id(op.shape) for op in operands])
        # The rule looks at the operands' shapes when it checks (a rule that only infers checks nothing with
        # the shape written), or when it allows attributes by them.
        if rule is _LEAF_RULE or (rule.attributes_for is None and key[1] is not None and rule.infers_only):
            entry = self.made.get(key)
            if entry is None:
                entry = self.made[key] = (*made, rule.operands, None, set())
            entry[5].add(shapes)
            return
        entry = self.made.get(key)
        if entry is None:
            entry = self.made[key] = (None, None, None, None, {})
        entry[4][shapes] = (*made, None, None, {shapes}, operands)

    @staticmethod
    def _callee_key(opcode: str, shape_text: str | None, tail: str, instr: HloInstruction, rule: _opcodes.Rule):
        """The key of `made` for the lines like this one but for the computation they call (a fusion's
        `calls`, a reduce's `to_apply`: one of its own on each line); None where the computation matters to
        more than its name.

        The text left out is a name where this line has one (any other name fits the same attribute
        pattern), in an attribute of this line (no string or comment before it, every bracket closed); the
        rule does not look at that computation (with the shape written, a rule that only infers looks at
        nothing). The verifier checks each such line (see `read`)."""
        if not tail or shape_text is None or ("calls=" not in tail and "to_apply=" not in tail):
            return None
        callee = _CALLEE.search(tail)
        if callee is None:
            return None
        before = tail[:callee.start()]
        if '"' in before or "/" in before or _depth(before) != 0:
            return None  # perhaps inside a string, comment or bracket
        attr = callee.group(1)
        called = instr._called
        if not called or not isinstance(called.get(attr), HloComputation):
            return None
        if attr in rule.reads and not (rule.infers_only or rule.reads_to_infer):
            return None
        return opcode, shape_text, tail[:callee.start(2)], tail[callee.end(2):]

    def _keep_line_breaks(self, instr: HloInstruction, m: re.Match, start: int) -> None:
        """Take the texts kept verbatim from the text itself, not from its joined lines."""
        raw = instr._raw_store
        for am in _ATTRIBUTE.finditer(m.string, m.start(6), m.end(6)):
            if raw.get(am.group(1)) is not None:
                raw[am.group(1)] = self.text[start + am.start(2) : start + am.end(2)]
        if instr.literal_text is not None:
            literal = m.group(5)
            first = m.start(5) + len(literal) - len(literal.lstrip())
            instr.literal_text = self.text[start + first : start + first + len(instr.literal_text)]

    def _parameter(self, name: str, shape: Shape, operands: str) -> HloInstruction:
        number = self.parameter_numbers.get(operands)
        if number is None:
            m = _PARAMETER_NUMBER.fullmatch(operands)
            if m is None:
                raise _GiveUp
            number = self.parameter_numbers[operands] = int(m.group(1))
        self.p.check_new_parameter(self.builder.params, number, 0)
        instr = new_instruction(name, "parameter", shape, [])
        instr.parameter_number = number
        self.builder.params[number] = instr
        return instr

    def _constant(self, name: str, shape: Shape, shape_text: str, literal: str) -> HloInstruction:
        literal = literal.strip()
        if not literal or (shape_text, literal) not in _LITERALS and not self._literal_ok(shape, shape_text, literal):
            raise _GiveUp
        instr = new_instruction(name, "constant", shape, [])
        instr.literal_text = literal
        return instr

    def _literal_ok(self, shape: Shape, shape_text: str, literal: str) -> bool:
        if not shape.is_array and not shape.is_tuple:
            return False
        sub = Parser(literal, self.source)
        try:
            sub.literal(shape)
        except (_Fail, RecursionError):
            return False
        if sub.i != len(sub.kinds):
            return False
        _LITERALS.add((shape_text, literal))
        return True

    def _operands(self, text: str) -> list[HloInstruction]:
        """The operands named in `a, b` (else see `_shaped_operands`)."""
        table = self.table
        # The usual text first: names of this computation's instructions joined by ", ". Each name in the
        # table was read by the name pattern (and is no reserved word), so this is what `_SIMPLE_OPERANDS`
        # admits; anything else is read below.
        ops = []
        for ref in text.split(", "):
            op = table.get(ref[1:]) if ref[:1] == "%" else table.get(ref)
            if op is None:
                break
            ops.append(op)
        else:
            return ops
        return [] if not text or text.isspace() else self._shaped_operands(text)

    def _shaped_operands(self, text: str) -> list[HloInstruction]:
        """The operands named in `f32[8]{0} %a, /*index=5*/%b`, each shape checked against its operand's."""
        if _SHAPED_OPERANDS.fullmatch(text) is None:
            raise _GiveUp
        table = self.table
        ops = []
        for shape_text, ref in _SHAPED_OPERAND.findall(text):
            op = table.get(_plain_name(ref))
            if op is None:
                raise _GiveUp  # (not a name XLA's lexer reads as another token: see `_instruction`)
            if shape_text:
                self.p.check_operand_shape(self.shape_cache.get(shape_text) or self._shape_of(shape_text), op, 0)
            ops.append(op)
        return ops

    # attributes ---------------------------------------------------------------------------------
    def _schema(self, opcode: str, rule: _opcodes.Rule, operands: list) -> _Schema:
        if rule.attributes_for is None:
            schema = _BY_OPCODE.get(opcode)
            if schema is None:
                schema = _BY_OPCODE[opcode] = _Schema(rule.allowed(operands), rule.reads)
            return schema
        try:
            attrs = rule.attributes_for(operands)  # one of a few fixed dicts
        except Problem:
            raise _GiveUp from None
        schema = _BY_ATTRIBUTES.get(id(attrs))
        if schema is None:
            schema = _BY_ATTRIBUTES[id(attrs)] = _Schema(rule.allowed(operands), rule.reads)
        return schema

    def _attribute_pairs(self, schema: _Schema, line: str, pos: int):
        """The `(key, value)` pairs of the attribute list at `line[pos:]`, in order (value None for one not
        written); None when the list
        does not fit the opcode's schema (XLA's parser would refuse it, or it goes on on the next line)."""
        for order in schema.orders:
            m = order.match(line, pos)
            if m is not None:
                groups = m.groups()  # None for an attribute not written
                self.p.check_required(schema.attrs, [k for k, g in zip(order.keys, groups) if g is not None], 0)
                return zip(order.keys, groups)
        if schema.any_order(line, pos) is None:
            return None
        pairs = _ATTRIBUTE.findall(line, pos)
        seen: dict = {}
        for key, value in pairs:
            seen[key] = self.p.attribute_spec(schema.attrs, seen, key, 0)
        self.p.check_required(schema.attrs, seen, 0)
        schema.learn(tuple(seen))
        return pairs

    def _values(self, instr: HloInstruction, schema: _Schema, pairs, values: dict, checked: bool) -> None:
        """Record the attribute texts; read the values that need reading (those the opcode's check reads
        if it is `checked` with the shape written); resolve names."""
        raw = instr._raw_store
        special = schema.special
        for key, value in pairs:
            if value is None:
                continue
            raw[key] = value
            if key not in special:
                continue
            kind = schema.attrs[key][1]
            if kind in CALLED_TYPES:
                called = self._called(kind, value)
                if instr._called is None:
                    instr._called = {}
                instr._called[key] = called
                raw[key] = None
                values[key] = called
                continue
            if key in schema.validated or (checked and key in schema.reads):
                values[key] = self._typed(kind, value)
            elif key in schema.checked:
                self._typed(kind, value)  # as the reader would read it, or give up
        if "parameter_replication" in values or "control-predecessors" in values:
            self.p.generic_checks(values, instr)

    def _called(self, kind: str, value: str):
        pool = self.p.pool
        if kind == "computation":
            return self._computation(pool, value)
        return tuple(self._computation(pool, ref) for ref in printed_items(value))

    @staticmethod
    def _computation(pool: dict, ref: str) -> HloComputation:
        entry = pool.get(_plain_name(ref))
        if entry is None:
            raise _GiveUp  # (not a name XLA's lexer reads as another token: see `_instruction`)
        return entry[0]

    def _typed(self, kind: str, value: str):
        """What the reader of `kind` makes of `value`: from its printed form's function, else read by it."""
        printed = PRINTED_VALUES.get(kind)
        if printed is not None and printed[1] is not None:
            try:
                return printed[1](value)
            except ValueError:
                raise _GiveUp from None
        if kind == "instruction_list":
            table = self.table
            out = []
            for ref in printed_items(value):
                instr = table.get(_plain_name(ref))
                if instr is None:
                    raise _GiveUp
                out.append(instr)
            return out
        return self._memo_read(kind, value)

    def _shape_of(self, text: str) -> Shape:
        """The shape written `text` (each distinct text read once)."""
        shape = self.shape_cache.get(text)
        if shape is None:
            shape = printed_shape(text, self.shape_cache) or self._memo_read("shape", text)
            self.shape_cache[text] = shape
        return shape

    def _signature(self, text: str) -> Shape:
        """The result shape of `(name: shape, ...) -> shape`; the parameters' shapes are read, as XLA does,
        for their syntax only."""
        m = _SIGNATURE.fullmatch(text)
        if m is None:
            return self._memo_read("signature", text)
        return self._signature_of(m.group(1), m.group(2))

    def _signature_of(self, parameters: str, result: str) -> Shape:
        """`_signature` of a signature that `_SIGNATURE` matches, from its parameters and its result."""
        cache = self.shape_cache
        for shape_text in _PARAMETER.findall(parameters):
            if shape_text not in cache:
                self._shape_of(shape_text)
        return cache.get(result) or self._shape_of(result)

    def _memo_read(self, kind: str, text: str):
        """The value of `text` read by the token parser's reader for `kind` (once per distinct text)."""
        key = (kind, text)
        hit = self.memo.get(key, _MISSING)
        if hit is not _MISSING:
            return hit
        value = _read_alone(kind, text, self.source)
        self.memo[key] = value
        return value


_MISSING = object()
# The computation a line calls, as XLA prints it (see `_callee_key`).
_CALLEE = re.compile(rf", (calls|to_apply)=({_REF})(?=,|$)")
_SHAPES: dict[str, Shape] = {}  # shape text -> its shape, for every text read
_LITERALS: set[tuple[str, str]] = set()  # (shape text, literal) pairs found valid
_CACHE_LIMIT = 200_000
# Opcodes the token parser reads with its own functions (sugar, chains of state).
_OWN_READERS = frozenset(_opcodes.READERS) - {"parameter", "constant"}
_BY_OPCODE: dict[str, _Schema] = {}  # the schema of each opcode whose attributes do not depend on operands
_BY_ATTRIBUTES: dict[int, _Schema] = {}  # the others: one schema per dict their rule returns
# Parameters and constants: the generic attributes only, the shape as written.
_LEAF_RULE = _opcodes.Rule(0, {}, lambda k: k.shape)


def _read_alone(kind: str, text: str, source: str):
    """Read a stand-alone value with the token parser; give up unless it is exactly one valid value."""
    sub = Parser(text, source)
    try:
        if kind == "shape":
            value = sub.shape()
        elif kind == "signature":
            value = sub.signature()[0]
        else:
            value = _VALUE_PARSERS[kind](sub)
    except (_Fail, RecursionError, KeyError):
        raise _GiveUp from None
    if sub.i != len(sub.kinds):
        raise _GiveUp
    return value


_SKIPPED = re.compile(rf"{_STR}|{_COMMENT}|//|/\*")
_STRING_OR_COMMENT = re.compile(rf"{_STR}|{_COMMENT}")


def _code(line: str) -> str:
    """The line with its comments blanked out (columns stay put; the same object if it has none); a block
    comment left open gives up."""
    if "/" not in line:
        return line
    code = line
    for m in _SKIPPED.finditer(line):
        token = m.group()
        if token == "//":
            return code[: m.start()] + " " * (len(line) - m.start())
        if token == "/*":
            raise _GiveUp
        if token[0] == "/":  # a block comment
            code = code[: m.start()] + " " * (m.end() - m.start()) + code[m.end() :]
    return code


def _depth(line: str) -> int:
    """How many more brackets the line opens than it closes (outside strings and comments)."""
    code = _STRING_OR_COMMENT.sub("", line)
    return sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")


def _breaks_outside_strings(joined: str, parts: list[str]) -> bool:
    """Whether no line break of a joined instruction falls inside a string or a comment (where XLA would keep it)."""
    breaks = []
    pos = -1
    for part in parts[:-1]:
        pos += len(part) + 1
        breaks.append(pos)
    for m in _STRING_OR_COMMENT.finditer(joined):
        if any(m.start() < b < m.end() for b in breaks):
            return False
    return True


def _plain_name(name: str) -> str:
    return name[1:] if name[0] == "%" else name


def entry_layout_shapes(text: str) -> tuple[list[Shape], Shape] | None:
    """The parameter and result shapes of an `entry_computation_layout` text; None if it is not one."""
    reader = _FastReader(text, "<entry_computation_layout>")
    try:
        if _ENTRY_LAYOUT.fullmatch(text) is not None:
            shapes = [reader._shape_of(t) for t in layout_shape_texts(text)]
            return shapes[:-1], shapes[-1]
        return _read_alone("computation_layout", text, "<entry_computation_layout>")
    except (_GiveUp, _Fail):
        return None


def fast_parse(text: str, source: str, firsts: list | None = None, programs: dict | None = None) -> HloModule | None:
    """The module, or None when the text needs the token parser. For the verifier (see
    `_verifier.verify_parsed`): `firsts`, if given, receives the module's instructions in order but those like
    an earlier one in everything the verifier's rules look at (the same opcode, shape, attributes and called
    computations, operands of the same shapes); `programs`, the program key of each computation (filled as
    computations are read)."""
    with gc_paused():  # a growing cyclic graph: see xla_costmodel._gc
        try:
            reader = _FastReader(text, source)
            reader.programs = programs
            module = reader.read()
        except (_GiveUp, _Fail, RecursionError):
            return None
    if firsts is not None:
        firsts.extend(reader.firsts)
    return module
