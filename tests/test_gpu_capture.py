"""The GPU capture reader (`measure._gpu_capture`) against the capture session's own summary.

The reference is `tests/data/gpu_h100/corpus_kernels.parquet`, the per-kernel
summary the session that measured the H100 wrote from its events with code of
its own (a copy of `../shared/gpu_h100/corpus_kernels.parquet`). The slice holds
a cuSolver call with its memset (`jax_scipy_cho_solve`), an LU solve whose loop
sends its predicate to the host (`MemcpyD2H`, `lineax_lu_solve`) and cuDNN
convolutions with a memset (`equinox_conv_grad`).
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from xla_costmodel.measure import DatasetError, append_dataset, read_dataset
from xla_costmodel.measure._gpu_capture import (
    CAPTURE_EVENT_COLUMNS,
    CaptureError,
    capture_events_from_trace,
    capture_kernels,
    capture_rows,
)

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "calibration" / "h100-sxm_corpus_events.parquet"
SUMMARY = ROOT / "tests" / "data" / "gpu_h100" / "corpus_kernels.parquet"
HLO = ROOT / "hlo_fixtures" / "gpu_h100"
SLICE = (("jax_scipy_cho_solve", "small"), ("lineax_lu_solve", "small"), ("equinox_conv_grad", "large"))
KEY = ["program", "size", "hlo_op"]


def _slice(path):
    import pyarrow.parquet as pq

    programs = sorted({p for p, _ in SLICE})
    table = pq.read_table(path, filters=[("program", "in", programs)]).to_pandas()
    keep = pd.Series(list(zip(table["program"], table["size"]))).isin(SLICE).to_numpy()
    return table[keep].reset_index(drop=True)


def _module(case: str) -> str:
    with gzip.open(HLO / f"{case}.post.hlo.gz", "rt", encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def events():
    return _slice(EVENTS)


@pytest.fixture(scope="module")
def summary():
    return _slice(SUMMARY)


def test_kernels_equal_the_capture_sessions_summary(events, summary):
    ours = capture_kernels(events)
    assert len(ours) == len(summary) > 20
    both = summary.merge(ours, on=KEY, suffixes=("_ref", ""), validate="one_to_one")
    assert len(both) == len(summary)
    for col in ("launches", "min_per_run_s", "median_per_run_s"):
        np.testing.assert_allclose(both[col], both[f"{col}_ref"], rtol=1e-12, err_msg=col)
    assert (both["kernel_symbol"] == both["kernel_symbol_ref"]).all()
    assert (both["kernel_details"].fillna("") == both["kernel_details_ref"].fillna("")).all()
    # The slice is chosen to exercise the rules: memsets ran but are not launches, memcpys are.
    assert events["kernel_symbol"].str.startswith("Memset").any()
    assert (both["kernel_symbol"] == "MemcpyD2H").any()
    assert (both["launches"] > 1).any()
    assert (ours["n"] == 15).all()
    assert all(len(s) == 15 and math.isclose(min(s), m) for s, m in zip(ours["samples_per_run_s"],
                                                                          ours["min_per_run_s"]))


def test_memsets_add_time_but_no_launch(events):
    """A memset's time belongs to the call that wrote it (its runs sum it), but it is not a launch."""
    call = events[events["kernel_symbol"].str.startswith("Memset")].iloc[0]
    op = events[(events["program"] == call["program"]) & (events["size"] == call["size"])
                & (events["hlo_op"] == call["hlo_op"])]
    row = capture_kernels(op).iloc[0]
    per_run = op.groupby("run")["duration_ns"].sum() * 1e-9
    launches = op[~op["kernel_symbol"].str.startswith("Memset")].groupby("run").size()
    assert row["min_per_run_s"] == pytest.approx(per_run.min())
    assert row["launches"] == float(np.median(launches))
    assert row["launches"] < op.groupby("run").size().median()


def test_rows_are_the_shipped_dataset_rows(events, summary, tmp_path):
    walls = summary.groupby(["program", "size"])[["wall_min_per_run_s", "wall_median_per_run_s"]].first().reset_index()
    rows = capture_rows(events, _module, walls=walls, device_kind="NVIDIA H100 80GB HBM3", jax_version="0.11.2")
    path = tmp_path / "h100.parquet"
    assert append_dataset(rows, path) == len(summary)
    back = read_dataset(path)
    assert set(back["device_kind"]) == {"NVIDIA H100 80GB HBM3"}
    assert set(back["backend"]) == {"gpu"} and set(back["jax_version"]) == {"0.11.2"}
    assert set(back["kernel_class"]) == {"program"} and set(back["source"]) == {"jax", "lineax", "equinox"}
    assert set(back["case"]) == {f"{p}@{s}" for p, s in SLICE}
    # Joined to the compiled module as `measure` joins a trace: the cuSolver call is a custom call there.
    cho = back[back["case"] == "jax_scipy_cho_solve@small"].set_index("hlo_op")
    assert (cho["opcode"] == "custom-call").any()
    assert cho["hlo_text"].str.contains("cusolver").any()
    # One main kernel per program run, the slowest.
    for _case, g in back.groupby("case"):
        assert g["is_main"].sum() == 1
        assert g.loc[g["is_main"], "min_per_run_s"].iloc[0] == g["min_per_run_s"].max()
    np.testing.assert_allclose(back["min_per_launch_s"], back["min_per_run_s"] / back["launches"].clip(lower=1))
    # The shipped dataset is these rows (scripts/convert_gpu_capture.py made it from the same events).
    import pyarrow.parquet as pq

    cols = ["case", "hlo_op", "launches", "min_per_run_s", "median_per_run_s", "wall_min_per_run_s", "n", "opcode"]
    shipped = pq.read_table(ROOT / "calibration" / "h100-sxm_corpus.parquet", columns=cols,
                            filters=[("case", "in", sorted(set(back["case"])))]).to_pandas()
    both = back.merge(shipped, on=["case", "hlo_op"], suffixes=("", "_shipped"), validate="one_to_one")
    assert len(both) == len(back)
    for col in ("launches", "min_per_run_s", "median_per_run_s", "wall_min_per_run_s", "n"):
        np.testing.assert_array_equal(both[col], both[f"{col}_shipped"], err_msg=col)
    assert (both["opcode"].fillna("") == both["opcode_shipped"].fillna("")).all()


def test_bad_captures_are_refused(events):
    with pytest.raises(CaptureError, match="missing columns: duration_ns"):
        capture_kernels(events.drop(columns=["duration_ns"]))
    with pytest.raises(CaptureError, match="no events"):
        capture_kernels(events.iloc[:0])
    with pytest.raises(CaptureError, match="no compiled module for equinox_conv_grad@large"):
        capture_rows(events, {}, device_kind="x", jax_version="0")
    with pytest.raises(DatasetError):
        read_dataset(SUMMARY)  # the capture's summary is not a dataset of this schema


def _chrome_trace(path: Path) -> None:
    """A GPU trace as the Chrome-trace JSON `jax.profiler` writes: two annotated runs on the host, kernels on a
    GPU stream (one call: a memset then its kernel), and a kernel of another module."""
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "python"}},
            {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "name": "thread_name", "pid": 2, "tid": 7, "args": {"name": "Stream #14(Compute,Memset)"}}]
    events = []
    for run, t0 in enumerate((1000.0, 2000.0)):  # microseconds, as the format has them
        events.append({"ph": "X", "pid": 1, "tid": 1, "name": f"xla_costmodel.measure#{run}", "ts": t0, "dur": 100.0})
        for name, op, module, ts, dur in (("Memset", "gemm.1", "jit_f", 10.0, 1.0),
                                          ("sm90_gemm", "gemm.1", "jit_f", 12.0, 20.0 + run),
                                          ("loop_add_fusion", "add.2", "jit_f", 40.0, 5.0),
                                          ("other_kernel", "mul.3", "jit_g", 60.0, 5.0)):
            events.append({"ph": "X", "pid": 2, "tid": 7, "name": name, "ts": t0 + ts, "dur": dur,
                           "args": {"hlo_op": op, "hlo_module": module}})
    events.append({"ph": "X", "pid": 2, "tid": 7, "name": "outside", "ts": 5000.0, "dur": 1.0,
                   "args": {"hlo_op": "add.2", "hlo_module": "jit_f"}})
    path.write_text(json.dumps({"traceEvents": meta + events}))


def test_a_profiler_trace_becomes_a_capture(tmp_path):
    trace = tmp_path / "t.trace.json"
    _chrome_trace(trace)
    events, runs = capture_events_from_trace(trace, program="f", size="s", source="mine", hlo_module="jit_f")
    assert list(events.columns) == list(CAPTURE_EVENT_COLUMNS)
    assert len(events) == 6 and set(events["run"]) == {0, 1}  # the event outside every run is left out
    assert runs["wall_s"].tolist() == pytest.approx([100e-6, 100e-6])
    kernels = capture_kernels(events).set_index("hlo_op")
    assert kernels.loc["gemm.1", "launches"] == 1.0  # the memset is not a launch
    assert kernels.loc["gemm.1", "min_per_run_s"] == pytest.approx(21e-6)  # ... but its time is the call's
    assert kernels.loc["gemm.1", "samples_per_run_s"] == pytest.approx([21e-6, 22e-6])
    assert kernels.loc["gemm.1", "kernel_symbol"] == "sm90_gemm"
    assert events.loc[events["hlo_op"] == "add.2", "start_in_run_ns"].tolist() == [40_000, 40_000]
    with pytest.raises(CaptureError, match="no run annotation"):
        capture_events_from_trace(trace, program="f", annotation=r"step#(\d+)$")


def test_the_shipped_h100_suite_is_a_dataset_of_the_h100():
    suite = read_dataset(ROOT / "calibration" / "h100-sxm.parquet")
    assert len(suite) == 453 and set(suite["device_kind"]) == {"NVIDIA H100 80GB HBM3"}
    assert set(suite["backend"]) == {"gpu"} and set(suite["source"]) == {"suite"}


def test_measures_own_trace_reader_counts_launches_as_the_capture_reader(tmp_path):
    """`measure` (`measurement_from_trace`) and the capture reader, on the same GPU trace, agree per kernel."""
    from xla_costmodel.measure import measurement_from_trace

    trace = tmp_path / "t.trace.json"
    _chrome_trace(trace)
    text = """HloModule jit_f
ENTRY main {
  p = f32[4]{0} parameter(0)
  gemm.1 = f32[4]{0} negate(p)
  ROOT add.2 = f32[4]{0} add(gemm.1, p)
}"""
    # (check="ignore": the trace holds one event outside every run on purpose, which `measure` refuses)
    ours = measurement_from_trace(trace, text, check="ignore").kernels.set_index("hlo_op")
    events, _runs = capture_events_from_trace(trace, program="f", hlo_module="jit_f")
    theirs = capture_kernels(events).set_index("hlo_op")
    assert sorted(ours.index) == sorted(theirs.index) == ["add.2", "gemm.1"]
    for col in ("launches", "min_per_run_s", "median_per_run_s"):
        np.testing.assert_allclose(ours.loc[theirs.index, col], theirs[col], rtol=1e-9, err_msg=col)
    assert ours.loc["gemm.1", "launches"] == 1.0  # the memset before the GEMM is not a launch


def test_executions_are_the_bursts_of_an_instructions_events(events):
    """`capture_executions` against the modules that ran: where `analyze` knows an instruction's executions per
    run (a loop's trip count, the module's structure), the capture's bursts equal them; a cuSolver LU under a
    `conditional` (`jax_scipy_expm`, whose analyze row cannot tell which branch runs) launches six kernels in one
    execution, and counts one."""
    import warnings

    from xla_costmodel import analyze
    from xla_costmodel.hlo import parse_hlo
    from xla_costmodel.measure import capture_executions

    expm = pd.read_parquet(EVENTS, filters=[("program", "==", "jax_scipy_expm"), ("size", "==", "small")])
    both = pd.concat([events, expm], ignore_index=True)
    executions = capture_executions(both)
    launches = capture_kernels(both).set_index(KEY)["launches"]
    assert executions.index.equals(launches.index.intersection(executions.index)) and len(executions) == len(launches)
    compared = 0
    for program, size in (*SLICE, ("jax_scipy_expm", "small")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = analyze(parse_hlo(_module(f"{program}@{size}")), device="h100-sxm", model="roofline")
        known = table[table["executions_known"].astype(bool)].groupby("kernel")["executions"].sum()
        for op, n in known.items():
            if (program, size, op) in executions.index:
                assert executions[(program, size, op)] == n, (program, size, op)
                compared += 1
    assert compared > 40
    # Loop bodies run many times per run: the bursts count them, as the loop's trip count does.
    assert (executions > 1).any()
    lu = ("jax_scipy_expm", "small", "lu.0")
    assert launches[lu] == 6 and executions[lu] == 1
    with pytest.raises(CaptureError, match="missing columns: start_in_run_ns"):
        capture_executions(events.drop(columns=["start_in_run_ns"]))
