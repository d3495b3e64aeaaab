"""A user's program named as `MODULE:FUNCTION`: what `measure --jax`, `evaluate --jax` and a fleet task measure.

The function takes no arguments and returns `(fn, args)`: a function and a
tuple of example arguments. The module is importable by name, or a path to
a `.py` file. The command line and the fleet's worker processes (which get
only the text) load it the same way.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sysconfig
import traceback
from pathlib import Path
from typing import Any, Callable

__all__ = ["ProgramSpecError", "UserProgramError", "load_program", "lower_user_program", "user_frame"]


class ProgramSpecError(ValueError):
    """`MODULE:FUNCTION` does not name a function that returns `(fn, args)`; the message says which part fails."""


class UserProgramError(ValueError):
    """The user's program raised while jax traced, lowered or ran it: a fault of that program, not of this
    library (a shape mismatch, a Python error in the function).

    **Attributes:** `program` (the function's name), `stage` (`"tracing"`, `"lowering"` or `"running"`),
    `filename` and `lineno` (the deepest frame of the user's own code in the traceback, outside jax, the
    standard library, installed packages and this library; None when there is none), `error` (the exception
    raised). `str(error)` is one line: `FILE:LINE: PROGRAM raised TYPE while jax was STAGE it: MESSAGE`.
    """

    def __init__(self, program: str, stage: str, error: BaseException):
        frame = user_frame(error)
        self.program, self.stage, self.error = program, stage, error
        self.filename = frame.filename if frame is not None else None
        self.lineno = frame.lineno if frame is not None else None
        where = f"{self.filename}:{self.lineno}: " if frame is not None else ""
        first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
        super().__init__(f"{where}{program} raised {type(error).__name__} while jax was {stage} it"
                         + (f": {first}" if first else ""))


def _library_dirs() -> tuple[str, ...]:
    """Folders whose frames are not the user's: installed packages, the standard library, this package."""
    paths = sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    dirs.add(str(Path(__file__).resolve().parents[1]))  # xla_costmodel itself
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


def user_frame(error: BaseException) -> traceback.FrameSummary | None:
    """The deepest frame of `error`'s traceback in the user's own code (see `UserProgramError`), or None."""
    library = _library_dirs()
    found = None
    for frame in traceback.extract_tb(error.__traceback__):
        name = frame.filename
        if name.startswith("<") or os.path.realpath(name).startswith(library):
            continue
        found = frame
    return found


def lower_user_program(fn: Callable[..., Any], args: tuple, name: str | None = None):
    """Trace and lower the user's program `fn(*args)` (jitted here unless it is jitted already), so that a
    fault of the program is reported as the program's before anything else is done with it.

    **Returns:** the `jax.stages.Lowered`. **Raises:** `UserProgramError` naming the user's file, line and
    exception when jax's tracing or lowering of it raises.
    """
    import jax

    name = name or getattr(fn, "__name__", "program")
    jitted = fn if hasattr(fn, "trace") else jax.jit(fn)
    try:
        traced = jitted.trace(*args)
    except Exception as exc:  # noqa: BLE001 - whatever the user's function raises while traced
        raise UserProgramError(name, "tracing", exc) from exc
    try:
        return traced.lower()
    except Exception as exc:  # noqa: BLE001 - e.g. a sharding or an effect the program asks for
        raise UserProgramError(name, "lowering", exc) from exc


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
