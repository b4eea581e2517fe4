"""Linear maps and lookups: linear, embedding, one_hot (torch.nn.functional's conventions).

Example:
    >>> import functx.nn as fnn
    >>> fnn.linear(np.ones((2, 3)), np.ones((4, 3)), np.zeros(4)).shape   # (2, 4)
"""
from __future__ import annotations

from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import ConcretizationError, DTypeError, ShapeError
from functx.nn._util import (ArgumentError, array, broadcastable, check_int, check_number,
                             gradient_scaled, host_value)
from functx.primitives.misc import stop_gradient

__all__ = ["linear", "embedding", "one_hot"]


def linear(input: Any, weight: Any, bias: Any = None) -> Any:
    """``input @ weight.T + bias``: the affine map of ``torch.nn.functional.linear``.

    Args:
        input: shape ``(*, in_features)``.
        weight: shape ``(out_features, in_features)``, or ``(in_features,)`` for a single
            output (the result then drops the last axis).
        bias: None, or an array broadcasting against ``(out_features,)`` (``()`` for a 1-d
            weight).

    Returns:
        Shape ``(*, out_features)`` (``(*)`` for a 1-d weight).

    Raises:
        ShapeError: ``weight`` is not 1-d or 2-d, ``input`` is 0-d or its last axis is not
            ``in_features``, or ``bias`` does not broadcast to the output's last axis.

    Example:
        >>> fnn.linear(np.ones((5, 3)), np.ones((2, 3))).shape   # (5, 2)
    """
    x, w = array(input), array(weight)
    if w.ndim not in (1, 2):
        raise ShapeError(f"functx.nn.linear: weight must be 1-d (in_features,) or 2-d "
                         f"(out_features, in_features), but it has shape {tuple(w.shape)}.")
    in_features = w.shape[-1]
    if x.ndim == 0 or x.shape[-1] != in_features:
        raise ShapeError(f"functx.nn.linear: input's last axis must have in_features = "
                         f"weight.shape[-1] = {in_features} entries, but input has shape "
                         f"{tuple(x.shape)} and weight {tuple(w.shape)}.")
    y = fnp.matmul(x, fnp.transpose(w) if w.ndim == 2 else w)
    if bias is None:
        return y
    b = array(bias)
    out_shape = (w.shape[0],) if w.ndim == 2 else ()
    if b.ndim > len(out_shape) or not broadcastable(b.shape, out_shape) or \
            np.broadcast_shapes(tuple(b.shape), out_shape) != out_shape:
        raise ShapeError(f"functx.nn.linear: bias of shape {tuple(b.shape)} does not match "
                         f"the output features {out_shape} (weight shape {tuple(w.shape)}).")
    return fnp.add(y, b)


def _check_indices(fn: str, name: str, idx: Any, n: int, what: str) -> None:
    """Raise unless integer ``idx`` lies in ``[0, n)`` (where its values are known)."""
    if np.dtype(idx.dtype).kind not in "iu":
        raise DTypeError(f"functx.nn.{fn}: {name} must hold integer indices, but it has dtype "
                         f"{idx.dtype}. Convert it with .astype(int).")
    v = host_value(idx)
    if v is not None and v.size and (v.min() < 0 or v.max() >= n):
        bad = v[(v < 0) | (v >= n)].ravel()[0]
        raise ArgumentError(f"functx.nn.{fn}: {name} holds the index {bad}, out of range for "
                            f"{n} {what} (indices must be in [0, {n - 1}]).")


def embedding(input: Any, weight: Any, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Any:
    """The rows of ``weight`` at the integer indices ``input``: ``weight[input]``.

    Args:
        input: an integer array of any shape, values in ``[0, num_embeddings)``.
        weight: shape ``(num_embeddings, embedding_dim)``.
        padding_idx: an index (negative counts from the end) whose row gets no gradient.
        max_norm: if given, looked-up rows whose ``norm_type``-norm exceeds it are scaled by
            ``max_norm / (norm + 1e-7)`` in the output. PyTorch also rescales those rows of
            ``weight`` in place; functx never mutates, so ``weight`` is unchanged (rescale
            it yourself if you rely on that). The gradient is PyTorch's: that of a lookup in
            the rescaled table, i.e. the rescaling is not differentiated.
        norm_type: the p of the p-norm for ``max_norm``.
        scale_grad_by_freq: scale each row's gradient by the inverse of how often its index
            occurs in ``input``.
        sparse: accepted for PyTorch compatibility; gradients are always dense arrays with
            the same values.

    Returns:
        Shape ``input.shape + (embedding_dim,)``.

    Raises:
        ShapeError: ``weight`` is not 2-d.
        DTypeError: ``input`` is not an integer array.
        ArgumentError: an index (or ``padding_idx``) out of range, or ``max_norm <= 0``.

    Example:
        >>> fnn.embedding(np.array([0, 2]), np.arange(6.0).reshape(3, 2))   # [[0,1],[4,5]]
    """
    idx, w = array(input), array(weight)
    if w.ndim != 2:
        raise ShapeError(f"functx.nn.embedding: weight must be 2-d (num_embeddings, "
                         f"embedding_dim), but it has shape {tuple(w.shape)}.")
    n = w.shape[0]
    _check_indices("embedding", "input", idx, n, "embeddings")
    if padding_idx is not None:
        p = check_int("embedding", "padding_idx", padding_idx)
        if not -n <= p < n:
            raise ArgumentError(f"functx.nn.embedding: padding_idx={p} must be within "
                                f"[{-n}, {n - 1}] for {n} embeddings.")
        padding_idx = p % n
    rows = fnp.take(w, idx, axis=0)
    value = rows
    if max_norm is not None:
        mn = check_number("embedding", "max_norm", max_norm, lo=0.0, lo_open=True)
        p_norm = check_number("embedding", "norm_type", norm_type)
        norms = fnp.power(fnp.sum(fnp.power(fnp.abs(stop_gradient(rows)), p_norm), axis=-1,
                                  keepdims=True), 1.0 / p_norm)
        scale = fnp.where(fnp.greater(norms, mn), fnp.divide(mn, fnp.add(norms, 1e-7)), 1.0)
        value = fnp.multiply(stop_gradient(rows), scale)
    grad_scale = None
    if scale_grad_by_freq:
        flat = fnp.reshape(idx, (-1,))
        counts = fnp.sum(fnp.equal(fnp.expand_dims(idx, -1), flat), axis=-1)
        grad_scale = fnp.expand_dims(fnp.divide(1.0, fnp.astype(counts, w.dtype)), -1)
    if padding_idx is not None:
        keep = fnp.expand_dims(fnp.not_equal(idx, padding_idx), -1)
        mask = fnp.astype(keep, w.dtype)
        grad_scale = mask if grad_scale is None else fnp.multiply(grad_scale, mask)
    if value is rows and grad_scale is None:
        return rows
    return gradient_scaled(value, rows, 1.0 if grad_scale is None else grad_scale)


def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """An int64 array with a 1 at each index of ``tensor`` along a new last axis.

    Args:
        tensor: an integer array of class indices in ``[0, num_classes)``.
        num_classes: the length of the new axis; -1 means ``tensor.max() + 1``, which
            needs the values of ``tensor`` (not available inside ``vmap``/``make_trace``).

    Returns:
        Shape ``tensor.shape + (num_classes,)``, dtype int64.

    Raises:
        DTypeError: ``tensor`` is not an integer array.
        ArgumentError: ``num_classes`` < -1, or an index out of range.
        ConcretizationError: ``num_classes=-1`` with a traced ``tensor`` of unknown value.

    Example:
        >>> fnn.one_hot(np.array([0, 2]))   # [[1, 0, 0], [0, 0, 1]]
    """
    idx = array(tensor)
    if np.dtype(idx.dtype).kind not in "iu":
        raise DTypeError(f"functx.nn.one_hot: tensor must hold integer class indices, but it "
                         f"has dtype {idx.dtype}. Convert it with .astype(int).")
    k = check_int("one_hot", "num_classes", num_classes, lo=-1)
    if k == -1:
        v = host_value(idx)
        if v is None:
            raise ConcretizationError(
                "functx.nn.one_hot: num_classes=-1 needs the values of tensor (its maximum) "
                "to choose the output shape, but tensor is a traced value of unknown value. "
                "Pass num_classes explicitly.")
        if v.size == 0:
            raise ArgumentError("functx.nn.one_hot: can not infer num_classes (=-1) from an "
                                "empty tensor; pass num_classes explicitly.")
        k = int(v.max()) + 1
    _check_indices("one_hot", "tensor", idx, k, "classes")
    classes = fnp.arange(k, like=idx)  # on idx's device
    return fnp.astype(fnp.equal(fnp.expand_dims(idx, -1), classes), np.int64)
