"""`granularity`: a kernel under every candidate launch configuration or tiling.

References: XLA's own launch dimensions (`models._launch`, checked against XLA
elsewhere) must come out as one row, priced exactly as `xla-gpu` prices the
kernel; XLA's tiled model picks (4, 911) with 4 warps for the softmax of
`gpu_indexing_performance_model_test.cc` and prices its configured (1, 911)
tiling at 5 µs (±1) on XLA's A6000 test device.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import xla_costmodel as xc
from xla_costmodel.devices import get_device
from xla_costmodel.models import GranularityError
from xla_costmodel.models._launch import launch_dimensions

ROOT = Path(__file__).resolve().parent.parent
HLO = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

fused_ew {
  p0 = f32[4096,1024] parameter(0)
  p1 = f32[4096,1024] parameter(1)
  m = f32[4096,1024] multiply(p0, p1)
  ROOT e = f32[4096,1024] exponential(m)
}

fused_small {
  p0 = f32[64,1024] parameter(0)
  ROOT e = f32[64,1024] exponential(p0)
}

fused_red {
  p0 = f32[4096,1024] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4096] reduce(p0, z), dimensions={1}, to_apply=add
}

triton_softmax_computation {
  param_0 = f32[512,911]{1,0} parameter(0)
  param_1 = f32[911]{0} parameter(1)
  broadcast_0 = f32[512,911]{1,0} broadcast(param_1), dimensions={1}
  multiply_0 = f32[512,911]{1,0} multiply(param_0, broadcast_0)
  constant_0 = f32[] constant(0)
  reduce_0 = f32[512]{0} reduce(multiply_0, constant_0), dimensions={1}, to_apply=add
  broadcast_4 = f32[512,911]{1,0} broadcast(reduce_0), dimensions={0}
  ROOT multiply = f32[512,911]{1,0} multiply(multiply_0, broadcast_4)
}

ENTRY e {
  a = f32[4096,1024] parameter(0)
  b = f32[4096,1024] parameter(1)
  x0 = f32[512,911] parameter(2)
  x1 = f32[911] parameter(3)
  w = f32[1024,256] parameter(4)
  q = f32[64,1024] parameter(5)
  small = f32[64,1024] fusion(q), kind=kLoop, calls=fused_small
  ew = f32[4096,1024] fusion(a, b), kind=kLoop, calls=fused_ew
  red = f32[4096] fusion(ew), kind=kInput, calls=fused_red
  sm = f32[512,911] fusion(x0, x1), kind=kCustom, calls=triton_softmax_computation, backend_config={"fusion_backend_config": {"kind":"__triton","block_level_fusion_config":{"output_tiles":[{"sizes":["1","911"]}],"num_warps":"2"}}}
  d = f32[4096,256] dot(ew, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[4096], f32[512,911], f32[4096,256], f32[64,1024]) tuple(red, sm, d, small)
}
"""
MODULE = xc.parse_hlo(HLO)
H100 = get_device("h100-sxm")


@pytest.mark.parametrize("kernel", ["ew", "red"])
def test_xlas_launch_is_a_row_priced_as_xla_gpu_prices_the_kernel(kernel):
    df = xc.granularity(MODULE, kernel, device="h100-sxm")
    k = MODULE.entry.instruction(kernel)
    ld = launch_dimensions(k, H100)
    xla = df[df.xla_choice]
    assert len(xla) == 1
    row = xla.iloc[0]
    assert (row.blocks, row.threads_per_block, row.unroll) == (ld.num_blocks, ld.threads_per_block, ld.unroll)
    assert row.time_s == xc.get_model("xla-gpu").estimate(k, H100).time_s
    assert df.attrs["kind"] == "launch" and df.attrs["emitter"] == ld.emitter
    # the candidates: the work split among the threads, sorted by time, the fastest marked
    assert df.time_s.is_monotonic_increasing and df.best.sum() == 1 and df.loc[0, "best"]
    work = 4096 * 1024
    for r in df[~df.xla_choice].itertuples():
        assert r.blocks == math.ceil(work / (r.threads_per_block * r.unroll))
        assert r.threads_per_block <= H100.threads_per_block_limit
        resident = min(H100.threads_per_core_limit // r.threads_per_block, 32)
        assert r.waves == math.ceil(r.blocks / (resident * H100.core_count))
        assert r.occupancy == pytest.approx(resident * r.threads_per_block / H100.threads_per_core_limit)


def test_too_few_blocks_are_slower():
    # 65536 elements: 1024 threads x unroll 8 leave 8 blocks for 132 SMs; XLA's model caps each block's
    # bandwidth (clock x 32 B), so the grid with the fewest blocks is the slowest.
    df = xc.granularity(MODULE, "small", device="h100-sxm")
    fewest = df[df.blocks == df.blocks.min()]
    assert fewest.blocks.iloc[0] < H100.core_count
    assert (fewest.time_s > df[df.xla_choice].time_s.iloc[0]).all()
    assert fewest.time_s.iloc[0] == df.time_s.max()


def test_triton_fusion_tilings():
    a6000 = get_device("rtx-a6000-xla-test")
    df = xc.granularity(MODULE, "sm", device=a6000)
    assert df.attrs["kind"] == "tiled"
    xla = df[df.xla_choice].iloc[0]
    assert (xla.tile, xla.num_warps) == ((1, 911), 2)
    assert (xla.time_s - a6000.kernel_launch_overhead_s) * 1e6 == pytest.approx(5, abs=1)
    best = df[df.best].iloc[0]
    assert (best.tile, best.num_warps) == ((4, 911), 4)  # XLA's TryFindBestTilingForFusion
    assert len(df) > 20 and df.time_s.map(math.isfinite).all()


def test_a_loop_fusion_as_a_tiled_fusion_and_two_gpus():
    h = xc.granularity(MODULE, "ew", device="h100-sxm", tiled=True)
    b = xc.granularity(MODULE, "ew", device="b200", tiled=True)
    assert h.attrs["kind"] == b.attrs["kind"] == "tiled"
    assert h[h.xla_choice].best.iloc[0]  # without a configured tiling, XLA's choice is its search's best
    # memory bound: the B200's 7.7 TB/s beat the H100's 3.4 TB/s
    assert b.time_s.min() < h.time_s.min()


def test_errors_name_the_kernel():
    with pytest.raises(GranularityError, match="no instruction named 'nope'.*small, ew, red, sm"):
        xc.granularity(MODULE, "nope")
    with pytest.raises(GranularityError, match="library emitter"):
        xc.granularity(MODULE, "d")
    with pytest.raises(GranularityError, match="does not price launch configurations"):
        xc.granularity(MODULE, "ew", model="roofline")
    with pytest.raises(GranularityError, match="is a cpu"):
        xc.granularity(MODULE, "ew", device="host")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "xla_costmodel.cli", "granularity", *args], capture_output=True,
                          text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu",
                                                     "PATH": "/usr/bin:/bin"})


def test_cli(tmp_path):
    f = tmp_path / "k.hlo"
    f.write_text(HLO)
    out = _cli(str(f), "--kernel", "sm", "--device", "rtx-a6000-xla-test")
    assert out.returncode == 0, out.stderr
    assert "XLA's choice" in out.stdout and "tile 1x911, 2 warps (XLA)" in out.stdout
    js = _cli(str(f), "--kernel", "ew", "--device", "b200", "--json")
    rows = json.loads(js.stdout)
    assert sum(r["xla_choice"] for r in rows) == 1 and sum(r["best"] for r in rows) == 1
    bad = _cli(str(f), "--kernel", "nope", "--device", "h100-sxm")
    assert bad.returncode == 2 and bad.stderr.startswith("error: no instruction named 'nope'")
    assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert f.read_text() == HLO  # the input is never written
