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

Eigen takes a lone convolution only in the form XLA's
`PotentiallyImplementedAsEigenConvolution` / `CanUseEigenConvolution`
(`xla/service/cpu/ir_emission_utils.cc`) accept: f16 or f32, 1 to 3 spatial
dimensions, no window reversal, batch first and features last in input
and output, the kernel's spatial dimensions first and its input and output
features last (`b01f_01io->b01f`), default layouts. Any other convolution
(f64; weight gradients with `01fb` inputs and reversed windows; grouped
convolutions of another type, which XLA first expands into an ungrouped one
with a block-diagonal kernel) runs in XLA's own emitted loop, one
multiply-add at a time: `2x64x64x8` f64 with 8 groups (expanded to 4.7 M
multiply-adds) took 1,663 µs, 0.35 ns each, where the f64 GEMM rate priced
40 µs. `measure_host` times such a loop (`loop_conv_macs_per_s`, an f64
3x3 convolution of 8 features) and any convolution the loop runs is priced
at that rate per multiply-add (`loop_convolution_seconds`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.library import convolution_flops

__all__ = ["GROUPED_CONV_RATES", "LOOP_CONV_RATE", "GroupedConvolution", "convolution_runtime",
           "grouped_convolution_seconds", "grouped_convolutions", "loop_convolution_seconds", "runs_on_ynnpack"]

#: The host measurement (`DeviceSpec.measurements`, stencil elements per second) that prices a convolution with
#: feature groups, by the runtime XLA:CPU hands it to.
GROUPED_CONV_RATES = {"ynn": "ynn_grouped_conv_elements_per_s", "eigen": "eigen_grouped_conv_elements_per_s"}
#: The host measurement (multiply-adds per second) of a convolution run by XLA's own emitted loop.
LOOP_CONV_RATE = "loop_conv_macs_per_s"

_YNN_MARK = "__ynn_fusion"


def runs_on_ynnpack(kernel) -> bool:
    """The kernel is a fusion XLA:CPU hands to YNNPACK (a `kCustom` fusion; its backend config says
    `__ynn_fusion` where the text keeps it)."""
    if kernel.opcode != "fusion" or kernel.fusion_kind != "kCustom":
        return False
    raw = getattr(kernel, "raw_attributes", None) or {}
    config = str(raw.get("backend_config", ""))
    return not config or _YNN_MARK in config or "fusion_config" not in config


def _default_layout(shape) -> bool:
    m2m = getattr(shape, "minor_to_major", None)
    return not m2m or tuple(m2m) == tuple(range(len(m2m) - 1, -1, -1))


def convolution_runtime(h) -> str:
    """How XLA:CPU runs a lone `convolution` instruction: `"eigen"` (its `ConvolutionThunk`) where Eigen
    takes it (module docstring), else `"loop"` (XLA's own emitted loop)."""
    try:
        dn = h.attribute("dim_labels")
        lhs, rhs, out = h.operands[0].shape, h.operands[1].shape, h.shape
        n = len(dn.output_spatial)
        window = h.attribute("window", None)
        reversed_window = window is not None and any(d.window_reversal for d in window.dimensions)
        canonical = (
            1 <= n <= 3
            and tuple(dn.input_spatial) == tuple(range(1, n + 1))
            and tuple(dn.output_spatial) == tuple(range(1, n + 1))
            and tuple(dn.kernel_spatial) == tuple(range(n))
            and dn.input_batch == 0 and dn.output_batch == 0
            and dn.input_feature == len(lhs.dims) - 1 and dn.output_feature == len(out.dims) - 1
            and dn.kernel_input_feature == len(rhs.dims) - 2 and dn.kernel_output_feature == len(rhs.dims) - 1
        )
        eigen_type = lhs.element_type in ("f16", "f32")
        layouts = all(_default_layout(s) for s in (lhs, rhs, out))
    except (AttributeError, IndexError, KeyError, TypeError):
        return "eigen"
    return "eigen" if canonical and eigen_type and layouts and not reversed_window else "loop"


def loop_convolution_seconds(kernel, device) -> tuple[float, float] | None:
    """`(seconds, flops)` of a lone convolution XLA's own loop runs, on a measured host: its multiply-adds
    (XLA's flops / 2) at the measured loop rate. None for any other kernel, or a device that did not
    measure the rate."""
    if kernel.opcode != "convolution" or getattr(device, "kind", None) != "cpu" or len(kernel.operands) != 2:
        return None
    rate = float((getattr(device, "measurements", None) or {}).get(LOOP_CONV_RATE, 0.0) or 0.0)
    if not rate > 0 or convolution_runtime(kernel) != "loop":
        return None
    try:
        flops = float(convolution_flops(kernel, kernel.operands[0].shape, kernel.operands[1].shape, kernel.shape))
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    return flops / 2 / rate, flops


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
    when it is a lone convolution Eigen runs; empty for any other kernel (a loop-run convolution is
    `loop_convolution_seconds`'s)."""
    if kernel.opcode == "convolution":
        found = _grouped(kernel, "eigen") if convolution_runtime(kernel) == "eigen" else None
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
