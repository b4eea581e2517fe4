"""functx.scipy.linalg: ``jax.scipy.linalg``'s functions over functx's decomposition primitives.

Names, signatures and derivative conventions follow ``jax.scipy.linalg`` (SciPy's arguments
that only tune memory, ``overwrite_*`` and ``check_finite``, are accepted and ignored, as in
JAX). Stacks of matrices are accepted wherever the primitive takes them.

* ``cholesky``/``cho_factor`` read one triangle (no symmetrisation, as JAX's scipy
  version); ``cho_solve``, ``solve_triangular``, ``lu_solve`` are triangular solves.
* ``expm`` is a primitive whose derivatives are exact Fréchet derivatives (the
  block-triangular identity, functx/primitives/eigen.py); ``expm_frechet`` returns them.
* ``sqrtm`` goes through the complex Schur form, so it is CPU-only and not differentiable,
  as JAX's.
* ``schur`` is CPU-only and not differentiable (as JAX).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import functx.numpy as fnp
from functx.errors import FunctxError, ShapeError
from functx.numpy import linalg as _nla
from functx.primitives import decompositions as _dec
from functx.primitives import eigen as _eig

__all__ = ["solve_triangular", "cholesky", "cho_factor", "cho_solve", "lu", "lu_factor",
           "lu_solve", "qr", "svd", "eigh", "expm", "expm_frechet", "sqrtm", "block_diag",
           "toeplitz", "schur", "solve", "inv", "det"]

_TRANS = {0: 0, "N": 0, 1: 1, "T": 1, 2: 2, "C": 2}


def _mat(name: str, a: Any, square: bool = True) -> Any:
    try:
        return _nla._matrices(name, a, square=square)
    except ShapeError as e:
        raise ShapeError(str(e).replace("functx.numpy.linalg.", "functx.scipy.linalg.")) from None


def _rhs(name: str, a: Any, b: Any) -> tuple:
    """``b`` as ``(..., n, k)`` broadcast to ``a``'s leading axes, and whether it was 1-D."""
    b = _nla._inexact(name, b)
    a, b = _nla._common_dtype(a, b)
    n = a.shape[-1]
    vec = b.ndim == 1
    if vec:
        b = b[:, None]
    if b.ndim < 2 or b.shape[-2] != n:
        raise ShapeError(f"functx.scipy.linalg.{name}: a of shape {tuple(a.shape)} needs b of "
                         f"shape ({n},) or (..., {n}, k), but got {tuple(fnp.shape(b))}.")
    batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return (fnp.broadcast_to(a, batch + (n, n)), fnp.broadcast_to(b, batch + b.shape[-2:]), vec)


def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False, debug: Any = None,
                     check_finite: bool = True) -> Any:
    """Solve ``op(a) x = b`` for triangular ``a`` (``trans``: 0/'N', 1/'T', 2/'C').

    Example:
        >>> solve_triangular(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([2.0, 2.0]),
        ...                  lower=True)   # [1, 1]
    """
    if trans not in _TRANS:
        raise FunctxError(f"functx.scipy.linalg.solve_triangular: trans must be 0, 1, 2, 'N', "
                          f"'T' or 'C', not {trans!r}.")
    t = _TRANS[trans]
    a, b, vec = _rhs("solve_triangular", _mat("solve_triangular", a), b)
    x = _dec.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=t > 0,
                              conjugate_a=t == 2, unit_diagonal=unit_diagonal)
    return x[..., 0] if vec else x


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Any:
    """The Cholesky factor: upper ``U`` with ``a = U^H U`` (default) or lower ``L``. Reads the
    lower triangle of ``a`` (for ``lower``) or the upper one."""
    a = _mat("cholesky", a)
    if lower:
        return _dec.cholesky(a)
    return _nla._H(_dec.cholesky(_nla._H(a)))


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple:
    """``(c, lower)`` for :func:`cho_solve` (``c`` has zeros in the other triangle)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower: tuple, b: Any, overwrite_b: bool = False,
              check_finite: bool = True) -> Any:
    """Solve ``a x = b`` from ``cho_factor(a)``."""
    c, lower = c_and_lower
    c, b, vec = _rhs("cho_solve", _mat("cho_solve", c), b)
    # a = L L^H (lower) or U^H U (upper): two triangular solves
    y = _dec.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower,
                              conjugate_a=not lower)
    x = _dec.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower,
                              conjugate_a=lower)
    return x[..., 0] if vec else x


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True,
       p_indices: bool = False) -> tuple:
    """``(p, l, u)`` with ``a = p @ l @ u`` (``p`` a permutation matrix, or the indices with
    ``p_indices``), or ``(p @ l, u)`` with ``permute_l``."""
    a = _mat("lu", a, square=False)
    packed, _, perm = _dec.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    L = fnp.tril(packed[..., :, :k], -1) + fnp.eye(m, k, dtype=a.dtype, like=packed)
    U = fnp.triu(packed[..., :k, :])
    p_mat = fnp.swapaxes((perm[..., :, None] == fnp.arange(m, like=perm)).astype(a.dtype), -1, -2)
    if permute_l:
        return fnp.matmul(p_mat, L), U
    if p_indices:
        # the inverse permutation: row i of p_mat has its one at inv_perm[i]
        return fnp.argmax(p_mat, axis=-1).astype(np.int32), L, U
    return p_mat, L, U


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """``(lu, piv)``: the packed factors and LAPACK's 0-based row swaps (int32)."""
    packed, piv, _ = _dec.lu(_mat("lu_factor", a, square=False))
    return packed, piv


def lu_solve(lu_and_piv: tuple, b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """Solve ``a x = b`` (``trans`` 0), ``a^T x = b`` (1) or ``a^H x = b`` (2) from
    ``lu_factor(a)``."""
    packed, piv = lu_and_piv
    if trans not in _TRANS:
        raise FunctxError(f"functx.scipy.linalg.lu_solve: trans must be 0, 1 or 2, not "
                          f"{trans!r}.")
    packed, b, vec = _rhs("lu_solve", _mat("lu_solve", packed), b)
    perm = _dec.lu_pivots_to_permutation(piv, packed.shape[-1])
    perm = fnp.broadcast_to(perm, tuple(packed.shape[:-1]))
    x = _dec.lu_solve(packed, perm, b, trans=_TRANS[trans])
    return x[..., 0] if vec else x


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full",
       pivoting: bool = False, check_finite: bool = True) -> tuple:
    """``(q, r)`` (``mode`` ``"full"`` or ``"economic"``) or ``(r,)`` (``"r"``)."""
    if pivoting:
        raise FunctxError("functx.scipy.linalg.qr: pivoting=True is not supported.")
    if mode not in ("full", "economic", "r"):
        raise FunctxError(f"functx.scipy.linalg.qr: mode must be 'full', 'economic' or 'r', "
                          f"not {mode!r}.")
    q, r = _eig.qr(_mat("qr", a, square=False), full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    """``(u, s, vh)`` with ``a = u diag(s) vh``, or ``s`` without ``compute_uv``."""
    out = _nla.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return out if not compute_uv else tuple(out)


def eigh(a: Any, b: Any = None, lower: bool = True, eigvals_only: bool = False,
         overwrite_a: bool = False, overwrite_b: bool = False, type: int = 1,
         check_finite: bool = True, subset_by_index: Any = None) -> Any:
    """Eigenvalues (ascending) and eigenvectors of Hermitian ``a`` (one triangle read)."""
    if b is not None:
        raise FunctxError("functx.scipy.linalg.eigh: the generalized problem (b=...) is not "
                          "supported; reduce it with a Cholesky factor of b first.")
    a = _mat("eigh", a)
    w, v = _eig.eigh(_nla._symmetrize(a), lower=lower)  # JAX symmetrises here too
    return w if eigvals_only else (w, v)


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = 16) -> Any:
    """The matrix exponential (exact derivatives: Fréchet, by the block-triangular
    identity).

    Example:
        >>> expm(np.zeros((2, 2)))   # identity
    """
    return _eig.expm(_mat("expm", A))


def expm_frechet(A: Any, E: Any, *, method: Any = None, compute_expm: bool = True) -> Any:
    """``(expm(A), L(A, E))`` or ``L(A, E)``: the Fréchet derivative of expm at ``A`` in the
    direction ``E``."""
    A = _mat("expm_frechet", A)
    E = _mat("expm_frechet", E)
    if tuple(A.shape) != tuple(E.shape):
        raise ShapeError(f"functx.scipy.linalg.expm_frechet needs A and E of one shape, but got "
                         f"{tuple(A.shape)} and {tuple(E.shape)}.")
    A, E = _nla._common_dtype(A, E)
    frechet = _eig.expm_frechet(A, E)
    return (_eig.expm(A), frechet) if compute_expm else frechet


def sqrtm(A: Any, blocksize: int = 1) -> Any:
    """The principal square root of each square matrix (complex), as JAX's: from the complex
    Schur form ``A = Z T Z^H``, the upper triangular root ``R`` of ``T`` one superdiagonal at
    a time (``R[i, i+d] = (T[i, i+d] - (R R)[i, i+d]) / (R[i, i] + R[i+d, i+d])`` with the
    d-th superdiagonal of ``R`` still zero), then ``Z R Z^H``. CPU only and not
    differentiable (the Schur form has no derivative), as in JAX."""
    A = _mat("sqrtm", A)
    T, Z = _eig.schur(A, output="complex")
    n = A.shape[-1]
    R = fnp.sqrt(fnp.diagonal(T, axis1=-2, axis2=-1))
    roots = R
    R = R[..., :, None] * fnp.eye(n, dtype=T.dtype)
    for d in range(1, n):
        num = (fnp.diagonal(T, offset=d, axis1=-2, axis2=-1)
               - fnp.diagonal(fnp.matmul(R, R), offset=d, axis1=-2, axis2=-1))
        v = num / (roots[..., :n - d] + roots[..., d:])
        v = fnp.concatenate([v, fnp.zeros(tuple(v.shape[:-1]) + (d,), v.dtype)], axis=-1)
        R = R + v[..., :, None] * fnp.eye(n, k=d, dtype=T.dtype)
    return fnp.matmul(fnp.matmul(Z, R), _nla._H(Z))


def block_diag(*arrs: Any) -> Any:
    """A block-diagonal matrix of the (at most 2-D) arrays ``arrs``."""
    if not arrs:
        return fnp.zeros((1, 0))
    mats = [fnp.atleast_2d(fnp.asarray(a)) for a in arrs]
    if any(m.ndim != 2 for m in mats):
        raise ShapeError("functx.scipy.linalg.block_diag takes arrays of at most 2 dimensions.")
    dt = fnp.result_type(*mats)
    total = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        c = m.shape[1]
        rows.append(fnp.pad(m.astype(dt), ((0, 0), (left, total - left - c))))
        left += c
    return fnp.concatenate(rows, axis=0)


def toeplitz(c: Any, r: Any = None) -> Any:
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (``conj(c)`` when
    omitted; ``r[0]`` is ignored)."""
    c = fnp.ravel(fnp.asarray(c))
    r = fnp.conj(c) if r is None else fnp.ravel(fnp.asarray(r))
    c, r = _nla._common_dtype(c, r) if c.dtype != r.dtype else (c, r)
    m, n = c.shape[0], r.shape[0]
    vals = fnp.concatenate([c[::-1], r[1:]])
    idx = np.arange(n)[None, :] - np.arange(m)[:, None] + (m - 1)
    return fnp.take(vals, idx)


def schur(a: Any, output: str = "real") -> tuple:
    """``(t, z)`` with ``a = z t z^H`` (CPU only, not differentiable, as JAX)."""
    return _eig.schur(_mat("schur", a), output=output)


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False,
          overwrite_b: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Any:
    """Solve ``a x = b`` (``assume_a="pos"``: by Cholesky; otherwise by LU)."""
    if assume_a == "pos":
        return cho_solve(cho_factor(a, lower=lower), b)
    return _nla.solve(a, b)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The inverse of each square matrix."""
    return _nla.inv(a)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The determinant of each square matrix."""
    return _nla.det(a)
