"""Operations for the scale-out tests, importable by worker processes (tests/ is on their path)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class CountOrDie:
    """Counts a module's instructions; kills its own worker process on the module named `fatal` (`*`: on every one)."""

    fatal: str = ""

    def __call__(self, module) -> dict:
        if self.fatal in (module.name, "*"):
            os._exit(3)  # no exception, no cleanup: as a segfault or the OOM killer would end it
        return {"module": module.name, "instructions": sum(len(c.instructions) for c in module.computations)}


class RecordingEngine:
    """An engine that runs tasks on another and remembers which sources it was given."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.shares_filesystem = inner.shares_filesystem
        self.ran: list[str] = []

    def run(self, tasks):
        def record():
            for t in tasks:
                self.ran.append(t.key)
                yield t

        return self.inner.run(record())
