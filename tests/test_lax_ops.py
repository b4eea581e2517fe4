"""functx.lax's array operations against jax.lax (where JAX is installed) and closed forms:
dynamic slicing with static, traced, negative and batched start indices (values, grads,
vmap, jit), select, conv_general_dilated with dimension numbers, reduce_window, pad and the
aliases."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp
from functx import lax

RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def jlax():
    """(jax, jax.lax) with 64-bit floats on, for the duration of each use."""
    jax = pytest.importorskip("jax")
    return jax, pytest.importorskip("jax.lax")


@contextlib.contextmanager
def x64(jax):
    ctx = jax.enable_x64(True) if hasattr(jax, "enable_x64") else \
        pytest.importorskip("jax.experimental").enable_x64()
    with ctx:
        yield


# -- dynamic slicing: values -----------------------------------------------------------------

STARTS = [(0, 0), (1, 2), (3, 4), (-1, 0), (-2, -3), (7, -9), (-7, 1)]


@pytest.mark.parametrize("starts", STARTS)
def test_dynamic_slice_matches_jax(jlax, starts):
    jax, jl = jlax
    x = RNG.normal(size=(4, 5))
    with x64(jax):
        expected = np.asarray(jl.dynamic_slice(x, starts, (2, 3)))
        expected_u = np.asarray(jl.dynamic_update_slice(x, np.ones((2, 3)), starts))
    np.testing.assert_array_equal(lax.dynamic_slice(x, starts, (2, 3)), expected)
    np.testing.assert_array_equal(lax.dynamic_update_slice(x, np.ones((2, 3)), starts),
                                  expected_u)
    # the same with traced (jit) and array start indices
    idx = np.array(starts, dtype=np.int32)
    f = fx.jit(lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 3)))
    np.testing.assert_array_equal(f(x, idx[0], idx[1]), expected)
    np.testing.assert_array_equal(lax.dynamic_slice(x, idx, (2, 3)), expected)
    g = fx.jit(lambda x, i: lax.dynamic_update_slice(x, np.ones((2, 3)), i))
    np.testing.assert_array_equal(g(x, idx), expected_u)


def test_allow_negative_indices_false_clamps_at_zero():
    x = np.arange(5.0)
    np.testing.assert_array_equal(lax.dynamic_slice(x, [-2], [2], allow_negative_indices=False),
                                  [0.0, 1.0])
    np.testing.assert_array_equal(lax.dynamic_slice(x, [-2], [2]), [3.0, 4.0])
    i = np.int32(-2)
    np.testing.assert_array_equal(
        fx.jit(lambda x, i: lax.dynamic_slice(x, [i], [2], allow_negative_indices=False))(x, i),
        [0.0, 1.0])


@pytest.mark.parametrize("index", [0, 2, -1, 5, np.int32(1)])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_in_dim_variants_match_jax(jlax, index, axis):
    jax, jl = jlax
    x = RNG.normal(size=(3, 4))
    with x64(jax):
        cases = [
            (lax.dynamic_index_in_dim(x, index, axis),
             jl.dynamic_index_in_dim(x, index, axis)),
            (lax.dynamic_index_in_dim(x, index, axis, keepdims=False),
             jl.dynamic_index_in_dim(x, index, axis, keepdims=False)),
            (lax.dynamic_slice_in_dim(x, index, 2, axis),
             jl.dynamic_slice_in_dim(x, index, 2, axis)),
        ]
        upd = np.full([1 if a == axis % 2 else n for a, n in enumerate(x.shape)], 7.0)
        cases.append((lax.dynamic_update_slice_in_dim(x, upd, index, axis),
                      jl.dynamic_update_slice_in_dim(x, upd, index, axis)))
        cases.append((lax.dynamic_update_index_in_dim(x, upd, index, axis),
                      jl.dynamic_update_index_in_dim(x, upd, index, axis)))
        squeezed = upd.reshape([n for a, n in enumerate(upd.shape) if a != axis % 2])
        cases.append((lax.dynamic_update_index_in_dim(x, squeezed, index, axis),
                      jl.dynamic_update_index_in_dim(x, squeezed, index, axis)))
        for got, want in cases:
            np.testing.assert_array_equal(got, np.asarray(want))


# -- dynamic slicing: gradients, vmap with batched indices, jit ------------------------------

def test_dynamic_slice_gradients_match_jax(jlax):
    jax, jl = jlax
    x = RNG.normal(size=(4, 5))
    u = RNG.normal(size=(2, 3))

    def f(lib, x, u, i):
        y = lib.dynamic_update_slice(x * x, u * 3.0, (i, 1))
        return (lib.dynamic_slice(y, (i - 1, i), (3, 3)) ** 2).sum()

    with x64(jax):
        for i in (0, 1, 3, -1):
            want = jax.grad(lambda x, u: f(jl, x, u, i), argnums=(0, 1))(x, u)
            got = fx.grad(lambda x, u: f(lax, x, u, i), argnums=(0, 1))(x, u)
            got_jit = fx.jit(fx.grad(lambda x, u, i: f(lax, x, u, i), argnums=(0, 1)))(
                x, u, np.int32(i))
            for g, gj, w in zip(got, got_jit, want):
                np.testing.assert_allclose(g, np.asarray(w), rtol=1e-12)
                np.testing.assert_allclose(gj, np.asarray(w), rtol=1e-12)


def test_vmap_with_batched_indices_matches_jax(jlax):
    jax, jl = jlax
    x = RNG.normal(size=(6, 4, 5))
    u = RNG.normal(size=(6, 2, 2))
    i = np.array([0, 1, 2, 3, -1, 9], dtype=np.int32)
    j = np.array([4, 0, -2, 1, 3, 2], dtype=np.int32)

    def f(lib, x, u, i, j):
        y = lib.dynamic_update_slice(x, u, (i, j))
        return lib.dynamic_slice(y, (j, i), (3, 2)) * 2.0

    with x64(jax):
        want = np.asarray(jax.vmap(lambda *a: f(jl, *a))(x, u, i, j))
        want_shared = np.asarray(jax.vmap(lambda x, i: f(jl, x, u[0], i, np.int32(1)),
                                          in_axes=(None, 0))(x[0], i))
        want_grad = np.asarray(jax.grad(lambda x: jax.vmap(lambda *a: f(jl, *a))(
            x, u, i, j).sum())(x))
    got = fx.vmap(lambda *a: f(lax, *a))(x, u, i, j)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(fx.jit(fx.vmap(lambda *a: f(lax, *a)))(x, u, i, j), want,
                               rtol=1e-12)
    got_shared = fx.vmap(lambda x, i: f(lax, x, u[0], i, np.int32(1)), in_axes=(None, 0))(x[0], i)
    np.testing.assert_allclose(got_shared, want_shared, rtol=1e-12)
    got_grad = fx.grad(lambda x: fnp.sum(fx.vmap(lambda *a: f(lax, *a))(x, u, i, j)))(x)
    np.testing.assert_allclose(got_grad, want_grad, rtol=1e-12)


def test_dynamic_slice_traced_index_trace_is_one_equation_of_the_index():
    trace = fx.make_trace(lambda x, i: lax.dynamic_slice_in_dim(x, i, 2))(
        np.arange(5.0), np.int32(1))
    names = [e.prim.name for e in trace.eqns]
    assert "dynamic_slice" in names and "gather" not in names


def test_dynamic_slice_errors():
    x = np.zeros((3, 4))
    with pytest.raises(fx.ShapeError, match="2 axes"):
        lax.dynamic_slice(x, [0], [1, 1])
    with pytest.raises(fx.ArgumentTypeError, match="scalar integers"):
        lax.dynamic_slice(x, [0.5, 0], [1, 1])
    with pytest.raises(fx.ShapeError):
        lax.dynamic_slice(x, [0, 0], [4, 1])
    with pytest.raises(fx.ShapeError, match="out of range"):
        lax.dynamic_index_in_dim(x, 0, axis=2)


# -- select, stop_gradient, aliases ----------------------------------------------------------

def test_select_and_stop_gradient():
    p = np.array([True, False, True])
    a, b = np.arange(3.0), -np.arange(3.0)
    np.testing.assert_array_equal(lax.select(p, a, b), [0.0, -1.0, 2.0])
    g = fx.grad(lambda a: fnp.sum(lax.select(p, a * a, b)))(a)
    np.testing.assert_array_equal(g, [0.0, 0.0, 4.0])
    assert fx.grad(lambda x: x * lax.stop_gradient(x))(3.0) == 3.0
    with pytest.raises(fx.DTypeError):
        lax.select(np.array([1, 0, 1]), a, b)


def test_aliases_match_jax(jlax):
    jax, jl = jlax
    x = RNG.uniform(0.5, 2.0, size=(2, 3))
    y = RNG.uniform(0.5, 2.0, size=(3, 4))
    with x64(jax):
        pairs = [
            (lax.add(x, x), jl.add(x, x)), (lax.mul(x, x), jl.mul(x, x)),
            (lax.exp(x), jl.exp(x)), (lax.rsqrt(x), jl.rsqrt(x)),
            (lax.integer_pow(x, 3), jl.integer_pow(x, 3)), (lax.square(x), jl.square(x)),
            (lax.clamp(0.8, x, 1.5), jl.clamp(0.8, x, 1.5)),
            (lax.dot_general(x, y, (((1,), (0,)), ((), ()))),
             jl.dot_general(x, y, (((1,), (0,)), ((), ())))),
            (lax.broadcast_in_dim(x[0], (4, 3), (1,)), jl.broadcast_in_dim(x[0], (4, 3), (1,))),
            (lax.broadcast(x, (2,)), jl.broadcast(x, (2,))),
            (lax.reshape(x, (3, 2)), jl.reshape(x, (3, 2))),
            (lax.reshape(x, (6,), (1, 0)), jl.reshape(x, (6,), (1, 0))),
            (lax.transpose(x, (1, 0)), jl.transpose(x, (1, 0))),
            (lax.convert_element_type(x * 3, np.int32), jl.convert_element_type(x * 3, np.int32)),
            (lax.iota(np.int32, 5), jl.iota(np.int32, 5)),
            (lax.full((2, 2), 3.0), jl.full((2, 2), 3.0)),
            (lax.full_like(x, 2, np.int32), jl.full_like(x, 2, np.int32)),
            (lax.full_like(x, 1.5, shape=(4,)), jl.full_like(x, 1.5, shape=(4,))),
            (lax.pad(x, -1.0, [(1, -1, 1), (0, 2, 0)]), jl.pad(x, -1.0, [(1, -1, 1), (0, 2, 0)])),
            (lax.rev(x, (0,)), jl.rev(x, (0,))),
            (lax.slice(x, (0, 1), (2, 3), (1, 2)), jl.slice(x, (0, 1), (2, 3), (1, 2))),
            (lax.slice_in_dim(x, 1, None, axis=1), jl.slice_in_dim(x, 1, None, axis=1)),
            (lax.index_in_dim(x, -1, 1, False), jl.index_in_dim(x, -1, 1, False)),
            (lax.reduce_sum(x, (1,)), jl.reduce_sum(x, (1,))),
            (lax.reduce_max(x, (0,)), jl.reduce_max(x, (0,))),
            (lax.argmax(x, 1, np.int32), jl.argmax(x, 1, np.int32)),
            (lax.cumsum(x, 1, reverse=True), jl.cumsum(x, 1, reverse=True)),
            (lax.round(np.array([-2.5, -0.5, 0.5, 1.5, 2.4])),
             jl.round(np.array([-2.5, -0.5, 0.5, 1.5, 2.4]))),
            (lax.round(np.array([-2.5, 0.5, 1.5]), 1), jl.round(np.array([-2.5, 0.5, 1.5]), 1)),
            (lax.concatenate([x, x], 0), jl.concatenate([x, x], 0)),
        ]
        for k, (got, want) in enumerate(pairs):
            want = np.asarray(want)
            assert np.shape(got) == want.shape and np.asarray(got).dtype == want.dtype, k
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=str(k))


# -- conv_general_dilated --------------------------------------------------------------------

@pytest.mark.parametrize("dn, lhs_shape, rhs_shape", [
    (None, (2, 3, 7, 6), (4, 3, 3, 2)),
    (("NHWC", "HWIO", "NHWC"), (2, 7, 6, 3), (3, 2, 3, 4)),
    (("NCHW", "OIHW", "NHWC"), (2, 3, 7, 6), (4, 3, 3, 2)),
    (("NWC", "WIO", "NCW"), (2, 9, 3), (3, 3, 4)),
])
@pytest.mark.parametrize("padding", ["SAME", "VALID", [(1, 0), (2, 1)]])
def test_conv_general_dilated_matches_jax(jlax, dn, lhs_shape, rhs_shape, padding):
    jax, jl = jlax
    nd = len(lhs_shape) - 2
    if not isinstance(padding, str):
        padding = padding[:nd]
    lhs, rhs = RNG.normal(size=lhs_shape), RNG.normal(size=rhs_shape)
    strides = (2, 1)[:nd]
    kw = dict(rhs_dilation=(1, 2)[:nd], dimension_numbers=dn)
    with x64(jax):
        want = np.asarray(jl.conv_general_dilated(lhs, rhs, strides, padding, **kw))
        ct = RNG.normal(size=want.shape)
        want_g = jax.grad(lambda a, b: (jl.conv_general_dilated(a, b, strides, padding, **kw)
                                        * ct).sum(), argnums=(0, 1))(lhs, rhs)
    got = lax.conv_general_dilated(lhs, rhs, strides, padding, **kw)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    got_g = fx.jit(fx.grad(lambda a, b: fnp.sum(lax.conv_general_dilated(
        a, b, strides, padding, **kw) * ct), argnums=(0, 1)))(lhs, rhs)
    for g, w in zip(got_g, want_g):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-12)


def test_conv_general_dilated_refuses_batch_groups():
    with pytest.raises(fx.FunctxError, match="batch_group_count"):
        lax.conv_general_dilated(np.ones((2, 2, 4)), np.ones((2, 1, 3)), (1,), "VALID",
                                 batch_group_count=2)


# -- reduce_window ---------------------------------------------------------------------------

@pytest.mark.parametrize("op, init", [("add", 0.0), ("max", -np.inf), ("min", np.inf),
                                      ("add", 1.5)])
@pytest.mark.parametrize("window, strides, padding, base, wdil", [
    ((2, 2), (2, 2), "VALID", None, None),
    ((3, 2), (1, 2), "SAME", None, None),
    ((2, 3), (2, 1), [(1, 0), (0, 2)], None, None),
    ((2, 2), (1, 1), "VALID", (2, 1), (1, 2)),
    ((1, 3), (1, 1), "SAME_LOWER", None, None),
])
def test_reduce_window_matches_jax(jlax, op, init, window, strides, padding, base, wdil):
    jax, jl = jlax
    x = RNG.normal(size=(5, 6))
    with x64(jax):
        f_j = lambda x: jl.reduce_window(x, init, getattr(jl, op), window, strides, padding,
                                         base, wdil)
        want = np.asarray(f_j(x))
        ct = RNG.normal(size=want.shape)
        # (JAX differentiates only the identity init; a constant init adds no gradient)
        f_g = f_j if init in (0.0, -np.inf, np.inf) else lambda x: jl.reduce_window(
            x, 0.0, jl.add, window, strides, padding, base, wdil)
        try:
            want_g = np.asarray(jax.grad(lambda x: (f_g(x) * ct).sum())(x))
        except NotImplementedError:  # JAX: no VJP of max pooling with window dilation
            want_g = None
    f = lambda x: lax.reduce_window(x, init, getattr(lax, op), window, strides, padding, base,
                                    wdil)
    np.testing.assert_allclose(f(x), want, rtol=1e-12)
    np.testing.assert_allclose(fx.jit(f)(x), want, rtol=1e-12)
    got_g = fx.grad(lambda x: fnp.sum(f(x) * ct))(x)
    if want_g is not None:
        np.testing.assert_allclose(got_g, want_g, rtol=1e-12)
    else:  # a directional finite difference (no ties: normal values)
        v, eps = RNG.normal(size=x.shape), 1e-6
        fd = (np.sum(f(x + eps * v) * ct) - np.sum(f(x - eps * v) * ct)) / (2 * eps)
        np.testing.assert_allclose(np.sum(got_g * v), fd, rtol=1e-6)
    xs = RNG.normal(size=(3, 5, 6))
    np.testing.assert_allclose(fx.vmap(f)(xs), np.stack([f(e) for e in xs]), rtol=1e-12)


def test_reduce_window_errors():
    with pytest.raises(fx.ShapeError, match="larger"):
        lax.reduce_window(np.ones(3), 0.0, lax.add, (4,), (1,), "VALID")
    with pytest.raises(fx.ShapeError, match="window_strides"):
        lax.reduce_window(np.ones(3), 0.0, lax.add, (2,), (1, 1), "VALID")
    with pytest.raises(fx.ArgumentTypeError, match="padding"):
        lax.reduce_window(np.ones(3), 0.0, lax.add, (2,), (1,), "FULL")
    with pytest.raises(fx.ArgumentTypeError, match="one operand"):
        lax.reduce_window((np.ones(3), np.ones(3)), 0.0, lax.add, (2,), (1,))


def test_namespace_is_curated():
    for name in lax.__all__:
        value = getattr(lax, name)
        # functions and error classes, and the loop primitives (scan_p, ..., as jax.lax)
        assert not name.startswith("_") and (callable(value) or isinstance(value, fx.Primitive)), name
    for name in ("dynamic_slice", "select", "conv_general_dilated", "reduce_window",
                 "pure_callback", "stop_gradient", "iota", "pad"):
        assert name in lax.__all__
