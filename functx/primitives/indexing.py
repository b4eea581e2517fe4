"""Indexing primitives along one axis: gather (take), scatter_add and scatter (set).

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

from typing import Any

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.primitives._util import fmt, same_dtypes, shape_of
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


def gather(x: Any, indices: Any, *, axis: int) -> Any:
    """``np.take(x, indices, axis)`` with out-of-range indices clamped (see the module doc)."""
    return bind(gather_p, x, indices, axis=int(axis))


# -- scatter_add -----------------------------------------------------------------------------

scatter_add_p = Primitive("scatter_add")
scatter_add_p.def_abstract_eval(_scatter_aval("scatter_add"))


@scatter_add_p.def_impl
def _scatter_add_impl(xp, x, indices, updates, *, axis):
    out = xp.array(x, copy=True)
    xp.add.at(out, _where(_clip(xp, indices, x.shape[axis]), axis), updates)
    return out


@scatter_add_p.def_vjp(save_inputs=(1,))
def _scatter_add_vjp(ct, ins, out, *, axis):
    return ct, None, gather(ct, ins[1], axis=axis)


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


def scatter(x: Any, indices: Any, updates: Any, *, axis: int) -> Any:
    """A copy of ``x`` with ``updates`` written at ``indices`` along ``axis``.

    ``updates`` has gather's output shape. With duplicate indices the last one (in C order
    of ``indices``) wins, as in NumPy assignment; its gradient goes to that update only.
    """
    return bind(scatter_p, x, indices, updates, axis=int(axis))
