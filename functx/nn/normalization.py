"""Normalisation layers as functions: layer_norm, rms_norm, group_norm, instance_norm,
batch_norm, local_response_norm, normalize (torch.nn.functional's names, arguments and
defaults) and standardize (jax.nn's).

Statistics use the biased variance (divide by the count), as in PyTorch; ``eps`` is added
to the variance before the square root. Centring is two-pass (``mean((x - mean)**2)``).

Running statistics are functional (nothing is mutated): where PyTorch's ``batch_norm``
(``training=True``) and ``instance_norm`` (``use_input_stats=True``) update
``running_mean``/``running_var`` in place, the functx versions return them instead:

    * if the batch statistics are used AND ``running_mean`` or ``running_var`` is given,
      the result is a tuple ``(output, new_running_mean, new_running_var)`` (an entry is
      None where that running statistic was not given);
    * otherwise the result is the output array alone.

The choice depends only on Python arguments (not on values), so it is stable under every
transform. A PyTorch line ``y = F.batch_norm(x, rm, rv, training=True)`` ports as
``y, rm, rv = fnn.batch_norm(x, rm, rv, training=True)``. New running statistics are
``(1 - momentum) * running + momentum * batch_statistic``, with the unbiased variance
(``n / (n - 1)`` times the biased one), as in PyTorch. As in PyTorch, running statistics
are buffers, not parameters: no gradient flows into or out of them.

Example:
    >>> import functx.nn as fnn
    >>> y = fnn.layer_norm(np.random.randn(4, 8), (8,))
    >>> y, rm, rv = fnn.batch_norm(np.random.randn(4, 3), np.zeros(3), np.ones(3),
    ...                            training=True)
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

import functx.numpy as fnp
from functx.errors import ShapeError
from functx.nn._util import (ArgumentError, array, check_int, check_number, check_option,
                             float_array, norm_dim)
from functx.nn.distance import vector_norm
from functx.primitives import elementwise as _ew
from functx.primitives import fused as _fused
from functx.primitives.misc import stop_gradient

__all__ = ["layer_norm", "rms_norm", "group_norm", "instance_norm", "batch_norm",
           "local_response_norm", "normalize", "standardize"]


def _normalized_shape(fn: str, normalized_shape: Any, x: Any) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else \
        tuple(normalized_shape)
    if any(isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer))
           for d in shape):
        raise ArgumentError(f"functx.nn.{fn}: normalized_shape must be an int or a sequence "
                            f"of ints, not {normalized_shape!r}.")
    shape = tuple(int(d) for d in shape)
    if len(shape) > x.ndim or tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ShapeError(f"functx.nn.{fn}: input of shape {tuple(x.shape)} does not end with "
                         f"normalized_shape {shape}: the normalised dimensions must be the "
                         "last ones.")
    return shape


def _check_param(fn: str, name: str, p: Any, shape: tuple[int, ...]) -> Any:
    if p is None:
        return None
    a = float_array(p, fn, name)
    if tuple(a.shape) != tuple(shape):
        raise ShapeError(f"functx.nn.{fn}: {name} must have shape {tuple(shape)}, but it has "
                         f"shape {tuple(a.shape)}.")
    return a


def _affine(y: Any, weight: Any, bias: Any) -> Any:
    if weight is not None:
        y = fnp.multiply(y, weight)
    if bias is not None:
        y = fnp.add(y, bias)
    return y


def _standardize(x: Any, axes: tuple[int, ...], eps: float) -> tuple[Any, Any, Any]:
    """``((x - mean) / sqrt(var + eps), mean, biased var)`` over ``axes`` (kept dims)."""
    mean = fnp.mean(x, axis=axes, keepdims=True)
    centered = fnp.subtract(x, mean)
    var = fnp.mean(fnp.multiply(centered, centered), axis=axes, keepdims=True)
    return fnp.divide(centered, fnp.sqrt(fnp.add(var, eps))), mean, var


def layer_norm(input: Any, normalized_shape: int | Sequence[int], weight: Any = None,
               bias: Any = None, eps: float = 1e-5) -> Any:
    """Normalise over the last ``len(normalized_shape)`` dimensions, then scale and shift.

    Over one dimension (with parameters of the input's dtype) this is the fused primitive
    ``functx.primitives.fused.layer_norm`` (one kernel forward, one backward on CUDA); over
    several it is a composite of functx operations.

    Args:
        input: shape ``(*, *normalized_shape)``.
        normalized_shape: the trailing shape to normalise over (an int for one dimension).
        weight: None or shape ``normalized_shape`` (elementwise scale).
        bias: None or shape ``normalized_shape`` (elementwise shift).
        eps: added to the variance (>= 0).

    Returns:
        An array shaped like ``input``.

    Raises:
        ShapeError: ``input`` does not end with ``normalized_shape``, or a parameter shape.
        ArgumentError: a malformed ``normalized_shape`` or a negative ``eps``.

    Example:
        >>> fnn.layer_norm(np.array([[1.0, 3.0]]), 2)   # [[-1., 1.]] (nearly)
    """
    x = float_array(input, "layer_norm")
    shape = _normalized_shape("layer_norm", normalized_shape, x)
    check_number("layer_norm", "eps", eps, lo=0.0)
    w = _check_param("layer_norm", "weight", weight, shape)
    b = _check_param("layer_norm", "bias", bias, shape)
    if len(shape) == 1 and all(p is None or p.dtype == x.dtype for p in (w, b)):
        # Over the last axis alone: the fused primitive (absent parameters as 0-d 1 and 0).
        return _fused.layer_norm(x, _ew.scalar(x, 1) if w is None else w,
                                 _ew.scalar(x, 0) if b is None else b, eps=float(eps))
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    y, _, _ = _standardize(x, axes, eps)
    return _affine(y, w, b)


def rms_norm(input: Any, normalized_shape: int | Sequence[int], weight: Any = None,
             eps: float | None = None) -> Any:
    """``input / sqrt(mean(input**2) + eps) * weight`` over the trailing dimensions.

    Args:
        input: shape ``(*, *normalized_shape)``.
        normalized_shape: the trailing shape to normalise over (an int for one dimension).
        weight: None or shape ``normalized_shape``.
        eps: added to the mean square; None means the machine epsilon of ``input``'s
            dtype (as in PyTorch).

    Returns:
        An array shaped like ``input``.

    Raises:
        ShapeError: ``input`` does not end with ``normalized_shape``, or ``weight``'s shape.
        ArgumentError: a malformed ``normalized_shape`` or a negative ``eps``.

    Example:
        >>> fnn.rms_norm(np.array([[3.0, 4.0]]), (2,))   # [[0.848..., 1.131...]]
    """
    x = float_array(input, "rms_norm")
    shape = _normalized_shape("rms_norm", normalized_shape, x)
    e = float(np.finfo(x.dtype).eps) if eps is None else check_number("rms_norm", "eps", eps,
                                                                        lo=0.0)
    w = _check_param("rms_norm", "weight", weight, shape)
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    ms = fnp.mean(fnp.multiply(x, x), axis=axes, keepdims=True)
    y = fnp.divide(x, fnp.sqrt(fnp.add(ms, e)))
    return _affine(y, w, None)


def _channels(fn: str, x: Any, min_ndim: int = 2) -> int:
    if x.ndim < min_ndim:
        raise ShapeError(f"functx.nn.{fn}: input must have at least {min_ndim} dimensions "
                         f"(N, C, ...), but it has shape {tuple(x.shape)}.")
    return x.shape[1]


def _per_channel(v: Any, ndim: int) -> Any:
    """A ``(C,)`` array shaped ``(1, C, 1, ...)`` to broadcast against an ``ndim`` input."""
    return None if v is None else fnp.reshape(v, (1, -1) + (1,) * (ndim - 2))


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> Any:
    """Normalise each group of ``C // num_groups`` channels (and all spatial positions) of
    each sample, then apply a per-channel scale and shift.

    Args:
        input: shape ``(N, C, *)``.
        num_groups: a positive divisor of ``C``.
        weight: None or shape ``(C,)``.
        bias: None or shape ``(C,)``.
        eps: added to the variance.

    Returns:
        An array shaped like ``input``.

    Raises:
        ShapeError: ``input`` has fewer than 2 dimensions, or a parameter shape.
        ArgumentError: ``num_groups`` does not divide ``C``, or a negative ``eps``.

    Example:
        >>> fnn.group_norm(np.random.randn(2, 4, 5), 2).shape   # (2, 4, 5)
    """
    x = float_array(input, "group_norm")
    c = _channels("group_norm", x)
    g = check_int("group_norm", "num_groups", num_groups, lo=1)
    if c % g:
        raise ArgumentError(f"functx.nn.group_norm: num_groups={g} must divide the number of "
                            f"channels C={c} (input shape {tuple(x.shape)}).")
    check_number("group_norm", "eps", eps, lo=0.0)
    w = _check_param("group_norm", "weight", weight, (c,))
    b = _check_param("group_norm", "bias", bias, (c,))
    n = x.shape[0]
    grouped = fnp.reshape(x, (n, g, (c // g) * math.prod(x.shape[2:])))
    y, _, _ = _standardize(grouped, (2,), eps)
    y = fnp.reshape(y, tuple(x.shape))
    return _affine(y, _per_channel(w, x.ndim), _per_channel(b, x.ndim))


def _new_running(fn: str, running: Any, stat: Any, momentum: float) -> Any:
    """``(1 - momentum) * running + momentum * stat``, gradient-free (None stays None)."""
    if running is None:
        return None
    return stop_gradient(fnp.add(fnp.multiply(1.0 - momentum, running),
                                 fnp.multiply(momentum, stat)))


def _running(fn: str, name: str, v: Any, c: int) -> Any:
    a = _check_param(fn, name, v, (c,))
    return None if a is None else stop_gradient(a)


def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None,
               bias: Any = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Any:
    """Normalise each channel over the batch and spatial dimensions (``training=True``) or
    with the running statistics (``training=False``), then scale and shift per channel.

    Args:
        input: shape ``(N, C, *)``.
        running_mean: None or shape ``(C,)``; required when ``training=False``.
        running_var: None or shape ``(C,)``; required when ``training=False``.
        weight: None or shape ``(C,)``.
        bias: None or shape ``(C,)``.
        training: use (and return updated running statistics from) the batch statistics.
        momentum: the weight of the batch statistic in the new running statistics.
        eps: added to the variance.

    Returns:
        ``training=False``, or no running statistic given: the output, shaped like
        ``input``. ``training=True`` with ``running_mean`` or ``running_var`` given:
        ``(output, new_running_mean, new_running_var)`` (None where not given); see the
        module docstring. The inputs are never modified.

    Raises:
        ShapeError: ``input`` has fewer than 2 dimensions, or a parameter shape.
        ArgumentError: evaluation mode without running statistics, a single value per
            channel in training mode, or a bad ``momentum``/``eps``.

    Example:
        >>> y, rm, rv = fnn.batch_norm(x, np.zeros(3), np.ones(3), training=True)
        >>> y_eval = fnn.batch_norm(x, rm, rv)
    """
    x = float_array(input, "batch_norm")
    c = _channels("batch_norm", x)
    check_number("batch_norm", "momentum", momentum)
    check_number("batch_norm", "eps", eps, lo=0.0)
    rm = _running("batch_norm", "running_mean", running_mean, c)
    rv = _running("batch_norm", "running_var", running_var, c)
    w = _check_param("batch_norm", "weight", weight, (c,))
    b = _check_param("batch_norm", "bias", bias, (c,))
    axes = (0,) + tuple(range(2, x.ndim))
    if not training:
        if rm is None or rv is None:
            raise ArgumentError("functx.nn.batch_norm: running_mean and running_var must be "
                                "given when training=False (evaluation uses them); pass "
                                "training=True to normalise with the batch statistics.")
        y = fnp.divide(fnp.subtract(x, _per_channel(rm, x.ndim)),
                       fnp.sqrt(fnp.add(_per_channel(rv, x.ndim), eps)))
        return _affine(y, _per_channel(w, x.ndim), _per_channel(b, x.ndim))
    count = math.prod(x.shape[i] for i in axes)
    if count <= 1:
        raise ArgumentError(f"functx.nn.batch_norm: expected more than 1 value per channel "
                            f"when training, but input has shape {tuple(x.shape)}.")
    y, mean, var = _standardize(x, axes, eps)
    y = _affine(y, _per_channel(w, x.ndim), _per_channel(b, x.ndim))
    if rm is None and rv is None:
        return y
    mean, var = fnp.reshape(mean, (c,)), fnp.reshape(var, (c,))
    unbiased = fnp.multiply(var, count / (count - 1))
    return (y, _new_running("batch_norm", rm, mean, momentum),
            _new_running("batch_norm", rv, unbiased, momentum))


def instance_norm(input: Any, running_mean: Any = None, running_var: Any = None,
                  weight: Any = None, bias: Any = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Normalise each channel of each sample over its spatial dimensions, then scale and
    shift per channel.

    Args:
        input: shape ``(N, C, *spatial)`` with at least one spatial dimension.
        running_mean: None or shape ``(C,)``.
        running_var: None or shape ``(C,)``.
        weight: None or shape ``(C,)``.
        bias: None or shape ``(C,)``.
        use_input_stats: normalise with each instance's statistics; False uses the running
            statistics (which must then be given).
        momentum: the weight of the batch-averaged instance statistics in the new running
            statistics.
        eps: added to the variance.

    Returns:
        The output shaped like ``input``; or, when ``use_input_stats`` and a running
        statistic is given, ``(output, new_running_mean, new_running_var)``: the running
        statistics move towards the batch means of the instance means and unbiased
        variances (see the module docstring). The inputs are never modified.

    Raises:
        ShapeError: ``input`` has fewer than 3 dimensions, or a parameter shape.
        ArgumentError: ``use_input_stats=False`` without running statistics, a single
            spatial element with ``use_input_stats``, or a bad ``momentum``/``eps``.

    Example:
        >>> fnn.instance_norm(np.random.randn(2, 3, 5)).shape   # (2, 3, 5)
    """
    x = float_array(input, "instance_norm")
    c = _channels("instance_norm", x, min_ndim=3)
    check_number("instance_norm", "momentum", momentum)
    check_number("instance_norm", "eps", eps, lo=0.0)
    rm = _running("instance_norm", "running_mean", running_mean, c)
    rv = _running("instance_norm", "running_var", running_var, c)
    w = _check_param("instance_norm", "weight", weight, (c,))
    b = _check_param("instance_norm", "bias", bias, (c,))
    if not use_input_stats:
        if rm is None or rv is None:
            raise ArgumentError("functx.nn.instance_norm: running_mean and running_var must "
                                "be given when use_input_stats=False.")
        return batch_norm(x, rm, rv, w, b, training=False, eps=eps)
    axes = tuple(range(2, x.ndim))
    count = math.prod(x.shape[2:])
    if count <= 1:
        raise ArgumentError(f"functx.nn.instance_norm: expected more than 1 spatial element "
                            f"when using input statistics, but input has shape "
                            f"{tuple(x.shape)}.")
    y, mean, var = _standardize(x, axes, eps)
    y = _affine(y, _per_channel(w, x.ndim), _per_channel(b, x.ndim))
    if rm is None and rv is None:
        return y
    n = x.shape[0]
    mean_c = fnp.mean(fnp.reshape(mean, (n, c)), axis=0)
    var_c = fnp.mean(fnp.reshape(fnp.multiply(var, count / (count - 1)), (n, c)), axis=0)
    return (y, _new_running("instance_norm", rm, mean_c, momentum),
            _new_running("instance_norm", rv, var_c, momentum))


def local_response_norm(input: Any, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Any:
    """Divide each element by ``(k + alpha * mean(window of squares))**beta``, the window
    being ``size`` neighbouring channels (``size // 2`` before, ``(size - 1) // 2`` after,
    zeros beyond the edges, always divided by ``size``), as in PyTorch (and AlexNet).

    Args:
        input: shape ``(N, C, *)`` with at least 3 dimensions.
        size: the number of channels in each window (a positive int).
        alpha: the multiplicative factor.
        beta: the exponent.
        k: the additive constant.

    Returns:
        A float array shaped like ``input``.

    Raises:
        ShapeError: fewer than 3 dimensions.
        ArgumentError: ``size`` is not a positive int.

    Example:
        >>> fnn.local_response_norm(np.ones((1, 4, 2, 2)), 2).shape   # (1, 4, 2, 2)
    """
    fn = "local_response_norm"
    x = float_array(input, fn)
    n = check_int(fn, "size", size, lo=1)
    a, b, kk = (check_number(fn, name, v) for name, v in (("alpha", alpha), ("beta", beta),
                                                           ("k", k)))
    if x.ndim < 3:
        raise ShapeError(f"functx.nn.{fn}: expected an input of 3 or more dimensions (N, C, "
                         f"*), but it has shape {tuple(x.shape)}.")
    if x.size == 0:
        return x
    c = x.shape[1]
    widths = [(0, 0)] * x.ndim
    widths[1] = (n // 2, (n - 1) // 2)
    sq = fnp.pad(fnp.multiply(x, x), widths)
    total = sq[:, 0:c]
    for i in range(1, n):
        total = fnp.add(total, sq[:, i:i + c])
    div = fnp.power(fnp.add(fnp.multiply(fnp.divide(total, float(n)), a), kk), b)
    return fnp.divide(x, div)


def normalize(input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Any = None) -> Any:
    """``input / max(norm_p(input, dim), eps)``: unit ``p``-norm vectors along ``dim``.

    The norm is ``torch.linalg.vector_norm``'s (see functx.nn.distance); below ``eps`` the
    clamp takes over and no gradient flows through the norm (as in PyTorch).

    Args:
        input: an array (at least 1-d).
        p: the order of the norm (``inf`` allowed).
        dim: the axis of the vectors.
        eps: the smallest norm divided by.
        out: must be None: functx never writes into an existing array (use the result).

    Returns:
        A float array shaped like ``input``.

    Raises:
        ArgumentError: ``dim`` out of range, a bad ``p``/``eps``, or ``out`` given.

    Example:
        >>> fnn.normalize(np.array([[3.0, 4.0]]))   # [[0.6, 0.8]]
    """
    fn = "normalize"
    if out is not None:
        raise ArgumentError(f"functx.nn.{fn}: out= is not supported: functx arrays are "
                            "immutable; use the returned array instead.")
    x = float_array(input, fn)
    pv = check_number(fn, "p", p)
    e = check_number(fn, "eps", eps)
    if x.ndim == 0:
        raise ArgumentError(f"functx.nn.{fn}: input must have at least 1 dimension, but it "
                            "is 0-d.")
    d = norm_dim(fn, dim, x.ndim)
    nrm = vector_norm(x, pv, d, keepdims=True)
    return fnp.divide(x, fnp.where(fnp.less(nrm, e), e, nrm))


def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None,
                epsilon: float = 1e-5, where: Any = None, *, algorithm: str = "fast") -> Any:
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis`` (``jax.nn.standardize``).

    Args:
        x: an array.
        axis: an int, a tuple of ints or None (all axes).
        mean: None (``x``'s mean over ``axis``, kept dims) or an array broadcasting to ``x``.
        variance: None or an array broadcasting to ``x``. If None: with
            ``algorithm="fast"`` (JAX's default) ``mean(x**2) - mean**2`` clipped at 0,
            with ``"stable"`` the two-pass ``mean((x - mean)**2)``.
        epsilon: added to the variance.
        where: None or a bool array broadcasting to ``x``: only those entries enter the
            mean and variance.
        algorithm: "fast" or "stable" (see ``variance``).

    Returns:
        A float array shaped like ``x``.

    Raises:
        ArgumentError: a bad ``algorithm``.

    Example:
        >>> fnn.standardize(np.array([1.0, 3.0]))   # [-1., 1.] (nearly)
    """
    check_option("standardize", "algorithm", algorithm, ("fast", "stable"))
    v = float_array(x, "standardize", "x")
    m = None if where is None else fnp.broadcast_to(array(where), tuple(v.shape))

    def avg(a: Any) -> Any:
        if m is None:
            return fnp.mean(a, axis=axis, keepdims=True)
        total = fnp.sum(fnp.where(m, a, 0.0), axis=axis, keepdims=True)
        return fnp.divide(total, fnp.sum(fnp.astype(m, v.dtype), axis=axis, keepdims=True))

    if mean is None:
        mean = avg(v)
    if variance is None:
        if algorithm == "stable":
            d = fnp.subtract(v, mean)
            variance = avg(fnp.multiply(d, d))
        else:
            variance = fnp.maximum(fnp.subtract(avg(fnp.multiply(v, v)),
                                                fnp.multiply(mean, mean)), 0.0)
    return fnp.divide(fnp.subtract(v, mean), fnp.sqrt(fnp.add(variance, epsilon)))
