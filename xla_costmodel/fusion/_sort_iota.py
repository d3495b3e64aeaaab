"""XLA:GPU's `SortIotaFusion`: a sort's `iota` operands fused into it before priority fusion.

XLA:GPU's fusion pipeline runs it right before `PriorityFusion` (`gpu_compiler.cc`, the `fusion`
pipeline: `VariadicOpSplitter`, `SortIotaFusion`, `PriorityFusion`, ...). Every `sort` with an
`iota` operand (`jnp.argsort`, `lax.top_k`, `jax.random.permutation`: the indices sorted along
with the keys) becomes a `kCustom` fusion of the sort and its distinct iota operands; the iota is
no kernel of its own. A `kCustom` fusion is not fusible (`IsFusible`), so priority fusion neither
grows it nor fuses it elsewhere, as in XLA. Without the pass each such iota is a kernel (a sort is
no fusion consumer), one more than XLA's.

Facts after XLA's `xla/backends/gpu/transforms/sort_iota_fusion.cc` (`HandleSort`: the sort's
operands that are iotas, each once, fused into a new `kCustom` fusion of the sort); the code is ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..fusion_engine import fuse, make_fusion
from ..hlo import HloComputation
from ..hlo.editing import NameUniquifier

__all__ = ["SortIotaFusion", "fuse_sort_iotas"]


@dataclass(frozen=True)
class SortIotaFusion:
    """One sort fused with its iota operands before fusion (a row of `FusionResult.pre_fusion_rewrites`):
    `computation`, the sort `instruction`, the `iotas` fused into it and the `fusion` made."""

    computation: str
    instruction: str
    iotas: tuple[str, ...]
    fusion: str


def fuse_sort_iotas(computations: Iterable[HloComputation], names: NameUniquifier | None = None) -> list[SortIotaFusion]:
    """Make every sort with `iota` operands in `computations` (those priority fusion works on) a
    `kCustom` fusion holding the sort and those iotas, in place; an iota with other users stays
    for them. **Returns:** what was fused, one `SortIotaFusion` per sort."""
    done = []
    for comp in computations:
        sorts = [i for i in comp.instructions if i.opcode == "sort"]
        for sort in sorts:
            iotas = list(dict.fromkeys(o for o in sort.operands if o.opcode == "iota"))
            if not iotas:
                continue
            name = sort.name
            fusion = make_fusion(sort, "kCustom", names=names)
            for iota in iotas:
                fusion = fuse(iota, fusion, "kCustom", names=names)
            done.append(SortIotaFusion(comp.name, name, tuple(i.name for i in iotas), fusion.name))
    return done
