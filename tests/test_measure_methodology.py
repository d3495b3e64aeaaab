"""One timing methodology: `measure()`, `xla-costmodel measure --jax` and the suite time kernels alike.

The page-fault counts come from the kernel (`getrusage`), not from anything
this project computes.
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from xla_costmodel.measure import (
    DEFAULT_METHOD,
    ConcurrentKernelsWarning,
    Method,
    measure,
    measure_program,
    read_dataset,
    run_suite,
)
from xla_costmodel.cli import main as cli_main
from xla_costmodel.measure._allocator import current_allocator

_METHOD_COLUMNS = ("allocator", "repeats", "discard", "warmup_calls", "statistic")


def user_program():
    """What `--jax tests/test_measure_methodology.py:user_program` measures (and `measure()` below)."""

    def scaled_sum(x):
        return (x * 2.0 + 1.0).sum(axis=0)

    return scaled_sum, (jnp.ones((256, 128), jnp.float32),)


def test_measure_and_the_command_line_record_the_same_methodology(tmp_path):
    fn, args = user_program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        kernels = measure(fn, *args)
    assert {c: kernels.attrs[c] for c in _METHOD_COLUMNS} == DEFAULT_METHOD.fields()
    assert DEFAULT_METHOD.allocator == "steady" and current_allocator() == "steady"

    out = tmp_path / "cli.parquet"
    assert cli_main(["measure", "--jax", f"{__file__}:user_program", "--out", str(out)]) == 0
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
    n = 1 << 22  # 16 MiB of f32 out: 4096 fresh 4 KiB pages when mapped afresh
    x = jnp.ones((n,), jnp.float32)

    def affine(x):
        return x * 2.0 + 1.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        cold = measure_program(affine, x, repeats=12, discard=2, allocator="cold")
        steady = measure_program(affine, x, repeats=12, discard=2)  # the default
    assert cold.method.allocator == "cold" and steady.method == Method(repeats=12, discard=2)
    pages = n * 4 // 4096
    cold_faults = cold.runs.loc[cold.runs["kept"], "page_faults"]
    steady_faults = steady.runs.loc[steady.runs["kept"], "page_faults"]
    assert (cold_faults >= pages).all()
    assert np.median(steady_faults) < pages / 16
    # ...and what the faults cost shows in the kernel's time.
    t_cold = cold.kernels["min_per_run_s"].max()
    t_steady = steady.kernels["min_per_run_s"].max()
    assert t_cold > 1.5 * t_steady


def test_method_rejects_bad_fields():
    with pytest.raises(ValueError, match="allocator"):
        Method(allocator="warm")
    with pytest.raises(ValueError, match="repeats > discard"):
        Method(repeats=3, discard=3)
    with pytest.raises(ValueError, match="allocator"):
        measure(lambda x: x + 1, jnp.ones(4), allocator="lukewarm")
