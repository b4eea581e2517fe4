"""functx.numpy.linalg: ``jax.numpy.linalg``'s functions over functx's decomposition primitives.

Names, signatures and derivative conventions follow JAX (which follows NumPy 2 and the Array
API): every function takes stacks of matrices ``(..., m, n)`` and broadcasts leading axes;
results of several arrays are named tuples (``EighResult``, ``SVDResult``, ``QRResult``,
``SlogdetResult``). Gradients use JAX's complex convention (docs/complex.md).

How each is computed (the primitives are in functx/primitives/decompositions.py and
eigen.py):

* ``solve``, ``inv``: LU (``lu`` + two ``triangular_solve``), with a custom VJP reusing the
  factorisation: ``ct_b = solve(a^T, ct)``, ``ct_a = -ct_b x^T`` (JAX's
  ``custom_linear_solve``), so the backward pass costs two triangular solves, not an LU
  derivative. ``det`` and ``slogdet``: LU as well, with the gradient ``a^-T`` (times
  ``det``) from the same factors, by the ``lu_inverse`` primitive (LAPACK's ``getri``
  order, 4/3 n^3 flops; JAX's ``slogdet`` JVP ``Re tr(a^-1 da)``, with the phase of a
  complex sign). A singular ``a`` gives ``logabsdet = -inf`` and an infinite gradient.
  On the CPU, ``slogdet(a)`` and ``solve(a, b)`` (or ``inv``, ``det``) on the same unchanged
  array share one factorisation (``lu``'s memo), as JAX's ``jit`` shares it by eliminating
  the common subexpression; the solves are one ``lu_solve`` primitive each.
* ``cholesky`` and ``eigh``/``eigvalsh`` symmetrise their input ``(a + a^H) / 2`` first
  (JAX's ``symmetrize_input=True``), so their gradients are Hermitian.
* ``svd``, ``qr``, ``eig``: the primitives (``eig`` on the CPU only); ``pinv``, ``lstsq``,
  ``matrix_rank``, ``cond`` and the spectral/nuclear norms from the SVD.
* The rest (``norm``, ``trace``, ``cross``, ...) are functx.numpy compositions.
"""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any, NamedTuple, Sequence

import numpy as np

import functx.numpy as fnp
from functx.errors import FunctxError, ShapeError
from functx.primitives import _matrix as _m
from functx.primitives import decompositions as _dec
from functx.primitives import eigen as _eig
from functx.transforms.custom import custom_vjp

__all__ = ["cholesky", "qr", "svd", "svdvals", "eigh", "eigvalsh", "eig", "eigvals", "solve",
           "inv", "det", "slogdet", "lstsq", "pinv", "matrix_power", "matrix_rank", "norm",
           "vector_norm", "matrix_norm", "cond", "multi_dot", "tensorsolve", "tensorinv",
           "cross", "outer", "trace", "diagonal", "matmul", "vecdot", "matrix_transpose",
           "matvec", "vecmat",
           "tensordot", "EighResult", "SVDResult", "QRResult", "SlogdetResult"]


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


# -- operand checks ------------------------------------------------------------------------------

def _inexact(name: str, a: Any) -> Any:
    """``a`` as an array of a LAPACK dtype (integers and bools become float64, float16
    becomes float32 as jnp's promotion does; NumPy's linalg refuses float16)."""
    a = fnp.asarray(a)
    dt = np.dtype(a.dtype)
    if dt.kind in "biu":
        return a.astype(np.float64)
    if dt.kind == "f" and dt.itemsize < 4 or dt.name == "bfloat16":
        return a.astype(np.float32)
    if dt not in _m.LINALG_DTYPES:
        raise FunctxError(f"functx.numpy.linalg.{name} cannot compute in {dt}; convert the "
                          "input to float32, float64, complex64 or complex128.")
    return a


def _matrices(name: str, a: Any, *, square: bool = True) -> Any:
    a = _inexact(name, a)
    if a.ndim < 2:
        raise ShapeError(f"functx.numpy.linalg.{name} needs an array of at least 2 "
                         f"dimensions (a stack of matrices), but got shape {tuple(a.shape)}.")
    if square and a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"functx.numpy.linalg.{name} needs square matrices, but the last two "
                         f"axes of the input have sizes {a.shape[-2]} and {a.shape[-1]} "
                         f"(shape {tuple(a.shape)}).")
    return a


def matrix_transpose(x: Any, /) -> Any:
    """The transpose of each matrix (the last two axes swapped), as ``jnp.linalg``."""
    x = fnp.asarray(x)
    if x.ndim < 2:
        raise ShapeError("functx.numpy.linalg.matrix_transpose needs an array of at least 2 "
                         f"dimensions, but got shape {tuple(x.shape)}.")
    return fnp.swapaxes(x, -1, -2)


def _H(x: Any) -> Any:
    return fnp.conj(fnp.swapaxes(x, -1, -2))


def _symmetrize(a: Any) -> Any:
    return (a + _H(a)) / 2


def _eye_like(a: Any, n: int) -> Any:
    return fnp.broadcast_to(fnp.eye(n, dtype=a.dtype, like=a), tuple(a.shape[:-2]) + (n, n))


# -- decompositions ------------------------------------------------------------------------------

def cholesky(a: Any, *, upper: bool = False, symmetrize_input: bool = True) -> Any:
    """The Cholesky factor of each Hermitian positive-definite matrix of ``a``.

    Args:
        a: ``(..., n, n)``.
        upper: return the upper factor ``U = L^H`` (``a = U^H U``) instead of ``L``.
        symmetrize_input: use ``(a + a^H) / 2`` (JAX's default), so the gradient is Hermitian.

    Returns:
        The factor; NaNs for a matrix that is not positive definite (as JAX).

    Raises:
        ShapeError: ``a`` is not a stack of square matrices.

    Example:
        >>> fnp.linalg.cholesky(np.array([[4.0, 2.0], [2.0, 5.0]]))   # [[2, 0], [1, 2]]
    """
    a = _matrices("cholesky", a)
    L = _dec.cholesky(_symmetrize(a) if symmetrize_input else a)
    return _H(L) if upper else L


def qr(a: Any, mode: str = "reduced") -> Any:
    """The QR decomposition of each matrix: ``QRResult(Q, R)``, or ``R`` for ``mode="r"``.

    Args:
        a: ``(..., m, n)``.
        mode: ``"reduced"`` (``Q`` is ``m x k``), ``"complete"`` (``m x m``) or ``"r"``.

    Example:
        >>> q, r = fnp.linalg.qr(np.eye(3))
    """
    a = _matrices("qr", a, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise FunctxError(f"functx.numpy.linalg.qr: mode must be 'reduced', 'complete' or 'r', "
                          f"not {mode!r} (NumPy's 'raw' is not supported, as in JAX).")
    q, r = _eig.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: Any = None) -> Any:
    """The singular value decomposition: ``SVDResult(U, S, Vh)`` with ``a = U diag(S) Vh``,
    or ``S`` alone without ``compute_uv`` (descending).

    The derivative with ``full_matrices=True`` of a non-square matrix is not defined (as in
    JAX): pass ``full_matrices=False`` to differentiate.

    Example:
        >>> fnp.linalg.svd(np.diag([1.0, 3.0]), compute_uv=False)   # [3, 1]
    """
    a = _matrices("svd", a, square=False)
    if subset_by_index is not None:
        raise FunctxError("functx.numpy.linalg.svd: subset_by_index is not supported; slice "
                          "the result instead.")
    del hermitian  # the general algorithm is right for Hermitian input too
    if not compute_uv:
        return _eig.svd(a, full_matrices=False, compute_uv=False)[0]
    s, u, vh = _eig.svd(a, full_matrices=full_matrices, compute_uv=True)
    return SVDResult(u, s, vh)


def svdvals(x: Any, /) -> Any:
    """The singular values of each matrix, descending."""
    return svd(x, compute_uv=False)


def eigh(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of each Hermitian matrix.

    Args:
        a: ``(..., n, n)``.
        UPLO: ``"L"`` (default) or ``"U"``: the triangle read when not symmetrising.
        symmetrize_input: use ``(a + a^H) / 2`` (JAX's default).

    Returns:
        ``EighResult(eigenvalues, eigenvectors)``. Derivatives of eigenvectors are infinite
        where eigenvalues repeat (functx/primitives/eigen.py).

    Example:
        >>> fnp.linalg.eigh(np.diag([2.0, 1.0])).eigenvalues   # [1, 2]
    """
    a = _matrices("eigh", a)
    if UPLO not in (None, "L", "U"):
        raise FunctxError(f"functx.numpy.linalg.eigh: UPLO must be 'L' or 'U', not {UPLO!r}.")
    w, v = _eig.eigh(_symmetrize(a) if symmetrize_input else a, lower=UPLO != "U")
    return EighResult(w, v)


def eigvalsh(a: Any, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Any:
    """The eigenvalues (ascending) of each Hermitian matrix."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def eig(a: Any) -> tuple:
    """Eigenvalues and right eigenvectors (complex) of each square matrix (CPU only).

    Only the eigenvalues are differentiable (as JAX's default).

    Example:
        >>> w, v = fnp.linalg.eig(np.array([[0.0, 1.0], [-1.0, 0.0]]))   # w = [1j, -1j]
    """
    return _eig.eig(_matrices("eig", a))


def eigvals(a: Any) -> Any:
    """The eigenvalues (complex) of each square matrix (CPU only)."""
    return eig(a)[0]


# -- solving (LU) --------------------------------------------------------------------------------

def _lu_solve_fwd(a: Any, b: Any) -> tuple:
    lu, _, perm = _dec.lu(a)
    x = _dec.lu_solve(lu, perm, b)
    return x, (lu, perm, x)


def _lu_solve_bwd(res: tuple, ct: Any) -> tuple:
    lu, perm, x = res
    ct_b = _dec.lu_solve(lu, perm, ct, trans=1)
    x_t = fnp.swapaxes(x, -1, -2)
    if x.shape[-1] <= x.shape[-2]:  # negate the smaller operand (the same bits)
        return fnp.matmul(-ct_b, x_t), ct_b
    return -fnp.matmul(ct_b, x_t), ct_b


@custom_vjp
def _solve_matrices(a: Any, b: Any) -> Any:
    return _lu_solve_fwd(a, b)[0]


_solve_matrices.defvjp(_lu_solve_fwd, _lu_solve_bwd)


def _common_dtype(*xs: Any) -> list:
    dt = fnp.result_type(*xs)
    return [x.astype(dt) if x.dtype != dt else x for x in xs]


def solve(a: Any, b: Any) -> Any:
    """Solve ``a x = b`` for each square ``a``.

    Args:
        a: ``(..., n, n)``.
        b: ``(n,)`` (one right-hand side) or ``(..., n, k)``, broadcast against ``a``'s
            leading axes (NumPy 2's rule: ``b`` is a vector only if it is 1-D).

    Returns:
        ``x`` shaped like the broadcast ``b``. A singular ``a`` gives infinities or NaNs.

    Raises:
        ShapeError: the shapes do not fit.

    Example:
        >>> fnp.linalg.solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 2.0]))  # [1, .5]
    """
    a = _matrices("solve", a)
    b = _inexact("solve", b)
    a, b = _common_dtype(a, b)
    n = a.shape[-1]
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    if b.ndim < 2 or b.shape[-2] != n:
        raise ShapeError(f"functx.numpy.linalg.solve: a of shape {tuple(a.shape)} needs b of "
                         f"shape ({n},) or (..., {n}, k), but got {tuple(fnp.shape(b))}.")
    batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    a = fnp.broadcast_to(a, batch + (n, n))
    b = fnp.broadcast_to(b, batch + tuple(b.shape[-2:]))
    x = _solve_matrices(a, b)
    return x[..., 0] if vector else x


def inv(a: Any) -> Any:
    """The inverse of each square matrix (by LU; infinities/NaNs where singular)."""
    a = _matrices("inv", a)
    return _solve_matrices(a, _eye_like(a, a.shape[-1]))


def _slogdet_parts(a: Any) -> tuple:
    lu, piv, perm = _dec.lu(a)
    # One matrix's factors are Fortran-ordered on the CPU (functx/primitives/decompositions.py):
    # the diagonal of their transpose (the same numbers) is then read without a copy.
    d = fnp.diagonal(fnp.swapaxes(lu, -1, -2) if lu.ndim == 2 else lu, axis1=-2, axis2=-1)
    absd = fnp.abs(d)
    logabs = fnp.sum(fnp.log(absd), axis=-1)
    swaps = fnp.sum(piv != fnp.arange(piv.shape[-1], dtype=piv.dtype, like=piv), axis=-1)
    parity = (1 - 2 * (swaps % 2)).astype(a.dtype)
    if fnp.iscomplexobj(a):
        phase = fnp.prod(d / absd.astype(d.dtype), axis=-1)
    else:
        phase = fnp.prod(fnp.sign(d), axis=-1)
    return (parity * phase, logabs), (lu, perm)


def _slogdet_fwd(a: Any) -> tuple:
    out, (lu, perm) = _slogdet_parts(a)
    return out, (lu, perm, out[0])


def _slogdet_bwd(res: tuple, cts: tuple) -> tuple:
    lu, perm, sign = res
    ct_sign, ct_log = cts
    inv_t = _dec.lu_inverse(lu, perm, trans=1)  # a^-T
    if not fnp.iscomplexobj(lu):
        return (ct_log[..., None, None] * inv_t,)
    # d logabsdet = Re t and d sign = i sign Im t with t = tr(a^-1 da) = sum(a^-T * da):
    # transposed (JAX's convention), ct_t = ct_log - i Re(i sign ct_sign).
    ct_t = ct_log.astype(lu.dtype) - 1j * fnp.real(1j * sign * ct_sign)
    return (ct_t[..., None, None] * inv_t,)


@custom_vjp
def _slogdet(a: Any) -> tuple:
    return _slogdet_parts(a)[0]


_slogdet.defvjp(_slogdet_fwd, _slogdet_bwd)


def slogdet(a: Any, *, method: str | None = None) -> SlogdetResult:
    """``SlogdetResult(sign, logabsdet)`` of each square matrix (by LU).

    ``sign`` is ``±1`` (real) or a unit complex number; ``det = sign * exp(logabsdet)``.
    Singular: ``sign = 0``, ``logabsdet = -inf``.

    Example:
        >>> fnp.linalg.slogdet(np.diag([-2.0, 3.0]))   # (-1.0, log 6)
    """
    if method not in (None, "lu"):
        raise FunctxError(f"functx.numpy.linalg.slogdet: method must be 'lu' (or None), not "
                          f"{method!r}.")
    a = _matrices("slogdet", a)
    sign, logabs = _slogdet(a)
    return SlogdetResult(sign, logabs)


def det(a: Any) -> Any:
    """The determinant of each square matrix, ``sign * exp(logabsdet)`` (by LU)."""
    sign, logabs = slogdet(a)
    return sign * fnp.exp(logabs).astype(sign.dtype)


# -- from the SVD --------------------------------------------------------------------------------

def _default_rtol(a: Any) -> float:
    return float(np.finfo(_m.real_dtype(a.dtype)).eps) * builtins.max(a.shape[-2:])


def pinv(a: Any, rtol: Any = None, hermitian: bool = False, *, rcond: Any = None) -> Any:
    """The Moore-Penrose pseudo-inverse of each matrix (from the SVD; singular values below
    ``rtol * max(s)`` are dropped). Its gradient is the SVD's, so repeated singular values
    make it infinite."""
    a = _matrices("pinv", a, square=False)
    rtol = rcond if rtol is None else rtol
    if a.shape[-1] == 0 or a.shape[-2] == 0:
        return fnp.zeros(tuple(a.shape[:-2]) + (a.shape[-1], a.shape[-2]), a.dtype)
    u, s, vh = svd(a, full_matrices=False)
    tol = (_default_rtol(a) if rtol is None else fnp.asarray(rtol)[..., None]) * s[..., :1]
    keep = s > tol
    s_inv = fnp.where(keep, 1 / fnp.where(keep, s, 1), 0).astype(a.dtype)
    return fnp.matmul(_H(vh) * s_inv[..., None, :], _H(u))


def matrix_rank(M: Any, rtol: Any = None, *, tol: Any = None) -> Any:
    """The number of singular values above ``rtol * max(s)`` (or above ``tol``)."""
    M = _inexact("matrix_rank", M)
    if M.ndim < 2:
        return fnp.any(M != 0).astype(np.int32)
    s = svd(M, compute_uv=False)
    if tol is not None:
        cut = fnp.asarray(tol)[..., None] if fnp.ndim(tol) else tol
    else:
        r = _default_rtol(M) if rtol is None else fnp.asarray(rtol)[..., None]
        cut = r * fnp.max(s, axis=-1, keepdims=True)
    return fnp.sum(s > cut, axis=-1).astype(np.int32)


def lstsq(a: Any, b: Any, rcond: Any = None, *, numpy_resid: bool = False) -> tuple:
    """The least-squares solution of ``a x = b``: ``(x, resid, rank, s)`` as
    ``jnp.linalg.lstsq`` (2-D ``a``; ``b`` 1-D or 2-D), from the SVD."""
    a = _matrices("lstsq", a, square=False)
    b = _inexact("lstsq", b)
    a, b = _common_dtype(a, b)
    if a.ndim != 2 or b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ShapeError(f"functx.numpy.linalg.lstsq needs a 2-D a (m, n) and b of shape (m,) "
                         f"or (m, k), but got {tuple(a.shape)} and {tuple(b.shape)}.")
    vec = b.ndim == 1
    b2 = b[:, None] if vec else b
    m, n = a.shape
    rc = float(np.finfo(_m.real_dtype(a.dtype)).eps) * builtins.max(m, n) if rcond is None \
        else rcond
    u, s, vh = svd(a, full_matrices=False)
    keep = s > rc * (s[0] if s.shape[0] else 0)
    s_inv = fnp.where(keep, 1 / fnp.where(keep, s, 1), 0).astype(a.dtype)
    x = fnp.matmul(_H(vh), s_inv[:, None] * fnp.matmul(_H(u), b2))
    rank = fnp.sum(keep).astype(np.int32)
    r = b2 - fnp.matmul(a, x)
    resid = fnp.sum(fnp.abs(r) ** 2, axis=0)
    if numpy_resid and not (int(rank) == n and m > n):
        resid = fnp.zeros((0,), resid.dtype)
    return (x[:, 0] if vec else x, resid[0] if vec and not numpy_resid else resid, rank, s)


def cond(x: Any, p: Any = None) -> Any:
    """The condition number of each matrix in norm ``p`` (None/2/-2 from the SVD, others as
    ``norm(x, p) * norm(inv(x), p)``)."""
    x = _matrices("cond", x, square=False)
    if p in (None, 2, -2):
        s = svd(x, compute_uv=False)
        r = s[..., 0] / s[..., -1]
        return r if p != -2 else s[..., -1] / s[..., 0]
    x = _matrices("cond", x)
    return norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))


# -- norms ---------------------------------------------------------------------------------------

def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    """The vector ``ord``-norm over ``axis`` (all axes when None) as the Array API's."""
    x = _inexact("vector_norm", x)
    if axis is None:
        out = _vector_norm(fnp.ravel(x), ord, 0)
        return fnp.reshape(out, (1,) * x.ndim) if keepdims else out
    return _vector_norm(x, ord, axis, keepdims)


def _vector_norm(x: Any, ord: Any, axis: Any, keepdims: bool = False) -> Any:
    a = fnp.abs(x)
    if ord is None or ord == 2:
        sq = fnp.real(x * fnp.conj(x)) if fnp.iscomplexobj(x) else x * x
        return fnp.sqrt(fnp.sum(sq, axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return fnp.max(a, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return fnp.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return fnp.sum(x != 0, axis=axis, keepdims=keepdims).astype(a.dtype)
    if ord == 1:
        return fnp.sum(a, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise FunctxError(f"functx.numpy.linalg.norm: ord={ord!r} is a matrix norm, but the "
                          "norm is taken over one axis (a vector norm).")
    p = float(ord)
    return fnp.sum(a ** p, axis=axis, keepdims=keepdims) ** (1.0 / p)


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """The matrix ``ord``-norm of each matrix (the last two axes)."""
    return norm(x, ord, axis=(-2, -1), keepdims=keepdims)


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """The vector or matrix norm, as ``np.linalg.norm`` (every ``ord``: None, ``'fro'``,
    ``'nuc'``, ``±inf``, ``±1``, ``±2``, 0 and other p for vectors).

    Example:
        >>> fnp.linalg.norm(np.array([3.0, 4.0]))   # 5.0
    """
    x = _inexact("norm", x)
    if axis is None:
        if ord is None:
            out = _vector_norm(fnp.ravel(x), None, 0)
            return fnp.reshape(out, (1,) * x.ndim) if keepdims else out
        if x.ndim == 1:
            axis = (0,)
        elif x.ndim == 2:
            axis = (0, 1)
        else:
            raise ShapeError(f"functx.numpy.linalg.norm: ord={ord!r} needs a 1-D or 2-D array "
                             f"or an explicit axis, but got shape {tuple(x.shape)}.")
    axes = (operator.index(axis),) if not isinstance(axis, (tuple, list)) else tuple(axis)
    axes = tuple(a % x.ndim for a in axes)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes[0], keepdims)
    if len(axes) != 2 or axes[0] == axes[1]:
        raise ShapeError(f"functx.numpy.linalg.norm: axis must name one or two distinct axes, "
                         f"not {axis!r}.")
    r, c = axes
    if ord in (None, "fro"):
        sq = fnp.real(x * fnp.conj(x)) if fnp.iscomplexobj(x) else x * x
        return fnp.sqrt(fnp.sum(sq, axis=axes, keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        along, across = (r, c) if ord in (1, -1) else (c, r)
        sums = fnp.sum(fnp.abs(x), axis=along, keepdims=True)
        red = fnp.max if ord in (1, np.inf) else fnp.min
        out = red(sums, axis=across, keepdims=True)
        return out if keepdims else fnp.squeeze(out, axis=axes)
    if ord in (2, -2, "nuc"):
        y = fnp.moveaxis(x, axes, (-2, -1))
        s = svd(y, compute_uv=False)
        out = (fnp.sum(s, axis=-1) if ord == "nuc" else s[..., 0] if ord == 2 else s[..., -1])
        if keepdims:
            out = fnp.expand_dims(fnp.expand_dims(out, builtins.min(axes)), builtins.max(axes))
        return out
    raise FunctxError(f"functx.numpy.linalg.norm: invalid ord={ord!r} for a matrix norm; use "
                      "None, 'fro', 'nuc', 1, -1, 2, -2, inf or -inf.")


# -- products and the rest -----------------------------------------------------------------------

def matrix_power(a: Any, n: int) -> Any:
    """``a`` to the integer power ``n`` (negative: of its inverse), by repeated squaring."""
    a = _matrices("matrix_power", a)
    n = operator.index(n)
    if n == 0:
        return _eye_like(a, a.shape[-1])
    if n < 0:
        a, n = inv(a), -n
    result = None
    z = a
    while n > 0:
        if n & 1:
            result = z if result is None else fnp.matmul(result, z)
        n >>= 1
        if n:
            z = fnp.matmul(z, z)
    return result


def multi_dot(arrays: Sequence[Any], *, precision: Any = None) -> Any:
    """The product of a chain of matrices (first may be 1-D, last may be 1-D), in the order
    that costs fewest multiplications (dynamic programming, as NumPy); ``precision`` as in
    ``fnp.matmul`` (functx/config.py)."""
    arrays = [fnp.asarray(x) for x in arrays]
    if len(arrays) < 2:
        raise FunctxError("functx.numpy.linalg.multi_dot needs at least two arrays.")
    first_vec, last_vec = arrays[0].ndim == 1, arrays[-1].ndim == 1
    if first_vec:
        arrays[0] = arrays[0][None, :]
    if last_vec:
        arrays[-1] = arrays[-1][:, None]
    dims = [x.shape[0] for x in arrays] + [arrays[-1].shape[1]]
    k = len(arrays)
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j] = math.inf
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s

    def chain(i: int, j: int) -> Any:
        if i == j:
            return arrays[i]
        return fnp.matmul(chain(i, split[i][j]), chain(split[i][j] + 1, j),
                          precision=precision)
    out = chain(0, k - 1)
    if first_vec:
        out = out[0]
    if last_vec:
        out = out[..., 0]
    return out


def tensorsolve(a: Any, b: Any, axes: Any = None) -> Any:
    """Solve ``tensordot(a, x, x.ndim) = b`` for ``x`` (as ``np.linalg.tensorsolve``)."""
    a = _inexact("tensorsolve", a)
    b = _inexact("tensorsolve", b)
    if axes is not None:
        allaxes = list(range(a.ndim))
        for k in axes:
            allaxes.remove(k % a.ndim)
            allaxes.append(k % a.ndim)
        a = fnp.transpose(a, allaxes)
    q = a.shape[b.ndim:]
    prod = int(np.prod(q))
    if int(np.prod(a.shape[:b.ndim])) != prod:
        raise ShapeError(f"functx.numpy.linalg.tensorsolve: a of shape {tuple(a.shape)} does "
                         f"not make a square system for b of shape {tuple(b.shape)}.")
    x = solve(fnp.reshape(a, (prod, prod)), fnp.ravel(b))
    return fnp.reshape(x, q)


def tensorinv(a: Any, ind: int = 2) -> Any:
    """The inverse of ``a`` for ``tensordot(., ., ind)`` (as ``np.linalg.tensorinv``)."""
    a = _inexact("tensorinv", a)
    if ind <= 0:
        raise FunctxError(f"functx.numpy.linalg.tensorinv: ind must be positive, not {ind}.")
    out_shape = tuple(a.shape[ind:]) + tuple(a.shape[:ind])
    prod = int(np.prod(a.shape[:ind]))
    if int(np.prod(a.shape[ind:])) != prod:
        raise ShapeError(f"functx.numpy.linalg.tensorinv: the first {ind} axes and the rest "
                         f"of a (shape {tuple(a.shape)}) must have equal sizes.")
    return fnp.reshape(inv(fnp.reshape(a, (prod, prod))), out_shape)


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """The cross product of 3-vectors along ``axis`` (broadcasting the other axes)."""
    x1, x2 = fnp.asarray(x1), fnp.asarray(x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ShapeError(f"functx.numpy.linalg.cross needs vectors of size 3 along axis {axis}, "
                         f"but got shapes {tuple(x1.shape)} and {tuple(x2.shape)}.")
    a = fnp.moveaxis(x1, axis, -1)
    b = fnp.moveaxis(x2, axis, -1)
    c = fnp.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
                   a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
                   a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)
    return fnp.moveaxis(c, -1, axis)


def outer(x1: Any, x2: Any, /) -> Any:
    """The outer product of two 1-D arrays."""
    x1, x2 = fnp.asarray(x1), fnp.asarray(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ShapeError("functx.numpy.linalg.outer needs two 1-D arrays, but got shapes "
                         f"{tuple(x1.shape)} and {tuple(x2.shape)}.")
    return fnp.outer(x1, x2)


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """The sum of each matrix's diagonal ``offset`` (over the last two axes)."""
    return fnp.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """Each matrix's diagonal ``offset`` (over the last two axes)."""
    return fnp.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def matmul(x1: Any, x2: Any, /, *, precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """The matrix product (``fnp.matmul``; ``precision`` as there, see functx/config.py)."""
    return fnp.matmul(x1, x2, dtype=preferred_element_type, precision=precision)


def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    """``fnp.tensordot`` with the Array API's keyword ``axes``."""
    return fnp.tensordot(x1, x2, axes)


def matvec(x1: Any, x2: Any, /) -> Any:
    """The matrix-vector product ``x1 @ x2`` of a ``(..., m, n)`` stack of matrices and a
    ``(..., n)`` stack of vectors (batch axes broadcast), as ``jax.numpy.matvec``.

    Raises:
        ShapeError: ``x1`` is not at least 2-d, ``x2`` not at least 1-d, or their ``n``
            differ.
    """
    x1, x2 = fnp.asarray(x1), fnp.asarray(x2)
    if x1.ndim < 2 or x2.ndim < 1 or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"functx.numpy.matvec needs a (..., m, n) matrix and a (..., n) "
                         f"vector, but got shapes {tuple(x1.shape)} and {tuple(x2.shape)}.")
    return fnp.matmul(x1, x2[..., None])[..., 0]


def vecmat(x1: Any, x2: Any, /) -> Any:
    """The vector-matrix product ``conj(x1) @ x2`` of a ``(..., n)`` stack of vectors and a
    ``(..., n, m)`` stack of matrices (batch axes broadcast), as ``jax.numpy.vecmat``.

    Raises:
        ShapeError: ``x1`` is not at least 1-d, ``x2`` not at least 2-d, or their ``n``
            differ.
    """
    x1, x2 = fnp.asarray(x1), fnp.asarray(x2)
    if x1.ndim < 1 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-2]:
        raise ShapeError(f"functx.numpy.vecmat needs a (..., n) vector and a (..., n, m) "
                         f"matrix, but got shapes {tuple(x1.shape)} and {tuple(x2.shape)}.")
    return fnp.matmul(fnp.conj(x1)[..., None, :], x2)[..., 0, :]


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """``sum(conj(x1) * x2, axis)`` (the Array API's vector dot product, broadcasting)."""
    x1, x2 = fnp.asarray(x1), fnp.asarray(x2)
    if x1.shape[axis] != x2.shape[axis]:
        raise ShapeError(f"functx.numpy.linalg.vecdot needs equal sizes along axis {axis}, but "
                         f"got shapes {tuple(x1.shape)} and {tuple(x2.shape)}.")
    return fnp.sum(fnp.conj(x1) * x2, axis=axis)
