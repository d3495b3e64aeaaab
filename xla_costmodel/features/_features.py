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
  (Eigen on XLA:CPU, a different rate); `conv_flops_transposed`: the
  flops of a convolution whose input is not batch-major and feature-minor
  (`b…f` dim labels; XLA:CPU makes such convolutions of weight gradients,
  and Eigen runs them through a generic path at a small fraction of the
  rate), with `conv_windows` (batch ×
  output positions × window size) and `conv_groups` (the same times the
  feature groups, which Eigen runs one after the other; 0 for one group)
  for its convolutions; `ynn_grouped_conv_elements`: the stencil
  elements (`batch · output positions · window size · input features`, the
  im2col copy YNNPACK walks) of the convolutions with feature groups inside a
  YNNPACK fusion, which run per element at a scalar rate, not per flop at the
  GEMM rate (`models._xla_cpu_convolution`; their flops stay in
  `matmul_<dtype>`, so this weight is their extra cost); `red_<dtype>`: operations of
  reducers and combiners (reduce, reduce-window, scatter,
  select-and-scatter) times the elements they fold, each into a running
  value; `sort_cmp`: comparisons of sorts (n·⌈log₂ d⌉);
  `fft_flops`: 5·n·log₂ n per transform; `solver_flops`: the flops of
  linear-algebra solvers by the textbook count of each algorithm
  (Golub & Van Loan): Cholesky n³/3, LU 2n³/3, QR 2mn² − 2n³/3,
  symmetric eigendecomposition with vectors 9n³, SVD with vectors
  4m²n + 8mn² + 9n³, triangular solves n² per right-hand side.
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

`kernel_features(x, device)` (`_rows`) accepts an `HloInstruction` (or a
list of them), or calibration-dataset rows (a DataFrame, Series or dict with
`hlo_text`, and `hlo_op`/`module_text` when present), and returns one row of
`FEATURES` per kernel; `features_of(kernel, device)` (`_counting`) counts one
kernel. Here: the feature names, the opcode tables and the small helpers the
counting shares.
"""

from __future__ import annotations



from ..measure import resolve_device

__all__ = ["FEATURES", "FEATURE_GROUPS", "FeatureError", "device_facts"]

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
    names += ["matmul_batch", "dot_flops", "conv_flops", "conv_flops_transposed", "conv_windows", "conv_groups",
              "ynn_grouped_conv_elements", "sort_cmp", "fft_flops",
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


def _add(acc: dict, key: str, value: float) -> None:
    if value:
        acc[key] = acc.get(key, 0.0) + float(value)


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


def device_facts(device) -> dict:
    """What the features read of a device: cache sizes (`l1`, `l2`, `l3`) and cores (1 but on a
    CPU). `device`: a `DeviceSpec` or name (`measure.resolve_device`), or such a dict
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
