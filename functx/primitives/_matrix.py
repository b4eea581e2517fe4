"""Helpers shared by the matrix decomposition families (``decompositions``, ``eigen``): checks
of matrix operands, and the small matrix operations their rules are written with (batched
products, transposes, triangles, diagonals, constants), all in functx primitives so that
the rules differentiate and batch again.

Every operand is a stack of matrices ``(..., m, n)``; the leading axes are batch axes.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from functx.errors import DTypeError, ShapeError
from functx.ir import AbstractArray
from functx.primitives import complex as _cx
from functx.primitives import elementwise as _ew
from functx.primitives import linalg as _la
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import moveaxis
from functx.primitives._util import ndim_of, shape_of

#: The dtypes LAPACK (NumPy's and SciPy's linalg) computes in.
LINALG_DTYPES = tuple(np.dtype(d) for d in (np.float32, np.float64, np.complex64,
                                            np.complex128))


def check_matrix(name: str, x: AbstractArray, *, square: bool = True,
                 what: str = "operand") -> None:
    """Raise a DTypeError or ShapeError unless ``x`` is a (stack of) float32/64 or
    complex64/128 matrices, square where ``square``."""
    if np.dtype(x.dtype) not in LINALG_DTYPES:
        raise DTypeError(f"{name} needs a float32, float64, complex64 or complex128 {what} "
                         f"but got {x}; LAPACK has no {np.dtype(x.dtype).name} routines. "
                         "Convert it first, e.g. with x.astype(np.float32).")
    if x.ndim < 2:
        raise ShapeError(f"{name} needs a matrix (or a stack of matrices, shape (..., m, n)) "
                         f"as its {what} but got {x} of rank {x.ndim}.")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{name} needs square matrices (shape (..., n, n)) as its {what} but "
                         f"got {x}, whose last two axes are {x.shape[-2]} x {x.shape[-1]}.")


def check_array_dtype(name: str, x: Any) -> None:
    """The eager form of the dtype check (implementations run without the shape rule
    outside the tests): a DTypeError naming ``name`` for a dtype LAPACK lacks."""
    if x.dtype not in LINALG_DTYPES:
        check_matrix(name, AbstractArray(tuple(x.shape), np.dtype(x.dtype), False),
                     square=False)


def checked(name: str, impl: Any) -> Any:
    """The implementation ``impl(xp, a, ...)`` preceded by :func:`check_array_dtype` of its
    first array (for CUDA implementations, which cannot import this module)."""
    def rule(xp: Any, a: Any, *rest: Any, **params: Any) -> Any:
        check_array_dtype(name, a)
        return impl(xp, a, *rest, **params)
    rule.__name__ = getattr(impl, "__name__", name)
    return rule


def real_dtype(dtype: Any) -> np.dtype:
    """float32 for complex64, float64 for complex128, the dtype itself if real."""
    dt = np.dtype(dtype)
    return _cx.real_dtype_of(dt) if dt.kind == "c" else dt


def complex_dtype(dtype: Any) -> np.dtype:
    """complex64 for float32 (and complex64), complex128 for float64 (and complex128)."""
    dt = np.dtype(dtype)
    return dt if dt.kind == "c" else np.dtype(np.complex64 if dt == np.float32 else np.complex128)


def is_complex(x: Any) -> bool:
    return np.dtype(x.dtype).kind == "c"


# -- transposes and products ------------------------------------------------------------------

def mT(x: Any) -> Any:
    """The transpose of each matrix (the last two axes swapped)."""
    n = ndim_of(x)
    return _shape.transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def conj(x: Any) -> Any:
    """The complex conjugate (``x`` itself if real)."""
    return _cx.conj(x) if is_complex(x) else x


def mH(x: Any) -> Any:
    """The conjugate transpose of each matrix."""
    return conj(mT(x))


def mm(a: Any, b: Any) -> Any:
    """The batched matrix product ``a @ b`` of ``(..., m, k)`` and ``(..., k, n)`` with equal
    leading axes (one ``dot_general``)."""
    n = ndim_of(a)
    batch = tuple(range(n - 2))
    return _la.dot_general(a, b, dimension_numbers=(((n - 1,), (n - 2,)), (batch, batch)))


def real(x: Any) -> Any:
    return _cx.real(x) if is_complex(x) else x


def astype(x: Any, dtype: Any) -> Any:
    dt = np.dtype(dtype)
    return x if np.dtype(x.dtype) == dt else _ew.convert_element_type(x, new_dtype=dt)


# -- constants, triangles, diagonals ----------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _host_constant(kind: str, m: int, n: int, k: int, dtype: np.dtype) -> np.ndarray:
    out = (np.tri(m, n, k, dtype=dtype) if kind == "tri" else np.eye(m, n, k, dtype=dtype))
    out.flags.writeable = False
    return out


def constant_matrix(like: Any, kind: str, m: int, n: int, k: int = 0,
                    dtype: Any = None) -> Any:
    """``np.tri(m, n, k)`` (``kind="tri"``) or ``np.eye(m, n, k)`` (``"eye"``) in ``like``'s
    dtype (or ``dtype``), on ``like``'s device."""
    host = _host_constant(kind, m, n, k, np.dtype(dtype if dtype is not None else like.dtype))
    xp = _shape.array_module(like)
    return host if xp is np else xp.asarray(host)


def tril(x: Any, k: int = 0) -> Any:
    """The lower triangle of each matrix (entries above diagonal ``k`` zeroed)."""
    m, n = shape_of(x)[-2:]
    return _ew.mul(x, constant_matrix(x, "tri", m, n, k))


def triu(x: Any, k: int = 0) -> Any:
    """The upper triangle of each matrix (entries below diagonal ``k`` zeroed)."""
    m, n = shape_of(x)[-2:]
    return _ew.sub(x, tril(x, k - 1))


def eye_like(x: Any, n: int, dtype: Any = None) -> Any:
    return constant_matrix(x, "eye", n, n, 0, dtype)


def diagonal(x: Any) -> Any:
    """The main diagonal of each square matrix, shape ``(..., n)``."""
    n = shape_of(x)[-1]
    return _red.reduce_sum(_ew.mul(x, eye_like(x, n)), (ndim_of(x) - 1,))


def diag_embed(d: Any) -> Any:
    """Square matrices with ``d`` (shape ``(..., n)``) on their diagonal."""
    n = shape_of(d)[-1]
    return _ew.mul(_shape.expand_dims(d, (ndim_of(d),)), eye_like(d, n))


def rows(d: Any) -> Any:
    """``d`` of shape ``(..., n)`` as ``(..., 1, n)``: scales the columns when multiplied."""
    return _shape.expand_dims(d, (ndim_of(d) - 1,))


def cols(d: Any) -> Any:
    """``d`` of shape ``(..., n)`` as ``(..., n, 1)``: scales the rows when multiplied."""
    return _shape.expand_dims(d, (ndim_of(d),))


def permutation_matrix(perm: Any, dtype: Any) -> Any:
    """``P`` with ``(P @ x) = x[..., perm, :]``: ``P[..., i, j] = (perm[..., i] == j)``."""
    m = shape_of(perm)[-1]
    xp = _shape.array_module(perm)
    iota = np.arange(m, dtype=np.dtype(perm.dtype))
    iota = iota if xp is np else xp.asarray(iota)
    hit = _ew.eq(cols(perm), iota)
    return _ew.convert_element_type(hit, new_dtype=np.dtype(dtype))


def batch_to_front(args: Sequence[Any], dims: Sequence[int | None]) -> list:
    """Each argument with its batch axis first (unbatched ones broadcast to the batch)."""
    size = next(shape_of(x)[d] for x, d in zip(args, dims) if d is not None)
    out = []
    for x, d in zip(args, dims):
        if d is None:
            shape = tuple(shape_of(x))
            out.append(_shape.broadcast_in_dim(x, (size,) + shape,
                                               tuple(range(1, len(shape) + 1))))
        else:
            out.append(moveaxis(x, d, 0))
    return out


def matrix_batch_rule(prim: Any) -> Any:
    """The batching rule of a primitive on stacks of matrices whose operands share their
    leading axes: every batch axis moves to the front (where a matrix axis holds it) and the
    primitive runs once on the bigger stack; the outputs carry the batch first."""
    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> tuple:
        moved = batch_to_front(args, dims)
        out = prim.bind(*moved, **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)
    return rule
