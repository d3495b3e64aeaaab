"""xla-costmodel: predict, explain and check the run time of XLA kernels.

Each subcommand is a function registered with `@command`; heavy imports happen
inside the handlers so `xla-costmodel --help` starts at once.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from .hlo import HloParseError, load_hlo

_COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int], str]] = {}


class UsageError(Exception):
    """A problem with what the user asked for: printed without a traceback, exit 2."""


def command(name: str, help: str, configure: Callable[[argparse.ArgumentParser], None] = lambda p: None):
    """Register a subcommand: decorate `run(args) -> int`; `configure(parser)` adds its options."""

    def register(run):
        _COMMANDS[name] = (configure, run, help)
        return run

    return register


def _load(path: str):
    try:
        return load_hlo(path)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, expected an HLO text file") from None


def resolve_device_and_model(args: argparse.Namespace):
    """The `DeviceSpec` and cost model named by `args.device` / `args.model`.

    **Returns:** `(device, model)`; raises `UsageError` for an unknown name or
    the xla-gpu model on a device that is not a GPU.
    """
    from .devices import device_names, get_device
    from .models import get_model, model_names

    try:
        device = get_device(args.device)
    except ValueError:
        raise UsageError(f"unknown device {args.device!r}; valid names: {', '.join(device_names())}") from None
    try:
        model = get_model(args.model)
    except ValueError:
        raise UsageError(f"unknown model {args.model!r}; valid names: {', '.join(model_names())}") from None
    if getattr(model, "name", "") in ("xla-gpu", "xla-gpu-tables") and getattr(device, "kind", "gpu") != "gpu":
        raise UsageError(f"the {model.name} model prices GPUs; device {device.name!r} is a {device.kind} "
                         f"(use --model roofline)")
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


# ---------------------------------------------------------------------------
def _stats_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text file")
    p.add_argument("--json", action="store_true", help="print JSON")


@command("stats", "counts of computations and instructions per opcode (and cost totals)", _stats_configure)
def _stats(args: argparse.Namespace) -> int:
    module = _load(args.file)
    stats = module_statistics(module)
    if args.json:
        print(json.dumps(stats, indent=1))
        return 0
    print(f"module {stats['module']}: {stats['computations']} computations, {stats['instructions']} instructions")
    for key in ("flops", "transcendentals", "bytes_accessed"):
        aware = stats.get(f"{key}_trip_count_aware", stats[key])
        extra = f"  (counting loop trips: {aware:,.0f})" if aware != stats[key] else ""
        print(f"  {key}: {stats[key]:,.0f}{extra}")
    if stats.get("unpriced"):
        print(f"  not priced: {stats['unpriced']}")
    width = max((len(k) for k in stats["opcodes"]), default=6)
    for opcode, n in stats["opcodes"].items():
        print(f"  {opcode:<{width}}  {n}")
    return 0



def module_statistics(module) -> dict:
    """Computation and per-opcode instruction counts, and XLA's cost totals (see `analysis.module_stats`)."""
    from .analysis import module_stats

    return module_stats(module)


# ---------------------------------------------------------------------------
def _demo_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--program", default=None, help="zoo program to run (default: the bundled default)")
    p.add_argument("--out", default="out", help="output folder (created; existing files are kept unless overwritten by name)")


@command("demo", "the main job end to end on a bundled program (what scripts/run runs)", _demo_configure)
def _demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    return run_demo(program=args.program, out=args.out)



# Subcommands with a parser of their own: the rest of the command line goes to them.
_PASSTHROUGH: dict[str, tuple[str, str]] = {
    "measure": ("xla_costmodel.measure._cli", "measure kernel times: the measurement suite, or --jax MODULE:FUNCTION"),
}


def _load_plugins_commands() -> None:
    """Subcommands contributed by the other subpackages (registered on import)."""
    import importlib

    for mod in ("xla_costmodel.models._cli", "xla_costmodel.fusion._cli", "xla_costmodel.compare._cli"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("xla_costmodel"):
                continue
            raise


def build_parser() -> argparse.ArgumentParser:
    _load_plugins_commands()
    parser = argparse.ArgumentParser(prog="xla-costmodel", description=__doc__.splitlines()[0].split(": ", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (configure, _run, help_text) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        configure(p)
    for name, (_module, help_text) in _PASSTHROUGH.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _PASSTHROUGH:
        import importlib

        module = importlib.import_module(_PASSTHROUGH[argv[0]][0])
        return int(module.cli_measure(argv[1:]) or 0)
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure, run, _help = _COMMANDS[args.command]
    try:
        return int(run(args) or 0)
    except HloParseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    # Run through the importable module, so that subcommands registered by the
    # subpackages (which import `xla_costmodel.cli`) land in the same table.
    from xla_costmodel.cli import main as _main

    sys.exit(_main())
