"""jaxlib's LAPACK kernels, made callable in a process that did not lower a linear-algebra op itself.

XLA:CPU runs jaxlib's linear algebra (`custom_call_target="lapack_*_ffi"`)
through function pointers that jaxlib fills in only when JAX lowers a
linear-algebra op in the process (`jaxlib.lapack.prepare_lapack_call`). A
module that holds such a call and arrives from elsewhere (HLO text, or a
`jax.export` artifact in the measuring worker) compiles, then dies with
SIGSEGV when run. `prepare_lapack(text)` lowers one small Cholesky first,
which fills the table for the whole process.
"""

from __future__ import annotations

__all__ = ["prepare_lapack"]

_READY = False


def prepare_lapack(hlo_text: str) -> None:
    """Fill jaxlib's LAPACK function pointers if `hlo_text` calls a LAPACK kernel (once per process)."""
    global _READY
    if _READY or 'custom_call_target="lapack_' not in hlo_text:
        return
    import jax
    import numpy as np

    jax.jit(jax.lax.linalg.cholesky).lower(np.eye(2, dtype=np.float32))
    _READY = True
