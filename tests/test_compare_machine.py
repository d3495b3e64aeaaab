"""Scores that mean the same on every machine (issue 33, item 6).

The shipped corpus was measured on the reference host, but was priced with this machine's microbenchmarks: the
README's roofline figures came out differently on another host. Rows are now priced with the description of the
machine that measured them (`host_device.json` beside the data), and `compare` scores the GPU models on a CPU's
kernels only when they are named, saying that it did.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xla_costmodel.compare import DEFAULT_MODELS, compare_models
from xla_costmodel.compare._compare import GPU_MODELS, pricing_device
from xla_costmodel.devices import DeviceSpec
from xla_costmodel.datasets._store import MEASURING_DEVICE_FILE, CalibrationError, measuring_device, shipped_dir
from xla_costmodel.measure import read_dataset

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((shipped_dir() / MEASURING_DEVICE_FILE).read_text())


@pytest.fixture(scope="module")
def corpus_slice(tmp_path_factory):
    """A few corpus programs in a folder that, like calibration/, says which machine measured them."""
    corpus = read_dataset(ROOT / "calibration" / "host_cpu_corpus.parquet")
    keep = corpus["program"].isin(sorted(set(corpus["program"]))[:3])
    d = tmp_path_factory.mktemp("measured_elsewhere")
    corpus[keep].to_parquet(d / "corpus.parquet", index=False)
    shutil.copy(shipped_dir() / MEASURING_DEVICE_FILE, d / MEASURING_DEVICE_FILE)
    return d / "corpus.parquet"


def test_the_shipped_file_is_what_the_script_restores():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "ship_reference_host.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    spec = measuring_device(shipped_dir() / "host_cpu_corpus.parquet")
    assert spec == DeviceSpec.from_dict(REFERENCE["spec"])
    # The reference host's record, as its calibrations state it.
    machine = json.loads((shipped_dir() / "host_fitted.json").read_text())["machine"]
    assert (spec.description, spec.core_count, spec.l1_cache_bytes_per_core) == (
        machine["cpu_model"], machine["cores"], machine["l1_bytes"])


def test_rows_measured_elsewhere_are_priced_with_that_machine_whatever_this_one_is(corpus_slice, monkeypatch):
    import importlib

    import xla_costmodel as xc

    # `compare` looks the pricing device up through `measure.resolve_device` (the package: `xla_costmodel.measure`
    # is shadowed by the `measure` function, hence importlib).
    measure_package = importlib.import_module("xla_costmodel.measure")
    look_up = measure_package.resolve_device

    first = compare_models(["roofline"], corpus_slice, "none")
    assert any("description of the machine that measured them" in n for n in first.notes)

    # This machine twice as fast: the scores must not move.
    def faster(name):
        spec = xc.get_device("host")
        return spec.replace(memory_bandwidth_bytes_per_s=2 * spec.memory_bandwidth_bytes_per_s)

    monkeypatch.setattr(measure_package, "resolve_device", lambda d: faster(d) if d == "host" else look_up(d))
    second = compare_models(["roofline"], corpus_slice, "none")
    np.testing.assert_array_equal(first.predictions["predicted_s"], second.predictions["predicted_s"])
    assert pricing_device("host", "none", corpus_slice)[0] == DeviceSpec.from_dict(REFERENCE["spec"])


def test_rows_of_no_known_machine_are_priced_here(tmp_path):
    data = tmp_path / "mine.parquet"
    data.write_bytes(b"")
    assert measuring_device(data) is None and measuring_device(None) is None
    spec, note = pricing_device("test-cpu-unknown" if False else "h100-sxm", "none", data)
    assert note == "" and spec.name == "h100-sxm"
    (tmp_path / MEASURING_DEVICE_FILE).write_text('{"format": "something else"}')
    with pytest.raises(CalibrationError, match=MEASURING_DEVICE_FILE):
        measuring_device(data)


def test_gpu_models_score_host_kernels_only_when_named_and_then_say_so(corpus_slice):
    assert not set(GPU_MODELS) & set(DEFAULT_MODELS)
    table = compare_models(["roofline", "xla-gpu"], corpus_slice, "none")
    said = [n for n in table.notes if "XLA:GPU's kernels" in n]
    assert len(said) == 1 and said[0].startswith("xla-gpu prices") and "as asked" in said[0]
    assert not [n for n in compare_models(["roofline"], corpus_slice, "none").notes if "XLA:GPU" in n]


def test_cli_compare_says_what_it_did(corpus_slice, capsys):
    from xla_costmodel.cli import main

    assert main(["compare", "--models", "roofline", "xla-gpu", "--dataset", str(corpus_slice), "--split", "none"]) == 0
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2 and "machine that measured them" in notes[0] and "as asked" in notes[1], err
