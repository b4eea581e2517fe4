"""Specs of the rematerialisation primitives (``checkpoint`` in functx/transforms/checkpoint.py,
``name`` in functx/primitives/checkpoint.py).

``checkpoint`` is specced through :func:`functx.checkpoint` of small functions, under the
default policy (everything recomputed) and under policies that keep some values (so the
VJP rule mixes saved residuals with recomputation); ``name`` through ``checkpoint_name``.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import functx
import functx.numpy as fnp
from functx import checkpoint_policies as cp
from tests.specs import PrimSpec
from tests.strategies import array, broadcast_pair, shapes


def _body(x, y):
    h = functx.checkpoint_name(fnp.sin(x) * y, "h")
    return fnp.tanh(h) + x * h


def _body_ref(x, y):
    h = np.sin(x) * y
    return np.tanh(h) + x * h


def _mlp(w, x):
    h = fnp.tanh(x @ w)
    return (h * h) @ w.T + x


def _mlp_ref(w, x):
    h = np.tanh(x @ w)
    return (h * h) @ w.T + x


_pairs = broadcast_pair().flatmap(lambda ab: st.tuples(array(ab[0]), array(ab[1])))
_matmul = st.tuples(st.integers(0, 3), st.integers(1, 4)).flatmap(
    lambda nk: st.tuples(array((nk[1], nk[1]), -1.0, 1.0), array((nk[0], nk[1]), -1.0, 1.0)))

SPECS = [
    PrimSpec(name="checkpoint", fn=functx.checkpoint(_body), ref=_body_ref, args=_pairs,
             diff_argnums=(0, 1), label="nothing_saveable"),
    PrimSpec(name="checkpoint", fn=functx.checkpoint(_body, policy=cp.everything_saveable),
             ref=_body_ref, args=_pairs, diff_argnums=(0, 1), label="everything_saveable"),
    PrimSpec(name="checkpoint",
             fn=functx.checkpoint(_body, policy=cp.save_only_these_names("h")),
             ref=_body_ref, args=_pairs, diff_argnums=(0, 1), label="save_only_these_names"),
    PrimSpec(name="checkpoint", fn=functx.checkpoint(_mlp, policy=cp.dots_saveable),
             ref=_mlp_ref, args=_matmul, diff_argnums=(0, 1), label="dots_saveable"),
    PrimSpec(name="name", fn=lambda x: functx.checkpoint_name(x, "a"), ref=np.asarray,
             args=shapes().flatmap(lambda s: st.tuples(array(s)))),
]
