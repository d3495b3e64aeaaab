"""The bundled JAX programs behind :mod:`xla_costmodel.zoo`.

Every builder here returns ``(fn, args)``: a plain Python function and a tuple
of concrete example arguments (pytrees of small ``jax.Array``s) such that
``jax.jit(fn).lower(*args)`` works. Arguments come from a NumPy generator
seeded per program, so every build gives bit-identical inputs and therefore
bit-identical HLO text (the fixtures depend on that).

The programs are chosen to cover the HLO opcodes and structures a cost model
meets in practice (dots, convolutions, reduce-window, select-and-scatter,
while/conditional/call, gather/scatter, sort, RNG bit twiddling, FFT, mixed
dtypes, data movement), not to be meaningful models: tensors are tiny so
each program compiles in well under a couple of seconds on a CPU.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

Built = tuple[Callable[..., Any], tuple[Any, ...]]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def normal_array(rng: np.random.Generator, shape, scale: float = 1.0, dtype=jnp.float32):
    """Standard normal draws from `rng`, times `scale`, as a JAX array of `dtype`: the programs' inputs."""
    return jnp.asarray(rng.standard_normal(shape) * scale, dtype=dtype)


def _dense_init(rng: np.random.Generator, fan_in: int, fan_out: int) -> dict[str, jax.Array]:
    return {
        "w": normal_array(rng, (fan_in, fan_out), 1.0 / math.sqrt(fan_in)),
        "b": jnp.zeros((fan_out,), jnp.float32),
    }


# --------------------------------------------------------------------------- MLP

_MLP_SIZES = (32, 64, 64, 10)
_MLP_BATCH = 16


def _mlp_params(rng: np.random.Generator, sizes=_MLP_SIZES) -> list[dict[str, jax.Array]]:
    return [_dense_init(rng, a, b) for a, b in zip(sizes[:-1], sizes[1:])]


def _mlp_apply(params, x):
    for i, layer in enumerate(params):
        x = x @ layer["w"] + layer["b"]
        if i + 1 < len(params):
            x = jax.nn.relu(x)
    return x


def softmax_cross_entropy(logits, labels):
    """The mean softmax cross-entropy of `logits` (batch, classes) at integer `labels` (batch,)."""
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))


def mlp_fwd() -> Built:
    rng = _rng(1)
    params = _mlp_params(rng)
    x = normal_array(rng, (_MLP_BATCH, _MLP_SIZES[0]))

    def mlp_forward(params, x):
        return jax.nn.softmax(_mlp_apply(params, x), axis=-1)

    return mlp_forward, (params, x)


def mlp_grad() -> Built:
    rng = _rng(2)
    params = _mlp_params(rng)
    x = normal_array(rng, (_MLP_BATCH, _MLP_SIZES[0]))
    labels = jnp.asarray(rng.integers(0, _MLP_SIZES[-1], (_MLP_BATCH,)), jnp.int32)

    def loss(params, x, labels):
        return softmax_cross_entropy(_mlp_apply(params, x), labels)

    def mlp_loss_and_grad(params, x, labels):
        return jax.value_and_grad(loss)(params, x, labels)

    return mlp_loss_and_grad, (params, x, labels)


# ------------------------------------------------------------------- transformer


def _layernorm(x, scale, bias, eps: float = 1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * scale + bias


def _rmsnorm(x, scale, eps: float = 1e-6):
    return x * lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps) * scale


def _block_params(rng: np.random.Generator, d_model: int, d_ff: int) -> dict[str, jax.Array]:
    s = 1.0 / math.sqrt(d_model)
    return {
        "norm1": jnp.ones((d_model,), jnp.float32),
        "wq": normal_array(rng, (d_model, d_model), s),
        "wk": normal_array(rng, (d_model, d_model), s),
        "wv": normal_array(rng, (d_model, d_model), s),
        "wo": normal_array(rng, (d_model, d_model), s),
        "norm2": jnp.ones((d_model,), jnp.float32),
        "w1": normal_array(rng, (d_model, d_ff), s),
        "w2": normal_array(rng, (d_ff, d_model), 1.0 / math.sqrt(d_ff)),
    }


def _attention(x, p, num_heads: int, causal: bool = True):
    b, t, d = x.shape
    dh = d // num_heads

    def heads(w):
        return (x @ w).reshape(b, t, num_heads, dh)

    q, k, v = heads(p["wq"]), heads(p["wk"]), heads(p["wv"])
    logits = jnp.einsum("bthd,bshd->bhts", q, k) / math.sqrt(dh)
    if causal:
        mask = jnp.tril(jnp.ones((t, t), jnp.bool_))
        logits = jnp.where(mask, logits, jnp.finfo(logits.dtype).min)
    weights = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhts,bshd->bthd", weights, v).reshape(b, t, d)
    return out @ p["wo"]


def _block(x, p, num_heads: int):
    # Pre-norm block without biases (GPT-NeoX/LLaMA style: RMSNorm, causal
    # MHA, GELU MLP). Mean-centred LayerNorm with biases was tried first: XLA's
    # CPU fusion then re-computes the whole residual chain inside every
    # consumer fusion of the backward pass, so the optimized module grows
    # quadratically with depth (8 layers: 2.9 MB instead of 0.67 MB, 16: 9.8 MB).
    x = x + _attention(_rmsnorm(x, p["norm1"]), p, num_heads)
    h = jax.nn.gelu(_rmsnorm(x, p["norm2"]) @ p["w1"]) @ p["w2"]
    return x + h


def _transformer_args(seed, num_layers, d_model, num_heads, d_ff, seq_len, batch):
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    if d_model % num_heads:
        raise ValueError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
    rng = _rng(seed)
    layers = [_block_params(rng, d_model, d_ff) for _ in range(num_layers)]
    x = normal_array(rng, (batch, seq_len, d_model))
    y = normal_array(rng, (batch, seq_len, d_model))
    return layers, x, y


def transformer_fwd(
    num_layers: int = 1,
    d_model: int = 32,
    num_heads: int = 4,
    d_ff: int = 64,
    seq_len: int = 16,
    batch: int = 2,
) -> Built:
    """Forward pass of ``num_layers`` pre-norm transformer blocks.

    Each block is RMSNorm → causal multi-head attention → residual, then
    RMSNorm → GELU MLP → residual, without biases.

    **Arguments:** sizes of the stack; the defaults are the bundled fixture.

    **Returns:** ``(fn, (layers, x))`` with ``fn(layers, x) -> activations``.
    """
    layers, x, _ = _transformer_args(3, num_layers, d_model, num_heads, d_ff, seq_len, batch)

    def transformer_forward(layers, x):
        for p in layers:
            x = _block(x, p, num_heads)
        return x

    return transformer_forward, (layers, x)


def transformer_grad(
    num_layers: int = 2,
    d_model: int = 32,
    num_heads: int = 4,
    d_ff: int = 64,
    seq_len: int = 16,
    batch: int = 2,
) -> Built:
    """Loss and gradient of a stack of transformer blocks w.r.t. all their parameters.

    Blocks as in :func:`transformer_fwd`, followed by a final RMSNorm and a
    mean-squared-error loss against a fixed target. Blocks are applied in a
    Python loop (not ``lax.scan``), so the HLO module grows linearly with
    ``num_layers``; that is what the large-module benchmarks rely on.

    With ``num_layers=48`` and the default sizes (jax 0.10.2, CPU) the
    unoptimized HLO (``lower(...).as_text(dialect="hlo")``) has 11,545
    instructions (0.89 MB) and the optimized text (``compile().as_text()``) is
    3.83 MB with 27k instructions; lowering takes about 2 s and compiling
    about 5 s on a 2-core AMD EPYC. Each layer adds about 240 unoptimized
    instructions and 80 kB of optimized text.

    **Arguments:** ``num_layers`` blocks of width ``d_model`` with ``num_heads``
    heads, MLP width ``d_ff``, on a ``(batch, seq_len, d_model)`` input.

    **Returns:** ``(fn, (layers, x, y))`` with ``fn(layers, x, y) -> (loss, grads)``.
    """
    layers, x, y = _transformer_args(4, num_layers, d_model, num_heads, d_ff, seq_len, batch)
    final_scale = jnp.ones((d_model,), jnp.float32)

    def loss(layers, x, y):
        for p in layers:
            x = _block(x, p, num_heads)
        return jnp.mean(jnp.square(_rmsnorm(x, final_scale) - y))

    # The name shows up in every instruction's op_name metadata of the compiled
    # module, so it is part of what sets the optimized text size.
    def loss_and_grad(layers, x, y):
        return jax.value_and_grad(loss)(layers, x, y)

    return loss_and_grad, (layers, x, y)


# ------------------------------------------------------------------------- CNN


def _cnn_params(rng):
    return {
        "conv1": normal_array(rng, (3, 3, 3, 8), 1.0 / math.sqrt(27)),  # HWIO
        "conv2": normal_array(rng, (3, 3, 8, 16), 1.0 / math.sqrt(72)),
        "dw": normal_array(rng, (3, 3, 1, 16), 1.0 / 3.0),  # depthwise, feature_group_count=16
        "dense": _dense_init(rng, 4 * 4 * 16, 10),
    }


def _cnn_apply(params, x):
    dn = ("NHWC", "HWIO", "NHWC")
    x = lax.conv_general_dilated(x, params["conv1"], (1, 1), "SAME", dimension_numbers=dn)
    x = jax.nn.relu(x)
    x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")  # max pool
    x = lax.conv_general_dilated(x, params["conv2"], (1, 1), "SAME", dimension_numbers=dn)
    x = jax.nn.relu(x)
    x = lax.conv_general_dilated(
        x, params["dw"], (1, 1), "SAME", dimension_numbers=dn, feature_group_count=16
    )
    x = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0  # avg pool
    x = x.reshape(x.shape[0], -1)
    return x @ params["dense"]["w"] + params["dense"]["b"]


def cnn_pool() -> Built:
    rng = _rng(5)
    params = _cnn_params(rng)
    x = normal_array(rng, (2, 16, 16, 3))

    def cnn_forward(params, x):
        return _cnn_apply(params, x)

    return cnn_forward, (params, x)


def cnn_grad() -> Built:
    rng = _rng(6)
    params = _cnn_params(rng)
    x = normal_array(rng, (2, 16, 16, 3))
    labels = jnp.asarray(rng.integers(0, 10, (2,)), jnp.int32)

    def cnn_loss_and_grad(params, x, labels):
        return jax.value_and_grad(lambda p: softmax_cross_entropy(_cnn_apply(p, x), labels))(params)

    return cnn_loss_and_grad, (params, x, labels)


# ------------------------------------------------------------------- attention


def masked_attention() -> Built:
    rng = _rng(7)
    b, h, t, d = 2, 4, 16, 8
    q, k, v = (normal_array(rng, (b, h, t, d)) for _ in range(3))
    lengths = jnp.asarray([t, t // 2], jnp.int32)  # per-example key padding

    def causal_attention(q, k, v, lengths):
        logits = jnp.einsum("bhqd,bhkd->bhqk", q, k) * (1.0 / math.sqrt(d))
        causal = lax.broadcasted_iota(jnp.int32, (t, t), 0) >= lax.broadcasted_iota(
            jnp.int32, (t, t), 1
        )
        valid = jnp.arange(t)[None, :] < lengths[:, None]  # (b, k)
        mask = causal[None, None] & valid[:, None, None, :]
        logits = jnp.where(mask, logits, -1e30)
        weights = jax.nn.softmax(logits, axis=-1)
        return jnp.einsum("bhqk,bhkd->bhqd", weights, v)

    return causal_attention, (q, k, v, lengths)


# ----------------------------------------------------------------- control flow


def scan_rnn() -> Built:
    rng = _rng(8)
    steps, batch, d_in, d_h = 12, 4, 8, 16
    params = {
        "wx": normal_array(rng, (d_in, d_h), 1.0 / math.sqrt(d_in)),
        "wh": normal_array(rng, (d_h, d_h), 1.0 / math.sqrt(d_h)),
        "b": jnp.zeros((d_h,), jnp.float32),
    }
    xs = normal_array(rng, (steps, batch, d_in))
    h0 = jnp.zeros((batch, d_h), jnp.float32)

    def rnn(params, xs, h0):
        def step(h, x):
            h = jnp.tanh(x @ params["wx"] + h @ params["wh"] + params["b"])
            return h, jnp.sum(h, axis=-1)

        h, ys = lax.scan(step, h0, xs)
        return h, ys

    return rnn, (params, xs, h0)


def while_loop() -> Built:
    rng = _rng(9)
    a = rng.standard_normal((8, 8))
    a = jnp.asarray(a @ a.T / 8 + np.eye(8), jnp.float32)  # well-conditioned SPD
    x0 = normal_array(rng, (8,))
    n = jnp.asarray(5, jnp.int32)

    def power_iteration(a, x0, n):
        # while_loop: iterate until the eigenvector estimate settles (data-dependent trip count).
        def cond(state):
            i, _, delta = state
            return (i < 100) & (delta > 1e-4)

        def body(state):
            i, x, _ = state
            y = a @ x
            y = y / jnp.linalg.norm(y)
            return i + 1, y, jnp.max(jnp.abs(y - x))

        init = (jnp.int32(0), x0 / jnp.linalg.norm(x0), jnp.float32(1.0))
        iters, x, _ = lax.while_loop(cond, body, init)
        # fori_loop with a trip count that is a runtime value: lowers to a while too.
        y = lax.fori_loop(0, n, lambda i, y: 0.5 * (y + a @ y) / (1.0 + i.astype(jnp.float32)), x)
        return iters, x, y

    return power_iteration, (a, x0, n)


def cond_switch() -> Built:
    rng = _rng(10)
    x = normal_array(rng, (8, 8))
    pred = jnp.asarray(True)
    index = jnp.asarray(2, jnp.int32)

    def branches(x, pred, index):
        y = lax.cond(pred, lambda v: v @ v, lambda v: jnp.tanh(v), x)
        z = lax.switch(
            index,
            [
                lambda v: v + 1.0,
                lambda v: jnp.exp(v),
                lambda v: v.T @ v,
                lambda v: jnp.sort(v, axis=0),
            ],
            y,
        )
        return z

    return branches, (x, pred, index)


# ------------------------------------------------------------ indexing and sort


def gather_scatter() -> Built:
    rng = _rng(11)
    table = normal_array(rng, (32, 8))
    idx = jnp.asarray(rng.integers(0, 32, (12,)), jnp.int32)
    seg = jnp.asarray(np.sort(rng.integers(0, 5, (12,))), jnp.int32)
    vals = normal_array(rng, (12, 8))

    def gather_scatter_ops(table, idx, seg, vals):
        rows = jnp.take(table, idx, axis=0)  # gather
        picked = jnp.take_along_axis(table[:12], (idx % 8)[:, None], axis=1)  # gather, 1 per row
        updated = table.at[idx].add(vals * rows)  # scatter-add
        clobbered = table.at[idx, 0].set(picked[:, 0])  # scatter (overwrite)
        seg_sum = jax.ops.segment_sum(vals, seg, num_segments=5)
        seg_max = jax.ops.segment_max(vals, seg, num_segments=5)
        return updated, clobbered, seg_sum, seg_max

    return gather_scatter_ops, (table, idx, seg, vals)


def sort_topk() -> Built:
    rng = _rng(12)
    x = normal_array(rng, (8, 64))
    keys = jnp.asarray(rng.integers(0, 10, (64,)), jnp.int32)

    def sorting(x, keys):
        s = jnp.sort(x, axis=-1)
        order = jnp.argsort(x, axis=-1)
        top_vals, top_idx = lax.top_k(x, 5)
        # Multi-operand sort: sort by integer key, carrying a row of x and a permutation along.
        k_sorted, x_sorted, perm = lax.sort(
            (keys, x[0], jnp.arange(64, dtype=jnp.int32)), num_keys=1, is_stable=True
        )
        return s, order, top_vals, top_idx, k_sorted, x_sorted, perm

    return sorting, (x, keys)


# --------------------------------------------------------------------------- RNG


def rng_sampling() -> Built:
    key = jax.random.PRNGKey(0)  # raw uint32[2] key, an ordinary array argument
    p = jnp.asarray(0.3, jnp.float32)

    def random_ops(key, p):
        k1, k2, k3 = jax.random.split(key, 3)
        n = jax.random.normal(k1, (16, 16))
        u = jax.random.uniform(k2, (16,), minval=-1.0, maxval=1.0)
        b = jax.random.bernoulli(k3, p, (16, 16))
        return jnp.where(b, n, u[None, :])

    return random_ops, (key, p)


# ------------------------------------------------------------------------ dtypes


def dtypes_mixed() -> Built:
    rng = _rng(13)
    a16 = normal_array(rng, (16, 32), dtype=jnp.bfloat16)
    b16 = normal_array(rng, (32, 16), dtype=jnp.bfloat16)
    i32 = jnp.asarray(rng.integers(-1000, 1000, (64,)), jnp.int32)
    i8 = jnp.asarray(rng.integers(-100, 100, (16, 32)), jnp.int8)
    w8 = jnp.asarray(rng.integers(-100, 100, (32, 16)), jnp.int8)
    c64 = jnp.asarray(rng.standard_normal((32,)) + 1j * rng.standard_normal((32,)), jnp.complex64)

    def mixed(a16, b16, i32, i8, w8, c64):
        bf = jnp.tanh(a16 @ b16)  # bf16 dot + elementwise
        bf_sum = jnp.sum(bf.astype(jnp.float32))
        ints = ((i32 * 3) // 7) ^ (i32 >> 2) | (i32 << 1) & 0xFF
        ints = jnp.where(i32 % 2 == 0, ints, -ints)
        q = lax.dot(i8, w8, preferred_element_type=jnp.int32)  # int8 x int8 -> int32
        q8 = jnp.clip(q // 64, -128, 127).astype(jnp.int8)
        c = c64 * jnp.conj(c64) + jnp.exp(1j * jnp.angle(c64))
        return bf, bf_sum, ints, q8, c, jnp.abs(c)

    return mixed, (a16, b16, i32, i8, w8, c64)


def elementwise() -> Built:
    rng = _rng(14)
    x = jnp.asarray(rng.uniform(0.1, 2.0, (64, 64)), jnp.float32)
    y = normal_array(rng, (64, 64))

    def transcendental(x, y):
        a = jnp.exp(y) + jnp.log(x) + jnp.tanh(y) + jnp.sin(y) * jnp.cos(y)
        b = lax.rsqrt(x) + jnp.sqrt(x) + jnp.power(x, y) + jax.nn.sigmoid(y)
        c = jnp.arctan2(y, x) + jnp.expm1(y) + jnp.log1p(x) + lax.erf(y) + jnp.cbrt(y)
        d = jnp.maximum(a, b) - jnp.minimum(b, c) + jnp.abs(y) * jnp.sign(y)
        d = d + jnp.floor(y) + jnp.round(x)
        return jnp.where(jnp.isfinite(d), d / (x + 1.0), 0.0)

    return transcendental, (x, y)


# ---------------------------------------------------------------- data movement


def data_movement() -> Built:
    rng = _rng(15)
    x = normal_array(rng, (8, 16))
    y = normal_array(rng, (4, 16))
    start = jnp.asarray(3, jnp.int32)

    def move(x, y, start):
        p = jnp.pad(x, ((1, 2), (0, 3)))  # pad
        p2 = lax.pad(x, 0.0, ((0, 0, 0), (1, 1, 1)))  # interior padding
        c = jnp.concatenate([x, y, x[:2]], axis=0)  # concatenate
        s = c[1:9:2, ::3]  # strided slice
        d = lax.dynamic_slice(x, (start, 0), (4, 16))
        u = lax.dynamic_update_slice(x, y * 2.0, (start, 0))
        t = jnp.transpose(x.reshape(2, 4, 16), (2, 0, 1))
        r = jnp.flip(x, axis=1)
        bc = jnp.broadcast_to(y[:, None, :], (4, 3, 16))
        return p, p2, s, d, u, t, r, bc

    return move, (x, y, start)


# --------------------------------------------------------------------------- FFT


def fft() -> Built:
    rng = _rng(16)
    x = normal_array(rng, (8, 64))
    z = jnp.asarray(rng.standard_normal((8, 64)) + 1j * rng.standard_normal((8, 64)), jnp.complex64)

    def fourier(x, z):
        f = jnp.fft.fft(z, axis=-1)
        inv = jnp.fft.ifft(f * jnp.conj(f), axis=-1)
        r = jnp.fft.rfft(x, axis=-1)
        back = jnp.fft.irfft(r * 0.5, n=64, axis=-1)
        f2 = jnp.fft.fft2(z)
        return inv, back, jnp.abs(f2)

    return fourier, (x, z)


# -------------------------------------------------------------------- reductions


def reductions() -> Built:
    rng = _rng(17)
    x = normal_array(rng, (16, 32))

    def reduce_ops(x):
        return (
            jnp.sum(x),
            jnp.max(x, axis=0),
            jnp.min(x, axis=1),
            jnp.argmax(x, axis=1),
            jax.nn.logsumexp(x, axis=-1),
            jnp.mean(x, axis=0),
            jnp.var(x, axis=1),
            jnp.prod(x[:4], axis=1),
            jnp.any(x > 2.0, axis=1),
            jnp.linalg.norm(x, axis=1),
        )

    return reduce_ops, (x,)


def cumulative() -> Built:
    rng = _rng(18)
    x = normal_array(rng, (8, 32))

    def cumulative_ops(x):
        return (
            jnp.cumsum(x, axis=1),
            jnp.cumprod(1.0 + 0.01 * x, axis=0),
            lax.cummax(x, axis=1),
            lax.cumlogsumexp(x, axis=1),
        )

    return cumulative_ops, (x,)


def layernorm_softmax() -> Built:
    rng = _rng(19)
    x = normal_array(rng, (16, 64))
    scale = jnp.ones((64,), jnp.float32)
    bias = jnp.zeros((64,), jnp.float32)

    def ln_softmax(x, scale, bias):
        return jax.nn.softmax(_layernorm(x, scale, bias), axis=-1)

    return ln_softmax, (x, scale, bias)


def einsum_contractions() -> Built:
    rng = _rng(20)
    a = normal_array(rng, (4, 8, 16))
    b = normal_array(rng, (4, 16, 12))
    c = normal_array(rng, (12, 8))
    v = normal_array(rng, (16,))

    def contractions(a, b, c, v):
        bmm = jnp.einsum("bij,bjk->bik", a, b)  # batched matmul
        chain = jnp.einsum("bik,kl->bil", bmm, c)  # contraction over the last dim
        outer = jnp.einsum("i,j->ij", v, v)  # outer product
        mv = a @ v  # matrix-vector
        tr = jnp.einsum("bii->b", chain[:, :, :8])  # trace (diagonal gather-ish)
        return chain, outer, mv, tr

    return contractions, (a, b, c, v)


def linalg() -> Built:
    rng = _rng(21)
    m = rng.standard_normal((8, 8))
    spd = jnp.asarray(m @ m.T + 8 * np.eye(8), jnp.float32)
    rhs = normal_array(rng, (8, 3))

    def solve_ops(spd, rhs):
        chol = jnp.linalg.cholesky(spd)
        y = jax.scipy.linalg.solve_triangular(chol, rhs, lower=True)
        return chol, y, jnp.linalg.solve(spd, rhs)

    return solve_ops, (spd, rhs)
