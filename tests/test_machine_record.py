"""A calibration records the machine its kernels were timed on, and using it on another machine says so once
(issue 26 §1)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from conftest import load_script

from xla_costmodel.devices import _host
from xla_costmodel.devices import host as host_facts  # what fit reads this machine from
from xla_costmodel.datasets import _store
from xla_costmodel.datasets._store import DATA_DIR_ENV, MachineMismatchWarning, header, load_calibration, rows_machine

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "calibration"
XEON = {"cpu_model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "cores": 16, "l1_bytes": 49152,
        "l2_bytes": 1310720, "l3_bytes": 56623104}


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(_store, "_WARNED_MACHINES", set())


def _here_entry() -> dict:
    import os

    return {"backend": "cpu", "device_kind": "cpu", "device": f"cpu: {_host.cpu_model()}, {os.cpu_count()} cores"}


def test_this_machine_is_recorded_as_lscpu_sees_it():
    record = _host.machine_record()
    assert record["cpu_model"] == _host.cpu_model() and record["cores"] == _host.core_count()
    caches = _host.cache_sizes()
    for level in ("l1", "l2", "l3"):
        assert record[f"{level}_bytes"] == caches.get(level, _host.UNKNOWN)
    assert _host.machine_differences(record) == []


def test_a_header_of_rows_timed_here_records_this_machine():
    assert header("fitted", "host", 10, [], [_here_entry()])["machine"] == _host.machine_record()


def test_rows_of_another_cpu_record_what_they_say_and_no_caches():
    entry = {"backend": "cpu", "device_kind": "cpu", "device": "cpu: Intel Xeon, 16 cores"}
    assert rows_machine([entry]) == {"cpu_model": "Intel Xeon", "cores": 16, "l1_bytes": _host.UNKNOWN,
                                     "l2_bytes": _host.UNKNOWN, "l3_bytes": _host.UNKNOWN}
    gpu = {"backend": "gpu", "device_kind": "NVIDIA H100 80GB HBM3", "device": "gpu: NVIDIA H100 80GB HBM3"}
    assert rows_machine([gpu]) is None and "machine" not in header("fitted", "h100-sxm", 10, [], [gpu])
    assert rows_machine([entry, _here_entry()]) is None  # rows of two machines: neither


def test_the_shipped_calibrations_record_their_machine_from_their_own_fields():
    for path in sorted(SHIPPED.glob("host_*.json")):
        data = json.loads(path.read_text())
        machine = data["machine"]
        if path.name == "host_device.json":
            continue  # a device description, not a calibration: no `measured_on`
        assert (f"cpu: {machine['cpu_model']}, {machine['cores']} cores"
                == data["measured_on"][0]["device"]), path.name
        facts = data.get("device_facts")
        for level in ("l1", "l2", "l3"):
            assert machine[f"{level}_bytes"] == (facts[level] if facts else _host.UNKNOWN), path.name


def _copy_calibration(tmp_path: Path, machine: dict | None) -> Path:
    data = json.loads((SHIPPED / "host_fitted.json").read_text())
    data.pop("machine")
    if machine is not None:
        data["machine"] = machine
    out = tmp_path / "host_fitted.json"
    out.write_text(json.dumps(data))
    return out


def test_a_calibration_of_another_machine_warns_once_naming_both(tmp_path, monkeypatch, fresh_warnings):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    _copy_calibration(tmp_path, XEON)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_calibration("fitted", "host")
        load_calibration("fitted", "host")
    mine = [w for w in caught if issubclass(w.category, MachineMismatchWarning)]
    assert len(mine) == 1
    text = str(mine[0].message)
    assert "\n" not in text
    assert "Intel(R) Xeon(R) Platinum 8375C" in text and "cores 16 (here " in text
    assert "xla-costmodel calibrate --device host" in text and str(tmp_path) in text
    assert mine[0].filename == __file__  # points at the caller, not at the library


def test_a_calibration_of_this_machine_is_silent(tmp_path, monkeypatch, fresh_warnings):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    _copy_calibration(tmp_path, _host.machine_record())
    with warnings.catch_warnings():
        warnings.simplefilter("error", MachineMismatchWarning)
        load_calibration("fitted", "host")


def test_a_calibration_before_the_record_is_judged_by_its_measured_on(tmp_path, monkeypatch, fresh_warnings):
    """The shipped file less its `machine`, read on a machine that is not the reference host."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    _copy_calibration(tmp_path, None)
    monkeypatch.setattr(host_facts, "machine_record", lambda: dict(XEON))
    monkeypatch.setattr(host_facts, "cpu_model", lambda: XEON["cpu_model"])
    with pytest.warns(MachineMismatchWarning, match=r"CPU 'AMD EPYC' \(here 'Intel"):
        load_calibration("fitted", "host")


def test_the_shipped_calibration_warns_on_another_machine(monkeypatch, tmp_path, fresh_warnings):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))  # nothing of the user's: the shipped file is read
    monkeypatch.setattr(host_facts, "machine_record", lambda: dict(XEON))
    with pytest.warns(MachineMismatchWarning) as caught:
        load_calibration("fitted", "host")
    assert str(SHIPPED / "host_fitted.json") in str(caught[0].message)


def test_a_full_host_calibration_measures_the_supplementary_data_once_per_machine(tmp_path, monkeypatch):
    """The training data the shipped calibrations have besides the suite is measured here (not taken from
    another machine), and kept while it holds this machine's rows."""
    import pandas as pd

    from xla_costmodel.fit import _calibrate
    from xla_costmodel.measure import device_description, read_dataset
    from xla_costmodel.measure import programs as _programs  # what fit's calibrate reads it from

    shipped = read_dataset(SHIPPED / "host_cpu_programs.parquet")
    sample = shipped[shipped["kernel_class"].isin(["extra-elementwise", "program"])].head(40).copy()
    calls = []

    def fake_measure(**kw):
        calls.append(kw)
        out = sample.copy()
        out["device"] = device_description()["device"]
        return out

    monkeypatch.setattr(_programs, "measure_supplementary", fake_measure)
    path = _calibrate._supplementary(tmp_path, progress=False)
    assert path == tmp_path / "host_cpu_programs.parquet" and len(calls) == 1
    assert len(read_dataset(path)) == len(sample)
    assert _calibrate._supplementary(tmp_path, progress=False) == path and len(calls) == 1  # kept

    other = sample.copy()
    other["device"] = "cpu: Intel Xeon, 16 cores"
    pd.DataFrame(other).to_parquet(path, index=False)  # another machine's rows: measured again
    _calibrate._supplementary(tmp_path, progress=False)
    assert len(calls) == 2


def test_the_drift_between_two_measurings_is_the_ratio_of_the_same_kernels():

    import pandas as pd

    bench = load_script("bench_host_transfer")
    a = pd.DataFrame({"case": ["c1", "c2", "c3", "c4"], "hlo_op": ["k"] * 4, "min_per_run_s": [1.0, 1.0, 2.0, 1.0]})
    b = pd.DataFrame({"case": ["c1", "c2", "c3", "c5"], "hlo_op": ["k"] * 4, "min_per_run_s": [1.1, 4.0, 1.0, 9.0]})
    d = bench._drift(a, b)  # c4 and c5 are in one measuring only
    assert d["kernels"] == 3 and d["worst_factor"] == pytest.approx(4.0)
    assert d["within_1.25x"] == pytest.approx(1 / 3) and d["within_2x"] == pytest.approx(2 / 3)
    assert d["geomean_other_over_shipped"] == pytest.approx((1.1 * 4.0 * 0.5) ** (1 / 3))
