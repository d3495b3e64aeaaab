"""A user's mixed-precision MLP measured by `measure_kernels()` after other jax work, against the command line.

    .venv/bin/python scripts/bench_measure_paths.py [--large] [--repeats 30] [--discard 4]

Issue 17, cause 1: calibration assumes glibc's allocator in its steady state
(no page faults on reused buffers), which holds only in a process started in
it; a user who calls `xla_costmodel.measure_kernels(fn, *args)` in a notebook that
already ran jax is not, and large buffers take fresh pages every run. This
script is that user. In this process jax runs first; then the same program
(bf16 converts of f32 weights, bias broadcasts, a large broadcast written
out) is measured

- `worker`: by `measure_program` with its defaults (on the CPU: in the
  measuring worker, whose allocator is steady from its first allocation);
- `here`: the same in this process (`in_process=True`), the peer: what
  `measure_kernels()` did before it had a worker;
- `cli`: by `xla-costmodel measure --jax scripts/bench_measure_paths.py:mixed_precision_mlp`
  in a process of its own (which measures in its own measuring worker).

It prints each kernel's minimum per run (µs) in the three, the ratios
`worker/cli` and `here/cli`, each measurement's median page faults per kept
run, and the geometric means of the ratios. The methodology is the same
everywhere (`DEFAULT_METHOD` unless `--repeats/--discard`); the host is
shared, so ratios within ~1.2x of 1 are noise.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def mixed_precision_mlp():
    """`(fn, args)`: a two-layer MLP in bf16 with f32 master weights, and a large broadcast written out."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    # `--large` (passed to the command line's process through the environment): 4x the weights
    d, hidden, batch = (2048, 4096, 512) if os.environ.get("BENCH_MEASURE_PATHS_LARGE") else (1024, 2048, 512)
    params = {
        "w1": jnp.asarray(rng.standard_normal((d, hidden)) / 32, jnp.float32),
        "b1": jnp.asarray(rng.standard_normal(hidden), jnp.float32),
        "w2": jnp.asarray(rng.standard_normal((hidden, d)) / 45, jnp.float32),
        "b2": jnp.asarray(rng.standard_normal(d), jnp.float32),
    }
    x = jnp.asarray(rng.standard_normal((batch, d)), jnp.float32)

    def mixed_precision_mlp(params, x):
        w1 = params["w1"].astype(jnp.bfloat16)
        w2 = params["w2"].astype(jnp.bfloat16)
        h = jnp.dot(x.astype(jnp.bfloat16), w1, preferred_element_type=jnp.float32) + params["b1"]
        h = jax.nn.gelu(h).astype(jnp.bfloat16)
        y = jnp.dot(h, w2, preferred_element_type=jnp.float32) + params["b2"]
        # a per-example scale table, as a broadcast the program returns (8 MiB of f32)
        scales = jnp.broadcast_to(params["b2"], (4 * batch, d))
        return y, scales

    return mixed_precision_mlp, (params, x)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--discard", type=int, default=None)
    p.add_argument("--large", action="store_true", help="weights of 2048x4096 instead of 1024x2048")
    args = p.parse_args(argv)
    if args.large:
        os.environ["BENCH_MEASURE_PATHS_LARGE"] = "1"

    import jax
    import jax.numpy as jnp
    import numpy as np
    import pandas as pd

    from xla_costmodel.measure import DEFAULT_METHOD, ConcurrentKernelsWarning, measure_program, read_dataset

    repeats = DEFAULT_METHOD.repeats if args.repeats is None else args.repeats
    discard = DEFAULT_METHOD.discard if args.discard is None else args.discard
    # A notebook's earlier work: jax's threads have started and allocated.
    jax.block_until_ready(jnp.ones((1 << 22,)) * 2.0)
    fn, fargs = mixed_precision_mlp()
    jax.block_until_ready(jax.jit(fn)(*fargs))

    measured = {}
    faults = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConcurrentKernelsWarning)
        for name, in_process in (("worker", None), ("here", True)):
            m = measure_program(fn, *fargs, repeats=repeats, discard=discard, check="warn", in_process=in_process)
            print(f"{name}: measured in {m.process}", file=sys.stderr)
            measured[name] = m.kernels.set_index("hlo_op")["min_per_run_s"]
            faults[name] = float(np.median(m.runs.loc[m.runs["kept"], "page_faults"]))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cli.parquet"
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, "-m", "xla_costmodel.cli", "measure", "--jax", f"{__file__}:mixed_precision_mlp",
               "--repeats", str(repeats), "--discard", str(discard), "--out", str(out)]
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        measured["cli"] = read_dataset(out).set_index("hlo_op")["min_per_run_s"]

    table = pd.DataFrame({f"{k}_min_per_run_us": v * 1e6 for k, v in measured.items()}).dropna()
    table["worker/cli"] = measured["worker"] / measured["cli"]
    table["here/cli"] = measured["here"] / measured["cli"]
    table = table.dropna().sort_values("cli_min_per_run_us", ascending=False)
    with pd.option_context("display.width", 160, "display.max_rows", 200, "display.float_format", "{:.2f}".format):
        print(table.to_string())
    for col in ("worker/cli", "here/cli"):
        r = table[col]
        print(f"{col}: geometric mean {math.exp(np.log(r).mean()):.2f}, range {r.min():.2f} .. {r.max():.2f}, "
              f"{int(((r > 0.5) & (r < 2)).sum())}/{len(r)} kernels within 2x")
    print(f"median page faults per kept run: worker {faults['worker']:.0f}, here {faults['here']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
