"""jax's own libraries: jax.scipy, jax.numpy.linalg / fft, jax.nn, jax.random, jax.ops."""

from __future__ import annotations

from ._inputs import integers, normal, seed_of, uniform
from ._registry import corpus_program

_SOURCE = "jax"


def _spd(seed: int, n: int):
    import jax.numpy as jnp

    a = normal(seed, (n, n), scale=1.0 / n**0.5)
    return (a + a.T) / 2**0.5 + 3.0 * jnp.eye(n, dtype=a.dtype)


@corpus_program("jax_scipy_expm", source=_SOURCE, sizes={"small": dict(n=32), "medium": dict(n=256),
                                                         "large": dict(n=512)},
                description="jax.scipy.linalg.expm (Pade approximant with scaling and squaring)")
def jax_scipy_expm(n):
    import jax.scipy.linalg as jsl

    def jax_scipy_expm(a):
        return jsl.expm(a)

    return jax_scipy_expm, (normal(seed_of("jax_scipy_expm"), (n, n), scale=1.0 / n**0.5),)


@corpus_program("jax_linalg_solve", source=_SOURCE, sizes={"small": dict(n=64, rhs=8), "large": dict(n=1024, rhs=64)},
                description="jax.numpy.linalg.solve (LU with partial pivoting, LAPACK on the CPU)")
def jax_linalg_solve(n, rhs):
    import jax.numpy as jnp

    def jax_linalg_solve(a, b):
        return jnp.linalg.solve(a, b)

    seed = seed_of("jax_linalg_solve")
    return jax_linalg_solve, (normal(seed, (n, n)), normal(seed + 1, (n, rhs)))


@corpus_program("jax_linalg_eigh", source=_SOURCE, sizes={"small": dict(n=32), "large": dict(n=512)},
                description="jax.numpy.linalg.eigh of a symmetric matrix")
def jax_linalg_eigh(n):
    import jax.numpy as jnp

    def jax_linalg_eigh(a):
        return jnp.linalg.eigh(a)

    return jax_linalg_eigh, (_spd(seed_of("jax_linalg_eigh"), n),)


@corpus_program("jax_linalg_svd", source=_SOURCE, sizes={"small": dict(m=48, n=32), "large": dict(m=768, n=512)},
                description="jax.numpy.linalg.svd, thin")
def jax_linalg_svd(m, n):
    import jax.numpy as jnp

    def jax_linalg_svd(a):
        return jnp.linalg.svd(a, full_matrices=False)

    return jax_linalg_svd, (normal(seed_of("jax_linalg_svd"), (m, n)),)


@corpus_program("jax_scipy_cho_solve", source=_SOURCE,
                sizes={"small": dict(n=64, rhs=4), "large": dict(n=2048, rhs=32)},
                description="jax.scipy.linalg.cho_factor then cho_solve, and the log-determinant from the factor")
def jax_scipy_cho_solve(n, rhs):
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    def jax_scipy_cho_solve(a, b):
        c = jsl.cho_factor(a, lower=True)
        return jsl.cho_solve(c, b), 2.0 * jnp.sum(jnp.log(jnp.diagonal(c[0])))

    seed = seed_of("jax_scipy_cho_solve")
    return jax_scipy_cho_solve, (_spd(seed, n), normal(seed + 1, (n, rhs)))


_ATTN_SIZES = {"small": dict(batch=2, seq=64, heads=4, head_dim=32),
               "medium": dict(batch=4, seq=256, heads=8, head_dim=32),
               "large": dict(batch=4, seq=384, heads=8, head_dim=64)}


@corpus_program("jax_nn_attention_fwd", source=_SOURCE, sizes=_ATTN_SIZES,
                description="jax.nn.dot_product_attention with a causal mask, forward")
def jax_nn_attention_fwd(batch, seq, heads, head_dim):
    import jax

    def jax_nn_attention_fwd(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True)

    seed = seed_of("jax_nn_attention_fwd")
    shape = (batch, seq, heads, head_dim)
    return jax_nn_attention_fwd, tuple(normal(seed + i, shape) for i in range(3))


@corpus_program("jax_nn_attention_grad", source=_SOURCE, sizes=_ATTN_SIZES,
                description="jax.nn.dot_product_attention with a causal mask, loss and gradient w.r.t. q, k, v")
def jax_nn_attention_grad(batch, seq, heads, head_dim):
    import jax
    import jax.numpy as jnp

    def jax_nn_attention_grad(q, k, v):
        def loss(q, k, v):
            return jnp.mean(jnp.square(jax.nn.dot_product_attention(q, k, v, is_causal=True)))

        return jax.value_and_grad(loss, argnums=(0, 1, 2))(q, k, v)

    seed = seed_of("jax_nn_attention_grad")
    shape = (batch, seq, heads, head_dim)
    return jax_nn_attention_grad, tuple(normal(seed + i, shape) for i in range(3))


@corpus_program("jax_nn_activations_grad", source=_SOURCE,
                sizes={"small": dict(rows=64, width=256), "large": dict(rows=2048, width=2048)},
                description="jax.nn.gelu, silu, softplus, log_sigmoid and standardize, summed; loss and gradient")
def jax_nn_activations_grad(rows, width):
    import jax
    import jax.numpy as jnp

    def jax_nn_activations_grad(x):
        def loss(x):
            y = jax.nn.gelu(x) + jax.nn.silu(x) * jax.nn.softplus(x) - jax.nn.log_sigmoid(x)
            return jnp.mean(jax.nn.standardize(y, axis=-1) ** 2)

        return jax.value_and_grad(loss)(x)

    return jax_nn_activations_grad, (normal(seed_of("jax_nn_activations_grad"), (rows, width)),)


@corpus_program("jax_random_sampling", source=_SOURCE,
                sizes={"small": dict(n=4096, classes=16), "large": dict(n=1 << 18, classes=64)},
                description="jax.random: normal, categorical, permutation and bernoulli from one key")
def jax_random_sampling(n, classes):
    import jax

    def jax_random_sampling(key, logits):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        return (jax.random.normal(k1, (n,)), jax.random.categorical(k2, logits, shape=(n // classes,)),
                jax.random.permutation(k3, n), jax.random.bernoulli(k4, 0.3, (n,)))

    return jax_random_sampling, (jax.random.key(seed_of("jax_random_sampling")),
                                 normal(seed_of("jax_random_sampling"), (classes,)))


@corpus_program("jax_scipy_convolve2d", source=_SOURCE,
                sizes={"small": dict(side=64, k=5), "large": dict(side=1024, k=9)},
                description="jax.scipy.signal.convolve2d, mode 'same'")
def jax_scipy_convolve2d(side, k):
    import jax.scipy.signal as jss

    def jax_scipy_convolve2d(image, kernel):
        return jss.convolve2d(image, kernel, mode="same")

    seed = seed_of("jax_scipy_convolve2d")
    return jax_scipy_convolve2d, (normal(seed, (side, side)), normal(seed + 1, (k, k)))


@corpus_program("jax_scipy_special", source=_SOURCE,
                sizes={"small": dict(rows=64, cols=256), "large": dict(rows=2048, cols=2048)},
                description="jax.scipy.special: gammaln, digamma, erf, xlogy and logsumexp over rows")
def jax_scipy_special(rows, cols):
    import jax.scipy.special as sp

    def jax_scipy_special(x):
        y = sp.gammaln(x) + sp.digamma(x) + sp.erf(x - 2.0) + sp.xlogy(x, x)
        return sp.logsumexp(y, axis=-1)

    return jax_scipy_special, (uniform(seed_of("jax_scipy_special"), (rows, cols), 0.1, 5.0),)


@corpus_program("jax_numpy_sort_topk", source=_SOURCE,
                sizes={"small": dict(rows=32, cols=512, k=8), "large": dict(rows=256, cols=2048, k=32)},
                description="jax.numpy.sort, argsort and jax.lax.top_k along rows")
def jax_numpy_sort_topk(rows, cols, k):
    import jax
    import jax.numpy as jnp

    def jax_numpy_sort_topk(x):
        return jnp.sort(x, axis=-1), jnp.argsort(x[:, : cols // 2], axis=-1), jax.lax.top_k(x, k)

    return jax_numpy_sort_topk, (normal(seed_of("jax_numpy_sort_topk"), (rows, cols)),)


@corpus_program("jax_numpy_fft2", source=_SOURCE,
                sizes={"small": dict(batch=4, side=64), "large": dict(batch=8, side=512)},
                description="jax.numpy.fft.rfft2, a spectral filter, then irfft2")
def jax_numpy_fft2(batch, side):
    import jax.numpy as jnp

    def jax_numpy_fft2(x, h):
        return jnp.fft.irfft2(jnp.fft.rfft2(x) * h, s=x.shape[-2:])

    seed = seed_of("jax_numpy_fft2")
    return jax_numpy_fft2, (normal(seed, (batch, side, side)), uniform(seed + 1, (side, side // 2 + 1)))


@corpus_program("jax_lax_top_k", source=_SOURCE,
                sizes={"small": dict(rows=64, cols=16384, k=8), "large": dict(rows=512, cols=32768, k=16)},
                description="jax.lax.top_k of a few values along long rows (XLA:GPU's own TopK kernel)")
def jax_lax_top_k(rows, cols, k):
    import jax

    def jax_lax_top_k(x):
        return jax.lax.top_k(x, k)

    return jax_lax_top_k, (normal(seed_of("jax_lax_top_k"), (rows, cols)),)


@corpus_program("jax_numpy_fft_long", source=_SOURCE,
                sizes={"small": dict(batch=16, n=4096), "large": dict(batch=64, n=1 << 16)},
                description="jax.numpy.fft.fft and ifft of long complex rows (cuFFT beyond one kernel)")
def jax_numpy_fft_long(batch, n):
    import jax.numpy as jnp

    def jax_numpy_fft_long(re, im):
        return jnp.fft.ifft(jnp.fft.fft(re + 1j * im) * 0.5)

    seed = seed_of("jax_numpy_fft_long")
    return jax_numpy_fft_long, (normal(seed, (batch, n)), normal(seed + 1, (batch, n)))


@corpus_program("jax_scipy_map_coordinates", source=_SOURCE,
                sizes={"small": dict(side=64, points=4096), "large": dict(side=1024, points=1 << 20)},
                description="jax.scipy.ndimage.map_coordinates, linear interpolation at random points")
def jax_scipy_map_coordinates(side, points):
    import jax.scipy.ndimage as ndi

    def jax_scipy_map_coordinates(image, coords):
        return ndi.map_coordinates(image, [coords[0], coords[1]], order=1, mode="nearest")

    seed = seed_of("jax_scipy_map_coordinates")
    return jax_scipy_map_coordinates, (normal(seed, (side, side)), uniform(seed + 1, (2, points), 0.0, side - 1.0))


@corpus_program("jax_ops_segment_sum", source=_SOURCE,
                sizes={"small": dict(n=4096, width=16, segments=128), "large": dict(n=1 << 18, width=64,
                                                                                   segments=4096)},
                description="jax.ops.segment_sum and segment_max of rows into unsorted segments")
def jax_ops_segment_sum(n, width, segments):
    import jax

    def jax_ops_segment_sum(data, ids):
        return (jax.ops.segment_sum(data, ids, num_segments=segments),
                jax.ops.segment_max(data, ids, num_segments=segments))

    seed = seed_of("jax_ops_segment_sum")
    return jax_ops_segment_sum, (normal(seed, (n, width)), integers(seed + 1, (n,), segments))
