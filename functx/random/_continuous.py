"""Samplers by transforming uniforms and normals: exponential, laplace, logistic, cauchy,
pareto, lognormal, rayleigh, wald, weibull_min, maxwell, double_sided_maxwell, triangular,
rademacher and geometric.

Each is ``jax.random``'s algorithm operation for operation (the same uniforms from the
same key, the same formula in the same order), so the values agree with JAX's to rounding
(XLA may fuse a multiply-add where functx rounds twice). Parameters broadcast to ``shape``;
with ``shape=None`` the parameters' broadcast shape is used. Every sampler is
differentiable with respect to its float parameters (the reparameterization gradient).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from functx import numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.random._distributions import _uniform, bernoulli, normal, uniform
from functx.random._prng import (Array, check_key, check_param_shapes, finfo, float_dtype,
                                 shape_tuple, split)


def int_dtype(name: str, dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.kind not in "iu":
        raise DTypeError(f"functx.random.{name} draws integers; dtype {dt.name} is not an "
                         "integer dtype. Pass e.g. dtype=np.int32 or np.int64.")
    return dt


def param(x: Any, dt: np.dtype) -> Array:
    """A distribution parameter as an array of the sample dtype (differentiable)."""
    return fnp.asarray(x, dtype=dt) if not hasattr(x, "shape") else fnp.astype(x, dt)


def sample_shape(name: str, shape: Any, *params: Any) -> tuple[int, ...]:
    """``shape`` (or, when None, the parameters' broadcast shape), checked to contain the
    parameters' shapes, as ``jax.random``.

    Raises:
        ShapeError: the parameters do not broadcast to ``shape``.
    """
    shapes = [tuple(np.shape(p)) for p in params]
    if shape is None:
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise ShapeError(f"functx.random.{name}: the parameters' shapes {shapes} do not "
                             "broadcast together.") from None
    shape = shape_tuple(name, shape)
    check_param_shapes(name, shape, **{f"parameter {i}": p for i, p in enumerate(params)})
    return shape


def exponential(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.float64
                ) -> Array:
    """Standard exponential values, ``-log1p(-u)`` for ``u`` uniform in ``[0, 1)``.

    Args:
        key: a key.
        shape: the result's shape.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not floating-point.

    Example:
        >>> functx.random.exponential(functx.random.key(0), (3,))
    """
    key = check_key("functx.random.exponential", key)
    dt = float_dtype("exponential", dtype)
    u = _uniform("exponential", key, shape_tuple("exponential", shape), dt, 0.0, 1.0)
    return fnp.negative(fnp.log1p(fnp.negative(u)))


def laplace(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.float64) -> Array:
    """Standard Laplace values (location 0, scale 1): ``sign(u) * log1p(-|u|)`` for ``u``
    uniform in ``(-1, 1)``, as ``jax.random.laplace``.

    Args:
        key: a key.
        shape: the result's shape.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not floating-point.
    """
    key = check_key("functx.random.laplace", key)
    dt = float_dtype("laplace", dtype)
    u = _uniform("laplace", key, shape_tuple("laplace", shape), dt,
                 float(-1.0 + finfo(dt).epsneg), 1.0)
    return fnp.multiply(fnp.sign(u), fnp.log1p(fnp.negative(fnp.abs(u))))


def logistic(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.float64) -> Array:
    """Standard logistic values, ``log(u) - log1p(-u)`` for ``u`` uniform in ``[tiny, 1)``.

    Args:
        key: a key.
        shape: the result's shape.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not floating-point.
    """
    key = check_key("functx.random.logistic", key)
    dt = float_dtype("logistic", dtype)
    u = _uniform("logistic", key, shape_tuple("logistic", shape), dt,
                 float(finfo(dt).tiny), 1.0)
    return fnp.subtract(fnp.log(u), fnp.log1p(fnp.negative(u)))


def cauchy(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.float64) -> Array:
    """Standard Cauchy values, ``tan(pi * (u - 1/2))`` for ``u`` uniform in ``[eps, 1)``.

    Args:
        key: a key.
        shape: the result's shape.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not floating-point.
    """
    key = check_key("functx.random.cauchy", key)
    dt = float_dtype("cauchy", dtype)
    u = _uniform("cauchy", key, shape_tuple("cauchy", shape), dt, float(finfo(dt).eps), 1.0)
    pi = np.asarray(np.pi, dt)
    return fnp.tan(fnp.multiply(pi, fnp.subtract(u, np.asarray(0.5, dt))))


def pareto(key: Array, b: Any, shape: Sequence[int] | None = None,
           dtype: Any = np.float64) -> Array:
    """Pareto values of shape parameter ``b`` (scale 1): ``exp(e / b)``, ``e`` exponential.

    Args:
        key: a key.
        b: the shape parameter (positive), broadcast to ``shape``.
        shape: the result's shape (None: ``b``'s shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in ``b``.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: ``b`` does not broadcast.
    """
    dt = float_dtype("pareto", dtype)
    shape = sample_shape("pareto", shape, b)
    e = exponential(key, shape, dt)
    return fnp.exp(fnp.divide(e, param(b, dt)))


def lognormal(key: Array, sigma: Any = 1.0, shape: Sequence[int] | None = None,
              dtype: Any = np.float64) -> Array:
    """Log-normal values, ``exp(sigma * n)`` for ``n`` standard normal.

    Args:
        key: a key.
        sigma: the standard deviation of the underlying normal, broadcast to ``shape``.
        shape: the result's shape (None: ``sigma``'s shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in ``sigma``.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: ``sigma`` does not broadcast.
    """
    dt = float_dtype("lognormal", dtype)
    shape = sample_shape("lognormal", shape, sigma)
    return fnp.exp(fnp.multiply(normal(key, shape, dt), param(sigma, dt)))


def rayleigh(key: Array, scale: Any, shape: Sequence[int] | None = None,
             dtype: Any = np.float64) -> Array:
    """Rayleigh values, ``scale * sqrt(-2 log u)`` for ``u`` uniform in ``[0, 1)``.

    Args:
        key: a key.
        scale: the scale (positive), broadcast to ``shape``.
        shape: the result's shape (None: ``scale``'s shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in ``scale``.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: ``scale`` does not broadcast.
    """
    dt = float_dtype("rayleigh", dtype)
    shape = sample_shape("rayleigh", shape, scale)
    u = uniform(key, shape, dt)
    scale = fnp.broadcast_to(param(scale, dt), shape)
    return fnp.multiply(scale, fnp.sqrt(fnp.multiply(fnp.log(u), np.asarray(-2, dt))))


def wald(key: Array, mean: Any, shape: Sequence[int] | None = None,
         dtype: Any = np.float64) -> Array:
    """Wald (inverse Gaussian, shape 1) values of mean ``mean``, by Michael, Schucany and
    Haas' transformation of a normal and a uniform, as ``jax.random.wald``.

    Args:
        key: a key.
        mean: the mean (positive), broadcast to ``shape``.
        shape: the result's shape (None: ``mean``'s shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in ``mean``.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: ``mean`` does not broadcast.
    """
    dt = float_dtype("wald", dtype)
    shape = sample_shape("wald", shape, mean)
    k1, k2 = split(key, 2)
    mean = fnp.broadcast_to(param(mean, dt), shape)
    v = normal(k1, shape, dt)
    z = uniform(k2, shape, dt)
    y = v * v
    y_sq = y * y
    mean_sq = mean * mean
    sqrt_term = fnp.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return fnp.where(z <= mean / (mean + x), x, mean_sq / x)


def weibull_min(key: Array, scale: Any, concentration: Any, shape: Sequence[int] = (),
                dtype: Any = np.float64) -> Array:
    """Weibull values, ``(-log1p(-u)) ** (1 / concentration) * scale``.

    Args:
        key: a key.
        scale, concentration: positive parameters broadcasting to ``shape``.
        shape: the result's shape.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in both parameters.

    Raises:
        DTypeError: ``dtype`` is not floating-point.
    """
    key = check_key("functx.random.weibull_min", key)
    dt = float_dtype("weibull_min", dtype)
    u = uniform(key, shape_tuple("weibull_min", shape), dt)
    scale, concentration = param(scale, dt), param(concentration, dt)
    return fnp.power(fnp.negative(fnp.log1p(fnp.negative(u))),
                     fnp.divide(np.asarray(1.0, dt), concentration)) * scale


def maxwell(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.float64) -> Array:
    """Maxwell values: the norm of three independent standard normals.

    Args:
        key: a key.
        shape: the result's shape.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``.

    Raises:
        DTypeError: ``dtype`` is not floating-point.
    """
    dt = float_dtype("maxwell", dtype)
    n = normal(key, shape_tuple("maxwell", shape) + (3,), dt)
    return fnp.sqrt(fnp.sum(n * n, axis=-1))


def double_sided_maxwell(key: Array, loc: Any, scale: Any, shape: Sequence[int] = (),
                         dtype: Any = np.float64) -> Array:
    """Double-sided Maxwell values: a Maxwell value with a random sign, ``* scale + loc``.

    Args:
        key: a key.
        loc, scale: parameters; the result has shape ``shape + broadcast(loc, scale)``
            (``shape`` empty: the parameters' shape).
        shape: the leading (sample) shape.
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``dtype``, differentiable in ``loc`` and ``scale``.

    Raises:
        DTypeError: ``dtype`` is not floating-point.
    """
    dt = float_dtype("double_sided_maxwell", dtype)
    params_shape = tuple(np.broadcast_shapes(np.shape(loc), np.shape(scale)))
    # As jax.random: an empty shape means the parameters' shape, and the parameters' shape
    # is then appended (so a non-scalar loc with shape=() gives shape loc.shape * 2).
    shape = (shape_tuple("double_sided_maxwell", shape) or params_shape) + params_shape
    maxwell_key, rademacher_key = split(key)
    m = maxwell(maxwell_key, shape, dt)
    sign = rademacher(rademacher_key, shape, dt)
    return sign * m * param(scale, dt) + param(loc, dt)


def triangular(key: Array, left: Any, mode: Any, right: Any,
               shape: Sequence[int] | None = None, dtype: Any = np.float64) -> Array:
    """Triangular values on ``[left, right]`` peaking at ``mode``, by inverting the CDF.

    Args:
        key: a key.
        left, mode, right: parameters (``left <= mode <= right``) broadcasting to ``shape``.
        shape: the result's shape (None: the parameters' broadcast shape).
        dtype: a float dtype; float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``, differentiable in the parameters.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: the parameters do not
            broadcast to ``shape``.
    """
    dt = float_dtype("triangular", dtype)
    shape = sample_shape("triangular", shape, left, mode, right)
    left, mode, right = (fnp.broadcast_to(param(p, dt), shape) for p in (left, mode, right))
    fc = (mode - left) / (right - left)
    u = uniform(key, shape, dt)
    out1 = left + fnp.sqrt(u * (right - left) * (mode - left))
    out2 = right - fnp.sqrt((1 - u) * (right - left) * (right - mode))
    return fnp.where(u < fc, out1, out2)


def rademacher(key: Array, shape: int | Sequence[int] = (), dtype: Any = np.int64) -> Array:
    """Random signs, -1 or +1 with equal probability (``2 * bernoulli(key, 0.5) - 1``).

    Args:
        key: a key.
        shape: the result's shape.
        dtype: the result's dtype (int64 by default; a float dtype gives ``±1.0``).

    Returns:
        An array of ``shape`` and ``dtype``.
    """
    b = fnp.astype(bernoulli(key, 0.5, shape_tuple("rademacher", shape)), dtype)
    return fnp.astype(2 * b - 1, dtype)


def geometric(key: Array, p: Any, shape: Sequence[int] | None = None,
              dtype: Any = np.int64) -> Array:
    """Geometric values (the number of Bernoulli(``p``) trials up to the first success,
    at least 1): ``floor(log(u) / log1p(-p)) + 1``.

    Args:
        key: a key.
        p: the success probability, broadcast to ``shape``.
        shape: the result's shape (None: ``p``'s shape).
        dtype: an integer dtype; int64 by default.

    Returns:
        An integer array of ``shape``.

    Raises:
        DTypeError: ``dtype`` is not an integer dtype. ShapeError: ``p`` does not broadcast.
    """
    dt = int_dtype("geometric", dtype)
    shape = sample_shape("geometric", shape, p)
    p = fnp.asarray(p)
    p = p if np.dtype(p.dtype).kind == "f" else fnp.astype(p, np.float64)
    u = uniform(key, shape, p.dtype)
    u = fnp.where(u == 0, np.asarray(1, p.dtype), u)
    log_one_minus_p = fnp.broadcast_to(fnp.log1p(fnp.negative(p)), shape)
    g = fnp.floor(fnp.divide(fnp.log(u), log_one_minus_p)) + 1
    return fnp.astype(g, dt)
