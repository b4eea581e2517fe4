"""Counting samplers and sampling from a population: poisson, binomial, multinomial and
choice.

``poisson`` and ``binomial`` are ``jax.random``'s algorithms (Knuth's multiplication method
or Hormann's transformed rejection for Poisson; inversion by geometric waiting times or
BTRS for the binomial), as whole-array ``functx.lax.while_loop``s that run until every
element is done, with JAX's key splits, so the values are JAX's. They are loops, so the
sample shape's elements draw in lockstep; under ``vmap`` the loop runs until every member is
done. None of them is differentiable (their values are integers or counts).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from functx import lax
from functx import numpy as fnp
from functx.errors import ShapeError
from functx.primitives import special as _special
from functx.random._continuous import int_dtype, sample_shape
from functx.random._distributions import gumbel, permutation, randint, uniform
from functx.random._prng import Array, check_key, float_dtype, shape_tuple, split

_I32_MAX = np.iinfo(np.int32).max  # an iteration cap no loop reaches (JAX: the dtype's max)


def _split2(key: Array) -> tuple[Array, Array]:
    ks = split(key)
    return ks[0], ks[1]


def _poisson_knuth(key: Array, lam: Array, shape: tuple[int, ...], dt: np.dtype) -> Array:
    def body(carry):
        i, k, rng, log_prod = carry
        rng, sub = _split2(rng)
        k = fnp.where(log_prod > -lam, k + 1, k)
        u = uniform(sub, shape, np.float32)
        return i + 1, k, rng, log_prod + fnp.log(u)

    def cond(carry):
        i, _, _, log_prod = carry
        return fnp.any(log_prod > -lam) & (i < _I32_MAX)

    init = (fnp.asarray(0, np.int32), fnp.zeros(shape, dt), key, fnp.zeros(shape, np.float32))
    k = lax.while_loop(cond, body, init)[1]
    return fnp.astype(k - 1, dt)


def _poisson_rejection(key: Array, lam: Array, shape: tuple[int, ...], dt: np.dtype) -> Array:
    log_lam = fnp.log(lam)
    b = 0.931 + 2.53 * fnp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        i, k_out, accepted, key = carry
        ks = split(key, 3)
        key, k0, k1 = ks[0], ks[1], ks[2]
        u = uniform(k0, shape, lam.dtype) - 0.5
        v = uniform(k1, shape, lam.dtype)
        us = 0.5 - fnp.abs(u)
        k = fnp.floor((2 * a / us + b) * u + lam + 0.43)
        s = fnp.log(v * inv_alpha / (a / (us * us) + b))
        t = -lam + k * log_lam - _special.lgamma(k + 1)
        accept1 = (us >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((us < 0.013) & (v > us))
        accept = accept1 | (~reject & (s <= t))
        return i + 1, fnp.where(accept, k, k_out), accepted | accept, key

    def cond(carry):
        i, _, accepted, _ = carry
        return fnp.any(~accepted) & (i < _I32_MAX)

    init = (fnp.asarray(0, np.int32), fnp.full(shape, -1, lam.dtype),
            fnp.zeros(shape, bool), key)
    return fnp.astype(lax.while_loop(cond, body, init)[1], dt)


def poisson(key: Array, lam: Any, shape: Sequence[int] | None = None,
            dtype: Any = np.int64) -> Array:
    """Poisson values of rate ``lam``, as ``jax.random.poisson``: Knuth's method where
    ``lam < 10``, Hormann's transformed rejection elsewhere (both run on every element and
    the right one is selected), in float32 arithmetic.

    Args:
        key: a key.
        lam: the rate (non-negative), broadcast to ``shape``.
        shape: the result's shape (None: ``lam``'s shape).
        dtype: an integer dtype; int64 by default.

    Returns:
        An integer array of ``shape``.

    Raises:
        DTypeError: ``dtype`` is not an integer dtype. ShapeError: ``lam`` does not
            broadcast to ``shape``.

    Example:
        >>> functx.random.poisson(functx.random.key(0), np.array([0.5, 3.0, 40.0]))
    """
    key = check_key("functx.random.poisson", key)
    dt = int_dtype("poisson", dtype)
    shape = tuple(np.shape(lam)) if shape is None else shape_tuple("poisson", shape)
    lam = fnp.astype(fnp.broadcast_to(fnp.asarray(lam), shape), np.float32)
    use_knuth = fnp.isnan(lam) | (lam < 10)
    lam_knuth = fnp.where(use_knuth, lam, np.float32(0))
    lam_rejection = fnp.where(use_knuth, np.float32(1e5), lam)
    result = fnp.where(use_knuth, _poisson_knuth(key, lam_knuth, shape, dt),
                       _poisson_rejection(key, lam_rejection, shape, dt))
    return fnp.where(lam == 0, fnp.zeros_like(result), result)


def _stirling_tail(k: Array) -> Array:
    """``log k! - (k + 1/2) log(k + 1) + (k + 1) - log(2 pi)/2``: a table below 10, the
    asymptotic series above (as JAX's ``_stirling_approx_tail``)."""
    table = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                      0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                      0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                      0.00833056343336287], k.dtype)
    kp1 = k + 1
    kp1sq = kp1 * kp1
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / kp1
    small = fnp.take(table, fnp.astype(fnp.clip(k, 0, 9), np.int32))
    return fnp.where(k <= 9, small, approx)


def _binomial_inversion(key: Array, count: Array, prob: Array, shape: tuple[int, ...],
                        dt: np.dtype) -> Array:
    log1mp = fnp.log1p(-prob)

    def body(carry):
        i, num_geom, geom_sum, key = carry
        sub, key = _split2(key)
        num_geom = fnp.where(geom_sum <= count, num_geom + 1, num_geom)
        u = uniform(sub, shape, prob.dtype)
        geom = fnp.ceil(fnp.log(u) / log1mp)
        return i + 1, num_geom, geom_sum + geom, key

    def cond(carry):
        i, _, geom_sum, _ = carry
        return fnp.any(geom_sum <= count) & (i < _I32_MAX)

    zeros = fnp.zeros(shape, prob.dtype)
    k = lax.while_loop(cond, body, (fnp.asarray(0, np.int32), zeros, zeros, key))[1]
    return fnp.astype(k - 1, dt)


def _btrs(key: Array, count: Array, prob: Array, shape: tuple[int, ...],
          dt: np.dtype) -> Array:
    stddev = fnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = fnp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, key = carry
        ks = split(key, 3)
        key, k0, k1 = ks[0], ks[1], ks[2]
        u = uniform(k0, shape, prob.dtype)
        v = uniform(k1, shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - fnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = fnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = fnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * fnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * fnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * fnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_tail(m) + _stirling_tail(count - m)
              - _stirling_tail(k) - _stirling_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, fnp.where(accept, k, k_out), accepted | accept, key

    def cond(carry):
        i, _, accepted, _ = carry
        return fnp.any(~accepted) & (i < _I32_MAX)

    init = (fnp.asarray(0, np.int32), fnp.full(shape, -1, prob.dtype),
            fnp.zeros(shape, bool), key)
    return fnp.astype(lax.while_loop(cond, body, init)[1], dt)


def binomial(key: Array, n: Any, p: Any, shape: Sequence[int] | None = None,
             dtype: Any = np.float64) -> Array:
    """Binomial counts of ``n`` trials with success probability ``p``, as
    ``jax.random.binomial``: inversion where ``n * min(p, 1-p) <= 10``, BTRS elsewhere.

    Args:
        key: a key.
        n: the number of trials (non-negative; floats are floored), broadcasting with ``p``.
        p: the success probability.
        shape: the result's shape (None: the parameters' broadcast shape).
        dtype: a float dtype (the counts as floats, as in JAX); float64 by default.

    Returns:
        An array of ``shape`` and ``dtype``: NaN where ``n`` is NaN or negative or ``p`` is
        NaN or negative, ``inf`` where ``n`` is infinite.

    Raises:
        DTypeError: ``dtype`` is not floating-point. ShapeError: the parameters do not
            broadcast to ``shape``.
    """
    key = check_key("functx.random.binomial", key)
    dt = float_dtype("binomial", dtype)
    shape = sample_shape("binomial", shape, n, p)
    prob = fnp.asarray(p)
    prob = prob if np.dtype(prob.dtype).kind == "f" else fnp.astype(prob, np.float64)
    count = fnp.broadcast_to(fnp.astype(fnp.asarray(n), prob.dtype), shape)
    prob = fnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = fnp.where(p_lt_half, prob, 1.0 - prob)
    count_bad = fnp.isnan(count) | (count < 0.0)
    count_inf = fnp.isinf(count)
    q_nan, q_neg = fnp.isnan(q), q < 0.0
    q = fnp.where(q_nan | q_neg, fnp.full_like(q, 0.01), q)
    use_inversion = count_bad | (count * q <= 10.0)
    with np.errstate(divide="ignore", invalid="ignore"):  # rejected candidates divide by 0
        return _binomial_tail(key, count, q, prob, p_lt_half, count_bad, count_inf, q_nan,
                              q_neg, use_inversion, shape, dt)


def _binomial_tail(key, count, q, prob, p_lt_half, count_bad, count_inf, q_nan, q_neg,
                   use_inversion, shape, dt):
    count = fnp.floor(count)
    count_inv = fnp.where(use_inversion, count, fnp.zeros_like(count))
    count_btrs = fnp.where(use_inversion, fnp.full_like(count, 1e4), count)
    q_btrs = fnp.where(use_inversion, fnp.full_like(q, 0.5), q)
    samples = fnp.where(use_inversion, _binomial_inversion(key, count_inv, q, shape, dt),
                        _btrs(key, count_btrs, q_btrs, shape, dt))
    invalid = q_neg | q_nan | count_bad
    samples = fnp.where(invalid, fnp.full_like(samples, np.nan), samples)
    samples = fnp.where(count_inf & ~invalid, fnp.full_like(samples, np.inf), samples)
    return fnp.where(p_lt_half | count_bad | q_nan | count_inf, samples,
                     fnp.astype(count, dt) - samples)


def multinomial(key: Array, n: Any, p: Any, *, shape: Sequence[int] | None = None,
                dtype: Any = np.float64, unroll: int | bool = 1) -> Array:
    """Multinomial counts of ``n`` trials over the categories of ``p`` (last axis), as
    ``jax.random.multinomial``: one binomial per category on the remaining trials (a
    ``scan`` over the categories).

    Args:
        key: a key.
        n: the number of trials, broadcasting to ``shape[:-1]``.
        p: the probabilities over the last axis.
        shape: the result's shape (None: ``p``'s shape); its last axis is the categories'.
        dtype: a float dtype for the counts; float64 by default.
        unroll: accepted for JAX compatibility.

    Returns:
        An array of ``shape``: counts summing to ``n`` along the last axis.
    """
    key = check_key("functx.random.multinomial", key)
    dt = float_dtype("multinomial", dtype)
    p = fnp.asarray(p)
    p = p if np.dtype(p.dtype).kind == "f" else fnp.astype(p, np.float64)
    n = fnp.astype(fnp.asarray(n), p.dtype)
    shape = tuple(p.shape) if shape is None else shape_tuple("multinomial", shape)
    if not shape:
        raise ShapeError("functx.random.multinomial needs p with a categories axis (its last "
                         f"axis), but got shape {shape}.")
    n = fnp.broadcast_to(n, shape[:-1])
    p = fnp.moveaxis(fnp.broadcast_to(p, shape), -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = p / fnp.where(remaining == 0, 1, remaining)
    keys = split(key, shape[-1])

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        count = binomial(k, remainder, fnp.clip(ratio, 0, 1), dtype=remainder.dtype)
        return remainder - count, count

    _, counts = lax.scan(step, n, (ratios, keys))
    return fnp.astype(fnp.moveaxis(counts, 0, -1), dt)


def choice(key: Array, a: Any, shape: Sequence[int] = (), replace: bool = True,
           p: Any = None, axis: int = 0) -> Array:
    """Samples from ``a`` (an int ``n`` meaning ``arange(n)``, or an array along ``axis``),
    as ``jax.random.choice``: ``randint`` indices with replacement; a permutation's first
    entries without; with probabilities ``p``, inversion of their cumulative sum with
    replacement and the Gumbel top-k trick without.

    Args:
        key: a key.
        a: an int or an array.
        shape: the shape of the draws.
        replace: with replacement.
        p: probabilities of the entries of ``a`` along ``axis`` (None: uniform).
        axis: the axis of ``a`` to draw along.

    Returns:
        The draws: ``shape`` for an int ``a``, else ``a``'s shape with ``axis`` replaced by
        ``shape``.

    Raises:
        ShapeError: more draws than entries without replacement, or ``p`` of the wrong
            shape.
    """
    key = check_key("functx.random.choice", key)
    shape = shape_tuple("choice", shape)
    arr = None if isinstance(a, (int, np.integer)) else fnp.asarray(a)
    if arr is not None and arr.ndim == 0:
        raise ShapeError("functx.random.choice: a must be an int or an array with at least one "
                         "axis.")
    n_inputs = int(a) if arr is None else int(arr.shape[axis])
    n_draws = int(np.prod(shape, dtype=np.int64))
    if n_draws == 0:
        return fnp.zeros(shape if arr is None else arr.shape[:axis] + shape
                         + arr.shape[axis + 1:], np.int64 if arr is None else arr.dtype)
    if n_inputs <= 0:
        raise ShapeError("functx.random.choice: a must have at least one entry unless no "
                         "samples are taken.")
    if not replace and n_draws > n_inputs:
        raise ShapeError(f"functx.random.choice: cannot take {n_draws} samples from "
                         f"{n_inputs} entries without replacement; pass replace=True.")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n_inputs)
        else:
            ind = fnp.reshape(permutation(key, n_inputs)[:n_draws], shape)
    else:
        p = fnp.asarray(p)
        p = p if np.dtype(p.dtype).kind == "f" else fnp.astype(p, np.float64)
        if tuple(p.shape) != (n_inputs,):
            raise ShapeError(f"functx.random.choice: p must have shape ({n_inputs},) (one "
                             f"probability per entry of a along axis {axis}), not "
                             f"{tuple(p.shape)}.")
        if replace:
            p_cuml = fnp.cumsum(p)
            r = p_cuml[-1] * (1 - uniform(key, shape, p_cuml.dtype))
            ind = fnp.astype(fnp.searchsorted(p_cuml, r), np.int64)
        else:
            g = gumbel(key, (n_inputs,), p.dtype) + fnp.log(p)
            ind = fnp.reshape(fnp.astype(lax.top_k(g, n_draws)[1], np.int64), shape)
    if arr is None:
        return ind
    return fnp.take(arr, ind, axis=axis)


__all__ = ["poisson", "binomial", "multinomial", "choice"]
