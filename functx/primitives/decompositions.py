"""Triangular factorisations: ``cholesky``, ``triangular_solve`` and ``lu`` (as JAX's
``jax.lax.linalg``), batched over leading axes.

Every primitive takes stacks of matrices ``(..., m, n)`` of float32, float64, complex64 or
complex128 (LAPACK's dtypes; half precision is refused with a DTypeError) and computes all of
them in one call: NumPy's linalg routines are batched, and SciPy's (``solve_triangular``,
``lu_factor``) loop over the batch inside SciPy. On CUDA the implementations are CuPy's
(``functx/primitives/cuda/decompositions.py``).

* ``cholesky(a)``: the lower Cholesky factor ``L`` with ``a = L L^H``, reading the lower
  triangle of ``a`` only. A matrix that is not positive definite gives a factor of NaNs (as
  JAX; NumPy would raise), so one bad matrix of a batch does not stop the others.
  Derivatives (Murray 2016, "Differentiation of the Cholesky decomposition", as JAX):
  ``dL = L Phi(L^-1 dA L^-H)`` with ``Phi`` the lower triangle with its diagonal halved; the
  VJP is its transpose, ``ct_A = L^-T Phi(L^T ct) conj(L)^-1``. They treat ``a`` as
  Hermitian (a tangent is not symmetrised): ``functx.numpy.linalg.cholesky`` symmetrises its
  input first, as ``jnp.linalg.cholesky`` does, so its gradient is Hermitian.
* ``triangular_solve(a, b, left_side, lower, transpose_a, conjugate_a, unit_diagonal)``:
  ``op(a) x = b`` (``left_side``) or ``x op(a) = b``, with ``op`` the transpose and/or the
  conjugate as asked, reading one triangle of ``a`` (and not its diagonal when
  ``unit_diagonal``). ``a`` and ``b`` share their leading axes. Linear in ``b``: its
  cotangent is the solve with ``op`` transposed. In ``a``: ``dx = -op(a)^-1 op(da) x``
  (left) or ``-x op(da) op(a)^-1`` (right), restricted to the triangle read.
* ``lu(a)``: ``(lu, pivots, permutation)`` of a ``(..., m, n)`` matrix, partial pivoting:
  ``a[..., permutation, :] = L @ U`` with ``L`` unit lower triangular (``m x k``) and ``U``
  upper triangular (``k x n``), ``k = min(m, n)``, packed in ``lu``; ``pivots`` (int32,
  ``(..., k)``) are LAPACK's row swaps (0-based), ``permutation`` (int32, ``(..., m)``) their
  product. A singular matrix factors without error (zeros on ``U``'s diagonal). JVP (as
  JAX's): with ``x = P da``, ``la = L^-1 x U^-1``, ``dlu = L tril(la, -1) + triu(la) U``
  (``L``, ``U`` padded to square); the VJP is its transpose. Pivots do not move under small
  perturbations, so they get no derivative.

``lu_solve(lu, permutation, b, trans)`` solves with a factorisation (functx.numpy.linalg's
``solve``, ``inv``, ``det`` gradients): one primitive whose CPU implementation is one
compiled loop over a stack of small matrices (Numba, the batch over the cores;
functx/primitives/_lu_kernels.py) or two BLAS ``trsm`` calls per big matrix
(functx/primitives/_lu_lapack.py), and whose derivatives are those of the composite it stands
for (the rows permuted, a gather or a scatter, then two ``triangular_solve``).
``lu_inverse(lu, permutation, trans)`` is ``lu_solve`` with the identity (``slogdet``'s
gradient ``a^-T``) in LAPACK's ``getri`` order, ``U^-1`` then ``U^-1 L^-1``: 4/3 n^3 flops
instead of 2 n^3, by ``trtri`` and a blocked solve (gemm) on one matrix, or one compiled loop
over a stack. On the CPU, one matrix is factored by ``getrf`` into Fortran-ordered factors,
a stack of small matrices (up to 128) by one compiled loop (LAPACK's pivots), bigger ones by
``getrf`` on each matrix, into C-ordered factors. ``lu`` keeps its last factorisations of
big operands for one more call on the very same, unchanged array (``slogdet(a)`` and
``solve(a, b)`` then factor ``a`` once; see ``_lu_memo``). ``lu_pivots_to_permutation`` turns
LAPACK's row swaps into the permutation (as JAX's; for ``functx.scipy.linalg.lu_solve``),
with no derivative.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import scipy.linalg

from functx.backends import to_numpy
from functx.errors import ShapeError
from functx.ir import AbstractArray
from functx.primitives import _lu_kernels
from functx.primitives import _lu_lapack as _lapack
from functx.primitives import _matrix as _m
from functx.primitives import elementwise as _ew
from functx.primitives import indexing as _ix
from functx.primitives import shape as _shape
from functx.primitives._batching import add_tangents
from functx.primitives._util import shape_of
from functx.primitives.cuda import decompositions as _cuda
from functx.registry import Primitive
from functx.tracing import bind

# -- cholesky ----------------------------------------------------------------------------------

cholesky_p = Primitive("cholesky")


@cholesky_p.def_abstract_eval
def _cholesky_aval(a: AbstractArray) -> AbstractArray:
    _m.check_matrix("cholesky", a)
    return AbstractArray(tuple(a.shape), np.dtype(a.dtype), False)


def _cholesky_impl(xp, a):
    _m.check_array_dtype("cholesky", a)
    if a.size == 0:
        return xp.zeros(a.shape, a.dtype)
    try:
        return xp.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        # One matrix of the batch is not positive definite: NaNs for it, as JAX.
        flat = a.reshape((-1,) + a.shape[-2:])
        out = np.full(flat.shape, np.nan, a.dtype)
        for i, m in enumerate(flat):
            try:
                out[i] = np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                pass
        return xp.asarray(out.reshape(a.shape))


cholesky_p.def_impl(_cholesky_impl)
cholesky_p.def_impl(_m.checked("cholesky", _cuda.cholesky), backend="cuda")


def _phi(x: Any) -> Any:
    """The lower triangle of each matrix with its diagonal halved."""
    n = shape_of(x)[-1]
    return _ew.mul(x, _half_diagonal_tri(x, n))


def _half_diagonal_tri(like: Any, n: int) -> Any:
    # made by the operand's array module: on a GPU, two kernels instead of an n x n host
    # array copied over at every call (32 MB for the Cholesky gradient of a 2000-point GP)
    xp = _shape.array_module(like)
    dt = np.dtype(like.dtype)
    return xp.tri(n, dtype=dt) - 0.5 * xp.eye(n, dtype=dt)


@cholesky_p.def_vjp(save_output=True)
def _cholesky_vjp(ct, ins, L):
    # ct_A = L^-T Phi(L^T ct) conj(L)^-1 (the transpose of the JVP below).
    p = _phi(_m.mm(_m.mT(L), ct))
    z = triangular_solve(L, p, left_side=True, lower=True, transpose_a=True)
    return (triangular_solve(L, z, left_side=False, lower=True, conjugate_a=True),)


@cholesky_p.def_jvp
def _cholesky_jvp(tangents, primals, L):
    (da,) = tangents
    if da is None:
        return None
    # dL = L Phi(L^-1 dA L^-H)
    tmp = triangular_solve(L, da, left_side=False, lower=True, transpose_a=True,
                           conjugate_a=True)
    return _m.mm(L, _phi(triangular_solve(L, tmp, left_side=True, lower=True)))


cholesky_p.def_batch(_m.matrix_batch_rule(cholesky_p))


def cholesky(a: Any) -> Any:
    """The lower Cholesky factor of each Hermitian positive-definite matrix of ``a``.

    Args:
        a: ``(..., n, n)`` float32/64 or complex64/128; only its lower triangle is read.

    Returns:
        ``L`` (lower triangular, zeros above the diagonal) with ``a = L @ L^H``; NaNs for a
        matrix that is not positive definite.

    Raises:
        ShapeError, DTypeError: ``a`` is not a stack of square matrices of a LAPACK dtype.

    Example:
        >>> cholesky(np.array([[4.0, 2.0], [2.0, 5.0]]))   # [[2, 0], [1, 2]]
    """
    return bind(cholesky_p, a)


# -- triangular_solve --------------------------------------------------------------------------

triangular_solve_p = Primitive("triangular_solve")


@triangular_solve_p.def_abstract_eval
def _trsolve_aval(a: AbstractArray, b: AbstractArray, *, left_side: bool, lower: bool,
                  transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> AbstractArray:
    _m.check_matrix("triangular_solve", a, what="matrix a")
    _m.check_matrix("triangular_solve", b, square=False, what="right-hand side b")
    if np.dtype(a.dtype) != np.dtype(b.dtype):
        raise ShapeError(f"triangular_solve needs a and b of one dtype but got {a} and {b}; "
                         "convert one of them (functx.numpy.linalg promotes).")
    n = a.shape[-1]
    axis = -2 if left_side else -1
    if a.ndim != b.ndim or tuple(a.shape[:-2]) != tuple(b.shape[:-2]) or b.shape[axis] != n:
        side = "rows" if left_side else "columns"
        raise ShapeError(f"triangular_solve with left_side={left_side} of a {a} and b {b} "
                         f"needs b with {n} {side} and the same leading (batch) axes as a; "
                         "broadcast them first.")
    return AbstractArray(tuple(b.shape), np.dtype(b.dtype), False)


def _trsolve_impl(xp, a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    _m.check_array_dtype("triangular_solve", a)
    if b.size == 0:
        return xp.zeros(b.shape, b.dtype)
    # Everything as a left solve op(a) x = b with op in N, T, C (conjugate transpose), and
    # a conjugate-only op as conj(solve(a, conj(b))). Right: x op(a) = b <=> op(a)^T x^T = b^T.
    t, c = transpose_a, conjugate_a and np.dtype(a.dtype).kind == "c"
    if not left_side:
        b, t = np.swapaxes(b, -1, -2), not t
    if a.ndim > 2 and a.shape[-1] <= _BATCHED_GESV_MAX_N and a.size > a.shape[-1] ** 2:
        x = _batched_solve(a, b, t, c, lower, unit_diagonal)
    else:
        conj_only = c and not t
        rhs = np.conj(b) if conj_only else b
        trans = 0 if not t else (2 if c else 1)
        try:
            x = scipy.linalg.solve_triangular(a, rhs, trans=trans, lower=lower,
                                              unit_diagonal=unit_diagonal, check_finite=False)
        except np.linalg.LinAlgError:  # a zero on the diagonal: infinities, as LAPACK's trsm
            with np.errstate(all="ignore"):
                x = _substitute(a, rhs, trans, lower, unit_diagonal)
        x = np.conj(x) if conj_only else x
    x = x if left_side else np.swapaxes(x, -1, -2)
    return xp.asarray(np.ascontiguousarray(x, dtype=b.dtype))


# Stacks of small triangles: NumPy's batched gesv on the triangle made explicit runs the
# whole stack in one C loop, tens of times faster than SciPy's per-matrix trtrs calls
# (which loop in Python); pivoting on a triangle changes only rounding (gesv is backward
# stable). Large matrices go to trtrs, which exploits the structure.
_BATCHED_GESV_MAX_N = 256


def _batched_solve(a, b, t, c, lower, unit_diagonal):
    n = a.shape[-1]
    m = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        m = m * (1 - np.eye(n, dtype=a.dtype)) + np.eye(n, dtype=a.dtype)
    m = np.swapaxes(m, -1, -2) if t else m
    m = np.conj(m) if c else m
    try:
        return np.linalg.solve(m, b)
    except np.linalg.LinAlgError:  # a zero on the diagonal
        with np.errstate(all="ignore"):
            return _substitute(m, b, 0, lower != t, False)


def _substitute(a, b, trans, lower, unit_diagonal):
    """Forward/back substitution in NumPy (for singular triangles, where SciPy raises)."""
    if trans:
        a = np.swapaxes(np.conj(a) if trans == 2 else a, -1, -2)
        lower = not lower
    n = a.shape[-1]
    x = np.zeros(np.broadcast_shapes(b.shape), np.result_type(a, b))
    order = range(n) if lower else range(n - 1, -1, -1)
    for i in order:
        s = b[..., i, :] - np.einsum("...j,...jk->...k", a[..., i, :], x)
        x[..., i, :] = s if unit_diagonal else s / a[..., i, i, None]
    return x


triangular_solve_p.def_impl(_trsolve_impl)
triangular_solve_p.def_impl(_m.checked("triangular_solve", _cuda.triangular_solve),
                            backend="cuda")


def _op(x: Any, transpose_a: bool, conjugate_a: bool) -> Any:
    x = _m.mT(x) if transpose_a else x
    return _m.conj(x) if conjugate_a else x


def _triangle(x: Any, lower: bool, unit_diagonal: bool) -> Any:
    k = 1 if unit_diagonal else 0
    return _m.tril(x, -k) if lower else _m.triu(x, k)


@triangular_solve_p.def_vjp(save_inputs=(0,), save_output=True, selective=True)
def _trsolve_vjp(ct, ins, x, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal,
                 needs=(True, True)):
    a = ins[0]
    ct_b = triangular_solve(a, ct, left_side=left_side, lower=lower,
                            transpose_a=not transpose_a, conjugate_a=conjugate_a,
                            unit_diagonal=unit_diagonal)
    if not needs[0]:
        return None, ct_b
    # The cotangent of op(a) is -ct_b x^T (left) or -x^T ct_b (right); then op's transpose.
    g = _m.mm(ct_b, _m.mT(x)) if left_side else _m.mm(_m.mT(x), ct_b)
    g = _op(_ew.neg(g), transpose_a, conjugate_a)
    return _triangle(g, lower, unit_diagonal), ct_b


@triangular_solve_p.def_jvp
def _trsolve_jvp(tangents, primals, x, *, left_side, lower, transpose_a, conjugate_a,
                 unit_diagonal):
    (da, db), (a, _) = tangents, primals
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    t_b = None if db is None else triangular_solve(a, db, **params)
    t_a = None
    if da is not None:
        g = _op(_ew.neg(_triangle(da, lower, unit_diagonal)), transpose_a, conjugate_a)
        m, n = shape_of(x)[-2:]
        # whichever order is cheaper, as JAX: both are about a matrix product's cost
        if left_side:
            t_a = (triangular_solve(a, _m.mm(g, x), **params) if m > n
                   else _m.mm(triangular_solve(a, g, **params), x))
        else:
            t_a = (triangular_solve(a, _m.mm(x, g), **params) if m < n
                   else _m.mm(x, triangular_solve(a, g, **params)))
    return add_tangents(t_a, t_b)


triangular_solve_p.def_batch(_m.matrix_batch_rule(triangular_solve_p))


def triangular_solve(a: Any, b: Any, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False) -> Any:
    """Solve a triangular system: ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b``.

    Args:
        a: ``(..., n, n)`` triangular matrices (only the triangle named by ``lower`` is read).
        b: ``(..., n, k)`` (left) or ``(..., k, n)`` (right), with ``a``'s leading axes and
            dtype.
        left_side: which side ``a`` is on (JAX's default: False, the right).
        lower: ``a`` is lower (else upper) triangular.
        transpose_a, conjugate_a: ``op(a)`` is ``a`` transposed and/or conjugated.
        unit_diagonal: take ``a``'s diagonal as ones (it is not read).

    Returns:
        ``x``, shaped like ``b``.

    Raises:
        ShapeError, DTypeError: the operands do not fit together.

    Example:
        >>> triangular_solve(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([[2.0], [2.0]]),
        ...                  left_side=True, lower=True)    # [[1], [1]]
    """
    return bind(triangular_solve_p, a, b, left_side=bool(left_side), lower=bool(lower),
                transpose_a=bool(transpose_a), conjugate_a=bool(conjugate_a),
                unit_diagonal=bool(unit_diagonal))


# -- lu ------------------------------------------------------------------------------------------

lu_p = Primitive("lu", multiple_results=True)
lu_p.none_cts = True  # pivots and permutation get no cotangent


@lu_p.def_abstract_eval
def _lu_aval(a: AbstractArray) -> tuple:
    _m.check_matrix("lu", a, square=False)
    *batch, m, n = a.shape
    i32 = np.dtype(np.int32)
    return (AbstractArray(tuple(a.shape), np.dtype(a.dtype), False),
            AbstractArray(tuple(batch) + (min(m, n),), i32, False),
            AbstractArray(tuple(batch) + (m,), i32, False))


def pivots_to_permutation(xp: Any, pivots: Any, m: int) -> Any:
    """The permutation (int32, ``(..., m)``) that applies LAPACK's row swaps ``pivots``
    (0-based) in order: row ``i`` swapped with row ``pivots[..., i]``."""
    batch = pivots.shape[:-1]
    perm = xp.broadcast_to(xp.arange(m, dtype=np.int32), batch + (m,)).copy()
    flat, piv = perm.reshape(-1, m), pivots.reshape(-1, pivots.shape[-1])
    kernel = _lu_kernels.compiled("pivots_to_permutation_stack", parallel=False) \
        if xp is np else None
    if kernel is not None:  # one compiled loop (the loop below is one NumPy call per pivot)
        kernel(np.ascontiguousarray(piv), flat)
        return flat.reshape(batch + (m,))
    rows = xp.arange(flat.shape[0])
    for i in range(piv.shape[-1]):
        j = piv[:, i]
        a, b = flat[rows, i].copy(), flat[rows, j].copy()
        flat[rows, i], flat[rows, j] = b, a
    return flat.reshape(batch + (m,))


# Stacks of matrices up to this size are factored by one compiled loop over the stack (the
# batch over the cores; _lu_kernels.getrf_stack), bigger ones by LAPACK's blocked getrf per
# matrix (one thread, CPU time of a stack: the loop 1.8x faster at 64, 1.1x at 128, 1.05x
# slower at 192, 1.3x at 256).
_GETRF_STACK_MAX_N = 128


def _lu_impl(xp, a):
    _m.check_array_dtype("lu", a)
    *batch, m, n = a.shape
    k = min(m, n)
    if a.size == 0:
        return (xp.zeros(a.shape, a.dtype), xp.zeros(tuple(batch) + (k,), np.int32),
                xp.broadcast_to(xp.arange(m, dtype=np.int32), tuple(batch) + (m,)).copy())
    memo = xp is np and a.size >= _LU_MEMO_MIN_SIZE
    if memo:
        hit = _lu_memo_get(a)
        if hit is not None:
            return hit
    if a.ndim > 2 and max(m, n) <= _GETRF_STACK_MAX_N:  # one compiled loop (Numba)
        snap = np.empty(a.shape, a.dtype) if memo else None  # the memo's copy, on the way
        out = _lu_kernels.factor_stack(a, snap)
        if out is not None:
            out = tuple(xp.asarray(v) for v in out)
            if memo:
                _lu_memo_put(a, out, snap)
            return out
    if a.ndim == 2:
        # One matrix: LAPACK's getrf on a Fortran copy, in place; the factors stay in
        # Fortran order (the BLAS solves read either order without a copy).
        lu, piv = _lapack.getrf(a)
    else:  # C-ordered factors, read without a copy by the compiled loops over the stack
        lu, piv = _lapack.getrf_stack(a)
    piv = np.asarray(piv, np.int32)[..., :k]
    out = tuple(xp.asarray(v) for v in (lu.astype(a.dtype, copy=False), piv,
                                        pivots_to_permutation(np, piv, m)))
    if memo:
        _lu_memo_put(a, out)
    return out


# The last factorisations on the CPU, so that two calls on one matrix share one LU:
# `slogdet(a)` and `solve(a, b)` (JAX's jit gets this from common-subexpression
# elimination; eager functx from this memo). An entry is used only for the very same array
# object, whose bits still equal a snapshot taken when it was factored (a writeable input
# may have changed), and only once: a third call factors again, so a loop calling one
# function on one matrix does not skip its factorisations. It dies with the array. Small
# matrices are not worth the snapshot.
_LU_MEMO_MIN_SIZE = 4096
_LU_MEMO_ENTRIES = 2
_lu_memo: list = []  # [(weakref to the operand, snapshot of its bits, outputs)]


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x).reshape(-1)
    return x.view(np.dtype(f"u{min(x.dtype.itemsize, 8)}"))


def _lu_memo_get(a: np.ndarray) -> tuple | None:
    for entry in list(_lu_memo):
        ref, snap, out = entry
        if ref() is a and snap.shape == a.shape and snap.dtype == a.dtype \
                and np.array_equal(_bits(a), _bits(snap)):
            _lu_memo[:] = [e for e in _lu_memo if e is not entry]  # used once
            return out
    return None


def _lu_memo_put(a: np.ndarray, out: tuple, snapshot: np.ndarray | None = None) -> None:
    try:
        entry = (weakref.ref(a, _lu_memo_drop), a.copy() if snapshot is None else snapshot,
                 out)
    except TypeError:  # not weakly referenceable: no memo
        return
    _lu_memo[:] = [entry] + _lu_memo[:_LU_MEMO_ENTRIES - 1]


def _lu_memo_drop(ref: Any) -> None:
    _lu_memo[:] = [e for e in _lu_memo if e[0] is not ref]


lu_p.def_impl(_lu_impl)
lu_p.def_impl(_m.checked("lu", _cuda.lu), backend="cuda")


def lu_factors(lu: Any) -> tuple:
    """``(L, U)`` padded to square (``m x m`` and ``n x n``) from a packed ``lu``: ``L`` unit
    lower triangular, ``U`` upper triangular with ones on the padded part of its diagonal."""
    m, n = shape_of(lu)[-2:]
    k = min(m, n)
    nd = len(shape_of(lu))
    zero = _ew.scalar(lu, 0)
    lk = _m.tril(_shape.slice(lu, (0,) * nd, shape_of(lu)[:-1] + (k,), (1,) * nd), -1)
    L = _ew.add(_shape.pad(lk, zero, [(0, 0, 0)] * (nd - 1) + [(0, m - k, 0)]),
                _m.eye_like(lu, m))
    uk = _m.triu(_shape.slice(lu, (0,) * nd, shape_of(lu)[:-2] + (k, n), (1,) * nd))
    U = _shape.pad(uk, zero, [(0, 0, 0)] * (nd - 2) + [(0, n - k, 0), (0, 0, 0)])
    if n > k:
        U = _ew.add(U, _pad_eye(lu, n, k))
    return L, U


def _pad_eye(like: Any, n: int, k: int) -> Any:
    """``eye(n) - (eye(n) restricted to the first k rows)``: ones at ``(i, i)``, ``i >= k``."""
    e = np.eye(n, dtype=np.dtype(like.dtype))
    e[:k, :k] = 0
    xp = _shape.array_module(like)
    return e if xp is np else xp.asarray(e)


@lu_p.def_vjp(save_output=True)
def _lu_vjp(cts, ins, outs):
    ct = cts[0]
    if ct is None:
        return (None,)
    lu, _, perm = outs
    L, U = lu_factors(lu)
    # transpose of the JVP: ct_la = tril(L^T ct, -1) + triu(ct U^T), then ct_x = L^-T ct_la
    # U^-T, and ct_a = P^T ct_x.
    ct_la = _ew.add(_m.tril(_m.mm(_m.mT(L), ct), -1), _m.triu(_m.mm(ct, _m.mT(U))))
    y = triangular_solve(U, ct_la, left_side=False, lower=False, transpose_a=True)
    z = triangular_solve(L, y, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
    P = _m.permutation_matrix(perm, lu.dtype)
    return (_m.mm(_m.mT(P), z),)


@lu_p.def_jvp
def _lu_jvp(tangents, primals, outs):
    (da,) = tangents
    if da is None:
        return None
    lu, _, perm = outs
    L, U = lu_factors(lu)
    x = _m.mm(_m.permutation_matrix(perm, lu.dtype), da)
    la = triangular_solve(L, x, left_side=True, lower=True, unit_diagonal=True)
    lau = triangular_solve(U, la, left_side=False, lower=False)
    return [_ew.add(_m.mm(L, _m.tril(lau, -1)), _m.mm(_m.triu(lau), U)), None, None]


lu_p.def_batch(_m.matrix_batch_rule(lu_p))


def lu(a: Any) -> tuple:
    """The LU factorisation with partial pivoting of each matrix of ``a``.

    Args:
        a: ``(..., m, n)`` float32/64 or complex64/128.

    Returns:
        ``(lu, pivots, permutation)``: ``L`` (unit lower, below the diagonal) and ``U``
        (upper, on and above it) packed in ``lu``; LAPACK's row swaps (int32, 0-based); and
        the permutation (int32) with ``a[..., permutation, :] == L @ U``.

    Example:
        >>> lu(np.array([[1.0, 2.0], [3.0, 4.0]]))[2]    # array([1, 0], dtype=int32)
    """
    return tuple(bind(lu_p, a))


# -- lu_pivots_to_permutation -------------------------------------------------------------------

lu_pivots_to_permutation_p = Primitive("lu_pivots_to_permutation")


@lu_pivots_to_permutation_p.def_abstract_eval
def _p2p_aval(pivots: AbstractArray, *, permutation_size: int) -> AbstractArray:
    if np.dtype(pivots.dtype).kind not in "iu" or pivots.ndim < 1:
        raise ShapeError(f"lu_pivots_to_permutation needs integer pivots of rank >= 1 (shape "
                         f"(..., k)) but got {pivots}.")
    if permutation_size < pivots.shape[-1]:
        raise ShapeError(f"lu_pivots_to_permutation: permutation_size {permutation_size} is "
                         f"smaller than the number of pivots {pivots.shape[-1]}.")
    return AbstractArray(tuple(pivots.shape[:-1]) + (permutation_size,), np.dtype(np.int32),
                         False)


lu_pivots_to_permutation_p.def_impl(  # the swaps are applied in order: a loop on the host
    lambda xp, pivots, *, permutation_size: xp.asarray(pivots_to_permutation(
        np, np.asarray(pivots) if xp is np else to_numpy(pivots), permutation_size)))
lu_pivots_to_permutation_p.def_zero_vjp()
lu_pivots_to_permutation_p.def_batch(_m.matrix_batch_rule(lu_pivots_to_permutation_p))


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Any:
    """The permutation (int32, ``(..., permutation_size)``) of LAPACK's row swaps ``pivots``
    (0-based, ``(..., k)``), as ``jax.lax.linalg.lu_pivots_to_permutation``."""
    return bind(lu_pivots_to_permutation_p, pivots, permutation_size=int(permutation_size))


def _flat_rows(perm: Any, m: int) -> Any:
    """Row indices into ``x`` reshaped to ``(B * m, k)`` for a batch of permutations."""
    shape = shape_of(perm)
    if len(shape) == 1:
        return perm
    b = int(np.prod(shape[:-1]))
    offsets = (np.arange(b, dtype=np.dtype(perm.dtype)) * m).reshape(shape[:-1] + (1,))
    xp = _shape.array_module(perm)
    offsets = offsets if xp is np else xp.asarray(offsets)
    return _shape.reshape(_ew.add(perm, offsets), (b * m,))


def permute_rows(perm: Any, x: Any, *, inverse: bool = False) -> Any:
    """``x[..., perm, :]`` (or, with ``inverse``, ``y`` with ``y[..., perm, :] = x``) for
    ``x`` of shape ``(..., m, k)`` and permutations ``(..., m)`` (a gather or scatter of
    rows: no permutation matrix)."""
    shape = shape_of(x)
    m, k = shape[-2:]
    idx = _flat_rows(perm, m)
    flat = x if len(shape) == 2 else _shape.reshape(x, (int(np.prod(shape[:-1])), k))
    if inverse:
        zeros = _shape.constant(flat, 0, shape_of(flat), flat.dtype)
        out = _ix.scatter(zeros, idx, flat, axis=0)
    else:
        out = _ix.gather(flat, idx, axis=0)
    return out if len(shape) == 2 else _shape.reshape(out, shape)


# -- lu_solve -----------------------------------------------------------------------------------

lu_solve_p = Primitive("lu_solve")


@lu_solve_p.def_abstract_eval
def _lu_solve_aval(lu: AbstractArray, perm: AbstractArray, b: AbstractArray, *,
                   trans: int) -> AbstractArray:
    _m.check_matrix("lu_solve", lu, what="factors lu")
    _m.check_matrix("lu_solve", b, square=False, what="right-hand side b")
    n = lu.shape[-1]
    batch = tuple(lu.shape[:-2])
    if (np.dtype(perm.dtype).kind not in "iu" or tuple(perm.shape) != batch + (n,)
            or tuple(b.shape[:-2]) != batch or b.shape[-2] != n):
        raise ShapeError(f"lu_solve of factors {lu} needs an integer permutation of shape "
                         f"{batch + (n,)} and b of shape {batch + (n, 'k')}, but got {perm} "
                         "and {b}; broadcast the leading axes first.".replace("{b}", str(b)))
    if np.dtype(lu.dtype) != np.dtype(b.dtype):
        raise ShapeError(f"lu_solve needs lu and b of one dtype but got {lu} and {b}; convert "
                         "one of them (functx.numpy.linalg promotes).")
    if trans not in (0, 1, 2):
        raise ShapeError(f"lu_solve: trans must be 0, 1 or 2, not {trans!r}.")
    return AbstractArray(tuple(b.shape), np.dtype(b.dtype), False)


# Stacks of matrices up to this size go through one compiled loop over the whole stack (the
# batch over the cores); a single matrix, or bigger ones, through BLAS trsm per matrix.
_LU_SOLVE_STACK_MAX_N = 128


def _lu_solve_impl(xp, lu, perm, b, *, trans):
    _m.check_array_dtype("lu_solve", lu)
    if b.size == 0:
        return xp.zeros(b.shape, b.dtype)
    *batch, n, k = b.shape
    count = int(np.prod(batch)) if batch else 1
    conj = trans == 2 and np.dtype(b.dtype).kind == "c"
    flu, fperm = lu.reshape((count, n, n)), perm.reshape((count, n))
    fb = b.reshape((count, n, k))
    kernel = (_lu_kernels.compiled("lu_solve_stack", parallel=count * n * n * k > 1 << 16)
              if count > 1 and n <= _LU_SOLVE_STACK_MAX_N else None)
    if kernel is not None:
        out = np.empty(fb.shape, b.dtype)
        kernel(np.ascontiguousarray(flu), np.ascontiguousarray(fperm, np.int64),
               np.ascontiguousarray(fb), out, 1 if trans else 0, conj)
    elif count > 1 and n <= _LU_SOLVE_STACK_MAX_N:  # no Numba: batched NumPy (two solves)
        out = _lu_solve_numpy(flu, fperm, fb, trans)
    else:  # BLAS per matrix (a loop only over big matrices, where it costs nothing)
        out = np.empty(fb.shape, b.dtype)
        for i in range(count):
            out[i] = _lapack.lu_solve_blas(flu[i], fperm[i], fb[i], trans)
    return xp.asarray(out.reshape(b.shape))


def _lu_solve_numpy(lu, perm, b, trans):
    """The batched NumPy path (without Numba): a row gather and two triangular solves."""
    params = dict(left_side=True, transpose_a=trans > 0, conjugate_a=trans == 2)
    if trans == 0:
        y = np.take_along_axis(b, perm[..., None].astype(np.intp), axis=-2)
        y = _trsolve_impl(np, lu, y, lower=True, unit_diagonal=True, **params)
        return _trsolve_impl(np, lu, y, lower=False, unit_diagonal=False, **params)
    y = _trsolve_impl(np, lu, b, lower=False, unit_diagonal=False, **params)
    y = _trsolve_impl(np, lu, y, lower=True, unit_diagonal=True, **params)
    out = np.empty_like(y)
    np.put_along_axis(out, perm[..., None].astype(np.intp), y, axis=-2)
    return out


lu_solve_p.def_impl(_lu_solve_impl)
lu_solve_p.def_impl(_m.checked("lu_solve", _cuda.lu_solve), backend="cuda")


def _lu_solve_composite(lu: Any, perm: Any, b: Any, *, trans: int) -> Any:
    """What ``lu_solve`` computes, in functx operations (a row gather or scatter and two
    ``triangular_solve``): its derivatives are this composite's."""
    if trans == 0:
        y = triangular_solve(lu, permute_rows(perm, b), left_side=True, lower=True,
                             unit_diagonal=True)
        return triangular_solve(lu, y, left_side=True, lower=False)
    conj = trans == 2
    y = triangular_solve(lu, b, left_side=True, lower=False, transpose_a=True, conjugate_a=conj)
    y = triangular_solve(lu, y, left_side=True, lower=True, transpose_a=True, conjugate_a=conj,
                         unit_diagonal=True)
    return permute_rows(perm, y, inverse=True)


lu_solve_p.def_composite_rules(_lu_solve_composite, argnums=(0, 2))
lu_solve_p.def_batch(_m.matrix_batch_rule(lu_solve_p))


def lu_solve(lu: Any, permutation: Any, b: Any, *, trans: int = 0) -> Any:
    """Solve ``a x = b`` (``trans=0``), ``a^T x = b`` (1) or ``a^H x = b`` (2) for square
    ``a`` from its :func:`lu` factors, in one primitive.

    Args:
        lu: the packed factors ``(..., n, n)`` (from :func:`lu`).
        permutation: ``(..., n)`` integer rows (``a[..., permutation, :] = L @ U``).
        b: ``(..., n, k)`` with ``lu``'s leading axes and dtype.
        trans: which system (0, 1 or 2).

    Returns:
        ``x``, shaped like ``b``. Stacks of small matrices are solved by one compiled loop
        over the stack (Numba, the batch over the cores), a single or big matrix by two BLAS
        ``trsm`` calls. Derivatives (in ``lu`` and ``b``) are those of the row permutation
        and two :func:`triangular_solve` calls it stands for.

    Raises:
        ShapeError: the operands do not fit together.

    Example:
        >>> f, _, p = lu(np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> lu_solve(f, p, np.array([[5.0], [6.0]]))    # [[-4], [4.5]]
    """
    return bind(lu_solve_p, lu, permutation, b, trans=int(trans))


# -- lu_inverse ---------------------------------------------------------------------------------

lu_inverse_p = Primitive("lu_inverse")


@lu_inverse_p.def_abstract_eval
def _lu_inverse_aval(lu: AbstractArray, perm: AbstractArray, *, trans: int) -> AbstractArray:
    return _lu_solve_aval(lu, perm, lu, trans=trans)


def _lu_inverse_impl(xp, lu, perm, *, trans):
    _m.check_array_dtype("lu_inverse", lu)
    *batch, n, _ = lu.shape
    count = int(np.prod(batch)) if batch else 1
    if lu.size == 0 or (count > 1 and n <= _LU_SOLVE_STACK_MAX_N):
        kernel = (_lu_kernels.compiled("lu_inverse_stack", parallel=count * n ** 3 > 1 << 18)
                  if lu.size else None)
        if kernel is None:
            return _lu_solve_impl(xp, lu, perm, _identities(np, lu), trans=trans)
        out = np.empty((count, n, n), lu.dtype)
        kernel(np.ascontiguousarray(lu).reshape((count, n, n)),
               np.ascontiguousarray(perm, np.int64).reshape((count, n)), out,
               1 if trans else 0, trans == 2 and np.dtype(lu.dtype).kind == "c")
        return xp.asarray(out.reshape(lu.shape))
    if count == 1:  # (no stack: a^-T of a Fortran lu comes C-ordered, uncopied)
        return xp.asarray(_lapack.lu_inverse_blas(lu.reshape((n, n)), perm.reshape((n,)),
                                                  trans).reshape(lu.shape))
    flu, fperm = lu.reshape((count, n, n)), perm.reshape((count, n))
    out = np.stack([_lapack.lu_inverse_blas(flu[i], fperm[i], trans) for i in range(count)])
    return xp.asarray(out.reshape(lu.shape))


def _identities(xp: Any, like: Any) -> Any:
    """Identity matrices shaped and typed like the stack ``like`` (a new array)."""
    return xp.broadcast_to(xp.eye(like.shape[-1], dtype=like.dtype), like.shape).copy()


lu_inverse_p.def_impl(_lu_inverse_impl)
lu_inverse_p.def_impl(_m.checked(  # CUDA: lu_solve with the identity
    "lu_inverse", lambda xp, lu, perm, *, trans: _cuda.lu_solve(xp, lu, perm,
                                                                _identities(xp, lu), trans=trans)),
    backend="cuda")


def _lu_inverse_composite(lu: Any, perm: Any, *, trans: int) -> Any:
    """What ``lu_inverse`` computes: ``lu_solve`` with the identity (its derivatives)."""
    shape = shape_of(lu)
    eye = _shape.broadcast_in_dim(_m.eye_like(lu, shape[-1]), shape,
                                  (len(shape) - 2, len(shape) - 1))
    return lu_solve(lu, perm, eye, trans=trans)


lu_inverse_p.def_composite_rules(_lu_inverse_composite, argnums=(0,))
lu_inverse_p.def_batch(_m.matrix_batch_rule(lu_inverse_p))


def lu_inverse(lu: Any, permutation: Any, *, trans: int = 0) -> Any:
    """``a^-1`` (``trans=0``), ``a^-T`` (1) or ``a^-H`` (2) of square ``a`` from its
    :func:`lu` factors, in one primitive (``lu_solve`` with the identity, in 4/3 n^3 flops
    instead of 2 n^3: LAPACK's ``getri`` order, by ``trtri`` and one ``trsm``, or one
    compiled loop over a stack of small matrices).

    Args:
        lu: the packed factors ``(..., n, n)`` (from :func:`lu`).
        permutation: ``(..., n)`` integer rows (``a[..., permutation, :] = L @ U``).
        trans: which inverse (0, 1 or 2).

    Returns:
        An array shaped like ``lu``. Derivatives are those of :func:`lu_solve` with the
        identity.

    Example:
        >>> f, _, p = lu(np.array([[2.0, 0.0], [0.0, 4.0]]))
        >>> lu_inverse(f, p)    # [[0.5, 0], [0, 0.25]]
    """
    return bind(lu_inverse_p, lu, permutation, trans=int(trans))
