"""XLA:GPU's module around one of its passes, from a deviceless compile for h100-sxm, for tests that hold a
simulated pass to XLA's own.

The compile runs in a child process: XLA reads `XLA_FLAGS` (the dump directory and the passes to dump) once,
when its backends start. The child loads the test file and compiles `PROGRAMS[name]` (a function and its
argument shapes) with `xla_costmodel.gpu_compile.compile_for_gpu`. The same tables give our side's input:
`lowered_program` (the module jax lowers the program to).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import importlib.util, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # the test file imports its sibling helpers
import jax
jax.config.update("jax_enable_x64", sys.argv[3] == "x64")
from xla_costmodel.gpu_compile import compile_for_gpu
spec = importlib.util.spec_from_file_location("programs", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn, shapes = mod.PROGRAMS[sys.argv[2]]
compile_for_gpu(fn, *[jax.ShapeDtypeStruct(tuple(s), d) for s, d in shapes], device="h100-sxm")
"""


def xla_gpu_pass_dumps(test_file: str, name: str, pass_re: str, *, x64: bool = False) -> dict[str, str]:
    """The texts XLA dumps around the passes `pass_re` matches while compiling `PROGRAMS[name]` of
    `test_file`: file name -> module text (every dump; the caller picks by its pass and stage)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", JAX_SKIP_CUDA_CONSTRAINTS_CHECK="1",
                   XLA_FLAGS=f"--xla_dump_to={tmp} --xla_dump_hlo_as_text --xla_dump_hlo_pass_re={pass_re}")
        proc = subprocess.run([sys.executable, "-c", _CHILD, test_file, name, "x64" if x64 else "x32"], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return {p.name: p.read_text() for p in sorted(Path(tmp).glob("*.txt"))}


def first_dump(dumps: dict[str, str], suffix_pattern: str, contains: str = "") -> str | None:
    """The first dump whose file name matches the glob `suffix_pattern` (and contains `contains`), or None."""
    import fnmatch

    names = [n for n in dumps if fnmatch.fnmatch(n, suffix_pattern) and contains in n]
    return dumps[names[0]] if names else None


def shape_specs(shapes) -> list:
    """`jax.ShapeDtypeStruct`s for a program table's argument shapes, `[(shape, dtype), ...]`."""
    import jax

    return [jax.ShapeDtypeStruct(tuple(shape), dtype) for shape, dtype in shapes]


def lowered_program(fn, shapes, *, inline: bool = True):
    """The module jax lowers `fn` to for `shapes` (unoptimized: what XLA:GPU's passes start from), with its
    calls inlined as XLA's first passes do unless `inline=False`."""
    from xla_costmodel.hlo import from_jax
    from xla_costmodel.hlo.editing import inline_calls

    module = from_jax(fn, *shape_specs(shapes), optimized=False)
    return inline_calls(module) if inline else module
