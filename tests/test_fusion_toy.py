"""A hand-made cost model for the fusion tests (imported by the other test_fusion files): numbers simple enough to work out by hand.

A kernel (a fusion, or a lone instruction) takes

    launch + (bytes read + bytes written) * ns_per_byte + ops * elements * ns_per_element_op

where bytes read are the sizes of its distinct operands, bytes written the
size of its result, and `ops * elements` sums the elements of every
non-parameter instruction it runs. Parameters, constants, tuples,
get-tuple-elements and bitcasts run no code (0). Fusing is priced the way
XLA's `EstimateRunTimes` does it: the fused kernel of each consumer, built
with `hypothetical_fusion`, each kernel paying its own launch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xla_costmodel.fusion_engine import hypothetical_fusion
from xla_costmodel.models import FusionEstimate, KernelEstimate

FREE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast"})


@dataclass(frozen=True)
class ToyModel:
    name: str = "toy"
    launch_s: float = 1e-6
    ns_per_byte: float = 1.0
    ns_per_element_op: float = 0.0
    # every estimate_fusion call appends (producer, consumers) names here
    calls: list = field(default_factory=list, compare=False, repr=False)

    def estimate(self, kernel, device) -> KernelEstimate:
        if kernel.opcode in FREE:
            return KernelEstimate.free()
        distinct = {id(o): o for o in kernel.operands}.values()
        nbytes = sum(o.shape.byte_size for o in distinct) + kernel.shape.byte_size
        fused = kernel.fused_computation
        body = fused.instructions if fused is not None else [kernel]
        work = sum(i.shape.num_elements for i in body if i.opcode not in FREE)
        memory = nbytes * self.ns_per_byte * 1e-9
        compute = work * self.ns_per_element_op * 1e-9
        return KernelEstimate(
            compute_s=compute, memory_s=memory, launch_s=self.launch_s,
            time_s=self.launch_s + memory + compute, bound="memory",
        )

    def estimate_fusion(self, producer, consumers, device) -> FusionEstimate:
        self.calls.append((producer.name, tuple(c.name for c in consumers)))
        p = self.estimate(producer, device).time_s
        cs = tuple(self.estimate(c, device).time_s for c in consumers)
        fs = tuple(self.estimate(hypothetical_fusion(producer, c), device).time_s for c in consumers)
        return FusionEstimate(
            time_unfused_s=p + sum(cs), time_fused_s=sum(fs), producer_s=p, consumers_s=cs, fused_consumers_s=fs
        )


def test_toy_model_prices_by_hand():
    from xla_costmodel.hlo import parse_hlo

    m = parse_hlo(
        """HloModule t
ENTRY e {
  p0 = f32[256]{0} parameter(0)
  p1 = f32[256]{0} parameter(1)
  ROOT a = f32[256]{0} add(p0, p1)
}
"""
    )
    a = m.entry.root
    # 1 us launch + (2 x 1024 B read + 1024 B written) x 1 ns/B
    assert ToyModel().estimate(a, None).time_s == 1e-6 + 3072e-9
    # + 256 elements x 10 ns
    assert abs(ToyModel(ns_per_element_op=10).estimate(a, None).time_s - (1e-6 + 3072e-9 + 2560e-9)) < 1e-15
