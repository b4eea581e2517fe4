"""functx.random's samplers against jax.random (same key, same algorithm), their gradients,
their behaviour under jit and vmap, and their errors.

JAX evaluates transcendental functions with XLA's CPU approximations (``log1p`` in float64
is up to ~125 ulp off; functx uses NumPy's, within an ulp), so values are compared with a
tolerance of about 1e-12 relative in float64 and 1e-5 in float32 (a few ulps carried through
a formula), not bit for bit.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
import functx.random as fxr
from functx.errors import DTypeError, ShapeError

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jr = pytest.importorskip("jax.random")
jax.config.update("jax_enable_x64", True)

KEY = np.array([0, 42], np.uint32)
TOL = {np.float64: 1e-12, np.float32: 3e-5}
B = np.linspace(1.0, 3.0, 7)
AL = np.array([0.05, 0.3, 0.9, 1.0, 1.5, 4.0, 30.0, 1e3])


def close(a: Any, b: Any, dt: Any) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_allclose(a, b, rtol=TOL[dt], atol=TOL[dt] * 1e-3)


# name -> (functx call, jax call), each taking (key, dtype)
CASES: dict[str, tuple[Callable, Callable]] = {
    "exponential": (lambda k, d: fxr.exponential(k, (50,), d),
                    lambda k, d: jr.exponential(k, (50,), d)),
    "laplace": (lambda k, d: fxr.laplace(k, (50,), d), lambda k, d: jr.laplace(k, (50,), d)),
    "logistic": (lambda k, d: fxr.logistic(k, (50,), d), lambda k, d: jr.logistic(k, (50,), d)),
    "cauchy": (lambda k, d: fxr.cauchy(k, (50,), d), lambda k, d: jr.cauchy(k, (50,), d)),
    "pareto": (lambda k, d: fxr.pareto(k, B.astype(d), None, d),
               lambda k, d: jr.pareto(k, B.astype(d), None, d)),
    "lognormal": (lambda k, d: fxr.lognormal(k, d(0.5), (20,), d),
                  lambda k, d: jr.lognormal(k, d(0.5), (20,), d)),
    "rayleigh": (lambda k, d: fxr.rayleigh(k, B.astype(d), None, d),
                 lambda k, d: jr.rayleigh(k, B.astype(d), None, d)),
    "wald": (lambda k, d: fxr.wald(k, B.astype(d), None, d),
             lambda k, d: jr.wald(k, B.astype(d), None, d)),
    "weibull_min": (lambda k, d: fxr.weibull_min(k, d(2), B.astype(d), (7,), d),
                    lambda k, d: jr.weibull_min(k, d(2), B.astype(d), (7,), d)),
    "maxwell": (lambda k, d: fxr.maxwell(k, (20,), d), lambda k, d: jr.maxwell(k, (20,), d)),
    "double_sided_maxwell": (
        lambda k, d: fxr.double_sided_maxwell(k, d(1), B.astype(d), (), d),
        lambda k, d: jr.double_sided_maxwell(k, d(1), B.astype(d), (), d)),
    "triangular": (lambda k, d: fxr.triangular(k, d(0), (B / 4).astype(d), B.astype(d), None, d),
                   lambda k, d: jr.triangular(k, d(0), (B / 4).astype(d), B.astype(d), None, d)),
    "gamma": (lambda k, d: fxr.gamma(k, AL.astype(d), None, d),
              lambda k, d: jr.gamma(k, AL.astype(d), None, d)),
    "gamma_many": (lambda k, d: fxr.gamma(k, d(2.5), (500,), d),
                   lambda k, d: jr.gamma(k, d(2.5), (500,), d)),
    "loggamma": (lambda k, d: fxr.loggamma(k, AL.astype(d), None, d),
                 lambda k, d: jr.loggamma(k, AL.astype(d), None, d)),
    "beta": (lambda k, d: fxr.beta(k, AL.astype(d), d(2), None, d),
             lambda k, d: jr.beta(k, AL.astype(d), d(2), None, d)),
    "dirichlet": (lambda k, d: fxr.dirichlet(k, AL[1:].astype(d), (3,), d),
                  lambda k, d: jr.dirichlet(k, AL[1:].astype(d), (3,), d)),
    "chisquare": (lambda k, d: fxr.chisquare(k, AL[1:].astype(d), None, d),
                  lambda k, d: jr.chisquare(k, AL[1:].astype(d), None, d)),
    "t": (lambda k, d: fxr.t(k, AL[1:].astype(d), None, d),
          lambda k, d: jr.t(k, AL[1:].astype(d), None, d)),
    "f": (lambda k, d: fxr.f(k, AL[1:].astype(d), d(3), None, d),
          lambda k, d: jr.f(k, AL[1:].astype(d), d(3), None, d)),
    "generalized_normal": (lambda k, d: fxr.generalized_normal(k, 1.5, (30,), d),
                           lambda k, d: jr.generalized_normal(k, 1.5, (30,), d)),
    "ball": (lambda k, d: fxr.ball(k, 3, 2, (5,), d), lambda k, d: jr.ball(k, 3, 2, (5,), d)),
}


# JAX compiles its Gamma sampler (nested while loops) for several seconds per dtype and
# shape, so the samplers built on it are compared in float64 only (gamma in both).
GAMMA_FAMILY = {"gamma_many", "loggamma", "beta", "dirichlet", "chisquare", "t", "f",
                "generalized_normal", "ball"}
PAIRS = [(name, dt) for name in sorted(CASES) for dt in (np.float64, np.float32)
         if dt == np.float64 or name not in GAMMA_FAMILY]


@pytest.mark.parametrize("name,dt", PAIRS,
                         ids=[f"{n}-{np.dtype(d).name}" for n, d in PAIRS])
def test_matches_jax(name: str, dt: Any) -> None:
    ours, theirs = CASES[name]
    for seed in (0, 7):
        k = fxr.key(seed)
        close(ours(k, dt), theirs(jnp.asarray(k), dt), dt)


@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_integer_samplers_match_jax_exactly(dt: Any) -> None:
    jk = jnp.asarray(KEY)
    assert np.array_equal(fxr.rademacher(KEY, (100,), dt), jr.rademacher(jk, (100,), dt))
    p = (B / 4).astype(np.float64)
    assert np.array_equal(fxr.geometric(KEY, p, None, dt), jr.geometric(jk, p, None, dt))


def test_gamma_gradient_matches_jax() -> None:
    """The implicit reparameterization gradient, in both the plain and the log space."""
    jk = jnp.asarray(KEY)
    for ours, theirs in ((fxr.gamma, jr.gamma), (fxr.loggamma, jr.loggamma)):
        g = fx.grad(lambda a: fnp.sum(ours(KEY, a)))(AL)
        gj = jax.grad(lambda a: jnp.sum(theirs(jk, a)))(jnp.asarray(AL))
        np.testing.assert_allclose(g, gj, rtol=1e-9)


def test_gamma_gradient_is_the_inverse_cdf_derivative() -> None:
    """dx/da = -(dP/da)/(dP/dx) at the drawn sample (central differences of SciPy's
    regularized incomplete gamma for dP/da), including x above a (continued fraction)."""
    import scipy.special as sp

    a = np.array([0.5, 2.0, 7.5, 40.0])
    x = np.array([0.2, 5.0, 3.0, 60.0])  # below and above a, small and large
    from functx.primitives.random_gamma import random_gamma_grad

    got = np.asarray(random_gamma_grad(a, x))
    h = 1e-6 * a
    dp_da = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    dp_dx = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    np.testing.assert_allclose(got, -dp_da / dp_dx, rtol=1e-6)


@pytest.mark.parametrize("name", ["gamma", "beta", "t", "wald", "triangular"])
def test_jit_and_vmap_match_eager(name: str) -> None:
    ours, _ = CASES[name]
    keys = fxr.split(KEY, 3)
    eager = np.stack([np.asarray(ours(k, np.float64)) for k in keys])
    batched = fx.vmap(lambda k: ours(k, np.float64))(keys)
    jitted = fx.jit(lambda k: ours(k, np.float64))(keys[1])
    np.testing.assert_allclose(batched, eager, rtol=1e-14)
    np.testing.assert_allclose(jitted, eager[1], rtol=1e-14)


def test_parameter_gradients_are_finite_differences_of_reparameterized_samples() -> None:
    """Samplers that are smooth functions of their parameters for a fixed key."""
    k = fxr.key(3)
    for fn in (lambda s: fxr.lognormal(k, s, (5,)), lambda s: fxr.rayleigh(k, s, (5,)),
               lambda s: fxr.pareto(k, s, (5,)), lambda s: fxr.wald(k, s, (5,))):
        s0, eps = 1.3, 1e-6
        g = fx.grad(lambda s: fnp.sum(fn(s)))(s0)
        fd = (np.sum(fn(s0 + eps)) - np.sum(fn(s0 - eps))) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_statistics() -> None:
    """Means of large samples are right (a check independent of JAX)."""
    k = fxr.key(11)
    n = 200_000
    for sample, mean in ((fxr.exponential(k, (n,)), 1.0), (fxr.gamma(k, 3.0, (n,)), 3.0),
                         (fxr.beta(k, 2.0, 6.0, (n,)), 0.25), (fxr.chisquare(k, 4.0, (n,)), 4.0),
                         (fxr.laplace(k, (n,)), 0.0), (fxr.logistic(k, (n,)), 0.0),
                         (fxr.rayleigh(k, 2.0, (n,)), 2.0 * np.sqrt(np.pi / 2))):
        x = np.asarray(sample)
        assert abs(x.mean() - mean) < 6 * x.std() / np.sqrt(n)
    d = np.asarray(fxr.dirichlet(k, np.array([1.0, 2.0, 3.0]), (n,)))
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(d.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=5e-3)
    r = np.asarray(fxr.ball(k, 4, 2.0, (20_000,)))
    assert (np.linalg.norm(r, axis=-1) <= 1).all()


def test_errors_name_the_sampler() -> None:
    with pytest.raises(DTypeError, match="gamma"):
        fxr.gamma(KEY, 1.0, (3,), np.int32)
    with pytest.raises(ShapeError, match="pareto"):
        fxr.pareto(KEY, np.ones(3), (4,))
    with pytest.raises(DTypeError, match="geometric"):
        fxr.geometric(KEY, 0.5, (3,), np.float32)
    with pytest.raises(ShapeError, match="dirichlet"):
        fxr.dirichlet(KEY, 1.0)


def test_second_derivatives_in_the_shape_parameter_raise() -> None:
    with pytest.raises(fx.GradError, match="random_gamma_grad"):
        fx.grad(fx.grad(lambda a: fxr.gamma(KEY, a)))(2.0)


def test_counting_samplers_match_jax_exactly() -> None:
    """poisson (both algorithms), binomial (inversion and BTRS, both sides of p = 1/2),
    multinomial and choice (every mode) draw JAX's values."""
    k = fxr.key(3)
    jk = jnp.asarray(k)
    lam = np.array([0.0, 0.5, 3.0, 9.9, 10.0, 40.0, 1000.0])
    assert np.array_equal(fxr.poisson(k, lam), jr.poisson(jk, lam))
    n = np.array([0.0, 5.0, 20.0, 100.0, 1000.0])
    p = np.array([0.1, 0.5, 0.7, 0.3, 0.9])
    assert np.array_equal(fxr.binomial(k, n, p), jr.binomial(jk, n, p))
    probs = np.array([0.2, 0.3, 0.5])
    assert np.array_equal(fxr.multinomial(k, 20.0, probs), jr.multinomial(jk, 20.0, probs))
    w = np.array([0.1, 0.2, 0.3, 0.4])
    for kw in ({}, {"replace": False}, {"p": w}, {"replace": False, "p": w}):
        assert np.array_equal(fxr.choice(k, 4, (3,), **kw), jr.choice(jk, 4, (3,), **kw)), kw
    arr = np.arange(12.0).reshape(4, 3)
    assert np.array_equal(fxr.choice(k, arr, (2,), replace=False),
                          jr.choice(jk, arr, (2,), replace=False))


def test_poisson_under_jit_and_vmap() -> None:
    keys = fxr.split(KEY, 3)
    lam = np.array([0.5, 30.0])
    eager = np.stack([np.asarray(fxr.poisson(k, lam)) for k in keys])
    assert np.array_equal(fx.vmap(lambda k: fxr.poisson(k, lam))(keys), eager)
    assert np.array_equal(fx.jit(lambda k: fxr.poisson(k, lam))(keys[2]), eager[2])


@pytest.mark.parametrize("method", ["cholesky", "eigh", "svd"])
def test_multivariate_normal_matches_jax(method: str) -> None:
    k = fxr.key(4)
    jk = jnp.asarray(k)
    mean = np.array([1.0, -2.0, 0.5])
    cov = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 0.5]])
    close(fxr.multivariate_normal(k, mean, cov, (4,), method=method),
          jr.multivariate_normal(jk, mean, cov, (4,), method=method), np.float64)
    g = fx.grad(lambda c: fnp.sum(fxr.multivariate_normal(k, mean, c, (4,), method=method)))(cov)
    gj = jax.grad(lambda c: jnp.sum(jr.multivariate_normal(jk, mean, c, (4,), method=method)))(
        jnp.asarray(cov))
    np.testing.assert_allclose(g, gj, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n,m", [(3, 3), (4, 2), (2, 4)])
def test_orthogonal_matches_jax(n: int, m: int) -> None:
    k = fxr.key(5)
    q = np.asarray(fxr.orthogonal(k, n, (2,), m=m))
    close(q, jr.orthogonal(jnp.asarray(k), n, (2,), m=m), np.float64)
    small = min(n, m)
    gram = q.swapaxes(-1, -2) @ q if n >= m else q @ q.swapaxes(-1, -2)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(small), gram.shape), atol=1e-12)


def test_multivariate_normal_errors() -> None:
    with pytest.raises(ShapeError, match="multivariate_normal"):
        fxr.multivariate_normal(KEY, np.zeros(3), np.eye(2))
    with pytest.raises(ValueError, match="method"):
        fxr.multivariate_normal(KEY, np.zeros(2), np.eye(2), method="qr")


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_gamma_compiled_splits_give_the_numpy_paths_values(dt: Any, monkeypatch: Any) -> None:
    """Large draws take the compiled key splits (functx.primitives.bits.threefry_split)
    and rounds that skip the keys nobody reads; with the compiled block functions off, the
    NumPy block function on every key: the same samples, bit for bit (a below and above 1,
    log space, and shape parameters small enough that the rejection loop and the
    positive-v redraw run)."""
    from functx.primitives import bits

    a = np.concatenate([np.full(9000, 2.5), np.full(9000, 0.3), np.full(2000, 1e-3),
                        np.linspace(0.01, 40, 4000)]).astype(dt)
    got = [np.asarray(fxr.gamma(KEY, a, None, dt)), np.asarray(fxr.loggamma(KEY, a, None, dt))]
    monkeypatch.setattr(bits, "NUMBA_MIN_SIZE", 1 << 40)  # threefry and splits in NumPy
    want = [np.asarray(fxr.gamma(KEY, a, None, dt)), np.asarray(fxr.loggamma(KEY, a, None, dt))]
    for g, w in zip(got, want):
        assert g.dtype == np.dtype(dt)
        np.testing.assert_array_equal(g, w)
