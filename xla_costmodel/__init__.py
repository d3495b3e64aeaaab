"""xla_costmodel: predict how long XLA kernels take, explain why, and check against measured time."""

from .hlo import HloComputation as HloComputation
from .hlo import HloInstruction as HloInstruction
from .hlo import HloModule as HloModule
from .hlo import HloParseError as HloParseError
from .hlo import Layout as Layout
from .hlo import Shape as Shape
from .hlo import from_jax as from_jax
from .hlo import load_hlo as load_hlo
from .hlo import parse_hlo as parse_hlo

__version__ = "0.1.0"
