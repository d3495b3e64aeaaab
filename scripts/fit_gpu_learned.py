#!/usr/bin/env python
"""A NeuSight-style learned correction of `xla-gpu` on the H100, scored leave one source out on the corpus.

    .venv/bin/python scripts/fit_gpu_learned.py               # fit, score, print (60-90 s)
    .venv/bin/python scripts/fit_gpu_learned.py --json out.json
    .venv/bin/python scripts/fit_gpu_learned.py --write       # and ship it if it wins (else remove it)

The candidate (issue 31, item 5): the analytical `xla-gpu` prediction of a
kernel on `h100-sxm`, times a learned efficiency factor,

    time = xla_gpu_s * exp(clip(trees(features, structure, log xla_gpu_s), -log 4, +log 4))

where `trees` is scikit-learn's `HistGradientBoostingRegressor` fitted to
`log(measured / xla_gpu_s)` over the hardware-fitted models' kernel features
(`fit.kernel_features`'s counts, `features.features_of`), the kernel's
structure (`fit._efficiency.structure_of`: its kind, and for a GEMM its
problem and configuration) and the log of the analytical prediction. The
factor is bounded (at most 4x either way), so the analytical model keeps the
scale and the trees only correct it, as NeuSight bounds a learned utilization
by the roofline; a kind with fewer training rows than a leaf, and the library
calls whose `xla-gpu` price is itself fitted to measurements
(`fit._efficiency.MEASURED_KINDS`), keep the analytical price. Every
hyper-parameter is fixed before scoring: those of `learned`'s defaults
(`LearnedModel`), and the bound 4x, chosen as twice the issue's "within 2x";
nothing here is tuned on a held-out source. Two earlier forms are scored in
the same run for comparison (`VARIANTS`: counts only; structure with every
kind corrected; no roofline floor), and issue 31's table per kind of kernel is
printed for all. The factor never takes a price below the roofline's bound
(`fit._efficiency.roofline_floor`).

Training rows: every H100 row the project has, per execution:

- the H100 suite (`calibration/h100-sxm.parquet`), each kernel priced alone by
  `xla-gpu` (`estimate`);
- the corpus (`calibration/h100-sxm_corpus.parquet`), each kernel priced inside
  its module by `analyze(..., model="xla-gpu")` as `scripts/bench_gpu.py`
  prices it (library calls on constants fitted without the kernel's source),
  measured per execution as the bench scores it.

Scoring is the bench's (`bench_gpu.price`, `score_table`, `metrics`,
`program_table`), and so is the fit leaving one source out
(`fit.calibration.efficiency_leave_one_source_out`, which `bench_gpu` scores
the shipped form with too): for each of the corpus's 11 sources, the trees
are fitted to the suite and the other 10 sources and price the held-out
source's kernels; `xla-gpu` is scored on the same kernels in the same run. Printed:
kernels >= 5 us per execution (ratio error, Kendall tau, within 2x) and
programs within 1.25x of the measured kernel time per run (`/kernels`, the
issue's figure, and `/kernels, trips measured`), and whether the candidate
beats `xla-gpu` on both (the condition for shipping it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import bench_gpu as bench  # noqa: E402

DEVICE = "h100-sxm"
PEER = "xla-gpu"
CANDIDATE = "xla-gpu x learned efficiency"
#: Earlier forms, scored in the same run for comparison (not shipped), each adding one step: the feature
#: counts only (the form shipped before); the structural columns (kernel kind, GEMM configuration), a factor
#: learned for every kind; library calls whose xla-gpu price is fitted to measurements kept, no roofline floor.
COUNTS_ONLY = "xla-gpu x learned efficiency, counts only"
EVERY_KIND = "xla-gpu x learned efficiency, every kind corrected"
NO_FLOOR = "xla-gpu x learned efficiency, no roofline floor"
VARIANTS = (COUNTS_ONLY, EVERY_KIND, NO_FLOOR)
#: The shipped model's training rows (in `calibration/`).
TABLE = "h100-sxm_learned-rows.parquet"
#: The learned factor is bounded to [1/BOUND, BOUND] times the analytical prediction.
BOUND = 4.0



def suite_table(device) -> pd.DataFrame:
    """The H100 suite: features, `base_s` (each kernel priced alone) and `measured_s` per launch."""
    from xla_costmodel.fit.calibration import suite_efficiency_rows

    return suite_efficiency_rows(bench.SUITE, device, base=PEER)


def price_whole(modules: dict):
    """`bench_gpu.price` without leaving any source out: library calls on every constant, as a user's
    `analyze` prices them (the shipped model's training rows)."""
    import contextlib

    from xla_costmodel.models.pricing import library_calls as _library_calls

    real = _library_calls.leaving_source_out
    _library_calls.leaving_source_out = lambda source: contextlib.nullcontext()
    try:
        return bench.price(modules, PEER)
    finally:
        _library_calls.leaving_source_out = real


def corpus_table(rows, modules, kernels, device, whole: bool = False, scored=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The corpus: the bench's `xla-gpu` score table (`scored`, made here when not given) and, per scored
    kernel, features, `base_s` (in its module; `whole`: library calls priced on every source's constants)
    and `measured_s` per execution (`bench_gpu.corpus_efficiency_rows`)."""
    if scored is None:
        scored = bench.score_table(kernels, price_whole(modules) if whole else bench.price(modules, PEER))
    return bench.corpus_efficiency_rows(modules, scored, device), scored


def fit_params(variant: str = CANDIDATE) -> dict:
    """`fit.calibration.fit_efficiency`'s arguments for the candidate (hyper-parameters fixed), or one of the
    earlier forms scored beside it (`VARIANTS`)."""
    params = {"base": PEER, "bound": BOUND}
    if variant == COUNTS_ONLY:
        params.update(structure=False, kept_kinds=(), floored=False)
    elif variant == EVERY_KIND:
        params.update(kept_kinds=(), floored=False)
    elif variant == NO_FLOOR:
        params["floored"] = False
    return params


def fit_model(train: pd.DataFrame, variant: str = CANDIDATE):
    """`EfficiencyModel` fitted to the usable rows of `train`: the candidate, or an earlier form (`VARIANTS`)."""
    from xla_costmodel.fit.calibration import fit_efficiency

    return fit_efficiency(train, **fit_params(variant))


def leave_one_source_out(suite: pd.DataFrame, corpus: pd.DataFrame, variant: str = CANDIDATE) -> np.ndarray:
    """Each corpus source priced by the model fitted to the suite and the other sources."""
    from xla_costmodel.fit.calibration import efficiency_leave_one_source_out

    return efficiency_leave_one_source_out(suite, corpus, **fit_params(variant))


def scores(args=None) -> dict:
    """Fit, score leave one source out, and return the figures (see the module docstring)."""
    from xla_costmodel import get_device
    from xla_costmodel.fit.calibration import usable_efficiency_rows
    from xla_costmodel.hlo import parse_hlo

    t0 = time.perf_counter()
    device = get_device(DEVICE)
    rows = bench.load_corpus(getattr(args, "programs", None))
    cases = list(dict.fromkeys(rows["case"]))
    modules = {c: parse_hlo(bench.read_module_text(c, "post"), source=f"{c}.post.hlo") for c in cases}
    kernels = bench.measured_kernels(rows, modules)
    suite = suite_table(device)
    corpus, peer = corpus_table(rows, modules, kernels, device)
    print(f"training rows: suite {int(usable_efficiency_rows(suite).sum())} of {len(suite)}, corpus "
          f"{int(usable_efficiency_rows(corpus).sum())} of "
          f"{len(corpus)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    tables = {PEER: peer}
    for name in (*VARIANTS, CANDIDATE):
        tables[name] = bench.efficiency_score_table(peer, leave_one_source_out(suite, corpus, name))
    out: dict = {"kernels": {}, "programs": {}}
    for name, t in tables.items():
        long = t[t["measured_s"] >= bench.LONG_S]
        out["kernels"][name] = bench.metrics(long["predicted_s"], long["measured_s"])
    programs = bench.program_table(tables, kernels, rows)
    for name in tables:
        out["programs"][name] = {
            "within_1.25x /kernels": bench.within(programs[f"{name} /kernels"], 1.25),
            "within_1.25x /kernels, trips measured": bench.within(programs[f"{name} /kernels, trips measured"], 1.25),
            "median /kernels": float(programs[f"{name} /kernels"].median()),
        }
    out["kinds"] = bench.kind_table(tables).reset_index().to_dict(orient="records")
    k_peer, k_cand = out["kernels"][PEER], out["kernels"][CANDIDATE]
    p_peer, p_cand = out["programs"][PEER], out["programs"][CANDIDATE]
    out["beats_xla_gpu_per_kernel"] = bool(k_cand["ratio_error"] < k_peer["ratio_error"]
                                           and k_cand["kendall_tau"] >= k_peer["kendall_tau"]
                                           and k_cand["within_2x"] >= k_peer["within_2x"])
    out["beats_xla_gpu_per_program"] = bool(p_cand["within_1.25x /kernels"] > p_peer["within_1.25x /kernels"])
    out["seconds"] = time.perf_counter() - t0
    if getattr(args, "write", False):
        out["written"] = write_calibration(suite, rows, modules, kernels, device, out)
    return out


def training_table(suite, rows, modules, kernels, device) -> pd.DataFrame:
    """The shipped model's training rows: the suite and the whole corpus (library calls priced on every
    source's constants), usable rows only, in a fixed order."""
    from xla_costmodel.fit import FEATURES
    from xla_costmodel.fit.calibration import FLOOR_COLUMN, STRUCTURE, usable_efficiency_rows

    corpus, _ = corpus_table(rows, modules, kernels, device, whole=True)
    t = pd.concat([suite, corpus], ignore_index=True)
    t = t[usable_efficiency_rows(t)]
    cols = ["source", "case", "hlo_op", *FEATURES, *STRUCTURE, "base_s", FLOOR_COLUMN, "measured_s"]
    return t[cols].sort_values(["source", "case", "hlo_op"], kind="stable").reset_index(drop=True)


def write_calibration(suite, rows, modules, kernels, device, figures, out: Path | None = None) -> list[str]:
    """Write `h100-sxm_learned.json` and its training table to `out` (default: the package's shipped
    `calibration/`), if the candidate beat `xla-gpu` leave one source out per kernel and per program; else
    remove them there (made against an earlier `xla-gpu`). **Returns:** the files written."""
    from xla_costmodel.fit.calibration import EFFICIENCY_FORM as FORM, table_sha256
    from xla_costmodel.datasets import header, measured_on, save_calibration, shipped_dir
    from xla_costmodel.measure import read_dataset

    out = shipped_dir() if out is None else Path(out)
    if not (figures["beats_xla_gpu_per_kernel"] and figures["beats_xla_gpu_per_program"]):
        # (a calibration made against an earlier xla-gpu must not go on shipping once it no longer beats it)
        stale = [p for p in (out / TABLE, out / f"{DEVICE}_learned.json") if p.is_file()]
        for p in stale:
            p.unlink()
        print("not written: the candidate does not beat xla-gpu per kernel and per program"
              + (f"; removed {', '.join(p.name for p in stale)}" if stale else ""), file=sys.stderr)
        return []
    table = training_table(suite, rows, modules, kernels, device)
    path = out / TABLE
    tmp = path.with_suffix(".tmp")
    table.to_parquet(tmp, index=False)
    tmp.replace(path)
    model = fit_model(table)
    pred = model.predict(table)
    checks = [{"row": int(i), "prediction_s": float(pred[i])} for i in np.linspace(0, len(table) - 1, 8).astype(int)]
    measured = measured_on(pd.concat([read_dataset(bench.SUITE), read_dataset(bench.CORPUS)], ignore_index=True))
    payload = header("learned", DEVICE, int(len(table)), [
        {"path": bench.SUITE.name, "rows": int((table["source"] == "suite").sum())},
        {"path": bench.CORPUS.name, "rows": int((table["source"] != "suite").sum())}], measured)
    payload.update({
        "form": FORM,
        "made_by": "scripts/fit_gpu_learned.py --write",
        "training_table": {"path": TABLE, "rows": int(len(table)), "sha256": table_sha256(path)},
        "params": model.get_params(),
        "checks": checks,
        "leave_one_source_out": {"kernels_ge_5us": figures["kernels"], "programs": figures["programs"]},
    })
    written = save_calibration(payload, out)
    return [str(path.relative_to(ROOT)), str(written.relative_to(ROOT))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", nargs="*", help="glob patterns on the corpus program (default all)")
    ap.add_argument("--json", help="also write the figures as JSON")
    ap.add_argument("--write", action="store_true",
                    help=f"write calibration/{DEVICE}_learned.json and its training table if the candidate beats "
                         "xla-gpu per kernel and per program (else remove them)")
    args = ap.parse_args(argv)
    out = scores(args)
    print("kernels >= 5 us per execution, corpus, leave one source out:")
    print(pd.DataFrame(out["kernels"]).T.to_string())
    kinds = pd.DataFrame(out["kinds"]).set_index(["kind", "model"])
    print("\nper kind of kernel (issue 31), kernels >= 5 us: median ratio, ratio error; shares per run:")
    print(kinds[["kernels >= 5 us", "median_ratio", "ratio_error", "share_of_time", "share_of_abs_error"]]
          .to_string(float_format=lambda v: f"{v:.3f}"))
    print("\nprograms, predicted over measured kernel time per run:")
    print(pd.DataFrame(out["programs"]).T.to_string())
    print(f"\nbeats xla-gpu per kernel: {out['beats_xla_gpu_per_kernel']}; per program: "
          f"{out['beats_xla_gpu_per_program']} ({out['seconds']:.0f} s)")
    if out.get("written"):
        print("written: " + ", ".join(out["written"]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
