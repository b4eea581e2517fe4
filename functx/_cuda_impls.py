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
