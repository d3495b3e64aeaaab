"""The test runner's memory guard, for the tests and the notebooks alike (hence here, above both).

A child process that grows without bound (a notebook's kernel, a CLI run in a subprocess) is otherwise killed by
the system's OOM killer, and the test reports only "Kernel died" or a negative exit status. The guard watches every
process this test run started; one whose resident memory passes the limit (`--memory-limit-gb`, default 4: the
project's goal for any test process) is killed by the guard, and the failing test says which process, how large it
was and what the limit is. A child that dies on its own while large is reported with its last size too.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest

_DEFAULT_LIMIT_GB = 4.0
_POLL_S = 0.2


def pytest_addoption(parser):
    parser.addoption("--memory-limit-gb", type=float, default=None,
                     help="kill a child process of the test run (a notebook kernel, a subprocess) whose resident "
                          "memory passes this many GB, and say so in the failing test (default "
                          f"$XLA_COSTMODEL_TEST_MEMORY_LIMIT_GB or {_DEFAULT_LIMIT_GB:g}; 0 turns the guard off)")


class _MemoryGuard:
    """A thread that polls the resident memory of this process's descendants and kills those over the limit."""

    def __init__(self, limit_bytes: int):
        import psutil

        self._psutil = psutil
        self.limit_bytes = limit_bytes
        self._me = psutil.Process()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._seen: dict[int, tuple[str, int]] = {}  # pid -> (command line, largest resident bytes seen)
        self.killed: list[str] = []  # what the guard killed during the current test
        self.vanished: list[str] = []  # large children that ended during the current test
        self._thread = threading.Thread(target=self._run, name="memory-guard", daemon=True)
        self._thread.start()

    def start_test(self) -> None:
        with self._lock:
            self.killed, self.vanished = [], []

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def _run(self) -> None:
        while not self._stop.wait(_POLL_S):
            try:
                self._poll()
            except Exception:  # the guard must never break the run it watches
                pass

    def _poll(self) -> None:
        psutil = self._psutil
        alive = set()
        for child in self._me.children(recursive=True):
            try:
                rss = child.memory_info().rss
                pid = child.pid
                if pid not in self._seen:
                    self._seen[pid] = (" ".join(child.cmdline())[:160], 0)
                command, largest = self._seen[pid]
                self._seen[pid] = (command, max(largest, rss))
                alive.add(pid)
                if rss > self.limit_bytes and self._unique_bytes(child) > self.limit_bytes:
                    os.kill(pid, signal.SIGKILL)
                    alive.discard(pid)
                    del self._seen[pid]
                    with self._lock:
                        self.killed.append(f"process {pid} ({command}) was killed by the test runner's memory guard: "
                                           f"{_gb(rss)} resident, over the limit of {_gb(self.limit_bytes)} "
                                           "(--memory-limit-gb)")
            except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
                continue
        for pid in set(self._seen) - alive:
            command, largest = self._seen.pop(pid)
            if largest > self.limit_bytes / 4:
                with self._lock:
                    self.vanished.append(f"process {pid} ({command}) ended after reaching {_gb(largest)} resident "
                                         f"(the guard's limit is {_gb(self.limit_bytes)})")

    def _unique_bytes(self, child) -> int:
        """Memory only `child` holds (USS). A child forked from the test process (multiprocessing, Ray's
        helpers) starts with the parent's pages in its resident set, shared until written: killing it for
        them would blame the child for the parent's size."""
        try:
            return child.memory_full_info().uss
        except (self._psutil.AccessDenied, AttributeError):
            return child.memory_info().rss

    def report(self) -> list[str]:
        with self._lock:
            return list(self.killed) + list(self.vanished)


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


_GUARD: _MemoryGuard | None = None


def pytest_configure(config):
    global _GUARD
    limit = config.getoption("--memory-limit-gb")
    if limit is None:
        limit = float(os.environ.get("XLA_COSTMODEL_TEST_MEMORY_LIMIT_GB", _DEFAULT_LIMIT_GB))
    if limit > 0 and _GUARD is None:
        _GUARD = _MemoryGuard(int(limit * 1e9))


def pytest_unconfigure(config):
    global _GUARD
    if _GUARD is not None:
        _GUARD.stop()
        _GUARD = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if _GUARD is not None:
        _GUARD.start_test()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _GUARD is None or not report.failed:
        return
    import time

    time.sleep(2 * _POLL_S)  # let the guard notice a child that has just ended
    notes = _GUARD.report()
    if not notes:
        return
    # First, where the eye lands: nbmake's own text says only "Kernel died".
    headline = "killed for memory" if _GUARD.killed else "a large child process ended"
    report.sections.insert(0, (f"memory guard: {headline}", "\n".join(notes)))
    longrepr = str(report.longrepr) if report.longrepr is not None else ""
    report.longrepr = "MEMORY: " + "\nMEMORY: ".join(notes) + "\n\n" + longrepr
