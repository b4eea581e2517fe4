"""CUDA implementations of linear algebra primitives (functx/primitives/linalg.py) and the
cuBLAS GEMMs that other CUDA implementations (attention, convolution) are built on.

* ``dot_general``: batched products of float16/bfloat16/float32/float64 call cuBLAS's
  strided batched GEMM directly on the operands' layouts (CuPy's batched ``matmul`` copies
  float16 operands to float32 and makes transposed operands contiguous); unbatched ones use
  the 2-D ``matmul``, which takes transposed views as they are. float16 and bfloat16
  products run on tensor cores with float32 accumulation (cuBLAS's ``CUBLAS_COMPUTE_32F``
  for 16-bit data; CuPy's 2-D ``matmul`` makes the same ``cublasGemmEx`` call). With
  ``precision="tensorfloat32"`` (functx/config.py), float32 and complex64 products may use
  TF32 tensor cores: ``CUBLAS_COMPUTE_32F_FAST_TF32`` in the batched GEMM, and CuPy's
  compute type for float32 (``cupy._core._routines_linalg.set_compute_type``, the switch
  behind ``CUPY_TF32=1``) set to TF32 around the 2-D ``matmul`` and restored after it.
* ``dot_general_accumulate``: ``acc += x @ y`` as one GEMM with ``beta = 1`` (jit's CUDA
  lowering folds ``add(c, dot_general(a, b))`` into it: no separate addition kernel).
* :func:`gemm_strided_batched` (one cuBLAS call for ``x3 @ y3`` on arrays, in their own
  layouts where cuBLAS can read them) and :class:`Gemm` (the same call on raw device
  pointers, for callers that lay out their operands themselves).

Each function here is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy,
registered next to its primitive with ``p.def_impl(fn, backend="cuda")``. Importing this
module needs no CuPy (cuBLAS is reached through CuPy when a GEMM is made).
"""
from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from functx.backends._cuda import CAPTURING
from functx.primitives.cuda import _raw


def _free(ndim: int, contract: Any, batch: Any) -> tuple[int, ...]:
    taken = set(contract) | set(batch)
    return tuple(i for i in range(ndim) if i not in taken)


def dot_general(xp: Any, x: Any, y: Any, *, dimension_numbers: tuple,
                precision: str | None = None) -> Any:
    """dot_general with cuBLAS: see the module docstring."""
    if precision == "tensorfloat32" and x.dtype.char in "fF":
        with TF32Matmul(xp):
            return _dot_general(xp, x, y, dimension_numbers, True)
    return _dot_general(xp, x, y, dimension_numbers, False)


def _dot_general(xp: Any, x: Any, y: Any, dimension_numbers: tuple, tf32: bool) -> Any:
    (xc, yc), (xb, yb) = dimension_numbers
    capturing = CAPTURING[0] and np.dtype(x.dtype) in _GEMM_TYPES
    if x.ndim == 2 and y.ndim == 2 and len(xc) == 1 and not xb and not capturing:
        return xp.matmul(x if xc[0] == 1 else x.T, y if yc[0] == 0 else y.T)
    xf, yf = _free(x.ndim, xc, xb), _free(y.ndim, yc, yb)
    size = lambda a, axes: math.prod(a.shape[i] for i in axes)
    b, m, k, n = size(x, xb), size(x, xf), size(x, xc), size(y, yf)
    x3 = xp.reshape(xp.transpose(x, xb + xf + xc), (b, m, k))
    y3 = xp.reshape(xp.transpose(y, yb + yc + yf), (b, k, n))
    out_shape = (tuple(x.shape[i] for i in xb) + tuple(x.shape[i] for i in xf)
                 + tuple(y.shape[i] for i in yf))
    if b == 1 and not capturing:
        out = xp.matmul(x3[0], y3[0])
    elif np.dtype(x.dtype) in _GEMM_TYPES:
        out = gemm_strided_batched(xp, x3, y3, tf32=tf32)
    else:
        out = xp.matmul(x3, y3)
    return xp.reshape(out, out_shape)


def dot_general_out(xp: Any, x: Any, y: Any, *, out: Any, dimension_numbers: tuple,
                    precision: str | None = None) -> Any:
    """dot_general into ``out`` (C-contiguous, the output's shape): one GEMM with
    ``beta = 0`` there (jit's memory planner hands it dead buffers)."""
    if np.dtype(x.dtype) not in _GEMM_TYPES:
        out[...] = dot_general(xp, x, y, dimension_numbers=dimension_numbers,
                               precision=precision)
        return out
    return _gemm_into(xp, x, y, out, dimension_numbers, precision, 0.0)


def dot_general_accumulate(xp: Any, x: Any, y: Any, *, acc: Any, dimension_numbers: tuple,
                           precision: str | None = None) -> Any:
    """``acc += dot_general(x, y)`` in place: one cuBLAS GEMM with ``beta = 1`` into
    ``acc`` (C-contiguous, the output's shape) for float16/bfloat16/float32/float64; other
    dtypes add a product computed apart."""
    if np.dtype(x.dtype) not in _GEMM_TYPES or not acc.flags.c_contiguous:
        acc += dot_general(xp, x, y, dimension_numbers=dimension_numbers, precision=precision)
        return acc
    return _gemm_into(xp, x, y, acc, dimension_numbers, precision, 1.0)


def _gemm_into(xp: Any, x: Any, y: Any, out: Any, dimension_numbers: tuple,
               precision: str | None, beta: float) -> Any:
    (xc, yc), (xb, yb) = dimension_numbers
    xf, yf = _free(x.ndim, xc, xb), _free(y.ndim, yc, yb)
    size = lambda a, axes: math.prod(a.shape[i] for i in axes)
    b, m, k, n = size(x, xb), size(x, xf), size(x, xc), size(y, yf)
    x3 = xp.reshape(xp.transpose(x, xb + xf + xc), (b, m, k))
    y3 = xp.reshape(xp.transpose(y, yb + yc + yf), (b, k, n))
    tf32 = precision == "tensorfloat32" and x.dtype.char == "f"
    gemm_strided_batched(xp, x3, y3, out=out.reshape(b, m, n), beta=beta, tf32=tf32)
    return out


class TF32Matmul:
    """A block in which CuPy's float32 (and complex64) products may use TF32: CuPy's
    compute type for float32 set to ``COMPUTE_TYPE_TF32`` and restored on exit (CuPy keeps
    one global setting; ``CUPY_TF32=1`` sets the same switch at start-up). On a GPU older
    than compute capability 8.0 CuPy warns and computes in float32."""

    def __init__(self, xp: Any) -> None:
        from cupy._core import _routines_linalg as linalg

        self.linalg = linalg
        self.tf32 = getattr(linalg, "COMPUTE_TYPE_TF32", 7)

    def __enter__(self) -> None:
        self.old = self.linalg.get_compute_type(np.float32)
        if self.old != self.tf32:
            self.linalg.set_compute_type(np.float32, self.tf32)

    def __exit__(self, *exc: Any) -> None:
        if self.old != self.tf32:
            self.linalg.set_compute_type(np.float32, self.old)


# dtype -> (CUDA data type, cuBLAS compute type, dtype of alpha and beta); the values are
# those of CUDA's library_types.h and cublas_api.h, used where CuPy lacks the name.
_GEMM_TYPES = {np.dtype(np.float16): ("CUDA_R_16F", 2, "CUBLAS_COMPUTE_32F", 68, np.float32),
               np.dtype(np.float32): ("CUDA_R_32F", 0, "CUBLAS_COMPUTE_32F", 68, np.float32),
               np.dtype(np.float64): ("CUDA_R_64F", 1, "CUBLAS_COMPUTE_64F", 70, np.float64)}
# bfloat16: tensor cores with float32 accumulation (as float16)
_GEMM_TYPES[np.dtype(ml_dtypes.bfloat16)] = ("CUDA_R_16BF", 14, "CUBLAS_COMPUTE_32F", 68,
                                             np.float32)
# float32 with TF32 tensor cores (precision="tensorfloat32")
_TF32_COMPUTE = ("CUBLAS_COMPUTE_32F_FAST_TF32", 77)


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
                         beta: float = 0.0, tf32: bool = False, alpha: float = 1.0) -> Any:
    """``alpha x3 @ y3`` (plus ``beta * out``) for 3-D float16/bfloat16/float32/float64 arrays of
    one dtype with one cuBLAS call, into ``out`` if given (a C-contiguous ``(batch, m, n)``
    array).

    The operands are read in their own layouts where cuBLAS can (transposed or broadcast
    matrices included, see ``_blas_layout``), else copied. float16 and bfloat16 accumulate
    in float32 (as cuBLAS and PyTorch do); float32 uses plain FP32 unless ``tf32``
    (``CUBLAS_COMPUTE_32F_FAST_TF32``).
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
    Gemm(xp, dt, tf32=tf32)(nb, m, n, k, (x3.data.ptr, lx[1], lx[2], not lx[0]),
                 (y3.data.ptr, ly[1], ly[2], not ly[0]), (out.data.ptr, n, m * n), alpha=alpha,
                 beta=beta)
    return out


class Gemm:
    """cuBLAS strided batched GEMMs on raw device pointers (no views, no layout checks: the
    few Python operations per call matter where a call is a few microseconds of GPU work).

    ``gemm(nb, m, n, k, x, y, c, alpha, beta)`` computes ``C = alpha X @ Y + beta C`` for
    ``nb`` row-major ``(m, k) @ (k, n)`` products. ``x`` and ``y`` are ``(pointer, leading
    dimension, batch stride, transposed)``: the row-major storage of the matrix, or with
    ``transposed`` of its transpose; ``c`` is ``(pointer, leading dimension, batch stride)``.
    Strides and leading dimensions are in elements.
    """

    def __init__(self, xp: Any, dt: np.dtype, *, tf32: bool = False) -> None:
        from cupy_backends.cuda.libs import cublas

        type_name, type_value, compute_name, compute_value, self.scalar = _GEMM_TYPES[dt]
        if tf32 and dt == np.float32:
            compute_name, compute_value = _TF32_COMPUTE
        self.data_type = getattr(xp.cuda.runtime, type_name, type_value)
        self.compute = getattr(cublas, compute_name, compute_value)
        self.algo = getattr(cublas, "CUBLAS_GEMM_DEFAULT", -1)
        self.handle = xp.cuda.device.get_cublas_handle()
        if CAPTURING[0]:  # CuPy's wrappers refuse capture; cuBLAS itself supports it
            lib = _raw.library("cublas")
            lib.cublasSetStream_v2(self.handle, xp.cuda.get_current_stream().ptr)
            self.call = lib.cublasGemmStridedBatchedEx
        else:
            self.call = cublas.gemmStridedBatchedEx
            cublas.setStream(self.handle, xp.cuda.get_current_stream().ptr)

    def __call__(self, nb: int, m: int, n: int, k: int, x: tuple, y: tuple, c: tuple,
                 alpha: float = 1.0, beta: float = 0.0) -> None:
        dt = self.data_type
        a, b = _raw.host_scalar(self.scalar, alpha), _raw.host_scalar(self.scalar, beta)
        # Row-major C = X @ Y is column-major C^T = Y^T @ X^T (see gemm_strided_batched).
        status = self.call(self.handle, int(y[3]), int(x[3]), n, m, k, a[1], y[0], dt, y[1],
                           y[2], x[0], dt, x[1], x[2], b[1], c[0], dt, c[1], c[2], nb,
                           self.compute, self.algo)
        if status:  # (CuPy's wrapper raises itself and returns None)
            raise RuntimeError(f"cuBLAS GemmStridedBatchedEx failed with status {status} "
                               f"during CUDA-graph capture ({nb}x({m}x{k} @ {k}x{n})).")
