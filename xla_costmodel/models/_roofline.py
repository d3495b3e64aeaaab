"""`roofline`: time = max(flops / peak, bytes / bandwidth) + launch.

- flops are `HloCostAnalysis` flops (one per element of an elementwise op,
  transcendentals counted `transcendental_flops` each, 2 per multiply-add of a
  dot or convolution), utilization-weighted inside fusions;
- each flop runs at the peak of its kind and element type: dots and
  convolutions on the matrix units (`DeviceSpec.matmul_flops_per_s(dtype)`,
  the vector peak where the device has no matrix unit for the type), the rest
  on the vector units at `peak_fp32_flops_per_s` scaled for the type (f64:
  half on data-center GPUs, 1/64 on consumer Ampere; on a measured host the
  ratio of its measured f64 to f32 matmul rates);
- bytes are the DRAM traffic: each operand's unique bytes read (re-reads are
  assumed to hit a cache) plus the bytes written;
- the launch overhead is the device's (`kernel_launch_overhead_s`).

A collective gets a bandwidth and latency bound (`estimate_collective`):
time = max(reduction flops / vector peak, its bytes in and out / memory
bandwidth, the bytes each device sends under the bandwidth-optimal algorithm
(`models._collectives.wire_bytes`) / the link bandwidth) + a latency. On a
GPU the link is NVLink at its data-sheet rate (25 GB/s per link and
direction up to Hopper, 50 on Blackwell, × the device's links; PCIe where it
has none) and the latency NCCL's 5 µs launch; on the host the devices are threads of one process, so a transfer
is a copy through memory (half the memory bandwidth: read and write) and the
latency the host's launch overhead. The network part is in `memory_s`
(bound "network" when it dominates).

Works for GPU presets and for the measured `host` CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..analysis.opcodes import COLLECTIVE_OPCODES, CONTROL_FLOW_OPCODES, is_free
from ._base import FusionByMaterializing, KernelEstimate, dominant_bound, register_model, warn_unpriced
from ._kernel_costs import CostContext, kernel_costs, shape_size_cached
from ._library_calls import library_call_estimate
from ._xla_cpu_convolution import grouped_convolution_seconds, loop_convolution_seconds

_INT_PREFIXES = ("s", "u", "pred")


@register_model("roofline")
@dataclass(frozen=True, slots=True)
class RooflineModel(FusionByMaterializing):
    """The roofline: a kernel is as slow as its slower resource, plus its launch.

    **Arguments (constants):**

    - `transcendental_flops`: flops charged per transcendental (exp, log, ...).
    - `matrix_units`: run dot and convolution flops at the matrix-unit peak.
    - `fp64_vector_ratio`: f64 vector throughput relative to f32, per XLA
      op-profile name (`"sm_86"`) with a `"default"`; a measured host uses its
      own matmul rates instead.
    - `include_launch`: add the device's per-kernel launch overhead.
    """

    name: ClassVar[str] = "roofline"
    # A kernel's price depends on its content only (not names, metadata or neighbours): see CostModel.
    prices_by_content: ClassVar[bool] = True
    # `estimate` keeps nothing of a kernel; its body analyses follow growths (see PricesTrialFusions).
    prices_trial_fusions: ClassVar[bool] = True

    transcendental_flops: float = 1.0
    matrix_units: bool = True
    fp64_vector_ratio: tuple[tuple[str, float], ...] = (
        ("sm_86", 1 / 64),  # GA10x: 2 FP64 units per SM for 128 FP32
        ("sm_75", 1 / 32),
        ("default", 0.5),  # V100, A100, H100, H200
    )
    include_launch: bool = True

    def vector_flops_per_s(self, device, dtype: str) -> float:
        """Peak non-matrix flops per second for `dtype` on `device`."""
        base = device.peak_fp32_flops_per_s
        dtype = (dtype or "f32").lower()
        if dtype in ("f64", "c128"):
            if device.kind == "cpu":
                peaks = device.peak_matmul_flops_per_s
                if "f64" in peaks and "f32" in peaks and peaks["f32"] > 0:
                    return base * min(peaks["f64"] / peaks["f32"], 1.0)
            ratios = dict(self.fp64_vector_ratio)
            return base * ratios.get(device.op_profile_name or "", ratios.get("default", 0.5))
        return base

    def estimate(self, kernel, device) -> KernelEstimate:
        """Price one kernel on any device (GPU preset or the measured host).

        **Returns:** a `KernelEstimate`; `details` has the flops by kind, the
        DRAM bytes and the arithmetic intensity.
        """
        op = kernel.opcode
        if is_free(kernel):
            return KernelEstimate.free(f"{op} runs no code")
        if op in CONTROL_FLOW_OPCODES:
            why = f"'{op}' is control flow, not a kernel: price the computations it runs"
            warn_unpriced(self.name, kernel, why)
            return KernelEstimate.unpriced(why)
        if op in COLLECTIVE_OPCODES:
            return self.estimate_collective(kernel, device)
        if op == "custom-call" and (library := library_call_estimate(kernel, device)) is not None:
            return library  # a cuSolver / cuDNN / CUB routine: its serial steps are no roofline's
        costs = kernel_costs(kernel, CostContext(device, gpu=False))
        if costs.unpriced:
            why = "no cost rule for " + ", ".join(costs.unpriced)
            warn_unpriced(self.name, kernel, why)
            return KernelEstimate.unpriced(why, {"unpriced": costs.unpriced})

        compute = 0.0
        vector_flops = 0.0
        for dtype, amount in costs.flops_by_dtype.items():
            compute += amount / self.vector_flops_per_s(device, dtype)
            vector_flops += amount
        # `flops_by_dtype` counts transcendentals as one op each; charge the rest.
        extra = costs.transcendentals * (self.transcendental_flops - 1.0)
        if extra:
            compute += extra / device.peak_fp32_flops_per_s
        mm = costs.matmul_flops
        if mm:
            rate = device.matmul_flops_per_s(costs.matmul_dtype) if self.matrix_units else \
                self.vector_flops_per_s(device, costs.matmul_dtype)
            compute += mm / rate
        grouped = None
        if self.matrix_units:
            grouped = grouped_convolution_seconds(kernel, device) or loop_convolution_seconds(kernel, device)
        if grouped is not None:
            # YNNPACK and Eigen run a convolution with feature groups at a measured per-element rate, and
            # XLA's own loop runs the convolutions Eigen does not take one multiply-add at a time: not at
            # the GEMM rate (`_xla_cpu_convolution`).
            grouped_s, grouped_flops = grouped
            compute += grouped_s - (min(grouped_flops, mm) / rate if mm else 0.0)
        read = 0.0
        for operand, total in zip(kernel.operands, costs.operand_bytes):
            read += min(float(shape_size_cached(operand.shape)), float(total))
        written = float(costs.bytes_written)
        nbytes = read + written
        memory = nbytes / device.memory_bandwidth_bytes_per_s
        launch = device.kernel_launch_overhead_s if self.include_launch else 0.0
        flops = (costs.flops - costs.matmul_flops) + costs.transcendentals * self.transcendental_flops + mm
        return KernelEstimate(
            compute_s=compute,
            memory_s=memory,
            launch_s=launch,
            time_s=max(compute, memory) + launch,
            bound=dominant_bound(compute, memory, launch),
            details={
                "flops": flops,
                "matmul_flops": mm,
                "transcendentals": costs.transcendentals,
                "bytes_read": read,
                "bytes_written": written,
                "bytes_accessed": nbytes,
                "intensity": flops / nbytes if nbytes else math.inf,
                **({"runtime_conv_s": grouped[0]} if grouped is not None else {}),
            },
        )

    def estimate_collective(self, kernel, device) -> KernelEstimate:
        """The bandwidth and latency bound of a collective (module docstring)."""
        from ._collectives import NCCL_LAUNCH_S, collective_or_estimate, nvlink_bytes_per_s, wire_bytes

        c = collective_or_estimate(self.name, kernel, device, stacklevel=3)
        if isinstance(c, KernelEstimate):
            return c
        n = c.devices
        if n is None:
            why = "the group size is not known (replica groups of different sizes)"
            warn_unpriced(self.name, kernel, why, stacklevel=3)
            return KernelEstimate.unpriced(why)
        sent = wire_bytes(c, n)
        if device.kind == "gpu":
            link = (nvlink_bytes_per_s(device) or device.pcie_bandwidth_bytes_per_s
                    or device.memory_bandwidth_bytes_per_s)
            latency = NCCL_LAUNCH_S if self.include_launch else 0.0
        else:
            link = device.memory_bandwidth_bytes_per_s / 2
            latency = device.kernel_launch_overhead_s if self.include_launch else 0.0
        network = sent / link
        moved = float(sum(shape_size_cached(o.shape) for o in kernel.operands) + shape_size_cached(kernel.shape))
        hbm = moved / device.memory_bandwidth_bytes_per_s
        elements = float(c.bytes_transferred) / max(first_bytes(c.element_type), 1)
        flops = elements * (n - 1) / n if c.kind in ("all-reduce", "reduce-scatter") else 0.0
        compute = flops / self.vector_flops_per_s(device, c.element_type)
        memory = max(network, hbm)
        parts = {"compute": compute, "network": network, "memory": hbm}
        bound = max(parts, key=lambda k: parts[k])
        return KernelEstimate(
            compute_s=compute, memory_s=memory, launch_s=latency, time_s=max(compute, memory) + latency,
            bound=bound if max(parts.values()) >= latency else "launch",
            details={"collective": c.kind, "devices": n, "bytes_transferred": c.bytes_transferred,
                     "bytes_sent": sent, "link_bytes_per_s": link, "network_s": network, "hbm_s": hbm,
                     "flops": flops, "bytes_accessed": moved,
                     "intensity": flops / moved if moved else math.inf},
        )


def first_bytes(dtype: str) -> int:
    """Bytes of one element of `dtype` (8-bit floats 1)."""
    from ._gemm_table import _bytes

    return _bytes(dtype)
