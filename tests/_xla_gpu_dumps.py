"""XLA:GPU's module around one of its passes, from a deviceless compile for h100-sxm, for tests that hold a
simulated pass to XLA's own.

The compile runs in a child process: XLA reads `XLA_FLAGS` (the dump directory and the passes to dump) once,
when its backends start. The child loads the test file and compiles `PROGRAMS[name]` (a function and its
argument shapes) with `xla_costmodel.gpu_compile.compile_for_gpu`. The same tables give our side's input:
`lowered_program` (the module jax lowers the program to).

One child compiles every program of a test file's table for one set of dumped passes, each program's dumps
moved to a folder of its own before the next compile starts, and the texts are kept for the rest of the run:
starting the child (jax and its CUDA plugin) costs several times one small program's compile, and a test file
asks for the dumps of most of its programs, often in more than one test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import importlib.util, os, pathlib, sys, traceback
sys.path.insert(0, os.path.dirname(sys.argv[1]))  # the test file imports its sibling helpers
import jax
jax.config.update("jax_enable_x64", sys.argv[2] == "x64")
from xla_costmodel.gpu_compile import compile_for_gpu
spec = importlib.util.spec_from_file_location("programs", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
out = pathlib.Path(os.environ["XLA_COSTMODEL_TEST_DUMPS"])
for i, name in enumerate(mod.PROGRAMS):
    fn, shapes = mod.PROGRAMS[name]
    folder = out / str(i)
    folder.mkdir()
    (folder / "name").write_text(name)
    try:
        compile_for_gpu(fn, *[jax.ShapeDtypeStruct(tuple(s), d) for s, d in shapes], device="h100-sxm")
    except Exception:
        (folder / "error").write_text(traceback.format_exc())
    for p in out.glob("*.txt"):  # this program's dumps (XLA writes them while it compiles)
        p.rename(folder / p.name)
"""

# (test file, passes, x64) -> program name -> its dumps (file name -> text), or the error text of its compile
_DUMPS: dict[tuple, dict[str, "dict[str, str] | str"]] = {}


def xla_gpu_pass_dumps(test_file: str, name: str, pass_re: str, *, x64: bool = False) -> dict[str, str]:
    """The texts XLA dumps around the passes `pass_re` matches while compiling `PROGRAMS[name]` of
    `test_file`: file name -> module text (every dump of that compile; the caller picks by its pass and stage)."""
    key = (str(test_file), pass_re, x64)
    if key not in _DUMPS:
        _DUMPS[key] = _compile_all(*key)
    dumps = _DUMPS[key].get(name)
    assert dumps is not None, f"{name!r} is not a program of {test_file}'s PROGRAMS"
    assert not isinstance(dumps, str), dumps[-2000:]
    return dumps


def _compile_all(test_file: str, pass_re: str, x64: bool) -> dict[str, "dict[str, str] | str"]:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", JAX_SKIP_CUDA_CONSTRAINTS_CHECK="1",
                   XLA_COSTMODEL_TEST_DUMPS=tmp,
                   XLA_FLAGS=f"--xla_dump_to={tmp} --xla_dump_hlo_as_text --xla_dump_hlo_pass_re={pass_re}")
        proc = subprocess.run([sys.executable, "-c", _CHILD, test_file, "x64" if x64 else "x32"], env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = {}
        for folder in sorted((p for p in Path(tmp).iterdir() if p.is_dir()), key=lambda p: int(p.name)):
            error = folder / "error"
            out[(folder / "name").read_text()] = error.read_text() if error.is_file() else {
                p.name: p.read_text() for p in sorted(folder.glob("*.txt"))}
        return out


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
