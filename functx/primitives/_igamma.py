"""The derivative of the regularised lower incomplete gamma function ``P(a, x)`` with
respect to ``a``: the implementation of the ``igamma_grad_a`` primitive
(functx/primitives/special.py), JAX's algorithm (``lax.igamma_grad_a``) on arrays.

Two expansions, each differentiated term by term in ``a`` (Cephes's, as in JAX):

* ``x <= 1`` or ``x <= a``: the series ``P = x^a e^-x / Gamma(a+1) * sum_n x^n / (a+1)_n``;
* otherwise: the continued fraction of ``Q = 1 - P``, whose derivative is negated.

Iterations run on the entries that have not converged yet (at most 2000 steps), in the
operands' dtype (float32 stays float32, smaller floats compute in float32). Where ``x = 0``
the derivative is 0; where ``x < 0``, ``a <= 0`` or an operand is NaN it is NaN.

The functions ``lgamma`` and ``digamma`` of the array module are passed in (SciPy's for
NumPy, ``cupyx.scipy.special``'s for CuPy), so this module needs neither.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

_MAX_STEPS = 2000


def _series(xp: Any, a: Any, x: Any, eps: float) -> tuple[Any, Any]:
    """(sum, its derivative in a) of the series ``sum_n x^n / ((a+1)...(a+n))``."""
    r, c, ans = a.copy(), xp.ones_like(a), xp.ones_like(a)
    dc, dans = xp.zeros_like(a), xp.zeros_like(a)
    idx = xp.arange(a.shape[0])
    for _ in range(_MAX_STEPS):
        if idx.shape[0] == 0:
            break
        ri, ci, xi = r[idx] + 1, c[idx], x[idx]
        dci = dc[idx] * (xi / ri) - (ci * xi) / (ri * ri)
        dansi = dans[idx] + dci
        ci = ci * (xi / ri)
        r[idx], dc[idx], dans[idx], c[idx] = ri, dci, dansi, ci
        ans[idx] = ans[idx] + ci
        with np.errstate(invalid="ignore", divide="ignore"):
            idx = idx[xp.abs(dci / dansi) > eps]
    return ans, dans


def _continued_fraction(xp: Any, a: Any, x: Any, eps: float) -> tuple[Any, Any]:
    """(value, its derivative in a) of Cephes's continued fraction for ``Q(a, x)``
    (without the factor ``x^a e^-x / Gamma(a)``)."""
    y = 1 - a
    z = x + y + 1
    c = xp.zeros_like(x)
    pkm2, qkm2 = xp.ones_like(x), x.copy()
    pkm1, qkm1 = x + 1, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = (xp.zeros_like(x), xp.zeros_like(x), xp.zeros_like(x), -x)
    dans = (dpkm1 - ans * dqkm1) / qkm1
    big = 1 / eps
    idx = xp.arange(a.shape[0])
    state = [y, z, c, pkm2, qkm2, pkm1, qkm1, ans, dpkm2, dqkm2, dpkm1, dqkm1, dans]
    for _ in range(_MAX_STEPS):
        if idx.shape[0] == 0:
            break
        (yi, zi, ci, p2, q2, p1, q1, ansi, dp2, dq2, dp1, dq1, dansi) = (s[idx] for s in state)
        ci, yi, zi = ci + 1, yi + 1, zi + 2
        yc = yi * ci
        pk, qk = p1 * zi - p2 * yc, q1 * zi - q2 * yc
        nonzero = qk != 0
        with np.errstate(invalid="ignore", divide="ignore"):
            ansi = xp.where(nonzero, pk / xp.where(nonzero, qk, 1), ansi)
            dpk = dp1 * zi - p1 - dp2 * yc + p2 * ci
            dqk = dq1 * zi - q1 - dq2 * yc + q2 * ci
            new_dans = xp.where(nonzero, (dpk - ansi * dqk) / xp.where(nonzero, qk, 1), dansi)
            change = xp.where(nonzero, xp.abs(new_dans - dansi), 1)
        p2, p1, q2, q1 = p1, pk, q1, qk
        dp2, dp1, dq2, dq1 = dp1, dpk, dq1, dqk
        rescale = xp.abs(pk) > big
        p2, p1, q2, q1, dp2, dp1, dq2, dq1 = (xp.where(rescale, v * eps, v) for v in
                                              (p2, p1, q2, q1, dp2, dp1, dq2, dq1))
        for s, v in zip(state, (yi, zi, ci, p2, q2, p1, q1, ansi, dp2, dq2, dp1, dq1,
                                new_dans)):
            s[idx] = v
        idx = idx[change > eps]
    return state[7], state[12]


def igamma_grad_a_values(xp: Any, a: Any, x: Any, *, lgamma: Callable,
                         digamma: Callable) -> Any:
    """``d/da P(a, x)`` for arrays ``a``, ``x`` of one real float dtype (broadcast).

    Args:
        xp: the array module.
        a, x: the operands.
        lgamma, digamma: ``log|Gamma|`` and ``digamma`` of ``xp``'s arrays.

    Returns:
        The derivative, shaped like the broadcast operands, in their dtype.
    """
    dtype = next((np.dtype(v.dtype) for v in (a, x) if hasattr(v, "dtype")),
                 np.dtype(np.float64))
    cdt = dtype if dtype in (np.float32, np.float64) else np.dtype(np.float32)
    a, x = xp.broadcast_arrays(xp.asarray(a, cdt), xp.asarray(x, cdt))
    shape = a.shape
    a, x = a.reshape(-1).copy(), x.reshape(-1).copy()
    eps = float(np.finfo(cdt).eps)
    nan = xp.isnan(a) | xp.isnan(x)
    bad = (x < 0) | (a <= 0) | nan
    zero = x == 0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        log_ax = a * xp.log(x) - x - lgamma(a)
        ok = ~(bad | zero | (log_ax < -float(np.log(np.finfo(cdt).max))))
        ax = xp.exp(log_ax)
        use_cf = (x > 1) & (x > a)
        out = xp.zeros_like(a)
        s = xp.nonzero(ok & ~use_cf)[0]
        if s.shape[0]:
            av, xv = a[s], x[s]
            ans, dans = _series(xp, av, xv, eps)
            out[s] = ax[s] * (ans * (xp.log(xv) - digamma(av + 1)) + dans) / av
        f = xp.nonzero(ok & use_cf)[0]
        if f.shape[0]:
            av, xv = a[f], x[f]
            ans, dans = _continued_fraction(xp, av, xv, eps)
            out[f] = -(ax[f] * (ans * (xp.log(xv) - digamma(av)) + dans))
    out = xp.where(bad, xp.asarray(np.nan, cdt), out)
    return out.reshape(shape).astype(dtype, copy=False)
