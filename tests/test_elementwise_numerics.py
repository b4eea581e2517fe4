"""Numerical edge cases of the elementwise primitives that the spec table cannot reach.

The spec table (tests/specs/elementwise.py) checks every primitive against NumPy and its VJP
against finite differences inside smooth domains. Here: erf's accuracy against math.erf and
exact values, ties (max/min), kinks and boundaries (clamp, pow at 0), rounding edge cases,
overflow-free tails, dtype rules and errors, and declared residuals.
"""
from __future__ import annotations

import decimal
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import functx as fx
from functx.errors import DTypeError
from functx.primitives import elementwise as ew
from functx.primitives import reduction as _red

D = decimal.Decimal


def total(x):
    return _red.reduce_sum(x, tuple(range(x.ndim)))


@pytest.fixture(autouse=True)
def _warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def erf_points() -> np.ndarray:
    """Many float64 points over every range erf's implementation distinguishes."""
    rng = np.random.default_rng(1234)
    parts = [
        np.logspace(-310, -1, 2000),               # subnormal to small
        rng.uniform(0.0, 0.5, 20000),               # the series range and its end at 7/16
        rng.uniform(0.4, 1.5, 20000),               # where erf = 1 - erfc loses in libms
        rng.uniform(1.5, 6.5, 20000),               # the far Taylor centres and the cut at 6
        rng.uniform(6.0, 40.0, 1000),
        np.logspace(1.6, 308, 200),
        np.arange(0, 6.5, 1 / 32),                  # centres and cell edges
        np.nextafter(7 / 16, [0.0, 1.0]), np.nextafter(6.0, [0.0, 10.0]),
    ]
    x = np.concatenate(parts)
    return np.concatenate([x, -x])


def test_erf_matches_math_erf_float64():
    x = erf_points()
    got = np.asarray(ew.erf(x))
    want = np.array([math.erf(v) for v in x])
    # 2e-16 relative; at the bottom of a binade one ulp is up to 2.2e-16 relative, and
    # math.erf itself is only within 1 ulp (not correctly rounded), so there one ulp is
    # allowed.
    tol = np.maximum(2e-16 * np.abs(want), np.spacing(np.abs(want)))
    bad = np.abs(got - want) > tol
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])
    assert (got == want).mean() > 0.9


def test_erf_is_nearly_correctly_rounded():
    import mpmath  # a test dependency (pyproject: the "test" extra)
    mpmath.mp.prec = 120
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(0, 0.5, 1500), rng.uniform(0.4, 1.5, 1500),
                        rng.uniform(1.5, 6, 1500)])
    got = np.asarray(ew.erf(x))
    exact = np.array([float(mpmath.erf(mpmath.mpf(v))) for v in x])  # correctly rounded
    assert np.all(np.abs(got - exact) <= np.spacing(exact))
    assert (got == exact).mean() > 0.95


def test_erf_special_values_and_symmetry():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-320, -1e-320, 6.0, 1e300])
    got = np.asarray(ew.erf(x))
    np.testing.assert_array_equal(got[[0, 1, 2, 3, 7, 8]], [0.0, -0.0, 1.0, -1.0, 1.0, 1.0])
    assert np.signbit(got[1]) and not np.signbit(got[0])
    assert np.isnan(got[4])
    assert got[5] == math.erf(1e-320) and got[6] == -got[5]
    y = erf_points()
    np.testing.assert_array_equal(np.asarray(ew.erf(-y)), -np.asarray(ew.erf(y)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_erf_small_floats_round_the_float64_result(dtype):
    x = np.linspace(-5, 5, 4001).astype(dtype)
    got = ew.erf(x)
    assert got.dtype == dtype
    want = np.array([math.erf(float(v)) for v in x]).astype(dtype)
    np.testing.assert_array_equal(got, want)


def test_erf_gradient_accurate_in_the_tails():
    # 2/sqrt(pi) * exp(-x*x) evaluated exactly (the input is exact; x*x is not rounded).
    x = np.concatenate([np.linspace(-6, 6, 601), [0.3, 5.9999, 26.0, 1e10, np.inf]])
    g = np.asarray(fx.grad(lambda v: total(ew.erf(v)))(x))
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        two_over_rtpi = D(2) / D("3.14159265358979323846264338327950288419716939937510").sqrt()
        want = np.array([float(two_over_rtpi * (-(D(v) * D(v))).exp()) if np.isfinite(v)
                         else 0.0 for v in x])
    np.testing.assert_allclose(g, want, rtol=6e-16, atol=0)


def test_logistic_tails_no_overflow_and_accurate():
    x = np.concatenate([np.linspace(-740, 740, 2961), [-np.inf, np.inf, -1e308, 1e308]])
    got = np.asarray(ew.logistic(x))  # warnings are errors here
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        want = np.array([float(1 / (1 + (-D(v)).exp())) if abs(v) < 1000 else float(v > 0)
                         for v in x])
    np.testing.assert_allclose(got, want, rtol=4.5e-16, atol=1e-323)  # subnormals: 2 ulp
    assert np.isnan(ew.logistic(np.array(np.nan)))
    g = np.asarray(fx.grad(lambda v: total(ew.logistic(v)))(np.array([-1000.0, 0.0, 1000.0])))
    np.testing.assert_array_equal(g, [0.0, 0.25, 0.0])


@pytest.mark.parametrize("op, pick", [(ew.max, np.maximum), (ew.min, np.minimum)])
def test_max_min_split_ties_evenly(op, pick):
    x = np.array([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(fx.grad(lambda v: total(op(v, v)))(x), [1.0, 1.0, 1.0])
    y = np.array([1.0, 0.0, 5.0])  # tie, x wins for max, y wins for max
    gx, gy = fx.grad(lambda a, b: total(op(a, b)), argnums=(0, 1))(x, y)
    x_wins = (pick(x, y) == x).astype(float)
    y_wins = (pick(x, y) == y).astype(float)
    tie = x == y
    np.testing.assert_array_equal(gx, np.where(tie, 0.5, x_wins))
    np.testing.assert_array_equal(gy, np.where(tie, 0.5, y_wins))
    # Broadcasting: a scalar tied with every entry gets half of each.
    g = fx.grad(lambda s: total(op(s, np.ones(4))))(np.array(1.0))
    assert g == 2.0


def test_max_nan_gives_no_gradient():
    gx, gy = fx.grad(lambda a, b: total(ew.max(a, b)), argnums=(0, 1))(
        np.array([np.nan, 1.0]), np.array([1.0, np.nan]))
    np.testing.assert_array_equal(gx, [0.0, 0.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0])


def test_abs_gradient_is_sign():
    g = fx.grad(lambda v: total(ew.abs(v)))(np.array([-2.0, -0.0, 0.0, 3.0]))
    np.testing.assert_array_equal(g, [-1.0, 0.0, 0.0, 1.0])


def test_round_half_away_from_zero_edge_cases():
    x = np.array([0.49999999999999994, 0.5, -0.5, 1.5, 2.5, -2.5, -0.3, 2.0**52 + 1,
                  2.0**53 - 1, -(2.0**52) - 1, 4503599627370495.5, 1e300, -0.0, 0.0,
                  np.inf, -np.inf, np.nan])
    got = np.asarray(ew.round(x, rounding_method="half_away_from_zero"))
    want = np.array([float(D(v).to_integral_value(rounding=decimal.ROUND_HALF_UP))
                     if np.isfinite(v) else v for v in x])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # -0.3 -> -0.0
    f32 = x[np.abs(x) < 1e30].astype(np.float32)
    got32 = ew.round(f32, rounding_method="half_away_from_zero")
    assert got32.dtype == np.float32
    want32 = np.array([float(D(float(v)).to_integral_value(rounding=decimal.ROUND_HALF_UP))
                       for v in f32]).astype(np.float32)
    np.testing.assert_array_equal(got32, want32)


def test_round_half_to_even_is_numpy_round():
    x = np.concatenate([np.arange(-5, 5.5, 0.5), [0.49999999999999994, 2.0**52 + 1, np.inf]])
    np.testing.assert_array_equal(ew.round(x), np.round(x))
    with pytest.raises(ValueError, match="rounding_method"):
        ew.round(x, rounding_method="up")


def test_pow_gradients_at_zero_are_finite():
    x = np.array([0.0, 0.0, 0.0, 2.0, 0.0])
    y = np.array([0.5, 2.0, -1.0, 0.0, 0.0])
    with np.errstate(divide="ignore"):  # 0 ** -1 = inf warns in NumPy's power too
        gx, gy = fx.grad(lambda a, b: total(ew.pow(a, b)), argnums=(0, 1))(x, y)
    # d/dy x**y at x == 0 is taken as 0 (not nan); d/dx at y == 0 is 0.
    np.testing.assert_array_equal(gy, [0.0, 0.0, 0.0, math.log(2.0), 0.0])
    assert gx[1] == 0.0 and gx[3] == 0.0 and gx[4] == 0.0
    assert gx[0] == np.inf  # 0.5 * 0**-0.5: the derivative really is infinite there


def test_integer_pow_exact_and_differentiable_to_any_order():
    x = np.array([3, -7, 2, 0, 1], dtype=np.int64)
    got = ew.integer_pow(x, y=21)
    assert got.dtype == np.int64
    assert got.tolist() == [int(v) ** 21 if abs(int(v) ** 21) < 2**63 else None for v in x]
    f = np.array([0.3, -1.7, 2.5, 1e-3])
    for y in (-5, -2, 2, 9):
        want = [float(Fraction(v) ** y) for v in f]  # correctly rounded
        got = np.asarray(ew.integer_pow(f, y=y))
        assert np.all(np.abs(got - want) <= np.spacing(np.abs(want)))
    # d^3/dx^3 x^5 = 60 x^2, exactly representable here.
    d3 = fx.grad(fx.grad(fx.grad(lambda v: ew.integer_pow(v, y=5))))(np.array(1.5))
    assert d3 == 60 * 1.5**2
    assert fx.grad(lambda v: ew.integer_pow(v, y=0))(np.array(2.0)) == 0.0
    with pytest.raises(DTypeError, match="negative power"):
        fx.eval_shape(lambda v: ew.integer_pow(v, y=-1), x)


def test_integer_div_and_rem_follow_numpy():
    x = np.array([-7, 7, -7, 7, 0, 5], dtype=np.int32)
    y = np.array([2, 2, -2, -2, 3, 1], dtype=np.int32)
    np.testing.assert_array_equal(ew.div(x, y), x // y)
    np.testing.assert_array_equal(ew.rem(x, y), x % y)
    assert ew.div(x, y).dtype == np.int32 and ew.rem(x, y).dtype == np.int32
    xf, yf = x.astype(float), y.astype(float)
    np.testing.assert_array_equal(ew.rem(xf, yf), np.remainder(xf, yf))  # sign of divisor
    np.testing.assert_array_equal(ew.div(xf, yf), xf / yf)


def test_rem_gradient_for_the_divisor_is_minus_the_floored_quotient():
    x, y = np.array([7.5, -7.5, 7.5]), np.array([2.0, 2.0, -2.0])
    gx, gy = fx.grad(lambda a, b: total(ew.rem(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gy, -np.floor(x / y))


def test_clamp_gradient_semantics():
    # JAX's lax.clamp: x gets it strictly inside, lo below, hi above, nobody at a tie.
    lo, hi = np.array(-1.0), np.array(1.0)
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    glo, gx, ghi = fx.grad(lambda a, b, c: total(ew.clamp(a, b, c)), argnums=(0, 1, 2))(
        lo, x, hi)
    np.testing.assert_array_equal(gx, [0.0, 0.0, 1.0, 0.0, 0.0])
    assert glo == 1.0 and ghi == 1.0
    np.testing.assert_array_equal(ew.clamp(lo, x, hi), np.clip(x, lo, hi))


def test_select_routes_cotangents_and_checks_dtypes():
    pred = np.array([[True], [False]])
    t, f = np.arange(3.0), np.array(5.0)
    gt, gf = fx.grad(lambda a, b: total(ew.select(pred, a, b)), argnums=(0, 1))(t, f)
    np.testing.assert_array_equal(gt, [1.0, 1.0, 1.0])
    assert gf == 3.0
    with pytest.raises(DTypeError, match="bool predicate"):
        fx.eval_shape(ew.select, pred.astype(np.int32), t, t)
    with pytest.raises(DTypeError, match="one dtype"):
        fx.eval_shape(ew.select, pred, t, t.astype(np.float32))


def test_convert_element_type_gradients_and_aliasing():
    x = np.array([1.5, -2.0, 3.25])  # a writeable user array
    g = fx.grad(lambda v: total(ew.mul(ew.convert_element_type(v, new_dtype=np.float32),
                                       np.float32(3))))(x)
    assert g.dtype == np.float64
    np.testing.assert_array_equal(g, [3.0, 3.0, 3.0])
    g = fx.grad(lambda v: total(ew.convert_element_type(
        ew.convert_element_type(v, new_dtype=np.int32), new_dtype=np.float64)))(x)
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0])
    same = ew.convert_element_type(x, new_dtype=np.float64)
    assert x.flags.writeable and not same.flags.writeable
    np.testing.assert_array_equal(ew.convert_element_type(np.array([1 + 2j]), new_dtype=float),
                                  [1.0])


def test_dtype_errors(monkeypatch):
    f, i, b = np.ones(2), np.ones(2, np.int64), np.ones(2, bool)
    cases = [
        (ew.lt, (f, f.astype(np.float32)), "one dtype"),
        (ew.and_, (f, f), "bool or integer"),
        (ew.not_, (f,), "bool or integer"),
        (ew.sin, (i,), "floating-point"),
        (ew.erf, (f.astype(complex),), "real floating-point"),
        (ew.floor, (i,), "real floating-point"),
        (ew.sign, (b,), "integer or real"),
        (ew.clamp, (f, f, i), "one dtype"),
        (ew.select, (i, f, f), "bool predicate"),
        (lambda v: ew.integer_pow(v, y=2), (b,), "numeric"),
    ]
    for fn, args, words in cases:
        with pytest.raises(DTypeError, match=words):
            fx.eval_shape(fn, *args)
    # Eagerly, with the eager checks on (the test suite's default), the same errors.
    monkeypatch.setattr(fx.tracing, "CHECK_EAGER", True)
    for fn, args, words in cases:
        with pytest.raises(DTypeError, match=words):
            fn(*args)
    assert fx.eval_shape(ew.eq, i, i).dtype == np.bool_
    assert fx.eval_shape(ew.xor, b, b).dtype == np.bool_


def test_no_warnings_at_domain_edges():
    assert ew.rsqrt(np.array(0.0)) == np.inf
    ew.erf(np.array([np.inf, -np.inf, np.nan, 1e308]))
    ew.round(np.array([np.inf, np.nan]), rounding_method="half_away_from_zero")
    ew.is_finite(np.array([np.inf, np.nan]))


@pytest.mark.parametrize("name", ["exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin",
                                  "cos", "tan", "tanh", "sinh", "cosh", "asin", "acos",
                                  "atan"])
def test_holomorphic_vjps_on_complex_inputs(name):
    # JAX's convention: the VJP of a holomorphic f is ct * f'(z), no conjugate.
    fn = getattr(ew, name)
    z = np.array([0.3 + 0.4j, -0.2 + 0.1j])
    ct = np.array([1.0 - 0.5j, 0.25 + 2j])
    _, f_vjp = fx.vjp(fn, z)
    h = 1e-6
    deriv = (np.asarray(fn(z + h)) - np.asarray(fn(z - h))) / (2 * h)
    np.testing.assert_allclose(f_vjp(ct)[0], ct * deriv, rtol=1e-8)


def test_vjps_read_the_declared_residuals():
    for p in (ew.tanh_p, ew.sqrt_p, ew.logistic_p, ew.expm1_p, ew.exp_p, ew.tan_p):
        assert p.save_output and p.saved_input_indices(1) == ()
    assert ew.rsqrt_p.save_output and ew.rsqrt_p.saved_input_indices(1) == (0,)
    assert ew.select_p.saved_input_indices(3) == (0,)


def test_erf_float32_compiled_and_numpy_paths_agree(monkeypatch) -> None:
    """float32 takes the compiled loop (one core, or all from ERF32_PARALLEL_MIN_SIZE);
    with FUNCTX_NUMBA=0 the same float64 operations run in NumPy: the same bits."""
    from functx.primitives.elementwise import _transcendental as tr

    rng = np.random.default_rng(3)
    for n in (7, tr.ERF32_PARALLEL_MIN_SIZE):
        x = rng.standard_normal(n).astype(np.float32) * 3
        x[:7] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3.95]
        compiled = np.asarray(tr.erf(x))
        with monkeypatch.context() as m:
            m.setenv("FUNCTX_NUMBA", "0")
            plain = np.asarray(tr.erf(x))
        assert compiled.dtype == plain.dtype == np.float32
        assert np.array_equal(compiled.view(np.uint32), plain.view(np.uint32))


def test_erf_float32_within_half_an_ulp_and_a_hair():
    """The float32 erf (a float64 polynomial rounded once) against scipy's float64 erf on
    millions of points: every result within 0.5001 ulp of the exact value (faithful), and
    all but a few per million correctly rounded. Points: a normal sweep, a dense grid over
    [-4.5, 4.5] (both erfc intervals and the switch points), the small-argument range down
    to subnormals, and the tail where float32 erf is 1."""
    import scipy.special as sc

    rng = np.random.default_rng(11)
    x = np.concatenate([
        rng.standard_normal(1_000_000) * 2,
        np.linspace(-4.5, 4.5, 1_000_001),
        np.ldexp(rng.uniform(1, 2, 100_000), rng.integers(-149, 0, 100_000)),
        rng.uniform(3.5, 10, 10_000),
        [0.9999999, 1.0, 1.0000001, 2.4999998, 2.5, 2.5000002, 3.9999998, 4.0, 1e30],
    ]).astype(np.float32)
    x = np.concatenate([x, -x])
    got = np.asarray(ew.erf(x))
    exact = sc.erf(x.astype(np.float64))  # within ~1e-16 relative: far below a float32 ulp
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - exact) / ulp
    assert err.max() < 0.5001, err.max()
    assert np.count_nonzero(got != exact.astype(np.float32)) <= 8e-6 * x.size
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x))
