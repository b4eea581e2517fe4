"""Indexing for functx.numpy: ``getitem`` (what ``tracer[idx]`` does), ``at``, ``take``...

``getitem(x, idx)`` implements NumPy's indexing rules for arrays and tracers:

* basic indices (ints, slices with any step, ``None``, ``...``) become ``slice``, ``rev``,
  ``squeeze`` and ``expand_dims`` primitives: cheap, and their VJP is a pad, not a scatter;
* advanced indices (integer arrays or lists, static or traced, and boolean masks, which
  become their ``nonzero()`` integer arrays) follow NumPy's rules: the index arrays
  broadcast together, and the result's advanced axes stand in place of the indexed axes
  when the advanced entries are adjacent in the expression, else in front. One index
  array on one axis is one ``gather`` along that axis (an embedding lookup gathers rows);
  several are linearised into one flat index over their axes (static parts computed with
  NumPy, traced parts with primitives) and gathered from those axes merged into one;
* a traced integer scalar without index arrays becomes a ``dynamic_slice`` (and
  ``squeeze``);
* static indices out of range raise IndexError as in NumPy; negative traced indices count
  from the end and out-of-range traced indices are *clamped* into range (there is no
  error, since the value is not known while tracing);
* ``True``/``False`` scalar indices (static only) are resolved by NumPy itself on the
  flat positions of ``x``;
* boolean masks need a known value (a NumPy array, or a tracer inside ``grad``/``vjp``):
  the result's shape depends on it. An abstract traced mask raises ConcretizationError
  (use ``functx.numpy.where`` instead).

``at(x)[idx]`` gives functional updates (``.set``, ``.add``, ``.multiply``/``.mul``,
``.min``, ``.max``, ``.get``) built on ``scatter``/``scatter_add`` into the flattened
``x`` at the flat positions of ``x[idx]`` (computed by NumPy for static indices; for
traced ones, by indexing a constant ``arange(x.size)`` with ``getitem``).
"""
from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np

from functx.backends import CPU, backend_of
from functx.ir import abstractify

from functx.numpy._promotion import asarray, astype, check_no_out, is_tracer
from functx.numpy._shape import (
    as_array,
    broadcast_to,
    concrete_value,
    moveaxis,
    norm_axis,
    ravel,
    num_elements,
    on_device_of,
    take_flat,
    to_host,
    unchanged,
)
from functx.primitives import elementwise as _ew
from functx.primitives import indexing as _ix
from functx.primitives import shape as _p

__all__ = ["getitem", "at", "take", "take_along_axis", "nonzero", "argwhere", "flatnonzero"]

_ADVANCED = ("int", "tint", "arr", "tarr")
_BAD_INDEX = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
              "integer or boolean arrays are valid indices")


# ----------------------------------------------------------------------------------------
# Reading an index expression


def _static_bound(v: Any) -> int | None:
    if v is None:
        return None
    if is_tracer(v):
        v = concrete_value(v, "A slice bound", "the slice's length decides the shape of the "
                           "result (for a window of static size at a traced position, use "
                           "functx.primitives.shape.dynamic_slice)")
    try:
        return operator.index(v)
    except TypeError:
        raise IndexError(f"slice indices must be integers or None, got {v!r:.40}.") from None


def _classify(e: Any) -> tuple[str, Any]:
    """One index entry as (kind, value).

    Kinds: "none", "ellipsis", "slice", "bool" (a scalar boolean), "int" (static),
    "arr" (a static integer or boolean array), "tint" (a traced integer scalar) and
    "tarr" (a traced integer array).
    """
    if e is None:
        return "none", None
    if e is Ellipsis:
        return "ellipsis", None
    if isinstance(e, slice):
        return "slice", slice(_static_bound(e.start), _static_bound(e.stop),
                              _static_bound(e.step))
    if isinstance(e, (bool, np.bool_)):
        return "bool", builtins.bool(e)
    if isinstance(e, (int, np.integer)):
        return "int", int(e)
    if isinstance(e, (list, tuple)) and _holds_tracer(e):
        e = asarray(e)
    if is_tracer(e) or (_on_device(e) and np.dtype(e.dtype).kind in "iu"):
        # Integer index arrays on a device (CuPy) are used where they are, as traced ones
        # are (clamped, not checked): no copy to the host and no synchronisation.
        if e.dtype == np.bool_:
            return _classify(concrete_value(
                e, "Indexing with a boolean mask", "the number of True entries decides the "
                "shape of the result; use functx.numpy.where(mask, x, 0) to keep the shape"))
        if e.dtype.kind not in "iu":
            raise IndexError(f"{_BAD_INDEX}; got a traced {abstractify(e)} index.")
        return ("tarr", e) if e.shape else ("tint", e)
    arr = np.asarray(e) if isinstance(e, (list, tuple)) else to_host(e)
    if arr.size == 0 and arr.dtype.kind == "f" and isinstance(e, (list, tuple)):
        arr = arr.astype(np.intp)
    if arr.dtype == np.bool_:
        return ("bool", builtins.bool(arr)) if arr.ndim == 0 else ("arr", arr)
    if arr.dtype.kind in "iu":
        return ("int", int(arr)) if arr.ndim == 0 else ("arr", arr)
    try:
        return "int", operator.index(e)
    except TypeError:
        raise IndexError(f"{_BAD_INDEX}; got {e!r:.60}.") from None


def _holds_tracer(v: Any) -> bool:
    return is_tracer(v) or (isinstance(v, (list, tuple)) and builtins.any(map(_holds_tracer, v)))


def _entries(idx: Any) -> list[tuple[str, Any]]:
    return [_classify(e) for e in (idx if isinstance(idx, tuple) else (idx,))]


def _numpy_index(entries: list) -> tuple | None:
    """The entries as an index NumPy understands, or None if some are traced."""
    if builtins.any(k in ("tint", "tarr") for k, _ in entries):
        return None
    return tuple(Ellipsis if k == "ellipsis" else v for k, v in entries)


def _flat_positions(shape: tuple, np_index: tuple) -> np.ndarray:
    """NumPy's own answer to ``x[np_index]`` for the flat positions of ``x``'s elements.

    Each axis' coordinate grid is a zero-stride broadcast view, so only arrays of the
    result's size are allocated (never one of ``x``'s size).
    """
    nd = len(shape)
    pos = np.zeros((), np.int64)[np_index] if not nd else 0
    stride = 1
    for k in range(nd - 1, -1, -1):
        grid = np.arange(shape[k], dtype=np.int64).reshape((-1,) + (1,) * (nd - k - 1))
        pos = pos + np.broadcast_to(grid, shape)[np_index] * stride
        stride *= shape[k]
    return np.asarray(pos, np.int64)


# ----------------------------------------------------------------------------------------
# getitem


def getitem(x: Any, idx: Any) -> Any:
    """``x[idx]`` with NumPy's indexing semantics (see the module docstring).

    Args:
        x: an array, tracer or array-like.
        idx: an index expression: ints, slices, None, Ellipsis, integer arrays/lists
            (static or traced), boolean masks (static or concrete), or a tuple of them.

    Returns:
        The indexed values (a read-only array outside transforms).

    Raises:
        IndexError: a static index is out of range, or the expression is invalid.
        ConcretizationError: a boolean mask or slice bound is an abstract traced value.
    """
    x = as_array(x)
    entries = _entries(idx)
    np_index = _numpy_index(entries)
    if np_index is not None and _resolve_flat(entries):
        return take_flat(x, _flat_positions(tuple(x.shape), np_index))
    return _structured_index(x, entries)


def _resolve_flat(entries: list) -> bool:
    """Whether a static index is best resolved by NumPy on flat positions.

    That is so for True/False scalars, and for several advanced entries (one gather from
    the flattened array of exactly the result's size, instead of a transposed copy).
    """
    kinds = [k for k, _ in entries]
    if "bool" in kinds:
        return True
    if "arr" not in kinds:
        return False
    return builtins.sum(v.ndim if k == "arr" and v.dtype == np.bool_ else 1
                        for k, v in entries if k in ("int", "arr")) > 1


def _expand(x: Any, entries: list) -> list[tuple[str, Any, int | None]]:
    """The entries with the ellipsis expanded and an axis of ``x`` attached to each."""
    nd = len(x.shape)
    if builtins.sum(k == "ellipsis" for k, _ in entries) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if "bool" in (k for k, _ in entries):
        raise IndexError("functx.numpy: a boolean scalar index (True/False) combined with "
                         "traced integer indices is not supported; use None (np.newaxis) "
                         "and a static index instead.")
    used = builtins.sum(v.ndim if k == "arr" and v.dtype == np.bool_ else 1
                        for k, v in entries if k in _ADVANCED + ("slice",))
    if used > nd:
        raise IndexError(f"too many indices for array: array is {nd}-dimensional, but "
                         f"{used} were indexed")
    out: list[tuple[str, Any, int | None]] = []
    axis = 0
    if "ellipsis" not in (k for k, _ in entries):
        entries = list(entries) + [("ellipsis", None)]
    for k, v in entries:
        if k == "ellipsis":
            for _ in range(nd - used):
                out.append(("slice", slice(None), axis))
                axis += 1
        elif k == "none":
            out.append(("none", None, None))
        elif k == "arr" and v.dtype == np.bool_:
            if v.shape != tuple(x.shape[axis:axis + v.ndim]):
                raise IndexError(f"boolean index of shape {v.shape} did not match the indexed "
                                 f"array's axes {tuple(x.shape[axis:axis + v.ndim])} "
                                 f"(array shape {tuple(x.shape)}, starting at axis {axis})")
            for nz in np.nonzero(v):
                out.append(("arr", nz, axis))
                axis += 1
        else:
            out.append((k, v, axis))
            axis += 1
    return out


def _wrap(t: Any, n: int, clamp: bool) -> Any:
    """A traced integer index as int64, negative values counted from the end (n + i)."""
    t = astype(t, np.int64)  # Python ints below are int64 scalars without a device
    t = _ew.select(_ew.lt(t, 0), _ew.add(t, n), t)
    return _ew.clamp(0, t, builtins.max(n - 1, 0)) if clamp else t


def _check_static(i: Any, n: int, axis: int) -> np.ndarray:
    arr = np.asarray(i, dtype=np.int64)
    bad = (arr < -n) | (arr >= n)
    if bad.any():
        raise IndexError(f"index {int(arr[bad].reshape(-1)[0])} is out of bounds for axis "
                         f"{axis} with size {n}")
    return np.where(arr < 0, arr + n, arr)


def _structured_index(x: Any, entries: list) -> Any:
    """Indexing by slicing, then a dynamic slice (traced scalars) or a gather (arrays)."""
    expanded = _expand(x, entries)
    has_array = builtins.any(k in ("arr", "tarr") for k, _, _ in expanded)
    # 1. slices (and static ints, when no array makes them advanced) with one slice + rev.
    shape = tuple(x.shape)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    reverse = []
    for k, v, ax in expanded:
        n = shape[ax] if ax is not None else 0
        if k == "slice":
            start, stop, step = v.indices(n)
            length = len(range(start, stop, step))
            lo = start if step > 0 else start + (length - 1) * step
            lo = lo if length else 0
            starts[ax], strides[ax] = lo, builtins.abs(step)
            limits[ax] = lo + (length - 1) * builtins.abs(step) + 1 if length else lo
            if step < 0 and length > 1:
                reverse.append(ax)
        elif k == "int" and not has_array:
            i = int(_check_static(v, n, ax))
            starts[ax], limits[ax] = i, i + 1
    y = x
    if starts != [0] * len(shape) or limits != list(shape) or strides != [1] * len(shape):
        y = _p.slice(y, starts, limits, strides)
    if reverse:
        y = _p.rev(y, tuple(reverse))
    tokens = ["B" if k in _ADVANCED else ("N" if k == "none" else "S") for k, _, _ in expanded]
    if not has_array:
        return _newaxes(_scalar_index(y, expanded), [t for t in tokens if t != "B"], 0)
    return _array_index(y, expanded, tokens, entries)


def _scalar_index(y: Any, expanded: list) -> Any:
    """Drop the axes indexed by (static or traced) integer scalars."""
    taxes = [ax for k, _, ax in expanded if k == "tint"]
    if taxes:
        starts: list = [0] * len(y.shape)  # Python ints: device-free scalars
        sizes = list(y.shape)
        for k, v, ax in expanded:
            if k == "tint":
                starts[ax], sizes[ax] = _wrap(v, y.shape[ax], clamp=False), 1
        y = _p.dynamic_slice(y, starts, tuple(sizes))
    drop = tuple(ax for k, _, ax in expanded if k in ("int", "tint"))
    return _p.squeeze(y, drop) if drop else unchanged(y)


def _array_index(y: Any, expanded: list, tokens: list, entries: list) -> Any:
    """Advanced indexing with at least one index array: one gather, then axis placement."""
    adv = [(k, v, ax) for k, v, ax in expanded if k in _ADVANCED]
    try:
        bshape = np.broadcast_shapes(*[tuple(np.shape(v)) if k in ("int", "arr") else
                                       tuple(v.shape) for k, v, _ in adv])
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together "
                         f"with shapes {[tuple(np.shape(v)) for _, v, _ in adv]}") from None
    sizes = [y.shape[ax] for _, _, ax in adv]
    if int(np.prod(sizes, dtype=np.int64)) == 0 and int(np.prod(bshape, dtype=np.int64)):
        raise IndexError(f"index is out of bounds: an indexed axis of the array {y.shape} "
                         "is empty")
    # Linearise the advanced indices over their axes (row-major), static parts in NumPy.
    strides = np.cumprod([1] + sizes[::-1])[-2::-1].tolist()
    static_part: Any = np.zeros((), np.int64)
    flat = None
    for (k, v, ax), n, s in zip(adv, sizes, strides):
        if k in ("int", "arr"):
            static_part = static_part + _check_static(v, n, ax) * s
        else:
            t = _wrap(v, n, clamp=len(adv) > 1)
            t = t if s == 1 else _ew.mul(t, s)
            flat = t if flat is None else _ew.add(flat, t)
    if static_part.shape or static_part != 0 or flat is None:
        static_part = on_device_of(y, static_part)
        flat = static_part if flat is None else _ew.add(flat, static_part)
    if tuple(flat.shape) != bshape:
        flat = broadcast_to(flat, bshape)
    rest = [ax for ax in range(len(y.shape)) if ax not in [a for _, _, a in adv]]
    if len(adv) == 1:
        ax = adv[0][2]
        out = _ix.gather(y, flat, axis=ax)
        at_pos = builtins.sum(1 for a in rest if a < ax)
    else:
        perm = [a for _, _, a in adv] + rest
        yt = _p.transpose(y, perm) if perm != list(range(len(y.shape))) else y
        merged = (int(np.prod(sizes, dtype=np.int64)),) + tuple(y.shape[a] for a in rest)
        yt = _p.reshape(yt, merged)
        out = _ix.gather(yt, flat, axis=0)
        at_pos = 0
    # Where NumPy puts the advanced axes: in place of the first one if the advanced entries
    # are adjacent in the index expression, else before all other axes.
    adv_entries = [i for i, (k, _) in enumerate(entries) if k in _ADVANCED]
    first = tokens.index("B")
    if adv_entries == list(range(adv_entries[0], adv_entries[-1] + 1)):
        layout = [t for t in tokens[:first]] + ["B"] + [t for t in tokens[first:] if t != "B"]
    else:
        layout = ["B"] + [t for t in tokens if t != "B"]
    target = layout[:layout.index("B")].count("S")
    nb = len(bshape)
    if target != at_pos:
        out = moveaxis(out, tuple(range(at_pos, at_pos + nb)), tuple(range(target, target + nb)))
    return _newaxes(out, layout, nb)


def _newaxes(y: Any, layout: list, nb: int) -> Any:
    """Insert the size-1 axes of ``None`` entries; ``layout`` lists the output's parts."""
    pos, dims = 0, []
    for t in layout:
        if t == "N":
            dims.append(pos)
        pos += nb if t == "B" else 1
    return _p.expand_dims(y, tuple(dims)) if dims else y


# ----------------------------------------------------------------------------------------
# at[...]: functional updates


def at(x: Any) -> "_IndexUpdateHelper":
    """Functional index updates: ``fnp.at(x)[idx].set(v)`` (what ``tracer.at`` returns).

    Example:
        >>> fnp.at(np.zeros(3))[1].add(2.0)
        array([0., 2., 0.])
    """
    return _IndexUpdateHelper(as_array(x))


class _IndexUpdateHelper:
    """``at(x)``: index it to get an :class:`_IndexUpdateRef`."""

    __slots__ = ("_x",)

    def __init__(self, x: Any) -> None:
        self._x = x

    def __getitem__(self, idx: Any) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self._x, idx)

    def __repr__(self) -> str:
        return f"at({self._x!r})"


class _IndexUpdateRef:
    """``at(x)[idx]``: returns an updated copy of ``x`` from each method; ``x`` is unchanged.

    ``values`` broadcast to the shape of ``x[idx]`` and are cast to ``x``'s dtype (as NumPy's
    assignment casts). Duplicate positions in ``idx``: ``set`` keeps the last value (as
    NumPy's ``x[idx] = v``), ``add`` accumulates (``np.add.at``), ``multiply``/``min``/``max``
    apply every duplicate in turn (``np.multiply.at`` ...) for static indices; for traced
    indices, duplicates are unknown while tracing, so only the last duplicate's value is
    combined with the original entry.
    """

    __slots__ = ("_x", "_idx")

    def __init__(self, x: Any, idx: Any) -> None:
        self._x, self._idx = x, idx

    def get(self) -> Any:
        """``x[idx]``."""
        return getitem(self._x, self._idx)

    def set(self, values: Any) -> Any:
        """A copy of ``x`` with ``x[idx] = values``."""
        return self._apply(values, _ix.scatter)

    def add(self, values: Any) -> Any:
        """A copy of ``x`` with ``values`` added at ``idx`` (duplicates accumulate)."""
        return self._apply(values, _ix.scatter_add)

    def multiply(self, values: Any) -> Any:
        """A copy of ``x`` with the entries at ``idx`` multiplied by ``values``."""
        return self._combine(values, _ew.mul)

    mul = multiply

    def min(self, values: Any) -> Any:
        """A copy of ``x`` with the entries at ``idx`` replaced by ``minimum(x[idx], values)``."""
        return self._combine(values, _ew.min)

    def max(self, values: Any) -> Any:
        """A copy of ``x`` with the entries at ``idx`` replaced by ``maximum(x[idx], values)``."""
        return self._combine(values, _ew.max)

    # -- implementation --
    def _positions_and_values(self, values: Any) -> tuple[Any, Any]:
        x = self._x
        entries = _entries(self._idx)
        np_index = _numpy_index(entries)
        if np_index is not None:
            pos = _flat_positions(tuple(x.shape), np_index)
        else:
            ids = np.arange(num_elements(x), dtype=np.int64).reshape(x.shape)
            pos = getitem(on_device_of(x, ids), self._idx)
        v = as_array(values)
        v = astype(v, x.dtype) if v.dtype != x.dtype else v
        if type(v) is np.ndarray and v.ndim == 0:
            # A Python or NumPy scalar joins x's device (as in every binary operation)
            # before it is broadcast: a broadcast host array would be a host operand.
            v = on_device_of(x, v)
        target = tuple(pos.shape)
        extra = len(v.shape) - len(target)
        if extra > 0 and builtins.all(d == 1 for d in v.shape[:extra]):
            v = _p.reshape(v, tuple(v.shape[extra:]))
        return pos, broadcast_to(v, target)

    def _apply(self, values: Any, scatter: Any) -> Any:
        pos, v = self._positions_and_values(values)
        x = self._x
        pos = on_device_of(x, pos) if isinstance(pos, np.ndarray) else pos
        flat = scatter(_p.reshape(x, (num_elements(x),)), pos, v, axis=0)
        return _p.reshape(flat, tuple(x.shape))

    def _combine(self, values: Any, op: Any) -> Any:
        pos, v = self._positions_and_values(values)
        x = self._x
        flat = _p.reshape(x, (num_elements(x),))
        layers = [(pos, v)] if is_tracer(pos) else _duplicate_layers(pos, v)
        for p, u in layers:
            p = on_device_of(x, p) if isinstance(p, np.ndarray) else p
            flat = _ix.scatter(flat, p, op(_ix.gather(flat, p, axis=0), u), axis=0)
        return _p.reshape(flat, tuple(x.shape))


def _duplicate_layers(pos: np.ndarray, v: Any) -> list[tuple[np.ndarray, Any]]:
    """Split static positions into layers without duplicates: the j-th occurrences of each.

    Returns (positions, values) per layer, in order, so applying them one after the other
    applies every duplicate in turn.
    """
    flat = pos.reshape(-1)
    if len(np.unique(flat)) == flat.size:
        return [(pos, v)]
    order = np.argsort(flat, kind="stable")
    srt = flat[order]
    first = np.r_[True, srt[1:] != srt[:-1]] if srt.size else np.zeros(0, bool)
    steps = np.arange(srt.size)
    rank = np.empty(srt.size, np.int64)
    rank[order] = steps - np.maximum.accumulate(np.where(first, steps, 0))
    vflat = _p.reshape(v, (num_elements(v),))
    out = []
    for j in range(int(rank.max()) + 1):
        sel = np.nonzero(rank == j)[0]
        out.append((flat[sel], _ix.gather(vflat, on_device_of(v, sel), axis=0)))
    return out


# ----------------------------------------------------------------------------------------
# take, take_along_axis


def take(a: Any, indices: Any, axis: int | None = None, out: Any = None,
         mode: str | None = None) -> Any:
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened ``a`` if None).

    Args:
        mode: "raise" (the default; None means it) checks static indices and counts negative
            ones from the end; "wrap" takes indices modulo the axis length; "clip" clips
            them into range (negative ones to 0). Traced indices cannot be checked: under
            "raise" they count from the end when negative and are clamped into range.

    Raises:
        IndexError: a static index is out of range under mode "raise".
    """
    check_no_out("take", out)
    a = as_array(a)
    if axis is None:
        a, axis = ravel(a), 0
    ax = norm_axis(axis, len(a.shape), "take")
    n = a.shape[ax]
    mode = "raise" if mode is None else mode
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"functx.numpy.take: mode must be 'raise', 'wrap' or 'clip', not "
                         f"{mode!r}.")
    if is_tracer(indices) or _on_device(indices) or (
            isinstance(indices, (list, tuple)) and _holds_tracer(indices)):
        # Traced or device-resident indices are used where they are (no host round trip):
        # negative ones wrap and out-of-range ones are clamped, as for traced indices.
        idx = asarray(indices)
        if idx.dtype.kind not in "iu":
            raise IndexError(f"functx.numpy.take: indices must be integers, got "
                             f"{abstractify(idx)}.")
        if mode == "wrap":
            idx = _ew.rem(astype(idx, np.int64), builtins.max(n, 1))
        elif mode == "raise":
            idx = _wrap(idx, n, clamp=False)
        return _ix.gather(a, idx, axis=ax)
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu" and not (idx.size == 0):
        raise IndexError(f"functx.numpy.take: indices must be integers, got {idx.dtype}.")
    idx = idx.astype(np.int64)
    if mode == "wrap":
        idx = np.mod(idx, builtins.max(n, 1))
    elif mode == "clip":
        idx = np.clip(idx, 0, builtins.max(n - 1, 0))
    else:
        idx = _check_static(idx, n, ax)
    return _ix.gather(a, on_device_of(a, idx), axis=ax)


def _on_device(x: Any) -> bool:
    """Whether ``x`` is an array of a non-CPU backend (e.g. a CuPy array)."""
    b = None if isinstance(x, (np.ndarray, list, tuple, int)) else backend_of(x)
    return b is not None and b is not CPU


def take_along_axis(arr: Any, indices: Any, axis: int | None = -1) -> Any:
    """Values of ``arr`` at ``indices`` along ``axis``, matching them on the other axes.

    ``indices`` has ``arr``'s rank and broadcasts against it off ``axis`` (as in NumPy).
    Static indices are checked (IndexError); traced ones are clamped (see the module doc).
    """
    a = as_array(arr)
    idx = indices if is_tracer(indices) else (
        asarray(indices) if isinstance(indices, (list, tuple)) else indices)
    if axis is None:
        a, axis = ravel(a), 0
        if len(np.shape(idx) if not is_tracer(idx) else idx.shape) != 1:
            raise ValueError("functx.numpy.take_along_axis: when axis=None, `indices` must "
                             "have a single dimension.")
    nd = len(a.shape)
    ind_shape = tuple(idx.shape) if is_tracer(idx) else np.shape(idx)
    if len(ind_shape) != nd:
        raise ValueError(f"functx.numpy.take_along_axis: `indices` (shape {ind_shape}) and "
                         f"`arr` (shape {tuple(a.shape)}) must have the same number of "
                         "dimensions.")
    ax = norm_axis(axis, nd, "take_along_axis")
    fancy = []
    for i, n in enumerate(a.shape):
        if i == ax:
            fancy.append(idx)
        else:
            fancy.append(np.arange(n).reshape((1,) * i + (-1,) + (1,) * (nd - i - 1)))
    return getitem(a, tuple(fancy))


# ----------------------------------------------------------------------------------------
# nonzero and friends: shapes depend on values, so they need concrete inputs


def _concrete_input(a: Any, name: str) -> np.ndarray:
    return concrete_value(a, f"functx.numpy.{name}", "the number of nonzero entries decides "
                          "the shape of the result (use functx.numpy.where for a "
                          "shape-preserving selection)")


def nonzero(a: Any) -> tuple:
    """The indices of the nonzero entries of ``a``, one array per axis (concrete ``a`` only).

    Raises:
        ConcretizationError: ``a`` is an abstract traced value.
    """
    return tuple(asarray(i) for i in np.nonzero(_concrete_input(a, "nonzero")))


def argwhere(a: Any) -> Any:
    """The indices of the nonzero entries of ``a``, one row per entry (concrete ``a`` only)."""
    return asarray(np.argwhere(_concrete_input(a, "argwhere")))


def flatnonzero(a: Any) -> Any:
    """The flat indices of the nonzero entries of ``a`` (concrete ``a`` only)."""
    return asarray(np.flatnonzero(_concrete_input(a, "flatnonzero")))

