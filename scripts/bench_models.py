#!/usr/bin/env python
"""Compare the cost models on kernels of real programs held out of fitting, and check the goals.

    .venv/bin/python scripts/bench_models.py            # program split + leave-programs-out CV (~1-2 min)
    .venv/bin/python scripts/bench_models.py --quick    # program split only
    .venv/bin/python scripts/bench_models.py --json out.json

Data (this machine's CPU): `calibration/host_cpu.parquet` (the measurement
suite) and the supplementary measurement kernels (`extra-*` rows) of
`calibration/host_cpu_programs.parquet` are the training set; the kernels
of the 22 zoo programs in that file (`kernel_class` `program`) are the test
set, never used for fitting. Fittable models are refitted here on the
training set; `roofline` and `xla-gpu` run on the host's measured
`DeviceSpec` as they are (`xla-gpu` on `host_as_gpu(host)`).

Tables printed:

1. `program` split: train on measurement kernels, score the programs' kernels.
2. the same, trained on the main suite alone (without the supplementary kernels).
3. `program-cv` (unless --quick): 5-fold GroupKFold over programs, training
   on the measurement kernels plus the other programs' kernels.
4. the measurement noise ceiling: the same metrics between independent
   measurements of the test kernels (`xla_costmodel.compare._ceiling`):
   each pair of the measurement rounds (minutes apart in one process, the
   minimum of each round's samples per launch), and the whole measurement
   against a second run in a separate process
   (`calibration/host_cpu_programs_rerun.parquet`, when present, or
   `--rerun PATH`), both with the target's estimator. No model can be
   expected to agree with the measurement better than it agrees with itself.
5. Kendall tau within bands of measured time (below and above 1 us), per
   model and for the measurement itself (run 1 against run 2): where the
   ordering is lost, against what the noise allows in the same band.
6. Each model's tau against each measurement run and against the lower of
   the two runs per kernel: if noise in the target were what holds tau
   down, a less noisy target (the minimum of two runs) would raise it.
7. A second held-out set, when measured: the zoo's transformers at the
   sizes of a small real model (`calibration/host_cpu_programs_large.parquet`,
   `scripts/measure_programs.py --large`), kernels of microseconds to
   milliseconds, scored by the models fitted as in table 1. Not part of the
   goals (they are judged on table 1); shown so that nobody reads the goals'
   figures as holding for larger kernels.
8. Each fittable model's fit to its own training kernels (the program
   split's training set, predicted after fitting to it): what the model
   can represent at all. A model that orders its training kernels with tau
   t cannot be expected to order unseen kernels better.
9. Where each model's wrong orderings are (program split): the share of
   kernel pairs it orders against the measurement, and how those pairs
   split by how far apart their measured times are. Then the tau that
   features alone allow: a model sees only a kernel's features, so kernels
   with equal features get equal predictions; predicting each test kernel
   as the geometric mean of the measured times of the test kernels with
   its feature vector is about the best such a model can do (it reads the
   test set's times, so it is a ceiling, not a model).
10. What each model's form can represent on the held-out kernels: each
    fittable model fitted to the held-out kernels themselves (their own
    measured times, on the bundled programs and on the realistic sizes of
    table 7) and scored on them. This reads the test set's times, so it is a
    ceiling on the form, not a model: if the linear model fitted to these
    very kernels orders them with tau t, no training set can make it order
    them better than about t. For the linear model the table also gives the
    tau of non-negative weights fitted to the kernels' order instead of their
    relative error (a smooth pairwise loss), so that the limit is seen to be
    the form's, not the objective's.

Two error figures are shown, and they differ a lot:

- `gmre` = exp(mean |ln(p/m)|) - 1, the ratio error: the typical factor by
  which a prediction is off (over- and under-prediction alike).
- `sk_gmre` = exp(mean ln(|p - m| / m)), Stevens & Klöckner's model error
  (the geometric mean of relative absolute errors, their section 5), the
  figure their 6-16 % on GPUs are given in. It is always lower than `gmre`.

Goals (from the issue), checked on table 1 for the `fitted` model: the
paper's error `sk_gmre` at most 15 % (the ratio error is printed next to
it), at least 2x better (in that error; the `gmre` ratio is printed too)
than the uncalibrated analytical models measured in the same run, Kendall
tau at least 0.9 (printed with the noise ceiling's tau). The peer ratio
`roofline gmre / fitted gmre` is printed as the benchmark's ratio. Numbers
are what they are: nothing here is tuned on the test set by this script.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = ("fitted", "learned", "roofline-calibrated", "xla-gpu-calibrated", "roofline", "xla-gpu")
SHOWN = ["model", "n", "unpriced", "gmre", "sk_gmre", "mape", "median_abs_log", "within_2x", "kendall_tau", "spearman",
         "fusion_order_acc", "fusion_gain_gmre", "fit_s"]


def _show(title: str, table) -> None:
    import pandas as pd

    print(f"\n== {title}")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(table[SHOWN].round(3).to_string(index=False))


CEILING_SHOWN = ["comparison", "samples", "n", "gmre", "sk_gmre", "mape", "median_abs_log", "within_2x", "bias",
                 "kendall_tau", "spearman", "ties"]
RERUN = ROOT / "calibration" / "host_cpu_programs_rerun.parquet"
LARGE = ROOT / "calibration" / "host_cpu_programs_large.parquet"


def _ceiling(rerun: Path | None):
    """The noise-ceiling table of the test kernels (see the module docstring, table 4)."""
    from xla_costmodel.compare._ceiling import noise_ceiling, rounds_of
    from xla_costmodel.fit._data import load_rows, programs_dataset

    rows = load_rows(programs_dataset("host"))
    rows = rows[rows["kernel_class"] == "program"]
    other = None
    if rerun is not None and Path(rerun).is_file():
        other = load_rows(Path(rerun))
        other = other[other["kernel_class"] == "program"]
    return noise_ceiling(rows, rounds_of(rows), other)


#: Kernel-time bands for the banded tau: where the ordering is lost, against the noise there.
BANDS = (("< 1 us", 0.0, 1e-6), (">= 1 us", 1e-6, math.inf))


def _tau_by_size(table, rerun: Path | None):
    """Kendall tau of each model within each band of measured time, and the measurement's own."""
    import pandas as pd

    from xla_costmodel.compare._ceiling import run_pair
    from xla_costmodel.fit._data import kernel_rows, load_rows, programs_dataset
    from xla_costmodel.fit._metrics import accuracy

    pred = table.predictions[table.predictions["scored"]]
    pairs = [(model, g["predicted_s"].to_numpy(), g["measured_s"].to_numpy()) for model, g in pred.groupby("model", sort=False)]
    if rerun is not None and rerun.is_file():
        rows = load_rows(programs_dataset("host"))
        other = load_rows(rerun)
        first, second, _ = run_pair(kernel_rows(rows[rows["kernel_class"] == "program"]),
                                    kernel_rows(other[other["kernel_class"] == "program"]))
        pairs.append(("noise (run 2 vs run 1)", second, first))
    out = []
    for label, p, m in pairs:
        row = {"model": label}
        for band, lo, hi in BANDS:
            inside = (m >= lo) & (m < hi)
            row[f"n {band}"] = int(inside.sum())
            row[f"tau {band}"] = accuracy(p[inside], m[inside])["kendall_tau"]
        out.append(row)
    return pd.DataFrame(out)


def _tau_against_runs(table, rerun: Path | None):
    """Each model's Kendall tau against run 1 (the target), run 2, and the per-kernel minimum of both."""
    import numpy as np
    import pandas as pd

    from xla_costmodel.compare._ceiling import kernel_times
    from xla_costmodel.fit._data import kernel_rows, load_rows
    from xla_costmodel.fit._metrics import accuracy

    if rerun is None or not rerun.is_file():
        return None
    other = kernel_rows(load_rows(rerun))
    second = kernel_times(other[other["kernel_class"] == "program"])
    pred = table.predictions[table.predictions["scored"]]
    out = []
    for model, g in pred.groupby("model", sort=False):
        g = g.set_index(["case", "hlo_op"])
        g = g[~g.index.duplicated(keep="first")]
        common = g.index.intersection(second.index)
        p, m1, m2 = (g.loc[common, "predicted_s"].to_numpy(), g.loc[common, "measured_s"].to_numpy(),
                     second.loc[common].to_numpy())
        out.append({"model": model, "n": len(common), "tau vs run 1": accuracy(p, m1)["kendall_tau"],
                    "tau vs run 2": accuracy(p, m2)["kendall_tau"],
                    "tau vs min(run 1, run 2)": accuracy(p, np.minimum(m1, m2))["kendall_tau"]})
    return pd.DataFrame(out)


def _training_fit(device):
    """Each fittable model scored on the kernels it was fitted to (its capacity, not its generalization)."""
    import pandas as pd

    from xla_costmodel.fit import FittedModel, LearnedModel
    from xla_costmodel.fit._data import default_training, load_rows, prepare, training_rows
    from xla_costmodel.fit._metrics import accuracy

    train = prepare(training_rows(load_rows(default_training("host"))), device)
    y = train.y.to_numpy() if hasattr(train.y, "to_numpy") else train.y
    out = []
    for name, model in (("fitted", FittedModel()), ("learned", LearnedModel())):
        p = model.fit(train.X, train.y).predict(train.X)
        m = accuracy(p, y)
        out.append({"model": name, "n": len(y), "gmre": m["gmre"], "sk_gmre": m["sk_gmre"],
                    "within_2x": m["within_2x"], "kendall_tau": m["kendall_tau"]})
    return pd.DataFrame(out)


#: Table 10's label of the held-out kernels the goals are judged on (table 1's).
PROGRAMS = "programs (table 1)"

#: Measured-time ratios of the discordant pairs (table 9).
RATIO_BANDS = (("within 1.2x", 1.0, 1.2), ("1.2-2x", 1.2, 2.0), ("2-4x", 2.0, 4.0), ("over 4x", 4.0, math.inf))


def _discordance(table):
    """Per model: the share of kernel pairs ordered against the measurement, and how they split by measured ratio."""
    import numpy as np
    import pandas as pd

    pred = table.predictions[table.predictions["scored"]]
    out = []
    for model, g in pred.groupby("model", sort=False):
        lp, lm = np.log(g["predicted_s"].to_numpy(float)), np.log(g["measured_s"].to_numpy(float))
        i, j = np.triu_indices(len(lm), 1)
        dm = lm[i] - lm[j]
        wrong = (lp[i] - lp[j]) * dm < 0  # opposite order (ties on either side are not counted)
        ratio = np.exp(np.abs(dm[wrong]))
        row = {"model": model, "pairs": len(dm), "ordered wrong": wrong.mean()}
        for band, lo, hi in RATIO_BANDS:
            row[f"of those, {band}"] = ((ratio >= lo) & (ratio < hi)).mean() if wrong.any() else math.nan
        out.append(row)
    return pd.DataFrame(out)


def _same_features_ceiling(test) -> dict:
    """Tau of the per-feature-vector geometric mean of the test kernels' measured times (table 9).

    **Arguments:** `test`: the test kernels, `prepare`d (features `X`, measured times `y`).
    """
    import numpy as np
    import pandas as pd

    from xla_costmodel.fit._metrics import accuracy

    y = np.asarray(test.y, float)
    key = pd.util.hash_pandas_object(test.X.astype(float), index=False).to_numpy()
    best = np.exp(pd.Series(np.log(y)).groupby(key).transform("mean").to_numpy())
    return {"kernels": len(y), "distinct feature vectors": len(set(key)),
            "kendall_tau": accuracy(best, y)["kendall_tau"]}


def _order_fitted_weights(X, y, start):
    """Non-negative linear weights fitted for the order of `y` rather than its relative error (table 10).

    Minimises a smooth stand-in for the share of misordered pairs: the
    logistic loss of `sharpness · (ln p_i − ln p_j)` over every pair with
    `y_i > y_j`, for weights `exp(v) ≥ 0`, from `start` (the relative
    least-squares weights), at a few sharpnesses; returns the predictions
    with the best Kendall tau. A check that the linear model's tau on these
    kernels is a limit of its form, not of the objective it is fitted by.
    """
    import numpy as np
    from scipy.optimize import minimize

    from xla_costmodel.fit._metrics import accuracy

    X, ly = np.asarray(X, float), np.log(np.asarray(y, float))
    used = np.flatnonzero(np.any(X != 0, axis=0))
    Xs = X[:, used] / X[:, used].max(axis=0)  # unit columns: one step size suits every weight
    v0 = np.log(np.maximum(np.asarray(start, float)[used] * X[:, used].max(axis=0), 1e-12))
    i, j = np.triu_indices(len(ly), 1)
    sign = np.sign(ly[i] - ly[j])
    i, j, sign = i[sign != 0], j[sign != 0], sign[sign != 0]
    best = Xs @ np.exp(v0)
    best_tau = accuracy(best, np.exp(ly))["kendall_tau"]
    for sharpness in (5.0, 20.0, 50.0):
        def loss(v, sharpness=sharpness):
            w = np.exp(v)
            p = Xs @ w
            z = sharpness * sign * (np.log(p[i]) - np.log(p[j]))
            dz = -sharpness * sign / (1.0 + np.exp(z)) / len(z)
            dlp = np.bincount(i, dz, len(ly)) - np.bincount(j, dz, len(ly))
            return np.logaddexp(0.0, -z).mean(), Xs.T @ (dlp / p) * w

        v = minimize(loss, v0, jac=True, method="L-BFGS-B", options={"maxiter": 2000}).x
        p = Xs @ np.exp(v)
        tau = accuracy(p, np.exp(ly))["kendall_tau"]
        if tau > best_tau:
            best, best_tau = p, tau
    return best


def _form_ceiling(sets: dict):
    """Each fittable model fitted to held-out kernels and scored on the same kernels (table 10).

    **Arguments:** `sets`: label -> `prepare`d kernels (features `X`, measured times `y`).

    **Returns:** one row per set and model: `n`, `gmre`, `within_2x`, `kendall_tau`; for the
    linear model also `kendall_tau, weights fitted for order` (`_order_fitted_weights`).
    """
    import numpy as np
    import pandas as pd

    from xla_costmodel.fit import FittedModel, LearnedModel
    from xla_costmodel.fit._metrics import accuracy

    out = []
    for label, prepared in sets.items():
        y = np.asarray(prepared.y, float)
        for name, model in (("fitted", FittedModel()), ("learned", LearnedModel())):
            m = accuracy(model.fit(prepared.X, y).predict(prepared.X), y)
            row = {"kernels": label, "model": name, "n": len(y), "gmre": m["gmre"], "within_2x": m["within_2x"],
                   "kendall_tau": m["kendall_tau"], "kendall_tau, weights fitted for order": math.nan}
            if name == "fitted":
                ordered = _order_fitted_weights(prepared.X, y, model.coef_)
                row["kendall_tau, weights fitted for order"] = accuracy(ordered, y)["kendall_tau"]
            out.append(row)
    return pd.DataFrame(out)


def _goals(t, ceiling, form=None) -> list[tuple[str, bool, str]]:
    """The issue's goals for the fitted model, each `(what, met, value shown)`."""
    f = t.loc["fitted"]
    goals = [(
        "fitted S&K error <= 0.15 (geo-mean of |p-m|/m, Stevens & Klöckner 2016 sec. 5, as their 6-16 %)",
        f["sk_gmre"] <= 0.15,
        f"{f['sk_gmre']:.3f}  [ratio error exp(mean|ln p/m|)-1 = {f['gmre']:.3f}, not the paper's metric]",
    )]
    for peer in ("roofline", "xla-gpu"):
        sk = t.loc[peer, "sk_gmre"] / f["sk_gmre"]
        ratio = t.loc[peer, "gmre"] / f["gmre"]
        goals.append((f"fitted >= 2x better than uncalibrated {peer} (S&K error ratio)", sk >= 2,
                      f"{sk:.2f}x  [ratio-error ratio {ratio:.2f}x]"))
    run = ceiling[ceiling["comparison"].str.startswith("run")]
    ref = run if len(run) else ceiling[ceiling["comparison"] == "mean of round pairs"]
    note = f"  [measurement's own tau, {ref['comparison'].iloc[0]}: {ref['kendall_tau'].iloc[0]:.3f}]" if len(ref) else ""
    if form is not None and len(form):
        own = form[(form["kernels"] == PROGRAMS) & (form["model"] == "fitted")].iloc[0]
        note += (f" [the linear form fitted to these kernels' own times: {own['kendall_tau']:.3f}; "
                 f"fitted to their order: {own['kendall_tau, weights fitted for order']:.3f}]")
    goals.append(("fitted Kendall tau >= 0.9", f["kendall_tau"] >= 0.9, f"{f['kendall_tau']:.3f}{note}"))
    return goals


def _speed(test_kernels, device) -> dict:
    """Estimates per second of the fitted model against the roofline, on the same kernels."""
    from xla_costmodel.fit import FittedModel
    from xla_costmodel.fit._data import default_training, load_rows, prepare, training_rows
    from xla_costmodel.models import get_model

    train = prepare(training_rows(load_rows(default_training("host"))), device)
    fitted = FittedModel().fit(train.X, train.y)
    roof = get_model("roofline")
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model in (("fitted", fitted), ("roofline", roof)):
            t0 = time.perf_counter()
            for k in test_kernels:
                model.estimate(k, device)
            out[name] = len(test_kernels) / (time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="only the program split")
    p.add_argument("--json", metavar="PATH", help="also write the tables as JSON")
    p.add_argument("--rerun", metavar="PATH", default=str(RERUN),
                   help="a second, separate measurement of the programs for the noise ceiling "
                        "(default calibration/host_cpu_programs_rerun.parquet; 'none' to skip)")
    args = p.parse_args(argv)

    import pandas as pd

    from xla_costmodel import get_device
    from xla_costmodel.compare import compare
    from xla_costmodel.fit._data import default_dataset, load_rows, prepare, programs_dataset

    device = get_device("host")
    t0 = time.perf_counter()
    results = {}
    main_table = compare(MODELS, split="program", device=device)
    results["program"] = main_table
    _show("program split: fit on measurement kernels (suite + supplementary), score the zoo programs' kernels",
          main_table)
    suite_only = compare(["fitted", "learned", "roofline-calibrated", "xla-gpu-calibrated"], split="program",
                         train=default_dataset("host"), device=device)
    results["program_suite_only"] = suite_only
    _show("program split, trained on the main suite only", suite_only)
    if not args.quick:
        cv = compare(["fitted", "learned", "roofline-calibrated"], split="program-cv", device=device)
        results["program_cv"] = cv
        _show("program-cv: 5 folds over programs (suite + supplementary + other programs -> held-out programs)", cv)

    ceiling = _ceiling(None if args.rerun == "none" else Path(args.rerun))
    results["noise_ceiling"] = ceiling
    print("\n== measurement noise ceiling: the test kernels' measurements against each other "
          "(min per launch of each side's samples)")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(ceiling[CEILING_SHOWN].round(3).to_string(index=False))
    print("   (both sides are noisy: a model predicting the noise-free time would be off from the measurement by\n"
          "    less, roughly 1/sqrt(2) of these log errors; `ties`: kernels timed identically (10 ns clock), which\n"
          "    sk_gmre floors at 1e-6)")

    by_size = _tau_by_size(main_table, None if args.rerun == "none" else Path(args.rerun))
    results["tau_by_size"] = by_size
    print("\n== Kendall tau within kernel-time bands (program split; `noise`: run 1 against run 2, banded by run 1)")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(by_size.round(3).to_string(index=False))

    runs = _tau_against_runs(main_table, None if args.rerun == "none" else Path(args.rerun))
    if runs is not None:
        results["tau_against_runs"] = runs
        print("\n== Kendall tau against each measurement run and against the lower of the two per kernel")
        with pd.option_context("display.width", 200, "display.max_columns", 30):
            print(runs.round(3).to_string(index=False))

    if LARGE.is_file():
        large = compare(MODELS, dataset=LARGE, split="program", device=device)
        results["program_large"] = large
        _show("held-out programs at realistic sizes (transformers of width 256, sequence 64, batch 4; "
              f"{LARGE.relative_to(ROOT)}), same training set", large)

    fit = _training_fit(device)
    results["training_fit"] = fit
    print("\n== each fittable model on its own training kernels (fitted and scored on the same rows: capacity)")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(fit.round(3).to_string(index=False))

    wrong = _discordance(main_table)
    results["discordance"] = wrong
    rows = load_rows(programs_dataset("host"))
    test = prepare(rows[rows["kernel_class"] == "program"], device)  # features once: table 9 and the speed line
    same = _same_features_ceiling(test)
    results["same_features_ceiling"] = pd.DataFrame([same])
    print("\n== where the wrong orderings are (program split): pairs ordered against the measurement, "
          "by how far apart their measured times are")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(wrong.round(3).to_string(index=False))
    print(f"   features alone allow about tau {same['kendall_tau']:.3f}: each test kernel predicted as the geometric "
          f"mean of the measured times\n   of the test kernels with its feature vector "
          f"({same['distinct feature vectors']} distinct among {same['kernels']}; it reads the test set's times)")

    sets = {PROGRAMS: test}
    if LARGE.is_file():
        big = load_rows(LARGE)
        sets["realistic sizes (table 7)"] = prepare(big[big["kernel_class"] == "program"], device)
    form = _form_ceiling(sets)
    results["form_ceiling"] = form
    print("\n== what each model's form can represent: fitted to the held-out kernels' own times and scored on them "
          "(reads the test set; a ceiling, not a model)")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(form.round(3).to_string(index=False))

    t = main_table.set_index("model")
    goals = _goals(t, ceiling, form)
    print("\n== goals (program split, fitted model)")
    for what, ok, value in goals:
        print(f"  {'PASS' if ok else 'MISS'}  {what}: {value}")
    ratio_roof = t.loc["roofline", "gmre"] / t.loc["fitted", "gmre"]

    speed = _speed(test.kernels, device)
    print(f"\n== ratio against a peer measured in this run: roofline gmre / fitted gmre = {ratio_roof:.2f}; "
          f"estimates per second fitted {speed['fitted']:.0f} vs roofline {speed['roofline']:.0f} "
          f"(ratio {speed['fitted'] / speed['roofline']:.2f})")
    print(f"(whole benchmark {time.perf_counter() - t0:.0f} s)")
    if args.json:
        payload = {k: v.to_dict(orient="records") for k, v in results.items()}
        payload["goals"] = [{"goal": g, "met": bool(ok), "value": v} for g, ok, v in goals]
        payload["speed_estimates_per_s"] = speed
        Path(args.json).write_text(json.dumps(payload, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
