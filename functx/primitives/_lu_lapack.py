"""The LU factorisations and solves of functx/primitives/decompositions.py on the CPU, by BLAS
and LAPACK through SciPy: ``getrf`` of one matrix (Fortran-ordered factors) or of a stack
(C-ordered; stacks of matrices up to 128 go through ``_lu_kernels.getrf_stack`` instead), and ``lu_solve``'s and ``lu_inverse``'s implementations for a single or a big
matrix (stacks of small ones go through the compiled loops of ``_lu_kernels``).

The solves read the packed factors ``lu`` (``a[perm] = L U``) in either memory order without a
copy: a Fortran-ordered ``lu`` as it is, a C-ordered one as the Fortran array of its
transpose (``L^T`` unit upper, ``U^T`` lower), with the solves transposed to match.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.linalg.lapack

from functx.primitives import _lu_kernels


def getrf(a: Any) -> tuple:
    """``(lu, pivots)`` of one matrix by LAPACK's ``getrf`` on a Fortran copy, in place:
    Fortran-ordered factors and 0-based row swaps."""
    getrf_ = scipy.linalg.lapack.get_lapack_funcs("getrf", dtype=a.dtype)
    lu, piv, _ = getrf_(fortran_copy(a), overwrite_a=1)
    return lu, piv


def fortran_copy(a: Any) -> Any:
    """A Fortran-ordered copy of the 2-D ``a`` (a tiled compiled copy where ``a`` is a big
    C-ordered matrix)."""
    kernel = (_lu_kernels.compiled("transpose_copy", parallel=False)
              if a.flags.c_contiguous and a.size >= 1 << 14 else None)
    if kernel is None:
        return np.array(a, order="F")
    out = np.empty(a.shape[::-1], a.dtype)
    kernel(a, out)
    return out.T


def getrf_stack(a: Any) -> tuple:
    """``(lu, pivots)`` of every matrix of a stack ``(..., m, n)``: ``getrf`` in place on each
    matrix of one copy whose matrices are Fortran-ordered (one call per matrix, without
    SciPy's per-matrix checks and copies of ``lu_factor``); C-ordered factors."""
    *batch, m, n = a.shape
    if min(m, n) == 1:  # (SciPy's getrf has been seen to leave an m x 1 view unfactored)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "singular matrix": the factors are still right
            lu, piv = scipy.linalg.lu_factor(a, check_finite=False)
        return np.ascontiguousarray(lu), piv
    work = np.ascontiguousarray(np.swapaxes(a, -1, -2)).reshape((-1, n, m))  # a[i] = work[i].T
    piv = np.empty((work.shape[0], min(m, n)), np.int32)
    getrf_ = scipy.linalg.lapack.get_lapack_funcs("getrf", dtype=a.dtype)
    for i in range(work.shape[0]):
        view = work[i].T
        lu_i, piv[i], _ = getrf_(view, overwrite_a=1)
        _written(view, lu_i)
    lu = np.ascontiguousarray(np.swapaxes(work, -1, -2)).reshape(a.shape)
    return lu, piv.reshape(tuple(batch) + (min(m, n),))


def lu_solve_blas(lu: Any, perm: Any, b: Any, trans: int) -> Any:
    """One system by two BLAS trsm calls on the factors, no copy of ``lu``: a Fortran-ordered
    ``lu`` is read as it is; a C-ordered one as the Fortran array of its transpose, each left
    solve ``op(T) x = y`` being done as the right solve ``x^T op(T)^T = y^T``."""
    trsm = scipy.linalg.blas.get_blas_funcs("trsm", dtype=lu.dtype)
    op = 2 if trans == 2 and np.dtype(lu.dtype).kind == "c" else 1
    if lu.flags.f_contiguous:
        if trans == 0:  # L y = b[perm], U x = y
            y = np.array(b[perm], order="F")
            y = trsm(1.0, lu, y, side=0, lower=1, trans_a=0, diag=1, overwrite_b=1)
            return trsm(1.0, lu, y, side=0, lower=0, trans_a=0, diag=0, overwrite_b=1)
        # U^T y = b, L^T z = y, x[perm] = z (op 2 conjugates)
        y = trsm(1.0, lu, np.array(b, order="F"), side=0, lower=0, trans_a=op, diag=0,
                 overwrite_b=1)
        y = trsm(1.0, lu, y, side=0, lower=1, trans_a=op, diag=1, overwrite_b=1)
    else:
        f = np.ascontiguousarray(lu).T  # Fortran view: f = lu^T
        if trans == 0:
            y = np.array(b[perm], order="C").T  # y^T, Fortran
            # L y' = y: y'^T L^T = y^T, L^T = the unit upper triangle of f
            y = trsm(1.0, f, y, side=1, lower=0, trans_a=0, diag=1, overwrite_b=1)
            # U x = y': x^T U^T = y'^T, U^T = the lower triangle of f
            y = trsm(1.0, f, y, side=1, lower=1, trans_a=0, diag=0, overwrite_b=1)
            return y.T
        y = np.array(b, order="C").T
        # U^T y = b: y^T U = b^T, U = (lower triangle of f)^T; op 2 conjugates
        y = trsm(1.0, f, y, side=1, lower=1, trans_a=op, diag=0, overwrite_b=1)
        # L^T z = y: z^T L = y^T, L = (unit upper triangle of f)^T
        y = trsm(1.0, f, y, side=1, lower=0, trans_a=op, diag=1, overwrite_b=1).T
    out = np.empty_like(b)
    out[perm] = y
    return out


def lu_inverse_blas(lu: Any, perm: Any, trans: int) -> Any:
    """``a^-1 = U^-1 L^-1 P`` (or its transpose) as LAPACK's ``getri`` computes it (4/3 n^3
    flops; two solves with the identity take 2 n^3), but with ``trtri`` and one solve (a
    third of the time of OpenBLAS's ``getri``): ``M = U^-1``, then ``M L = U^-1`` and the
    columns permuted. On a Fortran ``lu`` this gives ``a^-1`` in Fortran order (whose
    transpose, ``a^-T``, is C-ordered); on a C-ordered one the same steps on the transposed
    factors give ``a^-T`` in Fortran order."""
    trtri = scipy.linalg.lapack.get_lapack_funcs("trtri", dtype=lu.dtype)
    trsm = scipy.linalg.blas.get_blas_funcs("trsm", dtype=lu.dtype)
    conj = trans == 2 and np.dtype(lu.dtype).kind == "c"
    n = lu.shape[0]
    if lu.flags.f_contiguous:  # U upper, L unit lower in lu itself: M L = U^-1, a^-1 = M P
        m, _ = trtri(lu, lower=0, unitdiag=0)
        for j in range(n - 1):
            m[j + 1:, j] = 0  # trtri copied the other triangle (L)
        _solve_unit_lower_right(lu, m)
        out = np.empty_like(m, order="F")
        out[:, perm] = m  # a^-1 (Fortran)
        out = out if trans == 0 else out.T
    else:  # f = lu^T: U^T lower, L^T unit upper: L^T N = U^-T, a^-T = P^T N
        f = lu.T
        m, _ = trtri(f, lower=1, unitdiag=0)
        for j in range(1, n):
            m[:j, j] = 0
        m = trsm(1.0, f, m, side=0, lower=0, trans_a=0, diag=1, overwrite_b=1)
        out = np.empty_like(m, order="F")
        out[perm] = m  # a^-T (Fortran)
        out = out.T if trans == 0 else out
    return np.conj(out) if conj else out


_BLOCK = 128  # columns per block of the blocked solve (a measured optimum at n = 1024)


def _solve_unit_lower_right(lu: Any, m: Any) -> None:
    """``m <- m L^-1`` in place for the unit lower triangle ``L`` of a Fortran ``lu``, by
    blocks of columns from the last (``getri``'s blocking): each block takes a ``gemm`` with
    the blocks already solved and a small ``trsm``, most of the flops in ``gemm`` (OpenBLAS's
    ``trsm`` runs at about half its ``gemm``'s speed)."""
    gemm = scipy.linalg.blas.get_blas_funcs("gemm", dtype=lu.dtype)
    trsm = scipy.linalg.blas.get_blas_funcs("trsm", dtype=lu.dtype)
    n = lu.shape[0]
    for lo in range((n - 1) // _BLOCK * _BLOCK, -1, -_BLOCK):
        hi = min(lo + _BLOCK, n)
        block = m[:, lo:hi]  # Fortran-contiguous columns: updated in place
        if hi < n:
            _written(block, gemm(-1.0, m[:, hi:], lu[hi:, lo:hi], beta=1.0, c=block,
                                 overwrite_c=1))
        _written(block, trsm(1.0, lu[lo:hi, lo:hi], block, side=1, lower=1, trans_a=0, diag=1,
                             overwrite_b=1))


def _written(dst: Any, result: Any) -> None:
    """Make sure an ``overwrite_*`` call's result is in ``dst``: SciPy's wrappers work in
    place only on arrays they take without a copy (a one-column block, for one, may be
    copied), and return the copy otherwise."""
    if result is not dst and result.__array_interface__["data"][0] != \
            dst.__array_interface__["data"][0]:
        dst[...] = result
