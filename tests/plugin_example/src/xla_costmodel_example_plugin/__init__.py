"""An example cost-model plugin for xla_costmodel (entry point `example-streaming`).

Uses only xla_costmodel's public API: the model prices a kernel from the
shapes of its operands and result, as a roofline over what it streams:

    compute_s = output elements / peak FP32 rate
    memory_s  = (operand bytes + output bytes) / DRAM bandwidth
    launch_s  = the device's kernel launch overhead
    time_s    = max(compute_s, memory_s) + launch_s      (`time_from_parts`)

Fusion decisions come from `FusionByMaterializing` (the fused kernel is
built and priced like any other).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xla_costmodel.models import FusionByMaterializing, KernelEstimate

__all__ = ["StreamingModel"]

# Instructions that run no code of their own.
_FREE = frozenset({"parameter", "constant", "bitcast", "tuple", "get-tuple-element", "after-all", "add-dependency"})


@dataclass(frozen=True, slots=True)
class StreamingModel(FusionByMaterializing):
    """time = max(output elements / FP32 peak, bytes streamed / bandwidth) + launch.

    **Arguments (constants):** `flops_per_element`: flops charged per output
    element; `include_launch`: add the device's launch overhead.
    """

    name: ClassVar[str] = "example-streaming"

    flops_per_element: float = 1.0
    include_launch: bool = True

    @staticmethod
    def time_from_parts(compute_s: float, memory_s: float, launch_s: float) -> float:
        """The combination rule: the slower of compute and memory, plus the launch."""
        return max(compute_s, memory_s) + launch_s

    def estimate(self, kernel, device) -> KernelEstimate:
        if kernel.opcode in _FREE:
            return KernelEstimate.free(f"{kernel.opcode} runs no code")
        nbytes = float(sum(o.shape.byte_size for o in kernel.operands) + kernel.shape.byte_size)
        elements = float(sum(s.num_elements for _, s in kernel.shape.leaves()))
        compute = elements * self.flops_per_element / device.peak_fp32_flops_per_s
        memory = nbytes / device.memory_bandwidth_bytes_per_s
        launch = device.kernel_launch_overhead_s if self.include_launch else 0.0
        bound = "launch" if launch > max(compute, memory) else ("compute" if compute >= memory else "memory")
        return KernelEstimate(
            compute_s=compute,
            memory_s=memory,
            launch_s=launch,
            time_s=self.time_from_parts(compute, memory, launch),
            bound=bound,
            details={"flops": elements * self.flops_per_element, "bytes_accessed": nbytes},
        )
