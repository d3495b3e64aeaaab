"""What the benchmark scripts share: printing a table, and refusing an unknown model name."""

from __future__ import annotations

import sys

__all__ = ["check_models", "print_table"]


def print_table(title: str, frame, index: bool = True) -> None:
    """`frame` under a `== title` line, three decimals, wide enough not to wrap."""
    import pandas as pd

    print(f"\n== {title}")
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_rows", 500):
        print(frame.round(3).to_string(index=index))


def check_models(names, script: str) -> list[str]:
    """The models to score, each once; an unknown name stops the script (exit 2) naming the registered ones."""
    from xla_costmodel.models import get_model

    for name in names:
        try:
            get_model(name)
        except (KeyError, ValueError) as exc:
            print(f"{script}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    return list(dict.fromkeys(names))
