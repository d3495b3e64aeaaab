"""A user's program named as `MODULE:FUNCTION`: what `measure --jax`, `evaluate --jax` and a fleet task measure.

The function takes no arguments and returns `(fn, args)`: a function and a
tuple of example arguments. The module is importable by name, or a path to
a `.py` file. The command line and the fleet's worker processes (which get
only the text) load it the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any, Callable

# One home for the user's program's own faults, below every layer that traces a user's function.
from .._user_program import UserProgramError, lower_user_program, user_frame

__all__ = ["ProgramSpecError", "UserProgramError", "load_program", "lower_user_program", "user_frame"]


class ProgramSpecError(ValueError):
    """`MODULE:FUNCTION` does not name a function that returns `(fn, args)`; the message says which part fails."""


def load_program(spec: str) -> tuple[Callable[..., Any], tuple]:
    """`(fn, args)` from `spec` = `MODULE:FUNCTION` (FUNCTION may be dotted: `module:Class.build`).

    **Raises:** `ProgramSpecError` (a `ValueError`) naming `spec` and the
    problem: no colon, no such file, a module that does not import (or
    raises while loading), no such attribute, not callable, a function that
    raises, or a return value that is not `(fn, args)`.
    """
    if ":" not in spec:
        raise ProgramSpecError(f"expects MODULE:FUNCTION, got {spec!r}")
    mod_name, _, func_name = spec.rpartition(":")
    try:
        if mod_name.endswith(".py") or "/" in mod_name:
            path = Path(mod_name)
            if not path.is_file():
                raise ProgramSpecError(f"{spec}: no such file {path}")
            file_spec = importlib.util.spec_from_file_location(path.stem, path)
            if file_spec is None:  # not a .py file Python can load
                raise ProgramSpecError(f"{spec}: {path} is not a Python file")
            module = importlib.util.module_from_spec(file_spec)
            file_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except ProgramSpecError:
        raise
    except ImportError as e:
        raise ProgramSpecError(f"{spec}: cannot import {mod_name!r} ({e})") from e
    except Exception as e:  # not Python source (a binary file), or the module's own code failed
        raise ProgramSpecError(f"{spec}: loading {mod_name!r} raised {type(e).__name__}: {e}") from e
    target = module
    for part in func_name.split("."):
        if not hasattr(target, part):
            raise ProgramSpecError(f"{spec}: {mod_name!r} has no attribute {func_name!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ProgramSpecError(f"{spec}: {func_name!r} is not callable")
    factory = (f"; FUNCTION is a factory called with no arguments that returns (fn, args), e.g. "
               f"`def build(): return {func_name.rpartition('.')[2]}, (x, w)` with example arguments x, w")
    try:
        built = target()
    except TypeError as e:  # most often the program itself, given where its factory was expected
        raise ProgramSpecError(f"{spec}: {func_name}() raised TypeError: {e}{factory}") from e
    except Exception as e:  # the user's builder failed: say so, with its error and where
        frame = user_frame(e)
        where = f" at {frame.filename}:{frame.lineno}" if frame is not None else ""
        raise ProgramSpecError(f"{spec}: {func_name}() raised {type(e).__name__}{where}: {e}") from e
    if not (isinstance(built, tuple) and len(built) == 2 and callable(built[0]) and isinstance(built[1], (tuple, list))):
        raise ProgramSpecError(
            f"{spec}: {func_name}() must return (fn, args): a function and a tuple of example "
            f"arguments, got {type(built).__name__}{factory}"
        )
    return built[0], tuple(built[1])
