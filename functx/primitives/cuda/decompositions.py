"""CUDA implementations of the matrix decompositions (functx/primitives/decompositions.py and
functx/primitives/eigen.py): cuSOLVER and cuBLAS.

* ``cholesky``, ``triangular_solve``, ``lu``, ``lu_solve`` and so ``lu_inverse``
  (``lu_solve`` with the identity): cuSOLVER's ``potrf``/``potrfBatched`` and ``getrf``,
  cuBLAS's ``trsm``/``trsmBatched`` called directly, and functx's own kernels (LU of small
  matrices, permutations, row gathers; functx/primitives/cuda/_lu.py): nothing reads the
  device from the host, so a ``jit`` step holding them is captured as one CUDA graph
  (functx/compiler/cuda_graph.py), and eagerly the host never waits. A Cholesky
  factorisation that fails (a matrix that is not positive definite: cuSOLVER's ``info``,
  or a diagonal that is not finite and positive) gives NaN for the whole factor, as JAX
  does on every device.
* ``eigh``, ``svd``, ``qr``: ``cupy.linalg``'s routines, which take stacks of matrices
  (cuSOLVER's batched syevj, gesvdj; QR per matrix inside CuPy); a step holding them runs
  eagerly under ``jit`` (CuPy's wrappers refuse stream capture).
* ``expm``: cupyx.scipy.linalg.expm per matrix, a loop on the device.
* ``eig`` and ``schur``: cuSOLVER has no general (non-Hermitian) eigensolver or Schur
  factorisation that CuPy exposes for all dtypes; as in JAX they are CPU-only and refuse
  CUDA operands with a FunctxError naming ``functx.device_put`` to move them.

Every function is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy. This module
imports no functx primitive module and no CuPy at import time.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from functx.errors import FunctxError
from functx.primitives.cuda import _lu, _raw


def _flat(a: Any) -> Any:
    return a.reshape((-1,) + tuple(a.shape[-2:]))


def cholesky(xp: Any, a: Any) -> Any:
    """Lower Cholesky factors (NaN for a matrix that is not positive definite): cuSOLVER's
    ``potrf`` (one matrix) or ``potrfBatched`` (a stack) called directly (no host read of
    its ``info``; capturable)."""
    if a.size == 0:
        return xp.zeros(a.shape, a.dtype)
    *batch, n = a.shape[:-1]
    count = math.prod(batch)
    # Column-major, the C-ordered copy is a^T = conj(a): its upper factor U (U^H U =
    # conj(a)), read back in C order, is U^T, a's lower factor. (As cupy.linalg.cholesky:
    # cuSOLVER reads the triangle that is the lower one of the C-ordered a.)
    f = xp.array(a.reshape((count, n, n)), order="C", copy=True)
    info = xp.zeros((count,), np.int32)
    t = _raw.PREFIX[a.dtype.char]
    if count == 1:
        work = xp.empty((max(_raw.workspace_size(xp, t, "potrf", _raw.FILL_UPPER, n,
                                                 f.data.ptr, n), 1),), a.dtype)
        _raw.cusolver(xp, t, "potrf")(_raw.FILL_UPPER, n, f.data.ptr, n, work.data.ptr,
                                      work.size, info.data.ptr)
    else:
        ptrs = _lu.pointers(xp, f)
        _raw.cusolver(xp, t, "potrfBatched")(_raw.FILL_UPPER, n, ptrs.data.ptr, n,
                                             info.data.ptr, count)
    L = xp.tril(f)
    d = xp.diagonal(L, axis1=-2, axis2=-1)
    ok = (info == 0) & xp.all(xp.isfinite(d) & (d.real > 0), axis=-1)
    return xp.where(ok[:, None, None], L, xp.asarray(np.nan, dtype=a.dtype)).reshape(a.shape)


def triangular_solve(xp: Any, a: Any, b: Any, *, left_side: bool, lower: bool,
                     transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> Any:
    """``op(a) x = b`` or ``x op(a) = b``: cuBLAS's ``trsmBatched`` for a stack of small
    matrices, else ``trsm`` per matrix (functx/primitives/cuda/_lu.py)."""
    if b.size == 0:
        return xp.zeros(b.shape, b.dtype)
    return _lu.triangular_solve(xp, a, b, left_side=left_side, lower=lower,
                                transpose_a=transpose_a, conjugate_a=conjugate_a,
                                unit_diagonal=unit_diagonal)


def lu(xp: Any, a: Any) -> tuple:
    """``(lu, pivots, permutation)``, pivots 0-based: one kernel for small real square
    matrices, else cuSOLVER's ``getrf`` per matrix (functx/primitives/cuda/_lu.py)."""
    *batch, m, n = a.shape
    k = min(m, n)
    if a.size == 0:
        return (xp.zeros(a.shape, a.dtype), xp.zeros(tuple(batch) + (k,), np.int32),
                xp.broadcast_to(xp.arange(m, dtype=np.int32), tuple(batch) + (m,)).copy())
    return _lu.lu(xp, a)


def lu_solve(xp: Any, lu: Any, perm: Any, b: Any, *, trans: int) -> Any:
    """``a x = b`` (or ``a^T``/``a^H``) from packed LU factors: a row gather or scatter on the
    device and two triangular solves (functx/primitives/cuda/_lu.py)."""
    if b.size == 0:
        return xp.zeros(b.shape, b.dtype)
    return _lu.lu_solve(xp, lu, perm, b, trans=trans)


def qr(xp: Any, a: Any, *, full_matrices: bool) -> tuple:
    """``(q, r)`` from cupy.linalg.qr (stacks of matrices are taken by CuPy)."""
    return tuple(xp.linalg.qr(a, mode="complete" if full_matrices else "reduced"))


def eigh(xp: Any, a: Any, *, lower: bool) -> tuple:
    """``(w, v)`` from cupy.linalg.eigh (batched syevj)."""
    w, v = xp.linalg.eigh(a, UPLO="L" if lower else "U")
    return w, v


def svd(xp: Any, a: Any, *, full_matrices: bool, compute_uv: bool) -> tuple:
    """``(s, u, vh)`` or ``(s,)`` from cupy.linalg.svd (batched gesvdj)."""
    if not compute_uv:
        return (xp.linalg.svd(a, compute_uv=False),)
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    return s, u, vh


def expm(xp: Any, a: Any) -> Any:
    """The matrix exponential: cupyx.scipy.linalg.expm per matrix (a loop on the device)."""
    from cupyx.scipy import linalg as cl

    if a.size == 0:
        return xp.zeros(a.shape, a.dtype)
    fa = _flat(a)
    out = xp.empty(fa.shape, a.dtype)
    for i in range(fa.shape[0]):
        out[i] = cl.expm(fa[i])
    return out.reshape(a.shape)


def cpu_only(name: str) -> Callable:
    """An impl rule refusing CUDA operands for a CPU-only primitive (as JAX's)."""
    def rule(xp: Any, *arrays: Any, **params: Any) -> Any:
        raise FunctxError(f"{name} runs on the CPU only (as in JAX: cuSOLVER has no routine "
                          f"for it), but got arrays on a CUDA device. Move them with "
                          f"functx.device_put(x, functx.devices('cpu')[0]) first.")
    rule.__name__ = f"{name}_cuda_refused"
    return rule
