"""Specs of the host-callback primitives (functx/lax/_callback.py): ``pure_callback`` (one
spec per ``vmap_method``) and ``debug_callback``.

``pure_callback`` has no derivative (its rules raise), so its specs run on integer arrays,
where no cotangent or tangent reaches it. ``debug_callback`` has no outputs: its spec calls
it for a check of what the host function receives (NumPy arrays of the example's shape and
dtype, read-only) and returns ``-x``.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import functx
from functx.lax._callback import debug_callback
from functx.primitives import elementwise as ew
from tests.specs import PrimSpec
from tests.strategies import array, int_array, shapes


def _host_affine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    assert not a.flags.writeable and not b.flags.writeable
    return 3 * a - b


def _pure(method: str):
    def fn(x, y):
        return functx.pure_callback(_host_affine, functx.ShapeDtype(x.shape, x.dtype), x, y,
                                    vmap_method=method)
    return fn


def _int_pair():
    return shapes(max_rank=3, max_side=4).flatmap(
        lambda s: st.tuples(int_array(s, -50, 50), int_array(s, -50, 50)))


def _checked_neg(x):
    shape, dtype = tuple(x.shape), x.dtype

    def check(v):
        assert isinstance(v, np.ndarray) and not v.flags.writeable
        assert v.shape == shape and v.dtype == dtype, (v.shape, v.dtype, shape, dtype)

    debug_callback(check, x)
    return ew.neg(x)


SPECS = [
    *[PrimSpec("pure_callback", _pure(m), lambda x, y: 3 * x - y, _int_pair(), diff_argnums=(),
               label=m) for m in ("sequential", "expand_dims", "broadcast_all")],
    PrimSpec("debug_callback", _checked_neg, np.negative,
             shapes().flatmap(lambda s: st.tuples(array(s))), diff_argnums=()),
]
