"""Rearranging channels into space and back: pixel_shuffle, pixel_unshuffle
(torch.nn.functional's names and arguments; sub-pixel convolution upsampling).

Both are one reshape, one transpose and one reshape, so every transform applies and the
gradient of each is the other's rearrangement.

Example:
    >>> import functx.nn as fnn
    >>> fnn.pixel_shuffle(np.ones((1, 8, 3, 3)), 2).shape     # (1, 2, 6, 6)
    >>> fnn.pixel_unshuffle(np.ones((1, 2, 6, 6)), 2).shape   # (1, 8, 3, 3)
"""
from __future__ import annotations

from typing import Any

import functx.numpy as fnp
from functx.errors import ShapeError
from functx.nn._util import array, check_int

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


def _check(fn: str, x: Any) -> None:
    if x.ndim < 3:
        raise ShapeError(f"functx.nn.{fn}: input must have at least 3 dimensions (*, C, H, "
                         f"W), but it has shape {tuple(x.shape)}.")


def pixel_shuffle(input: Any, upscale_factor: int) -> Any:
    """``(*, C * r**2, H, W) -> (*, C, H * r, W * r)``: each group of ``r**2`` channels
    becomes an ``r x r`` block of pixels (``out[..., c, h*r + i, w*r + j] =
    input[..., c*r*r + i*r + j, h, w]``).

    Args:
        input: an array of at least 3 dimensions whose channel count (dimension -3) is a
            multiple of ``upscale_factor**2``.
        upscale_factor: ``r``, a positive int.

    Returns:
        Shape ``(*, C, H * r, W * r)``, the input's dtype.

    Raises:
        ShapeError: fewer than 3 dimensions, or channels not divisible by ``r**2``.
        ArgumentError: ``upscale_factor`` is not a positive int.

    Example:
        >>> fnn.pixel_shuffle(np.arange(4.0).reshape(1, 4, 1, 1), 2)   # [[[[0, 1], [2, 3]]]]
    """
    x = array(input)
    r = check_int("pixel_shuffle", "upscale_factor", upscale_factor, lo=1)
    _check("pixel_shuffle", x)
    *batch, c, h, w = x.shape
    if c % (r * r):
        raise ShapeError(f"functx.nn.pixel_shuffle: the number of input channels (dimension "
                         f"-3, {c} in shape {tuple(x.shape)}) must be divisible by "
                         f"upscale_factor**2 = {r * r}.")
    n = len(batch)
    y = fnp.reshape(x, (*batch, c // (r * r), r, r, h, w))
    y = fnp.transpose(y, tuple(range(n)) + tuple(n + i for i in (0, 3, 1, 4, 2)))
    return fnp.reshape(y, (*batch, c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Any, downscale_factor: int) -> Any:
    """``(*, C, H * r, W * r) -> (*, C * r**2, H, W)``: the inverse of
    :func:`pixel_shuffle`.

    Args:
        input: an array of at least 3 dimensions whose height and width are multiples of
            ``downscale_factor``.
        downscale_factor: ``r``, a positive int.

    Returns:
        Shape ``(*, C * r**2, H, W)``, the input's dtype.

    Raises:
        ShapeError: fewer than 3 dimensions, or a spatial size not divisible by ``r``.
        ArgumentError: ``downscale_factor`` is not a positive int.

    Example:
        >>> fnn.pixel_unshuffle(np.arange(4.0).reshape(1, 1, 2, 2), 2)[0, :, 0, 0]   # [0..3]
    """
    x = array(input)
    r = check_int("pixel_unshuffle", "downscale_factor", downscale_factor, lo=1)
    _check("pixel_unshuffle", x)
    *batch, c, h, w = x.shape
    if h % r or w % r:
        raise ShapeError(f"functx.nn.pixel_unshuffle: the height and width (dimensions -2 "
                         f"and -1 of shape {tuple(x.shape)}) must be divisible by "
                         f"downscale_factor = {r}.")
    n = len(batch)
    y = fnp.reshape(x, (*batch, c, h // r, r, w // r, r))
    y = fnp.transpose(y, tuple(range(n)) + tuple(n + i for i in (0, 2, 4, 1, 3)))
    return fnp.reshape(y, (*batch, c * r * r, h // r, w // r))
