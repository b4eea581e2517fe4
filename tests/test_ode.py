"""functx.experimental.ode.odeint against jax.experimental.ode.odeint (the same algorithm:
values to rounding) and against closed forms; gradients by the adjoint method against JAX's
and against finite differences; under jit and vmap; the closure-over-a-tracer error."""
from __future__ import annotations

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.experimental.ode import odeint

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)
from jax.experimental.ode import odeint as jax_odeint  # noqa: E402


def decay(y, t, k):
    return -k * y


def lotka_volterra(y, t, p):
    prey, pred = y[0], y[1]
    return fnp.stack([p[0] * prey - p[1] * prey * pred, p[2] * prey * pred - p[3] * pred])


def lotka_volterra_jax(y, t, p):
    prey, pred = y[0], y[1]
    return jnp.stack([p[0] * prey - p[1] * prey * pred, p[2] * prey * pred - p[3] * pred])


T = np.linspace(0.0, 2.0, 7)
P = np.array([1.1, 0.4, 0.1, 0.4])
Y0 = np.array([3.0, 1.5])


def test_values_match_the_closed_form_and_jax() -> None:
    ys = odeint(decay, 1.0, T, 2.0)
    np.testing.assert_allclose(ys, np.exp(-2.0 * T), rtol=0, atol=1e-8)  # (as JAX's)
    got = odeint(lotka_volterra, Y0, T, P)
    want = jax_odeint(lotka_volterra_jax, jnp.asarray(Y0), jnp.asarray(T), jnp.asarray(P))
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-9, atol=1e-12)


def test_gradients_by_the_adjoint_match_jax_and_finite_differences() -> None:
    def loss(y0, p, t):
        return fnp.sum(odeint(lotka_volterra, y0, t, p) ** 2)

    def loss_jax(y0, p, t):
        return jnp.sum(jax_odeint(lotka_volterra_jax, y0, t, p) ** 2)

    got = fx.grad(loss, argnums=(0, 1, 2))(Y0, P, T)
    want = jax.grad(loss_jax, argnums=(0, 1, 2))(jnp.asarray(Y0), jnp.asarray(P), jnp.asarray(T))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6, atol=1e-8)
    eps = 1e-6
    e = np.zeros_like(P)
    e[1] = eps
    fd = (loss(Y0, P + e, T) - loss(Y0, P - e, T)) / (2 * eps)
    np.testing.assert_allclose(got[1][1], fd, rtol=1e-5)
    k_grad = fx.grad(lambda k: odeint(decay, 1.0, np.array([0.0, 1.0]), k)[-1])(2.0)
    np.testing.assert_allclose(k_grad, -np.exp(-2.0), rtol=1e-6)


def test_pytree_state_jit_and_vmap() -> None:
    def f(state, t, k):
        return {"x": state["v"], "v": -k * state["x"]}  # a harmonic oscillator

    ts = np.linspace(0.0, 1.0, 4)
    y0 = {"x": np.array(1.0), "v": np.array(0.0)}
    out = fx.jit(lambda y, k: odeint(f, y, ts, k))(y0, 4.0)
    np.testing.assert_allclose(out["x"], np.cos(2.0 * ts), rtol=0, atol=1e-7)
    np.testing.assert_allclose(out["v"], -2.0 * np.sin(2.0 * ts), rtol=0, atol=1e-7)
    ks = np.array([1.0, 2.0, 3.0])
    batched = fx.vmap(lambda k: odeint(decay, 1.0, ts, k)[-1])(ks)
    np.testing.assert_allclose(batched, np.exp(-ks), rtol=0, atol=1e-8)


def test_a_closure_over_a_traced_value_is_an_error() -> None:
    def loss(k):
        return odeint(lambda y, t: -k * y, 1.0, np.array([0.0, 1.0]))[-1]

    with pytest.raises(fx.FunctxError, match="as one of \\*args"):
        fx.grad(loss)(2.0)
    with pytest.raises(fx.FunctxError, match="1-d array of float times"):
        odeint(decay, 1.0, np.arange(3), 2.0)
