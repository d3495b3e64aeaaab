"""The fused module of every pre-optimization fixture runs on XLA as emitted, by references nobody here wrote.

For each lowered module (the zoo's `*.pre.hlo`; `fused_module_runs_as_emitted`
takes any lowered module, e.g. the programs of an independent corpus):

- XLA's own parser (jaxlib) accepts the text `simulate_fusion` emits, with its defaults;
- that text, each `fusion` turned into a `call` and nothing else changed, compiles
  and runs on jaxlib's CPU client (in a worker process, so that a crash inside
  jaxlib fails the test instead of ending it) and gives the original's outputs
  on random inputs;
- XLA's cost analysis (jaxlib) counts fewer bytes accessed than for the input.

The same holds for what `xla-costmodel fuse -o OUT.hlo` writes.
"""

from __future__ import annotations

import os
import signal
import warnings

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")

from xla_costmodel import _jaxlib_oracle as oracle  # noqa: E402
from xla_costmodel import simulate_fusion  # noqa: E402
from xla_costmodel.fusion import check_plan_validity  # noqa: E402
from xla_costmodel.fusion._execute import (  # noqa: E402
    CpuClientCrashed,
    CpuRunError,
    IsolatedCpuRunner,
    random_arguments,
    run_on_cpu_isolated,
)
from xla_costmodel.hlo import HloModule, load_hlo, parse_hlo  # noqa: E402
from xla_costmodel.hlo._edit import unfuse_for_execution  # noqa: E402
from xla_costmodel.models import model_names  # noqa: E402

from conftest import FIXTURES, fixture_ids, fixture_paths  # noqa: E402

PRE = fixture_paths("*.pre.hlo")
MODEL = "xla-gpu" if "xla-gpu" in model_names() else "roofline"


def _close(want, got):
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w.shape == g.shape and w.dtype == g.dtype
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


def fused_module_runs_as_emitted(module: HloModule, device: str = "h100-sxm", model: str = MODEL,
                                 *, expect_fusion: bool = True) -> None:
    """Assert that `simulate_fusion(module)`'s emitted text is valid HLO that computes what `module` does.

    `module`: any lowered (unoptimized) module whose entry parameters are arrays; `expect_fusion`: also
    assert that something was fused and that XLA counts fewer bytes accessed (the zoo's fixtures all fuse;
    a program of one library call may have nothing to fuse).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = simulate_fusion(module, device=device, model=model, price_totals=False)
    text = r.module.to_text()  # what the user gets
    oracle.xla_parse(text)
    if any(getattr(w, "kind", "") == "cudnn-conv" for w in r.pre_fusion_rewrites):
        # XLA:GPU's cuDNN calls run on a GPU only, so the fusion around the convolutions runs with them kept
        # (the convolution pass itself is held to XLA:GPU's own module in tests/test_conv_rewrite.py).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = simulate_fusion(module, device=device, model=model, price_totals=False, conv_rewrites=False)
        text = r.module.to_text()
        oracle.xla_parse(text)
    assert "bitcast(" not in text, "bitcasts in a module that was not through layout assignment"
    emitted = parse_hlo(text)
    fused = any(i.opcode == "fusion" for _, i in emitted.instructions())
    if expect_fusion:
        assert fused and len(r.steps) > 0
    # Fusion's own input: the module after the passes XLA runs before fusion (calls inlined, the simplifier,
    # constant folding and DotMerger, whose merged dots read a concatenate of their operands: more bytes than
    # the dots apart, flax_nnx_lstm_grad's 1.12 -> 1.80 MB; long scans made XLA's tree of short windows)
    from xla_costmodel.fusion._simulate import working_copy

    unfused = working_copy(module, True, "off", rewrites=[], simplify=True, constant_folding=True)
    if any(type(w).__name__ == "TopkDecomposition" for w in r.pre_fusion_rewrites):
        from xla_costmodel.fusion._topk import decompose_topks  # a top_k became a sort and two slices

        decompose_topks(unfused)
    before = oracle.xla_cost_analysis(unfused.to_text())["bytes accessed"]
    after = oracle.xla_cost_analysis(text)["bytes accessed"]
    assert after < before if fused else after <= before
    runnable = unfuse_for_execution(emitted, mode="call").to_text()
    assert "fusion(" not in runnable and runnable.count(" call(") >= sum(
        1 for _, i in emitted.instructions() if i.opcode == "fusion")
    args = random_arguments(module, seed=1)
    want = run_on_cpu_isolated(module.to_text(), args)
    try:
        got = run_on_cpu_isolated(runnable, args)
    except CpuRunError as e:  # CpuClientCrashed included: the test fails, the run goes on
        pytest.fail(f"the emitted module does not run on jaxlib's CPU client: {e}")
    _close(want, got)


@pytest.mark.parametrize("path", PRE, ids=fixture_ids(PRE))
def test_fused_fixture_runs_as_emitted(path):
    # sort_topk: CSE merges its two iota(64)s, as XLA does; the one left feeds a sort too, which takes
    # no producer, so nothing fuses (7 kernels with or without CSE)
    fused_module_runs_as_emitted(load_hlo(path), expect_fusion=path.name != "sort_topk.pre.hlo")


def _corpus_programs():
    from xla_costmodel import corpus

    out = []
    for name in corpus.program_names():
        available = corpus.get_program(name).available()
        out.append(pytest.param(name, marks=[] if available else [pytest.mark.skip(reason="library not installed")]))
    return out


@pytest.mark.parametrize("name", _corpus_programs())
def test_fused_corpus_program_runs_as_emitted(name):
    """The independent corpus's programs (smallest size), lowered as jax lowers them: the emitted module runs
    on XLA as written and computes the same outputs."""
    from xla_costmodel import corpus, from_jax

    fn, args = corpus.get_program(name).build()
    module = from_jax(fn, *args, optimized=False)
    callbacks = sorted({i.attributes.get("custom_call_target", "") for _, i in module.instructions()
                        if i.opcode == "custom-call" and "callback" in i.attributes.get("custom_call_target", "")})
    if callbacks:
        # The reference run fails the same way: the callback lives in the Python process that lowered it.
        pytest.skip(f"calls back into Python ({', '.join(callbacks)}): no text of it runs in another process")
    fused_module_runs_as_emitted(module, expect_fusion=False)


def test_check_plan_validity_runs_the_emitted_module():
    """The library's own check runs the same thing: linalg's LAPACK calls included."""
    m = load_hlo(FIXTURES / "linalg.pre.hlo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fused = simulate_fusion(m, device="h100-sxm", model=MODEL, price_totals=False).module
    report = check_plan_validity(m, fused)
    assert report.ok and report.outputs_match is True, report


@pytest.mark.parametrize("search", [[], ["--search", "--budget", "0.5"]], ids=["greedy", "search"])
def test_fuse_cli_output_runs_as_written(tmp_path, capsys, search):
    """`xla-costmodel fuse -o OUT.hlo [--search]`: the file it writes, fusions made calls, runs and matches."""
    from xla_costmodel.cli import main

    src = FIXTURES / "transformer_fwd.pre.hlo"
    out = tmp_path / "fused.hlo"
    assert main(["fuse", str(src), "--device", "h100-sxm", "--model", MODEL, "-o", str(out), *search]) == 0
    capsys.readouterr()
    written = out.read_text()
    oracle.xla_parse(written)
    assert "fusion(" in written and "bitcast(" not in written
    m = load_hlo(src)
    args = random_arguments(m, seed=3)
    _close(run_on_cpu_isolated(m.to_text(), args),
           run_on_cpu_isolated(unfuse_for_execution(parse_hlo(written), mode="call").to_text(), args))


def test_the_linalg_segfault_is_jaxlibs_unfilled_lapack_table_not_our_text():
    """`linalg.pre.hlo` died with SIGSEGV on jaxlib's CPU client: JAX's own lowered text does too.

    jaxlib's LAPACK kernels (`lapack_spotrf_ffi`, ...) call through a function table that jaxlib
    fills only when JAX lowers a linear-algebra op; compiled from text before that, the module
    compiles and then dies when run. The worker reports the signal and the next module runs.
    """
    m = load_hlo(FIXTURES / "linalg.pre.hlo")  # JAX's text, not ours: cholesky, triangular solve, solve
    rng = np.random.default_rng(0)
    a = rng.random((8, 8)).astype(np.float32)
    spd = (a @ a.T + 8 * np.eye(8)).astype(np.float32)
    rhs = rng.random((8, 3)).astype(np.float32)
    with IsolatedCpuRunner() as runner:
        with pytest.raises(CpuClientCrashed) as info:
            runner.run(m.to_text(), [spd, rhs], prepare_lapack=False)
        assert info.value.signal == signal.SIGSEGV
        chol, _, solved = runner.run(m.to_text(), [spd, rhs])  # a new worker; the table filled first
    np.testing.assert_allclose(chol, np.linalg.cholesky(spd), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(solved, np.linalg.solve(spd, rhs), rtol=1e-4, atol=1e-5)


def test_bitcasts_are_refused_by_the_cpu_path_not_rewritten():
    """XLA's CPU compile re-assigns layouts and rejects bitcasts: `run_on_cpu` reports that, it does not rewrite."""
    text = """HloModule b
ENTRY e {
  p = f32[4,3]{1,0} parameter(0)
  ROOT b = f32[12]{0} bitcast(p)
}"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    with pytest.raises(CpuRunError):
        run_on_cpu_isolated(text, [x])
    # Only when asked (graph-edit tests comparing two graphs with the same bitcasts): run as a reshape.
    with IsolatedCpuRunner() as runner:
        (got,) = runner.run(text, [x], bitcasts_as_logical_ops=True)
    np.testing.assert_array_equal(got, x.reshape(12))
