"""Words in messages: a count and its noun in the right grammatical number ("1 kernel", "2 kernels")."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`"1 kernel"`, `"2 kernels"`, `"0 kernels"`; `plural` for nouns that do not take an s."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
