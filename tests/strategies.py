"""Hypothesis strategies for array shapes and values used by the rule tests.

Shapes cover scalars, size-1 (broadcasting) axes, zero-size axes and rank up to 4.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from hypothesis import strategies as st

MAX_RANK = 4


def shapes(min_rank: int = 0, max_rank: int = MAX_RANK, min_side: int = 0,
           max_side: int = 4) -> st.SearchStrategy:
    """Array shapes; zero-size sides appear when ``min_side`` is 0."""
    return st.lists(st.integers(min_side, max_side), min_size=min_rank,
                    max_size=max_rank).map(tuple)


@st.composite
def broadcast_pair(draw, min_side: int = 0, max_side: int = 4) -> tuple[tuple, tuple]:
    """Two shapes that broadcast together (some axes of size 1, differing ranks)."""
    full = draw(shapes(min_side=min_side, max_side=max_side))
    def sub(shape):
        rank = draw(st.integers(0, len(shape)))
        tail = shape[len(shape) - rank:]
        return tuple(1 if draw(st.booleans()) and draw(st.booleans()) else d for d in tail)
    a, b = sub(full), sub(full)
    if draw(st.booleans()):
        a = full
    return a, b


def array(shape: Sequence[int], lo: float = -2.0, hi: float = 2.0,
          dtype: type = np.float64, away_from: Sequence[float] = (),
          margin: float = 0.05) -> st.SearchStrategy:
    """A float64 (or given dtype) array with values in [lo, hi].

    Values within ``margin`` of any point in ``away_from`` (kinks, poles, ties) are pushed
    away so finite differences stay valid.
    """
    def fix(seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        x = rng.uniform(lo, hi, size=shape)
        for p in away_from:
            close = np.abs(x - p) < margin
            x = np.where(close, p + np.where(x >= p, margin, -margin) * 2, x)
        return x.astype(dtype)
    return st.integers(0, 2**32 - 1).map(fix)


def int_array(shape: Sequence[int], lo: int, hi: int, dtype: type = np.int64) -> st.SearchStrategy:
    """An integer array with values in [lo, hi)."""
    return st.integers(0, 2**32 - 1).map(
        lambda seed: np.random.default_rng(seed).integers(lo, hi, size=shape).astype(dtype))


def distinct_array(shape: Sequence[int], lo: float = -2.0, hi: float = 2.0) -> st.SearchStrategy:
    """A float64 array whose entries are pairwise at least ~1e-3 apart (no ties)."""
    def make(seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        n = int(np.prod(shape, dtype=np.int64))
        vals = np.linspace(lo, hi, max(n, 1))[:n]
        return rng.permutation(vals).reshape(shape)
    return st.integers(0, 2**32 - 1).map(make)
