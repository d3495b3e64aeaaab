"""The tiling search over all candidates at once (`analysis._tiling.propagate_candidates`, `models._tiled`'s
`_fastest_candidate`) against the one-by-one search it stands in for (`propagate`, `estimate`).

`best_tilings(top_k=1)` takes the vectorized path; `best_tilings()` (every tiling, sorted) still propagates
and estimates each candidate on its own, so the two must rank the same tiling first with the same figures.
The fusions are synthetic ones that reach each propagation rule, and every generic Triton fusion XLA made
in a few of the H100 captures.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

import xla_costmodel as xc
import xla_costmodel.models._tiled as tiled_model
from xla_costmodel.analysis._tiling import TilingError, candidate_tiles, propagate, propagate_candidates
from xla_costmodel.devices import get_device
from xla_costmodel.models._tiled import best_tilings, estimate, num_warps_for

H100 = get_device("h100-sxm")
A6000 = get_device("rtx-a6000-xla-test")
FIXTURES = Path(__file__).resolve().parents[1] / "hlo_fixtures" / "gpu_h100"
ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT add = f32[] add(a, b)\n}\n"


def _fusion(body: str, params: list[str], out: str):
    args = ", ".join(f"p{i}" for i in range(len(params)))
    entry_params = "\n".join(f"  p{i} = {s} parameter({i})" for i, s in enumerate(params))
    text = f"""HloModule m
{ADD}
f {{
{body}
}}
ENTRY e {{
{entry_params}
  ROOT r = {out} fusion({args}), kind=kCustom, calls=f, backend_config={{"fusion_backend_config":{{"kind":"__triton"}}}}
}}"""
    return xc.parse_hlo(text).entry.root


SYNTHETIC = {
    "softmax": (["f32[512,911]{1,0}", "f32[911]{0}"], "f32[512,911]{1,0}", """
  p0 = f32[512,911]{1,0} parameter(0)
  p1 = f32[911]{0} parameter(1)
  b0 = f32[512,911]{1,0} broadcast(p1), dimensions={1}
  m0 = f32[512,911]{1,0} multiply(p0, b0)
  c0 = f32[] constant(0)
  r0 = f32[512]{0} reduce(m0, c0), dimensions={1}, to_apply=add
  b4 = f32[512,911]{1,0} broadcast(r0), dimensions={0}
  ROOT m = f32[512,911]{1,0} multiply(m0, b4)"""),
    # a bitcast that splits a dimension (some tiles leave no box) and one that changes the layout
    "bitcasts": (["f32[64,96]{1,0}", "f32[96,64]{0,1}"], "f32[4,16,96]{2,1,0}", """
  p0 = f32[64,96]{1,0} parameter(0)
  p1 = f32[96,64]{0,1} parameter(1)
  t = f32[64,96]{1,0} bitcast(p1)
  a = f32[64,96]{1,0} add(p0, t)
  ROOT b = f32[4,16,96]{2,1,0} bitcast(a)"""),
    "transpose_reshape_slice": (["f32[32,66]{1,0}", "f32[8,32]{1,0}"], "f32[4,8,32]{2,1,0}", """
  p0 = f32[32,66]{1,0} parameter(0)
  p1 = f32[8,32]{1,0} parameter(1)
  s = f32[32,32]{1,0} slice(p0), slice={[0:32], [1:65:2]}
  t = f32[32,32]{1,0} transpose(s), dimensions={1,0}
  r = f32[4,8,32]{2,1,0} reshape(t)
  b = f32[4,8,32]{2,1,0} broadcast(p1), dimensions={1,2}
  ROOT m = f32[4,8,32]{2,1,0} multiply(r, b)"""),
    "concatenate": (["f32[32,128]", "f32[64,128]"], "f32[96,128]", """
  p0 = f32[32,128] parameter(0)
  p1 = f32[64,128] parameter(1)
  x = f32[32,128] exponential(p0)
  ROOT c = f32[96,128] concatenate(x, p1), dimensions={0}"""),
    # the same parameter reached with different tiles on different paths (a tile per path, deduped by
    # `propagate` where two paths agree)
    "diamond": (["f32[16,16]{1,0}"], "f32[16,16]{1,0}", """
  p0 = f32[16,16]{1,0} parameter(0)
  t = f32[16,16]{1,0} transpose(p0), dimensions={1,0}
  e = f32[16,16]{1,0} exponential(p0)
  a = f32[16,16]{1,0} add(e, t)
  c0 = f32[] constant(0)
  r = f32[16]{0} reduce(a, c0), dimensions={1}, to_apply=add
  b = f32[16,16]{1,0} broadcast(r), dimensions={0}
  ROOT m = f32[16,16]{1,0} multiply(a, b)"""),
    "multi_output": (["f32[64]"], "(f32[4,4], f32[64])", """
  p0 = f32[64] parameter(0)
  a = f32[64] abs(p0)
  b = f32[4,4,4] bitcast(a)
  c = f32[] constant(0)
  r = f32[4,4] reduce(b, c), dimensions={1}, to_apply=add
  ROOT t = (f32[4,4], f32[64]) tuple(r, a)"""),
}


def _h100_triton_fusions(names: list[str]) -> list:
    out = []
    for name in names:
        with gzip.open(FIXTURES / f"{name}.post.hlo.gz", "rt") as f:
            module = xc.parse_hlo(f.read())
        for comp in module.computations:
            for instr in comp.instructions:
                if instr.opcode == "fusion" and '"kind":"__triton"' in str(instr.raw_attributes.get("backend_config")):
                    out.append(pytest.param(instr, id=f"{name}:{instr.name}"))
    return out


KERNELS = ([pytest.param(_fusion(body, params, out), id=name) for name, (params, out, body) in SYNTHETIC.items()]
           + _h100_triton_fusions(["jax_nn_attention_grad@small", "flax_linen_attention_bf16_fwd@small",
                                   "equinox_mlp_grad@small", "flax_linen_groupnorm_grad@large"]))


def test_the_captures_hold_generic_triton_fusions():
    assert len(KERNELS) > len(SYNTHETIC) + 5


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("device", [H100, A6000], ids=["h100", "a6000"])
def test_fastest_tiling_is_the_one_by_one_searchs_first(kernel, device):
    try:
        every = best_tilings(kernel, device)
    except TilingError:
        with pytest.raises(TilingError):
            best_tilings(kernel, device, top_k=1)
        return
    (best,) = best_tilings(kernel, device, top_k=1)
    assert best == every[0]  # tiles, warps, blocks, flops, bytes and every time term


@pytest.mark.parametrize("kernel", KERNELS)
def test_propagate_candidates_is_propagate_per_candidate(kernel):
    cands = candidate_tiles(kernel)
    limit = 4096
    tc = propagate_candidates(kernel, cands, max_read_tile=limit)
    if tc is None:
        pytest.skip("a fusion the vectorized walk leaves to propagate")
    for i, tile in enumerate(cands):
        try:
            one = propagate(kernel, tile, max_read_tile=limit)
        except TilingError:
            assert not tc.valid[i], tile
            continue
        assert tc.valid[i], tile
        assert tc.num_blocks[i] == one.num_blocks
        got = [(id(n.hlo), tuple(n.sizes[i].tolist()), tuple(n.strides[i].tolist()), int(n.blocks[i]))
               for n in tc.nodes if n.active[i]]
        want = [(id(t.hlo), t.tile.sizes, t.tile.strides, t.blocks) for t in one.instructions]
        assert got == want, tile
        assert [(id(h), tuple(tc.nodes[k].sizes[i].tolist())) for h, k in tc.roots] == \
            [(id(h), t.sizes) for h, t in one.roots]


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_pruning_bound_is_below_every_candidates_time(kernel, monkeypatch):
    """`_time_lower_bound` may only skip a candidate whose time it is below: checked against `estimate`
    of every candidate it was computed for."""
    seen = {}
    real_bound, real_prop = tiled_model._time_lower_bound, tiled_model.propagate_candidates

    def bound(*args):
        seen["bound"] = real_bound(*args)
        return seen["bound"]

    def prop(k, cands, **kw):
        seen["cands"] = cands
        return real_prop(k, cands, **kw)

    monkeypatch.setattr(tiled_model, "_time_lower_bound", bound)
    monkeypatch.setattr(tiled_model, "propagate_candidates", prop)
    try:
        best_tilings(kernel, H100, top_k=1)
    except TilingError:
        pytest.skip("no valid tiling")
    if seen.get("bound") is None:
        pytest.skip("no bound for this fusion")
    checked = 0
    for tile, low in zip(seen["cands"], seen["bound"].tolist()):
        try:
            t = propagate(kernel, tile)
        except TilingError:
            continue
        e = estimate(t, H100, num_warps_for(t))
        if not e.infinite:
            assert low <= e.exec_s, tile
            checked += 1
    assert checked


def test_pow2_ceil_array_is_pow2_ceil():
    from xla_costmodel.analysis._tiling import pow2_ceil, pow2_ceil_array

    xs = [0, 1, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, 911, (1 << 31) - 1, 1 << 31, (1 << 40) + 1]
    assert pow2_ceil_array(np.array(xs, dtype=np.int64)).tolist() == [pow2_ceil(x) for x in xs]
