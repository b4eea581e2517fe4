"""Eager grad's dispatch fast paths (issue 17 item 3) give what the general paths give.

functx.numpy's elementwise wrappers bind primitives directly for the common operands,
``bind`` runs NumPy operands inline, reverse mode's ``process`` runs the CPU implementation
of one or two NumPy values inline (only while ``CHECK_EAGER`` is off, so these tests turn it
off), and the CPU binary ufunc rule passes Python floats beside float64 arrays as 0-d arrays.
The expected values come from NumPy and from derivatives written out by hand.
"""
from __future__ import annotations

import numpy as np
import pytest

import functx
import functx.numpy as fnp
import functx.tracing
from functx.errors import ShapeError
from functx.primitives import elementwise as _ew

THIS_FILE = __file__.rsplit("/", 1)[-1]


@pytest.fixture
def unchecked(monkeypatch):
    """Eager results not checked against abstract evaluation (the users' setting, in which
    reverse mode's inline CPU path runs)."""
    monkeypatch.setattr(functx.tracing, "CHECK_EAGER", False)


def _chain(x, n=12):
    for i in range(n):
        x = (fnp.sin, lambda v: v * 0.9, lambda v: v + 0.3, fnp.tanh)[i % 4](x)
    return x


def _chain_grad_by_hand(x, n=12):
    """d/dx sum(_chain(x)) with the chain rule written out in NumPy."""
    d = np.ones_like(x)
    for i in range(n):
        k = i % 4
        if k == 0:
            d, x = d * np.cos(x), np.sin(x)
        elif k == 1:
            d, x = d * 0.9, x * 0.9
        elif k == 2:
            x = x + 0.3
        else:
            x = np.tanh(x)
            d = d * (1 - x * x)
    return d


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_grad_of_a_chain_matches_the_chain_rule(unchecked, dtype) -> None:
    x = np.linspace(-1.0, 1.0, 7).astype(dtype)
    g = functx.grad(lambda v: fnp.sum(_chain(v)))(x)
    assert g.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(g, _chain_grad_by_hand(x.astype(np.float64)), rtol=tol, atol=tol)
    assert not g.flags.writeable
    assert x.flags.writeable  # (the caller's array is left as it was)


def test_grad_through_primitives_with_constants_on_either_side(unchecked) -> None:
    c = np.array([0.5, -2.0, 3.0])
    y = np.array([1.5, 0.25, -1.0])

    def f(x, w):
        a = _ew.mul(x, c)  # tracer, constant
        b = _ew.sub(c, a)  # constant, tracer
        d = _ew.mul(b, w)  # tracer, tracer
        e = _ew.add(_ew.mul(d, c), c)  # the constant again (lift's memo)
        return fnp.sum(_ew.sin(e))

    x = np.array([0.1, 0.2, 0.3])
    gx, gw = functx.grad(f, argnums=(0, 1))(x, y)
    e = (c - x * c) * y * c + c
    np.testing.assert_allclose(gx, np.cos(e) * c * y * (-c), rtol=1e-13)
    np.testing.assert_allclose(gw, np.cos(e) * c * (c - x * c), rtol=1e-13)


def test_shape_error_on_the_inline_path_is_explained(unchecked) -> None:
    def f(x, y):
        return fnp.sum(_ew.add(x, y))  # two tracers: the inline path; the failing line

    with pytest.raises(ShapeError) as e:
        functx.grad(f, argnums=(0, 1))(np.ones((2, 3)), np.ones(4))
    msg = str(e.value)
    assert "add" in msg and "(2, 3)" in msg and "(4,)" in msg
    assert f"{THIS_FILE}:{f.__code__.co_firstlineno + 1}" in msg


_OPERANDS = [np.array([1.5, -2.0, 0.0]), np.array([1.5, -2.0, 0.0], np.float32),
             np.array([1 + 2j, -3j, 0]), np.array([3, -4, 0], np.int32),
             np.array([True, False, True])]
_SCALARS = [2, 0.5, -0.0, 0, 1e300, float("nan")]


@pytest.mark.parametrize("name", ["add", "subtract", "multiply"])
def test_arithmetic_with_python_scalars_matches_numpy(name) -> None:
    for a in _OPERANDS:
        for s in _SCALARS:
            if name == "subtract" and a.dtype == np.bool_:
                continue  # (NumPy refuses it; functx too, tested elsewhere)
            for x1, x2 in ((a, s), (s, a)):
                with np.errstate(all="ignore"):
                    want = getattr(np, name)(x1, x2)
                    got = getattr(fnp, name)(x1, x2)
                assert got.dtype == want.dtype, (name, x1, x2)
                np.testing.assert_array_equal(got, want)
                assert (np.signbit(np.real(got)) == np.signbit(np.real(want))).all()


@pytest.mark.parametrize("name", ["add", "subtract", "multiply"])
def test_arithmetic_of_two_arrays_matches_numpy_eagerly_and_traced(name) -> None:
    for a in _OPERANDS:
        for b in _OPERANDS:
            if name == "subtract" and a.dtype == b.dtype == np.bool_:
                continue
            want = getattr(np, name)(a, b)
            got = getattr(fnp, name)(a, b)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
            trace = functx.make_trace(getattr(fnp, name))(a, b)
            assert trace.outputs[0].aval.dtype == want.dtype


@pytest.mark.parametrize("name", ["sin", "exp", "tanh", "sqrt", "log1p", "arctan"])
def test_unary_functions_match_numpy_for_every_dtype(name) -> None:
    for a in _OPERANDS[:4] + [np.array([1, 0, 1], np.uint8), np.array([True, False])]:
        with np.errstate(all="ignore"):
            want = getattr(np, name)(a)
            got = getattr(fnp, name)(a)
        assert got.dtype == want.dtype, (name, a.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-6 if want.dtype.itemsize <= 8 else 1e-14)


def test_python_floats_beside_float64_arrays_keep_value_and_sign() -> None:
    a = np.array([-0.0, 0.0, 1.0, np.inf, np.nan, 5e-324])
    for s in (0.0, -0.0, 1.0, -2.5, 0.1, np.inf, -np.inf, np.nan, 5e-324, 1e308):
        for x1, x2 in ((a, s), (s, a)):
            for prim, ref in ((_ew.add, np.add), (_ew.sub, np.subtract), (_ew.mul, np.multiply)):
                with np.errstate(all="ignore"):
                    got, want = prim(x1, x2), ref(x1, x2)
                assert got.dtype == np.float64
                np.testing.assert_array_equal(got, want)
                assert (np.signbit(got) == np.signbit(want)).all(), (prim, x1, x2)
                assert not got.flags.writeable


def test_eager_results_are_read_only_and_inputs_untouched() -> None:
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    for out in (_ew.mul(a, b), _ew.sin(a), _ew.sub(1.0, a), fnp.multiply(a, 2.0)):
        assert not out.flags.writeable
    assert a.flags.writeable and b.flags.writeable
