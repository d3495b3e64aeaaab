"""`analyze()` and `xla-costmodel analyze` on every fixture, device and model."""

from __future__ import annotations

import json
import math
import warnings

import pandas as pd
import pytest

import xla_costmodel as xc
from xla_costmodel.devices import device_names, get_device
from xla_costmodel.measure import measure_host
from xla_costmodel.models import CostModelWarning, KernelTable
from xla_costmodel.models._analyze import COLUMNS

from conftest import fixture_paths

FIXTURES = fixture_paths("*.hlo")
PRESETS = [n for n in device_names() if n != "host"]
# The fixtures are XLA:CPU's modules, priced on every GPU on purpose (tests/test_priced_module.py checks the warning).
pytestmark = pytest.mark.filterwarnings("ignore::xla_costmodel.models.BackendMismatchWarning")


@pytest.fixture(scope="module")
def modules():
    return {p.name: xc.load_hlo(p) for p in FIXTURES}


@pytest.fixture(scope="module")
def host():
    # The quick benchmark, not cached: the real host spec, measured in well under a second.
    return measure_host(fast=True, progress=False, save=False)


_FUSED_NAMES: dict[int, set] = {}


def _fused_names(module) -> set:
    key = id(module)
    if key not in _FUSED_NAMES:
        bodies = {id(f.fused_computation) for _, f in module.instructions() if f.opcode == "fusion"}
        _FUSED_NAMES[key] = {i.name for c in module.computations if id(c) in bodies for i in c.instructions}
    return _FUSED_NAMES[key]


def _check_table(table, module, device_name: str, model_name: str) -> None:
    assert isinstance(table, pd.DataFrame) and isinstance(table, KernelTable)
    assert list(table.columns) == list(COLUMNS)
    assert table.device_name == device_name and table.model_name == model_name
    free = table[table["bound"] == "free"]
    assert (free["time_s"] == 0).all() and (free["kind"] == "free").all()
    assert set(free["opcode"]) <= {"parameter", "constant", "bitcast", "tuple", "get-tuple-element",
                                   "after-all", "add-dependency", "opt-barrier", "domain", "async-done", "reshape", "transpose",
                                   "async-update"}
    kernels = table[table["bound"] != "free"]
    assert kernels["priced"].all(), kernels[~kernels["priced"]][["kernel", "note"]]
    assert kernels["time_s"].map(math.isfinite).all() and (kernels["time_s"] > 0).all()
    assert (kernels["executions"] > 0).all()
    assert set(kernels["bound"]) <= {"compute", "memory", "launch"}
    # every fusion of the entry computation is a row, under its own name
    entry_fusions = {i.name for i in module.entry.instructions if i.opcode == "fusion"}
    assert entry_fusions <= set(kernels["kernel"])
    # no instruction inside a fused computation is a row
    assert not (set(kernels["kernel"]) & (_fused_names(module) - entry_fusions))
    assert table.total_time_s == pytest.approx(float((kernels["time_s"] * kernels["executions"]).sum()))


def test_every_fixture_on_every_device_and_model(modules, host):
    devices = [get_device(n) for n in PRESETS] + [host]
    for name, module in modules.items():
        for device in devices:
            for model in ("xla-gpu", "roofline"):
                if model == "xla-gpu" and device.kind != "gpu":
                    with pytest.raises(ValueError, match="roofline"):
                        xc.analyze(module, device=device, model=model)
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("error", CostModelWarning)
                    table = xc.analyze(module, device=device, model=model)
                _check_table(table, module, device.name, model)


def test_loops_with_known_trip_counts_are_expanded(modules):
    table = xc.analyze(modules["scan_rnn.post.hlo"], device="h100-sxm")
    loop = xc.load_hlo("hlo_fixtures/scan_rnn.post.hlo")
    w = next(i for _, i in loop.instructions() if i.opcode == "while")
    n = int(w.attribute("backend_config")["known_trip_count"]["n"])
    body = table[table["computation"] == w.attribute("body").name]
    cond = table[table["computation"] == w.attribute("condition").name]
    assert len(body) and (body["executions"] == n).all() and body["executions_known"].all()
    assert len(cond) and (cond["executions"] == n + 1).all()


def test_unknown_trip_counts_are_assumed_and_said_so(modules):
    module = modules["while_loop.post.hlo"]
    table = xc.analyze(module, device="a100-80gb")
    unknown = table[~table["executions_known"]]
    assert len(unknown) and unknown["note"].str.contains("unknown: assumed 1").all()
    five = xc.analyze(module, device="a100-80gb", unknown_trip_count=5)
    body_rows = five[~five["executions_known"] & five["note"].str.contains("while.0")]
    assert set(body_rows["executions"]) <= {5.0, 6.0} and 5.0 in set(body_rows["executions"])
    assert five.summary()["assumed_counts"] > 0


def test_conditional_branches_share_one_execution(modules):
    module = modules["cond_switch.post.hlo"]
    table = xc.analyze(module, device="v100", model="roofline")
    cond = next(i for _, i in module.instructions() if i.opcode == "conditional")
    branches = cond.called_computations
    rows = table[table["computation"].isin([b.name for b in branches]) & (table["bound"] != "free")]
    assert len(rows)
    assert rows["executions"].tolist() == pytest.approx([1 / len(branches)] * len(rows))
    assert not rows["executions_known"].any()


def test_inputs_function_path_and_text():
    import jax.numpy as jnp

    def f(x, w):
        return jnp.tanh(x @ w).sum()

    table = xc.analyze(f, jnp.ones((32, 64)), jnp.ones((64, 16)), device="h200")
    assert len(table[table["bound"] != "free"]) >= 1
    text = open("hlo_fixtures/mlp_fwd.post.hlo").read()
    a = xc.analyze("hlo_fixtures/mlp_fwd.post.hlo", device="h200", model="roofline")
    b = xc.analyze(text, device="h200", model="roofline")
    pd.testing.assert_frame_equal(pd.DataFrame(a), pd.DataFrame(b))
    with pytest.raises(TypeError):
        xc.analyze(42)
    with pytest.raises(ValueError, match="unknown device"):
        xc.analyze(text, device="h900")
    with pytest.raises(ValueError, match="unknown cost model"):
        xc.analyze(text, model="nope")


UNPRICED = """HloModule t
ENTRY e {
  a = f32[1024]{0} parameter(0)
  b = f32[1024]{0} exponential(a)
  ROOT c = f32[1024]{0} custom-call(b), custom_call_target="my_kernel"
}"""


@pytest.mark.parametrize("model", ["xla-gpu", "roofline"])
def test_unpriced_kernels_are_flagged_and_named(model):
    with pytest.warns(CostModelWarning, match="'c'.*my_kernel") as record:
        table = xc.analyze(UNPRICED, device="h100-sxm", model=model)
    assert len([w for w in record if issubclass(w.category, CostModelWarning)]) == 1
    row = table.set_index("kernel").loc["c"]
    assert not row["priced"] and math.isnan(row["time_s"]) and row["bound"] == "unknown"
    assert "my_kernel" in row["note"]
    priced = table[(table["bound"] != "free") & table["priced"]]
    assert table.total_time_s == pytest.approx(float(priced["time_s"].sum()))
    assert table.summary()["unpriced"] == 1


def test_html_summary_and_subclass_behaviour(modules):
    table = xc.analyze(modules["layernorm_softmax.post.hlo"], device="a100-40gb")
    html = table._repr_html_()
    assert "total" in html and "a100-40gb" in html and "<table" in html
    s = table.summary()
    assert s["total_s"] == pytest.approx(table.total_time_s) and s["kernels"] > 0
    assert sum(s["time_by_bound_s"].values()) == pytest.approx(s["total_s"])
    sub = table[table["bound"] != "free"]
    assert isinstance(sub, KernelTable)
    assert table.estimates[sub["kernel"].iloc[0]].time_s == sub["time_s"].iloc[0]
    assert table["coalesced"].dtype == "boolean"


# --------------------------------------------------------------------------- CLI


def _cli(capsys, *argv):
    from xla_costmodel.cli import main

    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_table_json_csv(capsys):
    rc, out, _ = _cli(capsys, "analyze", "hlo_fixtures/mlp_fwd.post.hlo", "--device", "h100-sxm")
    assert rc == 0 and "total" in out and "kernel" in out
    rc, out, _ = _cli(capsys, "analyze", "hlo_fixtures/mlp_fwd.post.hlo", "--model", "roofline", "--json")
    records = json.loads(out)["kernels"]
    assert rc == 0 and {"kernel", "time_s", "bound"} <= set(records[0])
    rc, out, _ = _cli(capsys, "analyze", "hlo_fixtures/mlp_fwd.post.hlo", "--csv", "--device", "v100")
    assert rc == 0 and out.splitlines()[0].startswith("kernel,computation,opcode")


def test_cli_errors(capsys, tmp_path, monkeypatch):
    from xla_costmodel.devices import _registry

    rc, _, err = _cli(capsys, "analyze", str(tmp_path / "missing.hlo"))
    assert rc == 2 and "no such file" in err
    rc, _, err = _cli(capsys, "analyze", "hlo_fixtures/mlp_fwd.post.hlo", "--device", "h900")
    assert rc == 2 and "unknown device" in err and "h100-sxm" in err
    rc, _, err = _cli(capsys, "analyze", "hlo_fixtures/mlp_fwd.post.hlo", "--model", "nope")
    assert rc == 2 and "unknown cost model 'nope'" in err
    # a CPU device known to the registry for this test only
    monkeypatch.setitem(_registry._USER_DEVICES, "cli-test-cpu",
                        get_device("h100-sxm").replace(name="cli-test-cpu", kind="cpu"))
    rc, _, err = _cli(capsys, "analyze", "hlo_fixtures/mlp_fwd.post.hlo", "--device", "cli-test-cpu")
    assert rc == 2 and "roofline" in err
    rc, out, _ = _cli(capsys, "analyze", "hlo_fixtures/mlp_fwd.post.hlo", "--device", "cli-test-cpu",
                      "--model", "roofline")
    assert rc == 0 and "total" in out


def test_cli_reports_unpriced(capsys, tmp_path):
    path = tmp_path / "u.hlo"
    path.write_text(UNPRICED)
    rc, out, err = _cli(capsys, "analyze", str(path))
    assert rc == 0 and "1 unpriced" in out and "my_kernel" in err


def test_roofline_flops_equal_xla_cost_analysis_on_unfused_modules(modules):
    """On the unoptimized fixtures without loops, branches or custom calls, the roofline's own
    flops (`model_flops`) summed over the kernels are XLA's own `flops + transcendentals` (jaxlib's
    HloCostAnalysis, recorded in the `.cost.json` files)."""
    checked = 0
    for path in FIXTURES:
        if not path.name.endswith(".pre.hlo"):
            continue
        module = modules[path.name]
        if {i.opcode for _, i in module.instructions()} & {"while", "conditional", "custom-call", "topk"}:
            continue
        ref = json.loads(path.with_name(path.name.replace(".pre.hlo", ".cost.json")).read_text())
        ref = ref["pre"]["hlo_module_cost_analysis"]
        table = xc.analyze(module, device="h100-sxm", model="roofline")
        kernels = table[table["bound"] != "free"]
        flops = float((kernels["model_flops"] * kernels["executions"]).sum())
        assert flops == pytest.approx(ref.get("flops", 0.0) + ref.get("transcendentals", 0.0), rel=1e-9), path.name
        checked += 1
    assert checked >= 10


def test_html_and_summary_of_a_column_subset(modules):
    # A notebook showing `table[["kernel", "time_s"]]` used to raise KeyError('total_s').
    table = xc.analyze(modules["layernorm_softmax.post.hlo"], device="h100-sxm")
    for cols in (["kernel", "time_s"], ["kernel", "bound"], ["kernel", "bound", "priced", "total_s"], ["total_s"]):
        sub = table[cols]
        assert isinstance(sub, KernelTable)
        html = sub._repr_html_()
        assert html == pd.DataFrame(sub)._repr_html_()  # plain DataFrame HTML, no summary line
        s = sub.summary()
        assert s["kernels"] + s["free"] == len(table)
    s = table[["kernel", "time_s"]].summary()
    assert math.isnan(s["total_s"]) and s["time_by_bound_s"] == {} and s["unpriced"] == 0
    s = table[["kernel", "bound", "priced", "total_s"]].summary()
    assert s["total_s"] == pytest.approx(table.total_time_s)
    assert s["kernels"] == table.summary()["kernels"] and s["time_by_bound_s"] == table.summary()["time_by_bound_s"]
    # the full table still has its summary line
    assert table._repr_html_().startswith("<p><b>")


def test_summary_is_a_small_object_not_a_dict(modules):
    from xla_costmodel.models import TableSummary

    table = xc.analyze(modules["layernorm_softmax.post.hlo"], device="h100-sxm")
    s = table.summary()
    assert isinstance(s, TableSummary) and not isinstance(s, dict)
    kernels = table[table["bound"] != "free"]
    assert s.kernels == s["kernels"] == len(kernels) and s.free == len(table) - len(kernels)
    assert s.total_s == pytest.approx(float(kernels["total_s"].fillna(0).sum()))
    with pytest.raises(Exception):
        s.kernels = 0  # frozen
    frame = s.to_frame()
    assert len(frame) == 1 and frame.loc[0, "kernels"] == s.kernels and frame.loc[0, "model"] == "xla-gpu"
    for bound, t in s.time_by_bound_s.items():
        assert frame.loc[0, f"{bound}_s"] == pytest.approx(t)
    html = s._repr_html_()
    assert f"{s.kernels} kernels" in html and "h100-sxm" in html
    assert json.loads(json.dumps(s.to_dict()))["kernels"] == s.kernels
    assert dict(s)["free"] == s.free and f"{s.kernels} kernels" in str(s)


def test_one_kernel_is_not_kernels():
    from xla_costmodel.models import TableSummary

    s = TableSummary(module="m", device="d", model="x", total_s=1e-6, kernels=1, unpriced=0, free=1,
                     assumed_counts=0, time_by_bound_s={"memory": 1e-6})
    assert "1 kernel " in str(s) and "1 kernels" not in str(s) and "1 free instruction)" in str(s)
    assert "1 kernels" not in s._repr_html_()
