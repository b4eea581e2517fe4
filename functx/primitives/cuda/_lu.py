"""The LU family and triangular solves on CUDA, with no host reads, so that a ``jit`` step
holding them can be captured as a CUDA graph (functx/compiler/cuda_graph.py): the ``lu``,
``lu_solve``, ``lu_inverse`` and ``triangular_solve`` rules of
functx/primitives/cuda/decompositions.py.

cuBLAS and cuSOLVER are called directly (functx/primitives/cuda/_raw.py: CuPy's wrappers
refuse stream capture). Layout: they read column-major ("Fortran") matrices, so the
C-ordered storage of a matrix ``a`` is ``a^T`` to them.

* ``lu`` of square real matrices of at most :data:`SMALL_N` rows (one or a stack): one
  kernel, one block per matrix (:data:`_LU_SOURCE`), LAPACK's unblocked algorithm
  (``getf2``) on the C-ordered matrix, in shared memory where it fits: the pivot is the
  first row of largest ``|a|`` (``idamax``'s rule); a column with no nonzero candidate is
  skipped, neither scaled nor eliminated (LAPACK's ``info > 0``, a singular matrix); the
  column is multiplied by the pivot's reciprocal where ``|pivot|`` is at least the smallest
  normal number and divided by it otherwise (LAPACK's ``sfmin`` test). The permutation is
  built in the same kernel. The factors equal LAPACK's up to the rounding of the order of
  the updates. (cuBLAS's ``getrfBatched``, the previous path, stops eliminating at a zero
  pivot, so singular matrices had to be found by a host read and factored again.)
* ``lu`` of other matrices (complex, bigger, rectangular): cuSOLVER's ``getrf`` on a
  column-major copy of each matrix (a loop of calls; LAPACK's pivot rule, also for complex
  numbers, ``|re| + |im|``), then :func:`permutation` (one kernel for the whole stack).
* ``triangular_solve``: ``op(a) x = b`` is ``x^T op(a)^T = b^T``. The C-ordered storage of
  ``b`` (and of the result ``x``, solved in place in a C-ordered copy of ``b``) is ``b^T``
  (``x^T``) to cuBLAS, and that of ``a`` is ``A = a^T``; so a left solve is cuBLAS's right
  solve with ``op(a)^T`` written over ``A``: ``a^T = A`` (``N``), ``a = A^T`` (``T``),
  ``conj(a) = A^H`` (``C``), and for a conjugate without transpose ``a^H = conj(A)``:
  ``N`` on a conjugated copy of ``a``. The triangle flips (the lower triangle of ``a`` is
  the upper one of ``A``). A right solve ``x op(a) = b`` is likewise cuBLAS's left solve.
  A stack of small matrices (at most :data:`BATCHED_MAX_N` rows) takes one
  ``trsmBatched``; one matrix or bigger ones one ``trsm`` each, but for a real one with
  one right-hand side (``trsv``: cuBLAS's ``trsm`` takes 1 ms for one vector of 2000) and
  for a big real one in a step captured as a CUDA graph: by blocks of :data:`BLOCK` rows,
  one kernel inverting the diagonal blocks (:data:`_TRI_INVERSE_SOURCE`) and GEMMs for the
  rest (0.88 ms for cuBLAS's ``trsm`` of 2000 x 2000 in float64 on an H100, 0.31 ms for a
  GEMM of that size). A zero on the diagonal gives infinities or NaNs, as ``trsm`` does.
* ``lu_solve`` (and ``lu_inverse``, ``lu_solve`` with the identity): the rows of ``b``
  gathered by the permutation (one kernel, into a new C-ordered array), then two triangular
  solves in place (``trans = 0``); or the two solves with ``U^T``/``L^T`` (``U^H``/``L^H``)
  on a copy of ``b``, then the rows scattered (``trans = 1, 2``).
* :func:`permutation`: the permutation of LAPACK-style row swaps (1- or 0-based), one block
  per matrix applying its swaps in shared memory.

Nothing here imports CuPy at import time; ``xp`` is cupy.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from functx.backends._cuda import CAPTURING
from functx.primitives.cuda import _raw
from functx.primitives.cuda._kernels import elementwise_kernel, raw_function
from functx.primitives.cuda.linalg import gemm_strided_batched

# The largest matrices factored by the one-block kernel, and solved by cuBLAS's batched
# triangular solve in a stack (bigger ones: a cuSOLVER or cuBLAS call per matrix). JAX's GPU
# lowering uses cuBLAS's batched routines up to about this size too.
SMALL_N = BATCHED_MAX_N = 128

# The diagonal blocks of a blocked triangular solve (real matrices of at least 4 times
# this many rows, in a step captured as a CUDA graph): their inverses by one kernel, GEMMs
# for the rest. At most 128 (the
# kernel holds 4 rows per lane, and a block in shared memory).
BLOCK = 128

# shared memory a block may use without opting in (the default limit is 48 KiB)
_SHARED_BYTES = 48 << 10


def pointers(xp: Any, x: Any) -> Any:
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


def permutation(xp: Any, pivots: Any, m: int, *, base: int = 0) -> tuple[Any, Any]:
    """0-based pivots and the permutation of ``m`` rows made by LAPACK-style row swaps.

    Args:
        xp: cupy.
        pivots: int32 ``(..., k)`` on the device, ``base``-based (1 for cuSOLVER's, 0 for
            functx's): row ``i`` was swapped with row ``pivots[..., i]``, in order.
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


# -- LU ----------------------------------------------------------------------------------------

_LU_SOURCE = r"""
typedef CTYPE T;
extern "C" __global__ void functx_lu_small(
        const T* a, T* lu, int* piv, int* perm, const int n, const int in_shared,
        const double sfmin) {
    // One block per matrix: LAPACK's getf2 on the C-ordered n x n matrix a[b], into lu[b]
    // (see functx/primitives/cuda/_lu.py). In shared memory when it fits, rows padded to
    // n + 1 (a column's elements in different banks).
    extern __shared__ unsigned char functx_lu_shared[];
    __shared__ int pivot_row, pivot_zero;
    const long long b = blockIdx.x;
    const T* src = a + b * n * n;
    T* dst = lu + b * n * n;
    const int ld = in_shared ? n + 1 : n;
    T* m = in_shared ? reinterpret_cast<T*>(functx_lu_shared) : dst;
    int* p = piv + b * n;
    int* q = perm + b * n;
    const int t = threadIdx.x, nt = blockDim.x;
    for (int e = t; e < n * n; e += nt) m[(e / n) * ld + e % n] = src[e];
    for (int r = t; r < n; r += nt) q[r] = r;
    __syncthreads();
    for (int k = 0; k < n; ++k) {
        if (t < 32) {  // the pivot: the first row of largest |a[i, k]|, i >= k
            double best = -1.0;
            int at = k;
            for (int i = k + t; i < n; i += 32) {
                const double v = fabs((double)m[i * ld + k]);
                if (v > best) { best = v; at = i; }
            }
            for (int off = 16; off > 0; off >>= 1) {
                const double ob = __shfl_down_sync(0xffffffffu, best, off);
                const int oa = __shfl_down_sync(0xffffffffu, at, off);
                if (ob > best || (ob == best && oa < at)) { best = ob; at = oa; }
            }
            if (t == 0) {
                p[k] = at;
                pivot_row = at;
                pivot_zero = best == 0.0;  // (all NaN: best stays -1, row k, not zero)
                if (at != k) { const int s = q[k]; q[k] = q[at]; q[at] = s; }
            }
        }
        __syncthreads();
        const int r = pivot_row;
        if (r != k) {
            for (int j = t; j < n; j += nt) {
                const T s = m[k * ld + j];
                m[k * ld + j] = m[r * ld + j];
                m[r * ld + j] = s;
            }
            __syncthreads();
        }
        if (!pivot_zero) {
            const T d = m[k * ld + k];
            const bool reciprocal = fabs((double)d) >= sfmin;
            const T inv = (T)1 / d;
            for (int i = k + 1 + t; i < n; i += nt)
                m[i * ld + k] = reciprocal ? m[i * ld + k] * inv : m[i * ld + k] / d;
            __syncthreads();
            const int w = n - k - 1;
            for (int e = t; e < w * w; e += nt) {
                const int i = k + 1 + e / w, j = k + 1 + e % w;
                m[i * ld + j] -= m[i * ld + k] * m[k * ld + j];
            }
        }
        __syncthreads();
    }
    if (in_shared) {
        for (int e = t; e < n * n; e += nt) dst[e] = m[(e / n) * ld + e % n];
    }
}
"""


def _lu_small(xp: Any, a: Any) -> tuple[Any, Any, Any]:
    """``lu`` of real square matrices of at most :data:`SMALL_N` rows: one block each."""
    batch, n = tuple(a.shape[:-2]), a.shape[-1]
    count = math.prod(batch)
    src = xp.ascontiguousarray(a)
    out = xp.empty(a.shape, a.dtype)
    piv = xp.empty(batch + (n,), np.int32)
    perm = xp.empty(batch + (n,), np.int32)
    shared = (n + 1) * n * a.itemsize
    in_shared = shared <= _SHARED_BYTES
    threads = 32 if n <= 16 else (128 if n <= 48 else 256)
    fn = raw_function(xp, _LU_SOURCE, "functx_lu_small", a.dtype)
    fn((count,), (threads,), (src, out, piv, perm, np.int32(n), np.int32(in_shared),
                              np.float64(np.finfo(a.dtype).tiny)),
       shared_mem=shared if in_shared else 0)
    return out, piv, perm


def lu(xp: Any, a: Any) -> tuple[Any, Any, Any]:
    """``(lu, pivots, permutation)`` of ``a`` ``(..., m, n)``: packed factors (C-ordered),
    0-based int32 pivots ``(..., min(m, n))`` and the int32 permutation ``(..., m)``."""
    *batch, m, n = a.shape
    batch = tuple(batch)
    if m == n and n <= SMALL_N and a.dtype.kind == "f":
        return _lu_small(xp, a)
    k, count = min(m, n), math.prod(batch)
    f = xp.swapaxes(a.reshape((count, m, n)), -1, -2).copy()  # column-major a to cuSOLVER
    piv = xp.empty((count, k), np.int32)
    info = xp.empty((count,), np.int32)  # (a singular matrix is factored all the same)
    t = _raw.PREFIX[a.dtype.char]
    work = xp.empty((max(_raw.workspace_size(xp, t, "getrf", m, n, f.data.ptr, m), 1),),
                    a.dtype)
    getrf = _raw.cusolver(xp, t, "getrf")
    for i in range(count):
        getrf(m, n, f.data.ptr + i * f.strides[0], m, work.data.ptr,
              piv.data.ptr + i * k * 4, info.data.ptr + i * 4)
    lu_ = xp.ascontiguousarray(xp.swapaxes(f, -1, -2)).reshape(a.shape)
    piv0, perm = permutation(xp, piv.reshape(batch + (k,)), m, base=1)
    return lu_, piv0, perm


# -- triangular solves -------------------------------------------------------------------------

_TRI_INVERSE_SOURCE = r"""
typedef CTYPE T;
extern "C" __global__ void functx_tri_inverse_blocks(
        const T* a, T* inv, const int n, const int bs, const int lower_op,
        const int transpose, const int unit) {
    // The inverse of op(a)'s diagonal block blockIdx.x (bs <= 128 rows; the last one may
    // be smaller, s rows) into inv[blockIdx.x] (bs x bs, C order; zeros outside the
    // triangle and outside s x s). The block is staged in shared memory (rows padded to
    // bs + 1); an upper op(a) is taken in reversed order (rows and columns s-1, ..., 0),
    // where it is lower. One warp per column j of the inverse at a time (the columns split
    // between gridDim.y blocks): column-oriented forward substitution, lane l holding rows
    // l, l + 32, l + 64, l + 96 in registers; each step broadcasts x_k from its lane and
    // updates the rows below it.
    extern __shared__ unsigned char functx_inv_shared[];
    T* blk = reinterpret_cast<T*>(functx_inv_shared);
    const int ld = bs + 1;
    T* rdiag = blk + bs * ld;
    const long long j0 = (long long)blockIdx.x * bs;
    const int s = (int)min((long long)bs, (long long)n - j0);
#define FUNCTX_ROW(i) (lower_op ? (i) : s - 1 - (i))
    for (int e = threadIdx.x; e < s * s; e += blockDim.x) {
        const int i = e / s, k = e % s;
        const int r = FUNCTX_ROW(i), c = FUNCTX_ROW(k);
        blk[i * ld + k] = k > i ? (T)0 : (transpose ? a[(j0 + c) * n + j0 + r]
                                                    : a[(j0 + r) * n + j0 + c]);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < s; i += blockDim.x)
        rdiag[i] = unit ? (T)1 : (T)1 / blk[i * ld + i];
    __syncthreads();
#undef FUNCTX_ROW
    const int warps = blockDim.x / 32, w = threadIdx.x / 32, lane = threadIdx.x % 32;
    T* out = inv + (long long)blockIdx.x * bs * bs;
    for (int j = blockIdx.y * warps + w; j < bs; j += gridDim.y * warps) {
        T xr[4];
#pragma unroll
        for (int t = 0; t < 4; ++t) xr[t] = (lane + 32 * t == j) ? (T)1 : (T)0;
        for (int k = j; k < s; ++k) {
            const int q = k >> 5;
            T v = xr[0];
#pragma unroll
            for (int t = 1; t < 4; ++t) if (q == t) v = xr[t];
            const T xk = __shfl_sync(0xffffffffu, v, k & 31) * rdiag[k];
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                const int i = lane + 32 * t;
                if (i == k) xr[t] = xk;
                else if (i > k && i < s) xr[t] -= blk[i * ld + k] * xk;
            }
        }
#pragma unroll
        for (int t = 0; t < 4; ++t) {  // column j: every (row, column) written once
            const int i = lane + 32 * t;
            if (i < bs) {
                const T v = (j < s && i < s) ? xr[t] : (T)0;
                const int r = (i < s) ? (lower_op ? i : s - 1 - i) : i;
                const int c = (j < s) ? (lower_op ? j : s - 1 - j) : j;
                out[(long long)r * bs + c] = v;
            }
        }
    }
}
"""

# The functions whose dynamic shared memory limit was raised (per device)
_SHARED_RAISED: set = set()


def _diagonal_block_inverses(xp: Any, a: Any, *, lower_op: bool, transpose_a: bool,
                             unit_diagonal: bool) -> Any:
    """``(count, BLOCK, BLOCK)``: the inverses of ``op(a)``'s diagonal blocks of
    :data:`BLOCK` rows (``a`` one C-contiguous ``(n, n)`` matrix; the last block's inverse
    fills the top left of its slot, zeros around), by one kernel."""
    n = a.shape[-1]
    count = -(-n // BLOCK)
    out = xp.empty((count, BLOCK, BLOCK), a.dtype)
    shared = (BLOCK * (BLOCK + 1) + BLOCK) * a.itemsize  # (130 KiB in float64)
    fn = raw_function(xp, _TRI_INVERSE_SOURCE, "functx_tri_inverse_blocks", a.dtype)
    key = (id(fn), xp.cuda.Device().id)
    if key not in _SHARED_RAISED:  # above the default 48 KiB: opt in, once per kernel
        if hasattr(fn, "max_dynamic_shared_size_bytes"):  # (a RawKernel)
            fn.max_dynamic_shared_size_bytes = shared
        else:  # (a Function)
            driver = xp.cuda.driver
            driver.funcSetAttribute(
                fn.ptr, getattr(driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8),
                shared)
        _SHARED_RAISED.add(key)
    fn((count, 4), (512,), (a, out, np.int32(n), np.int32(BLOCK), np.int32(lower_op),
                            np.int32(transpose_a), np.int32(unit_diagonal)),
       shared_mem=shared)
    return out


class _Trsm:
    """Triangular solves in place on C-contiguous stacks ``a`` ``(count, n, n)`` and ``x``
    (``trsmBatched`` for a stack of small matrices; else per matrix ``trsv`` for one real
    vector, blocks and GEMMs for a big real matrix in a captured step, ``trsm`` otherwise:
    see the module docstring); the pointer arrays of the batched call are made once for
    several solves."""

    def __init__(self, xp: Any, a: Any, x: Any) -> None:
        self.xp, self.a, self.x = xp, a, x
        count, n = a.shape[0], a.shape[-1]
        self.batched = count > 1 and n <= BATCHED_MAX_N
        self.ptrs = (pointers(xp, a), pointers(xp, x)) if self.batched else None

    def __call__(self, *, left_side: bool, lower: bool, transpose_a: bool,
                 conjugate_a: bool, unit_diagonal: bool) -> None:
        """``op(a) x = x`` (``left_side``) or ``x op(a) = x``; with a conjugate-only ``op``,
        ``a`` must already be conjugated and ``conjugate_a`` false (see the module's
        docstring)."""
        xp, a, x = self.xp, self.a, self.x
        count, n = a.shape[0], a.shape[-1]
        rows, cols = x.shape[-1], x.shape[-2]  # x's C storage is x^T to cuBLAS: rows x cols
        op = (_raw.OP_C if conjugate_a else _raw.OP_T) if transpose_a else _raw.OP_N
        args = (_raw.SIDE_RIGHT if left_side else _raw.SIDE_LEFT,
                _raw.FILL_UPPER if lower else _raw.FILL_LOWER, op,
                _raw.DIAG_UNIT if unit_diagonal else _raw.DIAG_NON_UNIT, rows, cols,
                _raw.host_scalar(a.dtype, 1)[1])
        t = _raw.PREFIX[a.dtype.char]
        if self.batched:
            _raw.cublas(xp, t, "trsmBatched")(*args, self.ptrs[0].data.ptr, n,
                                              self.ptrs[1].data.ptr, rows, count)
            return
        vector = (rows if left_side else cols) == 1
        # one vector: trsv. Big matrices in a captured step: mostly GEMMs (eagerly, their
        # dozens of calls cost more host time than cuBLAS's trsm loses on the device)
        if a.dtype.kind == "f" and (vector or (CAPTURING[0] and n >= 4 * BLOCK)):
            for i in range(count):
                (self._vector if vector else self._blocked)(
                    i, left_side=left_side, lower=lower, transpose_a=transpose_a,
                    unit_diagonal=unit_diagonal)
            return
        trsm = _raw.cublas(xp, t, "trsm_v2")
        for i in range(count):
            trsm(*args, a.data.ptr + i * a.strides[0], n, x.data.ptr + i * x.strides[0],
                 rows)

    def _vector(self, i: int, *, left_side: bool, lower: bool, transpose_a: bool,
                unit_diagonal: bool) -> None:
        """Matrix ``i``'s solve with one right-hand side (real): cuBLAS's ``trsv`` (its
        ``trsm`` runs a one-row solve as a matrix one). The vector's storage is the same
        either way; a right solve ``x op(a) = b`` is ``op(a)^T x^T = b^T``; ``op(a) x = b``
        is ``op(A)^T x = b`` for cuBLAS's ``A = a^T``."""
        xp, a, x = self.xp, self.a, self.x
        n = a.shape[-1]
        transposed = transpose_a if left_side else not transpose_a
        _raw.cublas(xp, _raw.PREFIX[a.dtype.char], "trsv_v2")(
            _raw.FILL_UPPER if lower else _raw.FILL_LOWER,
            _raw.OP_N if transposed else _raw.OP_T,
            _raw.DIAG_UNIT if unit_diagonal else _raw.DIAG_NON_UNIT, n,
            a.data.ptr + i * a.strides[0], n, x.data.ptr + i * x.strides[0], 1)

    def _blocked(self, i: int, *, left_side: bool, lower: bool, transpose_a: bool,
                 unit_diagonal: bool) -> None:
        """Matrix ``i``'s solve by blocks of :data:`BLOCK` rows, all GEMMs but for the
        inverses of the diagonal blocks, one kernel for them all (cuBLAS's ``trsm`` runs
        far below its GEMM rate: 0.88 ms for 2000 x 2000 in float64 on an H100, against
        0.31 ms for the GEMM of that size): ``x_j = inv(op(a)_jj) x_j``, then ``x_r -=
        op(a)_rj x_j`` for the rows ``r`` still to solve. A right solve ``x op(a) = b`` is
        the left solve ``op(a)^T x^T = b^T`` on a transposed copy."""
        xp, a = self.xp, self.a[i]
        x = self.x[i] if left_side else xp.ascontiguousarray(xp.swapaxes(self.x[i], -1, -2))
        transpose_a = transpose_a if left_side else not transpose_a
        n, k = x.shape
        # op(a) is lower triangular where a's lower triangle is read and not transposed
        lower_op = lower != transpose_a
        inverses = _diagonal_block_inverses(xp, a, lower_op=lower_op, transpose_a=transpose_a,
                                            unit_diagonal=unit_diagonal)
        solved = xp.empty_like(x)
        starts = list(range(0, n, BLOCK))
        for j0 in (starts if lower_op else starts[::-1]):
            j1 = min(j0 + BLOCK, n)
            inv = inverses[j0 // BLOCK, :j1 - j0, :j1 - j0]  # op(a)_jj^-1
            gemm_strided_batched(xp, inv[None], x[None, j0:j1], out=solved[None, j0:j1])
            r0, r1 = (j1, n) if lower_op else (0, j0)  # the rows still to solve
            if r1 > r0:
                m = a[j0:j1, r0:r1].T if transpose_a else a[r0:r1, j0:j1]  # op(a)[r, j]
                gemm_strided_batched(xp, m[None], solved[None, j0:j1], out=x[None, r0:r1],
                                     alpha=-1.0, beta=1.0)
        self.x[i][...] = solved if left_side else xp.swapaxes(solved, -1, -2)


def _fresh_copy(xp: Any, x: Any, like: Any) -> Any:
    """``x`` C-contiguous, in memory of its own (not ``like``'s: it is solved in place)."""
    out = xp.ascontiguousarray(x)
    return out.copy() if out.data.ptr == like.data.ptr else out


def triangular_solve(xp: Any, a: Any, b: Any, *, left_side: bool, lower: bool,
                     transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> Any:
    """``op(a) x = b`` or ``x op(a) = b`` for ``a`` ``(..., n, n)`` and ``b`` ``(..., n, k)``
    or ``(..., k, n)`` of ``a``'s dtype and batch shape."""
    count, n = math.prod(a.shape[:-2]), a.shape[-1]
    conj = conjugate_a and a.dtype.kind == "c"
    fa = xp.ascontiguousarray(a.reshape((count, n, n)))
    if conj and not transpose_a:  # op(a)^T = a^H = conj(A): no such cuBLAS op
        fa, conj = xp.conj(fa), False
    x = _fresh_copy(xp, b.reshape((count,) + tuple(b.shape[-2:])), b)
    _Trsm(xp, fa, x)(left_side=left_side, lower=lower, transpose_a=transpose_a,
                     conjugate_a=conj, unit_diagonal=unit_diagonal)
    return x.reshape(b.shape)


def lu_solve(xp: Any, lu_: Any, perm: Any, b: Any, *, trans: int) -> Any:
    """``a x = b`` (``trans`` 0), ``a^T x = b`` (1) or ``a^H x = b`` (2) from the packed
    factors of ``a`` (``(..., n, n)``, C-ordered) and its permutation: a row gather or
    scatter and two triangular solves."""
    count, n, k = math.prod(lu_.shape[:-2]), lu_.shape[-1], b.shape[-1]
    fl = xp.ascontiguousarray(lu_.reshape((count, n, n)))
    fp = xp.ascontiguousarray(perm.reshape((count, n)))
    fb = b.reshape((count, n, k))
    conj = trans == 2 and lu_.dtype.kind == "c"
    if trans == 0:
        y = _permute_rows(xp, xp.ascontiguousarray(fb), fp, inverse=False)
        solve = _Trsm(xp, fl, y)
        solve(left_side=True, lower=True, transpose_a=False, conjugate_a=False,
              unit_diagonal=True)
        solve(left_side=True, lower=False, transpose_a=False, conjugate_a=False,
              unit_diagonal=False)
        return y.reshape(b.shape)
    y = _fresh_copy(xp, fb, b)
    solve = _Trsm(xp, fl, y)
    solve(left_side=True, lower=False, transpose_a=True, conjugate_a=conj,
          unit_diagonal=False)
    solve(left_side=True, lower=True, transpose_a=True, conjugate_a=conj, unit_diagonal=True)
    return _permute_rows(xp, y, fp, inverse=True).reshape(b.shape)
