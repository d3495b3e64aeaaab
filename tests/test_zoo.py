"""The program zoo, the committed HLO fixtures and the jaxlib oracle.

References nobody here wrote: jax's own eager execution (jit output must match
it), XLA's HLO parser (every fixture must parse; the module we lower must be
the committed text) and XLA's HloCostAnalysis (re-parsing a compiled module's
text must give back ``Compiled.cost_analysis()`` exactly).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

from xla_costmodel import _jaxlib_oracle as oracle  # noqa: E402
from xla_costmodel import zoo  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "hlo_fixtures"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text()) if (FIXTURES / "MANIFEST.json").exists() else None
NAMES = zoo.program_names()
# Eager (op-by-op) execution of these takes seconds; their jit-vs-eager check is marked slow.
SLOW_EAGER = {"transformer_grad", "cnn_grad"}
BF16_PROGRAMS = {"dtypes_mixed"}
SAME_JAX = MANIFEST is not None and MANIFEST.get("jax") == jax.__version__


@pytest.fixture(scope="module")
def manifest() -> dict:
    if MANIFEST is None:
        pytest.fail(f"{FIXTURES / 'MANIFEST.json'} is missing; run scripts/make_fixtures.py")
    return MANIFEST


# ------------------------------------------------------------------- registry


def test_registry_api():
    assert zoo.DEFAULT_PROGRAM == "mlp_grad" and zoo.DEFAULT_PROGRAM in zoo.PROGRAMS
    assert NAMES == list(zoo.PROGRAMS)
    for name, prog in zoo.PROGRAMS.items():
        assert isinstance(prog, zoo.ZooProgram) and prog.name == name and prog.description
        assert zoo.get_program(name) is prog
    with pytest.raises(dataclasses.FrozenInstanceError):
        zoo.PROGRAMS["mlp_fwd"].name = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match="unknown zoo program 'nope'.*mlp_grad"):
        zoo.get_program("nope")


def test_registry_covers_requested_programs():
    required = {
        "mlp_fwd", "mlp_grad", "transformer_fwd", "transformer_grad", "cnn_pool",
        "masked_attention", "scan_rnn", "while_loop", "gather_scatter", "sort_topk", "rng",
        "dtypes_mixed", "data_movement", "fft", "cond_switch", "reductions", "cumulative",
        "layernorm_softmax",
    }
    assert required <= set(NAMES)


def test_transformer_grad_grows_with_layers():
    counts = []
    for layers in (1, 2, 3):
        fn, args = zoo.transformer_grad(layers)
        assert len(args[0]) == layers
        pre = jax.jit(fn).lower(*args).as_text(dialect="hlo")
        counts.append(len(oracle.xla_instructions(pre)))
    # A Python loop over layers, not a scan: every layer adds the same instructions.
    assert counts[1] - counts[0] == counts[2] - counts[1] > 150
    with pytest.raises(ValueError, match="num_layers"):
        zoo.transformer_grad(0)


# ----------------------------------------------------------- build and lower


@pytest.mark.parametrize("name", NAMES)
def test_program_lowers_to_committed_text(name, manifest):
    fn, args = zoo.get_program(name).build()
    assert callable(fn) and isinstance(args, tuple)
    pre = jax.jit(fn).lower(*args).as_text(dialect="hlo")
    assert pre.startswith("HloModule ")
    if not SAME_JAX:
        pytest.skip(f"fixtures made with jax {manifest.get('jax')}, running {jax.__version__}")
    committed = (FIXTURES / f"{name}.pre.hlo").read_text()
    assert pre == committed, f"{name}: lowering changed; rerun scripts/make_fixtures.py --only {name}"


def _assert_close(got, want, where: str, loose: bool):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, where
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    # bf16 results (and f32 ones computed from bf16) differ by bf16 roundings:
    # jit keeps fused intermediates in f32, eager rounds after every op.
    tol = 2e-2 if loose or got.dtype.itemsize <= 2 else 2e-4
    np.testing.assert_allclose(
        got.astype(np.complex128), want.astype(np.complex128), rtol=tol, atol=tol, err_msg=where
    )


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_EAGER else n for n in NAMES]
)
def test_jit_matches_eager(name):
    fn, args = zoo.get_program(name).build()
    jitted = jax.jit(fn)(*args)
    eager = fn(*args)
    got, tree = jax.tree.flatten(jitted)
    want, tree2 = jax.tree.flatten(eager)
    assert tree == tree2
    for i, (g, w) in enumerate(zip(got, want)):
        _assert_close(g, w, f"{name} output leaf {i}", loose=name in BF16_PROGRAMS)


def test_programs_are_deterministic():
    (_, a1), (_, a2) = zoo.get_program("mlp_grad").build(), zoo.get_program("mlp_grad").build()
    for x, y in zip(jax.tree.leaves(a1), jax.tree.leaves(a2)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# ------------------------------------------------------------------ fixtures


def test_manifest_matches_zoo_and_files(manifest):
    assert [e["name"] for e in manifest["programs"]] == NAMES
    assert manifest["backend"]["platform"] == "cpu"
    total = 0
    for entry in manifest["programs"]:
        assert entry["description"] == zoo.get_program(entry["name"]).description
        for kind in ("pre", "post"):
            data = (FIXTURES / entry["files"][kind]).read_bytes()
            assert len(data) == entry[kind]["bytes"], entry["files"][kind]
            assert hashlib.sha256(data).hexdigest() == entry[kind]["sha256"], entry["files"][kind]
            total += len(data)
        total += (FIXTURES / entry["files"]["cost"]).stat().st_size
    assert total == manifest["total_bytes"]
    on_disk = sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".hlo", ".json"))
    listed = sorted([f for e in manifest["programs"] for f in e["files"].values()] + ["MANIFEST.json"])
    assert on_disk == listed
    assert sum(p.stat().st_size for p in FIXTURES.iterdir()) < 3_000_000


@pytest.mark.parametrize("name", NAMES)
def test_fixture_parses_and_matches_xla_cost_analysis(name, manifest):
    entry = next(e for e in manifest["programs"] if e["name"] == name)
    cost = json.loads((FIXTURES / entry["files"]["cost"]).read_text())
    assert cost["name"] == name and cost["jax"] and cost["jaxlib"]
    assert cost["backend"]["platform"] == "cpu"
    for kind in ("pre", "post"):
        text = (FIXTURES / entry["files"][kind]).read_text()
        module = oracle.xla_parse(text, source=entry["files"][kind])
        instrs = oracle.xla_instructions(module)
        assert len(instrs) == entry[kind]["instructions"]
        assert len({i["computation"] for i in instrs}) == len(module.computations())
        assert sum(i["is_root"] for i in instrs) == len(module.computations())
        assert any(i["is_entry"] for i in instrs)
        got = oracle.xla_cost_analysis(module)
        assert "flops" in got and "bytes accessed" in got
        if SAME_JAX:
            assert got == cost[kind]["hlo_module_cost_analysis"]
    # XLA's analysis of the re-parsed optimized text equals what jax reported
    # for the executable, and Lowered.cost_analysis() is the same analysis on
    # the unoptimized module.
    assert cost["post"]["hlo_module_cost_analysis"] == cost["post"]["compiled_cost_analysis"]
    assert cost["pre"]["hlo_module_cost_analysis"] == cost["pre"]["lowered_cost_analysis"]


@pytest.mark.parametrize("name", ["mlp_grad", "cond_switch"])
def test_compiled_cost_analysis_matches_oracle(name):
    fn, args = zoo.get_program(name).build()
    compiled = jax.jit(fn).lower(*args).compile()
    expected = {k: float(v) for k, v in compiled.cost_analysis().items()}
    assert oracle.xla_cost_analysis(compiled.as_text()) == expected


# -------------------------------------------------------------------- oracle

_HAND = """HloModule hand, entry_computation_layout={(f32[2,3]{1,0})->(f32[2,3]{1,0}, f32[])}

add.r {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  e = f32[2,3]{1,0} exponential(p)
  dead = f32[2,3]{1,0} negate(p)
  z = f32[] constant(0)
  r = f32[] reduce(e, z), dimensions={0,1}, to_apply=add.r
  ROOT t = (f32[2,3]{1,0}, f32[]) tuple(e, r)
}
"""


def test_oracle_instructions_on_hand_written_module():
    instrs = oracle.xla_instructions(_HAND)
    by_name = {i["name"]: i for i in instrs}
    assert [i["computation"] for i in instrs] == ["add.r"] * 3 + ["main"] * 6
    assert by_name["e"]["opcode"] == "exponential" and by_name["e"]["opcode_enum"] == "kExp"
    assert by_name["t"]["shape"] == "(f32[2,3]{1,0}, f32[])"
    assert by_name["t"]["operands"] == ["e", "r"] and by_name["t"]["is_root"]
    assert by_name["s"]["is_root"] and not by_name["dead"]["is_root"]
    assert by_name["r"]["opcode"] == "reduce" and by_name["r"]["shape"] == "f32[]"
    assert by_name["p"]["is_entry"] and not by_name["a"]["is_entry"]
    # Worked by hand: exp = 6 transcendentals; negate = 6 flops (dead code is
    # still counted); reducing 6 elements to 1 = 5 adds. Bytes: exp and negate
    # 24 in + 24 out each, reduce 24 + 4 in + 4 out, the tuple writes two
    # 8-byte pointers; parameters and constants are free.
    cost = oracle.xla_cost_analysis(_HAND)
    assert cost["transcendentals"] == 6.0
    assert cost["flops"] == 6.0 + 5.0
    assert cost["bytes accessed"] == 2 * 48 + 32 + 16


def test_oracle_split_instruction_text():
    name, shape, opcode = oracle.split_instruction_text(
        "%w = (s32[], f32[4]{0}, /*index=2*/f32[2,2]{1,0}) while(%t), condition=%c, body=%b"
    )
    assert (name, shape, opcode) == ("w", "(s32[], f32[4]{0}, /*index=2*/f32[2,2]{1,0})", "while")
    assert oracle.split_instruction_text("ROOT %g = f32[] get-tuple-element(%w), index=1")[2] == (
        "get-tuple-element"
    )


def test_oracle_parse_error_names_line_and_column():
    bad = "HloModule m\n\nENTRY e {\n  ROOT a = f32[] bogus()\n}\n"
    with pytest.raises(ValueError, match=r"(?s)bad\.hlo: .*4:18: .*Unknown opcode: bogus"):
        oracle.xla_parse(bad, source="bad.hlo")


@pytest.mark.parametrize("style", ["default", "no_metadata", "short_parsable"])
def test_oracle_module_to_text_round_trips(style):
    text = (FIXTURES / "mlp_grad.post.hlo").read_text()
    printed = oracle.xla_module_to_text(text, style=style)
    # XLA prints computations in its own post-order, not necessarily the file's.
    def key(t):
        return sorted((i["computation"], i["name"], i["opcode"], i["shape"]) for i in oracle.xla_instructions(t))

    assert key(printed) == key(text)
    assert oracle.xla_cost_analysis(printed) == oracle.xla_cost_analysis(text)
    if style == "no_metadata":
        assert "metadata=" not in printed and "backend_config=" not in printed


def test_oracle_module_to_text_other_styles():
    text = (FIXTURES / "mlp_fwd.post.hlo").read_text()
    # canonical/fingerprint print called computations inline and rename instructions.
    assert oracle.xla_module_to_text(text, style="canonical").startswith("HloModule ")
    assert oracle.xla_module_to_text(text, style="fingerprint").startswith("HloModule ")
    with pytest.raises(ValueError, match="unknown print style"):
        oracle.xla_module_to_text(text, style="fancy")
