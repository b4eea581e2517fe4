"""Specs of the sorting primitives (functx/primitives/sort.py): sort (values, the
permutation, several operands and keys), top_k (values and indices), cummax, cummin,
logcumsumexp and searchsorted.

Static parameters travel as in tests/specs/structural.py: a last, empty int8 array whose
shape ``(0, k)`` holds their number ``k`` in a table. Differentiable specs draw values
without ties (``distinct_array``), so finite differences never cross a change of order;
ties are checked on integer keys (the permutation, stable) and, for gradients, against JAX
in tests/test_sorting.py. References are NumPy's own sorts and accumulations.
"""
from __future__ import annotations

from types import SimpleNamespace as P
from typing import Any, Callable

import numpy as np
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from functx.primitives import sort as so
from tests.specs import PrimSpec
from tests.strategies import array, distinct_array, int_array, shapes

_DRAWN: list[P] = []
_NUMBERS: dict[str, int] = {}


def _handle(p: P) -> np.ndarray:
    """An empty array standing for the parameters ``p`` (see the module docstring)."""
    key = repr(p)
    k = _NUMBERS.get(key)
    if k is None:
        k = _NUMBERS[key] = len(_DRAWN)
        _DRAWN.append(p)
    try:
        note(f"parameters #{k}: {p}")
    except InvalidArgument:  # drawn outside a test
        pass
    return np.zeros((0, k), np.int8)


def _spec(name: str, fn: Callable, ref: Callable, params: st.SearchStrategy,
          arrays: Callable[[P], st.SearchStrategy], **kwargs: Any) -> PrimSpec:
    def unpack(f: Callable) -> Callable:
        return lambda *args: f(*args[:-1], _DRAWN[args[-1].shape[1]])

    drawn = params.flatmap(lambda p: arrays(p).map(lambda arrs: (*arrs, _handle(p))))
    return PrimSpec(name, unpack(fn), unpack(ref), drawn, **kwargs)


@st.composite
def _axis_params(draw, max_side: int = 4) -> P:
    shape = draw(shapes(min_rank=1, max_side=max_side))
    return P(shape=shape, axis=draw(st.integers(0, len(shape) - 1)),
             reverse=draw(st.booleans()))


@st.composite
def _top_k_params(draw) -> P:
    shape = draw(shapes(min_rank=1, max_side=5))
    return P(shape=shape, k=draw(st.integers(0, shape[-1])))


def _ints(shape: tuple) -> st.SearchStrategy:
    return int_array(shape, 0, 3)  # many ties


# -- references ------------------------------------------------------------------------------

def _stable_perm(keys: list, axis: int) -> np.ndarray:
    """The stable lexicographic permutation (first key primary), NumPy's lexsort."""
    if keys[0].shape[axis] == 0:
        return np.zeros(keys[0].shape, np.int64)
    moved = [np.moveaxis(k, axis, -1) for k in keys]
    perm = np.lexsort(moved[::-1], axis=-1)
    return np.moveaxis(perm, -1, axis).astype(np.int64)


def _top_k_ref(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Descending, ties by index: the stable ascending order of the negated values."""
    idx = np.argsort(-x, axis=-1, kind="stable")[..., :k].astype(np.int64)
    return np.take_along_axis(x, idx, -1), idx


def _accumulate(ufunc: Any, x: np.ndarray, p: P) -> np.ndarray:
    if not p.reverse:
        return ufunc.accumulate(x, axis=p.axis)
    return np.flip(ufunc.accumulate(np.flip(x, p.axis), axis=p.axis), p.axis)


def _lcse_ref(x: np.ndarray, p: P) -> np.ndarray:
    """log(cumsum(exp(x))) in float64 with the row maximum factored out."""
    if x.size == 0:
        return x.copy()
    m = np.max(x, axis=p.axis, keepdims=True)
    e = np.exp(x - m)
    c = np.cumsum(e, axis=p.axis) if not p.reverse else np.flip(
        np.cumsum(np.flip(e, p.axis), axis=p.axis), p.axis)
    return np.log(c) + m


def _searchsorted_ref(a: np.ndarray, v: np.ndarray, p: P) -> np.ndarray:
    return np.searchsorted(a, v, side=p.side).astype(np.int64)


@st.composite
def _search_args(draw) -> P:
    return P(n=draw(st.integers(0, 6)), vshape=draw(shapes(max_rank=2)),
             side=draw(st.sampled_from(["left", "right"])))


def _sorted_and_values(p: P) -> st.SearchStrategy:
    # values drawn from the sorted array's own grid, so equal values (side) are exercised
    return st.tuples(int_array((p.n,), 0, 5).map(lambda a: np.sort(a).astype(np.float64)),
                     int_array(p.vshape, -1, 6).map(lambda a: a.astype(np.float64)))


SPECS = [
    # sort: the sorted values (differentiable through the permutation) and the permutation
    _spec("sort", lambda x, p: so.sort([x], dimension=p.axis)[0],
          lambda x, p: np.sort(x, axis=p.axis), _axis_params(),
          lambda p: st.tuples(distinct_array(p.shape)), smooth=False, label="values"),
    _spec("sort", lambda x, p: so.sort([x], dimension=p.axis)[-1],
          lambda x, p: _stable_perm([x], p.axis), _axis_params(),
          lambda p: st.tuples(_ints(p.shape)), diff_argnums=(), label="perm_ties"),
    # a key and a value operand: both get cotangents (the key's through its own order)
    _spec("sort", lambda k, v, p: so.sort([k, v], dimension=p.axis)[1],
          lambda k, v, p: np.take_along_axis(v, _stable_perm([k], p.axis), p.axis),
          _axis_params(), lambda p: st.tuples(distinct_array(p.shape), array(p.shape)),
          diff_argnums=(0, 1), smooth=False, label="key_val"),
    # two keys, the first with ties: the second decides; values follow
    _spec("sort", lambda k1, k2, v, p: so.sort([k1, k2, v], dimension=p.axis, num_keys=2)[2],
          lambda k1, k2, v, p: np.take_along_axis(v, _stable_perm([k1, k2], p.axis), p.axis),
          _axis_params(), lambda p: st.tuples(_ints(p.shape), distinct_array(p.shape),
                                              array(p.shape)),
          diff_argnums=(1, 2), smooth=False, label="two_keys"),
    # top_k
    _spec("top_k", lambda x, p: so.top_k(x, p.k)[0], lambda x, p: _top_k_ref(x, p.k)[0],
          _top_k_params(), lambda p: st.tuples(distinct_array(p.shape)), smooth=False,
          label="values"),
    _spec("top_k", lambda x, p: so.top_k(x, p.k)[1], lambda x, p: _top_k_ref(x, p.k)[1],
          _top_k_params(), lambda p: st.tuples(_ints(p.shape)), diff_argnums=(),
          label="indices_ties"),
    # running extrema, logcumsumexp
    _spec("cummax", lambda x, p: so.cummax(x, axis=p.axis, reverse=p.reverse),
          lambda x, p: _accumulate(np.maximum, x, p), _axis_params(),
          lambda p: st.tuples(distinct_array(p.shape)), smooth=False),
    _spec("cummax", lambda x, p: so.cummax(x, axis=p.axis, reverse=p.reverse),
          lambda x, p: _accumulate(np.maximum, x, p), _axis_params(),
          lambda p: st.tuples(_ints(p.shape)), diff_argnums=(), label="int"),
    _spec("cummin", lambda x, p: so.cummin(x, axis=p.axis, reverse=p.reverse),
          lambda x, p: _accumulate(np.minimum, x, p), _axis_params(),
          lambda p: st.tuples(distinct_array(p.shape)), smooth=False),
    _spec("logcumsumexp", lambda x, p: so.logcumsumexp(x, axis=p.axis, reverse=p.reverse),
          _lcse_ref, _axis_params(), lambda p: st.tuples(array(p.shape)),
          rtol=1e-10, atol=1e-12),
    # searchsorted
    _spec("searchsorted", lambda a, v, p: so.searchsorted(a, v, side=p.side),
          _searchsorted_ref, _search_args(), _sorted_and_values, diff_argnums=()),
]
