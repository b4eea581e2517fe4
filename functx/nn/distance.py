"""Similarity between vectors: cosine_similarity (torch.nn.functional's conventions).

Example:
    >>> import functx.nn as fnn
    >>> fnn.cosine_similarity(np.array([[1.0, 0.0]]), np.array([[1.0, 1.0]]))   # [0.7071...]
"""
from __future__ import annotations

from typing import Any

import functx.numpy as fnp
from functx.errors import ShapeError
from functx.nn._util import broadcastable, check_number, float_array, norm_dim
from functx.primitives.misc import stop_gradient

__all__ = ["cosine_similarity"]


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
