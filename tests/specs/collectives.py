"""Specs of the collectives (functx/primitives/collectives.py).

A collective has members only inside a map that names its axis, so each spec's function
is ``vmap(collective, axis_name="i")`` over the leading axis of its argument (the
members), and its reference is the NumPy computation across that axis. The property tests
then check the batching rule's result, its shape rule, and derivatives through it; the
collectives' own VJP and JVP rules (which run under ``grad``/``jvp`` *inside* the map) are
checked in tests/test_collectives.py against these same functions and against JAX.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import functx as fx
from tests.specs import PrimSpec
from tests.strategies import array, distinct_array, shapes

L = fx.lax


def mapped(f):
    """``f`` of one member, mapped over the leading axis named "i"."""
    return fx.vmap(f, axis_name="i")


def members(extra_lead: int = 0, min_rank: int = 0, max_rank: int = 2, min_n: int = 1):
    """(n, *lead, *shape) float64 arrays: n members (1 to 4), ``extra_lead`` axes of size
    n (for scatters), then a small example shape."""
    def build(draw_n):
        n, shape = draw_n
        return st.tuples(array((n,) * (1 + extra_lead) + shape))
    return st.tuples(st.integers(min_n, 4), shapes(min_rank, max_rank, max_side=3)).flatmap(
        build)


def _distinct_members(max_rank: int = 2):
    return st.tuples(st.integers(1, 4), shapes(0, max_rank, min_side=1, max_side=3)).flatmap(
        lambda ns: st.tuples(distinct_array((ns[0],) + ns[1])))


def _tiled(min_side: int = 1):
    """(n, n * k, m) arrays for the tiled scatters."""
    return st.tuples(st.integers(1, 3), st.integers(1, 2), st.integers(0, 2)).flatmap(
        lambda t: st.tuples(array((t[0], t[0] * t[1], t[2]))))


def _bcast(x, value):
    return np.broadcast_to(value, x.shape[:1] + np.shape(value)).copy()


def _ppermute_ref(x):
    return np.roll(x, 1, axis=0)


def _shift(x):
    n = L.axis_size("i")
    return L.ppermute(x, "i", [(j, (j + 1) % n) for j in range(n)])


def _partial_shift(x):
    n = L.axis_size("i")
    return L.ppermute(x, "i", [(j, j + 1) for j in range(n - 1)])


def _partial_shift_ref(x):
    out = np.zeros_like(x)
    out[1:] = x[:-1]
    return out


def _all_to_all_ref(x):  # x[j, i, k]: member i receives x[j, i, :] at position j of axis 1
    return np.transpose(x, (1, 2, 0))


def _all_to_all_tiled_ref(x):  # x[j, (i, c), m] -> out[i, c, (j, m)]
    n, nk, m = x.shape
    k = nk // n
    y = x.reshape(n, n, k, m)  # [j, i, c, m]
    return np.transpose(y, (1, 2, 0, 3)).reshape(n, k, n * m)


SPECS = [
    PrimSpec("psum", fn=mapped(lambda x: L.psum(x, "i")),
             ref=lambda x: _bcast(x, x.sum(0)), args=members(), rtol=1e-12, atol=1e-12),
    PrimSpec("psum", fn=mapped(lambda x: L.pmean(x, "i")), label="pmean",
             ref=lambda x: _bcast(x, x.mean(0)), args=members(), rtol=1e-12, atol=1e-12),
    PrimSpec("pmax", fn=mapped(lambda x: L.pmax(x, "i")),
             ref=lambda x: _bcast(x, x.max(0)), args=_distinct_members()),
    PrimSpec("pmin", fn=mapped(lambda x: L.pmin(x, "i")),
             ref=lambda x: _bcast(x, x.min(0)), args=_distinct_members()),
    PrimSpec("all_gather", fn=mapped(lambda x: L.all_gather(x, "i")),
             ref=lambda x: _bcast(x, x), args=members()),
    PrimSpec("all_gather", fn=mapped(lambda x: L.all_gather(x, "i", axis=-1)), label="last",
             ref=lambda x: _bcast(x, np.moveaxis(x, 0, -1)), args=members()),
    PrimSpec("all_gather", fn=mapped(lambda x: L.all_gather(x, "i", axis=1, tiled=True)),
             label="tiled", args=members(min_rank=2),
             ref=lambda x: _bcast(x, np.concatenate(list(x), axis=1))),
    PrimSpec("psum_scatter", fn=mapped(lambda x: L.psum_scatter(x, "i")),
             ref=lambda x: x.sum(0), args=members(extra_lead=1)),
    PrimSpec("psum_scatter", label="tiled",
             fn=mapped(lambda x: L.psum_scatter(x, "i", scatter_dimension=0, tiled=True)),
             ref=lambda x: x.sum(0).reshape((x.shape[0], x.shape[1] // x.shape[0]) + x.shape[2:]),
             args=_tiled()),
    PrimSpec("all_to_all", fn=mapped(lambda x: L.all_to_all(x, "i", 0, 1)),
             ref=_all_to_all_ref, args=members(extra_lead=1, min_rank=1, max_rank=1)),
    PrimSpec("all_to_all", fn=mapped(lambda x: L.all_to_all(x, "i", 0, 1, tiled=True)),
             label="tiled", ref=_all_to_all_tiled_ref, args=_tiled()),
    PrimSpec("ppermute", fn=mapped(_shift), ref=_ppermute_ref, args=members()),
    PrimSpec("ppermute", fn=mapped(_partial_shift), ref=_partial_shift_ref, args=members(min_n=2),
             label="partial"),
    PrimSpec("axis_index", fn=mapped(lambda x: x * L.axis_index("i").astype(x.dtype)),
             ref=lambda x: x * np.arange(x.shape[0]).reshape((-1,) + (1,) * (x.ndim - 1)),
             args=members()),
]
