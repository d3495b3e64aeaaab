"""Progress of long work on stderr, the way `measure` shows it: a tqdm bar that appears only after a second (short
work stays quiet) and is erased when done, so that what stays on the terminal is the result.

Only on a terminal (or in a notebook): redirected to a file or a pipe (a log, a test's captured stderr), a bar
that erases itself leaves carriage returns and blanks glued to the next line, so there it stays quiet."""

from __future__ import annotations

import sys

__all__ = ["progress_bar"]


class _Quiet:
    """The bar when progress is off: every call does nothing."""

    n = 0

    def update(self, n: int = 1) -> None:
        pass

    def set_description_str(self, text: str) -> None:
        pass

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def _on_terminal() -> bool:
    """A terminal, or a Jupyter kernel (whose stderr is no terminal, but which shows a bar as one does)."""
    if "ipykernel" in sys.modules:
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without it, or closed
        return False


def progress_bar(total: int | None, desc: str, unit: str, enabled: bool = True):
    """A progress bar of `total` `unit`s headed `desc` on stderr (tqdm: `update(n)`, `set_description_str`,
    `set_postfix_str`, `close`, a context manager), or one that does nothing when not `enabled` or stderr is not a terminal."""
    if not enabled or not _on_terminal():
        return _Quiet()
    from tqdm import tqdm  # the plain bar: tqdm.auto needs ipywidgets inside notebooks

    return tqdm(total=total, desc=desc, unit=unit, delay=1.0, file=sys.stderr, leave=False, dynamic_ncols=True)
