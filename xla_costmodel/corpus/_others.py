"""Haiku, Penzai, NumPyro and dm-pix: models and functions as those libraries ship them."""

from __future__ import annotations

from ._inputs import normal, seed_of, uniform
from ._registry import corpus_program


def _haiku_program(name: str, forward, x, *, grad: bool):
    """`(fn, args)` of a Haiku function transformed with `hk.transform`."""
    import haiku as hk
    import jax
    import jax.numpy as jnp

    model = hk.without_apply_rng(hk.transform(forward))
    params = model.init(jax.random.key(seed_of(name)), x)

    def apply(params, x):
        return model.apply(params, x)

    args = (params, x)
    if not grad:
        apply.__name__ = name
        return apply, args

    def loss_and_grad(params, *rest):
        return jax.value_and_grad(lambda p: jnp.mean(jnp.square(apply(p, *rest))))(params)

    loss_and_grad.__name__ = name
    return loss_and_grad, args


@corpus_program("haiku_mlp_grad", source="dm-haiku", requires=("haiku",),
                sizes={"small": dict(batch=64, features=64, width=128),
                       "large": dict(batch=1024, features=512, width=1024)},
                description="haiku.nets.MLP (3 layers, ReLU), loss and gradient")
def haiku_mlp_grad(batch, features, width):
    import haiku as hk

    name = "haiku_mlp_grad"
    return _haiku_program(name, lambda x: hk.nets.MLP([width, width, 10])(x), normal(seed_of(name), (batch, features)),
                          grad=True)


@corpus_program("haiku_resnet18_fwd", source="dm-haiku", requires=("haiku",),
                sizes={"small": dict(batch=2, side=32), "large": dict(batch=4, side=64)},
                description="haiku.nets.ResNet18 inference (batch norm with moving averages), forward")
def haiku_resnet18_fwd(batch, side):
    import haiku as hk
    import jax

    name = "haiku_resnet18_fwd"
    model = hk.without_apply_rng(hk.transform_with_state(
        lambda x, is_training: hk.nets.ResNet18(num_classes=10)(x, is_training=is_training)))
    x = normal(seed_of(name), (batch, side, side, 3))
    # Initialised in training mode, so that the batch norms' moving averages exist.
    params, state = model.init(jax.random.key(seed_of(name)), x, True)

    def haiku_resnet18_fwd(params, state, x):
        return model.apply(params, state, x, False)[0]

    return haiku_resnet18_fwd, (params, state, x)


@corpus_program("haiku_lstm_unroll_fwd", source="dm-haiku", requires=("haiku",),
                sizes={"small": dict(batch=8, steps=16, features=32, hidden=64),
                       "large": dict(batch=64, steps=64, features=128, hidden=512)},
                description="haiku.LSTM unrolled over time with haiku.dynamic_unroll (time major), forward")
def haiku_lstm_unroll_fwd(batch, steps, features, hidden):
    import haiku as hk

    name = "haiku_lstm_unroll_fwd"

    def forward(xs):
        core = hk.LSTM(hidden)
        return hk.dynamic_unroll(core, xs, core.initial_state(xs.shape[1]))[0]

    return _haiku_program(name, forward, normal(seed_of(name), (steps, batch, features)), grad=False)


@corpus_program("haiku_mha_grad", source="dm-haiku", requires=("haiku",),
                sizes={"small": dict(batch=2, seq=32, width=64, heads=4),
                       "large": dict(batch=4, seq=256, width=256, heads=8)},
                description="haiku.MultiHeadAttention self-attention, loss and gradient")
def haiku_mha_grad(batch, seq, width, heads):
    import haiku as hk

    name = "haiku_mha_grad"

    def forward(x):
        return hk.MultiHeadAttention(num_heads=heads, key_size=width // heads, w_init_scale=1.0)(x, x, x)

    return _haiku_program(name, forward, normal(seed_of(name), (batch, seq, width)), grad=True)


_LLAMA_SIZES = {"small": dict(batch=2, seq=32, width=64, layers=2, vocab=256),
                "large": dict(batch=4, seq=128, width=256, layers=2, vocab=4096)}


def _llamalike(name, batch, seq, width, layers, vocab):
    import jax
    from penzai import pz
    from penzai.models.transformer.variants import llamalike_common as llama

    from ._inputs import integers

    config = llama.LlamalikeTransformerConfig(
        num_kv_heads=max(1, width // 64), query_head_multiplier=2, embedding_dim=width, projection_dim=32,
        mlp_hidden_dim=4 * width, num_decoder_blocks=layers, vocab_size=vocab, mlp_variant="swiglu",
        tie_embedder_and_logits=True,
    )
    model = pz.freeze_params(llama.build_llamalike_transformer(config, init_base_rng=jax.random.key(seed_of(name))))
    tokens = pz.nx.wrap(integers(seed_of(name), (batch, seq), vocab)).tag("batch", "seq")

    def logits(model, tokens):
        return model(tokens, token_positions=pz.nx.arange("seq", seq)).unwrap("batch", "seq", "vocabulary")

    return logits, model, tokens


@corpus_program("penzai_llamalike_fwd", source="penzai", sizes=_LLAMA_SIZES, requires=("penzai",),
                description="penzai's Llama-like transformer (build_llamalike_transformer: RoPE, grouped-query "
                            "attention, SwiGLU), logits forward")
def penzai_llamalike_fwd(**size):
    name = "penzai_llamalike_fwd"
    logits, model, tokens = _llamalike(name, **size)

    def penzai_llamalike_fwd(model, tokens):
        return logits(model, tokens)

    return penzai_llamalike_fwd, (model, tokens)


@corpus_program("penzai_llamalike_grad", source="penzai", sizes=_LLAMA_SIZES, requires=("penzai",),
                description="penzai's Llama-like transformer, next-token cross-entropy and its gradient w.r.t. "
                            "the parameters")
def penzai_llamalike_grad(**size):
    import jax
    import jax.numpy as jnp

    name = "penzai_llamalike_grad"
    logits, model, tokens = _llamalike(name, **size)

    def penzai_llamalike_grad(model, tokens):
        def loss(model):
            z = jax.nn.log_softmax(logits(model, tokens)[:, :-1], axis=-1)
            ids = tokens.unwrap("batch", "seq")[:, 1:]
            return -jnp.mean(jnp.take_along_axis(z, ids[..., None], axis=-1))

        return jax.value_and_grad(loss)(model)

    return penzai_llamalike_grad, (model, tokens)


def _numpyro_potential(name, model, data, params):
    import jax
    from numpyro.infer.util import potential_energy

    def potential_and_grad(params, *data):
        return jax.value_and_grad(lambda p: potential_energy(model, data, {}, p))(params)

    potential_and_grad.__name__ = name
    return potential_and_grad, (params, *data)


@corpus_program("numpyro_logreg_potential_grad", source="numpyro", requires=("numpyro",),
                sizes={"small": dict(n=1000, d=16), "large": dict(n=200_000, d=64)},
                description="numpyro.infer.util.potential_energy of a Bayesian logistic regression (Normal priors, "
                            "Bernoulli likelihood) and its gradient, what NUTS evaluates per leapfrog step")
def numpyro_logreg_potential_grad(n, d):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    from ._inputs import integers

    def model(x, y):
        w = numpyro.sample("w", dist.Normal(jnp.zeros(d), 1.0).to_event(1))
        b = numpyro.sample("b", dist.Normal(0.0, 5.0))
        numpyro.sample("y", dist.Bernoulli(logits=x @ w + b), obs=y)

    name = "numpyro_logreg_potential_grad"
    seed = seed_of(name)
    data = (normal(seed, (n, d)), integers(seed + 1, (n,), 2).astype(jnp.float32))
    return _numpyro_potential(name, model, data, {"w": normal(seed + 2, (d,), scale=0.1), "b": jnp.float32(0.0)})


@corpus_program("numpyro_hier_regression_potential_grad", source="numpyro", requires=("numpyro",),
                sizes={"small": dict(n=1000, groups=10), "large": dict(n=500_000, groups=1000)},
                description="numpyro.infer.util.potential_energy of a hierarchical linear regression (group "
                            "intercepts, HalfNormal scales, plates) and its gradient")
def numpyro_hier_regression_potential_grad(n, groups):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    from ._inputs import integers

    def model(x, group, y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        tau = numpyro.sample("tau", dist.HalfNormal(5.0))
        slope = numpyro.sample("slope", dist.Normal(0.0, 1.0))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        with numpyro.plate("groups", groups):
            alpha = numpyro.sample("alpha", dist.Normal(mu, tau))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(alpha[group] + slope * x, sigma), obs=y)

    name = "numpyro_hier_regression_potential_grad"
    seed = seed_of(name)
    data = (normal(seed, (n,)), integers(seed + 1, (n,), groups), normal(seed + 2, (n,)))
    params = {"mu": jnp.float32(0.1), "tau": jnp.float32(0.5), "slope": jnp.float32(0.2), "sigma": jnp.float32(0.3),
              "alpha": normal(seed + 3, (groups,), scale=0.1)}
    return _numpyro_potential(name, model, data, params)


@corpus_program("pix_gaussian_blur", source="dm-pix", requires=("dm_pix",),
                sizes={"small": dict(batch=2, side=64), "large": dict(batch=2, side=512)},
                description="dm_pix.gaussian_blur (separable, sigma 2, kernel 9) of RGB images, vmapped")
def pix_gaussian_blur(batch, side):
    import dm_pix as pix
    import jax

    def pix_gaussian_blur(images):
        return jax.vmap(lambda im: pix.gaussian_blur(im, sigma=2.0, kernel_size=9))(images)

    return pix_gaussian_blur, (uniform(seed_of("pix_gaussian_blur"), (batch, side, side, 3)),)


@corpus_program("pix_color_augment", source="dm-pix", requires=("dm_pix",),
                sizes={"small": dict(batch=2, side=64), "large": dict(batch=8, side=512)},
                description="dm_pix colour augmentation: adjust_brightness, adjust_contrast, adjust_saturation, "
                            "adjust_hue (through HSV) and adjust_gamma")
def pix_color_augment(batch, side):
    import dm_pix as pix

    def pix_color_augment(images):
        x = pix.adjust_brightness(images, 0.1)
        x = pix.adjust_contrast(x, 1.2)
        x = pix.adjust_saturation(x, 0.8)
        x = pix.adjust_hue(x, 0.05)
        return pix.adjust_gamma(x.clip(0.0, 1.0), 1.1)

    return pix_color_augment, (uniform(seed_of("pix_color_augment"), (batch, side, side, 3)),)
