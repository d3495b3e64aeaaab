"""Predicted against measured kernel time: the figure every model is judged by."""

from __future__ import annotations

import math

import numpy as np

from ._common import decade_limits, fmt_seconds, styles_for
from ._metrics import clean_pairs, metrics

BAND = 2.0
# Below the axes, the legend starts this far under their bottom edge (points): clear of the
# tick labels and the x label.
_LEGEND_GAP_PT = 42.0
_LEGEND_FONT = 7.0


def metrics_text(m: dict, dropped: int = 0) -> str:
    """The summary of `predicted_vs_measured`, from `fit.accuracy`'s dict: three lines."""
    lines = [
        f"N = {m['n']}" + (f" ({dropped} dropped: time <= 0 or NaN)" if dropped else ""),
        # Errors as fractions, named as `compare`'s tables name them (sk_error: Stevens & Klöckner's).
        f"ratio_error = {m['ratio_error']:.3f}   sk_error = {m['sk_error']:.3f}",
        f"median bias = ×{m['bias']:.3g}   within 2×: {100 * m['within_2x']:.1f}%   "
        f"Kendall τ = {m['kendall_tau']:.3f}",
    ]
    return "\n".join(lines)


def _columns(ax, labels: list[str]) -> int:
    """Legend columns that fit under the axes: as many as the longest label allows, at most 4.

    The axes' final width is known only when the figure is laid out, so the
    room is the figure's width shared among the columns of its grid of axes.
    """
    fig = ax.figure
    spec = ax.get_subplotspec()
    if spec is not None:
        grid_columns = spec.get_gridspec().ncols
        span = spec.colspan.stop - spec.colspan.start
        width_pt = 0.8 * fig.get_figwidth() * 72.0 * span / grid_columns
    else:
        width_pt = ax.get_position().width * fig.get_figwidth() * 72.0
    longest = max((len(s) for s in labels), default=10)
    column_pt = (0.52 * longest + 3.5) * _LEGEND_FONT  # text, plus the marker and the gaps
    return int(max(1, min(len(labels), width_pt // column_pt, 4)))


def predicted_vs_measured(measured, predicted, kind=None, ax=None, title=None, *, highlight=None, limits=None):
    """Log-log scatter of predicted against measured kernel time.

    Measured on x, predicted on y, equal aspect and identical whole-decade
    limits; the line y = x and a shaded band between y = x/2 and y = 2x; one
    scatter per kernel kind, each with its own colour and marker (a bound,
    `compute`/`memory`/`launch`/..., has the colour it has in every figure of
    this package), its legend entry giving the count and the kind's
    `ratio_error` (a fraction, as in `compare`'s tables).

    Nothing is drawn over the points: under the axes, the legend (as many
    columns as fit the axes' width) is headed by the accuracy over all
    kernels: N, the geometric-mean relative error
    `exp(mean|ln(pred/meas)|) - 1`, Stevens & Klöckner's error
    `exp(mean ln(|pred - meas| / meas))` (`sk_error`), the median bias
    `exp(median ln(pred/meas))`, the share within 2x and Kendall's tau,
    computed by `xla_costmodel.fit.accuracy` (the numbers of `compare`'s
    table). Pairs with a non-positive or non-finite time cannot go on log
    axes: they are left out and counted there.

    **Arguments:**

    - `measured`, `predicted`: kernel times in seconds, array-likes of one length.
    - `kind`: a category per kernel (e.g. the program, the fusion kind, the
      `bound` or `kernel_class`), or None for one colour.
    - `ax`: the Axes to draw on; None makes a new figure.
    - `title`: the Axes title.
    - `highlight`: a kind (or several) to bring forward, e.g. your own
      program among the corpus: drawn larger, outlined, on top and listed
      first; the other kinds are drawn fainter.
    - `limits`: `(low, high)` seconds of both axes, e.g. the same for the
      panels of one figure (`decade_limits` of all their times); default
      the whole decades around these times.

    **Returns:** the Axes. Artists carry `gid`s for inspection: `"identity"`
    (the y = x line), `"band_2x"` (the band), `"points:<kind>"` (one
    collection per kind), `"legend"` and `"metrics"` (the legend's heading).

    **Raises:** `ValueError` when the lengths differ, or `highlight` names a
    kind that has no kernel.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator
    from matplotlib.transforms import ScaledTranslation

    m, p, k, dropped = clean_pairs(measured, predicted, kind)
    highlighted = _highlighted(highlight, k)
    if ax is None:
        ax = _new_axes(0 if k is None else len(set(k.astype(str).tolist())))
    lo, hi = decade_limits(m, p) if limits is None else (float(limits[0]), float(limits[1]))
    if not 0 < lo < hi:
        raise ValueError(f"limits must be 0 < low < high seconds, got {limits}")
    xs = np.array([lo, hi])
    ax.fill_between(xs, xs / BAND, xs * BAND, color="0.5", alpha=0.15, linewidth=0,
                    label=f"±{BAND:g}×", gid="band_2x")
    ax.plot(xs, xs, color="0.15", linewidth=0.9, label="y = x", gid="identity")

    if k is None:
        groups = [(None, np.ones(m.size, dtype=bool))]
    else:
        labels = k.astype(str)
        names = sorted(set(labels.tolist()))
        # Highlighted kinds first, so that they lead the legend; styles follow the sorted names.
        groups = [(c, labels == c) for c in sorted(names, key=lambda c: c not in highlighted)]
    styles = styles_for(sorted(g for g, _ in groups if g is not None)) if k is not None else {None: ("#1f77b4", "o")}
    for name, sel in groups:
        colour, marker = styles[name]
        if name is None:
            label = f"kernels (n={int(sel.sum())})"
        else:
            err = metrics(m[sel], p[sel])["ratio_error"] if sel.any() else math.nan
            label = f"{name} (n={int(sel.sum())}, ratio_error {err:.2f})"
        if name in highlighted:
            ax.scatter(m[sel], p[sel], s=46, alpha=1.0, color=colour, marker=marker, edgecolors="black",
                       linewidths=0.9, label=label, gid=f"points:{name}", zorder=5)
        else:
            ax.scatter(m[sel], p[sel], s=18, alpha=0.5 if highlighted else 0.8, color=colour, marker=marker,
                       edgecolors="none", label=label, gid=f"points:{'all' if name is None else name}", zorder=3)

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal", adjustable="box")
    # A square box in a taller slot stays at the top of it, and the legend under it inside the slot.
    ax.set_anchor("N")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10.0))
        axis.set_major_formatter(FuncFormatter(fmt_seconds))
    ax.set_xlabel("measured time per kernel")
    ax.set_ylabel("predicted time per kernel")
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    if title is not None:
        ax.set_title(title)

    # Under the axes, as wide as they are: inside, any corner may hold points, and to the
    # right a long legend would take the figure's width from the plot.
    handles, texts = ax.get_legend_handles_labels()
    below = ax.transAxes + ScaledTranslation(0.0, -_LEGEND_GAP_PT / 72.0, ax.figure.dpi_scale_trans)
    legend = ax.legend(handles, texts, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=below,
                       ncols=_columns(ax, texts), fontsize=_LEGEND_FONT, framealpha=0.9, borderaxespad=0.0,
                       title=metrics_text(metrics(m, p), dropped), alignment="left",
                       title_fontproperties={"family": "monospace", "size": 7.5})
    legend.set_gid("legend")
    legend.get_title().set_gid("metrics")
    return ax


def _new_axes(kinds: int):
    """The Axes of a new figure, its height grown by the legend's rows so that the plot keeps its size."""
    import matplotlib.pyplot as plt

    width = 6.4
    rows = math.ceil((kinds + 2) / (2 if kinds > 6 else 1)) + 3  # entries in columns, and the summary heading
    legend_in = rows * _LEGEND_FONT * 1.9 / 72.0 + 0.4  # a row: the text and the spacing below it
    _, ax = plt.subplots(figsize=(width, 5.8 + legend_in), layout="constrained")
    return ax


def _highlighted(highlight, kinds) -> set[str]:
    """The kinds `highlight` names, checked against the kinds there are."""
    if highlight is None:
        return set()
    wanted = {highlight} if isinstance(highlight, str) else {str(h) for h in highlight}
    present = set(kinds.astype(str).tolist()) if kinds is not None else set()
    missing = sorted(wanted - present)
    if missing:
        have = ", ".join(sorted(present)) if present else "none (no kind= given)"
        raise ValueError(f"highlight: no kernel of kind {', '.join(map(repr, missing))}; kinds: {have}")
    return wanted
