"""The one check and normalisation of ``axis`` arguments in ``functx.numpy``.

Every function that takes an ``axis`` (the reductions, the shape functions, indexing,
linear algebra, FFTs) goes through :func:`axis_index`, so a wrong ``axis`` (a float, a
string, a bool) is the same error everywhere: an :class:`ArgumentTypeError` (a
``TypeError``, as NumPy's) naming the function; an out-of-range or repeated axis is a
``ShapeError`` (a ``ValueError``, as NumPy's ``AxisError``).
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from functx.errors import ArgumentTypeError
from functx.primitives import _util

__all__ = ["axis_index", "axis_tuple", "norm_axis", "norm_axes"]


def axis_index(axis: Any, name: str, given: Any = None) -> int:
    """One ``axis`` entry as a Python int (negative allowed; not range-checked).

    The one check of the type of an ``axis`` argument, shared by every ``functx.numpy``
    function that takes one (reductions included), so a wrong ``axis`` is the same error
    everywhere.

    Args:
        axis: the entry.
        name: the function, for the message.
        given: the whole ``axis`` argument as passed (for the message; default ``axis``).

    Raises:
        ArgumentTypeError: ``axis`` is not an integer (a float, a string, a bool: NumPy
            refuses bools too). A ``TypeError`` as NumPy's.
    """
    if not isinstance(axis, (bool, np.bool_)):
        try:
            return operator.index(axis)
        except TypeError:
            pass
    what = (f"{axis!r:.60} (a {type(axis).__name__})" if given is None else
            f"{given!r:.60} (its entry {axis!r:.30} is a {type(axis).__name__})")
    raise ArgumentTypeError(f"functx.numpy.{name}: axis must be an int or a tuple of ints, but "
                            f"got {what}. Pass integer axes (negative ones count from the "
                            "end).")


def norm_axis(axis: Any, ndim: int, name: str) -> int:
    """One axis made non-negative (negative axes count from the end).

    Raises:
        ArgumentTypeError: the axis is not an int (see :func:`axis_index`).
        ShapeError: the axis is out of range (a ValueError, as NumPy's AxisError is).
    """
    return _util.normalize_axes(f"functx.numpy.{name}", (axis_index(axis, name),), ndim)[0]


def axis_tuple(axis: Any, name: str) -> tuple[int, ...]:
    """``axis`` (an int or a sequence of ints) as a tuple of Python ints, not normalised.

    Raises:
        ArgumentTypeError: an axis is not an int (see :func:`axis_index`).
    """
    if isinstance(axis, (tuple, list)):
        return tuple(axis_index(a, name, axis) for a in axis)
    if isinstance(axis, (bool, np.bool_, str, bytes)) or not hasattr(axis, "__iter__"):
        return (axis_index(axis, name),)
    try:
        return (operator.index(axis),)  # a 0-d integer array
    except TypeError:  # an array or another sequence of axes
        return tuple(axis_index(a, name, axis) for a in axis)


def norm_axes(axis: Any, ndim: int, name: str) -> tuple[int, ...]:
    """An int or sequence of ints made non-negative, checked distinct and in range.

    Raises:
        ArgumentTypeError: an axis is not an int (see :func:`axis_index`).
        ShapeError: an axis is out of range or repeated.
    """
    return _util.normalize_axes(f"functx.numpy.{name}", axis_tuple(axis, name), ndim)
