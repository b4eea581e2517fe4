"""CUDA implementations of indexing primitives (functx/primitives/indexing.py).

* ``scatter``: CuPy's fancy assignment with duplicate indices is unordered, so a kernel
  picks, for every target position, the update written last (the largest update number,
  found with ``atomicMax``) and only that one is written: NumPy's last-write-wins order.
* ``scatter_add``: ``cupyx.scatter_add`` (atomic adds) for the dtypes CUDA has atomics
  for; int64 adds as uint64 (the same bits in two's complement), complex as pairs of
  reals, narrower integers and bool in 32 bits, bfloat16 in float32 (rounded once).
  Atomic float additions happen in no fixed order, so float results may differ from the
  CPU in the last bits.
* ``take_along``/``put_along``: one elementwise kernel each (the generic rules take several
  passes: range mask, clamped take, select).

Start indices of ``dynamic_slice``/``dynamic_update_slice`` are read on the host by the
generic rules, which synchronises with the GPU once per call.

Each function here is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy,
registered next to its primitive with ``p.def_impl(fn, backend="cuda")``. Importing this
module needs no CuPy; kernels are compiled on first use and kept (functx/primitives/cuda/
_kernels.py).
"""
from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from functx.primitives.cuda._kernels import elementwise_kernel

# Elementwise kernels by name: (in_params, out_params, operation).
_KERNELS = {
    # For each index position j (C order), winner[t] = the largest j writing target t.
    "functx_scatter_winner": ("int64 t", "raw int32 winner", "atomicMax(&winner[t], (int)i);"),
    # Over the updates viewed as (pre, m, post): write those whose position won.
    "functx_scatter_write": (
        "raw T u, raw int64 idx, raw int32 winner, int64 m, int64 post, int64 n",
        "raw T out",
        """
        long long q = i % post;
        long long j = (i / post) % m;
        long long p = i / (post * m);
        long long t = idx[j];
        if (winner[t] == (int)j) out[(p * n + t) * post + q] = u[i];
        """),
    # x viewed as (pre, n, post), indices and the result as (pre, post).
    "functx_take_along": (
        "raw T x, int64 t, int64 n, int64 post", "T y",
        """
        if (t >= 0 && t < n) {
            const long long q = i % post;
            y = x[((i - q) * n + t * post) + q];
        } else {
            y = (T)0;
        }
        """),
    "functx_put_along": (
        "T u, int64 t, int64 n, int64 post", "raw T out",
        """
        if (t >= 0 && t < n) {
            const long long q = i % post;
            out[((i - q) * n + t * post) + q] = u;
        }
        """),
}


def _kernel(xp: Any, name: str) -> Any:
    return elementwise_kernel(xp, name, *_KERNELS[name])


def scatter(xp: Any, x: Any, indices: Any, updates: Any, *, axis: int) -> Any:
    """A copy of ``x`` with ``updates`` written at ``indices`` along ``axis``; with
    duplicate indices the last one in C order wins (as in NumPy)."""
    out = xp.array(x, copy=True, order="C")
    n = x.shape[axis]
    m = int(indices.size)
    pre = math.prod(x.shape[:axis])
    post = math.prod(x.shape[axis + 1:])
    if m == 0 or n == 0 or pre * post == 0:
        return out
    if m >= 2**31:
        raise ValueError("scatter on CUDA supports fewer than 2**31 indices.")
    idx = xp.clip(xp.reshape(indices, (m,)).astype(np.int64), 0, n - 1)
    winner = xp.full((n,), -1, dtype=np.int32)
    _kernel(xp, "functx_scatter_winner")(idx, winner)
    upd = xp.array(updates, order="C").reshape(-1)
    _kernel(xp, "functx_scatter_write")(upd, idx, winner, m, post, n, out.reshape(-1),
                                        size=upd.size)
    return out


def take_along(xp: Any, x: Any, indices: Any, *, axis: int) -> Any:
    """One element of ``x`` along ``axis`` per row, 0 for out-of-range indices: one kernel."""
    n = x.shape[axis]
    if n == 0 or indices.size == 0:
        return xp.zeros(indices.shape, x.dtype)
    post = math.prod(x.shape[axis + 1:])
    return _kernel(xp, "functx_take_along")(
        xp.ascontiguousarray(x), indices.astype(np.int64, copy=False), n, post)


def put_along(xp: Any, indices: Any, updates: Any, *, axis: int, size: int) -> Any:
    """The transpose of :func:`take_along`: one kernel writing into zeros."""
    out = xp.zeros(updates.shape[:axis] + (size,) + updates.shape[axis:], updates.dtype)
    if size == 0 or updates.size == 0:
        return out
    post = math.prod(updates.shape[axis:])
    _kernel(xp, "functx_put_along")(updates, indices.astype(np.int64, copy=False), size, post,
                                    out)
    return out


_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_ATOMIC_ADD = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int32,
                                              np.uint32, np.uint64))


def scatter_add(xp: Any, x: Any, indices: Any, updates: Any, *, axis: int) -> Any:
    """A copy of ``x`` with ``updates`` added at ``indices`` along ``axis`` (duplicates
    accumulate)."""
    import cupyx

    dt = np.dtype(x.dtype)
    n = x.shape[axis]
    if indices.size == 0 or x.size == 0:
        return xp.array(x, copy=True)
    where = (slice(None),) * axis + (xp.clip(indices, 0, n - 1),)
    if dt in _ATOMIC_ADD:
        out = xp.array(x, copy=True, order="C")
        cupyx.scatter_add(out, where, updates)
        return out
    if dt == np.int64:  # two's complement: adding the same bits as uint64 is the same sum
        out = xp.array(x, copy=True, order="C")
        cupyx.scatter_add(out.view(np.uint64), where,
                          xp.array(updates, order="C").view(np.uint64))
        return out
    if dt.kind == "c":  # real and imaginary parts separately
        real = np.float32 if dt == np.complex64 else np.float64
        out = xp.array(x, copy=True, order="C")
        # (a 0-d array cannot be viewed as a pair of reals: view its 1-d reshape)
        upd = xp.array(updates, order="C").reshape(-1).view(real)
        cupyx.scatter_add(out.view(real).reshape(out.shape + (2,)), where,
                          upd.reshape(tuple(updates.shape) + (2,)))
        return out
    if dt == _BFLOAT16:  # no bfloat16 atomics in cupyx: accumulate in float32, round once
        out = x.astype(np.float32)
        cupyx.scatter_add(out, where, updates.astype(np.float32))
        return out.astype(dt)
    if dt.kind in "biu":  # bool, 8- and 16-bit integers: add in 32 bits, cast back
        wide = np.uint32 if dt.kind == "u" else np.int32
        out = x.astype(wide)
        cupyx.scatter_add(out, where, updates.astype(wide))
        return out != 0 if dt.kind == "b" else out.astype(dt)
    raise TypeError(f"scatter_add has no CUDA implementation for dtype {dt}.")
