"""Cost-model plugins through the entry-point group `xla_costmodel.models`.

The example plugin (`tests/plugin_example/`) is made visible to
`importlib.metadata` without pip: a temporary `*.dist-info` with its entry
points on a temporary `sys.path` entry (`plugin_example/temp_install.py`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from pathlib import Path

import pytest

import xla_costmodel as xc
from xla_costmodel.devices import get_device
from xla_costmodel.models import CostModel, ModelPluginError, RooflineModel, get_model, model_names
from xla_costmodel.models import _base
from conftest import ADD, load_temp_install


TI = load_temp_install()


@pytest.fixture
def plugin(tmp_path):
    with TI.installed(tmp_path) as names:
        yield names


def test_pyproject_declares_the_example_entry_point():
    assert TI.entry_points() == {"example-streaming": "xla_costmodel_example_plugin:StreamingModel"}
    assert TI.pyproject()["project"]["name"] == "xla-costmodel-example-plugin"


def test_example_plugin_is_found_through_importlib_metadata(plugin):
    eps = {ep.name: ep for ep in importlib.metadata.entry_points(group=_base.ENTRY_POINT_GROUP)}
    assert eps["example-streaming"].value == "xla_costmodel_example_plugin:StreamingModel"
    assert eps["example-streaming"].dist.name == "xla-costmodel-example-plugin"
    names = model_names()
    assert "example-streaming" in names
    assert names[: len(names) - 1] == tuple(n for n in names if n != "example-streaming")  # plugins come last
    # listing does not import the plugin
    assert TI.PACKAGE not in sys.modules
    m = get_model("example-streaming")
    assert isinstance(m, CostModel) and m.name == "example-streaming"
    assert type(m).__module__ == TI.PACKAGE
    assert get_model("example-streaming", flops_per_element=2.0).flops_per_element == 2.0


def test_plugin_is_gone_after_the_temporary_install(tmp_path):
    with TI.installed(tmp_path):
        get_model("example-streaming")
    assert "example-streaming" not in model_names()
    assert TI.PACKAGE not in sys.modules
    with pytest.raises(ValueError, match="unknown cost model 'example-streaming'"):
        get_model("example-streaming")


def test_analyze_accepts_the_plugin_by_name(plugin):
    h100 = get_device("h100-sxm")
    table = xc.analyze(ADD, device="h100-sxm", model="example-streaming")
    assert table.model_name == "example-streaming"
    row = table[table["kernel"] == "c"].iloc[0]
    # 3 x 4 MiB streamed at 3.35232e12 B/s = 3.7534937 us; 1,048,576 elements at
    # 6.690816e13 flop/s = 15.67 ns; plus h100-sxm's 1 us launch (numbers worked by hand).
    assert h100.memory_bandwidth_bytes_per_s == 3.35232e12 and h100.kernel_launch_overhead_s == 1e-6
    assert row["memory_s"] == pytest.approx(3.7534937e-6, rel=1e-6)
    assert row["compute_s"] == pytest.approx(15.6719e-9, rel=1e-4)
    assert row["time_s"] == pytest.approx(4.7534937e-6, rel=1e-6)
    assert row["bound"] == "memory"
    # the host CPU works too, and every kernel of a real module is priced
    t = xc.analyze("hlo_fixtures/mlp_fwd.post.hlo", device="host", model="example-streaming")
    kernels = t[t["bound"] != "free"]
    assert len(kernels) and kernels["priced"].all() and (kernels["time_s"] > 0).all()


def test_simulate_fusion_accepts_the_plugin_by_name(plugin):
    r = xc.simulate_fusion("hlo_fixtures/mlp_fwd.pre.hlo", device="h100-sxm", model="example-streaming")
    assert r.model == "example-streaming"
    assert r.kernels_after < r.kernels_before
    assert r.time_after_s < r.time_before_s


def test_plugin_in_a_combined_model(plugin):
    m = get_model("min(example-streaming,roofline)")
    assert m.name == "min(example-streaming,roofline)"
    table = xc.analyze(ADD, device="h100-sxm", model="min(example-streaming,roofline)")
    e = table.estimates["c"]
    # both models stream 12 MiB here; the roofline also charges 1 flop per element: equal times
    assert e.details["model"] in ("example-streaming", "roofline")
    assert e.time_s == pytest.approx(4.7534937e-6, rel=1e-6)


BROKEN = {
    "broken-plugins": {
        "broken-missing-module": "xla_costmodel_no_such_module:Model",
        "broken-missing-attr": "xla_costmodel_example_plugin:NoSuchModel",
        "broken-raises": "xla_costmodel_broken_plugin_mod:Model",
        "broken-not-callable": "xla_costmodel_example_plugin:__all__",
        "broken-not-a-model": "builtins:dict",
    }
}


@pytest.mark.parametrize(
    "name, cause",
    [
        ("broken-missing-module", "ModuleNotFoundError"),
        ("broken-missing-attr", "AttributeError"),
        ("broken-raises", "RuntimeError: plugin import failed on purpose"),
        ("broken-not-callable", "names a list, not a model class or factory"),
        ("broken-not-a-model", "built a dict without name, estimate (a cost model needs name and estimate"),
    ],
)
def test_a_failing_plugin_names_itself_and_its_entry_point(tmp_path, name, cause):
    (tmp_path / "xla_costmodel_broken_plugin_mod.py").write_text(
        "raise RuntimeError('plugin import failed on purpose')\n", encoding="utf-8")
    with TI.installed(tmp_path, extra=BROKEN):
        # listing never imports, so broken plugins are listed and the others still work
        assert name in model_names()
        assert isinstance(get_model("roofline"), RooflineModel)
        with pytest.raises(ModelPluginError) as info:
            get_model(name)
        msg = str(info.value)
        assert f"cost-model plugin {name!r}" in msg
        assert BROKEN["broken-plugins"][name] in msg  # the entry point, as declared
        assert "distribution 'broken-plugins" in msg
        assert "xla_costmodel.models" in msg
        assert cause in msg
        assert isinstance(info.value, ImportError)
        # and through the places that take a model name
        with pytest.raises(ModelPluginError, match=name):
            xc.analyze(ADD, device="h100-sxm", model=name)
        with pytest.raises(ModelPluginError, match=name):
            get_model(f"min(roofline,{name})")
    sys.modules.pop("xla_costmodel_broken_plugin_mod", None)


def test_a_builtin_name_wins_over_a_plugin_of_the_same_name(tmp_path):
    with TI.installed(tmp_path, extra={"shadowing-plugin": {"roofline": "builtins:dict"}}):
        with pytest.warns(xc.models.CostModelWarning, match=r"plugin 'roofline' .*shadowing-plugin.* hidden by the built-in"):
            assert model_names().count("roofline") == 1
        assert isinstance(get_model("roofline"), RooflineModel)
    assert isinstance(get_model("roofline"), RooflineModel)


def test_two_distributions_declaring_one_name_is_an_error_naming_both(tmp_path):
    clash = {"xla-costmodel-other-plugin": {"example-streaming": "other_package:OtherModel"}}
    with TI.installed(tmp_path, extra=clash):
        assert model_names().count("example-streaming") == 1
        with pytest.raises(ModelPluginError) as err:
            get_model("example-streaming")
    msg = str(err.value)
    assert "declared by 2 entry points" in msg
    assert "xla_costmodel_example_plugin:StreamingModel" in msg and "other_package:OtherModel" in msg
    assert "xla-costmodel-other-plugin" in msg and "Uninstall all but one" in msg



# ---------------------------------------------------------------------------
# A plugin as a user writes it from the README (issue 34 §3): `estimate` alone, a plain CostModel.

README = Path(__file__).resolve().parent.parent / "README.md"
README_MARKER = "<!-- plugin-example: tests/test_plugins.py runs this block as written -->"


def readme_plugin() -> str:
    """The README's example plugin: the ```python block right after the marker."""
    text = README.read_text(encoding="utf-8")
    assert README_MARKER in text, "the README's plugin example lost its marker"
    block = text.split(README_MARKER, 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0]
    return block + "\n"


def test_the_readme_plugin_is_short_and_plain():
    source = readme_plugin()
    code = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(code) <= 20, f"the README's plugin is {len(code)} lines of code"
    namespace: dict = {}
    exec(compile(source, "my_models.py", "exec"), namespace)
    model = namespace["StreamModel"]()
    # only `name` and `estimate`: none of the optional protocols, no estimate_fusion, no mixin
    assert [c for c in type(model).__mro__ if c.__module__.startswith("xla_costmodel")] == []
    assert not hasattr(model, "estimate_fusion")
    assert not isinstance(model, (_base.PricesByContent, _base.PricesTrialFusions, _base.FusionPricing,
                                  _base.CombinesFusionTimes, _base.CachesInstructions, _base.HasParams,
                                  _base.HoldsModels))


@pytest.fixture
def readme_plugin_installed(tmp_path):
    """The README's plugin installed as it says: `my_models.py` and the entry point in a distribution."""
    from xla_costmodel.models import _base as base

    (tmp_path / "my_models.py").write_text(readme_plugin(), encoding="utf-8")
    TI.write_dist_info(tmp_path, "my-models", "0.1.0", {"stream": "my_models:StreamModel"})
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_models", None)
        base._MODELS.pop("stream", None)
        base._FROM_PLUGINS.discard("stream")
        importlib.invalidate_caches()


def test_the_readme_plugin_prices_kernels(readme_plugin_installed):
    assert "stream" in model_names()
    table = xc.analyze(ADD, device="h100-sxm", model="stream")
    e = table.estimates["c"]
    h100 = get_device("h100-sxm")
    nbytes = 3 * 1024 * 1024 * 4  # two f32[1024,1024] operands read, one written
    assert e.memory_s == pytest.approx(nbytes / h100.memory_bandwidth_bytes_per_s)
    assert e.time_s == pytest.approx(e.memory_s + h100.kernel_launch_overhead_s)
    assert table.total_time_s == pytest.approx(e.time_s)  # parameters are free


def test_the_readme_plugin_on_the_command_line(readme_plugin_installed, capsys, tmp_path):
    from xla_costmodel.cli import main

    assert main(["analyze", "hlo_fixtures/mlp_fwd.pre.hlo", "--device", "h100-sxm", "--model", "stream"]) == 0
    assert "stream" in capsys.readouterr().out
    fused = tmp_path / "fused.hlo"
    assert main(["fuse", "hlo_fixtures/mlp_fwd.pre.hlo", "--device", "h100-sxm", "--model", "stream",
                 "-o", str(fused)]) == 0
    assert "fusion(" in fused.read_text()


def test_the_readme_plugin_drives_fusion(readme_plugin_installed):
    r = xc.simulate_fusion("hlo_fixtures/mlp_fwd.pre.hlo", device="h100-sxm", model="stream")
    assert r.model == "stream"
    priced = r.steps[r.steps["time_fused_s"].notna()]  # (bitcasts and tiny constants fuse by rule, unpriced)
    assert len(priced) > 0 and (priced["priority_s"] > 0).any()
    fused = [i for _, i in r.module.instructions() if i.opcode == "fusion"]
    assert fused and r.kernels_after < r.kernels_before
    assert r.time_after_s < r.time_before_s
    # the fused module priced by the plugin is what the pass reports
    assert xc.analyze(r.module, device="h100-sxm", model="stream").total_time_s == pytest.approx(r.time_after_s)


def test_the_readme_plugin_by_instance_fuses_as_by_name(readme_plugin_installed):
    instance = get_model("stream")
    by_name = xc.simulate_fusion("hlo_fixtures/mlp_fwd.pre.hlo", device="h100-sxm", model="stream")
    by_instance = xc.simulate_fusion("hlo_fixtures/mlp_fwd.pre.hlo", device="h100-sxm", model=instance)
    assert by_instance.module.to_text() == by_name.module.to_text()
