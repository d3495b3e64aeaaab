"""Trace reading, checked on a real committed CPU trace, a damaged copy, and a synthetic GPU XSpace.

The committed trace (tests/data/traces/, made by make_samples.py there) was
written by jax.profiler 0.10.2 on the CPU; its compiled module text comes from
the same process, so every kernel name in it is XLA's, not ours.
"""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from xla_costmodel.measure import (
    ConcurrentKernelsWarning,
    MeasurementError,
    TraceError,
    find_trace_files,
    kernel_executions,
    measurement_from_trace,
    read_trace,
)
from xla_costmodel.measure._module import ModuleIndex

DATA = Path(__file__).parent / "data" / "traces"
XPLANE = DATA / "cpu_small.xplane.pb"
JSON = DATA / "cpu_small.trace.json.gz"
HLO = DATA / "cpu_small.hlo"


@pytest.fixture(scope="module")
def hlo_text() -> str:
    return HLO.read_text()


@pytest.fixture(scope="module")
def xplane_events():
    return read_trace(XPLANE)


def test_xplane_planes_and_metadata(xplane_events):
    ev = xplane_events
    assert ev.attrs["format"] == "xplane"
    assert ev.attrs["metadata"]["jax_version"] == "0.10.2"
    assert "/host:CPU" in set(ev["plane"])
    # Thunk events carry the stats XLA:CPU's Thunk::TraceMeEncode writes.
    thunks = ev[ev["hlo_op"].notna()]
    assert len(thunks) > 0
    assert (thunks["name"] == thunks["hlo_op"]).all()
    assert thunks["program_id"].notna().all() and thunks["run_id"].notna().all()
    assert thunks["flow_out"].notna().all()
    # ... and every completion event names a thunk and points back at its flow id.
    ends = ev[ev["name"].str.startswith("end: ")]
    assert len(ends) == len(thunks)
    assert set(ends["flow_in"]) == set(thunks["flow_out"])


def test_every_kernel_of_the_module_is_in_the_trace(xplane_events, hlo_text):
    index = ModuleIndex(hlo_text)
    k = kernel_executions(xplane_events)
    assert set(k["hlo_module"]) == {index.name}
    seen = set(k["hlo_op"])
    assert set(index.expected_kernels()) <= seen
    assert seen <= set(index.instructions)  # nothing the module does not have
    assert (k["end_ns"] > k["start_ns"]).all()


def test_json_fallback_agrees_with_xplane(xplane_events):
    js = read_trace(JSON)
    assert js.attrs["format"] == "json"
    a = kernel_executions(xplane_events)
    b = kernel_executions(js)
    assert list(a["hlo_op"]) == list(b["hlo_op"])
    np.testing.assert_allclose(a["start_ns"], b["start_ns"], atol=1.0)
    np.testing.assert_allclose(a["end_ns"], b["end_ns"], atol=1.0)
    # The JSON lacks flow ids, so completions are paired by name and order.
    # XLA:CPU may run a completion callback late, after the next run's, so a
    # few pairs can swap; the run bounds in measure make that harmless.
    same = np.isclose(a["done_ns"], b["done_ns"], atol=1.0) | (a["done_ns"].isna() & b["done_ns"].isna())
    assert same.mean() > 0.95


def test_json_and_xplane_give_the_same_measurement(hlo_text):
    a = measurement_from_trace(XPLANE, hlo_text, discard=1, check="ignore").kernels
    b = measurement_from_trace(JSON, hlo_text, discard=1, check="ignore").kernels
    assert list(a["hlo_op"]) == list(b["hlo_op"])
    np.testing.assert_allclose(a["min_per_run_s"], b["min_per_run_s"], rtol=1e-6)
    np.testing.assert_allclose(a["median_per_run_s"], b["median_per_run_s"], rtol=1e-6)


def test_async_thunks_complete_after_their_event(xplane_events):
    k = kernel_executions(xplane_events)
    late = k[k["done_ns"] > k["end_ns"]]
    assert len(late) > 0, "the sample should hold asynchronous thunks (convolution, parallel transpose)"


def test_measurement_from_committed_trace(hlo_text):
    with warnings.catch_warnings():
        # Overlapping thunks (the convolution ran beside transposes) only warn.
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        m = measurement_from_trace(XPLANE, hlo_text, discard=1, check="raise")
    assert m.missing == ()
    k = m.kernels
    assert k["in_module"].all()
    assert (k["min_per_run_s"] > 0).all() and (k["n"] == 4).all()
    assert (k["min_per_run_s"] <= k["median_per_run_s"]).all()
    # The loop body ran three times per run (fori_loop(0, 3, ...)).
    body = k[k["role"] == "control"]
    assert len(body) > 0 and (body["launches"] == 3).all()
    # The loop's own thunk (while.5) spans its body: a control-flow row, not a kernel.
    assert list(m.control_flow["hlo_op"]) == ["while.5"] and "while.5" not in set(k["hlo_op"])
    assert m.control_flow["min_per_run_s"].iloc[0] >= body["min_per_run_s"].sum()
    runs = m.runs
    assert len(runs) == 5 and runs["kept"].sum() == 4
    assert (runs["busy_s"] <= runs["wall_s"]).all()
    assert (runs.loc[~runs["overlap"], "kernel_sum_s"] <= runs.loc[~runs["overlap"], "wall_s"]).all()


def test_damaged_xplane_gives_clear_error():
    with pytest.raises(TraceError) as e:
        read_trace(DATA / "cpu_small_damaged.xplane.pb")
    assert "cpu_small_damaged.xplane.pb" in str(e.value)
    assert "not a readable XSpace" in str(e.value)


def test_damaged_json_gives_clear_error():
    with pytest.raises(TraceError) as e:
        read_trace(DATA / "cpu_small_damaged.trace.json.gz")
    assert "cpu_small_damaged.trace.json.gz" in str(e.value)
    assert "damaged" in str(e.value)


def test_foreign_files_give_clear_errors(tmp_path):
    not_trace = tmp_path / "other.json"
    not_trace.write_text(json.dumps({"hello": 1}))
    with pytest.raises(TraceError, match="no 'traceEvents'"):
        read_trace(not_trace)
    bad_json = tmp_path / "bad.trace.json.gz"
    bad_json.write_bytes(gzip.compress(b'{"traceEvents": [1, 2'))
    with pytest.raises(TraceError, match="not valid JSON"):
        read_trace(bad_json)
    empty = tmp_path / "empty.xplane.pb"
    empty.write_bytes(b"")
    with pytest.raises(TraceError, match="no '/host:CPU' or '/device:\\*' plane"):
        read_trace(empty)
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "absent.xplane.pb")
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    with pytest.raises(TraceError, match="no \\*.xplane.pb"):
        find_trace_files(nothing)


def test_wrong_module_text_is_reported(hlo_text):
    other = hlo_text.replace("HloModule jit_small_program", "HloModule jit_other", 1)
    assert other != hlo_text
    with pytest.raises(MeasurementError, match="no kernel of module 'jit_other'"):
        measurement_from_trace(XPLANE, other, discard=1)


# --------------------------------------------------------------------------- synthetic GPU


GPU_HLO = """HloModule jit_g, entry_computation_layout={(f32[1024]{0})->f32[]}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused_exp (p: f32[1024]) -> f32[1024] {
  %p = f32[1024]{0} parameter(0)
  ROOT %e = f32[1024]{0} exponential(%p)
}

%fused_reduce (q: f32[1024]) -> f32[] {
  %q = f32[1024]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[] reduce(%q, %z), dimensions={0}, to_apply=%add
}

ENTRY %main (x: f32[1024]) -> f32[] {
  %x = f32[1024]{0} parameter(0)
  %loop_exp_fusion = f32[1024]{0} fusion(%x), kind=kLoop, calls=%fused_exp
  ROOT %input_reduce_fusion = f32[] fusion(%loop_exp_fusion), kind=kInput, calls=%fused_reduce
}
"""


def _gpu_xspace(runs: int, *, kernel_ns=(3000, 2000, 1500), skew_ns: int = 0) -> str:
    """An XSpace as XLA:GPU + CUPTI would write it: host annotations, per-stream kernels,
    and a derived 'XLA Ops' line that must not be double counted.

    Per run: `loop_exp_fusion` (one kernel) and `input_reduce_fusion` (two
    kernels: the reduction and its epilogue), 1 µs apart; runs 20 µs apart.
    """
    stat_ids = {"hlo_op": 1, "hlo_module": 2, "program_id": 3, "correlation_id": 4}
    ev_ids = {"loop_exp_fusion": 1, "input_reduce_fusion": 2, "input_reduce_fusion_1": 3, "run": 10}
    host_events, dev_events, derived = [], [], []
    for i in range(runs):
        t0 = 1_000_000 + i * 20_000
        host_events.append(
            f'events {{ metadata_id: {100 + i} offset_ps: {t0 * 1000} duration_ps: {15_000 * 1000} }}'
        )
        t = t0 + 2_000 + skew_ns
        for name, op, dur in (
            ("loop_exp_fusion", "loop_exp_fusion", kernel_ns[0]),
            ("input_reduce_fusion", "input_reduce_fusion", kernel_ns[1]),
            ("input_reduce_fusion_1", "input_reduce_fusion", kernel_ns[2]),
        ):
            stats = (
                f'stats {{ metadata_id: 1 str_value: "{op}" }} '
                f'stats {{ metadata_id: 2 str_value: "jit_g" }} '
                f"stats {{ metadata_id: 3 int64_value: 7 }} "
                f"stats {{ metadata_id: 4 uint64_value: {1000 + i} }}"
            )
            dev_events.append(f"events {{ metadata_id: {ev_ids[name]} offset_ps: {t * 1000} duration_ps: {dur * 1000} {stats} }}")
            derived.append(f"events {{ metadata_id: {ev_ids[name]} offset_ps: {t * 1000} duration_ps: {dur * 1000} {stats} }}")
            t += dur + 1_000
    host_meta = "\n".join(
        f'event_metadata {{ key: {100 + i} value {{ id: {100 + i} name: "xla_costmodel.measure#{i}" }} }}' for i in range(runs)
    )
    dev_meta = "\n".join(f'event_metadata {{ key: {v} value {{ id: {v} name: "{k}" }} }}' for k, v in ev_ids.items())
    stat_meta = "\n".join(f'stat_metadata {{ key: {v} value {{ id: {v} name: "{k}" }} }}' for k, v in stat_ids.items())
    return f"""
planes {{
  id: 1
  name: "/host:CPU"
  lines {{ id: 1 display_id: 1 name: "python" timestamp_ns: 0 {' '.join(host_events)} }}
  {host_meta}
}}
planes {{
  id: 2
  name: "/device:GPU:0"
  lines {{ id: 7 display_id: 7 name: "Stream #7(Kernel)" timestamp_ns: 0 {' '.join(dev_events)} }}
  lines {{ id: 100 display_id: 100 name: "XLA Ops" timestamp_ns: 0 {' '.join(derived)} }}
  {dev_meta}
  {stat_meta}
}}
"""


def _write_xspace(tmp_path: Path, text: str) -> Path:
    from jax.profiler import ProfileData

    p = tmp_path / "gpu.xplane.pb"
    p.write_bytes(ProfileData.text_proto_to_serialized_xspace(text))
    return p


def test_gpu_kernels_are_summed_per_hlo_op(tmp_path):
    path = _write_xspace(tmp_path, _gpu_xspace(4))
    k = kernel_executions(read_trace(path))
    assert set(k["backend"]) == {"gpu"}
    assert set(k["line"]) == {"Stream #7(Kernel)"}  # the derived line is ignored
    assert len(k) == 4 * 3
    m = measurement_from_trace(path, GPU_HLO, discard=1)
    assert m.backend == "gpu"
    by_op = m.kernels.set_index("hlo_op")
    # Numbers set in _gpu_xspace: one 3 µs kernel; two kernels of 2 + 1.5 µs.
    assert by_op.loc["loop_exp_fusion", "min_per_run_s"] == pytest.approx(3e-6)
    assert by_op.loc["input_reduce_fusion", "min_per_run_s"] == pytest.approx(3.5e-6)
    assert by_op.loc["input_reduce_fusion", "launches"] == 2
    assert (by_op["n"] == 3).all()
    assert m.missing == ()
    assert np.allclose(m.runs["kernel_sum_s"], 6.5e-6)
    assert np.allclose(m.runs["wall_s"], 15e-6)


def test_gpu_kernels_outside_their_run_are_an_error(tmp_path):
    # Kernels 14 µs into a 15 µs run cannot all fit: the clock or the attribution is wrong.
    path = _write_xspace(tmp_path, _gpu_xspace(3, skew_ns=12_000))
    with pytest.raises(MeasurementError, match="outside"):
        measurement_from_trace(path, GPU_HLO)


def test_unsigned_64_bit_ids_fit_the_signed_columns():
    # XLA:CPU writes flow and run ids as uint64, some with the top bit set: they wrap, staying distinct.
    from xla_costmodel.measure._trace import _as_int, _events_frame

    assert _as_int(2 ** 64 - 1) == -1 and _as_int(2 ** 63) == -(2 ** 63) and _as_int(5) == 5
    row = ("/host:CPU", "t", "k", 0.0, 1.0, None, None, None, None, _as_int(2 ** 64 - 2), None)
    assert _events_frame([row])["flow_out"].iloc[0] == -2


_LOOP_HLO = """HloModule loop

cond {
  p = (s32[], f32[64,64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[64,64]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  v = f32[64,64] get-tuple-element(p), index=1
  d = f32[64,64] dot(v, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (s32[], f32[64,64]) tuple(j, d)
}

ENTRY e {
  x = f32[64,64] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[64,64]) tuple(zero, x)
  w = (s32[], f32[64,64]) while(t), condition=cond, body=body
  ROOT r = f32[64,64] get-tuple-element(w), index=1
}
"""


def test_async_kernel_in_a_loop_completes_before_its_next_launch():
    """An asynchronous thunk in a loop body whose completion callback ran late (`done_ns` past the
    next trips) finished before the loop launched it again: a trip ends when all its kernels have."""
    import pandas as pd

    from xla_costmodel.measure._runs import completion_times

    index = ModuleIndex(_LOOP_HLO)
    ours = pd.DataFrame({
        "run": [0, 0, 0],
        "hlo_op": ["d", "d", "d"],
        "start_ns": [100.0, 300.0, 500.0],
        "end_ns": [110.0, 310.0, 510.0],
        "done_ns": [900.0, 350.0, 950.0],  # the first and last callbacks ran late
    })
    spans = pd.DataFrame({"run": [0], "start_ns": [0.0], "end_ns": [1000.0]})
    end = completion_times(ours, spans, index)
    # The first launch is bounded by the second's start; the second's callback was on time; the last
    # has no later launch and no consumer: its callback, within the run.
    np.testing.assert_array_equal(end, [300.0, 350.0, 950.0])
