"""`context` and `learned-context`: the fitted and learned models, reading the schedule context too.

Both read the kernel features of `fitted`/`learned` (`FEATURES`) plus the
kernel's `CONTEXT_FEATURES` (`features._context`: the size of its program, the
reuse distance of its operands, the independent kernels around it). `context`
is fitted the way `fitted` is (Stevens & Klöckner's linear form, one weight
per column in seconds per unit, relative-error least squares); `learned-context`
the way `learned` is (gradient-boosted trees in log time over a linear
baseline).

Their saved calibrations are fitted to the measurement suite and to this
project's own programs (`datasets.own_program_rows`): a
kernel of the suite runs almost alone, so the suite by itself shows little
context to learn from. Programs of the independent corpus are never fitted
(see `compare`).
"""

from __future__ import annotations

from typing import ClassVar

from ..features import CONTEXT_FEATURES, FEATURES
from ._fitted import FittedModel
from ._learned import LearnedModel

__all__ = ["ContextModel", "LearnedContextModel", "CONTEXT_COLUMNS"]

#: The columns both models read: the kernel's features, then its context.
CONTEXT_COLUMNS: tuple[str, ...] = FEATURES + CONTEXT_FEATURES


class ContextModel(FittedModel):
    """`context`: the hardware-fitted linear model over kernel and schedule-context features.

    Hyper-parameters and fitted attributes as `FittedModel`'s; `feature_names_`
    ends with the `CONTEXT_FEATURES`. `estimate(kernel, device)` reads the
    context from the kernel's computation (`kernel.computation`), so a kernel
    is priced where it runs: the same fusion costs more in a large program
    whose operands come from far away than alone.
    """

    name: ClassVar[str] = "context"
    feature_columns: ClassVar[tuple[str, ...]] = CONTEXT_COLUMNS


class LearnedContextModel(LearnedModel):
    """`learned-context`: gradient-boosted trees over kernel and schedule-context features.

    Hyper-parameters and fitted attributes as `LearnedModel`'s.
    """

    name: ClassVar[str] = "learned-context"
    feature_columns: ClassVar[tuple[str, ...]] = CONTEXT_COLUMNS
