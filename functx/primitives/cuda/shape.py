"""CUDA implementations of shape primitives (functx/primitives/shape.py).

* ``concatenate``: CuPy's ``concatenate`` of many operands copies a table of their
  addresses from the host to the device, which a capturing stream refuses (a jitted step
  that flattens a model's gradients into one bucket could then not become a CUDA graph).
  While a graph is being captured (``functx.backends._cuda.CAPTURING``), the operands are
  copied into their slices of the result one by one instead (device-to-device copies, part
  of the graph); otherwise CuPy's single kernel runs.

Each function here is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy,
registered next to its primitive with ``p.def_impl(fn, backend="cuda")``. Importing this
module needs no CuPy.
"""
from __future__ import annotations

from typing import Any

from functx.backends._cuda import CAPTURING


def concatenate(xp: Any, *xs: Any, dimension: int) -> Any:
    """``xp.concatenate(xs, axis=dimension)``, capturable (see the module docstring)."""
    if not CAPTURING[0] or len(xs) < 2:
        return xp.concatenate(xs, axis=dimension)
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    out = xp.empty(tuple(shape), xs[0].dtype)
    index = [slice(None)] * len(shape)
    start = 0
    for x in xs:
        stop = start + x.shape[dimension]
        if stop > start:
            index[dimension] = slice(start, stop)
            out[tuple(index)] = x
        start = stop
    return out
