"""Shape primitives: reshape, broadcast_in_dim, transpose, squeeze, slicing, padding..."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from functx.errors import ShapeError
from functx.ir import AbstractArray
from functx.primitives import reduction as _red
from functx.registry import Primitive
from functx.tracing import bind

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


def reshape(x: Any, new_sizes: Sequence[int]) -> Any:
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


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    return bind(broadcast_in_dim_p, x, shape=tuple(shape),
                broadcast_dimensions=tuple(broadcast_dimensions))
