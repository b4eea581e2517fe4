"""``pad``: torch.nn.functional.pad's argument convention over functx.numpy.

Example:
    >>> import functx.nn as fnn
    >>> fnn.pad(np.ones((2, 3)), (1, 2)).shape   # last axis padded: (2, 6)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import functx.numpy as fnp
from functx.nn._util import ArgumentError, array, check_number, check_option
from functx.numpy._shape import on_device_of, slice_axis

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_pairs(pad: Any, ndim: int) -> list[tuple[int, int]]:
    """``pad`` (last axis first) as one ``(before, after)`` pair per axis of the input."""
    if isinstance(pad, (int, np.integer)) or not hasattr(pad, "__len__"):
        raise ArgumentError(f"functx.nn.pad: pad must be a sequence of ints (before, after "
                            f"pairs, last dimension first), not {pad!r}.")
    p = list(pad)
    if any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) for v in p):
        raise ArgumentError(f"functx.nn.pad: pad must hold ints, but got {tuple(pad)}.")
    if len(p) % 2:
        raise ArgumentError(f"functx.nn.pad: pad must have an even length (one (before, "
                            f"after) pair per padded dimension), but got {tuple(p)} of length "
                            f"{len(p)}.")
    if len(p) // 2 > ndim:
        raise ArgumentError(f"functx.nn.pad: pad {tuple(p)} pads {len(p) // 2} dimensions, but "
                            f"the input has only {ndim}.")
    pairs = [(0, 0)] * ndim
    for i in range(len(p) // 2):
        pairs[ndim - 1 - i] = (int(p[2 * i]), int(p[2 * i + 1]))
    return pairs


def pad(input: Any, pad: Sequence[int], mode: str = "constant",
        value: float | None = None) -> Any:
    """``input`` padded (or cropped, for negative sizes) on its trailing dimensions.

    ``pad`` lists ``(before, after)`` sizes starting from the LAST dimension, as in PyTorch:
    ``(1, 2)`` pads the last dimension with 1 element before and 2 after; ``(1, 2, 3, 4)``
    also pads the second-to-last with 3 before and 4 after. A negative size removes that
    many elements from that side instead.

    Modes:
        * "constant": fill with ``value`` (default 0).
        * "reflect": mirror without repeating the edge (``[1, 2, 3] -> [3, 2, 1, 2, 3]``);
          each size must be smaller than the dimension.
        * "replicate": repeat the edge element; the dimension must be non-empty.
        * "circular": wrap around; each size must be at most the dimension's length (after
          any cropping, which is applied first, as in PyTorch).

    Unlike PyTorch, the non-constant modes are not limited to the last 1-3 dimensions of a
    2-d to 5-d input: any number of trailing dimensions of any input can be padded (the
    results agree wherever PyTorch accepts the call). Gradients flow to ``input`` (the
    scatter-add of each padded copy).

    Args:
        input: an array.
        pad: an even-length sequence of ints, at most two per input dimension.
        mode: "constant", "reflect", "replicate" or "circular".
        value: the fill value for "constant" mode (default 0); None for the other modes.

    Returns:
        The padded array.

    Raises:
        ArgumentError: an unknown mode, a ``value`` with a non-constant mode, a malformed
            ``pad``, a reflect size not smaller than the dimension, a replicate/circular pad
            of an empty dimension, circular padding wrapping more than once, or cropping
            more than a dimension holds.

    Example:
        >>> fnn.pad(np.array([[1.0, 2.0, 3.0]]), (2, 1), mode="reflect")  # [[3,2,1,2,3,2]]
    """
    check_option("pad", "mode", mode, _MODES)
    if value is not None and mode != "constant":
        raise ArgumentError(f"functx.nn.pad: mode {mode!r} does not take a value argument "
                            f"(got value={value!r}); value is only for mode 'constant'.")
    x = array(input)
    pairs = _pad_pairs(pad, x.ndim)
    for ax, (lo, hi) in enumerate(pairs):
        n = x.shape[ax]
        if -min(lo, 0) - min(hi, 0) > n:
            raise ArgumentError(f"functx.nn.pad: pad {tuple(pad)} crops {-min(lo, 0)} + "
                                f"{-min(hi, 0)} elements from dimension {ax}, which has only "
                                f"{n} (input shape {tuple(x.shape)}).")
    if mode == "constant":
        fill = 0.0 if value is None else check_number("pad", "value", value)
        for ax, (lo, hi) in enumerate(pairs):
            if lo < 0 or hi < 0:
                n = x.shape[ax]
                x = slice_axis(x, max(-lo, 0), n - max(-hi, 0), ax)
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
        if not any(lo or hi for lo, hi in widths):
            return x
        return fnp.pad(x, widths, mode="constant", constant_values=fill)
    for ax, (lo, hi) in enumerate(pairs):
        if lo == 0 and hi == 0:
            continue
        n = x.shape[ax]
        src = _source_positions(mode, n, lo, hi, ax, tuple(x.shape), tuple(pad))
        x = fnp.take(x, on_device_of(x, src), axis=ax)
    return x


def _source_positions(mode: str, n: int, lo: int, hi: int, ax: int, shape: tuple,
                      pad: tuple) -> np.ndarray:
    """For each output position along one axis, the input position it copies (static)."""
    grow = (max(lo, 0), max(hi, 0))
    crop = (max(-lo, 0), max(-hi, 0))
    where = f"dimension {ax} of the input of shape {shape} (pad {pad})"
    if mode == "reflect":
        if max(grow) >= n:
            raise ArgumentError(f"functx.nn.pad: reflect padding sizes must be smaller than "
                                f"the dimension they pad, but {where} has size {n} and is "
                                f"padded by {grow}. Use mode 'replicate' or 'constant', or "
                                "pad less.")
        src = np.pad(np.arange(n), grow, mode="reflect")
        return src[crop[0]:len(src) - crop[1]]
    if mode == "replicate":
        if n == 0:
            raise ArgumentError(f"functx.nn.pad: replicate padding needs a non-empty "
                                f"dimension, but {where} is empty.")
        src = np.pad(np.arange(n), grow, mode="edge")
        return src[crop[0]:len(src) - crop[1]]
    base = np.arange(n)[crop[0]:n - crop[1]]  # circular: crop first, then wrap
    if max(grow) > len(base):
        raise ArgumentError(f"functx.nn.pad: circular padding may wrap around at most once: "
                            f"sizes must be at most the dimension's length, but {where} has "
                            f"length {len(base)} (after cropping) and is padded by {grow}.")
    return np.pad(base, grow, mode="wrap")
