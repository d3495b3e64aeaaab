"""The supplementary measurement kernels: each one traces, chains its instances, and has measured rows."""

from __future__ import annotations

import numpy as np
import pytest

from xla_costmodel.measure._extra_suite import EXTRA_SUITE, REPS, extra_cases, is_chain


def _smallest_cases():
    seen = {}
    for name, cls, size, build in extra_cases():
        if name not in seen or size < seen[name][2]:
            seen[name] = (name, cls, size, build)
    return sorted(seen.values())


@pytest.mark.parametrize("case", _smallest_cases(), ids=lambda c: c[0])
def test_case_lowers_to_a_chain_of_instances(case):
    import jax

    name, cls, size, build = case
    fn, args = build(size, np.random.default_rng(0))
    assert fn.__name__ == name
    if not is_chain(name):
        # A whole training program, none of the held-out zoo programs: a loss and its gradient.
        from xla_costmodel.zoo import program_names

        assert cls == "program" and name.removeprefix("p_") not in program_names()
        loss, grads = jax.eval_shape(fn, *args)
        assert loss.shape == () and jax.tree_util.tree_structure(grads) == jax.tree_util.tree_structure(args[0])
        return
    outs = jax.eval_shape(fn, *args)
    # One result per instance: the chain runs the kernel REPS times, each after the previous one.
    assert len(outs) == REPS
    text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
    assert text.count("opt-barrier") == REPS - 1


def test_every_case_has_measured_training_rows():
    from xla_costmodel.datasets._data import load_rows, programs_dataset

    path = programs_dataset("host")
    if not path.is_file():
        pytest.skip(f"{path} is not there")
    rows = load_rows(path)
    extra = rows[rows["source"] == "extra"]
    measured = set(extra["case"].str.split("/").str[0])
    missing = [n for n in EXTRA_SUITE() if n not in measured]
    assert not missing, (
        f"supplementary kernels without measurements: {missing}; measure them with "
        "scripts/measure_programs.py --no-programs --no-unfused --only-extra NAME"
    )
    assert set(extra["kernel_class"].str.removeprefix("extra-")) == {e[1] for e in extra_cases()}
