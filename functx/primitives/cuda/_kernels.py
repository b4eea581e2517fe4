"""The compile cache of every CUDA kernel functx launches, and what the kernels share.

Every CuPy ``ElementwiseKernel`` and every function of a ``RawModule`` that the modules of
this package launch comes from :func:`elementwise_kernel` or :func:`raw_function`: compiled
on first use (CuPy also keeps the binaries on disk) and kept for the process, in one cache.
Kernel names are unique across functx (all start with ``functx_``), so a name identifies
its kernel.

Raw sources are written for a compute type ``T`` (``typedef CTYPE T;``) and compiled once per
dtype (float32 and float64, see :data:`CTYPE`); ``NEG_INF`` in a source becomes -infinity of
that type. Row kernels may also read and write their big operands in a storage type ``S``
(``typedef STYPE S;``), loaded with ``functx_ld`` and stored with ``functx_st``: ``S`` is
``T`` for float32 and float64, and ``__nv_bfloat16`` (``cuda_bf16.h``) for bfloat16, which
computes in float32 (see :data:`STORAGE`; :data:`BF16_KERNELS` turns it off, and bfloat16
operands are then cast to float32 around the kernels as float16's are).
:data:`ROW_HELPERS` holds the block-wide sums and maxima of the row kernels (one block per
row of a contiguous last axis; :func:`row_launch` gives their launch), which the fused,
nll and attention sources start with. Importing this module needs no CuPy: the array module
``xp`` (cupy) is passed in.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

# The one cache: kernel name -> ElementwiseKernel, (function name, dtype) -> RawModule
# function, (source, dtype) -> RawModule.
_CACHE: dict[Any, Any] = {}

# The C type of ``T`` for each dtype the raw kernels are compiled for.
CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

# -infinity of ``T`` (NEG_INF in a source).
NEG_INF = {np.dtype(np.float32): "__int_as_float((int)0xff800000u)",
           np.dtype(np.float64): "__longlong_as_double((long long)0xfff0000000000000ull)"}


BFLOAT16 = np.dtype(ml_dtypes.bfloat16)

# Whether the row kernels load and store bfloat16 themselves (float32 math inside); False:
# bfloat16 operands are cast to float32 copies around the kernels (as float16's are).
BF16_KERNELS = True

# storage dtype -> (compute dtype, C type of S, the loads and stores, the source's prefix)
_IDENTITY_LD_ST = (
    "__device__ __forceinline__ T functx_ld(S v) { return v; }\n"
    "__device__ __forceinline__ S functx_st(T v) { return v; }\n")
STORAGE = {
    np.dtype(np.float32): (np.dtype(np.float32), "float", _IDENTITY_LD_ST, ""),
    np.dtype(np.float64): (np.dtype(np.float64), "double", _IDENTITY_LD_ST, ""),
    BFLOAT16: (np.dtype(np.float32), "__nv_bfloat16",
               "__device__ __forceinline__ T functx_ld(S v) { return __bfloat162float(v); }\n"
               "__device__ __forceinline__ S functx_st(T v) { return __float2bfloat16(v); }\n",
               "#include <cuda_bf16.h>\n"),
}


def storage_dtype(dtype: Any) -> np.dtype:
    """The dtype the row kernels read and write for operands of ``dtype``: the dtype
    itself where the kernels are compiled for it (float32, float64, and bfloat16 unless
    :data:`BF16_KERNELS` is off), else the compute dtype (float16: cast to float32)."""
    dt = np.dtype(dtype)
    if dt in STORAGE and (dt != BFLOAT16 or BF16_KERNELS):
        return dt
    return compute_dtype(dt)


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


def raw_function(xp: Any, source: str, name: str, dtype: Any, storage: Any = None) -> Any:
    """The function ``name`` of the ``RawModule`` compiled from ``source`` for ``dtype``
    (and the storage dtype ``storage``).

    Args:
        xp: the array module (cupy).
        source: CUDA C source for a type ``T`` (``typedef CTYPE T;``; ``NEG_INF`` is
            -infinity of ``T``; with :data:`ROW_HELPERS`, also the storage type ``S`` and
            ``functx_ld``/``functx_st``); compiled once per (dtype, storage).
        name: an ``extern "C"`` kernel of ``source``, unique across functx.
        dtype: a key of :data:`CTYPE` (a NumPy dtype): the compute type ``T``.
        storage: a key of :data:`STORAGE` whose compute dtype is ``dtype``: the type ``S``
            (default: ``dtype`` itself).

    Returns:
        The kernel, to be called as ``fn(grid, block, args)``.

    Example:
        >>> fn = raw_function(cupy, SOURCE, "functx_softmax", np.dtype(np.float32))
    """
    key = (name, dtype, storage)
    fn = _CACHE.get(key)  # (the hot path: kernels are launched per call)
    if fn is not None:
        return fn
    dt = np.dtype(dtype)
    st = dt if storage is None else np.dtype(storage)
    module = _CACHE.get((source, dt, st))
    if module is None:
        _, s_type, ld_st, prefix = STORAGE[st]
        code = prefix + (source.replace("LOAD_STORE", ld_st).replace("CTYPE", CTYPE[dt])
                         .replace("STYPE", s_type).replace("NEG_INF", NEG_INF[dt]))
        module = _CACHE[(source, dt, st)] = xp.RawModule(code=code)
    fn = _CACHE[key] = module.get_function(name)
    return fn


def compute_dtype(dtype: Any) -> np.dtype:
    """The dtype the row kernels compute in: float64 stays float64; float32, float16 and
    bfloat16 compute in float32."""
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
typedef STYPE S;
LOAD_STORE

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
