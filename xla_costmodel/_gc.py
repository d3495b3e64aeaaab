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
            # Everything allocated in the block sits in the youngest generation; the first
            # allocation after `enable()` would start a collection that walks all of it (on
            # a big module, tens of milliseconds). The graph built here is long-lived, so it
            # goes straight to the oldest generation instead, as surviving young collections
            # would take it there: `freeze` + `unfreeze` moves every tracked object there
            # without walking any. Cyclic garbage among them is found by the next full
            # collection, as usual. (Not when the program has frozen objects of its own:
            # `unfreeze` would release those too.)
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.enable()
                gc.unfreeze()
            else:
                gc.enable()
