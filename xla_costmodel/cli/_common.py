"""What every subcommand shares: the registry, `UsageError`, reading the input, printing tables."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Callable

__all__ = ["COMMANDS", "Command", "UsageError", "command", "format_seconds", "load_module", "print_table",
           "resolve_device_and_model"]


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
    """The HLO module in file `path`; `UsageError` when there is no such file."""
    from ..hlo import load_hlo

    try:
        return load_hlo(path)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected an HLO text file") from None


def resolve_device_and_model(args: argparse.Namespace):
    """The `DeviceSpec` and cost model named by `args.device` / `args.model` (`models._resolve`).

    **Returns:** `(device, model)`; raises `UsageError` for an unknown name or
    a model that does not price the device (the xla-gpu model on a CPU).
    """
    from ..devices import device_names
    from ..models import model_names
    from ..models._resolve import check_prices_device, resolve_device, resolve_model

    try:
        device = resolve_device(args.device)
    except ValueError:
        raise UsageError(f"unknown device {args.device!r}; valid names: {', '.join(device_names())}") from None
    try:
        model = resolve_model(args.model)
    except ValueError:
        raise UsageError(f"unknown model {args.model!r}; valid names: {', '.join(model_names())}") from None
    try:
        check_prices_device(model, device)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return device, model


def print_table(df, as_json: bool = False, as_csv: bool = False) -> None:
    """Print a DataFrame as a text table, JSON records or CSV."""
    if as_json:
        print(df.to_json(orient="records", indent=1))
    elif as_csv:
        print(df.to_csv(index=False), end="")
    else:
        import pandas as pd

        with pd.option_context("display.max_rows", 200, "display.max_columns", 30, "display.width", 200):
            print(df.to_string(index=False))


def format_seconds(seconds: float) -> str:
    """`seconds` in the largest unit that keeps it at 1 or more (s, ms, us, ns), 4 significant digits."""
    if seconds is None or not math.isfinite(seconds):
        return "nan"
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(seconds) >= factor:
            return f"{seconds / factor:.4g} {unit}"
    return f"{seconds * 1e9:.4g} ns"
