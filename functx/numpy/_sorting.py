"""Sorting, searching and order statistics: sort, argsort, lexsort, partition, argpartition,
searchsorted, sort_complex, median/quantile/percentile and their nan* versions, unique and
the Array API's unique_values/unique_counts/unique_inverse/unique_all.

Every sort is stable and puts NaN last, as NumPy's; ``descending=True`` (JAX's and NumPy
2.x's keyword) reverses the order, NaN first, ties still in index order for ``argsort``.
Gradients follow the permutation (``functx.primitives.sort``): a tied value's cotangent
goes to the element that the stable sort put there, as in JAX. Order statistics are
differentiable in ``a`` (and in ``q`` for ``method="linear"``).

Differences from NumPy:
    * ``kind=`` is accepted and ignored (every sort is stable); ``order=`` (structured
      arrays) raises TypeError.
    * ``partition``/``argpartition`` take one int ``kth``. ``partition`` returns the
      ``kth + 1`` smallest values in ascending order, then the others in descending order,
      and ``argpartition`` the indices of the ``kth + 1`` smallest in sorted order, then the
      others in index order (as ``jax.numpy``; NumPy leaves both orders unspecified).
    * ``quantile``/``percentile``/``median`` support the methods ``linear`` (default),
      ``lower``, ``higher``, ``nearest`` (half to even, as NumPy) and ``midpoint``.
    * ``unique`` without ``size=`` needs concrete values (its length depends on them), so
      it runs eagerly and under ``grad``; with ``size=`` (and ``fill_value=``) it works under
      ``jit`` and ``vmap`` as ``jax.numpy.unique`` does, with or without ``axis=``.
    * Index results are int64.
"""
from __future__ import annotations

import builtins
import collections
import math
import operator
from typing import Any

import numpy as np

from functx.numpy._axes import norm_axes, norm_axis
from functx.numpy._promotion import asarray, astype, check_no_out, is_tracer, result_type
from functx.numpy._shape import as_array, concrete_value, moveaxis, on_device_of, ravel
from functx.numpy._ufunc_base import promote_inexact
from functx.primitives import elementwise as _ew
from functx.primitives import indexing as _ix
from functx.primitives import reduction as _red
from functx.primitives import shape as _p
from functx.primitives import sort as _sort

__all__ = [
    "sort", "argsort", "lexsort", "partition", "argpartition", "searchsorted", "sort_complex",
    "median", "quantile", "percentile", "nanmedian", "nanquantile", "nanpercentile",
    "unique", "unique_values", "unique_counts", "unique_inverse", "unique_all",
]

_I64 = np.dtype(np.int64)


def _operand(name: str, a: Any, axis: Any) -> tuple[Any, int]:
    """``a`` as an array (flattened when ``axis`` is None) and ``axis`` normalised."""
    a = as_array(a)
    if axis is None:
        return ravel(a), 0
    if len(a.shape) == 0:
        raise ValueError(f"functx.numpy.{name}: a 0-d array has no axis {axis} to sort along; "
                         "pass axis=None or an array with at least one axis.")
    return a, norm_axis(axis, len(a.shape), name)


def _check_sort_args(name: str, order: Any) -> None:
    if order is not None:
        raise TypeError(f"functx.numpy.{name}: order= (fields of structured arrays) is not "
                        "supported; sort by each field's array with lexsort instead.")


def _iota(like: Any, n: int) -> Any:
    return on_device_of(like, np.arange(n, dtype=np.int64))


def _int(like: Any, v: int) -> Any:
    return _p.constant(like, v, (), _I64)


# ----------------------------------------------------------------------------------------
# sort, argsort, lexsort, partition, argpartition, sort_complex


def sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
         stable: builtins.bool = True, descending: builtins.bool = False) -> Any:
    """A sorted copy of ``a`` along ``axis`` (None: of the flattened array); NaN last.

    Args:
        stable, kind: accepted for compatibility; every sort is stable.
        descending: largest first (NaN first).

    Raises:
        TypeError: ``order=`` is given. ValueError/AxisError: a bad axis.

    Example:
        >>> fnp.sort(np.array([3.0, np.nan, 1.0]))
        array([ 1.,  3., nan])
    """
    _check_sort_args("sort", order)
    x, ax = _operand("sort", a, axis)
    out = _sort.sort([x], dimension=ax)[0]
    return _p.rev(out, (ax,)) if descending else out


def argsort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *,
            stable: builtins.bool = True, descending: builtins.bool = False) -> Any:
    """The int64 indices that sort ``a`` along ``axis`` (stably; ties keep index order, also
    with ``descending=True``).

    Example:
        >>> fnp.argsort(np.array([2.0, 1.0, 2.0]), descending=True)
        array([0, 2, 1])
    """
    _check_sort_args("argsort", order)
    x, ax = _operand("argsort", a, axis)
    if not descending:
        return _sort.sort([x], dimension=ax)[-1]
    n = x.shape[ax]
    perm = _sort.sort([_p.rev(x, (ax,))], dimension=ax)[-1]
    return _p.rev(_ew.sub(_int(perm, n - 1), perm), (ax,))


def lexsort(keys: Any, axis: int = -1) -> Any:
    """The int64 indices that sort by several keys: the LAST key is the primary one (as in
    NumPy); ``keys`` is a sequence of arrays of one shape, or a 2-d array of keys by row.

    Raises:
        TypeError: no keys. ValueError: keys of different shapes.

    Example:
        >>> fnp.lexsort([np.array([1, 0, 2]), np.array([0, 0, 1])])
        array([1, 0, 2])
    """
    if is_tracer(keys) or isinstance(keys, np.ndarray) or hasattr(keys, "__cuda_array_interface__"):
        keys = [keys[i] for i in range(keys.shape[0])]
    keys = [as_array(k) for k in keys]
    if not keys:
        raise TypeError("functx.numpy.lexsort needs at least one key; got an empty sequence.")
    if len({tuple(k.shape) for k in keys}) > 1:
        raise ValueError(f"functx.numpy.lexsort needs keys of one shape but got shapes "
                         f"{[tuple(k.shape) for k in keys]}.")
    if len(keys[0].shape) == 0:
        return asarray(np.int64(0))
    ax = norm_axis(axis, len(keys[0].shape), "lexsort")
    return _sort.sort(keys[::-1], dimension=ax, num_keys=len(keys))[-1]


def _kth(name: str, kth: Any, n: int) -> int:
    try:
        k = operator.index(kth)
    except TypeError:
        raise TypeError(f"functx.numpy.{name} takes one int kth, got {kth!r:.60}; for several "
                        "kth, sort the array (a sorted array is partitioned at every kth).") \
            from None
    if not -n <= k < n:
        raise ValueError(f"functx.numpy.{name}: kth {k} is out of bounds for an axis of "
                         f"length {n}.")
    return k % n


def partition(a: Any, kth: int, axis: int = -1) -> Any:
    """``a`` with the ``kth`` smallest value along ``axis`` at position ``kth``, the smaller
    ones before it (ascending) and the others after it (descending), as ``jax.numpy``.

    Example:
        >>> fnp.partition(np.array([3.0, 1.0, 4.0, 2.0]), 1)
        array([1., 2., 4., 3.])
    """
    x, ax = _operand("partition", a, axis)
    n = x.shape[ax]
    k = _kth("partition", kth, n)
    last = _p.transpose_if_needed(x, tuple(i for i in range(len(x.shape)) if i != ax) + (ax,))
    s = _sort.sort([last], dimension=len(x.shape) - 1)[0]
    lo = _p.slice(s, (0,) * len(x.shape), tuple(last.shape[:-1]) + (k + 1,))
    hi = _sort.top_k(last, n - k - 1)[0]  # descending, ties in index order (as jax.numpy)
    out = _p.concatenate([lo, hi], len(x.shape) - 1)
    back = tuple(range(ax)) + (len(x.shape) - 1,) + tuple(range(ax, len(x.shape) - 1))
    return _p.transpose_if_needed(out, back)


def argpartition(a: Any, kth: int, axis: int = -1) -> Any:
    """Indices that partition ``a`` at ``kth`` along ``axis`` (see :func:`partition`): the
    ``kth + 1`` smallest in sorted order, then the others in index order (as ``jax.numpy``).

    Example:
        >>> fnp.argpartition(np.array([3.0, 1.0, 4.0, 2.0]), 1)
        array([1, 3, 0, 2])
    """
    x, ax = _operand("argpartition", a, axis)
    n = x.shape[ax]
    k = _kth("argpartition", kth, n)
    perm = _sort.sort([x], dimension=ax)[-1]
    start = [0] * len(x.shape)
    lo = _p.slice(perm, start, tuple(x.shape[:ax]) + (k + 1,) + tuple(x.shape[ax + 1:]))
    start[ax] = k + 1
    hi = _p.slice(perm, start, tuple(x.shape))
    return _p.concatenate([lo, _sort.sort([hi], dimension=ax)[0]], ax)


def sort_complex(a: Any) -> Any:
    """``a`` sorted along its last axis by real part, then imaginary part, as a complex array
    (complex64 for int8/int16/uint8/uint16 and complex inputs keep theirs, else complex128,
    as in NumPy)."""
    x = sort(a)
    dt = np.dtype(x.dtype)
    if dt.kind == "c":
        return x
    return astype(x, np.complex64 if dt.char in "bhBH" else np.complex128)


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, *,
                 method: str = "scan") -> Any:
    """Indices where the values ``v`` would be inserted into the sorted 1-d ``a`` to keep it
    sorted (``side="left"``: before equal entries, ``"right"``: after them), int64, of
    ``v``'s shape. NaN sorts last, as in :func:`sort`.

    Args:
        sorter: indices that sort ``a`` (``a`` itself is then unsorted).
        method: accepted for compatibility with ``jax.numpy`` (one algorithm here).

    Raises:
        ValueError: ``a`` is not 1-d, or ``side`` is not 'left'/'right'.

    Example:
        >>> fnp.searchsorted(np.array([1.0, 2.0, 3.0]), 2.5)
        array(2)
    """
    a, v = as_array(a), as_array(v)
    if len(a.shape) != 1:
        raise ValueError(f"functx.numpy.searchsorted needs a 1-d sorted array but got shape "
                         f"{tuple(a.shape)}; use vmap for a batch of sorted rows.")
    if side not in ("left", "right"):
        raise ValueError(f"functx.numpy.searchsorted: side must be 'left' or 'right', not "
                         f"{side!r}.")
    if sorter is not None:
        a = _sort.take_along_axis(a, astype(as_array(sorter), np.int64), 0)
    dt = result_type(a, v)
    return _sort.searchsorted(astype(a, dt, copy=False), astype(v, dt, copy=False), side=side)


# ----------------------------------------------------------------------------------------
# quantiles

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _check_q(name: str, q: Any, scale: float) -> None:
    """Quantiles out of range raise where their values are known (as NumPy)."""
    if is_tracer(q):
        return
    qv = concrete_value(q, name, "")
    if qv.size and not (np.all(qv >= 0) and np.all(qv <= scale)):
        raise ValueError(f"functx.numpy.{name}: quantiles must be in the range [0, "
                         f"{scale:g}], got {qv.tolist()!r:.80}.")


def _quantile(name: str, a: Any, q: Any, axis: Any, method: str, keepdims: builtins.bool,
              ignore_nan: builtins.bool) -> Any:
    if method not in _METHODS + ("median",):
        raise ValueError(f"functx.numpy.{name}: method must be one of {', '.join(_METHODS)}; "
                         f"got {method!r}.")
    a, q = as_array(a), as_array(q)
    if np.dtype(a.dtype).kind == "c":
        raise TypeError(f"functx.numpy.{name} needs real values but got {a.dtype}.")
    a, q, dt = promote_inexact(name, a, q)
    nd = len(a.shape)
    axes = tuple(range(nd)) if axis is None else tuple(builtins.sorted(norm_axes(axis, nd,
                                                                                 name)))
    kept = tuple(i for i in range(nd) if i not in axes)
    rest = tuple(a.shape[i] for i in kept)
    n = math.prod(a.shape[i] for i in axes)
    if n == 0:
        raise ValueError(f"functx.numpy.{name} of an empty axis is undefined (shape "
                         f"{tuple(a.shape)}, axis {axis}).")
    x = _p.reshape(_p.transpose_if_needed(a, kept + axes), rest + (n,))
    s = _sort.sort([x], dimension=len(rest))[0]
    qshape, m = tuple(q.shape), math.prod(q.shape)
    qf = _p.broadcast_in_dim(_p.reshape(q, (m,)), rest + (m,), (len(rest),))
    one = _p.constant(s, 1, (), dt)
    if ignore_nan:
        valid = _ew.convert_element_type(_ew.eq(x, x), new_dtype=dt)
        nv = _p.broadcast_in_dim(_red.reduce_sum(valid, (len(rest),)), rest + (m,),
                                 tuple(range(len(rest))))
    else:
        nv = _p.constant(s, n, (), dt)
    pos = _ew.mul(qf, _ew.sub(nv, one))
    lo_f, hi_f = _ew.floor(pos), _ew.ceil(pos)
    top = _p.constant(s, n - 1, (), dt)
    zero = _p.constant(s, 0, (), dt)

    def gather(p: Any) -> Any:
        i = _ew.convert_element_type(_ew.clamp(zero, p, top), new_dtype=_I64)
        return _sort.take_along_axis(s, i, -1)

    if method == "lower":
        r = gather(lo_f)
    elif method == "higher":
        r = gather(hi_f)
    elif method == "nearest":
        r = gather(_ew.round(pos, rounding_method="half_to_even"))
    else:
        lo, hi = gather(lo_f), gather(hi_f)
        frac = _ew.sub(pos, lo_f)
        if method == "median":  # the mean of the two middle values, as numpy.median
            half = _p.constant(s, 0.5, (), dt)
            r = _ew.select(_ew.eq(frac, zero), lo, _ew.mul(_ew.add(lo, hi), half))
        elif method == "midpoint":
            half = _p.constant(s, 0.5, (), dt)
            r = _ew.select(_ew.eq(frac, zero), lo, _ew.add(lo, _ew.mul(_ew.sub(hi, lo), half)))
        else:  # NumPy's lerp, exact at both ends
            d = _ew.sub(hi, lo)
            r = _ew.select(_ew.ge(frac, _p.constant(s, 0.5, (), dt)),
                           _ew.sub(hi, _ew.mul(d, _ew.sub(one, frac))),
                           _ew.add(lo, _ew.mul(d, frac)))
    nan = _p.constant(s, np.nan, (), dt)
    if ignore_nan:
        r = _ew.select(_ew.eq(nv, zero), nan, r)
    else:  # NaN sorts last: a row with a NaN has one at its end
        last = _p.slice(s, (0,) * len(rest) + (n - 1,), rest + (n,))
        r = _ew.select(_ew.ne(last, last), nan, r)  # (broadcasts over the quantiles)
    # rest + (m,) -> q's shape + rest (+ the kept axes of size 1)
    r = _p.transpose_if_needed(r, (len(rest),) + tuple(range(len(rest))))
    out_rest = tuple(1 if i in axes else a.shape[i] for i in range(nd)) if keepdims else rest
    return _p.reshape(r, qshape + out_rest)


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None,
             overwrite_input: builtins.bool = False, method: str = "linear",
             keepdims: builtins.bool = False, *, interpolation: Any = None) -> Any:
    """The ``q``-th quantiles (``q`` in [0, 1], any shape) of ``a`` over ``axis`` (None: all,
    or an int or tuple), shaped ``q.shape + reduced shape``; NaN where a row holds NaN.

    Raises:
        ValueError: ``q`` outside [0, 1] (where known), an unknown method, an empty axis.

    Example:
        >>> fnp.quantile(np.array([1.0, 2.0, 3.0, 4.0]), 0.5)
        array(2.5)
    """
    check_no_out("quantile", out)
    _check_q("quantile", q, 1.0)
    return _quantile("quantile", a, q, axis, interpolation or method, keepdims, False)


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None,
                overwrite_input: builtins.bool = False, method: str = "linear",
                keepdims: builtins.bool = False, *, interpolation: Any = None) -> Any:
    """:func:`quantile` ignoring NaNs (NaN where a row holds nothing else)."""
    check_no_out("nanquantile", out)
    _check_q("nanquantile", q, 1.0)
    return _quantile("nanquantile", a, q, axis, interpolation or method, keepdims, True)


def _percent(q: Any) -> Any:
    q = as_array(q)
    if np.dtype(q.dtype).kind in "biu":
        q = astype(q, np.float64)
    return _ew.div(q, _p.constant(q, 100, (), q.dtype))


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None,
               overwrite_input: builtins.bool = False, method: str = "linear",
               keepdims: builtins.bool = False, *, interpolation: Any = None) -> Any:
    """The ``q``-th percentiles (``q`` in [0, 100]); see :func:`quantile`."""
    check_no_out("percentile", out)
    _check_q("percentile", q, 100.0)
    return _quantile("percentile", a, _percent(q), axis, interpolation or method, keepdims,
                     False)


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None,
                  overwrite_input: builtins.bool = False, method: str = "linear",
                  keepdims: builtins.bool = False, *, interpolation: Any = None) -> Any:
    """:func:`percentile` ignoring NaNs."""
    check_no_out("nanpercentile", out)
    _check_q("nanpercentile", q, 100.0)
    return _quantile("nanpercentile", a, _percent(q), axis, interpolation or method,
                     keepdims, True)


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: builtins.bool = False,
           keepdims: builtins.bool = False) -> Any:
    """The median over ``axis`` (the mean of the two middle values for an even count); NaN
    where a row holds NaN. The gradient goes to the middle element(s) of the stable sort.

    Example:
        >>> fnp.median(np.array([1.0, 3.0, 2.0, 4.0]))
        array(2.5)
    """
    check_no_out("median", out)
    return _quantile("median", a, 0.5, axis, "median", keepdims, False)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: builtins.bool = False,
              keepdims: builtins.bool = False) -> Any:
    """:func:`median` ignoring NaNs (NaN where a row holds nothing else)."""
    check_no_out("nanmedian", out)
    return _quantile("nanmedian", a, 0.5, axis, "median", keepdims, True)


# ----------------------------------------------------------------------------------------
# unique

UniqueAllResult = collections.namedtuple("UniqueAllResult",
                                         ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = collections.namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = collections.namedtuple("UniqueInverseResult",
                                             ["values", "inverse_indices"])


def _prefix(x: Any, k: int) -> Any:
    return _p.slice(x, (0,), (k,))


def _sorted_starts(x: Any, equal_nan: builtins.bool) -> tuple:
    """``(sorted, perm, starts)`` for 1-d ``x`` (values) or 2-d ``x`` (rows, compared
    lexicographically): ``starts[i]`` says the ``i``-th sorted entry differs from the one
    before it (NaNs equal where ``equal_nan``)."""
    n = x.shape[0]
    if len(x.shape) == 1:
        s, perm = _sort.sort([x], dimension=0)
        head, tail = _p.slice(s, (1,), (n,)), _p.slice(s, (0,), (n - 1,))
    else:
        m = x.shape[1]
        if m == 0:  # rows without elements are all equal
            perm, s = _iota(x, n), x
        else:  # sort the rows by their columns, the first column the primary key
            cols = [_p.reshape(_p.slice(x, (0, j), (n, j + 1)), (n,)) for j in range(m)]
            perm = _sort.sort(cols, dimension=0, num_keys=m)[-1]
            s = _ix.gather(x, perm, axis=0)
        head, tail = _p.slice(s, (1, 0), (n, m)), _p.slice(s, (0, 0), (n - 1, m))
    differs = _ew.ne(head, tail)
    if equal_nan and np.dtype(x.dtype).kind in "fcV":
        differs = _ew.and_(differs, _ew.not_(_ew.and_(_ew.ne(head, head), _ew.ne(tail, tail))))
    if len(x.shape) == 2:  # a row differs where any of its elements does
        differs = _ew.gt(_red.reduce_sum(_ew.convert_element_type(differs, new_dtype=_I64),
                                         (1,)), _int(x, 0))
    first = _p.constant(x, True, (1,), np.bool_)
    return s, perm, _p.concatenate([first, differs], 0)


def _unique(ar: Any, return_index: builtins.bool, return_inverse: builtins.bool,
            return_counts: builtins.bool, equal_nan: builtins.bool, size: Any,
            fill_value: Any, name: str, axis: Any = None) -> tuple:
    a = as_array(ar)
    if axis is None:
        x = ravel(a)
        inverse_shape = tuple(a.shape)
    else:  # the slices along axis, as the rows of a 2-d array
        if len(a.shape) == 0:
            raise ValueError(f"functx.numpy.{name}: a 0-d array has no axis {axis}.")
        ax = norm_axis(axis, len(a.shape), name)
        moved = moveaxis(a, ax, 0)
        rest = tuple(moved.shape[1:])
        x = _p.reshape(moved, (moved.shape[0], math.prod(rest)))
        inverse_shape = (moved.shape[0],)
    n = x.shape[0]
    row = tuple(x.shape[1:])  # () for values, (m,) for rows
    if size is not None:
        size = operator.index(size)
        if size < 0:
            raise ValueError(f"functx.numpy.{name}: size must be non-negative, got {size}.")

    def finish(vals: Any) -> Any:  # rows back into slices along axis
        if axis is None:
            return vals
        return moveaxis(_p.reshape(vals, (vals.shape[0],) + rest), 0, ax)

    if n == 0:
        k = 0 if size is None else size
        fill = 0 if fill_value is None else fill_value
        vals = _p.broadcast_in_dim(asarray(fill, dtype=x.dtype), (k,) + row, ())
        zeros = _p.constant(x, 0, (k,), _I64)
        parts = ((True, finish(vals)), (return_index, zeros),
                 (return_inverse, _p.constant(x, 0, inverse_shape, _I64)),
                 (return_counts, zeros))
        return tuple(v for wanted, v in parts if wanted)
    s, perm, starts = _sorted_starts(x, equal_nan)  # starts: where a new value begins
    ids = _ew.sub(_red.cumsum(_ew.convert_element_type(starts, new_dtype=_I64), axis=0),
                  _int(x, 1))
    count = _ew.add(_p.slice(ids, (n - 1,), (n,)), _int(x, 1))  # the number of values, (1,)
    if size is None:
        k = int(concrete_value(count, f"functx.numpy.{name}",
                               "the length of its result depends on the values; pass "
                               "size= (and fill_value=) to fix it")[0])
    else:
        k = size
    # Each new value is written to its slot; everything else to slot k, which is dropped.
    spare = _int(x, k)
    kept = _ew.lt(ids, spare)
    slot = _ew.select(_ew.and_(starts, kept), ids, spare)
    filled = _ew.lt(_iota(x, k), count)

    def place(values: Any, fill: Any) -> Any:
        shape = tuple(values.shape[1:])
        out = _ix.scatter(_p.constant(values, 0, (k + 1,) + shape, values.dtype), slot, values,
                          axis=0)
        mask = filled if not shape else _p.broadcast_in_dim(filled, (k,) + shape, (0,))
        return _ew.select(mask, _p.slice(out, (0,) * (1 + len(shape)), (k,) + shape), fill)

    if fill_value is None:
        fill = _p.reshape(_p.slice(s, (0,) * len(s.shape), (1,) + row), row)
    else:
        fill = _p.reshape(astype(asarray(fill_value), x.dtype), ())
    outs = [finish(place(s, _p.broadcast_in_dim(fill, (k,) + row,
                                                tuple(range(1, 1 + len(fill.shape))))))]
    if return_index:
        outs.append(place(perm, _p.broadcast_in_dim(_p.reshape(_p.slice(perm, (0,), (1,)),
                                                               ()), (k,), ())))
    if return_inverse:
        inv = _ix.scatter(_p.constant(ids, 0, (n,), _I64), perm, ids, axis=0)
        outs.append(_p.reshape(inv, inverse_shape))
    if return_counts:
        ones = _p.constant(x, 1, (n,), _I64)
        every = _ew.select(kept, ids, spare)
        counts = _ix.scatter_add(_p.constant(x, 0, (k + 1,), _I64), every, ones, axis=0)
        outs.append(_prefix(counts, k))
    return tuple(outs)


def unique(ar: Any, return_index: builtins.bool = False, return_inverse: builtins.bool = False,
           return_counts: builtins.bool = False, axis: Any = None, *,
           equal_nan: builtins.bool = True, size: Any = None, fill_value: Any = None,
           sorted: builtins.bool = True) -> Any:
    """The sorted distinct values of the flattened ``ar`` (NaNs count as one value unless
    ``equal_nan=False``), with optionally the index of each value's first occurrence, the
    inverse (``ar``'s shape: which value each element is) and the counts (all int64).

    With ``axis``, the distinct slices along that axis instead (the distinct rows of a 2-d
    array for ``axis=0``), sorted lexicographically (their elements in C order), as
    ``numpy.unique``: the index and the counts per slice and the inverse of shape
    ``(ar.shape[axis],)``; NaNs in the same places count as equal unless ``equal_nan=False``.

    Args:
        axis: None (the flattened array) or the axis whose slices are compared.
        size: the length of the result, for ``jit`` and ``vmap`` (where the number of
            distinct values is unknown): extra values are dropped, missing ones are
            ``fill_value`` (default: the smallest value; its index for ``return_index``,
            0 for the counts), as ``jax.numpy.unique``.

    Raises:
        ConcretizationError: no ``size`` inside ``jit``/``vmap``/``make_trace``.
        ValueError: ``axis`` out of range (or ``ar`` 0-d with an axis).

    Example:
        >>> fnp.unique(np.array([3, 1, 3]), return_counts=True)
        (array([1, 3]), array([1, 2]))
    """
    outs = _unique(ar, return_index, return_inverse, return_counts, equal_nan, size,
                   fill_value, "unique", axis)
    return outs[0] if len(outs) == 1 else outs


def unique_values(x: Any, /, *, size: Any = None, fill_value: Any = None) -> Any:
    """The sorted distinct values of ``x`` (Array API; NaNs are distinct, as in NumPy)."""
    return _unique(x, False, False, False, False, size, fill_value, "unique_values")[0]


def unique_counts(x: Any, /, *, size: Any = None, fill_value: Any = None) -> UniqueCountsResult:
    """``(values, counts)`` of ``x``'s distinct values (Array API)."""
    return UniqueCountsResult(*_unique(x, False, False, True, False, size, fill_value,
                                       "unique_counts"))


def unique_inverse(x: Any, /, *, size: Any = None,
                   fill_value: Any = None) -> UniqueInverseResult:
    """``(values, inverse_indices)``: the distinct values and, for each element of ``x``
    (``x``'s shape), the index of its value (Array API)."""
    return UniqueInverseResult(*_unique(x, False, True, False, False, size, fill_value,
                                        "unique_inverse"))


def unique_all(x: Any, /, *, size: Any = None, fill_value: Any = None) -> UniqueAllResult:
    """``(values, indices, inverse_indices, counts)`` of ``x``'s distinct values (Array
    API)."""
    return UniqueAllResult(*_unique(x, True, True, True, False, size, fill_value,
                                    "unique_all"))
