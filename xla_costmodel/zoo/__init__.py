"""A zoo of real JAX programs: inputs of the fixtures, benchmarks, notebooks and ``scripts/run``.

Each entry of :data:`PROGRAMS` is a :class:`ZooProgram`; ``program.build()``
returns ``(fn, args)``, a plain Python function and a tuple of concrete,
deterministic example arguments, so that::

    fn, args = get_program("mlp_grad").build()
    lowered = jax.jit(fn).lower(*args)
    pre = lowered.as_text(dialect="hlo")      # unoptimized HLO
    post = lowered.compile().as_text()        # optimized HLO for the backend

The committed ``hlo_fixtures/<name>.{pre,post}.hlo`` files are exactly these
texts for the CPU backend (``scripts/make_fixtures.py``). Large modules are not
committed; build them with :func:`transformer_grad` (e.g. ``num_layers=48``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from . import _programs
from ._programs import normal_array, softmax_cross_entropy, transformer_fwd, transformer_grad

__all__ = [
    "DEFAULT_PROGRAM",
    "PROGRAMS",
    "ZooProgram",
    "get_program",
    "normal_array",
    "program_names",
    "softmax_cross_entropy",
    "transformer_fwd",
    "transformer_grad",
]


@dataclass(frozen=True)
class ZooProgram:
    """One bundled JAX program.

    **Arguments:** ``name`` (registry key, also the fixture file stem),
    ``description`` (one line), ``builder`` (zero-argument callable returning
    ``(fn, args)``), ``tags`` (what the program exercises).
    """

    name: str
    description: str
    builder: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]] = field(repr=False)
    tags: tuple[str, ...] = ()

    def build(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """Build the program.

        **Returns:** ``(fn, args)``: a plain (un-jitted) Python function and a
        tuple of concrete example arguments; ``jax.jit(fn).lower(*args)`` works.
        """
        return self.builder()


# (name, builder, description, tags); the order is the registry order.
_TABLE = [
    ("mlp_fwd", _programs.mlp_fwd,
     "3-layer ReLU MLP forward pass with softmax output (16x32 -> 10)",
     ("dot", "elementwise", "reduce")),
    ("mlp_grad", _programs.mlp_grad,
     "loss and gradient of a 3-layer MLP with softmax cross-entropy",
     ("dot", "autodiff", "gather")),
    ("transformer_fwd", _programs.transformer_fwd,
     "one pre-norm transformer block forward: RMSNorm, causal 4-head attention, "
     "GELU MLP, no biases",
     ("dot", "softmax", "rmsnorm")),
    ("transformer_grad", _programs.transformer_grad,
     "loss and gradient of 2 pre-norm transformer blocks w.r.t. all parameters "
     "(benchmarks build 48 with zoo.transformer_grad(48))",
     ("dot", "autodiff", "softmax", "rmsnorm")),
    ("cnn_pool", _programs.cnn_pool,
     "CNN forward: conv, max pool (reduce-window), depthwise conv, avg pool, dense head",
     ("convolution", "reduce-window")),
    ("cnn_grad", _programs.cnn_grad,
     "loss and gradient of the CNN (conv backprop, select-and-scatter for max pool)",
     ("convolution", "reduce-window", "select-and-scatter", "autodiff")),
    ("masked_attention", _programs.masked_attention,
     "causal + key-padding masked attention with softmax (2x4x16x8)",
     ("dot", "softmax", "iota", "select")),
    ("scan_rnn", _programs.scan_rnn,
     "tanh RNN over 12 steps with lax.scan",
     ("while", "dot", "dynamic-slice")),
    ("while_loop", _programs.while_loop,
     "power iteration in lax.while_loop (data-dependent trip count) + fori_loop "
     "with a runtime trip count",
     ("while", "dot")),
    ("cond_switch", _programs.cond_switch,
     "lax.cond and a 4-way lax.switch",
     ("conditional",)),
    ("gather_scatter", _programs.gather_scatter,
     "jnp.take, take_along_axis, .at[].add/.set, segment_sum/segment_max",
     ("gather", "scatter")),
    ("sort_topk", _programs.sort_topk,
     "sort, argsort, lax.top_k and a stable multi-operand key sort",
     ("sort", "topk")),
    ("rng", _programs.rng_sampling,
     "jax.random normal/uniform/bernoulli from a key argument (threefry)",
     ("rng", "bitwise", "integer")),
    ("dtypes_mixed", _programs.dtypes_mixed,
     "bf16 dot, int32 bit ops, int8 dot into int32, complex64 arithmetic",
     ("bf16", "s32", "s8", "c64", "convert")),
    ("elementwise", _programs.elementwise,
     "transcendental and other elementwise math on 64x64 f32",
     ("elementwise", "transcendental")),
    ("data_movement", _programs.data_movement,
     "pad (edge and interior), concatenate, strided slice, dynamic (update) slice, "
     "transpose, reverse, broadcast",
     ("pad", "concatenate", "slice", "dynamic-slice", "dynamic-update-slice", "transpose")),
    ("fft", _programs.fft,
     "fft, ifft, rfft, irfft and fft2",
     ("fft", "c64")),
    ("reductions", _programs.reductions,
     "sum, max, min, argmax, logsumexp, mean, var, prod, any, norm",
     ("reduce",)),
    ("cumulative", _programs.cumulative,
     "cumsum, cumprod, cummax, cumlogsumexp",
     ("reduce-window", "scan")),
    ("layernorm_softmax", _programs.layernorm_softmax,
     "layernorm followed by softmax (16x64)",
     ("reduce", "elementwise")),
    ("einsum_contractions", _programs.einsum_contractions,
     "batched matmul, chained contraction, outer product, matvec, trace",
     ("dot",)),
    ("linalg", _programs.linalg,
     "cholesky, triangular solve and linear solve (LAPACK custom calls on CPU)",
     ("custom-call", "triangular-solve")),
]


PROGRAMS: dict[str, ZooProgram] = {
    name: ZooProgram(name, description, builder, tags)
    for name, builder, description, tags in _TABLE
}
"""All bundled programs by name, in a fixed order."""

DEFAULT_PROGRAM = "mlp_grad"
"""The program ``scripts/run`` uses when none is given."""


def program_names() -> list[str]:
    """**Returns:** the names of all bundled programs, in registry order."""
    return list(PROGRAMS)


def get_program(name: str) -> ZooProgram:
    """Look up a bundled program.

    **Arguments:** ``name``, a key of :data:`PROGRAMS`.

    **Returns:** the :class:`ZooProgram`. Raises ``ValueError`` listing the
    valid names when ``name`` is unknown.
    """
    try:
        return PROGRAMS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown zoo program {name!r}; valid names: {', '.join(PROGRAMS)}"
        ) from None
