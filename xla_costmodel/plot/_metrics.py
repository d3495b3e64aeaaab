"""The accuracy figures a predicted-vs-measured plot is annotated with.

They come from `xla_costmodel.fit.accuracy`,
the same function that fills `compare`'s table, so a figure and a
comparison table never disagree.
Here only the pairs that cannot go on log axes are set aside first.
"""

from __future__ import annotations

import numpy as np

from ..metrics import accuracy


def clean_pairs(measured, predicted, kind=None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    """Both arrays as floats, pairs with a non-positive or non-finite time dropped.

    **Returns:** `(measured, predicted, kind, dropped)`; `kind` is filtered the
    same way (or None). **Raises:** `ValueError` when the lengths differ.
    """
    m = np.asarray(measured, dtype=float).ravel()
    p = np.asarray(predicted, dtype=float).ravel()
    if m.shape != p.shape:
        raise ValueError(f"measured has {m.size} values but predicted has {p.size}")
    k = None
    if kind is not None:
        k = np.asarray(kind, dtype=object).ravel()
        if k.shape != m.shape:
            raise ValueError(f"kind has {k.size} values but measured has {m.size}")
    ok = np.isfinite(m) & np.isfinite(p) & (m > 0) & (p > 0)
    return m[ok], p[ok], (k[ok] if k is not None else None), int((~ok).sum())


def metrics(measured: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """`accuracy` of clean pairs (see `clean_pairs`).

    Keys: `n`, `ratio_error` (exp(mean |ln(pred/meas)|) - 1), `sk_error`
    (exp(mean ln(|pred - meas| / meas)), Stevens & Klöckner's), `bias`
    (exp(median ln(pred/meas))), `within_2x`, `mape`, `median_abs_log`,
    `kendall_tau`, `spearman` (NaN when either side is constant).
    """
    if len(measured) == 0:
        return accuracy(np.zeros(0), np.zeros(0))
    return accuracy(predicted, measured)
