"""Cost rules of matrix and signal work (dot, convolution, FFT, triangular solve, Cholesky),
sorting and random numbers, with XLA's `HloCostAnalysis` semantics (see `_rules`)."""

from __future__ import annotations

from ._records import BYTES, FLOPS, FMA_FLOPS, OPB, OUT, TRANS
from ._library import cholesky_flops, convolution_flops, triangular_solve_flops
from ._rules import _attr_tuple, cost_rule, elements
from ._shapes import elements_recursive


# ---------------------------------------------------------------------------
# Linear algebra


def dot_flops(lhs_shape, out_shape, lhs_contracting) -> int:
    """`HloCostAnalysis::GetDotFlops`: 2 x output elements x the contracted size."""
    width = 1
    for d in lhs_contracting:
        width *= lhs_shape.dims[d]
    return FMA_FLOPS * elements(out_shape) * width


@cost_rule("dot", "scaled-dot")
def dot_rule(an, instr, p):
    """2 x output elements x product of the lhs contracting dimensions (batch dimensions are in the output)."""
    p[FLOPS] = float(dot_flops(instr.operands[0].shape, instr.shape, _attr_tuple(instr, "lhs_contracting_dims")))


@cost_rule("ragged-dot")
def ragged_dot_rule(an, instr, p):
    """As a dot, with XLA's removal of the group dimension(s) from the output shape."""
    from ..hlo import Shape

    out = instr.shape
    for i in range(len(_attr_tuple(instr, "rhs_group_dims"))):
        dims = out.dims[:i] + out.dims[i + 1 :]
        out = Shape.array(out.element_type, dims)
    p[FLOPS] = float(dot_flops(instr.operands[0].shape, out, _attr_tuple(instr, "lhs_contracting_dims")))


@cost_rule("convolution")
def convolution_rule(an, instr, p):
    """2 x (in_features / feature_groups) x out_features x (batch / batch_groups) x valid spatial pairs."""
    p[FLOPS] = float(
        convolution_flops(instr, instr.operands[0].shape, instr.operands[1].shape, instr.shape)
    )


@cost_rule("fft")
def fft_rule(an, instr, p):
    """2 x 4 (FMAs per complex multiply) x product of log2(fft_length) x input elements."""
    src = instr.operands[0].shape
    if src.element_type == "tuple":
        src = src.tuple_shapes[0]
    logs = 1
    for n in _attr_tuple(instr, "fft_length"):
        logs *= (int(n).bit_length() - 1) if n > 0 else -1
    p[FLOPS] = float(FMA_FLOPS * 4 * logs * elements(src))


@cost_rule("triangular-solve")
def triangular_solve_rule(an, instr, p):
    """Half of the triangle is read; flops = 2 x n x elements(b)."""
    a, b = instr.operands[0].shape, instr.operands[1].shape
    out = float(an.size(instr.shape))
    a_size = float(an.size(a))
    b_size = float(an.size(b))
    p[OUT] = out
    # XLA writes operand 0's slot twice; the second (b's size) wins.
    p[OPB][0] = b_size
    p[BYTES] = out + a_size / 2.0 + b_size
    p[FLOPS] = triangular_solve_flops(a, b)


@cost_rule("cholesky")
def cholesky_rule(an, instr, p):
    """Half of the input is read and half of the output written; flops = n x elements / 3."""
    a = instr.operands[0].shape
    half = an.size(a) / 2.0
    p[BYTES] = 2 * half
    p[OUT] = half
    p[OPB][0] = half
    p[FLOPS] = cholesky_flops(a)


# ---------------------------------------------------------------------------
# Sorting, random numbers


def _log2_ceiling(n: int) -> int:
    return -1 if n <= 0 else (n - 1).bit_length()


@cost_rule("sort")
def sort_rule(an, instr, p):
    """n x ceil(log2 n) comparisons over operand 0 (a comparison sort), counted as flops."""
    n = elements(instr.operands[0].shape)
    p[FLOPS] = float(n * _log2_ceiling(n))


@cost_rule("rng")
def rng_rule(an, instr, p):
    """One transcendental per generated element."""
    p[TRANS] = float(elements(instr.shape))


@cost_rule("rng-bit-generator")
def rng_bit_generator_rule(an, instr, p):
    """One transcendental per element of every output leaf (state included)."""
    p[TRANS] = float(elements_recursive(instr.shape))


