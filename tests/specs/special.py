"""Specs of the special-function primitives (functx/primitives/special.py).

References are mpmath at 30 digits (independent of SciPy, which the implementations call).
Arguments are drawn inside each function's smooth domain. The shape parameters that have
no derivative (``a`` of ``igamma_grad_a``, ``a`` and ``b`` of
``betainc``; and ``a`` of ``igamma``/``igammac`` in the specs whose second derivatives are
checked, ``s`` of ``zeta`` in one spec) travel as Python floats in a ``SimpleNamespace`` last argument, which the harness
holds static (tests/test_scipy_special.py varies them per element). Edge values
(0, inf, NaN, the poles) are tested in tests/test_scipy_special.py.
"""
from __future__ import annotations

from types import SimpleNamespace as P
from typing import Any, Callable

import mpmath
import numpy as np
from hypothesis import strategies as st

from functx.primitives import special as sp
from tests.specs import PrimSpec
from tests.strategies import array, broadcast_pair, shapes

mpmath.mp.dps = 30


def ref(fn: Callable) -> Callable:
    """``fn`` of mpmath numbers, vectorised to float64 arrays (broadcasting its operands)."""
    def call(*args: Any) -> np.ndarray:
        return np.vectorize(lambda *v: float(fn(*(mpmath.mpf(float(x)) for x in v))),
                            otypes=[np.float64])(*args)
    return call


def one(lo: float, hi: float, **kw: Any) -> st.SearchStrategy:
    return shapes().flatmap(lambda s: array(s, lo, hi, **kw).map(lambda a: (a,)))


def pair(lo: float, hi: float) -> st.SearchStrategy:
    return broadcast_pair().flatmap(
        lambda s: st.tuples(array(s[0], lo, hi), array(s[1], lo, hi)))


def with_params(lo: float, hi: float, **params: tuple[float, float]) -> st.SearchStrategy:
    """(x, P(name=...)): ``x`` in [lo, hi] and each parameter a Python float in its range
    (weakly typed: it takes ``x``'s dtype and device)."""
    ps = {k: st.floats(*r) for k, r in params.items()}
    return st.tuples(one(lo, hi).map(lambda t: t[0]),
                     st.fixed_dictionaries(ps).map(lambda d: P(**d)))


def _ndtri(p: Any) -> Any:
    return mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1)


def _log_ndtr(x: Any) -> Any:
    return mpmath.log(mpmath.ncdf(x))


SPECS = [
    PrimSpec("erfc", sp.erfc, ref(mpmath.erfc), one(-3.0, 3.0)),
    PrimSpec("erf_inv", sp.erf_inv, ref(mpmath.erfinv), one(-0.9, 0.9), rtol=1e-11),
    PrimSpec("erfcx", sp.erfcx, ref(lambda x: mpmath.exp(x * x) * mpmath.erfc(x)),
             one(-2.0, 5.0), rtol=1e-11),
    PrimSpec("lgamma", sp.lgamma, ref(mpmath.loggamma), one(0.2, 5.0, away_from=(1.0, 2.0)),
             rtol=1e-11),
    PrimSpec("gamma", sp.gamma, ref(mpmath.gamma), one(0.2, 4.0), rtol=1e-11),
    PrimSpec("gamma", sp.gamma, ref(mpmath.gamma), one(-2.8, -2.2), rtol=1e-11,
             label="negative"),
    PrimSpec("digamma", sp.digamma, ref(mpmath.digamma), one(0.3, 5.0), rtol=1e-11,
             atol=1e-11),
    PrimSpec("zeta", lambda q, p: sp.zeta(p.s, q), lambda q, p: ref(mpmath.zeta)(p.s, q),
             with_params(0.5, 3.0, s=(1.5, 4.0)), rtol=1e-11),
    PrimSpec("zeta", sp.zeta, ref(mpmath.zeta),
             broadcast_pair().flatmap(lambda s: st.tuples(array(s[0], 1.5, 4.0),
                                                          array(s[1], 0.5, 3.0))),
             diff_argnums=(0, 1), rtol=1e-11, label="s and q"),
    PrimSpec("igamma", lambda x, p: sp.igamma(p.a, x),
             lambda x, p: ref(lambda a, v: mpmath.gammainc(a, 0, v, regularized=True))(p.a, x),
             with_params(0.2, 4.0, a=(0.5, 3.0)), rtol=1e-11, atol=1e-14),
    PrimSpec("igammac", lambda x, p: sp.igammac(p.a, x),
             lambda x, p: ref(lambda a, v: mpmath.gammainc(a, v, mpmath.inf,
                                                           regularized=True))(p.a, x),
             with_params(0.2, 4.0, a=(0.5, 3.0)), rtol=1e-11, atol=1e-14),
    PrimSpec("igamma", sp.igamma,
             ref(lambda a, v: mpmath.gammainc(a, 0, v, regularized=True)),
             broadcast_pair().flatmap(lambda s: st.tuples(array(s[0], 0.5, 3.0),
                                                          array(s[1], 0.2, 4.0))),
             diff_argnums=(0, 1), rtol=1e-11, atol=1e-14, smooth=False, label="a and x"),
    PrimSpec("igamma_grad_a", lambda x, p: sp.igamma_grad_a(p.a, x),
             lambda x, p: ref(lambda a, v: mpmath.diff(
                 lambda t: mpmath.gammainc(t, 0, v, regularized=True), a))(p.a, x),
             with_params(0.2, 4.0, a=(0.5, 3.0)), rtol=1e-9, atol=1e-13),
    PrimSpec("lbeta", sp.lbeta, ref(lambda a, b: mpmath.log(mpmath.beta(a, b))),
             pair(0.5, 4.0), diff_argnums=(0, 1), rtol=1e-11, atol=1e-12),
    PrimSpec("betainc", lambda x, p: sp.betainc(p.a, p.b, x),
             lambda x, p: ref(lambda a, b, v: mpmath.betainc(a, b, 0, v, regularized=True))(
                 p.a, p.b, x),
             with_params(0.05, 0.95, a=(0.5, 3.0), b=(0.5, 3.0)), rtol=1e-10, atol=1e-14),
    PrimSpec("ndtri", sp.ndtri, ref(_ndtri), one(0.02, 0.98), rtol=1e-11, atol=1e-14),
    PrimSpec("log_ndtr", sp.log_ndtr, ref(_log_ndtr), one(-5.0, 3.0), rtol=1e-11),
    PrimSpec("i0e", sp.i0e, ref(lambda x: mpmath.besseli(0, x) * mpmath.exp(-abs(x))),
             one(-4.0, 4.0, away_from=(0.0,), margin=0.1), rtol=1e-11),
    PrimSpec("i1e", sp.i1e, ref(lambda x: mpmath.besseli(1, x) * mpmath.exp(-abs(x))),
             one(-4.0, 4.0, away_from=(0.0,), margin=0.1), rtol=1e-11),
]
