"""Timing a CPU program in the measuring worker: a process whose allocator is steady from its first allocation.

Why a process of its own: the steady allocator (`_allocator`) holds only in
a process that started in it. Elsewhere glibc's per-thread cache, which only
the environment at start can switch off, keeps the spare bytes of XLA's
aligned buffers apart from them, so a freed buffer is too small for the same
request next run, and every run takes fresh memory and page-faults on it (a
16 MiB output: 4096 faults per run, whatever `mallopt` says). A user who
calls `measure_kernels(fn, *args)` in a notebook, or the command line, is in that
state. The measuring worker (an `xla_costmodel._worker.WorkerProcess`)
starts with glibc's steady state in its environment (`STEADY_TUNABLES`) and
is kept for the session, so its start (Python and jax, a few seconds) is paid
once.

How the program travels: as `jax.export` serialized StableHLO, with its
arguments as arrays (cast to the exported input types). The worker compiles
that module with the compile options jax gives a one-device `jit`, so the
compiled module (its name, its kernels and their names) is the one this
process compiles, and `Measurement.hlo_text` is the module that ran, read
from the worker's executable. It then times it with the same code as an
in-process measurement (`_timing.time_program`).

What cannot travel is measured in this process, with an
`InProcessMeasurementWarning` saying why: programs over several devices,
with side effects or calls back into Python, that `jax.export` refuses, or
whose arguments are not the exported inputs (static arguments, typed PRNG
keys).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from .._lapack import prepare_lapack
from .._worker import WorkerCrashed, WorkerProcess, shared_worker
from ._allocator import COLD_TUNABLES, STEADY_TUNABLES
from ._method import Measurement, MeasurementError, Method

__all__ = [
    "ExportedProgram",
    "InProcessMeasurementWarning",
    "NotExportable",
    "export_program",
    "measure_exported",
    "measure_in_worker",
    "measuring_worker",
]

# Custom-call targets through which a program calls back into the Python process that lowered it.
_CALLBACK_TARGET = re.compile(r'call_target_name\s*=\s*"([^"]*callback[^"]*)"')


class InProcessMeasurementWarning(UserWarning):
    """A CPU program was measured in this process, not in the measuring worker (the message says why)."""


class NotExportable(ValueError):
    """The program cannot be sent to the measuring worker (the message says why)."""


@dataclass(frozen=True)
class ExportedProgram:
    """A program ready for the measuring worker.

    **Attributes:** `name` (the function's), `blob` (the exported module: the
    serialized StableHLO portable artifact, `Exported.mlir_module_serialized`),
    `args` (one array per input of that module, of its type), `outputs` (how
    many results it has).
    """

    name: str
    blob: bytes
    args: tuple
    outputs: int = 1


def export_program(jitted, args: tuple, name: str = "program") -> ExportedProgram:
    """`jitted` (a `jax.jit`-ed function) and its example arguments, serialized for the worker.

    **Raises:** `NotExportable` naming the reason (see the module docstring).
    """
    import jax
    from jax import export

    try:
        # The worker runs the jaxlib that lowered the module: no custom call's compatibility matters.
        exported = export.export(jitted, disabled_checks=[export.DisabledSafetyCheck.custom_call("ALL")])(*args)
    except Exception as exc:  # noqa: BLE001 - whatever jax.export refuses
        raise NotExportable(f"jax.export cannot serialize it ({type(exc).__name__}: {exc})") from None
    if exported.nr_devices != 1:
        raise NotExportable(f"it runs on {exported.nr_devices} devices")
    if exported.ordered_effects or exported.unordered_effects:
        raise NotExportable("it has side effects")
    callbacks = sorted(set(_CALLBACK_TARGET.findall(exported.mlir_module())))
    if callbacks:
        raise NotExportable(f"it calls back into this Python process ({', '.join(callbacks)})")
    flat = jax.tree.leaves(args)
    avals = exported.in_avals
    if len(flat) != len(avals):
        raise NotExportable(f"its {len(flat)} argument arrays are not the {len(avals)} exported inputs "
                            "(static arguments?)")
    arrays = []
    for i in exported.module_kept_var_idx:
        aval = avals[i]
        try:
            a = np.asarray(flat[i], dtype=aval.dtype)
        except Exception as exc:  # noqa: BLE001 - e.g. typed PRNG keys, which have no array of their own
            raise NotExportable(f"argument {i} does not convert to a {aval.dtype} array ({exc})") from None
        if a.shape != tuple(aval.shape):
            raise NotExportable(f"argument {i} has shape {a.shape}, the exported input {tuple(aval.shape)}")
        arrays.append(a)
    return ExportedProgram(name=name, blob=bytes(exported.mlir_module_serialized), args=tuple(arrays),
                           outputs=len(exported.out_avals))


def _worker_environment(allocator: str = "steady") -> dict[str, str]:
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    state = COLD_TUNABLES if allocator == "cold" else STEADY_TUNABLES
    return {
        "GLIBC_TUNABLES": ":".join(t for t in (tunables, state) if t),
        "JAX_PLATFORMS": "cpu",
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL") or "2",
    }


def measuring_worker(allocator: str = "steady") -> WorkerProcess:
    """The session's measuring worker for an allocator state (started on first use, kept until Python exits).

    A process of its own per state: a steady worker keeps the memory of what it ran before, so a "cold"
    measurement there would reuse warm heap memory instead of paying the page faults it is meant to show.
    """
    if allocator == "cold":
        return shared_worker("measure-cold", lambda: WorkerProcess(_worker_environment("cold"),
                                                                   name="measuring worker (cold allocator)"))
    return shared_worker("measure", lambda: WorkerProcess(_worker_environment(), name="measuring worker"))


def measure_in_worker(program: ExportedProgram, method: Method, *, trace_dir=None, check: str = "raise",
                      budget_s: float | None = None, compiler_options: dict | None = None, on_runs=None,
                      warn_stacklevel: int = 2) -> Measurement:
    """Time `program` in the measuring worker with `method` (see `measure_program` for `trace_dir`, `check`,
    `budget_s`, counted from when the worker gets the program, and `compiler_options`); `on_runs(done)` is
    called as the runs are done there.

    **Raises:** what the measurement raises there (`MeasurementError`, ...);
    `MeasurementError` when the worker died.
    """
    try:
        return measuring_worker(method.allocator).call(
            f"{__name__}:measure_exported", program.blob, program.args, method,
            None if trace_dir is None else os.fspath(trace_dir), check, compiler_options, program.outputs, budget_s,
            on_message=on_runs, warn_stacklevel=warn_stacklevel + 1,
        )
    except WorkerCrashed as exc:
        raise MeasurementError(f"{program.name}: {exc}") from None


# ---------------------------------------------------------------------------
# In the worker


def _compile_exported(blob: bytes, compiler_options: dict | None = None, inputs: int = 0, outputs: int = 1):
    """`(executable, device, hlo_text)`: the exported module compiled as jax compiles a one-device jit of
    `inputs` arguments and `outputs` results with no shardings given (`compiler_options` as jax passes
    those of `Lowered.compile`)."""
    from jax._src import compiler
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc

    try:
        from jax.extend.backend import get_backend
    except ImportError:  # pragma: no cover
        from jax._src.xla_bridge import get_backend

    backend = get_backend("cpu")
    device = backend.local_devices()[0]
    options = compiler.get_compile_options(
        num_replicas=1, num_partitions=1, device_assignment=np.array([[device]], dtype=object), backend=backend,
        env_options_overrides=dict(compiler_options) if compiler_options else None,
    )
    # What `jit` sets for arguments and results whose sharding it leaves to XLA.
    options.executable_build_options.allow_spmd_sharding_propagation_to_parameters = [True] * inputs
    options.executable_build_options.allow_spmd_sharding_propagation_to_output = [True] * outputs
    with mlir.make_ir_context():
        # The module as `Exported.mlir_module()` reads it back, handed to the client as jax hands its own.
        module = _jax.mlir.deserialize_portable_artifact(blob)
        executable = backend.compile_and_load(module, xc.DeviceList((device,)), options)
    return executable, device, executable.get_hlo_text()


def measure_exported(blob: bytes, args: tuple, method: Method, trace_dir: str | None, check: str,
                     compiler_options: dict | None = None, outputs: int = 1,
                     budget_s: float | None = None) -> Measurement:
    """What the worker runs: compile the exported program and time it with `method`, telling the caller
    each run done (`_worker.report`)."""
    import time

    from .._worker import report
    from ._allocator import set_allocator
    from ._timing import time_program

    started = time.perf_counter()
    set_allocator(method.allocator)
    import jax

    executable, device, hlo_text = _compile_exported(blob, compiler_options, len(args), outputs)
    prepare_lapack(hlo_text)  # else a LAPACK custom call of the program ends the worker (SIGSEGV)
    with jax.enable_x64(True):  # f64 inputs stay f64: they are the module's types already
        device_args = [jax.device_put(a, device) for a in args]

    def run_once() -> None:
        results = executable.execute_sharded(device_args)
        jax.block_until_ready(results.disassemble_into_single_device_arrays())

    return time_program(run_once, hlo_text, method, trace_dir=trace_dir, check=check, process="worker",
                        budget_s=budget_s, started=started, report=report)
