"""CUDA implementations of ``max_pool`` and ``max_pool_grad`` (functx/primitives/pooling.py).

One kernel each, one thread per output position (grid-stride loops), for float32 and
float64 operands; other dtypes and empty operands run the generic implementation
(``fallback``). Each thread walks its window (row-major, up to three spatial axes padded
with leading axes of size 1; offsets from the window's first element computed from the
window, dilation and the plane's pitches: no offset array on the device) and keeps the
first maximum, NaN counting as the maximum, as the CPU kernels do.

* ``functx_max_pool`` writes the maximum;
* ``functx_max_pool_grad`` adds ``g`` at the first maximum into zeros with ``atomicAdd``
  (overlapping windows may add into one element, in no fixed order); where the windows
  tile the planes (stride equal to the window, no dilation, no remainder) each thread
  writes its whole window instead (``g`` at the maximum, 0 elsewhere): no zeros first, no
  atomics, a fixed result.

Each function here is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy,
registered next to its primitive with ``p.def_impl(fn, backend="cuda")``. Importing this
module needs no CuPy; kernels are compiled on first use and kept
(functx/primitives/cuda/_kernels.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from functx.primitives.cuda._kernels import CTYPE, raw_function

_SOURCE = r"""
typedef CTYPE T;

// Whether v, later in the window, replaces best: greater, or NaN where best is not.
__device__ __forceinline__ bool functx_pool_later_wins(T best, T v) {
    return (v > best) || (v != v && best == best);
}

// The offset (from the window's first element) of the first maximum of the window whose
// first element is xw.
__device__ __forceinline__ long long functx_pool_argmax(
        const T* xw, int kd, int kh, int kw, long long dd, long long dh, long long dw) {
    T best = xw[0];
    long long at = 0;
    for (int i = 0; i < kd; ++i) {
        for (int j = 0; j < kh; ++j) {
            for (int k = 0; k < kw; ++k) {
                const long long o = i * dd + j * dh + k * dw;
                const T v = xw[o];
                if (functx_pool_later_wins(best, v)) {
                    best = v;
                    at = o;
                }
            }
        }
    }
    return at;
}

// The first element of output i's window: i runs over (plane, a, b, c) of the output
// (od, oh, ow); the strides sd, sh, sw are in elements of the input plane (pitches folded in).
__device__ __forceinline__ long long functx_pool_base(
        long long i, long long od, long long oh, long long ow, long long sd, long long sh,
        long long sw, long long plane) {
    const long long c = i % ow;
    long long r = i / ow;
    const long long b = r % oh;
    r /= oh;
    const long long a = r % od;
    return (r / od) * plane + a * sd + b * sh + c * sw;
}

extern "C" __global__ void functx_max_pool(
        const T* x, T* y, long long m, long long od, long long oh, long long ow,
        long long sd, long long sh, long long sw, long long plane,
        int kd, int kh, int kw, long long dd, long long dh, long long dw) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += (long long)gridDim.x * blockDim.x) {
        const T* xw = x + functx_pool_base(i, od, oh, ow, sd, sh, sw, plane);
        y[i] = xw[functx_pool_argmax(xw, kd, kh, kw, dd, dh, dw)];
    }
}

extern "C" __global__ void functx_max_pool_grad(
        const T* x, const T* g, T* dx, long long m, long long od, long long oh, long long ow,
        long long sd, long long sh, long long sw, long long plane,
        int kd, int kh, int kw, long long dd, long long dh, long long dw, int tiles) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += (long long)gridDim.x * blockDim.x) {
        const long long base = functx_pool_base(i, od, oh, ow, sd, sh, sw, plane);
        const long long at = functx_pool_argmax(x + base, kd, kh, kw, dd, dh, dw);
        const T gv = g[i];
        T* dw_ = dx + base;
        if (tiles) {
            for (int a = 0; a < kd; ++a) {
                for (int b = 0; b < kh; ++b) {
                    for (int c = 0; c < kw; ++c) {
                        const long long o = a * dd + b * dh + c * dw;
                        dw_[o] = o == at ? gv : (T)0;
                    }
                }
            }
        } else {
            atomicAdd(dw_ + at, gv);
        }
    }
}
"""


def _grid(m: int) -> tuple[tuple[int], tuple[int]]:
    return (max(1, min(4096, -(-m // 256))),), (256,)


def _args(shape: tuple, out: tuple, window, strides, dilation) -> tuple:
    """The kernels' geometry arguments (after ``m``): output sizes, strides and plane size
    in input elements, window and dilation (in elements), in 3-d form."""
    fill = 3 - len(out)
    sizes = (1,) * fill + tuple(shape[2:])
    out3 = (1,) * fill + tuple(out)
    k3 = (1,) * fill + tuple(window)
    s3 = (1,) * fill + tuple(strides)
    d3 = (1,) * fill + tuple(dilation)
    pitches = (sizes[1] * sizes[2], sizes[2], 1)
    i64 = np.int64
    return (tuple(i64(o) for o in out3) + tuple(i64(s * q) for s, q in zip(s3, pitches))
            + (i64(sizes[0] * sizes[1] * sizes[2]),) + tuple(np.int32(k) for k in k3)
            + tuple(i64(d * q) for d, q in zip(d3, pitches)))


def _out_sizes(shape: tuple, window, strides, dilation) -> tuple:
    return tuple(max((n - d * (k - 1) - 1) // s + 1, 0)
                 for n, k, s, d in zip(shape[2:], window, strides, dilation))


def max_pool(xp: Any, x: Any, *, window, strides, dilation, fallback: Any) -> Any:
    """max_pool (functx/primitives/pooling.py): one kernel, one thread per output."""
    dt = np.dtype(x.dtype)
    out = _out_sizes(tuple(x.shape), window, strides, dilation)
    y_shape = tuple(x.shape[:2]) + out
    m = int(np.prod(y_shape))
    if dt not in CTYPE or m == 0 or len(window) != x.ndim - 2:
        return fallback(xp, x, window=window, strides=strides, dilation=dilation)
    xc = xp.ascontiguousarray(x)
    y = xp.empty(y_shape, dt)
    raw_function(xp, _SOURCE, "functx_max_pool", dt)(
        *_grid(m), (xc, y, np.int64(m)) + _args(tuple(x.shape), out, window, strides,
                                                dilation))
    return y


def max_pool_grad(xp: Any, x: Any, g: Any, *, window, strides, dilation,
                  fallback: Any) -> Any:
    """max_pool_grad: zeros and one kernel of atomic adds, or, where the windows tile the
    planes, one kernel writing every element once."""
    dt = np.dtype(x.dtype)
    out = _out_sizes(tuple(x.shape), window, strides, dilation)
    m = int(np.prod(tuple(x.shape[:2]) + out))
    if (dt not in CTYPE or g.dtype != dt or m == 0 or len(window) != x.ndim - 2
            or tuple(g.shape) != tuple(x.shape[:2]) + out):
        return fallback(xp, x, g, window=window, strides=strides, dilation=dilation)
    tiles = all(s == k and (k == 1 or d == 1) and o * s == n for n, k, s, d, o
                in zip(x.shape[2:], window, strides, dilation, out))
    xc, gc = xp.ascontiguousarray(x), xp.ascontiguousarray(g)
    dx = xp.empty(x.shape, dt) if tiles else xp.zeros(x.shape, dt)
    raw_function(xp, _SOURCE, "functx_max_pool_grad", dt)(
        *_grid(m), (xc, gc, dx, np.int64(m))
        + _args(tuple(x.shape), out, window, strides, dilation) + (np.int32(tiles),))
    return dx
