"""``multivariate_normal`` and ``truncnorm`` of ``functx.scipy.stats``.

``multivariate_normal.logpdf`` factors the covariance by Cholesky and solves the
triangular system, as JAX does. functx has no linear-algebra primitives yet (issue 15,
items 1-2, are in progress), so both steps are written here with functx operations, one
column (one row) per step, which is exact and differentiable but takes ``O(n)`` operations
of ``O(n^2)`` each: meant for the small ``n`` of most uses. The covariance is symmetrised
first, so its gradient is symmetric, as JAX's (Cholesky's JVP symmetrises its tangent).
TODO(issue 15): call ``functx.scipy.linalg.cholesky``/``solve_triangular`` once they exist.

``truncnorm`` follows JAX's formulas: the log Gaussian mass between two points computed in
the tail that keeps it accurate, and ``log(exp(u) - exp(v))`` through ``logsumexp``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import ArgumentError, ShapeError
from functx.scipy import special as sp
from functx.scipy.stats._common import Family, float_args, where_nan
from functx.scipy.stats._continuous import norm

_LOG_2PI = math.log(2 * math.pi)


# -- multivariate_normal -----------------------------------------------------------------------

def _cholesky(a: Any) -> Any:
    """The lower Cholesky factor of the (symmetrised) matrices ``a[..., n, n]``."""
    n = a.shape[-1]
    a = 0.5 * (a + fnp.swapaxes(a, -1, -2))
    rows = np.arange(n)
    cols: list = []
    for j in range(n):
        v = a[..., :, j]
        if cols:
            m = fnp.stack(cols, axis=-1)  # [..., n, j]: the columns so far
            v = v - fnp.sum(m * m[..., j:j + 1, :], axis=-1)
        d = fnp.sqrt(v[..., j:j + 1])
        cols.append(fnp.where(rows >= j, v / d, 0.0))
    return fnp.stack(cols, axis=-1)


def _solve_lower(l: Any, y: Any) -> Any:
    """``z`` with ``l @ z = y`` for lower-triangular ``l[..., n, n]`` and ``y[..., n]``."""
    n = l.shape[-1]
    zs: list = []
    for i in range(n):
        r = y[..., i]
        if zs:
            r = r - fnp.sum(l[..., i, :i] * fnp.stack(zs, axis=-1), axis=-1)
        zs.append(r / l[..., i, i])
    return fnp.stack(zs, axis=-1)


def _mvn_logpdf(x: Any, mean: Any, cov: Any, allow_singular: None = None) -> Any:
    """The log density of ``N(mean, cov)`` at ``x`` (JAX's shapes).

    Args:
        x: points, shape ``(..., n)`` (or scalars where ``mean`` is a scalar).
        mean: the mean, shape ``(..., n)`` or ``()``.
        cov: the covariance, shape ``(..., n, n)``, or a scalar (``cov * I``).
        allow_singular: must be None (as in JAX).

    Returns:
        The log density, shape the broadcast of the leading axes.

    Raises:
        ArgumentError: ``allow_singular`` is given.
        ShapeError: ``cov`` is not ``(..., n, n)`` for ``mean`` of length ``n``.

    Example:
        >>> stats.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), np.eye(2))
    """
    if allow_singular is not None:
        raise ArgumentError("functx.scipy.stats.multivariate_normal.logpdf: allow_singular "
                            "is not supported (as in JAX); leave it None.")
    x, mean, cov = float_args("multivariate_normal.logpdf", x, mean, cov)
    if fnp.ndim(mean) == 0:
        return -0.5 * (x - mean) ** 2 / cov - 0.5 * (_LOG_2PI + fnp.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if fnp.ndim(cov) == 0:
        return (-0.5 * fnp.sum(y * y, axis=-1) / cov
                - 0.5 * n * (_LOG_2PI + fnp.log(cov)))
    if fnp.ndim(cov) < 2 or tuple(cov.shape[-2:]) != (n, n):
        raise ShapeError(f"functx.scipy.stats.multivariate_normal.logpdf: cov must have "
                         f"shape (..., {n}, {n}) for a mean of length {n}; got "
                         f"{tuple(cov.shape)}.")
    l = _cholesky(cov)
    z = _solve_lower(l, y)
    log_diag = fnp.log(fnp.diagonal(l, axis1=-2, axis2=-1))
    return -0.5 * fnp.sum(z * z, axis=-1) - 0.5 * n * _LOG_2PI - fnp.sum(log_diag, axis=-1)


def _mvn_pdf(x: Any, mean: Any, cov: Any) -> Any:
    """The multivariate normal density (see ``logpdf``)."""
    return fnp.exp(_mvn_logpdf(x, mean, cov))


multivariate_normal = Family(
    "multivariate_normal", "The multivariate normal distribution N(mean, cov).",
    logpdf=_mvn_logpdf, pdf=_mvn_pdf)


# -- truncnorm ---------------------------------------------------------------------------------

def _log_diff(u: Any, v: Any) -> Any:
    """``log(exp(u) - exp(v))`` for ``u >= v``, stably."""
    return sp.logsumexp(fnp.stack([u, v]), b=fnp.stack([fnp.ones_like(u), -fnp.ones_like(v)]),
                        axis=0)


def _log_gauss_mass(a: Any, b: Any) -> Any:
    """``log(ndtr(b) - ndtr(a))``, in whichever tail keeps it accurate."""
    a, b = fnp.broadcast_arrays(a, b)
    left, right = b <= 0, a > 0
    central = ~(left | right)
    a_tail = fnp.where(right, -b, a)
    b_tail = fnp.where(right, -a, b)
    with np.errstate(invalid="ignore", divide="ignore"):  # the unused branches
        tail = _log_diff(sp.log_ndtr(b_tail), sp.log_ndtr(a_tail))
        mid = fnp.log1p(-sp.ndtr(a) - sp.ndtr(-b))
    return fnp.where(central, mid, tail)


def _truncnorm_logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The log density of the normal ``N(loc, scale^2)`` truncated to the standardised
    interval ``[a, b]``: ``-inf`` outside it, NaN where ``a >= b``."""
    x, a, b, loc, scale = float_args("truncnorm.logpdf", x, a, b, loc, scale)
    val = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    val = fnp.where((z < a) | (z > b), -np.inf, val)
    return where_nan(a >= b, val)


def _truncnorm_pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The truncated normal density."""
    return fnp.exp(_truncnorm_logpdf(x, a, b, loc, scale))


def _truncnorm_logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log P(X <= x)`` (0 from ``b`` on, ``-inf`` up to ``a``, NaN where ``a >= b``)."""
    x, a, b, loc, scale = float_args("truncnorm.logcdf", x, a, b, loc, scale)
    x, a, b = fnp.broadcast_arrays((x - loc) / scale, a, b)
    mass = _log_gauss_mass(a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        logcdf = _log_gauss_mass(a, x) - mass
        logsf = _log_gauss_mass(x, b) - mass
        from_sf = fnp.log1p(-fnp.exp(logsf))
    out = fnp.where(x >= b, 0.0, fnp.where(x <= a, -np.inf,
                                           fnp.where(logcdf > -0.1, from_sf, logcdf)))
    return where_nan(a >= b, out)


def _truncnorm_cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``P(X <= x)``."""
    return fnp.exp(_truncnorm_logcdf(x, a, b, loc, scale))


def _truncnorm_logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log P(X > x)``: the ``logcdf`` of the mirrored distribution."""
    x, a, b, loc, scale = float_args("truncnorm.logsf", x, a, b, loc, scale)
    return _truncnorm_logcdf(-x, -b, -a, -loc, scale)


def _truncnorm_sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``P(X > x)``."""
    return fnp.exp(_truncnorm_logsf(x, a, b, loc, scale))


truncnorm = Family(
    "truncnorm", "The normal N(loc, scale^2) truncated to [loc + a scale, loc + b scale].",
    logpdf=_truncnorm_logpdf, pdf=_truncnorm_pdf, cdf=_truncnorm_cdf,
    logcdf=_truncnorm_logcdf, sf=_truncnorm_sf, logsf=_truncnorm_logsf)
