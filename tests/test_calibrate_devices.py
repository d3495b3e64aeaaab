"""`calibrate_devices`: a dataset of several devices fitted per device and across devices.

The datasets are the committed CPU suite measurements, copied under a second
device's name (this machine has one device). What is checked holds for any
data: each device's fit sees only its own rows, and the linear model's
relative least squares has worked-out answers for copied and scaled rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from xla_costmodel import calibrate
from xla_costmodel.cli import main
from xla_costmodel.fit import FittedModel, calibrate_devices, kernel_features
from xla_costmodel.datasets._data import kernel_rows
from xla_costmodel.measure import read_dataset
from conftest import TEST_CPU

ROOT = Path(__file__).resolve().parents[1]
TWIN = TEST_CPU.replace(name="test-cpu-twin")  # the same facts under another name


def suite_rows():
    suite = read_dataset(ROOT / "calibration" / "host_cpu.parquet")
    keep = suite["kernel"].isin(["ew_add", "ew_exp", "ew_mul", "copy_s1", "copy_s2", "matmul_square", "launch_add"])
    return suite[keep & (suite["dtype"] == "float32")].reset_index(drop=True)


def two_devices(scale: float, first="cpu: first, 2 cores", second="cpu: second, 2 cores", kinds=("cpu", "cpu")):
    a = suite_rows().assign(device=first, device_kind=kinds[0])
    b = suite_rows().assign(device=second, device_kind=kinds[1])
    for column in ("min_per_run_s", "median_per_run_s", "min_per_launch_s"):
        b[column] = b[column] * scale
    b["samples_per_run_s"] = [[t * scale for t in run] for run in b["samples_per_run_s"]]
    import pandas as pd

    return pd.concat([a, b], ignore_index=True)


def weights(path) -> np.ndarray:
    w = json.loads(Path(path).read_text())["weights"]
    return np.array([w[k] for k in sorted(w)])


def model(path) -> FittedModel:
    return FittedModel.from_weights(json.loads(Path(path).read_text())["weights"])


def test_per_device_and_cross_device(tmp_path):
    df = two_devices(2.0)
    mapping = {"cpu: first, 2 cores": TEST_CPU, "cpu: second, 2 cores": TWIN}
    table = calibrate_devices(df, models=("fitted",), devices=mapping, out_dir=tmp_path, progress=False)
    per = table[table["fit"] == "per-device"].set_index("device")
    cross = table[table["fit"] == "cross-device"].set_index("device")
    assert list(per.index) == ["test-cpu", "test-cpu-twin"] and list(cross.index) == ["test-cpu", "test-cpu-twin"]
    n = len(suite_rows())
    assert (per["training_rows"] == n).all() and (cross["training_rows"] == 2 * n).all()
    # Each device's fit is the fit of its own rows alone ...
    alone = calibrate(TEST_CPU, dataset=suite_rows(), models=("fitted",), out_dir=tmp_path / "alone", progress=False)
    np.testing.assert_array_equal(weights(per.loc["test-cpu", "file"]), weights(alone["file"].iloc[0]))
    # ... so times twice as long give weights twice as large (relative least squares is scale-equivariant),
    np.testing.assert_allclose(weights(per.loc["test-cpu-twin", "file"]), 2 * weights(per.loc["test-cpu", "file"]),
                               rtol=1e-6, atol=1e-18)
    # while the one weight table for both is scored on each device's rows.
    assert cross["ratio_error"].notna().all() and (cross["file"] == str(tmp_path / "fleet_fitted.json")).all()
    saved = json.loads((tmp_path / "fleet_fitted.json").read_text())
    assert saved["device"] == "fleet" and saved["devices"] == ["test-cpu", "test-cpu-twin"]


def test_identical_devices_give_the_same_fit_across_devices(tmp_path):
    mapping = {"cpu: first, 2 cores": TEST_CPU, "cpu: second, 2 cores": TWIN}
    table = calibrate_devices(two_devices(1.0), models=("fitted",), devices=mapping, out_dir=tmp_path,
                              progress=False)
    per = table[table["fit"] == "per-device"].set_index("device")
    # Every row twice is the same least-squares problem: the same predictions (collinear features may
    # share their weight differently), the same error.
    X = kernel_features(kernel_rows(suite_rows()), TEST_CPU)
    np.testing.assert_allclose(model(tmp_path / "fleet_fitted.json").predict(X),
                               model(per.loc["test-cpu", "file"]).predict(X), rtol=1e-6)
    cross = table[table["fit"] == "cross-device"].set_index("device")
    np.testing.assert_allclose(cross["ratio_error"], per["ratio_error"], rtol=1e-6)


def test_unknown_devices_and_mixed_data_are_refused(tmp_path):
    df = two_devices(1.0)
    with pytest.raises(ValueError, match="rows measured on 'cpu: first, 2 cores'.*--device-map"):
        calibrate_devices(df, models=("fitted",), out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="holds measurements of 2 devices"):
        calibrate(TEST_CPU, dataset=df, models=("fitted",), out_dir=tmp_path, progress=False)


def test_cli_fits_a_merged_dataset_per_device_and_across(tmp_path, capsys):
    # GPU rows are matched to presets by jax's device_kind.
    df = two_devices(0.5, "gpu: NVIDIA H100 80GB HBM3", "gpu: NVIDIA A100-SXM4-80GB",
                     kinds=("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"))
    merged = tmp_path / "merged.parquet"
    df.to_parquet(merged)
    out = tmp_path / "cal"
    assert main(["calibrate", "--dataset", str(merged), "--models", "fitted", "--out", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["fit"], r["device"]) for r in rows} == {
        ("per-device", "h100-sxm"), ("per-device", "a100-80gb"),
        ("cross-device", "h100-sxm"), ("cross-device", "a100-80gb"),
    }
    assert {p.name for p in out.glob("*.json")} == {"h100-sxm_fitted.json", "a100-80gb_fitted.json",
                                                    "fleet_fitted.json"}
    assert main(["calibrate", "--dataset", str(merged), "--device", "host", "--out", str(out)]) == 2
    assert "leave out --device" in capsys.readouterr().err
    assert main(["calibrate", "--dataset", str(merged), "--device-map", "nonsense", "--out", str(out)]) == 2
