"""The H100's per-run program overhead ships, fitted on the suite's programs only, and reproduces from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]


def test_the_shipped_h100_overhead_is_the_fit_of_the_suite_and_is_used_on_h100(tmp_path):
    from xla_costmodel.fit import ProgramOverhead

    load_script("fit_gpu_overhead").main([str(ROOT / "calibration" / "h100-sxm.parquet"), "--device", "h100-sxm",
                                          "--out", str(tmp_path)])
    refit = json.loads((tmp_path / "h100-sxm_program-overhead.json").read_text())
    shipped = json.loads((ROOT / "calibration" / "h100-sxm_program-overhead.json").read_text())
    assert refit["per_run_s"] == pytest.approx(shipped["per_run_s"], rel=1e-6)
    assert refit["per_kernel_s"] == pytest.approx(shipped["per_kernel_s"], rel=1e-6)
    assert shipped["measured_on"][0]["device_kind"] == "NVIDIA H100 80GB HBM3"
    # Dispatch plus synchronisation of a jitted call: tens of microseconds, not nanoseconds or milliseconds.
    overhead = ProgramOverhead.from_calibration("h100-sxm")
    assert 10e-6 < overhead.per_run_s < 1e-3 and overhead.n_programs == shipped["programs"]
