"""The README's tour runs as written (issue 26: one of its lines raised `IndexError`).

The tour's code block is taken from README.md and run, statement by
statement, in a fresh Python process from the repository root, as a reader
would paste it. Only the data it scores is smaller: its `compare` lines read
the user's data directory first (`datasets._store.find_data_file`), so the test
puts there the suite and two sources of the corpus, cut from the shipped
files, instead of letting them score 5,800 corpus kernels (minutes).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow

#: Corpus sources kept for the tour's `compare` lines: the two smallest.
_SOURCES = ("dm-pix", "numpyro")
#: This project's programs kept (their kernels, fused and unfused).
_PROGRAMS = ("mlp_grad", "layernorm_softmax")


def tour_code() -> str:
    """The Python block under "## A tour" in README.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^## A tour\n+```python\n(.*?)^```", text, re.S | re.M)
    assert found, "README.md has no ```python block under '## A tour'"
    return found.group(1)


def test_tour_block_is_found_and_parses():
    code = tour_code()
    statements = ast.parse(code).body
    assert len(statements) > 20
    assert any("xc.granularity(" in ast.get_source_segment(code, s) for s in statements)


def _small_data(folder) -> None:
    """The suite, two corpus sources and two of this project's programs, as the user's data files."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    shipped = ROOT / "calibration"
    pq.write_table(pq.read_table(shipped / "host_cpu.parquet"), folder / "host_cpu.parquet")
    def read(path, **kwargs):
        # The module texts read dictionary-encoded (one per program, not one per kernel row: 1.35 GB for the
        # corpus otherwise), and written back as plain text once filtered.
        texts = ["module_text", "hlo_text"]
        table = pq.read_table(path, read_dictionary=texts, **kwargs)
        for name in texts:
            table = table.set_column(table.schema.get_field_index(name), name, pc.cast(table[name], pa.large_string()))
        return table

    corpus = read(shipped / "host_cpu_corpus.parquet", filters=[("source", "in", list(_SOURCES))])
    assert corpus.num_rows > 0
    pq.write_table(corpus, folder / "host_cpu_corpus.parquet")
    programs = read(shipped / "host_cpu_programs.parquet",
                    filters=[("kernel", "in", list(_PROGRAMS)), ("kernel_class", "in", ["program", "program-unfused"])])
    pq.write_table(programs, folder / "host_cpu_programs.parquet")


_RUNNER = textwrap.dedent('''
    import ast, sys, traceback
    code = sys.stdin.read()
    scope = {"__name__": "__main__"}
    for node in ast.parse(code).body:
        line = ast.get_source_segment(code, node).splitlines()[0]
        try:
            exec(compile(ast.Module([node], []), "README tour", "exec"), scope)
        except Exception:
            print(f"TOUR FAILED at: {line}", file=sys.stderr)
            traceback.print_exc()
            sys.exit(1)
        print(f"TOUR OK: {line}", flush=True)
''')


def test_every_line_of_the_readme_tour_runs(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _small_data(data)
    env = {**os.environ, "XLA_COSTMODEL_DATA_DIR": str(data), "MPLBACKEND": "Agg", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = tour_code()
    proc = subprocess.run([sys.executable, "-c", _RUNNER], input=code, cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ran = [ln for ln in proc.stdout.splitlines() if ln.startswith("TOUR OK: ")]
    assert len(ran) == len(ast.parse(code).body)
