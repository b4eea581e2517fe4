"""Resampling with torch.nn.functional's names, arguments and defaults.

``interpolate`` (and the deprecated ``upsample``, ``upsample_nearest``,
``upsample_bilinear``) resizes ``[N, C, *spatial]`` inputs on a regular grid;
``grid_sample`` reads an input at arbitrary points given by a grid of normalised
coordinates, and ``affine_grid`` makes such a grid from a batch of affine matrices. Both are composites of functx operations (gathers, ``floor``, ``where``,
arithmetic), so ``grad``, ``vjp``, ``jvp`` and ``vmap`` work through them; ``grid_sample``
has gradients with respect to the input and to the grid.

``interpolate`` is separable: each spatial axis is resampled in turn by one gather with
static indices and a weighted sum over the taps, with indices and weights computed on the
host exactly as PyTorch's CPU kernels compute them (the same source-index formulas, the
same clamping at the borders, nearest indices in float32 arithmetic). ``grid_sample``
gathers all taps of all output points in one gather from a channels-last view of the input.

Example:
    >>> import numpy as np, functx.nn as fnn
    >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
    >>> fnn.interpolate(x, scale_factor=2, mode="bilinear").shape
    (1, 1, 8, 8)
"""
from __future__ import annotations

import itertools
import math
import warnings
from typing import Any, Sequence

import numpy as np

import functx.numpy as fnp
from functx.errors import DTypeError, ShapeError
from functx.nn import pooling
from functx.nn._util import ArgumentError, array, check_option
from functx.nn.conv import float_operands
from functx.numpy._shape import on_device_of

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "grid_sample",
           "affine_grid"]

_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear",
                 "area")
_MODE_NDIM = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}
_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) bicubic convolution parameter
_AA_CUBIC_A = -0.5  # PyTorch's antialiasing bicubic filter (PIL's)


# -- interpolate: argument handling -----------------------------------------------------------

def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) \
        and not isinstance(v, (bool, np.bool_))


def _per_axis(name: str, value: Any, d: int, shape: tuple, check: Any, what: str) -> list:
    """``value`` (one item or a sequence of ``d`` items) as a list of ``d`` checked items."""
    items = list(value) if isinstance(value, (list, tuple)) else [value] * d
    if len(items) != d:
        raise ArgumentError(f"functx.nn.interpolate: input and {name} must have the same "
                            f"number of spatial dimensions, but the input has spatial "
                            f"dimensions {list(shape[2:])} and {name}={value!r}. Pass one "
                            f"{what} or {d} of them.")
    if not all(check(v) for v in items):
        raise ArgumentError(f"functx.nn.interpolate: {name} must be {what} or a tuple of {d} "
                            f"of them, but got {name}={value!r}.")
    return items


def _geometry(x: Any, size: Any, scale_factor: Any,
              recompute_scale_factor: Any) -> tuple[list[int], list[float | None]]:
    """The output spatial sizes, and the scale factor (or None) each axis's kernel uses."""
    d = x.ndim - 2
    shape = tuple(x.shape)
    if size is not None and scale_factor is not None:
        raise ArgumentError(f"functx.nn.interpolate: only one of size or scale_factor should "
                            f"be defined, but got size={size!r} and "
                            f"scale_factor={scale_factor!r}.")
    if size is None and scale_factor is None:
        raise ArgumentError("functx.nn.interpolate: either size or scale_factor should be "
                            "defined; both are None.")
    if recompute_scale_factor and size is not None:
        raise ArgumentError(f"functx.nn.interpolate: recompute_scale_factor is not meaningful "
                            f"with an explicit size (size={size!r}); leave it None.")
    if size is not None:
        out = [int(v) for v in _per_axis("size", size, d, shape, _is_int, "an int")]
        scales: list[float | None] = [None] * d
        source = f"size={size!r}"
    else:
        factors = _per_axis("scale_factor", scale_factor, d, shape, _is_real, "a number")
        factors = [float(f) for f in factors]
        if not all(math.isfinite(f) and f > 0 for f in factors):
            raise ArgumentError(f"functx.nn.interpolate: scale_factor must be positive and "
                                f"finite, but got scale_factor={scale_factor!r}.")
        out = [int(math.floor(n * f)) for n, f in zip(shape[2:], factors)]
        scales = [None] * d if recompute_scale_factor else factors
        source = f"scale_factor={scale_factor!r}"
    if any(n < 1 for n in shape[2:]) or any(n < 1 for n in out):
        raise ShapeError(f"functx.nn.interpolate: input and output sizes should be greater "
                         f"than 0, but got input spatial sizes {list(shape[2:])} and output "
                         f"sizes {out} (from {source}).")
    return out, scales


# -- interpolate: per-axis indices and weights (host constants) --------------------------------

def _scales_value(n_in: int, n_out: int, scale: float | None) -> float:
    """PyTorch's ``compute_scales_value``: 1 / scale_factor if one was given, else in / out."""
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def _area_scale(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> float:
    """PyTorch's ``area_pixel_compute_scale``."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return _scales_value(n_in, n_out, scale)


def _source_index(ratio: float, n_out: int, align_corners: bool, cubic: bool) -> np.ndarray:
    """PyTorch's ``area_pixel_compute_source_index`` for every output position."""
    i = np.arange(n_out, dtype=np.float64)
    if align_corners:
        return ratio * i
    real = ratio * (i + 0.5) - 0.5
    return real if cubic else np.maximum(real, 0.0)


def _guard(real: np.ndarray, n_in: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's ``guard_index_and_lambda``: the tap left of ``real`` and the fraction past
    it (``floorf``: the floor is taken in float32, as PyTorch's kernels do)."""
    i0 = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), n_in - 1)
    return i0, np.clip(real - i0, 0.0, 1.0)


def _nearest_taps(n_in: int, n_out: int, scale: float | None, exact: bool,
                  legacy: bool) -> np.ndarray:
    """Source index of each output position, in PyTorch's float32 arithmetic.

    ``legacy``: PyTorch's 2-d "nearest" kernel (``nearest_idx``) copies an axis whose size
    is unchanged and halves the indices of an axis whose size doubles, whatever the scale
    factor; its 1-d and 3-d kernels, and "nearest-exact", always use the formula.
    """
    i = np.arange(n_out)
    if legacy and n_out == n_in:
        return i
    if legacy and n_out == 2 * n_in:
        return i >> 1
    s = np.float32(1.0 / scale) if scale is not None and scale > 0 \
        else np.float32(n_in) / np.float32(n_out)
    if exact:
        src = np.floor(((i + 0.5) * np.float64(s)).astype(np.float32))
    else:
        src = np.floor(i.astype(np.float32) * s)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _cubic_coeffs(t: Any, a: float = _CUBIC_A) -> list:
    """The four cubic-convolution weights of taps -1, 0, 1, 2 at fraction ``t`` (works on
    NumPy arrays and functx values alike: arithmetic operators only)."""
    def near(x: Any) -> Any:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: Any) -> Any:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _linear_taps(n_in: int, n_out: int, align: bool,
                 scale: float | None) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(n_out)
    if n_out == n_in:  # PyTorch copies (whatever the scale factor)
        return i[:, None], np.ones((n_out, 1))
    real = _source_index(_area_scale(n_in, n_out, align, scale), n_out, align, cubic=False)
    i0, l1 = _guard(real, n_in)
    i1 = i0 + (i0 < n_in - 1)
    return np.stack([i0, i1], 1), np.stack([1.0 - l1, l1], 1)


def _cubic_taps(n_in: int, n_out: int, align: bool,
                scale: float | None) -> tuple[np.ndarray, np.ndarray]:
    real = _source_index(_area_scale(n_in, n_out, align, scale), n_out, align, cubic=True)
    i0, t = _guard(real, n_in)
    idx = np.clip(i0[:, None] + np.arange(-1, 3)[None, :], 0, n_in - 1)
    return idx, np.stack(_cubic_coeffs(t), 1)


def _aa_filter(mode: str):
    if mode == "bilinear":
        return lambda x: np.maximum(0.0, 1.0 - np.abs(x))

    def cubic(x: np.ndarray) -> np.ndarray:
        x = np.abs(x)
        a = _AA_CUBIC_A
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return np.where(x < 1, near, np.where(x < 2, far, 0.0))
    return cubic


def _antialias_taps(n_in: int, n_out: int, mode: str, align: bool,
                    scale: float | None) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's antialiasing (PIL-style) separable filter: when downsampling, the filter
    is stretched by the scale and its weights normalised to sum to one. An axis whose size
    is unchanged is copied (as PyTorch's separable kernel skips it)."""
    if n_out == n_in:
        return np.arange(n_in)[:, None], np.ones((n_in, 1))
    ratio = _area_scale(n_in, n_out, align, scale)
    size = 2 if mode == "bilinear" else 4
    support = size * 0.5 * ratio if ratio >= 1.0 else size * 0.5
    width = int(math.ceil(support)) * 2 + 1
    invscale = 1.0 / ratio if ratio >= 1.0 else 1.0
    filt = _aa_filter(mode)
    idx = np.zeros((n_out, width), np.int64)
    wts = np.zeros((n_out, width))
    for i in range(n_out):  # static host constants, computed once per call
        center = ratio * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        count = min(max(min(int(center + support + 0.5), n_in) - lo, 0), width)
        w = filt((np.arange(count) + lo - center + 0.5) * invscale)
        total = w.sum()
        idx[i, :count] = lo + np.arange(count)
        wts[i, :count] = w / total if total != 0 else w
    return idx, wts


_DENSE_LIMIT = 1 << 20  # largest [out, in] resampling matrix applied as a matrix product


def _resample_axis(x: Any, axis: int, idx: np.ndarray, w: np.ndarray | None) -> Any:
    """``x`` resampled along ``axis``: output ``o`` is ``sum_t w[o, t] * x[idx[o, t]]``.

    Floating inputs use the dense ``[out, in]`` matrix (one matrix product, whose gradient
    is another: much faster than a gather, whose gradient is a scatter-add) unless it would
    exceed ``_DENSE_LIMIT`` entries; otherwise one gather per tap and a weighted sum.
    """
    idx = idx.reshape(idx.shape[0], -1)
    w = np.ones(idx.shape) if w is None else w
    n_out, n_taps = idx.shape
    n_in = x.shape[axis]
    if np.dtype(x.dtype).kind == "f" and n_out * n_in <= _DENSE_LIMIT:
        m = np.zeros((n_out, n_in))
        np.add.at(m, (np.repeat(np.arange(n_out), n_taps), idx.ravel()), w.ravel())
        m = on_device_of(x, m.astype(x.dtype))
        if axis == x.ndim - 1:
            return fnp.matmul(x, fnp.transpose(m))
        moved = fnp.moveaxis(x, axis, -2) if axis != x.ndim - 2 else x
        out = fnp.matmul(m, moved)
        return fnp.moveaxis(out, -2, axis) if axis != x.ndim - 2 else out
    out = None
    for t in range(n_taps):
        term = fnp.take(x, on_device_of(x, idx[:, t]), axis=axis)
        if not np.all(w[:, t] == 1):
            wt = w[:, t].astype(x.dtype).reshape((n_out,) + (1,) * (x.ndim - axis - 1))
            term = fnp.multiply(term, on_device_of(x, wt))
        out = term if out is None else fnp.add(out, term)
    return out


def _is_identity(n_in: int, idx: np.ndarray, w: np.ndarray | None) -> bool:
    if idx.shape[0] != n_in:
        return False
    first = idx if idx.ndim == 1 else idx[np.arange(n_in), np.argmax(w, axis=1)]
    if not np.array_equal(first, np.arange(n_in)):
        return False
    if w is None:
        return True
    rest = w.copy()
    rest[np.arange(n_in), np.argmax(w, axis=1)] -= 1.0
    return not np.any(rest)


# -- interpolate ------------------------------------------------------------------------------

def interpolate(input: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Any:
    """Resize ``input`` (``[N, C, *spatial]``), as ``torch.nn.functional.interpolate``.

    Modes: "nearest" (PyTorch's legacy rule ``src = floor(dst * in / out)``),
    "nearest-exact" (``src = floor((dst + 0.5) * in / out)``), "linear" (3-d input),
    "bilinear" (4-d), "bicubic" (4-d; cubic convolution with ``A = -0.75`` and indices
    clamped at the borders, as PyTorch), "trilinear" (5-d) and "area" (adaptive average
    pooling). ``antialias=True`` (bilinear and bicubic, 4-d input) applies PyTorch's
    PIL-style antialiasing filter when downsampling.

    With ``scale_factor`` the output size is ``floor(in * scale_factor)`` and the source
    positions use ``1 / scale_factor`` (unless ``recompute_scale_factor=True``, which uses
    ``in / out``), as in PyTorch. ``align_corners=True`` maps the corner pixels' centres
    onto each other (scale ``(in - 1) / (out - 1)``); False (the default) maps the corners
    of the pixels. The result has ``input``'s dtype; gradients flow to ``input``.

    Forward values equal PyTorch's (CPU kernels, torch 2.13). Gradients are the exact
    transpose of the forward, which PyTorch's backward is not in two corner cases of a scale
    factor that keeps an axis's size (or, for 1-d/3-d "nearest", doubles it): 1-d/3-d
    "nearest" and antialiased modes. PyTorch's antialiased kernels also repeat the first
    output row when the output width is 1; functx resamples the height as for any width.

    Args:
        input: a 3-d, 4-d or 5-d array ``[N, C, *spatial]``.
        size: the output spatial size: an int or a tuple of one int per spatial axis.
        scale_factor: a positive number or a tuple of one per spatial axis.
        mode: one of the modes above.
        align_corners: only for "linear", "bilinear", "bicubic", "trilinear" (None means
            False).
        recompute_scale_factor: with ``scale_factor``, compute the kernel's scale from the
            output size instead of using the factor.
        antialias: antialiasing for "bilinear" and "bicubic".

    Returns:
        ``[N, C, *size]``.

    Raises:
        ArgumentError: an unknown mode, a mode that does not fit the input's rank,
            ``align_corners`` with a non-interpolating mode, both or neither of ``size`` and
            ``scale_factor``, malformed sizes or factors, ``recompute_scale_factor`` with
            ``size``, ``antialias`` with another mode.
        ShapeError: an input that is not 3-d to 5-d, or empty input/output sizes.
        DTypeError: a non-floating input for an interpolating mode.

    Example:
        >>> fnn.interpolate(np.ones((1, 2, 5)), size=8, mode="linear").shape
        (1, 2, 8)
    """
    fn = "interpolate"
    check_option(fn, "mode", mode, _INTERP_MODES)
    x = array(input)
    if x.ndim not in (3, 4, 5):
        raise ShapeError(f"functx.nn.interpolate: input must be 3-d, 4-d or 5-d "
                         f"[N, C, *spatial] (1 to 3 spatial dimensions), but it has shape "
                         f"{tuple(x.shape)}.")
    if mode in _MODE_NDIM and x.ndim != _MODE_NDIM[mode]:
        need = _MODE_NDIM[mode]
        raise ArgumentError(f"functx.nn.interpolate: mode {mode!r} needs a {need}-d input "
                            f"[N, C, {need - 2} spatial dimension(s)], but the input has shape "
                            f"{tuple(x.shape)}. Use mode "
                            f"{[m for m, k in _MODE_NDIM.items() if k == x.ndim][0]!r} for "
                            f"{x.ndim}-d inputs.")
    interpolating = mode in _MODE_NDIM
    if align_corners is not None:
        if not interpolating:
            raise ArgumentError(f"functx.nn.interpolate: align_corners can only be set with "
                                f"the interpolating modes linear, bilinear, bicubic and "
                                f"trilinear, but got align_corners={align_corners!r} with "
                                f"mode={mode!r}. Leave it None.")
        if not isinstance(align_corners, (bool, np.bool_)):
            raise ArgumentError(f"functx.nn.interpolate: align_corners must be a bool or None, "
                                f"not {align_corners!r}.")
    if not isinstance(antialias, (bool, np.bool_)):
        raise ArgumentError(f"functx.nn.interpolate: antialias must be a bool, not "
                            f"{antialias!r}.")
    if antialias and not (mode in ("bilinear", "bicubic") and x.ndim == 4):
        raise ArgumentError(f"functx.nn.interpolate: antialias=True is restricted to modes "
                            f"'bilinear' and 'bicubic' with a 4-d input, but got mode={mode!r} "
                            f"and an input of shape {tuple(x.shape)}.")
    if interpolating or mode == "area":
        (x,) = float_operands(fn, ("input", x))
    elif np.dtype(x.dtype).kind not in "biuf":
        raise DTypeError(f"functx.nn.interpolate: input must be a real array, but it has "
                         f"dtype {x.dtype}.")
    out, scales = _geometry(x, size, scale_factor,
                            recompute_scale_factor or (mode == "area" and size is None))
    if mode == "area":
        return getattr(pooling, f"adaptive_avg_pool{x.ndim - 2}d")(x, tuple(out))
    align = bool(align_corners)
    for k, (n_in, n_out, scale) in enumerate(zip(x.shape[2:], out, scales)):
        if mode in ("nearest", "nearest-exact"):
            idx, w = _nearest_taps(n_in, n_out, scale, mode == "nearest-exact",
                                   legacy=mode == "nearest" and x.ndim == 4), None
        elif antialias:
            idx, w = _antialias_taps(n_in, n_out, mode, align, scale)
        elif mode == "bicubic":
            idx, w = _cubic_taps(n_in, n_out, align, scale)
        else:
            idx, w = _linear_taps(n_in, n_out, align, scale)
        if not _is_identity(n_in, idx, w):
            x = _resample_axis(x, 2 + k, idx, w)
    return x


def _deprecated(name: str) -> None:
    warnings.warn(f"functx.nn.{name} is deprecated (as in PyTorch, which warns with a "
                  "UserWarning too); use functx.nn.interpolate instead.", stacklevel=3)


def upsample(input: Any, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Any:
    """Deprecated alias of :func:`interpolate` (as ``torch.nn.functional.upsample``).

    Example:
        >>> fnn.upsample(np.ones((1, 1, 2, 2)), scale_factor=2).shape  # (1, 1, 4, 4)
    """
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Any, size: Any = None, scale_factor: Any = None) -> Any:
    """Deprecated: ``interpolate(input, size, scale_factor, mode="nearest")``.

    Example:
        >>> fnn.upsample_nearest(np.ones((1, 1, 2, 2)), size=3).shape  # (1, 1, 3, 3)
    """
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Any, size: Any = None, scale_factor: Any = None) -> Any:
    """Deprecated: ``interpolate(input, size, scale_factor, mode="bilinear",
    align_corners=True)`` (PyTorch's old default).

    Example:
        >>> fnn.upsample_bilinear(np.ones((1, 1, 2, 2)), size=3).shape  # (1, 1, 3, 3)
    """
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# -- grid_sample: coordinates and taps ---------------------------------------------------------

def _unnormalize(c: Any, size: int, align_corners: bool) -> Any:
    """Normalised coordinate in [-1, 1] to a pixel coordinate along an axis of ``size``."""
    if align_corners:
        return (c + 1) / 2 * (size - 1)
    return ((c + 1) * size - 1) / 2


def _clip_coords(c: Any, size: int) -> Any:
    """``c`` clamped into [0, size - 1]; the gradient is zero on and beyond the borders
    (PyTorch's ``clip_coordinates_set_grad``: "borders are considered out of bounds")."""
    hi = float(size - 1)
    return fnp.where(c <= 0, 0.0, fnp.where(c >= hi, hi, c))


def _reflect_coords(c: Any, twice_low: int, twice_high: int) -> Any:
    """``c`` reflected into [twice_low / 2, twice_high / 2] (PyTorch's
    ``reflect_coordinates``; its gradient is +-1, as ``reflect_coordinates_set_grad``)."""
    if twice_low == twice_high:
        return fnp.zeros_like(c)
    lo, span = twice_low / 2, (twice_high - twice_low) / 2
    c = c - lo
    a = fnp.where(c < 0, -c, c)
    flips = fnp.floor(a / span)
    extra = fnp.fmod(a, span)
    odd = fnp.equal(fnp.remainder(flips, 2.0), 1.0)
    return fnp.where(odd, span - extra + lo, extra + lo)


def _padded_coords(c: Any, size: int, padding_mode: str, align_corners: bool) -> Any:
    """PyTorch's ``compute_coordinates``: a pixel coordinate under the padding mode."""
    if padding_mode == "border":
        return _clip_coords(c, size)
    if padding_mode == "reflection":
        c = _reflect_coords(c, 0, 2 * (size - 1)) if align_corners \
            else _reflect_coords(c, -1, 2 * size - 1)
        return _clip_coords(c, size)
    return c


def grid_axis_taps(c: Any, size: int, mode: str, padding_mode: str,
               align_corners: bool) -> list[tuple[Any, Any, Any]]:
    """The taps sampling pixel coordinate ``c`` along an axis of ``size``: one
    ``(index, weight or None, in-range mask or None)`` per tap; the indices are clamped
    into range (the mask zeroes taps that fell outside under "zeros" padding)."""
    def tap(p: Any, w: Any) -> tuple[Any, Any, Any]:
        i = fnp.astype(p, np.int64)
        valid = None
        if padding_mode == "zeros":
            valid = fnp.logical_and(fnp.greater_equal(i, 0), fnp.less(i, size))
        return fnp.clip(i, 0, size - 1), w, valid

    if mode == "bicubic":
        f = fnp.floor(c)
        coeffs = _cubic_coeffs(c - f)
        return [tap(_padded_coords(f + (j - 1), size, padding_mode, align_corners),
                    coeffs[j]) for j in range(4)]
    c = _padded_coords(c, size, padding_mode, align_corners)
    if mode == "nearest":
        return [tap(fnp.rint(c), None)]
    f = fnp.floor(c)
    t = c - f
    return [tap(f, 1 - t), tap(f + 1, t)]


def sample_taps(table: Any, base: Any, axis_taps: Sequence[list], sizes: Sequence[int],
            extra: Any = None) -> Any:
    """Sum over the product of the axes' taps of weight * ``table[row]``.

    ``table`` is ``[rows, C]`` (images stacked, pixels in C order, channels last); ``base``
    the (broadcastable, integer) first row of each point's image; ``axis_taps`` one list of
    taps per spatial axis (see :func:`grid_axis_taps`); ``extra`` an optional weight multiplied
    into every tap. Returns ``[*points, C]``.
    """
    strides = [int(np.prod(sizes[k + 1:], dtype=np.int64)) for k in range(len(sizes))]
    rows, weights = [], []
    for combo in itertools.product(*axis_taps):
        row, weight = base, extra
        for (i, w, valid), s in zip(combo, strides):
            row = fnp.add(row, fnp.multiply(i, s) if s != 1 else i)
            for factor in (w, None if valid is None else fnp.astype(valid, table.dtype)):
                if factor is not None:
                    weight = factor if weight is None else fnp.multiply(weight, factor)
        rows.append(row)
        weights.append(weight)
    if len(rows) == 1:
        vals = fnp.take(table, rows[0], axis=0, mode="clip")
        return vals if weights[0] is None else fnp.multiply(vals, weights[0][..., None])
    shape = np.broadcast_shapes(*(tuple(r.shape) for r in rows),
                                *(tuple(w.shape) for w in weights))
    idx = fnp.stack([fnp.broadcast_to(r, shape) for r in rows], axis=-1)
    wts = fnp.stack([fnp.broadcast_to(w, shape) for w in weights], axis=-1)
    vals = fnp.take(table, idx, axis=0, mode="clip")  # [*points, T, C]
    return fnp.sum(fnp.multiply(vals, wts[..., None]), axis=-2)


# -- grid_sample ------------------------------------------------------------------------------

def grid_sample(input: Any, grid: Any, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Any:
    """Sample ``input`` at the points of ``grid``, as ``torch.nn.functional.grid_sample``.

    ``grid[n, *point]`` holds normalised coordinates ``(x, y)`` (4-d input) or
    ``(x, y, z)`` (5-d input) in [-1, 1], x indexing the last (width) axis: -1 and 1 are the
    centres of the corner pixels with ``align_corners=True``, the outer edges of the corner
    pixels with False (the default). Points outside are handled by ``padding_mode``:
    "zeros" (taps outside read 0), "border" (coordinates clamped to the edge) or
    "reflection" (coordinates mirrored at the borders). Modes: "bilinear" (trilinear for
    5-d input), "nearest" (round half to even, as PyTorch) and "bicubic" (4-d only,
    ``A = -0.75``, padding applied to each tap as PyTorch does).

    Gradients flow to ``input`` and to ``grid`` (zero for "nearest"; with PyTorch's
    conventions at the clamping borders).

    Args:
        input: ``[N, C, H_in, W_in]`` or ``[N, C, D_in, H_in, W_in]``.
        grid: ``[N, H_out, W_out, 2]`` or ``[N, D_out, H_out, W_out, 3]``, same dtype.
        mode: "bilinear", "nearest" or "bicubic".
        padding_mode: "zeros", "border" or "reflection".
        align_corners: see above; None means False (with PyTorch's warning).

    Returns:
        ``[N, C, H_out, W_out]`` (or ``[N, C, D_out, H_out, W_out]``).

    Raises:
        ArgumentError: an unknown mode or padding_mode, bicubic with a 5-d input, a
            non-bool align_corners.
        ShapeError: ranks, batch sizes or the grid's last axis do not fit, or the input has
            an empty spatial axis.
        DTypeError: non-floating operands or differing dtypes.

    Example:
        >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
        >>> g = np.zeros((1, 1, 1, 2))  # the centre of the image
        >>> fnn.grid_sample(x, g, align_corners=False)  # [[[[7.5]]]]
    """
    fn = "grid_sample"
    check_option(fn, "mode", mode, ("bilinear", "nearest", "bicubic"))
    check_option(fn, "padding_mode", padding_mode, ("zeros", "border", "reflection"))
    if align_corners is None:
        warnings.warn("functx.nn.grid_sample: align_corners=None means False (PyTorch's "
                      "default since 1.3.0); pass align_corners explicitly to silence this "
                      "warning.", UserWarning, stacklevel=2)
        align_corners = False
    elif not isinstance(align_corners, (bool, np.bool_)):
        raise ArgumentError(f"functx.nn.grid_sample: align_corners must be a bool or None, "
                            f"not {align_corners!r}.")
    x, g = float_operands(fn, ("input", input), ("grid", grid))
    if x.ndim not in (4, 5) or g.ndim != x.ndim:
        raise ShapeError(f"functx.nn.grid_sample: expected a 4-d or 5-d input and a grid "
                         f"with the same number of dimensions, but got input of shape "
                         f"{tuple(x.shape)} and grid of shape {tuple(g.shape)}.")
    d = x.ndim - 2
    if g.shape[0] != x.shape[0]:
        raise ShapeError(f"functx.nn.grid_sample: grid and input must have the same batch "
                         f"size, but got input of shape {tuple(x.shape)} and grid of shape "
                         f"{tuple(g.shape)}.")
    if g.shape[-1] != d:
        raise ShapeError(f"functx.nn.grid_sample: grid must have size {d} in its last "
                         f"dimension (one coordinate per spatial axis of the {x.ndim}-d input), "
                         f"but it has shape {tuple(g.shape)}.")
    if any(n == 0 for n in x.shape[2:]):
        raise ShapeError(f"functx.nn.grid_sample: input must have non-empty spatial "
                         f"dimensions, but it has shape {tuple(x.shape)}.")
    if mode == "bicubic" and d != 2:
        raise ArgumentError(f"functx.nn.grid_sample: mode 'bicubic' supports only 4-d inputs, "
                            f"but the input has shape {tuple(x.shape)}.")
    n, c, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    pixels = int(np.prod(sizes))
    table = fnp.reshape(fnp.moveaxis(x, 1, -1), (n * pixels, c))
    base = on_device_of(x, (np.arange(n, dtype=np.int64) * pixels).reshape((n,) + (1,) * d))
    taps = [grid_axis_taps(_unnormalize(g[..., d - 1 - k], sizes[k], bool(align_corners)),
                       sizes[k], mode, padding_mode, bool(align_corners)) for k in range(d)]
    return fnp.moveaxis(sample_taps(table, base, taps, sizes), -1, 1)



# -- affine_grid ------------------------------------------------------------------------------

def _base_coords(n: int, align_corners: bool) -> np.ndarray:
    """PyTorch's ``linspace_from_neg_one``: the normalised pixel centres along one axis."""
    if n <= 1:
        return np.zeros(max(n, 0))
    c = np.linspace(-1.0, 1.0, n)
    return c if align_corners else c * (n - 1) / n


def affine_grid(theta: Any, size: Sequence[int], align_corners: bool | None = None) -> Any:
    """The sampling grid of a batch of affine transforms, for :func:`grid_sample`.

    Each output point's normalised coordinates ``(x, y[, z], 1)`` (``x`` along the last
    axis; ``-1`` and ``1`` are the corner pixels' centres with ``align_corners``, their
    outer edges without) are multiplied by ``theta``: ``grid[n, ..., :] = theta[n] @ (x, y,
    [z,] 1)``. Differentiable with respect to ``theta``.

    Args:
        theta: float, ``(N, 2, 3)`` for 2-d or ``(N, 3, 4)`` for 3-d transforms.
        size: the output's size ``(N, C, H, W)`` or ``(N, C, D, H, W)``.
        align_corners: as in :func:`grid_sample`; None means False, with PyTorch's warning.

    Returns:
        ``(N, H, W, 2)`` or ``(N, D, H, W, 3)``, theta's dtype.

    Raises:
        DTypeError: a non-float ``theta``.
        ShapeError: ``theta``'s shape does not fit ``size``.
        ArgumentError: ``size`` of another length, or a size <= 0.

    Example:
        >>> theta = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])   # the identity
        >>> fnn.affine_grid(theta, (1, 3, 4, 4), align_corners=False).shape   # (1, 4, 4, 2)
    """
    fn = "affine_grid"
    if align_corners is None:
        warnings.warn("functx.nn.affine_grid: align_corners=None means False (PyTorch's "
                      "default since 1.3.0); pass align_corners explicitly.", stacklevel=2)
        align_corners = False
    t = array(theta)
    if np.dtype(t.dtype).kind != "f":
        raise DTypeError(f"functx.nn.{fn}: theta must be a floating-point array, but it has "
                         f"dtype {t.dtype}.")
    size = tuple(int(v) for v in size)
    if len(size) not in (4, 5):
        raise ArgumentError(f"functx.nn.{fn}: size must be (N, C, H, W) for 2-d or (N, C, D, "
                            f"H, W) for 3-d transforms, but got {size}.")
    nd = len(size) - 2
    want = (size[0], nd, nd + 1)
    if tuple(t.shape) != want:
        raise ShapeError(f"functx.nn.{fn}: for size {size} theta must have shape {want} (a "
                         f"batch of {nd}-d affine matrices), but it has shape "
                         f"{tuple(t.shape)}.")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("functx.nn.affine_grid: a unit-size grid with align_corners=True is not "
                      "an intended use (as PyTorch warns); its coordinate is 0.", stacklevel=2)
    elif min(size) <= 0:
        raise ArgumentError(f"functx.nn.{fn}: expected a positive output size, but got "
                            f"{size}.")
    axes = [_base_coords(n, bool(align_corners)) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # (D,) H, W arrays of z, y, x
    base = np.stack(list(mesh[::-1]) + [np.ones(spatial)], axis=-1).reshape(-1, nd + 1)
    base = on_device_of(t, base.astype(t.dtype))
    grid = fnp.matmul(base, fnp.swapaxes(t, -1, -2))   # (N, points, nd)
    return fnp.reshape(grid, (size[0],) + tuple(spatial) + (nd,))
