"""xla-costmodel: predict, explain and check the run time of XLA kernels.

The command line. Every subcommand is a module of this package that
registers itself with `@command(name, help, configure)`: `configure(parser)`
adds its options, the decorated `run(args) -> int` runs it. Heavy imports
happen inside the handlers, so that `xla-costmodel --help` starts at once.

To add a subcommand, write `cli/_<name>.py` with a `@command` function and
add the module to `SUBCOMMANDS`; to add an option, add it to that module's
`configure`. Bad input raises `UsageError`: one line on stderr, exit status
2, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .._quiet_jax import cuda_plugin_installed, nvidia_driver_present, start_backends_quietly
from ._common import (COMMANDS, UsageError, command, count, load_module, one_line_warnings, print_table,
                      resolve_device_and_model, user_error)

__all__ = ["SUBCOMMANDS", "TRACEBACK_ENV", "UsageError", "build_parser", "command", "count", "load_module", "main",
           "print_table", "resolve_device_and_model"]

#: The modules of this package that define subcommands, in the order `--help` lists them.
SUBCOMMANDS = ("_stats", "_demo", "_analyze", "_granularity", "_fuse", "_compile", "_compare", "_measure", "_evaluate")

#: Set to 1 to see the traceback of an internal error (a defect of this program) instead of one line.
TRACEBACK_ENV = "XLA_COSTMODEL_TRACEBACK"


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad option reported on one line (exit 2) instead of the usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}")
    parser = _Parser(prog="xla-costmodel", description=__doc__.splitlines()[0].split(": ", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.description or cmd.help)
        cmd.configure(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `xla-costmodel ARGV` (default `sys.argv[1:]`); returns the exit status.

    0: done; 1: the work failed (a measurement, some of many files) or an
    internal error (one line; `XLA_COSTMODEL_TRACEBACK=1` shows the
    traceback); 2: bad input, one line on stderr (`UsageError` and the
    library's documented errors); 130: interrupted.
    """
    import os

    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if cuda_plugin_installed() and not nvidia_driver_present():
        # jax's CUDA plugin writes driver log lines to the terminal when a command first starts jax's
        # backends (measuring, tracing); started here with them captured, no command prints them
        start_backends_quietly()
    try:
        with one_line_warnings():
            return int(COMMANDS[args.command].run(args) or 0)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        message = user_error(exc)
        if message is not None:
            print(f"error: {message}", file=sys.stderr)
            return 2
        if os.environ.get(TRACEBACK_ENV):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"error: internal error in 'xla-costmodel {args.command}': {type(exc).__name__}"
              + (f": {first}" if first else "") + f" (a defect; set {TRACEBACK_ENV}=1 for the traceback)",
              file=sys.stderr)
        return 1
