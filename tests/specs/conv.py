"""Specs of the convolution family: conv_general_dilated.

Parameters (spatial rank, groups, channels, kernel and input sizes, strides, padding pairs
that may be negative, lhs and rhs dilations) are drawn first, then the arrays; they travel
as a ``SimpleNamespace`` last argument, which the harness holds static.

The reference is written independently of the implementation: the input is dilated and
padded explicitly (NumPy index assignment and ``np.pad``/slicing), then every output
position and every kernel position are visited in Python loops, each adding one small
matrix product per group.
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace as P

import numpy as np
from hypothesis import strategies as st

from functx.primitives import conv as cv
from tests.specs import PrimSpec
from tests.strategies import array


@st.composite
def _conv_params(draw, nds: tuple = (1, 2), max_in: int = 5, batch: tuple = (0, 2)):
    nd = draw(st.integers(*nds))
    groups = draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    in_sizes = tuple(draw(st.integers(1, max_in)) for _ in range(nd))
    strides = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    lhs_dil = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    rhs_dil = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    padding = []
    for n, k, ld, rd in zip(in_sizes, kernel, lhs_dil, rhs_dil):
        lo, hi = draw(st.integers(-1, 2)), draw(st.integers(-1, 2))
        short = (k - 1) * rd + 1 - ((n - 1) * ld + 1 + lo + hi)
        padding.append((lo, hi + max(short, 0)))  # at least one output position
    return P(nd=nd, groups=groups, n=draw(st.integers(*batch)),
             cg=draw(st.integers(1, 2)), og=draw(st.integers(1, 2)), kernel=kernel,
             in_sizes=in_sizes, strides=strides, padding=tuple(padding), lhs_dil=lhs_dil,
             rhs_dil=rhs_dil)


def _arrays(p: P) -> st.SearchStrategy:
    lhs = array((p.n, p.groups * p.cg) + p.in_sizes)
    rhs = array((p.groups * p.og, p.cg) + p.kernel)
    return st.tuples(lhs, rhs, st.just(p))


def _conv(lhs, rhs, p: P):
    return cv.conv_general_dilated(lhs, rhs, p.strides, p.padding, p.lhs_dil, p.rhs_dil,
                                   p.groups)


def _conv_ref(lhs: np.ndarray, rhs: np.ndarray, p: P) -> np.ndarray:
    n, c = lhs.shape[:2]
    dilated = np.zeros((n, c) + tuple((s - 1) * d + 1 for s, d in zip(p.in_sizes, p.lhs_dil)))
    dilated[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in p.lhs_dil)] = lhs
    grown = np.pad(dilated, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in p.padding])
    padded = grown[(slice(None), slice(None)) + tuple(
        slice(max(-lo, 0), g - max(-hi, 0)) for g, (lo, hi) in zip(grown.shape[2:], p.padding))]
    dk = [(k - 1) * d + 1 for k, d in zip(p.kernel, p.rhs_dil)]
    out_sizes = [(m - k) // s + 1 for m, k, s in zip(padded.shape[2:], dk, p.strides)]
    o = rhs.shape[0]
    og = o // p.groups
    out = np.zeros((n, o) + tuple(out_sizes))
    for y in itertools.product(*map(range, out_sizes)):
        for k in itertools.product(*map(range, p.kernel)):
            pos = tuple(yi * s + ki * d for yi, s, ki, d in zip(y, p.strides, k, p.rhs_dil))
            for g in range(p.groups):
                patch = padded[(slice(None), slice(g * p.cg, (g + 1) * p.cg)) + pos]  # [n, cg]
                w = rhs[(slice(g * og, (g + 1) * og), slice(None)) + k]  # [og, cg]
                out[(slice(None), slice(g * og, (g + 1) * og)) + y] += patch @ w.T
    return out


SPECS = [
    PrimSpec("conv_general_dilated", lambda x, w, p: _conv(x, w, p), _conv_ref,
             _conv_params().flatmap(_arrays), diff_argnums=(0, 1), rtol=1e-10, atol=1e-10,
             label="1d_2d"),
    PrimSpec("conv_general_dilated", lambda x, w, p: _conv(x, w, p), _conv_ref,
             _conv_params(nds=(3, 3), max_in=3, batch=(1, 1)).flatmap(_arrays),
             diff_argnums=(0, 1), rtol=1e-10, atol=1e-10, label="3d"),
]
