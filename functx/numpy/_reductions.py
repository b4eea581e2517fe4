"""Reductions: sum, mean, var, std, prod, max/min, argmax/argmin, cumsum, any/all,
logsumexp, isclose/allclose and friends.

``axis`` is None (every axis), an int or a tuple of ints, negative counting from the end;
``keepdims=True`` keeps the reduced axes with size 1. Accumulator dtypes follow NumPy:
``sum``/``prod``/``cumsum`` of booleans and of signed (unsigned) integers narrower than 64
bits accumulate in int64 (uint64), ``mean``/``var``/``std`` of integers give float64 and of
float16 compute in float32 and return float16; ``dtype=`` overrides (the input is converted
first).

Differences from NumPy:
    * ``out=`` raises TypeError (functx values are immutable); ``where=`` is not supported
      (mask with ``fnp.where(mask, a, 0)`` first).
    * ``max``/``min`` over an empty axis raise ValueError as in NumPy unless ``initial``
      is given; ``mean``/``var`` of an empty axis give NaN (NumPy also warns).
    * ``logsumexp`` (from scipy.special, with its signature ``a, axis, b, keepdims,
      return_sign``) lives here; its gradient is exactly ``softmax``.
    * ``allclose``/``array_equal`` return Python bools, so they need concrete values: inside
      ``make_trace``/``jit`` they raise ConcretizationError (use ``isclose(...).all()``).
    * ``var``/``std`` take ``ddof`` (or NumPy 2's ``correction``); the ``mean=`` argument
      is not supported. Complex inputs are not supported by ``var``/``std``.
"""
from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from functx.numpy import _shape as _fshape
from functx.numpy import _ufuncs as _uf
from functx.numpy._promotion import asarray, astype, check_no_out, is_tracer, result_type
from functx.numpy._ufunc_base import promote_inexact, quiet_unused_branch, to_inexact
from functx.primitives import elementwise as _ew
from functx.primitives import misc as _misc
from functx.primitives import reduction as _red
from functx.primitives import shape as _p

__all__ = [
    "sum", "mean", "var", "std", "prod", "max", "amax", "min", "amin", "argmax", "argmin",
    "cumsum", "cumprod", "any", "all", "logsumexp", "count_nonzero", "average", "isclose",
    "allclose", "array_equal", "ptp",
]

_NO_VALUE: Any = np._NoValue


# ----------------------------------------------------------------------------------------
# helpers


def _operand(a: Any) -> Any:
    return a if is_tracer(a) or isinstance(a, np.ndarray) else asarray(a)


def _axes(a: Any, axis: Any, name: str) -> tuple[int, ...]:
    """``axis`` (None, int or tuple, negative allowed) as sorted non-negative axes of ``a``."""
    if axis is None:
        return tuple(range(len(a.shape)))
    return tuple(sorted(_fshape.norm_axes(axis, len(a.shape), name)))


def _finish(r: Any, a: Any, axes: tuple[int, ...], keepdims: builtins.bool) -> Any:
    """The reduced ``r`` reshaped to the keepdims shape when asked."""
    if keepdims:
        return _p.reshape(r, _red.kept_shape(a.shape, axes))
    return r


def _count(a: Any, axes: tuple[int, ...]) -> builtins.int:
    return math.prod(a.shape[i] for i in axes)


def _accumulator_dtype(dt: np.dtype) -> np.dtype:
    """NumPy's default dtype for sums and products of ``dt`` (small ints widen to 64 bits)."""
    if dt.kind == "b" or (dt.kind == "i" and dt.itemsize < 8):
        return np.dtype(np.int64)
    if dt.kind == "u" and dt.itemsize < 8:
        return np.dtype(np.uint64)
    return dt


def _with_dtype(a: Any, dtype: Any) -> Any:
    """``a`` converted to ``dtype``, or to NumPy's accumulator dtype when ``dtype`` is None."""
    dt = _accumulator_dtype(a.dtype) if dtype is None else np.dtype(dtype)
    return astype(a, dt) if a.dtype != dt else a


def _mean_dtypes(a: Any, dtype: Any) -> tuple[np.dtype, np.dtype]:
    """(computation dtype, result dtype) of a mean-like reduction of ``a``."""
    if dtype is not None:
        return np.dtype(dtype), np.dtype(dtype)
    if a.dtype.kind in "biu":
        return np.dtype(np.float64), np.dtype(np.float64)
    if a.dtype == np.float16 or a.dtype.name == "bfloat16":  # accumulated in float32
        return np.dtype(np.float32), a.dtype
    return a.dtype, a.dtype


def _no_where(name: str, where: Any) -> None:
    if where is not _NO_VALUE and where is not True:
        raise TypeError(f"functx.numpy.{name} does not support where=; mask the input with "
                        f"fnp.where(mask, a, identity) first.")


def _scalar_like(value: Any, dt: np.dtype) -> np.ndarray:
    return np.full((), value, dt)


# ----------------------------------------------------------------------------------------
# sums, products, means, variances


def sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
        keepdims: builtins.bool = False, initial: Any = _NO_VALUE, where: Any = _NO_VALUE) -> Any:
    """Sum of the elements over ``axis`` (NumPy's accumulator dtype; see the module doc).

    Example:
        >>> fnp.sum(np.ones((2, 3)), axis=-1, keepdims=True).shape
        (2, 1)
    """
    return _accumulate("sum", _red.reduce_sum, _ew.add, a, axis, dtype, out, keepdims,
                       initial, where)


def prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
         keepdims: builtins.bool = False, initial: Any = _NO_VALUE, where: Any = _NO_VALUE) -> Any:
    """Product of the elements over ``axis`` (NumPy's accumulator dtype; zeros are fine for
    the gradient, which the primitive computes without division)."""
    return _accumulate("prod", _red.reduce_prod, _ew.mul, a, axis, dtype, out, keepdims,
                       initial, where)


def _accumulate(name: str, reduce: Any, combine: Any, a: Any, axis: Any, dtype: Any,
                out: Any, keepdims: builtins.bool, initial: Any, where: Any) -> Any:
    """``sum``/``prod``: reduce over ``axis`` in the accumulator dtype, then fold in
    ``initial`` with ``combine``."""
    check_no_out(name, out)
    _no_where(name, where)
    a = _operand(a)
    axes = _axes(a, axis, name)
    r = reduce(_with_dtype(a, dtype), axes)
    if initial is not _NO_VALUE:
        r = combine(r, _scalar_like(initial, r.dtype))
    return _finish(r, a, axes, keepdims)


def mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
         keepdims: builtins.bool = False, *, where: Any = _NO_VALUE) -> Any:
    """Arithmetic mean over ``axis`` (integers give float64; an empty axis gives NaN)."""
    check_no_out("mean", out)
    _no_where("mean", where)
    a = _operand(a)
    axes = _axes(a, axis, "mean")
    compute, result = _mean_dtypes(a, dtype)
    x = astype(a, compute) if a.dtype != compute else a
    total = _red.reduce_sum(x, axes)
    r = _ew.div(total, _scalar_like(_count(a, axes), compute))
    r = astype(r, result) if result != compute else r
    return _finish(r, a, axes, keepdims)


def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
        keepdims: builtins.bool = False, *, where: Any = _NO_VALUE,
        correction: Any = _NO_VALUE) -> Any:
    """Variance over ``axis``: ``sum((a - mean)**2) / (N - ddof)``.

    Two passes (the mean first, then the squared deviations from it), which is numerically
    stable for data far from zero. ``correction`` is NumPy 2's name for ``ddof``.
    """
    check_no_out("var", out)
    _no_where("var", where)
    return _variance("var", a, axis, dtype, ddof, keepdims, correction)


def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
        keepdims: builtins.bool = False, *, where: Any = _NO_VALUE,
        correction: Any = _NO_VALUE) -> Any:
    """Standard deviation over ``axis``: ``sqrt(var(a, axis, ddof=ddof))`` (see :func:`var`).

    The gradient is infinite/NaN where the variance is 0 (``sqrt`` is not differentiable
    there).
    """
    check_no_out("std", out)
    _no_where("std", where)
    return _ew.sqrt(_variance("std", a, axis, dtype, ddof, keepdims, correction))


def _variance(name: str, a: Any, axis: Any, dtype: Any, ddof: Any, keepdims: builtins.bool,
              correction: Any) -> Any:
    if correction is not _NO_VALUE:
        if ddof != 0:
            raise ValueError(f"functx.numpy.{name}: ddof and correction can't be provided "
                             "simultaneously.")
        ddof = correction
    a = _operand(a)
    if a.dtype.kind == "c":
        raise TypeError(f"functx.numpy.{name} does not support complex inputs.")
    axes = _axes(a, axis, name)
    compute, result = _mean_dtypes(a, dtype)
    x = astype(a, compute) if a.dtype != compute else a
    n = _count(a, axes)
    centre = _p.reshape(_ew.div(_red.reduce_sum(x, axes), _scalar_like(n, compute)),
                        _red.kept_shape(a.shape, axes))
    dev = _ew.sub(x, centre)
    sq = _ew.mul(dev, dev)
    total = _red.reduce_sum(sq, axes)
    r = _ew.div(total, _scalar_like(builtins.max(n - ddof, 0), compute))
    r = astype(r, result) if result != compute else r
    return _finish(r, a, axes, keepdims)


def average(a: Any, axis: Any = None, weights: Any = None, returned: builtins.bool = False, *,
            keepdims: builtins.bool = False) -> Any:
    """Weighted average over ``axis``: ``sum(a * w) / sum(w)``.

    ``weights`` has ``a``'s shape, or is 1-D along a single ``axis``. With ``returned``,
    also returns the sum of the weights (broadcast like the average).
    """
    a = _operand(a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        scale = np.full(tuple(avg.shape), _count(a, _axes(a, axis, "average")), avg.dtype)
        scale.flags.writeable = False
        return (avg, scale) if returned else avg
    w = _operand(weights)
    dt = result_type(a, w)
    dt = np.dtype(np.float64) if dt.kind in "biu" else dt
    if tuple(w.shape) != tuple(a.shape):
        if axis is None or not isinstance(axis, (int, np.integer)) or len(w.shape) != 1:
            raise TypeError("functx.numpy.average: weights differ in shape from a; then axis "
                            "must be one int and weights 1-D along it.")
        ax = _fshape.norm_axis(axis, len(a.shape), "average")
        if w.shape[0] != a.shape[ax]:
            raise ValueError("functx.numpy.average: length of weights differs from the size "
                             "of a along axis.")
        w = _p.broadcast_in_dim(w, tuple(a.shape), (ax,))
    a, w = astype(a, dt), astype(w, dt)
    wsum = sum(w, axis, keepdims=keepdims)
    avg = _ew.div(sum(_ew.mul(a, w), axis, keepdims=keepdims), wsum)
    return (avg, wsum) if returned else avg


# ----------------------------------------------------------------------------------------
# extrema


def _extremum(name: str, prim: Any, a: Any, axis: Any, keepdims: builtins.bool,
              initial: Any, combine: Any) -> Any:
    a = _operand(a)
    axes = _axes(a, axis, name)
    if initial is _NO_VALUE and builtins.any(a.shape[i] == 0 for i in axes):
        raise ValueError(f"functx.numpy.{name}: zero-size array to reduction operation "
                         f"{name} which has no identity (as in NumPy); pass initial=.")
    r = prim(a, axes)
    if initial is not _NO_VALUE:
        r = combine(r, initial)
    return _finish(r, a, axes, keepdims)


def max(a: Any, axis: Any = None, out: Any = None, keepdims: builtins.bool = False,
        initial: Any = _NO_VALUE, where: Any = _NO_VALUE) -> Any:
    """Maximum over ``axis`` (NaN propagates; the gradient is split evenly among ties).

    Raises:
        ValueError: reducing an empty axis without ``initial``, as in NumPy.
    """
    check_no_out("max", out)
    _no_where("max", where)
    return _extremum("max", _red.reduce_max, a, axis, keepdims, initial,
                     _uf.maximum)


def min(a: Any, axis: Any = None, out: Any = None, keepdims: builtins.bool = False,
        initial: Any = _NO_VALUE, where: Any = _NO_VALUE) -> Any:
    """Minimum over ``axis`` (NaN propagates; the gradient is split evenly among ties).

    Raises:
        ValueError: reducing an empty axis without ``initial``, as in NumPy.
    """
    check_no_out("min", out)
    _no_where("min", where)
    return _extremum("min", _red.reduce_min, a, axis, keepdims, initial,
                     _uf.minimum)


amax, amin = max, min


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: builtins.bool = False) -> Any:
    """Range of values (``max - min``) over ``axis``."""
    check_no_out("ptp", out)
    return _uf.subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def _arg_extremum(name: str, prim: Any, a: Any, axis: Any, keepdims: builtins.bool) -> Any:
    a = _operand(a)
    if axis is None:
        flat = _p.reshape(a, (builtins.int(np.prod(a.shape, dtype=np.int64)),))
        if flat.shape[0] == 0:
            raise ValueError(f"functx.numpy.{name}: attempt to get {name} of an empty sequence.")
        r = prim(flat, axis=0)
        return _p.reshape(r, (1,) * len(a.shape)) if keepdims else r
    ax = _fshape.norm_axis(axis, len(a.shape), name)
    if a.shape[ax] == 0:
        raise ValueError(f"functx.numpy.{name}: attempt to get {name} of an empty sequence.")
    return _finish(prim(a, axis=ax), a, (ax,), keepdims)


def argmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: builtins.bool = False) -> Any:
    """Index of the (first) maximum along ``axis`` (None: of the flattened array); int64."""
    check_no_out("argmax", out)
    return _arg_extremum("argmax", _red.argmax, a, axis, keepdims)


def argmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: builtins.bool = False) -> Any:
    """Index of the (first) minimum along ``axis`` (None: of the flattened array); int64."""
    check_no_out("argmin", out)
    return _arg_extremum("argmin", _red.argmin, a, axis, keepdims)


# ----------------------------------------------------------------------------------------
# cumulative


def _flat_or_axis(a: Any, axis: Any, name: str) -> tuple[Any, builtins.int]:
    if axis is None:
        return _p.reshape(a, (builtins.int(np.prod(a.shape, dtype=np.int64)),)), 0
    return a, _fshape.norm_axis(axis, len(a.shape), name)


def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative sum along ``axis`` (None: of the flattened array); NumPy's accumulator dtype."""
    check_no_out("cumsum", out)
    x, ax = _flat_or_axis(_with_dtype(_operand(a), dtype), axis, "cumsum")
    return _red.cumsum(x, axis=ax)


def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative product along ``axis`` (None: of the flattened array).

    A log-depth scan of shifted products (``pad`` + ``mul``), so zeros are fine and the
    gradient needs no division.
    """
    check_no_out("cumprod", out)
    x, ax = _flat_or_axis(_with_dtype(_operand(a), dtype), axis, "cumprod")
    n = x.shape[ax]
    one = np.ones((), x.dtype)
    k = 1
    while k < n:
        config = tuple((k, -k, 0) if i == ax else (0, 0, 0) for i in range(len(x.shape)))
        x = _ew.mul(x, _p.pad(x, one, config))
        k *= 2
    return _fshape.unchanged(x)


# ----------------------------------------------------------------------------------------
# logic


def any(a: Any, axis: Any = None, out: Any = None, keepdims: builtins.bool = False, *,
        where: Any = _NO_VALUE) -> Any:
    """Whether any element along ``axis`` is true (nonzero)."""
    check_no_out("any", out)
    _no_where("any", where)
    a = _uf.truthy(_operand(a))
    axes = _axes(a, axis, "any")
    return _finish(_red.reduce_max(a, axes), a, axes, keepdims)


def all(a: Any, axis: Any = None, out: Any = None, keepdims: builtins.bool = False, *,
        where: Any = _NO_VALUE) -> Any:
    """Whether all elements along ``axis`` are true (nonzero)."""
    check_no_out("all", out)
    _no_where("all", where)
    a = _uf.truthy(_operand(a))
    axes = _axes(a, axis, "all")
    return _finish(_red.reduce_min(a, axes), a, axes, keepdims)


def count_nonzero(a: Any, axis: Any = None, *, keepdims: builtins.bool = False) -> Any:
    """Number of nonzero elements along ``axis`` (int64)."""
    return sum(astype(_uf.truthy(_operand(a)), np.int64), axis, keepdims=keepdims)


# ----------------------------------------------------------------------------------------
# logsumexp


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: builtins.bool = False,
              return_sign: builtins.bool = False) -> Any:
    """``log(sum(b * exp(a), axis))`` computed stably (scipy.special.logsumexp's signature).

    The maximum ``m`` is subtracted before exponentiating, under ``stop_gradient`` (it
    cancels exactly, so the gradient with respect to ``a`` is exactly
    ``b * exp(a - result)``: the softmax). A non-finite maximum (all entries ``-inf``, or an
    ``inf``) is replaced by 0, so all ``-inf`` gives ``-inf`` and ``inf`` gives ``inf``, without
    NaN. Huge inputs do not overflow. With ``return_sign``, returns ``(log|s|, sign(s))`` for
    ``s = sum(b * exp(a))`` (``b`` may be negative); without it a negative sum gives NaN.

    Example:
        >>> fnp.logsumexp(np.array([1000.0, 1000.0]))   # 1000 + log(2)
    """
    a = to_inexact(_operand(a))
    if b is not None:
        a, b, _ = promote_inexact("logsumexp", a, _operand(b))
        if tuple(b.shape) != tuple(a.shape):
            shape = _fshape.broadcast_shapes(tuple(a.shape), tuple(b.shape))
            a, b = _fshape.broadcast_to(a, shape), _fshape.broadcast_to(b, shape)
    axes = _axes(a, axis, "logsumexp")
    kept = _red.kept_shape(a.shape, axes)
    m = _red.reduce_max(a, axes)
    zero = np.zeros((), a.dtype)
    m = _misc.stop_gradient(_ew.select(_ew.is_finite(m), m, zero))
    m_kept = _p.reshape(m, kept)
    e = _ew.exp(_ew.sub(a, m_kept))
    if b is not None:
        e = _ew.mul(e, b)
    s = _red.reduce_sum(e, axes)
    if return_sign:
        sign = _ew.sign(s)
        s = _ew.abs(s)
    with quiet_unused_branch():  # log(0) = -inf is the answer, not an accident
        r = _ew.add(_ew.log(s), m)
    r = _finish(r, a, axes, keepdims)
    if return_sign:
        return r, _finish(sign, a, axes, keepdims)
    return r


# ----------------------------------------------------------------------------------------
# comparisons of whole arrays


def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08,
            equal_nan: builtins.bool = False) -> Any:
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (infinities equal only to themselves).

    Integers are compared as floats, as in NumPy.
    """
    a, b = _operand(a), _operand(b)
    dt = result_type(a, b, 1.0)
    a, b = astype(a, dt), astype(b, dt)
    with quiet_unused_branch():  # inf - inf: decided by the equality test below
        close = _uf.less_equal(_uf.abs(_uf.subtract(a, b)),
                               _uf.add(atol, _uf.multiply(rtol, _uf.abs(b))))
    out = _uf.logical_or(_uf.logical_and(close, _uf.isfinite(b)), _uf.equal(a, b))
    if equal_nan:
        out = _uf.logical_or(out, _uf.logical_and(_uf.isnan(a), _uf.isnan(b)))
    return out


def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08,
             equal_nan: builtins.bool = False) -> builtins.bool:
    """Whether ``isclose(a, b)`` holds everywhere, as a Python bool.

    Raises:
        ConcretizationError: inside an abstract trace (the value is unknown); use
            ``fnp.all(fnp.isclose(a, b))`` there.
    """
    return builtins.bool(all(isclose(a, b, rtol, atol, equal_nan)))


def array_equal(a1: Any, a2: Any, equal_nan: builtins.bool = False) -> builtins.bool:
    """Whether the arrays have the same shape and elements, as a Python bool.

    Raises:
        ConcretizationError: inside an abstract trace, where the values are unknown.
    """
    a1, a2 = _operand(a1), _operand(a2)
    if tuple(a1.shape) != tuple(a2.shape):
        return False
    eq = _uf.equal(a1, a2)
    if equal_nan:
        eq = _uf.logical_or(eq, _uf.logical_and(_uf.isnan(a1), _uf.isnan(a2)))
    return builtins.bool(all(eq))
