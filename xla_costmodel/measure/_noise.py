"""The noise floor: how much a kernel's measured time moves between two suite runs."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["noise_floor"]


def noise_floor(first: pd.DataFrame, second: pd.DataFrame | None = None) -> pd.DataFrame:
    """Run-to-run variation of the suite's main kernels, per kernel class.

    **Arguments:**

    - `first`, `second`: dataset rows of two suite runs. With `second` left
      out, `first` must hold exactly two `suite_run`s (for example a dataset
      both runs were appended to), which are compared.

    **Returns:** one row per `kernel_class`, plus `all`, with columns:

    - `cases`: cases measured in both runs.
    - `min_diff_median`, `min_diff_p90`, `min_diff_max`: the relative
      difference of the two runs' minimum times, `|a - b| / min(a, b)`,
      across cases: median, 90th percentile, maximum.
    - `median_diff_median`: the same for the per-case median times.
    - `spread_median`: within one run, `median_per_run_s / min_per_run_s - 1`, median over
      cases and both runs (how far a typical run sits above the best one).

    Raises `ValueError` when the two runs share no case.
    """
    if second is None:
        runs = list(dict.fromkeys(first["suite_run"]))
        if len(runs) != 2:
            raise ValueError(f"need exactly two suite runs to compare, found {len(runs)}: {runs}")
        second = first[first["suite_run"] == runs[1]]
        first = first[first["suite_run"] == runs[0]]
    key = ["case", "hlo_op"]
    cols = key + ["kernel_class", "min_per_run_s", "median_per_run_s"]
    a = first.loc[first["is_main"], cols]
    b = second.loc[second["is_main"], cols]
    both = a.merge(b, on=key, suffixes=("_a", "_b"))
    if both.empty:
        raise ValueError("the two runs have no (case, hlo_op) in common")
    both["kernel_class"] = both["kernel_class_a"]
    both["min_diff"] = _rel_diff(both["min_per_run_s_a"], both["min_per_run_s_b"])
    both["median_diff"] = _rel_diff(both["median_per_run_s_a"], both["median_per_run_s_b"])
    spread = pd.concat(
        [
            pd.DataFrame({"kernel_class": both["kernel_class"], "spread": both["median_per_run_s_a"] / both["min_per_run_s_a"] - 1}),
            pd.DataFrame({"kernel_class": both["kernel_class"], "spread": both["median_per_run_s_b"] / both["min_per_run_s_b"] - 1}),
        ]
    )

    def summarise(g: pd.DataFrame, s: pd.Series) -> dict:
        return {
            "cases": len(g),
            "min_diff_median": float(np.median(g["min_diff"])),
            "min_diff_p90": float(np.quantile(g["min_diff"], 0.9)),
            "min_diff_max": float(g["min_diff"].max()),
            "median_diff_median": float(np.median(g["median_diff"])),
            "spread_median": float(np.median(s)),
        }

    rows = []
    for cls, g in both.groupby("kernel_class", sort=True):
        rows.append({"kernel_class": cls, **summarise(g, spread.loc[spread["kernel_class"] == cls, "spread"])})
    rows.append({"kernel_class": "all", **summarise(both, spread["spread"])})
    return pd.DataFrame(rows)


def _rel_diff(a: pd.Series, b: pd.Series) -> pd.Series:
    a = a.astype(float)
    b = b.astype(float)
    return (a - b).abs() / np.minimum(a, b)
