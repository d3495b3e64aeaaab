"""XLA:GPU's own compile on this machine (`xla_costmodel.gpu_compile`), checked against XLA itself: the module
a real H100 ran (hlo_fixtures/gpu_h100), XLA's dumps, XLA's errors; and the same package with jax's CUDA
plugin hidden, as on a machine where it is not installed.

Where the plugin is not installed, the tests that compile skip; the tests of the plugin's absence run in
any case (they hide it in a subprocess when it is there)."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import xla_costmodel as xc
from xla_costmodel.gpu_compile import (GpuCompileError, compile_for_gpu,
                                       gpu_compile_available, gpu_compile_unavailable_reason)
from xla_costmodel.models import GpuCompileFallbackWarning

ROOT = Path(__file__).resolve().parent.parent
H100 = ROOT / "hlo_fixtures" / "gpu_h100"

needs_plugin = pytest.mark.skipif(not gpu_compile_available(), reason=f"{gpu_compile_unavailable_reason()}")


def layer(x, w):
    return jnp.tanh(x @ w).sum()


SHAPES = (jax.ShapeDtypeStruct((256, 512), jnp.float32), jax.ShapeDtypeStruct((512, 128), jnp.float32))


def kernels(module) -> int:
    """The kernels `analyze` prices in a module (rows that are not free), the count both modules get."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xc.analyze(module, device="h100-sxm").summary().kernels


# ---------------------------------------------------------------- compiling


@needs_plugin
def test_compile_of_a_zoo_program_is_xla_gpus_module_for_the_preset():
    from xla_costmodel.zoo import get_program

    fn, args = get_program("mlp_grad").build()
    shapes = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), args)
    result = compile_for_gpu(fn, *shapes, device="h100-sxm")
    assert result.device == "h100-sxm" and result.jax_version == jax.__version__
    assert result.compiled_by == f"XLA:GPU compiled here (jax {jax.__version__})"
    assert result.compile_s > 0 and result.dump_dir is None and result.dump_files == ()
    # XLA:GPU's, not XLA:CPU's: GEMMs are Triton GEMM fusions or cuBLAS calls, the schedule is XLA:GPU's.
    text = result.text
    assert "is_scheduled=true" in text.splitlines()[0]
    assert "\"kind\":\"__triton_nested_gemm_fusion\"" in text or "__cublas$gemm" in text
    assert "__ynn" not in text
    assert result.module.to_text()  # parsed by our front end
    # The same module from the concrete arrays: nothing but their shapes and dtypes is used.
    assert compile_for_gpu(fn, *args, device="h100-sxm").text == text


@needs_plugin
def test_each_gpu_preset_compiles_with_its_own_target():
    # One small compile per architecture family: Ampere, Hopper, Blackwell. (V100 needs a ptxas that still
    # knows sm_70; CUDA 13's does not.)
    seen = {}
    for name in ("a100-80gb", "h100-pcie", "b200"):
        seen[name] = compile_for_gpu(layer, *SHAPES, device=name)
    assert seen["b200"].text != seen["a100-80gb"].text  # Triton tiles and emitters differ per target


# The shipped H100 modules against their deviceless twins: programs whose kernels autotuning does not
# change (no GEMM), so the deviceless module must have the H100 module's kernel count exactly.
TWINS = ("jax_numpy_sort_topk@small", "optax_adamw_update@small",
         "lineax_cg_solve@small")  # lineax: equinox's host callbacks


@needs_plugin
@pytest.mark.parametrize("case", TWINS)
def test_deviceless_module_has_the_h100_runs_kernel_count(case):
    from xla_costmodel.corpus import get_program

    program, size = case.split("@")
    try:
        fn, args = get_program(program).build(size)
    except xc.corpus.MissingLibraryError as exc:
        pytest.skip(str(exc))
    shapes = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), args)
    deviceless = compile_for_gpu(fn, *shapes, device="h100-sxm").module
    with gzip.open(H100 / f"{case}.post.hlo.gz", "rt") as f:
        real = xc.parse_hlo(f.read(), source=case)
    assert kernels(deviceless) == kernels(real)


@needs_plugin
def test_host_callbacks_compile_as_the_gpus_callback_custom_calls_and_jax_is_left_as_it_was():
    # equinox's runtime error checks (diffrax, lineax) are host callbacks; jax's lowering of them asks for a live
    # CUDA backend, which a machine without a GPU lacks.
    from jax._src.interpreters import mlir

    jax_own = mlir.ModuleContext.get_backend

    def checked(x):
        y = jnp.sin(x)
        jax.debug.print("norm {}", jnp.linalg.norm(y))
        host = jax.pure_callback(lambda v: v * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), y)
        return (host + y).sum()

    text = compile_for_gpu(checked, jax.ShapeDtypeStruct((1024,), jnp.float32)).text
    assert text.count('custom_call_target="xla_ffi_python_gpu_callback"') == 2
    assert mlir.ModuleContext.get_backend is jax_own
    # The user's own jax still runs the callbacks on the CPU.
    assert float(jax.jit(checked)(jnp.ones(4))) == pytest.approx(3 * 4 * float(jnp.sin(1.0)), rel=1e-5)


@needs_plugin
def test_an_equinox_error_check_compiles_as_on_the_h100():
    eqx = pytest.importorskip("equinox")

    def guarded(x):
        return eqx.error_if(x, x < 0, "negative").sum()

    text = compile_for_gpu(guarded, jax.ShapeDtypeStruct((4096,), jnp.float32)).text
    assert 'custom_call_target="xla_ffi_python_gpu_callback"' in text


@needs_plugin
def test_stable_sorts_compiled_without_a_gpu_are_sent_to_cub_as_on_the_h100():
    # Without a GPU, XLA skips sort_rewriter and expands stable sorts with an iota tie-break; the H100 run of
    # jax_random_sampling@large sent both of its stable sorts (u32 keys, 262144 long) to CUB.
    from xla_costmodel.analysis._sort import cub_sort_decision, sort_of

    with gzip.open(H100 / "jax_random_sampling@large.post.hlo.gz", "rt") as f:
        assert f.read().count('custom_call_target="xla.gpu.ext.cub_sort_pairs"') == 2

    def shuffle(keys, values):
        k, v = jax.lax.sort((keys, values), num_keys=1, is_stable=True)
        k2, perm = jax.lax.sort((k ^ jnp.uint32(0x9E3779B9), v), num_keys=1, is_stable=True)
        return perm

    args = (jax.ShapeDtypeStruct((262144,), jnp.uint32), jax.ShapeDtypeStruct((262144,), jnp.int32))
    module = compile_for_gpu(shuffle, *args).module
    sorts = [i for c, i in module.instructions() if c is module.entry and sort_of(i) is not None]
    assert sorts and all(sort_of(s).attribute("to_apply").root.opcode == "select" for s in sorts)   # expanded
    h100 = xc.get_device("h100-sxm")
    assert all(cub_sort_decision(s, h100)[0] for s in sorts)
    t = xc.analyze(shuffle, *args, device="h100-sxm")
    assert all(t.estimates[s.name].details.get("library") == "cub" for s in sorts)


@needs_plugin
def test_lower_for_gpu_is_jaxs_cuda_lowering_before_xlas_passes():
    # jax lowers a 2-D inverse real FFT per axis on CUDA (its GPU lowering rule), whole on the CPU; the H100
    # capture's own lowering (jax 0.11.2) keeps it whole, so the deviceless module has more FFT kernels.
    from xla_costmodel.gpu_compile import lower_for_gpu

    def irfft2(x):
        return jnp.fft.irfft2(x)

    x = jax.ShapeDtypeStruct((4, 64, 33), jnp.complex64)
    ffts = [i for _, i in lower_for_gpu(irfft2, x).instructions() if i.opcode == "fft"]
    cpu = [i for _, i in xc.parse_hlo(jax.jit(irfft2).lower(x).as_text(dialect="hlo")).instructions()
           if i.opcode == "fft"]
    assert len(cpu) == 1 and len(ffts) == 2
    assert sorted(str(f.attribute("fft_type")) for f in ffts) == ["IFFT", "IRFFT"]
    assert "is_scheduled" not in lower_for_gpu(irfft2, x).to_text().splitlines()[0]   # before XLA's passes


@needs_plugin
def test_loops_carry_xlas_known_trip_count():
    def scan(x):
        return jax.lax.fori_loop(0, 37, lambda i, c: jnp.sin(c) * 1.01, x).sum()

    text = compile_for_gpu(scan, jax.ShapeDtypeStruct((4096,), jnp.float32)).text
    assert '"known_trip_count":{"n":"37"}' in text


@needs_plugin
def test_dump_passes_writes_the_module_around_each_fusion_pass_and_keeps_existing_files(tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("the user's")
    result = compile_for_gpu(layer, *SHAPES, dump_passes=tmp_path)
    names = result.dump_files
    assert result.dump_dir == tmp_path and set(names) <= {p.name for p in tmp_path.iterdir()}
    assert any(n.endswith(".after_priority-fusion.before_cse.txt") for n in names)
    assert any(n.endswith(".after_multi_output_fusion.before_cse.txt") for n in names)
    assert any(n.endswith(".priority_fusion_dump.txt") for n in names)
    thunks = next(tmp_path / n for n in names if n.endswith(".thunk_sequence.txt"))
    assert "grid:" in thunks.read_text() or "threads" in thunks.read_text()
    assert not any(n.endswith((".ll", ".ptx")) for n in names)  # no LLVM IR or PTX
    assert mine.read_text() == "the user's"
    # A second dump beside the first keeps both.
    again = compile_for_gpu(layer, *SHAPES, dump_passes=tmp_path)
    assert not set(again.dump_files) & set(names)
    # And the module is the same as without dumping.
    assert result.text == compile_for_gpu(layer, *SHAPES).text


def _gemm_epilogue(x, w):
    return jax.nn.gelu(x @ w)


def _loop(x):
    return jax.lax.fori_loop(0, 9, lambda i, c: jnp.sin(c) * 1.01, x)


def _sorted_rows(x):
    return jnp.sort(x, axis=-1)


_BF16 = jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16)


@needs_plugin
@pytest.mark.parametrize("fn, args, mark", [
    (_gemm_epilogue, (_BF16, _BF16), "__triton_nested_gemm_fusion"),       # a Triton GEMM fusion
    (_loop, (jax.ShapeDtypeStruct((4096,), jnp.float32),), "while("),        # a loop calling libdevice (sin)
    (_sorted_rows, (jax.ShapeDtypeStruct((64, 4096), jnp.float32),), "sort("),
])
def test_the_ptxas_stand_in_leaves_the_module_and_its_kernels_as_xlas_own_ptxas_does(tmp_path, fn, args, mark):
    """`compile_for_gpu` assembles with a stand-in `ptxas` and LLVM at -O0 (a compile-only executable never
    runs): XLA's optimized module and its thunk sequence (the kernels with their launch grids, block sizes and
    shared memory) are the same, byte for byte, as with XLA's own settings and NVIDIA's `ptxas`
    (`xla_ptxas()`)."""
    from xla_costmodel.gpu_compile import _compile, xla_ptxas

    stand_in = compile_for_gpu(fn, *args, dump_passes=tmp_path / "stand_in")
    assert _compile._assembler_stub(), "the stand-in failed and XLA's own ptxas was used"
    with xla_ptxas():
        assert _compile._assembler_stub() == {}
        own = compile_for_gpu(fn, *args, dump_passes=tmp_path / "ptxas")
    assert mark in stand_in.text
    assert stand_in.text == own.text

    def thunks(result):
        return [(result.dump_dir / n).read_text() for n in result.dump_files if n.endswith(".thunk_sequence.txt")]

    assert thunks(stand_in) == thunks(own) and "grid:" in thunks(own)[0]


@needs_plugin
def test_a_ptxas_stand_in_that_fails_gives_way_to_xlas_own(tmp_path, monkeypatch):
    from xla_costmodel.gpu_compile import _compile

    broken = tmp_path / "cuda"
    (broken / "bin").mkdir(parents=True)
    ptxas = broken / "bin" / "ptxas"
    # It answers XLA's version query, then fails on every kernel.
    major, minor = _compile._plugin_cuda_version()
    ptxas.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "Cuda compilation tools, release {major}.{minor}, '
                     f'V{major}.{minor}.0"; exit 0; fi\necho "ptxas fatal: broken" >&2\nexit 3\n')
    ptxas.chmod(0o755)
    monkeypatch.setattr(_compile, "_stub_options", {"xla_gpu_cuda_data_dir": str(broken)})
    result = compile_for_gpu(lambda x: jnp.cos(x) * 3, SHAPES[0])
    assert "cosine" in result.text
    assert _compile._assembler_stub() == {}  # given up for the rest of the process


@needs_plugin
def test_the_users_warnings_while_tracing_reach_them():
    def noisy(x):
        warnings.warn("from the user's function", UserWarning)
        return jnp.sin(x).sum()

    with pytest.warns(UserWarning, match="from the user's function"):
        compile_for_gpu(noisy, SHAPES[0])


# ---------------------------------------------------------------- errors


def test_a_cpu_or_unknown_device_is_refused():
    with pytest.raises(ValueError, match="cpu"):
        compile_for_gpu(layer, *SHAPES, device=xc.get_device("h100-sxm").replace(name="box", kind="cpu"))
    with pytest.raises(ValueError, match="unknown|valid"):
        compile_for_gpu(layer, *SHAPES, device="h900")
    with pytest.raises(ValueError, match="compute_capability"):
        compile_for_gpu(layer, *SHAPES, device=xc.get_device("h100-sxm").replace(name="x", compute_capability=None))


@needs_plugin
def test_xla_failing_raises_gpu_compile_error_naming_xlas_error():
    # A warp of 7 threads: XLA:GPU's reduction emitter refuses it (its shuffle distance must be a power of 2).
    odd = xc.get_device("h100-sxm").replace(name="odd-warp", warp_size=7)
    with pytest.raises(GpuCompileError, match=r"XLA:GPU failed to compile layer for 'odd-warp': .*warp") as info:
        compile_for_gpu(layer, *SHAPES, device=odd)
    assert "power of 2" in info.value.xla_error


@needs_plugin
def test_a_target_xla_cannot_read_is_gpu_compile_error():
    from xla_costmodel.gpu_compile._compile import _compile_device

    with pytest.raises(GpuCompileError, match="refused the target of 'bogus'.*bogus_field"):
        _compile_device("gpu_device_info { bogus_field: 1 }\n", "bogus")


@needs_plugin
def test_the_users_own_errors_while_tracing_are_theirs():
    def wrong(x, w):
        return x @ w.T  # shapes do not match

    from xla_costmodel.measure import UserProgramError

    with pytest.raises(UserProgramError, match=r"test_gpu_compile.py:\d+: wrong raised TypeError while jax was "
                                              r"tracing it: dot_general") as raised:
        compile_for_gpu(wrong, *SHAPES)
    assert isinstance(raised.value.error, TypeError)
    with pytest.raises(TypeError, match="neither an array"):
        compile_for_gpu(lambda x, s: x, SHAPES[0], "static")


# ---------------------------------------------------------------- analyze, from a function


@needs_plugin
def test_analyze_of_a_function_on_a_gpu_prices_xla_gpus_own_module():
    table = xc.analyze(layer, *SHAPES, device="a100-80gb")
    # XLA:GPU's own module, with at most a note on the GEMM configurations autotuning would change.
    assert table.priced_module.split("; ")[0] == f"XLA:GPU compiled here (jax {jax.__version__})"
    compiled = compile_for_gpu(layer, *SHAPES, device="a100-80gb").module
    priced = set(table.loc[table["bound"] != "free", "kernel"])
    assert priced == {i.name for i in compiled.entry.instructions if i.opcode in ("fusion", "custom-call")}
    # granularity reads the same kernels
    fusion = table[table["opcode"] == "fusion"].iloc[0]["kernel"]
    assert xc.granularity(layer, fusion, *SHAPES, device="a100-80gb").attrs["kernel"] == fusion


@needs_plugin
def test_analyze_falls_back_to_the_simulation_when_xla_fails():
    odd = xc.get_device("h100-sxm").replace(name="odd-warp", warp_size=7)
    with pytest.warns(GpuCompileFallbackWarning, match=r"^XLA:GPU failed to compile layer for 'odd-warp': .*; pricing "
                                                        r"XLA:GPU's fusion simulated") as caught:
        table = xc.analyze(layer, *SHAPES, device=odd)
    assert len([w for w in caught if w.category is GpuCompileFallbackWarning]) == 1
    assert "\n" not in str(caught[0].message)
    assert table.priced_module == "XLA:GPU fusion simulated from the lowered module"


# ---------------------------------------------------------------- the plugin absent, and quiet


def _site_packages() -> Path:
    return Path(jax.__file__).resolve().parent.parent


def _without_plugin(tmp_path: Path) -> tuple[list[str], dict]:
    """`python` argv prefix and environment that see this interpreter's packages, less jax's CUDA plugin: a
    folder of links to every installed package but the plugin's, instead of site-packages."""
    view = tmp_path / "site"
    view.mkdir()
    for entry in _site_packages().iterdir():
        name = entry.name
        if name == "jax_plugins" or name.startswith(("jax_cuda", "jax-cuda")) or name.endswith(".pth"):
            continue
        (view / name).symlink_to(entry)
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(view)])
    return [sys.executable, "-S"], env


def test_without_the_plugin_analyze_simulates_with_one_note_naming_the_extra(tmp_path):
    argv, env = _without_plugin(tmp_path)
    script = textwrap.dedent("""
        import jax, jax.numpy as jnp, pytest
        import xla_costmodel as xc
        from xla_costmodel.gpu_compile import GpuCompileUnavailable, compile_for_gpu, gpu_compile_available
        from xla_costmodel.front import SIMULATED_FROM_LOWERED
        assert not gpu_compile_available()
        x = jax.ShapeDtypeStruct((256, 512), jnp.float32)
        w = jax.ShapeDtypeStruct((512, 128), jnp.float32)
        with pytest.raises(GpuCompileUnavailable, match=r"pip install 'xla_costmodel\\[gpu-compile\\]'"):
            compile_for_gpu(lambda x, w: (x @ w).sum(), x, w)
        t = xc.analyze(lambda x, w: jnp.tanh(x @ w).sum(), x, w, device="h100-sxm")
        assert t.priced_module.startswith(SIMULATED_FROM_LOWERED + " (jax's CUDA plugin is not installed"), t.priced_module
        assert t.priced_module.count("gpu-compile") == 1
        print("OK", jax.devices()[0].platform)
    """)
    done = subprocess.run([*argv, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "OK cpu"
    assert done.stderr == ""


def test_without_the_plugin_the_simulation_tests_of_analyze_pass(tmp_path):
    argv, env = _without_plugin(tmp_path)
    done = subprocess.run([*argv, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_priced_module.py"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1]


_USER_WORK = """
import jax.numpy as jnp
print(float(jnp.arange(4.0).sum()), jax.devices()[0].platform)
"""
_OUR_WORK = """
import jax, jax.numpy as jnp
import xla_costmodel as xc
t = xc.analyze(lambda x: jnp.tanh(x).sum(), jax.ShapeDtypeStruct((1024,), jnp.float32), device="h100-sxm")
print(t.priced_module.split(" (")[0])
"""


def _python(code: str, **env_extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK",
                                                             "TF_CPP_MIN_LOG_LEVEL")}
    env.update(PYTHONPATH=str(ROOT), **env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


@needs_plugin
def test_importing_xla_costmodel_first_nothing_is_printed_and_jax_runs_on_the_cpu():
    done = _python("import xla_costmodel\n" + _OUR_WORK + _USER_WORK)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.split("\n")[:2] == ["XLA:GPU compiled here", "6.0 cpu"]


@needs_plugin
def test_importing_jax_first_what_we_trigger_is_quiet():
    """jax's own import lines are jax's; after them, nothing of ours (a marker splits the stream)."""
    done = _python("import sys, jax\nprint('MARK', file=sys.stderr, flush=True)\n" + _OUR_WORK + _USER_WORK)
    assert done.returncode == 0, done.stderr
    assert done.stderr.split("MARK\n", 1)[1] == ""
    assert done.stdout.split("\n")[:2] == ["XLA:GPU compiled here", "6.0 cpu"]


@needs_plugin
def test_the_users_own_first_jax_call_after_importing_us_is_quiet():
    # The README's tour makes its arrays (`jnp.ones`) before any call of ours: that first call started
    # jax's backends, and the CUDA plugin's "Could not find cuda drivers" reached the user's terminal.
    done = _python("import xla_costmodel, jax\n" + _USER_WORK)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.split("\n")[0] == "6.0 cpu"
    # jax imported first (its import's own lines are jax's), then us, then the user's arrays: nothing more.
    done = _python("import sys, jax\nimport xla_costmodel\nprint('MARK', file=sys.stderr, flush=True)\n"
                   + _USER_WORK + _OUR_WORK)
    assert done.returncode == 0, done.stderr
    assert done.stderr.split("MARK\n", 1)[1] == ""
    assert done.stdout.split("\n")[:2] == ["6.0 cpu", "XLA:GPU compiled here"]


@needs_plugin
def test_jax_started_before_us_without_the_skip_we_fall_back_quietly_naming_the_fix():
    done = _python("import sys, jax\n" + _USER_WORK + "print('MARK', file=sys.stderr, flush=True)\n" + _OUR_WORK
                   + "print(t.priced_module)\n")
    assert done.returncode == 0, done.stderr
    assert done.stderr.split("MARK\n", 1)[1] == ""
    lines = done.stdout.split("\n")
    assert lines[1] == "XLA:GPU fusion simulated from the lowered module"
    assert "JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1" in lines[2]


@needs_plugin
def test_the_main_job_prints_nothing_on_stderr(tmp_path):
    # `scripts/run`'s demo starts jax's backends itself (it names jax's backend): the plugin's driver lines
    # reached the terminal until the CLI started the backends with them captured
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK",
                                                             "TF_CPP_MIN_LOG_LEVEL")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path), XLA_COSTMODEL_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run([sys.executable, "-m", "xla_costmodel.cli", "demo", "--out", str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "backend cpu" in done.stdout
    assert done.stderr == ""


@needs_plugin
def test_cli_compile_writes_xlas_module_quietly_and_refuses_bad_input_in_one_line(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent("""
        import jax, jax.numpy as jnp
        def make():
            return (lambda x, w: jnp.tanh(x @ w).sum()), (jnp.ones((128, 256)), jax.ShapeDtypeStruct((256, 64), jnp.float32))
    """))
    cli = "import sys; from xla_costmodel.cli import main; sys.exit(main(sys.argv[1:]))"

    def run(*argv):
        env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK")}
        env["PYTHONPATH"] = str(ROOT)
        return subprocess.run([sys.executable, "-c", cli, *argv], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)

    done = run("compile", "--jax", "prog.py:make", "--device", "h100-pcie", "-o", "out.hlo", "--dump-passes", "dump")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "out.hlo").read_text().startswith("HloModule ")
    assert any(p.name.endswith(".priority_fusion_dump.txt") for p in (tmp_path / "dump").iterdir())
    assert "wrote out.hlo" in done.stdout and "h100-pcie" in done.stdout
    for argv, message in ((("--device", "host"), "compile is for a GPU preset"),
                          (("--device", "h900"), "unknown device 'h900'"),
                          (("--jax", "prog.py:nope"), "has no attribute 'nope'")):
        args = ["compile", "--jax", "prog.py:make", "-o", "x.hlo", *argv]
        bad = run(*args)
        assert bad.returncode == 2, bad.stderr
        assert bad.stderr.count("\n") == 1 and message in bad.stderr
    analyzed = run("analyze", "--jax", "prog.py:make", "--device", "h100-sxm")
    assert analyzed.returncode == 0, analyzed.stderr
    # One note: XLA:GPU's own module, its GEMM configuration chosen as autotuning would (no GPU here).
    assert analyzed.stderr.startswith(f"note: priced: XLA:GPU compiled here (jax {jax.__version__}); 1 GEMM fusion "
                                      f"configuration chosen as autotuning on the GPU would")
    assert analyzed.stderr.count("\n") == 1
    fused = run("fuse", "--jax", "prog.py:make", "-o", "fused.hlo")
    assert fused.returncode == 0 and fused.stderr == "", fused.stderr
    assert run("analyze").returncode == 2


def _can_hide_directories() -> bool:
    """A private mount namespace (root and `unshare`) in which a bind mount can hide the CUDA toolkit."""
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    return done.returncode == 0


@needs_plugin
@pytest.mark.skipif(not _can_hide_directories(), reason="hiding the CUDA toolkit needs root and unshare")
def test_a_function_calling_math_compiles_on_a_machine_without_a_cuda_toolkit(tmp_path):
    """The `gpu-compile` extra is enough: with every `/usr/local/cuda*` hidden, a kernel calling `sin` and
    `exp` (LLVM links CUDA's libdevice into it) compiles, instead of falling back to the simulation."""
    toolkits = [str(p) for p in Path("/usr/local").glob("cuda*") if p.is_dir()]
    empty = tmp_path / "empty"
    empty.mkdir()
    script = textwrap.dedent("""
        import warnings, jax.numpy as jnp, xla_costmodel as xc
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            table = xc.analyze(lambda x: jnp.sin(x) * jnp.exp(x), jnp.ones(1024), device="h100-sxm")
        print(table.priced_module)
    """)
    hide = "".join(f"mount --bind {empty} {d} && " for d in toolkits)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "CUDA_ROOT", "CUDA_HOME", "CUDA_PATH")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(["unshare", "-m", "sh", "-c", f"{hide}exec {sys.executable} -c '{script}'"],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1].startswith("XLA:GPU compiled here"), done.stdout
