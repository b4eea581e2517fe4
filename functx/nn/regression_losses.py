"""Regression losses: mse_loss, l1_loss, smooth_l1_loss, huber_loss (torch.nn.functional's
names, arguments and defaults).

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

from typing import Any

import functx.numpy as fnp
from functx.errors import ShapeError
from functx.nn._util import (check_number, check_reduction, float_array, legacy_reduction,
                             reduce_loss, warn_target_broadcast)

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"]


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
