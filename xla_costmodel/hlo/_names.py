"""Instruction and computation names made unique the way XLA makes them.

XLA's parser keeps a name as written while it reads, then `HloModule` runs
every computation name through one `NameUniquer` and every instruction name
through another, computations in the order the parser finished them
(a nested or async-wrapped computation before the one holding it),
instructions in order within each. A name that is taken gets the next free
`.N`; a name that already ends in `.N` claims N if it is free (`p0.1` stays
`p0.1`), and `x.00` becomes `x.0`. See XLA's `xla/service/name_uniquer.cc`
and `HloModule::AddComputationInternal`.
"""

from __future__ import annotations

import re

from ._lexer import PRIMITIVE_TYPES

_ALLOWED = re.compile(r"[^A-Za-z0-9_.\-]")
_SUFFIX = re.compile(r"[+\-]?[0-9]+")
# A name (one per line) whose `.N` suffix the uniquer reads as a number it writes otherwise (`x.05`, `x.-0`),
# or that a number written otherwise could take (`x.-5`, `x.+5`).
_REWRITTEN_SUFFIX = re.compile(r"\.(?:[+\-][0-9]+|0[0-9]+)$", re.M)
_ZERO_SUFFIX = re.compile(r"^(.*)\.0$", re.M)


def sanitized(name: str) -> str:
    """XLA's `NameUniquer::GetSanitizedName`."""
    if not name:
        return ""
    first = name[0]
    result = (first if first.isascii() and (first.isalpha() or first == "_") else "_") + _ALLOWED.sub("_", name[1:])
    if result in PRIMITIVE_TYPES:
        result += "_"
    if result.startswith("__") and not result.startswith("__xla_"):
        result = "a" + result[1:]
    return result


def renamed(name: str) -> bool:
    """Whether `sanitized(name) != name` for a name XLA's lexer read (name characters only): a type name, or
    one starting with `__` but not `__xla_`. The token parser refuses such an instruction name and renames such
    a computation; the fast path leaves both to it."""
    return name in PRIMITIVE_TYPES or (name[:2] == "__" and not name.startswith("__xla_"))


class NameUniquer:
    """XLA's `NameUniquer` with separator `.`: one id generator per name root."""

    __slots__ = ("_used",)

    def __init__(self):
        self._used: dict[str, tuple[set[int], list[int]]] = {}

    def unique(self, prefix: str, clean: bool = False) -> str:
        """A name not handed out before: `prefix`, or its root with the next free `.N`.

        `clean`: `prefix` is known to need no sanitizing (it came from XLA's lexer).
        """
        root = prefix if clean else sanitized(prefix or "name")
        has_suffix = False
        suffix = 0
        sep = root.rfind(".")
        if 0 < sep < len(root) - 1:
            tail = root[sep + 1 :]
            if (tail.isdigit() or _SUFFIX.fullmatch(tail)) and len(tail) < 19:
                has_suffix = True
                suffix = int(tail)
                root = root[:sep]
        used = self._used.get(root)
        if used is None:
            used = self._used[root] = (set(), [0])
        taken, next_id = used
        if suffix in taken:
            n = next_id[0]
            while n in taken:
                n += 1
            taken.add(n)
            next_id[0] = n + 1
            suffix = n
        else:
            taken.add(suffix)
        if suffix == 0:
            return f"{root}.0" if has_suffix else root
        return f"{root}.{suffix}"

    def unique_all(self, names: list[str]) -> list[str]:
        """`unique(name, clean=True)` for each name in turn: the same names, faster where nothing clashes
        (the usual case: a module XLA wrote)."""
        used = self._used
        unique = self.unique
        out = []
        for name in names:
            sep = name.rfind(".")
            if 0 < sep < len(name) - 1:
                tail = name[sep + 1 :]
                if not (tail.isdigit() and len(tail) < 19 and (tail[0] != "0" or len(tail) == 1)):
                    out.append(unique(name, True))
                    continue
                root = name[:sep]
                suffix = int(tail)
            else:
                root = name
                suffix = 0
            entry = used.get(root)
            if entry is None:
                used[root] = ({suffix}, [0])
            elif suffix in entry[0]:
                out.append(unique(name, True))
                continue
            else:
                entry[0].add(suffix)
            out.append(name)
        return out


def kept_as_written(names: list[str]) -> bool:
    """Whether a fresh `NameUniquer` gives back every name of `names` unchanged (`unique_all(names) == names`):
    a cheap test that lets a module XLA wrote skip uniquing.

    A name claims its root and suffix (`x.5`: root `x`, 5; `x`: `x`, 0); the uniquer renames a name only when
    its claim is taken, or when it writes the suffix otherwise (`x.05` becomes `x.5`). With distinct names and
    no suffix written otherwise, two claims meet only as `x` and `x.0`.
    """
    present = set(names)
    if len(present) != len(names):
        return False
    if not names:
        return True
    joined = "\n".join(names)
    if joined.count("\n") != len(names) - 1 or _REWRITTEN_SUFFIX.search(joined) is not None:
        return False  # (a name with a line break would hide from the patterns)
    if ".0" in joined:
        return not any(root in present for root in _ZERO_SUFFIX.findall(joined))
    return True
