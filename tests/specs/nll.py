"""Specs of class_nll and class_nll_grad (functx/primitives/nll.py), per reduction.

Targets are drawn in ``[-2, C + 2)``, so some fall outside the classes (they contribute
nothing); "mean" keeps one target inside so that the weights do not sum to 0 (NaN), and
weights are positive. Weights have shape ``(C,)`` or are 0-d. Static parameters travel as a
``SimpleNamespace`` last argument. References loop over the positions with NumPy, written
from the definitions independently of the implementations.
"""
from __future__ import annotations

from types import SimpleNamespace as P

import numpy as np
from hypothesis import strategies as st

from functx.primitives import nll
from tests.specs import PrimSpec
from tests.strategies import array, int_array, shapes


@st.composite
def _params(draw, reduction: str) -> P:
    shape = draw(shapes(min_rank=1, max_rank=3, min_side=1 if reduction == "mean" else 0))
    axis = draw(st.integers(0, len(shape) - 1))
    if shape[axis] == 0 and reduction == "mean":
        shape = shape[:axis] + (1,) + shape[axis + 1:]
    return P(shape=shape, axis=axis, rest=shape[:axis] + shape[axis + 1:], c=shape[axis],
             reduction=reduction, w_shape=draw(st.sampled_from([(shape[axis],), ()])))


def _targets(p: P) -> st.SearchStrategy:
    def fix(t: np.ndarray) -> np.ndarray:
        if p.reduction == "mean":  # at least one target inside the classes
            t = t.copy()
            t.reshape(-1)[0] = abs(int(t.reshape(-1)[0])) % p.c
        return t
    return int_array(p.rest, -2, p.c + 2).map(fix)


def _weights_at(t: np.ndarray, w: np.ndarray, c: int) -> np.ndarray:
    wt = np.zeros(t.shape)
    for j in np.ndindex(*t.shape):
        if 0 <= t[j] < c:
            wt[j] = w[t[j]] if w.ndim else w
    return wt


def _nll_ref(x, t, w, p):
    wt = _weights_at(t, w, p.c)
    terms = np.zeros(t.shape)
    for j in np.ndindex(*t.shape):
        if 0 <= t[j] < p.c:
            terms[j] = -wt[j] * x[j[:p.axis] + (int(t[j]),) + j[p.axis:]]
    if p.reduction == "none":
        return terms
    return terms.sum() if p.reduction == "sum" else terms.sum() / wt.sum()


def _nll_grad_ref(t, w, g, p):
    wt = _weights_at(t, w, p.c)
    out = np.zeros(p.shape)
    for j in np.ndindex(*t.shape):
        if 0 <= t[j] < p.c:
            v = -wt[j] * (g[j] if p.reduction == "none" else g)
            out[j[:p.axis] + (int(t[j]),) + j[p.axis:]] = (
                v / wt.sum() if p.reduction == "mean" else v)
    return out


SPECS = []
for _r in ("none", "sum", "mean"):
    SPECS += [
        PrimSpec("class_nll", lambda x, t, w, p: nll.class_nll(x, t, w, axis=p.axis,
                                                             reduction=p.reduction),
                 _nll_ref, _params(_r).flatmap(lambda p: st.tuples(
                     array(p.shape, -3.0, 0.0), _targets(p), array(p.w_shape, 0.5, 1.5),
                     st.just(p))), diff_argnums=(0, 2), label=_r),
        PrimSpec("class_nll_grad",
                 lambda t, w, g, p: nll.class_nll_grad(t, w, g, axis=p.axis, size=p.c,
                                                       reduction=p.reduction),
                 _nll_grad_ref, _params(_r).flatmap(lambda p: st.tuples(
                     _targets(p), array(p.w_shape, 0.5, 1.5),
                     array(p.rest if p.reduction == "none" else ()), st.just(p))),
                 diff_argnums=(1, 2), label=_r),
    ]
