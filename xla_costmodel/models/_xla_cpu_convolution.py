"""How XLA:CPU's runtime runs a convolution with feature groups, and what that costs on the measured host.

XLA:CPU hands a 2-D NHWC/HWIO convolution of f32, f64 or s8 (more than 16
features on either side) to YNNPACK as a `__ynn_fusion` (`ynn_support.cc`,
`IsConvolutionOpSupportedByYnn`; it has no limit on `feature_group_count`).
YNNPACK (`ynn_emitter.cc`, `DefineConvolutionOp`) pads the input, makes a
stencil copy of it (`[n, h, w, ci] -> [n, h, w, kh, kw, ci]`, im2col; with
groups `[n, h, w, g, 1, kh, kw, ci/g]`) and runs one dot over it. Without
groups the dot has `n = co` columns and runs near the GEMM rate. With `g`
groups it is a batch of `g` dots of `co/g` columns over `kh·kw·ci/g`
elements, which its GEMM kernels do not fill: a depthwise convolution (one
column per group) runs at one multiply-add per stencil element at a scalar
rate, whatever its size. Measured on a 2-core AMD EPYC (Zen 4), NHWC
`8x32x32xC`, 3x3 window (`scripts` of the issue; `docs/host_convolutions.md`):

| C | groups | flops | time | time / stencil element |
|---|---|---|---|---|
| 64 | 1 | 604 M | 3.1 ms | 0.66 ns (GEMM-bound, 193 GFLOP/s) |
| 64 | 4 | 151 M | 5.0 ms | 1.05 ns |
| 64 | 64 | 9.4 M | 10.9 ms | 2.31 ns |
| 128 | 128 | 19 M | 20.9 ms | 2.22 ns |
| 256 | 256 | 38 M | 41.7 ms | 2.21 ns |

So a grouped convolution's time follows its stencil elements
(`batch · output positions · window size · input features`), not its
flops. The host measurement times a depthwise convolution
(`measure_host`, `ynn_grouped_conv_elements_per_s`); a YNNPACK convolution with
groups is priced at that rate per stencil element instead of at the GEMM
rate per flop. For few wide groups (4 groups of 16 above) this is up to 2x
high: an upper estimate, where the GEMM rate was 20-100x low.

A convolution YNNPACK does not take (1-D or 3-D, 16 features or fewer, other
layouts) stays a lone `convolution`, run by Eigen (`ConvolutionThunk`), which
runs the groups one after another over strided slices of the input: on the
same machine 2.9-9.8 ns per stencil element (NHWC, 3 to 16 features, 1x9,
9x1 and 3x3 windows; 0.32 ns without groups). `measure_host` times one
(`eigen_grouped_conv_elements_per_s`, 8 features in 8 groups, 3x3), and a
lone grouped convolution is priced at that rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis._library import convolution_flops

__all__ = ["GROUPED_CONV_RATES", "GroupedConvolution", "grouped_convolution_seconds", "grouped_convolutions",
           "runs_on_ynnpack"]

#: The host measurement (`DeviceSpec.measurements`, stencil elements per second) that prices a convolution with
#: feature groups, by the runtime XLA:CPU hands it to.
GROUPED_CONV_RATES = {"ynn": "ynn_grouped_conv_elements_per_s", "eigen": "eigen_grouped_conv_elements_per_s"}

_YNN_MARK = "__ynn_fusion"


def runs_on_ynnpack(kernel) -> bool:
    """The kernel is a fusion XLA:CPU hands to YNNPACK (a `kCustom` fusion; its backend config says
    `__ynn_fusion` where the text keeps it)."""
    if kernel.opcode != "fusion" or kernel.fusion_kind != "kCustom":
        return False
    raw = getattr(kernel, "raw_attributes", None) or {}
    config = str(raw.get("backend_config", ""))
    return not config or _YNN_MARK in config or "fusion_config" not in config


@dataclass(frozen=True, slots=True)
class GroupedConvolution:
    """One convolution with feature groups inside a YNNPACK fusion.

    **Attributes:** `name`; `runtime` (`"ynn"`: inside a YNNPACK fusion; `"eigen"`: a lone
    convolution, Eigen's); `groups` (`feature_group_count`); `stencil_elements`
    (`batch · output positions · window size · input features`, the im2col
    copy YNNPACK makes and walks); `flops` (XLA's count, 2 per multiply-add
    over the valid positions).
    """

    name: str
    runtime: str
    groups: int
    stencil_elements: float
    flops: float


def _grouped(h, runtime: str) -> GroupedConvolution | None:
    groups = int(h.attribute("feature_group_count", 1) or 1)
    if groups <= 1 or len(h.operands) != 2:
        return None
    lhs, rhs, out = h.operands[0].shape, h.operands[1].shape, h.shape
    try:
        dn = h.attribute("dim_labels")
        window = math.prod(rhs.dims[d] for d in dn.kernel_spatial)
        positions = math.prod(out.dims[d] for d in dn.output_spatial)
        elements = out.dims[dn.output_batch] * positions * window * lhs.dims[dn.input_feature]
        flops = convolution_flops(h, lhs, rhs, out)
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    return GroupedConvolution(h.name, runtime, groups, float(elements), float(flops))


def grouped_convolutions(kernel) -> list[GroupedConvolution]:
    """The convolutions with feature groups a kernel runs: those of a YNNPACK fusion, or the kernel itself
    when it is a lone convolution (Eigen's); empty for any other kernel."""
    if kernel.opcode == "convolution":
        found = _grouped(kernel, "eigen")
        return [found] if found is not None else []
    if not runs_on_ynnpack(kernel) or kernel.fused_computation is None:
        return []
    return [g for h in kernel.fused_computation.instructions
            if h.opcode == "convolution" and (g := _grouped(h, "ynn")) is not None]


def grouped_convolution_seconds(kernel, device) -> tuple[float, float] | None:
    """`(seconds, flops)` of the convolutions with feature groups a kernel runs on a measured host: their
    stencil elements at the measured rate of their runtime, and the flops that rate replaces. None where
    the kernel has none, or the device is not a host that measured the rate (a GPU, an older host
    measurement)."""
    if getattr(device, "kind", None) != "cpu":
        return None
    convs = grouped_convolutions(kernel)
    if not convs:
        return None
    measured = getattr(device, "measurements", None) or {}
    seconds = flops = 0.0
    for conv in convs:
        rate = float(measured.get(GROUPED_CONV_RATES[conv.runtime], 0.0) or 0.0)
        if not rate > 0:
            return None
        seconds += conv.stencil_elements / rate
        flops += conv.flops
    return seconds, flops
