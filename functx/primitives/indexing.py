"""Indexing primitives along one axis: gather (take), scatter_add and scatter (set), and
take_along / put_along (one element per row along an axis; see their section).

All three share one indexing scheme: ``gather(x, indices, axis=a)`` is
``np.take(x, indices, axis=a)``, of shape ``x.shape[:a] + indices.shape + x.shape[a+1:]``,
and the scatters write ``updates`` of that shape back into a copy of ``x``. Out-of-range
indices are clamped into ``[0, x.shape[a] - 1]`` (negative ones to 0: functx.numpy wraps
negative indices before it binds these), so scatter_add is the exact transpose of gather.

The generic implementations use ``xp.take`` and ``xp.add.at``. On CUDA, ``scatter``'s
assignment with duplicate indices is not ordered, so the CUDA backend needs its own
``scatter`` kernel (last write wins) to match the NumPy semantics.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.primitives._batching import batch_at, batch_size, instantiate, linear_jvp
from functx.primitives._util import compute_dtype, fmt, ndim_of, same_dtypes, shape_of
from functx.primitives.cuda import indexing as _cuda
from functx.registry import Primitive
from functx.tracing import bind


def _gathered_shape(name: str, x: AbstractArray, indices: AbstractArray,
                    axis: int) -> tuple[int, ...]:
    """The shape of ``gather(x, indices, axis)``, after checking the operands."""
    if indices.dtype.kind not in "iu":
        raise DTypeError(f"{name} needs integer indices but got {fmt([x, indices])}; convert "
                         "the indices with .astype(int).")
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"{name}: axis {axis} is out of range for {x}; use an axis in "
                         f"[0, {x.ndim}) (functx.numpy normalises negative axes).")
    if x.shape[axis] == 0 and indices.size:
        raise ShapeError(f"{name}: cannot index axis {axis} of {x}, which is empty, with "
                         f"{indices} indices.")
    return x.shape[:axis] + indices.shape + x.shape[axis + 1:]


def _scatter_aval(name: str):
    def rule(x: AbstractArray, indices: AbstractArray, updates: AbstractArray, *,
             axis: int) -> AbstractArray:
        same_dtypes(name, x, updates)
        expected = _gathered_shape(name, x, indices, axis)
        if updates.shape != expected:
            raise ShapeError(f"{name} of {fmt([x, indices, updates])} along axis {axis} needs "
                             f"updates of shape {expected} (x.shape[:axis] + indices.shape + "
                             "x.shape[axis+1:]).")
        return x
    return rule


def _clip(xp, indices, n):
    return xp.clip(indices, 0, max(n - 1, 0))


def _where(indices, axis):
    """The index tuple ``x[:, ..., :, indices]`` that selects gather's output positions."""
    return (slice(None),) * axis + (indices,)


# -- batching with batched indices -----------------------------------------------------------
# Batched indices pick different positions in each example. The rules fold the batch axis
# of x into the indexed axis (example b's position i becomes position b * n + i of an axis
# of size * n) and offset each example's indices by b * n after clamping them into [0, n - 1]
# as the primitives do, so one gather/scatter serves the whole batch without a loop. Within
# an example the indices keep their C order, so scatter's "last write wins" is unchanged.

def _fold_batch(x: Any, d: int | None, axis: int, size: int) -> Any:
    """Batched ``x`` as one example with an indexed ``axis`` of ``size * n`` positions."""
    x = batch_at(x, d, axis, size)
    shape = shape_of(x)
    return _shape.reshape(x, shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])


def _unfold_batch(out: Any, axis: int, size: int, n: int) -> Any:
    """Undo :func:`_fold_batch`: the batch axis comes back at ``axis``."""
    shape = shape_of(out)
    return _shape.reshape(out, shape[:axis] + (size, n) + shape[axis + 1:])


def _offset_indices(indices: Any, di: int, n: int) -> Any:
    """Indices batched along ``di``, clamped into [0, n - 1] and offset by ``b * n`` for
    example ``b`` (int64, so the offsets cannot overflow a narrow index dtype)."""
    dt = np.dtype(indices.dtype)
    hi = min(max(n - 1, 0), int(np.iinfo(dt).max))
    lo, hi = (_shape.constant(indices, v, (), dt) for v in (0, hi))
    clamped = _ew.convert_element_type(_ew.clamp(lo, indices, hi), new_dtype=np.int64)
    shape = shape_of(indices)
    xp = _shape.array_module(indices)
    offsets = xp.arange(shape[di], dtype=np.int64) * n  # a constant: depends on no value
    return _ew.add(clamped, _shape.broadcast_in_dim(offsets, shape, (di,)))


def _example_axis_size(x: Any, d: int | None, axis: int) -> int:
    """The length of an example's ``axis`` of ``x`` (batched along ``d``, or not)."""
    return shape_of(x)[axis + (d is not None and d <= axis)]


# -- gather ----------------------------------------------------------------------------------

gather_p = Primitive("gather")
gather_p.def_abstract_eval(lambda x, indices, *, axis: AbstractArray(
    _gathered_shape("gather", x, indices, axis), x.dtype, x.weak_type))
gather_p.def_impl(lambda xp, x, indices, *, axis:
                  xp.take(x, _clip(xp, indices, x.shape[axis]), axis=axis))


@gather_p.def_vjp(save_inputs=(1,))
def _gather_vjp(ct, ins, out, *, axis):
    x, indices = ins
    zeros = _shape.constant(ct, 0, x.shape, x.dtype)
    return scatter_add(zeros, indices, ct, axis=axis), None


gather_p.def_jvp(linear_jvp(gather_p))


@gather_p.def_batch
def _gather_batch(args, dims, *, axis):
    (x, indices), (dx, di) = args, dims
    if di is None:  # the same indices for every example: the batch axis stays where it is
        if dx <= axis:
            return gather(x, indices, axis=axis + 1), dx
        return gather(x, indices, axis=axis), dx - 1 + ndim_of(indices)
    if dx is None:  # one x for every example: the output has indices' batch axis
        return gather(x, indices, axis=axis), axis + di
    size, n = shape_of(x)[dx], _example_axis_size(x, dx, axis)
    return (gather(_fold_batch(x, dx, axis, size), _offset_indices(indices, di, n),
                   axis=axis), axis + di)


def gather(x: Any, indices: Any, *, axis: int) -> Any:
    """``np.take(x, indices, axis)`` with out-of-range indices clamped (see the module doc)."""
    return bind(gather_p, x, indices, axis=int(axis))


# -- scatter_add -----------------------------------------------------------------------------

scatter_add_p = Primitive("scatter_add")
scatter_add_p.def_abstract_eval(_scatter_aval("scatter_add"))


@scatter_add_p.def_impl
def _scatter_add_impl(xp, x, indices, updates, *, axis):
    # Half precision (float16, bfloat16) accumulates duplicates in float32, rounded once.
    acc = compute_dtype(x.dtype) if x.dtype.kind in "fV" else x.dtype
    out = x.astype(acc) if acc != x.dtype else xp.array(x, copy=True)
    # add.at with one 1-d index array is several times faster than with an N-d one
    flat = xp.reshape(_clip(xp, indices, x.shape[axis]), (-1,))
    xp.add.at(out, _where(flat, axis),
              xp.reshape(updates, x.shape[:axis] + (flat.size,) + x.shape[axis + 1:]))
    return out if acc == x.dtype else out.astype(x.dtype)


scatter_add_p.def_impl(_cuda.scatter_add, backend="cuda")  # atomics, per dtype


@scatter_add_p.def_vjp(save_inputs=(1,))
def _scatter_add_vjp(ct, ins, out, *, axis):
    return ct, None, gather(ct, ins[1], axis=axis)


@scatter_add_p.def_jvp
def _scatter_add_jvp(tangents, primals, out, *, axis):
    # Linear in (x, updates) together.
    (tx, _, tu), (x, indices, _) = tangents, primals
    if tu is None:
        return tx
    return scatter_add(instantiate(tx, x), indices, tu, axis=axis)


def _scatter_batch(prim: Primitive):
    """The batching rule of scatter or scatter_add (see "batching with batched indices")."""
    def rule(args, dims, *, axis):
        (x, indices, updates), (dx, di, du) = args, dims
        size = batch_size(args, dims)
        if di is None:
            # The same indices for every example: keep x's batch axis where it is (or, for
            # an unbatched x, put it where updates have theirs when that is outside the
            # indices' axes) and bring updates' batch axis to the matching place.
            k = ndim_of(indices)
            if dx is None:
                dx = du if du <= axis else (du - k + 1 if du >= axis + k else axis)
                x = batch_at(x, None, dx, size)
            updates = batch_at(updates, du, dx if dx <= axis else dx - 1 + k, size)
            return bind(prim, x, indices, updates, axis=axis + (dx <= axis)), dx
        n = _example_axis_size(x, dx, axis)
        out = bind(prim, _fold_batch(x, dx, axis, size), _offset_indices(indices, di, n),
                   batch_at(updates, du, axis + di, size), axis=axis)
        return _unfold_batch(out, axis, size, n), axis
    return rule


scatter_add_p.def_batch(_scatter_batch(scatter_add_p))


def scatter_add(x: Any, indices: Any, updates: Any, *, axis: int) -> Any:
    """A copy of ``x`` with ``updates`` added at ``indices`` along ``axis``.

    ``updates`` has gather's output shape; duplicate indices accumulate.
    """
    return bind(scatter_add_p, x, indices, updates, axis=int(axis))


# -- scatter ---------------------------------------------------------------------------------

scatter_p = Primitive("scatter")
scatter_p.def_abstract_eval(_scatter_aval("scatter"))


@scatter_p.def_impl
def _scatter_impl(xp, x, indices, updates, *, axis):
    out = xp.array(x, copy=True)
    out[_where(_clip(xp, indices, x.shape[axis]), axis)] = updates
    return out


scatter_p.def_impl(_cuda.scatter, backend="cuda")  # last write wins, as in NumPy


@scatter_p.def_vjp(save_inputs=(1,))
def _scatter_vjp(ct, ins, out, *, axis):
    # Positions that were written get no cotangent in x. Each update gets the cotangent of
    # the position it was written to, but only if it won that position (the last duplicate);
    # the winners are found by scattering update numbers the same way.
    x, indices, updates = ins
    ct_x = scatter(ct, indices, _shape.constant(ct, 0, updates.shape, updates.dtype),
                   axis=axis)
    xp, idx_shape = _shape.array_module(indices), shape_of(indices)
    ids = xp.arange(np.prod(idx_shape, dtype=np.int64), dtype=np.int64).reshape(idx_shape)
    winners = scatter(_shape.constant(indices, 0, (x.shape[axis],), np.int64), indices, ids,
                      axis=0)
    won = _ew.convert_element_type(_ew.eq(gather(winners, indices, axis=0), ids),
                                   new_dtype=updates.dtype)
    won = _shape.broadcast_in_dim(won, updates.shape,
                                  tuple(range(axis, axis + len(idx_shape))))
    return ct_x, None, _ew.mul(gather(ct, indices, axis=axis), won)


@scatter_p.def_jvp
def _scatter_jvp(tangents, primals, out, *, axis):
    # Linear in (x, updates) for fixed indices: scatter the tangents the same way.
    (tx, _, tu), (x, indices, updates) = tangents, primals
    if tx is None and tu is None:
        return None
    return scatter(instantiate(tx, x), indices, instantiate(tu, updates), axis=axis)


scatter_p.def_batch(_scatter_batch(scatter_p))


def scatter(x: Any, indices: Any, updates: Any, *, axis: int) -> Any:
    """A copy of ``x`` with ``updates`` written at ``indices`` along ``axis``.

    ``updates`` has gather's output shape. With duplicate indices the last one (in C order
    of ``indices``) wins, as in NumPy assignment; its gradient goes to that update only.
    """
    return bind(scatter_p, x, indices, updates, axis=int(axis))


# -- take_along and put_along: one position along an axis per row ---------------------------
# ``take_along(x, indices, axis=a)`` picks ONE element along axis ``a`` at every position of
# the other axes: ``out[i, j] = x[i, indices[i, j], j]`` (``i`` the axes before ``a``, ``j``
# those after), so ``indices`` has ``x``'s shape without axis ``a`` and so has the result.
# Unlike gather's clamping, an index outside ``[0, x.shape[a])`` picks nothing and gives 0
# (a class-index target's ``ignore_index`` needs no select). ``put_along(indices, updates,
# axis=a, size=n)`` is its transpose: zeros of ``updates.shape[:a] + (n,) + updates.shape[a:]``
# with ``updates[i, j]`` at ``[i, indices[i, j], j]`` where that index is in range. With one
# index per position no two updates meet, so the transpose needs no accumulation.

def _along_shape(name: str, indices: AbstractArray, axis: int, rank: int) -> None:
    if indices.dtype.kind not in "iu":
        raise DTypeError(f"{name} needs integer indices but got {indices}; convert them with "
                         ".astype(int).")
    if not 0 <= axis < rank:
        raise ShapeError(f"{name}: axis {axis} is out of range for an array of rank {rank}; "
                         f"use an axis in [0, {rank}).")


def _take_along_aval(x: AbstractArray, indices: AbstractArray, *, axis: int) -> AbstractArray:
    _along_shape("take_along", indices, axis, x.ndim)
    expected = x.shape[:axis] + x.shape[axis + 1:]
    if tuple(indices.shape) != expected:
        raise ShapeError(f"take_along of {fmt([x, indices])} along axis {axis} needs indices "
                         f"of shape {expected} (x's shape without that axis).")
    return AbstractArray(expected, x.dtype, x.weak_type)


def _in_range(xp: Any, indices: Any, n: int) -> Any:
    return (indices >= 0) & (indices < n)


def _take_along_impl(xp, x, indices, *, axis):
    n = x.shape[axis]
    if n == 0 or indices.size == 0:
        return xp.zeros(indices.shape, x.dtype)
    idx = xp.expand_dims(indices, axis)
    ok = _in_range(xp, idx, n)
    picked = xp.take_along_axis(x, xp.where(ok, idx, 0), axis=axis)
    return xp.squeeze(xp.where(ok, picked, xp.zeros((), x.dtype)), axis)


take_along_p = Primitive("take_along")
take_along_p.def_abstract_eval(_take_along_aval)
take_along_p.def_impl(_take_along_impl)
take_along_p.def_impl(_cuda.take_along, backend="cuda")
take_along_p.def_vjp(lambda ct, ins, out, *, axis: (
    put_along(ins[1], ct, axis=axis, size=ins[0].shape[axis]), None), save_inputs=(1,))
take_along_p.def_jvp(linear_jvp(take_along_p))


@take_along_p.def_batch
def _take_along_batch(args, dims, *, axis):
    (x, indices), (dx, di) = args, dims
    size = batch_size(args, dims)
    return take_along(batch_at(x, dx, 0, size), batch_at(indices, di, 0, size),
                      axis=axis + 1), 0


def take_along(x: Any, indices: Any, *, axis: int) -> Any:
    """``x[i, indices[i, j], j]`` along ``axis``: one element per position of the other
    axes, 0 where the index is outside ``[0, x.shape[axis])`` (see the section comment).

    Example:
        >>> take_along(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1, -100]), axis=1)
        array([2., 0.])
    """
    return bind(take_along_p, x, indices, axis=int(axis))


def _put_along_aval(indices: AbstractArray, updates: AbstractArray, *, axis: int,
                    size: int) -> AbstractArray:
    _along_shape("put_along", indices, axis, updates.ndim + 1)
    if tuple(indices.shape) != tuple(updates.shape):
        raise ShapeError(f"put_along needs indices and updates of one shape but got "
                         f"{fmt([indices, updates])}.")
    if size < 0:
        raise ShapeError(f"put_along: size must be non-negative but got {size}.")
    return AbstractArray(updates.shape[:axis] + (size,) + updates.shape[axis:], updates.dtype,
                         updates.weak_type)


def put_one_per_row(xp: Any, shape: tuple, axis: int, indices: Any, values: Any) -> Any:
    """Zeros of ``shape`` with ``values[i, j]`` at ``[i, indices[i, j], j]`` (indices in
    range, one per position of the other axes), for NumPy and CuPy alike."""
    pre, n, post = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    out = xp.zeros((pre, n, post), values.dtype)
    out[xp.arange(pre)[:, None], xp.reshape(indices, (pre, post)),
        xp.arange(post)[None, :]] = xp.reshape(values, (pre, post))
    return xp.reshape(out, shape)


def _put_along_impl(xp, indices, updates, *, axis, size):
    shape = updates.shape[:axis] + (size,) + updates.shape[axis:]
    if size == 0 or updates.size == 0:
        return xp.zeros(shape, updates.dtype)
    ok = _in_range(xp, indices, size)  # out of range: write a 0 at the row's own index 0
    return put_one_per_row(xp, shape, axis, xp.where(ok, indices, 0),
                           xp.where(ok, updates, xp.zeros((), updates.dtype)))


put_along_p = Primitive("put_along")
put_along_p.def_abstract_eval(_put_along_aval)
put_along_p.def_impl(_put_along_impl)
put_along_p.def_impl(_cuda.put_along, backend="cuda")
put_along_p.def_vjp(lambda ct, ins, out, *, axis, size: (
    None, take_along(ct, ins[0], axis=axis)), save_inputs=(0,))
put_along_p.def_jvp(lambda tangents, primals, out, *, axis, size: None if tangents[1] is None
                    else put_along(primals[0], tangents[1], axis=axis, size=size))


@put_along_p.def_batch
def _put_along_batch(args, dims, *, axis, size):
    (indices, updates), (di, du) = args, dims
    n = batch_size(args, dims)
    return put_along(batch_at(indices, di, 0, n), batch_at(updates, du, 0, n), axis=axis + 1,
                     size=size), 0


def put_along(indices: Any, updates: Any, *, axis: int, size: int) -> Any:
    """The transpose of :func:`take_along`: zeros with ``axis`` of length ``size`` inserted,
    and ``updates[i, j]`` at ``[i, indices[i, j], j]`` (out-of-range indices are dropped).

    Example:
        >>> put_along(np.array([1, 5]), np.array([2.0, 3.0]), axis=1, size=2)
        array([[0., 2.],
               [0., 0.]])
    """
    return bind(put_along_p, indices, updates, axis=int(axis), size=int(size))
