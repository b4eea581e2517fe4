"""Reduction primitives over a tuple of axes (no keepdims: functx.numpy reshapes).

``axes`` is always a tuple of non-negative, distinct, in-range ints. Reducing over an empty
axis gives the reduction's identity: 0 for sums, 1 for products, -inf/+inf (the integer
minimum/maximum, False/True for bool) for maxima/minima; ``argmax``/``argmin`` of an empty
axis are errors, as in NumPy. Sums, products and cumulative sums of half-precision arrays
(float16, bfloat16) accumulate in float32 and are rounded once.
"""
from __future__ import annotations

from typing import Any, Sequence

import ml_dtypes
import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.primitives._batching import linear_jvp
from functx.primitives._util import compute_dtype, is_float, normalize_axes
from functx.registry import Primitive
from functx.registry.rewrite import Rewrite, literal
from functx.registry.scalar import where
from functx.tracing import bind


def reduced_aval(name: str, x: AbstractArray, axes: tuple[int, ...], dtype: Any = None) -> AbstractArray:
    """The abstract value of reducing ``x`` over ``axes`` (which must be normalised)."""
    if normalize_axes(name, axes, x.ndim) != tuple(axes):
        raise ShapeError(f"{name}: axes must be non-negative, distinct and in range; got "
                         f"{axes} for {x}. (functx.numpy normalises axes for you.)")
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return AbstractArray(shape, x.dtype if dtype is None else dtype, x.weak_type)


def kept_shape(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with the reduced ``axes`` set to 1 (the keepdims shape)."""
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def expand_reduced(ct: Any, in_aval: Any, axes: tuple[int, ...]) -> Any:
    """Broadcast a cotangent of a reduction back over the reduced axes."""
    kept = [i for i in range(len(in_aval.shape)) if i not in axes]
    return _shape.broadcast_in_dim(ct, tuple(in_aval.shape), tuple(kept))


def _reduces_empty(x: Any, axes: tuple[int, ...]) -> bool:
    return any(x.shape[a] == 0 for a in axes)


def _reduced_shape(x: Any, axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _axes_batch(prim: Primitive):
    """The batching rule of a reduction over ``axes``: the example's axes shift past the
    batch axis ``d`` (nothing moves), and the batch lands after the kept axes before it."""
    def rule(args, dims, *, axes):
        d = dims[0]
        return (bind(prim, args[0], axes=tuple(a + (a >= d) for a in axes)),
                d - sum(a < d for a in axes))
    return rule


# -- reduce_sum ------------------------------------------------------------------------------

reduce_sum_p = Primitive("reduce_sum")
reduce_sum_p.def_abstract_eval(lambda x, *, axes: reduced_aval("reduce_sum", x, axes))
# Half precision (float16, bfloat16) accumulates in float32, rounded once: NumPy sums
# bfloat16 in bfloat16 (20000 x 0.1 gives 32) and cumsum rounds every partial sum.
_ACCUMULATE = {np.dtype(np.float16): np.dtype(np.float32),
               np.dtype(ml_dtypes.bfloat16): np.dtype(np.float32)}


def _sum_impl(xp, x, *, axes):
    acc = _ACCUMULATE.get(x.dtype)
    if acc is None:
        return xp.sum(x, axis=axes, dtype=x.dtype)
    return xp.sum(x, axis=axes, dtype=acc).astype(x.dtype)


def _sum_impl_cpu(xp, x, *, axes):
    # NumPy's own: the ufunc method, without np.sum's Python-level dispatch (a hot path).
    acc = _ACCUMULATE.get(x.dtype)
    if acc is None:
        return np.add.reduce(x, axis=axes, dtype=x.dtype)
    return np.add.reduce(x, axis=axes, dtype=acc).astype(x.dtype)


reduce_sum_p.def_impl(_sum_impl)
reduce_sum_p.def_impl(_sum_impl_cpu, backend="cpu")
reduce_sum_p.def_vjp(lambda ct, ins, out, *, axes: (expand_reduced(ct, ins[0], axes),))
reduce_sum_p.def_jvp(linear_jvp(reduce_sum_p))
reduce_sum_p.def_batch(_axes_batch(reduce_sum_p))
# summed over a loop's steps: the steps' axis is one more axis to sum (scan's VJP)
reduce_sum_p.def_step_sum(lambda stacked, x, *, axes: bind(
    reduce_sum_p, x, axes=(0,) + tuple(a + 1 for a in axes)))


def _real_float(dtype: Any) -> bool:
    return np.dtype(dtype).kind == "f" and np.dtype(dtype).itemsize in (4, 8)


# compiler rules: the fused loop accumulates float32 in float64 (one rounding at the end)
reduce_sum_p.def_scalar_reduction(
    combine=lambda acc, x: acc + x if _real_float(x.dtype) else None,
    identity=lambda dtype: 0, axes=lambda *, axes: axes,
    accumulator=lambda dtype: np.dtype(np.float64))


@reduce_sum_p.def_simplify
def _sum_simplify(args, out, *, axes):
    """``sum over no axes -> x``; a sum over exactly the axes a ``broadcast_in_dim`` added
    (the cotangent plumbing of broadcasting) -> ``x * count`` (exact when count is a power
    of two, else rounded once, as the sum's repeated additions are not)."""
    x = args[0]
    if not axes and x.shape == tuple(out.shape) and x.dtype == out.dtype:
        return x
    prod = x.producer
    if prod is None or prod.prim is not _shape.broadcast_in_dim_p or x.dtype.kind != "f":
        return None
    src, dims = prod.args[0], prod.params["broadcast_dimensions"]
    added = tuple(i for i in range(len(x.shape)) if i not in dims)
    if added != tuple(axes) or src.shape != tuple(out.shape) or src.dtype != out.dtype:
        return None
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if count == 1:
        return src
    if count & (count - 1):  # not a power of two: x * n and n additions may round apart
        return None
    return Rewrite(_ew.mul_p, (src, literal(count, out.dtype)), {})


def reduce_sum(x: Any, axes: Sequence[int]) -> Any:
    """The sum of ``x`` over ``axes`` (non-negative, distinct ints), in ``x``'s dtype."""
    return bind(reduce_sum_p, x, axes=tuple(axes))


# -- reduce_max, reduce_min ------------------------------------------------------------------

def _extremum_identity(dtype: np.dtype, is_max: bool) -> Any:
    if dtype == np.bool_:
        return not is_max
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if is_max else info.max
    return -np.inf if is_max else np.inf


def _make_extremum_impl(is_max: bool):
    reduce_name, bool_name = ("max", "any") if is_max else ("min", "all")

    def impl(xp, x, *, axes):
        if x.dtype == np.bool_:
            return getattr(xp, bool_name)(x, axis=axes)
        if _reduces_empty(x, axes):
            return xp.full(_reduced_shape(x, axes), _extremum_identity(x.dtype, is_max),
                           dtype=x.dtype)
        return getattr(xp, reduce_name)(x, axis=axes)
    return impl


def _extremum_vjp(ct, ins, out, *, axes):
    """The cotangent goes to the maxima (minima), split evenly among ties, as in JAX."""
    x = ins[0]
    if not is_float(x):  # any/all, integer max/min: nothing to differentiate
        return (None,)
    if _reduces_empty(x, axes):  # x has no elements: any array of its shape is the answer
        return (expand_reduced(ct, x, axes),)
    hit = _ew.convert_element_type(_ew.eq(x, expand_reduced(out, x, axes)), new_dtype=x.dtype)
    count = reduce_sum(hit, axes)
    return (_ew.mul(expand_reduced(_ew.div(ct, count), x, axes), hit),)


def _extremum_jvp(tangents, primals, out, *, axes):
    """The mean of the tangents over the tied maxima (minima): the transpose of the VJP's
    even split. Over an empty axis there is nothing to follow: a zero tangent."""
    t, x = tangents[0], primals[0]
    if t is None:  # also every integer and bool input
        return None
    if _reduces_empty(x, axes):
        return reduce_sum(t, axes)  # zeros of the output's shape
    hit = _ew.convert_element_type(_ew.eq(x, expand_reduced(out, x, axes)), new_dtype=x.dtype)
    return _ew.div(reduce_sum(_ew.mul(t, hit), axes), reduce_sum(hit, axes))


reduce_max_p = Primitive("reduce_max")
reduce_max_p.def_abstract_eval(lambda x, *, axes: reduced_aval("reduce_max", x, axes))
reduce_max_p.def_impl(_make_extremum_impl(is_max=True))
reduce_max_p.def_vjp(_extremum_vjp, save_inputs=(0,), save_output=True)
reduce_max_p.def_jvp(_extremum_jvp)
reduce_max_p.def_batch(_axes_batch(reduce_max_p))
reduce_max_p.def_scalar_reduction(  # NaN propagates, as NumPy's max
    combine=lambda acc, x: where((x > acc) | x.ne(x), x, acc) if _real_float(x.dtype) else None,
    identity=lambda dtype: -np.inf, axes=lambda *, axes: axes)


def reduce_max(x: Any, axes: Sequence[int]) -> Any:
    """The maximum of ``x`` over ``axes`` (on bool: any).

    NaN propagates. The gradient is split evenly among tied maxima (and, consistently, the
    forward-mode tangent is the mean of the tied maxima's tangents). Over an empty axis the
    result is the identity (-inf, the integer minimum, or False).
    """
    return bind(reduce_max_p, x, axes=tuple(axes))


reduce_min_p = Primitive("reduce_min")
reduce_min_p.def_abstract_eval(lambda x, *, axes: reduced_aval("reduce_min", x, axes))
reduce_min_p.def_impl(_make_extremum_impl(is_max=False))
reduce_min_p.def_vjp(_extremum_vjp, save_inputs=(0,), save_output=True)
reduce_min_p.def_jvp(_extremum_jvp)
reduce_min_p.def_batch(_axes_batch(reduce_min_p))
reduce_min_p.def_scalar_reduction(
    combine=lambda acc, x: where((x < acc) | x.ne(x), x, acc) if _real_float(x.dtype) else None,
    identity=lambda dtype: np.inf, axes=lambda *, axes: axes)


def reduce_min(x: Any, axes: Sequence[int]) -> Any:
    """The minimum of ``x`` over ``axes`` (on bool: all); see :func:`reduce_max`."""
    return bind(reduce_min_p, x, axes=tuple(axes))


# -- reduce_prod -----------------------------------------------------------------------------

def _shift_last(a: Any, k: int, one: Any) -> Any:
    """``a`` shifted by ``k`` places along its last axis, filled with ``one`` in front."""
    config = ((0, 0, 0),) * (a.ndim - 1) + ((k, -k, 0),)
    return _shape.pad(a, one, config)


def _exclusive_cumprod_last(a: Any, one: Any) -> Any:
    """Products of all entries before each one along the last axis (log-depth scan)."""
    p = _shift_last(a, 1, one)
    k = 1
    while k < a.shape[-1]:
        p = _ew.mul(p, _shift_last(p, k, one))
        k *= 2
    return p


def _products_of_others(a: Any) -> Any:
    """For each entry along the last axis, the product of all the other entries.

    Built from exclusive prefix and suffix products, so it needs no division (zeros are
    fine) and, being made of primitives, it is differentiable again.
    """
    one = _shape.constant(a, 1, (), a.dtype)
    last = (a.ndim - 1,)
    before = _exclusive_cumprod_last(a, one)
    after = _shape.rev(_exclusive_cumprod_last(_shape.rev(a, last), one), last)
    return _ew.mul(before, after)


reduce_prod_p = Primitive("reduce_prod")
reduce_prod_p.def_abstract_eval(lambda x, *, axes: reduced_aval("reduce_prod", x, axes))
reduce_prod_p.def_impl(lambda xp, x, *, axes: xp.prod(x, axis=axes, dtype=compute_dtype(
    x.dtype) if is_float(x) else x.dtype).astype(x.dtype, copy=False))


@reduce_prod_p.def_vjp(save_inputs=(0,))
def _reduce_prod_vjp(ct, ins, out, *, axes):
    # Move the reduced axes last, flatten them, and multiply the cotangent by the product
    # of the other entries of each reduced group.
    x = ins[0]
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    perm = kept + tuple(axes)
    rest = tuple(x.shape[i] for i in kept)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    flat = _shape.reshape(_shape.transpose_if_needed(x, perm), rest + (n,))
    ct_flat = _shape.broadcast_in_dim(ct, rest + (n,), tuple(range(len(rest))))
    g = _ew.mul(ct_flat, _products_of_others(flat))
    g = _shape.reshape(g, tuple(x.shape[i] for i in perm))
    return (_shape.transpose_if_needed(g, tuple(np.argsort(perm).tolist())),)


@reduce_prod_p.def_jvp
def _reduce_prod_jvp(tangents, primals, out, *, axes):
    # Mirrors the VJP: each tangent entry times the product of the other entries of its
    # reduced group, summed over the group (no division, so zeros in x are fine).
    t, x = tangents[0], primals[0]
    if t is None or not axes:
        return t
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    perm = kept + tuple(axes)
    rest = tuple(x.shape[i] for i in kept)
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    flat = _shape.reshape(_shape.transpose_if_needed(x, perm), rest + (n,))
    t_flat = _shape.reshape(_shape.transpose_if_needed(t, perm), rest + (n,))
    return reduce_sum(_ew.mul(t_flat, _products_of_others(flat)), (len(rest),))


reduce_prod_p.def_batch(_axes_batch(reduce_prod_p))


def reduce_prod(x: Any, axes: Sequence[int]) -> Any:
    """The product of ``x`` over ``axes``, in ``x``'s dtype (1 over an empty axis).

    The gradient is exact when some entries are zero (it never divides by ``x``).
    """
    return bind(reduce_prod_p, x, axes=tuple(axes))


# -- argmax, argmin --------------------------------------------------------------------------

def _index_reduction(name: str) -> Primitive:
    """argmax or argmin: the primitive with its shape rule, impl, zero VJP and JVP, and
    batching rule."""
    p = Primitive(name)

    @p.def_abstract_eval
    def rule(x: AbstractArray, *, axis: int, index_dtype: np.dtype) -> AbstractArray:
        if not 0 <= axis < x.ndim:
            raise ShapeError(f"{name}: axis {axis} is out of range for {x}; use an axis in "
                             f"[0, {x.ndim}) (functx.numpy normalises negative axes).")
        if x.shape[axis] == 0:
            raise ShapeError(f"{name} of {x} over axis {axis}, which is empty, is undefined. "
                             "Take it over a non-empty axis.")
        if np.dtype(index_dtype).kind not in "iu":
            raise DTypeError(f"{name} needs an integer index_dtype but got {index_dtype}; "
                             "use np.int64 or np.int32.")
        return AbstractArray(tuple(d for i, d in enumerate(x.shape) if i != axis), index_dtype)

    p.def_impl(lambda xp, x, *, axis, index_dtype:
               getattr(xp, name)(x, axis=axis).astype(index_dtype, copy=False))
    p.def_zero_vjp()
    p.def_jvp(lambda tangents, primals, out, *, axis, index_dtype: None)  # integer output

    @p.def_batch
    def batch(args, dims, *, axis, index_dtype):
        d = dims[0]
        return (bind(p, args[0], axis=axis + (axis >= d), index_dtype=index_dtype),
                d - (axis < d))
    return p


argmax_p = _index_reduction("argmax")


def argmax(x: Any, *, axis: int, index_dtype: Any = np.int64) -> Any:
    """The index of the first maximum of ``x`` along ``axis`` (NaN counts as the maximum)."""
    return bind(argmax_p, x, axis=int(axis), index_dtype=np.dtype(index_dtype))


argmin_p = _index_reduction("argmin")


def argmin(x: Any, *, axis: int, index_dtype: Any = np.int64) -> Any:
    """The index of the first minimum of ``x`` along ``axis`` (NaN counts as the minimum)."""
    return bind(argmin_p, x, axis=int(axis), index_dtype=np.dtype(index_dtype))


# -- cumsum ----------------------------------------------------------------------------------

cumsum_p = Primitive("cumsum")


@cumsum_p.def_abstract_eval
def _cumsum_aval(x: AbstractArray, *, axis: int, reverse: bool) -> AbstractArray:
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"cumsum: axis {axis} is out of range for {x}; use an axis in "
                         f"[0, {x.ndim}) (functx.numpy normalises negative axes).")
    if x.dtype == np.bool_:
        raise DTypeError(f"cumsum of a bool array ({x}) is undefined at the primitive level; "
                         "convert it to an integer dtype first (functx.numpy.cumsum does).")
    return x


@cumsum_p.def_impl
def _cumsum_impl(xp, x, *, axis, reverse):
    acc = _ACCUMULATE.get(x.dtype, x.dtype)  # half precision: in float32, rounded once
    if not reverse:
        return xp.cumsum(x, axis=axis, dtype=acc).astype(x.dtype, copy=False)
    return xp.flip(xp.cumsum(xp.flip(x, axis), axis=axis, dtype=acc), axis).astype(
        x.dtype, copy=False)


cumsum_p.def_vjp(lambda ct, ins, out, *, axis, reverse:
                 (cumsum(ct, axis=axis, reverse=not reverse),))
cumsum_p.def_jvp(linear_jvp(cumsum_p))
cumsum_p.def_batch(lambda args, dims, *, axis, reverse: (
    bind(cumsum_p, args[0], axis=axis + (axis >= dims[0]), reverse=reverse), dims[0]))


def cumsum(x: Any, *, axis: int, reverse: bool = False) -> Any:
    """Inclusive running sums of ``x`` along ``axis`` (from the end when ``reverse``)."""
    return bind(cumsum_p, x, axis=int(axis), reverse=bool(reverse))
