"""`_worker.WorkerProcess`: functions run in a process of its own, their results, errors, warnings and
messages brought back, a dead worker reported and replaced.

The functions run are the standard library's, so what comes back is Python's own behaviour.
"""

from __future__ import annotations

import os
import signal
import warnings

import pytest

from xla_costmodel._worker import WorkerCrashed, WorkerProcess


@pytest.fixture(scope="module")
def worker():
    with WorkerProcess({"XLA_COSTMODEL_TEST_WORKER": "yes"}, name="test worker") as w:
        yield w


def test_runs_in_another_process_with_its_environment_and_is_kept(worker):
    pid = worker.call("os:getpid")
    assert pid != os.getpid() and worker.pid == pid
    assert worker.call("os:getenv", "XLA_COSTMODEL_TEST_WORKER") == "yes"
    assert worker.call("os:getpid") == pid and worker.starts == 1  # started once, reused
    assert worker.call("math:fsum", [0.1] * 10) == 1.0


def test_errors_come_back_as_raised(worker):
    with pytest.raises(ValueError, match="invalid literal for int"):
        worker.call("builtins:int", "twelve")
    with pytest.raises(ModuleNotFoundError):
        worker.call("no_such_module_here:f")
    assert worker.call("builtins:int", "12") == 12  # the worker goes on


def test_warnings_and_messages_come_back(worker):
    with pytest.warns(RuntimeWarning, match="from the worker"):
        worker.call("warnings:warn", "from the worker", RuntimeWarning)
    got = []
    assert worker.call("xla_costmodel._worker:report", {"step": 1}, on_message=got.append) is None
    assert got == [{"step": 1}]


def test_a_dead_worker_is_reported_and_replaced():
    with WorkerProcess(name="test worker") as w:
        first = w.call("os:getpid")
        with pytest.raises(WorkerCrashed, match="SIGABRT") as info:
            w.call("os:abort")
        assert info.value.signal == signal.SIGABRT and not info.value.timed_out
        assert w.call("os:getpid") != first and w.starts == 2


def test_a_worker_past_its_time_limit_is_killed():
    with WorkerProcess(timeout_s=0.5, name="test worker") as w:
        with pytest.raises(WorkerCrashed, match="longer than 0.5 s") as info:
            w.call("time:sleep", 30)
        assert info.value.timed_out
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert w.call("time:sleep", 0) is None
