"""The HLO modules of XLA's own tests (`hlo_fixtures/xla_tests`): our parser says what XLA's says.

The corpus holds every module that `scripts/extract_xla_hlo_tests.py` finds in
XLA's tree (its `.hlo` files and the HLO strings of its C++ tests), labelled by
jaxlib's parser. The reference is that parser, run here on each module:

- `parse_hlo(text, verify=False)` accepts exactly the modules XLA's parser
  accepts, and refuses the others at the line and column XLA names;
- the names it gives (unique across the module) are XLA's, computation by
  computation, instruction by instruction;
- what `to_text()` prints, XLA reads back, into the same names;
- `parse_hlo(text)`, which also runs the verifier rules we encode, accepts
  every module that XLA's tests run through XLA's verifier, and refuses
  beyond XLA's parser only the modules listed below, each for a verifier rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xla_costmodel import _jaxlib_oracle as oracle
from xla_costmodel.hlo import HloParseError, parse_hlo

CORPUS = Path(__file__).resolve().parent.parent / "hlo_fixtures" / "xla_tests"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
MODULES = MANIFEST["modules"]
# XLA's tests that run a module through XLA's verifier (so it passes it).
VERIFIED_BY_XLA = {"ParseAndReturnVerifiedModule", "RunAndFilecheckHloRewrite", "RunAndCompare",
                   "RunAndCompareNoHloPasses", "RunAndCompareTwoModules", "MatchOptimizedHlo", "GetOptimizedModule"}
# Modules XLA's parser accepts and our verifier rules refuse: the module and the start of our reason (XLA's
# verifier wording). hlo_verifier_test modules are XLA's own verifier cases; the others break a rule too.
REFUSED_BY_OUR_VERIFIER = {
    "hlo__parser__hlo_parser_test__HloParserTest.DesugarParsingTest_DotStart": "Expected instruction to have shape equal to f32[128",
    "service__hlo_verifier_test__HloVerifierTest.CheckCallOperandParameterShapesMismatch": "Operand %p0 =",
    "service__hlo_verifier_test__HloVerifierTest.CheckConditionalOperandParameterShapesMismatch": "Operand %p0 =",
    "service__hlo_verifier_test__HloVerifierTest.SelectTupleNotAllowed": "Expected array argument for select on-true",
    "service__hlo_verifier_test__HloVerifierTest.AsyncDoneNoAsyncStart": "Expected instruction to have shape equal to",
    "service__hlo_verifier_test__HloVerifierTest.AsyncUpdateAndAsyncDoneNoAsyncStart": "Expected instruction to have shape equal to",
    "service__hlo_verifier_test__HloVerifierTest.IotaNonArrayResult": "Iota does not support non-array result.",
    "service__hlo_verifier_test__HloVerifierTest.IotaNegativeDimension": "The iota dimension cannot go beyond the operation rank",
    "service__hlo_verifier_test__HloVerifierTest.IotaPredResultNotAllowed": "Only support iota of integral",
    "service__hlo_verifier_test__HloVerifierTest.FusionLessOperandsThanParameters": "Fused parameter count",
    "service__hlo_verifier_test__HloVerifierTest.FusionShapeVerifier": "Fused computation shape",
    "service__hlo_verifier_test__HloVerifierTest.ComparisonTypeFloat": "Expected comparison type FLOAT or TOTALORDER.",
    "service__hlo_verifier_test__HloVerifierTest.ComparisonTypeSigned": "Expected comparison type SIGNED.",
    "service__hlo_verifier_test__HloVerifierTest.ComparisonTypeUnsigned": "Expected comparison type UNSIGNED.",
    "service__hlo_verifier_test__HloVerifierTest.ComparisonTypePred": "Expected comparison type UNSIGNED.",
    "service__hlo_verifier_test__HloVerifierTest.UnboundedDynamism": "Unbounded dynamism is disabled for instruction",
    "hlo__builder__tests__math_next_after.part1": "Shape of the root instruction of entry computation",
    "hlo__tools__tests__generate_hlo_test_checks_test_input.part4": "Operand %constant.0 = f32[4] constant",
    "hlo__tools__tests__generate_hlo_test_checks_test_output.part4": "Operand %constant.0 = f32[4] constant",
    "hlo__transforms__tests__operand_upcaster": "Expected instruction to have shape equal to s32[8",
    "hlo__translate__hlo_to_mhlo__tests__custom_call": "Unbounded dynamism is disabled for instruction",
    "hlo__translate__hlo_to_mhlo__tests__import": "Mapped computation's result has to be a scalar; got",
    "hlo__translate__hlo_to_mhlo__tests__layouts_and_names.part1": "Shape of the root instruction of entry computation",
    "hlo__translate__hlo_to_mhlo__tests__while.part4": "operand dimension 0",
    "tools__print_indexing_test": "Shape mismatch between parameter number 1 and its operand in",
    "tools__tests__data__invalid_concat": "Cannot concatenate arrays that differ in dimensions other than",
}


def _key(entry: dict) -> str:
    return entry["file"][len("modules/") : -len(".hlo")]


def _text(entry: dict) -> str:
    return (CORPUS / entry["file"]).read_text()


@pytest.fixture(scope="module")
def readings() -> list[tuple[dict, str, oracle.XlaVerdict, object]]:
    """(manifest entry, text, XLA's verdict, our module or our HloParseError) for every module."""
    out = []
    for entry in MODULES:
        text = _text(entry)
        try:
            ours = parse_hlo(text, source=entry["file"], verify=False)
        except HloParseError as err:
            ours = err
        out.append((entry, text, oracle.xla_verdict(text), ours))
    return out


def test_corpus_records_where_each_module_comes_from():
    assert MANIFEST["repository"] == "openxla/xla" and MANIFEST["license"] == "Apache-2.0"
    assert len(MANIFEST["commit"]) == 40
    assert len(MODULES) > 1500
    for entry in MODULES:
        assert entry["path"].startswith("xla/") and entry["line"] >= 1 and entry["xla_parser"] in ("accepted", "rejected")
    rejected = sum(entry["xla_parser"] == "rejected" for entry in MODULES)
    assert 50 < rejected < len(MODULES) - 1000  # both verdicts, in numbers


def test_labels_are_what_this_jaxlib_says(readings):
    version = oracle.jaxlib_versions()["jaxlib"]
    if version not in MANIFEST["labelled_with"]:
        pytest.skip(f"labels come from {MANIFEST['labelled_with']}; this is jaxlib {version}")
    stale = [e["file"] for e, _, xla, _ in readings if (e["xla_parser"] == "accepted") != xla.accepted]
    assert not stale


def test_verdict_is_xlas_on_every_module(readings):
    disagree = [
        (e["file"], "XLA accepts" if xla.accepted else f"XLA refuses: {xla.message}", str(ours).split("\n")[0])
        for e, _, xla, ours in readings
        if xla.accepted != (not isinstance(ours, HloParseError))
    ]
    assert not disagree, disagree[:10]


def test_refusals_are_at_xlas_line_and_column(readings):
    refused = [(e, xla, ours) for e, _, xla, ours in readings if not xla.accepted and isinstance(ours, HloParseError)]
    assert refused
    elsewhere = [
        (e["file"], (xla.line, xla.column, xla.message), (ours.line, ours.column, ours.reason))
        for e, xla, ours in refused
        if xla.line is not None and (ours.line, ours.column) != (xla.line, xla.column)
    ]
    assert not elsewhere, elsewhere[:10]
    # and in XLA's words (ours may say more: XLA reports the detail as a second error)
    worded = sum(ours.reason.startswith(xla.message) for _, xla, ours in refused if xla.line is not None)
    assert worded >= 0.9 * len(refused)


def test_names_are_xlas_on_every_accepted_module(readings):
    differ = []
    for e, text, xla, ours in readings:
        if xla.accepted and not isinstance(ours, HloParseError):
            mine = {c.name: [i.name for i in c.instructions] for c in ours.computations}
            if mine != oracle.xla_names(text):
                differ.append(e["file"])
    assert not differ, differ[:10]


def test_what_we_print_xla_reads_back_with_the_same_names(readings):
    unread = []
    for e, text, xla, ours in readings:
        if xla.accepted and not isinstance(ours, HloParseError):
            printed = ours.to_text()
            try:
                names = oracle.xla_names(printed)
            except ValueError as err:
                unread.append((e["file"], str(err)[:300]))
                continue
            if names != oracle.xla_names(text):
                unread.append((e["file"], "names differ"))
    assert not unread, unread[:5]


def test_strict_parse_refuses_only_what_a_verifier_rule_refuses(readings):
    refused = {}
    for e, text, xla, ours in readings:
        if not xla.accepted or isinstance(ours, HloParseError):
            continue
        try:
            parse_hlo(text, source=e["file"])
        except HloParseError as err:
            refused[_key(e)] = err.reason
    assert set(refused) == set(REFUSED_BY_OUR_VERIFIER)
    for key, start in REFUSED_BY_OUR_VERIFIER.items():
        assert refused[key].startswith(start), (key, refused[key])


def test_strict_parse_accepts_every_module_xlas_tests_verify():
    verified = [e for e in MODULES if e["xla_parser"] == "accepted" and e.get("xla_test_call") in VERIFIED_BY_XLA]
    assert len(verified) > 600
    for entry in verified:
        parse_hlo(_text(entry), source=entry["file"])


def test_xla_verifier_cases_we_encode_are_refused_in_xlas_words():
    # hlo_verifier_test cases whose expected message is one of our rules' messages.
    ours = ("Unbounded dynamism is disabled", "Expected comparison type", "Fused computation shape",
            "does not support non-array result", "greater than the number of operands")
    cases = [
        e for e in MODULES
        if e["xla_parser"] == "accepted" and e["path"].endswith("hlo_verifier_test.cc")
        and (e.get("xla_test_expects") or {}).get("error")
        and any(any(w in m for w in ours) for m in e["xla_test_expects"].get("messages", []))
    ]
    assert len(cases) >= 7
    for entry in cases:
        with pytest.raises(HloParseError) as info:
            parse_hlo(_text(entry), source=entry["file"])
        assert any(m in info.value.reason for m in entry["xla_test_expects"]["messages"]), (entry["test"], info.value.reason)
