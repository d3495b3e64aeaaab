"""`xla-costmodel granularity FILE --kernel NAME`: one kernel under every candidate launch configuration or tiling."""

from __future__ import annotations

import argparse

from ..models import DEFAULT_DEVICE, DEFAULT_MODEL
from ._common import UsageError, command, format_seconds, load_module, print_table, resolve_device_and_model


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="HLO text file")
    p.add_argument("--kernel", required=True, help="the kernel's instruction name (as `analyze` lists it)")
    p.add_argument("--device", default=DEFAULT_DEVICE, help=f"GPU device name (default {DEFAULT_DEVICE})")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"cost model that prices launch configurations (default {DEFAULT_MODEL})")
    tiles = p.add_mutually_exclusive_group()
    tiles.add_argument("--tiled", action="store_true", help="tile the fusion as a Triton fusion would be")
    tiles.add_argument("--launch", action="store_true", help="vary launch dimensions even for a Triton fusion")
    p.add_argument("--json", action="store_true", help="print JSON records (every column)")


#: The library's spellings in its messages, and the command line's for the same thing.
_SPELLINGS = (("(tiled=True)", "(--tiled)"), ("tiled=True", "--tiled"), ("tiled=False", "--launch"),
              ("(use xla-gpu or xla-gpu-tables)", "(use --model xla-gpu or --model xla-gpu-tables)"))


def _cli_spelling(message: str) -> str:
    """A `GranularityError`'s message with the options a user of the command line types."""
    import re

    for python, cli in _SPELLINGS:
        message = message.replace(python, cli)
    return re.sub(r"^model '([^']+)'", r"--model \1", message)


@command("granularity", "one kernel under every candidate launch configuration or tiling, priced", _configure)
def _granularity(args: argparse.Namespace) -> int:
    from ..front import granularity
    from ..models import GranularityError

    device, model = resolve_device_and_model(args)
    if device.kind != "gpu":
        raise UsageError(f"granularity prices GPU launch configurations; device {device.name!r} is a {device.kind}")
    module = load_module(args.file)
    tiled = True if args.tiled else False if args.launch else None
    try:
        df = granularity(module, args.kernel, device=device, model=model, tiled=tiled)
    except GranularityError as exc:
        raise UsageError(_cli_spelling(str(exc))) from None
    if args.json:
        print_table(df, as_json=True)
        return 0
    from ..plot import readable

    shown = readable(df[["config", "blocks", "waves", "occupancy", "time_s", "bound", "xla_choice", "best"]], "us", 4)
    shown["occupancy"] = df["occupancy"].map(lambda v: f"{v:.0%}")
    print_table(shown)
    print("\n(time_us: µs per launch)")
    xla = df[df["xla_choice"]].iloc[0]
    best = df[df["best"]].iloc[0] if df["best"].any() else xla
    print(f"\n{df.attrs['kernel']} on {df.attrs['device']} ({df.attrs['model']}, {df.attrs['emitter']}): "
          f"XLA's choice {format_seconds(xla['time_s'])}, best {format_seconds(best['time_s'])} ({best['config']})")
    return 0
