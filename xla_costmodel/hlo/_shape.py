"""HLO shapes and layouts."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

# Bit width of every primitive type XLA's lexer knows. `token`/`opaque` carry no data.
PRIMITIVE_BITS: dict[str, int] = {
    "pred": 8,
    "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "c64": 64, "c128": 128,
    "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e5m2fnuz": 8,
    "f8e4m3fnuz": 8, "f8e3m4": 8, "f8e8m0fnu": 8,
    "f6e2m3fn": 6, "f6e3m2fn": 6, "f4e2m1fn": 4,
    "token": 0, "opaque": 0,
}
# Bytes XLA's `ShapeUtil::ByteSizeOfPrimitiveType` gives an element (sub-byte types take a byte).
PRIMITIVE_BYTES: dict[str, int] = {t: max(1, b // 8) if b else 0 for t, b in PRIMITIVE_BITS.items()}

FLOAT_TYPES = frozenset(
    t for t in PRIMITIVE_BITS if t.startswith(("f", "bf")) and t not in ("token",)
)
COMPLEX_TYPES = frozenset({"c64", "c128"})
INT_TYPES = frozenset(t for t in PRIMITIVE_BITS if t[0] in "su" and t[1:].isdigit())

_IS_PERMUTATION: dict[tuple[int, ...], bool] = {}  # minor_to_major orders seen, and whether each is valid
_TILE_RE = re.compile(r"T((?:\([^()]*\))+)")
_SPACE_RE = re.compile(r"(?<![A-Z])S\((\d+)\)")
_ESIZE_RE = re.compile(r"E\((\d+)\)")


@dataclass(frozen=True, slots=True)
class Layout:
    """A dense layout: `minor_to_major` plus whatever followed the colon.

    `tail` is kept verbatim (tiles, memory space, element size, ...) so that a
    printed layout is exactly what was read; the accessors interpret it.
    """

    minor_to_major: tuple[int, ...]
    tail: str = ""

    @property
    def tiles(self) -> tuple[tuple[int, ...], ...]:
        """Tiling groups, e.g. `((8, 128), (2, 1))` for `T(8,128)(2,1)`."""
        m = _TILE_RE.search(self.tail)
        if not m:
            return ()
        groups = re.findall(r"\(([^()]*)\)", m.group(1))
        return tuple(
            tuple(-1 if p.strip() == "*" else int(p) for p in g.split(",") if p.strip()) for g in groups
        )

    @property
    def memory_space(self) -> int:
        m = _SPACE_RE.search(self.tail)
        return int(m.group(1)) if m else 0

    @property
    def element_size_bits(self) -> int:
        """Element size override from `E(n)`; 0 when absent."""
        m = _ESIZE_RE.search(self.tail)
        return int(m.group(1)) if m else 0

    def __str__(self) -> str:
        body = ",".join(map(str, self.minor_to_major))
        return "{" + body + (":" + self.tail if self.tail else "") + "}"


@dataclass(frozen=True, slots=True)
class Shape:
    """An HLO shape: an array (`f32[8,16]{1,0}`), a tuple, `token[]`, `opaque[]`,
    or a buffer `b(f32[8])` (an array XLA keeps as a mutable buffer).

    **Attributes:**

    - `element_type`: `"f32"`, `"pred"`, ..., `"tuple"`, or `"buffer"` (its array
      is `tuple_shapes[0]`).
    - `dims`: dimension sizes; a bounded dynamic dimension `<=N` holds its bound N,
      an unbounded one `?` holds -1.
    - `dynamic`: per dimension, True where the size is dynamic.
    - `layout`: the `Layout`, or None where the text gave none.
    - `tuple_shapes`: the element shapes of a tuple.
    """

    element_type: str
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple["Shape", ...] = ()
    # `byte_size`, computed on first use (shapes are immutable and shared by many instructions).
    _byte_size: int | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    @staticmethod
    def array(element_type: str, dims, layout: Layout | tuple[int, ...] | None = None) -> "Shape":
        dims = tuple(int(d) for d in dims)
        if isinstance(layout, tuple):
            layout = Layout(layout)
        return Shape(element_type, dims, (False,) * len(dims), layout)

    @staticmethod
    def tuple_of(shapes) -> "Shape":
        return Shape("tuple", tuple_shapes=tuple(shapes))

    @staticmethod
    def buffer_of(shape: "Shape") -> "Shape":
        return Shape("buffer", tuple_shapes=(shape,))

    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def is_buffer(self) -> bool:
        return self.element_type == "buffer"

    @property
    def is_array(self) -> bool:
        return self.element_type not in ("tuple", "token", "opaque", "buffer")

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def num_elements(self) -> int:
        """Elements of an array shape (dynamic dimensions at their bound)."""
        return math.prod(d for d in self.dims if d >= 0)

    @property
    def element_bits(self) -> int:
        if self.layout is not None and self.layout.element_size_bits:
            return self.layout.element_size_bits
        return PRIMITIVE_BITS.get(self.element_type, 0)

    @property
    def byte_size(self) -> int:
        """Bytes of an array's data (sub-byte types packed); for a tuple, the sum over leaves."""
        n = self._byte_size
        if n is None:
            if self.is_tuple or self.is_buffer:
                n = sum(s.byte_size for s in self.tuple_shapes)
            else:
                n = (self.num_elements * self.element_bits + 7) // 8
            object.__setattr__(self, "_byte_size", n)
        return n

    def leaves(self):
        """Yield `(index_path, array_shape)` for every non-tuple subshape."""
        if self.is_tuple:
            for i, s in enumerate(self.tuple_shapes):
                for path, leaf in s.leaves():
                    yield (i,) + path, leaf
        else:
            yield (), self

    def subshape(self, index) -> "Shape":
        s = self
        for i in index:
            s = s.tuple_shapes[i]
        return s

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        """The layout's dimension order, or the default (row-major) one when there is no layout or it is not
        a permutation of the dimensions (XLA's parser and verifier let an instruction's layout be invalid)."""
        if self.layout is not None:
            m2m = self.layout.minor_to_major
            if len(m2m) == len(self.dims):
                valid = _IS_PERMUTATION.get(m2m)
                if valid is None:
                    valid = _IS_PERMUTATION[m2m] = sorted(m2m) == list(range(len(m2m)))
                if valid:
                    return m2m
        return tuple(range(len(self.dims) - 1, -1, -1))

    def with_layout(self, layout: Layout | None) -> "Shape":
        return Shape(self.element_type, self.dims, self.dynamic, layout, self.tuple_shapes)

    def without_layout(self) -> "Shape":
        if self.is_tuple:
            return Shape.tuple_of(s.without_layout() for s in self.tuple_shapes)
        if self.is_buffer:
            return Shape.buffer_of(self.tuple_shapes[0].without_layout())
        return self.with_layout(None)

    def compatible(self, other: "Shape") -> bool:
        """XLA's `ShapeUtil::Compatible`: equal ignoring layouts and which dimensions are dynamic
        (an unbounded `?` dimension matches any size)."""
        if self is other:
            return True
        et = self.element_type
        if et == "tuple":
            return other.element_type == "tuple" and len(self.tuple_shapes) == len(other.tuple_shapes) and all(
                a.compatible(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes)
            )
        if et == "buffer" or other.element_type == "buffer":
            return et == other.element_type and self.tuple_shapes[0].compatible(other.tuple_shapes[0])
        if et != other.element_type:
            return False
        if not self.is_array:
            return True
        if len(self.dims) != len(other.dims):
            return False
        return all(a == b or a < 0 and self.dynamic[i] or b < 0 and other.dynamic[j]
                   for (i, a), (j, b) in zip(enumerate(self.dims), enumerate(other.dims)))

    def __str__(self) -> str:
        if self.is_tuple:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        if self.is_buffer:
            return "b(" + str(self.tuple_shapes[0]) + ")"
        parts = []
        for d, dyn in zip(self.dims, self.dynamic):
            if not dyn:
                parts.append(str(d))
            elif d < 0:
                parts.append("?")
            else:
                parts.append(f"<={d}")
        text = f"{self.element_type}[{','.join(parts)}]"
        if self.layout is not None:
            text += str(self.layout)
        return text

    def __repr__(self) -> str:
        return f"Shape({str(self)!r})"
