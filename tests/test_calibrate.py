"""`calibrate`: files written, models loaded from them, `analyze` using them, refits verified."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from xla_costmodel import analyze, calibrate, parse_hlo
from xla_costmodel.fit import CalibratedModel, CalibrationError, FEATURES, FittedModel, LearnedModel, kernel_features
from xla_costmodel.fit._calibrated import host_as_gpu
from xla_costmodel.measure import read_dataset
from conftest import TEST_CPU

ROOT = Path(__file__).resolve().parents[1]
CPU = TEST_CPU
MODULE = """HloModule m
%f (p0: f32[4096], p1: f32[4096]) -> f32[4096] {
  %p0 = f32[4096]{0} parameter(0)
  %p1 = f32[4096]{0} parameter(1)
  %a = f32[4096]{0} add(%p0, %p1)
  ROOT %e = f32[4096]{0} exponential(%a)
}
ENTRY %e (x: f32[4096], y: f32[4096]) -> f32[4096] {
  %x = f32[4096]{0} parameter(0)
  %y = f32[4096]{0} parameter(1)
  ROOT %k = f32[4096]{0} fusion(%x, %y), kind=kLoop, calls=%f
}"""


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    suite = read_dataset(ROOT / "calibration" / "host_cpu.parquet")
    keep = suite["kernel"].isin(["ew_add", "ew_exp", "ew_mul", "copy_s1", "copy_s2", "matmul_square", "launch_add"])
    data = suite[keep & (suite["dtype"] == "float32")]
    d = tmp_path_factory.mktemp("calibration")
    path = d / "train.parquet"
    data.to_parquet(path, index=False)
    result = calibrate(device=CPU, dataset=path, out_dir=d, progress=False)
    return d, path, data, result


def test_files_and_their_fields(calibrated):
    d, path, data, result = calibrated
    assert list(result["model"]) == ["fitted", "learned", "roofline-calibrated", "xla-gpu-calibrated",
                                     "context", "learned-context"]
    # (the training file holds suite rows only, so the context models fit the same rows as the others)
    assert (result["training_rows"] == len(data)).all()
    for model in result["model"]:
        f = d / f"test-cpu_{model}.json"
        assert f.is_file() and f.stat().st_size < 20_000  # small files
        meta = json.loads(f.read_text())
        for key in ("device", "date", "jax_version", "jaxlib_version", "training_rows", "datasets", "train_metrics"):
            assert key in meta, (model, key)
        assert meta["device"] == "test-cpu" and meta["model"] == model
    fitted = json.loads((d / "test-cpu_fitted.json").read_text())
    assert fitted["features"] == list(FEATURES) and set(fitted["weights"]) == set(FEATURES)
    assert all(w >= 0 for w in fitted["weights"].values())


def test_models_load_their_calibration(calibrated, monkeypatch):
    d, path, data, _ = calibrated
    monkeypatch.setenv("XLA_COSTMODEL_DATA_DIR", str(d))
    kernel = parse_hlo(MODULE).entry.instruction("k")
    # The fitted model, unfitted, prices with the saved weights: the same as refitting here.
    refit = FittedModel().fit(kernel_features(data, CPU), data["min_per_run_s"].to_numpy() / data["launches"].to_numpy())
    loaded = FittedModel().estimate(kernel, CPU)
    assert loaded.time_s == pytest.approx(refit.estimate(kernel, CPU).time_s, rel=1e-9)
    # The learned model refits from the dataset and checks the saved predictions.
    learned = LearnedModel.from_calibration(CPU)
    assert learned.n_train_ == len(data)
    assert LearnedModel().estimate(kernel, CPU).time_s == pytest.approx(learned.estimate(kernel, CPU).time_s)
    # The calibrated analytical models price on their fitted device.
    for base in ("roofline", "xla-gpu"):
        m = CalibratedModel.from_calibration(base, CPU)
        est = CalibratedModel(base).estimate(kernel, CPU)
        assert est.priced and est.launch_s == pytest.approx(m.spec_.kernel_launch_overhead_s)


def test_analyze_uses_the_calibration(calibrated, monkeypatch):
    d, *_ = calibrated
    monkeypatch.setenv("XLA_COSTMODEL_DATA_DIR", str(d))
    table = analyze(parse_hlo(MODULE), device=CPU, model="fitted")
    row = table[table["kernel"] == "k"].iloc[0]
    assert row["priced"] and row["time_s"] > 0 and table.model_name == "fitted"
    weights = json.loads((d / "test-cpu_fitted.json").read_text())["weights"]
    x = kernel_features(parse_hlo(MODULE).entry.instruction("k"), CPU).iloc[0]
    assert row["time_s"] == pytest.approx(sum(weights[f] * x[f] for f in FEATURES), rel=1e-9)


def test_changed_dataset_is_detected(calibrated, tmp_path, monkeypatch):
    d, path, data, _ = calibrated
    import shutil

    for f in d.glob("test-cpu_learned.json"):
        shutil.copy(f, tmp_path / f.name)
    meta = json.loads((tmp_path / "test-cpu_learned.json").read_text())
    changed = tmp_path / "train.parquet"
    data.iloc[: len(data) // 2].to_parquet(changed, index=False)
    meta["datasets"][0]["path"] = "train.parquet"
    (tmp_path / "test-cpu_learned.json").write_text(json.dumps(meta))
    monkeypatch.setenv("XLA_COSTMODEL_DATA_DIR", str(tmp_path))
    with pytest.raises(CalibrationError, match="rows of its training dataset .* changed since calibration"):
        LearnedModel.from_calibration(CPU)


def test_appended_rows_keep_the_calibration_valid(calibrated, tmp_path, monkeypatch):
    d, path, data, _ = calibrated
    import shutil

    shutil.copy(d / "test-cpu_learned.json", tmp_path / "test-cpu_learned.json")
    later = data.iloc[:5].assign(suite_run="a-later-run")
    import pandas as pd

    pd.concat([data, later], ignore_index=True).to_parquet(tmp_path / "train.parquet", index=False)
    monkeypatch.setenv("XLA_COSTMODEL_DATA_DIR", str(tmp_path))
    assert LearnedModel.from_calibration(CPU).n_train_ == len(data)


def test_calibrated_roofline_recovers_known_parameters():
    # Kernels priced by a roofline with known rates, then measured "times" from a device
    # 3x faster in bandwidth, 2x slower in compute, launch 0.5 us: the fit finds them.
    from xla_costmodel.models import get_model

    text = "HloModule m\n" + "\n".join(
        f"%f{i} (p: f32[{n}]) -> f32[{n}] {{\n  %p = f32[{n}]{{0}} parameter(0)\n"
        + "".join(f"  %t{j} = f32[{n}]{{0}} tanh(%{'p' if j == 0 else f't{j - 1}'})\n" for j in range(reps))
        + f"  ROOT %r = f32[{n}]{{0}} negate(%t{reps - 1})\n}}"
        for i, (n, reps) in enumerate([(n, r) for n in (64, 4096, 262144) for r in (1, 8, 64)])
    ) + "\nENTRY %e (x: f32[64]) -> f32[64] {\n  ROOT %x = f32[64]{0} parameter(0)\n}\n"
    module = parse_hlo(text)
    kernels = []
    for comp in module.computations:
        if comp.name.startswith("f"):
            from xla_costmodel import HloInstruction

            p = HloInstruction("arg", "parameter", comp.root.shape, parameter_number=0)
            k = HloInstruction(f"k_{comp.name}", "fusion", comp.root.shape, [p],
                               {"kind": "kLoop", "calls": comp})
            kernels.append(k)
    truth = CPU.replace(memory_bandwidth_bytes_per_s=3e10, clock_rate_ghz=1.0, kernel_launch_overhead_s=5e-7)
    roof = get_model("roofline")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = np.array([roof.estimate(k, truth).time_s for k in kernels])
        m = CalibratedModel("roofline", loss="linear").fit(kernels, y, CPU)
    assert m.factors_["bandwidth"] == pytest.approx(3.0, rel=1e-3)
    assert m.factors_["vector_rate"] == pytest.approx(0.5, rel=1e-3)
    assert m.spec_.kernel_launch_overhead_s == pytest.approx(5e-7, rel=1e-3)


def test_host_as_gpu_keeps_the_host_rates():
    g = host_as_gpu(CPU)
    assert g.kind == "gpu" and g.name == "test-cpu"
    assert g.memory_bandwidth_bytes_per_s == CPU.memory_bandwidth_bytes_per_s
    assert g.core_count == 2 and g.l2_cache_bytes == CPU.l3_cache_bytes
    assert g.kernel_launch_overhead_s == CPU.kernel_launch_overhead_s


def test_roles_decide_what_a_calibration_fits(tmp_path, monkeypatch):
    """Default: measurement kernels only; `include_programs`: also this project's programs; the corpus never,
    with a warning; a learned refit selects the same rows again."""
    import pandas as pd

    suite = read_dataset(ROOT / "calibration" / "host_cpu.parquet")
    suite = suite[suite["kernel"].isin(["ew_add", "copy_s1", "matmul_square", "launch_add"])
                  & (suite["dtype"] == "float32")]
    programs = read_dataset(ROOT / "calibration" / "host_cpu_programs.parquet")
    programs = programs[programs["kernel"].isin(["mlp_fwd", "x_ew_add"]) | (programs["case"] == "p_mixer_grad/64")]
    corpus = read_dataset(ROOT / "calibration" / "host_cpu_corpus.parquet")
    corpus = corpus[corpus["case"] == "flax_linen_conv_fwd@small"]
    path = tmp_path / "mixed.parquet"
    pd.concat([suite, programs, corpus], ignore_index=True).to_parquet(path, index=False)
    ours = programs["kernel_class"].isin(["program", "program-unfused", "extra-program"])

    def kernels(rows):  # rows that are kernels (control flow is not)
        return int((~rows["opcode"].isin(["while", "conditional", "call"])).sum())

    n_suite, n_ours = kernels(pd.concat([suite, programs[~ours]])), kernels(programs[ours])

    with pytest.warns(RuntimeWarning, match=f"{len(corpus)} rows of programs of other sources"):
        plain = calibrate(device=CPU, dataset=path, out_dir=tmp_path / "a", models=("fitted",), progress=False)
    assert plain["training_rows"].iloc[0] == n_suite
    meta = json.loads((tmp_path / "a" / "test-cpu_fitted.json").read_text())
    assert meta["rows_roles"] == ["suite"]
    assert meta["left_out_rows"] == {"training-program": int(ours.sum()), "test-program": len(corpus)}

    with pytest.warns(RuntimeWarning, match="rows of programs of other sources"):
        both = calibrate(device=CPU, dataset=path, out_dir=tmp_path / "b", models=("fitted", "learned"),
                         include_programs=True, progress=False)
    assert (both["training_rows"] == n_suite + n_ours).all()
    monkeypatch.setenv("XLA_COSTMODEL_DATA_DIR", str(tmp_path / "b"))
    assert LearnedModel.from_calibration(CPU).n_train_ == n_suite + n_ours

    only_corpus = tmp_path / "corpus.parquet"
    corpus.to_parquet(only_corpus, index=False)
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match=r"only 0 usable kernel rows .*test-program"):
        calibrate(device=CPU, dataset=only_corpus, out_dir=tmp_path / "c", models=("fitted",), progress=False)
