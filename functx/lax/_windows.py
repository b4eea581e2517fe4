"""Windowed operations with ``jax.lax``'s signatures: ``conv_general_dilated`` (any
dimension layout, over functx's ``conv_general_dilated`` primitive, which computes in
``NC...``/``OI...`` layout) and ``reduce_window`` (max/sum/min pooling, or any binary
reduction written with functx operations).
"""
from __future__ import annotations

import itertools
import operator
from typing import Any, Callable, Sequence

import numpy as np

from functx import numpy as fnp
from functx.errors import ArgumentTypeError, FunctxError, ShapeError
from functx.primitives import conv as _conv
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape

__all__ = ["conv_general_dilated", "reduce_window"]


# -- conv_general_dilated --------------------------------------------------------------------

def _spec_perms(dimension_numbers: Any, nd: int) -> tuple[tuple, tuple, tuple]:
    """``(lhs_perm, rhs_perm, out_perm)``: for each operand, its axes in the order
    (batch/out-features, features/in-features, spatial...), as JAX's ``ConvDimensionNumbers``.

    Accepts None (``NC...``, ``OI...``, ``NC...``), three layout strings such as
    ``("NHWC", "HWIO", "NHWC")`` (spatial axes ordered as in the kernel's string, as JAX
    does), or three tuples of axis numbers (``jax.lax.ConvDimensionNumbers``).
    """
    if dimension_numbers is None:
        canon = tuple(range(nd + 2))
        return canon, canon, canon
    if len(dimension_numbers) != 3:
        raise ArgumentTypeError(f"conv_general_dilated: dimension_numbers must be None or "
                                f"three specs (lhs, rhs, out), but got {dimension_numbers!r}.")
    lhs, rhs, out = dimension_numbers
    if all(isinstance(s, str) for s in (lhs, rhs, out)):
        if not (len(lhs) == len(rhs) == len(out) == nd + 2):
            raise ShapeError(f"conv_general_dilated: dimension_numbers {dimension_numbers!r} "
                             f"do not have {nd + 2} letters each (the operands' rank).")
        spatial = [c for c in rhs if c not in "OI"]
        try:
            lhs_perm = (lhs.index("N"), lhs.index("C")) + tuple(lhs.index(c) for c in spatial)
            rhs_perm = (rhs.index("O"), rhs.index("I")) + tuple(rhs.index(c) for c in spatial)
            out_perm = (out.index("N"), out.index("C")) + tuple(out.index(c) for c in spatial)
        except ValueError:
            raise ArgumentTypeError(
                f"conv_general_dilated: dimension_numbers {dimension_numbers!r} must name "
                "N and C in the input and output layouts, O and I in the kernel's, and the "
                "same spatial letters in all three.") from None
        return lhs_perm, rhs_perm, out_perm
    return tuple(map(int, lhs)), tuple(map(int, rhs)), tuple(map(int, out))


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int],
                         padding: str | Sequence[tuple[int, int]],
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None) -> Any:
    """The N-d convolution (cross-correlation) of ``jax.lax.conv_general_dilated``.

    Args:
        lhs: the input, ``[N, C, *spatial]`` in the default layout.
        rhs: the kernel, ``[O, C // feature_group_count, *window]`` in the default layout.
        window_strides: one stride per spatial axis.
        padding: ``"VALID"``, ``"SAME"``, or one ``(low, high)`` pair per spatial axis.
        lhs_dilation: input dilation per spatial axis (a transposed convolution).
        rhs_dilation: kernel dilation per spatial axis (atrous convolution).
        dimension_numbers: None, three layout strings (``("NHWC", "HWIO", "NHWC")``) or
            ``jax.lax.ConvDimensionNumbers``-like axis tuples.
        feature_group_count: channel groups (depthwise convolution: ``C``).
        batch_group_count: must be 1 (functx has no batch-grouped convolution yet).
        precision: accepted for compatibility (functx computes in the operands' dtype).
        preferred_element_type: the result's dtype (the operands are converted to it
            first); None keeps their dtype.

    Returns:
        The convolution in the output layout of ``dimension_numbers``.

    Raises:
        ShapeError: ranks, channel counts or parameter lengths do not fit.
        DTypeError: the operands are not of one real floating-point dtype.
        FunctxError: ``batch_group_count`` is not 1.

    Example:
        >>> x, w = np.ones((1, 5, 1)), np.ones((3, 1, 1))     # NWC, WIO
        >>> conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=("NWC", "WIO", "NWC"))
        array([[[2.], [3.], [3.], [3.], [2.]]])
    """
    if int(batch_group_count) != 1:
        raise FunctxError(f"conv_general_dilated: batch_group_count={batch_group_count} is not "
                          "supported by functx (only 1). Split the batch and call it per "
                          "group, or use feature_group_count.")
    nd = len(fnp.shape(lhs)) - 2
    lhs_perm, rhs_perm, out_perm = _spec_perms(dimension_numbers, nd)
    if preferred_element_type is not None:
        dt = np.dtype(preferred_element_type)
        lhs = _ew.convert_element_type(lhs, new_dtype=dt)
        rhs = _ew.convert_element_type(rhs, new_dtype=dt)
    out = _conv.conv_general_dilated(
        _shape.transpose_if_needed(lhs, lhs_perm), _shape.transpose_if_needed(rhs, rhs_perm),
        window_strides, padding, lhs_dilation, rhs_dilation,
        feature_group_count=int(feature_group_count))
    return _shape.transpose_if_needed(out, tuple(int(i) for i in np.argsort(out_perm)))


# -- reduce_window ---------------------------------------------------------------------------

def _window_padding(padding: Any, sizes: Sequence[int], windows: Sequence[int],
                    strides: Sequence[int]) -> list[tuple[int, int]]:
    """``(low, high)`` per axis: as given, or from ``"VALID"``/``"SAME"``/``"SAME_LOWER"``."""
    if not isinstance(padding, str):
        pads = [tuple(int(v) for v in p) for p in padding]
        if len(pads) != len(sizes) or any(len(p) != 2 for p in pads):
            raise ShapeError(f"reduce_window: padding must hold one (low, high) pair per axis "
                             f"of the operand ({len(sizes)}), but got {padding!r}.")
        return pads
    mode = padding.upper()
    if mode == "VALID":
        return [(0, 0)] * len(sizes)
    if mode not in ("SAME", "SAME_LOWER"):
        raise ArgumentTypeError(f"reduce_window: padding must be 'VALID', 'SAME', "
                                f"'SAME_LOWER' or (low, high) pairs, but got {padding!r}.")
    pads = []
    for n, w, s in zip(sizes, windows, strides):
        out = -(-n // s)
        total = max((out - 1) * s + w - n, 0)
        lo = total // 2 if mode == "SAME" else total - total // 2
        pads.append((lo, total - lo))
    return pads


def _ints(v: Sequence[int] | None, n: int, name: str) -> tuple[int, ...]:
    if v is None:
        return (1,) * n
    v = tuple(operator.index(i) for i in v)
    if len(v) != n or any(i < 1 for i in v):
        raise ShapeError(f"reduce_window: {name} must hold one positive int per axis of the "
                         f"operand ({n}), but got {v}.")
    return v


def _identity(computation: Callable, dtype: np.dtype) -> Any:
    """The identity of a known reduction (sum, max, min) for ``dtype``, else None."""
    if computation in _SUMS:
        return 0
    if computation in _MAXES or computation in _MINS:
        big = np.inf if dtype.kind in "fc" else (
            True if dtype.kind == "b" else np.iinfo(dtype).max)
        lowest = -np.inf if dtype.kind in "fc" else (
            False if dtype.kind == "b" else np.iinfo(dtype).min)
        return lowest if computation in _MAXES else big
    return None


_SUMS = (_ew.add, fnp.add, operator.add)
_MAXES = (_ew.max, fnp.maximum)
_MINS = (_ew.min, fnp.minimum)


def reduce_window(operand: Any, init_value: Any, computation: Callable[[Any, Any], Any],
                  window_dimensions: Sequence[int], window_strides: Sequence[int] | None = None,
                  padding: str | Sequence[tuple[int, int]] = "VALID",
                  base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """Reduce each window of ``operand`` with ``computation`` (pooling).

    Each output element is ``init_value`` combined with every element of its window, as in
    ``jax.lax.reduce_window``. Padded positions (and the holes of ``base_dilation``) hold
    the identity of a sum, max or min (so a non-identity ``init_value`` counts once per
    window, as in JAX), and ``init_value`` for any other ``computation``. ``computation`` is a
    binary function of arrays written with functx operations: ``functx.lax.add`` (sum
    pooling, ``init_value`` 0), ``functx.lax.max`` (max pooling, ``-inf``),
    ``functx.lax.min``, or any associative function. It is applied once per window position
    to strided slices of the whole operand, so the cost grows with the window's size (fine
    for pooling windows), and it differentiates and batches as its operations do. For max
    pooling, tied maxima share the cotangent equally (JAX gives it to one of them).

    Args:
        operand: an array (a pytree of several operands is not supported).
        init_value: a scalar of ``operand``'s dtype (a Python scalar is converted).
        computation: the binary reduction.
        window_dimensions: the window's size per axis.
        window_strides: the step per axis (default 1).
        padding: ``"VALID"``, ``"SAME"``, ``"SAME_LOWER"`` or ``(low, high)`` per axis.
        base_dilation: dilation of the operand per axis (``d - 1`` init values between
            neighbours).
        window_dilation: dilation of the window per axis.

    Returns:
        The reduced windows, of ``operand``'s dtype.

    Raises:
        ShapeError: a parameter does not have one entry per axis, or the window is larger
            than the padded operand.
        ArgumentTypeError: a pytree of operands, or an unknown padding.

    Example:
        >>> x = np.arange(5.0)
        >>> reduce_window(x, -np.inf, functx.lax.max, (2,), (2,), "SAME")
        array([1., 3., 4.])
    """
    if isinstance(operand, (list, tuple, dict)):
        raise ArgumentTypeError("reduce_window: functx supports one operand (an array), not "
                                "a pytree of operands. Call it once per operand.")
    shape = tuple(fnp.shape(operand))
    n = len(shape)
    windows = _ints(window_dimensions, n, "window_dimensions")
    strides = _ints(window_strides, n, "window_strides")
    base = _ints(base_dilation, n, "base_dilation")
    wdil = _ints(window_dilation, n, "window_dilation")
    dtype = fnp.result_type(operand)
    init = (fnp.asarray(init_value, dtype=dtype)
            if isinstance(init_value, (bool, int, float, np.generic)) else init_value)
    fill = _identity(computation, dtype)  # what padded positions hold
    fill = init if fill is None else fnp.asarray(fill, dtype=dtype)
    x = operand
    if any(b > 1 for b in base):
        x = _shape.pad(x, fill, [(0, 0, b - 1) for b in base])
    sizes = tuple(fnp.shape(x))
    spans = [(w - 1) * d + 1 for w, d in zip(windows, wdil)]
    pads = _window_padding(padding, sizes, spans, strides)
    if any(p != (0, 0) for p in pads):
        x = _shape.pad(x, fill, [(lo, hi, 0) for lo, hi in pads])
        sizes = tuple(fnp.shape(x))
    if any(sp > m for sp, m in zip(spans, sizes)):
        raise ShapeError(f"reduce_window: the window {windows} (dilated: {tuple(spans)}) is "
                         f"larger than the padded operand {sizes}.")
    out_shape = tuple((m - sp) // s + 1 for m, sp, s in zip(sizes, spans, strides))
    acc = _shape.broadcast_in_dim(init, out_shape, ())
    for offset in itertools.product(*[range(w) for w in windows]):
        starts = tuple(o * d for o, d in zip(offset, wdil))
        limits = tuple(st + (k - 1) * s + 1 for st, k, s in zip(starts, out_shape, strides))
        acc = computation(acc, _shape.slice(x, starts, limits, strides))
    return acc
