"""Values per (producer, consumer) pair that hold while neither instruction changes.

A fusion pass asks the same pairs again and again (a producer with a hundred
users is re-prioritized each time one of them changes), so the lookup is
keyed by producer, then by consumer, without building a key per visit. Each
entry carries both instructions' versions; versions only grow, so a newer
one replaces the entry instead of piling up beside it.
"""

from __future__ import annotations

from typing import Any

from ..hlo import HloInstruction

__all__ = ["PairCache"]

_NONE: dict = {}


class PairCache:
    """`(producer, consumer) -> value`, valid for one version of each."""

    __slots__ = ("_by_producer",)

    def __init__(self):
        self._by_producer: dict[HloInstruction, dict[HloInstruction, tuple[int, int, Any]]] = {}

    def entries(self, producer: HloInstruction) -> dict[HloInstruction, tuple[int, int, Any]]:
        """The producer's entries, `consumer -> (producer version, consumer version, value)`, for
        loops that check versions inline."""
        d = self._by_producer.get(producer)
        if d is None:
            d = self._by_producer[producer] = {}
        return d

    def get(self, producer: HloInstruction, pv: int, consumer: HloInstruction, cv: int, default: Any = None) -> Any:
        e = self._by_producer.get(producer, _NONE).get(consumer)
        if e is not None and e[0] == pv and e[1] == cv:
            return e[2]
        return default

    def put(self, producer: HloInstruction, pv: int, consumer: HloInstruction, cv: int, value: Any) -> None:
        self.entries(producer)[consumer] = (pv, cv, value)
