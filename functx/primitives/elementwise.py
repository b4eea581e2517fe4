"""Elementwise primitives: arithmetic, transcendental functions, comparisons, select.

Binary primitives broadcast their operands as NumPy does but need equal dtypes
(functx.numpy promotes); their VJPs sum the cotangent back to each operand's shape.
"""
from __future__ import annotations

from typing import Any, Callable

from functx.ir import AbstractArray
from functx.primitives import reduction as _red
from functx.primitives import shape as _shape
from functx.primitives._util import broadcast_shapes, same_dtypes
from functx.registry import Primitive
from functx.tracing import bind


# -- shape rules and definition helpers ---------------------------------------------------

def unary_aval(x: AbstractArray, **params: Any) -> AbstractArray:
    return x


def make_binary_aval(name: str) -> Callable:
    def rule(x: AbstractArray, y: AbstractArray) -> AbstractArray:
        dtype = same_dtypes(name, x, y)
        shape = broadcast_shapes(name, x.shape, y.shape)
        return AbstractArray(shape, dtype, x.weak_type and y.weak_type)
    return rule


def unary(name: str, impl: Callable) -> Primitive:
    """A new elementwise unary primitive with the same-shape rule and a generic impl."""
    p = Primitive(name)
    p.def_abstract_eval(unary_aval)
    p.def_impl(impl)
    return p


def binary(name: str, impl: Callable) -> Primitive:
    """A new broadcasting binary primitive with a generic impl."""
    p = Primitive(name)
    p.def_abstract_eval(make_binary_aval(name))
    p.def_impl(impl)
    return p


def unbroadcast(ct: Any, aval: Any) -> Any:
    """Sum a cotangent of a broadcast result back to an operand's shape (and no further)."""
    shape = tuple(aval.shape)
    if tuple(ct.shape) == shape:
        return ct
    lead = len(ct.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and ct.shape[lead + i] != 1)
    summed = _red.reduce_sum(ct, axes) if axes else ct
    return _shape.reshape(summed, shape) if tuple(summed.shape) != shape else summed


# -- arithmetic ------------------------------------------------------------------------------

neg_p = unary("neg", lambda xp, x: xp.negative(x))
neg_p.def_vjp(lambda ct, ins, out: (neg(ct),))


def neg(x: Any) -> Any:
    return bind(neg_p, x)


add_p = binary("add", lambda xp, x, y: xp.add(x, y))
add_p.def_vjp(lambda ct, ins, out: (unbroadcast(ct, ins[0]), unbroadcast(ct, ins[1])))


def add(x: Any, y: Any) -> Any:
    return bind(add_p, x, y)


sub_p = binary("sub", lambda xp, x, y: xp.subtract(x, y))
sub_p.def_vjp(lambda ct, ins, out: (unbroadcast(ct, ins[0]), unbroadcast(neg(ct), ins[1])))


def sub(x: Any, y: Any) -> Any:
    return bind(sub_p, x, y)


mul_p = binary("mul", lambda xp, x, y: xp.multiply(x, y))


@mul_p.def_vjp(save_inputs=(0, 1))
def _mul_vjp(ct, ins, out):
    x, y = ins
    return unbroadcast(mul(ct, y), x), unbroadcast(mul(ct, x), y)


def mul(x: Any, y: Any) -> Any:
    return bind(mul_p, x, y)


# -- transcendental ---------------------------------------------------------------------------

sin_p = unary("sin", lambda xp, x: xp.sin(x))
sin_p.def_vjp(lambda ct, ins, out: (mul(ct, cos(ins[0])),), save_inputs=(0,))


def sin(x: Any) -> Any:
    return bind(sin_p, x)


cos_p = unary("cos", lambda xp, x: xp.cos(x))
cos_p.def_vjp(lambda ct, ins, out: (neg(mul(ct, sin(ins[0]))),), save_inputs=(0,))


def cos(x: Any) -> Any:
    return bind(cos_p, x)


exp_p = unary("exp", lambda xp, x: xp.exp(x))
exp_p.def_vjp(lambda ct, ins, out: (mul(ct, out),), save_output=True)


def exp(x: Any) -> Any:
    return bind(exp_p, x)
