"""What XLA's `HloConstantFolding` does before fusion to a module as JAX lowers it.

XLA:GPU folds constants in each simplification pipeline before priority fusion (the fixed point of
the algebraic simplifier, constant folding, CSE and DCE; `gpu_compiler.cc`). A lowered module still
holds what folding removes: a `convert`, `negate` or `reshape` of a constant, a `compare` or
`add` of constants, a `slice` or `dynamic-slice` of a constant table, a `select` on a constant
predicate. Left in, these are instructions fusion sees: a small kernel of their own where nothing
consumes them into a fusion, or operands that change what a fusion reads.

`fold_constants(module)` applies XLA's rules (`xla/hlo/transforms/simplifiers/hlo_constant_folding.cc`,
`HloConstantFolding::Run` at its default level, the one XLA:GPU runs), in place:

- every computation but fusion bodies (`MakeNonFusionNonCompositeComputations`, while bodies
  included), instructions in post order, unread ones skipped (`IsDead`);
- an instruction is folded only when at least one operand is a `constant` and every operand is a
  constant, a `broadcast` of a constant or an `iota` (tuples of those, recursively): an op of
  broadcasts alone is left to the simplifier, which sinks the broadcast (`AnyOperandsConstant`,
  `AllOperandsConstantOrBroadcastConstant`);
- never a `parameter`, `constant` or `tuple`; never a `broadcast`, `iota` (they would grow constants),
  `fft` or `while` (`IsFoldable`); nor what calls a computation holding one of these, an `rng` or an
  `after-all`; nor a side-effecting instruction, one with control predecessors, a `pad` of a
  broadcast by a constant, or one whose result or operands hold more than 45 million elements;
- the folded instruction becomes a constant of its value and what it leaves unread is removed
  (`RecursivelyRemoveDeadInstructionAndDeadOperands`).

XLA evaluates with its `HloEvaluator`; here a small evaluator over numpy (`_evaluate`) does, for the
opcodes it knows: elementwise arithmetic, comparisons, `select`, `clamp`, conversions, shape ops
(`reshape`, `transpose`, `broadcast`, `iota`, `slice`, `concatenate`, `pad`, `reverse`,
`dynamic-slice`, `dynamic-update-slice`), `reduce` by a reducer it can evaluate, and `dot`. Where it
cannot (another opcode, a tuple, a value whose conversion XLA defines in a way not modelled, such as
an integer division by zero, a result of more than 2^20 elements), the instruction is left as it is:
the folding is never guessed. Values
are XLA's up to the rounding of transcendental functions and of sums (numpy's, not Eigen's); what
the simulation reads from a folded value (which constant an instruction became, `IsAll(x, 1)` and
the like) does not depend on the last bit.

The algebraic simplifier then rewrites a folded constant (`HandleConstant`, here applied to the
constants folding made): one of a single repeated value becomes a `broadcast` of a scalar, and a
vector 0, 1, 2, ... an `iota` (and k*0, k*1, ... an iota times a broadcast of k). In XLA these happen in the
simplifier's next run of the same fixed point; done here they keep a folded splat fusible as XLA
keeps it (a non-scalar constant is never fused into a consumer).

Facts after XLA's `hlo_constant_folding.cc` and `algebraic_simplifier.cc`; the code is ours.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..hlo import PRIMITIVE_BITS, HloComputation, HloInstruction, HloModule, Shape
from ..hlo.editing import numpy_dtype
from ._cse import _drop_unreachable, _has_side_effect
from ._scatter_expander import combiner_opcode

__all__ = ["FoldResult", "fold_constants", "literal_of", "literal_text"]

# `HloConstantFolding`'s `kMaximumConstantSizeElements` (default level): neither the result nor its
# operands together may hold more elements.
MAX_ELEMENTS = 45 * 1000 * 1000

# Results with more elements are not evaluated here (left alone, counted): a folded value becomes literal text
# element by element, which would cost more than simulating the module (none on the H100 corpus comes near).
_MAX_EVALUATED_ELEMENTS = 1 << 20
# Scatters with more updates are not evaluated here (the updates are applied one by one).
_MAX_SCATTER_UPDATES = 1 << 16
# `IsFoldable`: never folded (broadcasts and iotas grow constants; FFT and loops cost compile time).
_NEVER_FOLDED = frozenset({"broadcast", "iota", "fft", "while"})
# `IsOrContainsIllegalInstr`: not folded, nor what calls a computation holding one.
_ILLEGAL = frozenset({"rng", "after-all"})
# Never folded themselves (`Run`: a tuple constant is expanded back by the simplifier).
_NOT_FOLDED = frozenset({"parameter", "constant", "tuple"})


@dataclass(frozen=True)
class FoldResult:
    """What `fold_constants` did: `folded`, how many instructions became constants (by opcode);
    `not_evaluated`, how many it would have folded but could not evaluate (by opcode: left as they
    are); `removed`, how many instructions left unread were removed; `rewritten`, how many folded
    constants the simplifier's `HandleConstant` made a broadcast or an iota (by rule)."""

    folded: Mapping[str, int] = field(default_factory=dict)
    not_evaluated: Mapping[str, int] = field(default_factory=dict)
    removed: int = 0
    rewritten: Mapping[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(sum(self.folded.values()))


# -- element types --------------------------------------------------------------------------------

def _dtype(et: str):
    """The numpy dtype of an element type whose values this evaluator computes, or None (complex, sub-byte
    types, and f8e8m0fnu, exponent-only and without a zero: not evaluated)."""
    if PRIMITIVE_BITS.get(et, 0) < 8 or et == "f8e8m0fnu":
        return None
    return numpy_dtype(et)


def _is_float(dt) -> bool:
    """A float type (numpy's or ml_dtypes', whose kind is "V"); `_dtype` makes no complex ones."""
    return dt is not None and dt.kind in "fV"


def _is_int(dt) -> bool:
    return dt is not None and np.issubdtype(dt, np.integer)


# -- literals -------------------------------------------------------------------------------------

_TOKEN = re.compile(r"[^\s{},]+")


def literal_of(instr: HloInstruction) -> np.ndarray | None:
    """The value of a `constant` of an array shape as a numpy array, or None where its literal is
    not one this evaluator reads (complex, elided, a NaN payload)."""
    shape = instr.shape
    if instr.opcode != "constant" or not shape.is_array:
        return None
    dt = _dtype(shape.element_type)
    text = instr.literal_text
    if dt is None or text is None or "..." in text or "(" in text:
        return None
    tokens = _TOKEN.findall(text)
    n = math.prod(shape.dims)
    if len(tokens) != n:
        return None
    try:
        if dt.kind == "b":
            values = [t in ("true", "1") for t in tokens]
            if any(t not in ("true", "false", "0", "1") for t in tokens):
                return None
            return np.array(values, dtype=dt).reshape(shape.dims)
        if _is_int(dt):
            return np.array([int(t) for t in tokens], dtype=object).astype(dt).reshape(shape.dims)
        return np.array([float(t) for t in tokens], dtype=np.float64).astype(dt).reshape(shape.dims)
    except (ValueError, OverflowError):
        return None


def _scalar_text(v, dt) -> str:
    if dt.kind == "b":
        return "true" if v else "false"
    if _is_int(dt):
        return str(int(v))
    f = float(v)
    if math.isnan(f):
        return "-nan" if math.copysign(1.0, f) < 0 else "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    # the shortest text that reads back to the value in its own type (XLA's RoundTripFpToString)
    s = str(v) if dt in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)) else repr(f)
    return s[:-2] if s.endswith(".0") else s


def literal_text(value: np.ndarray) -> str:
    """`value` printed as an HLO literal (`{ {1, 2}, {3, 4} }`; a scalar bare)."""
    dt = value.dtype
    if value.ndim == 0:
        return _scalar_text(value[()], dt)
    flat = [_scalar_text(v, dt) for v in value.reshape(-1)]

    def nest(items: list[str], dims: tuple[int, ...]) -> str:
        if len(dims) == 1:
            return "{" + ", ".join(items) + "}"
        step = len(items) // dims[0] if dims[0] else 0
        return "{ " + ", ".join(nest(items[i * step:(i + 1) * step], dims[1:]) for i in range(dims[0])) + " }"

    return nest(flat, value.shape)


# -- the evaluator --------------------------------------------------------------------------------


class _CannotEvaluate(Exception):
    """An instruction (or a value) the evaluator does not model: the instruction is left alone."""


def _cast(value, dt) -> np.ndarray:
    return np.asarray(value).astype(dt, copy=False)


def _need_float(dt) -> None:
    if not _is_float(dt):
        raise _CannotEvaluate


def _round_afz(x):
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0).astype(x.dtype)


_FLOAT_UNARY = {
    "exponential": np.exp, "exponential-minus-one": np.expm1, "log": np.log, "log-plus-one": np.log1p,
    "sqrt": np.sqrt, "cbrt": np.cbrt, "tanh": np.tanh, "sine": np.sin, "cosine": np.cos, "tan": np.tan,
    "floor": np.floor, "ceil": np.ceil, "round-nearest-even": np.rint, "round-nearest-afz": _round_afz,
    "rsqrt": lambda x: np.ones_like(x) / np.sqrt(x),
    "logistic": lambda x: np.ones_like(x) / (np.ones_like(x) + np.exp(-x)),
}


def _unary(op: str, x: np.ndarray, dt) -> np.ndarray:
    if op in ("copy",):
        return x.copy()
    if op == "negate":
        return np.negative(x) if dt.kind != "b" else _raise()
    if op == "abs":
        return np.abs(x) if dt.kind != "b" else _raise()
    if op == "sign":
        if dt.kind == "b":
            raise _CannotEvaluate
        return np.sign(x)
    if op == "not":
        return np.logical_not(x) if dt.kind == "b" else np.invert(x)
    if op == "is-finite":
        return np.isfinite(x)
    if op in _FLOAT_UNARY:
        _need_float(dt)
        return _FLOAT_UNARY[op](x)
    raise _CannotEvaluate


def _raise():
    raise _CannotEvaluate


_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
            "GE": np.greater_equal}


def _int_divide(x, y, dt, remainder: bool):
    """XLA's integer division (toward zero) and remainder (the dividend's sign); a zero divisor or
    MIN / -1, which XLA defines by rules of its own, are not evaluated."""
    if np.any(y == 0):
        raise _CannotEvaluate
    if dt.kind == "i" and np.any((x == np.iinfo(dt).min) & (y == -1)):
        raise _CannotEvaluate
    if remainder:
        return np.fmod(x, y)
    q = np.floor_divide(x, y)
    fix = (np.fmod(x, y) != 0) & ((x < 0) != (y < 0))
    return np.where(fix, q + 1, q).astype(dt)


def _shift(op: str, x, y, dt):
    bits = dt.itemsize * 8
    unsigned = np.dtype(f"u{dt.itemsize}")
    amount = y.astype(unsigned)
    big = amount >= bits
    safe = np.where(big, 0, amount).astype(unsigned)
    if op == "shift-left":
        out = np.left_shift(x.astype(unsigned), safe).astype(dt)
        return np.where(big, 0, out).astype(dt)
    if op == "shift-right-logical":
        out = np.right_shift(x.astype(unsigned), safe).astype(dt)
        return np.where(big, 0, out).astype(dt)
    out = np.right_shift(x, safe.astype(dt))  # arithmetic for signed types
    return np.where(big, np.where(x < 0, -1, 0) if dt.kind == "i" else 0, out).astype(dt)


def _binary(instr: HloInstruction, x: np.ndarray, y: np.ndarray, dt) -> np.ndarray:
    op = instr.opcode
    odt = x.dtype
    if op == "compare":
        kind = str(instr.raw_attributes.get("type", "")).upper()
        if kind == "TOTALORDER":
            raise _CannotEvaluate
        return _COMPARE[str(instr.attribute("direction"))](x, y)
    if odt.kind == "b":
        table = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
                 "maximum": np.logical_or, "minimum": np.logical_and}
        if op not in table:
            raise _CannotEvaluate
        return table[op](x, y)
    if op in ("add", "subtract", "multiply", "maximum", "minimum"):
        return {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
                "minimum": np.minimum}[op](x, y)
    if op in ("and", "or", "xor"):
        if not _is_int(odt):
            raise _CannotEvaluate
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](x, y)
    if op in ("divide", "remainder"):
        if _is_int(odt):
            return _int_divide(x, y, odt, op == "remainder")
        return np.divide(x, y) if op == "divide" else np.fmod(x, y)
    if op == "power":
        if _is_int(odt):
            if np.any(y < 0):
                raise _CannotEvaluate
            return np.power(x, y)
        return np.power(x, y)
    if op == "atan2":
        _need_float(odt)
        return np.arctan2(x, y)
    if op.startswith("shift-"):
        if not _is_int(odt):
            raise _CannotEvaluate
        return _shift(op, x, y, odt)
    raise _CannotEvaluate


def _convert(x: np.ndarray, dt) -> np.ndarray:
    """XLA's `convert`: floats to integers truncate toward zero (values out of range or NaN, which
    XLA saturates by rules of its own, are not evaluated); to `pred`, nonzero is true."""
    if dt.kind == "b":
        return x != 0
    if _is_int(dt) and not _is_int(x.dtype) and x.dtype.kind != "b":
        wide = x.astype(np.float64)
        info = np.iinfo(dt)
        if np.any(np.isnan(wide)) or np.any(np.trunc(wide) < info.min) or np.any(np.trunc(wide) > info.max):
            raise _CannotEvaluate
        return np.trunc(wide).astype(dt)
    if _is_float(dt) and not _is_float(x.dtype):
        return x.astype(np.float64).astype(dt) if x.dtype.kind != "b" else x.astype(dt)
    return x.astype(dt)


def _broadcast(x: np.ndarray, dims: tuple[int, ...], out_dims: tuple[int, ...]) -> np.ndarray:
    order = sorted(range(len(dims)), key=lambda k: dims[k])
    x = np.transpose(x, order) if order != list(range(len(dims))) else x
    shape = [1] * len(out_dims)
    for k in order:
        shape[dims[k]] = x.shape[order.index(k)]
    return np.broadcast_to(x.reshape(shape), out_dims).copy()


def _iota(out_dims, dim: int, dt) -> np.ndarray:
    n = out_dims[dim]
    shape = [1] * len(out_dims)
    shape[dim] = n
    values = np.arange(n, dtype=np.int64)
    values = values.astype(np.float64).astype(dt) if _is_float(dt) else values.astype(dt)
    return np.broadcast_to(values.reshape(shape), out_dims).copy()


def _pad(x: np.ndarray, value, config, out_dims, dt) -> np.ndarray:
    out = np.full(out_dims, value, dtype=dt)
    src, dst = [], []
    for d, (lo, hi, interior) in enumerate(config):
        pos = lo + np.arange(x.shape[d]) * (interior + 1)
        keep = (pos >= 0) & (pos < out_dims[d])
        src.append(np.nonzero(keep)[0])
        dst.append(pos[keep])
    if all(len(s) for s in src):
        out[np.ix_(*dst)] = x[np.ix_(*src)]
    return out


def _starts(indices: list[np.ndarray], operand_dims, sizes) -> list[int]:
    """Dynamic start indices clamped into the operand, as XLA clamps them."""
    return [min(max(int(i), 0), int(d) - int(s)) for i, d, s in zip(indices, operand_dims, sizes)]


def _reduce(instr: HloInstruction, x: np.ndarray, init: np.ndarray, dt) -> np.ndarray:
    dims = tuple(int(d) for d in instr.attribute("dimensions"))
    keep = [d for d in range(x.ndim) if d not in dims]
    moved = np.transpose(x, keep + list(dims))
    out_shape = tuple(x.shape[d] for d in keep)
    k = math.prod(x.shape[d] for d in dims)
    flat = moved.reshape(out_shape + (k,))
    comp = instr.attribute("to_apply")
    op = combiner_opcode(comp)
    acc = np.broadcast_to(init, out_shape).astype(dt)
    if op in ("maximum", "minimum", "and", "or") or (op in ("add", "multiply") and not _is_float(dt)):
        if k == 0:
            return acc
        if dt.kind == "b":
            uf = {"maximum": np.logical_or, "or": np.logical_or, "minimum": np.logical_and, "and": np.logical_and,
                  "add": None, "multiply": None}[op]
            if uf is None:
                raise _CannotEvaluate
        else:
            uf = {"maximum": np.maximum, "minimum": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
                  "add": np.add, "multiply": np.multiply}[op]
            if op in ("and", "or") and not _is_int(dt):
                raise _CannotEvaluate
        return uf(acc, uf.reduce(flat, axis=-1, dtype=dt)).astype(dt)
    if op in ("add", "multiply"):  # floats: in the order XLA's evaluator adds them, one after another
        uf = np.add if op == "add" else np.multiply
        return uf.accumulate(np.concatenate([acc[..., None], flat], axis=-1), axis=-1, dtype=dt)[..., -1].astype(dt)
    if k > 4096:
        raise _CannotEvaluate
    for j in range(k):  # any reducer this evaluator can evaluate, element after element
        acc = _evaluate_computation(comp, [acc, np.ascontiguousarray(flat[..., j])])
    return acc


_SCATTER_UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


def _scatter(instr: HloInstruction, operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, dt) -> np.ndarray:
    """One scatter (XLA's operation semantics), its updates applied in their row-major order; a window out of
    the operand's bounds (where XLA's backends differ) is not evaluated, nor a combiner other than one
    elementwise op of its two parameters or the update itself."""
    attr = instr.attribute
    window = [int(d) for d in attr("update_window_dims", ())]
    inserted = [int(d) for d in attr("inserted_window_dims", ())]
    to_operand = [int(d) for d in attr("scatter_dims_to_operand_dims", ())]
    ivd = int(attr("index_vector_dim"))
    batch_in = [int(d) for d in attr("input_batching_dims", ())]
    batch_idx = [int(d) for d in attr("scatter_indices_batching_dims", ())]
    comp = attr("to_apply")
    root, params = comp.root, comp.parameters
    if len(params) != 2:
        raise _CannotEvaluate
    if root is params[1]:
        combine = None  # the update replaces the element
    else:
        op = combiner_opcode(comp)
        if op not in _SCATTER_UFUNCS or root.operands[0] is not params[0]:
            raise _CannotEvaluate
        combine = _SCATTER_UFUNCS[op]
    n = updates.size
    coords = np.indices(updates.shape).reshape(updates.ndim, n)
    scatter_dims = [d for d in range(updates.ndim) if d not in window]
    g = coords[scatter_dims]
    if ivd == indices.ndim:
        vectors = indices[tuple(g)][None, :]
    else:
        vectors = np.stack([indices[tuple(np.insert(g, ivd, k, axis=0))] for k in range(indices.shape[ivd])])
    start = np.zeros((operand.ndim, n), dtype=np.int64)
    for k, d in enumerate(to_operand):
        start[d] += vectors[k]
    for d, b in zip(batch_in, batch_idx):
        start[d] += g[b if b < ivd else b - 1]
    extent = np.ones(operand.ndim, dtype=np.int64)
    full = start.copy()
    window_dims = [d for d in range(operand.ndim) if d not in inserted and d not in batch_in]
    for k, d in enumerate(window_dims):
        extent[d] = updates.shape[window[k]]
        full[d] += coords[window[k]]
    if np.any(start < 0) or np.any(start + extent[:, None] > np.array(operand.shape)[:, None]):
        raise _CannotEvaluate
    out = operand.copy()
    index = tuple(full)
    values = updates.reshape(-1)
    if combine is not None:
        combine.at(out, index, values)
    else:
        for j in range(n):
            out[tuple(int(x[j]) for x in index)] = values[j]
    return out


def _dot(instr: HloInstruction, a: np.ndarray, b: np.ndarray, dt) -> np.ndarray:
    attr = instr.attribute
    lb, rb = list(attr("lhs_batch_dims", ())), list(attr("rhs_batch_dims", ()))
    lc, rc = list(attr("lhs_contracting_dims", ())), list(attr("rhs_contracting_dims", ()))
    if instr.has_attribute("sparsity") or len(instr.operands) != 2:
        raise _CannotEvaluate
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    ls = [""] * a.ndim
    rs = [""] * b.ndim
    for i, j in zip(lb + lc, rb + rc):
        ls[i] = rs[j] = next(letters)
    for s in (ls, rs):
        for i, v in enumerate(s):
            if not v:
                s[i] = next(letters)
    out = [ls[i] for i in lb] + [v for i, v in enumerate(ls) if i not in lb + lc] + \
          [v for i, v in enumerate(rs) if i not in rb + rc]
    wide = np.complex128 if dt.kind == "c" else np.float64 if not _is_int(dt) else np.int64
    return np.einsum(f"{''.join(ls)},{''.join(rs)}->{''.join(out)}", a.astype(wide), b.astype(wide))


def _updates_small(updates: np.ndarray) -> bool:
    return updates.size <= _MAX_SCATTER_UPDATES


def _evaluate(instr: HloInstruction, args: list[np.ndarray]) -> np.ndarray:
    """The value of `instr` of operand values `args` (XLA's `HloEvaluator` for the opcodes it models);
    raises `_CannotEvaluate` for the others."""
    shape = instr.shape
    if instr.opcode == "get-tuple-element" and shape.is_array and args and isinstance(args[0], tuple):
        return args[0][int(instr.attribute("index"))]
    if not shape.is_array or any(isinstance(a, tuple) for a in args):
        raise _CannotEvaluate
    dt = _dtype(shape.element_type)
    if dt is None or any(a is None for a in args):
        raise _CannotEvaluate
    op = instr.opcode
    out_dims = tuple(int(d) for d in shape.dims)
    with np.errstate(all="ignore"):
        if op == "constant":
            value = literal_of(instr)
            if value is None:
                raise _CannotEvaluate
            return value
        if op == "iota":
            return _iota(out_dims, int(instr.attribute("iota_dimension")), dt)
        if op == "broadcast":
            return _cast(_broadcast(args[0], tuple(int(d) for d in instr.attribute("dimensions", ())), out_dims), dt)
        if len(args) == 1 and op in ("copy", "negate", "abs", "sign", "not", "is-finite") or op in _FLOAT_UNARY:
            return _cast(_unary(op, args[0], args[0].dtype), dt)
        if op == "convert":
            return _convert(args[0], dt)
        if op == "bitcast-convert":
            if args[0].dtype.itemsize != dt.itemsize:
                raise _CannotEvaluate
            return np.ascontiguousarray(args[0]).view(dt).reshape(out_dims)
        if op == "compare" or (len(args) == 2 and op in (
                "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "and", "or",
                "xor", "atan2", "shift-left", "shift-right-logical", "shift-right-arithmetic")):
            return _cast(_binary(instr, args[0], args[1], dt), dt)
        if op == "select":
            return _cast(np.where(args[0], args[1], args[2]), dt)
        if op == "clamp":
            lo, x, hi = args
            if dt.kind == "b":
                raise _CannotEvaluate
            return _cast(np.minimum(np.maximum(x, lo), hi), dt)
        if op == "reshape":
            return args[0].reshape(out_dims)
        if op == "transpose":
            return np.ascontiguousarray(np.transpose(args[0], tuple(int(d) for d in instr.attribute("dimensions"))))
        if op == "reverse":
            return np.flip(args[0], axis=tuple(int(d) for d in instr.attribute("dimensions"))).copy()
        if op == "slice":
            spec = instr.attribute("slice")
            return args[0][tuple(slice(int(s), int(e), int(st)) for s, e, st in spec)].copy()
        if op == "concatenate":
            return np.concatenate(args, axis=int(instr.attribute("dimensions")[0]))
        if op == "pad":
            config = instr.attribute("padding")
            return _pad(args[0], args[1][()], config, out_dims, dt)
        if op == "dynamic-slice":
            x = args[0]
            starts = _starts(args[1:], x.shape, out_dims)
            return x[tuple(slice(s, s + n) for s, n in zip(starts, out_dims))].copy()
        if op == "dynamic-update-slice":
            x, update = args[0].copy(), args[1]
            starts = _starts(args[2:], x.shape, update.shape)
            x[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
            return x
        if op == "reduce" and len(args) == 2:
            return _reduce(instr, args[0], args[1], dt)
        if op == "dot":
            return _cast(_dot(instr, args[0], args[1], dt), dt)
        if op == "scatter" and len(args) == 3 and _updates_small(args[2]):
            return _scatter(instr, args[0], args[1], args[2], dt)
    raise _CannotEvaluate


def _evaluate_computation(comp: HloComputation, params: list[np.ndarray]) -> np.ndarray:
    """The value of a called computation's root (a reducer) for `params`, elementwise over arrays."""
    values: dict[int, np.ndarray] = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            values[id(instr)] = params[instr.parameter_number]
            continue
        args = [values[id(o)] for o in instr.operands]
        if instr.opcode in ("broadcast", "reshape", "reduce", "dot", "slice", "pad", "concatenate", "transpose",
                            "dynamic-slice", "dynamic-update-slice", "reverse", "iota"):
            raise _CannotEvaluate  # shapes here are a scalar reducer's; the arrays stand for many scalars
        values[id(instr)] = _evaluate(instr, args)
    return values[id(comp.root)]


# -- which instructions XLA folds -----------------------------------------------------------------


def _any_operand_constant(instr: HloInstruction) -> bool:
    for op in instr.operands:
        if op.opcode == "tuple":
            if _any_operand_constant(op):
                return True
        elif op.opcode == "constant":
            return True
    return False


def _all_operands_constant_like(instr: HloInstruction) -> bool:
    for op in instr.operands:
        if op.opcode == "tuple":
            if not _all_operands_constant_like(op):
                return False
        elif not (op.opcode in ("constant", "iota")
                  or (op.opcode == "broadcast" and op.operands and op.operands[0].opcode == "constant")):
            return False
    return True


def _contains_illegal(instr: HloInstruction) -> bool:
    if instr.opcode in _ILLEGAL:
        return True
    return any(_contains_illegal(i) for c in instr.called_computations for i in c.instructions)


def _elements(shape: Shape) -> int:
    return math.prod(int(d) for d in shape.dims) if shape.is_array else 0


def _is_foldable(instr: HloInstruction, cache: dict[HloComputation, bool]) -> bool:
    """XLA's `IsFoldable` at the default level."""
    if instr.opcode in _NEVER_FOLDED:
        return False
    for sub in instr.called_computations:
        known = cache.get(sub)
        if known is None:
            known = all(_is_foldable(i, cache) for i in sub.post_order())
            cache[sub] = known
        if not known:
            return False
    if _contains_illegal(instr) or _has_side_effect(instr) or instr.has_attribute("control-predecessors"):
        return False
    if instr.opcode == "pad" and instr.operands[0].opcode == "broadcast" and instr.operands[1].opcode == "constant":
        return False
    if instr.shape.is_array:
        in_operands = sum(_elements(o.shape) for o in instr.operands)
        if max(_elements(instr.shape), in_operands) > MAX_ELEMENTS:
            return False
    return True


def _computations(module: HloModule) -> list[HloComputation]:
    """Every computation but fusion bodies (`MakeNonFusionNonCompositeComputations`)."""
    bodies = {id(i.fused_computation) for _, i in module.instructions()
              if i.opcode == "fusion" and i.fused_computation is not None}
    return [c for c in module.computations if id(c) not in bodies]


def _operand_value(op: HloInstruction, cache: dict[HloInstruction, object]) -> object:
    """A constant's, a broadcast of a constant's or an iota's value (what `TryEvaluate` evaluates
    recursively for an operand that is not itself a constant), a tuple's its elements', or None. Keyed by the
    instruction itself (not its id: removed instructions' ids are reused)."""
    key = op
    if key not in cache:
        try:
            if _elements(op.shape) > _MAX_EVALUATED_ELEMENTS:
                cache[key] = None
            elif op.opcode == "broadcast":
                cache[key] = _evaluate(op, [_operand_value(op.operands[0], cache)])
            elif op.opcode in ("constant", "iota"):
                cache[key] = _evaluate(op, [])
            elif op.opcode == "tuple":  # its elements' values (a get-tuple-element reads one)
                elements = tuple(_operand_value(o, cache) for o in op.operands)
                cache[key] = None if any(e is None for e in elements) else elements
            else:
                cache[key] = None
        except _CannotEvaluate:
            cache[key] = None
    return cache[key]


def _remove_dead(comp: HloComputation, instr: HloInstruction) -> int:
    """`RecursivelyRemoveDeadInstructionAndDeadOperands`."""
    n = 0
    dead = [instr]
    while dead:
        i = dead.pop()
        if i.computation is not comp or i.users or i is comp.root or _has_side_effect(i) or i.opcode == "parameter":
            continue
        operands = list(i.operands)
        comp.remove_instruction(i)
        n += 1
        dead.extend(o for o in operands if not o.users)
    return n


# -- the simplifier's `HandleConstant` on a folded constant ---------------------------------------


def _new(comp: HloComputation, before: HloInstruction, opcode: str, shape: Shape, operands, **kw) -> HloInstruction:
    instr = HloInstruction(comp.module.unique_name(opcode), opcode, shape, list(operands), **kw)
    comp.add_instruction(instr, before=before)
    return instr


def _constant_for(comp: HloComputation, before: HloInstruction, value: np.ndarray, shape: Shape,
                  counts: Counter) -> HloInstruction | None:
    """What `HandleConstant` makes of a constant of `value` (added before `before`), or None."""
    n = value.size
    flat = value.reshape(-1)
    if n > 1 and (flat == flat[0]).all():  # `IsAllFirst` (NaN equals nothing)
        scalar = _new(comp, before, "constant", Shape.array(shape.element_type, ()), [],
                      literal_text=literal_text(flat[0]))
        bcast = _new(comp, before, "broadcast", shape, [scalar])
        bcast.set_attribute("dimensions", "{}")
        counts["constant of one value -> broadcast"] += 1
        return bcast
    if n > 1 and value.ndim == 1 and value.dtype.kind != "b":
        steps = np.arange(n, dtype=np.int64)
        if (flat == steps.astype(value.dtype)).all():
            iota = _new(comp, before, "iota", shape, [])
            iota.set_attribute("iota_dimension", "0")
            counts["constant 0, 1, 2, ... -> iota"] += 1
            return iota
        if _is_int(value.dtype) and flat[0] == 0 and flat[1] != 0:
            stride = flat[1]
            if (flat == (steps * int(stride)).astype(value.dtype)).all():
                iota = _new(comp, before, "iota", shape, [])
                iota.set_attribute("iota_dimension", "0")
                k = _new(comp, before, "constant", Shape.array(shape.element_type, ()), [],
                         literal_text=literal_text(np.asarray(stride, dtype=value.dtype)))
                kb = _new(comp, before, "broadcast", shape, [k])
                kb.set_attribute("dimensions", "{}")
                counts["constant 0, k, 2k, ... -> iota * k"] += 1
                return _new(comp, before, "multiply", shape, [iota, kb])
    return None


# -- the pass -------------------------------------------------------------------------------------


def fold_constants(module: HloModule, *, simplify_folded: bool = True) -> FoldResult:
    """Fold `module`'s constant expressions in place as XLA's `HloConstantFolding` does (see the module's
    docstring); instructions the evaluator cannot evaluate are left as they are.

    **Arguments:** `simplify_folded`: then rewrite the constants folding made as the simplifier's
    `HandleConstant` does (False: XLA's folding pass alone, as its dumps show it).

    **Returns:** a `FoldResult`.
    """
    folded: Counter = Counter()
    failed: Counter = Counter()
    rewritten: Counter = Counter()
    removed = 0
    foldable_cache: dict[HloComputation, bool] = {}
    for comp in _computations(module):
        values: dict[HloInstruction, object] = {}
        made: list[tuple[HloInstruction, np.ndarray]] = []
        for instr in comp.post_order():
            if instr.computation is not comp:
                continue  # removed as dead
            if not instr.users and instr is not comp.root:
                continue  # `IsDead`
            if instr.opcode in _NOT_FOLDED or not instr.operands:
                continue
            if not _any_operand_constant(instr) or not _all_operands_constant_like(instr):
                continue
            if not _is_foldable(instr, foldable_cache):
                continue
            try:
                if _elements(instr.shape) > _MAX_EVALUATED_ELEMENTS:
                    raise _CannotEvaluate
                args = [_operand_value(o, values) for o in instr.operands]
                if any(a is None for a in args):
                    raise _CannotEvaluate
                value = _evaluate(instr, args)
                value = np.asarray(value)
                if value.shape != tuple(int(d) for d in instr.shape.dims) or value.dtype != _dtype(instr.shape.element_type):
                    raise _CannotEvaluate
            except (_CannotEvaluate, KeyError, ValueError, IndexError, TypeError, OverflowError):
                failed[instr.opcode] += 1
                continue
            new = _new(comp, instr, "constant", instr.shape, [], literal_text=literal_text(value))
            made.append((new, value))
            values[new] = value
            instr.replace_all_uses_with(new)
            removed += _remove_dead(comp, instr) - 1
            folded[instr.opcode] += 1
        # the simplifier's next run (`HandleConstant`) on the constants folding made
        for const, value in made if simplify_folded else ():
            if const.computation is not comp or (not const.users and const is not comp.root):
                continue
            new = _constant_for(comp, const, value, const.shape, rewritten)
            if new is not None:
                const.replace_all_uses_with(new)
                comp.remove_instruction(const)
    if folded:
        _drop_unreachable(module)  # `HloDCE`: the reducer of a folded reduce is called no more
    return FoldResult(dict(folded), dict(failed), removed, dict(rewritten))
