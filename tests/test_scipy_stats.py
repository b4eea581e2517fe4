"""functx.scipy.stats against scipy.stats and jax.scipy.stats.

* Values of every function of every distribution in float64 and float32 against SciPy and
  JAX (float64 under ``jax.enable_x64``), dtypes kept.
* Gradients in the parameters against JAX's, in float64 and float32.
* Edge values (outside the support, invalid parameters, tails), transforms, errors.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import scipy.stats as ss

import functx as fx
import functx.numpy as fnp
from functx.errors import ArgumentError, GradError, ShapeError
from functx.scipy import stats as fs

jax = pytest.importorskip("jax")
js = pytest.importorskip("jax.scipy.stats")

RNG = np.random.default_rng(3)


@pytest.fixture(autouse=True)
def _jax_op_by_op():
    """JAX references run op by op: each op compiles once for the whole file, where a
    jitted reference (truncnorm's) would compile per test (most of the file's time)."""
    with jax.disable_jit():
        yield
N = 6


def u(lo: float, hi: float, n: int = N) -> np.ndarray:
    return RNG.uniform(lo, hi, n)


def ints(lo: int, hi: int, n: int = N) -> np.ndarray:
    return RNG.integers(lo, hi, n).astype(np.float64)


LOC_SCALE = lambda: (u(-1, 1), u(0.5, 2))  # noqa: E731
X = lambda: u(-3, 3)  # noqa: E731
Q = lambda: u(0.02, 0.98)  # noqa: E731

# (family, function, argument maker, differentiable argnums)
CASES: list[tuple[str, str, Callable[[], tuple], tuple[int, ...]]] = []


def case(family: str, fns: str, make: Callable[[], tuple], argnums: tuple[int, ...]) -> None:
    for fn in fns.split():
        CASES.append((family, fn, make, argnums))


case("norm", "logpdf pdf cdf logcdf sf logsf", lambda: (X(), *LOC_SCALE()), (0, 1, 2))
case("norm", "ppf isf", lambda: (Q(), *LOC_SCALE()), (0, 1, 2))
case("laplace", "logpdf pdf cdf", lambda: (u(0.1, 3) * RNG.choice([-1, 1], N), 0.0, u(0.5, 2)),
     (0, 2))
case("cauchy", "logpdf pdf cdf logcdf sf logsf", lambda: (X(), *LOC_SCALE()), (0, 1, 2))
case("cauchy", "ppf isf", lambda: (Q(), *LOC_SCALE()), (0, 1, 2))
case("logistic", "logpdf pdf cdf sf", lambda: (X(), *LOC_SCALE()), (0, 1, 2))
case("logistic", "ppf isf", lambda: (Q(), *LOC_SCALE()), (0, 1, 2))
case("expon", "logpdf pdf cdf logcdf sf logsf", lambda: (u(1.1, 4), u(-1, 1), u(0.5, 2)),
     (0, 1, 2))
case("expon", "ppf", lambda: (Q(), *LOC_SCALE()), (0, 1, 2))
case("uniform", "logpdf pdf cdf", lambda: (u(0.1, 0.9), 0.0, 1.0), (0,))
case("uniform", "ppf", lambda: (Q(), *LOC_SCALE()), (0, 1, 2))
case("t", "logpdf pdf", lambda: (X(), u(1, 10), *LOC_SCALE()), (0, 1, 2, 3))
case("gamma", "logpdf pdf", lambda: (u(0.2, 5), u(0.5, 4), 0.0, u(0.5, 2)), (0, 1, 3))
case("gamma", "cdf logcdf sf logsf", lambda: (u(0.2, 5), u(0.5, 4), 0.0, u(0.5, 2)),
     (0, 1, 3))
case("chi2", "logpdf pdf", lambda: (u(0.2, 5), u(1, 6), 0.0, u(0.5, 2)), (0, 1, 3))
case("chi2", "cdf logcdf sf logsf", lambda: (u(0.2, 5), u(1, 6), 0.0, u(0.5, 2)), (0, 1, 3))
case("beta", "logpdf pdf", lambda: (u(0.05, 0.95), u(0.5, 4), u(0.5, 4)), (0, 1, 2))
case("beta", "cdf logcdf sf logsf", lambda: (u(0.05, 0.95), u(0.5, 4), u(0.5, 4)), (0,))
case("truncnorm", "logpdf pdf cdf logcdf sf logsf",
     lambda: (u(-0.9, 1.4), u(-2, -1), u(1.5, 3), 0.0, 1.0), (0, 1, 2))
case("bernoulli", "logpmf pmf", lambda: (ints(0, 2), u(0.05, 0.95)), (1,))
case("bernoulli", "cdf", lambda: (u(-0.5, 1.5), u(0.05, 0.95)), (1,))
case("bernoulli", "ppf", lambda: (Q(), u(0.05, 0.95)), ())
case("binom", "logpmf pmf", lambda: (ints(0, 8), 8.0, u(0.05, 0.95)), (2,))
case("poisson", "logpmf pmf cdf", lambda: (ints(0, 10), u(0.5, 8)), (1,))
case("poisson", "entropy", lambda: (u(0.3, 90),), (0,))

RTOL = {np.float64: 1e-9, np.float32: 3e-5}
# Where JAX itself is less accurate (relative tolerance against JAX), with the reason.
JAX_RTOL = {"poisson.entropy": 1e-4}  # JAX's asymptotic series stops at 1/(12 mu)
IDS = [f"{f}.{fn}" for f, fn, _, _ in CASES]


def cast(args: tuple, dtype: Any) -> tuple:
    return tuple(np.asarray(a, dtype) for a in args)


def close(got: Any, want: Any, rtol: float, atol: float = 0.0, what: str = "") -> None:
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("family,fn,make,argnums", CASES, ids=IDS)
def test_values_match_scipy_and_jax(family: str, fn: str, make: Callable, argnums: tuple,
                                    dtype: Any) -> None:
    args = cast(make(), dtype)
    got = getattr(getattr(fs, family), fn)(*args)
    assert np.asarray(got).dtype == dtype, f"{family}.{fn}: dtype {np.asarray(got).dtype}"
    want = getattr(getattr(ss, family), fn)(*[a.astype(np.float64) for a in args])
    atol = 1e-300 if dtype == np.float64 else 1e-7
    close(got, want, RTOL[dtype], atol, f"{family}.{fn} vs scipy")
    if dtype == np.float32:
        return  # (float32 against JAX: the gradient test)
    with jax.enable_x64(True):
        want_j = getattr(getattr(js, family), fn)(*args)
    rtol = max(10 * RTOL[dtype], JAX_RTOL.get(f"{family}.{fn}", 0.0))
    close(got, want_j, rtol, atol, f"{family}.{fn} vs jax")


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("family,fn,make,argnums", [c for c in CASES if c[3]],
                         ids=[i for i, c in zip(IDS, CASES) if c[3]])
def test_gradients_match_jax(family: str, fn: str, make: Callable, argnums: tuple,
                             dtype: Any) -> None:
    args = cast(make(), dtype)
    w = np.linspace(0.5, 1.5, np.size(np.broadcast_arrays(*args)[0])).astype(dtype)

    def loss(mod: Any, f: Callable) -> Callable:
        return lambda *xs: mod.sum(f(*xs) * w)

    got = fx.grad(loss(fnp, getattr(getattr(fs, family), fn)), argnums=argnums)(*args)
    with jax.enable_x64(dtype == np.float64):
        want = jax.grad(loss(jax.numpy, getattr(getattr(js, family), fn)),
                        argnums=argnums)(*args)
    for i, g, wv in zip(argnums, got, want):
        assert np.asarray(g).dtype == dtype, f"{family}.{fn}: gradient {i} dtype"
        close(g, wv, max(50 * RTOL[dtype], JAX_RTOL.get(f"{family}.{fn}", 0.0)),
              1e-4 if dtype == np.float32 else 1e-10,
              f"{family}.{fn}: gradient {i}")


# -- multivariate ------------------------------------------------------------------------------

def spd(n: int, batch: tuple = ()) -> np.ndarray:
    b = RNG.standard_normal(batch + (n, n))
    return b @ np.swapaxes(b, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_multivariate_normal(dtype: Any) -> None:
    n = 4
    x = RNG.standard_normal((5, n)).astype(dtype)
    mean = RNG.standard_normal(n).astype(dtype)
    cov = spd(n).astype(dtype)
    got = fs.multivariate_normal.logpdf(x, mean, cov)
    assert got.dtype == dtype and got.shape == (5,)
    close(got, ss.multivariate_normal.logpdf(x, mean, cov), RTOL[dtype] * 10)
    close(fs.multivariate_normal.pdf(x, mean, cov), ss.multivariate_normal.pdf(x, mean, cov),
          RTOL[dtype] * 10)
    w = np.linspace(0.5, 1.5, 5).astype(dtype)
    g = fx.grad(lambda *a: fnp.sum(fs.multivariate_normal.logpdf(*a) * w),
                argnums=(0, 1, 2))(x, mean, cov)
    with jax.enable_x64(dtype == np.float64):
        gj = jax.grad(lambda *a: jax.numpy.sum(js.multivariate_normal.logpdf(*a) * w),
                      argnums=(0, 1, 2))(x, mean, cov)
    for a, b in zip(g, gj):
        close(a, b, 100 * RTOL[dtype], 1e-5 if dtype == np.float32 else 1e-12)


def test_multivariate_normal_batched_and_scalar_forms() -> None:
    covs = spd(3, (2,))
    x = RNG.standard_normal((2, 3))
    got = fs.multivariate_normal.logpdf(x, np.zeros(3), covs)
    want = [ss.multivariate_normal.logpdf(x[i], np.zeros(3), covs[i]) for i in range(2)]
    close(got, want, 1e-10)
    with jax.enable_x64(True):
        close(fs.multivariate_normal.logpdf(x, np.ones(3), 2.0),
              js.multivariate_normal.logpdf(x, np.ones(3), 2.0), 1e-12)
        close(fs.multivariate_normal.logpdf(0.3, 0.1, 2.0),
              js.multivariate_normal.logpdf(0.3, 0.1, 2.0), 1e-12)
    close(fx.vmap(fs.multivariate_normal.logpdf, in_axes=(0, None, 0))(x, np.zeros(3), covs),
          want, 1e-10)
    with pytest.raises(ShapeError, match="cov must have shape"):
        fs.multivariate_normal.logpdf(x, np.zeros(3), np.eye(2))
    with pytest.raises(ArgumentError, match="allow_singular"):
        fs.multivariate_normal.logpdf(x, np.zeros(3), np.eye(3), allow_singular=True)


def test_dirichlet() -> None:
    alpha = np.array([1.5, 2.0, 3.0])
    x = RNG.dirichlet(alpha, 4).T  # (K, N)
    close(fs.dirichlet.logpdf(x, alpha), [ss.dirichlet.logpdf(x[:, i], alpha) for i in range(4)],
          1e-12)
    close(fs.dirichlet.logpdf(x[:2], alpha), fs.dirichlet.logpdf(x, alpha), 1e-9)  # K-1 form
    close(fs.dirichlet.pdf(x[:, 0], alpha), ss.dirichlet.pdf(x[:, 0], alpha), 1e-12)
    with jax.enable_x64(True):
        gj = jax.grad(lambda a: jax.numpy.sum(js.dirichlet.logpdf(x, a)))(alpha)
    close(fx.grad(lambda a: fnp.sum(fs.dirichlet.logpdf(x, a)))(alpha), gj, 1e-10)
    assert fs.dirichlet.logpdf(np.array([0.5, 0.6, 0.1]), alpha) == -np.inf  # off the simplex
    with pytest.raises(ShapeError, match="K = 3"):
        fs.dirichlet.logpdf(np.ones(5) / 5, alpha)


# -- edges -------------------------------------------------------------------------------------

EDGE_X = np.array([-np.inf, -40.0, -1.0, 0.0, 1e-300, 0.5, 1.0, 40.0, np.inf, np.nan])

EDGE_CASES = [
    ("norm", "logpdf logcdf logsf cdf sf", ()), ("cauchy", "logpdf cdf sf logcdf logsf", ()),
    ("logistic", "logpdf cdf sf", ()), ("laplace", "logpdf cdf", ()),
    ("expon", "logpdf cdf sf logsf", ()), ("uniform", "logpdf cdf", ()),
    ("t", "logpdf", (2.5,)), ("gamma", "logpdf cdf sf", (2.0,)), ("gamma", "logpdf", (1.0,)),
    ("chi2", "logpdf cdf sf", (3.0,)), ("beta", "logpdf cdf sf", (2.0, 3.0)),
    ("truncnorm", "logpdf cdf sf logcdf", (-1.0, 2.0)),
]


@pytest.mark.parametrize("family,fns,params", EDGE_CASES,
                         ids=[f"{f}-{p}" for f, _, p in EDGE_CASES])
def test_edge_values_match_scipy(family: str, fns: str, params: tuple) -> None:
    for fn in fns.split():
        with np.errstate(all="ignore"):
            got = getattr(getattr(fs, family), fn)(EDGE_X, *params)
            want = getattr(getattr(ss, family), fn)(EDGE_X, *params)
        close(got, want, 1e-9, 1e-300, f"{family}.{fn}")


def test_quantiles_outside_the_unit_interval_are_nan() -> None:
    q = np.array([-0.1, 0.0, 1.0, 1.1, np.nan])
    for family in ("norm", "expon", "uniform", "cauchy", "logistic"):
        with np.errstate(all="ignore"):
            got = fs.__dict__[family].ppf(q)
            want = getattr(ss, family).ppf(q)
        close(got, want, 1e-12, 0, family)
    with jax.enable_x64(True):  # (SciPy's discrete ppf gives -1 at q = 0; JAX and functx 0)
        close(fs.bernoulli.ppf(q, 0.3), js.bernoulli.ppf(q, 0.3), 0)


def test_discrete_supports() -> None:
    k = np.array([-1.0, 0.0, 0.5, 2.0, 9.0])
    with np.errstate(all="ignore"):
        close(fs.poisson.logpmf(k, 2.0), ss.poisson.logpmf(k, 2.0), 1e-12)
        close(fs.binom.logpmf(k, 5.0, 0.4), ss.binom.logpmf(k, 5.0, 0.4), 1e-12)
        close(fs.poisson.cdf(k, 2.0), ss.poisson.cdf(k, 2.0), 1e-12)
        close(fs.binom.logpmf(0.0, 0.0, 0.4), 0.0, 0)
        close(fs.bernoulli.logpmf(k, 0.3), ss.bernoulli.logpmf(k, 0.3), 1e-12)


def test_poisson_entropy_at_zero_and_large_means() -> None:
    mu = np.array([0.0, 99.9, 100.0, 150.0, 900.0, 5000.0])
    close(fs.poisson.entropy(mu), ss.poisson.entropy(mu), 1e-9)


def test_invalid_parameters_give_nan() -> None:
    with np.errstate(all="ignore"):
        assert np.isnan(fs.beta.logpdf(0.5, -1.0, 2.0))
        assert np.isnan(fs.truncnorm.logpdf(0.5, 2.0, 1.0))
        assert np.isnan(fs.bernoulli.cdf(0.5, 1.5))


def test_tails_stay_finite() -> None:
    assert fs.norm.logcdf(-40.0) == pytest.approx(ss.norm.logcdf(-40.0), rel=1e-12)
    assert fs.norm.logsf(40.0) == pytest.approx(ss.norm.logsf(40.0), rel=1e-12)
    assert fs.cauchy.cdf(-1e12) == pytest.approx(ss.cauchy.cdf(-1e12), rel=1e-10)
    assert fs.truncnorm.logsf(8.0, -1.0, 30.0) == pytest.approx(
        ss.truncnorm.logsf(8.0, -1.0, 30.0), rel=1e-8)
    g = fx.grad(lambda v: fs.norm.logcdf(v))(-40.0)
    assert g == pytest.approx(40.025, rel=1e-3)  # pdf / cdf ~ |x| in the far tail


# -- transforms and errors ---------------------------------------------------------------------

def test_jit_vmap_and_hessian() -> None:
    x = RNG.standard_normal((3, 4))

    def nll(loc: Any, scale: Any) -> Any:
        return -fnp.sum(fs.norm.logpdf(x, loc, scale) + fs.t.logpdf(x, 4.0, loc, scale))

    g = fx.grad(nll, argnums=(0, 1))(0.3, 1.7)
    gj = fx.jit(fx.grad(nll, argnums=(0, 1)))(0.3, 1.7)
    close(gj[0], g[0], 1e-13)
    close(gj[1], g[1], 1e-13)
    h = fx.hessian(lambda s: fs.gamma.logpdf(2.0, 3.0, 0.0, s))(1.5)
    with jax.enable_x64(True):
        hj = jax.hessian(lambda s: js.gamma.logpdf(2.0, 3.0, 0.0, s))(1.5)
    close(h, hj, 1e-10)
    v = fx.vmap(lambda p: fs.binom.logpmf(np.arange(4.0), 3.0, p))(np.array([0.2, 0.7]))
    close(v, ss.binom.logpmf(np.arange(4.0)[None], 3, np.array([[0.2], [0.7]])), 1e-12)


def test_cdf_shape_parameters_without_derivatives_raise() -> None:
    with pytest.raises(GradError):
        fx.grad(lambda a: fs.beta.cdf(0.3, a, 2.0))(1.5)
    with pytest.raises(GradError):
        fx.grad(lambda b: fs.beta.sf(0.3, 1.5, b))(1.5)


def test_families_are_namespaces_with_jax_names() -> None:
    for name in fs.__all__:
        fam = getattr(fs, name)
        jfam = getattr(js, name)
        for fn in dir(fam):
            assert hasattr(jfam, fn), f"{name}.{fn} is not in jax.scipy.stats"
            assert callable(getattr(fam, fn)) and getattr(fam, fn).__doc__
        assert name in repr(fam)
