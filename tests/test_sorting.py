"""Sorting and order statistics against NumPy and JAX (functx.numpy._sorting, functx.lax,
functx.primitives.sort): values, the stable order of ties, NaN placement, gradients (ties
as JAX routes them), JVPs, unique with size= under jit and vmap, the CPU fast paths and
the error messages.

JAX runs in float64 inside the ``x64`` context only (the global flag would change other
tests' JAX). The property tests of the primitives are in tests/specs/sort.py.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import functx
import functx.lax as flax
import functx.numpy as fnp
from functx.errors import ConcretizationError, DTypeError, ShapeError
from functx.primitives import sort as so

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture
def x64():
    ctx = jax.enable_x64(True) if hasattr(jax, "enable_x64") else \
        pytest.importorskip("jax.experimental").enable_x64()
    with ctx:
        yield


RNG = np.random.default_rng(1234)
TIES = np.array([[3.0, 1.0, 3.0, 2.0, 1.0], [0.0, -0.0, 5.0, 0.0, -1.0]])
WITH_NAN = np.array([2.0, np.nan, -1.0, np.nan, 2.0, -np.inf, np.inf, 0.0, -0.0])


def same_bits(a, b) -> None:
    """Equal values, NaN where NaN, and the sign of zeros."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_array_equal(a, b)
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


# -- sort, argsort, lexsort, partition -------------------------------------------------------

@pytest.mark.parametrize("x", [TIES, WITH_NAN, RNG.integers(0, 4, (3, 7)),
                               RNG.standard_normal((4, 3, 5))], ids=["ties", "nan", "int", "3d"])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort_match_jax(x64, x, descending) -> None:
    for axis in [None] + list(range(-x.ndim, x.ndim)):
        same_bits(fnp.sort(x, axis=axis, descending=descending),
                  jnp.sort(x, axis=axis, descending=descending))
        np.testing.assert_array_equal(fnp.argsort(x, axis=axis, descending=descending),
                                      jnp.argsort(x, axis=axis, descending=descending))
        if not descending:  # NumPy's own stable sort agrees
            np.testing.assert_array_equal(fnp.argsort(x, axis=axis),
                                          np.argsort(x, axis=axis, kind="stable"))


def test_sort_puts_nan_last_and_keeps_signed_zero_order() -> None:
    out = fnp.sort(WITH_NAN)
    assert np.isnan(out[-2:]).all() and out[0] == -np.inf and out[-3] == np.inf
    # -0.0 and 0.0 are equal: they keep their order (0.0 came first, then -0.0)
    assert out[2] == 0 and not np.signbit(out[2]) and out[3] == 0 and np.signbit(out[3])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int8,
                                   np.int32, np.uint32, np.int64, np.float64, np.bool_])
def test_cpu_permutation_is_the_stable_one(dtype) -> None:
    """The packed-word and tie-checked fast paths give NumPy's stable order, ties included."""
    for x in (RNG.integers(-3, 4, (3, 400)), RNG.standard_normal((2, 1000)) * 100):
        x = x.astype(dtype)
        if np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16:
            x[0, ::7] = np.nan
            x[1, ::5] = -0.0
        key = x.astype(np.float32) if dtype is ml_dtypes.bfloat16 else x
        np.testing.assert_array_equal(fnp.argsort(x), np.argsort(key, kind="stable"))
        # along a non-contiguous axis (the bit views need contiguous rows)
        np.testing.assert_array_equal(fnp.argsort(x.T, axis=0),
                                      np.argsort(key.T, axis=0, kind="stable"))
        same_bits(np.asarray(fnp.sort(x)).astype(np.float64),
                  np.sort(key, kind="stable").astype(np.float64))


def test_lexsort_matches_numpy_and_jax(x64) -> None:
    keys = [RNG.integers(0, 3, (4, 9)), RNG.integers(0, 2, (4, 9)), RNG.standard_normal((4, 9))]
    for axis in (-1, 0):
        np.testing.assert_array_equal(fnp.lexsort(keys, axis=axis), np.lexsort(keys, axis=axis))
        np.testing.assert_array_equal(fnp.lexsort(keys, axis=axis),
                                      jnp.lexsort([jnp.asarray(k) for k in keys], axis=axis))
    np.testing.assert_array_equal(fnp.lexsort(np.stack(keys[:2])), np.lexsort(np.stack(keys[:2])))


@pytest.mark.parametrize("kth", [0, 2, -1, 5])
def test_partition_matches_jax(x64, kth) -> None:
    x = np.array([[4.0, 1.0, 3.0, 1.0, 9.0, 2.0], [0.5, 0.1, 0.3, 0.2, 0.9, 0.7]])
    same_bits(fnp.partition(x, kth), jnp.partition(x, kth))
    np.testing.assert_array_equal(fnp.argpartition(x, kth), jnp.argpartition(x, kth))
    # NumPy's contract: the kth element in place, smaller ones before, larger after
    p = np.asarray(fnp.partition(x, kth, axis=-1))
    k = kth % x.shape[-1]
    np.testing.assert_array_equal(p[:, k], np.sort(x, axis=-1)[:, k])
    assert (p[:, :k] <= p[:, k:k + 1]).all() and (p[:, k + 1:] >= p[:, k:k + 1]).all()
    picked = np.take_along_axis(x, np.asarray(fnp.argpartition(x, kth)), -1)
    np.testing.assert_array_equal(picked[:, :k + 1], p[:, :k + 1])
    np.testing.assert_array_equal(np.sort(picked, -1), np.sort(x, -1))


def test_sort_complex_matches_numpy() -> None:
    z = np.array([1 + 2j, 1 + 1j, -3 + 5j, 1 + 1j])
    np.testing.assert_array_equal(fnp.sort_complex(z), np.sort_complex(z))
    for dt in (np.int8, np.float32, np.int64):
        a = np.array([3, 1, 2], dt)
        assert np.asarray(fnp.sort_complex(a)).dtype == np.sort_complex(a).dtype


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_matches_numpy_and_jax(x64, side) -> None:
    a = np.array([-1.0, 0.0, 0.0, 2.0, 5.0, np.nan])
    v = np.array([[-2.0, 0.0, 1.0], [5.0, 7.0, np.nan]])
    np.testing.assert_array_equal(fnp.searchsorted(a, v, side=side),
                                  np.searchsorted(a, v, side=side))
    np.testing.assert_array_equal(fnp.searchsorted(a[:-1], v[0], side=side),
                                  jnp.searchsorted(a[:-1], v[0], side=side))
    unsorted = np.array([5.0, -1.0, 2.0, 0.0])
    sorter = np.argsort(unsorted)
    np.testing.assert_array_equal(fnp.searchsorted(unsorted, 1.5, side=side, sorter=sorter),
                                  np.searchsorted(unsorted, 1.5, side=side, sorter=sorter))
    # an int array and float values promote as in NumPy
    assert int(fnp.searchsorted(np.arange(5), 2.5)) == 3


def test_searchsorted_under_vmap_of_sorted_rows() -> None:
    a = np.sort(RNG.standard_normal((4, 10)), axis=1)
    v = RNG.standard_normal((4, 3))
    got = functx.vmap(fnp.searchsorted)(a, v)
    np.testing.assert_array_equal(got, [np.searchsorted(r, w) for r, w in zip(a, v)])
    got = functx.vmap(fnp.searchsorted, in_axes=(None, 0))(a[0], v)
    np.testing.assert_array_equal(got, np.searchsorted(a[0], v))


# -- gradients and JVPs through the permutation ------------------------------------------------

def _grad_both(f_fx, f_jax, x, **kw):
    return functx.grad(f_fx, **kw)(x), np.asarray(jax.grad(f_jax, **kw)(jnp.asarray(x)))


W = np.array([1.0, -2.0, 3.5, 0.25, 7.0])
TIED = np.array([2.0, 1.0, 2.0, 1.0, 2.0])


@pytest.mark.parametrize("case", ["sort", "sort_desc", "argsort_take", "top_k", "median",
                                  "quantile", "cummax", "cummin", "cummax_rev", "cumlogsumexp",
                                  "partition", "lax_sort_pair"])
def test_grads_with_ties_match_jax(x64, case) -> None:
    def make(np_, lax):
        def f(x):
            if case == "sort":
                return np_.sort(x) @ W
            if case == "sort_desc":
                return np_.sort(x, descending=True) @ W
            if case == "argsort_take":
                return np_.take(x, np_.argsort(x)) @ W
            if case == "top_k":
                return lax.top_k(x, 3)[0] @ W[:3]
            if case == "median":
                return np_.median(x * W)
            if case == "quantile":
                return np_.quantile(x, np_.array([0.1, 0.3, 0.95])) @ W[:3]
            if case == "cummax":
                return lax.cummax(x) @ W
            if case == "cummin":
                return lax.cummin(x) @ W
            if case == "cummax_rev":
                return lax.cummax(x, reverse=True) @ W
            if case == "cumlogsumexp":
                return lax.cumlogsumexp(x) @ W
            if case == "partition":
                return np_.partition(x, 2) @ W
            keys, vals = lax.sort((x, x * x), num_keys=1)
            return keys @ W + vals @ W[::-1]
        return f
    for x in (TIED, np.array([0.3, -1.2, 2.5, 0.7, -0.1])):
        got, want = _grad_both(make(fnp, flax), make(jnp, jax.lax), x)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=case)


@pytest.mark.parametrize("n", [1, 6, 11])
def test_cumulative_extrema_ties_match_jax_at_every_length(x64, n) -> None:
    """JAX's scan tree decides how ties share a cotangent: every length, both directions."""
    x = RNG.integers(0, 3, (2, n)).astype(np.float64)
    w = RNG.standard_normal((2, n))
    combos = [(name, reverse, axis) for name in ("cummax", "cummin")
              for reverse in (False, True) for axis in (0, 1)]

    def grads(lax, grad, x):
        return [grad(lambda x: (getattr(lax, name)(x, axis=axis, reverse=reverse) * w).sum())(x)
                for name, reverse, axis in combos]
    want = jax.jit(lambda x: grads(jax.lax, jax.grad, x))(jnp.asarray(x))  # one compile
    for combo, got, ref in zip(combos, grads(flax, functx.grad, x), want):
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg=str(combo))


@pytest.mark.parametrize("case", ["sort", "top_k", "cummax", "cumlogsumexp", "quantile"])
def test_jvps_match_jax(x64, case) -> None:
    def make(np_, lax):
        return {"sort": lambda x: np_.sort(x, axis=0),
                "top_k": lambda x: lax.top_k(x, 2)[0],
                "cummax": lambda x: lax.cummax(x, axis=1),
                "cumlogsumexp": lambda x: lax.cumlogsumexp(x, axis=1, reverse=True),
                "quantile": lambda x: np_.quantile(x, 0.4, axis=1)}[case]
    x = np.array([[0.5, 2.0, -1.0, 2.0], [3.0, 3.0, 0.0, 1.0]])
    t = RNG.standard_normal(x.shape)
    _, got = functx.jvp(make(fnp, flax), (x,), (t,))
    _, want = jax.jvp(make(jnp, jax.lax), (jnp.asarray(x),), (jnp.asarray(t),))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_top_k_matches_jax_with_nan_and_ties(x64) -> None:
    x = np.array([[1.0, np.nan, 3.0, 3.0, -np.inf, np.nan], [0.0, 0.0, 0.0, 1.0, 1.0, -1.0]])
    for k in range(7):
        v, i = flax.top_k(x, k)
        jv, ji = jax.lax.top_k(x, k)
        same_bits(v, jv)
        np.testing.assert_array_equal(i, ji)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.float16])
def test_top_k_partition_path_is_the_stable_order(dtype) -> None:
    """Large rows take the CPU partition path; its result is the stable descending order
    (ties straddling the cut fall back to the full sort)."""
    for x in (RNG.standard_normal((3, 2000)) * 50, RNG.integers(0, 20, (2, 500))):
        x = x.astype(dtype)
        if x.dtype.kind == "f":
            x[0, 7] = x[0, 99] = np.nan
        for k in (1, 10, 100):
            v, i = so.top_k(x, k)
            key = x.astype(np.float64)
            want = np.argsort(-np.where(np.isnan(key), np.inf, key), axis=-1, kind="stable")
            want = want[..., :k]
            np.testing.assert_array_equal(i, want)
            same_bits(v, np.take_along_axis(x, want, -1))


def test_sort_and_top_k_under_vmap_and_jit() -> None:
    x = RNG.standard_normal((3, 4, 5))
    for in_axes in (0, 1, 2):
        got = functx.vmap(lambda r: fnp.sort(r, axis=-1), in_axes=in_axes)(x)
        want = np.stack([np.sort(np.take(x, b, axis=in_axes), axis=-1)
                         for b in range(x.shape[in_axes])])
        np.testing.assert_array_equal(got, want)
        got = functx.vmap(lambda r: flax.top_k(r, 2)[1], in_axes=in_axes)(x)
        want = np.stack([np.argsort(-np.take(x, b, axis=in_axes), axis=-1)[..., :2]
                         for b in range(x.shape[in_axes])])
        np.testing.assert_array_equal(got, want)
    f = functx.jit(lambda x: (fnp.sort(x, axis=0), flax.top_k(x, 3)[0], fnp.median(x, axis=1)))
    for a, b in zip(f(x), (np.sort(x, axis=0), -np.sort(-x)[..., :3], np.median(x, axis=1))):
        np.testing.assert_allclose(a, b, rtol=1e-15)
    g = functx.jit(functx.grad(lambda x: (fnp.sort(x, axis=1) * x).sum()))(x)
    np.testing.assert_allclose(g, functx.grad(lambda x: (fnp.sort(x, axis=1) * x).sum())(x))


# -- cumulative ------------------------------------------------------------------------------

def test_cumulative_match_jax(x64) -> None:
    x = np.array([[1.0, np.nan, 3.0, -2.0], [0.0, -5.0, 4.0, 4.0]])
    for reverse in (False, True):
        for axis in (0, 1):
            for name in ("cummax", "cummin", "cumlogsumexp", "cumsum", "cumprod"):
                got = getattr(flax, name)(x, axis=axis, reverse=reverse)
                want = getattr(jax.lax, name)(x, axis=axis, reverse=reverse)
                np.testing.assert_allclose(got, want, rtol=1e-13, err_msg=name)
    np.testing.assert_array_equal(flax.cummax(np.array([3, 1, 4], np.int32)), [3, 3, 4])
    # logcumsumexp neither overflows nor loses small leading terms
    np.testing.assert_allclose(flax.cumlogsumexp(np.array([-1000.0, 0.0, 1000.0])),
                               [-1000.0, 0.0, 1000.0])
    np.testing.assert_allclose(flax.cumlogsumexp(np.array([-np.inf, -np.inf, 0.0])),
                               [-np.inf, -np.inf, 0.0])


# -- quantiles -------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantiles_match_numpy(method) -> None:
    a = RNG.standard_normal((3, 4, 6))
    a[0, 0, 0] = a[0, 0, 1]  # a tie
    q = np.array([0.0, 0.25, 0.5, 0.8, 1.0])
    for axis in (None, 0, -1, (0, 2)):
        for keepdims in (False, True):
            np.testing.assert_allclose(
                fnp.quantile(a, q, axis=axis, method=method, keepdims=keepdims),
                np.quantile(a, q, axis=axis, method=method, keepdims=keepdims), rtol=1e-13)
            np.testing.assert_allclose(
                fnp.percentile(a, 37.5, axis=axis, method=method, keepdims=keepdims),
                np.percentile(a, 37.5, axis=axis, method=method, keepdims=keepdims), rtol=1e-13)
    np.testing.assert_allclose(fnp.median(a, axis=1), np.median(a, axis=1), rtol=1e-15)
    assert np.asarray(fnp.quantile(np.arange(5), 0.3)).dtype == np.float64


def test_nan_quantiles_match_numpy() -> None:
    a = RNG.standard_normal((4, 7))
    a[0, 2] = a[1, :] = a[2, 1] = a[2, 5] = np.nan
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want_med = np.nanmedian(a, axis=1)
    np.testing.assert_allclose(fnp.nanmedian(a, axis=1), want_med, rtol=1e-15)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.nanquantile(a, [0.2, 0.9], axis=1)
    np.testing.assert_allclose(fnp.nanquantile(a, [0.2, 0.9], axis=1), want, rtol=1e-13)
    np.testing.assert_allclose(fnp.nanpercentile(a[2], 40), np.nanpercentile(a[2], 40))
    # the plain versions give NaN wherever a row holds a NaN
    np.testing.assert_allclose(fnp.median(a, axis=1), np.median(a, axis=1))
    np.testing.assert_allclose(fnp.quantile(a, 0.5, axis=0), np.quantile(a, 0.5, axis=0))


def test_quantile_gradient_in_q_and_under_vmap(x64) -> None:
    a = np.array([1.0, 5.0, 2.0, 8.0])
    got = functx.grad(lambda q: fnp.quantile(a, q))(0.4)
    want = jax.grad(lambda q: jnp.quantile(jnp.asarray(a), q))(0.4)
    np.testing.assert_allclose(got, want)
    b = RNG.standard_normal((5, 6))
    np.testing.assert_allclose(functx.vmap(fnp.median)(b), np.median(b, axis=1), rtol=1e-15)
    np.testing.assert_allclose(functx.vmap(lambda r: fnp.nanquantile(r, 0.3))(b),
                               np.nanquantile(b, 0.3, axis=1), rtol=1e-14)


# -- unique ----------------------------------------------------------------------------------

def test_unique_axis_matches_numpy() -> None:
    """The distinct slices along an axis, their first indices, inverse and counts, as
    numpy.unique (negative axes, 3-d operands, empty axes, float and int)."""
    rng = np.random.default_rng(5)
    cases = [rng.integers(0, 3, (40, 3)), rng.integers(0, 2, (4, 9, 2)),
             rng.integers(0, 2, (5, 6)).astype(np.float32), np.zeros((3, 0)), np.zeros((0, 3)),
             TIES, rng.integers(0, 3, (7,))]
    for x in cases:
        for axis in list(range(x.ndim)) + [-1]:
            got = fnp.unique(x, True, True, True, axis=axis)
            want = np.unique(x, True, True, True, axis=axis)
            for g, w in zip(got, want):
                g = np.asarray(g)
                assert g.shape == w.shape and g.dtype.kind == w.dtype.kind, (x.shape, axis)
                np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(fnp.unique(x, axis=axis), np.unique(x, axis=axis))


def test_unique_axis_nan_rows_size_and_transforms_match_jax(x64) -> None:
    """As jax.numpy.unique: rows with NaNs in the same places are one row unless
    equal_nan=False (NumPy keeps them apart); size=/fill_value= pad or cut, under jit and
    vmap too; the values' gradient follows the first occurrence of each row."""
    x = np.array([[1.0, np.nan], [1.0, np.nan], [0.0, 2.0], [0.0, 2.0], [3.0, -1.0]])
    for eq in (True, False):
        for g, w in zip(fnp.unique(x, True, True, True, axis=0, equal_nan=eq),
                        jnp.unique(x, True, True, True, axis=0, equal_nan=eq)):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w).reshape(np.shape(g)))
    y = RNG.integers(0, 2, (12, 3)).astype(np.float64)
    for size in (2, 9):
        for fill in (None, -7.0):
            got = functx.jit(lambda v: fnp.unique(v, axis=0, size=size, fill_value=fill))(y)
            np.testing.assert_array_equal(got, jnp.unique(y, axis=0, size=size, fill_value=fill))
    ys = np.stack([y, y[::-1] * 2])
    got = functx.vmap(lambda v: fnp.unique(v, axis=1, size=4))(ys)
    want = jax.vmap(lambda v: jnp.unique(v, axis=1, size=4))(ys)
    np.testing.assert_array_equal(got, want)
    w = RNG.standard_normal((8, 3))
    f = lambda v, ns: ns.sum(ns.unique(v, axis=0, size=8) * w)
    g = np.asarray(functx.grad(lambda v: f(v, fnp))(y + 0.1))
    np.testing.assert_allclose(g, jax.grad(lambda v: f(v, jnp))(y + 0.1))
    assert np.count_nonzero(np.abs(g).sum(axis=1)) == len(np.unique(y, axis=0)[:8])


def test_unique_matches_numpy() -> None:
    for x in (np.array([[3.0, 1.0], [3.0, np.nan]]), RNG.integers(0, 5, (4, 6)),
              np.array([np.nan, 2.0, np.nan, -0.0, 0.0])):
        for flags in ((False, False, False), (True, True, True), (False, True, False)):
            got = fnp.unique(x, *flags)
            want = np.unique(x, *flags)
            for g, w in zip(got if isinstance(got, tuple) else (got,),
                            want if isinstance(want, tuple) else (want,)):
                np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(fnp.unique(x, equal_nan=False),
                                      np.unique(x, equal_nan=False))
        # the Array API functions: NaNs distinct, sorted here (NumPy may not sort them)
        for name, flags in (("unique_values", ()), ("unique_counts", (False, False, True)),
                            ("unique_inverse", (False, True)), ("unique_all", (True, True, True))):
            got = getattr(fnp, name)(x)
            want = np.unique(x, *flags, equal_nan=False)
            for g, w in zip(got if isinstance(got, tuple) else (got,),
                            want if isinstance(want, tuple) else (want,)):
                np.testing.assert_array_equal(g, w, err_msg=name)
            if name != "unique_values":
                np.testing.assert_array_equal(got._fields, getattr(np, name)(x)._fields)
    assert fnp.unique(np.zeros((0,))).shape == (0,)


def test_unique_with_size_under_jit_and_vmap_matches_jax() -> None:
    x = np.array([[2.0, 2.0, 1.0, np.nan, 7.0], [1.0, 5.0, 1.0, 1.0, 1.0]])
    kw = dict(return_index=True, return_inverse=True, return_counts=True)
    settings = ((3, None), (6, -7.0))

    def all_of(np_, vmap, jit, x):
        return [(jit(lambda r: np_.unique(r, size=size, fill_value=fill, **kw))(x[0]),
                 vmap(lambda r: np_.unique(r, size=size, fill_value=fill, **kw))(x))
                for size, fill in settings]
    want = jax.jit(lambda x: all_of(jnp, jax.vmap, lambda f: f, x))(x)  # one compile
    got = all_of(fnp, functx.vmap, functx.jit, x)
    for (g_jit, g_vmap), (w_jit, w_vmap) in zip(got, want):
        for g, w in zip(g_jit + g_vmap, w_jit + w_vmap):
            np.testing.assert_array_equal(g, w)


def test_unique_values_are_differentiable() -> None:
    x = np.array([3.0, 1.0, 3.0, 2.0])
    g = functx.grad(lambda x: fnp.unique(x) @ np.array([1.0, 10.0, 100.0]))(x)
    np.testing.assert_array_equal(g, [100.0, 1.0, 0.0, 10.0])  # each value's first element


# -- errors ----------------------------------------------------------------------------------

def test_errors_are_full_sentences() -> None:
    with pytest.raises(ConcretizationError, match="size="):
        functx.jit(fnp.unique)(np.array([1.0, 2.0]))
    with pytest.raises(ShapeError, match="k must be between 0 and"):
        flax.top_k(np.ones(3), 4)
    with pytest.raises(ShapeError, match="one shape"):
        flax.sort((np.ones(3), np.ones(4)))
    with pytest.raises(ValueError, match="out of bounds"):
        fnp.partition(np.ones(3), 3)
    with pytest.raises(TypeError, match="one int kth"):
        fnp.partition(np.ones(3), [0, 1])
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        fnp.quantile(np.ones(3), 1.5)
    with pytest.raises(ValueError, match=r"range \[0, 100\]"):
        fnp.percentile(np.ones(3), -1)
    with pytest.raises(ValueError, match="method must be one of"):
        fnp.quantile(np.ones(3), 0.5, method="hazen")
    with pytest.raises(ValueError, match="1-d sorted array"):
        fnp.searchsorted(np.ones((2, 2)), 1.0)
    with pytest.raises(TypeError, match="order="):
        fnp.sort(np.ones(3), order="f")
    with pytest.raises(ValueError, match="out of"):
        fnp.unique(np.ones((2, 2)), axis=2)
    with pytest.raises(ValueError, match="0-d array"):
        fnp.unique(np.float64(1.0), axis=0)
    with pytest.raises(DTypeError, match="floating-point values"):
        flax.cumlogsumexp(np.arange(3))
    with pytest.raises(DTypeError, match="real values"):
        flax.cummax(np.array([1j, 2j]))
    with pytest.raises(ValueError, match="0-d array"):
        fnp.sort(np.float64(1.0))


def test_public_names_exist_in_jax_and_have_docstrings() -> None:
    from functx.lax import _sorting as lax_sorting
    from functx.numpy import _sorting

    for name in _sorting.__all__:
        assert getattr(fnp, name).__doc__, f"functx.numpy.{name} needs a docstring"
        assert hasattr(jnp, name), f"jax.numpy has no {name}"
    for name in lax_sorting.__all__:
        assert getattr(flax, name).__doc__, f"functx.lax.{name} needs a docstring"
        assert hasattr(jax.lax, name), f"jax.lax has no {name}"
