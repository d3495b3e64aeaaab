"""`xla-costmodel demo`: the main job end to end on a bundled program (`cli/_demo_job.py`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import UsageError, command


def _demo_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--program", default=None,
                   help="zoo program to run (default: the bundled default; see xla_costmodel.zoo.program_names())")
    p.add_argument("--out", default="out", help="output folder (created; existing files are kept unless overwritten by name)")


@command("demo", "the main job end to end on a bundled program (what scripts/run runs)", _demo_configure)
def _demo(args: argparse.Namespace) -> int:
    from ._demo_job import run_demo
    from ..zoo import program_names

    if args.program is not None and args.program not in program_names():
        raise UsageError(f"unknown program {args.program!r}; valid names: {', '.join(program_names())}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is a file; give a folder for the demo's outputs")
    return run_demo(program=args.program, out=args.out)
