"""Array-API and NumPy 2 aliases, extra dtype names, shifts, bit counts and small predicates.

The Array API standard (which NumPy 2 and ``jax.numpy`` follow) renames a few NumPy
functions: ``acos`` is ``arccos``, ``pow`` is ``power``, ``concat`` is ``concatenate``,
``permute_dims`` is ``transpose``, ``bitwise_invert`` is ``invert``... These are the same
functions under the new names. The module also holds the shifts (``left_shift``,
``right_shift`` and their Array-API names), ``bitwise_count``, ``unstack``,
``cumulative_sum``/``cumulative_prod`` (NumPy 2's ``include_initial`` variants of
``cumsum``/``cumprod``) and the dtype predicates ``isdtype``, ``iscomplex``, ``isreal``,
``isscalar``, ``iterable``.

Differences from NumPy:
    * The shifts of signed integers by a negative amount, or by at least the bit width,
      follow the primitives (``functx.primitives.bits``): 0 for ``left_shift``, 0 or -1 for
      ``right_shift``; NumPy leaves these to the C compiler.
    * ``copy`` returns a read-only array (functx results are immutable), so it is a copy
      only in the sense that later writes to the argument do not change it.
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from functx.errors import ArgumentError, DTypeError
from functx.numpy import _reductions as _red
from functx.numpy import _shape as _fshape
from functx.numpy._devices import filled
from functx.numpy import _ufuncs as _uf
from functx.numpy import _ufuncs_math as _um
from functx.numpy._promotion import (
    asarray,
    astype,
    is_tracer,
    promote_args_dtype,
    result_type,
)
from functx.numpy._ufunc_base import as_ufunc, full_bool
from functx.primitives import bits as _bits
from functx.primitives import elementwise as _ew
from functx.primitives.complex import imag

__all__ = [
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "atan2", "pow", "concat",
    "permute_dims", "row_stack", "bitwise_invert", "left_shift", "right_shift", "bitwise_left_shift",
    "bitwise_right_shift", "bitwise_count", "isdtype", "unstack", "cumulative_sum",
    "cumulative_prod", "copy", "iscomplex", "isreal", "isscalar", "iterable", "array_equiv",
    "bfloat16", "single", "double", "csingle", "cdouble", "float_", "complex_", "int_",
    "uint", "character", "flexible", "object_", "ComplexWarning",
]

# ----------------------------------------------------------------------------------------
# Array-API names of existing functions

acos, acosh, asin, asinh = _um.arccos, _um.arccosh, _um.arcsin, _um.arcsinh
atan, atanh, atan2 = _um.arctan, _um.arctanh, _um.arctan2
pow = _uf.power
bitwise_invert = _uf.invert
row_stack = _fshape.vstack  # NumPy's older name (deprecated there in 2.0, kept by JAX 0.4)


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Any:
    """Join a sequence of arrays along an existing axis (the Array API's ``concatenate``).

    Example:
        >>> fnp.concat([np.zeros(2), np.ones(1)])
        array([0., 0., 1.])
    """
    return _fshape.concatenate(arrays, axis=axis)


def permute_dims(a: Any, /, axes: Sequence[int]) -> Any:
    """``a`` with its axes permuted (the Array API's ``transpose``; ``axes`` is required).

    Example:
        >>> fnp.permute_dims(np.zeros((2, 3)), (1, 0)).shape
        (3, 2)
    """
    return _fshape.transpose(a, axes)


# ----------------------------------------------------------------------------------------
# dtype names (the same objects as NumPy's; bfloat16 from ml_dtypes)

single, double, csingle, cdouble = np.float32, np.float64, np.complex64, np.complex128
float_, complex_, int_, uint = np.float64, np.complex128, np.int64, np.uint64
character, flexible, object_ = np.character, np.flexible, np.object_
ComplexWarning = np.exceptions.ComplexWarning
try:
    import ml_dtypes as _ml_dtypes

    bfloat16 = _ml_dtypes.bfloat16
except ImportError:  # pragma: no cover - ml_dtypes comes with the test dependencies
    __all__.remove("bfloat16")


# ----------------------------------------------------------------------------------------
# shifts and bit counts


def _shift(name: str, prim: Any, x1: Any, x2: Any) -> Any:
    (a, b), dt = promote_args_dtype(name, x1, x2)
    if dt.kind not in "iu":
        raise DTypeError(f"functx.numpy.{name} needs integer operands, got {dt} (from "
                         f"{getattr(x1, 'dtype', type(x1).__name__)} and "
                         f"{getattr(x2, 'dtype', type(x2).__name__)}); cast them with "
                         f"astype first.")
    return prim(a, b)


@as_ufunc
def left_shift(x1, x2):
    """Shift the bits of integers to the left (``x1 << x2``).

    Example:
        >>> fnp.left_shift(np.array([1, 2]), 3)
        array([ 8, 16])
    """
    return _shift("left_shift", _bits.shift_left, x1, x2)


@as_ufunc
def right_shift(x1, x2):
    """Shift the bits of integers to the right (``x1 >> x2``; arithmetic for signed types).

    Example:
        >>> fnp.right_shift(np.array([-8, 8]), 2)
        array([-2,  2])
    """
    if result_type(x1, x2).kind == "u":
        return _shift("right_shift", _bits.shift_right_logical, x1, x2)
    return _shift("right_shift", _bits.shift_right_arithmetic, x1, x2)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift

_M1, _M2, _M4 = 0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F
_H01 = 0x0101010101010101


@as_ufunc
def bitwise_count(x):
    """The number of 1 bits in the absolute value of each integer (uint8, as NumPy 2).

    Example:
        >>> fnp.bitwise_count(np.array([0, 7, -8]))
        array([0, 3, 1], dtype=uint8)
    """
    if x.dtype.kind not in "biu":
        raise DTypeError(f"functx.numpy.bitwise_count needs integer or boolean operands, got "
                         f"{x.dtype}; cast it with astype first.")
    if x.dtype.kind == "i":
        x = _uf.absolute(x)  # the most negative value wraps, and reads right as unsigned
    u = astype(x, np.uint64)

    def c(v: int) -> np.ndarray:
        return np.asarray(v, np.uint64)

    def shr(v: Any, s: int) -> Any:
        return _bits.shift_right_logical(v, np.full((), s, np.uint64))

    u = _ew.sub(u, _ew.and_(shr(u, 1), c(_M1)))
    u = _ew.add(_ew.and_(u, c(_M2)), _ew.and_(shr(u, 2), c(_M2)))
    u = _ew.and_(_ew.add(u, shr(u, 4)), c(_M4))
    return astype(shr(_ew.mul(u, c(_H01)), 56), np.uint8)


# ----------------------------------------------------------------------------------------
# arrays and predicates


def unstack(x: Any, /, *, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``, as a tuple of arrays of one dimension less.

    Raises:
        ArgumentError: ``x`` is 0-d.

    Example:
        >>> [a.shape for a in fnp.unstack(np.zeros((2, 3)), axis=1)]
        [(2,), (2,), (2,)]
    """
    x = _fshape.as_array(x)
    if len(x.shape) == 0:
        raise ArgumentError("functx.numpy.unstack needs an array of at least one dimension, "
                            "got a 0-d array; there is no axis to split along.")
    axis = _fshape.norm_axis(axis, len(x.shape), "unstack")
    return tuple(_fshape.squeeze(s, axis) for s in
                 _fshape.split(x, x.shape[axis], axis=axis)) if x.shape[axis] else ()


def _cumulative(name: str, fn: Any, identity: int, x: Any, axis: Any, dtype: Any,
                include_initial: builtins.bool) -> Any:
    x = _fshape.as_array(x)
    if axis is None:
        if len(x.shape) > 1:
            raise ArgumentError(f"functx.numpy.{name}: axis must be given for an array of "
                                f"{len(x.shape)} dimensions (shape {tuple(x.shape)}); pass "
                                f"axis= or ravel the array first.")
        axis = 0
    if len(x.shape) == 0:
        x = _fshape.reshape(x, (1,))
    axis = _fshape.norm_axis(axis, len(x.shape), name)
    out = fn(x, axis=axis, dtype=dtype)
    if include_initial:
        shape = list(out.shape)
        shape[axis] = 1
        first = filled(out, identity, out.dtype, tuple(shape))
        out = _fshape.concatenate([first, out], axis=axis)
    return out


def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: builtins.bool = False) -> Any:
    """Cumulative sum along ``axis`` (NumPy 2's ``cumulative_sum``); ``include_initial``
    puts a 0 first. ``axis`` may be omitted only for arrays of at most one dimension.

    Example:
        >>> fnp.cumulative_sum(np.array([1, 2, 3]), include_initial=True)
        array([0, 1, 3, 6])
    """
    return _cumulative("cumulative_sum", _red.cumsum, 0, x, axis, dtype, include_initial)


def cumulative_prod(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: builtins.bool = False) -> Any:
    """Cumulative product along ``axis`` (NumPy 2's ``cumulative_prod``); ``include_initial``
    puts a 1 first. ``axis`` may be omitted only for arrays of at most one dimension.

    Example:
        >>> fnp.cumulative_prod(np.array([1, 2, 3]))
        array([1, 2, 6])
    """
    return _cumulative("cumulative_prod", _red.cumprod, 1, x, axis, dtype, include_initial)


def copy(a: Any, order: str = "K", subok: builtins.bool = False) -> Any:
    """An array with the values of ``a`` that later writes to ``a`` do not change.

    Example:
        >>> fnp.copy([1.0, 2.0])
        array([1., 2.])
    """
    if is_tracer(a):
        return a
    a = asarray(a)
    if isinstance(a, np.ndarray) and not a.flags.writeable:
        return a
    return asarray(np.array(a, copy=True)) if isinstance(a, np.ndarray) else a.copy()


def iscomplex(x: Any) -> Any:
    """Elementwise: whether the imaginary part is nonzero (False for real dtypes).

    Example:
        >>> fnp.iscomplex(np.array([1 + 1j, 2 + 0j]))
        array([ True, False])
    """
    x = _fshape.as_array(x)
    if x.dtype.kind != "c":
        return full_bool(x, False)
    return _uf.not_equal(imag(x), 0)


def isreal(x: Any) -> Any:
    """Elementwise: whether the imaginary part is zero (True for real dtypes).

    Example:
        >>> fnp.isreal(np.array([1 + 1j, 2 + 0j]))
        array([False,  True])
    """
    return _uf.logical_not(iscomplex(x))


def isscalar(element: Any) -> builtins.bool:
    """Whether ``element`` is a scalar: a Python or NumPy scalar, or a 0-d array or tracer
    (as ``jax.numpy.isscalar``, which counts 0-d arrays; NumPy does not).

    Example:
        >>> fnp.isscalar(1.0), fnp.isscalar(np.zeros(()))
        (True, True)
    """
    if isinstance(element, (builtins.bool, int, float, complex, np.generic)):
        return True
    shape = getattr(element, "shape", None)
    return isinstance(shape, tuple) and len(shape) == 0 and hasattr(element, "dtype")


def iterable(y: Any) -> builtins.bool:
    """Whether ``iter(y)`` works (0-d arrays are not iterable).

    Example:
        >>> fnp.iterable([1, 2]), fnp.iterable(2)
        (True, False)
    """
    try:
        iter(y)
    except TypeError:
        return False
    return True


def array_equiv(a1: Any, a2: Any) -> Any:
    """Whether the arrays have equal values once broadcast together (False, not an error,
    when they do not broadcast). The result is a 0-d bool array (traced under transforms).

    Example:
        >>> bool(fnp.array_equiv([1, 2], [[1, 2], [1, 2]]))
        True
    """
    a1, a2 = _fshape.as_array(a1), _fshape.as_array(a2)
    try:
        np.broadcast_shapes(tuple(a1.shape), tuple(a2.shape))
    except ValueError:
        return asarray(False)
    return _red.all(_uf.equal(a1, a2))


_KINDS = {
    "bool": ("b",), "signed integer": ("i",), "unsigned integer": ("u",),
    "integral": ("i", "u"), "real floating": ("f",), "complex floating": ("c",),
    "numeric": ("i", "u", "f", "c"),
}


def isdtype(dtype: Any, kind: Any) -> builtins.bool:
    """Whether ``dtype`` is of ``kind``: a dtype, one of the Array API's kind names
    (``'bool'``, ``'signed integer'``, ``'unsigned integer'``, ``'integral'``,
    ``'real floating'``, ``'complex floating'``, ``'numeric'``) or a tuple of these.

    Raises:
        ArgumentError: an unknown kind name.

    Example:
        >>> fnp.isdtype(np.float32, "real floating"), fnp.isdtype(np.int8, ("bool", np.int8))
        (True, True)
    """
    dt = np.dtype(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ArgumentError(f"functx.numpy.isdtype: unknown kind {k!r}; use a dtype or "
                                    f"one of {sorted(_KINDS)}.")
            real_float = dt.kind == "f" or dt.name == "bfloat16"
            if dt.kind in _KINDS[k] or (real_float and k in ("real floating", "numeric")):
                return True
        elif dt == np.dtype(k):
            return True
    return False
