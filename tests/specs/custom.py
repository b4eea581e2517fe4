"""Specs of the custom-derivative primitives (functx/transforms/custom.py).

Each spec calls a function decorated with ``custom_vjp`` / ``custom_jvp``: eagerly it runs
the plain function; under a transform it binds the primitive, whose rules call the user's
``fwd``/``bwd`` or JVP rule (correct ones here, so every harness check applies).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import functx as fx
import functx.numpy as fnp
from tests.specs import PrimSpec
from tests.strategies import array, broadcast_pair, shapes


@fx.custom_vjp
def sin_times(x, y):
    return fnp.multiply(fnp.sin(x), y)


def _fwd(x, y):
    return sin_times(x, y), (fnp.cos(x), fnp.sin(x), y)


def _bwd(res, g):
    cos_x, sin_x, y = res
    gx = fnp.multiply(fnp.multiply(g, cos_x), y)
    gy = fnp.multiply(g, sin_x)
    from functx.primitives.elementwise import unbroadcast
    return unbroadcast(gx, cos_x), unbroadcast(gy, y)


sin_times.defvjp(_fwd, _bwd)


@fx.custom_jvp
def softplus(x):
    return fnp.logaddexp(x, 0.0)


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), fnp.multiply(t, fnp.divide(1.0, fnp.add(1.0, fnp.exp(fnp.negative(x)))))


SPECS = [
    PrimSpec(
        name="custom_vjp_call",
        fn=sin_times,
        ref=lambda x, y: np.sin(x) * y,
        args=broadcast_pair().flatmap(lambda s: st.tuples(array(s[0]), array(s[0]))),
        diff_argnums=(0, 1),
    ),
    PrimSpec(
        name="custom_jvp_call",
        fn=softplus,
        ref=lambda x: np.logaddexp(x, 0.0),
        args=shapes().flatmap(lambda s: st.tuples(array(s))),
    ),
]
