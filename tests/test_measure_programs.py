"""`measure._programs`: this project's own programs and the supplementary kernels, measured by the library
(`calibrate` runs them on a user's machine; `scripts/measure_programs.py` for the shipped file)."""

from __future__ import annotations

import json

from xla_costmodel.measure import read_dataset
from xla_costmodel.measure._dataset import DATASET_COLUMNS, write_dataset
from xla_costmodel.measure._programs import measure_extra, measure_zoo


def test_a_zoo_program_gives_one_row_per_kernel_with_its_rounds_pooled(tmp_path):
    seen = []
    df = measure_zoo(["mlp_fwd"], rounds=2, repeats=6, discard=1, progress=seen.append,
                     builders={"broken": (lambda: 1 / 0, {"width": 1})})
    assert seen == ["[round 1/2] mlp_fwd", "[round 2/2] mlp_fwd"]
    assert list(df.columns) == list(DATASET_COLUMNS) and len(df) >= 2
    assert set(df["kernel_class"]) == {"program"} and set(df["source"]) == {"zoo"} and df["suite_run"].nunique() == 1
    assert all(len(s) == 2 * (6 - 1) for s in df["samples_per_run_s"])  # 2 rounds x 5 kept runs
    assert json.loads(df["params"].iloc[0])["rounds"] == 2
    assert write_dataset(df, tmp_path / "p.parquet") == len(df) == len(read_dataset(tmp_path / "p.parquet"))

    broken = measure_zoo(["broken"], rounds=1, repeats=3, discard=1, progress=False,
                         builders={"broken": (lambda: 1 / 0, {"width": 1})})
    assert len(broken) == 0 and "ZeroDivisionError" in broken.attrs["failed"][("broken", "program")]


def test_a_supplementary_kernel_is_measured_in_its_chain():
    df = measure_extra(["x_ew_add"], rounds=1, repeats=5, discard=1, progress=False)
    assert set(df["kernel_class"]) == {"extra-elementwise"} and set(df["source"]) == {"extra"}
    assert df.groupby("case").size().min() >= 2  # a chain of kernels, one row each
