"""``jax.scipy.stats``'s distributions over functx operations.

Each distribution is a namespace of functions with JAX's names and signatures
(``stats.norm.logpdf(x, loc=0, scale=1)``...):

===================== ===================================================================
``norm``              logpdf, pdf, cdf, logcdf, sf, logsf, ppf, isf
``multivariate_normal`` logpdf, pdf
``beta``              logpdf, pdf, cdf, logcdf, sf, logsf
``gamma``             logpdf, pdf, cdf, logcdf, sf, logsf
``dirichlet``         logpdf, pdf
``bernoulli``         logpmf, pmf, cdf, ppf
``binom``             logpmf, pmf
``poisson``           logpmf, pmf, cdf, entropy
``t``                 logpdf, pdf
``laplace``           logpdf, pdf, cdf
``cauchy``            logpdf, pdf, cdf, logcdf, sf, logsf, ppf, isf
``logistic``          logpdf, pdf, cdf, sf, ppf, isf
``expon``             logpdf, pdf, cdf, logcdf, sf, logsf, ppf
``uniform``           logpdf, pdf, cdf, ppf
``chi2``              logpdf, pdf, cdf, logcdf, sf, logsf
``truncnorm``         logpdf, pdf, cdf, logcdf, sf, logsf
===================== ===================================================================

Arguments broadcast and promote to one real float dtype (float32 stays float32); every
function works under every transform and is differentiable in its parameters, except the
shape parameters ``a``, ``b`` of the ``beta`` CDFs (as in JAX: a GradError says so).

Example:
    >>> from functx.scipy import stats
    >>> functx.grad(lambda s: stats.norm.logpdf(1.0, 0.0, s))(2.0)
"""
from __future__ import annotations

from functx.scipy.stats._continuous import cauchy, expon, laplace, logistic, norm, t, uniform
from functx.scipy.stats._discrete import bernoulli, binom, poisson
from functx.scipy.stats._gamma_beta import beta, chi2, dirichlet, gamma
from functx.scipy.stats._multivariate import multivariate_normal, truncnorm

__all__ = ["norm", "multivariate_normal", "beta", "gamma", "dirichlet", "bernoulli", "binom",
           "poisson", "t", "laplace", "cauchy", "logistic", "expon", "uniform", "chi2",
           "truncnorm"]
