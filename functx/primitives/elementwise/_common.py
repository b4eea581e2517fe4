"""The elementwise family's shared definitions: dtype classes, shape rules, the helpers
that define a unary or binary primitive, and the small tools their rules share
(``unbroadcast``, ``scalar``, ``unary_jvp``...). The primitives themselves live in
``_comparison``, ``_arithmetic`` and ``_transcendental`` (see the package's docstring).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from functx.errors import DTypeError
from functx.ir import AbstractArray
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import broadcast_to_shape
from functx.primitives._util import (
    broadcast_shapes,
    fmt,
    is_extension_float,
    same_dtypes,
    shape_of,
)
from functx.registry import Primitive
from functx.registry.scalar import Expr, call


# -- dtype classes ----------------------------------------------------------------------------

def _is_real_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt.name == "bfloat16"


# name -> (predicate on the dtype, words for error messages)
DTYPE_CLASSES: dict[str, tuple[Callable[[np.dtype], bool], str]] = {
    "any": (lambda dt: True, "any"),
    "number": (lambda dt: dt.kind in "iufc" or dt.name == "bfloat16", "numeric (non-bool)"),
    "real": (lambda dt: dt.kind in "iuf" or dt.name == "bfloat16",
             "integer or real floating-point"),
    "ordered": (lambda dt: dt.kind in "biuf" or dt.name == "bfloat16",
                "bool, integer or real floating-point"),
    "inexact": (lambda dt: dt.kind in "fc" or dt.name == "bfloat16",
                "floating-point or complex"),
    "float": (_is_real_float, "real floating-point"),
    "logical": (lambda dt: dt.kind in "biu", "bool or integer"),
}


def check_dtype_class(name: str, accepts: str, *avals: AbstractArray) -> None:
    """Check every operand's dtype belongs to the class ``accepts`` of DTYPE_CLASSES.

    Raises:
        DTypeError: naming the primitive, the operands and the dtypes it accepts.
    """
    ok, words = DTYPE_CLASSES[accepts]
    for a in avals:
        if not ok(np.dtype(a.dtype)):
            raise DTypeError(
                f"{name} needs {words} operands but got {fmt(avals)}. Convert the operand "
                "with x.astype(...) first (functx.numpy functions do this as NumPy does).")


# -- shape rules and definition helpers ---------------------------------------------------

def make_unary_aval(name: str, accepts: str = "any", out_dtype: Any = None) -> Callable:
    """The shape rule of a unary primitive accepting the dtype class ``accepts``.

    The result has the operand's shape and dtype (``out_dtype`` if given, then not weak).
    """
    def rule(x: AbstractArray, **params: Any) -> AbstractArray:
        check_dtype_class(name, accepts, x)
        if out_dtype is None:
            return x
        return AbstractArray(x.shape, out_dtype, False)
    return rule


def make_binary_aval(name: str, accepts: str = "any", out_dtype: Any = None) -> Callable:
    """The shape rule of a broadcasting binary primitive needing equal operand dtypes."""
    def rule(x: AbstractArray, y: AbstractArray) -> AbstractArray:
        dtype = same_dtypes(name, x, y)
        check_dtype_class(name, accepts, x)
        shape = broadcast_shapes(name, x.shape, y.shape)
        if out_dtype is not None:
            return AbstractArray(shape, out_dtype, False)
        return AbstractArray(shape, dtype, x.weak_type and y.weak_type)
    return rule


_PY_SCALARS = frozenset({bool, int, float, complex})


def join_weak(xp: Any, args: tuple) -> tuple:
    """``args`` with Python scalars made 0-d arrays of the array operands' dtype where NumPy
    would not keep that dtype (bfloat16: a Python float turns it into float32 or float64).
    The shape rules promise the array's dtype (``bf16 * 2.0`` is bfloat16, as in JAX)."""
    for a in args:
        if type(a) not in _PY_SCALARS:
            dt = np.dtype(a.dtype)
            if not is_extension_float(dt):
                return args
            return tuple(xp.asarray(v, dtype=dt) if type(v) in _PY_SCALARS else v
                         for v in args)
    return args


def weak_scalars_kept(impl: Callable) -> Callable:
    """The rule ``impl(xp, *arrays)`` with its operands first passed through
    :func:`join_weak` when one is a Python scalar (a type test per operand otherwise)."""
    def rule(xp, *args, **params):
        for a in args:
            if type(a) in _PY_SCALARS:
                args = join_weak(xp, args)
                break
        return impl(xp, *args, **params)
    rule.__name__ = rule.__qualname__ = impl.__name__
    return rule


_F64 = np.dtype(np.float64)
_F64_SCALARS: dict = {}  # Python float -> its read-only 0-d float64 array (not 0 or NaN)


def _f64_scalar(v: float) -> Any:
    """``v`` as a 0-d float64 array where that is memoised or memoisable, else ``v``: NumPy
    takes a 0-d array faster than a Python float, with the same float64 result."""
    c = _F64_SCALARS.get(v)
    if c is None and v and v == v:  # (zeros' signs are one key; NaN is never found)
        if len(_F64_SCALARS) > 1024:
            _F64_SCALARS.clear()
        c = _F64_SCALARS[v] = np.array(v)
        c.flags.writeable = False
    return v if c is None else c


def _cpu_binary_ufunc(name: str) -> Callable:
    """NumPy's binary ufunc ``name`` with :func:`join_weak` applied to Python scalars: the
    CPU implementation of a binary primitive defined by a ufunc's name (CuPy, which has no
    bfloat16, keeps the bare ufunc). A Python float beside a float64 array is passed as a
    memoised 0-d float64 array (the result is the same; NumPy converts it faster)."""
    ufunc = getattr(np, name)

    def rule(xp, x, y, out=None):
        if type(y) in _PY_SCALARS:
            if type(x) not in _PY_SCALARS:
                if x.dtype is _F64 and type(y) is float:
                    y = _f64_scalar(y)
                elif x.dtype.kind == "V":
                    x, y = join_weak(np, (x, y))
        elif type(x) in _PY_SCALARS:
            if y.dtype is _F64 and type(x) is float:
                x = _f64_scalar(x)
            elif y.dtype.kind == "V":
                x, y = join_weak(np, (x, y))
        return ufunc(x, y) if out is None else ufunc(x, y, out=out)
    rule.__name__ = rule.__qualname__ = name
    return rule


def _ufunc_out(name: str) -> Callable:
    """The array module's ufunc ``name`` writing into ``out`` (jit's memory planner)."""
    def rule(xp, *args, out):
        return getattr(xp, name)(*args, out=out)
    rule.__name__ = rule.__qualname__ = name + "_out"
    return rule


def unary(name: str, impl: Callable | str, accepts: str = "any",
          out_dtype: Any = None) -> Primitive:
    """A new elementwise unary primitive with the same-shape rule and a generic impl (a
    rule, or the name of the array-module ufunc, e.g. ``"sin"``, which also serves as its
    out-implementation: ``Primitive.def_impl_out``)."""
    p = Primitive(name)
    p.def_abstract_eval(make_unary_aval(name, accepts, out_dtype))
    p.def_impl(impl)
    if isinstance(impl, str):
        p.def_impl_out(_ufunc_out(impl), alias="any")
        p.def_cpu_arrays_impl(getattr(np, impl))  # (NumPy's ufunc: what the impl calls)
    return p


def binary(name: str, impl: Callable | str, accepts: str = "any",
           out_dtype: Any = None) -> Primitive:
    """A new broadcasting binary primitive with a generic impl (as for :func:`unary`); a
    Python scalar operand keeps the other operand's dtype (:func:`weak_scalars_kept`)."""
    p = Primitive(name)
    p.def_abstract_eval(make_binary_aval(name, accepts, out_dtype))
    if isinstance(impl, str):
        p.def_impl(impl)
        cpu = _cpu_binary_ufunc(impl)
        p.def_impl(cpu, backend="cpu")
        p.def_impl_out(_ufunc_out(impl), alias="any")  # (out-implementations, as unary's)
        p.def_impl_out(cpu, backend="cpu", alias="any")
        p.def_cpu_arrays_impl(getattr(np, impl))  # (two arrays: no weak scalar to join)
    else:
        p.def_impl(weak_scalars_kept(impl))
    return p


def unbroadcast(ct: Any, aval: Any) -> Any:
    """Sum a cotangent of a broadcast result back to an operand's shape (and no further).

    ``aval`` is the operand's abstract value or value (a Python scalar has shape ()).
    """
    shape = getattr(aval, "shape", ())
    if ct.shape == shape:  # (the common case; tuples of both, no conversions)
        return ct
    shape = tuple(shape)
    if tuple(ct.shape) == shape:
        return ct
    lead = len(ct.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and ct.shape[lead + i] != 1)
    summed = _red.reduce_sum(ct, axes) if axes else ct
    return _shape.reshape(summed, shape) if tuple(summed.shape) != shape else summed


def scalar(like: Any, value: Any) -> Any:
    """A 0-d constant ``value`` of ``like``'s dtype on ``like``'s device (for VJP rules)."""
    if type(like) is np.ndarray:
        return _shape._scalar(np, value, like.dtype)
    return _shape.constant(like, value, (), like.dtype)


def quiet(**kinds: str) -> Any:
    """Silence NumPy floating-point warnings (CuPy does not warn) for results that are right."""
    return np.errstate(**kinds)


def dtype_of(x: Any) -> np.dtype:
    dt = getattr(x, "dtype", None)
    return np.dtype(dt) if dt is not None else np.asarray(x).dtype


def fit_tangent(t: Any, out: Any) -> Any:
    """A tangent (or None) broadcast to the shape of the primal output ``out``."""
    return None if t is None else broadcast_to_shape(t, shape_of(out))


def unary_jvp(fn: Callable) -> Callable:
    """The JVP rule of a unary primitive from ``fn(t, x, out) -> tangent`` (``t`` not None):
    None stays None."""
    def rule(tangents, primals, out, **params):
        t = tangents[0]
        return None if t is None else fn(t, primals[0], out)
    return rule


# -- scalar rules (the compiler's per-element expressions; functx.registry.scalar) -----------

def real_float(*xs: Expr) -> bool:
    """Whether every per-element expression is float32 or float64 (the dtypes the code
    generators fuse arithmetic and functions of; others run unfused)."""
    return all(x.dtype.kind == "f" and x.dtype.itemsize in (4, 8) for x in xs)


def scalar_call(name: str) -> Callable:
    """The scalar rule of a unary float function rendered as the function ``name``."""
    def rule(x: Expr, *, out: Any, **params: Any) -> Expr | None:
        return call(name, x) if real_float(x) else None
    return rule


def scalar_float(fn: Callable) -> Callable:
    """A scalar rule ``fn(*xs) -> Expr`` used only where every operand is a real float."""
    def rule(*xs: Expr, out: Any, **params: Any) -> Expr | None:
        return fn(*xs, **params) if real_float(*xs) else None
    return rule


def scalar_any(fn: Callable) -> Callable:
    """A scalar rule ``fn(*xs) -> Expr`` exact for every dtype the code generators fuse."""
    def rule(*xs: Expr, out: Any, **params: Any) -> Expr | None:
        return fn(*xs, **params)
    return rule
