"""The shipped `learned` model of the H100: a learned efficiency over `xla-gpu` (`fit._efficiency`).

Made by `scripts/fit_gpu_learned.py --write` from the shipped H100 captures
(`calibration/h100-sxm.parquet`, `calibration/h100-sxm_corpus.parquet`);
checked here through the public API as a user gets it, against the script
that made it, and against the figures the README states.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from xla_costmodel import analyze, get_device
from xla_costmodel.hlo import parse_hlo
from xla_costmodel.models import get_model

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "calibration"
CALIBRATION = SHIPPED / "h100-sxm_learned.json"
TABLE = SHIPPED / "h100-sxm_learned-rows.parquet"
CASE = "equinox_mlp_grad@small"


def _script():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("fit_gpu_learned", ROOT / "scripts" / "fit_gpu_learned.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _module(case=CASE):
    with gzip.open(ROOT / "hlo_fixtures" / "gpu_h100" / f"{case}.post.hlo.gz", "rt") as f:
        return parse_hlo(f.read(), source=f"{case}.post.hlo")


def test_learned_on_the_h100_is_xla_gpu_times_a_bounded_learned_factor_and_says_its_calibration():
    assert CALIBRATION.is_file() and TABLE.is_file()
    module = _module()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        learned = pd.DataFrame(analyze(module, device="h100-sxm", model="learned"))
    base = pd.DataFrame(analyze(module, device="h100-sxm", model="xla-gpu"))
    kernels = learned[learned["bound"] != "free"]
    assert len(kernels) > 3 and kernels["priced"].all()
    ratio = kernels["time_s"].to_numpy() / base.loc[kernels.index, "time_s"].to_numpy()
    assert np.all(ratio >= 0.25 - 1e-12) and np.all(ratio <= 4.0 + 1e-12)
    assert np.ptp(ratio) > 0  # a factor learned per kernel, not one scale
    # Each kernel says which calibration priced it and where its rows were measured.
    for note in kernels["note"]:
        assert "calibration h100-sxm_learned.json, measured on gpu: NVIDIA H100" in note, note


def test_analyze_prices_the_training_rows_as_the_refitted_model_predicts_them():
    # The model `get_model("learned")` loads on the H100 prices each kernel of a corpus module inside
    # `analyze` exactly as the script's table of that module's rows says (same analytical price, same trees).
    table = pd.read_parquet(TABLE)
    rows = table[table["case"] == CASE].set_index("hlo_op")
    model = get_model("learned")._fitted_for(get_device("h100-sxm"))
    expected = pd.Series(model.predict(rows), index=rows.index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = pd.DataFrame(analyze(_module(), device="h100-sxm", model="learned")).groupby("kernel")["time_s"].first()
    common = expected.index.intersection(got.index)
    assert len(common) == len(expected) > 3
    np.testing.assert_allclose(got[common].to_numpy(), expected[common].to_numpy(), rtol=1e-9)


def test_the_shipped_table_is_what_the_script_makes_from_the_shipped_captures():
    fit = _script()
    bench = fit.bench
    device = get_device("h100-sxm")
    rows = bench.load_corpus(["equinox_mlp_grad"])
    modules = {c: parse_hlo(bench.read_module_text(c, "post"), source=f"{c}.post.hlo")
               for c in dict.fromkeys(rows["case"])}
    kernels = bench.measured_kernels(rows, modules)
    suite = fit.suite_table(device)
    made = fit.training_table(suite, rows, modules, kernels, device)
    shipped = pd.read_parquet(TABLE)
    shipped = shipped[shipped["case"].isin(set(made["case"]))].reset_index(drop=True)
    pd.testing.assert_frame_equal(made.reset_index(drop=True), shipped, check_exact=False, rtol=1e-12)


@pytest.mark.slow
def test_the_leave_one_source_out_figures_shipped_and_in_the_readme_are_what_the_script_gives():
    figures = _script().scores()
    saved = json.loads(CALIBRATION.read_text())["leave_one_source_out"]
    for model, k in figures["kernels"].items():
        for key in ("ratio_error", "kendall_tau", "within_2x"):
            assert math.isclose(k[key], saved["kernels_ge_5us"][model][key], rel_tol=1e-9), (model, key)
    for model, p in figures["programs"].items():
        assert math.isclose(p["within_1.25x /kernels"], saved["programs"][model]["within_1.25x /kernels"])
    assert figures["beats_xla_gpu_per_kernel"] and figures["beats_xla_gpu_per_program"]
    readme = (ROOT / "README.md").read_text()
    for model in figures["kernels"]:
        k, p = figures["kernels"][model], figures["programs"][model]
        line = (f"| {k['ratio_error']:.3f} | {k['kendall_tau']:.3f} | {100 * k['within_2x']:.1f} % | "
                f"{100 * p['within_1.25x /kernels']:.1f} % |")
        assert line in readme, line


def test_refitting_is_deterministic_and_a_changed_table_is_refused(tmp_path):
    from xla_costmodel.fit import CalibrationError
    from xla_costmodel.fit._efficiency import EfficiencyModel, refit_efficiency

    data = json.loads(CALIBRATION.read_text())
    shutil.copy(TABLE, tmp_path / TABLE.name)
    (tmp_path / CALIBRATION.name).write_text(json.dumps(data))
    a = refit_efficiency({**data, "_path": str(tmp_path / CALIBRATION.name)}, "h100-sxm")
    table = pd.read_parquet(TABLE)
    b = EfficiencyModel(**data["params"]).fit(table, table["measured_s"].to_numpy())
    np.testing.assert_array_equal(a.predict(table), b.predict(table))
    changed = table.assign(measured_s=table["measured_s"] * 1.01)
    changed.to_parquet(tmp_path / TABLE.name, index=False)
    with pytest.raises(CalibrationError, match="changed since calibration"):
        refit_efficiency({**data, "_path": str(tmp_path / CALIBRATION.name)}, "h100-sxm")


def test_the_efficiency_model_refuses_rows_without_an_analytical_price():
    from xla_costmodel.fit._efficiency import EfficiencyModel

    table = pd.read_parquet(TABLE).head(50)
    with pytest.raises(ValueError, match="base_s"):
        EfficiencyModel().fit(table.drop(columns=["base_s"]), table["measured_s"])
    with pytest.raises(ValueError, match="feature"):
        EfficiencyModel().fit(table[["base_s"]], table["measured_s"])
    with pytest.raises(ValueError, match="positive"):
        EfficiencyModel().fit(table.assign(base_s=0.0), table["measured_s"])


def test_evaluate_names_the_calibration_and_where_it_was_measured():
    from xla_costmodel.front._evaluate import _calibrations_used

    said = _calibrations_used(["xla-gpu", "learned"], get_device("h100-sxm"))
    assert len(said) == 1 and said[0].startswith("learned priced with the shipped calibration ")
    assert said[0].endswith("h100-sxm_learned.json, measured on gpu: NVIDIA H100 80GB HBM3"), said[0]


# ---------------------------------------------------------------- the trees' structural columns

#: What XLA and the libraries name the kernels of each kind in the H100 capture (the profiler's kernel
#: symbols, which nothing here wrote): the reference for `structure_of`'s kind. XLA names a fusion by its
#: emitter (`loop_`, `input_reduce`, `input_concatenate`) or, for a lone instruction, `wrapped_<opcode>`
#: (a wrapped transpose or slice XLA emits as a loop); cuDNN runs some convolutions on CUTLASS kernels.
_SYMBOLS = {"kind_loop": r"^loop_|^wrapped_|^input_concatenate|^fusion", "kind_reduction": r"reduce", "kind_gemm_triton": r"^gemm_fusion",
            "kind_copy": r"transpose|copy", "kind_scatter": r"scatter", "kind_sort_xla": r"^sort",
            "kind_sort_cub": r"cub::", "kind_fft": r"fft", "kind_gemm_cublas": r"gemm",
            "kind_cudnn": r"xmma|cudnn|conv|cutlass"}


def test_the_kind_of_each_corpus_kernel_is_what_the_profiler_named_it():
    from xla_costmodel.fit._efficiency import KINDS

    table = pd.read_parquet(TABLE)
    symbols = pd.read_parquet(SHIPPED / "h100-sxm_corpus.parquet")[["case", "hlo_op", "kernel_symbol"]]
    rows = table.merge(symbols.drop_duplicates(["case", "hlo_op"]), on=["case", "hlo_op"], how="inner")
    kinds = [f"kind_{k}" for k in KINDS]
    assert (rows[kinds].sum(axis=1) <= 1).all()  # one kind per kernel
    for kind, pattern in _SYMBOLS.items():
        sel = rows[rows[kind] > 0]
        assert len(sel) >= 2, kind
        named = sel["kernel_symbol"].str.contains(pattern, case=False, regex=True)
        assert named.all(), (kind, sel.loc[~named, "kernel_symbol"].head(3).tolist())


def test_the_gemm_columns_are_the_configuration_xla_wrote_into_the_module():
    # The tile, block_k, stages and warps of each Triton GEMM are those of its backend config as XLA wrote
    # it (read here from the module text with a regular expression), and the K iterations are K / block_k.
    import re

    table = pd.read_parquet(TABLE)
    gemms = table[(table["kind_gemm_triton"] > 0) & (table["source"] != "suite")]
    assert len(gemms) > 100
    checked = 0
    for case, rows in list(gemms.groupby("case"))[:6]:
        with gzip.open(ROOT / "hlo_fixtures" / "gpu_h100" / f"{case}.post.hlo.gz", "rt") as f:
            text = f.read()
        for _, r in rows.iterrows():
            line = next(ln for ln in text.splitlines() if re.match(rf"\s*(ROOT )?%?{re.escape(r['hlo_op'])} = ", ln))
            stages = re.search(r'"num_stages":"?(\d+)', line)
            warps = re.search(r'"num_warps":"?(\d+)', line)
            assert stages and warps, line[:200]
            assert r["gemm_stages"] == int(stages.group(1)) and r["gemm_warps"] == int(warps.group(1))
            legacy = re.search(r'"block_m":"?(\d+)","block_n":"?(\d+)","block_k":"?(\d+)', line)
            tiles = re.search(r'"output_tiles":\[\{"sizes":\[([^\]]*)\]', line)
            assert legacy or tiles, line[:300]
            if legacy:
                assert (r["gemm_block_m"], r["gemm_block_n"], r["gemm_block_k"]) == tuple(
                    int(g) for g in legacy.groups())
            else:
                sizes = [int(x.strip('"')) for x in tiles.group(1).split(",")]
                assert (r["gemm_block_m"], r["gemm_block_n"]) == tuple(sizes[-2:])
            assert r["gemm_k_iterations"] == math.ceil(r["gemm_k"] / r["gemm_block_k"])
            assert r["gemm_waves"] >= 1 and r["gemm_blocks"] >= r["gemm_waves"]
            checked += 1
    assert checked > 20


def test_a_kind_the_trees_saw_too_few_rows_of_keeps_xla_gpus_price():
    # Fitted without XLA's sort kernels (as when the one library that has them is left out), the sorts keep
    # their analytical price exactly; with them, they get a learned factor.
    from xla_costmodel.fit._efficiency import EfficiencyModel

    table = pd.read_parquet(TABLE)
    sorts = table[table["kind_sort_xla"] > 0]
    assert len(sorts) >= EfficiencyModel().min_samples_leaf
    without = EfficiencyModel().fit(table[table["kind_sort_xla"] == 0], table.loc[table["kind_sort_xla"] == 0,
                                                                                  "measured_s"])
    np.testing.assert_array_equal(without.factor(sorts), 1.0)
    assert not without.supported(sorts).any() and without.supported(table[table["kind_gemm_triton"] > 0]).all()
    # (the shipped table's 2 CUB sorts and 4 cuFFT calls are too few for a leaf too: they keep xla-gpu's price)
    few = table[(table["kind_sort_cub"] > 0) | (table["kind_fft"] > 0)]
    np.testing.assert_array_equal(EfficiencyModel().fit(table, table["measured_s"]).factor(few), 1.0)
    with_ = EfficiencyModel().fit(table, table["measured_s"])
    assert with_.supported(sorts).all() and np.any(with_.factor(sorts) != 1.0)
    # A table of counts only (no kind columns) fits the earlier form: one kind, every row supported.
    counts = table.drop(columns=[c for c in table.columns if c.startswith(("kind_", "gemm_"))])
    assert EfficiencyModel().fit(counts, counts["measured_s"]).supported(counts).all()


def test_write_removes_the_shipped_files_when_the_candidate_does_not_beat_xla_gpu(tmp_path):
    # `--write` at merge time runs unattended: when the rule fails, no stale calibration goes on shipping.
    fit = _script()
    for p in (TABLE, CALIBRATION):
        shutil.copy(p, tmp_path / p.name)
    figures = {"beats_xla_gpu_per_kernel": True, "beats_xla_gpu_per_program": False}
    assert fit.write_calibration(None, None, None, None, None, figures, out=tmp_path) == []
    assert not (tmp_path / TABLE.name).exists() and not (tmp_path / CALIBRATION.name).exists()
    assert TABLE.is_file() and CALIBRATION.is_file()  # the shipped ones untouched


def test_library_calls_priced_from_measured_constants_keep_xla_gpus_price_as_the_user_gets_it():
    # Through `analyze` with the defaults: a cuSolver module's library calls cost what `xla-gpu` says (their
    # price is already fitted to H100 measurements); its other kernels get a learned factor.
    from xla_costmodel.fit._efficiency import MEASURED_KINDS, EfficiencyModel

    assert EfficiencyModel().kept_kinds == MEASURED_KINDS
    table = pd.read_parquet(TABLE)
    case = table.loc[table["kind_solver"] > 0, "case"].iloc[0]
    module = _module(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        learned = pd.DataFrame(analyze(module, device="h100-sxm", model="learned"))
        base = pd.DataFrame(analyze(module, device="h100-sxm", model="xla-gpu"))
    rows = table[table["case"] == case].set_index("hlo_op")
    solver = rows.index[rows["kind_solver"] > 0]
    other = rows.index[(rows[[f"kind_{k}" for k in MEASURED_KINDS]].sum(axis=1) == 0)]
    ratio = (learned.groupby("kernel")["time_s"].first() / base.groupby("kernel")["time_s"].first())
    assert len(solver) and np.allclose(ratio[solver], 1.0, rtol=1e-12)
    assert len(other) and np.any(np.abs(ratio[other] - 1.0) > 1e-3)
    with pytest.raises(ValueError, match="kept_kinds"):
        EfficiencyModel(kept_kinds=("cusolver",)).fit(table, table["measured_s"])


def test_no_kernel_is_priced_below_the_roofline_unless_xla_gpu_is():
    # The factor stops at the roofline's bound (NeuSight's bound on a learned utilization): through
    # `analyze`, each kernel's learned time is at least min(roofline's max(compute, memory), xla-gpu's time);
    # 384 MiB of elementwise traffic is never priced faster than HBM moves it.
    module = _module()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = {m: pd.DataFrame(analyze(module, device="h100-sxm", model=m)).groupby("kernel").first()
               for m in ("learned", "xla-gpu", "roofline")}
    kernels = got["learned"].index[got["learned"]["bound"] != "free"]
    floor = np.minimum(np.maximum(got["roofline"].loc[kernels, "compute_s"], got["roofline"].loc[kernels, "memory_s"]),
                       got["xla-gpu"].loc[kernels, "time_s"])
    assert len(kernels) > 3 and np.all(got["learned"].loc[kernels, "time_s"] >= floor * (1 - 1e-9))
    n = 1 << 25
    big = parse_hlo(f"HloModule m\n\nENTRY e {{\n  a = f32[{n}]{{0}} parameter(0)\n  b = f32[{n}]{{0}} parameter(1)\n"
                    f"  ROOT c = f32[{n}]{{0}} add(a, b)\n}}\n").entry.root
    device = get_device("h100-sxm")
    t = get_model("learned").estimate(big, device).time_s
    assert t >= 3 * 4 * n / device.memory_bandwidth_bytes_per_s
