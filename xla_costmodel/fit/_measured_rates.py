"""Work no training kernel had, priced at the rate the host measured for it.

A linear model's weight for a feature no training kernel had is 0 (its
`support` is 0): the fit learned nothing about that kind of work. Two kinds
the reference host's training data lacks run at rates far from any feature's
weight on XLA:CPU:

- convolutions with feature groups inside a YNNPACK fusion run per stencil
  element at a scalar rate (`ynn_grouped_conv_elements`; a depthwise
  convolution 100-200x slower than its flops at the GEMM rate that
  `matmul_<dtype>` charges), and
- int8 x int8 -> int32 matmuls in a YNNPACK fusion (`matmul_int`, weight 0:
  their flops were not priced at all).

Where such a feature has no support and the host description measured the
work's rate (`measure_host`: `ynn_grouped_conv_elements_per_s`,
`peak_matmul_flops_per_s["s8"]`), the model prices that work at the measured
rate, through the same functions the roofline uses
(`models._xla_cpu_convolution` for the convolutions), and removes what the
fitted weights charged for the same work (the grouped convolutions' flops in
`matmul_<dtype>`). A feature the training kernels had keeps its fitted weight;
a host description without the rate (the shipped corpus machine's) leaves the
feature unsupported, as before.

One rule per feature, filled by `@measured_rate(feature)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..models import GROUPED_CONV_RATES, grouped_convolution_seconds
from ..features import MATMUL_DTYPES

__all__ = ["MEASURED_RATE_RULES", "MeasuredRatePart", "measured_rate", "priced_at_measured_rates"]


@dataclass(frozen=True, slots=True)
class MeasuredRatePart:
    """The part of one kernel priced at a measured host rate.

    **Attributes:** `feature` (the unsupported feature that counts the work), `count` (its units in the
    kernel), `measurement` (the host measurement's name), `per_second` (its rate, units per second),
    `seconds` (the price of the work at that rate), `replaces_s` (seconds the fitted weights of other
    features charged for the same work, by feature, which this price replaces).
    """

    feature: str
    count: float
    measurement: str
    per_second: float
    seconds: float
    replaces_s: dict[str, float] = field(default_factory=dict)


#: Feature name -> rule `(kernel, device, features, weights) -> MeasuredRatePart | None`.
MEASURED_RATE_RULES: dict[str, Callable] = {}


def measured_rate(feature: str):
    """Register the rule pricing `feature`'s work at a measured host rate when no training kernel had it."""

    def register(rule):
        MEASURED_RATE_RULES[feature] = rule
        return rule

    return register


def _host(device) -> bool:
    return getattr(device, "kind", None) == "cpu"


@measured_rate("ynn_grouped_conv_elements")
def _ynn_grouped_convolutions(kernel, device, x, weights) -> MeasuredRatePart | None:
    measurement = GROUPED_CONV_RATES["ynn"]
    priced = grouped_convolution_seconds(kernel, device)  # None without the measured rate
    if priced is None:
        return None
    seconds, flops = priced
    # Their flops were counted (and priced) as GEMM flops in `matmul_<dtype>`: the measured rate replaces that.
    replaces: dict[str, float] = {}
    left = flops
    for d in MATMUL_DTYPES:
        name = f"matmul_{d}"
        take = min(left, float(x.get(name, 0.0)))
        if take > 0:
            replaces[name] = take * float(weights.get(name, 0.0))
            left -= take
    rate = float(device.measurements[measurement])
    return MeasuredRatePart("ynn_grouped_conv_elements", float(x["ynn_grouped_conv_elements"]), measurement,
                            rate, float(seconds), replaces)


@measured_rate("matmul_int")
def _int8_matmuls(kernel, device, x, weights) -> MeasuredRatePart | None:
    # YNNPACK takes integer dots and convolutions only as s8 x s8 -> s32 (`ynn_support.cc`), which the host
    # measurement times (`matmul_s8_flops_per_s`); other integer matmuls are not this rate's.
    if not _host(device) or not x.get("lib_ynn"):
        return None
    rate = float((getattr(device, "peak_matmul_flops_per_s", None) or {}).get("s8", 0.0) or 0.0)
    if not rate > 0:
        return None
    flops = float(x["matmul_int"])
    return MeasuredRatePart("matmul_int", flops, 'peak_matmul_flops_per_s["s8"]', rate, flops / rate)


def priced_at_measured_rates(model, kernel, device, x: dict[str, float]) -> list[MeasuredRatePart]:
    """The parts of `kernel` (features `x`) that a fitted linear `model` had no training kernel for and the
    host measured a rate for; empty for a model without per-feature weights and support."""
    names = getattr(model, "feature_names_", None)
    coef = getattr(model, "coef_", None)
    support = getattr(model, "support_", None)
    if names is None or coef is None or support is None:
        return []
    supported = {n: int(s) for n, s in zip(names, support)}
    weights = {n: float(w) for n, w in zip(names, coef)}
    parts = []
    for feature, rule in MEASURED_RATE_RULES.items():
        if feature not in supported or supported[feature] or not x.get(feature):
            continue
        part = rule(kernel, device, x, weights)
        if part is not None:
            parts.append(part)
    return parts
