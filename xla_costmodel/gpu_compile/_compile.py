"""`compile_for_gpu`: XLA:GPU's own compile of a function, on a machine without a GPU.

jax's CUDA PJRT plugin makes compile-only devices from a GPU target
description (`devices.gpu_target_config`): `jax.experimental.topologies.
get_topology_desc(name, "cuda", target_config=TEXT)`. A function lowered with
arguments placed on such a device (`jax.ShapeDtypeStruct(..., sharding=
SingleDeviceSharding(device))`) and compiled gives the module XLA:GPU would
run on that GPU: its fusions, Triton tiles, cuBLAS/cuDNN calls and loops with
their known trip counts. What XLA cannot do without a GPU is autotune: GEMMs
keep their default configurations.

XLA:GPU assembles each kernel's PTX into machine code with NVIDIA's `ptxas`,
one process per kernel, on its compile threads. On a (loaded) 2-core machine
that was most of a compile: penzai_llamalike_grad@large's 88 `ptxas` runs took
6.5 s summed over XLA's two threads, of a 6.6 s backend, and 1.3 of the
compile's 3.2 CPU seconds. A compile-only executable never runs and nothing
reads its machine code, so `compile_for_gpu` hands XLA a stand-in `ptxas`
(`_assembler_stub`: it reports the plugin's CUDA version and writes an empty
binary) through `xla_gpu_cuda_data_dir`, and LLVM optimizes the PTX at -O0 (20%
less CPU again); the optimized module and the kernels
with their launch dimensions are the same, byte for byte (tests and
`scripts/bench_gpu_compile.py --check-stub`). Inside `xla_ptxas()`, where the
stand-in cannot run or a compile with it fails, or where the user chose a CUDA
directory in `XLA_FLAGS`, XLA's own `ptxas` and settings are used. libdevice, which LLVM links into kernels calling math
functions, is still XLA's to find (`_assembler_stub`).

Host callbacks (`jax.pure_callback`, `jax.debug.callback`: equinox's runtime
error checks in diffrax, lineax, optimistix) compile too: jax lowers them to
XLA's `xla_ffi_python_gpu_callback` custom call, as on the GPU, once its
lowering accepts the compile-only client as the CUDA backend
(`_lowering_for_compile_only`), and the Python callables, which only a
running executable would call, are not handed to the compile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import atexit
import contextvars
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from .._quiet_jax import (SKIP_CUDA_CHECK_ENV, backends_started, cuda_plugin_installed, prepare_jax,
                          quiet_stderr, start_backends_quietly)
from .._user_program import UserProgramError

if TYPE_CHECKING:
    from ..devices import DeviceSpec
    from ..hlo import HloModule

__all__ = ["DUMP_PASS_RE", "GPU_COMPILE_EXTRA", "GpuCompileError", "GpuCompileResult", "GpuCompileUnavailable",
           "compile_for_gpu", "gpu_compile_available", "gpu_compile_unavailable_reason", "lower_for_gpu",
           "xla_ptxas"]

#: The extra that installs what compiling for a GPU needs: `pip install 'xla_costmodel[gpu-compile]'`.
GPU_COMPILE_EXTRA = "gpu-compile"
#: The passes around which `dump_passes` writes the module: every pass with "fusion" in its name
#: (sort-iota-fusion, priority-fusion, multi_output_fusion, horizontal fusions, gemm-fusion, ...).
DUMP_PASS_RE = ".*fusion.*"
#: The files of XLA's dump that `dump_passes` keeps: the module around each fusion pass, priority
#: fusion's decisions, the kernels (thunks) with their launch dimensions, the target, and the module
#: before and after XLA's passes. LLVM IR, PTX and buffer assignments are left out (large, and not
#: about which kernels XLA builds).
_KEPT_DUMP = re.compile(r"(\.\d{4}\.[^/]*\.after_.*\.txt|\.priority_fusion_dump\.txt|\.thunk_sequence\.txt|"
                        r"\.gpu_target_config\.pbtxt|\.before_optimizations\.txt|_gpu_after_optimizations\.txt)$")


class GpuCompileUnavailable(RuntimeError):
    """XLA:GPU cannot compile in this process: jax's CUDA plugin is not installed (install the extra,
    `pip install 'xla_costmodel[gpu-compile]'`), or jax started its backends before the plugin's CUDA
    check could be skipped. The message says which and what to do."""


class GpuCompileError(RuntimeError):
    """XLA:GPU itself failed to compile the function (or refused the target). `xla_error` holds XLA's
    message, the first line of which ends this exception's message."""

    def __init__(self, message: str, xla_error: str = ""):
        super().__init__(message)
        self.xla_error = xla_error


@dataclasses.dataclass(frozen=True)
class GpuCompileResult:
    """What `compile_for_gpu` returns.

    - `module`: XLA:GPU's optimized module, parsed (`HloModule`).
    - `text`: the same as HLO text (`Compiled.as_text()`).
    - `device`: the preset (or `DeviceSpec` name) compiled for.
    - `jax_version`, `jaxlib_version`: what compiled it (the plugin has jaxlib's version).
    - `compile_s`: seconds spent lowering and compiling (not parsing); `xla_compile_s`: those in XLA:GPU's
      compile alone (`Lowered.compile`: its passes and code generation, jax's tracing and lowering left out).
    - `dump_dir`: where `dump_passes` wrote, or None; `dump_files`: the files written there (names).
    - `xla_log`: what XLA wrote to stderr while compiling (its warnings, e.g. about sorts), captured.
    """

    module: "HloModule"
    text: str
    device: str
    jax_version: str
    jaxlib_version: str
    compile_s: float
    dump_dir: Path | None = None
    dump_files: tuple[str, ...] = ()
    xla_log: str = ""
    xla_compile_s: float = float("nan")

    @property
    def compiled_by(self) -> str:
        """`"XLA:GPU compiled here (jax X.Y.Z)"`: what `KernelTable.priced_module` says of this module."""
        return f"XLA:GPU compiled here (jax {self.jax_version})"


def gpu_compile_unavailable_reason() -> str | None:
    """Why XLA:GPU cannot compile in this process (one sentence naming the fix), or None when it can.

    Cheap after the first call: nothing is compiled, only jax's CUDA plugin looked for (and, where it is
    installed, jax's backends started, quietly).
    """
    if not cuda_plugin_installed():
        return (f"jax's CUDA plugin is not installed; `pip install 'xla_costmodel[{GPU_COMPILE_EXTRA}]'` "
                f"lets XLA:GPU itself compile for GPUs on this machine")
    try:
        _cuda_topology_api()
    except GpuCompileUnavailable as exc:
        return str(exc)
    return None


def gpu_compile_available() -> bool:
    """Whether `compile_for_gpu` can compile here (`gpu_compile_unavailable_reason() is None`)."""
    return gpu_compile_unavailable_reason() is None


@functools.lru_cache(maxsize=1)
def _cuda_topology_api():
    """jax's topology module, once jax registered the CUDA plugin; `GpuCompileUnavailable` otherwise."""
    started_before = backends_started()
    prepare_jax()
    start_backends_quietly()
    from jax._src import xla_bridge

    if "cuda" not in getattr(xla_bridge, "_backend_factories", {}):
        if started_before and not os.environ.get(SKIP_CUDA_CHECK_ENV):
            raise GpuCompileUnavailable(
                "jax's CUDA plugin did not register: jax started its backends before xla_costmodel was "
                f"imported, and the plugin's CUDA check failed; set {SKIP_CUDA_CHECK_ENV}=1 in the environment "
                "(or import xla_costmodel before using jax)")
        raise GpuCompileUnavailable("jax's CUDA plugin is installed but did not register with jax "
                                    "(its version must equal jaxlib's)")
    from jax.experimental import topologies

    return topologies


@functools.lru_cache(maxsize=32)
def _compile_device(target: str, name: str):
    """The compile-only device of one target description (cached: one topology per device)."""
    topologies = _cuda_topology_api()
    with quiet_stderr() as log:
        try:
            topology = topologies.get_topology_desc(name, "cuda", target_config=target, topology="1x1x1")
        except Exception as exc:  # XLA's own refusal: JaxRuntimeError, NotImplementedError, ...
            error = exc
        else:
            error = None
    if error is not None:
        detail = _xla_message(log.text) or str(error)
        raise GpuCompileError(f"XLA:GPU refused the target of '{name}': {_first_line(detail)}",
                              xla_error=f"{error}\n{log.text}".strip()) from error
    return topology.devices[0]


def compile_for_gpu(fn, *args, device: "str | DeviceSpec" = "h100-sxm", dump_passes: "str | os.PathLike | None" = None,
                    **kwargs) -> GpuCompileResult:
    """XLA:GPU's optimized module of `fn(*args, **kwargs)` for `device`, compiled on this machine.

    **Arguments:**

    - `fn`: a function, or a `jax.jit`-ed one (bind static arguments with
      `functools.partial`).
    - `*args`, `**kwargs`: its example arguments: arrays, `jax.ShapeDtypeStruct`s
      or Python scalars, in any pytree. Only their shapes and dtypes are used;
      nothing of their size is allocated.
    - `device`: a GPU preset name (`"h100-sxm"`, `"a100-80gb"`, ...) or a GPU
      `DeviceSpec` with a compute capability.
    - `dump_passes`: a directory; XLA's module around each fusion pass
      (`*.after_<pass>.before_<next>.txt`), priority fusion's decisions
      (`*.priority_fusion_dump.txt`), the kernels with their launch
      dimensions (`*.thunk_sequence.txt`), the target and the module before
      and after optimization are written there. Existing files are not
      overwritten.

    **Returns:** a `GpuCompileResult`.

    **Raises:** `GpuCompileUnavailable` (jax's CUDA plugin missing or not
    registered: the message names the fix), `GpuCompileError` (XLA:GPU
    failed; the message ends with XLA's error), `ValueError` for a device
    that is not a GPU or an argument sharded over several devices,
    `TypeError` for an argument that is not array-like; `UserProgramError`
    (a `ValueError`: the user's file, line and exception) when the function
    itself raises while jax traces it.
    """
    from ..devices import get_device, gpu_target_config
    from ..hlo import parse_hlo

    spec = get_device(device)
    target = gpu_target_config(spec)
    reason = gpu_compile_unavailable_reason()
    if reason is not None:
        raise GpuCompileUnavailable(reason)
    import jax
    import jaxlib

    start = time.perf_counter()
    dev = _compile_device(target, spec.name)
    placed_args, placed_kwargs = _placed(args, dev), _placed(kwargs, dev)
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    scratch = Path(tempfile.mkdtemp(prefix="xla_costmodel_dump_")) if dump_passes is not None else None
    options: dict[str, Any] = {}
    if scratch is not None:
        options = {"xla_dump_to": str(scratch), "xla_dump_hlo_as_text": True,
                   "xla_dump_hlo_pass_re": DUMP_PASS_RE}
    try:
        stage = ["lower"]
        xla_seconds = [float("nan")]

        def lower_and_compile():
            with _lowering_for_compile_only():
                lowered = jitted.lower(*placed_args, **placed_kwargs)
            stage[0] = "compile"
            _drop_host_callbacks(lowered)
            t = time.perf_counter()
            stub = _assembler_stub()
            try:
                compiled = lowered.compile(compiler_options={**stub, **options} or None)
            except Exception:  # noqa: BLE001 - maybe the stand-in's failure: XLA's own settings decide
                if not stub:
                    raise
                t = time.perf_counter()
                compiled = lowered.compile(compiler_options=options or None)  # XLA's failure, if it fails too
                _assembler_stub_failed()
            xla_seconds[0] = time.perf_counter() - t
            return compiled.as_text()

        text, error, log = _run_quietly(lower_and_compile)
        if error is not None:
            _raise_failure(error, stage[0], fn, spec, log, f"XLA:GPU failed to {stage[0]}")
        seconds = time.perf_counter() - start
        files: tuple[str, ...] = ()
        out_dir = None
        if scratch is not None:
            out_dir = Path(dump_passes)
            files = _keep_dump(scratch, out_dir)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    name = getattr(fn, "__name__", "fn")
    module = parse_hlo(text, source=f"<XLA:GPU {spec.name} {name}>")
    return GpuCompileResult(module=module, text=text, device=spec.name, jax_version=jax.__version__,
                            jaxlib_version=jaxlib.__version__, compile_s=seconds, dump_dir=out_dir,
                            dump_files=files, xla_log=_xla_lines(log.text), xla_compile_s=xla_seconds[0])


def lower_for_gpu(fn, *args, device: "str | DeviceSpec" = "h100-sxm", **kwargs) -> "HloModule":
    """The module jax lowers `fn(*args, **kwargs)` to for `device`, before any XLA pass (what
    `compile_for_gpu` hands XLA:GPU), parsed. It can differ from the lowering for the CPU: jax has
    GPU-specific lowering rules (a multi-dimensional IRFFT becomes one FFT per axis on CUDA, host
    callbacks become `xla_ffi_python_gpu_callback` calls).

    Arguments and exceptions as `compile_for_gpu` (no `dump_passes`)."""
    from ..devices import get_device, gpu_target_config
    from ..hlo import parse_hlo

    spec = get_device(device)
    target = gpu_target_config(spec)
    reason = gpu_compile_unavailable_reason()
    if reason is not None:
        raise GpuCompileUnavailable(reason)
    import jax

    dev = _compile_device(target, spec.name)
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)

    def lower():
        with _lowering_for_compile_only():
            return jitted.lower(*_placed(args, dev), **_placed(kwargs, dev)).as_text(dialect="hlo")

    text, error, log = _run_quietly(lower)
    if error is not None:
        _raise_failure(error, "lower", fn, spec, log, "jax failed to lower")
    return parse_hlo(text, source=f"<jax lowering for {spec.name} {getattr(fn, '__name__', 'fn')}>")


#: The stand-in for `ptxas`: XLA runs it once for its version, then once per kernel with `-o FILE`.
_PTXAS_STUB = """#!/bin/sh
# xla_costmodel's stand-in for ptxas in a compile for a compile-only GPU: nothing runs or reads the binary.
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --version) echo "ptxas: stand-in (xla_costmodel)"; echo "Cuda compilation tools, release {major}.{minor}, V{major}.{minor}.0"; exit 0;;
    -o) out="$2"; shift;;
  esac
  shift
done
if [ -n "$out" ]; then : > "$out"; fi
exit 0
"""


#: Whether `compile_for_gpu` keeps XLA's own `ptxas` (inside `xla_ptxas()`).
_KEEP_PTXAS: contextvars.ContextVar[bool] = contextvars.ContextVar("xla_costmodel_keep_ptxas", default=False)


@contextlib.contextmanager
def xla_ptxas():
    """Inside the block, `compile_for_gpu` lets XLA assemble each kernel with NVIDIA's own `ptxas`, as a
    compile for a real GPU does, instead of the stand-in, with LLVM's optimizations (slower: one `ptxas`
    process per kernel). The
    module and its kernels are the same either way; this is for a dump of the kernels' machine code
    (`XLA_FLAGS=--xla_dump_to=...`), or to check that sameness (`scripts/bench_gpu_compile.py
    --check-stub`)."""
    token = _KEEP_PTXAS.set(True)
    try:
        yield
    finally:
        _KEEP_PTXAS.reset(token)


_STUB_LOCK = threading.Lock()
#: The stand-in's compile options once made (`None`: not yet); `{}` once it failed or cannot be used.
_stub_options: dict[str, Any] | None = None


def _assembler_stub() -> dict[str, Any]:
    """The compile options that make XLA assemble with the stand-in `ptxas` (`{"xla_gpu_cuda_data_dir": DIR}`,
    and LLVM at -O0, `xla_backend_optimization_level`: the PTX is never assembled either), or `{}` where XLA's
    own settings are kept: inside `xla_ptxas()`, where the user chose a CUDA directory in `XLA_FLAGS`, the stand-in cannot run
    here (no `/bin/sh`, a temporary directory mounted noexec), or it failed once in this process
    (`_assembler_stub_failed`).

    DIR is made once per process and removed at exit. It is also where XLA looks first for libdevice
    (`nvvm/libdevice`), which LLVM links into kernels that call math functions: jax's own CUDA directory
    (`jax._src.lib.cuda_path`, which jax would have passed) is linked there as `nvvm`; without it XLA
    looks in its usual places (`/usr/local/cuda`, ...), as before."""
    global _stub_options
    if _KEEP_PTXAS.get() or "xla_gpu_cuda_data_dir" in os.environ.get("XLA_FLAGS", ""):
        return {}
    with _STUB_LOCK:
        if _stub_options is None:
            _stub_options = _make_assembler_stub()
        return _stub_options


def _assembler_stub_failed() -> None:
    """Use XLA's own `ptxas` from now on in this process (the stand-in failed)."""
    global _stub_options
    with _STUB_LOCK:
        _stub_options = {}


def _make_assembler_stub() -> dict[str, Any]:
    """Write the stand-in `ptxas` into a new directory and check that it runs: `_assembler_stub`'s options."""
    try:
        root = Path(tempfile.mkdtemp(prefix="xla_costmodel_cuda_"))
        atexit.register(shutil.rmtree, root, True)
        (root / "bin").mkdir()
        ptxas = root / "bin" / "ptxas"
        major, minor = _plugin_cuda_version()
        ptxas.write_text(_PTXAS_STUB.format(major=major, minor=minor))
        ptxas.chmod(0o755)
        done = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0 or f"V{major}.{minor}.0" not in done.stdout:
            return {}
        jax_cuda = _jax_cuda_path()
        if jax_cuda is not None and (jax_cuda / "nvvm").is_dir():
            (root / "nvvm").symlink_to(jax_cuda / "nvvm", target_is_directory=True)
    except (OSError, subprocess.SubprocessError):
        return {}
    # LLVM's optimizations only make the machine code faster, and nothing assembles or runs it: LLVM at -O0
    # (measured: 20% less CPU per compile, module and thunk sequence unchanged; before the stand-in, ptxas
    # hid the gain).
    return {"xla_gpu_cuda_data_dir": str(root), "xla_backend_optimization_level": 0}


def _plugin_cuda_version() -> tuple[int, int]:
    """The CUDA version jax's CUDA plugin was built with (12.9 for jax 0.10.2's `jax_cuda12_plugin`): what
    the stand-in `ptxas` reports, so that XLA targets the PTX it would with that toolkit."""
    import importlib

    for name in ("jax_cuda13_plugin", "jax_cuda12_plugin"):
        try:
            version = int(importlib.import_module(f"{name}._versions").cuda_runtime_build_version())
        except Exception:  # noqa: BLE001 - not installed, or a plugin without this query
            continue
        return version // 1000, version % 1000 // 10
    return 12, 9


def _jax_cuda_path() -> Path | None:
    """The CUDA directory jax passes XLA as `xla_gpu_cuda_data_dir` (`CUDA_ROOT`, NVIDIA's nvcc wheel), or None."""
    try:
        from jax._src import lib
    except ImportError:
        return None
    path = getattr(lib, "cuda_path", None)
    return Path(path) if path else None


def _run_quietly(step: Callable[[], str]):
    """`step()` with the plugin's log lines captured and the Python warnings of tracing the user's function
    (theirs, or jax's about it) recorded, then shown after the block as they would have been: `(its value
    or None, the exception it raised or None, the captured log)`."""
    with quiet_stderr() as log, warnings.catch_warnings(record=True) as caught:
        try:
            value, error = step(), None
        except Exception as exc:  # noqa: BLE001 - sorted out by `_raise_failure`, with XLA's log
            value, error = None, exc
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return value, error, log


def _raise_failure(error: Exception, stage: str, fn, spec, log, what: str):
    """Raise what `error`, raised at `stage` ("lower" or "compile"), means to the user. Their own errors
    while tracing (a shape mismatch, a bad argument) are theirs, reported in their terms
    (`UserProgramError`: their file, line and exception), as `from_jax` reports them; what jax or XLA raise
    at run time (a backend a library asked for, XLA's failure) is `GpuCompileError`: `what` the function
    for the device, with XLA's first line."""
    if stage == "lower" and not isinstance(error, RuntimeError):
        raise UserProgramError(getattr(fn, "__name__", "program"), "tracing", error) from error
    detail = _first_line(_xla_message(str(error)) or _xla_message(log.text) or str(error))
    raise GpuCompileError(f"{what} {getattr(fn, '__name__', 'the function')} for '{spec.name}': {detail}",
                          xla_error=f"{error}\n{log.text}".strip()) from error


_PATCH_LOCK = threading.RLock()


@contextlib.contextmanager
def _lowering_for_compile_only():
    """While jax lowers for a compile-only GPU device, its lowering rules that ask for the backend
    (host callbacks: `emit_python_callback`) get the compile-only client.

    jax's `ModuleContext.get_backend` checks the lowering's backend against the platform through
    `canonicalize_platform(client.platform)`; a compile-only client's platform is the alias "gpu",
    which jax can only resolve to "cuda" when a live CUDA backend exists, so on a machine without a
    GPU it raises "Unknown backend: 'gpu' requested". The client's raw platform ("cuda") is the
    lowering's platform: that client is returned instead. Other backends, and lowerings for several
    platforms, go through jax's own method unchanged; the method is restored on exit (the user's jax
    is left as it was).
    """
    from jax._src.interpreters import mlir

    with _PATCH_LOCK:
        original = mlir.ModuleContext.get_backend

        def get_backend(self, optional: bool = False):
            backend = self.backend
            if (backend is not None and getattr(backend, "runtime_type", None) == "compile_only_runtime"
                    and len(self.platforms) == 1 and getattr(backend, "_raw_platform", None) == self.platforms[0]):
                return backend
            return original(self, optional)

        mlir.ModuleContext.get_backend = get_backend
        try:
            yield
        finally:
            mlir.ModuleContext.get_backend = original


def _drop_host_callbacks(lowered) -> None:
    """Hand no host callbacks to the compile of `lowered` (a `jax.stages.Lowered` for a compile-only
    device): they are the Python callables a running executable would call back, and jax's
    compile-only client takes none (its `compile` has no `host_callbacks` argument). XLA's module keeps
    the callbacks' custom calls (`xla_ffi_python_gpu_callback`), as the GPU's does."""
    compile_args = getattr(getattr(lowered, "_lowering", None), "compile_args", None)
    if isinstance(compile_args, dict) and compile_args.get("host_callbacks"):
        compile_args["host_callbacks"] = []


def _placed(tree: Any, dev) -> Any:
    """`tree` with every array-like leaf replaced by a `jax.ShapeDtypeStruct` on the compile-only `dev`."""
    import jax
    import numpy as np

    sharding = jax.sharding.SingleDeviceSharding(dev)

    def place(leaf):
        devices = getattr(getattr(leaf, "sharding", None), "device_set", ())
        if len(devices) > 1:
            raise ValueError(f"compile_for_gpu compiles for one GPU; an argument is sharded over {len(devices)} "
                             f"devices")
        if isinstance(leaf, jax.ShapeDtypeStruct) or hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            return jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype, sharding=sharding,
                                        weak_type=bool(getattr(leaf, "weak_type", False)))
        if isinstance(leaf, (bool, int, float, complex, np.generic)):
            return jax.ShapeDtypeStruct((), jax.dtypes.result_type(leaf), sharding=sharding,
                                        weak_type=not isinstance(leaf, np.generic))
        raise TypeError(f"compile_for_gpu: an argument of type {type(leaf).__name__} is neither an array nor a "
                        f"jax.ShapeDtypeStruct (bind static arguments with functools.partial)")

    return jax.tree_util.tree_map(place, tree)


def _keep_dump(scratch: Path, out_dir: Path) -> tuple[str, ...]:
    """Move the kept files of XLA's dump from `scratch` into `out_dir` (made if missing); a file already
    there is kept and the new one written beside it with a numbered suffix."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(scratch.iterdir()):
        if not _KEPT_DUMP.search(path.name):
            continue
        dest = out_dir / path.name
        n = 1
        while dest.exists():
            dest = out_dir / f"{path.stem}.{n}{path.suffix}"
            n += 1
        shutil.move(str(path), dest)
        written.append(dest.name)
    return tuple(written)


_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ (\S+:\d+)\] (.*)$")
_NOISE = ("cudart_stub.cc", "absl::InitializeLog", "cuda_executor.cc", "cuda_platform.cc")


def _xla_lines(text: str) -> str:
    """XLA's log lines of a compile, without the plugin's start-up noise, as `file:line] message` lines."""
    out = []
    for line in text.splitlines():
        if not line.strip() or any(noise in line for noise in _NOISE):
            continue
        m = _LOG_LINE.match(line)
        out.append(f"{m.group(1)}] {m.group(2)}" if m else line)
    return "\n".join(out)


def _xla_message(text: str) -> str:
    """The most telling line of an XLA error: the first error-level log line, or the status message."""
    for line in text.splitlines():
        m = _LOG_LINE.match(line)
        if m and line[0] in "EF":
            return m.group(2)
    for line in text.splitlines():
        line = line.strip()
        if re.match(r"^(INTERNAL|INVALID_ARGUMENT|FAILED_PRECONDITION|UNIMPLEMENTED|RESOURCE_EXHAUSTED|"
                    r"NOT_FOUND|UNKNOWN):", line):
            return line
    return ""


def _first_line(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0] if text else "no message"
