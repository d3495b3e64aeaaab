#!/usr/bin/env python
"""Peak memory (resident set) of the README's commands, the notebooks and `analyze`, against goals.

Each command runs in a process of its own, one at a time; its peak is the largest resident set of any process of
its tree (`os.wait4`'s `ru_maxrss`: a notebook's kernel, the measuring worker, the command itself). The peer is a
bare `import xla_costmodel` measured the same way in the same run; each peak is also given as a multiple of it.

    python scripts/bench_memory.py                      # everything (about 30 min on 2 loaded cores)
    python scripts/bench_memory.py --only compare --splits source source-cv --models roofline
    python scripts/bench_memory.py --only run notebooks analyze --json out.json

Goals (issue 33): `compare` with any split at most 1.5 GB; `scripts/run` at most 2 GB; each notebook at most 2 GB;
`analyze` of the largest fixture and any test process at most 4 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GB = 1e9
GOALS_GB = {"compare": 1.5, "run": 2.0, "notebook": 2.0, "analyze": 4.0}
KINDS = ("compare", "run", "notebooks", "analyze")


def peak_rss(argv: list[str], *, cwd: Path = ROOT, env: dict | None = None) -> tuple[int, float, int, str]:
    """Run `argv`; returns (peak resident bytes of any process of its tree, wall seconds, exit status, output tail)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        tail = log.read()[-2000:].decode(errors="replace")
    # Linux gives ru_maxrss in KiB: the largest of the child and every descendant it waited for.
    return usage.ru_maxrss * 1024, time.perf_counter() - t0, proc.returncode, tail


def largest_fixture() -> Path:
    return max((ROOT / "hlo_fixtures").glob("*.hlo"), key=lambda p: p.stat().st_size)


def commands(args, scratch: Path) -> list[tuple[str, str, list[str]]]:
    """(name, goal key, argv) of every command to measure."""
    py = sys.executable
    out = []
    if "compare" in args.only:
        models = ["--models", *args.models] if args.models else []
        for split in args.splits:
            out.append((f"compare --split {split}" + (f" --models {' '.join(args.models)}" if args.models else ""),
                        "compare", [py, "-m", "xla_costmodel.cli", "compare", "--split", split, *models]))
    if "run" in args.only:
        # What scripts/run executes once its environment exists (scripts/_env.sh), writing to a scratch folder.
        out.append(("scripts/run (demo)", "run", [py, "-m", "xla_costmodel.cli", "demo", "--out", str(scratch / "out")]))
    if "notebooks" in args.only:
        for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
            # As scripts/test runs them (nbmake), with the test runner's memory guard off to see the true peak.
            out.append((f"notebook {nb.name}", "notebook",
                        [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbmake", "--nbmake-timeout=1200",
                         "--memory-limit-gb", "0", str(nb.relative_to(ROOT))]))
    if "analyze" in args.only:
        fixture = largest_fixture()
        out.append((f"analyze {fixture.relative_to(ROOT)}", "analyze",
                    [py, "-m", "xla_costmodel.cli", "analyze", str(fixture.relative_to(ROOT))]))
    return out


def main(argv=None) -> int:
    from xla_costmodel.compare import DEFAULT_MODELS, SPLITS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS), help="what to measure (default all)")
    p.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS), help="compare's splits (default all)")
    p.add_argument("--models", nargs="+", default=None,
                   help=f"compare's models (default compare's own: {' '.join(DEFAULT_MODELS)})")
    p.add_argument("--json", metavar="PATH", help="also write the table as JSON records")
    args = p.parse_args(argv)

    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"), "MPLBACKEND": "Agg",
           "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as tmp:
        todo = [("import xla_costmodel (peer)", None, [sys.executable, "-c", "import xla_costmodel"])]
        todo += commands(args, Path(tmp))
        for i, (name, goal_key, cmd) in enumerate(todo, 1):
            print(f"[{i}/{len(todo)}] {name} ...", file=sys.stderr, flush=True)
            peak, wall, status, tail = peak_rss(cmd, env=env)
            if status != 0:
                print(f"   exit status {status}; last output:\n{tail}", file=sys.stderr)
            print(f"   peak {peak / GB:.2f} GB in {wall:.0f} s", file=sys.stderr, flush=True)
            rows.append({"command": name, "peak_rss_gb": peak / GB, "wall_s": wall, "exit_status": status,
                         "goal_gb": GOALS_GB.get(goal_key, float("nan")) if goal_key else float("nan")})
    peer = rows[0]["peak_rss_gb"]
    for row in rows:
        row["over_import"] = row["peak_rss_gb"] / peer
        goal = row["goal_gb"]
        row["meets_goal"] = "" if goal != goal else ("yes" if row["peak_rss_gb"] <= goal and row["exit_status"] == 0
                                                     else "NO")
    import pandas as pd

    from _bench_common import print_table

    table = pd.DataFrame(rows, columns=["command", "peak_rss_gb", "over_import", "goal_gb", "meets_goal", "wall_s",
                                        "exit_status"])
    print_table(f"peak resident memory (peer: a bare `import xla_costmodel`, {peer:.3f} GB)", table, index=False)
    if args.json:
        Path(args.json).write_text(json.dumps(table.to_dict("records"), indent=1) + "\n")
    return 0 if (table["meets_goal"] != "NO").all() else 1


if __name__ == "__main__":
    raise SystemExit(main())
