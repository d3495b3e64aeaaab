"""FRONT-END HELPERS: small additions to `xla_costmodel.hlo` that the cost analysis needs.

They live here, not in `xla_costmodel/hlo/`, because that package has another
owner. Each reads a private slot of `HloInstruction` when it is there and
falls back to the public API otherwise, so a change in the front end can only
make them slower, never wrong. Candidates for the front end proper:

- `may_have_attribute(instr, name)`: "could `instr` have attribute `name`?"
  without splitting a lazily parsed attribute list (the fast parser keeps the
  list unsplit until someone asks; splitting costs more than costing the
  instruction, and a module has hundreds of thousands of instructions).
- `int_list_attribute(instr, name)`: an integer-list attribute such as
  `lhs_contracting_dims={1}` or `dimensions={1,0}` without the general
  attribute lexer, which costs ~20 us per value.
- `word_attribute(instr, name)`: a one-word attribute such as `kind=kLoop`,
  likewise.
- `backend_config(instr)`: the backend config as a dict, read as XLA's
  protobuf JSON reader reads it (bare keys allowed).
"""

from __future__ import annotations

import json
import re

__all__ = ["backend_config", "int_list_attribute", "may_have_attribute", "word_attribute"]

_INT_LIST = re.compile(r"\s*\{\s*(-?\d+(?:\s*,\s*-?\d+)*)?\s*\}\s*")


def may_have_attribute(instr, name: str) -> bool:
    """False only when `instr` certainly has no attribute `name` (cheap)."""
    lazy = getattr(instr, "_lazy", None)
    if isinstance(lazy, tuple) and len(lazy) == 4:
        text, _source, start, end = lazy
        return text.find(name, start, end) >= 0
    store = getattr(instr, "_raw_store", None)
    if isinstance(store, dict):
        return name in store
    return instr.has_attribute(name)


_ATTR_PATTERNS: dict[str, re.Pattern] = {}
# Integer-list texts already converted (the same few values recur thousands of times).
_PARSED: dict[str, tuple[int, ...]] = {}


def _attr_pattern(name: str) -> re.Pattern:
    pat = _ATTR_PATTERNS.get(name)
    if pat is None:
        pat = _ATTR_PATTERNS[name] = re.compile(r"(?:^|[\s,])" + re.escape(name) + r"=\{([-\d,\s]*)\}")
    return pat


def int_list_attribute(instr, name: str, default=()):
    """The integer list attribute `name` of `instr` as a tuple, or `default` when absent."""
    cache = getattr(instr, "_cache", None)
    if cache and name in cache:
        return cache[name]
    lazy = getattr(instr, "_lazy", None)
    if lazy.__class__ is tuple and len(lazy) == 4:
        # Read the value straight from the unsplit attribute text.
        text, _source, start, end = lazy
        m = _attr_pattern(name).search(text, start, end)
        if m is None:
            if text.find(name, start, end) < 0:
                return default
        else:
            body = m.group(1)
            value = _PARSED.get(body)
            if value is None:
                body = body.strip()
                try:
                    value = tuple(int(x) for x in body.split(",")) if body else ()
                except ValueError:
                    value = None
                else:
                    _PARSED[m.group(1)] = value
            if value is not None:
                return value
    elif not may_have_attribute(instr, name):
        return default
    raw = None
    try:
        raw = instr._raw.get(name)
    except AttributeError:
        pass
    if isinstance(raw, str):
        m = _INT_LIST.fullmatch(raw)
        if m:
            body = m.group(1)
            return tuple(int(x) for x in body.split(",")) if body else ()
    value = instr.attribute(name, default)
    if isinstance(value, int):
        return (value,)
    return tuple(value) if value is not None else default


_WORD_PATTERNS: dict[str, re.Pattern] = {}
_WORD = re.compile(r"[\w$.\-]+")


def word_attribute(instr, name: str, default=None):
    """A one-word attribute value (`kind=kLoop` -> `"kLoop"`), or `default` when absent."""
    cache = getattr(instr, "_cache", None)
    if cache and name in cache:
        return cache[name]
    lazy = getattr(instr, "_lazy", None)
    if lazy.__class__ is tuple and len(lazy) == 4:
        text, _source, start, end = lazy
        pat = _WORD_PATTERNS.get(name)
        if pat is None:
            pat = _WORD_PATTERNS[name] = re.compile(r"(?:^|[\s,])" + re.escape(name) + r"=([\w$.\-]+)(?=\s*(?:,|$))")
        m = pat.search(text, start, end)
        if m is not None:
            return m.group(1)
        if text.find(name, start, end) < 0:
            return default
    else:
        store = getattr(instr, "_raw_store", None)
        if isinstance(store, dict):
            raw = store.get(name)
            if raw is None and name not in store:
                return default
            if isinstance(raw, str):
                word = raw.strip()
                if _WORD.fullmatch(word):
                    return word
    return instr.attribute(name, default)


def backend_config(instr) -> dict | None:
    """The instruction's `backend_config` as a dict, or None; XLA's protobuf JSON reader also takes
    bare keys (`{kind: "__triton"}`), so this does too."""
    cfg = instr.attribute("backend_config", None) if instr.has_attribute("backend_config") else None
    if isinstance(cfg, str):
        try:
            cfg = json.loads(re.sub(r'([{,]\s*)([A-Za-z_][A-Za-z0-9_]*)\s*:', r'\1"\2":', cfg))
        except ValueError:
            return None
    return cfg if isinstance(cfg, dict) else None
