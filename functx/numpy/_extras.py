"""Differences, integrals, interpolation and statistics: diff, ediff1d, gradient, trapezoid,
unwrap, interp, cov, corrcoef, select, piecewise.

All are composites of primitives (slices, ``where``, sums, a branchless binary search for
``interp``), so they work under every transform and are differentiable where the NumPy
function is (``interp`` in ``x`` and ``fp`` and ``xp``, ``cov`` in the data and weights...).

Differences from NumPy:
    * ``piecewise`` evaluates every function on the whole of ``x`` and selects the results
      (NumPy calls each only on its piece), so the functions must accept any value of
      ``x``; a function that gives NaN or inf outside its piece makes the gradient NaN there
      unless it guards its own input (the "double where" trick).
    * ``interp(period=...)`` sorts ``xp`` on the host, so it needs concrete ``xp``.
    * ``unwrap`` of integers computes in float64 (NumPy has a separate integer path).
    * ``interp``, ``cov`` and ``corrcoef`` keep float32 (and float16) inputs in their
      precision, as ``jax.numpy``; NumPy computes and returns float64.
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as np

from functx.errors import ArgumentError, ShapeError
from functx.numpy import _linalg as _la
from functx.numpy import _reductions as _r
from functx.numpy import _shape as _fshape
from functx.numpy._devices import filled, joined
from functx.numpy import _ufuncs as _uf
from functx.numpy import _ufuncs_math as _um
from functx.numpy._promotion import asarray, astype, is_inexact, result_type
from functx.primitives import complex as _cx
from functx.primitives import special as _special
from functx.primitives import indexing as _ix

__all__ = [
    "diff", "ediff1d", "gradient", "trapezoid", "unwrap", "interp", "cov", "corrcoef",
    "select", "piecewise", "i0",
]


def _float(x: Any) -> Any:
    return x if is_inexact(x.dtype) else astype(x, np.float64)


def _sl(x: Any, axis: int, start: int | None, stop: int | None) -> Any:
    """``x[..., start:stop, ...]`` on ``axis`` (Python slice semantics)."""
    s, e, _ = builtins.slice(start, stop).indices(x.shape[axis])
    return _fshape.slice_axis(x, s, builtins.max(s, e), axis)


# ----------------------------------------------------------------------------------------
# differences and integrals


def _edge(name: str, value: Any, a: Any, axis: int) -> Any:
    v = joined(a, value)
    if len(v.shape) == 0:
        shape = list(a.shape)
        shape[axis] = 1
        v = _fshape.broadcast_to(v, tuple(shape))
    return v


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The ``n``-th discrete difference along ``axis`` (``a[1:] - a[:-1]``, ``n`` times;
    booleans give ``a[1:] != a[:-1]``), after joining ``prepend``/``append`` to ``a``.

    Raises:
        ArgumentError: ``n`` is negative.
        ShapeError: ``a`` is 0-d.

    Example:
        >>> fnp.diff(np.array([1, 4, 9, 16]))
        array([3, 5, 7])
    """
    a = _fshape.as_array(a)
    n = int(n)
    if n < 0:
        raise ArgumentError(f"functx.numpy.diff: the order n must be non-negative, got {n}.")
    if len(a.shape) == 0:
        raise ShapeError("functx.numpy.diff needs an array of at least one dimension, got a "
                         "0-d array.")
    axis = _fshape.norm_axis(axis, len(a.shape), "diff")
    if prepend is not None or append is not None:
        parts = ([_edge("diff", prepend, a, axis)] if prepend is not None else []) + [a] + (
            [_edge("diff", append, a, axis)] if append is not None else [])
        a = _fshape.concatenate(parts, axis=axis)
    for _ in range(n):
        hi, lo = _sl(a, axis, 1, None), _sl(a, axis, None, -1)
        a = _uf.not_equal(hi, lo) if a.dtype == np.bool_ else _uf.subtract(hi, lo)
    return _fshape.unchanged(a)


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """The differences between consecutive elements of the flattened ``ary``, with
    ``to_begin``/``to_end`` (flattened) joined before/after.

    Example:
        >>> fnp.ediff1d(np.array([1, 2, 4, 7]), to_begin=-99)
        array([-99,   1,   2,   3])
    """
    a = _fshape.ravel(_fshape.as_array(ary))
    d = _uf.subtract(a[1:], a[:-1])
    parts = []
    if to_begin is not None:
        parts.append(astype(_fshape.ravel(_fshape.as_array(to_begin)), d.dtype))
    parts.append(d)
    if to_end is not None:
        parts.append(astype(_fshape.ravel(_fshape.as_array(to_end)), d.dtype))
    return _fshape.concatenate(parts) if len(parts) > 1 else d


def _gradient_1d(f: Any, h: Any, axis: int, edge_order: int) -> Any:
    """NumPy's second-order accurate differences of ``f`` along ``axis`` with spacing ``h``
    (a scalar, or the coordinates along the axis)."""
    n = f.shape[axis]
    shape = [1] * len(f.shape)
    shape[axis] = -1

    def s(a: int | None, b: int | None) -> Any:
        return _sl(f, axis, a, b)

    if len(getattr(h, "shape", ())) == 0:  # uniform spacing (a Python number stays weak)
        h2 = h * 2.0 if isinstance(h, (int, float)) else _uf.multiply(h, 2.0)
        interior = _uf.true_divide(_uf.subtract(s(2, None), s(None, -2)), h2)
        if edge_order == 1:
            first = _uf.true_divide(_uf.subtract(s(1, 2), s(0, 1)), h)
            last = _uf.true_divide(_uf.subtract(s(-1, None), s(-2, -1)), h)
        else:
            first = _uf.true_divide(_uf.add(_uf.add(_uf.multiply(s(0, 1), -1.5),
                                                    _uf.multiply(s(1, 2), 2.0)),
                                            _uf.multiply(s(2, 3), -0.5)), h)
            last = _uf.true_divide(_uf.add(_uf.add(_uf.multiply(s(-3, -2), 0.5),
                                                   _uf.multiply(s(-2, -1), -2.0)),
                                           _uf.multiply(s(-1, None), 1.5)), h)
        return _fshape.concatenate([first, interior, last], axis=axis)
    dx = _uf.subtract(h[1:], h[:-1])
    dx1, dx2 = _fshape.reshape(dx[:-1], tuple(shape)), _fshape.reshape(dx[1:], tuple(shape))
    a = _uf.true_divide(_uf.negative(dx2), _uf.multiply(dx1, _uf.add(dx1, dx2)))
    b = _uf.true_divide(_uf.subtract(dx2, dx1), _uf.multiply(dx1, dx2))
    c = _uf.true_divide(dx1, _uf.multiply(dx2, _uf.add(dx1, dx2)))
    interior = _uf.add(_uf.add(_uf.multiply(a, s(None, -2)), _uf.multiply(b, s(1, -1))),
                       _uf.multiply(c, s(2, None)))
    if edge_order == 1:
        first = _uf.true_divide(_uf.subtract(s(1, 2), s(0, 1)), dx[0])
        last = _uf.true_divide(_uf.subtract(s(-1, None), s(-2, -1)), dx[n - 2])
    else:
        d1, d2 = dx[0], dx[1]
        a0 = _uf.negative(_uf.true_divide(_uf.add(_uf.multiply(d1, 2.0), d2),
                                          _uf.multiply(d1, _uf.add(d1, d2))))
        b0 = _uf.true_divide(_uf.add(d1, d2), _uf.multiply(d1, d2))
        c0 = _uf.negative(_uf.true_divide(d1, _uf.multiply(d2, _uf.add(d1, d2))))
        first = _uf.add(_uf.add(_uf.multiply(a0, s(0, 1)), _uf.multiply(b0, s(1, 2))),
                        _uf.multiply(c0, s(2, 3)))
        d1, d2 = dx[n - 3], dx[n - 2]
        a1 = _uf.true_divide(d2, _uf.multiply(d1, _uf.add(d1, d2)))
        b1 = _uf.negative(_uf.true_divide(_uf.add(d2, d1), _uf.multiply(d1, d2)))
        c1 = _uf.true_divide(_uf.add(_uf.multiply(d2, 2.0), d1),
                             _uf.multiply(d2, _uf.add(d1, d2)))
        last = _uf.add(_uf.add(_uf.multiply(a1, s(-3, -2)), _uf.multiply(b1, s(-2, -1))),
                       _uf.multiply(c1, s(-1, None)))
    return _fshape.concatenate([first, interior, last], axis=axis)


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int | None = None) -> Any:
    """The gradient of sampled values ``f``: central differences inside, one-sided
    differences (first or second order, ``edge_order``) at the boundaries, as
    ``numpy.gradient``. ``varargs`` gives the spacing: nothing (1), one scalar for every
    axis, or one scalar or coordinate array per axis.

    Returns:
        One array per axis in ``axis`` (a tuple, as NumPy 2), or a single array for one
        axis.

    Raises:
        ShapeError: an axis has fewer than ``edge_order + 1`` points, or a coordinate array
            does not match its axis.
        ArgumentError: ``edge_order`` is not 1 or 2, or the number of spacings is wrong.

    Example:
        >>> fnp.gradient(np.array([1.0, 2.0, 4.0, 7.0]))
        array([1. , 1.5, 2.5, 3. ])
    """
    f = _float(_fshape.as_array(f))
    nd = len(f.shape)
    axes = tuple(range(nd)) if axis is None else tuple(
        _fshape.norm_axes(axis, nd, "gradient"))
    edge_order = 1 if edge_order is None else int(edge_order)
    if edge_order not in (1, 2):
        raise ArgumentError(f"functx.numpy.gradient: edge_order must be 1 or 2, got "
                            f"{edge_order}.")
    if len(varargs) == 0:
        spacing: list = [1.0] * len(axes)
    elif len(varargs) == 1 and len(getattr(varargs[0], "shape", ())) == 0:
        spacing = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise ArgumentError(f"functx.numpy.gradient: got {len(varargs)} spacings for "
                            f"{len(axes)} axes; pass none, one scalar, or one per axis.")
    out = []
    for ax, h in zip(axes, spacing):
        if f.shape[ax] < edge_order + 1:
            raise ShapeError(f"functx.numpy.gradient: axis {ax} of shape {tuple(f.shape)} "
                             f"has {f.shape[ax]} points; at least edge_order + 1 = "
                             f"{edge_order + 1} are needed.")
        if isinstance(h, (int, float)):
            out.append(_gradient_1d(f, h, ax, edge_order))
            continue
        h = _fshape.as_array(h)
        if len(h.shape) == 1:
            if h.shape[0] != f.shape[ax]:
                raise ShapeError(f"functx.numpy.gradient: the coordinates of axis {ax} have "
                                 f"{h.shape[0]} values; they must match its length "
                                 f"{f.shape[ax]}.")
            h = astype(_float(h), result_type(f, _float(h)))
        elif len(h.shape) != 0:
            raise ShapeError(f"functx.numpy.gradient: a spacing must be a scalar or a 1-D "
                             f"array, got shape {tuple(h.shape)}.")
        out.append(_gradient_1d(f, h, ax, edge_order))
    return out[0] if len(out) == 1 else tuple(out)


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, at points ``x`` (1-D
    along the axis, or ``y``'s shape) or with spacing ``dx``.

    Example:
        >>> fnp.trapezoid(np.array([1.0, 2.0, 3.0]), dx=0.5)
        array(2.)
    """
    y = _float(_fshape.as_array(y))
    axis = _fshape.norm_axis(axis, len(y.shape), "trapezoid")
    if x is None:
        d = dx if isinstance(dx, (int, float)) else _fshape.as_array(dx)
    else:
        x = _fshape.as_array(x)
        if len(x.shape) == 1:
            d = _uf.subtract(x[1:], x[:-1])
            shape = [1] * len(y.shape)
            shape[axis] = d.shape[0]
            d = _fshape.reshape(d, tuple(shape))
        else:
            d = diff(x, axis=axis)
    avg = _uf.multiply(_uf.add(_sl(y, axis, 1, None), _sl(y, axis, None, -1)), 0.5)
    return _r.sum(_uf.multiply(d, avg), axis=axis)


def unwrap(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * math.pi) -> Any:
    """``p`` with jumps larger than ``discont`` (default ``period / 2``) along ``axis``
    replaced by their ``period``-complement (phase unwrapping, as ``numpy.unwrap``).

    Example:
        >>> fnp.unwrap(np.array([0.0, 3.0, 6.5, -3.0])).round(3)
        array([0.   , 3.   , 0.217, 3.283])
    """
    p = _float(_fshape.as_array(p))
    axis = _fshape.norm_axis(axis, len(p.shape), "unwrap")
    if p.shape[axis] < 2:
        return _fshape.unchanged(p)
    dd = diff(p, axis=axis)
    if discont is None:
        discont = _uf.true_divide(period, 2)
    high = _uf.true_divide(period, 2)
    low = _uf.negative(high)
    ddmod = _uf.add(_uf.mod(_uf.subtract(dd, low), period), low)
    ddmod = _uf.where(_uf.logical_and(_uf.equal(ddmod, low), _uf.greater(dd, 0)), high, ddmod)
    correct = _uf.where(_uf.less(_uf.absolute(dd), discont), np.zeros((), dd.dtype),
                        _uf.subtract(ddmod, dd))
    correct = astype(correct, p.dtype)
    rest = _uf.add(_sl(p, axis, 1, None), _r.cumsum(correct, axis=axis))
    return _fshape.concatenate([_sl(p, axis, 0, 1), rest], axis=axis)


# ----------------------------------------------------------------------------------------
# interpolation


def sorted_position(sorted_1d: Any, x: Any, side: str = "right") -> Any:
    """For each element of ``x``, the number of elements of the sorted 1-D ``sorted_1d``
    that are ``<= x`` (``side='right'``) or ``< x`` (``'left'``); NaN sorts last. A
    branchless binary search (log2 n gathers), usable under every transform; int64.

    (functx.numpy's own helper for ``interp``, ``digitize`` and ``histogram``; the public
    ``searchsorted`` lives with the sorting functions.)
    """
    n = sorted_1d.shape[0]
    x = _fshape.as_array(x)
    pos = filled(x, 0, np.int64, tuple(x.shape))
    step = 1 << builtins.max(n.bit_length() - 1, 0) if n else 0
    while step:
        cand = _uf.add(pos, np.asarray(step, np.int64))
        probe = _ix.gather(sorted_1d, _uf.subtract(cand, np.asarray(1, np.int64)), axis=0)
        if side == "right":
            ok = _uf.logical_not(_uf.less(x, probe))
        else:
            ok = _uf.logical_not(_uf.less_equal(x, probe))
        pos = _uf.where(_uf.logical_and(ok, _uf.less_equal(cand, n)), cand, pos)
        step //= 2
    return pos


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None,
           period: Any = None) -> Any:
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp`` increasing) at
    ``x``; ``left``/``right`` (default ``fp[0]``/``fp[-1]``) outside ``[xp[0], xp[-1]]``;
    ``period`` for periodic ``x`` (needs concrete ``xp``).

    Raises:
        ShapeError: ``xp``/``fp`` are not 1-D of one length, or are empty.

    Example:
        >>> fnp.interp(np.array([0.5, 2.5]), np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 6.0]))
        array([1., 6.])
    """
    x, xp, fp = _fshape.as_array(x), _fshape.as_array(xp), _fshape.as_array(fp)
    if len(xp.shape) != 1 or len(fp.shape) != 1 or xp.shape[0] != fp.shape[0]:
        raise ShapeError(f"functx.numpy.interp: xp and fp must be 1-D arrays of one length, "
                         f"got shapes {tuple(xp.shape)} and {tuple(fp.shape)}.")
    if xp.shape[0] == 0:
        raise ShapeError("functx.numpy.interp: xp and fp are empty; at least one point is "
                         "needed.")
    dt = result_type(_float(x), _float(xp))
    x, xp = astype(x, dt), astype(xp, dt)
    fp = _float(fp)
    if period is not None:
        if _fshape.num_elements(_fshape.as_array(period)) != 1:
            raise ShapeError("functx.numpy.interp: period must be a scalar.")
        x = _uf.mod(x, period)
        xp = _uf.mod(xp, period)
        order = np.argsort(_fshape.concrete_value(xp, "functx.numpy.interp(period=...)",
                                                  "xp is sorted on the host"), kind="stable")
        xp, fp = _fshape.take_flat(xp, order), _fshape.take_flat(fp, order)
        xp = _fshape.concatenate([_uf.subtract(xp[-1:], period), xp, _uf.add(xp[:1], period)])
        fp = _fshape.concatenate([fp[-1:], fp, fp[:1]])
        left = right = None
    n = xp.shape[0]
    if n == 1:
        f = _fshape.broadcast_to(fp[0], tuple(x.shape))
    else:
        i = _uf.clip(sorted_position(xp, x, "right"), 1, n - 1)
        im1 = _uf.subtract(i, np.asarray(1, np.int64))
        x0, x1 = _ix.gather(xp, im1, axis=0), _ix.gather(xp, i, axis=0)
        f0, f1 = _ix.gather(fp, im1, axis=0), _ix.gather(fp, i, axis=0)
        dx = _uf.subtract(x1, x0)
        same = _uf.equal(dx, 0)
        safe_dx = _uf.where(same, np.ones((), dx.dtype), dx)
        slope = _uf.true_divide(_uf.subtract(f1, f0), safe_dx)
        f = _uf.where(same, f0, _uf.add(f0, _uf.multiply(slope, _uf.subtract(x, x0))))
        f = _uf.where(_uf.equal(x, xp[-1]), fp[-1], f)  # NumPy's exact right end
        f = _uf.where(_uf.isnan(x), np.asarray(np.nan, f.dtype), f)
    if period is None:
        lval = fp[0] if left is None else left
        rval = fp[-1] if right is None else right
        f = _uf.where(_uf.less(x, xp[0]), lval, f)
        f = _uf.where(_uf.greater(x, xp[-1]), rval, f)
    return astype(f, result_type(f, fp))


# ----------------------------------------------------------------------------------------
# statistics


def cov(m: Any, y: Any = None, rowvar: builtins.bool = True, bias: builtins.bool = False,
        ddof: int | None = None, fweights: Any = None, aweights: Any = None,
        dtype: Any = None) -> Any:
    """The covariance matrix of the variables in ``m`` (and ``y``): rows are variables
    unless ``rowvar=False``; ``fweights`` (integer frequencies) and ``aweights`` weight the
    observations, as ``numpy.cov``.

    Raises:
        ShapeError: ``m`` has more than 2 dimensions, or the weights the wrong shape.

    Example:
        >>> fnp.cov(np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
        array([[ 1., -1.],
               [-1.,  1.]])
    """
    m = _fshape.as_array(m)
    if len(m.shape) > 2:
        raise ShapeError(f"functx.numpy.cov: m has more than 2 dimensions (shape "
                         f"{tuple(m.shape)}); pass a 1-D or 2-D array.")
    dt = np.dtype(dtype) if dtype is not None else result_type(_float(m), *(
        [_float(_fshape.as_array(y))] if y is not None else []))
    x = _fshape.atleast_2d(astype(m, dt))
    if not rowvar and len(m.shape) != 1:
        x = _fshape.transpose(x)
    if x.shape[0] == 0:
        return astype(asarray(np.zeros((0, 0))), dt)
    if y is not None:
        yy = _fshape.atleast_2d(astype(_fshape.as_array(y), dt))
        if not rowvar and yy.shape[0] != 1:
            yy = _fshape.transpose(yy)
        x = _fshape.concatenate([x, yy], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    nobs = x.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        wt = _fshape.as_array(wt)
        if len(wt.shape) != 1 or wt.shape[0] != nobs:
            raise ShapeError(f"functx.numpy.cov: {name} must be 1-D with one weight per "
                             f"observation ({nobs}), got shape {tuple(wt.shape)}.")
        wt = astype(wt, dt)
        w = wt if w is None else _uf.multiply(w, wt)
    if w is None:
        avg = _r.mean(x, axis=1, keepdims=True)
        fact = np.asarray(nobs - ddof, dt)
    else:
        w_sum = _r.sum(w)
        avg = _uf.true_divide(_r.sum(_uf.multiply(x, w), axis=1, keepdims=True), w_sum)
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = _uf.subtract(w_sum, ddof)
        else:
            aw = astype(_fshape.as_array(aweights), dt)
            fact = _uf.subtract(w_sum, _uf.true_divide(
                _uf.multiply(ddof, _r.sum(_uf.multiply(w, aw))), w_sum))
    xc = _uf.subtract(x, avg)
    xw = xc if w is None else _uf.multiply(xc, w)
    xt = _cx.conj(xc) if xc.dtype.kind == "c" else xc
    c = _uf.true_divide(_la.matmul(xw, _fshape.transpose(xt)), fact)
    return _fshape.squeeze(c) if c.shape == (1, 1) else c


def corrcoef(x: Any, y: Any = None, rowvar: builtins.bool = True, dtype: Any = None) -> Any:
    """Pearson correlation coefficients, ``cov / sqrt(outer(var, var))``, with real parts
    clipped to [-1, 1] (as ``numpy.corrcoef``).

    Example:
        >>> fnp.corrcoef(np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
        array([[ 1., -1.],
               [-1.,  1.]])
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if len(c.shape) == 0:
        return _uf.true_divide(c, c)
    d = _fshape.diagonal(c)
    sd = _um.sqrt(_cx.real(d) if d.dtype.kind == "c" else d)
    c = _uf.true_divide(_uf.true_divide(c, _fshape.reshape(sd, (-1, 1))),
                        _fshape.reshape(sd, (1, -1)))
    if c.dtype.kind == "c":
        re = _uf.clip(_cx.real(c), -1, 1)
        return _uf.add(astype(re, c.dtype), _uf.multiply(astype(_cx.imag(c), c.dtype),
                                                         np.asarray(1j, c.dtype)))
    return _uf.clip(c, -1, 1)


# ----------------------------------------------------------------------------------------
# selection


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """Elements from ``choicelist`` where the corresponding condition holds (the first
    true condition wins), ``default`` where none does.

    Raises:
        ArgumentError: the lists differ in length or are empty, or a condition is not
            boolean.

    Example:
        >>> x = np.arange(5)
        >>> fnp.select([x < 2, x > 3], [x, x ** 2], default=-1)
        array([ 0,  1, -1, -1, 16])
    """
    if len(condlist) != len(choicelist):
        raise ArgumentError(f"functx.numpy.select: condlist and choicelist must have the same "
                            f"length, got {len(condlist)} and {len(choicelist)}.")
    if len(condlist) == 0:
        raise ArgumentError("functx.numpy.select: condlist is empty; pass at least one "
                            "condition.")
    conds = [_fshape.as_array(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != np.bool_:
            raise ArgumentError(f"functx.numpy.select: condlist[{i}] has dtype {c.dtype}; "
                                f"every condition must be a boolean array.")
    choices = [_fshape.as_array(c) for c in choicelist]
    dt = result_type(*choices, default)
    out = astype(_fshape.as_array(default), dt)
    for c, v in zip(reversed(conds), reversed(choices)):
        out = _uf.where(c, astype(v, dt), out)
    return out


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """A piecewise-defined function of ``x``: ``funclist[i]`` (a callable taking ``x``,
    ``*args``, ``**kw``, or a constant) where ``condlist[i]`` holds, later conditions taking
    precedence; one extra function is the default where no condition holds (else 0). The
    result has ``x``'s dtype. Every function is evaluated on the whole of ``x`` (see the
    module doc).

    Raises:
        ArgumentError: ``funclist`` has neither ``len(condlist)`` nor one more entries.

    Example:
        >>> x = np.array([-2.0, -1.0, 1.0, 2.0])
        >>> fnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2])
        array([2., 1., 1., 4.])
    """
    x = _fshape.as_array(x)
    if isinstance(condlist, (list, tuple)):
        conds = [_fshape.as_array(c) for c in condlist]
    else:
        c = _fshape.as_array(condlist)
        conds = [c] if len(c.shape) <= len(x.shape) else [c[i] for i in range(c.shape[0])]
    conds = [astype(c, np.bool_) for c in conds]
    n = len(conds)
    if len(funclist) == n + 1:
        none = _uf.logical_not(_r.any(_fshape.stack(
            [_fshape.broadcast_to(c, tuple(x.shape)) for c in conds]), axis=0)) if n else \
            filled(x, True, np.bool_, tuple(x.shape))
        conds = conds + [none]
    elif len(funclist) != n:
        raise ArgumentError(f"functx.numpy.piecewise: with {n} condition(s), funclist must "
                            f"have {n} or {n + 1} entries, got {len(funclist)}.")
    out = filled(x, 0, x.dtype, tuple(x.shape))
    for c, f in zip(conds, funclist):
        value = f(x, *args, **kw) if callable(f) else f
        out = _uf.where(c, astype(_fshape.as_array(value), x.dtype), out)
    return out



def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind of order 0, elementwise (``numpy.i0``,
    ``jax.numpy.i0``): ``i0e(x) * exp(|x|)`` from the exponentially scaled primitive, so it
    is differentiable (``i0' = i1``).

    Args:
        x: a real array (integers are promoted to float64).

    Returns:
        ``I0(x)``, of ``x``'s float dtype.

    Example:
        >>> fnp.i0(np.array([0.0, 1.0]))
        array([1.        , 1.26606588])
    """
    x = _float(asarray(x))
    return _special.i0e(x) * _um.exp(_uf.abs(x))
