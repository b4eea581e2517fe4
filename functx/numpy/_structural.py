"""Array manipulation beyond ``_shape``: append, insert, delete, block, choose, compress,
extract, diagflat, hsplit/vsplit/dsplit, rot90, resize, rollaxis, trim_zeros, and the
functional forms of NumPy's in-place writers: place, put, put_along_axis, fill_diagonal.

Positions that decide a result's shape (``insert``/``delete``'s ``obj``, ``compress``'s
condition without ``size=``, ``trim_zeros``) must be static or concrete; the values moved
around may be traced and get gradients (these are gathers, scatters and ``where``).

Differences from NumPy (as ``jax.numpy``):
    * ``place``, ``put``, ``put_along_axis`` and ``fill_diagonal`` return an updated copy and
      need ``inplace=False`` (functx arrays are immutable; the default ``inplace=True``
      raises, so ported code that relies on mutation fails loudly).
    * ``compress``/``extract`` take ``size``/``fill_value`` so that a traced condition works
      under ``jit``: the result is cut or padded to ``size``.
"""
from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from functx.errors import ArgumentError, ShapeError
from functx.numpy import _indexing as _idx
from functx.numpy import _reductions as _r
from functx.numpy import _shape as _fshape
from functx.numpy._devices import filled, joined
from functx.numpy import _ufuncs as _uf
from functx.numpy._promotion import astype, is_tracer, result_type
from functx.primitives import indexing as _ix

__all__ = [
    "append", "insert", "delete", "block", "choose", "compress", "extract", "diagflat",
    "hsplit", "vsplit", "dsplit", "rot90", "resize", "rollaxis", "trim_zeros", "place",
    "put", "put_along_axis", "fill_diagonal",
]


def _axis_or_flat(arr: Any, axis: Any, name: str) -> tuple[Any, int]:
    if axis is None:
        return _fshape.ravel(arr), 0
    return arr, _fshape.norm_axis(axis, len(arr.shape), name)


def _no_inplace(name: str, inplace: builtins.bool) -> None:
    if inplace:
        raise ArgumentError(f"functx.numpy.{name} cannot modify its argument in place "
                            f"(functx arrays are immutable); call it with inplace=False and "
                            f"use the array it returns.")


def append(arr: Any, values: Any, axis: int | None = None) -> Any:
    """``values`` joined to the end of ``arr`` along ``axis`` (both flattened if None).

    Example:
        >>> fnp.append(np.array([1, 2]), [[3, 4]])
        array([1, 2, 3, 4])
    """
    arr, values = _fshape.as_array(arr), _fshape.as_array(values)
    if axis is None:
        return _fshape.concatenate([_fshape.ravel(arr), _fshape.ravel(values)])
    return _fshape.concatenate([arr, values], axis=axis)


def _static_positions(name: str, obj: Any, n: int | None) -> np.ndarray:
    """``obj`` (an int, slice, or integer or boolean sequence) as host positions; a boolean
    mask must have length ``n`` unless ``n`` is None."""
    if isinstance(obj, builtins.slice):
        return np.arange(n)[obj]
    value = _fshape.concrete_value(obj, f"functx.numpy.{name}'s obj",
                                   "it decides the result's shape") if is_tracer(obj) or (
        isinstance(obj, (list, tuple)) and builtins.any(map(is_tracer, obj))) else np.asarray(obj)
    if value.dtype == np.bool_:
        if value.ndim != 1 or (n is not None and value.shape != (n,)):
            raise ShapeError(f"functx.numpy.{name}: a boolean obj must have the axis length "
                             f"{n}, got shape {value.shape}.")
        return np.flatnonzero(value)
    if value.size and value.dtype.kind not in "iu":
        raise ArgumentError(f"functx.numpy.{name}: obj must be integers, a slice or a boolean "
                            f"mask, got dtype {value.dtype}.")
    return value.astype(np.int64)


def delete(arr: Any, obj: Any, axis: int | None = None, *,
           assume_unique_indices: builtins.bool = False) -> Any:
    """``arr`` without the entries at ``obj`` (an int, slice, integer sequence or boolean
    mask; static) along ``axis`` (of the flattened ``arr`` if None).

    Raises:
        ArgumentError: an index is out of range.

    Example:
        >>> fnp.delete(np.array([1, 2, 3, 4]), [0, 2])
        array([2, 4])
    """
    arr, ax = _axis_or_flat(_fshape.as_array(arr), axis, "delete")
    n = arr.shape[ax]
    pos = _static_positions("delete", obj, n).ravel()
    if pos.size and (pos.min() < -n or pos.max() >= n):
        bad = int(pos.max() if pos.max() >= n else pos.min())
        raise ArgumentError(f"functx.numpy.delete: index {bad} is out of bounds for axis {ax} "
                            f"with size {n}.")
    keep = np.ones(n, bool)
    keep[pos % builtins.max(n, 1)] = False
    return _idx.take(arr, np.flatnonzero(keep), axis=ax)


def _assign_broadcast(v: Any, shape: tuple) -> Any:
    """``v`` broadcast to ``shape`` as NumPy's assignment ``target[...] = v`` broadcasts it
    (leading size-1 axes beyond the target's dimensions are dropped first)."""
    while len(v.shape) > len(shape) and v.shape[0] == 1:
        v = _fshape.reshape(v, tuple(v.shape[1:]))
    return _fshape.broadcast_to(v, shape)


def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Any:
    """``arr`` with ``values`` inserted before the positions ``obj`` (static: an int, slice
    or integer sequence or boolean mask) along ``axis`` (of the flattened ``arr`` if None),
    as ``numpy.insert`` (a single position takes a block of values; several positions take
    one value each).

    Raises:
        ArgumentError: a position is out of range.

    Example:
        >>> fnp.insert(np.array([1, 2, 3]), 1, [8, 9])
        array([1, 8, 9, 2, 3])
    """
    arr, ax = _axis_or_flat(_fshape.as_array(arr), axis, "insert")
    values = astype(joined(arr, values), arr.dtype)
    n, nd = arr.shape[ax], len(arr.shape)
    if isinstance(obj, builtins.slice):
        pos, scalar = np.arange(n)[obj], False
    else:
        pos = _static_positions("insert", obj, None)
        scalar = pos.ndim == 0
        if pos.ndim > 1:
            raise ArgumentError(f"functx.numpy.insert: index array argument obj must be one "
                                f"dimensional or scalar, got shape {pos.shape}.")
    pos = pos.ravel()
    if pos.size and (pos.min() < -n or pos.max() > n):
        raise ArgumentError(f"functx.numpy.insert: index {pos.tolist()} is out of bounds for "
                            f"axis {ax} with size {n}.")
    pos = np.where(pos < 0, pos + n, pos)
    shape = list(arr.shape)
    if pos.size == 1:  # a block of values at one position
        v = values
        if len(v.shape) < nd:
            v = _fshape.reshape(v, (1,) * (nd - len(v.shape)) + tuple(v.shape))
        if scalar:  # a[:, i] = ... broadcasts differently from a[:, [i]] = ...
            v = _fshape.moveaxis(v, 0, ax)
        numnew = v.shape[ax]
        shape[ax] = numnew
        v = _assign_broadcast(v, tuple(shape))
        new_pos = int(pos[0]) + np.arange(numnew)
    else:  # one value per position
        numnew = pos.shape[0]
        shape[ax] = numnew
        v = _assign_broadcast(values, tuple(shape))
        order = np.argsort(pos, kind="stable")
        new_pos = pos.copy()
        new_pos[order] += np.arange(numnew)
    if numnew == 0:
        return _fshape.unchanged(arr)
    total = n + numnew
    old_mask = np.ones(total, bool)
    old_mask[new_pos] = False
    perm = np.empty(total, np.int64)
    perm[np.flatnonzero(old_mask)] = np.arange(n)
    perm[new_pos] = n + np.arange(numnew)
    return _idx.take(_fshape.concatenate([arr, v], axis=ax), perm, axis=ax)


def _block_depth(x: Any) -> int:
    return 1 + _block_depth(x[0]) if isinstance(x, list) and len(x) else (
        1 if isinstance(x, list) else 0)


def block(arrays: Any) -> Any:
    """An array assembled from nested lists of blocks: the innermost lists are joined along
    the last axis, the next ones along the second-to-last, and so on (``numpy.block``).

    Raises:
        ShapeError: the nesting depths differ, a list is empty, or the blocks do not fit.

    Example:
        >>> fnp.block([[np.eye(2), np.zeros((2, 1))], [np.ones((1, 3))]])
        array([[1., 0., 0.],
               [0., 1., 0.],
               [1., 1., 1.]])
    """
    if isinstance(arrays, tuple):
        raise ArgumentError("functx.numpy.block: arrays is a tuple; only lists may be used to "
                            "arrange blocks.")
    depth = _block_depth(arrays)

    def leaves(x: Any, d: int) -> list:
        if isinstance(x, list):
            if not x:
                raise ShapeError("functx.numpy.block: lists cannot be empty.")
            out = []
            for e in x:
                out += leaves(e, d + 1)
            return out
        if d != depth:
            raise ShapeError(f"functx.numpy.block: list depths are mismatched (found a block "
                             f"at depth {d}, expected {depth}); nest every block equally.")
        return [_fshape.as_array(x)]

    nd = builtins.max([depth] + [len(a.shape) for a in leaves(arrays, 0)])

    def build(x: Any, d: int) -> Any:
        if not isinstance(x, list):
            a = _fshape.as_array(x)
            return _fshape.reshape(a, (1,) * (nd - len(a.shape)) + tuple(a.shape))
        return _fshape.concatenate([build(e, d + 1) for e in x], axis=-(depth - d))

    return build(arrays, 0) if isinstance(arrays, list) else _fshape.unchanged(
        _fshape.as_array(arrays))


def choose(a: Any, choices: Any, out: Any = None, mode: str = "raise") -> Any:
    """``choices[a[i]][i]`` for every position ``i`` (all broadcast together); ``mode``
    ``'raise'`` (concrete out-of-range indices raise), ``'wrap'`` or ``'clip'``.

    Raises:
        ArgumentError: an unknown ``mode``, or out-of-range indices under ``'raise'``.

    Example:
        >>> fnp.choose(np.array([0, 1, 0]), [np.array([1, 2, 3]), np.array([10, 20, 30])])
        array([ 1, 20,  3])
    """
    if out is not None:
        raise ArgumentError("functx.numpy.choose does not support out=; use the array it "
                            "returns.")
    a = _fshape.as_array(a)
    chs = [joined(a, c) for c in (choices if isinstance(choices, (list, tuple)) else
                                         [choices[i] for i in range(choices.shape[0])])]
    n = len(chs)
    if mode not in ("raise", "wrap", "clip"):
        raise ArgumentError(f"functx.numpy.choose: mode must be 'raise', 'wrap' or 'clip', "
                            f"not {mode!r}.")
    if a.dtype.kind not in "iub":
        raise ArgumentError(f"functx.numpy.choose: a must hold integers, got {a.dtype}.")
    a = astype(a, np.int64)
    if mode == "raise" and not is_tracer(a):
        h = _fshape.to_host(a)
        if h.size and (h.min() < 0 or h.max() >= n):
            raise ArgumentError(f"functx.numpy.choose: invalid entry in the choice array "
                                f"(values must lie in [0, {n}), got {h.min()}..{h.max()}); use "
                                f"mode='wrap' or 'clip'.")
    elif mode == "wrap":
        a = _uf.mod(a, n)
    else:
        a = _uf.clip(a, 0, n - 1)
    dt = result_type(*chs)
    shape = np.broadcast_shapes(tuple(a.shape), *(tuple(c.shape) for c in chs))
    stacked = _fshape.stack([_fshape.broadcast_to(astype(c, dt), shape) for c in chs])
    ab = _fshape.broadcast_to(a, shape)
    return _fshape.squeeze(_idx.take_along_axis(stacked, _fshape.expand_dims(ab, 0), 0), 0)


def _sized_positions(mask: Any, size: int) -> tuple[Any, Any]:
    """The positions of the first ``size`` true entries of the 1-D ``mask`` (traceable),
    and which of the ``size`` slots are filled."""
    n = mask.shape[0]
    m = astype(mask, np.int64)
    rank = _uf.subtract(_r.cumsum(m), np.asarray(1, np.int64))
    target = _uf.where(_uf.logical_and(mask, _uf.less(rank, size)), rank,
                       np.asarray(size, np.int64))
    buf = filled(mask, n, np.int64, (size + 1,))
    pos = _ix.scatter(buf, target, _fshape.on_device_of(mask, np.arange(n, dtype=np.int64)),
                      axis=0)[:size]
    return pos, _uf.less(pos, n)


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None,
             fill_value: Any = 0, out: Any = None) -> Any:
    """The slices of ``a`` along ``axis`` (flattened if None) where ``condition`` is true
    (a 1-D condition no longer than the axis; missing entries count as false). Without
    ``size`` the condition must be concrete; with it, the result has ``size`` slices,
    padded with ``fill_value``.

    Raises:
        ShapeError: ``condition`` is not 1-D or longer than the axis.

    Example:
        >>> fnp.compress([True, False, True], np.arange(6).reshape(2, 3), axis=1)
        array([[0, 2],
               [3, 5]])
    """
    if out is not None:
        raise ArgumentError("functx.numpy.compress does not support out=; use the array it "
                            "returns.")
    a, ax = _axis_or_flat(_fshape.as_array(a), axis, "compress")
    c = _fshape.as_array(condition)
    if len(c.shape) != 1 or c.shape[0] > a.shape[ax]:
        raise ShapeError(f"functx.numpy.compress: condition must be 1-D and no longer than "
                         f"axis {ax} of a (length {a.shape[ax]}), got shape {tuple(c.shape)}.")
    c = _uf.not_equal(c, 0) if c.dtype != np.bool_ else c
    if c.shape[0] < a.shape[ax]:
        c = _fshape.concatenate([c, filled(c, False, np.bool_, (a.shape[ax] - c.shape[0],))])
    if size is None:
        keep = np.flatnonzero(_fshape.concrete_value(
            c, "functx.numpy.compress without size=", "the result's length depends on it"))
        return _idx.take(a, keep, axis=ax)
    pos, ok = _sized_positions(c, int(size))
    got = _ix.gather(a, pos, axis=ax)
    shape = [1] * len(a.shape)
    shape[ax] = int(size)
    fill = astype(_fshape.as_array(fill_value), a.dtype)
    return _uf.where(_fshape.reshape(ok, tuple(shape)), got, fill)


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:
    """The elements of ``arr`` (flattened) where ``condition`` (flattened) is nonzero; see
    :func:`compress` for ``size``.

    Example:
        >>> fnp.extract(np.array([1, 0, 2]), np.array([4, 5, 6]))
        array([4, 6])
    """
    return compress(_fshape.ravel(_fshape.as_array(condition)),
                    _fshape.ravel(_fshape.as_array(arr)), size=size, fill_value=fill_value)


def diagflat(v: Any, k: int = 0) -> Any:
    """A 2-D array with the flattened ``v`` on its ``k``-th diagonal.

    Example:
        >>> fnp.diagflat(np.array([[1, 2]]))
        array([[1, 0],
               [0, 2]])
    """
    return _fshape.diag(_fshape.ravel(_fshape.as_array(v)), k)


def hsplit(ary: Any, indices_or_sections: Any) -> list:
    """``split`` along axis 1 (axis 0 for 1-D arrays).

    Example:
        >>> [p.shape for p in fnp.hsplit(np.zeros((2, 4)), 2)]
        [(2, 2), (2, 2)]
    """
    a = _fshape.as_array(ary)
    if len(a.shape) == 0:
        raise ShapeError("functx.numpy.hsplit only works on arrays of 1 or more dimensions.")
    return _fshape.split(a, indices_or_sections, axis=1 if len(a.shape) > 1 else 0)


def vsplit(ary: Any, indices_or_sections: Any) -> list:
    """``split`` along axis 0 (arrays of at least 2 dimensions).

    Example:
        >>> [p.shape for p in fnp.vsplit(np.zeros((4, 2)), 2)]
        [(2, 2), (2, 2)]
    """
    a = _fshape.as_array(ary)
    if len(a.shape) < 2:
        raise ShapeError("functx.numpy.vsplit only works on arrays of 2 or more dimensions.")
    return _fshape.split(a, indices_or_sections, axis=0)


def dsplit(ary: Any, indices_or_sections: Any) -> list:
    """``split`` along axis 2 (arrays of at least 3 dimensions).

    Example:
        >>> [p.shape for p in fnp.dsplit(np.zeros((1, 1, 4)), 2)]
        [(1, 1, 2), (1, 1, 2)]
    """
    a = _fshape.as_array(ary)
    if len(a.shape) < 3:
        raise ShapeError("functx.numpy.dsplit only works on arrays of 3 or more dimensions.")
    return _fshape.split(a, indices_or_sections, axis=2)


def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Any:
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes`` (from the first
    axis towards the second).

    Raises:
        ShapeError: ``axes`` are not two different axes of ``m``.

    Example:
        >>> fnp.rot90(np.array([[1, 2], [3, 4]]))
        array([[2, 4],
               [1, 3]])
    """
    m = _fshape.as_array(m)
    if len(axes) != 2:
        raise ShapeError("functx.numpy.rot90: len(axes) must be 2.")
    a0, a1 = (_fshape.norm_axis(a, len(m.shape), "rot90") for a in axes)
    if a0 == a1:
        raise ShapeError("functx.numpy.rot90: axes must be different.")
    k = operator.index(k) % 4
    if k == 0:
        return _fshape.unchanged(m)
    if k == 2:
        return _fshape.flip(_fshape.flip(m, a0), a1)
    perm = list(range(len(m.shape)))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return _fshape.transpose(_fshape.flip(m, a1), perm)
    return _fshape.flip(_fshape.transpose(m, perm), a1)


def resize(a: Any, new_shape: Any) -> Any:
    """An array of ``new_shape`` filled with the flattened ``a`` repeated as often as
    needed (zeros if ``a`` is empty), as ``numpy.resize``.

    Example:
        >>> fnp.resize(np.array([1, 2, 3]), (2, 2))
        array([[1, 2],
               [3, 1]])
    """
    a = _fshape.as_array(a)
    shape = (int(new_shape),) if np.ndim(new_shape) == 0 else tuple(int(s) for s in new_shape)
    if builtins.any(s < 0 for s in shape):
        raise ArgumentError(f"functx.numpy.resize: all elements of new_shape must be "
                            f"non-negative, got {shape}.")
    total, n = int(np.prod(shape, dtype=np.int64)), _fshape.num_elements(a)
    if n == 0:
        return filled(a, 0, a.dtype, shape)
    return _fshape.reshape(_fshape.take_flat(a, np.arange(total) % n), shape)


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """``a`` with ``axis`` moved to lie before position ``start`` (NumPy's older
    ``moveaxis``).

    Example:
        >>> fnp.rollaxis(np.zeros((3, 4, 5)), 2).shape
        (5, 3, 4)
    """
    a = _fshape.as_array(a)
    n = len(a.shape)
    axis = _fshape.norm_axis(axis, n, "rollaxis")
    start = operator.index(start)
    if start < 0:
        start += n
    if not 0 <= start <= n:
        raise ShapeError(f"functx.numpy.rollaxis: start {start} is out of range for an "
                         f"array of {n} dimensions; it must satisfy -{n} <= start <= {n}.")
    if axis < start:
        start -= 1
    if axis == start:
        return _fshape.unchanged(a)
    perm = list(range(n))
    perm.remove(axis)
    perm.insert(start, axis)
    return _fshape.transpose(a, perm)


def trim_zeros(filt: Any, trim: str = "fb", axis: Any = None) -> Any:
    """``filt`` without its leading (``'f'`` in ``trim``) and trailing (``'b'``) zeros
    along the given axes (all if None; the bounding box of the nonzero entries). Needs a
    concrete ``filt``.

    Example:
        >>> fnp.trim_zeros(np.array([0, 0, 1, 2, 0]))
        array([1, 2])
    """
    f = _fshape.as_array(filt)
    value = _fshape.concrete_value(f, "functx.numpy.trim_zeros",
                                   "the result's shape depends on where the zeros are")
    trim = trim.lower()
    if builtins.any(ch not in "fb" for ch in trim):
        raise ArgumentError(f"functx.numpy.trim_zeros: trim must contain only 'f' and 'b', "
                            f"got {trim!r}.")
    nd = value.ndim
    axes = range(nd) if axis is None else _fshape.norm_axes(axis, nd, "trim_zeros")
    nz = np.nonzero(value)
    out = f
    for ax in axes:
        n = value.shape[ax]
        if nz[ax].size == 0:
            lo, hi = (n if "f" in trim else 0), n
            lo = builtins.min(lo, hi)
        else:
            lo = int(nz[ax].min()) if "f" in trim else 0
            hi = int(nz[ax].max()) + 1 if "b" in trim else n
        out = _fshape.slice_axis(out, lo, hi, ax)
    return _fshape.unchanged(out)


# ----------------------------------------------------------------------------------------
# functional forms of NumPy's in-place writers


def place(arr: Any, mask: Any, vals: Any, *, inplace: builtins.bool = True) -> Any:
    """A copy of ``arr`` with the positions where ``mask`` is true filled with ``vals``,
    in order, repeated cyclically (``numpy.place``; needs ``inplace=False``).

    Example:
        >>> fnp.place(np.zeros(4), np.array([1, 0, 1, 1]), [5.0, 6.0], inplace=False)
        array([5., 0., 6., 5.])
    """
    _no_inplace("place", inplace)
    arr = _fshape.as_array(arr)
    mask = _fshape.as_array(mask)
    if tuple(mask.shape) != tuple(arr.shape):
        raise ShapeError(f"functx.numpy.place: mask must have arr's shape "
                         f"{tuple(arr.shape)}, got {tuple(mask.shape)}.")
    vals = _fshape.ravel(astype(joined(arr, vals), arr.dtype))
    flat = _fshape.ravel(_uf.not_equal(mask, 0) if mask.dtype != np.bool_ else mask)
    if vals.shape[0] == 0:
        if not is_tracer(flat) and _fshape.to_host(flat).any():
            raise ArgumentError("functx.numpy.place: vals is empty but mask selects "
                                "positions; pass at least one value.")
        return _fshape.unchanged(arr)
    rank = _uf.subtract(_r.cumsum(astype(flat, np.int64)), np.asarray(1, np.int64))
    picked = _ix.gather(vals, _uf.mod(_uf.maximum(rank, 0), vals.shape[0]), axis=0)
    return _fshape.reshape(_uf.where(flat, picked, _fshape.ravel(arr)), tuple(arr.shape))


def put(a: Any, ind: Any, v: Any, mode: str | None = None, *,
        inplace: builtins.bool = True) -> Any:
    """A copy of ``a`` with the flat positions ``ind`` set to ``v`` (repeated cyclically);
    ``mode`` ``'raise'`` (default; concrete indices are checked, negative ones count from
    the end), ``'wrap'`` or ``'clip'`` (``numpy.put``; needs ``inplace=False``).

    Example:
        >>> fnp.put(np.zeros(4), [0, 2], [1.0, 2.0], inplace=False)
        array([1., 0., 2., 0.])
    """
    _no_inplace("put", inplace)
    a = _fshape.as_array(a)
    n = _fshape.num_elements(a)
    ind = _fshape.ravel(_fshape.as_array(ind))
    v = _fshape.ravel(astype(joined(a, v), a.dtype))
    if ind.shape[0] == 0:
        return _fshape.unchanged(a)
    if v.shape[0] == 0:
        raise ArgumentError("functx.numpy.put: v is empty; pass at least one value.")
    mode = "raise" if mode is None else mode
    ind = astype(ind, np.int64)
    if mode == "wrap":
        ind = _uf.mod(ind, n)
    elif mode == "clip":
        ind = _uf.clip(ind, 0, n - 1)
    elif mode == "raise":
        if not is_tracer(ind):
            h = _fshape.to_host(ind)
            if h.min() < -n or h.max() >= n:
                bad = int(h.max() if h.max() >= n else h.min())
                raise ArgumentError(f"functx.numpy.put: index {bad} is out of bounds for size "
                                    f"{n}; use mode='wrap' or 'clip'.")
        ind = _uf.where(_uf.less(ind, 0), _uf.add(ind, n), ind)
    else:
        raise ArgumentError(f"functx.numpy.put: mode must be 'raise', 'wrap' or 'clip', not "
                            f"{mode!r}.")
    vals = _fshape.take_flat(v, np.arange(ind.shape[0]) % v.shape[0])
    flat = _idx.at(_fshape.ravel(a))[ind].set(vals)
    return _fshape.reshape(flat, tuple(a.shape))


def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None,
                   inplace: builtins.bool = True, *, mode: str | None = None) -> Any:
    """A copy of ``arr`` with ``values`` written at ``indices`` along ``axis``, matched on
    the other axes (the inverse of ``take_along_axis``; needs ``inplace=False``).

    Example:
        >>> fnp.put_along_axis(np.zeros((2, 2)), np.array([[1], [0]]), 9.0, 1, inplace=False)
        array([[0., 9.],
               [9., 0.]])
    """
    _no_inplace("put_along_axis", inplace)
    arr = _fshape.as_array(arr)
    indices = _fshape.as_array(indices)
    if axis is None:
        flat = put_along_axis(_fshape.ravel(arr), _fshape.ravel(indices), values, 0,
                              inplace=False, mode=mode)
        return _fshape.reshape(flat, tuple(arr.shape))
    ax = _fshape.norm_axis(axis, len(arr.shape), "put_along_axis")
    if len(indices.shape) != len(arr.shape):
        raise ShapeError(f"functx.numpy.put_along_axis: indices must have as many dimensions "
                         f"as arr ({len(arr.shape)}), got shape {tuple(indices.shape)}.")
    nd = len(arr.shape)
    full = []
    for i in range(nd):
        if i == ax:
            full.append(indices)
        else:
            s = [1] * nd
            s[i] = arr.shape[i]
            full.append(np.arange(arr.shape[i]).reshape(s))
    vals = astype(_fshape.as_array(values), arr.dtype)
    return _idx.at(arr)[tuple(full)].set(vals)


def fill_diagonal(a: Any, val: Any, wrap: builtins.bool = False, *,
                  inplace: builtins.bool = True) -> Any:
    """A copy of ``a`` with its main diagonal set to ``val`` (repeated cyclically): for 2-D
    ``a`` (``wrap``: restart below a tall matrix's square part, as NumPy) or an array whose
    dimensions are all equal (``numpy.fill_diagonal``; needs ``inplace=False``).

    Raises:
        ShapeError: ``a`` has fewer than 2 dimensions, or unequal ones beyond 2-D.

    Example:
        >>> fnp.fill_diagonal(np.zeros((2, 3)), 5.0, inplace=False)
        array([[5., 0., 0.],
               [0., 5., 0.]])
    """
    _no_inplace("fill_diagonal", inplace)
    a = _fshape.as_array(a)
    shape = tuple(a.shape)
    if len(shape) < 2:
        raise ShapeError(f"functx.numpy.fill_diagonal: the array must be at least 2-d, got "
                         f"shape {shape}.")
    total = _fshape.num_elements(a)
    if len(shape) == 2:
        step = shape[1] + 1
        end = total if wrap else shape[1] * shape[1]
    else:
        if len(set(shape)) != 1:
            raise ShapeError(f"functx.numpy.fill_diagonal: all dimensions of the input must "
                             f"be of equal length, got shape {shape}.")
        step = 1 + int(np.cumprod(shape[:-1]).sum())
        end = total
    pos = np.arange(0, builtins.min(end, total), step)
    v = _fshape.ravel(astype(joined(a, val), a.dtype))
    if pos.size == 0 or v.shape[0] == 0:
        return _fshape.unchanged(a)
    vals = _fshape.take_flat(v, np.arange(pos.size) % v.shape[0])
    return _fshape.reshape(_idx.at(_fshape.ravel(a))[pos].set(vals), shape)

