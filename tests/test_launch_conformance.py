"""Our emitter model's launch grids against XLA:GPU's thunk sequence, kernel by kernel.

The tests that compile need the CUDA plugin (`jax_plugins.xla_cuda12`); they compile with XLA:GPU
without a GPU and skip with a reason where it is missing. The equal shares asserted are the ones
measured: every kernel of these programs that the comparison finds gets XLA's grid and block size
(`scripts/fusion_conformance.py --grids --program ...`)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("jax")

from xla_costmodel.fusion import _conformance as conf  # noqa: E402
from xla_costmodel.fusion import _launch_conformance as grids  # noqa: E402
from xla_costmodel.gpu_compile import gpu_compile_available  # noqa: E402

needs_plugin = pytest.mark.skipif(not gpu_compile_available(),
                                  reason="jax_plugins.xla_cuda12 is not installed: no deviceless XLA:GPU compile")

THUNKS = """001: kCopy         [source       | next=002 (1)] kCopy
002: kCustomKernel [prev=001 (1) | next=003 (1)] sort_7_1 grid: [32, 1, 1] threads: [512, 1, 1]  shared_memory: 0 bytes
003: kCustomKernel [prev=002 (1) | sink        ] loop_add_fusion grid: [2, 3, 1] threads: [128, 2, 1]  shared_memory: 2048 bytes
"""


def test_read_thunk_launches():
    launches = grids.read_thunk_launches(THUNKS)
    assert [t.kernel for t in launches] == ["sort_7_1", "loop_add_fusion"]  # the copy is no kernel
    second = launches[1]
    assert (second.grid, second.threads, second.shared_memory_bytes) == ((2, 3, 1), (128, 2, 1), 2048)
    assert (second.num_blocks, second.threads_per_block) == (6, 256)


def test_a_dump_without_the_thunk_sequence_is_a_clear_error():
    dump = conf.GpuCompileDump(program="hand", device="h100-sxm", dump_dir="", before_fusion_text="",
                               after_fusion_text="", fusion_log_text="", optimized_text=MODULE)
    with pytest.raises(ValueError, match="thunk_sequence.txt"):
        grids.compare_launch_grids(dump)


@needs_plugin
@pytest.mark.parametrize("program, emitters", [
    # a row and a column reduction, a tiled transpose (128 threads), a loop
    ("harness:layernorm_transpose", {"reduction", "transpose", "loop"}),
    # scatters: the emitter's distributed updates, in whole warps
    ("zoo:gather_scatter", {"scatter", "loop"}),
    # bitonic sorts in XLA's sort fusions (tile/4 threads a block)
    ("zoo:sort_topk", {"sort"}),
    # a 2,048-long sort in one tiled kernel, and XLA's TopK custom kernel ("topk")
    ("harness:sort_topk", {"sort", "library"}),
    # bf16 transposes on XLA's packed transpose emitter (64 x 64 tiles: 2 bytes an element)
    ("corpus:flax_linen_attention_bf16_fwd:small", {"transpose", "triton"}),
])
def test_launch_grids_equal_xla(program, emitters):
    table = grids.compare_launch_grids(conf.compile_with_fusion_dumps(program, device="h100-sxm"))
    assert len(table) > 0
    assert emitters <= set(table.emitter)
    bad = table[~table.equal]
    assert bad.empty, bad[["kernel", "emitter", "detail", "xla_grid", "xla_threads", "ours_blocks",
                           "ours_threads_per_block"]].to_string()
    summary = grids.summarize_launch_grids(table)
    assert summary["share_equal"] == 1.0 and summary["mismatch_causes"] == {}


MODULE = """HloModule m, is_scheduled=true

%fused_add (p0: f32[256,1024]) -> f32[256,1024] {
  %p0 = f32[256,1024]{1,0} parameter(0)
  ROOT %add.1 = f32[256,1024]{1,0} add(%p0, %p0)
}

ENTRY %main (x: f32[256,1024]) -> f32[256,1024] {
  %x = f32[256,1024]{1,0} parameter(0)
  ROOT %loop_add_fusion.1 = f32[256,1024]{1,0} fusion(%x), kind=kLoop, calls=%fused_add
}
"""


def test_compare_launch_grids_on_a_dump_without_compiling():
    # 262,144 f32 elements: under 132 SMs x 2,048 threads, so no unrolling: 2,048 blocks of 128
    thunks = ("001: kCustomKernel [source | sink] loop_add_fusion_1 grid: [2048, 1, 1] threads: [128, 1, 1]  "
              "shared_memory: 0 bytes\n"
              "002: kCustomKernel [source | sink] no_such_kernel grid: [1, 1, 1] threads: [32, 1, 1]  "
              "shared_memory: 0 bytes\n")
    dump = conf.GpuCompileDump(program="hand", device="h100-sxm", dump_dir="", before_fusion_text="",
                               after_fusion_text="", fusion_log_text="", thunk_text=thunks,
                               optimized_text=MODULE)
    table = grids.compare_launch_grids(dump)
    first, second = table.iloc[0], table.iloc[1]
    assert (first.kernel, first.emitter, first.ours_blocks, first.ours_threads_per_block, first.equal) == (
        "loop_add_fusion_1", "loop", 2048, 128, True)
    # a kernel no instruction is named after is reported, not guessed
    assert second.cause == "unmatched" and not second.equal and math.isnan(second.ours_blocks)
    summary = grids.summarize_launch_grids(table)
    assert (summary["kernels"], summary["equal"], summary["mismatch_causes"]) == (2, 1, {"unmatched": 1})
