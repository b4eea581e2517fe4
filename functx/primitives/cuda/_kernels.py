"""The compile cache of every CUDA kernel functx launches, and what the kernels share.

Every CuPy ``ElementwiseKernel`` and every function of a ``RawModule`` that the modules of
this package launch comes from :func:`elementwise_kernel` or :func:`raw_function`: compiled
on first use (CuPy also keeps the binaries on disk) and kept for the process, in one cache.
Kernel names are unique across functx (all start with ``functx_``), so a name identifies
its kernel.

Raw sources are written for a type ``T`` (``typedef CTYPE T;``) and compiled once per dtype
(float32 and float64, see :data:`CTYPE`); ``NEG_INF`` in a source becomes -infinity of that
type. :data:`ROW_HELPERS` holds the block-wide sums and maxima of the row kernels (one block
per row of a contiguous last axis; :func:`row_launch` gives their launch), which the fused,
nll and attention sources start with. Importing this module needs no CuPy: the array module
``xp`` (cupy) is passed in.
"""
from __future__ import annotations

from typing import Any

import numpy as np

# The one cache: kernel name -> ElementwiseKernel, (function name, dtype) -> RawModule
# function, (source, dtype) -> RawModule.
_CACHE: dict[Any, Any] = {}

# The C type of ``T`` for each dtype the raw kernels are compiled for.
CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

# -infinity of ``T`` (NEG_INF in a source).
NEG_INF = {np.dtype(np.float32): "__int_as_float((int)0xff800000u)",
           np.dtype(np.float64): "__longlong_as_double((long long)0xfff0000000000000ull)"}


def elementwise_kernel(xp: Any, name: str, in_params: str, out_params: str,
                       operation: str) -> Any:
    """The CuPy ``ElementwiseKernel`` called ``name`` (compiled on first use, then kept).

    Args:
        xp: the array module (cupy).
        name: the kernel's name, unique across functx (``functx_...``).
        in_params, out_params, operation: as for ``cupy.ElementwiseKernel``; only read the
            first time ``name`` is asked for.

    Returns:
        The kernel.

    Example:
        >>> erf = elementwise_kernel(cupy, "functx_erf", "T x", "T y", "y = erf(x);")
    """
    k = _CACHE.get(name)
    if k is None:
        k = _CACHE[name] = xp.ElementwiseKernel(in_params, out_params, operation, name)
    return k


def raw_function(xp: Any, source: str, name: str, dtype: Any) -> Any:
    """The function ``name`` of the ``RawModule`` compiled from ``source`` for ``dtype``.

    Args:
        xp: the array module (cupy).
        source: CUDA C source for a type ``T`` (``typedef CTYPE T;``; ``NEG_INF`` is
            -infinity of ``T``); compiled once per dtype.
        name: an ``extern "C"`` kernel of ``source``, unique across functx.
        dtype: a key of :data:`CTYPE` (a NumPy dtype).

    Returns:
        The kernel, to be called as ``fn(grid, block, args)``.

    Example:
        >>> fn = raw_function(cupy, SOURCE, "functx_softmax", np.dtype(np.float32))
    """
    fn = _CACHE.get((name, dtype))  # (the hot path: kernels are launched per call)
    if fn is not None:
        return fn
    dt = np.dtype(dtype)
    module = _CACHE.get((source, dt))
    if module is None:
        code = source.replace("CTYPE", CTYPE[dt]).replace("NEG_INF", NEG_INF[dt])
        module = _CACHE[(source, dt)] = xp.RawModule(code=code)
    fn = _CACHE[(name, dtype)] = module.get_function(name)
    return fn


def compute_dtype(dtype: Any) -> np.dtype:
    """The dtype the row kernels compute in: float64 stays float64; float32 and float16
    compute in float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def row_launch(d: int, rows: int) -> tuple[tuple[int], tuple[int]]:
    """Grid and block of a row kernel: one block per row, about 8 elements per thread.

    Raises:
        ValueError: 2**31 rows or more, or rows of 2**31 elements or more.
    """
    if rows >= 2**31 or d >= 2**31:
        raise ValueError(f"the CUDA row kernels support fewer than 2**31 rows of fewer than "
                         f"2**31 elements (got {rows} rows of {d}).")
    threads = min(1024, max(32, ((-(-d // 8) + 31) // 32) * 32))
    return (rows,), (threads,)


# Row kernels: one block per row of the (contiguous) last axis, each thread striding over
# the row, block-wide sums and maxima through warp shuffles and 33 shared values.
ROW_HELPERS = r"""
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
"""
