"""Accuracy metrics of predicted against measured kernel times.

With `r = predicted / measured` per kernel (each metric has one name, the
same in every table, figure and report of this project):

- `ratio_error` = exp(mean |ln r|) − 1 (the geometric-mean ratio error):
  the typical factor by which a prediction is off, as a fraction (0.15 =
  off by a factor 1.15 in the geometric mean; over- and under-prediction
  count alike).
- `sk_error` = exp(mean ln(|predicted − measured| / measured)): Stevens &
  Klöckner's model error (2016, section 5: "the ratio of absolute value of
  the difference between predicted and actual execution times and the
  actual execution time", summarized by the geometric mean). It is the
  figure their 6–16 % on GPUs are stated in. It is never larger than
  `ratio_error` (up to the floor below: per kernel |r − 1| ≤ exp|ln r| − 1,
  and the geometric mean is superadditive) and usually much smaller: a
  geometric mean of |r − 1| is pulled down by the kernels that happen to be
  nearly right (|r − 1| = 0.01 counts as ln 0.01 = −4.6). A kernel predicted
  exactly (|r − 1| = 0) would send it to 0, so each relative error is
  floored at `SK_FLOOR` = 1e-6 (a 1 ppm error, below any timer's resolution).
- `mape` = mean |predicted − measured| / measured.
- `median_abs_log` = median |ln r| (ln 2 = 0.69 is "off by 2x").
- `within_2x`: the share of kernels with 1/2 ≤ r ≤ 2.
- `bias` = exp(median ln r): > 1 when the model tends to over-predict.
- `kendall_tau` (tau-b, ties handled) and `spearman`: rank correlation of
  predicted and measured times, i.e. how well the model orders kernels.

Fusion decisions (`fusion_metrics`): a decision is one program measured as
XLA compiles it (fused) and with XLA's fusion passes disabled (unfused).
Per program, `time_fused` and `time_unfused` are the summed per-run times of
its kernels (each kernel's time × launches per run), measured or predicted.
`fusion_order_acc` is the share of programs for which the model orders
`time_fused` against `time_unfused` as the measurement does (the decision
"fuse" or "do not fuse" comes out right); `fusion_gain_ratio_error` is the
`ratio_error` of the predicted gain time_unfused / time_fused; `fusion_gain_tau` the Kendall tau of predicted against measured
gains across programs (which programs profit most from fusion).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["accuracy", "fusion_metrics", "sk_error", "METRIC_COLUMNS", "SK_FLOOR"]

METRIC_COLUMNS = ("n", "unpriced", "sk_error", "ratio_error", "kendall_tau", "within_2x", "mape", "median_abs_log",
                  "bias", "spearman")


#: Floor of the relative error |p − m| / m in `sk_error` (an exact prediction would make the log −inf).
SK_FLOOR = 1e-6


def sk_error(predicted, measured) -> float:
    """Stevens & Klöckner's geometric-mean relative error, exp(mean ln(max(|p − m| / m, SK_FLOOR))).

    **Arguments:** `predicted`, `measured`: positive seconds, same length.

    **Returns:** the error as a fraction (0.15 = 15 %); NaN for no kernels.
    """
    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    if len(p) == 0:
        return math.nan
    rel = np.maximum(np.abs(p - m) / m, SK_FLOOR)
    return float(np.exp(np.mean(np.log(rel))))


def accuracy(predicted, measured) -> dict[str, float]:
    """The metrics of the module docstring for one set of kernels.

    **Arguments:** `predicted`, `measured`: seconds, same length. Kernels
    whose prediction is NaN or not positive count as `unpriced` and are left
    out of the other metrics.

    **Returns:** a dict with `METRIC_COLUMNS`.
    """
    from scipy.stats import kendalltau, spearmanr

    p = np.asarray(predicted, dtype=float)
    m = np.asarray(measured, dtype=float)
    if p.shape != m.shape:
        raise ValueError(f"predicted has {p.shape[0]} values, measured {m.shape[0]}")
    if np.any(~np.isfinite(m)) or np.any(m <= 0):
        raise ValueError("measured times must be positive and finite")
    ok = np.isfinite(p) & (p > 0)
    out: dict[str, float] = {"n": int(ok.sum()), "unpriced": int((~ok).sum())}
    if ok.sum() == 0:
        out.update({k: math.nan for k in METRIC_COLUMNS if k not in out})
        return out
    p, m = p[ok], m[ok]
    lr = np.log(p / m)
    out["sk_error"] = sk_error(p, m)
    out["ratio_error"] = float(np.exp(np.mean(np.abs(lr))) - 1.0)
    out["mape"] = float(np.mean(np.abs(p - m) / m))
    out["median_abs_log"] = float(np.median(np.abs(lr)))
    out["within_2x"] = float(np.mean(np.abs(lr) <= math.log(2.0) + 1e-12))
    out["bias"] = float(np.exp(np.median(lr)))
    if len(p) >= 2 and np.ptp(p) > 0 and np.ptp(m) > 0:
        out["kendall_tau"] = float(kendalltau(p, m).statistic)
        out["spearman"] = float(spearmanr(p, m).statistic)
    else:
        out["kendall_tau"] = out["spearman"] = math.nan
    return {k: out[k] for k in METRIC_COLUMNS}


def fusion_metrics(decisions: pd.DataFrame) -> dict[str, float]:
    """Fusion-decision metrics from per-program totals.

    **Arguments:** `decisions`: one row per program with `meas_fused`,
    `meas_unfused`, `pred_fused`, `pred_unfused` (seconds per run; NaN
    predictions leave the program out).

    **Returns:** `fusion_n`, `fusion_order_acc`, `fusion_gain_ratio_error`, `fusion_gain_tau`.
    """
    from scipy.stats import kendalltau

    d = decisions[["meas_fused", "meas_unfused", "pred_fused", "pred_unfused"]].astype(float)
    ok = np.isfinite(d["pred_fused"]) & np.isfinite(d["pred_unfused"]) & (d["pred_fused"] > 0) & (d["pred_unfused"] > 0)
    d = d[ok]
    out = {"fusion_n": int(len(d))}
    if len(d) == 0:
        out.update(fusion_order_acc=math.nan, fusion_gain_ratio_error=math.nan, fusion_gain_tau=math.nan)
        return out
    meas_gain = (d["meas_unfused"] / d["meas_fused"]).to_numpy(float)
    pred_gain = (d["pred_unfused"] / d["pred_fused"]).to_numpy(float)
    out["fusion_order_acc"] = float(np.mean(np.sign(meas_gain - 1.0) == np.sign(pred_gain - 1.0)))
    out["fusion_gain_ratio_error"] = float(np.exp(np.mean(np.abs(np.log(pred_gain / meas_gain)))) - 1.0)
    if len(d) >= 2 and np.ptp(pred_gain) > 0 and np.ptp(meas_gain) > 0:
        out["fusion_gain_tau"] = float(kendalltau(pred_gain, meas_gain).statistic)
    else:
        out["fusion_gain_tau"] = math.nan
    return out
