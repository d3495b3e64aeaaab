"""Tables for reading: times in one unit a person reads at a glance, counts as integers, no float noise."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

#: Units a table's times may be shown in: (suffix, seconds per unit).
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def _significant(v: float, digits: int) -> float:
    if not math.isfinite(v) or v == 0:
        return v
    return round(v, digits - 1 - int(math.floor(math.log10(abs(v)))))


def readable(df: pd.DataFrame, unit: str = "us", digits: int = 3) -> pd.DataFrame:
    """`df` as a person reads it: every seconds column (`*_s`, numeric) in `unit` and renamed
    (`time_s` -> `time_us`), float columns that hold whole numbers as integers (`flops`,
    `launches`), other floats to `digits` significant digits. Only for showing: the numbers
    are rounded.

    **Arguments:** `df`: a DataFrame (a `KernelTable`, `compare`'s table, ...); `unit`: `"ns"`,
    `"us"`, `"ms"` or `"s"`; `digits`: significant digits kept.

    **Returns:** a new plain DataFrame, same index.
    """
    if unit not in TIME_UNITS:
        raise ValueError(f"unknown unit {unit!r}; units: {', '.join(TIME_UNITS)}")
    out = pd.DataFrame(df).copy()
    renamed = {}
    for col in list(out.columns):
        values = out[col]
        if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        name = str(col)
        floats = values.astype(float)
        if name.endswith("_s"):
            floats = floats / TIME_UNITS[unit]
            renamed[col] = f"{name[:-2]}_{unit}"
        finite = floats[np.isfinite(floats)]
        if not name.endswith("_s") and len(finite) and (finite == finite.round()).all() and (finite.abs() < 2**53).all():
            # Nullable integers: a missing count shows as <NA>, not as a float that turns the others to 596.0.
            out[col] = floats.where(np.isfinite(floats)).round().astype("Int64")
        else:
            out[col] = floats.map(lambda v: _significant(v, digits))
    return out.rename(columns=renamed)
