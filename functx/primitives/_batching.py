"""Helpers for batching rules (``Primitive.def_batch``) and forward-mode rules (``def_jvp``).

A batching rule gets ``(args, dims, **params)`` where ``dims[i]`` is the batch axis of
``args[i]`` or None, and returns ``(out, out_dim)``. These helpers move or materialise batch
axes with functx operations (so rules stay differentiable and nest under ``vmap``) and build
the rules shared by whole families of primitives.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from functx.primitives import shape as _shape
from functx.primitives._util import ndim_of, shape_of
from functx.registry import Primitive


def batch_size(args: Sequence[Any], dims: Sequence[int | None]) -> int:
    """The size of the batch: the length of the batch axis of any batched argument."""
    for x, d in zip(args, dims):
        if d is not None:
            return shape_of(x)[d]
    raise ValueError("batch_size: no argument is batched.")


def moveaxis(x: Any, src: int, dst: int) -> Any:
    """``x`` with axis ``src`` moved to position ``dst`` (no operation if they are equal)."""
    n = ndim_of(x)
    src, dst = src % n, dst % n
    if src == dst:
        return x
    perm = [i for i in range(n) if i != src]
    perm.insert(dst, src)
    return _shape.transpose(x, tuple(perm))


def to_front(x: Any, d: int | None, size: int | None = None) -> Any:
    """``x`` with its batch axis first; an unbatched ``x`` (``d`` None) is broadcast to a
    batch of ``size`` (which must then be given)."""
    if d is None:
        shape = shape_of(x)
        return _shape.broadcast_in_dim(x, (size,) + tuple(shape),
                                       tuple(range(1, len(shape) + 1)))
    return moveaxis(x, d, 0)


def to_axis(x: Any, d: int | None, dst: int, size: int) -> Any:
    """``x`` with its batch axis at ``dst`` (broadcasting an unbatched ``x``)."""
    return moveaxis(to_front(x, d, size), 0, dst)


def all_to_front(args: Sequence[Any], dims: Sequence[int | None]) -> list:
    """Every argument with its batch axis first, unbatched ones broadcast to the batch."""
    size = batch_size(args, dims)
    return [to_front(x, d, size) for x, d in zip(args, dims)]


def elementwise_batch(prim: Primitive) -> Callable:
    """The batching rule of a broadcasting elementwise primitive.

    Where every batched argument has its batch at the same axis ``d`` and the same rank, and
    no unbatched argument reaches axis ``d`` from the right (NumPy broadcasting aligns
    trailing axes), the primitive applies as it is and the result is batched at ``d``.
    Otherwise the batch axes move to the front and batched arguments of lower rank get unit
    axes after it, so that they broadcast against the others as their examples do.
    """
    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple:
        ranks = [ndim_of(x) - (d is not None) for x, d in zip(args, dims)]
        rank = max(ranks)  # the rank of one example's result
        batched = [(x, d, r) for x, d, r in zip(args, dims, ranks) if d is not None]
        d0 = batched[0][1]
        if all(d == d0 and r == rank for _, d, r in batched) and all(
                r <= rank - d0 for x, d, r in zip(args, dims, ranks) if d is None):
            return prim.bind(*args, **params), d0
        new = []
        for x, d, r in zip(args, dims, ranks):
            if d is not None:
                x = moveaxis(x, d, 0)
                if r < rank:
                    shape = shape_of(x)
                    x = _shape.reshape(x, (shape[0],) + (1,) * (rank - r) + tuple(shape[1:]))
            new.append(x)
        return prim.bind(*new, **params), 0
    return rule


def unary_batch(prim: Primitive) -> Callable:
    """The batching rule of a primitive that acts on each element (or along no axis): it
    applies as it is and the batch stays where it was."""
    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple:
        return prim.bind(*args, **params), dims[0]
    return rule


def linear_jvp(prim: Primitive) -> Callable:
    """The JVP rule of a primitive that is linear in its single differentiable input (the
    first): the output tangent is the primitive applied to the input tangent, with any other
    inputs (indices, fill values without tangents) passed as they are."""
    def rule(tangents: Sequence[Any], primals: Sequence[Any], out: Any, **params: Any) -> Any:
        if tangents[0] is None:
            return None
        return prim.bind(tangents[0], *primals[1:], **params)
    return rule


def zeros_like(x: Any) -> Any:
    """A zero (read-only, broadcast) array shaped and typed like ``x``, on its device."""
    return _shape.constant(x, 0, shape_of(x), x.dtype)


def instantiate(t: Any, like: Any) -> Any:
    """A tangent ``t``, or zeros shaped like ``like`` where ``t`` is None (a zero tangent)."""
    return zeros_like(like) if t is None else t


def broadcast_to_shape(t: Any, shape: Sequence[int]) -> Any:
    """``t`` broadcast to ``shape`` as NumPy broadcasting aligns it (trailing axes), or ``t``
    itself where it already has that shape: for JVP rules whose tangent comes from an
    operand smaller than the broadcast output."""
    shape = tuple(shape)
    t_shape = shape_of(t)
    if t_shape == shape:
        return t
    lead = len(shape) - len(t_shape)
    return _shape.broadcast_in_dim(t, shape, tuple(range(lead, len(shape))))


def add_tangents(a: Any, b: Any) -> Any:
    """``a + b`` for tangents that may be None (zero): None only where both are."""
    if a is None:
        return b
    if b is None:
        return a
    # elementwise imports this module (a cycle within the primitives' layer)
    from functx.primitives import elementwise as _ew

    return _ew.add(a, b)


def batch_at(x: Any, d: int | None, dst: int, size: int) -> Any:
    """``x`` with its batch axis at ``dst``: moved there from ``d`` (no operation if it is
    there already), or, for an unbatched ``x`` (``d`` None), broadcast to a batch of ``size``
    along a new axis ``dst`` (one operation, where :func:`to_axis` would take two)."""
    if d is not None:
        return moveaxis(x, d, dst)
    shape = tuple(shape_of(x))
    return _shape.broadcast_in_dim(x, shape[:dst] + (size,) + shape[dst:],
                                   tuple(i + (i >= dst) for i in range(len(shape))))
