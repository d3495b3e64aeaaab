"""The corpus registry: programs filled in by the `corpus_program` decorator, one module per source."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["CorpusProgram", "MissingLibraryError", "PROGRAMS", "corpus_program", "EXTRA"]

#: The optional extra that installs every library of the corpus.
EXTRA = "corpus"

Built = tuple[Callable[..., Any], tuple[Any, ...]]

PROGRAMS: dict[str, "CorpusProgram"] = {}


class MissingLibraryError(ImportError):
    """A corpus program's library is not installed; the message says which extra installs it."""


@dataclass(frozen=True)
class CorpusProgram:
    """One program of the corpus: a library called on inputs, at named sizes.

    **Attributes:**

    - `name`: registry key, e.g. `"flax_nnx_mha_grad"`.
    - `source`: the library it comes from, as its distribution is named
      (`"flax"`, `"equinox"`, `"optax"`, `"jax"`, ...): the unit a
      leave-one-source-out split holds out.
    - `description`: one line: which library classes or functions it calls.
    - `sizes`: size name -> keyword arguments of the builder, smallest first.
    - `requires`: modules the builder imports (checked by `available`).
    - `builder`: `(**size_kwargs) -> (fn, args)`.
    """

    name: str
    source: str
    description: str
    sizes: Mapping[str, Mapping[str, Any]]
    requires: tuple[str, ...]
    builder: Callable[..., Built] = field(repr=False)

    @property
    def size_names(self) -> tuple[str, ...]:
        """The sizes, smallest first."""
        return tuple(self.sizes)

    def available(self) -> bool:
        """Whether every library the program needs can be imported."""
        return all(importlib.util.find_spec(m.split(".")[0]) is not None for m in self.requires)

    def build(self, size: str | None = None) -> Built:
        """The program at one size.

        **Arguments:** `size`: a name of `sizes` (default: the smallest).

        **Returns:** `(fn, args)`: a plain function and a tuple of concrete,
        deterministic example arguments (`jax.jit(fn).lower(*args)` works).

        **Raises:** `ValueError` for an unknown size; `MissingLibraryError`
        when the program's library is not installed.
        """
        size = self.size_names[0] if size is None else size
        if size not in self.sizes:
            raise ValueError(f"corpus program {self.name!r} has no size {size!r}; sizes: {', '.join(self.sizes)}")
        for module in self.requires:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise MissingLibraryError(
                    f"corpus program {self.name!r} needs {module!r} ({self.source}), which cannot be imported "
                    f"({exc}); install the corpus libraries with: pip install 'xla_costmodel[{EXTRA}]'"
                ) from exc
        fn, args = self.builder(**self.sizes[size])
        return fn, tuple(args)


def corpus_program(
    name: str,
    *,
    source: str,
    description: str,
    sizes: Mapping[str, Mapping[str, Any]],
    requires: tuple[str, ...] = (),
):
    """Register a builder as a corpus program (see `CorpusProgram` for the arguments)."""
    if not 2 <= len(sizes) <= 3:
        raise ValueError(f"corpus program {name!r}: give 2 or 3 sizes, not {len(sizes)}")

    def register(builder: Callable[..., Built]) -> Callable[..., Built]:
        if name in PROGRAMS:
            raise ValueError(f"corpus program {name!r} registered twice")
        PROGRAMS[name] = CorpusProgram(name, source, description, dict(sizes), tuple(requires), builder)
        return builder

    return register
