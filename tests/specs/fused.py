"""Specs of the fused primitives (functx/primitives/fused.py): layer_norm, layer_norm_grad,
layer_norm_grads, softmax, log_softmax, log_softmax_grad, gelu and gelu_grad (each GELU form
separately).

Static parameters (eps, axis) travel as a ``SimpleNamespace`` last argument. The layer-norm
``eps`` is at least 0.01, so that ``1 / sqrt(var + eps)`` stays below 10 and central finite
differences stay accurate for rows of nearly equal values. Weights and biases are drawn of
shape ``(D,)`` or 0-d (the primitive broadcasts a scalar along the axis).

References are NumPy written from the textbook formulas, independently of the
implementations: ``math.erf`` for the exact GELU, and for the gradients of layer norm and
GELU the derivatives worked out by hand (``layer_norm_grad`` is the textbook input gradient
``(1/sigma) (gw - mean(gw) - xhat mean(gw xhat))``).
"""
from __future__ import annotations

import math
from types import SimpleNamespace as P

import numpy as np
from hypothesis import strategies as st

from functx.primitives import fused
from tests.specs import PrimSpec
from tests.strategies import array, shapes

_erf = np.vectorize(math.erf, otypes=[np.float64])
C, A = math.sqrt(2 / math.pi), 0.044715


# -- layer norm ------------------------------------------------------------------------------

@st.composite
def _ln_params(draw) -> P:
    lead = draw(shapes(max_rank=2, max_side=3))
    d = draw(st.integers(1, 5))
    return P(shape=lead + (d,), d=d, eps=draw(st.sampled_from([0.01, 0.1, 1.0])),
             w_shape=draw(st.sampled_from([(d,), ()])), b_shape=draw(st.sampled_from([(d,), ()])))


def _ln_args(p: P) -> st.SearchStrategy:
    return st.tuples(array(p.shape), array(p.w_shape, 0.5, 1.5), array(p.b_shape), st.just(p))


def _ln_grad_args(p: P) -> st.SearchStrategy:
    return st.tuples(array(p.shape), array(p.w_shape, 0.5, 1.5), array(p.shape), st.just(p))


def _ln_ref_stats(x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    mu = x.mean(axis=-1, keepdims=True)
    sigma = np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)
    return (x - mu) / sigma, sigma


def _ln_ref(x, w, b, p):
    return _ln_ref_stats(x, p.eps)[0] * w + b


def _ln_grad_ref(x, w, g, p):
    xhat, sigma = _ln_ref_stats(x, p.eps)
    gw = g * w
    return (gw - gw.mean(axis=-1, keepdims=True)
            - xhat * (gw * xhat).mean(axis=-1, keepdims=True)) / sigma


def _ln_grads_ref(x, w, g, p):
    """(dx, dweight, dbias): the textbook input gradient, and the parameter gradients summed
    over every axis but the last."""
    xhat = _ln_ref_stats(x, p.eps)[0]
    lead = tuple(range(x.ndim - 1))
    return _ln_grad_ref(x, w, g, p), (g * xhat).sum(axis=lead), g.sum(axis=lead)


# -- softmax ---------------------------------------------------------------------------------

@st.composite
def _axis_params(draw) -> P:
    shape = draw(shapes(min_rank=1, max_rank=3))
    return P(shape=shape, axis=draw(st.integers(-len(shape), len(shape) - 1)))


def _softmax_ref(x, p):
    e = np.exp(x - x.max(axis=p.axis, keepdims=True)) if x.size else x
    return e / e.sum(axis=p.axis, keepdims=True) if x.size else x


def _log_softmax_ref(x, p):
    if not x.size:
        return x
    s = x - x.max(axis=p.axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=p.axis, keepdims=True))


def _log_softmax_grad_ref(y, g, p):
    """The transposed Jacobian of log_softmax, ``J[i, j] = delta_ij - softmax_j``, applied
    to ``g`` row by row (``y`` is a log_softmax output)."""
    yy, gg = np.moveaxis(y, p.axis, -1), np.moveaxis(g, p.axis, -1)
    out = np.empty_like(gg)
    for r in np.ndindex(*yy.shape[:-1]):
        jac = np.eye(yy.shape[-1]) - np.exp(yy[r])[None, :]  # d y_i / d x_j
        out[r] = jac.T @ gg[r]
    return np.moveaxis(out, -1, p.axis)


def _log_softmax_grad_args(p: P) -> st.SearchStrategy:
    """A log_softmax output (rows of log-probabilities) and a cotangent."""
    return st.tuples(array(p.shape, -4.0, 4.0).map(lambda x: _log_softmax_ref(x, p)),
                     array(p.shape), st.just(p))


# -- gelu --------------------------------------------------------------------------------------

def _gelu_ref(approximate: str):
    def ref(x):
        if approximate == "tanh":
            return 0.5 * x * (1 + np.tanh(C * (x + A * x ** 3)))
        return 0.5 * x * (1 + _erf(x / math.sqrt(2)))
    return ref


def _gelu_grad_ref(approximate: str):
    def ref(x, g):
        if approximate == "tanh":
            u = C * (x + A * x ** 3)
            d = 0.5 * (1 + np.tanh(u)) + 0.5 * x * C * (1 + 3 * A * x ** 2) / np.cosh(u) ** 2
        else:
            d = 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-x ** 2 / 2) / math.sqrt(2 * math.pi)
        return g * d
    return ref


def _one(lo: float = -4.0, hi: float = 4.0) -> st.SearchStrategy:
    return shapes().flatmap(lambda s: array(s, lo, hi).map(lambda a: (a,)))


def _two(lo: float = -4.0, hi: float = 4.0) -> st.SearchStrategy:
    return shapes().flatmap(lambda s: st.tuples(array(s, lo, hi), array(s)))


SPECS = [
    PrimSpec("layer_norm", lambda x, w, b, p: fused.layer_norm(x, w, b, eps=p.eps), _ln_ref,
             _ln_params().flatmap(_ln_args), diff_argnums=(0, 1, 2), rtol=1e-11, atol=1e-12),
    PrimSpec("layer_norm_grad", lambda x, w, g, p: fused.layer_norm_grad(x, w, g, eps=p.eps),
             _ln_grad_ref, _ln_params().flatmap(_ln_grad_args), diff_argnums=(0, 1, 2),
             rtol=1e-10, atol=1e-11),
    *[PrimSpec("layer_norm_grads",  # one spec per output (the harness checks one array)
               (lambda i: lambda x, w, g, p: fused.layer_norm_grads(x, w, g, eps=p.eps)[i])(i),
               (lambda i: lambda x, w, g, p: _ln_grads_ref(x, w, g, p)[i])(i),
               _ln_params().flatmap(_ln_grad_args), diff_argnums=(0, 1, 2), rtol=1e-10,
               atol=1e-11, label=label) for i, label in enumerate(("dx", "dweight", "dbias"))],
    PrimSpec("log_softmax_grad", lambda y, g, p: fused.log_softmax_grad(y, g, axis=p.axis),
             _log_softmax_grad_ref, _axis_params().flatmap(_log_softmax_grad_args),
             diff_argnums=(0, 1), rtol=1e-11, atol=1e-12),
    PrimSpec("softmax", lambda x, p: fused.softmax(x, axis=p.axis), _softmax_ref,
             _axis_params().flatmap(lambda p: st.tuples(array(p.shape, -4.0, 4.0), st.just(p)))),
    PrimSpec("log_softmax", lambda x, p: fused.log_softmax(x, axis=p.axis), _log_softmax_ref,
             _axis_params().flatmap(lambda p: st.tuples(array(p.shape, -4.0, 4.0), st.just(p)))),
]
for _approx in ("none", "tanh"):
    SPECS += [
        PrimSpec("gelu", (lambda a: lambda x: fused.gelu(x, approximate=a))(_approx),
                 _gelu_ref(_approx), _one(), label=_approx),
        PrimSpec("gelu_grad", (lambda a: lambda x, g: fused.gelu_grad(x, g, approximate=a))(
            _approx), _gelu_grad_ref(_approx), _two(), diff_argnums=(0, 1), rtol=1e-11,
            atol=1e-12, label=_approx),
    ]
SPECS.append(PrimSpec("relu", fused.relu, lambda x: np.maximum(x, 0.0),
                      shapes().flatmap(lambda s: st.tuples(array(s, away_from=(0.0,)))),
                      smooth=False))
