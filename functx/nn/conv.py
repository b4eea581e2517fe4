"""Convolutions with torch.nn.functional's names, arguments and defaults.

``conv1d``/``conv2d``/``conv3d``, ``conv_transpose1d``/``2d``/``3d``, ``unfold`` (im2col)
and ``fold`` (col2im). Inputs are ``[N, C, *spatial]`` (or unbatched ``[C, *spatial]``),
weights ``[out_channels, in_channels / groups, *kernel]`` (``[in_channels, out_channels /
groups, *kernel]`` for the transposed convolutions), as in PyTorch. All of them bind the
``conv_general_dilated`` primitive (functx.primitives.conv) or slices and pads, so every
transform applies. Options are checked before anything is computed: a bad value raises
``ArgumentError`` naming the argument and the value; bad shapes raise ``ShapeError``.

Example:
    >>> import numpy as np, functx.nn as fnn
    >>> x, w = np.ones((2, 3, 8, 8)), np.ones((4, 3, 3, 3))
    >>> fnn.conv2d(x, w, padding="same").shape
    (2, 4, 8, 8)
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

import functx.numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.nn._util import ArgumentError, array
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.primitives.conv import conv_general_dilated

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "unfold", "fold"]

# -- argument checks shared with functx.nn.pooling -------------------------------------------

def ntuple(fn: str, name: str, value: Any, n: int, lo: int) -> tuple[int, ...]:
    """``value`` (an int, or a sequence of 1 or ``n`` ints) as ``n`` ints, each >= ``lo``.

    Raises:
        ArgumentError: not ints, the wrong length, or a value below ``lo``.
    """
    items = [value] if isinstance(value, (int, np.integer)) else value
    try:
        items = list(items)
    except TypeError:
        items = None
    if (items is None or len(items) not in (1, n) or any(
            isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer))
            for v in items)):
        raise ArgumentError(f"functx.nn.{fn}: {name} must be an int or a tuple of {n} ints, "
                            f"but got {value!r}.")
    items = [int(v) for v in items] * (n if len(items) == 1 else 1)
    if any(v < lo for v in items):
        what = "positive" if lo == 1 else f">= {lo}"
        raise ArgumentError(f"functx.nn.{fn}: {name} must be {what}, but got {name}={value!r}.")
    return tuple(items)


def float_operands(fn: str, *named: tuple[str, Any]) -> list:
    """The operands as arrays of one real floating-point dtype.

    Raises:
        DTypeError: an operand is not real floating-point, or the dtypes differ.
    """
    arrays = [array(v) for _, v in named]
    for (name, _), a in zip(named, arrays):
        if np.dtype(a.dtype).kind != "f":
            raise DTypeError(f"functx.nn.{fn}: {name} must be a real floating-point array, "
                             f"but it has dtype {a.dtype}. Convert it with "
                             ".astype(np.float32) (or float64).")
    dtypes = {np.dtype(a.dtype) for a in arrays}
    if len(dtypes) > 1:
        listing = ", ".join(f"{name} {a.dtype}" for (name, _), a in zip(named, arrays))
        raise DTypeError(f"functx.nn.{fn}: the operands must share one dtype, but got "
                         f"{listing}. Convert them with .astype(...) first.")
    return arrays


def batched(fn: str, x: Any, nd: int, what: str = "") -> tuple[Any, bool]:
    """``x`` with a batch axis (added for an unbatched ``[C, *spatial]`` input) and whether
    one was added.

    Raises:
        ShapeError: ``x`` has neither ``nd + 1`` nor ``nd + 2`` dimensions.
    """
    if x.ndim == nd + 2:
        return x, False
    if x.ndim == nd + 1:
        return fnp.expand_dims(x, 0), True
    raise ShapeError(f"functx.nn.{fn}: input must be {nd + 1}-d (unbatched [C, *spatial]) or "
                     f"{nd + 2}-d (batched [N, C, *spatial]){what}, but it has shape "
                     f"{tuple(x.shape)}.")


def fmt_sizes(sizes: Sequence[int]) -> str:
    """``(3 x 4)``, PyTorch's way of printing spatial sizes."""
    return "(" + " x ".join(str(s) for s in sizes) + ")"


def _checked_bias(fn: str, bias: Any, channels: int, dtype: Any) -> Any:
    """``bias`` as an array of shape ``(channels,)`` and ``dtype`` (or None).

    Raises:
        ShapeError, DTypeError: it has another shape or dtype.
    """
    if bias is None:
        return None
    b = array(bias)
    if tuple(b.shape) != (channels,):
        raise ShapeError(f"functx.nn.{fn}: bias must have shape ({channels},) (one entry per "
                         f"output channel), but it has shape {tuple(b.shape)}.")
    if b.dtype != dtype:
        raise DTypeError(f"functx.nn.{fn}: bias has dtype {b.dtype} but input and weight have "
                         f"{dtype}; convert it with .astype(...).")
    return b


def _add_bias(out: Any, b: Any) -> Any:
    if b is None:
        return out
    return _ew.add(out, _shape.broadcast_in_dim(b, tuple(out.shape), (1,)))


# -- convolutions ----------------------------------------------------------------------------

def _conv(fn: str, nd: int, input: Any, weight: Any, bias: Any, stride: Any, padding: Any,
          dilation: Any, groups: Any) -> Any:
    x, w = float_operands(fn, ("input", input), ("weight", weight))
    x, unbatched = batched(fn, x, nd)
    if w.ndim != nd + 2:
        raise ShapeError(f"functx.nn.{fn}: weight must be {nd + 2}-d [out_channels, "
                         f"in_channels/groups, *kernel], but it has shape {tuple(w.shape)}.")
    stride = ntuple(fn, "stride", stride, nd, 1)
    dilation = ntuple(fn, "dilation", dilation, nd, 1)
    if isinstance(groups, (bool, np.bool_)) or not isinstance(groups, (int, np.integer)) \
            or groups < 1:
        raise ArgumentError(f"functx.nn.{fn}: groups must be a positive int, but got "
                            f"groups={groups!r}.")
    groups = int(groups)
    kernel = tuple(w.shape[2:])
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise ArgumentError(f"functx.nn.{fn}: padding='same' is not supported for "
                                    f"strided convolutions (stride={stride}); pass explicit "
                                    "padding instead.")
            totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
            pads = tuple((t // 2, t - t // 2) for t in totals)
        else:
            raise ArgumentError(f"functx.nn.{fn}: padding must be 'valid', 'same', an int or "
                                f"a tuple of {nd} ints, but got padding={padding!r}.")
    else:
        pads = tuple((p, p) for p in ntuple(fn, "padding", padding, nd, 0))
    c, o, cg = x.shape[1], w.shape[0], w.shape[1]
    if o % groups:
        raise ShapeError(f"functx.nn.{fn}: out_channels (weight.shape[0] = {o}) must be "
                         f"divisible by groups={groups}.")
    if c % groups:
        raise ShapeError(f"functx.nn.{fn}: the input's {c} channels must be divisible by "
                         f"groups={groups}.")
    if cg * groups != c:
        raise ShapeError(f"functx.nn.{fn}: given groups={groups}, weight of shape "
                         f"{tuple(w.shape)} expects input to have {cg * groups} channels "
                         f"(weight.shape[1] * groups), but input of shape "
                         f"{tuple(input.shape)} has {c}.")
    padded = [n + lo + hi for n, (lo, hi) in zip(x.shape[2:], pads)]
    dilated = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    if any(p < k for p, k in zip(padded, dilated)):
        raise ShapeError(f"functx.nn.{fn}: calculated padded input size per channel "
                         f"{fmt_sizes(padded)} is smaller than the (dilated) kernel size "
                         f"{fmt_sizes(dilated)}: the kernel can't be greater than the padded "
                         "input. Use a smaller kernel or dilation, or more padding.")
    b = _checked_bias(fn, bias, o, x.dtype)
    out = _add_bias(conv_general_dilated(x, w, stride, pads, None, dilation, groups), b)
    return fnp.squeeze(out, 0) if unbatched else out


def conv1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Any:
    """1-d convolution (cross-correlation), as ``torch.nn.functional.conv1d``.

    Args:
        input: ``[N, C_in, L]`` or unbatched ``[C_in, L]``.
        weight: ``[C_out, C_in / groups, kL]``.
        bias: None or ``[C_out]``.
        stride, dilation: positive int or 1-tuple.
        padding: non-negative int or 1-tuple (both ends), ``'valid'`` (none) or ``'same'``
            (output as long as the input; stride 1 only; any odd total goes at the end).
        groups: split the channels into this many independent groups.

    Returns:
        ``[N, C_out, L_out]`` with ``L_out = (L + 2p - d(kL - 1) - 1) // stride + 1``.

    Raises:
        ArgumentError: a non-positive stride/dilation/groups, a negative padding, or an
            unknown padding string.
        ShapeError: ranks, channel counts (divisibility by groups) or a kernel larger than
            the padded input.
        DTypeError: non-float or mismatched dtypes.

    Example:
        >>> conv1d(np.ones((1, 2, 5)), np.ones((3, 2, 3)), padding=1).shape   # (1, 3, 5)
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Any:
    """2-d convolution, as ``torch.nn.functional.conv2d``; see :func:`conv1d`.

    ``input`` is ``[N, C_in, H, W]`` (or ``[C_in, H, W]``), ``weight`` ``[C_out, C_in /
    groups, kH, kW]``; ``stride``, ``padding`` and ``dilation`` are ints or pairs.

    Example:
        >>> conv2d(np.ones((2, 3, 8, 8)), np.ones((4, 3, 3, 3)), stride=2).shape  # (2, 4, 3, 3)
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Any:
    """3-d convolution, as ``torch.nn.functional.conv3d``; see :func:`conv1d`.

    ``input`` is ``[N, C_in, D, H, W]`` (or unbatched), ``weight`` ``[C_out, C_in / groups,
    kD, kH, kW]``.

    Example:
        >>> conv3d(np.ones((1, 1, 4, 4, 4)), np.ones((2, 1, 3, 3, 3))).shape  # (1, 2, 2, 2, 2)
    """
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


# -- transposed convolutions -----------------------------------------------------------------

def _conv_transpose(fn: str, nd: int, input: Any, weight: Any, bias: Any, stride: Any,
                    padding: Any, output_padding: Any, groups: Any, dilation: Any) -> Any:
    x, w = float_operands(fn, ("input", input), ("weight", weight))
    x, unbatched = batched(fn, x, nd)
    if w.ndim != nd + 2:
        raise ShapeError(f"functx.nn.{fn}: weight must be {nd + 2}-d [in_channels, "
                         f"out_channels/groups, *kernel], but it has shape {tuple(w.shape)}.")
    stride = ntuple(fn, "stride", stride, nd, 1)
    dilation = ntuple(fn, "dilation", dilation, nd, 1)
    padding = ntuple(fn, "padding", padding, nd, 0)
    output_padding = ntuple(fn, "output_padding", output_padding, nd, 0)
    if isinstance(groups, (bool, np.bool_)) or not isinstance(groups, (int, np.integer)) \
            or groups < 1:
        raise ArgumentError(f"functx.nn.{fn}: groups must be a positive int, but got "
                            f"groups={groups!r}.")
    groups = int(groups)
    for op, s, d in zip(output_padding, stride, dilation):
        if op >= s and op >= d:
            raise ArgumentError(f"functx.nn.{fn}: output_padding must be smaller than either "
                                f"stride or dilation, but got output_padding={output_padding}"
                                f", stride={stride}, dilation={dilation}.")
    c, ocg = x.shape[1], w.shape[1]
    kernel = tuple(w.shape[2:])
    if w.shape[0] != c:
        raise ShapeError(f"functx.nn.{fn}: weight of shape {tuple(w.shape)} expects "
                         f"{w.shape[0]} input channels (weight.shape[0]), but input of shape "
                         f"{tuple(input.shape)} has {c}.")
    if c % groups:
        raise ShapeError(f"functx.nn.{fn}: the input's {c} channels must be divisible by "
                         f"groups={groups}.")
    dk = [d * (k - 1) for d, k in zip(dilation, kernel)]
    out_sizes = [(n - 1) * s - 2 * p + e + op + 1
                 for n, s, p, e, op in zip(x.shape[2:], stride, padding, dk, output_padding)]
    if any(n < 1 for n in out_sizes):
        raise ShapeError(f"functx.nn.{fn}: the output size {fmt_sizes(out_sizes)} for input "
                         f"{tuple(input.shape)}, kernel {kernel}, stride={stride}, padding="
                         f"{padding}, dilation={dilation} is not positive; use less padding.")
    b = _checked_bias(fn, bias, groups * ocg, x.dtype)
    cig = c // groups
    # [C_in, C_out/g, *k] -> [C_out, C_in/g, *k], flipped: the convolution whose input
    # gradient this is.
    wt = fnp.reshape(w, (groups, cig, ocg) + kernel)
    wt = fnp.transpose(wt, (0, 2, 1) + tuple(range(3, 3 + nd)))
    wt = fnp.reshape(wt, (groups * ocg, cig) + kernel)
    wt = _shape.rev(wt, tuple(range(2, 2 + nd)))
    pads = tuple((e - p, e - p + op) for e, p, op in zip(dk, padding, output_padding))
    out = _add_bias(conv_general_dilated(x, wt, None, pads, stride, dilation, groups), b)
    return fnp.squeeze(out, 0) if unbatched else out


def conv_transpose1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """1-d transposed convolution, as ``torch.nn.functional.conv_transpose1d``.

    The gradient of :func:`conv1d` with respect to its input (sometimes called
    "deconvolution").

    Args:
        input: ``[N, C_in, L]`` or unbatched ``[C_in, L]``.
        weight: ``[C_in, C_out / groups, kL]``.
        bias: None or ``[C_out]``.
        stride, dilation: positive int or 1-tuple.
        padding: non-negative: ``dilation * (kL - 1) - padding`` zeros are added on both
            ends of the (stride-dilated) input.
        output_padding: extra size added at the end of the output; smaller than either
            stride or dilation.
        groups: channel groups.

    Returns:
        ``[N, C_out, L_out]`` with ``L_out = (L - 1) * stride - 2 * padding + dilation *
        (kL - 1) + output_padding + 1``.

    Raises:
        ArgumentError: non-positive stride/dilation/groups, negative padding, or too large
            an output_padding.
        ShapeError: ranks, channels, or a non-positive output size.
        DTypeError: non-float or mismatched dtypes.

    Example:
        >>> conv_transpose1d(np.ones((1, 2, 4)), np.ones((2, 3, 3)), stride=2).shape  # (1, 3, 9)
    """
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """2-d transposed convolution, as ``torch.nn.functional.conv_transpose2d``; see
    :func:`conv_transpose1d`. ``weight`` is ``[C_in, C_out / groups, kH, kW]``.

    Example:
        >>> conv_transpose2d(np.ones((1, 2, 4, 4)), np.ones((2, 3, 2, 2)), stride=2).shape
        (1, 3, 8, 8)
    """
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """3-d transposed convolution, as ``torch.nn.functional.conv_transpose3d``; see
    :func:`conv_transpose1d`. ``weight`` is ``[C_in, C_out / groups, kD, kH, kW]``.

    Example:
        >>> conv_transpose3d(np.ones((1, 1, 2, 2, 2)), np.ones((1, 1, 2, 2, 2))).shape
        (1, 1, 3, 3, 3)
    """
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


# -- sliding windows: unfold and fold --------------------------------------------------------

def pool_out_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's output size of a sliding window (pooling and unfold).

    With ``ceil_mode`` the last window may start in the right padding only if it starts
    inside the input or the left padding.
    """
    span = n + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def padded_for_windows(x: Any, kernel: Sequence[int], stride: Sequence[int],
                       dilation: Sequence[int], padding: Sequence[int],
                       out_sizes: Sequence[int], fill: float) -> Any:
    """``x`` padded with ``fill`` by ``padding`` in front and, at the end, to where the last
    window ends (cropped where the last windows leave input rows unread)."""
    highs = [(o - 1) * s + d * (k - 1) + 1 - sz - p
             for o, s, d, k, sz, p in zip(out_sizes, stride, dilation, kernel, x.shape[2:],
                                          padding)]
    if not any(p or h for p, h in zip(padding, highs)):
        return x
    config = ((0, 0, 0),) * 2 + tuple((p, h, 0) for p, h in zip(padding, highs))
    return _shape.pad(x, fill, config)


def windows(x: Any, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
            padding: Sequence[int], out_sizes: Sequence[int], fill: float, axis: int,
            padded: bool = False) -> Any:
    """The sliding windows of ``x`` ``[N, C, *spatial]``: ``[N, C, *out]`` arrays, one per
    kernel position, stacked along a new ``axis`` (0 or 2).

    Window element ``k`` (row-major over the kernel) at output position ``y`` is
    ``x[..., y * stride - padding + k * dilation]``; positions outside ``x`` read ``fill``
    (``padded``: ``x`` is already :func:`padded_for_windows`). Built from a pad and one
    strided slice per kernel position, so it is differentiable and batchable like those
    primitives; windows that tile the input exactly (stride equal to the kernel, no
    dilation) are a reshape and one transpose instead.
    """
    nd = len(kernel)
    n, c = x.shape[:2]
    if not padded:
        x = padded_for_windows(x, kernel, stride, dilation, padding, out_sizes, fill)
    kk = math.prod(kernel)
    if list(stride) == list(kernel) and all(d == 1 for d in dilation):
        # [n, c, o1, k1, o2, k2, ...] -> kernel axes at `axis`, output axes last
        split = (n, c) + tuple(v for o, k in zip(out_sizes, kernel) for v in (o, k))
        outs = tuple(range(2, 2 + 2 * nd, 2))
        ks = tuple(range(3, 3 + 2 * nd, 2))
        perm = ks + (0, 1) + outs if axis == 0 else (0, 1) + ks + outs
        w = _shape.transpose(_shape.reshape(x, split), perm)
        shape = (kk, n, c) if axis == 0 else (n, c, kk)
        return _shape.reshape(w, shape + tuple(out_sizes))
    parts = []
    for k in np.ndindex(*kernel):
        start = (0, 0) + tuple(ki * d for ki, d in zip(k, dilation))
        limit = (n, c) + tuple(ki * d + (o - 1) * s + 1
                               for ki, d, o, s in zip(k, dilation, out_sizes, stride))
        parts.append(_shape.slice(x, start, limit, (1, 1) + tuple(stride)))
    return fnp.stack(parts, axis=axis)


def _window_args(fn: str, nd: int, kernel_size: Any, dilation: Any, padding: Any,
                 stride: Any) -> tuple:
    return (ntuple(fn, "kernel_size", kernel_size, nd, 1), ntuple(fn, "dilation", dilation, nd, 1),
            ntuple(fn, "padding", padding, nd, 0), ntuple(fn, "stride", stride, nd, 1))


def unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
           stride: Any = 1) -> Any:
    """Sliding local blocks of a batched image as columns (im2col), as
    ``torch.nn.functional.unfold``.

    Args:
        input: ``[N, C, H, W]`` or unbatched ``[C, H, W]``.
        kernel_size, dilation, stride: positive int or pair.
        padding: non-negative int or pair (zeros on both sides).

    Returns:
        ``[N, C * kH * kW, L]``: column ``l`` holds block ``l`` (row-major over the output
        grid), channel-major then kernel position, as in PyTorch.

    Raises:
        ArgumentError: invalid kernel_size, dilation, padding or stride.
        ShapeError: the input rank, or no block fits into the padded input.

    Example:
        >>> unfold(np.ones((1, 2, 4, 4)), 2).shape   # (1, 8, 9)
    """
    fn = "unfold"
    kernel, dilation, padding, stride = _window_args(fn, 2, kernel_size, dilation, padding,
                                                     stride)
    x, unbatched = batched(fn, array(input), 2)
    out_sizes = [pool_out_size(n, k, s, p, d, False)
                 for n, k, s, p, d in zip(x.shape[2:], kernel, stride, padding, dilation)]
    if any(o < 1 for o in out_sizes):
        padded = [n + 2 * p for n, p in zip(x.shape[2:], padding)]
        dilated = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
        raise ShapeError(f"functx.nn.unfold: the padded input {fmt_sizes(padded)} is smaller "
                         f"than the dilated kernel {fmt_sizes(dilated)}: no block fits. Use a "
                         "smaller kernel or more padding.")
    w = windows(x, kernel, stride, dilation, padding, out_sizes, 0, axis=2)
    n, c = x.shape[:2]
    cols = fnp.reshape(w, (n, c * math.prod(kernel), math.prod(out_sizes)))
    return fnp.squeeze(cols, 0) if unbatched else cols


def fold(input: Any, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
         stride: Any = 1) -> Any:
    """Sum sliding local blocks back into an image (col2im), as
    ``torch.nn.functional.fold``: the adjoint of :func:`unfold`.

    Args:
        input: ``[N, C * kH * kW, L]`` or unbatched ``[C * kH * kW, L]``.
        output_size: the image's spatial size (int or pair).
        kernel_size, dilation, padding, stride: as in :func:`unfold`.

    Returns:
        ``[N, C, H, W]``, where overlapping block entries add up.

    Raises:
        ArgumentError: invalid sizes or options.
        ShapeError: the input's second axis is not divisible by ``kH * kW``, or ``L`` is not
            the number of blocks of ``output_size``.

    Example:
        >>> fold(np.ones((1, 8, 9)), (4, 4), 2).shape   # (1, 2, 4, 4)
    """
    fn = "fold"
    kernel, dilation, padding, stride = _window_args(fn, 2, kernel_size, dilation, padding,
                                                     stride)
    size = ntuple(fn, "output_size", output_size, 2, 1)
    cols = array(input)
    if cols.ndim not in (2, 3):
        raise ShapeError(f"functx.nn.fold: input must be 2-d [C * prod(kernel_size), L] or 3-d "
                         f"[N, C * prod(kernel_size), L], but it has shape {tuple(cols.shape)}.")
    unbatched = cols.ndim == 2
    if unbatched:
        cols = fnp.expand_dims(cols, 0)
    n, ck, length = cols.shape
    kk = math.prod(kernel)
    if ck % kk:
        raise ShapeError(f"functx.nn.fold: input.shape[{1 - unbatched}] = {ck} must be "
                         f"divisible by the product of kernel_size {kernel} = {kk}.")
    out_sizes = [pool_out_size(m, k, s, p, d, False)
                 for m, k, s, p, d in zip(size, kernel, stride, padding, dilation)]
    if any(o < 1 for o in out_sizes) or math.prod(out_sizes) != length:
        raise ShapeError(f"functx.nn.fold: given output_size={size}, kernel_size={kernel}, "
                         f"dilation={dilation}, padding={padding}, stride={stride}, the input "
                         f"needs {' * '.join(map(str, out_sizes))} = {math.prod(out_sizes)} "
                         f"blocks along its last axis, but it has {length}.")
    c = ck // kk
    blocks = fnp.reshape(cols, (n, c, kk) + tuple(out_sizes))
    total = None
    for i, k in enumerate(np.ndindex(*kernel)):
        part = _shape.slice(blocks, (0, 0, i, 0, 0), (n, c, i + 1) + tuple(out_sizes))
        part = _shape.reshape(part, (n, c) + tuple(out_sizes))
        # Block entry y of kernel position k lands on y * s - p + k * d of the image.
        config = [(0, 0, 0), (0, 0, 0)]
        for ki, d, o, s, p, m in zip(k, dilation, out_sizes, stride, padding, size):
            lo = ki * d - p
            config.append((lo, m - (lo + (o - 1) * s + 1), s - 1))
        placed = _shape.pad(part, 0, config)
        total = placed if total is None else _ew.add(total, placed)
    return fnp.squeeze(total, 0) if unbatched else total
