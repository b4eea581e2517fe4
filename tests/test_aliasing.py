"""Aliasing and mutation: results never share memory with a writeable argument, and what a
closure keeps for later (vjp's residuals, linearize's constants, jit's captured constants)
is a snapshot. Writing into the caller's NumPy arrays after a call changes nothing functx
returned or will return; functx never changes the caller's arrays (nor their flags). Only
writeable arrays are copied: functx's own results are read-only and stay shared.
"""
from __future__ import annotations

import tracemalloc
from typing import Any, Callable

import numpy as np
import pytest

import functx as fx
import functx.numpy as fnp


def _user_array(shape: tuple = (2, 3)) -> np.ndarray:
    return np.arange(float(np.prod(shape))).reshape(shape) + 1.0


# name -> a function of one writeable (2, 3) float array
EAGER_RESULTS: dict[str, Callable] = {
    "reshape": lambda x: fnp.reshape(x, (3, 2)),
    "asarray": fnp.asarray,
    "transpose": fnp.transpose,
    "ravel": fnp.ravel,
    "broadcast_to": lambda x: fnp.broadcast_to(x, (4, 2, 3)),
    "squeeze": lambda x: fnp.squeeze(x[None]),  # (x[None]: a writeable NumPy view of x)
    "expand_dims": lambda x: fnp.expand_dims(x, 0),
    "swapaxes": lambda x: fnp.swapaxes(x, 0, 1),
    "moveaxis": lambda x: fnp.moveaxis(x, 0, 1),
    "real": fnp.real,
    "split": lambda x: fnp.split(x, 2)[0],
    "stop_gradient": fx.stop_gradient,
    "jit(identity)": fx.jit(lambda x: x),
    "jit(reshape)": fx.jit(lambda x: x.reshape(3, 2)),
    "jit(transpose)": fx.jit(lambda x: x.T),
    "vmap(identity)": fx.vmap(lambda x: x),
    "vmap(reshape)": fx.vmap(lambda x: x.reshape(3, 1)),
    "checkpoint(identity)": fx.checkpoint(lambda x: x),
    "eval_trace(identity)": lambda x: fx.eval_trace(fx.make_trace(lambda y: y)(x), x)[0],
}


@pytest.mark.parametrize("name", list(EAGER_RESULTS))
def test_results_do_not_change_when_the_input_is_written(name: str) -> None:
    x = _user_array()
    y = EAGER_RESULTS[name](x)
    expected = np.array(y, copy=True)
    assert not np.shares_memory(y, x)
    assert not y.flags.writeable
    x[...] = -7.0
    np.testing.assert_array_equal(y, expected)
    assert x.flags.writeable  # the caller's array is left as it was


def test_views_of_functx_results_stay_views() -> None:
    """The rule costs nothing for functx's own (read-only) arrays: shape operations on them
    still return views, no copies."""
    y = fnp.sin(_user_array())
    for op in (lambda a: fnp.reshape(a, (3, 2)), fnp.transpose, fnp.ravel,
               lambda a: fnp.broadcast_to(a, (4, 2, 3)), fx.stop_gradient):
        assert np.shares_memory(op(y), y)
    ro = _user_array()
    ro.flags.writeable = False  # a read-only array of the caller's: nothing can write to it
    assert np.shares_memory(fnp.reshape(ro, (3, 2)), ro)


# -- closures that keep values for later ----------------------------------------------------


def test_vjp_keeps_a_snapshot_of_its_primals() -> None:
    x = np.array([0.5, 1.0, 2.0])
    out, f_vjp = fx.vjp(lambda x: fnp.sin(x) * x, x)
    out_before = np.array(out, copy=True)
    x[...] = 10.0
    np.testing.assert_allclose(f_vjp(np.ones(3))[0],
                               np.cos([0.5, 1.0, 2.0]) * [0.5, 1.0, 2.0] + np.sin([0.5, 1.0, 2.0]))
    np.testing.assert_array_equal(out, out_before)
    assert x.flags.writeable


def test_vjp_keeps_a_snapshot_of_closed_over_arrays() -> None:
    w = np.array([1.0, 2.0, 3.0])
    c = np.array(4.0)  # a 0-d array: a literal of the trace
    _, f_vjp = fx.vjp(lambda x: x * w * c, np.ones(3))
    w[...] = -1.0
    c[...] = -1.0
    np.testing.assert_array_equal(f_vjp(np.ones(3))[0], [4.0, 8.0, 12.0])


def test_vjp_copies_only_writeable_residuals() -> None:
    """A functx (read-only) array the backward pass needs is kept as it is: the snapshot of
    vjp costs memory only for the caller's writeable arrays."""
    n = 1 << 18  # 2 MiB of float64
    w_ro = fnp.asarray(np.linspace(0.0, 1.0, n))
    w_rw = np.linspace(0.0, 1.0, n)
    x = fnp.ones(n)

    def kept(w: Any) -> int:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            _, f_vjp = fx.vjp(lambda x: fnp.sum(x * w), x)
            return tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()

    assert kept(w_ro) < n * 8 // 4  # w itself is kept, not copied
    assert kept(w_rw) >= n * 8  # a snapshot of the writeable one


def test_vjp_cotangent_passed_through_is_not_shared() -> None:
    _, f_vjp = fx.vjp(lambda x: x, np.ones(3))
    ct = np.array([1.0, 2.0, 3.0])
    (g,) = f_vjp(ct)
    ct[...] = 0.0
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0])


def test_transform_outputs_passing_arrays_through_are_copies() -> None:
    w = np.array([1.0, 2.0])
    results = {
        "vjp out": fx.vjp(lambda x: (x, w), np.ones(2))[0],
        "grad aux": fx.grad(lambda x: (fnp.sum(x), w), has_aux=True)(np.ones(2))[1],
        "jvp out": fx.jvp(lambda x: w, (np.ones(2),), (np.ones(2),))[0],
        "jvp tangent": fx.jvp(lambda x: x, (np.ones(2),), (w,))[1],
        "linearize out": fx.linearize(lambda x: w, np.ones(2))[0],
        "vmap constant": fx.vmap(lambda x: w, out_axes=None)(np.ones(3)),
        "jit constant": fx.jit(lambda x: w)(np.ones(2)),
    }
    for name, r in results.items():
        leaves = fx.tree.leaves(r)
        assert all(not np.shares_memory(leaf, w) for leaf in leaves), name
    assert w.flags.writeable  # never flagged read-only behind the caller's back


def test_linearize_keeps_a_snapshot() -> None:
    x = np.array([0.5, 1.0])
    w = np.array([2.0, 3.0])
    _, f_lin = fx.linearize(lambda x: x * x * w, x)
    x[...] = 100.0
    w[...] = 100.0
    np.testing.assert_array_equal(f_lin(np.ones(2)), 2 * np.array([0.5, 1.0]) * [2.0, 3.0])


def test_jit_captures_closed_over_arrays_as_constants() -> None:
    """jit's docstring: arrays a jitted function closes over are captured as constants when
    it is traced; writing into one later changes nothing (nor does it become read-only)."""
    w = np.array([1.0, 2.0, 3.0])
    c = np.array(2.0)  # 0-d: a literal
    f = fx.jit(lambda x: x * w + c)
    np.testing.assert_array_equal(f(np.ones(3)), [3.0, 4.0, 5.0])
    w[...] = 0.0
    c[...] = 0.0
    np.testing.assert_array_equal(f(np.ones(3)), [3.0, 4.0, 5.0])
    assert w.flags.writeable and c.flags.writeable
    assert f.cache_size() == 1


def test_custom_vjp_residuals_of_the_callers_arrays() -> None:
    """A custom fwd returning a closed-over array: the caller's array is not flagged
    read-only, and the backward pass sees its value at the time of the call."""
    w = np.array([1.0, 2.0, 3.0])

    @fx.custom_vjp
    def f(x):
        return x * w

    f.defvjp(lambda x: (x * w, w), lambda res, g: (g * res,))
    _, f_vjp = fx.vjp(f, np.ones(3))
    assert w.flags.writeable
    w[...] = 0.0
    np.testing.assert_array_equal(f_vjp(np.ones(3))[0], [1.0, 2.0, 3.0])
