"""`xla-costmodel demo`: the main job end to end on a bundled program (`xla_costmodel._demo`)."""

from __future__ import annotations

import argparse

from ._common import command


def _demo_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--program", default=None, help="zoo program to run (default: the bundled default)")
    p.add_argument("--out", default="out", help="output folder (created; existing files are kept unless overwritten by name)")


@command("demo", "the main job end to end on a bundled program (what scripts/run runs)", _demo_configure)
def _demo(args: argparse.Namespace) -> int:
    from .._demo import run_demo

    return run_demo(program=args.program, out=args.out)
