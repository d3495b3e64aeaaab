"""`kernel_cost`: the costs of one kernel, on its own, including a fusion that belongs to no module.

`cost_analysis` and `gpu_cost_analysis` cost whole modules. A cost model, or a
fusion pass asking "what if these two were fused?", needs the same figures for
one kernel: a fusion, or an instruction run as its own kernel, possibly a
detached fusion built by `hlo.hypothetical_fusion`. `kernel_cost` runs the same
interpreter and the same rules on that one instruction (its fused computation
and the computations it calls included) and returns a `KernelCost`.

Variants:

- `"gpu"`: XLA's `GpuHloCostAnalysis` with `count_multiple_input_accesses`
  (what XLA's GPU performance model reads): elementwise ops at the device
  profile's cycles per element, fused instructions weighted by utilization.
  Per kernel, the figures are `gpu_cost_analysis`'s.
- `"xla"`: XLA's `HloCostAnalysis` as jaxlib runs it (`cost_analysis`).
- `"base"`: `HloCostAnalysis`'s per-instruction counts (one flop or one
  transcendental per element) with the GPU analysis's accounting of fusions
  and repeated reads (`count_multiple_input_accesses`, utilization propagated
  from the root, flops *and* transcendentals counted once per unit of
  utilization): the plain operation count of what a GPU kernel executes,
  recomputation included, which is what a roofline wants. A `kCustom`
  fusion (Triton, cuDNN, YNNPACK, oneDNN: tiled or library emitters) does
  not recompute: each fused instruction counts once, each operand is read
  once (`computes_each_instruction_once`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._cost import Analysis, InstructionCost
from ._gpu import _GpuAnalysis, _resolve_profile, declares_exact_growth
from ._rules import BYTES, FLOPS, OPB, OPU, OUT, TRANS, UNPRICED, UTIL

__all__ = ["KernelCost", "computes_each_instruction_once", "kernel_cost"]

VARIANTS = ("gpu", "xla", "base")


def computes_each_instruction_once(fusion) -> bool:
    """Whether a fusion's emitter computes each fused instruction once per output element of it, with no
    recomputation through broadcasts or into dots and reduces: a `kCustom` fusion, which a tiled emitter
    (Triton, cuDNN on XLA:GPU) or a library (YNNPACK, oneDNN on XLA:CPU) runs. Loop, input and output
    fusions go through XLA's elemental emitters, which recompute a producer for every element of each
    consumer that reads it."""
    return fusion.opcode == "fusion" and fusion.fusion_kind == "kCustom"


class _BaseKernelAnalysis(_GpuAnalysis):
    """`HloCostAnalysis` rules priced through fusions the way `GpuHloCostAnalysis` does (variant `"base"`)."""

    variant = "xla"
    grows_exactly = True  # with `grown_fusion` below

    def grown_fusion(self, p: list, before: list, clones: list) -> None:
        # Transcendentals weighted by utilization, as `fusion_utilizations` sums them: the old
        # instructions keep theirs through a growth (`_fusion_growth`), parameters have none.
        records = self._records
        trans = before[TRANS]
        for h in clones:
            r = records[h]
            if r[TRANS]:
                trans += r[UTIL] * r[TRANS]
        p[TRANS] = trans

    def fusion_utilizations(self, instr, comp, p: list) -> tuple[list, list]:
        if computes_each_instruction_once(instr):
            # A tiled or library emitter: every fused instruction computed once, each operand read once.
            return Analysis.fusion_utilizations(self, instr, comp, p)
        params, constants = super().fusion_utilizations(instr, comp, p)
        records = self._records
        trans = 0.0
        for h in comp.instructions:
            r = records[h]
            if r[TRANS]:
                trans += r[UTIL] * r[TRANS]
        p[TRANS] = trans
        return params, constants


@dataclass(frozen=True, slots=True, eq=False)
class KernelCost:
    """The costs of one kernel (the result of `kernel_cost`).

    **Attributes:**

    - `kernel`, `variant`.
    - `flops`, `transcendentals`: for a fusion, summed over the fused
      instructions (weighted by utilization in the `"gpu"` and `"base"`
      variants).
    - `bytes_accessed`: XLA's figure (reads, writes, large fused constants).
    - `bytes_written`: output bytes (only the update of an in-place
      dynamic-update-slice root).
    - `operand_bytes`, `operand_utilization`: per operand of the kernel, bytes
      read (re-reads included where the variant counts them) and how many
      times each element is read; 0 for an operand no fused parameter reads.
    - `unpriced`: labels of instructions whose cost is unknown.
    """

    kernel: Any
    variant: str
    flops: float
    transcendentals: float
    bytes_accessed: float
    bytes_written: float
    operand_bytes: tuple
    operand_utilization: tuple
    unpriced: tuple = ()
    _an: Any = field(default=None, repr=False)

    @property
    def bytes_read(self) -> float:
        return float(sum(self.operand_bytes))

    @property
    def priced(self) -> bool:
        return not self.unpriced

    # -- the instructions behind the figures ---------------------------------
    def instruction_counts(self, instr) -> tuple[float, float, float]:
        """`(flops, transcendentals, utilization)` of an instruction the analysis costed: the
        kernel, a fused instruction, or one of a called computation (utilization is 0 outside fusions)."""
        r = self._an.record(instr)
        return r[FLOPS], r[TRANS], r[UTIL]

    def working_instructions(self, instrs) -> list:
        """`(instr, flops, transcendentals, utilization)` of those of `instrs` with flops or
        transcendentals, in order (one pass over the records, for kernels of thousands of instructions)."""
        records = self._an._records
        out = []
        for h in instrs:
            r = records[h]
            f = r[FLOPS]
            t = r[TRANS]
            if f or t:
                out.append((h, f, t, r[UTIL]))
        return out

    def instruction_cost(self, instr) -> InstructionCost:
        """Every property of an instruction the analysis costed, as an `InstructionCost`."""
        return InstructionCost._from_record(self._an.record(instr))

    @property
    def roots(self) -> Mapping:
        """Fused instruction -> its "elementwise use roots" (variants `"gpu"` and `"base"`; else empty;
        a read-only mapping where the kernel's body state is kept for its growths)."""
        return getattr(self._an, "ew_roots", {})

    @property
    def root_util(self) -> Mapping:
        """Elementwise use root -> its utilization (variants `"gpu"` and `"base"`; else empty; read-only
        like `roots`)."""
        return getattr(self._an, "root_util", {})

    def common_elementwise_utilization(self, a, b) -> float:
        """XLA's `CommonElementwiseUtilization(a, b)` for two instructions of this fusion (0 if unknown)."""
        roots = self.roots
        ra = roots.get(a, ())
        rb = roots.get(b, ())
        root_util = self.root_util
        return float(sum(root_util[r] for r in ra if r in rb))

    def parameter_elementwise_from_root(self, index: int) -> bool:
        """XLA's `FusionUsesParameterElementwiseFromRoot`: fused parameter `index` reaches the root
        only through elementwise, tuple and get-tuple-element ops."""
        comp = self.kernel.fused_computation if self.kernel.opcode == "fusion" else None
        if comp is None:
            return False
        params = comp.parameters
        if index >= len(params):
            return False
        return self.common_elementwise_utilization(params[index], comp.root) == 1.0


_PROFILES: dict[int, tuple[Any, dict]] = {}


def _profile(device_profile) -> dict:
    """The op profile for `device_profile` (anything `gpu_cost_analysis` takes), resolved once per object."""
    k = id(device_profile)
    hit = _PROFILES.get(k)
    if hit is not None and hit[0] is device_profile:
        return hit[1]
    table = _resolve_profile(device_profile)[0]
    if len(_PROFILES) > 64:
        _PROFILES.clear()
    _PROFILES[k] = (device_profile, table)  # the reference keeps the id from being reused
    return table


# Shape sizes are pure functions of the (immutable) shape: shared by every `kernel_cost` call,
# keyed by id like an analysis's own caches, the shapes kept alive so that ids are not reused.
_SIZES: dict[int, int] = {}
_OUTS: dict[int, tuple[int, int]] = {}
_KEEP: list = []
_MAX_SHARED = 200_000


def _share_shape_caches(an) -> None:
    if len(_KEEP) > _MAX_SHARED:
        _SIZES.clear()
        _OUTS.clear()
        _KEEP.clear()
    an._size_cache = _SIZES
    an._out_cache = _OUTS
    an._keep = _KEEP


# The base variant prices no op by profiled cycles; one object, so that kept body states match it.
_NO_PROFILE: dict = {}


def _parameter_count(an, fusion, comp) -> int:
    """How many parameters `comp` (the body of `fusion`, just analysed by `an`) has: the GPU walk
    listed them (a body of thousands of instructions is not scanned again for them)."""
    if declares_exact_growth(an) and an.fused_leaves is not None and fusion.fusion_kind != "kCustom":
        return len(an.fused_leaves[0])
    return len(comp.parameters)


def kernel_cost(instr, variant: str = "gpu", device_profile=None, *,
                overrides: Mapping[str, Any] | None = None) -> KernelCost:
    """The costs of one kernel: a fusion (attached to a module or not) or a lone instruction.

    **Arguments:**

    - `instr`: the kernel; a fusion built by `hlo.hypothetical_fusion` works.
    - `variant`: `"gpu"` (`GpuHloCostAnalysis`), `"xla"` (`HloCostAnalysis`)
      or `"base"` (`HloCostAnalysis` counts, GPU fusion accounting); see the
      module docstring.
    - `device_profile`: for `"gpu"`, where the clock cycles of elementwise ops
      come from, as for `gpu_cost_analysis` (a `DeviceSpec`, a device name, a
      `{(opcode, dtype): cycles}` mapping; None: XLA's default). Ignored by
      the other variants.
    - `overrides`: `{opcode: rule}` replacing the variant's rules for this call
      (rules as registered with `cost_rule`); for counts XLA does not know,
      such as a library custom call's flops.

    **Returns:** a `KernelCost`. Nothing warns: unknown costs are in `unpriced`.
    """
    if variant == "gpu":
        an = _GpuAnalysis(None, _profile(device_profile), count_multiple_input_accesses=True, warn=False,
                          overrides=overrides)
        an.track_growth = True
    elif variant == "base":
        an = _BaseKernelAnalysis(None, _NO_PROFILE, count_multiple_input_accesses=True, warn=False,
                                 overrides=overrides)
        an.track_growth = True
    elif variant == "xla":
        an = Analysis(None, warn=False, overrides=overrides)
    else:
        raise ValueError(f"unknown kernel_cost variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    _share_shape_caches(an)
    p = an.visit(instr)
    n = len(instr.operands)
    opb = p[OPB]
    opu = p[OPU]
    comp = instr.fused_computation if instr.opcode == "fusion" else None
    if comp is not None and (len(opb) > n or _parameter_count(an, instr, comp) < n):
        # A fusion inherits its body's per-index sums where no parameter overwrites them: not reads.
        numbers = {h.parameter_number for h in comp.parameters}
        opb = [opb[i] if i in numbers and i < len(opb) else 0.0 for i in range(n)]
        opu = [opu[i] if i in numbers and i < len(opu) else 0.0 for i in range(n)]
    elif len(opb) != n:
        opb = (list(opb) + [0.0] * n)[:n]
        opu = (list(opu) + [0.0] * n)[:n]
    return KernelCost(
        instr, variant, float(p[FLOPS]), float(p[TRANS]), float(p[BYTES]), float(p[OUT]),
        tuple(map(float, opb)), tuple(map(float, opu)), tuple(p[UNPRICED]), an,
    )
