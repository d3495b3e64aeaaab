"""Sizes of shapes as XLA's cost analysis counts them (an internal API for the models, the fusion pass and
fitting): `elements`, `elements_recursive`, `element_bits`, `shape_size`, the array leaves of a tuple
(`array_leaves`, `first_array`; every leaf: `all_leaves`), and whether a reshape or transpose is a bitcast
(`reshape_is_bitcast`, `transpose_is_bitcast`, as XLA's `ShapeUtil` decides; `reshape_keeps_layout`: on
any layouts, as after layout assignment).
"""

from ._shapes import all_leaves as all_leaves
from ._shapes import array_leaves as array_leaves
from ._shapes import element_bits as element_bits
from ._shapes import elements as elements
from ._shapes import elements_recursive as elements_recursive
from ._shapes import first_array as first_array
from ._shapes import reshape_is_bitcast as reshape_is_bitcast
from ._shapes import reshape_keeps_layout as reshape_keeps_layout
from ._shapes import shape_size as shape_size
from ._shapes import transpose_is_bitcast as transpose_is_bitcast
