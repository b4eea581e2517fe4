"""Specs of the max pooling primitives (functx/primitives/pooling.py): ``max_pool`` and
``max_pool_grad``.

Parameters (spatial rank 1 to 3, window, strides (also below the window: overlapping
windows), dilation, spatial sizes the windows fit in, batch and channels) are drawn first
and travel as a ``SimpleNamespace`` last argument, which the harness holds static. Inputs
are distinct values (no ties: the maximum's position, hence the derivative, is constant in
a neighbourhood, so finite differences apply); ties, NaN and ``-inf`` padding are checked
in tests/test_pooling.py.

The references are written independently of the implementations: Python loops over every
output position and every window element, keeping the first strictly greater value (the
first NaN once one is met); the gradient adds ``g`` at that element's position.
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace as P

import numpy as np
from hypothesis import strategies as st

from functx.primitives import pooling
from tests.specs import PrimSpec
from tests.strategies import array, distinct_array


@st.composite
def _pool_params(draw, nds: tuple = (1, 2), max_extra: int = 3, batch: tuple = (0, 2)):
    nd = draw(st.integers(*nds))
    window = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    sizes = tuple((k - 1) * d + 1 + draw(st.integers(0, max_extra))
                  for k, d in zip(window, dilation))
    return P(nd=nd, n=draw(st.integers(*batch)), c=draw(st.integers(1, 2)), window=window,
             strides=strides, dilation=dilation, sizes=sizes)


def out_sizes(p: P, sizes: tuple) -> tuple[int, ...]:
    return tuple((n - d * (k - 1) - 1) // s + 1
                 for n, k, s, d in zip(sizes, p.window, p.strides, p.dilation))


def first_max_positions(x: np.ndarray, p: P):
    """For each ``(n, c, *y)``: the input position of the window's first maximum (the first
    strictly greater value; the first NaN once one appears), by loops."""
    n, c = x.shape[:2]
    for y in itertools.product(*map(range, out_sizes(p, x.shape[2:]))):
        for i in range(n):
            for j in range(c):
                best, at = None, None
                for k in itertools.product(*map(range, p.window)):
                    pos = tuple(yi * s + ki * d
                                for yi, s, ki, d in zip(y, p.strides, k, p.dilation))
                    v = x[(i, j) + pos]
                    if best is None or v > best or (np.isnan(v) and not np.isnan(best)):
                        best, at = v, pos
                yield (i, j) + y, (i, j) + at


def max_pool_ref(x: np.ndarray, p: P) -> np.ndarray:
    out = np.zeros(x.shape[:2] + out_sizes(p, x.shape[2:]), x.dtype)
    for o, at in first_max_positions(x, p):
        out[o] = x[at]
    return out


def max_pool_grad_ref(x: np.ndarray, g: np.ndarray, p: P) -> np.ndarray:
    dx = np.zeros(x.shape, x.dtype)
    for o, at in first_max_positions(x, p):
        dx[at] += g[o]
    return dx


def _x(p: P) -> st.SearchStrategy:
    return distinct_array((p.n, p.c) + p.sizes)


def _pool(x, p: P):
    return pooling.max_pool(x, p.window, p.strides, p.dilation)


def _pool_grad(x, g, p: P):
    return pooling.max_pool_grad(x, g, p.window, p.strides, p.dilation)


def _with_g(p: P) -> st.SearchStrategy:
    return st.tuples(_x(p), array((p.n, p.c) + out_sizes(p, p.sizes)), st.just(p))


SPECS = [
    PrimSpec("max_pool", _pool, max_pool_ref,
             _pool_params().flatmap(lambda p: st.tuples(_x(p), st.just(p))),
             rtol=0, atol=0, label="1d_2d"),
    PrimSpec("max_pool", _pool, max_pool_ref,
             _pool_params(nds=(3, 3), max_extra=2, batch=(1, 1)).flatmap(
                 lambda p: st.tuples(_x(p), st.just(p))),
             rtol=0, atol=0, label="3d"),
    # x's derivative is zero (the maxima do not move): checked against finite differences too
    PrimSpec("max_pool_grad", _pool_grad, max_pool_grad_ref, _pool_params().flatmap(_with_g),
             diff_argnums=(0, 1), rtol=1e-12, atol=1e-12, label="1d_2d"),
    PrimSpec("max_pool_grad", _pool_grad, max_pool_grad_ref,
             _pool_params(nds=(3, 3), max_extra=2, batch=(1, 1)).flatmap(_with_g),
             diff_argnums=(0, 1), rtol=1e-12, atol=1e-12, label="3d"),
]
