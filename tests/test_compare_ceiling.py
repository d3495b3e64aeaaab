"""The measurement noise ceiling (`xla_costmodel.compare._ceiling`), worked by hand on tiny rows."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from xla_costmodel.compare._ceiling import noise_ceiling, round_minima, rounds_of, run_pair
from xla_costmodel.metrics import accuracy


def _rows(samples, launches=None, case="p", ops=None, rounds=None):
    n = len(samples)
    params = json.dumps({"program": case, **({"rounds": rounds} if rounds else {})})
    return pd.DataFrame({
        "case": [case] * n,
        "hlo_op": ops or [f"k{i}" for i in range(n)],
        "opcode": ["fusion"] * n,
        "hlo_text": ["%k = f32[1] fusion()"] * n,
        "samples_per_run_s": [list(s) for s in samples],
        "min_per_run_s": [min(s) for s in samples],
        "launches": launches or [1] * n,
        "params": [params] * n,
    })


def test_round_minima_split_samples_in_pass_order_and_divide_by_launches():
    # Kernel 0: passes [4, 2] and [3, 5] -> minima 2, 3; kernel 1 (2 launches): [8, 6], [10, 12] -> 3, 5.
    rows = _rows([[4, 2, 3, 5], [8, 6, 10, 12]], launches=[1, 2])
    m = round_minima(rows, 2)
    assert m.tolist() == [[2.0, 3.0], [3.0, 5.0]]
    with pytest.raises(ValueError, match="multiple of 3"):
        round_minima(rows, 3)


def test_noise_ceiling_round_pairs_are_accuracy_of_one_pass_against_another():
    rows = _rows([[1, 2, 3], [4, 8, 2], [9, 6, 6]])  # three passes of one sample each
    table = noise_ceiling(rows, rounds=3)
    assert list(table["comparison"]) == ["round 1 vs round 2", "round 1 vs round 3", "round 2 vs round 3",
                                         "mean of round pairs"]
    first = table.iloc[0]
    # Round 1 = (1, 4, 9), round 2 = (2, 8, 6): ratios 1/2, 1/2, 3/2.
    expected = math.exp((2 * math.log(2) + math.log(1.5)) / 3) - 1
    assert first["ratio_error"] == pytest.approx(expected)
    assert first["ratio_error"] == pytest.approx(accuracy([1, 4, 9], [2, 8, 6])["ratio_error"])
    assert first["ties"] == 0.0
    # Round 2 vs round 3 = (2, 8, 6) vs (3, 2, 6): one kernel timed identically.
    assert table.iloc[2]["ties"] == pytest.approx(1 / 3)
    assert table.iloc[3]["ratio_error"] == pytest.approx(table.iloc[:3]["ratio_error"].mean())


def test_run_pair_matches_kernels_by_case_and_op():
    a = _rows([[1.0], [2.0], [4.0]], ops=["x", "y", "z"])
    b = _rows([[2.0], [1.0]], ops=["y", "x"])
    ta, tb, missing = run_pair(a, b)
    assert sorted(zip(ta.tolist(), tb.tolist())) == [(1.0, 1.0), (2.0, 2.0)] and missing == 1
    table = noise_ceiling(a, other=b)
    assert table["comparison"].iloc[0].startswith("run 1 vs run 2") and "1 unmatched" in table["comparison"].iloc[0]
    assert table["ratio_error"].iloc[0] == pytest.approx(0.0) and table["ties"].iloc[0] == 1.0


def test_rounds_of_reads_params_or_falls_back():
    assert rounds_of(_rows([[1, 2]], rounds=2)) == 2
    assert rounds_of(_rows([[1, 2]])) == 3  # files from before `rounds` was recorded
    mixed = pd.concat([_rows([[1, 2]], rounds=2), _rows([[1, 2, 3]], rounds=3)])
    with pytest.raises(ValueError, match="different numbers of rounds"):
        rounds_of(mixed)


def test_noise_ceiling_of_the_committed_programs_has_every_kernel():
    from xla_costmodel.datasets._data import kernel_rows, load_rows, programs_dataset

    rows = load_rows(programs_dataset("host"))
    rows = rows[rows["kernel_class"] == "program"]
    table = noise_ceiling(rows, rounds_of(rows))
    assert (table["n"] == len(kernel_rows(rows))).all()
    assert np.isfinite(table[["ratio_error", "sk_error", "kendall_tau"]].to_numpy()).all()


def test_noise_by_source_and_program_noise_by_hand():
    from xla_costmodel.compare._ceiling import noise_by_source, program_noise

    # Source a: one program (2 kernels, the second launched twice per run); source b: one program of 1 kernel.
    run1 = pd.concat([_rows([[1.0], [4.0]], launches=[1, 2], case="pa", ops=["x", "y"]).assign(source="a"),
                      _rows([[3.0]], case="pb", ops=["z"]).assign(source="b")], ignore_index=True)
    run2 = pd.concat([_rows([[2.0], [4.0]], launches=[1, 2], case="pa", ops=["x", "y"]).assign(source="a"),
                      _rows([[3.0]], case="pb", ops=["z"]).assign(source="b")], ignore_index=True)
    run1["wall_min_per_run_s"] = [10.0, 10.0, 5.0]
    run2["wall_min_per_run_s"] = [12.0, 12.0, 5.0]
    table = noise_by_source(run1, run2).set_index("source")
    assert list(table.index) == ["a", "b", "all"]
    # Per launch: a = (1 -> 2, 2 -> 2), run 2 scored against run 1 as a prediction.
    assert table.loc["a", "ratio_error"] == pytest.approx(accuracy([2.0, 2.0], [1.0, 2.0])["ratio_error"])
    assert table.loc["a", "ties"] == 0.5 and table.loc["b", "ties"] == 1.0
    assert table.loc["all", "n"] == 3 and table.loc["all", "programs"] == 2
    per = program_noise(run1, run2).set_index("case")
    # pa per run: run 1 = 1 + 4 = 5, run 2 = 2 + 4 = 6 (the second kernel's 4 s already sums its 2 launches).
    assert per.loc["pa", "run1_per_run_s"] == pytest.approx(5.0)
    assert per.loc["pa", "run2_per_run_s"] == pytest.approx(6.0)
    assert per.loc["pa", "run2_over_run1"] == pytest.approx(1.2)
    assert per.loc["pa", "wall2_over_wall1"] == pytest.approx(1.2)
    assert per.loc["pb", "run2_over_run1"] == 1.0 and per.loc["pb", "kernels"] == 1
