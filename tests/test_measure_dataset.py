"""The calibration dataset: atomic appends, validation, and the committed host dataset."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from xla_costmodel.measure import DATASET_COLUMNS, SCHEMA, DatasetError, append_dataset, read_dataset
from xla_costmodel.measure import _dataset

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "calibration" / "host_cpu.parquet"


def _rows(n: int, tag: str) -> pd.DataFrame:
    rows = []
    for i in range(n):
        row = {c: "" for c, kind in DATASET_COLUMNS.items() if kind == "str"}
        row.update(
            schema=SCHEMA,
            suite_run=tag,
            case=f"k/float32/{i}",
            kernel="k",
            kernel_class="access",
            hlo_op=f"op.{i}",
            fusion_kind=None,
            hlo_text=f"%op.{i} = f32[4]{{0}} copy(%p)",
            device="cpu: test",
            jax_version="0.10.2",
            timestamp="2026-01-01T00:00:00+00:00",
            size=str(i),
            is_main=True,
            allocator="steady",
            statistic="min",
            repeats=7,
            discard=4,
            warmup_calls=1,
            rounds=1,
            n=3,
            min_per_run_s=1e-6 * (i + 1),
            median_per_run_s=2e-6 * (i + 1),
            min_per_launch_s=1e-6 * (i + 1),
            samples_per_run_s=[1e-6 * (i + 1), 2e-6 * (i + 1), 3e-6 * (i + 1)],
            launches=1.0,
            wall_min_per_run_s=1e-5,
            launch_overhead_s=math.nan,
            out_elements=4,
            out_bytes=16,
            operand_bytes=16,
            n_operands=1,
            n_fused_ops=1,
        )
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("name", ["d.parquet", "d.csv", "d.csv.gz"])
def test_append_creates_then_appends_without_losing_rows(tmp_path, name):
    path = tmp_path / "sub" / name
    assert append_dataset(_rows(3, "a"), path) == 3
    first = read_dataset(path)
    assert append_dataset(_rows(2, "b"), path) == 5
    both = read_dataset(path)
    assert list(both["suite_run"]) == ["a"] * 3 + ["b"] * 2
    # The earlier rows come back exactly as they were.
    pd.testing.assert_frame_equal(both.iloc[:3].reset_index(drop=True), first, check_dtype=False)
    assert both["samples_per_run_s"].iloc[4] == [2e-6, 4e-6, 6e-6]
    assert both["fusion_kind"].isna().all()
    assert list(both.columns[: len(DATASET_COLUMNS)]) == list(DATASET_COLUMNS)
    assert [p.name for p in path.parent.iterdir()] == [name]  # no temporary files left


@pytest.mark.parametrize("name", ["d.parquet", "d.csv"])
def test_corrupt_file_is_refused_and_left_alone(tmp_path, name):
    path = tmp_path / name
    append_dataset(_rows(2, "a"), path)
    data = path.read_bytes()
    damaged = data[: len(data) // 2] + b"\x00garbage\xff" if name.endswith(".parquet") else b"\x00\x01\x02 not,a\ncsv"
    path.write_bytes(damaged)
    with pytest.raises(DatasetError) as e:
        append_dataset(_rows(1, "b"), path)
    assert str(path) in str(e.value)
    assert path.read_bytes() == damaged
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_foreign_files_are_refused(tmp_path):
    other = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).to_parquet(other)
    before = other.read_bytes()
    with pytest.raises(DatasetError, match="not an xla_costmodel calibration dataset .missing columns: schema"):
        append_dataset(_rows(1, "b"), other)
    assert other.read_bytes() == before

    future = tmp_path / "future.csv"
    df = _rows(1, "a")
    df["schema"] = "xla_costmodel.calibration/99"
    df["samples_per_run_s"] = [json.dumps(v) for v in df["samples_per_run_s"]]
    df.to_csv(future, index=False)
    with pytest.raises(DatasetError, match="calibration/99"):
        read_dataset(future)

    with pytest.raises(DatasetError, match="unknown dataset format"):
        append_dataset(_rows(1, "a"), tmp_path / "d.xlsx")
    with pytest.raises(DatasetError, match="no such file"):
        read_dataset(tmp_path / "absent.parquet")


def test_failed_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "d.parquet"
    append_dataset(_rows(2, "a"), path)
    before = path.read_bytes()

    def half_write(df, p, fmt):
        Path(p).write_bytes(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(_dataset, "_write", half_write)
    with pytest.raises(OSError, match="disk full"):
        append_dataset(_rows(5, "b"), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["d.parquet"]


def test_rows_missing_columns_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="rows lack dataset columns: hlo_text"):
        append_dataset(_rows(1, "a").drop(columns=["hlo_text"]), tmp_path / "d.parquet")
    assert not (tmp_path / "d.parquet").exists()


# --------------------------------------------------------------------------- the committed dataset


@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed host dataset")
def test_committed_host_dataset_is_valid():
    df = read_dataset(COMMITTED)
    assert set(df["schema"]) == {SCHEMA}
    assert set(df["source"]) == {"suite"}
    assert df["suite_run"].nunique() >= 2  # the two runs behind the noise floor
    assert {"access", "elementwise", "matmul", "conv", "scatter", "launch"} <= set(df["kernel_class"])
    assert {"float32", "float64", "bfloat16"} <= set(df["dtype"])
    assert (df["min_per_run_s"] > 0).all() and (df["min_per_run_s"] <= df["median_per_run_s"]).all()
    assert all(len(s) == n for s, n in zip(df["samples_per_run_s"], df["n"]))
    # Every case has exactly one main kernel per run.
    assert (df[df["is_main"]].groupby(["suite_run", "case"]).size() == 1).all()
    # The f64 cases really ran in f64, the bf16 ones in bf16.
    main = df[df["is_main"] & (df["kernel_class"] == "elementwise")]
    assert set(main.loc[main["dtype"] == "float64", "element_type"]) == {"f64"}
    assert set(main.loc[main["dtype"] == "bfloat16", "element_type"]) == {"bf16"}
    # The kernel's HLO text names it; the module text is valid HLO for XLA's own parser.
    assert all(t.lstrip("%ROOT ").startswith(op) or f"%{op} " in t for t, op in zip(df["hlo_text"], df["hlo_op"]))
    # XLA's own parser (jaxlib) accepts the stored module text, and the measured
    # instruction is one of the module's instructions by XLA's account too.
    hlo = pytest.importorskip("jaxlib._hlo")
    for _, g in df.drop_duplicates(["hlo_module", "hlo_op"]).groupby("hlo_module").head(1).head(12).iterrows():
        module = hlo.hlo_module_from_text(g["module_text"])
        names = {i.name for c in module.computations() for i in c.instructions()}
        assert g["hlo_op"] in names


# --------------------------------------------------------------------------- schema 1 files


def _v1_rows(n: int) -> pd.DataFrame:
    """Rows as schema 1 wrote them: `min_s` & co., an integer `size`, no methodology columns."""
    df = _rows(n, "old").drop(columns=["allocator", "statistic", "repeats", "discard", "warmup_calls", "rounds",
                                       "program", "min_per_launch_s"])
    df = df.rename(columns={"min_per_run_s": "min_s", "median_per_run_s": "median_s",
                            "samples_per_run_s": "samples_s", "wall_min_per_run_s": "wall_min_s"})
    df["schema"] = _dataset.SCHEMA_V1
    df["size"] = list(range(n))
    df["kernel_class"] = ["program"] * (n - 1) + ["access"]
    df["kernel"] = "mlp"
    df["launches"] = [2.0] + [1.0] * (n - 1)
    df["samples_s"] = [[1e-6 * (i + 1)] * 26 for i in range(n)]
    df["n"] = 26
    df["params"] = [json.dumps({"rounds": 3, "repeats": 30, "discard": 4})] + ["{}"] * (n - 1)
    return df


@pytest.mark.parametrize("name", ["old.parquet", "old.csv"])
def test_schema_1_files_are_migrated_on_read_and_left_untouched(tmp_path, name):
    path = tmp_path / name
    old = _v1_rows(3)
    if name.endswith(".csv"):
        old.assign(samples_s=[json.dumps(v) for v in old["samples_s"]]).to_csv(path, index=False)
    else:
        old.to_parquet(path, index=False)
    before = path.read_bytes()
    df = read_dataset(path)
    assert path.read_bytes() == before
    assert set(df["schema"]) == {SCHEMA}
    assert list(df.columns[: len(DATASET_COLUMNS)]) == list(DATASET_COLUMNS)
    # Same values under the names that say their unit; per launch divides by the launches.
    np.testing.assert_allclose(df["min_per_run_s"], old["min_s"])
    np.testing.assert_allclose(df["min_per_launch_s"], old["min_s"] / old["launches"])
    assert df["samples_per_run_s"].iloc[1] == old["samples_s"].iloc[1]
    assert list(df["size"]) == ["0", "1", "2"]
    assert list(df["program"].fillna("")) == ["mlp", "mlp", ""]
    # Methodology: what params recorded, else the mode whose kept runs divide the sample count (26 = 30 - 4).
    assert list(zip(df["repeats"], df["discard"], df["rounds"])) == [(30, 4, 3), (30, 4, 1), (30, 4, 1)]
    assert set(df["allocator"]) == {"steady"}

    # Appending writes the whole file in schema 2, the old rows kept.
    assert append_dataset(_rows(1, "new"), path) == 4
    both = read_dataset(path)
    assert set(both["schema"]) == {SCHEMA} and list(both["suite_run"]) == ["old"] * 3 + ["new"]
    np.testing.assert_allclose(both["min_per_run_s"].iloc[:3], old["min_s"])


def test_per_launch_divides_by_launches_and_never_by_less_than_one():
    assert _dataset.per_launch_s(6.0, 3) == 2.0
    np.testing.assert_allclose(_dataset.per_launch_s(np.array([6.0, 6.0, 6.0]), np.array([2.0, 0.0, np.nan])),
                               [3.0, 6.0, 6.0])
