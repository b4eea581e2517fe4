"""Reductions that ignore NaNs: nansum, nanprod, nanmean, nanvar, nanstd, nanmax, nanmin,
nanargmax, nanargmin, nancumsum, nancumprod.

Each is the plain reduction of ``where(isnan(a), identity, a)`` (with a count of the
non-NaN entries for the means), so the gradient is that of the plain reduction on the
non-NaN entries and exactly 0 at the NaNs. Integer and boolean inputs have no NaNs: these
functions are then the plain reductions.

Differences from NumPy (as ``jax.numpy``):
    * No warnings: ``nanmean``/``nanvar``/``nanstd`` of an all-NaN slice give NaN, and
      ``nanmax``/``nanmin`` of one give NaN, silently.
    * ``nanargmax``/``nanargmin`` of an all-NaN slice give -1 (NumPy raises ValueError; the
      check would need concrete values, and these work under ``jit``).
    * ``out=`` raises and ``where=`` is not supported (as for the plain reductions).
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from functx.errors import ArgumentError, DTypeError, ShapeError
from functx.numpy import _reductions as _r
from functx.numpy import _shape as _fshape
from functx.numpy import _ufuncs as _uf
from functx.numpy import _ufuncs_math as _um
from functx.numpy._promotion import astype, check_no_out, is_inexact

__all__ = [
    "nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin", "nanargmax",
    "nanargmin", "nancumsum", "nancumprod",
]

_NO_VALUE: Any = np._NoValue


def _operand(name: str, a: Any, out: Any) -> Any:
    check_no_out(name, out)
    return _fshape.as_array(a)


def _has_nan(a: Any) -> builtins.bool:
    return is_inexact(a.dtype)


def _replace_nan(a: Any, value: Any) -> Any:
    """``a`` with its NaNs replaced by ``value`` (a no-op for integers and booleans)."""
    if not _has_nan(a):
        return a
    return _uf.where(_uf.isnan(a), np.asarray(value, a.dtype), a)


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
           keepdims: builtins.bool = False, initial: Any = _NO_VALUE,
           where: Any = _NO_VALUE) -> Any:
    """Sum over ``axis`` treating NaNs as 0 (all NaN: 0).

    Example:
        >>> fnp.nansum(np.array([1.0, np.nan, 2.0]))
        array(3.)
    """
    a = _operand("nansum", a, out)
    return _r.sum(_replace_nan(a, 0), axis, dtype, None, keepdims, initial, where)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: builtins.bool = False, initial: Any = _NO_VALUE,
            where: Any = _NO_VALUE) -> Any:
    """Product over ``axis`` treating NaNs as 1 (all NaN: 1).

    Example:
        >>> fnp.nanprod(np.array([3.0, np.nan, 2.0]))
        array(6.)
    """
    a = _operand("nanprod", a, out)
    return _r.prod(_replace_nan(a, 1), axis, dtype, None, keepdims, initial, where)


def _mean_dtypes(a: Any, dtype: Any) -> tuple[np.dtype, np.dtype]:
    """(computation dtype, result dtype) of a mean of ``a`` (float16 computes in float32)."""
    if dtype is not None:
        return np.dtype(dtype), np.dtype(dtype)
    if a.dtype == np.float16 or a.dtype.name == "bfloat16":
        return np.dtype(np.float32), a.dtype
    return a.dtype, a.dtype


def _count(a: Any, axis: Any, keepdims: builtins.bool, dt: np.dtype) -> Any:
    """The number of non-NaN entries over ``axis``, as ``dt``."""
    return astype(_r.sum(_uf.logical_not(_uf.isnan(a)), axis, keepdims=keepdims), dt)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
            keepdims: builtins.bool = False, *, where: Any = _NO_VALUE) -> Any:
    """Mean over ``axis`` of the non-NaN entries (all NaN: NaN).

    Example:
        >>> fnp.nanmean(np.array([1.0, np.nan, 2.0]))
        array(1.5)
    """
    a = _operand("nanmean", a, out)
    if not _has_nan(a):
        return _r.mean(a, axis, dtype, None, keepdims, where=where)
    compute, result = _mean_dtypes(a, dtype)
    x = astype(a, compute)
    total = nansum(x, axis, keepdims=keepdims, where=where)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = _uf.true_divide(total, _count(x, axis, keepdims, compute))
    return astype(r, result)


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
           keepdims: builtins.bool = False, *, where: Any = _NO_VALUE,
           correction: Any = _NO_VALUE) -> Any:
    """Variance over ``axis`` of the non-NaN entries: ``sum((a - nanmean)**2) / (N - ddof)``
    with N the number of non-NaN entries (NaN where ``N <= ddof``).

    Example:
        >>> fnp.nanvar(np.array([1.0, np.nan, 3.0]))
        array(1.)
    """
    a = _operand("nanvar", a, out)
    if correction is not _NO_VALUE:
        if ddof != 0:
            raise _ddof_error("nanvar")
        ddof = correction
    if not _has_nan(a):
        return _r.var(a, axis, dtype, None, ddof, keepdims, where=where)
    if a.dtype.kind == "c":
        raise DTypeError("functx.numpy.nanvar does not support complex inputs; take the "
                        "variance of the real and imaginary parts separately.")
    compute, result = _mean_dtypes(a, dtype)
    x = astype(a, compute)
    mu = nanmean(x, axis, keepdims=True, where=where)
    dev = _uf.where(_uf.isnan(x), np.zeros((), compute), _uf.subtract(x, mu))
    ss = _r.sum(_uf.multiply(dev, dev), axis, keepdims=keepdims)
    n = _uf.subtract(_count(x, axis, keepdims, compute), np.asarray(ddof, compute))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = _uf.where(_uf.greater(n, 0), _uf.true_divide(ss, _uf.maximum(n, 1)),
                      np.asarray(np.nan, compute))
    return astype(r, result)


def _ddof_error(name: str) -> Exception:
    return ArgumentError(f"functx.numpy.{name}: ddof and correction can't both be given; "
                         f"pass only one of them.")


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0,
           keepdims: builtins.bool = False, *, where: Any = _NO_VALUE,
           correction: Any = _NO_VALUE) -> Any:
    """Standard deviation over ``axis`` of the non-NaN entries (``sqrt(nanvar(...))``).

    Example:
        >>> fnp.nanstd(np.array([1.0, np.nan, 3.0]))
        array(1.)
    """
    check_no_out("nanstd", out)
    return _um.sqrt(nanvar(a, axis, dtype, None, ddof, keepdims, where=where,
                           correction=correction))


def _nan_extremum(name: str, reduce: Any, fill: float, a: Any, axis: Any, out: Any,
                  keepdims: builtins.bool, initial: Any, where: Any) -> Any:
    a = _operand(name, a, out)
    if not _has_nan(a):
        return reduce(a, axis, None, keepdims, initial, where)
    nan = _uf.isnan(a)
    r = reduce(_replace_nan(a, fill), axis, None, keepdims, initial, where)
    all_nan = _r.all(nan, axis, keepdims=keepdims)
    if initial is not _NO_VALUE:
        return r
    return _uf.where(all_nan, np.asarray(np.nan, a.dtype), r)


def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: builtins.bool = False,
           initial: Any = _NO_VALUE, where: Any = _NO_VALUE) -> Any:
    """Maximum over ``axis`` ignoring NaNs (all NaN: NaN; the gradient is 0 at NaNs).

    Example:
        >>> fnp.nanmax(np.array([1.0, np.nan, 2.0]))
        array(2.)
    """
    return _nan_extremum("nanmax", _r.max, -np.inf, a, axis, out, keepdims, initial, where)


def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: builtins.bool = False,
           initial: Any = _NO_VALUE, where: Any = _NO_VALUE) -> Any:
    """Minimum over ``axis`` ignoring NaNs (all NaN: NaN; the gradient is 0 at NaNs).

    Example:
        >>> fnp.nanmin(np.array([1.0, np.nan, 2.0]))
        array(1.)
    """
    return _nan_extremum("nanmin", _r.min, np.inf, a, axis, out, keepdims, initial, where)


def _nan_arg(name: str, extremum: Any, a: Any, axis: Any, out: Any,
             keepdims: builtins.bool) -> Any:
    a = _operand(name, a, out)
    plain = _r.argmax if name == "nanargmax" else _r.argmin
    if not _has_nan(a):
        return plain(a, axis, keepdims=keepdims)
    nd = len(a.shape)
    if axis is None:
        a = _fshape.ravel(a)
        ax = 0
    else:
        ax = _fshape.norm_axis(axis, len(a.shape), name)
    if a.shape[ax] == 0:
        raise ShapeError(f"functx.numpy.{name}: attempt to get {name} of an empty sequence "
                         f"(axis {ax} of shape {tuple(a.shape)} has length 0).")
    nan = _uf.isnan(a)
    best = extremum(a, ax, keepdims=True)
    hit = _uf.logical_and(_uf.equal(a, best), _uf.logical_not(nan))  # the first one wins
    idx = _r.argmax(hit, ax, keepdims=keepdims)
    all_nan = _r.all(nan, ax, keepdims=keepdims)
    r = _uf.where(all_nan, np.asarray(-1, idx.dtype), idx)
    if axis is None and keepdims:
        return _fshape.reshape(r, (1,) * nd)
    return r


def nanargmax(a: Any, axis: Any = None, out: Any = None, *,
              keepdims: builtins.bool = False) -> Any:
    """Index of the (first) maximum along ``axis`` ignoring NaNs (all NaN: -1).

    Example:
        >>> fnp.nanargmax(np.array([np.nan, 1.0, 3.0]))
        array(2)
    """
    return _nan_arg("nanargmax", nanmax, a, axis, out, keepdims)


def nanargmin(a: Any, axis: Any = None, out: Any = None, *,
              keepdims: builtins.bool = False) -> Any:
    """Index of the (first) minimum along ``axis`` ignoring NaNs (all NaN: -1).

    Example:
        >>> fnp.nanargmin(np.array([np.nan, 1.0, 3.0]))
        array(1)
    """
    return _nan_arg("nanargmin", nanmin, a, axis, out, keepdims)


def nancumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative sum along ``axis`` (None: flattened) treating NaNs as 0.

    Example:
        >>> fnp.nancumsum(np.array([1.0, np.nan, 2.0]))
        array([1., 1., 3.])
    """
    a = _operand("nancumsum", a, out)
    return _r.cumsum(_replace_nan(a, 0), axis, dtype)


def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative product along ``axis`` (None: flattened) treating NaNs as 1.

    Example:
        >>> fnp.nancumprod(np.array([2.0, np.nan, 3.0]))
        array([2., 2., 6.])
    """
    a = _operand("nancumprod", a, out)
    return _r.cumprod(_replace_nan(a, 1), axis, dtype)
