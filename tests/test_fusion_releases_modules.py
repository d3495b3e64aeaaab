"""A fusion pass lets its module go: nothing of a finished `simulate_fusion` / `search_fusion` stays alive
once the caller drops the result (the per-body caches are keyed weakly, but their values reference the bodies'
instructions and so their module: without `release_body_state` every run kept its whole working module)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

import xla_costmodel as xc
from xla_costmodel.hlo import HloModule

FIXTURES = Path(__file__).resolve().parent.parent / "hlo_fixtures"


def _modules_alive() -> int:
    gc.collect()
    return sum(isinstance(o, HloModule) for o in gc.get_objects())


#: XLA's GEMM rewriting and SoftmaxRewriterTriton: the latter decides each diamond on modules of its own
#: (the diamond fused and tiled, and fused as XLA would without the pass), which must go too.
REWRITTEN = {"gemm_rewrites": True, "triton_softmax": True}


@pytest.mark.parametrize("name, options", [
    ("mlp_grad.pre.hlo", {}),
    ("gpu_h100/equinox_mha_fwd@large.pre.hlo.gz", {}),
    ("gpu_h100/equinox_mha_fwd@large.pre.hlo.gz", REWRITTEN),
], ids=["mlp_grad", "equinox_mha_fwd", "equinox_mha_fwd-rewritten"])
def test_simulate_fusion_keeps_no_module_alive(name, options, monkeypatch):
    from xla_costmodel.fusion import _simulate

    # The diamonds' decisions are kept between runs (by text): start cold, so that they are made here.
    monkeypatch.setattr(_simulate, "_SOFTMAX_DECISIONS", {})
    before = _modules_alive()
    result = xc.simulate_fusion(xc.load_hlo(FIXTURES / name), device="h100-sxm", model="xla-gpu", **options)
    assert result.steps is not None and _modules_alive() > before
    del result
    assert _modules_alive() == before


def test_search_fusion_keeps_no_module_alive():
    before = _modules_alive()
    result = xc.search_fusion(xc.load_hlo(FIXTURES / "mlp_grad.pre.hlo"), device="h100-sxm", budget_s=0.5)
    del result
    assert _modules_alive() == before
