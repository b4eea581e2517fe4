"""Elementwise primitives: arithmetic, transcendental functions, comparisons, select.

Binary primitives broadcast their operands as NumPy does but need equal dtypes
(functx.numpy promotes); their VJPs sum the cotangent back to each operand's shape.

Dtypes: each primitive states what it accepts ("real floating-point", "floating-point or
complex", "bool or integer"...) and its abstract-eval rule raises a DTypeError otherwise.
Transcendental functions that are holomorphic accept complex inputs; their VJPs are
``ct * f'(x)`` without conjugation, which is JAX's convention. Functions that are not
holomorphic (``abs``, ``max``, ``atan2``, ``erf``, ``logistic``, rounding...) are real-only.

Numerics: implementations avoid spurious floating-point warnings for inputs inside the
function's domain, and VJP rules are written for accuracy (``tanh``, ``sqrt``, ``rsqrt``,
``expm1``, ``logistic`` read their output; ``erf``'s derivative evaluates ``exp(-x*x)``
without the rounding error of ``x*x``).

Forward mode: every differentiable primitive has a JVP rule written like its VJP rule (the
same partial derivatives, the same saved-output forms for accuracy) and returning None where
every tangent is None or the output is integer-valued; a tangent of a broadcast operand is
broadcast to the output's shape. Primitives with the zero VJP (comparisons, rounding,
``sign``...) have no JVP rule: forward mode gives them a zero tangent. Every primitive has a
batching rule: the family is elementwise, so the primitive applies to batched operands as it
is (``functx.primitives._batching.unary_batch`` / ``elementwise_batch``).
"""
from __future__ import annotations

import builtins
import decimal
import math
import operator
from typing import Any, Callable

import numpy as np

from functx import _cuda_impls
from functx.errors import DTypeError
from functx.ir import AbstractArray
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._batching import (
    add_tangents,
    broadcast_to_shape,
    elementwise_batch,
    linear_jvp,
    unary_batch,
)
from functx.primitives._util import broadcast_shapes, fmt, is_float, same_dtypes, shape_of
from functx.registry import Primitive
from functx.tracing import bind


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


def unary(name: str, impl: Callable | str, accepts: str = "any",
          out_dtype: Any = None) -> Primitive:
    """A new elementwise unary primitive with the same-shape rule and a generic impl (a
    rule, or the name of the array-module ufunc, e.g. ``"sin"``)."""
    p = Primitive(name)
    p.def_abstract_eval(make_unary_aval(name, accepts, out_dtype))
    p.def_impl(impl)
    return p


def binary(name: str, impl: Callable | str, accepts: str = "any",
           out_dtype: Any = None) -> Primitive:
    """A new broadcasting binary primitive with a generic impl (as for :func:`unary`)."""
    p = Primitive(name)
    p.def_abstract_eval(make_binary_aval(name, accepts, out_dtype))
    p.def_impl(impl)
    return p


def unbroadcast(ct: Any, aval: Any) -> Any:
    """Sum a cotangent of a broadcast result back to an operand's shape (and no further).

    ``aval`` is the operand's abstract value or value (a Python scalar has shape ()).
    """
    shape = tuple(getattr(aval, "shape", ()))
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


def _quiet(**kinds: str) -> Any:
    """Silence NumPy floating-point warnings (CuPy does not warn) for results that are right."""
    return np.errstate(**kinds)


def _dtype_of(x: Any) -> np.dtype:
    dt = getattr(x, "dtype", None)
    return np.dtype(dt) if dt is not None else np.asarray(x).dtype


def _fit(t: Any, out: Any) -> Any:
    """A tangent (or None) broadcast to the shape of the primal output ``out``."""
    return None if t is None else broadcast_to_shape(t, shape_of(out))


def unary_jvp(fn: Callable) -> Callable:
    """The JVP rule of a unary primitive from ``fn(t, x, out) -> tangent`` (``t`` not None):
    None stays None."""
    def rule(tangents, primals, out, **params):
        t = tangents[0]
        return None if t is None else fn(t, primals[0], out)
    return rule


# -- arithmetic ------------------------------------------------------------------------------

neg_p = unary("neg", "negative", "number")
neg_p.def_vjp(lambda ct, ins, out: (neg(ct),))
neg_p.def_jvp(linear_jvp(neg_p))
neg_p.def_batch(unary_batch(neg_p))


def neg(x: Any) -> Any:
    """``-x`` (numeric dtypes; integers wrap as in NumPy)."""
    return bind(neg_p, x)


abs_p = unary("abs", "abs", "ordered")
abs_p.def_vjp(lambda ct, ins, out: (mul(ct, sign(ins[0])),), save_inputs=(0,))
abs_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, sign(x))))
abs_p.def_batch(unary_batch(abs_p))


def abs(x: Any) -> Any:  # noqa: A001 - the contract's name
    """``|x|`` for bool, integer and real floating-point ``x``; the gradient at 0 is 0."""
    return bind(abs_p, x)


sign_p = unary("sign", "sign", "real")
sign_p.def_zero_vjp()
sign_p.def_batch(unary_batch(sign_p))


def sign(x: Any) -> Any:
    """-1, 0 or 1 by the sign of ``x`` (NaN stays NaN; -0.0 gives 0.0). Zero gradient."""
    return bind(sign_p, x)


add_p = binary("add", "add")
add_p.def_vjp(lambda ct, ins, out, needs: (
    unbroadcast(ct, ins[0]) if needs[0] else None,
    unbroadcast(ct, ins[1]) if needs[1] else None), selective=True)
add_p.def_jvp(lambda tangents, primals, out: _fit(add_tangents(*tangents), out))
add_p.def_batch(elementwise_batch(add_p))


def add(x: Any, y: Any) -> Any:
    """``x + y`` with broadcasting (on bool: logical or, as NumPy)."""
    return bind(add_p, x, y)


sub_p = binary("sub", "subtract", "number")
sub_p.def_vjp(lambda ct, ins, out, needs: (
    unbroadcast(ct, ins[0]) if needs[0] else None,
    unbroadcast(neg(ct), ins[1]) if needs[1] else None), selective=True)


@sub_p.def_jvp
def _sub_jvp(tangents, primals, out):
    tx, ty = tangents
    if ty is None:
        return _fit(tx, out)
    return _fit(neg(ty), out) if tx is None else sub(tx, ty)


sub_p.def_batch(elementwise_batch(sub_p))


def sub(x: Any, y: Any) -> Any:
    """``x - y`` with broadcasting."""
    return bind(sub_p, x, y)


mul_p = binary("mul", "multiply")


@mul_p.def_vjp(save_inputs=(0, 1), selective=True)
def _mul_vjp(ct, ins, out, needs):
    x, y = ins
    return (unbroadcast(mul(ct, y), x) if needs[0] else None,
            unbroadcast(mul(ct, x), y) if needs[1] else None)


@mul_p.def_jvp
def _mul_jvp(tangents, primals, out):
    (tx, ty), (x, y) = tangents, primals
    return add_tangents(None if tx is None else mul(tx, y), None if ty is None else mul(x, ty))


mul_p.def_batch(elementwise_batch(mul_p))


def mul(x: Any, y: Any) -> Any:
    """``x * y`` with broadcasting (on bool: logical and, as NumPy)."""
    return bind(mul_p, x, y)


def _div_impl(xp, x, y):
    if _dtype_of(x).kind in "iu":
        return xp.floor_divide(x, y)  # NumPy: 0 (with a warning) where y == 0
    return xp.true_divide(x, y)


div_p = binary("div", _div_impl, "number")


@div_p.def_vjp(save_inputs=(1,), save_output=True, selective=True)
def _div_vjp(ct, ins, out, needs):
    ct_x = div(ct, ins[1])
    return (unbroadcast(ct_x, ins[0]) if needs[0] else None,
            unbroadcast(neg(mul(ct_x, out)), ins[1]) if needs[1] else None)


@div_p.def_jvp
def _div_jvp(tangents, primals, out):
    # d(x / y) = (tx - out * ty) / y. Integer division has no tangents (they are None).
    (tx, ty), y = tangents, primals[1]
    if ty is None:
        return None if tx is None else div(tx, y)
    num = mul(out, ty)
    return div(neg(num) if tx is None else sub(tx, num), y)


div_p.def_batch(elementwise_batch(div_p))


def div(x: Any, y: Any) -> Any:
    """``x / y``: true division for floating-point, floor division (NumPy's ``//``) for
    integers (where ``y == 0`` the integer result is 0, with NumPy's warning)."""
    return bind(div_p, x, y)


rem_p = binary("rem", "remainder", "real")


@rem_p.def_vjp(save_inputs=(0, 1))
def _rem_vjp(ct, ins, out):
    # rem(x, y) = x - floor(x / y) * y, piecewise linear in both operands.
    x, y = ins
    return unbroadcast(ct, x), unbroadcast(neg(mul(ct, floor(div(x, y)))), y)


@rem_p.def_jvp
def _rem_jvp(tangents, primals, out):
    (tx, ty), (x, y) = tangents, primals
    if ty is None:
        return _fit(tx, out)
    ty_term = mul(ty, floor(div(x, y)))
    return neg(ty_term) if tx is None else sub(tx, ty_term)


rem_p.def_batch(elementwise_batch(rem_p))


def rem(x: Any, y: Any) -> Any:
    """NumPy's ``remainder`` (``%``): ``x - floor(x / y) * y``, with the sign of ``y``.

    Integers and real floats. The gradient is 1 for ``x`` and ``-floor(x / y)`` for ``y``
    (away from the jumps at multiples of ``y``).
    """
    return bind(rem_p, x, y)


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
    return _fit(add_tangents(t_x, t_y), out)


pow_p.def_batch(elementwise_batch(pow_p))


def pow(x: Any, y: Any) -> Any:  # noqa: A001 - the contract's name
    """``x ** y`` for floating-point (or complex) ``x`` and ``y`` of one dtype.

    The gradient for ``x`` is ``y * x**(y-1)``, and 0 where ``y == 0``; the gradient for
    ``y`` is ``x**y * log(x)``, and 0 where ``x == 0`` (so ``pow(0., y)`` has a finite
    gradient for ``y``). For ``x < 0`` the gradient for ``y`` is NaN, as in JAX.
    """
    return bind(pow_p, x, y)


integer_pow_p = Primitive("integer_pow")


@integer_pow_p.def_abstract_eval
def _integer_pow_aval(x: AbstractArray, *, y: int) -> AbstractArray:
    check_dtype_class("integer_pow", "number", x)
    if y < 0 and x.dtype.kind in "iu":
        raise DTypeError(f"integer_pow: an integer array ({x}) cannot be raised to the "
                         f"negative power {y}. Convert it to a floating-point dtype first.")
    return x


# xp.power with an exponent of x's own dtype: exact for integers (wrapping as NumPy does),
# and one correctly-rounded-ish libm pow for floating point (better than repeated products).
integer_pow_p.def_impl(lambda xp, x, *, y: xp.power(x, _dtype_of(x).type(y)))


@integer_pow_p.def_vjp(save_inputs=(0,))
def _integer_pow_vjp(ct, ins, out, *, y):
    if y == 0:
        return (None,)
    if y == 1:
        return (ct,)
    x = ins[0]
    x_pow = x if y == 2 else integer_pow(x, y=y - 1)  # x ** 1 would be a copy
    return (mul(ct, mul(scalar(ct, y), x_pow)),)


@integer_pow_p.def_jvp
def _integer_pow_jvp(tangents, primals, out, *, y):
    t = tangents[0]
    if t is None or y == 0:
        return None
    if y == 1:
        return t
    x = primals[0]
    x_pow = x if y == 2 else integer_pow(x, y=y - 1)
    return mul(t, mul(scalar(t, y), x_pow))


integer_pow_p.def_batch(unary_batch(integer_pow_p))


def integer_pow(x: Any, *, y: int) -> Any:
    """``x ** y`` for a static Python integer ``y`` (negative only for inexact ``x``).

    The result keeps ``x``'s dtype. The VJP is ``y * x**(y-1)`` written with integer_pow
    again, so it can be differentiated to any order.
    """
    return bind(integer_pow_p, x, y=operator.index(y))


def _make_minmax_vjp(wins: Callable) -> Callable:
    def rule(ct, ins, out):
        x, y = ins
        zero = scalar(ct, 0)
        tie = eq(x, y)
        half = mul(ct, scalar(ct, 0.5))
        ct_x = select(wins(x, y), ct, select(tie, half, zero))
        ct_y = select(wins(y, x), ct, select(tie, half, zero))
        return unbroadcast(ct_x, x), unbroadcast(ct_y, y)
    rule.__doc__ = "The cotangent goes to the winner, split evenly on ties (as in JAX)."
    return rule


def _make_minmax_jvp(wins: Callable) -> Callable:
    def rule(tangents, primals, out):
        (tx, ty), (x, y) = tangents, primals
        if tx is None and ty is None:
            return None
        zero, half = scalar(out, 0), scalar(out, 0.5)
        if tx is not None and ty is not None:
            # x's tangent where x wins, y's where y wins, their mean on ties, 0 for NaN.
            tie = select(eq(x, y), mul(add(tx, ty), half), zero)
            t = select(wins(x, y), tx, select(wins(y, x), ty, tie))
        else:
            a, b, ta = (x, y, tx) if tx is not None else (y, x, ty)
            t = select(wins(a, b), ta, select(eq(a, b), mul(ta, half), zero))
        return _fit(t, out)
    rule.__doc__ = "The winner's tangent, the mean of both on ties (the VJP's transpose)."
    return rule


max_p = binary("max", "maximum", "ordered")
max_p.def_vjp(_make_minmax_vjp(lambda a, b: gt(a, b)), save_inputs=(0, 1))
max_p.def_jvp(_make_minmax_jvp(lambda a, b: gt(a, b)))
max_p.def_batch(elementwise_batch(max_p))


def max(x: Any, y: Any) -> Any:  # noqa: A001 - the contract's name
    """Elementwise maximum (NaN propagates). On ties each operand gets half the cotangent;
    where the result is NaN neither gets any."""
    return bind(max_p, x, y)


min_p = binary("min", "minimum", "ordered")
min_p.def_vjp(_make_minmax_vjp(lambda a, b: lt(a, b)), save_inputs=(0, 1))
min_p.def_jvp(_make_minmax_jvp(lambda a, b: lt(a, b)))
min_p.def_batch(elementwise_batch(min_p))


def min(x: Any, y: Any) -> Any:  # noqa: A001 - the contract's name
    """Elementwise minimum; see :func:`max` for NaN and tie behaviour."""
    return bind(min_p, x, y)


# -- exponentials, logarithms, roots ---------------------------------------------------------

exp_p = unary("exp", "exp", "inexact")
exp_p.def_vjp(lambda ct, ins, out: (mul(ct, out),), save_output=True)
exp_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, out)))
exp_p.def_batch(unary_batch(exp_p))


def exp(x: Any) -> Any:
    """``e ** x``."""
    return bind(exp_p, x)


expm1_p = unary("expm1", "expm1", "inexact")
expm1_p.def_vjp(lambda ct, ins, out: (mul(ct, add(out, scalar(out, 1))),), save_output=True)
expm1_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, add(out, scalar(out, 1)))))
expm1_p.def_batch(unary_batch(expm1_p))


def expm1(x: Any) -> Any:
    """``exp(x) - 1``, accurate for small ``x``."""
    return bind(expm1_p, x)


log_p = unary("log", "log", "inexact")
log_p.def_vjp(lambda ct, ins, out: (div(ct, ins[0]),), save_inputs=(0,))
log_p.def_jvp(unary_jvp(lambda t, x, out: div(t, x)))
log_p.def_batch(unary_batch(log_p))


def log(x: Any) -> Any:
    """Natural logarithm (NaN below 0 and -inf at 0, with NumPy's warnings)."""
    return bind(log_p, x)


log1p_p = unary("log1p", "log1p", "inexact")
log1p_p.def_vjp(lambda ct, ins, out: (div(ct, add(ins[0], scalar(ct, 1))),), save_inputs=(0,))
log1p_p.def_jvp(unary_jvp(lambda t, x, out: div(t, add(x, scalar(t, 1)))))
log1p_p.def_batch(unary_batch(log1p_p))


def log1p(x: Any) -> Any:
    """``log(1 + x)``, accurate for small ``x``."""
    return bind(log1p_p, x)


sqrt_p = unary("sqrt", "sqrt", "inexact")
sqrt_p.def_vjp(lambda ct, ins, out: (div(mul(ct, scalar(ct, 0.5)), out),), save_output=True)
sqrt_p.def_jvp(unary_jvp(lambda t, x, out: div(mul(t, scalar(t, 0.5)), out)))
sqrt_p.def_batch(unary_batch(sqrt_p))


def sqrt(x: Any) -> Any:
    """Square root. The VJP is ``0.5 * ct / sqrt(x)`` from the saved output."""
    return bind(sqrt_p, x)


def _rsqrt_impl(xp, x):
    with _quiet(divide="ignore"):  # rsqrt(0) = inf is the right answer
        return 1 / xp.sqrt(x)


rsqrt_p = unary("rsqrt", _rsqrt_impl, "inexact")


@rsqrt_p.def_vjp(save_inputs=(0,), save_output=True)
def _rsqrt_vjp(ct, ins, out):
    return (mul(ct, mul(scalar(ct, -0.5), div(out, ins[0]))),)  # -x**-1.5 / 2


rsqrt_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, mul(scalar(t, -0.5), div(out, x)))))
rsqrt_p.def_batch(unary_batch(rsqrt_p))


def rsqrt(x: Any) -> Any:
    """``1 / sqrt(x)`` (inf at 0, without a warning)."""
    return bind(rsqrt_p, x)


# -- trigonometric and hyperbolic ------------------------------------------------------------

sin_p = unary("sin", "sin", "inexact")
sin_p.def_vjp(lambda ct, ins, out: (mul(ct, cos(ins[0])),), save_inputs=(0,))
sin_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, cos(x))))
sin_p.def_batch(unary_batch(sin_p))


def sin(x: Any) -> Any:
    """Sine (radians)."""
    return bind(sin_p, x)


cos_p = unary("cos", "cos", "inexact")
cos_p.def_vjp(lambda ct, ins, out: (neg(mul(ct, sin(ins[0]))),), save_inputs=(0,))
cos_p.def_jvp(unary_jvp(lambda t, x, out: neg(mul(t, sin(x)))))
cos_p.def_batch(unary_batch(cos_p))


def cos(x: Any) -> Any:
    """Cosine (radians)."""
    return bind(cos_p, x)


tan_p = unary("tan", "tan", "inexact")
tan_p.def_vjp(lambda ct, ins, out: (mul(ct, add(scalar(out, 1), mul(out, out))),),
              save_output=True)
tan_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, add(scalar(out, 1), mul(out, out)))))
tan_p.def_batch(unary_batch(tan_p))


def tan(x: Any) -> Any:
    """Tangent (radians). The VJP is ``ct * (1 + tan(x)**2)`` from the saved output."""
    return bind(tan_p, x)


asin_p = unary("asin", "arcsin", "inexact")
asin_p.def_vjp(lambda ct, ins, out: (mul(ct, _rsqrt_one_minus_square(ins[0])),),
               save_inputs=(0,))
asin_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, _rsqrt_one_minus_square(x))))
asin_p.def_batch(unary_batch(asin_p))


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


def acos(x: Any) -> Any:
    """Arc cosine (NaN outside [-1, 1], with NumPy's warning)."""
    return bind(acos_p, x)


atan_p = unary("atan", "arctan", "inexact")
atan_p.def_vjp(lambda ct, ins, out: (div(ct, add(scalar(ct, 1), mul(ins[0], ins[0]))),),
               save_inputs=(0,))
atan_p.def_jvp(unary_jvp(lambda t, x, out: div(t, add(scalar(t, 1), mul(x, x)))))
atan_p.def_batch(unary_batch(atan_p))


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
    return _fit(div(num, add(mul(x, x), mul(y, y))), out)


atan2_p.def_batch(elementwise_batch(atan2_p))


def atan2(y: Any, x: Any) -> Any:
    """The angle of the point ``(x, y)``: NumPy's ``arctan2(y, x)`` (real floats)."""
    return bind(atan2_p, y, x)


sinh_p = unary("sinh", "sinh", "inexact")
sinh_p.def_vjp(lambda ct, ins, out: (mul(ct, cosh(ins[0])),), save_inputs=(0,))
sinh_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, cosh(x))))
sinh_p.def_batch(unary_batch(sinh_p))


def sinh(x: Any) -> Any:
    """Hyperbolic sine."""
    return bind(sinh_p, x)


cosh_p = unary("cosh", "cosh", "inexact")
cosh_p.def_vjp(lambda ct, ins, out: (mul(ct, sinh(ins[0])),), save_inputs=(0,))
cosh_p.def_jvp(unary_jvp(lambda t, x, out: mul(t, sinh(x))))
cosh_p.def_batch(unary_batch(cosh_p))


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
# Inputs of smaller float dtypes are computed in float64 and rounded back.

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


def _erf_impl(xp, x):
    dtype = _dtype_of(x)
    if dtype != np.float64:
        return _erf_impl(xp, xp.asarray(x).astype(np.float64)).astype(dtype)
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


erf_p = unary("erf", _erf_impl, "float")
erf_p.def_impl(_cuda_impls.erf, backend="cuda")  # CUDA's erf: no boolean-mask indexing
erf_p.def_vjp(lambda ct, ins, out: (
    mul(ct, mul(scalar(ct, 2 / math.sqrt(math.pi)), _exp_neg_square(ins[0]))),),
    save_inputs=(0,))
erf_p.def_jvp(unary_jvp(lambda t, x, out: mul(
    t, mul(scalar(t, 2 / math.sqrt(math.pi)), _exp_neg_square(x)))))
erf_p.def_batch(unary_batch(erf_p))


def erf(x: Any) -> Any:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t*t) dt`` (real floats).

    float64 results are within 1 ulp (see the comment above the implementation); smaller
    float dtypes are computed in float64 and rounded once.
    """
    return bind(erf_p, x)


# -- rounding ----------------------------------------------------------------------------------

floor_p = unary("floor", "floor", "float")
floor_p.def_zero_vjp()
floor_p.def_batch(unary_batch(floor_p))


def floor(x: Any) -> Any:
    """The largest integer not above ``x`` (real floats; same dtype). Zero gradient."""
    return bind(floor_p, x)


ceil_p = unary("ceil", "ceil", "float")
ceil_p.def_zero_vjp()
ceil_p.def_batch(unary_batch(ceil_p))


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
not_p = unary("not", "invert", "logical")
not_p.def_zero_vjp()
not_p.def_batch(unary_batch(not_p))


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
    if _dtype_of(pred) != np.bool_:
        raise TypeError("select needs a bool predicate")  # explained by the shape rule
    return xp.where(pred, on_true, on_false)


select_p.def_impl(_select_impl)


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
    return _fit(select(primals[0], zero if t_true is None else t_true,
                       zero if t_false is None else t_false), out)


select_p.def_batch(elementwise_batch(select_p))


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


clamp_p.def_impl(lambda xp, lo, x, hi: xp.minimum(xp.maximum(x, lo), hi))


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
    return _fit(t, out)


clamp_p.def_batch(elementwise_batch(clamp_p))


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
    if _dtype_of(x).kind == "c" and new_dtype.kind != "c":
        x = xp.real(x)  # complex -> real keeps the real part, as in JAX
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


def convert_element_type(x: Any, *, new_dtype: Any) -> Any:
    """``x`` converted to ``new_dtype`` as NumPy's ``astype`` does (complex to real keeps
    the real part). The result is never weak-typed.

    The cotangent is converted back to ``x``'s dtype when both dtypes are floating-point;
    otherwise (an integer or bool on either side) no gradient flows.
    """
    return bind(convert_element_type_p, x, new_dtype=np.dtype(new_dtype))
