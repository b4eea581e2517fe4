"""Specs of the fused attention primitives (functx/primitives/attention.py):
``dot_product_attention`` and ``dot_product_attention_grad`` (which of its outputs
(dq, dk, dv, dbias) a spec returns is drawn with the parameters).

The drawn parameters (a ``SimpleNamespace`` passed last) cover every option: batch shapes of
rank 0 to 2, scale, causal masking (also with L != S), soft-capping, and a bias that is
absent (passed as None), 0-d, or of a shape broadcasting to the logits (a suffix of
``batch + (L, S)`` with some sides 1). The specs labelled "masked" have a bias with
``-inf`` entries (a boolean mask as functx.nn passes it), so that some rows may be fully
masked (zero output); they are first-order only (see below).

References are NumPy written from the textbook formulas with ``einsum``, independently of
the implementations: the masked, safe softmax of the logits times ``v``, and for the
gradient ``dv = p^T ct``, ``ds = p (ct v^T - rowsum(p ct v^T))``, ``dbias = ds`` summed to
the bias's shape, ``dq = scale ds' k``, ``dk = scale ds'^T q`` with ``ds' = ds (1 - tanh^2)``
under a soft-cap.
"""
from __future__ import annotations

from types import SimpleNamespace as P

import numpy as np
from hypothesis import strategies as st

from functx.primitives import attention
from tests.specs import PrimSpec
from tests.strategies import array, shapes


@st.composite
def _params(draw, masked: bool, grad: bool = False) -> P:
    out = draw(st.integers(0, 3)) if grad else 0  # which output of the gradient to check
    need_bias = out == 3
    batch = draw(shapes(max_rank=2, min_side=1, max_side=2))
    L, S = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    scores = batch + (L, S)
    kind = "masked" if masked else draw(st.sampled_from(["bias"] if need_bias
                                                         else ["none", "bias"]))
    n = draw(st.integers(0, len(scores)))
    bshape = tuple(d if draw(st.booleans()) else 1 for d in scores[len(scores) - n:])
    return P(batch=batch, L=L, S=S, E=draw(st.integers(1, 3)), Ev=draw(st.integers(1, 3)),
             bias=kind, bshape=() if kind == "none" else bshape,
             mask_seed=draw(st.integers(0, 2**32 - 1)),
             scale=draw(st.sampled_from([0.4, 1.0])), causal=draw(st.booleans()),
             softcap=draw(st.sampled_from([None, None, 1.5])),
             bias_grad=need_bias or draw(st.booleans()), out=out)


def _bias(p: P) -> st.SearchStrategy:
    def fix(b: np.ndarray) -> np.ndarray:
        if p.bias == "masked":
            b = np.where(np.random.default_rng(p.mask_seed).random(b.shape) < 0.3, -np.inf, b)
        return b
    return array(p.bshape).map(fix)


def _args(with_ct: bool):
    def make(p: P) -> st.SearchStrategy:
        b, L, S = p.batch, p.L, p.S
        parts = [array(b + (L, p.E)), array(b + (S, p.E)), array(b + (S, p.Ev)), _bias(p)]
        if with_ct:
            parts.append(array(b + (L, p.Ev)))
        return st.tuples(*parts, st.just(p))
    return make


def _opts(p: P) -> dict:
    return {"scale": p.scale, "causal": p.causal, "softcap": p.softcap}


def _fn(q, k, v, b, p):
    return attention.dot_product_attention(q, k, v, None if p.bias == "none" else b,
                                           **_opts(p))


def _grad_fn(q, k, v, b, ct, p):
    return attention.dot_product_attention_grad(
        q, k, v, None if p.bias == "none" else b, ct, bias_grad=p.bias_grad,
        **_opts(p))[p.out]


# -- references ----------------------------------------------------------------------------------

def _ref_probs(q, k, b, p) -> tuple[np.ndarray, np.ndarray]:
    """The probabilities and the derivative of the logits with respect to ``q k^T``."""
    x = p.scale * np.einsum("...le,...se->...ls", q, k)
    dx = np.full(x.shape, p.scale)
    if p.softcap is not None:
        x = p.softcap * np.tanh(x / p.softcap)
        dx = p.scale * (1 - (x / p.softcap) ** 2)
    s = x + (0.0 if p.bias == "none" else b)
    if p.causal:
        s = np.where(np.arange(p.S) <= np.arange(p.L)[:, None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    z = e.sum(axis=-1, keepdims=True)
    return np.divide(e, z, out=np.zeros_like(e), where=z > 0), dx


def _ref(q, k, v, b, p):
    return np.einsum("...ls,...sv->...lv", _ref_probs(q, k, b, p)[0], v)


def _ref_grads(q, k, v, b, ct, p) -> list[np.ndarray]:
    prob, dx = _ref_probs(q, k, b, p)
    dv = np.einsum("...ls,...lv->...sv", prob, ct)
    dp = np.einsum("...lv,...sv->...ls", ct, v)
    ds = prob * (dp - (prob * dp).sum(axis=-1, keepdims=True))
    bshape = np.shape(b)
    lead = ds.ndim - len(bshape)
    db = ds.sum(axis=tuple(range(lead))) if lead else ds
    db = db.sum(axis=tuple(i for i, d in enumerate(bshape) if d == 1), keepdims=True)
    ds = ds * dx
    return [np.einsum("...ls,...se->...le", ds, k), np.einsum("...ls,...le->...se", ds, q),
            dv, db.reshape(bshape)]


def _ref_grad(q, k, v, b, ct, p):
    return _ref_grads(q, k, v, b, ct, p)[p.out]


# A -inf bias entry is a kink of no derivative's concern (the probability there is 0 in
# any neighbourhood), but the second-order checks of check_grads use the inputs themselves
# as tangents, and an infinite tangent gives inf * 0: the masked specs are first order only.
SPECS: list[PrimSpec] = []
for _masked in (False, True):
    _tag = "masked" if _masked else ""
    SPECS.append(PrimSpec("dot_product_attention", _fn, _ref,
                          _params(_masked).flatmap(_args(False)), diff_argnums=(0, 1, 2, 3),
                          rtol=1e-11, atol=1e-12, smooth=not _masked, label=_tag))
    SPECS.append(PrimSpec("dot_product_attention_grad", _grad_fn, _ref_grad,
                          _params(_masked, grad=True).flatmap(_args(True)),
                          diff_argnums=(0, 1, 2, 3, 4), rtol=1e-11, atol=1e-12,
                          smooth=not _masked, label=_tag))
