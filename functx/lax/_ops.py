"""``jax.lax``'s array operations over functx primitives.

Each function has ``jax.lax``'s name and signature and binds the functx primitive that
computes it, so code written against ``jax.lax`` ports by changing the import. Where functx
is more permissive than ``jax.lax`` it says so: the elementwise operations broadcast (NumPy's
rules) and accept Python scalars, where ``jax.lax`` requires equal shapes.

Dynamic slicing takes start indices that may be traced (a loop index inside ``scan`` or
``fori_loop``): indices are clamped so that the window lies inside the operand, and with
``allow_negative_indices`` (the default, as in JAX) a negative index counts from the end
first.
"""
from __future__ import annotations

import builtins
import operator
from typing import Any, Sequence

import numpy as np

from functx import numpy as fnp
from functx.errors import ArgumentTypeError, ShapeError
from functx.ir import abstractify
from functx.primitives import bits as _bits
from functx.primitives import elementwise as _ew
from functx.primitives import linalg as _linalg
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives.complex import conj, imag, real
from functx.primitives.misc import stop_gradient
from functx.tracing import Tracer

__all__ = [
    # dynamic slicing
    "dynamic_slice", "dynamic_update_slice", "dynamic_index_in_dim", "dynamic_slice_in_dim",
    "dynamic_update_index_in_dim", "dynamic_update_slice_in_dim",
    # selection and gradients
    "select", "stop_gradient", "clamp",
    # elementwise
    "add", "sub", "mul", "div", "rem", "neg", "abs", "sign", "max", "min", "pow",
    "integer_pow", "square", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "sin", "cos",
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "logistic", "erf",
    "floor", "ceil", "round", "is_finite", "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "real", "imag", "conj", "convert_element_type",
    # structure
    "dot_general", "broadcast_in_dim", "broadcast", "reshape", "transpose", "squeeze",
    "expand_dims", "rev", "concatenate", "slice", "slice_in_dim", "index_in_dim", "pad",
    # reductions
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin", "cumsum",
    # creation
    "iota", "full", "full_like",
]


# -- dynamic slicing -------------------------------------------------------------------------

def _is_static_int(i: Any) -> bool:
    return isinstance(i, (int, np.integer)) and not isinstance(i, bool)


def _start(i: Any, n: int, allow_negative: bool, name: str) -> Any:
    """One start index: a Python int, or a 0-d integer array or tracer; a negative one
    counts from the end when ``allow_negative`` (clamping is the primitive's)."""
    if _is_static_int(i):
        i = int(i)
        return i + n if allow_negative and i < 0 else i
    if type(i) is not Tracer:
        i = fnp.asarray(i)
    aval = abstractify(i)
    if aval.shape != () or aval.dtype.kind not in "iu":
        raise ArgumentTypeError(f"{name}: start indices must be scalar integers (Python ints "
                                f"or 0-d integer arrays), but one is {aval}.")
    if allow_negative and aval.dtype.kind == "i":
        i = fnp.where(i < 0, i + n, i)
    return i


def _starts(operand: Any, start_indices: Any, allow_negative: Any, name: str) -> list:
    shape = fnp.shape(operand)
    if type(start_indices) is Tracer or isinstance(start_indices, np.ndarray) or (
            hasattr(start_indices, "shape") and not isinstance(start_indices, (list, tuple))):
        n = fnp.shape(start_indices)
        if len(n) != 1:
            raise ShapeError(f"{name}: start_indices must be a sequence or a 1-D array of "
                             f"one index per axis, but got an array of shape {n}.")
        start_indices = [start_indices[k] for k in range(n[0])]
    start_indices = list(start_indices)
    if len(start_indices) != len(shape):
        raise ShapeError(f"{name}: the operand has {len(shape)} axes ({shape}) but "
                         f"{len(start_indices)} start indices were given; give one per axis.")
    negs = ([bool(allow_negative)] * len(shape) if isinstance(allow_negative, (bool, int))
            else [bool(a) for a in allow_negative])
    return [_start(i, n, a, name) for i, n, a in zip(start_indices, shape, negs)]


def dynamic_slice(operand: Any, start_indices: Any, slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """The window of ``operand`` of shape ``slice_sizes`` starting at ``start_indices``.

    Args:
        operand: an array.
        start_indices: one scalar integer per axis (Python ints, 0-d arrays or traced
            values such as a loop index), or a 1-D integer array. Each is clamped so that
            the window lies inside ``operand`` (``0 <= start <= dim - size``).
        slice_sizes: the window's shape (static ints).
        allow_negative_indices: a negative index counts from the end (``-1`` is the last
            position) before clamping; per axis, or one bool for all.

    Returns:
        An array of shape ``slice_sizes`` and ``operand``'s dtype.

    Raises:
        ShapeError: not one index and one size per axis, or a size larger than its axis.
        ArgumentTypeError: a start index is not a scalar integer.

    Example:
        >>> dynamic_slice(np.arange(5.0), [3], [2])
        array([3., 4.])
        >>> dynamic_slice(np.arange(5.0), [4], [2])   # clamped: starts at 3
        array([3., 4.])
    """
    starts = _starts(operand, start_indices, allow_negative_indices, "dynamic_slice")
    return _shape.dynamic_slice(operand, starts, tuple(operator.index(s) for s in slice_sizes))


def dynamic_update_slice(operand: Any, update: Any, start_indices: Any, *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """A copy of ``operand`` with the window at ``start_indices`` replaced by ``update``.

    Args:
        operand: an array.
        update: an array of ``operand``'s rank and dtype, no larger on any axis.
        start_indices: as in :func:`dynamic_slice` (clamped so the update fits).
        allow_negative_indices: as in :func:`dynamic_slice`.

    Returns:
        An array like ``operand``.

    Raises:
        ShapeError: ranks differ, the update is too large, or not one index per axis.
        DTypeError: ``update``'s dtype differs from ``operand``'s.

    Example:
        >>> dynamic_update_slice(np.zeros(4), np.ones(2), [1])
        array([0., 1., 1., 0.])
    """
    starts = _starts(operand, start_indices, allow_negative_indices, "dynamic_update_slice")
    return _shape.dynamic_update_slice(operand, update, starts)


def _axis(axis: int, ndim: int, name: str) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{name}: axis {axis} is out of range for an operand with {ndim} "
                         "axes.")
    return axis % ndim


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True) -> Any:
    """:func:`dynamic_slice` along one axis: ``slice_size`` elements from ``start_index``.

    Args:
        operand: an array.
        start_index: a scalar integer (may be traced), clamped as in :func:`dynamic_slice`.
        slice_size: the number of elements taken (static).
        axis: the axis sliced; the others are kept whole.
        allow_negative_indices: a negative index counts from the end.

    Returns:
        ``operand`` with ``axis`` of size ``slice_size``.

    Example:
        >>> dynamic_slice_in_dim(np.arange(6.0).reshape(2, 3), 1, 2, axis=1)
        array([[1., 2.], [4., 5.]])
    """
    shape = fnp.shape(operand)
    axis = _axis(axis, len(shape), "dynamic_slice_in_dim")
    starts: list = [0] * len(shape)
    starts[axis] = start_index
    sizes = list(shape)
    sizes[axis] = slice_size
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True) -> Any:
    """Element ``index`` along ``axis`` (a traced index is fine), clamped into range.

    Args:
        operand: an array.
        index: a scalar integer.
        axis: the axis indexed.
        keepdims: keep ``axis`` with size 1 (the default, as in JAX) or drop it.
        allow_negative_indices: a negative index counts from the end.

    Returns:
        The slice at ``index``.

    Example:
        >>> dynamic_index_in_dim(np.arange(6.0).reshape(2, 3), 1, axis=1, keepdims=False)
        array([1., 4.])
    """
    out = dynamic_slice_in_dim(operand, index, 1, axis,
                               allow_negative_indices=allow_negative_indices)
    if keepdims:
        return out
    return _shape.squeeze(out, (_axis(axis, len(fnp.shape(operand)), "dynamic_index_in_dim"),))


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """:func:`dynamic_update_slice` along one axis, at ``start_index`` (0 elsewhere).

    Args:
        operand: an array.
        update: an array of ``operand``'s rank whose other axes match ``operand``'s.
        start_index: a scalar integer (may be traced), clamped.
        axis: the axis the update is placed along.
        allow_negative_indices: a negative index counts from the end.

    Returns:
        An array like ``operand``.

    Example:
        >>> dynamic_update_slice_in_dim(np.zeros((2, 3)), np.ones((2, 1)), 2, axis=1)
        array([[0., 0., 1.], [0., 0., 1.]])
    """
    ndim = len(fnp.shape(operand))
    axis = _axis(axis, ndim, "dynamic_update_slice_in_dim")
    starts: list = [0] * ndim
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts,
                                allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int, *,
                                allow_negative_indices: bool = True) -> Any:
    """Replace element ``index`` along ``axis`` by ``update`` (with or without that axis).

    Args:
        operand: an array.
        update: the new slice: ``operand``'s shape with ``axis`` of size 1, or without it.
        index: a scalar integer (may be traced), clamped.
        axis: the axis indexed.
        allow_negative_indices: a negative index counts from the end.

    Returns:
        An array like ``operand``.

    Example:
        >>> dynamic_update_index_in_dim(np.zeros((3, 2)), np.ones(2), 1, axis=0)
        array([[0., 0.], [1., 1.], [0., 0.]])
    """
    ndim = len(fnp.shape(operand))
    axis = _axis(axis, ndim, "dynamic_update_index_in_dim")
    if len(fnp.shape(update)) == ndim - 1:
        update = _shape.expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


# -- selection -------------------------------------------------------------------------------

def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred`` is true, else ``on_false``.

    Args:
        pred: a bool array (or scalar) broadcasting against the operands.
        on_true, on_false: arrays of one dtype.

    Returns:
        The selected values (the cotangent flows to the chosen operand).

    Raises:
        DTypeError: ``pred`` is not bool or the operands' dtypes differ.

    Example:
        >>> select(np.array([True, False]), np.ones(2), np.zeros(2))
        array([1., 0.])
    """
    return _ew.select(pred, on_true, on_false)


def clamp(min: Any, x: Any, max: Any) -> Any:  # noqa: A002 - JAX's argument names
    """``x`` clipped to ``[min, max]`` (``jax.lax.clamp``'s argument order and gradients)."""
    return _ew.clamp(min, x, max)


# -- elementwise aliases (primitive-level: no dtype promotion) --------------------------------

add, sub, mul, div, rem, neg = _ew.add, _ew.sub, _ew.mul, _ew.div, _ew.rem, _ew.neg
abs, sign, max, min, pow = _ew.abs, _ew.sign, _ew.max, _ew.min, _ew.pow  # noqa: A001
exp, expm1, log, log1p, sqrt, rsqrt = _ew.exp, _ew.expm1, _ew.log, _ew.log1p, _ew.sqrt, _ew.rsqrt
sin, cos, tan, asin, acos, atan, atan2 = (_ew.sin, _ew.cos, _ew.tan, _ew.asin, _ew.acos,
                                          _ew.atan, _ew.atan2)
sinh, cosh, tanh, logistic, erf = _ew.sinh, _ew.cosh, _ew.tanh, _ew.logistic, _ew.erf
floor, ceil, is_finite = _ew.floor, _ew.ceil, _ew.is_finite
eq, ne, lt, le, gt, ge = _ew.eq, _ew.ne, _ew.lt, _ew.le, _ew.gt, _ew.ge
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = _ew.and_, _ew.or_, _ew.xor, _ew.not_
shift_left = _bits.shift_left
shift_right_arithmetic, shift_right_logical = (_bits.shift_right_arithmetic,
                                               _bits.shift_right_logical)


def round(x: Any, rounding_method: int = 0) -> Any:  # noqa: A001
    """``x`` rounded to integral values. ``rounding_method`` 0 (``AWAY_FROM_ZERO``, JAX's
    default) or 1 (``TO_NEAREST_EVEN``, NumPy's ``round``).

    Raises:
        ArgumentTypeError: another rounding method.
    """
    method = int(rounding_method)
    if method == 1:
        return _ew.round(x)
    if method == 0:
        return _ew.mul(_ew.sign(x), _ew.floor(_ew.add(_ew.abs(x), 0.5)))
    raise ArgumentTypeError(f"round: rounding_method must be 0 (AWAY_FROM_ZERO) or 1 "
                            f"(TO_NEAREST_EVEN), but got {rounding_method!r}.")


def integer_pow(x: Any, y: int) -> Any:
    """``x ** y`` for a static Python integer ``y`` (``x``'s dtype is kept).

    Example:
        >>> integer_pow(np.array([2.0, 3.0]), 3)
        array([ 8., 27.])
    """
    return _ew.integer_pow(x, y=y)


def square(x: Any) -> Any:
    """``x * x`` (``integer_pow(x, 2)``)."""
    return _ew.integer_pow(x, y=2)


def convert_element_type(operand: Any, new_dtype: Any) -> Any:
    """``operand`` converted to ``new_dtype`` (NumPy's ``astype`` rules; gradients flow
    between floating-point dtypes only).

    Example:
        >>> convert_element_type(np.array([1.7, -1.7]), np.int32)
        array([ 1, -1], dtype=int32)
    """
    return _ew.convert_element_type(operand, new_dtype=np.dtype(new_dtype))


# -- structure -------------------------------------------------------------------------------

def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None) -> Any:
    """The contraction ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.

    Args:
        lhs, rhs: arrays of one dtype.
        dimension_numbers: as in ``jax.lax.dot_general``.
        precision: the precision of float32/complex64 products on CUDA (JAX's names:
            ``"highest"``/``"float32"``, ``"high"``/``"tensorfloat32"``, a
            ``Precision``-like enum or a pair; see functx/config.py); None uses
            ``fx.config``'s ``default_matmul_precision``. The CPU ignores it.
        preferred_element_type: the result's dtype (the operands are converted to it
            first); None keeps their dtype.

    Returns:
        Batch axes, then ``lhs``'s free axes, then ``rhs``'s.

    Example:
        >>> dot_general(np.ones((2, 3)), np.ones((3, 4)), (((1,), (0,)), ((), ())))
    """
    if preferred_element_type is not None:
        dt = np.dtype(preferred_element_type)
        lhs, rhs = (_ew.convert_element_type(lhs, new_dtype=dt),
                    _ew.convert_element_type(rhs, new_dtype=dt))
    return _linalg.dot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                               precision=precision)


def broadcast_in_dim(operand: Any, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int]) -> Any:
    """``operand`` broadcast to ``shape``, its axis ``i`` becoming ``broadcast_dimensions[i]``.

    Example:
        >>> broadcast_in_dim(np.arange(3.0), (2, 3), (1,)).shape
        (2, 3)
    """
    return _shape.broadcast_in_dim(operand, tuple(shape), tuple(broadcast_dimensions))


def broadcast(operand: Any, sizes: Sequence[int]) -> Any:
    """``operand`` with new leading axes of ``sizes`` (``jax.lax.broadcast``)."""
    ndim = len(fnp.shape(operand))
    sizes = tuple(sizes)
    return _shape.broadcast_in_dim(operand, sizes + tuple(fnp.shape(operand)),
                                   tuple(range(len(sizes), len(sizes) + ndim)))


def reshape(operand: Any, new_sizes: Sequence[int],
            dimensions: Sequence[int] | None = None) -> Any:
    """``operand`` reshaped (C order) to ``new_sizes``, after transposing it by
    ``dimensions`` when given (``jax.lax.reshape``)."""
    if dimensions is not None:
        operand = _shape.transpose_if_needed(operand, tuple(dimensions))
    return _shape.reshape(operand, tuple(new_sizes))


def transpose(operand: Any, permutation: Sequence[int]) -> Any:
    """``operand``'s axes permuted: axis ``i`` of the result is ``permutation[i]``."""
    return _shape.transpose(operand, tuple(int(p) for p in permutation))


def squeeze(array: Any, dimensions: Sequence[int]) -> Any:
    """``array`` without the size-1 axes ``dimensions``."""
    return _shape.squeeze(array, tuple(dimensions))


def expand_dims(array: Any, dimensions: Sequence[int]) -> Any:
    """``array`` with size-1 axes inserted at ``dimensions`` (positions in the result)."""
    return _shape.expand_dims(array, tuple(dimensions))


def rev(operand: Any, dimensions: Sequence[int]) -> Any:
    """``operand`` reversed along ``dimensions``."""
    return _shape.rev(operand, tuple(dimensions))


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    """``operands`` joined along ``dimension`` (one dtype, equal other axes)."""
    return _shape.concatenate(list(operands), dimension)


def slice(operand: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Any:
    """The static window ``start:limit:stride`` on each axis (``jax.lax.slice``)."""
    strides = (1,) * len(start_indices) if strides is None else tuple(strides)
    return _shape.slice(operand, tuple(start_indices), tuple(limit_indices), strides)


def slice_in_dim(operand: Any, start_index: int | None, limit_index: int | None,
                 stride: int = 1, axis: int = 0) -> Any:
    """:func:`slice` along one axis (Python slice rules for None and negative bounds)."""
    shape = fnp.shape(operand)
    axis = _axis(axis, len(shape), "slice_in_dim")
    start, limit, _ = builtins.slice(start_index, limit_index).indices(shape[axis])
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, int(stride)
    return _shape.slice(operand, tuple(starts), tuple(limits), tuple(strides))


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    """Element ``index`` (static; negative counts from the end) along ``axis``."""
    shape = fnp.shape(operand)
    axis = _axis(axis, len(shape), "index_in_dim")
    index = operator.index(index)
    if not -shape[axis] <= index < shape[axis]:
        raise ShapeError(f"index_in_dim: index {index} is out of range for axis {axis} of "
                         f"size {shape[axis]}.")
    index %= shape[axis]
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else _shape.squeeze(out, (axis,))


def pad(operand: Any, padding_value: Any, padding_config: Sequence[Sequence[int]]) -> Any:
    """``operand`` padded with ``padding_value``: ``(low, high, interior)`` per axis
    (negative ``low``/``high`` crop).

    Example:
        >>> pad(np.arange(3.0), 0.0, [(1, -1, 1)])
        array([0., 0., 0., 1., 0.])
    """
    return _shape.pad(operand, padding_value, padding_config)


# -- reductions ------------------------------------------------------------------------------

def reduce_sum(operand: Any, axes: Sequence[int]) -> Any:
    """The sum over ``axes``."""
    return _red.reduce_sum(operand, tuple(axes))


def reduce_max(operand: Any, axes: Sequence[int]) -> Any:
    """The maximum over ``axes``."""
    return _red.reduce_max(operand, tuple(axes))


def reduce_min(operand: Any, axes: Sequence[int]) -> Any:
    """The minimum over ``axes``."""
    return _red.reduce_min(operand, tuple(axes))


def reduce_prod(operand: Any, axes: Sequence[int]) -> Any:
    """The product over ``axes``."""
    return _red.reduce_prod(operand, tuple(axes))


def argmax(operand: Any, axis: int, index_dtype: Any) -> Any:
    """The index of the maximum along ``axis``, of ``index_dtype``."""
    return _red.argmax(operand, axis=axis, index_dtype=np.dtype(index_dtype))


def argmin(operand: Any, axis: int, index_dtype: Any) -> Any:
    """The index of the minimum along ``axis``, of ``index_dtype``."""
    return _red.argmin(operand, axis=axis, index_dtype=np.dtype(index_dtype))


# -- creation --------------------------------------------------------------------------------

def iota(dtype: Any, size: int) -> Any:
    """``[0, 1, ..., size - 1]`` of ``dtype``.

    Example:
        >>> iota(np.int32, 3)
        array([0, 1, 2], dtype=int32)
    """
    return fnp.arange(operator.index(size), dtype=np.dtype(dtype))


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Any:
    """An array of ``shape`` filled with the scalar ``fill_value`` (of ``dtype``, else the
    value's own: a Python float gives the default float dtype)."""
    return fnp.full(tuple(shape), fill_value, dtype=dtype)


def full_like(x: Any, fill_value: Any, dtype: Any = None,
              shape: Sequence[int] | None = None) -> Any:
    """An array like ``x`` (its shape and dtype unless given) filled with ``fill_value``."""
    return fnp.full_like(x, fill_value, dtype=dtype,
                         shape=None if shape is None else tuple(shape))
