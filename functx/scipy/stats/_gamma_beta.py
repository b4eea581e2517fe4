"""Gamma and beta families of ``functx.scipy.stats``: ``gamma``, ``chi2``, ``beta`` and
``dirichlet``.

Densities are differentiable in every argument. The CDFs go through the incomplete gamma
and beta functions: ``gamma``'s and ``chi2``'s are differentiable in every argument (in
``a``/``df`` once: the second derivative raises a GradError), ``beta``'s in ``x``, ``loc``
and ``scale`` only (the derivative in ``a`` or ``b`` raises a GradError, as in JAX).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import ShapeError
from functx.scipy import special as sp
from functx.scipy.stats._common import Family, float_args, standardize, where_nan


# -- gamma -------------------------------------------------------------------------------------

def _gamma_logpdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(a-1) log y - y - gammaln(a) - log(scale)`` for ``y = (x - loc) / scale >= 0``,
    ``-inf`` below."""
    y, _, scale, a = standardize("gamma.logpdf", x, loc, scale, a)
    below = y < 0  # (NaN propagates through the value)
    y = fnp.where(below, 1.0, y)
    val = sp.xlogy(a - 1, y) - y - sp.gammaln(a) - fnp.log(scale)
    return fnp.where(below, -np.inf, val)


def _gamma_pdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The gamma density."""
    return fnp.exp(_gamma_logpdf(x, a, loc, scale))


def _gamma_cdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammainc(a, max(y, 0))``."""
    y, _, _, a = standardize("gamma.cdf", x, loc, scale, a)
    return sp.gammainc(a, fnp.maximum(y, 0.0))


def _gamma_logcdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(cdf)``."""
    with np.errstate(divide="ignore"):
        return fnp.log(_gamma_cdf(x, a, loc, scale))


def _gamma_sf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaincc(a, max(y, 0))`` (accurate in the upper tail)."""
    y, _, _, a = standardize("gamma.sf", x, loc, scale, a)
    return sp.gammaincc(a, fnp.maximum(y, 0.0))


def _gamma_logsf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(sf)``."""
    with np.errstate(divide="ignore"):
        return fnp.log(_gamma_sf(x, a, loc, scale))


gamma = Family("gamma", "The gamma distribution with shape a (and loc, scale).",
               logpdf=_gamma_logpdf, pdf=_gamma_pdf, cdf=_gamma_cdf, logcdf=_gamma_logcdf,
               sf=_gamma_sf, logsf=_gamma_logsf)


# -- chi2 --------------------------------------------------------------------------------------

def _chi2_args(name: str, x: Any, df: Any, loc: Any, scale: Any) -> list:
    x, df, loc, scale = float_args(name, x, df, loc, scale)
    return [x, 0.5 * df, loc, 2 * scale]  # chi2(df) is gamma(df / 2, scale 2)


def _chi2_logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The chi-squared log density with ``df`` degrees of freedom."""
    return _gamma_logpdf(*_chi2_args("chi2.logpdf", x, df, loc, scale))


def _chi2_pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The chi-squared density."""
    return _gamma_pdf(*_chi2_args("chi2.pdf", x, df, loc, scale))


def _chi2_cdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammainc(df / 2, max(y, 0) / 2)``."""
    return _gamma_cdf(*_chi2_args("chi2.cdf", x, df, loc, scale))


def _chi2_logcdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(cdf)``."""
    return _gamma_logcdf(*_chi2_args("chi2.logcdf", x, df, loc, scale))


def _chi2_sf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaincc(df / 2, max(y, 0) / 2)``."""
    return _gamma_sf(*_chi2_args("chi2.sf", x, df, loc, scale))


def _chi2_logsf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(sf)``."""
    return _gamma_logsf(*_chi2_args("chi2.logsf", x, df, loc, scale))


chi2 = Family("chi2", "The chi-squared distribution with df degrees of freedom.",
              logpdf=_chi2_logpdf, pdf=_chi2_pdf, cdf=_chi2_cdf, logcdf=_chi2_logcdf,
              sf=_chi2_sf, logsf=_chi2_logsf)


# -- beta --------------------------------------------------------------------------------------

def _beta_logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(a-1) log y + (b-1) log(1-y) - betaln(a, b) - log(scale)`` on ``0 <= y <= 1``,
    ``-inf`` outside, NaN for ``a, b, scale <= 0``."""
    y, _, scale, a, b = standardize("beta.logpdf", x, loc, scale, a, b)
    out = (y < 0) | (y > 1)  # (NaN propagates through the value)
    ys = fnp.where(out, 0.5, y)
    val = sp.xlogy(a - 1, ys) + sp.xlog1py(b - 1, -ys) - sp.betaln(a, b) - fnp.log(scale)
    val = fnp.where(out, -np.inf, val)
    return where_nan((a <= 0) | (b <= 0) | (scale <= 0), val)


def _beta_pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The beta density."""
    return fnp.exp(_beta_logpdf(x, a, b, loc, scale))


def _beta_unit(name: str, x: Any, a: Any, b: Any, loc: Any, scale: Any) -> list:
    y, _, _, a, b = standardize(name, x, loc, scale, a, b)
    return [fnp.clip(y, 0.0, 1.0), a, b]


def _beta_cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``betainc(a, b, clip(y, 0, 1))``."""
    y, a, b = _beta_unit("beta.cdf", x, a, b, loc, scale)
    return sp.betainc(a, b, y)


def _beta_logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(cdf)``."""
    with np.errstate(divide="ignore"):
        return fnp.log(_beta_cdf(x, a, b, loc, scale))


def _beta_sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``betainc(b, a, 1 - clip(y, 0, 1))`` (accurate in the upper tail)."""
    y, a, b = _beta_unit("beta.sf", x, a, b, loc, scale)
    return sp.betainc(b, a, 1 - y)


def _beta_logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(sf)``."""
    with np.errstate(divide="ignore"):
        return fnp.log(_beta_sf(x, a, b, loc, scale))


beta = Family("beta", "The beta distribution with shapes a, b on [loc, loc + scale].",
              logpdf=_beta_logpdf, pdf=_beta_pdf, cdf=_beta_cdf, logcdf=_beta_logcdf,
              sf=_beta_sf, logsf=_beta_logsf)


# -- dirichlet ---------------------------------------------------------------------------------

def _dirichlet_logpdf(x: Any, alpha: Any) -> Any:
    """The Dirichlet log density (SciPy's and JAX's layout).

    Args:
        x: points of shape ``(K, ...)`` (the simplex coordinates first), or ``(K-1, ...)``
            (the last coordinate is then ``1 - sum``).
        alpha: the concentrations, shape ``(K,)``.

    Returns:
        The log density, shape ``x.shape[1:]``; ``-inf`` off the simplex (an entry not
        positive, or a sum more than 1e-6 from 1).

    Raises:
        ShapeError: ``alpha`` is not 1-d, or ``x``'s first axis is neither K nor K-1.
    """
    x, alpha = float_args("dirichlet.logpdf", x, alpha)
    if fnp.ndim(alpha) != 1:
        raise ShapeError(f"functx.scipy.stats.dirichlet.logpdf: alpha must be 1-d; got "
                         f"shape {tuple(alpha.shape)}.")
    k = alpha.shape[0]
    if fnp.ndim(x) == 0 or x.shape[0] not in (k, k - 1):
        raise ShapeError(f"functx.scipy.stats.dirichlet.logpdf: x must have K = {k} or K-1 "
                         f"entries along its first axis; got shape {tuple(x.shape)}.")
    if x.shape[0] != k:
        x = fnp.concatenate([x, 1 - fnp.sum(x, axis=0, keepdims=True)], axis=0)
    norm_term = fnp.sum(sp.gammaln(alpha)) - sp.gammaln(fnp.sum(alpha))
    a = fnp.reshape(alpha, (k,) + (1,) * (fnp.ndim(x) - 1))
    val = fnp.sum(sp.xlogy(a - 1, x), axis=0) - norm_term
    simplex = fnp.all(x > 0, axis=0) & (fnp.abs(fnp.sum(x, axis=0) - 1) < 1e-6)
    return fnp.where(simplex, val, -np.inf)


def _dirichlet_pdf(x: Any, alpha: Any) -> Any:
    """The Dirichlet density (see ``logpdf`` for the layout)."""
    return fnp.exp(_dirichlet_logpdf(x, alpha))


dirichlet = Family("dirichlet", "The Dirichlet distribution with concentrations alpha.",
                   logpdf=_dirichlet_logpdf, pdf=_dirichlet_pdf)
