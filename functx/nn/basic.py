"""Linear maps and lookups: linear, bilinear, embedding, embedding_bag, one_hot
(torch.nn.functional's conventions; one_hot also takes jax.nn's keywords).

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
                             check_option, gradient_scaled, host_value)
from functx.numpy._shape import on_device_of
from functx.primitives.misc import stop_gradient

__all__ = ["linear", "bilinear", "embedding", "embedding_bag", "one_hot"]


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


def bilinear(input1: Any, input2: Any, weight: Any, bias: Any = None) -> Any:
    """``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``.

    Args:
        input1: shape ``(*, in1_features)``.
        input2: shape ``(*, in2_features)``, the same leading dimensions ``*``.
        weight: shape ``(out_features, in1_features, in2_features)``.
        bias: None or shape ``(out_features,)``.

    Returns:
        Shape ``(*, out_features)``.

    Raises:
        ShapeError: mismatched feature sizes, leading dimensions, or bias shape.

    Example:
        >>> fnn.bilinear(np.ones((2, 3)), np.ones((2, 4)), np.ones((5, 3, 4))).shape  # (2, 5)
    """
    a, b, w = array(input1), array(input2), array(weight)
    if w.ndim != 3 or a.ndim < 1 or b.ndim < 1 or a.shape[-1] != w.shape[1] or \
            b.shape[-1] != w.shape[2] or tuple(a.shape[:-1]) != tuple(b.shape[:-1]):
        raise ShapeError(f"functx.nn.bilinear: expected input1 (*, in1), input2 (*, in2) with "
                         f"the same leading dimensions and weight (out, in1, in2), but got "
                         f"shapes {tuple(a.shape)}, {tuple(b.shape)} and {tuple(w.shape)}.")
    y = fnp.einsum("...i,oij,...j->...o", a, w, b)
    if bias is None:
        return y
    c = array(bias)
    if tuple(c.shape) != (w.shape[0],):
        raise ShapeError(f"functx.nn.bilinear: bias must have shape ({w.shape[0]},) "
                         f"(out_features), but it has shape {tuple(c.shape)}.")
    return fnp.add(y, c)


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


def _bag_table(fn: str, off: np.ndarray, n: int, include_last_offset: bool) -> tuple:
    """``(positions [B, L], valid [B, L])`` of every bag's entries in a 1-d input of ``n``
    entries, from host-known ``offsets`` (checked as PyTorch does)."""
    if off.size and off[0] != 0:
        raise ArgumentError(f"functx.nn.{fn}: offsets[0] must be 0 (the first bag starts at "
                            f"position 0), but got {off[0]}.")
    if np.any(np.diff(off) < 0):
        raise ArgumentError(f"functx.nn.{fn}: offsets must be non-decreasing, but got "
                            f"{off.tolist()}.")
    if off.size and off[-1] > n:
        raise ArgumentError(f"functx.nn.{fn}: offsets[-1] = {off[-1]} can not be greater than "
                            f"input's length {n}.")
    starts = off[:-1] if include_last_offset else off
    ends = off[1:] if include_last_offset else np.append(off[1:], n)
    length = int((ends - starts).max()) if starts.size else 0
    pos = starts[:, None] + np.arange(length)[None, :]
    valid = pos < ends[:, None]
    return np.where(valid, pos, 0), valid


def embedding_bag(input: Any, weight: Any, offsets: Any = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean",
                  sparse: bool = False, per_sample_weights: Any = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> Any:
    """The sum, mean or maximum of bags of embedding rows, without the intermediate
    ``(..., embedding_dim)`` lookup of every index being returned.

    Bags are the rows of a 2-d ``input``, or, for a 1-d ``input``, the runs that start at
    ``offsets``: bag ``b`` holds ``input[offsets[b]:offsets[b + 1]]`` (the last one runs to
    the end of ``input``, or to ``offsets[-1]`` with ``include_last_offset``). Entries
    equal to ``padding_idx`` are left out of their bag (and of its count for "mean"). An
    empty bag gives zeros in every mode, as in PyTorch. "max" is the elementwise maximum
    over the bag's rows; its gradient goes to the row holding each maximum.

    With ``offsets`` whose values are known (NumPy arrays, the usual case) the bags are
    gathered into a ``(bags, longest bag, embedding_dim)`` array; traced offsets (inside
    ``vmap``/``make_trace``) use a ``(bags, len(input), embedding_dim)`` one.

    Args:
        input: integer indices, 2-d ``(B, N)`` (fixed-size bags) or 1-d with ``offsets``.
        weight: shape ``(num_embeddings, embedding_dim)``.
        offsets: None for a 2-d ``input``; else the 1-d integer start of each bag.
        max_norm: as in :func:`embedding` (rows rescaled in the output only).
        norm_type: the p of the p-norm for ``max_norm``.
        scale_grad_by_freq: as in :func:`embedding`.
        mode: "sum", "mean" or "max".
        sparse: accepted for PyTorch compatibility; gradients are dense.
        per_sample_weights: None, or float weights shaped like ``input`` that scale each
            row before summing (``mode="sum"`` only); differentiable.
        include_last_offset: ``offsets`` has one more entry, the end of the last bag (CSR
            style; PyTorch documents it as ``len(input)``, and entries after it are left
            out here, where PyTorch's kernels disagree with each other).
        padding_idx: an index (negative counts from the end) left out of every bag.

    Returns:
        Shape ``(B, embedding_dim)``, weight's dtype.

    Raises:
        ShapeError: bad ranks or shapes of input, weight, offsets or per_sample_weights.
        DTypeError: non-integer indices or offsets.
        ArgumentError: a bad ``mode``, indices out of range, ``offsets`` with a 2-d input
            (or none with a 1-d one), offsets that do not start at 0 or decrease,
            ``per_sample_weights`` with a mode other than "sum", or a bad ``padding_idx``.

    Example:
        >>> w = np.arange(8.0).reshape(4, 2)
        >>> fnn.embedding_bag(np.array([0, 1, 3]), w, np.array([0, 2]), mode="sum")
        array([[2., 4.], [6., 7.]])
    """
    fn = "embedding_bag"
    idx, w = array(input), array(weight)
    check_option(fn, "mode", mode, ("sum", "mean", "max"))
    if w.ndim != 2:
        raise ShapeError(f"functx.nn.{fn}: weight must be 2-d (num_embeddings, embedding_dim), "
                         f"but it has shape {tuple(w.shape)}.")
    n_emb, dim = w.shape
    _check_indices(fn, "input", idx, n_emb, "embeddings")
    if idx.ndim == 2 and offsets is not None:
        raise ArgumentError(f"functx.nn.{fn}: with a 2-d input (one bag per row) offsets must "
                            f"be None, but got offsets of shape {tuple(array(offsets).shape)}.")
    if idx.ndim == 1 and offsets is None:
        raise ArgumentError(f"functx.nn.{fn}: a 1-d input needs offsets (the start of each "
                            "bag); pass a 2-d input for bags of one size.")
    if idx.ndim not in (1, 2):
        raise ShapeError(f"functx.nn.{fn}: input must be 1-d (with offsets) or 2-d (B, N), but "
                         f"it has shape {tuple(idx.shape)}.")
    psw = None
    if per_sample_weights is not None:
        if mode != "sum":
            raise ArgumentError(f"functx.nn.{fn}: per_sample_weights is only supported for "
                                f"mode='sum' (as in PyTorch), but mode={mode!r}.")
        psw = array(per_sample_weights)
        if tuple(psw.shape) != tuple(idx.shape):
            raise ShapeError(f"functx.nn.{fn}: per_sample_weights must have input's shape "
                             f"{tuple(idx.shape)}, but it has shape {tuple(psw.shape)}.")
    pad = None
    if padding_idx is not None:
        pad = check_int(fn, "padding_idx", padding_idx)
        if not -n_emb <= pad < n_emb:
            raise ArgumentError(f"functx.nn.{fn}: padding_idx={pad} must be within "
                                f"[{-n_emb}, {n_emb - 1}] for {n_emb} embeddings.")
        pad %= n_emb
    rows = embedding(idx, w, None, max_norm, norm_type, scale_grad_by_freq)
    keep = None if pad is None else fnp.not_equal(idx, pad)
    if idx.ndim == 2:
        vals, mask = rows, keep
    else:
        off = array(offsets)
        if off.ndim != 1 or np.dtype(off.dtype).kind not in "iu":
            raise ShapeError(f"functx.nn.{fn}: offsets must be a 1-d integer array, but it has "
                             f"shape {tuple(off.shape)} and dtype {off.dtype}.")
        n = idx.shape[0]
        known = host_value(off)
        if known is not None:
            pos, valid = _bag_table(fn, known.astype(np.int64), n, bool(include_last_offset))
            take = on_device_of(rows, pos)
            vals = fnp.take(rows, take, axis=0)
            mask = on_device_of(rows, valid)
            if keep is not None:
                mask = fnp.logical_and(mask, fnp.take(keep, take, axis=0))
            if psw is not None:
                psw = fnp.take(psw, take, axis=0)
        else:  # traced offsets: membership of every entry in every bag
            bags = off.shape[0] - (1 if include_last_offset else 0)
            starts = off[:bags]
            last = off[bags:bags + 1] if include_last_offset else fnp.full((1,), n, like=off)
            ends = fnp.concatenate([off[1:bags], fnp.astype(last, off.dtype)])
            at = on_device_of(rows, np.arange(n))[None, :]
            mask = fnp.logical_and(fnp.greater_equal(at, starts[:, None]),
                                   fnp.less(at, ends[:, None]))
            if keep is not None:
                mask = fnp.logical_and(mask, keep[None, :])
            vals = fnp.broadcast_to(rows[None], (bags, n, dim))
            if psw is not None:
                psw = fnp.broadcast_to(psw[None], (bags, n))
    if mask is None:
        mask = fnp.ones(tuple(vals.shape[:2]), dtype=bool, like=vals)
    if vals.shape[1] == 0:
        return fnp.zeros((vals.shape[0], dim), dtype=w.dtype, like=w)
    m3 = fnp.expand_dims(mask, -1)
    if mode == "max":
        top = fnp.max(fnp.where(m3, vals, -np.inf), axis=1)
        return fnp.where(fnp.any(m3, axis=1), top, 0.0)
    terms = fnp.where(m3, vals, 0.0)
    if psw is not None:
        terms = fnp.multiply(terms, fnp.expand_dims(psw, -1))
    total = fnp.sum(terms, axis=1)
    if mode == "sum":
        return total
    count = fnp.sum(fnp.astype(mask, w.dtype), axis=1, keepdims=True)
    return fnp.divide(total, fnp.maximum(count, 1.0))


def one_hot(tensor: Any, num_classes: int = -1, *, dtype: Any = None, axis: int = -1) -> Any:
    """A 1 at each index of ``tensor`` along a new axis: PyTorch's ``one_hot`` and, with the
    keywords, ``jax.nn.one_hot(x, num_classes, *, dtype, axis)``.

    Two conventions, chosen by ``dtype``:

    * ``dtype=None`` (PyTorch): an int64 result; an index outside ``[0, num_classes)`` is an
      error (where the values are known; see ``num_classes=-1``).
    * a ``dtype`` given (JAX): the result has that dtype, and an index outside
      ``[0, num_classes)`` (e.g. -1 for padding) is encoded as all zeros, as in JAX. Note
      that JAX's default dtype is float: pass ``dtype=np.float32`` when porting JAX code
      (the int64 default would promote a float32 product to float64).

    Args:
        tensor: an integer array of class indices.
        num_classes: the length of the new axis; -1 means ``tensor.max() + 1``, which
            needs the values of ``tensor`` (not available inside ``vmap``/``make_trace``).
        dtype: None (int64, PyTorch's rules) or the result's dtype (JAX's rules).
        axis: where the new axis goes in the result (-1: last, as in both libraries).

    Returns:
        ``tensor.shape`` with a ``num_classes`` axis inserted at ``axis``.

    Raises:
        DTypeError: ``tensor`` is not an integer array.
        ArgumentError: ``num_classes`` < -1, ``axis`` out of range, or (with
            ``dtype=None``) an index out of range.
        ConcretizationError: ``num_classes=-1`` with a traced ``tensor`` of unknown value.

    Example:
        >>> fnn.one_hot(np.array([0, 2]))   # [[1, 0, 0], [0, 0, 1]]
        >>> fnn.one_hot(np.array([1, -1]), 3, dtype=np.float32)   # [[0, 1, 0], [0, 0, 0]]
    """
    idx = array(tensor)
    if np.dtype(idx.dtype).kind not in "iu":
        raise DTypeError(f"functx.nn.one_hot: tensor must hold integer class indices, but it "
                         f"has dtype {idx.dtype}. Convert it with .astype(int).")
    k = check_int("one_hot", "num_classes", num_classes, lo=-1)
    ax = check_int("one_hot", "axis", axis)
    if not -(idx.ndim + 1) <= ax <= idx.ndim:
        raise ArgumentError(f"functx.nn.one_hot: axis={ax} is out of range for a result with "
                            f"{idx.ndim + 1} dimensions.")
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
    if dtype is None:
        _check_indices("one_hot", "tensor", idx, k, "classes")
    classes = fnp.arange(k, like=idx)  # on idx's device
    hot = fnp.astype(fnp.equal(fnp.expand_dims(idx, -1), classes),
                     np.int64 if dtype is None else np.dtype(dtype))
    ax = ax % (idx.ndim + 1)
    return hot if ax == idx.ndim else fnp.moveaxis(hot, -1, ax)
