"""Specs of the matrix decompositions (functx/primitives/decompositions.py and eigen.py).

Inputs are drawn well-conditioned and built inside ``fn`` from a raw array ``x`` with functx
operations, so that the complex tests (which make ``x`` complex) get operands of the same
kind: Hermitian positive definite ``x x^H + n I`` for ``cholesky``, Hermitian
``(x + x^H)/2 + diag(0, 6, 12, ...)`` (eigenvalues at least ~1 apart) for ``eigh``,
``0.3 x + diag(distinct)`` (distinct singular values / eigenvalues, far from zero) for
``svd``/``eig``, triangles with a dominant diagonal for ``triangular_solve``.

Outputs whose sign or phase is arbitrary are checked through gauge-invariant functions:
``v diag(g) v^H`` for eigenvectors and ``u diag(g) vh`` for singular vectors, with ``g``
fixed weights; each spec's output is one array (the pieces flattened and concatenated).
References are NumPy/SciPy.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import scipy.linalg
from hypothesis import strategies as st

from functx.primitives import _matrix as m
from functx.primitives import decompositions as dec
from functx.primitives import eigen
from functx.primitives import elementwise as ew
from functx.primitives import shape as sh
from functx.primitives.misc import stop_gradient
from tests.specs import PrimSpec
from tests.strategies import array


def _batch() -> st.SearchStrategy:
    return st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


def _square(lo: float = -1.0, hi: float = 1.0, min_n: int = 1) -> st.SearchStrategy:
    return st.tuples(_batch(), st.integers(min_n, 4)).flatmap(
        lambda bn: st.tuples(array(bn[0] + (bn[1], bn[1]), lo, hi)))


def _const(like: Any, value: np.ndarray) -> Any:
    """A constant in ``like``'s dtype on ``like``'s device (broadcast where it is used)."""
    v = value.astype(np.dtype(like.dtype))
    xp = sh.array_module(like)
    return v if xp is np else xp.asarray(v)


def _flat_cat(*parts: Any, nlead: int) -> Any:
    """The trailing axes of each part flattened and concatenated (one output array)."""
    dt = parts[0].dtype
    if any(np.dtype(p.dtype).kind == "c" for p in parts):
        dt = next(p.dtype for p in parts if np.dtype(p.dtype).kind == "c")
    lead = tuple(parts[0].shape[:nlead])
    outs = []
    for p in parts:
        p = m.astype(p, dt)
        shape = tuple(p.shape)
        k = len(shape) - len(lead)
        outs.append(sh.reshape(p, lead + (int(np.prod(shape[len(lead):])),)) if k != 1 else p)
    return sh.concatenate(outs, len(lead))


def _np_cat(*parts: np.ndarray, nlead: int) -> np.ndarray:
    lead = parts[0].shape[:nlead]
    return np.concatenate([p.reshape(lead + (-1,)) for p in parts], axis=nlead)


# -- cholesky ----------------------------------------------------------------------------------

def _spd(x: Any) -> Any:
    n = x.shape[-1]
    return ew.add(m.mm(x, m.mH(x)), _const(x, n * np.eye(n)))


def _np_spd(x: np.ndarray) -> np.ndarray:
    n = x.shape[-1]
    return x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)


CHOLESKY = PrimSpec("cholesky", fn=lambda x: dec.cholesky(_spd(x)),
                    ref=lambda x: np.linalg.cholesky(_np_spd(x)), args=_square(),
                    rtol=1e-10, atol=1e-10)


# -- triangular_solve --------------------------------------------------------------------------

def _trsolve_args(left: bool) -> st.SearchStrategy:
    def draw(bnk):
        batch, n, k = bnk
        bshape = batch + ((n, k) if left else (k, n))
        return st.tuples(array(batch + (n, n), -0.5, 0.5), array(bshape, -1.0, 1.0))
    return st.tuples(_batch(), st.integers(1, 4), st.integers(1, 3)).flatmap(draw)


def _np_trsolve(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    n = a.shape[-1]
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t = t - t * np.eye(n) + np.eye(n)
    t = np.swapaxes(t, -1, -2) if transpose_a else t
    t = np.conj(t) if conjugate_a else t
    if left_side:
        return np.linalg.solve(t, b)
    return np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


def _trsolve_spec(label: str, **flags: bool) -> PrimSpec:
    def fn(a, b):
        n = a.shape[-1]
        return dec.triangular_solve(ew.add(a, _const(a, 3 * np.eye(n))), b, **flags)

    def ref(a, b):
        return _np_trsolve(a + 3 * np.eye(a.shape[-1]), b, **flags)
    return PrimSpec("triangular_solve", fn=fn, ref=ref, args=_trsolve_args(flags["left_side"]),
                    diff_argnums=(0, 1), rtol=1e-10, atol=1e-10, label=label)


TRSOLVE = [
    _trsolve_spec("left,lower", left_side=True, lower=True, transpose_a=False,
                  conjugate_a=False, unit_diagonal=False),
    _trsolve_spec("right,upper,T", left_side=False, lower=False, transpose_a=True,
                  conjugate_a=False, unit_diagonal=False),
    _trsolve_spec("left,upper,H", left_side=True, lower=False, transpose_a=True,
                  conjugate_a=True, unit_diagonal=False),
    _trsolve_spec("right,lower,conj,unit", left_side=False, lower=True, transpose_a=False,
                  conjugate_a=True, unit_diagonal=True),
]


# -- lu ------------------------------------------------------------------------------------------

def _rect(min_rows_ge_cols: bool = False) -> st.SearchStrategy:
    def draw(bmn):
        batch, mm_, n = bmn
        if min_rows_ge_cols and mm_ < n:
            mm_, n = n, mm_
        return st.tuples(array(batch + (mm_, n), -1.0, 1.0))
    return st.tuples(_batch(), st.integers(1, 4), st.integers(1, 4)).flatmap(draw)


def _np_lu(a: np.ndarray) -> np.ndarray:
    flat = a.reshape((-1,) + a.shape[-2:])
    return np.stack([scipy.linalg.lu_factor(x)[0] for x in flat]).reshape(a.shape)


LU = PrimSpec("lu", fn=lambda x: dec.lu(x)[0], ref=_np_lu, args=_rect(), rtol=1e-10,
              atol=1e-10, fd_rtol=1e-4, fd_atol=1e-5)


# -- lu_solve -------------------------------------------------------------------------------------
# Packed factors drawn directly (a unit lower and an upper triangle with a dominant diagonal),
# the rows reversed by a fixed permutation; the reference rebuilds a and solves with NumPy.

def _lu_solve_args() -> st.SearchStrategy:
    def draw(bnk):
        batch, n, k = bnk
        return st.tuples(array(batch + (n, n), -0.5, 0.5), array(batch + (n, k), -1.0, 1.0))
    return st.tuples(_batch(), st.integers(1, 4), st.integers(1, 3)).flatmap(draw)


def _reversed_rows(like: Any) -> Any:
    n = like.shape[-1]
    perm = np.ascontiguousarray(np.broadcast_to(np.arange(n - 1, -1, -1, dtype=np.int32),
                                                tuple(like.shape[:-2]) + (n,)))
    xp = sh.array_module(like)
    return perm if xp is np else xp.asarray(perm)


def _lu_solve_spec(trans: int) -> PrimSpec:
    def fn(f, b):
        n = f.shape[-1]
        return dec.lu_solve(ew.add(f, _const(f, 3 * np.eye(n))), _reversed_rows(f), b,
                            trans=trans)

    def ref(f, b):
        n = f.shape[-1]
        f = f + 3 * np.eye(n)
        low, up = np.tril(f, -1) + np.eye(n), np.triu(f)
        a = (low @ up)[..., ::-1, :]  # a[perm] = L U with perm reversing the rows
        a = a if trans == 0 else np.swapaxes(a, -1, -2)
        return np.linalg.solve(np.conj(a) if trans == 2 else a, b)
    return PrimSpec("lu_solve", fn=fn, ref=ref, args=_lu_solve_args(), diff_argnums=(0, 1),
                    rtol=1e-10, atol=1e-10, label=f"trans={trans}")


LU_SOLVE = [_lu_solve_spec(t) for t in (0, 1, 2)]


def _lu_inverse_spec(trans: int) -> PrimSpec:
    def fn(f):
        n = f.shape[-1]
        return dec.lu_inverse(ew.add(f, _const(f, 3 * np.eye(n))), _reversed_rows(f),
                              trans=trans)

    def ref(f):
        n = f.shape[-1]
        f = f + 3 * np.eye(n)
        a = ((np.tril(f, -1) + np.eye(n)) @ np.triu(f))[..., ::-1, :]  # a[::-1] = L U
        a = a if trans == 0 else np.swapaxes(a, -1, -2)
        return np.linalg.inv(np.conj(a) if trans == 2 else a)
    args = st.tuples(_batch(), st.integers(1, 4)).flatmap(
        lambda bn: st.tuples(array(bn[0] + (bn[1], bn[1]), -0.5, 0.5)))
    return PrimSpec("lu_inverse", fn=fn, ref=ref, args=args, rtol=1e-10, atol=1e-10,
                    label=f"trans={trans}")


LU_INVERSE = [_lu_inverse_spec(t) for t in (0, 1, 2)]


# -- qr --------------------------------------------------------------------------------------------

def _qr_fn(x):
    q, r = eigen.qr(x)
    return _flat_cat(q, r, nlead=len(x.shape) - 2)


def _qr_ref(x):
    q, r = np.linalg.qr(x)
    return _np_cat(q, r, nlead=x.ndim - 2)


QR = PrimSpec("qr", fn=_qr_fn, ref=_qr_ref, args=_rect(min_rows_ge_cols=True), rtol=1e-9,
              atol=1e-9, fd_rtol=1e-4, fd_atol=1e-5)


# -- eigh ------------------------------------------------------------------------------------------

def _hermitian(x: Any) -> Any:
    n = x.shape[-1]
    half = ew.mul(ew.add(x, m.mH(x)), ew.scalar(x, 0.5))
    return ew.add(half, _const(x, np.diag(6.0 * np.arange(n))))


def _np_hermitian(x: np.ndarray) -> np.ndarray:
    n = x.shape[-1]
    return (x + np.conj(np.swapaxes(x, -1, -2))) / 2 + np.diag(6.0 * np.arange(n))


def _weights(n: int) -> np.ndarray:
    return np.arange(1, n + 1, dtype=np.float64)


def _eigh_fn(x, lower=True):
    w, v = eigen.eigh(_hermitian(x), lower=lower)
    n = x.shape[-1]
    proj = m.mm(ew.mul(v, _const(v, _weights(n))), m.mH(v))
    return _flat_cat(w, proj, nlead=len(x.shape) - 2)


def _eigh_ref(x):
    w, v = np.linalg.eigh(_np_hermitian(x))
    n = x.shape[-1]
    proj = (v * _weights(n)) @ np.conj(np.swapaxes(v, -1, -2))
    return _np_cat(w.astype(proj.dtype), proj, nlead=x.ndim - 2)


EIGH = [PrimSpec("eigh", fn=_eigh_fn, ref=_eigh_ref, args=_square(-0.5, 0.5), rtol=1e-9,
                 atol=1e-9, fd_rtol=1e-4, fd_atol=1e-5, label="lower"),
        PrimSpec("eigh", fn=lambda x: _eigh_fn(x, lower=False), ref=_eigh_ref,
                 args=_square(-0.5, 0.5), rtol=1e-9, atol=1e-9, fd_rtol=1e-4, fd_atol=1e-5,
                 label="upper")]


# -- svd -------------------------------------------------------------------------------------------

def _dominant(shape: tuple) -> np.ndarray:
    mm_, n = shape[-2:]
    k = min(mm_, n)
    return np.eye(mm_, n) * np.concatenate([2.0 * np.arange(k, 0, -1) + 1, np.zeros(max(mm_, n) - k)])[:n]


def _well_separated(x: Any) -> Any:
    return ew.add(ew.mul(x, ew.scalar(x, 0.3)), _const(x, _dominant(x.shape)))


def _svd_fn(x):
    s, u, vh = eigen.svd(_well_separated(x))
    k = s.shape[-1]
    return _flat_cat(s, m.mm(ew.mul(u, _const(u, _weights(k))), vh), nlead=len(x.shape) - 2)


def _svd_ref(x):
    a = 0.3 * x + _dominant(x.shape)
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return _np_cat(s.astype(u.dtype), (u * _weights(s.shape[-1])) @ vh, nlead=x.ndim - 2)


SVD = [PrimSpec("svd", fn=_svd_fn, ref=_svd_ref, args=_rect(), rtol=1e-9, atol=1e-9,
                fd_rtol=1e-4, fd_atol=1e-5, label="uv"),
       PrimSpec("svd", fn=lambda x: eigen.svd(_well_separated(x), compute_uv=False)[0],
                ref=lambda x: np.linalg.svd(0.3 * x + _dominant(x.shape), compute_uv=False),
                args=_rect(), rtol=1e-9, atol=1e-9, fd_rtol=1e-4, fd_atol=1e-5,
                label="s")]


# -- eig and schur ---------------------------------------------------------------------------------

def _parts(z: Any) -> Any:
    from functx.primitives import complex as cx
    return sh.concatenate([cx.real(z), cx.imag(z)], len(z.shape) - 1)


def _eig_fn(x):
    w, _ = eigen.eig(_well_separated(x))
    return _parts(w)


def _eig_ref(x):
    w = np.linalg.eig(0.3 * x + _dominant(x.shape))[0].astype(np.complex128)
    return np.concatenate([w.real, w.imag], axis=-1)


EIG = PrimSpec("eig", fn=_eig_fn, ref=_eig_ref, args=_square(), rtol=1e-9, atol=1e-9,
               fd_rtol=1e-4, fd_atol=1e-5)


def _eig_vectors_fn(x):
    w, v = eigen.eig(_well_separated(x))
    return _parts(_flat_cat(w, v, nlead=len(x.shape) - 2))


def _eig_vectors_ref(x):
    w, v = np.linalg.eig(0.3 * x + _dominant(x.shape))
    z = _np_cat(w.astype(np.complex128), v.astype(np.complex128), nlead=x.ndim - 2)
    return np.concatenate([z.real, z.imag], axis=-1)


EIG_VECTORS = PrimSpec("eig", fn=_eig_vectors_fn, ref=_eig_vectors_ref, args=_square(),
                       rtol=1e-9, atol=1e-9, fd_rtol=1e-4, fd_atol=1e-5, label="vectors")


def _schur_ref(x):
    flat = x.reshape((-1,) + x.shape[-2:])
    t = np.stack([scipy.linalg.schur(a)[0] for a in flat]).reshape(x.shape)
    return t


SCHUR = PrimSpec("schur", fn=lambda x: eigen.schur(stop_gradient(x))[0], ref=_schur_ref,
                 args=_square(), diff_argnums=(), rtol=1e-9, atol=1e-9)

SPECS = [CHOLESKY, *TRSOLVE, LU, *LU_SOLVE, *LU_INVERSE, QR, *EIGH, *SVD, EIG, EIG_VECTORS, SCHUR]


EXPM = PrimSpec("expm", fn=lambda x: eigen.expm(x), ref=lambda x: scipy.linalg.expm(x),
                args=_square(-0.7, 0.7), rtol=1e-10, atol=1e-10, fd_rtol=1e-4, fd_atol=1e-5)
SPECS.append(EXPM)


def _pivots() -> st.SearchStrategy:
    def draw(bmk):
        batch, mm_, k = bmk
        k = min(k, mm_)

        def make(seed):
            rng = np.random.default_rng(seed)
            return np.stack([rng.integers(i, mm_, size=batch) for i in range(k)],
                            axis=-1).astype(np.int32).reshape(batch + (k,))
        return st.tuples(st.integers(0, 2**32 - 1).map(make), st.just(mm_))
    return st.tuples(_batch(), st.integers(1, 5), st.integers(1, 5)).flatmap(draw)


def _np_p2p(piv, m_):
    out = np.empty(piv.shape[:-1] + (m_,), np.int32)
    for idx in np.ndindex(piv.shape[:-1]):
        p = np.arange(m_, dtype=np.int32)
        for i, j in enumerate(piv[idx]):
            p[i], p[j] = p[j], p[i]
        out[idx] = p
    return out


SPECS.append(PrimSpec("lu_pivots_to_permutation",
                      fn=lambda piv, p: dec.lu_pivots_to_permutation(piv, p.size),
                      ref=lambda piv, p: _np_p2p(piv, p.size),
                      args=_pivots().map(lambda t: (t[0], SimpleNamespace(size=t[1]))),
                      diff_argnums=()))
