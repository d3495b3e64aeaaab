"""The measurement suite, the noise-floor summary, and the `xla-costmodel measure` command."""

from __future__ import annotations


import pandas as pd
import pytest

from xla_costmodel.measure import (
    DATASET_COLUMNS,
    SUITE,
    noise_floor,
    read_dataset,
    run_suite,
    suite_cases,
)
from xla_costmodel.cli import main
from xla_costmodel.cli._measure import DEFAULT_DATASET

ELEMENTWISE_OPS = {"add", "sub", "mul", "div", "exp", "log", "tanh", "rsqrt", "pow"}


def test_suite_covers_the_measurement_kernels():
    names = {k.name for k in SUITE}
    assert {"copy_s1", "copy_s2", "copy_s3", "scale_add_s1", "scale_add_s2", "scale_add_s3"} <= names
    assert {"gather_random", "reduce_row", "reduce_col", "matmul_square", "matmul_skinny", "scatter_add"} <= names
    assert len([n for n in names if n.startswith("transpose_")]) >= 3
    assert len([n for n in names if n.startswith("conv")]) >= 1
    ew = {k.params["op"]: set(k.dtypes) for k in SUITE if k.kernel_class == "elementwise"}
    assert set(ew) == ELEMENTWISE_OPS
    assert all(d == {"float32", "float64", "bfloat16"} for d in ew.values())
    assert {k.kernel_class for k in SUITE} == {"access", "elementwise", "matmul", "conv", "scatter", "launch"}
    for k in SUITE:
        assert list(k.sizes) == sorted(k.sizes) and set(k.quick_sizes) <= set(k.sizes) | set(k.quick_sizes)
    full, quick = suite_cases(), suite_cases(quick=True)
    assert len({c.case_id for c in full}) == len(full)
    assert {c.kernel.name for c in quick} == names  # quick still touches every kernel


def test_suite_filter():
    cases = suite_cases(only=["ew_exp", "matmul"])
    assert {c.kernel.name for c in cases} == {"ew_exp", "matmul_square", "matmul_skinny"}
    with pytest.raises(ValueError, match="no suite kernel matches"):
        suite_cases(only="nope*")


@pytest.fixture(scope="module")
def quick_suite():
    return run_suite(quick=True, progress=False)


def test_quick_suite_runs_every_kernel(quick_suite):
    df = quick_suite
    assert list(df.columns) == list(DATASET_COLUMNS)
    main = df[df["is_main"]]
    assert set(main["kernel"]) == {k.name for k in SUITE}
    assert (main.groupby("case").size() == 1).all()
    assert (df["min_per_run_s"] > 0).all() and (df["n"] == 10).all()
    assert df["suite_run"].nunique() == 1 and (df["source"] == "suite").all()
    assert all(t.strip() for t in df["hlo_text"]) and all("HloModule" in t for t in df["module_text"])
    # Every elementwise kernel ran in the dtype it claims (f64 needs x64 switched on).
    ew = main[main["kernel_class"] == "elementwise"]
    want = {"float32": "f32", "float64": "f64", "bfloat16": "bf16"}
    assert all(want[d] == t for d, t in zip(ew["dtype"], ew["element_type"]))
    # Each elementwise kernel computes its op: the opcode shows up in the fused computation.
    hlo_name = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "exp": "exponential",
                "log": "log", "tanh": "tanh", "rsqrt": "rsqrt", "pow": "power"}
    for kernel, mix in zip(ew["kernel"], ew["opcode_mix"]):
        assert hlo_name[kernel.removeprefix("ew_")] in mix
    # The sweeps start above the launch overhead.
    overhead = df.attrs["launch_overhead_s"]
    assert 0 < overhead < 20e-6
    assert (df["launch_overhead_s"] == overhead).all()
    assert df.attrs["below_overhead"] == []


def test_strided_kernels_read_what_they_claim(quick_suite):
    df = quick_suite
    main = df[df["is_main"]].set_index("kernel")
    n = 1 << 18
    for s in (1, 2, 3):
        row = main.loc[f"copy_s{s}"]
        assert row["out_bytes"] == 4 * n
        assert row["operand_bytes"] == 4 * n * s
    assert main.loc["scale_add_s2", "operand_bytes"] == 4 + 2 * 4 * n * 2


def test_noise_floor_numbers_by_hand():
    def run(tag, times):
        return pd.DataFrame(
            {
                "suite_run": tag,
                "case": ["a/1", "b/1", "c/1"],
                "hlo_op": ["x", "y", "z"],
                "kernel_class": ["access", "access", "matmul"],
                "is_main": True,
                "min_per_run_s": times,
                "median_per_run_s": [t * 1.5 for t in times],
            }
        )

    a = run("r1", [1.0, 2.0, 4.0])
    b = run("r2", [1.1, 2.0, 5.0])
    table = noise_floor(a, b).set_index("kernel_class")
    assert table.loc["access", "cases"] == 2
    assert table.loc["access", "min_diff_median"] == pytest.approx(0.05)  # (0.1 + 0) / 2
    assert table.loc["access", "min_diff_max"] == pytest.approx(0.1)
    assert table.loc["matmul", "min_diff_median"] == pytest.approx(0.25)
    assert table.loc["all", "cases"] == 3
    assert table.loc["all", "spread_median"] == pytest.approx(0.5)
    # One frame holding both runs gives the same table.
    pd.testing.assert_frame_equal(noise_floor(pd.concat([a, b])).set_index("kernel_class"), table)
    with pytest.raises(ValueError, match="exactly two suite runs"):
        noise_floor(a)


# --------------------------------------------------------------------------- CLI


def test_cli_quick_suite_writes_only_when_asked(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["measure", "--quick", "--only", "copy_s1", "launch_empty", "--no-progress"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "launch overhead" in out and "access" in out
    # The full suite saves by default, so a run that does not says so (and how).
    assert "note: nothing saved: --quick writes its rows only with --out PATH" in captured.err
    from xla_costmodel.datasets._store import user_data_dir

    # --quick writes nothing: neither in the user's data directory nor here.
    assert not (user_data_dir() / DEFAULT_DATASET.format(backend="cpu")).exists()
    assert not any(tmp_path.iterdir())

    path = tmp_path / "cal" / "d.parquet"
    assert main(["measure", "--quick", "--only", "copy_s1", "--no-progress", "--out", str(path)]) == 0
    assert main(["measure", "--quick", "--only", "copy_s1", "--no-progress", "--rounds", "2", "--out", str(path)]) == 0
    df = read_dataset(path)
    assert df["suite_run"].nunique() == 2 and set(df["kernel"]) == {"copy_s1"}
    assert sorted(df["n"]) == [10, 20]  # one round of 12 - 2 runs, then two rounds pooled


def test_cli_measures_a_user_program(tmp_path, monkeypatch, capsys):
    prog = tmp_path / "user_prog.py"
    prog.write_text(
        "import jax.numpy as jnp\n"
        "def build():\n"
        "    def user_fn(x):\n"
        "        return jnp.exp(x).sum()\n"
        "    return user_fn, (jnp.ones((256, 256)),)\n"
        "def wrong():\n"
        "    return 3\n"
    )
    out_file = tmp_path / "user.csv"
    assert main(["measure", "--jax", f"{prog}:build", "--repeats", "6", "--discard", "2", "--out", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "jit_user_fn" in out and "min_per_run_us" in out and "min_per_launch_us" in out
    assert "steady allocator" in out
    df = read_dataset(out_file)
    assert (df["source"] == "user").all() and (df["case"] == f"{prog}:build").all()
    assert (df["program"] == "build").all()
    assert df[["allocator", "repeats", "discard"]].drop_duplicates().values.tolist() == [["steady", 6, 2]]

    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["measure", "--jax", "user_prog:build", "--repeats", "4", "--discard", "1"]) == 0
    assert main(["measure", "--jax", "user_prog:wrong"]) == 2
    assert "must return (fn, args)" in capsys.readouterr().err
    assert main(["measure", "--jax", "user_prog:absent"]) == 2
    assert main(["measure", "--jax", "no_such_module_xyz:build"]) == 2
    assert main(["measure", "--jax", "nocolon"]) == 2
    assert main(["measure", "--only", "nothing_matches", "--no-save", "--no-progress"]) == 2
    assert main(["measure", "--jax", "user_prog:build", "--repeats", "2", "--discard", "2"]) == 2
    assert "--discard (2) must be less than --repeats (2)" in capsys.readouterr().err
    assert main(["measure", "--cold", "--quick", "--no-save", "--no-progress"]) == 2


def test_cli_refuses_a_corrupt_dataset(tmp_path, capsys):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    assert main(["measure", "--quick", "--only", "launch_empty", "--no-progress", "--out", str(bad)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "cannot read as parquet" in err
    assert bad.read_bytes() == b"not parquet at all"


def test_cli_usage_errors_exit_2():
    with pytest.raises(SystemExit) as e:
        main(["measure", "--repeats", "many"])
    assert e.value.code == 2
