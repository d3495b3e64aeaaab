"""The model registry and the one interface every model implements."""

from __future__ import annotations

import dataclasses
import math

import pytest

import xla_costmodel as xc
from xla_costmodel.models import (
    CostModel,
    FusionByMaterializing,
    KernelEstimate,
    RooflineModel,
    XlaGpuModel,
    get_model,
    model_names,
    register_model,
)
from xla_costmodel.models import _base


def test_builtins_are_registered():
    assert {"xla-gpu", "roofline"} <= set(model_names())
    assert isinstance(get_model("xla-gpu"), XlaGpuModel)
    assert isinstance(get_model("roofline"), RooflineModel)
    for name in ("xla-gpu", "roofline"):
        m = get_model(name)
        assert isinstance(m, CostModel)
        assert m.name == name


def test_models_are_frozen_dataclasses_of_their_constants():
    m = get_model("xla-gpu", l2_cache_speedup=3.0)
    assert m.l2_cache_speedup == 3.0 and dataclasses.is_dataclass(m)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.l2_cache_speedup = 1.0  # type: ignore[misc]
    assert get_model(m, l1_cache_speedup=4.0) == XlaGpuModel(l2_cache_speedup=3.0, l1_cache_speedup=4.0)
    assert get_model(m) is m
    assert hash(get_model("roofline")) == hash(RooflineModel())


def test_unknown_model_lists_the_valid_names():
    with pytest.raises(ValueError, match="xla-gpu.*roofline|roofline.*xla-gpu"):
        get_model("no-such-model")


def test_register_model_refuses_a_taken_name():
    with pytest.raises(ValueError, match="already registered"):
        register_model("roofline")(lambda: None)


def test_entry_point_plugins(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Constant(FusionByMaterializing):
        name = "constant"
        seconds: float = 1e-3

        def estimate(self, kernel, device):
            return KernelEstimate(compute_s=self.seconds, memory_s=0.0, launch_s=0.0, time_s=self.seconds,
                                  bound="compute")

    class EP:
        name = "constant-plugin"

        def load(self):
            return Constant

    monkeypatch.setattr(_base, "_entry_points", lambda: {"constant-plugin": [EP()]})
    monkeypatch.setattr(_base, "_FROM_PLUGINS", set())
    monkeypatch.delitem(_base._MODELS, "constant-plugin", raising=False)
    assert "constant-plugin" in model_names()
    m = get_model("constant-plugin", seconds=2e-3)
    assert m.seconds == 2e-3
    _base._MODELS.pop("constant-plugin", None)
    # a plugin model works with analyze like the built-ins
    table = xc.analyze("hlo_fixtures/gpu_h100/jax_ops_segment_sum@small.post.hlo.gz", device="a100-40gb", model=m)
    kernels = table[table["bound"] != "free"]
    assert (kernels["time_s"] == 2e-3).all()


def test_kernel_estimate_helpers():
    free = KernelEstimate.free("bitcast")
    assert free.time_s == 0.0 and free.bound == "free" and free.priced
    bad = KernelEstimate.unpriced("no rule", {"x": 1})
    assert not bad.priced and math.isnan(bad.time_s) and bad.details == {"x": 1}
    assert "free" in _base.BOUNDS
    assert _base.dominant_bound(1.0, 2.0, 0.5) == "memory"
    assert _base.dominant_bound(2.0, 1.0, 0.5) == "compute"
    assert _base.dominant_bound(0.1, 0.2, 0.5) == "launch"
