"""Scale-out on a local Ray instance: the same rows as the local engine, a dead worker, fleet measurement.

One Ray instance for the module (two CPUs, and one pretend GPU node: the
`accelerator_type:H100` resource and a logical GPU, so that placement by
accelerator type can be checked on a machine without one), shut down at the end.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray")

import xla_costmodel as xc  # noqa: E402
from xla_costmodel.measure import DATASET_COLUMNS, device_description, read_dataset, suite_cases  # noqa: E402
from xla_costmodel.scale import (  # noqa: E402
    FleetDeviceWarning, TaskFailedWarning, analyze_many, map_modules, measure_fleet,
)
from _scale_ops import CountOrDie  # noqa: E402
from conftest import fixture_paths  # noqa: E402

TESTS = Path(__file__).resolve().parent
# Modules as lowered, priced on a GPU as given: never XLA:CPU's kernels on a GPU (a BackendMismatchWarning each),
# so not linalg, whose lowering already calls XLA:CPU's LAPACK.
PRE = [str(p) for p in fixture_paths("*.pre.hlo") if p.name != "linalg.pre.hlo"]


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    path = os.pathsep.join(p for p in (str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")) if p)
    with warnings.catch_warnings():
        # Ray's fork + exec of its processes is safe; jax, started by earlier tests, warns on any fork.
        warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
        ray.init(
            num_cpus=2, num_gpus=1, resources={"accelerator_type:H100": 1}, include_dashboard=False,
            logging_level="WARNING", log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}},
        )
    yield
    ray.shutdown()


def test_ray_rows_equal_the_local_engine_row_for_row():
    local = analyze_many(PRE, device="h100-sxm", model="xla-gpu", progress=False)
    on_ray = analyze_many(PRE, device="h100-sxm", model="xla-gpu", engine="ray", progress=False)
    assert len(local) > 800 and on_ray.failures.empty
    pd.testing.assert_frame_equal(pd.DataFrame(on_ray), pd.DataFrame(local))


def test_cli_analyze_on_ray_writes_and_resumes(tmp_path, capsys):
    from xla_costmodel.cli import main
    from xla_costmodel.scale import read_results

    out = tmp_path / "r.parquet"
    assert main(["analyze", *PRE[:2], "--engine", "ray", "--out", str(out), "--no-progress"]) == 0
    assert main(["analyze", *PRE[:3], "--engine", "ray", "--out", str(out), "--resume", "--no-progress"]) == 0
    assert "3 files" in capsys.readouterr().out
    rows, record = read_results(out)
    assert record["sources"] == PRE[:3]
    pd.testing.assert_frame_equal(rows, pd.DataFrame(analyze_many(PRE[:3], workers=1, progress=False)))


def test_a_killed_ray_worker_loses_nothing_else(tmp_path):
    sources = PRE[:4]
    fatal = xc.load_hlo(sources[1]).name
    out = tmp_path / "counts.parquet"
    with pytest.warns(TaskFailedWarning, match="1 of 4 sources failed"):
        table = map_modules(CountOrDie(fatal), sources, engine="ray", out=out, progress=False)
    assert list(table.failures["source"]) == [sources[1]]
    assert "WorkerCrashedError" in table.failures["error"].iloc[0]
    assert list(table["source"]) == [s for s in sources if s != sources[1]]
    assert sorted(pd.read_parquet(out)["source"]) == sorted(table["source"])


def test_fleet_measurement_of_the_quick_suite_via_the_cli(tmp_path, capsys):
    from xla_costmodel.cli import main

    out = tmp_path / "merged.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("error", FleetDeviceWarning)  # the CLI turns it into a line on stderr
        status = main(["measure", "--engine", "ray", "--accelerator-type", "H100", "--accelerator-type", "host",
                       "--quick", "--no-progress", "--out", str(out)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    # The task placed on the "H100" node found no GPU there: it says so, and its rows say what it used.
    assert "warning: the task for accelerator type 'H100' measured 'cpu'" in captured.err
    merged = read_dataset(out)
    assert list(merged.columns[: len(DATASET_COLUMNS)]) == list(DATASET_COLUMNS)
    assert set(merged["requested_accelerator"]) == {"H100", "host"}
    here = device_description()
    assert set(merged["device"]) == {here["device"]} and set(merged["backend"]) == {"cpu"}
    per_task = merged.groupby("requested_accelerator")
    assert per_task["suite_run"].nunique().to_dict() == {"H100": 1, "host": 1}
    quick_cases = len(suite_cases(quick=True))
    assert (per_task["case"].nunique() == quick_cases).all()
    assert "appended" in captured.out and "H100" in captured.out


def test_fleet_reports_a_task_that_cannot_be_placed_or_fails():
    with pytest.warns(TaskFailedWarning, match="2 of 2 measurement tasks failed"):
        rows = measure_fleet(["A100", "host"], jax_program="no_such_module:f", quick=True, progress=False)
    assert len(rows) == 0
    failures = rows.attrs["failures"]
    assert failures["A100"] == "no node of the Ray cluster has accelerator type 'A100' (its nodes have: H100)"
    assert "cannot import 'no_such_module'" in failures["host"]
    with pytest.raises(ValueError, match="given twice"):
        measure_fleet(["host", "host"], quick=True, progress=False)
