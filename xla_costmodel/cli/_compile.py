"""`xla-costmodel compile --jax FILE:FACTORY --device D -o OUT.hlo [--dump-passes DIR]`: XLA:GPU's own module
of a program, compiled on this machine for a GPU it does not have."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._atomic import write_atomically
from ..models import DEFAULT_DEVICE
from ._common import UsageError, command, fusions_in
from ._measure import load_target


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jax", required=True, metavar="FILE:FACTORY",
                   help="the program: FACTORY (in an importable module, or a path/to/file.py) takes no arguments "
                        "and returns (fn, args), as for `measure --jax`; args may be arrays or "
                        "jax.ShapeDtypeStruct")
    p.add_argument("--device", default=DEFAULT_DEVICE,
                   help=f"the GPU preset to compile for (default {DEFAULT_DEVICE}; see "
                        "`xla_costmodel.devices.device_names()`)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.hlo", help="where to write XLA:GPU's module")
    p.add_argument("--dump-passes", metavar="DIR", default=None,
                   help="also write XLA's module around each fusion pass, priority fusion's decisions and the "
                        "kernels' launch dimensions (thunk sequence) into DIR")


@command("compile", "compile a jax program with XLA:GPU for a GPU preset, without a GPU, and write its module",
         _configure)
def _compile(args: argparse.Namespace) -> int:
    from ..devices import device_names, get_device
    from ..gpu_compile import GpuCompileError, GpuCompileUnavailable, compile_for_gpu

    try:
        device = get_device(args.device)
    except ValueError:
        raise UsageError(f"unknown device {args.device!r}; valid names: {', '.join(device_names())}") from None
    if device.kind != "gpu":
        gpus = [n for n in device_names() if n != "host" and get_device(n).kind == "gpu"]
        raise UsageError(f"--device {args.device}: a {device.kind}; compile is for a GPU preset: {', '.join(gpus)}")
    out = Path(args.output)
    if out.is_dir():
        raise UsageError(f"{out}: is a directory; give a file name for the compiled module")
    if not out.resolve().parent.is_dir():
        raise UsageError(f"{out.parent}: no such directory for the compiled module")
    if args.dump_passes is not None and Path(args.dump_passes).exists() and not Path(args.dump_passes).is_dir():
        raise UsageError(f"--dump-passes {args.dump_passes}: is a file, expected a directory")
    fn, fargs = load_target(args.jax)
    try:
        result = compile_for_gpu(fn, *fargs, device=device, dump_passes=args.dump_passes)
    except GpuCompileUnavailable as exc:
        raise UsageError(str(exc)) from None
    except GpuCompileError as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    write_atomically(out, result.text)
    dumped = (f"; {len(result.dump_files)} dump files in {result.dump_dir}" if result.dump_dir is not None else "")
    print(f"wrote {out}: XLA:GPU's module of {args.jax} for {device.name}, {fusions_in(result.module)} fusions "
          f"(compiled in {result.compile_s:.2f} s by jax {result.jax_version}{dumped})")
    return 0
