"""The roofline of a device with the kernels of an `analyze` table placed on it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..models import BOUNDS
from ._common import colours_for, decade_limits, fmt_si, get_ax


def roofline(df, device, ax=None, *, time=None, hue="bound", title=None):
    """Roofline plot: the device's ceilings and each kernel at (intensity, FLOP/s).

    The roof is `min(peak FLOP/s, bandwidth × intensity)` with the FP32 vector
    peak (`DeviceSpec.peak_fp32_flops_per_s`) and DRAM bandwidth
    (`memory_bandwidth_bytes_per_s`); matrix-unit peaks
    (`peak_matmul_flops_per_s`, e.g. bf16 tensor cores) are drawn as dashed
    ceilings, and the ridge point (machine balance) as a dotted vertical
    line. A kernel sits at its arithmetic intensity (`flops /
    bytes_accessed`) and the FLOP/s it reaches in its time: `flops / time`.
    With the predicted `time_s` of an `analyze` table, a compute-bound kernel
    lands on the roof and a launch-bound one below it; with measured times
    (a `measured_s` column) the gap to the roof is the gap to the hardware.
    Kernels without FLOPs (copies, data movement) or without a time cannot be
    placed on log axes: they are left out and counted in the title line.

    **Arguments:**

    - `df`: a table with `flops`, `bytes_accessed` (or `intensity`) and a
      time column, as `xla_costmodel.analyze` returns.
    - `device`: a `DeviceSpec` or a name for `get_device`.
    - `ax`: the Axes to draw on; None makes a new figure.
    - `time`: the time column; default `measured_s` when present, else `time_s`.
    - `hue`: the column that colours the kernels (default `bound`); None for one colour.
    - `title`: the Axes title (default: device and, if known, model).

    **Returns:** the Axes. `gid`s: `"roof"` (the roof line), `"ceiling:<dtype>"`,
    `"ridge"`, `"kernels:<value>"` (one collection per `hue` value).

    **Raises:** `KeyError` naming a missing column.
    """
    from matplotlib.ticker import FuncFormatter

    from ..devices import get_device

    dev = get_device(device) if not hasattr(device, "memory_bandwidth_bytes_per_s") else device
    frame = pd.DataFrame(df)
    if time is None:
        time = "measured_s" if "measured_s" in frame.columns else "time_s"
    needed = ["flops", time] + ([] if "intensity" in frame.columns else ["bytes_accessed"])
    if hue is not None:
        needed.append(hue)
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise KeyError(f"roofline: the table has no column(s) {missing}; columns: {list(frame.columns)}")

    flops = frame["flops"].to_numpy(dtype=float)
    if "bytes_accessed" in frame.columns:
        nbytes = frame["bytes_accessed"].to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            intensity = np.where(nbytes > 0, flops / nbytes, np.nan)
    else:
        intensity = frame["intensity"].to_numpy(dtype=float)
    seconds = frame[time].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(seconds > 0, flops / seconds, np.nan)
    placed = np.isfinite(intensity) & (intensity > 0) & np.isfinite(rate) & (rate > 0)
    if "bound" in frame.columns:
        not_free = (frame["bound"] != "free").to_numpy()
        left_out = int((~placed & not_free).sum())
        placed &= not_free
    else:
        left_out = int((~placed).sum())

    ax = get_ax(ax)
    peak = dev.peak_fp32_flops_per_s
    bw = dev.memory_bandwidth_bytes_per_s
    ridge = peak / bw
    ceilings = {d: r for d, r in dict(dev.peak_matmul_flops_per_s).items() if r > peak * 1.01}
    top = max([peak, *ceilings.values()])
    x_lo, x_hi = decade_limits(intensity[placed], np.array([ridge / 10.0, ridge * 10.0]))
    x_lo, x_hi = min(x_lo, 1e-2), max(x_hi, 1e3)
    xs = np.logspace(math.log10(x_lo), math.log10(x_hi), 256)
    ax.plot(xs, np.minimum(peak, bw * xs), color="0.1", linewidth=1.6, gid="roof",
            label=f"roof: {fmt_si(peak, 'FLOP/s')} FP32, {fmt_si(bw, 'B/s')}")
    # Dtypes with the same matrix-unit peak share one dashed line.
    by_rate: dict[float, list[str]] = {}
    for dtype, r in ceilings.items():
        by_rate.setdefault(r, []).append(dtype)
    for r, dtypes in sorted(by_rate.items(), key=lambda kv: -kv[0]):
        names = "/".join(dtypes)
        ax.plot(xs, np.minimum(r, bw * xs), color="0.45", linewidth=0.9, linestyle="--",
                gid=f"ceiling:{names}", label=f"{names} matrix units: {fmt_si(r, 'FLOP/s')}")
    ax.axvline(ridge, color="0.5", linewidth=0.8, linestyle=":", gid="ridge",
               label=f"ridge point: {ridge:.3g} FLOP/B")

    sub = frame[placed]
    xi, yi = intensity[placed], rate[placed]
    if hue is None:
        groups = [(None, np.ones(len(sub), dtype=bool))]
    else:
        values = sub[hue].astype(str).to_numpy()
        # Bounds in their usual order (and their one colour, `BOUND_COLOURS`); other values by name.
        present = sorted(set(values.tolist()), key=lambda v: (BOUNDS.index(v) if v in BOUNDS else 99, v))
        groups = [(v, values == v) for v in present]
    colours = colours_for([g for g, _ in groups])
    for name, sel in groups:
        ax.scatter(xi[sel], yi[sel], s=28, alpha=0.85, color=colours[name], edgecolors="white", linewidths=0.4,
                   zorder=3, gid=f"kernels:{'all' if name is None else name}",
                   label=f"{'kernels' if name is None else name} (n={int(sel.sum())})")

    y_lo, _ = decade_limits(yi, np.array([bw * x_lo]))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(max(y_lo, top * 1e-9), top * 3.0)  # (far below the roof: a point on the edge would hide)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: fmt_si(v, "FLOP/s")))
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    what = "measured" if time == "measured_s" else "predicted"
    ax.set_ylabel(f"FLOP/s ({what}: flops / {time})")
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    if title is None:
        model = df.attrs.get("model_name") if hasattr(df, "attrs") else None
        model = getattr(df, "model_name", None) if "model_name" in getattr(df, "_metadata", ()) else model
        title = f"roofline of {dev.name}" + (f", {model} model" if isinstance(model, str) else "")
    if left_out:
        title += f"\n{left_out} kernel(s) without FLOPs or time not shown"
    ax.set_title(title, fontsize=10)
    # Upper left lies above the bandwidth slope, where no kernel can be.
    ax.legend(loc="upper left", fontsize=7, framealpha=0.9)
    return ax
