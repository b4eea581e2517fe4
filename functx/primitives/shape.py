"""Shape primitives: reshape, broadcasting, transposes, squeezing, slicing, padding (and
reversal, ``rev``, defined in :mod:`functx.primitives.rev` and re-exported here).

Static parameters are tuples of non-negative ints (the wrappers normalise negative axes).
``dynamic_slice`` and ``dynamic_update_slice`` take their start indices as extra scalar
integer operands after the arrays, so they may be traced; like ``lax.dynamic_slice`` they
clamp the start indices so that the window lies inside the array. Their generic
implementations read the start indices on the host (``int(i)``), which synchronises a GPU;
a CUDA kernel taking device indices can override them.

Every primitive here is linear, so its JVP rule applies it to the tangents (zeros stand in
for absent tangents of the other operands). Batching rules keep the batch axis where it is
when the primitive allows (adjusting axes, permutations and bounds), except ``reshape``,
which moves it to the front. With batched start indices, ``dynamic_slice`` and
``dynamic_update_slice`` become a ``gather``/``scatter`` of the windows' flat positions
(clamped per example exactly as the eager implementations clamp).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from functx.backends import backend_of, backends, get_default_device
from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import _batching as _b
from functx.primitives import elementwise as _ew
from functx.primitives import indexing as _ix
from functx.primitives import reduction as _red
from functx.primitives._util import fmt, ndim_of, normalize_axes, same_dtypes, shape_of
from functx.primitives.cuda import shape as _cuda
from functx.primitives.rev import rev, rev_p  # noqa: F401  (reversal: its own module)
from functx.registry import Primitive
from functx.registry.rewrite import Rewrite
from functx.tracing import Tracer, bind

_pyslice = slice  # this module defines a `slice` primitive wrapper


# -- helpers shared by the rules of the structural families --------------------------------

def array_module(like: Any) -> Any:
    """The array module (numpy or cupy) of the device ``like`` lives on.

    Tracers are looked through to the value they carry; abstract values (abstract tracers)
    and Python scalars give the default device's (:func:`functx.default_device`; NumPy
    unless inside one).
    """
    while type(like) is Tracer:
        like = like._value
    b = backend_of(like)
    return b.xp if b is not None else get_default_device().backend.xp


def on_device_of(like: Any, host: np.ndarray) -> Any:
    """A host constant (index array, mask, fill value) on the device ``like`` lives on.

    The copy goes through that device's backend (functx/backends/_cuda.py), so a CUDA graph
    may capture it (CuPy's own copy cannot be captured). Under an abstract trace the device
    is not known and the constant stays a NumPy array.
    """
    xp = array_module(like)
    if xp is np:
        return host
    for b in backends().values():
        if b.xp is xp:
            return b.from_host(host)
    return xp.asarray(host)


_SCALARS: dict = {}


def _memoisable(value: Any) -> bool:
    """Python ints and bools, and floats other than NaN and -0.0 (keys a dict can tell apart)."""
    t = type(value)
    return t is int or t is bool or (t is float and value == value
                                     and (value != 0 or math.copysign(1.0, value) > 0))


def _scalar(xp: Any, value: Any, dtype: Any) -> Any:
    """A read-only 0-d array of ``value`` on the array module ``xp`` (memoised)."""
    key = (xp, type(value), value, dtype) if _memoisable(value) else None
    out = None if key is None else _SCALARS.get(key)
    if out is None:
        out = xp.full((), value, dtype=dtype)
        if xp is np:
            out.flags.writeable = False
        if key is not None:
            if len(_SCALARS) > 1024:
                _SCALARS.clear()
            _SCALARS[key] = out
    return out


def constant(like: Any, fill_value: Any, shape: Sequence[int], dtype: Any) -> Any:
    """A read-only array of ``shape`` filled with ``fill_value``, on ``like``'s device.

    A constant depends on no traced value, so it is made directly (a broadcast view of a
    memoised scalar), without recording anything.
    """
    xp = array_module(like)
    out = _scalar(xp, fill_value, dtype)
    return out if not shape else xp.broadcast_to(out, tuple(shape))


def transpose_if_needed(x: Any, permutation: Sequence[int]) -> Any:
    """``transpose(x, permutation)``, or ``x`` itself when the permutation is the identity."""
    permutation = tuple(permutation)
    return x if permutation == tuple(range(len(permutation))) else transpose(x, permutation)


def _check_start_indices(name: str, x: AbstractArray, idx: Sequence[AbstractArray]) -> None:
    if len(idx) != x.ndim:
        raise ShapeError(f"{name} needs one start index per axis of {x} ({x.ndim}) but got "
                         f"{len(idx)}.")
    for i in idx:
        if i.shape != () or i.dtype.kind not in "iu":
            raise DTypeError(f"{name}: start indices must be scalar integers but got "
                             f"{fmt(idx)}. Pass Python ints or 0-d integer arrays.")


def _clamped_starts(shape: Sequence[int], sizes: Sequence[int], idx: Sequence[Any]) -> list:
    return [int(min(max(int(i), 0), n - s)) for i, n, s in zip(idx, shape, sizes)]


def _start_operand(i: Any) -> Any:
    # Python ints stay device-free scalars (a 0-d int64 literal in traces).
    return int(i) if isinstance(i, (int, np.integer)) else i


def _batch_position(positions: Sequence[int], d: int, out_ndim: int) -> int:
    """Where the batch goes in the output of a primitive that places operand axis ``i`` at
    output axis ``positions[i]`` (increasing), when the operand's batch is at axis ``d``: as
    close to ``d`` as the order of the other axes allows (an axis of an example's output)."""
    lo = positions[d - 1] + 1 if d > 0 else 0
    hi = positions[d] if d < len(positions) else out_ndim
    return min(max(d, lo), hi)


def _flat(x: Any) -> Any:
    """``x`` as a vector (C order)."""
    return reshape(x, (math.prod(shape_of(x)),))


def _window_positions(x_shape: Sequence[int], x_dim: int | None, sizes: Sequence[int],
                      starts: Sequence[Any], start_dims: Sequence[int | None],
                      size: int) -> Any:
    """The flat positions, in ``_flat(x)``, of each example's dynamic window.

    ``x`` has shape ``x_shape`` with its batch at ``x_dim`` (None: shared by the examples);
    the window of ``sizes`` starts at ``starts`` (scalars, or ``(size,)`` arrays where
    ``start_dims`` is 0), clamped into the array as in :func:`dynamic_slice`. Returns int64
    positions of shape ``(size, *sizes)``: the index grid is a constant and only the start
    indices are traced, so this is loop-free and differentiable code for gather/scatter.
    """
    strides = [math.prod(x_shape[i + 1:]) for i in range(len(x_shape))]
    example = [(n, st) for i, (n, st) in enumerate(zip(x_shape, strides)) if i != x_dim]
    like = next((s for s in starts if not isinstance(s, (int, np.integer))), None)
    xp = array_module(like)
    rank = len(sizes)
    grid = xp.zeros((1,) * (rank + 1), np.int64)
    if x_dim is not None:
        grid = grid + (xp.arange(size, dtype=np.int64) * strides[x_dim]).reshape(
            (size,) + (1,) * rank)
    offset, terms = 0, []
    for k, (s, (n, st), i, d) in enumerate(zip(sizes, example, starts, start_dims)):
        grid = grid + (xp.arange(s, dtype=np.int64) * st).reshape(
            (1,) * (k + 1) + (s,) + (1,) * (rank - k - 1))
        if isinstance(i, (int, np.integer)):
            offset += min(max(int(i), 0), n - s) * st
            continue
        if i.dtype != np.int64:
            i = _ew.convert_element_type(i, new_dtype=np.dtype(np.int64))
        i = _ew.clamp(constant(i, 0, (), np.int64), i, constant(i, n - s, (), np.int64))
        term = _ew.mul(i, constant(i, st, (), np.int64))
        terms.append(term if d is None else reshape(term, (size,) + (1,) * rank))
    grid = xp.broadcast_to(grid + offset, (size,) + tuple(sizes))
    if not terms:
        return grid
    total = terms[0]
    for t in terms[1:]:
        total = _ew.add(total, t)
    return _ew.add(grid, total)


# -- reshape ---------------------------------------------------------------------------------

reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
def _reshape_aval(x: AbstractArray, *, new_sizes: tuple[int, ...]) -> AbstractArray:
    if any(d < 0 for d in new_sizes) or int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise ShapeError(f"reshape cannot turn {x} ({x.size} elements) into shape "
                         f"{new_sizes}; the number of elements must stay the same.")
    return AbstractArray(new_sizes, x.dtype, x.weak_type)


reshape_p.def_impl(lambda xp, x, *, new_sizes: xp.reshape(x, new_sizes))
reshape_p.def_vjp(lambda ct, ins, out, *, new_sizes: (reshape(ct, ins[0].shape),))
reshape_p.def_jvp(_b.linear_jvp(reshape_p))
reshape_p.def_step_sum(linear=True)


# compiler rules: a reshape that only inserts or removes unit axes is an index map (the
# input's other axes map in order to the output's; its unit axes, never read, map to 0), so
# a row statistic kept as (K, 1) fuses with its row kernel; any other reshape is none (None)
def _unit_reshape_axes(avals: tuple, out: AbstractArray, *, new_sizes: tuple) -> tuple | None:
    big = [i for i, d in enumerate(new_sizes) if d != 1]
    if not new_sizes or [d for d in avals[0].shape if d != 1] != [new_sizes[i] for i in big]:
        return None
    it = iter(big)
    return (tuple(next(it) if d != 1 else 0 for d in avals[0].shape),)


reshape_p.def_scalar(lambda x, *, out, new_sizes: x, operand_axes=_unit_reshape_axes)


@reshape_p.def_simplify
def _reshape_simplify(args, out, *, new_sizes):
    """``reshape`` to the same shape -> ``x``; a reshape of a reshape -> one reshape."""
    x = args[0]
    if x.shape == tuple(new_sizes):
        return x
    prod = x.producer
    if prod is not None and prod.prim is reshape_p:
        src = prod.args[0]
        return src if src.shape == tuple(new_sizes) else \
            Rewrite(reshape_p, (src,), {"new_sizes": tuple(new_sizes)})
    return None


@reshape_p.def_batch
def _reshape_batch(args, dims, *, new_sizes):
    x = _b.moveaxis(args[0], dims[0], 0)  # the batch must lead for C-order regrouping
    return reshape(x, (shape_of(x)[0],) + new_sizes), 0


def reshape(x: Any, new_sizes: Sequence[int]) -> Any:
    """``x`` with shape ``new_sizes`` (same number of elements, C order)."""
    return bind(reshape_p, x, new_sizes=tuple(int(d) for d in new_sizes))


# -- broadcast_in_dim ------------------------------------------------------------------------

broadcast_in_dim_p = Primitive("broadcast_in_dim")


@broadcast_in_dim_p.def_abstract_eval
def _bid_aval(x: AbstractArray, *, shape: tuple[int, ...],
              broadcast_dimensions: tuple[int, ...]) -> AbstractArray:
    ok = len(broadcast_dimensions) == x.ndim and all(
        0 <= d < len(shape) for d in broadcast_dimensions) and all(
        a < b for a, b in zip(broadcast_dimensions, broadcast_dimensions[1:])) and all(
        x.shape[i] in (1, shape[d]) for i, d in enumerate(broadcast_dimensions))
    if not ok:
        raise ShapeError(f"broadcast_in_dim cannot broadcast {x} to shape {shape} with "
                         f"broadcast_dimensions={broadcast_dimensions}: operand axis i must "
                         "map to a strictly increasing output axis of equal size or have size 1.")
    return AbstractArray(shape, x.dtype, x.weak_type)


@broadcast_in_dim_p.def_impl
def _bid_impl(xp, x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return xp.broadcast_to(xp.reshape(x, expanded), shape)


@broadcast_in_dim_p.def_vjp
def _bid_vjp(ct, ins, out, *, shape, broadcast_dimensions):
    x = ins[0]
    sum_axes = tuple(i for i in range(len(shape)) if i not in broadcast_dimensions) + tuple(
        d for i, d in enumerate(broadcast_dimensions) if x.shape[i] == 1 and shape[d] != 1)
    summed = _red.reduce_sum(ct, tuple(sorted(sum_axes))) if sum_axes else ct
    return (reshape(summed, x.shape) if tuple(summed.shape) != tuple(x.shape) else summed,)


broadcast_in_dim_p.def_jvp(_b.linear_jvp(broadcast_in_dim_p))
# compiler rules: an element of the output is the element of x at the mapped axes
broadcast_in_dim_p.def_scalar(
    lambda x, *, out, shape, broadcast_dimensions: x,
    operand_axes=lambda avals, out, *, shape, broadcast_dimensions: (broadcast_dimensions,))


@broadcast_in_dim_p.def_simplify
def _bid_simplify(args, out, *, shape, broadcast_dimensions):
    """A broadcast to the operand's own shape -> ``x``; a broadcast of a broadcast -> one."""
    x = args[0]
    if x.shape == tuple(shape):
        return x
    prod = x.producer
    if prod is not None and prod.prim is broadcast_in_dim_p:
        inner = prod.params["broadcast_dimensions"]
        dims = tuple(broadcast_dimensions[d] for d in inner)
        return Rewrite(broadcast_in_dim_p, (prod.args[0],),
                       {"shape": tuple(shape), "broadcast_dimensions": dims})
    return None


@broadcast_in_dim_p.def_batch
def _bid_batch(args, dims, *, shape, broadcast_dimensions):
    (x,), (d,) = args, dims
    out_d = _batch_position(broadcast_dimensions, d, len(shape))
    moved = tuple(b + (b >= out_d) for b in broadcast_dimensions)
    return broadcast_in_dim(x, shape[:out_d] + (shape_of(x)[d],) + shape[out_d:],
                            moved[:d] + (out_d,) + moved[d:]), out_d


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    """``x`` broadcast to ``shape``; operand axis i becomes output axis broadcast_dimensions[i]."""
    return bind(broadcast_in_dim_p, x, shape=tuple(int(d) for d in shape),
                broadcast_dimensions=tuple(int(d) for d in broadcast_dimensions))


# -- transpose -------------------------------------------------------------------------------

transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
def _transpose_aval(x: AbstractArray, *, permutation: tuple[int, ...]) -> AbstractArray:
    if sorted(permutation) != list(range(x.ndim)):
        raise ShapeError(f"transpose: {permutation} is not a permutation of the axes of {x}; "
                         f"give each of 0..{x.ndim - 1} exactly once.")
    return AbstractArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


transpose_p.def_impl(lambda xp, x, *, permutation: xp.transpose(x, permutation))
transpose_p.def_vjp(lambda ct, ins, out, *, permutation:
                    (transpose(ct, tuple(np.argsort(permutation).tolist())),))
transpose_p.def_jvp(_b.linear_jvp(transpose_p))
transpose_p.def_step_sum(linear=True)


@transpose_p.def_simplify
def _transpose_simplify(args, out, *, permutation):
    """The identity permutation -> ``x``; a transpose of a transpose -> one (or none)."""
    x = args[0]
    if tuple(permutation) == tuple(range(len(permutation))):
        return x
    prod = x.producer
    if prod is not None and prod.prim is transpose_p:
        inner = prod.params["permutation"]
        perm = tuple(inner[p] for p in permutation)
        if perm == tuple(range(len(perm))):
            return prod.args[0]
        return Rewrite(transpose_p, (prod.args[0],), {"permutation": perm})
    return None


@transpose_p.def_batch
def _transpose_batch(args, dims, *, permutation):
    (x,), (d,) = args, dims
    moved = [p + (p >= d) for p in permutation]
    return transpose_if_needed(x, moved[:d] + [d] + moved[d:]), d


def transpose(x: Any, permutation: Sequence[int]) -> Any:
    """``x`` with its axes permuted: output axis i is input axis ``permutation[i]``."""
    return bind(transpose_p, x, permutation=tuple(int(p) for p in permutation))


# -- squeeze, expand_dims --------------------------------------------------------------------

squeeze_p = Primitive("squeeze")


@squeeze_p.def_abstract_eval
def _squeeze_aval(x: AbstractArray, *, dimensions: tuple[int, ...]) -> AbstractArray:
    normalize_axes("squeeze", dimensions, x.ndim)
    if any(d < 0 or x.shape[d] != 1 for d in dimensions):
        raise ShapeError(f"squeeze can only remove axes of size 1 (non-negative axis numbers) "
                         f"but got dimensions={dimensions} for {x}.")
    shape = tuple(d for i, d in enumerate(x.shape) if i not in dimensions)
    return AbstractArray(shape, x.dtype, x.weak_type)


squeeze_p.def_impl(lambda xp, x, *, dimensions: xp.reshape(
    x, tuple(d for i, d in enumerate(x.shape) if i not in dimensions)))
squeeze_p.def_vjp(lambda ct, ins, out, *, dimensions: (expand_dims(ct, dimensions),))
squeeze_p.def_jvp(_b.linear_jvp(squeeze_p))


@squeeze_p.def_batch
def _squeeze_batch(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    return (squeeze(x, tuple(i + (i >= d) for i in dimensions)),
            d - sum(i < d for i in dimensions))


def squeeze(x: Any, dimensions: Sequence[int]) -> Any:
    """``x`` without the size-1 axes ``dimensions`` (negative axes count from the end)."""
    return bind(squeeze_p, x, dimensions=tuple(
        sorted(normalize_axes("squeeze", tuple(int(d) for d in dimensions), ndim_of(x)))))


expand_dims_p = Primitive("expand_dims")


@expand_dims_p.def_abstract_eval
def _expand_dims_aval(x: AbstractArray, *, dimensions: tuple[int, ...]) -> AbstractArray:
    out_ndim = x.ndim + len(dimensions)
    if normalize_axes("expand_dims", dimensions, out_ndim) != dimensions:
        raise ShapeError(f"expand_dims: dimensions must be non-negative; got {dimensions}.")
    rest = iter(x.shape)
    shape = tuple(1 if i in dimensions else next(rest) for i in range(out_ndim))
    return AbstractArray(shape, x.dtype, x.weak_type)


@expand_dims_p.def_impl
def _expand_dims_impl(xp, x, *, dimensions):
    rest = iter(x.shape)
    return xp.reshape(x, tuple(1 if i in dimensions else next(rest)
                               for i in range(x.ndim + len(dimensions))))


expand_dims_p.def_vjp(lambda ct, ins, out, *, dimensions: (squeeze(ct, dimensions),))
expand_dims_p.def_jvp(_b.linear_jvp(expand_dims_p))


@expand_dims_p.def_batch
def _expand_dims_batch(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    out_ndim = ndim_of(x) - 1 + len(dimensions)  # of one example's output
    kept = [i for i in range(out_ndim) if i not in dimensions]
    out_d = _batch_position(kept, d, out_ndim)
    return expand_dims(x, tuple(e + (e >= out_d) for e in dimensions)), out_d


def expand_dims(x: Any, dimensions: Sequence[int]) -> Any:
    """``x`` with size-1 axes inserted at output positions ``dimensions``."""
    dims = tuple(int(d) for d in dimensions)
    return bind(expand_dims_p, x, dimensions=tuple(
        sorted(normalize_axes("expand_dims", dims, ndim_of(x) + len(dims)))))


# -- slice -----------------------------------------------------------------------------------

slice_p = Primitive("slice")


def _slice_shape(start, limit, strides) -> tuple[int, ...]:
    strides = strides or (1,) * len(start)
    return tuple(max(0, -(-(hi - lo) // s)) for lo, hi, s in zip(start, limit, strides))


@slice_p.def_abstract_eval
def _slice_aval(x: AbstractArray, *, start_indices, limit_indices, strides) -> AbstractArray:
    n = x.ndim
    ok = len(start_indices) == n and len(limit_indices) == n and (
        strides is None or len(strides) == n and all(s >= 1 for s in strides)) and all(
        0 <= lo <= hi <= d for lo, hi, d in zip(start_indices, limit_indices, x.shape))
    if not ok:
        raise ShapeError(f"slice of {x} with start_indices={start_indices}, limit_indices="
                         f"{limit_indices}, strides={strides} is invalid: give one entry per "
                         "axis with 0 <= start <= limit <= size and strides >= 1.")
    return AbstractArray(_slice_shape(start_indices, limit_indices, strides), x.dtype,
                         x.weak_type)


@slice_p.def_impl
def _slice_impl(xp, x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    return x[tuple(_pyslice(lo, hi, s) for lo, hi, s in zip(start_indices, limit_indices,
                                                             strides))]


@slice_p.def_vjp
def _slice_vjp(ct, ins, out, *, start_indices, limit_indices, strides):
    shape = ins[0].shape
    strides = strides or (1,) * len(shape)
    # The last element taken on each axis (or start, where nothing was taken).
    real_limits = [lo + (0 if m == 0 else 1 + (m - 1) * s)
                   for lo, m, s in zip(start_indices, ct.shape, strides)]
    config = tuple((lo, d - hi, s - 1) for lo, hi, d, s in zip(start_indices, real_limits,
                                                                shape, strides))
    return (pad(ct, constant(ct, 0, (), ct.dtype), config),)


slice_p.def_jvp(_b.linear_jvp(slice_p))


@slice_p.def_batch
def _slice_batch(args, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = args, dims
    strides = None if strides is None else strides[:d] + (1,) + strides[d:]
    return bind(slice_p, x, start_indices=start_indices[:d] + (0,) + start_indices[d:],
                limit_indices=limit_indices[:d] + (shape_of(x)[d],) + limit_indices[d:],
                strides=strides), d


def slice(x: Any, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None) -> Any:
    """``x[start:limit:stride]`` on every axis (static bounds; strides >= 1)."""
    strides = None if strides is None or all(int(s) == 1 for s in strides) else tuple(
        int(s) for s in strides)
    return bind(slice_p, x, start_indices=tuple(int(i) for i in start_indices),
                limit_indices=tuple(int(i) for i in limit_indices), strides=strides)


# -- dynamic_slice, dynamic_update_slice -----------------------------------------------------

dynamic_slice_p = Primitive("dynamic_slice")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_aval(x: AbstractArray, *idx: AbstractArray,
                        slice_sizes: tuple[int, ...]) -> AbstractArray:
    _check_start_indices("dynamic_slice", x, idx)
    if len(slice_sizes) != x.ndim or not all(0 <= s <= d for s, d in zip(slice_sizes, x.shape)):
        raise ShapeError(f"dynamic_slice: slice_sizes={slice_sizes} does not fit {x}; give "
                         "one size per axis, each between 0 and the axis size.")
    return AbstractArray(slice_sizes, x.dtype, x.weak_type)


@dynamic_slice_p.def_impl
def _dynamic_slice_impl(xp, x, *idx, slice_sizes):
    starts = _clamped_starts(x.shape, slice_sizes, idx)
    return x[tuple(_pyslice(s, s + n) for s, n in zip(starts, slice_sizes))]


@dynamic_slice_p.def_vjp(save_inputs=_pyslice(1, None))  # only the start indices
def _dynamic_slice_vjp(ct, ins, out, *, slice_sizes):
    x, idx = ins[0], ins[1:]
    zeros = constant(ct, 0, x.shape, x.dtype)
    return (dynamic_update_slice(zeros, ct, idx),) + (None,) * len(idx)


dynamic_slice_p.def_jvp(_b.linear_jvp(dynamic_slice_p))  # start indices have no tangents


@dynamic_slice_p.def_batch
def _dynamic_slice_batch(args, dims, *, slice_sizes):
    (x, *idx), (d, *idx_dims) = args, dims
    size = _b.batch_size(args, dims)
    if all(i is None for i in idx_dims):  # one window for all examples: a wider slice
        return bind(dynamic_slice_p, x, *idx[:d], 0, *idx[d:],
                    slice_sizes=slice_sizes[:d] + (size,) + slice_sizes[d:]), d
    # A window per example: gather its elements by their flat positions (no copy of x).
    where = _window_positions(shape_of(x), d, slice_sizes, idx, idx_dims, size)
    return _ix.gather(_flat(x), where, axis=0), 0


def dynamic_slice(x: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> Any:
    """The window of ``x`` of shape ``slice_sizes`` starting at ``start_indices``.

    Start indices are scalar integers (Python ints, 0-d arrays or traced scalars), clamped
    so that the window lies inside ``x`` (as in ``lax.dynamic_slice``).
    """
    return bind(dynamic_slice_p, x, *map(_start_operand, start_indices),
                slice_sizes=tuple(int(s) for s in slice_sizes))


dynamic_update_slice_p = Primitive("dynamic_update_slice")


@dynamic_update_slice_p.def_abstract_eval
def _dus_aval(x: AbstractArray, update: AbstractArray, *idx: AbstractArray) -> AbstractArray:
    same_dtypes("dynamic_update_slice", x, update)
    _check_start_indices("dynamic_update_slice", x, idx)
    if update.ndim != x.ndim or not all(u <= d for u, d in zip(update.shape, x.shape)):
        raise ShapeError(f"dynamic_update_slice: the update {update} does not fit into {x}; "
                         "it needs the same rank and no larger sizes.")
    return x


@dynamic_update_slice_p.def_impl
def _dus_impl(xp, x, update, *idx):
    starts = _clamped_starts(x.shape, update.shape, idx)
    out = xp.array(x, copy=True)
    out[tuple(_pyslice(s, s + n) for s, n in zip(starts, update.shape))] = update
    return out


@dynamic_update_slice_p.def_vjp(save_inputs=_pyslice(2, None))  # only the start indices
def _dus_vjp(ct, ins, out):
    update, idx = ins[1], ins[2:]
    zeros = constant(ct, 0, update.shape, update.dtype)
    return (dynamic_update_slice(ct, zeros, idx),
            dynamic_slice(ct, idx, update.shape)) + (None,) * len(idx)


@dynamic_update_slice_p.def_jvp
def _dus_jvp(tangents, primals, out):
    t_x, t_update = tangents[:2]
    if t_x is None and t_update is None:
        return None
    return bind(dynamic_update_slice_p, _b.instantiate(t_x, primals[0]),
                _b.instantiate(t_update, primals[1]), *primals[2:])


@dynamic_update_slice_p.def_batch
def _dus_batch(args, dims):
    (x, update, *idx), (dx, du, *idx_dims) = args, dims
    size = _b.batch_size(args, dims)
    if all(i is None for i in idx_dims):  # one window for all examples: a wider update
        d = du if dx is None else dx
        x, update = _b.batch_at(x, dx, d, size), _b.batch_at(update, du, d, size)
        return bind(dynamic_update_slice_p, x, update, *idx[:d], 0, *idx[d:]), d
    # A window per example: scatter the updates to their flat positions in a copy of x.
    d = 0 if dx is None else dx
    x = _b.batch_at(x, dx, d, size)
    update = _b.batch_at(update, du, 0, size)
    where = _window_positions(shape_of(x), d, shape_of(update)[1:], idx, idx_dims, size)
    flat = _ix.scatter(_flat(x), where, update, axis=0)
    return reshape(flat, shape_of(x)), d


def dynamic_update_slice(x: Any, update: Any, start_indices: Sequence[Any]) -> Any:
    """A copy of ``x`` with the window at ``start_indices`` replaced by ``update``.

    Start indices are clamped so that the window lies inside ``x``, as in
    :func:`dynamic_slice`.
    """
    return bind(dynamic_update_slice_p, x, update, *map(_start_operand, start_indices))


# -- concatenate -----------------------------------------------------------------------------

concatenate_p = Primitive("concatenate")


@concatenate_p.def_abstract_eval
def _concatenate_aval(*xs: AbstractArray, dimension: int) -> AbstractArray:
    if not xs:
        raise ShapeError("concatenate needs at least one array.")
    dtype = same_dtypes("concatenate", *xs)
    x0 = xs[0]
    if not 0 <= dimension < x0.ndim or any(
            x.ndim != x0.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, x0.shape))
                                     if i != dimension) for x in xs):
        raise ShapeError(f"concatenate along axis {dimension} needs arrays of one rank (at "
                         f"least 1) whose sizes agree on every other axis, but got {fmt(xs)}.")
    shape = list(x0.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return AbstractArray(shape, dtype, all(x.weak_type for x in xs))


concatenate_p.def_impl(lambda xp, *xs, dimension: xp.concatenate(xs, axis=dimension))
concatenate_p.def_impl(_cuda.concatenate, backend="cuda")  # capturable in CUDA graphs


@concatenate_p.def_simplify
def _concatenate_simplify(args, out, *, dimension):
    """Operands that are concatenates along the same axis are spliced in (one copy)."""
    flat, spliced = [], False
    for a in args:
        prod = a.producer
        if prod is not None and prod.prim is concatenate_p and prod.params["dimension"] == dimension:
            flat.extend(prod.args)
            spliced = True
        else:
            flat.append(a)
    return Rewrite(concatenate_p, tuple(flat), {"dimension": dimension}) if spliced else None


@concatenate_p.def_vjp
def _concatenate_vjp(ct, ins, out, *, dimension):
    cts, offset = [], 0
    for x in ins:
        start = [0] * len(x.shape)
        start[dimension] = offset
        offset += x.shape[dimension]
        limit = list(ct.shape)
        limit[dimension] = offset
        cts.append(slice(ct, start, limit))
    return tuple(cts)


@concatenate_p.def_jvp
def _concatenate_jvp(tangents, primals, out, *, dimension):
    if all(t is None for t in tangents):
        return None
    return bind(concatenate_p, *map(_b.instantiate, tangents, primals), dimension=dimension)


@concatenate_p.def_batch
def _concatenate_batch(args, dims, *, dimension):
    d = next(i for i in dims if i is not None)
    size = _b.batch_size(args, dims)
    xs = [_b.batch_at(x, i, d, size) for x, i in zip(args, dims)]
    return bind(concatenate_p, *xs, dimension=dimension + (dimension >= d)), d


def concatenate(xs: Sequence[Any], dimension: int) -> Any:
    """The arrays ``xs`` (one dtype, one rank) joined along axis ``dimension``."""
    xs = tuple(xs)
    ndim = ndim_of(xs[0]) if xs else 1
    return bind(concatenate_p, *xs, dimension=normalize_axes("concatenate", (int(dimension),),
                                                             ndim)[0])


# -- pad -------------------------------------------------------------------------------------

pad_p = Primitive("pad")


def _padded_size(n: int, lo: int, hi: int, interior: int) -> int:
    return lo + hi + n + max(n - 1, 0) * interior


@pad_p.def_abstract_eval
def _pad_aval(x: AbstractArray, padding_value: AbstractArray, *,
              padding_config: tuple) -> AbstractArray:
    same_dtypes("pad", x, padding_value)
    if padding_value.shape != ():
        raise ShapeError(f"pad needs a scalar padding value but got {padding_value}.")
    if len(padding_config) != x.ndim or any(c[2] < 0 for c in padding_config):
        raise ShapeError(f"pad of {x} needs one (low, high, interior) triple per axis with "
                         f"interior >= 0 but got {padding_config}.")
    shape = tuple(_padded_size(n, *c) for n, c in zip(x.shape, padding_config))
    if any(d < 0 for d in shape):
        raise ShapeError(f"pad of {x} with {padding_config} would give the negative shape "
                         f"{shape}; negative low/high padding cannot crop more than the axis.")
    return AbstractArray(shape, x.dtype, x.weak_type)


@pad_p.def_impl
def _pad_impl(xp, x, padding_value, *, padding_config):
    # Pad with the non-negative parts of low/high, then crop the negative parts away.
    grown = [_padded_size(n, max(lo, 0), max(hi, 0), i)
             for n, (lo, hi, i) in zip(x.shape, padding_config)]
    out = xp.empty(grown, dtype=x.dtype)
    out[...] = padding_value
    out[tuple(_pyslice(max(lo, 0), max(lo, 0) + _padded_size(n, 0, 0, i), i + 1)
              for n, (lo, hi, i) in zip(x.shape, padding_config))] = x
    return out[tuple(_pyslice(max(-lo, 0), g - max(-hi, 0))
                     for g, (lo, hi, _) in zip(grown, padding_config))]


@pad_p.def_vjp
def _pad_vjp(ct, ins, out, *, padding_config):
    unpadded = pad(ct, constant(ct, 0, (), ct.dtype),
                   tuple((-lo, -hi, 0) for lo, hi, _ in padding_config))
    ct_x = slice(unpadded, (0,) * ct.ndim, unpadded.shape,
                 tuple(i + 1 for _, _, i in padding_config))
    every = tuple(range(ct.ndim))
    ct_value = _ew.sub(_red.reduce_sum(ct, every), _red.reduce_sum(ct_x, every))
    return ct_x, ct_value


@pad_p.def_jvp
def _pad_jvp(tangents, primals, out, *, padding_config):
    # pad is linear in (x, padding_value) together.
    if tangents[0] is None and tangents[1] is None:
        return None
    return bind(pad_p, *map(_b.instantiate, tangents, primals), padding_config=padding_config)


@pad_p.def_batch
def _pad_batch(args, dims, *, padding_config):
    (x, value), (dx, dv) = args, dims
    d = 0 if dx is None else dx
    config = padding_config if dx is None else (
        padding_config[:d] + ((0, 0, 0),) + padding_config[d:])
    if dv is None:
        return bind(pad_p, x, value, padding_config=config), d
    # One padding value per example: pad with zeros, then select the padded positions.
    padded = bind(pad_p, x, constant(x, 0, (), value.dtype), padding_config=config)
    example = shape_of(x) if dx is None else shape_of(x)[:d] + shape_of(x)[d + 1:]
    inside = bind(pad_p, constant(x, True, example, np.bool_),
                  constant(x, False, (), np.bool_), padding_config=padding_config)
    rank = len(padding_config)
    if dx is not None:
        inside = expand_dims(inside, (d,))
    value = reshape(value, (1,) * d + (shape_of(value)[0],) + (1,) * (rank - d))
    return _ew.select(inside, padded, value), d


def pad(x: Any, padding_value: Any, padding_config: Sequence[Sequence[int]]) -> Any:
    """``x`` padded with ``padding_value`` (a scalar of ``x``'s dtype).

    ``padding_config`` holds one ``(low, high, interior)`` triple per axis: ``interior``
    values go between neighbouring elements, ``low``/``high`` at the ends; negative
    ``low``/``high`` crop instead. A Python scalar ``padding_value`` is converted to
    ``x``'s dtype.
    """
    if isinstance(padding_value, (bool, int, float, np.generic)) and hasattr(x, "dtype"):
        padding_value = constant(x, padding_value, (), x.dtype)
    return bind(pad_p, x, padding_value,
                padding_config=tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config))
