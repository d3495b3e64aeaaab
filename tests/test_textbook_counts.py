"""One count per instruction (issue "A user's day", item 10): where XLA's cost analysis cannot count a
call (a TopK custom call: flops -1, bytes -1) and `analyze` prices it with textbook counts, the table
says so, and its counts still add up to jaxlib's own `Compiled.cost_analysis()` (the reference)."""

from __future__ import annotations

import json
import warnings

import jax
import jax.numpy as jnp
import pandas as pd
import pytest

import xla_costmodel as xc
from xla_costmodel.analysis import CostAnalysisWarning
from xla_costmodel.cli import main

KEYS = {"flops": "flops", "transcendentals": "transcendentals", "bytes_accessed": "bytes accessed"}


def _program(x, w):
    values, indices = jax.lax.top_k(x @ w, 8)
    return values.sum() + indices.sum()


@pytest.fixture(scope="module")
def compiled():
    x, w = jnp.ones((32, 128)), jnp.ones((128, 256))
    compiled = jax.jit(_program).lower(x, w).compile()
    xla = compiled.cost_analysis()
    xla = xla[0] if isinstance(xla, list) else xla
    module = xc.parse_hlo(compiled.as_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = xc.analyze(module, device="host", model="roofline")
    return module, table, xla


def test_the_topk_row_says_its_counts_are_textbook_and_gives_xlas(compiled):
    module, table, _ = compiled
    topk = [i.name for _, i in module.instructions()
            if i.opcode == "custom-call" and i.attribute("custom_call_target", "") == "TopK"]
    assert len(topk) == 1
    row = table[table["kernel"] == topk[0]].iloc[0]
    assert row["priced"] and row["flops"] > 0 and row["bytes_accessed"] > 0  # the model prices the call
    assert table.xla_counts == {topk[0]: {"flops": -1.0, "transcendentals": 0.0, "bytes_accessed": -1.0}}
    assert "textbook counts of the custom call TopK" in row["note"] and "flops -1, bytes -1" in row["note"]
    # Every other row is XLA's own count and says nothing of the kind.
    assert not table.loc[table["kernel"] != topk[0], "note"].str.contains("textbook").any()
    s = table.summary()
    assert s.textbook_counts == (topk[0],) and "textbook counts" in str(s)


def test_counts_add_up_to_jaxlibs_cost_analysis(compiled):
    _, table, xla = compiled
    as_xla = table.counts_as_xla()
    for ours, theirs in KEYS.items():
        # The program has no loop or branch: XLA composes the entry's instructions by a plain sum.
        assert as_xla[ours].sum() == pytest.approx(float(xla.get(theirs, 0.0)), rel=0, abs=1e-6), ours
    # The table's own columns differ exactly by the TopK row: its textbook counts instead of XLA's -1.
    row = table[table["kernel"].isin(list(table.xla_counts))]
    assert table["flops"].sum() == pytest.approx(float(xla["flops"]) + 1 + row["flops"].sum())
    assert table["bytes_accessed"].sum() == pytest.approx(float(xla["bytes accessed"]) + 1 + row["bytes_accessed"].sum())
    with pytest.warns(CostAnalysisWarning, match="custom-call:TopK"):  # XLA's own -1, said as such
        assert xc.module_cost(compiled[0])["flops"] == float(xla["flops"])


def test_tables_without_such_calls_have_no_textbook_rows():
    module = xc.from_jax(lambda x: jnp.tanh(x).sum(), jnp.ones((64, 64)))
    table = xc.analyze(module, device="host", model="roofline")
    assert table.xla_counts == {} and table.summary().textbook_counts == ()
    pd.testing.assert_frame_equal(table.counts_as_xla(),
                                  pd.DataFrame(table)[["computation", "kernel", "flops", "transcendentals",
                                                       "bytes_accessed"]])


def test_cli_analyze_says_so(compiled, tmp_path, capsys):
    module, _, _ = compiled
    path = tmp_path / "topk.hlo"
    path.write_text(module.to_text())
    assert main(["analyze", str(path), "--device", "host", "--model", "roofline"]) == 0
    captured = capsys.readouterr()
    assert "textbook counts" in captured.out + captured.err
    assert main(["analyze", str(path), "--device", "host", "--model", "roofline", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["totals"]["kernels_with_textbook_counts"]) == 1
