"""XLA's `ShardingRemover` (openxla/xla `xla/service/sharding_remover.cc`), which every single-device compile
runs first (its `sharding-removal` pipeline, on XLA:GPU and XLA:CPU): the custom calls that only annotate a
value's sharding are removed, their readers reading their operand. A module as JAX lowers it keeps them
(`jax.lax.with_sharding_constraint`, `jax.random`'s key annotations: `custom_call_target="Sharding"`); left in,
each would be a kernel of the fused module that XLA never runs.
"""

from __future__ import annotations

from ..hlo import HloModule

__all__ = ["SHARDING_TARGETS", "remove_shardings"]

#: The targets `ShardingRemover` removes (`sdy::` and `spmd::` constants by their values).
SHARDING_TARGETS = frozenset({
    "Sharding", "SPMDShardToFullShape", "SPMDFullToShardShape", "xla.sdy.ShardingGroup",
    "xla.sdy.PropagationBarrier", "xla.sdy.FuncResultSharding", "ShardBarrierFrom", "ShardBarrierTo",
})


def remove_shardings(module: HloModule) -> list[str]:
    """Remove `module`'s sharding annotations in place, as XLA's `ShardingRemover` does (a one-operand custom
    call of `SHARDING_TARGETS`: its users read its operand; `xla.sdy.ShardingGroup`, read by none, goes).
    **Returns:** the names of the instructions removed."""
    removed = []
    for comp in module.computations:
        for instr in reversed(list(comp.instructions)):
            if instr.opcode != "custom-call" or len(instr.operands) != 1:
                continue
            if str(instr.attribute("custom_call_target", "")) not in SHARDING_TARGETS:
                continue
            operand = instr.operands[0]
            instr.replace_all_uses_with(operand)
            if instr is comp.root:
                comp.root = operand
            comp.remove_instruction(instr)
            removed.append(instr.name)
    return removed
