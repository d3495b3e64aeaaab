"""The learned efficiency fitted to rows and scored leaving one source out (`fit.calibration`): what
`scripts/fit_gpu_learned.py` ships and `scripts/bench_gpu.py` scores."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd

from xla_costmodel import get_device
from xla_costmodel.fit import FEATURES
from xla_costmodel.fit.calibration import (FLOOR_COLUMN, STRUCTURE, efficiency_leave_one_source_out, efficiency_prices,
                                           efficiency_rows, fit_efficiency, usable_efficiency_rows)
from xla_costmodel.hlo import parse_hlo

ROOT = Path(__file__).resolve().parents[1]


def _rows(source: str, factor: float, n: int, rng) -> pd.DataFrame:
    """`n` rows of one source: random counts, an analytical price, measured = price x `factor`; a source
    whose factor is not 1 has kernels of its own kind (a first count far above the others')."""
    t = pd.DataFrame(rng.uniform(1.0, 1e6, size=(n, len(FEATURES))), columns=list(FEATURES))
    if factor != 1.0:
        t[FEATURES[0]] = rng.uniform(1e8, 1e9, size=n)
    for c in STRUCTURE:
        t[c] = 0.0
    t["base_s"] = rng.uniform(1e-6, 1e-4, size=n)
    t["measured_s"] = t["base_s"] * factor
    t["source"] = source
    return t


def test_each_source_is_priced_by_a_model_that_never_saw_it():
    rng = np.random.default_rng(0)
    suite = _rows("suite", 1.0, 60, rng)
    # Source "slow" (kernels of its own kind) runs 3x its analytical price; the others at it. A model that
    # trained on "slow" learns the 3x; one fitted leaving it out cannot, so its price of "slow" stays near
    # the analytical one, while the other sources, fitted with "slow" among their training rows, stay at 1x.
    scored = pd.concat([_rows("a", 1.0, 40, rng), _rows("slow", 3.0, 40, rng), _rows("b", 1.0, 40, rng)],
                       ignore_index=True)
    scored.loc[0, "base_s"] = np.nan  # no analytical price: no price
    scored.loc[1, FEATURES[0]] = np.nan  # no features: the analytical price kept
    pred = efficiency_leave_one_source_out(suite, scored)
    assert pred.shape == (len(scored),)
    assert np.isnan(pred[0]) and pred[1] == scored.loc[1, "base_s"]
    slow = (scored["source"] == "slow").to_numpy()
    ratio = pred / scored["base_s"].to_numpy()
    assert np.nanmedian(ratio[slow]) < 1.5  # never trained on: near the analytical price
    assert np.nanmedian(np.abs(np.log(ratio[~slow][2:]))) < 0.1  # the others: near the truth, 1x
    # Fitted on every row, the same model learns the 3x of "slow" (so the check above can fail).
    everything = efficiency_prices(fit_efficiency(pd.concat([suite, scored], ignore_index=True)), scored)
    assert np.nanmedian(everything[slow] / scored["base_s"].to_numpy()[slow]) > 2.0
    # Rows without features or a price never train.
    assert not usable_efficiency_rows(scored)[:2].any() and usable_efficiency_rows(scored)[2:].all()


def test_the_counts_only_form_reads_no_structure():
    rng = np.random.default_rng(1)
    train = _rows("a", 2.0, 50, rng)
    assert set(fit_efficiency(train).feature_names_) == {*FEATURES, *STRUCTURE} & set(train.columns)
    assert set(fit_efficiency(train, structure=False).feature_names_) == set(FEATURES)


def test_kernels_become_rows_with_their_features_structure_floor_and_labels():
    with gzip.open(ROOT / "hlo_fixtures" / "gpu_h100" / "equinox_mlp_grad@small.post.hlo.gz", "rt") as f:
        module = parse_hlo(f.read(), source="equinox_mlp_grad@small.post.hlo")
    device = get_device("h100-sxm")
    kernels = [i for _c, i in module.instructions() if i.opcode == "fusion"][:4] + [None]
    t = efficiency_rows(kernels, device, base_s=np.full(5, 2e-6), measured_s=np.arange(1, 6) * 1e-6,
                        source="x", case=[f"c{i}" for i in range(5)])
    assert list(t.columns[: len(FEATURES)]) == list(FEATURES)
    assert {*STRUCTURE, FLOOR_COLUMN, "base_s", "measured_s", "source", "case"} <= set(t.columns)
    assert t.loc[:3, list(FEATURES)].notna().all().all() and t.loc[4, list(FEATURES)].isna().all()
    assert (t.loc[:3, FLOOR_COLUMN] > 0).all() and np.isnan(t.loc[4, FLOOR_COLUMN])
    assert (t[[c for c in STRUCTURE if c.startswith("kind_")]].loc[:3].sum(axis=1) == 1).all()  # one kind each
    assert list(t["source"]) == ["x"] * 5 and list(t["case"]) == ["c0", "c1", "c2", "c3", "c4"]
    np.testing.assert_array_equal(t["measured_s"], np.arange(1, 6) * 1e-6)
