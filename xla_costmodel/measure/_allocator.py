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

The setting is process-wide and stays until changed, and it holds fully only
in a process that started in it (`STEADY_TUNABLES` in its environment,
`steady_from_start`). XLA:CPU allocates its buffers 64-byte aligned
(`posix_memalign`), which glibc serves from a chunk larger than the buffer,
giving the few spare bytes before and after back as tiny free chunks. Its
per-thread cache (tcache, on by default and only switched off when the
process starts) keeps those, so when the buffer is freed it cannot merge with
them and is a few bytes too small for the same request next run: every run
takes fresh memory from the top of the heap and page-faults on all of it (a
16 MiB output: 4096 faults per run, measured in a process that had set
`mallopt` before jax started). Without the tcache and fast bins the spare
bytes merge back at once and each run reuses the previous run's buffer. A
process that did not start that way has its CPU programs timed in the
measuring worker, which does (`_isolated`). `Measurement.runs["page_faults"]`
shows what each run paid.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource

__all__ = ["ALLOCATORS", "COLD_TUNABLES", "STEADY_TUNABLES", "current_allocator", "page_faults", "set_allocator",
           "steady_allocator", "steady_from_start"]

#: The allocator states a measurement may ask for.
ALLOCATORS = ("steady", "cold")

#: The steady state as glibc tunables (`GLIBC_TUNABLES`), read when a process starts, before its
#: first allocation: one arena, no mmap for allocations, no trimming (as `set_allocator("steady")`
#: sets them), and no per-thread cache or fast bins (which only the environment can switch off), so
#: that the spare bytes of an aligned allocation merge back into it when it is freed.
STEADY_TUNABLES = ("glibc.malloc.arena_max=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647"
                   ":glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0")

#: The cold state as glibc tunables: every allocation above 128 KiB mapped fresh and each freed chunk above
#: 128 KiB trimmed, fixed from the start (`set_allocator("cold")` sets the same), so that no earlier work of
#: the process leaves warm heap memory for a large buffer to reuse.
COLD_TUNABLES = "glibc.malloc.mmap_threshold=131072:glibc.malloc.trim_threshold=131072"

# mallopt parameters, from glibc's malloc.h.
_M_MXFAST = 1
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8

_STATE: str | None = None
_LIBC = None
# (glibc rewrites the process's own copy, `/proc/self/environ`, as it parses it; Python's is intact.)
_TUNABLES_AT_IMPORT = os.environ.get("GLIBC_TUNABLES", "")


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
            libc.mallopt(_M_MXFAST, 0)  # the tcache stays: only the environment switches it off
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


def steady_from_start() -> bool:
    """Whether this process started with glibc's steady state in its environment (`STEADY_TUNABLES`).

    Read as this module found the environment when first imported (glibc
    read it when the process started; setting it later changes nothing).
    Only then does the steady state hold in this process, and
    `measure_program` time CPU programs here; otherwise in the measuring
    worker.
    """
    have = set(_TUNABLES_AT_IMPORT.split(":"))
    return all(t in have for t in STEADY_TUNABLES.split(":"))
