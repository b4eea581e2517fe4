"""CUDA implementations of the fused layer_norm, softmax, log_softmax and gelu primitives
and their gradients (functx/primitives/fused.py).

Row kernels: one block per row of the (contiguous) last axis, each thread striding over the
row, block-wide sums and maxima through warp shuffles and 33 shared values (the helpers of
functx/primitives/cuda/_kernels.py). A row is read two to four times, from L1/L2 after the
first. bfloat16 rows are loaded and stored as bfloat16 (``__nv_bfloat16``) with float32
math inside (the storage type ``S`` of functx/primitives/cuda/_kernels.py); float16 rows are
cast to float32 copies around the kernels; weights, biases and the partial column sums are
float32. GELU and its gradient are one elementwise kernel each (float16 and bfloat16 cast
to float32 around them).

Each function here is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy,
registered next to its primitive with ``p.def_impl(fn, backend="cuda")``. Importing this
module needs no CuPy; kernels are compiled on first use and kept (functx/primitives/cuda/
_kernels.py).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from functx.primitives.cuda._kernels import (ROW_HELPERS, compute_dtype, elementwise_kernel,
                                              raw_function, row_launch, storage_dtype)

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715

_SOURCE = ROW_HELPERS + r"""
// mean and 1 / sqrt(biased variance + eps) of one row (two passes).
__device__ void functx_row_stats(const S* xr, int d, T eps, T* buf, T* mean, T* rstd) {
    T s = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) s += functx_ld(xr[j]);
    const T m = functx_block_sum(s, buf) / (T)d;
    T v = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        const T c = functx_ld(xr[j]) - m;
        v += c * c;
    }
    *mean = m;
    *rstd = (T)1 / sqrt(functx_block_sum(v, buf) / (T)d + eps);
}

// A row of at most FX_VPT elements per thread (row_launch's blocks give 8 up to d = 8192)
// is read into registers once; longer rows are read again from L1/L2 for every pass. The
// kernels that hold rows are bounded to 1024 threads (at most 64 registers a thread), so
// that every block size row_launch picks can launch.
#define FX_VPT 8
#define FX_FOR_ROW for (int i = 0, j = threadIdx.x; i < FX_VPT; ++i, j += blockDim.x)

// mean and 1 / sqrt(biased variance + eps) of the row held in v (zeros past d).
__device__ void functx_reg_stats(const T* v, int d, T eps, T* buf, T* mean, T* rstd) {
    T s = 0;
    #pragma unroll
    FX_FOR_ROW s += v[i];
    const T m = functx_block_sum(s, buf) / (T)d;
    T q = 0;
    #pragma unroll
    FX_FOR_ROW if (j < d) { const T c = v[i] - m; q += c * c; }
    *mean = m;
    *rstd = (T)1 / sqrt(functx_block_sum(q, buf) / (T)d + eps);
}

extern "C" __global__ void __launch_bounds__(1024) functx_layer_norm(const S* x, const T* w, const T* b, S* y,
                                             int d, int ws, int bs, T eps) {
    __shared__ T buf[33];
    const long long off = (long long)blockIdx.x * d;
    T mean, rstd;
    if (d <= FX_VPT * (int)blockDim.x) {
        T v[FX_VPT];
        #pragma unroll
        FX_FOR_ROW v[i] = j < d ? functx_ld(x[off + j]) : (T)0;
        functx_reg_stats(v, d, eps, buf, &mean, &rstd);
        #pragma unroll
        FX_FOR_ROW if (j < d) y[off + j] = functx_st((v[i] - mean) * rstd * w[j * ws] + b[j * bs]);
        return;
    }
    functx_row_stats(x + off, d, eps, buf, &mean, &rstd);
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        y[off + j] = functx_st((functx_ld(x[off + j]) - mean) * rstd * w[j * ws] + b[j * bs]);
}

// layer_norm_grad's dx of one row (x, g and dx point at the row), statistics recomputed;
// with pw and pb, also adds the row's g * xhat and g to them, column by column.
__device__ void functx_layer_norm_grad_row(const S* x, const T* w, const S* g, S* dx, int d,
                                           int ws, T eps, T* buf, T* pw, T* pb) {
    T mean, rstd;
    if (d <= FX_VPT * (int)blockDim.x) {  // x and g in registers: each read once
        T xv[FX_VPT], gv[FX_VPT];
        #pragma unroll
        FX_FOR_ROW {
            xv[i] = j < d ? functx_ld(x[j]) : (T)0;
            gv[i] = j < d ? functx_ld(g[j]) * w[j * ws] : (T)0;  // g * w
        }
        functx_reg_stats(xv, d, eps, buf, &mean, &rstd);
        T s1 = 0, s2 = 0;
        #pragma unroll
        FX_FOR_ROW if (j < d) { s1 += gv[i]; s2 += gv[i] * ((xv[i] - mean) * rstd); }
        const T m1 = functx_block_sum(s1, buf) / (T)d;
        const T m2 = functx_block_sum(s2, buf) / (T)d;
        #pragma unroll
        FX_FOR_ROW if (j < d) {
            const T xh = (xv[i] - mean) * rstd;
            dx[j] = functx_st(rstd * ((gv[i] - m1) - xh * m2));
            if (pw != nullptr) {
                const T graw = functx_ld(g[j]);
                pw[j] += graw * xh;
                pb[j] += graw;
            }
        }
        return;
    }
    functx_row_stats(x, d, eps, buf, &mean, &rstd);
    T s1 = 0, s2 = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        const T gw = functx_ld(g[j]) * w[j * ws];
        s1 += gw;
        s2 += gw * ((functx_ld(x[j]) - mean) * rstd);
    }
    const T m1 = functx_block_sum(s1, buf) / (T)d;
    const T m2 = functx_block_sum(s2, buf) / (T)d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        const T gv = functx_ld(g[j]);
        const T xh = (functx_ld(x[j]) - mean) * rstd;
        dx[j] = functx_st(rstd * ((gv * w[j * ws] - m1) - xh * m2));
        if (pw != nullptr) {
            pw[j] += gv * xh;
            pb[j] += gv;
        }
    }
}

extern "C" __global__ void __launch_bounds__(1024) functx_layer_norm_grad(const S* x, const T* w, const S* g, S* dx,
                                                  int d, int ws, T eps) {
    __shared__ T buf[33];
    const long long off = (long long)blockIdx.x * d;
    functx_layer_norm_grad_row(x + off, w, g + off, dx + off, d, ws, eps, buf, nullptr,
                               nullptr);
}

// layer_norm_grad's dx for rows blockIdx.x, blockIdx.x + gridDim.x, ..., and this block's
// sums of g * xhat and of g per column: row blockIdx.x of part, shaped (gridDim.x, 2, d).
// Each column is always handled by the same thread, so the sums need no atomics.
extern "C" __global__ void __launch_bounds__(1024) functx_layer_norm_grads(const S* x, const T* w, const S* g, S* dx,
                                                   T* part, long long rows, int d, int ws,
                                                   T eps) {
    __shared__ T buf[33];
    T* pw = part + (long long)blockIdx.x * 2 * d;
    T* pb = pw + d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        pw[j] = 0;
        pb[j] = 0;
    }
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const long long off = r * d;
        functx_layer_norm_grad_row(x + off, w, g + off, dx + off, d, ws, eps, buf, pw, pb);
    }
}

// out[j] = sum over the n rows of p (n, m) of column j: blocks of 32 columns x 16 lanes, each
// lane summing every 16th row (coalesced along the columns), then a tree over the lanes.
extern "C" __global__ void functx_column_sums(const T* p, T* out, int n, int m) {
    __shared__ T sh[16][33];
    const int j = blockIdx.x * 32 + threadIdx.x;
    T s = 0;
    if (j < m) {
        #pragma unroll 4
        for (int r = threadIdx.y; r < n; r += 16) s += p[(long long)r * m + j];
    }
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    for (int k = 8; k > 0; k >>= 1) {
        if (threadIdx.y < k) sh[threadIdx.y][threadIdx.x] += sh[threadIdx.y + k][threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.y == 0 && j < m) out[j] = sh[0][threadIdx.x];
}

// log_softmax's VJP: dx = g - exp(y) * sum(g), one block per row.
extern "C" __global__ void functx_log_softmax_grad(const S* y, const S* g, S* dx, int d) {
    __shared__ T buf[33];
    const long long off = (long long)blockIdx.x * d;
    T s = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) s += functx_ld(g[off + j]);
    s = functx_block_sum(s, buf);
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        dx[off + j] = functx_st(functx_ld(g[off + j]) - exp(functx_ld(y[off + j])) * s);
}

extern "C" __global__ void functx_softmax(const S* x, S* y, int d, int log_out) {
    __shared__ T buf[33];
    const long long off = (long long)blockIdx.x * d;
    T m = NEG_INF;
    for (int j = threadIdx.x; j < d; j += blockDim.x) m = functx_max(m, functx_ld(x[off + j]));
    m = functx_block_max(m, buf);
    if (!(m - m == (T)0)) m = (T)0;  // not finite: shift by 0 (NaN rows stay NaN)
    T s = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) s += exp(functx_ld(x[off + j]) - m);
    s = functx_block_sum(s, buf);
    if (log_out) {
        const T ls = log(s);
        for (int j = threadIdx.x; j < d; j += blockDim.x)
            y[off + j] = functx_st((functx_ld(x[off + j]) - m) - ls);
    } else {
        for (int j = threadIdx.x; j < d; j += blockDim.x)
            y[off + j] = functx_st(exp(functx_ld(x[off + j]) - m) / s);
    }
}
"""


def _row_param(xp: Any, p: Any, dtype: Any) -> tuple[Any, int]:
    """A weight or bias for the row kernels and its stride (0 for a scalar)."""
    if not isinstance(p, xp.ndarray):
        p = xp.full((), float(p), dtype=dtype)
    if p.ndim == 0:
        return p.astype(dtype, copy=False), 0
    return xp.ascontiguousarray(p, dtype=dtype), 1


def layer_norm(xp: Any, x: Any, w: Any, b: Any, *, eps: float) -> Any:
    """layer_norm over the last axis: one kernel (see the row kernels above)."""
    dt = np.dtype(x.dtype)
    if x.size == 0:
        return xp.zeros(x.shape, dt)
    ct, st = compute_dtype(dt), storage_dtype(dt)
    d = x.shape[-1]
    xc = xp.ascontiguousarray(x, dtype=st)
    wc, ws = _row_param(xp, w, ct)
    bc, bs = _row_param(xp, b, ct)
    y = xp.empty(x.shape, st)
    grid, block = row_launch(d, x.size // d)
    raw_function(xp, _SOURCE, "functx_layer_norm", ct, st)(
        grid, block, (xc, wc, bc, y, np.int32(d), np.int32(ws), np.int32(bs), ct.type(eps)))
    return y if st == dt else y.astype(dt)


def layer_norm_grad(xp: Any, x: Any, w: Any, g: Any, *, eps: float) -> Any:
    """layer_norm's input cotangent: one kernel (statistics recomputed per row)."""
    dt = np.dtype(x.dtype)
    if x.size == 0:
        return xp.zeros(x.shape, dt)
    ct, st = compute_dtype(dt), storage_dtype(dt)
    d = x.shape[-1]
    xc = xp.ascontiguousarray(x, dtype=st)
    gc = xp.ascontiguousarray(g, dtype=st)
    wc, ws = _row_param(xp, w, ct)
    dx = xp.empty(x.shape, st)
    grid, block = row_launch(d, x.size // d)
    raw_function(xp, _SOURCE, "functx_layer_norm_grad", ct, st)(
        grid, block, (xc, wc, gc, dx, np.int32(d), np.int32(ws), ct.type(eps)))
    return dx if st == dt else dx.astype(dt)


# Blocks of layer_norm_grads (each sums the columns of its rows) and the bytes their partial
# sums may take.
_LN_GRADS_BLOCKS = 1024
_LN_GRADS_PARTIAL_BYTES = 64 << 20


def layer_norm_grads(xp: Any, x: Any, w: Any, g: Any, *, eps: float) -> tuple:
    """``(dx, dweight, dbias)`` of layer_norm: one pass over ``x`` and ``g`` (dx and each
    block's column sums), then one kernel summing the blocks' sums."""
    dt = np.dtype(x.dtype)
    d = x.shape[-1]
    if x.size == 0:
        return xp.zeros(x.shape, dt), xp.zeros((d,), dt), xp.zeros((d,), dt)
    ct, st = compute_dtype(dt), storage_dtype(dt)
    rows = x.size // d
    xc = xp.ascontiguousarray(x, dtype=st)
    gc = xp.ascontiguousarray(g, dtype=st)
    wc, ws = _row_param(xp, w, ct)
    _, block = row_launch(d, rows)
    nb = max(1, min(rows, _LN_GRADS_BLOCKS, _LN_GRADS_PARTIAL_BYTES // (2 * d * ct.itemsize)))
    dx = xp.empty(x.shape, st)
    part = xp.empty((nb, 2 * d), ct)
    sums = xp.empty((2 * d,), ct)
    raw_function(xp, _SOURCE, "functx_layer_norm_grads", ct, st)(
        (nb,), block, (xc, wc, gc, dx, part, np.int64(rows), np.int32(d), np.int32(ws),
                       ct.type(eps)))
    raw_function(xp, _SOURCE, "functx_column_sums", ct, st)(
        (-(-2 * d // 32),), (32, 16), (part, sums, np.int32(nb), np.int32(2 * d)))
    return (dx if st == dt else dx.astype(dt),
            *(a if ct == dt else a.astype(dt) for a in (sums[:d], sums[d:])))


def log_softmax_grad(xp: Any, y: Any, g: Any, *, axis: int) -> Any:
    """log_softmax's VJP ``g - exp(y) * sum(g, axis)``: one row kernel."""
    dt = np.dtype(y.dtype)
    if y.size == 0:
        return xp.zeros(y.shape, dt)
    ct, st = compute_dtype(dt), storage_dtype(dt)
    last = y.ndim - 1
    yc, gc = ((xp.ascontiguousarray(a if axis == last else xp.moveaxis(a, axis, last),
                                    dtype=st)) for a in (y, g))
    d = yc.shape[-1]
    dx = xp.empty(yc.shape, st)
    grid, block = row_launch(d, yc.size // d)
    raw_function(xp, _SOURCE, "functx_log_softmax_grad", ct, st)(grid, block,
                                                                  (yc, gc, dx, np.int32(d)))
    if st != dt:
        dx = dx.astype(dt)
    return dx if axis == last else xp.moveaxis(dx, last, axis)


def _softmax_rows(xp: Any, x: Any, axis: int, log_out: bool) -> Any:
    dt = np.dtype(x.dtype)
    if x.size == 0:
        return xp.zeros(x.shape, dt)
    ct, st = compute_dtype(dt), storage_dtype(dt)
    last = x.ndim - 1
    xc = xp.ascontiguousarray(x if axis == last else xp.moveaxis(x, axis, last), dtype=st)
    d = xc.shape[-1]
    y = xp.empty(xc.shape, st)
    grid, block = row_launch(d, xc.size // d)
    raw_function(xp, _SOURCE, "functx_softmax", ct, st)(grid, block, (xc, y, np.int32(d),
                                                                      np.int32(log_out)))
    if st != dt:
        y = y.astype(dt)
    return y if axis == last else xp.moveaxis(y, last, axis)


def softmax(xp: Any, x: Any, *, axis: int) -> Any:
    """softmax along ``axis``: one row kernel (another axis is moved last, one copy)."""
    return _softmax_rows(xp, x, axis, False)


def log_softmax(xp: Any, x: Any, *, axis: int) -> Any:
    """log_softmax along ``axis``: one row kernel."""
    return _softmax_rows(xp, x, axis, True)


_GELU_BODY = {
    "tanh": f"y = (T)0.5 * x * ((T)1 + tanh((T){_GELU_C!r} * (x + (T){_GELU_A!r} * (x * x * x))));",
    "none": f"y = (T)0.5 * x * ((T)1 + erf(x * (T){1 / math.sqrt(2.0)!r}));",
}
_GELU_GRAD_BODY = {
    "tanh": f"""
        const T t = tanh((T){_GELU_C!r} * (x + (T){_GELU_A!r} * (x * x * x)));
        y = g * ((T)0.5 * ((T)1 + t)
                 + (T)0.5 * x * ((T)1 - t * t) * ((T){_GELU_C!r} * ((T)1 + (T){3 * _GELU_A!r} * (x * x))));
        """,
    "none": f"""
        y = g * ((T)0.5 * ((T)1 + erf(x * (T){1 / math.sqrt(2.0)!r}))
                 + x * exp((T)-0.5 * (x * x)) * (T){1 / math.sqrt(2.0 * math.pi)!r});
        """,
}


def _gelu_kernel(xp: Any, approximate: str) -> Any:
    return elementwise_kernel(xp, f"functx_gelu_{approximate}", "T x", "T y",
                              _GELU_BODY[approximate])


def _gelu_grad_kernel(xp: Any, approximate: str) -> Any:
    return elementwise_kernel(xp, f"functx_gelu_grad_{approximate}", "T x, T g", "T y",
                              _GELU_GRAD_BODY[approximate])


def gelu(xp: Any, x: Any, *, approximate: str) -> Any:
    """GELU in one elementwise kernel (float16 and bfloat16 through float32)."""
    dt = np.dtype(x.dtype)
    ct = compute_dtype(dt)
    y = _gelu_kernel(xp, approximate)(x.astype(ct, copy=False))
    return y if ct == dt else y.astype(dt)


def gelu_grad(xp: Any, x: Any, g: Any, *, approximate: str) -> Any:
    """``g * gelu'(x)`` in one elementwise kernel (float16 and bfloat16 through float32)."""
    dt = np.dtype(x.dtype)
    ct = compute_dtype(dt)
    y = _gelu_grad_kernel(xp, approximate)(x.astype(ct, copy=False),
                                           g.astype(ct, copy=False))
    return y if ct == dt else y.astype(dt)
