"""`xla-costmodel evaluate --jax MODULE:FUNCTION`: measure one program here and score cost models on it, per kernel."""

from __future__ import annotations

import argparse

from ._common import UsageError, check_device, check_models, command, count, json_records, load_user_program



def _evaluate_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--jax", required=True, metavar="MODULE:FUNCTION",
                   help="the program: FUNCTION (in an importable module, or a path/to/file.py) takes no "
                        "arguments and returns (fn, args), as for `measure --jax`")
    p.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                   help="models to evaluate (default: fitted learned roofline)")
    p.add_argument("--device", default="host", help="device the models price (default host: this machine)")
    p.add_argument("--repeats", type=int, default=None, help="runs in total (default 30)")
    p.add_argument("--discard", type=int, default=None, help="leading warm-up runs thrown away (default 4)")
    p.add_argument("--cold", action="store_true", help="measure with a cold allocator (page faults every run)")
    p.add_argument("--kernels", action="store_true", help="also print the per-kernel table")
    p.add_argument("--json", action="store_true", help="print JSON: {summary: [...], kernels: [...]}")


@command("evaluate", "measure a program on this machine and score cost models against it, per kernel",
         _evaluate_configure)
def _evaluate(args: argparse.Namespace) -> int:
    import json

    from ..front import DEFAULT_EVALUATION_MODELS, evaluate
    from ..measure import MeasurementError

    if args.repeats is not None and args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if args.discard is not None and args.discard < 0:
        raise UsageError(f"--discard must be 0 or more, got {args.discard}")
    check_device(args.device)
    check_models(args.models)
    fn, fargs, _lowered = load_user_program(args.jax)
    try:
        result = evaluate(fn, *fargs, device=args.device, models=tuple(args.models or DEFAULT_EVALUATION_MODELS),
                          repeats=args.repeats, discard=args.discard, allocator="cold" if args.cold else None)
    except MeasurementError as exc:
        raise UsageError(f"{args.jax}: {exc}") from None
    except ValueError as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    summary = result.summary.reset_index()
    if args.json:
        print(json.dumps({"program": args.jax, "device": result.device, "summary": json_records(summary),
                          "kernels": json_records(result.kernels), "notes": list(result.notes),
                          "trip_counts": dict(result.trip_counts)}, indent=1))
        return 0
    m = result.measurement
    print(f"{m.module.name}: {count(len(result.kernels), 'kernel')} measured on {m.device} ({m.method.allocator} allocator, "
          f"minimum of {count(m.method.kept, 'run')}), predicted on {result.device}; times in us per program run")
    undefined = [c for c in ("kendall_tau",) if c in summary and summary[c].isna().all()]
    print(_in_microseconds(summary.drop(columns=undefined)).to_string(index=False))
    if undefined:  # (a rank correlation needs two kernels: a column of NaN says nothing)
        print(f"note: kendall_tau left out: it ranks kernels, and {count(len(result.kernels), 'kernel')} cannot "
              "be ranked")
    for note in result.notes:
        print(f"note: {note.replace('predicted_wall_s', 'predicted_wall_us')}")
    if args.kernels:
        print()
        print(_in_microseconds(result.kernels).to_string(index=False))
    return 0


def _in_microseconds(df):
    """`df` for printing: every `*_s` column as `*_us` (one unit for the table, two decimals), the
    error metrics with three decimals, counts as integers."""
    import pandas as pd

    out = pd.DataFrame(index=df.index)
    for col in df.columns:
        values = df[col]
        if col.endswith("_s") and pd.api.types.is_numeric_dtype(values):
            out[col[:-2] + "_us"] = (values * 1e6).map(lambda v: f"{v:.2f}" if pd.notna(v) else "NaN")
        elif col in ("kernels", "unpriced", "launches") and pd.api.types.is_numeric_dtype(values):
            out[col] = values.map(lambda v: f"{v:.0f}" if pd.notna(v) else "NaN")
        elif pd.api.types.is_float_dtype(values):
            out[col] = values.map(lambda v: f"{v:.3f}" if pd.notna(v) else "NaN")
        else:
            out[col] = values
    return out
