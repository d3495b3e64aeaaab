"""Where independent tasks run: a process pool on this machine, or a Ray cluster.

Both engines take the same `Task`s and yield one `Outcome` per task, in the
order the tasks finish. Neither knows what a task does; `_many` and `_fleet`
build the tasks and put the outcomes together.

A task whose code raises gives an `Outcome` with the error, and the run goes
on. A task whose *worker process* dies (killed, out of memory, a crash in C
code) is run once more; if its worker dies again, its `Outcome` says so. The
process pool has to be told apart from its bystanders first: a dying worker
breaks the whole pool, so the tasks that were in flight when it broke are
run again one at a time, each alone in a fresh one-worker pool, and only a
task that kills that pool too is reported failed. Ray keeps tasks apart by
itself and retries a task whose worker died (`max_retries=1`).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "ENGINES", "Engine", "LocalEngine", "Outcome", "RayEngine", "RayUnavailableError", "Task", "WorkerStartError",
    "get_engine",
]

ENGINES = ("local", "ray")

#: A worker that died twice running a task: what its `Outcome.error` says.
WORKER_DIED = "the worker process died while running it (killed, out of memory, or a crash outside Python)"


#: Tasks that kill their workers, alone and before any task finished, after which the local engine gives up.
_DEAD_ON_ARRIVAL = 3


class WorkerStartError(RuntimeError):
    """The local engine's workers die before any task finishes (e.g. a script without a `__main__` guard)."""


class RayUnavailableError(ImportError):
    """`engine="ray"` was asked for, but Ray is not installed (`pip install 'xla_costmodel[ray]'`)."""


@dataclass(frozen=True)
class Task:
    """One unit of work: `fn(*args)` run in a worker, known to the caller by `key`.

    `fn` must be picklable by reference (a module-level function or a
    picklable object with `__call__`). `resources` are Ray task options
    (`accelerator_type`, `num_gpus`, `runtime_env`, `max_calls`, ...); the
    local engine ignores them.
    """

    key: str
    fn: Callable[..., Any]
    args: tuple = ()
    resources: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What became of one `Task`: its `value`, or `error` (`"Type: message"`) when it failed."""

    key: str
    value: Any = None
    error: str | None = None
    #: The warnings the task issued in its worker, `(category's "module:qualname", message)`, for the
    #: driver to issue again (`reissue_warnings`): a worker's own stderr would show them raw, once per task.
    warnings: tuple = ()

    @property
    def ok(self) -> bool:
        return self.error is None


class Engine(Protocol):
    """Runs tasks; what `analyze_many` and the other `*_many` functions need of an engine."""

    #: `"local"` or `"ray"`.
    name: str
    #: Whether workers see the driver's files (else sources travel as text).
    shares_filesystem: bool

    def run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        """Run every task; yield one `Outcome` per task as each finishes."""
        ...


def run_task(fn: Callable[..., Any], args: tuple) -> tuple[bool, Any, tuple]:
    """Call `fn(*args)` in a worker: `(True, value, warnings)`, or `(False, "Type: message", warnings)`.

    Errors travel back as text, so that an exception that cannot be pickled
    (or whose class the driver cannot import) still reports its source;
    warnings as `(category, message)` text pairs (`Outcome.warnings`).
    """
    with warnings.catch_warnings(record=True) as caught:
        try:
            ok, value = True, fn(*args)
        except Exception as exc:  # any failure of user-level code is this task's result
            ok, value = False, _describe(exc)
    warned = tuple(dict.fromkeys((f"{w.category.__module__}:{w.category.__qualname__}", str(w.message))
                                 for w in caught))
    return ok, value, warned


def reissue_warnings(outcome: Outcome, stacklevel: int = 2) -> None:
    """Issue again, in the driver, the warnings `outcome`'s task issued in its worker (a category the
    driver cannot import becomes a `UserWarning`)."""
    import importlib

    for category, message in outcome.warnings:
        module, _, qualname = category.partition(":")
        try:
            cls = importlib.import_module(module)
            for part in qualname.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError):
            cls = UserWarning
        if not (isinstance(cls, type) and issubclass(cls, Warning)):
            cls = UserWarning
        warnings.warn(message, cls, stacklevel=stacklevel + 1)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    if not text:
        # An exception without a message: name where it was raised instead.
        frames = traceback.extract_tb(exc.__traceback__)
        text = f"raised at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- local


def _pool_context():
    """`forkserver` where there is one: workers are forked from a clean server process
    that imported the package once. A plain `fork` would copy a driver that may
    already run jax's threads; `spawn` would import everything again per worker."""
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["xla_costmodel.scale._engines", "xla_costmodel"])
        return ctx
    return multiprocessing.get_context("spawn")


class LocalEngine:
    """A process pool on this machine (`concurrent.futures.ProcessPoolExecutor`).

    **Arguments:** `workers`: processes (default: the CPUs this process may use).
    """

    name = "local"
    shares_filesystem = True

    def __init__(self, workers: int | None = None):
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers or usable_cpus()

    def run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        ctx = _pool_context()
        pending = iter(tasks)
        suspects: list[Task] = []
        answered = 0  # tasks a worker finished, with a value or an error
        while True:
            passing = self._pool_pass(ctx, pending, self.workers, suspects)
            while True:
                try:
                    outcome = next(passing)
                except StopIteration as stop:
                    finished = stop.value
                    break
                answered += 1
                yield outcome
            if finished:
                break
        died = 0
        for task in suspects:
            alone: list[Task] = []
            for outcome in self._pool_pass(ctx, iter([task]), 1, alone):
                answered += 1
                yield outcome
            if alone:
                died += 1
                if not answered and died >= _DEAD_ON_ARRIVAL:
                    raise WorkerStartError(
                        f"the first {died} tasks each killed a worker of their own and no task has finished: "
                        "the worker processes cannot run (in a script, call this under "
                        "`if __name__ == '__main__':`, as for any process pool), or the operation kills "
                        "every one of them"
                    )
                yield Outcome(task.key, error=WORKER_DIED)

    @staticmethod
    def _pool_pass(ctx, pending: Iterator[Task], workers: int, suspects: list[Task]):
        """Run tasks from `pending` in one pool until it is exhausted (returns True) or the
        pool breaks (returns False, with the tasks then in flight added to `suspects`)."""
        # One task queued behind each busy worker keeps them fed; a bounded
        # window also bounds how many tasks a broken pool leaves to re-run.
        window = workers + 1
        inflight: dict[Future, Task] = {}
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            try:
                while True:
                    while len(inflight) < window:
                        task = next(pending, None)
                        if task is None:
                            break
                        try:
                            inflight[pool.submit(run_task, task.fn, task.args)] = task
                        except BrokenProcessPool:
                            suspects.append(task)
                            suspects.extend(inflight.values())
                            return False
                    if not inflight:
                        return True
                    done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                    broken = False
                    for fut in done:
                        task = inflight.pop(fut)
                        try:
                            ok, value, warned = fut.result()
                        except BrokenProcessPool:
                            broken = True
                            suspects.append(task)
                            continue
                        except Exception as exc:  # the result could not be sent back (e.g. not picklable)
                            ok, value, warned = False, _describe(exc), ()
                        yield (Outcome(task.key, value=value, warnings=warned) if ok
                               else Outcome(task.key, error=value, warnings=warned))
                    if broken:
                        suspects.extend(inflight.values())
                        inflight.clear()
                        return False
            finally:
                for fut in inflight:
                    fut.cancel()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, not the machine's count): the local engine's default workers."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- ray


def import_ray():
    """The `ray` module, or `RayUnavailableError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError(
            "engine 'ray' needs Ray, which is not installed: pip install 'xla_costmodel[ray]' "
            f"(or use engine 'local') [{exc}]"
        ) from None
    return ray


class RayEngine:
    """Tasks on a Ray cluster, one CPU each (unless a task asks for other resources).

    **Arguments:**

    - `address`: the cluster to join (`"auto"`, `"HOST:6379"`, `"ray://HOST:10001"`).
      None starts a local Ray instance for the run and stops it afterwards.
      If this process is already connected to Ray (`ray.init` was called),
      that connection is used and left open.
    - `workers`: CPUs of the local instance (None: all); ignored with an address.
    """

    name = "ray"
    shares_filesystem = False

    def __init__(self, address: str | None = None, workers: int | None = None):
        self.address = address
        self.workers = workers
        self._ray = import_ray()

    def _connect(self) -> bool:
        """Join or start a cluster; True when this call started one (and must stop it)."""
        ray = self._ray
        if ray.is_initialized():
            return False
        quiet = dict(logging_level=logging.WARNING, log_to_driver=False)
        with warnings.catch_warnings():
            # Ray starts its processes with fork + exec, which is safe in a process running
            # jax's threads; jax's fork hook warns about every fork all the same.
            warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
            if self.address:
                ray.init(address=self.address, **quiet)
            else:
                ray.init(address="local", num_cpus=self.workers, include_dashboard=False, **quiet)
        return True

    def run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        ray = self._ray
        started = self._connect()
        inflight: dict[Any, Task] = {}
        try:
            # `max_calls` (a fresh worker process after so many tasks) can only be set in
            # `ray.remote`, not per call: one remote function per value asked for.
            remotes: dict = {}
            defaults = dict(num_cpus=1, max_retries=1, retry_exceptions=False)
            # Keep the cluster busy, without putting every source in the object store at once.
            window = max(2 * int(ray.cluster_resources().get("CPU", 1)), 4)
            pending = iter(tasks)
            while True:
                while len(inflight) < window:
                    task = next(pending, None)
                    if task is None:
                        break
                    missing = _unplaceable(ray, task.resources)
                    if missing:
                        yield Outcome(task.key, error=missing)
                        continue
                    options = {**defaults, **task.resources}
                    max_calls = options.pop("max_calls", 0)
                    if max_calls not in remotes:
                        remotes[max_calls] = ray.remote(max_calls=max_calls)(run_task)
                    ref = remotes[max_calls].options(**options).remote(task.fn, task.args)
                    inflight[ref] = task
                if not inflight:
                    return
                ready, _ = ray.wait(list(inflight), num_returns=1)
                for ref in ready:
                    task = inflight.pop(ref)
                    try:
                        ok, value, warned = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        yield Outcome(task.key, error=_ray_error(ray, exc))
                        continue
                    yield (Outcome(task.key, value=value, warnings=warned) if ok
                           else Outcome(task.key, error=value, warnings=warned))
        finally:
            for ref in inflight:
                ray.cancel(ref, force=True)
            if started:
                ray.shutdown()


def _unplaceable(ray, resources: dict) -> str | None:
    """Why no node of the cluster can take a task asking for `accelerator_type` (None: one can).

    Ray would keep such a task waiting for a node that never comes.
    """
    kind = resources.get("accelerator_type")
    if not kind:
        return None
    have = ray.cluster_resources()
    if f"accelerator_type:{kind}" in have:
        return None
    kinds = sorted(k.split(":", 1)[1] for k in have if k.startswith("accelerator_type:"))
    return (f"no node of the Ray cluster has accelerator type {kind!r} "
            f"(its nodes have: {', '.join(kinds) or 'no GPUs Ray knows the kind of'})")


def _ray_error(ray, exc: Exception) -> str:
    """A one-line reason for a task Ray could not finish."""
    if isinstance(exc, (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError)):
        return f"{type(exc).__name__}: {WORKER_DIED}"
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}".rstrip(": ")


# --------------------------------------------------------------------------- choice


def get_engine(engine: str | Engine = "local", *, address: str | None = None, workers: int | None = None) -> Engine:
    """An engine by name (`"local"` or `"ray"`), or an `Engine` object passed through.

    **Raises:** `ValueError` for another name or an address given to the local
    engine; `RayUnavailableError` (an `ImportError`) for `"ray"` without Ray.
    """
    if not isinstance(engine, str):
        return engine
    if engine == "local":
        if address is not None:
            raise ValueError("an address is for engine 'ray'; the local engine runs on this machine")
        return LocalEngine(workers)
    if engine == "ray":
        return RayEngine(address, workers)
    raise ValueError(f"unknown engine {engine!r}; engines: {', '.join(ENGINES)}")
