"""Elementwise functions (NumPy's ufuncs): arithmetic, transcendental, comparisons, logic.

Each function takes NumPy arrays, Python scalars, (nested) lists or tracers, broadcasts
like NumPy, and promotes dtypes by NumPy 2's rules (NEP 50: Python scalars are weak, see
functx.numpy._promotion). Result dtypes follow NumPy's ufunc loops: float-only functions
(``sin``, ``sqrt``, ``arctan2``...) turn bool/int8/uint8 into float16, int16/uint16 into
float32 and wider integers into float64; ``true_divide`` of integers gives float64;
``floor_divide``/``remainder``/``power``/``square``/``reciprocal`` of booleans give int8.

Differences from NumPy:
    * ``out=`` raises TypeError (functx values are immutable); the ``where=``, ``casting=``,
      ``order=`` and ``subok=`` ufunc keywords are not supported; ``dtype=`` casts the
      inputs to that dtype before computing. Ufunc methods (``.reduce``, ``.outer``...) do
      not exist: use the reductions (``sum``, ``max``...) or broadcasting.
    * ``power`` of integers by traced negative integer exponents gives unspecified values
      (NumPy raises ValueError; that check needs concrete values, and it is made for
      concrete exponents).
    * ``signbit`` of NaN is False whatever the NaN's sign bit.
    * ``hypot``, ``logaddexp``, ``arcsinh``, ``arccosh`` and ``arctanh`` are composites; they
      agree with NumPy to a few ulp (``arccosh`` overflows to inf above ~8e307).
    * ``where(condition)`` (one argument) raises: it is ``nonzero``, whose output shape
      depends on the values.

Gradients: every composite is written so that its gradient is finite wherever the function
is differentiable. Where a plain formula would give NaN gradients at valid points, a
"double where" keeps the unused branch's inputs safe, and is documented at the function
(``arcsinh`` at 0 and for huge inputs, ``hypot`` at (0, 0), ``sinc`` at 0). At ties, ``maximum``/``minimum``
split the gradient evenly between the two operands (the primitive's rule), so
``logaddexp(x, x)`` and ``hypot(x, x)`` get exact gradients.

Layout: the ufuncs live in two modules, this one (arithmetic, extrema, rounding, clipping,
selection, comparisons and logic) and ``_ufuncs_math`` (exponentials, logarithms, powers,
trigonometric and hyperbolic functions and their composites), on the shared operand
handling and wrapper of ``_ufunc_base``.
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Callable

import numpy as np

from functx.numpy._promotion import (
    PY_SCALARS,
    asarray,
    astype,
    check_no_out,
    finfo,
    is_inexact,
    is_tracer,
    promote_args,
    promote_args_dtype,
    promote_pair,
    result_type,
)
from functx.numpy._ufunc_base import (
    READY,
    arith_ufunc,
    as_ufunc,
    binary_operand,
    full_bool,
    promote_inexact,
    promote_int8_for_bool,
    require_not_bool,
    same,
    to_inexact,
    unary_operand,
    zero_of,
)
from functx.primitives import elementwise as _ew
from functx.primitives.misc import stop_gradient

__all__ = [
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder",
    "mod", "fmod", "divmod", "power", "float_power", "negative", "positive", "abs",
    "absolute", "fabs", "sign", "maximum", "minimum", "fmax", "fmin", "floor", "ceil",
    "round", "around", "rint", "trunc", "fix", "clip", "where", "equal", "not_equal",
    "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
    "logical_not", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "invert",
    "bitwise_not", "isfinite", "isnan", "isinf", "isposinf", "isneginf", "signbit",
    "copysign", "nan_to_num", "heaviside",
]

# (a dtype: comparing with the type np.bool_ converts it to a dtype on every call)
_BOOL = np.dtype(np.bool_)


def truthy(x: Any) -> Any:
    """``x`` as booleans (nonzero is True)."""
    return x if x.dtype == np.bool_ else not_equal(x, 0)


# ----------------------------------------------------------------------------------------
# arithmetic


@arith_ufunc(_ew.add_p)
def add(x1, x2):
    """Elementwise ``x1 + x2`` (on booleans: logical or)."""
    a, b, dt = promote_pair("add", x1, x2)
    return _ew.or_(a, b) if dt.kind == "b" else _ew.add(a, b)


@arith_ufunc(_ew.sub_p)
def subtract(x1, x2):
    """Elementwise ``x1 - x2``. Booleans raise TypeError (use logical_xor), as in NumPy."""
    a, b, dt = promote_pair("subtract", x1, x2)
    if dt.kind == "b":
        raise TypeError("functx.numpy.subtract (the - operator) is not supported for "
                        "booleans, as in NumPy; use logical_xor (^) instead.")
    return _ew.sub(a, b)


@arith_ufunc(_ew.mul_p)
def multiply(x1, x2):
    """Elementwise ``x1 * x2`` (on booleans: logical and)."""
    a, b, dt = promote_pair("multiply", x1, x2)
    return _ew.and_(a, b) if dt.kind == "b" else _ew.mul(a, b)


@as_ufunc
def true_divide(x1, x2):
    """Elementwise ``x1 / x2``; integer and boolean operands give float64 (as in NumPy)."""
    dt = result_type(x1, x2)
    if dt.kind in "biu":
        dt = np.dtype(np.float64)
    a, b = promote_args("true_divide", x1, x2, np.zeros((), dt))[:2]
    return _ew.div(a, b)


divide = true_divide


@as_ufunc
def floor_divide(x1, x2):
    """Elementwise ``x1 // x2``: the floor of the quotient, as NumPy and Python compute it.

    For floats this is NumPy's exact algorithm (``(x1 - x1 % x2) / x2`` rounded), not
    ``floor(x1 / x2)``: e.g. ``1 // 0.1 == 9``. Division by zero gives ``x1 / 0``. The
    gradient is zero everywhere, at a zero divisor too (as in JAX): the result is piecewise
    constant, so no derivative flows through the operands.
    """
    a, b, dt = promote_int8_for_bool("floor_divide", x1, x2)
    if dt.kind in "iu":
        return _ew.div(a, b)
    a, b = stop_gradient(a), stop_gradient(b)
    quotient = _ew.round(_ew.div(_ew.sub(a, _ew.rem(a, b)), b), rounding_method="half_to_even")
    return _ew.select(_ew.eq(b, np.zeros((), dt)), _ew.div(a, b), quotient)


@as_ufunc
def remainder(x1, x2):
    """Elementwise ``x1 % x2`` with the sign of the divisor (NumPy's and Python's ``%``)."""
    a, b, dt = promote_int8_for_bool("remainder", x1, x2)
    return _ew.rem(a, b)


mod = remainder


@as_ufunc
def fmod(x1, x2):
    """Elementwise C-style remainder: the result has the sign of the dividend ``x1``.

    The gradient is ``1`` for ``x1`` and ``-trunc(x1 / x2)`` for ``x2`` (JAX's, at a zero
    divisor too: ``|x2|`` is taken with a select, whose derivative at 0 is 1, not abs's 0).
    """
    a, b, dt = promote_int8_for_bool("fmod", x1, x2)
    zero = np.zeros((), dt)
    if dt.kind in "iu":
        b = _ew.abs(b)
        return _ew.select(_ew.lt(a, zero), _ew.neg(_ew.rem(_ew.neg(a), b)), _ew.rem(a, b))
    # |x1| and |x2| by selects (derivative +-1 everywhere), one rem (no untaken branch
    # whose infinite derivative times a zero cotangent would give NaN at x2 == 0)
    negative = _ew.lt(a, zero)
    r = _ew.rem(_ew.select(negative, _ew.neg(a), a),
                _ew.select(_ew.lt(b, zero), _ew.neg(b), b))
    return _ew.select(negative, _ew.neg(r), r)


def divmod(x1: Any, x2: Any, /, out: Any = None) -> tuple:
    """``(floor_divide(x1, x2), remainder(x1, x2))``."""
    check_no_out("divmod", out)
    return floor_divide(x1, x2), remainder(x1, x2)


def _integer_power_by_squaring(a: Any, b: Any) -> Any:
    """``a ** b`` for integer arrays with a non-negative integer array exponent ``b``.

    Binary exponentiation over the exponent's bits (every value bit for a traced exponent,
    up to the highest set one for a concrete exponent), wrapping on overflow as NumPy does.
    """
    if is_tracer(b):
        nbits = 8 * b.dtype.itemsize - (1 if b.dtype.kind == "i" else 0)
    else:
        if b.size and np.min(b) < 0:
            raise ValueError("Integers to negative integer powers are not allowed.")
        nbits = builtins.int(np.max(b)).bit_length() if b.size else 0
    zero = np.zeros((), b.dtype)
    result = _ew.select(_ew.eq(b, b), np.ones((), a.dtype), a)  # ones of the broadcast shape
    base = a
    for i in range(nbits):
        bit_set = _ew.ne(_ew.and_(b, np.asarray(1 << i, b.dtype)), zero)
        result = _ew.select(bit_set, _ew.mul(result, base), result)
        if i + 1 < nbits:
            base = _ew.mul(base, base)
    return result


@as_ufunc
def power(x1, x2):
    """Elementwise ``x1 ** x2``.

    A Python integer exponent (or an integral Python float such as ``2.0``) uses the
    ``integer_pow`` primitive (exact repeated multiplication, well-defined gradients at
    ``x1 == 0``); ``x ** 0.5`` is ``sqrt``; other float exponents use ``pow``. Integers to
    negative integer powers raise ValueError as in NumPy.
    """
    if type(x2) is builtins.int and type(x1) in READY and x1.dtype.kind in "fc" \
            and not getattr(x1, "weak_type", False):
        return _ew.integer_pow(x1, y=x2)  # the common x ** 2: nothing to promote
    if isinstance(x2, PY_SCALARS) and not isinstance(x2, (builtins.bool, builtins.complex)):
        dt = result_type(x1, x2)
        if dt == _BOOL:
            dt = np.dtype(np.int8)
        integral = isinstance(x2, builtins.int) or (
            math.isfinite(x2) and x2 == builtins.int(x2) and builtins.abs(x2) <= 2 ** 31)
        if integral:
            if dt.kind in "iu" and x2 < 0:
                raise ValueError("Integers to negative integer powers are not allowed.")
            return _ew.integer_pow(astype(x1, dt), y=builtins.int(x2))
        if x2 == 0.5:
            return _ew.sqrt(astype(x1, dt))
    a, b, dt = promote_int8_for_bool("power", x1, x2)
    if dt.kind in "iu":
        return _integer_power_by_squaring(asarray(a) if isinstance(a, PY_SCALARS) else a,
                                          asarray(b) if isinstance(b, PY_SCALARS) else b)
    return _ew.pow(a, b)


@as_ufunc
def float_power(x1, x2):
    """Elementwise ``x1 ** x2`` computed in float64 (or complex128) at least."""
    dt = result_type(x1, x2, np.float64)
    return _ew.pow(astype(x1, dt), astype(x2, dt))


@as_ufunc
def negative(x):
    """Elementwise ``-x``. Booleans raise TypeError (use ``~`` / logical_not), as in NumPy."""
    require_not_bool("negative", x, "use ~ (invert) or logical_not instead.")
    return _ew.neg(x)


@as_ufunc
def positive(x):
    """Elementwise ``+x`` (the value itself)."""
    require_not_bool("positive", x, "the value itself is what you want.")
    return same(x)


@as_ufunc
def absolute(x):
    """Elementwise absolute value (booleans are returned as they are)."""
    return same(x) if x.dtype == np.bool_ else _ew.abs(x)


abs = absolute


@as_ufunc
def fabs(x):
    """Elementwise absolute value as a float (integers promote to float). Complex input
    raises TypeError, as in NumPy (use ``abs``)."""
    if x.dtype.kind == "c":
        raise TypeError("functx.numpy.fabs does not support complex input (nor does NumPy); "
                        "use functx.numpy.abs for the modulus.")
    return _ew.abs(to_inexact(x))


@as_ufunc
def sign(x):
    """Elementwise sign: -1, 0 or 1 (NaN stays NaN). Booleans raise TypeError, as in NumPy."""
    require_not_bool("sign", x, "convert to an integer dtype first.")
    return _ew.sign(x)



# ----------------------------------------------------------------------------------------
# extrema, rounding, clipping, selection


@as_ufunc
def maximum(x1, x2):
    """Elementwise maximum (NaN propagates; the gradient is split evenly at ties)."""
    (a, b), dt = promote_args_dtype("maximum", x1, x2)
    return _ew.or_(a, b) if dt == _BOOL else _ew.max(a, b)


@as_ufunc
def minimum(x1, x2):
    """Elementwise minimum (NaN propagates; the gradient is split evenly at ties)."""
    (a, b), dt = promote_args_dtype("minimum", x1, x2)
    return _ew.and_(a, b) if dt == _BOOL else _ew.min(a, b)


def _nan_ignoring(name: str, extremum: Callable, x1: Any, x2: Any) -> Any:
    (a, b), dt = promote_args_dtype(name, x1, x2)
    if not is_inexact(dt):
        return extremum(a, b)
    return _ew.select(_ew.ne(b, b), a, _ew.select(_ew.ne(a, a), b, extremum(a, b)))


@as_ufunc
def fmax(x1, x2):
    """Elementwise maximum ignoring NaN (NaN only where both are NaN)."""
    return _nan_ignoring("fmax", maximum, x1, x2)


@as_ufunc
def fmin(x1, x2):
    """Elementwise minimum ignoring NaN (NaN only where both are NaN)."""
    return _nan_ignoring("fmin", minimum, x1, x2)


@as_ufunc
def floor(x):
    """Elementwise floor (integers are returned as they are). Zero gradient."""
    return same(x) if x.dtype.kind in "biu" else _ew.floor(x)


@as_ufunc
def ceil(x):
    """Elementwise ceiling (integers are returned as they are). Zero gradient."""
    return same(x) if x.dtype.kind in "biu" else _ew.ceil(x)


@as_ufunc
def trunc(x):
    """Elementwise rounding toward zero (integers are returned as they are). Zero gradient."""
    if x.dtype.kind in "biu":
        return same(x)
    return _ew.select(_ew.lt(x, zero_of(x)), _ew.ceil(x), _ew.floor(x))


def fix(x: Any, out: Any = None) -> Any:
    """Round toward zero (NumPy's ``fix``; the same as :func:`trunc`)."""
    check_no_out("fix", out)
    return trunc(x)


@as_ufunc
def rint(x):
    """Elementwise rounding to the nearest integer, halves to even (float result)."""
    return _ew.round(to_inexact(x), rounding_method="half_to_even")


def round(a: Any, decimals: builtins.int = 0, out: Any = None) -> Any:
    """Round to ``decimals`` decimal places, halves to even, exactly as NumPy does.

    For ``decimals > 0`` this is ``rint(a * 10**decimals) / 10**decimals`` (so, as in NumPy,
    not always the closest decimal); negative ``decimals`` round to tens, hundreds...
    Integers are returned as they are for ``decimals >= 0``. The gradient is zero.
    """
    check_no_out("round", out)
    a = unary_operand("round", a)
    decimals = builtins.int(decimals)
    if a.dtype.kind in "iu":
        if decimals >= 0:
            return same(a)
        return astype(round(astype(a, np.float64), decimals), a.dtype)
    a = to_inexact(a)
    if decimals == 0:
        return _ew.round(a, rounding_method="half_to_even")
    factor = np.full((), 10.0 ** builtins.abs(decimals), a.dtype)
    if decimals > 0:
        return _ew.div(_ew.round(_ew.mul(a, factor), rounding_method="half_to_even"), factor)
    return _ew.mul(_ew.round(_ew.div(a, factor), rounding_method="half_to_even"), factor)


around = round

_NO_VALUE: Any = np._NoValue


def clip(a: Any, a_min: Any = _NO_VALUE, a_max: Any = _NO_VALUE, out: Any = None, *,
         min: Any = _NO_VALUE, max: Any = _NO_VALUE) -> Any:
    """Limit the values of ``a`` to ``[a_min, a_max]`` (NumPy 2 signature).

    Either bound may be None (no bound); ``min=``/``max=`` are the array-API spellings.
    All three operands broadcast and promote together (``int array, 0.5`` gives float64).
    Where ``a_min > a_max`` the result is ``a_max``, as in NumPy. Uses the ``clamp``
    primitive, so the gradient follows its rule at the bounds; a missing bound is the
    dtype's extreme (``inf`` for floats).
    """
    check_no_out("clip", out)
    lo = a_min if min is _NO_VALUE else min
    hi = a_max if max is _NO_VALUE else max
    if (a_min is not _NO_VALUE and min is not _NO_VALUE) or \
            (a_max is not _NO_VALUE and max is not _NO_VALUE):
        raise TypeError("clip: pass each bound once (a_min or min, a_max or max).")
    lo = None if lo is _NO_VALUE else lo
    hi = None if hi is _NO_VALUE else hi
    if lo is None and hi is None:
        return same(unary_operand("clip", a))
    a = binary_operand("clip", a)
    bounds = [binary_operand("clip", v) for v in (lo, hi) if v is not None]
    dt = result_type(a, *bounds)
    a, *bounds = promote_args("clip", a, *bounds, np.zeros((), dt))[:-1]
    if is_inexact(dt):
        lowest, highest = -np.inf, np.inf
    elif dt.kind in "iu":
        lowest, highest = np.iinfo(dt).min, np.iinfo(dt).max
    else:
        lowest, highest = False, True
    lo = bounds.pop(0) if lo is not None else np.full((), lowest, dt)
    hi = bounds.pop(0) if hi is not None else np.full((), highest, dt)
    return _ew.clamp(lo, a, hi)


def where(condition: Any, x: Any = None, y: Any = None, /) -> Any:
    """Elementwise ``x`` where ``condition`` is true, else ``y`` (all three broadcast).

    ``x`` and ``y`` promote together; the condition is taken as booleans (nonzero is true).
    The gradient flows to ``x`` where the condition holds and to ``y`` elsewhere (zero to
    the other; note that a NaN or inf in the gradient of the unused branch still poisons it:
    make that branch's input safe with a second where).

    Raises:
        TypeError: the one-argument form, which is ``nonzero(condition)``: its output shape
            depends on the values, so it needs concrete values (use ``fnp.nonzero`` outside
            transforms, or the three-argument form).
    """
    if x is None and y is None:
        raise TypeError("functx.numpy.where(condition) with one argument is nonzero(condition), "
                        "whose result shape depends on the values: use fnp.nonzero on concrete "
                        "values, or where(condition, x, y) to choose elementwise.")
    if x is None or y is None:
        raise TypeError("functx.numpy.where needs either one argument or three (condition, x, "
                        "y); both x and y must be given.")
    cond = truthy(unary_operand("where", condition))
    a, b = promote_args("where", binary_operand("where", x), binary_operand("where", y))
    return _ew.select(cond, a, b)


# ----------------------------------------------------------------------------------------
# comparisons and logic


def _compare(name: str, prim: Callable, x1: Any, x2: Any) -> Any:
    try:
        a, b = promote_args(name, x1, x2)
    except OverflowError:
        # NumPy 2 compares arrays with out-of-range Python ints by value; compare as strong
        # int64/uint64 (or float64) instead, which gives the same answers.
        a, b = promote_args(name, *[asarray(v) if isinstance(v, builtins.int) else v
                                    for v in (x1, x2)])
    return prim(a, b)


@as_ufunc
def equal(x1, x2):
    """Elementwise ``x1 == x2`` (bool)."""
    return _compare("equal", _ew.eq, x1, x2)


@as_ufunc
def not_equal(x1, x2):
    """Elementwise ``x1 != x2`` (bool)."""
    return _compare("not_equal", _ew.ne, x1, x2)


@as_ufunc
def less(x1, x2):
    """Elementwise ``x1 < x2`` (bool)."""
    return _compare("less", _ew.lt, x1, x2)


@as_ufunc
def less_equal(x1, x2):
    """Elementwise ``x1 <= x2`` (bool)."""
    return _compare("less_equal", _ew.le, x1, x2)


@as_ufunc
def greater(x1, x2):
    """Elementwise ``x1 > x2`` (bool)."""
    return _compare("greater", _ew.gt, x1, x2)


@as_ufunc
def greater_equal(x1, x2):
    """Elementwise ``x1 >= x2`` (bool)."""
    return _compare("greater_equal", _ew.ge, x1, x2)


def _bools(name: str, x: Any) -> Any:
    return truthy(unary_operand(name, x))


@as_ufunc
def logical_and(x1, x2):
    """Elementwise logical and of the truth values (nonzero is true)."""
    return _ew.and_(_bools("logical_and", x1), _bools("logical_and", x2))


@as_ufunc
def logical_or(x1, x2):
    """Elementwise logical or of the truth values (nonzero is true)."""
    return _ew.or_(_bools("logical_or", x1), _bools("logical_or", x2))


@as_ufunc
def logical_xor(x1, x2):
    """Elementwise logical exclusive or of the truth values (nonzero is true)."""
    return _ew.xor(_bools("logical_xor", x1), _bools("logical_xor", x2))


@as_ufunc
def logical_not(x):
    """Elementwise logical not (zero is true)."""
    return _ew.not_(truthy(x))


def _bitwise(name: str, prim: Callable, x1: Any, x2: Any) -> Any:
    (a, b), dt = promote_args_dtype(name, x1, x2)
    if dt.kind not in "biu":
        raise TypeError(f"functx.numpy.{name} needs integer or boolean operands, got "
                        f"{dt} (as in NumPy).")
    return prim(a, b)


@as_ufunc
def bitwise_and(x1, x2):
    """Elementwise bitwise and (``&``; logical and on booleans)."""
    return _bitwise("bitwise_and", _ew.and_, x1, x2)


@as_ufunc
def bitwise_or(x1, x2):
    """Elementwise bitwise or (``|``; logical or on booleans)."""
    return _bitwise("bitwise_or", _ew.or_, x1, x2)


@as_ufunc
def bitwise_xor(x1, x2):
    """Elementwise bitwise exclusive or (``^``; logical xor on booleans)."""
    return _bitwise("bitwise_xor", _ew.xor, x1, x2)


@as_ufunc
def invert(x):
    """Elementwise bitwise not (``~``; logical not on booleans)."""
    if x.dtype.kind not in "biu":
        raise TypeError(f"functx.numpy.invert (~) needs integer or boolean operands, got "
                        f"{x.dtype} (as in NumPy).")
    return _ew.not_(x)


bitwise_not = invert


@as_ufunc
def isfinite(x):
    """Elementwise: not inf and not NaN (always true for integers)."""
    return _ew.is_finite(x) if is_inexact(x.dtype) else full_bool(x, True)


@as_ufunc
def isnan(x):
    """Elementwise: is NaN (always false for integers)."""
    return _ew.ne(x, x) if is_inexact(x.dtype) else full_bool(x, False)


@as_ufunc
def isinf(x):
    """Elementwise: is +inf or -inf (always false for integers)."""
    if not is_inexact(x.dtype):
        return full_bool(x, False)
    mag = _ew.abs(x)  # of complex x: real (either part infinite)
    return _ew.eq(mag, np.full((), np.inf, mag.dtype))


def _is_value(name: str, x: Any, value: float) -> Any:
    x = unary_operand(name, x)
    if not is_inexact(x.dtype):
        return full_bool(x, False)
    return _ew.eq(x, np.full((), value, x.dtype))


def isposinf(x: Any, out: Any = None) -> Any:
    """Elementwise: is +inf (always false for integers)."""
    check_no_out("isposinf", out)
    return _is_value("isposinf", x, np.inf)


def isneginf(x: Any, out: Any = None) -> Any:
    """Elementwise: is -inf (always false for integers)."""
    check_no_out("isneginf", out)
    return _is_value("isneginf", x, -np.inf)


@as_ufunc
def signbit(x):
    """Elementwise: the sign bit is set (true for -0.0; false for NaN)."""
    if x.dtype.kind in "biu":
        return full_bool(x, False) if x.dtype.kind != "i" else _ew.lt(x, np.zeros((), x.dtype))
    # atan2(x, -1) is -pi for -0.0 and +pi for +0.0, and has x's sign elsewhere.
    return _ew.lt(_ew.atan2(x, np.full((), -1.0, x.dtype)), np.zeros((), x.dtype))


@as_ufunc
def copysign(x1, x2):
    """Elementwise ``|x1|`` with the sign of ``x2`` (including -0.0)."""
    a, b, dt = promote_inexact("copysign", x1, x2)
    mag = _ew.abs(a)
    return _ew.select(signbit(b), _ew.neg(mag), mag)


def nan_to_num(x: Any, copy: builtins.bool = True, nan: float = 0.0, posinf: Any = None,
               neginf: Any = None) -> Any:
    """NaN replaced by ``nan``, +inf by ``posinf`` (default: the largest finite value) and
    -inf by ``neginf`` (default: the most negative finite value). Integers are unchanged.
    The gradient flows through the finite entries.
    """
    x = unary_operand("nan_to_num", x)
    if not is_inexact(x.dtype):
        return same(x)
    info = finfo(x.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    x = _ew.select(_ew.ne(x, x), np.full((), nan, x.dtype), x)
    x = _ew.select(_ew.eq(x, np.full((), np.inf, x.dtype)), np.full((), posinf, x.dtype), x)
    return _ew.select(_ew.eq(x, np.full((), -np.inf, x.dtype)), np.full((), neginf, x.dtype), x)


@as_ufunc
def heaviside(x1, x2):
    """Elementwise step function: 0 for ``x1 < 0``, ``x2`` at 0, 1 for ``x1 > 0`` (NaN stays)."""
    a, b, dt = promote_inexact("heaviside", x1, x2)
    zero, one = np.zeros((), dt), np.ones((), dt)
    step = _ew.select(_ew.lt(a, zero), zero, _ew.select(_ew.gt(a, zero), one, b))
    return _ew.select(_ew.ne(a, a), a, step)
