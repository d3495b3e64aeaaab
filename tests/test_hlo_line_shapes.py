"""One home for what an HLO line means (issue 34): the line shapes and the checks both readers share.

`LINE_SHAPES` (token parser) is the one statement of how a line is laid out: the token parser's productions take
their keywords, punctuation and the errors where punctuation is missing from it, and the fast path compiles its
line patterns from it. The modules below are written from the table itself, so a change to the table reaches
these tests: the fast path must read every line shape (each optional piece written or not) as the token parser
does, and a line missing a piece of punctuation gets the table's error from both readers.

The checks that need more than a line's shape (one ROOT, one ENTRY, names not taken, operand counts, required,
repeated and unknown attributes, signatures, operand shapes) are the token parser's methods; the fast path asks
them and gives up where one fails, so each error comes from the token parser alone, at its place.
"""

from __future__ import annotations

import itertools

import pytest

from xla_costmodel.hlo import HloParseError
from xla_costmodel.hlo._fastpath import fast_parse
from xla_costmodel.hlo._lexer import KEYWORD
from xla_costmodel.hlo._parser import parse_hlo, parse_hlo_tokens
from xla_costmodel.hlo._token_parser import LINE_SHAPES

# What each part of a line shape is written as, in the module below (lists as their items, written out).
SAMPLES = {
    "name": "%n", "shape": "f32[2]{0}", "opcode": "negate", "operands": "%p",
    "attributes": ", metadata={op_name=\"a\"}", "parameters": "p: f32[2]{0}", "key": "metadata", "value": "{}",
}
HEADER_SAMPLES = dict(SAMPLES, name="m", attributes=", is_scheduled=false")


def render(shape: str, samples: dict, optional: frozenset = frozenset(), drop: str | None = None) -> str:
    """A line of `shape` written from the table as XLA prints it: the optional pieces named in `optional`
    written, the others not; the punctuation `drop` left out."""
    out = ""
    for piece in LINE_SHAPES[shape]:
        if piece.optional and piece.text not in optional or piece.kind and piece.text == drop:
            continue
        if piece.kind == KEYWORD:
            text = piece.text
        elif piece.kind:
            text = piece.text
        elif piece.text in samples:
            text = samples[piece.text]
        else:  # a part that is a line shape of its own (the signature)
            text = render(piece.text, samples, optional, drop)
        glued = (piece.glued or text[:1] in (")", ",", "") or out[-1:] in ("(", "")
                 or (shape, text) == ("instruction", "("))
        out += text if glued else " " + text
    return out


def optional_pieces(shape: str) -> list[str]:
    found = []
    for piece in LINE_SHAPES[shape]:
        if piece.optional:
            found.append(piece.text)
        if not piece.kind and piece.text in LINE_SHAPES and not piece.items:
            found += optional_pieces(piece.text)
    return found


def module(computation: frozenset = frozenset(), instruction: frozenset = frozenset(), drop=None,
           samples: dict = SAMPLES) -> str:
    """A module of one computation, each line written from the table (`drop`: (shape, punctuation) left out)."""
    drop_in = dict([drop]) if drop else {}
    lines = [
        render("header", HEADER_SAMPLES, drop=drop_in.get("header")),
        render("computation", dict(samples, name="%main"), computation | {"ENTRY"},
               drop=drop_in.get("computation") or drop_in.get("signature")),
        "  %p = f32[2]{0} parameter(0)",
        "  " + render("instruction", samples, instruction | {"ROOT"}, drop=drop_in.get("instruction")),
        render("close", dict(samples, attributes=""), drop=drop_in.get("close")),
    ]
    return "\n".join(lines) + "\n"


def both(text: str):
    """The text printed by each reader (the fast path's None: it gave up), or the token parser's error."""
    fast = fast_parse(text, "t.hlo")
    try:
        tokens = parse_hlo_tokens(text, source="t.hlo", verify=False).to_text()
    except HloParseError as err:
        return fast, str(err)
    return (None if fast is None else fast.to_text()), tokens


def subsets(names: list[str]):
    return [frozenset(c) for k in range(len(names) + 1) for c in itertools.combinations(names, k)]


@pytest.mark.parametrize("computation", subsets([n for n in optional_pieces("computation") if n != "ENTRY"]), ids=str)
@pytest.mark.parametrize("instruction", subsets([n for n in optional_pieces("instruction") if n != "ROOT"]), ids=str)
def test_the_fast_path_reads_each_line_shape_of_the_table(computation, instruction):
    text = module(computation, instruction)
    fast, tokens = both(text)
    assert not tokens.startswith("t.hlo"), tokens  # the token parser reads it ...
    assert fast == tokens  # ... and the fast path reads it so, not giving up


# Punctuation the token parser looks for only where the text has it, or reads on past: no error of its own.
UNREACHED = {("signature", "("): "the signature is read only where `(` follows the name",
             ("close", "}"): "the instruction list reads instructions until one",
             ("instruction", ")"): "an operand not followed by `,` or `)` is read as a nested instruction, whose "
                                   "error is reported"}


@pytest.mark.parametrize("shape,mark", [
    (shape, piece.text) for shape in ("computation", "signature", "instruction", "close")
    for piece in LINE_SHAPES[shape] if piece.kind not in (0, KEYWORD) and not piece.glued and piece.message
])
def test_missing_punctuation_has_the_tables_error_from_both_readers(shape, mark):
    # (Without attributes: after a missing `)` they would read as operands.)
    text = module(frozenset(optional_pieces("computation")), frozenset(), (shape, mark), dict(SAMPLES, attributes=""))
    with pytest.raises(HloParseError) as tokens:
        parse_hlo_tokens(text, source="t.hlo")
    with pytest.raises(HloParseError) as default:
        parse_hlo(text, source="t.hlo")
    assert str(default.value) == str(tokens.value)  # the fast path gave up; the token parser said why
    assert fast_parse(text, "t.hlo") is None
    message = next(p.message for p in LINE_SHAPES[shape] if p.text == mark and p.kind)
    if (shape, mark) not in UNREACHED:
        assert message in str(tokens.value)


GOOD = """HloModule m, is_scheduled=false

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main (p: f32[2]) -> f32[2] {
  p = f32[2]{0} parameter(0)
  c = f32[] constant(0)
  r = f32[] reduce(f32[2]{0} p, c), dimensions={0}, to_apply=add
  ROOT n = f32[2]{0} negate(p)
}
"""

# Each of the token parser's checks that the fast path calls: (old text, new text, its error).
CHECKS = [
    ("  c = f32[] constant(0)", "  ROOT c = f32[] constant(0)", "one computation should have only one ROOT"),
    ("\nadd {", "\nENTRY add {", "expects only one ENTRY"),
    ("ENTRY main (", "ENTRY add (", "computation already exists: add"),
    ("  c = f32[] constant(0)", "  p = f32[] constant(0)", "instruction already exists: p"),
    ("negate(p)", "negate(p, p)", "expects 1 operands, but has 2 operands"),
    (", dimensions={0}, to_apply=add", ", to_apply=add", "attribute dimensions is expected but not seen"),
    (", dimensions={0}", ", dimensions={0}, dimensions={0}", "attribute dimensions already exists"),
    ("is_scheduled=false", "is_scheduled=false, is_scheduled=true", "attribute is_scheduled already exists"),
    ("is_scheduled=false", "scheduled=false", 'unexpected attribute "scheduled"'),
    ("-> f32[2] {", "-> f32[3] {", "Shape of computation main, f32[3], is not compatible"),
    ("reduce(f32[2]{0} p", "reduce(f32[3]{0} p", "The declared operand shape f32[3]{0} is not compatible"),
    ("c = f32[] constant(0)", "c = constant(0)", "cannot infer shape for opcode: constant"),
    ("HloModule m, is_scheduled=false\n", "", "expected an HLO module"),
]


def test_the_good_module_is_read_by_the_fast_path():
    fast, tokens = both(GOOD)
    assert fast == tokens


@pytest.mark.parametrize("old,new,error", CHECKS, ids=[c[2][:40] for c in CHECKS])
def test_each_check_is_the_token_parsers(old, new, error):
    assert GOOD.count(old) == 1
    text = GOOD.replace(old, new)
    if error == "expected an HLO module":
        text = text.replace("\nadd {", "\nadd (x: f32[], y: f32[]) -> f32[] {")  # headerless, signed first line
    assert fast_parse(text, "t.hlo") is None  # the fast path gives up ...
    with pytest.raises(HloParseError) as tokens:
        parse_hlo_tokens(text, source="t.hlo")
    with pytest.raises(HloParseError) as default:
        parse_hlo(text, source="t.hlo")
    assert error in str(tokens.value)  # ... and the token parser says why, at its place, for both
    assert str(default.value) == str(tokens.value)
