"""HLO of a jitted JAX function, as our typed graph."""

from __future__ import annotations

from ._ir import HloModule
from ._parser import parse_hlo


def hlo_text_of(fn, *args, optimized: bool = True, **kwargs) -> str:
    """HLO text of `fn` traced with `args`: after XLA's optimizations, or as lowered."""
    from .._quiet_jax import start_backends_quietly

    start_backends_quietly()  # where jax's CUDA plugin has no GPU, its log lines at backend start are not printed
    import jax

    from .._user_program import lower_user_program

    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    # A fault of the user's function (a shape mismatch) is a `UserProgramError` naming their file and line.
    lowered = lower_user_program(jitted, args, getattr(fn, "__name__", None), **kwargs)
    if optimized:
        return lowered.compile().as_text()
    # debug_info keeps each instruction's op_name metadata, which is what ties an
    # unfused instruction to the kernel XLA later puts it in.
    return lowered.as_text(dialect="hlo", debug_info=True)


def from_jax(fn, *args, optimized: bool = True, **kwargs) -> HloModule:
    """The HLO module of a JAX function.

    **Arguments:**

    - `fn`: a function or an already `jax.jit`-ed function.
    - `*args`, `**kwargs`: example arguments (arrays or `jax.ShapeDtypeStruct`).
    - `optimized`: True for the module XLA compiled for the default backend
      (`.compile().as_text()`); False for the module as lowered, before any
      HLO pass, i.e. the input of a fusion pass.

    **Returns:** the parsed `HloModule`.

    **Raises:** `UserProgramError` (a `ValueError`) naming the user's file,
    line and exception when jax cannot trace or lower `fn`.
    """
    name = getattr(fn, "__name__", "fn")
    text = hlo_text_of(fn, *args, optimized=optimized, **kwargs)
    return parse_hlo(text, source=f"<jax {name} {'optimized' if optimized else 'lowered'}>")
