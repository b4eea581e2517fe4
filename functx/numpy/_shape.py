"""Shape manipulation for functx.numpy: reshape, transpose, stacking, splitting, padding...

Every function follows NumPy's name, signature, defaults and axis conventions (negative
axes count from the end), accepts NumPy arrays, Python scalars and (nested) lists as well
as tracers, and is built from the shape primitives (``reshape``, ``broadcast_in_dim``,
``transpose``, ``slice``, ``rev``, ``concatenate``, ``pad``, ``gather``...), so every
transform works through it. Outside transforms the results are read-only NumPy arrays.

Arguments that decide an output *shape* (``shape``, ``axis``, ``repeats``, ``pad_width``,
split points...) must be static: Python values or NumPy arrays, or (inside ``grad``/
``vjp``) tracers whose value is known. ``roll``'s ``shift`` and ``pad``'s scalar
``constant_values`` may be traced, since they change values but not shapes.

Differences from NumPy:
    * ``order="F"`` for ``reshape``/``ravel`` is done with transposes (same values);
      ``order="A"``/``"K"`` are treated as ``"C"`` (functx arrays are C-ordered).
    * ``pad`` supports the modes ``constant``, ``edge``, ``reflect``, ``symmetric``,
      ``wrap`` and ``empty`` (filled with zeros); the statistic and ramp modes raise
      NotImplementedError.
    * ``out=`` is not supported (functx values are immutable).
"""
from __future__ import annotations

import builtins
import operator
from typing import Any, Sequence

import numpy as np

from functx.backends import backend_of
from functx.errors import ConcretizationError, ShapeError
from functx.numpy._axes import axis_tuple, norm_axes, norm_axis
from functx.numpy._promotion import asarray, astype, check_no_out, is_tracer, result_type
from functx.primitives import _util
from functx.primitives import elementwise as _ew
from functx.primitives import indexing as _ix
from functx.primitives import reduction as _red
from functx.primitives import shape as _p

__all__ = [
    "shape", "ndim", "size", "reshape", "ravel", "transpose", "swapaxes", "moveaxis",
    "squeeze", "expand_dims", "broadcast_shapes", "broadcast_to", "broadcast_arrays",
    "atleast_1d", "atleast_2d", "atleast_3d", "stack", "concatenate", "hstack", "vstack",
    "dstack", "column_stack", "split", "array_split", "tile", "repeat", "flip", "fliplr",
    "flipud", "roll", "pad", "tril", "triu", "diag", "diagonal", "trace",
]


# ----------------------------------------------------------------------------------------
# Helpers shared with _indexing and _linalg


def as_array(x: Any) -> Any:
    """``x`` as something primitives accept: tracers and arrays as they are, else asarray."""
    if is_tracer(x) or (isinstance(getattr(x, "shape", None), tuple) and
                        not isinstance(x, np.generic) and hasattr(x, "dtype")):
        return x
    return asarray(x)


def unchanged(x: Any) -> Any:
    """``x`` itself for a tracer; a read-only view for an array (a no-op result)."""
    return x if is_tracer(x) else _p.reshape(x, x.shape)


def static_ints(x: Any, what: str) -> np.ndarray:
    """A static integer argument (int, sequence, array, concrete tracer) as a NumPy array.

    Raises:
        ConcretizationError: ``x`` is a tracer whose value is not known here.
        TypeError: ``x`` is not integral.
    """
    if is_tracer(x) or (isinstance(x, (list, tuple)) and builtins.any(map(is_tracer, x))):
        x = concrete_value(x, what, "it decides the shape of the result")
    arr = np.asarray(x)
    if arr.size and arr.dtype.kind not in "iub":
        raise TypeError(f"functx.numpy: {what} must be integers, got {x!r:.80}.")
    return arr.astype(np.int64)


def concrete_value(x: Any, what: str, why: str) -> np.ndarray:
    """The host value of ``x`` (a tracer whose value is known, an array, a list...).

    Raises:
        ConcretizationError: ``x`` is (or holds) an abstract tracer; the message says
            ``what`` needed the value and ``why``.
    """
    if isinstance(x, (list, tuple)):
        return np.asarray([concrete_value(v, what, why) for v in x])
    if not is_tracer(x):
        return to_host(x)
    try:
        v = x._concrete(what)
    except ConcretizationError:
        raise ConcretizationError(
            f"functx.numpy: {what} needs the value of a traced {x.aval} array because "
            f"{why}, but inside {x._builder.transform} only its shape and dtype are known."
            "\n  What to do: pass a NumPy array or Python value (a static argument), or "
            "rewrite with shape-preserving operations such as functx.numpy.where.") from None
    return to_host(v)


def to_host(v: Any) -> np.ndarray:
    """``v`` (an array of any backend, or array-like) as a NumPy array."""
    b = backend_of(v)
    return np.asarray(v) if b is None else np.asarray(b.to_host(v))


on_device_of = _p.on_device_of  # (the primitives' helper: the pooling rules use it too)


def join_scalars(*xs: Any) -> tuple:
    """``xs`` with the 0-d host arrays among them (Python and NumPy scalars) moved to the
    device of the first other operand, as a binary primitive would move them: for functions
    that reshape or broadcast their operands before they meet (``outer``, ``kron``...)."""
    like = next((x for x in xs if type(x) is not np.ndarray), None)
    if like is None:
        return xs
    return tuple(on_device_of(like, x) if type(x) is np.ndarray and x.ndim == 0 else x
                 for x in xs)


def num_elements(x: Any) -> int:
    """The number of elements of an array or tracer (a static int)."""
    return int(np.prod(x.shape, dtype=np.int64))


def take_flat(x: Any, positions: Any) -> Any:
    """``x.ravel()[positions]`` with a static or traced integer array of flat positions."""
    if isinstance(positions, np.ndarray):
        positions = on_device_of(x, positions)
    return _ix.gather(_p.reshape(x, (num_elements(x),)), positions, axis=0)


def slice_axis(x: Any, start: int, stop: int, axis: int, step: int = 1) -> Any:
    """``x[..., start:stop:step, ...]`` on one axis (static, already-clipped bounds)."""
    if start == 0 and stop == x.shape[axis] and step == 1:
        return x
    starts = [0] * len(x.shape)
    limits = list(x.shape)
    strides = [1] * len(x.shape)
    starts[axis], limits[axis], strides[axis] = start, builtins.max(start, stop), step
    return _p.slice(x, tuple(starts), tuple(limits), tuple(strides))


# ----------------------------------------------------------------------------------------
# Shape queries


def shape(a: Any) -> tuple[int, ...]:
    """The shape of ``a`` (an array, tracer, scalar or nested list) as a tuple."""
    return tuple(a.shape) if is_tracer(a) else np.shape(a)


def ndim(a: Any) -> int:
    """The number of axes of ``a``."""
    return len(shape(a))


def size(a: Any, axis: int | None = None) -> int:
    """The number of elements of ``a``, or the length of one ``axis``."""
    s = shape(a)
    if axis is None:
        return int(np.prod(s, dtype=np.int64))
    return s[norm_axis(axis, len(s), "size")]


# ----------------------------------------------------------------------------------------
# Reshaping and axis order


def _infer_shape(newshape: Any, size_: int, ashape: tuple) -> tuple[int, ...]:
    dims = [operator.index(newshape)] if not isinstance(newshape, (tuple, list)) \
        else [operator.index(d) for d in newshape]
    unknown = [i for i, d in enumerate(dims) if d == -1]
    bad = len(unknown) > 1 or builtins.any(d < -1 for d in dims)
    known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if not bad and unknown:
        if known == 0 or size_ % known:
            bad = True
        else:
            dims[unknown[0]] = size_ // known
    if bad or int(np.prod(dims, dtype=np.int64)) != size_:
        wanted = tuple(newshape) if isinstance(newshape, (tuple, list)) else newshape
        raise ShapeError(f"functx.numpy.reshape: cannot reshape an array of shape {ashape} "
                         f"(size {size_}) into shape {wanted}; "
                         "the sizes must multiply to the same number, with at most one -1.")
    return tuple(dims)


def reshape(a: Any, /, shape: Any = None, order: str = "C", *, newshape: Any = None,
            copy: Any = None) -> Any:
    """``a`` with a new shape (one entry may be -1: inferred). See ``numpy.reshape``.

    Args:
        a: the array.
        shape: an int or tuple of ints (``newshape`` is NumPy's older name for it).
        order: "C" (row-major) or "F" (column-major, done with transposes); "A" and "K"
            behave as "C".

    Raises:
        ShapeError: the sizes do not match.
    """
    if shape is None:
        if newshape is None:
            raise TypeError("functx.numpy.reshape() needs the new shape.")
        shape = newshape
    a = as_array(a)
    dims = _infer_shape(shape, int(np.prod(a.shape, dtype=np.int64)), tuple(a.shape))
    if order == "F":
        return transpose(_p.reshape(transpose(a), dims[::-1]))
    if order not in ("C", "A", "K", None):
        raise ValueError(f"functx.numpy.reshape: order must be 'C', 'F', 'A' or 'K', not "
                         f"{order!r}.")
    return unchanged(a) if dims == tuple(a.shape) else _p.reshape(a, dims)


def ravel(a: Any, order: str = "C") -> Any:
    """``a`` flattened to one axis (``order="F"``: column-major)."""
    return reshape(a, (-1,), order=order)


def transpose(a: Any, axes: Any = None) -> Any:
    """``a`` with its axes permuted (reversed when ``axes`` is None)."""
    a = as_array(a)
    nd = len(a.shape)
    perm = tuple(range(nd - 1, -1, -1)) if axes is None else norm_axes(axes, nd, "transpose")
    if len(perm) != nd:
        raise ShapeError(f"functx.numpy.transpose: axes {tuple(axes)} don't match an array "
                         f"of rank {nd}; give a permutation of all {nd} axes.")
    return unchanged(a) if perm == tuple(range(nd)) else _p.transpose(a, perm)


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    """``a`` with two axes interchanged."""
    a = as_array(a)
    nd = len(a.shape)
    i, j = norm_axis(axis1, nd, "swapaxes"), norm_axis(axis2, nd, "swapaxes")
    perm = list(range(nd))
    perm[i], perm[j] = j, i
    return transpose(a, perm)


def moveaxis(a: Any, source: Any, destination: Any) -> Any:
    """``a`` with the ``source`` axes moved to the ``destination`` positions."""
    a = as_array(a)
    nd = len(a.shape)
    src = norm_axes(source, nd, "moveaxis")
    dst = norm_axes(destination, nd, "moveaxis")
    if len(src) != len(dst):
        raise ValueError("functx.numpy.moveaxis: `source` and `destination` arguments must "
                         "have the same number of elements.")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


def squeeze(a: Any, axis: Any = None) -> Any:
    """``a`` without size-1 axes (all of them, or the given ones, which must have size 1).

    Raises:
        ShapeError: a given axis does not have size 1.
    """
    a = as_array(a)
    shp = tuple(a.shape)
    if axis is None:
        axes = tuple(i for i, d in enumerate(shp) if d == 1)
    else:
        axes = tuple(sorted(norm_axes(axis, len(shp), "squeeze")))
        if builtins.any(shp[i] != 1 for i in axes):
            raise ShapeError(f"functx.numpy.squeeze: cannot select an axis to squeeze out "
                             f"which has size not equal to one (shape {shp}, axis {axis}).")
    return _p.squeeze(a, axes) if axes else unchanged(a)


def expand_dims(a: Any, axis: Any) -> Any:
    """``a`` with size-1 axes inserted at the ``axis`` positions of the result."""
    a = as_array(a)
    axes = axis_tuple(axis, "expand_dims")
    dims = tuple(sorted(norm_axes(axes, len(a.shape) + len(axes), "expand_dims")))
    return _p.expand_dims(a, dims) if dims else unchanged(a)


def broadcast_shapes(*shapes: Any) -> tuple[int, ...]:
    """The shape NumPy broadcasting gives ``shapes`` (ints or tuples).

    Raises:
        ShapeError: the shapes do not broadcast.
    """
    shapes = tuple((operator.index(s),) if not isinstance(s, (tuple, list)) else
                   tuple(map(operator.index, s)) for s in shapes)
    return _util.broadcast_shapes("functx.numpy.broadcast_shapes", *shapes) if shapes else ()


def broadcast_to(array: Any, shape: Any, subok: bool = False) -> Any:
    """``array`` broadcast to ``shape`` (NumPy's rules; the result is read-only anyway).

    Raises:
        ShapeError: ``array``'s shape does not broadcast to ``shape``.
    """
    a = as_array(array)
    target = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else \
        tuple(operator.index(d) for d in shape)
    src = tuple(a.shape)
    lead = len(target) - len(src)
    if lead < 0 or builtins.any(s not in (1, t) for s, t in zip(src, target[lead:])) or \
            builtins.any(d < 0 for d in target):
        raise ShapeError(f"functx.numpy.broadcast_to: cannot broadcast an array of shape "
                         f"{src} to shape {target}; each axis must match or have size 1, "
                         "and the target may not have fewer axes.")
    if target == src:
        return unchanged(a)
    return _p.broadcast_in_dim(a, target, tuple(range(lead, len(target))))


def broadcast_arrays(*args: Any, subok: bool = False) -> tuple:
    """The arguments broadcast to their common shape (a tuple, as NumPy 2 returns)."""
    arrays = [as_array(a) for a in args]
    common = broadcast_shapes(*[tuple(a.shape) for a in arrays])
    return tuple(broadcast_to(a, common) for a in arrays)


def _atleast(arys: tuple, n: int) -> Any:
    out = []
    for a in arys:
        a = as_array(a)
        s = tuple(a.shape)
        if len(s) < n:
            if n == 3 and len(s) == 1:
                s = (1,) + s + (1,)
            elif n == 3 and len(s) == 2:
                s = s + (1,)
            else:
                s = (1,) * (n - len(s)) + s
            a = _p.reshape(a, s)
        else:
            a = unchanged(a)
        out.append(a)
    return out[0] if len(out) == 1 else tuple(out)


def atleast_1d(*arys: Any) -> Any:
    """Each input with at least one axis (one array, or a tuple for several inputs)."""
    return _atleast(arys, 1)


def atleast_2d(*arys: Any) -> Any:
    """Each input with at least two axes (``(N,)`` becomes ``(1, N)``)."""
    return _atleast(arys, 2)


def atleast_3d(*arys: Any) -> Any:
    """Each input with at least three axes: (N,) -> (1, N, 1), (M, N) -> (M, N, 1)."""
    return _atleast(arys, 3)


# ----------------------------------------------------------------------------------------
# Joining and splitting


def _common(arrays: Sequence[Any], dtype: Any, name: str) -> list:
    if not isinstance(arrays, (list, tuple)) and not is_tracer(arrays):
        arrays = list(arrays)
    arrays = [as_array(a) for a in arrays]
    if not arrays:
        raise ValueError(f"functx.numpy.{name}: need at least one array to {name}.")
    dt = np.dtype(dtype) if dtype is not None else result_type(*arrays)
    return [astype(a, dt) if a.dtype != dt else a for a in arrays]


def concatenate(arrays: Sequence[Any], /, axis: int | None = 0, out: Any = None, *,
                dtype: Any = None, casting: str = "same_kind") -> Any:
    """The arrays joined along an existing ``axis`` (flattened first when ``axis=None``).

    Dtypes are promoted as NumPy does (or converted to ``dtype``).

    Raises:
        ShapeError: the arrays are 0-d, differ in rank, or differ in size off ``axis``.
    """
    check_no_out("concatenate", out)
    arrays = _common(arrays, dtype, "concatenate")
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    nd = len(arrays[0].shape)
    if nd == 0:
        raise ShapeError("functx.numpy.concatenate: zero-dimensional arrays cannot be "
                         "concatenated; use stack, or reshape them to 1-D first.")
    ax = norm_axis(axis, nd, "concatenate")
    for a in arrays:
        if len(a.shape) != nd or builtins.any(
                d != e for i, (d, e) in enumerate(zip(a.shape, arrays[0].shape)) if i != ax):
            raise ShapeError(
                f"functx.numpy.concatenate: all the input arrays must have the same number "
                f"of dimensions and the same size except along axis {ax}; got shapes "
                f"{[tuple(b.shape) for b in arrays]}.")
    if len(arrays) == 1:
        return unchanged(arrays[0])
    return _p.concatenate(arrays, ax)


def stack(arrays: Sequence[Any], axis: int = 0, out: Any = None, *, dtype: Any = None,
          casting: str = "same_kind") -> Any:
    """The arrays (all of one shape) joined along a new ``axis``.

    Raises:
        ShapeError: the arrays have different shapes.
    """
    check_no_out("stack", out)
    arrays = _common(arrays, dtype, "stack")
    shapes = {tuple(a.shape) for a in arrays}
    if len(shapes) > 1:
        raise ShapeError(f"functx.numpy.stack: all input arrays must have the same shape; "
                         f"got {[tuple(a.shape) for a in arrays]}.")
    ax = norm_axis(axis, len(arrays[0].shape) + 1, "stack")
    return concatenate([_p.expand_dims(a, (ax,)) for a in arrays], axis=ax)


def hstack(tup: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Any:
    """Arrays joined column-wise (along axis 1; axis 0 for 1-D inputs)."""
    arrs = [atleast_1d(a) for a in tup]
    axis = 0 if arrs and len(arrs[0].shape) == 1 else 1
    return concatenate(arrs, axis=axis, dtype=dtype)


def vstack(tup: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Any:
    """Arrays joined row-wise (1-D inputs become rows)."""
    return concatenate([atleast_2d(a) for a in tup], axis=0, dtype=dtype)


def dstack(tup: Sequence[Any]) -> Any:
    """Arrays joined along the third axis (after ``atleast_3d``)."""
    return concatenate([atleast_3d(a) for a in tup], axis=2)


def column_stack(tup: Sequence[Any]) -> Any:
    """1-D arrays as columns (2-D arrays as they are) joined along axis 1."""
    arrs = []
    for a in tup:
        a = as_array(a)
        arrs.append(_p.reshape(a, (a.shape[0], 1)) if len(a.shape) < 2 and a.shape else
                    atleast_2d(a))
    return concatenate(arrs, axis=1)


def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """``ary`` split into pieces along ``axis`` (sections need not divide evenly).

    Args:
        indices_or_sections: the number of sections (the first ``n % sections`` get one
            more element), or the split points (Python slicing semantics: negative points
            count from the end, out-of-range ones clip).

    Returns:
        A list of arrays.
    """
    a = as_array(ary)
    ax = norm_axis(axis, len(a.shape), "array_split")
    n = a.shape[ax]
    spec = static_ints(indices_or_sections, "array_split's indices_or_sections")
    if spec.ndim == 0:
        sections = int(spec)
        if sections <= 0:
            raise ValueError("functx.numpy.array_split: number sections must be larger than 0.")
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        points = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    else:
        points = [0] + spec.tolist() + [n]
    out = []
    for st, en in zip(points[:-1], points[1:]):
        start, stop, _ = slice(st, en).indices(n)
        out.append(unchanged(slice_axis(a, start, stop, ax)))
    return out


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """``ary`` split into equal sections, or at the given points, along ``axis``.

    Raises:
        ShapeError: an integer number of sections does not divide the axis.
    """
    a = as_array(ary)
    spec = static_ints(indices_or_sections, "split's indices_or_sections")
    if spec.ndim == 0 and int(spec) > 0:
        n = a.shape[norm_axis(axis, len(a.shape), "split")]
        if n % int(spec):
            raise ShapeError(f"functx.numpy.split: array split does not result in an equal "
                             f"division (axis of length {n} into {int(spec)} sections); use "
                             "array_split for unequal sections.")
    return array_split(a, indices_or_sections, axis)


# ----------------------------------------------------------------------------------------
# Repetition, reversal, rolling, padding


def tile(A: Any, reps: Any) -> Any:
    """``A`` repeated ``reps`` times along each axis (NumPy's rank-matching rules)."""
    a = as_array(A)
    r = static_ints(reps, "tile's reps").reshape(-1).tolist()
    s = tuple(a.shape)
    nd = builtins.max(len(s), len(r))
    s = (1,) * (nd - len(s)) + s
    r = [1] * (nd - len(r)) + r
    if builtins.any(k < 0 for k in r):
        raise ValueError(f"functx.numpy.tile: reps must be non-negative, got {tuple(r)}.")
    inter = tuple(d for pair in zip(r, s) for d in pair)
    b = _p.broadcast_in_dim(_p.reshape(a, s), inter, tuple(range(1, 2 * nd, 2)))
    return reshape(b, tuple(k * d for k, d in zip(r, s)))


def repeat(a: Any, repeats: Any, axis: int | None = None) -> Any:
    """Each element of ``a`` repeated ``repeats`` times along ``axis`` (flattened if None).

    Args:
        repeats: an int, or a static sequence with one count per element along ``axis``.
    """
    a = as_array(a)
    if axis is None:
        a, axis = ravel(a), 0
    ax = norm_axis(axis, len(a.shape), "repeat")
    n = a.shape[ax]
    reps = static_ints(repeats, "repeat's repeats")
    if (reps < 0).any():
        raise ValueError("functx.numpy.repeat: repeats may not contain negative values.")
    if reps.size == 1:
        k = int(reps.reshape(()))
        s = tuple(a.shape)
        shp = s[:ax + 1] + (k,) + s[ax + 1:]
        dims = tuple(i for i in range(len(shp)) if i != ax + 1)
        return _p.reshape(_p.broadcast_in_dim(a, shp, dims), s[:ax] + (n * k,) + s[ax + 1:])
    if reps.shape != (n,):
        raise ShapeError(f"functx.numpy.repeat: repeats of shape {reps.shape} cannot be "
                         f"broadcast to the {n} elements along axis {ax}.")
    return _ix.gather(a, on_device_of(a, np.repeat(np.arange(n), reps)), axis=ax)


def flip(m: Any, axis: Any = None) -> Any:
    """``m`` with the order of elements reversed along ``axis`` (all axes if None)."""
    m = as_array(m)
    axes = tuple(range(len(m.shape))) if axis is None else norm_axes(axis, len(m.shape), "flip")
    return _p.rev(m, tuple(sorted(axes))) if axes else unchanged(m)


def fliplr(m: Any) -> Any:
    """``m`` flipped left-right (axis 1); needs at least 2 axes."""
    m = as_array(m)
    if len(m.shape) < 2:
        raise ValueError("functx.numpy.fliplr: Input must be >= 2-d.")
    return flip(m, 1)


def flipud(m: Any) -> Any:
    """``m`` flipped up-down (axis 0); needs at least 1 axis."""
    m = as_array(m)
    if len(m.shape) < 1:
        raise ValueError("functx.numpy.flipud: Input must be >= 1-d.")
    return flip(m, 0)


def _roll_dynamic(a: Any, shift: Any, ax: int) -> Any:
    """``a`` rolled by a traced scalar ``shift`` along ``ax``: a window of ``[a, a]``."""
    n = a.shape[ax]
    if shift.dtype.kind not in "iu":
        raise TypeError(f"functx.numpy.roll: shift must be an integer, got {shift.aval}.")
    s = astype(shift, np.int64)
    start = _ew.rem(_ew.neg(s), n)
    starts: list = [0] * len(a.shape)  # Python ints: device-free scalars
    starts[ax] = start
    return _p.dynamic_slice(_p.concatenate([a, a], ax), starts, tuple(a.shape))


def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    """``a`` rolled: elements shifted by ``shift`` along ``axis``, wrapping around.

    ``shift`` and ``axis`` broadcast against each other; ``axis=None`` rolls the flattened
    array. ``shift`` may be traced (then it is applied with a dynamic slice of the array
    concatenated with itself).
    """
    a = as_array(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), tuple(a.shape))
    axes = [norm_axis(ax, len(a.shape), "roll")
            for ax in np.atleast_1d(static_ints(axis, "roll's axis")).tolist()]
    if is_tracer(shift):
        shifts = [shift] if not shift.shape else \
            [_p.reshape(_p.slice(shift, (i,), (i + 1,)), ()) for i in range(shift.shape[0])]
        if len(shift.shape) > 1 or 1 not in (len(shifts), len(axes)) and \
                len(shifts) != len(axes):
            raise ShapeError(f"functx.numpy.roll: shift {shift.aval} and axis {axis} do not "
                             "broadcast against each other.")
        shifts = shifts * len(axes) if len(shifts) == 1 else shifts
        axes = axes * len(shifts) if len(axes) == 1 else axes
        for s, ax in zip(shifts, axes):
            if a.shape[ax]:
                a = _roll_dynamic(a, s, ax)
        return unchanged(a)
    s_arr, ax_arr = np.broadcast_arrays(static_ints(shift, "roll's shift"), np.asarray(axes))
    total: dict[int, int] = {}
    for s, ax in zip(s_arr.reshape(-1).tolist(), ax_arr.reshape(-1).tolist()):
        total[ax] = total.get(ax, 0) + s
    for ax, s in sorted(total.items()):
        n = a.shape[ax]
        if n and s % n:
            k = s % n
            a = _p.concatenate([slice_axis(a, n - k, n, ax), slice_axis(a, 0, n - k, ax)], ax)
    return unchanged(a)


def _as_pairs(x: np.ndarray, nd: int, what: str) -> np.ndarray:
    """NumPy's reading of ``pad_width``/``constant_values`` as one (before, after) per axis."""
    if x.ndim < 3 and x.size == 1:
        return np.broadcast_to(x.reshape(1, 1), (nd, 2))
    if x.ndim < 3 and x.size == 2 and x.shape != (2, 1):
        return np.broadcast_to(x.reshape(1, 2), (nd, 2))
    try:
        return np.broadcast_to(x, (nd, 2))
    except ValueError:
        raise ValueError(f"functx.numpy.pad: {what} of shape {x.shape} cannot be read as "
                         f"(before, after) pairs for {nd} axes.") from None


_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")


def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Any:
    """``array`` padded: ``pad_width`` elements before/after each axis (NumPy's ``pad``).

    Args:
        array: the array.
        pad_width: an int, a ``(before, after)`` pair, or one pair per axis.
        mode: "constant" (``constant_values``: a scalar, which may be traced, or static
            per-axis pairs; later axes win the corners, as in NumPy), "edge", "reflect",
            "symmetric", "wrap" (index-based modes, done with a gather per padded axis)
            or "empty" (zeros).

    Raises:
        NotImplementedError: another mode ("mean", "linear_ramp", a callable...).
        ValueError: a negative pad width.
    """
    a = as_array(array)
    nd = len(a.shape)
    widths = _as_pairs(static_ints(pad_width, "pad's pad_width"), nd, "pad_width")
    if (widths < 0).any():
        raise ValueError("functx.numpy.pad: pad_width can't contain negative values.")
    if mode == "empty":
        mode, kwargs = "constant", {}
    if mode == "constant":
        value = kwargs.pop("constant_values", 0)
        if kwargs:
            raise TypeError(f"functx.numpy.pad: unsupported keywords {sorted(kwargs)} for "
                            "mode 'constant'.")
        if is_tracer(value) or np.ndim(value) == 0:
            v = astype(as_array(value), a.dtype)
            if v.shape:
                raise ValueError("functx.numpy.pad: a traced constant_values must be a scalar.")
            cfg = tuple((int(lo), int(hi), 0) for lo, hi in widths)
            return _p.pad(a, v, cfg) if builtins.any(map(builtins.any, cfg)) else unchanged(a)
        values = _as_pairs(concrete_value(value, "pad's constant_values", "they are "
                                          "given per axis"), nd, "constant_values")
        for ax in range(nd):
            for side, width in enumerate(widths[ax]):
                if width:
                    cfg = [(0, 0, 0)] * nd
                    cfg[ax] = (int(width), 0, 0) if side == 0 else (0, int(width), 0)
                    fill = on_device_of(a, np.asarray(values[ax, side]).astype(a.dtype))
                    a = _p.pad(a, fill, tuple(cfg))
        return unchanged(a)
    if mode not in _INDEX_MODES:
        raise NotImplementedError(
            f"functx.numpy.pad: mode {mode!r} is not supported; use one of 'constant', "
            f"'edge', 'reflect', 'symmetric', 'wrap' or 'empty'.")
    if kwargs.get("reflect_type", "even") != "even" or set(kwargs) - {"reflect_type"}:
        raise NotImplementedError(f"functx.numpy.pad: keywords {kwargs} are not supported "
                                  f"with mode {mode!r} (only reflect_type='even').")
    for ax in range(nd):
        lo, hi = int(widths[ax, 0]), int(widths[ax, 1])
        if lo or hi:
            if a.shape[ax] == 0:
                raise ValueError(f"functx.numpy.pad: can't extend empty axis {ax} using "
                                 f"modes other than 'constant' or 'empty'.")
            src = np.pad(np.arange(a.shape[ax]), (lo, hi), mode=mode)
            a = _ix.gather(a, on_device_of(a, src), axis=ax)
    return unchanged(a)


# ----------------------------------------------------------------------------------------
# Triangles and diagonals


def _tri_select(m: Any, k: int, lower: bool, name: str) -> Any:
    m = as_array(m)
    if not m.shape:
        raise ValueError(f"functx.numpy.{name}: the input must have at least one axis.")
    rows, cols = (m.shape[0], m.shape[0]) if len(m.shape) == 1 else tuple(m.shape[-2:])
    k = operator.index(k)
    mask = np.tri(rows, cols, k if lower else k - 1, dtype=bool)
    if not lower:
        mask = ~mask
    return _ew.select(on_device_of(m, mask), m, on_device_of(m, np.zeros((), m.dtype)))


def tril(m: Any, k: int = 0) -> Any:
    """The lower triangle of ``m`` (entries above the ``k``-th diagonal zeroed)."""
    return _tri_select(m, k, True, "tril")


def triu(m: Any, k: int = 0) -> Any:
    """The upper triangle of ``m`` (entries below the ``k``-th diagonal zeroed)."""
    return _tri_select(m, k, False, "triu")


def _diag_positions(n: int, m: int, offset: int) -> np.ndarray:
    """Flat positions, in an ``(n, m)`` matrix, of its ``offset`` diagonal."""
    length = builtins.max(0, builtins.min(n + builtins.min(offset, 0),
                                          m - builtins.max(offset, 0)))
    steps = np.arange(length, dtype=np.int64)
    return (steps + builtins.max(-offset, 0)) * m + steps + builtins.max(offset, 0)


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The ``offset`` diagonal of ``a`` over ``axis1``/``axis2``, as the result's last axis.

    Raises:
        ValueError: ``a`` has fewer than 2 axes, or the two axes are the same.
    """
    a = as_array(a)
    nd = len(a.shape)
    if nd < 2:
        raise ValueError("functx.numpy.diagonal: diag requires an array of at least two "
                         "dimensions.")
    i, j = norm_axis(axis1, nd, "diagonal"), norm_axis(axis2, nd, "diagonal")
    if i == j:
        raise ValueError("functx.numpy.diagonal: axis1 and axis2 cannot be the same.")
    b = moveaxis(a, (i, j), (-2, -1))
    n, m = b.shape[-2:]
    flat = _p.reshape(b, tuple(b.shape[:-2]) + (n * m,))
    positions = on_device_of(a, _diag_positions(n, m, operator.index(offset)))
    return _ix.gather(flat, positions, axis=nd - 2)


def diag(v: Any, k: int = 0) -> Any:
    """A 2-D array with the 1-D ``v`` on its ``k``-th diagonal, or the diagonal of a 2-D ``v``."""
    v = as_array(v)
    k = operator.index(k)
    if len(v.shape) == 2:
        return diagonal(v, k)
    if len(v.shape) != 1:
        raise ValueError("functx.numpy.diag: Input must be 1- or 2-d.")
    n = v.shape[0] + builtins.abs(k)
    zeros = on_device_of(v, np.zeros(n * n, v.dtype))
    positions = on_device_of(v, _diag_positions(n, n, k))
    return _p.reshape(_ix.scatter(zeros, positions, v, axis=0), (n, n))


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: Any = None) -> Any:
    """The sum along a diagonal of ``a`` (NumPy's accumulation dtype: small ints -> int64)."""
    check_no_out("trace", out)
    d = diagonal(a, offset, axis1, axis2)
    dt = np.dtype(dtype) if dtype is not None else np.trace(np.zeros((1, 1), d.dtype)).dtype
    d = astype(d, dt) if d.dtype != dt else d
    return _red.reduce_sum(d, (len(d.shape) - 1,))
