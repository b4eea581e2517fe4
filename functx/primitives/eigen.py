"""Orthogonal and spectral decompositions: ``qr``, ``eigh``, ``svd``, ``eig`` and ``schur``
(as JAX's ``jax.lax.linalg``), batched over leading axes.

Operands are stacks of matrices ``(..., m, n)`` of float32/64 or complex64/128. NumPy's
``qr``, ``eigh``, ``svd`` and ``eig`` are batched; SciPy's ``schur`` loops over the batch
inside SciPy. CUDA implementations: ``functx/primitives/cuda/decompositions.py`` (``eig``
and ``schur`` are CPU-only there, as in JAX).

Derivatives (JAX's formulas; a rule written as a JVP has its VJP as the exact transpose of
that linear map, computed by reverse mode over the JVP, as JAX transposes its JVPs):

* ``qr(a, full_matrices)``: ``(q, r)``. JVP of Townsend's note "Differentiating the QR
  decomposition" (as JAX): with ``C = q^H da r^-1``, ``dq = q (Omega - C) + da r^-1``,
  ``dr = (C - Omega) r``, ``Omega`` the skew-Hermitian part built from ``tril(C, -1)`` (plus
  the imaginary diagonal of ``C`` for complex input). Defined for ``m >= n`` with the reduced
  factors (or square ``a``); other shapes raise a FunctxError when differentiated, as JAX.
* ``eigh(a, lower)``: ``(w, v)``, eigenvalues ascending (real) and orthonormal eigenvectors;
  ``a`` is taken as Hermitian and only the ``lower`` (else upper) triangle is read. JVP
  (Seeger et al. 2017, as JAX): ``dw = Re diag(v^H da v)``, ``dv = v (F o (v^H da v))`` with
  ``F[i, j] = 1 / (w[j] - w[i])`` off the diagonal and 0 on it. VJP, its transpose:
  ``ct_a = conj(v) (diag(ct_w) + F o (v^T ct_v)) v^T``. Degenerate eigenvalues: as in JAX,
  nothing special is done -- ``F`` is infinite where two eigenvalues are equal, so the
  derivative of the eigenvectors (which are not unique there) is inf/NaN, while a function
  of the eigenvalues alone (``ct_v`` zero) keeps a finite gradient.
* ``svd(a, full_matrices, compute_uv)``: ``(s, u, vh)`` or ``(s,)``, singular values
  descending. JVP of Seeger et al. / Townsend as JAX writes it: ``dS = u^H da v``,
  ``ds = Re diag(dS)``, ``du = u (F o (dS s + s dS^H) + D)``, ``dv = v (F o (s dS + dS^H s))``
  with ``F[i, j] = 1 / (s[j]^2 - s[i]^2)`` off the diagonal, ``D`` the imaginary-diagonal
  correction ``(dS - dS^H)/2 / s`` on the diagonal, and the projections onto the
  complement for rectangular ``a``. Repeated singular values make ``F`` infinite (as in
  JAX); zero singular values get a zero ``1/s``. With ``full_matrices`` (and ``u``/``vh``
  not square) the derivative is not defined and raises a FunctxError, as JAX.
* ``eig(a)``: ``(w, v)`` (complex: LAPACK's order of eigenvalues, eigenvectors of unit
  2-norm with their largest-magnitude component real), CPU only. JVP (Giles 2008, as JAX's
  ``_eig_vec_jvp``): with ``P = v^-1 da v``, ``dw = diag(P)`` and ``dv = v (F o P) + v
  diag(c)``, ``F`` as for ``eigh`` and ``c`` the correction that keeps LAPACK's
  normalisation; its transpose is the VJP (real part for real ``a``). Valid for distinct
  eigenvalues (infinite otherwise). JAX computes the eigenvector part only when asked
  (``enable_eigvec_derivs=True``); functx always does, with the same formula.
* ``schur(a, output)``: ``(t, z)`` with ``a = z t z^H``, CPU only, not differentiable (JAX
  defines no derivative either): differentiating it raises a FunctxError.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg

from functx.errors import FunctxError
from functx.ir import AbstractArray
from functx.primitives import _matrix as _m
from functx.primitives import complex as _cx
from functx.primitives import decompositions as _dec
from functx.primitives import elementwise as _ew
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import zeros_like
from functx.primitives._util import shape_of
from functx.primitives.cuda import decompositions as _cuda
from functx.registry import Primitive, composite_vjp
from functx.tracing import bind


def _transposed_jvp(jvp_lin: Any, a: Any, cts: Any) -> Any:
    """The VJP of a primitive from its JVP, linear in the tangent of its one operand ``a``:
    the transpose of ``t -> jvp_lin(t)`` applied to ``cts`` (a list, None for zeros)."""
    outs = jvp_lin(zeros_like(a))
    full = tuple(c if c is not None else zeros_like(o) for c, o in zip(cts, outs))
    return composite_vjp(lambda t: tuple(jvp_lin(t)), (zeros_like(a),), full)[0]


def _recip_differences(w: Any) -> Any:
    """``F[..., i, j] = 1 / (w[j] - w[i])`` off the diagonal, 0 on it (JAX's construction:
    ``1 / (eye + w[j] - w[i]) - eye``)."""
    n = shape_of(w)[-1]
    eye = _m.eye_like(w, n)
    diff = _ew.sub(_m.rows(w), _m.cols(w))
    return _ew.sub(_ew.div(_ew.scalar(w, 1.0), _ew.add(eye, diff)), eye)


# -- qr ------------------------------------------------------------------------------------------

qr_p = Primitive("qr", multiple_results=True)
qr_p.none_cts = True


@qr_p.def_abstract_eval
def _qr_aval(a: AbstractArray, *, full_matrices: bool) -> tuple:
    _m.check_matrix("qr", a, square=False)
    *batch, m, n = a.shape
    k = m if full_matrices else min(m, n)
    dt = np.dtype(a.dtype)
    return (AbstractArray(tuple(batch) + (m, k), dt, False),
            AbstractArray(tuple(batch) + (k, n), dt, False))


def _qr_impl(xp, a, *, full_matrices):
    _m.check_array_dtype("qr", a)
    q, r = xp.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)


qr_p.def_impl(_qr_impl)
qr_p.def_impl(_m.checked("qr", _cuda.qr), backend="cuda")


def _qr_jvp_lin(da: Any, q: Any, r: Any) -> list:
    """Townsend's QR JVP (as JAX's ``qr_jvp_rule``), for the reduced factors, m >= n."""
    dx_rinv = _dec.triangular_solve(r, da)  # da r^-1 (a right solve, upper)
    qt_dx_rinv = _m.mm(_m.mH(q), dx_rinv)
    low = _m.tril(qt_dx_rinv, -1)
    do = _ew.sub(low, _m.mH(low))
    if _m.is_complex(qt_dx_rinv):
        n = shape_of(qt_dx_rinv)[-1]
        im = _ew.sub(qt_dx_rinv, _m.astype(_m.real(qt_dx_rinv), qt_dx_rinv.dtype))
        do = _ew.add(do, _ew.mul(_m.eye_like(im, n), im))
    dq = _ew.add(_m.mm(q, _ew.sub(do, qt_dx_rinv)), dx_rinv)
    dr = _m.mm(_ew.sub(qt_dx_rinv, do), r)
    return [dq, dr]


def _qr_check(a: Any, full_matrices: bool) -> None:
    m, n = shape_of(a)[-2:]
    if m < n or (full_matrices and m != n):
        raise FunctxError(f"The derivative of qr is defined for matrices with at least as many "
                          f"rows as columns and the reduced factors (as in JAX), but got a "
                          f"{m} x {n} matrix with full_matrices={full_matrices}. Use "
                          "mode='reduced' and m >= n, or differentiate another formulation.")


@qr_p.def_vjp(save_inputs=(0,), save_output=True)
def _qr_vjp(cts, ins, outs, *, full_matrices):
    a = ins[0]
    _qr_check(a, full_matrices)
    q, r = outs
    return (_transposed_jvp(lambda t: _qr_jvp_lin(t, q, r), a, cts),)


@qr_p.def_jvp
def _qr_jvp(tangents, primals, outs, *, full_matrices):
    (da,) = tangents
    if da is None:
        return None
    _qr_check(primals[0], full_matrices)
    return _qr_jvp_lin(da, *outs)


qr_p.def_batch(_m.matrix_batch_rule(qr_p))


def qr(a: Any, *, full_matrices: bool = False) -> tuple:
    """``(q, r)`` with ``a = q @ r``, ``q`` with orthonormal columns and ``r`` upper triangular.

    Args:
        a: ``(..., m, n)`` float32/64 or complex64/128.
        full_matrices: ``q`` is ``m x m`` (``r`` ``m x n``); else ``m x k``, ``k = min(m, n)``.

    Example:
        >>> q, r = qr(np.eye(3))
    """
    return tuple(bind(qr_p, a, full_matrices=bool(full_matrices)))


# -- eigh ----------------------------------------------------------------------------------------

eigh_p = Primitive("eigh", multiple_results=True)
eigh_p.none_cts = True


@eigh_p.def_abstract_eval
def _eigh_aval(a: AbstractArray, *, lower: bool) -> tuple:
    _m.check_matrix("eigh", a)
    dt = np.dtype(a.dtype)
    return (AbstractArray(tuple(a.shape[:-1]), _m.real_dtype(dt), False),
            AbstractArray(tuple(a.shape), dt, False))


def _eigh_impl(xp, a, *, lower):
    _m.check_array_dtype("eigh", a)
    if a.size == 0:
        return xp.zeros(a.shape[:-1], _m.real_dtype(a.dtype)), xp.zeros(a.shape, a.dtype)
    w, v = xp.linalg.eigh(a, UPLO="L" if lower else "U")
    return w, v


eigh_p.def_impl(_eigh_impl)
eigh_p.def_impl(_m.checked("eigh", _cuda.eigh), backend="cuda")


@eigh_p.def_vjp(save_output=True)
def _eigh_vjp(cts, ins, outs, *, lower):
    ct_w, ct_v = cts
    w, v = outs
    inner = None
    if ct_w is not None:
        inner = _m.diag_embed(_m.astype(ct_w, v.dtype))
    if ct_v is not None:
        f = _m.astype(_recip_differences(w), v.dtype)
        term = _ew.mul(f, _m.mm(_m.mT(v), ct_v))
        inner = term if inner is None else _ew.add(inner, term)
    if inner is None:
        return (None,)
    return (_m.mm(_m.mm(_m.conj(v), inner), _m.mT(v)),)


@eigh_p.def_jvp
def _eigh_jvp(tangents, primals, outs, *, lower):
    (da,) = tangents
    if da is None:
        return None
    w, v = outs
    vdv = _m.mm(_m.mm(_m.mH(v), da), v)
    dw = _m.real(_m.diagonal(vdv))
    dv = _m.mm(v, _ew.mul(_m.astype(_recip_differences(w), v.dtype), vdv))
    return [dw, dv]


eigh_p.def_batch(_m.matrix_batch_rule(eigh_p))


def eigh(a: Any, *, lower: bool = True) -> tuple:
    """``(w, v)``: eigenvalues (ascending, real) and eigenvectors (columns) of Hermitian ``a``.

    Args:
        a: ``(..., n, n)``; only the ``lower`` (else upper) triangle is read.

    Example:
        >>> w, v = eigh(np.diag([2.0, 1.0]))    # w = [1, 2]
    """
    return tuple(bind(eigh_p, a, lower=bool(lower)))


# -- svd -----------------------------------------------------------------------------------------

svd_p = Primitive("svd", multiple_results=True)
svd_p.none_cts = True


@svd_p.def_abstract_eval
def _svd_aval(a: AbstractArray, *, full_matrices: bool, compute_uv: bool) -> tuple:
    _m.check_matrix("svd", a, square=False)
    *batch, m, n = a.shape
    k = min(m, n)
    dt = np.dtype(a.dtype)
    s = AbstractArray(tuple(batch) + (k,), _m.real_dtype(dt), False)
    if not compute_uv:
        return (s,)
    ku, kv = (m, n) if full_matrices else (k, k)
    return (s, AbstractArray(tuple(batch) + (m, ku), dt, False),
            AbstractArray(tuple(batch) + (kv, n), dt, False))


def _svd_impl(xp, a, *, full_matrices, compute_uv):
    _m.check_array_dtype("svd", a)
    *batch, m, n = a.shape
    k = min(m, n)
    rdt = _m.real_dtype(a.dtype)
    if a.size == 0:
        s = xp.zeros(tuple(batch) + (k,), rdt)
        if not compute_uv:
            return (s,)
        ku, kv = (m, n) if full_matrices else (k, k)
        eye = lambda p, q: xp.broadcast_to(xp.eye(p, q, dtype=a.dtype), tuple(batch) + (p, q))
        return s, eye(m, ku).copy(), eye(kv, n).copy()
    if not compute_uv:
        return (xp.linalg.svd(a, compute_uv=False).astype(rdt, copy=False),)
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    return s.astype(rdt, copy=False), u, vh


svd_p.def_impl(_svd_impl)
svd_p.def_impl(_m.checked("svd", _cuda.svd), backend="cuda")


def _svd_jvp_lin(da: Any, s: Any, u: Any, vh: Any, compute_uv: bool) -> list:
    """JAX's ``_svd_jvp_rule`` for the reduced factors."""
    dt = da.dtype
    v = _m.mH(vh)
    ds_mat = _m.mm(_m.mm(_m.mH(u), da), v)
    ds = _m.real(_m.diagonal(ds_mat))
    if not compute_uv:
        return [ds]
    k = shape_of(s)[-1]
    s_row, s_col = _m.rows(s), _m.cols(s)
    eye = _m.eye_like(s, k)
    diffs = _ew.mul(_ew.add(s_row, s_col), _ew.sub(s_row, s_col))
    F = _m.astype(_ew.sub(_ew.div(_ew.scalar(s, 1.0), _ew.add(diffs, eye)), eye), dt)
    s_r, s_c = _m.astype(s_row, dt), _m.astype(s_col, dt)
    dss = _ew.mul(s_r, ds_mat)  # dS diag(s)
    sds = _ew.mul(s_c, ds_mat)  # diag(s) dS
    zeros = _m.astype(_ew.eq(s, _ew.scalar(s, 0.0)), s.dtype)
    s_inv = _ew.sub(_ew.div(_ew.scalar(s, 1.0), _ew.add(s, zeros)), zeros)
    diag_part = _ew.mul(_ew.mul(_ew.sub(ds_mat, _m.mH(ds_mat)), _ew.scalar(ds_mat, 0.5)),
                        _m.astype(_m.diag_embed(s_inv), dt))
    du = _m.mm(u, _ew.add(_ew.mul(F, _ew.add(dss, _m.mH(dss))), diag_part))
    dv = _m.mm(v, _ew.mul(F, _ew.add(sds, _m.mH(sds))))
    m, n = shape_of(da)[-2:]
    if m > n:
        dav = _m.mm(da, v)
        du = _ew.add(du, _ew.div(_ew.sub(dav, _m.mm(u, _m.mm(_m.mH(u), dav))), s_r))
    if n > m:
        dahu = _m.mm(_m.mH(da), u)
        dv = _ew.add(dv, _ew.div(_ew.sub(dahu, _m.mm(v, _m.mm(vh, dahu))), s_r))
    return [ds, du, _m.mH(dv)]


def _svd_check(a: Any, full_matrices: bool, compute_uv: bool) -> None:
    m, n = shape_of(a)[-2:]
    if compute_uv and full_matrices and m != n:
        raise FunctxError(f"The derivative of svd with full_matrices=True is not defined for a "
                          f"{m} x {n} matrix (the extra singular vectors are not unique; JAX "
                          "refuses it too). Use full_matrices=False.")


@svd_p.def_vjp(save_inputs=(0,), save_output=True)
def _svd_vjp(cts, ins, outs, *, full_matrices, compute_uv):
    a = ins[0]
    _svd_check(a, full_matrices, compute_uv)
    if not compute_uv:
        # ds = Re diag(u^H da v): ct_a = conj(u) diag(ct_s) v^T, from a reduced SVD.
        s, u, vh = svd(a, full_matrices=False, compute_uv=True)
        d = _m.astype(_m.rows(cts[0]), a.dtype)
        return (_m.mm(_ew.mul(_m.conj(u), d), _m.conj(vh)),)
    return (_transposed_jvp(lambda t: _svd_jvp_lin(t, *outs, True), a, cts),)


@svd_p.def_jvp
def _svd_jvp(tangents, primals, outs, *, full_matrices, compute_uv):
    (da,) = tangents
    if da is None:
        return None
    a = primals[0]
    _svd_check(a, full_matrices, compute_uv)
    if not compute_uv:
        return _svd_jvp_lin(da, *svd(a, full_matrices=False, compute_uv=True), False)
    return _svd_jvp_lin(da, *outs, True)


svd_p.def_batch(_m.matrix_batch_rule(svd_p))


def svd(a: Any, *, full_matrices: bool = False, compute_uv: bool = True) -> tuple:
    """The singular value decomposition ``a = u @ diag(s) @ vh`` of each matrix.

    Returns:
        ``(s, u, vh)`` (``s`` descending, real), or ``(s,)`` without ``compute_uv``.

    Example:
        >>> s, u, vh = svd(np.diag([1.0, 3.0]))    # s = [3, 1]
    """
    return tuple(bind(svd_p, a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv)))


# -- eig (CPU) -----------------------------------------------------------------------------------

eig_p = Primitive("eig", multiple_results=True)
eig_p.none_cts = True


@eig_p.def_abstract_eval
def _eig_aval(a: AbstractArray) -> tuple:
    _m.check_matrix("eig", a)
    dt = _m.complex_dtype(a.dtype)
    return (AbstractArray(tuple(a.shape[:-1]), dt, False), AbstractArray(tuple(a.shape), dt, False))


def _eig_impl(xp, a):
    _m.check_array_dtype("eig", a)
    dt = _m.complex_dtype(a.dtype)
    if a.size == 0:
        return xp.zeros(a.shape[:-1], dt), xp.zeros(a.shape, dt)
    w, v = np.linalg.eig(a)
    return xp.asarray(w.astype(dt, copy=False)), xp.asarray(v.astype(dt, copy=False))


eig_p.def_impl(_eig_impl)
eig_p.def_impl(_cuda.cpu_only("eig"), backend="cuda")


def _eig_jvp_lin(da: Any, w: Any, v: Any, lu: Any, perm: Any) -> list:
    """JAX's eigenvalue and eigenvector JVP (``_eig_vec_jvp``): nondegenerate perturbation
    theory (Giles 2008, sec. 3.1), ``P = v^-1 da v``, ``dw = diag(P)``, ``U = v (F o P)``, and
    ``dv = U + v diag(c)`` with ``c`` fixed by LAPACK's normalisation of each eigenvector
    (unit 2-norm, largest-magnitude component real)."""
    nd = len(shape_of(v))
    p = _m.mm(_dec.lu_solve(lu, perm, _m.astype(da, v.dtype)), v)
    dw = _m.diagonal(p)
    u = _m.mm(v, _ew.mul(_recip_differences(w), p))
    absv = _ew.abs(v)
    k = _red.argmax(absv, axis=nd - 2, index_dtype=np.int32)
    rows = np.arange(shape_of(v)[-2], dtype=np.int32)[:, None]
    xp = _shape.array_module(v)
    rows = rows if xp is np else xp.asarray(rows)
    mask = _m.astype(_ew.eq(rows, _m.rows(k)), v.dtype)
    col_sum = lambda x: _red.reduce_sum(x, (nd - 2,))
    re = _ew.neg(_m.real(col_sum(_ew.mul(_m.conj(v), u))))
    im = _ew.neg(_ew.div(_cx.imag(col_sum(_ew.mul(mask, u))),
                         _m.real(col_sum(_ew.mul(mask, v)))))
    c = _ew.add(_m.astype(re, v.dtype), _ew.mul(_m.astype(im, v.dtype), _ew.scalar(v, 1j)))
    return [dw, _ew.add(u, _ew.mul(v, _m.rows(c)))]


@eig_p.def_vjp(save_inputs=(0,), save_output=True)
def _eig_vjp(cts, ins, outs):
    w, v = outs
    lu, _, perm = _dec.lu(v)
    return (_transposed_jvp(lambda t: _eig_jvp_lin(t, w, v, lu, perm), ins[0], cts),)


@eig_p.def_jvp
def _eig_jvp(tangents, primals, outs):
    (da,) = tangents
    if da is None:
        return None
    w, v = outs
    lu, _, perm = _dec.lu(v)
    return _eig_jvp_lin(da, w, v, lu, perm)


eig_p.def_batch(_m.matrix_batch_rule(eig_p))


def eig(a: Any) -> tuple:
    """``(w, v)``: eigenvalues and right eigenvectors (complex) of each square matrix (CPU).

    Example:
        >>> w, v = eig(np.array([[0.0, 1.0], [-1.0, 0.0]]))    # w = [1j, -1j]
    """
    return tuple(bind(eig_p, a))


# -- schur (CPU) ---------------------------------------------------------------------------------

schur_p = Primitive("schur", multiple_results=True)


@schur_p.def_abstract_eval
def _schur_aval(a: AbstractArray, *, output: str) -> tuple:
    _m.check_matrix("schur", a)
    if output not in ("real", "complex"):
        raise FunctxError(f"schur: output must be 'real' or 'complex', not {output!r}.")
    dt = np.dtype(a.dtype)
    dt = _m.complex_dtype(dt) if output == "complex" else dt
    return AbstractArray(tuple(a.shape), dt, False), AbstractArray(tuple(a.shape), dt, False)


def _schur_impl(xp, a, *, output):
    _m.check_array_dtype("schur", a)
    dt = _m.complex_dtype(a.dtype) if output == "complex" else a.dtype
    if a.size == 0:
        return xp.zeros(a.shape, dt), xp.zeros(a.shape, dt)
    t, z = scipy.linalg.schur(a, output=output, check_finite=False)
    return xp.asarray(np.asarray(t, dt)), xp.asarray(np.asarray(z, dt))


schur_p.def_impl(_schur_impl)
schur_p.def_impl(_cuda.cpu_only("schur"), backend="cuda")


def _schur_not_differentiable(*args: Any, **params: Any) -> Any:
    raise FunctxError("schur has no derivative (JAX defines none either): the Schur vectors "
                      "are not unique. Wrap its input in functx.stop_gradient if no gradient "
                      "should flow through it, or use eigh/eig for a differentiable "
                      "decomposition.")


schur_p.def_vjp(_schur_not_differentiable)
schur_p.def_jvp(_schur_not_differentiable)
schur_p.def_batch(_m.matrix_batch_rule(schur_p))


def schur(a: Any, *, output: str = "real") -> tuple:
    """``(t, z)`` with ``a = z @ t @ z^H``, ``t`` (quasi-)upper triangular (CPU only).

    Example:
        >>> t, z = schur(np.array([[1.0, 2.0], [0.0, 3.0]]))
    """
    return tuple(bind(schur_p, a, output=str(output)))


# -- expm ----------------------------------------------------------------------------------------
# The matrix exponential (SciPy's scaling and squaring with Pade approximants; on CUDA
# cupyx's expm per matrix). Its Frechet derivative L(a, e) is the upper-right block of
# expm([[a, e], [0, a]]) (Higham 2008, "Functions of Matrices", eq. 3.16; the
# block-triangular trick), computed with this same primitive, so every order of derivative
# is exact to expm's own accuracy. JVP: L(a, da). VJP, its transpose in the bilinear
# pairing: L(a^T, ct).

expm_p = Primitive("expm")


@expm_p.def_abstract_eval
def _expm_aval(a: AbstractArray) -> AbstractArray:
    _m.check_matrix("expm", a)
    return AbstractArray(tuple(a.shape), np.dtype(a.dtype), False)


def _expm_impl(xp, a):
    _m.check_array_dtype("expm", a)
    if a.size == 0:
        return xp.zeros(a.shape, a.dtype)
    return xp.asarray(np.asarray(scipy.linalg.expm(a), a.dtype))


expm_p.def_impl(_expm_impl)
expm_p.def_impl(_m.checked("expm", _cuda.expm), backend="cuda")


def expm_frechet(a: Any, e: Any) -> Any:
    """The Frechet derivative of expm at ``a`` in the direction ``e`` (same shapes), as the
    upper-right block of ``expm([[a, e], [0, a]])``."""
    nd = len(shape_of(a))
    n = shape_of(a)[-1]
    top = _shape.concatenate([a, e], nd - 1)
    bottom = _shape.concatenate([zeros_like(a), a], nd - 1)
    big = expm(_shape.concatenate([top, bottom], nd - 2))
    lead = tuple(shape_of(a)[:-2])
    return _shape.slice(big, (0,) * (nd - 2) + (0, n), lead + (n, 2 * n), (1,) * nd)


expm_p.def_vjp(lambda ct, ins, out: (expm_frechet(_m.mT(ins[0]), ct),), save_inputs=(0,))
expm_p.def_jvp(lambda tangents, primals, out: (
    None if tangents[0] is None else expm_frechet(primals[0], tangents[0])))
expm_p.def_batch(_m.matrix_batch_rule(expm_p))


def expm(a: Any) -> Any:
    """The matrix exponential of each square matrix of ``a``.

    Example:
        >>> expm(np.zeros((2, 2)))   # the identity
    """
    return bind(expm_p, a)
