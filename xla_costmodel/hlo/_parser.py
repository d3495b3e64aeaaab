"""Reading HLO text: the entry points.

`parse_hlo` reads a module with the line-oriented fast path (`_fastpath`),
which reads what XLA prints, and falls back to the token parser
(`_token_parser`, XLA's grammar rule for rule) for anything else; then it
checks the XLA verifier rules we encode (`_verifier`). Both readers share the
line shapes (`LINE_SHAPES`) and the checks of `_token_parser`, the per-opcode
rules of `_opcodes`, the attribute value readers of `_values` and the printed
forms registered with them, and the tokens of `_lexer` (see `_fastpath`'s
note, "One parser design").
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from .._gc import gc_paused
from . import _values  # noqa: F401  (registers the attribute value readers with the token parser)
from ._errors import HloParseError
from ._fastpath import fast_parse
from ._ir import HloModule
from ._token_parser import Parser, _Fail
from ._verifier import verify as run_verifier
from ._verifier import verify_parsed

__all__ = ["load_hlo", "parse_hlo", "parse_hlo_tokens"]


def parse_hlo(text: str, *, source: str = "<string>", verify: bool = True) -> HloModule:
    """Parse HLO text (any form XLA prints) into an `HloModule`.

    **Arguments:**

    - `text`: the HLO module text, pre- or post-optimization, with or without
      `HloModule` header, `%` prefixes, signatures and stack-frame tables.
    - `source`: a name for error messages, e.g. the file path.
    - `verify`: also check the rules of XLA's verifier that this package encodes
      (shapes consistent with operands, valid layouts, ...; see
      `xla_costmodel.hlo.verify`). `False` accepts what XLA's parser alone accepts.

    **Returns:** the `HloModule`, with instruction and computation names made
    unique across the module as XLA's parser makes them.

    **Raises:** `HloParseError` (a `ValueError`) naming file, line and column.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_hlo expects str, got {type(text).__name__}")
    firsts: list = []
    programs: dict | None = {} if verify else None
    module = fast_parse(text, source, firsts, programs)
    if module is None:
        module = parse_hlo_tokens(text, source=source, verify=verify)
    elif verify:
        # Instructions that repeat an earlier one in all the rules look at are not checked again.
        verify_parsed(module, firsts, programs, text=text, source=source)
    return module


def parse_hlo_tokens(text: str, *, source: str = "<string>", verify: bool = True) -> HloModule:
    """`parse_hlo` without the line-oriented fast path (the reference reading)."""
    parser = Parser(text, source)
    try:
        with gc_paused():  # a growing cyclic graph: see xla_costmodel._gc
            module = parser.run()
    except _Fail as err:
        raise parser.error(err) from None
    except RecursionError:
        raise HloParseError("input nested too deeply", text=text, pos=0, source=source) from None
    if verify:
        run_verifier(module, text=text, source=source)
    return module


def load_hlo(path: str | os.PathLike, *, verify: bool = True) -> HloModule:
    """Read and parse an HLO text file, plain or gzip-compressed (`.hlo.gz`, told by its content); see
    `parse_hlo`. Errors name the file; a file that cannot be read raises the `OSError` of reading it."""
    path = Path(path)
    data = path.read_bytes()  # OSError (FileNotFoundError, ...) as Python raises it
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise HloParseError(f"not a valid gzip file ({exc})", text="", pos=0, source=str(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HloParseError(f"not a text file ({exc.reason})", text="", pos=0, source=str(path)) from None
    return parse_hlo(text, source=str(path), verify=verify)
