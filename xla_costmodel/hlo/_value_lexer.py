"""Tokenizer for attribute values read on demand (`_attributes`): lenient, one regular expression.

The parser (`_parser`, with XLA's own token rules in `_lexer`) has already
checked every value; this tokenizer only splits a value's text so that
`_attributes` can turn it into a Python value.

Tokens are kept in three parallel lists (kind, text, start offset) rather than
as objects, because a 48-layer transformer module has over a million tokens and
object creation would dominate parse time.

Unlike XLA's lexer we do not decide here whether an identifier is an attribute
name (`foo=`) or a parameter name (`foo:`); the parser looks at the next token.
Everything that can appear inside an attribute value (`3x3`, `0_0x1_1`,
`1e-05`, `-inf`, `kLoop`) is one WORD token, so attribute values can be skipped
by bracket matching and interpreted only when someone asks for them.
"""

from __future__ import annotations

import re

from ._errors import HloParseError

# Token kinds (the group number in _TOKEN_RE).
STRING = 1
PNAME = 2  # %name
DIMLABELS = 3  # b01f_01io->b01f
WORD = 4  # identifiers, numbers, keywords, enum values
ARROW = 5  # ->
LEQ = 6  # <=
PUNCT = 7  # one of = , : * ? # + ~ [ ] { } ( ) < > ! / \ | & ^ @ ;
ERROR = 8  # anything else: reported by the parser where it matters

_TOKEN_RE = re.compile(
    r"""
    (?:\s+|/\*[\s\S]*?\*/|//[^\n]*)*+         # whitespace and comments are skipped (possessive:
                                              # never give back a blank to make an error token)
    (?:
      ("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')  # 1 string
    | (%[A-Za-z0-9_.\-]+)                       # 2 %name
    | ([0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}) # 3 convolution dim labels
    | ((?:-(?=[0-9a-zA-Z.]))?[A-Za-z0-9_.$](?:[A-Za-z0-9_.$]|-(?!>))*)  # 4 word
    | (->)                                      # 5
    | (<=)                                      # 6
    | ([=,:*?\#+~\[\]{}()<>!/\\|&^@;])          # 7 punctuation
    | (.)                                       # 8 error
    | \Z                                        # only blanks/comments left: matched, no token
    )
    """,
    re.VERBOSE,
)

_CLOSER = {"(": ")", "[": "]", "{": "}"}


class Tokens:
    """Token stream of one text: parallel lists plus the text they came from."""

    __slots__ = ("kinds", "texts", "starts", "text", "source")

    def __init__(self, text: str, source: str = "<string>", offset: int = 0, end: int | None = None):
        kinds: list[int] = []
        texts: list[str] = []
        starts: list[int] = []
        ka, ta, sa = kinds.append, texts.append, starts.append
        for m in _TOKEN_RE.finditer(text, offset, len(text) if end is None else end):
            k = m.lastindex
            if k is None:  # only skipped material (trailing whitespace/comment)
                continue
            ka(k)
            ta(m.group(k))
            sa(m.start(k))
        self.kinds = kinds
        self.texts = texts
        self.starts = starts
        self.text = text
        self.source = source

    def __len__(self) -> int:
        return len(self.kinds)

    def error(self, reason: str, index: int) -> HloParseError:
        """An HloParseError located at token `index` (or at the end of text)."""
        if index < len(self.starts):
            pos = self.starts[index]
        else:
            pos = len(self.text.rstrip())
        return HloParseError(reason, text=self.text, pos=pos, source=self.source)

    def describe(self, index: int) -> str:
        if index >= len(self.kinds):
            return "end of input"
        t = self.texts[index]
        if len(t) > 40:
            t = t[:37] + "..."
        return repr(t)

    def end_of(self, index: int) -> int:
        """Character offset just past token `index`."""
        return self.starts[index] + len(self.texts[index])

    def match_bracket(self, index: int) -> int:
        """Index of the token closing the bracket opened at `index`."""
        kinds, texts = self.kinds, self.texts
        stack = [_CLOSER[texts[index]]]
        i = index + 1
        n = len(kinds)
        while i < n:
            if kinds[i] == PUNCT:
                t = texts[i]
                if t in _CLOSER:
                    stack.append(_CLOSER[t])
                elif t in ")]}":
                    if t != stack[-1]:
                        raise self.error(f"expected {stack[-1]!r} but found {t!r}", i)
                    stack.pop()
                    if not stack:
                        return i
            elif kinds[i] == ERROR:
                raise self.error(f"unexpected character {texts[i]!r}", i)
            i += 1
        raise self.error(f"unclosed {texts[index]!r}", index)
