"""XLA's verifier rules that this package encodes, with XLA's wording.

XLA's parser accepts some modules its verifier (`xla/service/hlo_verifier.cc`,
with the options of XLA's test base: not layout-sensitive, mixed precision
allowed, no unbounded dynamism) refuses. `parse_hlo` runs these rules unless asked not to
(`verify=False`); `verify(module)` runs them on any module. The rules:

- operand counts of fixed-arity opcodes;
- shapes consistent with the operands, for every opcode whose result XLA's
  shape inference gives (elementwise, compare, select, clamp, tuple,
  get-tuple-element, concatenate, pad, slice, dynamic-slice,
  dynamic-update-slice, transpose, reverse, dot, reduce, sort, map, call,
  while, conditional, get/set-dimension-size, topk, copy), compared as XLA
  compares them (`ShapeUtil::Compatible`: ignoring layouts);
- broadcast, reshape, convert, iota and fusion shape rules;
- floating-point precisions may mix (as in XLA's test base, `HloTestBase`):
  shapes are compared ignoring them, except where XLA compares exactly
  (tuples, get-tuple-element, calls, while, custom calls, ...);
- called computations: parameter counts and operand shapes (call, while,
  conditional, fusion); reducers of reduce and sort;
- no unbounded dynamic dimensions (`?`);
- the entry computation against the module's entry computation layout, whose
  shapes must be valid (layouts included).

Failures raise `HloParseError` at the instruction's line.
"""

from __future__ import annotations

from . import _inference as inf
from ._errors import HloParseError
from ._inference import InferenceError, program_shape
from ._fastpath import entry_layout_shapes
from ._ir import HloInstruction, HloModule, instruction_to_text
from ._opcodes import OPCODES
from ._shape import Shape
from ._token_parser import shape_problem

__all__ = ["VERIFIED_OPCODES", "verify", "verify_parsed"]

# Operand counts of the opcodes that have a fixed one.
_FIXED_ARITY = {op: n for op, n in OPCODES.items() if n is not None and op not in ("parameter", "constant")}
# Opcodes whose shape XLA's verifier compares exactly (they move data, they cannot convert f32 to bf16);
# the others it compares ignoring floating-point precision (mixed precision allowed, as in XLA's test base).
_EXACT_TYPES = frozenset(
    "bitcast call conditional constant copy-done copy-start custom-call get-tuple-element infeed outfeed opt-barrier "
    "parameter recv recv-done send send-done tuple while".split()
)
_UNARY = frozenset(
    "abs acos acosh asin asinh atanh cbrt ceil count-leading-zeros cosine cosh erf exponential exponential-minus-one "
    "floor imag is-finite log log-plus-one logistic negate not popcnt real round-nearest-afz round-nearest-even rsqrt "
    "sign sine sinh sqrt tan tanh copy".split()
)
_BINARY = frozenset(
    "add atan2 complex divide maximum minimum multiply mulhi power remainder subtract and or xor shift-left "
    "shift-right-arithmetic shift-right-logical compare".split()
)


class _Invalid(Exception):
    pass


def _text(instr: HloInstruction) -> str:
    try:
        return instruction_to_text(instr)
    except Exception:  # pragma: no cover - printing a broken instruction
        return f"%{instr.name} = {instr.shape} {instr.opcode}(...)"


def _expect(instr: HloInstruction, inferred: Shape) -> None:
    """XLA's ShapeVerifier::CheckShape (not layout-sensitive, mixed precision allowed)."""
    if instr.opcode in _EXACT_TYPES:
        same = instr.shape.compatible(inferred)
    else:
        same = inf.compatible_ignoring_fp(instr.shape, inferred)
    if not same:
        raise _Invalid(f"Expected instruction to have shape equal to {inferred}, actual shape is {instr.shape}:\n"
                       f"{_text(instr)}")


def _infer(fn, instr: HloInstruction) -> Shape:
    try:
        return fn()
    except InferenceError as err:
        raise _Invalid(f"{err}, for instruction {_text(instr)}") from None


def _ints(instr: HloInstruction, key: str, default=()):
    value = instr.attribute(key, default)
    if isinstance(value, int):
        return (value,)
    return tuple(value) if value is not None else tuple(default)


def _param_count(instr: HloInstruction, comp, expected: int) -> None:
    n = len(comp.parameters)
    if n != expected:
        raise _Invalid(f"Expected computation {comp.name} called from {instr.name} to have {expected} parameters, has {n}")


def _operand_is_parameter(instr: HloInstruction, k: int, comp, p: int) -> None:
    params = comp.parameters
    if p < len(params) and k < len(instr.operands) and not instr.operands[k].shape.compatible(params[p].shape):
        raise _Invalid(f"Operand {_text(instr.operands[k])} shape does not match parameter's {_text(params[p])} in "
                       f"{_text(instr)}")


def _check(instr: HloInstruction) -> None:
    op = instr.opcode
    ops = instr.operands
    shape = instr.shape
    arity = _FIXED_ARITY.get(op)
    if arity is not None and len(ops) != arity:
        raise _Invalid(f"Expected {arity} operands for {op} instruction: {_text(instr)}")
    if _unbounded(shape):
        raise _Invalid(f"Unbounded dynamism is disabled for instruction: {_text(instr)}")
    if op in _UNARY:
        _expect(instr, _infer(lambda: inf.unary(op, ops[0].shape), instr))
        _elementwise(instr)
    elif op in _BINARY:
        _expect(instr, _infer(lambda: inf.binary(op, ops[0].shape, ops[1].shape), instr))
        _elementwise(instr)
    elif op in ("select", "clamp"):
        _expect(instr, _infer(lambda: inf.ternary(op, ops[0].shape, ops[1].shape, ops[2].shape), instr))
    elif op == "tuple":
        _expect(instr, inf.tuple_of(o.shape for o in ops))
    elif op == "get-tuple-element":
        _expect(instr, _infer(lambda: inf.get_tuple_element(ops[0].shape, instr.attribute("index")), instr))
    elif op == "concatenate":
        _expect(instr, _infer(lambda: inf.concatenate([o.shape for o in ops], _ints(instr, "dimensions")[0]), instr))
    elif op == "pad":
        _expect(instr, _infer(lambda: inf.pad(ops[0].shape, ops[1].shape, instr.attribute("padding")), instr))
    elif op == "slice":
        _expect(instr, _infer(lambda: inf.slice_(ops[0].shape, instr.attribute("slice")), instr))
    elif op == "transpose":
        _expect(instr, _infer(lambda: inf.transpose(ops[0].shape, _ints(instr, "dimensions")), instr))
    elif op == "reverse":
        _expect(instr, _infer(lambda: inf.reverse(ops[0].shape, _ints(instr, "dimensions")), instr))
    elif op == "dot":
        _expect(instr, _infer(lambda: inf.dot(
            ops[0].shape, ops[1].shape, _ints(instr, "lhs_contracting_dims"), _ints(instr, "rhs_contracting_dims"),
            _ints(instr, "lhs_batch_dims"), _ints(instr, "rhs_batch_dims"), preferred=shape.element_type), instr))
    elif op == "reduce":
        if len(ops) % 2:
            raise _Invalid(f"Expected an even number of operands for reduce instruction: {_text(instr)}")
        comp = instr.attribute("to_apply")
        _expect(instr, _infer(lambda: inf.reduce([o.shape for o in ops], _ints(instr, "dimensions"),
                                                  program_shape(comp)), instr))
    elif op == "sort":
        _check_sort(instr)
    elif op == "map":
        _expect(instr, _infer(lambda: inf.map_([o.shape for o in ops], program_shape(instr.attribute("to_apply")),
                                               _ints(instr, "dimensions", range(len(ops[0].shape.dims)))), instr))
    elif op == "call":
        comp = instr.attribute("to_apply")
        _param_count(instr, comp, len(ops))
        for k in range(len(comp.parameters)):
            _operand_is_parameter(instr, k, comp, k)
        _expect(instr, comp.root.shape)
    elif op == "while":
        body, cond = instr.attribute("body"), instr.attribute("condition")
        _param_count(instr, body, 1)
        _param_count(instr, cond, 1)
        _operand_is_parameter(instr, 0, body, 0)
        _operand_is_parameter(instr, 0, cond, 0)
        if not cond.root.shape.compatible(Shape("pred")):
            raise _Invalid(f"Conditional computation shape does not lead to a scalar predicate shape: {cond.root.shape}")
        _expect(instr, body.root.shape)
    elif op == "conditional":
        _check_conditional(instr)
    elif op == "fusion":
        _check_fusion(instr)
    elif op == "broadcast":
        _check_broadcast(instr)
    elif op == "reshape":
        if shape.element_type != ops[0].shape.element_type or shape.num_elements != ops[0].shape.num_elements:
            raise _Invalid(f"reshape changes the number or type of elements: {_text(instr)}")
    elif op == "convert":
        if not ops[0].shape.is_array or not shape.is_array:
            raise _Invalid(f"Convert does not allow non-arrays, so cannot convert from {ops[0].shape} to {shape}.")
        _expect(instr, inf.array(shape.element_type, ops[0].shape.dims, ops[0].shape.dynamic))
        _elementwise(instr)
    elif op == "iota":
        _check_iota(instr)
    elif op == "get-dimension-size":
        _expect(instr, _infer(lambda: inf.get_dimension_size(ops[0].shape, _ints(instr, "dimensions")[0]), instr))
    elif op == "set-dimension-size":
        _expect(instr, _infer(lambda: inf.set_dimension_size(ops[0].shape, ops[1].shape, _ints(instr, "dimensions")[0]),
                              instr))
    elif op == "topk":
        _expect(instr, _infer(lambda: inf.topk(ops[0].shape, instr.attribute("k")), instr))
    elif op == "dynamic-slice":
        _check_dynamic_slice(instr)
    elif op == "dynamic-update-slice":
        _check_dynamic_update_slice(instr)
    elif op == "after-all":
        _expect(instr, Shape("token"))
    elif op == "add-dependency":
        _expect(instr, ops[0].shape)


def _elementwise(instr: HloInstruction) -> None:
    """XLA's InstructionVerifier: elementwise operands have the result's dimensions; compare types."""
    out = instr.shape
    for o in instr.operands:
        if not inf.compatible_ignoring_type(o.shape, out):
            raise _Invalid(f"Implicit broadcast is not allowed in HLO.Found different shapes for instruction "
                           f"{instr.opcode}.\noutput: {inf.human(out)}\noperand: {inf.human(o.shape)}\n")
    if instr.opcode == "compare" and instr.has_attribute("order") and instr.attribute("order") == "PARTIAL":
        # XLA's Comparison refuses a partial order on integers and pred (IsValidComparison).
        operand = instr.operands[1].shape
        if operand.element_type not in inf.FLOATS and operand.element_type not in inf.COMPLEX:
            raise _Invalid(f"A partial order is only valid for floating-point and complex comparisons.\n"
                           f"operand: {inf.human(operand)}\n")
    if instr.opcode == "compare" and instr.has_attribute("type"):
        operand = instr.operands[1].shape
        et = operand.element_type
        actual = instr.attribute("type")
        if et in inf.FLOATS:
            if actual not in ("FLOAT", "TOTALORDER"):
                raise _Invalid(f"Expected comparison type FLOAT or TOTALORDER.\nactual: {actual}\noperand: "
                               f"{inf.human(operand)}\n")
        else:
            default = "FLOAT" if et in inf.COMPLEX else "SIGNED" if et in inf.SIGNED_INTS else "UNSIGNED"
            if actual != default:
                raise _Invalid(f"Expected comparison type {default}.\nactual: {actual}\noperand: {inf.human(operand)}\n")


def _check_sort(instr: HloInstruction) -> None:
    ops = instr.operands
    comp = instr.attribute("to_apply")
    if not comp.root.shape.compatible(Shape("pred")):
        raise _Invalid(f"The Sort compare computation shape does not lead to a scalar predicate shape: {comp.root.shape}")
    _param_count(instr, comp, 2 * len(ops))
    for k, param in enumerate(comp.parameters):
        expected = inf.array(ops[k // 2].shape.element_type, ())
        if not inf.compatible_ignoring_fp(expected, param.shape):
            raise _Invalid(f"Expected the {k}-th parameter of the compare computation of sort to have shape {expected}, "
                           f"but got {param.shape}")
    for k, o in enumerate(ops[1:], 1):
        if o.shape.dims != ops[0].shape.dims:
            raise _Invalid(f"Expected sort to have to have the same dimensions for all operands. First operand shape is: "
                           f"{ops[0].shape}\n, shape (operand index {k}) is: {o.shape}")
    _expect(instr, _infer(lambda: inf.sort([o.shape for o in ops]), instr))


def _check_conditional(instr: HloInstruction) -> None:
    ops = instr.operands
    index = ops[0].shape
    if not inf.is_scalar(index):
        raise _Invalid(f"The first operand of conditional must be a scalar. Got {index}")
    if index.element_type == "pred":
        branches = [instr.attribute("true_computation"), instr.attribute("false_computation")]
    else:
        if index.element_type != "s32":
            raise _Invalid(f"The first operand of indexed conditional must be a scalar of S32. Got type "
                           f"{index.element_type.upper()}.")
        branches = list(instr.attribute("branch_computations"))
    if len(ops) != len(branches) + 1:
        raise _Invalid(f"Expected {len(branches) + 1} operands for conditional instruction: {_text(instr)}")
    for j, comp in enumerate(branches):
        _param_count(instr, comp, 1)
        _operand_is_parameter(instr, j + 1, comp, 0)
        _expect(instr, comp.root.shape)


def _check_fusion(instr: HloInstruction) -> None:
    comp = instr.fused_computation
    if comp is None:
        return
    if not instr.shape.compatible(comp.root.shape):
        raise _Invalid(f"Fused computation shape ({comp.root.shape}) is not equal to the fusion shape ({instr.shape})")
    params = comp.parameters
    if len(params) > len(instr.operands):
        raise _Invalid(f"Fused parameter count ({len(params)}) is greater than the number of operands "
                       f"({len(instr.operands)}) passed to the fusion instruction in: {_text(instr)}.")
    for param in params:
        k = param.parameter_number
        if not param.shape.compatible(instr.operands[k].shape):
            raise _Invalid(f"Shape mismatch between parameter number {k} and its operand in {_text(instr)}. "
                           f"({param.shape} != {instr.operands[k].shape})")


def _check_broadcast(instr: HloInstruction) -> None:
    operand = instr.operands[0].shape
    shape = instr.shape
    dims = _ints(instr, "dimensions")
    problem = None
    if not (shape.is_array and operand.is_array) or shape.element_type != operand.element_type:
        problem = "the element type of a broadcast is its operand's"
    elif len(dims) != len(operand.dims):
        problem = f"broadcast has {len(dims)} dimensions for an operand of rank {len(operand.dims)}"
    else:
        for k, d in enumerate(dims):
            if not 0 <= d < len(shape.dims) or shape.dims[d] != operand.dims[k]:
                problem = f"operand dimension {k} (size {operand.dims[k]}) does not match output dimension {d}"
                break
    if problem:
        raise _Invalid(f"{problem}: {_text(instr)} operand shape {operand}")


def _check_iota(instr: HloInstruction) -> None:
    shape = instr.shape
    if not shape.is_array:
        raise _Invalid("Iota does not support non-array result.")
    if not shape.dims:
        raise _Invalid("Iota does not support scalars.")
    d = instr.attribute("iota_dimension")
    if not 0 <= d < len(shape.dims):
        raise _Invalid("The iota dimension cannot go beyond the operation rank or be negative.")
    if shape.element_type == "pred":
        raise _Invalid("Only support iota of integral, floating point or complex primitive types, got PRED")


def _check_dynamic_slice(instr: HloInstruction) -> None:
    ops = instr.operands
    operand = ops[0].shape
    sizes = _ints(instr, "dynamic_slice_sizes")
    indices = [o.shape for o in ops[1:]]
    inf.expect_array(operand, "operand of dynamic slice")
    if len(indices) == 1 and len(indices[0].dims) == 1:
        if indices[0].dims[0] != len(operand.dims) or indices[0].element_type not in inf.INTS:
            raise _Invalid(f"Dynamic slice start indices do not match the rank of {operand}: {_text(instr)}")
    elif len(indices) != len(operand.dims) or any(not inf.is_scalar(s) or s.element_type not in inf.INTS
                                                    for s in indices):
        raise _Invalid(f"Dynamic slice start number of dimensions {len(indices)} must match rank {len(operand.dims)} "
                       f"of slice input ({operand}).")
    if len(sizes) != len(operand.dims):
        raise _Invalid(f"Dynamic slice index count does not match argument rank: {len(sizes)} vs {len(operand.dims)}.")
    for k, (size, d) in enumerate(zip(sizes, operand.dims)):
        if size < 0 or (d >= 0 and size > d):
            raise _Invalid(f"Slice dim size {size} greater than dynamic slice dimension: {d}.")
    _expect(instr, inf.array(operand.element_type, sizes))


def _check_dynamic_update_slice(instr: HloInstruction) -> None:
    ops = instr.operands
    operand, update = ops[0].shape, ops[1].shape
    indices = [o.shape for o in ops[2:]]
    if len(indices) == 1 and len(indices[0].dims) == 1:
        ok = indices[0].dims[0] == len(operand.dims)
    else:
        ok = len(indices) == len(operand.dims) and all(inf.is_scalar(s) and s.element_type in inf.INTS for s in indices)
    if not ok:
        raise _Invalid(f"Dynamic update slice start number of dimensions must match rank {len(operand.dims)} of slice "
                       f"input ({operand}).")
    if not update.is_array or len(update.dims) != len(operand.dims):
        raise _Invalid(f"Dynamic update slice update rank does not match argument rank: {update} vs {operand}.")
    if not inf.same_type_ignoring_fp(operand, update):
        raise _Invalid(f"Dynamic update slice update element type does not match argument. operand.element_type: "
                       f"{operand.element_type.upper()} vs update.element_type: {update.element_type.upper()}.")
    for k, (u, d) in enumerate(zip(update.dims, operand.dims)):
        if u < 0 or (d >= 0 and u > d):
            raise _Invalid(f"Size of update dimension {k} ({u}) must be less or equal to the argument dimension size "
                           f"({d}).")
    _expect(instr, operand)


def _unbounded(shape: Shape) -> bool:
    if shape.is_tuple or shape.is_buffer:
        return any(_unbounded(s) for s in shape.tuple_shapes)
    return any(d == -1 and dyn for d, dyn in zip(shape.dims, shape.dynamic))


# Opcodes whose rules read no attribute (nor operand identity): their memo key leaves attributes out.
_NO_ATTRIBUTES_READ = frozenset((_UNARY | _BINARY | {"select", "clamp", "tuple", "reshape", "convert", "after-all"})
                                - {"compare"})

VERIFIED_OPCODES = frozenset(_UNARY | _BINARY | {
    "select", "clamp", "tuple", "get-tuple-element", "concatenate", "pad", "slice", "transpose", "reverse", "dot",
    "reduce", "sort", "map", "call", "while", "conditional", "fusion", "broadcast", "reshape", "convert", "iota",
    "get-dimension-size", "set-dimension-size", "topk", "dynamic-slice", "dynamic-update-slice", "after-all",
    "add-dependency",
})


def _entry_layout(module: HloModule) -> None:
    entry = module.entry
    entry_params = entry.parameters
    text = module.header_attributes.get("entry_computation_layout")
    if text is None:
        params = [p.shape for p in entry_params]
        result = entry.root.shape
    else:
        read = getattr(module, "_entry_layout", None)  # unset in a module made without the constructor
        layout = read[1:] if read is not None and read[0] is text else entry_layout_shapes(text)
        if layout is None:
            raise _Invalid(f"entry_computation_layout={text} is not a computation layout")
        params, result = layout
    problems: dict = {}  # id(shape) -> shape_problem(shape): a layout repeats a few shapes many times
    problem = _shape_problem(result, problems)
    if problem:
        raise _Invalid(f"{problem}; shape: {result}")
    if not entry.root.shape.compatible(result):
        raise _Invalid(f"Shape of the root instruction of entry computation ({entry.root.shape}) should be compatible to "
                       f"one specified in module's entry computation layout ({result})")
    if len(params) != len(entry_params):
        raise _Invalid(f"Number of parameters in entry computation layout ({len(params)}) must be same as number of "
                       f"parameters of entry computation ({len(entry_params)})")
    for k, (param, declared) in enumerate(zip(entry_params, params)):
        problem = _shape_problem(declared, problems)
        if problem:
            raise _Invalid(f"{problem}; shape: {declared}")
        if not param.shape.compatible(declared):
            raise _Invalid(f"Shape of the entry computation parameter {k} is {param.shape} should be compatible to the "
                           f"one specified in module's entry computation layout {declared}")


def _shape_problem(shape: Shape, problems: dict) -> str | None:
    """`shape_problem(shape)`, each shape object asked once (a tuple's elements too)."""
    key = id(shape)
    if key in problems:
        return problems[key]
    if shape.is_tuple:  # as shape_problem: its first element's problem
        problem = next((p for p in (_shape_problem(s, problems) for s in shape.tuple_shapes) if p is not None), None)
    else:
        problem = shape_problem(shape)
    problems[key] = problem
    return problem


def verify(module: HloModule, *, text: str | None = None, source: str = "<module>") -> None:
    """Check `module` against the XLA verifier rules listed in this module's doc.

    **Arguments:** `module`; `text` and `source`, the text it was read from and
    its name, to locate errors (without them the error points at the
    instruction as printed by `to_text()`).

    **Raises:** `HloParseError` naming the instruction and the rule, in XLA's words.
    """
    _verify(module, None, text, source)


def verify_parsed(module: HloModule, firsts: list[HloInstruction], programs: dict, *, text: str,
                  source: str) -> None:
    """`verify` for a module the fast path has just read, given `firsts`: its instructions in order but those
    like an earlier one in everything the rules look at, and `programs`: the program key of each computation
    (see `_fastpath.fast_parse`). The others pass or fail as that one does, and the first to fail is the first
    of its kind: the same error is raised."""
    _verify(module, firsts, text, source, programs)


def _verify(module: HloModule, firsts: list[HloInstruction] | None, text: str | None, source: str,
            programs: dict | None = None) -> None:
    positions = getattr(module, "_positions", None) or {}
    state = _Memo()
    if programs is not None:
        state.programs.update(programs)
    if firsts is None:
        programs = state.programs
        for comp in module.computations:
            # This computation's program key, gathered on the way (callees come before callers).
            params: list = []
            _check_instructions(comp.instructions, state, params, positions, text, source)
            if id(comp) not in programs:
                root = comp.root
                programs[id(comp)] = (tuple(params), id(root.shape) if root is not None else None)
    else:
        _check_instructions(firsts, state, None, positions, text, source)  # program keys made when asked
    try:
        _entry_layout(module)
    except _Invalid as err:
        _raise(str(err), module.entry.root, positions, text, source)


class _Memo:
    """What one verification remembers."""

    __slots__ = ("checked", "programs", "unbounded", "attributes")

    def __init__(self):
        self.checked: set = set()  # the memo keys of the instructions checked
        self.programs: dict = {}  # id(computation) -> its program key, for _memo_key
        self.unbounded: dict = {}  # id(shape) -> _unbounded(shape): shapes are shared, the answer is asked often
        self.attributes: dict = {}  # attribute items -> those a rule may read


def _check_instructions(instructions, state: _Memo, params: list | None, positions: dict, text: str | None,
                        source: str) -> None:
    """Check each instruction (once per memo key); `params`, if given, gathers (number, id(shape)) of the
    parameters."""
    checked = state.checked
    programs = state.programs
    unbounded = state.unbounded
    checked_attributes = state.attributes
    arity = _FIXED_ARITY
    verified = VERIFIED_OPCODES
    unchecked = _UNCHECKED_ATTRIBUTES
    blind = _NO_ATTRIBUTES_READ
    for instr in instructions:
        op = instr.opcode
        shape = instr.shape
        if op == "parameter" and params is not None:
            params.append((instr.parameter_number, id(shape)))
        if op in verified or op in arity:
            # `_memo_key`, written out for the usual instruction (no computation called).
            ops = instr.operands
            n = len(ops)
            if op in blind:
                if n == 2:
                    key = (op, id(shape), id(ops[0].shape), id(ops[1].shape))
                elif n == 1:
                    key = (op, id(shape), id(ops[0].shape))
                else:
                    key = (op, id(shape), *[id(o.shape) for o in ops])
            elif op == "fusion":  # its rule reads no attribute but the fused computation
                fused = instr.fused_computation
                key = None if fused is None else (op, id(shape), _program_key(fused, programs),
                                                  *[id(o.shape) for o in ops])
            elif instr._called:
                key = _memo_key(instr, programs)
            else:
                raw = instr._raw_store
                if raw:
                    # Attribute lists repeat (their texts are often the very same objects): each is
                    # filtered once.
                    items = tuple(raw.items())
                    attrs = checked_attributes.get(items)
                    if attrs is None:
                        attrs = checked_attributes[items] = tuple([i for i in items if i[0] not in unchecked])
                else:
                    attrs = ()
                if n == 1:
                    key = (op, id(shape), attrs, id(ops[0].shape))
                else:
                    key = (op, id(shape), attrs, *[id(o.shape) for o in ops])
                if op == "add-dependency":
                    key += tuple([id(o) for o in ops])
            if key is not None:
                if key in checked:
                    continue
                checked.add(key)
        else:
            flag = unbounded.get(id(shape))
            if flag is None:
                flag = unbounded[id(shape)] = _unbounded(shape)
            if not flag:
                continue  # no rule of ours looks at it
        try:
            _check(instr)
        except _Invalid as err:
            _raise(str(err), instr, positions, text, source)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as err:
            _raise(f"cannot verify {instr.opcode} '{instr.name}': {err}", instr, positions, text, source)


_UNCHECKED_ATTRIBUTES = frozenset({"metadata", "backend_config", "sharding", "frontend_attributes", "origin",
                                   "statistics"})


def _memo_key(instr: HloInstruction, programs: dict):
    """Instructions equal in everything a rule looks at are checked once. Shapes count by identity (the
    parser gives equal texts one shape object): equal shapes in two objects are merely checked twice. A
    called computation counts by its program shape (parameter numbers and shapes, root shape), which is
    all the rules of instructions that call one look at: JAX gives each reduce a region of its own."""
    called = instr._called
    attrs = tuple([item for item in instr._raw_store.items() if item[0] not in _UNCHECKED_ATTRIBUTES])
    if called:
        if instr.opcode not in _BY_PROGRAM_SHAPE:
            return None
        attrs += tuple([(name, _program_key(value, programs)) for name, value in called.items()])
    key = (instr.opcode, id(instr.shape), attrs, *[id(o.shape) for o in instr.operands])
    if instr.opcode == "add-dependency":
        key += tuple([id(o) for o in instr.operands])
    return key


# Opcodes whose rules see their called computations only through `_program_key`.
_BY_PROGRAM_SHAPE = frozenset({"reduce", "sort", "map", "call", "while", "conditional", "fusion"})


def _program_key(value, programs: dict):
    if isinstance(value, (list, tuple)):
        return tuple([_program_key(v, programs) for v in value])
    key = programs.get(id(value))
    if key is None:
        root = value.root
        key = programs[id(value)] = (
            tuple([(p.parameter_number, id(p.shape)) for p in value.instructions if p.opcode == "parameter"]),
            id(root.shape) if root is not None else None,
        )
    return key


def _raise(message: str, instr: HloInstruction, positions: dict, text: str | None, source: str) -> None:
    pos = positions.get(id(instr))
    if pos is None and text is not None:
        pos = _caller_position(instr, positions)  # an instruction the parser made (async sugar, nesting)
    if text is None or pos is None:
        line = instruction_to_text(instr)
        raise HloParseError(message, text=line, pos=0, source=source) from None
    raise HloParseError(message, text=text, pos=pos, source=source) from None


def _caller_position(instr: HloInstruction, positions: dict) -> int | None:
    """Where the instruction that calls `instr`'s computation was read, if it was."""
    comp = instr.computation
    module = comp.module if comp is not None else None
    if module is None:
        return None
    for _, caller in module.instructions():
        if comp in caller.called_computations and id(caller) in positions:
            return positions[id(caller)]
    return None
