"""Recursive-descent parser from HLO text to the typed graph.

Grammar (after XLA's `hlo_parser.cc`):

    module      := ['HloModule' name (',' attr)*] [stack_frames] computation+
    computation := ['ENTRY'] name [signature] '{' instruction* '}' [',' 'execution_thread=' string]
    instruction := ['ROOT'] name '=' shape opcode '(' operands ')' (',' attr)*
    operand     := [shape] name
    attr        := word '=' value      -- value: tokens up to the next ',' at bracket depth 0

Attribute values are not interpreted here: only their extent is found (by
bracket matching on tokens) and recorded, and `_attributes` parses them the
first time they are read. The few that shape the graph (called computations)
are read at once.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._gc import gc_paused
from ._attributes import COMPUTATION_ATTRS, COMPUTATION_LIST_ATTRS, parse_attribute
from ._errors import HloParseError
from ._fastpath import fast_parse
from ._ir import HloComputation, HloInstruction, HloModule, resolve_refs
from ._lexer import ARROW, ERROR, LEQ, PNAME, PUNCT, STRING, WORD, Tokens, unquote
from ._shape import PRIMITIVE_BITS, Layout, Shape

_CALLED = COMPUTATION_ATTRS | COMPUTATION_LIST_ATTRS
_STACK_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_MAX_SHAPE_NESTING = 64
# The start of another instruction or the end of a computation, on a new line.
_NEXT_STATEMENT = re.compile(r"\n[ \t]*(?:\}[ \t]*(?:\n|$)|(?:ROOT[ \t]+)?%?[A-Za-z_][\w.\-]*[ \t]*=[ \t]*[a-z(])")


class _Parser:
    __slots__ = ("tok", "i", "kinds", "texts", "starts", "text", "source", "n", "_shape_cache", "_deferred")

    def __init__(self, text: str, source: str, start: int = 0, end: int | None = None):
        self.tok = Tokens(text, source, start, end)
        self.kinds = self.tok.kinds
        self.texts = self.tok.texts
        self.starts = self.tok.starts
        self.n = len(self.kinds)
        self.text = text
        self.source = source
        self.i = 0
        self._shape_cache: dict[str, Shape] = {}
        # (instruction, attribute name, token index) of computation references to resolve at the end
        self._deferred: list[tuple[HloInstruction, str, int]] = []

    # -- helpers ------------------------------------------------------------
    def error(self, reason: str, index: int | None = None) -> HloParseError:
        return self.tok.error(reason, self.i if index is None else index)

    def expect_punct(self, p: str, what: str = "") -> None:
        i = self.i
        if i >= self.n or self.kinds[i] != PUNCT or self.texts[i] != p:
            where = f" {what}" if what else ""
            raise self.error(f"expected {p!r}{where} but found {self.tok.describe(i)}")
        self.i = i + 1

    def at_punct(self, p: str) -> bool:
        i = self.i
        return i < self.n and self.kinds[i] == PUNCT and self.texts[i] == p

    def name(self, what: str) -> str:
        i = self.i
        if i < self.n:
            k = self.kinds[i]
            if k == PNAME:
                self.i = i + 1
                return self.texts[i][1:]
            if k == WORD and not self.texts[i][0].isdigit() and self.texts[i][0] != "-":
                self.i = i + 1
                return self.texts[i]
        raise self.error(f"expected {what} but found {self.tok.describe(i)}")

    def int_word(self, what: str) -> int:
        i = self.i
        if i < self.n and self.kinds[i] == WORD:
            try:
                v = int(self.texts[i])
            except ValueError:
                pass
            else:
                self.i = i + 1
                return v
        raise self.error(f"expected {what} but found {self.tok.describe(i)}")

    def newline_before(self, index: int) -> bool:
        """True when token `index` starts on a later line than token `index - 1` ends."""
        return "\n" in self.text[self.tok.end_of(index - 1) : self.starts[index]]

    # -- module ---------------------------------------------------------------
    def prelude(self) -> tuple[str, dict[str, str], str, dict]:
        """The optional `HloModule` header line and stack-frame tables."""
        name = "module"
        header: dict[str, str] = {}
        if self.i < self.n and self.kinds[self.i] == WORD and self.texts[self.i] == "HloModule":
            self.i += 1
            name = self.name("a module name after 'HloModule'")
            while self.at_punct(","):
                self.i += 1
                key, start, end = self.attribute()
                header[key] = self.text[start:end]
        stack_text, stack_tables = self.stack_frame_tables()
        return name, header, stack_text, stack_tables

    def module(self) -> HloModule:
        name, header, stack_text, stack_tables = self.prelude()
        computations: list[HloComputation] = []
        entry = None
        seen: dict[str, int] = {}
        while self.i < self.n:
            first = self.i
            comp, is_entry = self.computation()
            if comp.name in seen:
                raise self.error(f"duplicate computation name '{comp.name}'", first)
            seen[comp.name] = first
            if is_entry:
                if entry is not None:
                    raise self.error("more than one ENTRY computation", first)
                entry = comp
            computations.append(comp)
        if not computations:
            raise self.error("no computation found: expected 'ENTRY' or a computation name")
        module = HloModule(name, computations, entry)
        module.header_attributes = header
        module.stack_frames = stack_tables
        module._stack_frame_text = stack_text
        for instr, key, index in self._deferred:
            value = instr._called[key]
            try:
                instr._called[key] = resolve_refs(value, module)
            except KeyError as exc:
                missing = str(exc).split("'")[-2] if "'" in str(exc) else key
                raise self.error(f"attribute '{key}' names computation '{missing}', which does not exist", index) from None
        return module

    def stack_frame_tables(self) -> tuple[str, dict]:
        if not (self.i < self.n and self.kinds[self.i] == WORD and self.texts[self.i] in _STACK_TABLES):
            return "", {}
        start_tok = self.i
        tables: dict[str, dict] = {}
        while self.i < self.n and self.kinds[self.i] == WORD and self.texts[self.i] in _STACK_TABLES:
            table = self.texts[self.i]
            self.i += 1
            entries: dict = {}
            while self.i < self.n and self.kinds[self.i] == WORD and self.texts[self.i][:1].isdigit():
                key = self.int_word("a table index")
                if self.i < self.n and self.kinds[self.i] == STRING:
                    entries[key] = unquote(self.texts[self.i])
                    self.i += 1
                elif self.at_punct("{"):
                    close = self.tok.match_bracket(self.i)
                    entries[key] = parse_attribute(
                        "metadata", self.text, self.starts[self.i], self.tok.end_of(close), self.source
                    )
                    self.i = close + 1
                else:
                    raise self.error(f"expected a string or {{...}} in the {table} table but found {self.tok.describe(self.i)}")
            tables[table] = entries
        raw = self.text[self.starts[start_tok] : self.tok.end_of(self.i - 1)]
        return raw, tables

    # -- computation ----------------------------------------------------------
    def computation(self) -> tuple[HloComputation, bool]:
        is_entry = False
        if self.kinds[self.i] == WORD and self.texts[self.i] == "ENTRY":
            is_entry = True
            self.i += 1
        name = self.name("a computation name (or 'ENTRY')")
        if self.at_punct("("):  # signature: (params) -> shape
            self.i = self.tok.match_bracket(self.i) + 1
            if self.i < self.n and self.kinds[self.i] == ARROW:
                self.i += 1
                self.shape(0)
            else:
                raise self.error(f"expected '->' after the parameter list of '{name}' but found {self.tok.describe(self.i)}")
        if not self.at_punct("{"):
            raise self.error(f"expected '{{' to open computation '{name}' but found {self.tok.describe(self.i)}")
        self.i += 1
        comp = HloComputation(name)
        by_name: dict[str, HloInstruction] = {}
        pending: list[tuple[HloInstruction, list[tuple[str, int]]]] = []
        root = None
        root_index = -1
        instructions = comp.instructions
        while True:
            if self.i >= self.n:
                raise self.error(f"computation '{name}' is not closed: expected '}}'")
            if self.kinds[self.i] == PUNCT and self.texts[self.i] == "}":
                self.i += 1
                break
            first = self.i
            instr, operand_refs, is_root = self.instruction()
            if instr.name in by_name:
                raise self.error(f"duplicate instruction name '{instr.name}' in computation '{name}'", first)
            if is_root:
                if root is not None:
                    raise self.error(f"computation '{name}' has more than one ROOT", first)
                root = instr
                root_index = first
            by_name[instr.name] = instr
            instr.computation = comp
            instructions.append(instr)
            pending.append((instr, operand_refs))
        if not instructions:
            raise self.error(f"computation '{name}' has no instructions", self.i - 1)
        del root_index
        # Resolved after the body so the error can tell "later" from "nowhere";
        # like XLA, an operand must be defined before its use.
        position = {instr.name: k for k, instr in enumerate(instructions)}
        for k, (instr, refs) in enumerate(pending):
            ops = instr.operands
            for ref, index in refs:
                op = by_name.get(ref)
                if op is None:
                    raise self.error(f"operand '{ref}' of '{instr.name}' is not an instruction of computation '{name}'", index)
                if position[ref] >= k:
                    raise self.error(f"operand '{ref}' of '{instr.name}' is used before it is defined", index)
                ops.append(op)
                users = op.users
                if not users or users[-1] is not instr:
                    users.append(instr)
        comp._by_name = by_name
        comp.root = root if root is not None else instructions[-1]
        if self.at_punct(",") and self.i + 1 < self.n and self.texts[self.i + 1] == "execution_thread":
            self.i += 1
            key, start, end = self.attribute()
            comp.execution_thread = unquote(self.text[start:end].strip())
        return comp, is_entry

    # -- instruction ----------------------------------------------------------
    def instruction(self):
        kinds, texts = self.kinds, self.texts
        is_root = False
        if kinds[self.i] == WORD and texts[self.i] == "ROOT":
            is_root = True
            self.i += 1
        name_index = self.i
        name = self.name("an instruction name")
        if name in PRIMITIVE_BITS:
            # XLA's parser refuses these too: a type name cannot name an instruction.
            raise self.error(f"illegal instruction name '{name}': it is a type name", name_index)
        self.expect_punct("=", f"after instruction name '{name}'")
        shape = self.shape(0)
        i = self.i
        if i >= self.n or kinds[i] != WORD:
            raise self.error(f"expected an opcode after the shape of '{name}' but found {self.tok.describe(i)}")
        opcode = texts[i]
        self.i = i + 1
        self.expect_punct("(", f"after opcode '{opcode}'")
        instr = HloInstruction(name, opcode, shape)
        refs: list[tuple[str, int]] = []
        if opcode == "parameter":
            instr.parameter_number = self.int_word("a parameter number")
            self.expect_punct(")", "after the parameter number")
        elif opcode == "constant":
            close = self.tok.match_bracket(self.i - 1)
            if close == self.i:
                raise self.error("constant has no literal")
            instr.literal_text = self.text[self.starts[self.i] : self.tok.end_of(close - 1)]
            self.i = close + 1
        else:
            self.operands(refs)
        # attributes
        raw = instr._raw_store
        pos: dict[str, tuple[int, int]] = {}
        n = self.n
        while self.i < n and kinds[self.i] == PUNCT and texts[self.i] == ",":
            self.i += 1
            key_index = self.i
            key, start, end = self.attribute()
            if key in raw:
                raise self.error(f"attribute '{key}' given twice", key_index)
            raw[key] = self.text[start:end]
            pos[key] = (start, end)
            if key in _CALLED:
                value = parse_attribute(key, self.text, start, end, self.source)
                raw[key] = None  # placeholder: the value lives in _called
                del pos[key]
                if instr._called is None:
                    instr._called = {}
                instr._called[key] = value
                self._deferred.append((instr, key, key_index))
        if pos:
            instr._pos = pos
            instr._src = (self.text, self.source)
        return instr, refs, is_root

    def operands(self, refs: list[tuple[str, int]]) -> None:
        kinds, texts = self.kinds, self.texts
        if self.i >= self.n:
            raise self.error("unclosed operand list")
        if kinds[self.i] == PUNCT and texts[self.i] == ")":
            self.i += 1
            return
        while True:
            i = self.i
            if i >= self.n:
                raise self.error("unclosed operand list")
            k = kinds[i]
            # An operand may carry its shape inline: `f32[8]{0} %x`.
            if (k == WORD and texts[i] in PRIMITIVE_BITS and i + 1 < self.n and texts[i + 1] == "[") or (
                k == PUNCT and texts[i] == "("
            ):
                self.shape(0)
                i = self.i
                if i >= self.n:
                    raise self.error("unclosed operand list")
                k = kinds[i]
            if k == PNAME:
                refs.append((texts[i][1:], i))
            elif k == WORD and not texts[i][0].isdigit() and texts[i][0] != "-":
                if i + 1 < self.n and texts[i + 1] == "(" and kinds[i + 1] == PUNCT:
                    raise self.error("nested instructions as operands are not supported; give the operand a name", i)
                refs.append((texts[i], i))
            else:
                raise self.error(f"expected an operand name but found {self.tok.describe(i)}", i)
            self.i = i + 1
            if self.i < self.n and kinds[self.i] == PUNCT:
                t = texts[self.i]
                if t == ",":
                    self.i += 1
                    continue
                if t == ")":
                    self.i += 1
                    return
            raise self.error(f"expected ',' or ')' in the operand list but found {self.tok.describe(self.i)}")

    def attribute(self) -> tuple[str, int, int]:
        """`name=value`: returns the name and the character span of the value."""
        kinds, texts = self.kinds, self.texts
        i = self.i
        if i >= self.n or kinds[i] != WORD or i + 1 >= self.n or texts[i + 1] != "=" or kinds[i + 1] != PUNCT:
            raise self.error(f"expected an attribute like name=value but found {self.tok.describe(i)}")
        key = texts[i]
        i += 2
        if i >= self.n:
            raise self.error(f"attribute '{key}' has no value", i)
        start = self.starts[i]
        first = i
        # The value runs to the next ',' at bracket depth 0, the end of the
        # computation, or the end of the line (XLA never breaks a value across
        # lines outside brackets).
        while i < self.n:
            k = kinds[i]
            if k == PUNCT:
                t = texts[i]
                if t in "([{":
                    close = self.tok.match_bracket(i)
                    self._check_not_swallowing_lines(i, close)
                    i = close + 1
                    continue
                if t == "," or t in ")]}":
                    break
                if t == "=":
                    raise self.error(f"unexpected '=' in the value of attribute '{key}' (missing ','?)", i)
            elif k == ERROR:
                raise self.error(f"unexpected character {texts[i]!r}", i)
            if i > first and self.newline_before(i):
                break
            i += 1
        if i == first:
            raise self.error(f"attribute '{key}' has no value", i)
        end = self.tok.end_of(i - 1)
        self.i = i
        return key, start, end

    def _check_not_swallowing_lines(self, open_index: int, close_index: int) -> None:
        """An unclosed bracket in an attribute would swallow the following lines;
        XLA never breaks a value across lines before another instruction, so
        report the bracket instead of a confusing error far below."""
        start = self.starts[open_index]
        end = min(len(self.text), self.tok.end_of(close_index) + 1)
        if self.text.find("\n", start, end) < 0:
            return
        m = _NEXT_STATEMENT.search(self.text, start, end)
        if m is not None:
            raise self.error(f"unclosed {self.texts[open_index]!r} in an attribute value", open_index)

    # -- shape ----------------------------------------------------------------
    def shape(self, depth: int) -> Shape:
        i = self.i
        kinds, texts = self.kinds, self.texts
        if i >= self.n:
            raise self.error("expected a shape but found end of input")
        k = kinds[i]
        if k == PUNCT and texts[i] == "(":
            if depth > _MAX_SHAPE_NESTING:
                raise self.error("tuple shape nested too deeply")
            self.i += 1
            elements = []
            if not self.at_punct(")"):
                while True:
                    elements.append(self.shape(depth + 1))
                    if self.at_punct(","):
                        self.i += 1
                        continue
                    break
            self.expect_punct(")", "to close the tuple shape")
            return Shape("tuple", tuple_shapes=tuple(elements))
        if k != WORD or texts[i] not in PRIMITIVE_BITS:
            raise self.error(f"expected a shape (like f32[8]{{0}} or a tuple) but found {self.tok.describe(i)}")
        if i + 1 >= self.n or texts[i + 1] != "[":
            raise self.error(f"expected '[' after element type '{texts[i]}'", i + 1)
        # Find the end of the shape text first, then reuse an identical shape if seen.
        j = i + 2
        while j < self.n and not (kinds[j] == PUNCT and texts[j] == "]"):
            if kinds[j] == PUNCT and texts[j] not in ",?":
                raise self.error(f"unexpected {self.tok.describe(j)} in the dimensions of a shape", j)
            if kinds[j] == WORD and kinds[j - 1] == WORD:
                raise self.error(f"expected ',' or ']' after a dimension but found {self.tok.describe(j)}", j)
            j += 1
        if j >= self.n:
            raise self.error("unclosed '[' in shape", i + 1)
        end = j + 1
        has_layout = (
            end + 1 < self.n
            and kinds[end] == PUNCT
            and texts[end] == "{"
            and (kinds[end + 1] == WORD and texts[end + 1][:1].isdigit() or texts[end + 1] in (":", "}"))
        )
        if has_layout:
            end = self.tok.match_bracket(end) + 1
        key = self.text[self.starts[i] : self.tok.end_of(end - 1)]
        cached = self._shape_cache.get(key)
        if cached is not None:
            self.i = end
            return cached
        dims: list[int] = []
        dynamic: list[bool] = []
        p = i + 2
        while p < j:
            kp = kinds[p]
            t = texts[p]
            if kp == WORD:
                try:
                    dims.append(int(t))
                except ValueError:
                    raise self.error(f"expected a dimension size but found {t!r}", p) from None
                dynamic.append(False)
            elif kp == LEQ:
                p += 1
                try:
                    dims.append(int(texts[p]) if p < j else int("x"))
                except ValueError:
                    raise self.error("expected a bound after '<='", p) from None
                dynamic.append(True)
            elif kp == PUNCT and t == "?":
                dims.append(-1)
                dynamic.append(True)
            else:
                raise self.error(f"unexpected {self.tok.describe(p)} in the dimensions of a shape", p)
            p += 1
            if p < j:
                if not (kinds[p] == PUNCT and texts[p] == ","):
                    raise self.error(f"expected ',' between dimensions but found {self.tok.describe(p)}", p)
                p += 1
                if p >= j:
                    raise self.error("expected a dimension after ','", p)
        layout = None
        if has_layout:
            layout = self.layout(j + 1, end - 1, len(dims))
        shape = Shape(texts[i], tuple(dims), tuple(dynamic), layout)
        self._shape_cache[key] = shape
        self.i = end
        return shape

    def layout(self, open_index: int, close_index: int, rank: int) -> Layout:
        kinds, texts = self.kinds, self.texts
        m2m: list[int] = []
        p = open_index + 1
        tail = ""
        while p < close_index:
            if kinds[p] == PUNCT and texts[p] == ":":
                tail = self.text[self.starts[p + 1] : self.starts[close_index]].strip() if p + 1 < close_index else ""
                break
            if kinds[p] != WORD:
                raise self.error(f"expected a dimension number in the layout but found {self.tok.describe(p)}", p)
            try:
                m2m.append(int(texts[p]))
            except ValueError:
                raise self.error(f"expected a dimension number in the layout but found {texts[p]!r}", p) from None
            p += 1
            if p < close_index and kinds[p] == PUNCT and texts[p] == ",":
                p += 1
        if m2m and sorted(m2m) != list(range(rank)):
            raise self.error(f"layout {{{','.join(map(str, m2m))}}} is not a permutation of the {rank} dimensions", open_index)
        return Layout(tuple(m2m), tail)


def parse_hlo(text: str, *, source: str = "<string>") -> HloModule:
    """Parse HLO text (any form XLA prints) into an `HloModule`.

    **Arguments:**

    - `text`: the HLO module text, pre- or post-optimization, with or without
      `HloModule` header, `%` prefixes, signatures and stack-frame tables.
    - `source`: a name for error messages, e.g. the file path.

    **Returns:** the `HloModule`.

    **Raises:** `HloParseError` (a `ValueError`) naming line and column.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_hlo expects str, got {type(text).__name__}")
    module = fast_parse(text, source)
    if module is not None:
        return module
    return parse_hlo_tokens(text, source=source)


def parse_hlo_tokens(text: str, *, source: str = "<string>") -> HloModule:
    """`parse_hlo` without the line-oriented fast path (the reference reading)."""
    try:
        with gc_paused():  # a growing cyclic graph: see xla_costmodel._gc
            return _Parser(text, source).module()
    except RecursionError:
        raise HloParseError("input nested too deeply", text=text, pos=0, source=source) from None


def load_hlo(path: str | os.PathLike) -> HloModule:
    """Read and parse an HLO text file (see `parse_hlo`); errors name the file."""
    path = Path(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise HloParseError(f"not a text file ({exc.reason})", text="", pos=0, source=str(path)) from None
    return parse_hlo(text, source=str(path))
