"""Our parser against XLA's own (jaxlib's hlo_module_from_text) on every committed fixture."""

from __future__ import annotations

import pytest

import xla_costmodel as xc
from xla_costmodel.hlo._fastpath import fast_parse
from xla_costmodel.hlo._parser import parse_hlo_tokens
from conftest import fixture_ids, fixture_paths, module_signature, our_instruction_view, xla_instruction_view

PATHS = fixture_paths()


def test_fixtures_exist():
    assert len(PATHS) >= 20, "hlo_fixtures/ should hold pre- and post-optimization modules of the zoo"
    assert any(p.name.endswith(".pre.hlo") for p in PATHS)
    assert any(p.name.endswith(".post.hlo") for p in PATHS)


@pytest.mark.parametrize("path", PATHS, ids=fixture_ids(PATHS))
def test_parse_agrees_with_xla(path):
    text = path.read_text()
    ours = our_instruction_view(xc.parse_hlo(text, source=str(path)))
    theirs = xla_instruction_view(text)
    assert ours.keys() == theirs.keys()
    for key, (opcode, operands, shape) in theirs.items():
        assert ours[key] == (opcode, operands, shape), key


@pytest.mark.parametrize("path", PATHS, ids=fixture_ids(PATHS))
def test_round_trip_through_xla(path):
    text = path.read_text()
    module = xc.parse_hlo(text, source=str(path))
    printed = module.to_text()
    # XLA accepts what we print and reads the same instructions from it ...
    assert xla_instruction_view(printed) == xla_instruction_view(text)
    # ... and so do we, with every attribute kept verbatim.
    again = xc.parse_hlo(printed)
    assert our_instruction_view(again) == our_instruction_view(module)
    for (comp, instr), (comp2, instr2) in zip(module.instructions(), again.instructions()):
        assert instr.raw_attributes == instr2.raw_attributes
        assert (instr.parameter_number, instr.literal_text) == (instr2.parameter_number, instr2.literal_text)
        assert comp.root.name == comp2.root.name
    assert again.entry.name == module.entry.name
    assert again.header_attributes == module.header_attributes


@pytest.mark.parametrize("path", PATHS, ids=fixture_ids(PATHS))
def test_every_attribute_is_readable(path):
    module = xc.load_hlo(path)
    for _, instr in module.instructions():
        for key in instr.attributes:
            instr.attributes[key]  # typed parse must succeed on everything XLA wrote
        for callee in instr.called_computations:
            assert callee.module is module


@pytest.mark.parametrize("path", PATHS, ids=fixture_ids(PATHS))
def test_fast_path_reads_xla_text_like_the_token_parser(path):
    text = path.read_text()
    fast = fast_parse(text, str(path))
    assert fast is not None, "XLA-printed text should take the line-oriented fast path"
    assert module_signature(fast) == module_signature(parse_hlo_tokens(text, source=str(path)))
