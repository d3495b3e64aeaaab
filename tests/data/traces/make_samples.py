"""Regenerate the sample traces in this directory (run from the repository root).

    .venv/bin/python tests/data/traces/make_samples.py

Writes, for a small program (`sample_program` below) measured with
`measure_program(repeats=5, discard=1)` on the CPU:

- `cpu_small.xplane.pb`, `cpu_small.trace.json.gz`: the trace jax.profiler wrote;
- `cpu_small.hlo`: the compiled module's text, from the same process;
- `cpu_small_damaged.xplane.pb`, `cpu_small_damaged.trace.json.gz`: copies cut
  off at two thirds of their length, which readers must reject with a clear error.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sample_program():
    """A program with elementwise fusions, transposes, a reduction, a dot, a convolution, a scatter and a loop.

    The convolution and the larger transpose run as asynchronous thunks on
    the CPU (their completion is reported after the thunk event ends).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((96, 96)), jnp.float32)
    y = jnp.asarray(rng.standard_normal((96, 96)), jnp.float32)
    idx = jnp.asarray(rng.integers(0, 96, size=32), jnp.int32)
    img = jnp.asarray(rng.standard_normal((4, 16, 48, 48)), jnp.float32)
    ker = jnp.asarray(rng.standard_normal((16, 16, 3, 3)), jnp.float32)
    big = jnp.asarray(rng.standard_normal((512, 512)), jnp.float32)

    def small_program(x, y, idx, img, ker, big):
        a = jnp.tanh(x) * 2.0 + y
        t = a.T + 1.0
        r = jnp.sum(a, axis=1)
        d = x @ y
        s = x.at[idx].add(1.0)
        w = jax.lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1.0, y)
        c = jax.lax.conv_general_dilated(img, ker, (1, 1), "SAME")
        return t, r, d, s, w, c, big.T

    return small_program, (x, y, idx, img, ker, big)


def main() -> int:
    sys.path.insert(0, str(HERE.parents[2]))
    from xla_costmodel.measure import find_trace_files, measure_program

    fn, args = sample_program()
    with tempfile.TemporaryDirectory() as tmp:
        m = measure_program(fn, *args, repeats=5, discard=1, trace_dir=tmp, check="warn")
        files = find_trace_files(tmp)
        shutil.copyfile(files["xplane"], HERE / "cpu_small.xplane.pb")
        shutil.copyfile(files["json"], HERE / "cpu_small.trace.json.gz")
    (HERE / "cpu_small.hlo").write_text(m.hlo_text)
    for name in ("cpu_small.xplane.pb", "cpu_small.trace.json.gz"):
        data = (HERE / name).read_bytes()
        (HERE / name.replace("cpu_small", "cpu_small_damaged")).write_bytes(data[: len(data) * 2 // 3])
    print(m.kernels[["hlo_op", "opcode", "n", "min_per_run_s", "launches"]].to_string())
    print("missing:", m.missing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
