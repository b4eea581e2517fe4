"""``jax.lax``'s sorting and cumulative operations: sort, sort_key_val, top_k, cummax,
cummin, cumlogsumexp, cumsum and cumprod.

As in ``jax.lax`` these do not promote dtypes; axes may be negative. Sorts are stable and
put NaN last; ``top_k`` puts NaN first. Index results are int64 (JAX's are int32).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from functx.errors import DTypeError
from functx.numpy import _reductions as _fred
from functx.numpy._axes import norm_axis
from functx.numpy._shape import as_array
from functx.primitives import reduction as _red
from functx.primitives import shape as _p
from functx.primitives import sort as _sort

__all__ = ["sort", "sort_key_val", "top_k", "cummax", "cummin", "cumlogsumexp", "cumsum",
           "cumprod"]


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """Sort one array, or a sequence of arrays of one shape by their first ``num_keys``
    (lexicographically), along ``dimension``.

    Returns:
        The sorted array, or a tuple of the sorted arrays for a sequence.

    Example:
        >>> functx.lax.sort((np.array([2.0, 1.0]), np.array([10, 20])))
        (array([1., 2.]), array([20, 10]))
    """
    single = not isinstance(operand, (tuple, list))
    ops = [as_array(operand)] if single else [as_array(o) for o in operand]
    if not ops:
        raise ValueError("functx.lax.sort needs at least one operand; got an empty sequence.")
    d = norm_axis(dimension, len(ops[0].shape), "functx.lax.sort")
    out = _sort.sort(ops, dimension=d, num_keys=num_keys, is_stable=is_stable)[:-1]
    return out[0] if single else tuple(out)


def sort_key_val(keys: Any, values: Any, dimension: int = -1,
                 is_stable: bool = True) -> tuple[Any, Any]:
    """``keys`` sorted along ``dimension`` and ``values`` permuted the same way.

    Example:
        >>> functx.lax.sort_key_val(np.array([2.0, 1.0]), np.array([10, 20]))
        (array([1., 2.]), array([20, 10]))
    """
    k, v = sort((keys, values), dimension=dimension, is_stable=is_stable, num_keys=1)
    return k, v


def top_k(operand: Any, k: int) -> tuple[Any, Any]:
    """The ``k`` largest entries along the last axis, descending (NaN first, ties in index
    order), and their int64 indices.

    Raises:
        ShapeError: ``k`` outside [0, the last axis's length]; a 0-d operand.
        DTypeError: complex values.

    Example:
        >>> functx.lax.top_k(np.array([1.0, 3.0, 2.0]), 2)
        (array([3., 2.]), array([1, 2]))
    """
    x = as_array(operand)
    if np.dtype(x.dtype).kind == "c":
        raise DTypeError(f"functx.lax.top_k needs real values but got {x.dtype}; take the "
                         "top k of a real key (abs, real part) and gather with its indices.")
    values, indices = _sort.top_k(x, k)
    return values, indices


def _cumulative(name: str, fn: Any, operand: Any, axis: int, reverse: bool,
                floating: bool = False) -> Any:
    x = as_array(operand)
    dt = np.dtype(x.dtype)
    if dt.kind == "c" or (floating and dt.kind in "biu"):
        what = "floating-point" if floating else "real"
        raise DTypeError(f"functx.lax.{name} needs {what} values but got {dt}; convert the "
                         "operand with .astype(...) first (functx.lax does not promote).")
    return fn(x, axis=norm_axis(axis, len(x.shape), f"functx.lax.{name}"), reverse=reverse)


def cummax(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """The running maximum along ``axis`` (from the end when ``reverse``); the gradient of a
    tied maximum is split evenly among the elements attaining it, as in JAX."""
    return _cumulative("cummax", _sort.cummax, operand, axis, reverse)


def cummin(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """The running minimum along ``axis``; see :func:`cummax`."""
    return _cumulative("cummin", _sort.cummin, operand, axis, reverse)


def cumlogsumexp(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """``log(cumsum(exp(operand)))`` along ``axis``, computed without overflow.

    Example:
        >>> functx.lax.cumlogsumexp(np.array([0.0, 0.0]))
        array([0.        , 0.69314718])
    """
    return _cumulative("cumlogsumexp", _sort.logcumsumexp, operand, axis, reverse,
                       floating=True)


def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running sums along ``axis`` in the operand's dtype (no promotion)."""
    return _cumulative("cumsum", _red.cumsum, operand, axis, reverse)


def cumprod(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Running products along ``axis`` in the operand's dtype (no promotion)."""
    x = as_array(operand)
    ax = norm_axis(axis, len(x.shape), "functx.lax.cumprod")
    if not reverse:
        return _fred.cumprod(x, axis=ax, dtype=x.dtype)
    return _p.rev(_fred.cumprod(_p.rev(x, (ax,)), axis=ax, dtype=x.dtype), (ax,))


