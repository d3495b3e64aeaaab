"""XLA's own priority-fusion tests (`priority_fusion_test.cc`), run on `simulate_fusion`.

Each case is one `TEST_F` of XLA's test file: its HLO module and FileCheck
pattern as extracted by `scripts/extract_xla_priority_fusion.py`
(`tests/data/xla_priority_fusion/`, with repository, path, commit and licence
in `SOURCE.json`), and what the test asserts, written in XLA's terms in
`cases.json`: whether the pass changed the module, FileCheck patterns run on
the fused module as XLA's printer writes it (our text, parsed and printed
by jaxlib), XLA pattern-matcher expressions on the root, fusion kinds, and
the emitter kinds of the fusions. The simulation runs on XLA's test device
(RTX A6000) with the `xla-gpu` model, with `simulate_fusion`'s defaults
unless a case names an option and why.

Cases that need Triton (generic Triton fusions, the tiled cost model,
Triton multi-output fusion) are listed with the reason and reported as
skipped.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
import warnings
from pathlib import Path

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from xla_costmodel import _jaxlib_oracle as oracle  # noqa: E402
from xla_costmodel import simulate_fusion  # noqa: E402
from xla_costmodel.fusion import emitter_kind  # noqa: E402
from xla_costmodel.hlo import parse_hlo  # noqa: E402

DATA = Path(__file__).parent / "data" / "xla_priority_fusion"
SOURCE = json.loads((DATA / "SOURCE.json").read_text())
CASES = json.loads((DATA / "cases.json").read_text())
NAMES = sorted(SOURCE["tests"])

# HloFusionAnalysis::EmitterFusionKind for the emitter names of `emitter_kind`.
_EMITTER = {
    "loop": "kLoop", "reduction": "kReduction", "transpose": "kTranspose", "concatenate": "kConcatenate",
    "scatter": "kScatter", "sort": "kSort",
}


# ---------------------------------------------------------------------------
# XLA's pattern matcher (`m::Op(operands...)`), as GmockMatch applies it


_TOKEN = re.compile(r"\s*(?:m::(\w+)|&(\w+)|(\()|(\))|(,))")


def _opcode(name: str) -> str:
    """`GetTupleElement` -> `get-tuple-element`, as XLA spells opcodes."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def parse_pattern(text: str):
    """`m::Add(m::Fusion(&f), m::Fusion())` -> `("add", None, [("fusion", "f", None), ("fusion", None, None)])`.

    A pattern is `(opcode, capture, operands)`; `operands` None means any operands
    (`m::Fusion()`), a list means exactly those, in order (`m::Fusion(m::Constant(), ...)`).
    """
    tokens = [m.groups() for m in _TOKEN.finditer(text)]
    if "".join(m.group(0) for m in _TOKEN.finditer(text)).replace(" ", "") != text.replace(" ", ""):
        raise ValueError(f"cannot read pattern {text!r}")
    pos = 0

    def one():
        nonlocal pos
        op = tokens[pos][0]
        assert op is not None, f"expected m::Op at token {pos} of {text!r}"
        pos += 1
        assert tokens[pos][2] == "(", text
        pos += 1
        capture, operands = None, []
        while tokens[pos][3] != ")":
            if tokens[pos][1] is not None:
                capture = tokens[pos][1]
                pos += 1
            else:
                operands.append(one())
            if tokens[pos][4] == ",":
                pos += 1
        pos += 1
        return (_opcode(op), capture, operands or None)

    pattern = one()
    assert pos == len(tokens), f"trailing text in {text!r}"
    return pattern


def match(pattern, instr, captures: dict) -> bool:
    opcode, capture, operands = pattern
    if instr.opcode != opcode:
        return False
    if operands is not None:
        if len(instr.operands) != len(operands):
            return False
        if not all(match(p, o, captures) for p, o in zip(operands, instr.operands)):
            return False
    if capture is not None:
        captures[capture] = instr
    return True


def test_pattern_reader_and_matcher_by_hand():
    m = parse_hlo("""HloModule t
ENTRY e {
  p0 = f32[4]{0} parameter(0)
  c = f32[] constant(1)
  b = f32[4]{0} broadcast(c), dimensions={}
  ROOT a = f32[4]{0} add(p0, b)
}""")
    root = m.entry.root
    caps: dict = {}
    assert match(parse_pattern("m::Add(m::Parameter(&p), m::Broadcast(m::Constant()))"), root, caps)
    assert caps["p"].name == "p0"
    assert match(parse_pattern("m::Add()"), root, {})
    assert not match(parse_pattern("m::Add(m::Parameter())"), root, {})  # operand count is checked
    assert not match(parse_pattern("m::Add(m::Broadcast(), m::Parameter())"), root, {})  # and order
    assert parse_pattern("m::GetTupleElement(m::Fusion(&f))") == ("get-tuple-element", None, [("fusion", "f", None)])


# ---------------------------------------------------------------------------
# FileCheck, on the module as XLA prints it


def xla_printed(text: str) -> str:
    """`text` parsed by XLA's parser and printed as `RunAndFilecheckHloRewrite` prints
    (`HloPrintOptions()` with large constants)."""
    import jaxlib._hlo as hlo

    opts = hlo.HloPrintOptions()
    opts.print_large_constants = True
    return oracle.xla_parse(text).to_string(opts)


def filecheck(text: str, pattern: str) -> tuple[bool, str]:
    """Run LLVM FileCheck's rules (the `filecheck` package) on `text`; (passed, diagnostics)."""
    from filecheck.matcher import Matcher
    from filecheck.options import Options

    with tempfile.TemporaryDirectory() as tmp:
        check, inp = Path(tmp) / "pattern", Path(tmp) / "input"
        check.write_text(pattern)
        inp.write_text(text)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
            rc = Matcher.from_opts(Options(match_filename=str(check), input_file=str(inp))).run()
    return rc == 0, err.getvalue()


def test_filecheck_runs_llvm_rules():
    text = "ENTRY %main\n  %p = f32[4]{0} parameter(0)\n  ROOT %f = f32[4]{0} fusion(%p)\n"
    assert filecheck(text, "CHECK: ENTRY\nCHECK-NEXT: %[[P:.*]] = f32[4]{0} parameter(0)\nCHECK-NEXT: fusion(%[[P]])")[0]
    assert not filecheck(text, "CHECK: ENTRY\nCHECK-NEXT: fusion(")[0]
    assert not filecheck(text, "CHECK: ENTRY\nCHECK-NOT: %p\nCHECK: ROOT")[0]
    assert filecheck(text, "CHECK: ENTRY\nCHECK-NOT: %q\nCHECK: ROOT")[0]
    assert not filecheck(text, "CHECK-COUNT-2: parameter(")[0]


# ---------------------------------------------------------------------------
# The cases


def test_every_xla_test_has_a_case():
    """No test of XLA's file is left out: each is run, or listed with what it needs."""
    assert set(CASES["cases"]) == set(SOURCE["tests"])
    for name, case in CASES["cases"].items():
        assert ("needs" in case) != ("changed" in case), name


def _fuse(name: str, case: dict):
    text = (DATA / SOURCE["tests"][name]["hlo"]).read_text()
    module = parse_hlo(text, source=f"{name}.hlo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # XLA's PriorityFusion tests run that pass alone: no CSE or constant folding before it, no multi-output
        # fusion after it
        return module, simulate_fusion(module, device=CASES["device"], model=CASES["model"], multi_output=False,
                                       cse=False, constant_folding=False, **case.get("options", {}))


def _check_instruction(label: str, instr, spec: dict, captures: dict) -> list[str]:
    problems = []
    if "match" in spec and not match(parse_pattern(spec["match"]), instr, captures):
        problems.append(f"{label} {instr.opcode} '{instr.name}' does not match {spec['match']}")
        return problems
    if "fusion_kind" in spec and instr.fusion_kind != spec["fusion_kind"]:
        problems.append(f"{label} '{instr.name}' has fusion kind {instr.fusion_kind}, XLA: {spec['fusion_kind']}")
    if "fused_expression_root" in spec:
        body = instr.fused_computation
        if body is None or not match(parse_pattern(spec["fused_expression_root"]), body.root, {}):
            got = body.root.opcode if body is not None else "no fused computation"
            problems.append(f"{label} '{instr.name}' fused root {got} does not match {spec['fused_expression_root']}")
    if "max_operands" in spec and len(instr.operands) > spec["max_operands"]:
        problems.append(f"{label} '{instr.name}' has {len(instr.operands)} operands > {spec['max_operands']}")
    return problems


@pytest.mark.parametrize("name", NAMES)
def test_xla_priority_fusion_case(name):
    case = CASES["cases"][name]
    if "needs" in case:
        pytest.skip(f"needs {case['needs']}")
    module, r = _fuse(name, case)
    text = r.module.to_text()
    printed = xla_printed(text)  # XLA's parser takes the fused module
    problems = []
    changed = len(r.steps) > 0
    if changed != case["changed"]:
        problems.append(f"changed={changed}, XLA: {case['changed']}")
    if case.get("filecheck") and changed:
        pattern = (DATA / SOURCE["tests"][name]["filecheck"]).read_text()
        ok, why = filecheck(printed, pattern)
        if not ok:
            problems.append(f"FileCheck failed:\n{why}")
    captures: dict = {}
    root = r.module.entry.root
    if "root" in case:
        problems += _check_instruction("root", root, case["root"], captures)
    if "called_root" in case and root.called_computations:
        problems += _check_instruction("called root", root.called_computations[0].root, case["called_root"], {})
    for cap, spec in case.get("captures", {}).items():
        if cap in captures:
            problems += _check_instruction(f"&{cap}", captures[cap], spec, {})
    if "emitter_kinds" in case:
        kinds = sorted(_EMITTER[emitter_kind(i)] for _, i in r.module.instructions() if i.opcode == "fusion")
        if kinds != sorted(case["emitter_kinds"]):
            problems.append(f"emitter kinds {kinds}, XLA: {sorted(case['emitter_kinds'])}")
    if problems:
        steps = r.steps[["producer", "consumers", "priority_s", "reason"]].to_string()
        pytest.fail(f"{name}: " + "\n".join(problems) + f"\n\nfused module:\n{printed}\nsteps:\n{steps}")
