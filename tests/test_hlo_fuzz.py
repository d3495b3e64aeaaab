"""Mutated HLO text: the parser may only raise HloParseError, with a location, and stays linear."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xla_costmodel as xc
from xla_costmodel.hlo import HloParseError
from xla_costmodel.hlo._fastpath import fast_parse
from xla_costmodel.hlo._parser import parse_hlo_tokens
from conftest import fixture_paths, module_signature

DATA = Path(__file__).parent / "data"
# The hand-written grammar zoo (token parser), the same module as XLA prints it
# (fast path), and small real fixtures.
SOURCES = [DATA / "grammar_zoo.hlo", DATA / "grammar_zoo.xla_printed.hlo"] + [
    p for p in fixture_paths() if p.stat().st_size < 60_000
][:6]
TEXTS = [p.read_text() for p in SOURCES]
TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|%?[\w.\-]+|\S')
ALPHABET = list("{}()[],=:%\"' \n<>-?*/x0123456789abcfkT") + ["ROOT", "ENTRY", "f32[", "->", "/*", "*/", "=="]

# Enough examples to exercise every kind of mutation, few enough for the CI budget.
FUZZ = settings(max_examples=int(os.environ.get("XLA_COSTMODEL_FUZZ_EXAMPLES", 250)), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(TEXTS))
    kind = draw(st.sampled_from(["truncate", "delete", "insert", "swap", "del_token", "dup_token", "swap_tokens", "replace_token"]))
    n = len(text)
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
    spans = [m.span() for m in TOKEN.finditer(text)]
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


def test_fast_path_covers_xla_printed_sources():
    fast = [p.name for p, t in zip(SOURCES, TEXTS) if fast_parse(t, p.name) is not None]
    assert "grammar_zoo.xla_printed.hlo" in fast and len(fast) >= len(SOURCES) - 1, fast


def _parse_everything(text: str) -> None:
    module = xc.parse_hlo(text, source="mutant.hlo")
    for _, instr in module.instructions():
        for key in instr.attributes:
            instr.attributes[key]
        instr.metadata
        str(instr.shape)
    module.to_text()


@FUZZ
@given(mutated())
def test_fast_path_reads_mutants_as_the_token_parser_does(text):
    fast = fast_parse(text, "mutant.hlo")
    if fast is None:
        return  # the token parser takes over; nothing to compare
    assert module_signature(fast) == module_signature(parse_hlo_tokens(text, source="mutant.hlo"))


@FUZZ
@given(mutated())
def test_mutations_raise_only_located_parse_errors(text):
    try:
        _parse_everything(text)
    except HloParseError as err:
        assert err.line >= 1 and err.column >= 1
        lines = str(err).splitlines()
        assert lines[0].startswith(f"mutant.hlo:{err.line}:{err.column}: ")
        assert "^" in lines[-1]


def _chain(n: int) -> str:
    lines = ["HloModule chain", "ENTRY e {", "  a0 = f32[8,16]{1,0} parameter(0)"]
    for k in range(1, n):
        lines.append(
            f"  a{k} = f32[8,16]{{1,0}} add(a{k-1}, a{k-1}), metadata={{op_name=\"jit(f)/add\" stack_frame_id={k}}}"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _best_time(text: str, parse) -> float:
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        try:
            parse(text)
        except HloParseError:
            pass
        best = min(best, time.perf_counter() - t)
    return best


def test_parse_time_is_linear_in_size():
    small = _best_time(_chain(2000), xc.parse_hlo)
    large = _best_time(_chain(8000), xc.parse_hlo)
    # 4x the input: linear gives ~4x the time, quadratic 16x; leave room for a loaded machine.
    assert large < 4 * small * 2.5, (small, large)


@pytest.mark.parametrize("junk", ["{" * 20000, "(" * 20000, "f32[" * 5000, '"' * 20001, "a = " * 5000])
def test_pathological_input_fails_fast(junk):
    text = "HloModule m\nENTRY e {\n  a = f32[] parameter(0), x=" + junk + "\n}\n"
    elapsed = _best_time(text, xc.parse_hlo)
    with pytest.raises(HloParseError):
        xc.parse_hlo(text)
    assert elapsed < 1.0
