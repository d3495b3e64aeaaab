"""The rules of XLA's `GpuHloCostAnalysis` that differ from `HloCostAnalysis`'s.

Registered with `cost_rule(..., variant="gpu")` as overrides of the base
rules (`_rules`, `_rules_math`); `_gpu` imports this module, so they are in
place whenever the GPU analysis runs. What each rule counts, and why, is in
`_gpu`'s docstring: elementwise ops in the device's clock cycles,
concatenate, a reduce's init values, collectives (ring bytes, ranks, the
scaling ratio), library custom calls and cost hints.
"""

from __future__ import annotations

import json
import re

import numpy as np

from . import _rules as R
from ._library import library_routine, xla_library_flops
from ._rules import BYTES, FLOPS, OPB, OPU, OUT, UNPRICED, cost_rule, elements, elements_recursive, get_extra, set_extra

__all__ = ["DEFAULT_CYCLES", "num_ranks"]

#: `GetFlopsPerElementwiseOpElement`'s cycles for an (opcode, dtype) the profile lacks.
DEFAULT_CYCLES = 3
_f32 = np.float32


def _cycles(an, opcode: str, shape) -> int:
    dtype = shape.element_type
    return an.op_profile.get((opcode, dtype), DEFAULT_CYCLES)


def _elementwise_flops(an, opcode: str, shape) -> float:
    return float(_cycles(an, opcode, shape) * elements_recursive(shape))


@cost_rule(*sorted(R.ELEMENTWISE_OPCODES), variant="gpu")
def gpu_elementwise_rule(an, instr, p):
    """Clock cycles per element from the device's op profile x elements; no transcendentals."""
    p[FLOPS] = _elementwise_flops(an, instr.opcode, instr.shape)


@cost_rule("concatenate", variant="gpu")
def gpu_concatenate_rule(an, instr, p):
    """6 per output element (a compare and branch); 400 for an unaligned minor-dimension concat."""
    per_element = 6
    dims = R._attr_tuple(instr, "dimensions")
    dim = dims[0] if dims else 0
    if dim > 0 and instr.operands and instr.operands[0].shape.dims[dim] & 31:
        per_element = 400
    p[FLOPS] = float(per_element * elements_recursive(instr.shape))


@cost_rule("reduce", variant="gpu")
def gpu_reduce_rule(an, instr, p):
    """Base reduce flops; each init value read once per output element."""
    R.reduce_rule(an, instr, p)
    out_elems = elements(R._output_array_shape(instr.shape))
    out_bytes = sum(an.size(leaf) for _, leaf in R.all_leaves(instr.shape))
    p[OUT] = float(out_bytes)
    n_inputs = len(instr.operands) // 2
    total = float(out_bytes)
    for i in range(n_inputs):
        total += p[OPB][i]
    for i in range(n_inputs, len(instr.operands)):
        init_bytes = float(out_elems * an.size(instr.operands[i].shape))
        p[OPB][i] = init_bytes
        p[OPU][i] = float(out_elems)
        total += init_bytes
    p[BYTES] = total


def num_ranks(an, instr) -> int:
    """XLA's `NumRanks`: the participants of the largest group of a collective
    (`_collective_groups.participant_counts`, with the module's replica and partition counts)."""
    from ._collective_groups import module_counts, participant_counts

    return max([1, *participant_counts(instr, *module_counts(instr, an.module))])


def _ring(p, ranks: int, intra_steps: int) -> None:
    set_extra(p, R.KEY_COLL_DEVICES, float(ranks))
    set_extra(p, R.KEY_COLL_SCALE, float(_f32(ranks) / _f32(intra_steps)) if intra_steps > 0 else 0.0)


def _array_bytes(an, shape, skip_index: int = -1) -> int:
    total = 0
    for index, leaf in R.all_leaves(shape):
        if index and index[0] == skip_index:
            continue
        if leaf.element_type not in ("tuple", "token", "opaque"):
            total += an.size(leaf)
    return total


def _reducer_opcode(instr) -> str:
    comp = instr.attribute("to_apply", None)
    return comp.root.opcode if comp is not None and comp.root is not None else "add"


@cost_rule("all-reduce", variant="gpu")
def gpu_all_reduce_rule(an, instr, p):
    """Bytes in + out; the reduction's elementwise cost; ring scaling n / 2(n-1)."""
    ranks = num_ranks(an, instr)
    out = float(_array_bytes(an, instr.shape))
    p[OUT] = out
    set_extra(p, R.KEY_COLL_BYTES, out)
    p[BYTES] = out + sum(an.size(op.shape) for op in instr.operands)
    p[FLOPS] = _elementwise_flops(an, _reducer_opcode(instr), instr.shape)
    _ring(p, ranks, 2 * (ranks - 1))


@cost_rule("all-reduce-start", variant="gpu")
def gpu_all_reduce_start_rule(an, instr, p):
    ranks = num_ranks(an, instr)
    moved = float(_array_bytes(an, instr.shape))
    p[FLOPS] = _elementwise_flops(an, _reducer_opcode(instr), instr.shape)
    p[BYTES] = moved
    set_extra(p, R.KEY_COLL_BYTES, moved)
    _ring(p, ranks, 2 * (ranks - 1))


def _all_gather(an, instr, p, skip_index: int) -> None:
    ranks = num_ranks(an, instr)
    moved = _array_bytes(an, instr.shape, skip_index)
    per_rank = moved // ranks
    p[BYTES] = float(per_rank * (2 * ranks - 1) + per_rank * ranks)
    set_extra(p, R.KEY_COLL_BYTES, float(moved))
    _ring(p, ranks, ranks - 1)


@cost_rule("all-gather", variant="gpu")
def gpu_all_gather_rule(an, instr, p):
    """Ring all-gather: writes (2n-1) and reads n shards."""
    _all_gather(an, instr, p, -1)


@cost_rule("all-gather-start", variant="gpu")
def gpu_all_gather_start_rule(an, instr, p):
    _all_gather(an, instr, p, 0)


@cost_rule("reduce-scatter", variant="gpu")
def gpu_reduce_scatter_rule(an, instr, p):
    """Ring reduce-scatter: reads (2n-1) and writes n shards, plus the reduction's cost."""
    ranks = num_ranks(an, instr)
    moved = sum(_array_bytes(an, op.shape) for op in instr.operands)
    per_rank = moved // ranks
    p[BYTES] = float(per_rank * ranks + per_rank * (2 * ranks - 1))
    set_extra(p, R.KEY_COLL_BYTES, float(moved))
    p[FLOPS] = _elementwise_flops(an, _reducer_opcode(instr), instr.shape)
    _ring(p, ranks, ranks - 1)


@cost_rule("all-to-all", variant="gpu")
def gpu_all_to_all_rule(an, instr, p):
    set_extra(p, R.KEY_COLL_BYTES, float(_array_bytes(an, instr.shape)))


@cost_rule("collective-permute", "collective-permute-start", variant="gpu")
def gpu_collective_permute_rule(an, instr, p):
    set_extra(p, R.KEY_COLL_BYTES, get_extra(p, R.KEY_COLL_BYTES) + float(_array_bytes(an, instr.operands[0].shape)))


@cost_rule("async-start", variant="gpu")
def gpu_async_start_rule(an, instr, p):
    """XLA visits the wrapped instruction itself; a wrapped reduce-scatter or all-to-all prices the start."""
    comps = instr.called_computations
    if not comps:
        return
    wrapped = comps[0].root
    an.subcomputation(comps[0])  # gives the wrapped instructions their records
    if wrapped is not None and wrapped.opcode == "reduce-scatter":
        gpu_reduce_scatter_rule(an, wrapped, p)
    elif wrapped is not None and wrapped.opcode == "all-to-all":
        gpu_all_to_all_rule(an, wrapped, p)


_ESCAPED_QUOTE = re.compile(r"\\+(?:\"|22|x22|u0022|U00000022)")


def _cost_estimate(config) -> dict[str, float] | None:
    """The `cost_estimate_json` hint of a custom call's backend config (Triton kernels), if any."""
    if isinstance(config, dict):
        hint = config.get("cost_estimate_json")
        if isinstance(hint, str):
            try:
                data = json.loads(hint)
            except json.JSONDecodeError:
                return None
            return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}
        return None
    if not isinstance(config, str) or "cost_estimate_json" not in config:
        return None
    text = _ESCAPED_QUOTE.sub('"', config)
    out = {}
    for key in ("flops", "bytes_accessed"):
        m = re.search(r'"' + key + r'"\s*:\s*(-?[\d.eE+]+)', text)
        if m:
            out[key] = float(m.group(1))
    return out


@cost_rule("custom-call", variant="gpu")
def gpu_custom_call_rule(an, instr, p):
    """cuBLAS gemms and cuDNN convolutions priced as dots / convolutions; hints honoured; else unknown."""
    shape = instr.shape
    real_out = shape.tuple_shapes[0] if shape.element_type == "tuple" and shape.tuple_shapes else shape
    flops = xla_library_flops(instr)
    if flops is not None:
        # `GpuHloCostAnalysis::HandleCustomCall`: the dot's / the convolution's flops (`_library`, the
        # one table of library routines); only the real output is written.
        p[FLOPS] = flops
        if library_routine(instr) == "gemm" or shape.element_type == "tuple":
            size = float(an.size(real_out))
            p[BYTES] = p[BYTES] - p[OUT] + size
            p[OUT] = size
        return
    if instr.has_attribute("backend_config"):
        hint = _cost_estimate(instr.attribute("backend_config", None))
        if hint:
            R.custom_call_rule(an, instr, p)
            p[UNPRICED] = tuple(u for u in p[UNPRICED] if not u.startswith("custom-call"))
            if "flops" in hint:
                p[FLOPS] = hint["flops"]
            if "bytes_accessed" in hint:
                p[BYTES] = hint["bytes_accessed"]
            return
    R.custom_call_rule(an, instr, p)
