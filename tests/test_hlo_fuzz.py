"""Mutated HLO text: only documented errors, with a location; both parsing paths agree.

How fast the parser grows with its input and refuses pathological text is `scripts/bench_parse_scaling.py`'s
business (against XLA's parser in the same run), not a test's.

The mutants come from the grammar zoo (hand-written), the zoo as XLA prints it
(what the fast path reads), small fixtures, and modules of XLA's own tests
(`hlo_fixtures/xla_tests`) that exercise one feature each.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import xla_costmodel as xc
from xla_costmodel import _jaxlib_oracle as oracle
from xla_costmodel.hlo import HloParseError
from xla_costmodel.hlo._fastpath import fast_parse
from xla_costmodel.hlo._parser import parse_hlo_tokens
from conftest import FIXTURES, fixture_paths, module_signature

DATA = Path(__file__).parent / "data"
# XLA prints a tuple constant as `{...}`, which its own parser then refuses (checked below); the
# mutants start from the printed zoo with that one literal written out.
XLA_PRINTED = (DATA / "grammar_zoo.xla_printed.hlo").read_text()
_ELIDED_TUPLE = "(f32[], s32[2]{0}) constant({...})"
XLA_PRINTED_READABLE = XLA_PRINTED.replace(_ELIDED_TUPLE, "(f32[], s32[2]{0}) constant((1, {2, 3}))")
XLA_TESTS = FIXTURES / "xla_tests"
# One small module of XLA's tests for each of these features.
FEATURES = ["async-start(", "-start(", "while(", "conditional(", "custom-call(", "all-reduce(", "sharding=",
            "send(", "dynamic-update-slice(", "fusion(", "sort(", "scatter(", "gather(", "control-predecessors",
            "reduce-window(", "convolution(", "b(f32", "calls={", "bitcast(", "call("]


def _feature_modules() -> list[tuple[str, str]]:
    manifest = json.loads((XLA_TESTS / "MANIFEST.json").read_text())
    picked: dict[str, tuple[str, str]] = {}
    for entry in manifest["modules"]:
        if entry["xla_parser"] != "accepted":
            continue
        text = (XLA_TESTS / entry["file"]).read_text()
        if len(text) > 3000:
            continue
        for feature in FEATURES:
            if feature not in picked and feature in text:
                picked[feature] = (entry["file"], text)
    return sorted(set(picked.values()))


SOURCES = (
    [("grammar_zoo.hlo", (DATA / "grammar_zoo.hlo").read_text()), ("grammar_zoo.xla_printed.hlo", XLA_PRINTED_READABLE)]
    + [(p.name, p.read_text()) for p in fixture_paths() if p.stat().st_size < 6_000]
    + _feature_modules()
)
TEXTS = [text for _, text in SOURCES]
TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|%?[\w.\-]+|\S')
ALPHABET = list("{}()[],=:%\"' \n<>-?*/x0123456789abcfkT") + [
    "ROOT", "ENTRY", "f32[", "->", "/*", "*/", "==", "b(", "}\n", "f16[]", "s32[2]", "(f32[], s32[])", ", index=0",
    ", dimensions={0}", "nan(0x1)", "-65520", "add-start", "async_execution_thread=\"x\"", "calls={", "// x\n",
]
_EXAMPLES = int(os.environ.get("XLA_COSTMODEL_FUZZ_EXAMPLES", 400))
FUZZ = settings(max_examples=_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                print_blob=False)


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 2))):
        text = _mutate(draw, text)
    return text


_DEFINED = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=", re.M)
_BINARY = ["add", "multiply", "subtract", "maximum", "minimum", "divide", "power", "atan2"]
_UNARY = ["negate", "abs", "exponential", "tanh", "sqrt", "log", "copy", "sign", "cosine"]
_OPCODE = re.compile(r"\b(" + "|".join(_BINARY + _UNARY) + r")\(")
_ATTRIBUTE = re.compile(r", [\w.\-]+=(?:\{[^{}\n]*\}|[^,\s{}]+)")
_INTEGER = re.compile(r"(?<![\w.])[0-9]+(?![\w.])")


def _mutate(draw, text: str) -> str:
    kind = draw(st.sampled_from([
        # Mostly breaking: what the parser must refuse, with a location.
        "truncate", "delete", "insert", "swap", "del_token", "dup_token", "swap_tokens", "replace_token", "copy_line",
        # Mostly keeping the module valid: what analyze and simulate_fusion then get.
        "opcode", "opcode", "rename", "rename", "drop_attribute", "integer",
    ]))
    n = len(text)
    if kind == "opcode":
        sites = list(_OPCODE.finditer(text))
        if sites:
            m = draw(st.sampled_from(sites))
            pool = _BINARY if m.group(1) in _BINARY else _UNARY
            return text[: m.start(1)] + draw(st.sampled_from(pool)) + text[m.end(1) :]
    if kind == "rename":  # give an instruction a name used elsewhere (XLA's parser then renames)
        names = sorted(set(_DEFINED.findall(text)))
        if len(names) > 1:
            old, new = draw(st.sampled_from(names)), draw(st.sampled_from(names + ["p0", "x.1", "a.00", "param_0"]))
            return re.sub(rf"(?<![\w.\-]){re.escape(old)}(?![\w.\-])", new, text)
    if kind == "drop_attribute":
        sites = list(_ATTRIBUTE.finditer(text))
        if sites:
            m = draw(st.sampled_from(sites))
            return text[: m.start()] + text[m.end() :]
    if kind == "integer":
        sites = list(_INTEGER.finditer(text))
        if sites:
            m = draw(st.sampled_from(sites))
            return text[: m.start()] + str(draw(st.integers(0, 9))) + text[m.end() :]
    if n < 2:
        return text + draw(st.sampled_from(ALPHABET))
    if kind == "truncate":
        return text[: draw(st.integers(0, n))]
    if kind == "delete":
        i = draw(st.integers(0, n - 1))
        return text[:i] + text[i + 1 :]
    if kind == "insert":
        i = draw(st.integers(0, n))
        return text[:i] + draw(st.sampled_from(ALPHABET)) + text[i:]
    if kind == "swap":
        i = draw(st.integers(0, n - 2))
        return text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    if kind == "copy_line":
        lines = text.split("\n")
        a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines.insert(b, lines[a])
        return "\n".join(lines)
    spans = [m.span() for m in TOKEN.finditer(text)]
    if not spans:
        return text
    a = draw(st.integers(0, len(spans) - 1))
    s, e = spans[a]
    if kind == "del_token":
        return text[:s] + text[e:]
    if kind == "dup_token":
        return text[:e] + " " + text[s:e] + text[e:]
    if kind == "replace_token":
        return text[:s] + draw(st.sampled_from(ALPHABET)) + text[e:]
    b = draw(st.integers(0, len(spans) - 1))
    (s, e), (s2, e2) = sorted([spans[a], spans[b]])
    if s2 < e:
        return text
    return text[:s] + text[s2:e2] + text[e:s2] + text[s:e] + text[e2:]


def test_xla_printed_zoo_is_refused_where_xla_refuses_it():
    # XLA's printer writes the tuple constant as `{...}`; XLA's parser, and ours, refuse that.
    with pytest.raises(ValueError, match=r"was parsing (\d+):(\d+)") as xla:
        oracle.xla_parse(XLA_PRINTED)
    where = tuple(map(int, re.search(r"was parsing (\d+):(\d+)", str(xla.value)).groups()))
    with pytest.raises(HloParseError) as ours:
        xc.parse_hlo(XLA_PRINTED)
    assert (ours.value.line, ours.value.column) == where
    oracle.xla_parse(XLA_PRINTED_READABLE)


def test_fast_path_covers_xla_printed_sources():
    fast = [name for name, text in SOURCES if fast_parse(text, name) is not None]
    assert "grammar_zoo.xla_printed.hlo" in fast
    assert all(name in fast for name, _ in SOURCES if name.endswith((".pre.hlo", ".post.hlo"))), fast


@settings(max_examples=max(_EXAMPLES // 2, 50), deadline=None, suppress_health_check=[HealthCheck.too_slow],
          print_blob=False)
@given(mutated())
def test_fast_path_reads_mutants_as_the_token_parser_does(text):
    fast = fast_parse(text, "mutant.hlo")
    if fast is None:
        return  # the token parser takes over; nothing to compare
    # What the fast path accepts, the token parser accepts, into the same graph.
    assert module_signature(fast) == module_signature(parse_hlo_tokens(text, source="mutant.hlo", verify=False))


def _check_mutant(text: str, call) -> None:
    """The parser raises only located `HloParseError`s; on what it accepts, `analyze` and `simulate_fusion`
    (which document no error for a valid module) raise nothing. `call(fn, *args)` makes each call."""
    try:
        module = call(xc.parse_hlo, text, source="mutant.hlo")
    except HloParseError as err:
        event("refused by the parser")
        assert err.line >= 1 and err.column >= 1
        lines = str(err).splitlines()
        assert lines[0].startswith(f"mutant.hlo:{err.line}:{err.column}: ")
        assert "^" in lines[-1] or not text  # the line, with a caret under the column
        return
    event("parsed, analyzed and fused")
    for _, instr in module.instructions():
        for key in instr.attributes:
            instr.attributes[key]
        instr.metadata
    xc.parse_hlo(module.to_text())  # what we print, we read back
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CostModelWarning names kernels a model cannot price: documented
        call(xc.analyze, module)
        call(xc.simulate_fusion, module)


def _call(fn, *args, **kwargs):
    return fn(*args, **kwargs)


@FUZZ
@given(mutated())
def test_mutants_raise_only_documented_errors(text):
    _check_mutant(text, _call)


PATHOLOGICAL = ["{" * 20000, "(" * 20000, "f32[" * 5000, '"' * 20001, "a = " * 5000]


def _pathological(junk: str) -> str:
    return "HloModule m\nENTRY e {\n  a = f32[] parameter(0), x=" + junk + "\n}\n"


@pytest.mark.parametrize("junk", PATHOLOGICAL)
def test_pathological_input_is_refused(junk):
    with pytest.raises(HloParseError):
        xc.parse_hlo(_pathological(junk))

