"""NumPy's transcendental ufuncs: exponentials, logarithms and powers (``exp``... ``cbrt``),
trigonometric and hyperbolic functions, and their composites (``arcsinh``, ``hypot``,
``logaddexp``, ``sinc``...). Dtype rules, differences from NumPy and the gradient
conventions are described in ``functx.numpy._ufuncs``; use them through ``functx.numpy``.
"""
from __future__ import annotations

import builtins
import math
from typing import Any, Callable

import numpy as np

from functx.numpy._promotion import astype, finfo
from functx.numpy._ufunc_base import (
    as_ufunc,
    inexact_ufunc,
    promote_inexact,
    quiet_unused_branch,
    to_inexact,
    zero_of,
)
from functx.primitives import elementwise as _ew

__all__ = [
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "square", "reciprocal",
    "cbrt", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh",
    "tanh", "arcsinh", "arccosh", "arctanh", "hypot", "deg2rad", "rad2deg", "radians",
    "degrees", "logaddexp", "logaddexp2", "sinc",
]

_LN2 = math.log(2.0)
_LOG2E = 1.0 / math.log(2.0)
_LOG10E = 1.0 / math.log(10.0)


# ----------------------------------------------------------------------------------------
# exponentials, logarithms, powers


@inexact_ufunc(_ew.exp_p)
def exp(x):
    """Elementwise ``e ** x``."""
    return _ew.exp(to_inexact(x))


@as_ufunc
def exp2(x):
    """Elementwise ``2 ** x`` (through ``pow``, exact for integral ``x``)."""
    x = to_inexact(x)
    return _ew.pow(np.full((), 2.0, x.dtype), x)


@inexact_ufunc(_ew.expm1_p)
def expm1(x):
    """Elementwise ``exp(x) - 1``, accurate for small ``x``."""
    return _ew.expm1(to_inexact(x))


@inexact_ufunc(_ew.log_p)
def log(x):
    """Elementwise natural logarithm."""
    return _ew.log(to_inexact(x))


@as_ufunc
def log2(x):
    """Elementwise base-2 logarithm (``log(x) * log2(e)``; within an ulp or two of NumPy's)."""
    x = to_inexact(x)
    return _ew.mul(_ew.log(x), np.full((), _LOG2E, x.dtype))


@as_ufunc
def log10(x):
    """Elementwise base-10 logarithm (``log(x) * log10(e)``; within an ulp or two of NumPy's)."""
    x = to_inexact(x)
    return _ew.mul(_ew.log(x), np.full((), _LOG10E, x.dtype))


@inexact_ufunc(_ew.log1p_p)
def log1p(x):
    """Elementwise ``log(1 + x)``, accurate for small ``x``."""
    return _ew.log1p(to_inexact(x))


@inexact_ufunc(_ew.sqrt_p)
def sqrt(x):
    """Elementwise non-negative square root (NaN for negative inputs)."""
    return _ew.sqrt(to_inexact(x))


@as_ufunc
def square(x):
    """Elementwise ``x * x`` (booleans give int8, as in NumPy)."""
    return _ew.integer_pow(astype(x, np.int8) if x.dtype == np.bool_ else x, y=2)


@as_ufunc
def reciprocal(x):
    """Elementwise ``1 / x`` in ``x``'s dtype (integers: 1 and -1 stay, others become 0)."""
    if x.dtype.kind in "biu":
        x = astype(x, np.int8) if x.dtype == np.bool_ else x
        return _ew.select(_ew.eq(_ew.abs(x), np.ones((), x.dtype)), x, np.zeros((), x.dtype))
    return _ew.div(np.ones((), x.dtype), x)


@as_ufunc
def cbrt(x):
    """Elementwise real cube root: ``sign(x) * |x| ** (1/3)`` (within an ulp of NumPy's).

    The gradient is ``1 / (3 cbrt(x)**2)``: ``inf`` at 0, as in JAX (``|x|`` is taken with a
    select, whose derivative at 0 is 1, so ``0 * inf`` is never formed).
    """
    x = to_inexact(x)
    negative = _ew.lt(x, zero_of(x))
    root = _ew.pow(_ew.select(negative, _ew.neg(x), x), np.full((), 1.0 / 3.0, x.dtype))
    return _ew.select(negative, _ew.neg(root), root)


# ----------------------------------------------------------------------------------------
# trigonometric and hyperbolic


@inexact_ufunc(_ew.sin_p)
def sin(x):
    """Elementwise sine (radians)."""
    return _ew.sin(to_inexact(x))


@inexact_ufunc(_ew.cos_p)
def cos(x):
    """Elementwise cosine (radians)."""
    return _ew.cos(to_inexact(x))


@inexact_ufunc(_ew.tan_p)
def tan(x):
    """Elementwise tangent (radians)."""
    return _ew.tan(to_inexact(x))


@inexact_ufunc(_ew.asin_p)
def arcsin(x):
    """Elementwise inverse sine, in [-pi/2, pi/2]."""
    return _ew.asin(to_inexact(x))


@inexact_ufunc(_ew.acos_p)
def arccos(x):
    """Elementwise inverse cosine, in [0, pi]."""
    return _ew.acos(to_inexact(x))


@inexact_ufunc(_ew.atan_p)
def arctan(x):
    """Elementwise inverse tangent, in [-pi/2, pi/2]."""
    return _ew.atan(to_inexact(x))


@as_ufunc
def arctan2(x1, x2):
    """Elementwise angle of the point ``(x2, x1)``: ``arctan(x1 / x2)`` in the right quadrant."""
    y, x, _ = promote_inexact("arctan2", x1, x2)
    return _ew.atan2(y, x)


@inexact_ufunc(_ew.sinh_p)
def sinh(x):
    """Elementwise hyperbolic sine."""
    return _ew.sinh(to_inexact(x))


@inexact_ufunc(_ew.cosh_p)
def cosh(x):
    """Elementwise hyperbolic cosine."""
    return _ew.cosh(to_inexact(x))


@inexact_ufunc(_ew.tanh_p)
def tanh(x):
    """Elementwise hyperbolic tangent."""
    return _ew.tanh(to_inexact(x))


def _double_where(pred: Any, x: Any, if_true: Callable, if_false: Callable,
                  safe: Any) -> Any:
    """``select(pred, if_true(x), if_false(x))`` where each branch only ever sees inputs it
    accepts: the other branch's entries are replaced by ``safe``, so neither its value nor
    its gradient can be NaN (a NaN in an unused branch's gradient would poison the sum).
    """
    return _ew.select(pred, if_true(_ew.select(pred, x, safe)),
                      if_false(_ew.select(pred, safe, x)))


@as_ufunc
def arcsinh(x):
    """Elementwise inverse hyperbolic sine.

    On ``t = |x|``: ``log1p(t + t*t / (1 + sqrt(1 + t*t)))`` (accurate near 0), and
    ``log(t) + log(2)`` beyond ``1/sqrt(eps)`` where ``t*t`` could overflow (a double where
    keeps each formula to its own inputs). The sign is restored by a select rather than as
    ``sign(x) * ...``, which keeps the gradient at 0 equal to 1 (``abs``'s gradient at 0 is 0).
    """
    x = to_inexact(x)
    neg = _ew.lt(x, zero_of(x))
    t = _ew.select(neg, _ew.neg(x), x)
    one = np.ones((), x.dtype)
    big = _ew.gt(t, np.full((), 1.0 / math.sqrt(finfo(x.dtype).eps), x.dtype))
    r = _double_where(
        big, t, lambda u: _ew.add(_ew.log(u), np.full((), _LN2, x.dtype)),
        lambda u: _ew.log1p(_ew.add(u, _ew.div(_ew.mul(u, u), _ew.add(
            one, _ew.sqrt(_ew.add(one, _ew.mul(u, u))))))), one)
    return _ew.select(neg, _ew.neg(r), r)


@as_ufunc
def arccosh(x):
    """Elementwise inverse hyperbolic cosine (NaN below 1).

    ``log1p(u + sqrt(u) * sqrt(x + 1))`` with ``u = x - 1``: accurate near 1, no overflow
    below ~8e307.
    """
    x = to_inexact(x)
    one = np.ones((), x.dtype)
    u = _ew.sub(x, one)
    return _ew.log1p(_ew.add(u, _ew.mul(_ew.sqrt(u), _ew.sqrt(_ew.add(x, one)))))


@as_ufunc
def arctanh(x):
    """Elementwise inverse hyperbolic tangent: ``(log1p(x) - log1p(-x)) / 2``."""
    x = to_inexact(x)
    return _ew.mul(_ew.sub(_ew.log1p(x), _ew.log1p(_ew.neg(x))), np.full((), 0.5, x.dtype))


@as_ufunc
def hypot(x1, x2):
    """Elementwise ``sqrt(x1**2 + x2**2)`` without overflow or underflow.

    Computed as ``m * sqrt(1 + (n / m)**2)`` with ``m = max(|x1|, |x2|)``,
    ``n = min(|x1|, |x2|)``. Where ``m == 0`` the ratio is taken against a safe 1 (double
    where), so the value is 0 and the gradient at (0, 0) is 0 rather than NaN; infinities
    give inf even next to NaN, as in NumPy. At ``|x1| == |x2|`` the max/min tie-splitting
    gives the exact gradient.
    """
    a, b, dt = promote_inexact("hypot", x1, x2)
    a, b = _ew.abs(a), _ew.abs(b)
    zero, one, inf = np.zeros((), dt), np.ones((), dt), np.full((), np.inf, dt)
    with quiet_unused_branch():  # inf / inf in entries the final select discards
        m, n = _ew.max(a, b), _ew.min(a, b)
        is_zero = _ew.eq(m, zero)
        r = _ew.div(n, _ew.select(is_zero, one, m))
        out = _ew.select(is_zero, zero, _ew.mul(m, _ew.sqrt(_ew.add(one, _ew.mul(r, r)))))
    return _ew.select(_ew.or_(_ew.eq(a, inf), _ew.eq(b, inf)), inf, out)


@as_ufunc
def deg2rad(x):
    """Elementwise degrees to radians (``x * (pi / 180)``)."""
    x = to_inexact(x)
    return _ew.mul(x, np.full((), math.pi / 180.0, x.dtype))


@as_ufunc
def rad2deg(x):
    """Elementwise radians to degrees (``x * (180 / pi)``)."""
    x = to_inexact(x)
    return _ew.mul(x, np.full((), 180.0 / math.pi, x.dtype))


radians, degrees = deg2rad, rad2deg


def _log_add_exp(name: str, x1: Any, x2: Any, base2: builtins.bool) -> Any:
    """``max + log1p(exp(-|x1 - x2|))`` in base e or 2 (see :func:`logaddexp`)."""
    a, b, dt = promote_inexact(name, x1, x2)
    zero = np.zeros((), dt)
    with quiet_unused_branch():  # inf - inf where the select takes 0 instead
        d = _ew.select(_ew.eq(a, b), zero, _ew.sub(a, b))
    t = _ew.neg(_ew.abs(d))
    if base2:
        tail = _ew.mul(_ew.log1p(_ew.pow(np.full((), 2.0, dt), t)), np.full((), _LOG2E, dt))
    else:
        tail = _ew.log1p(_ew.exp(t))
    return _ew.add(_ew.max(a, b), tail)


@as_ufunc
def logaddexp(x1, x2):
    """Elementwise ``log(exp(x1) + exp(x2))``, stable for large and ``-inf`` inputs.

    ``max(x1, x2) + log1p(exp(-|x1 - x2|))``; where ``x1 == x2`` (including both ``-inf`` or
    both ``inf``) the difference is taken as 0, so no NaN appears. The gradient is
    ``sigmoid(x1 - x2)`` (exactly 1/2 each at ties).
    """
    return _log_add_exp("logaddexp", x1, x2, base2=False)


@as_ufunc
def logaddexp2(x1, x2):
    """Elementwise ``log2(2**x1 + 2**x2)``, stable as :func:`logaddexp` is."""
    return _log_add_exp("logaddexp2", x1, x2, base2=True)


@as_ufunc
def sinc(x):
    """Elementwise normalised sinc, ``sin(pi x) / (pi x)`` (1 at 0).

    NumPy's own formula: ``y = pi * x`` with exact zeros replaced by the dtype's epsilon,
    where ``sin(y) / y`` is exactly 1. The replacement is a constant, so the gradient at 0
    is 0 (correct) and nowhere NaN.
    """
    x = astype(x, np.float64) if x.dtype.kind in "biu" else x
    y = _ew.mul(np.full((), math.pi, x.dtype), x)
    y = _ew.select(_ew.eq(y, zero_of(y)), np.full((), finfo(x.dtype).eps, x.dtype), y)
    return _ew.div(_ew.sin(y), y)

