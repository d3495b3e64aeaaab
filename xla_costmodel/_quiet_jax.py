"""Starting jax quietly where its CUDA plugin is installed on a machine without a GPU.

jax's CUDA plugin is what compiles for a GPU here (`xla_costmodel.gpu_compile`).
Without an NVIDIA driver it misbehaves in two ways that a user must not see:

- its C++ code writes absl log lines straight to file descriptor 2 when it is
  loaded (`import jax`) and when jax starts its backends ("Could not find cuda
  drivers on your machine"); no logging setting silences them, only pointing
  fd 2 elsewhere does;
- its CUDA version check raises when jax starts its backends, jax logs the
  RuntimeError with its traceback and never registers `cuda`, and then no
  GPU topology can be made. `JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1`, read when the
  backends start, skips the check; jax then runs on the CPU as before.

So, on a machine with the plugin and without a driver, `prepare_jax` sets that
variable (unless the user set it), imports jax and has it register its plugins
with fd 2 captured (so that the user's own first jax call prints nothing
either), and the package's own calls that start jax's backends go through
`quiet_stderr`. This
module imports nothing of the package: it is the floor that every layer may use.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["SKIP_CUDA_CHECK_ENV", "backends_started", "cuda_plugin_installed", "nvidia_driver_present",
           "prepare_jax", "quiet_stderr", "start_backends_quietly"]

#: The variable that makes jax's CUDA plugin skip its CUDA version check (read when the backends start).
SKIP_CUDA_CHECK_ENV = "JAX_SKIP_CUDA_CONSTRAINTS_CHECK"

#: The module names of jax's CUDA PJRT plugins, newest first.
_CUDA_PLUGIN_MODULES = ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12")


class _Captured:
    """What was written to fd 2 inside `quiet_stderr` (`text`, after the block)."""

    text: str = ""


@contextlib.contextmanager
def quiet_stderr():
    """Send file descriptor 2 (C++ log lines, and Python's `sys.stderr`) to a temporary file for the
    block; yields an object whose `text` holds what was written, once the block is left.

    Both the descriptor and `sys.stderr` are redirected: jax's Python logging writes to the latter, the
    plugin's C++ code to the former. Nothing is lost for a caller that wants XLA's message: it is in
    `text`.
    """
    captured = _Captured()
    try:
        sys.stderr.flush()
    except (AttributeError, ValueError, OSError):
        pass
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 (an embedded interpreter): nothing to silence
        yield captured
        return
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            try:
                sys.stderr.flush()
            except (AttributeError, ValueError, OSError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", errors="replace")


def cuda_plugin_installed() -> bool:
    """Whether one of jax's CUDA plugins is installed (found, not imported)."""
    for name in _CUDA_PLUGIN_MODULES:
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return False


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA driver (Linux: `/proc/driver/nvidia`; else `libcuda` found)."""
    if Path("/proc/driver/nvidia").exists():
        return True
    if sys.platform.startswith("linux"):
        return False
    import ctypes.util

    return ctypes.util.find_library("cuda") is not None


def backends_started() -> bool:
    """Whether jax has started its backends in this process (after that, the CUDA check has run)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(getattr(bridge, "_backends", None))


def prepare_jax() -> None:
    """Where the CUDA plugin is installed and no NVIDIA driver is: skip the plugin's CUDA check (unless
    the user decided, or jax's backends already started) and import jax with its log lines captured.
    Elsewhere, nothing (jax is imported where it is needed, as before)."""
    if not cuda_plugin_installed() or nvidia_driver_present():
        return
    if not backends_started():
        os.environ.setdefault(SKIP_CUDA_CHECK_ENV, "1")
    with quiet_stderr():
        import jax  # noqa: F401

        _register_plugins()


def _register_plugins() -> None:
    """Have jax find and initialize its PJRT plugins now (inside `quiet_stderr`), without starting a backend.

    Loading the CUDA plugin's library writes "Could not find cuda drivers" to fd 2 again when jax first
    starts its backends, which is the user's first `jnp.ones` as often as the package's own call: done
    here, jax does not do it again (it registers plugins once). No backend is made, so the user's
    `jax.config` (`jax_platforms`, `jax_num_cpu_devices`) still decides which ones start. A jax without
    this step (it is jax's internal one) keeps its own timing, as before.
    """
    bridge = sys.modules.get("jax._src.xla_bridge")
    register = getattr(bridge, "_discover_and_register_pjrt_plugins", None)
    if register is None or backends_started():
        return
    try:
        register()
    except Exception:  # noqa: BLE001 (jax logs a plugin's failure itself; the backends' start reports it)
        pass


def start_backends_quietly() -> None:
    """Start jax's backends (if not yet) with the plugin's log lines captured: the package's calls that
    trace a function go through here first, so that the lines they would trigger are not printed."""
    if backends_started():
        return
    prepare_jax()
    import jax

    with quiet_stderr():
        try:
            jax.devices()
        except RuntimeError:  # no backend at all: the caller's own jax call reports it
            pass
