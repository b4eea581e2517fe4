"""Dtypes and type promotion for functx.numpy: ``result_type``, ``asarray``, ``astype``...

Promotion follows NumPy 2 (NEP 50): Python scalars are *weak*, they take the dtype of the
array they meet as long as their kind fits (``float32 array + 2.0 -> float32``,
``int8 array + 3 -> int8``, ``int array + 2.5 -> float64``). A tracer whose abstract value
is weak (``tracer.weak_type``: it came from a Python scalar) is treated exactly like a
Python scalar of its kind. NumPy scalars (``np.float32(1)``) and arrays are strong.

Helpers used by every other functx.numpy module live here: :func:`promote_args` turns
the operands of a binary primitive into operands of one dtype, :func:`is_tracer` and
:func:`check_no_out`. Host (CPU) arrays are created in one place, :func:`host_array`, so
that a default device can be added there later.

bfloat16 (``ml_dtypes.bfloat16``, which NumPy promotes poorly: a Python float turns it into
float64, float16 has no common type with it) promotes as a floating-point type of its own,
as in JAX: Python scalars and weak values of kind bool/int/float keep it (``bf16 * 2.0 ->
bfloat16``), a Python complex gives complex64, bfloat16 with float16 gives float32, with
float32/float64/complex the wider type. Integers promote with it as they do with float16
(int8/uint8/bool keep bfloat16, int16 gives float32, wider integers float64).

Only numbers and booleans are array values (as in JAX): strings, bytes, objects, void
(structured) and datetime/timedelta dtypes are refused with a :class:`DTypeError` where
functx.numpy converts or promotes its arguments, instead of producing string arrays or
failing later inside a primitive.

Differences from NumPy:
    * ``out=`` is not supported anywhere (functx values are immutable): it raises TypeError.
    * ``asarray``/``array`` always return read-only arrays outside transforms; ``asarray``
      of a writable NumPy array copies it (functx never aliases a mutable user array).
    * ``asarray`` of a (nested) list containing tracers stacks them (differentiably).
    * ``fnp.bool`` is NumPy's ``np.bool``; within this package the builtin is never shadowed.
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from functx.backends import BY_TYPE, CPU as _CPU
from functx.errors import DTypeError
from functx.ir import AbstractArray
from functx.primitives import elementwise as _ew
from functx.primitives import shape as _shape
from functx.tracing import Tracer

__all__ = [
    # dtypes and dtype utilities (re-exported from NumPy)
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128", "intp", "uintp",
    "dtype", "finfo", "iinfo", "generic", "number", "integer", "signedinteger",
    "unsignedinteger", "inexact", "floating", "complexfloating", "issubdtype",
    "promote_types",
    # functx functions
    "result_type", "can_cast", "asarray", "array", "astype",
]

bool_ = np.bool_
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
float16, float32, float64 = np.float16, np.float32, np.float64
complex64, complex128 = np.complex64, np.complex128
intp, uintp = np.intp, np.uintp
dtype, iinfo = np.dtype, np.iinfo
generic, number, integer = np.generic, np.number, np.integer
signedinteger, unsignedinteger = np.signedinteger, np.unsignedinteger
inexact, floating, complexfloating = np.inexact, np.floating, np.complexfloating
issubdtype = np.issubdtype

PY_SCALARS = (builtins.bool, builtins.int, builtins.float, builtins.complex)
# A representative Python scalar per dtype kind: what a weak value promotes like.
_WEAK_STAND_IN = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}


def finfo(dtype: Any) -> Any:
    """Machine limits of a floating-point dtype (``np.finfo``), bfloat16 included (through
    ``ml_dtypes.finfo``, as ``jnp.finfo`` does).

    Example:
        >>> float(fnp.finfo(ml_dtypes.bfloat16).eps)
        0.0078125
    """
    dt = dtype.dtype if isinstance(getattr(dtype, "dtype", None), np.dtype) else np.dtype(dtype)
    if dt.kind == "V" and dt.type is not np.void:
        import ml_dtypes  # a dependency; only its own dtypes get here

        return ml_dtypes.finfo(dt)
    return np.finfo(dt)


def is_inexact(dt: Any) -> builtins.bool:
    """Whether ``dt`` is a floating-point or complex dtype (bfloat16 included: NumPy's
    ``kind`` says ``V`` for it)."""
    dt = np.dtype(dt)
    return dt.kind in "fc" or (dt.kind == "V" and dt.type is not np.void)


def is_tracer(x: Any) -> builtins.bool:
    """Whether ``x`` is a functx tracer (a value inside a transform)."""
    return type(x) is Tracer


def check_no_out(name: str, out: Any) -> None:
    """Raise the error for NumPy's ``out=`` argument, which functx cannot honour.

    Raises:
        TypeError: ``out`` is not None.
    """
    if out is not None:
        raise TypeError(f"functx.numpy.{name} does not support out=: functx values are "
                        f"immutable. Use the returned value instead (y = fnp.{name}(...)).")


_NON_NUMERIC = {"S": "bytes", "U": "strings", "O": "Python objects", "V": "void/structured",
                "M": "datetimes", "m": "timedeltas", "T": "strings"}


def check_numeric(name: str, dt: np.dtype) -> None:
    """Refuse a non-numeric dtype (str, bytes, object, void, datetime) for ``name``.

    Cheap (a dtype-kind test); bfloat16 and other ml_dtypes types (kind ``V`` too, but with
    their own scalar type) pass.

    Raises:
        DTypeError: naming the function, the dtype and what to do.
    """
    kind = dt.kind
    if kind in "biufc" or (kind == "V" and dt.type is not np.void):
        return
    if kind in _NON_NUMERIC:
        raise DTypeError(
            f"functx.numpy.{name} got an operand of dtype {dt} ({_NON_NUMERIC[kind]}), but "
            "functx arrays hold only numbers and booleans (as in JAX). Convert it to a "
            "numeric dtype first (e.g. np.asarray(x, dtype=np.float64)), or keep it out of "
            "functx.numpy.")


def _on_device(x: Any) -> builtins.bool:
    """Whether ``x`` is an array of a non-CPU backend (a CuPy array...)."""
    b = BY_TYPE.get(type(x))
    return b is not None and b is not _CPU


def host_array(a: Any, dtype: Any = None) -> np.ndarray:
    """A read-only host array holding ``a`` (copied unless it already is read-only).

    This is the single place where functx.numpy creates arrays from host data.
    """
    out = np.asarray(a, dtype=dtype)
    if out.flags.writeable:
        out = out.copy() if out is a or out.base is not None else out
        out.flags.writeable = False
    return out


# ----------------------------------------------------------------------------------------
# result_type


def _promotion_operand(x: Any) -> Any:
    """What ``np.result_type`` should see for ``x``: a dtype or a (weak) Python scalar."""
    if isinstance(x, PY_SCALARS):
        return x
    aval = x if isinstance(x, AbstractArray) else getattr(x, "aval", None)
    if isinstance(aval, AbstractArray):
        if aval.weak_type:
            return _WEAK_STAND_IN.get(aval.dtype.kind, aval.dtype)
        return aval.dtype
    if isinstance(x, (np.dtype, type, str)):
        return np.dtype(x)
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    if x is None:
        raise TypeError("result_type got None; pass arrays, dtypes or Python scalars.")
    return np.asarray(x).dtype


def result_type(*args: Any) -> np.dtype:
    """The dtype NumPy 2 gives the result of combining ``args`` (NEP 50 promotion).

    Args:
        *args: dtypes (``np.float32``, ``"int64"``, ``float``), arrays, tracers, abstract
            values or Python scalars. Python scalars and weak tracers are weak.

    Returns:
        The promoted ``np.dtype``.

    Example:
        >>> fnp.result_type(np.float32, 2.0), fnp.result_type(np.int32, 2.5)
        (dtype('float32'), dtype('float64'))
    """
    if not args:
        raise TypeError("result_type needs at least one argument.")
    ops = [_promotion_operand(a) for a in args]
    for o in ops:
        if isinstance(o, np.dtype):
            check_numeric("result_type", o)
    if builtins.any(isinstance(o, np.dtype) and o.name == "bfloat16" for o in ops):
        return _result_type_bf16(ops)
    return np.result_type(*ops)


def _result_type_bf16(ops: list) -> np.dtype:
    """``result_type`` with bfloat16 among the (strong) dtypes: promoted as float16 would
    be, except that the half-precision result is bfloat16, or float32 where a real float16
    meets it (as in JAX). See the module docstring."""
    bf16 = next(o for o in ops if isinstance(o, np.dtype) and o.name == "bfloat16")
    half = np.dtype(np.float16)
    has_f16 = builtins.any(isinstance(o, np.dtype) and o == half for o in ops)
    out = np.result_type(*[half if isinstance(o, np.dtype) and o.name == "bfloat16" else o
                           for o in ops])
    if out != half:
        return out
    return np.dtype(np.float32) if has_f16 else bf16


def promote_types(type1: Any, type2: Any) -> np.dtype:
    """The smallest dtype both dtypes convert to safely (``np.promote_types``), with
    bfloat16 promoted as :func:`result_type` does (``bfloat16, float16 -> float32``).

    Example:
        >>> fnp.promote_types(np.float16, np.int16)
        dtype('float32')
    """
    return result_type(np.dtype(type1), np.dtype(type2))


def can_cast(from_: Any, to: Any, casting: str = "safe") -> builtins.bool:
    """Whether a cast from ``from_`` (a dtype, array or tracer) to ``to`` is allowed.

    Same as ``np.can_cast``; arrays and tracers are looked at through their dtype.
    """
    if not isinstance(from_, (np.dtype, type, str)):
        from_ = _promotion_operand(from_)
        if isinstance(from_, PY_SCALARS):
            raise TypeError("can_cast does not accept Python scalars (as in NumPy 2); pass "
                            "a dtype or an array.")
    return np.can_cast(from_, to, casting=casting)


# ----------------------------------------------------------------------------------------
# conversion


def _convert(x: Any, dt: np.dtype) -> Any:
    return _ew.convert_element_type(x, new_dtype=dt)


def _from_sequence(x: Any, dt: Any) -> Any:
    """``asarray`` of a (nested) list/tuple; stacks traced entries with primitives."""
    def has_tracer(v: Any) -> builtins.bool:
        return is_tracer(v) or (isinstance(v, (list, tuple)) and
                                builtins.any(has_tracer(e) for e in v))

    if not has_tracer(x):
        return host_array(x, dt)
    parts = [asarray(e) for e in x]
    common = result_type(*parts) if dt is None else np.dtype(dt)
    parts = [_shape.expand_dims(astype(p, common), (0,)) for p in parts]
    shapes = {tuple(p.shape) for p in parts}
    if len(shapes) > 1:
        raise ValueError(f"asarray: the entries of the sequence have different shapes "
                         f"{sorted(s[1:] for s in shapes)}; they must all be equal.")
    return _shape.concatenate(parts, 0)


def asarray(a: Any, dtype: Any = None, order: Any = None, *, copy: Any = None) -> Any:
    """``a`` as an array (a read-only NumPy array, or the tracer itself inside transforms).

    Args:
        a: an array, tracer, Python scalar or (nested) sequence of them.
        dtype: the dtype wanted; None keeps ``a``'s (Python scalars get NumPy's default).
        order, copy: accepted for compatibility; functx arrays are immutable, so copies are
            never observable.

    Returns:
        A tracer (converted with ``astype`` when ``dtype`` differs) or a read-only array.
    """
    return to_array("asarray", a, dtype)


def to_array(name: str, a: Any, dtype: Any = None) -> Any:
    """:func:`asarray` on behalf of the functx.numpy function ``name``, which the error for
    a non-numeric dtype names (the check is on the host path only: tracers and device
    arrays are always numeric).

    Raises:
        DTypeError: ``a`` or ``dtype`` is not numeric (str, bytes, object, void, datetime).
    """
    if is_tracer(a):
        return a if dtype is None else astype(a, dtype)
    if _on_device(a):  # a device (e.g. CUDA) array stays on its device
        return a if dtype is None or np.dtype(dtype) == a.dtype else _convert(a, np.dtype(dtype))
    if dtype is not None:
        check_numeric(name, np.dtype(dtype))
    if isinstance(a, (list, tuple)):
        out = _from_sequence(a, dtype)
    elif isinstance(a, np.ndarray) and dtype is not None and np.dtype(dtype) != a.dtype:
        check_numeric(name, a.dtype)
        return _convert(a, np.dtype(dtype))
    else:
        out = host_array(a, dtype)
    check_numeric(name, out.dtype)
    return out


def array(object: Any, dtype: Any = None, *, copy: builtins.bool = True, order: Any = "K",
          ndmin: builtins.int = 0) -> Any:
    """Like :func:`asarray`, with NumPy's ``ndmin`` (leading size-1 axes added)."""
    out = asarray(object, dtype)
    if len(out.shape) < ndmin:
        out = _shape.reshape(out, (1,) * (ndmin - len(out.shape)) + tuple(out.shape))
    return out


def astype(x: Any, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None) -> Any:
    """``x`` converted to ``dtype`` (``convert_element_type``); a no-op when already equal.

    Converting a weak tracer to its own dtype makes it strong (it then promotes like an
    array). Float to integer conversion truncates toward zero as in NumPy.
    """
    dt = np.dtype(dtype)
    check_numeric("astype", dt)
    if is_tracer(x):
        if x.dtype == dt and not x.weak_type:
            return x
        return _convert(x, dt)
    if _on_device(x):
        return x if x.dtype == dt else _convert(x, dt)
    if not isinstance(x, np.ndarray):
        x = host_array(x)
    check_numeric("astype", x.dtype)
    return host_array(x) if x.dtype == dt else _convert(x, dt)


def promote_args(name: str, *args: Any) -> list:
    """Convert ``args`` to one dtype (NEP 50 promotion) so a binary primitive accepts them.

    Python scalars become (strong) 0-d arrays of the result dtype: eager results are
    arrays, which are never weak, so a value computed from Python scalars promotes the
    same way inside and outside transforms. Arrays and tracers of another dtype go through
    ``convert_element_type``; sequences are converted with :func:`asarray`.

    Args:
        name: the calling function's name (for error messages).
        *args: the operands.

    Returns:
        A list of operands, all of the same dtype.

    Raises:
        OverflowError: a Python integer does not fit the result dtype (as in NumPy 2).
    """
    return promote_args_dtype(name, *args)[0]


_SCALAR_ARRAYS: dict = {}
# (type(v), v, dtype) -> _scalar_array(v, dtype), for hot paths that look it up inline
# (functx.numpy's arithmetic wrappers); a miss means: call _scalar_array.
SCALAR_ARRAY_MEMO = _SCALAR_ARRAYS


def _scalar_array(v: builtins.int | builtins.float, dtype: np.dtype) -> np.ndarray:
    """A read-only 0-d array of ``v`` (memoised: the constants of a loop body repeat).

    Zeros (whose sign a dict key cannot tell apart) and NaNs are not memoised.
    """
    if not v or v != v:
        return host_array(v, dtype)
    key = (type(v), v, dtype)
    out = _SCALAR_ARRAYS.get(key)
    if out is None:
        if len(_SCALAR_ARRAYS) > 4096:
            _SCALAR_ARRAYS.clear()
        out = _SCALAR_ARRAYS[key] = host_array(v, dtype)
    return out


def fast_common_dtype(args: tuple) -> np.dtype | None:
    """The common dtype when promotion has nothing to do (the hot path of every binary
    function): strongly typed arrays of one dtype, plus Python floats and ints next to
    floating-point arrays. None when the general rules are needed."""
    dt = None
    scalars = False
    for a in args:
        t = type(a)
        if t is Tracer:  # (its aval directly: Tracer.dtype is a property)
            aval = a._var.aval
            if aval.weak_type:
                return None
            if dt is None:
                dt = aval.dtype
            elif aval.dtype != dt:
                return None
        elif t is np.ndarray or t in BY_TYPE:
            if dt is None:
                dt = a.dtype
            elif a.dtype != dt:
                return None
        elif t is builtins.float or t is builtins.int:
            scalars = True
        else:
            return None
    if dt is None:
        return None
    kind = dt.kind
    if kind in "fc" or (kind in "biu" and not scalars):
        return dt
    # bfloat16 (kind "V") keeps its dtype next to Python floats and ints; non-numeric
    # dtypes take the general path, which refuses them.
    return dt if kind == "V" and dt.name == "bfloat16" else None


def promote_args_dtype(name: str, *args: Any) -> tuple[list, np.dtype]:
    """:func:`promote_args` and the common dtype (the operands may be Python scalars, which
    have no ``.dtype``)."""
    dt = fast_common_dtype(args)
    if dt is not None:  # (a loop, not a list comprehension: no frame of its own)
        out = []
        for a in args:
            t = type(a)
            out.append(_scalar_array(a, dt) if t is builtins.float or t is builtins.int else a)
        return out, dt
    args = [a if is_tracer(a) or isinstance(a, (np.ndarray,) + PY_SCALARS)
            else to_array(name, a) for a in args]
    for a in args:
        if type(a) is np.ndarray:
            check_numeric(name, a.dtype)
    dt = result_type(*args)
    out = []
    for a in args:
        if isinstance(a, PY_SCALARS):
            try:
                a = host_array(a, dt)
            except OverflowError as e:
                raise OverflowError(f"functx.numpy.{name}: {e} (NumPy 2 raises here too); "
                                    f"convert the array to a wider dtype first.") from None
        elif a.dtype != dt:
            a = _convert(a, dt)
        out.append(a)
    return out, dt


def promote_pair(name: str, x1: Any, x2: Any) -> tuple:
    """``(a, b, dtype)``: :func:`promote_args_dtype` of two operands, with the hot case of
    arithmetic inline: a floating-point (or complex) tracer or NumPy array and a Python
    float or int, on either side (the scalar becomes a 0-d array of the array's dtype)."""
    t1, t2 = type(x1), type(x2)
    if t2 is builtins.float or t2 is builtins.int:
        arr, scalar, t, first = x1, x2, t2, True
    elif t1 is builtins.float or t1 is builtins.int:
        arr, scalar, t, first = x2, x1, t1, False
    else:
        arr = None
    if arr is not None:
        ta = type(arr)
        if ta is Tracer:
            aval = arr._var.aval
            dt = None if aval.weak_type else aval.dtype
        else:
            dt = arr.dtype if ta is np.ndarray else None
        if dt is not None and dt.kind in "fc":
            # (_scalar_array's memo; zeros and NaNs are never in it)
            c = _SCALAR_ARRAYS.get((t, scalar, dt)) if scalar else None
            if c is None:
                c = _scalar_array(scalar, dt)
            return (arr, c, dt) if first else (c, arr, dt)
    (a, b), dt = promote_args_dtype(name, x1, x2)
    return a, b, dt


def dtype_of(x: Any) -> np.dtype:
    """The dtype ``x`` has as an array (Python scalars: NumPy's default for their kind)."""
    dt = getattr(x, "dtype", None)
    return dt if isinstance(dt, np.dtype) else np.asarray(x).dtype


globals()["bool"] = np.bool  # fnp.bool, without shadowing the builtin above this line
__all__.append("bool")
