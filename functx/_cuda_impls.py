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
* ``erf``: CUDA's ``erf`` (within 2 ulp; float16 through float32) instead of the generic
  table-driven polynomial, which indexes with boolean masks (a device synchronisation).
* ``dot_general``: batched products of float16/float32/float64 call cuBLAS's strided
  batched GEMM directly on the operands' layouts (CuPy's batched ``matmul`` copies
  float16 operands to float32 and makes transposed operands contiguous); unbatched ones use
  the 2-D ``matmul``, which takes transposed views as they are.

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


def gemm_strided_batched(xp: Any, x3: Any, y3: Any) -> Any:
    """``x3 @ y3`` for 3-D float16/32/64 arrays of one dtype with one cuBLAS call.

    float16 accumulates in float32 (as cuBLAS and PyTorch do); float32 uses plain FP32
    (no TF32 unless CuPy's handle was switched to it).
    """
    from cupy_backends.cuda.libs import cublas

    nb, m, k = x3.shape
    n = y3.shape[2]
    dt = np.dtype(x3.dtype)
    out = xp.empty((nb, m, n), dtype=dt)
    if out.size == 0:
        return out
    if k == 0:
        out.fill(0)
        return out
    lx = _blas_layout(x3)
    if lx is None:
        x3 = xp.ascontiguousarray(x3)
        lx = _blas_layout(x3)
    ly = _blas_layout(y3)
    if ly is None:
        y3 = xp.ascontiguousarray(y3)
        ly = _blas_layout(y3)
    type_name, type_value, compute_name, compute_value, scalar = _GEMM_TYPES[dt]
    data_type = getattr(xp.cuda.runtime, type_name, type_value)
    compute = getattr(cublas, compute_name, compute_value)
    alpha, beta = np.ones((), scalar), np.zeros((), scalar)
    handle = xp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, xp.cuda.get_current_stream().ptr)
    # Row-major out = x @ y is column-major out^T = y^T @ x^T: cuBLAS's A is y, its B is x.
    # A row-major matrix is its transpose in column-major order (op N), a column-major one
    # needs op T.
    cublas.gemmStridedBatchedEx(
        handle, 0 if ly[0] else 1, 0 if lx[0] else 1, n, m, k,
        alpha.ctypes.data, y3.data.ptr, data_type, ly[1], ly[2],
        x3.data.ptr, data_type, lx[1], lx[2],
        beta.ctypes.data, out.data.ptr, data_type, n, m * n,
        nb, compute, getattr(cublas, "CUBLAS_GEMM_DEFAULT", -1))
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

extern "C" __global__ void functx_layer_norm_grad(const T* x, const T* w, const T* g, T* dx,
                                                  int d, int ws, T eps) {
    __shared__ T buf[33];
    const long long off = (long long)blockIdx.x * d;
    T mean, rstd;
    functx_row_stats(x + off, d, eps, buf, &mean, &rstd);
    T s1 = 0, s2 = 0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        const T gw = g[off + j] * w[j * ws];
        s1 += gw;
        s2 += gw * ((x[off + j] - mean) * rstd);
    }
    const T m1 = functx_block_sum(s1, buf) / (T)d;
    const T m2 = functx_block_sum(s2, buf) / (T)d;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        const T gw = g[off + j] * w[j * ws];
        const T xh = (x[off + j] - mean) * rstd;
        dx[off + j] = rstd * ((gw - m1) - xh * m2);
    }
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


def _row_function(xp: Any, name: str, dtype: Any) -> Any:
    dt = np.dtype(dtype)
    module = _ROW_MODULES.get(dt)
    if module is None:
        code = _ROW_SOURCE.replace("CTYPE", _CTYPE[dt]).replace("NEG_INF", _NEG_INF[dt])
        module = _ROW_MODULES[dt] = xp.RawModule(code=code)
    return module.get_function(name)


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
