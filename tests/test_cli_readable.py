"""Readable by default (issue 33, item 8): what the command line prints, checked as a user reads it.

`analyze` printed `1.374390e+11`, `201326592.0` and `executions 1.0`, all 50 kernels unsorted, with ns and µs
mixed; `granularity` spelt its errors the Python way (`tiled=True`).
"""

from __future__ import annotations

import re

import pandas as pd

from conftest import FIXTURES
from xla_costmodel.cli import main

CPU_MODULE = str(FIXTURES / "mlp_grad.post.hlo")
LOWERED = str(FIXTURES / "mlp_grad.pre.hlo")


def _table(out: str) -> list[list[str]]:
    lines = out.split("\n\n")[0].splitlines()
    return [line.split() for line in lines]


def test_analyze_shows_the_slowest_kernels_in_microseconds_with_integer_counts(capsys):
    assert main(["analyze", LOWERED, "--device", "h100-sxm", "--top", "5"]) == 0
    out = capsys.readouterr().out
    header, *rows = _table(out)
    assert {"time_us", "total_us", "compute_us", "memory_us"} <= set(header) and "time_s" not in header
    assert len(rows) == 5 and "the 5 slowest of 71 kernels shown" in out and "µs per launch" in out
    totals = [float(r[header.index("total_us")]) for r in rows]
    assert totals == sorted(totals, reverse=True)
    for r in rows:
        for col in ("executions", "flops", "bytes_accessed"):
            assert re.fullmatch(r"\d+", r[header.index(col)]), (col, r)
    assert not re.search(r"\d\.\d+e[+-]\d", out) and " ns " not in out


def test_analyze_all_shows_every_row_and_json_keeps_seconds(capsys):
    assert main(["analyze", CPU_MODULE, "--device", "host", "--model", "roofline", "--all"]) == 0
    out = capsys.readouterr().out
    assert "slowest" not in out
    assert main(["analyze", CPU_MODULE, "--device", "host", "--model", "roofline", "--csv"]) == 0
    csv = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    assert "time_s" in csv and len(csv) == 27  # machine-readable output keeps every kernel, in seconds


def test_granularity_errors_use_the_command_lines_spelling(capsys):
    assert main(["granularity", CPU_MODULE, "--kernel", "ynn_fusion", "--device", "b200"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert "(--tiled)" in err and "tiled=True" not in err
    assert main(["granularity", CPU_MODULE, "--kernel", "add_reduce_fusion", "--device", "b200",
                 "--model", "roofline"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("error: --model roofline does not price") and "--model xla-gpu" in err


def test_the_demos_figure_is_its_program_beside_the_corpus_each_naming_its_metric():
    """The demo's figure showed the 5,715 corpus kernels, not its program, and its legend's `err 106%` named no
    metric."""
    import numpy as np

    from xla_costmodel.cli._demo_job import scatter_figure

    rng = np.random.default_rng(0)
    program = pd.DataFrame({"measured_s": rng.uniform(3e-7, 3e-6, 27), "predicted_s": rng.uniform(3e-7, 3e-6, 27),
                            "kind": ["fusion"] * 20 + ["dot"] * 7})
    corpus = pd.DataFrame({"measured_s": 10 ** rng.uniform(-7, -2, 90), "predicted_s": 10 ** rng.uniform(-7, -2, 90),
                           "kind": ["optax", "flax", "jax"] * 30})
    fig = scatter_figure(program, corpus, "mlp_grad: its 27 kernels", "beside it, the corpus")
    left, right = fig.axes
    assert left.get_title().startswith("mlp_grad") and "corpus" in right.get_title()
    assert left.get_xlim()[1] <= 1e-5 < right.get_xlim()[1]  # the program on its own decades, not a dot
    for ax in (left, right):
        heading = ax.get_legend().get_title().get_text()
        assert "ratio_error = " in heading and "sk_error = " in heading and "%" not in heading.split("\n")[1]
        entries = [t.get_text() for t in ax.get_legend().get_texts()]
        assert all("ratio_error" in e for e in entries if "(n=" in e)


def test_analyze_says_which_calibration_a_calibrated_model_priced_with(capsys):
    from xla_costmodel.datasets._store import shipped_dir

    assert main(["analyze", CPU_MODULE, "--device", "host", "--model", "fitted", "--top", "3"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: fitted priced with the shipped calibration {shipped_dir() / 'host_fitted.json'}"]
