"""Scale-out on the local process pool: the same rows as a plain loop, failures kept apart, output and resume.

The Ray engine's own tests are in `test_scale_ray.py`.
"""

from __future__ import annotations

import sys
import warnings

import pandas as pd
import pytest

import xla_costmodel as xc
from xla_costmodel.cli import main
from xla_costmodel.scale import (
    LocalEngine, RayUnavailableError, ResultFileError, SourcesTable, TaskFailedWarning, analyze_many, map_modules,
    read_results, simulate_fusion_many, WorkerStartError,
)
from _scale_ops import CountOrDie, RecordingEngine
from conftest import fixture_paths

# Modules as lowered, priced on a GPU as given: never XLA:CPU's kernels on a GPU (a BackendMismatchWarning each),
# so not linalg, whose lowering already calls XLA:CPU's LAPACK.
PRE = [str(p) for p in fixture_paths("*.pre.hlo") if p.name != "linalg.pre.hlo"]


def plain_loop(files, **kwargs) -> pd.DataFrame:
    """What a user writes without analyze_many: analyze each file, a source column in front."""
    frames = []
    for f in files:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            frames.append(pd.DataFrame(xc.analyze(f, **kwargs)).assign(source=f))
    df = pd.concat(frames, ignore_index=True)
    return df[["source"] + [c for c in df.columns if c != "source"]]


@pytest.fixture(scope="module")
def local_pre():
    return analyze_many(PRE, device="h100-sxm", model="xla-gpu", progress=False)


def test_analyze_many_equals_a_plain_loop_row_for_row(local_pre):
    assert isinstance(local_pre, SourcesTable) and local_pre.failures.empty
    pd.testing.assert_frame_equal(pd.DataFrame(local_pre), plain_loop(PRE, device="h100-sxm", model="xla-gpu"))
    assert list(dict.fromkeys(local_pre["source"])) == PRE  # sources in the order given
    assert local_pre.summary()["sources"] == len(PRE) and f"<b>{len(PRE)}</b> sources" in local_pre._repr_html_()


def test_modules_and_text_as_sources(local_pre):
    big = next(p for p in PRE if p.endswith("transformer_grad.pre.hlo"))  # too deep a graph to pickle
    sources = {"module": xc.load_hlo(big), "text": open(PRE[0]).read()}
    table = analyze_many(sources, workers=1, progress=False)
    expect = local_pre[local_pre["source"].isin([big, PRE[0]])]
    expect = expect.assign(source=expect["source"].map({big: "module", PRE[0]: "text"}))
    expect = pd.concat([expect[expect["source"] == "module"], expect[expect["source"] == "text"]], ignore_index=True)
    pd.testing.assert_frame_equal(pd.DataFrame(table), pd.DataFrame(expect))


def test_simulate_fusion_many_equals_simulate_fusion():
    files = PRE[:4]
    many = simulate_fusion_many(files, device="h100-sxm", model="xla-gpu", workers=2, progress=False)
    assert list(many["source"]) == files
    for f, row in zip(files, many.itertuples()):
        result = xc.simulate_fusion(f, device="h100-sxm", model="xla-gpu")
        expect = result.summary()
        for key in ("module", "fusion_steps", "kernels_before", "kernels_after", "time_before_s", "time_after_s",
                    "rejected"):
            assert getattr(row, key) == expect[key], (f, key)
        assert row.fused_hlo == result.module.to_text()


def test_a_killed_worker_loses_nothing_else_and_is_reported(tmp_path):
    sources = PRE[:5]
    fatal = xc.load_hlo(sources[2]).name
    out = tmp_path / "counts.parquet"
    with pytest.warns(TaskFailedWarning, match="1 of 5 sources failed"):
        table = map_modules(CountOrDie(fatal), sources, workers=2, out=out, progress=False)
    assert list(table.failures["source"]) == [sources[2]]
    assert "worker process died" in table.failures["error"].iloc[0]
    assert list(table["source"]) == [s for s in sources if s != sources[2]]  # the bystanders were run again, alone
    expected = {xc.load_hlo(s).name: sum(len(c.instructions) for c in xc.load_hlo(s).computations)
                for s in sources if s != sources[2]}
    assert dict(zip(table["module"], table["instructions"])) == expected
    rows, record = read_results(out)  # finished results are in the output file
    assert sorted(rows["source"]) == sorted(expected_source for expected_source in table["source"])
    assert record["failed"] == {sources[2]: table.failures["error"].iloc[0]}

    # A rerun with resume runs only what is missing.
    engine = RecordingEngine(LocalEngine(1))
    with pytest.warns(TaskFailedWarning):
        again = map_modules(CountOrDie(fatal), sources, engine=engine, out=out, resume=True, progress=False)
    assert engine.ran == [sources[2]]
    assert list(again["source"]) == list(table["source"])


def test_workers_that_always_die_stop_the_run():
    with pytest.raises(WorkerStartError, match="no task has finished"):
        map_modules(CountOrDie("*"), PRE[:6], workers=2, progress=False)


def test_output_is_never_overwritten_and_resume_skips_done_sources(tmp_path, local_pre):
    out = tmp_path / "r.parquet"
    first = analyze_many(PRE[:3], out=out, workers=1, progress=False)
    before = out.read_bytes()
    with pytest.raises(ResultFileError, match="exists; resume it"):
        analyze_many(PRE[:3], out=out, workers=1, progress=False)
    with pytest.raises(ResultFileError, match="another job"):
        analyze_many(PRE, model="roofline", out=out, resume=True, workers=1, progress=False)
    assert out.read_bytes() == before
    engine = RecordingEngine(LocalEngine(2))
    full = analyze_many(PRE, out=out, resume=True, engine=engine, progress=False)
    assert engine.ran == PRE[3:]
    pd.testing.assert_frame_equal(pd.DataFrame(full), pd.DataFrame(local_pre))
    rows, record = read_results(out)
    pd.testing.assert_frame_equal(rows, pd.DataFrame(local_pre))
    assert record["sources"] == PRE and record["job"]["model"] == "xla-gpu"
    assert len(first) < len(full)


def test_bad_sources(tmp_path):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[2] nonsense(\n}\n")
    with pytest.warns(TaskFailedWarning):
        table = analyze_many([PRE[0], str(bad)], workers=1, progress=False)
    assert list(table.failures["source"]) == [str(bad)]
    assert table.failures["error"].iloc[0].startswith(f"HloParseError: {bad}:")
    assert set(table["source"]) == {PRE[0]}
    with pytest.raises(FileNotFoundError, match="no such file: nowhere.hlo"):
        analyze_many([PRE[0], "nowhere.hlo"], progress=False)
    with pytest.raises(TypeError, match="wrap it in a list"):
        analyze_many(PRE[0], progress=False)
    with pytest.raises(ValueError, match="given twice"):
        analyze_many([PRE[0], PRE[0]], progress=False)
    with pytest.raises(ValueError, match="xla-gpu model prices GPU"):
        analyze_many(PRE[:1], device="host", model="xla-gpu", progress=False)
    with pytest.raises(TypeError, match="cannot be sent to worker processes"):
        map_modules(lambda module: {"n": 1}, PRE[:1], progress=False)
    with pytest.raises(ResultFileError, match="must be a .parquet file"):
        analyze_many(PRE[:1], out=tmp_path / "r.csv", progress=False)


def test_ray_engine_without_ray_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(RayUnavailableError, match=r"pip install 'xla_costmodel\[ray\]'"):
        analyze_many(PRE[:1], engine="ray", progress=False)
    assert main(["analyze", *PRE[:2], "--engine", "ray", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs Ray" in err


def test_cli_many_files(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[2] nonsense(\n}\n")
    files = PRE[:2]
    assert main(["analyze", *files, str(bad), "--out", str(out), "--workers", "2", "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert f"error: {bad}: HloParseError: {bad}:" in captured.err  # the failed file, named
    assert "2 files" in captured.out and all(f in captured.out for f in files)
    assert main(["analyze", *files, "--out", str(out), "--no-progress"]) == 2
    assert "exists; resume it" in capsys.readouterr().err
    bad.write_text(open(PRE[2]).read())  # fixed: the resumed run does only this one
    assert main(["analyze", *files, str(bad), "--out", str(out), "--resume", "--csv", "--no-progress"]) == 0
    csv = capsys.readouterr().out
    rows, record = read_results(out)
    assert record["sources"] == [*files, str(bad)] and record["failed"] == {}
    assert len(csv.strip().splitlines()) == len(rows) + 1
    assert main(["analyze", *files, "nowhere.hlo", "--no-progress"]) == 2
    assert main(["analyze", *files, "--address", "auto"]) == 2
    assert main(["analyze", *files, "--resume"]) == 2
    capsys.readouterr()


def test_no_progress_bar_when_stderr_is_not_a_terminal(capfd):
    # A log or a pipe (here pytest's capture) gets no bar: its carriage returns would be glued to the
    # next line, as `xla-costmodel analyze a.hlo b.hlo > log 2>&1` showed.
    table = analyze_many(PRE[:2], workers=1)
    assert table.failures.empty
    err = capfd.readouterr().err
    assert "module/s" not in err and "\r" not in err and "%|" not in err


def test_cli_many_files_summary_in_microseconds(local_pre, capsys):
    # The per-file table is read by people: times in µs, the unit in the column name (as `analyze FILE`).
    assert main(["analyze", *PRE[:2], "--device", "h100-sxm", "--model", "xla-gpu", "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    assert header == ["source", "kernels", "unpriced", "total_us"]
    first = local_pre[(local_pre["source"] == PRE[0]) & (local_pre["bound"] != "free")]
    shown = float(lines[1].split()[header.index("total_us")])
    assert shown == pytest.approx(first["total_s"].fillna(0.0).sum() * 1e6, rel=1e-3)
