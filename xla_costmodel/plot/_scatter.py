"""Predicted against measured kernel time: the figure every model is judged by."""

from __future__ import annotations

import math

import numpy as np

from ._common import colours_for, decade_limits, fmt_seconds, get_ax
from ._metrics import clean_pairs, metrics

BAND = 2.0


def metrics_text(m: dict, dropped: int = 0) -> str:
    """The summary box of `predicted_vs_measured`, from `compare.accuracy`'s dict."""
    lines = [
        f"N = {m['n']}" + (f" ({dropped} dropped: time <= 0 or NaN)" if dropped else ""),
        f"geo-mean rel. error = {100 * m['gmre']:.1f}%",
        # Stevens & Klöckner's figure, geo-mean of |p - m| / m: lower than the ratio error above.
        f"S&K error (gm |p-m|/m) = {100 * m['sk_gmre']:.1f}%",
        f"median bias = ×{m['bias']:.3g}",
        f"within 2×: {100 * m['within_2x']:.1f}%",
        f"Kendall τ = {m['kendall_tau']:.3f}",
    ]
    return "\n".join(lines)


def predicted_vs_measured(measured, predicted, kind=None, ax=None, title=None):
    """Log-log scatter of predicted against measured kernel time.

    Measured on x, predicted on y, equal aspect and identical whole-decade
    limits; the line y = x and a shaded band between y = x/2 and y = 2x; one
    scatter per kernel kind, its legend entry giving the count and the
    kind's geometric-mean relative error (the legend sits right of the axes);
    a text box (in the off-diagonal corner with fewer points) with N, the
    geometric-mean relative error `exp(mean|ln(pred/meas)|) - 1`, Stevens &
    Klöckner's error `exp(mean ln(|pred - meas| / meas))` (`sk_gmre`), the median
    bias `exp(median ln(pred/meas))`, the share within 2x and Kendall's tau
    over all kernels, computed by `xla_costmodel.compare.accuracy` (the
    numbers of `compare`'s table). Pairs with a non-positive or non-finite
    time cannot go on log axes: they are left out and counted in the box.

    **Arguments:**

    - `measured`, `predicted`: kernel times in seconds, array-likes of one length.
    - `kind`: a category per kernel (e.g. the fusion kind or `kernel_class`),
      or None for one colour.
    - `ax`: the Axes to draw on; None makes a new figure.
    - `title`: the Axes title.

    **Returns:** the Axes. Artists carry `gid`s for inspection: `"identity"`
    (the y = x line), `"band_2x"` (the band), `"points:<kind>"` (one
    collection per kind) and `"metrics"` (the text box).

    **Raises:** `ValueError` when the lengths differ.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator

    m, p, k, dropped = clean_pairs(measured, predicted, kind)
    ax = get_ax(ax)
    lo, hi = decade_limits(m, p)
    xs = np.array([lo, hi])
    ax.fill_between(xs, xs / BAND, xs * BAND, color="0.5", alpha=0.15, linewidth=0,
                    label=f"±{BAND:g}×", gid="band_2x")
    ax.plot(xs, xs, color="0.15", linewidth=0.9, label="y = x", gid="identity")

    if k is None:
        groups = [(None, np.ones(m.size, dtype=bool))]
    else:
        labels = k.astype(str)
        groups = [(c, labels == c) for c in sorted(set(labels.tolist()))]
    colours = colours_for([g for g, _ in groups])
    for name, sel in groups:
        if name is None:
            label = f"kernels (n={int(sel.sum())})"
        else:
            err = metrics(m[sel], p[sel])["gmre"] if sel.any() else math.nan
            label = f"{name} (n={int(sel.sum())}, err {100 * err:.0f}%)"
        ax.scatter(m[sel], p[sel], s=18, alpha=0.8, color=colours[name], edgecolors="none",
                   label=label, gid=f"points:{'all' if name is None else name}", zorder=3)

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal", adjustable="box")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10.0))
        axis.set_major_formatter(FuncFormatter(fmt_seconds))
    ax.set_xlabel("measured time per kernel")
    ax.set_ylabel("predicted time per kernel")
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    if title is not None:
        ax.set_title(title)

    summary = metrics(m, p)
    # The box goes in the off-diagonal corner with fewer points: upper left
    # holds over-predictions, lower right under-predictions.
    over = int((p > m).sum())
    if over > m.size - over:
        pos = dict(x=0.97, y=0.03, va="bottom", ha="right")
    else:
        pos = dict(x=0.03, y=0.97, va="top", ha="left")
    ax.text(pos.pop("x"), pos.pop("y"), metrics_text(summary, dropped), transform=ax.transAxes, **pos,
            fontsize=8, family="monospace", gid="metrics",
            bbox=dict(boxstyle="round,pad=0.4", facecolor="white", edgecolor="0.7", alpha=0.9))
    # Outside the axes: inside, any corner may hold points.
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, framealpha=0.9, borderaxespad=0.0)
    return ax
