"""Flax programs: NNX and Linen layers called on inputs, forward and loss gradient."""

from __future__ import annotations

from ._inputs import normal, seed_of
from ._registry import corpus_program

_SOURCE = "flax"


def _nnx_program(name: str, make, x, *, grad: bool, call=None):
    """`(fn, args)` of an NNX module: parameters are an argument, so the gradient is taken with respect to them.

    `call(model, x)` applies the module (default `model(x)`).
    """
    import jax
    import jax.numpy as jnp
    from flax import nnx

    model = make(nnx.Rngs(seed_of(name)))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def forward(params, rest, x):
        model = nnx.merge(graphdef, params, rest)
        return model(x) if call is None else call(model, x)

    if not grad:
        forward.__name__ = name
        return forward, (params, rest, x)

    def loss(params, rest, x):
        return jnp.mean(jnp.square(forward(params, rest, x)))

    def loss_and_grad(params, rest, x):
        return jax.value_and_grad(loss)(params, rest, x)

    loss_and_grad.__name__ = name
    return loss_and_grad, (params, rest, x)


def _linen_program(name: str, module, x, *, grad: bool, **call):
    import jax
    import jax.numpy as jnp

    variables = module.init(jax.random.key(seed_of(name)), x, **call)

    def forward(variables, x):
        return module.apply(variables, x, **call)

    if not grad:
        forward.__name__ = name
        return forward, (variables, x)

    def loss_and_grad(variables, x):
        return jax.value_and_grad(lambda v: jnp.mean(jnp.square(forward(v, x).astype(jnp.float32))))(variables)

    loss_and_grad.__name__ = name
    return loss_and_grad, (variables, x)


_MHA_SIZES = {
    "small": dict(batch=2, seq=32, width=64, heads=4),
    "medium": dict(batch=4, seq=128, width=128, heads=4),
    "large": dict(batch=8, seq=256, width=256, heads=8),
}


def _nnx_mha(name, batch, seq, width, heads, grad):
    from flax import nnx

    def make(rngs):
        return nnx.MultiHeadAttention(num_heads=heads, in_features=width, decode=False, rngs=rngs)

    return _nnx_program(name, make, normal(seed_of(name), (batch, seq, width)), grad=grad)


@corpus_program("flax_nnx_mha_fwd", source=_SOURCE, sizes=_MHA_SIZES, requires=("flax.nnx",),
                description="flax.nnx.MultiHeadAttention, self-attention forward")
def flax_nnx_mha_fwd(**size):
    return _nnx_mha("flax_nnx_mha_fwd", grad=False, **size)


@corpus_program("flax_nnx_mha_grad", source=_SOURCE, sizes=_MHA_SIZES, requires=("flax.nnx",),
                description="flax.nnx.MultiHeadAttention, loss and gradient w.r.t. its parameters")
def flax_nnx_mha_grad(**size):
    return _nnx_mha("flax_nnx_mha_grad", grad=True, **size)


@corpus_program("flax_nnx_conv_grad", source=_SOURCE, requires=("flax.nnx",),
                sizes={"small": dict(batch=4, side=16, cin=16, cout=16),
                       "medium": dict(batch=8, side=32, cin=32, cout=32),
                       "large": dict(batch=8, side=64, cin=64, cout=64)},
                description="flax.nnx.Conv 3x3 (NHWC), loss and gradient")
def flax_nnx_conv_grad(batch, side, cin, cout):
    from flax import nnx

    name = "flax_nnx_conv_grad"
    return _nnx_program(name, lambda rngs: nnx.Conv(cin, cout, kernel_size=(3, 3), rngs=rngs),
                        normal(seed_of(name), (batch, side, side, cin)), grad=True)


@corpus_program("flax_nnx_lstm_grad", source=_SOURCE, requires=("flax.nnx",),
                sizes={"small": dict(batch=4, steps=16, features=32, hidden=64),
                       "large": dict(batch=16, steps=64, features=128, hidden=256)},
                description="flax.nnx.RNN over flax.nnx.LSTMCell (a scan), loss and gradient")
def flax_nnx_lstm_grad(batch, steps, features, hidden):
    from flax import nnx

    name = "flax_nnx_lstm_grad"
    import jax.numpy as jnp

    def run(rnn, x):
        # A zero initial carry (cell, hidden), given explicitly: left to itself
        # the RNN would draw it from its rngs inside the traced function.
        zeros = jnp.zeros((x.shape[0], hidden), x.dtype)
        return rnn(x, initial_carry=(zeros, zeros))

    return _nnx_program(name, lambda rngs: nnx.RNN(nnx.LSTMCell(features, hidden, rngs=rngs)),
                        normal(seed_of(name), (batch, steps, features)), grad=True, call=run)


@corpus_program("flax_nnx_layernorm_grad", source=_SOURCE, requires=("flax.nnx",),
                sizes={"small": dict(rows=64, width=256), "medium": dict(rows=512, width=512),
                       "large": dict(rows=4096, width=1024)},
                description="flax.nnx.LayerNorm, loss and gradient (the layer-norm backward reductions)")
def flax_nnx_layernorm_grad(rows, width):
    from flax import nnx

    name = "flax_nnx_layernorm_grad"
    return _nnx_program(name, lambda rngs: nnx.LayerNorm(width, rngs=rngs),
                        normal(seed_of(name), (rows, width)), grad=True)


@corpus_program("flax_nnx_embed_fwd", source=_SOURCE, requires=("flax.nnx",),
                sizes={"small": dict(vocab=1000, width=64, tokens=256),
                       "large": dict(vocab=32000, width=512, tokens=8192)},
                description="flax.nnx.Embed: token lookup, and attend() (logits against the table)")
def flax_nnx_embed_fwd(vocab, width, tokens):
    import jax.numpy as jnp
    from flax import nnx

    from ._inputs import integers

    name = "flax_nnx_embed_fwd"
    model = nnx.Embed(vocab, width, rngs=nnx.Rngs(seed_of(name)))
    graphdef, state = nnx.split(model)

    def flax_nnx_embed_fwd(state, ids):
        embed = nnx.merge(graphdef, state)
        h = embed(ids)
        return embed.attend(h[: min(64, h.shape[0])]).max(axis=-1), jnp.sum(h, axis=0)

    return flax_nnx_embed_fwd, (state, integers(seed_of(name), (tokens,), vocab))


@corpus_program("flax_linen_conv_fwd", source=_SOURCE, requires=("flax.linen",),
                sizes={"small": dict(batch=4, side=16, cin=16, cout=32),
                       "medium": dict(batch=8, side=32, cin=32, cout=64),
                       "large": dict(batch=8, side=64, cin=64, cout=64)},
                description="flax.linen.Conv 3x3 stride 2 then 1x1, forward")
def flax_linen_conv_fwd(batch, side, cin, cout):
    import flax.linen as nn

    class ConvPair(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(cout, (3, 3), strides=(2, 2))(x)
            return nn.Conv(cout, (1, 1))(x)

    name = "flax_linen_conv_fwd"
    return _linen_program(name, ConvPair(), normal(seed_of(name), (batch, side, side, cin)), grad=False)


@corpus_program("flax_linen_attention_bf16_fwd", source=_SOURCE, requires=("flax.linen",),
                sizes={"small": dict(batch=2, seq=64, width=64, heads=4),
                       "large": dict(batch=4, seq=256, width=256, heads=8)},
                description="flax.linen.MultiHeadDotProductAttention in bfloat16 (f32 parameters) with a causal mask")
def flax_linen_attention_bf16_fwd(batch, seq, width, heads):
    import flax.linen as nn
    import jax.numpy as jnp

    name = "flax_linen_attention_bf16_fwd"
    x = normal(seed_of(name), (batch, seq, width), dtype="bfloat16")
    mask = nn.make_causal_mask(jnp.ones((batch, seq), jnp.int32))
    module = nn.MultiHeadDotProductAttention(num_heads=heads, dtype=jnp.bfloat16, param_dtype=jnp.float32)
    import jax

    variables = module.init(jax.random.key(seed_of(name)), x, mask=mask)

    def flax_linen_attention_bf16_fwd(variables, x, mask):
        return module.apply(variables, x, mask=mask)

    return flax_linen_attention_bf16_fwd, (variables, x, mask)


@corpus_program("flax_linen_groupnorm_grad", source=_SOURCE, requires=("flax.linen",),
                sizes={"small": dict(batch=4, side=16, channels=32),
                       "large": dict(batch=8, side=64, channels=128)},
                description="flax.linen.GroupNorm (8 groups, NHWC), loss and gradient")
def flax_linen_groupnorm_grad(batch, side, channels):
    import flax.linen as nn

    name = "flax_linen_groupnorm_grad"
    return _linen_program(name, nn.GroupNorm(num_groups=8), normal(seed_of(name), (batch, side, side, channels)),
                          grad=True)


@corpus_program("flax_linen_dense_bf16_grad", source=_SOURCE, requires=("flax.linen",),
                sizes={"small": dict(batch=64, fin=256, fout=256),
                       "large": dict(batch=1024, fin=1024, fout=1024)},
                description="flax.linen.Dense computing in bfloat16 with f32 parameters, loss and gradient")
def flax_linen_dense_bf16_grad(batch, fin, fout):
    import flax.linen as nn
    import jax.numpy as jnp

    name = "flax_linen_dense_bf16_grad"
    return _linen_program(name, nn.Dense(fout, dtype=jnp.bfloat16), normal(seed_of(name), (batch, fin)), grad=True)
