"""Regression losses: mse_loss, l1_loss, smooth_l1_loss, huber_loss, and the likelihood
losses gaussian_nll_loss and poisson_nll_loss (torch.nn.functional's names, arguments and
defaults).

As in PyTorch: ``input`` and ``target`` broadcast, with a warning when their shapes differ;
``reduction`` is "none", "mean" or "sum"; the deprecated ``size_average``/``reduce``
arguments override it, with a warning. The optional ``weight`` (elementwise, input's shape)
gives "mean" = ``sum(weight * loss) / sum(weight)`` for mse_loss and l1_loss but
``mean(weight * loss)`` for huber_loss: PyTorch's definitions, kept as they are.

Example:
    >>> import functx.nn as fnn
    >>> fnn.mse_loss(np.array([1.0, 2.0]), np.array([0.0, 0.0]))   # 2.5
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import ShapeError
from functx.nn._util import (ArgumentError, broadcastable, check_number, check_reduction,
                             float_array, host_value, legacy_reduction, reduce_loss,
                             warn_target_broadcast)
from functx.primitives.misc import stop_gradient

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "gaussian_nll_loss",
           "poisson_nll_loss"]


def _operands(fn: str, input: Any, target: Any) -> tuple[Any, Any]:
    x = float_array(input, fn)
    t = float_array(target, fn, "target")
    warn_target_broadcast(fn, x, t)
    return x, t


def _weight(fn: str, weight: Any, x: Any) -> Any:
    if weight is None:
        return None
    w = float_array(weight, fn, "weight")
    if tuple(w.shape) != tuple(x.shape):
        raise ShapeError(f"functx.nn.{fn}: weight must have input's shape {tuple(x.shape)}, "
                         f"but it has shape {tuple(w.shape)}.")
    return w


def _reduce(fn: str, loss: Any, w: Any, reduction: str, mean_by_weight: bool = True) -> Any:
    if w is None:
        return reduce_loss(fn, loss, reduction)
    loss = fnp.multiply(loss, w)
    if reduction == "mean" and mean_by_weight:
        return fnp.divide(fnp.sum(loss), fnp.sum(w))
    return reduce_loss(fn, loss, reduction)


def mse_loss(input: Any, target: Any, size_average: bool | None = None,
             reduce: bool | None = None, reduction: str = "mean", weight: Any = None) -> Any:
    """The squared error ``(input - target)**2``, reduced.

    Args:
        input: predictions.
        target: targets (broadcasting with ``input``; a warning if the shapes differ).
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".
        weight: None or elementwise weights of input's shape; "mean" then divides the
            weighted sum by ``sum(weight)``.

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: shapes that do not broadcast, or ``weight``'s shape.
        ArgumentError: a bad ``reduction``.

    Example:
        >>> fnn.mse_loss(pred, y)
    """
    reduction = legacy_reduction("mse_loss", size_average, reduce, reduction)
    check_reduction("mse_loss", reduction)
    x, t = _operands("mse_loss", input, target)
    w = _weight("mse_loss", weight, x)
    d = fnp.subtract(x, t)
    return _reduce("mse_loss", fnp.multiply(d, d), w, reduction)


def l1_loss(input: Any, target: Any, size_average: bool | None = None,
            reduce: bool | None = None, reduction: str = "mean", weight: Any = None) -> Any:
    """The absolute error ``|input - target|``, reduced (gradient 0 where they are equal).

    Args:
        input: predictions.
        target: targets (broadcasting with ``input``; a warning if the shapes differ).
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".
        weight: None or elementwise weights of input's shape; "mean" then divides the
            weighted sum by ``sum(weight)``.

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: shapes that do not broadcast, or ``weight``'s shape.
        ArgumentError: a bad ``reduction``.

    Example:
        >>> fnn.l1_loss(pred, y, reduction="sum")
    """
    reduction = legacy_reduction("l1_loss", size_average, reduce, reduction)
    check_reduction("l1_loss", reduction)
    x, t = _operands("l1_loss", input, target)
    w = _weight("l1_loss", weight, x)
    return _reduce("l1_loss", fnp.abs(fnp.subtract(x, t)), w, reduction)


def smooth_l1_loss(input: Any, target: Any, size_average: bool | None = None,
                   reduce: bool | None = None, reduction: str = "mean",
                   beta: float = 1.0) -> Any:
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``
    (``d = input - target``); ``beta = 0`` is the L1 loss.

    Args:
        input: predictions.
        target: targets (broadcasting with ``input``; a warning if the shapes differ).
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".
        beta: the threshold between the quadratic and linear pieces (>= 0).

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: shapes that do not broadcast.
        ArgumentError: a negative ``beta``, or a bad ``reduction``.

    Example:
        >>> fnn.smooth_l1_loss(pred, y, beta=0.5)
    """
    reduction = legacy_reduction("smooth_l1_loss", size_average, reduce, reduction)
    check_reduction("smooth_l1_loss", reduction)
    b = check_number("smooth_l1_loss", "beta", beta, lo=0.0)
    x, t = _operands("smooth_l1_loss", input, target)
    a = fnp.abs(fnp.subtract(x, t))
    if b == 0:
        return reduce_loss("smooth_l1_loss", a, reduction)
    loss = fnp.where(fnp.less(a, b), fnp.divide(fnp.multiply(0.5, fnp.multiply(a, a)), b),
                     fnp.subtract(a, 0.5 * b))
    return reduce_loss("smooth_l1_loss", loss, reduction)


def huber_loss(input: Any, target: Any, reduction: str = "mean", delta: float = 1.0,
               weight: Any = None) -> Any:
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``
    (``d = input - target``): ``delta * smooth_l1_loss(beta=delta)``.

    Args:
        input: predictions.
        target: targets (broadcasting with ``input``; a warning if the shapes differ).
        reduction: "none", "mean" or "sum".
        delta: the threshold (> 0).
        weight: None or elementwise weights of input's shape; "mean" is then
            ``mean(weight * loss)`` (PyTorch's definition, unlike mse_loss/l1_loss).

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: shapes that do not broadcast, or ``weight``'s shape.
        ArgumentError: a non-positive ``delta``, or a bad ``reduction``.

    Example:
        >>> fnn.huber_loss(pred, y, delta=2.0)
    """
    check_reduction("huber_loss", reduction)
    dl = check_number("huber_loss", "delta", delta, lo=0.0, lo_open=True)
    x, t = _operands("huber_loss", input, target)
    w = _weight("huber_loss", weight, x)
    d = fnp.subtract(x, t)
    a = fnp.abs(d)
    loss = fnp.where(fnp.less(a, dl), fnp.multiply(0.5, fnp.multiply(d, d)),
                     fnp.multiply(dl, fnp.subtract(a, 0.5 * dl)))
    return _reduce("huber_loss", loss, w, reduction, mean_by_weight=False)


def _gaussian_var(fn: str, x: Any, var: Any) -> Any:
    """``var`` checked (non-negative where known) and shaped as PyTorch allows: input's
    shape, input's shape without the last dimension, or one dimension of size 1."""
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ArgumentError(f"functx.nn.{fn}: var has a negative entry ({var}); variances "
                                "must be non-negative.")
        return fnp.full_like(x, float(var))
    v = float_array(var, fn, "var")
    known = host_value(v)
    if known is not None and np.any(known < 0):
        raise ArgumentError(f"functx.nn.{fn}: var has negative entry/entries (e.g. "
                            f"{known[known < 0].ravel()[0]}); variances must be non-negative.")
    xs, vs = tuple(x.shape), tuple(v.shape)
    if vs == xs:
        return v
    if xs[:-1] == vs:
        return fnp.expand_dims(v, -1)
    if len(xs) == len(vs) and sum(b for a, b in zip(xs, vs) if a != b) == 1:
        return v
    raise ShapeError(f"functx.nn.{fn}: var of shape {vs} is of incorrect size for input of "
                     f"shape {xs}: pass input's shape, input's shape without its last "
                     "dimension, or input's shape with one dimension of size 1.")


def gaussian_nll_loss(input: Any, target: Any, var: Any, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Any:
    """The Gaussian negative log-likelihood ``0.5 * (log(var) + (input - target)**2 / var)``
    (plus ``0.5 * log(2 pi)`` with ``full``).

    As in PyTorch, ``var`` is clamped below at ``eps`` for the computation, but the clamp
    is not differentiated: the gradient with respect to ``var`` is the formula's derivative
    at the clamped value.

    Args:
        input: the predicted means.
        target: the observations (broadcasting with ``input``).
        var: the predicted variances, non-negative: a number, an array of input's shape,
            of input's shape without the last dimension (one variance per vector), or with
            one dimension of size 1 (shared along it).
        full: add the constant ``0.5 * log(2 pi)``.
        eps: the smallest variance used.
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: a ``var`` of another shape.
        ArgumentError: a negative variance (where known), or a bad ``reduction``/``eps``.

    Example:
        >>> fnn.gaussian_nll_loss(np.array([0.0]), np.array([1.0]), np.array([1.0]))   # 0.5
    """
    fn = "gaussian_nll_loss"
    check_reduction(fn, reduction)
    e = check_number(fn, "eps", eps, lo=0.0)
    x = float_array(input, fn)
    t = float_array(target, fn, "target")
    v = _gaussian_var(fn, x, var)
    v = fnp.add(v, stop_gradient(fnp.subtract(fnp.maximum(v, e), v)))
    d = fnp.subtract(x, t)
    loss = fnp.multiply(0.5, fnp.add(fnp.log(v), fnp.divide(fnp.multiply(d, d), v)))
    if full:
        loss = fnp.add(loss, 0.5 * math.log(2 * math.pi))
    return reduce_loss(fn, loss, reduction)


def poisson_nll_loss(input: Any, target: Any, log_input: bool = True, full: bool = False,
                     size_average: bool | None = None, eps: float = 1e-8,
                     reduce: bool | None = None, reduction: str = "mean") -> Any:
    """The Poisson negative log-likelihood: ``exp(input) - target * input`` for a log-rate
    ``input`` (``log_input=True``), else ``input - target * log(input + eps)``.

    With ``full``, Stirling's approximation of ``log(target!)``, ``target * log(target) -
    target + 0.5 * log(2 pi target)``, is added where ``target > 1`` (as in PyTorch; it
    depends on the target only, and is differentiable with respect to it).

    Args:
        input: log-rates (or rates with ``log_input=False``).
        target: counts, broadcasting with ``input``.
        log_input: whether ``input`` is the logarithm of the rate.
        full: add the Stirling term.
        size_average: deprecated (see ``reduction``).
        eps: added to the rate before its logarithm (``log_input=False``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: shapes that do not broadcast.
        ArgumentError: a bad ``reduction`` or ``eps``.

    Example:
        >>> fnn.poisson_nll_loss(np.array([0.0]), np.array([1.0]))   # 1.
    """
    fn = "poisson_nll_loss"
    reduction = legacy_reduction(fn, size_average, reduce, reduction)
    check_reduction(fn, reduction)
    e = check_number(fn, "eps", eps)
    x = float_array(input, fn)
    t = float_array(target, fn, "target")
    if not broadcastable(x.shape, t.shape):
        raise ShapeError(f"functx.nn.{fn}: input shape {tuple(x.shape)} and target shape "
                         f"{tuple(t.shape)} do not broadcast.")
    if log_input:
        loss = fnp.subtract(fnp.exp(x), fnp.multiply(t, x))
    else:
        loss = fnp.subtract(x, fnp.multiply(t, fnp.log(fnp.add(x, e))))
    if full:
        big = fnp.greater(t, 1)
        ts = fnp.where(big, t, 2.0)  # no log of values <= 1 where the term is not used
        stirling = fnp.add(fnp.subtract(fnp.multiply(ts, fnp.log(ts)), ts),
                           fnp.multiply(0.5, fnp.log(fnp.multiply(2 * math.pi, ts))))
        loss = fnp.add(loss, fnp.where(big, stirling, 0.0))
    return reduce_loss(fn, loss, reduction)
