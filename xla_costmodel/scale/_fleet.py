"""Fleet measurement: the measurement suite (or one program) on every kind of device of a Ray cluster.

One Ray task per requested accelerator type, placed by Ray's
`accelerator_type` resource on a node with that GPU kind (and given one GPU);
`host` is the CPU task kind, placed on any node and run with jax on the CPU.
Each task runs in a fresh worker process (`max_calls=1`: jax starts clean,
with XLA:GPU command buffers off before its backend starts), measures on
whatever device jax finds there, and tags its rows with that device as read
on the node (`backend`, `device_kind`, `device`, as every dataset row), the
accelerator type it was sent for (`requested_accelerator`) and the node's
host name (`node`). The driver appends each task's rows to one calibration
dataset as the task finishes, so a task that fails costs only its own rows.
"""

from __future__ import annotations

import socket
import warnings
from dataclasses import dataclass

import pandas as pd

from ._engines import RayEngine, Task, reissue_warnings
from ._many import TaskFailedWarning

__all__ = ["FleetDeviceWarning", "HOST_KIND", "MeasureRequest", "measure_fleet", "measure_on_node"]

#: The accelerator type that asks for a CPU task (jax on the CPU of any node).
HOST_KIND = "host"


class FleetDeviceWarning(UserWarning):
    """A task ran on another device than its accelerator type names (its rows say which it really was)."""


@dataclass(frozen=True)
class MeasureRequest:
    """What every task of a fleet run measures: the suite (`quick`, `only`) or one `jax_program`."""

    quick: bool = False
    only: tuple[str, ...] | None = None
    repeats: int | None = None
    discard: int | None = None
    rounds: int | None = None
    jax_program: str | None = None


def measure_on_node(request: MeasureRequest, accelerator: str) -> pd.DataFrame:
    """In a fresh worker: the requested measurement on this node's device, as dataset rows."""
    from ..measure import disable_gpu_command_buffers, measurement_rows, measure_program, run_suite, steady_allocator

    if accelerator != HOST_KIND:
        try:
            disable_gpu_command_buffers()
        except RuntimeError:  # a backend already started: measure_program warns about it
            pass
    if request.jax_program:
        from ..measure.programs import FULL, QUICK
        from ..measure.programs import load_program

        mode = QUICK if request.quick else FULL
        fn, args = load_program(request.jax_program)
        steady_allocator()
        m = measure_program(fn, *args, repeats=mode.repeats if request.repeats is None else request.repeats,
                            discard=mode.discard if request.discard is None else request.discard)
        rows = pd.DataFrame(measurement_rows(m, case=request.jax_program,
                                             kernel=request.jax_program.rpartition(":")[2]))
    else:
        rows = run_suite(quick=request.quick, only=list(request.only) if request.only else None,
                         repeats=request.repeats, discard=request.discard, rounds=request.rounds, progress=False)
    rows = pd.DataFrame(rows)
    rows["requested_accelerator"] = accelerator
    rows["node"] = socket.gethostname()
    return rows


def _task(request: MeasureRequest, accelerator: str) -> Task:
    if accelerator == HOST_KIND:
        resources = {"num_cpus": 1, "runtime_env": {"env_vars": {"JAX_PLATFORMS": "cpu"}}}
    else:
        resources = {"num_cpus": 1, "num_gpus": 1, "accelerator_type": accelerator}
    return Task(accelerator, measure_on_node, (request, accelerator), {**resources, "max_calls": 1})


def measure_fleet(
    accelerator_types,
    *,
    quick: bool = False,
    only=None,
    repeats: int | None = None,
    discard: int | None = None,
    rounds: int | None = None,
    jax_program: str | None = None,
    address: str | None = None,
    out=None,
    progress: bool = True,
) -> pd.DataFrame:
    """Measure on every requested kind of device of a Ray cluster, into one calibration dataset.

    **Arguments:**

    - `accelerator_types`: Ray accelerator types (`"H100"`, `"A100"`,
      `"A100-80G"`, ... as Ray names the GPUs it detects), one task each;
      `"host"` adds a task measuring the CPU.
    - `quick`, `only`, `repeats`, `discard`, `rounds`: as for `run_suite`.
    - `jax_program`: `"MODULE:FUNCTION"` (as `xla-costmodel measure --jax`) to
      measure that program instead of the suite; the module must be
      importable on the nodes.
    - `address`: the Ray cluster (`"auto"`, `"HOST:6379"`, `"ray://HOST:10001"`);
      None starts a local instance (or uses this process's Ray connection).
    - `out`: a dataset file (`.parquet`, `.csv`) each task's rows are
      appended to as it finishes (`append_dataset`: atomic, created if absent).
    - `progress`: a progress bar over the tasks.

    **Returns:** the rows of every task that finished (the dataset's
    columns, plus `requested_accelerator` and `node`); `attrs["failures"]`
    maps each failed accelerator type to its error (also one
    `TaskFailedWarning`). A task that ran on another device than it was
    sent for (e.g. jax found no GPU on the node) keeps the device it really
    used and gives a `FleetDeviceWarning`.

    **Raises:** `RayUnavailableError` without Ray; `ValueError` for no or
    repeated accelerator types.
    """
    from .._progress import progress_bar
    from ..measure import append_dataset

    kinds = [str(k) for k in accelerator_types]
    if not kinds:
        raise ValueError("name at least one accelerator type (a GPU kind such as H100, or 'host' for the CPU)")
    repeated = sorted({k for k in kinds if kinds.count(k) > 1})
    if repeated:
        raise ValueError(f"accelerator type(s) given twice: {', '.join(repeated)}")
    request = MeasureRequest(quick, tuple(only) if only else None, repeats, discard, rounds, jax_program)
    engine = RayEngine(address)
    frames, failures = [], {}
    with progress_bar(len(kinds), "measure fleet", "task", enabled=progress) as bar:
        for outcome in engine.run(_task(request, k) for k in kinds):
            reissue_warnings(outcome)
            if outcome.ok:
                rows = outcome.value
                _check_device(outcome.key, rows)
                if out is not None:
                    append_dataset(rows, out)
                frames.append(rows)
            else:
                failures[outcome.key] = outcome.error
                bar.set_postfix_str(f"{len(failures)} failed", refresh=False)
            bar.update(1)
    merged = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    merged.attrs["failures"] = failures
    if failures:
        shown = "; ".join(f"{k}: {e}" for k, e in failures.items())
        warnings.warn(f"{len(failures)} of {len(kinds)} measurement tasks failed: {shown}", TaskFailedWarning,
                      stacklevel=2)
    return merged


def _check_device(accelerator: str, rows: pd.DataFrame) -> None:
    if accelerator == HOST_KIND or not len(rows):
        return
    kind = str(rows["device_kind"].iloc[0])
    wanted = accelerator.split("-")[0].lower()
    if wanted not in kind.lower():
        warnings.warn(
            f"the task for accelerator type {accelerator!r} measured {kind!r} ({rows['device'].iloc[0]}) on node "
            f"{rows['node'].iloc[0]!r}: jax found no such GPU there; its rows are tagged with the device it used",
            FleetDeviceWarning, stacklevel=3,
        )
