"""Sharded programs end to end: a function jitted over 8 CPU devices, its collectives read, priced and measured.

`XLA_FLAGS=--xla_force_host_platform_device_count=8` must be set before jax
starts, so the program runs in a subprocess. The references nobody here
wrote: the groups XLA printed into the compiled module (list form and its
newer mesh-axes form) must be the devices JAX's mesh puts along the reduced
axis; and XLA:CPU's own in-process collectives, timed by the profiler
through `measure_kernels()`, must be found and matched to the priced instructions
(no timing is asserted: the point is that the CPU path is checked against
real time at all).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent("""
    import json, warnings
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import xla_costmodel as xc
    from xla_costmodel.analysis._collective_groups import replica_groups

    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    ids = np.vectorize(lambda d: d.id)(mesh.devices)

    def f(a, w):
        return jnp.tanh(a @ w).sum()

    a = jax.device_put(jnp.ones((256, 512)), NamedSharding(mesh, P("x", "y")))
    w = jax.device_put(jnp.ones((512, 128)), NamedSharding(mesh, P("y", None)))
    jf = jax.jit(f)
    module = xc.from_jax(jf, a, w)
    out = {"devices": len(jax.devices()), "num_partitions": module.header_attributes.get("num_partitions"),
           "groups": {}, "along_x": sorted(map(sorted, ids.T.tolist())),
           "along_y": sorted(map(sorted, ids.tolist())), "models": {}}
    for instr in module.entry.instructions:
        if instr.opcode == "all-reduce":
            out["groups"][instr.name] = {"text": instr.raw_attributes["replica_groups"],
                                         "groups": sorted(map(sorted, replica_groups(instr)))}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for device, model in (("h100-sxm", "xla-gpu"), ("h100-sxm", "xla-gpu-tables"), ("h100-sxm", "roofline"),
                              ("b200", "xla-gpu-tables"), ("host", "roofline")):
            t = xc.analyze(jf, a, w, device=device, model=model)
            rows = t[t.opcode == "all-reduce"]
            out["models"][f"{model} on {device}"] = {r.kernel: [bool(r.priced), float(r.time_s), r.bound]
                                                     for r in rows.itertuples()}
    measured = xc.measure_kernels(jf, a, w, repeats=8, discard=2)
    m = measured[measured.opcode == "all-reduce"]
    out["measured"] = {r.hlo_op: [float(r.median_per_run_s), float(r.launches), bool(r.in_module)] for r in m.itertuples()}
    print("RESULT " + json.dumps(out))
""")


@pytest.fixture(scope="module")
def result():
    env = dict(os.environ)
    env.update({"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu",
                "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""), "TF_CPP_MIN_LOG_LEVEL": "2"})
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_the_program_is_sharded_over_eight_devices(result):
    assert result["devices"] == 8 and result["num_partitions"] == "8"
    assert len(result["groups"]) >= 2


def test_groups_are_the_mesh_axes(result):
    # The matmul contracts over 'y' (groups of 4 along y), the sum then reduces over 'x' (groups of 2).
    found = [g["groups"] for g in result["groups"].values()]
    assert result["along_y"] in found and result["along_x"] in found
    # at least one of them is written in a compact form (iota or mesh axes) and expanded here
    assert any(not g["text"].startswith("{{") for g in result["groups"].values())


def test_collectives_are_priced_by_every_model(result):
    for name, rows in result["models"].items():
        assert set(rows) == set(result["groups"]), name
        for kernel, (priced, time_s, bound) in rows.items():
            assert priced and time_s > 0, (name, kernel)


def test_cpu_collectives_are_measured_and_matched(result):
    measured = result["measured"]
    assert set(measured) == set(result["groups"])
    for kernel, (median_per_run_s, launches, in_module) in measured.items():
        assert median_per_run_s > 0 and in_module
        assert launches == 8  # one per device
