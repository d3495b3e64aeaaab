"""Schedule-context features and the models that read them; whole-program time. Worked by hand."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import xla_costmodel as xc
from xla_costmodel.fit import CONTEXT_FEATURES, FEATURES, ContextModel, FittedModel, LearnedContextModel, context_features
from xla_costmodel.fit._calibrate import context_training_rows
from xla_costmodel import program_time
from xla_costmodel.fit._program import ProgramOverhead, program_table
from xla_costmodel.hlo import HloInstruction

MiB = 1 << 20
FACTS = {"l1": 32 * 1024, "l2": MiB, "l3": 32 * MiB, "cores": 2}

# Four kernels of 4 MiB each: `a` and `b` both read the parameter and do not depend on each other.
CHAIN = """HloModule m, is_scheduled=true

ENTRY e {
  p = f32[1048576]{0} parameter(0)
  a = f32[1048576]{0} exponential(p)
  b = f32[1048576]{0} negate(p)
  c = f32[1048576]{0} add(a, b)
  ROOT d = f32[1048576]{0} sqrt(c)
}
"""


def test_context_features_by_hand():
    m = xc.parse_hlo(CHAIN)
    a, b, c, d = (m.entry.instruction(n) for n in "abcd")
    fa = context_features(a, FACTS)
    assert set(fa) == set(CONTEXT_FEATURES)
    assert fa["program_kernels_log2"] == 2.0  # four kernels
    # the parameter was last read one run earlier: the run writes 16 MiB, so 20 MiB reach -> L3
    assert fa["reuse_l3_bytes"] == 4 * MiB and fa["reuse_dram_bytes"] == 0
    # within two positions, only `b` is independent of `a`
    assert fa["concurrent_kernels"] == 1 and fa["concurrent_bytes"] == 4 * MiB
    fc = context_features(c, FACTS)
    # `a` was written two kernels back (4 MiB in between: reach 8 MiB), `b` just before (reach 4 MiB): both past L2
    assert fc["reuse_l3_bytes"] == 8 * MiB and fc["concurrent_kernels"] == 0
    fd = context_features(d, FACTS)
    assert fd["reuse_l3_bytes"] == 4 * MiB and fd["concurrent_kernels"] == 0
    # with a 64 MiB L2 everything stays in cache; with an 8 MiB L3 the parameter comes from memory
    assert context_features(c, {**FACTS, "l2": 64 * MiB})["reuse_l3_bytes"] == 0
    assert context_features(a, {**FACTS, "l3": 8 * MiB})["reuse_dram_bytes"] == 4 * MiB


def test_a_kernel_outside_a_computation_runs_alone():
    m = xc.parse_hlo(CHAIN)
    p = m.entry.instruction("p")
    lone = HloInstruction("lone", "negate", p.shape, [p])
    assert lone.computation is None
    f = context_features(lone, FACTS)
    assert f["program_kernels_log2"] == 0 and f["concurrent_kernels"] == 0
    assert f["reuse_l3_bytes"] == 4 * MiB  # its own operand, past L2


def test_the_schedule_is_reread_after_an_edit():
    m = xc.parse_hlo(CHAIN)
    a = m.entry.instruction("a")
    assert context_features(a, FACTS)["program_kernels_log2"] == 2.0
    extra = HloInstruction("e2", "negate", a.shape, [m.entry.instruction("p")])
    m.entry.add_instruction(extra, before=m.entry.instruction("c"))
    assert context_features(a, FACTS)["program_kernels_log2"] == pytest.approx(math.log2(5))


def _synthetic(columns, n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(0.0, index=range(n), columns=list(columns))
    used = ["launch", "ld_32b_s1", "op_add_f32", "program_kernels_log2", "reuse_dram_bytes", "concurrent_kernels"]
    for col in used:
        X[col] = rng.integers(0, 50, n).astype(float)
    X["launch"] = 1.0
    w = {"launch": 2e-7, "ld_32b_s1": 1e-9, "op_add_f32": 3e-10, "program_kernels_log2": 5e-8,
         "reuse_dram_bytes": 2e-9, "concurrent_kernels": 4e-8}
    y = sum(X[c] * v for c, v in w.items()).to_numpy()
    return X, y, w


def test_context_model_recovers_context_weights_and_fitted_ignores_them():
    X, y, w = _synthetic(FEATURES + CONTEXT_FEATURES)
    m = ContextModel().fit(X, y)
    got = dict(zip(m.feature_names_, m.coef_))
    for name, value in w.items():
        assert got[name] == pytest.approx(value, rel=1e-6)
    assert m.feature_names_ == list(FEATURES + CONTEXT_FEATURES)
    # the same table given to the kernel-only model: it reads FEATURES alone
    f = FittedModel().fit(X, y)
    assert f.feature_names_ == list(FEATURES)
    assert LearnedContextModel(max_iter=20).fit(X, y).feature_names_ == list(FEATURES + CONTEXT_FEATURES)


def test_context_training_rows_add_our_programs_never_the_corpus():
    rows = pd.DataFrame({
        "kernel_class": ["access", "extra-reduce", "program", "extra-program", "program-unfused", "program"],
        "source": ["suite", "extra", "zoo", "extra", "zoo", "flax"],
    })
    assert list(context_training_rows(rows).index) == [0, 1, 2, 3]  # not the unfused variant, not flax's program


def test_shipped_context_calibrations_price_every_kernel():
    m = xc.load_hlo("hlo_fixtures/transformer_grad.post.hlo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("context", "learned-context"):
            t = xc.analyze(m, device="host", model=name)
            kernels = t[t["bound"] != "free"]
            assert kernels["priced"].all() and (kernels["time_s"] > 0).all(), name


def test_program_overhead_and_program_time():
    programs = pd.DataFrame({"n_kernels": [1, 10, 40, 100, 7],
                             "kernels_per_run_s": [1e-6, 5e-5, 2e-4, 1e-3, 3e-5]})
    programs["wall_per_run_s"] = programs["kernels_per_run_s"] + 30e-6 + 1e-6 * programs["n_kernels"]
    over = ProgramOverhead.fit(programs)
    assert over.per_run_s == pytest.approx(30e-6, rel=1e-3) and over.per_kernel_s == pytest.approx(1e-6, rel=1e-3)
    with pytest.raises(ValueError, match="at least 3"):
        ProgramOverhead.fit(programs.iloc[:2])
    m = xc.load_hlo("hlo_fixtures/mlp_grad.post.hlo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = xc.analyze(m, device="host", model="fitted")
        pt = program_time(m, device="host", model="fitted", overhead=over)
    kernels = t[(t["bound"] != "free")]
    assert pt.n_kernels == len(kernels) and pt.unpriced == 0
    assert pt.kernels_per_run_s == pytest.approx(t.total_time_s)
    assert pt.wall_per_run_s == pytest.approx(t.total_time_s + 30e-6 + 1e-6 * len(kernels), rel=1e-3)
    assert "per run" in pt._repr_html_()


def test_program_time_of_a_function_with_the_defaults():
    """The user's path: `xla_costmodel.program_time(fn, *args)`, the shipped overhead and `fitted` calibration."""
    import jax.numpy as jnp

    def f(x, w):
        return jnp.tanh(x @ w).sum(axis=0)

    x, w = jnp.ones((64, 128), jnp.float32), jnp.ones((128, 32), jnp.float32)
    pt = xc.program_time(f, x, w)
    shipped = ProgramOverhead.from_calibration("host")
    assert pt.device == "host" and pt.n_kernels >= 1 and pt.unpriced == 0
    assert pt.overhead_per_run_s == pytest.approx(shipped(pt.n_kernels))
    assert 0 < pt.kernels_per_run_s < pt.wall_per_run_s
    assert pt.wall_per_run_s == pytest.approx(pt.kernels_per_run_s + pt.overhead_per_run_s)


def test_program_table_sums_a_run():
    rows = pd.DataFrame({
        "case": ["p@s"] * 3 + ["q@s"], "source": ["lib"] * 4, "program": ["p", "p", "p", "q"],
        "hlo_op": ["k1", "k2", "loop", "k"], "opcode": ["fusion", "copy", "while", "fusion"],
        "min_per_run_s": [2e-6, 3e-6, 9e-6, 1e-6], "launches": [1, 4, 1, 1],
        "wall_min_per_run_s": [4e-5, 4e-5, 4e-5, 2e-5], "hlo_text": ["x"] * 4,
    })
    table = program_table(rows)
    assert list(table.index) == ["p@s", "q@s"]
    # the while's span holds its body's kernels, which have rows of their own: left out
    assert table.loc["p@s", "n_kernels"] == 2 and table.loc["p@s", "kernels_per_run_s"] == pytest.approx(5e-6)
    assert table.loc["p@s", "wall_per_run_s"] == 4e-5

