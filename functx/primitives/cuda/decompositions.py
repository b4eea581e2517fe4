"""CUDA implementations of the matrix decompositions (functx/primitives/decompositions.py and
functx/primitives/eigen.py): cuSOLVER through CuPy (``cupy.linalg``,
``cupyx.scipy.linalg``).

* ``cholesky``, ``eigh``, ``svd``, ``qr``: ``cupy.linalg``'s routines, which take stacks of
  matrices (cuSOLVER's batched potrf, syevj, gesvdj; QR per matrix inside CuPy). A
  Cholesky factorisation that fails (a matrix that is not positive definite) does not raise
  in CuPy; the factor of such a matrix is set to NaN where its diagonal is not finite and
  positive, as JAX does on every device.
* ``triangular_solve``, ``lu``, ``lu_solve`` (a gather and two of those solves) and so
  ``lu_inverse`` (``lu_solve`` with the identity): a stack of more than one small square
  matrix (at most ``_batched_lu.BATCHED_MAX_N`` rows) by cuBLAS's batched routines, one
  call for the whole stack (``getrfBatched``, ``trsmBatched``; functx/primitives/cuda/
  _batched_lu.py). One matrix, or bigger ones, by ``cupyx.scipy.linalg.solve_triangular``
  and ``lu_factor`` (cuSOLVER), which take one matrix at a time: a Python loop over the
  batch, each step on the device (no host copy). The permutation of the pivots is one
  kernel (``_batched_lu.permutation``) on both paths.
* ``expm``: cupyx.scipy.linalg.expm per matrix, a loop on the device.
* ``eig`` and ``schur``: cuSOLVER has no general (non-Hermitian) eigensolver or Schur
  factorisation that CuPy exposes for all dtypes; as in JAX they are CPU-only and refuse
  CUDA operands with a FunctxError naming ``functx.device_put`` to move them.

Every function is an impl rule ``fn(xp, *arrays, **params)`` with ``xp`` = cupy. This module
imports no functx primitive module and no CuPy at import time.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from functx.errors import FunctxError
from functx.primitives.cuda import _batched_lu


def _flat(a: Any) -> Any:
    return a.reshape((-1,) + tuple(a.shape[-2:]))


def cholesky(xp: Any, a: Any) -> Any:
    """Lower Cholesky factors (NaN for a matrix that is not positive definite)."""
    if a.size == 0:
        return xp.zeros(a.shape, a.dtype)
    L = xp.linalg.cholesky(a)
    d = xp.diagonal(L, axis1=-2, axis2=-1)
    ok = xp.all(xp.isfinite(d) & (d.real > 0), axis=-1)
    return xp.where(ok[..., None, None], L, xp.asarray(np.nan, dtype=a.dtype))


def triangular_solve(xp: Any, a: Any, b: Any, *, left_side: bool, lower: bool,
                     transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> Any:
    """``op(a) x = b`` or ``x op(a) = b``: cuBLAS's trsmBatched for a stack of small
    matrices, else cupyx's solve_triangular per matrix (a loop on the device over the
    batch)."""
    from cupyx.scipy import linalg as cl  # lazily: CuPy is imported when CUDA is used

    if b.size == 0:
        return xp.zeros(b.shape, b.dtype)
    if _batched_lu.use_batched(a):  # a stack of small matrices: one trsmBatched
        return _batched_lu.triangular_solve(xp, a, b, left_side=left_side, lower=lower,
                                            transpose_a=transpose_a, conjugate_a=conjugate_a,
                                            unit_diagonal=unit_diagonal)
    t, c = transpose_a, conjugate_a and a.dtype.kind == "c"
    if not left_side:
        b, t = xp.swapaxes(b, -1, -2), not t
    conj_only = c and not t
    rhs = xp.conj(b) if conj_only else b
    trans = 0 if not t else (2 if c else 1)
    fa, fb = _flat(a), _flat(rhs)
    out = xp.empty(fb.shape, b.dtype)
    for i in range(fa.shape[0]):
        out[i] = cl.solve_triangular(fa[i], fb[i], trans=trans, lower=lower,
                                     unit_diagonal=unit_diagonal, check_finite=False)
    x = out.reshape(rhs.shape)
    x = xp.conj(x) if conj_only else x
    return xp.ascontiguousarray(x if left_side else xp.swapaxes(x, -1, -2))


def lu(xp: Any, a: Any) -> tuple:
    """``(lu, pivots, permutation)``: cuBLAS's getrfBatched for a stack of small square
    matrices, else cupyx's lu_factor per matrix (a loop on the device); pivots 0-based."""
    from cupyx.scipy import linalg as cl

    *batch, m, n = a.shape
    k = min(m, n)
    if a.size == 0:
        return (xp.zeros(a.shape, a.dtype), xp.zeros(tuple(batch) + (k,), np.int32),
                xp.broadcast_to(xp.arange(m, dtype=np.int32), tuple(batch) + (m,)).copy())
    if _batched_lu.use_batched(a) and a.dtype.kind != "c":
        # (complex: cuBLAS pivots on |a|, LAPACK on |re| + |im|; cuSOLVER's per-matrix
        # factors are the CPU's, which the tests compare to rounding)
        return _batched_lu.lu(xp, a)
    fa = _flat(a)
    lus = xp.empty(fa.shape, a.dtype)
    piv = xp.empty((fa.shape[0], k), np.int32)
    for i in range(fa.shape[0]):
        f, p = cl.lu_factor(fa[i], check_finite=False)
        lus[i], piv[i] = f, p[:k]
    piv, perm = _batched_lu.permutation(xp, piv.reshape(tuple(batch) + (k,)), m, base=0)
    return lus.reshape(a.shape), piv, perm


def lu_solve(xp: Any, lu: Any, perm: Any, b: Any, *, trans: int,
             triangular_solve: Callable) -> Any:
    """``a x = b`` (or ``a^T``/``a^H``) from packed LU factors: a row gather or scatter on the
    device and two triangular solves (batched for a stack of small matrices; else two calls
    of the triangular solve above, ``triangular_solve``, passed in)."""
    if b.size == 0:
        return xp.zeros(b.shape, b.dtype)
    if _batched_lu.use_batched(lu):
        return _batched_lu.lu_solve(xp, lu, perm, b, trans=trans)
    idx = perm.astype(np.int64)[..., None]
    conj = trans == 2
    if trans == 0:
        y = xp.take_along_axis(b, idx, axis=-2)
        y = triangular_solve(xp, lu, y, left_side=True, lower=True, transpose_a=False,
                             conjugate_a=False, unit_diagonal=True)
        return triangular_solve(xp, lu, y, left_side=True, lower=False, transpose_a=False,
                                conjugate_a=False, unit_diagonal=False)
    y = triangular_solve(xp, lu, b, left_side=True, lower=False, transpose_a=True,
                         conjugate_a=conj, unit_diagonal=False)
    y = triangular_solve(xp, lu, y, left_side=True, lower=True, transpose_a=True,
                         conjugate_a=conj, unit_diagonal=True)
    inverse = xp.argsort(perm, axis=-1).astype(np.int64)[..., None]  # x[perm] = y
    return xp.take_along_axis(y, inverse, axis=-2)


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
