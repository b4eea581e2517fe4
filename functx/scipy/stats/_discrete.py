"""Discrete distributions of ``functx.scipy.stats``: ``bernoulli``, ``binom``, ``poisson``.

The probability mass functions are differentiable in their parameters (``p``, ``n`` and
``p``, ``mu``); ``k`` is a count (any dtype; a non-integer or out-of-support ``k`` has
probability 0, as in SciPy). ``poisson.cdf`` is ``gammaincc(floor(k) + 1, mu)``,
differentiable in ``mu``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.scipy import special as sp
from functx.scipy.stats._common import Family, float_args, where_nan


def _is_int(k: Any) -> Any:
    return fnp.round(k) == k


# -- bernoulli ---------------------------------------------------------------------------------

def _bernoulli_logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``log p`` at ``k = loc + 1``, ``log(1 - p)`` at ``k = loc``, ``-inf`` elsewhere."""
    k, p, loc = float_args("bernoulli.logpmf", k, p, loc)
    x = k - loc
    val = sp.xlogy(x, p) + sp.xlog1py(1 - x, -p)
    return fnp.where((x == 0) | (x == 1), val, -np.inf)


def _bernoulli_pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """The Bernoulli probability mass."""
    return fnp.exp(_bernoulli_logpmf(k, p, loc))


def _bernoulli_cdf(k: Any, p: Any) -> Any:
    """0 below 0, ``1 - p`` on [0, 1), 1 from 1; NaN for ``p`` outside [0, 1]."""
    k, p = float_args("bernoulli.cdf", k, p)
    val = fnp.where(k < 0, 0.0, fnp.where(k < 1, 1 - p, 1.0))
    return where_nan(fnp.isnan(k) | fnp.isnan(p) | (p < 0) | (p > 1), val)


def _bernoulli_ppf(q: Any, p: Any) -> Any:
    """0 where ``q <= 1 - p``, else 1; NaN for ``q`` or ``p`` outside [0, 1]."""
    q, p = float_args("bernoulli.ppf", q, p)
    val = fnp.where(q <= 1 - p, 0.0, 1.0).astype(q.dtype)
    bad = fnp.isnan(q) | fnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return where_nan(bad, fnp.broadcast_to(val, fnp.broadcast_shapes(q.shape, p.shape)))


bernoulli = Family("bernoulli", "The Bernoulli distribution with success probability p.",
                   logpmf=_bernoulli_logpmf, pmf=_bernoulli_pmf, cdf=_bernoulli_cdf,
                   ppf=_bernoulli_ppf)


# -- binom -------------------------------------------------------------------------------------

def _binom_logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``log C(n, y) + y log p + (n - y) log(1 - p)`` for ``y = k - loc`` in
    ``{0, ..., n}``, ``-inf`` elsewhere (differentiable in ``n`` and ``p``)."""
    k, n, p, loc = float_args("binom.logpmf", k, n, p, loc)
    y = k - loc
    comb = sp.gammaln(n + 1) - (sp.gammaln(y + 1) + sp.gammaln(n - y + 1))
    linear = sp.xlogy(y, p) + sp.xlog1py(n - y, -p)
    val = comb + linear
    val = fnp.where(((y == 0) & (n == 0)) | (linear == 0), 0.0, val)
    return fnp.where((y >= 0) & (y < n + 1) & _is_int(y), val, -np.inf)


def _binom_pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """The binomial probability mass."""
    return fnp.exp(_binom_logpmf(k, n, p, loc))


binom = Family("binom", "The binomial distribution of n trials with success probability p.",
               logpmf=_binom_logpmf, pmf=_binom_pmf)


# -- poisson -----------------------------------------------------------------------------------

def _poisson_logpmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``y log(mu) - gammaln(y + 1) - mu`` for integer ``y = k - loc >= 0``, ``-inf``
    elsewhere."""
    k, mu, loc = float_args("poisson.logpmf", k, mu, loc)
    x = k - loc
    val = sp.xlogy(x, mu) - sp.gammaln(x + 1) - mu
    return fnp.where((x < 0) | ~_is_int(k), -np.inf, val)


def _poisson_pmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """The Poisson probability mass."""
    return fnp.exp(_poisson_logpmf(k, mu, loc))


def _poisson_cdf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``gammaincc(floor(k - loc) + 1, mu)``, 0 below ``loc``."""
    k, mu, loc = float_args("poisson.cdf", k, mu, loc)
    x = k - loc
    p = sp.gammaincc(fnp.floor(fnp.maximum(x, 0.0)) + 1, mu)
    return fnp.where(x < 0, 0.0, p)


def _poisson_entropy(mu: Any, loc: Any = 0) -> Any:
    """The entropy ``-sum_k pmf(k) log pmf(k)`` (in nats): the sum itself for ``mu < 100``
    (k up to 250, as JAX), the asymptotic series
    ``log(2 pi e mu) / 2 - 1 / (12 mu) - 1 / (24 mu^2) - 19 / (360 mu^3)`` above (JAX
    stops after the second term, 2e-6 off at ``mu = 100``; this is within 1e-9); 0 at
    ``mu = 0``."""
    mu, loc = float_args("poisson.entropy", mu, loc)
    shape = fnp.broadcast_shapes(mu.shape, loc.shape)
    flat = fnp.reshape(mu, (-1,))
    small = flat < 100
    k = fnp.asarray(np.arange(250.0)[:, None], dtype=mu.dtype)
    safe = fnp.where(small, flat, 1.0)
    upper = fnp.ceil(safe + 10 * fnp.sqrt(safe) + 20)
    probs = fnp.where(k < upper, _poisson_pmf(k, safe), 0.0)
    summed = fnp.sum(sp.entr(probs), axis=0)
    big = fnp.where(small, 100.0, flat)
    inv = 1.0 / big
    asymptotic = (0.5 * fnp.log(2 * math.pi * math.e * big)
                  - inv * (1.0 / 12 + inv * (1.0 / 24 + inv * (19.0 / 360))))
    out = fnp.where(flat == 0, 0.0, fnp.where(small, summed, asymptotic))
    return fnp.broadcast_to(fnp.reshape(out, mu.shape), shape)


poisson = Family("poisson", "The Poisson distribution with mean mu.",
                 logpmf=_poisson_logpmf, pmf=_poisson_pmf, cdf=_poisson_cdf,
                 entropy=_poisson_entropy)
