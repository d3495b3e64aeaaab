"""An independent evaluation corpus: real programs from JAX libraries nobody here wrote.

Each entry of `PROGRAMS` is a `CorpusProgram`: a library's own model, layer,
optimizer or function called on inputs (forward, or a loss reduced from its
output and the gradient), at two or three named sizes, the largest with
kernels of milliseconds on a CPU. `source` names the library, the unit that a
leave-one-source-out evaluation holds out::

    from xla_costmodel import corpus
    fn, args = corpus.get_program("flax_nnx_mha_grad").build("medium")
    corpus.program_table()          # name, source, sizes, description

Sources: Flax (NNX and Linen), Equinox, Diffrax, Lineax, Optimistix, Optax,
jax's own libraries (`jax.scipy`, `jax.numpy.linalg`, `jax.nn`,
`jax.random`, ...), dm-haiku, Penzai, NumPyro and dm-pix. The libraries are
optional: `pip install 'xla_costmodel[corpus]'`. Building a program whose
library is missing raises `MissingLibraryError` naming that extra; the
registry itself imports none of them. The programs are not chosen to
resemble the measurement suite or the zoo: they are what the libraries
offer and what their users run. `scripts/measure_corpus.py` measures them.
"""

from __future__ import annotations

from . import _equinox, _flax, _jax, _optax, _others  # noqa: F401  (fill the registry)
from ._registry import EXTRA, PROGRAMS, CorpusProgram, MissingLibraryError

__all__ = ["CorpusProgram", "EXTRA", "MissingLibraryError", "PROGRAMS", "get_program", "program_names",
           "program_table", "sources"]


def program_names(source: str | None = None) -> list[str]:
    """**Returns:** the names of the corpus programs (of one `source` if given), in registry order."""
    if source is not None and source not in sources():
        raise ValueError(f"unknown corpus source {source!r}; sources: {', '.join(sources())}")
    return [n for n, p in PROGRAMS.items() if source is None or p.source == source]


def sources() -> list[str]:
    """**Returns:** the libraries the corpus draws from, in registry order."""
    return list(dict.fromkeys(p.source for p in PROGRAMS.values()))


def get_program(name: str) -> CorpusProgram:
    """The `CorpusProgram` called `name`; `ValueError` listing the valid names for an unknown one."""
    try:
        return PROGRAMS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown corpus program {name!r}; valid names: {', '.join(PROGRAMS)}") from None


def program_table():
    """The corpus as a DataFrame: `program`, `source`, `sizes` (comma-separated), `available`, `description`."""
    import pandas as pd

    return pd.DataFrame(
        [{"program": p.name, "source": p.source, "sizes": ",".join(p.size_names), "available": p.available(),
          "description": p.description} for p in PROGRAMS.values()]
    )
