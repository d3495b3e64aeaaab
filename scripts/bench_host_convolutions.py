"""Convolutions with feature groups and int8 matmuls on this host: measured vs priced (issue 33, item 9).

Each program is measured with `xla_costmodel.measure` (per-kernel times on this CPU) and priced with
`analyze(..., device="host", model=...)` for `roofline` and `fitted`; one line per kernel with the ratio
priced / measured. The programs: a plain, a dilated, a depthwise and a 4-group 2-D convolution (YNNPACK
fusions on XLA:CPU), lone Eigen convolutions with groups (12 features; a 9x1 blur of 3 channels; 1-D
depthwise), an f64 grouped convolution (XLA's own loop), and int8 x int8 -> int32 dots. See docs/host_convolutions.md.

    python scripts/bench_host_convolutions.py [NAME ...]
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np

import xla_costmodel as xc


def _conv(x, w, **kw):
    return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), **kw)


def programs() -> dict:
    rng = np.random.default_rng(0)

    def arr(shape, dtype=jnp.float32):
        if jnp.issubdtype(dtype, jnp.integer):
            return jnp.asarray(rng.integers(-100, 100, shape), dtype)
        return jnp.asarray(rng.standard_normal(shape), dtype)

    x, w = arr((8, 32, 32, 64)), arr((3, 3, 64, 64))
    a, b = arr((512, 512), jnp.int8), arr((512, 512), jnp.int8)
    return {
        "plain": (lambda x, w: _conv(x, w), (x, w)),
        "dilated": (lambda x, w: _conv(x, w, rhs_dilation=(2, 2)), (x, w)),
        "depthwise": (lambda x, w: _conv(x, w, feature_group_count=64), (x, arr((3, 3, 1, 64)))),
        "grouped4": (lambda x, w: _conv(x, w, feature_group_count=4), (x, arr((3, 3, 16, 64)))),
        "eigen_dw12": (lambda x, w: _conv(x, w, feature_group_count=12), (arr((4, 48, 48, 12)), arr((3, 3, 1, 12)))),
        "eigen_blur9x1": (lambda x, w: _conv(x, w, feature_group_count=3),
                          (arr((2, 256, 256, 3)), arr((9, 1, 1, 3)))),
        "eigen_dw1d": (lambda x, w: jax.lax.conv_general_dilated(
            x, w, (1,), "SAME", feature_group_count=64, dimension_numbers=("NHC", "HIO", "NHC")),
            (arr((8, 1024, 64)), arr((3, 1, 64)))),
        "loop_f64_groups8": (lambda x, w: _conv(x, w, feature_group_count=8),
                             (np.ones((2, 64, 64, 8)), np.ones((3, 3, 1, 8)))),
        "int8dot": (lambda a, b: jax.lax.dot(a, b, preferred_element_type=jnp.int32), (a, b)),
        "f32dot": (lambda a, b: a @ b, (a.astype(jnp.float32), b.astype(jnp.float32))),
    }


def main(names: list[str]) -> None:
    table = programs()
    unknown = [n for n in names if n not in table]
    if unknown:
        sys.exit(f"bench_host_convolutions: unknown program(s) {', '.join(unknown)}; choose from {', '.join(table)}")
    for name in names or list(table):
        fn, args = table[name]
        if name.startswith("loop_f64"):
            # f64 needs x64 mode for the whole measurement and pricing.
            with jax.enable_x64(True):
                args = tuple(jnp.asarray(a, jnp.float64) for a in args)
                _report(name, fn, args)
            continue
        _report(name, fn, args)


def _report(name, fn, args) -> None:
    """One line per kernel: measured, and each model's price with its ratio to the measurement."""
    measured = xc.measure_kernels(fn, *args, progress=False)
    priced = {m: xc.analyze(fn, *args, device="host", model=m) for m in ("roofline", "fitted")}
    priced = {m: d[d.opcode != "parameter"].time_s.tolist() for m, d in priced.items()}
    for i, (op, t) in enumerate(zip(measured.hlo_op, measured.min_per_launch_s)):
        parts = "  ".join(f"{m} {v[i] * 1e6:9.0f} µs ({v[i] / t:6.3f}x)" for m, v in priced.items())
        print(f"{name:16s} {op:26s} measured {t * 1e6:9.0f} µs  {parts}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
