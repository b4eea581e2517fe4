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
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Callable

import numpy as np

from functx.tracing import Tracer
from functx.numpy._promotion import (
    PY_SCALARS,
    asarray,
    astype,
    check_no_out,
    is_tracer,
    promote_args,
    promote_args_dtype,
    result_type,
)
from functx.numpy import _shape as _fshape
from functx.primitives import elementwise as _ew

__all__ = [
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder",
    "mod", "fmod", "divmod", "power", "float_power", "negative", "positive", "abs",
    "absolute", "fabs", "sign", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "sqrt", "square", "reciprocal", "cbrt", "sin", "cos", "tan", "arcsin", "arccos",
    "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "hypot",
    "deg2rad", "rad2deg", "radians", "degrees", "maximum", "minimum", "fmax", "fmin",
    "floor", "ceil", "round", "around", "rint", "trunc", "fix", "clip", "where", "equal",
    "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_not", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "invert", "bitwise_not", "isfinite", "isnan", "isinf", "isposinf", "isneginf",
    "signbit", "copysign", "nan_to_num", "logaddexp", "logaddexp2", "sinc", "heaviside",
]

# Eager evaluation of a branch that a select then discards may divide inf by inf (and the
# like); NumPy's own functions raise no warning there, so neither do these composites.
def _quiet_unused_branch() -> Any:
    return np.errstate(invalid="ignore", divide="ignore")

_LN2 = math.log(2.0)
_LOG2E = 1.0 / math.log(2.0)
_LOG10E = 1.0 / math.log(10.0)


# ----------------------------------------------------------------------------------------
# operand handling


def _unary_operand(x: Any, dtype: Any = None) -> Any:
    """A tracer or array for ``x`` (Python scalars become strong 0-d arrays, as in NumPy)."""
    if not (is_tracer(x) or isinstance(x, np.ndarray)):
        x = asarray(x)
    return x if dtype is None else astype(x, dtype)


def _binary_operand(x: Any, dtype: Any = None) -> Any:
    """Like :func:`_unary_operand`, but Python scalars stay (weak) Python scalars."""
    if dtype is not None:
        return astype(x, dtype)
    if is_tracer(x) or isinstance(x, (np.ndarray,) + PY_SCALARS):
        return x
    return asarray(x)


# Operand types the wrappers pass on untouched (the fast path of every call).
_READY = frozenset({np.ndarray, Tracer})
_READY_OR_SCALAR = _READY | set(PY_SCALARS)


def _ufunc(impl: Callable) -> Callable:
    """Wrap ``impl`` (taking 1 or 2 operands) into a NumPy-style ufunc function.

    The wrapper has NumPy's signature ``f(x, /, out=None, *, dtype=None)`` (or
    ``f(x1, x2, /, ...)``), takes the name and docstring of ``impl``, rejects ``out=`` and
    casts the inputs to ``dtype`` when one is given.
    """
    name = impl.__name__
    if impl.__code__.co_argcount == 1:
        def ufunc(x, /, out=None, *, dtype=None):
            if out is not None or dtype is not None or type(x) not in _READY:
                check_no_out(name, out)
                x = _unary_operand(x, dtype)
            return impl(x)
    else:
        def ufunc(x1, x2, /, out=None, *, dtype=None):
            if (out is not None or dtype is not None or type(x1) not in _READY_OR_SCALAR
                    or type(x2) not in _READY_OR_SCALAR):
                check_no_out(name, out)
                x1, x2 = _binary_operand(x1, dtype), _binary_operand(x2, dtype)
            return impl(x1, x2)
    ufunc.__name__ = ufunc.__qualname__ = name
    ufunc.__doc__ = impl.__doc__
    ufunc.__module__ = impl.__module__
    return ufunc


def _inexact_dtype(dt: np.dtype) -> np.dtype:
    """The dtype NumPy's float-only ufunc loops pick for an input of dtype ``dt``."""
    return np.promote_types(dt, np.float16) if dt.kind in "biu" else dt


def _to_inexact(x: Any) -> Any:
    return astype(x, _inexact_dtype(x.dtype)) if x.dtype.kind in "biu" else x


def _promote_inexact(name: str, x1: Any, x2: Any) -> tuple:
    """Promote two operands together, then to a float dtype (as float-only ufuncs do)."""
    dt = _inexact_dtype(result_type(x1, x2))
    a, b, _ = promote_args_dtype(name, x1, x2, np.zeros((), dt))[0]
    return a, b, dt


def _promote_int8_for_bool(name: str, x1: Any, x2: Any) -> tuple:
    """Promote two operands; two booleans become int8 (NumPy's loop for these ufuncs)."""
    if result_type(x1, x2) == np.bool_:
        return astype(x1, np.int8), astype(x2, np.int8), np.dtype(np.int8)
    (a, b), dt = promote_args_dtype(name, x1, x2)
    return a, b, dt


def _require_not_bool(name: str, x: Any, instead: str) -> None:
    if x.dtype == np.bool_:
        raise TypeError(f"functx.numpy.{name} is not supported for booleans (as in NumPy); "
                        f"{instead}")


def _zero(x: Any) -> np.ndarray:
    """A 0-d zero of ``x``'s dtype (primitives need operands of one dtype)."""
    return np.zeros((), x.dtype)


def _same(x: Any) -> Any:
    """``x`` as a result: a tracer as it is, an array as a read-only view (never the
    caller's own, possibly writable, array)."""
    return _fshape.unchanged(x)


def _full_bool(x: Any, value: builtins.bool) -> np.ndarray:
    """A read-only bool array shaped like ``x`` (a result that does not depend on values)."""
    out = np.full(tuple(x.shape), value, dtype=np.bool_)
    out.flags.writeable = False
    return out


def _truthy(x: Any) -> Any:
    """``x`` as booleans (nonzero is True)."""
    return x if x.dtype == np.bool_ else not_equal(x, 0)


# ----------------------------------------------------------------------------------------
# arithmetic


@_ufunc
def add(x1, x2):
    """Elementwise ``x1 + x2`` (on booleans: logical or)."""
    (a, b), dt = promote_args_dtype("add", x1, x2)
    return _ew.or_(a, b) if dt == np.bool_ else _ew.add(a, b)


@_ufunc
def subtract(x1, x2):
    """Elementwise ``x1 - x2``. Booleans raise TypeError (use logical_xor), as in NumPy."""
    (a, b), dt = promote_args_dtype("subtract", x1, x2)
    if dt == np.bool_:
        raise TypeError("functx.numpy.subtract (the - operator) is not supported for "
                        "booleans, as in NumPy; use logical_xor (^) instead.")
    return _ew.sub(a, b)


@_ufunc
def multiply(x1, x2):
    """Elementwise ``x1 * x2`` (on booleans: logical and)."""
    (a, b), dt = promote_args_dtype("multiply", x1, x2)
    return _ew.and_(a, b) if dt == np.bool_ else _ew.mul(a, b)


@_ufunc
def true_divide(x1, x2):
    """Elementwise ``x1 / x2``; integer and boolean operands give float64 (as in NumPy)."""
    dt = result_type(x1, x2)
    if dt.kind in "biu":
        dt = np.dtype(np.float64)
    a, b = promote_args("true_divide", x1, x2, np.zeros((), dt))[:2]
    return _ew.div(a, b)


divide = true_divide


@_ufunc
def floor_divide(x1, x2):
    """Elementwise ``x1 // x2``: the floor of the quotient, as NumPy and Python compute it.

    For floats this is NumPy's exact algorithm (``(x1 - x1 % x2) / x2`` rounded), not
    ``floor(x1 / x2)``: e.g. ``1 // 0.1 == 9``. Division by zero gives ``x1 / 0``. The
    gradient is zero.
    """
    a, b, dt = _promote_int8_for_bool("floor_divide", x1, x2)
    if dt.kind in "iu":
        return _ew.div(a, b)
    quotient = _ew.round(_ew.div(_ew.sub(a, _ew.rem(a, b)), b), rounding_method="half_to_even")
    return _ew.select(_ew.eq(b, np.zeros((), dt)), _ew.div(a, b), quotient)


@_ufunc
def remainder(x1, x2):
    """Elementwise ``x1 % x2`` with the sign of the divisor (NumPy's and Python's ``%``)."""
    a, b, dt = _promote_int8_for_bool("remainder", x1, x2)
    return _ew.rem(a, b)


mod = remainder


@_ufunc
def fmod(x1, x2):
    """Elementwise C-style remainder: the result has the sign of the dividend ``x1``."""
    a, b, dt = _promote_int8_for_bool("fmod", x1, x2)
    b = _ew.abs(b)
    return _ew.select(_ew.lt(a, np.zeros((), dt)), _ew.neg(_ew.rem(_ew.neg(a), b)), _ew.rem(a, b))


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


@_ufunc
def power(x1, x2):
    """Elementwise ``x1 ** x2``.

    A Python integer exponent (or an integral Python float such as ``2.0``) uses the
    ``integer_pow`` primitive (exact repeated multiplication, well-defined gradients at
    ``x1 == 0``); ``x ** 0.5`` is ``sqrt``; other float exponents use ``pow``. Integers to
    negative integer powers raise ValueError as in NumPy.
    """
    if type(x2) is builtins.int and type(x1) in _READY and x1.dtype.kind in "fc" \
            and not getattr(x1, "weak_type", False):
        return _ew.integer_pow(x1, y=x2)  # the common x ** 2: nothing to promote
    if isinstance(x2, PY_SCALARS) and not isinstance(x2, (builtins.bool, builtins.complex)):
        dt = result_type(x1, x2)
        if dt == np.bool_:
            dt = np.dtype(np.int8)
        integral = isinstance(x2, builtins.int) or (
            math.isfinite(x2) and x2 == builtins.int(x2) and builtins.abs(x2) <= 2 ** 31)
        if integral:
            if dt.kind in "iu" and x2 < 0:
                raise ValueError("Integers to negative integer powers are not allowed.")
            return _ew.integer_pow(astype(x1, dt), y=builtins.int(x2))
        if x2 == 0.5:
            return _ew.sqrt(astype(x1, dt))
    a, b, dt = _promote_int8_for_bool("power", x1, x2)
    if dt.kind in "iu":
        return _integer_power_by_squaring(asarray(a) if isinstance(a, PY_SCALARS) else a,
                                          asarray(b) if isinstance(b, PY_SCALARS) else b)
    return _ew.pow(a, b)


@_ufunc
def float_power(x1, x2):
    """Elementwise ``x1 ** x2`` computed in float64 (or complex128) at least."""
    dt = result_type(x1, x2, np.float64)
    return _ew.pow(astype(x1, dt), astype(x2, dt))


@_ufunc
def negative(x):
    """Elementwise ``-x``. Booleans raise TypeError (use ``~`` / logical_not), as in NumPy."""
    _require_not_bool("negative", x, "use ~ (invert) or logical_not instead.")
    return _ew.neg(x)


@_ufunc
def positive(x):
    """Elementwise ``+x`` (the value itself)."""
    _require_not_bool("positive", x, "the value itself is what you want.")
    return _same(x)


@_ufunc
def absolute(x):
    """Elementwise absolute value (booleans are returned as they are)."""
    return _same(x) if x.dtype == np.bool_ else _ew.abs(x)


abs = absolute


@_ufunc
def fabs(x):
    """Elementwise absolute value as a float (integers promote to float)."""
    return _ew.abs(_to_inexact(x))


@_ufunc
def sign(x):
    """Elementwise sign: -1, 0 or 1 (NaN stays NaN). Booleans raise TypeError, as in NumPy."""
    _require_not_bool("sign", x, "convert to an integer dtype first.")
    return _ew.sign(x)


# ----------------------------------------------------------------------------------------
# exponentials, logarithms, powers


@_ufunc
def exp(x):
    """Elementwise ``e ** x``."""
    return _ew.exp(_to_inexact(x))


@_ufunc
def exp2(x):
    """Elementwise ``2 ** x`` (through ``pow``, exact for integral ``x``)."""
    x = _to_inexact(x)
    return _ew.pow(np.full((), 2.0, x.dtype), x)


@_ufunc
def expm1(x):
    """Elementwise ``exp(x) - 1``, accurate for small ``x``."""
    return _ew.expm1(_to_inexact(x))


@_ufunc
def log(x):
    """Elementwise natural logarithm."""
    return _ew.log(_to_inexact(x))


@_ufunc
def log2(x):
    """Elementwise base-2 logarithm (``log(x) * log2(e)``; within an ulp or two of NumPy's)."""
    x = _to_inexact(x)
    return _ew.mul(_ew.log(x), np.full((), _LOG2E, x.dtype))


@_ufunc
def log10(x):
    """Elementwise base-10 logarithm (``log(x) * log10(e)``; within an ulp or two of NumPy's)."""
    x = _to_inexact(x)
    return _ew.mul(_ew.log(x), np.full((), _LOG10E, x.dtype))


@_ufunc
def log1p(x):
    """Elementwise ``log(1 + x)``, accurate for small ``x``."""
    return _ew.log1p(_to_inexact(x))


@_ufunc
def sqrt(x):
    """Elementwise non-negative square root (NaN for negative inputs)."""
    return _ew.sqrt(_to_inexact(x))


@_ufunc
def square(x):
    """Elementwise ``x * x`` (booleans give int8, as in NumPy)."""
    return _ew.integer_pow(astype(x, np.int8) if x.dtype == np.bool_ else x, y=2)


@_ufunc
def reciprocal(x):
    """Elementwise ``1 / x`` in ``x``'s dtype (integers: 1 and -1 stay, others become 0)."""
    if x.dtype.kind in "biu":
        x = astype(x, np.int8) if x.dtype == np.bool_ else x
        return _ew.select(_ew.eq(_ew.abs(x), np.ones((), x.dtype)), x, np.zeros((), x.dtype))
    return _ew.div(np.ones((), x.dtype), x)


@_ufunc
def cbrt(x):
    """Elementwise real cube root: ``sign(x) * |x| ** (1/3)`` (within an ulp of NumPy's)."""
    x = _to_inexact(x)
    root = _ew.pow(_ew.abs(x), np.full((), 1.0 / 3.0, x.dtype))
    return _ew.select(_ew.lt(x, _zero(x)), _ew.neg(root), root)


# ----------------------------------------------------------------------------------------
# trigonometric and hyperbolic


@_ufunc
def sin(x):
    """Elementwise sine (radians)."""
    return _ew.sin(_to_inexact(x))


@_ufunc
def cos(x):
    """Elementwise cosine (radians)."""
    return _ew.cos(_to_inexact(x))


@_ufunc
def tan(x):
    """Elementwise tangent (radians)."""
    return _ew.tan(_to_inexact(x))


@_ufunc
def arcsin(x):
    """Elementwise inverse sine, in [-pi/2, pi/2]."""
    return _ew.asin(_to_inexact(x))


@_ufunc
def arccos(x):
    """Elementwise inverse cosine, in [0, pi]."""
    return _ew.acos(_to_inexact(x))


@_ufunc
def arctan(x):
    """Elementwise inverse tangent, in [-pi/2, pi/2]."""
    return _ew.atan(_to_inexact(x))


@_ufunc
def arctan2(x1, x2):
    """Elementwise angle of the point ``(x2, x1)``: ``arctan(x1 / x2)`` in the right quadrant."""
    y, x, _ = _promote_inexact("arctan2", x1, x2)
    return _ew.atan2(y, x)


@_ufunc
def sinh(x):
    """Elementwise hyperbolic sine."""
    return _ew.sinh(_to_inexact(x))


@_ufunc
def cosh(x):
    """Elementwise hyperbolic cosine."""
    return _ew.cosh(_to_inexact(x))


@_ufunc
def tanh(x):
    """Elementwise hyperbolic tangent."""
    return _ew.tanh(_to_inexact(x))


def _double_where(pred: Any, x: Any, if_true: Callable, if_false: Callable,
                  safe: Any) -> Any:
    """``select(pred, if_true(x), if_false(x))`` where each branch only ever sees inputs it
    accepts: the other branch's entries are replaced by ``safe``, so neither its value nor
    its gradient can be NaN (a NaN in an unused branch's gradient would poison the sum).
    """
    return _ew.select(pred, if_true(_ew.select(pred, x, safe)),
                      if_false(_ew.select(pred, safe, x)))


@_ufunc
def arcsinh(x):
    """Elementwise inverse hyperbolic sine.

    On ``t = |x|``: ``log1p(t + t*t / (1 + sqrt(1 + t*t)))`` (accurate near 0), and
    ``log(t) + log(2)`` beyond ``1/sqrt(eps)`` where ``t*t`` could overflow (a double where
    keeps each formula to its own inputs). The sign is restored by a select rather than as
    ``sign(x) * ...``, which keeps the gradient at 0 equal to 1 (``abs``'s gradient at 0 is 0).
    """
    x = _to_inexact(x)
    neg = _ew.lt(x, _zero(x))
    t = _ew.select(neg, _ew.neg(x), x)
    one = np.ones((), x.dtype)
    big = _ew.gt(t, np.full((), 1.0 / math.sqrt(np.finfo(x.dtype).eps), x.dtype))
    r = _double_where(
        big, t, lambda u: _ew.add(_ew.log(u), np.full((), _LN2, x.dtype)),
        lambda u: _ew.log1p(_ew.add(u, _ew.div(_ew.mul(u, u), _ew.add(
            one, _ew.sqrt(_ew.add(one, _ew.mul(u, u))))))), one)
    return _ew.select(neg, _ew.neg(r), r)


@_ufunc
def arccosh(x):
    """Elementwise inverse hyperbolic cosine (NaN below 1).

    ``log1p(u + sqrt(u) * sqrt(x + 1))`` with ``u = x - 1``: accurate near 1, no overflow
    below ~8e307.
    """
    x = _to_inexact(x)
    one = np.ones((), x.dtype)
    u = _ew.sub(x, one)
    return _ew.log1p(_ew.add(u, _ew.mul(_ew.sqrt(u), _ew.sqrt(_ew.add(x, one)))))


@_ufunc
def arctanh(x):
    """Elementwise inverse hyperbolic tangent: ``(log1p(x) - log1p(-x)) / 2``."""
    x = _to_inexact(x)
    return _ew.mul(_ew.sub(_ew.log1p(x), _ew.log1p(_ew.neg(x))), np.full((), 0.5, x.dtype))


@_ufunc
def hypot(x1, x2):
    """Elementwise ``sqrt(x1**2 + x2**2)`` without overflow or underflow.

    Computed as ``m * sqrt(1 + (n / m)**2)`` with ``m = max(|x1|, |x2|)``,
    ``n = min(|x1|, |x2|)``. Where ``m == 0`` the ratio is taken against a safe 1 (double
    where), so the value is 0 and the gradient at (0, 0) is 0 rather than NaN; infinities
    give inf even next to NaN, as in NumPy. At ``|x1| == |x2|`` the max/min tie-splitting
    gives the exact gradient.
    """
    a, b, dt = _promote_inexact("hypot", x1, x2)
    a, b = _ew.abs(a), _ew.abs(b)
    zero, one, inf = np.zeros((), dt), np.ones((), dt), np.full((), np.inf, dt)
    with _quiet_unused_branch():  # inf / inf in entries the final select discards
        m, n = _ew.max(a, b), _ew.min(a, b)
        is_zero = _ew.eq(m, zero)
        r = _ew.div(n, _ew.select(is_zero, one, m))
        out = _ew.select(is_zero, zero, _ew.mul(m, _ew.sqrt(_ew.add(one, _ew.mul(r, r)))))
    return _ew.select(_ew.or_(_ew.eq(a, inf), _ew.eq(b, inf)), inf, out)


@_ufunc
def deg2rad(x):
    """Elementwise degrees to radians (``x * (pi / 180)``)."""
    x = _to_inexact(x)
    return _ew.mul(x, np.full((), math.pi / 180.0, x.dtype))


@_ufunc
def rad2deg(x):
    """Elementwise radians to degrees (``x * (180 / pi)``)."""
    x = _to_inexact(x)
    return _ew.mul(x, np.full((), 180.0 / math.pi, x.dtype))


radians, degrees = deg2rad, rad2deg


def _log_add_exp(name: str, x1: Any, x2: Any, base2: builtins.bool) -> Any:
    """``max + log1p(exp(-|x1 - x2|))`` in base e or 2 (see :func:`logaddexp`)."""
    a, b, dt = _promote_inexact(name, x1, x2)
    zero = np.zeros((), dt)
    with _quiet_unused_branch():  # inf - inf where the select takes 0 instead
        d = _ew.select(_ew.eq(a, b), zero, _ew.sub(a, b))
    t = _ew.neg(_ew.abs(d))
    if base2:
        tail = _ew.mul(_ew.log1p(_ew.pow(np.full((), 2.0, dt), t)), np.full((), _LOG2E, dt))
    else:
        tail = _ew.log1p(_ew.exp(t))
    return _ew.add(_ew.max(a, b), tail)


@_ufunc
def logaddexp(x1, x2):
    """Elementwise ``log(exp(x1) + exp(x2))``, stable for large and ``-inf`` inputs.

    ``max(x1, x2) + log1p(exp(-|x1 - x2|))``; where ``x1 == x2`` (including both ``-inf`` or
    both ``inf``) the difference is taken as 0, so no NaN appears. The gradient is
    ``sigmoid(x1 - x2)`` (exactly 1/2 each at ties).
    """
    return _log_add_exp("logaddexp", x1, x2, base2=False)


@_ufunc
def logaddexp2(x1, x2):
    """Elementwise ``log2(2**x1 + 2**x2)``, stable as :func:`logaddexp` is."""
    return _log_add_exp("logaddexp2", x1, x2, base2=True)


@_ufunc
def sinc(x):
    """Elementwise normalised sinc, ``sin(pi x) / (pi x)`` (1 at 0).

    NumPy's own formula: ``y = pi * x`` with exact zeros replaced by the dtype's epsilon,
    where ``sin(y) / y`` is exactly 1. The replacement is a constant, so the gradient at 0
    is 0 (correct) and nowhere NaN.
    """
    x = astype(x, np.float64) if x.dtype.kind in "biu" else x
    y = _ew.mul(np.full((), math.pi, x.dtype), x)
    y = _ew.select(_ew.eq(y, _zero(y)), np.full((), np.finfo(x.dtype).eps, x.dtype), y)
    return _ew.div(_ew.sin(y), y)


# ----------------------------------------------------------------------------------------
# extrema, rounding, clipping, selection


@_ufunc
def maximum(x1, x2):
    """Elementwise maximum (NaN propagates; the gradient is split evenly at ties)."""
    (a, b), dt = promote_args_dtype("maximum", x1, x2)
    return _ew.or_(a, b) if dt == np.bool_ else _ew.max(a, b)


@_ufunc
def minimum(x1, x2):
    """Elementwise minimum (NaN propagates; the gradient is split evenly at ties)."""
    (a, b), dt = promote_args_dtype("minimum", x1, x2)
    return _ew.and_(a, b) if dt == np.bool_ else _ew.min(a, b)


def _nan_ignoring(name: str, extremum: Callable, x1: Any, x2: Any) -> Any:
    (a, b), dt = promote_args_dtype(name, x1, x2)
    if dt.kind not in "fc":
        return extremum(a, b)
    return _ew.select(_ew.ne(b, b), a, _ew.select(_ew.ne(a, a), b, extremum(a, b)))


@_ufunc
def fmax(x1, x2):
    """Elementwise maximum ignoring NaN (NaN only where both are NaN)."""
    return _nan_ignoring("fmax", maximum, x1, x2)


@_ufunc
def fmin(x1, x2):
    """Elementwise minimum ignoring NaN (NaN only where both are NaN)."""
    return _nan_ignoring("fmin", minimum, x1, x2)


@_ufunc
def floor(x):
    """Elementwise floor (integers are returned as they are). Zero gradient."""
    return _same(x) if x.dtype.kind in "biu" else _ew.floor(x)


@_ufunc
def ceil(x):
    """Elementwise ceiling (integers are returned as they are). Zero gradient."""
    return _same(x) if x.dtype.kind in "biu" else _ew.ceil(x)


@_ufunc
def trunc(x):
    """Elementwise rounding toward zero (integers are returned as they are). Zero gradient."""
    if x.dtype.kind in "biu":
        return _same(x)
    return _ew.select(_ew.lt(x, _zero(x)), _ew.ceil(x), _ew.floor(x))


def fix(x: Any, out: Any = None) -> Any:
    """Round toward zero (NumPy's ``fix``; the same as :func:`trunc`)."""
    check_no_out("fix", out)
    return trunc(x)


@_ufunc
def rint(x):
    """Elementwise rounding to the nearest integer, halves to even (float result)."""
    return _ew.round(_to_inexact(x), rounding_method="half_to_even")


def round(a: Any, decimals: builtins.int = 0, out: Any = None) -> Any:
    """Round to ``decimals`` decimal places, halves to even, exactly as NumPy does.

    For ``decimals > 0`` this is ``rint(a * 10**decimals) / 10**decimals`` (so, as in NumPy,
    not always the closest decimal); negative ``decimals`` round to tens, hundreds...
    Integers are returned as they are for ``decimals >= 0``. The gradient is zero.
    """
    check_no_out("round", out)
    a = _unary_operand(a)
    decimals = builtins.int(decimals)
    if a.dtype.kind in "iu":
        if decimals >= 0:
            return _same(a)
        return astype(round(astype(a, np.float64), decimals), a.dtype)
    a = _to_inexact(a)
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
        return _same(_unary_operand(a))
    a = _binary_operand(a)
    bounds = [_binary_operand(v) for v in (lo, hi) if v is not None]
    dt = result_type(a, *bounds)
    a, *bounds = promote_args("clip", a, *bounds, np.zeros((), dt))[:-1]
    if dt.kind in "fc":
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
    cond = _truthy(_unary_operand(condition))
    a, b = promote_args("where", _binary_operand(x), _binary_operand(y))
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


@_ufunc
def equal(x1, x2):
    """Elementwise ``x1 == x2`` (bool)."""
    return _compare("equal", _ew.eq, x1, x2)


@_ufunc
def not_equal(x1, x2):
    """Elementwise ``x1 != x2`` (bool)."""
    return _compare("not_equal", _ew.ne, x1, x2)


@_ufunc
def less(x1, x2):
    """Elementwise ``x1 < x2`` (bool)."""
    return _compare("less", _ew.lt, x1, x2)


@_ufunc
def less_equal(x1, x2):
    """Elementwise ``x1 <= x2`` (bool)."""
    return _compare("less_equal", _ew.le, x1, x2)


@_ufunc
def greater(x1, x2):
    """Elementwise ``x1 > x2`` (bool)."""
    return _compare("greater", _ew.gt, x1, x2)


@_ufunc
def greater_equal(x1, x2):
    """Elementwise ``x1 >= x2`` (bool)."""
    return _compare("greater_equal", _ew.ge, x1, x2)


def _bools(x: Any) -> Any:
    return _truthy(_unary_operand(x))


@_ufunc
def logical_and(x1, x2):
    """Elementwise logical and of the truth values (nonzero is true)."""
    return _ew.and_(_bools(x1), _bools(x2))


@_ufunc
def logical_or(x1, x2):
    """Elementwise logical or of the truth values (nonzero is true)."""
    return _ew.or_(_bools(x1), _bools(x2))


@_ufunc
def logical_xor(x1, x2):
    """Elementwise logical exclusive or of the truth values (nonzero is true)."""
    return _ew.xor(_bools(x1), _bools(x2))


@_ufunc
def logical_not(x):
    """Elementwise logical not (zero is true)."""
    return _ew.not_(_truthy(x))


def _bitwise(name: str, prim: Callable, x1: Any, x2: Any) -> Any:
    (a, b), dt = promote_args_dtype(name, x1, x2)
    if dt.kind not in "biu":
        raise TypeError(f"functx.numpy.{name} needs integer or boolean operands, got "
                        f"{dt} (as in NumPy).")
    return prim(a, b)


@_ufunc
def bitwise_and(x1, x2):
    """Elementwise bitwise and (``&``; logical and on booleans)."""
    return _bitwise("bitwise_and", _ew.and_, x1, x2)


@_ufunc
def bitwise_or(x1, x2):
    """Elementwise bitwise or (``|``; logical or on booleans)."""
    return _bitwise("bitwise_or", _ew.or_, x1, x2)


@_ufunc
def bitwise_xor(x1, x2):
    """Elementwise bitwise exclusive or (``^``; logical xor on booleans)."""
    return _bitwise("bitwise_xor", _ew.xor, x1, x2)


@_ufunc
def invert(x):
    """Elementwise bitwise not (``~``; logical not on booleans)."""
    if x.dtype.kind not in "biu":
        raise TypeError(f"functx.numpy.invert (~) needs integer or boolean operands, got "
                        f"{x.dtype} (as in NumPy).")
    return _ew.not_(x)


bitwise_not = invert


@_ufunc
def isfinite(x):
    """Elementwise: not inf and not NaN (always true for integers)."""
    return _ew.is_finite(x) if x.dtype.kind in "fc" else _full_bool(x, True)


@_ufunc
def isnan(x):
    """Elementwise: is NaN (always false for integers)."""
    return _ew.ne(x, x) if x.dtype.kind in "fc" else _full_bool(x, False)


@_ufunc
def isinf(x):
    """Elementwise: is +inf or -inf (always false for integers)."""
    if x.dtype.kind not in "fc":
        return _full_bool(x, False)
    return _ew.eq(_ew.abs(x), np.full((), np.inf, x.dtype))


def _is_value(x: Any, value: float) -> Any:
    x = _unary_operand(x)
    if x.dtype.kind not in "fc":
        return _full_bool(x, False)
    return _ew.eq(x, np.full((), value, x.dtype))


def isposinf(x: Any, out: Any = None) -> Any:
    """Elementwise: is +inf (always false for integers)."""
    check_no_out("isposinf", out)
    return _is_value(x, np.inf)


def isneginf(x: Any, out: Any = None) -> Any:
    """Elementwise: is -inf (always false for integers)."""
    check_no_out("isneginf", out)
    return _is_value(x, -np.inf)


@_ufunc
def signbit(x):
    """Elementwise: the sign bit is set (true for -0.0; false for NaN)."""
    if x.dtype.kind in "biu":
        return _full_bool(x, False) if x.dtype.kind != "i" else _ew.lt(x, np.zeros((), x.dtype))
    # atan2(x, -1) is -pi for -0.0 and +pi for +0.0, and has x's sign elsewhere.
    return _ew.lt(_ew.atan2(x, np.full((), -1.0, x.dtype)), np.zeros((), x.dtype))


@_ufunc
def copysign(x1, x2):
    """Elementwise ``|x1|`` with the sign of ``x2`` (including -0.0)."""
    a, b, dt = _promote_inexact("copysign", x1, x2)
    mag = _ew.abs(a)
    return _ew.select(signbit(b), _ew.neg(mag), mag)


def nan_to_num(x: Any, copy: builtins.bool = True, nan: float = 0.0, posinf: Any = None,
               neginf: Any = None) -> Any:
    """NaN replaced by ``nan``, +inf by ``posinf`` (default: the largest finite value) and
    -inf by ``neginf`` (default: the most negative finite value). Integers are unchanged.
    The gradient flows through the finite entries.
    """
    x = _unary_operand(x)
    if x.dtype.kind not in "fc":
        return _same(x)
    info = np.finfo(x.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    x = _ew.select(_ew.ne(x, x), np.full((), nan, x.dtype), x)
    x = _ew.select(_ew.eq(x, np.full((), np.inf, x.dtype)), np.full((), posinf, x.dtype), x)
    return _ew.select(_ew.eq(x, np.full((), -np.inf, x.dtype)), np.full((), neginf, x.dtype), x)


@_ufunc
def heaviside(x1, x2):
    """Elementwise step function: 0 for ``x1 < 0``, ``x2`` at 0, 1 for ``x1 > 0`` (NaN stays)."""
    a, b, dt = _promote_inexact("heaviside", x1, x2)
    zero, one = np.zeros((), dt), np.ones((), dt)
    step = _ew.select(_ew.lt(a, zero), zero, _ew.select(_ew.gt(a, zero), one, b))
    return _ew.select(_ew.ne(a, a), a, step)
