"""Specs of the CTC family: ctc_loss and ctc_posteriors (functx/primitives/ctc.py).

Parameters are drawn first (T, N, C, S, blank, zero_infinity, the label sequences and both
lengths), then the log-probabilities. Without ``zero_infinity`` every row admits an
alignment (``T_n >= S_n`` plus repeated neighbours), so the loss is finite and finite
differences apply; with it, rows without one are drawn too (their loss is 0, constant).
The static parameters travel as a ``SimpleNamespace`` last argument.

The reference is independent of the implementation's recursions: it enumerates every path
of ``C ** T_n`` class sequences, collapses each (merge repeats, drop blanks), and sums the
probabilities of those that spell the row's target.
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace as P

import numpy as np
from hypothesis import strategies as st

from functx.primitives import ctc
from tests.specs import PrimSpec
from tests.strategies import array


def needed_steps(labels: np.ndarray) -> int:
    """The fewest time steps that can emit ``labels``: one each, one more per repeat."""
    return len(labels) + int(np.sum(labels[1:] == labels[:-1])) if len(labels) else 0


@st.composite
def _ctc_params(draw, max_t: int = 5, max_n: int = 3, max_s: int = 3):
    t_len, n = draw(st.integers(1, max_t)), draw(st.integers(1, max_n))
    c = draw(st.integers(2, 3))
    s = draw(st.integers(0, max_s))
    blank = draw(st.integers(0, c - 1))
    zero_infinity = draw(st.booleans())
    labels = [k for k in range(c) if k != blank]
    targets = np.array([[draw(st.sampled_from(labels)) for _ in range(s)] for _ in range(n)],
                       dtype=np.int64).reshape(n, s)
    input_lengths, target_lengths = [], []
    for row in targets:
        tl = draw(st.integers(0, s))
        if zero_infinity:
            il = draw(st.integers(0, t_len))
        else:
            while needed_steps(row[:tl]) > t_len:
                tl -= 1
            il = draw(st.integers(needed_steps(row[:tl]), t_len))
        input_lengths.append(il)
        target_lengths.append(tl)
    return P(t=t_len, n=n, c=c, blank=blank, zero_infinity=zero_infinity, targets=targets,
             input_lengths=np.array(input_lengths, np.int64),
             target_lengths=np.array(target_lengths, np.int64))


def _arrays(p: P) -> st.SearchStrategy:
    return st.tuples(array((p.t, p.n, p.c)), st.just(p.targets), st.just(p.input_lengths),
                     st.just(p.target_lengths), st.just(p))


def _collapse(path: tuple, blank: int) -> tuple:
    out = []
    prev = None
    for k in path:
        if k != prev and k != blank:
            out.append(k)
        prev = k
    return tuple(out)


def _brute_force(lp, targets, input_lengths, target_lengths, p: P) -> tuple:
    """(nll [N], posteriors [T, N, C]) by enumerating every path of every row."""
    t_len, n, c = lp.shape
    nll = np.empty(n)
    post = np.zeros((t_len, n, c))
    for b in range(n):
        il, tl = int(input_lengths[b]), int(target_lengths[b])
        want = tuple(int(k) for k in targets[b, :tl])
        paths = [pa for pa in itertools.product(range(c), repeat=il)
                 if _collapse(pa, p.blank) == want]
        if not paths:
            nll[b] = 0.0 if p.zero_infinity else np.inf
            if not p.zero_infinity:
                post[:il, b] = np.nan
            continue
        scores = np.array([sum(lp[t, b, k] for t, k in enumerate(pa)) for pa in paths])
        top = scores.max()
        log_z = top + np.log(np.sum(np.exp(scores - top)))
        nll[b] = -log_z
        for pa, sc in zip(paths, scores):
            for t, k in enumerate(pa):
                post[t, b, k] += np.exp(sc - log_z)
    return nll, post


def _loss(lp, targets, il, tl, p: P):
    return ctc.ctc_loss(lp, targets, il, tl, blank=p.blank, zero_infinity=p.zero_infinity)


def _posteriors(lp, targets, il, tl, p: P):
    return ctc.ctc_posteriors(lp, targets, il, tl, blank=p.blank,
                              zero_infinity=p.zero_infinity)


SPECS = [
    PrimSpec("ctc_loss", _loss, lambda *a: _brute_force(*a)[0],
             _ctc_params().flatmap(_arrays), diff_argnums=(0,), rtol=1e-10, atol=1e-10),
    PrimSpec("ctc_posteriors", _posteriors, lambda *a: _brute_force(*a)[1],
             _ctc_params(max_t=4, max_n=2).flatmap(_arrays), diff_argnums=(0,), rtol=1e-10,
             atol=1e-10),
]
