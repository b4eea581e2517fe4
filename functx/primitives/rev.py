"""``rev``: an array reversed along some axes (a shape primitive; ``functx.primitives.shape``
re-exports it). Linear: its VJP and JVP reverse the cotangent and tangent."""
from __future__ import annotations

from typing import Any, Sequence

from functx.errors import ShapeError
from functx.ir import AbstractArray
from functx.primitives import _batching as _b
from functx.primitives._util import ndim_of, normalize_axes
from functx.registry import Primitive
from functx.tracing import bind

__all__ = ["rev", "rev_p"]

rev_p = Primitive("rev")


@rev_p.def_abstract_eval
def _rev_aval(x: AbstractArray, *, dimensions: tuple[int, ...]) -> AbstractArray:
    if normalize_axes("rev", dimensions, x.ndim) != dimensions:
        raise ShapeError(f"rev: dimensions must be non-negative; got {dimensions} for {x}.")
    return x


rev_p.def_impl(lambda xp, x, *, dimensions: x[tuple(
    slice(None, None, -1 if i in dimensions else 1) for i in range(x.ndim))])
rev_p.def_vjp(lambda ct, ins, out, *, dimensions: (rev(ct, dimensions),))
rev_p.def_jvp(_b.linear_jvp(rev_p))


@rev_p.def_batch
def _rev_batch(args, dims, *, dimensions):
    (x,), (d,) = args, dims
    return rev(x, tuple(i + (i >= d) for i in dimensions)), d


def rev(x: Any, dimensions: Sequence[int]) -> Any:
    """``x`` reversed along the axes ``dimensions``."""
    return bind(rev_p, x, dimensions=tuple(
        sorted(normalize_axes("rev", tuple(int(d) for d in dimensions), ndim_of(x)))))
