"""cuFFT (`fft` instructions) and XLA's TopK kernel (`__gpu$TopK`) priced from their kernels' structure
(`models._library_calls.fft_estimate`, `topk_estimate`).

The reference: the H100 capture's 4 cuFFT calls (`jax_numpy_fft2`: RFFT then IRFFT of 64x64 and 512x512
images), whose kernels per call (two transform kernels; for the IRFFT a `MemcpyD2D` of the input first and
cuBLAS `scal` last) the capture's launch counts give; and XLA:GPU's own compile (deviceless) of the corpus
programs `jax_lax_top_k` and `jax_numpy_fft_long`, which shows what XLA emits for them.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from xla_costmodel import analyze, get_device
from xla_costmodel.hlo import parse_hlo
from xla_costmodel.models import get_model

ROOT = Path(__file__).resolve().parents[1]
H100 = get_device("h100-sxm")


def _post(case: str):
    with gzip.open(ROOT / "hlo_fixtures" / "gpu_h100" / f"{case}.post.hlo.gz", "rt") as f:
        return parse_hlo(f.read(), source=case)


def test_cufft_calls_on_the_h100_capture():
    """Measured, not tuned: the capture's 4 cuFFT calls come out at 0.69x-0.93x of their time per run (the
    512x512 RFFT's two kernels run at ~1.9 TB/s, below the 3.35 TB/s the traffic is priced at), and each
    launches what the capture counts."""
    rows = pd.read_parquet(ROOT / "calibration" / "h100-sxm_corpus.parquet",
                           columns=["case", "hlo_op", "min_per_run_s", "launches"])
    model = get_model("xla-gpu")
    ratios = []
    for size in ("small", "large"):
        case = f"jax_numpy_fft2@{size}"
        for _c, fft in _post(case).instructions():
            if fft.opcode != "fft":
                continue
            row = rows[(rows["case"] == case) & (rows["hlo_op"] == fft.name)].iloc[0]
            est = model.estimate(fft, H100)
            assert est.priced and est.details["library"] == "cufft"
            assert est.details["launches"] == row["launches"]
            ratios.append(est.time_s / row["min_per_run_s"])
    assert len(ratios) == 4
    assert all(0.6 < r < 1.25 for r in ratios), ratios


def _fft(kind: str, shape: str, out: str, lengths: str):
    return parse_hlo(f"""HloModule m
ENTRY e {{
  a = {shape} parameter(0)
  ROOT f = {out} fft(a), fft_type={kind}, fft_length={{{lengths}}}
}}""").entry.root


def test_fft_kernels_follow_the_transform():
    model = get_model("xla-gpu")
    fwd = model.estimate(_fft("FFT", "c64[64,65536]", "c64[64,65536]", "65536"), H100)
    inv = model.estimate(_fft("IFFT", "c64[64,65536]", "c64[64,65536]", "65536"), H100)
    assert [n for n, _t in fwd.details["kernel_times_s"]] == ["fft pass 1", "fft pass 2"]   # 2^16 > 4096
    assert [n for n, _t in inv.details["kernel_times_s"]] == ["fft pass 1", "fft pass 2", "scale by 1/n"]
    rfft = model.estimate(_fft("RFFT", "f32[8,512,512]", "c64[8,512,257]", "512,512"), H100)
    assert rfft.details["launches"] == 2 and rfft.time_s < fwd.time_s
    # the traffic of a large transform bounds it: 32 MiB read and written per pass
    assert fwd.memory_s == pytest.approx(2 * 2 * 64 * 65536 * 8 / H100.memory_bandwidth_bytes_per_s)
    module = parse_hlo("""HloModule m
ENTRY e {
  a = c64[64,65536] parameter(0)
  ROOT f = c64[64,65536] fft(a), fft_type=FFT, fft_length={65536}
}""")
    t = pd.DataFrame(analyze(module, device="h100-sxm", model="xla-gpu"))
    assert float(t.loc[t["kernel"] == "f", "time_s"].iloc[0]) == pytest.approx(fwd.time_s)


_TOPK = """HloModule m
gt {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT
}}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  ROOT t = (f32[{rows},{k}], s32[{rows},{k}]) custom-call(x), custom_call_target="__gpu$TopK", called_computations={{gt}}
}}"""


def test_topk_kernel_priced_from_its_structure():
    """One block per row, threads as XLA launches them; each element of a thread's slice costs one HBM
    load latency and its compare (one load after another), the merges are fixed; rows beyond one wave of
    resident blocks add waves."""
    from xla_costmodel.models._gpu_latency import ALU_LATENCY_CYCLES, HBM_LATENCY_CYCLES

    model = get_model("xla-gpu")

    def est(rows, cols, k):
        return model.estimate(parse_hlo(_TOPK.format(rows=rows, cols=cols, k=k)).entry.root, H100)

    small = est(64, 16384, 8)
    assert small.priced and not small.note and small.details["routine"] == "topk"
    assert (small.details["blocks"], small.details["threads"], small.details["waves"]) == (64, 1024, 1)
    long_ = est(64, 1 << 18, 8)
    exec_small, exec_long = small.details["exec_s"], long_.details["exec_s"]
    per_element = (HBM_LATENCY_CYCLES + 2 * ALU_LATENCY_CYCLES) / (H100.clock_rate_ghz * 1e9)
    assert exec_long - exec_small == pytest.approx((256 - 16) * per_element)    # slices of 16 and 256
    assert est(132 * 2 + 1, 16384, 8).details["waves"] == 2
    assert est(64, 16384, 16).time_s > small.time_s   # K = 16: longer insertions and merges


def test_corpus_programs_produce_topk_and_multi_kernel_fft(tmp_path):
    """XLA:GPU's own compile, without a GPU: `jax.lax.top_k` of 8 in rows of 16384 (and of 16 in 32768) becomes
    `__gpu$TopK`, launched as XLA's thunk sequence says (one block per row; 1024 and 512 threads), which is
    what the TopK price is built on; the corpus's long FFT program compiles to `fft` instructions."""
    import re

    from xla_costmodel import corpus
    from xla_costmodel.gpu_compile import compile_for_gpu, gpu_compile_available, gpu_compile_unavailable_reason
    from xla_costmodel.models._launch import topk_launch

    if not gpu_compile_available():
        pytest.skip(gpu_compile_unavailable_reason())
    for size in ("small", "large"):
        fn, args = corpus.PROGRAMS["jax_lax_top_k"].build(size)
        result = compile_for_gpu(fn, *args, dump_passes=tmp_path / size)
        module = result.module
        t = pd.DataFrame(analyze(module, device="h100-sxm", model="xla-gpu"))
        calls = [i for _c, i in module.instructions() if i.opcode == "custom-call"]
        assert [c.attribute("custom_call_target") for c in calls] == ["__gpu$TopK"]
        assert t.loc[t["kernel"] == calls[0].name, "time_s"].iloc[0] > 0
        thunks = next((tmp_path / size).glob("*thunk_sequence.txt")).read_text()
        grid, threads = re.search(r"topk grid: \[(\d+), 1, 1\] threads: \[(\d+), 1, 1\]", thunks).groups()
        assert topk_launch(calls[0])[:2] == (int(grid), int(threads))
    fn, args = corpus.PROGRAMS["jax_numpy_fft_long"].build("small")
    t = pd.DataFrame(analyze(compile_for_gpu(fn, *args).module, device="h100-sxm", model="xla-gpu"))
    assert set(t.loc[t["opcode"] == "fft", "kernel"]) == {"fft.0.0", "fft.2.0"}
