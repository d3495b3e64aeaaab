"""Why a fusion did not happen: the rules of XLA's `CanFuse` by name (`RULES`) and `Rejection`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RULES", "Rejection"]

# Rule name -> what it forbids (the order is `CanFuse`'s order).
RULES: dict[str, str] = {
    # A pair with a generic Triton fusion on either side (`CanFuseTriton`, `fusion._triton_fusion`):
    "triton-unsupported": "Triton cannot emit the other side (IsTritonSupported)",
    "triton-not-tilable": "the fused pair has no valid tiling (TryFindBestTilingForFusion)",
    "root": "the producer is its computation's root instruction",
    "producer-not-fusible": "the producer is not fusible (4.3)",
    "consumer-not-fusible": "the consumer is not fusible (4.3)",
    "bitcast-consumer": "not fusing into a single (fusible) bitcast as consumer",
    "scatter-output": "do not fuse into the output of a scatter",
    "scatter-in-place-operand": "do not fuse into the in-place operand of a scatter",
    "scatter-in-place-reader": "the producer reads the in-place operand of a scatter",
    "reduce-into-reduce": "both the producer and the consumer contain a significant reduce",
    "reduction-epilogue": "fusion into the output of a reduction would create a loop fusion",
    "shared-memory": "shared memory of the fusion would exceed the per-block budget",
    "unnested-reductions": "more than 8 unnested (tiled) reductions in one fusion",
    "operand-limit": "more than 96 operands and outputs",
    "code-size": "the fusion would be too large (IR size above 10,000)",
    "in-place": "in-place safety (ShouldFuseInPlaceOp)",
    # Producer-level (all consumers or none, 4.5) and cost decisions:
    "no-users": "the producer has no users",
    "only-bitcast-users": "the producer has only (fusible) bitcast users",
    "negative-priority": "fusing would not save time (priority < 0)",
    "unpriced": "the cost model could not price the fusion",
}


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a producer-consumer pair (or a producer) may not be fused.

    `rule`: a key of `RULES`; `detail`: the specifics (shapes, counts).
    """

    rule: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}" if self.detail else self.rule
