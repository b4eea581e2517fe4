"""The direct Numba convolution kernels against the generic rule, in float64.

``functx.primitives._conv_numba`` computes every convolution with one of three loops (flat
axpy, flat dot, rows; see its docstring) over a padded, dilated copy of the input. Each
layout is checked here against the generic implementation (``conv._conv_impl``: one plain
im2col or col2im per image) with the kernels forced on (``FORCE``): 1-d, 2-d and 3-d;
strides, input and kernel dilation, feature groups, padding (negative values crop); one
image or several. Also: float32, the dispatch between the kernels and the NumPy path, and
the fallback without Numba.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import functx as fx
from functx.errors import ShapeError
from functx.ir import AbstractArray
from functx.primitives import _conv_numba, conv

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def forced(monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct kernels on for every call (not only where they pay)."""
    monkeypatch.setattr(_conv_numba, "ENABLED", True)
    monkeypatch.setattr(_conv_numba, "FORCE", True)


def _params(nd: int, strides=None, padding=None, lhs_dil=None, rhs_dil=None,
            groups: int = 1) -> dict:
    return dict(window_strides=tuple(strides or (1,) * nd),
                padding=tuple(padding or ((0, 0),) * nd),
                lhs_dilation=tuple(lhs_dil or (1,) * nd), rhs_dilation=tuple(rhs_dil or (1,) * nd),
                feature_group_count=groups)


def _check(lhs_shape: tuple, rhs_shape: tuple, params: dict, dtype: Any = np.float64,
           seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lhs = rng.standard_normal(lhs_shape).astype(dtype)
    rhs = rng.standard_normal(rhs_shape).astype(dtype)
    want = conv._conv_impl(np, lhs.astype(np.float64), rhs.astype(np.float64), **params)
    got = _conv_numba.conv_numba(np, lhs, rhs, **params)
    assert got.shape == want.shape and got.dtype == np.dtype(dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)
    return got


# One case per loop and layout (name: lhs shape, rhs shape, params).
CASES = {
    # flat axpy: unit strides, more output than kernel positions
    "1d": ((2, 3, 11), (4, 3, 3), _params(1, padding=((1, 2),))),
    "2d same": ((3, 4, 9, 8), (5, 4, 3, 3), _params(2, padding=((1, 1), (1, 1)))),
    "2d groups": ((2, 6, 7, 7), (9, 2, 3, 2), _params(2, padding=((1, 0), (0, 1)), groups=3)),
    "2d depthwise": ((2, 5, 8, 8), (5, 1, 3, 3), _params(2, padding=((1, 1), (1, 1)), groups=5)),
    "2d rhs dilation": ((2, 3, 10, 9), (4, 3, 3, 2), _params(2, rhs_dil=(2, 3))),
    "2d lhs dilation": ((2, 3, 5, 6), (4, 3, 3, 3), _params(2, padding=((2, 2), (1, 2)),
                                                            lhs_dil=(2, 3))),
    "2d crop": ((2, 3, 9, 9), (2, 3, 2, 3), _params(2, padding=((-1, 2), (1, -2)))),
    "3d": ((2, 2, 5, 6, 5), (3, 2, 2, 3, 2), _params(3, padding=((1, 0), (0, 0), (1, 1)))),
    "one image": ((1, 3, 7, 7), (2, 3, 3, 3), _params(2, padding=((1, 1), (1, 1)))),
    "1x1 kernel": ((3, 5, 4, 4), (6, 5, 1, 1), _params(2)),
    # flat dot: more kernel than output positions (a weight gradient's shape)
    "1d dot": ((3, 4, 9), (6, 4, 8), _params(1, padding=((1, 0),))),
    "2d dot strided": ((2, 3, 9, 10), (4, 3, 6, 7), _params(2, strides=(2, 3),
                                                           padding=((1, 1), (0, 1)))),
    "2d dot groups": ((2, 4, 8, 8), (6, 2, 7, 6), _params(2, padding=((0, 1), (1, 0)), groups=2)),
    "3d dot": ((2, 2, 4, 5, 4), (3, 2, 3, 4, 3), _params(3)),
    "2d dot lhs dilation": ((2, 2, 4, 4), (3, 2, 6, 5), _params(2, lhs_dil=(2, 2))),
    # rows: strides with more output than kernel positions, or a dilated large kernel
    "1d strided": ((2, 3, 12), (4, 3, 3), _params(1, strides=(2,), padding=((1, 1),))),
    "2d strided": ((3, 4, 9, 9), (6, 4, 3, 3), _params(2, strides=(2, 2),
                                                       padding=((1, 1), (1, 1)))),
    "2d strided groups dilated": ((2, 6, 11, 10), (4, 3, 2, 3),
                                  _params(2, strides=(2, 3), padding=((1, -1), (2, 1)),
                                          rhs_dil=(1, 2), groups=2)),
    "2d everything": ((2, 4, 5, 6), (6, 2, 3, 3),
                      _params(2, strides=(1, 2), padding=((1, -1), (2, 1)), lhs_dil=(2, 3),
                              rhs_dil=(1, 2), groups=2)),
    "3d strided": ((2, 2, 5, 6, 7), (2, 2, 2, 2, 3), _params(3, strides=(2, 1, 2),
                                                             padding=((0, 1), (1, 1), (1, 0)))),
    "dot dilated kernel": ((2, 3, 9, 9), (2, 3, 4, 4), _params(2, rhs_dil=(2, 2))),
    # register tiles (flat axpy, flat dot) over several blocks of channels, positions and
    # images, the last ones partial
    "2d tiles": ((3, 6, 20, 17), (10, 6, 3, 3), _params(2, padding=((1, 1), (2, 0)))),
    "2d tiles groups": ((2, 8, 13, 12), (12, 4, 3, 3),
                        _params(2, padding=((1, 1), (1, 1)), groups=2)),
    "3d tiles": ((2, 3, 6, 7, 8), (5, 3, 2, 3, 3), _params(3, padding=((1, 0), (1, 1), (0, 2)))),
    "2d dot tiles": ((9, 5, 14, 15), (7, 5, 12, 13), _params(2, padding=((1, 1), (1, 1)))),
    "2d dot tiles groups": ((6, 6, 12, 12), (10, 3, 10, 11),
                            _params(2, padding=((1, 1), (0, 1)), groups=2)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_layouts_match_generic(name: str) -> None:
    lhs_shape, rhs_shape, params = CASES[name]
    _check(lhs_shape, rhs_shape, params)


@pytest.mark.parametrize("name", ["2d same", "2d groups", "2d dot strided", "2d strided",
                                  "2d tiles groups", "2d dot tiles", "3d tiles"])
def test_float32(name: str) -> None:
    lhs_shape, rhs_shape, params = CASES[name]
    _check(lhs_shape, rhs_shape, params, dtype=np.float32)


def test_tile_shape_agrees() -> None:
    """``_conv_numba`` lays the weights out for the tiles' shape (without importing Numba)."""
    from functx.primitives import _conv_numba_tiles as tiles

    assert (_conv_numba._FWD_ROWS, _conv_numba._TILE_VECS, _conv_numba._DOT_ROWS,
            _conv_numba._VECTOR_BYTES) == (tiles.FWD_ROWS, tiles.TILE_VECS, tiles.DOT_ROWS,
                                           tiles.VECTOR_BITS // 8)


@pytest.mark.parametrize("tasks", [1, 10**6])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dot_partial_sums(monkeypatch: pytest.MonkeyPatch, tasks: int, dtype: Any) -> None:
    """The flat dot's sum over input channels whole or in chunks (one partial sum per
    chunk, as many as it takes to give every thread tasks)."""
    monkeypatch.setattr(_conv_numba, "_TASKS_PER_THREAD", tasks)
    for name in ["2d dot tiles", "2d dot tiles groups", "1d dot"]:
        lhs_shape, rhs_shape, params = CASES[name]
        _check(lhs_shape, rhs_shape, params, dtype=dtype)


def test_transposed_operands() -> None:
    """The weight cotangent's operands are transposed views (not contiguous)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 8, 8)).swapaxes(0, 1)
    ct = rng.standard_normal((4, 5, 6, 6)).swapaxes(0, 1)
    params = _params(2, padding=((1, 0), (0, 1)))
    np.testing.assert_allclose(_conv_numba.conv_numba(np, x, ct, **params),
                               conv._conv_impl(np, x, ct, **params), rtol=1e-12, atol=1e-12)


@st.composite
def conv_configs(draw: Any) -> tuple:
    nd = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    n = draw(st.integers(1, 4))
    kernel = draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd))
    in_sizes = draw(st.lists(st.integers(1, 9 if nd < 3 else 5), min_size=nd, max_size=nd))
    ints = lambda lo, hi: st.lists(st.integers(lo, hi), min_size=nd, max_size=nd)  # noqa: E731
    strides, lhs_dil, rhs_dil = draw(ints(1, 2)), draw(ints(1, 2)), draw(ints(1, 2))
    padding = [tuple(draw(st.lists(st.integers(-1, 3), min_size=2, max_size=2)))
               for _ in range(nd)]
    params = _params(nd, strides, padding, lhs_dil, rhs_dil, groups)
    return (n, groups * cg) + tuple(in_sizes), (groups * og, cg) + tuple(kernel), params


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_configs())
def test_random_layouts_match_generic(cfg: tuple) -> None:
    lhs_shape, rhs_shape, params = cfg
    try:
        conv._conv_aval(_aval(lhs_shape), _aval(rhs_shape), **params)
    except ShapeError:  # an invalid configuration (crops more than the input holds)
        return
    _check(lhs_shape, rhs_shape, params)


def _aval(shape: tuple) -> AbstractArray:
    return AbstractArray(shape, np.float64)


def test_gradients_through_the_kernels() -> None:
    """grad of a strided, grouped 2-d convolution (forward, input and weight cotangents all
    through the kernels) equals the gradient with the kernels off."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 9, 9))
    w = rng.standard_normal((6, 2, 3, 3))

    def loss(x: Any, w: Any) -> Any:
        y = conv.conv_general_dilated(x, w, (2, 1), ((1, 1), (0, 1)), None, (1, 2), 2)
        return (y * y).sum()

    got = fx.grad(loss, argnums=(0, 1))(x, w)
    _conv_numba.ENABLED = False
    try:
        want = fx.grad(loss, argnums=(0, 1))(x, w)
    finally:
        _conv_numba.ENABLED = True
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-12, atol=1e-12)


def test_jit_uses_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under jit the CPU implementation is the same function (it calls the kernels)."""
    calls = []
    original = _conv_numba.direct_conv
    monkeypatch.setattr(_conv_numba, "direct_conv",
                        lambda *a, **k: calls.append(1) or original(*a, **k))
    x, w = np.ones((1, 2, 5, 5)), np.ones((3, 2, 3, 3))
    out = fx.jit(lambda x, w: conv.conv_general_dilated(x, w))(x, w)
    assert calls and out.shape == (1, 3, 3, 3) and np.all(np.asarray(out) == 18.0)


def test_dispatch_only_where_it_pays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_conv_numba, "FORCE", False)
    calls = []
    monkeypatch.setattr(_conv_numba, "direct_conv", lambda *a, **k: calls.append(1))
    params = _params(2, padding=((1, 1), (1, 1)))
    # 64 -> 64 channels: the NumPy path's product is large (BLAS wins)
    out = _conv_numba.conv_numba(np, np.ones((1, 64, 6, 6)), np.ones((64, 64, 3, 3)), **params)
    assert not calls and out.shape == (1, 64, 6, 6)
    # 1 -> 6 channels: a tiny product (the direct kernels win)
    _conv_numba.conv_numba(np, np.ones((1, 1, 6, 6)), np.ones((6, 1, 3, 3)), **params)
    assert len(calls) == 1
    # 64 -> 64 channels on 32 x 32: the register tiles are nearly all useful work
    _conv_numba.conv_numba(np, np.ones((1, 64, 32, 32)), np.ones((64, 64, 3, 3)), **params)
    assert len(calls) == 2
    # ... but not with a 1 x 1 kernel (a plain matrix product: BLAS wins)
    _conv_numba.conv_numba(np, np.ones((1, 64, 32, 32)), np.ones((64, 64, 1, 1)),
                           **_params(2))
    assert len(calls) == 2
    # its weight gradient's shape (the flat dot), on 32 x 32 but not on 8 x 8
    _conv_numba.conv_numba(np, np.ones((64, 8, 32, 32)), np.ones((64, 8, 32, 32)), **params)
    assert len(calls) == 3
    _conv_numba.conv_numba(np, np.ones((64, 8, 8, 8)), np.ones((64, 8, 8, 8)), **params)
    assert len(calls) == 3
    # a small product (LeNet's second convolution) takes the tiles at a lower efficiency
    _conv_numba.conv_numba(np, np.ones((2, 6, 14, 14)), np.ones((16, 6, 5, 5)), **_params(2))
    assert len(calls) == 4
    # without AVX-512 (the tiles would spill) only the tiny products
    monkeypatch.setattr(_conv_numba, "_TILES_FIT", False)
    _conv_numba.conv_numba(np, np.ones((1, 64, 32, 32)), np.ones((64, 64, 3, 3)), **params)
    assert len(calls) == 4
    _conv_numba.conv_numba(np, np.ones((1, 1, 6, 6)), np.ones((6, 1, 3, 3)), **params)
    assert len(calls) == 5


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fallbacks(monkeypatch: pytest.MonkeyPatch, dtype: Any) -> None:
    """float16 (which the kernels do not take), or Numba switched off: the NumPy path."""
    if dtype == np.float32:
        monkeypatch.setattr(_conv_numba, "ENABLED", False)
    calls = []
    monkeypatch.setattr(_conv_numba, "direct_conv", lambda *a, **k: calls.append(1))
    x, w = np.ones((1, 2, 5, 5), dtype), np.ones((3, 2, 3, 3), dtype)
    out = _conv_numba.conv_numba(np, x, w, **_params(2))
    assert not calls and out.dtype == dtype and np.all(out == 18)


def test_empty() -> None:
    out = _conv_numba.conv_numba(np, np.ones((0, 2, 5)), np.ones((3, 2, 2)), **_params(1))
    assert out.shape == (0, 3, 4)
