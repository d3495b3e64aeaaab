"""The measurement suite: performance-instructive kernels written as JAX programs.

After Stevens & Klöckner's "measurement kernels": each kernel isolates one
cost (a memory access pattern, one arithmetic op in one dtype, a matmul
shape, a launch) and runs over a sweep of sizes, from just above the launch
overhead up to sizes that stream through memory. Each (kernel, dtype, size)
is one *case*; every kernel XLA compiles a case into is measured with
`measure_program` (warm-up runs discarded, minimum kept) and becomes one row
of the calibration dataset.

Kernel classes:

- `access`: stride-1/2/3 copies and scale-adds (`a*x[::s] + y[::s]`), a
  random-permutation gather, transposes of three shapes, row and column
  reductions (f32).
- `elementwise`: add/sub, mul, div, exp, log, tanh, rsqrt, pow, each in
  f32, f64 and bf16.
- `matmul`: square `m×m @ m×m` and skinny `m×m @ m×8`.
- `conv`: 3×3 and 1×1 NHWC convolutions.
- `scatter`: scatter-add of random rows.
- `launch`: an empty program (a copy of one element) and tiny elementwise
  kernels, which measure the fixed cost of a launch.

On a GPU the sweeps are sized for it (`sizes_for`: streams of 2^20 to 2^28
elements, GEMMs to 8192, larger convolutions; sizes made for a CPU leave most
GPU kernels near the launch cost), and the library routines XLA:GPU hands to
cuSolver, cuBLAS, cuDNN and CUB are measured too (`GPU_LIBRARY_SUITE`):
`linalg` (Cholesky, LU, QR, eigh, SVD, triangular solve), `sort` (sort, top-k)
and wider convolutions.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import time
import uuid
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

import numpy as np
import pandas as pd

from .._progress import progress_bar
from ._dataset import DATASET_COLUMNS, SCHEMA
from ._allocator import steady_allocator
from ._measure import measure_program
from ._method import DEFAULT_METHOD, ConcurrentKernelsWarning
from ._runs import merge_measurements

__all__ = ["SuiteKernel", "SUITE", "GPU_LIBRARY_SUITE", "GPU_SIZES", "suite_cases", "sizes_for", "run_suite",
           "steady_allocator", "FULL", "QUICK"]

Built = tuple[Callable[..., Any], tuple[Any, ...]]


@dataclass(frozen=True)
class SuiteKernel:
    """One measurement kernel and its size sweep.

    **Attributes:**

    - `name`: unique, e.g. `"copy_s2"`.
    - `kernel_class`: `access`, `elementwise`, `matmul`, `conv`, `scatter` or `launch`.
    - `build`: `(size, dtype, rng) -> (fn, args)`; `fn` is a named function.
    - `sizes`: the full sweep; `quick_sizes` the `--quick` one.
    - `dtypes`: dtypes to run it in.
    - `size_meaning`: what `size` counts (for the dataset's `params`).
    - `gpu_sizes`: the full sweep on a GPU (None: `GPU_SIZES` by kind, see `sizes_for`).
    """

    name: str
    kernel_class: str
    build: Callable[[int, str, np.random.Generator], Built] = field(repr=False)
    sizes: tuple[int, ...]
    quick_sizes: tuple[int, ...]
    dtypes: tuple[str, ...] = ("float32",)
    size_meaning: str = "elements"
    params: dict = field(default_factory=dict)
    gpu_sizes: tuple[int, ...] | None = None


@dataclass(frozen=True)
class SuiteMode:
    """Repeats and sweep of one suite mode."""

    name: str
    repeats: int
    discard: int
    rounds: int
    quick: bool


FULL = SuiteMode("full", repeats=DEFAULT_METHOD.repeats, discard=DEFAULT_METHOD.discard, rounds=2, quick=False)
QUICK = SuiteMode("quick", repeats=12, discard=2, rounds=1, quick=True)


# --------------------------------------------------------------------------- inputs


def _jnp_dtype(dtype: str):
    import jax.numpy as jnp

    return {"float32": jnp.float32, "float64": jnp.float64, "bfloat16": jnp.bfloat16}[dtype]


def _arr(rng: np.random.Generator, shape, dtype: str = "float32", lo: float = 0.5, hi: float = 2.0):
    """Uniform values in [lo, hi): positive, so log/rsqrt/pow stay finite."""
    import jax.numpy as jnp

    return jnp.asarray(rng.uniform(lo, hi, size=shape), dtype=_jnp_dtype(dtype))


def _named(fn, name: str):
    fn.__name__ = fn.__qualname__ = name
    return fn


def _side(n: int) -> int:
    return max(1, int(round(math.sqrt(n))))


# --------------------------------------------------------------------------- kernels

# Elements per array, 64 KiB to 32 MiB of f32: from above the launch cost (the
# fastest 2**14-element kernel, a row reduction, takes 1.1 µs on the reference
# host, a launch 0.3 µs) through L1, L2 and L3 to DRAM.
_STREAM = tuple(1 << k for k in range(14, 24))
_STREAM_QUICK = (1 << 18,)


def _copy(stride: int):
    def build(n, dtype, rng):
        x = _arr(rng, (n * stride,), dtype)

        def f(x):
            return x[::stride]

        return _named(f, f"copy_s{stride}"), (x,)

    return build


def _scale_add(stride: int):
    def build(n, dtype, rng):
        x = _arr(rng, (n * stride,), dtype)
        y = _arr(rng, (n * stride,), dtype)
        a = _arr(rng, (), dtype)

        def f(a, x, y):
            return a * x[::stride] + y[::stride]

        return _named(f, f"scale_add_s{stride}"), (a, x, y)

    return build


def _gather(n, dtype, rng):
    import jax.numpy as jnp

    x = _arr(rng, (n,), dtype)
    idx = jnp.asarray(rng.permutation(n).astype(np.int32))

    def f(x, idx):
        return jnp.take(x, idx, mode="clip")

    return _named(f, "gather_random"), (x, idx)


def _transpose(kind: str):
    def build(n, dtype, rng):
        import jax.numpy as jnp

        if kind == "square":
            s = _side(n)
            shape, perm = (s, s), (1, 0)
        elif kind == "tall":
            shape, perm = (max(1, n // 16), 16), (1, 0)
        else:  # batched: swap the two minor dims of 16 matrices
            s = _side(max(1, n // 16))
            shape, perm = (16, s, s), (0, 2, 1)
        x = _arr(rng, shape, dtype)

        def f(x):
            return jnp.transpose(x, perm)

        return _named(f, f"transpose_{kind}"), (x,)

    return build


def _reduce(axis: int):
    def build(n, dtype, rng):
        cols = 256
        x = _arr(rng, (max(1, n // cols), cols) if axis == 1 else (cols, max(1, n // cols)), dtype)

        def f(x):
            return x.sum(axis=axis)

        return _named(f, "reduce_row" if axis == 1 else "reduce_col"), (x,)

    return build


_UNARY_OPS = ("exp", "log", "tanh", "rsqrt")


def _apply(op: str, x, y=None):
    import jax
    import jax.numpy as jnp

    if op == "exp":
        return jnp.exp(x)
    if op == "log":
        return jnp.log(x)
    if op == "tanh":
        return jnp.tanh(x)
    if op == "rsqrt":
        return jax.lax.rsqrt(x)
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    if op == "div":
        return x / y
    if op == "pow":
        return x**y
    raise ValueError(f"unknown elementwise op {op!r}")


def _elementwise(op: str):
    def build(n, dtype, rng):
        x = _arr(rng, (n,), dtype)
        if op in _UNARY_OPS:

            def f(x):
                return _apply(op, x)

            return _named(f, f"ew_{op}"), (x,)
        y = _arr(rng, (n,), dtype)

        def f2(x, y):
            return _apply(op, x, y)

        return _named(f2, f"ew_{op}"), (x, y)

    return build


def _matmul(kind: str):
    def build(m, dtype, rng):
        a = _arr(rng, (m, m), dtype, -1.0, 1.0)
        b = _arr(rng, (m, m) if kind == "square" else (m, 8), dtype, -1.0, 1.0)

        def f(a, b):
            return a @ b

        return _named(f, f"matmul_{kind}"), (a, b)

    return build


def _conv(k: int):
    def build(s, dtype, rng):
        import jax

        x = _arr(rng, (8, s, s, 32), dtype, -1.0, 1.0)
        w = _arr(rng, (k, k, 32, 32), dtype, -1.0, 1.0)

        def f(x, w):
            return jax.lax.conv_general_dilated(
                x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
            )

        return _named(f, f"conv{k}x{k}"), (x, w)

    return build


def _scatter(n, dtype, rng):
    import jax.numpy as jnp

    rows = max(1, n // 64)
    x = _arr(rng, (rows, 64), dtype)
    m = max(1, rows // 4)
    idx = jnp.asarray(rng.integers(0, rows, size=m).astype(np.int32))
    upd = _arr(rng, (m, 64), dtype)

    def f(x, idx, upd):
        return x.at[idx].add(upd, mode="drop")

    return _named(f, "scatter_add"), (x, idx, upd)


def _empty(n, dtype, rng):
    x = _arr(rng, (n,), dtype)

    def f(x):
        return x  # an output must not alias an undonated input: XLA emits one copy

    return _named(f, "launch_empty"), (x,)


def _tiny_add(n, dtype, rng):
    x = _arr(rng, (n,), dtype)
    y = _arr(rng, (n,), dtype)

    def f(x, y):
        return x + y

    return _named(f, "launch_add"), (x, y)


_ALL_FLOATS = ("float32", "float64", "bfloat16")

SUITE: tuple[SuiteKernel, ...] = (
    *(SuiteKernel(f"copy_s{s}", "access", _copy(s), _STREAM, _STREAM_QUICK, params={"stride": s}) for s in (1, 2, 3)),
    *(
        SuiteKernel(f"scale_add_s{s}", "access", _scale_add(s), _STREAM, _STREAM_QUICK, params={"stride": s})
        for s in (1, 2, 3)
    ),
    SuiteKernel("gather_random", "access", _gather, _STREAM, _STREAM_QUICK, params={"pattern": "permutation"}),
    *(
        SuiteKernel(f"transpose_{k}", "access", _transpose(k), _STREAM, _STREAM_QUICK, params={"shape": k})
        for k in ("square", "tall", "batched")
    ),
    SuiteKernel("reduce_row", "access", _reduce(1), _STREAM, _STREAM_QUICK, params={"axis": "minor", "cols": 256}),
    SuiteKernel("reduce_col", "access", _reduce(0), _STREAM, _STREAM_QUICK, params={"axis": "major", "rows": 256}),
    *(
        SuiteKernel(f"ew_{op}", "elementwise", _elementwise(op), _STREAM, _STREAM_QUICK, dtypes=_ALL_FLOATS, params={"op": op})
        for op in ("add", "sub", "mul", "div", "exp", "log", "tanh", "rsqrt", "pow")
    ),
    SuiteKernel("matmul_square", "matmul", _matmul("square"), (32, 64, 128, 256, 512, 1024), (128,), size_meaning="m"),
    SuiteKernel(
        "matmul_skinny", "matmul", _matmul("skinny"), (128, 256, 512, 1024, 2048, 4096), (512,), size_meaning="m", params={"n": 8}
    ),
    SuiteKernel("conv3x3", "conv", _conv(3), (4, 8, 16, 32, 64), (16,), size_meaning="spatial", params={"batch": 8, "channels": 32}),
    SuiteKernel("conv1x1", "conv", _conv(1), (8, 16, 32, 64, 128), (32,), size_meaning="spatial", params={"batch": 8, "channels": 32}),
    SuiteKernel("scatter_add", "scatter", _scatter, _STREAM, _STREAM_QUICK, params={"row": 64, "updates": "rows/4"}),
    SuiteKernel("launch_empty", "launch", _empty, (1,), (1,)),
    SuiteKernel("launch_add", "launch", _tiny_add, (1, 16, 256), (1, 16)),
)


# --------------------------------------------------------------------------- GPU sizes and library routines

#: Elements per array on a GPU: 4 MiB to 1 GiB of f32, from about the launch cost to streams that take
#: milliseconds (on an H100 the CPU sweep's 2^14-2^23 left 340 of 453 kernels under 5 us, near the 1 us launch).
_STREAM_GPU = tuple(1 << k for k in (20, 22, 24, 25, 26, 27, 28))
#: GPU sweeps of the kernels whose size is not a stream length (`sizes_for`).
GPU_SIZES: dict[str, tuple[int, ...]] = {
    "matmul_square": (256, 512, 1024, 2048, 4096, 8192),
    "matmul_skinny": (1024, 2048, 4096, 8192, 16384, 32768),
    "conv3x3": (16, 32, 64, 128, 256),
    "conv1x1": (32, 64, 128, 256, 512),
}


def sizes_for(kernel: SuiteKernel, backend: str = "cpu", quick: bool = False) -> tuple[int, ...]:
    """The sweep of `kernel` on `backend` (`"cpu"`, `"gpu"`, ...): its own sizes, on a GPU its `gpu_sizes`, else
    `GPU_SIZES[name]`, else `_STREAM_GPU` for a stream; the quick sweep is the same everywhere."""
    if quick:
        return kernel.quick_sizes
    if backend != "gpu" or kernel.kernel_class == "launch":
        return kernel.sizes
    if kernel.gpu_sizes is not None:
        return kernel.gpu_sizes
    if kernel.name in GPU_SIZES:
        return GPU_SIZES[kernel.name]
    return _STREAM_GPU if kernel.size_meaning == "elements" else kernel.sizes


def _spd(rng, n: int, dtype: str):
    """A symmetric positive definite n x n matrix (well conditioned: A A^T / n + I)."""
    import jax.numpy as jnp

    a = rng.uniform(-1.0, 1.0, size=(n, n))
    return jnp.asarray(a @ a.T / n + np.eye(n), dtype=_jnp_dtype(dtype))


def _linalg(routine: str):
    def build(n, dtype, rng):
        import jax
        import jax.numpy as jnp

        if routine == "cholesky":
            args = (_spd(rng, n, dtype),)
            f = jnp.linalg.cholesky
        elif routine == "lu":
            args = (_arr(rng, (n, n), dtype, -1.0, 1.0),)
            f = jax.lax.linalg.lu
        elif routine == "qr":
            args = (_arr(rng, (n, n), dtype, -1.0, 1.0),)
            f = jnp.linalg.qr
        elif routine == "eigh":
            args = (_spd(rng, n, dtype),)
            f = jnp.linalg.eigh
        elif routine == "svd":
            args = (_arr(rng, (n, n), dtype, -1.0, 1.0),)
            f = jnp.linalg.svd
        else:  # triangular solve: L X = B, L lower triangular and well conditioned, B n x n
            low = jnp.tril(_arr(rng, (n, n), dtype, -1.0, 1.0) / n) + jnp.eye(n, dtype=_jnp_dtype(dtype))
            args = (low, _arr(rng, (n, n), dtype, -1.0, 1.0))

            def f(a, b):
                return jax.scipy.linalg.solve_triangular(a, b, lower=True)

        def g(*xs):
            return f(*xs)

        return _named(g, routine), args

    return build


def _sort(kind: str):
    def build(n, dtype, rng):
        import jax

        if kind == "sort":
            x = _arr(rng, (n,), dtype)

            def f(x):
                return jax.numpy.sort(x)
        else:  # top 16 of each row of 1024
            x = _arr(rng, (max(1, n // 1024), 1024), dtype)

            def f(x):
                return jax.lax.top_k(x, 16)

        return _named(f, kind), (x,)

    return build


def _conv_wide(k: int, channels: int):
    def build(s, dtype, rng):
        import jax

        x = _arr(rng, (8, s, s, channels), dtype, -1.0, 1.0)
        w = _arr(rng, (k, k, channels, channels), dtype, -1.0, 1.0)

        def f(x, w):
            return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

        return _named(f, f"conv{k}x{k}_c{channels}"), (x, w)

    return build


_MATRIX_GPU = (64, 256, 1024, 2048, 4096)

#: Library routines measured on a GPU only (`suite_cases(backend="gpu")`): what XLA:GPU hands to cuSolver
#: (`cusolver_potrf_ffi`, `cusolver_getrf_ffi`, `cusolver_geqrf_ffi`, `cusolver_syevd_ffi`,
#: `cusolver_gesvdj_ffi`), cuBLAS (`__cublas$triangularSolve`), CUB (`cub_sort_*`, top-k) and cuDNN
#: (wider convolutions), none of which XLA's cost model prices.
GPU_LIBRARY_SUITE: tuple[SuiteKernel, ...] = (
    *(SuiteKernel(r, "linalg", _linalg(r), _MATRIX_GPU, (64,), size_meaning="n", params={"routine": r})
      for r in ("cholesky", "lu", "qr", "triangular_solve")),
    SuiteKernel("eigh", "linalg", _linalg("eigh"), (64, 256, 1024, 2048), (64,), size_meaning="n",
                params={"routine": "eigh"}),
    SuiteKernel("svd", "linalg", _linalg("svd"), (64, 256, 512, 1024), (64,), size_meaning="n",
                params={"routine": "svd"}),
    SuiteKernel("sort", "sort", _sort("sort"), tuple(1 << k for k in (16, 18, 20, 22, 24, 26)), (1 << 16,),
                params={"routine": "sort"}),
    SuiteKernel("top_k", "sort", _sort("top_k"), tuple(1 << k for k in (16, 18, 20, 22, 24, 26)), (1 << 16,),
                params={"routine": "top_k", "k": 16, "row": 1024}),
    SuiteKernel("conv3x3_c128", "conv", _conv_wide(3, 128), (16, 32, 64, 128), (16,), size_meaning="spatial",
                params={"batch": 8, "channels": 128}),
)
# Their sweeps are GPU sweeps already.
GPU_LIBRARY_SUITE = tuple(dataclasses.replace(k, gpu_sizes=k.sizes) for k in GPU_LIBRARY_SUITE)


@dataclass(frozen=True)
class Case:
    kernel: SuiteKernel
    dtype: str
    size: int

    @property
    def case_id(self) -> str:
        return f"{self.kernel.name}/{self.dtype}/{self.size}"


def suite_cases(*, quick: bool = False, only: str | list[str] | None = None, backend: str = "cpu") -> list[Case]:
    """The cases (kernel × dtype × size) of the suite.

    **Arguments:**

    - `quick`: the short sweep.
    - `only`: glob pattern(s) matched against kernel names and classes
      (`"ew_*"`, `"matmul"`, `"copy_s1"`); None for all.
    - `backend`: the jax platform measured (`"cpu"`, `"gpu"`): on a GPU the
      sweeps are sized for it and `GPU_LIBRARY_SUITE` is added (`sizes_for`).

    **Returns:** the cases, in suite order.
    """
    pats = [only] if isinstance(only, str) else list(only or [])
    out = []
    kernels = SUITE + GPU_LIBRARY_SUITE if backend == "gpu" else SUITE
    for k in kernels:
        if pats and not any(fnmatch.fnmatchcase(k.name, p) or fnmatch.fnmatchcase(k.kernel_class, p) for p in pats):
            continue
        for dtype in k.dtypes:
            for size in sizes_for(k, backend, quick):
                out.append(Case(k, dtype, size))
    if pats and not out:
        raise ValueError(f"no suite kernel matches {pats}; kernels: {', '.join(k.name for k in kernels)}")
    return out


# --------------------------------------------------------------------------- running

def run_suite(
    *,
    quick: bool = False,
    only: str | list[str] | None = None,
    repeats: int | None = None,
    discard: int | None = None,
    rounds: int | None = None,
    progress: bool = True,
    seed: int = 0,
) -> pd.DataFrame:
    """Measure every case of the suite.

    **Arguments:**

    - `quick`: the short sweep and fewer repeats (`QUICK`), for tests and
      `scripts/run`; otherwise `FULL`.
    - `only`: restrict to kernels/classes matching these glob patterns.
    - `repeats`, `discard`: override the mode's (runs in total / warm-up runs
      thrown away per case and round).
    - `rounds`: passes over all cases (full: 2, quick: 1). Each case's kept
      samples from all rounds are pooled before the minimum is taken, so a
      stretch of interference from other work on the host has to hit the
      case in every round to spoil it.
    - `progress`: show a progress bar on stderr.
    - `seed`: seeds the inputs of every case.

    The sweeps follow the backend jax runs on (`suite_cases(backend=...)`): on
    a GPU, larger sizes and the library routines.

    Every case is measured by `measure_program` with the project's one
    methodology (`DEFAULT_METHOD`: steady allocator, one untraced call, the
    minimum over the kept runs), the same as `measure_kernels()`.

    **Returns:** dataset rows (columns `DATASET_COLUMNS`), one per kernel of
    every case (rounds pooled). `attrs["elapsed_s"]` is the wall time taken,
    `attrs["launch_overhead_s"]` the launch cost measured by the `launch`
    kernels, and `attrs["below_overhead"]` the cases whose main kernel was
    not clearly slower than a launch (empty when the sweeps are sound).
    """
    import jax

    mode = QUICK if quick else FULL
    repeats = mode.repeats if repeats is None else repeats
    discard = mode.discard if discard is None else discard
    cases = suite_cases(quick=quick, only=only, backend=jax.default_backend())
    rounds = mode.rounds if rounds is None else rounds
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    suite_run = uuid.uuid4().hex[:12]
    t_start = time.perf_counter()
    parts: dict[int, list] = {i: [] for i in range(len(cases))}
    work = [(r, i) for r in range(rounds) for i in range(len(cases))]
    with progress_bar(len(work), "measure suite", "case", enabled=progress) as bar:
        for r, i in work:
            case = cases[i]
            bar.set_description_str("measure suite: " + case.case_id + (f" (round {r + 1})" if rounds > 1 else ""))
            rng = np.random.default_rng([seed, i])
            with jax.enable_x64(case.dtype == "float64"):
                fn, args = case.kernel.build(case.size, case.dtype, rng)
                with warnings.catch_warnings():
                    # Independent thunks of one program may overlap; that is
                    # recorded per run, not worth a warning per case.
                    warnings.simplefilter("ignore", ConcurrentKernelsWarning)
                    parts[i].append(measure_program(fn, *args, repeats=repeats, discard=discard))
                del args
            bar.update(1)
    rows: list[dict] = []
    for i, case in enumerate(cases):
        rows.extend(_case_rows(case, merge_measurements(parts[i]), suite_run, rounds))
    elapsed = time.perf_counter() - t_start
    df = pd.DataFrame(rows)
    overhead = launch_overhead(df)
    df["launch_overhead_s"] = overhead
    df = df[list(DATASET_COLUMNS)]
    df.attrs.update(
        elapsed_s=elapsed,
        launch_overhead_s=overhead,
        below_overhead=_below_overhead(df, overhead),
        mode=mode.name,
        repeats=repeats,
        discard=discard,
        rounds=rounds,
    )
    return df


def _case_rows(case: Case, m, suite_run: str, rounds: int) -> list[dict]:
    return measurement_rows(
        m,
        case=case.case_id,
        kernel=case.kernel.name,
        kernel_class=case.kernel.kernel_class,
        dtype=case.dtype,
        size=case.size,
        params={"size_meaning": case.kernel.size_meaning, **case.kernel.params},
        source="suite",
        suite_run=suite_run,
        rounds=rounds,
    )


def measurement_rows(
    m,
    *,
    case: str,
    kernel: str,
    kernel_class: str = "user",
    dtype: str = "",
    size: int | str = "",
    params: dict | None = None,
    source: str = "user",
    program: str | None = None,
    suite_run: str | None = None,
    rounds: int = 1,
) -> list[dict]:
    """Dataset rows (dicts with every `DATASET_COLUMNS` key) for one `Measurement`.

    **Arguments:** `m`, a `Measurement` (several rounds merged with
    `merge_measurements`: say how many in `rounds`); the rest fill the
    columns of the same names (`size` is stored as text; `program` names
    the program the kernels belong to, empty for measurement kernels).

    The main kernel (`is_main`) is the slowest one by minimum time per run.
    The methodology columns come from `m.method`. `launch_overhead_s` is
    left NaN; `run_suite` fills it in.
    """
    import jax
    import jaxlib

    kernels = m.kernels
    kept = m.runs[m.runs["kept"]]
    wall_min = float(kept["wall_s"].min()) if len(kept) else math.nan
    main = kernels["min_per_run_s"].idxmax() if len(kernels) else None
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    suite_run = suite_run or uuid.uuid4().hex[:12]
    device_kind = _device_kind()
    out = []
    for idx, k in kernels.iterrows():
        feats = m.module.features(k["hlo_op"]) if k["in_module"] else {}
        out.append(
            {
                "schema": SCHEMA,
                "suite_run": suite_run,
                "timestamp": stamp,
                "source": source,
                "program": program,
                "backend": m.backend,
                "device_kind": device_kind,
                "device": m.device,
                "jax_version": jax.__version__,
                "jaxlib_version": getattr(jaxlib, "__version__", ""),
                "case": case,
                "kernel": kernel,
                "kernel_class": kernel_class,
                "dtype": dtype,
                "size": str(size),
                "params": json.dumps(params or {}, sort_keys=True),
                "hlo_module": k["hlo_module"],
                "hlo_op": k["hlo_op"],
                "opcode": k["opcode"],
                "fusion_kind": k["fusion_kind"] if isinstance(k["fusion_kind"], str) else None,
                "computation": k["computation"],
                "role": k["role"],
                "is_main": idx == main,
                **m.method.fields(),
                "rounds": int(rounds),
                "n": int(k["n"]),
                "launches": float(k["launches"]),
                "min_per_run_s": float(k["min_per_run_s"]),
                "median_per_run_s": float(k["median_per_run_s"]),
                "min_per_launch_s": float(k["min_per_launch_s"]),
                "samples_per_run_s": list(k["samples_per_run_s"]),
                "wall_min_per_run_s": wall_min,
                "launch_overhead_s": math.nan,
                "element_type": feats.get("element_type"),
                "out_elements": feats.get("out_elements", 0),
                "out_bytes": feats.get("out_bytes", 0),
                "operand_bytes": feats.get("operand_bytes", 0),
                "n_operands": feats.get("n_operands", 0),
                "n_fused_ops": feats.get("n_fused_ops", 0),
                "opcode_mix": feats.get("opcode_mix", "{}"),
                "hlo_text": m.module.kernel_text(k["hlo_op"]) if k["in_module"] else "",
                "module_text": m.hlo_text,
            }
        )
    return out


def _device_kind() -> str:
    import jax

    return str(getattr(jax.devices()[0], "device_kind", ""))


def launch_overhead(df: pd.DataFrame) -> float:
    """The launch cost: the smallest per-kernel minimum among the `launch` class's kernels (NaN if none ran)."""
    sel = df[(df["kernel_class"] == "launch")] if len(df) else df
    if len(sel) == 0:
        return math.nan
    return float(sel["min_per_launch_s"].min())


def _below_overhead(df: pd.DataFrame, overhead: float, factor: float = 3.0) -> list[str]:
    """Cases (outside the launch class) whose main kernel took less than `factor` launches."""
    if not np.isfinite(overhead) or len(df) == 0:
        return []
    main = df[df["is_main"] & (df["kernel_class"] != "launch")]
    return sorted(main.loc[main["min_per_launch_s"] < factor * overhead, "case"].tolist())
