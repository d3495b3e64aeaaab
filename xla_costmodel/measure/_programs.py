"""Measuring this project's own programs and the supplementary kernels: the training data besides the suite.

The measurement suite (`_suite`) sweeps single kernels from 2^14 elements
up. The calibrations are also fitted to (`datasets.row_roles`):

- the supplementary kernels (`_extra_suite`: small sizes and the operations
  the suite lacks, each measured in a chain; `kernel_class` `extra-<class>`,
  `source` `extra`), which the `fitted`, `learned` and `*-calibrated` models
  train on with the suite;
- this project's own programs: the training programs (`extra-program`, in
  the same suite) and the zoo's programs (`measure_zoo`, `kernel_class`
  `program`, `source` `zoo`), which the context models and the program
  overhead also train on.

`xla_costmodel.calibrate(device="host")` runs them after the suite
(`measure_supplementary`), so that a calibration made on a user's machine
is fitted to the same kinds of data as the shipped one;
`scripts/measure_programs.py` runs them for the shipped files. Every case
is measured with the one methodology (`measure_program`), `rounds` passes
over all cases with each case's samples pooled, as the suite does.
"""

from __future__ import annotations

import sys
import uuid
import warnings
from collections.abc import Callable, Mapping

import pandas as pd

from ._dataset import DATASET_COLUMNS
from ._measure import measure_program
from ._method import DEFAULT_METHOD, ConcurrentKernelsWarning
from ._runs import merge_measurements
from ._suite import measurement_rows

__all__ = ["UNFUSED_OPTIONS", "measure_extra", "measure_supplementary", "measure_zoo"]

#: XLA options that compile a program without fusion (`program-unfused` rows).
UNFUSED_OPTIONS = {"xla_disable_hlo_passes": "fusion"}


def measure_supplementary(*, rounds: int = 2, progress: bool = True) -> pd.DataFrame:
    """The training data besides the suite, measured here: every supplementary kernel and training program
    (`measure_extra`) and every zoo program as XLA compiles it (`measure_zoo`), `rounds` passes each (the
    full suite's; `scripts/measure_programs.py` makes 3 for the shipped file). `progress`: a progress bar.

    **Returns:** dataset rows (`DATASET_COLUMNS`); `attrs["failed"]` names what could not be measured.
    """
    from .._progress import progress_bar
    from ..zoo import program_names
    from ._extra_suite import extra_cases

    names = program_names()
    bar = progress_bar(rounds * (len(extra_cases()) + len(names)), "measure supplementary", "case",
                       enabled=progress)

    def report(label: str) -> None:
        bar.set_postfix_str(label.split("] ", 1)[-1], refresh=False)
        bar.update(1)

    try:
        frames = [measure_extra(rounds=rounds, progress=report), measure_zoo(names, rounds=rounds, progress=report)]
    finally:
        bar.close()
    df = pd.concat([f for f in frames if len(f)], ignore_index=True)
    df.attrs["failed"] = {**frames[0].attrs.get("failed", {}),
                          **{f"{n} ({c})": why for (n, c), why in frames[1].attrs.get("failed", {}).items()}}
    return df


def _say(progress, line: str) -> None:
    """`progress`: True prints `line` on stderr; a callable is called with each case's label (`[round ...]`)."""
    if callable(progress):
        if line.startswith("[round"):
            progress(line)
    elif progress:
        print(line, file=sys.stderr, flush=True)


def measure_zoo(names, *, rounds: int = 3, repeats: int = DEFAULT_METHOD.repeats,
                discard: int = DEFAULT_METHOD.discard, unfused: bool = False, progress=True,
                builders: Mapping[str, tuple[Callable, dict]] | None = None) -> pd.DataFrame:
    """Dataset rows for the kernels of the named zoo programs (`kernel_class` `program`; `program-unfused`
    too, compiled without XLA's fusion passes, when `unfused`), `rounds` passes pooled.

    `progress`: True prints each case on stderr, a callable is called with its label.
    `builders`: `{name: (build, sizes)}` for programs that are not the zoo's own (`build() -> (fn, args)`;
    `sizes` recorded in `params`). A program that fails is left out and named in `attrs["failed"]`.
    """
    from ..zoo import get_program

    variants = [("program", True)] + ([("program-unfused", False)] if unfused else [])
    jobs = [(name, cls, fused) for name in names for cls, fused in variants]
    parts: dict[tuple, list] = {(n, c): [] for n, c, _ in jobs}
    failed: dict[tuple, str] = {}
    suite_run = uuid.uuid4().hex[:12]
    for r in range(rounds):
        for name, cls, fused in jobs:
            if (name, cls) in failed:
                continue
            _say(progress, f"[round {r + 1}/{rounds}] {name}{'' if fused else ' (unfused)'}")
            options = None if fused else UNFUSED_OPTIONS
            try:
                fn, args = (builders[name][0] if builders and name in builders else get_program(name).build)()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConcurrentKernelsWarning)
                    parts[(name, cls)].append(measure_program(fn, *args, repeats=repeats, discard=discard,
                                                              check="warn", compiler_options=options))
            except Exception as exc:  # one program failing must not lose the others
                failed[(name, cls)] = f"{type(exc).__name__}: {exc}"
                _say(progress, f"  skipped {name} ({cls}): {failed[(name, cls)]}")
    rows: list[dict] = []
    for name, cls, fused in jobs:
        if (name, cls) in failed or not parts[(name, cls)]:
            continue
        m = merge_measurements(parts[(name, cls)])
        rows.extend(
            measurement_rows(
                m,
                case=name if fused else f"{name}/unfused",
                kernel=name,
                kernel_class=cls,
                dtype="",
                size=0,
                # rounds/repeats/discard tell which pooled sample came from which pass
                # (`xla_costmodel.compare._ceiling` splits them for the noise ceiling).
                params={"program": name, "fusion": fused, "rounds": rounds, "repeats": repeats, "discard": discard,
                        **({"sizes": builders[name][1]} if builders and name in builders else {})},
                source="zoo",
                program=name,
                suite_run=suite_run,
                rounds=rounds,
            )
        )
    return _dataset_frame(rows, failed)


def measure_extra(only=None, *, rounds: int = 3, repeats: int = DEFAULT_METHOD.repeats,
                  discard: int = DEFAULT_METHOD.discard, progress=True) -> pd.DataFrame:
    """Dataset rows for the supplementary measurement kernels (`_extra_suite`: `kernel_class`
    `extra-<class>`, the training programs `extra-program` among them), `rounds` passes pooled; `only`:
    glob patterns of the cases to run; `progress` as for `measure_zoo`. A case that fails is left out and named in `attrs["failed"]`."""
    import jax
    import numpy as np

    from ._extra_suite import extra_cases, is_chain

    cases = extra_cases(only)
    parts: dict[int, list] = {i: [] for i in range(len(cases))}
    failed: dict[str, str] = {}
    suite_run = uuid.uuid4().hex[:12]
    for r in range(rounds):
        for i, (name, cls, size, build) in enumerate(cases):
            case = f"{name}/{size}"
            if case in failed:
                continue
            _say(progress, f"[round {r + 1}/{rounds}] {case}")
            rng = np.random.default_rng([7, i])
            try:
                with jax.enable_x64("f64" in name), warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConcurrentKernelsWarning)
                    fn, args = build(size, rng)
                    parts[i].append(measure_program(fn, *args, repeats=repeats, discard=discard, check="warn"))
            except Exception as exc:  # one case failing must not lose the others
                failed[case] = f"{type(exc).__name__}: {exc}"
                _say(progress, f"  skipped {case}: {failed[case]}")
    rows: list[dict] = []
    for i, (name, cls, size, build) in enumerate(cases):
        case = f"{name}/{size}"
        if case in failed or not parts[i]:
            continue
        rows.extend(measurement_rows(
            merge_measurements(parts[i]), case=case, kernel=name, kernel_class=f"extra-{cls}",
            dtype="float64" if "f64" in name else "float32", size=size,
            params={"chain": is_chain(name),
                    "size_meaning": "elements (matmul/conv/sort/fft: side; programs: width)",
                    "rounds": rounds, "repeats": repeats, "discard": discard},
            source="extra", suite_run=suite_run, rounds=rounds,
        ))
    return _dataset_frame(rows, failed)


def _dataset_frame(rows: list[dict], failed: dict[str, str]) -> pd.DataFrame:
    """The rows in the dataset's column order, with this run's launch cost: the fastest kernel of any
    case (a one-element broadcast or copy), the same notion as the suite's; the failed cases in `attrs`."""
    df = pd.DataFrame(rows)
    if len(df):
        df["launch_overhead_s"] = float(df["min_per_launch_s"].min())
        df = df[list(DATASET_COLUMNS)]
    df.attrs["failed"] = failed
    return df
