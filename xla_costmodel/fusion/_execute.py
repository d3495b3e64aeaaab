"""Run an HLO module on jaxlib's CPU client, as written, for checking that fused modules compute the same thing.

jaxlib 0.10.2 has no direct "compile this HLO text" entry point; what works:
parse the text with XLA's parser (`jaxlib._hlo.hlo_module_from_text`), wrap
the serialized proto in an `XlaComputation`, convert it to an MHLO/StableHLO
module (`jaxlib._jax.mlir.xla_computation_to_mlir_module`) and hand that to
`Client.compile_and_load`, which runs XLA's whole CPU pipeline on it (layout
assignment included). So:

- `fusion` instructions must become `call`s first
  (`unfuse_for_execution(module, mode="call")`): XLA's CPU backend aborts the
  process on fusions it did not make itself ("Check failed: has_layout()");
- a module must not hold `bitcast`s: they are legal only after layout
  assignment, which this path runs again ("Unexpected bitcast operation seen
  during layout assignment"). `simulate_fusion` emits bitcasts only for
  modules that were already through layout assignment (`layouts_assigned`).
- LAPACK custom calls (`lapack_*_ffi`, jaxlib's CPU linear algebra) call
  through function pointers that jaxlib fills in only when JAX lowers a
  linear-algebra op (`jaxlib.lapack.prepare_lapack_call`). A module holding
  them, compiled from text before that, dies with SIGSEGV when run (the
  compile succeeds). `run_on_cpu` fills them first (`_lapack.prepare_lapack`).

Nothing is rewritten: what runs is the text given. `IsolatedCpuRunner` runs
modules in a worker process (`xla_costmodel._worker`), so that a crash inside jaxlib is
reported as `CpuClientCrashed` instead of ending the caller's process.
"""

from __future__ import annotations

import atexit
import os
import signal
from typing import Any, Sequence

import numpy as np

from .. import _lapack
from .._worker import WorkerCrashed, WorkerProcess

__all__ = [
    "CpuClientCrashed",
    "CpuRunError",
    "IsolatedCpuRunner",
    "bitcasts_to_logical",
    "random_arguments",
    "run_on_cpu",
    "run_on_cpu_isolated",
]

_NUMPY = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128,
}


class CpuRunError(RuntimeError):
    """jaxlib's CPU client could not compile or run a module; the message is XLA's."""


class CpuClientCrashed(CpuRunError):
    """The process running the module died inside jaxlib (`signal`: the signal number, or None)."""

    def __init__(self, message: str, signal_number: int | None = None):
        super().__init__(message)
        self.signal = signal_number


def random_arguments(module, seed: int = 0) -> list[np.ndarray]:
    """Random arrays for the entry parameters of `module` (our `HloModule`).

    Floats in [0.5, 1.5) (positive, so log/sqrt/rsqrt stay finite), integers in
    [0, 4), booleans at random; bf16 through `ml_dtypes` when installed.
    **Raises:** `ValueError` for tuple-shaped or unsupported parameters.
    """
    rng = np.random.default_rng(seed)
    out = []
    for p in module.entry.parameters:
        s = p.shape
        if not s.is_array:
            raise ValueError(f"parameter '{p.name}' has non-array shape {s}")
        t = s.element_type
        if t == "bf16":
            import ml_dtypes

            out.append((rng.random(s.dims) + 0.5).astype(ml_dtypes.bfloat16))
            continue
        dt = _NUMPY.get(t)
        if dt is None:
            raise ValueError(f"parameter '{p.name}': no random data for element type {t}")
        if t == "pred":
            out.append(rng.random(s.dims) < 0.5)
        elif t.startswith(("s", "u")):
            out.append(rng.integers(0, 4, size=s.dims).astype(dt))
        elif t.startswith("c"):
            out.append((rng.random(s.dims) + 0.5 + 1j * rng.random(s.dims)).astype(dt))
        else:
            out.append((rng.random(s.dims) + 0.5).astype(dt))
    return out


def _physical_order(shape) -> tuple[int, ...]:
    """Dimensions major to minor (the order the elements lie in memory)."""
    return tuple(reversed(shape.minor_to_major))


def bitcasts_to_logical(module) -> int:
    """Rewrite every array `bitcast` of `module` (our `HloModule`, in place) into logical ops.

    A bitcast keeps the bytes in memory and relabels them. With the same element
    type that is: transpose the operand into its physical (major-to-minor) order,
    reshape (row-major, so the linear order is kept) to the result's physical
    dims, transpose into the result's logical order. Identity steps are left
    out, so a bitcast between row-major layouts becomes one `reshape`. The
    instruction keeps its name; helpers get fresh names.

    **Returns:** how many bitcasts were rewritten.
    **Raises:** `ValueError` for a bitcast that changes the element type (no logical equivalent here).
    """
    from ..hlo import HloInstruction, Shape

    n = 0
    for comp in module.computations:
        for instr in list(comp.instructions):
            if instr.opcode != "bitcast":
                continue
            src_instr = instr.operands[0]
            src, dst = src_instr.shape, instr.shape
            if not (src.is_array and dst.is_array):
                continue
            if src.element_type != dst.element_type:
                raise ValueError(
                    f"bitcast '{instr.name}' changes {src.element_type} to {dst.element_type}: cannot run it as a reshape"
                )
            operand = src_instr
            ty = src.element_type
            # 1. operand into its physical order, as a row-major array
            order = _physical_order(src)
            if order != tuple(range(len(src.dims))):
                shape = Shape.array(ty, [src.dims[d] for d in order])
                t = HloInstruction(module.unique_name(f"{instr.name}.physical"), "transpose", shape, [operand])
                t.set_attribute("dimensions", "{" + ",".join(map(str, order)) + "}")
                comp.add_instruction(t, before=instr)
                operand = t
            # 2. the result's physical dims, then 3. the result's logical order
            rank = len(dst.dims)
            m2m = dst.minor_to_major
            perm = tuple(rank - 1 - m2m.index(i) for i in range(rank))
            phys = Shape.array(ty, [dst.dims[d] for d in _physical_order(dst)])
            for key in list(instr.raw_attributes):
                instr.remove_attribute(key)
            if perm == tuple(range(rank)):
                instr.opcode = "reshape"
                instr.replace_operand(0, operand)
            else:
                if tuple(operand.shape.dims) != tuple(phys.dims):
                    r = HloInstruction(module.unique_name(f"{instr.name}.linear"), "reshape", phys, [operand])
                    comp.add_instruction(r, before=instr)
                    operand = r
                instr.opcode = "transpose"
                instr.replace_operand(0, operand)
                instr.set_attribute("dimensions", "{" + ",".join(map(str, perm)) + "}")
            n += 1
    return n


def run_on_cpu(
    text: str, args: Sequence[Any], *, prepare_lapack: bool = True, bitcasts_as_logical_ops: bool = False
) -> list[np.ndarray]:
    """Compile HLO text with jaxlib's CPU client and run it once, in this process, as written.

    **Arguments:** `text`, a module without fusions of its own or bitcasts (see
    the module doc); `args`, one array per entry parameter; `prepare_lapack`:
    fill jaxlib's LAPACK table first if the module calls LAPACK (False only to
    show what happens without it); `bitcasts_as_logical_ops`: run each bitcast
    as the transpose/reshape it stands for (`bitcasts_to_logical`) instead of
    refusing the module. Only for comparing two graphs that both hold the same
    bitcasts (graph-edit tests); never for checking that a module runs as written.
    **Returns:** the outputs (a tuple result is flattened).
    **Raises:** `CpuRunError` with XLA's message when XLA rejects the module.
    A crash inside jaxlib ends the process: use `run_on_cpu_isolated` for
    modules that might crash it.
    """
    import jax
    import jaxlib._hlo as hlo
    from jax._src.lib import xla_client as xc
    from jaxlib import _jax

    try:
        from jax.extend.backend import get_backend
    except ImportError:  # pragma: no cover
        from jax._src.xla_bridge import get_backend
    if bitcasts_as_logical_ops and "bitcast(" in text:
        from ..hlo import parse_hlo

        module = parse_hlo(text)
        if bitcasts_to_logical(module):
            text = module.to_text()
    if prepare_lapack:
        _lapack.prepare_lapack(text)
    backend = get_backend("cpu")
    try:
        module = hlo.hlo_module_from_text(text)
        computation = hlo.XlaComputation(module.as_serialized_hlo_module_proto())
        mlir = _jax.mlir.xla_computation_to_mlir_module(computation)
        devices = backend.devices()[:1]
        exe = backend.compile_and_load(mlir, xc.DeviceList(tuple(devices)), xc.CompileOptions())
        results = exe.execute_sharded([jax.device_put(np.asarray(a), devices[0]) for a in args])
        return [np.asarray(r[0]) for r in results.disassemble_into_single_device_arrays()]
    except (RuntimeError, ValueError) as e:  # XlaRuntimeError is a RuntimeError
        raise CpuRunError(str(e)) from e


# ---------------------------------------------------------------------------
# In a worker process (`xla_costmodel._worker`)


def _run_in_worker(text: str, args: Sequence[Any], options: dict) -> list[np.ndarray]:
    """What the worker runs: `run_on_cpu`, any failure other than XLA's reported as a `CpuRunError`."""
    try:
        return run_on_cpu(text, args, **options)
    except CpuRunError:
        raise
    except Exception as e:  # noqa: BLE001 - reported to the caller, who raises it
        raise CpuRunError(f"{type(e).__name__}: {e}") from None


class IsolatedCpuRunner:
    """Runs modules on jaxlib's CPU client in a worker process, one at a time.

    The worker (an `xla_costmodel._worker.WorkerProcess`) is started on first
    use and kept for the next modules (jax is imported once). If jaxlib kills
    it (SIGSEGV, an abort on a failed check), `run` raises `CpuClientCrashed`
    naming the signal and the last lines the worker wrote, and the next call
    starts a new worker.

    **Arguments:** `timeout_s`: the longest one module may take (then the
    worker is killed and `CpuClientCrashed` raised).
    """

    def __init__(self, timeout_s: float = 600.0):
        self.timeout_s = timeout_s
        self._worker = WorkerProcess({"JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS") or "cpu",
                                      "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL") or "2"},
                                     timeout_s=timeout_s, name="CPU-client worker")

    def run(self, text: str, args: Sequence[Any], **options) -> list[np.ndarray]:
        """Compile and run `text` on `args` in the worker, as written (`options`: of `run_on_cpu`).

        **Returns:** the outputs. **Raises:** `CpuRunError` (XLA rejected the
        module), `CpuClientCrashed` (the worker died or ran past `timeout_s`).
        """
        try:
            return self._worker.call(f"{__name__}:_run_in_worker", text, [np.asarray(a) for a in args], options)
        except WorkerCrashed as e:
            if e.timed_out:
                raise CpuClientCrashed(f"the module ran longer than {self.timeout_s:g} s; worker killed") from None
            what = f"signal {signal.Signals(e.signal).name}" if e.signal else f"exit status {e.exit_status}"
            raise CpuClientCrashed(
                f"jaxlib's CPU client ended the process running the module ({what})"
                + (f":\n{e.log_tail}" if e.log_tail else ""),
                e.signal,
            ) from None

    def close(self) -> None:
        """Stop the worker (a new one starts on the next `run`)."""
        self._worker.close()

    def __enter__(self) -> "IsolatedCpuRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_SHARED: IsolatedCpuRunner | None = None


def run_on_cpu_isolated(text: str, args: Sequence[Any]) -> list[np.ndarray]:
    """`run_on_cpu` in a worker process shared by all callers (see `IsolatedCpuRunner`)."""
    global _SHARED
    if _SHARED is None:
        _SHARED = IsolatedCpuRunner()
        atexit.register(_SHARED.close)
    return _SHARED.run(text, args)
