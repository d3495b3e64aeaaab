"""`xla_costmodel._gc.gc_paused`: the collector is paused in the block and restored after it."""

from __future__ import annotations

import gc

from xla_costmodel._gc import gc_paused


class _Node:
    def __init__(self):
        self.other = None


def test_collector_state_is_restored_and_garbage_made_inside_is_still_collected():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle, dropped below
        del a, b
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # nothing left in the permanent generation
    assert gc.collect() >= 2  # the cycle made in the block is found by a full collection


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_objects_the_program_froze_stay_frozen():
    keep = [_Node() for _ in range(10)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with gc_paused():
            pass
        # `unfreeze` would empty the permanent generation. Other threads of the test run (the memory
        # guard's watcher) may free a few frozen objects meanwhile, so the count may drop by those.
        assert gc.get_freeze_count() >= frozen - 10_000 > 0
        assert gc.isenabled()
    finally:
        gc.unfreeze()
    del keep
