"""Calibration that cannot silently make things worse (issue 33, item 3).

`calibrate --device host --quick` wrote six calibrations to the user's data directory, and every later
`fitted`/`learned` prediction used that 49-kernel fit. Now a quick calibration goes to `quick/`, read by no model
unless asked, and a calibration written to the data directory is used only if, fitted without one case in five,
it scores at least as well on those rows as the calibration in use; else it goes to `held-back/`, with one line
saying why.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from xla_costmodel import calibrate
from xla_costmodel.fit import _calibrate
from xla_costmodel.datasets._store import (DATA_DIR_ENV, calibration_in_use, held_back_dir, load_calibration,
                                      quick_dir, shipped_dir)
from xla_costmodel.measure import read_dataset
from conftest import TEST_CPU

ROOT = Path(__file__).resolve().parents[1]


def suite_rows(scale=None):
    suite = read_dataset(ROOT / "calibration" / "host_cpu.parquet")
    keep = suite["kernel"].isin(["ew_add", "ew_exp", "ew_mul", "copy_s1", "copy_s2", "matmul_square", "launch_add"])
    rows = suite[keep & (suite["dtype"] == "float32")].reset_index(drop=True)
    if scale is not None:  # another machine's times, or nonsense ones
        factor = scale(len(rows))
        for column in ("min_per_run_s", "median_per_run_s", "min_per_launch_s"):
            rows[column] = rows[column] * factor
    return rows


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    return tmp_path / "data"


def test_a_worse_calibration_is_held_back_and_the_one_in_use_stays(data_dir, capsys):
    good = calibrate(TEST_CPU, dataset=suite_rows(), models=("fitted",), out_dir=data_dir, progress=False)
    in_use = Path(good["file"][0])
    before = in_use.read_bytes()
    noise = np.random.default_rng(0)
    result = calibrate(TEST_CPU, dataset=suite_rows(lambda n: np.exp(noise.normal(0, 1.5, n))), models=("fitted",))
    row = result.iloc[0]
    assert not row["used_by_default"] and row["held_out_ratio_error"] > row["in_use_ratio_error"]
    assert Path(row["file"]) == held_back_dir() / in_use.name and Path(row["in_use_file"]) == in_use
    assert in_use.read_bytes() == before  # nothing the user had is overwritten
    assert calibration_in_use("fitted", TEST_CPU) == (in_use, "yours")
    assert load_calibration("fitted", TEST_CPU)["_path"] == str(in_use)
    saved = json.loads(Path(row["file"]).read_text())
    assert saved["judgement"]["used_by_default"] is False
    lines = [line for line in capsys.readouterr().err.splitlines() if "NOT USED" in line]
    assert len(lines) == 1 and "scores ratio_error" in lines[0] and str(held_back_dir()) in lines[0], lines


def test_a_better_calibration_replaces_the_one_in_use(data_dir):
    calibrate(TEST_CPU, dataset=suite_rows(lambda n: np.full(n, 30.0) ** np.linspace(-1, 1, n)), models=("fitted",),
              out_dir=data_dir, progress=False)
    result = calibrate(TEST_CPU, dataset=suite_rows(), models=("fitted",), progress=False)
    row = result.iloc[0]
    assert row["used_by_default"] and row["held_out_ratio_error"] <= row["in_use_ratio_error"]
    assert Path(row["file"]) == data_dir / "test-cpu_fitted.json" == calibration_in_use("fitted", TEST_CPU)[0]


def test_with_no_calibration_in_use_a_new_one_is_used(data_dir):
    row = calibrate(TEST_CPU, dataset=suite_rows(), models=("fitted",), progress=False).iloc[0]
    assert row["used_by_default"] and Path(row["file"]).parent == data_dir and row["in_use_file"] == ""


def test_a_quick_calibration_goes_where_no_model_reads_it(data_dir, monkeypatch, capsys):
    def measured_quick(dev, quick, out_dir, progress):  # the quick suite, without minutes of measuring
        assert quick
        path = out_dir / f"{dev.name}_quick.parquet"
        out_dir.mkdir(parents=True, exist_ok=True)
        suite_rows().to_parquet(path, index=False)
        return path

    monkeypatch.setattr(_calibrate, "_measure", measured_quick)
    result = calibrate("host", quick=True, models=("fitted",))
    assert Path(result["file"][0]).parent == quick_dir() == data_dir / "quick"
    assert "no model reads unless asked" in capsys.readouterr().err
    # The shipped calibration is still what models read.
    assert calibration_in_use("fitted", "host") == (shipped_dir() / "host_fitted.json", "shipped")
    monkeypatch.setenv(DATA_DIR_ENV, str(quick_dir()))  # asked for
    assert calibration_in_use("fitted", "host")[1] == "yours"
