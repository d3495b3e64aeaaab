"""What every subcommand shares: the registry, `UsageError`, reading the input, printing tables."""

from __future__ import annotations

import argparse
import contextlib
import math
from dataclasses import dataclass
from typing import Callable

from .._text import count

__all__ = ["COMMANDS", "Command", "UsageError", "check_device", "check_models", "command", "count", "format_seconds",
           "fusions_in", "json_records", "json_value", "load_module", "load_user_program", "print_kernels", "model_error", "one_line_warnings", "print_table", "report_warnings",
           "resolve_device_and_model", "say_note", "say_warning", "user_error"]


class UsageError(Exception):
    """A problem with what the user asked for: printed without a traceback, exit 2."""


@dataclass(frozen=True, slots=True)
class Command:
    """A subcommand: `configure(parser)` adds its options; `run(args) -> int` runs it."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str = ""


#: Registered subcommands by name, in registration order (`cli.SUBCOMMANDS` imports their modules).
COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, configure: Callable[[argparse.ArgumentParser], None] = lambda p: None, *,
            description: str = ""):
    """Register a subcommand: decorate `run(args) -> int`; `configure(parser)` adds its options;
    `description` (default `help`) heads its `--help`."""

    def register(run):
        if name in COMMANDS and COMMANDS[name].run is not run:
            raise ValueError(f"a subcommand named {name!r} is already registered")
        COMMANDS[name] = Command(name, help, configure, run, description)
        return run

    return register


def load_module(path: str):
    """The HLO module in file `path` (`-`: read from standard input); `UsageError` when there is no such file."""
    from ..hlo import HloParseError, load_hlo, parse_hlo

    if path == "-":
        import sys

        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HloParseError(f"not a text file ({exc.reason})", text="", pos=0, source="<stdin>") from None
        return parse_hlo(text, source="<stdin>")
    try:
        return load_hlo(path)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected an HLO text file") from None
    except PermissionError:
        raise UsageError(f"{path}: permission denied") from None


def load_user_program(spec: str, option: str = "--jax"):
    """The user's program named on the command line as `FILE.py:FACTORY` or `MODULE:FACTORY`, checked.

    The one place every subcommand loads a `--jax` program: it imports the
    module (`measure._target.load_program`), calls the factory (no
    arguments; it returns `(fn, args)`), then has jax trace and lower
    `fn(*args)`, so that a fault of the user's code is reported before any
    work, in the user's terms.

    **Arguments:** `spec`: the option's value; `option`: the option's name,
    for messages.

    **Returns:** `(fn, args, lowered)`: the function, its tuple of example
    arguments, and `jax.jit(fn).lower(*args)` (a `jax.stages.Lowered`; the
    caller may compile it or take its module).

    **Raises:** `UsageError` (exit 2, one line) when the spec names no
    loadable factory (`ProgramSpecError`), or when the factory or jax's
    tracing or lowering of the function raises (`UserProgramError`: the
    user's file, line and exception).
    """
    from .._quiet_jax import start_backends_quietly
    from ..measure import UserProgramError
    from .._user_program import lower_user_program
    from ..measure.programs import ProgramSpecError, load_program

    start_backends_quietly()  # before the program makes arrays: the CUDA plugin's log lines are not the user's
    try:
        fn, args = load_program(spec)
    except ProgramSpecError as exc:
        raise UsageError(f"{option} {_one_line(str(exc))}") from None
    try:
        lowered = lower_user_program(fn, args)
    except UserProgramError as exc:
        raise UsageError(f"{_one_line(str(exc))} (the program of {option} {spec})") from None
    return fn, args, lowered


def model_error(name: str, exc: Exception) -> str:
    """One line for a model name `get_model` refused: the unknown part and the names and combinations it knows.

    A combination's reader says where the name goes wrong over several lines
    (the name, a caret); the first line names the problem and the column.
    """
    from ..models import COMBINATIONS

    first = str(exc).splitlines()[0] if str(exc) else f"unknown model {name!r}"
    if "combinations:" in first:
        return first
    combos = ", ".join(f"{c}(...)" for c in COMBINATIONS)
    return f"{first}; combinations: {combos}"


def resolve_device_and_model(args: argparse.Namespace):
    """The `DeviceSpec` and cost model named by `args.device` / `args.model`, resolved and checked by the
    front door's one resolver (`front.resolve_device_and_model`).

    **Returns:** `(device, model)`; raises `UsageError` for an unknown name or
    a model that does not price the device (the xla-gpu model on a CPU).
    """
    from ..front import resolve_device_and_model as resolve
    from ..models import resolve_model

    try:
        model = resolve_model(args.model)
    except ValueError as exc:  # a combination's reader explains over several lines: one line here
        raise UsageError(model_error(args.model, exc)) from None
    try:
        return resolve(args.device, model)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def check_device(name: str | None) -> None:
    """`UsageError` for a device name the registry does not know (before any work)."""
    from ..devices import device_names
    from ..measure import resolve_device

    if name is None or name in device_names():  # a known name: checked without measuring this machine
        return
    try:
        resolve_device(name)
    except ValueError:
        raise UsageError(f"unknown device {name!r}; valid names: {', '.join(device_names())}") from None


def check_models(names) -> None:
    """`UsageError` for a model name the registry does not know (before any data is read)."""
    from ..models import get_model

    for name in names or ():
        try:
            get_model(name)
        except ValueError as exc:
            raise UsageError(model_error(name, exc)) from None


def user_error(exc: BaseException) -> str | None:
    """The one-line message of an error the user can fix (bad input, a missing calibration), else None.

    These are the library's documented errors: `HloParseError`,
    `CalibrationError` (and `DeviceMismatchError`), `DatasetError`,
    `ProgramSpecError`, `UserProgramError` (the user's program failed), `UsageError`. A subcommand may turn others into
    `UsageError` itself; anything else is a defect of this program.
    """
    import sys

    if isinstance(exc, UsageError):
        return str(exc)
    # Only the packages already imported can have raised: look there, import nothing new.
    hlo = sys.modules.get("xla_costmodel.hlo")
    if hlo is not None and isinstance(exc, hlo.HloParseError):
        return str(exc)
    store = sys.modules.get("xla_costmodel.datasets")
    if store is not None and isinstance(exc, store.CalibrationError):
        return _one_line(str(exc))
    dataset = sys.modules.get("xla_costmodel.measure._dataset")
    if dataset is not None and isinstance(exc, dataset.DatasetError):
        return _one_line(str(exc))
    program = sys.modules.get("xla_costmodel._user_program")
    if program is not None and isinstance(exc, program.UserProgramError):
        return _one_line(str(exc))
    target = sys.modules.get("xla_costmodel.measure._target")
    if target is not None and isinstance(exc, target.ProgramSpecError):
        return _one_line(str(exc))
    return None


#: The warning lines printed while the current subcommand runs (each is printed once).
_SAID: set[str] = set()


def say_warning(message) -> None:
    """Print `warning: MESSAGE` on stderr, on one line, unless that line was printed already."""
    import sys

    text = f"warning: {_one_line(str(message))}"
    if text not in _SAID:
        _SAID.add(text)
        print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def one_line_warnings():
    """While a subcommand runs: each warning as one `warning: MESSAGE` line on stderr (`say_warning`),
    deprecation warnings (about the libraries this program imports, e.g. jaxlib's on Python 3.12)
    not at all. Python's own format adds the file and the source line, which mean nothing to a
    user of the command."""
    import warnings

    _SAID.clear()
    with warnings.catch_warnings():
        warnings.showwarning = lambda message, *args, **kwargs: say_warning(message)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
        yield


def report_warnings(caught, unit: str = "") -> None:
    """Print warnings a subcommand recorded (`warnings.catch_warnings(record=True)`), with `say_warning`.

    With `unit` (e.g. "file"), the warnings of one category after the first
    are counted rather than printed: one line for the category, "(the same
    for N more files)", so that many files do not give many lines.
    """
    by_category: dict = {}
    for w in caught:
        if issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)):
            continue
        by_category.setdefault(w.category if unit else len(by_category), []).append(str(w.message))
    for messages in by_category.values():
        messages = list(dict.fromkeys(messages))
        more = f" (the same for {count(len(messages) - 1, 'more ' + unit)})" if len(messages) > 1 else ""
        say_warning(messages[0] + more)


def say_note(text: str) -> None:
    """Print `note: TEXT` on stderr: a word on what the user asked for, not a problem with the result."""
    import sys

    print(f"note: {text}", file=sys.stderr, flush=True)


def fusions_in(module) -> int:
    """How many fusion instructions `module` has: 0 for a module as lowered, before XLA's passes."""
    return sum(1 for _comp, instr in module.instructions() if instr.opcode == "fusion")


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def json_records(df) -> list[dict]:
    """A DataFrame's rows as JSON-ready dicts: every digit of a float kept (times of nanoseconds
    and below are not rounded away), NaN as null."""
    # (pandas' own `to_json` keeps a number of decimal places, not of significant digits.)
    return [{str(k): json_value(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def json_value(v):
    """`v` as JSON can hold it: numpy scalars as Python numbers, NaN and infinities as null."""
    import numpy as np

    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.ndarray):
        return [json_value(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if v is None or isinstance(v, (str, int, bool)):
        return v
    try:
        import pandas as pd

        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return str(v)


def print_table(df, as_json: bool = False, as_csv: bool = False) -> None:
    """Print a DataFrame as a text table, JSON records or CSV."""
    if as_json:
        import json

        print(json.dumps(json_records(df), indent=1))
    elif as_csv:
        print(df.to_csv(index=False), end="")
    else:
        import pandas as pd

        with pd.option_context("display.max_rows", 200, "display.max_columns", 30, "display.width", 200):
            print(df.to_string(index=False))


#: How many kernels a text table shows by default (the slowest; `--top N`, `--all` for every row).
DEFAULT_TOP = 20


def print_kernels(df, columns, top: int | None = DEFAULT_TOP, by: str = "total_s") -> str:
    """Print kernels as people read them and return the line that says what was left out ("" if nothing).

    The rows sorted by `by` (seconds per run; the slowest first, unpriced
    rows last), the first `top` of them (None or 0: all), the `columns` that
    exist, every time in microseconds with the unit in its name (`time_s` ->
    `time_us`), counts as integers and other numbers to 4 significant digits
    (`plot.readable`).
    """
    from ..plot import readable

    order = df.sort_values(by, ascending=False, na_position="last", kind="stable") if by in df else df
    shown = order if not top else order.head(top)
    table = readable(shown[[c for c in columns if c in shown.columns]], unit="us", digits=4)
    print_table(table.astype(object).where(table.notna(), ""))
    if len(shown) < len(order):
        return (f"the {len(shown)} slowest of {count(len(order), 'kernel')} shown (--top N for more, --all for "
                "every row)")
    return ""


def format_seconds(seconds: float) -> str:
    """`seconds` in the largest unit that keeps it at 1 or more (s, ms, us, ns), 4 significant digits."""
    if seconds is None or not math.isfinite(seconds):
        return "nan"
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(seconds) >= factor:
            return f"{seconds / factor:.4g} {unit}"
    return f"{seconds * 1e9:.4g} ns"
