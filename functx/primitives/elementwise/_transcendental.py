"""Transcendental elementwise primitives: ``pow``, exponentials, logarithms and roots
(``exp``, ``expm1``, ``log``, ``log1p``, ``sqrt``, ``rsqrt``), trigonometric and hyperbolic
functions (``sin``... ``atan2``, ``sinh``, ``cosh``, ``tanh``), ``logistic`` and ``erf``.

Part of ``functx.primitives.elementwise`` (see its docstring for dtypes, numerics and the
rules every primitive has); use it through that package.
"""
from __future__ import annotations

import builtins
import decimal
import math
from typing import Any

import numpy as np

from functx.primitives._batching import add_tangents, elementwise_batch, unary_batch
from functx.primitives._util import shape_of
from functx.primitives.elementwise._arithmetic import abs, add, div, min, mul, neg, sub
from functx.primitives.elementwise._common import (
    binary,
    dtype_of,
    fit_tangent,
    quiet,
    scalar,
    unary,
    unary_jvp,
    unbroadcast,
    scalar_call,
    scalar_float,
)
from functx.primitives.elementwise import _erf32
from functx.primitives.elementwise._comparison import and_, eq, floor, select
from functx.primitives.cuda import elementwise as _cuda
from functx.registry.scalar import call, where
from functx.tracing import bind


# -- powers -----------------------------------------------------------------------------------

pow_p = binary("pow", "power", "inexact")


@pow_p.def_vjp(save_inputs=(0, 1), save_output=True)
def _pow_vjp(ct, ins, out):
    x, y = ins
    zero, one = scalar(ct, 0), scalar(ct, 1)
    x_zero = eq(x, zero)
    # d/dy = x**y * log(x), taken as 0 where x == 0 (x**y is 0, 1 or inf there): both
    # factors are made safe there, so no 0 * inf or log(0) is ever formed.
    jac_y = mul(select(x_zero, zero, out), log(select(x_zero, one, x)))
    # d/dx = y * x**(y-1), which is 0 where y == 0; at x == y == 0 the exponent is made 0
    # so that 0 * 0**-1 (nan) is not formed. Elsewhere the formula is untouched (and so
    # are its derivatives).
    y_safe = select(and_(x_zero, eq(y, zero)), one, y)
    jac_x = mul(y, pow(x, sub(y_safe, one)))
    return unbroadcast(mul(ct, jac_x), x), unbroadcast(mul(ct, jac_y), y)


@pow_p.def_jvp
def _pow_jvp(tangents, primals, out):
    # The VJP's partial derivatives, with the same safe forms at x == 0.
    (tx, ty), (x, y) = tangents, primals
    if tx is None and ty is None:
        return None
    zero, one = scalar(out, 0), scalar(out, 1)
    x_zero = eq(x, zero)
    t_x = t_y = None
    if tx is not None:
        y_safe = select(and_(x_zero, eq(y, zero)), one, y)
        t_x = mul(tx, mul(y, pow(x, sub(y_safe, one))))
    if ty is not None:
        t_y = mul(ty, mul(select(x_zero, zero, out), log(select(x_zero, one, x))))
    return fit_tangent(add_tangents(t_x, t_y), out)


pow_p.def_batch(elementwise_batch(pow_p))
pow_p.def_scalar(scalar_float(lambda x, y: call("pow", x, y)))


def pow(x: Any, y: Any) -> Any:  # noqa: A001 - the contract's name
    """``x ** y`` for floating-point (or complex) ``x`` and ``y`` of one dtype.

    The gradient for ``x`` is ``y * x**(y-1)``, and 0 where ``y == 0``; the gradient for
    ``y`` is ``x**y * log(x)``, and 0 where ``x == 0`` (so ``pow(0., y)`` has a finite
    gradient for ``y``). For ``x < 0`` the gradient for ``y`` is NaN, as in JAX.
    """
    return bind(pow_p, x, y)


# -- exponentials, logarithms, roots ---------------------------------------------------------

exp_p = unary("exp", "exp", "inexact")
exp_p.def_vjp(lambda ct, ins, out: (mul(ct, out),), save_output=True)
exp_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, out)))
exp_p.def_batch(unary_batch(exp_p))
exp_p.def_scalar(scalar_call("exp"))


def exp(x: Any) -> Any:
    """``e ** x``."""
    return bind(exp_p, x)


expm1_p = unary("expm1", "expm1", "inexact")
expm1_p.def_vjp(lambda ct, ins, out: (mul(ct, add(out, scalar(out, 1))),), save_output=True)
expm1_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, add(out, scalar(out, 1)))))
expm1_p.def_batch(unary_batch(expm1_p))
expm1_p.def_scalar(scalar_call("expm1"))


def expm1(x: Any) -> Any:
    """``exp(x) - 1``, accurate for small ``x``."""
    return bind(expm1_p, x)


log_p = unary("log", "log", "inexact")
log_p.def_vjp(lambda ct, ins, out: (div(ct, ins[0]),), save_inputs=(0,))
log_p.def_jvp(unary_jvp(lambda t, x, out: div(t, x)))
log_p.def_batch(unary_batch(log_p))
log_p.def_scalar(scalar_call("log"))


def log(x: Any) -> Any:
    """Natural logarithm (NaN below 0 and -inf at 0, with NumPy's warnings)."""
    return bind(log_p, x)


log1p_p = unary("log1p", "log1p", "inexact")
log1p_p.def_vjp(lambda ct, ins, out: (div(ct, add(ins[0], scalar(ct, 1))),), save_inputs=(0,))
log1p_p.def_jvp(unary_jvp(lambda t, x, out: div(t, add(x, scalar(t, 1)))))
log1p_p.def_batch(unary_batch(log1p_p))
log1p_p.def_scalar(scalar_call("log1p"))


def log1p(x: Any) -> Any:
    """``log(1 + x)``, accurate for small ``x``."""
    return bind(log1p_p, x)


sqrt_p = unary("sqrt", "sqrt", "inexact")
sqrt_p.def_vjp(lambda ct, ins, out: (div(mul(ct, scalar(ct, 0.5)), out),), save_output=True)
sqrt_p.def_jvp(unary_jvp(lambda t, x, out: div(mul(t, scalar(t, 0.5)), out)))
sqrt_p.def_batch(unary_batch(sqrt_p))
sqrt_p.def_scalar(scalar_call("sqrt"))


def sqrt(x: Any) -> Any:
    """Square root. The VJP is ``0.5 * ct / sqrt(x)`` from the saved output."""
    return bind(sqrt_p, x)


def _rsqrt_impl(xp, x):
    with quiet(divide="ignore"):  # rsqrt(0) = inf is the right answer
        return 1 / xp.sqrt(x)


rsqrt_p = unary("rsqrt", _rsqrt_impl, "inexact")


@rsqrt_p.def_vjp(save_inputs=(0,), save_output=True)
def _rsqrt_vjp(ct, ins, out):
    return (mul(ct, mul(scalar(ct, -0.5), div(out, ins[0]))),)  # -x**-1.5 / 2


rsqrt_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, mul(scalar(t, -0.5), div(out, x)))))
rsqrt_p.def_batch(unary_batch(rsqrt_p))
rsqrt_p.def_scalar(scalar_float(lambda x: 1 / call("sqrt", x)))


def rsqrt(x: Any) -> Any:
    """``1 / sqrt(x)`` (inf at 0, without a warning)."""
    return bind(rsqrt_p, x)


# -- trigonometric and hyperbolic ------------------------------------------------------------

sin_p = unary("sin", "sin", "inexact")
sin_p.def_vjp(lambda ct, ins, out: (mul(ct, cos(ins[0])),), save_inputs=(0,))
sin_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, cos(x))))
sin_p.def_batch(unary_batch(sin_p))
sin_p.def_scalar(scalar_call("sin"))


def sin(x: Any) -> Any:
    """Sine (radians)."""
    return bind(sin_p, x)


cos_p = unary("cos", "cos", "inexact")
cos_p.def_vjp(lambda ct, ins, out: (neg(mul(ct, sin(ins[0]))),), save_inputs=(0,))
cos_p.def_jvp(unary_jvp(lambda t, x, out: neg(mul(t, sin(x)))))
cos_p.def_batch(unary_batch(cos_p))
cos_p.def_scalar(scalar_call("cos"))


def cos(x: Any) -> Any:
    """Cosine (radians)."""
    return bind(cos_p, x)


tan_p = unary("tan", "tan", "inexact")
tan_p.def_vjp(lambda ct, ins, out: (mul(ct, add(scalar(out, 1), mul(out, out))),),
              save_output=True)
tan_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, add(scalar(out, 1), mul(out, out)))))
tan_p.def_batch(unary_batch(tan_p))
tan_p.def_scalar(scalar_call("tan"))


def tan(x: Any) -> Any:
    """Tangent (radians). The VJP is ``ct * (1 + tan(x)**2)`` from the saved output."""
    return bind(tan_p, x)


asin_p = unary("asin", "arcsin", "inexact")
asin_p.def_vjp(lambda ct, ins, out: (mul(ct, _rsqrt_one_minus_square(ins[0])),),
               save_inputs=(0,))
asin_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _rsqrt_one_minus_square(x))))
asin_p.def_batch(unary_batch(asin_p))
asin_p.def_scalar(scalar_call("asin"))


def _rsqrt_one_minus_square(x: Any) -> Any:
    """``1 / sqrt(1 - x*x)`` as ``rsqrt((1 - x) * (1 + x))``: accurate near ``|x| = 1``."""
    one = scalar(x, 1)
    return rsqrt(mul(sub(one, x), add(one, x)))


def asin(x: Any) -> Any:
    """Arc sine (NaN outside [-1, 1], with NumPy's warning)."""
    return bind(asin_p, x)


acos_p = unary("acos", "arccos", "inexact")
acos_p.def_vjp(lambda ct, ins, out: (neg(mul(ct, _rsqrt_one_minus_square(ins[0]))),),
               save_inputs=(0,))
acos_p.def_jvp(unary_jvp(lambda t, x, out: neg(mul(t, _rsqrt_one_minus_square(x)))))
acos_p.def_batch(unary_batch(acos_p))
acos_p.def_scalar(scalar_call("acos"))


def acos(x: Any) -> Any:
    """Arc cosine (NaN outside [-1, 1], with NumPy's warning)."""
    return bind(acos_p, x)


atan_p = unary("atan", "arctan", "inexact")
atan_p.def_vjp(lambda ct, ins, out: (div(ct, add(scalar(ct, 1), mul(ins[0], ins[0]))),),
               save_inputs=(0,))
atan_p.def_jvp(unary_jvp(lambda t, x, out: div(t, add(scalar(t, 1), mul(x, x)))))
atan_p.def_batch(unary_batch(atan_p))
atan_p.def_scalar(scalar_call("atan"))


def atan(x: Any) -> Any:
    """Arc tangent."""
    return bind(atan_p, x)


atan2_p = binary("atan2", "arctan2", "float")


@atan2_p.def_vjp(save_inputs=(0, 1))
def _atan2_vjp(ct, ins, out):
    y, x = ins
    scaled = div(ct, add(mul(x, x), mul(y, y)))
    return unbroadcast(mul(scaled, x), y), unbroadcast(neg(mul(scaled, y)), x)


@atan2_p.def_jvp
def _atan2_jvp(tangents, primals, out):
    # d atan2(y, x) = (x * ty - y * tx) / (x*x + y*y)
    (ty, tx), (y, x) = tangents, primals
    if ty is None and tx is None:
        return None
    num = add_tangents(None if ty is None else mul(ty, x),
                       None if tx is None else neg(mul(tx, y)))
    return fit_tangent(div(num, add(mul(x, x), mul(y, y))), out)


atan2_p.def_batch(elementwise_batch(atan2_p))
atan2_p.def_scalar(scalar_float(lambda y, x: call("atan2", y, x)))


def atan2(y: Any, x: Any) -> Any:
    """The angle of the point ``(x, y)``: NumPy's ``arctan2(y, x)`` (real floats)."""
    return bind(atan2_p, y, x)


sinh_p = unary("sinh", "sinh", "inexact")
sinh_p.def_vjp(lambda ct, ins, out: (mul(ct, cosh(ins[0])),), save_inputs=(0,))
sinh_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, cosh(x))))
sinh_p.def_batch(unary_batch(sinh_p))
sinh_p.def_scalar(scalar_call("sinh"))


def sinh(x: Any) -> Any:
    """Hyperbolic sine."""
    return bind(sinh_p, x)


cosh_p = unary("cosh", "cosh", "inexact")
cosh_p.def_vjp(lambda ct, ins, out: (mul(ct, sinh(ins[0])),), save_inputs=(0,))
cosh_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, sinh(x))))
cosh_p.def_batch(unary_batch(cosh_p))
cosh_p.def_scalar(scalar_call("cosh"))


def cosh(x: Any) -> Any:
    """Hyperbolic cosine."""
    return bind(cosh_p, x)


tanh_p = unary("tanh", "tanh", "inexact")
# ct * (1 - t*t) from the saved output t. Near saturation the rounding of t itself (an
# absolute error of up to one ulp of 1) dominates either way; (1 - t) * (1 + t) would save
# only the half-ulp rounding of t*t, at the cost of one more full-size operation.
tanh_p.def_vjp(lambda ct, ins, out: (mul(ct, sub(1.0, mul(out, out))),), save_output=True)
tanh_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, sub(1.0, mul(out, out)))))
tanh_p.def_batch(unary_batch(tanh_p))
tanh_p.def_scalar(scalar_call("tanh"))


def tanh(x: Any) -> Any:
    """Hyperbolic tangent. The VJP is ``ct * (1 - t*t)`` from the saved output ``t``."""
    return bind(tanh_p, x)


def _logistic_impl(xp, x):
    # e = exp(-|x|) lies in (0, 1]: nothing overflows, and both tails keep full relative
    # accuracy (1 / (1 + e) for x >= 0, e / (1 + e) below).
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1, e) / (1 + e)


logistic_p = unary("logistic", _logistic_impl, "float")
logistic_p.def_vjp(lambda ct, ins, out: (mul(ct, mul(out, sub(1.0, out))),),
                   save_output=True)
logistic_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, mul(out, sub(1.0, out)))))
logistic_p.def_batch(unary_batch(logistic_p))


def _logistic_scalar(x):
    e = call("exp", -call("abs", x))  # as the implementation: no overflow in either tail
    return where(x >= 0, 1, e) / (1 + e)


logistic_p.def_scalar(scalar_float(_logistic_scalar))


def logistic(x: Any) -> Any:
    """The sigmoid ``1 / (1 + exp(-x))``, stable for large ``|x|`` (real floats).

    The VJP is ``ct * s * (1 - s)`` from the saved output ``s``.
    """
    return bind(logistic_p, x)


# -- erf ---------------------------------------------------------------------------------------
#
# A vectorised erf for real floating point (NumPy has none). float64 results are within 1 ulp
# of the exact value (nearly always correctly rounded; closer than most libms), by two
# methods, each a polynomial evaluated with numpy/cupy operations only:
#   |x| < 7/16:      erf(x) = x + x * p(x*x), p the Maclaurin series of erf(x)/x - 1;
#   7/16 <= |x| < 6: the Taylor expansion of erf about the nearest centre c = (2k+1)/32,
#                    erf(c) + sum_n t_n (|x|-c)**n, with erf(c) stored as a double-double
#                    and t_n = erf^(n)(c)/n! from the Hermite recurrence;
#   |x| >= 6:        1 (erfc(6) is 2e-17, below half an ulp of 1).
# The tables are computed once, on first use, from series summed in 90-digit decimals.
# (Cody's rational approximations, the usual libm choice, are 2-5 ulp off near 0.5.)
# float32 on the CPU (float16 and bfloat16 through it) is one vectorised loop of its own,
# a float64 polynomial per element rounded once (functx/primitives/elementwise/_erf32.py:
# within 0.50004 ulp of the exact value, correctly rounded on all but ~6 in a million
# float32s). Elsewhere (CuPy without its own rule) smaller dtypes go through float64.

_ERF_STEP = 16           # centres every 1/16: |x - c| <= 1/32
_ERF_K0, _ERF_K1 = 7, 96  # centre indices: the Taylor range is [7/16, 96/16)
_ERF_DEGREE = 11          # terms beyond this are below 2**-60 relative
_ERF_SERIES_TERMS = 13    # terms of the small-argument series
_PI = decimal.Decimal("3.14159265358979323846264338327950288419716939937510582097494459"
                      "2307816406286208998628034825342117068")
_erf_tables_cache: dict = {}


def _erf_tables(xp: Any) -> tuple:
    """(series coefficients, erf(c) high and low parts, Taylor coefficients by centre)."""
    tables = _erf_tables_cache.get(xp.__name__)
    if tables is not None:
        return tables
    with decimal.localcontext() as ctx:
        ctx.prec = 90
        two_over_rtpi = 2 / _PI.sqrt()
        series, fact = [float(two_over_rtpi - 1)], decimal.Decimal(1)
        for n in range(1, _ERF_SERIES_TERMS):
            fact *= n
            series.append(float(two_over_rtpi * (-1) ** n / (fact * (2 * n + 1))))
        hi, lo, taylor = [], [], []
        for k in range(_ERF_K0, _ERF_K1):
            c = decimal.Decimal(2 * k + 1) / (2 * _ERF_STEP)
            total, term, n = decimal.Decimal(0), c, 0
            while builtins.abs(term) > decimal.Decimal("1e-70"):  # erf(c) = 2/sqrt(pi) sum ...
                total += term / (2 * n + 1)
                n += 1
                term = term * (-c * c) / n
            value = two_over_rtpi * total
            hi.append(float(value))
            lo.append(float(value - decimal.Decimal(hi[-1])))
            # t_n = 2/sqrt(pi) exp(-c^2) (-1)^(n-1) H_{n-1}(c) / n!, Hermite H_n.
            g, cf = float(two_over_rtpi * (-c * c).exp()), float(c)
            herm = [1.0, 2 * cf]
            for m in range(1, _ERF_DEGREE):
                herm.append(2 * cf * herm[m] - 2 * m * herm[m - 1])
            taylor.append([g * (-1) ** (n - 1) * herm[n - 1] / math.factorial(n)
                           for n in range(1, _ERF_DEGREE + 1)])
    tables = (tuple(series), xp.asarray(np.array(hi)), xp.asarray(np.array(lo)),
              xp.asarray(np.array(taylor).T.copy()))
    _erf_tables_cache[xp.__name__] = tables
    return tables


ERF32_PARALLEL_MIN_SIZE = 1 << 18   # from this size the float32 loop runs on every core


def erf_impl(xp, x):
    """The error function of a real float array ``x`` on the array module ``xp`` (the
    generic rule of ``erf``; ``functx.primitives.fused`` evaluates exact GELU with it)."""
    dtype = dtype_of(x)
    if dtype != np.float64 and xp is np:
        # float32 (float16 and bfloat16 through it, rounded once more): the vectorised
        # float64 polynomial of functx/primitives/elementwise/_erf32.py, compiled (SIMD, all
        # cores for large arrays) or, without Numba, the same operations in NumPy.
        x32 = np.asarray(x) if dtype == np.float32 else np.asarray(x).astype(np.float32)
        flat = np.ascontiguousarray(x32).reshape(-1)
        kernel = _erf32.compiled(flat.size >= ERF32_PARALLEL_MIN_SIZE)
        if kernel is None:
            out = _erf32.erf32_numpy(flat)
        else:
            out = np.empty_like(flat)
            kernel(flat, out)
        out = out.reshape(np.shape(x32))
        return out if dtype == np.float32 else out.astype(dtype)
    if dtype != np.float64:
        return erf_impl(xp, xp.asarray(x).astype(np.float64)).astype(dtype)
    series, hi, lo, taylor = _erf_tables(xp)
    shape = shape_of(x)
    x = xp.reshape(xp.asarray(x), (-1,))  # 1-d, so that 0-d inputs can be indexed too
    y = xp.abs(x)
    out = xp.minimum(y, 1.0)  # the value for |x| >= 6 (and NaN for NaN)
    small = y < _ERF_K0 / _ERF_STEP
    mid = (y < _ERF_K1 / _ERF_STEP) & ~small
    # Each range is evaluated on its own entries only, with in-place Horner steps.
    ys = y[small]
    z = ys * ys
    acc = z * series[-1]
    for coef in series[-2:0:-1]:
        acc += coef
        acc *= z
    acc += series[0]
    acc *= ys
    acc += ys
    out[small] = acc
    ym = y[mid]
    k = xp.floor(ym * _ERF_STEP).astype(np.int64)
    h = ym - (2 * k + 1) / (2 * _ERF_STEP)  # exact (Sterbenz)
    k -= _ERF_K0
    acc = xp.take(taylor[-1], k)
    buf = xp.empty_like(acc)
    for row in range(_ERF_DEGREE - 2, -1, -1):
        acc *= h
        acc += xp.take(taylor[row], k, out=buf)
    acc *= h
    acc += xp.take(lo, k, out=buf)
    acc += xp.take(hi, k, out=buf)  # erf(c)_hi + (erf(c)_lo + tail)
    out[mid] = acc
    return xp.reshape(xp.copysign(out, x, out=out), shape)


def _exp_neg_square(x: Any) -> Any:
    """``exp(-x*x)`` without the rounding error of ``x*x`` (which grows with ``x*x``).

    With ``a = floor(16|x|)/16``, ``a*a`` is exact and ``x*x = a*a + (|x|-a)(|x|+a)``.
    ``|x|`` is capped at 64, far past the underflow of the result.
    """
    y = min(abs(x), scalar(x, 64))
    sixteen = scalar(x, 16)
    a = div(floor(mul(y, sixteen)), sixteen)
    return mul(exp(neg(mul(a, a))), exp(neg(mul(sub(y, a), add(y, a)))))


erf_p = unary("erf", erf_impl, "float")
erf_p.def_impl(_cuda.erf, backend="cuda")  # CUDA's erf: no boolean-mask indexing
erf_p.def_vjp(lambda ct, ins, out: (
    mul(ct, mul(scalar(ct, 2 / math.sqrt(math.pi)), _exp_neg_square(ins[0]))),),
    save_inputs=(0,))
erf_p.def_jvp(unary_jvp(lambda t, x, out: mul(
    t, mul(scalar(t, 2 / math.sqrt(math.pi)), _exp_neg_square(x)))))
erf_p.def_batch(unary_batch(erf_p))
erf_p.def_scalar(scalar_call("erf"))


def erf(x: Any) -> Any:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t*t) dt`` (real floats).

    float64 results are within 1 ulp (see the comment above the implementation); float32
    is SciPy's float32 ``erf`` on the CPU (float16/bfloat16 through float32), CUDA's
    ``erf`` on CUDA.
    """
    return bind(erf_p, x)
