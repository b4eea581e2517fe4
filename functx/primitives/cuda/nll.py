"""CUDA implementations of ``class_nll`` and ``class_nll_grad`` (functx/primitives/nll.py).

``class_nll`` is one kernel (two for a reduction of more than ``_NLL_ONE_BLOCK`` positions:
per-block sums, then a kernel adding them up, a fixed order either way); ``class_nll_grad``
is zeros and one kernel writing each position's entry. Dtypes other than float32/float64
and empty operands go to the generic implementation (``fallback``).

Each function here is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy,
registered next to its primitive with ``p.def_impl(fn, backend="cuda")``. Importing this
module needs no CuPy; kernels are compiled on first use and kept (functx/primitives/cuda/
_kernels.py).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from functx.primitives.cuda._kernels import CTYPE, ROW_HELPERS, raw_function

_SOURCE = ROW_HELPERS + r"""
// class_nll (functx/primitives/nll.py), x viewed as (pre, n, post), targets t as (pre, post),
// target weight w[t * ws] (ws 0: one weight for all).

// -wt * x[i, t] at each position i (0 for t outside [0, n)).
extern "C" __global__ void functx_nll_none(const T* x, const long long* t, const T* w, T* y,
                                           long long m, long long n, long long post, int ws) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += (long long)gridDim.x * blockDim.x) {
        const long long c = t[i];
        T v = 0;
        if (c >= 0 && c < n) {
            const long long q = i % post;
            v = -(w[c * ws] * x[(i - q) * n + c * post + q]);
        }
        y[i] = v;
    }
}

// The value of a reduction from the sums num = sum wt * picked and den = sum wt.
__device__ __forceinline__ T functx_nll_result(T num, T den, int mode) {
    return mode == 0 ? -num : (mode == 1 ? -num / den : den);
}

// This block's sums of wt * x[i, t] (if has_x) and of wt over its share of the positions:
// with one block, out[0] = the result for mode (0: -num, 1: -num / den, 2: den); with
// several, out[2 b], out[2 b + 1] = block b's (num, den) for functx_nll_finish.
extern "C" __global__ void functx_nll_reduce(const T* x, const long long* t, const T* w,
                                             long long m, long long n, long long post,
                                             int ws, int has_x, int mode, T* out) {
    __shared__ T buf[33];
    T num = 0, den = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += (long long)gridDim.x * blockDim.x) {
        const long long c = t[i];
        if (c >= 0 && c < n) {
            const T wt = w[c * ws];
            if (has_x) {
                const long long q = i % post;
                num += wt * x[(i - q) * n + c * post + q];
            }
            den += wt;
        }
    }
    num = functx_block_sum(num, buf);
    den = functx_block_sum(den, buf);
    if (threadIdx.x == 0) {
        if (gridDim.x == 1) {
            out[0] = functx_nll_result(num, den, mode);
        } else {
            out[2 * blockIdx.x] = num;
            out[2 * blockIdx.x + 1] = den;
        }
    }
}

// One block: the blocks' sums of functx_nll_reduce added up, out[0] = the result for mode.
extern "C" __global__ void functx_nll_finish(const T* part, int nb, int mode, T* out) {
    __shared__ T buf[33];
    T num = 0, den = 0;
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
        num += part[2 * b];
        den += part[2 * b + 1];
    }
    num = functx_block_sum(num, buf);
    den = functx_block_sum(den, buf);
    if (threadIdx.x == 0) out[0] = functx_nll_result(num, den, mode);
}

// class_nll_grad: out (zeros, viewed as (pre, n, post)) gets -wt * g[i * gs] at [i, t],
// divided by the sum of the weights for "mean": den[0], or, with own_den (one block),
// summed here first.
extern "C" __global__ void functx_nll_grad_put(const long long* t, const T* g, const T* w,
                                               const T* den, T* out, long long m, long long n,
                                               long long post, int ws, int gs, int mean,
                                               int own_den) {
    __shared__ T buf[33];
    T d = 1;
    if (mean) {
        if (own_den) {
            T s = 0;
            for (long long i = threadIdx.x; i < m; i += blockDim.x) {
                const long long c = t[i];
                if (c >= 0 && c < n) s += w[c * ws];
            }
            d = functx_block_sum(s, buf);
        } else {
            d = den[0];
        }
    }
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += (long long)gridDim.x * blockDim.x) {
        const long long c = t[i];
        if (c >= 0 && c < n) {
            const long long q = i % post;
            T v = -(w[c * ws] * g[i * gs]);
            if (mean) v = v / d;
            out[(i - q) * n + c * post + q] = v;
        }
    }
}
"""


# Up to this many positions, a class_nll reduction (or class_nll_grad with its sum of the
# weights) is one block of one kernel launch.
_NLL_ONE_BLOCK = 1 << 16


def _c_order(xp: Any, a: Any, dtype: Any = None) -> Any:
    """``a`` C-contiguous (and of ``dtype``): itself if it is; 0-d arrays stay 0-d (which
    ``ascontiguousarray`` does not keep)."""
    if a.flags.c_contiguous and (dtype is None or a.dtype == dtype):
        return a
    return xp.array(a, dtype=dtype, order="C")


def _flat_grid(m: int) -> tuple[tuple[int], tuple[int]]:
    return (max(1, min(4096, -(-m // 256))),), (256,)


def _nll_sums(xp: Any, x: Any, t: Any, w: Any, n: int, post: int, ws: int, mode: int,
              out: Any) -> None:
    """``out[()]`` = -sum(wt * picked) (mode 0), that over sum(wt) (1), or sum(wt) (2): one
    block of one kernel up to _NLL_ONE_BLOCK positions, else per-block sums and a kernel
    adding them up (a fixed order either way)."""
    m = t.size
    reduce = raw_function(xp, _SOURCE, "functx_nll_reduce", out.dtype)
    args = (w if x is None else x, t, w, np.int64(m), np.int64(n), np.int64(post),
            np.int32(ws), np.int32(x is not None), np.int32(mode))
    if m <= _NLL_ONE_BLOCK:
        reduce((1,), (1024,), args + (out,))
        return
    nb = min(1024, -(-m // 256))
    part = xp.empty((nb, 2), out.dtype)
    reduce((nb,), (256,), args + (part,))
    raw_function(xp, _SOURCE, "functx_nll_finish", out.dtype)(
        (1,), (256,), (part, np.int32(nb), np.int32(mode), out))


def class_nll(xp: Any, x: Any, t: Any, w: Any, *, axis: int, reduction: str,
              fallback: Any) -> Any:
    """class_nll (functx/primitives/nll.py): one kernel (two for a reduction of more than
    _NLL_ONE_BLOCK positions)."""
    dt = np.dtype(x.dtype)
    if dt not in CTYPE or x.size == 0 or t.size == 0:
        return fallback(xp, x, t, w, axis=axis, reduction=reduction)
    n, post = x.shape[axis], math.prod(x.shape[axis + 1:])
    xc, wc, tc = _c_order(xp, x), _c_order(xp, w), _c_order(xp, t, np.dtype(np.int64))
    ws = 1 if w.ndim else 0
    if reduction == "none":
        y = xp.empty(t.shape, dt)
        grid, block = _flat_grid(t.size)
        raw_function(xp, _SOURCE, "functx_nll_none", dt)(
            grid, block, (xc, tc, wc, y, np.int64(t.size), np.int64(n), np.int64(post),
                          np.int32(ws)))
        return y
    out = xp.empty((), dt)
    _nll_sums(xp, xc, tc, wc, n, post, ws, 1 if reduction == "mean" else 0, out)
    return out


def class_nll_grad(xp: Any, t: Any, w: Any, g: Any, *, axis: int, size: int, reduction: str,
                   fallback: Any) -> Any:
    """class_nll_grad: zeros, then one kernel writing each position's entry (it sums the
    weights itself for "mean" up to _NLL_ONE_BLOCK positions)."""
    dt = np.dtype(g.dtype)
    if dt not in CTYPE or t.size == 0 or size == 0:
        return fallback(xp, t, w, g, axis=axis, size=size, reduction=reduction)
    out = xp.zeros(t.shape[:axis] + (size,) + t.shape[axis:], dt)
    m, post = t.size, math.prod(t.shape[axis:])
    tc, wc, gc = _c_order(xp, t, np.dtype(np.int64)), _c_order(xp, w), _c_order(xp, g)
    ws = 1 if w.ndim else 0
    mean = reduction == "mean"
    den = gc
    if m <= _NLL_ONE_BLOCK:
        grid, block = (1,), (1024,)
    else:
        grid, block = _flat_grid(m)
        if mean:
            den = xp.empty((), dt)
            _nll_sums(xp, None, tc, wc, size, post, ws, 2, den)
    raw_function(xp, _SOURCE, "functx_nll_grad_put", dt)(
        grid, block, (tc, gc, wc, den, out, np.int64(m), np.int64(size), np.int64(post),
                      np.int32(ws), np.int32(reduction == "none"), np.int32(mean),
                      np.int32(m <= _NLL_ONE_BLOCK)))
    return out
