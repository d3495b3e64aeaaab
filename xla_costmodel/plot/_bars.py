"""Bar charts: error per model (from `compare`), savings per fusion step (from `simulate_fusion`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._text import count
from ._common import colours_for, fmt_seconds, get_ax

# Column names the error metric may have in a `compare` table, preferred first.
METRIC_COLUMNS = ("ratio_error", "sk_error", "mape", "median_abs_log")
# Columns that name a kernel class when a `compare` table is broken down by one.
GROUP_COLUMNS = ("kernel_class", "kind", "class", "group", "category")
# Metrics that are shares or relative errors: shown in percent.
#: Shares shown in percent; errors are shown as fractions, the way `compare`'s tables write them.
_PERCENT_HINTS = ("within",)


def _find(columns, candidates, what: str, given=None):
    if given is not None:
        if given not in columns:
            raise KeyError(f"error_by_model: no column {given!r} ({what}); columns: {list(columns)}")
        return given
    for c in candidates:
        if c in columns:
            return c
    return None


def error_by_model(compare_df, ax=None, *, metric=None, by=None, title=None):
    """Bar chart of an error metric per model, optionally grouped by kernel class.

    **Arguments:**

    - `compare_df`: a table from `xla_costmodel.compare`: one row per model
      (a `model` column, or models in the index), or one row per model and
      kernel class.
    - `ax`: the Axes to draw on; None makes a new figure.
    - `metric`: the column to plot (any metric of `compare`'s table, e.g.
      `within_2x`, `kendall_tau`); default the first present of
      `ratio_error` (exp(mean |ln(pred/meas)|) − 1), `sk_error`, `mape`,
      `median_abs_log`.
    - `by`: the column of kernel classes; default `kernel_class` (or `kind`,
      ...) when the table has one. Then there is one group of bars per class,
      one bar per model, and a legend; otherwise one bar per model, named
      on the x axis.
    - `title`: the Axes title.

    Errors are shown as fractions, as `compare`'s tables write them
    (`ratio_error` 0.64), shares in percent (`within_2x` 76%), and every bar is
    labelled with its value.

    **Returns:** the Axes; each model's bars are a container in `ax.containers`
    labelled with the model name (their patches have `gid` `"bars:<model>"`).

    **Raises:** `KeyError` when no metric column is found or a named one is missing.
    """
    frame = pd.DataFrame(compare_df).copy()
    if "model" not in frame.columns:
        frame = frame.reset_index()
        first = frame.columns[0]
        frame = frame.rename(columns={first: "model"}) if first != "model" else frame
    metric = _find(frame.columns, METRIC_COLUMNS, "metric", metric)
    if metric is None:
        raise KeyError(
            f"error_by_model: no error metric column (looked for {', '.join(METRIC_COLUMNS)}); "
            f"columns: {list(frame.columns)}; pass metric="
        )
    by = _find(frame.columns, GROUP_COLUMNS, "kernel class", by)
    percent = any(h in metric.lower() for h in _PERCENT_HINTS)
    scale = 100.0 if percent else 1.0

    models = list(dict.fromkeys(frame["model"].astype(str)))
    colours = colours_for(models)
    ax = get_ax(ax)

    def labels(vals):
        return ["" if not np.isfinite(v) else (f"{v:.0f}%" if percent else f"{v:.3g}") for v in vals]

    if by is None:
        # One bar per model, named on the axis: no legend needed.
        x = np.arange(len(models))
        for i, model in enumerate(models):
            v = float(frame.loc[frame["model"].astype(str) == model, metric].iloc[0]) * scale
            bars = ax.bar([x[i]], [v], 0.7, label=model, color=colours[model], gid=f"bars:{model}")
            ax.bar_label(bars, labels=labels([v]), fontsize=7, padding=1)
        ax.set_xticks(x)
        ax.set_xticklabels(models, rotation=20 if len(models) > 3 else 0,
                           ha="right" if len(models) > 3 else "center")
    else:
        groups = list(dict.fromkeys(frame[by].astype(str)))
        width = 0.8 / max(len(models), 1)
        x = np.arange(len(groups))
        for i, model in enumerate(models):
            rows = frame[frame["model"].astype(str) == model]
            vals = []
            for g in groups:
                r = rows[rows[by].astype(str) == g]
                vals.append(float(r[metric].iloc[0]) * scale if len(r) else np.nan)
            bars = ax.bar(x + (i - (len(models) - 1) / 2) * width, vals, width, label=model,
                          color=colours[model], gid=f"bars:{model}")
            ax.bar_label(bars, labels=labels(vals), fontsize=7, padding=1)
        ax.set_xticks(x)
        ax.set_xticklabels(groups)
        ax.set_xlabel(by)
        if len(groups) > 4:
            for t in ax.get_xticklabels():
                t.set_rotation(30)
                t.set_ha("right")
        ax.legend(fontsize=8, title="model", title_fontsize=8)
    ax.set_ylabel(metric + (" (%)" if percent else ""))
    ax.grid(True, axis="y", linewidth=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    if title is not None:
        ax.set_title(title)
    return ax


def fusion_savings(steps_df, ax=None, *, total_s=None, after_s=None, label_steps=None, title=None):
    """Time saved by each step of a priority-fusion simulation, and where it adds up to.

    Bars: each step's `priority_s` (time saved by fusing its producer into
    its consumers; a negative one is red). Line on a second y axis: the
    cumulative saving, or, when `total_s` (the predicted time of the unfused
    module) is given, the predicted module time after each step,
    `total_s - cumsum(priority_s)`. Steps without a finite priority (XLA
    fuses small constants at the end without pricing them: `-inf`) are left
    out and counted in the title.

    Each priority is the model's estimate at the time of its step, for the
    kernels as they were then, so the line need not end at the module's time
    re-priced after fusion; pass that as `after_s` (e.g.
    `FusionResult.time_after_s`) to draw it as a dashed level.

    **Arguments:**

    - `steps_df`: `FusionResult.steps` (columns `step`, `producer`, `priority_s`; others ignored).
    - `ax`: the Axes to draw on; None makes a new figure.
    - `total_s`: predicted time before fusion; None plots the cumulative saving.
    - `after_s`: predicted time after fusion, re-priced (only with `total_s`).
    - `label_steps`: label the x ticks with the producers' names (default:
      when there are at most 25 steps).
    - `title`: the Axes title.

    **Returns:** the Axes of the bars (each patch has `gid` `"savings"`); the line (`gid`
    `"cumulative"`) is on its twin, `ax.cumulative_ax`.

    **Raises:** `KeyError` when `priority_s` is missing.
    """
    from matplotlib.ticker import FuncFormatter

    frame = pd.DataFrame(steps_df)
    if "priority_s" not in frame.columns:
        raise KeyError(f"fusion_savings: the steps table has no 'priority_s' column; columns: {list(frame.columns)}")
    finite = np.isfinite(frame["priority_s"].to_numpy(dtype=float))
    unpriced = int((~finite).sum())
    frame = frame[finite]
    saved = frame["priority_s"].to_numpy(dtype=float)
    steps = frame["step"].to_numpy() if "step" in frame.columns else np.arange(1, len(frame) + 1)
    x = np.arange(len(frame))
    ax = get_ax(ax)
    colours = ["#2ca02c" if v >= 0 else "#d62728" for v in saved]
    ax.bar(x, saved, color=colours, width=0.8, gid="savings", label="saved by the step (priority)")
    ax.axhline(0.0, color="0.3", linewidth=0.6)
    ax.yaxis.set_major_formatter(FuncFormatter(fmt_seconds))
    ax.set_ylabel("time saved by the step")
    ax.set_xlabel("fusion step")
    if label_steps is None:
        label_steps = len(frame) <= 25 and "producer" in frame.columns
    if label_steps and "producer" in frame.columns:
        ax.set_xticks(x)
        ax.set_xticklabels([f"{s}: {p}" for s, p in zip(steps, frame["producer"].astype(str))],
                           rotation=60, ha="right", fontsize=7)
    elif len(frame):
        # Round step numbers at a regular interval (5, 10, 20, ...), where such a step is shown.
        from matplotlib.ticker import MaxNLocator

        where = {int(s): i for i, s in enumerate(steps)}
        nice = MaxNLocator(nbins=10, integer=True, steps=[1, 2, 5, 10]).tick_values(min(where), max(where))
        shown = [int(v) for v in nice if int(v) in where]
        ax.set_xticks([where[s] for s in shown])
        ax.set_xticklabels([str(s) for s in shown])

    cum = np.cumsum(saved)
    twin = ax.twinx()
    if total_s is not None:
        curve = float(total_s) - cum
        xs, ys = np.concatenate([[-0.5], x]), np.concatenate([[float(total_s)], curve])
        label = "predicted module time"
    else:
        xs, ys = x, cum
        label = "cumulative saving"
    twin.plot(xs, ys, color="#1f77b4", marker="o", markersize=3, linewidth=1.2, gid="cumulative", label=label)
    if total_s is not None and after_s is not None and np.isfinite(after_s):
        twin.axhline(float(after_s), color="#1f77b4", linestyle="--", linewidth=0.9, gid="after",
                     label=f"re-priced after fusion: {fmt_seconds(float(after_s))}")
    twin.yaxis.set_major_formatter(FuncFormatter(fmt_seconds))
    twin.set_ylabel(label, color="#1f77b4")
    if total_s is not None:
        twin.set_ylim(0, max(float(total_s), float(np.nanmax(ys)) if len(ys) else 0.0) * 1.05 or 1.0)
    # Headroom above the bars for the legend, on the side the line leaves free
    # (a falling module time starts top left; a rising cumulative saving ends top right).
    if len(saved) and np.nanmax(saved) > 0:
        low, _ = ax.get_ylim()
        ax.set_ylim(min(low, 0.0), float(np.nanmax(saved)) * 1.35)
    handles = ax.get_legend_handles_labels()
    handles2 = twin.get_legend_handles_labels()
    ax.legend(handles[0] + handles2[0], handles[1] + handles2[1], fontsize=7,
              loc="upper right" if total_s is not None else "upper left")
    if title is None and len(frame):
        title = f"{len(frame)} fusion steps, {fmt_seconds(float(cum[-1]))} saved by priority"
        if total_s is not None and total_s > 0:
            title += f" ({100 * cum[-1] / total_s:.0f}% of {fmt_seconds(float(total_s))})"
    if title is not None and unpriced:
        title += f"\n{count(unpriced, 'step')} without a finite priority not shown"
    if title:
        ax.set_title(title, fontsize=10)
    ax.cumulative_ax = twin
    return ax
