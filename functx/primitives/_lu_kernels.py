"""Loops over stacks of LU factorisations, compiled with Numba on first use
(functx/primitives/decompositions.py calls :func:`compiled`).

This module imports no Numba: its functions are plain Python, and :func:`compiled` hands them
to ``functx.primitives._numba.njit_variant`` (``cache=True``), so Numba's disk cache finds them
in the next process. Each function is written so that it also runs, slowly, as Python.

* ``getrf_stack(a, lu, piv, perm, snap, sfmin)``: ``lu[i]``, ``piv[i]`` and ``perm[i]`` are
  LAPACK's ``getrf`` of ``a[i]`` (``(m, n)``, C-ordered): the packed factors, the row swaps
  (0-based) and the permutation they make (``a_i[perm_i] = L U``), with LAPACK's pivot choice
  (``i?amax``: the first row of the largest ``|re| + |im|``), its whole-row swaps and its
  scaling by the reciprocal of the pivot; a zero pivot leaves its column as it is (a singular
  matrix factors without error). Right-looking, two columns a step: the pivot column ``k``,
  then column ``k + 1`` updated by it and pivoted, then one rank-2 pass over the rows below,
  every update over a contiguous row (about 1.8x faster than OpenBLAS's ``getrf`` called
  per matrix at 64 x 64, one thread, as fast at 128). ``snap`` (of ``a``'s shape, or with
  no matrices) gets a copy of ``a`` on the way: the LU memo's snapshot. :func:`factor_stack`
  allocates and calls it. Factors equal LAPACK's to rounding (the order of the updates
  differs from OpenBLAS's blocked one, so a tie that only rounding breaks may go either way).
* ``lu_solve_stack(lu, perm, b, out, trans, conj)``: for every matrix ``i`` of the stack,
  ``out[i]`` solves ``a_i x = b_i`` (``trans == 0``) or ``a_i^T x = b_i`` (``trans == 1``;
  with ``conj``, ``a_i^H``) from the packed factors ``lu[i]`` (``a_i[perm_i] = L U``):
  a row gather and two substitutions, ``O(n^2 k)`` per matrix, the batch spread over the
  cores (``parallel=True``). Row by row as LAPACK's unblocked ``getrs``, each row updated by
  four solved rows a pass (:func:`_subtract_rows`, fused multiply-adds), so results agree
  with the BLAS path to rounding.
* ``lu_inverse_stack(lu, perm, out, trans, conj)``: ``out[i]`` is ``a_i^-1`` (``trans ==
  0``) or ``a_i^-T`` (``a_i^-H`` with ``conj``) from the same factors, as LAPACK's ``getri``
  (``a^-1 = U^-1 L^-1 P``, 4/3 n^3 flops instead of the 2 n^3 of solving with the identity):
  ``y = U^-T`` by substitution skipping the zeros of the identity and of ``y``'s upper
  triangle, then ``z = L^-T y`` and the rows permuted, every update a row operation over a
  contiguous row of the work matrix, four rows a pass. Compiled with
  ``error_model="numpy"`` (as the others): a singular factor gives infinities/NaNs, as the
  BLAS path.
* ``transpose_copy(src, dst)``: ``dst = src.T`` for 2-D arrays, by 32 x 32 tiles (NumPy's
  copy of a C-ordered matrix into Fortran order walks one of them with a stride of a row and
  takes about 4x as long at 1024 x 1024): one matrix's Fortran copy for ``getrf``.
* ``pivots_to_permutation_stack(piv, perm)``: LAPACK's row swaps applied in order to the
  identity permutation held in ``perm`` (one row per matrix).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from functx.primitives._numba import compile_loop, numba_or_none

_kernels: dict = {}


def getrf_stack(a: Any, lu: Any, piv: Any, perm: Any, snap: Any, sfmin: float) -> None:
    nb, m, n = a.shape
    kk = min(m, n)
    keep = snap.shape[0] == nb
    for i in _prange(nb):
        x = lu[i]
        for r in range(m):  # the copy, matrix by matrix (into this thread's cache)
            perm[i, r] = r
            xr = x[r]
            for c in range(n):
                xr[c] = a[i, r, c]
            if keep:
                for c in range(n):
                    snap[i, r, c] = xr[c]
        for k in range(0, kk, 2):  # two columns a step, then one pass over the rows below
            _pivot(x, piv[i], perm[i], k, sfmin)
            if k + 1 == kk:  # the last column: a rank-1 update
                u0 = x[k, k + 1:]
                for r in range(k + 1, m):
                    v0 = x[r, k]
                    xr = x[r, k + 1:]
                    for c in range(u0.shape[0]):
                        xr[c] -= v0 * u0[c]
                break
            k1 = k + 1
            u01 = x[k, k1]  # column k1 gets column k's update, then its own pivot
            for r in range(k1, m):
                x[r, k1] -= x[r, k] * u01
            _pivot(x, piv[i], perm[i], k1, sfmin)
            u0 = x[k, k1 + 1:]  # row k1 of U: column k's update
            u1 = x[k1, k1 + 1:]
            v0 = x[k1, k]
            for c in range(u1.shape[0]):
                u1[c] -= v0 * u0[c]
            for r in range(k1 + 1, m):  # the rank-2 update of the rows below
                v0 = x[r, k]
                v1 = x[r, k1]
                xr = x[r, k1 + 1:]
                for c in range(xr.shape[0]):
                    xr[c] -= v0 * u0[c] + v1 * u1[c]


def _pivot(x: Any, piv: Any, perm: Any, k: int, sfmin: float) -> None:
    """Column ``k`` of ``getrf_stack``'s matrix ``x``, up to date: its pivot (LAPACK's
    ``i?amax``: the first row of the largest ``|re| + |im|``), the swap of the whole rows
    (``L``'s part too, as ``laswp``) and the column of ``L`` below the diagonal, as
    ``getf2`` (times the reciprocal of the pivot unless it is below ``sfmin``; a zero pivot
    leaves the column as it is)."""
    m, n = x.shape
    p = k
    best = abs(x[k, k].real) + abs(x[k, k].imag)
    for r in range(k + 1, m):
        v = abs(x[r, k].real) + abs(x[r, k].imag)
        if v > best:
            best = v
            p = r
    piv[k] = p
    d = x[p, k]
    if d == 0:
        return
    if p != k:
        xk = x[k]
        xp = x[p]
        for c in range(n):
            t = xk[c]
            xk[c] = xp[c]
            xp[c] = t
        t = perm[k]
        perm[k] = perm[p]
        perm[p] = t
    if abs(d) >= sfmin:
        rcp = 1 / d
        for r in range(k + 1, m):
            x[r, k] *= rcp
    else:
        for r in range(k + 1, m):
            x[r, k] /= d


def lu_solve_stack(lu: Any, perm: Any, b: Any, out: Any, trans: int, conj: bool) -> None:
    nb, n, k = b.shape
    for i in _prange(nb):
        x = lu[i]
        if trans == 0:
            y = out[i]
            for r in range(n):  # y = b[perm]
                p = perm[i, r]
                for j in range(k):
                    y[r, j] = b[i, p, j]
            for r in range(1, n):  # L y' = y (unit lower triangle of lu: row r of x)
                _subtract_rows(y[r], y, x[r], 0, r, k, False, False)
            for r in range(n - 1, -1, -1):  # U x = y' (upper triangle)
                _subtract_rows(y[r], y, x[r], r + 1, n, k, False, False)
                d = x[r, r]
                for j in range(k):
                    y[r, j] /= d
        else:
            y = b[i].copy()
            for r in range(n):  # U^T y = b: row r uses column r of U above the diagonal
                _subtract_rows(y[r], y, x[:, r], 0, r, k, False, conj)
                d = x[r, r]
                if conj:
                    d = d.conjugate()
                for j in range(k):
                    y[r, j] /= d
            for r in range(n - 2, -1, -1):  # L^T z = y (unit upper)
                _subtract_rows(y[r], y, x[:, r], r + 1, n, k, False, conj)
            for r in range(n):  # x = P^T z: x[perm[r]] = z[r]
                p = perm[i, r]
                for j in range(k):
                    out[i, p, j] = y[r, j]


def lu_inverse_stack(lu: Any, perm: Any, out: Any, trans: int, conj: bool) -> None:
    nb, n, _ = lu.shape
    for i in _prange(nb):
        x = lu[i]
        z = np.zeros((n, n), lu.dtype)
        for r in range(n):  # U^T y = I: y = U^-T, lower triangular (row r: columns <= r)
            z[r, r] = 1
            _subtract_rows(z[r], z, x[:, r], 0, r, 0, True, False)
            d = x[r, r]
            for j in range(r + 1):
                z[r, j] /= d
        for r in range(n - 2, -1, -1):  # L^T z = y: z = L^-T U^-T = (U^-1 L^-1)^T
            _subtract_rows(z[r], z, x[:, r], r + 1, n, n, False, False)
        for r in range(n):  # a^-T = P^T z: a^-T[perm[r]] = z[r]
            p = perm[i, r]
            if trans == 0:
                for j in range(n):
                    out[i, j, p] = z[r, j]
            else:
                for j in range(n):
                    v = z[r, j]
                    if conj:
                        v = v.conjugate()
                    out[i, p, j] = v


def _subtract_rows(dst: Any, rows: Any, coef: Any, lo: int, hi: int, width: int,
                   lower: bool, conj: bool) -> None:
    """``dst[:width] -= sum(coef[c] * rows[c, :width] for c in range(lo, hi))`` (``coef``
    conjugated with ``conj``), four rows a pass over ``dst`` (a quarter of the loads and
    stores of ``dst`` of one row at a time). With ``lower``, the rows are those of a lower
    triangle: row ``c`` is read up to its diagonal only (the width of a pass is its last
    row's ``c + 1``; the others are zero there)."""
    c = lo
    while c + 4 <= hi:
        v0, v1, v2, v3 = coef[c], coef[c + 1], coef[c + 2], coef[c + 3]
        if conj:
            v0, v1, v2, v3 = v0.conjugate(), v1.conjugate(), v2.conjugate(), v3.conjugate()
        r0, r1, r2, r3 = rows[c], rows[c + 1], rows[c + 2], rows[c + 3]
        for j in range(c + 4 if lower else width):
            dst[j] -= v0 * r0[j] + v1 * r1[j] + v2 * r2[j] + v3 * r3[j]
        c += 4
    while c < hi:
        v0 = coef[c]
        if conj:
            v0 = v0.conjugate()
        r0 = rows[c]
        for j in range(c + 1 if lower else width):
            dst[j] -= v0 * r0[j]
        c += 1


def transpose_copy(src: Any, dst: Any) -> None:
    m, n = src.shape
    for i0 in _prange((m + 31) // 32):
        lo = i0 * 32
        hi = min(lo + 32, m)
        for j0 in range(0, n, 32):
            for j in range(j0, min(j0 + 32, n)):
                for i in range(lo, hi):
                    dst[j, i] = src[i, j]


def pivots_to_permutation_stack(piv: Any, perm: Any) -> None:
    nb, k = piv.shape
    for i in _prange(nb):
        for r in range(k):
            p = piv[i, r]
            t = perm[i, r]
            perm[i, r] = perm[i, p]
            perm[i, p] = t


_prange = range  # numba.prange in the compiled variants (functx.primitives._numba.compile_loop)


_OPTIONS = {"lu_inverse_stack": {"error_model": "numpy", "fastmath": {"contract"}},
            "lu_solve_stack": {"error_model": "numpy", "fastmath": {"contract"}},
            "getrf_stack": {"error_model": "numpy", "fastmath": {"contract"}}}
_HELPERS = {"getrf_stack": (_pivot,), "lu_solve_stack": (_subtract_rows,),
            "lu_inverse_stack": (_subtract_rows,)}


def factor_stack(a: Any, snapshot: Any = None) -> tuple | None:
    """``(lu, pivots, permutation)`` of the stack ``a`` (``(..., m, n)``, float32/64 or
    complex64/128) by the compiled :func:`getrf_stack` (C-ordered factors, int32 pivots and
    permutation), or None when Numba is unavailable. ``snapshot``, a C-ordered array shaped
    and typed as ``a``, gets a copy of ``a`` on the way (the LU memo's)."""
    *batch, m, n = a.shape
    count = int(np.prod(batch)) if batch else 1
    kernel = compiled("getrf_stack", parallel=count * m * n * min(m, n) > 1 << 16)
    if kernel is None:
        return None
    lu = np.empty((count, m, n), a.dtype)
    piv = np.empty((count, min(m, n)), np.int32)
    perm = np.empty((count, m), np.int32)
    snap = (np.empty((0, m, n), a.dtype) if snapshot is None
            else snapshot.reshape((count, m, n)))
    kernel(np.ascontiguousarray(a).reshape((count, m, n)), lu, piv, perm, snap,
           float(np.finfo(a.dtype).tiny))
    return (lu.reshape(a.shape), piv.reshape(tuple(batch) + (min(m, n),)),
            perm.reshape(tuple(batch) + (m,)))


def compiled(name: str, parallel: bool) -> Any:
    """The Numba-compiled kernel ``name`` of this module (``parallel`` spreads the stack over
    the cores), or None when Numba is unavailable."""
    if numba_or_none() is None:
        return None
    key = (name, parallel)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = _kernels[key] = compile_loop(globals()[name], parallel, _HELPERS.get(name, ()),
                                                    **_OPTIONS.get(name, {}))
    return kernel
