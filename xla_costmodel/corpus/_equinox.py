"""Equinox and its ecosystem: eqx.nn layers, diffrax ODE solves, lineax linear solves, optimistix minimisation."""

from __future__ import annotations

from ._inputs import normal, seed_of
from ._registry import corpus_program


def _eqx_program(name: str, model, forward, x, *, grad: bool):
    """`(fn, args)` calling `forward(model, x)`; the model's arrays are an argument (the gradient's variable)."""
    import equinox as eqx
    import jax.numpy as jnp

    params, static = eqx.partition(model, eqx.is_array)

    def apply(params, x):
        return forward(eqx.combine(params, static), x)

    if not grad:
        apply.__name__ = name
        return apply, (params, x)

    def loss_and_grad(params, x):
        return eqx.filter_value_and_grad(lambda p: jnp.mean(jnp.square(apply(p, x))))(params)

    loss_and_grad.__name__ = name
    return loss_and_grad, (params, x)


_MLP_SIZES = {
    "small": dict(batch=64, features=64, width=64, depth=3),
    "medium": dict(batch=256, features=256, width=256, depth=3),
    "large": dict(batch=1024, features=512, width=512, depth=4),
}


def _mlp(name, batch, features, width, depth, grad):
    import equinox as eqx
    import jax
    import jax.nn

    model = eqx.nn.MLP(features, 16, width, depth, activation=jax.nn.gelu, key=jax.random.key(seed_of(name)))
    return _eqx_program(name, model, lambda m, x: jax.vmap(m)(x), normal(seed_of(name), (batch, features)),
                        grad=grad)


@corpus_program("equinox_mlp_fwd", source="equinox", sizes=_MLP_SIZES, requires=("equinox",),
                description="equinox.nn.MLP (GELU), vmapped over a batch, forward")
def equinox_mlp_fwd(**size):
    return _mlp("equinox_mlp_fwd", grad=False, **size)


@corpus_program("equinox_mlp_grad", source="equinox", sizes=_MLP_SIZES, requires=("equinox",),
                description="equinox.nn.MLP (GELU), loss and gradient (equinox.filter_value_and_grad)")
def equinox_mlp_grad(**size):
    return _mlp("equinox_mlp_grad", grad=True, **size)


@corpus_program("equinox_lstm_grad", source="equinox", requires=("equinox",),
                sizes={"small": dict(batch=8, steps=16, features=32, hidden=64),
                       "large": dict(batch=32, steps=64, features=128, hidden=256)},
                description="equinox.nn.LSTMCell scanned over time (lax.scan), vmapped, loss and gradient")
def equinox_lstm_grad(batch, steps, features, hidden):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    name = "equinox_lstm_grad"
    cell = eqx.nn.LSTMCell(features, hidden, key=jax.random.key(seed_of(name)))

    def run(cell, xs):
        def one(seq):
            def step(carry, x):
                carry = cell(x, carry)
                return carry, carry[0]

            init = (jnp.zeros(hidden), jnp.zeros(hidden))
            return jax.lax.scan(step, init, seq)[1]

        return jax.vmap(one)(xs)

    return _eqx_program(name, cell, run, normal(seed_of(name), (batch, steps, features)), grad=True)


@corpus_program("equinox_conv_grad", source="equinox", requires=("equinox",),
                sizes={"small": dict(batch=4, side=16, cin=8, cout=16),
                       "large": dict(batch=8, side=64, cin=32, cout=64)},
                description="equinox.nn.Conv2d 3x3 (channels first), vmapped, loss and gradient")
def equinox_conv_grad(batch, side, cin, cout):
    import equinox as eqx
    import jax

    name = "equinox_conv_grad"
    conv = eqx.nn.Conv2d(cin, cout, 3, padding=1, key=jax.random.key(seed_of(name)))
    return _eqx_program(name, conv, lambda m, x: jax.vmap(m)(x), normal(seed_of(name), (batch, cin, side, side)),
                        grad=True)


@corpus_program("equinox_mha_fwd", source="equinox", requires=("equinox",),
                sizes={"small": dict(batch=2, seq=32, width=64, heads=4),
                       "large": dict(batch=8, seq=256, width=256, heads=8)},
                description="equinox.nn.MultiheadAttention, self-attention, vmapped over a batch, forward")
def equinox_mha_fwd(batch, seq, width, heads):
    import equinox as eqx
    import jax

    name = "equinox_mha_fwd"
    mha = eqx.nn.MultiheadAttention(heads, width, key=jax.random.key(seed_of(name)))
    return _eqx_program(name, mha, lambda m, x: jax.vmap(lambda s: m(s, s, s))(x),
                        normal(seed_of(name), (batch, seq, width)), grad=False)


_ODE_SIZES = {"small": dict(batch=16, state=8, width=32), "large": dict(batch=128, state=32, width=128)}


def _vector_field(name, state, width):
    import equinox as eqx
    import jax

    return eqx.nn.MLP(state, state, width, 2, activation=jax.nn.tanh, key=jax.random.key(seed_of(name)))


@corpus_program("diffrax_neural_ode_adaptive", source="diffrax", sizes=_ODE_SIZES, requires=("diffrax", "equinox"),
                description="diffrax.diffeqsolve, Tsit5 with a PID step-size controller (a while loop), "
                            "vector field an equinox.nn.MLP, batch vmapped")
def diffrax_neural_ode_adaptive(batch, state, width):
    import diffrax
    import jax

    name = "diffrax_neural_ode_adaptive"

    def solve(field, y0s):
        term = diffrax.ODETerm(lambda t, y, args: field(y))

        def one(y0):
            sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, y0,
                                      stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
                                      max_steps=256)
            return sol.ys[-1]

        return jax.vmap(one)(y0s)

    return _eqx_program(name, _vector_field(name, state, width), solve, normal(seed_of(name), (batch, state)),
                        grad=False)


@corpus_program("diffrax_neural_ode_grad", source="diffrax", sizes=_ODE_SIZES, requires=("diffrax", "equinox"),
                description="diffrax.diffeqsolve, Tsit5 with 16 fixed steps, loss and gradient through the solve "
                            "(RecursiveCheckpointAdjoint)")
def diffrax_neural_ode_grad(batch, state, width):
    import diffrax
    import jax

    name = "diffrax_neural_ode_grad"

    def solve(field, y0s):
        term = diffrax.ODETerm(lambda t, y, args: field(y))

        def one(y0):
            sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 1.0 / 16, y0, max_steps=16)
            return sol.ys[-1]

        return jax.vmap(one)(y0s)

    return _eqx_program(name, _vector_field(name, state, width), solve, normal(seed_of(name), (batch, state)),
                        grad=True)


def _spd(seed: int, n: int):
    """A symmetric positive definite matrix: a symmetric Gaussian (spectrum within ±2) shifted by 3."""
    import jax.numpy as jnp

    a = normal(seed, (n, n), scale=1.0 / n**0.5)
    return (a + a.T) / 2**0.5 + 3.0 * jnp.eye(n, dtype=a.dtype)


@corpus_program("lineax_cg_solve", source="lineax", requires=("lineax",),
                sizes={"small": dict(n=64), "medium": dict(n=512), "large": dict(n=4096)},
                description="lineax.linear_solve with lineax.CG on a positive definite MatrixLinearOperator")
def lineax_cg_solve(n):
    import lineax as lx

    name = "lineax_cg_solve"

    def lineax_cg_solve(a, b):
        op = lx.MatrixLinearOperator(a, lx.positive_semidefinite_tag)
        return lx.linear_solve(op, b, lx.CG(rtol=1e-5, atol=1e-5, max_steps=200)).value

    return lineax_cg_solve, (_spd(seed_of(name), n), normal(seed_of(name) + 1, (n,)))


@corpus_program("lineax_lu_solve", source="lineax", requires=("lineax",),
                sizes={"small": dict(n=64), "large": dict(n=1024)},
                description="lineax.linear_solve with lineax.LU on a MatrixLinearOperator")
def lineax_lu_solve(n):
    import lineax as lx

    name = "lineax_lu_solve"

    def lineax_lu_solve(a, b):
        return lx.linear_solve(lx.MatrixLinearOperator(a), b, lx.LU()).value

    return lineax_lu_solve, (_spd(seed_of(name), n), normal(seed_of(name) + 1, (n,)))


@corpus_program("optimistix_bfgs_minimise", source="optimistix", requires=("optimistix",),
                sizes={"small": dict(n=16), "large": dict(n=2048)},
                description="optimistix.minimise with optimistix.BFGS on the n-dimensional Rosenbrock function")
def optimistix_bfgs_minimise(n):
    import jax.numpy as jnp
    import optimistix as optx

    def rosenbrock(y, args):
        return jnp.sum(100.0 * (y[1:] - y[:-1] ** 2) ** 2 + (1.0 - y[:-1]) ** 2)

    def optimistix_bfgs_minimise(y0):
        return optx.minimise(rosenbrock, optx.BFGS(rtol=1e-6, atol=1e-6), y0, max_steps=64, throw=False).value

    return optimistix_bfgs_minimise, (jnp.zeros((n,), jnp.float32),)
