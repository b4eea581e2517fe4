"""Reduction primitives over a tuple of axes (no keepdims: functx.numpy reshapes)."""
from __future__ import annotations

from typing import Any, Sequence

from functx.ir import AbstractArray
from functx.primitives import shape as _shape
from functx.primitives._util import normalize_axes
from functx.registry import Primitive
from functx.tracing import bind


def reduced_aval(name: str, x: AbstractArray, axes: tuple[int, ...], dtype: Any = None) -> AbstractArray:
    """The abstract value of reducing ``x`` over ``axes`` (which must be normalised)."""
    if normalize_axes(name, axes, x.ndim) != tuple(axes):
        from functx.errors import ShapeError

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


reduce_sum_p = Primitive("reduce_sum")
reduce_sum_p.def_abstract_eval(lambda x, *, axes: reduced_aval("reduce_sum", x, axes))
reduce_sum_p.def_impl(lambda xp, x, *, axes: xp.sum(x, axis=axes, dtype=x.dtype))
reduce_sum_p.def_vjp(lambda ct, ins, out, *, axes: (expand_reduced(ct, ins[0], axes),))


def reduce_sum(x: Any, axes: Sequence[int]) -> Any:
    return bind(reduce_sum_p, x, axes=tuple(axes))
