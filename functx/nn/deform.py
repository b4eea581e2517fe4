"""Deformable convolution (v1 and, with a mask, v2) as ``torchvision.ops.deform_conv2d``.

Each kernel tap of each output pixel reads the input at its regular position plus a learned
offset, by bilinear interpolation (zero outside the input), optionally scaled by a
modulation mask; the samples are then contracted with the weight like a convolution.

The implementation is a composite of functx operations: the sampling positions are
computed for all output pixels at once, one gather (from a channels-last view of the input)
reads the four bilinear corners of every tap, and one ``einsum`` does the convolution. So
``grad``, ``vjp``, ``jvp`` and ``vmap`` work, with gradients for the input, the offsets,
the mask, the weight and the bias. Memory: the sampled columns hold
``N * C_in * kh * kw * H_out * W_out`` values (as torchvision's im2col buffer does).

Example:
    >>> import numpy as np, functx.nn as fnn
    >>> x, w = np.ones((1, 2, 5, 5)), np.ones((3, 2, 3, 3))
    >>> off = np.zeros((1, 2 * 3 * 3, 3, 3))  # zero offsets: an ordinary convolution
    >>> fnn.deform_conv2d(x, off, w).shape
    (1, 3, 3, 3)
"""
from __future__ import annotations

from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import ShapeError
from functx.nn.conv import float_operands, ntuple
from functx.nn.resample import grid_axis_taps, sample_taps
from functx.numpy._shape import on_device_of

__all__ = ["deform_conv2d"]


def _check_shapes(x: Any, offset: Any, weight: Any, mask: Any, bias: Any, stride: tuple,
                  padding: tuple, dilation: tuple) -> tuple[int, int, int, int]:
    """(offset groups, weight groups, H_out, W_out), after checking every shape.

    Raises:
        ShapeError: naming the operand, its shape and the shape expected.
    """
    fn = "functx.nn.deform_conv2d"
    for name, a in (("input", x), ("offset", offset), ("weight", weight)) + (
            (("mask", mask),) if mask is not None else ()):
        if a.ndim != 4:
            raise ShapeError(f"{fn}: {name} must be 4-d, but it has shape {tuple(a.shape)}.")
    n, cin, h, w = x.shape
    cout, cin_g, kh, kw = weight.shape
    if kh < 1 or kw < 1:
        raise ShapeError(f"{fn}: the kernel must be non-empty, but weight has shape "
                         f"{tuple(weight.shape)}.")
    if cin_g < 1 or cin % cin_g:
        raise ShapeError(f"{fn}: the input's {cin} channels must be a multiple of "
                         f"weight.shape[1] = {cin_g} (in_channels / groups), but weight has "
                         f"shape {tuple(weight.shape)} and input {tuple(x.shape)}.")
    wgroups = cin // cin_g
    if cout % wgroups:
        raise ShapeError(f"{fn}: out_channels (weight.shape[0] = {cout}) must be divisible "
                         f"by the number of weight groups {wgroups} (= {cin} input channels / "
                         f"weight.shape[1] = {cin_g}).")
    taps = kh * kw
    if offset.shape[1] == 0 or offset.shape[1] % (2 * taps):
        raise ShapeError(f"{fn}: offset.shape[1] must be a positive multiple of 2 * kh * kw "
                         f"= {2 * taps} (a (y, x) pair per kernel tap per offset group) for "
                         f"the {kh}x{kw} kernel, but offset has shape "
                         f"{tuple(offset.shape)}.")
    ogroups = offset.shape[1] // (2 * taps)
    if cin % ogroups:
        raise ShapeError(f"{fn}: the input's {cin} channels must be divisible by the "
                         f"{ogroups} offset groups (offset.shape[1] = {offset.shape[1]} = "
                         f"2 * {kh} * {kw} * {ogroups}).")
    ho = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if ho < 1 or wo < 1:
        raise ShapeError(f"{fn}: the computed output size ({ho} x {wo}) is too small: the "
                         f"(dilated) {kh}x{kw} kernel does not fit the padded input of shape "
                         f"{tuple(x.shape)} (padding {padding}, dilation {dilation}).")
    want = (n, 2 * ogroups * taps, ho, wo)
    if tuple(offset.shape) != want:
        raise ShapeError(f"{fn}: offset must have shape {want} ([N, 2 * offset_groups * kh * "
                         f"kw, H_out, W_out]), but it has shape {tuple(offset.shape)}.")
    if mask is not None and tuple(mask.shape) != (n, ogroups * taps, ho, wo):
        raise ShapeError(f"{fn}: mask must have shape {(n, ogroups * taps, ho, wo)} ([N, "
                         f"offset_groups * kh * kw, H_out, W_out]), but it has shape "
                         f"{tuple(mask.shape)}.")
    if bias is not None and tuple(bias.shape) != (cout,):
        raise ShapeError(f"{fn}: bias must have shape ({cout},) (one entry per output "
                         f"channel), but it has shape {tuple(bias.shape)}.")
    return ogroups, wgroups, ho, wo


def deform_conv2d(input: Any, offset: Any, weight: Any, bias: Any = None,
                  stride: Any = (1, 1), padding: Any = (0, 0), dilation: Any = (1, 1),
                  mask: Any = None) -> Any:
    """Deformable 2-d convolution, as ``torchvision.ops.deform_conv2d``.

    Tap ``(i, j)`` of output pixel ``(ho, wo)`` in offset group ``g`` reads the input
    channels of that group at ``y = ho * stride_h - pad_h + i * dil_h + dy`` and
    ``x = wo * stride_w - pad_w + j * dil_w + dx``, where ``(dy, dx)`` is
    ``offset[n, 2 * (g * kh * kw + i * kw + j) + (0, 1), ho, wo]``, by bilinear
    interpolation with zeros outside the input; the value is multiplied by
    ``mask[n, g * kh * kw + i * kw + j, ho, wo]`` when a mask is given (DCNv2). Input
    channel ``c`` belongs to offset group ``c // (C_in / offset_groups)``. The weight's
    groups (``C_in / weight.shape[1]``) are independent of the offset groups, as in
    torchvision.

    Args:
        input: ``[N, C_in, H, W]``.
        offset: ``[N, 2 * offset_groups * kh * kw, H_out, W_out]``, (y, x) pairs.
        weight: ``[C_out, C_in / groups, kh, kw]``.
        bias: None or ``[C_out]``.
        stride, padding, dilation: an int or a pair (padding >= 0, the others >= 1).
        mask: None or ``[N, offset_groups * kh * kw, H_out, W_out]``.

    Returns:
        ``[N, C_out, H_out, W_out]`` with ``H_out = (H + 2 pad_h - dil_h (kh - 1) - 1) //
        stride_h + 1`` (and likewise ``W_out``).

    Raises:
        ArgumentError: a non-positive stride or dilation, a negative padding.
        ShapeError: any operand's shape inconsistent with the others (see above).
        DTypeError: operands that are not of one real floating-point dtype.

    Example:
        >>> y = fnn.deform_conv2d(x, off, w, mask=np.ones((1, 9, 3, 3)))
    """
    fn = "deform_conv2d"
    stride = ntuple(fn, "stride", stride, 2, 1)
    padding = ntuple(fn, "padding", padding, 2, 0)
    dilation = ntuple(fn, "dilation", dilation, 2, 1)
    named = [("input", input), ("offset", offset), ("weight", weight)]
    named += [(k, v) for k, v in (("bias", bias), ("mask", mask)) if v is not None]
    arrays = dict(zip([k for k, _ in named], float_operands(fn, *named)))
    x, off, w = arrays["input"], arrays["offset"], arrays["weight"]
    b, m = arrays.get("bias"), arrays.get("mask")
    ogroups, wgroups, ho, wo = _check_shapes(x, off, w, m, b, stride, padding, dilation)
    n, cin, h, wd = x.shape
    cout, _, kh, kw = w.shape
    taps, cg = kh * kw, cin // ogroups

    # Sampling positions [N, G, K, H_out, W_out]: the regular grid plus the offsets.
    ky, kx = np.divmod(np.arange(taps), kw)
    grid_y = (np.arange(ho) * stride[0] - padding[0])[None, :] + (ky * dilation[0])[:, None]
    grid_x = (np.arange(wo) * stride[1] - padding[1])[None, :] + (kx * dilation[1])[:, None]
    off = fnp.reshape(off, (n, ogroups, taps, 2, ho, wo))
    ys = fnp.add(off[:, :, :, 0], on_device_of(x, grid_y[:, :, None].astype(x.dtype)))
    xs = fnp.add(off[:, :, :, 1], on_device_of(x, grid_x[:, None, :].astype(x.dtype)))
    axis_taps = [grid_axis_taps(ys, h, "bilinear", "zeros", False),
                 grid_axis_taps(xs, wd, "bilinear", "zeros", False)]

    # One row per (image, offset group, pixel), the group's channels along the row.
    table = fnp.reshape(fnp.moveaxis(fnp.reshape(x, (n, ogroups, cg, h * wd)), 2, -1),
                        (n * ogroups * h * wd, cg))
    base = on_device_of(x, (np.arange(n * ogroups, dtype=np.int64) * (h * wd))
                        .reshape(n, ogroups, 1, 1, 1))
    scale = None if m is None else fnp.reshape(m, (n, ogroups, taps, ho, wo))
    cols = sample_taps(table, base, axis_taps, (h, wd), extra=scale)  # [N, G, K, Ho, Wo, Cg]

    # The convolution: channel g * Cg + c, weight groups over the channel axis.
    cols = fnp.reshape(fnp.moveaxis(cols, -1, 2), (n, wgroups, cin // wgroups, taps, ho, wo))
    wr = fnp.reshape(w, (wgroups, cout // wgroups, cin // wgroups, taps))
    out = fnp.reshape(fnp.einsum("ngckhw,gock->ngohw", cols, wr), (n, cout, ho, wo))
    if b is not None:
        out = fnp.add(out, fnp.reshape(b, (1, cout, 1, 1)))
    return out
