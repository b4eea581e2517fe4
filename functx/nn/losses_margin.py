"""Margin and embedding losses with torch.nn.functional's names, arguments and defaults:
margin_ranking_loss, hinge_embedding_loss, soft_margin_loss, multilabel_margin_loss,
multilabel_soft_margin_loss, multi_margin_loss, cosine_embedding_loss,
triplet_margin_loss and triplet_margin_with_distance_loss.

Shared conventions (PyTorch's): ``reduction`` is "none", "mean" or "sum" ("mean" averages
the per-sample losses, never weights them); the deprecated ``size_average``/``reduce``
override it, with a warning. Labels ``y`` are +1/-1 floats where the formula needs a sign.
Hinges ``max(0, z)`` have PyTorch's gradient at ``z = 0``: 1 in the losses PyTorch writes
with ``clamp_min`` (margin_ranking, hinge_embedding, cosine_embedding, the triplet losses),
0 in those whose kernels test ``z > 0`` (multi_margin, multilabel_margin). Soft margins use ``logaddexp(0, -y x)``
and ``log_sigmoid``, never ``log(1 + exp(...))``, so nothing overflows. Class indices are
checked where their values are known (not inside ``vmap``/``make_trace``).

Example:
    >>> import functx.nn as fnn
    >>> fnn.margin_ranking_loss(np.array([1.0]), np.array([0.0]), np.array([1.0]))   # 0.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import functx.numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.nn._util import (ArgumentError, array, broadcastable, check_number, check_reduction,
                             float_array, host_value, legacy_reduction, reduce_loss)
from functx.nn.activations import log_sigmoid
from functx.nn.distance import pairwise_distance

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "multilabel_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"]


def _hinge(z: Any) -> Any:
    """``max(z, 0)`` with gradient 0 at 0 (PyTorch's ``z > 0`` tests)."""
    return fnp.where(fnp.greater(z, 0), z, 0.0)


def _clamp0(z: Any) -> Any:
    """``max(z, 0)`` with gradient 1 at 0 (PyTorch's ``clamp_min(z, 0)``)."""
    return fnp.where(fnp.greater_equal(z, 0), z, 0.0)


def _reduction(fn: str, size_average: Any, reduce: Any, reduction: str) -> str:
    reduction = legacy_reduction(fn, size_average, reduce, reduction)
    check_reduction(fn, reduction)
    return reduction


def _broadcasting(fn: str, **named: Any) -> list:
    arrays = [float_array(v, fn, k) for k, v in named.items()]
    shapes = [tuple(a.shape) for a in arrays]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        listing = ", ".join(f"{k} {s}" for k, s in zip(named, shapes))
        raise ShapeError(f"functx.nn.{fn}: the shapes do not broadcast: {listing}.") from None
    return arrays


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Any:
    """``max(0, -y * (x1 - x2) + margin)``: ``y = 1`` says ``x1`` should rank higher.

    Args:
        input1: scores ``x1``.
        input2: scores ``x2``, same number of dimensions.
        target: ``y`` in {1, -1}, same number of dimensions (the three broadcast).
        margin: the required gap.
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: different numbers of dimensions, or shapes that do not broadcast.
        ArgumentError: a bad ``reduction`` or ``margin``.

    Example:
        >>> fnn.margin_ranking_loss(np.array([0.2]), np.array([0.5]), np.array([1.0]))  # 0.3
    """
    fn = "margin_ranking_loss"
    reduction = _reduction(fn, size_average, reduce, reduction)
    m = check_number(fn, "margin", margin)
    a, b, y = _broadcasting(fn, input1=input1, input2=input2, target=target)
    if not a.ndim == b.ndim == y.ndim:
        raise ShapeError(f"functx.nn.{fn}: all inputs must have the same number of dimensions, "
                         f"but got input1 {tuple(a.shape)}, input2 {tuple(b.shape)} and target "
                         f"{tuple(y.shape)}.")
    loss = _clamp0(fnp.add(fnp.negative(fnp.multiply(y, fnp.subtract(a, b))), m))
    return reduce_loss(fn, loss, reduction)


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Any:
    """``x`` where ``y = 1``, ``max(0, margin - x)`` where ``y = -1`` (for ``x`` a distance;
    other ``y`` values get both terms, as in PyTorch).

    Args:
        input: ``x``, e.g. distances between pairs.
        target: ``y`` in {1, -1}, broadcasting with ``input``.
        margin: the distance dissimilar pairs are pushed beyond.
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: shapes that do not broadcast.
        ArgumentError: a bad ``reduction`` or ``margin``.

    Example:
        >>> fnn.hinge_embedding_loss(np.array([0.3, 0.4]), np.array([1.0, -1.0]))  # 0.45
    """
    fn = "hinge_embedding_loss"
    reduction = _reduction(fn, size_average, reduce, reduction)
    m = check_number(fn, "margin", margin)
    x, y = _broadcasting(fn, input=input, target=target)
    neg = fnp.where(fnp.not_equal(y, 1), _clamp0(fnp.subtract(m, x)), 0.0)
    pos = fnp.where(fnp.not_equal(y, -1), x, 0.0)
    return reduce_loss(fn, fnp.add(neg, pos), reduction)


def soft_margin_loss(input: Any, target: Any, size_average: bool | None = None,
                     reduce: bool | None = None, reduction: str = "mean") -> Any:
    """The two-class logistic loss ``log(1 + exp(-y * x))``, as ``logaddexp(0, -y * x)``.

    Args:
        input: scores ``x``.
        target: ``y`` in {1, -1}, broadcasting with ``input``.
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the elementwise losses for ``reduction="none"``.

    Raises:
        ShapeError: shapes that do not broadcast.
        ArgumentError: a bad ``reduction``.

    Example:
        >>> fnn.soft_margin_loss(np.array([0.0]), np.array([1.0]))   # log(2)
    """
    fn = "soft_margin_loss"
    reduction = _reduction(fn, size_average, reduce, reduction)
    x, y = _broadcasting(fn, input=input, target=target)
    z = fnp.negative(fnp.multiply(x, y))
    return reduce_loss(fn, fnp.logaddexp(fnp.zeros_like(z), z), reduction)


def _samples(fn: str, x: Any) -> Any:
    """``x`` as ``(N, C)`` (a 1-d input is one sample)."""
    if x.ndim not in (1, 2):
        raise ShapeError(f"functx.nn.{fn}: input must be 1-d (C,) or 2-d (N, C), but it has "
                         f"shape {tuple(x.shape)}.")
    return fnp.expand_dims(x, 0) if x.ndim == 1 else x


def _per_sample(loss: Any, one: bool, reduction: str, fn: str) -> Any:
    if reduction == "none":
        return fnp.squeeze(loss, 0) if one else loss
    return reduce_loss(fn, loss, reduction)


def multilabel_margin_loss(input: Any, target: Any, size_average: bool | None = None,
                           reduce: bool | None = None, reduction: str = "mean") -> Any:
    """The multi-label hinge loss: ``sum_{j in targets} sum_{i not in targets}
    max(0, 1 - (x[j] - x[i])) / C`` per sample.

    ``target`` holds each sample's target classes first, then -1 and anything after it is
    ignored (PyTorch's format): ``[3, 0, -1, 1]`` means classes 3 and 0.

    Args:
        input: ``(C,)`` or ``(N, C)`` scores.
        target: int, input's shape: class indices in ``[0, C)``, ended by -1.
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the per-sample losses ``(N,)`` (``()`` for a 1-d input).

    Raises:
        ShapeError: bad ranks or mismatched shapes.
        DTypeError: a non-integer target.
        ArgumentError: a target outside ``[-1, C)``, or a bad ``reduction``.

    Example:
        >>> fnn.multilabel_margin_loss(np.array([[0.1, 0.2, 0.4, 0.8]]),
        ...                            np.array([[3, 0, -1, 1]]))   # 0.85
    """
    fn = "multilabel_margin_loss"
    reduction = _reduction(fn, size_average, reduce, reduction)
    x = float_array(input, fn)
    t = array(target)
    if np.dtype(t.dtype).kind not in "iu":
        raise DTypeError(f"functx.nn.{fn}: target must hold integer class indices, but it has "
                         f"dtype {t.dtype}.")
    if tuple(t.shape) != tuple(x.shape):
        raise ShapeError(f"functx.nn.{fn}: target must have input's shape {tuple(x.shape)}, "
                         f"but it has shape {tuple(t.shape)}.")
    one = x.ndim == 1
    x = _samples(fn, x)
    t = fnp.expand_dims(t, 0) if one else t
    c = x.shape[1]
    v = host_value(t)
    if v is not None and v.size and (v.min() < -1 or v.max() >= c):
        raise ArgumentError(f"functx.nn.{fn}: target values must be in [-1, {c - 1}] for {c} "
                            f"classes, but got {v[(v < -1) | (v >= c)].ravel()[0]}.")
    # the targets before the first -1 (N, J)
    valid = fnp.greater(fnp.cumprod(fnp.astype(fnp.not_equal(t, -1), np.int64), axis=1), 0)
    safe = fnp.where(valid, t, 0)
    classes = fnp.arange(c, like=t)
    is_target = fnp.any(fnp.logical_and(fnp.expand_dims(valid, -1),
                                        fnp.equal(fnp.expand_dims(safe, -1), classes)),
                        axis=1)   # (N, C)
    xt = fnp.take_along_axis(x, safe, axis=1)   # (N, J)
    z = fnp.add(fnp.subtract(1.0, fnp.expand_dims(xt, -1)), fnp.expand_dims(x, 1))   # N, J, C
    use = fnp.logical_and(fnp.expand_dims(valid, -1),
                          fnp.logical_not(fnp.expand_dims(is_target, 1)))
    loss = fnp.divide(fnp.sum(fnp.where(use, _hinge(z), 0.0), axis=(1, 2)), float(c))
    return _per_sample(loss, one, reduction, fn)


def multilabel_soft_margin_loss(input: Any, target: Any, weight: Any = None,
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Any:
    """The multi-label one-versus-all logistic loss: ``-mean_c(w_c * (y_c *
    log_sigmoid(x_c) + (1 - y_c) * log_sigmoid(-x_c)))`` per sample (the class dimension is
    the last).

    Args:
        input: scores ``(N, C)`` (or ``(C,)``; the last dimension is the classes).
        target: ``y`` in {0, 1}, broadcasting with ``input``.
        weight: None or per-class weights broadcasting with ``input``.
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the per-sample losses (input's shape without the last dimension).

    Raises:
        ShapeError: shapes that do not broadcast, or a 0-d input.
        ArgumentError: a bad ``reduction``.

    Example:
        >>> fnn.multilabel_soft_margin_loss(np.zeros((1, 3)), np.array([[1.0, 0.0, 1.0]]))
    """
    fn = "multilabel_soft_margin_loss"
    reduction = _reduction(fn, size_average, reduce, reduction)
    x, y = _broadcasting(fn, input=input, target=target)
    if x.ndim == 0:
        raise ShapeError(f"functx.nn.{fn}: input needs a class dimension (its last), but it is "
                         "0-d.")
    loss = fnp.negative(fnp.add(fnp.multiply(y, log_sigmoid(x)),
                                fnp.multiply(fnp.subtract(1.0, y), log_sigmoid(fnp.negative(x)))))
    if weight is not None:
        (w,) = _broadcasting(fn, weight=weight)
        if not broadcastable(w.shape, loss.shape):
            raise ShapeError(f"functx.nn.{fn}: weight of shape {tuple(w.shape)} does not "
                             f"broadcast with the input's shape {tuple(x.shape)}.")
        loss = fnp.multiply(loss, w)
    loss = fnp.divide(fnp.sum(loss, axis=-1), float(x.shape[-1]))
    return reduce_loss(fn, loss, reduction)


def multi_margin_loss(input: Any, target: Any, p: int = 1, margin: float = 1.0,
                      weight: Any = None, size_average: bool | None = None,
                      reduce: bool | None = None, reduction: str = "mean") -> Any:
    """The multi-class hinge loss: ``sum_{i != y} w[y] * max(0, margin - x[y] + x[i])**p / C``
    per sample.

    Args:
        input: ``(N, C)`` or ``(C,)`` scores.
        target: int class indices ``(N,)`` (``()`` for a 1-d input) in ``[0, C)``.
        p: 1 or 2.
        margin: the required gap between the target's score and the others.
        weight: None or per-class weights ``(C,)`` (each sample weighted by its target's).
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the per-sample losses for ``reduction="none"``.

    Raises:
        ShapeError: bad ranks or mismatched shapes.
        DTypeError: a non-integer target.
        ArgumentError: ``p`` not 1 or 2, a class index out of range, a bad ``reduction``.

    Example:
        >>> fnn.multi_margin_loss(np.array([[0.1, 0.2, 0.4, 0.8]]), np.array([3]))   # 0.325
    """
    fn = "multi_margin_loss"
    reduction = _reduction(fn, size_average, reduce, reduction)
    if isinstance(p, (bool, np.bool_)) or p not in (1, 2):
        raise ArgumentError(f"functx.nn.{fn}: only p == 1 and p == 2 are supported, but got "
                            f"p={p!r}.")
    m = check_number(fn, "margin", margin)
    x = float_array(input, fn)
    t = array(target)
    if np.dtype(t.dtype).kind not in "iu":
        raise DTypeError(f"functx.nn.{fn}: target must hold integer class indices, but it has "
                         f"dtype {t.dtype}.")
    one = x.ndim == 1
    x = _samples(fn, x)
    n, c = x.shape
    if tuple(t.shape) not in ((n,), () if one else (n,)):
        raise ShapeError(f"functx.nn.{fn}: target must have shape {() if one else (n,)} "
                         f"for input of shape {tuple(array(input).shape)}, but it has shape "
                         f"{tuple(t.shape)}.")
    t = fnp.reshape(t, (n,))
    v = host_value(t)
    if v is not None and v.size and (v.min() < 0 or v.max() >= c):
        raise ArgumentError(f"functx.nn.{fn}: target holds the class index "
                            f"{v[(v < 0) | (v >= c)].ravel()[0]}, out of range for {c} "
                            "classes.")
    xt = fnp.take_along_axis(x, fnp.expand_dims(t, 1), axis=1)   # (N, 1)
    h = _hinge(fnp.add(fnp.subtract(m, xt), x))
    if p == 2:
        h = fnp.multiply(h, h)
    others = fnp.not_equal(fnp.expand_dims(t, 1), fnp.arange(c, like=t))
    h = fnp.where(others, h, 0.0)
    if weight is not None:
        w = float_array(weight, fn, "weight")
        if tuple(w.shape) != (c,):
            raise ShapeError(f"functx.nn.{fn}: weight must have one entry per class, shape "
                             f"({c},), but it has shape {tuple(w.shape)}.")
        h = fnp.multiply(h, fnp.expand_dims(fnp.take(w, t), 1))
    loss = fnp.divide(fnp.sum(h, axis=1), float(c))
    return _per_sample(loss, one, reduction, fn)


_COS_EPS = 1e-12


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Any:
    """``1 - cos(x1, x2)`` where ``y = 1``, ``max(0, cos(x1, x2) - margin)`` where ``y = -1``
    (0 for other ``y``), with PyTorch's ``cos = x1.x2 / sqrt((|x1|**2 + 1e-12) * (|x2|**2 +
    1e-12))``.

    Args:
        input1: ``(N, D)``, or ``(D,)`` with a 0-d target.
        input2: ``input1``'s shape.
        target: ``y`` in {1, -1}: ``(N,)``, or ``()``.
        margin: in ``[-1, 1]``; 0 to 0.5 is typical.
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the per-pair losses for ``reduction="none"``.

    Raises:
        ShapeError: a target of more than 1 dimension, or inputs of the wrong rank.
        ArgumentError: a bad ``reduction`` or ``margin``.

    Example:
        >>> fnn.cosine_embedding_loss(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]),
        ...                           np.array([1.0]))   # 1.
    """
    fn = "cosine_embedding_loss"
    reduction = _reduction(fn, size_average, reduce, reduction)
    m = check_number(fn, "margin", margin)
    a, b, y = (float_array(v, fn, k) for k, v in (("input1", input1), ("input2", input2),
                                                  ("target", target)))
    if y.ndim not in (0, 1):
        raise ShapeError(f"functx.nn.{fn}: target must be 0-d or 1-d (multi-target is not "
                         f"supported), but it has shape {tuple(y.shape)}.")
    want = y.ndim + 1
    if a.ndim != want or b.ndim != want:
        raise ShapeError(f"functx.nn.{fn}: a {y.ndim}-d target needs {want}-d inputs, but "
                         f"they have shapes {tuple(a.shape)} and {tuple(b.shape)}.")
    d = y.ndim
    prod = fnp.sum(fnp.multiply(a, b), axis=d)
    mag1 = fnp.add(fnp.sum(fnp.multiply(a, a), axis=d), _COS_EPS)
    mag2 = fnp.add(fnp.sum(fnp.multiply(b, b), axis=d), _COS_EPS)
    cos = fnp.divide(prod, fnp.sqrt(fnp.multiply(mag1, mag2)))
    pos = fnp.where(fnp.equal(y, 1), fnp.subtract(1.0, cos), 0.0)
    neg = fnp.where(fnp.equal(y, -1), _clamp0(fnp.subtract(cos, m)), 0.0)
    return reduce_loss(fn, fnp.add(pos, neg), reduction)


def _triplet(fn: str, anchor: Any, positive: Any, negative: Any, dist: Callable,
             margin: float, swap: bool, reduction: str) -> Any:
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(f"functx.nn.{fn}: anchor, positive and negative must have the same "
                         f"number of dimensions, but got shapes {tuple(anchor.shape)}, "
                         f"{tuple(positive.shape)} and {tuple(negative.shape)}.")
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = fnp.minimum(d_neg, dist(positive, negative))
    return reduce_loss(fn, _clamp0(fnp.subtract(fnp.add(margin, d_pos), d_neg)), reduction)


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Any:
    """``max(0, margin + d(a, p) - d(a, n))`` with ``d = pairwise_distance(., ., p, eps)``
    along the last dimension.

    Args:
        anchor: ``(N, D)`` or ``(D,)``.
        positive: like ``anchor`` (broadcasting).
        negative: like ``anchor`` (broadcasting).
        margin: > 0.
        p: the order of the norm.
        eps: added to the differences (see :func:`pairwise_distance`).
        swap: use ``min(d(a, n), d(p, n))`` as the negative distance (the distance swap of
            Balntas et al.).
        size_average: deprecated (see ``reduction``).
        reduce: deprecated (see ``reduction``).
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the per-triplet losses for ``reduction="none"``.

    Raises:
        ShapeError: different numbers of dimensions or shapes that do not broadcast.
        ArgumentError: ``margin <= 0`` or a bad ``reduction``.

    Example:
        >>> fnn.triplet_margin_loss(a, pos, neg, margin=0.5, swap=True)
    """
    fn = "triplet_margin_loss"
    reduction = _reduction(fn, size_average, reduce, reduction)
    m = check_number(fn, "margin", margin, lo=0.0, lo_open=True)
    pv, e = check_number(fn, "p", p), check_number(fn, "eps", eps)
    a, pos, neg = (float_array(v, fn, k) for k, v in (("anchor", anchor), ("positive", positive),
                                                      ("negative", negative)))
    return _triplet(fn, a, pos, neg, lambda u, w: pairwise_distance(u, w, pv, e), m,
                    bool(swap), reduction)


def triplet_margin_with_distance_loss(anchor: Any, positive: Any, negative: Any, *,
                                      distance_function: Callable[[Any, Any], Any] | None = None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Any:
    """:func:`triplet_margin_loss` with any distance: ``max(0, margin + d(a, p) - d(a, n))``.

    Args:
        anchor: an array (the three have the same number of dimensions).
        positive: like ``anchor``.
        negative: like ``anchor``.
        distance_function: a function of two arrays returning their distances (a functx
            function, so that it can be differentiated); None means
            :func:`pairwise_distance`.
        margin: > 0.
        swap: use ``min(d(a, n), d(p, n))`` as the negative distance.
        reduction: "none", "mean" or "sum".

    Returns:
        A scalar, or the per-triplet losses for ``reduction="none"``.

    Raises:
        ShapeError: different numbers of dimensions.
        ArgumentError: ``margin <= 0`` or a bad ``reduction``.

    Example:
        >>> fnn.triplet_margin_with_distance_loss(
        ...     a, pos, neg, distance_function=lambda u, v: 1 - fnn.cosine_similarity(u, v))
    """
    fn = "triplet_margin_with_distance_loss"
    check_reduction(fn, reduction)
    m = check_number(fn, "margin", margin, lo=0.0, lo_open=True)
    dist = pairwise_distance if distance_function is None else distance_function
    a, pos, neg = (array(v) for v in (anchor, positive, negative))
    return _triplet(fn, a, pos, neg, dist, m, bool(swap), reduction)
