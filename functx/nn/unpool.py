"""Max unpooling: max_unpool1d/2d/3d, the partial inverse of max pooling with
``return_indices=True`` (torch.nn.functional's names, arguments and defaults).

Each input value is written at its index (a flat position in its ``[N, C]`` plane of the
output); every other output element is 0. It is one ``scatter`` of the values into a zero
array. Where two values share an index (overlapping pooling windows that picked the same
maximum) the last one is written, as in PyTorch, and, as in PyTorch's backward pass (a
gather of the output's gradient at the indices), each of them gets the gradient of that
output position: the gradient passes through a ``scatter_add`` whose forward contribution
is exactly zero.

Example:
    >>> import numpy as np, functx.nn as fnn
    >>> y, i = fnn.max_pool2d(np.arange(16.0).reshape(1, 1, 4, 4), 2, return_indices=True)
    >>> fnn.max_unpool2d(y, i, 2)[0, 0]
    array([[ 0.,  0.,  0.,  0.],
           [ 0.,  5.,  0.,  7.],
           [ 0.,  0.,  0.,  0.],
           [ 0., 13.,  0., 15.]])
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.nn._util import ArgumentError, array, host_value
from functx.nn.conv import batched, ntuple
from functx.numpy._shape import on_device_of
from functx.primitives import indexing as _ix
from functx.primitives.misc import stop_gradient

__all__ = ["max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _output_size(fn: str, x: Any, kernel: tuple, stride: tuple, padding: tuple,
                 output_size: Any) -> tuple[int, ...]:
    """PyTorch's ``_unpool_output_size``: the default size, or ``output_size`` (its last
    ``nd`` entries) checked to lie strictly within one stride of it."""
    nd = len(kernel)
    sizes = tuple(x.shape[-nd:])
    default = tuple((n - 1) * s + k - 2 * p for n, s, k, p in zip(sizes, stride, kernel,
                                                                   padding))
    if output_size is None:
        out = default
    else:
        req = list(output_size)
        if len(req) == nd + 2:
            req = req[2:]
        if len(req) != nd or any(isinstance(v, (bool, np.bool_))
                                 or not isinstance(v, (int, np.integer)) for v in req):
            raise ArgumentError(f"functx.nn.{fn}: output_size must be a sequence of {nd} or "
                                f"{nd + 2} ints, but got {output_size!r}.")
        for d, (o, dflt, s) in enumerate(zip(req, default, stride)):
            if not dflt - s < o < dflt + s:
                raise ArgumentError(f"functx.nn.{fn}: invalid output_size {tuple(req)} (dim "
                                    f"{d} must be between {dflt - s} and {dflt + s}, "
                                    "exclusive).")
        out = tuple(int(o) for o in req)
    if any(o < 0 for o in out):
        raise ShapeError(f"functx.nn.{fn}: the output size {out} has a negative size (input "
                         f"shape {tuple(x.shape)}, kernel_size={kernel}, stride={stride}, "
                         f"padding={padding}).")
    return out


def _max_unpool(fn: str, nd: int, input: Any, indices: Any, kernel_size: Any, stride: Any,
                padding: Any, output_size: Any) -> Any:
    x, idx = array(input), array(indices)
    if np.dtype(x.dtype).kind != "f":
        raise DTypeError(f"functx.nn.{fn}: input must be a real floating-point array, but it "
                         f"has dtype {x.dtype}.")
    if np.dtype(idx.dtype).kind not in "iu":
        raise DTypeError(f"functx.nn.{fn}: indices must be an integer array (as returned by "
                         f"max_pool{nd}d(..., return_indices=True)), but it has dtype "
                         f"{idx.dtype}.")
    if tuple(idx.shape) != tuple(x.shape):
        raise ShapeError(f"functx.nn.{fn}: indices must have input's shape "
                         f"{tuple(x.shape)}, but they have shape {tuple(idx.shape)}.")
    x, unbatched = batched(fn, x, nd)
    idx = fnp.expand_dims(idx, 0) if unbatched else idx
    kernel = ntuple(fn, "kernel_size", kernel_size, nd, 1)
    no_stride = stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)
    stride = kernel if no_stride else ntuple(fn, "stride", stride, nd, 1)
    padding = ntuple(fn, "padding", padding, nd, 0)
    out = _output_size(fn, x, kernel, stride, padding, output_size)
    plane = math.prod(out)
    known = host_value(idx)
    if known is not None and known.size and (known.min() < 0 or known.max() >= plane):
        bad = known[(known < 0) | (known >= plane)].ravel()[0]
        raise ArgumentError(f"functx.nn.{fn}: found the invalid index {bad}: indices must be "
                            f"in [0, {plane}) for an output of spatial size "
                            f"{' x '.join(map(str, out))}.")
    n, c = x.shape[:2]
    rows = on_device_of(x, (np.arange(n * c, dtype=np.int64) * plane).reshape(n, c, *(
        (1,) * nd)))
    flat = fnp.reshape(fnp.add(fnp.astype(idx, np.int64), rows), (-1,))
    vals = fnp.reshape(x, (-1,))
    zeros = fnp.zeros((n * c * plane,), dtype=x.dtype, like=x)
    # forward: the scatter (last duplicate wins); backward: a gather at every index
    y = fnp.add(_ix.scatter(zeros, flat, stop_gradient(vals), axis=0),
                _ix.scatter_add(zeros, flat, fnp.subtract(vals, stop_gradient(vals)), axis=0))
    y = fnp.reshape(y, (n, c) + out)
    return fnp.squeeze(y, 0) if unbatched else y


def max_unpool1d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Any:
    """1-d max unpooling, as ``torch.nn.functional.max_unpool1d``.

    Args:
        input: ``[N, C, L]`` or unbatched ``[C, L]``, real floating-point.
        indices: int, input's shape: each value's position in its output row (as given by
            :func:`max_pool1d` with ``return_indices=True``).
        kernel_size: the pooling's window size.
        stride: the pooling's step; None (the default) means ``kernel_size``.
        padding: the pooling's padding.
        output_size: None for ``(L - 1) * stride + kernel_size - 2 * padding``, or the
            size (``(L_out,)`` or ``(N, C, L_out)``) within one stride of it, e.g. the
            pooled input's size where pooling dropped a remainder.

    Returns:
        ``[N, C, L_out]`` (``[C, L_out]`` unbatched), zeros except at the indices.

    Raises:
        ArgumentError: bad window arguments, an ``output_size`` out of range, or an index
            out of range (where the values are known; traced indices are clamped).
        ShapeError: the input rank, or ``indices`` of another shape.
        DTypeError: a non-float input or non-integer indices.

    Example:
        >>> y, i = fnn.max_pool1d(x, 2, return_indices=True)
        >>> fnn.max_unpool1d(y, i, 2, output_size=x.shape[-1:])
    """
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool2d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Any:
    """2-d max unpooling, as ``torch.nn.functional.max_unpool2d``; see
    :func:`max_unpool1d`. Indices are flat positions in each ``H_out * W_out`` plane.

    Example:
        >>> y, i = fnn.max_pool2d(x, 2, return_indices=True)
        >>> fnn.max_unpool2d(y, i, 2).shape == x.shape   # for even H and W
    """
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool3d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Any = None) -> Any:
    """3-d max unpooling, as ``torch.nn.functional.max_unpool3d``; see
    :func:`max_unpool1d`. Indices are flat positions in each ``D * H * W`` output volume.

    Example:
        >>> y, i = fnn.max_pool3d(x, 2, return_indices=True)
        >>> fnn.max_unpool3d(y, i, 2).shape
    """
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                       output_size)
