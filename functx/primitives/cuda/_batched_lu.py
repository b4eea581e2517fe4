"""Stacks of small matrices on CUDA: cuBLAS's batched LU routines (through CuPy's wrappers
of ``cublas<t>getrfBatched`` and ``cublas<t>trsmBatched``) and two small kernels, for the
``lu``, ``lu_solve``, ``lu_inverse`` and ``triangular_solve`` rules of
functx/primitives/cuda/decompositions.py.

A stack of ``count > 1`` square matrices of at most :data:`BATCHED_MAX_N` rows (``float32``,
``float64``, ``complex64``, ``complex128``) is factored or solved by one cuBLAS call for the
whole stack instead of one cuSOLVER/cuBLAS call (and a few CuPy kernels) per matrix; bigger
matrices and single matrices keep the per-matrix path (cuBLAS's batched routines are meant
for small matrices, where launches dominate; cupyx's per-matrix routines use cuSOLVER's
blocked algorithms).

Layout: cuBLAS reads column-major ("Fortran") matrices, so the C-ordered storage of a
matrix ``a`` is ``a^T`` to cuBLAS.

* ``lu``: ``getrfBatched`` factors a column-major copy of each matrix (the C-ordered copy of
  ``a^T``) in place; the factors are transposed back to C order. cuBLAS's pivots are
  1-based; they are returned 0-based (as JAX's and the CPU implementation's). cuBLAS
  stops eliminating at a zero pivot, so the matrices its ``info`` flags (singular ones)
  and any with a non-finite factor are factored again one by one by cuSOLVER, as LAPACK
  would (one host read of the flags per call). Complex stacks are not factored here
  (functx/primitives/cuda/decompositions.py keeps them per matrix): cuBLAS pivots on
  ``|a|``, LAPACK and cuSOLVER on ``|re| + |im|``, so the factors would differ from the
  CPU's.
* ``triangular_solve``: ``op(a) x = b`` is ``x^T op(a)^T = b^T``. The C-ordered storage of
  ``b`` (and of the result ``x``, solved in place in a C-ordered copy of ``b``) is ``b^T``
  (``x^T``) to cuBLAS, and that of ``a`` is ``A = a^T``; so a left solve is cuBLAS's right
  solve with ``op(a)^T`` written over ``A``: ``a^T = A`` (``N``), ``a = A^T`` (``T``),
  ``conj(a) = A^H`` (``C``), and for a conjugate without transpose ``a^H = conj(A)``:
  ``N`` on a conjugated copy of ``a``. The triangle flips (the lower triangle of ``a`` is
  the upper one of ``A``). A right solve ``x op(a) = b`` is likewise cuBLAS's left solve.
  No copy of ``a`` (except that conjugate); a zero on the diagonal gives infinities or NaNs,
  as ``trsm`` does (cupyx's per-matrix solve, the previous path, calls ``trsm`` too).
* ``lu_solve`` (and ``lu_inverse``, ``lu_solve`` with the identity): the rows of ``b``
  gathered by the permutation (one kernel, into a new C-ordered array), then two batched
  triangular solves in place (``trans = 0``); or the two solves with ``U^T``/``L^T``
  (``U^H``/``L^H``) on a copy of ``b``, then the rows scattered (``trans = 1, 2``). The
  pointer arrays are made once for both solves.
* :func:`permutation`: the permutation of LAPACK-style row swaps (1- or 0-based), one block
  per matrix applying its swaps in shared memory (the per-matrix ``lu`` uses it too: a loop
  of CuPy operations per pivot costs about 10 launches per row).

Nothing here imports CuPy at import time; ``xp`` is cupy.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from functx.primitives.cuda._kernels import elementwise_kernel, raw_function

# The largest matrices factored and solved by cuBLAS's batched routines (bigger ones: the
# per-matrix path). JAX's GPU lowering uses ``getrfBatched`` up to about this size too.
BATCHED_MAX_N = 128

# dtype character -> cuBLAS's type prefix
_PREFIX = {"f": "s", "d": "d", "F": "c", "D": "z"}



def use_batched(a: Any) -> bool:
    """Whether the stack ``a`` (``(..., n, n)``) goes through cuBLAS's batched routines:
    more than one square matrix, of at most :data:`BATCHED_MAX_N` rows, of a LAPACK dtype."""
    if a.ndim < 3 or a.shape[-1] != a.shape[-2] or a.shape[-1] > BATCHED_MAX_N:
        return False
    return math.prod(a.shape[:-2]) > 1 and a.dtype.char in _PREFIX and a.size > 0


def _cublas() -> Any:
    from cupy_backends.cuda.libs import cublas  # lazily: CuPy only when CUDA runs

    return cublas


def _pointers(xp: Any, x: Any) -> Any:
    """The device array (uintp) of the addresses of the matrices of the C-contiguous stack
    ``x`` (``(count, r, c)``): cuBLAS's batched routines take arrays of pointers."""
    count, step = x.shape[0], x.strides[0]
    start = x.data.ptr
    return xp.arange(start, start + step * count, step, dtype=np.uintp)


# -- permutations ------------------------------------------------------------------------------

_PERMUTATION_SOURCE = r"""
extern "C" __global__ void functx_lu_permutation(
        const int* piv, int* piv0, int* perm, const int k, const int m, const int base,
        const int in_shared) {
    // One block per matrix: pivots (k of them, `base`-based) -> 0-based pivots and the
    // permutation of m rows they make (row r swapped with row piv[r], r = 0, 1, ...). The
    // swaps are sequential: one thread applies them, in shared memory where it fits.
    extern __shared__ int s[];
    const long long b = blockIdx.x;
    const int* p = piv + b * k;
    int* p0 = piv0 + b * k;
    int* q = perm + b * m;
    int* sq = in_shared ? s : q;
    int* sp = in_shared ? s + m : p0;
    for (int r = threadIdx.x; r < k; r += blockDim.x) {
        const int j = p[r] - base;
        p0[r] = j;
        if (in_shared) sp[r] = j;
    }
    for (int r = threadIdx.x; r < m; r += blockDim.x) sq[r] = r;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int r = 0; r < k; ++r) {
            const int j = sp[r];
            if (j != r && j >= 0 && j < m) {  // (a pivot out of range is not applied)
                const int t = sq[r];
                sq[r] = sq[j];
                sq[j] = t;
            }
        }
    }
    __syncthreads();
    if (in_shared) {
        for (int r = threadIdx.x; r < m; r += blockDim.x) q[r] = s[r];
    }
}
"""

# shared memory a block of the permutation kernel may use (the default limit is 48 KiB)
_SHARED_BYTES = 48 << 10


def permutation(xp: Any, pivots: Any, m: int, *, base: int = 0) -> tuple[Any, Any]:
    """0-based pivots and the permutation of ``m`` rows made by LAPACK-style row swaps.

    Args:
        xp: cupy.
        pivots: int32 ``(..., k)`` on the device, ``base``-based (1 for cuBLAS's, 0 for
            cupyx's): row ``i`` was swapped with row ``pivots[..., i]``, in order.
        m: the number of rows.
        base: what the first row is called in ``pivots``.

    Returns:
        ``(pivots0, perm)``: int32 ``(..., k)`` 0-based pivots (a new array) and int32
        ``(..., m)`` rows with ``a[..., perm, :] = L @ U``.

    Example:
        >>> permutation(cupy, cupy.asarray([[2, 2, 3]], np.int32), 3, base=1)
        ... # ([[1, 1, 2]], [[1, 0, 2]])
    """
    batch, k = tuple(pivots.shape[:-1]), pivots.shape[-1]
    count = math.prod(batch)
    piv = xp.ascontiguousarray(pivots, dtype=np.int32)
    piv0 = xp.empty(batch + (k,), np.int32)
    perm = xp.empty(batch + (m,), np.int32)
    if count == 0 or m == 0:
        return piv0, perm
    shared = (m + k) * 4 <= _SHARED_BYTES
    threads = min(256, max(32, -(-m // 32) * 32))
    # (no type T in the source: compiled once, under float32's entry of the cache)
    fn = raw_function(xp, _PERMUTATION_SOURCE, "functx_lu_permutation", np.float32)
    fn((count,), (threads,), (piv, piv0, perm, np.int32(k), np.int32(m), np.int32(base),
                              np.int32(shared)),
       shared_mem=(m + k) * 4 if shared else 0)
    return piv0, perm


def _permute_rows(xp: Any, x: Any, perm: Any, *, inverse: bool) -> Any:
    """``x[i, perm[i], :]`` (or, with ``inverse``, ``y`` with ``y[i, perm[i], :] = x[i]``)
    for C-contiguous ``x`` ``(count, n, k)`` and ``perm`` ``(count, n)``: one kernel, into a
    new C-contiguous array."""
    count, n, k = x.shape
    out = xp.empty(x.shape, x.dtype)
    if inverse:
        kernel = elementwise_kernel(
            xp, "functx_scatter_rows", "raw T x, raw I perm, int64 n, int64 k", "raw T out",
            "const long long c = i % k, r = (i / k) % n, m = i / (k * n);"
            "out[(m * n + (long long)perm[m * n + r]) * k + c] = x[i];")
        kernel(x, perm, n, k, out, size=x.size)
    else:
        kernel = elementwise_kernel(
            xp, "functx_gather_rows", "raw T x, raw I perm, int64 n, int64 k", "T out",
            "const long long c = i % k, r = (i / k) % n, m = i / (k * n);"
            "out = x[(m * n + (long long)perm[m * n + r]) * k + c];")
        kernel(x, perm, n, k, out)
    return out


# -- the batched routines ----------------------------------------------------------------------

def lu(xp: Any, a: Any) -> tuple[Any, Any, Any]:
    """``(lu, pivots, permutation)`` of a stack ``(..., n, n)`` (:func:`use_batched`) by
    one ``getrfBatched``: packed factors (C-ordered), 0-based int32 pivots ``(..., n)`` and
    the int32 permutation ``(..., n)``."""
    batch, n = tuple(a.shape[:-2]), a.shape[-1]
    count = math.prod(batch)
    f = xp.swapaxes(a.reshape((count, n, n)), -1, -2).copy()  # C order of a^T: a to cuBLAS
    piv = xp.empty((count, n), np.int32)
    info = xp.empty((count,), np.int32)
    getrf = getattr(_cublas(), _PREFIX[a.dtype.char] + "getrfBatched")
    ptrs = _pointers(xp, f)
    getrf(xp.cuda.device.get_cublas_handle(), n, ptrs.data.ptr, n, piv.data.ptr,
          info.data.ptr, count)
    # cuBLAS stops eliminating at a zero pivot (info > 0): its factors of a singular matrix
    # need not reconstruct it, where LAPACK's (and cuSOLVER's) do. Those matrices (and any
    # with a non-finite entry) are factored again one by one (one host read of the flags).
    bad = xp.flatnonzero((info != 0) | ~xp.isfinite(f).all(axis=(1, 2))).get()
    if bad.size:
        from cupyx.scipy import linalg as cl  # lazily: CuPy is imported when CUDA is used

        flat = a.reshape((count, n, n))
        for i in bad.tolist():
            fi, pi = cl.lu_factor(flat[i], check_finite=False)
            f[i] = fi.T
            piv[i] = pi + 1
    lu_ = xp.ascontiguousarray(xp.swapaxes(f, -1, -2)).reshape(a.shape)
    piv0, perm = permutation(xp, piv.reshape(batch + (n,)), n, base=1)
    return lu_, piv0, perm


def _trsm(xp: Any, a: Any, x: Any, a_ptrs: Any, x_ptrs: Any, *, left_side: bool, lower: bool,
          transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> None:
    """``op(a) x = x`` (``left_side``) or ``x op(a) = x`` in place on C-contiguous stacks
    ``a`` ``(count, n, n)`` and ``x`` by one ``trsmBatched`` (``a_ptrs``/``x_ptrs``: their
    pointer arrays; with a conjugate-only ``op``, ``a`` must already be conjugated and
    ``conjugate_a`` false: see the module's docstring)."""
    count, n = a.shape[0], a.shape[-1]
    rows, cols = x.shape[-1], x.shape[-2]  # x's C storage is x^T to cuBLAS: rows x cols
    cb = _cublas()
    op = (cb.CUBLAS_OP_C if conjugate_a else cb.CUBLAS_OP_T) if transpose_a else cb.CUBLAS_OP_N
    one = np.ones((), a.dtype)  # alpha, read from the host during the call
    trsm = getattr(cb, _PREFIX[a.dtype.char] + "trsmBatched")
    trsm(xp.cuda.device.get_cublas_handle(),
         cb.CUBLAS_SIDE_RIGHT if left_side else cb.CUBLAS_SIDE_LEFT,
         cb.CUBLAS_FILL_MODE_UPPER if lower else cb.CUBLAS_FILL_MODE_LOWER, op,
         cb.CUBLAS_DIAG_UNIT if unit_diagonal else cb.CUBLAS_DIAG_NON_UNIT, rows, cols,
         one.ctypes.data, a_ptrs.data.ptr, n, x_ptrs.data.ptr, rows, count)


def _fresh_copy(xp: Any, x: Any, like: Any) -> Any:
    """``x`` C-contiguous, in memory of its own (not ``like``'s: it is solved in place)."""
    out = xp.ascontiguousarray(x)
    return out.copy() if out.data.ptr == like.data.ptr else out


def triangular_solve(xp: Any, a: Any, b: Any, *, left_side: bool, lower: bool,
                     transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> Any:
    """``op(a) x = b`` or ``x op(a) = b`` for a stack ``a`` (:func:`use_batched`) by one
    ``trsmBatched``; ``b`` ``(..., n, k)`` or ``(..., k, n)`` of ``a``'s dtype."""
    count, n = math.prod(a.shape[:-2]), a.shape[-1]
    conj = conjugate_a and a.dtype.kind == "c"
    fa = xp.ascontiguousarray(a.reshape((count, n, n)))
    if conj and not transpose_a:  # op(a)^T = a^H = conj(A): no such cuBLAS op
        fa, conj = xp.conj(fa), False
    x = _fresh_copy(xp, b.reshape((count,) + tuple(b.shape[-2:])), b)
    _trsm(xp, fa, x, _pointers(xp, fa), _pointers(xp, x), left_side=left_side, lower=lower,
          transpose_a=transpose_a, conjugate_a=conj, unit_diagonal=unit_diagonal)
    return x.reshape(b.shape)


def lu_solve(xp: Any, lu_: Any, perm: Any, b: Any, *, trans: int) -> Any:
    """``a x = b`` (``trans`` 0), ``a^T x = b`` (1) or ``a^H x = b`` (2) from the packed
    factors of a stack (:func:`use_batched`): a row gather or scatter and two batched
    triangular solves."""
    count, n, k = math.prod(lu_.shape[:-2]), lu_.shape[-1], b.shape[-1]
    fl = xp.ascontiguousarray(lu_.reshape((count, n, n)))
    fp = xp.ascontiguousarray(perm.reshape((count, n)))
    fb = b.reshape((count, n, k))
    conj = trans == 2 and lu_.dtype.kind == "c"
    if trans == 0:
        y = _permute_rows(xp, xp.ascontiguousarray(fb), fp, inverse=False)
        lp, yp = _pointers(xp, fl), _pointers(xp, y)
        _trsm(xp, fl, y, lp, yp, left_side=True, lower=True, transpose_a=False,
              conjugate_a=False, unit_diagonal=True)
        _trsm(xp, fl, y, lp, yp, left_side=True, lower=False, transpose_a=False,
              conjugate_a=False, unit_diagonal=False)
        return y.reshape(b.shape)
    y = _fresh_copy(xp, fb, b)
    lp, yp = _pointers(xp, fl), _pointers(xp, y)
    _trsm(xp, fl, y, lp, yp, left_side=True, lower=False, transpose_a=True, conjugate_a=conj,
          unit_diagonal=False)
    _trsm(xp, fl, y, lp, yp, left_side=True, lower=True, transpose_a=True, conjugate_a=conj,
          unit_diagonal=True)
    return _permute_rows(xp, y, fp, inverse=True).reshape(b.shape)
