"""Optax: optimizer updates over the parameter tree of a real model, and optax's losses."""

from __future__ import annotations

from ._inputs import integers, normal, seed_of
from ._registry import corpus_program

_SIZES = {"small": dict(width=64), "medium": dict(width=256), "large": dict(width=1024)}


def _transformer_params(width: int):
    """The parameters of one transformer layer as Flax Linen builds them (attention, MLP of 4x, two norms)."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    class Layer(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = x + nn.MultiHeadDotProductAttention(num_heads=max(1, width // 64))(nn.LayerNorm()(x))
            h = nn.Dense(4 * width)(nn.LayerNorm()(x))
            return x + nn.Dense(width)(nn.gelu(h))

    return Layer().init(jax.random.key(0), jnp.zeros((1, 4, width)))["params"]


def _update_program(name: str, make_tx, width: int):
    import jax
    import optax

    params = _transformer_params(width)
    leaves, tree = jax.tree.flatten(params)
    grads = jax.tree.unflatten(tree, [normal(seed_of(name) + i, x.shape, scale=1e-2) for i, x in enumerate(leaves)])
    tx = make_tx()
    state = tx.init(params)

    def step(grads, state, params):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    step.__name__ = name
    return step, (grads, state, params)


def _register(name: str, description: str, make_tx_name: str):
    @corpus_program(name, source="optax", sizes=_SIZES, requires=("optax", "flax.linen"), description=description)
    def build(width):
        return _update_program(name, _TRANSFORMS[make_tx_name], width)

    return build


def _adamw():
    import optax

    return optax.adamw(1e-3, weight_decay=1e-4)


def _adafactor():
    import optax

    return optax.adafactor(1e-3)


def _lamb():
    import optax

    return optax.lamb(1e-3)


def _lion():
    import optax

    return optax.lion(1e-4, weight_decay=1e-2)


def _clip_sgd_nesterov():
    import optax

    return optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1, momentum=0.9, nesterov=True))


_TRANSFORMS = {"adamw": _adamw, "adafactor": _adafactor, "lamb": _lamb, "lion": _lion,
               "clip_sgd_nesterov": _clip_sgd_nesterov}

_register("optax_adamw_update", "optax.adamw update and optax.apply_updates over a Flax transformer layer's "
          "parameters", "adamw")
_register("optax_adafactor_update", "optax.adafactor update (factored second moments) over a Flax transformer "
          "layer's parameters", "adafactor")
_register("optax_lamb_update", "optax.lamb update (per-leaf trust ratios) over a Flax transformer layer's "
          "parameters", "lamb")
_register("optax_lion_update", "optax.lion update over a Flax transformer layer's parameters", "lion")
_register("optax_clip_sgd_nesterov_update", "optax.chain(clip_by_global_norm, sgd with Nesterov momentum) over a "
          "Flax transformer layer's parameters", "clip_sgd_nesterov")


@corpus_program("optax_softmax_cross_entropy_grad", source="optax", requires=("optax",),
                sizes={"small": dict(batch=64, classes=1000), "large": dict(batch=1024, classes=32000)},
                description="optax.losses.softmax_cross_entropy_with_integer_labels, mean loss and its gradient "
                            "w.r.t. the logits")
def optax_softmax_cross_entropy_grad(batch, classes):
    import jax
    import optax

    name = "optax_softmax_cross_entropy_grad"

    def optax_softmax_cross_entropy_grad(logits, labels):
        def loss(z):
            return optax.losses.softmax_cross_entropy_with_integer_labels(z, labels).mean()

        return jax.value_and_grad(loss)(logits)

    return optax_softmax_cross_entropy_grad, (normal(seed_of(name), (batch, classes)),
                                              integers(seed_of(name), (batch,), classes))
