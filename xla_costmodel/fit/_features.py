"""Kernel features for the hardware-fitted models (Stevens & Klöckner's properties, read from HLO).

Stevens & Klöckner model a kernel's run time as a linear combination of
counts that each add run time on their own: memory accesses by width,
direction and stride class (with a quantized data-utilization ratio),
min(loads, stores), arithmetic operations by kind and data type, barriers,
launches and work groups, and a constant. Here the counts come from one HLO
kernel (a fusion, or an instruction run as its own kernel):

- **memory**: `ld_<w>b_<class>` counts elements loaded by width `w` (8, 16,
  32, 64 bits) and stride class: `s0` (uniform: the value is broadcast, the
  same address for neighbouring output elements), `s1` (consecutive), `u/d`
  (stride `d` = 2, 3 or 4-and-more elements between neighbouring accesses,
  `u` of each `d` cells of the footprint used: the paper's amortized stride
  fraction; a transpose reads `4/4`, `x[::2]` reads `1/2`), `gather`
  (data-dependent addresses). Counts are XLA's bytes accessed per operand
  (utilization-weighted, one read per output element of a broadcast) divided
  by the element size. `st_<w>b_s1` and `st_<w>b_scatter` count elements
  stored (scatter and dynamic-update-slice store only their updates);
  `minldst_<w>b` is min(loads, stores) of that width.
- **cache levels** (a CPU addition): `bytes_l2`, `bytes_l3`, `bytes_dram`
  are the bytes loaded and stored by a kernel whose footprint (unique bytes
  of operands and result) exceeds the L1 / L2 / L3 cache, so that the same
  access can cost more when it misses a level.
- **arithmetic**: `op_<kind>_<dtype>`, elementwise operations executed
  (elements times XLA's utilization), kind
  `add` (add, subtract), `mul`, `div` (divide, remainder), `exp` (exp, log,
  power and their variants), `special` (tanh, rsqrt, sqrt, logistic,
  trigonometric, erf, ...), `other` (compare, select, min/max, convert,
  bitwise, ...); dtype `f32`, `f64`, `f16` (bf16/f16/fp8), `int` (and
  pred), `c` (complex). f32 transcendentals (whose costs per element
  differ fifty-fold) are also counted by kind, for their extra cost over
  `op_exp_f32` / `op_special_f32`: `op_log_f32` (log, log1p),
  `op_pow_f32` (power, cbrt), `op_tanh_f32`, `op_sqrt_f32` (sqrt, rsqrt),
  `op_trig_f32` (sine, cosine, tan), `op_atan2_f32` (atan2 and the
  inverse trigonometric and hyperbolic functions), `op_erf_f32`. `matmul_<dtype>`: flops of dots and convolutions
  inside fusions (YNNPACK on XLA:CPU; 2 per multiply-add); `dot_flops`,
  `conv_flops`: the same for a dot or convolution run as its own kernel
  (Eigen on XLA:CPU, a different rate), with `conv_windows` (batch ×
  output positions × window size) and `conv_groups` (the same times the
  feature groups, which Eigen runs one after the other; 0 for one group)
  for its convolutions; `red_<dtype>`: operations of
  reducers and combiners (reduce, reduce-window, scatter,
  select-and-scatter) times the elements they fold, each into a running
  value; `sort_cmp`: comparisons of sorts (n·⌈log₂ d⌉);
  `fft_flops`: 5·n·log₂ n per transform; `solver_flops`: Cholesky and
  triangular solves.
- **library calls**: a kernel XLA:CPU hands to a runtime library (see
  `emitter`) has no stride classes: `lib_elements` counts the elements it
  reads and writes (each operand once), each op of a library fusion counts
  once per element (not XLA's utilization, which counts the re-computation
  an emitted loop would do), its reductions are not counted as `red_*`, and
  `matmul_batch` counts the matrix products of a batched dot (a per-matrix
  cost).
- **copies**: XLA:CPU runs a lone copy as a copy thunk, not a compiled
  kernel. One that keeps the layout is a memcpy: `memcpy_bytes` counts the
  bytes it reads and writes, with no per-element load and store counts;
  one that changes the layout (a transpose) keeps its stride classes.
- **launch**: `launch` = 1 per kernel launch (the model's constant; one row
  is one launch, so the paper's separate constant and launch count coincide);
  `kernel_thunk` = 1 for a kernel XLA:CPU compiles (every emitted loop but a
  lone copy, which is a copy thunk): the extra cost of calling it;
  `first` = 1 for the first kernel of its program's entry (the run's
  first thunk, which pays the per-run costs); `lib_ynn`, `lib_eigen`, `lib_other` = 1 for a YNNPACK fusion, an Eigen
  dot/convolution, another runtime call (FFT, sort, LAPACK, top-k): the
  extra fixed cost of each kind of call; `tasks`: parallel tasks beyond the
  first.
- **threads** (the paper's work-group / wave scaling): XLA:CPU splits a large
  emitted loop into `P = clip(out_bytes // task_bytes, 1, cores)` parallel
  tasks (`task_bytes` = 256 KiB, the per-thread minimum of XLA's parallel
  task assignment). Per-core counts (loads, stores, operations, L2 bytes)
  are divided by `P`, i.e. they are counts *per thread*; shared resources
  (L3, DRAM bytes) are not.

`kernel_features(x, device)` accepts an `HloInstruction` (or a list of them),
or calibration-dataset rows (a DataFrame, Series or dict with `hlo_text`,
and `hlo_op`/`module_text` when present), and returns one row of `FEATURES`
per kernel.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import OrderedDict
from typing import Any

import pandas as pd

from ..analysis._opcodes import CONTROL_FLOW_OPCODES, NO_WORK_IN_KERNEL_OPCODES
from ..models._resolve import resolve_device

__all__ = ["FEATURES", "FEATURE_GROUPS", "kernel_features", "features_of", "kernel_from_row", "FeatureError"]

WIDTHS = (8, 16, 32, 64)
LOAD_CLASSES = ("s0", "s1", "1of2", "2of2", "1of3", "2of3", "3of3", "1of4", "2of4", "3of4", "4of4", "gather")
STORE_CLASSES = ("s1", "scatter")
OP_KINDS = ("add", "mul", "div", "exp", "special", "other")
OP_DTYPES = ("f32", "f64", "f16", "int", "c")
#: f32 transcendentals priced one kind at a time (their costs differ ~50x: tanh vs atan2);
#: in other dtypes they stay lumped into `exp` / `special`.
TRANSCENDENTAL_KINDS = ("log", "pow", "tanh", "sqrt", "trig", "atan2", "erf")
MATMUL_DTYPES = ("f32", "f64", "f16", "int")

#: Default bytes of output per parallel task of an emitted loop (XLA's 256 KiB).
TASK_BYTES = 256 * 1024


def _feature_names() -> tuple[str, ...]:
    names: list[str] = []
    for w in WIDTHS:
        names += [f"ld_{w}b_{c}" for c in LOAD_CLASSES]
    for w in WIDTHS:
        names += [f"st_{w}b_{c}" for c in STORE_CLASSES]
    names += [f"minldst_{w}b" for w in WIDTHS]
    names += ["bytes_l2", "bytes_l3", "bytes_dram"]
    for k in OP_KINDS:
        names += [f"op_{k}_{d}" for d in OP_DTYPES]
    names += [f"op_{k}_f32" for k in TRANSCENDENTAL_KINDS]
    names += [f"red_{d}" for d in OP_DTYPES]
    names += [f"matmul_{d}" for d in MATMUL_DTYPES]
    names += ["matmul_batch", "dot_flops", "conv_flops", "conv_windows", "conv_groups", "sort_cmp", "fft_flops",
              "solver_flops"]
    names += ["lib_elements", "memcpy_bytes"]
    names += ["launch", "kernel_thunk", "first", "lib_ynn", "lib_eigen", "lib_other", "tasks"]
    return tuple(names)


#: Every feature, in column order.
FEATURES: tuple[str, ...] = _feature_names()


_LAUNCH_FEATURES = ("launch", "kernel_thunk", "first", "lib_ynn", "lib_eigen", "lib_other", "tasks")


def _group(name: str) -> str:
    if name.startswith(("ld_", "st_", "minldst_", "bytes_")) or name in ("lib_elements", "memcpy_bytes"):
        return "memory"
    if name in _LAUNCH_FEATURES:
        return "launch"
    return "compute"


#: Feature name -> "memory", "compute" or "launch" (how `estimate` splits a prediction).
FEATURE_GROUPS: dict[str, str] = {f: _group(f) for f in FEATURES}

#: Features divided by the number of parallel tasks (per-thread counts).
_PER_THREAD = frozenset(
    f for f in FEATURES if FEATURE_GROUPS[f] in ("memory", "compute") and f not in ("bytes_l3", "bytes_dram")
)


class FeatureError(ValueError):
    """A kernel (or dataset row) whose features cannot be computed; the message says which and why."""


# --------------------------------------------------------------------------- opcode tables

_ADD = frozenset({"add", "subtract"})
_MUL = frozenset({"multiply"})
_DIV = frozenset({"divide", "remainder"})
_EXP = frozenset({"exponential", "exponential-minus-one", "log", "log-plus-one", "power"})
_SPECIAL = frozenset(
    "tanh logistic rsqrt sqrt cbrt sine cosine tan atan2 erf acos acosh asin asinh atanh cosh sinh".split()
)
_OTHER_ELEMENTWISE = frozenset(
    "abs ceil floor count-leading-zeros clz convert bitcast-convert imag real is-finite negate not popcnt "
    "round-nearest-afz round-nearest-even sign reduce-precision maximum minimum and or xor shift-left "
    "shift-right-arithmetic shift-right-logical complex compare stochastic-convert select clamp".split()
)
_ELEMENTWISE = _ADD | _MUL | _DIV | _EXP | _SPECIAL | _OTHER_ELEMENTWISE
# Runtime-library calls on XLA:CPU (not emitted loops).
_LIBRARY_OPCODES = frozenset(
    {"dot", "convolution", "fft", "sort", "custom-call", "cholesky", "triangular-solve", "topk", "scaled-dot",
     "ragged-dot"}
)


# The f32 kind of each transcendental (others: "exp" for exp/expm1, "special" for the rest).
_F32_KIND = {
    "log": "log", "log-plus-one": "log", "power": "pow", "cbrt": "pow", "tanh": "tanh",
    "sqrt": "sqrt", "rsqrt": "sqrt", "sine": "trig", "cosine": "trig", "tan": "trig",
    "atan2": "atan2", "acos": "atan2", "asin": "atan2", "atanh": "atan2", "acosh": "atan2", "asinh": "atan2",
    "erf": "erf",
}


def _add_op(acc: dict, opcode: str, dtype_group: str, n: float) -> None:
    """Count `n` elementwise `opcode` operations in a dtype group.

    An f32 transcendental counts both in its lumped kind (`op_exp_f32` or
    `op_special_f32`) and in its own kind (`op_atan2_f32`, ...), whose
    non-negative weight is the extra cost over the lumped one: an op the
    training kernels lack is still priced at the lumped rate (this beat
    separate kinds alone in cross-validation over the training kernels).
    """
    _add(acc, f"op_{_kind(opcode)}_{dtype_group}", n)
    if dtype_group == "f32" and opcode in _F32_KIND:
        _add(acc, f"op_{_F32_KIND[opcode]}_f32", n)


def _kind(opcode: str) -> str:
    if opcode in _ADD:
        return "add"
    if opcode in _MUL:
        return "mul"
    if opcode in _DIV:
        return "div"
    if opcode in _EXP:
        return "exp"
    if opcode in _SPECIAL:
        return "special"
    return "other"


def _dtype_group(et: str) -> str:
    et = (et or "f32").lower()
    if et == "f32":
        return "f32"
    if et == "f64":
        return "f64"
    if et in ("c64", "c128"):
        return "c"
    if et.startswith(("s", "u")) or et == "pred":
        return "int"
    if et.startswith(("bf", "f")):
        return "f16"
    return "f32"


def _width(bits: int) -> tuple[int, float]:
    """(width class, accesses per element): sub-byte types count as 8, 128-bit as two 64-bit."""
    if bits <= 8:
        return 8, 1.0
    if bits <= 16:
        return 16, 1.0
    if bits <= 32:
        return 32, 1.0
    if bits <= 64:
        return 64, 1.0
    return 64, bits / 64.0


def _leaves(shape):
    if shape.element_type == "tuple":
        for s in shape.tuple_shapes:
            yield from _leaves(s)
    elif shape.element_type not in ("token", "opaque"):
        yield shape


def _elements(shape) -> int:
    return int(sum(leaf.num_elements for leaf in _leaves(shape)))


def _first_leaf(shape):
    for leaf in _leaves(shape):
        return leaf
    return shape


def _compute_dtype(instr) -> str:
    """The element type an op computes in: a compare/select/convert works on its operands' type."""
    out = _first_leaf(instr.shape).element_type
    if instr.opcode in ("compare", "is-finite") and instr.operands:
        return _first_leaf(instr.operands[0].shape).element_type
    if instr.opcode == "select" and len(instr.operands) > 1:
        return _first_leaf(instr.operands[1].shape).element_type
    if instr.opcode == "convert" and instr.operands:
        a, b = _first_leaf(instr.operands[0].shape), _first_leaf(instr.shape)
        return a.element_type if a.element_bits >= b.element_bits else b.element_type
    return out


# --------------------------------------------------------------------------- access patterns


def _minor_dims(shape) -> list[int]:
    """Dimensions of size > 1, minor to major in the layout."""
    return [d for d in shape.minor_to_major if d < len(shape.dims) and shape.dims[d] > 1]


def _row_major(shape) -> bool:
    """Whether `shape`'s layout is the default one (dimension 0 major, the last minor)."""
    return tuple(shape.minor_to_major) == tuple(range(len(shape.dims) - 1, -1, -1))


def _physical_stride(shape, dim: int | None) -> int:
    """Elements between neighbours along logical dimension `dim` in `shape`'s layout (0: uniform)."""
    if dim is None:
        return 0
    stride = 1
    for d in shape.minor_to_major:
        if d == dim:
            return stride
        stride *= max(shape.dims[d], 1)
    return stride


def _attr(instr, name, default=None):
    try:
        return instr.attribute(name, default)
    except Exception:  # an attribute the parser cannot read is treated as absent
        return default


def _tuple_attr(instr, name) -> tuple:
    v = _attr(instr, name, ())
    if isinstance(v, int):
        return (v,)
    return tuple(v or ())


def _operand_inner(h, idx: int, inner: int | None):
    """Map the innermost iterated logical dim of `h` to its operand `idx`.

    **Returns:** `(inner_dim_of_operand | None, stride_factor, used_fraction, special)` where
    `special` is "" or "gather"/"s1" (forced class).
    """
    op = h.opcode
    o = h.operands[idx]
    if op in _ELEMENTWISE or op in ("copy", "map", "reverse", "pad", "concatenate", "clamp", "dynamic-slice",
                                    "dynamic-update-slice"):
        if o.shape.rank != h.shape.rank:
            return (_minor_dims(o.shape) or [None])[0], 1, 1.0, ""  # scalar operands of clamp/select, indices
        return inner, 1, 1.0, ""
    if op == "broadcast":
        dims = _tuple_attr(h, "dimensions")
        if inner is not None and inner in dims:
            return dims.index(inner), 1, 1.0, ""
        return None, 1, 1.0, ""
    if op == "transpose":
        perm = _tuple_attr(h, "dimensions")
        if inner is not None and inner < len(perm):
            return perm[inner], 1, 1.0, ""
        return inner, 1, 1.0, ""
    if op in ("reshape", "bitcast"):
        # A bitcast keeps the order of the elements in memory (so does a reshape between
        # row-major layouts): the operand dimension that steps through memory the way the
        # inner dimension does is the one with the same physical stride. (Mapping every
        # dimension to the operand's minor one read a transposed load through a bitcast as
        # contiguous.)
        if inner is not None and (op == "bitcast" or (_row_major(h.shape) and _row_major(o.shape))):
            stride = _physical_stride(h.shape, inner)
            for d in _minor_dims(o.shape):
                if _physical_stride(o.shape, d) == stride:
                    return d, 1, 1.0, ""
        return (_minor_dims(o.shape) or [None])[0], 1, 1.0, ""
    if op == "slice":
        sl = _attr(h, "slice", None)
        step = 1
        if sl is not None and inner is not None and inner < len(sl):
            step = int(sl[inner][2]) if len(sl[inner]) > 2 else 1
        n_in = max(_elements(o.shape), 1)
        return inner, max(step, 1), _elements(h.shape) / n_in, ""
    if op == "gather":
        if idx == 0:
            return None, 1, 1.0, "gather"
        return (_minor_dims(o.shape) or [None])[0], 1, 1.0, "s1"
    if op == "scatter":
        return (_minor_dims(o.shape) or [None])[0], 1, 1.0, "s1"
    # Reductions, dots, convolutions, windows, sorts: read their operands in order.
    return (_minor_dims(o.shape) or [None])[0], 1, 1.0, "s1"


def _stride_class(stride: int, used: float, special: str) -> str:
    if special:
        return special
    if stride == 0:
        return "s0"
    if stride == 1:
        return "s1"
    d = min(stride, 4)
    num = int(min(max(math.ceil(used * d - 1e-9), 1), d))
    return f"{num}of{d}"


def _parameter_classes(root, is_param) -> dict:
    """For each parameter (or kernel operand) reached from `root`, its load stride class.

    Walks from the root towards the parameters, carrying the logical dimension
    that the innermost loop runs over, the accumulated slice stride and the
    used fraction of the footprint. The first path to reach a parameter
    decides its class.
    """
    first = _minor_dims(_first_leaf(root.shape))
    start = first[0] if first else None
    out: dict = {}
    seen: set = set()
    stack = [(root, start, 1, 1.0, "")]
    while stack:
        h, inner, step, used, special = stack.pop()
        key = (id(h), inner, step, special)
        if key in seen:
            continue
        seen.add(key)
        if is_param(h):
            if h not in out:
                stride = _physical_stride(_first_leaf(h.shape), inner) * step if inner is not None else 0
                if inner is not None and stride == 0:
                    stride = step
                out[h] = _stride_class(stride, used, special)
            continue
        if h.opcode in ("parameter", "constant", "iota"):
            continue
        if h.opcode == "tuple" or h.opcode == "get-tuple-element":
            for o in h.operands:
                stack.append((o, (_minor_dims(_first_leaf(o.shape)) or [None])[0], step, used, special))
            continue
        for i in range(len(h.operands)):
            oi, st, fr, sp = _operand_inner(h, i, inner)
            stack.append((h.operands[i], oi, step * st, used * fr, sp or special))
    return out


# --------------------------------------------------------------------------- counting


def _analysis(kernel):
    """The project's HloCostAnalysis of one kernel, variant "base" (XLA's counts, GPU fusion accounting)."""
    from ..analysis import kernel_cost

    return kernel_cost(kernel, "base")


def _utilization(kernel, comp):
    """Per fused instruction, how often it is evaluated per output element (XLA's utilization)."""
    costs = _analysis(kernel)
    util = {}
    for h in comp.instructions:
        try:
            util[h] = float(costs.instruction_counts(h)[2])
        except (KeyError, AttributeError, TypeError):
            util[h] = 0.0
    return costs, util


def _add(acc: dict, key: str, value: float) -> None:
    if value:
        acc[key] = acc.get(key, 0.0) + float(value)


def _computation_ops(comp, acc: dict, scale: float, depth: int = 0, reducer: bool = True) -> None:
    """Ops of a called computation (reducer, comparator, combiner), each `scale` times.

    Their cheap combining ops (add, multiply, min/max, compare/select) are
    counted apart from elementwise ops (`red_<dtype>`): each folds into a
    running value, a dependency chain that vectorizes differently.
    """
    if depth > 16:
        return
    for h in comp.instructions:
        if h.opcode in _ELEMENTWISE:
            dt = _dtype_group(_compute_dtype(h))
            kind = _kind(h.opcode)
            # Cheap combining ops (add, multiply, min/max, select) are the running
            # reduction; transcendentals and divisions cost what they cost anywhere.
            if reducer and kind in ("add", "mul", "other"):
                _add(acc, f"red_{dt}", scale * max(_elements(h.shape), 1))
            else:
                _add_op(acc, h.opcode, dt, scale * max(_elements(h.shape), 1))
        for c in _called(h):
            _computation_ops(c, acc, scale, depth + 1, reducer)


def _called(h) -> list:
    try:
        return list(h.called_computations)
    except Exception:
        return []


def _window_size(h) -> int:
    w = _attr(h, "window", None)
    dims = getattr(w, "dimensions", ()) if w is not None else ()
    return int(math.prod(d.size for d in dims)) if dims else 1


def _instruction_ops(h, acc: dict, util: float) -> None:
    """Operations of one instruction inside a kernel, `util` evaluations per element."""
    op = h.opcode
    if op in _ELEMENTWISE:
        _add_op(acc, op, _dtype_group(_compute_dtype(h)), util * _elements(h.shape))
        return
    if op in ("dot", "scaled-dot", "ragged-dot", "convolution"):
        lhs = h.operands[0].shape
        # 2 flops per multiply-add over the valid window positions, as XLA counts them.
        flops = float(_analysis(h).flops)
        if op != "convolution":
            try:
                _add(acc, "matmul_batch", util * _dot_dims(h)[0])
            except (IndexError, TypeError):
                pass
        dt = _dtype_group(lhs.element_type)
        _add(acc, f"matmul_{dt if dt in MATMUL_DTYPES else 'f32'}", util * flops)
        return
    if op == "reduce":
        to_apply = _attr(h, "to_apply", None)
        count = _elements(h.operands[0].shape) - _elements(_first_leaf(h.shape))
        if to_apply is not None:
            _computation_ops(to_apply, acc, util * max(count, 0))
        return
    if op == "reduce-window":
        to_apply = _attr(h, "to_apply", None)
        count = (_window_size(h) - 1) * _elements(_first_leaf(h.shape))
        if to_apply is not None:
            _computation_ops(to_apply, acc, util * max(count, 0))
        return
    if op == "select-and-scatter":
        n_src = _elements(h.operands[1].shape)
        sel, sca = _attr(h, "select", None), _attr(h, "scatter", None)
        if sel is not None:
            _computation_ops(sel, acc, util * n_src * max(_window_size(h) - 1, 0))
        if sca is not None:
            _computation_ops(sca, acc, util * n_src)
        return
    if op == "scatter":
        ops = h.operands
        n = (len(ops) - 1) // 2
        to_apply = _attr(h, "to_apply", None)
        if to_apply is not None and n >= 1:
            _computation_ops(to_apply, acc, util * _elements(ops[n + 1].shape))
        return
    if op == "map":
        to_apply = _attr(h, "to_apply", None)
        if to_apply is not None:
            _computation_ops(to_apply, acc, util * _elements(h.shape), reducer=False)
        return
    if op == "sort":
        dims = _tuple_attr(h, "dimensions")
        s = _first_leaf(h.operands[0].shape)
        d = s.dims[dims[0]] if dims and dims[0] < len(s.dims) else (s.dims[-1] if s.dims else 1)
        _add(acc, "sort_cmp", util * s.num_elements * max(math.ceil(math.log2(max(d, 1))), 1))
        return
    if op == "topk":
        s = _first_leaf(h.operands[0].shape)
        k = int(_attr(h, "k", 1) or 1)
        _add(acc, "sort_cmp", util * s.num_elements * max(math.ceil(math.log2(max(k, 2))), 1))
        return
    if op == "fft":
        s = _first_leaf(h.operands[0].shape)
        lengths = _tuple_attr(h, "fft_length")
        n = math.prod(lengths) if lengths else 1
        transforms = s.num_elements / max(n, 1)
        _add(acc, "fft_flops", util * 5.0 * transforms * n * math.log2(max(n, 2)))
        return
    if op == "cholesky":
        a = h.operands[0].shape
        n = a.dims[-1] if a.dims else 1
        _add(acc, "solver_flops", util * (a.num_elements / max(n * n, 1)) * n ** 3 / 3.0)
        return
    if op == "triangular-solve":
        a, b = h.operands[0].shape, h.operands[1].shape
        n = a.dims[-1] if a.dims else 1
        _add(acc, "solver_flops", util * n * b.num_elements)
        return
    if op == "custom-call":
        target = str(_attr(h, "custom_call_target", "") or "").lower()
        if any(t in target for t in ("potrf", "trsm", "getrf", "geqrf", "syevd", "gesdd", "lapack", "orgqr")):
            a = _first_leaf(h.operands[0].shape) if h.operands else _first_leaf(h.shape)
            n = a.dims[-1] if a.dims else 1
            _add(acc, "solver_flops", util * (a.num_elements / max(n * n, 1)) * n ** 3 / 3.0)
        return
    if op in ("rng", "rng-bit-generator"):
        _add(acc, f"op_special_{_dtype_group(_first_leaf(h.shape).element_type)}", util * _elements(h.shape))
        return


_DOTS = frozenset({"dot", "scaled-dot", "ragged-dot"})


def _dot_dims(h) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a dot: products of the batch, lhs-free, rhs-free and contracting dims."""
    lhs, rhs = h.operands[0].shape, h.operands[1].shape
    lb, lc = _tuple_attr(h, "lhs_batch_dims"), _tuple_attr(h, "lhs_contracting_dims")
    rb, rc = _tuple_attr(h, "rhs_batch_dims"), _tuple_attr(h, "rhs_contracting_dims")
    batch = math.prod(lhs.dims[d] for d in lb) if lb else 1
    k = math.prod(lhs.dims[d] for d in lc) if lc else 1
    m = math.prod(d for i, d in enumerate(lhs.dims) if i not in lb and i not in lc) if lhs.dims else 1
    n = math.prod(d for i, d in enumerate(rhs.dims) if i not in rb and i not in rc) if rhs.dims else 1
    return int(batch), int(m), int(n), int(k)


def _conv_shape_features(h, acc: dict) -> None:
    """Eigen convolution costs that flops miss: window positions, and feature groups run one by one."""
    out = _first_leaf(h.shape)
    dn = _attr(h, "dim_labels", None)
    win = _window_size(h)
    try:
        spatial = math.prod(out.dims[d] for d in dn.output_spatial) if dn is not None else out.num_elements
        batch = out.dims[dn.output_batch] if dn is not None else 1
    except (AttributeError, IndexError, TypeError):
        spatial, batch = out.num_elements, 1
    _add(acc, "conv_windows", float(batch * spatial * win))
    groups = int(_attr(h, "feature_group_count", 1) or 1) * int(_attr(h, "batch_group_count", 1) or 1)
    if groups > 1:
        # Each group is its own small convolution over every window position.
        _add(acc, "conv_groups", float(groups * batch * spatial * win))


def _first_kernel(kernel) -> bool:
    """The kernel is the first instruction of its module's entry that runs code.

    The first thunk of a run pays the per-run costs (waking the runtime,
    argument and result buffers): on the reference host a small kernel
    takes about 0.31 µs as the first of its program (or the only one) and
    0.22 µs among others (the supplementary kernels, measured in chains of
    four, show it in every chain). This replaced an `alone` feature (the
    only kernel of its program), which cross-validation over the training
    kernels gave no weight next to it. The entry of a compiled module is
    scheduled, so its text order is the order thunks are issued.
    """
    comp = kernel.computation
    if comp is None:
        return False
    module = getattr(comp, "module", None)
    entry = getattr(module, "entry", None) if module is not None else None
    if entry is not None and entry is not comp:
        return False
    for h in comp.instructions:
        if h.opcode not in NO_WORK_IN_KERNEL_OPCODES:
            return h is kernel
    return False


def emitter(kernel) -> str:
    """How XLA:CPU runs a kernel: `"loop"` (code it emits), `"ynn"` (a YNNPACK
    fusion), `"eigen"` (an Eigen matmul/convolution) or `"other"` (a runtime
    call: FFT, sort, LAPACK, top-k).

    A dot on its own goes to Eigen unless it is a matrix-vector product or
    tiny (m·n·k ≤ 8), which XLA emits as a loop (its GEMV / naive emitters).
    """
    op = kernel.opcode
    if op == "fusion":
        return "ynn" if kernel.fusion_kind == "kCustom" else "loop"
    if op in _DOTS:
        try:
            _, m, n, k = _dot_dims(kernel)
        except (IndexError, TypeError):
            return "eigen"
        return "loop" if (m == 1 or n == 1 or m * n * k <= 8) else "eigen"
    if op == "convolution":
        return "eigen"
    if op in _LIBRARY_OPCODES:
        return "other"
    return "loop"


def features_of(kernel, device="host", *, task_bytes: int = TASK_BYTES) -> dict[str, float]:
    """The feature counts of one kernel (see the module docstring).

    **Arguments:** `kernel`, an `HloInstruction` run as one kernel (a fusion or
    a lone instruction); `device`, a `DeviceSpec` or name (cache sizes and core
    count; default the measured host); `task_bytes`: output bytes per parallel
    task of an emitted loop.

    **Returns:** a dict with every name of `FEATURES`.
    **Raises:** `FeatureError` for an instruction that is not a kernel
    (`while`, `conditional`, `call`: their time is that of their kernels).
    """
    dev = device_facts(device)
    op = kernel.opcode
    if op in CONTROL_FLOW_OPCODES:
        raise FeatureError(f"'{kernel.name}' is a {op}, not a kernel: its time is that of the kernels it runs")
    acc: dict[str, float] = {}
    acc["launch"] = 1.0
    if op in NO_WORK_IN_KERNEL_OPCODES:
        return _finish(acc)
    how = emitter(kernel)
    library = how != "loop"
    if library:
        acc[f"lib_{how}"] = 1.0
    elif op != "copy":
        # XLA:CPU runs a lone copy as a copy thunk; everything else it emits
        # is a compiled kernel, whose call costs a little more.
        acc["kernel_thunk"] = 1.0
    if _first_kernel(kernel):
        acc["first"] = 1.0

    comp = kernel.fused_computation if op == "fusion" else None
    loads: dict[int, float] = {}
    stores: dict[int, float] = {}
    load_bytes = store_bytes = 0.0
    if comp is not None:
        if library:
            # A library runs the fused graph op by op, each once, and reads each operand once:
            # the elemental re-computation XLA's utilization counts (a value broadcast back over
            # the elements it was reduced from) happens only in emitted loops.
            costs, util = None, dict.fromkeys(comp.instructions, 1.0)
        else:
            costs, util = _utilization(kernel, comp)
        _fusion_ops(comp, util, acc)
        params = comp.parameters
        classes = _parameter_classes(comp.root, lambda h: h.opcode == "parameter" and h.computation is comp)
        for i, p in enumerate(params):
            if library:
                nbytes = float(p.shape.byte_size)
            else:
                nbytes = float(costs.operand_bytes[i]) if i < len(costs.operand_bytes) else 0.0
            for leaf in _leaves(p.shape):
                bits = max(leaf.element_bits, 1)
                w, k = _width(bits)
                n = nbytes / max(bits / 8.0, 1e-9) * (leaf.byte_size / max(p.shape.byte_size, 1)) if p.shape.is_tuple else nbytes / (bits / 8.0)
                cls = classes.get(p, "s1")
                _add(acc, f"ld_{w}b_{cls}", n * k)
                loads[w] = loads.get(w, 0.0) + n * k
                load_bytes += n * bits / 8.0
        root = comp.root
        outs = list(root.operands) if root.opcode == "tuple" else [root]
    else:
        _instruction_ops(kernel, acc, 1.0)
        if op in _DOTS or op == "convolution":
            flops = sum(acc.pop(f"matmul_{d}", 0.0) for d in MATMUL_DTYPES)
            if how == "loop":
                # An emitted dot (GEMV or tiny) is a vectorized loop of multiply-adds.
                dt = _dtype_group(kernel.operands[0].shape.element_type)
                _add(acc, f"op_mul_{dt}", flops / 2)
                _add(acc, f"op_add_{dt}", flops / 2)
                acc.pop("matmul_batch", None)
            else:
                _add(acc, "conv_flops" if op == "convolution" else "dot_flops", flops)
                if op == "convolution":
                    _conv_shape_features(kernel, acc)
        classes = _parameter_classes(kernel, lambda h: h is not kernel and any(h is o for o in kernel.operands))
        costs = _analysis(kernel)
        for i, o in enumerate(kernel.operands):
            nbytes = float(costs.operand_bytes[i]) if i < len(costs.operand_bytes) else 0.0
            leaf = _first_leaf(o.shape)
            bits = max(leaf.element_bits, 1)
            w, k = _width(bits)
            n = nbytes / (bits / 8.0)
            cls = classes.get(o, "s1")
            _add(acc, f"ld_{w}b_{cls}", n * k)
            loads[w] = loads.get(w, 0.0) + n * k
            load_bytes += nbytes
        outs = [kernel]
    for r in outs:
        if r.opcode == "dynamic-update-slice" and len(r.operands) > 1:
            s, cls = r.operands[1].shape, "s1"
        elif r.opcode == "scatter" and len(r.operands) >= 3:
            s, cls = r.operands[(len(r.operands) - 1) // 2 + 1].shape, "scatter"
        else:
            s, cls = r.shape, "s1"
        for leaf in _leaves(s):
            bits = max(leaf.element_bits, 1)
            w, k = _width(bits)
            n = float(leaf.num_elements)
            _add(acc, f"st_{w}b_{cls}", n * k)
            stores[w] = stores.get(w, 0.0) + n * k
            store_bytes += n * bits / 8.0
    if op == "copy" and kernel.operands and kernel.operands[0].shape == kernel.shape:
        # A lone copy that keeps the layout is a memcpy thunk: bytes moved at memcpy's own rate.
        for f in list(acc):
            if f.startswith(("ld_", "st_", "minldst_")):
                del acc[f]
        _add(acc, "memcpy_bytes", load_bytes + store_bytes)
    elif library:
        # A library call moves its operands its own way: one count of elements
        # in and out, no stride classes; its reductions are its own business.
        _add(acc, "lib_elements", sum(loads.values()) + sum(stores.values()))
        for f in list(acc):
            if f.startswith(("ld_", "st_", "red_")):
                del acc[f]
    else:
        for w in WIDTHS:
            _add(acc, f"minldst_{w}b", min(loads.get(w, 0.0), stores.get(w, 0.0)))

    footprint = sum(float(o.shape.byte_size) for o in kernel.operands) + float(kernel.shape.byte_size)
    moved = load_bytes + store_bytes
    l1 = dev.get("l1", 32 * 1024)
    l2 = dev.get("l2", 1 << 20)
    l3 = dev.get("l3", 0) or l2
    if footprint > l1:
        _add(acc, "bytes_l2", moved)
    if footprint > l2:
        _add(acc, "bytes_l3", moved)
    if footprint > l3:
        _add(acc, "bytes_dram", moved)

    tasks = 1
    if not library:
        tasks = int(min(max(int(kernel.shape.byte_size) // max(int(task_bytes), 1), 1), dev.get("cores", 1)))
    if tasks > 1:
        for f in list(acc):
            if f in _PER_THREAD:
                acc[f] /= tasks
        acc["tasks"] = float(tasks - 1)
    return _finish(acc)


def _fusion_ops(comp, util: dict, acc: dict, scale: float = 1.0, depth: int = 0) -> None:
    for h in comp.instructions:
        u = util.get(h, 0.0) * scale
        if not u:
            continue
        if h.opcode == "fusion" and h.fused_computation is not None and depth < 8:
            # A nested fusion: its instructions run once per element of its result, times its own use.
            inner_util = {g: 1.0 for g in h.fused_computation.instructions}
            _fusion_ops(h.fused_computation, inner_util, acc, u, depth + 1)
            continue
        _instruction_ops(h, acc, u)


def _finish(acc: dict) -> dict[str, float]:
    return {f: float(acc.get(f, 0.0)) for f in FEATURES}


def device_facts(device) -> dict:
    """What the features read of a device: cache sizes (`l1`, `l2`, `l3`) and cores (1 but on a
    CPU). `device`: a `DeviceSpec` or name (`models._resolve.resolve_device`), or such a dict
    (a calibration file's `device_facts`), returned as it is."""
    if isinstance(device, dict):
        return device
    device = resolve_device(device)
    return {
        "l1": int(device.l1_cache_bytes_per_core or 32 * 1024),
        "l2": int(device.l2_cache_bytes or 1 << 20),
        "l3": int(device.l3_cache_bytes or 0),
        "cores": int(device.core_count if device.kind == "cpu" else 1),
    }


# --------------------------------------------------------------------------- dataset rows

_MODULE_CACHE: "OrderedDict[str, Any]" = OrderedDict()
_MODULE_CACHE_SIZE = 64


def _parse_cached(text: str, source: str):
    from ..hlo import parse_hlo

    key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
    mod = _MODULE_CACHE.get(key)
    if mod is None:
        mod = parse_hlo(text, source=source)
        _MODULE_CACHE[key] = mod
        if len(_MODULE_CACHE) > _MODULE_CACHE_SIZE:
            _MODULE_CACHE.popitem(last=False)
    else:
        _MODULE_CACHE.move_to_end(key)
    return mod


_LINE_RE = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s+=\s+(.*?)\s+([a-z][\w\-]*)\((.*)$")
_SIG_RE = re.compile(r"^%?([\w.\-]+)\s+\((.*)\)\s+->\s+(.*?)\s*\{\s*$")


def _split_top(text: str) -> list[str]:
    """Split at top-level commas (outside brackets/braces/parentheses)."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _module_from_kernel_text(hlo_text: str, where: str):
    """Parse a dataset row's `hlo_text` (an instruction line and the computations it calls).

    The operands of the instruction are not in the text; for a fusion their
    shapes are the fused computation's parameter types, so an entry
    computation with one parameter per operand is made up around the line.
    """
    lines = hlo_text.strip().splitlines()
    if not lines:
        raise FeatureError(f"{where}: empty hlo_text")
    head = lines[0]
    m = _LINE_RE.match(head)
    if not m:
        raise FeatureError(f"{where}: the first line of hlo_text is not an instruction: {head[:120]!r}")
    name = m.group(1)
    rest = hlo_text.strip()[len(head):]
    calls = re.search(r"calls=%?([\w.\-]+)", head)
    operands = _split_top(m.group(4).split(")", 1)[0]) if m.group(4) else []
    operand_names = [o.split()[-1].lstrip("%") for o in operands if o]
    param_types: list[str] = []
    if calls:
        comp = calls.group(1)
        sig = re.search(r"^%?" + re.escape(comp) + r"\s+\((.*)\)\s+->", rest, re.M)
        if sig:
            for part in _split_top(sig.group(1)):
                if ":" in part:
                    param_types.append(part.split(":", 1)[1].strip())
        if len(param_types) != len(operand_names):
            # Fall back to the parameter instructions of the fused computation.
            body = re.search(r"^%?" + re.escape(comp) + r"\s+\(.*?\{\n(.*?)^\}", rest, re.M | re.S)
            found: dict[int, str] = {}
            if body:
                for line in body.group(1).splitlines():
                    pm = re.match(r"\s*%?[\w.\-]+\s+=\s+(.*?)\s+parameter\((\d+)\)", line)
                    if pm:
                        found[int(pm.group(2))] = pm.group(1)
            param_types = [found[i] for i in sorted(found)]
    if len(param_types) != len(operand_names):
        raise FeatureError(
            f"{where}: cannot tell the operand shapes of '{name}' from hlo_text alone "
            f"(not a fusion); give the row's module_text"
        )
    params = "\n".join(
        f"  {n} = {t} parameter({i})" for i, (n, t) in enumerate(zip(operand_names, param_types))
    )
    head_root = head.strip()
    if not head_root.startswith("ROOT"):
        head_root = "ROOT " + head_root
    text = f"HloModule kernel_text\n\n{rest.strip()}\n\nENTRY %kernel_entry {{\n{params}\n  {head_root}\n}}\n"
    return _parse_cached(text, where), name


def kernel_from_row(row, where: str = "row"):
    """The kernel instruction of one dataset row, parsed from its HLO text.

    Uses `module_text` (the whole compiled module, which knows the operand
    shapes of every kind of kernel) when the row has it, else `hlo_text`.

    **Returns:** the `HloInstruction`. **Raises:** `FeatureError` naming the row.
    """
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    name = get("hlo_op", None)
    module_text = get("module_text", None)
    hlo_text = get("hlo_text", None)
    if isinstance(module_text, str) and module_text.strip() and isinstance(name, str) and name:
        try:
            mod = _parse_cached(module_text, f"{where} (module_text)")
        except ValueError as exc:
            raise FeatureError(f"{where}: module_text does not parse: {exc}") from None
        for comp in mod.computations:
            if name in comp:
                return comp.instruction(name)
        raise FeatureError(f"{where}: instruction '{name}' is not in module_text")
    if not isinstance(hlo_text, str) or not hlo_text.strip():
        raise FeatureError(f"{where}: no hlo_text (nor module_text) to compute features from")
    try:
        mod, iname = _module_from_kernel_text(hlo_text, where)
    except ValueError as exc:
        if isinstance(exc, FeatureError):
            raise
        raise FeatureError(f"{where}: hlo_text does not parse: {exc}") from None
    return mod.entry.instruction(iname)


def kernel_features(kernels, device="host", *, task_bytes: int = TASK_BYTES) -> pd.DataFrame:
    """The feature table of kernels, one row per kernel, columns `FEATURES`.

    **Arguments:**

    - `kernels`: an `HloInstruction`, a list of them, or calibration-dataset
      rows (a DataFrame, a Series or a dict with `hlo_text`, plus `hlo_op`
      and `module_text` when available).
    - `device`: `DeviceSpec` or name whose cache sizes and cores classify
      accesses (default `"host"`).
    - `task_bytes`: output bytes per parallel task of an emitted loop.

    **Returns:** a DataFrame of floats; its index is the rows' index for a
    DataFrame, else the kernel names.

    **Raises:** `FeatureError` naming the kernel or row that cannot be read.
    """
    dev = device_facts(device)
    if isinstance(kernels, pd.DataFrame):
        rows = []
        for idx, row in kernels.iterrows():
            k = kernel_from_row(row, where=f"row {idx}" + (f" ({row['case']})" if "case" in row else ""))
            rows.append(features_of(k, dev, task_bytes=task_bytes))
        return pd.DataFrame(rows, index=kernels.index, columns=list(FEATURES), dtype=float)
    if isinstance(kernels, (pd.Series, dict)):
        k = kernel_from_row(kernels)
        name = kernels.get("hlo_op", k.name)
        return pd.DataFrame([features_of(k, dev, task_bytes=task_bytes)], index=[name], columns=list(FEATURES), dtype=float)
    if hasattr(kernels, "opcode"):
        kernels = [kernels]
    ks = list(kernels)
    rows = [features_of(k, dev, task_bytes=task_bytes) for k in ks]
    return pd.DataFrame(rows, index=[k.name for k in ks], columns=list(FEATURES), dtype=float)
