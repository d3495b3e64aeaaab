"""The state of glibc's allocator while kernels are timed: one of the measurement's methodology fields.

XLA:CPU allocates every output and temporary buffer afresh for each run of a
program. What a run then pays besides its kernels depends on the C
allocator: with glibc's defaults, a large buffer is `mmap`ed and unmapped on
every run (or not, depending on the process's allocation history, since
glibc moves its mmap threshold as it goes), and each fresh page costs a page
fault on first touch. The same 32 MiB copy measured 1.8 ms in one process
and 29 ms in another.

Two states, set with `set_allocator`:

- `"steady"` (the default of every measurement): glibc keeps freed memory
  (no mmap for allocations, no trimming), so after the warm-up runs each run
  reuses memory that is already mapped and kernels are timed without page
  faults. This is what calibration assumes.
- `"cold"`: every buffer above 128 KiB is mapped fresh and returned to the
  system when freed, so kernels writing large buffers pay their first-touch
  page faults on every run (what a short-lived process sees).

The setting is process-wide and stays until changed. glibc serves a buffer
too large for a thread's arena heap (64 MiB) with a fresh mapping whatever
the setting; limiting glibc to one arena before jax starts its threads
(`MALLOC_ARENA_MAX=1` in the environment, or `set_allocator("steady")`
before jax's first use) avoids that. `Measurement.runs["page_faults"]`
shows what each run paid.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource

__all__ = ["ALLOCATORS", "set_allocator", "steady_allocator", "current_allocator", "page_faults"]

#: The allocator states a measurement may ask for.
ALLOCATORS = ("steady", "cold")

# mallopt parameters, from glibc's malloc.h.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8

_STATE: str | None = None
_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    return _LIBC


def set_allocator(state: str) -> bool:
    """Put glibc's allocator into `state` (`"steady"` or `"cold"`) for the rest of the process.

    **Arguments:**

    - `state`: one of `ALLOCATORS`.

    **Returns:** True when the setting took (glibc), False elsewhere (the
    measurement then runs with the platform's allocator as it is).

    Raises `ValueError` for an unknown state.
    """
    global _STATE
    if state not in ALLOCATORS:
        raise ValueError(f"allocator must be one of {', '.join(map(repr, ALLOCATORS))}, not {state!r}")
    if _STATE == state:
        return True
    try:
        libc = _libc()
        if state == "steady":
            # Threads that pick their arena from now on share an existing one (the
            # main arena, whose heap has no 64 MiB cap, when jax has not started yet).
            libc.mallopt(_M_ARENA_MAX, 1)
            ok = bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
        else:
            # glibc's default thresholds, pinned (setting them stops glibc from
            # moving them), so that large buffers are mapped afresh every run.
            ok = (
                bool(libc.mallopt(_M_MMAP_MAX, 65536))
                and bool(libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024))
                and bool(libc.mallopt(_M_TRIM_THRESHOLD, 128 * 1024))
            )
    except (OSError, AttributeError):
        ok = False
    _STATE = state if ok else None
    return ok


def steady_allocator() -> bool:
    """`set_allocator("steady")`: keep freed memory so repeated runs do not page-fault afresh."""
    return set_allocator("steady")


def current_allocator() -> str:
    """The state `set_allocator` last put the allocator in, or `"system"` when it never took."""
    return _STATE or "system"


def page_faults() -> int:
    """Page faults of this process so far (minor and major, every thread), from `getrusage`."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return int(r.ru_minflt + r.ru_majflt)
