"""Priority fusion into and out of generic Triton fusions, as XLA:GPU does it.

XLA's `SoftmaxRewriterTriton` runs before priority fusion and leaves generic
Triton fusions (`kCustom`, `fusion_backend_config.kind = "__triton"`, with a
`block_level_fusion_config`). With `xla_gpu_enable_triton_softmax_priority_fusion`
(on by default) priority fusion grows them (`priority_fusion.cc`,
`PriorityFusionQueue::CanFuseTriton`): a pair where either side is one

- is legal when the other side is fusible (`IsFusible`, under which a generic
  Triton fusion is fusible too: a Triton producer's consumer, a Triton
  consumer's producer) and Triton can emit it
  (`IsTritonSupported`: the instruction, or every instruction of a fusion's
  body, by `IsTritonSupportedInstruction`), and when the fused pair has a
  tiling (`TryFindBestTilingForFusion`: symbolic tile analysis, then the tiled
  model's fastest tiling);
- is priced, fused, at that tiling's time (the tiled model: `models._tiled`),
  and each side alone as usual (a Triton fusion at the tiling it has);
- fuses into a Triton fusion (`kCustom`) that carries that tiling as its
  block-level parameters.

No other rule of `CanFuse` applies to such a pair (not even the root rule).
"""

from __future__ import annotations

import json

from ..analysis.library import fusion_backend_kind
from ..analysis.opcodes import IS_ELEMENTWISE
from ..analysis.tiling import TilingError
from ..hlo import HloInstruction
from ..fusion_engine import discard_fusion, hypothetical_fusion
from ._legality import is_fusible
from ._rejection import Rejection

__all__ = ["TritonFusionRules", "is_generic_triton", "triton_backend_config", "triton_fusible", "triton_support"]

# Data types Triton emits (`IsTritonSupportedDataType`, CUDA).
_TYPES = frozenset({"pred", "s4", "s8", "s16", "s32", "s64", "f16", "f32", "f64", "bf16", "f8e5m2", "f8e4m3fn"})
_FLOAT = frozenset({"f16", "bf16", "f32", "f64", "f8e5m2", "f8e4m3fn"})
_INTEGRAL = frozenset({"s4", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"})
# `IsTritonUnsupportedOpcode`
_UNSUPPORTED_OPCODES = frozenset({
    "dynamic-reshape", "dynamic-update-slice", "gather", "ragged-dot", "reduce-window", "scatter",
    "select-and-scatter", "set-dimension-size",
})
_UNARY_FLOAT = frozenset({
    "cosine", "floor", "log-plus-one", "sqrt", "tanh", "acosh", "exponential", "exponential-minus-one", "cbrt",
    "erf", "log", "tan", "ceil", "rsqrt", "sine",
})


def is_generic_triton(instr: HloInstruction) -> bool:
    """A generic Triton fusion (`IsGenericTritonFusion`): `kCustom` with backend kind `__triton`."""
    return (instr.opcode == "fusion" and instr.fusion_kind == "kCustom"
            and fusion_backend_kind(instr) == "__triton")


def triton_fusible(instr: HloInstruction) -> bool:
    """`IsFusible` with generic Triton fusions simulated: those are fusible too (other kCustom
    fusions, GEMMs among them, are not)."""
    return is_fusible(instr) or is_generic_triton(instr)


def _elementwise_supported(op: str, t: str) -> bool:
    """`IsTritonSupportedElementwise(op, t)`: unary, binary and ternary sets by element type."""
    if t == "pred":
        unary = {"not", "copy"}
    elif t == "s4":
        unary = set()
    elif t == "u16":
        unary = {"abs"}
    else:
        unary = {"abs", "copy"}
        if t not in ("f8e5m2", "f8e4m3fn"):
            unary.add("negate")
        if t in _INTEGRAL:
            unary.add("not")
        if t in ("bf16", "f16", "f32", "f64"):
            unary |= _UNARY_FLOAT
        if t in _FLOAT:
            unary.add("reduce-precision")
    if op in unary:
        return True
    if t not in ("s4", "u16", "f8e5m2", "f8e4m3fn"):
        binary = {"add", "compare", "maximum", "minimum", "multiply"}
        if t == "pred":
            binary |= {"and", "or", "xor"}
        else:
            binary.add("subtract")
            if t in _INTEGRAL:
                binary |= {"divide", "and", "or", "xor"}
            if t in ("f32", "f64"):
                binary |= {"atan2", "divide", "remainder", "power"}
            if t in ("bf16", "f16"):
                # divide too: XLA:GPU 0.10.2 makes a bf16 softmax's `divide` root a Triton fusion
                # (SoftmaxRewriterTriton checks the root with IsTritonSupportedInstruction)
                binary |= {"atan2", "divide", "power", "remainder"}
        if op in binary:
            return True
    if t in ("s4", "u16"):
        return False
    return op in (("select",) if t in ("f8e5m2", "f8e4m3fn") else ("select", "clamp"))


def _instruction_support(instr: HloInstruction) -> str:
    """`IsTritonSupportedInstruction`: "" when Triton emits `instr`, else XLA's reason."""
    op = instr.opcode
    if op in _UNSUPPORTED_OPCODES:
        return f"Unsupported opcode {op}"
    t = instr.shape.element_type
    if op == "convert":
        src = instr.operands[0].shape.element_type
        if t == "s4" or (src == "s4" and t not in ("s8", "f16", "bf16", "f32", "f64")):
            return f"Unsupported conversion in Triton: {src} to {t}"
        f8 = {"f8e5m2", "f8e4m3fn"}
        if src != t and (src in f8 or t in f8) and not (src in f8 and t in f8) \
                and not ({src, t} & {"f16", "bf16", "f32"}):
            return f"Unsupported conversion in Triton: {src} to {t}"
        return "" if src in _TYPES and t in _TYPES else f"Unsupported conversion in Triton: {src} to {t}"
    if t not in _TYPES:
        return "Unsupported output data type."
    if any(o.shape.element_type not in _TYPES for o in instr.operands):
        return "Unsupported input data type."
    if op == "concatenate":
        return "Only concatenates in nested GEMM fusions are supported."
    if op == "pad":
        cfg = str(instr.raw_attributes.get("padding", ""))
        no_op = True
        for dim in cfg.split("x"):
            parts = dim.split("_")
            low = int(parts[0]) if parts and parts[0].lstrip("-").isdigit() else 0
            high = int(parts[1]) if len(parts) > 1 and parts[1].lstrip("-").isdigit() else 0
            interior = int(parts[2]) if len(parts) > 2 and parts[2].lstrip("-").isdigit() else 0
            if low != 0 or interior != 0:
                return "Only high padding is supported."
            no_op = no_op and high == 0
        return "No-op pad ops are not allowed." if no_op else ""
    if op == "constant":
        return "" if instr.shape.num_elements <= 1 else "Only scalar constants are supported in Triton."
    if op == "iota":
        return "F8E4M3FN, F8E5M2 and S4 are not supported for iota." if t in ("f8e4m3fn", "f8e5m2", "s4") else ""
    if op == "reduce":
        if t in ("f8e4m3fn", "f8e5m2"):
            return "F8E4M3FN and F8E5M2 are not supported for reductions."
        body = instr.called_computations[0] if instr.called_computations else None
        if body is not None and any(_instruction_support(i) for i in body.instructions):
            return "Unsupported reduction computation by Triton."
        # Dimensions of size 1 do not count: XLA's ReductionDegenerateDimRemover has removed them before
        # the Triton passes (a lowered f32[1,2,4,64,64] reduced over {0,4} is a row reduction there).
        src = instr.operands[0].shape.dims if instr.operands and instr.operands[0].shape.is_array else ()
        dims = [int(d) for d in instr.attribute("dimensions", ()) if not (int(d) < len(src) and src[int(d)] == 1)]
        if len(dims) <= 1 and len(instr.operands) == 2:
            return ""
        return "Reduction is not a row-reduction of a single operand."
    if op == "parameter":
        return ""
    if op == "dynamic-slice":
        return "dynamic slice is supported but not enabled yet"
    if op == "bitcast":
        if instr.operands[0].shape.num_elements != instr.shape.num_elements:
            return "only bitcasts with the same number of elements are supported"
        return "S4 is not supported." if t == "s4" else ""
    if op in ("broadcast", "reshape", "slice", "transpose"):
        return "S4 is not supported." if t == "s4" else ""
    if op == "dot":
        return "Dot operation is only supported in nested GEMM fusions."
    if op in IS_ELEMENTWISE:
        last = instr.operands[-1].shape.element_type if instr.operands else t
        return "" if _elementwise_supported(op, last) else "Unsupported elementwise operation."
    return f"Unsupported instruction opcode {op}"


def triton_support(instr: HloInstruction) -> Rejection | None:
    """Priority fusion's `IsTritonSupported`: the instruction, or each instruction of a fusion's body."""
    if instr.opcode == "fusion":
        for i in instr.fused_computation.instructions:
            why = _instruction_support(i)
            if why:
                return Rejection("triton-unsupported", f"'{instr.name}': {why}")
        return None
    why = _instruction_support(instr)
    return Rejection("triton-unsupported", f"'{instr.name}': {why}") if why else None


def triton_backend_config(tiles: tuple, num_warps: int) -> str:
    """The backend config XLA writes on a generic Triton fusion for a tiling (`GetTritonGpuBackendConfig`)."""
    return json.dumps({"fusion_backend_config": {"kind": "__triton", "block_level_fusion_config": {
        "num_warps": str(num_warps), "output_tiles": [{"sizes": [str(s) for s in t]} for t in tiles],
        "num_ctas": 1, "num_stages": 1}}}, separators=(",", ":"))


class TritonFusionRules:
    """`CanFuseTriton` and the tiling it finds, per pair of instruction versions.

    **Arguments:** `device`; `version(instr)`: the pass's instruction versions (a pair's verdict
    and tiling are kept until either side changes).
    """

    __slots__ = ("device", "_version", "_tilings")

    def __init__(self, device, version):
        self.device = device
        self._version = version
        self._tilings: dict = {}

    @staticmethod
    def involves(producer: HloInstruction, consumer: HloInstruction) -> bool:
        """Whether the pair goes through `CanFuseTriton` (either side a generic Triton fusion)."""
        return is_generic_triton(producer) or is_generic_triton(consumer)

    def _tiling(self, producer: HloInstruction, consumer: HloInstruction):
        key = (producer, consumer)
        v = (self._version(producer), self._version(consumer), id(producer), id(consumer))
        hit = self._tilings.get(key)
        if hit is not None and hit[0] == v:
            return hit[1]
        from ..models.pricing import best_tilings

        fused = hypothetical_fusion(producer, consumer, "kCustom")
        try:
            best = best_tilings(fused, self.device, top_k=1)[0]
            result = (best.tiles, best.num_warps)
        except TilingError as e:
            result = Rejection("triton-not-tilable", f"'{producer.name}' into '{consumer.name}': {e}")
        finally:
            discard_fusion(fused)
        self._tilings[key] = (v, result)
        return result

    def can_fuse(self, producer: HloInstruction, consumer: HloInstruction) -> Rejection | None:
        """`CanFuseTriton(producer, consumer)` for a pair that `involves` a generic Triton fusion."""
        if is_generic_triton(producer):
            if not triton_fusible(consumer):
                return Rejection("consumer-not-fusible", f"{consumer.opcode} '{consumer.name}'")
            r = triton_support(consumer)
        else:
            if not triton_fusible(producer):
                return Rejection("producer-not-fusible", f"{producer.opcode} '{producer.name}'")
            r = triton_support(producer)
        if r is not None:
            return r
        t = self._tiling(producer, consumer)
        return t if isinstance(t, Rejection) else None

    def tiling(self, producer: HloInstruction, consumer: HloInstruction) -> tuple[tuple, int]:
        """`(output tiles, warps)` of the fused pair's best tiling (the pair must pass `can_fuse`)."""
        t = self._tiling(producer, consumer)
        if isinstance(t, Rejection):
            raise ValueError(f"no Triton tiling for '{producer.name}' into '{consumer.name}': {t.detail}")
        return t

    def fused(self, producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
        """The fused pair, detached (`hypothetical_fusion`), as the Triton fusion it would be: `kCustom`
        with its best tiling as block-level parameters. Discard it (`discard_fusion`) once priced."""
        tiles, warps = self.tiling(producer, consumer)
        fused = hypothetical_fusion(producer, consumer, "kCustom")
        fused.set_attribute("backend_config", triton_backend_config(tiles, warps))
        return fused
