"""Similarities and distances between vectors: cosine_similarity, pairwise_distance, pdist,
cdist (torch.nn.functional's and torch's conventions), and :func:`vector_norm`, the p-norm
they share (also used by functx.nn.normalization.normalize and the triplet losses).

p-norms follow ``torch.linalg.vector_norm``: ``p = inf`` is the largest magnitude,
``-inf`` the smallest, ``0`` the number of non-zero entries (no gradient), any other ``p``
``sum(|x|**p) ** (1/p)``. The gradient at the zero vector (and, for ``|x|**p``, at a zero
entry) is 0, the subgradient PyTorch's distance functions return, never NaN.

Example:
    >>> import functx.nn as fnn
    >>> fnn.cosine_similarity(np.array([[1.0, 0.0]]), np.array([[1.0, 1.0]]))   # [0.7071...]
    >>> fnn.cdist(np.zeros((2, 3)), np.ones((4, 3))).shape                       # (2, 4)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import ShapeError
from functx.nn._util import (ArgumentError, broadcastable, check_number, check_option,
                             float_array, norm_dim)
from functx.numpy._shape import on_device_of
from functx.primitives.misc import stop_gradient

__all__ = ["cosine_similarity", "pairwise_distance", "pdist", "cdist"]


def _norm(x: Any, dim: int) -> Any:
    """The 2-norm along ``dim`` (kept), with gradient 0 (not NaN) at the zero vector."""
    sq = fnp.sum(fnp.multiply(x, x), axis=dim, keepdims=True)
    zero = fnp.equal(sq, 0)
    return fnp.where(zero, 0.0, fnp.sqrt(fnp.where(zero, 1.0, sq)))


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """``sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps), dim)``: the cosine of the angle
    between ``x1`` and ``x2`` along ``dim``.

    As in PyTorch, each input is divided by its own norm (so the result stays in
    ``[-1, 1]``), the norms are clamped below at ``eps``, and the clamp is not
    differentiated (the gradient is that of the unclamped norm, scaled as in PyTorch).

    Args:
        x1: an array.
        x2: an array broadcasting with ``x1``.
        dim: the axis of the vectors (of the broadcast shape).
        eps: the lower bound of each norm (> 0 avoids division by zero).

    Returns:
        The broadcast shape without ``dim``.

    Raises:
        ShapeError: ``x1`` and ``x2`` do not broadcast.
        ArgumentError: ``dim`` out of range, or a negative ``eps``.

    Example:
        >>> fnn.cosine_similarity(a, b, dim=-1)
    """
    a = float_array(x1, "cosine_similarity", "x1")
    b = float_array(x2, "cosine_similarity", "x2")
    check_number("cosine_similarity", "eps", eps, lo=0.0)
    if not broadcastable(a.shape, b.shape):
        raise ShapeError(f"functx.nn.cosine_similarity: x1 of shape {tuple(a.shape)} and x2 "
                         f"of shape {tuple(b.shape)} do not broadcast.")
    shape = fnp.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    a, b = fnp.broadcast_to(a, shape), fnp.broadcast_to(b, shape)
    d = norm_dim("cosine_similarity", dim, len(shape))
    if not shape:
        a, b, d = fnp.reshape(a, (1,)), fnp.reshape(b, (1,)), 0

    def clamped(n: Any) -> Any:
        return fnp.add(n, stop_gradient(fnp.subtract(fnp.maximum(n, eps), n)))

    na, nb = clamped(_norm(a, d)), clamped(_norm(b, d))
    return fnp.sum(fnp.multiply(fnp.divide(a, na), fnp.divide(b, nb)), axis=d)


def vector_norm(x: Any, p: float, axis: int, keepdims: bool = False) -> Any:
    """The ``p``-norm of ``x`` along ``axis`` (``torch.linalg.vector_norm``'s definition, see
    the module docstring), with gradient 0 where the norm (or an entry, for ``|x|**p``) is 0.

    A public internal helper of functx.nn (not exported by the package).

    Args:
        x: a real floating-point array.
        p: the order: a real number, ``inf`` or ``-inf``.
        axis: the axis of the vectors (non-negative or negative).
        keepdims: keep ``axis`` with size 1.

    Returns:
        ``x``'s shape without ``axis`` (or with size 1 there).

    Example:
        >>> vector_norm(np.array([[3.0, 4.0]]), 2.0, -1)   # [5.]
    """
    if p == 2.0:
        sq = fnp.sum(fnp.multiply(x, x), axis=axis, keepdims=keepdims)
        zero = fnp.equal(sq, 0)
        return fnp.where(zero, 0.0, fnp.sqrt(fnp.where(zero, 1.0, sq)))
    a = fnp.abs(x)
    if p == math.inf:
        return fnp.max(a, axis=axis, keepdims=keepdims)
    if p == -math.inf:
        return fnp.min(a, axis=axis, keepdims=keepdims)
    if p == 0.0:
        return fnp.astype(fnp.sum(fnp.not_equal(x, 0), axis=axis, keepdims=keepdims), x.dtype)
    if p == 1.0:
        return fnp.sum(a, axis=axis, keepdims=keepdims)
    nz = fnp.greater(a, 0)
    s = fnp.sum(fnp.where(nz, fnp.power(fnp.where(nz, a, 1.0), p), 0.0), axis=axis,
                keepdims=keepdims)
    zero = fnp.equal(s, 0)
    return fnp.where(zero, 0.0, fnp.power(fnp.where(zero, 1.0, s), 1.0 / p))


def pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Any:
    """``vector_norm(x1 - x2 + eps, p)`` along the last dimension (PyTorch's definition:
    ``eps`` is added to the difference, so identical vectors are ``eps * n**(1/p)`` apart).

    Args:
        x1: an array ``(..., D)`` (or 0-d).
        x2: an array broadcasting with ``x1``.
        p: the order of the norm (see the module docstring).
        eps: added to every entry of the difference.
        keepdim: keep the last dimension with size 1.

    Returns:
        The broadcast shape without its last dimension (0-d inputs give a 0-d result).

    Raises:
        ShapeError: ``x1`` and ``x2`` do not broadcast.
        ArgumentError: ``p`` or ``eps`` is not a real number.

    Example:
        >>> fnn.pairwise_distance(np.zeros((2, 3)), np.ones((2, 3)))   # [1.732..., 1.732...]
    """
    fn = "pairwise_distance"
    a, b = float_array(x1, fn, "x1"), float_array(x2, fn, "x2")
    pv = check_number(fn, "p", p)
    e = check_number(fn, "eps", eps)
    if not broadcastable(a.shape, b.shape):
        raise ShapeError(f"functx.nn.{fn}: x1 of shape {tuple(a.shape)} and x2 of shape "
                         f"{tuple(b.shape)} do not broadcast.")
    d = fnp.add(fnp.subtract(a, b), e)
    if d.ndim == 0:
        return vector_norm(fnp.reshape(d, (1,)), pv, 0, False)
    return vector_norm(d, pv, -1, bool(keepdim))


def _order(fn: str, p: Any) -> float:
    """A non-negative norm order (``inf`` allowed), as pdist and cdist require."""
    v = float(p) if isinstance(p, (int, float, np.number)) and not isinstance(
        p, (bool, np.bool_)) else None
    if v is None or math.isnan(v) or v < 0:
        raise ArgumentError(f"functx.nn.{fn}: p must be a non-negative number (or inf), "
                            f"but got {p!r}.")
    return v


def pdist(input: Any, p: float = 2.0) -> Any:
    """The ``p``-norm distance between every pair of rows of ``input``: the upper triangle
    of ``cdist(input, input)`` without the diagonal, row by row (pairs ``i < j``).

    Args:
        input: an ``(N, M)`` array.
        p: the order of the norm, >= 0 (``inf`` allowed).

    Returns:
        Shape ``(N * (N - 1) / 2,)``.

    Raises:
        ShapeError: ``input`` is not 2-d.
        ArgumentError: a negative ``p``.

    Example:
        >>> fnn.pdist(np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))   # [5., 1., 4.2426...]
    """
    x = float_array(input, "pdist")
    pv = _order("pdist", p)
    if x.ndim != 2:
        raise ShapeError(f"functx.nn.pdist: input must be 2-d (N, M), but it has shape "
                         f"{tuple(x.shape)}.")
    i, j = np.triu_indices(x.shape[0], 1)
    diff = fnp.subtract(fnp.take(x, on_device_of(x, i), axis=0),
                        fnp.take(x, on_device_of(x, j), axis=0))
    return vector_norm(diff, pv, -1)


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                "donot_use_mm_for_euclid_dist")


def cdist(x1: Any, x2: Any, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Any:
    """The ``p``-norm distance between each row of ``x1`` and each row of ``x2``
    (``torch.cdist``).

    For ``p = 2`` with ``compute_mode="use_mm_for_euclid_dist"`` (or the default when either
    has more than 25 rows) the distances are computed as PyTorch does, with a matrix
    product: ``sqrt(max(|a|**2 + |b|**2 - 2 a.b, 1e-30))``: fast and lean in memory, but
    less accurate for nearby points. Otherwise from the differences ``a - b``, which makes
    an array of shape ``(..., P, R, M)``.

    Args:
        x1: shape ``(..., P, M)``.
        x2: shape ``(..., R, M)``; the batch dimensions ``...`` broadcast.
        p: the order of the norm, >= 0 (``inf`` allowed).
        compute_mode: "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist" or
            "donot_use_mm_for_euclid_dist".

    Returns:
        Shape ``(..., P, R)``.

    Raises:
        ShapeError: an input with fewer than 2 dimensions, different ``M``, or batch
            dimensions that do not broadcast.
        ArgumentError: a negative ``p`` or an unknown ``compute_mode``.

    Example:
        >>> fnn.cdist(np.zeros((1, 2)), np.array([[3.0, 4.0], [0.0, 1.0]]))   # [[5., 1.]]
    """
    a, b = float_array(x1, "cdist", "x1"), float_array(x2, "cdist", "x2")
    pv = _order("cdist", p)
    check_option("cdist", "compute_mode", compute_mode, _CDIST_MODES)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"functx.nn.cdist: x1 and x2 must be (..., P, M) and (..., R, M) "
                         f"with the same M, but they have shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)}.")
    if not broadcastable(a.shape[:-2], b.shape[:-2]):
        raise ShapeError(f"functx.nn.cdist: the batch dimensions of x1 {tuple(a.shape)} and "
                         f"x2 {tuple(b.shape)} do not broadcast.")
    P, R = a.shape[-2], b.shape[-2]
    mm = pv == 2.0 and (compute_mode == _CDIST_MODES[1] or (
        compute_mode == _CDIST_MODES[0] and (P > 25 or R > 25)))
    if mm:
        na = fnp.sum(fnp.multiply(a, a), axis=-1, keepdims=True)
        nb = fnp.sum(fnp.multiply(b, b), axis=-1)
        sq = fnp.add(fnp.subtract(na, fnp.multiply(2.0, fnp.matmul(a, fnp.swapaxes(b, -1, -2)))),
                     fnp.expand_dims(nb, -2))
        return fnp.sqrt(fnp.where(fnp.greater(sq, 1e-30), sq, 1e-30))
    diff = fnp.subtract(fnp.expand_dims(a, -2), fnp.expand_dims(b, -3))
    return vector_norm(diff, pv, -1)
