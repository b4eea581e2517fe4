"""Specs of the control-flow primitives (``scan``, ``while``, ``cond`` in functx/lax/).

Each is specced through ``functx.lax`` on small bodies, with NumPy loops as references:
an RNN-like ``scan`` (forward and reverse, plain and with a checkpointed body, and as
``fori_loop`` with static bounds), a ``while`` whose trip count comes from an integer
counter (its VJP rule raises, so it is checked in forward mode only), and ``cond`` /
``switch`` with the index drawn (both branches are exercised).
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import functx.numpy as fnp
from functx import lax
from tests.specs import PrimSpec
from tests.strategies import array, int_array


def _rnn(h0, w, xs, reverse=False, checkpoint=None):
    def step(h, x):
        h = fnp.tanh(h @ w + x)
        return h, fnp.sin(h) * x
    h, ys = lax.scan(step, h0, xs, reverse=reverse, checkpoint=checkpoint)
    return fnp.concatenate([h, fnp.reshape(ys, (-1,))])


def _rnn_ref(h0, w, xs, reverse=False, checkpoint=None):
    h, ys = h0, [None] * len(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for t in order:
        h = np.tanh(h @ w + xs[t])
        ys[t] = np.sin(h) * xs[t]
    ys = np.stack(ys) if ys else np.zeros((0, h0.shape[0]))
    return np.concatenate([h, ys.reshape(-1)])


_rnn_args = st.tuples(st.integers(0, 4), st.integers(1, 3)).flatmap(
    lambda tn: st.tuples(array((tn[1],), -1.0, 1.0), array((tn[1], tn[1]), -1.0, 1.0),
                         array((tn[0], tn[1]), -1.0, 1.0)))


def _fori(x, w):
    return lax.fori_loop(0, 3, lambda i, y: fnp.sin(y * w) + fnp.astype(i, y.dtype) * 0.5, x)


def _fori_ref(x, w):
    for i in range(3):
        x = np.sin(x * w) + i * 0.5
    return x


def _while(n, x, w):
    def body(c):
        i, y = c
        return i + 1, fnp.cos(y) * w + y
    return lax.while_loop(lambda c: c[0] < n, body, (np.asarray(0, n.dtype), x))[1]


def _while_ref(n, x, w):
    for _ in range(int(n)):
        x = np.cos(x) * w + x
    return x


def _cond(p, x, y):
    return lax.cond(p, lambda a, b: fnp.sin(a) * b, lambda a, b: a - fnp.exp(b), x, y)


def _cond_ref(p, x, y):
    return np.sin(x) * y if p else x - np.exp(y)


def _switch(i, x):
    return lax.switch(i, [fnp.sin, lambda a: a * a, lambda a: fnp.tanh(a) + 1.0], x)


def _switch_ref(i, x):
    return [np.sin, lambda a: a * a, lambda a: np.tanh(a) + 1.0][min(max(int(i), 0), 2)](x)


_vec = st.integers(0, 4).map(lambda n: (n,))
_cond_args = _vec.flatmap(lambda s: st.tuples(st.booleans().map(np.bool_), array(s), array(s)))
_switch_args = _vec.flatmap(lambda s: st.tuples(int_array((), -1, 4), array(s)))
_while_args = _vec.flatmap(lambda s: st.tuples(int_array((), 0, 4), array(s, -1.0, 1.0),
                                               array(s, -0.5, 0.5)))

SPECS = [
    PrimSpec(name="scan", fn=_rnn, ref=_rnn_ref, args=_rnn_args, diff_argnums=(0, 1, 2),
             rtol=1e-10, atol=1e-12),
    PrimSpec(name="scan", fn=lambda h, w, x: _rnn(h, w, x, reverse=True),
             ref=lambda h, w, x: _rnn_ref(h, w, x, reverse=True), args=_rnn_args,
             diff_argnums=(0, 1, 2), rtol=1e-10, atol=1e-12, label="reverse"),
    PrimSpec(name="scan", fn=lambda h, w, x: _rnn(h, w, x, checkpoint="body"),
             ref=_rnn_ref, args=_rnn_args, diff_argnums=(0, 1, 2), rtol=1e-10, atol=1e-12,
             label="checkpointed_body"),
    PrimSpec(name="scan", fn=_fori, ref=_fori_ref,
             args=_vec.flatmap(lambda s: st.tuples(array(s), array(s))), diff_argnums=(0, 1),
             rtol=1e-10, atol=1e-12, label="fori_loop"),
    PrimSpec(name="while", fn=_while, ref=_while_ref, args=_while_args, diff_argnums=(1, 2),
             rtol=1e-10, atol=1e-12, reverse=False),
    PrimSpec(name="cond", fn=_cond, ref=_cond_ref, args=_cond_args, diff_argnums=(1, 2),
             rtol=1e-10, atol=1e-12),
    PrimSpec(name="cond", fn=_switch, ref=_switch_ref, args=_switch_args, diff_argnums=(1,),
             rtol=1e-10, atol=1e-12, label="switch"),
]
