"""Max pooling's primitives (functx/primitives/pooling.py) beyond the spec table.

The spec table (tests/specs/pooling.py) checks every rule on distinct values; here: ties and
NaN (the first maximum gets the gradient, NaN propagates), windows of ``-inf`` padding,
dtypes, the Numba kernels (serial and parallel) against the NumPy path bit for bit, the
``FUNCTX_NUMBA=0`` path, ``functx.nn.max_pool1d/2d/3d`` against PyTorch on inputs with ties,
transforms through ``functx.nn``, and the shape rules' errors.
"""
from __future__ import annotations

from types import SimpleNamespace as P
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, note, settings
from hypothesis import strategies as st

import functx as fx
import functx.nn as fnn
import functx.numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.primitives import _numba, _pool_numba
from functx.primitives import pooling as pl
from tests.specs.pooling import max_pool_grad_ref, max_pool_ref

numba_only = pytest.mark.skipif(not _numba.numba_installed(), reason="needs Numba")
PATHS = ["numba", "numpy"]


@pytest.fixture(params=PATHS)
def path(request: Any, monkeypatch: Any) -> str:
    """Runs a test on the Numba kernels and on the NumPy path (``_pool_numba.ENABLED``)."""
    if request.param == "numba" and not _numba.numba_installed():
        pytest.skip("needs Numba")
    monkeypatch.setattr(_pool_numba, "ENABLED", request.param == "numba")
    return request.param


def _params(window, strides=None, dilation=None) -> P:
    nd = len(window)
    return P(window=tuple(window), strides=tuple(strides or window),
             dilation=tuple(dilation or (1,) * nd))


def _both(x: np.ndarray, g: np.ndarray | None, p: P) -> tuple:
    out = pl.max_pool(x, p.window, p.strides, p.dilation)
    if g is None:
        g = np.random.default_rng(1).standard_normal(out.shape).astype(x.dtype)
    return out, pl.max_pool_grad(x, g, p.window, p.strides, p.dilation), g


CASES = [  # (shape, window, strides, dilation)
    ((2, 3, 9), (3,), (2,), (1,)),
    ((2, 2, 7, 6), (2, 2), (2, 2), (1, 1)),
    ((1, 3, 7, 8), (3, 2), (1, 1), (1, 2)),  # overlapping windows, dilation
    ((2, 1, 6, 7), (2, 3), (3, 2), (2, 1)),
    ((2, 2, 7, 8), (2, 2), (1, 2), (2, 1)),  # 2x2 (its own kernel), overlapping, dilated
    ((1, 3, 9, 9), (2, 2), (3, 3), (1, 1)),  # 2x2 with gaps between the windows
    ((1, 2, 5, 5, 6), (2, 2, 3), (1, 2, 2), (1, 2, 1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=[str(c[1:]) for c in CASES])
def test_ties_and_nan_follow_the_first_maximum(case: tuple, dtype: Any, path: str) -> None:
    """Values from a small set (many ties), some NaN: against the loops of the reference."""
    shape, window, strides, dilation = case
    p = _params(window, strides, dilation)
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, shape).astype(dtype)
    x[rng.random(shape) < 0.08] = np.nan
    x[rng.random(shape) < 0.1] = -np.inf
    out, dx, g = _both(x, None, p)
    assert out.dtype == dtype and dx.dtype == dtype
    np.testing.assert_array_equal(out, max_pool_ref(x, p))
    # (overlapping windows add in another order than the reference's)
    np.testing.assert_allclose(dx, max_pool_grad_ref(x, g, p), rtol=1e-6, atol=1e-6)


def test_windows_of_minus_infinity(path: str) -> None:
    """A window of -inf padding alone: -inf out, the gradient to its first element."""
    x = np.full((1, 1, 2, 5), -np.inf)
    x[0, 0, 1, 4] = 3.0
    p = _params((2, 2), (1, 2))
    out, dx, g = _both(x, np.ones((1, 1, 1, 2)), p)
    np.testing.assert_array_equal(out, [[[[-np.inf, -np.inf]]]])
    want = np.zeros_like(x)
    want[0, 0, 0, 0] = want[0, 0, 0, 2] = 1.0
    np.testing.assert_array_equal(dx, want)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_ties_match_torch(nd: int, path: str) -> None:
    """All-equal windows and plateaus: PyTorch's gradient goes to the first maximum too."""
    shape = (2, 3) + (6,) * nd
    x = np.random.default_rng(nd).integers(0, 2, shape).astype(np.float64)
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1),
               dict(kernel_size=2, stride=1, dilation=2, ceil_mode=True)):
        fn = getattr(fnn, f"max_pool{nd}d")
        t = torch.tensor(x, requires_grad=True)
        want = getattr(F, f"max_pool{nd}d")(t, **kw)
        ct = np.random.default_rng(0).standard_normal(tuple(want.shape))
        want.backward(torch.tensor(ct))
        got, f_vjp = fx.vjp(lambda x: fn(x, **kw), x)
        np.testing.assert_array_equal(np.asarray(got), want.detach().numpy())
        np.testing.assert_allclose(f_vjp(ct)[0], t.grad.numpy(), rtol=1e-12, atol=1e-12)


@st.composite
def _torch_case(draw) -> tuple:
    nd = draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    sizes = tuple((k - 1) * d + 1 + draw(st.integers(0, 4)) for k, d in zip(kernel, dilation))
    batch = () if draw(st.integers(0, 3)) == 0 else (draw(st.integers(1, 2)),)
    shape = batch + (draw(st.integers(1, 3)),) + sizes
    kw = dict(kernel_size=kernel, stride=stride, padding=padding, dilation=dilation,
              ceil_mode=draw(st.booleans()))
    return nd, shape, kw, draw(st.integers(0, 2**32 - 1)), draw(st.sampled_from(
        [np.float32, np.float64]))


@settings(max_examples=30, deadline=None)
@given(case=_torch_case())
def test_nn_max_pool_matches_torch(case: tuple) -> None:
    """functx.nn.max_pool1d/2d/3d (the primitives) against PyTorch: values and gradients,
    on inputs with ties."""
    nd, shape, kw, seed, dtype = case
    note(f"max_pool{nd}d {shape} {kw} {np.dtype(dtype).name}")
    # PyTorch writes out of bounds for windows of padding alone (see test_nn_conv.py)
    for n, k, s, p, d in zip(shape[-nd:], kw["kernel_size"], kw["stride"], kw["padding"],
                             kw["dilation"]):
        out = fnn.conv.pool_out_size(n, k, s, p, d, kw["ceil_mode"])
        pos = np.arange(out)[:, None] * s - p + np.arange(k)[None, :] * d
        if not np.all(np.any((pos >= 0) & (pos < n), axis=1)):
            return
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, shape).astype(dtype)
    t = torch.tensor(x, requires_grad=True)
    want = getattr(F, f"max_pool{nd}d")(t, **kw)
    ct = rng.standard_normal(tuple(want.shape)).astype(dtype)
    want.backward(torch.tensor(ct))
    got, f_vjp = fx.vjp(lambda x: getattr(fnn, f"max_pool{nd}d")(x, **kw), x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(np.asarray(got), want.detach().numpy())
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(f_vjp(ct)[0], t.grad.numpy(), rtol=tol, atol=tol)


@numba_only
@pytest.mark.parametrize("parallel", [False, True])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_numba_kernels_match_the_numpy_path(parallel: bool, data: Any) -> None:
    """Both kernels (serial and over the threads) give the NumPy path's bits (the
    cotangents are halves: sums of them are exact in any order)."""
    nd = data.draw(st.integers(1, 3))
    window = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
    strides = tuple(data.draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(data.draw(st.integers(1, 2)) for _ in range(nd))
    sizes = tuple((k - 1) * d + 1 + data.draw(st.integers(0, 4))
                  for k, d in zip(window, dilation))
    shape = (data.draw(st.integers(0, 3)), data.draw(st.integers(1, 3))) + sizes
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.integers(-2, 3, shape).astype(dtype)
    x[rng.random(shape) < 0.05] = np.nan
    x[rng.random(shape) < 0.05] = -np.inf
    params = dict(window=window, strides=strides, dilation=dilation)
    out = pl._max_pool_impl(np, x, **params)
    g = (rng.integers(-8, 9, out.shape) / 2).astype(dtype)
    dx = pl._max_pool_grad_impl(np, x, g, **params)
    before = _pool_numba.PARALLEL_WORK, _pool_numba.ENABLED
    _pool_numba.PARALLEL_WORK = 0 if parallel else 1 << 60
    _pool_numba.ENABLED = True
    try:
        out_nb = pl._max_pool_cpu(np, x, **params)
        dx_nb = pl._max_pool_grad_cpu(np, x, g, **params)
    finally:
        _pool_numba.PARALLEL_WORK, _pool_numba.ENABLED = before
    np.testing.assert_array_equal(out_nb, out)
    np.testing.assert_array_equal(dx_nb, dx)
    assert out_nb.dtype == dtype and dx_nb.dtype == dtype


def test_functx_numba_0_takes_the_numpy_path(monkeypatch: Any) -> None:
    """With ``FUNCTX_NUMBA=0`` the kernels are not called; the NumPy path's results."""
    monkeypatch.setenv("FUNCTX_NUMBA", "0")
    calls = []
    monkeypatch.setattr(_pool_numba, "max_pool_numba", lambda *a: calls.append(1))
    monkeypatch.setattr(_pool_numba, "max_pool_grad_numba", lambda *a: calls.append(1))
    x = np.array([[[1.0, 3.0, 2.0, 0.0]]], np.float32)
    np.testing.assert_array_equal(pl.max_pool(x, (2,)), [[[3.0, 2.0]]])
    np.testing.assert_array_equal(pl.max_pool_grad(x, np.ones((1, 1, 2), np.float32), (2,)),
                                  [[[0.0, 1.0, 1.0, 0.0]]])
    assert calls == []


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_half_precision_takes_the_array_path(dtype: Any) -> None:
    """float16 and bfloat16: the array code (the gradient summed in float32, rounded once)."""
    dt = np.dtype(dtype)
    x = np.array([[[1.0, 3.0, 3.0, 0.0, -1.0]]]).astype(dt)
    p = _params((2,), (1,))
    out, dx, _ = _both(x, np.ones((1, 1, 4), dt), p)
    assert out.dtype == dt and dx.dtype == dt
    np.testing.assert_array_equal(out.astype(np.float64), [[[3.0, 3.0, 3.0, 0.0]]])
    np.testing.assert_array_equal(dx.astype(np.float64), [[[0.0, 2.0, 1.0, 1.0, 0.0]]])


def test_transforms_through_nn() -> None:
    """vmap (batch on an inner axis), jit, the second derivative (zero: piecewise linear) and
    forward mode of functx.nn.max_pool2d agree with direct evaluation."""
    rng = np.random.default_rng(0)
    x = rng.permutation(np.linspace(-1, 1, 3 * 2 * 2 * 6 * 5)).reshape(2, 3, 2, 6, 5)
    f = lambda x: fnn.max_pool2d(x, 3, 2, 1)
    got = fx.vmap(f, in_axes=1)(x)
    np.testing.assert_array_equal(got, np.stack([f(x[:, i]) for i in range(3)]))
    np.testing.assert_array_equal(fx.jit(f)(x[0]), f(x[0]))
    loss = lambda x: fnp.sum(f(x) ** 2)
    np.testing.assert_allclose(fx.jit(fx.grad(loss))(x[0]), fx.grad(loss)(x[0]), rtol=1e-12)
    t = rng.standard_normal(x[0].shape)
    _, jt = fx.jvp(f, (x[0],), (t,))
    _, f_vjp = fx.vjp(f, x[0])
    u = rng.standard_normal(jt.shape)
    assert np.isclose(np.sum(jt * u), np.sum(f_vjp(u)[0] * t), rtol=1e-12)
    hvp = fx.jvp(fx.grad(lambda x: fnp.sum(f(x))), (x[0],), (t,))[1]
    np.testing.assert_array_equal(hvp, np.zeros_like(x[0]))


ERRORS = [
    (lambda: pl.max_pool(np.ones((2, 3)), (2,)), ShapeError, r"1 to 3 spatial axes"),
    (lambda: pl.max_pool(np.ones((1, 1, 4), np.int64), (2,)), DTypeError,
     r"real floating-point"),
    (lambda: pl.max_pool(np.ones((1, 1, 4)), (2, 2)), ShapeError, r"window must be a tuple "
     r"of 1 positive ints"),
    (lambda: pl.max_pool(np.ones((1, 1, 4)), (0,)), ShapeError, r"positive ints"),
    (lambda: pl.max_pool(np.ones((1, 1, 4)), (3,), dilation=(2,)), ShapeError,
     r"do not fit"),
    (lambda: pl.max_pool_grad(np.ones((1, 1, 4)), np.ones((1, 1, 3)), (2,)), ShapeError,
     r"cotangent .* must have the pooling's output shape \(1, 1, 2\)"),
]


@pytest.mark.parametrize("fn, exc, match", ERRORS)
def test_errors_name_the_problem(fn: Any, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        fn()
