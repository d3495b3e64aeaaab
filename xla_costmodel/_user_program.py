"""The user's own program failing while jax traces or lowers it: reported as the user's fault, in the user's
terms (their file, line and exception), never as a defect of this library.

Every place that traces a user's function (`from_jax`, and so `analyze` of a function; `measure`, `evaluate`, the
command line's `--jax`) goes through `lower_user_program`, which raises `UserProgramError`.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from pathlib import Path
from typing import Any, Callable

__all__ = ["UserProgramError", "lower_user_program", "user_frame"]


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
    dirs.add(str(Path(__file__).resolve().parent))  # xla_costmodel itself
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


def lower_user_program(fn: Callable[..., Any], args: tuple, name: str | None = None, **kwargs):
    """Trace and lower the user's program `fn(*args, **kwargs)` (jitted here unless it is jitted already), so
    that a fault of the program is reported as the program's before anything else is done with it.

    **Returns:** the `jax.stages.Lowered`. **Raises:** `UserProgramError` naming the user's file, line and
    exception when jax's tracing or lowering of it raises.
    """
    import jax

    name = name or getattr(fn, "__name__", "program")
    jitted = fn if hasattr(fn, "trace") else jax.jit(fn)
    try:
        traced = jitted.trace(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - whatever the user's function raises while traced
        raise UserProgramError(name, "tracing", exc) from exc
    try:
        return traced.lower()
    except Exception as exc:  # noqa: BLE001 - e.g. a sharding or an effect the program asks for
        raise UserProgramError(name, "lowering", exc) from exc
