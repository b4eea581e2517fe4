"""Elementwise primitives without a useful derivative, and the selection primitives:
rounding (``floor``, ``ceil``, ``round``, ``is_finite``), comparisons and logical
operations (``eq``... ``ge``, ``and_``, ``or_``, ``xor``, ``not_``), and ``select``,
``clamp`` and ``convert_element_type``.

Part of ``functx.primitives.elementwise`` (see its docstring for dtypes, numerics and the
rules every primitive has); use it through that package.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from functx.errors import DTypeError
from functx.ir import AbstractArray
from functx.primitives._batching import add_tangents, elementwise_batch, unary_batch
from functx.primitives._util import broadcast_shapes, fmt, is_float, same_dtypes
from functx.primitives.elementwise._common import (
    binary,
    check_dtype_class,
    dtype_of,
    fit_tangent,
    scalar,
    unary,
    unbroadcast,
    weak_scalars_kept,
    real_float,
    scalar_any,
    scalar_call,
    scalar_float,
)
from functx.registry import Primitive
from functx.registry.scalar import call, cast, where
from functx.tracing import bind


# -- rounding ----------------------------------------------------------------------------------

floor_p = unary("floor", "floor", "float")
floor_p.def_zero_vjp()
floor_p.def_batch(unary_batch(floor_p))
floor_p.def_scalar(scalar_call("floor"))


def floor(x: Any) -> Any:
    """The largest integer not above ``x`` (real floats; same dtype). Zero gradient."""
    return bind(floor_p, x)


ceil_p = unary("ceil", "ceil", "float")
ceil_p.def_zero_vjp()
ceil_p.def_batch(unary_batch(ceil_p))
ceil_p.def_scalar(scalar_call("ceil"))


def ceil(x: Any) -> Any:
    """The smallest integer not below ``x`` (real floats; same dtype). Zero gradient."""
    return bind(ceil_p, x)


ROUNDING_METHODS = ("half_to_even", "half_away_from_zero")


def _round_impl(xp, x, *, rounding_method):
    if rounding_method == "half_to_even":
        return xp.rint(x)
    # Exact for every input: modf splits x exactly, and |frac| >= 0.5 decides. (The
    # textbook floor(|x| + 0.5) is wrong at 0.49999999999999994 and above 2**52, where the
    # addition rounds.) modf gives (0, +-inf) for infinities, so no inf - inf is formed.
    frac, whole = xp.modf(x)
    return xp.where(xp.abs(frac) >= 0.5, whole + xp.sign(x), whole)


round_p = unary("round", _round_impl, "float")
round_p.def_zero_vjp()
round_p.def_batch(unary_batch(round_p))
round_p.def_scalar(scalar_float(lambda x, *, rounding_method: call("rint", x) if rounding_method == "half_to_even" else None))


def round(x: Any, *, rounding_method: str = "half_to_even") -> Any:  # noqa: A001
    """``x`` rounded to an integer value (real floats; same dtype). Zero gradient.

    Args:
        rounding_method: ``"half_to_even"`` (NumPy's ``round``/``rint``: 2.5 -> 2.0) or
            ``"half_away_from_zero"`` (C's ``round``: 2.5 -> 3.0, -2.5 -> -3.0).

    Raises:
        ValueError: an unknown rounding method.
    """
    if rounding_method not in ROUNDING_METHODS:
        raise ValueError(f"round: rounding_method must be one of {ROUNDING_METHODS}, not "
                         f"{rounding_method!r}.")
    return bind(round_p, x, rounding_method=str(rounding_method))


is_finite_p = unary("is_finite", "isfinite", "any", np.dtype(bool))
is_finite_p.def_zero_vjp()
is_finite_p.def_batch(unary_batch(is_finite_p))
is_finite_p.def_scalar(lambda x, *, out: call("isfinite", x, dtype=out.dtype) if real_float(x) else None)


def is_finite(x: Any) -> Any:
    """Boolean mask of the entries that are neither inf nor NaN (True for integers)."""
    return bind(is_finite_p, x)


# -- comparisons and logical operations ----------------------------------------------------------

def _no_grad_binary(name: str, impl: Callable, accepts: str, out_dtype: Any,
                    doc: str) -> tuple[Primitive, Callable]:
    """A broadcasting binary primitive with a zero gradient, and its wrapper."""
    p = binary(name, impl, accepts, out_dtype)
    p.def_zero_vjp()
    p.def_batch(elementwise_batch(p))

    def wrapper(x: Any, y: Any) -> Any:
        return bind(p, x, y)
    wrapper.__name__ = wrapper.__qualname__ = name if name not in ("and", "or", "xor") \
        else name + "_"
    wrapper.__doc__ = doc
    return p, wrapper


def _comparison(name: str, impl: Callable, symbol: str) -> tuple[Primitive, Callable]:
    return _no_grad_binary(name, impl, "any", np.dtype(bool),
                           f"``x {symbol} y`` elementwise (bool; equal dtypes, broadcasting).")


def _logical(name: str, impl: Callable) -> tuple[Primitive, Callable]:
    return _no_grad_binary(name, impl, "logical", None,
                           f"Logical {name} of bools, bitwise {name} of integers (equal "
                           "dtypes, broadcasting).")


eq_p, eq = _comparison("eq", "equal", "==")
ne_p, ne = _comparison("ne", "not_equal", "!=")
lt_p, lt = _comparison("lt", "less", "<")
le_p, le = _comparison("le", "less_equal", "<=")
gt_p, gt = _comparison("gt", "greater", ">")
ge_p, ge = _comparison("ge", "greater_equal", ">=")
and_p, and_ = _logical("and", "bitwise_and")
or_p, or_ = _logical("or", "bitwise_or")
xor_p, xor = _logical("xor", "bitwise_xor")


def _compare_scalar(op: str) -> Callable:
    def rule(x, y, *, out):
        return getattr(x, op)(y) if real_float(x, y) or x.dtype == np.bool_ else None
    return rule


def _logical_scalar(op: str) -> Callable:
    def rule(x, y, *, out):
        return getattr(x, op)(y) if x.dtype == np.bool_ else None
    return rule


for _p, _op in ((eq_p, "eq"), (ne_p, "ne"), (lt_p, "__lt__"), (le_p, "__le__"),
                (gt_p, "__gt__"), (ge_p, "__ge__")):
    _p.def_scalar(_compare_scalar(_op))
for _p, _op in ((and_p, "__and__"), (or_p, "__or__"), (xor_p, "__xor__")):
    _p.def_scalar(_logical_scalar(_op))
not_p = unary("not", "invert", "logical")
not_p.def_zero_vjp()
not_p.def_batch(unary_batch(not_p))
not_p.def_scalar(lambda x, *, out: ~x if x.dtype == np.bool_ else None)


def not_(x: Any) -> Any:
    """Logical not of bools, bitwise not (``~``) of integers."""
    return bind(not_p, x)


# -- select, clamp, convert_element_type -----------------------------------------------------

select_p = Primitive("select")


@select_p.def_abstract_eval
def _select_aval(pred: AbstractArray, on_true: AbstractArray,
                 on_false: AbstractArray) -> AbstractArray:
    if pred.dtype != np.dtype(bool):
        raise DTypeError(f"select needs a bool predicate but got {fmt((pred, on_true, on_false))}"
                         ". Compare first (x != 0), or convert with x.astype(bool).")
    dtype = same_dtypes("select", on_true, on_false)
    shape = broadcast_shapes("select", pred.shape, on_true.shape, on_false.shape)
    return AbstractArray(shape, dtype, on_true.weak_type and on_false.weak_type)


def _select_impl(xp, pred, on_true, on_false):
    if dtype_of(pred) != np.bool_:
        raise TypeError("select needs a bool predicate")  # explained by the shape rule
    return xp.where(pred, on_true, on_false)


select_p.def_impl(weak_scalars_kept(_select_impl))


@select_p.def_vjp(save_inputs=(0,))
def _select_vjp(ct, ins, out):
    pred, on_true, on_false = ins
    zero = scalar(ct, 0)
    return (None, unbroadcast(select(pred, ct, zero), on_true),
            unbroadcast(select(pred, zero, ct), on_false))


@select_p.def_jvp
def _select_jvp(tangents, primals, out):
    _, t_true, t_false = tangents
    if t_true is None and t_false is None:
        return None
    zero = scalar(out, 0)
    return fit_tangent(select(primals[0], zero if t_true is None else t_true,
                       zero if t_false is None else t_false), out)


select_p.def_batch(elementwise_batch(select_p))
select_p.def_scalar(lambda p, t, f, *, out: where(p, t, f) if real_float(t, f) or t.dtype == np.bool_ else None)


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred`` else ``on_false`` (NumPy's ``where``); all three broadcast.

    ``pred`` must be bool; ``on_true`` and ``on_false`` need one dtype. The cotangent goes to
    the chosen operand, zeros to the other (each summed to its own shape); ``pred`` gets
    none.
    """
    return bind(select_p, pred, on_true, on_false)


clamp_p = Primitive("clamp")


@clamp_p.def_abstract_eval
def _clamp_aval(lo: AbstractArray, x: AbstractArray, hi: AbstractArray) -> AbstractArray:
    dtype = same_dtypes("clamp", lo, x, hi)
    check_dtype_class("clamp", "ordered", x)
    shape = broadcast_shapes("clamp", lo.shape, x.shape, hi.shape)
    return AbstractArray(shape, dtype, lo.weak_type and x.weak_type and hi.weak_type)


clamp_p.def_impl(weak_scalars_kept(lambda xp, lo, x, hi: xp.minimum(xp.maximum(x, lo), hi)))


@clamp_p.def_vjp(save_inputs=True)
def _clamp_vjp(ct, ins, out):
    lo, x, hi = ins
    zero = scalar(ct, 0)
    ct_lo = select(and_(gt(lo, x), lt(lo, hi)), ct, zero)
    ct_x = select(and_(gt(x, lo), lt(x, hi)), ct, zero)
    ct_hi = select(lt(hi, x), ct, zero)
    return unbroadcast(ct_lo, lo), unbroadcast(ct_x, x), unbroadcast(ct_hi, hi)


@clamp_p.def_jvp
def _clamp_jvp(tangents, primals, out):
    # The VJP's masks: each operand's tangent where it is the one chosen (none on ties).
    (t_lo, t_x, t_hi), (lo, x, hi) = tangents, primals
    zero = scalar(out, 0)
    t = None
    if t_lo is not None:
        t = select(and_(gt(lo, x), lt(lo, hi)), t_lo, zero)
    if t_x is not None:
        t = add_tangents(t, select(and_(gt(x, lo), lt(x, hi)), t_x, zero))
    if t_hi is not None:
        t = add_tangents(t, select(lt(hi, x), t_hi, zero))
    return fit_tangent(t, out)


clamp_p.def_batch(elementwise_batch(clamp_p))


def _clamp_scalar(lo, x, hi):
    """``min(max(x, lo), hi)`` with NaN propagated as NumPy's maximum/minimum do."""
    m = where((x > lo) | x.ne(x), x, lo)
    return where((m < hi) | m.ne(m), m, hi)


clamp_p.def_scalar(scalar_float(_clamp_scalar))


def clamp(lo: Any, x: Any, hi: Any) -> Any:
    """``min(max(x, lo), hi)`` with broadcasting (NumPy's ``clip``; ``hi`` wins if lo > hi).

    Gradients follow JAX's ``lax.clamp`` exactly: ``x`` gets the cotangent where
    ``lo < x < hi`` strictly, ``lo`` where ``x < lo < hi``, ``hi`` where ``hi < x``. At a tie
    (``x == lo`` or ``x == hi``) no operand gets it: the gradient there is 0.
    """
    return bind(clamp_p, lo, x, hi)


convert_element_type_p = Primitive("convert_element_type")


@convert_element_type_p.def_abstract_eval
def _convert_aval(x: AbstractArray, *, new_dtype: np.dtype) -> AbstractArray:
    return AbstractArray(x.shape, new_dtype, False)


def _convert_impl(xp, x, *, new_dtype):
    if dtype_of(x).kind == "c" and new_dtype.kind not in "cb":
        x = xp.real(x)  # complex -> real keeps the real part, as in JAX (bool: x != 0)
    x = xp.asarray(x)
    # A view when nothing changes: never the input itself, which eager mode marks read-only.
    return x.view() if x.dtype == new_dtype else x.astype(new_dtype)


convert_element_type_p.def_impl(_convert_impl)


@convert_element_type_p.def_vjp
def _convert_vjp(ct, ins, out, *, new_dtype):
    x = ins[0]
    if is_float(x) and is_float(out):
        return (convert_element_type(ct, new_dtype=x.dtype),)
    return (None,)


@convert_element_type_p.def_jvp
def _convert_jvp(tangents, primals, out, *, new_dtype):
    # Linear between floating-point dtypes; no tangent flows to or from integers and bools.
    t = tangents[0]
    if t is None or not (is_float(t) and is_float(out)):
        return None
    return convert_element_type(t, new_dtype=new_dtype)


convert_element_type_p.def_batch(unary_batch(convert_element_type_p))


def _convert_scalar(x, *, out, new_dtype):
    """Between float32, float64 and bool, and from integers to floats (exact as NumPy's
    astype); to integers is left unfused (NaN and out-of-range values differ by platform)."""
    ok = (real_float(x) or x.dtype == np.bool_ or x.dtype.kind in "iu") and \
        (new_dtype.kind == "b" or (new_dtype.kind == "f" and new_dtype.itemsize in (4, 8)))
    return cast(x, new_dtype) if ok else None


convert_element_type_p.def_scalar(_convert_scalar)
convert_element_type_p.def_simplify(lambda args, out, *, new_dtype: args[0] if args[0].dtype == out.dtype and not args[0].aval.weak_type else None)


def convert_element_type(x: Any, *, new_dtype: Any) -> Any:
    """``x`` converted to ``new_dtype`` as NumPy's ``astype`` does (complex to real or
    integer keeps the real part, complex to bool is ``x != 0``). The result is never
    weak-typed.

    The cotangent is converted back to ``x``'s dtype when both dtypes are floating-point;
    otherwise (an integer or bool on either side) no gradient flows.
    """
    return bind(convert_element_type_p, x, new_dtype=np.dtype(new_dtype))
