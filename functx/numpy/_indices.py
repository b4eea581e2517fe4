"""Index generators and grids: diag_indices(_from), tril_indices(_from),
triu_indices(_from), mask_indices, indices, ix_, ravel_multi_index, unravel_index,
meshgrid, the index tricks ``r_``, ``c_``, ``mgrid``, ``ogrid``, ``s_``, ``index_exp``,
``geomspace``/``logspace`` and the window functions (bartlett, blackman, hamming,
hanning, kaiser).

Shapes here are static (Python ints); index arrays are int64 constants. ``meshgrid``,
``ix_``, ``ravel_multi_index``, ``unravel_index``, ``geomspace``, ``logspace`` and
``kaiser`` (in ``beta``) work on traced values.

Differences from NumPy:
    * ``unravel_index`` and ``ravel_multi_index(mode='raise')`` check concrete indices as
      NumPy does; traced out-of-range indices are clipped into range (as ``jax.numpy``).
    * ``r_``/``c_`` handle arrays, scalars, slices (``start:stop:step``, a complex step
      meaning a number of points) and the string directive ``'axis,ndmin,trans1d'``; the
      matrix directives (``'r'``, ``'c'``) are not
      supported (functx has no matrix type).
"""
from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from functx.errors import ArgumentError, ShapeError
from functx.numpy import _creation as _cr
from functx.numpy import _shape as _fshape
from functx.numpy import _ufuncs as _uf
from functx.numpy import _ufuncs_math as _um
from functx.numpy._promotion import asarray, astype, is_inexact, is_tracer, result_type

__all__ = [
    "diag_indices", "diag_indices_from", "tril_indices", "tril_indices_from",
    "triu_indices", "triu_indices_from", "mask_indices", "indices", "ix_",
    "ravel_multi_index", "unravel_index", "meshgrid", "r_", "c_", "mgrid", "ogrid", "s_",
    "index_exp", "geomspace", "logspace", "bartlett", "blackman", "hamming", "hanning",
    "kaiser",
]


def _consts(arrays: Any) -> tuple:
    return tuple(asarray(np.asarray(a, np.int64)) for a in arrays)


def diag_indices(n: int, ndim: int = 2) -> tuple:
    """The indices of the main diagonal of an ``n x ... x n`` array (``ndim`` axes).

    Example:
        >>> fnp.diag_indices(2)
        (array([0, 1]), array([0, 1]))
    """
    n, ndim = int(n), int(ndim)
    if n < 0 or ndim < 0:
        raise ArgumentError(f"functx.numpy.diag_indices: n and ndim must be non-negative, got "
                            f"{n} and {ndim}.")
    return _consts(np.diag_indices(n, ndim))


def diag_indices_from(arr: Any) -> tuple:
    """The indices of the main diagonal of ``arr`` (at least 2-D, all axes equal).

    Raises:
        ShapeError: ``arr`` has fewer than 2 axes or unequal ones.

    Example:
        >>> fnp.diag_indices_from(np.zeros((2, 2)))
        (array([0, 1]), array([0, 1]))
    """
    shape = tuple(_fshape.as_array(arr).shape)
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ShapeError(f"functx.numpy.diag_indices_from: the array must be at least 2-d with "
                         f"all dimensions of equal length, got shape {shape}.")
    return diag_indices(shape[0], len(shape))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """The row and column indices of the lower triangle (diagonal ``k`` and below) of an
    ``n x m`` array.

    Example:
        >>> fnp.tril_indices(2)
        (array([0, 1, 1]), array([0, 0, 1]))
    """
    return _consts(np.tril_indices(int(n), int(k), None if m is None else int(m)))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """The row and column indices of the upper triangle (diagonal ``k`` and above) of an
    ``n x m`` array.

    Example:
        >>> fnp.triu_indices(2)
        (array([0, 0, 1]), array([0, 1, 1]))
    """
    return _consts(np.triu_indices(int(n), int(k), None if m is None else int(m)))


def _shape_2d(name: str, arr: Any) -> tuple[int, int]:
    shape = tuple(_fshape.as_array(arr).shape)
    if len(shape) != 2:
        raise ShapeError(f"functx.numpy.{name}: the input array must be 2-d, got shape "
                         f"{shape}.")
    return shape


def tril_indices_from(arr: Any, k: int = 0) -> tuple:
    """:func:`tril_indices` for the shape of the 2-D ``arr``.

    Example:
        >>> fnp.tril_indices_from(np.zeros((2, 3)))
        (array([0, 1, 1]), array([0, 0, 1]))
    """
    n, m = _shape_2d("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr: Any, k: int = 0) -> tuple:
    """:func:`triu_indices` for the shape of the 2-D ``arr``.

    Example:
        >>> fnp.triu_indices_from(np.zeros((2, 2)))
        (array([0, 0, 1]), array([0, 1, 1]))
    """
    n, m = _shape_2d("triu_indices_from", arr)
    return triu_indices(n, k, m)


def mask_indices(n: int, mask_func: Callable, k: int = 0, *, size: int | None = None) -> tuple:
    """The indices where ``mask_func(ones((n, n)), k)`` is nonzero (e.g. ``fnp.triu``);
    the mask must be concrete. ``size`` cuts or pads (with zeros) the index arrays.

    Example:
        >>> fnp.mask_indices(2, fnp.triu)
        (array([0, 0, 1]), array([0, 1, 1]))
    """
    mask = mask_func(np.ones((int(n), int(n)), np.int64), k)
    value = _fshape.concrete_value(mask, "functx.numpy.mask_indices",
                                   "the number of indices depends on it")
    out = np.nonzero(value)
    if size is not None:
        out = tuple(np.concatenate([o, np.zeros(builtins.max(int(size) - o.size, 0),
                                                np.int64)])[:int(size)] for o in out)
    return _consts(out)


def indices(dimensions: Any, dtype: Any = None, sparse: builtins.bool = False) -> Any:
    """The grid of indices of an array of shape ``dimensions``: one array per axis, stacked
    (or, with ``sparse``, a tuple of broadcastable arrays).

    Example:
        >>> fnp.indices((2, 2))[0]
        array([[0, 0],
               [1, 1]])
    """
    dims = tuple(int(d) for d in dimensions)
    dt = np.int64 if dtype is None else dtype
    out = np.indices(dims, dtype=dt, sparse=sparse)
    return tuple(asarray(o) for o in out) if sparse else asarray(out)


def ix_(*args: Any) -> tuple:
    """Open-mesh index arrays from 1-D sequences: the i-th result has the i-th sequence
    on axis i and size 1 elsewhere (boolean sequences become their nonzero positions,
    which needs concrete values).

    Raises:
        ShapeError: an argument is not 1-D.

    Example:
        >>> [a.shape for a in fnp.ix_(np.array([0, 1]), np.array([2, 3, 4]))]
        [(2, 1), (1, 3)]
    """
    n = len(args)
    out = []
    for i, a in enumerate(args):
        a = _fshape.as_array(a)
        if len(a.shape) != 1:
            raise ShapeError(f"functx.numpy.ix_: cross index must be 1-dimensional, argument "
                             f"{i} has shape {tuple(a.shape)}.")
        if a.dtype == np.bool_:
            a = asarray(np.flatnonzero(_fshape.concrete_value(
                a, "functx.numpy.ix_ of a boolean sequence", "it becomes integer positions")))
        elif a.shape[0] == 0:
            a = astype(a, np.int64)
        shape = [1] * n
        shape[i] = a.shape[0]
        out.append(_fshape.reshape(a, tuple(shape)))
    return tuple(out)


def _int_array(name: str, x: Any) -> Any:
    x = _fshape.as_array(x)
    if x.dtype.kind not in "iu":
        raise ArgumentError(f"functx.numpy.{name}: indices must be integers, got dtype "
                            f"{x.dtype}.")
    return astype(x, np.int64)


def ravel_multi_index(multi_index: Any, dims: Any, mode: str = "raise",
                      order: str = "C") -> Any:
    """The flat indices of the multi-indices ``multi_index`` (one integer array per axis) in
    an array of shape ``dims``; ``mode`` ``'raise'``, ``'wrap'`` or ``'clip'`` for
    out-of-range entries, ``order`` ``'C'`` or ``'F'``.

    Raises:
        ArgumentError: the number of index arrays differs from ``len(dims)``, concrete
            indices are out of range under ``'raise'``, or an unknown ``mode``/``order``.

    Example:
        >>> fnp.ravel_multi_index((np.array([0, 1]), np.array([2, 0])), (2, 3))
        array([2, 3])
    """
    dims = tuple(int(d) for d in dims)
    idx = [_int_array("ravel_multi_index", i) for i in multi_index]
    if len(idx) != len(dims):
        raise ArgumentError(f"functx.numpy.ravel_multi_index: got {len(idx)} index arrays for "
                            f"{len(dims)} dimensions; pass one per dimension.")
    modes = (mode,) * len(dims) if isinstance(mode, str) else tuple(mode)
    if order not in ("C", "F"):
        raise ArgumentError(f"functx.numpy.ravel_multi_index: order must be 'C' or 'F', not "
                            f"{order!r}.")
    fixed = []
    for i, (a, d, md) in enumerate(zip(idx, dims, modes)):
        if md == "wrap":
            a = _uf.mod(a, d)
        elif md == "clip":
            a = _uf.clip(a, 0, d - 1)
        elif md == "raise":
            if not is_tracer(a):
                h = _fshape.to_host(a)
                if h.size and (h.min() < 0 or h.max() >= d):
                    raise ArgumentError(f"functx.numpy.ravel_multi_index: invalid entry in "
                                        f"coordinates array {i} (values must lie in [0, {d}))"
                                        f"; use mode='wrap' or 'clip'.")
            a = _uf.clip(a, 0, d - 1)
        else:
            raise ArgumentError(f"functx.numpy.ravel_multi_index: mode must be 'raise', "
                                f"'wrap' or 'clip', not {md!r}.")
        fixed.append(a)
    axes = range(len(dims)) if order == "C" else reversed(range(len(dims)))
    out = np.zeros((), np.int64)
    for ax in axes:
        out = _uf.add(_uf.multiply(out, np.asarray(dims[ax], np.int64)), fixed[ax])
    return out


def unravel_index(indices: Any, shape: Any) -> tuple:
    """The multi-indices (one array per axis) of the flat ``indices`` in an array of
    ``shape`` (C order); negative indices count from the end.

    Raises:
        ArgumentError: a concrete index is out of range.

    Example:
        >>> fnp.unravel_index(np.array([2, 3]), (2, 3))
        (array([0, 1]), array([2, 0]))
    """
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    idx = _int_array("unravel_index", indices)
    total = int(np.prod(shape, dtype=np.int64))
    if not is_tracer(idx):
        h = _fshape.to_host(idx)
        if h.size and (h.min() < -total or h.max() >= total):
            bad = int(h.max()) if h.max() >= total else int(h.min())
            raise ArgumentError(f"functx.numpy.unravel_index: index {bad} is out of bounds "
                                f"for an array of size {total} (shape {shape}).")
    idx = _uf.where(_uf.less(idx, 0), _uf.add(idx, total), idx)
    idx = _uf.clip(idx, 0, builtins.max(total - 1, 0))
    out = []
    for d in reversed(shape):
        out.append(_uf.mod(idx, builtins.max(d, 1)))
        idx = _uf.floor_divide(idx, builtins.max(d, 1))
    return tuple(reversed(out))


def meshgrid(*xi: Any, copy: builtins.bool = True, sparse: builtins.bool = False,
             indexing: str = "xy") -> tuple:
    """Coordinate grids from 1-D coordinate arrays (``indexing='xy'``: the first two
    outputs' axes swapped, as for plots; ``'ij'``: matrix indexing). ``sparse`` keeps the
    size-1 axes instead of broadcasting. Returns a tuple, as NumPy 2.

    Raises:
        ArgumentError: ``indexing`` is not ``'xy'`` or ``'ij'``.

    Example:
        >>> [g.shape for g in fnp.meshgrid(np.arange(3), np.arange(2))]
        [(2, 3), (2, 3)]
    """
    if indexing not in ("xy", "ij"):
        raise ArgumentError(f"functx.numpy.meshgrid: indexing must be 'xy' or 'ij', not "
                            f"{indexing!r}.")
    xs = [_fshape.ravel(_fshape.as_array(x)) for x in xi]
    n = len(xs)
    out = []
    for i, x in enumerate(xs):
        shape = [1] * n
        shape[i] = x.shape[0]
        if indexing == "xy" and n > 1 and i < 2:
            shape[0], shape[1] = shape[1], shape[0]
        out.append(_fshape.reshape(x, tuple(shape)))
    if not sparse and out:
        full = np.broadcast_shapes(*(tuple(o.shape) for o in out))
        out = [_fshape.broadcast_to(o, full) for o in out]
    return tuple(out)


# ----------------------------------------------------------------------------------------
# index tricks


class _Grid:
    """``mgrid``/``ogrid``: NumPy's dense/open grids from static slices."""

    def __init__(self, grid: Any, name: str) -> None:
        self._grid, self._name = grid, name

    def __getitem__(self, key: Any) -> Any:
        out = self._grid[key]
        return [asarray(o) for o in out] if isinstance(out, (list, tuple)) else asarray(out)

    def __repr__(self) -> str:
        return f"functx.numpy.{self._name}"


mgrid = _Grid(np.mgrid, "mgrid")
ogrid = _Grid(np.ogrid, "ogrid")
s_ = np.s_
index_exp = np.index_exp


class _Concatenator:
    """``r_``/``c_``: arrays, scalars and slices joined along an axis (NumPy's index trick)."""

    def __init__(self, name: str, axis: int, ndmin: int, trans1d: int) -> None:
        self._name, self._axis, self._ndmin, self._trans1d = name, axis, ndmin, trans1d

    def __repr__(self) -> str:
        return f"functx.numpy.{self._name}"

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d = self._axis, self._ndmin, self._trans1d
        parts = []
        for i, item in enumerate(items):
            if isinstance(item, str):
                if i != 0:
                    raise ArgumentError(f"functx.numpy.{self._name}: a string directive must "
                                        f"come first, got {item!r} at position {i}.")
                try:
                    vals = [int(v) for v in item.split(",")]
                except ValueError:
                    raise ArgumentError(f"functx.numpy.{self._name}: unknown string directive "
                                        f"{item!r} (the matrix directives are not "
                                        f"supported).") from None
                axis = vals[0]
                if len(vals) > 1:
                    ndmin = vals[1]
                if len(vals) > 2:
                    trans1d = vals[2]
                continue
            if isinstance(item, builtins.slice):
                start = 0 if item.start is None else item.start
                step = 1 if item.step is None else item.step
                if isinstance(step, complex):
                    a = _cr.linspace(start, item.stop, int(abs(step)))
                else:
                    a = _cr.arange(start, item.stop, step)
                a = self._nd(a, ndmin, trans1d)
            else:
                a = _fshape.as_array(item)
                a = self._nd(a, ndmin, trans1d) if ndmin > len(a.shape) else a
                if len(a.shape) == 0:
                    a = _fshape.reshape(a, (1,))
            parts.append(a)
        if not parts:
            return asarray(np.zeros(0))
        dt = result_type(*parts)
        return _fshape.concatenate([astype(p, dt) for p in parts], axis=axis)

    @staticmethod
    def _nd(a: Any, ndmin: int, trans1d: int) -> Any:
        """``a`` with at least ``ndmin`` axes; its own axes placed where ``trans1d`` says."""
        k = len(a.shape)
        if ndmin <= k:
            return a
        b = _fshape.reshape(a, tuple(a.shape) + (1,) * (ndmin - k))
        if trans1d != -1:
            t = trans1d if trans1d >= 0 else ndmin + trans1d
            perm = list(range(k, ndmin))
            perm = perm[:t] + list(range(k)) + perm[t:]
            b = _fshape.transpose(b, perm)
        return b


r_ = _Concatenator("r_", 0, 1, -1)
c_ = _Concatenator("c_", -1, 2, 0)


# ----------------------------------------------------------------------------------------
# spaced values and windows


def logspace(start: Any, stop: Any, num: int = 50, endpoint: builtins.bool = True,
             base: Any = 10.0, dtype: Any = None, axis: int = 0) -> Any:
    """``base ** linspace(start, stop, num)`` (differentiable in ``start``, ``stop`` and
    ``base``).

    Example:
        >>> fnp.logspace(0.0, 2.0, 3)
        array([  1.,  10., 100.])
    """
    y = _cr.linspace(start, stop, num, endpoint=endpoint, axis=axis)
    b = base if isinstance(base, (int, float)) else _fshape.as_array(base)
    if len(getattr(b, "shape", ())):
        b = _fshape.expand_dims(b, axis)
    out = _uf.power(b, y)
    return astype(out, dtype) if dtype is not None else out


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: builtins.bool = True,
              dtype: Any = None, axis: int = 0) -> Any:
    """``num`` values from ``start`` to ``stop`` evenly spaced on a log scale (both of one
    sign, neither zero; the end points are exact).

    Raises:
        ArgumentError: a concrete ``start`` or ``stop`` is zero.

    Example:
        >>> fnp.geomspace(1.0, 1000.0, 4)
        array([   1.,   10.,  100., 1000.])
    """
    s, e = _fshape.as_array(start), _fshape.as_array(stop)
    for v in (s, e):
        if not is_tracer(v) and np.any(_fshape.to_host(v) == 0):
            raise ArgumentError("functx.numpy.geomspace: geometric sequence cannot include "
                                "zero; start and stop must be nonzero.")
    dt = result_type(s, e, 1.0)
    s, e = astype(s, dt), astype(e, dt)
    if dt.kind == "c":
        out = _uf.multiply(_fshape.expand_dims(s, axis) if len(s.shape) else s, _uf.power(
            _fshape.expand_dims(_uf.true_divide(e, s), axis) if len(s.shape) or len(e.shape)
            else _uf.true_divide(e, s),
            _cr.linspace(0.0, 1.0, num, endpoint=endpoint, axis=axis)))
    else:
        sign = _uf.sign(s)
        ls = _um.log10(_uf.absolute(s))
        le = _um.log10(_uf.absolute(e))
        out = _uf.multiply(_fshape.expand_dims(sign, axis) if len(sign.shape) else sign,
                           logspace(ls, le, num, endpoint=endpoint, axis=axis))
        if num > 0:  # exact end points, as NumPy
            ax = _fshape.norm_axis(axis, len(out.shape), "geomspace")
            first = _fshape.expand_dims(s, ax) if len(s.shape) else _fshape.broadcast_to(
                s, tuple(1 if i == ax else d for i, d in enumerate(out.shape)))
            first = _fshape.broadcast_to(first, tuple(1 if i == ax else d
                                                      for i, d in enumerate(out.shape)))
            pieces = [first, _fshape.slice_axis(out, 1, out.shape[ax], ax)]
            out = _fshape.concatenate(pieces, axis=ax)
            if endpoint and num > 1:
                last = _fshape.broadcast_to(_fshape.expand_dims(e, ax) if len(e.shape) else e,
                                            tuple(first.shape))
                out = _fshape.concatenate([_fshape.slice_axis(out, 0, num - 1, ax), last],
                                          axis=ax)
    return astype(out, dtype) if dtype is not None else out


def _window(name: str, M: Any) -> int:
    m = int(_fshape.static_ints(M, "M"))
    return m


def bartlett(M: int) -> Any:
    """The Bartlett (triangular) window of ``M`` points (float64).

    Example:
        >>> fnp.bartlett(5)
        array([0. , 0.5, 1. , 0.5, 0. ])
    """
    return asarray(np.bartlett(_window("bartlett", M)))


def blackman(M: int) -> Any:
    """The Blackman window of ``M`` points (float64).

    Example:
        >>> fnp.blackman(3).round(6)
        array([-0.,  1., -0.])
    """
    return asarray(np.blackman(_window("blackman", M)))


def hamming(M: int) -> Any:
    """The Hamming window of ``M`` points (float64).

    Example:
        >>> fnp.hamming(3)
        array([0.08, 1.  , 0.08])
    """
    return asarray(np.hamming(_window("hamming", M)))


def hanning(M: int) -> Any:
    """The Hann window of ``M`` points (float64).

    Example:
        >>> fnp.hanning(3)
        array([0., 1., 0.])
    """
    return asarray(np.hanning(_window("hanning", M)))


def _i0_series(x: Any, terms: int = 120) -> Any:
    """The modified Bessel function I0 by its power series (for kaiser's moderate
    arguments; ``functx.scipy.special.i0`` is the general one)."""
    q = _uf.multiply(_uf.multiply(x, x), 0.25)
    term = _uf.add(_uf.multiply(q, 0.0), 1.0)
    total = term
    for k in range(1, terms):
        term = _uf.true_divide(_uf.multiply(term, q), float(k * k))
        total = _uf.add(total, term)
    return total


def kaiser(M: int, beta: Any) -> Any:
    """The Kaiser window of ``M`` points with shape parameter ``beta`` (float64;
    differentiable in a traced ``beta``, via I0's power series, accurate for
    ``|beta| < 100``).

    Example:
        >>> fnp.kaiser(3, 0.0)
        array([1., 1., 1.])
    """
    m = _window("kaiser", M)
    b = _fshape.as_array(beta)
    if not is_tracer(b):
        return asarray(np.kaiser(m, float(_fshape.to_host(b))))
    if m <= 0:
        return asarray(np.zeros(0))
    if m == 1:
        return asarray(np.ones(1))
    b = astype(b, np.float64) if not is_inexact(b.dtype) else b
    n = np.arange(m, dtype=np.float64)
    r = np.sqrt(np.clip(1 - (2 * n / (m - 1) - 1) ** 2, 0, None))
    return _uf.true_divide(_i0_series(_uf.multiply(b, _fshape.on_device_of(b, r))),
                           _i0_series(b))

