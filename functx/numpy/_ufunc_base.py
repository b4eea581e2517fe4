"""The machinery shared by functx.numpy's ufuncs (``_ufuncs``, ``_ufuncs_math``): operand
handling, the NumPy-style wrapper :func:`as_ufunc`, and the dtype rules of NumPy's ufunc
loops (float-only loops, int8 for booleans).
"""
from __future__ import annotations

import builtins
from typing import Any, Callable

import numpy as np

from functx.registry import Primitive
from functx.tracing import Tracer, bind
from functx.numpy._promotion import (
    PY_SCALARS,
    SCALAR_ARRAY_MEMO,
    astype,
    check_no_out,
    is_tracer,
    promote_args_dtype,
    result_type,
    to_array,
)
from functx.numpy import _shape as _fshape

# Eager evaluation of a branch that a select then discards may divide inf by inf (and the
# like); NumPy's own functions raise no warning there, so neither do these composites.
def quiet_unused_branch() -> Any:
    return np.errstate(invalid="ignore", divide="ignore")

# ----------------------------------------------------------------------------------------
# operand handling


def unary_operand(name: str, x: Any, dtype: Any = None) -> Any:
    """A tracer or array for the operand ``x`` of the functx.numpy function ``name``
    (Python scalars become strong 0-d arrays, as in NumPy).

    Raises:
        DTypeError: ``x`` is not numeric (a string...); the message names ``name``.
    """
    if not (is_tracer(x) or isinstance(x, np.ndarray)):
        x = to_array(name, x)
    return x if dtype is None else astype(x, dtype)


def binary_operand(name: str, x: Any, dtype: Any = None) -> Any:
    """Like :func:`unary_operand`, but Python scalars stay (weak) Python scalars."""
    if dtype is not None:
        return astype(to_array(name, x), dtype)
    if is_tracer(x) or isinstance(x, (np.ndarray,) + PY_SCALARS):
        return x
    return to_array(name, x)


# Operand types the wrappers pass on untouched (the fast path of every call).
READY = frozenset({np.ndarray, Tracer})
_READY_OR_SCALAR = READY | set(PY_SCALARS)


def as_ufunc(impl: Callable) -> Callable:
    """Wrap ``impl`` (taking 1 or 2 operands) into a NumPy-style ufunc function.

    The wrapper has NumPy's signature ``f(x, /, out=None, *, dtype=None)`` (or
    ``f(x1, x2, /, ...)``), takes the name and docstring of ``impl``, rejects ``out=`` and
    casts the inputs to ``dtype`` when one is given.
    """
    name = impl.__name__
    if impl.__code__.co_argcount == 1:
        def ufunc(x, /, out=None, *, dtype=None):
            if out is not None or dtype is not None or type(x) not in READY:
                check_no_out(name, out)
                x = unary_operand(name, x, dtype)
            return impl(x)
    else:
        def ufunc(x1, x2, /, out=None, *, dtype=None):
            if (out is not None or dtype is not None or type(x1) not in _READY_OR_SCALAR
                    or type(x2) not in _READY_OR_SCALAR):
                check_no_out(name, out)
                x1, x2 = binary_operand(name, x1, dtype), binary_operand(name, x2, dtype)
            return impl(x1, x2)
    ufunc.__name__ = ufunc.__qualname__ = name
    ufunc.__doc__ = impl.__doc__
    ufunc.__module__ = impl.__module__
    return ufunc


def inexact_ufunc(prim: Primitive) -> Callable:
    """:func:`as_ufunc` for a function ``impl(x) = prim(to_inexact(x))`` (``sin``,
    ``exp``...), whose wrapper binds ``prim`` itself for the common call: a tracer or NumPy
    array of a dtype ``to_inexact`` leaves as it is, and no ``out``/``dtype`` (eager
    ``grad``'s hot path: ``impl`` and ``to_inexact`` each cost a Python frame per op). Other
    calls go through ``impl``; the result is the same either way.

    Example:
        >>> @inexact_ufunc(_ew.sin_p)
        ... def sin(x):
        ...     return _ew.sin(to_inexact(x))
    """
    def wrap(impl: Callable) -> Callable:
        slow = as_ufunc(impl)

        def ufunc(x, /, out=None, *, dtype=None):
            t = type(x)
            if t is Tracer:
                if out is None and dtype is None and x._var.aval.dtype.kind not in "biu":
                    return bind(prim, x)
            elif t is np.ndarray and out is None and dtype is None and x.dtype.kind not in "biu":
                return bind(prim, x)
            return slow(x, out, dtype=dtype)
        return _named_like(ufunc, impl)
    return wrap


def arith_ufunc(prim: Primitive) -> Callable:
    """:func:`as_ufunc` for a binary arithmetic function ``impl(x1, x2)`` that binds
    ``prim`` on ``promote_pair``'s operands when their dtype is floating-point or complex
    (``add``, ``subtract``, ``multiply``), whose wrapper binds ``prim`` itself for the
    common calls: a strongly typed tracer or NumPy array of such a dtype with a Python float
    or int whose 0-d array ``promote_pair`` has memoised (either side), or two of one such
    dtype; no ``out``/``dtype``. Other calls go through ``impl``; the result is the same.
    """
    def wrap(impl: Callable) -> Callable:
        slow = as_ufunc(impl)
        memo = SCALAR_ARRAY_MEMO.get

        def ufunc(x1, x2, /, out=None, *, dtype=None):
            if out is None and dtype is None:
                t1, t2 = type(x1), type(x2)
                if t1 is Tracer:
                    aval = x1._var.aval
                    dt = None if aval.weak_type else aval.dtype
                elif t1 is np.ndarray:
                    dt = x1.dtype
                else:  # (a Python scalar first: the array second)
                    dt = None
                    if t1 is float or t1 is int:
                        if t2 is Tracer:
                            aval = x2._var.aval
                            if not aval.weak_type and aval.dtype.kind in "fc":
                                c = memo((t1, x1, aval.dtype))
                                if c is not None:
                                    return bind(prim, c, x2)
                        elif t2 is np.ndarray and x2.dtype.kind in "fc":
                            c = memo((t1, x1, x2.dtype))
                            if c is not None:
                                return bind(prim, c, x2)
                if dt is not None and dt.kind in "fc":
                    if t2 is float or t2 is int:
                        c = memo((t2, x2, dt))
                        if c is not None:
                            return bind(prim, x1, c)
                    elif t2 is Tracer:
                        aval = x2._var.aval
                        if aval.dtype == dt and not aval.weak_type:
                            return bind(prim, x1, x2)
                    elif t2 is np.ndarray and x2.dtype == dt:
                        return bind(prim, x1, x2)
            return slow(x1, x2, out, dtype=dtype)
        return _named_like(ufunc, impl)
    return wrap


def _named_like(ufunc: Callable, impl: Callable) -> Callable:
    ufunc.__name__ = ufunc.__qualname__ = impl.__name__
    ufunc.__doc__ = impl.__doc__
    ufunc.__module__ = impl.__module__
    return ufunc


def _inexact_dtype(dt: np.dtype) -> np.dtype:
    """The dtype NumPy's float-only ufunc loops pick for an input of dtype ``dt``."""
    return np.promote_types(dt, np.float16) if dt.kind in "biu" else dt


def to_inexact(x: Any) -> Any:
    dt = x._var.aval.dtype if type(x) is Tracer else x.dtype  # (Tracer.dtype: a property)
    return astype(x, _inexact_dtype(dt)) if dt.kind in "biu" else x


def promote_inexact(name: str, x1: Any, x2: Any) -> tuple:
    """Promote two operands together, then to a float dtype (as float-only ufuncs do)."""
    dt = _inexact_dtype(result_type(x1, x2))
    a, b, _ = promote_args_dtype(name, x1, x2, np.zeros((), dt))[0]
    return a, b, dt


def promote_int8_for_bool(name: str, x1: Any, x2: Any) -> tuple:
    """Promote two operands; two booleans become int8 (NumPy's loop for these ufuncs)."""
    if result_type(x1, x2) == np.bool_:
        return astype(x1, np.int8), astype(x2, np.int8), np.dtype(np.int8)
    (a, b), dt = promote_args_dtype(name, x1, x2)
    return a, b, dt


def require_not_bool(name: str, x: Any, instead: str) -> None:
    if x.dtype == np.bool_:
        raise TypeError(f"functx.numpy.{name} is not supported for booleans (as in NumPy); "
                        f"{instead}")


def zero_of(x: Any) -> np.ndarray:
    """A 0-d zero of ``x``'s dtype (primitives need operands of one dtype)."""
    return np.zeros((), x.dtype)


def same(x: Any) -> Any:
    """``x`` as a result: a tracer as it is, an array as a read-only view (never the
    caller's own, possibly writable, array)."""
    return _fshape.unchanged(x)


def full_bool(x: Any, value: builtins.bool) -> np.ndarray:
    """A read-only bool array shaped like ``x`` (a result that does not depend on values)."""
    out = np.full(tuple(x.shape), value, dtype=np.bool_)
    out.flags.writeable = False
    return out
