"""The independent corpus: libraries' own programs, registered with their source and sizes."""

from __future__ import annotations

import dataclasses
import warnings

import jax
import pytest

from xla_costmodel import analyze, corpus
from xla_costmodel.corpus import MissingLibraryError


def test_registry_spans_enough_programs_and_sources():
    table = corpus.program_table()
    assert len(table) >= 40
    assert table["source"].nunique() >= 5
    assert table["program"].is_unique
    for p in corpus.PROGRAMS.values():
        assert 2 <= len(p.size_names) <= 3, p.name
        assert p.source and p.description and p.requires or p.source == "jax", p.name
    assert set(corpus.program_names("optax")) == set(table.loc[table["source"] == "optax", "program"])
    with pytest.raises(ValueError, match="unknown corpus source"):
        corpus.program_names("tensorflow")
    with pytest.raises(ValueError, match="valid names"):
        corpus.get_program("resnet1000")
    with pytest.raises(ValueError, match="has no size 'huge'"):
        corpus.get_program("equinox_mlp_fwd").build("huge")


def test_a_missing_library_names_the_extra(monkeypatch):
    program = dataclasses.replace(corpus.get_program("equinox_mlp_fwd"), requires=("no_such_library_xyz",))
    assert not program.available()
    with pytest.raises(MissingLibraryError, match=r"pip install 'xla_costmodel\[corpus\]'"):
        program.build()


# One program of each source, at its smallest size: it compiles, and analyze finds its kernels.
_ONE_PER_SOURCE = [next(n for n, p in corpus.PROGRAMS.items() if p.source == s) for s in corpus.sources()]


@pytest.mark.parametrize("name", _ONE_PER_SOURCE)
def test_smallest_size_compiles_and_has_kernels(name):
    program = corpus.get_program(name)
    if not program.available():
        pytest.skip(f"{program.source} is not installed")
    fn, args = program.build()
    compiled = jax.jit(fn).lower(*args).compile()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = analyze(compiled.as_text(), device="host", model="roofline")
    assert table.summary()["kernels"] >= 1
    assert jax.tree.leaves(compiled(*args))


def test_builds_are_deterministic():
    program = corpus.get_program("optax_adamw_update")
    if not program.available():
        pytest.skip("optax is not installed")
    texts = [jax.jit(fn).lower(*args).as_text() for fn, args in (program.build(), program.build())]
    assert texts[0] == texts[1]
    a, b = (jax.tree.leaves(program.build()[1]) for _ in range(2))
    assert all((x == y).all() for x, y in zip(a, b))


def _measure_corpus_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "measure_corpus.py"
    spec = importlib.util.spec_from_file_location("measure_corpus", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measure_corpus_writes_rows_with_source_program_and_size(tmp_path, capsys):
    from xla_costmodel.measure import DEFAULT_METHOD, read_dataset

    script = _measure_corpus_script()
    out = tmp_path / "corpus.parquet"
    names = ["jax_scipy_map_coordinates", "jax_ops_segment_sum"]
    assert script.main(["--program", *names, "--size", "small", "--out", str(out), "--no-progress",
                        "--repeats", "8", "--discard", "2"]) == 0
    assert "measured 2 of 2 modules" in capsys.readouterr().out
    df = read_dataset(out)
    assert set(df["program"]) == set(names) and set(df["source"]) == {"jax"} and set(df["size"]) == {"small"}
    assert set(df["case"]) == {f"{n}@small" for n in names}
    assert set(df["kernel_class"]) == {"program"}  # held out: compare never trains on it
    assert set(df["allocator"]) == {DEFAULT_METHOD.allocator} and set(df["n"]) == {6}
    with pytest.raises(SystemExit, match="unknown program"):
        script.main(["--program", "nope", "--out", str(out)])
