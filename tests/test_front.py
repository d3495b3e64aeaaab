"""The front door (`xla_costmodel.front`, issue 34 §1): what the user gave is resolved once, into one
`DeviceSpec` and one `CostModel`, and that very pair is what the engine below is given."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

import xla_costmodel as xc
from xla_costmodel.front import resolve_device_and_model
from xla_costmodel.models import KernelEstimate

HLO = """HloModule m

ENTRY e {
  p = f32[256,256] parameter(0)
  e = f32[256,256] exponential(p)
  ROOT a = f32[256,256] add(e, p)
}
"""


@dataclass(frozen=True)
class _SeesDevices:
    """A plain cost model (only `name` and `estimate`, as the README's plugin) that notes each device it is given."""

    name: str = "sees-devices"
    seen: list = field(default_factory=list, compare=False)

    def estimate(self, instr, device):
        self.seen.append(device)
        return KernelEstimate(compute_s=1e-6, memory_s=1e-6, launch_s=0.0, time_s=1e-6, bound="memory")


def test_analyze_hands_every_kernel_the_one_device_it_resolved():
    custom = xc.get_device("h100-sxm").replace(name="h100-at-1ghz", clock_rate_ghz=1.0)
    model = _SeesDevices()
    table = xc.analyze(HLO, device=custom, model=model)
    assert table.device_name == "h100-at-1ghz" and table.model_name == "sees-devices"
    assert model.seen and all(d is custom for d in model.seen), "a device was rebuilt or looked up again"
    assert int((table["bound"] != "free").sum()) == len(model.seen) == 2  # exponential, add: one estimate each


def test_names_resolve_to_the_pair_the_engine_gets():
    dev, model = resolve_device_and_model("H100_SXM", "roofline")
    assert dev is xc.get_device("h100-sxm") and model.name == "roofline"
    dev, model = resolve_device_and_model()  # the defaults: XLA's GPU model on an H100
    assert (dev.name, model.name) == (xc.models.DEFAULT_DEVICE, xc.models.DEFAULT_MODEL) == ("h100-sxm", "xla-gpu")


@pytest.mark.parametrize("device, model, message", [
    ("h100-sxx", "roofline", r"unknown device 'h100-sxx'; valid names: .*h100-sxm"),
    ("h100-sxm", "no-such-model", r"no-such-model"),
])
def test_bad_names_fail_before_any_work(device, model, message):
    with pytest.raises(ValueError, match=message):
        xc.analyze(lambda x: x, object(), device=device, model=model)  # never traced: the names fail first


def test_no_function_hides_a_subpackage():
    """`xc.measure`, `xc.compare`, ... are the subpackages (issue 34 §5): each top-level folder of the package
    is reached as itself, and the functions have names of their own (`measure_kernels`, `compare_models`)."""
    import types
    from pathlib import Path

    root = Path(xc.__file__).parent
    packages = sorted(p.name for p in root.iterdir() if (p / "__init__.py").is_file())
    assert {"measure", "compare", "plot", "front", "models"} <= set(packages)
    # (`cli`, `zoo`, `corpus` are imported on first use: not yet an attribute, and nothing else by their name.)
    hidden = [name for name in packages if name in vars(xc) and not isinstance(vars(xc)[name], types.ModuleType)]
    assert not hidden, f"a top-level name hides these subpackages: {hidden}"
    assert all(isinstance(getattr(xc, name), types.ModuleType) for name in ("measure", "compare", "plot", "front"))
    assert callable(xc.measure_kernels) and callable(xc.compare_models)
