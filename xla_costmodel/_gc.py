"""Pausing Python's cyclic garbage collector around graph-building work.

Parsing a module, analysing it and simulating fusion allocate many small,
long-lived objects, and the HLO graph is full of reference cycles
(instruction <-> computation). Each automatic collection walks everything
allocated so far, so while a big graph grows, collections cost time
quadratic in its size. None of this work leaves garbage that needs the
collector before it returns, so it runs with the collector paused.
"""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def gc_paused():
    """Disable the cyclic collector for the `with` block (restored afterwards, also on error)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
