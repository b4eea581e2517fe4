"""Pooling with torch.nn.functional's names, arguments and defaults.

``avg_pool1d/2d/3d``, ``max_pool1d/2d/3d`` (with ``return_indices``, ``dilation``,
``ceil_mode``), ``adaptive_avg_pool1d/2d/3d``, ``adaptive_max_pool1d/2d/3d`` and
``lp_pool1d/2d/3d`` (PyTorch's formula on top of average pooling). Inputs are
``[N, C, *spatial]`` or unbatched ``[C, *spatial]``. (``max_unpool1d/2d/3d`` are in
functx.nn.unpool.)

Every function is a composite of primitives (a pad, strided slices or a reshape to gather
the windows, then a reduction; adaptive average pooling multiplies by averaging matrices),
so every transform applies. Max pooling pads with ``-inf`` and then is one primitive,
``max_pool`` (its gradient ``max_pool_grad``; functx/primitives/pooling.py), except with
``return_indices``, which gathers the windows' first maxima in composite form. It sends the
whole gradient to the first maximum of each window, as PyTorch does (``return_indices``
gives its flat position in the input's spatial plane); NaN propagates.

Example:
    >>> import numpy as np, functx.nn as fnn
    >>> fnn.max_pool2d(np.arange(16.0).reshape(1, 1, 4, 4), 2)
    array([[[[ 5.,  7.],
             [13., 15.]]]])
"""
from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np

import functx.numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.nn._util import ArgumentError, array
from functx.nn.conv import (batched, fmt_sizes, ntuple, padded_for_windows, pool_out_size,
                            windows)
from functx.numpy._shape import on_device_of
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.primitives.indexing import gather
from functx.primitives.misc import stop_gradient
from functx.primitives.pooling import first_rank, max_pool

__all__ = ["avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d",
           "max_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d", "lp_pool1d",
           "lp_pool2d", "lp_pool3d"]


def _float_input(fn: str, input: Any, nd: int) -> tuple[Any, bool]:
    x = array(input)
    if np.dtype(x.dtype).kind != "f":
        raise DTypeError(f"functx.nn.{fn}: input must be a real floating-point array, but it "
                         f"has dtype {x.dtype}. Convert it with .astype(np.float32) (or "
                         "float64).")
    x, unbatched = batched(fn, x, nd)
    if any(n < 1 for n in x.shape[1:]):
        raise ShapeError(f"functx.nn.{fn}: input needs non-zero channel and spatial sizes, "
                         f"but it has shape {tuple(input.shape)}.")
    return x, unbatched


def _flag(fn: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"functx.nn.{fn}: {name} must be True or False, but got "
                            f"{name}={value!r}.")
    return bool(value)


def _pool_args(fn: str, nd: int, x: Any, kernel_size: Any, stride: Any, padding: Any,
               dilation: Any, ceil_mode: Any) -> tuple:
    """Checked (kernel, stride, padding, dilation, out_sizes) of a pooling call.

    As in PyTorch, padding may be at most half the (undilated) kernel size.
    """
    kernel = ntuple(fn, "kernel_size", kernel_size, nd, 1)
    no_stride = stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)
    stride = kernel if no_stride else ntuple(fn, "stride", stride, nd, 1)
    padding = ntuple(fn, "padding", padding, nd, 0)
    dilation = ntuple(fn, "dilation", dilation, nd, 1)
    ceil_mode = _flag(fn, "ceil_mode", ceil_mode)
    if any(p > k // 2 for p, k in zip(padding, kernel)):
        raise ArgumentError(f"functx.nn.{fn}: padding should be at most half of the kernel "
                            f"size, but got padding={padding} and kernel_size={kernel}.")
    sizes = tuple(x.shape[2:])
    out = tuple(pool_out_size(n, k, s, p, d, ceil_mode)
                for n, k, s, p, d in zip(sizes, kernel, stride, padding, dilation))
    if any(o < 1 for o in out):
        raise ShapeError(f"functx.nn.{fn}: given input size {fmt_sizes(sizes)}, kernel_size="
                         f"{kernel}, stride={stride}, padding={padding}, dilation={dilation}, "
                         f"the calculated output size {fmt_sizes(out)} is too small. Use a "
                         "smaller kernel or more padding.")
    return kernel, stride, padding, dilation, out


def _index_table(positions: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """``T[*out, K]``: the flat input position of window element ``k`` at output ``y``.

    ``positions[d]`` is ``[out_d, k_d]`` (input coordinate along axis ``d``); windows are
    row-major over the per-axis window elements, as the window arrays.
    """
    nd = len(sizes)
    flat = np.zeros((1,) * (2 * nd), np.int64)
    step = 1
    for d in reversed(range(nd)):
        shape = [1] * (2 * nd)
        shape[d], shape[nd + d] = positions[d].shape
        flat = flat + positions[d].reshape(shape) * step
        step *= sizes[d]
    out = [p.shape[0] for p in positions]
    flat = np.broadcast_to(flat, tuple(out) + tuple(p.shape[1] for p in positions))
    return flat.reshape(tuple(out) + (-1,))


def _take_flat(x: Any, indices: Any) -> Any:
    """``x.reshape(-1)[indices]`` for indices known to be in range: one gather of a 1-d
    index vector (no wrapping of negative indices; the gather's VJP, a scatter-add, is
    several times faster with 1-d indices on NumPy)."""
    flat = gather(_shape.reshape(x, (math.prod(x.shape),)),
                  _shape.reshape(indices, (math.prod(indices.shape),)), axis=0)
    return _shape.reshape(flat, tuple(indices.shape))


def _first_max(w: Any, source: Any, table: np.ndarray, index_table: np.ndarray | None) -> Any:
    """The maximum of each window, taken from ``source`` at the window's first maximum.

    ``w`` is ``[K, N, C, *out]``: the windows of (a stop-gradient copy of) ``source``
    ``[N, C, *spatial]``; ``table`` ``[*out, K]`` holds the flat position of each window
    element in a ``source`` plane. The result is a gather from ``source``, so the gradient
    goes to the first maximum alone and NaN propagates (from the window's first NaN, where
    PyTorch's kernels take its last: the indices and the gradient's position differ there,
    the value does not; taking the last cost three more passes over the windows, 0.4-0.6 ms
    per pooling of LeNet's size under ``vjp``). With an ``index_table``, also returns its
    entries at the maxima (PyTorch's indices).
    """
    kk = w.shape[0]
    spots = table.shape[:-1]
    n, c = source.shape[:2]
    plane = math.prod(source.shape[2:])
    # The first maximum's entry in the flattened table: spot * K + (K - rank).
    ends = on_device_of(w, (np.arange(1, math.prod(spots) + 1) * kk).reshape(spots))
    at = _ew.sub(ends, _ew.convert_element_type(first_rank(w), new_dtype=np.dtype(np.int64)))
    pos = _take_flat(on_device_of(w, table), at)
    offsets = (np.arange(n * c, dtype=np.int64) * plane).reshape((n, c) + (1,) * len(spots))
    out = _take_flat(source, _ew.add(pos, on_device_of(w, offsets)))
    if index_table is None:
        return out
    if index_table is table:
        return out, pos
    return out, _take_flat(on_device_of(w, index_table), at)


def _tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _unbatch(unbatched: bool, *outs: Any) -> Any:
    outs = tuple(fnp.squeeze(o, 0) if unbatched else o for o in outs)
    return outs if len(outs) > 1 else outs[0]


# -- max pooling -----------------------------------------------------------------------------

def _max_pool(fn: str, nd: int, input: Any, kernel_size: Any, stride: Any, padding: Any,
              dilation: Any, ceil_mode: Any, return_indices: Any) -> Any:
    x, unbatched = _float_input(fn, input, nd)
    kernel, stride, padding, dilation, out = _pool_args(
        fn, nd, x, kernel_size, stride, padding, dilation, ceil_mode)
    return_indices = _flag(fn, "return_indices", return_indices)
    padded = padded_for_windows(x, kernel, stride, dilation, padding, out, -np.inf)
    if not return_indices:  # the primitives (functx/primitives/pooling.py)
        return _unbatch(unbatched, max_pool(padded, kernel, stride, dilation))
    w = windows(stop_gradient(padded), kernel, stride, dilation, padding, out, -np.inf, axis=0,
                padded=True)
    table, input_table = _max_pool_tables(out, stride, kernel, dilation, padding,
                                          tuple(padded.shape[2:]), tuple(x.shape[2:]))
    index_table = None
    if return_indices:
        index_table = table if padded is x else input_table
    return _unbatch(unbatched, *_tuple(_first_max(w, padded, table, index_table)))


@functools.lru_cache(maxsize=256)
def _max_pool_tables(out: tuple, stride: tuple, kernel: tuple, dilation: tuple, padding: tuple,
                     padded_sizes: tuple, sizes: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The :func:`_index_table` of a max pooling's windows in the padded input and in the
    input (read-only: cached)."""
    pos = [np.arange(o)[:, None] * s + np.arange(k)[None, :] * d
           for o, s, k, d in zip(out, stride, kernel, dilation)]
    tables = (_index_table(pos, padded_sizes),
              _index_table([q - p for q, p in zip(pos, padding)], sizes))
    for t in tables:
        t.flags.writeable = False
    return tables


def max_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """1-d max pooling, as ``torch.nn.functional.max_pool1d``.

    Args:
        input: ``[N, C, L]`` or unbatched ``[C, L]``, real floating-point.
        kernel_size: window size (positive int or 1-tuple).
        stride: window step; None (the default) means ``kernel_size``.
        padding: implicit ``-inf`` on both ends, at most half the kernel size.
        dilation: spacing of the window elements.
        ceil_mode: round the output size up (a last, partial window that starts inside the
            input or left padding).
        return_indices: also return the position of each maximum in the input (int64).

    Returns:
        ``[N, C, L_out]`` (and the indices of the same shape).

    Raises:
        ArgumentError: non-positive sizes, negative or too large padding, non-bool flags.
        ShapeError: the input rank, or an output size below 1.
        DTypeError: a non-float input.

    Example:
        >>> max_pool1d(np.array([[[1.0, 3.0, 2.0, 0.0]]]), 2)   # [[[3., 2.]]]
    """
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def max_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """2-d max pooling, as ``torch.nn.functional.max_pool2d``; see :func:`max_pool1d`.

    Indices are flat positions in each ``H * W`` input plane.

    Example:
        >>> max_pool2d(np.ones((1, 3, 8, 8)), 2).shape   # (1, 3, 4, 4)
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


def max_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """3-d max pooling, as ``torch.nn.functional.max_pool3d``; see :func:`max_pool1d`.

    Example:
        >>> max_pool3d(np.ones((1, 1, 4, 4, 4)), 2).shape   # (1, 1, 2, 2, 2)
    """
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation,
                     ceil_mode, return_indices)


# -- average pooling -------------------------------------------------------------------------

def _avg_divisor(sizes, kernel, stride, padding, out, count_include_pad) -> np.ndarray:
    """PyTorch's divisor per output position: the window clipped to the padded input (with
    ``count_include_pad``) or to the input itself."""
    div = np.ones((), np.int64)
    for n, k, s, p, o in zip(sizes, kernel, stride, padding, out):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        size = end - start if count_include_pad else (
            np.minimum(end, n) - np.maximum(start, 0))
        div = div[..., None] * size
    return div


def _avg_pool(fn: str, nd: int, input: Any, kernel_size: Any, stride: Any, padding: Any,
              ceil_mode: Any, count_include_pad: Any, divisor_override: Any) -> Any:
    x, unbatched = _float_input(fn, input, nd)
    kernel, stride, padding, dilation, out = _pool_args(
        fn, nd, x, kernel_size, stride, padding, 1, ceil_mode)
    count_include_pad = _flag(fn, "count_include_pad", count_include_pad)
    if divisor_override is not None and (
            isinstance(divisor_override, (bool, np.bool_))
            or not isinstance(divisor_override, (int, np.integer)) or divisor_override == 0):
        raise ArgumentError(f"functx.nn.{fn}: divisor_override must be None or a non-zero "
                            f"int, but got divisor_override={divisor_override!r}.")
    total = fnp.sum(windows(x, kernel, stride, dilation, padding, out, 0, axis=0), axis=0)
    if divisor_override is not None:
        div = np.asarray(int(divisor_override), x.dtype)
    else:
        div = _avg_divisor(x.shape[2:], kernel, stride, padding, out,
                           count_include_pad).astype(x.dtype)
    return _unbatch(unbatched, fnp.divide(total, on_device_of(x, div)))


def avg_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True) -> Any:
    """1-d average pooling, as ``torch.nn.functional.avg_pool1d``.

    Args:
        input: ``[N, C, L]`` or unbatched ``[C, L]``, real floating-point.
        kernel_size: window size.
        stride: window step; None (the default) means ``kernel_size``.
        padding: zeros on both ends, at most half the kernel size.
        ceil_mode: round the output size up (see :func:`max_pool1d`).
        count_include_pad: divide by the window's size including the zero padding (but not
            the part of a ceil-mode window past the padding), else by the number of input
            elements in it.

    Returns:
        ``[N, C, L_out]``.

    Raises:
        ArgumentError: non-positive sizes, negative or too large padding, non-bool flags.
        ShapeError: the input rank, or an output size below 1.
        DTypeError: a non-float input.

    Example:
        >>> avg_pool1d(np.array([[[1.0, 3.0, 2.0, 0.0]]]), 2)   # [[[2., 1.]]]
    """
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


def avg_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Any:
    """2-d average pooling, as ``torch.nn.functional.avg_pool2d``; see :func:`avg_pool1d`.

    ``divisor_override``: a non-zero int to divide every window's sum by instead.

    Example:
        >>> avg_pool2d(np.ones((1, 3, 8, 8)), 2).shape   # (1, 3, 4, 4)
    """
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Any:
    """3-d average pooling, as ``torch.nn.functional.avg_pool3d``; see :func:`avg_pool2d`.

    Example:
        >>> avg_pool3d(np.ones((1, 1, 4, 4, 4)), 2).shape   # (1, 1, 2, 2, 2)
    """
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


# -- adaptive pooling ------------------------------------------------------------------------

def _adaptive_args(fn: str, nd: int, x: Any, output_size: Any) -> tuple[int, ...]:
    sizes = output_size if isinstance(output_size, (list, tuple)) else [output_size]
    if len(sizes) == 1:
        sizes = list(sizes) * nd
    if len(sizes) != nd or any(
            s is not None and (isinstance(s, (bool, np.bool_))
                               or not isinstance(s, (int, np.integer)) or s < 1)
            for s in sizes):
        raise ArgumentError(f"functx.nn.{fn}: output_size must be a positive int or a tuple "
                            f"of {nd} positive ints (or None to keep an input size), but got "
                            f"output_size={output_size!r}.")
    return tuple(n if s is None else int(s) for s, n in zip(sizes, x.shape[2:]))


def _bins(n: int, o: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's adaptive bins: ``[floor(i * n / o), ceil((i + 1) * n / o))``."""
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)


def _adaptive_avg(fn: str, nd: int, input: Any, output_size: Any) -> Any:
    x, unbatched = _float_input(fn, input, nd)
    out = _adaptive_args(fn, nd, x, output_size)
    sizes = tuple(x.shape[2:])
    if all(n % o == 0 for n, o in zip(sizes, out)):  # equal, disjoint windows
        kernel = tuple(n // o for n, o in zip(sizes, out))
        w = windows(x, kernel, kernel, (1,) * nd, (0,) * nd, out, 0, axis=0)
        return _unbatch(unbatched, fnp.mean(w, axis=0))
    y = x
    for d, (n, o) in enumerate(zip(sizes, out)):
        start, end = _bins(n, o)
        cols = np.arange(n)
        avg = ((cols >= start[:, None]) & (cols < end[:, None])) / (end - start)[:, None]
        avg = on_device_of(x, avg.astype(x.dtype))  # [o, n]: averages axis d into o bins
        axis = 2 + d
        y = fnp.moveaxis(fnp.matmul(fnp.moveaxis(y, axis, -1), fnp.transpose(avg)), -1, axis)
    return _unbatch(unbatched, y)


def _adaptive_max(fn: str, nd: int, input: Any, output_size: Any, return_indices: Any) -> Any:
    x, unbatched = _float_input(fn, input, nd)
    out = _adaptive_args(fn, nd, x, output_size)
    return_indices = _flag(fn, "return_indices", return_indices)
    sizes = tuple(x.shape[2:])
    positions = []
    w = stop_gradient(x)
    for d, (n, o) in enumerate(zip(sizes, out)):
        start, end = _bins(n, o)
        width = int(np.max(end - start))
        # The bin's elements, the last repeated to a common width (repeats change no maximum
        # and come after the original, so the first maximum is always an original).
        pos = np.minimum(start[:, None] + np.arange(width)[None, :], end[:, None] - 1)
        positions.append(pos)
        w = fnp.take(w, on_device_of(x, pos), axis=2 + 2 * d)  # [.., o, width, ..]
    n_, c = x.shape[:2]
    # [n, c, o1, w1, o2, w2, ...] -> [w1, w2, ..., n, c, o1, o2, ...]
    w = fnp.transpose(w, tuple(range(3, 3 + 2 * nd, 2)) + (0, 1)
                      + tuple(range(2, 2 + 2 * nd, 2)))
    w = fnp.reshape(w, (-1, n_, c) + out)
    table = _index_table(positions, sizes)
    res = _first_max(w, x, table, table if return_indices else None)
    return _unbatch(unbatched, *_tuple(res))


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Any:
    """1-d adaptive average pooling, as ``torch.nn.functional.adaptive_avg_pool1d``.

    Output bin ``i`` of an axis of ``n`` averages the inputs ``floor(i * n / o)`` to
    ``ceil((i + 1) * n / o) - 1``.

    Args:
        input: ``[N, C, L]`` or unbatched ``[C, L]``, real floating-point.
        output_size: the output length (positive int or 1-tuple).

    Returns:
        ``[N, C, output_size]``.

    Raises:
        ArgumentError: an invalid output_size.
        ShapeError: the input rank or an empty input.
        DTypeError: a non-float input.

    Example:
        >>> adaptive_avg_pool1d(np.array([[[1.0, 2.0, 3.0]]]), 2)   # [[[1.5, 2.5]]]
    """
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:
    """2-d adaptive average pooling, as ``torch.nn.functional.adaptive_avg_pool2d``; see
    :func:`adaptive_avg_pool1d`. ``output_size`` is an int or a pair (None keeps that
    input size).

    Example:
        >>> adaptive_avg_pool2d(np.ones((1, 3, 7, 9)), (2, 4)).shape   # (1, 3, 2, 4)
    """
    return _adaptive_avg("adaptive_avg_pool2d", 2, input, output_size)


def adaptive_avg_pool3d(input: Any, output_size: Any) -> Any:
    """3-d adaptive average pooling, as ``torch.nn.functional.adaptive_avg_pool3d``; see
    :func:`adaptive_avg_pool2d`.

    Example:
        >>> adaptive_avg_pool3d(np.ones((1, 1, 4, 5, 6)), 2).shape   # (1, 1, 2, 2, 2)
    """
    return _adaptive_avg("adaptive_avg_pool3d", 3, input, output_size)


def adaptive_max_pool1d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    """1-d adaptive max pooling, as ``torch.nn.functional.adaptive_max_pool1d``.

    Bins as in :func:`adaptive_avg_pool1d`; the gradient goes to each bin's first maximum.

    Args:
        input: ``[N, C, L]`` or unbatched ``[C, L]``, real floating-point.
        output_size: the output length.
        return_indices: also return the input position of each maximum (int64).

    Returns:
        ``[N, C, output_size]`` (and the indices).

    Raises:
        ArgumentError: an invalid output_size or flag.
        ShapeError: the input rank or an empty input.
        DTypeError: a non-float input.

    Example:
        >>> adaptive_max_pool1d(np.array([[[1.0, 3.0, 2.0]]]), 2)   # [[[3., 3.]]]
    """
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    """2-d adaptive max pooling, as ``torch.nn.functional.adaptive_max_pool2d``; see
    :func:`adaptive_max_pool1d`. Indices are flat positions in each ``H * W`` plane.

    Example:
        >>> adaptive_max_pool2d(np.ones((1, 3, 7, 9)), (2, 4)).shape   # (1, 3, 2, 4)
    """
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool3d(input: Any, output_size: Any, return_indices: bool = False) -> Any:
    """3-d adaptive max pooling, as ``torch.nn.functional.adaptive_max_pool3d``; see
    :func:`adaptive_max_pool1d`.

    Example:
        >>> adaptive_max_pool3d(np.ones((1, 1, 4, 5, 6)), 2).shape   # (1, 1, 2, 2, 2)
    """
    return _adaptive_max("adaptive_max_pool3d", 3, input, output_size, return_indices)


# -- power-average pooling -------------------------------------------------------------------

def _lp_pool(fn: str, nd: int, input: Any, norm_type: Any, kernel_size: Any, stride: Any,
             ceil_mode: Any) -> Any:
    if isinstance(norm_type, (bool, np.bool_)) or not isinstance(norm_type, (int, float,
                                                                              np.number)):
        raise ArgumentError(f"functx.nn.{fn}: norm_type must be a number, but got "
                            f"{norm_type!r}.")
    p = float(norm_type)
    if p == 0.0:
        raise ArgumentError(f"functx.nn.{fn}: norm_type must be non-zero (the result is "
                            "raised to 1 / norm_type).")
    x = array(input)
    pools = {1: max_pool1d, 2: max_pool2d, 3: max_pool3d}
    if p == math.inf:
        return pools[nd](fnp.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    if p == -math.inf:
        return fnp.negative(pools[nd](fnp.negative(fnp.abs(x)), kernel_size, stride, 0, 1,
                                      ceil_mode))
    avg = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}[nd]
    out = avg(fnp.power(x, p), kernel_size, stride, 0, ceil_mode)
    area = math.prod(ntuple(fn, "kernel_size", kernel_size, nd, 1))
    # PyTorch's sign(out) * relu(|out|): out itself, with gradient 0 where out == 0
    out = fnp.multiply(fnp.sign(out), fnp.abs(out))
    return fnp.power(fnp.multiply(out, float(area)), 1.0 / p)


def lp_pool1d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Any:
    """1-d power-average pooling, as ``torch.nn.functional.lp_pool1d``:
    ``sum(x**p over the window) ** (1/p)``, computed as PyTorch does from
    :func:`avg_pool1d` of ``input**norm_type`` (times the window size). ``norm_type=inf``
    is max pooling of ``|input|``; ``-inf`` the minimum of ``|input|``.

    Args:
        input: ``[N, C, L]`` or unbatched ``[C, L]``, real floating-point (non-integer
            ``norm_type`` needs non-negative values, else NaN as in PyTorch).
        norm_type: ``p``, a non-zero number (``inf``/``-inf`` allowed).
        kernel_size: window size.
        stride: window step; None (the default) means ``kernel_size``.
        ceil_mode: round the output size up (see :func:`max_pool1d`).

    Returns:
        ``[N, C, L_out]``.

    Raises:
        ArgumentError: a bad ``norm_type`` or window arguments.
        ShapeError: the input rank, or an output size below 1.
        DTypeError: a non-float input.

    Example:
        >>> lp_pool1d(np.array([[[3.0, 4.0]]]), 2, 2)   # [[[5.]]]
    """
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Any:
    """2-d power-average pooling, as ``torch.nn.functional.lp_pool2d``; see
    :func:`lp_pool1d`.

    Example:
        >>> lp_pool2d(np.ones((1, 3, 4, 4)), 2, 2)   # all 2.
    """
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,
              ceil_mode: bool = False) -> Any:
    """3-d power-average pooling, as ``torch.nn.functional.lp_pool3d``; see
    :func:`lp_pool1d`.

    Example:
        >>> lp_pool3d(np.ones((1, 1, 2, 2, 2)), 1, 2)   # [[[[[8.]]]]]
    """
    return _lp_pool("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)
