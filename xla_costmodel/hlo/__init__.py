"""HLO front end: parse XLA's HLO text into a typed graph and print it back."""

from ._attributes import ConvolutionDimensionNumbers as ConvolutionDimensionNumbers
from ._attributes import Window as Window
from ._attributes import WindowDimension as WindowDimension
from ._errors import HloParseError as HloParseError
from ._ir import HloComputation as HloComputation
from ._ir import HloInstruction as HloInstruction
from ._ir import HloModule as HloModule
from ._parser import load_hlo as load_hlo
from ._parser import parse_hlo as parse_hlo
from ._shape import PRIMITIVE_BITS as PRIMITIVE_BITS
from ._shape import Layout as Layout
from ._shape import Shape as Shape
from ._verifier import verify as verify
from ._from_jax import from_jax as from_jax
from ._from_jax import hlo_text_of as hlo_text_of
# A compiled module with its fusions undone (the front door re-fuses a partitioned program for a GPU).
from ._edit import inline_fusions as inline_fusions
