"""The printed forms both readers share (issue 34 §4, "One parser design") read as the token parser's own
productions read the same text.

The fast path takes a value or a shape written in the form XLA prints with the function registered next to its
reader (`printed_value` in `_values`, `printed_shape` in `_token_parser`); these tests hold each such function to
the reader it stands for, on every attribute and shape of XLA's own test modules, and on texts the readers refuse.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import xla_costmodel as xc
from xla_costmodel.hlo import _values  # noqa: F401  (registers the readers and their printed forms)
from xla_costmodel.hlo._opcodes import RULES, Problem
from xla_costmodel.hlo._token_parser import _VALUE_PARSERS, PRINTED_VALUES, Parser, _Fail, printed_shape

CORPUS = Path(__file__).resolve().parent.parent / "hlo_fixtures" / "xla_tests"


def _corpus_modules(limit: int = 400):
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    texts = [(CORPUS / e["file"]).read_text() for e in manifest["modules"] if e["xla_parser"] == "accepted"]
    modules = []
    for text in texts[:limit]:
        try:
            modules.append(xc.parse_hlo(text, verify=False))
        except xc.HloParseError:
            continue
    return modules


def _read(kind: str, text: str):
    """What the reader of `kind` makes of exactly `text`, or `_Fail` if it refuses it."""
    p = Parser(text, "<test>")
    try:
        value = p.shape() if kind == "shape" else _VALUE_PARSERS[kind](p)
    except _Fail:
        return _Fail
    return value if p.i == len(p.kinds) else _Fail


@pytest.fixture(scope="module")
def modules():
    found = _corpus_modules()
    assert len(found) > 100
    return found


def test_printed_values_read_as_their_readers(modules):
    compared: dict[str, int] = {}
    for module in modules:
        for comp in module.computations:
            for instr in comp.instructions:
                rule = RULES.get(instr.opcode)
                if rule is None:
                    continue
                try:
                    attrs = rule.allowed(instr.operands)
                except Problem:
                    continue
                for key, text in (instr._raw_store or {}).items():
                    kind = attrs.get(key, (False, None))[1]
                    printed = PRINTED_VALUES.get(kind)
                    if text is None or printed is None or printed[1] is None:
                        continue
                    if re.fullmatch(printed[0], text) is None:
                        continue
                    try:
                        ours = printed[1](text)
                    except ValueError:
                        assert printed[2], f"{kind}: {text!r}"  # only a checked form may refuse a text
                        ours = _Fail
                    assert ours == _read(kind, text), f"{kind}: {text!r}"
                    compared[kind] = compared.get(kind, 0) + 1
    # The forms XLA's tests use most were all met.
    assert {"int64", "int_list", "string", "comparison_direction", "string_or_json"} <= compared.keys(), compared


@pytest.mark.parametrize("kind, text", [
    ("string_or_json", '{"a": {"b": 1}'),  # a brace left open
    ("string_or_json", '{"a": 1}}'),
    ("string_or_json", '{"a}": 1}'),  # a brace inside a string does not count
])
def test_checked_forms_refuse_what_their_readers_refuse(kind, text):
    pattern, value, checked = PRINTED_VALUES[kind]
    assert checked
    expected = _read(kind, text)
    try:
        ours = value(text)
    except ValueError:
        ours = _Fail
    assert ours == expected


def test_printed_shapes_read_as_the_shape_production(modules):
    texts = {str(instr.shape) for m in modules for c in m.computations for instr in c.instructions}
    texts |= {"f32[]", "pred[0]", "(f32[2]{0}, /*index=1*/s32[3,4]{1,0})", "()",
              "f32[2,3]{0}", "f32[2]{0,1}", "token[]", "f32[01]", "(f32[2]{1})", "f32[2] {0}"}
    read = 0
    for text in texts:
        ours = printed_shape(text)
        if ours is None:
            continue  # the production reads it
        assert ours == _read("shape", text), text
        read += 1
    assert read > 100
    # Texts the production refuses, or reads otherwise, are not taken in the printed form.
    for text in ("f32[2,3]{0}", "f32[2]{0,1}", "(f32[2]{1})", "f32[01]"):
        assert printed_shape(text) is None
