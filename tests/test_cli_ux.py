"""What a user sees first (issue 26, section 2): lines that failed or misled, each checked here.

Each test names the defect it guards against. The command line is run in
this process (`cli.main`) unless the defect was in another process's output
(the pool workers of a many-file `analyze`).
"""

from __future__ import annotations

import io
import math
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import FIXTURES, ROOT
from xla_costmodel.cli import main

#: What Python's own warning format prints: `path/file.py:33: SomeWarning: message` (then the source line).
_PYTHON_WARNING = re.compile(r"\.py:\d+: \w*Warning")
#: A traceback's frame line.
_TRACEBACK = re.compile(r'^\s*File "', re.M)
#: A module XLA:CPU optimized: priced on a GPU it draws a BackendMismatchWarning.
CPU_MODULE = str(FIXTURES / "mlp_grad.post.hlo")
LOWERED = str(FIXTURES / "mlp_grad.pre.hlo")

PROGRAM = """import jax.numpy as jnp


def f(x, w):
    return jnp.tanh(x @ w).sum()


def build():
    return f, (jnp.ones((64, 32)), jnp.ones((32, 16)))
"""


def _clean(err: str) -> None:
    """No Python source line nor traceback on stderr; every line a `warning:`, `note:` or `error:` line
    (or a progress bar)."""
    assert not _PYTHON_WARNING.search(err), err
    assert not _TRACEBACK.search(err), err
    for line in err.replace("\r", "\n").splitlines():
        if line.strip() and "%|" not in line:  # tqdm's bar
            assert line.startswith(("warning: ", "note: ", "error: ", "xla-costmodel")), line


@pytest.fixture
def program(tmp_path) -> Path:
    path = tmp_path / "my_program.py"
    path.write_text(PROGRAM)
    return path


# --------------------------------------------------------------------------- combinations on the host


@pytest.mark.parametrize("model", ["min(xla-gpu,roofline)", "max-savings(roofline,xla-gpu)",
                                   "scaled-min(roofline,xla-gpu)", "min(roofline,min(roofline,xla-gpu))"])
def test_a_combination_holding_a_gpu_model_is_refused_on_the_host_with_exit_2(model, capsys):
    """It exited 1 with "internal error" (the member refused the device only when asked to price)."""
    assert main(["analyze", CPU_MODULE, "--device", "host", "--model", model]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the xla-gpu model prices GPU kernels; device 'host' is a cpu"), err
    assert "internal error" not in err and f"'{model}' holds it" in err


def test_a_combination_of_models_that_price_the_device_still_runs(capsys):
    assert main(["analyze", CPU_MODULE, "--device", "host", "--model", "min(roofline,fitted)"]) == 0
    assert "total" in capsys.readouterr().out


def test_the_library_refuses_the_combination_before_pricing():
    from xla_costmodel import analyze
    from xla_costmodel.measure import resolve_device
    from xla_costmodel.models import check_prices_device, resolve_model

    with pytest.raises(ValueError, match="'min\\(roofline,xla-gpu\\)' holds it"):
        check_prices_device(resolve_model("min(roofline,xla-gpu)"), resolve_device("host"))
    with pytest.raises(ValueError, match="prices GPU kernels"):
        analyze(CPU_MODULE, device="host", model="max-savings(xla-gpu,roofline)")


# --------------------------------------------------------------------------- warnings: one line each


def test_granularity_warns_on_one_line(capsys):
    """It printed `.../cli/_granularity.py:33: BackendMismatchWarning: ...` and the source line."""
    assert main(["granularity", CPU_MODULE, "--kernel", "add_maximum_fusion"]) == 0
    err = capsys.readouterr().err
    _clean(err)
    assert err.count("warning: module 'jit_mlp_loss_and_grad' was optimized by XLA:CPU") == 1


def test_one_line_warnings_hide_deprecations_and_say_a_message_once(capsys):
    """jaxlib's DeprecationWarnings (ProfileData on Python 3.12) reached the user; repeats were repeated."""
    from xla_costmodel.cli._common import one_line_warnings

    with one_line_warnings():
        warnings.warn("about jaxlib's internals", DeprecationWarning)
        warnings.warn("about jaxlib's internals", PendingDeprecationWarning)
        for _ in range(3):
            warnings.warn("something to know\nover two lines", UserWarning)
    assert capsys.readouterr().err == "warning: something to know over two lines\n"


def test_many_file_analyze_gives_one_warning_line_for_all_files(tmp_path):
    """Each pool worker printed Python's raw warning, one per file; now the driver says it once."""
    files = []
    for i in range(3):
        files.append(tmp_path / f"m{i}.hlo")
        files[-1].write_text(Path(CPU_MODULE).read_text().replace("HloModule jit_mlp_loss_and_grad",
                                                                   f"HloModule jit_mlp_{i}", 1))
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "xla_costmodel.cli", "analyze", *map(str, files), "--workers", "2",
                           "--no-progress"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    _clean(proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    assert len(lines) == 1 and "optimized by XLA:CPU" in lines[0] and "(the same for 2 more files)" in lines[0], lines
    assert "3 files" in proc.stdout


def test_a_workers_warning_comes_back_to_the_driver():
    from xla_costmodel.models import BackendMismatchWarning
    from xla_costmodel.scale import analyze_many

    with pytest.warns(BackendMismatchWarning, match="optimized by XLA:CPU"):
        analyze_many([CPU_MODULE], device="h100-sxm", model="xla-gpu", workers=1, progress=False)


@pytest.mark.slow
def test_measure_and_evaluate_of_a_program_write_no_python_source_line(program, capsys):
    assert main(["measure", "--jax", f"{program}:build", "--repeats", "6", "--discard", "1", "--no-progress"]) == 0
    _clean(capsys.readouterr().err)
    assert main(["evaluate", "--jax", f"{program}:build", "--models", "roofline", "--repeats", "6",
                 "--discard", "1"]) == 0
    captured = capsys.readouterr()
    _clean(captured.err)
    # One unit for the table: microseconds, no column in seconds.
    header = next(ln for ln in captured.out.splitlines() if ln.split()[:1] == ["model"])
    assert "predicted_wall_us" in header and not re.search(r"\b\w+_s\b", header), header


# --------------------------------------------------------------------------- a word where one is needed


def test_analyze_of_an_unfused_module_on_a_gpu_suggests_fuse(capsys):
    assert main(["analyze", LOWERED, "--device", "h100-sxm"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"note: {LOWERED} has no fusions") and "xla-costmodel fuse" in err, err
    # Not on the CPU (the note is about XLA:GPU's fusion), nor for a fused module.
    assert main(["analyze", LOWERED, "--device", "host", "--model", "roofline"]) == 0
    assert "note:" not in capsys.readouterr().err
    assert main(["analyze", CPU_MODULE, "--device", "h100-sxm"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_fuse_says_when_its_input_is_already_fused(tmp_path, capsys):
    assert main(["fuse", CPU_MODULE, "-o", str(tmp_path / "again.hlo")]) == 0
    err = capsys.readouterr().err
    assert f"note: {CPU_MODULE} is already fused, 24 fusions (optimized by XLA:CPU" in err, err
    assert main(["fuse", LOWERED, "-o", str(tmp_path / "fused.hlo")]) == 0
    assert "note:" not in capsys.readouterr().err


def test_compare_with_xla_calls_the_index_degenerate_when_xla_made_one_kernel():
    """It printed ARI 0.0 when XLA fused everything into one kernel: 0 whatever our grouping is."""
    from xla_costmodel import compare_with_xla, parse_hlo
    from sklearn.metrics import adjusted_rand_score

    ours = parse_hlo("""HloModule m
ENTRY e {
  p = f32[8]{0} parameter(0)
  a = f32[8]{0} exponential(p), metadata={op_name="exp"}
  b = f32[8]{0} negate(a), metadata={op_name="neg"}
  ROOT c = f32[8]{0} abs(b), metadata={op_name="abs"}
}""")
    xla = parse_hlo("""HloModule m
f {
  q = f32[8]{0} parameter(0)
  x = f32[8]{0} exponential(q), metadata={op_name="exp"}
  y = f32[8]{0} negate(x), metadata={op_name="neg"}
  ROOT z = f32[8]{0} abs(y), metadata={op_name="abs"}
}
ENTRY e {
  p = f32[8]{0} parameter(0)
  ROOT k = f32[8]{0} fusion(p), kind=kLoop, calls=f
}""")
    # What the index gives here, and for any other grouping of ours: 0.
    assert adjusted_rand_score(["k", "k", "k"], ["a", "b", "c"]) == 0.0
    assert adjusted_rand_score(["k", "k", "k"], ["a", "a", "c"]) == 0.0
    c = compare_with_xla(ours, xla)
    assert c.matched == 3 and c.kernels_xla == 1 and c.kernels_ours == 3
    assert math.isnan(c.ari) and "single kernel" in c.note and "degenerate" in c.note
    assert c.summary()["note"] == c.note
    # The same grouping on both sides is still agreement.
    same = compare_with_xla(xla, xla)
    assert same.ari == 1.0 and not same.note


# --------------------------------------------------------------------------- units and names


def test_evaluate_table_is_in_one_unit():
    """`predicted_wall_s` was printed with three decimals (0.003) next to `*_us` columns."""
    from xla_costmodel.cli._evaluate import _in_microseconds

    summary = pd.DataFrame({"model": ["fitted"], "kernels": [3], "unpriced": [0], "sk_error": [0.12345],
                            "ratio_error": [0.5], "predicted_total_s": [3.2e-5], "predicted_wall_s": [1.03e-4],
                            "measured_wall_s": [math.nan]})
    shown = _in_microseconds(summary)
    assert list(shown.columns) == ["model", "kernels", "unpriced", "sk_error", "ratio_error", "predicted_total_us",
                                   "predicted_wall_us", "measured_wall_us"]
    assert shown.iloc[0].tolist() == ["fitted", "3", "0", "0.123", "0.500", "32.00", "103.00", "NaN"]


def test_predicted_wall_time_says_why_it_is_nan_on_a_device_without_overhead():
    from xla_costmodel.front._evaluate import _saved_overhead
    from xla_costmodel.devices import get_device

    overhead, why = _saved_overhead(get_device("host"))
    assert overhead is not None and why is None  # shipped: calibration/host_program-overhead.json
    overhead, why = _saved_overhead(get_device("b200"))
    assert overhead is None
    assert why.startswith("predicted_wall_s is NaN: no per-run program overhead is known for device 'b200'")


def test_compare_leaves_out_fusion_columns_without_fused_unfused_pairs():
    from xla_costmodel.compare._compare import FUSION_COLUMNS, shown_columns

    table = pd.DataFrame({"model": ["a"], "sk_error": [0.1], "fusion_n": [0], "fusion_order_acc": [np.nan],
                          "fusion_gain_ratio_error": [np.nan], "fusion_gain_tau": [np.nan]})
    assert list(shown_columns(table).columns) == ["model", "sk_error"]
    table.loc[0, ["fusion_n", "fusion_order_acc"]] = [4, 0.75]
    assert set(FUSION_COLUMNS) <= set(shown_columns(table).columns)


def test_metric_names_are_one_per_metric_in_the_figures():
    from xla_costmodel import plot

    ax = plot.error_by_model(pd.DataFrame({"model": ["a", "b"], "ratio_error": [0.5, 0.25]}))
    assert ax.get_ylabel() == "ratio_error"  # a fraction, as in the tables
    with pytest.raises(KeyError):
        plot.error_by_model(pd.DataFrame({"model": ["a"], "gmre": [0.5]}))


# --------------------------------------------------------------------------- --jax, small things


def test_jax_given_the_program_instead_of_its_factory_says_what_is_expected(program, capsys):
    """Passing the function itself gave a bare TypeError."""
    assert main(["measure", "--jax", f"{program}:f"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "f() raised TypeError" in err
    assert "FUNCTION is a factory called with no arguments that returns (fn, args)" in err


def test_evaluate_on_a_gpu_device_from_the_cli_names_no_python_form(program, capsys):
    assert main(["evaluate", "--jax", f"{program}:build", "--device", "h100-sxm"]) == 2
    err = capsys.readouterr().err
    assert "device 'h100-sxm' is a gpu" in err and "device='host'" not in err and "'host'" in err


def test_analyze_csv_leaves_out_free_rows_as_the_table_and_json_do(capsys):
    assert main(["analyze", CPU_MODULE, "--csv"]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert len(csv) == 27 and not (csv["bound"] == "free").any()
    assert main(["analyze", CPU_MODULE, "--csv", "--all"]) == 0
    assert (pd.read_csv(io.StringIO(capsys.readouterr().out))["bound"] == "free").any()


def test_a_file_cut_at_a_line_boundary_says_end_of_file(tmp_path, capsys):
    lines = Path(CPU_MODULE).read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.hlo"
    cut.write_text("".join(lines[: len(lines) // 2]))
    assert main(["stats", str(cut)]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(f"error: {cut}:") and first.endswith("(unexpected end of file)"), first


def test_stats_dash_reads_standard_input(monkeypatch, capsys):
    text = Path(CPU_MODULE).read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    assert main(["stats", "-"]) == 0
    from_stdin = capsys.readouterr().out
    assert main(["stats", CPU_MODULE]) == 0
    assert from_stdin == capsys.readouterr().out and from_stdin.startswith("module jit_mlp_loss_and_grad:")


def test_readme_has_no_words_for_insiders_and_its_pointers_point_the_right_way():
    text = (ROOT / "README.md").read_text()
    assert "the brief" not in text and "issue 17" not in text
    headings = [m.group(1) for m in re.finditer(r"^#+ (.+)$", text, re.M)]
    for m in re.finditer(r'"([A-Z][^"]+)" (below|above)', text):
        title, direction = m.group(1), m.group(2)
        assert title in headings, title
        at = re.search(rf"^#+ {re.escape(title)}$", text, re.M).start()
        assert (at > m.start()) == (direction == "below"), (title, direction)


def test_the_demo_never_prices_xla_cpu_kernels_on_a_gpu():
    """`scripts/run`'s step 2 priced XLA:CPU's optimized module on the H100 (with a raw warning), which the
    README warns against."""
    from xla_costmodel import from_jax
    from xla_costmodel.cli._demo_job import stage_two_tables
    from xla_costmodel.models import BackendMismatchWarning
    from xla_costmodel.zoo import get_program

    fn, args = get_program("mlp_grad").build()
    optimized = from_jax(fn, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BackendMismatchWarning)
        tables = stage_two_tables(fn, args, optimized)
    from xla_costmodel.gpu_compile import gpu_compile_available

    assert tables[("h100-sxm", "xla-gpu")].priced_module.startswith(
        "XLA:GPU compiled here" if gpu_compile_available() else "XLA:GPU fusion simulated from the lowered module")
    assert tables[("host", "roofline")].priced_module.startswith("the module as given")


@pytest.mark.parametrize("argv", [
    ["stats", CPU_MODULE],
    ["analyze", CPU_MODULE],
    ["analyze", CPU_MODULE, "--json"],
    ["analyze", LOWERED, "--model", "min(xla-gpu,roofline)"],
    ["granularity", CPU_MODULE, "--kernel", "add_maximum_fusion", "--json"],
    ["fuse", CPU_MODULE, "-o", "{tmp}/fused.hlo", "--search", "--budget", "1"],
])
def test_no_command_writes_a_python_source_line(argv, tmp_path, capsys):
    """Each of these drew a warning (a CPU-optimized module priced on a GPU, an unfused module): on
    stderr it is one `warning:` or `note:` line, never Python's `file.py:LINE: Warning` and source line."""
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 0
    _clean(capsys.readouterr().err)
