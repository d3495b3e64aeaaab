"""Supplementary measurement kernels: small sizes and the operations the main suite lacks.

The measurement suite (`xla_costmodel.measure.SUITE`) sweeps from 2^14
elements up and covers copies, strided access, elementwise ops, square
matmuls, two convolutions and a scatter, each compiled as a program of one
kernel. Real programs are dominated by much smaller kernels, and a kernel
launched alone costs more (about 0.31 µs here) than the same kernel among
others (about 0.22 µs), so these kernels are

- measured in context: every case is a *chain* of `REPS` instances of the
  kernel, each fed through an `optimization_barrier` together with the
  previous one's result, so that they run one after the other as separate
  kernels (one dataset row each);
- small: sizes from 1 element to 2^15;
- of the kinds the suite lacks: broadcasts, small reductions and
  transposes, small, transposed and batched matmuls (YNNPACK or Eigen),
  small convolutions, sorts, FFTs, cumulative sums (reduce-window),
  integer bit operations, multiplies and divisions, boolean results,
  complex arithmetic, Cholesky and triangular solves, conversions, gathers, scatters, concatenation,
  padding, iota/compare/select, and each transcendental the zoo's programs
  use (`TRANSCENDENTALS`: expm1, log1p, pow, sqrt, rsqrt, cbrt,
  sin, cos, atan2, erf), so that each has its own per-element cost;
- and kernels of the kinds real programs run that the above lack
  (`_program_like_entries`: scans and reductions with transcendental
  reducers, max-pool gradients, fused pools, attention-shaped batched dots,
  causal-masked softmax, top-k, inverse and 2-D FFTs);
- and whole training programs at the sizes of small real models (names
  `p_*`, `kernel_class` `extra-program`, measured as they are, not as
  chains: `_training_program_entries`), architectures that none of the
  held-out programs is: an MLP-Mixer, a convolutional network, a GRU, a
  deep MLP with layer norm, a patch-embedding classifier, an embedding
  classifier, an MLP with batch norm and a convolutional autoencoder, each
  loss with gradient at widths 64 to 512.

Each entry: `(name, kernel_class, sizes, build)` with
`build(size, rng) -> (fn, args)` (`is_chain(name)`: a chain of one kernel). The rows they give are training data
(`kernel_class` `extra-<class>`, `source` `extra`); they are written by
`scripts/measure_programs.py` next to the real-program rows.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["EXTRA_SUITE", "PROGRAM_PREFIX", "REPS", "TRANSCENDENTALS", "extra_cases", "is_chain"]

REPS = 4
#: Elementwise transcendentals measured one by one (`kernel_class` `extra-transcendental`).
TRANSCENDENTALS = ("expm1", "log1p", "pow", "sqrt", "rsqrt", "cbrt", "sin", "cos", "atan2", "erf")
_SIZES = (1, 8, 64, 512, 4096, 32768)
_SMALL = (16, 64, 256, 1024)


def _f32(rng, shape, lo=0.5, hi=2.0):
    import jax.numpy as jnp

    return jnp.asarray(rng.uniform(lo, hi, size=shape), dtype=jnp.float32)


def _chain(op: Callable, inputs: list[tuple]) -> Callable:
    """A function running `op` on each input tuple in turn, each after the previous one finished."""

    def run(*flat):
        import jax

        outs = []
        prev = None
        k = 0
        for args in inputs:
            n = len(args)
            cur = tuple(flat[k:k + n])
            k += n
            if prev is not None:
                prev, cur = jax.lax.optimization_barrier((prev, cur))
            prev = op(*cur)
            outs.append(prev)
        return outs

    flat = tuple(a for args in inputs for a in args)
    return run, flat


def _named(fn, name):
    fn.__name__ = fn.__qualname__ = name
    return fn


def _case(name: str, make_args: Callable, op: Callable):
    def build(size, rng):
        inputs = [make_args(size, rng) for _ in range(REPS)]
        fn, flat = _chain(op, inputs)
        return _named(fn, name), flat

    return build


def _ew(opname):
    import operator

    import jax.numpy as jnp

    import jax

    ops = {"add": operator.add, "mul": operator.mul, "div": operator.truediv, "exp": lambda x, y: jnp.exp(x),
           "tanh": lambda x, y: jnp.tanh(x), "log": lambda x, y: jnp.log(x), "max": jnp.maximum,
           # One kernel per transcendental the zoo's programs use, so that each gets its own
           # per-element cost (atan2 costs ~50x what tanh does on this CPU).
           "expm1": lambda x, y: jnp.expm1(x), "log1p": lambda x, y: jnp.log1p(x), "pow": lambda x, y: x ** y,
           "logistic": lambda x, y: jax.nn.sigmoid(x), "sqrt": lambda x, y: jnp.sqrt(x),
           "rsqrt": lambda x, y: jax.lax.rsqrt(x), "cbrt": lambda x, y: jnp.cbrt(x), "sin": lambda x, y: jnp.sin(x),
           "cos": lambda x, y: jnp.cos(x), "atan2": jnp.arctan2, "erf": lambda x, y: jax.lax.erf(x)}
    return ops[opname]


def _side(n: int) -> int:
    return max(1, int(round(n ** 0.5)))


def _entries() -> list[tuple[str, str, tuple, Callable]]:
    import jax
    import jax.numpy as jnp

    out: list[tuple[str, str, tuple, Callable]] = []
    for opname in ("add", "mul", "div", "exp", "tanh", "log", "max"):
        out.append((f"x_ew_{opname}", "elementwise", _SIZES,
                    _case(f"x_ew_{opname}", lambda n, r: (_f32(r, (n,)), _f32(r, (n,))), _ew(opname))))
    for opname in TRANSCENDENTALS:
        out.append((f"x_ew_{opname}", "transcendental", _SIZES,
                    _case(f"x_ew_{opname}", lambda n, r: (_f32(r, (n,)), _f32(r, (n,))), _ew(opname))))
    out.append(("x_ew_f64_add", "elementwise", _SIZES, _case(
        "x_ew_f64_add", lambda n, r: (jnp.asarray(r.uniform(0.5, 2, n)), jnp.asarray(r.uniform(0.5, 2, n))),
        lambda x, y: x + y)))
    out.append(("x_bcast_add", "broadcast", _SIZES, _case(
        "x_bcast_add", lambda n, r: (_f32(r, (max(n // 16, 1), 16)), _f32(r, (16,))), lambda x, b: x + b[None, :])))
    out.append(("x_bcast_scalar_mul", "broadcast", _SIZES, _case(
        "x_bcast_scalar_mul", lambda n, r: (_f32(r, (n,)), _f32(r, ())), lambda x, a: x * a)))
    out.append(("x_reduce_row", "reduce", _SIZES, _case(
        "x_reduce_row", lambda n, r: (_f32(r, (max(n // 16, 1), 16)),), lambda x: x.sum(axis=1))))
    out.append(("x_reduce_col", "reduce", _SIZES, _case(
        "x_reduce_col", lambda n, r: (_f32(r, (16, max(n // 16, 1))),), lambda x: x.sum(axis=0))))
    out.append(("x_reduce_max", "reduce", _SIZES, _case(
        "x_reduce_max", lambda n, r: (_f32(r, (max(n // 16, 1), 16)),), lambda x: x.max(axis=1))))
    out.append(("x_softmax_row", "reduce", _SIZES, _case(
        "x_softmax_row", lambda n, r: (_f32(r, (max(n // 16, 1), 16)),), lambda x: jax.nn.softmax(x, axis=-1))))
    # Reductions fused with elementwise work: XLA emits these as loops (reduce-window
    # partial sums, then a reduce), not as YNNPACK calls.
    out.append(("x_sumsq_row", "reduce", _SIZES, _case(
        "x_sumsq_row", lambda n, r: (_f32(r, (max(n // 32, 1), 32)),), lambda x: (x * x).sum(axis=1))))
    out.append(("x_var_row", "reduce", _SIZES, _case(
        "x_var_row", lambda n, r: (_f32(r, (max(n // 64, 1), 64)),), lambda x: x.var(axis=1))))
    out.append(("x_argmax_row", "reduce", _SIZES, _case(
        "x_argmax_row", lambda n, r: (_f32(r, (max(n // 16, 1), 16)),), lambda x: jnp.argmax(x, axis=1))))
    out.append(("x_logsumexp_row", "reduce", _SIZES, _case(
        "x_logsumexp_row", lambda n, r: (_f32(r, (max(n // 32, 1), 32)),),
        lambda x: jax.nn.logsumexp(x, axis=1))))
    out.append(("x_transpose", "transpose", _SIZES, _case(
        "x_transpose", lambda n, r: (_f32(r, (_side(n), _side(n) + 1)),), lambda x: x.T)))
    out.append(("x_transpose3", "transpose", _SIZES, _case(
        "x_transpose3", lambda n, r: (_f32(r, (2, max(n // 32, 1), 16)),), lambda x: jnp.transpose(x, (1, 0, 2)))))
    for kind, op in (("nn", lambda a, b: a @ b), ("tn", lambda a, b: a.T @ b), ("nt", lambda a, b: a @ b.T)):
        out.append((f"x_matmul_{kind}", "matmul", (2, 4, 8, 16, 32, 64), _case(
            f"x_matmul_{kind}", lambda m, r: (_f32(r, (m, m), -1, 1), _f32(r, (m, m), -1, 1)), op)))
    out.append(("x_matmul_rect", "matmul", (2, 4, 8, 16, 32, 64), _case(
        "x_matmul_rect", lambda m, r: (_f32(r, (2 * m, m), -1, 1), _f32(r, (m, 4 * m), -1, 1)), lambda a, b: a @ b)))
    out.append(("x_matmul_batched", "matmul", (2, 4, 8, 16, 32), _case(
        "x_matmul_batched", lambda m, r: (_f32(r, (4, m, m), -1, 1), _f32(r, (4, m, m), -1, 1)),
        lambda a, b: jnp.einsum("bij,bjk->bik", a, b))))
    out.append(("x_matvec", "matmul", (4, 16, 64, 256), _case(
        "x_matvec", lambda m, r: (_f32(r, (m, m), -1, 1), _f32(r, (m,), -1, 1)), lambda a, v: a @ v)))

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    for c in (4, 8):
        out.append((f"x_conv3x3_c{c}", "conv", (4, 8, 16), _case(
            f"x_conv3x3_c{c}", lambda s, r, c=c: (_f32(r, (2, s, s, c), -1, 1), _f32(r, (3, 3, c, c), -1, 1)), conv)))
    out.append(("x_conv3x3_c3", "conv", (4, 8, 16), _case(
        "x_conv3x3_c3", lambda s, r: (_f32(r, (2, s, s, 3), -1, 1), _f32(r, (3, 3, 3, 8), -1, 1)), conv)))

    def depthwise(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                            feature_group_count=x.shape[-1])

    for c in (4, 16):
        out.append((f"x_conv_depthwise_c{c}", "conv", (4, 8, 16), _case(
            f"x_conv_depthwise_c{c}", lambda s, r, c=c: (_f32(r, (2, s, s, c), -1, 1), _f32(r, (3, 3, 1, c), -1, 1)),
            depthwise)))
    out.append(("x_sort", "sort", (16, 64, 256, 1024, 4096), _case(
        "x_sort", lambda n, r: (_f32(r, (n,)),), lambda x: jnp.sort(x))))
    out.append(("x_sort_rows", "sort", (16, 64, 256, 1024), _case(
        "x_sort_rows", lambda n, r: (_f32(r, (8, n)),), lambda x: jnp.sort(x, axis=-1))))
    out.append(("x_argsort", "sort", (16, 64, 256, 1024), _case(
        "x_argsort", lambda n, r: (_f32(r, (n,)),), lambda x: jnp.argsort(x))))
    out.append(("x_rfft", "fft", (16, 64, 256, 1024), _case(
        "x_rfft", lambda n, r: (_f32(r, (8, n)),), lambda x: jnp.fft.rfft(x))))
    out.append(("x_fft", "fft", (16, 64, 256, 1024), _case(
        "x_fft", lambda n, r: (_f32(r, (8, n)).astype(jnp.complex64),), lambda x: jnp.fft.fft(x))))
    out.append(("x_cumsum", "reduce-window", (16, 64, 256, 1024), _case(
        "x_cumsum", lambda n, r: (_f32(r, (4, n)),), lambda x: jnp.cumsum(x, axis=-1))))
    out.append(("x_maxpool", "reduce-window", (4, 8, 16, 32), _case(
        "x_maxpool", lambda s, r: (_f32(r, (2, s, s, 8)),),
        lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"))))

    def u32(n, r):
        return (jnp.asarray(r.integers(0, 2**31, size=n).astype(np.uint32)),
                jnp.asarray(r.integers(0, 2**31, size=n).astype(np.uint32)))

    out.append(("x_int_xor_shift", "integer", _SIZES, _case(
        "x_int_xor_shift", u32, lambda a, b: (a ^ b) >> jnp.uint32(3))))
    out.append(("x_int_add", "integer", _SIZES, _case("x_int_add", u32, lambda a, b: a + b)))
    # Operation kinds the kernels above lack but programs use: integer multiply and
    # divide (random bits, index arithmetic), boolean results, complex arithmetic.
    out.append(("x_int_mul", "integer", _SIZES, _case("x_int_mul", u32, lambda a, b: a * b + jnp.uint32(7))))
    out.append(("x_int_div", "integer", _SIZES, _case(
        "x_int_div", u32, lambda a, b: a // (b | jnp.uint32(1)))))
    out.append(("x_compare", "select", _SIZES, _case(
        "x_compare", lambda n, r: (_f32(r, (n,)), _f32(r, (n,))), lambda a, b: a < b)))

    def c64(n, r):
        return (_f32(r, (n,)).astype(jnp.complex64) * (1 + 1j), _f32(r, (n,)).astype(jnp.complex64))

    out.append(("x_complex_mul_add", "complex", _SIZES, _case("x_complex_mul_add", c64, lambda a, b: a * b + a)))

    def spd(m, r):
        a = r.uniform(-1, 1, size=(m, m))
        return (jnp.asarray(a @ a.T + m * np.eye(m), dtype=jnp.float32),)

    out.append(("x_cholesky", "linalg", (4, 8, 16, 32, 64), _case("x_cholesky", spd, jnp.linalg.cholesky)))

    def tri(m, r):
        a = np.tril(r.uniform(0.5, 1, size=(m, m))) + m * np.eye(m)
        return jnp.asarray(a, dtype=jnp.float32), _f32(r, (m, 8))

    out.append(("x_trisolve", "linalg", (4, 8, 16, 32, 64), _case(
        "x_trisolve", tri, lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True))))
    out.append(("x_convert_bf16", "convert", _SIZES, _case(
        "x_convert_bf16", lambda n, r: (_f32(r, (n,)),), lambda x: x.astype(jnp.bfloat16))))
    out.append(("x_convert_s32", "convert", _SIZES, _case(
        "x_convert_s32", lambda n, r: (_f32(r, (n,), 0, 100),), lambda x: x.astype(jnp.int32))))

    def gather_args(n, r):
        return _f32(r, (n,)), jnp.asarray(r.integers(0, n, size=n).astype(np.int32))

    out.append(("x_gather", "gather", _SIZES, _case("x_gather", gather_args,
                                                     lambda x, i: jnp.take(x, i, mode="clip"))))
    out.append(("x_scatter_add", "gather", _SIZES, _case(
        "x_scatter_add", gather_args, lambda x, i: x.at[i].add(1.0, mode="drop"))))
    out.append(("x_concat", "data-movement", _SIZES, _case(
        "x_concat", lambda n, r: (_f32(r, (n,)), _f32(r, (n,))), lambda a, b: jnp.concatenate([a, b]))))
    out.append(("x_pad", "data-movement", _SIZES, _case(
        "x_pad", lambda n, r: (_f32(r, (max(n // 16, 1), 16)),), lambda x: jnp.pad(x, ((1, 1), (2, 2))))))
    out.append(("x_slice", "data-movement", _SIZES, _case(
        "x_slice", lambda n, r: (_f32(r, (2 * n,)),), lambda x: x[1:x.shape[0] // 2 + 1])))
    out.append(("x_dynamic_slice", "data-movement", _SIZES, _case(
        "x_dynamic_slice", lambda n, r: (_f32(r, (2 * n,)), jnp.asarray(np.int32(r.integers(0, n)))),
        lambda x, i: jax.lax.dynamic_slice_in_dim(x, i, x.shape[0] // 2))))
    out.append(("x_mask_select", "select", _SIZES, _case(
        "x_mask_select", lambda n, r: (_f32(r, (max(n // 16, 1), 16)),),
        lambda x: jnp.where(jnp.arange(x.shape[1])[None, :] <= jnp.arange(x.shape[0])[:, None] % 16, x, -1e9))))
    out += _program_like_entries()
    out += _training_program_entries()
    return out


#: Prefix of the whole training programs (measured as they are, not as chains of one kernel).
PROGRAM_PREFIX = "p_"


def is_chain(name: str) -> bool:
    """Whether supplementary case `name` is a chain of one kernel (else a whole training program)."""
    return not name.startswith(PROGRAM_PREFIX)


def _training_program_entries() -> list[tuple[str, str, tuple, Callable]]:
    """Whole programs at the sizes of small real models, as training data (`kernel_class` `extra-program`).

    Real programs' kernels are fusions of many ops on tensors of tens of
    kilobytes to megabytes, read in the layouts the previous kernels wrote;
    the one-kernel chains above cover the kinds, these cover how they come
    together. The architectures differ from the held-out zoo programs and
    the held-out realistic-size transformers: an MLP-Mixer (token mixing
    through transposes), a convolutional network (convolutions, pooling and
    their gradients), a GRU unrolled over a few steps, a deep MLP with
    layer norm and GELU, a patch-embedding classifier, an embedding
    classifier (gather, scatter-add), an MLP with batch norm (reductions over
    the batch) and a convolutional autoencoder (transposed convolution,
    concatenation); each loss with its gradient, at four widths (`size`).
    """
    import jax
    import jax.numpy as jnp
    from jax import lax

    from ..zoo import normal_array as normal
    from ..zoo import softmax_cross_entropy as cross_entropy

    def layernorm(x, g):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * lax.rsqrt(var + 1e-5) * g

    def grad_of(loss):
        return jax.value_and_grad(loss)

    def mixer(width, r):
        b, patches = 4, width // 2
        params = {"g1": jnp.ones((width,)), "t1": normal(r, (patches, 2 * patches), patches ** -0.5),
                  "t2": normal(r, (2 * patches, patches), patches ** -0.5), "g2": jnp.ones((width,)),
                  "c1": normal(r, (width, 2 * width), width ** -0.5), "c2": normal(r, (2 * width, width), width ** -0.5)}
        x = normal(r, (b, patches, width))

        def loss(p, x):
            y = jnp.swapaxes(layernorm(x, p["g1"]), 1, 2)  # token mixing runs along the patches
            x = x + jnp.swapaxes(jax.nn.gelu(y @ p["t1"]) @ p["t2"], 1, 2)
            x = x + jax.nn.gelu(layernorm(x, p["g2"]) @ p["c1"]) @ p["c2"]
            return jnp.mean(x ** 2)

        return _named(grad_of(loss), "p_mixer_grad"), (params, x)

    def convnet(width, r):
        dn = ("NHWC", "HWIO", "NHWC")
        c = width // 8
        params = {"k1": normal(r, (3, 3, 3, c), 0.2), "k2": normal(r, (3, 3, c, 2 * c), 0.1),
                  "w": normal(r, (2 * c * 16, 10), 0.05)}
        x, labels = normal(r, (8, 32, 32, 3)), jnp.asarray(r.integers(0, 10, 8), jnp.int32)

        def loss(p, x, labels):
            h = jax.nn.relu(lax.conv_general_dilated(x, p["k1"], (1, 1), "SAME", dimension_numbers=dn))
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            h = jax.nn.relu(lax.conv_general_dilated(h, p["k2"], (2, 2), "SAME", dimension_numbers=dn))
            h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
            return cross_entropy(h.reshape(h.shape[0], -1) @ p["w"], labels)

        return _named(grad_of(loss), "p_convnet_grad"), (params, x, labels)

    def gru(width, r):
        b, steps = 32, 4
        params = {k: normal(r, (width, width), width ** -0.5) for k in ("wz", "uz", "wr", "ur", "wh", "uh")}
        xs = normal(r, (steps, b, width))

        def loss(p, xs):
            h = jnp.zeros((b, width))
            for t in range(steps):
                z = jax.nn.sigmoid(xs[t] @ p["wz"] + h @ p["uz"])
                rr = jax.nn.sigmoid(xs[t] @ p["wr"] + h @ p["ur"])
                h = (1 - z) * h + z * jnp.tanh(xs[t] @ p["wh"] + (rr * h) @ p["uh"])
            return jnp.mean(h ** 2)

        return _named(grad_of(loss), "p_gru_grad"), (params, xs)

    def deep_mlp(width, r):
        params = [{"w": normal(r, (width, width), width ** -0.5), "g": jnp.ones((width,)), "b": jnp.zeros((width,))}
                  for _ in range(3)]
        x, y = normal(r, (128, width)), normal(r, (128, width))

        def loss(p, x, y):
            for layer in p:
                x = x + jax.nn.gelu(layernorm(x, layer["g"]) @ layer["w"] + layer["b"])
            return jnp.mean((x - y) ** 2)

        return _named(grad_of(loss), "p_deep_mlp_grad"), (params, x, y)

    def vit(width, r):
        # Patch embedding (a reshape and transpose of the image), mean pooling, a classifier.
        b, side, patch = 4, 32, 4
        n = (side // patch) ** 2
        params = {"embed": normal(r, (patch * patch * 3, width), 0.1), "g": jnp.ones((width,)),
                  "w1": normal(r, (width, width), width ** -0.5), "head": normal(r, (width, 10), width ** -0.5)}
        x, labels = normal(r, (b, side, side, 3)), jnp.asarray(r.integers(0, 10, b), jnp.int32)

        def loss(p, x, labels):
            t = x.reshape(b, side // patch, patch, side // patch, patch, 3).transpose(0, 1, 3, 2, 4, 5)
            h = t.reshape(b, n, patch * patch * 3) @ p["embed"]
            h = h + jax.nn.gelu(layernorm(h, p["g"]) @ p["w1"])
            return cross_entropy(h.mean(axis=1) @ p["head"], labels)

        return _named(grad_of(loss), "p_vit_grad"), (params, x, labels)

    def embedding_classifier(width, r):
        # Token embeddings (a gather; its gradient a scatter-add), mean over the sequence, softmax.
        vocab, b, seq = 1000, 16, 32
        params = {"table": normal(r, (vocab, width), 0.1), "w": normal(r, (width, vocab), width ** -0.5)}
        ids, labels = (jnp.asarray(r.integers(0, vocab, shape), jnp.int32) for shape in ((b, seq), (b,)))

        def loss(p, ids, labels):
            h = jnp.tanh(p["table"][ids].mean(axis=1))
            return cross_entropy(h @ p["w"], labels)

        return _named(grad_of(loss), "p_embedding_classifier_grad"), (params, ids, labels)

    def batchnorm_mlp(width, r):
        # Batch normalization: statistics over the batch (reductions over the major dimension).
        params = [{"w": normal(r, (width, width), width ** -0.5), "g": jnp.ones((width,)), "b": jnp.zeros((width,))}
                  for _ in range(2)]
        x, y = normal(r, (256, width)), normal(r, (256, width))

        def loss(p, x, y):
            for layer in p:
                h = x @ layer["w"]
                mean, var = h.mean(axis=0), h.var(axis=0)
                x = jax.nn.relu((h - mean) * lax.rsqrt(var + 1e-5) * layer["g"] + layer["b"])
            return jnp.mean((x - y) ** 2)

        return _named(grad_of(loss), "p_batchnorm_mlp_grad"), (params, x, y)

    def conv_autoencoder(width, r):
        # Strided convolution down, transposed convolution (lhs dilation) up, a skip concatenation.
        dn = ("NHWC", "HWIO", "NHWC")
        c = max(width // 16, 2)
        params = {"down": normal(r, (3, 3, 3, c), 0.2), "up": normal(r, (3, 3, c, c), 0.2),
                  "out": normal(r, (1, 1, c + 3, 3), 0.2)}
        x = normal(r, (4, 32, 32, 3))

        def loss(p, x):
            h = jax.nn.relu(lax.conv_general_dilated(x, p["down"], (2, 2), "SAME", dimension_numbers=dn))
            u = jax.nn.relu(lax.conv_transpose(h, p["up"], (2, 2), "SAME", dimension_numbers=dn))
            y = lax.conv_general_dilated(jnp.concatenate([u, x], axis=-1), p["out"], (1, 1), "SAME",
                                         dimension_numbers=dn)
            return jnp.mean((y - x) ** 2)

        return _named(grad_of(loss), "p_conv_autoencoder_grad"), (params, x)

    widths = (64, 128, 256, 512)
    return [
        ("p_mixer_grad", "program", widths, mixer),
        ("p_convnet_grad", "program", widths, convnet),
        ("p_gru_grad", "program", widths, gru),
        ("p_deep_mlp_grad", "program", widths, deep_mlp),
        ("p_vit_grad", "program", widths, vit),
        ("p_embedding_classifier_grad", "program", widths, embedding_classifier),
        ("p_batchnorm_mlp_grad", "program", widths, batchnorm_mlp),
        ("p_conv_autoencoder_grad", "program", widths, conv_autoencoder),
    ]


def _program_like_entries() -> list[tuple[str, str, tuple, Callable]]:
    """Kernel kinds that real programs run and the cases above lack, at swept sizes.

    Found by where the fitted model went wrong on held-out programs, but each
    case is a generic kernel of its kind, not a copy of a zoo program, and its
    sizes are a sweep: reducers with transcendentals (scalar code: one step
    of a log-sum-exp scan, an exp and a log1p, took about 10 ns here, a
    vectorized exp about 0.4 ns per element), argmax pooling
    and the other kernels of a max-pool gradient (variadic reduce-windows,
    select-and-scatter), pools fused with an activation (YNNPACK), batched
    dots with the batch dimensions in front and the contraction in the
    middle (attention's score and weight-gradient products, run by Eigen),
    causal-masked softmax (iota, compare, select and exp in one loop fusion),
    top-k, inverse and 2-D FFTs.
    """
    import jax
    import jax.numpy as jnp
    from jax import lax

    out: list[tuple[str, str, tuple, Callable]] = []
    rows = (16, 64, 256, 1024)
    out.append(("x_cumlogsumexp", "reduce-window", rows, _case(
        "x_cumlogsumexp", lambda n, r: (_f32(r, (4, n)),), lambda x: lax.cumlogsumexp(x, axis=1))))
    out.append(("x_cummax", "reduce-window", rows, _case(
        "x_cummax", lambda n, r: (_f32(r, (4, n)),), lambda x: lax.cummax(x, axis=1))))
    out.append(("x_reduce_logaddexp", "reduce", _SIZES, _case(
        "x_reduce_logaddexp", lambda n, r: (_f32(r, (max(n // 16, 1), 16)),),
        lambda x: lax.reduce(x, np.float32(-np.inf), jnp.logaddexp, (1,)))))

    def maxpool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    pool_sides = (4, 8, 12, 24)
    out.append(("x_maxpool_grad", "reduce-window", pool_sides, _case(
        "x_maxpool_grad", lambda s, r: (_f32(r, (2, s, s, 4), -1, 1),),
        jax.grad(lambda x: jnp.sum(maxpool(x) ** 2)))))
    out.append(("x_relu_maxpool", "reduce-window", pool_sides, _case(
        "x_relu_maxpool", lambda s, r: (_f32(r, (2, s, s, 4), -1, 1),), lambda x: maxpool(jax.nn.relu(x)))))
    out.append(("x_avgpool", "reduce-window", pool_sides, _case(
        "x_avgpool", lambda s, r: (_f32(r, (2, s, s, 4), -1, 1),),
        lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0)))

    def heads(t, r, d=8):
        return _f32(r, (2, t, 2, d), -1, 1), _f32(r, (2, t, 2, d), -1, 1)

    seq = (4, 8, 24, 48)
    out.append(("x_attn_scores", "matmul", seq, _case(
        "x_attn_scores", heads, lambda q, k: jnp.einsum("bthd,bshd->bhts", q, k))))
    out.append(("x_attn_values", "matmul", seq, _case(
        "x_attn_values", lambda t, r: (_f32(r, (2, 2, t, t), -1, 1), _f32(r, (2, t, 2, 8), -1, 1)),
        lambda w, v: jnp.einsum("bhts,bshd->bthd", w, v))))
    out.append(("x_attn_weight_grad", "matmul", seq, _case(
        "x_attn_weight_grad", lambda t, r: (_f32(r, (2, 2, t, t), -1, 1), _f32(r, (2, t, 2, 8), -1, 1)),
        lambda g, v: jnp.einsum("bhts,bthd->bshd", g, v))))

    def causal_softmax(x):
        t = x.shape[-1]
        keep = lax.broadcasted_iota(jnp.int32, (t, t), 0) >= lax.broadcasted_iota(jnp.int32, (t, t), 1)
        return jax.nn.softmax(jnp.where(keep, x * 0.25, jnp.finfo(x.dtype).min), axis=-1)

    out.append(("x_causal_softmax", "reduce", seq, _case(
        "x_causal_softmax", lambda t, r: (_f32(r, (2, 2, t, t), -1, 1),), causal_softmax)))
    out.append(("x_top_k", "sort", (16, 64, 256, 1024), _case(
        "x_top_k", lambda n, r: (_f32(r, (4, n)),), lambda x: lax.top_k(x, 4))))
    out.append(("x_irfft", "fft", (16, 64, 256), _case(
        "x_irfft", lambda n, r: (_f32(r, (4, n // 2 + 1)).astype(jnp.complex64),),
        lambda z: jnp.fft.irfft(z, n=z.shape[-1] * 2 - 2))))
    out.append(("x_fft2", "fft", (4, 8, 16, 32), _case(
        "x_fft2", lambda n, r: (_f32(r, (2, n, n)).astype(jnp.complex64),), jnp.fft.fft2)))
    return out


class _Lazy:
    _cache: list | None = None

    def get(self) -> list:
        if self._cache is None:
            self._cache = _entries()
        return self._cache


_LAZY = _Lazy()


def extra_cases(only: str | list[str] | None = None) -> list[tuple[str, str, int, Callable]]:
    """`(name, kernel_class, size, build)` for every supplementary case (`only`: glob patterns of names)."""
    import fnmatch

    pats = [only] if isinstance(only, str) else list(only or [])
    cases = []
    for name, cls, sizes, build in _LAZY.get():
        if pats and not any(fnmatch.fnmatchcase(name, p) for p in pats):
            continue
        for s in sizes:
            cases.append((name, cls, int(s), build))
    return cases


def EXTRA_SUITE() -> list[str]:  # noqa: N802 - reads like the suite's constant
    """Names of the supplementary kernels."""
    return [e[0] for e in _LAZY.get()]

