"""Latencies of one NVIDIA SM's operations, in clock cycles: the one home of the figures the structural
kernel models (`models._sort`'s bitonic and CUB kernels, `models._library_calls`' cuFFT and TopK kernels)
build their latency paths from.

They are pointer-chase and dependent-issue microbenchmark figures published for recent NVIDIA GPUs
(Volta to Hopper), rounded, and not fitted to any capture: a shared-memory access about 30 cycles, a
dependent ALU operation about 4, a block barrier about 20, an L2 hit about 260 (Hopper and Ada probes
report 220-340 depending on the SM), an HBM access about 600.
"""

from __future__ import annotations

__all__ = ["ALU_LATENCY_CYCLES", "BARRIER_CYCLES", "HBM_LATENCY_CYCLES", "L2_LATENCY_CYCLES", "SMEM_LATENCY_CYCLES"]

SMEM_LATENCY_CYCLES = 30
ALU_LATENCY_CYCLES = 4
BARRIER_CYCLES = 20
L2_LATENCY_CYCLES = 260
HBM_LATENCY_CYCLES = 600
