"""`evaluate` counts the trips of loops whose count depends on the data from what ran (issue
"Kernel prices that an H100 confirms", item 6); `analyze` alone keeps its lower bound and note.

Measured on this CPU with jax.profiler: the trip counts are checked against the loops' own
arithmetic, computed here in numpy.
"""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import xla_costmodel as xc
from xla_costmodel.front._evaluate import measured_trip_counts
from xla_costmodel.measure import ConcurrentKernelsWarning


def _grow(v):
    return jnp.sin(v) + v * 1.7 + 0.1


def _data_dependent(x):
    return jax.lax.while_loop(lambda v: v.sum() < 1e6, _grow, x)


def _expected_trips(x) -> int:
    v, n = np.asarray(x, np.float64), 0
    while v.sum() < 1e6:
        v, n = np.sin(v) + v * 1.7 + 0.1, n + 1
    return n


def _nested(x, k):
    """An outer loop of data-dependent length around an inner fori_loop whose bound is an argument."""
    def outer(v):
        return jax.lax.fori_loop(0, k, lambda i, w: jnp.sin(w) * 0.01 + w * 1.01 + 0.1, v) * 1.3

    return jax.lax.while_loop(lambda v: v.mean() < 50.0, outer, x)


def _evaluate(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        return xc.evaluate(fn, *args, models=("roofline",), repeats=6, discard=2)


@pytest.fixture(scope="module")
def single():
    x = jnp.ones((64, 64))
    return _evaluate(_data_dependent, x), x


def test_evaluate_prices_the_measured_trips_and_says_so(single):
    ev, x = single
    n = _expected_trips(x)
    assert n > 3
    (loop, counted), = ev.trip_counts.items()
    assert counted == n
    assert any(f"trip count of '{loop}' depends on the data: {n} trips" in note for note in ev.notes)
    table = ev.tables["roofline"]
    assert not table.total_is_lower_bound and table.unknown_loops == ()
    body = pd.DataFrame(table)
    body = body[body["executions"] == n]
    assert len(body) and (body["bound"] != "free").any()
    # The body's kernels are predicted for as many launches as were measured.
    measured = ev.kernels.set_index("kernel")["launches"]
    assert (measured.loc[body.loc[body["bound"] != "free", "kernel"]] == n).all()


def test_analyze_alone_keeps_the_lower_bound_its_note_and_the_hint(single):
    ev, x = single
    (loop, n), = ev.trip_counts.items()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = xc.analyze(_data_dependent, x, device="host", model="roofline")
        hinted = xc.analyze(_data_dependent, x, device="host", model="roofline", trip_counts={loop: n})
    assert alone.total_is_lower_bound and alone.unknown_loops == (loop,)
    assert alone["note"].str.contains(f"trip count of '{loop}' unknown: assumed 1", regex=False).any()
    assert not hinted.total_is_lower_bound
    assert hinted.total_time_s == pytest.approx(ev.tables["roofline"].total_time_s)
    assert hinted.total_time_s > 3 * alone.total_time_s


def test_nested_loops_counted_with_and_without_the_loops_own_rows():
    x, k = jnp.ones((32, 32)), jnp.int32(4)
    ev = _evaluate(_nested, x, k)
    module = xc.parse_hlo(ev.measurement.hlo_text)
    loops = {i.name: i for _, i in module.instructions() if i.opcode == "while"}
    assert len(loops) == 2 and set(ev.trip_counts) == set(loops)
    inner = next(n for n, i in loops.items() if i.computation is not module.entry)
    outer = next(n for n in loops if n != inner)
    assert ev.trip_counts[inner] == 4
    v, trips = np.ones((32, 32)), 0
    while v.mean() < 50.0:
        for _ in range(4):
            v = np.sin(v) * 0.01 + v * 1.01 + 0.1
        v, trips = v * 1.3, trips + 1
    assert ev.trip_counts[outer] == trips > 1
    # On a GPU the loops have no rows of their own (the host drives them): counted from the outside in.
    gpu_like = dataclasses.replace(ev.measurement, control_flow=ev.measurement.control_flow.iloc[:0])
    assert measured_trip_counts(module, gpu_like) == ev.trip_counts


def test_known_counts_are_not_replaced():
    x = jnp.ones((16, 16))

    def f(x):
        return jax.lax.fori_loop(0, 7, lambda i, v: jnp.sin(v), x)

    ev = _evaluate(f, x)
    assert ev.trip_counts == {} and not any("depends on the data" in note for note in ev.notes)
    assert not ev.tables["roofline"].total_is_lower_bound
