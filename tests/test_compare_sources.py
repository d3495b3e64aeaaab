"""Roles of dataset rows, and `compare`'s `source` and `source-cv` splits on small slices of the committed data.

The slices: a few suite kernels (training), two zoo programs and one of this
project's training programs (`extra-program`), and programs of four corpus
sources (test data). Each check is worked out from the rows themselves:
which rows a fold fits (recorded by the model), and tables that must equal
the metrics of the per-kernel predictions they summarize.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from xla_costmodel.compare import compare_models
from xla_costmodel.fit import FittedModel
from xla_costmodel.datasets._data import (SUITE, TEST_PROGRAM, TRAINING_PROGRAM, row_roles, row_sources, training_rows)
from xla_costmodel.metrics import accuracy
from xla_costmodel.measure import read_dataset
from conftest import TEST_CPU

ROOT = Path(__file__).resolve().parents[1]
CPU = TEST_CPU
CORPUS_CASES = ["pix_color_augment@small", "pix_color_augment@large", "flax_linen_conv_fwd@small",
                "flax_linen_conv_fwd@large", "flax_nnx_embed_fwd@small", "jax_numpy_sort_topk@small",
                "jax_scipy_map_coordinates@small", "jax_scipy_map_coordinates@large",
                "optax_softmax_cross_entropy_grad@small"]


@pytest.fixture(scope="module")
def slices():
    suite = read_dataset(ROOT / "calibration" / "host_cpu.parquet")
    suite = suite[suite["kernel"].isin(["ew_add", "ew_exp", "copy_s2", "matmul_square", "launch_add", "reduce_row"])
                  & (suite["dtype"] == "float32") & (suite["size"].astype(int) <= 1 << 18)]
    programs = read_dataset(ROOT / "calibration" / "host_cpu_programs.parquet")
    programs = programs[programs["kernel"].isin(["mlp_fwd", "layernorm_softmax", "x_ew_add"])
                        | (programs["case"] == "p_mixer_grad/64")]
    corpus = read_dataset(ROOT / "calibration" / "host_cpu_corpus.parquet")
    corpus = corpus[corpus["case"].isin(CORPUS_CASES)]
    # Disjoint row labels, so that a model can record exactly which rows it was fitted to.
    programs.index = programs.index + 100_000
    corpus.index = corpus.index + 200_000
    return suite, programs, corpus


class RecordingModel(FittedModel):
    """The fitted model, recording the rows (labels) each copy is fitted to and asked to predict."""

    log: list = []

    def fit(self, X, y, sample_weight=None):
        RecordingModel.log.append(("fit", frozenset(X.index)))
        return super().fit(X, y, sample_weight)

    def predict(self, X):
        RecordingModel.log.append(("predict", frozenset(X.index)))
        return super().predict(X)


def test_roles_of_the_committed_rows(slices):
    suite, programs, corpus = slices
    assert set(row_roles(suite)) == {SUITE}
    roles = pd.Series(row_roles(programs), index=programs.index)
    assert set(roles[programs["kernel_class"].isin(["program", "program-unfused", "extra-program"])]) == {TRAINING_PROGRAM}
    assert set(roles[programs["kernel_class"] == "extra-elementwise"]) == {SUITE}
    assert set(row_roles(corpus)) == {TEST_PROGRAM}
    # Own programs count as one source, the corpus's by library.
    assert set(row_sources(programs[roles == TRAINING_PROGRAM])) == {"zoo"}
    assert set(row_sources(corpus)) == {"dm-pix", "flax", "jax", "optax"}
    both = pd.concat([suite, programs, corpus])
    assert set(training_rows(both).index) == set(suite.index) | set(programs.index[roles == SUITE])
    assert set(training_rows(both, include_programs=True).index) == set(suite.index) | set(programs.index)


def test_source_split_scores_every_source_and_sums_programs(slices):
    suite, programs, corpus = slices
    train = pd.concat([suite, programs])
    table = compare_models(["fitted", "roofline"], corpus, "source", train=train, device=CPU)
    pred = table.predictions
    scored = pred[pred["scored"]]
    # Every corpus kernel is scored, none of the training rows is.
    n_kernels = int((~corpus["opcode"].isin(["while", "conditional", "call"])).sum())
    assert (table["n"] + table["unpriced"] == n_kernels).all()
    assert set(scored["source"]) == {"dm-pix", "flax", "jax", "optax"}
    # The per-source table is `accuracy` of each source's predictions; the overall row of all of them.
    by_source = table.by_source.set_index(["model", "source"])
    assert len(by_source) == 2 * 4
    for (model, source), g in scored.groupby(["model", "source"]):
        want = accuracy(g["predicted_s"], g["measured_s"])
        row = by_source.loc[(model, source)]
        assert row["programs"] == g["case"].nunique()
        for metric in ("sk_error", "ratio_error", "kendall_tau", "within_2x", "n"):
            assert row[metric] == pytest.approx(want[metric], nan_ok=True)
        assert "gmre" not in row and "sk_gmre" not in row  # one name per metric
    fitted = table.set_index("model").loc["fitted"]
    all_fitted = scored[scored["model"] == "fitted"]
    assert fitted["sk_error"] == pytest.approx(accuracy(all_fitted["predicted_s"], all_fitted["measured_s"])["sk_error"])
    # Program totals: per run, each kernel's time x its launches, added up; the wall time from the rows.
    by_program = table.by_program[table.by_program["model"] == "fitted"].set_index("case")
    assert set(by_program.index) == set(CORPUS_CASES)
    rows = corpus[~corpus["opcode"].isin(["while", "conditional", "call"])]
    for case, g in rows.groupby("case"):
        row = by_program.loc[case]
        assert row["kernels"] == len(g)
        assert row["measured_per_run_s"] == pytest.approx(g["min_per_run_s"].sum(), rel=1e-9)
        assert row["wall_per_run_s"] == g["wall_min_per_run_s"].iloc[0]
        p = all_fitted[all_fitted["case"] == case]
        assert row["predicted_per_run_s"] == pytest.approx((p["predicted_s"] * p["launches"]).sum(), rel=1e-9)
        assert row["predicted_over_measured"] == pytest.approx(row["predicted_per_run_s"] / row["measured_per_run_s"])


def test_source_split_trains_on_suite_rows_only_unless_asked(slices):
    suite, programs, corpus = slices
    train = pd.concat([suite, programs])
    suite_like = set(suite.index) | set(programs.index[row_roles(programs) == SUITE])
    RecordingModel.log = []
    compare_models([RecordingModel()], corpus, "source", train=train, device=CPU)
    fits = [rows for kind, rows in RecordingModel.log if kind == "fit"]
    assert len(fits) == 1
    kept = suite_like & set(fits[0])
    assert fits[0] <= suite_like and len(kept) > 0.9 * len(suite_like)  # (rows the features cannot read drop out)
    RecordingModel.log = []
    compare_models([RecordingModel()], corpus, "source", train=train, device=CPU, include_programs=True)
    fits = [rows for kind, rows in RecordingModel.log if kind == "fit"]
    assert fits[0] - suite_like and fits[0] <= set(suite.index) | set(programs.index)
    # The project's programs as test data while they train: nothing is left to score.
    with pytest.raises(ValueError, match="no kernels to score"):
        compare_models(["fitted"], programs, "source", train=train, device=CPU, include_programs=True)


def test_source_cv_never_fits_a_source_to_the_model_that_scores_it(slices):
    suite, programs, corpus = slices
    train = pd.concat([suite, programs])
    source_of = pd.Series(np.r_[row_sources(train), row_sources(corpus)],
                          index=np.r_[train.index, corpus.index])
    RecordingModel.log = []
    table = compare_models([RecordingModel(), "roofline"], corpus, "source-cv", train=train, device=CPU)
    log = RecordingModel.log
    folds = [(log[i][1], log[i + 1][1]) for i in range(0, len(log), 2)]
    assert [kind for kind, _ in log] == ["fit", "predict"] * 4  # one fold per corpus source
    for fitted_rows, predicted_rows in folds:
        held = set(source_of[list(predicted_rows)])
        assert len(held) == 1 and held <= {"dm-pix", "flax", "jax", "optax"}
        trained = set(source_of[list(fitted_rows)])
        assert not trained & held
        # The suite, this project's programs (as `zoo`) and every other corpus source train.
        assert trained == {"suite", "extra", "zoo", "dm-pix", "flax", "jax", "optax"} - held
    assert set(table.by_source["source"]) == {"dm-pix", "flax", "jax", "optax"}
    fold_of = table.predictions.groupby("source")["fold"].nunique()
    assert (fold_of == 1).all()


def test_classic_splits_still_score_the_zoo(slices):
    suite, programs, _ = slices
    table = compare_models(["fitted"], programs, "program", train=pd.concat([suite, programs]), device=CPU)
    scored = table.predictions[table.predictions["scored"]]
    assert set(scored["program"]) == {"mlp_fwd", "layernorm_softmax"} and set(scored["source"]) == {"zoo"}
    assert table["fusion_n"].iloc[0] == 2
    with pytest.raises(ValueError, match="include_programs applies to the 'source' split"):
        compare_models(["fitted"], programs, "program", device=CPU, include_programs=True)


def test_cli_compare_by_source(slices, tmp_path, capsys, monkeypatch):
    from xla_costmodel.cli import main
    from xla_costmodel.devices import _registry, register_device

    monkeypatch.setattr(_registry, "_USER_DEVICES", dict(_registry._USER_DEVICES))
    register_device(CPU, overwrite=True)
    suite, programs, corpus = slices
    paths = {}
    for name, frame in (("suite", suite), ("programs", programs), ("corpus", corpus)):
        paths[name] = tmp_path / f"{name}.parquet"
        frame.to_parquet(paths[name], index=False)
    rc = main(["compare", "--models", "fitted", "roofline", "--dataset", str(paths["corpus"]), "--train",
               str(paths["suite"]), str(paths["programs"]), "--device", "test-cpu", "--by-source", "--json"])
    records = json.loads(capsys.readouterr().out)
    assert rc == 0
    table = compare_models(["fitted", "roofline"], str(paths["corpus"]), "source",
                    train=[str(paths["suite"]), str(paths["programs"])], device=CPU)
    assert [(r["model"], r["source"]) for r in records] == (
        [*zip(table.by_source["model"], table.by_source["source"]), ("fitted", "all"), ("roofline", "all")])
    got = {(r["model"], r["source"]): r for r in records}
    for _, row in table.by_source.iterrows():
        assert got[(row["model"], row["source"])]["sk_error"] == pytest.approx(row["sk_error"])
    for _, row in table.iterrows():
        assert got[(row["model"], "all")]["kendall_tau"] == pytest.approx(row["kendall_tau"])
        assert got[(row["model"], "all")]["programs"] == len(CORPUS_CASES)
    assert all(r["split"] == "source" for r in records)
    assert main(["compare", "--split", "source-cv", "--dataset", str(paths["suite"]), "--train",
                 str(paths["suite"]), "--device", "test-cpu"]) == 2
    assert "no rows of kernel class program, user to score" in capsys.readouterr().err


def test_each_metric_has_one_name():
    """`sk_error` and `ratio_error` only (issue 26: they were also `sk_gmre` and `gmre`, names removed in 0.x)."""
    import xla_costmodel.fit as fit
    from xla_costmodel.fit import sk_error

    acc = accuracy([2.0, 1.0, 3.0], [1.0, 1.5, 2.0])
    assert not {"gmre", "sk_gmre"} & set(acc)
    assert acc["ratio_error"] == pytest.approx(math.exp((math.log(2) + math.log(1.5) + math.log(1.5)) / 3) - 1)
    assert sk_error([2.0, 1.0, 3.0], [1.0, 1.5, 2.0]) == acc["sk_error"]
    assert not hasattr(fit, "sk_gmre")
    assert math.isnan(accuracy([math.nan], [1.0])["sk_error"])
