"""GEMM times interpolated from XLA's measured table (`devices.gemm_table`).

Two interpolators over one GPU's part of the table:

- `XlaMatmulInterpolator`: XLA's `MatmulInterpolator` with the default table
  (`xla/service/gpu/model/matmul_interpolator.cc`, `interpolator.h`),
  reproduced rule for rule so that its test expectations hold:

  * the spec of a dot: b = product of the lhs batch dimensions, m and n the
    products of the non-contracting dimensions, k of the contracting ones,
    the dtype key `lhs x rhs -> out`;
  * a dtype in the table: an inverse-distance average of FLOP/s over the 16
    corners of the enclosing power-of-two cell (per dimension the largest
    power of two <= x and the smallest >= x, both clamped to the measured box
    (1,256,256,256)-(4,4096,4096,4096)), weight 1/(squared raw distance + 1)
    in single precision, coordinates (b, m, k, n) not scaled; time =
    2bmnk / that rate;
  * any other dtype: the bf16 entries placed at (b, 2m, 2k, 2n), queried at
    the dimensions multiplied by the output element size (and with the FLOPs
    of those scaled dimensions), clamp box (1,512,512,512)-(4,8192,8192,8192).

- `GemmTableInterpolator` (what `xla-gpu-tables` uses by default):
  multilinear interpolation of log(FLOP/s) in log2 of (b, m, n, k) inside the
  measured grid (the sizes present along each dimension: b in {1, 2, 4}, m,
  n, k in {256, ..., 4096} for XLA's table), which returns the measurement at
  a grid point and moves
  smoothly between them (XLA's weights 1/(d² + 1) on raw coordinates give
  nearly all the weight to the nearest corner). Outside the grid, a
  dimension above the largest measured size keeps the edge rate (time grows
  with the work, the compute-bound end). Below the smallest measured size
  (`time_s`' `below_grid`), either the dimension costs as much as the
  smallest (`"smallest"`, what the library-call prices were fitted with: a
  cuBLAS or cuDNN kernel narrower than its tile still runs the whole tile),
  or, as XLA's `MatmulInterpolator` does, the GEMM runs its own FLOPs at the
  rate of the grid's edge (`"xla"`). Neither is checked by the table, which
  has no such points; `"smallest"` multiplies the padding by every other
  dimension (a [64,256,32]x[64,32,256] batched GEMM priced as
  [64,256,256]x[64,256,256], 8x its FLOPs). A dtype combination the table lacks
  uses the rates of its tensor-core class: 16-bit floats those of bf16,
  8-bit types (f8, s8, u8) those of f8e4m3fn, f32 those of f32 (TF32 on the
  tensor cores, as the table measured it). A missing grid point (a point
  left out to score the interpolation) is filled from its neighbours along
  each axis: the mean in log space of the two neighbours where both exist,
  else the linear extrapolation from the two on one side, averaged over the
  axes.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..analysis.library import custom_call_target, fusion_backend_kind
from ..analysis.opcodes import CUBLAS_GEMM_TARGETS
from ..analysis.shapes import first_array
from ..hlo import PRIMITIVE_BITS

__all__ = ["GemmSpec", "GemmTableInterpolator", "XlaMatmulInterpolator", "gemm_interpolator", "gemm_spec"]

_BYTES = {"pred": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
          "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}


def _bytes(dtype: str) -> int:
    if dtype.startswith(("f8", "f6", "f4")):
        return 1
    return _BYTES.get(dtype, 4)


@dataclass(frozen=True, slots=True)
class GemmSpec:
    """One GEMM as XLA's table indexes it: `[b,m,k] x [b,k,n] -> [b,m,n]` and the element types."""

    b: int
    m: int
    n: int
    k: int
    lhs_type: str
    rhs_type: str
    out_type: str

    @property
    def flops(self) -> float:
        return 2.0 * self.b * self.m * self.n * self.k

    @property
    def bytes_read(self) -> int:
        """Both operands' bytes, each read once (XLA's dot model, `CalculateHbmTime`)."""
        lhs = math.ceil(self.b * self.m * self.k * PRIMITIVE_BITS[self.lhs_type] / 8)
        return lhs + math.ceil(self.b * self.k * self.n * PRIMITIVE_BITS[self.rhs_type] / 8)

    @property
    def bytes_written(self) -> int:
        """The result's bytes, written once."""
        return math.ceil(self.b * self.m * self.n * PRIMITIVE_BITS[self.out_type] / 8)

    @property
    def dtype_key(self) -> str:
        return f"{self.lhs_type}x{self.rhs_type}->{self.out_type}"


def _spec(lhs, rhs, out, lhs_batch, lhs_contracting, rhs_batch, rhs_contracting) -> GemmSpec:
    b = math.prod(lhs.dims[d] for d in lhs_batch)
    k = math.prod(lhs.dims[d] for d in lhs_contracting)
    m = math.prod(lhs.dims[d] for d in range(len(lhs.dims)) if d not in lhs_batch and d not in lhs_contracting)
    n = math.prod(rhs.dims[d] for d in range(len(rhs.dims)) if d not in rhs_batch and d not in rhs_contracting)
    return GemmSpec(b, m, n, k, lhs.element_type, rhs.element_type, out.element_type)


def _ints(instr, name: str) -> tuple[int, ...]:
    from ..analysis import int_list_attribute

    return int_list_attribute(instr, name)


def _dot_spec(dot, out) -> GemmSpec:
    return _spec(dot.operands[0].shape, dot.operands[1].shape, out,
                 _ints(dot, "lhs_batch_dims"), _ints(dot, "lhs_contracting_dims"),
                 _ints(dot, "rhs_batch_dims"), _ints(dot, "rhs_contracting_dims"))


def is_cublas_gemm(instr) -> bool:
    """A cuBLAS GEMM custom call (`__cublas$gemm`, `__cublas$lt$matmul`, its f8 / mx forms)."""
    return custom_call_target(instr) in CUBLAS_GEMM_TARGETS


def gemm_spec(instr) -> GemmSpec | None:
    """The GEMM an instruction runs, as XLA's matmul interpolator reads it, or None.

    Supported (as `MatmulInterpolator::EstimatedRuntime`): a `dot`; a cuBLAS
    GEMM custom call (dimensions from its `gemm_backend_config`, output =
    tuple element 0; XLA itself reads only the cuBLASLt targets, this also
    takes the legacy `__cublas$gemm`); a Triton GEMM fusion (`__triton_gemm`
    or `__triton_nested_gemm_fusion` with exactly one dot at its top level).
    """
    op = instr.opcode
    if op == "dot":
        if len(instr.operands) != 2:
            return None
        return _dot_spec(instr, first_array(instr.shape))
    if op == "custom-call" and is_cublas_gemm(instr) and len(instr.operands) >= 2:
        cfg = instr.attribute("backend_config", None) if instr.has_attribute("backend_config") else None
        gemm = cfg.get("gemm_backend_config", cfg) if isinstance(cfg, dict) else None
        ddn = gemm.get("dot_dimension_numbers") if isinstance(gemm, dict) else None
        if not isinstance(ddn, dict):
            return None

        def dims(key):
            return tuple(int(x) for x in ddn.get(key, ()))

        return _spec(first_array(instr.operands[0].shape), first_array(instr.operands[1].shape),
                     first_array(instr.shape), dims("lhs_batch_dimensions"), dims("lhs_contracting_dimensions"),
                     dims("rhs_batch_dimensions"), dims("rhs_contracting_dimensions"))
    if op == "fusion" and fusion_backend_kind(instr) in ("__triton_gemm", "__triton_nested_gemm_fusion"):
        comp = instr.fused_computation
        dots = [h for h in comp.instructions if h.opcode == "dot"] if comp is not None else []
        if len(dots) == 1:
            return _dot_spec(dots[0], first_array(instr.shape))
    return None


# ---------------------------------------------------------------------------
# XLA's interpolator


def _next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def _prev_pow2(x: int) -> int:
    """XLA's `PrevPowerOfTwo`: `NextPowerOfTwo((x >> 1) + 1)`, the largest power of two <= x."""
    return _next_pow2((x >> 1) + 1)


class _XlaWeightedAverage:
    """`EuclideanWeightedAverageInterpolator<4>` with power-of-two neighbours (`interpolator.h`)."""

    def __init__(self, lo: tuple, hi: tuple):
        self.lo, self.hi = lo, hi
        self.values: dict[tuple, float] = {}

    def add(self, point: tuple, value: float) -> None:
        self.values[point] = value

    def eval(self, point: tuple) -> float:
        sides = []
        for d, x in enumerate(point):
            clamp = (lambda v, d=d: min(max(self.lo[d], v), self.hi[d]))
            sides.append((clamp(_prev_pow2(x)), clamp(_next_pow2(x))))
        one = np.float32(1.0)
        total = weighted = 0.0
        for corner in itertools.product(*sides):
            dist = sum((int(c) - int(x)) ** 2 for c, x in zip(corner, point))
            # `1.0f / (Norm2 + kEpsilon)`: the int64 distance meets a float epsilon, all in float.
            w = float(one / (np.float32(dist) + one))
            weighted += self.values[corner] * w
            total += w
        return weighted / total


class XlaMatmulInterpolator:
    """XLA's `MatmulInterpolator::Create(device_info)` over one GPU's rows of `devices.gemm_table`."""

    def __init__(self, rows):
        self._exact: dict[str, _XlaWeightedAverage] = {}
        self._fallback = _XlaWeightedAverage((1, 512, 512, 512), (4, 8192, 8192, 8192))
        for r in rows.itertuples(index=False):
            interp = self._exact.setdefault(r.dtype_key, _XlaWeightedAverage((1, 256, 256, 256), (4, 4096, 4096, 4096)))
            interp.add((r.b, r.m, r.k, r.n), float(r.flops_per_s))
            if r.dtype_key == "bf16xbf16->bf16":
                self._fallback.add((r.b, 2 * r.m, 2 * r.k, 2 * r.n), float(r.flops_per_s))

    def time_s(self, spec: GemmSpec) -> float | None:
        """Seconds for `spec`, or None if the table has neither its dtype nor bf16 entries."""
        interp = self._exact.get(spec.dtype_key)
        if interp is not None:
            return spec.flops / interp.eval((spec.b, spec.m, spec.k, spec.n))
        if not self._fallback.values:
            return None
        # Byte-normalised dimensions, and the FLOPs of those dimensions (as XLA computes them).
        s = _bytes(spec.out_type)
        point = (spec.b, spec.m * s, spec.k * s, spec.n * s)
        flops = 2.0 * point[0] * point[1] * point[2] * point[3]
        return flops / self._fallback.eval(point)


# ---------------------------------------------------------------------------
# The project's interpolator


def _table_class(spec: GemmSpec, keys) -> str | None:
    if spec.dtype_key in keys:
        return spec.dtype_key
    t = spec.lhs_type
    if t in ("bf16", "f16"):
        key = "bf16xbf16->bf16"
    elif t.startswith("f8") or t in ("s8", "u8"):
        key = "f8e4m3fnxf8e4m3fn->bf16"
    elif t == "f32":
        key = "f32xf32->f32"
    else:
        return None
    return key if key in keys else None


def _log2_position(x: float, grid: tuple) -> tuple[int, int, float]:
    """`(i, j, t)`: x lies between grid[i] and grid[j] at fraction t in log2 (clamped to the grid)."""
    if x <= grid[0]:
        return 0, 0, 0.0
    if x >= grid[-1]:
        last = len(grid) - 1
        return last, last, 0.0
    lx = math.log2(x)
    for i in range(len(grid) - 1):
        if grid[i] <= x <= grid[i + 1]:
            lo, hi = math.log2(grid[i]), math.log2(grid[i + 1])
            t = (lx - lo) / (hi - lo)
            if t == 0.0:
                return i, i, 0.0
            if t == 1.0:
                return i + 1, i + 1, 0.0
            return i, i + 1, t
    raise AssertionError("unreachable")


def _hole_estimate(grid: np.ndarray, idx: tuple) -> float:
    """A missing point's log rate from its neighbours along each axis (see the module docstring)."""
    estimates = []
    for d in range(grid.ndim):
        def at(j, d=d):
            if not 0 <= j < grid.shape[d]:
                return math.nan
            ii = list(idx)
            ii[d] = j
            return grid[tuple(ii)]

        i = idx[d]
        lo, hi = at(i - 1), at(i + 1)
        if not (math.isnan(lo) or math.isnan(hi)):
            estimates.append((lo + hi) / 2)
        elif not math.isnan(lo) and not math.isnan(at(i - 2)):
            estimates.append(2 * lo - at(i - 2))
        elif not math.isnan(hi) and not math.isnan(at(i + 2)):
            estimates.append(2 * hi - at(i + 2))
    return float(np.mean(estimates)) if estimates else math.nan


class GemmTableInterpolator:
    """Log-space multilinear interpolation over one GPU's measured GEMM grid (module docstring).

    **Arguments:** `rows`: that GPU's rows of `devices.gemm_table`, or any
    subset: the grid's coordinates are the sizes present along each of b, m,
    n, k, and a combination missing from the rows is filled from its
    neighbours.
    """

    def __init__(self, rows):
        self.axes = tuple(tuple(sorted({int(v) for v in rows[c]})) for c in ("b", "m", "n", "k"))
        shape = tuple(len(a) for a in self.axes)
        index = [{v: i for i, v in enumerate(a)} for a in self.axes]
        raw: dict[str, np.ndarray] = {}
        for r in rows.itertuples(index=False):
            g = raw.setdefault(r.dtype_key, np.full(shape, np.nan))
            g[index[0][r.b], index[1][r.m], index[2][r.n], index[3][r.k]] = math.log(float(r.flops_per_s))
        self._grids: dict[str, np.ndarray] = {}
        for key, g in raw.items():
            holes = list(zip(*np.nonzero(np.isnan(g))))
            filled = g.copy()
            for idx in holes:
                filled[idx] = _hole_estimate(g, idx)
            self._grids[key] = filled

    @property
    def dtype_keys(self) -> tuple[str, ...]:
        return tuple(self._grids)

    def _position(self, spec: GemmSpec) -> list:
        return [_log2_position(x, axis) for x, axis in zip((spec.b, spec.m, spec.n, spec.k), self.axes)]

    def rate(self, spec: GemmSpec) -> tuple[float, str] | None:
        """`(FLOP/s at the clamped point, table dtype key used)`, or None for a dtype with no table class."""
        key = _table_class(spec, self._grids)
        if key is None:
            return None
        grid = self._grids[key]
        value = 0.0
        for corner in itertools.product((0, 1), repeat=4):
            w = 1.0
            idx = []
            for (i, j, t), c in zip(self._position(spec), corner):
                w *= t if c else (1.0 - t)
                idx.append(j if c else i)
            if w:
                value += w * grid[tuple(idx)]
        return math.exp(value), key

    def below_grid(self, spec: GemmSpec) -> bool:
        """Whether some dimension of `spec` is below the smallest size the grid measured along it."""
        return any(x < axis[0] for x, axis in zip((spec.b, spec.m, spec.n, spec.k), self.axes))

    def time_s(self, spec: GemmSpec, *, below_grid: str = "smallest") -> float | None:
        """Seconds for `spec` (one launch, as the table's kernel times), or None (no table class).

        **Arguments:** `below_grid`: how a dimension below the smallest measured size is priced (module
        docstring): `"smallest"` (as that size) or `"xla"` (its own FLOPs at the edge rate, XLA's
        `MatmulInterpolator`). Above the grid the edge rate is kept either way.
        """
        hit = self.rate(spec)
        if hit is None:
            return None
        rate, _ = hit
        if below_grid == "xla":
            return spec.flops / rate
        if below_grid != "smallest":
            raise ValueError(f"unknown below_grid {below_grid!r}; expected 'smallest' or 'xla'")
        dims = [max(x, axis[0]) for x, axis in zip((spec.b, spec.m, spec.n, spec.k), self.axes)]
        return 2.0 * math.prod(dims) / rate

    def held_out_time_s(self, spec: GemmSpec) -> float:
        """The time at a measured grid point predicted without that point (from its axis neighbours,
        as a missing point is filled): what leave-one-grid-point-out scoring asks."""
        key = _table_class(spec, self._grids)
        pos = self._position(spec)
        if key is None or any(i != j for i, j, _ in pos):
            raise ValueError(f"{spec} is not a point of the grid")
        grid = self._grids[key].copy()
        idx = tuple(i for i, _, _ in pos)
        grid[idx] = math.nan
        return spec.flops / math.exp(_hole_estimate(grid, idx))


@functools.cache
def _rows(table_key: str):
    from ..devices import gemm_table

    return gemm_table(table_key)


@functools.cache
def gemm_interpolator(table_key: str, method: str = "log-grid"):
    """The interpolator of one table key (`"sm_90"`, ...), or None when the table has no such GPU.

    **Arguments:** `method`: `"log-grid"` (`GemmTableInterpolator`) or `"xla"`
    (`XlaMatmulInterpolator`).
    """
    rows = _rows(table_key)
    if rows.empty:
        return None
    if method == "xla":
        return XlaMatmulInterpolator(rows)
    if method == "log-grid":
        return GemmTableInterpolator(rows)
    raise ValueError(f"unknown GEMM interpolation {method!r}; expected 'log-grid' or 'xla'")
