"""XLA's shape inference (`xla/service/shape_inference.cc`) for the opcodes we need.

Two users: the parser, for instructions written without a shape (XLA infers
them: `ROOT out = add(p0, p1)`), and the verifier, which checks a written
shape against the inferred one as XLA's `ShapeVerifier` does. Each function
returns the inferred `Shape` or raises `InferenceError` with XLA's message.
Layouts are not inferred (XLA's verifier compares shapes ignoring layout).
"""

from __future__ import annotations

from ._shape import Shape

__all__ = ["InferenceError", "program_shape"]

FLOATS = frozenset({"f16", "bf16", "f32", "f64", "f8e5m2", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz", "f8e3m4",
                    "f8e5m2fnuz", "f8e4m3fnuz", "f4e2m1fn", "f8e8m0fnu", "f6e2m3fn", "f6e3m2fn"})
COMPLEX = frozenset({"c64", "c128"})
SIGNED_INTS = frozenset({"s1", "s2", "s4", "s8", "s16", "s32", "s64"})
UNSIGNED_INTS = frozenset({"u1", "u2", "u4", "u8", "u16", "u32", "u64"})
INTS = SIGNED_INTS | UNSIGNED_INTS
_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "c64": 64, "c128": 128}


class InferenceError(ValueError):
    """Shape inference refused the operands (XLA's InvalidArgument)."""


def program_shape(comp) -> tuple[list[Shape], Shape]:
    """(parameter shapes by number, root shape) of a computation."""
    return [p.shape for p in comp.parameters], comp.root.shape


def human(shape: Shape) -> str:
    return str(shape.without_layout())


def _is_array(s: Shape) -> bool:
    return s.is_array


def expect_array(s: Shape, what: str) -> None:
    if not s.is_array:
        raise InferenceError(f"Expected array argument for {what}, but got {human(s)}.")


def is_scalar(s: Shape) -> bool:
    return s.is_array and not s.dims


def _precision_bits(et: str) -> int:
    return _BITS.get(et, 8 if et.startswith("f") else 0)


def same_type_ignoring_fp(a: Shape, b: Shape) -> bool:
    """XLA's SameElementTypeIgnoringFpPrecision."""
    if a.element_type in FLOATS and b.element_type in FLOATS:
        return True
    return a.element_type == b.element_type


def higher_precision(a: Shape, b: Shape) -> str:
    """XLA's HigherPrecisionElementType (ties keep the first)."""
    ta, tb = a.element_type, b.element_type
    if ta == tb:
        return ta
    if ta in FLOATS and tb in FLOATS:
        return tb if _precision_bits(tb) > _precision_bits(ta) else ta
    return ta


def with_type(s: Shape, et: str) -> Shape:
    return Shape(et, s.dims, s.dynamic, None)


def compatible_ignoring_fp(a: Shape, b: Shape) -> bool:
    if a.is_tuple or b.is_tuple:
        return a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes) and all(
            compatible_ignoring_fp(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    if not same_type_ignoring_fp(a, b):
        return False
    return Shape(a.element_type, b.dims, b.dynamic).compatible(Shape(a.element_type, a.dims, a.dynamic))


def compatible_ignoring_type(a: Shape, b: Shape) -> bool:
    if not (a.is_array and b.is_array):
        return a.compatible(b)
    return Shape("f32", a.dims, a.dynamic).compatible(Shape("f32", b.dims, b.dynamic))


def array(et: str, dims, dynamic=None) -> Shape:
    dims = tuple(dims)
    return Shape(et, dims, tuple(dynamic) if dynamic is not None else (False,) * len(dims))


# -- elementwise ----------------------------------------------------------------------

_FLOAT_ONLY = frozenset({"floor", "cbrt", "ceil", "erf", "round-nearest-afz", "round-nearest-even"})
_FLOAT_OR_COMPLEX = frozenset({"asin", "asinh", "acos", "acosh", "atanh", "cosh", "cosine", "sinh", "sine",
                               "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt",
                               "sqrt", "tan", "tanh"})


def unary(opcode: str, s: Shape) -> Shape:
    if opcode in ("copy", "domain"):
        return s
    expect_array(s, "operand of unary operation")
    et = s.element_type
    if opcode in _FLOAT_ONLY:
        if et not in FLOATS:
            raise InferenceError(f"Expected element type in shape to be floating for {opcode} operation; got {et.upper()}.")
        return s
    if opcode in _FLOAT_OR_COMPLEX:
        if et not in FLOATS and et not in COMPLEX:
            raise InferenceError(
                f"Expected element type in shape to be floating or complex for {opcode} operation; got {et.upper()}.")
        return s
    if opcode in ("real", "imag"):
        if et in COMPLEX:
            return with_type(s, "f32" if et == "c64" else "f64")
        if et in FLOATS:
            return s
        raise InferenceError(
            f"Expected element type in shape to be floating or complex for {opcode} operation; got {et.upper()}.")
    if opcode == "abs":
        if et in COMPLEX:
            return with_type(s, "f32" if et == "c64" else "f64")
        if et in SIGNED_INTS or et in FLOATS:
            return s
        raise InferenceError(f"Expected element type in shape to be floating or complex for abs operation; got {et.upper()}.")
    if opcode in ("count-leading-zeros", "popcnt"):
        if et not in INTS:
            raise InferenceError(f"Expected an integral element type in argument to {opcode} operation; got {et.upper()}.")
        return s
    if opcode == "negate":
        if et not in INTS and et not in FLOATS and et not in COMPLEX:
            raise InferenceError(
                f"Expected element type in shape to be integral, floating or complex for negate operation; got {et.upper()}.")
        return s
    if opcode == "sign":
        if et not in SIGNED_INTS and et not in FLOATS and et not in COMPLEX:
            raise InferenceError(f"Expected element type in shape to be signed or complex for sign operation; got {et.upper()}.")
        return s
    if opcode == "not":
        if et != "pred" and et not in INTS:
            raise InferenceError(f"Expected pred or an integral element type in argument to Not operation; got {et.upper()}.")
        return s
    if opcode == "is-finite":
        if et not in FLOATS:
            raise InferenceError(
                f"Expected element type in shape to be floating point for IsFinite operation; got {et.upper()}.")
        return with_type(s, "pred")
    raise InferenceError(f'Unknown operation for unary shape inference: "{opcode}".')


def _degenerate(a: Shape, b: Shape) -> Shape:
    dims, dyn = [], []
    for i, (x, y) in enumerate(zip(a.dims, b.dims)):
        if x == 1 or y == 1:
            dims.append(y if x == 1 else x)
            dyn.append(b.dynamic[i] if x == 1 else a.dynamic[i])
        elif x == y:
            dims.append(x)
            dyn.append(a.dynamic[i] or b.dynamic[i])
        elif (x == -1 and a.dynamic[i]) or (y == -1 and b.dynamic[i]):
            dims.append(y if x == -1 else x)
            dyn.append(True)
        else:
            raise InferenceError(f"Binary op with incompatible shapes: {human(a)} and {human(b)}.")
    return array(a.element_type, dims, dyn)


def _elementwise(opcode: str, a: Shape, b: Shape) -> Shape:
    expect_array(a, "lhs of elementwise binary operation")
    expect_array(b, "rhs of elementwise binary operation")
    if not same_type_ignoring_fp(a, b):
        raise InferenceError(f"Binary op {opcode} with different element types: {human(a)} and {human(b)}.")
    if opcode == "atan2" and a.element_type not in FLOATS and a.element_type not in COMPLEX:
        raise InferenceError(
            f"Expected input element type to be floating or complex for atan2 operation; got {a.element_type.upper()}.")
    if compatible_ignoring_fp(a, b) and -1 not in a.dims and -1 not in b.dims:
        dyn = tuple(x or y for x, y in zip(a.dynamic, b.dynamic))
        return Shape(higher_precision(a, b), a.dims, dyn)
    if len(a.dims) == len(b.dims):
        return _degenerate(a, b)
    larger, smaller = (a, b) if len(a.dims) > len(b.dims) else (b, a)
    if smaller.dims:
        raise InferenceError(f"Shapes must be equal rank, but are {human(smaller)} and {human(larger)}")
    return Shape(higher_precision(larger, smaller), larger.dims, larger.dynamic)


def binary(opcode: str, a: Shape, b: Shape) -> Shape:
    expect_array(a, f"lhs of binary operation {opcode}")
    expect_array(b, f"rhs of binary operation {opcode}")
    if opcode in ("add", "maximum", "minimum", "multiply", "mulhi"):
        return _elementwise(opcode, a, b)
    if opcode in ("subtract", "atan2", "power", "divide", "remainder", "shift-left", "shift-right-arithmetic",
                  "shift-right-logical", "stochastic-convert"):
        if opcode == "stochastic-convert":
            raise InferenceError("stochastic-convert needs its result type written")
        if a.element_type == "pred" or b.element_type == "pred":
            raise InferenceError(f"Expected element type in shape to be arithmetic type for operation {opcode}; got PRED.")
        return _elementwise(opcode, a, b)
    if opcode == "complex":
        if a.element_type not in FLOATS:
            raise InferenceError(
                f"Expected element type in shape to be floating for complex compose operation; got {a.element_type.upper()}.")
        s = _elementwise(opcode, a, b)
        if a.element_type == "f32" and b.element_type == "f32":
            return with_type(s, "c64")
        if a.element_type == "f64" and b.element_type == "f64":
            return with_type(s, "c128")
        raise InferenceError("Complex component type is not implemented.")
    if opcode in ("and", "or", "xor"):
        if a.element_type != "pred" and a.element_type not in INTS:
            raise InferenceError(
                f"Expected pred or integral type in argument to and/or operation; got {a.element_type.upper()}.")
        return _elementwise(opcode, a, b)
    if opcode == "compare":
        return with_type(_elementwise(opcode, a, b), "pred")
    raise InferenceError(f"Binary op shape inference: {opcode} is not implemented.")


def ternary(opcode: str, a: Shape, b: Shape, c: Shape) -> Shape:
    if opcode == "clamp":
        for s, what in ((a, "clamp min"), (b, "clamp operand"), (c, "clamp max")):
            expect_array(s, what)
        if not (same_type_ignoring_fp(a, b) and same_type_ignoring_fp(c, b) and same_type_ignoring_fp(a, c)):
            raise InferenceError(f"Clamp with incompatible element types: {human(a)}, {human(b)}, {human(c)}.")
        if ((not is_scalar(a) and not compatible_ignoring_fp(a, b)) or (not is_scalar(c) and not compatible_ignoring_fp(c, b))
                or (not is_scalar(a) and not is_scalar(c) and not compatible_ignoring_fp(a, c))):
            raise InferenceError(f"Clamp with incompatible shapes: {human(a)}, {human(b)}, {human(c)}.")
        return b
    if opcode == "select":
        for s, what in ((a, "select pred"), (b, "select on-true"), (c, "select on-false")):
            expect_array(s, what)
        if not compatible_ignoring_fp(b, c):
            raise InferenceError(f"Operands to select must be the same shape; got {human(b)} and {human(c)}.")
        if a.element_type != "pred":
            raise InferenceError(f"Select's pred operand must have PRED element type; got {human(a)}.")
        if not is_scalar(a) and (not compatible_ignoring_type(a, b) or not compatible_ignoring_type(a, c)):
            raise InferenceError(
                f"Operands to select and predicate must be the same shape; got {human(b)} and {human(c)} and {human(a)}.")
        full = b if is_scalar(a) else a
        return Shape(higher_precision(b, c), full.dims, full.dynamic)
    raise InferenceError(f"Unknown operation {opcode}.")


def tuple_of(shapes) -> Shape:
    return Shape("tuple", tuple_shapes=tuple(shapes))


def sort(shapes) -> Shape:
    if len(shapes) == 1:
        return shapes[0]
    for k, s in enumerate(shapes[1:], 1):
        if not (s.is_array and shapes[0].is_array and s.dims == shapes[0].dims):
            raise InferenceError(
                f"Sort keys and values dimensions must match. Keys shape is: {human(shapes[0])}\n, Values shape "
                f"(operand index {k}) is: {human(s)}")
    return tuple_of(shapes)


def get_tuple_element(s: Shape, index: int) -> Shape:
    if not s.is_tuple:
        raise InferenceError(f"Cannot infer shape: attempting to index into non-tuple: {human(s)}.")
    if not 0 <= index < len(s.tuple_shapes):
        raise InferenceError(
            f"Cannot infer shape: attempt to index out of tuple bounds: {index} >= {len(s.tuple_shapes)} in shape {human(s)}.")
    return s.tuple_shapes[index]


def broadcast_sizes(s: Shape, sizes) -> Shape:
    """XLA's InferBroadcastShape(operand, broadcast_sizes): the sizes are prepended."""
    expect_array(s, "operand of broadcast")
    for size in sizes:
        if size < 0:
            raise InferenceError(f"Broadcast with negative dimension size {size}.")
    return array(s.element_type, list(sizes) + list(s.dims), [False] * len(sizes) + list(s.dynamic))


def transpose(s: Shape, dims) -> Shape:
    expect_array(s, "transpose")
    if len(dims) != len(s.dims) or sorted(dims) != list(range(len(dims))):
        raise InferenceError(
            f"Transpose dimensions [{','.join(map(str, dims))}] are not a permutation of the operand dimensions "
            f"(operand shape is {human(s)}).")
    return array(s.element_type, [s.dims[d] for d in dims], [s.dynamic[d] for d in dims])


def reverse(s: Shape, dims) -> Shape:
    expect_array(s, "operand of reverse")
    if len(set(dims)) != len(dims):
        raise InferenceError("a dimension number is duplicated in reverse")
    for d in dims:
        if not 0 <= d < len(s.dims):
            raise InferenceError(f"One of the reverse dimensions ({d}) is out-of-bounds in shape {human(s)}.")
    return s


def concatenate(shapes, dimension: int) -> Shape:
    if not shapes:
        raise InferenceError("Concatenate expects at least one argument.")
    first = shapes[0]
    if not 0 <= dimension < len(first.dims):
        raise InferenceError(f"Concatenate dimension out of bounds: {dimension}.")
    et = first.element_type
    for s in shapes:
        expect_array(s, "operand of concatenation")
        if len(s.dims) != len(first.dims):
            raise InferenceError(
                f"Cannot concatenate arrays with different ranks: {len(first.dims)} ({human(first)}) vs {len(s.dims)} "
                f"({human(s)}).")
        if not same_type_ignoring_fp(first, s):
            raise InferenceError(
                f"Cannot concatenate arrays with different element types: {first.element_type.upper()} vs "
                f"{s.element_type.upper()}.")
        for d, (x, y) in enumerate(zip(first.dims, s.dims)):
            if d != dimension and x != y and x != -1 and y != -1:
                raise InferenceError(
                    "Cannot concatenate arrays that differ in dimensions other than the one being concatenated. "
                    f"Dimension {d} in both shapes must be equal (or compatible): {human(first)} vs {human(s)}.")
        et = higher_precision(s, Shape(et, first.dims))
    dims = list(first.dims)
    dims[dimension] = -1 if any(s.dims[dimension] == -1 for s in shapes) else sum(s.dims[dimension] for s in shapes)
    dyn = [any(s.dynamic[d] for s in shapes) for d in range(len(dims))]
    return array(et, dims, dyn)


def pad(s: Shape, value: Shape, config) -> Shape:
    if not s.is_array:
        raise InferenceError("Pad operation does not support tuple-shape operands.")
    if not is_scalar(value):
        raise InferenceError("Pad operation does not support non-scalar padding values.")
    if len(s.dims) != len(config):
        raise InferenceError(
            f"The rank of the operand and the padding configuration do not match: {human(s)} vs {config}.")
    if not same_type_ignoring_fp(s, value):
        raise InferenceError("The element types of the operands to Pad do not match.")
    if any(interior < 0 for _, _, interior in config):
        raise InferenceError(f"Interior padding cannot be negative: {config}")
    dims = []
    for k, (d, (lo, hi, interior)) in enumerate(zip(s.dims, config)):
        if d == -1 and s.dynamic[k]:
            dims.append(-1)
            continue
        n = d + lo + hi + max(d - 1, 0) * interior
        if n < 0:
            raise InferenceError(f"Padding result in negative size for dimension {k}")
        dims.append(n)
    return array(higher_precision(s, value), dims, s.dynamic)


def dot(a: Shape, b: Shape, lhs_contracting, rhs_contracting, lhs_batch, rhs_batch, preferred: str | None = None) -> Shape:
    expect_array(a, "lhs of dot")
    expect_array(b, "rhs of dot")
    for rank, dims in ((len(a.dims), list(lhs_contracting) + list(lhs_batch)),
                       (len(b.dims), list(rhs_contracting) + list(rhs_batch))):
        if any(not 0 <= d < rank for d in dims):
            raise InferenceError(f"A dimension number is out of range in Dot: {human(a)} {human(b)}")
        if len(set(dims)) != len(dims):
            raise InferenceError("A dimension number is not unique in Dot.")
    fail = f"Cannot infer shape for dot operation: {human(a)} <dot> {human(b)}."
    if len(lhs_contracting) != len(rhs_contracting):
        raise InferenceError(fail + " Must specify the same number of contracting dimensions for lhs and rhs.")
    for x, y in zip(lhs_contracting, rhs_contracting):
        if a.dims[x] != b.dims[y] and a.dims[x] != -1 and b.dims[y] != -1:
            raise InferenceError(fail + " Contracting dimension sizes are not compatible.")
    if len(lhs_batch) != len(rhs_batch):
        raise InferenceError(fail + " Must the same number of batch dimensions for lhs and rhs.")
    for x, y in zip(lhs_batch, rhs_batch):
        if a.dims[x] != b.dims[y] and a.dims[x] != -1 and b.dims[y] != -1:
            raise InferenceError(fail + " Batch dimension sizes are not compatible.")
    dims, dyn = [], []
    for d in lhs_batch:
        dims.append(a.dims[d]), dyn.append(a.dynamic[d])
    for d in range(len(a.dims)):
        if d not in lhs_contracting and d not in lhs_batch:
            dims.append(a.dims[d]), dyn.append(a.dynamic[d])
    for d in range(len(b.dims)):
        if d not in rhs_contracting and d not in rhs_batch:
            dims.append(b.dims[d]), dyn.append(b.dynamic[d])
    return array(preferred or higher_precision(a, b), dims, dyn)


def _verify_reducer(params, result: Shape, inits, input_types, inputs: int) -> None:
    if len(params) != inputs * 2:
        raise InferenceError(f"Reduction function must take {inputs * 2} parameters, but takes {len(params)} parameter(s).")
    if result.is_array:
        if inputs != 1:
            raise InferenceError(f"Reduction function must produce a tuple with {inputs} elements, but produces a scalar")
        accs = [result]
    elif result.is_tuple:
        if len(result.tuple_shapes) != inputs:
            raise InferenceError(
                f"Reduction function must produce a tuple with {inputs} elements, but has {len(result.tuple_shapes)} elements")
        accs = list(result.tuple_shapes)
    else:
        raise InferenceError(f"Reduction function must produce a scalar or tuple of scalars, but has shape: {human(result)}")
    for acc in accs:
        if not acc.is_array or acc.dims:
            raise InferenceError(
                f"Reduction function must return a scalar or tuple of scalars but returns shape: {human(result)}")
    for i in range(inputs):
        if not accs[i].compatible(params[i]):
            raise InferenceError(
                f"Reduction function's {i}-th parameter shape differs from the result shape: {human(params[i])} vs {human(accs[i])}")
        if not compatible_ignoring_fp(accs[i], inits[i]):
            raise InferenceError(
                f"Reduction function's accumulator shape at index {i} differs from the init_value shape: "
                f"{human(accs[i])} vs {human(inits[i])}")
        element = array(input_types[i], ())
        if not compatible_ignoring_fp(element, params[inputs + i]):
            raise InferenceError(
                f"Reduction function's {inputs + i}-th parameter shape differs from the input type element type: "
                f"{human(params[inputs + i])} vs {human(element)}")
        if not compatible_ignoring_fp(accs[i], params[inputs + i]):
            raise InferenceError(
                f"Reduction function's {inputs + i}-th parameter shape must match the result shape, but got "
                f"{human(params[inputs + i])} vs {human(accs[i])}.")


def reduce(shapes, dims, program) -> Shape:
    if not shapes:
        raise InferenceError("Reduce must have at least 2 arguments, has 0")
    if len(shapes) % 2:
        raise InferenceError(f"Reduce must have an even number of arguments, has {len(shapes)}")
    n = len(shapes) // 2
    args, inits = shapes[:n], shapes[n:]
    for k in range(1, n):
        if not (args[k].is_array and args[0].is_array and args[k].dims == args[0].dims):
            raise InferenceError(
                f"All reduced tensors must have compatible dimension. Tensor at index 0 has shape {human(args[0])}, "
                f"and tensor at index {k} has shape {human(args[k])}.")
    arg = args[0]
    for d in dims:
        if not 0 <= d < len(arg.dims):
            raise InferenceError(f"Reducing out-of-bounds dimension {d} in shape {human(arg)}.")
    params, result = program
    _verify_reducer(params, result, inits, [a.element_type for a in args], n)
    if len(set(dims)) != len(dims):
        raise InferenceError(f"Duplicate reduction dimension: {dims}")
    keep = [d for d in range(len(arg.dims)) if d not in dims]
    new_dims = [arg.dims[d] for d in keep]
    new_dyn = [arg.dynamic[d] for d in keep]
    if result.is_array and not result.dims:
        return array(result.element_type, new_dims, new_dyn)
    return tuple_of(array(s.element_type, new_dims, new_dyn) for s in result.tuple_shapes)


def while_(condition, body, init: Shape) -> Shape:
    cparams, cresult = condition
    bparams, bresult = body
    if len(cparams) != 1:
        raise InferenceError(f"Condition must take 1 arguments; got {len(cparams)}.")
    if len(bparams) != 1:
        raise InferenceError(f"Body must take 1 arguments; got {len(bparams)}.")
    if not cresult.compatible(array("pred", ())):
        raise InferenceError(f"Condition must return a boolean; got {human(cresult)}.")
    if not (bresult.compatible(cparams[0]) and bresult.compatible(bparams[0]) and bresult.compatible(init)):
        raise InferenceError(
            "The parameter of condition and body, the result of the body, and init must all have the same shape; got "
            f"condition parameter {human(cparams[0])}, body parameter {human(bparams[0])}, body result {human(bresult)}, "
            f"init {human(init)}.")
    return init


def call(shapes, program) -> Shape:
    params, result = program
    if len(shapes) != len(params):
        raise InferenceError(
            f"Call applied function arity must match number of arguments; got: arity: {len(params)}, arguments: {len(shapes)}.")
    for i, (a, p) in enumerate(zip(shapes, params)):
        if not a.compatible(p):
            raise InferenceError(
                f"Call parameter must match argument; got parameter {i} shape: {human(p)}, argument shape: {human(a)}.")
    return result


def conditional(index: Shape, programs, operands) -> Shape:
    if not (index.compatible(array("pred", ())) or index.compatible(array("s32", ()))):
        raise InferenceError(f"branch_index must be bool or int32_t; got {human(index)}.")
    result = programs[0][1]
    for j, ((params, res), op) in enumerate(zip(programs, operands)):
        if len(params) != 1:
            raise InferenceError(f"branch computation {j} must take 1 argument; got {len(params)}.")
        if not params[0].compatible(op):
            raise InferenceError(
                f"branch operand {j} must match the shape of the only parameter of branch computation {j}: got "
                f"operand: {human(op)}; computation parameter: {human(params[0])}.")
        if not result.compatible(res):
            raise InferenceError(
                f"the result of branch 0 computation and branch {j} computation must have the same shape: got branch 0 "
                f"computation result: {human(result)}; branch {j} computation result: {human(res)}.")
    return result


def map_(shapes, program, dims) -> Shape:
    if not shapes:
        raise InferenceError("Map expects at least one argument.")
    arg = shapes[0]
    for s in shapes[1:]:
        expect_array(s, "operand of map")
        if compatible_ignoring_type(s, arg):
            continue
        if same_type_ignoring_fp(s, arg):
            if is_scalar(s):
                continue
            if is_scalar(arg):
                arg = s
                continue
        raise InferenceError(
            f"Map operation requires all operands to have the same shape; got: {', '.join(human(x) for x in shapes)}.")
    if len(dims) != len(arg.dims):
        raise InferenceError(
            f"Map applied to a subset of dimensions currently not supported: arg_dimension_size: {len(arg.dims)}, "
            f"requested_map_dimensions_size: {len(dims)}.")
    if list(dims) != list(range(len(dims))):
        raise InferenceError(f"Map requires monotonically increasing dimension numbers; got: {dims}.")
    params, result = program
    if len(shapes) != len(params):
        raise InferenceError(
            f"Map applied function arity must match number of arguments; got: arity: {len(params)}, arguments: {len(shapes)}.")
    if not is_scalar(result):
        raise InferenceError(f"Mapped computation's result has to be a scalar; got: {human(result)}.")
    for i, p in enumerate(params):
        if not is_scalar(p):
            raise InferenceError(f"Mapped computation's parameter has to be a scalar; got parameter {i} shape: {human(p)}.")
        if not same_type_ignoring_fp(p, shapes[i]):
            raise InferenceError(
                f"Mapped computation's parameter type has to match argument element type; got parameter {i} shape: "
                f"{human(p)}, argument shape: {human(shapes[i])}.")
    return array(result.element_type, arg.dims, arg.dynamic)


def topk(s: Shape, k: int) -> Shape:
    expect_array(s, "operand of top-k operation")
    if not s.dims or s.dims[-1] < k:
        raise InferenceError(f"k={k} is larger than the last dimension of the operand {human(s)}")
    dims = list(s.dims[:-1]) + [k]
    dyn = list(s.dynamic[:-1]) + [False]
    return tuple_of([array(s.element_type, dims, dyn), array("s32", dims, dyn)])


def get_dimension_size(s: Shape, d: int) -> Shape:
    if not 0 <= d < len(s.dims):
        raise InferenceError(f"GetDimensionSize dimension out of bounds: {d}.")
    if s.dims[d] > (1 << 31) - 1:
        raise InferenceError(f"GetDimensionSize's input shape is {human(s)}, the {d}th dimension exceeds the INT_MAX limit.")
    return array("s32", ())


def set_dimension_size(s: Shape, value: Shape, d: int) -> Shape:
    if not 0 <= d < len(s.dims):
        raise InferenceError(f"SetDimensionSize dimension out of bounds: {d}.")
    if not is_scalar(value) or value.element_type != "s32":
        raise InferenceError(f"SetDimensionSize's value has to be S32 scalar, got {human(value)}")
    if s.dims[d] > (1 << 31) - 1:
        raise InferenceError(f"SetDimensionSize's input shape is {human(s)}, the {d}th dimension exceeds the INT_MAX limit.")
    dyn = list(s.dynamic)
    dyn[d] = True
    return array(s.element_type, s.dims, dyn)


def slice_(s: Shape, ranges) -> Shape:
    expect_array(s, "operand of slice")
    if len(ranges) != len(s.dims):
        raise InferenceError(f"Slice index count does not match argument rank: {len(ranges)} vs {len(s.dims)}.")
    sizes = []
    for d, (start, limit, stride) in enumerate(ranges):
        if start < 0:
            raise InferenceError(f"Negative start index to slice: {start}.")
        if not (s.dims[d] == -1 and s.dynamic[d]) and limit > s.dims[d]:
            raise InferenceError(
                f"limit index ({limit}) must be less than or equal to dimension size ({s.dims[d]}) in slice operation; "
                f"argument shape: {human(s)}.")
        if start > limit:
            raise InferenceError(
                f"limit index ({limit}) must be greater or equal to start index ({start}) in slice with positive stride "
                f"in slice operation; argument shape: {human(s)}.")
        if stride <= 0:
            raise InferenceError(f"Stride ({stride}) must be positive.")
        sizes.append((limit - start + stride - 1) // stride)
    return array(s.element_type, sizes)


def iota_check(s: Shape, dim: int) -> None:
    if not s.is_array:
        raise InferenceError(f"iota's shape must be an array, got {human(s)}")
    if not 0 <= dim < len(s.dims):
        raise InferenceError(f"Iota dimension ({dim}) must be within the rank of the output shape {human(s)}.")
