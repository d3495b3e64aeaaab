"""Helpers shared by the figures: axes creation, SI tick labels, decade limits."""

from __future__ import annotations

import math

import numpy as np

# Colours for categories in first-seen order: matplotlib's tab10 (its grey last), then ten darker
# ones of tab20b, so that up to 20 categories (the corpus has 11 sources) never share a colour.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
           "#e377c2", "#bcbd22", "#17becf", "#7f7f7f",
           "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#6b6ecf", "#b5cf6b", "#e7ba52",
           "#d6616b", "#ce6dbd")
# Markers combined with the colours, so that more categories than colours stay apart.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*")

#: The one colour of each bound (`analyze`'s `bound` column) in every figure: a kernel that is
#: memory-bound in the roofline is the same colour in the predicted-vs-measured scatter.
BOUND_COLOURS = {
    "compute": "#d62728",   # red
    "memory": "#1f77b4",    # blue
    "launch": "#2ca02c",    # green
    "network": "#9467bd",   # purple (collectives)
    "unknown": "#7f7f7f",   # grey
    "free": "#bcbd22",      # olive
}


def get_ax(ax):
    """`ax`, or the Axes of a new figure (pyplot is imported only then)."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(6.0, 5.0), layout="constrained")
    return ax


def fmt_seconds(value: float, _pos=None) -> str:
    """`3e-6` -> `"3 µs"`; for tick labels and annotations."""
    if value is None or not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    v = abs(value)
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if v >= factor * 0.9999 or unit == "ns":
            # (no exponent: 1000 s, not 1e+03 s)
            scaled = v / factor
            return f"{sign}{scaled:,.0f} {unit}" if scaled >= 999.5 else f"{sign}{scaled:.3g} {unit}"
    return f"{value:.3g} s"  # pragma: no cover


def fmt_si(value: float, unit: str = "", _pos=None) -> str:
    """`1.5e12, "FLOP/s"` -> `"1.5 TFLOP/s"`."""
    if value is None or not math.isfinite(value) or value == 0:
        return f"{value:g} {unit}".strip()
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""),
                           (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")):
        if abs(value) >= factor * 0.9999:
            return f"{value / factor:.3g} {prefix}{unit}".strip()
    return f"{value:.3g} {unit}".strip()


def decade_limits(*arrays: np.ndarray) -> tuple[float, float]:
    """Whole-decade limits around every positive finite value, strictly (at least one decade apart)."""
    vals = np.concatenate([np.asarray(a, dtype=float).ravel() for a in arrays]) if arrays else np.array([])
    vals = vals[np.isfinite(vals) & (vals > 0)]
    if vals.size == 0:
        return 1e-6, 1e-3
    # A value on (or within 12 % of) a whole decade gets the decade beyond it too: a point on the
    # axes' edge is half hidden.
    lo = 10.0 ** math.floor(math.log10(vals.min()) - 0.05)
    hi = 10.0 ** math.ceil(math.log10(vals.max()) + 0.05)
    if hi <= lo:
        hi = lo * 10.0
    return lo, hi


def colours_for(categories) -> dict:
    """A stable colour for each category: a bound's own colour (`BOUND_COLOURS`), others in first-seen order.

    When every category is a bound, each gets its bound colour; otherwise the
    palette is dealt out in order (so up to 20 categories get 20 colours).
    """
    cats = list(dict.fromkeys(categories))
    if cats and all(c in BOUND_COLOURS for c in cats):
        return {c: BOUND_COLOURS[c] for c in cats}
    return {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(cats)}


def styles_for(categories) -> dict:
    """`{category: (colour, marker)}`, distinct for up to `len(PALETTE) * len(MARKERS)` categories.

    Colours as `colours_for`; past the palette's length the marker changes
    too, so that categories sharing a colour never share a marker.
    """
    colours = colours_for(categories)
    return {c: (colours[c], MARKERS[(i // len(PALETTE)) % len(MARKERS)]) for i, c in enumerate(colours)}
