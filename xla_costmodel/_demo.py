"""The main job (`scripts/run`, `xla-costmodel demo`): one bundled program end to end.

Each stage prints what it found and writes its table under `out/<program>/`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd


def _stage(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def _done(t0: float) -> None:
    print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)


def run_demo(program: str | None = None, out: str = "out") -> int:
    import jax

    from . import from_jax
    from .cli import module_statistics
    from .zoo import DEFAULT_PROGRAM, get_program

    name = program or DEFAULT_PROGRAM
    spec = get_program(name)
    folder = Path(out) / name
    folder.mkdir(parents=True, exist_ok=True)
    print(f"xla_costmodel demo: program '{name}' ({spec.description}); jax {jax.__version__}, backend {jax.default_backend()}")
    print(f"output folder: {folder}")

    t0 = _stage("1. HLO of the program: as lowered (unfused) and as XLA optimized it")
    fn, args = spec.build()
    lowered = from_jax(fn, *args, optimized=False)
    optimized = from_jax(fn, *args, optimized=True)
    (folder / "lowered.hlo").write_text(lowered.to_text())
    (folder / "optimized.hlo").write_text(optimized.to_text())
    rows = []
    for label, module in (("lowered", lowered), ("optimized", optimized)):
        stats = module_statistics(module)
        top = ", ".join(f"{op} {n}" for op, n in list(stats["opcodes"].items())[:6])
        rows.append(
            {
                "module": label,
                "computations": stats["computations"],
                "instructions": stats["instructions"],
                "entry instructions": stats["entry_instructions"],
                **{k: stats[k] for k in ("flops", "transcendentals", "bytes_accessed") if k in stats},
                "most common opcodes": top,
            }
        )
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    (folder / "statistics.json").write_text(json.dumps(rows, indent=1))
    _done(t0)
    print(f"\nwrote {sorted(p.name for p in folder.iterdir())} to {folder}")
    return 0
