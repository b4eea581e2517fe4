"""CUDA implementations of the primitives where CuPy differs from NumPy.

Each function here is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy,
registered next to its primitive with ``p.def_impl(fn, backend="cuda")``. Importing this
module needs no CuPy; kernels are compiled on first use and kept.

* ``scatter``: CuPy's fancy assignment with duplicate indices is unordered, so a kernel
  picks, for every target position, the update written last (the largest update number,
  found with ``atomicMax``) and only that one is written: NumPy's last-write-wins order.
* ``scatter_add``: ``cupyx.scatter_add`` (atomic adds) for the dtypes CUDA has atomics
  for; int64 adds as uint64 (the same bits in two's complement), complex as pairs of
  reals, narrower integers and bool in 32 bits. Atomic float additions happen in no fixed
  order, so float results may differ from the CPU in the last bits.
* ``take_along``/``put_along``: one elementwise kernel each (the generic rules take several
  passes: range mask, clamped take, select).
* ``erf``: CUDA's ``erf`` (within 2 ulp; float16 through float32) instead of the generic
  table-driven polynomial, which indexes with boolean masks (a device synchronisation).
* ``dot_general``: batched products of float16/float32/float64 call cuBLAS's strided
  batched GEMM directly on the operands' layouts (CuPy's batched ``matmul`` copies
  float16 operands to float32 and makes transposed operands contiguous); unbatched ones use
  the 2-D ``matmul``, which takes transposed views as they are.
* ``dot_product_attention`` and its gradient: cuBLAS strided batched GEMMs on raw pointers
  around one fused row kernel per pass (see the section on fused attention below).

Start indices of ``dynamic_slice``/``dynamic_update_slice`` are read on the host by the
generic rules, which synchronises with the GPU once per call.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

_KERNELS: dict[str, Any] = {}


def _kernel(xp: Any, name: str) -> Any:
    k = _KERNELS.get(name)
    if k is None:
        k = _KERNELS[name] = _KERNEL_SOURCES[name](xp)
    return k


_KERNEL_SOURCES = {
    # For each index position j (C order), winner[t] = the largest j writing target t.
    "scatter_winner": lambda xp: xp.ElementwiseKernel(
        "int64 t", "raw int32 winner", "atomicMax(&winner[t], (int)i);",
        "functx_scatter_winner"),
    # Over the updates viewed as (pre, m, post): write those whose position won.
    "scatter_write": lambda xp: xp.ElementwiseKernel(
        "raw T u, raw int64 idx, raw int32 winner, int64 m, int64 post, int64 n",
        "raw T out",
        """
        long long q = i % post;
        long long j = (i / post) % m;
        long long p = i / (post * m);
        long long t = idx[j];
        if (winner[t] == (int)j) out[(p * n + t) * post + q] = u[i];
        """,
        "functx_scatter_write"),
    "erf": lambda xp: xp.ElementwiseKernel("T x", "T y", "y = erf(x);", "functx_erf"),
    # x viewed as (pre, n, post), indices and the result as (pre, post).
    "take_along": lambda xp: xp.ElementwiseKernel(
        "raw T x, int64 t, int64 n, int64 post", "T y",
        """
        if (t >= 0 && t < n) {
            const long long q = i % post;
            y = x[((i - q) * n + t * post) + q];
        } else {
            y = (T)0;
        }
        """,
        "functx_take_along"),
    "put_along": lambda xp: xp.ElementwiseKernel(
        "T u, int64 t, int64 n, int64 post", "raw T out",
        """
        if (t >= 0 && t < n) {
            const long long q = i % post;
            out[((i - q) * n + t * post) + q] = u;
        }
        """,
        "functx_put_along"),
}


# -- indexing ----------------------------------------------------------------------------------

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
    _kernel(xp, "scatter_winner")(idx, winner)
    upd = xp.array(updates, order="C").reshape(-1)
    _kernel(xp, "scatter_write")(upd, idx, winner, m, post, n, out.reshape(-1),
                                 size=upd.size)
    return out


def take_along(xp: Any, x: Any, indices: Any, *, axis: int) -> Any:
    """One element of ``x`` along ``axis`` per row, 0 for out-of-range indices: one kernel."""
    n = x.shape[axis]
    if n == 0 or indices.size == 0:
        return xp.zeros(indices.shape, x.dtype)
    post = math.prod(x.shape[axis + 1:])
    return _kernel(xp, "take_along")(xp.ascontiguousarray(x), indices.astype(np.int64,
                                     copy=False), n, post)


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
    reduce = _row_function(xp, "functx_nll_reduce", out.dtype)
    args = (w if x is None else x, t, w, np.int64(m), np.int64(n), np.int64(post),
            np.int32(ws), np.int32(x is not None), np.int32(mode))
    if m <= _NLL_ONE_BLOCK:
        reduce((1,), (1024,), args + (out,))
        return
    nb = min(1024, -(-m // 256))
    part = xp.empty((nb, 2), out.dtype)
    reduce((nb,), (256,), args + (part,))
    _row_function(xp, "functx_nll_finish", out.dtype)(
        (1,), (256,), (part, np.int32(nb), np.int32(mode), out))


def class_nll(xp: Any, x: Any, t: Any, w: Any, *, axis: int, reduction: str,
              fallback: Any) -> Any:
    """class_nll (functx/primitives/nll.py): one kernel (two for a reduction of more than
    _NLL_ONE_BLOCK positions)."""
    dt = np.dtype(x.dtype)
    if dt not in _CTYPE or x.size == 0 or t.size == 0:
        return fallback(xp, x, t, w, axis=axis, reduction=reduction)
    n, post = x.shape[axis], math.prod(x.shape[axis + 1:])
    xc, wc, tc = _c_order(xp, x), _c_order(xp, w), _c_order(xp, t, np.dtype(np.int64))
    ws = 1 if w.ndim else 0
    if reduction == "none":
        y = xp.empty(t.shape, dt)
        grid, block = _flat_grid(t.size)
        _row_function(xp, "functx_nll_none", dt)(
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
    if dt not in _CTYPE or t.size == 0 or size == 0:
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
    _row_function(xp, "functx_nll_grad_put", dt)(
        grid, block, (tc, gc, wc, den, out, np.int64(m), np.int64(size), np.int64(post),
                      np.int32(ws), np.int32(reduction == "none"), np.int32(mean),
                      np.int32(m <= _NLL_ONE_BLOCK)))
    return out


def put_along(xp: Any, indices: Any, updates: Any, *, axis: int, size: int) -> Any:
    """The transpose of :func:`take_along`: one kernel writing into zeros."""
    out = xp.zeros(updates.shape[:axis] + (size,) + updates.shape[axis:], updates.dtype)
    if size == 0 or updates.size == 0:
        return out
    post = math.prod(updates.shape[axis:])
    _kernel(xp, "put_along")(updates, indices.astype(np.int64, copy=False), size, post, out)
    return out


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
        upd = xp.array(updates, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
        cupyx.scatter_add(out.view(real).reshape(out.shape + (2,)), where,
                          upd.view(real).reshape(upd.shape + (2,)))
        return out
    if dt.kind in "biu":  # bool, 8- and 16-bit integers: add in 32 bits, cast back
        wide = np.uint32 if dt.kind == "u" else np.int32
        out = x.astype(wide)
        cupyx.scatter_add(out, where, updates.astype(wide))
        return out != 0 if dt.kind == "b" else out.astype(dt)
    raise TypeError(f"scatter_add has no CUDA implementation for dtype {dt}.")


# -- elementwise -------------------------------------------------------------------------------

def erf(xp: Any, x: Any) -> Any:
    """The error function with CUDA's ``erf`` (float16 through float32)."""
    if x.dtype == np.float16:
        return _kernel(xp, "erf")(x.astype(np.float32)).astype(np.float16)
    return _kernel(xp, "erf")(x)


# -- dot_general -------------------------------------------------------------------------------

def _free(ndim: int, contract: Any, batch: Any) -> tuple[int, ...]:
    taken = set(contract) | set(batch)
    return tuple(i for i in range(ndim) if i not in taken)


def dot_general(xp: Any, x: Any, y: Any, *, dimension_numbers: tuple) -> Any:
    """dot_general with cuBLAS: see the module docstring."""
    (xc, yc), (xb, yb) = dimension_numbers
    if x.ndim == 2 and y.ndim == 2 and len(xc) == 1 and not xb:
        return xp.matmul(x if xc[0] == 1 else x.T, y if yc[0] == 0 else y.T)
    xf, yf = _free(x.ndim, xc, xb), _free(y.ndim, yc, yb)
    size = lambda a, axes: math.prod(a.shape[i] for i in axes)
    b, m, k, n = size(x, xb), size(x, xf), size(x, xc), size(y, yf)
    x3 = xp.reshape(xp.transpose(x, xb + xf + xc), (b, m, k))
    y3 = xp.reshape(xp.transpose(y, yb + yc + yf), (b, k, n))
    out_shape = (tuple(x.shape[i] for i in xb) + tuple(x.shape[i] for i in xf)
                 + tuple(y.shape[i] for i in yf))
    if b == 1:
        out = xp.matmul(x3[0], y3[0])
    elif np.dtype(x.dtype) in _GEMM_TYPES:
        out = gemm_strided_batched(xp, x3, y3)
    else:
        out = xp.matmul(x3, y3)
    return xp.reshape(out, out_shape)


# dtype -> (CUDA data type, cuBLAS compute type, dtype of alpha and beta)
_GEMM_TYPES = {np.dtype(np.float16): ("CUDA_R_16F", 2, "CUBLAS_COMPUTE_32F", 68, np.float32),
               np.dtype(np.float32): ("CUDA_R_32F", 0, "CUBLAS_COMPUTE_32F", 68, np.float32),
               np.dtype(np.float64): ("CUDA_R_64F", 1, "CUBLAS_COMPUTE_64F", 70, np.float64)}


def _blas_layout(a: Any) -> tuple[bool, int, int] | None:
    """How cuBLAS can read the matrices of a 3-D array ``(batch, rows, cols)``: (row-major,
    leading dimension, batch stride), in elements; None if it cannot without a copy."""
    isz = a.itemsize
    if any(s < 0 or s % isz for s in a.strides):
        return None
    s0, s1, s2 = (s // isz for s in a.strides)
    nb, r, c = a.shape
    batch_stride = s0 if nb > 1 else 0
    if c == 1 or s2 == 1:
        ld = s1 if r > 1 else c
        if ld >= max(c, 1):
            return True, ld, batch_stride
    if r == 1 or s1 == 1:
        ld = s2 if c > 1 else r
        if ld >= max(r, 1):
            return False, ld, batch_stride
    return None


def gemm_strided_batched(xp: Any, x3: Any, y3: Any, *, out: Any = None,
                         beta: float = 0.0) -> Any:
    """``x3 @ y3`` (plus ``beta * out``) for 3-D float16/32/64 arrays of one dtype with one
    cuBLAS call, into ``out`` if given (a C-contiguous ``(batch, m, n)`` array).

    The operands are read in their own layouts where cuBLAS can (transposed or broadcast
    matrices included, see ``_blas_layout``), else copied. float16 accumulates in float32
    (as cuBLAS and PyTorch do); float32 uses plain FP32 (no TF32 unless CuPy's handle was
    switched to it).
    """
    nb, m, k = x3.shape
    n = y3.shape[2]
    dt = np.dtype(x3.dtype)
    if out is None:
        out = xp.empty((nb, m, n), dtype=dt)
    if out.size == 0:
        return out
    if k == 0:
        if beta == 0:
            out.fill(0)
        else:
            out *= beta
        return out
    lx = _blas_layout(x3)
    if lx is None:
        x3 = xp.ascontiguousarray(x3)
        lx = _blas_layout(x3)
    ly = _blas_layout(y3)
    if ly is None:
        y3 = xp.ascontiguousarray(y3)
        ly = _blas_layout(y3)
    _Gemm(xp, dt)(nb, m, n, k, (x3.data.ptr, lx[1], lx[2], not lx[0]),
                  (y3.data.ptr, ly[1], ly[2], not ly[0]), (out.data.ptr, n, m * n), beta=beta)
    return out


# -- fused layer_norm, softmax, gelu (functx/primitives/fused.py) ----------------------------
#
# Row kernels: one block per row of the (contiguous) last axis, each thread striding over
# the row, block-wide sums and maxima through warp shuffles and 33 shared values. A row is
# read two to four times, from L1/L2 after the first. float16 computes in float32.

_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715
_ROW_MODULES: dict[Any, Any] = {}

_ROW_SOURCE = r"""
typedef CTYPE T;

__device__ __forceinline__ T functx_max(T a, T b) {  // NaN wins, as in NumPy's max
    return (a != a || a > b) ? a : b;
}

__device__ __forceinline__ T functx_warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ T functx_warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) v = functx_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The sum of v over the block, returned to every thread (blockDim.x a multiple of 32).
__device__ T functx_block_sum(T v, T* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = functx_warp_sum(v);
    __syncthreads();  // the previous result (buf[32]) has been read by every thread
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = functx_warp_sum(lane < nw ? buf[lane] : (T)0);
        if (lane == 0) buf[32] = v;
    }
    __syncthreads();
    return buf[32];
}

__device__ T functx_block_max(T v, T* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = functx_warp_max(v);
    __syncthreads();
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = functx_warp_max(lane < nw ? buf[lane] : NEG_INF);
        if (lane == 0) buf[32] = v;
    }
    __syncthreads();
    return buf[32];
}

// mean and 1 / sqrt(biased variance + eps) of one row (two passes).
__device__ void functx_row_stats(const T* xr, int d, T eps, T* buf, T* mean, T* rstd) {
    T s = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) s += xr[j];
    const T m = functx_block_sum(s, buf) / (T)d;
    T v = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        const T c = xr[j] - m;
        v += c * c;
    }
    *mean = m;
    *rstd = (T)1 / sqrt(functx_block_sum(v, buf) / (T)d + eps);
}

extern "C" __global__ void functx_layer_norm(const T* x, const T* w, const T* b, T* y,
                                             int d, int ws, int bs, T eps) {
    __shared__ T buf[33];
    const long long off = (long long)blockIdx.x * d;
    T mean, rstd;
    functx_row_stats(x + off, d, eps, buf, &mean, &rstd);
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        y[off + j] = (x[off + j] - mean) * rstd * w[j * ws] + b[j * bs];
}

// layer_norm_grad's dx of one row (x, g and dx point at the row), statistics recomputed;
// with pw and pb, also adds the row's g * xhat and g to them, column by column.
__device__ void functx_layer_norm_grad_row(const T* x, const T* w, const T* g, T* dx, int d,
                                           int ws, T eps, T* buf, T* pw, T* pb) {
    T mean, rstd;
    functx_row_stats(x, d, eps, buf, &mean, &rstd);
    T s1 = 0, s2 = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        const T gw = g[j] * w[j * ws];
        s1 += gw;
        s2 += gw * ((x[j] - mean) * rstd);
    }
    const T m1 = functx_block_sum(s1, buf) / (T)d;
    const T m2 = functx_block_sum(s2, buf) / (T)d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        const T gv = g[j];
        const T xh = (x[j] - mean) * rstd;
        dx[j] = rstd * ((gv * w[j * ws] - m1) - xh * m2);
        if (pw != nullptr) {
            pw[j] += gv * xh;
            pb[j] += gv;
        }
    }
}

extern "C" __global__ void functx_layer_norm_grad(const T* x, const T* w, const T* g, T* dx,
                                                  int d, int ws, T eps) {
    __shared__ T buf[33];
    const long long off = (long long)blockIdx.x * d;
    functx_layer_norm_grad_row(x + off, w, g + off, dx + off, d, ws, eps, buf, nullptr,
                               nullptr);
}

// layer_norm_grad's dx for rows blockIdx.x, blockIdx.x + gridDim.x, ..., and this block's
// sums of g * xhat and of g per column: row blockIdx.x of part, shaped (gridDim.x, 2, d).
// Each column is always handled by the same thread, so the sums need no atomics.
extern "C" __global__ void functx_layer_norm_grads(const T* x, const T* w, const T* g, T* dx,
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

// out[j] = sum over the n rows of p (n, m) of column j.
extern "C" __global__ void functx_column_sums(const T* p, T* out, int n, int m) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    T s = 0;
    for (int r = 0; r < n; ++r) s += p[(long long)r * m + j];
    out[j] = s;
}

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

// log_softmax's VJP: dx = g - exp(y) * sum(g), one block per row.
extern "C" __global__ void functx_log_softmax_grad(const T* y, const T* g, T* dx, int d) {
    __shared__ T buf[33];
    const long long off = (long long)blockIdx.x * d;
    T s = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) s += g[off + j];
    s = functx_block_sum(s, buf);
    for (int j = threadIdx.x; j < d; j += blockDim.x) dx[off + j] = g[off + j] - exp(y[off + j]) * s;
}

extern "C" __global__ void functx_softmax(const T* x, T* y, int d, int log_out) {
    __shared__ T buf[33];
    const long long off = (long long)blockIdx.x * d;
    T m = NEG_INF;
    for (int j = threadIdx.x; j < d; j += blockDim.x) m = functx_max(m, x[off + j]);
    m = functx_block_max(m, buf);
    if (!(m - m == (T)0)) m = (T)0;  // not finite: shift by 0 (NaN rows stay NaN)
    T s = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) s += exp(x[off + j] - m);
    s = functx_block_sum(s, buf);
    if (log_out) {
        const T ls = log(s);
        for (int j = threadIdx.x; j < d; j += blockDim.x) y[off + j] = (x[off + j] - m) - ls;
    } else {
        for (int j = threadIdx.x; j < d; j += blockDim.x) y[off + j] = exp(x[off + j] - m) / s;
    }
}
"""

_NEG_INF = {np.dtype(np.float32): "__int_as_float((int)0xff800000u)",
            np.dtype(np.float64): "__longlong_as_double((long long)0xfff0000000000000ull)"}
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


_ROW_FUNCTIONS: dict[Any, Any] = {}


def _row_function(xp: Any, name: str, dtype: Any) -> Any:
    fn = _ROW_FUNCTIONS.get((name, dtype))  # (the hot path: kernels are launched per call)
    if fn is not None:
        return fn
    dt = np.dtype(dtype)
    module = _ROW_MODULES.get(dt)
    if module is None:
        code = (_ROW_SOURCE + _ATTENTION_SOURCE).replace("CTYPE", _CTYPE[dt]).replace(
            "NEG_INF", _NEG_INF[dt])
        module = _ROW_MODULES[dt] = xp.RawModule(code=code)
    fn = _ROW_FUNCTIONS[(name, dtype)] = module.get_function(name)
    return fn


def _compute_dtype(dtype: Any) -> Any:
    """float64 stays float64; float32 and float16 compute in float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _row_launch(d: int, rows: int) -> tuple[tuple[int], tuple[int]]:
    """Grid and block of a row kernel: one block per row, about 8 elements per thread."""
    if rows >= 2**31 or d >= 2**31:
        raise ValueError(f"the CUDA row kernels support fewer than 2**31 rows of fewer than "
                         f"2**31 elements (got {rows} rows of {d}).")
    threads = min(1024, max(32, ((-(-d // 8) + 31) // 32) * 32))
    return (rows,), (threads,)


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
    ct = _compute_dtype(dt)
    d = x.shape[-1]
    xc = xp.ascontiguousarray(x, dtype=ct)
    wc, ws = _row_param(xp, w, ct)
    bc, bs = _row_param(xp, b, ct)
    y = xp.empty(x.shape, ct)
    grid, block = _row_launch(d, x.size // d)
    _row_function(xp, "functx_layer_norm", ct)(
        grid, block, (xc, wc, bc, y, np.int32(d), np.int32(ws), np.int32(bs), ct.type(eps)))
    return y if ct == dt else y.astype(dt)


def layer_norm_grad(xp: Any, x: Any, w: Any, g: Any, *, eps: float) -> Any:
    """layer_norm's input cotangent: one kernel (statistics recomputed per row)."""
    dt = np.dtype(x.dtype)
    if x.size == 0:
        return xp.zeros(x.shape, dt)
    ct = _compute_dtype(dt)
    d = x.shape[-1]
    xc = xp.ascontiguousarray(x, dtype=ct)
    gc = xp.ascontiguousarray(g, dtype=ct)
    wc, ws = _row_param(xp, w, ct)
    dx = xp.empty(x.shape, ct)
    grid, block = _row_launch(d, x.size // d)
    _row_function(xp, "functx_layer_norm_grad", ct)(
        grid, block, (xc, wc, gc, dx, np.int32(d), np.int32(ws), ct.type(eps)))
    return dx if ct == dt else dx.astype(dt)


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
    ct = _compute_dtype(dt)
    rows = x.size // d
    xc = xp.ascontiguousarray(x, dtype=ct)
    gc = xp.ascontiguousarray(g, dtype=ct)
    wc, ws = _row_param(xp, w, ct)
    _, block = _row_launch(d, rows)
    nb = max(1, min(rows, _LN_GRADS_BLOCKS, _LN_GRADS_PARTIAL_BYTES // (2 * d * ct.itemsize)))
    dx = xp.empty(x.shape, ct)
    part = xp.empty((nb, 2 * d), ct)
    sums = xp.empty((2 * d,), ct)
    _row_function(xp, "functx_layer_norm_grads", ct)(
        (nb,), block, (xc, wc, gc, dx, part, np.int64(rows), np.int32(d), np.int32(ws),
                       ct.type(eps)))
    _row_function(xp, "functx_column_sums", ct)(
        (-(-2 * d // 256),), (256,), (part, sums, np.int32(nb), np.int32(2 * d)))
    return tuple(a if ct == dt else a.astype(dt) for a in (dx, sums[:d], sums[d:]))


def log_softmax_grad(xp: Any, y: Any, g: Any, *, axis: int) -> Any:
    """log_softmax's VJP ``g - exp(y) * sum(g, axis)``: one row kernel."""
    dt = np.dtype(y.dtype)
    if y.size == 0:
        return xp.zeros(y.shape, dt)
    ct = _compute_dtype(dt)
    last = y.ndim - 1
    yc, gc = ((xp.ascontiguousarray(a if axis == last else xp.moveaxis(a, axis, last),
                                    dtype=ct)) for a in (y, g))
    d = yc.shape[-1]
    dx = xp.empty(yc.shape, ct)
    grid, block = _row_launch(d, yc.size // d)
    _row_function(xp, "functx_log_softmax_grad", ct)(grid, block, (yc, gc, dx, np.int32(d)))
    if ct != dt:
        dx = dx.astype(dt)
    return dx if axis == last else xp.moveaxis(dx, last, axis)


def _softmax_rows(xp: Any, x: Any, axis: int, log_out: bool) -> Any:
    dt = np.dtype(x.dtype)
    if x.size == 0:
        return xp.zeros(x.shape, dt)
    ct = _compute_dtype(dt)
    last = x.ndim - 1
    xc = xp.ascontiguousarray(x if axis == last else xp.moveaxis(x, axis, last), dtype=ct)
    d = xc.shape[-1]
    y = xp.empty(xc.shape, ct)
    grid, block = _row_launch(d, xc.size // d)
    _row_function(xp, "functx_softmax", ct)(grid, block, (xc, y, np.int32(d),
                                                          np.int32(log_out)))
    if ct != dt:
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
for _approx in ("tanh", "none"):
    _KERNEL_SOURCES[f"gelu_{_approx}"] = (lambda body, name: lambda xp: xp.ElementwiseKernel(
        "T x", "T y", body, name))(_GELU_BODY[_approx], f"functx_gelu_{_approx}")
    _KERNEL_SOURCES[f"gelu_grad_{_approx}"] = (lambda body, name: lambda xp: xp.ElementwiseKernel(
        "T x, T g", "T y", body, name))(_GELU_GRAD_BODY[_approx], f"functx_gelu_grad_{_approx}")


def gelu(xp: Any, x: Any, *, approximate: str) -> Any:
    """GELU in one elementwise kernel (float16 through float32)."""
    dt = np.dtype(x.dtype)
    ct = _compute_dtype(dt)
    y = _kernel(xp, f"gelu_{approximate}")(x.astype(ct, copy=False))
    return y if ct == dt else y.astype(dt)


def gelu_grad(xp: Any, x: Any, g: Any, *, approximate: str) -> Any:
    """``g * gelu'(x)`` in one elementwise kernel (float16 through float32)."""
    dt = np.dtype(x.dtype)
    ct = _compute_dtype(dt)
    y = _kernel(xp, f"gelu_grad_{approximate}")(x.astype(ct, copy=False),
                                                g.astype(ct, copy=False))
    return y if ct == dt else y.astype(dt)


# -- fused attention (functx/primitives/attention.py) ------------------------------------------
#
# Per chunk of the flattened batch and per block of query rows: cuBLAS GEMMs for the
# logits (and, backward, for ``ct @ v^T``), ONE row kernel (compiled with the row kernels
# above, one block per row of the logits), and GEMMs for the products with the
# probabilities. With a causal mask and large logits the queries are cut into blocks of
# _ATTENTION_BLOCK_ROWS rows (at most 8 blocks), each with only the keys its rows may see,
# so that the GEMMs skip much of the masked upper triangle (the blocks add their parts of
# dk and dv with beta = 1). Each block costs its own cuBLAS calls, about 15-20 us of host
# time each: 256 rows was the fastest on an H200 for L = 512 (0.86 ms per forward and
# backward step, against 1.07 ms with 128 and 1.03 ms unblocked). The row kernels compute
# scale, soft-cap, bias and the causal mask (from the indices) on the fly in each pass over
# the row (the row stays in L1/L2), with an online maximum and sum in the first pass. The
# bias is read through its broadcast strides (up to three collapsed batch dimensions), so a
# (L, S) or (B, 1, 1, S) bias is never expanded. The flattened batch is cut into chunks so
# that one scratch array of a chunk's block of logits holds at most _ATTENTION_SCRATCH_BYTES.

_ATTENTION_SCRATCH_BYTES = 64 << 20
_ATTENTION_BLOCK_ABOVE = 1 << 22  # logits (N * L * S) from which causal rows are blocked
_ATTENTION_BLOCK_ROWS = 256  # rows of a causal block (at most 8 blocks)

_ATTENTION_SOURCE = r"""
// scale * s, soft-capped (cap > 0; t = tanh(scale * s / cap)), plus the bias.
__device__ __forceinline__ T functx_attn_logit(T s, T scale, T cap, T b, T* t) {
    T x = s * scale;
    if (cap > (T)0) {
        *t = tanh(x / cap);
        x = cap * *t;
    }
    return x + b;
}

// The bias row of logits row i of batch n (batch index split over three dimensions).
__device__ __forceinline__ const T* functx_attn_bias_row(
        const T* bias, long long n, int i, long long bd1, long long bd2, long long bs0,
        long long bs1, long long bs2, long long bsl) {
    const long long i2 = n % bd2, i1 = (n / bd2) % bd1, i0 = n / (bd2 * bd1);
    return bias + i0 * bs0 + i1 * bs1 + i2 * bs2 + (long long)i * bsl;
}

// The maximum M and sum Z of exp(x - M) of the logits x[0:end] of one row, block-wide
// (online: one pass). A NaN logit makes both NaN; a row of -inf gives M = -inf, Z = 0.
__device__ void functx_attn_stats(const T* sr, const T* br, long long bss, int end, T scale,
                                  T cap, T* buf, T* M, T* Z) {
    T m = NEG_INF, l = 0, t = 0;
    for (int j = threadIdx.x; j < end; j += blockDim.x) {
        const T x = functx_attn_logit(sr[j], scale, cap, br[j * bss], &t);
        if (x > m) {
            l = l * exp(m - x) + (T)1;
            m = x;
        } else if (x != x) {
            m = x;
            l = x;
        } else if (x > NEG_INF) {
            l += exp(x - m);
        }
    }
    const T mm = functx_block_max(m, buf);
    const T lt = (m == NEG_INF) ? (T)0 : l * exp(m - mm);
    *M = mm;
    *Z = functx_block_sum(lt, buf);
}

// Row r of a scratch block of Lb rows of Sc logits per batch entry: batch n0 + r / Lb,
// query i0 + r % Lb, keys 0 .. Sc - 1 (the causal mask may end the row earlier).
#define FUNCTX_ATTN_ROW_SETUP                                                           \
    __shared__ T buf[33];                                                               \
    const long long r = blockIdx.x;                                                     \
    const long long n = n0 + r / Lb;                                                    \
    const int i = i0 + (int)(r % Lb);                                                   \
    T* sr = s + r * (long long)Sc;                                                      \
    const T* br = functx_attn_bias_row(bias, n, i, bd1, bd2, bs0, bs1, bs2, bsl);       \
    const int end = causal ? min(Sc, i + 1) : Sc;                                       \
    T M, Z, t = 0;                                                                      \
    functx_attn_stats(sr, br, bss, end, scale, cap, buf, &M, &Z);                       \
    const bool empty = (M == NEG_INF);

// In place: the raw logits q k^T of a block become the probabilities.
extern "C" __global__ void functx_attention_fwd(
        T* s, const T* bias, int Lb, int Sc, int i0, long long n0, long long bd1,
        long long bd2, long long bs0, long long bs1, long long bs2, long long bsl,
        long long bss, T scale, T cap, int causal) {
    FUNCTX_ATTN_ROW_SETUP
    for (int j = threadIdx.x; j < Sc; j += blockDim.x) {
        T p = 0;
        if (j < end && !empty)
            p = exp(functx_attn_logit(sr[j], scale, cap, br[j * bss], &t) - M) / Z;
        sr[j] = p;
    }
}

// In place: s (raw logits q k^T) becomes p, dp (ct v^T) becomes ds times the soft-cap's
// derivative; with write_dsb, dsb (row r at dso + (r / Lb) * dsn + (r % Lb) * dsi) gets ds
// itself (the bias's cotangent, before the cap).
extern "C" __global__ void functx_attention_bwd(
        T* s, T* dp, T* dsb, long long dso, long long dsn, long long dsi, int write_dsb,
        const T* bias,
        int Lb, int Sc, int i0, long long n0, long long bd1, long long bd2, long long bs0,
        long long bs1, long long bs2, long long bsl, long long bss, T scale, T cap,
        int causal) {
    FUNCTX_ATTN_ROW_SETUP
    T* dr = dp + r * (long long)Sc;
    T* gr = dsb + dso + (r / Lb) * dsn + (r % Lb) * dsi;
    T acc = 0;
    if (!empty) {
        for (int j = threadIdx.x; j < end; j += blockDim.x)
            acc += exp(functx_attn_logit(sr[j], scale, cap, br[j * bss], &t) - M) / Z * dr[j];
    }
    const T D = functx_block_sum(acc, buf);
    for (int j = threadIdx.x; j < Sc; j += blockDim.x) {
        T p = 0, g = 0;
        t = 0;
        if (j < end && !empty) {
            p = exp(functx_attn_logit(sr[j], scale, cap, br[j * bss], &t) - M) / Z;
            g = p * (dr[j] - D);
        }
        if (write_dsb) gr[j] = g;
        if (cap > (T)0) g *= (T)1 - t * t;
        sr[j] = p;
        dr[j] = g;
    }
}
"""


def _attention_bias(xp: Any, b: Any, scores: tuple[int, ...], ct: Any) -> tuple[Any, tuple]:
    """The bias (in dtype ``ct``) and its layout for the row kernels: ``(bd1, bd2, bs0, bs1,
    bs2, bsl, bss)``, its batch dimensions collapsed to three (sizes ``bd0`` (implied),
    ``bd1``, ``bd2``) and strides in elements; copied where they do not collapse."""
    if not isinstance(b, xp.ndarray):
        b = xp.asarray(b)
    full = xp.broadcast_to(b.astype(ct, copy=False), scores)
    for _ in range(2):
        isz = full.itemsize
        strides = [st // isz for st in full.strides]
        dims: list[tuple[int, int]] = []
        for size, st in zip(full.shape[:-2], strides[:-2]):
            if size == 1:
                continue
            if dims and dims[-1][1] == st * size:
                dims[-1] = (dims[-1][0] * size, st)
            else:
                dims.append((size, st))
        if len(dims) <= 3:
            break
        full = xp.ascontiguousarray(full)
    (_, bs0), (bd1, bs1), (bd2, bs2) = [(1, 0)] * (3 - len(dims)) + dims
    return full, tuple(np.int64(a) for a in (bd1, bd2, bs0, bs1, bs2, strides[-2],
                                               strides[-1]))


class _Gemm:
    """cuBLAS strided batched GEMMs on raw device pointers (no views, no layout checks: the
    few Python operations per call matter where a call is a few microseconds of GPU work).

    ``gemm(nb, m, n, k, x, y, c, alpha, beta)`` computes ``C = alpha X @ Y + beta C`` for
    ``nb`` row-major ``(m, k) @ (k, n)`` products. ``x`` and ``y`` are ``(pointer, leading
    dimension, batch stride, transposed)``: the row-major storage of the matrix, or with
    ``transposed`` of its transpose; ``c`` is ``(pointer, leading dimension, batch stride)``.
    Strides and leading dimensions are in elements.
    """

    def __init__(self, xp: Any, dt: np.dtype) -> None:
        from cupy_backends.cuda.libs import cublas

        type_name, type_value, compute_name, compute_value, self.scalar = _GEMM_TYPES[dt]
        self.data_type = getattr(xp.cuda.runtime, type_name, type_value)
        self.compute = getattr(cublas, compute_name, compute_value)
        self.algo = getattr(cublas, "CUBLAS_GEMM_DEFAULT", -1)
        self.call = cublas.gemmStridedBatchedEx
        self.handle = xp.cuda.device.get_cublas_handle()
        cublas.setStream(self.handle, xp.cuda.get_current_stream().ptr)

    def __call__(self, nb: int, m: int, n: int, k: int, x: tuple, y: tuple, c: tuple,
                 alpha: float = 1.0, beta: float = 0.0) -> None:
        dt = self.data_type
        a, b = _host_scalar(self.scalar, alpha), _host_scalar(self.scalar, beta)
        # Row-major C = X @ Y is column-major C^T = Y^T @ X^T (see gemm_strided_batched).
        self.call(self.handle, int(y[3]), int(x[3]), n, m, k, a[1], y[0], dt, y[1], y[2], x[0],
                  dt, x[1], x[2], b[1], c[0], dt, c[1], c[2], nb, self.compute, self.algo)


# (dtype, value) -> (array, its address): cuBLAS's alpha and beta live in host memory (its
# default pointer mode), read during the call. A GEMM site uses a few values (1, 0, the
# attention's scale), so each array is made once; making two per call cost about 5 us of
# host time per GEMM, in steps bound by host time.
_HOST_SCALARS: dict = {}


def _host_scalar(dtype: Any, value: float) -> tuple[np.ndarray, int]:
    """A host scalar of ``dtype`` holding ``value``, and its address (hold the pair while
    the address is in use: the cache may drop its own reference)."""
    key = (dtype, value)
    hit = _HOST_SCALARS.get(key)
    if hit is None:
        if len(_HOST_SCALARS) > 256:  # many distinct scales: start over
            _HOST_SCALARS.clear()
        arr = np.full((), value, dtype)
        hit = _HOST_SCALARS[key] = (arr, arr.ctypes.data)
    return hit


def _attention_setup(xp: Any, q: Any, k: Any, v: Any, b: Any, causal: bool,
                     extra: tuple = ()) -> tuple:
    """The compute dtype, sizes, contiguous 3-D ``(N, ., .)`` operands, the bias and its
    layout, the chunk size over N and the row blocks ``(r0, r1, c1)`` of an attention call:
    with a causal mask and large logits, blocks of about 256 queries, each with the keys
    ``0 .. c1 - 1`` its queries may see (the GEMMs skip most of the masked triangle)."""
    ct = _compute_dtype(q.dtype)
    lead, (L, E), S, Ev = tuple(q.shape[:-2]), q.shape[-2:], k.shape[-2], v.shape[-1]
    N = math.prod(lead)
    ops = [xp.ascontiguousarray(a.astype(ct, copy=False)).reshape((N,) + tuple(a.shape[-2:]))
           for a in (q, k, v) + extra]
    bias, layout = _attention_bias(xp, b, lead + (L, S), ct)
    nblocks = (min(8, L // _ATTENTION_BLOCK_ROWS)
               if causal and N * L * S > _ATTENTION_BLOCK_ABOVE else 1)
    if nblocks > 1:
        lb = -(-L // nblocks)
        blocks = [(r0, min(L, r0 + lb), min(S, r0 + lb)) for r0 in range(0, L, lb)]
    else:
        blocks = [(0, L, S)]
    per_n = max((r1 - r0) * c1 for r0, r1, c1 in blocks)
    chunks = max(1, -(-N * per_n * ct.itemsize // _ATTENTION_SCRATCH_BYTES))
    nc = max(1, -(-N // chunks))
    _row_launch(S, nc * L)  # checks the sizes
    return ct, (N, L, S, E, Ev), ops, bias, layout, nc, blocks, nc * per_n


def dot_product_attention(xp: Any, q: Any, k: Any, v: Any, b: Any, *, scale: float,
                          causal: bool, softcap: float | None) -> Any:
    """Fused attention: per chunk and row block, a GEMM, one row kernel, a GEMM."""
    if 0 in q.shape or 0 in k.shape or 0 in v.shape:  # nothing for the kernels to do
        from functx.primitives.attention import _attention_impl

        return _attention_impl(xp, q, k, v, b, scale=scale, causal=causal, softcap=softcap)
    dt = np.dtype(q.dtype)
    lead = tuple(q.shape[:-2])
    ct, (N, L, S, E, Ev), (q3, k3, v3), bias, layout, nc, blocks, size = _attention_setup(
        xp, q, k, v, b, causal)
    out = xp.empty((N, L, Ev), ct)
    s = xp.empty(size, ct)
    isz = ct.itemsize
    qp, kp, vp, op, sp = (a.data.ptr for a in (q3, k3, v3, out, s))
    gemm = _Gemm(xp, ct)
    fn = _row_function(xp, "functx_attention_fwd", ct)
    params = (ct.type(scale), ct.type(softcap or 0), np.int32(causal))
    for n0 in range(0, N, nc):
        m = min(N, n0 + nc) - n0
        for r0, r1, c1 in blocks:
            lb = r1 - r0
            gemm(m, lb, c1, E, (qp + (n0 * L + r0) * E * isz, E, L * E, False),
                 (kp + n0 * S * E * isz, E, S * E, True), (sp, c1, lb * c1))
            grid, block = _row_launch(c1, m * lb)
            fn(grid, block, (s, bias, np.int32(lb), np.int32(c1), np.int32(r0), np.int64(n0),
                             *layout, *params))
            gemm(m, lb, Ev, c1, (sp, c1, lb * c1, False), (vp + n0 * S * Ev * isz, Ev,
                                                           S * Ev, False),
                 (op + (n0 * L + r0) * Ev * isz, Ev, L * Ev))
    out = out.reshape(lead + (L, Ev))
    return out if ct == dt else out.astype(dt)


def dot_product_attention_grad(xp: Any, q: Any, k: Any, v: Any, b: Any, g: Any, *,
                               scale: float, causal: bool, softcap: float | None,
                               bias_grad: bool) -> tuple:
    """The fused attention's input cotangents: per chunk and row block, two GEMMs, one row
    kernel, three GEMMs (row blocks add their parts of dk and dv); ``dbias`` summed from a
    full ``(N, L, S)`` array."""
    if 0 in q.shape or 0 in k.shape or 0 in v.shape:  # nothing for the kernels to do
        from functx.primitives.attention import _attention_grad_impl

        return _attention_grad_impl(xp, q, k, v, b, g, scale=scale, causal=causal,
                                    softcap=softcap, bias_grad=bias_grad)
    dt = np.dtype(q.dtype)
    lead = tuple(q.shape[:-2])
    ct, (N, L, S, E, Ev), (q3, k3, v3, g3), bias, layout, nc, blocks, size = \
        _attention_setup(xp, q, k, v, b, causal, (g,))
    add = len(blocks) > 1  # row blocks add up dk and dv (and see only some keys)
    new = xp.zeros if add else xp.empty
    dq = xp.empty((N, L, E), ct)
    dk, dv = new((N, S, E), ct), new((N, S, Ev), ct)
    s, dp = xp.empty(size, ct), xp.empty(size, ct)
    dsb = new((N, L, S), ct) if bias_grad else dp
    isz = ct.itemsize
    qp, kp, vp, gp, sp, dpp, dqp, dkp, dvp = (a.data.ptr for a in (q3, k3, v3, g3, s, dp,
                                                                   dq, dk, dv))
    gemm = _Gemm(xp, ct)
    fn = _row_function(xp, "functx_attention_bwd", ct)
    params = (ct.type(scale), ct.type(softcap or 0), np.int32(causal))
    beta = 1.0 if add else 0.0
    for n0 in range(0, N, nc):
        m = min(N, n0 + nc) - n0
        for r0, r1, c1 in blocks:
            lb = r1 - r0
            qb = (qp + (n0 * L + r0) * E * isz, E, L * E)
            gb = (gp + (n0 * L + r0) * Ev * isz, Ev, L * Ev)
            kb = (kp + n0 * S * E * isz, E, S * E)
            vb = (vp + n0 * S * Ev * isz, Ev, S * Ev)
            sb, dpb = (sp, c1, lb * c1), (dpp, c1, lb * c1)
            gemm(m, lb, c1, E, (*qb, False), (*kb, True), sb)
            gemm(m, lb, c1, Ev, (*gb, False), (*vb, True), dpb)
            grid, block = _row_launch(c1, m * lb)
            fn(grid, block, (s, dp, dsb, np.int64((n0 * L + r0) * S), np.int64(L * S),
                             np.int64(S), np.int32(bias_grad), bias, np.int32(lb),
                             np.int32(c1), np.int32(r0), np.int64(n0), *layout, *params))
            gemm(m, c1, Ev, lb, (*sb, True), (*gb, False),
                 (dvp + n0 * S * Ev * isz, Ev, S * Ev), beta=beta)
            gemm(m, lb, E, c1, (*dpb, False), (*kb, False),
                 (dqp + (n0 * L + r0) * E * isz, E, L * E), alpha=scale)
            gemm(m, c1, E, lb, (*dpb, True), (*qb, False),
                 (dkp + n0 * S * E * isz, E, S * E), alpha=scale, beta=beta)
    outs = [a.reshape(lead + a.shape[1:]) for a in (dq, dk, dv)]
    if bias_grad:
        full = dsb.reshape(lead + (L, S))
        shape = tuple(b.shape)
        extra = full.ndim - len(shape)
        axes = tuple(range(extra)) + tuple(extra + i for i, d in enumerate(shape)
                                           if d == 1 and full.shape[extra + i] != 1)
        outs.append((full.sum(axis=axes) if axes else full).reshape(shape))
    return tuple(o if ct == dt else o.astype(dt) for o in outs)
