"""HLO written by each XLA version we have text from (hlo_fixtures/VERSIONS.md) parses, prints and reads back.

References nobody here wrote: the modules themselves (jax 0.10.2 on this machine, jax 0.11.2 on an H100), and
jaxlib 0.10.2's own parser, which must read every 0.11.2 module the same way as we do once the attributes it
does not know yet (`order=` on compare, `is_stable=` on topk) are taken out.
"""

from __future__ import annotations

import gzip
import re

import pytest

import xla_costmodel as xc
from xla_costmodel.hlo import HloParseError
from xla_costmodel.hlo._fastpath import fast_parse
from xla_costmodel.hlo._opcodes import READERS
from xla_costmodel.hlo._parser import parse_hlo_tokens
from conftest import FIXTURES, module_signature, our_instruction_view, xla_instruction_view

V0_11_2 = sorted((FIXTURES / "gpu_h100").glob("*.hlo.gz"))
V0_10_2 = sorted(FIXTURES.glob("*.hlo"))
ALL = [*V0_10_2, *V0_11_2]


def _ids(paths):
    return [str(p.relative_to(FIXTURES)) for p in paths]


def _text(path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


# What jaxlib 0.10.2's parser does not know yet; everything else of 0.11.2 it reads.
_NEWER = [(re.compile(r", order=(?:TOTAL|PARTIAL)"), ""),
          (re.compile(r"(topk\([^)]*\), k=\d+, largest=(?:true|false)), is_stable=(?:true|false)"), r"\1")]


def _as_0_10_2(text: str) -> str:
    for pattern, replacement in _NEWER:
        text = pattern.sub(replacement, text)
    return text


def test_both_versions_are_there():
    assert len(V0_10_2) >= 40 and len(V0_11_2) == 228
    newer = [p.name for p in V0_11_2 if _as_0_10_2(_text(p)) != _text(p)]
    # The lowered sort/top-k and expm modules carry the new spellings (5 of them: 2 + 3 sizes).
    assert sorted(newer) == sorted(f"{n}.pre.hlo.gz" for n in (
        "jax_numpy_sort_topk@large", "jax_numpy_sort_topk@small",
        "jax_scipy_expm@large", "jax_scipy_expm@medium", "jax_scipy_expm@small"))


@pytest.mark.parametrize("path", ALL, ids=_ids(ALL))
def test_every_module_parses_prints_and_reads_back(path):
    module = xc.load_hlo(path)
    printed = module.to_text()
    again = xc.parse_hlo(printed)
    assert again.to_text() == printed
    assert our_instruction_view(again) == our_instruction_view(module)
    for (_, a), (_, b) in zip(module.instructions(), again.instructions()):
        assert a.raw_attributes == b.raw_attributes
    for _, instr in module.instructions():
        for key in instr.attributes:
            instr.attributes[key]  # every attribute XLA wrote has a typed reading


@pytest.mark.parametrize("path", V0_11_2, ids=_ids(V0_11_2))
def test_jaxlib_0_10_2_reads_0_11_2_modules_as_we_do(path):
    text = _text(path)
    older = _as_0_10_2(text)
    if older != text:
        from jax._src.lib import hlo as xla_hlo

        with pytest.raises(Exception, match='unexpected attribute "(order|is_stable)"'):
            xla_hlo.hlo_module_from_text(text)
    ours = our_instruction_view(xc.parse_hlo(text))
    theirs = xla_instruction_view(older)
    # XLA prints an async-start/update/done that wraps one instruction with the wrapped opcode's name
    # (`fusion-start`); we keep the opcode itself.
    for key, (opcode, operands, shape) in theirs.items():
        mine = ours.get(key, ("",))[0]
        if mine.startswith("async-") and opcode.endswith(mine[len("async"):]):
            theirs[key] = (mine, operands, shape)
    assert ours == theirs


@pytest.mark.parametrize("path", V0_11_2, ids=_ids(V0_11_2))
def test_fast_path_reads_0_11_2_like_the_token_parser(path):
    text = _text(path)
    fast = fast_parse(text, path.name)
    reference = parse_hlo_tokens(text)
    if fast is None:
        # The fast path leaves opcodes with readers of their own (async ops and their sugar such as
        # `fusion-start`, send/recv) to the token parser; anything else it must read.
        own = set(READERS) - {"parameter", "constant"}
        assert any(i.opcode in own for _, i in reference.instructions()), "the fast path gave up on XLA's text"
        return
    assert module_signature(fast) == module_signature(reference)


def compare(type: str, attrs: str) -> str:
    return f"HloModule m\nENTRY e {{\n  a = {type}[] parameter(0)\n  ROOT c = pred[] compare(a, a), direction=LT{attrs}\n}}"


def topk(attrs: str) -> str:
    return f"HloModule m\nENTRY e {{\n  x = f32[4,16] parameter(0)\n  ROOT t = (f32[4,3], s32[4,3]) topk(x), k=3{attrs}\n}}"


@pytest.mark.parametrize("text, value", [
    (compare(type="s32", attrs=", order=TOTAL"), "TOTAL"),
    (compare(type="f32", attrs=", order=PARTIAL"), "PARTIAL"),
    (compare(type="f32", attrs=", order=TOTAL"), "TOTAL"),
])
def test_compare_order_parses_prints_and_round_trips(text, value):
    for reader in (xc.parse_hlo, parse_hlo_tokens):
        module = reader(text)
        root = module.entry.root
        assert root.attribute("order") == value and root.attribute("direction") == "LT"
        printed = module.to_text()
        assert f"direction=LT, order={value}" in printed
        assert reader(printed).entry.root.attribute("order") == value


@pytest.mark.parametrize("attrs, stable, largest", [
    (", largest=true, is_stable=true", True, True),
    (", largest=false, is_stable=false", False, False),
    (", is_stable=true", True, None),
])
def test_topk_is_stable_parses_prints_and_round_trips(attrs, stable, largest):
    text = topk(attrs=attrs)
    for reader in (xc.parse_hlo, parse_hlo_tokens):
        module = reader(text)
        root = module.entry.root
        assert root.attribute("is_stable") is stable
        assert (root.attribute("largest") if root.has_attribute("largest") else None) is largest
        printed = module.to_text()
        assert f"topk(%x), k=3{attrs}" in printed
        assert reader(printed).entry.root.attribute("is_stable") is stable


# Each bad value, and where the error must point: the last occurrence of `at` on the instruction's line (XLA
# points at the value it cannot read, at the repeated attribute's name; our verifier at the instruction).
@pytest.mark.parametrize("text, at, reason", [
    (compare("s32", ", order=FOO"), "FOO", "expects comparison order but sees: FOO"),
    (compare("s32", ", order=total"), "total", "expects comparison order but sees: total"),
    (compare("s32", ", order=TOTAL, order=TOTAL"), "order", "attribute order already exists"),
    (topk(", largest=maybe"), "maybe", "expects true or false"),
    (topk(", largest=true, is_stable=maybe"), "maybe", "expects true or false"),
    (topk(", is_stable=1"), "1", "expects true or false"),
    # XLA's Comparison has no partial order on integers (IsValidComparison): the verifier refuses it.
    (compare("s32", ", order=PARTIAL"), "c ", "partial order"),
    (compare("pred", ", order=PARTIAL"), "c ", "partial order"),
])
def test_malformed_new_attributes_are_rejected_where_they_stand(text, at, reason):
    line = text.splitlines()[3]
    for reader in (xc.parse_hlo, parse_hlo_tokens):
        with pytest.raises(HloParseError) as err:
            reader(text, source="m.hlo")
        assert reason in err.value.reason
        assert (err.value.source, err.value.line, err.value.column) == ("m.hlo", 4, line.rindex(at) + 1)


def test_what_every_version_rejects_we_reject():
    # An attribute no version of XLA has, on the opcodes that gained one.
    for text in (compare(type="s32", attrs=", ordering=TOTAL"),
                 topk(attrs=", stable=true")):
        with pytest.raises(HloParseError, match="unexpected attribute"):
            xc.parse_hlo(text)
