"""Tokenizer for HLO text, token for token as XLA's `HloLexer` reads it.

One compiled regular expression splits the whole text; tokens are kept in
parallel lists (kind, text, start, end) rather than as objects, because a
48-layer transformer has over a million of them. XLA's lexer decides a few
things by looking around a token, and so does this one:

- an identifier followed by `:` is a name (`x:` in a parameter list, and
  `HloModule m:`); followed by `=` it is an attribute name (`dimensions=`);
- primitive type names (`f32`, `pred`, ...) and keywords (`ROOT`, `true`,
  `maximal`, ...) are their own kinds; `nan` is a number;
- at a digit or `-`, the longest of XLA's patterns is tried in XLA's order:
  decimal, dimension labels (`b01f_01io->b01f`), `3x3`, padding
  (`0_0x1_1`), integer (an integer out of 64-bit range is an error), `-inf`,
  `-nan`.

A character XLA's lexer refuses becomes a one-character ERROR token, and
lexing goes on after it: the parser stops at the first one it reaches, as XLA
does, but a JSON dictionary value is read as raw text and may contain them.
"""

from __future__ import annotations

import re

from ._errors import HloParseError

# Token kinds (small ints; the names follow XLA's TokKind).
ERROR = 1
EQUAL = 2
COMMA = 3
COLON = 4
ASTERISK = 5
QUESTION = 6
OCTOTHORP = 7
PLUS = 8
TILDE = 9
LSQUARE = 10
RSQUARE = 11
LBRACE = 12
RBRACE = 13
LPAREN = 14
RPAREN = 15
DOTS = 16
ARROW = 17
LEQ = 18
NEGINF = 19
PRIMITIVE = 20
NAME = 21  # %foo, or foo: (the text is the name alone)
ATTRNAME = 22  # foo= (the text is the name alone)
DIMLABELS = 23
DXD = 24
PAD = 25
IDENT = 26
STRING = 27  # the text is the token as written, quotes included
INT = 28
DECIMAL = 29
KEYWORD = 30  # every keyword; the text says which

KIND_NAMES = {
    ERROR: "kError", EQUAL: "kEqual", COMMA: "kComma", COLON: "kColon", ASTERISK: "kAsterisk",
    QUESTION: "kQuestionMark", OCTOTHORP: "kOctothorp", PLUS: "kPlus", TILDE: "kTilde",
    LSQUARE: "kLsquare", RSQUARE: "kRsquare", LBRACE: "kLbrace", RBRACE: "kRbrace",
    LPAREN: "kLparen", RPAREN: "kRparen", DOTS: "kDots", ARROW: "kArrow", LEQ: "kLeq",
    NEGINF: "kNegInf", PRIMITIVE: "kPrimitiveType", NAME: "kName", ATTRNAME: "kAttributeName",
    DIMLABELS: "kDimLabels", DXD: "kDxD", PAD: "kPad", IDENT: "kIdent", STRING: "kString",
    INT: "kInt", DECIMAL: "kDecimal", KEYWORD: "keyword",
}

KEYWORDS = frozenset(
    "true false inf HloModule ENTRY ROOT FileLocations FileNames FunctionNames StackFrames maximal "
    "replicated manual last_tile_dim_replicate shard_as shard_like unknown unreduced".split()
)

# XLA's lower-case primitive type names. `tuple` and `buffer` are type names
# too, but the lexer reads them as identifiers (they are written with brackets).
PRIMITIVE_TYPES = frozenset(
    "pred s1 s2 s4 s8 s16 s32 s64 u1 u2 u4 u8 u16 u32 u64 f16 f32 bf16 f64 f8e5m2 f8e4m3 f8e4m3fn "
    "f8e4m3b11fnuz f8e3m4 f8e5m2fnuz f8e4m3fnuz f4e2m1fn f8e8m0fnu f6e3m2fn f6e2m3fn c64 c128 "
    "opaque token".split()
)
TYPE_NAMES = PRIMITIVE_TYPES | {"tuple", "buffer"}
# Identifiers this lexer reads as another kind of token: a name only when written `%name`.
NOT_NAMES = KEYWORDS | PRIMITIVE_TYPES | {"nan"}

# Token pieces. The lexer's pattern below and the fast path's line patterns (`_fastpath`) are built from these,
# so that what a name, a string or a comment is has one home.
# An identifier; a name after `%` or before `:`; an attribute name before `=`.
IDENT_PATTERN = r"[A-Za-z_][A-Za-z0-9_.\-]*"
# The forms of two tokens that XLA's printer writes, narrower than what the lexer reads: a string in double
# quotes with the escapes XLA writes, on one line; a block comment on one line (unrolled, so that nothing can
# backtrack into it: Python 3.11.0-3.11.2's `re` mishandles a possessive group here, `(?:[^*\n]|\*(?!/))*+`
# finds no comment in "/*index=5*/"). The fast path recognises these and leaves any other to the token parser.
PRINTED_STRING = r'"[^"\\\n]*+(?:\\(?:[\\"\'ntr?abfv]|[0-3][0-7][0-7])[^"\\\n]*+)*+"'
ONE_LINE_COMMENT = r"/\*[^*\n]*+(?:\*++[^*/\n][^*\n]*+)*\*++/"
# What the fast path takes as one run on one line: characters outside strings and brackets that never start
# another token kind (runs of the usual ones taken at once: the engine loops over a character class much faster
# than over an alternation), with (ONE_LINE_PLAIN) or without blanks, commas and `/`; and bracketed content up to
# six levels deep, any closer for any opener (the pattern stays small; values whose brackets matter are read
# again by the token parser).
_PLAIN_RUN = r"(?:[A-Za-z0-9_. \t,:=*?#+~<>|&^@;\\]++|%(?=[A-Za-z_])|-(?=[0-9A-Za-z.>])|/(?![/*]))"
ONE_LINE_PLAIN = r"(?:[A-Za-z0-9_.:*?#+~<>=|&^@;\\]++|%(?=[A-Za-z_])|-(?=[0-9A-Za-z.>]))"


def _bracketed(depth: int) -> str:
    inner = rf"(?:{_PLAIN_RUN}++|{PRINTED_STRING}|{ONE_LINE_COMMENT})*+"
    for _ in range(depth):
        inner = rf"(?:{_PLAIN_RUN}++|{PRINTED_STRING}|{ONE_LINE_COMMENT}|[{{\[(]{inner}[}}\])])*+"
    return inner


ONE_LINE_BRACKETED = _bracketed(6)

_IDENT = IDENT_PATTERN
_FLOAT = r"-?(?:(?:[0-9]+|[0-9]+\.[0-9]*|[0-9]*\.[0-9]+)[eE][+\-]?[0-9]+|[0-9]+\.[0-9]*|[0-9]*\.[0-9]+)"
_DIMLABELS = r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}"
_PAD = r"-?[0-9]+_-?[0-9]+(?:_[0-9]+)?(?:x-?[0-9]+_-?[0-9]+(?:_[0-9]+)?)*"
_STRING = r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'"

# Group numbers are token kinds where the match decides the kind alone.
_TOKEN_RE = re.compile(
    r"(?:[ \t\n\r]+|/\*(?:[^*\0]|\*(?!/))*\*/|//[^\n\r\0]*)*+"  # skipped: blanks and comments
    r"(?:"
    rf"({_STRING})"  # 1 string
    rf"|%({_IDENT})"  # 2 %name
    rf"|({_DIMLABELS})"  # 3 dim labels (before identifiers and numbers: neither can start one)
    rf"|({_IDENT}):"  # 4 name:
    rf"|({_IDENT})="  # 5 attribute name=
    rf"|({_IDENT})"  # 6 identifier, keyword, type, nan
    r"|(->)"  # 7
    rf"|(?=[\-0-9])({_FLOAT})"  # 8 decimal (from a digit or '-', never from '.')
    r"|([0-9]+(?:x[0-9]+)+)"  # 9 DxD
    rf"|({_PAD})"  # 10 pad
    r"|(-?[0-9]+)"  # 11 integer
    r"|(-inf)"  # 12
    r"|(-nan)"  # 13
    r"|(\?)"  # 14
    r"|(<=)"  # 15
    r"|(\.\.\.)"  # 16
    r"|([=,:*#+~\[\]{}()])"  # 17 punctuation
    r"|([\s\S])"  # 18 anything else: an error
    r"|\Z"
    r")",
    re.ASCII,
)
_PUNCT = {"=": EQUAL, ",": COMMA, ":": COLON, "*": ASTERISK, "#": OCTOTHORP, "+": PLUS, "~": TILDE,
          "[": LSQUARE, "]": RSQUARE, "{": LBRACE, "}": RBRACE, "(": LPAREN, ")": RPAREN}
_GROUP_KIND = {1: STRING, 2: NAME, 3: DIMLABELS, 4: NAME, 5: ATTRNAME, 7: ARROW, 8: DECIMAL, 9: DXD,
               10: PAD, 12: NEGINF, 14: QUESTION, 15: LEQ, 16: DOTS, 18: ERROR}
_NAN_PAYLOAD = re.compile(r"\(0x([0-9a-fA-F]+)\)")
NAN_PAYLOAD_MASK = (1 << 51) - 1  # the payload bits of a double
_INT64_MIN = -(1 << 63)
_UINT64_MAX = (1 << 64) - 1
_ESCAPE = re.compile(r"\\(?:([abfnrtv\\?'\"])|([0-7]{1,3})|x([0-9a-fA-F]+)|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([\s\S]))")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\", "?": "?", "'": "'", '"': '"'}


class Tokens:
    """The tokens of one text: parallel lists plus the text they came from.

    `texts[i]` is the token's value text: a name without `%` or `:`, an
    attribute name without `=`, a string with its quotes, a number as written.
    """

    __slots__ = ("kinds", "texts", "starts", "ends", "text", "source", "_end")

    def __init__(self, text: str, source: str = "<string>", offset: int = 0, end: int | None = None):
        self.text = text
        self.source = source
        self.kinds: list[int] = []
        self.texts: list[str] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        self._lex(offset, len(text) if end is None else end)

    def _lex(self, offset: int, end: int) -> None:
        self._end = end
        kinds, texts, starts, ends = self.kinds, self.texts, self.starts, self.ends
        ka, ta, sa, ea = kinds.append, texts.append, starts.append, ends.append
        text = self.text
        group_kind = _GROUP_KIND
        punct = _PUNCT
        pos = offset
        while pos is not None:
            restart = None
            for m in _TOKEN_RE.finditer(text, pos, end):
                g = m.lastindex
                if g is None:
                    continue  # only blanks or comments were left
                s = m.start(g)
                t = m.group(g)
                if g == 2:
                    s -= 1  # as XLA's lexer, a `%name` token starts at its `%`
                if g == 17:
                    ka(punct[t])
                elif g == 6:
                    if t in PRIMITIVE_TYPES:
                        ka(PRIMITIVE)
                    elif t in KEYWORDS:
                        ka(KEYWORD)
                    elif t == "nan":
                        kind, e = self._nan(s, s + 3, end)
                        ka(kind)
                        if e != s + 3:  # the payload was taken: go on after it
                            ta(text[s:e]), sa(s), ea(e)
                            restart = e
                            break
                    else:
                        ka(IDENT)
                elif g == 11:
                    if not _INT64_MIN <= int(t) <= _UINT64_MAX:
                        # XLA's lexer refuses the integer at its first character.
                        ka(ERROR), ta(text[s]), sa(s), ea(s + 1)
                        restart = s + 1
                        break
                    ka(INT)
                elif g == 13:
                    kind, e = self._nan(s, s + 4, end)
                    ka(kind), ta(text[s:e]), sa(s), ea(e)
                    restart = e
                    break
                elif g == 1:
                    ka(STRING if "\\" not in t or _escapes_ok(t) else ERROR)
                else:
                    ka(group_kind[g])
                ta(t)
                sa(s)
                ea(m.end())
            pos = restart

    def _nan(self, start: int, after: int, end: int) -> tuple[int, int]:
        """`nan` / `-nan` at `start`, ending at `after`, with an optional `(0x...)` payload."""
        text = self.text
        if after < end and text[after] == "(":
            m = _NAN_PAYLOAD.match(text, after, end)
            if m is None:
                return ERROR, after
            digits = m.group(1)
            if len(digits) > 16 or not 0 < int(digits, 16) <= NAN_PAYLOAD_MASK:
                return ERROR, after
            return DECIMAL, m.end()
        return DECIMAL, after

    def __len__(self) -> int:
        return len(self.kinds)

    def error(self, reason: str, index: int) -> HloParseError:
        """An HloParseError located at token `index` (or at the end of text)."""
        pos = self.starts[index] if index < len(self.starts) else len(self.text)
        return HloParseError(reason, text=self.text, pos=pos, source=self.source)

    def describe(self, index: int) -> str:
        if index >= len(self.kinds):
            return "end of input"
        t = self.text[self.starts[index] : self.ends[index]]
        if len(t) > 40:
            t = t[:37] + "..."
        return repr(t)

    def resync(self, pos: int) -> int:
        """The index of the first token at or after character `pos`, re-lexing
        the rest of the text when a token straddles `pos` (after raw JSON)."""
        import bisect

        i = bisect.bisect_left(self.starts, pos)
        if i > 0 and self.ends[i - 1] > pos:
            del self.kinds[i - 1 :], self.texts[i - 1 :], self.starts[i - 1 :], self.ends[i - 1 :]
            self._lex(pos, max(self._end, pos))
            return i - 1
        return i


def _escapes_ok(token: str) -> bool:
    """Whether absl::CUnescape accepts the escapes of a string token."""
    for m in _ESCAPE.finditer(token, 1, len(token) - 1):
        if m.group(6) is not None:
            return False
        if m.group(2) is not None and int(m.group(2), 8) > 0xFF:
            return False
        if m.group(3) is not None and int(m.group(3), 16) > 0xFF:
            return False
        if m.group(4) is not None or m.group(5) is not None:
            cp = int(m.group(4) or m.group(5), 16)
            if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                return False
    return True


def unquote(s: str) -> str:
    """The value of a quoted HLO string token (C escapes, as absl::CUnescape)."""
    body = s[1:-1]
    if "\\" not in body:
        return body

    def one(m: re.Match) -> str:
        if m.group(1) is not None:
            return _SIMPLE_ESCAPES[m.group(1)]
        if m.group(2) is not None:
            return chr(int(m.group(2), 8))
        if m.group(3) is not None:
            return chr(int(m.group(3), 16) & 0xFF)
        if m.group(4) is not None or m.group(5) is not None:
            return chr(int(m.group(4) or m.group(5), 16))
        return m.group(6)

    return _ESCAPE.sub(one, body)


def quote(s: str) -> str:
    """An HLO string token for `s` (what XLA's printer writes: C escapes)."""
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return '"' + out + '"'


def int_value(text: str) -> int:
    """The int64 value XLA gives an INT token (a positive value past int64 wraps, as XLA's bit cast)."""
    v = int(text)
    return v - (1 << 64) if v >= 1 << 63 else v
