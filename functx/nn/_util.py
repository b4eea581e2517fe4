"""Helpers shared by the functx.nn modules: argument checks, reductions, value access.

Nothing here is public API except :class:`ArgumentError` (re-exported by functx.nn).
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import ml_dtypes
import numpy as np

import functx.numpy as fnp
from functx.errors import ArgumentError, ConcretizationError, DTypeError, ShapeError
from functx.numpy._promotion import is_tracer
from functx.numpy._shape import to_host
from functx.primitives.misc import stop_gradient


def array(x: Any) -> Any:
    """``x`` as an array or tracer (tracers and arrays unchanged, scalars/lists converted)."""
    if is_tracer(x) or (isinstance(getattr(x, "shape", None), tuple)
                        and hasattr(x, "dtype") and not isinstance(x, np.generic)):
        return x
    return fnp.asarray(x)


_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def float_array(x: Any, fn: str, name: str = "input") -> Any:
    """``x`` as a real floating-point array (bfloat16 included): integer and bool inputs
    become float64.

    Raises:
        DTypeError: ``x`` is complex (functx.nn works on real values).
    """
    a = array(x)
    kind = np.dtype(a.dtype).kind
    if kind == "f" or a.dtype == _BFLOAT16:
        return a
    if kind == "c":
        raise DTypeError(f"functx.nn.{fn}: {name} has complex dtype {a.dtype}; functx.nn "
                         "works on real floating-point values. Pass a real array.")
    return fnp.astype(a, np.float64)


def check_option(fn: str, name: str, value: Any, allowed: Sequence[str]) -> None:
    """Raise ArgumentError unless ``value`` is one of the strings ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ArgumentError(f"functx.nn.{fn}: {name} must be one of {choices}, not {value!r}.")


def check_number(fn: str, name: str, value: Any, *, lo: float | None = None,
                 hi: float | None = None, lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a float, checked against an interval; ArgumentError otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise ArgumentError(f"functx.nn.{fn}: {name} must be a real number, not "
                            f"{type(value).__name__} {value!r}.")
    v = float(value)
    bad = (np.isnan(v)
           or (lo is not None and (v <= lo if lo_open else v < lo))
           or (hi is not None and (v >= hi if hi_open else v > hi)))
    if bad:
        if lo is not None and hi is not None:
            where = f"in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
        elif lo is not None:
            where = f"{'>' if lo_open else '>='} {lo}"
        else:
            where = f"{'<' if hi_open else '<='} {hi}"
        raise ArgumentError(f"functx.nn.{fn}: {name} must be {where}, but got {value!r}.")
    return v


def check_int(fn: str, name: str, value: Any, *, lo: int | None = None) -> int:
    """``value`` as an int (not bool), at least ``lo``; ArgumentError otherwise."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"functx.nn.{fn}: {name} must be an int, not "
                            f"{type(value).__name__} {value!r}.")
    if lo is not None and value < lo:
        raise ArgumentError(f"functx.nn.{fn}: {name} must be >= {lo}, but got {value}.")
    return int(value)


def norm_dim(fn: str, dim: Any, ndim: int, name: str = "dim") -> int:
    """``dim`` as a non-negative axis of an ``ndim``-dimensional input (0-d counts as 1-d)."""
    d = check_int(fn, name, dim)
    n = max(ndim, 1)
    if not -n <= d < n:
        raise ArgumentError(f"functx.nn.{fn}: {name}={d} is out of range for an input with "
                            f"{ndim} dimension(s) (expected {name} in [{-n}, {n - 1}]).")
    return d % n


def require_ndim(fn: str, name: str, x: Any, allowed: Sequence[int], what: str = "") -> None:
    """Raise ShapeError unless ``x.ndim`` is one of ``allowed``."""
    if x.ndim not in allowed:
        dims = " or ".join(str(n) for n in allowed)
        raise ShapeError(f"functx.nn.{fn}: {name} must have {dims} dimension(s){what}, but "
                         f"it has shape {tuple(x.shape)}.")


def broadcastable(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether shapes ``a`` and ``b`` broadcast together."""
    try:
        np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        return False
    return True


def host_value(x: Any) -> np.ndarray | None:
    """The value of ``x`` on the host where it is known (arrays, concrete tracers), else None.

    Used for checks that need values (index ranges) and can only be done when the values are
    there: inside ``vmap`` or ``make_trace`` they are skipped.
    """
    if not is_tracer(x):
        return to_host(x)
    try:
        return to_host(x._concrete("a check of index values"))
    except ConcretizationError:
        return None


def legacy_reduction(fn: str, size_average: Any, reduce: Any, reduction: str) -> str:
    """The ``reduction`` string, from PyTorch's deprecated ``size_average``/``reduce`` if set.

    As in PyTorch: None counts as True, ``size_average and reduce`` is 'mean', ``reduce``
    alone is 'sum', otherwise 'none'; a DeprecationWarning-style UserWarning is emitted.
    """
    if size_average is None and reduce is None:
        return reduction
    sa = True if size_average is None else bool(size_average)
    rd = True if reduce is None else bool(reduce)
    result = "mean" if sa and rd else ("sum" if rd else "none")
    warnings.warn(f"functx.nn.{fn}: size_average and reduce are deprecated (as in PyTorch); "
                  f"use reduction={result!r} instead.", stacklevel=3)
    return result


def reduce_loss(fn: str, loss: Any, reduction: str) -> Any:
    """``loss`` reduced by 'none', 'mean' or 'sum' (the option is checked beforehand)."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return fnp.sum(loss)
    return fnp.mean(loss)


def check_reduction(fn: str, reduction: Any,
                    allowed: Sequence[str] = ("none", "mean", "sum")) -> None:
    """Raise ArgumentError unless ``reduction`` is one of ``allowed``."""
    check_option(fn, "reduction", reduction, allowed)


def warn_target_broadcast(fn: str, input: Any, target: Any) -> None:
    """PyTorch's warning when ``input`` and ``target`` differ in shape but broadcast."""
    if tuple(input.shape) != tuple(target.shape):
        if not broadcastable(input.shape, target.shape):
            raise ShapeError(f"functx.nn.{fn}: target shape {tuple(target.shape)} does not "
                             f"broadcast with input shape {tuple(input.shape)}. Pass a target "
                             "shaped like the input.")
        warnings.warn(f"functx.nn.{fn}: using a target shape {tuple(target.shape)} that is "
                      f"different from the input shape {tuple(input.shape)}; they are "
                      "broadcast, which is likely to give incorrect results. Pass a target "
                      "shaped like the input.", stacklevel=3)


def gradient_scaled(value: Any, x: Any, scale: Any) -> Any:
    """``value`` in the forward pass, with gradient ``scale * ct`` flowing into ``x``.

    ``value`` is computed from ``x`` but treated as a constant; ``x - stop_gradient(x)``
    is exactly zero forward and carries the gradient.
    """
    return fnp.add(stop_gradient(value), fnp.multiply(fnp.subtract(x, stop_gradient(x)), scale))
