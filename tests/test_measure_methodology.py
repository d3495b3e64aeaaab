"""One timing methodology: `measure_kernels()`, `xla-costmodel measure --jax` and the suite time kernels alike.

The page-fault counts come from the kernel (`getrusage`), not from anything
this project computes; the compiled modules compared are XLA's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xla_costmodel.measure import (
    DEFAULT_METHOD,
    ConcurrentKernelsWarning,
    STEADY_TUNABLES,
    InProcessMeasurementWarning,
    Method,
    measure_kernels,
    measure_program,
    steady_from_start,
    read_dataset,
    run_suite,
)
from xla_costmodel.measure._module import ModuleIndex

ROOT = Path(__file__).resolve().parent.parent
_METHOD_COLUMNS = ("allocator", "repeats", "discard", "warmup_calls", "statistic")
_PAGES = (1 << 22) * 4 // 4096  # fresh 4 KiB pages of `big_program`'s 16 MiB output


def user_program():
    """What `--jax tests/test_measure_methodology.py:user_program` measures (and `measure_kernels()` below)."""

    def scaled_sum(x):
        return (x * 2.0 + 1.0).sum(axis=0)

    return scaled_sum, (jnp.ones((256, 128), jnp.float32),)


def big_program():
    """One kernel writing 16 MiB: 4096 fresh pages per run wherever its buffer is mapped afresh."""

    def affine(x):
        return x * 2.0 + 1.0

    return affine, (jnp.ones((1 << 22,), jnp.float32),)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def _structure(index: ModuleIndex) -> dict:
    """A compiled module's instructions (name -> where, opcode, shape, fusion kind), metadata aside."""
    return {k: (v.computation, v.opcode, v.shape, v.fusion_kind) for k, v in index.instructions.items()}


def test_measure_and_the_command_line_record_the_same_methodology(tmp_path):
    fn, args = user_program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        kernels = measure_kernels(fn, *args)
    assert {c: kernels.attrs[c] for c in _METHOD_COLUMNS} == DEFAULT_METHOD.fields()

    # The command line as a user runs it: a process of its own, which sets the allocator before jax starts.
    out = tmp_path / "cli.parquet"
    proc = subprocess.run([sys.executable, "-m", "xla_costmodel.cli", "measure", "--jax",
                           f"{__file__}:user_program", "--out", str(out)],
                          capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = read_dataset(out)
    # The same module, measured through both paths: the same kernels, with the same methodology fields.
    assert rows["hlo_module"].iloc[0] == kernels.attrs["hlo_module"]
    assert set(rows["hlo_op"]) == set(kernels["hlo_op"])
    assert rows[list(_METHOD_COLUMNS)].drop_duplicates().to_dict("records") == [DEFAULT_METHOD.fields()]
    assert (rows["n"] == DEFAULT_METHOD.kept).all() and (kernels["n"] == DEFAULT_METHOD.kept).all()

    # The suite's full mode uses the same method (its quick mode only runs fewer times).
    suite = run_suite(quick=True, only="launch_empty", progress=False, repeats=DEFAULT_METHOD.repeats,
                      discard=DEFAULT_METHOD.discard)
    assert suite[list(_METHOD_COLUMNS)].drop_duplicates().to_dict("records") == [DEFAULT_METHOD.fields()]


def test_large_buffers_pay_no_page_faults_by_default_and_do_when_cold():
    fn, (x,) = big_program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        cold = measure_program(fn, x, repeats=12, discard=2, allocator="cold")
        steady = measure_program(fn, x, repeats=12, discard=2)  # the default
    assert cold.method.allocator == "cold" and steady.method == Method(repeats=12, discard=2)
    # Unless pytest was started with the steady tunables, the default times CPU programs in the worker.
    assert steady.process == ("in-process" if steady_from_start() else "worker")
    cold_faults = cold.runs.loc[cold.runs["kept"], "page_faults"]
    steady_faults = steady.runs.loc[steady.runs["kept"], "page_faults"]
    assert (cold_faults >= _PAGES).all()
    assert np.median(steady_faults) < _PAGES / 16
    # ...and what the faults cost shows in the kernel's time.
    t_cold = cold.kernels["min_per_run_s"].max()
    t_steady = steady.kernels["min_per_run_s"].max()
    assert t_cold > 1.5 * t_steady


def test_cold_stays_cold_after_the_steady_worker_held_large_buffers():
    """The steady worker keeps the memory of what it ran (a 128 MiB program here, like the host's copy
    benchmark); a cold measurement after it must still map its buffers afresh, so it runs in a worker of its
    own (`measuring_worker("cold")`)."""
    big = jnp.ones((1 << 25,), jnp.float32)
    fn, (x,) = big_program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        measure_program(lambda v: v * 2.0 + 1.0, big, repeats=3, discard=1)
        cold = measure_program(fn, x, repeats=6, discard=1, allocator="cold")
    assert (cold.runs.loc[cold.runs["kept"], "page_faults"] >= _PAGES).all()


_STARTED_STEADY = """
import json, sys, warnings
from xla_costmodel.measure import measure_program, steady_from_start
from xla_costmodel.measure._target import load_program
fn, args = load_program(sys.argv[1])
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    m = measure_program(fn, *args, repeats=12, discard=2)
kept = m.runs[m.runs["kept"]]
print("RESULT " + json.dumps({"steady_from_start": steady_from_start(), "process": m.process, "hlo_text": m.hlo_text,
                              "method": m.method.fields(), "faults": kept["page_faults"].tolist()}))
"""


def test_a_process_started_steady_times_in_process_as_the_worker_does():
    """The two places a CPU program is timed are one methodology: the same method, the same compiled
    module, and no page faults on a 16 MiB output in either."""
    env = {**_env(), "GLIBC_TUNABLES": STEADY_TUNABLES}  # as the measuring worker starts
    proc = subprocess.run([sys.executable, "-c", _STARTED_STEADY, f"{__file__}:big_program"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    here = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])
    assert here["steady_from_start"] and here["process"] == "in-process"

    fn, args = big_program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        worker = measure_program(fn, *args, repeats=12, discard=2, in_process=False)
    assert worker.process == "worker"
    assert here["method"] == worker.method.fields() == Method(repeats=12, discard=2).fields()
    assert _structure(ModuleIndex(here["hlo_text"])) == _structure(worker.module)
    assert np.median(here["faults"]) < _PAGES / 16
    assert np.median(worker.runs.loc[worker.runs["kept"], "page_faults"]) < _PAGES / 16


def test_the_worker_runs_the_module_this_process_compiles():
    """What travels to the worker (pytrees, Python scalars, an unused argument, bf16 and f64) compiles
    to XLA's module for the same program here, kernel names included."""

    def mixed(params, x, scale, unused):
        h = (x.astype(jnp.bfloat16) @ params["w"]).astype(jnp.float32)
        return jnp.tanh(h * scale + params["b"]).sum(axis=0), x.astype(jnp.float64).max()

    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        params = {"w": jnp.asarray(rng.random((64, 32)), jnp.bfloat16), "b": jnp.asarray(rng.random(32), jnp.float32)}
        args = (params, jnp.asarray(rng.random((128, 64)), jnp.float32), 0.5, jnp.zeros(3))
        here = ModuleIndex(jax.jit(mixed).lower(*args).compile().as_text())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConcurrentKernelsWarning)
            m = measure_program(mixed, *args, repeats=4, discard=1, in_process=False)
    assert m.process == "worker" and m.module.name == here.name == "jit_mixed"
    assert _structure(m.module) == _structure(here)
    assert m.missing == () and set(m.kernels["hlo_op"]) <= set(here.instructions)


def test_a_program_calling_lapack_is_measured_in_a_fresh_worker():
    """`measure_kernels(fn, *args)` with its defaults on a program that calls jaxlib's LAPACK kernels (Cholesky, a
    triangular solve, an LU solve), in a worker that has never lowered a linear-algebra op itself: without
    `_lapack.prepare_lapack` the worker dies with SIGSEGV on the first run."""
    from xla_costmodel import measure_kernels
    from xla_costmodel.measure._isolated import measuring_worker

    def solve(a, b):
        spd = a @ a.T + 8.0 * jnp.eye(a.shape[0], dtype=a.dtype)
        c = jnp.linalg.cholesky(spd)
        return jax.scipy.linalg.solve_triangular(c, b, lower=True) + jnp.linalg.solve(spd, b)

    rng = np.random.default_rng(1)
    a, b = jnp.asarray(rng.random((32, 32)), jnp.float32), jnp.asarray(rng.random((32, 4)), jnp.float32)
    measuring_worker().close()  # the next measurement starts a new worker
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        kernels = measure_kernels(solve, a, b, repeats=4, discard=1)
    assert kernels.attrs["process"] == "worker"
    assert (kernels["opcode"] == "custom-call").any() and (kernels["min_per_run_s"] > 0).all()


def test_what_cannot_travel_is_measured_here_and_says_so():
    def noisy(x):
        y = jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return y + 1.0

    x = jnp.ones(16, jnp.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        with pytest.warns(InProcessMeasurementWarning, match="measured in this process, not in the measuring worker"):
            m = measure_program(noisy, x, repeats=3, discard=1, check="ignore")
        assert m.process == "in-process"
        with pytest.raises(ValueError, match="cannot be measured in the measuring worker"):
            measure_program(noisy, x, repeats=3, discard=1, in_process=False)


def test_method_rejects_bad_fields():
    with pytest.raises(ValueError, match="allocator"):
        Method(allocator="warm")
    with pytest.raises(ValueError, match="repeats > discard"):
        Method(repeats=3, discard=3)
    with pytest.raises(ValueError, match="allocator"):
        measure_kernels(lambda x: x + 1, jnp.ones(4), allocator="lukewarm")
