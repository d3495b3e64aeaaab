"""Facts about shapes and layouts (XLA's `ShapeUtil`): byte sizes, element counts, leaves, and
which reshapes and transposes only relabel a layout (bitcasts).

The one home of these facts for the cost analysis (`_rules`), the emitter
facts (`_emission`), the cost models and the fusion pass.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------
# Shape sizes: XLA's `ShapeUtil::ByteSizeOf(shape, pointer_size=8)` plus the
# CPU/GPU rule for dynamic shapes (`CpuExecutable::ShapeSizeBytes`).


POINTER_SIZE = 8


def _bytes_per_element(shape) -> tuple[int, int]:
    """(bits when packed via `E(n)`, else 0; bytes per element otherwise)."""
    from ..hlo import PRIMITIVE_BITS

    layout = shape.layout
    if layout is not None and layout.tail and "E(" in layout.tail:
        bits = layout.element_size_bits
        if bits:
            return bits, 0
    return 0, (PRIMITIVE_BITS.get(shape.element_type, 0) + 7) // 8


def shape_size(shape) -> int:
    """Bytes of the top level of `shape` (a tuple counts its pointer table)."""
    et = shape.element_type
    if et == "tuple":
        return POINTER_SIZE * len(shape.tuple_shapes)
    if et == "opaque":
        return POINTER_SIZE
    if et == "token":
        return 0
    n = 1
    for d in shape.dims:
        if d > 0:
            n *= d
        elif d == 0:
            n = 0
    bits, width = _bytes_per_element(shape)
    size = (n * bits + 7) // 8 if bits else n * width
    if shape.dynamic and any(shape.dynamic):
        size += 4 * len(shape.dims)  # one s32 per dimension for the runtime sizes
    return size


def leaves_size(shape) -> int:
    """Bytes of every array leaf of `shape` (XLA's output-bytes default)."""
    if shape.element_type == "tuple":
        return sum(leaves_size(s) for s in shape.tuple_shapes)
    if shape.element_type in ("token",):
        return 0
    return shape_size(shape)


def elements(shape) -> int:
    """`ShapeUtil::ElementsIn` (array shapes; dynamic dimensions at their bound)."""
    n = 1
    for d in shape.dims:
        n *= max(d, 0)
    return n


def elements_recursive(shape) -> int:
    """`ShapeUtil::ElementsInRecursive`: elements summed over array leaves."""
    if shape.element_type == "tuple":
        return sum(elements_recursive(s) for s in shape.tuple_shapes)
    if shape.element_type in ("token", "opaque"):
        return 0
    return elements(shape)


def all_leaves(shape, prefix=()):
    """`(index, leaf)` for every non-tuple leaf, tokens included (XLA's `ForEachLeafShape`)."""
    if shape.element_type == "tuple":
        for i, s in enumerate(shape.tuple_shapes):
            yield from all_leaves(s, prefix + (i,))
    else:
        yield prefix, shape


def array_leaves(shape, prefix=()):
    """`(index, leaf)` for every array leaf, in XLA's pre-order."""
    if shape.element_type == "tuple":
        for i, s in enumerate(shape.tuple_shapes):
            yield from array_leaves(s, prefix + (i,))
    elif shape.element_type not in ("token", "opaque"):
        yield prefix, shape



def first_array(shape):
    """The first array leaf of a shape (the shape itself when it is an array)."""
    for _, leaf in array_leaves(shape):
        return leaf
    return shape


def element_bits(shape) -> int:
    """Bits of the element type of an array (pred counts 8)."""
    return max(int(shape.element_bits), 1) if shape.element_type not in ("tuple", "token", "opaque") else 32


# ---------------------------------------------------------------------------
# Layout changes that move no data


def _nondegenerate_physical(shape) -> list[int]:
    """Dimensions of size > 1, most major first, in the layout's order."""
    return [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]


def _default_layout(shape) -> bool:
    return tuple(shape.minor_to_major) == tuple(range(len(shape.dims) - 1, -1, -1))


def transpose_is_bitcast(operand_shape, shape, dimensions, *, ignore_unit_dims: bool = False) -> bool:
    """`ShapeUtil::TransposeIsBitcast`: the permutation `dimensions` only relabels the layout.

    With `ignore_unit_dims`, dimensions of size 1 may move freely (what the
    GPU backend's layout normalisation later turns into a bitcast as well):
    the cost models and the fusion pass ask this way; the cost analysis asks
    as XLA's `HloCostAnalysis` does, without.
    """
    if operand_shape.element_type != shape.element_type:
        return False
    m2m_dst = shape.minor_to_major
    m2m_src = operand_shape.minor_to_major
    if len(dimensions) != len(m2m_dst) or len(m2m_src) != len(m2m_dst):
        return False
    if ignore_unit_dims:
        return ([dimensions[d] for d in m2m_dst if shape.dims[d] != 1]
                == [d for d in m2m_src if operand_shape.dims[d] != 1])
    return all(dimensions[d] == s for d, s in zip(m2m_dst, m2m_src))


def _physical_index(dims, m2m, index) -> int:
    """The linear index of `index` in the layout `m2m` (`IndexUtil::MultidimensionalIndexToLinearIndex`)."""
    linear, scale = 0, 1
    for d in m2m:
        linear += index[d] * scale
        scale *= dims[d]
    return linear


def reshape_keeps_layout(operand_shape, shape) -> bool:
    """`ShapeUtil::ReshapeIsBitcast` on the shapes' own layouts, whatever they are: no element of
    the reshape moves in memory (XLA's reading after layout assignment, `GemmFusion`'s "Non-bitcast
    reshape"). Element types are not compared. As XLA proves sufficient, only the unit indices
    (one dimension 1, the others 0) of either side are checked."""
    if elements(operand_shape) != elements(shape):
        return False
    if elements(shape) == 0:
        return True

    def unit_indices_stay(a, b) -> bool:
        a_dims, b_dims = tuple(a.dims), tuple(b.dims)
        a_m2m, b_m2m = a.minor_to_major, b.minor_to_major
        row_a, row_b = tuple(range(len(a_dims) - 1, -1, -1)), tuple(range(len(b_dims) - 1, -1, -1))
        for d, size in enumerate(a_dims):
            if size <= 1:
                continue
            unit = [0] * len(a_dims)
            unit[d] = 1
            logical = _physical_index(a_dims, row_a, unit)
            out = [0] * len(b_dims)
            for e in row_b:  # `LinearIndexToMultidimensionalIndex` in the row-major layout
                out[e] = logical % b_dims[e]
                logical //= b_dims[e]
            if _physical_index(a_dims, a_m2m, unit) != _physical_index(b_dims, b_m2m, out):
                return False
        return True

    return unit_indices_stay(operand_shape, shape) and unit_indices_stay(shape, operand_shape)


def reshape_is_bitcast(operand_shape, shape, *, ignore_unit_dims: bool = False,
                       ignore_element_type: bool = False) -> bool:
    """A reshape between row-major layouts only relabels the data.

    Two readings, on purpose:

    - `ignore_unit_dims=False` (the cost models, `analyze`, and the fusion
      simulator's `layout_changes_to_bitcasts`, which must keep `analyze`'s
      prices): both layouts are the default one, unit dimensions included;
    - `ignore_unit_dims=True` (the fusion pass's `IsIntermediate`): both
      layouts are row-major on their dimensions of size > 1, unit dimensions
      anywhere. Making the models as lenient would price reshapes through
      unit dimensions in non-default layouts as free.

    `ignore_element_type`: as XLA's `ReshapeIsBitcast(..., ignore_element_type=true)`, two shapes
    of different element types (multi-output fusion's loop shapes: a `pred[64]` reduce input
    against an `f32[64,1,1]` gather) are compared on their dimensions and layouts alone.
    """
    if "tuple" in (operand_shape.element_type, shape.element_type):
        return False
    if not ignore_element_type and operand_shape.element_type != shape.element_type:
        return False
    if not ignore_unit_dims:
        return _default_layout(operand_shape) and _default_layout(shape)
    for s in (operand_shape, shape):
        phys = _nondegenerate_physical(s)
        if phys != sorted(phys):
            return False
    return True
