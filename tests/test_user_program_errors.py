"""A user's program that fails while jax traces it is the user's error (issue 33, item 4).

`evaluate --jax` and `measure --jax` on a program with a shape mismatch printed a misleading warning
("jax.export cannot serialize it") and then `internal error ... (a defect)`, exit 1. Now: one line naming the
user's file, line and exception, exit 2; the library raises `UserProgramError` naming the same frame.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xla_costmodel.cli import main

BAD = """import jax.numpy as jnp


def step(x, w):
    y = x @ w
    return jnp.tanh(y).sum()


def build():
    return step, (jnp.ones((16, 32)), jnp.ones((16, 8)))


def broken_factory():
    shapes = {"x": (16, 32)}
    return step, (jnp.ones(shapes["w"]),)
"""


@pytest.fixture
def bad(tmp_path) -> Path:
    path = tmp_path / "bad_program.py"
    path.write_text(BAD)
    return path


@pytest.mark.parametrize("command", ["evaluate", "measure"])
def test_a_shape_mismatch_is_one_line_naming_the_users_line_and_exit_2(command, bad, capsys):
    assert main([command, "--jax", f"{bad}:build", "--no-progress"][: 3 if command == "evaluate" else 4]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err  # no warning first
    assert lines[0].startswith(f"error: {bad}:5: step raised TypeError while jax was tracing it: dot_general"), err
    assert "internal error" not in err and "jax.export" not in err


def test_a_factory_that_raises_names_its_line(bad, capsys):
    assert main(["measure", "--jax", f"{bad}:broken_factory"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"broken_factory() raised KeyError at {bad}:15: 'w'" in err, err


def test_the_library_raises_user_program_error_naming_the_frame(bad):
    import importlib.util

    import xla_costmodel as xc
    from xla_costmodel.measure import UserProgramError

    spec = importlib.util.spec_from_file_location("bad_program", bad)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn, args = module.build()
    for call in (xc.measure_kernels, xc.evaluate):
        with pytest.raises(UserProgramError) as info:
            call(fn, *args)
        e = info.value
        assert (Path(e.filename), e.lineno, e.stage, e.program) == (bad, 5, "tracing", "step")
        assert isinstance(e.error, TypeError) and isinstance(e, ValueError)


def test_load_user_program_returns_the_lowered_program(tmp_path):
    from xla_costmodel.cli._common import load_user_program

    good = tmp_path / "good.py"
    good.write_text(BAD.replace("jnp.ones((16, 8))", "jnp.ones((32, 8))"))
    fn, args, lowered = load_user_program(f"{good}:build")
    assert fn.__name__ == "step" and len(args) == 2
    assert "dot_general" in lowered.as_text()


def test_analyze_and_from_jax_raise_it_too(bad):
    import importlib.util

    import xla_costmodel as xc
    from xla_costmodel.measure import UserProgramError

    spec = importlib.util.spec_from_file_location("bad_program_2", bad)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn, args = module.build()
    for call in (lambda: xc.from_jax(fn, *args), lambda: xc.analyze(fn, *args, device="h100-sxm")):
        with pytest.raises(UserProgramError, match=rf"^{bad}:5: step raised TypeError while jax was tracing it"):
            call()
