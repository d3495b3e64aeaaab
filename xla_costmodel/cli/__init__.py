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

from ._common import COMMANDS, UsageError, command, load_module, print_table, resolve_device_and_model

__all__ = ["SUBCOMMANDS", "UsageError", "build_parser", "command", "load_module", "main", "print_table",
           "resolve_device_and_model"]

#: The modules of this package that define subcommands, in the order `--help` lists them.
SUBCOMMANDS = ("_stats", "_demo", "_analyze", "_granularity", "_fuse", "_compare", "_measure", "_evaluate")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}")
    parser = argparse.ArgumentParser(prog="xla-costmodel", description=__doc__.splitlines()[0].split(": ", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, cmd in COMMANDS.items():
        p = sub.add_parser(name, help=cmd.help, description=cmd.description or cmd.help)
        cmd.configure(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run `xla-costmodel ARGV` (default `sys.argv[1:]`); returns the exit status."""
    from ..hlo import HloParseError

    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(COMMANDS[args.command].run(args) or 0)
    except (HloParseError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
