#!/usr/bin/env python
"""Measure the kernels of the independent corpus (`xla_costmodel.corpus`) into a dataset.

    .venv/bin/python scripts/measure_corpus.py --out corpus_cpu.parquet                  # everything
    .venv/bin/python scripts/measure_corpus.py --out x.parquet --source optax jax        # some libraries
    .venv/bin/python scripts/measure_corpus.py --out x.parquet --program equinox_mlp_fwd --size small
    .venv/bin/python scripts/measure_corpus.py --list [--source ...]                     # programs and kernel counts

Every program at every size (or the `--size` ones) is compiled and measured
with `xla_costmodel.measure.measure_program`: the project's one methodology
(steady allocator, one untraced call, `--repeats` runs of which the first
`--discard` are thrown away, the minimum over the kept runs; at least 20
kept runs by default: 30 - 4 = 26), in `--rounds` passes over all programs
whose samples are pooled per program. Rows have the calibration dataset's
schema (`read_dataset` reads them) with `source` = the library,
`program` = the corpus program, `size` = the size name, `case` =
`<program>@<size>`, `kernel` = the program, `kernel_class` = `program`
(held-out data: `compare` and `calibrate` never fit to it), and `params` =
the size's arguments, the library's version and the rounds. Rows are
appended atomically to `--out`; a program that fails (or whose library is
missing) is reported and skipped, the others are kept.

`--list` compiles every selected program without measuring it and prints
each module's kernel count as `analyze` counts kernels (rows that are not
free), and the totals.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _jobs(args):
    from xla_costmodel import corpus

    names = list(corpus.PROGRAMS)
    if args.source:
        unknown = sorted(set(args.source) - set(corpus.sources()))
        if unknown:
            raise SystemExit(f"measure_corpus: unknown source(s) {', '.join(unknown)}; sources: "
                             f"{', '.join(corpus.sources())}")
        names = [n for n in names if corpus.PROGRAMS[n].source in args.source]
    if args.program:
        unknown = sorted(set(args.program) - set(corpus.PROGRAMS))
        if unknown:
            raise SystemExit(f"measure_corpus: unknown program(s) {', '.join(unknown)}; see --list")
        names = [n for n in names if n in args.program]
    jobs = []
    for n in names:
        program = corpus.PROGRAMS[n]
        for size in program.size_names:
            if not args.size or size in args.size:
                jobs.append((program, size))
    if not jobs:
        raise SystemExit("measure_corpus: nothing selected")
    return jobs


def _library_version(program) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(program.source)
    except PackageNotFoundError:
        return ""


def _bar(jobs, enabled: bool, desc: str):
    if not enabled:
        return jobs
    from tqdm.auto import tqdm

    return tqdm(jobs, desc=desc, unit="module", file=sys.stderr, dynamic_ncols=True)


def list_programs(jobs, progress: bool) -> int:
    """Compile every job and print its kernel count (what `analyze` counts)."""
    import jax
    import pandas as pd

    from xla_costmodel import analyze

    rows = []
    bar = _bar(jobs, progress, "compile corpus")
    for program, size in bar:
        if progress and hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(f"{program.name}@{size}", refresh=False)
        row = {"program": program.name, "source": program.source, "size": size}
        try:
            fn, fargs = program.build(size)
            t0 = time.perf_counter()
            text = jax.jit(fn).lower(*fargs).compile().as_text()
            row["compile_s"] = time.perf_counter() - t0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                row["kernels"] = analyze(text, device="host", model="roofline").summary()["kernels"]
        except Exception as exc:  # noqa: BLE001 - one program failing must not hide the others
            row["error"] = f"{type(exc).__name__}: {exc}"[:200]
        rows.append(row)
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(df.to_string(index=False))
    ok = df[df.get("error", pd.Series(index=df.index, dtype=object)).isna()] if "error" in df else df
    print(f"\n{ok['program'].nunique()} programs, {len(ok)} modules, {int(ok['kernels'].sum())} kernels, "
          f"{ok['source'].nunique()} sources; failed: {len(df) - len(ok)}")
    return 0 if len(ok) == len(df) else 1


def measure_jobs(jobs, *, rounds: int, repeats: int, discard: int, progress: bool):
    """Dataset rows for every job (rounds pooled), and {case: why} for the jobs that failed."""
    import pandas as pd

    from xla_costmodel.measure import ConcurrentKernelsWarning, DATASET_COLUMNS, measure_program, merge_measurements
    from xla_costmodel.measure import measurement_rows

    parts: dict[int, list] = {i: [] for i in range(len(jobs))}
    failed: dict[str, str] = {}
    work = [(r, i) for r in range(rounds) for i in range(len(jobs))]
    bar = _bar(work, progress, "measure corpus")
    for r, i in bar:
        program, size = jobs[i]
        case = f"{program.name}@{size}"
        if case in failed:
            continue
        if progress and hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(case + (f" (round {r + 1})" if rounds > 1 else ""), refresh=False)
        try:
            fn, fargs = program.build(size)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConcurrentKernelsWarning)
                parts[i].append(measure_program(fn, *fargs, repeats=repeats, discard=discard, check="warn"))
            del fn, fargs
        except Exception as exc:  # noqa: BLE001 - one program failing must not lose the others
            failed[case] = f"{type(exc).__name__}: {exc}"[:300]
            print(f"  skipped {case}: {failed[case]}", file=sys.stderr)
    suite_run = uuid.uuid4().hex[:12]
    rows: list[dict] = []
    for i, (program, size) in enumerate(jobs):
        case = f"{program.name}@{size}"
        if case in failed or not parts[i]:
            continue
        rows.extend(measurement_rows(
            merge_measurements(parts[i]), case=case, kernel=program.name, kernel_class="program", size=size,
            params={"program": program.name, "size": size, "size_args": dict(program.sizes[size]),
                    "library": program.source, "library_version": _library_version(program)},
            source=program.source, program=program.name, suite_run=suite_run, rounds=rounds,
        ))
    df = pd.DataFrame(rows)
    if len(df):
        # The launch cost of this run: the fastest kernel of any program, as measure_programs.py defines it.
        df["launch_overhead_s"] = float(df["min_per_launch_s"].min())
        df = df[list(DATASET_COLUMNS)]
    return df, failed


def main(argv: list[str] | None = None) -> int:
    from xla_costmodel.measure import DEFAULT_METHOD

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", metavar="PATH", help="dataset to append to (.parquet, .csv or .csv.gz)")
    p.add_argument("--list", action="store_true", help="compile and count kernels, measure nothing")
    p.add_argument("--source", nargs="+", metavar="LIBRARY", help="only these sources (e.g. flax optax jax)")
    p.add_argument("--program", nargs="+", metavar="NAME", help="only these corpus programs")
    p.add_argument("--size", nargs="+", metavar="SIZE", help="only these sizes (small, medium, large)")
    p.add_argument("--rounds", type=int, default=1, help="passes over all programs, samples pooled (default 1)")
    p.add_argument("--repeats", type=int, default=DEFAULT_METHOD.repeats,
                   help=f"runs per program and round (default {DEFAULT_METHOD.repeats})")
    p.add_argument("--discard", type=int, default=DEFAULT_METHOD.discard,
                   help=f"leading warm-up runs thrown away (default {DEFAULT_METHOD.discard})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if not args.list and not args.out:
        p.error("--out PATH is required (or --list)")
    if args.repeats - args.discard < 20 and not args.list:
        print(f"note: {args.repeats - args.discard} kept runs per round; the corpus is meant to be measured "
              "with at least 20", file=sys.stderr)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from xla_costmodel.measure import append_dataset, set_allocator

    set_allocator("steady")  # before jax starts its threads, so that they share one arena
    jobs = _jobs(args)
    if args.list:
        return list_programs(jobs, not args.no_progress)
    t0 = time.perf_counter()
    df, failed = measure_jobs(jobs, rounds=args.rounds, repeats=args.repeats, discard=args.discard,
                              progress=not args.no_progress)
    elapsed = time.perf_counter() - t0
    total = append_dataset(df, args.out) if len(df) else 0
    if len(df):
        by = df.groupby("source").agg(programs=("program", "nunique"), modules=("case", "nunique"),
                                      kernels=("hlo_op", "size"))
        print(by.to_string())
    print(f"measured {len(jobs) - len(failed)} of {len(jobs)} modules ({len(df)} kernels) in {elapsed:.0f} s "
          f"({args.rounds} round(s) of {args.repeats} runs, first {args.discard} discarded, minimum kept); "
          f"{args.out} holds {total} rows")
    for case, why in failed.items():
        print(f"  failed: {case}: {why}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
