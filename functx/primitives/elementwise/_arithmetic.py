"""Arithmetic elementwise primitives: ``neg``, ``abs``, ``sign``, ``add``, ``sub``, ``mul``,
``div``, ``rem``, ``integer_pow``, ``max`` and ``min``.

Part of ``functx.primitives.elementwise`` (see its docstring for dtypes, numerics and the
rules every primitive has); use it through that package. ``pow`` (a real power, whose
gradient needs ``log``) is with the transcendental functions.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from functx.errors import DTypeError
from functx.ir import AbstractArray
from functx.primitives._batching import (
    add_tangents,
    elementwise_batch,
    linear_jvp,
    unary_batch,
)
from functx.primitives.elementwise._common import (
    binary,
    check_dtype_class,
    dtype_of,
    fit_tangent,
    scalar,
    unary,
    unbroadcast,
    real_float,
    scalar_call,
    scalar_float,
)
from functx.primitives.elementwise._comparison import (
    convert_element_type,
    eq,
    floor,
    gt,
    lt,
    select,
)
from functx.registry import Primitive
from functx.registry.rewrite import known_scalar
from functx.registry.scalar import call, where
from functx.tracing import bind


# -- simplification rules (functx.registry.rewrite) ------------------------------------------

def _identity_operand(args: list, out: Any, unit: int, either: bool) -> Any:
    """``x op unit -> x`` (``either``: also ``unit op x``) where ``x`` already has the
    output's shape and dtype: ``x + 0``, ``x - 0``, ``x * 1``, ``x / 1`` (exact for every
    ``x``, NaN and infinities included; ``-0.0 + 0`` gives ``-0.0``, equal to ``0.0``)."""
    pairs = [(args[0], args[1])] + ([(args[1], args[0])] if either else [])
    for x, c in pairs:
        if x.shape == tuple(out.shape) and x.dtype == out.dtype and known_scalar(c) == unit \
                and x.dtype.kind in "fiu":
            return x
    return None


def _involution(args: list, prim: Primitive) -> Any:
    """``f(f(x)) -> x`` for a primitive that is its own inverse (``neg``)."""
    prod = args[0].producer
    return prod.args[0] if prod is not None and prod.prim is prim else None


def _integer_pow_scalar(x: Any, *, y: int) -> Any:
    """``x ** y`` by repeated squaring, as NumPy's integer power of floats (``1 / x**-y``
    for negative ``y``)."""
    n, result, base = y if y >= 0 else -y, None, x
    while n:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if n:
            base = base * base
    result = result if result is not None else x * 0 + 1
    return 1 / result if y < 0 else result


# -- arithmetic ------------------------------------------------------------------------------

neg_p = unary("neg", "negative", "number")
neg_p.def_vjp(lambda ct, ins, out: (neg(ct),))
neg_p.def_jvp(linear_jvp(neg_p))
neg_p.def_step_sum(linear=True)
neg_p.def_batch(unary_batch(neg_p))
neg_p.def_scalar(scalar_float(lambda x: -x))
neg_p.def_simplify(lambda args, out: _involution(args, neg_p))


def neg(x: Any) -> Any:
    """``-x`` (numeric dtypes; integers wrap as in NumPy)."""
    return bind(neg_p, x)


abs_p = Primitive("abs")


@abs_p.def_abstract_eval
def _abs_aval(x: AbstractArray) -> AbstractArray:
    """Real input keeps its dtype; complex64/complex128 give float32/float64 (the modulus)."""
    dt = np.dtype(x.dtype)
    if dt.kind == "c":
        return AbstractArray(x.shape, np.finfo(dt).dtype, x.weak_type)
    check_dtype_class("abs", "ordered", x)
    return x


abs_p.def_impl("abs")


def _abs_slope(x: Any, out: Any = None) -> Any:
    """``d|x|``'s coefficient: ``sign(x)`` for real ``x``; for complex ``z``, ``w = |z| / z``
    (``= conj(z) / |z|``, written without conj, which lives above this module), 0 at 0.

    With it, in JAX's convention, the VJP is ``ct * w`` (so ``grad(abs)(z) = conj(z)/|z| =
    d|z|/dx - i d|z|/dy``) and the JVP is the real tangent ``Re(t * w) = Re(conj(z) t)/|z|``.
    """
    if dtype_of(x).kind != "c":
        return sign(x)
    zero = scalar(x, 0)
    mag = convert_element_type(abs(x) if out is None else out, new_dtype=dtype_of(x))
    return div(mag, select(eq(x, zero), scalar(x, 1), x))


@abs_p.def_vjp(save_inputs=(0,))
def _abs_vjp(ct, ins, out):
    # |z| is recomputed for complex z rather than saved, so that real abs keeps only its
    # input alive for the backward pass.
    x = ins[0]
    if dtype_of(x).kind == "c":
        ct = convert_element_type(ct, new_dtype=dtype_of(x))
    return (mul(ct, _abs_slope(x)),)


@abs_p.def_jvp
def _abs_jvp(tangents, primals, out):
    t, x = tangents[0], primals[0]
    if t is None:
        return None
    d = mul(t, _abs_slope(x, out))
    # complex: the real part (convert_element_type keeps it)
    return convert_element_type(d, new_dtype=dtype_of(out)) if dtype_of(x).kind == "c" else d


abs_p.def_batch(unary_batch(abs_p))
abs_p.def_scalar(scalar_call("abs"))


def abs(x: Any) -> Any:  # noqa: A001 - the contract's name
    """``|x|``: bool, integer and real floating-point ``x`` keep their dtype; complex ``x``
    gives the modulus in the real dtype of its parts (complex128 -> float64).

    The gradient at 0 is 0. For complex ``z`` the gradient follows JAX's convention:
    ``grad(abs)(z) = conj(z) / |z|``.
    """
    return bind(abs_p, x)


sign_p = unary("sign", "sign", "real")
sign_p.def_zero_vjp()
sign_p.def_batch(unary_batch(sign_p))
sign_p.def_scalar(scalar_float(lambda x: where(x > 0, 1, where(x < 0, -1, x))))


def sign(x: Any) -> Any:
    """-1, 0 or 1 by the sign of ``x`` (NaN stays NaN; -0.0 gives 0.0). Zero gradient."""
    return bind(sign_p, x)


add_p = binary("add", "add")
add_p.def_vjp(lambda ct, ins, out, needs: (
    unbroadcast(ct, ins[0]) if needs[0] else None,
    unbroadcast(ct, ins[1]) if needs[1] else None), selective=True)
add_p.def_jvp(lambda tangents, primals, out: fit_tangent(add_tangents(*tangents), out))
add_p.def_batch(elementwise_batch(add_p))
add_p.def_scalar(scalar_float(lambda x, y: x + y))
add_p.def_simplify(lambda args, out: _identity_operand(args, out, 0, either=True))
add_p.sums_operands = True  # (compiler: add(c, dot_general(a, b)) as one accumulating GEMM)


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
        return fit_tangent(tx, out)
    return fit_tangent(neg(ty), out) if tx is None else sub(tx, ty)


sub_p.def_batch(elementwise_batch(sub_p))
sub_p.def_scalar(scalar_float(lambda x, y: x - y))
sub_p.def_simplify(lambda args, out: _identity_operand(args, out, 0, either=False))


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
mul_p.def_scalar(scalar_float(lambda x, y: x * y))
mul_p.def_simplify(lambda args, out: _identity_operand(args, out, 1, either=True))


def mul(x: Any, y: Any) -> Any:
    """``x * y`` with broadcasting (on bool: logical and, as NumPy)."""
    return bind(mul_p, x, y)


def _div_impl(xp, x, y):
    if dtype_of(x).kind in "iu":
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
div_p.def_scalar(scalar_float(lambda x, y: x / y))
div_p.def_simplify(lambda args, out: _identity_operand(args, out, 1, either=False))


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
        return fit_tangent(tx, out)
    ty_term = mul(ty, floor(div(x, y)))
    return neg(ty_term) if tx is None else sub(tx, ty_term)


rem_p.def_batch(elementwise_batch(rem_p))
rem_p.def_scalar(scalar_float(lambda x, y: x % y))  # generators: the sign of y, as NumPy


def rem(x: Any, y: Any) -> Any:
    """NumPy's ``remainder`` (``%``): ``x - floor(x / y) * y``, with the sign of ``y``.

    Integers and real floats. The gradient is 1 for ``x`` and ``-floor(x / y)`` for ``y``
    (away from the jumps at multiples of ``y``).
    """
    return bind(rem_p, x, y)


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
integer_pow_p.def_impl(lambda xp, x, *, y: xp.power(x, dtype_of(x).type(y)))


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
integer_pow_p.def_scalar(scalar_float(_integer_pow_scalar))


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
        return fit_tangent(t, out)
    rule.__doc__ = "The winner's tangent, the mean of both on ties (the VJP's transpose)."
    return rule


max_p = binary("max", "maximum", "ordered")
max_p.def_vjp(_make_minmax_vjp(lambda a, b: gt(a, b)), save_inputs=(0, 1))
max_p.def_jvp(_make_minmax_jvp(lambda a, b: gt(a, b)))
max_p.def_batch(elementwise_batch(max_p))
max_p.def_scalar(scalar_float(lambda x, y: where((x > y) | x.ne(x), x, y)))


def max(x: Any, y: Any) -> Any:  # noqa: A001 - the contract's name
    """Elementwise maximum (NaN propagates). On ties each operand gets half the cotangent;
    where the result is NaN neither gets any."""
    return bind(max_p, x, y)


min_p = binary("min", "minimum", "ordered")
min_p.def_vjp(_make_minmax_vjp(lambda a, b: lt(a, b)), save_inputs=(0, 1))
min_p.def_jvp(_make_minmax_jvp(lambda a, b: lt(a, b)))
min_p.def_batch(elementwise_batch(min_p))
min_p.def_scalar(scalar_float(lambda x, y: where((x < y) | x.ne(x), x, y)))


def min(x: Any, y: Any) -> Any:  # noqa: A001 - the contract's name
    """Elementwise minimum; see :func:`max` for NaN and tie behaviour."""
    return bind(min_p, x, y)
