"""A Python process of its own, kept for the session, that runs functions of the package on request.

Two parts of the project need jax in a clean process: checking that a fused
module computes what the original does (`fusion._execute`: a crash inside
jaxlib must be a finding, not the end of the caller) and timing kernels on
the CPU (`measure._isolated`: glibc's allocator must be steady from the
process's first allocation, before jax starts its threads, which a process
that already ran jax cannot arrange). Both use a `WorkerProcess`.

A request names a function by `"package.module:function"` (imported in the
worker) and carries its arguments; both travel pickled over the worker's
stdin, the answer over its original stdout (anything else the worker prints
goes to its stderr, kept in a temporary log). Warnings the function raises
are raised again in the caller (deprecations aside: they concern the code
the worker imports); an exception is raised again in the caller as it was
raised (or as a `RuntimeError` naming it when it cannot be pickled); a
function may send messages before it answers (`report`), which the caller
receives as they come (`on_message`). If the process dies (a
signal, an exit) or runs past its time limit, `WorkerCrashed` says how and
quotes the last lines of its log, and the next request starts a new
process. The process starts on the first request and is reused, so the cost
of starting Python and importing jax is paid once.

This module imports nothing of the package (it is the floor of the layers):
the functions a worker runs live where their subject does.
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["WorkerCrashed", "WorkerProcess", "report", "shared_worker"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The worker's program: serve from this module as the package imports it (not a `__main__` copy), so
# that `report` and the classes the caller unpickles are the package's.
_SERVE = "from xla_costmodel._worker import _serve; _serve()"


class WorkerCrashed(RuntimeError):
    """The worker process died, or ran past its time limit and was killed.

    **Attributes:** `signal` (the signal number that ended it, or None),
    `exit_status` (its exit status, or None), `timed_out`, `log_tail` (the
    last lines it wrote to stderr).
    """

    def __init__(self, message: str, *, signal_number: int | None = None, exit_status: int | None = None,
                 timed_out: bool = False, log_tail: str = ""):
        super().__init__(message)
        self.signal = signal_number
        self.exit_status = exit_status
        self.timed_out = timed_out
        self.log_tail = log_tail


# ---------------------------------------------------------------------------
# The wire: length-prefixed pickles


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:  # an unbuffered pipe may take less than it is given
        view = view[stream.write(view) or 0:]
    stream.flush()


def _read_exactly(stream, n: int) -> bytes:
    # The caller reads the worker's unbuffered pipe (so that `select` sees every byte not yet
    # read): a read may return less than asked.
    parts = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def _recv(stream):
    (n,) = struct.unpack("<Q", _read_exactly(stream, 8))
    return pickle.loads(_read_exactly(stream, n))


# ---------------------------------------------------------------------------
# In the worker

_CHANNEL = None


def report(message: Any) -> None:
    """From a function running in a worker: send `message` to the caller's `on_message` now.

    Outside a worker this does nothing, so a function may call it wherever it runs.
    """
    if _CHANNEL is not None:
        _send(_CHANNEL, ("message", message, ()))


def _resolve(handler: str) -> Callable:
    module_name, _, attr = handler.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives a pickle round trip (its class importable, its arguments plain), else a RuntimeError."""
    try:
        pickle.loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
        return exc
    except Exception:  # noqa: BLE001 - any pickling failure
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _portable_warnings(caught) -> tuple:
    out = []
    for w in caught:
        category = w.category
        if issubclass(category, (DeprecationWarning, PendingDeprecationWarning)):
            continue  # about the code the worker imports, nothing the caller can act on
        try:
            pickle.dumps(category)
        except Exception:  # noqa: BLE001 - a class defined where the caller cannot import it
            category = UserWarning
        out.append((category, str(w.message)))
    return tuple(out)


def _serve() -> None:
    """The worker's loop: `(handler, args, kwargs)` in on stdin, `(status, payload, warnings)` out."""
    global _CHANNEL
    channel = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything else written to stdout (XLA, jax, print) goes to stderr, not into the channel
    _CHANNEL = channel
    _send(channel, ("ready", os.getpid(), ()))  # started: requests are timed from here on
    requests = sys.stdin.buffer
    while True:
        try:
            handler, args, kwargs = _recv(requests)
        except EOFError:
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                answer = ("ok", _resolve(handler)(*args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - raised again in the caller
                answer = ("error", _portable(exc))
        try:
            _send(channel, (*answer, _portable_warnings(caught)))
        except Exception as exc:  # noqa: BLE001 - the result itself does not pickle
            _send(channel, ("error", RuntimeError(f"{handler}: its result cannot be sent back ({exc})"), ()))


# ---------------------------------------------------------------------------
# In the caller


class WorkerProcess:
    """A worker process (Python serving `_serve`), started on first use and kept.

    **Arguments:**

    - `env`: environment variables set for the worker on top of this
      process's (they take effect before the worker's first allocation,
      e.g. glibc's `GLIBC_TUNABLES`); the package's root goes first on its
      `PYTHONPATH`, so the worker imports the same package.
    - `timeout_s`: the longest one request may take (then the worker is
      killed and `WorkerCrashed` raised); None waits as long as it takes.
    - `name`: how errors name the worker.

    One request runs at a time (calls from several threads wait their turn).
    """

    def __init__(self, env: Mapping[str, str] | None = None, *, timeout_s: float | None = None,
                 name: str = "worker"):
        self.env = dict(env or {})
        self.timeout_s = timeout_s
        self.name = name
        self._proc: subprocess.Popen | None = None
        self._log = None
        self._lock = threading.Lock()
        self.starts = 0

    @property
    def pid(self) -> int | None:
        """The running worker's process id (None before the first request or after `close`)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _start(self) -> None:
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._log = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVE],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env, bufsize=0,
        )
        self.starts += 1
        try:
            _recv(self._proc.stdout)  # "ready": Python and the package imported (no time limit)
        except EOFError:
            raise self._crashed(self._proc, False) from None

    def log_tail(self, lines: int = 5) -> str:
        """The last `lines` non-empty lines the worker wrote to stderr."""
        if self._log is None:
            return ""
        self._log.seek(0)
        text = self._log.read().decode(errors="replace")
        self._log.seek(0, os.SEEK_END)
        kept = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("@")]
        return "\n".join(kept[-lines:])

    def call(self, handler: str, *args, on_message: Callable[[Any], None] | None = None,
             warn_stacklevel: int = 2, **kwargs):
        """Run `handler(*args, **kwargs)` in the worker and return its result.

        **Arguments:** `handler`, `"package.module:function"`; `on_message`:
        called with each message the function sends (`report`) before it
        answers; `warn_stacklevel`: the `stacklevel` the function's warnings
        are raised with here (2, the default: the line that called `call`).

        **Raises:** the function's exception; `WorkerCrashed` when the worker
        died or ran past `timeout_s` (the next call starts a new one). On any
        other interruption (e.g. `KeyboardInterrupt`) the worker is killed,
        since its late answer would be taken for the next request's.
        """
        with self._lock:
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self.close()
                    self._start()
                proc = self._proc
                _send(proc.stdin, (handler, args, kwargs))
                while True:
                    ready, _, _ = select.select([proc.stdout], [], [], self.timeout_s)
                    if not ready:
                        proc.kill()
                        raise TimeoutError
                    status, payload, caught = _recv(proc.stdout)
                    if status != "message":
                        break
                    if on_message is not None:
                        on_message(payload)
            except (BrokenPipeError, EOFError, TimeoutError) as exc:
                raise self._crashed(proc, isinstance(exc, TimeoutError)) from None
            except WorkerCrashed:
                raise
            except BaseException:
                self.close(kill=True)
                raise
        for category, message in caught:
            warnings.warn(message, category, stacklevel=warn_stacklevel)
        if status == "error":
            raise payload
        return payload

    def _crashed(self, proc, timed_out: bool) -> WorkerCrashed:
        code = proc.wait()
        tail = self.log_tail()
        self.close()
        if timed_out:
            return WorkerCrashed(f"the {self.name} ran longer than {self.timeout_s:g} s and was killed",
                                 timed_out=True, log_tail=tail)
        number = -code if code is not None and code < 0 else None
        what = f"signal {signal.Signals(number).name}" if number else f"exit status {code}"
        return WorkerCrashed(f"the {self.name} process ended ({what})" + (f":\n{tail}" if tail else ""),
                             signal_number=number, exit_status=None if number else code, log_tail=tail)

    def close(self, *, kill: bool = False) -> None:
        """Stop the worker (a new one starts on the next `call`); `kill`: without waiting for it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.poll() is None:
                    if kill:
                        proc.kill()
                    else:
                        proc.stdin.close()
                    proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "WorkerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_SHARED: dict[str, WorkerProcess] = {}
_SHARED_LOCK = threading.Lock()


def shared_worker(key: str, make: Callable[[], WorkerProcess]) -> WorkerProcess:
    """The process-wide worker under `key`, made by `make()` on first use and closed when Python exits."""
    with _SHARED_LOCK:
        worker = _SHARED.get(key)
        if worker is None:
            worker = _SHARED[key] = make()
            atexit.register(worker.close)
        return worker

