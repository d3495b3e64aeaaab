"""Run an HLO module on jaxlib's CPU client, for checking that fused modules compute the same thing.

jaxlib 0.10.2 has no direct "compile this HLO text" entry point; what works:
parse the text with XLA's parser (`jaxlib._hlo.hlo_module_from_text`), wrap
the serialized proto in an `XlaComputation`, convert it to an MHLO/StableHLO
module (`jaxlib._jax.mlir.xla_computation_to_mlir_module`) and hand that to
`Client.compile_and_load`. Modules holding `fusion` instructions must be
unfused first (`unfuse_for_execution`): XLA's CPU backend aborts the process
on fusions it did not make itself. Nor does that path take `bitcast`s (the
MHLO import rejects them), which `simulate_fusion` makes out of layout-only
reshapes and transposes: `run_on_cpu` rewrites each back into the
transpose/reshape/transpose that computes the same values
(`bitcasts_to_logical`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

_NUMPY = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128,
}


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


def run_on_cpu(text: str, args: Sequence[Any]) -> list[np.ndarray]:
    """Compile HLO text with jaxlib's CPU client and run it once.

    **Arguments:** `text`, a module without foreign fusions (its `bitcast`s are
    run as the logical ops they stand for, see `bitcasts_to_logical`); `args`,
    one array per entry parameter.
    **Returns:** the outputs (a tuple result is flattened).
    """
    if "bitcast(" in text:
        from ..hlo import parse_hlo

        module = parse_hlo(text)
        if bitcasts_to_logical(module):
            text = module.to_text()
    import jax
    import jaxlib._hlo as hlo
    from jax._src.lib import xla_client as xc
    from jaxlib import _jax

    try:
        from jax.extend.backend import get_backend
    except ImportError:  # pragma: no cover
        from jax._src.xla_bridge import get_backend
    backend = get_backend("cpu")
    module = hlo.hlo_module_from_text(text)
    computation = hlo.XlaComputation(module.as_serialized_hlo_module_proto())
    mlir = _jax.mlir.xla_computation_to_mlir_module(computation)
    devices = backend.devices()[:1]
    exe = backend.compile_and_load(mlir, xc.DeviceList(tuple(devices)), xc.CompileOptions())
    results = exe.execute_sharded([jax.device_put(np.asarray(a), devices[0]) for a in args])
    return [np.asarray(r[0]) for r in results.disassemble_into_single_device_arrays()]
