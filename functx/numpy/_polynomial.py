"""Polynomials (coefficient arrays, highest power first, as ``numpy.poly*``), convolution
and the Vandermonde matrix: polyval, polyfit, poly, polyadd, polysub, polymul, polydiv,
polyder, polyint, roots, vander, convolve, correlate.

Everything but ``roots`` (and ``poly`` of a matrix) is a composite of primitives, so it
works under every transform and is differentiable in the coefficients and the points.
``convolve``/``correlate`` of real floating-point arrays run on the convolution primitive;
integer and complex inputs go through a gather and a dot product.

Differences from NumPy (as ``jax.numpy``):
    * ``polymul`` and ``polydiv`` keep leading zeros unless ``trim_leading_zeros=True``
      (which needs concrete values), so output shapes never depend on values.
    * ``poly`` of complex roots returns complex coefficients (NumPy returns real ones when
      the roots come in conjugate pairs, a value-dependent dtype).
    * ``roots`` needs concrete coefficients (an eigenvalue problem on the host) and is
      not differentiable; ``strip_zeros=False`` gives NaN roots for leading zeros, as JAX.
    * ``polyfit`` and ``vander`` keep float32 inputs in float32, as ``jax.numpy`` (NumPy
      returns float64).
    * ``polyfit`` solves the least-squares problem by a modified Gram-Schmidt QR of the
      scaled Vandermonde matrix (differentiable); ``full=True`` and ``rcond`` are not
      supported.
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from functx.errors import ArgumentError, ShapeError
from functx.numpy import _linalg as _la
from functx.numpy import _reductions as _r
from functx.numpy import _shape as _fshape
from functx.numpy._devices import filled
from functx.numpy import _ufuncs as _uf
from functx.numpy import _ufuncs_math as _um
from functx.numpy._promotion import asarray, astype, result_type
from functx.primitives import complex as _cx
from functx.primitives import conv as _conv

__all__ = [
    "polyval", "polyfit", "poly", "polyadd", "polysub", "polymul", "polydiv", "polyder",
    "polyint", "roots", "vander", "convolve", "correlate",
]


def _vector(name: str, x: Any, what: str = "the coefficients") -> Any:
    x = _fshape.as_array(x)
    if len(x.shape) != 1:
        raise ShapeError(f"functx.numpy.{name}: {what} must be a 1-D array, got shape "
                         f"{tuple(x.shape)}.")
    return x


def _inexact(x: Any) -> Any:
    return x if x.dtype.kind in "fc" or x.dtype.name == "bfloat16" else astype(x, np.float64)


# ----------------------------------------------------------------------------------------
# convolution


def _full_correlate_gather(a: Any, v: Any, low: int, high: int) -> Any:
    """``out[k] = sum_j a_pad[k + j] * v[j]`` (a cross-correlation) by a gather of the
    padded ``a`` and a dot product with ``v``; for dtypes the conv primitive lacks."""
    n, m = a.shape[0], v.shape[0]
    zero = np.zeros((), a.dtype)
    ap = _fshape.pad(a, ((low, high),), constant_values=zero) if (low or high) else a
    out_len = n + low + high - m + 1
    idx = np.arange(out_len)[:, None] + np.arange(m)[None, :]
    windows = _fshape.take_flat(ap, idx)  # [out_len, m]
    return _la.matmul(windows, v)


def _correlate_valid(a: Any, v: Any, low: int, high: int) -> Any:
    """The cross-correlation of 1-D ``a`` (padded by ``low``/``high`` zeros) with ``v``:
    ``out[k] = sum_j a_pad[k + j] * v[j]``, in the common dtype of ``a`` and ``v``."""
    dt = result_type(a, v)
    a, v = astype(a, dt), astype(v, dt)
    if dt.kind == "f" and a.shape[0] and v.shape[0]:
        out = _conv.conv_general_dilated(_fshape.reshape(a, (1, 1, a.shape[0])),
                                         _fshape.reshape(v, (1, 1, v.shape[0])),
                                         (1,), ((low, high),))
        return _fshape.reshape(out, (out.shape[-1],))
    if dt.kind == "c" and a.shape[0] and v.shape[0]:
        ar, ai, vr, vi = _cx.real(a), _cx.imag(a), _cx.real(v), _cx.imag(v)
        rr = _uf.subtract(_correlate_valid(ar, vr, low, high),
                          _correlate_valid(ai, vi, low, high))
        ii = _uf.add(_correlate_valid(ar, vi, low, high), _correlate_valid(ai, vr, low, high))
        return _uf.add(astype(rr, dt), _uf.multiply(astype(ii, dt), np.asarray(1j, dt)))
    return _full_correlate_gather(a, v, low, high)


def _mode_padding(name: str, mode: str, n: int, m: int) -> tuple[int, int]:
    if mode == "full":
        return m - 1, m - 1
    if mode == "same":
        s = (m - 1) // 2
        return m - 1 - s, s
    if mode == "valid":
        return 0, 0
    raise ArgumentError(f"functx.numpy.{name}: mode must be 'full', 'same' or 'valid', not "
                        f"{mode!r}.")


def convolve(a: Any, v: Any, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Any:
    """The discrete linear convolution of two 1-D arrays (``mode`` ``'full'``, ``'same'`` or
    ``'valid'``, as ``numpy.convolve``).

    Raises:
        ShapeError: an input is not 1-D, or is empty.
        ArgumentError: an unknown ``mode``.

    Example:
        >>> fnp.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
        array([0. , 1. , 2.5, 4. , 1.5])
    """
    a, v = _vector("convolve", a, "a"), _vector("convolve", v, "v")
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ShapeError(f"functx.numpy.convolve: inputs cannot be empty, got shapes "
                         f"{tuple(a.shape)} and {tuple(v.shape)}.")
    if v.shape[0] > a.shape[0]:
        a, v = v, a
    low, high = _mode_padding("convolve", mode, a.shape[0], v.shape[0])
    out = _correlate_valid(a, _fshape.flip(v, 0), low, high)
    return astype(out, preferred_element_type) if preferred_element_type else out


def correlate(a: Any, v: Any, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """The cross-correlation of two 1-D arrays, ``c[k] = sum_n a[n + k] * conj(v[n])``
    (``mode`` ``'valid'`` by default, as ``numpy.correlate``).

    Raises:
        ShapeError: an input is not 1-D, or is empty.
        ArgumentError: an unknown ``mode``.

    Example:
        >>> fnp.correlate(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
        array([3.5])
    """
    a, v = _vector("correlate", a, "a"), _vector("correlate", v, "v")
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ShapeError(f"functx.numpy.correlate: inputs cannot be empty, got shapes "
                         f"{tuple(a.shape)} and {tuple(v.shape)}.")
    if v.dtype.kind == "c":
        v = _cx.conj(v)
    n, m = a.shape[0], v.shape[0]
    low, high = _mode_padding("correlate", mode, n, m)
    if n >= m:
        out = _correlate_valid(a, v, low, high)
    else:  # NumPy correlates the other way round and reverses: the same window of `full`
        full = _correlate_valid(a, v, m - 1, m - 1)
        start, length = {"full": (0, n + m - 1), "same": (n - 1 - (n - 1) // 2, m),
                         "valid": (n - 1, m - n + 1)}[mode]
        out = full[start:start + length]
    return astype(out, preferred_element_type) if preferred_element_type else out


# ----------------------------------------------------------------------------------------
# evaluation and arithmetic


def polyval(p: Any, x: Any, *, unroll: int = 16) -> Any:
    """The polynomial with coefficients ``p`` (highest power first) at ``x`` (Horner's rule).

    Raises:
        ShapeError: ``p`` is not 1-D.

    Example:
        >>> fnp.polyval(np.array([3.0, 0.0, 1.0]), np.array([1.0, 2.0]))
        array([ 4., 13.])
    """
    p = _vector("polyval", p)
    x = _fshape.as_array(x)
    dt = result_type(p, x)
    if p.shape[0] == 0:
        return filled(x, 0, dt, tuple(x.shape))
    y = astype(_fshape.broadcast_to(p[0], tuple(x.shape)), dt)
    for i in range(1, p.shape[0]):
        y = _uf.add(_uf.multiply(y, x), p[i])
    return astype(y, dt)


def _pad_front(a: Any, n: int) -> Any:
    return _fshape.pad(a, ((n - a.shape[0], 0),)) if a.shape[0] < n else a


def polyadd(a1: Any, a2: Any) -> Any:
    """The sum of two polynomials (the shorter padded with leading zeros).

    Example:
        >>> fnp.polyadd(np.array([1, 2]), np.array([1, 2, 3]))
        array([1, 3, 5])
    """
    a1, a2 = _vector("polyadd", a1, "a1"), _vector("polyadd", a2, "a2")
    n = builtins.max(a1.shape[0], a2.shape[0])
    return _uf.add(_pad_front(a1, n), _pad_front(a2, n))


def polysub(a1: Any, a2: Any) -> Any:
    """The difference of two polynomials (the shorter padded with leading zeros).

    Example:
        >>> fnp.polysub(np.array([1, 2, 3]), np.array([1, 2]))
        array([1, 1, 1])
    """
    a1, a2 = _vector("polysub", a1, "a1"), _vector("polysub", a2, "a2")
    n = builtins.max(a1.shape[0], a2.shape[0])
    return _uf.subtract(_pad_front(a1, n), _pad_front(a2, n))


def _trim(name: str, a: Any) -> Any:
    """``a`` without its leading zeros (one zero kept if all are), which needs its value."""
    value = _fshape.concrete_value(a, f"functx.numpy.{name}(trim_leading_zeros=True)",
                                   "the result's length depends on it")
    nz = np.flatnonzero(value)
    start = int(nz[0]) if nz.size else builtins.max(a.shape[0] - 1, 0)
    return a[start:]


def polymul(a1: Any, a2: Any, *, trim_leading_zeros: builtins.bool = False) -> Any:
    """The product of two polynomials (their convolution).

    Args:
        trim_leading_zeros: drop leading zeros from the inputs first (needs concrete values).

    Example:
        >>> fnp.polymul(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
        array([ 3., 10.,  8.])
    """
    a1, a2 = _vector("polymul", a1, "a1"), _vector("polymul", a2, "a2")
    if trim_leading_zeros:
        a1, a2 = _trim("polymul", a1), _trim("polymul", a2)
    if a1.shape[0] == 0 or a2.shape[0] == 0:
        return astype(asarray(np.zeros(0)), result_type(a1, a2))
    return convolve(a1, a2)


def polydiv(u: Any, v: Any, *, trim_leading_zeros: builtins.bool = False) -> tuple:
    """The quotient and remainder of polynomial division ``u / v`` (long division).

    The remainder has ``u``'s length (leading zeros kept) unless ``trim_leading_zeros``.

    Raises:
        ShapeError: ``v`` is empty.

    Example:
        >>> q, r = fnp.polydiv(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 1.0]))
        >>> q, r
        (array([1., 1., 2.]), array([0., 0., 0., 2.]))
    """
    u, v = _inexact(_vector("polydiv", u, "u")), _inexact(_vector("polydiv", v, "v"))
    dt = result_type(u, v)
    u, v = astype(u, dt), astype(v, dt)
    m, n = u.shape[0] - 1, v.shape[0] - 1
    if n < 0:
        raise ShapeError("functx.numpy.polydiv: the divisor v is empty; it needs at least "
                         "one coefficient.")
    scale = _uf.true_divide(np.ones((), dt), v[0])
    qs = []
    r = u
    for k in range(builtins.max(m - n + 1, 0)):
        d = _uf.multiply(scale, r[k])
        qs.append(d)
        upd = _uf.multiply(d, v)
        r = _fshape.concatenate([r[:k], _uf.subtract(r[k:k + n + 1], upd), r[k + n + 1:]])
    q = _fshape.stack(qs) if qs else _fshape.on_device_of(u, np.zeros(1, dt))
    if trim_leading_zeros:
        value = _fshape.concrete_value(r, "functx.numpy.polydiv(trim_leading_zeros=True)",
                                       "the remainder's length depends on it")
        start = 0
        while start < value.shape[0] - 1 and np.isclose(value[start], 0, rtol=1e-14):
            start += 1
        r = r[start:]
    return q, r


def polyder(p: Any, m: int = 1) -> Any:
    """The ``m``-th derivative of a polynomial.

    Raises:
        ArgumentError: ``m`` is negative.

    Example:
        >>> fnp.polyder(np.array([1.0, 2.0, 3.0, 4.0]))
        array([3., 4., 3.])
    """
    p = _vector("polyder", p)
    m = int(m)
    if m < 0:
        raise ArgumentError(f"functx.numpy.polyder: the order of derivative m must be "
                            f"non-negative, got {m}.")
    for _ in range(m):
        n = p.shape[0]
        if n <= 1:
            return p[:0]
        p = _uf.multiply(p[:-1], _fshape.on_device_of(p, np.arange(n - 1, 0, -1)))
    return _fshape.unchanged(p)


def polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    """The ``m``-th antiderivative of a polynomial, with integration constants ``k`` (a
    scalar for all, or ``m`` values, the first used first; default 0).

    Raises:
        ArgumentError: ``m`` is negative, or ``k`` has neither 1 nor ``m`` values.

    Example:
        >>> fnp.polyint(np.array([3.0, 2.0, 1.0]))
        array([1., 1., 1., 0.])
    """
    p = _inexact(_vector("polyint", p))
    m = int(m)
    if m < 0:
        raise ArgumentError(f"functx.numpy.polyint: the order of integral m must be "
                            f"non-negative, got {m}.")
    if m == 0:
        return _fshape.unchanged(p)
    k = _fshape.on_device_of(p, np.zeros(())) if k is None else _fshape.as_array(k)
    if len(k.shape) == 0 or k.shape == (1,):
        k = _fshape.broadcast_to(_fshape.reshape(k, ()), (m,))
    if tuple(k.shape) != (m,):
        raise ArgumentError(f"functx.numpy.polyint: k must be a scalar or have m={m} values, "
                            f"got shape {tuple(k.shape)}.")
    dt = result_type(p, k)
    p, k = astype(p, dt), astype(k, dt)
    for i in range(m):
        n = p.shape[0]
        p = _fshape.concatenate([_uf.true_divide(p, _fshape.on_device_of(
                                     p, np.arange(n, 0, -1).astype(dt))),
                                 _fshape.reshape(k[i], (1,))])
    return p


def poly(seq_of_zeros: Any) -> Any:
    """The coefficients of the monic polynomial with the given roots (or, for a square
    matrix, of its characteristic polynomial, which needs concrete values).

    Example:
        >>> fnp.poly(np.array([1.0, 2.0]))
        array([ 1., -3.,  2.])
    """
    z = _fshape.as_array(seq_of_zeros)
    if len(z.shape) == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        value = _fshape.concrete_value(z, "functx.numpy.poly of a matrix",
                                       "its eigenvalues are computed on the host")
        z = asarray(np.linalg.eigvals(value))
    elif len(z.shape) != 1:
        raise ShapeError(f"functx.numpy.poly: the input must be a 1-D array of roots or a "
                         f"square matrix, got shape {tuple(z.shape)}.")
    z = _inexact(z)
    a = _fshape.on_device_of(z, np.ones(1, z.dtype))
    for i in range(z.shape[0]):
        one = _fshape.on_device_of(z, np.ones((), z.dtype))
        a = convolve(a, _fshape.stack([one, _uf.negative(z[i])]))
    return a


def roots(p: Any, *, strip_zeros: builtins.bool = True) -> Any:
    """The roots of a polynomial, as the eigenvalues of its companion matrix (complex).

    Needs concrete coefficients (the eigenvalues are computed on the host) and has no
    gradient. Leading zeros are dropped (``strip_zeros=False``: each gives a NaN root, as
    ``jax.numpy``); trailing zeros give zero roots.

    Example:
        >>> fnp.roots(np.array([1.0, -3.0, 2.0]))
        array([2.+0.j, 1.+0.j])
    """
    p = _vector("roots", p)
    value = _fshape.concrete_value(p, "functx.numpy.roots",
                                   "the companion matrix's eigenvalues are computed on the host")
    value = value.astype(np.result_type(value.dtype, np.float64))
    nz = np.flatnonzero(value)
    if nz.size == 0:
        return asarray(np.zeros(0, np.complex128 if value.dtype.itemsize > 4 else
                                np.complex64))
    lead = int(nz[0])
    trailing = value.shape[0] - int(nz[-1]) - 1
    core = value[lead:value.shape[0] - trailing]
    r = np.roots(core).astype(np.result_type(value.dtype, np.complex64))
    r = np.concatenate([r, np.zeros(trailing, r.dtype)])
    if not strip_zeros and lead:
        r = np.concatenate([r, np.full(lead, np.nan + 1j * np.nan, r.dtype)])
    return asarray(r)


# ----------------------------------------------------------------------------------------
# Vandermonde and fitting


def vander(x: Any, N: int | None = None, increasing: builtins.bool = False) -> Any:
    """The Vandermonde matrix of ``x``: columns ``x**(N-1), ..., x, 1`` (``increasing``:
    ``1, x, ..., x**(N-1)``), as products so that the gradient is exact at 0.

    Raises:
        ShapeError: ``x`` is not 1-D.
        ArgumentError: ``N`` is negative.

    Example:
        >>> fnp.vander(np.array([1, 2, 3]), 3)
        array([[1, 1, 1],
               [4, 2, 1],
               [9, 3, 1]])
    """
    x = _vector("vander", x, "x")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise ArgumentError(f"functx.numpy.vander: N must be non-negative, got {n}.")
    if n == 0:
        return _uf.multiply(_fshape.reshape(x, (x.shape[0], 1))[:, :0], 0)
    ones = filled(x, 1, x.dtype, (x.shape[0], 1))
    reps = _fshape.broadcast_to(_fshape.reshape(x, (x.shape[0], 1)), (x.shape[0], n - 1))
    cols = _r.cumprod(_fshape.concatenate([ones, reps], axis=1), axis=1)
    return cols if increasing else _fshape.flip(cols, 1)


def _back_substitute(r: list, b: list) -> list:
    """The solution of ``R c = b`` for upper-triangular ``R`` given as lists of scalars."""
    n = len(b)
    c: list = [None] * n
    for i in range(n - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, n):
            s = _uf.subtract(s, _uf.multiply(r[i][j], c[j]))
        c[i] = _uf.true_divide(s, r[i][i])
    return c


def polyfit(x: Any, y: Any, deg: int, rcond: Any = None, full: builtins.bool = False,
            w: Any = None, cov: builtins.bool = False) -> Any:
    """Least-squares fit of a polynomial of degree ``deg`` to points ``(x, y)`` (``y`` may
    be 2-D: one fit per column), with optional weights ``w``; coefficients highest power
    first. ``cov=True`` also returns the coefficients' covariance (NumPy 2's scaling by
    ``resids / (len(x) - deg - 1)``; ``cov='unscaled'``: not scaled).

    Raises:
        ArgumentError: ``deg`` is negative, or ``full=True`` (not supported).
        ShapeError: ``x``, ``y`` or ``w`` have the wrong shape.

    Example:
        >>> fnp.polyfit(np.arange(4.0), np.arange(4.0) ** 2, 2).round(6)
        array([ 1., -0.,  0.])
    """
    if full:
        raise ArgumentError("functx.numpy.polyfit(full=True) is not supported (it needs the "
                            "singular values); fit with full=False, or use numpy.polyfit on "
                            "concrete values.")
    deg = int(deg)
    if deg < 0:
        raise ArgumentError(f"functx.numpy.polyfit: deg must be non-negative, got {deg}.")
    x = _inexact(_vector("polyfit", x, "x"))
    y = _inexact(_fshape.as_array(y))
    if len(y.shape) not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ShapeError(f"functx.numpy.polyfit: y must be 1-D or 2-D with as many rows as "
                         f"x has points ({x.shape[0]}), got shape {tuple(y.shape)}.")
    dt = result_type(x, y)
    x, y = astype(x, dt), astype(y, dt)
    lhs = vander(x, deg + 1)
    rhs = y
    if w is not None:
        w = astype(_vector("polyfit", w, "w"), dt)
        if w.shape[0] != x.shape[0]:
            raise ShapeError(f"functx.numpy.polyfit: w must have one weight per point "
                             f"({x.shape[0]}), got {w.shape[0]}.")
        lhs = _uf.multiply(lhs, _fshape.reshape(w, (w.shape[0], 1)))
        rhs = _uf.multiply(rhs, w if len(y.shape) == 1 else _fshape.reshape(w, (-1, 1)))
    scale = _um.sqrt(_r.sum(_uf.multiply(lhs, lhs), axis=0))
    lhs = _uf.true_divide(lhs, scale)
    # modified Gram-Schmidt: lhs = Q R, then R c = Q^T rhs
    cols = [lhs[:, j] for j in range(deg + 1)]
    qs, r = [], [[None] * (deg + 1) for _ in range(deg + 1)]
    for j in range(deg + 1):
        v = cols[j]
        for i, q in enumerate(qs):
            r[i][j] = _r.sum(_uf.multiply(q, v))
            v = _uf.subtract(v, _uf.multiply(r[i][j], q))
        r[j][j] = _um.sqrt(_r.sum(_uf.multiply(v, v)))
        qs.append(_uf.true_divide(v, r[j][j]))
    qt_rhs = [_la.dot(q, rhs) for q in qs]
    c = _fshape.stack(_back_substitute(r, qt_rhs))
    c = _uf.true_divide(c, scale if len(y.shape) == 1 else _fshape.reshape(scale, (-1, 1)))
    if not cov:
        return c
    # covariance: inv(lhs^T lhs) / outer(scale, scale) * resid / (n - deg - 1 [- 2])
    eye = np.eye(deg + 1, dtype=dt)
    rinv = _fshape.stack([_fshape.stack(_back_substitute(r, [eye[i, j] for i in
                                                                 range(deg + 1)]))
                          for j in range(deg + 1)], axis=1)
    vbase = _uf.true_divide(_la.matmul(rinv, _fshape.transpose(rinv)),
                            _la.outer(scale, scale))
    npts = x.shape[0]
    if isinstance(cov, str) and cov == "unscaled":
        fac = np.ones((), dt) if len(y.shape) == 1 else np.ones(y.shape[1], dt)
    else:
        if npts <= deg + 1:
            raise ArgumentError(f"functx.numpy.polyfit: the number of points ({npts}) must "
                                f"exceed the order ({deg + 1}) to scale the covariance "
                                f"matrix; pass more points or cov='unscaled'.")
        pred = _la.matmul(vander(x, deg + 1), c)
        res = _uf.subtract(y, pred)
        if w is not None:
            res = _uf.multiply(res, w if len(y.shape) == 1 else _fshape.reshape(w, (-1, 1)))
        resids = _r.sum(_uf.multiply(res, res), axis=0)
        fac = _uf.true_divide(resids, np.asarray(npts - deg - 1, dt))
    if len(y.shape) == 1:
        return c, _uf.multiply(vbase, fac)
    return c, _uf.multiply(_fshape.reshape(vbase, vbase.shape + (1,)), fac)

