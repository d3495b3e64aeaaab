"""`analyze`'s count columns belong to the kernel: the same whatever the model, and XLA's.

The reference is jaxlib's `HloCostAnalysis` of each fixture (`<name>.cost.json`,
written by `scripts/make_fixtures.py` from `Compiled.cost_analysis()`): the
rows of a table, composed as XLA composes computations, add up to it.
"""

from __future__ import annotations

import json
import warnings

import jax
import jax.numpy as jnp
import pandas as pd
import pytest

import xla_costmodel as xc
from xla_costmodel.models import CostModelWarning
from xla_costmodel.models import BackendMismatchWarning

from conftest import TEST_CPU, fixture_ids, fixture_paths

POST = fixture_paths("*.post.hlo")
COUNTS = ["flops", "transcendentals", "bytes_accessed"]
# (device, model) pairs whose tables must agree on the counts.
PRICINGS = (("h100-sxm", "xla-gpu"), ("h100-sxm", "roofline"), (TEST_CPU, "roofline"), ("b200", "xla-gpu-tables"))
_XLA_KEYS = {"flops": "flops", "transcendentals": "transcendentals", "bytes_accessed": "bytes accessed"}


def _tables(module) -> dict:
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BackendMismatchWarning)  # CPU kernels priced on GPUs, on purpose here
        warnings.simplefilter("ignore", CostModelWarning)
        for device, model in PRICINGS:
            out[(getattr(device, "name", device), model)] = xc.analyze(module, device=device, model=model)
    return out


def _composed(module, table: pd.DataFrame, key: str) -> float:
    """The rows' `key`, composed as XLA's `HloCostAnalysis` composes a module: each instruction of the
    entry computation once, a while loop's body and condition once, a conditional's largest branch,
    a call's computation; XLA's own figure where `analyze` counts what XLA leaves unknown (the table
    says which: `counts_as_xla()`)."""
    value = {(r["computation"], r["kernel"]): float(r[key]) for r in table.counts_as_xla().to_dict("records")}

    def total(comp) -> float:
        s = 0.0
        for instr in comp.instructions:
            op = instr.opcode
            if op == "while":
                s += total(instr.attribute("body")) + total(instr.attribute("condition"))
            elif op == "conditional":
                s += max(total(b) for b in instr.called_computations)
            elif op == "call":
                s += total(instr.attribute("to_apply"))
            else:
                assert op not in ("async-start", "async-update", "async-done"), op
                s += value[(comp.name, instr.name)]
        return s

    return total(module.entry)


@pytest.mark.parametrize("path", POST, ids=fixture_ids(POST))
def test_counts_are_the_kernels_whatever_the_model_and_add_up_to_xlas(path):
    module = xc.load_hlo(path)
    tables = _tables(module)
    first, *rest = tables.values()
    for (device, model), table in list(tables.items())[1:]:
        pd.testing.assert_frame_equal(table[["kernel", *COUNTS]], first[["kernel", *COUNTS]], obj=f"{model} on {device}")
    kernels = first[first["bound"] != "free"]
    assert kernels[COUNTS].notna().all().all(), kernels[kernels[COUNTS].isna().any(axis=1)]

    xla = json.loads(path.with_name(path.name.replace(".post.hlo", ".cost.json")).read_text())
    xla = xla["post"]["hlo_module_cost_analysis"]
    for key, xla_key in _XLA_KEYS.items():
        assert _composed(module, first, key) == pytest.approx(xla.get(xla_key, 0.0), rel=1e-6, abs=1e-9), key


@pytest.mark.parametrize("path", POST, ids=fixture_ids(POST))
def test_counts_times_executions_are_the_trip_count_aware_totals(path):
    """Loops: a body's rows run trip-count times per execution; XLA's module totals count them once."""
    module = xc.load_hlo(path)
    if any(i.opcode in ("conditional", "custom-call", "topk") for _, i in module.instructions()):
        pytest.skip("a conditional's branches are shared out (analyze), not maxed (XLA); custom calls: see above")
    cost = xc.module_cost(module)
    if not cost["trip_counts_known"]:
        pytest.skip("a loop's trip count is unknown")
    table = _tables(module)[("h100-sxm", "roofline")]
    for key in ("flops", "transcendentals"):
        got = float((table[key] * table["executions"]).sum())
        assert got == pytest.approx(cost[f"{key}_trip_count_aware"], rel=1e-6, abs=1e-9), key


def test_a_library_fusion_counts_each_op_once():
    """XLA:CPU's YNNPACK fusions run each fused op once: a matmul fused with the softmax that follows it
    (dot -> reduce -> broadcast -> subtract -> exp) counts its instructions once each, as jaxlib's
    `Compiled.cost_analysis()` does, whatever a model counts for recomputation through the broadcast."""

    def scores(x, w):
        return jax.nn.softmax(x @ w, axis=-1)

    x, w = jnp.ones((256, 512), jnp.float32), jnp.ones((512, 1024), jnp.float32)
    compiled = jax.jit(scores).lower(x, w).compile()
    module = xc.parse_hlo(compiled.as_text())
    library = [i for i in module.entry.instructions if i.opcode == "fusion" and i.fusion_kind == "kCustom"
               and {"dot", "broadcast"} <= {h.opcode for h in i.fused_computation.instructions}]
    if not library:
        pytest.skip("this XLA:CPU does not fuse the softmax into the matmul's library call")
    (fusion,) = library
    costs = xc.instruction_cost_table(module, warn=False).set_index(["computation", "name"])
    once = sum(costs.loc[(fusion.fused_computation.name, h.name), "flops"] for h in fusion.fused_computation.instructions)
    assert once >= 2 * 256 * 512 * 1024  # the dot's multiply-adds, and the softmax's few ops besides
    tables = _tables(module)
    for table in tables.values():
        row = table.set_index("kernel").loc[fusion.name]
        assert row["flops"] == pytest.approx(once, rel=1e-9)
        assert float(table["flops"].sum()) == pytest.approx(compiled.cost_analysis()["flops"], rel=1e-6)
    roofline = tables[("h100-sxm", "roofline")].set_index("kernel").loc[fusion.name]
    # A library (tiled) emitter does not recompute through the broadcast: the roofline's own count is the
    # same ops once each (issue 24: recomputing made flax_nnx_mha_fwd@large's ynn_fusion 1.8e13 flops).
    assert roofline["model_flops"] == pytest.approx(once, rel=0.01)
