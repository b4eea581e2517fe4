"""Counting and membership: bincount, digitize, histogram, histogram_bin_edges,
histogram2d, histogramdd, isin, and the set operations intersect1d, union1d, setdiff1d,
setxor1d.

``bincount`` (with ``length=``), ``digitize``, ``isin`` and the histograms with a static
number of bins are composites (a branchless binary search and a scatter-add), so they work
under ``jit`` and ``vmap``; the weights of ``bincount`` and of the histograms get
gradients. What needs values to decide a shape needs concrete values: ``bincount``
without ``length``, histograms with string ``bins`` (``'auto'``...), and the set
operations (whose results are gathered from the inputs, so their values are
differentiable) unless ``size=`` is given... and even then the positions are found on the
host, so the set operations always need concrete inputs.

Differences from NumPy:
    * ``bincount`` with ``weights`` returns the weights' (inexact) dtype, as
      ``jax.numpy`` (NumPy always returns float64). Under a trace, negative entries are
      dropped (NumPy raises; that check needs values).
    * The set operations take ``size``/``fill_value`` (as ``jax.numpy``): the result is
      cut or padded to ``size``, padded with ``fill_value`` (default: the smallest value
      for ``union1d``/``intersect1d``/``setxor1d``, 0 for ``setdiff1d``).
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from functx.errors import ArgumentError, ShapeError
from functx.numpy import _extras as _ex
from functx.numpy import _reductions as _r
from functx.numpy import _shape as _fshape
from functx.numpy._devices import filled
from functx.numpy import _ufuncs as _uf
from functx.numpy._promotion import asarray, astype, is_inexact, is_tracer, result_type
from functx.primitives import indexing as _ix

__all__ = [
    "bincount", "digitize", "histogram", "histogram_bin_edges", "histogram2d",
    "histogramdd", "isin", "intersect1d", "union1d", "setdiff1d", "setxor1d",
]


def _i64(v: int) -> np.ndarray:
    return np.asarray(v, np.int64)


def bincount(x: Any, weights: Any = None, minlength: int = 0, *,
             length: int | None = None) -> Any:
    """The number of occurrences of each value in the non-negative integer array ``x``
    (the sum of ``weights`` at each value when given). ``length`` fixes the result's length
    (values at or beyond it are dropped), which ``jit``/``vmap`` need; otherwise it is
    ``max(max(x) + 1, minlength)`` and needs concrete ``x``.

    Raises:
        ShapeError: ``x`` is not 1-D, or ``weights`` has another shape.
        ArgumentError: ``x`` holds negative values (concrete ``x``), ``minlength`` is
            negative, or ``x`` is not of an integer dtype.

    Example:
        >>> fnp.bincount(np.array([0, 1, 1, 3]))
        array([1, 2, 0, 1])
    """
    x = _fshape.as_array(x)
    if len(x.shape) != 1:
        raise ShapeError(f"functx.numpy.bincount: x must be a 1-D array, got shape "
                         f"{tuple(x.shape)}.")
    if x.dtype.kind not in "biu":
        raise ArgumentError(f"functx.numpy.bincount: x must hold non-negative integers, got "
                            f"dtype {x.dtype}; cast it with astype first.")
    if minlength is None or int(minlength) < 0:
        raise ArgumentError(f"functx.numpy.bincount: minlength must be a non-negative "
                            f"integer, got {minlength!r}.")
    if not is_tracer(x) and x.shape[0]:
        lo = int(np.min(_fshape.to_host(x)))
        if lo < 0:
            raise ArgumentError(f"functx.numpy.bincount: x must be non-negative, but it holds "
                                f"{lo}.")
    if length is None:
        value = _fshape.concrete_value(x, "functx.numpy.bincount without length=",
                                       "the result's length is max(x) + 1; pass length=")
        length = builtins.max(int(value.max()) + 1 if value.size else 0, int(minlength))
    length = int(length)
    x = astype(x, np.int64)
    valid = _uf.logical_and(_uf.greater_equal(x, 0), _uf.less(x, length))
    if weights is None:
        w = astype(valid, np.int64)
        dt = np.dtype(np.int64)
    else:
        w = _fshape.as_array(weights)
        if tuple(w.shape) != tuple(x.shape):
            raise ShapeError(f"functx.numpy.bincount: weights must have x's shape "
                             f"{tuple(x.shape)}, got {tuple(w.shape)}.")
        dt = w.dtype if is_inexact(w.dtype) else np.dtype(np.float64)
        w = _uf.where(valid, astype(w, dt), np.zeros((), dt))
    idx = _uf.where(valid, x, _i64(0))
    zeros = filled(x, 0, dt, (length,))
    return _ix.scatter_add(zeros, idx, astype(w, dt), axis=0)


def digitize(x: Any, bins: Any, right: builtins.bool = False, *, method: Any = None) -> Any:
    """The index of the bin of ``bins`` (monotonic, increasing or decreasing) that each
    value of ``x`` falls in (``bins[i-1] <= x < bins[i]`` for increasing bins; ``right``
    puts the equality on the other side), as ``numpy.digitize``.

    Raises:
        ShapeError: ``bins`` is not 1-D.

    Example:
        >>> fnp.digitize(np.array([0.5, 1.0, 2.5]), np.array([0.0, 1.0, 2.0]))
        array([1, 2, 3])
    """
    x, bins = _fshape.as_array(x), _fshape.as_array(bins)
    if len(bins.shape) != 1:
        raise ShapeError(f"functx.numpy.digitize: bins must be a 1-D array, got shape "
                         f"{tuple(bins.shape)}.")
    n = bins.shape[0]
    if n == 0:
        return filled(x, 0, np.int64, tuple(x.shape))
    dt = result_type(x, bins)
    x, bins = astype(x, dt), astype(bins, dt)
    inc = _ex.sorted_position(bins, x, "left" if right else "right")
    rev = _fshape.flip(bins, 0)
    dec = _uf.subtract(_i64(n), _ex.sorted_position(rev, x, "left" if right else "right"))
    return _uf.where(_uf.greater_equal(bins[-1], bins[0]), inc, dec)


def _range_of(name: str, a: Any, range: Any) -> tuple[Any, Any]:
    """The (first, last) edges: ``range`` or the data's min and max (widened by 0.5 on
    each side when equal), in the edges' dtype."""
    dt = a.dtype if is_inexact(a.dtype) else np.dtype(np.float64)
    if range is None and not is_tracer(a) and _fshape.num_elements(a):
        h = _fshape.to_host(a)
        if not (np.isfinite(h.min()) and np.isfinite(h.max())):
            raise ArgumentError(f"functx.numpy.{name}: the autodetected range of "
                                f"[{h.min()}, {h.max()}] is not finite; pass range= or drop "
                                f"the non-finite values.")
    if range is not None:
        lo, hi = (astype(_fshape.as_array(v), dt) for v in range)
        if not (is_tracer(lo) or is_tracer(hi)) and not float(lo) <= float(hi):
            raise ArgumentError(f"functx.numpy.{name}: max must be larger than min in "
                                f"range, got {tuple(range)}.")
    elif _fshape.num_elements(a) == 0:
        lo, hi = np.zeros((), dt), np.ones((), dt)
    else:
        lo, hi = astype(_r.min(a), dt), astype(_r.max(a), dt)
    same = _uf.equal(lo, hi)
    return (_uf.where(same, _uf.subtract(lo, 0.5), lo),
            _uf.where(same, _uf.add(hi, 0.5), hi))


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None,
                        weights: Any = None) -> Any:
    """The bin edges ``histogram`` uses: ``bins + 1`` equal-width edges over ``range`` (or
    the data's range), the given edges, or a NumPy estimator name (``'auto'``, ``'fd'``...,
    which needs concrete values).

    Example:
        >>> fnp.histogram_bin_edges(np.array([0.0, 1.0, 2.0]), bins=2)
        array([0., 1., 2.])
    """
    a = _fshape.ravel(_fshape.as_array(a))
    if isinstance(bins, str):
        value = _fshape.concrete_value(a, f"functx.numpy.histogram_bin_edges(bins={bins!r})",
                                       "the estimator picks the number of bins from the data")
        w = None if weights is None else _fshape.concrete_value(weights, "weights", "")
        return asarray(np.histogram_bin_edges(value, bins, range, w))
    b = _fshape.as_array(bins)
    if len(b.shape) == 1:
        if b.shape[0] < 1:
            raise ArgumentError("functx.numpy.histogram_bin_edges: bins must have at least "
                                "one edge.")
        return astype(b, result_type(b, np.float16)) if not is_inexact(b.dtype) else b
    if len(b.shape) != 0:
        raise ShapeError(f"functx.numpy.histogram_bin_edges: bins must be an integer or a "
                         f"1-D array of edges, got shape {tuple(b.shape)}.")
    n = int(_fshape.static_ints(bins, "bins"))
    if n < 1:
        raise ArgumentError(f"functx.numpy.histogram_bin_edges: bins must be positive, got "
                            f"{n}.")
    lo, hi = _range_of("histogram_bin_edges", a, range)
    step = _uf.true_divide(_uf.subtract(hi, lo), np.asarray(n, lo.dtype))
    inner = _uf.add(_uf.multiply(_fshape.on_device_of(step, np.arange(n).astype(lo.dtype)),
                                 step), lo)  # as linspace
    return _fshape.concatenate([inner, _fshape.reshape(hi, (1,))])


def _bin_index(values: Any, edges: Any) -> tuple[Any, Any]:
    """Each value's bin among ``edges`` (the last bin closed) and whether it is inside."""
    nb = edges.shape[0] - 1
    i = _uf.subtract(_ex.sorted_position(edges, values, "right"), _i64(1))
    i = _uf.where(_uf.equal(values, edges[-1]), _i64(nb - 1), i)
    inside = _uf.logical_and(_uf.greater_equal(i, 0), _uf.less(i, nb))
    inside = _uf.logical_and(inside, _uf.logical_not(_uf.isnan(values))
                             if is_inexact(values.dtype) else inside)
    return _uf.where(inside, i, _i64(0)), inside


def histogram(a: Any, bins: Any = 10, range: Any = None, weights: Any = None,
              density: builtins.bool | None = None) -> tuple[Any, Any]:
    """The histogram of ``a`` (flattened): counts (or summed ``weights``) per bin, and the
    ``bins + 1`` edges. All bins but the last are half-open ``[lo, hi)``; values outside
    the edges are not counted. ``density`` normalises to a probability density.

    Raises:
        ShapeError: ``weights`` has another shape than ``a``.
        ArgumentError: invalid ``bins`` or ``range``.

    Example:
        >>> fnp.histogram(np.array([1, 2, 2, 3, 10]), bins=3)
        (array([4, 0, 1]), array([ 1.,  4.,  7., 10.]))
    """
    a = _fshape.as_array(a)
    edges = histogram_bin_edges(a, bins, range, weights)
    flat = _fshape.ravel(a)
    counts = _histogram_counts("histogram", [flat], [edges], weights, a.shape)
    if density:
        widths = _uf.subtract(edges[1:], edges[:-1])
        counts = _uf.true_divide(_uf.true_divide(counts, widths), _r.sum(counts))
    return counts, edges


def _histogram_counts(name: str, columns: Sequence[Any], edges: Sequence[Any],
                      weights: Any, shape: tuple) -> Any:
    """Counts over the bins of several coordinates (one edges array per column)."""
    nbins = [e.shape[0] - 1 for e in edges]
    if 0 in nbins:  # a single edge: no bins
        dt = np.dtype(np.int64) if weights is None else _fshape.as_array(weights).dtype
        return filled(columns[0], 0, dt, tuple(nbins))
    flat_idx = filled(columns[0], 0, np.int64, tuple(columns[0].shape))
    inside = None
    for col, e, nb in zip(columns, edges, nbins):
        i, ok = _bin_index(astype(col, result_type(col, e)), e)
        flat_idx = _uf.add(_uf.multiply(flat_idx, _i64(nb)), i)
        inside = ok if inside is None else _uf.logical_and(inside, ok)
    total = int(np.prod(nbins))
    if weights is not None:
        w = _fshape.as_array(weights)
        if tuple(w.shape) != tuple(shape):
            raise ShapeError(f"functx.numpy.{name}: weights must have the shape of the data "
                             f"{tuple(shape)}, got {tuple(w.shape)}.")
        w = _fshape.ravel(w)
        dt = w.dtype
        w = _uf.where(inside, w, np.zeros((), dt))
    else:
        dt = np.dtype(np.int64)
        w = astype(inside, dt)
    zeros = filled(columns[0], 0, dt, (total,))
    return _fshape.reshape(_ix.scatter_add(zeros, flat_idx, w, axis=0), tuple(nbins))


def histogramdd(sample: Any, bins: Any = 10, range: Any = None, weights: Any = None,
                density: builtins.bool | None = None) -> tuple[Any, list]:
    """The D-dimensional histogram of ``N`` points ``sample`` (shape ``(N, D)``): counts
    over a grid of bins, and one edges array per dimension. ``bins`` is one count or edges
    array for all dimensions or one per dimension; ``range`` one (min, max) (or None) per
    dimension.

    Raises:
        ShapeError: ``sample`` is not 2-D (a 1-D sample is one dimension), or ``bins`` /
            ``range`` / ``weights`` do not match it.

    Example:
        >>> h, edges = fnp.histogramdd(np.array([[0.0, 0.0], [1.0, 1.0]]), bins=2)
        >>> h
        array([[1., 0.],
               [0., 1.]])
    """
    s = _fshape.as_array(sample)
    if len(s.shape) == 1:
        s = _fshape.reshape(s, (s.shape[0], 1))
    if len(s.shape) != 2:
        raise ShapeError(f"functx.numpy.histogramdd: sample must be an (N, D) array, got "
                         f"shape {tuple(s.shape)}.")
    d = s.shape[1]
    scalar = isinstance(bins, (int, np.integer, str)) or (
        not isinstance(bins, (list, tuple)) and len(_fshape.as_array(bins).shape) == 0)
    bins_list = [bins] * d if scalar else list(bins)
    if len(bins_list) != d:
        raise ShapeError(f"functx.numpy.histogramdd: bins has {len(bins_list)} entries for "
                         f"{d} dimensions.")
    ranges = [None] * d if range is None else list(range)
    if len(ranges) != d:
        raise ShapeError(f"functx.numpy.histogramdd: range has {len(ranges)} entries for "
                         f"{d} dimensions.")
    cols = [s[:, j] for j in builtins.range(d)]
    edges = [histogram_bin_edges(c, b, r) for c, b, r in zip(cols, bins_list, ranges)]
    counts = _histogram_counts("histogramdd", cols, edges, weights, (s.shape[0],))
    if counts.dtype.kind in "iu":  # NumPy's histogramdd counts in float64
        counts = astype(counts, np.float64)
    if density:
        total = _r.sum(counts)
        for j, e in enumerate(edges):
            shape = [1] * d
            shape[j] = e.shape[0] - 1
            counts = _uf.true_divide(counts, _fshape.reshape(_uf.subtract(e[1:], e[:-1]),
                                                            tuple(shape)))
        counts = _uf.true_divide(counts, total)
    return counts, edges


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Any = None, weights: Any = None,
                density: builtins.bool | None = None) -> tuple[Any, Any, Any]:
    """The 2-D histogram of points ``(x, y)``: counts, x edges, y edges (see
    :func:`histogramdd`).

    Example:
        >>> h, xe, ye = fnp.histogram2d(np.array([0.0, 1.0]), np.array([0.0, 1.0]), bins=2)
        >>> h
        array([[1., 0.],
               [0., 1.]])
    """
    x, y = _fshape.as_array(x), _fshape.as_array(y)
    if isinstance(bins, (list, tuple)) and len(bins) == 2:
        b = list(bins)
    else:
        b = _fshape.as_array(bins)
        b = [bins, bins] if len(b.shape) <= 1 else list(bins)
    h, edges = histogramdd(_fshape.stack([x, y], axis=1), b, range, weights, density)
    return h, edges[0], edges[1]


# ----------------------------------------------------------------------------------------
# membership and sets


def isin(element: Any, test_elements: Any, assume_unique: builtins.bool = False,
         invert: builtins.bool = False, *, method: str = "auto") -> Any:
    """Elementwise: whether each value of ``element`` is among ``test_elements`` (NaN is
    never found), negated with ``invert``.

    Concrete ``test_elements`` are sorted once on the host and searched (``n log m``);
    traced ones are compared with every element (``n * m``).

    Example:
        >>> fnp.isin(np.array([1, 2, 3]), [2, 5])
        array([False,  True, False])
    """
    e = _fshape.as_array(element)
    t = _fshape.ravel(_fshape.as_array(test_elements))
    dt = result_type(e, t)
    e, t = astype(e, dt), astype(t, dt)
    if t.shape[0] == 0:
        found = filled(e, False, np.bool_, tuple(e.shape))
    elif not is_tracer(t) and method != "compare_all" and dt.kind != "c":
        sorted_t = _fshape.on_device_of(e, np.sort(_fshape.to_host(t)))
        pos = _ex.sorted_position(sorted_t, e, "left")
        hit = _ix.gather(sorted_t, _uf.minimum(pos, _i64(t.shape[0] - 1)), axis=0)
        found = _uf.equal(hit, e)
    else:
        found = _r.any(_uf.equal(_fshape.expand_dims(e, -1), t), axis=-1)
    return _uf.logical_not(found) if invert else found


def _host(name: str, a: Any) -> np.ndarray:
    return _fshape.concrete_value(a, f"functx.numpy.{name}",
                                  "the result's length depends on the values")


def _gathered(a: Any, positions: np.ndarray, size: int | None, fill: Any) -> Any:
    """``a[positions]`` (a differentiable gather), cut or padded to ``size``."""
    positions = positions.astype(np.int64)
    out = _fshape.take_flat(a, positions)
    if size is None:
        return out
    size = int(size)
    if positions.shape[0] >= size:
        return out[:size]
    if fill is None:
        fill = out[0] if positions.shape[0] else np.zeros((), a.dtype)
    pad = _fshape.broadcast_to(astype(_fshape.as_array(fill), a.dtype),
                               (size - positions.shape[0],))
    return _fshape.concatenate([out, pad])


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values found in either array (flattened); needs concrete values.

    Example:
        >>> fnp.union1d(np.array([3, 1]), np.array([2, 1]))
        array([1, 2, 3])
    """
    a = _fshape.concatenate([_fshape.ravel(_fshape.as_array(ar1)),
                             _fshape.ravel(_fshape.as_array(ar2))])
    _, idx = np.unique(_host("union1d", a), return_index=True)
    return _gathered(a, idx, size, fill_value)


def intersect1d(ar1: Any, ar2: Any, assume_unique: builtins.bool = False,
                return_indices: builtins.bool = False, *, size: int | None = None,
                fill_value: Any = None) -> Any:
    """The sorted unique values found in both arrays (flattened); with ``return_indices``
    also the positions of the first occurrences in each. Needs concrete values.

    Example:
        >>> fnp.intersect1d(np.array([3, 1, 2]), np.array([2, 3, 5]))
        array([2, 3])
    """
    a1, a2 = _fshape.ravel(_fshape.as_array(ar1)), _fshape.ravel(_fshape.as_array(ar2))
    dt = result_type(a1, a2)
    a1, a2 = astype(a1, dt), astype(a2, dt)
    _, i1, i2 = np.intersect1d(_host("intersect1d", a1), _host("intersect1d", a2),
                               assume_unique=assume_unique, return_indices=True)
    values = _gathered(a1, i1, size, fill_value)
    if not return_indices:
        return values

    def pad_idx(i: np.ndarray) -> Any:
        i = i.astype(np.int64)
        if size is not None:
            i = np.concatenate([i, np.zeros(builtins.max(int(size) - i.shape[0], 0),
                                            np.int64)])[:int(size)]
        return asarray(i)
    return values, pad_idx(i1), pad_idx(i2)


def setdiff1d(ar1: Any, ar2: Any, assume_unique: builtins.bool = False, *,
              size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values of ``ar1`` not in ``ar2``; needs concrete values.

    Example:
        >>> fnp.setdiff1d(np.array([3, 1, 2, 5]), np.array([2, 5]))
        array([1, 3])
    """
    a1 = _fshape.ravel(_fshape.as_array(ar1))
    h1 = _host("setdiff1d", a1)
    h2 = _host("setdiff1d", ar2).ravel()
    _, idx = np.unique(h1, return_index=True)
    keep = idx[~np.isin(h1[idx], h2)]
    return _gathered(a1, keep, size, 0 if fill_value is None else fill_value)


def setxor1d(ar1: Any, ar2: Any, assume_unique: builtins.bool = False, *,
             size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values found in exactly one of the arrays; needs concrete values.

    Example:
        >>> fnp.setxor1d(np.array([1, 2, 3]), np.array([2, 4]))
        array([1, 3, 4])
    """
    a1, a2 = _fshape.ravel(_fshape.as_array(ar1)), _fshape.ravel(_fshape.as_array(ar2))
    dt = result_type(a1, a2)
    a = _fshape.concatenate([astype(a1, dt), astype(a2, dt)])
    h1, h2 = _host("setxor1d", a1), _host("setxor1d", a2)
    want = np.setxor1d(h1, h2, assume_unique=assume_unique)
    h = np.concatenate([h1, h2]).astype(dt)
    _, idx = np.unique(h, return_index=True)
    keep = idx[np.isin(h[idx], want)]
    return _gathered(a, keep, size, fill_value)

