"""The measurement's own reproducibility: the accuracy metrics of one measurement against another.

A cost model is scored against measured times that are themselves noisy.
Scoring one independent measurement of the same kernels against another,
with the same estimator as the target (the minimum of the kept samples per
launch, `min_per_launch_s`), gives the *noise ceiling*: the error and rank
correlation that even a model predicting one measurement exactly would
show against the other. Two ways to get a second measurement:

- **rounds** (`round_pairs`): the measurement scripts make `rounds`
  passes over all programs and pool each kernel's samples in pass order
  (`merge_measurements` concatenates them), so sample `i` of a kernel with
  `n` samples came from pass `i // (n / rounds)`. The minimum of each pass
  is one measurement; passes are minutes apart in one process. Each has
  fewer samples than the pooled target, so this is a slightly pessimistic
  ceiling; being in one process, it misses what changes between processes.
- **runs** (`run_pair`): the same programs measured again by a separate
  process (another `scripts/measure_programs.py` run), matched kernel by
  kernel on `case` and `hlo_op`: the honest ceiling for the pooled target.

Both sides are noisy, so the figures bound from below what the noise
allows; a model predicting the noise-free time would be off from either
side by less (for log-normal noise about 1/√2 of the pair's log error).
Timestamps are quantized (10 ns on XLA:CPU's traces), so two measurements
often agree exactly; `ties` reports that share, because `sk_error` floors
each such kernel's error at `SK_FLOOR` and is then far below the others.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd

from ..datasets import kernel_rows
from ..metrics import METRIC_COLUMNS, accuracy

__all__ = ["kernel_times", "noise_by_source", "noise_ceiling", "program_noise", "round_minima", "round_pairs",
           "rounds_of", "run_pair"]

#: Passes of `scripts/measure_programs.py` when a file does not record them (its default).
DEFAULT_ROUNDS = 3


def _launches(rows: pd.DataFrame) -> np.ndarray:
    launches = rows["launches"].to_numpy(float) if "launches" in rows else np.ones(len(rows))
    return np.where(np.isfinite(launches) & (launches >= 1), launches, 1.0)  # as measure._dataset.per_launch_s


def rounds_of(rows: pd.DataFrame, default: int = DEFAULT_ROUNDS) -> int:
    """The measurement passes the rows' samples were pooled from.

    **Arguments:** `rows`: dataset rows; `default`: the answer when their
    `params` do not record `rounds` (files written before it was recorded).

    **Returns:** the number of rounds. **Raises:** `ValueError` when rows
    disagree (they come from different runs and must be split apart first).
    """
    found = set()
    for text in rows.get("params", pd.Series(dtype=object)):
        try:
            found.add(int(json.loads(text or "{}").get("rounds", default)))
        except (TypeError, ValueError, AttributeError):
            found.add(default)
    if len(found) > 1:
        raise ValueError(f"rows were measured with different numbers of rounds: {sorted(found)}")
    return found.pop() if found else default


def round_minima(rows: pd.DataFrame, rounds: int) -> np.ndarray:
    """Per kernel and measurement pass: the minimum of that pass's samples per launch.

    **Arguments:** `rows`: dataset rows with `samples_per_run_s` (lists, pooled in
    pass order) and `launches`; `rounds`: the passes they were pooled from.

    **Returns:** an array `rounds × len(rows)` (seconds per launch).

    **Raises:** `ValueError` when a row's sample count is not a multiple of
    `rounds` (then the passes cannot be told apart).
    """
    if rounds < 2:
        raise ValueError("a noise ceiling from rounds needs at least 2 rounds")
    launches = _launches(rows)
    out = np.empty((rounds, len(rows)))
    for j, samples in enumerate(rows["samples_per_run_s"]):
        s = np.asarray(samples, dtype=float)
        if len(s) == 0 or len(s) % rounds:
            raise ValueError(f"row {rows.index[j]} has {len(s)} samples, not a multiple of {rounds} rounds")
        out[:, j] = s.reshape(rounds, -1).min(axis=1) / launches[j]
    return out


def round_pairs(rows: pd.DataFrame, rounds: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Every pair of measurement passes: `(label, times of pass a, times of pass b)`."""
    minima = round_minima(rows, rounds)
    return [(f"round {a + 1} vs round {b + 1}", minima[a], minima[b])
            for a, b in itertools.combinations(range(rounds), 2)]


def kernel_times(rows: pd.DataFrame) -> pd.Series:
    """The target time (`min_per_run_s / launches`) of each kernel, indexed by `(case, hlo_op)` (first row of each)."""
    t = rows["min_per_run_s"].to_numpy(float) / _launches(rows)
    s = pd.Series(t, index=pd.MultiIndex.from_arrays([rows["case"].astype(str), rows["hlo_op"].astype(str)]))
    return s[~s.index.duplicated(keep="first")]


def run_pair(rows: pd.DataFrame, other: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
    """The pooled targets (`min_per_run_s / launches`) of two measurement runs, matched on `case` and `hlo_op`.

    **Arguments:** `rows`, `other`: kernel rows of two runs of the same programs.

    **Returns:** `(times in rows, times in other, kernels of rows without a match)`.
    """
    a, b = kernel_times(rows), kernel_times(other)
    common = a.index.intersection(b.index)
    return a.loc[common].to_numpy(), b.loc[common].to_numpy(), int(len(a) - len(common))


def _row(label: str, a: np.ndarray, b: np.ndarray, samples: str) -> dict:
    acc = accuracy(a, b)
    return {"comparison": label, "samples": samples, **acc, "ties": float(np.mean(a == b)) if len(a) else np.nan}


def noise_ceiling(rows: pd.DataFrame, rounds: int | None = None, other: pd.DataFrame | None = None) -> pd.DataFrame:
    """The accuracy metrics of independent measurements of the same kernels against each other.

    **Arguments:**

    - `rows`: dataset rows of the kernels (e.g. the `program` rows); rows
      that are not usable kernels (`kernel_rows`) are left out.
    - `rounds`: the passes their samples were pooled from (None: no
      per-round comparisons).
    - `other`: rows of a second, separate measurement run of the same
      programs (None: no run-to-run comparison).

    **Returns:** a DataFrame, one row per comparison: `comparison`,
    `samples` (what each side's minimum is taken over), the
    `METRIC_COLUMNS` of `accuracy` (first side as "predicted"), and `ties`
    (share of kernels measured identically by both sides). With several
    round pairs a `mean of round pairs` row averages them.
    """
    rows = kernel_rows(rows)
    out = []
    if rounds:
        per = [len(s) // rounds for s in rows["samples_per_run_s"]]
        per_round = f"{min(per)}" if min(per) == max(per) else f"{min(per)}-{max(per)}"
        pairs = [_row(label, a, b, f"{per_round} each") for label, a, b in round_pairs(rows, rounds)]
        out += pairs
        if len(pairs) > 1:
            mean = {k: float(np.mean([p[k] for p in pairs])) for k in (*METRIC_COLUMNS, "ties")}
            mean.update(n=pairs[0]["n"], unpriced=pairs[0]["unpriced"])  # counts, the same in every pair
            out.append({**mean, "comparison": "mean of round pairs", "samples": f"{per_round} each"})
    if other is not None:
        a, b, missing = run_pair(rows, kernel_rows(other))
        label = "run 1 vs run 2 (separate processes)" + (f", {missing} unmatched" if missing else "")
        out.append(_row(label, a, b, "all (the target's estimator)"))
    return pd.DataFrame(out, columns=["comparison", "samples", *METRIC_COLUMNS, "ties"])


def _matched_runs(rows: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows of two runs matched on `case` and `hlo_op`: `source`, `case`, `launches`, `run1_s`,
    `run2_s` (seconds per launch, the target's estimator), `wall1_per_run_s`, `wall2_per_run_s`."""
    def frame(r):
        r = kernel_rows(r)
        f = pd.DataFrame({
            "source": r["source"].astype(str).to_numpy() if "source" in r else "",
            "case": r["case"].astype(str).to_numpy(), "hlo_op": r["hlo_op"].astype(str).to_numpy(),
            "launches": _launches(r), "t": r["min_per_run_s"].to_numpy(float) / _launches(r),
            "wall": r["wall_min_per_run_s"].to_numpy(float) if "wall_min_per_run_s" in r else np.nan,
        })
        return f.drop_duplicates(["case", "hlo_op"], keep="first")

    a, b = frame(rows), frame(other)
    m = a.merge(b[["case", "hlo_op", "t", "wall"]], on=["case", "hlo_op"], suffixes=("1", "2"))
    return m.rename(columns={"t1": "run1_s", "t2": "run2_s", "wall1": "wall1_per_run_s", "wall2": "wall2_per_run_s"})


def noise_by_source(rows: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """The run-to-run noise ceiling per source and over all: a second, separate measurement scored
    against the first as if it were a model's prediction.

    **Arguments:** `rows`, `other`: dataset rows of two runs of the same
    programs (kernels matched on `case` and `hlo_op`; others left out).

    **Returns:** one row per source, then `all`: `source`, `programs`, the
    `METRIC_COLUMNS` of `accuracy` (run 2 as "predicted", run 1 as
    "measured", the way a model is scored against run 1), and `ties`.
    """
    m = _matched_runs(rows, other)
    out = []
    for source, g in [*m.groupby("source", sort=False), ("all", m)]:
        a, b = g["run2_s"].to_numpy(), g["run1_s"].to_numpy()
        out.append({"source": source, "programs": int(g["case"].nunique()), **accuracy(a, b),
                    "ties": float(np.mean(a == b)) if len(a) else np.nan})
    return pd.DataFrame(out, columns=["source", "programs", *METRIC_COLUMNS, "ties"])


def program_noise(rows: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Per program run (`case`): run 2's measured kernels added up (each × launches) against run 1's,
    and the same for the wall time per run: how well a program's total reproduces.

    **Returns:** one row per case: `source`, `case`, `kernels` (matched),
    `run1_per_run_s`, `run2_per_run_s`, `run2_over_run1`, `wall1_per_run_s`,
    `wall2_per_run_s`, `wall2_over_wall1`.
    """
    m = _matched_runs(rows, other)
    m["r1"] = m["run1_s"] * m["launches"]
    m["r2"] = m["run2_s"] * m["launches"]
    g = m.groupby("case", sort=False).agg(source=("source", "first"), kernels=("hlo_op", "size"),
                                         run1_per_run_s=("r1", "sum"), run2_per_run_s=("r2", "sum"),
                                         wall1_per_run_s=("wall1_per_run_s", "first"),
                                         wall2_per_run_s=("wall2_per_run_s", "first")).reset_index()
    g["run2_over_run1"] = g["run2_per_run_s"] / g["run1_per_run_s"]
    g["wall2_over_wall1"] = g["wall2_per_run_s"] / g["wall1_per_run_s"]
    return g[["source", "case", "kernels", "run1_per_run_s", "run2_per_run_s", "run2_over_run1",
              "wall1_per_run_s", "wall2_per_run_s", "wall2_over_wall1"]]
