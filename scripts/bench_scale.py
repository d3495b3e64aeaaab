#!/usr/bin/env python
"""`analyze_many` on the local process pool against a plain loop of `analyze`, in the same run.

    .venv/bin/python scripts/bench_scale.py                 # the post-optimization fixtures, and 10 copies of them
    .venv/bin/python scripts/bench_scale.py --copies 1 40 --rounds 7 --workers 2
    .venv/bin/python scripts/bench_scale.py --engine ray    # a local Ray instance instead (needs Ray)

The peer is what a user writes without `analyze_many`: `analyze(path)` for
each file in this process, rows concatenated. Both price every kernel of
`hlo_fixtures/*.post.hlo`, modules XLA:CPU optimized, on this CPU (`host`)
with `roofline` (`--copies N`: the
same files N times over, as N× as many sources). The rounds alternate the
two, and the speed-up printed is the median over rounds of loop time /
engine time. The first engine call of the process also starts the pool's
server process (or the Ray instance); it is printed apart as `cold`, and the
rounds after it are warm. Timings on a shared machine drift; compare ratios
from the same run only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# CPU-optimized modules priced on the CPU they were compiled for (on a GPU device, `analyze` would say, for
# every module, that it prices XLA:CPU's kernels).
DEVICE, MODEL = "host", "roofline"


def plain_loop(sources: dict[str, str]):
    import pandas as pd

    import xla_costmodel as xc

    frames = []
    for name, path in sources.items():
        frames.append(pd.DataFrame(xc.analyze(path, device=DEVICE, model=MODEL)).assign(source=name))
    return pd.concat(frames, ignore_index=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--copies", type=int, nargs="+", default=[1, 10], help="workloads: the fixtures this many times")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds per workload (default 5)")
    p.add_argument("--workers", type=int, default=None, help="pool processes (default: every CPU)")
    p.add_argument("--engine", choices=("local", "ray"), default="local")
    args = p.parse_args(argv)

    import os

    from xla_costmodel.scale import analyze_many
    from xla_costmodel.scale import usable_cpus as _usable_cpus

    files = sorted(str(f.relative_to(ROOT)) for f in (ROOT / "hlo_fixtures").glob("*.post.hlo"))
    os.chdir(ROOT)
    workers = args.workers or _usable_cpus()
    print(f"engine {args.engine}, {workers} workers, {_usable_cpus()} CPUs usable; {len(files)} fixtures")

    def engine_run(sources):
        return analyze_many(sources, device=DEVICE, model=MODEL, engine=args.engine, workers=workers,
                            progress=False)

    if args.engine == "ray":
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        t0 = time.perf_counter()
        engine_run({files[0]: files[0]})
        print(f"cold: first call (starts the {'pool server' if args.engine == 'local' else 'Ray workers'}, "
              f"one source): {time.perf_counter() - t0:.2f} s")
        for copies in args.copies:
            sources = {f"{i}/{f}": f for i in range(copies) for f in files}
            ratios, loop_s, engine_s = [], [], []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                plain_loop(sources)
                t1 = time.perf_counter()
                engine_run(sources)
                t2 = time.perf_counter()
                loop_s.append(t1 - t0)
                engine_s.append(t2 - t1)
                ratios.append((t1 - t0) / (t2 - t1))
            print(f"{len(sources):5d} modules: plain loop {statistics.median(loop_s):.2f} s, "
                  f"analyze_many {statistics.median(engine_s):.2f} s (medians of {args.rounds}); "
                  f"speed-up {statistics.median(ratios):.2f}x (median of per-round ratios, "
                  f"min {min(ratios):.2f}, max {max(ratios):.2f})")
    finally:
        if args.engine == "ray":
            ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
