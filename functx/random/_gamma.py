"""Samplers built on Gamma variates: gamma, loggamma, beta, dirichlet, chisquare, t, f,
generalized_normal and ball.

The Gamma sampler is the ``random_gamma`` primitive (``functx/primitives/random_gamma.py``):
Marsaglia and Tsang's method with ``jax.random``'s key splits, element by element, so the
values are JAX's to rounding. Samples are differentiable in their shape parameters by
implicit reparameterization (``d sample / d a`` with the CDF held fixed), as in JAX; the
others are functions of Gamma samples, so their gradients follow.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from functx import numpy as fnp
from functx.errors import ShapeError
from functx.primitives.random_gamma import random_gamma
from functx.random._continuous import exponential, param, rademacher, sample_shape
from functx.random._distributions import normal
from functx.random._prng import Array, check_key, float_dtype, shape_tuple, split


def _gamma(name: str, key: Array, a: Any, shape: Any, dtype: Any, log_space: bool) -> Array:
    key = check_key(f"functx.random.{name}", key)
    dt = float_dtype(name, dtype)
    shape = sample_shape(name, shape, a)
    a = param(a, dt)
    if tuple(a.shape) != shape:
        a = fnp.broadcast_to(a, shape)
    n = int(np.prod(shape, dtype=np.int64))
    keys = fnp.reshape(split(key, n), shape + (2,))
    return random_gamma(keys, a, log_space)


def gamma(key: Array, a: Any, shape: Sequence[int] | None = None,
          dtype: Any = np.float64) -> Array:
    """Gamma(``a``, 1) values (shape ``a``, scale 1), as ``jax.random.gamma``.

    Each element is drawn from its own key (``split(key, size)``) by Marsaglia and Tsang's
    method; for ``a < 1`` a Gamma(``a + 1``) value is multiplied by ``u ** (1/a)``.
    Differentiable in ``a`` by implicit reparameterization (first derivatives only).

    Args:
        key: a key.
        a: the shape parameter (positive), broadcast to ``shape``.
        shape: the result's shape (None: ``a``'s shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: ``a`` does not broadcast.

    Example:
        >>> g = functx.random.gamma(functx.random.key(0), np.array([0.5, 1.0, 4.0]))
        >>> functx.grad(lambda a: functx.random.gamma(functx.random.key(0), a).sum())(
        ...     np.array([0.5, 1.0, 4.0]))
    """
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key: Array, a: Any, shape: Sequence[int] | None = None,
             dtype: Any = np.float64) -> Array:
    """The logarithms of Gamma(``a``, 1) values, accurate where ``a`` is so small that the
    values themselves underflow to 0 (as ``jax.random.loggamma``).

    Args:
        key: a key.
        a: the shape parameter (positive), broadcast to ``shape``.
        shape: the result's shape (None: ``a``'s shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in ``a``.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: ``a`` does not broadcast.
    """
    return _gamma("loggamma", key, a, shape, dtype, True)


def beta(key: Array, a: Any, b: Any, shape: Sequence[int] | None = None,
         dtype: Any = np.float64) -> Array:
    """Beta(``a``, ``b``) values, ``G_a / (G_a + G_b)`` from two log-Gamma samples.

    Args:
        key: a key.
        a, b: the two positive shape parameters, broadcasting to ``shape``.
        shape: the result's shape (None: the parameters' broadcast shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in ``a`` and ``b``.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: the parameters do not
            broadcast to ``shape``.
    """
    dt = float_dtype("beta", dtype)
    shape = sample_shape("beta", shape, a, b)
    ks = split(check_key("functx.random.beta", key))
    a = fnp.broadcast_to(param(a, dt), shape)
    b = fnp.broadcast_to(param(b, dt), shape)
    log_a = loggamma(ks[0], a, shape, dt)
    log_b = loggamma(ks[1], b, shape, dt)
    log_max = fnp.maximum(log_a, log_b)
    ga = fnp.exp(log_a - log_max)
    gb = fnp.exp(log_b - log_max)
    return ga / (ga + gb)


def dirichlet(key: Array, alpha: Any, shape: Sequence[int] | None = None,
              dtype: Any = np.float64) -> Array:
    """Dirichlet(``alpha``) values: normalised Gamma samples, computed in log space.

    Args:
        key: a key.
        alpha: the concentrations, shape ``(..., k)`` with ``k`` categories.
        shape: the batch shape (None: ``alpha.shape[:-1]``); the result has shape
            ``shape + (k,)``.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape + (k,)``, each row summing to 1, differentiable in ``alpha``.

    Raises:
        ShapeError: ``alpha`` is a scalar, or its batch shape does not broadcast to
            ``shape``.
    """
    dt = float_dtype("dirichlet", dtype)
    if np.ndim(alpha) < 1:
        raise ShapeError("functx.random.dirichlet needs alpha with at least one axis (the "
                         f"categories), but got alpha of shape {tuple(np.shape(alpha))}.")
    batch = tuple(np.shape(alpha))[:-1]
    shape = batch if shape is None else sample_shape("dirichlet", shape, np.zeros(batch))
    alpha = param(alpha, dt)
    log_g = loggamma(key, alpha, shape + tuple(np.shape(alpha))[-1:], dt)
    unnormalized = fnp.exp(log_g - fnp.max(log_g, axis=-1, keepdims=True))
    return unnormalized / fnp.sum(unnormalized, axis=-1, keepdims=True)


def chisquare(key: Array, df: Any, shape: Sequence[int] | None = None,
              dtype: Any = np.float64) -> Array:
    """Chi-squared values with ``df`` degrees of freedom, ``2 * Gamma(df / 2)``.

    Args:
        key: a key.
        df: the degrees of freedom (positive), broadcast to ``shape``.
        shape: the result's shape (None: ``df``'s shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in ``df``.
    """
    dt = float_dtype("chisquare", dtype)
    half_df = param(df, dt) / np.asarray(2, dt)
    return fnp.exp(loggamma(key, half_df, shape, dt)) * np.asarray(2, dt)


def f(key: Array, dfnum: Any, dfden: Any, shape: Sequence[int] | None = None,
      dtype: Any = np.float64) -> Array:
    """F-distributed values, ``(X1 / dfnum) / (X2 / dfden)`` of two chi-squared values.

    Args:
        key: a key.
        dfnum, dfden: the degrees of freedom of the numerator and the denominator.
        shape: the result's shape (None: the parameters' broadcast shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in both parameters.
    """
    dt = float_dtype("f", dtype)
    shape = sample_shape("f", shape, dfnum, dfden)
    dfden, dfnum = param(dfden, dt), param(dfnum, dt)
    ks = split(check_key("functx.random.f", key))
    chi2_num = chisquare(ks[1], dfnum, shape, dt)
    chi2_den = chisquare(ks[0], dfden, shape, dt)
    return (chi2_num / dfnum) / (chi2_den / dfden)


def t(key: Array, df: Any, shape: Sequence[int] | None = None,
      dtype: Any = np.float64) -> Array:
    """Student's t values with ``df`` degrees of freedom, ``n * sqrt((df/2) / G)`` for a
    standard normal ``n`` and a Gamma(``df/2``) value ``G``.

    Args:
        key: a key.
        df: the degrees of freedom (positive), broadcast to ``shape``.
        shape: the result's shape (None: ``df``'s shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in ``df``.
    """
    dt = float_dtype("t", dtype)
    shape = sample_shape("t", shape, df)
    ks = split(check_key("functx.random.t", key))
    n = normal(ks[0], shape, dt)
    half_df = param(df, dt) / np.asarray(2, dt)
    g = gamma(ks[1], half_df, shape, dt)
    return n * fnp.sqrt(half_df / g)


def generalized_normal(key: Array, p: float, shape: Sequence[int] = (),
                       dtype: Any = np.float64) -> Array:
    """Generalized normal values with density proportional to ``exp(-|x|**p)``
    (``p = 2``: normal with variance 1/2; ``p = 1``: Laplace).

    Args:
        key: a key.
        p: the power (positive).
        shape: the result's shape.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.
    """
    dt = float_dtype("generalized_normal", dtype)
    shape = shape_tuple("generalized_normal", shape)
    ks = split(check_key("functx.random.generalized_normal", key))
    p = param(p, dt)
    g = gamma(ks[0], 1 / p, shape, dt)
    r = rademacher(ks[1], shape, dt)
    return r * g ** (1 / p)


def ball(key: Array, d: int, p: float = 2, shape: Sequence[int] = (),
         dtype: Any = np.float64) -> Array:
    """Points drawn uniformly from the unit ``p``-norm ball in ``d`` dimensions (Barthe,
    Guédon, Mendelson and Naor's method, as ``jax.random.ball``).

    Args:
        key: a key.
        d: the dimension.
        p: the norm's power.
        shape: the batch shape; the result has shape ``shape + (d,)``.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape + (d,)``.
    """
    dt = float_dtype("ball", dtype)
    shape = shape_tuple("ball", shape)
    d = shape_tuple("ball", d)[0]
    ks = split(check_key("functx.random.ball", key))
    g = generalized_normal(ks[0], p, shape + (d,), dt)
    e = exponential(ks[1], shape, dt)
    return g / ((fnp.sum(fnp.abs(g) ** p, axis=-1) + e) ** (1 / p))[..., None]
