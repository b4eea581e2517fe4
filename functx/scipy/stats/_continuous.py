"""Location-scale families of ``functx.scipy.stats``: ``norm``, ``laplace``, ``cauchy``,
``logistic``, ``expon``, ``uniform`` and ``t``, with JAX's functions for each.

Every function standardises ``z = (x - loc) / scale`` and is differentiable in ``x``,
``loc``, ``scale`` (and ``df`` for ``t``). Tails are computed in logarithms or with the
complementary function, so ``logcdf``/``logsf`` stay finite far out (``norm.logcdf(-40)``).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.scipy import special as sp
from functx.scipy.stats._common import Family, float_args, standardize, where_nan

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_LOG_PI = math.log(math.pi)


# -- norm --------------------------------------------------------------------------------------

def _norm_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Log of the normal density ``N(loc, scale^2)`` at ``x``."""
    z, _, scale = standardize("norm.logpdf", x, loc, scale)
    return -0.5 * z * z - fnp.log(scale) - _LOG_SQRT_2PI


def _norm_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The normal density at ``x``."""
    return fnp.exp(_norm_logpdf(x, loc, scale))


def _norm_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``P(X <= x)`` for ``X ~ N(loc, scale^2)`` (``ndtr``)."""
    return sp.ndtr(standardize("norm.cdf", x, loc, scale)[0])


def _norm_logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log P(X <= x)`` (``log_ndtr``: finite far into the lower tail)."""
    return sp.log_ndtr(standardize("norm.logcdf", x, loc, scale)[0])


def _norm_sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``P(X > x)``, as ``ndtr(-z)`` (accurate in the upper tail)."""
    return sp.ndtr(-standardize("norm.sf", x, loc, scale)[0])


def _norm_logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log P(X > x)``, as ``log_ndtr(-z)``."""
    return sp.log_ndtr(-standardize("norm.logsf", x, loc, scale)[0])


def _norm_ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function: ``loc + scale * ndtri(q)``."""
    q, loc, scale = float_args("norm.ppf", q, loc, scale)
    return loc + scale * sp.ndtri(q)


def _norm_isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The inverse survival function: ``loc - scale * ndtri(q)`` (accurate for small q)."""
    q, loc, scale = float_args("norm.isf", q, loc, scale)
    return loc - scale * sp.ndtri(q)


norm = Family("norm", "The normal distribution N(loc, scale^2).",
              logpdf=_norm_logpdf, pdf=_norm_pdf, cdf=_norm_cdf, logcdf=_norm_logcdf,
              sf=_norm_sf, logsf=_norm_logsf, ppf=_norm_ppf, isf=_norm_isf)


# -- laplace -----------------------------------------------------------------------------------

def _laplace_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-|x - loc| / scale - log(2 scale)``."""
    z, _, scale = standardize("laplace.logpdf", x, loc, scale)
    return -fnp.abs(z) - fnp.log(2 * scale)


def _laplace_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The Laplace density."""
    return fnp.exp(_laplace_logpdf(x, loc, scale))


def _laplace_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(z) / 2`` below ``loc``, ``1 - exp(-z) / 2`` above (relative accuracy kept in
    the lower tail)."""
    z = standardize("laplace.cdf", x, loc, scale)[0]
    half_e = 0.5 * fnp.exp(-fnp.abs(z))
    return fnp.where(z < 0, half_e, 1 - half_e)


laplace = Family("laplace", "The Laplace (double exponential) distribution.",
                 logpdf=_laplace_logpdf, pdf=_laplace_pdf, cdf=_laplace_cdf)


# -- cauchy ------------------------------------------------------------------------------------

def _cauchy_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(pi scale (1 + z^2))``."""
    z, _, scale = standardize("cauchy.logpdf", x, loc, scale)
    return -_LOG_PI - fnp.log(scale) - fnp.log1p(z * z)


def _cauchy_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The Cauchy density."""
    return fnp.exp(_cauchy_logpdf(x, loc, scale))


def _cauchy_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1/2 + atan(z) / pi`` (accurate in the lower tail)."""
    z = standardize("cauchy.cdf", x, loc, scale)[0]
    return _cauchy_cdf_lower(z)


def _cauchy_cdf_lower(z: Any) -> Any:
    # For z < 0: atan(1/|z|)/pi = 1/2 + atan(z)/pi without cancellation.
    lower = fnp.arctan2(fnp.ones_like(z), -z) / math.pi
    return fnp.where(z < 0, lower, 0.5 + fnp.arctan(z) / math.pi)


def _cauchy_logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(cdf)``."""
    return fnp.log(_cauchy_cdf(x, loc, scale))


def _cauchy_sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``P(X > x) = cdf(-z)`` (accurate in the upper tail)."""
    return _cauchy_cdf_lower(-standardize("cauchy.sf", x, loc, scale)[0])


def _cauchy_logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(sf)``."""
    return fnp.log(_cauchy_sf(x, loc, scale))


def _cauchy_quantile(q: Any, loc: Any, scale: Any, sign: float) -> Any:
    # loc + sign * scale * tan(pi (q - 1/2)), with -sign*inf at q = 0, sign*inf at 1 and
    # NaN outside [0, 1] (tan(pi/2) is only 1.6e16 in floating point).
    with np.errstate(invalid="ignore"):
        val = loc + sign * scale * fnp.tan(math.pi * (q - 0.5))
    val = fnp.where(q == 0, -sign * np.inf, fnp.where(q == 1, sign * np.inf, val))
    return where_nan(fnp.isnan(q) | (q < 0) | (q > 1), val)


def _cauchy_ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale * tan(pi (q - 1/2))``."""
    return _cauchy_quantile(*float_args("cauchy.ppf", q, loc, scale), 1.0)


def _cauchy_isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale * tan(pi (1/2 - q))``."""
    return _cauchy_quantile(*float_args("cauchy.isf", q, loc, scale), -1.0)


cauchy = Family("cauchy", "The Cauchy distribution.",
                logpdf=_cauchy_logpdf, pdf=_cauchy_pdf, cdf=_cauchy_cdf,
                logcdf=_cauchy_logcdf, sf=_cauchy_sf, logsf=_cauchy_logsf, ppf=_cauchy_ppf,
                isf=_cauchy_isf)


# -- logistic ----------------------------------------------------------------------------------

def _logistic_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-|z| - 2 log1p(exp(-|z|)) - log(scale)`` (symmetric, no overflow)."""
    z, _, scale = standardize("logistic.logpdf", x, loc, scale)
    a = fnp.abs(z)
    return -a - 2 * fnp.log1p(fnp.exp(-a)) - fnp.log(scale)


def _logistic_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The logistic density."""
    return fnp.exp(_logistic_logpdf(x, loc, scale))


def _logistic_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``expit(z)``."""
    return sp.expit(standardize("logistic.cdf", x, loc, scale)[0])


def _logistic_sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``expit(-z)``."""
    return sp.expit(-standardize("logistic.sf", x, loc, scale)[0])


def _logistic_ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale * logit(q)``."""
    q, loc, scale = float_args("logistic.ppf", q, loc, scale)
    return loc + scale * sp.logit(q)


def _logistic_isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc - scale * logit(q)``."""
    q, loc, scale = float_args("logistic.isf", q, loc, scale)
    return loc - scale * sp.logit(q)


logistic = Family("logistic", "The logistic distribution.",
                  logpdf=_logistic_logpdf, pdf=_logistic_pdf, cdf=_logistic_cdf,
                  sf=_logistic_sf, ppf=_logistic_ppf, isf=_logistic_isf)


# -- expon -------------------------------------------------------------------------------------

def _expon_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-z - log(scale)`` on ``x >= loc``, ``-inf`` below."""
    z, _, scale = standardize("expon.logpdf", x, loc, scale)
    return fnp.where(z < 0, -np.inf, -z - fnp.log(scale))


def _expon_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The exponential density."""
    return fnp.exp(_expon_logpdf(x, loc, scale))


def _expon_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-expm1(-z)`` on ``x >= loc``, 0 below."""
    z = standardize("expon.cdf", x, loc, scale)[0]
    return fnp.where(z < 0, 0.0, -fnp.expm1(-z))


def _expon_logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(-expm1(-z))``, ``-inf`` below ``loc``."""
    z = standardize("expon.logcdf", x, loc, scale)[0]
    with np.errstate(divide="ignore"):  # log(0) = -inf at z = 0 is the answer
        return fnp.where(z < 0, -np.inf, fnp.log(-fnp.expm1(-fnp.maximum(z, 0.0))))


def _expon_sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(-z)`` on ``x >= loc``, 1 below."""
    return fnp.exp(_expon_logsf(x, loc, scale))


def _expon_logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-z`` on ``x >= loc``, 0 below."""
    z = standardize("expon.logsf", x, loc, scale)[0]
    return fnp.where(z < 0, 0.0, -z)


def _expon_ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc - scale * log1p(-q)``; NaN outside [0, 1]."""
    q, loc, scale = float_args("expon.ppf", q, loc, scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        val = loc - scale * fnp.log1p(-q)
    return fnp.where(fnp.isnan(q) | (q < 0) | (q > 1), np.nan, val)


expon = Family("expon", "The exponential distribution on [loc, inf).",
               logpdf=_expon_logpdf, pdf=_expon_pdf, cdf=_expon_cdf, logcdf=_expon_logcdf,
               sf=_expon_sf, logsf=_expon_logsf, ppf=_expon_ppf)


# -- uniform -----------------------------------------------------------------------------------

def _uniform_logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(scale)`` on ``[loc, loc + scale]``, ``-inf`` outside."""
    x, loc, scale = float_args("uniform.logpdf", x, loc, scale)
    val = fnp.where((x < loc) | (x > loc + scale), -np.inf, -fnp.log(scale))
    return where_nan(fnp.isnan(x), val)


def _uniform_pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The uniform density."""
    return fnp.exp(_uniform_logpdf(x, loc, scale))


def _uniform_cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(x - loc) / scale`` clipped to [0, 1]."""
    z = standardize("uniform.cdf", x, loc, scale)[0]
    return fnp.where(z < 0, 0.0, fnp.where(z > 1, 1.0, z))


def _uniform_ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + scale * q``; NaN outside [0, 1]."""
    q, loc, scale = float_args("uniform.ppf", q, loc, scale)
    return fnp.where(fnp.isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)


uniform = Family("uniform", "The uniform distribution on [loc, loc + scale].",
                 logpdf=_uniform_logpdf, pdf=_uniform_pdf, cdf=_uniform_cdf,
                 ppf=_uniform_ppf)


# -- t -----------------------------------------------------------------------------------------

def _t_logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Student's t log density with ``df`` degrees of freedom (differentiable in ``df``)."""
    z, _, scale, df = standardize("t.logpdf", x, loc, scale, df)
    half = 0.5 * df
    norm_term = (sp.gammaln(half) + 0.5 * fnp.log(df * math.pi) + fnp.log(scale)
                 - sp.gammaln(half + 0.5))
    return -(half + 0.5) * fnp.log1p(z * z / df) - norm_term


def _t_pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """Student's t density."""
    return fnp.exp(_t_logpdf(x, df, loc, scale))


t = Family("t", "Student's t distribution with df degrees of freedom.",
           logpdf=_t_logpdf, pdf=_t_pdf)
