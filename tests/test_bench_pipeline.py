"""scripts/bench_pipeline.py: reading XLA's pass-by-pass dumps and putting kernel changes on passes."""

from __future__ import annotations

from conftest import load_script


def test_stages_stop_at_priority_fusion_and_name_their_pass(tmp_path):
    bp = load_script("bench_pipeline")
    names = [
        "module_0000.jit_convert.0000.simplification.after_pipeline-start.before_algsimp.txt",  # another module
        "module_0001.jit_f.0000.optimization.after_pipeline-start.before_dot_decomposer.txt",
        "module_0001.jit_f.0001.simplification.after_algsimp.before_cse.txt",
        "module_0001.jit_f.0002.simplification.after_cse.before_dce.txt",
        "module_0001.jit_f.0003.fusion.after_pipeline-start.before_variadic-op-splitter.txt",
        "module_0001.jit_f.0004.fusion.after_priority-fusion.before_cse.txt",
        "module_0001.jit_f.0005.fusion.after_dce.before_multi_output_fusion.txt",
    ]
    for n in names:
        (tmp_path / n).write_text("")
    stages = bp.stages_before_fusion(tmp_path)
    assert [s for s, _ in stages] == ["optimization (at its start)", "algsimp", "cse", "fusion (at its start)"]
    assert stages[-1][1].name == names[4]


def test_attribution_ranks_passes_by_kernels_moved():
    bp = load_script("bench_pipeline")
    rows = [
        {"deltas": {"cse": -3, "algsimp": 2}, "ours_from_xla_input": 10, "xla_here": 9, "xla_h100": 9},
        {"deltas": {"cse": -1}, "ours_from_xla_input": 5, "xla_here": 5, "xla_h100": 4},
    ]
    table = bp.attribution_table(rows)
    assert table[0] == {"pass": "cse", "modules changed": 2, "kernels moved (sum |d|)": 4, "net kernels (sum d)": -4}
    by_pass = {r["pass"]: r for r in table}
    assert by_pass["algsimp"]["net kernels (sum d)"] == 2
    assert by_pass["fusion and after (XLA here vs ours from its input)"]["net kernels (sum d)"] == -1
    assert by_pass["jax 0.10.2 here / 0.11.2 on the H100"]["modules changed"] == 1


def test_within_ten_percent_counts_exactly_ten_percent_off():
    bp = load_script("bench_pipeline")
    assert bp.within(33, 30) and bp.within(27, 30)  # 33 / 30 - 1 is 0.10000000000000009 as a float
    assert not bp.within(34, 30) and not bp.within(26, 30)
    assert not bp.within(0, 0)
