"""The HLO front end on hand-written text covering the grammar, checked against XLA's parser."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xla_costmodel as xc
from xla_costmodel import _jaxlib_oracle as oracle
from xla_costmodel.hlo import HloParseError, Shape, Window
from xla_costmodel.hlo._parser import parse_hlo_tokens
from conftest import our_instruction_view, xla_instruction_view

GRAMMAR = Path(__file__).parent / "data" / "grammar_zoo.hlo"


@pytest.fixture(scope="module")
def zoo():
    return xc.load_hlo(GRAMMAR)


def test_grammar_zoo_agrees_with_xla(zoo):
    text = GRAMMAR.read_text()
    assert our_instruction_view(zoo) == xla_instruction_view(text)
    # and what we print is read the same way by XLA
    assert xla_instruction_view(zoo.to_text()) == xla_instruction_view(text)


def test_module_structure(zoo):
    assert zoo.name == "grammar_zoo"
    assert [c.name for c in zoo.computations][:3] == ["add_f32", "max_f32", "ge_f32"]
    assert zoo.entry.name == "main" and zoo.entry.is_entry
    assert zoo.computation("%body") is zoo.computation("body")
    # ROOT is not the last instruction of the entry
    assert zoo.entry.root.name == "out" and zoo.entry.instructions[-1].name == "tiled"
    # without ROOT the last instruction is the root
    assert zoo.computation("add_f32").root.name == "sum"
    assert [p.name for p in zoo.entry.parameters] == ["x", "idx"]
    assert "entry_computation_layout" in zoo.header_attributes
    assert zoo.header_attributes["frontend_attributes"] == '{fingerprint="abc"}'


def test_users_and_operands(zoo):
    x = zoo.entry.instruction("x")
    assert {u.name for u in x.users} >= {"tr", "rs", "sl", "dot", "fused"}
    dot = zoo.entry.instruction("dot")
    assert dot.operands == [x, x]
    assert dot.users == []
    assert x.users.count(dot) == 1


def test_shapes(zoo):
    e = zoo.entry
    tr = e.instruction("tr").shape
    assert tr.element_type == "f32" and tr.dims == (16, 8) and tr.layout.minor_to_major == (0, 1)
    assert tr.byte_size == 16 * 8 * 4
    out = e.instruction("out").shape
    assert out.is_tuple and [str(s) for s in out.tuple_shapes] == ["f32[8,16]{1,0}", "f32[]"]
    assert out.byte_size == 8 * 16 * 4 + 4
    dyn = e.instruction("dyn").shape
    assert dyn.dims == (8, 16) and dyn.dynamic == (True, False) and str(dyn) == "f32[<=8,16]{1,0}"
    tiled = e.instruction("tiled").shape
    assert tiled.layout.tiles == ((8, 128), (2, 1)) and tiled.layout.memory_space == 1
    assert str(tiled) == "f32[8,16]{1,0:T(8,128)(2,1)S(1)}"
    assert str(e.instruction("tok").shape) == "token[]"
    loop_param = zoo.computation("body").parameters[0].shape
    assert loop_param.is_tuple and loop_param.tuple_shapes[1].dims == (8, 16)


def test_nested_tuple_and_unbounded_shapes():
    text = (
        "HloModule t\nENTRY e {\n  p = ((f32[2]{0}, s32[]), pred[], f32[?,3]) parameter(0)\n"
        "  ROOT g = (f32[2]{0}, s32[]) get-tuple-element(p), index=0\n}\n"
    )
    # XLA's parser reads unbounded dimensions; the verifier of XLA's tests refuses them.
    m = xc.parse_hlo(text, verify=False)
    p = m.entry.parameters[0].shape
    assert p.tuple_shapes[0].tuple_shapes[1].element_type == "s32"
    assert p.tuple_shapes[2].dims == (-1, 3) and p.tuple_shapes[2].dynamic == (True, False)
    assert [path for path, _ in p.leaves()] == [(0, 0), (0, 1), (1,), (2,)]
    assert str(p) == "((f32[2]{0}, s32[]), pred[], f32[?,3])"
    with pytest.raises(HloParseError, match="Unbounded dynamism is disabled for instruction") as info:
        xc.parse_hlo(text)
    assert (info.value.line, info.value.column) == (3, 3)


def test_typed_attributes(zoo):
    e = zoo.entry
    assert e.instruction("sl").attributes["slice"] == ((0, 8, 2), (0, 16, 2))
    assert e.instruction("pd").attributes["padding"] == ((1, 1, 0), (1, 1, 1))
    window = e.instruction("rw").attributes["window"]
    assert isinstance(window, Window)
    assert [(d.size, d.stride) for d in window.dimensions] == [(2, 2), (2, 2)]
    dn = e.instruction("conv").attributes["dim_labels"]
    assert (dn.input_batch, dn.input_feature, dn.input_spatial) == (0, 3, (1, 2))
    assert (dn.kernel_input_feature, dn.kernel_output_feature, dn.kernel_spatial) == (2, 3, (0, 1))
    gat = e.instruction("gat").attributes
    assert gat["slice_sizes"] == (1, 16) and gat["index_vector_dim"] == 1 and gat["indices_are_sorted"] is False
    assert e.instruction("cc").attributes["backend_config"] == {"a": 1}
    assert e.instruction("cc2").attributes["backend_config"] == {"k": {"nested": [1, 2, {"x": "}"}]}}
    assert e.instruction("cc").attributes["custom_call_target"] == "my_target"
    assert e.instruction("cvt").attributes["frontend_attributes"] == {"_xla_compute_type": "host", "b": "2"}
    assert e.instruction("x").metadata == {"op_name": "jit(f)/x", "source_file": "/tmp/a (b).py", "source_line": 12}
    assert e.instruction("out").attributes["control-predecessors"] == ("fused",)
    assert e.instruction("idx").attributes["sharding"] == "{replicated}"  # kept raw
    assert e.instruction("ar").attributes["replica_groups"] == "{}"
    assert e.instruction("dot").attributes["operand_precision"] == ("default", "highest")
    assert e.instruction("loop").attributes["backend_config"]["known_trip_count"] == {"n": "10"}


def test_called_computations(zoo):
    e = zoo.entry
    loop = e.instruction("loop")
    assert [c.name for c in loop.called_computations] == ["cond", "body"]
    assert loop.attributes["body"] is zoo.computation("body")
    assert [c.name for c in e.instruction("sw").called_computations] == ["branch_true", "branch_false"]
    fused = e.instruction("fused")
    assert fused.fused_computation is zoo.computation("fused_exp") and fused.fusion_kind == "kLoop"
    assert zoo.callers()["add_f32"] and {i.name for i in zoo.callers()["add_f32"]} >= {"red", "sca", "ar"}


def test_literals(zoo):
    e = zoo.entry
    assert e.instruction("cinf").literal_text == "-inf"
    assert e.instruction("cbig").literal_text == "{...}"
    assert e.instruction("ctuple").literal_text == "(1, {2, 3})"
    assert e.instruction("carr").literal_text.startswith("{ { 1, 2.5")
    assert e.instruction("iota").operands == []


def test_renaming_a_computation_updates_references(zoo):
    m = xc.parse_hlo(zoo.to_text())
    comp = m.computation("add_f32")
    m._by_name.pop(comp.name)
    comp.name = "renamed_add"
    m._by_name[comp.name] = comp
    text = m.to_text()
    assert "to_apply=%renamed_add" in text and "to_apply=%add_f32" not in text
    xla_instruction_view(text)  # XLA accepts it


def test_stack_frame_tables():
    def f(x):
        return np.float32(2) * x

    import jax.numpy as jnp

    m = xc.from_jax(lambda x: jnp.tanh(x) * 2, jnp.ones(4))
    assert set(m.stack_frames) == {"FileNames", "FunctionNames", "FileLocations", "StackFrames"}
    located = [m.source_location(i) for _, i in m.instructions() if "stack_frame_id" in i.metadata]
    assert located and all(loc is not None and loc[0].endswith(".py") for loc in located)
    # tables survive printing
    again = xc.parse_hlo(m.to_text())
    assert again.stack_frames == m.stack_frames


def test_from_jax_optimized_and_lowered():
    import jax.numpy as jnp

    def f(x, w):
        return jnp.tanh(x @ w).sum()

    x, w = jnp.ones((4, 8)), jnp.ones((8, 2))
    lowered = xc.from_jax(f, x, w, optimized=False)
    optimized = xc.from_jax(f, x, w)
    assert not any(i.opcode == "fusion" for _, i in lowered.instructions())
    assert any(i.opcode == "fusion" for _, i in optimized.instructions())
    assert [str(p.shape) for p in lowered.entry.parameters] == ["f32[4,8]{1,0}", "f32[8,2]{1,0}"]


def test_module_without_header_and_no_percent():
    m = xc.parse_hlo("ENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] negate(a)\n}\n")
    assert m.entry.root.opcode == "negate" and m.entry.root.operands[0].name == "a"
    xla_instruction_view(m.to_text())


ERRORS = [
    "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] add(a, c)\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2 parameter(0)\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n",
    "HloModule m\nENTRY e {\n  a = f32[2] parameter(0), metadata={op_name=\"x\"\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2]{0,1} parameter(0)\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  a = f32[2] negate(a)\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2] fusion(), calls=%nowhere\n}\n",
    "HloModule m\nENTRY e {\n  a = q32[2] parameter(0)\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2,2] parameter(0)\n  ROOT t = f32[2,2] transpose(a), dimensions={1,x}\n}\n",
    "HloModule m\nENTRY e {\n  u1 = f32[] parameter(0)\n  ROOT b = f32[] negate(u1)\n}\n",
    "HloModule m\nENTRY e {\n  a = f16[] constant(-65520)\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] frobnicate(a)\n}\n",
    "HloModule m\nENTRY e {\n  ROOT a = f32[] constant(nan(0x10000000000000))\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] negate(f32[3] a)\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] pad(a, a), padding=1_1_x\n}\n",
    "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] negate(a), control-predecessors={z}\n}\n",
]
_XLA_ERROR = re.compile(r"was parsing (\d+):(\d+): error: (.*)")


@pytest.mark.parametrize("text", ERRORS)
def test_errors_are_xlas_at_xlas_line_and_column(text):
    with pytest.raises(ValueError) as xla:
        oracle.xla_parse(text)
    line, column, reason = _XLA_ERROR.search(str(xla.value)).groups()
    with pytest.raises(HloParseError) as info:
        xc.parse_hlo(text, source="bad.hlo")
    err = info.value
    assert (err.line, err.column) == (int(line), int(column)), (str(err), reason)
    assert err.reason.startswith(reason.strip()), (err.reason, reason)
    assert str(err).startswith(f"bad.hlo:{line}:{column}: ")
    quoted, caret = str(err).splitlines()[1:3]
    lines = text.splitlines()
    assert quoted.strip() == (lines[err.line - 1].strip() if err.line <= len(lines) else "")
    assert caret.index("^") - 4 == err.column - 1


def test_attribute_values_are_checked_when_read_and_kept_verbatim():
    m = xc.parse_hlo("HloModule m\nENTRY e {\n  a = f32[2,2] parameter(0)\n"
                     "  ROOT t = f32[2,2] transpose(a), dimensions={1, 0}\n}\n")
    assert m.entry.root.raw_attributes["dimensions"] == "{1, 0}"
    assert m.entry.root.attributes["dimensions"] == (1, 0)


def test_cli_stats_and_bad_input(tmp_path):
    good = tmp_path / "m.hlo"
    good.write_text(GRAMMAR.read_text())
    run = lambda *a: subprocess.run([sys.executable, "-m", "xla_costmodel.cli", *a], capture_output=True, text=True)
    r = run("stats", str(good), "--json")
    assert r.returncode == 0, r.stderr
    import json

    stats = json.loads(r.stdout)
    assert stats["computations"] == 9 and stats["opcodes"]["parameter"] == 13
    assert stats["instructions"] == sum(stats["opcodes"].values())
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] add(a, c)\n}\n")
    r = run("stats", str(bad))
    assert r.returncode == 2
    assert f"{bad}:4:26:" in r.stderr and "Traceback" not in r.stderr
    r = run("stats", str(tmp_path / "missing.hlo"))
    assert r.returncode == 2 and "no such file" in r.stderr


def test_shape_constructors():
    s = Shape.array("bf16", (4, 3), (0, 1))
    assert str(s) == "bf16[4,3]{0,1}" and s.byte_size == 24 and s.num_elements == 12
    assert Shape.array("s4", (3,)).byte_size == 2  # sub-byte types are packed
    assert math.prod(()) == Shape.array("f32", ()).num_elements == 1


def test_trailing_blanks_and_comments_are_ignored():
    text = "HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n} \n  \n// done\n/* end */  \n"
    assert xc.parse_hlo(text).entry.root.name == "a"


def test_type_names_cannot_name_instructions():
    # XLA's lexer reads `u1` as a type, so its parser "expects name" there; so do we, on both parsing paths.
    text = "HloModule m\nENTRY e {\n  u1 = f32[] parameter(0)\n  ROOT b = f32[] negate(u1)\n}\n"
    for parse in (xc.parse_hlo, parse_hlo_tokens):
        with pytest.raises(HloParseError) as info:
            parse(text)
        assert info.value.reason == "expects name" and (info.value.line, info.value.column) == (3, 3)


def test_attribute_shortcuts_agree_with_the_full_rules():
    from xla_costmodel.hlo._attributes import _RULES, _ValueReader
    from xla_costmodel.hlo._value_lexer import Tokens

    cases = [("dimensions", "{1,0}"), ("dimensions", "{}"), ("dimensions", "{-1,2}"), ("index", "3"),
             ("index", "-2"), ("kind", "kLoop"), ("direction", "GE"), ("is_stable", "true"), ("is_stable", "false")]
    for name, value in cases:
        full = _RULES[name](_ValueReader(Tokens(value), name))
        assert xc.hlo._attributes.parse_attribute_text(name, value) == full, (name, value)


def test_gzip_text_is_read(tmp_path):
    import gzip

    text = GRAMMAR.read_text()
    packed = tmp_path / "zoo.hlo.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert xc.load_hlo(packed).to_text() == xc.load_hlo(GRAMMAR).to_text()
    broken = tmp_path / "broken.hlo.gz"
    broken.write_bytes(gzip.compress(text.encode())[:40])
    with pytest.raises(HloParseError, match="not a valid gzip file") as info:
        xc.load_hlo(broken)
    assert str(info.value).startswith(f"{broken}:1:1: ")
    binary = tmp_path / "binary.hlo"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(HloParseError, match="not a text file"):
        xc.load_hlo(binary)


def test_missing_names_are_reported_with_the_nearest_ones(zoo):
    with pytest.raises(KeyError) as info:
        zoo.computation("add_f33")
    assert "has no computation 'add_f33'; nearest: add_f32" in str(info.value)
    with pytest.raises(KeyError) as info:
        zoo.entry.instruction("dots")
    assert "computation 'main' has no instruction 'dots'; nearest: dot" in str(info.value)
    with pytest.raises(KeyError) as info:
        zoo.computation("zzzzzz")
    assert "its computations: add_f32, max_f32" in str(info.value)


def test_readme_tour_front_end_lines_run(monkeypatch):
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    block = readme.split("## A tour", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    setup, rest = block.split("# 1. HLO front end", 1)
    front_end = rest.split("\n\n", 1)[0]
    monkeypatch.chdir(Path(__file__).parent.parent)
    scope: dict = {}
    exec(compile(setup + "\n# 1." + front_end, "README.md", "exec"), scope)
    assert scope["m"].computation("region_0.2").parameters


def test_verifier_errors_inside_async_sugar_point_at_the_async_op():
    text = ("HloModule m\nENTRY e {\n  a = f32[4,4] parameter(0)\n"
            "  s = ((f32[4,4], f32[4,4]), f32[8], u32[]) add-start(a, a)\n"
            "  ROOT d = f32[8] add-done(s)\n}\n")
    oracle.xla_parse(text)  # XLA's parser reads it; its verifier (and ours) refuse the add
    with pytest.raises(HloParseError, match="Expected instruction to have shape equal to f32") as info:
        xc.parse_hlo(text, source="async.hlo")
    assert (info.value.line, info.value.column) == (4, 3)


def test_names_kept_as_written_only_where_the_uniquer_keeps_them():
    """The shortcut that skips uniquing says yes only for lists `NameUniquer` gives back unchanged."""
    import random

    from xla_costmodel.hlo._names import NameUniquer, kept_as_written

    rng = random.Random(7)
    parts = ["x", "y", "x.", "0", "00", "05", "5", "-5", "+5", "-0", "12", "1234567890123456789"]
    said_yes = 0
    for _ in range(20000):
        names = [".".join(rng.choice(parts) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(0, 4))]
        names = [n for n in names if n[0].isalpha()]
        if kept_as_written(names):
            said_yes += 1
            assert NameUniquer().unique_all(list(names)) == names, names
    assert said_yes > 1000  # and the test is not vacuous
    assert not kept_as_written(["x", "x.0"]) and not kept_as_written(["x.05"]) and not kept_as_written(["a", "a"])
    m = xc.parse_hlo("HloModule m\nc {\n  x = f32[] parameter(0)\n  ROOT x.0 = f32[] negate(x)\n}\n"
                     "ENTRY e {\n  x = f32[] parameter(0)\n  ROOT y = f32[] call(x), to_apply=c\n}\n")
    assert [i.name for c in m.computations for i in c.instructions] == ["x", "x.1", "x.2", "y"]


@pytest.mark.parametrize("first, second", [
    ("r1 = f32[1] dynamic-slice(a, i), dynamic_slice_sizes={1}",  # the check reads the operands' shapes
     "r2 = f32[1] dynamic-slice(c, i), dynamic_slice_sizes={1}"),
    ("r1 = f32[4,2] broadcast(s)", "r2 = f32[4,2] broadcast(a)"),  # the attributes allowed depend on them
    ("r1 = f32[4] negate(a)", "r2 = f32[4] negate(a, a)"),  # operand count
    ("r1 = f32[4] negate(f32[4] a)", "r2 = f32[4] negate(f32[8] a)"),  # operand shapes as written
    ("r1 = f32[4] negate(a)", "r1 = f32[4] negate(a)"),  # names
    ("r1 = f32[4] parameter(5)", "r2 = f32[4] parameter(5)"),  # parameter numbers
])
def test_lines_alike_are_each_checked(first, second):
    """The fast path reads a line like one before (but for its names) from what it made then: every check that
    looks at more than the line's text but for names still runs."""
    from xla_costmodel.hlo._fastpath import fast_parse

    head = ("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[8] parameter(1)\n  s = f32[] parameter(2)\n"
            "  i = s32[] parameter(3)\n  c = f32[4,4] parameter(4)\n")
    good = head + f"  {first}\n  ROOT t = () tuple()\n}}\n"
    bad = head + f"  {first}\n  {second}\n  ROOT t = () tuple()\n}}\n"
    assert fast_parse(good, "x") is not None
    assert fast_parse(bad, "x") is None
    with pytest.raises(HloParseError) as info:
        xc.parse_hlo(bad, verify=False)
    assert info.value.line >= 9  # at the second line, or where XLA's parser notices (past its attributes)
    with pytest.raises(Exception):
        oracle.xla_parse(bad)


@pytest.mark.parametrize("first, second, line", [
    ("x = f32[4] negate(a)", "y = f32[4] negate(b)", 6),  # like x but for its operand's shape
    ("x = f32[4] add(a, a)", "y = f32[4] add(a, b)", 6),
    ("x = f32[4] reshape(a)", "y = f32[4] reshape(b)", 6),
    ("x = f32[8] negate(a)", "y = f32[8] negate(a)", 5),  # the first of those alike fails
])
def test_verifier_checks_each_line_unlike_those_before(first, second, line):
    """The verifier skips instructions like an earlier one in all its rules look at; not the others."""
    text = (f"HloModule m\nENTRY e {{\n  a = f32[4] parameter(0)\n  b = f32[8] parameter(1)\n  {first}\n  {second}\n"
            "  ROOT t = () tuple()\n}\n")
    xc.parse_hlo(text, verify=False)
    with pytest.raises(HloParseError, match="shape") as info:
        xc.parse_hlo(text)
    assert info.value.line == line
    with pytest.raises(HloParseError) as tokens:
        parse_hlo_tokens(text)  # the reference reading, every instruction verified
    assert str(tokens.value) == str(info.value)


_CALLEES = (
    "HloModule m\nadd {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT r = f32[] add(p, q)\n}\n"
    "add2 {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT r = f32[] add(p, q)\n}\n"
    "bad {\n  p = s32[] parameter(0)\n  q = s32[] parameter(1)\n  ROOT r = s32[] add(p, q)\n}\n"
    "fused {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n"
    "fused2 {\n  p = f32[8] parameter(0)\n  ROOT n = f32[8] negate(p)\n}\n"
    "three {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  s = f32[] parameter(2)\n"
    "  ROOT r = f32[] add(p, q)\n}\n"
)


@pytest.mark.parametrize("first, second, fails", [
    # The shape inferred from the computation called: each line reads its own.
    ("x = reduce(a, c), dimensions={0}, to_apply=add", "y = reduce(a, c), dimensions={0}, to_apply=bad", "parser"),
    # A rule that looks at the computation called (with the shape written).
    ("x = f32[4] scan(a, c), to_apply=add, dimensions={0}, num_carries=1",
     "y = f32[4] scan(a, c), to_apply=three, dimensions={0}, num_carries=1", "parser"),
    # Each line's computation must be there.
    ("x = f32[4] fusion(a), kind=kLoop, calls=fused", "y = f32[4] fusion(a), kind=kLoop, calls=nowhere", "parser"),
    # And the verifier checks each line calling a computation of its own.
    ("x = f32[4] fusion(a), kind=kLoop, calls=fused", "y = f32[4] fusion(a), kind=kLoop, calls=fused2", "verifier"),
    ("x = f32[] reduce(a, c), dimensions={0}, to_apply=add", "y = f32[] reduce(a, c), dimensions={0}, to_apply=bad",
     "verifier"),
    ("x = f32[] reduce(a, c), dimensions={0}, to_apply=add", "y = f32[] reduce(a, c), dimensions={0}, to_apply=add2",
     None),
])
def test_lines_alike_but_for_the_computation_called(first, second, fails):
    from xla_costmodel.hlo._fastpath import fast_parse

    text = (_CALLEES + f"ENTRY e {{\n  a = f32[4] parameter(0)\n  c = f32[] constant(0)\n  {first}\n  {second}\n"
            "  ROOT t = () tuple()\n}\n")
    if fails == "parser":
        assert fast_parse(text, "x") is None
        with pytest.raises(HloParseError):
            xc.parse_hlo(text, verify=False)
        return
    m = xc.parse_hlo(text, verify=False)
    assert m.entry.instruction("y").called_computations == [m.computation(second.rsplit("=", 1)[1])]
    if fails == "verifier":
        with pytest.raises(HloParseError) as info:
            xc.parse_hlo(text)
        assert info.value.line == 35
    else:
        xc.parse_hlo(text)
