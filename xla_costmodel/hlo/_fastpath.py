"""Fast path for HLO text laid out as XLA prints it: one instruction per line.

XLA writes every instruction on one line, so a whole line can be recognised by
one regular expression and only the pieces we keep (names, shapes, attribute
spans) are touched from Python. The fast path is an accelerator, not a second
grammar: on anything it does not recognise, or any check that fails, it gives
up and the token parser (`_parser._Parser`) reads the text instead, which also
reports errors. For every text it accepts it must build exactly the graph the
token parser builds; `tests/test_hlo_fuzz.py` checks that on mutated text.
"""

from __future__ import annotations

import re

from .._gc import gc_paused
from ._attributes import COMPUTATION_ATTRS, COMPUTATION_LIST_ATTRS, ComputationRef, parse_attribute
from ._ir import HloComputation, HloInstruction, HloModule, resolve_refs
from ._shape import PRIMITIVE_BITS, Shape

_CALLED = COMPUTATION_ATTRS | COMPUTATION_LIST_ATTRS
_RESERVED = frozenset({"ROOT", "ENTRY", "HloModule", "FileNames", "FunctionNames", "FileLocations", "StackFrames"})

# Characters the lexer reads as non-error tokens, outside strings and brackets.
# Conservative on purpose: '-' and '%' only where they start or continue a
# token, '/' only where it does not open a comment, no single quotes.
_PLAIN = r"(?:[A-Za-z0-9_.$ \t,:=*?#+~<>!|&^@;\\]|%(?=[A-Za-z0-9_.\-])|-(?=[0-9A-Za-z.>])|/(?![/*]))"
_DEPTH0 = r"(?:[A-Za-z0-9_.$:*?#+~<>!|&^@;\\]|%(?=[A-Za-z0-9_.\-])|-(?=[0-9A-Za-z.>]))"
_STR = r'"(?:[^"\\\n]|\\.)*+"'
_COMMENT = r"/\*(?:[^*\n]|\*(?!/))*+\*/"


def _balanced(depth: int, typed: bool) -> str:
    """Bracketed content up to `depth` levels.

    Typed: each bracket closed by its own kind (the pattern triples per level,
    so it stays shallow). Untyped: any closer; callers check kinds afterwards.
    """
    inner = rf"(?:{_PLAIN}++|{_STR}|{_COMMENT})*+"
    for _ in range(depth):
        if typed:
            nested = rf"\{{{inner}\}}|\[{inner}\]|\({inner}\)"
        else:
            nested = rf"[{{\[(]{inner}[}}\])]"
        inner = rf"(?:{_PLAIN}++|{_STR}|{_COMMENT}|{nested})*+"
    return inner
_NAME = r"%[A-Za-z0-9_.\-]+|[A-Za-z_.$](?:[A-Za-z0-9_.$]|-(?!>))*+"
_KEY = r"[A-Za-z_](?:[A-Za-z0-9_.$]|-(?=[A-Za-z0-9_.$]))*+"


class _LineGrammar:
    """The line patterns for one kind of bracket content (typed or untyped)."""

    def __init__(self, content: str, typed: bool):
        self.typed = typed
        array_shape = r"[a-z][a-z0-9]*\[[^\]\n]*\](?:\{" + content + r"\})?"
        shape = rf"\({content}\)|{array_shape}"
        value = rf"(?:{_DEPTH0}++|{_STR}|[{{\[(]{content}[}}\])])++" if not typed else (
            rf"(?:{_DEPTH0}++|{_STR}|\{{{content}\}}|\[{content}\]|\({content}\))++"
        )
        self.array_shape = array_shape
        self.instruction = re.compile(
            rf"[ \t]*(ROOT[ \t]+)?({_NAME})[ \t]*=[ \t]*({shape})[ \t]+([a-z][a-z0-9\-]*)\(((?:[^()\n]++|\([^()\n]*+\))*+)\)"
            rf"((?:[ \t]*,[ \t]*{_KEY}={value})*)[ \t]*"
        )
        self.attribute = re.compile(rf",[ \t]*({_KEY})=({value})")
        self.computation = re.compile(
            rf"[ \t]*(ENTRY[ \t]+)?({_NAME})[ \t]*(?:\(({content})\)[ \t]*->[ \t]*({shape}))?[ \t]*\{{[ \t]*"
        )


# Most lines nest brackets at most three deep and are read with the typed
# patterns; deeper lines (nested tuple shapes with tiled layouts, deep JSON)
# use the untyped ones plus an explicit check of bracket kinds.
_TYPED = _LineGrammar(_balanced(3, typed=True), typed=True)
_UNTYPED = _LineGrammar(_balanced(8, typed=False), typed=False)
_ARRAY_SHAPE = _UNTYPED.array_shape
_CLOSE = re.compile(rf"[ \t]*\}}[ \t]*(?:,[ \t]*execution_thread=({_STR})[ \t]*)?")
_SIMPLE_OPERANDS = re.compile(rf"(?:{_NAME})(?:, (?:{_NAME}))*+")
_OPERAND_NAME = re.compile(_NAME)
_PNAME = re.compile(r"%[A-Za-z0-9_.\-]+")
# Every `, key=` in an attribute list, at any depth: a superset of the top-level keys.
_ANY_KEY = re.compile(rf",[ \t]*({_KEY})=")
_CALLED_MARKER = re.compile("|".join(re.escape(f"{key}=") for key in sorted(_CALLED)))
_OPERAND_WITH_SHAPE = re.compile(rf"[ \t]*(?:{_COMMENT}[ \t]*)?(?:({_ARRAY_SHAPE})[ \t]+)?({_NAME})[ \t]*")
_INT = re.compile(r"[ \t]*(-?[0-9][0-9_]*)[ \t]*")
_LITERAL = re.compile(r"(?:[A-Za-z0-9_.+{}(), \t]|-(?=[0-9A-Za-z.]))*+")
_STRING_OR_PLAIN = re.compile(rf"{_STR}|[^{{}}()\[\]]+")
_STRING_OR_COMMENT = re.compile(rf"{_STR}|{_COMMENT}|//[^\n]*")
_BRACKET_PAIR = re.compile(r"\{\}|\[\]|\(\)")


class _GiveUp(Exception):
    """The fast path cannot read this text; the token parser will."""


def _brackets_match(text: str, nested_by_pattern: bool = True) -> bool:
    """True when every bracket outside strings is closed by the same kind.

    `nested_by_pattern`: the text was matched by a pattern that already nests
    brackets, only their kinds are unchecked.
    """
    kinds = ("{" in text or "}" in text) + ("[" in text or "]" in text) + ("(" in text or ")" in text)
    if nested_by_pattern and kinds < 2:
        return True  # one bracket kind: the regex's nesting already matched it
    skeleton = _STRING_OR_PLAIN.sub("", text)
    while True:
        reduced = _BRACKET_PAIR.sub("", skeleton)
        if reduced == skeleton:
            return not reduced
        skeleton = reduced


class _FastReader:
    __slots__ = ("text", "source", "shape_cache", "deferred")

    def __init__(self, text: str, source: str):
        self.text = text
        self.source = source
        self.shape_cache: dict[str, Shape] = {}
        self.deferred: list[tuple[HloInstruction, str]] = []

    def shape(self, shape_text: str, offset: int) -> Shape:
        shape = self.shape_cache.get(shape_text)
        if shape is None:
            from ._parser import _Parser

            if not _brackets_match(shape_text):
                raise _GiveUp
            parser = _Parser(self.text, self.source, offset, offset + len(shape_text))
            try:
                shape = parser.shape(0)
            except ValueError:
                raise _GiveUp from None
            if parser.i != parser.n:
                raise _GiveUp
            self.shape_cache[shape_text] = shape
        return shape

    def read(self) -> HloModule:
        text = self.text
        lines = text.split("\n")
        # Find the first computation header; what precedes it is the header and stack-frame tables.
        offset = 0
        first = len(lines)
        for k, line in enumerate(lines):
            stripped = line.strip()
            if stripped.endswith("{") and not stripped.startswith(("HloModule", "FileNames", "FunctionNames", "FileLocations", "StackFrames")) and (_TYPED.computation.fullmatch(line) or _UNTYPED.computation.fullmatch(line)):
                first = k
                break
            offset += len(line) + 1
        if first == len(lines):
            raise _GiveUp
        from ._parser import _Parser

        # A block comment left open in the header would, in the whole text,
        # run on into the computations; only the token parser reads that right.
        if "/*" in _STRING_OR_COMMENT.sub("", text[:offset]):
            raise _GiveUp
        prelude = _Parser(text, self.source, 0, offset)
        try:
            name, header, stack_text, stack_tables = prelude.prelude()
        except ValueError:
            raise _GiveUp from None
        if prelude.i != prelude.n:
            raise _GiveUp

        computations: list[HloComputation] = []
        names: set[str] = set()
        entry = None
        comp = None
        by_name: dict[str, HloInstruction] = {}
        instructions: list[HloInstruction] = []
        root = None
        shape = self.shape
        shape_cache = self.shape_cache
        typed_match = _TYPED.instruction.fullmatch
        untyped_match = _UNTYPED.instruction.fullmatch
        typed_attributes = _TYPED.attribute.finditer
        untyped_attributes = _UNTYPED.attribute.finditer
        simple_operands = _SIMPLE_OPERANDS.fullmatch
        operand_name = _OPERAND_NAME.fullmatch
        value_is_name = _PNAME.fullmatch
        key_findall = _ANY_KEY.findall
        called_marker = _CALLED_MARKER.search
        deferred = self.deferred
        src = (text, self.source)
        for k in range(first, len(lines)):
            line = lines[k]
            start = offset
            offset += len(line) + 1
            if comp is None:
                if not line or line.isspace():
                    continue
                m = _TYPED.computation.fullmatch(line) or _UNTYPED.computation.fullmatch(line)
                if m is None:
                    raise _GiveUp
                cname = m.group(2)
                cname = cname[1:] if cname[0] == "%" else cname
                if cname in _RESERVED or cname in names:
                    raise _GiveUp
                if m.group(3) is not None:
                    if not _brackets_match(m.group(3)):
                        raise _GiveUp
                    shape(m.group(4), start + m.start(4))
                names.add(cname)
                comp = HloComputation(cname)
                if m.group(1):
                    if entry is not None:
                        raise _GiveUp
                    entry = comp
                by_name = {}
                instructions = comp.instructions
                root = None
                continue
            m = typed_match(line)
            checked = True
            if m is None:
                m = untyped_match(line)
                checked = False
            if m is None:
                if not line or line.isspace():
                    continue
                close = _CLOSE.fullmatch(line)
                if close is None or not instructions:
                    raise _GiveUp
                comp._by_name = by_name
                comp.root = root if root is not None else instructions[-1]
                if close.group(1) is not None:
                    from ._lexer import unquote

                    comp.execution_thread = unquote(close.group(1))
                computations.append(comp)
                comp = None
                continue
            iname = m.group(2)
            if iname[0] == "%":
                iname = iname[1:]
            if iname in by_name or iname == "ROOT" or iname in PRIMITIVE_BITS:
                raise _GiveUp
            opcode = m.group(4)
            instr = HloInstruction.__new__(HloInstruction)
            instr.name = iname
            instr.opcode = opcode
            shape_text = m.group(3)
            instr.shape = shape_cache.get(shape_text) or shape(shape_text, start + m.start(3))
            instr.users = []
            instr.computation = comp
            instr.parameter_number = None
            instr.literal_text = None
            instr._cache = None
            instr._called = None
            instr._pos = None
            instr._src = None
            ops_text = m.group(5)
            operands: list[HloInstruction] = []
            if opcode == "parameter":
                im = _INT.fullmatch(ops_text)
                if im is None:
                    raise _GiveUp
                try:
                    instr.parameter_number = int(im.group(1))
                except ValueError:
                    raise _GiveUp from None
            elif opcode == "constant":
                literal = ops_text.strip()
                if not literal or _LITERAL.fullmatch(literal) is None or not _brackets_match(literal, False):
                    raise _GiveUp
                instr.literal_text = literal
            elif ops_text and not ops_text.isspace():
                if simple_operands(ops_text) is not None:
                    refs = ops_text.split(", ")
                elif "(" in ops_text:
                    raise _GiveUp
                elif "[" in ops_text or "/" in ops_text:
                    refs = self._operands_with_shapes(ops_text, start + m.start(5))
                else:
                    refs = [r.strip() for r in ops_text.split(",")]
                    if any(operand_name(ref) is None for ref in refs):
                        raise _GiveUp
                for ref in refs:
                    op = by_name.get(ref[1:] if ref[0] == "%" else ref)
                    if op is None:
                        raise _GiveUp
                    operands.append(op)
                    users = op.users
                    if not users or users[-1] is not instr:
                        users.append(instr)
            instr.operands = operands
            raw: dict[str, str] = {}
            instr._lazy = None
            tail = m.group(6)
            if tail and checked and called_marker(tail) is None:
                keys = key_findall(tail)
                if len(keys) == len(set(keys)):
                    # No computation references and no repeated key: the list is
                    # valid (the line pattern checked it), split it when asked.
                    base = start + m.start(6)
                    instr._lazy = (text, self.source, base, base + len(tail))
                    tail = None
            if tail:
                pos: dict[str, tuple[int, int]] = {}
                base = start + m.start(6)
                for am in (typed_attributes if checked else untyped_attributes)(tail):
                    key, value = am.groups()
                    if key in raw:
                        raise _GiveUp
                    if not checked and not _brackets_match(value):
                        raise _GiveUp
                    vs = base + am.start(2)
                    ve = base + am.end(2)
                    if key in _CALLED:
                        if value[0] == "%" and value_is_name(value):
                            called = ComputationRef(value[1:]) if key in COMPUTATION_ATTRS else None
                        else:
                            called = None
                        if called is None:
                            try:
                                called = parse_attribute(key, text, vs, ve, self.source)
                            except ValueError:
                                raise _GiveUp from None
                        if instr._called is None:
                            instr._called = {}
                        instr._called[key] = called
                        raw[key] = None
                        deferred.append((instr, key))
                    else:
                        raw[key] = value
                        pos[key] = (vs, ve)
                if pos:
                    instr._pos = pos
                    instr._src = src
            instr._raw_store = raw
            if m.group(1):
                if root is not None:
                    raise _GiveUp
                root = instr
            by_name[iname] = instr
            instructions.append(instr)
        if comp is not None or not computations:
            raise _GiveUp
        module = HloModule(name, computations, entry)
        module.header_attributes = header
        module.stack_frames = stack_tables
        module._stack_frame_text = stack_text
        for instr, key in deferred:
            try:
                instr._called[key] = resolve_refs(instr._called[key], module)
            except KeyError:
                raise _GiveUp from None
        return module

    def _operands_with_shapes(self, ops_text: str, offset: int) -> list[str]:
        refs = []
        pos = 0
        n = len(ops_text)
        while True:
            m = _OPERAND_WITH_SHAPE.match(ops_text, pos)
            if m is None:
                raise _GiveUp
            if m.group(1) is not None:
                self.shape(m.group(1), offset + m.start(1))
            refs.append(m.group(2))
            pos = m.end()
            if pos == n:
                return refs
            if ops_text[pos] != ",":
                raise _GiveUp
            pos += 1


def split_lazy_attributes(instr: HloInstruction) -> None:
    """Fill in the attributes of an instruction whose list the fast path left unsplit."""
    text, source, start, end = instr._lazy
    instr._lazy = None
    raw = instr._raw_store
    pos: dict[str, tuple[int, int]] = {}
    for am in _TYPED.attribute.finditer(text, start, end):
        key = am.group(1)
        raw[key] = am.group(2)
        pos[key] = am.span(2)
    if pos:
        instr._pos = pos
        instr._src = (text, source)


def fast_parse(text: str, source: str) -> HloModule | None:
    """The module, or None when the text needs the token parser."""
    with gc_paused():  # a growing cyclic graph: see xla_costmodel._gc
        try:
            return _FastReader(text, source).read()
        except _GiveUp:
            return None
