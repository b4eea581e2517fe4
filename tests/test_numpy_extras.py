"""The rest of jax.numpy in functx.numpy (issue 15, item 6), against jax.numpy and NumPy.

* A table of differentiable cases: values against ``jax.numpy`` (float64), ``jit`` against
  eager, and the gradient of a weighted sum of the first output against ``jax.grad``.
* Values of the non-differentiable functions (integers, bits, counts, indices, sets)
  against NumPy, eagerly and (where shapes are static) under ``jit``.
* ``vmap`` against a loop for a sample.
* Edge cases (empty inputs, NaNs, all-NaN slices, subnormals) and the errors, which are
  FunctxErrors with full-sentence messages.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx.errors import ConcretizationError, FunctxError

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


RNG = np.random.default_rng(0)


def _leaves(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return [leaf for e in x for leaf in _leaves(e)]
    return [x]


def _close(got: Any, want: Any, rtol: float = 1e-9, dtype: bool = True) -> None:
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w), (got, want)
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, (a.shape, b.shape)
        if dtype:
            assert a.dtype == b.dtype, (a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)


def _nan_data(shape: tuple) -> np.ndarray:
    x = RNG.normal(size=shape)
    x[RNG.uniform(size=shape) < 0.25] = np.nan
    return x


def _weights_like(x: Any) -> np.ndarray:
    return np.cos(np.arange(np.asarray(x).size)).reshape(np.shape(x)) + 1.5


# name, functx function, jax function (same signature), args, argnums to differentiate
X = RNG.normal(size=(3, 5))
XN = _nan_data((4, 6))
XN[1] = np.nan
P = RNG.normal(size=4)
XS = np.sort(RNG.normal(size=7))
FP = RNG.normal(size=7)
XQ = np.concatenate([RNG.uniform(-2.5, 2.5, size=9), XS[2:4]])
PH = np.cumsum(RNG.normal(size=12) * 2.5)

DIFF_CASES: list[tuple[str, Callable, Callable, tuple, tuple]] = [
    ("nansum", lambda a: fnp.nansum(a, axis=1), lambda a: jnp.nansum(a, axis=1), (XN,), (0,)),
    ("nanmean", lambda a: fnp.nanmean(a, axis=0), lambda a: jnp.nanmean(a, axis=0), (XN,),
     (0,)),
    ("nanvar", lambda a: fnp.nanvar(a, axis=1, ddof=1),
     lambda a: jnp.nanvar(a, axis=1, ddof=1), (XN,), (0,)),
    ("nanstd", lambda a: fnp.nanstd(a), lambda a: jnp.nanstd(a), (XN,), (0,)),
    ("nanmax", lambda a: fnp.nanmax(a, axis=1), lambda a: jnp.nanmax(a, axis=1), (XN,), (0,)),
    ("nanmin", lambda a: fnp.nanmin(a, axis=0, keepdims=True),
     lambda a: jnp.nanmin(a, axis=0, keepdims=True), (XN,), (0,)),
    ("nanprod", lambda a: fnp.nanprod(a, axis=1), lambda a: jnp.nanprod(a, axis=1), (XN,),
     (0,)),
    ("nancumsum", lambda a: fnp.nancumsum(a, axis=1), lambda a: jnp.nancumsum(a, axis=1),
     (XN,), (0,)),
    ("nancumprod", lambda a: fnp.nancumprod(a), lambda a: jnp.nancumprod(a), (XN,), (0,)),
    ("cumulative_sum", lambda a: fnp.cumulative_sum(a, axis=1, include_initial=True),
     lambda a: jnp.cumulative_sum(a, axis=1, include_initial=True), (X,), (0,)),
    ("cumulative_prod", lambda a: fnp.cumulative_prod(a, axis=0),
     lambda a: jnp.cumulative_prod(a, axis=0), (X,), (0,)),
    ("diff", lambda a: fnp.diff(a, 2, axis=0, prepend=0.5),
     lambda a: jnp.diff(a, 2, axis=0, prepend=0.5), (X,), (0,)),
    ("ediff1d", lambda a: fnp.ediff1d(a, to_begin=np.array([1.0, 2.0]), to_end=3.0),
     lambda a: jnp.ediff1d(a, to_begin=jnp.array([1.0, 2.0]), to_end=3.0), (X,), (0,)),
    ("gradient", lambda a: fnp.gradient(a, 0.5), lambda a: jnp.gradient(a, 0.5), (X,), (0,)),
    ("gradient_coords", lambda a, c: fnp.gradient(a, c, axis=1),
     lambda a, c: jnp.gradient(a, c, axis=1), (X, np.cumsum(RNG.uniform(0.5, 1, 5))), (0, 1)),
    ("trapezoid", lambda y, x: fnp.trapezoid(y, x), lambda y, x: jnp.trapezoid(y, x),
     (X, np.cumsum(RNG.uniform(0.5, 1, 5))), (0, 1)),
    ("unwrap", lambda p: fnp.unwrap(p), lambda p: jnp.unwrap(p), (PH,), (0,)),
    ("interp", lambda x, xp, fp: fnp.interp(x, xp, fp), lambda x, xp, fp: jnp.interp(x, xp, fp),
     (XQ, XS, FP), (0, 1, 2)),
    ("interp_left_right", lambda x, fp: fnp.interp(x, XS, fp, left=-1.0, right=2.0),
     lambda x, fp: jnp.interp(x, XS, fp, left=-1.0, right=2.0), (XQ, FP), (0, 1)),
    ("interp_period", lambda x, fp: fnp.interp(x, XS, fp, period=3.0),
     lambda x, fp: jnp.interp(x, XS, fp, period=3.0), (XQ, FP), (0, 1)),
    ("cov", lambda m, w: fnp.cov(m, aweights=w), lambda m, w: jnp.cov(m, aweights=w),
     (X, RNG.uniform(0.5, 2, 5)), (0, 1)),
    ("cov_rowvar", lambda m: fnp.cov(m, rowvar=False, ddof=0),
     lambda m: jnp.cov(m, rowvar=False, ddof=0), (X,), (0,)),
    ("corrcoef", lambda m: fnp.corrcoef(m), lambda m: jnp.corrcoef(m), (X,), (0,)),
    ("convolve", lambda a, v: fnp.convolve(a, v), lambda a, v: jnp.convolve(a, v),
     (RNG.normal(size=7), P), (0, 1)),
    ("convolve_same", lambda a, v: fnp.convolve(a, v, "same"),
     lambda a, v: jnp.convolve(a, v, "same"), (P, RNG.normal(size=7)), (0, 1)),
    ("correlate_valid", lambda a, v: fnp.correlate(a, v),
     lambda a, v: jnp.correlate(a, v), (RNG.normal(size=7), P), (0, 1)),
    ("correlate_full", lambda a, v: fnp.correlate(a, v, "full"),
     lambda a, v: jnp.correlate(a, v, "full"), (P, RNG.normal(size=6)), (0, 1)),
    ("polyval", fnp.polyval, jnp.polyval, (P, X), (0, 1)),
    ("polyfit", lambda x, y: fnp.polyfit(x, y, 2), lambda x, y: jnp.polyfit(x, y, 2),
     (np.linspace(0.1, 1, 8), RNG.normal(size=8)), (0, 1)),
    ("polyfit_weighted", lambda y, w: fnp.polyfit(np.linspace(-1, 1, 9), y, 3, w=w),
     lambda y, w: jnp.polyfit(jnp.linspace(-1, 1, 9), y, 3, w=w),
     (RNG.normal(size=(9, 2)), RNG.uniform(0.5, 1.5, 9)), (0, 1)),
    ("polyadd", fnp.polyadd, jnp.polyadd, (P, RNG.normal(size=2)), (0, 1)),
    ("polysub", fnp.polysub, jnp.polysub, (RNG.normal(size=2), P), (0, 1)),
    ("polymul", fnp.polymul, jnp.polymul, (P, RNG.normal(size=3)), (0, 1)),
    ("polydiv", fnp.polydiv, jnp.polydiv, (RNG.normal(size=6), P), (0, 1)),
    ("polyder", lambda p: fnp.polyder(p, 2), lambda p: jnp.polyder(p, 2), (P,), (0,)),
    ("polyint", lambda p, k: fnp.polyint(p, 2, k), lambda p, k: jnp.polyint(p, 2, k),
     (P, np.array([0.5, -1.0])), (0, 1)),
    ("poly", fnp.poly, jnp.poly, (P,), (0,)),
    ("vander", lambda x: fnp.vander(x, 4), lambda x: jnp.vander(x, 4),
     (np.array([0.3, 1.5, -2.0]),), (0,)),
    ("vander_increasing", lambda x: fnp.vander(x, increasing=True),
     lambda x: jnp.vander(x, increasing=True), (P,), (0,)),
    ("select", lambda a, b: fnp.select([a < 0, b > 0.5], [a, b * 2], default=b),
     lambda a, b: jnp.select([a < 0, b > 0.5], [a, b * 2], default=b), (X, X.T.T * 0.7),
     (0, 1)),
    ("piecewise", lambda x: fnp.piecewise(x, [x < -0.5, x > 0.5], [lambda v: v ** 2,
                                                                    lambda v: -v, 0.25]),
     lambda x: jnp.piecewise(x, [x < -0.5, x > 0.5], [lambda v: v ** 2, lambda v: -v, 0.25]),
     (X,), (0,)),
    ("append", lambda a, b: fnp.append(a, b, axis=0), lambda a, b: jnp.append(a, b, axis=0),
     (X, X[:1]), (0, 1)),
    ("insert", lambda a, v: fnp.insert(a, [0, 3, 3], v, axis=1),
     lambda a, v: jnp.insert(a, jnp.array([0, 3, 3]), v, axis=1), (X, RNG.normal(size=3)),
     (0, 1)),
    ("delete", lambda a: fnp.delete(a, [0, 2], axis=1),
     lambda a: jnp.delete(a, jnp.array([0, 2]), axis=1), (X,), (0,)),
    ("rot90", lambda a: fnp.rot90(a, 3), lambda a: jnp.rot90(a, 3), (X,), (0,)),
    ("resize", lambda a: fnp.resize(a, (4, 6)), lambda a: jnp.resize(a, (4, 6)), (X,), (0,)),
    ("block", lambda a, b: fnp.block([[a, b], [b, a]]),
     lambda a, b: jnp.block([[a, b], [b, a]]), (X[:2, :2], X[:2, 2:4]), (0, 1)),
    ("choose", lambda a, b: fnp.choose(np.array([[0, 1, 1, 0, 1]]), [a, b]),
     lambda a, b: jnp.choose(jnp.array([[0, 1, 1, 0, 1]]), [a, b]), (X, X * 2 + 1), (0, 1)),
    ("compress", lambda a: fnp.compress([True, False, True], a, axis=0),
     lambda a: jnp.compress(jnp.array([True, False, True]), a, axis=0), (X,), (0,)),
    ("place", lambda a, v: fnp.place(a, X > 0, v, inplace=False),
     lambda a, v: jnp.place(a, X > 0, v, inplace=False), (X, RNG.normal(size=3)), (0, 1)),
    ("put", lambda a, v: fnp.put(a, [1, -2, 7], v, inplace=False),
     lambda a, v: jnp.put(a, jnp.array([1, -2, 7]), v, inplace=False),
     (X, RNG.normal(size=3)), (0, 1)),
    ("put_along_axis", lambda a, v: fnp.put_along_axis(a, np.array([[1], [0], [4]]), v, 1,
                                                       inplace=False),
     lambda a, v: jnp.put_along_axis(a, jnp.array([[1], [0], [4]]), v, 1, inplace=False),
     (X, RNG.normal(size=(3, 1))), (0, 1)),
    ("fill_diagonal", lambda a, v: fnp.fill_diagonal(a, v, inplace=False),
     lambda a, v: jnp.fill_diagonal(a, v, inplace=False), (X, RNG.normal(size=3)), (0, 1)),
    ("bincount", lambda w: fnp.bincount(np.array([0, 2, 2, 5]), w, length=7),
     lambda w: jnp.bincount(jnp.array([0, 2, 2, 5]), w, length=7), (P,), (0,)),
    ("histogram_weights", lambda w: fnp.histogram(XQ, 5, weights=w)[0],
     lambda w: jnp.histogram(XQ, 5, weights=w)[0], (RNG.uniform(size=XQ.size),), (0,)),
    ("histogram_range", lambda a: fnp.histogram(a, 4, range=(-2.0, 2.0), density=True),
     lambda a: jnp.histogram(a, 4, range=(-2.0, 2.0), density=True), (XQ,), ()),
    ("logspace", lambda a, b: fnp.logspace(a, b, 5, base=2.0),
     lambda a, b: jnp.logspace(a, b, 5, base=2.0), (np.float64(0.5), np.float64(3.0)), (0, 1)),
    ("geomspace", lambda a, b: fnp.geomspace(a, b, 6),
     lambda a, b: jnp.geomspace(a, b, 6), (np.float64(2.0), np.float64(50.0)), (0, 1)),
    ("ldexp", lambda x: fnp.ldexp(x, np.array([[3], [-2], [0]])),
     lambda x: jnp.ldexp(x, jnp.array([[3], [-2], [0]])), (X,), (0,)),
    ("frexp", fnp.frexp, jnp.frexp, (X * 100,), (0,)),
    ("modf", fnp.modf, jnp.modf, (X * 3,), (0,)),
    ("apply_along_axis", lambda a: fnp.apply_along_axis(lambda r: r * fnp.sum(r), 1, a),
     lambda a: jnp.apply_along_axis(lambda r: r * jnp.sum(r), 1, a), (X,), (0,)),
    ("vectorize", lambda a, b: fnp.vectorize(lambda u, v: fnp.dot(u, v),
                                             signature="(n),(n)->()")(a, b),
     lambda a, b: jnp.vectorize(jnp.dot, signature="(n),(n)->()")(a, b), (X, X[0]), (0, 1)),
    ("meshgrid", lambda a, b: fnp.meshgrid(a, b), lambda a, b: jnp.meshgrid(a, b),
     (P, X[0]), (0, 1)),
    ("kaiser", lambda b: fnp.kaiser(9, b), lambda b: jnp.kaiser(9, b), (np.float64(4.5),),
     ()),
    ("angle", fnp.angle, jnp.angle, (X + 1j * X.T.T[::-1],), ()),
    ("atan2", fnp.atan2, jnp.atan2, (X, X[::-1]), (0, 1)),
    ("pow", fnp.pow, jnp.pow, (np.abs(X) + 0.5, X), (0, 1)),
    ("concat", lambda a, b: fnp.concat([a, b], axis=1), lambda a, b: jnp.concat([a, b],
                                                                                 axis=1),
     (X, X), (0, 1)),
    ("permute_dims", lambda a: fnp.permute_dims(a, (1, 0)),
     lambda a: jnp.permute_dims(a, (1, 0)), (X,), (0,)),
    ("unstack", lambda a: fnp.unstack(a, axis=1), lambda a: jnp.unstack(a, axis=1), (X,),
     (0,)),
]


@pytest.mark.parametrize("case", DIFF_CASES, ids=[c[0] for c in DIFF_CASES])
def test_values_jit_and_grads_against_jax(case):
    name, f, g, args, argnums = case
    # jax.jit compiles the reference once instead of once per operation (these three
    # need concrete indices in JAX)
    ref = (lambda h: h) if name in ("delete", "choose", "compress") else jax.jit
    want = ref(g)(*[jnp.asarray(a) for a in args])
    got = f(*args)
    _close(got, want, rtol=1e-8)
    for leaf in _leaves(got):
        assert isinstance(leaf, np.ndarray) and not leaf.flags.writeable
    if name not in ("polydiv",):
        _close(fx.jit(f)(*args), got, rtol=1e-12)
    w = _weights_like(_leaves(got)[0])

    def loss(fn, xp):
        return lambda *a: xp.sum(_leaves(fn(*a))[0] * w)

    for i in argnums:
        gf = fx.grad(loss(f, fnp), argnums=i)(*args)
        gj = ref(jax.grad(loss(g, jnp), argnums=i))(*[jnp.asarray(a) for a in args])
        _close(gf, gj, rtol=1e-7, dtype=False)


# ----------------------------------------------------------------------------------------
# values of the non-differentiable functions, against NumPy

INTS = RNG.integers(-50, 50, size=(4, 6))
UINTS = RNG.integers(0, 200, size=(4, 6)).astype(np.uint8)
BITS = RNG.integers(0, 2, size=(3, 13))
XB = np.array([0.0, 1.0, 2.0, 3.5])
XD = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.5, 4.0, np.nan])

VALUE_CASES: list[tuple[str, Callable, Callable, bool]] = [
    # (name, functx thunk, numpy thunk, also under jit)
    ("left_shift", lambda: fnp.left_shift(INTS, 3), lambda: np.left_shift(INTS, 3), True),
    ("right_shift", lambda: fnp.right_shift(INTS, 2), lambda: np.right_shift(INTS, 2), True),
    ("right_shift_u", lambda: fnp.bitwise_right_shift(UINTS, np.uint8(3)),
     lambda: np.right_shift(UINTS, np.uint8(3)), True),
    ("bitwise_count", lambda: fnp.bitwise_count(INTS), lambda: np.bitwise_count(INTS), True),
    ("bitwise_count_u8", lambda: fnp.bitwise_count(UINTS), lambda: np.bitwise_count(UINTS),
     True),
    ("bitwise_invert", lambda: fnp.bitwise_invert(INTS), lambda: np.bitwise_invert(INTS), True),
    ("gcd", lambda: fnp.gcd(INTS, INTS.T.reshape(4, 6)),
     lambda: np.gcd(INTS, INTS.T.reshape(4, 6)), True),
    ("lcm", lambda: fnp.lcm(INTS, 6), lambda: np.lcm(INTS, 6), True),
    ("packbits", lambda: fnp.packbits(BITS, axis=1), lambda: np.packbits(BITS, axis=1), True),
    ("packbits_little", lambda: fnp.packbits(BITS, bitorder="little"),
     lambda: np.packbits(BITS, bitorder="little"), True),
    ("unpackbits", lambda: fnp.unpackbits(UINTS, axis=0, count=-3),
     lambda: np.unpackbits(UINTS, axis=0, count=-3), True),
    ("nextafter", lambda: fnp.nextafter(X, X[::-1]), lambda: np.nextafter(X, X[::-1]), True),
    ("spacing", lambda: fnp.spacing(X * 1e-310), lambda: np.spacing(X * 1e-310), True),
    ("frexp_subnormal", lambda: fnp.frexp(X * 1e-310), lambda: np.frexp(X * 1e-310), True),
    ("ldexp_edges", lambda: fnp.ldexp(np.array([1.5, 1.0, 3.0, -1.0]),
                                      np.array([-1074, -1075, 1023, 2000])),
     lambda: np.ldexp(np.array([1.5, 1.0, 3.0, -1.0]), np.array([-1074, -1075, 1023, 2000])),
     True),
    ("digitize", lambda: fnp.digitize(XD, XB), lambda: np.digitize(XD, XB), True),
    ("digitize_right_decreasing", lambda: fnp.digitize(XD, XB[::-1], right=True),
     lambda: np.digitize(XD, XB[::-1], right=True), True),
    ("isin", lambda: fnp.isin(INTS, [3, -7, 12]), lambda: np.isin(INTS, [3, -7, 12]), True),
    ("isin_invert", lambda: fnp.isin(X, X[0], invert=True),
     lambda: np.isin(X, X[0], invert=True), True),
    ("bincount", lambda: fnp.bincount(np.abs(INTS).ravel()),
     lambda: np.bincount(np.abs(INTS).ravel()), False),
    ("histogram", lambda: fnp.histogram(XQ, 6), lambda: np.histogram(XQ, 6), True),
    ("histogram_edges", lambda: fnp.histogram(XQ, [-3.0, -1.0, 0.0, 0.5, 3.0]),
     lambda: np.histogram(XQ, [-3.0, -1.0, 0.0, 0.5, 3.0]), True),
    ("histogram_auto", lambda: fnp.histogram(XQ, "auto"), lambda: np.histogram(XQ, "auto"),
     False),
    ("histogram_bin_edges", lambda: fnp.histogram_bin_edges(XQ, 3, range=(0.0, 1.0)),
     lambda: np.histogram_bin_edges(XQ, 3, range=(0.0, 1.0)), True),
    ("histogram2d", lambda: fnp.histogram2d(X[0], X[1], bins=(2, 3)),
     lambda: np.histogram2d(X[0], X[1], bins=(2, 3)), True),
    ("histogramdd", lambda: fnp.histogramdd(X.T, bins=2), lambda: np.histogramdd(X.T, bins=2),
     True),
    ("nanargmax", lambda: fnp.nanargmax(XN[[0, 2, 3]], axis=1),
     lambda: np.nanargmax(XN[[0, 2, 3]], axis=1), True),
    ("nanargmin", lambda: fnp.nanargmin(XN.T[:, [0, 2]], axis=0),
     lambda: np.nanargmin(XN.T[:, [0, 2]], axis=0), True),
    ("union1d", lambda: fnp.union1d(INTS[0], INTS[1]), lambda: np.union1d(INTS[0], INTS[1]),
     False),
    ("intersect1d", lambda: fnp.intersect1d(INTS, INTS[:2] + 1, return_indices=True),
     lambda: np.intersect1d(INTS, INTS[:2] + 1, return_indices=True), False),
    ("setdiff1d", lambda: fnp.setdiff1d(INTS, INTS[1:]), lambda: np.setdiff1d(INTS, INTS[1:]),
     False),
    ("setxor1d", lambda: fnp.setxor1d(INTS[0], INTS[1]), lambda: np.setxor1d(INTS[0], INTS[1]),
     False),
    ("tril_indices", lambda: fnp.tril_indices(4, -1, 5), lambda: np.tril_indices(4, -1, 5),
     True),
    ("triu_indices_from", lambda: fnp.triu_indices_from(X, 1),
     lambda: np.triu_indices_from(X, 1), True),
    ("diag_indices", lambda: fnp.diag_indices(3, 3), lambda: np.diag_indices(3, 3), True),
    ("diag_indices_from", lambda: fnp.diag_indices_from(np.zeros((2, 2))),
     lambda: np.diag_indices_from(np.zeros((2, 2))), True),
    ("mask_indices", lambda: fnp.mask_indices(3, fnp.triu, 1),
     lambda: np.mask_indices(3, np.triu, 1), False),
    ("indices", lambda: fnp.indices((2, 3), sparse=True),
     lambda: np.indices((2, 3), sparse=True), True),
    ("ix_", lambda: fnp.ix_([0, 1], np.array([True, False, True])),
     lambda: np.ix_([0, 1], np.array([True, False, True])), False),
    ("ravel_multi_index", lambda: fnp.ravel_multi_index((np.array([0, 1, 1]),
                                                         np.array([2, 0, 7])), (2, 3), "clip",
                                                        "F"),
     lambda: np.ravel_multi_index((np.array([0, 1, 1]), np.array([2, 0, 7])), (2, 3),
                                  mode="clip", order="F"), True),
    ("unravel_index", lambda: fnp.unravel_index(np.array([2, 3, -1]), (2, 4)),
     lambda: np.unravel_index(np.array([2, 3, 7]), (2, 4)), True),
    ("trim_zeros", lambda: fnp.trim_zeros(np.array([0, 0, 1, 0, 2, 0]), "b"),
     lambda: np.trim_zeros(np.array([0, 0, 1, 0, 2, 0]), "b"), False),
    ("extract", lambda: fnp.extract(INTS % 3 == 0, INTS), lambda: np.extract(INTS % 3 == 0, INTS),
     False),
    ("roots", lambda: fnp.roots(np.array([1.0, -6.0, 11.0, -6.0])),
     lambda: np.roots(np.array([1.0, -6.0, 11.0, -6.0])), False),
    ("poly_matrix", lambda: fnp.poly(np.array([[1.0, 2.0], [3.0, 4.0]])),
     lambda: np.poly(np.array([[1.0, 2.0], [3.0, 4.0]])), False),
    ("r_", lambda: fnp.r_[1:4, 0, np.array([7, 8])], lambda: np.r_[1:4, 0, np.array([7, 8])],
     False),
    ("r_directive", lambda: fnp.r_["0,2,0", [1, 2, 3], [4, 5, 6]],
     lambda: np.r_["0,2,0", [1, 2, 3], [4, 5, 6]], False),
    ("c_", lambda: fnp.c_[np.array([1, 2, 3]), np.array([4, 5, 6])],
     lambda: np.c_[np.array([1, 2, 3]), np.array([4, 5, 6])], False),
    ("mgrid", lambda: fnp.mgrid[0:3, 0:1:4j], lambda: np.mgrid[0:3, 0:1:4j], False),
    ("ogrid", lambda: fnp.ogrid[0:3, 0:2], lambda: np.ogrid[0:3, 0:2], False),
    ("windows", lambda: [fnp.bartlett(6), fnp.blackman(6), fnp.hamming(6), fnp.hanning(6),
                         fnp.kaiser(6, 3.0)],
     lambda: [np.bartlett(6), np.blackman(6), np.hamming(6), np.hanning(6), np.kaiser(6, 3.0)],
     False),
    ("array_equiv", lambda: [fnp.array_equiv([1, 2], [[1, 2], [1, 2]]),
                             fnp.array_equiv([1, 2], [1, 2, 3])],
     lambda: [np.array_equiv([1, 2], [[1, 2], [1, 2]]), np.array_equiv([1, 2], [1, 2, 3])],
     False),
    ("iscomplex", lambda: [fnp.iscomplex(np.array([1 + 1j, 2])), fnp.isreal(X)],
     lambda: [np.iscomplex(np.array([1 + 1j, 2])), np.isreal(X)], False),
    ("split_family", lambda: fnp.hsplit(X, [2]) + fnp.vsplit(X, [1]) + fnp.dsplit(
        np.zeros((1, 1, 4)), 2), lambda: np.hsplit(X, [2]) + np.vsplit(X, [1]) + np.dsplit(
        np.zeros((1, 1, 4)), 2), False),
    ("diagflat", lambda: fnp.diagflat(INTS[:2, :2], -1), lambda: np.diagflat(INTS[:2, :2], -1),
     True),
    ("rollaxis", lambda: fnp.rollaxis(np.zeros((2, 3, 4)), 2, 1),
     lambda: np.rollaxis(np.zeros((2, 3, 4)), 2, 1), True),
]


@pytest.mark.parametrize("case", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_against_numpy(case):
    name, f, g, jittable = case
    got, want = f(), g()
    # roots: NumPy returns real roots as floats (a value-dependent dtype); functx and JAX
    # always return complex ones
    _close(got, want, rtol=0 if name not in ("roots", "poly_matrix", "windows") else 1e-10,
           dtype=name != "roots")
    if jittable:
        _close(fx.jit(f)(), got, rtol=0)


def test_vander_and_polyfit_gradients_are_finite_at_zero():
    # jax.numpy's vander (a power) and polyfit give NaN gradients at x == 0
    w = np.array([[1.0, 2.0, 3.0, 4.0]])
    g = fx.grad(lambda x: fnp.sum(fnp.vander(x, 4) * w))(np.array([0.0]))
    np.testing.assert_allclose(g, [3.0])  # d/dx (x**3, x**2, x, 1) at 0 is (0, 0, 1, 0)
    x = np.linspace(0.0, 1.0, 6)
    y = np.sin(x)
    gx = fx.grad(lambda x: fnp.sum(fnp.polyfit(x, y, 2)))(x)
    assert np.all(np.isfinite(gx))
    eps = 1e-6
    for i in range(6):
        d = np.zeros(6)
        d[i] = eps
        fd = (np.polyfit(x + d, y, 2).sum() - np.polyfit(x - d, y, 2).sum()) / (2 * eps)
        np.testing.assert_allclose(gx[i], fd, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------
# vmap against a loop

VMAP_CASES: list[tuple[str, Callable, tuple]] = [
    ("nanmean", lambda a: fnp.nanmean(a), (XN,)),
    ("nanargmax", lambda a: fnp.nanargmax(a), (XN[[0, 2, 3]],)),
    ("interp", lambda x, fp: fnp.interp(x, XS, fp), (RNG.normal(size=(3, 5)),
                                                      RNG.normal(size=(3, 7)))),
    ("convolve", lambda a: fnp.convolve(a, P, "same"), (RNG.normal(size=(3, 6)),)),
    ("polyval", lambda p: fnp.polyval(p, X[0]), (RNG.normal(size=(3, 4)),)),
    ("polyfit", lambda y: fnp.polyfit(np.linspace(0, 1, 5), y, 2), (X,)),
    ("bincount", lambda w: fnp.bincount(np.array([0, 1, 1, 4, 2]), w, length=6), (X,)),
    ("histogram", lambda a: fnp.histogram(a, 3, range=(-1.0, 1.0))[0], (X,)),
    ("digitize", lambda a: fnp.digitize(a, XB), (X,)),
    ("isin", lambda a: fnp.isin(a, INTS[0]), (INTS,)),
    ("compress_size", lambda c, a: fnp.compress(c, a, size=3, fill_value=-1.0),
     (X > 0, X)),
    ("gradient", lambda a: fnp.gradient(a), (X,)),
    ("cov", lambda a: fnp.cov(a.reshape(1, -1), a[::-1].reshape(1, -1)), (X,)),
    ("unwrap", lambda a: fnp.unwrap(a * 4), (X,)),
    ("place", lambda a, m: fnp.place(a, m, np.array([7.0, 8.0]), inplace=False),
     (X, X > 0)),
    ("frexp", lambda a: fnp.frexp(a)[1], (X * 1e3,)),
    ("gcd", lambda a: fnp.gcd(a, 12), (INTS,)),
    ("vectorize", fnp.vectorize(lambda u: fnp.sum(u ** 2), signature="(n)->()"),
     (RNG.normal(size=(3, 2, 4)),)),
]


@pytest.mark.parametrize("case", VMAP_CASES, ids=[c[0] for c in VMAP_CASES])
def test_vmap_against_a_loop(case):
    name, f, args = case
    got = fx.vmap(f)(*args)
    want = [f(*[a[i] for a in args]) for i in range(args[0].shape[0])]
    _close(got, np.stack(want), rtol=1e-12)


def test_compress_with_a_traced_condition_under_jit():
    f = fx.jit(lambda c, a: fnp.compress(c, a, size=4, fill_value=-1.0))
    a = np.arange(6.0)
    np.testing.assert_array_equal(f(a % 2 == 0, a), [0.0, 2.0, 4.0, -1.0])
    np.testing.assert_array_equal(f(a > -1, a), [0.0, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(fnp.extract(np.array([[1, 0], [0, 2]]), np.ones((2, 2)),
                                              size=3), [1.0, 1.0, 0.0])


# ----------------------------------------------------------------------------------------
# edge cases


def test_nan_reductions_of_all_nan_slices_and_integers():
    a = np.array([[np.nan, np.nan], [1.0, np.nan]])
    np.testing.assert_array_equal(fnp.nansum(a, axis=1), [0.0, 1.0])
    np.testing.assert_array_equal(fnp.nanprod(a, axis=1), [1.0, 1.0])
    np.testing.assert_array_equal(fnp.nanmean(a, axis=1), [np.nan, 1.0])
    np.testing.assert_array_equal(fnp.nanmax(a, axis=1), [np.nan, 1.0])
    np.testing.assert_array_equal(fnp.nanvar(a, axis=1), [np.nan, 0.0])
    np.testing.assert_array_equal(fnp.nanargmin(a, axis=1), [-1, 0])
    assert int(fnp.nanargmax(np.array([np.nan, -np.inf]))) == 1  # NumPy's answer
    i = np.arange(6).reshape(2, 3)
    _close(fnp.nanmean(i, axis=0), np.nanmean(i, axis=0))
    _close(fnp.nancumsum(i), np.nancumsum(i))
    _close(fnp.nanmax(i, axis=1), np.nanmax(i, axis=1))
    _close(fnp.nanvar(np.float32([1, np.nan, 3])), np.float32(1.0))
    np.testing.assert_array_equal(fx.grad(lambda x: fnp.nanmax(x))(np.array([np.nan, 2.0])),
                                  [0.0, 1.0])


def test_empty_and_degenerate_inputs():
    _close(fnp.histogram(np.zeros(0)), np.histogram(np.zeros(0)))
    _close(fnp.histogram(np.full(4, 3.0), 2), np.histogram(np.full(4, 3.0), 2))
    _close(fnp.bincount(np.zeros(0, np.int64), minlength=3), np.bincount(np.zeros(0, int),
                                                                       minlength=3))
    _close(fnp.diff(X, 0), X)
    _close(fnp.diff(np.array([True, False, False])), np.diff(np.array([True, False, False])))
    _close(fnp.interp(np.array([0.0, 5.0]), [1.0], [2.0]), np.interp([0.0, 5.0], [1.0], [2.0]))
    _close(fnp.interp(np.array([np.nan, 1.0]), [0.0, 1.0], [0.0, 3.0]),
           np.interp([np.nan, 1.0], [0.0, 1.0], [0.0, 3.0]))
    _close(fnp.convolve(np.array([1, 2, 3]), np.array([4, 5])), np.convolve([1, 2, 3], [4, 5]))
    z = np.array([1 + 2j, 3 - 1j, 0.5j])
    _close(fnp.correlate(z, z[:2], "full"), np.correlate(z, z[:2], "full"), rtol=1e-12)
    _close(fnp.polyval(np.zeros(0), X), np.polyval(np.zeros(0), X))
    _close(fnp.gcd(0, 0), np.gcd(0, 0))
    _close(fnp.unstack(np.zeros((0, 2))), ())
    _close(fnp.trim_zeros(np.zeros(3)), np.trim_zeros(np.zeros(3)))
    _close(fnp.cumulative_sum(np.float64(2.0), include_initial=True), np.array([0.0, 2.0]))
    _close(fnp.vectorize(lambda u: u * 2)(np.zeros((0, 3))), np.zeros((0, 3)))
    _close(fnp.select([X > 0], [X]), np.select([X > 0], [X]))
    _close(fnp.union1d([3, 1], [2], size=5, fill_value=-1), np.array([1, 2, 3, -1, -1]))
    _close(fnp.setdiff1d([3, 1], [3], size=3), np.array([1, 0, 0]))
    _close(fnp.polyint(P, 0), P)
    _close(fnp.polyder(np.array([5.0])), np.polyder(np.array([5.0])))
    _close(fnp.modf(np.array([-np.inf, -0.5])), np.modf(np.array([-np.inf, -0.5])))
    _close(fnp.frexp(np.int8(3)), np.frexp(np.int8(3)))
    _close(fnp.ldexp(3, 2), np.ldexp(3, 2))
    for dt in (np.float16, np.float32):
        x = (X * 100).astype(dt)
        _close(fnp.frexp(x), np.frexp(x))
        _close(fnp.nextafter(x, dt(0)), np.nextafter(x, dt(0)))
    assert fnp.isdtype(np.float32, "real floating") and fnp.isdtype(np.int8, ("bool", np.int8))
    assert not fnp.isdtype(np.complex64, "real floating")
    assert fnp.isscalar(1.0) and fnp.isscalar(np.zeros(())) and not fnp.isscalar([1.0])
    assert fnp.iterable([1]) and not fnp.iterable(1)
    assert fnp.copy(np.ones(2)).flags.writeable is False
    assert fnp.single is np.float32 and fnp.cdouble is np.complex128 and fnp.int_ is np.int64
    assert fnp.s_[1:2] == np.s_[1:2] and fnp.index_exp[1] == np.index_exp[1]


def test_concrete_only_functions_say_so_under_jit():
    for f in (lambda x: fnp.trim_zeros(x), lambda x: fnp.roots(x),
              lambda x: fnp.union1d(x, x), lambda x: fnp.bincount(x.astype(np.int64)),
              lambda x: fnp.compress(x > 0, x), lambda x: fnp.histogram(x, "auto")):
        with pytest.raises(ConcretizationError, match="functx.numpy"):
            fx.jit(f)(np.array([0.0, 1.0, 2.0]))


# ----------------------------------------------------------------------------------------
# errors: FunctxErrors whose message names the function and says what to do

ERROR_CASES: list[tuple[str, Callable, str]] = [
    ("unstack_0d", lambda: fnp.unstack(np.float64(1.0)), "at least one dimension"),
    ("cumulative_sum_axis", lambda: fnp.cumulative_sum(X), "axis must be given"),
    ("left_shift_float", lambda: fnp.left_shift(X, 1), "integer operands"),
    ("bitwise_count_float", lambda: fnp.bitwise_count(X), "integer or boolean"),
    ("isdtype_kind", lambda: fnp.isdtype(np.float32, "floaty"), "unknown kind"),
    ("nanvar_ddof", lambda: fnp.nanvar(XN, ddof=1, correction=1), "only one"),
    ("nanvar_complex", lambda: fnp.nanvar(XN + 1j), "complex"),
    ("nanargmax_empty", lambda: fnp.nanargmax(np.zeros((2, 0)), axis=1), "empty sequence"),
    ("convolve_empty", lambda: fnp.convolve(np.zeros(0), P), "cannot be empty"),
    ("convolve_2d", lambda: fnp.convolve(X, P), "1-D"),
    ("convolve_mode", lambda: fnp.convolve(P, P, "circular"), "mode must be"),
    ("polyder_m", lambda: fnp.polyder(P, -1), "non-negative"),
    ("polyint_k", lambda: fnp.polyint(P, 2, np.ones(3)), "k must be"),
    ("polyfit_full", lambda: fnp.polyfit(P, P, 1, full=True), "full=True"),
    ("polyfit_shape", lambda: fnp.polyfit(P, X, 1), "rows"),
    ("polydiv_empty", lambda: fnp.polydiv(P, np.zeros(0)), "divisor"),
    ("vander_N", lambda: fnp.vander(P, -1), "non-negative"),
    ("diff_n", lambda: fnp.diff(X, -1), "non-negative"),
    ("diff_0d", lambda: fnp.diff(np.float64(1.0)), "at least one dimension"),
    ("gradient_order", lambda: fnp.gradient(X, edge_order=3), "edge_order"),
    ("gradient_points", lambda: fnp.gradient(np.ones(2), edge_order=2), "points"),
    ("gradient_coords", lambda: fnp.gradient(P, np.arange(3.0)), "coordinates"),
    ("interp_shapes", lambda: fnp.interp(P, XS, FP[:3]), "one length"),
    ("cov_3d", lambda: fnp.cov(np.zeros((2, 2, 2))), "more than 2"),
    ("cov_weights", lambda: fnp.cov(X, fweights=np.ones(2)), "one weight per"),
    ("select_lengths", lambda: fnp.select([X > 0], [X, X]), "same length"),
    ("select_dtype", lambda: fnp.select([X], [X]), "boolean"),
    ("piecewise_funcs", lambda: fnp.piecewise(X, [X > 0], [1, 2, 3]), "funclist"),
    ("bincount_2d", lambda: fnp.bincount(INTS), "1-D"),
    ("bincount_negative", lambda: fnp.bincount(np.array([1, -1])), "non-negative"),
    ("bincount_float", lambda: fnp.bincount(X[0]), "integers"),
    ("histogram_range", lambda: fnp.histogram(X, 3, range=(1.0, 0.0)), "range"),
    ("histogram_weights", lambda: fnp.histogram(X, 3, weights=P), "weights"),
    ("digitize_bins", lambda: fnp.digitize(X, X), "1-D"),
    ("put_inplace", lambda: fnp.put(X, [0], [1.0]), "inplace=False"),
    ("place_inplace", lambda: fnp.place(X, X > 0, [1.0]), "inplace=False"),
    ("fill_diagonal_inplace", lambda: fnp.fill_diagonal(X, 1.0), "inplace=False"),
    ("put_along_axis_inplace", lambda: fnp.put_along_axis(X, INTS[:3, :1] % 5, 1.0, 1),
     "inplace=False"),
    ("put_range", lambda: fnp.put(X, [99], [1.0], inplace=False), "out of bounds"),
    ("delete_range", lambda: fnp.delete(P, 9), "out of bounds"),
    ("insert_range", lambda: fnp.insert(P, 9, 1.0), "out of bounds"),
    ("choose_range", lambda: fnp.choose(np.array([0, 3]), [P[:2], P[2:]]), "mode='wrap'"),
    ("compress_shape", lambda: fnp.compress(np.ones(9, bool), P), "no longer than"),
    ("rot90_axes", lambda: fnp.rot90(X, 1, (0, 0)), "different"),
    ("block_depth", lambda: fnp.block([[X], X]), "depths"),
    ("block_empty", lambda: fnp.block([[]]), "cannot be empty"),
    ("fill_diagonal_dims", lambda: fnp.fill_diagonal(np.zeros((2, 2, 3)), 1.0, inplace=False),
     "equal length"),
    ("diag_indices_from", lambda: fnp.diag_indices_from(X), "equal length"),
    ("tril_indices_from", lambda: fnp.tril_indices_from(P), "2-d"),
    ("ravel_multi_index", lambda: fnp.ravel_multi_index((np.array([5]), np.array([0])),
                                                        (2, 2)), "invalid entry"),
    ("unravel_index", lambda: fnp.unravel_index(np.array([9]), (2, 2)), "out of bounds"),
    ("meshgrid_indexing", lambda: fnp.meshgrid(P, P, indexing="xz"), "indexing"),
    ("geomspace_zero", lambda: fnp.geomspace(0.0, 1.0, 3), "zero"),
    ("vectorize_signature", lambda: fnp.vectorize(fnp.sum, signature="(n->()"), "signature"),
    ("vectorize_core", lambda: fnp.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")(
        np.ones(3), np.ones(4)), "core dimension"),
    ("apply_along_axis_0d", lambda: fnp.apply_along_axis(fnp.sum, 0, np.float64(1.0)),
     "at least one dimension"),
    ("ldexp_float", lambda: fnp.ldexp(X, X), "integers"),
    ("frexp_complex", lambda: fnp.frexp(X + 1j), "complex"),
    ("gcd_float", lambda: fnp.gcd(X, 2), "integer operands"),
    ("packbits_float", lambda: fnp.packbits(X), "boolean or integer"),
    ("unpackbits_dtype", lambda: fnp.unpackbits(INTS), "uint8"),
    ("packbits_order", lambda: fnp.packbits(BITS, bitorder="middle"), "bitorder"),
    ("r_directive", lambda: fnp.r_["r", P], "directive"),
    ("frompyfunc_reduce", lambda: fnp.frompyfunc(lambda a: a, 1, 1).reduce(P), "2 inputs"),
    ("apply_over_axes", lambda: fnp.apply_over_axes(lambda a, ax: fnp.sum(a), X, [0]),
     "dimensions"),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_are_full_sentence_functx_errors(case):
    _, f, fragment = case
    with pytest.raises(FunctxError) as info:
        f()
    message = str(info.value).splitlines()[0]
    assert fragment in message, message
    assert "functx.numpy" in message, message
    assert message.rstrip().endswith("."), message


# ----------------------------------------------------------------------------------------
# forward mode and second order, for a sample

JVP_CASES = [c for c in DIFF_CASES if c[0] in (
    "nanvar", "interp", "cov", "convolve", "polyfit", "gradient_coords", "unwrap", "corrcoef",
    "geomspace", "put", "histogram_weights", "vectorize")]


@pytest.mark.parametrize("case", JVP_CASES, ids=[c[0] for c in JVP_CASES])
def test_jvp_against_jax(case):
    _, f, g, args, argnums = case
    tangents = [RNG.normal(size=np.shape(a)) if i in argnums else np.zeros(np.shape(a))
                for i, a in enumerate(args)]
    first = lambda fn: (lambda *a: _leaves(fn(*a))[0])  # noqa: E731
    _, tf = fx.jvp(first(f), list(args), tangents)
    _, tj = jax.jvp(first(g), tuple(jnp.asarray(a) for a in args),
                    tuple(jnp.asarray(t) for t in tangents))
    _close(tf, tj, rtol=1e-7, dtype=False)


@pytest.mark.parametrize("name", ["nanstd", "interp", "polyfit", "cov", "trapezoid"])
def test_hessian_against_jax(name):
    _, f, g, args, argnums = next(c for c in DIFF_CASES if c[0] == name)
    i = argnums[-1]
    w = _weights_like(_leaves(f(*args))[0])

    def loss(fn, xp):
        def h(v):
            a = list(args)
            a[i] = v
            return xp.sum(_leaves(fn(*a))[0] * w)
        return h

    hf = fx.hessian(loss(f, fnp))(args[i])
    hj = jax.hessian(loss(g, jnp))(jnp.asarray(args[i]))
    _close(hf, hj, rtol=1e-6, dtype=False)


F32 = X.astype(np.float32)


@pytest.mark.parametrize("name,f", [
    ("gradient", lambda m: m.gradient(F32, 0.5)[0]), ("trapezoid", lambda m: m.trapezoid(F32)),
    ("nanmean", lambda m: m.nanmean(F32)), ("nanvar", lambda m: m.nanvar(F32, axis=0)),
    ("diff", lambda m: m.diff(F32, append=F32[:, :1])), ("unwrap", lambda m: m.unwrap(F32[0])),
    ("convolve", lambda m: m.convolve(F32[0], F32[1])), ("polyval", lambda m: m.polyval(
        F32[0], F32[1])), ("logspace", lambda m: m.logspace(np.float32(0), np.float32(1), 3)),
    ("ldexp", lambda m: m.ldexp(F32, 2)), ("frexp", lambda m: m.frexp(F32)[0]),
    ("histogram", lambda m: m.histogram(F32, weights=F32)[0]),
    ("interp", lambda m: m.interp(F32[0], np.sort(F32[1]), F32[2])),
    ("cov", lambda m: m.cov(F32)), ("polyfit", lambda m: m.polyfit(F32[0], F32[1], 1)),
])
def test_float32_stays_float32(name, f):
    # as NumPy where NumPy keeps float32; as jax.numpy where NumPy widens to float64
    assert f(fnp).dtype == np.float32
    assert f(jnp).dtype == np.float32


# ----------------------------------------------------------------------------------------
# on another device (tests/test_backends.py's fake device): constants the functions make
# (fills, index arrays) must be made there, or the primitives raise DeviceError

import functx.backends as B  # noqa: E402

import test_backends as _fake_backend  # noqa: E402  (tests/ is on sys.path, as test_cuda's)


@pytest.fixture
def on_fake():
    registered = B._BACKENDS.get("fakegpu") is _fake_backend.FAKE
    B.register_backend(_fake_backend.FAKE)
    try:
        yield lambda x: fx.device_put(np.asarray(x), "fakegpu")
    finally:
        if not registered:
            B._BACKENDS.pop("fakegpu", None)
            B.BY_TYPE.pop(_fake_backend.FakeArray, None)


DEVICE_CASES: list[tuple[str, Callable]] = [
    ("nan_reductions", lambda d: [fnp.nanvar(d(XN)), fnp.nanargmax(d(XN), 1),
                                  fnp.nancumprod(d(XN)), fnp.nanmax(d(XN), 0)]),
    ("aliases", lambda d: [fnp.bitwise_count(d(INTS)), fnp.left_shift(d(INTS), 2),
                           fnp.cumulative_sum(d(P), include_initial=True)]),
    ("polynomials", lambda d: [fnp.convolve(d(P), d(P[:2])), fnp.correlate(d(P[:2]), d(P),
                                                                           "same"),
                               fnp.polyval(d(P), d(X)), fnp.polyfit(d(XS), d(FP), 2),
                               fnp.polyder(d(P)), fnp.polyint(d(P)), fnp.poly(d(P)),
                               fnp.polydiv(d(P), d(P[:2]))[0], fnp.vander(d(P))]),
    ("extras", lambda d: [fnp.diff(d(X), prepend=0), fnp.gradient(d(X), 0.5, d(np.arange(5.0))),
                          fnp.trapezoid(d(X)), fnp.unwrap(d(PH)),
                          fnp.interp(d(XQ), d(XS), d(FP)), fnp.cov(d(X)), fnp.corrcoef(d(X)),
                          fnp.select([d(X) > 0], [d(X)]),
                          fnp.piecewise(d(X), [d(X) > 0], [lambda t: t, 1.0])]),
    ("histograms", lambda d: [fnp.bincount(d(np.abs(INTS[0])), length=60),
                              fnp.digitize(d(XD), d(XB)), fnp.histogram(d(X), 4)[0],
                              fnp.histogramdd(d(X.T), 2)[0], fnp.isin(d(INTS), [1, 2]),
                              fnp.union1d(d(INTS[0]), d(INTS[1]))]),
    ("structural", lambda d: [fnp.append(d(X), d(X)), fnp.insert(d(P), [1, 2], 3.0),
                              fnp.delete(d(P), 1), fnp.choose(d(INTS % 2), [d(INTS), 7]),
                              fnp.compress(d(P) > 0, d(P), size=3), fnp.rot90(d(X)),
                              fnp.resize(d(P), (3, 3)),
                              fnp.place(d(P), d(P) > 0, d(P[:2]), inplace=False),
                              fnp.put(d(P), [0, 2], 9.0, inplace=False),
                              fnp.fill_diagonal(d(X), 2.0, inplace=False)]),
    ("indices", lambda d: [fnp.meshgrid(d(P), d(P))[0], fnp.unravel_index(d(INTS % 6),
                                                                          (2, 3))[0],
                           fnp.geomspace(d(P) ** 2 + 1, d(P) ** 2 + 2, 3),
                           fnp.logspace(d(P), d(P) + 1, 3)]),
    ("floatbits", lambda d: [fnp.frexp(d(X))[0], fnp.ldexp(d(X), 3), fnp.modf(d(X))[0],
                             fnp.nextafter(d(X), 0.0), fnp.spacing(d(X)), fnp.gcd(d(INTS), 4),
                             fnp.packbits(d(BITS)), fnp.unpackbits(d(UINTS))]),
    ("functional", lambda d: [fnp.apply_along_axis(fnp.sum, 1, d(X)),
                              fnp.vectorize(lambda a: a * 2)(d(X)),
                              fx.grad(lambda fp: fnp.sum(fnp.interp(d(XQ), d(XS), fp)))(d(FP)),
                              fx.grad(lambda y: fnp.sum(fnp.polyfit(d(XS), y, 2)))(d(FP))]),
]


@pytest.mark.parametrize("case", DEVICE_CASES, ids=[c[0] for c in DEVICE_CASES])
def test_results_stay_on_the_device(case, on_fake):
    _, f = case
    for r in _leaves(f(on_fake)):
        assert type(r) is _fake_backend.FakeArray, type(r)


def test_sequence_results_are_tuples_as_numpy():
    assert type(fnp.gradient(X)) is tuple and type(np.gradient(X)) is tuple
    assert type(fnp.meshgrid(P, P)) is tuple and type(np.meshgrid(P, P)) is tuple
    assert type(fnp.unstack(X)) is tuple and type(fnp.histogramdd(X.T, 2)[1]) is list


def test_histogram_of_non_finite_data_needs_a_range():
    with pytest.raises(FunctxError, match="not finite; pass range="):
        fnp.histogram(np.array([1.0, np.nan]))
    _close(fnp.histogram(np.array([1.0, np.nan, 0.5]), 2, range=(0.0, 1.0)),
           np.histogram(np.array([1.0, np.nan, 0.5]), 2, range=(0.0, 1.0)))


@pytest.mark.parametrize("module", ["_aliases", "_nanreductions", "_polynomial", "_extras",
                                    "_histograms", "_structural", "_indices", "_functional",
                                    "_floatbits"])
def test_docstring_examples(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"functx.numpy.{module}")
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    tests = doctest.DocTestFinder().find(mod, globs={"fnp": fnp, "np": np, "fx": fx})
    assert tests
    failed = [t.name for t in tests if runner.run(t, out=lambda s: None).failed]
    assert not failed, failed


def test_regressions_found_by_fuzzing():
    # insert: one position takes a block; a list of one position too; empty positions
    a = np.arange(4.0)
    for obj, v in [([4], [7.0, 8.0]), (slice(1, 0, -1), [7.0, 8.0]), (slice(0, -3, -1),
                                                                    [[7.0]])]:
        _close(fnp.insert(a, obj, v), np.insert(a, obj, v))
    _close(fnp.insert(np.zeros((1, 2, 1)), [0], np.ones((2, 2)), axis=-1),
           np.insert(np.zeros((1, 2, 1)), [0], np.ones((2, 2)), axis=-1))
    # histogram with a single edge has no bins
    _close(fnp.histogram(XQ, [0.5]), np.histogram(XQ, [0.5]))
    # interp of NaN where the last interval is empty
    _close(fnp.interp(np.array([np.nan, 2.0]), [-1.0, 0.0, 0.0], [1.0, 2.0, 3.0]),
           np.interp([np.nan, 2.0], [-1.0, 0.0, 0.0], [1.0, 2.0, 3.0]))
    # cov(rowvar=False) of a single row: its columns are the variables
    m = X[:1]
    _close(fnp.cov(m, rowvar=False), np.cov(m, rowvar=False))
    # nanargmax(axis=None, keepdims=True) keeps every axis
    _close(fnp.nanargmax(XN, keepdims=True), np.nanargmax(XN, keepdims=True))


def test_i0_values_and_derivative() -> None:
    """fnp.i0 against NumPy, and its derivative is I1 (SciPy)."""
    import scipy.special

    x = np.array([0.0, 1.0, -3.0, 10.0, 700.0])
    np.testing.assert_allclose(fnp.i0(x), np.i0(x), rtol=1e-14)
    np.testing.assert_allclose(fx.grad(lambda x: fnp.sum(fnp.i0(x)))(x[:4]),
                               scipy.special.i1(x[:4]), rtol=1e-13)
