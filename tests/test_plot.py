"""Figures of `xla_costmodel.plot`, inspected through their artists (Agg backend, no images)."""

from __future__ import annotations

import math
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PathCollection, PolyCollection  # noqa: E402

from xla_costmodel import get_device, plot  # noqa: E402

# Worked by hand: ratios pred/meas are 2, 1/2, 1, 4.
#   |ln r| = ln2, ln2, 0, 2 ln2 -> mean ln2 -> geo-mean relative error e^ln2 - 1 = 100 %
#   |p - m| / m = 1, 1/2, 0 (floored at 1e-6), 3 -> Stevens & Klöckner's (1.5e-6)^(1/4) = 3.5 %
#   within 2x: 3 of 4; ranks of pred: 2, 1, 3, 4 -> one discordant pair of 6 -> Kendall tau (5 - 1) / 6 = 2/3
HAND_MEASURED = np.array([1e-6, 2e-6, 4e-6, 8e-6])
HAND_PREDICTED = np.array([2e-6, 1e-6, 4e-6, 32e-6])


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def by_gid(ax, gid):
    found = ax.findobj(lambda a: a.get_gid() == gid)  # the legend's heading is inside the legend
    assert len(found) == 1, f"expected one artist with gid {gid!r}, found {len(found)}"
    return found[0]


def synthetic(n=120, seed=0):
    rng = np.random.default_rng(seed)
    measured = 10 ** rng.uniform(-6, -3, n)
    predicted = measured * np.exp(rng.normal(0, 0.4, n))
    kind = rng.choice(["kLoop", "kInput", "kCustom"], n)
    return measured, predicted, kind


# ---------------------------------------------------------------------------
# predicted_vs_measured


def test_scatter_has_identity_band_one_collection_per_kind_and_log_axes():
    measured, predicted, kind = synthetic()
    ax = plot.predicted_vs_measured(measured, predicted, kind, title="synthetic")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlim() == ax.get_ylim()
    lo, hi = ax.get_xlim()
    # Whole decades around all the data.
    assert lo <= min(measured.min(), predicted.min()) < 10 * lo
    assert hi / 10 < max(measured.max(), predicted.max()) <= hi
    assert math.log10(lo) == pytest.approx(round(math.log10(lo))) and math.log10(hi) == pytest.approx(round(math.log10(hi)))
    assert ax.get_aspect() == 1.0
    assert ax.get_title() == "synthetic"

    line = by_gid(ax, "identity")
    np.testing.assert_allclose(line.get_xdata(), line.get_ydata())
    np.testing.assert_allclose(line.get_xdata(), [lo, hi])

    band = by_gid(ax, "band_2x")
    assert isinstance(band, PolyCollection)
    verts = band.get_paths()[0].vertices
    ratios = verts[:, 1] / verts[:, 0]
    assert ratios.min() == pytest.approx(0.5) and ratios.max() == pytest.approx(2.0)
    assert verts[:, 0].min() == pytest.approx(lo) and verts[:, 0].max() == pytest.approx(hi)

    points = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert sorted(c.get_gid() for c in points) == ["points:kCustom", "points:kInput", "points:kLoop"]
    for c in points:
        k = c.get_gid().split(":", 1)[1]
        sel = kind == k
        np.testing.assert_allclose(c.get_offsets(), np.column_stack([measured[sel], predicted[sel]]))
    assert len({tuple(c.get_facecolor()[0]) for c in points}) == 3
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith(f"kLoop (n={int((kind == 'kLoop').sum())}") for t in legend)


def test_scatter_annotation_is_numerically_right_on_hand_example():
    ax = plot.predicted_vs_measured(HAND_MEASURED, HAND_PREDICTED, ["a", "b", "a", "b"])
    text = by_gid(ax, "metrics").get_text()
    assert "N = 4" in text
    assert "ratio_error = 1.000" in text  # a fraction, as compare's tables write it
    assert "sk_error = 0.035" in text
    assert "within 2×: 75.0%" in text
    assert "Kendall τ = 0.667" in text
    assert "median bias = ×1.41" in text  # median of ln r = (0 + ln2) / 2
    # Per-kind error in the legend, named: kind a has ratios 2 and 1 -> e^(ln2/2) - 1 = 0.41.
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "a (n=2, ratio_error 0.41)" in legend


def test_scatter_annotation_of_a_perfect_prediction():
    ax = plot.predicted_vs_measured([1e-6, 3e-6, 2e-5], [1e-6, 3e-6, 2e-5])
    text = by_gid(ax, "metrics").get_text()
    assert "ratio_error = 0.000" in text and "within 2×: 100.0%" in text and "Kendall τ = 1.000" in text


def test_scatter_leaves_out_times_that_cannot_be_on_log_axes():
    ax = plot.predicted_vs_measured([1e-6, 0.0, 2e-6, float("nan")], [1e-6, 1e-6, -1.0, 3e-6])
    text = by_gid(ax, "metrics").get_text()
    assert "N = 1 (3 dropped" in text
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert points.get_gid() == "points:all" and len(points.get_offsets()) == 1


def test_scatter_draws_on_the_given_axes_and_checks_lengths():
    fig, (a, b) = plt.subplots(1, 2)
    assert plot.predicted_vs_measured([1e-5, 2e-5], [2e-5, 2e-5], ax=b) is b
    assert not a.collections
    with pytest.raises(ValueError, match="measured has 2 values but predicted has 3"):
        plot.predicted_vs_measured([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="kind has 1 values"):
        plot.predicted_vs_measured([1, 2], [1, 2], kind=["x"])


# ---------------------------------------------------------------------------
# roofline


def kernel_table():
    return pd.DataFrame({
        "kernel": ["dot", "add", "copy", "param", "tiny"],
        "flops": [2e9, 1e6, 0.0, 0.0, 10.0],
        "bytes_accessed": [1e7, 1.2e7, 8e6, 0.0, 12.0],
        "time_s": [1e-4, 4e-6, 3e-6, 0.0, 1e-6],
        "bound": ["compute", "memory", "memory", "free", "launch"],
    })


def test_roofline_roof_is_min_of_peak_and_bandwidth_times_intensity():
    dev = get_device("h100-sxm")
    ax = plot.roofline(kernel_table(), dev)
    # H100 SXM: 132 SMs × 128 FP32 units × 2 flops × 1.98 GHz; 3.35232 TB/s.
    peak = 2 * 1.98e9 * 128 * 132
    bw = 3.35232e12
    roof = by_gid(ax, "roof")
    x, y = np.asarray(roof.get_xdata()), np.asarray(roof.get_ydata())
    np.testing.assert_allclose(y, np.minimum(peak, bw * x), rtol=1e-12)
    ridge = by_gid(ax, "ridge")
    assert ridge.get_xdata()[0] == pytest.approx(peak / bw)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    # bf16 tensor cores (989 TFLOP/s dense) are a dashed ceiling above the FP32 roof.
    ceilings = [a for a in ax.get_lines() if str(a.get_gid()).startswith("ceiling:")]
    assert any("bf16" in c.get_gid() and max(c.get_ydata()) == pytest.approx(dev.peak_matmul_flops_per_s["bf16"])
               for c in ceilings)


def test_roofline_places_kernels_by_intensity_and_flops_per_second():
    ax = plot.roofline(kernel_table(), "h100-sxm")
    compute = by_gid(ax, "kernels:compute")
    np.testing.assert_allclose(compute.get_offsets(), [[200.0, 2e13]])
    memory = by_gid(ax, "kernels:memory")  # the copy has no FLOPs: left out
    np.testing.assert_allclose(memory.get_offsets(), [[1e6 / 1.2e7, 2.5e11]])
    np.testing.assert_allclose(by_gid(ax, "kernels:launch").get_offsets(), [[10 / 12, 1e7]])
    assert "1 kernel(s) without FLOPs" in ax.get_title()  # the copy; the free parameter is not counted


def test_roofline_prefers_measured_time_and_names_missing_columns():
    df = kernel_table().assign(measured_s=[2e-4, 8e-6, 3e-6, 0.0, 2e-6])
    ax = plot.roofline(df, "h100-sxm", hue=None)
    np.testing.assert_allclose(by_gid(ax, "kernels:all").get_offsets()[0], [200.0, 1e13])
    assert "measured" in ax.get_ylabel()
    with pytest.raises(KeyError, match="flops"):
        plot.roofline(pd.DataFrame({"time_s": [1.0]}), "h100-sxm")


def test_roofline_of_an_analyze_table():
    import jax.numpy as jnp

    from xla_costmodel import analyze, from_jax

    def f(a, b):
        return jnp.tanh(a @ b).sum(axis=0)

    module = from_jax(f, jnp.ones((64, 128)), jnp.ones((128, 32)), optimized=False)
    table = analyze(module, device="h100-sxm", model="xla-gpu")
    ax = plot.roofline(table, "h100-sxm")
    placed = sum(len(c.get_offsets()) for c in ax.collections if str(c.get_gid()).startswith("kernels:"))
    with_flops = table[(table["bound"] != "free") & (table["flops"] > 0) & (table["bytes_accessed"] > 0)]
    assert placed == len(with_flops) >= 2
    assert "xla-gpu" in ax.get_title()


# ---------------------------------------------------------------------------
# error_by_model, fusion_savings


def test_error_by_model_one_bar_per_model_as_the_tables_write_it():
    """Errors were percentages in figures and fractions in tables (issue 33): now fractions in both."""
    df = pd.DataFrame({"ratio_error": [1.5, 0.25], "kendall_tau": [0.5, 0.9], "within_2x": [0.5, 0.75]},
                      index=pd.Index(["roofline", "fitted"], name="model"))
    ax = plot.error_by_model(df)
    heights = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
    assert heights == {"roofline": [pytest.approx(1.5)], "fitted": [pytest.approx(0.25)]}
    assert ax.get_ylabel() == "ratio_error"
    labels = [t.get_text() for t in ax.texts]
    assert "1.5" in labels and "0.25" in labels
    share = plot.error_by_model(df, metric="within_2x")  # a share stays a percentage, and says so
    assert share.get_ylabel() == "within_2x (%)" and "75%" in [t.get_text() for t in share.texts]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["roofline", "fitted"]


def test_error_by_model_grouped_by_kernel_class():
    df = pd.DataFrame({
        "model": ["roofline", "fitted", "roofline", "fitted"],
        "kernel_class": ["matmul", "matmul", "elementwise", "elementwise"],
        "kendall_tau": [0.4, 0.8, 0.6, 0.9],
    })
    ax = plot.error_by_model(df, metric="kendall_tau")
    heights = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
    np.testing.assert_allclose(heights["roofline"], [0.4, 0.6])
    np.testing.assert_allclose(heights["fitted"], [0.8, 0.9])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["matmul", "elementwise"]
    with pytest.raises(KeyError, match="no error metric"):
        plot.error_by_model(pd.DataFrame({"model": ["a"], "x": [1.0]}))


def test_fusion_savings_bars_and_predicted_time_after_each_step():
    steps = pd.DataFrame({
        "step": [1, 2, 3],
        "producer": ["exp.1", "add.2", "mul.3"],
        "consumers": [("add.2",), ("mul.3",), ("reduce.4",)],
        "priority_s": [5e-6, 3e-6, -1e-6],
        "time_unfused_s": [8e-6, 6e-6, 2e-6],
        "time_fused_s": [3e-6, 3e-6, 3e-6],
        "reason": ["", "", ""],
    })
    ax = plot.fusion_savings(steps, total_s=20e-6)
    bars = [p for p in ax.patches if p.get_gid() == "savings"]
    np.testing.assert_allclose([p.get_height() for p in bars], [5e-6, 3e-6, -1e-6])
    assert bars[2].get_facecolor() != bars[0].get_facecolor()  # a step that costs time stands out
    line = by_gid(ax.cumulative_ax, "cumulative")
    np.testing.assert_allclose(line.get_ydata(), [20e-6, 15e-6, 12e-6, 13e-6])
    assert "7 µs saved by priority" in ax.get_title()
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "1: exp.1"

    ax2 = plot.fusion_savings(steps)
    np.testing.assert_allclose(by_gid(ax2.cumulative_ax, "cumulative").get_ydata(), [5e-6, 8e-6, 7e-6])


def test_fusion_savings_leaves_out_unpriced_steps_and_marks_the_repriced_time():
    steps = pd.DataFrame({
        "step": [1, 2, 3],
        "producer": ["exp.1", "constant.2", "add.3"],
        "priority_s": [4e-6, float("-inf"), 1e-6],
    })
    ax = plot.fusion_savings(steps, total_s=10e-6, after_s=6e-6)
    bars = [p for p in ax.patches if p.get_gid() == "savings"]
    np.testing.assert_allclose([p.get_height() for p in bars], [4e-6, 1e-6])
    np.testing.assert_allclose(by_gid(ax.cumulative_ax, "cumulative").get_ydata(), [10e-6, 6e-6, 5e-6])
    np.testing.assert_allclose(by_gid(ax.cumulative_ax, "after").get_ydata(), [6e-6, 6e-6])
    assert "1 step without a finite priority" in ax.get_title()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1: exp.1", "3: add.3"]


def _extent(artist, renderer):
    return artist.get_window_extent(renderer)


@pytest.mark.parametrize("n_kinds", [3, 25])
def test_scatter_summary_and_legend_hide_no_point_and_leave_the_width_to_the_plot(n_kinds):
    # Points in every corner: no place inside the axes is free for a box.
    rng = np.random.default_rng(1)
    measured = np.r_[10 ** rng.uniform(-6, -3, 300), [1e-6, 1e-6, 9e-4, 9e-4]]
    predicted = np.r_[measured[:300] * np.exp(rng.normal(0, 1.0, 300)), [9e-4, 1e-6, 1e-6, 9e-4]]
    kind = np.array([f"program_{i % n_kinds:02d}" for i in range(len(measured))])
    fig, ax = plt.subplots(figsize=(6, 8), layout="constrained")
    plot.predicted_vs_measured(measured, predicted, kind, ax=ax)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = _extent(ax, renderer)
    legend = _extent(by_gid(ax, "legend"), renderer)
    # Below the axes (their tick labels too), within their width: it covers no point and takes no
    # width from the plot.
    assert legend.y1 <= box.y0 - 10
    assert legend.x0 >= box.x0 - 2 and legend.x1 <= box.x1 + 2
    assert legend.x1 - legend.x0 <= 1.01 * (box.x1 - box.x0)
    # The summary heads the legend.
    metrics_box = _extent(by_gid(ax, "metrics"), renderer)
    assert legend.y0 <= metrics_box.y0 and metrics_box.y1 <= legend.y1


def test_many_kinds_get_distinct_colour_and_marker_pairs():
    kinds = [f"p{i:02d}" for i in range(25)]
    measured = np.repeat(1e-5, 25) * np.arange(1, 26)
    ax = plot.predicted_vs_measured(measured, measured * 1.5, kinds)
    styles = set()
    for c in ax.collections:
        if str(c.get_gid()).startswith("points:"):
            marker = c.get_paths()[0].vertices.round(3).tobytes()
            styles.add((tuple(np.round(c.get_facecolor()[0], 3)), marker))
    assert len(styles) == 25


def test_scatter_highlights_the_users_program():
    measured, predicted, _ = synthetic(60)
    kind = np.array(["zoo_a"] * 20 + ["zoo_b"] * 20 + ["mine"] * 20)
    ax = plot.predicted_vs_measured(measured, predicted, kind, highlight="mine")
    mine, other = by_gid(ax, "points:mine"), by_gid(ax, "points:zoo_a")
    assert mine.get_zorder() > other.get_zorder()
    assert mine.get_sizes()[0] > other.get_sizes()[0]
    assert tuple(mine.get_edgecolor()[0][:3]) == (0.0, 0.0, 0.0)
    assert mine.get_alpha() == 1.0 and other.get_alpha() < 0.8
    assert [t.get_text() for t in ax.get_legend().get_texts()][2].startswith("mine (n=20")  # first after band, line
    with pytest.raises(ValueError, match=r"highlight: no kernel of kind 'yours'; kinds: mine, zoo_a, zoo_b"):
        plot.predicted_vs_measured(measured, predicted, kind, highlight="yours")


def test_bound_colours_are_the_same_in_every_figure():
    from xla_costmodel.models._base import BOUNDS
    from xla_costmodel.plot._common import BOUND_COLOURS

    assert set(BOUNDS) <= set(BOUND_COLOURS) and len(set(BOUND_COLOURS.values())) == len(BOUND_COLOURS)
    table = kernel_table()
    roof = plot.roofline(table, "h100-sxm")
    bounds = ["compute", "memory", "launch"]
    scatter = plot.predicted_vs_measured([1e-6, 2e-6, 3e-6], [1e-6, 3e-6, 2e-6], kind=["launch", "memory", "compute"])
    for bound in bounds:
        want = matplotlib.colors.to_rgba(BOUND_COLOURS[bound])
        assert tuple(by_gid(roof, f"kernels:{bound}").get_facecolor()[0][:3]) == pytest.approx(want[:3])
        assert tuple(by_gid(scatter, f"points:{bound}").get_facecolor()[0][:3]) == pytest.approx(want[:3])


# ---------------------------------------------------------------------------
# notebooks: the committed .ipynb files are the build of their percent-format sources


def _build_notebooks_module():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "scripts" / "build_notebooks.py"
    spec = importlib.util.spec_from_file_location("build_notebooks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_percent_format_converter(tmp_path):
    build = _build_notebooks_module()
    src = tmp_path / "x.py"
    text = (
        "# ---\n# jupyter:\n#   kernelspec:\n#     display_name: Py\n#     language: python\n#     name: py3\n# ---\n\n"
        "# %% [markdown]\n# # Title\n#\n# text\n\n"
        "# %%\nimport math\n\nprint(math.pi)\n\n\n"
        '# %% tags=["raises-exception"]\n1 / 0\n'
    )
    nb = build.percent_to_notebook(text, src)
    assert nb.metadata["kernelspec"] == {"display_name": "Py", "language": "python", "name": "py3"}
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code"]
    assert nb.cells[0].source == "# Title\n\ntext"
    assert nb.cells[1].source == "import math\n\nprint(math.pi)"
    assert nb.cells[2].metadata["tags"] == ["raises-exception"]
    # Same source, same bytes: cell ids come from the file name and position.
    assert build.notebook_text(nb) == build.notebook_text(build.percent_to_notebook(text, src))
    with pytest.raises(build.PercentFormatError, match=r"x\.py:1: text before the first"):
        build.percent_to_notebook("print(1)\n# %%\n", src)


def test_committed_notebooks_match_their_sources():
    import nbformat

    build = _build_notebooks_module()
    sources = sorted(build.NOTEBOOKS.glob("[0-9]*.py"))
    assert sources, "notebooks/ has no percent-format sources"
    for src in sources:
        committed = src.with_suffix(".ipynb")
        assert committed.exists(), f"{src.name} has no committed .ipynb (scripts/build_notebooks.py --execute)"
        built = build.percent_to_notebook(src.read_text(encoding="utf-8"), src)
        nb = nbformat.reads(committed.read_text(encoding="utf-8"), as_version=4)
        assert build.cell_sources(nb) == build.cell_sources(built), (
            f"{committed.name} is out of date: run scripts/build_notebooks.py --execute"
        )
        assert not build.is_stale(built, committed)


def test_committed_notebooks_are_executed_with_their_figures():
    import nbformat

    build = _build_notebooks_module()
    for committed in sorted(build.NOTEBOOKS.glob("[0-9]*.ipynb")):
        nb = nbformat.reads(committed.read_text(encoding="utf-8"), as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.get("execution_count") for c in code), f"{committed.name}: not executed"
        errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, f"{committed.name}: a cell raised {errors[0].get('ename')}"
        figures = [o for c in code for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
        if "plt." in "".join(c.source for c in code):
            assert figures, f"{committed.name}: draws figures but holds none (inline backend off?)"
        assert not build.leaked_paths(nb), f"{committed.name}: outputs hold paths of this machine"


def test_a_changed_source_makes_the_notebook_stale(tmp_path):
    build = _build_notebooks_module()
    src = tmp_path / "05_x.py"
    src.write_text("# %%\nprint(1)\n")
    committed = tmp_path / "05_x.ipynb"
    nb = build.percent_to_notebook(src.read_text(), src)
    import nbformat

    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]  # outputs may differ
    nb.cells[0].execution_count = 1
    committed.write_text(build.notebook_text(nb))
    assert not build.is_stale(build.percent_to_notebook(src.read_text(), src), committed)
    src.write_text("# %%\nprint(2)\n")
    assert build.is_stale(build.percent_to_notebook(src.read_text(), src), committed)


def test_fusion_savings_ticks_are_round_step_numbers_at_a_regular_interval():
    """Issue 26: the ticks were spread by position (14, 20, 26, 32, 38, 43, ...), at uneven steps."""
    steps = pd.DataFrame({"step": np.arange(1, 81), "producer": [f"p{i}" for i in range(80)],
                          "priority_s": np.r_[np.full(13, np.inf), np.linspace(1e-6, 0.9e-6, 54), np.full(13, -np.inf)]})
    ax = plot.fusion_savings(steps, label_steps=False)
    labels = [int(t.get_text()) for t in ax.get_xticklabels()]
    assert len(labels) >= 4 and labels[0] >= 14 and labels[-1] <= 67
    gaps = set(np.diff(labels))
    assert len(gaps) == 1 and gaps.pop() in (5, 10), labels
    # Each tick sits on the bar of the step it names.
    positions = ax.get_xticks()
    assert [int(p) + 14 for p in positions] == labels


def test_eleven_sources_get_eleven_colours_and_panels_can_share_their_range():
    """Issue 26: in predicted_vs_measured.png two of the corpus's 11 sources shared a colour, and the two
    panels had different axis ranges."""
    from xla_costmodel.plot._common import fmt_seconds, styles_for

    names = [f"source{i}" for i in range(11)]
    assert len({colour for colour, _ in styles_for(names).values()}) == 11
    ax = plot.predicted_vs_measured([1e-6, 2e-6], [1e-6, 3e-6], limits=(1e-7, 1e3))
    assert ax.get_xlim() == pytest.approx((1e-7, 1e3)) and ax.get_ylim() == pytest.approx((1e-7, 1e3))
    with pytest.raises(ValueError, match="limits"):
        plot.predicted_vs_measured([1e-6], [1e-6], limits=(1e-3, 1e-6))
    assert fmt_seconds(1000.0) == "1,000 s" and fmt_seconds(2e-6) == "2 µs"


def test_readable_tables_show_microseconds_and_integer_counts():
    """Issue 26: notebooks showed times as 0.000001, counts as 130560.0 and 2.0580500000000004e-05."""
    df = pd.DataFrame({"kernel": ["a", "b"], "flops": [130560.0, 4194304.0], "time_s": [2.0580500000000004e-05, 1e-6],
                       "ratio": [0.337825123, 1.5], "priced": [True, False]})
    shown = plot.readable(df)
    assert list(shown.columns) == ["kernel", "flops", "time_us", "ratio", "priced"]
    assert shown["flops"].tolist() == [130560, 4194304] and str(shown["flops"].dtype) == "Int64"
    assert shown["time_us"].tolist() == [20.6, 1.0] and shown["ratio"].tolist() == [0.338, 1.5]
    assert plot.readable(df, unit="ms")["time_ms"].tolist() == [0.0206, 0.001]
    with pytest.raises(ValueError, match="unknown unit"):
        plot.readable(df, unit="min")


def test_decade_limits_keep_points_off_the_edges():
    """Issue 26: a kernel at 1.1 µs sat on the bottom edge of a panel whose range started at 1 µs."""
    from xla_costmodel.plot._common import decade_limits

    assert decade_limits(np.array([1.1e-6, 3e-4])) == pytest.approx((1e-7, 1e-3))
    assert decade_limits(np.array([2e-6, 0.9e-3])) == pytest.approx((1e-6, 1e-2))
    assert decade_limits(np.array([2e-6, 3e-4])) == pytest.approx((1e-6, 1e-3))


def test_committed_notebook_outputs_are_clean():
    """Issue 26: a tqdm bar and `<matplotlib.legend.Legend at 0x...>` reprs in the outputs, and tables
    with times as 0.000001 and counts as 130560.0."""
    import nbformat

    build = _build_notebooks_module()
    for committed in sorted(build.NOTEBOOKS.glob("[0-9]*.ipynb")):
        nb = nbformat.reads(committed.read_text(encoding="utf-8"), as_version=4)
        for index, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                text = out.get("text", "") + out.get("data", {}).get("text/plain", "")
                where = f"{committed.name} cell {index}"
                assert "%|" not in text, f"{where}: a progress bar"
                assert "<matplotlib." not in text, f"{where}: a matplotlib object's repr"
                # A DataFrame printed with float counts: "130560.0" in a flops or bytes column.
                assert not re.search(r"\b\d{5,}\.0\b", text), f"{where}: a count shown as a float"
