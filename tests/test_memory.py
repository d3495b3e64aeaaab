"""Memory held in proportion to the work: datasets keep one copy of each repeated text, and the per-process
caches of prepared datasets keep only the last few. (Peak memory of whole commands: scripts/bench_memory.py.)"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from xla_costmodel.features import _prepare
from xla_costmodel.measure import append_dataset, read_dataset

from conftest import ROOT, TEST_CPU

CORPUS = ROOT / "calibration" / "host_cpu_corpus.parquet"


def test_repeated_module_texts_are_one_string_each_and_read_as_written():
    df = read_dataset(CORPUS)
    # The same values as a plain read, row for row (every kernel of a program carries the program's module),
    # read a few rows at a time: all at once, the plain read is the 1.35 GB this test guards against.
    i = 0
    for batch in pq.ParquetFile(CORPUS).iter_batches(batch_size=64, columns=["module_text", "hlo_text"]):
        for row in batch.to_pylist():
            assert (df["module_text"].iat[i], df["hlo_text"].iat[i]) == (row["module_text"], row["hlo_text"])
            i += 1
    assert i == len(df)
    texts = df["module_text"].dropna()
    distinct = set(texts)
    assert len(texts) > 10 * len(distinct)  # the data repeats: the point of sharing
    # ...held once each: as many string objects as distinct texts, not one per row.
    assert len({id(t) for t in texts}) == len(distinct)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_written_dataset_reads_back_with_shared_texts(tmp_path, suffix):
    rows = read_dataset(CORPUS).head(40)
    path = tmp_path / f"d{suffix}"
    append_dataset(rows, path)
    back = read_dataset(path)
    assert list(back["module_text"]) == list(rows["module_text"])
    assert list(back["hlo_text"]) == list(rows["hlo_text"])
    assert len({id(t) for t in back["module_text"]}) == back["module_text"].nunique()


def test_prepared_datasets_cache_keeps_the_last_few(tmp_path):
    rows = read_dataset(ROOT / "calibration" / "host_cpu.parquet").head(5)
    paths = []
    for i in range(_prepare._PREPARED_KEPT + 2):
        paths.append(tmp_path / f"d{i}.parquet")
        append_dataset(rows, paths[-1])
    prepared = [_prepare.prepare_dataset(p, TEST_CPU) for p in paths]
    assert len(_prepare._PREPARED) <= _prepare._PREPARED_KEPT
    assert _prepare.prepare_dataset(paths[-1], TEST_CPU) is prepared[-1]  # the latest are still kept
    assert _prepare.prepare_dataset(paths[0], TEST_CPU) is not prepared[0]  # the first was let go, prepared afresh
    assert len(prepared[0].y) == len(rows)


def test_a_parquet_file_of_many_row_groups_shares_texts_across_them(tmp_path):
    import pyarrow as pa

    rows = read_dataset(CORPUS).head(40)
    path = tmp_path / "groups.parquet"
    pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), path, row_group_size=7)
    assert pq.ParquetFile(path).num_row_groups > 1
    back = read_dataset(path)
    assert list(back["module_text"]) == list(rows["module_text"])
    assert len({id(t) for t in back["module_text"]}) == back["module_text"].nunique()
