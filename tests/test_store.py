"""Where calibrations and datasets live: the user's data directory is written, the shipped files only read;
no device is calibrated from another device's measurements (issue 18 §3)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from xla_costmodel import calibrate
from xla_costmodel.cli import main
from xla_costmodel.fit import FittedModel
from xla_costmodel.datasets._store import (DATA_DIR_ENV, CalibrationError, DeviceMismatchError,
                                      load_calibration, shipped_dir, user_data_dir, write_atomically)
from xla_costmodel.measure import read_dataset
from conftest import TEST_CPU

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "calibration"
H100_KIND = "NVIDIA H100 80GB HBM3"  # jax's device_kind of an H100 SXM (the preset's description)


def suite_rows() -> pd.DataFrame:
    suite = read_dataset(SHIPPED / "host_cpu.parquet")
    keep = suite["kernel"].isin(["ew_add", "ew_exp", "ew_mul", "copy_s1", "copy_s2", "matmul_square", "launch_add"])
    return suite[keep & (suite["dtype"] == "float32")].reset_index(drop=True)


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


# --------------------------------------------------------------------------- where


def test_the_data_directory_follows_the_variable_then_the_platform(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "new"))
    monkeypatch.setenv("XLA_COSTMODEL_CALIBRATION_DIR", str(tmp_path / "old"))  # the name removed in 0.x
    assert user_data_dir() == tmp_path / "new"
    monkeypatch.delenv(DATA_DIR_ENV)
    assert user_data_dir() != tmp_path / "old"
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    if sys.platform.startswith("linux"):
        assert user_data_dir() == tmp_path / ".local" / "share" / "xla_costmodel"
    assert shipped_dir() == SHIPPED


def test_writes_are_atomic(tmp_path, monkeypatch):
    target = tmp_path / "deep" / "f.json"
    write_atomically(target, "first")
    assert target.read_text() == "first"

    class Boom(Exception):
        pass

    def failing(*_):  # the new file is complete, the rename fails
        raise Boom

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(Boom):
        write_atomically(target, "second")
    monkeypatch.undo()
    assert target.read_text() == "first"
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]  # no temporary file left


# --------------------------------------------------------------------------- reading: the user's, then the shipped


def test_the_users_calibration_is_read_before_the_shipped_one(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    shipped = load_calibration("fitted", "host")
    assert Path(shipped["_path"]) == SHIPPED / "host_fitted.json"
    mine = dict(shipped)
    mine.pop("_path")
    mine["weights"] = {k: (2.0 * v) for k, v in shipped["weights"].items()}
    (tmp_path / "host_fitted.json").write_text(json.dumps(mine))
    assert Path(load_calibration("fitted", "host")["_path"]) == tmp_path / "host_fitted.json"
    coef = dict(zip(FittedModel.from_calibration("host").feature_names_,
                    FittedModel.from_calibration("host").coef_))
    assert {k: coef[k] for k in mine["weights"]} == pytest.approx(mine["weights"])
    # The other models of the host still come from the shipped files.
    assert Path(load_calibration("learned", "host")["_path"]) == SHIPPED / "host_learned.json"


def test_a_missing_calibration_names_both_places(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(CalibrationError) as err:
        load_calibration("fitted", "h100-sxm")
    msg = str(err.value)
    assert str(tmp_path / "h100-sxm_fitted.json") in msg and str(SHIPPED / "h100-sxm_fitted.json") in msg
    # The advice measures on that device, never here.
    assert "--dataset" in msg and "calibrate(device='h100-sxm')" not in msg


# --------------------------------------------------------------------------- no device mislabelled


def test_calibrating_a_gpu_from_this_machine_is_refused_before_measuring(tmp_path, monkeypatch):
    import importlib

    measure = importlib.import_module("xla_costmodel.measure")  # the package (its name is also a function)

    def never(**kwargs):
        raise AssertionError("the suite ran")

    monkeypatch.setattr(measure, "run_suite", never)
    with pytest.raises(DeviceMismatchError, match=r"cannot calibrate 'h100-sxm'.*not on a NVIDIA H100"):
        calibrate("h100-sxm", quick=True, out_dir=tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists()  # not even its folder


def test_calibrating_a_gpu_from_cpu_rows_is_refused_and_from_its_own_rows_accepted(tmp_path):
    rows = suite_rows()
    with pytest.raises(DeviceMismatchError, match="measured on cpu"):
        calibrate("h100-sxm", dataset=rows, models=("fitted",), out_dir=tmp_path, progress=False)
    with pytest.raises(DeviceMismatchError, match="not on a CPU"):
        calibrate(TEST_CPU, dataset=rows.assign(backend="gpu", device_kind=H100_KIND, device=f"gpu: {H100_KIND}"),
                  models=("fitted",), out_dir=tmp_path, progress=False)
    assert not any(tmp_path.iterdir())
    # The same rows, as an H100 measured them, are an H100's.
    as_h100 = rows.assign(backend="gpu", device_kind=H100_KIND, device=f"gpu: {H100_KIND}")
    result = calibrate("h100-sxm", dataset=as_h100, models=("fitted",), out_dir=tmp_path, progress=False)
    saved = json.loads(Path(result["file"].iloc[0]).read_text())
    assert saved["device"] == "h100-sxm"
    assert saved["measured_on"] == [{"backend": "gpu", "device_kind": H100_KIND, "device": f"gpu: {H100_KIND}"}]


def _cpu_weights_as_h100(folder: Path, with_measured_on: bool) -> None:
    data = json.loads((SHIPPED / "host_fitted.json").read_text())
    data["device"] = "h100-sxm"
    data["datasets"] = [{"path": str(SHIPPED / "host_cpu.parquet")}]
    if with_measured_on:
        data["measured_on"] = [{"backend": "cpu", "device_kind": "cpu", "device": "cpu: some CPU, 2 cores"}]
    (folder / "h100-sxm_fitted.json").write_text(json.dumps(data))


@pytest.mark.parametrize("with_measured_on", [True, False], ids=["recorded", "older-file"])
def test_a_saved_gpu_calibration_of_cpu_times_is_refused(tmp_path, monkeypatch, capsys, with_measured_on):
    # What `calibrate --device h100-sxm --quick` used to write on a CPU machine: never priced with.
    _cpu_weights_as_h100(tmp_path, with_measured_on)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(DeviceMismatchError, match="not on a NVIDIA H100"):
        FittedModel.from_calibration("h100-sxm")
    rc = main(["analyze", str(ROOT / "hlo_fixtures" / "mlp_fwd.post.hlo"), "--device", "h100-sxm", "--model", "fitted"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "not on a NVIDIA H100" in err


def test_cli_refuses_a_mislabelled_calibrate_in_one_line(tmp_path, capsys):
    rc = main(["calibrate", "--device", "h100-sxm", "--quick", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "cannot calibrate 'h100-sxm'" in err and not any(tmp_path.iterdir())
    cpu = tmp_path / "cpu.parquet"
    suite_rows().to_parquet(cpu)
    rc = main(["calibrate", "--device", "h100-sxm", "--dataset", str(cpu), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "measured on cpu" in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_cli_calibrates_the_device_a_dataset_was_measured_on(tmp_path, capsys):
    gpu = tmp_path / "h100.parquet"
    suite_rows().assign(backend="gpu", device_kind=H100_KIND, device=f"gpu: {H100_KIND}").to_parquet(gpu)
    out = tmp_path / "cal"
    assert main(["calibrate", "--dataset", str(gpu), "--models", "fitted", "--out", str(out)]) == 0
    assert [p.name for p in out.glob("*.json")] == ["h100-sxm_fitted.json"]


# --------------------------------------------------------------------------- as a user runs it


def _user_env(tmp_path: Path) -> dict:
    from xla_costmodel.devices._host import host_cache_path

    env = {k: v for k, v in os.environ.items() if k not in (DATA_DIR_ENV, "XDG_DATA_HOME")}
    env.update(HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu",
               # this machine's host measurement, so that a fresh HOME does not measure it again
               XLA_COSTMODEL_CACHE_DIR=str(host_cache_path().parent))
    return env


@pytest.mark.slow
def test_quick_calibration_writes_the_users_data_directory_and_nothing_shipped(tmp_path):
    """A quick calibration goes to the `quick/` folder of the user's data directory, which no model reads
    unless asked (issue 33: it replaced the shipped calibration, silently, with a 49-kernel fit)."""
    env = _user_env(tmp_path)
    shipped_before, tree_before = digests(SHIPPED), sorted(p.name for p in ROOT.iterdir())
    cli = [sys.executable, "-m", "xla_costmodel.cli"]
    r = subprocess.run([*cli, "calibrate", "--device", "host", "--quick"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "no model reads unless asked" in r.stderr and "(read by no model unless asked)" in r.stdout
    assert digests(SHIPPED) == shipped_before  # the same files, the same bytes
    assert sorted(p.name for p in ROOT.iterdir()) == tree_before and not (SHIPPED / "host_quick.parquet").exists()
    data = tmp_path / "home" / ".local" / "share" / "xla_costmodel" / "quick"
    written = sorted(p.name for p in data.iterdir())
    assert {"host_fitted.json", "host_learned.json", "host_roofline-calibrated.json",
            "host_xla-gpu-calibrated.json", "host_quick.parquet"} <= set(written)
    assert not any(p.name.endswith(".tmp") or p.name.startswith(".") for p in data.iterdir())
    assert sorted(p.name for p in data.parent.iterdir()) == ["quick"]  # nothing where models read
    assert list(tmp_path.glob("*.parquet")) == [] and not (tmp_path / "calibration").exists()
    # Reading takes the shipped calibration, unless the quick folder is asked for.
    code = ("from xla_costmodel.datasets._store import load_calibration as l; "
            "print(l('fitted', 'host')['_path']); print(l('learned', 'host')['training_rows'])")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert Path(r.stdout.split()[0]) == SHIPPED / "host_fitted.json"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**env, DATA_DIR_ENV: str(data)},
                       capture_output=True, text=True)
    path, rows = r.stdout.split()
    assert Path(path) == data / "host_fitted.json"
    assert int(rows) == json.loads((data / "host_learned.json").read_text())["training_rows"]
    assert int(rows) != json.loads((SHIPPED / "host_learned.json").read_text())["training_rows"]
