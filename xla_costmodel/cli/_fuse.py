"""`xla-costmodel fuse FILE --device D --model M -o OUT.hlo [--json] [--no-simplify]`: simulate priority fusion."""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

from .._atomic import write_atomically as _write_atomically
from ..models import DEFAULT_DEVICE, DEFAULT_MODEL
from ._common import (UsageError, command, count, fusions_in, json_records, json_value, print_table,
                      resolve_device_and_model, say_note)

_COLUMNS = ["step", "producer", "producer_opcode", "consumers", "priority_us", "unfused_us", "fused_us", "reason"]


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", default=None, help="unfused HLO text file (e.g. JAX's lowered module)")
    p.add_argument("--jax", metavar="FILE:FACTORY", default=None,
                   help="instead of FILE, a jax program: FACTORY (in an importable module, or a path/to/file.py) "
                        "takes no arguments and returns (fn, args); its lowered module is fused")
    p.add_argument("--device", default=DEFAULT_DEVICE, help=f"device name (default {DEFAULT_DEVICE})")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"cost model that sets the priorities (default {DEFAULT_MODEL})")
    p.add_argument("-o", "--output", required=True, metavar="OUT.hlo", help="where to write the fused module")
    p.add_argument("--json", action="store_true", help="print the step log and summary as JSON")
    p.add_argument("--no-simplify", action="store_true",
                   help="fuse the module as written: without XLA's algebraic simplifier and DotMerger, which XLA "
                        "runs before fusion (simulate_fusion(simplify=False))")
    # --- fusion search (search_fusion) ---
    p.add_argument("--search", action="store_true",
                   help="search the legal fusion plans for the lowest predicted time instead of running greedy "
                        "priority fusion alone; writes the best plan found and prints greedy's gap to it")
    p.add_argument("--budget", type=float, default=10.0, metavar="SECONDS",
                   help="time budget of --search in seconds (default 10)")


def _us(seconds: float) -> float:
    return seconds * 1e6 if math.isfinite(seconds) else seconds


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


@command("fuse", "simulate XLA's priority fusion on an HLO module and write the fused module", _configure)
def _fuse(args: argparse.Namespace) -> int:
    import warnings

    from ..fusion import simulate_fusion
    from ..hlo import load_hlo

    if (args.file is None) == (args.jax is None):
        raise UsageError("give either an HLO FILE or --jax FILE:FACTORY")
    src, out = Path(args.file if args.jax is None else args.jax.rsplit(":", 1)[0]), Path(args.output)
    if args.jax is None and not src.exists():
        raise UsageError(f"{src}: no such file")
    if args.jax is None and src.is_dir():
        raise UsageError(f"{src}: is a directory, expected an HLO text file")
    if _same_file(src, out):
        raise UsageError(f"{out}: is the input file; refusing to overwrite it (choose another -o)")
    if out.is_dir():
        raise UsageError(f"{out}: is a directory; give a file name for the fused module")
    if not out.resolve().parent.is_dir():
        raise UsageError(f"{out.parent}: no such directory for the fused module")
    if not args.budget > 0:
        raise UsageError(f"--budget must be a positive number of seconds, got {args.budget}")
    device, model = resolve_device_and_model(args)
    if args.jax is not None:
        from ..hlo import from_jax
        from ._measure import load_target

        fn, fargs = load_target(args.jax)
        module = from_jax(fn, *fargs, optimized=False)
    else:
        module = load_hlo(src)
        _say_if_fused(src, module)
    if args.search:
        return _search(args, module, device, model, out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = simulate_fusion(module, device=device, model=model, simplify=not args.no_simplify)
    _write_atomically(out, result.module.to_text())

    steps = result.steps
    if args.json:
        summary = result.summary()
        summary["output"] = str(out)
        print(json.dumps({"summary": json_value(summary), "steps": json_records(steps),
                          "rejected": json_records(result.rejected), "notes": result.notes,
                          "not_simulated": json_records(result.not_simulated)}, indent=1))
        return 0
    import pandas as pd

    table = pd.DataFrame(
        {
            "step": steps["step"],
            "producer": steps["producer"],
            "producer_opcode": steps["producer_opcode"],
            "consumers": steps["consumers"],
            "priority_us": steps["priority_s"].map(_us),
            "unfused_us": steps["time_unfused_s"].map(_us),
            "fused_us": steps["time_fused_s"].map(_us),
            "reason": steps["reason"],
        },
        columns=_COLUMNS,
    )
    if len(table):
        from ..plot import readable

        print_table(readable(table, digits=4))  # 4 significant digits, counts as integers
    s = result.summary()
    print(
        f"\n{count(s['fusion_steps'], 'step')}: {s['kernels_before']} -> {count(s['kernels_after'], 'kernel')}, "
        f"predicted {s['time_before_s'] * 1e6:,.3f} us -> {s['time_after_s'] * 1e6:,.3f} us "
        f"({s['model']} on {s['device']}); {count(s['rejected'], 'producer')} left unfused"
    )
    by_rule = result.rejected_by_rule()
    if len(by_rule):
        print("  unfused by rule: " + ", ".join(f"{rule} {n}" for rule, n in by_rule.items()))
    for note in result.notes:
        print("  note: " + note)
    print(f"wrote {out}")
    return 0


def _say_if_fused(src: Path, module) -> None:
    """A note when the input is already fused: priority fusion then runs over XLA's kernels, not the program's ops."""
    from ..analysis import compiled_for

    fusions = fusions_in(module)
    if not fusions:
        return
    backend = compiled_for(module)
    by = f" (optimized by XLA:{backend[0].upper()}: {backend[1]})" if backend else ""
    say_note(f"{src} is already fused, {count(fusions, 'fusion')}{by}: priority fusion runs again over those "
             "kernels; to simulate XLA's fusion of the program, give its module as lowered, before XLA's passes "
             "(e.g. `xla_costmodel.from_jax(fn, *args, optimized=False)`)")


# --- fusion search (`fuse --search [--budget SECONDS]`) ---
def _search(args: argparse.Namespace, module, device, model, out: Path) -> int:
    import warnings

    from ..fusion import search_fusion

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = search_fusion(module, device=device, model=model, budget_s=args.budget,
                               simplify=not args.no_simplify)
    _write_atomically(out, result.module.to_text())
    summary = result.summary()
    summary["output"] = str(out)
    if args.json:
        print(json.dumps({"summary": json_value(summary), "computations": json_records(result.computations)},
                         indent=1))
        return 0
    from ..plot import readable

    # (as every table people read: predicted times in µs to 4 digits; the search's own wall time in s)
    shown = readable(result.computations.drop(columns=["seconds"]), unit="us", digits=4)
    shown["search_s"] = result.computations["seconds"].round(2)
    print_table(shown)
    print(
        f"\nfusion search ({result.method}, {count(result.plans_evaluated, 'plan')} in {result.elapsed_s:.2f} s): "
        f"greedy {result.greedy_time_s * 1e6:,.3f} us, best {result.time_s * 1e6:,.3f} us, "
        f"gap {result.gap_pct:.2f}% ({summary['model']} on {summary['device']}); {count(result.kernels, 'kernel')}"
    )
    print(f"wrote {out}")
    return 0
