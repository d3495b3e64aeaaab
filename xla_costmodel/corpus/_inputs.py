"""Deterministic example inputs: the same arrays on every build, so compiled modules are identical."""

from __future__ import annotations

import numpy as np

__all__ = ["normal", "uniform", "integers", "seed_of"]


def seed_of(name: str) -> int:
    """A stable seed for a program name (not Python's salted `hash`)."""
    return int.from_bytes(name.encode(), "little") % (2**31)


def normal(seed: int, shape, dtype="float32", scale: float = 1.0):
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.standard_normal(shape) * scale, dtype=dtype)


def uniform(seed: int, shape, lo: float = 0.0, hi: float = 1.0, dtype="float32"):
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.uniform(lo, hi, size=shape), dtype=dtype)


def integers(seed: int, shape, high: int, dtype="int32"):
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.integers(0, high, size=shape), dtype=dtype)
