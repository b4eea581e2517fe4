"""Explicit numerical tests of the structural primitives, against closed forms.

The spec table (tests/specs/structural.py) checks every rule on random inputs without ties;
this file covers what needs chosen inputs: ties in max/min, zeros in products, duplicate
indices, clamping, empty reductions, higher derivatives, traced indices and error messages.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import functx as fx
from functx.primitives import elementwise as ew
from functx.primitives import indexing as ix
from functx.primitives import linalg as la
from functx.primitives import reduction as red
from functx.primitives import shape as sh
from tests.strategies import array, shapes


def total(x):
    """The sum of all entries of ``x`` (a scalar, for grad)."""
    return red.reduce_sum(x, tuple(range(np.ndim(x))))


def jacobian(f, x):
    """The Jacobian of ``f`` at ``x``, of shape out.shape + x.shape, row by row via vjp."""
    out, f_vjp = fx.vjp(f, x)
    rows = [f_vjp(np.eye(out.size)[k].reshape(out.shape))[0] for k in range(out.size)]
    return np.stack(rows).reshape(np.shape(out) + np.shape(x)) if rows else \
        np.zeros(np.shape(out) + np.shape(x))


# -- max/min: ties split the cotangent evenly ------------------------------------------------

@pytest.mark.parametrize("reduce", [red.reduce_max, red.reduce_min])
def test_ties_split_the_cotangent_evenly(reduce):
    sign = 1.0 if reduce is red.reduce_max else -1.0
    x = sign * np.array([[1.0, 3.0, 3.0, 2.0],
                         [5.0, 5.0, 5.0, 0.0],
                         [4.0, 1.0, 0.0, -1.0]])
    g = fx.grad(lambda x: total(ew.mul(reduce(x, (1,)), np.array([1.0, 2.0, 3.0]))))(x)
    np.testing.assert_allclose(g, [[0, 0.5, 0.5, 0], [2 / 3, 2 / 3, 2 / 3, 0], [3, 0, 0, 0]])
    # Over all axes, the three tied extrema (5, 5, 5) share the cotangent.
    g_all = fx.grad(lambda x: reduce(x, (0, 1)))(x)
    np.testing.assert_allclose(g_all, np.where(x == sign * 5.0, 1 / 3, 0.0))


def test_max_of_a_constant_array_has_the_mean_as_gradient():
    x = np.full((2, 3, 4), 7.0)
    np.testing.assert_allclose(fx.grad(lambda x: red.reduce_max(x, (0, 2)).sum())(x),
                               np.full(x.shape, 1 / 8))


@pytest.mark.parametrize("dtype, axes, expect_max, expect_min", [
    (np.float64, (1,), -np.inf, np.inf),
    (np.int32, (0, 1), np.iinfo(np.int32).min, np.iinfo(np.int32).max),
    (np.bool_, (1,), False, True),
])
def test_empty_reductions_give_the_identity(dtype, axes, expect_max, expect_min):
    x = np.zeros((3, 0), dtype)
    out_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    for reduce, expected in ((red.reduce_max, expect_max), (red.reduce_min, expect_min)):
        out = reduce(x, axes)
        assert out.shape == out_shape and out.dtype == x.dtype
        assert np.all(out == expected)
    if dtype != np.bool_:
        np.testing.assert_array_equal(red.reduce_prod(x, axes), np.ones(out_shape, dtype))
        np.testing.assert_array_equal(red.reduce_sum(x, axes), np.zeros(out_shape, dtype))


def test_empty_reduction_gradients_have_the_input_shape():
    x = np.zeros((3, 0))
    for reduce in (red.reduce_max, red.reduce_min, red.reduce_prod):
        _, f_vjp = fx.vjp(lambda x: reduce(x, (1,)), x)
        assert f_vjp(np.ones(3))[0].shape == (3, 0)


def test_bool_max_min_are_any_all():
    x = np.array([[True, False], [False, False], [True, True]])
    np.testing.assert_array_equal(red.reduce_max(x, (1,)), [True, False, True])
    np.testing.assert_array_equal(red.reduce_min(x, (1,)), [False, False, True])


# -- reduce_prod: exact gradients with zeros -------------------------------------------------

def _others(x: np.ndarray, skip: tuple) -> float:
    return float(np.prod(np.delete(x, list(skip))))


@given(st.integers(1, 6).flatmap(lambda n: st.tuples(array((n,), -2, 2), st.lists(
    st.integers(0, n - 1), max_size=3))))
def test_prod_gradient_and_hessian_with_zeros(case):
    x, zeros = case
    x = x.copy()
    x[zeros] = 0.0
    n = x.size
    f = lambda x: red.reduce_prod(x, (0,))
    g = fx.grad(f)(x)
    np.testing.assert_allclose(g, [_others(x, (i,)) for i in range(n)], rtol=1e-12, atol=1e-12)
    h = jacobian(fx.grad(f), x)
    expected = [[0.0 if i == j else _others(x, (i, j)) for j in range(n)] for i in range(n)]
    np.testing.assert_allclose(h, expected, rtol=1e-12, atol=1e-12)


def test_prod_over_several_axes_with_zeros():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.5, (3, 4, 2))
    x[1, 2, 0] = 0.0
    x[2, 0, 1] = 0.0
    x[2, 3, 1] = 0.0
    ct = rng.standard_normal(4)
    _, f_vjp = fx.vjp(lambda x: red.reduce_prod(x, (0, 2)), x)
    got = f_vjp(ct)[0]
    for i, j, k in itertools.product(range(3), range(4), range(2)):
        group = np.delete(x[:, j, :].ravel(), i * 2 + k)
        assert got[i, j, k] == pytest.approx(ct[j] * np.prod(group), rel=1e-12, abs=1e-15)


# -- argmax/argmin, cumsum -------------------------------------------------------------------

def test_argmax_argmin_pick_the_first_occurrence():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [np.nan, 5.0, np.nan, 0.0]])
    np.testing.assert_array_equal(red.argmax(x, axis=1), [1, 0, 0])
    np.testing.assert_array_equal(red.argmin(x, axis=1), [3, 0, 0])
    out = red.argmax(x, axis=0, index_dtype=np.int32)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.argmax(x, axis=0))


def test_argmax_has_no_gradient_and_empty_axis_is_an_error():
    g = fx.grad(lambda x: total(ew.mul(x, ew.convert_element_type(
        red.argmax(x, axis=0), new_dtype=np.float64))))(np.array([1.0, 4.0, 2.0]))
    np.testing.assert_allclose(g, [1.0, 1.0, 1.0])  # d/dx (x * const) only
    with pytest.raises(fx.ShapeError, match="empty"):
        fx.make_trace(lambda x: red.argmax(x, axis=1))(np.zeros((2, 0)))


@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_gradient_is_the_cumsum_the_other_way(reverse):
    w = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    g = fx.grad(lambda x: total(ew.mul(w, red.cumsum(x, axis=1, reverse=reverse))))(np.ones((2, 3)))
    expected = np.cumsum(w, axis=1) if reverse else np.cumsum(w[:, ::-1], axis=1)[:, ::-1]
    np.testing.assert_allclose(g, expected)


# -- shape primitives ------------------------------------------------------------------------

def test_pad_negative_interior_and_its_gradient():
    x = np.arange(1.0, 6.0)
    out = sh.pad(x, np.float64(9.0), [(-1, 2, 1)])
    np.testing.assert_array_equal(out, [9, 2, 9, 3, 9, 4, 9, 5, 9, 9])
    ct = np.arange(10.0)
    _, f_vjp = fx.vjp(lambda x, v: sh.pad(x, v, [(-1, 2, 1)]), x, np.float64(9.0))
    gx, gv = f_vjp(ct)
    np.testing.assert_allclose(gx, [0, 1, 3, 5, 7])  # x[0] was cropped away
    np.testing.assert_allclose(gv, 0 + 2 + 4 + 6 + 8 + 9)


def test_strided_slice_gradient_scatters_back():
    x = np.arange(10.0).reshape(2, 5)
    g = fx.grad(lambda x: total(sh.slice(x, (0, 1), (2, 5), (1, 2))))(x)
    np.testing.assert_array_equal(g, [[0, 1, 0, 1, 0], [0, 1, 0, 1, 0]])


def test_dynamic_slice_clamps_like_lax():
    x = np.arange(10.0)
    for start, expected in ((-3, [0, 1, 2]), (4, [4, 5, 6]), (9, [7, 8, 9]), (100, [7, 8, 9])):
        np.testing.assert_array_equal(sh.dynamic_slice(x, [start], [3]), expected)
        g = fx.grad(lambda x: total(sh.dynamic_slice(x, [np.int32(start)], [3])))(x)
        np.testing.assert_array_equal(g, np.isin(x, expected).astype(float))
    np.testing.assert_array_equal(sh.dynamic_update_slice(x, np.zeros(2), [9]),
                                  np.r_[np.arange(8.0), 0, 0])


def test_dynamic_slice_with_traced_indices():
    def f(x, i):
        return sh.dynamic_slice(x, [i, 1], [2, 2])

    trace = fx.make_trace(f)(np.zeros((4, 3)), np.int64(0))
    assert "dynamic_slice" in str(trace)
    x = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(fx.eval_trace(trace, x, np.int64(5))[0], [[7, 8], [10, 11]])
    # The index may come from the differentiated value itself (a traced integer).
    g = fx.grad(lambda x: total(f(x, red.argmax(red.reduce_sum(x, (1,)), axis=0))))(x)
    np.testing.assert_array_equal(g, [[0, 0, 0]] * 2 + [[0, 1, 1]] * 2)


# -- gather and the scatters -----------------------------------------------------------------

def test_gather_duplicates_and_clamping():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    idx = np.array([[0, 0], [2, 7], [-4, 1]])
    out = ix.gather(x, idx, axis=1)
    assert out.shape == (2, 3, 2)
    np.testing.assert_array_equal(out[0], [[1, 1], [3, 3], [1, 2]])
    g = fx.grad(lambda x: total(ix.gather(x, idx, axis=1)))(x)
    np.testing.assert_array_equal(g, [[3, 1, 2], [3, 1, 2]])


def test_scatter_add_accumulates_duplicates():
    x = np.zeros(4)
    out = ix.scatter_add(x, np.array([1, 1, 3, 9]), np.array([1.0, 2.0, 3.0, 4.0]), axis=0)
    np.testing.assert_array_equal(out, [0, 3, 0, 7])


def test_scatter_last_duplicate_wins_and_gets_the_gradient():
    x = np.array([10.0, 20.0, 30.0, 40.0])
    idx = np.array([[2, 0], [2, 5]])  # position 2 is written twice, 5 is clamped to 3
    upd = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(ix.scatter(x, idx, upd, axis=0), [2, 20, 3, 4])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    f = lambda x, u: total(ew.mul(w, ix.scatter(x, idx, u, axis=0)))
    gx, gu = fx.grad(f, argnums=(0, 1))(x, upd)
    np.testing.assert_array_equal(gx, [0, 2, 0, 0])
    np.testing.assert_array_equal(gu, [[0, 1], [3, 4]])  # the first write to 2 was overwritten


def test_scatter_along_an_inner_axis():
    x = np.zeros((2, 3, 2))
    idx = np.array([1, 1])
    upd = np.arange(8.0).reshape(2, 2, 2)
    out = ix.scatter(x, idx, upd, axis=1)
    np.testing.assert_array_equal(out[:, 1], upd[:, 1])
    gu = fx.grad(lambda u: total(ix.scatter(x, idx, u, axis=1)))(upd)
    np.testing.assert_array_equal(gu[:, 0], 0)
    np.testing.assert_array_equal(gu[:, 1], 1)


# -- dot_general -----------------------------------------------------------------------------

def test_matmul_fast_path_matches_numpy_on_views():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((4, 5))
    expected = np.einsum("ji,kj->ik", a, b)  # a.T @ b.T, whichever layout holds it
    for x, y, contract in ((a.T, b.T, ((1,), (0,))), (a, b.T, ((0,), (0,))),
                           (a.T, b, ((1,), (1,))), (a, b, ((0,), (1,)))):
        out = la.dot_general(x, y, dimension_numbers=(contract, ((), ())))
        np.testing.assert_allclose(out, expected, rtol=1e-13)


def test_dot_general_hessian_is_constant():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 3))

    def f(x):
        y = la.dot_general(a, x, dimension_numbers=(((1,), (0,)), ((), ())))
        return total(ew.mul(y, y))

    h = jacobian(fx.grad(f), rng.standard_normal(3))
    np.testing.assert_allclose(h, 2 * a.T @ a, rtol=1e-12)


@given(shapes(min_rank=2, max_rank=2, min_side=1))
def test_batched_matmul_gradients_match_closed_forms(shape):
    rng = np.random.default_rng(sum(shape))
    b, k = shape
    x, y = rng.standard_normal((b, 2, k)), rng.standard_normal((b, k, 3))
    ct = rng.standard_normal((b, 2, 3))
    dims = (((2,), (1,)), ((0,), (0,)))
    _, f_vjp = fx.vjp(lambda x, y: la.dot_general(x, y, dimension_numbers=dims), x, y)
    gx, gy = f_vjp(ct)
    np.testing.assert_allclose(gx, ct @ y.transpose(0, 2, 1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gy, x.transpose(0, 2, 1) @ ct, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("x_shape, y_shape, dims, error, words", [
    ((2, 3), (4, 5), (((1,), (0,)), ((), ())), fx.ShapeError, ["f64[2,3]", "f64[4,5]", "size 3"]),
    ((2, 3), (3,), (((1,), (0,)), ((0,), ())), fx.ShapeError, ["as many batch axes"]),
    ((2, 3), (3, 2), (((1, 1), (0, 1)), ((), ())), fx.ShapeError, ["distinct"]),
    ((2, 3), (3, 2), (((2,), (0,)), ((), ())), fx.ShapeError, ["[0, 2)"]),
])
def test_dot_general_rejects_bad_dimension_numbers(x_shape, y_shape, dims, error, words):
    with pytest.raises(error, match="dot_general") as info:
        fx.make_trace(lambda x, y: la.dot_general(x, y, dimension_numbers=dims))(
            np.zeros(x_shape), np.zeros(y_shape))
    for w in words:
        assert w in str(info.value)


def test_dot_general_needs_one_dtype():
    with pytest.raises(fx.DTypeError, match="dot_general"):
        fx.make_trace(lambda x, y: la.dot_general(x, y))(np.zeros((2, 3)),
                                                         np.zeros((3, 2), np.float32))


@pytest.mark.parametrize("fn, message", [
    (lambda x: sh.transpose(x, (0, 0)), "not a permutation"),
    (lambda x: sh.squeeze(x, (0,)), "size 1"),
    (lambda x: sh.slice(x, (0, 0), (3, 4)), "limit"),
    (lambda x: sh.pad(x, 0.0, [(-3, -1, 0), (0, 0, 0)]), "negative shape"),
    (lambda x: sh.concatenate([x, sh.reshape(x, (6,))], 0), "one rank"),
    (lambda x: sh.dynamic_slice(x, [0], [1, 1]), "start index"),
    (lambda x: ix.gather(x, np.array([0.5]), axis=0), "integer indices"),
    (lambda x: ix.scatter_add(x, np.array([0]), np.zeros((2, 3)), axis=0), "updates of shape"),
])
def test_structural_shape_errors_say_what_is_wrong(fn, message):
    with pytest.raises(fx.FunctxError, match=message):
        fx.make_trace(fn)(np.zeros((2, 3)))
