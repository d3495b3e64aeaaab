"""`measure` on real traces of small programs, captured here with jax.profiler on the CPU."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from xla_costmodel.measure import (
    CommandBufferWarning,
    ConcurrentKernelsWarning,
    find_trace_files,
    measure_kernels,
    measure_program,
    measurement_from_trace,
    merge_measurements,
)
from xla_costmodel.measure._measure import _command_buffers_off


def _program():
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal((128, 64)), jnp.float32)
    y = jnp.asarray(rng.standard_normal((64, 32)), jnp.float32)

    def prog(x, y):
        h = jnp.tanh(x) + 1.0
        return (h @ y).sum(axis=0), h.T * 2.0, jnp.max(x, axis=1)

    return prog, (x, y)


@pytest.fixture(scope="module")
def measured():
    fn, args = _program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        return measure_program(fn, *args, repeats=10, discard=3)


def test_every_kernel_appears_with_positive_times(measured):
    m = measured
    assert m.missing == ()
    k = m.kernels
    expected = m.module.expected_kernels()
    assert set(expected) <= set(k["hlo_op"])
    assert k["in_module"].all()
    assert (k["hlo_module"] == m.module.name).all()
    assert (k["n"] == 7).all()
    assert all(len(s) == 7 and min(s) > 0 for s in k["samples_per_run_s"])
    assert (k["min_per_run_s"] > 0).all()
    np.testing.assert_allclose(k["min_per_run_s"], [min(s) for s in k["samples_per_run_s"]])
    np.testing.assert_allclose(k["median_per_run_s"], [np.median(s) for s in k["samples_per_run_s"]])
    # The opcodes come from the compiled module itself.
    ops = dict(zip(m.module.expected_kernels(), [m.module.instructions[n].opcode for n in expected]))
    assert dict(zip(k["hlo_op"], k["opcode"])) == {n: ops[n] for n in k["hlo_op"]}


def test_kernels_fit_within_wall_time(measured):
    runs = measured.runs
    assert len(runs) == 10 and runs["kept"].sum() == 7
    tol = 5e-6 + 0.01 * runs["wall_s"]
    assert (runs["busy_s"] <= runs["wall_s"] + tol).all()
    assert (runs["late_s"] <= tol).all()
    alone = runs[~runs["overlap"]]
    assert (alone["kernel_sum_s"] <= alone["wall_s"] + tol[~runs["overlap"]]).all()
    # The traced span of a run holds Python's own clock around it, and little
    # else: the two agree on every run, the discarded first ones included.
    assert (runs["host_wall_s"] <= runs["wall_s"] + 5e-6).all()
    np.testing.assert_allclose(runs["wall_s"], runs["host_wall_s"], rtol=0.25, atol=50e-6)
    assert (runs["host_wall_s"] > 0).all()


def test_measure_returns_the_kernel_table():
    fn, args = _program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        df = measure_kernels(fn, *args, repeats=6, discard=2)
    assert isinstance(df, pd.DataFrame)
    for col in ("hlo_module", "hlo_op", "n", "min_per_run_s", "median_per_run_s", "samples_per_run_s"):
        assert col in df.columns
    assert df.attrs["hlo_module"] == "jit_prog"
    assert df.attrs["backend"] == "cpu"
    assert "HloModule jit_prog" in df.attrs["hlo_text"]


def test_loop_body_kernels_are_summed_per_run_and_the_loop_is_not_a_kernel():
    x = jnp.ones((64, 64), jnp.float32)

    def looped(x):
        return jax.lax.fori_loop(0, 5, lambda i, v: jnp.sin(v) * 0.5, x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        m = measure_program(looped, x, repeats=6, discard=2)
    k = m.kernels.set_index("hlo_op")
    body = k[k["role"] == "control"]
    assert len(body) > 0
    assert (body["launches"] == 5).all()
    # The while thunk is not a kernel: its row is in `control_flow`, with the kernels' columns.
    assert not k["opcode"].isin(["while", "conditional", "call"]).any()
    loop = m.control_flow
    assert list(loop.columns) == list(m.kernels.columns) and list(loop["opcode"]) == ["while"]
    assert loop["role"].iloc[0] == "entry" and loop["launches"].iloc[0] == 1
    # The kernel rows add up to the run's kernel time, which fits in the run's wall time where
    # kernels did not overlap (the loop's own span, which holds its body's kernels, is not added).
    kept = m.runs[m.runs["kept"]]
    per_run = np.sum([s for s in k["samples_per_run_s"]], axis=0)
    alone = ~kept["overlap"].to_numpy()
    assert alone.any()
    assert (per_run[alone] <= kept["wall_s"].to_numpy()[alone] + 1e-6).all()


def test_kept_trace_reads_back_through_json(tmp_path):
    fn, args = _program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        m = measure_program(fn, *args, repeats=5, discard=1, trace_dir=tmp_path)
        files = find_trace_files(tmp_path)
        again = measurement_from_trace(files["json"], m.hlo_text, discard=1, check="ignore")
    assert list(again.kernels["hlo_op"]) == list(m.kernels["hlo_op"])
    np.testing.assert_allclose(again.kernels["min_per_run_s"], m.kernels["min_per_run_s"], rtol=1e-6)


def test_rounds_pool_their_samples():
    fn, args = _program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        a = measure_program(fn, *args, repeats=5, discard=1)
        b = measure_program(fn, *args, repeats=5, discard=1)
    m = merge_measurements([a, b])
    assert list(m.kernels["hlo_op"]) == list(a.kernels["hlo_op"])
    assert (m.kernels["n"] == 8).all()
    ka, kb = a.kernels.set_index("hlo_op"), b.kernels.set_index("hlo_op")
    for row in m.kernels.itertuples():
        assert row.samples_per_run_s == ka.loc[row.hlo_op, "samples_per_run_s"] + kb.loc[row.hlo_op, "samples_per_run_s"]
        assert row.min_per_run_s == min(ka.loc[row.hlo_op, "min_per_run_s"], kb.loc[row.hlo_op, "min_per_run_s"])
    assert list(m.runs["round"]) == [0] * 5 + [1] * 5
    assert m.method == a.method
    other = measure_program(lambda x: x * 3.0, jnp.ones(8), repeats=2, discard=0)
    with pytest.raises(ValueError, match="different compiled modules"):
        merge_measurements([a, other])
    # Samples of different methodologies (here: allocator, run counts) are not pooled.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        c = measure_program(fn, *args, repeats=6, discard=2)
    with pytest.raises(ValueError, match="different methods"):
        merge_measurements([a, c])


def test_bad_arguments():
    fn, args = _program()
    with pytest.raises(ValueError, match="repeats > discard"):
        measure_kernels(fn, *args, repeats=3, discard=3)
    with pytest.raises(ValueError, match="check must be"):
        measure_program(fn, *args, check="maybe")


def test_command_buffer_flag_parsing():
    assert _command_buffers_off("--xla_gpu_enable_command_buffer=")
    assert _command_buffers_off("--foo=1 --xla_gpu_enable_command_buffer=''")
    assert not _command_buffers_off("")
    assert not _command_buffers_off("--xla_gpu_enable_command_buffer=FUSION,CUBLAS")
    # The last occurrence wins, as in XLA's flag parsing.
    assert not _command_buffers_off("--xla_gpu_enable_command_buffer= --xla_gpu_enable_command_buffer=FUSION")
    assert issubclass(CommandBufferWarning, UserWarning)
