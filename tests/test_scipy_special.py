"""functx.scipy.special against jax.scipy.special and scipy.special.

* Values in float64 and float32 against SciPy (float32: SciPy's float32 loop where it has
  one) and against JAX (float64 under ``jax.enable_x64``), dtypes kept.
* Gradients (and forward-mode derivatives) against JAX's in float64 and float32.
* Edge values (0, inf, NaN, negative domains, poles) against SciPy.
* Transforms (jit, vmap, hessian), errors (derivatives that are not implemented, bad
  dtypes and arguments).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest
import scipy.special as sc

import functx as fx
import functx.numpy as fnp
from functx.errors import ArgumentError, ArgumentTypeError, DTypeError, GradError
from functx.scipy import special as fs

jax = pytest.importorskip("jax")
jsp = pytest.importorskip("jax.scipy.special")

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _jax_op_by_op():
    """JAX references run op by op: each op compiles once for the whole file, where a
    jitted reference (truncnorm's) would compile per test (most of the file's time)."""
    with jax.disable_jit():
        yield


def u(lo: float, hi: float, n: int = 7) -> np.ndarray:
    return RNG.uniform(lo, hi, n)


# name -> (argument arrays (float64), differentiable argnums, SciPy reference or None)
CASES: dict[str, tuple[Callable[[], tuple], tuple[int, ...], Callable | None]] = {
    "erf": (lambda: (u(-3, 3),), (0,), sc.erf),
    "erfc": (lambda: (u(-3, 3),), (0,), sc.erfc),
    "erfinv": (lambda: (u(-0.95, 0.95),), (0,), sc.erfinv),
    "erfcx": (lambda: (u(-2, 8),), (0,), sc.erfcx),
    "gammaln": (lambda: (u(0.1, 8),), (0,), sc.gammaln),
    "gamma": (lambda: (u(0.1, 5),), (0,), sc.gamma),
    "digamma": (lambda: (u(0.2, 6),), (0,), sc.digamma),
    "betaln": (lambda: (u(0.3, 5), u(0.3, 5)), (0, 1), sc.betaln),
    "betainc": (lambda: (u(0.5, 4), u(0.5, 4), u(0.05, 0.95)), (2,), sc.betainc),
    "gammainc": (lambda: (u(0.3, 4), u(0.1, 5)), (0, 1), sc.gammainc),
    "gammaincc": (lambda: (u(0.3, 4), u(0.1, 5)), (0, 1), sc.gammaincc),
    "xlogy": (lambda: (u(-2, 2), u(0.1, 3)), (0, 1), sc.xlogy),
    "xlog1py": (lambda: (u(-2, 2), u(-0.9, 3)), (0, 1), sc.xlog1py),
    "expit": (lambda: (u(-8, 8),), (0,), sc.expit),
    "logit": (lambda: (u(0.02, 0.98),), (0,), sc.logit),
    "ndtr": (lambda: (u(-6, 6),), (0,), sc.ndtr),
    "ndtri": (lambda: (u(0.01, 0.99),), (0,), sc.ndtri),
    "log_ndtr": (lambda: (u(-30, 6),), (0,), sc.log_ndtr),
    "i0": (lambda: (u(-5, 5),), (0,), sc.i0),
    "i0e": (lambda: (u(-5, 5),), (0,), sc.i0e),
    "i1": (lambda: (u(-5, 5),), (0,), sc.i1),
    "i1e": (lambda: (u(-5, 5),), (0,), sc.i1e),
    "entr": (lambda: (u(0.05, 3),), (0,), sc.entr),
    "kl_div": (lambda: (u(0.05, 3), u(0.05, 3)), (0, 1), sc.kl_div),
    "rel_entr": (lambda: (u(0.05, 3), u(0.05, 3)), (0, 1), sc.rel_entr),
    "zeta": (lambda: (u(1.5, 5), u(0.3, 4)), (0, 1), sc.zeta),
    "logsumexp": (lambda: (u(-5, 5),), (0,), sc.logsumexp),
    "softmax": (lambda: (u(-5, 5),), (0,), sc.softmax),
    "log_softmax": (lambda: (u(-5, 5),), (0,), sc.log_softmax),
}

# Relative tolerances against the references, by dtype.
RTOL = {np.float64: 1e-9, np.float32: 2e-5}


def jax_fn(name: str) -> Callable:
    return getattr(jsp, name)


def cast(args: tuple, dtype: Any) -> tuple:
    return tuple(np.asarray(a, dtype) for a in args)


def close(got: Any, want: Any, rtol: float, atol: float = 0.0, what: str = "") -> None:
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_scipy_and_jax(name: str, dtype: Any) -> None:
    make, _, ref = CASES[name]
    args = cast(make(), dtype)
    got = getattr(fs, name)(*args)
    assert np.asarray(got).dtype == dtype, f"{name}: dtype {np.asarray(got).dtype}"
    close(got, ref(*[a.astype(np.float64) for a in args]), RTOL[dtype], 1e-300, name)
    if dtype == np.float32:
        return  # (float32 against JAX: the gradient test)
    with jax.enable_x64(True):
        want = jax_fn(name)(*args)
    close(got, want, 10 * RTOL[dtype], 1e-13, name)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_jax(name: str, dtype: Any) -> None:
    make, argnums, _ = CASES[name]
    args = cast(make(), dtype)
    w = np.linspace(0.5, 1.5, np.size(args[0]))  # a non-uniform cotangent

    def loss(mod: Any, f: Callable) -> Callable:
        return lambda *xs: mod.sum(f(*xs) * w.astype(dtype))

    got = fx.grad(loss(fnp, getattr(fs, name)), argnums=argnums)(*args)
    with jax.enable_x64(dtype == np.float64):
        want = jax.grad(loss(jax.numpy, jax_fn(name)), argnums=argnums)(*args)
    for i, g, wv in zip(argnums, got, want):
        assert np.asarray(g).dtype == dtype, f"{name}: gradient {i} dtype"
        close(g, wv, 50 * RTOL[dtype], 1e-5 if dtype == np.float32 else 1e-11,
              f"{name}: gradient {i}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_mode_matches_reverse(name: str) -> None:
    make, argnums, _ = CASES[name]
    args = make()
    tangents = tuple(RNG.standard_normal(np.shape(a)) if i in argnums else np.zeros_like(a)
                     for i, a in enumerate(args))
    f = getattr(fs, name)
    if name == "betainc":  # no derivative in a and b
        def f(*xs, f=f):
            return f(*[x if i in argnums else fx.stop_gradient(x) for i, x in enumerate(xs)])
        tangents = tuple(t if i in argnums else None for i, t in enumerate(tangents))
        diff_args = [args[i] for i in argnums]
        g = lambda *xs: f(*[xs[argnums.index(i)] if i in argnums else a  # noqa: E731
                            for i, a in enumerate(args)])
        _, t_out = fx.jvp(g, tuple(diff_args), tuple(tangents[i] for i in argnums))
    else:
        _, t_out = fx.jvp(f, args, tangents)
    out, f_vjp = fx.vjp(f, *args)
    ct = RNG.standard_normal(np.shape(out))
    cts = f_vjp(ct)
    lhs = float(np.sum(np.asarray(t_out) * ct))
    rhs = math.fsum(float(np.sum(np.asarray(cts[i]) * tangents[i])) for i in argnums)
    assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(rhs)), (name, lhs, rhs)


# -- functions with extra arguments --------------------------------------------------------------

def test_polygamma_values_and_gradient() -> None:
    n = np.array([0, 1, 2, 3, 4])
    x = np.array([0.7, 1.5, 2.5, 3.3, 6.0])
    close(fs.polygamma(n, x), sc.polygamma(n, x), 1e-10)
    with jax.enable_x64(True):
        want = jax.grad(lambda v: jax.numpy.sum(jsp.polygamma(n, v)))(x)
    close(fx.grad(lambda v: fnp.sum(fs.polygamma(n, v)))(x), want, 1e-9)
    close(fx.grad(lambda v: fs.polygamma(0, v))(2.0), sc.polygamma(1, 2.0), 1e-12)
    assert fs.polygamma(1, np.float32(2.0)).dtype == np.float32
    with pytest.raises(ArgumentTypeError, match="integer dtype"):
        fs.polygamma(1.0, 2.0)


def test_multigammaln() -> None:
    a = np.array([2.0, 3.5, 10.0])
    for d in (1, 2, 5):
        close(fs.multigammaln(a + d, d), sc.multigammaln(a + d, d)
              if np.ndim(a) == 0 else [sc.multigammaln(v + d, d) for v in a], 1e-12)
        with jax.enable_x64(True):
            want = jax.grad(lambda v: jax.numpy.sum(jsp.multigammaln(v, d)))(a + d)
        close(fx.grad(lambda v: fnp.sum(fs.multigammaln(v, d)))(a + d), want, 1e-10)
    with pytest.raises(ArgumentTypeError, match="concrete int"):
        fs.multigammaln(a, 2.5)


@pytest.mark.parametrize("kw", [dict(axis=None), dict(axis=0), dict(axis=1, keepdims=True),
                                dict(axis=(0, 1))])
def test_logsumexp_options(kw: dict) -> None:
    a = RNG.standard_normal((3, 4))
    b = RNG.uniform(-1, 2, (3, 4))
    close(fs.logsumexp(a, **kw), sc.logsumexp(a, **kw), 1e-12)
    got, sign = fs.logsumexp(a, b=b, return_sign=True, **kw)
    want, want_sign = sc.logsumexp(a, b=b, return_sign=True, **kw)
    close(got, want, 1e-12)
    np.testing.assert_array_equal(sign, want_sign)
    mask = RNG.random((3, 4)) < 0.7
    bp = np.abs(b) + 0.1  # (a negative sum's value is NaN: its gradient is not compared)
    with jax.enable_x64(True):
        jw = jsp.logsumexp(a, where=mask, **kw)
        jg = jax.grad(lambda v: jax.numpy.sum(jsp.logsumexp(v, b=bp, **kw)))(a)
    close(fs.logsumexp(a, where=mask, **kw), jw, 1e-12)
    close(fx.grad(lambda v: fnp.sum(fs.logsumexp(v, b=bp, **kw)))(a), jg, 1e-10)


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 1)])
def test_softmax_axes(axis: Any) -> None:
    x = RNG.standard_normal((3, 4))
    close(fs.softmax(x, axis=axis), sc.softmax(x, axis=axis), 1e-12)
    close(fs.log_softmax(x, axis=axis), sc.log_softmax(x, axis=axis), 1e-12)
    w = RNG.standard_normal((3, 4))
    with jax.enable_x64(True):
        want = jax.grad(lambda v: jax.numpy.sum(jsp.softmax(v, axis=axis) * w))(x)
        want_l = jax.grad(lambda v: jax.numpy.sum(jsp.log_softmax(v, axis=axis) * w))(x)
    close(fx.grad(lambda v: fnp.sum(fs.softmax(v, axis=axis) * w))(x), want, 1e-10)
    close(fx.grad(lambda v: fnp.sum(fs.log_softmax(v, axis=axis) * w))(x), want_l, 1e-10)


def test_log_ndtr_series_order_is_checked() -> None:
    close(fs.log_ndtr(-40.0, series_order=5), sc.log_ndtr(-40.0), 1e-13)
    with pytest.raises(ArgumentError, match="series_order"):
        fs.log_ndtr(1.0, series_order=31)


def test_riemann_zeta_where_q_is_none() -> None:
    close(fs.zeta(np.array([2.0, 3.0, 4.5])), sc.zeta([2.0, 3.0, 4.5]), 1e-13)


# -- edge values ---------------------------------------------------------------------------------

EDGE = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -2.5, 1e-300, 1e300, 1.0, 0.5])

EDGE_UNARY = ["erf", "erfc", "erfinv", "erfcx", "gammaln", "gamma", "digamma", "expit",
              "logit", "ndtr", "ndtri", "log_ndtr", "i0", "i0e", "i1", "i1e", "entr"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", EDGE_UNARY)
def test_edge_values_match_scipy(name: str, dtype: Any) -> None:
    x = EDGE.astype(dtype)
    with np.errstate(all="ignore"):
        got = np.asarray(getattr(fs, name)(x))
        want = getattr(sc, name)(x)
    assert got.dtype == dtype
    close(got, want, RTOL[dtype], 1e-300, name)


@pytest.mark.parametrize("name", ["xlogy", "xlog1py", "kl_div", "rel_entr", "gammainc",
                                  "gammaincc", "betaln", "zeta"])
def test_binary_edge_values_match_scipy(name: str) -> None:
    vals = np.array([0.0, np.inf, -1.0, np.nan, 2.0, 1e-300, -0.5])
    x, y = (a.ravel() for a in np.meshgrid(vals, vals))
    with np.errstate(all="ignore"):
        got = getattr(fs, name)(x, y)
        want = getattr(sc, name)(x, y)
    close(got, want, 1e-12, 1e-300, name)


def test_betainc_edges_match_scipy() -> None:
    a = np.array([0.5, 2.0, 0.0, -1.0, np.nan, np.inf, 3.0])
    x = np.array([0.0, 1.0, 0.5, 0.5, 0.5, 0.5, 1.5])
    with np.errstate(all="ignore"):
        close(fs.betainc(a, 2.0, x), sc.betainc(a, 2.0, x), 1e-12, 0, "betainc")


def test_xlogy_zero_and_its_jax_gradient() -> None:
    assert float(fs.xlogy(0.0, 0.0)) == 0.0 and np.isnan(fs.xlogy(0.0, np.nan))
    gx, gy = fx.grad(fs.xlogy, argnums=(0, 1))(0.0, 2.0)
    assert gx == pytest.approx(math.log(2.0)) and gy == 0.0  # JAX's rule: log(y), x / y


def test_gradients_at_the_edges_are_finite_where_jax_is() -> None:
    x = np.array([0.0, 1e-8, -30.0, 30.0])
    for name in ("i1e", "i0e", "log_ndtr", "erfcx", "ndtr", "expit"):
        g = fx.grad(lambda v: fnp.sum(getattr(fs, name)(v)))(x)
        with jax.enable_x64(True):
            want = jax.grad(lambda v: jax.numpy.sum(jax_fn(name)(v)))(x)
        close(g, want, 1e-8, 1e-300, name)


# -- transforms and errors -----------------------------------------------------------------------

def test_jit_vmap_and_hessian() -> None:
    x = np.array([[0.4, 1.3, 2.2], [3.1, 0.9, 1.7]])

    def f(v: Any) -> Any:
        return fs.gammaln(v) + fs.erfc(v) * fs.digamma(v) + fs.xlogy(v, v) + fs.i1e(v)

    np.testing.assert_allclose(fx.jit(f)(x), f(x), rtol=1e-14)
    np.testing.assert_allclose(fx.vmap(f)(x), f(x), rtol=1e-14)
    np.testing.assert_allclose(fx.vmap(fx.grad(lambda v: fnp.sum(f(v))))(x),
                               fx.grad(lambda v: fnp.sum(f(v)))(x), rtol=1e-13)
    h = fx.hessian(lambda v: fs.gammaln(v) + fs.betaln(v, 2.0))(1.7)
    assert float(h) == pytest.approx(sc.polygamma(1, 1.7) + sc.polygamma(1, 1.7)
                                     - sc.polygamma(1, 3.7), rel=1e-10)
    hb = fx.vmap(fx.hessian(lambda v: fs.betainc(2.0, 3.0, v)))(np.array([0.2, 0.6]))
    with jax.enable_x64(True):
        want = jax.vmap(jax.hessian(lambda v: jsp.betainc(2.0, 3.0, v)))(np.array([0.2, 0.6]))
    close(hb, want, 1e-9)


def test_float32_is_computed_natively() -> None:
    x = np.linspace(0.1, 4, 50, dtype=np.float32)
    for name in ("erf", "erfc", "gammaln", "digamma", "log_ndtr", "i0e"):
        got = getattr(fs, name)(x)
        assert got.dtype == np.float32
        # the SciPy float32 loop's value exactly (not a rounded float64 result)
        np.testing.assert_array_equal(got, getattr(sc, name)(x), err_msg=name)
    trace = fx.make_trace(lambda v: fs.gammainc(np.float32(2.0), v))(x)
    assert all(v.aval.dtype == np.float32 for e in trace.eqns for v in e.outputs)


@pytest.mark.parametrize("name,argnum,args", [
    ("betainc", 0, (2.0, 3.0, 0.4)), ("betainc", 1, (2.0, 3.0, 0.4))])
def test_derivatives_that_are_not_implemented_raise(name: str, argnum: int, args: tuple) -> None:
    f = getattr(fs, name)
    with pytest.raises(GradError, match=name):
        fx.grad(f, argnums=argnum)(*args)
    with pytest.raises(GradError):
        t = tuple(1.0 if i == argnum else 0.0 for i in range(len(args)))
        fx.jvp(lambda v: f(*[v if i == argnum else a for i, a in enumerate(args)]),
               (args[argnum],), (t[argnum],))


def test_gammainc_derivatives_in_a() -> None:
    a = np.array([0.2, 0.9, 2.5, 7.0, 30.0, 3.0])
    x = np.array([0.05, 2.0, 0.7, 12.0, 28.0, 3.0])
    with jax.enable_x64(True):
        want = jax.vmap(jax.grad(jsp.gammainc))(a, x)
        want32 = jax.vmap(jax.grad(jsp.gammainc))(a.astype(np.float32), x.astype(np.float32))
    close(fx.vmap(fx.grad(fs.gammainc))(a, x), want, 1e-10)
    got32 = fx.vmap(fx.grad(fs.gammainc))(a.astype(np.float32), x.astype(np.float32))
    assert got32.dtype == np.float32
    close(got32, want32, 1e-4, 1e-6)
    # the mixed second derivative d2P/da dx exists; d2P/da2 does not (a GradError)
    h = 1e-5
    fd = (fx.grad(fs.gammainc)(2.0, 1.5 + h) - fx.grad(fs.gammainc)(2.0, 1.5 - h)) / (2 * h)
    mixed = fx.grad(lambda v: fx.grad(fs.gammainc)(2.0, v))(1.5)
    assert float(mixed) == pytest.approx(float(fd), rel=1e-6)
    with pytest.raises(GradError, match="igamma_grad_a"):
        fx.grad(fx.grad(fs.gammainc))(2.0, 1.5)
    edge = fx.vmap(fx.grad(fs.gammainc))(np.array([1.0, -1.0, np.nan]), np.array([0.0, 1.0, 1.0]))
    assert edge[0] == 0.0 and np.isnan(edge[1]) and np.isnan(edge[2])


def test_complex_and_bad_operands_raise() -> None:
    with pytest.raises(DTypeError, match="real"):
        fs.gammaln(np.array([1 + 1j]))
    with pytest.raises(DTypeError, match="real"):
        fs.xlogy(1.0, np.array([1j]))


def test_integer_operands_promote_as_scipy() -> None:
    for v, dtype in ((np.array([1, 2], np.int64), np.float64),
                     (np.array([1, 2], np.int16), np.float64),
                     (np.array([True]), np.float64)):
        got = fs.gammaln(v)
        assert got.dtype == sc.gammaln(v).dtype == dtype
        close(got, sc.gammaln(v), 1e-7)
